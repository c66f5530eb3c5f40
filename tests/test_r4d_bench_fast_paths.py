"""Issue 20: R4D-Bench's fast paths give what the reference rules give.

- ``masks._plain_frame_mask`` (a frame of plain polygons / compressed RLEs, pycocotools called directly)
  against ``masks.frame_mask_reference`` (every mask through ``rle.to_rle``, then ``rle.union``): the same RLE
  on every dense-GT frame of the sample releases and on hand-made frames, and None (the reference path, its
  error) for everything it does not take;
- ``scenes._plain_image_name`` (two ``lstat`` calls) against ``scenes._resolve_image_name`` (every component
  resolved): the same name, and None where a link, another name or an odd folder needs the reference rule;
- ``frame_tables.frame_tables`` (a batch of frames' annotations column by column, its plain polygons
  rasterised in one call per frame size) against ``pa.Table.from_pylist`` of ``frame_rows``' reference rows:
  the same tables, or the same error, on the sample releases and hand-made quirks.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from pycocotools import mask as mask_utils

from perckit import rle
from perckit.errors import ReleaseFormatError, RLEError
from perckit.r4d_bench import frame_tables
from perckit.r4d_bench import masks
from perckit.r4d_bench import release
from perckit.r4d_bench import scenes
from perckit.sample_releases import write_release

H, W = 24, 32


def _both(frame_masks, size=(H, W), where="q: frame 1"):
    fast = masks._plain_frame_mask(frame_masks, size, where)
    ref = masks.frame_mask_reference(frame_masks, size, where)
    return fast, ref


def _poly(rng, h=H, w=W, n=8):
    cx, cy = rng.uniform(0.2 * w, 0.8 * w), rng.uniform(0.2 * h, 0.8 * h)
    a = np.sort(rng.uniform(0, 2 * np.pi, n))
    r = rng.uniform(1, 0.4 * min(h, w), n)
    return np.column_stack([cx + r * np.cos(a), cy + r * np.sin(a)]).ravel().tolist()


def _rle(rng, h=H, w=W):
    return rle.encode(rng.random((h, w)) < 0.3)


@pytest.mark.parametrize("frames_per_scene", [None, 12])
def test_every_sample_frame_same_mask(tmp_path, frames_per_scene):
    kw = {} if frames_per_scene is None else {"frames_per_scene": frames_per_scene, "height": 54, "width": 96}
    root = write_release("r4d_bench", tmp_path / "rel", **kw).root
    rel = release.open_query_release(root)
    taken = checked_seen = 0
    for entry in rel.entries:
        scene = release.entry_scene(entry, rel.meta)
        info = rel.scenes.get(scene)
        checked = masks.checked_rles(entry["ground_truth"]["frames"])
        checked_seen += len(checked)
        for fr in entry["ground_truth"]["frames"]:
            size = info.frame_size(fr["frame_id"]) if info else None
            where = f"q {entry['query_id']}: frame {fr['frame_id']}"
            ref = masks.frame_mask_reference(fr["masks"], size, where)
            assert masks.frame_mask_from_segmentations(fr["masks"], size, where) == ref
            assert masks.frame_mask_from_segmentations(fr["masks"], size, where, checked) == ref
            fast = masks._plain_frame_mask(fr["masks"], size, where) if size is not None else None
            if fast is not None:
                taken += 1
                assert fast == ref
    assert taken > 0  # the sample release exercises the fast path
    assert checked_seen > 0  # and its RLEs are checked in one scan per query


def test_hand_made_frames_same_mask():
    rng = np.random.default_rng(20)
    for trial in range(300):
        frame = []
        for _ in range(int(rng.integers(1, 5))):
            kind = rng.integers(0, 4)
            if kind == 0:
                frame.append({"segmentation": [_poly(rng) for _ in range(int(rng.integers(1, 4)))]})
            elif kind == 1:
                frame.append({"segmentation": _rle(rng), "id": trial})
            elif kind == 2:
                frame.append({"segmentation": rng.choice([None, "empty", "dict"]) and []})
            else:
                frame.append({"other": 1})
        fast, ref = _both(frame)
        if fast is None:
            assert not any(m.get("segmentation") for m in frame)  # only all-empty frames are left to the reference
        else:
            assert fast == ref and isinstance(fast["counts"], str)
            checked = masks.checked_rles([{"masks": frame}])
            assert masks._plain_frame_mask(frame, (H, W), "q: frame 1", checked) == ref


def test_checked_rles_takes_only_what_validate_accepts():
    """An RLE of another size than the frame, a corrupt one and odd containers are not in ``checked``: the
    frame path validates them and gives the reference's verdict."""
    good = rle.encode(np.eye(H, W, dtype=bool))
    wrong_size = rle.encode(np.eye(W, H, dtype=bool))
    corrupt = {"size": [H, W], "counts": good["counts"][:-1]}
    frames = [{"masks": [{"segmentation": good}, {"segmentation": wrong_size}]}, {"masks": [{"segmentation": corrupt}]},
              {"masks": None}, "odd", {"masks": ["odd", {"segmentation": None}]}]
    checked = masks.checked_rles(frames)
    assert checked == {id(good), id(wrong_size)}  # its own size is consistent: the frame path compares it to the frame's
    assert masks.checked_rles("not a list") == set()
    for frame in ([{"segmentation": good}, {"segmentation": wrong_size}], [{"segmentation": corrupt}]):
        assert masks._plain_frame_mask(frame, (H, W), "q", checked) is None  # the reference path, and its error
        with pytest.raises((RLEError, ReleaseFormatError)):
            masks.frame_mask_from_segmentations(frame, (H, W), "q", checked)


