"""Issue 28, cause 5: reading an export reads only the export.

``perckit.export.load_export``, ``perckit evaluate`` / ``gt-predictions --references``, ``lmms_eval.write_task`` and
ReasonAVEdit's ``load_back`` list an export's shards through one function (``perckit.export.state.export_layout``):
the record's files, else the card's ``data_files``, every path inside the export folder, every shard a regular
Parquet file that passes the page-size guard and the media check before anything decodes it. The attacks: the card
edited to ``path: ../elsewhere/private.parquet`` (and an absolute path, a link inside the export pointing out, a
pattern matching outside, a URL), with and without the record; a record listing a path out; a shard of a few KB
that decodes to 1.2 GB; a media value naming a local file by path; and the Hub-copy route that must still load.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from helpers.fake_hub import blob_snapshot
from helpers.harness import deadline
from helpers.lmms import load_task
from helpers.parquet_craft import under_declare

from perckit.export import card as export_card
from perckit.io import parquetio, paths
from perckit.errors import (
    InputNotFoundError,
    OptionError,
    ReleaseFormatError,
    ReleaseNotFoundError,
)
from perckit.export import convert, load_export
from perckit.export.card import read_card_configs
from perckit.export.state import STATE_FILE, export_layout
from perckit.io.paths import glob_under

QUIET = {"progress": False, "log": lambda m: None}
SHARD = "data/validation-00000-of-00001.parquet"
PRIVATE = "PRIVATE ROW"


@pytest.fixture(scope="module")
def template(refcoco_release, tmp_path_factory):
    """A RefCOCO-M export of ``expressions`` (47 rows, split ``validation``) to copy from."""
    out = tmp_path_factory.mktemp("trust_template") / "export"
    convert("refcoco_m", refcoco_release.root, "expressions", out, cache_dir=tmp_path_factory.mktemp("trust_cache"), **QUIET)
    return out


@pytest.fixture(scope="module")
def private_table(template):
    """The export's own rows (same schema and ``huggingface`` metadata) with every sentence replaced: if these rows
    are ever loaded, the loader read a file it should not have."""
    table = pq.read_table(template / SHARD)
    i = table.schema.get_field_index("sentence")
    return table.set_column(i, table.schema.field(i), pa.array([PRIVATE] * table.num_rows, pa.string()))


@pytest.fixture
def export(template, private_table, tmp_path):
    """A fresh copy of the export at ``tmp_path/export`` and the private file at ``tmp_path/elsewhere``."""
    out = tmp_path / "export"
    shutil.copytree(template, out, symlinks=True)
    (tmp_path / "elsewhere").mkdir()
    pq.write_table(private_table, tmp_path / "elsewhere" / "private.parquet")
    return out


def card_meta(out: Path) -> tuple[dict, str]:
    text = (out / "README.md").read_text(encoding="utf-8")
    _, front, body = text.split("---\n", 2)
    return yaml.safe_load(front), body


def set_data_files(out: Path, value, config: int = 0) -> None:
    """Rewrite the card's ``configs[config].data_files`` (the rest of the card unchanged)."""
    meta, body = card_meta(out)
    meta["configs"][config]["data_files"] = value
    (out / "README.md").write_text(f"---\n{yaml.safe_dump(meta, sort_keys=False)}---\n{body}", encoding="utf-8")


def drop_record(out: Path) -> None:
    (out / STATE_FILE).unlink()


def load(out: Path, tmp_path: Path, **kwargs):
    return load_export(out, kwargs.pop("config", "expressions"), split=kwargs.pop("split", "validation"),
                       cache_dir=tmp_path / "cache", benchmark="refcoco_m", **kwargs)


def nothing_loaded(tmp_path: Path) -> bool:
    """No Arrow file was written into the test's datasets cache: no row was read."""
    return not list((tmp_path / "cache").rglob("*.arrow"))


# ---------------------------------------------------------------- the card edited to point out of the export


