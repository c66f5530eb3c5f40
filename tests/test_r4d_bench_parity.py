"""Issue 29: R4D-Bench's one path per rule against the plain references of ``tests/oracles/r4d.py``.

- ``r4d_read.frame_mask_from_segmentations`` (a frame's polygons rasterised in one call, RLEs the scene's scan
  accepted taken as they are) against ``oracles.r4d.frame_mask`` (every mask through ``rle.to_rle``, then
  ``rle.union``): the same RLE on every dense-GT frame of the sample releases and on hand-made frames, or the
  same error;
- ``r4d_read._image_name`` (one ``lstat`` per component, ``resolve_under`` where a component is a link) against
  ``oracles.r4d.image_name`` (``resolve_under`` twice): the same name or the same error;
- ``r4d_rows.frame_tables`` (a batch of frames column by column) against ``pa.Table.from_pylist`` of
  ``oracles.r4d.frame_rows``: the same tables, or the same error, on the sample releases and hand-made quirks
  (alone and two at a time, so the first error in row order is the one raised).

Each comparison records which way the production path took (the bulk checks, or a value-by-value converter):
the sample releases must take the bulk checks, the quirks the converters.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest
from pycocotools import mask as mask_utils

from oracles import r4d as oracle
from perckit import rle
from perckit.errors import ReleaseFormatError, RLEError
from perckit.r4d_bench import features as feats
from perckit.r4d_bench import layout as r4d_layout
from perckit.r4d_bench import read as r4d_read
from perckit.r4d_bench import rows as r4d_rows
from perckit.samples import write_release

H, W = 24, 32
SCHEMA = feats.frame_features().arrow_schema


def _outcome(fn, *args):
    try:
        return fn(*args)
    except (ReleaseFormatError, RLEError) as e:  # compared by type and message
        return (type(e).__name__, str(e))


@pytest.fixture
def converters(monkeypatch):
    """Counts the calls of the value-by-value converters of the frames path and of the frame mask
    (``rle.to_rle``, ``parse_int`` of an annotation field, ``_annotation_numbers``): zero means the bulk checks took
    every value."""
    calls = {"to_rle": 0, "int": 0, "numbers": 0}

    def counting(name, fn):
        def wrapped(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(rle, "to_rle", counting("to_rle", rle.to_rle))
    monkeypatch.setattr(r4d_rows, "_annotation_int", counting("int", r4d_rows._annotation_int))
    monkeypatch.setattr(r4d_rows, "_annotation_numbers", counting("numbers", r4d_rows._annotation_numbers))
    return calls


# ---------------------------------------------------------------- frame masks


def _poly(rng, h=H, w=W, n=8):
    cx, cy = rng.uniform(0.2 * w, 0.8 * w), rng.uniform(0.2 * h, 0.8 * h)
    a = np.sort(rng.uniform(0, 2 * np.pi, n))
    r = rng.uniform(1, 0.4 * min(h, w), n)
    return np.column_stack([cx + r * np.cos(a), cy + r * np.sin(a)]).ravel().tolist()


def _same_mask(frame, size=(H, W), where="q: frame 1", checked={}):
    got = _outcome(r4d_read.frame_mask_from_segmentations, frame, size, where, checked)
    assert got == _outcome(oracle.frame_mask, frame, size, where)
    return got


@pytest.fixture(scope="module")
def sample_root(tmp_path_factory):
    """A sample release of 6 frames a scene at 54 x 96 (read only: the tests that edit a release make their own)."""
    return write_release("r4d_bench", tmp_path_factory.mktemp("parity") / "rel", frames_per_scene=6, height=54, width=96).root


@pytest.mark.parametrize("which", ["default", "6x54x96"])
def test_every_sample_frame_same_mask(r4d_release, sample_root, which, converters):
    root = r4d_release.root if which == "default" else sample_root
    rel = r4d_read.open_query_release(root)
    frames = checked_seen = polygons = decided = unchecked = to_rle = 0
    for entry in rel.entries:
        info = rel.scenes.get(r4d_read.entry_scene(entry, rel.meta))
        checked = r4d_read.checked_rles(entry["ground_truth"]["frames"], info.frame_size if info else None)
        checked_seen += len(checked)
        for fr in entry["ground_truth"]["frames"]:
            size = info.frame_size(fr["frame_id"]) if info else None
            where = f"q {entry['query_id']}: frame {fr['frame_id']}"
            before = converters["to_rle"]
            got = r4d_read.frame_mask_from_segmentations(fr["masks"], size, where, checked)
            to_rle += converters["to_rle"] - before
            assert got == oracle.frame_mask(fr["masks"], size, where)
            segs = [m["segmentation"] for m in fr["masks"] if m.get("segmentation")]
            polygons += sum(type(s) is list for s in segs)
            decided += sum(type(s) is list and id(s) in checked for s in segs)
            unchecked += sum(type(s) is dict and id(s) not in checked for s in segs)
            frames += 1
    assert frames > 0 and polygons > 0
    assert checked_seen > 0  # its RLEs are checked in one scan per query
    assert decided == polygons  # every frame size is known: each query's polygons rasterised by one call
    assert to_rle == unchecked  # polygons and checked RLEs never go through rle.to_rle on the production path


def test_hand_made_frames_same_mask(converters):
    rng = np.random.default_rng(20)
    for trial in range(200):
        frame = []
        for _ in range(int(rng.integers(1, 5))):
            kind = rng.integers(0, 4)
            if kind == 0:
                frame.append({"segmentation": [_poly(rng) for _ in range(int(rng.integers(1, 4)))]})
            elif kind == 1:
                frame.append({"segmentation": rle.encode(rng.random((H, W)) < 0.3), "id": trial})
            elif kind == 2:
                frame.append({"segmentation": rng.choice([None, "empty", "dict"]) and []})
            else:
                frame.append({"other": 1})
        assert isinstance(_same_mask(frame), dict)
        assert isinstance(_same_mask(frame, checked=r4d_read.checked_rles([{"masks": frame}])), dict)
        assert isinstance(_same_mask(frame, checked=r4d_read.checked_rles([{"frame_id": 1, "masks": frame}], lambda fid: (H, W))), dict)
    assert converters["to_rle"] > 0  # the unchecked RLEs (rle.validate through rle.to_rle)


def test_a_refused_polygon_leaves_every_frame_of_the_query_to_the_frame_path():
    """checked_rles rasterises a query's polygons in one guarded call per frame size: when the guard refuses one,
    none is taken, and each frame gives the reference's mask or error (the refused one named by its frame)."""
    rng = np.random.default_rng(5)
    good, far = [{"segmentation": [_poly(rng)]}], [{"segmentation": [_poly(rng)]}, {"segmentation": [[0, 0, 10 * W, 0, 0, 5]]}]
    frames = [{"frame_id": 1, "masks": good}, {"frame_id": 2, "masks": far}]
    checked = r4d_read.checked_rles(frames, lambda fid: (H, W))
    assert checked == {}
    assert isinstance(_same_mask(good, checked=checked), dict)
    assert "masks[1]" in _same_mask(far, where="q: frame 2", checked=checked)[1]
    assert set(r4d_read.checked_rles(frames[:1], lambda fid: (H, W))) == {id(good[0]["segmentation"])}


