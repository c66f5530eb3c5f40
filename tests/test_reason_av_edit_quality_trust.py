"""ReasonAVEdit edit quality, issue 28 (causes 1 and 6): weights are data, never code, and every model file is
read through the checked readers (perckit.io.model_files, perckit.io.paths).

- A TorchScript "weights" file is a program. The attack archives below are built here with ``torch.jit.script``:
  one writes a marker file from its ``forward`` (at compute), one from its ``__setstate__`` (when
  ``torch.jit.load`` loads it), both with ``torch.from_file(path, shared=True)``, which creates or overwrites any
  file. A control proves each really writes its marker when loaded the old way; through every model entry the
  archive is refused by content, with the state-dict format to convert to, and the marker never appears.
- A weights path or a PEAVS results.csv that is a FIFO (must not hang: under a deadline), ``/dev/zero`` (or a
  link to it), a folder, an oversize file; a zip whose records would make torch inflate gigabytes; a CSV field
  of 200 000 characters; bytes that are not UTF-8: each a perckit error naming the file.
- A model folder handed to a third-party loader (transformers, sentence-transformers) with a FIFO, a link out of
  it, a shard index naming a file outside it, a pickle instead of ``model.safetensors``, a ``modules.json``
  naming code to import: refused before the loader reads anything.
"""

from __future__ import annotations

import ast
import os
import pickle
import struct
import sys
import zipfile
from pathlib import Path

import pytest
from helpers.harness import deadline