def _attack(case: str, out: Path, tmp_path: Path) -> str:
    """Apply ``case`` to the export; the card field the refusal must name."""
    private = tmp_path / "elsewhere" / "private.parquet"
    field = "configs[0].data_files[0].path"
    if case == "dotdot":
        set_data_files(out, [{"split": "validation", "path": "../elsewhere/private.parquet"}])
    elif case == "dotdot-backslash":
        set_data_files(out, [{"split": "validation", "path": "..\\elsewhere\\private.parquet"}])
    elif case == "dotdot-inside":
        set_data_files(out, [{"split": "validation", "path": "data/../../elsewhere/private.parquet"}])
    elif case == "absolute":
        set_data_files(out, [{"split": "validation", "path": str(private)}])
    elif case == "url":
        set_data_files(out, [{"split": "validation", "path": private.as_uri()}])
    elif case == "pattern-outside":
        set_data_files(out, [{"split": "validation", "path": "../elsewhere/*.parquet"}])
    elif case == "link-to-a-file":  # the card unchanged: its pattern data/validation-* matches a planted link
        os.symlink(private, out / "data" / "validation-00001-of-00001.parquet")
    elif case == "link-to-a-folder":
        os.symlink(tmp_path / "elsewhere", out / "mirror")
        set_data_files(out, [{"split": "validation", "path": "mirror/*.parquet"}])
    elif case == "list-of-paths":
        set_data_files(out, [SHARD, "../elsewhere/private.parquet"])
        field = "configs[0].data_files[1]"
    elif case == "path-list":
        set_data_files(out, [{"split": "validation", "path": [SHARD, "../elsewhere/private.parquet"]}])
        field = "configs[0].data_files[0].path[1]"
    else:
        raise AssertionError(case)
    return field


CASES = ["dotdot", "dotdot-backslash", "dotdot-inside", "absolute", "url", "pattern-outside", "link-to-a-file",
         "link-to-a-folder", "list-of-paths", "path-list"]


def test_the_edited_card_is_what_plain_datasets_follows(export, tmp_path):
    """The exact attack of the issue, before: ``datasets.load_dataset(folder)`` (what load_export called) loads the
    private file's rows; after: load_export refuses naming the card field, and no row is read."""
    _attack("dotdot", export, tmp_path)
    plain = datasets.load_dataset(str(export), "expressions", split="validation", cache_dir=str(tmp_path / "plain"))
    assert set(plain["sentence"]) == {PRIVATE}
    with pytest.raises(ReleaseFormatError) as e:
        load(export, tmp_path)
    assert str(e.value) == (f"{str(export / 'README.md')!r} configs[0].data_files[0].path: expected a path inside the export "
                            "folder, got '../elsewhere/private.parquet' (a '..' component leaves it)")
    assert nothing_loaded(tmp_path)


@pytest.mark.parametrize("record", [True, False], ids=["with-record", "hub-copy"])
@pytest.mark.parametrize("case", CASES)
def test_a_card_pointing_out_of_the_export_is_refused(case, record, export, tmp_path):
    field = _attack(case, export, tmp_path)
    if not record:
        drop_record(export)
    with pytest.raises(ReleaseFormatError) as e:
        load(export, tmp_path)
    message = str(e.value)
    assert message.startswith(f"{str(export / 'README.md')!r} {field}"), message
    assert "the export folder" in message, message
    assert nothing_loaded(tmp_path)


@pytest.mark.parametrize("rel, says", [
    ("../elsewhere/private.parquet", "a '..' component leaves it"),
    ("data/../../elsewhere/private.parquet", "a '..' component leaves it"),
    ("/etc/passwd", "the absolute path '/etc/passwd'"),
    ("data/validation-00001-of-00001.parquet", "a symbolic link leaves the root"),
], ids=["dotdot", "dotdot-inside", "absolute", "link-out"])
def test_a_record_listing_a_path_out_is_refused(rel, says, export, tmp_path):
    """The record of a stranger's export is untrusted too: its shard list is where load_export reads from."""
    os.symlink(tmp_path / "elsewhere" / "private.parquet", export / "data" / "validation-00001-of-00001.parquet")
    set_data_files(export, [{"split": "validation", "path": SHARD}])  # the card alone would be fine
    state = json.loads((export / STATE_FILE).read_text())
    state["configs"]["expressions"]["splits"][0]["files"] = [rel]
    (export / STATE_FILE).write_text(json.dumps(state))
    with pytest.raises(ReleaseFormatError) as e:
        load(export, tmp_path)
    assert str(e.value).startswith(f"{str(export / STATE_FILE)!r}: configs['expressions']: splits[0]: files[0]: ")
    assert says in str(e.value)
    assert nothing_loaded(tmp_path)


def test_the_record_names_the_files_and_the_card_is_only_checked(export, tmp_path):
    """With a record, the shards it lists are read (a card pattern matching more is not followed)."""
    extra = export / "data" / "validation-00000-of-00002.parquet"
    shutil.copy(tmp_path / "elsewhere" / "private.parquet", extra)  # inside the export, matched by data/validation-*
    rows = load(export, tmp_path)
    assert rows.num_rows == 47 and PRIVATE not in rows["sentence"]
    drop_record(export)  # a copy without the record reads what the card matches, sorted
    assert load(export, tmp_path).num_rows == 94


