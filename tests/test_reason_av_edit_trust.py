"""Issue 13 for ReasonAVEdit-Bench: no path from a release or a prediction folder leaves its root, every tar and
every media file stays bounded, repeated keys / columns are refused, one BOM rule, one mask-PNG rule."""

import io
import os
import shutil
import tarfile
import threading
import tracemalloc

import datasets
import numpy as np
import pytest
from helpers.harness import messages as _messages

from perckit.hf.entrypoints import build_split
from perckit.errors import PredictionError, ReleaseFormatError
from perckit.reason_av_edit.read.archives import extract_archives, iter_tar_file, iter_tar_members
from perckit.reason_av_edit.read.metadata import parse_metadata, read_metadata

NAME, CONFIG = "reason_av_edit", "default"


def _fails(fn, *patterns):
    """``fn()`` raises; some message in its cause chain contains every pattern."""
    with pytest.raises(Exception) as info:
        fn()
    msgs = _messages(info.value)
    assert any(all(p in m for p in patterns) for m in msgs), msgs
    return info.value


def _bounded(fn, seconds=float(os.environ.get("PERCKIT_TEST_HANG_S", "30"))):
    """Run ``fn`` in a thread; a hang fails the test instead of stalling the run."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # handed back
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box.get("value")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    from perckit.samples import write_release

    return write_release("reason_av_edit", tmp_path_factory.mktemp("trust_rav"), sub_tracks=("W1",), extracted=True)


@pytest.fixture
def root(base, tmp_path):
    dest = tmp_path / "rel"
    shutil.copytree(base.root, dest, symlinks=True)
    return dest


def _build(root, tmp_path, **kw):
    return list(build_split(NAME, CONFIG, root, tmp_path / "cache", **kw))


def _set_csv(root, old, new):
    path = root / "metadata.csv"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


SECRET = b"secret bytes of a file outside the release"


# ---------------------------------------------------------------- section 2: paths from the release


def test_id_naming_an_annotation_outside_the_release_is_refused(root, tmp_path):
    (tmp_path / "outside.json").write_text('{"edit_window_s": [0, 1], "secret": "x"}')
    _set_csv(root, "w1_0000,W1", "../../outside,W1")
    _fails(lambda: _build(root, tmp_path, source="extracted"), "metadata.csv line 2, column 'id'", "../../outside", "usable as a file name")


@pytest.mark.parametrize("source", ["extracted", "archives"])
def test_annotation_symlink_out_of_the_release_is_refused(root, tmp_path, source):
    (tmp_path / "outside.json").write_text('{"secret": 1}')
    ann = root / "annotations/w1_0000.json"
    ann.unlink()
    os.symlink(tmp_path / "outside.json", ann)
    _fails(lambda: _build(root, tmp_path, source=source), "w1_0000.json", "symbolic link leaves the root")


def test_extracted_media_symlink_out_of_the_release_is_refused(root, tmp_path):
    (tmp_path / "secret.wav").write_bytes(SECRET)
    wav = root / "audios/w1_0000.wav"
    wav.unlink()
    os.symlink(tmp_path / "secret.wav", wav)
    _fails(lambda: _build(root, tmp_path, source="extracted"), "metadata.csv line 2, column 'audio'", "symbolic link leaves the root")


def test_archive_disk_fallback_symlink_out_is_refused(root, tmp_path):
    """A member missing from its tar is read from disk only inside the release."""
    (tmp_path / "secret.jpg").write_bytes(SECRET)
    _set_csv(root, "audios/w1_0000.wav", "extra/w1_0000.wav")
    (root / "extra").mkdir()
    os.symlink(tmp_path / "secret.jpg", root / "extra/w1_0000.wav")
    _fails(lambda: _build(root, tmp_path, source="archives"), "column 'audio'", "symbolic link leaves the root")


def test_a_folder_symlinked_out_of_the_release_is_refused(root, tmp_path):
    outside = tmp_path / "outside"
    shutil.copytree(root / "reason_audio", outside)
    shutil.rmtree(root / "reason_audio")
    os.symlink(outside, root / "reason_audio")
    _fails(lambda: _build(root, tmp_path, source="extracted"), "column 'reason_audio'", "symbolic link leaves the root")


@pytest.mark.parametrize("value, says", [
    ("audios/" + "a" * 300 + ".wav", "at most 255 bytes"),
    ("audios/w1\x00.wav", "NUL byte"),
    ("\\\\server\\share\\x.wav", "absolute path"),
    ("C:/x.wav", "absolute path"),
    ("audios\\..\\..\\x.wav", "'..' component"),
    ("./", "a file inside the release"),
])
def test_csv_media_paths_are_checked_lexically(value, says):
    csv = ("sub_track,instruction,video,audio,reason_visual,reason_visual_mask,reason_audio\n"
           f"W1_same_class_pair,do it,videos/a.mp4,{value},reason_visual/a.png,reason_visual_mask/a.png,reason_audio/a.wav\n")
    _fails(lambda: parse_metadata(csv.encode()), "metadata.csv line 2, column 'audio'", says)


def test_metadata_csv_that_is_a_fifo_is_refused(root, tmp_path):
    (root / "metadata.csv").unlink()
    os.mkfifo(root / "metadata.csv")
    _fails(lambda: _bounded(lambda: read_metadata(root)), "metadata.csv", "a FIFO")


def test_annotation_that_is_a_fifo_or_a_folder_is_refused(root, tmp_path):
    (root / "annotations/w1_0000.json").unlink()
    os.mkfifo(root / "annotations/w1_0000.json")
    _fails(lambda: _bounded(lambda: _build(root, tmp_path, source="extracted")), "w1_0000.json", "a FIFO")
    (root / "annotations/w1_0000.json").unlink()
    (root / "annotations/w1_0000.json").mkdir()
    _fails(lambda: _build(root, tmp_path / "2", source="extracted"), "w1_0000.json", "a folder")


def test_hub_snapshot_links_into_the_blob_store_are_accepted(base, tmp_path, monkeypatch):
    """The Hub cache links every snapshot file to ``<repo>/blobs``; those links are not a release leaving its root."""
    from perckit.hf import hub
    from perckit.hf.entrypoints import builder_class

    repo = tmp_path / "hub" / "datasets--bigfacing--ReasonAVEdit-Bench"
    snap, blobs = repo / "snapshots" / "abc123", repo / "blobs"
    blobs.mkdir(parents=True)
    files = ["metadata.csv"] + [p.relative_to(base.root).as_posix() for p in (base.root / "annotations").iterdir()]
    files += [p.relative_to(base.root).as_posix() for p in (base.root / "archives").iterdir()]
    for i, f in enumerate(files):
        shutil.copy(base.root / f, blobs / f"blob{i}")
        (snap / f).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blobs / f"blob{i}", (snap / f).parent), snap / f)
    monkeypatch.setattr(hub, "snapshot_download", lambda **kw: str(snap))
    b = builder_class(NAME)(config_name=CONFIG, cache_dir=str(tmp_path / "c"))
    b.download_and_prepare()
    assert [r["sample_id"] for r in b.as_dataset("test")] == ["w1_0000"]


# ---------------------------------------------------------------- section 3: tars


def _tar_bytes(members, fmt=tarfile.GNU_FORMAT):
    """A tar of ``(name, bytes | None for a folder)`` members."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _checksum(block: bytearray) -> bytearray:
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\x00 " % sum(block[:512])
    return block


