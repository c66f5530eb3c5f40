"""The ReasonAVEdit-Bench export hook (:mod:`perckit.reason_av_edit.export`, through :mod:`perckit.export_hooks`) on
the sample release: Audio-typed audio, the videos as files + ``metadata.jsonl`` (the Hub's video-folder layout), the
videos config loading with plain ``datasets``, and ``load_back`` giving back the builder's rows; plus every refusal
of a file name, link, FIFO or size while reading back."""

import io
import json
import os

import datasets
import pytest

from perckit import export_hooks
from perckit.entrypoints import build_split
from perckit.errors import InputNotFoundError, ReleaseFormatError
from perckit.export_state import validate_state
from perckit.reason_av_edit import export as rx
from perckit.reason_av_edit import features as feats

CARD = """---
configs:
- config_name: default
  default: true
  data_files:
  - split: test
    path: data/test-*
- config_name: videos
  data_files:
  - split: test
    path: videos/test/*
---
"""


def _png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (4, 4), (10, 20, 30)).save(buf, format="PNG")
    return buf.getvalue()


def _columns(ds: datasets.Dataset, names) -> dict:
    table = ds.with_format("arrow")[:]
    return {c: table.column(c).to_pylist() for c in names}


@pytest.fixture(scope="module")
def rows(reason_av_edit_release, tmp_path_factory):
    """The builder's ``test`` split of the sample release."""
    return build_split("reason_av_edit", "default", reason_av_edit_release.root, tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def exported(rows, tmp_path_factory):
    """An export folder: the hook applied to the rows (with a ``preview`` column added, as convert does), the
    Parquet rows written as one shard and a card listing both configs."""
    root = tmp_path_factory.mktemp("export")
    with_preview = rows.add_column("preview", [{"bytes": _png(), "path": None}] * rows.num_rows, feature=datasets.Image())
    parts = export_hooks.apply("reason_av_edit", with_preview, "default", "test", root)
    (root / "data").mkdir()
    parts.dataset.to_parquet(str(root / "data" / "test-00000-of-00001.parquet"))
    (root / "README.md").write_text(CARD)
    return root, parts


def test_the_parquet_rows_have_audio_features_and_no_video_bytes(rows, exported):
    _, parts = exported
    ds = parts.dataset
    assert isinstance(ds.features["audio"], datasets.Audio) and isinstance(ds.features["reason_audio"], datasets.Audio)
    assert "video" not in ds.column_names and "mask_video" not in ds.column_names
    assert ds.features["video_file"] == datasets.Value("string") == ds.features["mask_video_file"]
    assert not any(isinstance(f, datasets.Video) for f in ds.features.values())
    order = [rx.VIDEO_COLUMNS.get(c, c) for c in rows.column_names] + ["preview"]
    assert ds.column_names == order
    got, want = _columns(ds, ["audio", "reason_audio", "video_file"]), _columns(rows, ["audio", "reason_audio", "sample_id"])
    assert got["audio"] == want["audio"] and got["reason_audio"] == want["reason_audio"]  # the WAV bytes, not re-encoded
    assert got["video_file"] == [f"videos/test/{sid}.mp4" for sid in want["sample_id"]]


def test_the_video_files_and_metadata_jsonl_are_written(rows, exported):
    root, parts = exported
    (fc,) = parts.files_configs
    want = _columns(rows, ["sample_id", "video", "mask_video", "category"])
    assert (fc.name, fc.dir, fc.split) == ("videos", "videos", "test")
    assert fc.files[-1] == "videos/test/metadata.jsonl" and len(fc.files) == 2 * rows.num_rows + 1
    assert fc.num_bytes == sum((root / f).stat().st_size for f in fc.files)
    lines = [json.loads(x) for x in (root / "videos/test/metadata.jsonl").read_text().splitlines()]
    assert fc.num_examples == len(lines) == 2 * rows.num_rows
    for sid, video, mask, category in zip(*want.values()):
        assert (root / f"videos/test/{sid}.mp4").read_bytes() == video["bytes"]
        assert (root / f"videos/test/{sid}.mask.mp4").read_bytes() == mask["bytes"]
    first = lines[0]
    assert first["file_name"] == f"{want['sample_id'][0]}.mp4" and first["kind"] == "video" and first["category"] == want["category"][0]
    assert first["source_path"] == want["video"][0]["path"] and lines[1]["kind"] == "mask_video"
    # the record entry the integrator writes passes the record's checks
    entry = export_hooks.merge_files_configs(parts.files_configs, "default")
    state = {"format": "perckit-export", "version": 2, "benchmark": "reason_av_edit",
             "configs": {"default": {"default": True, "dir": "data", "features": parts.dataset.features.to_dict(),
                                     "splits": [{"name": "test", "num_examples": rows.num_rows, "num_bytes": 1,
                                                 "files": ["data/test-00000-of-00001.parquet"]}], "preview": "preview"}, **entry}}
    assert validate_state(state, root, "record")["configs"]["videos"]["kind"] == "files"


def test_the_videos_config_loads_with_plain_datasets(rows, exported, tmp_path):
    """The video-folder layout loads with plain datasets on this line (3.6 and 5.x alike): ``videofolder`` with the
    config's data files, or the ``videos`` folder itself; ``Video(decode=False)`` needs no video decoder."""
    root, parts = exported
    (fc,) = parts.files_configs
    for ds in (datasets.load_dataset("videofolder", data_files={"test": f"{root}/videos/test/*"}, cache_dir=str(tmp_path / "a"))["test"],
               datasets.load_dataset(str(root / "videos"), cache_dir=str(tmp_path / "b"))["test"]):
        assert ds.features == datasets.Features.from_dict(fc.features) and ds.num_rows == fc.num_examples
        plain = ds.cast_column("video", datasets.Video(decode=False))
        first = plain[0]
        assert first["kind"] == "video" and open(first["video"]["path"], "rb").read() == rows.with_format("arrow")[:1].column("video")[0]["bytes"].as_py()


def test_a_card_listing_a_parquet_config_first_loads_the_videos_config_with_the_parquet_module(exported, tmp_path):
    """What datasets does (3.6 and 5.x): one builder module per repository, inferred from the first config of the
    card, so ``load_dataset(export, "videos")`` reads the mp4 files as Parquet when ``default`` comes first. This
    test records that limit of the files layout; it fails the day datasets infers a module per config."""
    root, _ = exported
    with pytest.raises(Exception, match="(?i)parquet"):
        datasets.load_dataset(str(root), "videos", cache_dir=str(tmp_path))


def test_load_back_gives_the_builders_rows(rows, exported, tmp_path):
    root, _ = exported
    loaded = datasets.load_dataset(str(root), "default", cache_dir=str(tmp_path))["test"]
    assert isinstance(loaded.features["audio"], datasets.Audio)
    back = export_hooks.load_back("reason_av_edit", loaded, root)
    assert back.column_names[: len(rows.column_names)] == rows.column_names and back.column_names[-1] == "preview"
    assert datasets.Features({c: back.features[c] for c in rows.column_names}) == rows.features
    assert _columns(back, rows.column_names) == _columns(rows, rows.column_names)


def test_null_and_not_provided_media_stay_so(rows, tmp_path):
    small = rows.select(range(3))
    masks = _columns(small, ["mask_video"])["mask_video"]
    masks[0], masks[1] = None, dict(feats.NOT_PROVIDED_MEDIA)
    small = small.remove_columns("mask_video").add_column("mask_video", masks, feature=datasets.Video(decode=False))
    small = small.select_columns(rows.column_names)
    parts = export_hooks.apply("reason_av_edit", small, "default", "test", tmp_path)
    assert _columns(parts.dataset, ["mask_video_file"])["mask_video_file"][:2] == [None, ""]
    assert len(parts.files_configs[0].files) == 3 + 1 + 1
    back = rx.load_back(parts.dataset, tmp_path)
    assert _columns(back, rows.column_names) == _columns(small, rows.column_names)


def test_file_names_are_sanitised_and_collisions_refused(rows, tmp_path):
    assert rx.file_stem("w1_0000") == "w1_0000"
    assert rx.file_stem("../etc/passwd") == "s._etc_passwd"
    assert rx.file_stem("a b/c") == "a_b_c" and rx.file_stem("é") == "s_"
    assert rx.file_stem("x" * 500) == "x" * rx.MAX_STEM_CHARS
    two = rows.select(range(2))
    two = two.remove_columns("sample_id").add_column("sample_id", ["a b", "a_b"]).select_columns(rows.column_names)
    with pytest.raises(ReleaseFormatError, match="would both be written as videos/test/a_b"):
        export_hooks.apply("reason_av_edit", two, "default", "test", tmp_path)


def test_a_file_planted_where_the_hook_writes_is_refused(rows, tmp_path):
    (tmp_path / "videos" / "test").mkdir(parents=True)
    sid = rows[0]["sample_id"]
    os.symlink(tmp_path / "elsewhere", tmp_path / "videos" / "test" / f"{sid}.mp4")
    with pytest.raises(ReleaseFormatError, match="expected a new file"):
        export_hooks.apply("reason_av_edit", rows.select(range(1)), "default", "test", tmp_path)
    assert not (tmp_path / "elsewhere").exists()


def _one_row(tmp_path, rel="videos/test/a.mp4", listed=("a.mp4",)) -> datasets.Dataset:
    folder = tmp_path / "export" / "videos" / "test"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metadata.jsonl").write_text("".join(json.dumps({"file_name": n, "source_path": f"videos/{n}"}) + "\n" for n in listed))
    return datasets.Dataset.from_dict({"sample_id": ["a"], "video_file": [rel]})


@pytest.mark.parametrize("rel", ["../secret.mp4", "videos/test/../../../secret.mp4", "/etc/passwd", "videos/a.mp4",
                                 "videos/test/sub/a.mp4", "data/test/a.mp4", "videos/test/.a.mp4", "videos/test/a..mp4"])
def test_load_back_refuses_a_name_that_leaves_the_videos_folder(rel, tmp_path):
    ds = _one_row(tmp_path, rel)
    with pytest.raises(ReleaseFormatError, match="expected"):
        rx.load_back(ds, tmp_path / "export")


def test_load_back_reads_a_listed_file_and_refuses_links_fifos_sizes_and_unlisted_files(tmp_path, monkeypatch):
    root = tmp_path / "export"
    ds = _one_row(tmp_path)
    clip = root / "videos" / "test" / "a.mp4"
    clip.write_bytes(b"mp4 bytes")
    assert rx.load_back(ds, root)[0]["video"] == {"bytes": b"mp4 bytes", "path": "videos/a.mp4"}
    monkeypatch.setattr(rx, "MAX_MEDIA_FILE_BYTES", 4)
    with pytest.raises(ReleaseFormatError, match="more than the limit of 4 bytes"):
        rx.load_back(ds, root)
    monkeypatch.undo()
    clip.unlink()
    with pytest.raises(InputNotFoundError, match="not found"):
        rx.load_back(ds, root)
    (tmp_path / "secret").write_bytes(b"private")
    os.symlink(tmp_path / "secret", clip)
    with pytest.raises(ReleaseFormatError, match="symbolic link leaves the root"):
        rx.load_back(ds, root)
    clip.unlink()
    os.mkfifo(clip)
    with pytest.raises(ReleaseFormatError, match="expected a regular file"):
        rx.load_back(ds, root)
    clip.unlink()
    clip.write_bytes(b"mp4 bytes")
    with pytest.raises(ReleaseFormatError, match="to be listed in videos/test/metadata.jsonl"):
        rx.load_back(_one_row(tmp_path, listed=("b.mp4",)), root)
    (root / "videos" / "test" / "metadata.jsonl").write_text('{"file_name": "../x"}\n')
    with pytest.raises(ReleaseFormatError, match="metadata.jsonl line 1"):
        rx.load_back(ds, root)


def test_benchmarks_without_a_hook_are_unchanged(tmp_path):
    ds = datasets.Dataset.from_dict({"x": [1, 2]})
    parts = export_hooks.apply("refcoco_m", ds, "expressions", "validation", tmp_path)
    assert parts.dataset is ds and parts.files_configs == [] and list(tmp_path.iterdir()) == []
    assert export_hooks.load_back("refcoco_m", ds, tmp_path) is ds
