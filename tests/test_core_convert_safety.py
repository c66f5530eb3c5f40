"""Issue 13, section 1: `perckit convert` never deletes or hides what it did not write; section 5: a corrupt
`.perckit_export.json` is a documented error. Every build here is RefCOCO-M's sample release (fast)."""

import hashlib
import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import datasets
import pytest
import yaml

from perckit.errors import InputNotFoundError, OptionError, PerckitError, ReleaseFormatError
from perckit.export import convert

STATE = ".perckit_export.json"
QUIET = dict(progress=False, log=lambda m: None)


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    from perckit.samples import write_release

    home = tmp_path_factory.mktemp("safety_release_home")  # the release's parent holds nothing else
    return write_release("refcoco_m", home / "release").root


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("safety_cache")


@pytest.fixture(scope="module")
def template(release, cache, tmp_path_factory):
    """A one-config export (expressions) to copy from."""
    out = tmp_path_factory.mktemp("safety_template") / "export"
    convert("refcoco_m", release, "expressions", out, cache_dir=cache, **QUIET)
    return out


def copy_export(template: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(template, dst, symlinks=True)
    return dst


def snapshot(root: Path, skip: tuple = ()) -> dict:
    """Every entry under ``root`` (kind, mode, content hash or link target), to prove nothing changed."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in skip]
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            if p in skip:
                continue
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", stat.S_IMODE(st.st_mode), hashlib.sha256(Path(p).read_bytes()).hexdigest())
            else:
                out[rel] = ("other" if not stat.S_ISDIR(st.st_mode) else "dir", stat.S_IMODE(st.st_mode))
    return out


@pytest.fixture
def no_build(monkeypatch):
    """Any build attempt fails the test: refusals must come before the build."""

    def refuse(self, *a, **k):
        raise AssertionError("the build started although the options were refused")

    monkeypatch.setattr(datasets.DatasetBuilder, "download_and_prepare", refuse)


def add_user_files(out: Path) -> dict:
    """Files a user might add inside an export: top level, inside a config folder, nested, a link."""
    (out / "notes.txt").write_text("my notes\n")
    (out / "data" / "mine.txt").write_text("mine, beside the shards\n")
    (out / "extra" / "deep").mkdir(parents=True)
    (out / "extra" / "deep" / "x.bin").write_bytes(os.urandom(1000))
    os.symlink("notes.txt", out / "link-to-notes")
    return {k: v for k, v in snapshot(out).items() if k.split(os.sep)[0] in ("notes.txt", "extra", "link-to-notes") or k == os.path.join("data", "mine.txt")}


def check_export(out: Path) -> set:
    """``out`` is one consistent export: card and record list the same configs, every listed shard exists, the
    folders hold no other shard the card's glob would pick up, and the row counts match. Returns its configs."""
    import pyarrow.parquet as pq

    state = json.loads((out / STATE).read_text())
    meta = yaml.safe_load((out / "README.md").read_text().split("---")[1])
    assert {c["config_name"] for c in meta["configs"]} == set(state["configs"])
    listed = meta["dataset_info"] if isinstance(meta["dataset_info"], list) else [meta["dataset_info"]]  # one config: one dict
    infos = {i.get("config_name", next(iter(state["configs"]))): i for i in listed}
    for name, c in state["configs"].items():
        for s in c["splits"]:
            on_disk = sorted(p.relative_to(out).as_posix() for p in (out / c["dir"]).glob(f"{s['name']}-*"))
            assert on_disk == sorted(s["files"]), (name, on_disk, s["files"])
            assert sum(pq.ParquetFile(out / f).metadata.num_rows for f in s["files"]) == s["num_examples"]
            assert [x["num_examples"] for x in infos[name]["splits"] if x["name"] == s["name"]] == [s["num_examples"]]
    return set(state["configs"])


def leftovers(parent: Path, name: str = "export") -> list:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}.tmp-") or p.name.startswith(f".{name}.old-"))


# --- refused before any build, nothing changed ---------------------------------------------------------------