def _header(name: str, size_field: bytes, kind: bytes = b"0") -> bytes:
    """One ustar header whose 12-byte size field is given raw (octal or base-256)."""
    info = tarfile.TarInfo(name)
    b = bytearray(info.tobuf(tarfile.USTAR_FORMAT))
    b[124:136] = size_field
    b[156:157] = kind
    return bytes(_checksum(b))


def _base256(n: int, width: int = 12) -> bytes:
    return bytes([0xFF if n < 0 else 0x80]) + (n % (1 << (8 * (width - 1)))).to_bytes(width - 1, "big")


def _sparse_header(name: str, real_size: int, stored: bytes) -> bytes:
    """A GNU sparse ('S') member: one data region of ``stored`` at offset 0, expanding to ``real_size`` bytes."""
    info = tarfile.TarInfo(name)
    info.size = len(stored)
    b = bytearray(info.tobuf(tarfile.GNU_FORMAT))
    b[156:157] = tarfile.GNUTYPE_SPARSE
    b[386:398] = b"%011o\x00" % 0
    b[398:410] = b"%011o\x00" % len(stored)
    b[482] = 0
    b[483:495] = _base256(real_size)
    return bytes(_checksum(b)) + stored.ljust(512, b"\x00")


END = b"\x00" * 1024
GOOD = _header("audios/ok.wav", b"%011o\x00" % 3) + b"abc".ljust(512, b"\x00")