def test_non_canonical_rle_kept_as_given_and_merged_like_the_reference():
    # [3 bg, 0 fg, 2 bg, 1 fg] over a 1x6 frame: a zero-length run that pycocotools would not emit itself
    odd = {"size": [1, 6], "counts": mask_utils.frPyObjects({"size": [1, 6], "counts": [3, 0, 2, 1]}, 1, 6)["counts"].decode()}
    other = {"size": [1, 6], "counts": "15"}
    for frame in ([{"segmentation": odd}], [{"segmentation": odd}, {"segmentation": other}],
                  [{"segmentation": other}, {"segmentation": odd}, {"segmentation": [[0, 0, 1, 0, 1, 1]]}]):
        fast, ref = _both(frame, size=(1, 6))
        assert fast == ref


def test_single_polygon_and_integer_vertices():
    fast, ref = _both([{"segmentation": [[0, 0, 10, 0, 10, 10, 0, 10]]}])
    assert fast == ref
    fast, ref = _both([{"segmentation": [[0.5, 0.5, 10, 0, 10, 10.25, 0, 10]]}, {"segmentation": []}, {"segmentation": None}])
    assert fast == ref


@pytest.mark.parametrize("frame", [
    [{"segmentation": [[0, 0, 4, 0, True, 4]]}],  # a bool vertex: numpy's reading
    [{"segmentation": [["0", 0, 4, 0, 4, 4]]}],  # a digit string: numpy's reading too
    [{"segmentation": [[0, 0, 4, 0, 4, 4], (1, 1, 5, 1, 5, 5)]}],  # a tuple after a list
])
def test_polygons_read_by_the_one_guard_on_both_paths(frame):
    """The fast path hands its polygons to the same guard as the reference (rle.polygon_unions): values numpy reads
    as numbers give the reference's mask there too."""
    fast, ref = _both(frame)
    assert fast == ref


@pytest.mark.parametrize("frame, size", [
    ([], (H, W)),  # no masks: the reference's empty mask
    ([{"segmentation": []}], (H, W)),
    ([{"segmentation": {}}], (H, W)),
    ([{"segmentation": [0, 0, 4, 0, 4, 4]}], (H, W)),  # a flat polygon, wrapped by the reference
    ([{"segmentation": [[0, 0, 4, 0, 4, 4]]}], (np.int64(H), W)),  # numpy size
    ([{"segmentation": [[0, 0, 4, 0, 4, 4]]}], (True, W)),
    ([{"segmentation": [(0, 0, 4, 0, 4, 4)]}], (H, W)),  # a tuple polygon
    ([{"segmentation": {"size": [H, W], "counts": [H * W]}}], (H, W)),  # uncompressed RLE
    ([{"segmentation": {"size": (H, W), "counts": rle.empty(H, W)["counts"]}}], (H, W)),  # tuple size
    ([{"segmentation": {"size": [H, W], "counts": rle.empty(H, W)["counts"].encode()}}], (H, W)),  # bytes counts
    ([("not", "a dict")], (H, W)),
])
def test_frames_left_to_the_reference(frame, size):
    assert masks._plain_frame_mask(frame, size, "q: frame 1") is None
    try:
        expected = masks.frame_mask_reference(frame, size, "q: frame 1")
    except (ReleaseFormatError, RLEError) as e:
        with pytest.raises(type(e)) as got:
            masks.frame_mask_from_segmentations(frame, size, "q: frame 1")
        assert str(got.value) == str(e)
    else:
        assert masks.frame_mask_from_segmentations(frame, size, "q: frame 1") == expected


