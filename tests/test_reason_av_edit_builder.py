"""ReasonAVEdit-Bench builder: archives vs extracted folders, streaming, media typing, truncated / incomplete tars,
the bad input of spec section 6, the Hub path, and both datasets lines."""

import io
import json
import logging
import shutil
import tarfile

import datasets
import numpy as np
import pytest
from helpers.common import REPO, needs_scripts
from helpers.fake_hub import fake_snapshot_download
from helpers.harness import messages as _messages

from perckit.hf.entrypoints import build_split
from perckit.errors import InferredShapeError, OptionError, ReleaseFormatError, ReleaseNotFoundError
from perckit.reason_av_edit import features as feats
from perckit.reason_av_edit.layout import MEDIA_FOLDERS
from perckit.reason_av_edit.read.archives import extract_archives, iter_tar_file, iter_tar_members
from perckit.reason_av_edit.read.metadata import ANNOTATION_FIELDS, DOCUMENTED_COLUMNS, extract_annotation_fields, parse_metadata, read_metadata
from perckit.reason_av_edit.rows import anchor_mask_from_png

NAME, CONFIG = "reason_av_edit", "default"
MEDIA_COLUMNS = ("video", "audio", "mask_video", "reason_visual", "reason_visual_mask", "reason_audio", "ref_image")


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    from perckit.samples import write_release

    return write_release("reason_av_edit", tmp_path_factory.mktemp("rae"), extracted=True)


@pytest.fixture(scope="module")
def archive_ds(release, tmp_path_factory):
    return build_split(NAME, CONFIG, release.root, tmp_path_factory.mktemp("cache_a"), source="archives")


@pytest.fixture(scope="module")
def extracted_ds(release, tmp_path_factory):
    return build_split(NAME, CONFIG, release.root, tmp_path_factory.mktemp("cache_e"), source="extracted")


def _raw(ds):
    """Rows with undecoded images (bytes + path), so that rows compare exactly."""
    for c in ("reason_visual", "reason_visual_mask", "ref_image"):
        ds = ds.cast_column(c, datasets.Image(decode=False))
    return list(ds)


