"""The guards live at their chokepoints (issue 28): every file perckit reads goes through the checked readers of
``perckit.io.paths`` (a regular file, its size capped, checked on the open descriptor), every file it writes goes
through the one atomic writer (``perckit.io.paths.atomic_file`` / ``write_atomic``), and nothing from a file is
ever executed (that scan is tests/test_core_security.py's: no ``torch.jit.load``, no pickle, ``torch.load`` only with
``weights_only=True``).

The scan reads every module under ``src/`` (AST, imports inside functions included). A call that opens a file
by itself (``open``, ``Path.read_text``, ``np.load``, ``Image.open``, ``av.open``, ``soundfile``, ``tarfile``,
``pq.ParquetFile``, ``torch.load`` ...) is accepted only when the file it is given is in memory (``io.BytesIO``)
or came from a checked reader in the same function (``open_regular_file``, ``open_checked``, ``open_media``,
``read_regular_file``, a ``checked_opener`` / the builders' ``opener``); a call that writes a file only when its
file came from ``atomic_file`` (or memory). :data:`ALLOWED` lists the few places that must hand a path to a
library, each with the reason; an entry that no longer matches anything fails too, so the list stays true.
Then the writer's own promise: a failed write leaves nothing behind and raises a perckit error.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.common import dotted

from perckit.errors import OutputError, PerckitError, ReleaseFormatError
from perckit.io.paths import atomic_file, write_atomic

SRC = Path(__file__).resolve().parents[1] / "src"
READER_MODULE = "perckit/io/paths.py"

# ---------------------------------------------------------------- what counts as a read, a write, a checked file

#: library calls that read a file they are given: dotted name -> the positional index / keyword of the file
READ_CALLS: dict[str, tuple[int, tuple[str, ...]]] = {
    **{n: (0, ("file",)) for n in ("open", "io.open", "codecs.open", "os.open")},
    **{n: (0, ("fp",)) for n in ("Image.open", "PIL.Image.open")},
    "av.open": (0, ("file",)),
    "tarfile.open": (0, ("name", "fileobj")),
    "tarfile.TarFile": (0, ("name", "fileobj")),
    **{n: (0, ("filename", "fileobj")) for n in ("gzip.open", "gzip.GzipFile", "bz2.open", "lzma.open")},
    "zipfile.ZipFile": (0, ("file",)),
    **{n: (0, ("file",)) for n in ("np.load", "numpy.load", "np.fromfile", "np.memmap", "np.loadtxt", "np.genfromtxt")},
    "torch.load": (0, ("f",)),
    **{n: (0, ("source", "where")) for n in ("pq.ParquetFile", "pq.read_table", "pq.read_metadata", "pq.read_schema",
                                               "pyarrow.parquet.ParquetFile", "pa.memory_map", "pa.OSFile", "pa.input_stream")},
    **{n: (0, ("file",)) for n in ("sf.read", "sf.info", "sf.SoundFile", "soundfile.read", "soundfile.info", "soundfile.SoundFile")},
    "librosa.load": (0, ("path",)),
    **{n: (0, ()) for n in ("OpenEXR.InputFile", "OpenEXR.File", "cv2.imread", "cv2.VideoCapture")},
    "json.load": (0, ("fp",)),
    **{n: (0, ("filename",)) for n in ("load_file", "safetensors.torch.load_file", "safe_open", "safetensors.safe_open")},
    **{n: (0, ()) for n in ("filecmp.cmp", "mmap.mmap", "hashlib.file_digest")},
}
#: attribute calls that read whatever their receiver names (``Path.read_text`` ...)
READ_METHODS = frozenset({"read_text", "read_bytes"})
#: library calls that write a file they are given: dotted name -> the positional index / keyword of the file
WRITE_CALLS: dict[str, tuple[int, tuple[str, ...]]] = {
    **{n: (0, ("file",)) for n in ("np.save", "numpy.save", "np.savez", "np.savez_compressed")},
    "torch.save": (1, ("f",)),
    **{n: (1, ("where",)) for n in ("pq.write_table", "pyarrow.parquet.write_table", "pq.write_metadata")},
    **{n: (0, ("where",)) for n in ("pq.ParquetWriter", "pyarrow.parquet.ParquetWriter")},
    **{n: (0, ("file",)) for n in ("sf.write", "soundfile.write")},
    **{n: (0, ()) for n in ("OpenEXR.OutputFile", "cv2.imwrite", "cv2.VideoWriter")},
    **{n: (0, ()) for n in ("shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree", "shutil.move",
                            "tempfile.mkstemp", "tempfile.NamedTemporaryFile", "os.fdopen")},
}
#: attribute calls that write whatever their receiver names
WRITE_METHODS = frozenset({"write_text", "write_bytes", "tofile"})
#: a call of one of these gives a checked open file, in-memory data or the bytes of a checked read
CHECKED_SOURCES = frozenset({
    "open_regular_file", "open_checked", "open_media", "read_regular_file", "atomic_file", "io.BytesIO", "io.StringIO",
    "BytesIO", "StringIO", "paths.open_regular_file", "paths.open_checked", "paths.atomic_file", "paths.read_regular_file",
    "opener",  # the builders' opener: paths.checked_opener(open) (local files checked; remote ones through datasets)
    "wr.open", "self.open",  # ReleaseWriter.open: paths.atomic_file under the release root
    "open_weights",  # perckit.io.model_files.open_weights: paths.open_regular_file under MAX_WEIGHTS_BYTES
})
#: calls whose result is a file only as good as what they are given (``ExitStack.enter_context(checked)``)
PASS_THROUGH = frozenset({"enter_context", "stack.enter_context", "files.enter_context", "contextlib.closing"})
#: parameter annotations saying the caller hands an open file (whose own function was scanned)
FILE_ANNOTATIONS = ("IO", "BinaryIO", "BufferedReader", "TextIO")

#: The places that must give a path to a library or read by themselves, each with its reason (module, dotted
#: call, the source text of its file argument).
ALLOWED: dict[tuple[str, str, str], str] = {
    ("perckit/io/prefetch.py", "os.open", "paths[len(sizes)]"):
        "opens only to hint the kernel (posix_fadvise WILLNEED); nothing is read there, the read is read_regular_file",
    ("perckit/syn4d/read.py", "z.zip.open", "member"):
        "a member of the NPZ that open_regular_file opened and np.load holds; its NPY header is checked first",
    ("perckit/syn4d/metric/baselines.py", "resources.files(__package__).joinpath(DATA_FILE).read_bytes", ""):
        "perckit's own packaged data file (importlib.resources: it may live in a zip), never a user's file",
    ("perckit/reason_av_edit/metric.py", "tempfile.mkstemp", ""):
        "a private scratch copy (mode 0600, removed in finally) of an already checked mask video for OpenCV, which reads only paths",
    ("perckit/reason_av_edit/metric.py", "os.fdopen", "fd"):
        "writes that private scratch copy (see tempfile.mkstemp above)",
    ("perckit/reason_av_edit/metric.py", "cv2.VideoCapture", "tmp"):
        "OpenCV reads only paths: the private scratch copy of checked bytes",
    ("perckit/samples/syn4d.py", "tempfile.TemporaryDirectory", ""):
        "OpenEXR writes only to a path: a private scratch folder, whose file is read back and written by write_atomic",
    ("perckit/samples/syn4d.py", "OpenEXR.OutputFile", "scratch"):
        "OpenEXR writes only to a path: the private scratch file (see tempfile.TemporaryDirectory above)",
    ("perckit/export/swap.py", "os.open", "path / BUILD_MARKER"):
        "opens perckit's own build marker in a staging folder to probe its lock (flock); nothing is read or written",
    ("perckit/export/swap.py", "filecmp.cmp", "src"):
        "compares two files of the export folders during the swap's recovery (a duplicate of a user's file)",
}


def _call_name(call: ast.Call) -> str:
    """``np.load`` for ``np.load(...)``; ``resources.files(__package__).joinpath(DATA_FILE).read_bytes`` style chains as source."""
    name = dotted(call.func)
    if "()" in name:
        return ast.unparse(call.func)
    return name


def _file_arg(call: ast.Call, spec: tuple[int, tuple[str, ...]]) -> ast.AST | None:
    index, keywords = spec
    for k in call.keywords:
        if k.arg in keywords:
            return k.value
    return call.args[index] if len(call.args) > index else None


def _mode(call: ast.Call, index: int = 1) -> str:
    node = next((k.value for k in call.keywords if k.arg == "mode"), call.args[index] if len(call.args) > index else None)
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else "r"


class _Scope:
    """Names bound to checked files in one function (``with checked(...) as f``, ``f = checked(...)``) and its
    parameters annotated as open files."""

    def __init__(self, fn: ast.AST | None) -> None:
        self.checked: set[str] = set()
        if fn is None:
            return
        args = fn.args
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            if a.annotation is not None and any(t in ast.unparse(a.annotation) for t in FILE_ANNOTATIONS):
                self.checked.add(a.arg)
        for node in ast.walk(fn):
            if isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if isinstance(item.optional_vars, ast.Name) and self.is_checked(item.context_expr):
                        self.checked.add(item.optional_vars.id)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if self.is_checked(node.value):
                    self.checked.add(node.targets[0].id)

    def is_checked(self, node: ast.AST | None) -> bool:
        if node is None:
            return False
        if isinstance(node, ast.Name):
            return node.id in self.checked
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name in CHECKED_SOURCES or name.endswith(("open_regular_file", "open_checked", "atomic_file", "read_regular_file")):
                return True
            if isinstance(node.func, ast.Call) and dotted(node.func.func).endswith("checked_opener"):
                return True  # checked_opener(open)(path)
            if name in PASS_THROUGH or name.endswith(".enter_context"):
                return any(self.is_checked(a) for a in node.args)
        return False


def _functions(tree: ast.AST):
    """Every function (with its nested ones scanned in their own scope) and the module body as ``None``."""
    out = [(None, tree)]
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and not isinstance(node, ast.Lambda):
            out.append((node, node))
    return out


def _own_calls(body: ast.AST):
    """The calls of a function that are not inside a nested function (those get their own scope)."""
    stack = list(ast.iter_child_nodes(body))
    calls: list[ast.Call] = []
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.Call):
            calls.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return sorted(calls, key=lambda c: (c.lineno, c.col_offset))


def raw_file_access(source: str, rel: str) -> list[tuple[str, str, str, str]]:
    """``(module, call, file argument, "read" | "write")`` of every file access in ``source`` that does not go
    through the checked readers or the atomic writer (what may never run at all, ``torch.jit.load``, pickle,
    ``torch.load`` without ``weights_only=True``, is the scan of tests/test_core_security.py)."""
    tree = ast.parse(source, filename=rel)
    out = []
    for fn, body in _functions(tree):
        scope = _Scope(fn)
        for call in _own_calls(body):
            name = _call_name(call)
            if name in WRITE_CALLS:
                arg = _file_arg(call, WRITE_CALLS[name])
                if not scope.is_checked(arg):
                    out.append((rel, name, ast.unparse(arg) if arg is not None else "", "write"))
                continue
            if isinstance(call.func, ast.Attribute) and call.func.attr in WRITE_METHODS:
                out.append((rel, name, "", "write"))
                continue
            if name == "tempfile.TemporaryDirectory":
                out.append((rel, name, "", "write"))
                continue
            if name in READ_CALLS or (name.endswith(".open") and name not in ("Image.open", "av.open") and not scope.is_checked(call)):
                spec = READ_CALLS.get(name, (0, ("file",)))
                arg = _file_arg(call, spec)
                mode = _mode(call) if name in ("open", "io.open", "codecs.open") else ""
                kind = "write" if any(c in mode for c in "wax+") else "read"
                if name in ("tarfile.open", "gzip.open", "zipfile.ZipFile") and any(c in _mode(call) for c in "wax"):
                    kind = "write"
                if not scope.is_checked(arg):
                    out.append((rel, name, ast.unparse(arg) if arg is not None else "", kind))
                continue
            if isinstance(call.func, ast.Attribute) and call.func.attr in READ_METHODS:
                out.append((rel, name, "", "read"))
                continue
            if isinstance(call.func, ast.Attribute) and call.func.attr == "save" and call.args and \
                    any(k.arg == "format" for k in call.keywords):
                arg = call.args[0]  # PIL's Image.save(fp, format=...): a file perckit writes
                if not scope.is_checked(arg) and not (isinstance(arg, ast.Name) and arg.id == "buf"):
                    out.append((rel, name, ast.unparse(arg), "write"))
    return out


def _tree_findings() -> list[tuple[str, str, str, str]]:
    """Every finding of the tree (the reader module ``perckit/io/paths.py`` excepted: the raw calls live there)."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == READER_MODULE:
            continue  # the reader module is where the raw calls live
        found += raw_file_access(path.read_text(encoding="utf-8"), rel)
    return found