def _refusal_case(case: str, tmp: Path, release: Path, cache: Path, template: Path):
    """(output, data_dir, cache_dir, expected error, text in the message, folder to snapshot)."""
    if case == "release-folder":
        return release, release, cache, OptionError, "is the release folder", release.parent
    if case == "release-parent":
        return release.parent, release, cache, OptionError, "contains the release folder", release.parent
    if case == "release-grandparent":
        return release.parent.parent, release, cache, OptionError, "contains the release folder", release.parent
    if case == "inside-release":
        return release / "export", release, cache, OptionError, "inside it", release.parent
    if case == "inside-release-subfolder":
        return release / "data" / "x", release, cache, OptionError, "inside it", release.parent
    if case == "release-through-a-link":
        os.symlink(release, tmp / "rel-link")
        return tmp / "rel-link", release, cache, OptionError, "is the release folder", release.parent
    if case == "cache-folder":
        (tmp / "cache").mkdir()
        (tmp / "cache" / "blob").write_text("cached")
        return tmp / "cache", release, tmp / "cache", OptionError, "is the cache folder", tmp
    if case == "cache-inside":
        (tmp / "export" / "cache").mkdir(parents=True)
        return tmp / "export", release, tmp / "export" / "cache", OptionError, "contains the cache folder", tmp
    if case == "user-folder":
        (tmp / "home").mkdir()
        (tmp / "home" / "thesis.tex").write_text("years of work")
        (tmp / "home" / "photos").mkdir()
        (tmp / "home" / "photos" / "a.jpg").write_bytes(b"\xff\xd8 jpeg")
        return tmp / "home", release, cache, OptionError, "without .perckit_export.json", tmp
    if case == "user-folder-hidden-file-only":
        (tmp / "home").mkdir()
        (tmp / "home" / ".bashrc").write_text("alias ll='ls -l'\n")
        return tmp / "home", release, cache, OptionError, "without .perckit_export.json", tmp
    if case == "a-file":
        (tmp / "out.txt").write_text("keep")
        return tmp / "out.txt", release, cache, OptionError, "got a file", tmp
    if case == "under-a-file":
        (tmp / "out.txt").write_text("keep")
        return tmp / "out.txt" / "export", release, cache, OptionError, "under the file", tmp
    if case == "dangling-link":
        os.symlink(tmp / "nowhere", tmp / "out")
        return tmp / "out", release, cache, OptionError, "a symbolic link to a missing path", tmp
    if case == "read-only-empty-folder":
        (tmp / "ro").mkdir()
        os.chmod(tmp / "ro", 0o555)
        return tmp / "ro", release, cache, OptionError, "read-only", tmp
    if case == "read-only-export":
        copy_export(template, tmp / "export")
        os.chmod(tmp / "export", 0o555)
        return tmp / "export", release, cache, OptionError, "read-only", tmp
    if case == "read-only-parent":
        (tmp / "locked").mkdir()
        os.chmod(tmp / "locked", 0o555)
        return tmp / "locked" / "export", release, cache, OptionError, "read-only", tmp
    if case == "export-of-another-benchmark":
        out = copy_export(template, tmp / "export")
        state = json.loads((out / STATE).read_text())
        state["benchmark"] = "m4seg"
        (out / STATE).write_text(json.dumps(state))
        return out, release, cache, OptionError, "got an export of m4seg", tmp
    if case == "data-dir-missing":
        return tmp / "export", tmp / "no-release", cache, InputNotFoundError, "does not exist", tmp
    if case == "data-dir-a-file":
        (tmp / "rel.txt").write_text("x")
        return tmp / "export", tmp / "rel.txt", cache, InputNotFoundError, "got a file", tmp
    raise KeyError(case)


REFUSALS = ["release-folder", "release-parent", "release-grandparent", "inside-release", "inside-release-subfolder",
            "release-through-a-link", "cache-folder", "cache-inside", "user-folder", "user-folder-hidden-file-only", "a-file", "under-a-file",
            "dangling-link", "read-only-empty-folder", "read-only-export", "read-only-parent", "export-of-another-benchmark",
            "data-dir-missing", "data-dir-a-file"]


@pytest.mark.parametrize("case", REFUSALS)
def test_refused_output_changes_nothing(case, tmp_path, release, cache, template, no_build):
    output, data_dir, cache_dir, error, text, watch = _refusal_case(case, tmp_path, release, cache, template)
    before = snapshot(watch)
    try:
        with pytest.raises(error) as info:
            convert("refcoco_m", data_dir, None, output, cache_dir=cache_dir, **QUIET)
        assert text in str(info.value) and "\n" not in str(info.value)
        assert snapshot(watch) == before
        parent = Path(output).parent
        if parent.is_dir():
            assert [p.name for p in parent.iterdir() if p.name.startswith((f".{Path(output).name}.", ".perckit-"))] == []
    finally:
        for p in (tmp_path / "ro", tmp_path / "locked", tmp_path / "export"):
            if p.is_dir():
                os.chmod(p, 0o755)


@pytest.mark.parametrize("case", ["release-folder", "user-folder", "a-file", "read-only-export", "data-dir-missing"])
def test_cli_refusal_is_one_line_before_the_build(case, tmp_path, release, cache, template, no_build, capsys):
    from perckit.__main__ import main

    output, data_dir, cache_dir, _, text, watch = _refusal_case(case, tmp_path, release, cache, template)
    before = snapshot(watch)
    try:
        code = main(["convert", "refcoco_m", "--data-dir", str(data_dir), "--output", str(output), "--cache-dir", str(cache_dir)])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and text in err and "Traceback" not in err
        assert snapshot(watch) == before
    finally:
        if (tmp_path / "export").is_dir():
            os.chmod(tmp_path / "export", 0o755)