def _archives_only(release, dest):
    """A copy of the release with only the Hub files (metadata.csv, annotations/, archives/)."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(release.root / "metadata.csv", dest / "metadata.csv")
    shutil.copytree(release.root / "annotations", dest / "annotations")
    shutil.copytree(release.root / "archives", dest / "archives")
    return dest


def _rewrite_tar(path, keep=lambda name: True):
    members = []
    with tarfile.open(path) as tar:
        for m in tar.getmembers():
            if keep(m.name):
                members.append((m.name, tar.extractfile(m).read()))
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


# ---------------------------------------------------------------- layout and rows


def test_release_layout(release):
    root = release.root
    assert sorted(p.name for p in (root / "archives").iterdir()) == sorted(f"{f}.tar" for f in MEDIA_FOLDERS)
    with tarfile.open(root / "archives/videos.tar") as tar:
        names = tar.getnames()
    assert names == [f"videos/{sid}.mp4" for sid in release.sample_ids]
    assert len(release.sample_ids) == 16 and len({release.sub_track[s] for s in release.sample_ids}) == 16
    assert (root / "annotations" / f"{release.sample_ids[0]}.json").is_file()
    header = (root / "metadata.csv").read_text().splitlines()[0].split(",")
    assert set(DOCUMENTED_COLUMNS) <= set(header)
    assert release.visual_null == ["h3_0000"] and release.audio_null == ["c4_0000", "r3_0000"]
    assert sorted(release.ref_image) == ["c4_0000", "r1_0000", "r2_0000", "r3_0000"]


def test_archives_and_extracted_give_identical_rows(archive_ds, extracted_ds, release):
    assert archive_ds.features == extracted_ds.features == feats.builder_features()
    a, e = _raw(archive_ds), _raw(extracted_ds)
    assert [r["sample_id"] for r in a] == [r["sample_id"] for r in e] == release.sample_ids  # tar order == CSV order here
    for ra, re_ in zip(sorted(a, key=lambda r: r["sample_id"]), sorted(e, key=lambda r: r["sample_id"])):
        assert ra == re_, ra["sample_id"]


def test_media_typing_and_values(archive_ds, release):
    f = archive_ds.features
    assert isinstance(f["video"], datasets.Video) and f["video"].decode is False
    assert isinstance(f["mask_video"], datasets.Video) and f["mask_video"].decode is False
    assert f["audio"] == f["reason_audio"] == {"bytes": datasets.Value("binary"), "path": datasets.Value("string")}
    assert isinstance(f["reason_visual"], datasets.Image) and isinstance(f["ref_image"], datasets.Image)
    rows = {r["sample_id"]: r for r in _raw(archive_ds)}
    row = rows["w1_0000"]
    for c in MEDIA_COLUMNS[:-1]:
        assert isinstance(row[c]["bytes"], bytes) and row[c]["path"].split("/", 1)[1].startswith("w1_0000.")
    assert row["video"]["path"] == "videos/w1_0000.mp4" and row["ref_image"] is None
    assert row["video"]["bytes"] == (release.root / "videos/w1_0000.mp4").read_bytes()
    import av
    import soundfile as sf

    with av.open(io.BytesIO(row["video"]["bytes"])) as c:
        assert c.streams.video[0].codec_context.name == "h264" and c.streams.video[0].frames == release.frames
        assert float(c.streams.video[0].average_rate) == 25.0
        assert c.streams.audio[0].codec_context.name == "aac" and c.streams.audio[0].codec_context.sample_rate == 16000
    x, sr = sf.read(io.BytesIO(row["audio"]["bytes"]))
    assert sr == 16000 and x.ndim == 1 and len(x) == release.frames * 640
    assert release.frames % 8 == 1 and all(h % 32 == 0 and w % 32 == 0 for h, w in release.size.values())


def test_row_fields(archive_ds, release):
    rows = {r["sample_id"]: r for r in archive_ds}
    assert {s: r["category"] for s, r in rows.items()} == release.category
    for sid, r in rows.items():
        assert r["sub_track"] == release.sub_track[sid]
        assert r["edit_window_frames"] == list(release.window_frames[sid])
        assert r["edit_window_s"] == list(release.window_s[sid])
        assert r["anchor_frame"] == release.anchor_frame[sid]
        assert r["selected_instance_index"] == release.selected_instance_index[sid]
        assert r["fps"] == 25.0 and r["num_frames"] == release.frames
        assert r["anchor_mask"]["size"] == list(release.size[sid])
        assert json.loads(r["annotation_json"])["id"] == sid
        assert (r["ref_image"] is not None) == (sid in release.ref_image)
        assert r["language"] in ("en", "zh") and r["orientation"] == ("portrait" if release.size[sid][0] > release.size[sid][1] else "landscape")
    from perckit import rle

    h3 = rows["h3_0000"]
    assert rle.area(h3["anchor_mask"]) == 0 and h3["anchor_frame"] is None
    assert rle.area(rows["c4_0000"]["anchor_mask"]) > 0  # the placement box
    # the anchor mask is the reason_visual_mask PNG > 0, and the target region of reason_visual is gray 127
    w1 = rows["w1_0000"]
    m = rle.decode(w1["anchor_mask"])
    assert np.array_equal(m, np.asarray(w1["reason_visual_mask"]) > 0)
    assert (np.asarray(w1["reason_visual"])[m] == 127).all()
    # alternative annotation keys resolve to the same fields
    assert release.alt_keys and all(rows[s]["edit_window_s"] == list(release.window_s[s]) for s in release.alt_keys)


def test_b1_three_samples_and_no_extract(tmp_path, monkeypatch):
    """Spec B1: W1, H3, C4; seven tars with folder-prefixed members; iter_archive, never extract."""
    from perckit.samples import write_release
    from perckit import rle

    fx = write_release("reason_av_edit", tmp_path / "rel", sub_tracks=("W1", "H3", "C4"))
    assert sorted(p.name for p in (fx.root / "archives").iterdir()) == sorted(f"{f}.tar" for f in MEDIA_FOLDERS)

    def boom(*a, **k):
        raise AssertionError("extract() must not be called")

    monkeypatch.setattr(datasets.DownloadManager, "extract", boom)
    monkeypatch.setattr(datasets.StreamingDownloadManager, "extract", boom)
    monkeypatch.setattr(datasets.DownloadManager, "download_and_extract", boom)
    ds = build_split(NAME, CONFIG, fx.root, tmp_path / "c")
    rows = {r["sample_id"]: r for r in ds}
    assert {k: r["category"] for k, r in rows.items()} == {"w1_0000": "where_only", "h3_0000": "which_only", "c4_0000": "combined"}
    assert rle.area(rows["h3_0000"]["anchor_mask"]) == 0
    assert rows["c4_0000"]["ref_image"] is not None and rows["w1_0000"]["ref_image"] is None


def test_extracting_the_archives_gives_the_same_rows(release, archive_ds, tmp_path):
    root = _archives_only(release, tmp_path / "rel")
    written = extract_archives(root)
    assert len(written) == 16 * 6 + 4
    ds = build_split(NAME, CONFIG, root, tmp_path / "c")  # source="auto" picks the extracted folders
    assert _raw(ds) == _raw(archive_ds)


def test_auto_source_and_option_errors(release, tmp_path):
    root = _archives_only(release, tmp_path / "rel")
    from perckit.hf.entrypoints import builder_class

    B = builder_class(NAME)
    b = B(config_name=CONFIG, data_dir=str(root), cache_dir=str(tmp_path / "c"))
    assert b._source(root, read_metadata(root)) == "archives"
    with pytest.raises(ReleaseNotFoundError, match=r"source='extracted'.*videos"):
        build_split(NAME, CONFIG, root, tmp_path / "c2", source="extracted")
    with pytest.raises(OptionError, match=r"option 'source'"):
        build_split(NAME, CONFIG, root, tmp_path / "c3", source="zip")
    with pytest.raises(OptionError, match=r"png_mask_threshold"):
        build_split(NAME, CONFIG, root, tmp_path / "c4", png_mask_threshold=-1)


# ---------------------------------------------------------------- streaming and both lines


def test_streaming_plain_class_first_rows(release, archive_ds, extracted_ds):
    from perckit.hf.entrypoints import builder_class

    for source, ds in (("archives", archive_ds), ("extracted", extracted_ds)):
        b = builder_class(NAME)(config_name=CONFIG, data_dir=str(release.root), source=source)
        it = iter(b.as_streaming_dataset("test"))
        first = [next(it) for _ in range(3)]
        for got, want in zip(first, ds.select(range(3))):
            assert got == want


@needs_scripts
def test_streaming_load_dataset(release, archive_ds):
    it = datasets.load_dataset(str(REPO / "builders" / NAME), data_dir=str(release.root), source="archives",
                               trust_remote_code=True, streaming=True)["test"]
    rows = list(it.take(2))
    assert rows == list(archive_ds.select(range(2)))


def test_plain_class_equals_build_split(release, archive_ds, tmp_path):
    """The plain class (the 5.x path) and build_split (load_dataset on 3.6) build identical rows."""
    from perckit.hf.entrypoints import builder_class

    b = builder_class(NAME)(config_name=CONFIG, data_dir=str(release.root), cache_dir=str(tmp_path), source="archives")
    b.download_and_prepare()
    assert _raw(b.as_dataset("test")) == _raw(archive_ds)
    assert b._writer_batch_size == 16  # rows carry a sample's media bytes


# ---------------------------------------------------------------- truncated and incomplete tars


def test_truncated_tar_names_archive_and_member(release, tmp_path):
    root = _archives_only(release, tmp_path / "rel")
    tar = root / "archives/audios.tar"
    data = tar.read_bytes()
    tar.write_bytes(data[: 512 + 3000])  # inside the first member's content
    with pytest.raises(Exception) as info:
        build_split(NAME, CONFIG, root, tmp_path / "c")
    msgs = _messages(info.value)
    assert any("archives/audios.tar" in m and "audios/w1_0000.wav" in m and "truncated" in m for m in msgs), msgs


def test_tar_cut_at_a_member_boundary(release, tmp_path):
    root = _archives_only(release, tmp_path / "rel")
    tar = root / "archives/reason_visual.tar"
    with tarfile.open(tar) as t:
        second = t.getmembers()[1]
    tar.write_bytes(tar.read_bytes()[: second.offset])  # exactly the first member, no end-of-archive blocks
    with pytest.raises(Exception) as info:
        build_split(NAME, CONFIG, root, tmp_path / "c")
    msgs = _messages(info.value)
    assert any("archives/reason_visual.tar" in m and "reason_visual/w2_0000.png" in m for m in msgs), msgs


@pytest.mark.parametrize("archive, member", [("reason_audio", "reason_audio/t1_0000.wav"), ("videos", "videos/c2_0000.mp4")])
def test_missing_member_names_archive_and_member(release, tmp_path, archive, member):
    root = _archives_only(release, tmp_path / "rel")
    _rewrite_tar(root / f"archives/{archive}.tar", keep=lambda n: n != member)
    with pytest.raises(Exception) as info:
        build_split(NAME, CONFIG, root, tmp_path / "c")
    msgs = _messages(info.value)
    assert any(f"archives/{archive}.tar" in m and f"has no member {member!r}" in m and "metadata.csv line" in m for m in msgs), msgs


def test_missing_member_in_streaming(release, tmp_path):
    from perckit.hf.entrypoints import builder_class

    root = _archives_only(release, tmp_path / "rel")
    _rewrite_tar(root / "archives/masks.tar", keep=lambda n: n != "masks/w3_0000.mp4")
    b = builder_class(NAME)(config_name=CONFIG, data_dir=str(root))
    with pytest.raises(ReleaseNotFoundError, match=r"archives/masks.tar.*'masks/w3_0000.mp4'.*column 'mask'"):
        list(b.as_streaming_dataset("test"))


def test_member_on_disk_is_used(release, archive_ds, tmp_path):
    """A CSV path missing from the tars but present on disk is read from disk (only 'neither' raises)."""
    root = _archives_only(release, tmp_path / "rel")
    _rewrite_tar(root / "archives/ref_images.tar", keep=lambda n: n != "ref_images/r1_0000.jpg")
    (root / "ref_images").mkdir()
    shutil.copy(release.root / "ref_images/r1_0000.jpg", root / "ref_images/r1_0000.jpg")
    assert _raw(build_split(NAME, CONFIG, root, tmp_path / "c")) == _raw(archive_ds)


# ---------------------------------------------------------------- bad input (spec section 6)


@pytest.fixture
def small(tmp_path):
    from perckit.samples import write_release

    return write_release("reason_av_edit", tmp_path / "rel", sub_tracks=("W1", "T1"))


def _csv(small):
    return small.root / "metadata.csv"


def test_missing_metadata_csv(small, tmp_path):
    _csv(small).unlink()
    with pytest.raises(ReleaseNotFoundError, match=r"'metadata.csv' not found"):
        build_split(NAME, CONFIG, small.root, tmp_path / "c")
    with pytest.raises(ValueError, match="does not exist"):
        build_split(NAME, CONFIG, tmp_path / "nope", tmp_path / "c")


def test_csv_without_documented_columns(small, tmp_path):
    text = _csv(small).read_text().replace("reason_audio,", "reason_sound,", 1)
    _csv(small).write_text(text)
    with pytest.raises(ReleaseFormatError, match=r"metadata.csv: missing the documented column\(s\) \['reason_audio'\].*found"):
        build_split(NAME, CONFIG, small.root, tmp_path / "c")


def test_csv_path_in_no_tar_and_not_on_disk(small, tmp_path):
    text = _csv(small).read_text().replace("audios/w1_0000.wav", "audios/w1_9999.wav")
    _csv(small).write_text(text)
    with pytest.raises(Exception) as info:
        build_split(NAME, CONFIG, small.root, tmp_path / "c")
    msgs = _messages(info.value)
    assert any("archives/audios.tar" in m and "'audios/w1_9999.wav'" in m and "column 'audio'" in m and "not on disk" in m for m in msgs), msgs


def test_duplicate_sample_id(small, tmp_path):
    text = _csv(small).read_text().replace("t1_0000,T1", "w1_0000,T1")
    _csv(small).write_text(text)
    with pytest.raises(ReleaseFormatError, match=r"line 3: duplicate sample_id 'w1_0000' \(first on line 2\)"):
        build_split(NAME, CONFIG, small.root, tmp_path / "c")


def test_unknown_sub_track_prefix(small, tmp_path):
    text = _csv(small).read_text().replace("T1_word_phrase_swap", "X9_foo")
    _csv(small).write_text(text)
    with pytest.raises(ReleaseFormatError, match=r"column 'sub_track'.*'X9_foo'.*prefix 'X'.*\['C', 'H', 'R', 'T', 'W'\]"):
        build_split(NAME, CONFIG, small.root, tmp_path / "c")


def test_invalid_annotation_json(small, tmp_path):
    (small.root / "annotations/t1_0000.json").write_text("{broken")
    with pytest.raises(Exception) as info:
        build_split(NAME, CONFIG, small.root, tmp_path / "c")
    assert any("t1_0000.json" in m and "expected valid JSON" in m for m in _messages(info.value))


def test_window_end_before_start_is_an_ignored_annotation(small, tmp_path, caplog):
    path = small.root / "annotations/w1_0000.json"
    obj = json.loads(path.read_text())
    obj["edit_window_s"] = [0.5, 0.2]
    path.write_text(json.dumps(obj))
    with caplog.at_level(logging.WARNING):
        rows = {r["sample_id"]: r for r in build_split(NAME, CONFIG, small.root, tmp_path / "c")}
    assert [m for m in caplog.messages if "w1_0000.json" in m and "'edit_window_s'" in m and "end < start" in m and "ignored" in m]
    assert rows["w1_0000"]["edit_window_s"] is None and rows["w1_0000"]["anchor_frame"] is None


def test_missing_annotation_gives_nulls_and_a_warning(small, tmp_path, caplog):
    (small.root / "annotations/t1_0000.json").unlink()
    with caplog.at_level(logging.WARNING):
        ds = build_split(NAME, CONFIG, small.root, tmp_path / "c")
    row = {r["sample_id"]: r for r in ds}["t1_0000"]
    assert row["edit_window_s"] is None and row["anchor_frame"] is None and row["annotation_json"] is None
    assert row["fps"] is None and row["ref_image"] is None
    assert "t1_0000.json" in caplog.text and "not found" in caplog.text


def test_column_aliases_and_defaults(small, tmp_path):
    lines = _csv(small).read_text().splitlines()
    header = lines[0].replace("id,", "sample_id,", 1).replace(",mask,", ",masks,").replace("ref_image", "reference_image")
    header = header.replace("language", "lang").replace("category,", "cat_unused,")
    _csv(small).write_text("\n".join([header] + lines[1:]) + "\n")
    rows = {r["sample_id"]: r for r in build_split(NAME, CONFIG, small.root, tmp_path / "c")}
    assert rows["t1_0000"]["category"] == "when_only" and rows["w1_0000"]["mask_video"]["path"] == "masks/w1_0000.mp4"
    assert rows["w1_0000"]["language"] == "en"


def test_id_defaults_to_video_stem_and_empty_ref_is_null():
    csv = ("sub_track,instruction,video,audio,reason_visual,reason_visual_mask,reason_audio\n"
           "R1_person_identity,do it,./videos/abc.mp4,audios/abc.wav,reason_visual/abc.png,reason_visual_mask/abc.png,reason_audio/abc.wav\n")
    s = parse_metadata(csv.encode())[0]
    assert s.sample_id == "abc" and s.category == "reference" and s.video == "videos/abc.mp4"
    assert s.ref_image is None and s.mask_video is None and s.language is None
    with pytest.raises(ReleaseFormatError, match=r"'\.\.' component"):
        parse_metadata(csv.replace("audios/abc.wav", "../abc.wav").encode())
    with pytest.raises(ReleaseFormatError, match="relative to the release root"):
        parse_metadata(csv.replace("audios/abc.wav", "/etc/abc.wav").encode())


def test_extract_annotation_fields_keys():
    f = extract_annotation_fields({"t0": 1, "t1": 2.5, "f0": 25, "f1": 62, "anchor_frame_idx": None, "target_instance": 1}, "a.json")
    assert f == {"edit_window_s": [1.0, 2.5], "edit_window_frames": [25, 62], "anchor_frame": None,
                 "selected_instance_index": 1, "fps": None, "num_frames": None, "duration_s": None}
    assert extract_annotation_fields({"fps": None}, "a.json") == dict.fromkeys(ANNOTATION_FIELDS)
    # the keys are inferred: another shape is an InferredShapeError, which read_annotation turns into one warning
    with pytest.raises(InferredShapeError, match=r"a.json: expected at least one of the keys"):
        extract_annotation_fields({}, "a.json")
    with pytest.raises(InferredShapeError, match=r"a.json: key 'window_frames': expected a \[start, end\) pair"):
        extract_annotation_fields({"window_frames": [1, 2, 3]}, "a.json")
    with pytest.raises(InferredShapeError, match=r"'edit_start_frame/edit_end_frame' has end < start"):
        extract_annotation_fields({"edit_start_frame": 9, "edit_end_frame": 3}, "a.json")


def test_png_mask_threshold():
    from PIL import Image

    from perckit import rle

    arr = np.zeros((4, 6), np.uint8)
    arr[1:3, 2:5] = 100
    arr[0, 0] = 200
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    assert rle.area(anchor_mask_from_png(buf.getvalue(), 0, "m.png")) == 7
    assert rle.area(anchor_mask_from_png(buf.getvalue(), 127, "m.png")) == 1
    with pytest.raises(ReleaseFormatError, match="m.png: expected a readable mask image"):
        anchor_mask_from_png(b"not a png", 0, "m.png")


def test_png_mask_with_a_broken_chunk_is_a_release_error():
    """Pillow raises SyntaxError ("broken PNG file") for a chunk length that does not fit the data."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.zeros((4, 6), np.uint8)).save(buf, format="PNG")
    data = bytearray(buf.getvalue())
    data[36] = 2  # the low byte of the IDAT chunk's length (after the 8-byte signature and the 25-byte IHDR)
    with pytest.raises(ReleaseFormatError, match="m.png: expected a readable mask image.*broken PNG file"):
        anchor_mask_from_png(bytes(data), 0, "m.png")