# ---------------------------------------------------------------- what the readers still load


def test_load_export_gives_the_rows_plain_datasets_gave(template, tmp_path):
    """Same rows, features, column order and preview column as ``datasets.load_dataset(folder)`` on a perckit export;
    the config name is kept; split slicing and every split (a DatasetDict) work as before."""
    plain = datasets.load_dataset(str(template), "expressions", split="validation", cache_dir=str(tmp_path / "plain"))
    got = load_export(template, "expressions", split="validation", cache_dir=tmp_path / "cache")
    assert got.features == plain.features and list(got.features) == list(plain.features)
    assert list(got.features)[-1] == "preview" and got.features["preview"] == datasets.Image()
    assert got.with_format("arrow")[:].equals(plain.with_format("arrow")[:])
    assert got.split == "validation" and got.info.config_name == "expressions"
    assert load_export(template, split="validation[:5]", cache_dir=tmp_path / "cache").num_rows == 5
    every = load_export(template, cache_dir=tmp_path / "cache")
    assert list(every) == ["validation"] and every["validation"].num_rows == 47


@pytest.mark.parametrize("form", ["string", "list-of-strings", "split-path", "split-path-list", "double-star"])
def test_every_data_files_form_datasets_reads_loads(form, export, tmp_path):
    """A copy without the record: the card's data_files in each form datasets reads from a card."""
    value = {"string": SHARD, "list-of-strings": ["data/*.parquet"], "split-path": [{"split": "validation", "path": "data/validation-*"}],
             "split-path-list": [{"split": "validation", "path": [SHARD]}],
             "double-star": [{"split": "validation", "path": "**/validation-*.parquet"}]}[form]
    set_data_files(export, value)
    drop_record(export)
    split = "train" if form in ("string", "list-of-strings") else "validation"  # datasets' rule for a bare list
    rows = load(export, tmp_path, split=split)
    assert rows.num_rows == 47 and rows.split == split


def test_a_hub_snapshot_with_blob_links_loads_like_the_export(template, tmp_path):
    """The Hub-copy route: every file of a snapshot is a link into the repository's blobs/ (huggingface_hub's
    cache layout); such links stay accepted. A link into another repository's blobs is not."""
    snap = blob_snapshot(template, tmp_path / "hub")
    assert (snap / SHARD).is_symlink() and not (snap / STATE_FILE).exists()
    got = load_export(snap, "expressions", split="validation", cache_dir=tmp_path / "c1", benchmark="refcoco_m")
    want = load_export(template, "expressions", split="validation", cache_dir=tmp_path / "c2")
    assert got.features == want.features and got.with_format("arrow")[:].equals(want.with_format("arrow")[:])
    other = blob_snapshot(template, tmp_path / "hub", repo="datasets--someone--else")
    (snap / SHARD).unlink()
    os.symlink(os.path.realpath(other / SHARD), snap / SHARD)
    with pytest.raises(ReleaseFormatError, match="a symbolic link leaves the root"):
        load_export(snap, "expressions", split="validation", cache_dir=tmp_path / "c3", benchmark="refcoco_m")


def test_unknown_config_or_split_lists_what_the_export_has(template, tmp_path):
    with pytest.raises(OptionError, match=r"expected one of the configs \['expressions'\], got 'images'"):
        load_export(template, "images", cache_dir=tmp_path / "cache")
    with pytest.raises(OptionError, match=r"config 'expressions': expected one of the splits \['validation'\], got 'test'"):
        load_export(template, "expressions", split="test[:3]", cache_dir=tmp_path / "cache")
    with pytest.raises(OptionError, match=r"expected a split name such as 'test'"):
        load_export(template, "expressions", split="validation]", cache_dir=tmp_path / "cache")
    with pytest.raises(OptionError, match="expected the benchmark of the export"):
        load_export(template, "expressions", benchmark="m4seg", cache_dir=tmp_path / "cache")
    assert nothing_loaded(tmp_path)