from perckit.io import model_files
from perckit.errors import InputNotFoundError, OptionError, PerckitError, PredictionError
from perckit.reason_av_edit.quality.models import ENTRIES
from perckit.reason_av_edit.quality.models import peavs as pv
from perckit.reason_av_edit.quality.models.base import ModelOptions, ModelUnavailable, read_checkpoint

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:.*torch.jit.load.* is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.save` is deprecated:DeprecationWarning"),
]

#: the model entries by the name models={...} gives them
ENTRY = {e.name: e for e in ENTRIES}
#: the entries whose factories read a weights file (av_a and desync need packages not on PyPI: read_checkpoint below)
FILE_ENTRIES = ("fvd", "fad", "lpaps", "sync", "pq")
SRC = Path(__file__).resolve().parents[1] / "src" / "perckit"


def _torch():
    return pytest.importorskip("torch", reason="torch is not installed (pip install 'perckit[quality]')")


def _attack_classes():
    """Two scripted modules that write their marker with ``torch.from_file(path, shared=True)`` (which creates
    or overwrites any file the user can write): ``AtCall`` from ``forward`` (called as an FVD detector is),
    ``AtLoad`` from ``__setstate__``, which ``torch.jit.load`` runs. The marker's bytes feed the output, so
    TorchScript's optimiser cannot drop the write."""
    torch = _torch()
    from typing import Tuple

    class AtCall(torch.nn.Module):
        def __init__(self, path: str) -> None:
            super().__init__()
            self.path = path

        def forward(self, x: torch.Tensor, rescale: bool = False, resize: bool = False, return_features: bool = False) -> torch.Tensor:
            t = torch.from_file(self.path, shared=True, size=16, dtype=torch.uint8)
            t.fill_(65)
            return x.float().mean(dim=[1, 2, 3, 4]).reshape(-1, 1).repeat(1, 4) + t.float().sum() * 0

    class AtLoad(torch.nn.Module):
        def __init__(self, path: str) -> None:
            super().__init__()
            self.path = path

        @torch.jit.export
        def __getstate__(self) -> Tuple[str, bool]:
            return (self.path, self.training)

        @torch.jit.export
        def __setstate__(self, state: Tuple[str, bool]) -> None:
            self.path = state[0]
            t = torch.from_file(self.path, shared=True, size=16, dtype=torch.uint8)
            t.fill_(66)
            self.training = state[1] and bool(t.sum() >= 0)

        def forward(self, x: torch.Tensor, rescale: bool = False, resize: bool = False, return_features: bool = False) -> torch.Tensor:
            return x.float().mean(dim=[1, 2, 3, 4]).reshape(-1, 1).repeat(1, 4)

    return {"at_call": AtCall, "at_load": AtLoad}


def _archive(kind: str, marker: Path, path: Path) -> Path:
    torch = _torch()
    torch.jit.script(_attack_classes()[kind](str(marker))).save(str(path))
    assert not marker.exists()  # saving runs nothing
    return path


def _run_the_old_way(path: Path) -> None:
    """What perckit did before: ``torch.jit.load`` and one FVD call (the control: the archive is a real attack)."""
    torch = _torch()
    detector = torch.jit.load(str(path))
    detector(torch.zeros(1, 3, 16, 8, 8, dtype=torch.uint8), rescale=True, resize=True, return_features=True)


@pytest.mark.parametrize("kind", ["at_call", "at_load"])
def test_a_torchscript_weights_file_is_refused_and_never_runs(tmp_path, kind):
    control_marker = tmp_path / "control_marker"
    _run_the_old_way(_archive(kind, control_marker, tmp_path / "control.pt"))
    assert control_marker.read_bytes() == (b"A" if kind == "at_call" else b"B") * 16  # the archive writes files

    marker = tmp_path / "marker"
    path = _archive(kind, marker, tmp_path / "i3d_torchscript.pt")
    refused = []
    for key in FILE_ENTRIES:
        try:
            ENTRY[key].build(str(path), ModelOptions())
        except ModelUnavailable:  # the entry's library is not installed: it reads no file
            continue
        except OptionError as e:
            assert f"models[{key!r}]" in str(e) and repr(str(path)) in str(e) and "got a TorchScript archive" in str(e)
            assert "never loads TorchScript" in str(e)
            refused.append(key)
        else:
            pytest.fail(f"models[{key!r}]: a TorchScript archive was accepted")
    assert {"fvd", "sync"} <= set(refused)
    for what in ("av_a", "desync"):  # their factories need packages not on PyPI; the reader is the same
        with pytest.raises(OptionError, match=f"models\\['{what}'\\]: .*got a TorchScript archive"):
            read_checkpoint(str(path), what, "a state dict")
    assert not marker.exists()


def test_the_fvd_refusal_names_the_state_dict_format_and_the_cards_conversion(tmp_path):
    marker = tmp_path / "marker"
    path = _archive("at_call", marker, tmp_path / "i3d_torchscript.pt")
    with pytest.raises(OptionError) as e:
        ENTRY["fvd"].build(str(path), ModelOptions())
    msg = str(e.value)
    assert msg.startswith(f"models['fvd']: {str(path)!r}: expected a state dict of the PyTorch InceptionI3d (VideoGPT's "
                          "i3d_pretrained_400.pt), got a TorchScript archive")
    assert 'see "FVD weights" in metrics/av_edit_quality/README.md' in msg
    card = (Path(__file__).resolve().parents[1] / "metrics" / "av_edit_quality" / "README.md").read_text(encoding="utf-8")
    assert "### FVD weights" in card and "i3d_pretrained_400.pt" in card
    # told apart by content: the same archive under the state dict's own name, alone in a folder
    (tmp_path / "w").mkdir()
    os.replace(path, tmp_path / "w" / "i3d_pretrained_400.pt")
    for given in (tmp_path / "w", tmp_path / "w" / "i3d_pretrained_400.pt"):
        with pytest.raises(OptionError, match="got a TorchScript archive"):
            ENTRY["fvd"].build(str(given), ModelOptions())
    assert not marker.exists()


def test_the_metric_refuses_the_archive_at_compute_and_writes_nothing(tmp_path):
    pytest.importorskip("av", reason="the clips are mp4s (PyAV)")
    from helpers.edit_quality import clip, reference

    from perckit.reason_av_edit import make_quality_prediction
    from perckit.reason_av_edit.quality.metric import av_edit_quality

    markers = {kind: tmp_path / f"marker_{kind}" for kind in ("at_call", "at_load")}
    refs = [reference(f"s{i}", clip(t=16, h=16, w=16, seed=i)) for i in range(2)]
    preds = [make_quality_prediction(r["sample_id"], r["video"]["bytes"]) for r in refs]
    for kind, marker in markers.items():
        path = _archive(kind, marker, tmp_path / f"{kind}.pt")
        with pytest.raises(OptionError, match="got a TorchScript archive"):
            av_edit_quality(preds, refs, metrics=["ssim", "fvd"], models={"fvd": str(path)})
    assert not any(m.exists() for m in markers.values())
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left either


def test_a_state_dict_exported_from_an_archive_is_data_but_not_an_inception_i3d(tmp_path):
    """The export the issue names (``torch.jit.load(p).state_dict()``, run by the user on a file they trust)
    gives plain data; perckit has no module of that layout (the archive's own class is not published), so the
    strict load refuses it and names the format it loads. The format itself loads: see
    test_reason_av_edit_quality_i3d.py::test_build_fvd_loads_an_inception_i3d_state_dict_strictly."""
    torch = _torch()
    from perckit.reason_av_edit.quality.models import i3d_net

    scripted = torch.jit.script(torch.nn.Sequential(torch.nn.Conv3d(3, 4, 3), torch.nn.ReLU()))
    exported = tmp_path / "exported_state.pt"
    torch.save(scripted.state_dict(), exported)
    with open(exported, "rb") as f:
        assert not model_files.is_torchscript(model_files.zip_records(f, "x"))  # plain data now
    with pytest.raises(OptionError, match=r"does not match the InceptionI3d state dict .*Missing key"):
        ENTRY["fvd"].build(str(exported), ModelOptions())
    good = tmp_path / "i3d_pretrained_400.pt"
    torch.save(i3d_net.inception_i3d().state_dict(), good)  # the format the card points to
    built = ENTRY["fvd"].build(str(good), ModelOptions())
    assert type(built.detector).__name__ == "I3DFeatures"


# ---------------------------------------------------------------------------------------------- weights files


def _fifo(path: Path) -> Path:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    os.mkfifo(path)
    return path


def _not_regular(path: Path, kind: str) -> tuple[Path, str]:
    """``path`` made a FIFO, a folder or a link to /dev/zero (``dev_zero``: /dev/zero itself), and how the
    checked reader names that kind."""
    if kind == "fifo":
        return _fifo(path), "a FIFO"
    if kind == "folder":
        path.mkdir()
        return path, "a folder"
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    if kind == "link_to_dev_zero":
        path.symlink_to("/dev/zero")
        return path, "a device or socket"
    return Path("/dev/zero"), "a device or socket"


@pytest.mark.parametrize("kind", ["fifo", "folder", "dev_zero", "link_to_dev_zero"])
def test_read_checkpoint_refuses_what_is_not_a_regular_file(tmp_path, kind):
    _torch()
    path, got = _not_regular(tmp_path / "w.pt", kind)
    with deadline(10):
        with pytest.raises(OptionError) as e:
            read_checkpoint(str(path), "sync", "a SyncNet state dict")
        assert str(e.value) == f"models['sync']: expected a regular weights file, got {got}: {str(path)!r}"
        if kind != "folder":  # a folder is a weights folder for the entries that take one
            with pytest.raises(OptionError, match=f"expected a regular weights file, got {got}"):
                ENTRY["sync"].build(str(path), ModelOptions())
    with pytest.raises(InputNotFoundError, match="not found"):
        read_checkpoint(str(tmp_path / "absent.pt"), "sync", "a SyncNet state dict")


def test_read_checkpoint_refuses_an_oversize_file_before_reading(tmp_path):
    _torch()
    big = tmp_path / "huge.pt"
    try:
        with open(big, "wb") as f:
            f.truncate(model_files.MAX_WEIGHTS_BYTES + 1)  # sparse: no disk used
    except OSError as e:
        pytest.skip(f"this filesystem cannot hold a sparse 8 GiB file ({e})")
    with deadline(10), pytest.raises(OptionError) as e:
        read_checkpoint(str(big), "fad", "VGGish's state dict")
    assert str(e.value) == (f"models['fad']: weights file {str(big)!r} holds {model_files.MAX_WEIGHTS_BYTES + 1} bytes, "
                            f"more than the limit of {model_files.MAX_WEIGHTS_BYTES} bytes")


def _saved(tmp_path: Path, name: str = "small.pt") -> Path:
    torch = _torch()
    path = tmp_path / name
    torch.save({"w": torch.zeros(1000)}, path)
    return path


def test_a_compressed_record_is_refused_before_torch_inflates_it(tmp_path):
    """torch inflates a deflated record whole before it checks its size: a 1 MB file made it allocate 1.2 GB
    (measured). Here 64 MiB of zeros deflate to 64 KB; the file is refused on its index, nothing inflated."""
    small = _saved(tmp_path)
    bomb = tmp_path / "bomb.pt"
    with zipfile.ZipFile(small) as src, zipfile.ZipFile(bomb, "w") as out:
        for info in src.infolist():
            if info.filename.endswith("/data/0"):
                out.writestr(zipfile.ZipInfo(info.filename), b"\0" * (64 << 20), compress_type=zipfile.ZIP_DEFLATED)
            else:
                out.writestr(zipfile.ZipInfo(info.filename), src.read(info.filename))
    assert bomb.stat().st_size < 1 << 20
    with deadline(10), pytest.raises(OptionError) as e:
        read_checkpoint(str(bomb), "lpaps", "SpecVQGAN's lpaps.pt")
    assert "expected the uncompressed records torch.save writes, got record 'small/data/0' compressed" in str(e.value)
    assert f"{64 << 20} bytes once inflated" in str(e.value) and repr(str(bomb)) in str(e.value)
    assert read_checkpoint(str(small), "lpaps", "x")["w"].shape == (1000,)  # the file torch.save wrote loads


def test_an_oversize_zip_index_is_refused_before_it_is_read(tmp_path):
    data = bytearray(_saved(tmp_path).read_bytes())
    at = data.rfind(b"PK\x05\x06")
    data[at + 12:at + 16] = struct.pack("<I", 1 << 31)  # the end record claims a 2 GiB central directory
    at64 = data.rfind(b"PK\x06\x06")  # torch.save also writes a Zip64 end record, which zipfile reads first
    assert at64 > 0
    data[at64 + 40:at64 + 48] = struct.pack("<Q", 1 << 31)
    forged = tmp_path / "forged.pt"
    forged.write_bytes(bytes(data))
    with pytest.raises(OptionError, match=r"expected a zip index \(central directory\) of at most 16777216 bytes, got one of 2147483648"):
        read_checkpoint(str(forged), "fad", "VGGish's state dict")


def test_a_pickle_that_would_run_code_is_refused_by_weights_only(tmp_path):
    _torch()
    marker = tmp_path / "unpickled"
    payload = tmp_path / "syncnet_v2.model"
    payload.write_bytes(pickle.dumps({"w": _Payload(marker)}, protocol=2))  # a legacy-format "checkpoint"
    with pytest.raises(OptionError, match="cannot be read as a torch checkpoint"):
        ENTRY["sync"].build(str(payload), ModelOptions())
    assert not marker.exists()


class _Payload:
    """Unpickling this creates the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_weights_folder_file_linking_out_of_the_folder_is_refused(tmp_path):
    _torch()
    outside = _saved(tmp_path, "outside.pt")
    folder = tmp_path / "weights"
    folder.mkdir()
    (folder / "i3d_pretrained_400.pt").symlink_to(outside)
    with pytest.raises(OptionError, match="a symbolic link leaves the root"):
        ENTRY["fvd"].build(str(folder), ModelOptions())


# ---------------------------------------------------------------------------------------------- PEAVS results.csv


@pytest.mark.parametrize("kind", ["fifo", "link_to_dev_zero", "dev_zero", "folder"])
def test_peavs_results_csv_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    path, got = _not_regular(tmp_path / "results.csv", kind)
    with deadline(10):
        with pytest.raises(PredictionError) as e:
            pv.load_peavs_csv(path)
        assert str(e.value) == f"PEAVS scores {str(path)!r}: expected a regular file, got {got}: {str(path)!r}"
        if kind != "folder":  # a folder is where the entry looks for results.csv
            with pytest.raises(PredictionError, match=f"got {got}"):
                ENTRY["peavs"].build(str(path), ModelOptions())  # models={"peavs": ...}, the entry point


def test_peavs_results_csv_in_a_folder_linking_out_of_it_is_refused(tmp_path):
    outside = tmp_path / "elsewhere.csv"
    outside.write_text("filename,score\ns1,3\n", encoding="utf-8")
    (tmp_path / "PEAVS").mkdir()
    (tmp_path / "PEAVS" / "results.csv").symlink_to(outside)
    with pytest.raises(PredictionError, match="a symbolic link leaves the root"):
        ENTRY["peavs"].build(str(tmp_path / "PEAVS"), ModelOptions())


def test_peavs_results_csv_over_the_cap_is_refused_before_reading(tmp_path):
    big = tmp_path / "results.csv"
    with open(big, "wb") as f:
        f.truncate(pv.MAX_RESULTS_BYTES + 1)
    with deadline(10), pytest.raises(PredictionError) as e:
        pv.load_peavs_csv(big)
    assert str(e.value) == (f"PEAVS scores {str(big)!r}: file {str(big)!r} holds {pv.MAX_RESULTS_BYTES + 1} bytes, "
                            f"more than the limit of {pv.MAX_RESULTS_BYTES} bytes")


@pytest.mark.parametrize("row, line, field", [
    ("s1,3\n" + "x" * 200_000 + ",4\n", 3, "filename"),
    ("s1," + "9" * 200_000 + "\n", 2, "score"),
    ('"' + "y" * 200_000 + '",2\n', 2, "filename"),
    ("s1,3,\n" + "s2,4," + "z" * 200_000 + "\n", 3, "field 3 (past the header's 2)"),
])
def test_peavs_results_csv_with_a_200k_character_field_names_the_line_and_field(tmp_path, row, line, field):
    path = tmp_path / "results.csv"
    path.write_text("filename,score\n" + row, encoding="utf-8")
    with pytest.raises(PredictionError) as e:
        pv.load_peavs_csv(path)
    where = field if field.startswith("field ") else f"field {field!r}"
    assert str(e.value) == (f"PEAVS scores {str(path)!r} line {line}, {where}: expected at most 131072 characters "
                            "(a file name or a score), got a longer field")


def test_peavs_results_csv_that_is_not_utf8_names_the_offset(tmp_path):
    path = tmp_path / "results.csv"
    path.write_bytes(b"filename,score\ns1,3\n\xff\xfe,4\n")
    with pytest.raises(PredictionError) as e:
        pv.load_peavs_csv(path)
    assert str(e.value) == f"PEAVS scores {str(path)!r}: expected UTF-8 text, got byte 0xff at offset 20 that is not UTF-8"
    path.write_text("filename,score\r\ns1,3\r\n\r\ns2.MP4,4.5\r\n", encoding="utf-8")  # CRLF and a blank row still read
    assert pv.load_peavs_csv(path) == {"s1": 3.0, "s2": 4.5}
    with pytest.raises(InputNotFoundError, match="not found"):
        pv.load_peavs_csv(tmp_path / "absent.csv")


# ---------------------------------------------------------------------------------------------- model folders


def _transformers():
    _torch()
    return pytest.importorskip("transformers", reason="transformers is not installed (pip install 'perckit[quality]')")


def _tiny_clip_folder(folder: Path) -> Path:
    transformers = _transformers()
    config = transformers.CLIPConfig(
        text_config={"vocab_size": 99, "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
                     "max_position_embeddings": 16},
        vision_config={"hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 8,
                       "patch_size": 4},
        projection_dim=4,
    )
    config.save_pretrained(folder)
    return folder


def test_a_model_folder_holding_a_fifo_is_refused_before_the_loader_reads_it(tmp_path):
    _transformers()
    from perckit.reason_av_edit.quality.models import clip

    folder = tmp_path / "clip"
    folder.mkdir()
    _fifo(folder / "config.json")  # transformers would block opening it
    (folder / "model.safetensors").write_bytes(b"{}")
    with deadline(10), pytest.raises(OptionError) as e:
        clip.build_clip(str(folder), ModelOptions())
    assert str(e.value) == f"models['clip']: expected a regular file in the model folder, got a FIFO: {str(folder / 'config.json')!r}"


def test_a_model_folder_linking_out_or_naming_shards_outside_is_refused(tmp_path):
    _transformers()
    from perckit.reason_av_edit.quality.models import clap, clip

    outside = tmp_path / "secret.safetensors"
    outside.write_bytes(b"x")
    folder = _tiny_clip_folder(tmp_path / "clip")
    (folder / "model.safetensors").symlink_to(outside)
    with pytest.raises(OptionError, match=r"models\['clip'\]: model folder .*got 'model.safetensors', which resolves to .*secret"
                                          r".*\(a symbolic link leaves the root\)"):
        clip.build_clip(str(folder), ModelOptions())
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors.index.json").write_text('{"weight_map": {"a": "../secret.safetensors"}}', encoding="utf-8")
    with pytest.raises(OptionError, match=r"weight_map shard '../secret.safetensors': expected a path inside"):
        clap.build_clap(str(folder), ModelOptions())
    (folder / "model.safetensors.index.json").write_text('{"weight_map": {"a": "model-1.safetensors"}}', encoding="utf-8")
    with pytest.raises(OptionError, match=r"expected shard files inside the model folder, got 'model-1.safetensors'"):
        clip.build_clip(str(folder), ModelOptions())


def test_a_model_folder_without_safetensors_is_not_unpickled(tmp_path):
    _transformers()
    from perckit.reason_av_edit.quality.models import clip

    marker = tmp_path / "unpickled"
    folder = _tiny_clip_folder(tmp_path / "clip")
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"w": _Payload(marker)}))
    with pytest.raises(OptionError, match=r"cannot load a CLIPModel from .*safetensors"):
        clip.build_clip(str(folder), ModelOptions())
    assert not marker.exists()


def test_pq_folder_without_model_safetensors_is_not_handed_to_the_loader(tmp_path):
    _torch()
    pytest.importorskip("audiobox_aesthetics.model.aes", reason="needs audiobox_aesthetics")
    from perckit.reason_av_edit.quality.models import audiobox

    marker = tmp_path / "unpickled"
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "pytorch_model.bin").write_bytes(pickle.dumps({"w": _Payload(marker)}))
    with pytest.raises(OptionError, match="has neither config.json \\+ model.safetensors nor checkpoint.pt"):
        audiobox.build_pq(str(tmp_path), ModelOptions())
    assert not marker.exists()


# ---------------------------------------------------------------------------------------------- the rule, by source


def _calls(path: Path) -> list[tuple[str, int]]:
    """Every call in ``path`` that reads a file itself or loads code: (what, line)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr == "jit":
            found.append(("torch.jit", node.lineno))
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name in ("open", "read_text", "read_bytes", "ZipFile") and not (name == "open" and isinstance(f, ast.Attribute)):
            found.append((name, node.lineno))
        if name == "load" and isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("torch", "np", "pickle", "json"):
            found.append((f"{f.value.id}.load", node.lineno))
        if name == "ZipFile" and node.args and not (isinstance(node.args[0], ast.Name) and node.args[0].id == "f"):
            found.append(("ZipFile(path)", node.lineno))
    return found


def test_no_model_module_reads_a_file_itself_or_loads_code():
    """The model modules, m4seg/metric/text.py and perckit.io.model_files read files only through the checked readers;
    ``torch.load`` appears once (perckit.io.model_files, on the checked file object, ``weights_only=True``) and
    ``zipfile.ZipFile`` once (on that file object); nothing touches ``torch.jit``."""
    files = sorted((SRC / "reason_av_edit" / "quality").rglob("*.py")) + [SRC / "m4seg" / "metric" / "text.py", SRC / "io" / "model_files.py"]
    seen = {str(p.relative_to(SRC)): _calls(p) for p in files}
    allowed = {"io/model_files.py": [("ZipFile", 0), ("torch.load", 0)]}
    for rel, calls in seen.items():
        kinds = sorted(k for k, _ in calls)
        assert kinds == sorted(k for k, _ in allowed.get(rel, [])), f"{rel}: {calls}"
    source = (SRC / "io" / "model_files.py").read_text(encoding="utf-8")
    assert source.count("torch.load(f, map_location=\"cpu\", weights_only=True, mmap=False)") == 1


def test_the_source_scan_bites(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch, zipfile\n"
                   "def f(p):\n"
                   "    torch.jit.load(p)\n"
                   "    open(p).read()\n"
                   "    torch.load(p)\n"
                   "    zipfile.ZipFile(p)\n"
                   "    return p.read_text()\n", encoding="utf-8")
    kinds = {k for k, _ in _calls(bad)}
    assert {"torch.jit", "open", "torch.load", "ZipFile(path)", "read_text"} <= kinds


# ---------------------------------------------------------------------------------------------- m4seg text encoders


def test_minilm_hash_goes_through_the_checked_reader(tmp_path):
    from perckit.m4seg.metric import text as textmod

    fifo = _fifo(tmp_path / "model.safetensors")
    with deadline(10), pytest.raises(textmod.TextToolUnavailable, match="expected a regular file, got a FIFO"):
        textmod._sha256(fifo)
    (tmp_path / "w").write_bytes(b"abc")
    assert textmod._sha256(tmp_path / "w") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # sha256("abc")


def _minilm_like(folder: Path, module_type: str) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}', encoding="utf-8")
    (folder / "modules.json").write_text(
        '[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},'
        f' {{"idx": 1, "name": "1", "path": "1_Pooling", "type": "{module_type}"}}]', encoding="utf-8")
    return folder


def test_minilm_folder_whose_modules_json_names_other_code_is_refused(tmp_path, monkeypatch):
    pytest.importorskip("sentence_transformers", reason="needs sentence-transformers (pip install 'perckit[text]')")
    _torch()
    from perckit.m4seg.metric import text as textmod

    marker = tmp_path / "imported"
    code = tmp_path / "code"
    code.mkdir()
    (code / "perckit_test_evil_module.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).touch()\nclass Evil:\n    @staticmethod\n    def load(path):\n        return None\n",
        encoding="utf-8")
    monkeypatch.syspath_prepend(str(code))
    for bad in ("perckit_test_evil_module.Evil", "sentence_transformers.util.misc.os", "os.system"):
        folder = _minilm_like(tmp_path / f"m_{len(list(tmp_path.iterdir()))}", bad)
        with pytest.raises(OptionError) as e:
            textmod.minilm_embed_fn(str(folder))
        assert f"text_model_path={str(folder)!r}: {str(folder / 'modules.json')!r} [1].type: expected one of" in str(e.value)
        assert repr(bad) in str(e.value)
    assert not marker.exists() and "perckit_test_evil_module" not in sys.modules
    fifo_folder = tmp_path / "fifo_folder"
    fifo_folder.mkdir()
    _fifo(fifo_folder / "tokenizer.json")
    with deadline(10), pytest.raises(OptionError, match="got a FIFO"):
        textmod.minilm_embed_fn(str(fifo_folder))
    monkeypatch.setenv(textmod.ENV_BERT_MODEL, str(fifo_folder))
    with deadline(10), pytest.raises(OptionError, match=f"{textmod.ENV_BERT_MODEL}: expected a regular file in the model folder, got a FIFO"):
        textmod.bert_meanpool_embed_fn()


def test_check_model_folder_lists_the_files_and_skips_hidden_entries(tmp_path):
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / ".git").mkdir()
    _fifo(tmp_path / ".git" / "fifo")  # loaders never read hidden entries
    assert model_files.check_model_folder(tmp_path, "m") == ["1_Pooling/config.json", "config.json"]
    with pytest.raises(PerckitError):
        model_files.check_model_folder(tmp_path / "absent", "m")