def test_extract_archives_rejects_unsafe_members(tmp_path):
    root = tmp_path / "rel"
    (root / "archives").mkdir(parents=True)

    def tar_with(member):
        with tarfile.open(root / "archives/x.tar", "w") as tar:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)

    for name in ("/etc/passwd_x", "videos/../../escape.txt"):
        m = tarfile.TarInfo(name)
        m.size = 1
        tar_with(m)
        with pytest.raises(ReleaseFormatError, match=r"archives/x.tar.*refusing to extract"):
            extract_archives(root)
    link = tarfile.TarInfo("videos/link")
    link.type, link.linkname = tarfile.SYMTYPE, "../../outside"
    tar_with(link)
    with pytest.raises(ReleaseFormatError, match=r"link to '../../outside'.*refusing"):
        extract_archives(root)
    assert not (tmp_path / "escape.txt").exists() and not (root / "videos").exists()


# ---------------------------------------------------------------- Hub


def test_hub_download_fetches_only_needed_files(release, archive_ds, tmp_path, monkeypatch):
    from perckit.hf import hub
    from perckit.hf.entrypoints import builder_class

    source = tmp_path / "hub_repo"
    shutil.copytree(release.root, source)
    calls = []
    monkeypatch.setattr(hub, "snapshot_download", fake_snapshot_download(source, calls))
    b = builder_class(NAME)(config_name=CONFIG, cache_dir=str(tmp_path / "c"))
    b.download_and_prepare()
    assert _raw(b.as_dataset("test")) == _raw(archive_ds)
    assert calls[0]["repo_id"] == "bigfacing/ReasonAVEdit-Bench" and calls[0]["repo_type"] == "dataset"
    snap = tmp_path / "snapshot_1"
    fetched = sorted(p.relative_to(snap).as_posix() for p in snap.rglob("*") if p.is_file())
    assert fetched == sorted(["metadata.csv"] + [f"annotations/{s}.json" for s in release.sample_ids]
                             + [f"archives/{f}.tar" for f in MEDIA_FOLDERS])