#: (id, tar bytes, message parts) for every reader: the local one, the streaming one and the extractor.
HOSTILE_TARS = [
    ("size-negative-base256", GOOD + _header("audios/a.wav", _base256(-1024)) + b"x" * 1024 + END, ["audios/a.wav", "negative size"]),
    ("size-2^80-base256", GOOD + _header("audios/a.wav", _base256(1 << 80)) + b"x" * 512 + END, ["audios/a.wav", "more than the limit"]),
    ("size-2^80-hidden-member", GOOD + _header("audios/.junk", _base256(1 << 80)) + b"x" * 512 + END, ["audios/.junk", "more than the limit"]),
    ("size-2^80-folder-entry", GOOD + _header("audios/d", _base256(1 << 80), b"5") + END, ["audios/d", "more than the limit"]),
    ("size-2^80-unknown-type", GOOD + _header("audios/u", _base256(1 << 80), b"Z") + END, ["audios/u", "more than the limit"]),
    ("sparse-expanding-to-16-GiB", GOOD + _sparse_header("audios/s.wav", 1 << 34, b"RIFF") + END, ["audios/s.wav", "17179869184 bytes, more than the limit"]),
    ("duplicate-name", _tar_bytes([("audios/ok.wav", b"abc"), ("audios/ok.wav", b"xyz")]), ["audios/ok.wav", "appears twice"]),
    ("duplicate-after-dot-slash", _tar_bytes([("audios/ok.wav", b"abc"), ("./audios/ok.wav", b"xyz")]), ["./audios/ok.wav", "appears twice"]),
    ("folder-then-file", _tar_bytes([("audios/x", None), ("audios/x", b"abc")]), ["audios/x", "also has a folder of that name"]),
    ("file-then-folder", _tar_bytes([("audios/x", b"abc"), ("audios/x", None)]), ["audios/x", "also has a file of that name"]),
    ("file-used-as-folder", _tar_bytes([("audios/x", b"abc"), ("audios/x/y.wav", b"abc")]), ["audios/x/y.wav", "which is a file"]),
    ("member-named-dot", _tar_bytes([("audios/ok.wav", b"abc"), (".", b"abc")]), ["'.'", "not a folder"]),
    ("component-over-255-bytes", _tar_bytes([("audios/" + "é" * 130 + ".wav", b"abc")], tarfile.PAX_FORMAT), ["at most 255 bytes"]),
    ("path-over-4096-bytes", _tar_bytes([("/".join(["d" * 200] * 21) + "/a.wav", b"abc")], tarfile.PAX_FORMAT), ["at most 4096"]),
    ("absolute-member", _tar_bytes([("/etc/x.wav", b"abc")]), ["/etc/x.wav", "absolute path"]),
    ("dot-dot-member", _tar_bytes([("audios/../../x.wav", b"abc")]), ["'..' component"]),
]


def _local(path, label):
    return list(iter_tar_file(path, label))


def _stream(path, label):
    return list(iter_tar_members(datasets.DownloadManager(dataset_name=NAME).iter_archive(str(path)), label))


@pytest.mark.parametrize("reader", ["local", "streaming", "extract"])
@pytest.mark.parametrize("data, patterns", [pytest.param(d, p, id=i) for i, d, p in HOSTILE_TARS])
def test_hostile_tars_give_the_documented_error(tmp_path, reader, data, patterns):
    root = tmp_path / "rel"
    (root / "archives").mkdir(parents=True)
    path = root / "archives/audios.tar"
    path.write_bytes(data)
    dest = tmp_path / "out"
    dest.mkdir()
    fn = {"local": lambda: _local(path, "archives/audios.tar"), "streaming": lambda: _stream(path, "archives/audios.tar"),
          "extract": lambda: extract_archives(root, dest)}[reader]
    with pytest.raises(ReleaseFormatError) as info:
        _bounded(fn)
    msg = str(info.value)
    assert "archive 'archives/audios.tar'" in msg and all(p in msg for p in patterns), msg
    if reader == "extract":
        assert "refusing to extract" in msg and list(dest.iterdir()) == []