def test_cli_checks_every_config_before_the_first_build(tmp_path, release, cache, no_build, capsys):
    from perckit.__main__ import main

    code = main(["convert", "refcoco_m", "--data-dir", str(release), "--config", "expressions", "--config", "nope",
                 "--output", str(tmp_path / "export"), "--cache-dir", str(cache)])
    assert code == 2 and "unknown config 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "export").exists()


@pytest.mark.parametrize("size", ["0MB", "-5MB", "abc", "", "1.5GB", "MB", 0, -1, True, None, "9" * 40])
def test_bad_max_shard_size_is_refused_before_the_build(size, tmp_path, release, cache, no_build):
    with pytest.raises(OptionError, match="--max-shard-size: expected a positive size"):
        convert("refcoco_m", release, None, tmp_path / "export", max_shard_size=size, cache_dir=cache, **QUIET)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("size", ["-5MB", "abc", "0MB"])
def test_cli_bad_max_shard_size(size, tmp_path, release, cache, no_build, capsys):
    from perckit.__main__ import main

    code = main(["convert", "refcoco_m", "--data-dir", str(release), "--output", str(tmp_path / "e"), "--cache-dir", str(cache), f"--max-shard-size={size}"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --max-shard-size: expected a positive size") and err.count("\n") == 1


def test_push_checks_its_output_before_converting(tmp_path, release, cache, no_build, capsys, monkeypatch):
    from helpers.fake_hub import HubRecorder

    from perckit.__main__ import main

    hub = HubRecorder().install(monkeypatch)  # --skip-convert checks the login before it reads the folder

    before = snapshot(release.parent)
    code = main(["push", "refcoco_m", "--repo-id", "org/x", "--data-dir", str(release), "--output", str(release.parent), "--cache-dir", str(cache)])
    err = capsys.readouterr().err
    assert code == 2 and "contains the release folder" in err and err.count("\n") == 1
    assert snapshot(release.parent) == before
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "mine.txt").write_text("x")
    assert main(["push", "refcoco_m", "--repo-id", "org/x", "--data-dir", str(release), "--output", str(tmp_path / "e"), "--max-shard-size", "0MB"]) == 2
    assert "--max-shard-size" in capsys.readouterr().err
    assert main(["push", "refcoco_m", "--repo-id", "org/x", "--output", str(tmp_path / "e"), "--skip-convert"]) == 2
    assert "is not a perckit export" in capsys.readouterr().err
    assert (tmp_path / "e" / "mine.txt").read_text() == "x" and hub.calls == []


def test_a_numeric_max_shard_size_is_bytes(tmp_path, release, cache):
    from perckit.export import parse_shard_size

    assert parse_shard_size("20000") == 20000 and parse_shard_size("10KiB") == 10240 and parse_shard_size(5) == 5
    convert("refcoco_m", release, "expressions", tmp_path / "e", max_shard_size="20000", cache_dir=cache, **QUIET)
    assert len(list((tmp_path / "e" / "data").glob("validation-*"))) > 1


# --- what convert may replace ---------------------------------------------------------------------------------


def test_user_files_inside_the_export_survive_reconverts(tmp_path, release, cache, template):
    out = copy_export(template, tmp_path / "export")
    mine = add_user_files(out)
    ino = os.stat(out / "notes.txt").st_ino
    convert("refcoco_m", release, "expressions", out, cache_dir=cache, **QUIET)  # replaces data/, where mine.txt lives
    convert("refcoco_m", release, "images", out, cache_dir=cache, **QUIET)
    convert("refcoco_m", release, "expressions", out, max_shard_size="20KB", cache_dir=cache, **QUIET)  # other shard names
    after = snapshot(out)
    assert {k: after.get(k) for k in mine} == mine
    assert os.stat(out / "notes.txt").st_ino == ino  # the same file, not a copy
    assert check_export(out) == {"expressions", "images"}
    assert leftovers(tmp_path) == []
    ds = datasets.load_dataset(str(out), "expressions", split="validation", cache_dir=str(tmp_path / "c2"))
    assert ds.num_rows == 47


def test_an_empty_folder_becomes_an_export(tmp_path, release, cache):
    (tmp_path / "export").mkdir()
    convert("refcoco_m", release, "expressions", tmp_path / "export", cache_dir=cache, **QUIET)
    assert check_export(tmp_path / "export") == {"expressions"}
    assert leftovers(tmp_path) == []


def test_output_through_a_link_keeps_the_link(tmp_path, release, cache, template):
    real = copy_export(template, tmp_path / "real")
    os.symlink(real, tmp_path / "export")
    convert("refcoco_m", release, "images", tmp_path / "export", cache_dir=cache, **QUIET)
    assert (tmp_path / "export").is_symlink() and check_export(real) == {"expressions", "images"}


def test_a_user_file_where_the_new_config_goes_is_refused_and_kept(tmp_path, release, cache, template):
    out = copy_export(template, tmp_path / "export")
    (out / "images").write_text("my file called images")
    before = snapshot(out)
    with pytest.raises(OptionError, match="got a file it did not write"):
        convert("refcoco_m", release, "images", out, cache_dir=cache, **QUIET)
    assert snapshot(out) == before and leftovers(tmp_path) == []


def test_export_folders_get_normal_permissions(tmp_path, release, cache):
    old = os.umask(0o027)
    try:
        convert("refcoco_m", release, "expressions", tmp_path / "a", cache_dir=cache, **QUIET)
        convert("refcoco_m", release, "images", tmp_path / "a", cache_dir=cache, **QUIET)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "a").st_mode) == 0o750
    assert stat.S_IMODE(os.stat(tmp_path / "a" / "images").st_mode) == 0o750
    assert stat.S_IMODE(os.stat(tmp_path / "a" / "README.md").st_mode) == 0o640
    old = os.umask(0o022)
    try:
        convert("refcoco_m", release, "expressions", tmp_path / "b", cache_dir=cache, **QUIET)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "b").st_mode) == 0o755