def test_a_missing_shard_or_a_pattern_matching_nothing_is_named(export, tmp_path):
    (export / SHARD).unlink()
    with pytest.raises(ReleaseNotFoundError, match=rf"{SHARD}: file .* not found"):
        load(export, tmp_path)
    drop_record(export)
    with pytest.raises(ReleaseNotFoundError, match=r"configs\[0\]\.data_files\[0\]\.path: expected the config's files in the "
                                                   r"export folder .*, got no file matching 'data/validation-\*'"):
        load(export, tmp_path)


def _corrupt_first_page_body(path: Path, column: str) -> None:
    """Overwrite the body of the first data page of ``column`` (its header intact: the size guard passes it)."""
    pf = pq.ParquetFile(path)
    md = pf.metadata.row_group(0)
    col = next(md.column(c) for c in range(md.num_columns) if md.column(c).path_in_schema == column)
    data = bytearray(path.read_bytes())
    with open(path, "rb") as f:
        header, length = parquetio._read_page_header(parquetio._Window(f), col.data_page_offset, len(data))
    body = col.data_page_offset + length
    data[body:body + int(header[3])] = b"\xff" * int(header[3])
    path.write_bytes(bytes(data))


SHARD_CASES = ["not-parquet", "a-fifo", "a-folder", "lying-footer", "metadata-not-features", "shards-disagree", "corrupt-page-body"]


@pytest.mark.parametrize("case", SHARD_CASES)
def test_a_shard_that_is_not_a_small_regular_parquet_file_is_refused(case, export, tmp_path, monkeypatch):
    shard = export / SHARD
    if case == "not-parquet":
        shard.write_bytes(b"not parquet at all")
        says = f"{SHARD}: not a readable Parquet file"
    elif case == "a-fifo":
        shard.unlink()
        os.mkfifo(shard)
        says = f"{SHARD}: expected a regular file, got a FIFO"
    elif case == "a-folder":
        shard.unlink()
        shard.mkdir()
        says = f"{SHARD}: expected a regular file, got a folder"
    elif case == "lying-footer":  # one 24 MiB sentence, the footer rewritten to declare 1000 bytes; the limit lowered to 4 MiB
        table = pq.read_table(shard).slice(0, 1)
        i = table.schema.get_field_index("sentence")
        table = table.set_column(i, table.schema.field(i), pa.array(["a" * (24 << 20)], pa.string()))
        pq.write_table(table, shard, compression="zstd", use_dictionary=False)
        under_declare(shard)
        monkeypatch.setattr(parquetio, "MAX_COLUMN_CHUNK_BYTES", 4 << 20)
        says = f"{SHARD}: row group 0, column 'sentence': expected at most {4 << 20} bytes uncompressed per column chunk, its page headers"
    elif case == "metadata-not-features":  # datasets raised a bare ValueError building the features
        table = pq.read_table(shard)
        meta = {b"huggingface": json.dumps({"info": {"features": {"sentence": {"_type": "ClassLabel"}}}}).encode()}
        pq.write_table(table.replace_schema_metadata(meta), shard)
        says = f"{SHARD}: expected 'huggingface' schema metadata that loads as datasets.Features, got one that does not (ValueError"
    elif case == "shards-disagree":  # datasets ended in DatasetGenerationError (CastError), a traceback on the CLI
        pq.write_table(pa.table({"x": [1, 2]}), export / "data" / "validation-00001-of-00002.parquet")
        shard.rename(export / "data" / "validation-00000-of-00002.parquet")
        drop_record(export)
        says = ("data/validation-00001-of-00002.parquet: expected the columns of data/validation-00000-of-00002.parquet (every "
                "shard of config 'expressions' alike), got x: int64 instead of expression_id: string")
    elif case == "corrupt-page-body":  # past the size guard; pyarrow fails while datasets reads the rows
        table = pq.read_table(shard)
        pq.write_table(table, shard, compression="snappy", use_dictionary=False)
        _corrupt_first_page_body(shard, "sentence")
        with pytest.raises(ReleaseFormatError) as e:
            load(export, tmp_path)
        assert str(e.value).startswith(f"export {str(export)!r}, config 'expressions': expected shards that load as Parquet "
                                       "rows, got "), str(e.value)
        return
    with deadline(20), pytest.raises(ReleaseFormatError) as e:
        load(export, tmp_path)
    assert str(e.value).startswith(f"{str(export)!r}: {says}"), str(e.value)
    assert nothing_loaded(tmp_path)


