"""Issue 20: R4D-Bench's fast paths give what the reference rules give.

- ``masks._plain_frame_mask`` (a frame of plain polygons / compressed RLEs, pycocotools called directly)
  against ``masks.frame_mask_reference`` (every mask through ``rle.to_rle``, then ``rle.union``): the same RLE
  on every dense-GT frame of the sample releases and on hand-made frames, and None (the reference path, its
  error) for everything it does not take;
- ``scenes._plain_image_name`` (two ``lstat`` calls) against ``scenes._resolve_image_name`` (every component
  resolved): the same name, and None where a link, another name or an odd folder needs the reference rule.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from pycocotools import mask as mask_utils

from perckit import rle
from perckit.errors import ReleaseFormatError, RLEError
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
    taken = 0
    for entry in rel.entries:
        scene = release.entry_scene(entry, rel.meta)
        info = rel.scenes.get(scene)
        for fr in entry["ground_truth"]["frames"]:
            size = info.frame_size(fr["frame_id"]) if info else None
            where = f"q {entry['query_id']}: frame {fr['frame_id']}"
            ref = masks.frame_mask_reference(fr["masks"], size, where)
            assert masks.frame_mask_from_segmentations(fr["masks"], size, where) == ref
            fast = masks._plain_frame_mask(fr["masks"], size, where) if size is not None else None
            if fast is not None:
                taken += 1
                assert fast == ref
    assert taken > 0  # the sample release exercises the fast path


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
    ([{"segmentation": [[0, 0, 4, 0, True, 4]]}], (H, W)),  # a bool vertex: numpy's reading, in the reference
    ([{"segmentation": [["0", 0, 4, 0, 4, 4]]}], (H, W)),  # a digit string: numpy's reading too
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
    ref = _outcome(scenes._resolve_image_name, folder, name, "COCO image file_name")
    fast = scenes._plain_image_name(folder, name) if scenes._plain_scene_dirs(folder) else None
    if fast is not None:
        assert fast == ref, name
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