def test_hostile_tar_through_the_builder_and_streaming(root, tmp_path):
    """A duplicated member of the audio tar: the builder (local reader) and streaming both refuse it."""
    from perckit.hf.entrypoints import builder_class

    shutil.rmtree(root / "videos")  # archive mode
    tar = root / "archives/audios.tar"
    with tarfile.open(tar, "a") as t:
        info = tarfile.TarInfo("audios/w1_0000.wav")
        info.size = 3
        t.addfile(info, io.BytesIO(b"bad"))
    _fails(lambda: _build(root, tmp_path), "archives/audios.tar", "audios/w1_0000.wav", "appears twice")
    b = builder_class(NAME)(config_name=CONFIG, data_dir=str(root))
    _fails(lambda: list(b.as_streaming_dataset("test")), "archives/audios.tar", "audios/w1_0000.wav", "appears twice")


def test_member_cap_applies_before_reading(tmp_path, monkeypatch):
    from perckit.reason_av_edit.read import archives

    path = tmp_path / "a.tar"
    path.write_bytes(_tar_bytes([("audios/a.wav", b"x" * 5000)]))
    monkeypatch.setattr(archives, "MAX_MEMBER_BYTES", 4096)
    for fn in (_local, _stream):
        _fails(lambda: fn(path, "a.tar"), "audios/a.wav", "declares 5000 bytes, more than the limit of 4096")


def test_unwanted_members_are_skipped_without_reading(tmp_path, monkeypatch):
    path = tmp_path / "a.tar"
    path.write_bytes(_tar_bytes([("audios/a.wav", b"a" * 700), ("audios/b.wav", b"b" * 900), ("audios/c.wav", b"c")]))
    opened = []
    real = tarfile.TarFile.extractfile
    monkeypatch.setattr(tarfile.TarFile, "extractfile", lambda self, m: (opened.append(m.name), real(self, m))[1])
    for reader in (iter_tar_file, lambda p, lab, w, s: iter_tar_members(datasets.DownloadManager(dataset_name=NAME).iter_archive(str(p)), lab, w, s)):
        skipped = []
        assert list(reader(path, "a.tar", {"audios/b.wav"}, skipped)) == [("audios/b.wav", b"b" * 900)]
        assert skipped == ["audios/a.wav", "audios/c.wav"]
    assert "audios/a.wav" not in opened and "audios/c.wav" not in opened


def test_extract_never_replaces_a_user_file(base, tmp_path):
    root = tmp_path / "rel"
    (root / "archives").mkdir(parents=True)
    shutil.copy(base.root / "archives/audios.tar", root / "archives/audios.tar")
    (root / "audios").mkdir()
    (root / "audios/w1_0000.wav").write_bytes(b"my own recording")
    _fails(lambda: extract_archives(root), "audios/w1_0000.wav", "already exists with other content", "refusing to extract")
    assert (root / "audios/w1_0000.wav").read_bytes() == b"my own recording"
    # the same bytes already there: accepted (extracting twice is harmless)
    (root / "audios/w1_0000.wav").unlink()
    first = extract_archives(root)
    assert extract_archives(root) == first == ["audios/w1_0000.wav"]
    assert not [p for p in (root / "audios").iterdir() if p.name.startswith(".perckit")]


def test_extract_writes_nothing_when_a_later_archive_is_refused(tmp_path):
    root = tmp_path / "rel"
    (root / "archives").mkdir(parents=True)
    (root / "archives/a.tar").write_bytes(_tar_bytes([("audios/a.wav", b"abc")]))
    (root / "archives/b.tar").write_bytes(_tar_bytes([("videos/../../x.mp4", b"abc")]))
    dest = tmp_path / "out"
    dest.mkdir()
    _fails(lambda: extract_archives(root, dest), "archives/b.tar", "'..' component", "refusing to extract")
    assert list(dest.iterdir()) == []


def test_extract_refuses_names_colliding_across_archives(tmp_path):
    root = tmp_path / "rel"
    (root / "archives").mkdir(parents=True)
    (root / "archives/a.tar").write_bytes(_tar_bytes([("audios/a.wav", b"abc")]))
    (root / "archives/b.tar").write_bytes(_tar_bytes([("audios/a.wav", b"xyz")]))
    dest = tmp_path / "out"
    dest.mkdir()
    _fails(lambda: extract_archives(root, dest), "archives/b.tar", "audios/a.wav", "appears twice (also in archive 'archives/a.tar')")
    assert list(dest.iterdir()) == []