@pytest.mark.parametrize("frame", [
    [{"segmentation": [[0, 0, 4, 0, 4]]}],  # odd coordinates
    [{"segmentation": [[0, 0, 4, 0, float("nan"), 4]]}],
    [{"segmentation": [[0, 0, 4, 0, 1e9, 4]]}],  # far outside
    [{"segmentation": {"size": [H, W], "counts": "12"}}],  # runs do not sum to H*W
    [{"segmentation": {"size": [H, W + 1], "counts": rle.empty(H, W + 1)["counts"]}}],  # another size
    [{"segmentation": {"size": [H, W], "counts": "é"}}],
    [{"segmentation": [[0, 0, 4, 0, 4, 4]]}, {"segmentation": {"size": [2, 2], "counts": "4"}}],
])
def test_bad_frames_raise_the_reference_error(frame):
    assert masks._plain_frame_mask(frame, (H, W), "q: frame 1") is None
    with pytest.raises((ReleaseFormatError, RLEError)) as ref:
        masks.frame_mask_reference(frame, (H, W), "q: frame 1")
    with pytest.raises(type(ref.value)) as got:
        masks.frame_mask_from_segmentations(frame, (H, W), "q: frame 1")
    assert str(got.value) == str(ref.value)


# ---------------------------------------------------------------- image names


def _outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # compared by type and message
        return (type(e).__name__, str(e))


def _check_name(folder, name):
    """The lstat rule and the listing rule (what read_scene runs) against the reference, for one name."""
    ref = _outcome(scenes._resolve_image_name, folder, name, "COCO image file_name")
    plain = scenes._plain_scene_dirs(folder)
    fast = scenes._plain_image_name(folder, name) if plain else None
    listed = scenes._plain_image_name(folder, name, scenes._scene_listing(folder)) if plain else None
    if fast is not None:
        assert fast == ref, name
    assert listed == fast, name  # the listing decides as the lstat calls do
    return fast, ref


def test_image_names_same_as_the_reference(tmp_path):
    folder = tmp_path / "scene"
    (folder / "images").mkdir(parents=True)
    outside = tmp_path / "secret.jpg"
    outside.write_bytes(b"x")
    (folder / "images" / "a.jpg").write_bytes(b"x")
    (folder / "b.jpg").write_bytes(b"x")
    (folder / "both.jpg").write_bytes(b"x")
    (folder / "images" / "both.jpg").write_bytes(b"x")
    (folder / "images" / "sub").mkdir()
    os.symlink(outside, folder / "images" / "out.jpg")
    os.symlink(outside, folder / "out2.jpg")
    os.symlink(folder / "b.jpg", folder / "images" / "in.jpg")  # inside the scene, outside images/
    os.symlink(folder / "images" / "a.jpg", folder / "in2.jpg")
    taken = {}
    for name in ["a.jpg", "b.jpg", "both.jpg", "missing.jpg", "sub", "out.jpg", "out2.jpg", "in.jpg", "in2.jpg",
                 "images/a.jpg", "../secret.jpg", "/etc/passwd", "", ".", "..", ".hidden", "a b.jpg", "é.jpg",
                 "x" * 300, "a\x00.jpg", 7, None]:
        fast, ref = _check_name(folder, name)
        taken[name] = fast
    assert taken["a.jpg"] == "images/a.jpg" and taken["b.jpg"] == "b.jpg" and taken["both.jpg"] == "images/both.jpg"
    assert taken["missing.jpg"] == "missing.jpg" and taken["sub"] == "images/sub"
    for name in ["out.jpg", "out2.jpg", "in.jpg", "in2.jpg", "images/a.jpg", "../secret.jpg", "/etc/passwd", "", 7, None]:
        assert taken[name] is None  # the reference decides (and raises where it does)