def test_a_media_value_naming_a_local_file_is_refused(export, tmp_path):
    """An ``image`` cell ``{bytes: null, path: '<a file of this machine>'}``: datasets' Image feature would open that
    file on decode (before: the private picture came back in the rows). load_export refuses the rows before giving
    them back (checked on the loaded table); write_task, which hands the shards to lmms-eval, refuses the shard."""
    from PIL import Image

    from perckit import lmms_eval

    secret = tmp_path / "elsewhere" / "secret.png"
    Image.new("RGB", (7, 3), (1, 2, 3)).save(secret)
    table = pq.read_table(export / SHARD)
    i = table.schema.get_field_index("image")
    cells = pa.array([{"bytes": b"x", "path": "a.png"}] + [{"bytes": None, "path": str(secret)}] * (table.num_rows - 1),
                     table.schema.field(i).type)
    pq.write_table(table.set_column(i, table.schema.field(i), cells), export / SHARD, row_group_size=20)
    plain = datasets.load_dataset(str(export), "expressions", split="validation", cache_dir=str(tmp_path / "plain"))
    assert plain[1]["image"].size == (7, 3)  # the attack, through plain datasets
    says = (f"column 'image': expected every media value to carry its bytes (an export embeds them), got 46 naming a file "
            f"by path alone, e.g. {str(secret)!r} (decoding would read that file from this machine)")
    with pytest.raises(ReleaseFormatError) as e:
        load(export, tmp_path)
    assert str(e.value) == f"export {str(export)!r}, config 'expressions', split 'validation': {says}"
    with pytest.raises(ReleaseFormatError) as e:
        lmms_eval.write_task("refcoco_m", export, tmp_path / "tasks")
    assert str(e.value) == f"{str(export)!r}: {SHARD}: row group 0, {says.replace('got 46', 'got 19')}"
    assert not list((tmp_path / "tasks").glob("*.yaml"))


# ---------------------------------------------------------------- a shard that decodes to 1.2 GB, in bounded memory

_CHILD = textwrap.dedent("""
    import json, resource, sys
    def status(key):
        for line in open("/proc/self/status"):
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    import datasets
    from perckit.__main__ import main
    from perckit.export import load_export
    export, cache = sys.argv[1], sys.argv[2]
    limit = status("VmSize") + (1 << 30)  # 1 GiB of address space above what the imports took
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    out = {}
    before = status("VmHWM")
    try:
        load_export(export, "expressions", split="validation", cache_dir=cache + "/a")
        out["perckit"] = None
    except Exception as e:
        out["perckit"] = f"{type(e).__name__}: {e}"
    out["cli"] = main(["gt-predictions", "refer_iou", "--references", export, "--output", cache + "/gt.jsonl"])
    out["grew"] = status("VmHWM") - before
    try:  # what load_export called before: the same limit must bite, else this test proves nothing
        datasets.load_dataset(export, "expressions", split="validation", cache_dir=cache + "/b")
        out["plain"] = []
    except Exception as e:
        chain, x = [], e
        while x is not None:
            chain.append(type(x).__name__)
            x = x.__cause__ or x.__context__
        out["plain"] = chain
    print(json.dumps(out))
""")


def test_a_shard_decoding_to_1_2_gb_is_refused_in_bounded_memory(export, tmp_path):
    """The issue's attack: a shard of a few KB whose one column decodes to 1.2 GB (one 1 MiB dictionary entry
    repeated 1150 times by run-length indices, an honest footer: only the page walk sees it). Plain datasets ends in
    ArrowMemoryError under a 1 GiB address-space limit; load_export and ``perckit gt-predictions --references`` refuse
    it naming the shard, row group and column, with the peak RSS growing by under 32 MiB, and nothing written."""
    table = pq.read_table(export / SHARD).slice(0, 1)
    n = 1150
    table = pa.concat_tables([table] * n).combine_chunks()
    bomb = pa.DictionaryArray.from_arrays(pa.array([0] * n, pa.int32()), pa.array(["b" * (1 << 20)]))
    i = table.schema.get_field_index("sentence")
    table = table.set_column(i, pa.field("sentence", bomb.type), bomb)
    pq.write_table(table.replace_schema_metadata(pq.read_schema(export / SHARD).metadata), export / SHARD, compression="zstd")
    assert (export / SHARD).stat().st_size < 256_000
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    run = subprocess.run([sys.executable, "-c", _CHILD, str(export), str(tmp_path / "cache")], capture_output=True,
                         text=True, timeout=300, env=env, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    head = (f"ReleaseFormatError: {str(export)!r}: {SHARD}: row group 0, column 'sentence': expected at most {1 << 30} "
            "bytes uncompressed per column chunk, its page headers add up to at least ")
    assert out["perckit"] and out["perckit"].startswith(head), out
    assert int(out["perckit"][len(head):].split()[0]) >= n << 20  # 1150 MiB decoded, counted from the page headers
    assert out["cli"] == 1 and not (tmp_path / "cache" / "gt.jsonl").exists()
    assert out["grew"] < 32 << 20, f"peak RSS grew by {out['grew'] >> 20} MiB while refusing"
    assert "ArrowMemoryError" in out["plain"] or "MemoryError" in out["plain"], out["plain"]


# ---------------------------------------------------------------- the command line and write_task


@pytest.mark.parametrize("command", ["evaluate", "gt-predictions"])
@pytest.mark.parametrize("record", [True, False], ids=["with-record", "hub-copy"])
def test_cli_references_pointing_out_is_one_line_exit_1(command, record, export, tmp_path, capsys):
    from perckit.__main__ import main

    _attack("dotdot", export, tmp_path)
    if not record:
        drop_record(export)
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"expression_id": "x", "mask": {"size": [1, 1], "counts": "1"}}\n')
    argv = {"evaluate": ["evaluate", "refer_iou", "--predictions", str(preds), "--references", str(export)],
            "gt-predictions": ["gt-predictions", "refer_iou", "--references", str(export), "--output", str(tmp_path / "gt.jsonl")]}[command]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {str(export / 'README.md')!r} configs[0].data_files[0].path: expected a path inside the export folder")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "gt.jsonl").exists()