def test_hub_offline_error_names_data_dir(tmp_path):
    from perckit.hf.entrypoints import builder_class

    b = builder_class(NAME)(config_name=CONFIG, cache_dir=str(tmp_path))
    with pytest.raises(ReleaseNotFoundError, match="bigfacing/ReasonAVEdit-Bench.*data_dir="):
        b.download_and_prepare()


# ---------------------------------------------------------------- the direct tar reader vs iter_archive


def _read_both(path, label):
    """Items and error (type, archive named) of the local reader and of iter_archive's iterator."""
    out = []
    for reader in (lambda: iter_tar_file(path, label),
                   lambda: iter_tar_members(datasets.DownloadManager(dataset_name=NAME).iter_archive(str(path)), label)):
        items, error = [], None
        try:
            for name, data in reader():
                items.append((name, data))
        except ReleaseFormatError as e:
            error = label in str(e) and "truncated or corrupt" in str(e)
        out.append((items, error))
    return out


def test_direct_tar_reader_equals_iter_archive(release):
    tars = sorted((release.root / "archives").glob("*.tar"))
    assert tars, "the sample release has no archives/*.tar"  # an empty glob would pass without comparing anything
    for tar in tars:
        (a, ea), (b, eb) = _read_both(tar, f"archives/{tar.name}")
        assert a == b and a and ea is eb is None