def test_every_file_access_goes_through_the_checked_readers_and_the_atomic_writer():
    found = _tree_findings()
    assert len(list(SRC.rglob("*.py"))) > 100
    unexplained = [f for f in found if f[:3] not in ALLOWED]
    assert unexplained == [], "raw file access outside perckit.io.paths (route it through the checked readers / the atomic writer):\n" + \
        "\n".join(map(str, unexplained))


def test_every_allowed_raw_access_still_exists():
    found = {f[:3] for f in _tree_findings()}
    stale = sorted(set(ALLOWED) - found)
    assert stale == [], f"ALLOWED lists places that no longer exist (remove them): {stale}"


SCANNER_PROBE = '''
import io, json, pickle, tarfile
import numpy as np
import torch
from pathlib import Path
from PIL import Image
from perckit.io.paths import open_regular_file, atomic_file, read_regular_file

def bad(path, out):
    open(path).read()
    Path(path).read_text()
    np.load(path, allow_pickle=False)
    Image.open(path)
    tarfile.open(path)
    torch.load(path, weights_only=True)
    Path(out).write_text("x")
    np.save(out, np.zeros(3))
    with open(out, "w") as f:
        f.write("x")
    img = Image.new("RGB", (1, 1))
    img.save(out, format="PNG")

def good(path, out, data):
    with open_regular_file(path, "w", 10) as f:
        np.load(f, allow_pickle=False)
        torch.load(f, weights_only=True)
    Image.open(io.BytesIO(read_regular_file(path, "w", 10)))
    with atomic_file(out) as g:
        np.save(g, np.zeros(3))
        Image.new("RGB", (1, 1)).save(g, format="PNG")
    buf = io.BytesIO()
    Image.new("RGB", (1, 1)).save(buf, format="PNG")
'''