def test_cli_references_reads_a_hub_snapshot(template, tmp_path, capsys):
    """gt-predictions then evaluate on a snapshot-shaped copy (blob links, no record): a perfect score."""
    from perckit.__main__ import main

    snap = blob_snapshot(template, tmp_path / "hub")
    gt = tmp_path / "gt.jsonl"
    assert main(["gt-predictions", "refer_iou", "--references", str(snap), "--output", str(gt)]) == 0
    out = tmp_path / "r.json"
    assert main(["evaluate", "refer_iou", "--predictions", str(gt), "--references", str(snap), "--output", str(out)]) == 0
    assert json.loads(out.read_text())["miou"] == 1.0 and json.loads(out.read_text())["num_examples"] == 47


@pytest.mark.parametrize("record", [True, False], ids=["with-record", "hub-copy"])
@pytest.mark.parametrize("case", ["dotdot", "absolute", "link-to-a-file"])
def test_write_task_writes_no_yaml_pointing_outside(case, record, export, tmp_path):
    from perckit import lmms_eval

    _attack(case, export, tmp_path)
    if not record:
        drop_record(export)
    with pytest.raises(ReleaseFormatError, match=r"README\.md' configs\[0\]\.data_files\[0\]\.path.*the export folder"):
        lmms_eval.write_task("refcoco_m", export, tmp_path / "tasks")
    assert not list((tmp_path / "tasks").glob("*.yaml"))


def test_write_task_points_only_inside_the_export(template, tmp_path):
    from perckit import lmms_eval

    for source in (template, blob_snapshot(template, tmp_path / "hub")):
        config = load_task(lmms_eval.write_task("refcoco_m", source, tmp_path / "tasks", task="t"))
        files = config["dataset_kwargs"]["data_files"]["validation"]
        roots = (os.path.realpath(source), os.path.realpath(tmp_path / "hub" / "datasets--org--export" / "blobs"))
        assert files and all(paths.is_inside(f, roots[0]) or paths.is_inside(f, roots[1]) for f in files)
    (tmp_path / "tasks" / "t.yaml").unlink()
    os.mkfifo(tmp_path / "tasks" / "t.yaml")  # a FIFO where the YAML goes: refused, never opened for a blocking read
    with deadline(10), pytest.raises(OptionError, match="expected a regular file, got a FIFO"):
        lmms_eval.write_task("refcoco_m", template, tmp_path / "tasks", task="t")


# ---------------------------------------------------------------- the card and the pattern rules


