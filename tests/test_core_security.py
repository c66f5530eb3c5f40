"""Security rules (docs/errors.md, "Security"): never unpickle, never run a shell built from data, and the
one helper that writes files from an archive never writes outside its target."""

from __future__ import annotations

import ast
import io
import os
import pickle
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from helpers.common import dotted

from perckit.errors import PredictionError, ReleaseFormatError

SRC = Path(__file__).resolve().parents[1] / "src"


# ---------------------------------------------------------------- the source tree


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node


def _keyword(call: ast.Call, name: str):
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_const(node, value) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


FORBIDDEN_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "joblib"}
FORBIDDEN_CALLS = {
    "os.system", "os.popen", "os.execl", "os.execlp", "os.execv", "os.execvp", "os.spawnl", "os.spawnv",
    "subprocess.getoutput", "subprocess.getstatusoutput", "eval", "exec", "pd.read_pickle", "pandas.read_pickle",
    "yaml.unsafe_load", "yaml.full_load",
    # TorchScript runs the archive's graph (torch.from_file(shared=True) writes files): weights are data, never code
    "torch.jit.load", "jit.load", "torch.jit._load_for_lite_interpreter", "torch.package.PackageImporter",
}


def violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(SRC).as_posix()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [f"{rel}:{node.lineno}: imports {a.name}" for a in node.names if a.name.split(".")[0] in FORBIDDEN_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FORBIDDEN_MODULES:
            out.append(f"{rel}:{node.lineno}: imports from {node.module}")
    for call in _calls(tree):
        name = dotted(call.func)
        where = f"{rel}:{call.lineno}: {name or ast.unparse(call.func)}(...)"
        if name in FORBIDDEN_CALLS:
            out.append(f"{where} is forbidden")
        if name.endswith(".load") and name.split(".")[0] in ("np", "numpy") and not _is_const(_keyword(call, "allow_pickle"), False):
            out.append(f"{where} without allow_pickle=False")
        if name.endswith("read_array") and not _is_const(_keyword(call, "allow_pickle"), False):
            out.append(f"{where} without allow_pickle=False")
        if _is_const(_keyword(call, "shell"), True):
            out.append(f"{where} with shell=True")
        if name == "yaml.load" and "Safe" not in ast.unparse(_keyword(call, "Loader") or ast.Constant(None)):
            out.append(f"{where} without a SafeLoader")
        if name == "torch.load" and not _is_const(_keyword(call, "weights_only"), True):
            out.append(f"{where} without weights_only=True")
        if isinstance(call.func, ast.Attribute) and call.func.attr in ("extractall", "extract"):
            out.append(f"{where}: archives are unpacked only by the checked reason_av_edit.read.archives.extract_archives")
    return out


def test_no_module_unpickles_or_runs_a_shell():
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 20
    found = [v for f in files for v in violations(f)]
    assert found == []


def test_the_scanner_catches_what_it_looks_for(tmp_path, monkeypatch):
    bad = SRC / "perckit" / "_scanner_probe.py"  # never written: parsed from a string below
    code = (
        "import pickle\nimport numpy as np\nimport subprocess, os\n"
        "np.load('x.npy')\nnp.load('x.npy', allow_pickle=True)\nsubprocess.run('ls ' + name, shell=True)\n"
        "os.system('rm x')\neval('1')\nimport tarfile\ntarfile.open('a').extractall('b')\n"
        "import torch\ntorch.jit.load('i3d_torchscript.pt')\ntorch.load('w.pt')\ntorch.load('w.pt', weights_only=True)\n"
    )
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: code)
    found = violations(bad)
    assert len(found) == 9, found
    assert any("torch.jit.load" in f for f in found) and any("without weights_only=True" in f for f in found)


# ---------------------------------------------------------------- pickles are refused, and never run