def test_the_scan_catches_what_it_looks_for():
    found = raw_file_access(textwrap.dedent(SCANNER_PROBE), "probe.py")
    kinds = [(call, kind) for _, call, _, kind in found]
    assert kinds == [
        ("open", "read"), ("Path(path).read_text", "read"), ("np.load", "read"), ("Image.open", "read"),
        ("tarfile.open", "read"), ("torch.load", "read"),
        ("Path(out).write_text", "write"), ("np.save", "write"), ("open", "write"), ("img.save", "write"),
    ], found


# ---------------------------------------------------------------- the atomic writer keeps its promise


def test_a_failed_write_leaves_nothing_behind(tmp_path):
    target = tmp_path / "state.json"
    write_atomic(target, "old")
    with pytest.raises(KeyError):
        with atomic_file(target) as f:
            f.write(b"half of the new content")
            raise KeyError("interrupted")
    assert target.read_text() == "old" and sorted(os.listdir(tmp_path)) == ["state.json"]


def test_write_without_replace_never_clobbers(tmp_path):
    target = tmp_path / "x.jsonl"
    target.write_text("the user's file")
    with pytest.raises(OutputError, match=r"x\.jsonl.*File exists"):
        write_atomic(target, "perckit's", replace=False)
    assert target.read_text() == "the user's file" and sorted(os.listdir(tmp_path)) == ["x.jsonl"]
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")  # a dangling link: not followed, not replaced
    with pytest.raises(OutputError):
        write_atomic(link, "x", replace=False)
    assert not (tmp_path / "elsewhere").exists()