# --- kills ------------------------------------------------------------------------------------------------------


def _kill_child(out: Path, release: Path, cache: Path, k: int, fallback: bool, label_file: Path) -> int:
    """Fork; the child converts `images` into ``out`` and dies (os._exit) at filesystem step ``k`` of the swap
    (k = 0: in the middle of the build). Returns the child's exit code (0: finished before step k)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover (child)
        code = 1
        try:
            from perckit import export
            from perckit.export import swap as export_swap

            steps = [0]

            def checkpoint(label):
                steps[0] += 1
                if steps[0] == k:
                    label_file.write_text(label)
                    os._exit(86)

            export_swap._checkpoint = checkpoint
            if fallback:
                export_swap.exchange = lambda a, b: False
            if k == 0:
                real = export.write_split

                def die_midway(ds, folder, *a, **kw):
                    real(ds, folder, *a, **kw)
                    label_file.write_text("build")
                    os._exit(86)

                export.write_split = die_midway
            convert("refcoco_m", release, "images", out, cache_dir=cache, **QUIET)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.slow
@pytest.mark.parametrize("fallback", [False, True], ids=["renameat2-exchange", "two-renames-fallback"])
def test_a_kill_at_every_step_keeps_an_export_and_the_next_run_recovers(fallback, tmp_path, release, cache, template):
    from perckit.export import swap as export_swap

    base = copy_export(template, tmp_path / "base")
    mine = add_user_files(base)
    convert("refcoco_m", release, "images", tmp_path / "warm", cache_dir=cache, **QUIET)  # the child's build hits the cache
    labels = []
    k = 0
    while True:
        parent = tmp_path / f"k{k}"
        parent.mkdir()
        out = copy_export(base, parent / "export")
        label_file = parent / "label"
        code = _kill_child(out, release, cache, k, fallback, label_file)
        if code == 0:
            break
        assert code == 86, f"step {k}: the child failed ({code})"
        label = label_file.read_text()
        labels.append(label)
        # right after the kill: the export path shows one complete export (old or new) with the user's files,
        # except in the fallback's window between its two renames
        if out.exists():
            assert check_export(out) in ({"expressions"}, {"expressions", "images"}), (k, label)
            after = snapshot(out)
            assert {p: after.get(p) for p in mine} == mine, (k, label)
        else:
            assert fallback and label == "rename staging into place", (k, label)
        # the next run recovers: the lock, the recovery, then a convert that lands
        with export_swap.export_lock(out):
            export_swap.recover(out, log=lambda m: None)
        assert check_export(out) in ({"expressions"}, {"expressions", "images"}), (k, label)
        assert leftovers(parent) == [], (k, label)
        convert("refcoco_m", release, "images", out, cache_dir=cache, **QUIET)
        assert check_export(out) == {"expressions", "images"}
        after = snapshot(out)
        assert {p: after.get(p) for p in mine} == mine, (k, label)
        assert leftovers(parent) == []
        k += 1
    print(f"{len(labels)} kill points:", ", ".join(labels))
    assert k > 10 and "exchange" in labels and "write record" in labels  # every step was reached
    if fallback:
        assert "rename export aside" in labels and "rename staging into place" in labels
    ds = datasets.load_dataset(str(tmp_path / f"k{k - 1}" / "export"), "images", split="validation", cache_dir=str(tmp_path / "c2"))
    assert ds.num_rows == 12


def test_a_kill_during_a_first_export_is_recovered_by_the_next_run(tmp_path, release, cache):
    convert("refcoco_m", release, "images", tmp_path / "warm", cache_dir=cache, **QUIET)
    for k in range(0, 10):
        parent = tmp_path / f"k{k}"
        parent.mkdir()
        out = parent / "export"
        if _kill_child(out, release, cache, k, False, parent / "label") == 0:
            break
        assert not out.exists() or check_export(out) == {"images"}, k
        convert("refcoco_m", release, "expressions", out, cache_dir=cache, **QUIET)
        assert check_export(out) in ({"expressions"}, {"expressions", "images"}), k
        assert leftovers(parent) == []
    assert k > 3


def test_a_read_only_filesystem_is_refused_before_the_build(tmp_path, release, cache, template, no_build, monkeypatch):
    import errno

    out = copy_export(template, tmp_path / "export")
    before = snapshot(tmp_path)
    real = os.mkdir

    def mkdir(path, *a, **k):
        if ".tmp-" in os.fspath(path):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))
        return real(path, *a, **k)

    monkeypatch.setattr(os, "mkdir", mkdir)
    with pytest.raises(OptionError, match="expected a place where perckit can write, got Read-only file system"):
        convert("refcoco_m", release, "images", out, cache_dir=cache, **QUIET)
    monkeypatch.undo()
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith(".perckit-")} == before


def test_a_kill_between_two_folder_renames_leaves_the_export_visible(tmp_path, release, cache, template):
    """The old swap renamed the export aside, then the new one in: a kill in between left no export."""
    out = copy_export(template, tmp_path / "export")
    pid = os.fork()
    if pid == 0:  # pragma: no cover (child)
        code = 1
        try:
            real_replace, real_rename = os.replace, os.rename

            def dying(real):
                def rename(src, dst, *a, **k):
                    real(src, dst, *a, **k)
                    if os.path.isdir(dst) and Path(src).name == "export":
                        os._exit(86)  # the export folder was just moved away

                return rename

            os.replace, os.rename = dying(real_replace), dying(real_rename)
            convert("refcoco_m", release, "images", out, cache_dir=cache, **QUIET)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0  # nothing renames the export aside any more
    assert check_export(out) == {"expressions", "images"}


def test_an_exception_at_every_step_leaves_one_complete_export(tmp_path, release, cache, template, monkeypatch):
    """An exception (not a kill) at step k: before the swap the export is untouched and nothing is left over;
    after it the new export is in place and the next run's recovery removes what is left."""
    from perckit.export import swap as export_swap

    base = copy_export(template, tmp_path / "base")
    mine = add_user_files(base)
    swapped = False
    k = 1
    while True:
        parent = tmp_path / f"k{k}"
        parent.mkdir()
        out = copy_export(base, parent / "export")
        before = snapshot(out)
        steps = [0]

        def checkpoint(label, k=k):
            steps[0] += 1
            if steps[0] == k:
                raise KeyboardInterrupt(label)

        monkeypatch.setattr(export_swap, "_checkpoint", checkpoint)
        try:
            convert("refcoco_m", release, "images", out, cache_dir=cache, **QUIET)
            break
        except KeyboardInterrupt as e:
            label = str(e)
        finally:
            monkeypatch.undo()
        if not swapped:
            assert snapshot(out) == before, (k, label)
            assert leftovers(parent) == [], (k, label)
        else:
            assert check_export(out) == {"expressions", "images"}, (k, label)
            after = snapshot(out)
            assert {p: after.get(p) for p in mine} == mine, (k, label)
            convert("refcoco_m", release, "images", out, cache_dir=cache, **QUIET)
            assert leftovers(parent) == [], (k, label)
        swapped = swapped or label == "exchange"
        k += 1
    assert swapped and k > 10