@pytest.mark.parametrize("front, says", [
    ("configs: {expressions: {data_files: data/x}}", "configs: expected a list of {config_name, data_files}"),
    ("configs: [{config_name: expressions, data_dir: ../elsewhere, data_files: data/x}]", "configs[0].data_dir: expected no data_dir"),
    ("configs: [{config_name: expressions}]", "configs[0]: expected 'data_files' naming the config's files"),
    ("configs: [{config_name: a, data_files: x}, {config_name: a, data_files: y}]", "configs[1].config_name: expected a config name"),
    ("configs: [{config_name: a, data_files: x, default: true}, {config_name: b, data_files: y, default: true}]", "configs: expected at most one default config"),
    ("configs: [{config_name: a, default: 'yes', data_files: x}]", "configs[0].default: expected true or false"),
    ("configs: [{config_name: ../../x, data_files: x}]", "configs[0].config_name: expected a config name"),
    ("configs: [{config_name: a, data_files: 7}]", "configs[0].data_files: expected a path, a list of paths or a list of {split, path}"),
    ("configs: [{config_name: a, data_files: [{split: test, path: x, extra: 1}]}]", "configs[0].data_files[0]: expected {split, path}"),
    ("configs: [{config_name: a, data_files: [{split: '../x', path: x}]}]", "configs[0].data_files[0].split: expected a split name"),
    ("configs: [{config_name: a, data_files: [{split: test, path: []}]}]", "configs[0].data_files[0].path: expected a path or a non-empty list"),
    ("configs: [{config_name: a, data_files: \"x\\0y\"}]", "configs[0].data_files: expected a relative path, got one with a NUL byte"),
    ("configs: [unclosed", "expected YAML front matter, got a YAML error"),
    ("- a list", "expected a YAML mapping as front matter, got list"),
], ids=["configs-a-mapping", "data-dir", "no-data-files", "config-twice", "two-defaults", "default-a-string",
        "config-name-a-path", "data-files-an-int", "extra-key", "split-dotdot", "empty-path-list", "nul-byte", "yaml-error", "not-a-mapping"])
def test_the_card_configs_are_checked_naming_the_field(front, says, tmp_path):
    (tmp_path / "README.md").write_text(f"---\n{front}\n---\nbody\n")
    with pytest.raises(ReleaseFormatError) as e:
        read_card_configs(tmp_path)
    assert str(e.value).startswith(repr(str(tmp_path / "README.md"))) and says in str(e.value), str(e.value)


@pytest.mark.parametrize("case", ["a-fifo", "a-link-out", "over-the-cap", "not-utf8"])
def test_a_card_that_is_not_a_small_regular_utf8_file_is_refused(case, export, tmp_path, monkeypatch):
    card = export / "README.md"
    if case == "a-fifo":
        card.unlink()
        os.mkfifo(card)
        says = "expected a regular file, got a FIFO"
    elif case == "a-link-out":
        shutil.move(card, tmp_path / "elsewhere" / "README.md")
        os.symlink(tmp_path / "elsewhere" / "README.md", card)
        says = "a symbolic link leaves the root"
    elif case == "over-the-cap":
        monkeypatch.setattr(export_card, "MAX_CARD_BYTES", 1000)
        says = "more than the limit of 1000 bytes"
    else:
        card.write_bytes(b"---\nconfigs: \xff\n---\n")
        says = "expected UTF-8 text, got undecodable bytes"
    drop_record(export)
    with deadline(20), pytest.raises(ReleaseFormatError, match=says):
        load(export, tmp_path)


def test_a_folder_that_is_not_an_export_is_named(tmp_path):
    (tmp_path / "data").mkdir()
    pq.write_table(pa.table({"x": [1]}), tmp_path / "data" / "train-00000-of-00001.parquet")
    with pytest.raises(InputNotFoundError, match="is not a perckit export: expected a .perckit_export.json record .* got neither"):
        export_layout(tmp_path)
    (tmp_path / "README.md").write_text("# no front matter\n")
    with pytest.raises(InputNotFoundError, match="got neither"):
        export_layout(tmp_path)
    with pytest.raises(InputNotFoundError, match="expected an export folder .* got nothing there"):
        export_layout(tmp_path / "nope")