def test_checked_rles_takes_only_what_validate_accepts():
    """An RLE of another size than the frame, a corrupt one and odd containers are not in ``checked``: the
    frame path validates them and gives the reference's verdict."""
    good = rle.encode(np.eye(H, W, dtype=bool))
    wrong_size = rle.encode(np.eye(W, H, dtype=bool))
    corrupt = {"size": [H, W], "counts": good["counts"][:-1]}
    frames = [{"masks": [{"segmentation": good}, {"segmentation": wrong_size}]}, {"masks": [{"segmentation": corrupt}]},
              {"masks": None}, "odd", {"masks": ["odd", {"segmentation": None}]}]
    checked = r4d_read.checked_rles(frames)
    assert set(checked) == {id(good), id(wrong_size)}  # its own size is consistent: the frame path compares it to the frame's
    assert r4d_read.checked_rles("not a list") == {}
    for frame in ([{"segmentation": good}, {"segmentation": wrong_size}], [{"segmentation": corrupt}]):
        assert isinstance(_same_mask(frame, checked=checked), tuple)  # the reference's error


def test_non_canonical_rle_kept_as_given_and_merged_like_the_reference():
    # [3 bg, 0 fg, 2 bg, 1 fg] over a 1x6 frame: a zero-length run that pycocotools would not emit itself
    odd = {"size": [1, 6], "counts": mask_utils.frPyObjects({"size": [1, 6], "counts": [3, 0, 2, 1]}, 1, 6)["counts"].decode()}
    other = {"size": [1, 6], "counts": "15"}
    for frame in ([{"segmentation": odd}], [{"segmentation": odd}, {"segmentation": other}],
                  [{"segmentation": other}, {"segmentation": odd}, {"segmentation": [[0, 0, 1, 0, 1, 1]]}]):
        assert _same_mask(frame, size=(1, 6))["size"] == [1, 6]
    assert _same_mask([{"segmentation": odd}], size=(1, 6)) == odd  # one mask: as given, not re-encoded