def test_a_folder_that_cannot_be_written_is_an_output_error(tmp_path, monkeypatch):
    """The temporary file cannot be created (a read-only folder; root passes every permission check, so the
    refusal is simulated at os.open): an OutputError naming the file, nothing created."""
    import errno

    real_open = os.open

    def refused(path, flags, *args, **kwargs):
        if flags & os.O_CREAT:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refused)
    with pytest.raises(OutputError, match=r"cannot write .*a\.json.*Permission denied"):
        write_atomic(tmp_path / "a.json", "x")
    monkeypatch.setattr(os, "open", real_open)
    assert os.listdir(tmp_path) == []


_FILE_SIZE_LIMIT = '''
import os, resource, sys, json
sys.path.insert(0, {src!r})
import perckit
from perckit.errors import OutputError
out = {out!r}
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
acc = perckit.accumulator("refer_iou")
rows = [{{"expression_id": f"e{{i}}", "mask": {{"size": [4, 4], "counts": "0@0"}}}} for i in range(200)]
acc.update(references=rows)  # 200 waiting references: a state of about 10 KB
try:
    acc.save(os.path.join(out, "state.json"))
except OutputError as e:
    print("OutputError", e)
print(json.dumps(sorted(os.listdir(out))))
'''


def test_accumulator_save_past_a_file_size_limit(tmp_path):
    """The exact attack: ``Accumulator.save`` under a file-size limit raised a bare OSError and left
    ``.state.json.tmp-<pid>`` behind. Now an OutputError naming the file, and the folder stays empty."""
    out = tmp_path / "out"
    out.mkdir()
    code = _FILE_SIZE_LIMIT.format(src=str(SRC), out=str(out))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("OutputError ") and "state.json" in lines[0] and "File too large" in lines[0], proc.stdout
    assert lines[-1] == "[]", proc.stdout


