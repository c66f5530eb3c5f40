"""The ReasonAVEdit-Bench export hook (:mod:`perckit.reason_av_edit.export`, through :mod:`perckit.export.hooks`) on
the sample release: Audio-typed audio in the default config, the clips in a Parquet child config ``videos`` of
``Video`` columns, both configs loading with plain ``datasets`` from one card, and ``load_back`` giving back the
builder's rows (the metrics score them alike); plus every refusal while exporting and while reading back."""

import io
import json
import os
import shutil

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perckit.export import hook_module
from perckit.export import hooks as export_hooks
from perckit.io import parquetio
from perckit.hf.entrypoints import build_split
from perckit.errors import InputNotFoundError, ReleaseFormatError
from perckit.export.parquet import write_split
from perckit.export.state import STATE_FILE, dump_state, export_layout, read_state
from perckit.reason_av_edit import export as rx
from perckit.reason_av_edit import features as feats
from perckit.reason_av_edit import make_quality_prediction, to_quality_reference
from perckit.reason_av_edit import metric as av_reasoning
from perckit.reason_av_edit.quality import metric as av_edit_quality

PIXEL = ["ssim", "psnr", "bg_psnr", "bg_ssim"]


def _png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (4, 4), (10, 20, 30)).save(buf, format="PNG")
    return buf.getvalue()


def _columns(ds: datasets.Dataset, names) -> dict:
    table = ds.with_format("arrow")[:]
    return {c: table.column(c).to_pylist() for c in names}


def _split_entry(s) -> dict:
    return {"name": s.name, "num_examples": s.num_examples, "num_bytes": s.num_bytes, "files": s.files,
            "max_row_bytes": s.max_row_bytes, "max_row_group_bytes": s.max_row_group_bytes, "max_page_bytes": s.max_page_bytes}


def write_export(root, parts, split: str = "test") -> dict:
    """What convert writes for one split: the shards of both configs (``perckit.export.parquet.write_split``), the
    record (version 2, ``videos`` a Parquet config with ``parent``) and a card listing both configs."""
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCardData

    written = write_split(parts.dataset, root / "data", split, progress=False)
    configs = {"default": {"default": True, "dir": "data", "features": parts.dataset.features.to_dict(),
                           "splits": [_split_entry(written)], "kind": "parquet"}}
    for child in parts.children:
        c = write_split(child.dataset, root / child.name, split, progress=False)
        configs[child.name] = {"default": False, "dir": child.name, "features": child.dataset.features.to_dict(),
                               "splits": [_split_entry(c)], "kind": "parquet", "parent": "default",
                               "description": child.description}
    state = {"format": "perckit-export", "version": 2, "benchmark": "reason_av_edit", "configs": configs}
    (root / STATE_FILE).write_text(dump_state(state))
    card = DatasetCardData()
    MetadataConfigs({name: {"data_files": [{"split": s["name"], "path": f"{c['dir']}/{s['name']}-*"} for s in c["splits"]],
                            **({"default": True} if c["default"] else {})} for name, c in configs.items()}).to_dataset_card_data(card)
    (root / "README.md").write_text(f"---\n{card.to_yaml()}\n---\n")
    return state