_ODD_FRAMES = [
    ([], (H, W)),  # no masks: the empty mask
    ([{"segmentation": []}], (H, W)),
    ([{"segmentation": {}}], (H, W)),
    ([{"segmentation": [[0, 0, 10, 0, 10, 10, 0, 10]]}], (H, W)),
    ([{"segmentation": [[0.5, 0.5, 10, 0, 10, 10.25, 0, 10]]}, {"segmentation": []}, {"segmentation": None}], (H, W)),
    ([{"segmentation": [[0, 0, 4, 0, True, 4]]}], (H, W)),  # a bool vertex: numpy's reading
    ([{"segmentation": [["0", 0, 4, 0, 4, 4]]}], (H, W)),  # a digit string: numpy's reading too
    ([{"segmentation": [[0, 0, 4, 0, 4, 4], (1, 1, 5, 1, 5, 5)]}], (H, W)),  # a tuple after a list
    ([{"segmentation": [0, 0, 4, 0, 4, 4]}], (H, W)),  # a flat polygon
    ([{"segmentation": [[0, 0, 4, 0, 4, 4]]}], (np.int64(H), W)),  # numpy size
    ([{"segmentation": [[0, 0, 4, 0, 4, 4]]}], (True, W)),
    ([{"segmentation": [(0, 0, 4, 0, 4, 4)]}], (H, W)),  # a tuple polygon
    ([{"segmentation": {"size": [H, W], "counts": [H * W]}}], (H, W)),  # uncompressed RLE
    ([{"segmentation": {"size": (H, W), "counts": rle.empty(H, W)["counts"]}}], (H, W)),  # tuple size
    ([{"segmentation": {"size": [H, W], "counts": rle.empty(H, W)["counts"].encode()}}], (H, W)),  # bytes counts
    ([("not", "a dict")], (H, W)),
    ([{"segmentation": [[0, 0, 4, 0, 4, 4]]}], None),  # a polygon, no frame size
    ([{"segmentation": {"size": [H, W], "counts": rle.empty(H, W)["counts"]}}, {"segmentation": [[0, 0, 4, 0, 4, 4]]}], None),
    ([{"segmentation": None}], None),
    # refused: the first bad mask in order
    ([{"segmentation": [[0, 0, 4, 0, 4]]}], (H, W)),  # odd coordinates
    ([{"segmentation": [[0, 0, 4, 0, float("nan"), 4]]}], (H, W)),
    ([{"segmentation": [[0, 0, 4, 0, 1e9, 4]]}], (H, W)),  # far outside
    ([{"segmentation": {"size": [H, W], "counts": "12"}}], (H, W)),  # runs do not sum to H*W
    ([{"segmentation": {"size": [H, W + 1], "counts": rle.empty(H, W + 1)["counts"]}}], (H, W)),  # another size
    ([{"segmentation": {"size": [H, W], "counts": "é"}}], (H, W)),
    ([{"segmentation": [[0, 0, 4, 0, 4, 4]]}, {"segmentation": {"size": [2, 2], "counts": "4"}}], (H, W)),
    ([{"segmentation": [[0, 0, 4, 0, 4, 4]]}, {"segmentation": [[0, 0, 4, 0, 1e9, 4]]}, {"segmentation": {"size": [H, W], "counts": "12"}}], (H, W)),
    ([{"segmentation": {"size": [H, W], "counts": "12"}}, {"segmentation": [[0, 0, 4, 0, 1e9, 4]]}], (H, W)),
    ([{"segmentation": [[0, 0, 4, 0, 4, 4]]}, {"segmentation": [[0, 0, 4]]}, {"segmentation": "x"}], (H, W)),
    ([{"segmentation": [[0, 0, 4, 0, 4, 4]]}], (0, W)),
    ([{"segmentation": [[0, 0, 4, 0, 4, 4]]}], (rle.MAX_PIXELS, 2)),
]