def test_listed_image_names_defer_to_lstat_on_a_case_folded_clash(tmp_path, monkeypatch):
    """A name the scene folder holds under any case is left to the lstat rule (a case-insensitive file system
    would find that entry there), and so is a name ``images/`` does not list."""
    folder = tmp_path / "scene"
    (folder / "images").mkdir(parents=True)
    (folder / "images" / "A.jpg").write_bytes(b"x")
    (folder / "images" / "c.jpg").write_bytes(b"x")
    os.symlink(tmp_path, folder / "a.JPG")
    listing = scenes._scene_listing(folder)
    assert listing == ({"A.jpg": False, "c.jpg": False}, {"images", "a.jpg"})
    calls = []
    real_lstat = os.lstat
    monkeypatch.setattr(os, "lstat", lambda p: calls.append(p) or real_lstat(p))
    assert scenes._plain_image_name(folder, "c.jpg", listing) == "images/c.jpg" and calls == []  # decided by the listing
    assert scenes._plain_image_name(folder, "A.jpg", listing) == "images/A.jpg" and len(calls) == 2  # lstat decides
    assert scenes._plain_image_name(folder, "d.jpg", listing) == "d.jpg" and len(calls) == 4
    assert scenes._scene_listing(tmp_path / "nowhere") is None


def test_image_folder_link_or_file_takes_the_reference(tmp_path):
    for kind in ("link_out", "link_in", "file"):
        folder = tmp_path / kind / "scene"
        folder.mkdir(parents=True)
        target = tmp_path / kind / "elsewhere"
        target.mkdir()
        (target / "a.jpg").write_bytes(b"x")
        if kind == "link_out":
            os.symlink(target, folder / "images")
        elif kind == "link_in":
            (folder / "real").mkdir()
            (folder / "real" / "a.jpg").write_bytes(b"x")
            os.symlink(folder / "real", folder / "images")
        else:
            (folder / "images").write_bytes(b"not a folder")
        assert not scenes._plain_scene_dirs(folder)
        _check_name(folder, "a.jpg")
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "a.jpg").write_bytes(b"x")
    assert scenes._plain_scene_dirs(bare)  # no images/ folder at all
    assert _check_name(bare, "a.jpg") == ("a.jpg", "a.jpg")


# ---------------------------------------------------------------- frame annotations


def _frame_rows_both(info, precedence="coco", rows_per_table=2):
    """(tables, reference) outcomes for a scene: the rows of ``frame_tables`` and of ``frame_rows`` (through
    ``pa.Table.from_pylist``, so both are Arrow's values), or the error (type, message)."""
    import pyarrow as pa

    from perckit.r4d_bench import features as feats

    schema = feats.frame_features().arrow_schema

    def outcome(fn):
        try:
            return fn()
        except Exception as e:
            return (type(e).__name__, str(e))

    def tables():
        out = list(frame_tables.frame_tables(info, precedence, schema, rows_per_table))
        assert all(t.schema == schema for _, t in out)
        return [r for _, t in out for r in t.to_pylist()], [k for k, _ in out]

    def reference():
        rows = list(scenes.frame_rows(info, precedence))
        table = pa.Table.from_pylist([r for _, r in rows], schema=schema)
        keys = [k for k, _ in rows][::rows_per_table]
        return table.to_pylist(), keys

    return outcome(tables), outcome(reference)


def _taken(info, precedence):
    """How many of the scene's frames the column path takes (one frame per batch)."""
    from perckit.r4d_bench import features as feats

    scene = scenes.scene_annotations(info, precedence)
    list_type = feats.frame_features().arrow_schema.field("annotations").type
    cat_names = {k: scenes._json_text(v) for k, v in scene.cats.items()}
    return sum(
        frame_tables._plain_annotation_column([(fr, scene.by_image.get(fr.coco_image_id, []))], cat_names, info.track_links,
                                              precedence, scene.checked, list_type) is not None
        for fr in info.frames.values()
    )