@pytest.fixture(scope="module")
def rows(reason_av_edit_release, tmp_path_factory):
    """The builder's ``test`` split of the sample release."""
    return build_split("reason_av_edit", "default", reason_av_edit_release.root, tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def exported(rows, tmp_path_factory):
    """An export folder: the hook applied to the rows (with a ``preview`` column added, as convert does), both
    configs written as Parquet, the record and the card."""
    root = tmp_path_factory.mktemp("export")
    with_preview = rows.add_column("preview", [{"bytes": _png(), "path": None}] * rows.num_rows, feature=datasets.Image())
    parts = export_hooks.apply(hook_module("reason_av_edit"), with_preview, "default", "test", root)
    state = write_export(root, parts)
    return root, parts, state


@pytest.fixture(scope="module")
def loaded(exported, tmp_path_factory):
    """Both configs read back with plain ``datasets.load_dataset`` (no perckit)."""
    root, _, _ = exported
    cache = str(tmp_path_factory.mktemp("load"))
    return (datasets.load_dataset(str(root), "default", cache_dir=cache)["test"],
            datasets.load_dataset(str(root), "videos", cache_dir=cache)["test"])


def test_the_default_rows_have_audio_features_and_no_video_columns(rows, exported):
    _, parts, _ = exported
    ds = parts.dataset
    assert isinstance(ds.features["audio"], datasets.Audio) and isinstance(ds.features["reason_audio"], datasets.Audio)
    assert ds.column_names == [c for c in rows.column_names if c not in ("video", "mask_video")] + ["preview"]
    assert not any(isinstance(f, datasets.Video) for f in ds.features.values())
    got, want = _columns(ds, ["audio", "reason_audio"]), _columns(rows, ["audio", "reason_audio"])
    assert got == want  # the WAV bytes and paths, not re-encoded


def test_the_videos_child_holds_the_clips_as_video_features(rows, exported):
    _, parts, state = exported
    (child,) = parts.children
    assert child.name == "videos" and child.description == rx.CHILD_DESCRIPTION
    ds = child.dataset
    assert ds.column_names == ["sample_id", "category", "sub_track", "language", "instruction", "video", "mask_video"]
    assert ds.features["video"] == datasets.Video() == ds.features["mask_video"]
    want = _columns(rows, ["sample_id", "video", "mask_video"])
    assert _columns(ds, ["sample_id", "video", "mask_video"]) == want  # bytes and the release-relative path kept
    assert all(v["bytes"] and not os.path.isabs(v["path"]) for v in want["video"])
    back = read_state(exported[0])  # the record of both configs passes the record's checks
    assert back["configs"]["videos"]["parent"] == "default" and back == state


def test_both_configs_load_with_plain_datasets_from_one_card(rows, exported, loaded):
    """datasets 3.6 and 5.x alike: one Parquet module for both configs, the features from the shards' metadata;
    ``Video(decode=False)`` reads the cells without a video decoder (torchvision / torchcodec are not installed)."""
    _, parts, _ = exported
    default, videos = loaded
    assert default.features == parts.dataset.features and default.num_rows == rows.num_rows
    assert videos.features == parts.children[0].dataset.features and videos.num_rows == rows.num_rows
    plain = videos.cast_column("video", datasets.Video(decode=False)).cast_column("mask_video", datasets.Video(decode=False))
    assert _columns(plain, ["video", "mask_video"]) == _columns(rows, ["video", "mask_video"])
    assert plain[0]["video"]["bytes"][4:8] == b"ftyp"  # an mp4 the Viewer makes a video asset


def test_load_back_gives_the_builders_rows(rows, exported, loaded):
    root, _, _ = exported
    back = export_hooks.load_back(hook_module("reason_av_edit"), loaded[0], export_layout(root))
    assert back.column_names == rows.column_names + ["preview"]
    assert datasets.Features({c: back.features[c] for c in rows.column_names}) == rows.features
    assert _columns(back, rows.column_names) == _columns(rows, rows.column_names)  # paths included
    videos = export_hooks.load_back(hook_module("reason_av_edit"), loaded[1], export_layout(root))  # the child alone: the builder's features
    assert videos.features["video"] == datasets.Video(decode=False) and videos.column_names[:3] == ["sample_id", "category", "sub_track"]


def test_the_metrics_score_load_back_rows_as_builder_rows(rows, exported, loaded):
    root, _, _ = exported
    back = export_hooks.load_back(hook_module("reason_av_edit"), loaded[0], export_layout(root))
    builder_rows, back_rows = list(rows), list(back)
    preds = []
    for i, r in enumerate(builder_rows):  # ground truth, every other window shifted, every third mask video dropped
        p = feats.gt_as_prediction(r)
        if i % 2 and p["edit_window_s"]:
            p["edit_window_s"] = [p["edit_window_s"][0] + 0.3, p["edit_window_s"][1] + 0.3]
        if i % 3 == 0:
            p["mask_video"] = dict(feats.NOT_PROVIDED_MEDIA)
        preds.append(p)

    def dump(out):
        return json.dumps(out, sort_keys=True, default=str)

    want = av_reasoning.av_reasoning(preds, [feats.to_metric_reference(r) for r in builder_rows])
    assert dump(av_reasoning.av_reasoning(preds, [feats.to_metric_reference(r) for r in back_rows])) == dump(want)
    quality = [make_quality_prediction(r["sample_id"], r["video"]["bytes"]) for r in builder_rows]
    want = av_edit_quality.av_edit_quality(quality, [to_quality_reference(r) for r in builder_rows], metrics=PIXEL)
    got = av_edit_quality.av_edit_quality(quality, [to_quality_reference(r) for r in back_rows], metrics=PIXEL)
    assert dump(got) == dump(want) and want["num_samples"] + want["num_reference_samples"] == rows.num_rows


def test_null_and_not_provided_media_stay_so(rows, tmp_path):
    small = rows.select(range(3))
    masks = _columns(small, ["mask_video"])["mask_video"]
    masks[0], masks[1] = None, dict(feats.NOT_PROVIDED_MEDIA)
    small = small.remove_columns("mask_video").add_column("mask_video", masks, feature=datasets.Video(decode=False))
    small = small.select_columns(rows.column_names)
    parts = export_hooks.apply(hook_module("reason_av_edit"), small, "default", "test", tmp_path)
    assert _columns(parts.children[0].dataset, ["mask_video"])["mask_video"][:2] == [None, feats.NOT_PROVIDED_MEDIA]
    write_export(tmp_path, parts)
    loaded = datasets.load_dataset(str(tmp_path), "default", cache_dir=str(tmp_path / "cache"))["test"]
    back = rx.load_back(loaded, export_layout(tmp_path))
    assert _columns(back, rows.column_names) == _columns(small, rows.column_names)


def _with_videos(rows, values: list) -> datasets.Dataset:
    one = rows.select(range(len(values)))
    return one.remove_columns("video").add_column("video", values, feature=datasets.Video(decode=False)).select_columns(rows.column_names)


def test_a_clip_given_by_path_is_read_under_the_release_root(rows, tmp_path):
    first = _columns(rows.select(range(2)), ["video"])["video"]
    root = tmp_path / "release"  # an extracted release: the clip as a file
    (root / first[0]["path"]).parent.mkdir(parents=True)
    (root / first[0]["path"]).write_bytes(first[0]["bytes"])
    ds = _with_videos(rows, [{"bytes": None, "path": first[0]["path"]}, {"bytes": first[1]["bytes"], "path": "/abs/dir/x.mp4"}])
    child = export_hooks.apply(hook_module("reason_av_edit"), ds, "default", "test", tmp_path, release_root=root).children[0].dataset
    assert _columns(child, ["video"])["video"] == [first[0], {"bytes": first[1]["bytes"], "path": "x.mp4"}]
    with pytest.raises(ReleaseFormatError, match="expected the clip's bytes .* no release folder"):
        export_hooks.apply(hook_module("reason_av_edit"), ds, "default", "test", tmp_path)
    for path, error in (("../outside.mp4", ReleaseFormatError), ("videos/absent.mp4", InputNotFoundError)):
        with pytest.raises(error, match="column 'video'"):
            export_hooks.apply(hook_module("reason_av_edit"), _with_videos(rows, [{"bytes": None, "path": path}]), "default", "test",
                               tmp_path, release_root=root)


@pytest.mark.parametrize("ids, pattern", [(["a", "a"], "got 'a' twice"), (["a", ""], "to have a sample_id, got ''")])
def test_repeated_or_empty_sample_ids_are_refused(rows, ids, pattern, tmp_path):
    two = rows.select(range(2)).remove_columns("sample_id").add_column("sample_id", ids).select_columns(rows.column_names)
    with pytest.raises(ReleaseFormatError, match=pattern):
        export_hooks.apply(hook_module("reason_av_edit"), two, "default", "test", tmp_path)


# --------------------------------------------------------------------------------------------------- reading back


@pytest.fixture()
def small_export(rows, tmp_path):
    """A two-sample export and its default rows read with plain datasets."""
    root = tmp_path / "export"
    root.mkdir()
    parts = export_hooks.apply(hook_module("reason_av_edit"), rows.select(range(2)), "default", "test", root)
    write_export(root, parts)
    return root, datasets.load_dataset(str(root), "default", cache_dir=str(tmp_path / "cache"))["test"]


def _shard(root):
    return root / "videos" / "test-00000-of-00001.parquet"


def _rewrite_shard(root, edit) -> None:
    """Rewrite the videos shard with ``edit(table)`` (the record still lists it)."""
    table = edit(pq.read_table(_shard(root)))
    pq.write_table(table, _shard(root))


def test_load_back_refuses_a_sample_the_videos_config_lacks(small_export):
    root, ds = small_export
    _rewrite_shard(root, lambda t: t.slice(0, 1))
    sid = _columns(ds, ["sample_id"])["sample_id"][1]
    with pytest.raises(ReleaseFormatError, match=f"expected a row for sample '{sid}' in the 'videos' shards "
                                                 r"\['videos/test-00000-of-00001.parquet'\]"):
        rx.load_back(ds, export_layout(root))


def test_load_back_refuses_a_sample_id_repeated_in_the_videos_config(small_export):
    root, ds = small_export
    _rewrite_shard(root, lambda t: pa.concat_tables([t, t.slice(0, 1)]))
    with pytest.raises(ReleaseFormatError, match=r"videos/test-00000-of-00001.parquet: expected every sample_id once .* again"):
        rx.load_back(ds, export_layout(root))


@pytest.mark.parametrize("case", ["not-parquet", "wrong-schema", "missing", "a-fifo", "a-link-out", "over-the-chunk-cap",
                                  "clip-over-the-cap", "no-videos-config"])
def test_load_back_refuses_a_bad_videos_shard(case, small_export, monkeypatch, tmp_path):
    root, ds = small_export
    shard = _shard(root)
    error, pattern = ReleaseFormatError, "videos/test-00000-of-00001.parquet"
    if case == "not-parquet":
        shard.write_bytes(b"not parquet at all")
        pattern += ": not a readable Parquet file"
    elif case == "wrong-schema":
        _rewrite_shard(root, lambda t: t.drop_columns(["mask_video"]))
        pattern += r": expected a string column 'sample_id' and \['video', 'mask_video'\]"
    elif case == "missing":
        shard.unlink()
        error, pattern = InputNotFoundError, pattern + ": file .* not found"
    elif case == "a-fifo":
        shard.unlink()
        os.mkfifo(shard)
        pattern += ": expected a regular file, got a FIFO"
    elif case == "a-link-out":
        outside = tmp_path / "outside.parquet"
        shard.rename(outside)
        os.symlink(outside, shard)
        pattern = "symbolic link leaves the root"
    elif case == "over-the-chunk-cap":
        monkeypatch.setattr(parquetio, "MAX_COLUMN_CHUNK_BYTES", 1000)
        pattern += r": row group 0, column 'video.bytes': expected at most 1000 bytes"
    elif case == "clip-over-the-cap":
        monkeypatch.setattr(rx, "MAX_MEDIA_FILE_BYTES", 100)
        pattern = r"column 'video' \(videos/test-00000-of-00001.parquet\): a clip of \d+ bytes, more than the limit of 100 bytes"
    elif case == "no-videos-config":
        state = json.loads((root / STATE_FILE).read_text())
        del state["configs"]["videos"]
        (root / STATE_FILE).write_text(json.dumps(state))
        error, pattern = InputNotFoundError, "expected a 'videos' config written with the rows"
    with pytest.raises(error, match=pattern):
        rx.load_back(ds, export_layout(root))


def test_load_back_picks_the_split_of_the_rows(small_export):
    root, ds = small_export
    state = json.loads((root / STATE_FILE).read_text())
    _child = state["configs"]["videos"]["splits"][0]
    state["configs"]["videos"]["splits"].append(dict(_child, name="train", files=["videos/train-00000-of-00001.parquet"]))
    (root / STATE_FILE).write_text(json.dumps(state))
    os.link(_shard(root), root / "videos" / "train-00000-of-00001.parquet")
    assert rx.load_back(ds, export_layout(root)).num_rows == 2  # ds.split is "test"
    plain = datasets.Dataset(ds.data, info=ds.info.copy())  # no split: two to choose from
    assert plain.split is None
    with pytest.raises(ReleaseFormatError, match=r"expected the rows' split \(None\) among the 'videos' splits \['test', 'train'\]"):
        rx.load_back(plain, export_layout(root))


@pytest.mark.parametrize("record", [True, False], ids=["with-record", "hub-copy"])
@pytest.mark.parametrize("case", ["card-dotdot", "card-link-out", "clip-by-path-alone"])
def test_load_back_reads_only_the_export(case, record, small_export, tmp_path):
    """Issue 28, cause 5: the videos shards come from the one lister of an export's files (the record, else the card),
    inside the export and checked: a card pointing the ``videos`` config out of the folder, a planted link to a shard
    outside, or a clip that names a local file by path alone (datasets' Video would read it) are refused."""
    root, ds = small_export
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(_shard(root), outside / "test-00000-of-00001.parquet")
    if case == "card-dotdot":
        card = (root / "README.md").read_text()
        (root / "README.md").write_text(card.replace("path: videos/test-*", "path: ../outside/test-*"))
        error, says = ReleaseFormatError, (f"{str(root / 'README.md')!r} configs[1].data_files[0].path: expected a path inside "
                                           "the export folder, got '../outside/test-*' (a '..' component leaves it)")
    elif case == "card-link-out":
        os.symlink(outside / "test-00000-of-00001.parquet", root / "videos" / "test-00001-of-00002.parquet")
        error, says = ReleaseFormatError, f"{str(root / 'README.md')!r} configs[1].data_files[0].path: 'videos/test-00001-of-00002.parquet'"
    else:
        _rewrite_shard(root, lambda t: t.set_column(t.schema.get_field_index("video"), "video", pa.array(
            [{"bytes": None, "path": str(outside / "private.mp4")}] * t.num_rows, t.schema.field("video").type)))
        sid = _columns(ds, ["sample_id"])["sample_id"][0]
        error, says = ReleaseFormatError, (f"reason_av_edit export {str(root)!r}: sample {sid!r}, column 'video' "
                                           "(videos/test-00000-of-00001.parquet): expected the clip's bytes (an export embeds "
                                           f"them), got only the path {str(outside / 'private.mp4')!r}")
    if not record:
        (root / STATE_FILE).unlink()
    with pytest.raises(error) as e:
        rx.load_back(ds, export_layout(root))
    assert str(e.value).startswith(says), str(e.value)


def test_benchmarks_without_a_hook_are_unchanged(tmp_path):
    ds = datasets.Dataset.from_dict({"x": [1, 2]})
    parts = export_hooks.apply(hook_module("refcoco_m"), ds, "expressions", "validation", tmp_path)
    assert parts.dataset is ds and parts.children == [] and list(tmp_path.iterdir()) == []
    assert hook_module("refcoco_m") is None and export_hooks.load_back(None, ds, None) is ds