@pytest.mark.parametrize("frame, size", _ODD_FRAMES, ids=[repr(f)[:50] + repr(s) for f, s in _ODD_FRAMES])
def test_odd_frames_same_mask_or_error(frame, size):
    _same_mask(frame, size)


# ---------------------------------------------------------------- image names


def _same_name(folder, name):
    real = (os.path.realpath(folder), os.path.realpath(folder / "images"))
    got = _outcome(r4d_read._image_name, folder, real, name, "COCO image file_name")
    assert got == _outcome(oracle.image_name, folder, name, "COCO image file_name"), name
    return got


def test_image_names_same_as_the_reference(tmp_path):
    folder = tmp_path / "scene"
    (folder / "images" / "sub").mkdir(parents=True)
    outside = tmp_path / "secret.jpg"
    outside.write_bytes(b"x")
    for path in ("images/a.jpg", "b.jpg", "both.jpg", "images/both.jpg", "images/sub/c.jpg"):
        (folder / path).write_bytes(b"x")
    os.symlink(outside, folder / "images" / "out.jpg")
    os.symlink(outside, folder / "out2.jpg")
    os.symlink(folder / "b.jpg", folder / "images" / "in.jpg")  # inside the scene, outside images/
    os.symlink(folder / "images" / "a.jpg", folder / "in2.jpg")
    os.symlink(folder / "images", folder / "alias")  # a folder link inside the scene
    os.symlink(tmp_path, folder / "images" / "up")  # a folder link out of it
    got = {}
    for name in ["a.jpg", "b.jpg", "both.jpg", "missing.jpg", "sub", "sub/c.jpg", "sub//c.jpg", "./a.jpg", "out.jpg", "out2.jpg",
                 "in.jpg", "in2.jpg", "alias/a.jpg", "up/secret.jpg", "images/a.jpg", "../secret.jpg", "/etc/passwd", "", ".",
                 "..", ".hidden", "a b.jpg", "é.jpg", "a\x00.jpg", "b.jpg/x", 7, None]:
        got[name] = _same_name(folder, name)
    assert got["a.jpg"] == "images/a.jpg" and got["b.jpg"] == "b.jpg" and got["both.jpg"] == "images/both.jpg"
    assert got["missing.jpg"] == "missing.jpg" and got["sub/c.jpg"] == "images/sub/c.jpg" and got["alias/a.jpg"] == "alias/a.jpg"
    for name in ["out.jpg", "out2.jpg", "in.jpg", "up/secret.jpg", "../secret.jpg", "/etc/passwd", "", 7, None]:
        assert isinstance(got[name], tuple) and got[name][0] == "ReleaseFormatError", name
    # A name longer than the file system allows: the reference's Path.exists raised a bare OSError (ENAMETOOLONG);
    # the one rule places it in the scene folder, and reading the image refuses it naming the frame.
    with pytest.raises(OSError):
        oracle.image_name(folder, "x" * 300)
    real = (os.path.realpath(folder), os.path.realpath(folder / "images"))
    assert r4d_read._image_name(folder, real, "x" * 300) == "x" * 300


def test_an_image_name_too_long_for_the_file_system_is_refused_naming_the_frame(sample_root):
    info = r4d_read.read_scene(sample_root, "americano")
    fr = info.frames[0]
    info.frames[0] = r4d_read.FrameInfo(0, fr.coco_image_id, "x" * 300, fr.height, fr.width)
    with pytest.raises(ReleaseFormatError, match=r"\(frame 0\): image file: file '.*' cannot be read: \[Errno 36\] File name too long"):
        list(r4d_rows.frame_tables(info))