class Payload:
    """Unpickling this creates the marker file: the proof that nothing was unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _object_array(marker: Path) -> np.ndarray:
    arr = np.empty(1, dtype=object)
    arr[0] = Payload(marker)
    return arr


def test_pickled_npy_is_refused_by_the_tracking_reader(tmp_path):
    from perckit.syn4d.read import read_tracking_npy

    marker = tmp_path / "unpickled"
    npy = tmp_path / "seq_000000_0.npy"
    np.save(npy, _object_array(marker), allow_pickle=True)
    with pytest.raises(ReleaseFormatError, match=r"seq_000000_0\.npy.*non-pickled.*object dtype"):
        read_tracking_npy(npy)
    npy.write_bytes(pickle.dumps(Payload(marker)))  # a bare pickle named .npy
    with pytest.raises(ReleaseFormatError, match=r"seq_000000_0\.npy.*expected a NumPy .npy array"):
        read_tracking_npy(npy)
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["object-member", "object-member-without-suffix", "bare-pickle"])
def test_pickled_npz_is_refused_by_the_prediction_reader(tmp_path, kind):
    from perckit.syn4d.read import load_prediction_row, read_npz

    marker = tmp_path / "unpickled"
    npz = tmp_path / "seq.npz"
    if kind == "bare-pickle":
        npz.write_bytes(pickle.dumps({"tracking_xyz": Payload(marker)}))
        pattern = r"seq\.npz.*expected a readable .npz"
    else:
        buf = io.BytesIO()
        np.save(buf, _object_array(marker), allow_pickle=True)
        name = "tracking_xyz.npy" if kind == "object-member" else "tracking_xyz"
        with zipfile.ZipFile(npz, "w") as z:
            z.writestr(name, buf.getvalue())
        pattern = rf"seq\.npz': member '{name}'.*non-pickled.*object dtype"
    with pytest.raises(PredictionError, match=pattern):
        read_npz(npz)
    with pytest.raises(PredictionError, match=pattern):
        load_prediction_row(npz, "og/dream/seq")
    assert not marker.exists()


# ---------------------------------------------------------------- extract_archives


def _release_with(tmp_path: Path, members: list[tarfile.TarInfo], data: dict[str, bytes] | None = None) -> Path:
    root = tmp_path / "rel"
    (root / "archives").mkdir(parents=True, exist_ok=True)
    with tarfile.open(root / "archives" / "videos.tar", "w") as tar:
        for m in members:
            payload = (data or {}).get(m.name, b"x" * m.size) if m.isfile() else None
            if payload is not None:
                m.size = len(payload)
            tar.addfile(m, io.BytesIO(payload) if payload is not None else None)
    return root


def _file(name: str, size: int = 3) -> tarfile.TarInfo:
    m = tarfile.TarInfo(name)
    m.size = size
    return m


def _link(name: str, target: str, kind=tarfile.SYMTYPE) -> tarfile.TarInfo:
    m = tarfile.TarInfo(name)
    m.type, m.linkname = kind, target
    return m


def _special(name: str, kind) -> tarfile.TarInfo:
    m = tarfile.TarInfo(name)
    m.type = kind
    return m


def _written(dest: Path) -> list[str]:
    return sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")) if dest.exists() else []


def test_extract_archives_writes_a_safe_archive(tmp_path):
    from perckit.reason_av_edit.read.archives import extract_archives

    root = _release_with(tmp_path, [_file("videos/a.mp4"), _link("videos/alias.mp4", "a.mp4"), _file("videos/sub/b.mp4")], {"videos/a.mp4": b"abc"})
    dest = tmp_path / "out"
    assert extract_archives(root, dest) == ["videos/a.mp4", "videos/sub/b.mp4"]
    assert (dest / "videos/a.mp4").read_bytes() == b"abc"
    assert not (dest / "videos/alias.mp4").exists()  # links are checked, never created


UNSAFE = [
    ("absolute-path", [_file("/tmp/perckit-escape.txt")], "absolute path"),
    ("windows-drive", [_file("C:/escape.txt")], "absolute path"),
    ("dot-dot", [_file("videos/../../escape.txt")], "'..' component"),
    ("backslash-dot-dot", [_file("videos\\..\\..\\escape.txt")], "'..' component"),
    ("symlink-relative-out", [_link("videos/l", "../../outside")], "link to '../../outside', which leaves"),
    ("symlink-absolute", [_link("videos/l", "/etc/passwd")], "link to '/etc/passwd', which leaves"),
    ("hardlink-relative-out", [_link("videos/h", "../outside.txt", tarfile.LNKTYPE)], "link to '../outside.txt', which leaves"),
    ("hardlink-absolute", [_link("videos/h", "/etc/passwd", tarfile.LNKTYPE)], "link to '/etc/passwd', which leaves"),
    ("fifo", [_special("videos/pipe", tarfile.FIFOTYPE)], "special file"),
    ("char-device", [_special("videos/dev", tarfile.CHRTYPE)], "special file"),
    ("unsafe-after-safe-members", [_file("videos/a.mp4"), _file("videos/b.mp4"), _link("videos/l", "/")], "which leaves"),
]


@pytest.mark.parametrize("members, message", [pytest.param(m, msg, id=i) for i, m, msg in UNSAFE])
def test_extract_archives_refuses_unsafe_members(tmp_path, members, message):
    from perckit.reason_av_edit.read.archives import extract_archives

    root = _release_with(tmp_path, members)
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(ReleaseFormatError, match=rf"archive 'archives/videos\.tar': member .*{message}.*refusing to extract"):
        extract_archives(root, dest)
    assert _written(dest) == []  # checked before anything of the archive is written
    assert not (tmp_path / "escape.txt").exists() and not Path("/tmp/perckit-escape.txt").exists()


def test_extract_archives_does_not_write_through_a_symlink_in_the_target(tmp_path):
    from perckit.reason_av_edit.read.archives import extract_archives

    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "out"
    dest.mkdir()
    os.symlink(outside, dest / "videos")
    root = _release_with(tmp_path, [_file("videos/a.mp4")])
    with pytest.raises(ReleaseFormatError, match=r"member 'videos/a\.mp4' would be written outside"):
        extract_archives(root, dest)
    assert list(outside.iterdir()) == []