# ---------------------------------------------------------------- section 3: prediction and reference media


def _wav(x, sr=16000, channels=1, fmt="WAV"):
    import soundfile as sf

    buf = io.BytesIO()
    data = np.repeat(np.asarray(x, np.float64)[:, None], channels, axis=1) if channels > 1 else np.asarray(x, np.float64)
    sf.write(buf, data, sr, format=fmt, subtype="PCM_16")
    return buf.getvalue()


def test_tiny_flac_declaring_hours_is_refused_before_decoding():
    from perckit.reason_av_edit.metric import decode_wav

    flac = _wav(np.zeros(8000 * 3 * 3600), sr=8000, fmt="FLAC")  # 3 hours of silence in a few hundred KB
    assert len(flac) < 1_000_000
    tracemalloc.start()
    try:
        with pytest.raises(PredictionError, match=r"86400000 samples at 8000 Hz last 10800 s, more than the limit of 600 s"):
            decode_wav(flac, "w.flac")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50_000_000, peak  # decoding it would need 691 MB


def test_flac_of_unknown_length_stops_at_the_limit():
    from perckit.reason_av_edit.metric import decode_wav

    d = bytearray(_wav(np.zeros(8000 * 700), sr=8000, fmt="FLAC"))
    d[8 + 13] &= 0xF0  # STREAMINFO total samples = 0 ("unknown")
    d[8 + 14:8 + 18] = b"\x00\x00\x00\x00"
    with pytest.raises(PredictionError, match=r"decoding gave more than 4800000 samples at 8000 Hz"):
        decode_wav(bytes(d), "w.flac")


def test_wav_declaring_too_many_channels_is_refused():
    from perckit.reason_av_edit.metric import decode_wav

    with pytest.raises(PredictionError, match=r"declares 64 channels; expected 1 to 16"):
        decode_wav(_wav(np.zeros(100), channels=64), "w.wav")