def test_image_folder_link_or_file(tmp_path):
    for kind in ("link_out", "link_in", "file", "none"):
        folder = tmp_path / kind / "scene"
        folder.mkdir(parents=True)
        target = tmp_path / kind / "elsewhere"
        target.mkdir()
        (target / "a.jpg").write_bytes(b"x")
        (folder / "b.jpg").write_bytes(b"x")
        if kind == "link_out":
            os.symlink(target, folder / "images")
        elif kind == "link_in":
            (folder / "real").mkdir()
            (folder / "real" / "a.jpg").write_bytes(b"x")
            os.symlink(folder / "real", folder / "images")
        elif kind == "file":
            (folder / "images").write_bytes(b"not a folder")
        for name in ("a.jpg", "b.jpg", "images/a.jpg"):
            _same_name(folder, name)


def test_read_scene_names_every_sample_frame_without_resolving(sample_root, monkeypatch):
    """On the sample release no image name needs ``resolve_under`` (no link in it): one lstat per component."""
    root = sample_root
    resolved = []
    real_resolve = r4d_read.resolve_under
    monkeypatch.setattr(r4d_read, "resolve_under", lambda root, rel, where, *a: resolved.append(where) or real_resolve(root, rel, where, *a))
    for scene in r4d_layout.scene_names(root):
        info = r4d_read.read_scene(root, scene)
        assert len(info.frames) == 6 and not [w for w in resolved if "file_name" in w]
        for fr in info.frames.values():
            assert fr.file_name == _same_name(info.folder, fr.file_name.removeprefix("images/"))


# ---------------------------------------------------------------- frames tables


def _tables_and_rows(info, precedence="coco", rows_per_table=2):
    """(production, reference) outcomes for a scene: the rows of ``r4d_rows.frame_tables`` and of
    ``oracles.r4d.frame_rows`` (through ``pa.Table.from_pylist``, so both are Arrow's values), or the error."""

    def tables():
        out = list(r4d_rows.frame_tables(info, precedence, SCHEMA, rows_per_table))
        assert all(t.schema == SCHEMA for _, t in out)
        return [r for _, t in out for r in t.to_pylist()], [k for k, _ in out]

    def reference():
        rows = list(oracle.frame_rows(info, precedence))
        return pa.Table.from_pylist([r for _, r in rows], schema=SCHEMA).to_pylist(), [k for k, _ in rows][::rows_per_table]

    return _outcome(tables), _outcome(reference)


@pytest.mark.parametrize("precedence", ["coco", "scene_json"])
def test_every_sample_frame_same_annotations(sample_root, precedence, converters):
    root = sample_root
    annotations = 0
    for scene in r4d_layout.scene_names(root):
        info = r4d_read.read_scene(root, scene, read_tracks=True)
        for n in (1, 4, 64):
            calls = dict(converters)
            got = list(r4d_rows.frame_tables(info, precedence, SCHEMA, n))
            # the bulk checks took every value of the sample release (an RLE the scene's scan left undecided is validated)
            checked = r4d_rows.scene_annotations(info, precedence).checked
            unchecked = sum(type(a.get("segmentation")) is dict and a["segmentation"] and id(a["segmentation"]) not in checked
                            for a in info.coco["annotations"])
            assert converters == {**calls, "to_rle": calls["to_rle"] + unchecked}
            fast, ref = _tables_and_rows(info, precedence, n)
            assert fast == ref and isinstance(ref[0], list) and ref[0], scene
            annotations += sum(len(r["annotations"]) for _, t in got for r in t.to_pylist())
    assert annotations >= 60