def test_accumulator_save_on_a_full_disk(tmp_path, monkeypatch):
    """A full disk (ENOSPC from the write) is an OutputError naming the file; nothing is left behind."""
    import errno

    import perckit

    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    acc = perckit.accumulator("refer_iou")
    with pytest.raises(OutputError, match=r"state\.json.*No space left on device") as info:
        acc.save(tmp_path / "state.json")
    assert isinstance(info.value, PerckitError) and isinstance(info.value, OSError)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- the readers this issue routed through paths


def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    os.mkfifo(path)
    return path


def _dev_zero(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    path.symlink_to("/dev/zero")
    return path


def _refcoco_shard(tmp_path: Path, make) -> Path:
    from perckit.samples import write_release

    root = write_release("refcoco_m", tmp_path / "rcm").root
    make(sorted((root / "data").glob("validation-*.parquet"))[0])
    return root


def _reason_archive(tmp_path: Path, make) -> Path:
    root = tmp_path / "rae"
    make(root / "archives" / "videos.tar")
    return root


@pytest.mark.parametrize("make", [_fifo, _dev_zero], ids=["fifo", "dev-zero"])
def test_release_readers_refuse_what_is_not_a_regular_file(tmp_path, make):
    """RefCOCO-M shards (the builder's opener), ReasonAVEdit archives (reader and extractor) and Syn4D depth EXRs,
    prediction NPZs and checksummed files: a FIFO used to block the build, /dev/zero never ended."""
    from helpers.harness import deadline
    from helpers.refcoco_m import all_expression_rows

    from perckit.hf.entrypoints import build_split
    from perckit.reason_av_edit.read.archives import extract_archives, iter_tar_file
    from perckit.io.model_files import sha256_file
    from perckit.syn4d.layout import MAX_CHECKSUM_FILE_BYTES
    from perckit.syn4d.read import exr_size, read_depth_exr, read_npz

    kind = "FIFO" if make is _fifo else "device or socket"
    with deadline(60):
        root = _refcoco_shard(tmp_path, make)
        for call in (lambda: build_split("refcoco_m", "expressions", root, tmp_path / "cache", split="validation"),
                     lambda: all_expression_rows(root)):
            with pytest.raises(Exception) as info:
                call()
            # (a link to /dev/zero is refused as a link out of the release, a FIFO as not a regular file)
            assert any(isinstance(e, PerckitError) and "validation-" in str(e) and (kind in str(e) or "link leaves" in str(e))
                       for e in _chain(info.value)), info.value
        archive = _reason_archive(tmp_path, make) / "archives" / "videos.tar"
        for call in (lambda: list(iter_tar_file(archive, "archives/videos.tar")), lambda: extract_archives(archive.parent.parent)):
            with pytest.raises(PerckitError, match=rf"archives/videos\.tar.*{kind}"):
                call()
        checksum = lambda p: sha256_file(p, repr(str(p)), ReleaseFormatError, MAX_CHECKSUM_FILE_BYTES)  # as ChecksumVerifier  # noqa: E731
        for name, call in (("d.exr", exr_size), ("d.exr", read_depth_exr), ("p.npz", read_npz), ("s.bin", checksum)):
            path = make(tmp_path / "syn4d" / name)
            with pytest.raises(PerckitError, match=rf"{name}.*{kind}"):
                call(path)


def _chain(e: BaseException):
    while e is not None:
        yield e
        e = e.__cause__ or e.__context__


def test_preview_videos_are_opened_as_checked_files(tmp_path):
    """A preview's ``{bytes, path}`` video value naming a FIFO or /dev/zero (an export row from elsewhere) is refused
    by paths.open_media before PyAV opens anything."""
    from helpers.harness import deadline

    from perckit.reason_av_edit.preview import video_frame
    from perckit.syn4d.preview import first_frame

    with deadline(30):
        for make, kind in ((_fifo, "FIFO"), (_dev_zero, "device or socket")):
            path = make(tmp_path / "v.mp4")
            for call in (lambda: video_frame({"bytes": None, "path": str(path)}, 0, "sample 'x'"),
                         lambda: first_frame({"bytes": None, "path": str(path)}, "sequence 'y'")):
                with pytest.raises(PerckitError, match=rf"v\.mp4.*{kind}|{kind}.*v\.mp4"):
                    call()


def test_readers_take_a_cap():
    """``read_json`` and ``read_ahead`` have no uncapped mode any more: the cap is a required argument."""
    import inspect

    from perckit.io.jsonio import read_json
    from perckit.io.prefetch import read_ahead

    for fn in (read_json, read_ahead):
        param = inspect.signature(fn).parameters["limit"]
        assert param.default is inspect.Parameter.empty and param.kind is inspect.Parameter.KEYWORD_ONLY