def test_reference_media_bounded_too():
    from perckit.reason_av_edit import metric as core
    from perckit.reason_av_edit import features as feats

    ref = {"sample_id": "s", "category": "when_only", "sub_track": "T1_word_phrase_swap", "anchor_mask": dict(feats.NOT_PROVIDED_RLE),
           "reason_audio": {"bytes": _wav(np.zeros(1600), channels=64), "path": ""}, "mask_video": dict(feats.NOT_PROVIDED_MEDIA),
           "edit_window_s": None, "edit_window_frames": None, "fps": None, "num_frames": None, "selected_instance_index": None}
    pred = feats.make_prediction("s", edit_window_s=[0.0, 1.0])
    with pytest.raises(PredictionError, match=r"reference sample 's': reason_audio.*declares 64 channels"):
        core.av_reasoning([pred], [ref])


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_media_path_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    from perckit.reason_av_edit.features import media_bytes

    path = {"fifo": tmp_path / "p.wav", "device": "/dev/zero", "folder": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    says = {"fifo": "a FIFO", "device": "a device", "folder": "a folder"}[kind]
    _fails(lambda: _bounded(lambda: media_bytes({"bytes": None, "path": str(path)}, "prediction sample 's': reason_audio")),
           "prediction sample 's': reason_audio", says)


def test_media_path_over_the_cap_is_refused(tmp_path, monkeypatch):
    from perckit.reason_av_edit import layout
    from perckit.reason_av_edit.features import media_bytes

    (tmp_path / "a.wav").write_bytes(b"x" * 2000)
    monkeypatch.setattr(layout, "MAX_MEDIA_FILE_BYTES", 1000)
    _fails(lambda: media_bytes({"bytes": None, "path": str(tmp_path / "a.wav")}, "w"), "holds 2000 bytes, more than the limit of 1000")


def test_media_path_under_a_base_stays_inside(tmp_path):
    from perckit.reason_av_edit.features import media_bytes

    (tmp_path / "secret.wav").write_bytes(SECRET)
    (tmp_path / "base").mkdir()
    for p in ("../secret.wav", str(tmp_path / "secret.wav")):
        _fails(lambda: media_bytes({"bytes": None, "path": p}, "w", base=tmp_path / "base"), "w: path")


def _mask_mp4(frames=10, h=32, w=32):
    from perckit.samples.reason_av_edit import encode_mp4

    arr = np.zeros((frames, h, w, 3), np.uint8)
    arr[:, 8:24, 8:24] = 255
    return encode_mp4(arr, fps=25, lossless=True)


@pytest.mark.parametrize("cap, value, says", [
    ("MAX_VIDEO_FRAMES", 5, "declares 10 frames, more than the limit of 5"),
    ("MAX_VIDEO_PIXELS", 1000, "declares 32 x 32 frames, more than the limit of 1000 pixels"),
    ("MAX_VIDEO_DURATION_S", 0.1, "more than the limit of 0.1 s"),
])
def test_mask_video_header_checked_before_decoding(monkeypatch, cap, value, says):
    import cv2

    from perckit.io import media as video_caps
    from perckit.reason_av_edit import metric as core

    data = _mask_mp4()
    monkeypatch.setattr(video_caps, cap, value)
    reads = []
    real = cv2.VideoCapture

    class Spy:
        def __init__(self, *a):
            self.cap = real(*a)

        def read(self):
            reads.append(1)
            return self.cap.read()

        def __getattr__(self, k):
            return getattr(self.cap, k)

    monkeypatch.setattr(cv2, "VideoCapture", Spy)
    with pytest.raises(PredictionError, match=says):
        core.decode_mask_video(data, "", "prediction sample 's': mask_video", 127, 0.001)
    assert reads == []  # refused on the header, nothing decoded


def test_mask_video_decoding_stops_past_the_frame_cap(monkeypatch):
    """A header that understates its frames: the decoding loop enforces the cap as well."""
    from perckit.reason_av_edit import metric as core
    from perckit.io import media as video_caps

    monkeypatch.setattr(core, "probe_video", lambda *a: None)
    monkeypatch.setattr(video_caps, "MAX_VIDEO_FRAMES", 4)
    with pytest.raises(PredictionError, match="has more than 4 frames"):
        core.decode_mask_video(_mask_mp4(), "", "w", 127, 0.001)


# ---------------------------------------------------------------- section 2/3: prediction folders


def _pred_dir(tmp_path, files):
    d = tmp_path / "preds"
    d.mkdir(exist_ok=True)
    for name, data in files.items():
        (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    return d


def test_prediction_ids_cannot_leave_the_folder(tmp_path):
    from perckit.reason_av_edit.read.predictions import load_predictions_dir

    (tmp_path / "outside.json").write_text('{"edit_window_s": [0, 1]}')
    d = _pred_dir(tmp_path, {})
    for sid in ("../outside", "/etc/outside", "a\\..\\..\\outside", ".."):
        _fails(lambda: load_predictions_dir(d, [sid]), "sample id")


@pytest.mark.parametrize("name", ["s.json", "s_anchor_mask.png", "s_reason_audio.wav", "s_mask.mp4"])
def test_prediction_file_symlinked_out_is_refused(tmp_path, name):
    from perckit.reason_av_edit.read.predictions import load_predictions_dir

    (tmp_path / "secret").write_bytes(SECRET)
    d = _pred_dir(tmp_path, {})
    os.symlink(tmp_path / "secret", d / name)
    _fails(lambda: load_predictions_dir(d, ["s"]), name, "symbolic link leaves the root")


@pytest.mark.parametrize("name", ["s.json", "s_reason_audio.wav", "s_mask.mp4", "s_anchor_mask.png"])
def test_prediction_fifo_is_refused_not_ignored(tmp_path, name):
    from perckit.reason_av_edit.read.predictions import load_predictions_dir

    d = _pred_dir(tmp_path, {})
    os.mkfifo(d / name)
    for ids in (["s"], None):
        _fails(lambda: _bounded(lambda: load_predictions_dir(d, ids)), name, "a FIFO")


def test_prediction_files_over_their_cap_are_refused(tmp_path, monkeypatch):
    from perckit.reason_av_edit.read import predictions as rio

    d = _pred_dir(tmp_path, {"s.json": '{"edit_window_s": [0, 1]}' + " " * 2000})
    monkeypatch.setitem(rio.LIMITS, "json", 1000)
    _fails(lambda: rio.load_predictions_dir(d, ["s"]), "s.json", "more than the limit of 1000 bytes")


# ---------------------------------------------------------------- section 4: repeated keys and columns


def test_annotation_repeating_a_key_is_refused(root, tmp_path):
    (root / "annotations/w1_0000.json").write_text('{"edit_window_s": [0.1, 0.5], "edit_window_s": [0.2, 0.9]}')
    _fails(lambda: _build(root, tmp_path, source="extracted"), "w1_0000.json", "duplicate key 'edit_window_s'")


def test_metadata_csv_repeating_a_column_is_refused(root, tmp_path):
    lines = (root / "metadata.csv").read_text().splitlines()
    lines[0] += ",video"
    lines[1] += ",videos/other.mp4"
    (root / "metadata.csv").write_text("\n".join(lines) + "\n")
    _fails(lambda: read_metadata(root), "metadata.csv line 1: column 'video' appears twice")
    lines[0] = lines[0][: -len(",video")] + ", video "
    (root / "metadata.csv").write_text("\n".join(lines) + "\n")
    _fails(lambda: read_metadata(root), "column 'video' appears twice")


def test_metadata_csv_alias_columns_that_disagree_warn_and_the_first_is_read(root, caplog):
    lines = (root / "metadata.csv").read_text().splitlines()
    (root / "metadata.csv").write_text("\n".join([lines[0] + ",sample_id", lines[1] + ",other"]) + "\n")
    with caplog.at_level("WARNING"):
        assert [s.sample_id for s in read_metadata(root)] == ["w1_0000"]  # the aliases are inferred: 'id' first
    assert "line 2: columns 'id' and 'sample_id' both give the field 'sample_id' but differ" in caplog.text
    (root / "metadata.csv").write_text("\n".join([lines[0] + ",sample_id", lines[1] + ",w1_0000"]) + "\n")
    assert [s.sample_id for s in read_metadata(root)] == ["w1_0000"]  # the same value twice is not ambiguous


def test_prediction_json_repeating_a_key_is_refused(tmp_path):
    from perckit.reason_av_edit.read.predictions import load_predictions_dir

    d = _pred_dir(tmp_path, {"s.json": '{"selected_instance_index": 1, "selected_instance_index": 2}'})
    _fails(lambda: load_predictions_dir(d), "s.json", "duplicate key 'selected_instance_index'")


# ---------------------------------------------------------------- section 5: BOM and mask PNGs


def test_a_leading_bom_is_skipped_in_every_text_reader(root, tmp_path):
    from perckit.reason_av_edit.read.predictions import load_predictions_dir

    for p in (root / "metadata.csv", root / "annotations/w1_0000.json"):
        p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
    row = _build(root, tmp_path, source="extracted")[0]
    assert row["sample_id"] == "w1_0000" and row["edit_window_s"] is not None
    assert not row["annotation_json"].startswith("\ufeff")
    d = _pred_dir(tmp_path, {"s.json": b'\xef\xbb\xbf{"edit_window_s": [0.5, 1.0]}'})
    assert load_predictions_dir(d)[0]["edit_window_s"] == [0.5, 1.0]


def _rgba_png(alpha_only: bool) -> bytes:
    from PIL import Image

    arr = np.zeros((4, 6, 4), np.uint8)
    if alpha_only:
        arr[1:3, 2:5, 3] = 255  # colour channels all 0: only the alpha says foreground
    else:
        arr[..., 3] = 255  # opaque everywhere
        arr[1:3, 2:5, :3] = (200, 10, 10)
    buf = io.BytesIO()
    Image.fromarray(arr, "RGBA").save(buf, format="PNG")
    return buf.getvalue()


@pytest.mark.parametrize("alpha_only", [True, False], ids=["alpha-only-foreground", "opaque-colour"])
def test_rgba_anchor_masks_through_the_builder_and_the_prediction_folder(root, tmp_path, alpha_only):
    """Any stored channel, alpha included, > threshold (perckit.io.images.mask_foreground)."""
    from perckit import rle
    from perckit.reason_av_edit.read.predictions import load_predictions_dir

    png = _rgba_png(alpha_only)
    (root / "reason_visual_mask/w1_0000.png").write_bytes(png)
    row = _build(root, tmp_path, source="extracted")[0]
    expected = 24 if not alpha_only else 6  # opaque alpha (255 > 0) makes every one of the 4 x 6 pixels foreground
    assert rle.area(row["anchor_mask"]) == expected and row["anchor_mask"]["size"] == [4, 6]
    pred = load_predictions_dir(_pred_dir(tmp_path, {"s_anchor_mask.png": png}))[0]
    assert rle.area(pred["anchor_mask"]) == expected