_QUIRKS = [
    {"id": "7"}, {"id": 7.0}, {"id": True}, {"id": None}, {"category_id": "2"}, {"category_id": None}, {"category_id": 2.0},
    {"bbox": (1.0, 2.0, 3.0, 4.0)}, {"bbox": [1, 2, 3, True]}, {"bbox": [1, float("nan"), 3, 4]}, {"bbox": [10**400, 1, 1, 1]},
    {"bbox": "1,2,3,4"}, {"bbox": ["1", 2, 3, 4]}, {"area": "5"}, {"area": float("inf")}, {"area": 10**400}, {"area": False},
    {"segmentation": [1, 1, 20, 1, 20, 20]}, {"segmentation": [[1, 1, 20, 1, 20]]},
    {"segmentation": [[1, 1, 2000, 1, 20, 20]]}, {"segmentation": [[1, 1, float("nan"), 1, 20, 20]]},
    {"segmentation": "x"},
    {"segmentation": {"size": [54, 96], "counts": "bad!"}}, {"segmentation": {"size": [5, 5], "counts": [25]}},
    {"segmentation": {"size": [54, 96], "counts": [54 * 96]}},
    {"segmentation": rle.encode(np.eye(96, 54, dtype=bool))},  # passes the scan (its own size), not the frame's size
    {"segmentation": {"size": [54, 96], "counts": rle.encode(np.eye(54, 96, dtype=bool))["counts"][:-2]}},
]
#: Quirks the bulk checks take as they are (no converter call).
_BULK = [
    {"bbox": None}, {"bbox": []}, {"bbox": [1, 2, 3, 4]}, {"area": None}, {"area": 3}, {"iscrowd": 1},
    {"segmentation": [[1, 1, 20, 1, 20, 20], [2, 2, 5, 2, 5, 9, 3, 9]]}, {"segmentation": {}}, {"segmentation": None},
    {"segmentation": rle.encode(np.eye(54, 96, dtype=bool))}, {"track_id": 9}, {"track_id": None, "attributes": {"track_id": "t"}},
    {"instance_id": 4, "track_id": None}, {"track_id": None, "attributes": None}, {"iscrowd": "yes"},
    {"segmentation": [[1, 1, True, 1, 20, 20]]},  # numpy reads a bool vertex as a number: the polygon guard's call
]


def _quirky_scene(root, quirks):
    """The first sample scene with ``quirks`` applied to its annotations (``{annotation index: fields}``) and one
    more annotation without a mask on its first frame."""
    info = r4d_read.read_scene(root, "americano", read_tracks=True)
    anns = [a for a in info.coco["annotations"] if isinstance(a, dict)]
    for k, quirk in quirks.items():
        anns[k].update(quirk)
    anns.append({"id": 10**6, "image_id": anns[0]["image_id"], "category_id": 1, "segmentation": [], "bbox": [0, 0, 1, 1]})
    return info


@pytest.mark.parametrize("quirk", _QUIRKS + _BULK, ids=[repr(q)[:60] for q in _QUIRKS + _BULK])
def test_hand_made_annotations_same_rows_or_error(sample_root, quirk, converters):
    info = _quirky_scene(sample_root, {1: quirk})  # the second annotation: the first still makes a row before it
    for precedence in ("coco", "scene_json"):
        for n in (1, 64):  # the quirk's frame alone, and in a batch with the rest of the scene
            before = sum(converters.values())
            _outcome(lambda: list(r4d_rows.frame_tables(info, precedence, SCHEMA, n)))  # the production path alone
            took_converter = sum(converters.values()) > before
            assert took_converter == (quirk in _QUIRKS), quirk  # a quirk reaches a converter, a plain value does not
            fast, ref = _tables_and_rows(info, precedence, n)
            assert fast == ref, quirk


def test_two_quirks_raise_the_first_in_row_order(sample_root):
    """Two bad values in one scene: the error is the one the rows meet first (frame by frame, each frame's
    annotations by id, each annotation's segmentation before its category, bbox and area), in batches of
    one frame and of the whole scene."""
    bad = [q for q in _QUIRKS if isinstance(_outcome(lambda q=q: list(oracle.frame_rows(_quirky_scene(sample_root, {1: q})))), tuple)]
    assert len(bad) >= 15
    rng = np.random.default_rng(29)
    n_anns = sum(isinstance(a, dict) for a in _quirky_scene(sample_root, {}).coco["annotations"]) - 1
    errors = set()
    for _ in range(40):
        i, j = rng.choice(n_anns, 2, replace=False).tolist()
        qi, qj = bad[rng.integers(len(bad))], bad[rng.integers(len(bad))]
        info = _quirky_scene(sample_root, {i: qi, j: qj} if i != j else {i: {**qi, **qj}})
        for n in (1, 64):
            fast, ref = _tables_and_rows(info, "coco", n)
            assert fast == ref and isinstance(fast, tuple), (qi, qj)
            errors.add(fast[1])
    assert len(errors) >= 20