@pytest.mark.parametrize("precedence", ["coco", "scene_json"])
def test_every_sample_frame_same_annotations(tmp_path, precedence):
    root = write_release("r4d_bench", tmp_path / "rel", frames_per_scene=6, height=54, width=96).root
    taken = 0
    for scene in release.scene_names(root):
        info = release.read_scene(root, scene, read_tracks=True)
        taken += _taken(info, precedence)
        for n in (1, 4, 64):
            fast, ref = _frame_rows_both(info, precedence, n)
            assert fast == ref and isinstance(ref[0], list) and ref[0], scene
    assert taken >= 60  # the column path is what the sample release takes


_QUIRKS = [
    {"id": "7"}, {"id": 7.0}, {"id": True}, {"category_id": "2"}, {"category_id": None}, {"category_id": 2.0},
    {"bbox": (1.0, 2.0, 3.0, 4.0)}, {"bbox": [1, 2, 3, True]}, {"bbox": [1, float("nan"), 3, 4]}, {"bbox": [10**400, 1, 1, 1]},
    {"bbox": "1,2,3,4"}, {"bbox": None}, {"bbox": []}, {"bbox": [1, 2, 3, 4]}, {"area": "5"}, {"area": float("inf")},
    {"area": None}, {"area": 3}, {"area": 10**400}, {"area": False}, {"iscrowd": 1}, {"iscrowd": "yes"},
    {"segmentation": [[1, 1, 20, 1, 20, 20]]}, {"segmentation": [1, 1, 20, 1, 20, 20]},
    {"segmentation": [[1, 1, 20, 1, 20, 20], [2, 2, 5, 2, 5, 9, 3, 9]]}, {"segmentation": [[1, 1, 20, 1, 20]]},
    {"segmentation": [[1, 1, 2000, 1, 20, 20]]}, {"segmentation": [[1, 1, float("nan"), 1, 20, 20]]},
    {"segmentation": [[1, 1, True, 1, 20, 20]]}, {"segmentation": {}}, {"segmentation": None}, {"segmentation": "x"},
    {"segmentation": {"size": [54, 96], "counts": "bad!"}}, {"segmentation": {"size": [5, 5], "counts": [25]}},
    {"segmentation": {"size": [54, 96], "counts": [54 * 96]}},
    {"segmentation": rle.encode(np.eye(54, 96, dtype=bool))},  # checked in the scene's scan, taken as it is
    {"segmentation": rle.encode(np.eye(96, 54, dtype=bool))},  # passes the scan (its own size), not the frame's size
    {"segmentation": {"size": [54, 96], "counts": rle.encode(np.eye(54, 96, dtype=bool))["counts"][:-2]}},
    {"track_id": 9}, {"track_id": None, "attributes": {"track_id": "t"}},
    {"instance_id": 4, "track_id": None}, {"track_id": None, "attributes": None},
]


@pytest.mark.parametrize("quirk", _QUIRKS, ids=[repr(q)[:60] for q in _QUIRKS])
def test_hand_made_annotations_same_rows_or_error(tmp_path, quirk):
    root = write_release("r4d_bench", tmp_path / "rel", frames_per_scene=3, height=54, width=96).root
    info = release.read_scene(root, "americano", read_tracks=True)
    anns = [a for a in info.coco["annotations"] if isinstance(a, dict)]
    anns[1].update(quirk)  # the second annotation: the first still makes a row before it
    anns.append({"id": 10**6, "image_id": anns[0]["image_id"], "category_id": 1, "segmentation": [], "bbox": [0, 0, 1, 1]})
    for precedence in ("coco", "scene_json"):
        for n in (1, 64):  # the quirk's frame alone, and in a batch with the rest of the scene
            fast, ref = _frame_rows_both(info, precedence, n)
            assert fast == ref, quirk