# --- concurrency ------------------------------------------------------------------------------------------------

_CONCURRENT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from perckit import export
    from perckit.__main__ import main

    me, ready_dir = sys.argv[1], Path(sys.argv[2])
    real = export.write_split

    def write_split(*a, **k):  # both builds finish before either convert goes on: the worst overlap
        out = real(*a, **k)
        (ready_dir / me).write_text("ready")
        deadline = time.time() + 60
        while len(list(ready_dir.iterdir())) < 2 and time.time() < deadline:
            time.sleep(0.02)
        return out

    export.write_split = write_split
    sys.exit(main(["convert", "refcoco_m", "--data-dir", sys.argv[3], "--config", me, "--output", sys.argv[4], "--cache-dir", sys.argv[5]]))
""")


@pytest.mark.slow
def test_two_concurrent_converts_of_different_configs_both_land(tmp_path, release, cache):
    out = tmp_path / "export"  # both start from no export: without the lock, whichever swaps last drops the other
    ready = tmp_path / "ready"
    ready.mkdir()
    env = dict(os.environ, HF_DATASETS_DISABLE_PROGRESS_BARS="1")
    procs = [subprocess.Popen([sys.executable, "-c", _CONCURRENT, config, str(ready), str(release), str(out), str(cache)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for config in ("images", "expressions")]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, results):
        assert p.returncode == 0, err.decode()[-2000:]
    assert check_export(out) == {"expressions", "images"}
    assert leftovers(tmp_path) == []


def test_a_held_lock_makes_a_convert_wait_then_refuse(tmp_path, release, cache, template, monkeypatch):
    from perckit.export import swap as export_swap

    out = copy_export(template, tmp_path / "export")
    before = snapshot(out)
    monkeypatch.setattr(export_swap, "LOCK_TIMEOUT", 0.2)
    with export_swap.export_lock(out.resolve()):
        with pytest.raises(OptionError, match="another perckit convert"):
            convert("refcoco_m", release, "images", out, cache_dir=cache, **QUIET)
    assert snapshot(out) == before and leftovers(tmp_path) == []


# --- recovery only touches perckit's own leftovers ---------------------------------------------------------------


def test_recovery_removes_dead_builds_and_spares_everything_else(tmp_path, release, cache, template):
    import filelock

    from perckit.export import swap as export_swap

    out = copy_export(template, tmp_path / "export")
    dead = tmp_path / ".export.tmp-0123456789ab"
    (dead / "images").mkdir(parents=True)
    (dead / "images" / "validation-00000-of-00001.parquet").write_bytes(b"half")
    (dead / export_swap.BUILD_MARKER).write_text("")
    alive = tmp_path / ".export.tmp-aaaaaaaaaaaa"
    alive.mkdir()
    lock = filelock.FileLock(str(alive / export_swap.BUILD_MARKER), timeout=0)
    lock.acquire()
    (alive / "shard").write_bytes(b"in progress")
    users = {tmp_path / ".export.tmp-bbbbbbbbbbbb": "no marker, no record", tmp_path / ".export.old-mine": "not perckit's name",
             tmp_path / ".other.tmp-cccccccccccc": "another export's name"}
    for p, text in users.items():
        p.mkdir()
        (p / "file.txt").write_text(text)
    try:
        convert("refcoco_m", release, "images", out, cache_dir=cache, **QUIET)
        assert not dead.exists()
        assert (alive / "shard").read_bytes() == b"in progress"
        for p, text in users.items():
            assert (p / "file.txt").read_text() == text
        assert check_export(out) == {"expressions", "images"}
    finally:
        lock.release()


def test_recovery_brings_back_an_export_lost_between_two_renames(tmp_path, release, cache, template):
    out = copy_export(template, tmp_path / "export")
    add_user_files(out)
    before = snapshot(out)
    os.rename(out, tmp_path / ".export.old-0123456789ab")
    convert("refcoco_m", release, "images", out, cache_dir=cache, **QUIET)
    after = snapshot(out)
    assert all(after.get(k) == v for k, v in before.items() if not k.startswith(("README", STATE)))
    assert check_export(out) == {"expressions", "images"} and leftovers(tmp_path) == []


def test_an_old_copy_with_a_changed_user_file_is_kept_not_deleted(tmp_path, release, cache, template):
    out = copy_export(template, tmp_path / "export")
    old = copy_export(template, tmp_path / ".export.old-0123456789ab")
    (out / "notes.txt").write_text("version in the export")
    (old / "notes.txt").write_text("another version, only in the old copy")
    logs = []
    convert("refcoco_m", release, "images", out, cache_dir=cache, progress=False, log=logs.append)
    assert (old / "notes.txt").read_text() == "another version, only in the old copy" and (old / STATE).is_file()
    assert (out / "notes.txt").read_text() == "version in the export"
    assert any("kept" in m and "notes.txt" in m for m in logs)


# --- corrupt .perckit_export.json --------------------------------------------------------------------------------


def _corrupt(out: Path, case: str, victim: Path) -> str:
    state = json.loads((out / STATE).read_text())
    c = state["configs"]["expressions"]
    if case == "not-json":
        return "{not json"
    if case == "truncated":
        return (out / STATE).read_text()[:100]
    if case == "a-list":
        return "[]"
    if case == "duplicate-key":
        return '{"benchmark": "refcoco_m", "benchmark": "refcoco_m", "configs": {}}'
    if case == "nested-deep":
        return "[" * 100000 + "]" * 100000
    if case == "not-utf8":
        return "\udcff"
    if case == "configs-a-list":
        state["configs"] = []
    elif case == "unknown-benchmark":
        state["benchmark"] = "../etc"
    elif case == "version-from-the-future":
        state["version"] = 99
    elif case == "format-unknown":
        state["format"] = "something-else"
    elif case == "dir-dotdot":
        c["dir"] = "../" + victim.name
    elif case == "dir-absolute":
        c["dir"] = str(victim)
    elif case == "dir-etc":
        c["dir"] = "/etc"
    elif case == "dir-backslash-dotdot":
        c["dir"] = "..\\" + victim.name
    elif case == "dir-another-config":
        c["dir"] = "images"
    elif case == "dir-readme":
        c["dir"] = "README.md"
    elif case == "config-name-dotdot":
        state["configs"] = {"../x": c}
    elif case == "file-dotdot":
        c["splits"][0]["files"] = [f"data/../../{victim.name}/secret.parquet"]
    elif case == "file-absolute":
        c["splits"][0]["files"] = [str(victim / "secret.parquet")]
    elif case == "file-outside-its-folder":
        c["splits"][0]["files"] = [".perckit_export.json"]
    elif case == "num-examples-a-string":
        c["splits"][0]["num_examples"] = "47"
    elif case == "num-examples-negative":
        c["splits"][0]["num_examples"] = -1
    elif case == "num-bytes-nan":
        c["splits"][0]["num_bytes"] = float("nan")
    elif case == "splits-an-object":
        c["splits"] = {"validation": 1}
    elif case == "features-garbage":
        c["features"] = {"image": {"_type": "NoSuchFeature"}}
    elif case == "features-a-string":
        c["features"] = "x"
    elif case == "extra-key":
        state["delete"] = ["/"]
    elif case == "two-defaults":
        state["configs"]["images"] = dict(c, dir="data")
    else:
        raise KeyError(case)
    return json.dumps(state)


CORRUPT = ["not-json", "truncated", "a-list", "duplicate-key", "nested-deep", "not-utf8", "configs-a-list", "unknown-benchmark",
           "version-from-the-future", "format-unknown", "dir-dotdot", "dir-absolute", "dir-etc", "dir-backslash-dotdot",
           "dir-another-config", "dir-readme", "config-name-dotdot", "file-dotdot", "file-absolute", "file-outside-its-folder",
           "num-examples-a-string", "num-examples-negative", "num-bytes-nan", "splits-an-object", "features-garbage",
           "features-a-string", "extra-key", "two-defaults"]


@pytest.mark.parametrize("case", CORRUPT)
def test_a_corrupt_state_file_is_a_documented_error(case, tmp_path, release, cache, template, no_build):
    from perckit.export.push import push_export  # checks the whole record before any Hub call

    out = copy_export(template, tmp_path / "export")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "secret.parquet").write_text("not yours")
    text = _corrupt(out, case, victim)
    (out / STATE).write_bytes(text.encode("utf-8", "surrogateescape"))
    before = snapshot(tmp_path)
    with pytest.raises(ReleaseFormatError) as info:
        convert("refcoco_m", release, None, out, cache_dir=cache, **QUIET)
    assert str(out / STATE) in str(info.value) and "expected" in str(info.value)
    with pytest.raises(ReleaseFormatError) as info:
        push_export(out, "org/x")
    assert str(out / STATE) in str(info.value)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("case", ["a-fifo", "a-folder", "a-link-out-of-the-export", "over-the-size-cap"])
def test_a_state_file_that_is_not_a_small_regular_file_is_refused(case, tmp_path, release, cache, template, no_build):
    from perckit.export import state as export_state

    out = copy_export(template, tmp_path / "export")
    (out / STATE).unlink()
    if case == "a-fifo":
        os.mkfifo(out / STATE)
    elif case == "a-folder":
        (out / STATE).mkdir()
    elif case == "a-link-out-of-the-export":
        (tmp_path / "elsewhere.json").write_text(template.joinpath(STATE).read_text())
        os.symlink(tmp_path / "elsewhere.json", out / STATE)
    else:
        (out / STATE).write_bytes(b" " * (export_state.MAX_STATE_BYTES + 1))
    before = snapshot(tmp_path)
    with pytest.raises(ReleaseFormatError, match=STATE):
        convert("refcoco_m", release, None, out, cache_dir=cache, **QUIET)
    assert snapshot(tmp_path) == before


def test_cli_corrupt_state_is_one_line(tmp_path, release, cache, template, no_build, capsys, monkeypatch):
    from helpers.fake_hub import HubRecorder

    from perckit.__main__ import main

    HubRecorder().install(monkeypatch)  # push checks the login first (no network in tests)

    out = copy_export(template, tmp_path / "export")
    (out / STATE).write_text('{"configs": {"expressions": {"dir": "/etc"}}}')
    for argv in (["convert", "refcoco_m", "--data-dir", str(release), "--output", str(out), "--cache-dir", str(cache)],
                 ["push", "refcoco_m", "--repo-id", "org/x", "--output", str(out), "--skip-convert"]):
        assert main(argv) == 1  # a corrupt record is a data error (exit 1); usage errors exit 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {str(out / STATE)!r}") and err.count("\n") == 1 and "Traceback" not in err


def test_push_refuses_a_shard_that_links_out_of_the_export(tmp_path, template):
    from perckit.export.push import push_export  # checks the whole record before any Hub call

    out = copy_export(template, tmp_path / "export")
    (tmp_path / "private.bin").write_bytes(b"ssh key")
    shard = next((out / "data").glob("*.parquet"))
    shard.unlink()
    os.symlink(tmp_path / "private.bin", shard)
    with pytest.raises(ReleaseFormatError, match="symbolic link leaves the root"):
        push_export(out, "org/x")
    shard.unlink()
    os.mkfifo(shard)
    with pytest.raises(ReleaseFormatError, match="expected a regular file"):
        push_export(out, "org/x")
    shard.unlink()
    with pytest.raises(InputNotFoundError, match="the export is incomplete"):
        push_export(out, "org/x")


def test_an_export_written_before_the_format_key_is_still_read(tmp_path, release, cache, template):
    from perckit.export.state import read_state

    out = copy_export(template, tmp_path / "export")
    state = json.loads((out / STATE).read_text())
    assert state["format"] == "perckit-export" and state["version"] == 2
    v2_config = {"kind", "preview", "viewer", "description", "parent"}
    v2_split = {"max_row_bytes", "max_row_group_bytes", "max_page_bytes"}
    configs = {name: {**{k: v for k, v in c.items() if k not in v2_config},
                      "splits": [{k: v for k, v in s.items() if k not in v2_split} for s in c["splits"]]}
               for name, c in state["configs"].items()}
    legacy = {"configs": configs, "benchmark": state["benchmark"]}  # what perckit wrote before the record had versions
    (out / STATE).write_text(json.dumps(legacy, indent=2))
    assert read_state(out)["configs"].keys() == {"expressions"}
    convert("refcoco_m", release, "images", out, cache_dir=cache, **QUIET)
    assert check_export(out) == {"expressions", "images"}


def test_every_error_here_is_a_perckit_error():
    """Every ``raise`` in the convert / push modules raises a documented perckit error (never a bare ValueError,
    TypeError or an assert; OSError only for a failing system call): an AST scan of the exception each one names,
    resolved in its module or the builtins."""
    import ast
    import builtins
    import importlib

    checked = 0
    for name in ("export", "export.state", "export.swap", "export.push"):
        module = importlib.import_module(f"perckit.{name}")
        tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
        assert not [n for n in ast.walk(tree) if isinstance(n, ast.Assert)], f"perckit.{name} validates with assert"
        for node in ast.walk(tree):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue  # a bare re-raise
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(target, ast.Name) and target.id in {"e", "exc", "error", "err"}:
                continue  # re-raising a caught exception
            if isinstance(target, ast.Call) or not isinstance(target, (ast.Name, ast.Attribute)):
                continue  # a factory call such as _fail(...), checked through its own raise
            first, *rest = ast.unparse(target).split(".")
            obj = getattr(module, first, None) or getattr(builtins, first, None)
            for part in rest:
                obj = getattr(obj, part, None) if obj is not None else None
            if obj is None or not isinstance(obj, type):
                continue  # a name bound at run time (e.g. the error class passed in)
            checked += 1
            # OSError: a failing system call reported as the os module does (the CLI prints it as one line)
            assert issubclass(obj, PerckitError) or obj is OSError, f"perckit.{name} line {node.lineno} raises {obj.__name__}, not a PerckitError"
    assert checked >= 10


def test_demo_refuses_an_output_folder_it_did_not_write(tmp_path):
    """The demo empties sub-folders of its --output (export/, cache/, <benchmark>/): a folder that is not a previous
    demo output is refused before anything is written, and a previous demo output is accepted again."""
    from perckit.demo import MARKER, claim_output
    from perckit.errors import OptionError

    user = tmp_path / "thesis"
    (user / "export").mkdir(parents=True)
    (user / "export" / "chapter1.tex").write_text("mine")
    with pytest.raises(OptionError, match="expected an empty folder or a previous demo output"):
        claim_output(user)
    assert (user / "export" / "chapter1.tex").read_text() == "mine" and not (user / MARKER).exists()
    (tmp_path / "f").write_text("x")
    with pytest.raises(OptionError, match="expected a folder, got a file"):
        claim_output(tmp_path / "f")
    fresh = tmp_path / "demo"
    claim_output(fresh)
    (fresh / "report.md").write_text("old report")
    claim_output(fresh)  # a previous demo output
    assert (fresh / MARKER).is_file()