def test_direct_tar_reader_hidden_and_non_regular_members(tmp_path):
    path = tmp_path / "x.tar"
    with tarfile.open(path, "w") as tar:
        for name, blob in [("./v/a.mp4", b"a" * 700), ("v/.hidden", b"h"), ("v/__MACOSX", b"m"), ("v/b.mp4", b"")]:
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
        d = tarfile.TarInfo("v/dir")
        d.type = tarfile.DIRTYPE
        tar.addfile(d)
        link = tarfile.TarInfo("v/link")
        link.type, link.linkname = tarfile.SYMTYPE, "../../etc/passwd"
        tar.addfile(link)
    (a, ea), (b, eb) = _read_both(path, "x.tar")
    assert a == b == [("v/a.mp4", b"a" * 700), ("v/b.mp4", b"")] and ea is eb is None


@pytest.mark.parametrize("cut", [0.0, 0.001, 0.3, 0.5, 0.999])
def test_direct_tar_reader_truncated_like_iter_archive(release, tmp_path, cut):
    src = release.root / "archives/audios.tar"
    data = src.read_bytes()
    path = tmp_path / "audios.tar"
    path.write_bytes(data[: int(len(data) * cut)] if cut else b"\x01garbage" * 200)
    (a, ea), (b, eb) = _read_both(path, "archives/audios.tar")
    # the same complete members before the cut; then both raise a ReleaseFormatError naming the archive, or (a cut
    # inside the end-of-archive blocks) both stop quietly after the last member
    assert a == b
    assert ea is eb and (ea is True) == (cut < 0.99)