def test_not_a_dict_annotation_and_odd_frame_sizes_take_the_reference():
    from perckit.r4d_bench import features as feats

    list_type = feats.frame_features().arrow_schema.field("annotations").type

    def column(anns, fr):
        return frame_tables._plain_annotation_column([(fr, anns)], {}, {}, "coco", set(), list_type)

    fr = scenes.FrameInfo(frame_id=1, coco_image_id=1, file_name="a.jpg", height=5, width=5)
    ok = {"id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "segmentation": [[0, 0, 4, 0, 4, 4]]}
    assert column([ok], fr).to_pylist()[0][0]["mask"] == rle.to_rle(ok["segmentation"], size=(5, 5))
    assert column([ok, ["not", "a", "dict"]], fr) is None
    assert column([ok, {**ok, "id": "2"}], fr) is None
    for h, w in [(0, 5), (5.0, 5), (True, 5), (rle.MAX_PIXELS, 2)]:
        odd = scenes.FrameInfo(frame_id=1, coco_image_id=1, file_name="a.jpg", height=h, width=w)
        assert column([ok], odd) is None
    assert column([], fr).to_pylist() == [[]]  # a frame without annotations: an empty list, not a null


# ---------------------------------------------------------------- frame tables


def test_frame_tables_same_as_from_pylist(tmp_path):
    """builder_base.rows_to_table's joined media column against pa.Table.from_pylist: the same tables on the
    sample frames (in batches of the builder's size) and on hand-made media values."""
    import pyarrow as pa

    from perckit.builder_base import MEDIA_STORAGE
    from perckit.builder_base import media_column
    from perckit.builder_base import rows_to_table
    from perckit.r4d_bench import features as feats
    from perckit.r4d_bench.builder import R4DBenchBuilder

    root = write_release("r4d_bench", tmp_path / "rel", frames_per_scene=6, height=54, width=96).root
    schema = feats.frame_features().arrow_schema
    rows = [r for s in release.scene_names(root) for _, r in scenes.frame_rows(release.read_scene(root, s, read_tracks=True))]
    n = R4DBenchBuilder.ROWS_PER_TABLE
    for i in range(0, len(rows), n):
        batch = rows[i:i + n]
        assert media_column([r["image"] for r in batch]) is not None
        assert rows_to_table(batch, schema).equals(pa.Table.from_pylist(batch, schema=schema))
    media = pa.schema([("a", pa.int32()), ("image", MEDIA_STORAGE)])
    for values in ([{"bytes": b"xy", "path": "p"}, {"bytes": b"", "path": None}], [None, {"bytes": b"z", "path": "q"}],
                   [{"bytes": None, "path": "p"}, {"bytes": b"z", "path": None}], [{"bytes": bytearray(b"ab"), "path": "p"}] * 2,
                   [{"bytes": b"ab", "path": "p", "x": 1}] * 2, [{"bytes": b"ab"}] * 2, [{"bytes": b"\x00" * 9, "path": "é"}] * 3):
        batch = [{"a": k, "image": v} for k, v in enumerate(values)]
        try:
            expected = pa.Table.from_pylist(batch, schema=media)
        except (pa.ArrowInvalid, pa.ArrowTypeError, KeyError) as e:
            with pytest.raises(type(e)):
                rows_to_table(batch, media)
            continue
        assert rows_to_table(batch, media).equals(expected), values


def test_scenes_frame_tables_read_across_scenes_as_frame_rows_does(tmp_path):
    """One read-ahead across every scene (what the builder runs) gives each scene's rows in turn, and an
    unreadable image of a later scene is still reported with its own scene's COCO file."""
    import pyarrow as pa

    from perckit.r4d_bench import features as feats

    schema = feats.frame_features().arrow_schema
    root = write_release("r4d_bench", tmp_path / "rel", frames_per_scene=5, height=27, width=48).root
    infos = [release.read_scene(root, s, read_tracks=True) for s in release.scene_names(root)]
    expected = [item for info in infos for item in release.frame_rows(info)]
    assert len(expected) == 5 * len(infos)
    tables = list(frame_tables.scenes_frame_tables(infos, "coco", schema, 3))
    assert [k for k, _ in tables] == [k for k, _ in expected if int(k.split("/")[1]) in (0, 3)] or len(tables) == 2 * len(infos)
    assert pa.concat_tables([t for _, t in tables]).equals(pa.Table.from_pylist([r for _, r in expected], schema=schema))
    victim = scenes.frame_image_paths(infos[3])[2]
    victim.write_bytes(b"not an image")
    with pytest.raises(ReleaseFormatError, match=rf"{infos[3].coco_path.name}.*frame"):
        list(frame_tables.scenes_frame_tables(infos, "coco", schema, 3))