def test_glob_under_matches_like_datasets_and_stays_inside(tmp_path):
    root = tmp_path / "root"
    for rel in ("data/test-00001-of-00002.parquet", "data/test-00000-of-00002.parquet", "data/train-0.parquet",
                "data/.hidden.parquet", "data/sub/test-9.parquet", ".cache/test-x.parquet", "videos/test-0.parquet"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x")
    names = lambda pattern: [p.relative_to(root).as_posix() for p in glob_under(root, pattern, "w")]
    assert names("data/test-*") == ["data/test-00000-of-00002.parquet", "data/test-00001-of-00002.parquet"]
    assert names("data/t?ain-[0-9].parquet") == ["data/train-0.parquet"]
    assert names("data/*") == ["data/test-00000-of-00002.parquet", "data/test-00001-of-00002.parquet", "data/train-0.parquet"]
    assert names("data/.*") == ["data/.hidden.parquet"]  # hidden names only when the pattern asks
    assert names("**/test-*.parquet") == ["data/sub/test-9.parquet", "data/test-00000-of-00002.parquet",
                                          "data/test-00001-of-00002.parquet", "videos/test-0.parquet"]
    assert names("data") == [] and names("nope/*") == [] and names("./data/train-0.parquet") == ["data/train-0.parquet"]
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "test-1.parquet").write_bytes(b"x")
    os.symlink(tmp_path / "out", root / "linked")
    assert names("**/*.parquet").count("linked/test-1.parquet") == 0  # '**' does not follow a linked folder
    with pytest.raises(ReleaseFormatError, match=r"'linked': expected a path inside the release root .*\(a symbolic link leaves"):
        names("linked/*")
    with pytest.raises(ReleaseFormatError, match="a '..' component leaves it"):
        names("data/../../out/*")
    with pytest.raises(ReleaseFormatError, match="which matches more"), pytest.MonkeyPatch.context() as m:
        m.setattr(paths, "MAX_GLOB_MATCHES", 2)
        names("data/*")
    with pytest.raises(ReleaseFormatError, match="which lists more"), pytest.MonkeyPatch.context() as m:
        m.setattr(paths, "MAX_GLOB_ENTRIES", 3)
        names("**/*")


def test_the_media_check_walks_every_depth_and_only_media_structs():
    """export_parquet.check_media_table: a {bytes, path} value with no bytes and a path is refused at any depth (in
    lists, structs, lists of structs); the "not provided" marker (empty path), null values and structs that only look
    alike (a path that is not text) pass; a column nested deeper than MAX_MEDIA_DEPTH is refused, not a RecursionError."""
    from perckit.export.parquet import MAX_MEDIA_DEPTH, check_media_table

    img = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    ok = pa.table({"image": pa.array([{"bytes": b"x", "path": "a.png"}, {"bytes": None, "path": ""}, None], img),
                   "odd": pa.array([{"bytes": None, "path": 5}], pa.struct([("bytes", pa.binary()), ("path", pa.int64())])).take([0, 0, 0])})
    check_media_table(ok, "w: ")
    frames = pa.array([[], [{"image": {"bytes": None, "path": "/etc/hosts"}, "m": 1}]],
                      pa.list_(pa.struct([("image", img), ("m", pa.int64())])))
    with pytest.raises(ReleaseFormatError, match=r"^w: column 'frames': expected every media value to carry its bytes .* got 1 "
                                                 r"naming a file by path alone, e.g. '/etc/hosts'"):
        check_media_table(pa.table({"frames": frames}), "w: ")
    t, v = pa.int64(), 1
    for _ in range(MAX_MEDIA_DEPTH + 5):
        t, v = pa.struct([("a", t)]), {"a": v}
    with pytest.raises(ReleaseFormatError, match=f"^w: column 'deep': expected columns nested at most {MAX_MEDIA_DEPTH} levels deep"):
        check_media_table(pa.table({"deep": pa.array([v], t)}), "w: ")


@pytest.mark.parametrize("name, sibling", [("export[1]", "export1"), ("export*", "exportz")], ids=["brackets", "star"])
def test_glob_characters_in_the_export_path_name_only_that_export(name, sibling, template, private_table, tmp_path):
    """datasets takes every data_files entry as a glob pattern: unescaped, the checked path '<tmp>/export[1]/data/…'
    read '<tmp>/export1/data/…' (another folder's rows, never checked), and 'export*' read 'exportz' too. The files are
    handed over escaped (export_state.literal_data_files), to load_export and in write_task's YAML."""
    from perckit import lmms_eval

    out = tmp_path / name
    shutil.copytree(template, out)
    (tmp_path / sibling / "data").mkdir(parents=True)
    pq.write_table(private_table, tmp_path / sibling / SHARD)
    rows = load_export(out, "expressions", split="validation", cache_dir=tmp_path / "cache")
    assert rows.num_rows == 47 and PRIVATE not in rows["sentence"]
    task = load_task(lmms_eval.write_task("refcoco_m", out, tmp_path / "tasks", task="t"))
    files = task["dataset_kwargs"]["data_files"]["validation"]
    docs = datasets.load_dataset("parquet", data_files={"validation": files}, split="validation", cache_dir=str(tmp_path / "c2"))
    assert docs.num_rows == 47 and PRIVATE not in docs["sentence"]