def test_frames_without_annotations_and_odd_sizes(sample_root):
    root = sample_root
    info = r4d_read.read_scene(root, "americano", read_tracks=True)
    info.coco["annotations"] = [a for a in info.coco["annotations"] if a["image_id"] != info.frames[0].coco_image_id]
    fast, ref = _tables_and_rows(info)
    assert fast == ref and fast[0][0]["annotations"] == []  # an empty list, not a null
    for h, w in [(0, 96), (-1, 96), (rle.MAX_PIXELS, 2)]:
        odd = r4d_read.read_scene(root, "americano", read_tracks=True)
        odd.frames[1] = r4d_read.FrameInfo(1, odd.frames[1].coco_image_id, odd.frames[1].file_name, h, w)
        fast, ref = _tables_and_rows(odd, "coco", 64)
        assert fast == ref


def test_scenes_frame_tables_read_across_scenes(tmp_path):
    """One read-ahead across every scene (what the builder runs) gives each scene's rows in turn, and an
    unreadable image of a later scene is still reported with its own scene's COCO file."""
    root = write_release("r4d_bench", tmp_path / "rel", frames_per_scene=5, height=27, width=48).root
    infos = [r4d_read.read_scene(root, s, read_tracks=True) for s in r4d_layout.scene_names(root)]
    expected = [item for info in infos for item in oracle.frame_rows(info)]
    assert len(expected) == 5 * len(infos)
    tables = list(r4d_rows.scenes_frame_tables(infos, "coco", SCHEMA, 3))
    assert [k for k, _ in tables] == [k for k, _ in expected if int(k.split("/")[1]) in (0, 3)] or len(tables) == 2 * len(infos)
    assert pa.concat_tables([t for _, t in tables]).equals(pa.Table.from_pylist([r for _, r in expected], schema=SCHEMA))
    victim = r4d_read.frame_image_paths(infos[3])[2]
    victim.write_bytes(b"not an image")
    with pytest.raises(ReleaseFormatError, match=rf"{infos[3].coco_path.name}.*frame"):
        list(r4d_rows.scenes_frame_tables(infos, "coco", SCHEMA, 3))


def test_images_beyond_one_binary_array_go_to_a_chunked_column(sample_root, monkeypatch):
    """More than 2 GiB of image bytes in one table (``media_column`` says None): the column is built image by
    image, chunked, with the same values."""
    info = r4d_read.read_scene(sample_root, "americano", read_tracks=True)
    expected = pa.concat_tables([t for _, t in r4d_rows.frame_tables(info, rows_per_table=4)])
    monkeypatch.setattr(r4d_rows, "media_column", lambda values: None)
    tables = [t for _, t in r4d_rows.frame_tables(info, rows_per_table=4)]
    assert tables[0].column("image").num_chunks == 4
    assert pa.concat_tables(tables).equals(expected) and expected.num_rows == 6


def test_image_names_in_a_hub_cache_snapshot(tmp_path):
    """A release in the Hub cache holds every file as a link into ``blobs/``: each name goes through
    ``resolve_under``, which accepts the blob, as the reference does; a link elsewhere is still refused."""
    repo = tmp_path / "datasets--x--r4d"
    (repo / "blobs").mkdir(parents=True)
    folder = repo / "snapshots" / "abc123" / "data" / "scenes" / "americano"
    (folder / "images").mkdir(parents=True)
    (repo / "blobs" / "0f1e").write_bytes(b"x")
    os.symlink(repo / "blobs" / "0f1e", folder / "images" / "a.jpg")
    os.symlink(tmp_path, folder / "images" / "out")
    assert _same_name(folder, "a.jpg") == "images/a.jpg"
    assert _same_name(folder, "out/x.jpg")[0] == "ReleaseFormatError"
