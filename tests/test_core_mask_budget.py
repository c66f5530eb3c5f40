"""Issue 28, causes 2 and 3: polygons are bounded before pycocotools sees them, and one pixel budget holds per
answer, prediction row, batch and picture.

- The polygon guard (``perckit.rle.check_polygons``, run by ``rle.polygon_unions``, the one place polygons reach
  pycocotools): the issue's attack (20,000 far-apart vertices, 460 KB of JSON) through ``from_polygons``,
  ``to_rle`` and the lmms-eval answer parser in an interpreter whose address space is capped (it died of SIGSEGV),
  each limit at its edge on hand-checkable outlines, polygons of a legitimate shape accepted and rasterised as
  pycocotools alone does, and an AST check that nothing else hands polygons to pycocotools.
- The one nearest-neighbour sampler (``rle.sample_nearest``): ``resize_nearest`` and ``previews.small_mask`` equal
  the dense decode-then-index oracles (tests/oracles/masks.py) bit for bit, and the issue's 46-character RefCOCO-M
  answer declaring 32768 x 32768 pixels is scored by ``refer_iou(resize_predictions="nearest")`` in milliseconds
  under a 1 GiB address space (it took 10 to 34 s and 2.2 GB, and died of SIGSEGV under that cap).
- The pixel budget (``rle.PixelBudget``): ``perckit.torch.collate`` / ``decode_masks`` / ``masks_transform`` refuse
  the issue's tiny row declaring gigabytes before decoding anything (it ran 107 to 153 s into a MemoryError), the knob
  ``max_pixels``; the prediction rows of ``mask_temporal`` and ``m4seg``; previews and ``figures.mask_overlay``.
"""

from __future__ import annotations

import ast
import json
import time
from unittest.mock import patch

import datasets
import numpy as np
import pytest
from helpers.capped import run_capped
from helpers.common import REPO, lazy_import
from helpers.m4seg import NO_METEOR, R, S1_PRED, S1_REF
from helpers.r4d import pred, ref
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from oracles import masks as oracle
from pycocotools import mask as _coco

from perckit.draw import figures, previews
from perckit import rle
from perckit.errors import OptionError, PredictionError, RLEError
from perckit.m4seg import metric as m4seg_metrics
from perckit.r4d_bench import metric as r4d_metrics
from perckit.refcoco_m import preview as refcoco_preview
from perckit.refcoco_m.metric import refer_iou

pt = lazy_import("perckit.torch")  # torch is imported when a test first uses it, not while the suite is collected
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: the issue's RefCOCO-M answer: 46 characters declaring a 32768 x 32768 all-foreground mask
HUGE_ANSWER = '{"size": [32768, 32768], "counts": "0PPPPPP1"}'
HUGE = json.loads(HUGE_ANSWER)


# ---------------------------------------------------------------- cause 2: the polygon guard


def test_the_far_apart_polygon_attack_is_refused_and_the_interpreter_lives():
    """20,000 vertices jumping across a 480 x 640 image (460 KB of JSON): before, pycocotools' unchecked mallocs
    of a 190-million-point outline killed the interpreter (SIGSEGV, exit -11, under this 1 GiB cap); now an
    RLEError naming the field and the numbers, in milliseconds, and the lmms-eval parser reads the answer as
    nothing (scored as an empty mask)."""
    result = run_capped("""
import json, time
from helpers.bad_inputs import far_apart_polygon
from perckit import lmms_eval, rle
from perckit.errors import RLEError
poly = far_apart_polygon(480, 640)
answer = json.dumps({"polygons": [poly]})
RESULT = {"bytes": len(answer), "base_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10}
start = time.perf_counter()
for name, call in (("from_polygons", lambda: rle.from_polygons([poly], 480, 640, "answer")),
                   ("to_rle", lambda: rle.to_rle(poly, size=[480, 640], where="answer"))):
    try:
        call()
        RESULT[name] = None
    except RLEError as e:
        RESULT[name] = str(e)
RESULT["mask_from_text"] = repr(lmms_eval.mask_from_text(answer, 480, 640))
RESULT["seconds"] = time.perf_counter() - start
""")
    assert 440_000 < result["bytes"] < 480_000
    for name in ("from_polygons", "to_rle"):
        assert result[name] is not None, f"{name} accepted the attack"
        assert result[name].startswith("answer: expected polygons whose outline"), result[name]
        assert "at most 71680 pixels long for a 480x640 image (64 x (H + W)" in result[name]
        assert int(result[name].rsplit("got ", 1)[1]) > 38_000_000
    assert result["mask_from_text"] == "None"
    assert result["seconds"] < 5 and result["peak_mib"] - result["base_mib"] < 64, result


def _back_and_forth(x: float, pairs: int) -> list[float]:
    """(0, 0), (x, 0) repeated: an outline of exactly 2 * x * pairs pixels (the closing edge included)."""
    return [0.0, 0.0, float(x), 0.0] * pairs


@pytest.mark.parametrize("h, w, x, limit", [
    (1000, 1000, 2000, 128_000),  # 64 x (H + W)
    (4, 4, 8, 65_536),  # a small image: the floor
    (16_384, 16_384, 32_768, 1_048_576),  # a large one: the cap (64 x (H + W) would be 2,097,152)
])
def test_the_outline_limit_at_its_edge(h, w, x, limit):
    assert rle.polygon_outline_limit(h, w) == limit
    pairs = limit // (2 * x)
    assert 2 * x * pairs == limit
    at = rle.from_polygons([_back_and_forth(x, pairs)], h, w, "W")  # exactly the limit: accepted
    c = _coco.frPyObjects([_back_and_forth(x, pairs)], h, w)[0]
    assert at == {"size": [h, w], "counts": c["counts"].decode()}  # pycocotools' own raster of it
    with pytest.raises(RLEError, match=rf"^W: expected polygons whose outline .* is at most {limit} pixels long for a "
                                       rf"{h}x{w} image .*, got {limit + 2 * x}$"):
        rle.from_polygons([_back_and_forth(x, pairs + 1)], h, w, "W")


def test_the_outline_and_vertex_count_are_per_mask():
    half = _back_and_forth(2000, 16)  # 64,000 each: two make the 1000 x 1000 limit of 128,000
    rle.from_polygons([half, half], 1000, 1000)
    with pytest.raises(RLEError, match=r"^W: expected polygons whose outline .*, got 128003$"):
        rle.from_polygons([half, half, [0, 0, 1, 0, 1, 1]], 1000, 1000, "W")  # + a triangle of outline 3
    # several masks in one call: each has its own budget, the error names the mask
    out = rle.polygon_unions([[half, half], [half, half]], 1000, 1000, "frame 3")
    assert len(out) == 2
    with pytest.raises(RLEError, match=r"^frame 3: mask 1: expected polygons whose outline .*, got 128003$"):
        rle.polygon_unions([[half], [half, half, [0, 0, 1, 0, 1, 1]]], 1000, 1000, "frame 3")
    cap = rle.MAX_POLYGON_VERTICES
    with pytest.raises(RLEError, match=rf"^W: polygon 0: expected at most {cap} vertices, got {cap + 1}$"):
        rle.from_polygons([[0.0, 0.0] * (cap + 1)], 10, 10, "W")
    with pytest.raises(RLEError, match=rf"^W: expected at most {cap} polygon vertices per mask, got {cap + 2}$"):
        rle.from_polygons([[0.0, 0.0] * (cap // 2 + 1)] * 2, 10, 10, "W")


def test_coordinates_stay_inside_pycocotools_ints_on_a_huge_image():
    """On a 1 x 2^30 image the old rule (x in [-W, 2W]) let x reach 2^31, which pycocotools multiplies by 5 in a
    32-bit int; vertices are now within 2^27 of 0 as well."""
    h, w = 1, 1 << 30
    c = rle.MAX_POLYGON_COORD
    inside = [c - 8.0, 0.0, float(c), 0.0, float(c), 1.0, c - 8.0, 1.0]  # a 1 x 8 rectangle
    assert rle.area(rle.from_polygons([inside], h, w)) == 8
    with pytest.raises(RLEError, match=rf"^W: polygon 0 has a vertex far outside the 1x{w} image: expected x in "
                                       rf"\[-{c}, {c}\] and y in \[-1, 2\], got x in \[{c - 7}, {c + 1}\]"):
        rle.from_polygons([[c - 7.0, 0.0, c + 1.0, 0.0, c + 1.0, 1.0]], h, w, "W")


def test_legitimate_polygons_are_never_refused():
    """Outlines of real shapes: a wiggly 800-vertex contour (about 3 image perimeters), a 200-vertex zigzag of
    exactly 10 perimeters, a COCO-style multi-part object; each gives pycocotools' own raster."""
    h, w = 480, 640
    t = np.linspace(0, 2 * np.pi, 800, endpoint=False)
    r = 200 + 30 * np.sin(40 * t)
    wiggly = np.column_stack([320 + r * np.cos(t), 240 + r * np.sin(t)]).ravel().round(2).tolist()
    zigzag = np.column_stack([np.where(np.arange(200) % 2 == 0, 10.0, 10.0 + 112.0), np.linspace(5, 475, 200)]).ravel().tolist()
    parts = [[10, 10, 100, 10, 100, 90, 10, 90], [200.5, 300.25, 260, 310, 230, 400]]
    for polys in ([wiggly], [zigzag], parts):
        arrays = [np.asarray(p, dtype=np.float64) for p in polys]
        edges = sum(float(np.maximum(np.abs(np.diff(np.r_[a[0::2], a[0]])), np.abs(np.diff(np.r_[a[1::2], a[1]]))).sum()) for a in arrays)
        assert edges < rle.polygon_outline_limit(h, w)
        got = rle.from_polygons(polys, h, w)
        raster = _coco.frPyObjects(polys, h, w)
        want = raster[0] if len(raster) == 1 else _coco.merge(raster, intersect=False)
        assert got == {"size": [h, w], "counts": want["counts"].decode()}
    assert 22_000 < float(np.abs(np.diff(zigzag[0::2] + zigzag[:1])).sum()) <= 22_400  # 10 perimeters of 2 x 1120


def test_huge_integers_and_odd_values_are_refused_as_the_polygon_they_are():
    with pytest.raises(RLEError, match=r"^W: polygon 1 is not a list of numbers"):  # was a bare OverflowError
        rle.from_polygons([[0, 0, 2, 0, 2, 2], [10 ** 400, 0, 1, 0, 1, 1]], 4, 4, "W")
    with pytest.raises(RLEError, match=r"^W: polygon 0 needs an even number"):  # the first polygon's error first
        rle.from_polygons([[0, 0, 2, 0, 2], [10 ** 400, 0, 1, 0, 1, 1]], 4, 4, "W")
    with pytest.raises(RLEError, match=r"^W: polygon 0 has a NaN"):
        rle.from_polygons([[0, 0, 2, None, 2, 2], ["x"]], 4, 4, "W")


_vertex = st.one_of(st.integers(-70, 100), st.sampled_from([0.5, -0.5, 2.5, float("nan"), float("inf"), True]))


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 30), st.integers(1, 30), st.integers(1, 400), st.integers(2, 12),
       st.lists(st.lists(st.lists(_vertex, max_size=16), min_size=1, max_size=3), min_size=1, max_size=3))
@example(10, 10, 400, 12, [[[0, 0, 4, 0, 4, 4]], [[1, 1, 5, 1, 5, 5], [0, 0, 2, 0, 2, 2]]])  # accepted
@example(10, 10, 8, 12, [[[0, 0, 4, 0, 4, 4]]])  # an outline of 12 over a limit of 8
@example(10, 10, 400, 4, [[[0, 0, 4, 0, 4, 4], [0, 0, 2, 0, 2, 2]]])  # 6 vertices in a mask, over a cap of 4
def test_the_guard_is_the_polygon_by_polygon_rule(h, w, min_outline, max_vertices, groups):
    """check_polygons decides each rule over all the polygons at once and names the culprit only when a rule fails;
    its verdict and message are those of the plain polygon-by-polygon rule (tests/oracles/masks.polygon_refusal),
    here with the outline floor and the vertex cap lowered so that every rule is reached."""
    flat = [p for g in groups for p in g]
    with patch.object(rle, "MIN_POLYGON_OUTLINE", min_outline), patch.object(rle, "MAX_POLYGON_VERTICES", max_vertices):
        refusal = oracle.polygon_refusal(groups, h, w, "W")
        if refusal is None:
            assert [a.tolist() for a in rle.check_polygons(groups, h, w, "W")] == [np.asarray(p, dtype=float).tolist() for p in flat]
        else:
            with pytest.raises(RLEError) as e:
                rle.check_polygons(groups, h, w, "W")
            assert str(e.value) == refusal


def test_frpyobjects_gets_polygons_only_from_the_guarded_function():
    """Every ``frPyObjects`` call in perckit either passes an uncompressed RLE dict literal ({"counts", "size"}) or
    sits in ``rle.polygon_unions``, whose first statement is the guard; pycocotools' other polygon and box entry
    points are not called at all."""
    calls, others = [], []
    for path in sorted((REPO / "src" / "perckit").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Attribute) and node.attr in ("frPoly", "frBbox", "frUncompressedRLE"):
                    others.append(f"{path.name}:{node.lineno}")
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "frPyObjects":
                    arg = node.args[0]
                    is_rle = isinstance(arg, ast.Dict) and {k.value for k in arg.keys if isinstance(k, ast.Constant)} == {"counts", "size"}
                    calls.append((path.relative_to(REPO).as_posix(), fn.name, is_rle))
    polygon_callers = {(p, f) for p, f, is_rle in calls if not is_rle}
    assert polygon_callers == {("src/perckit/rle.py", "polygon_unions")}, polygon_callers
    assert any(is_rle for _, _, is_rle in calls) and others == []  # the scan sees both kinds of call
    body = next(n for n in ast.walk(ast.parse((REPO / "src/perckit/rle.py").read_text())) if isinstance(n, ast.FunctionDef) and n.name == "polygon_unions").body
    first = body[1] if isinstance(body[0], ast.Expr) else body[0]  # after the docstring
    assert "check_polygons(" in ast.unparse(first)


# ---------------------------------------------------------------- cause 3: the one sampler


@st.composite
def rles(draw, max_side=24, canonical=False):
    """A valid RLE, unless ``canonical`` sometimes not canonical (zero-length runs in the middle, as a release may
    hold them: the samplers read them right; pycocotools' merge does not, so the pair counts take canonical ones)."""
    m = draw(hnp.arrays(bool, st.tuples(st.integers(1, max_side), st.integers(1, max_side))))
    r = rle.encode(m)
    if not canonical and draw(st.booleans()):
        runs = [int(v) for v in rle.decode_counts(r["counts"])]
        k = draw(st.integers(0, len(runs)))
        runs = runs[:k] + [0, 0] + runs[k:]  # two empty runs: the same pixels
        r = rle.from_uncompressed({"size": r["size"], "counts": runs})
    return r


@FAST
@given(rles(), st.integers(1, 40), st.integers(1, 40))
def test_resize_nearest_is_the_library_resize_bit_for_bit(r, h, w):
    for rule in rle.RESIZE_RULES:
        assert rle.resize_nearest(r, [h, w], rule=rule) == oracle.resize_nearest(r, [h, w], rule)


@FAST
@given(rles(), st.integers(1, 40), st.integers(1, 40))
def test_small_mask_is_the_dense_pixel_centre_sampling(r, h, w):
    got = previews.small_mask(r, h, w)
    assert got.shape == (h, w) and got.dtype == bool
    np.testing.assert_array_equal(got, oracle.small_mask(r, h, w))


def test_the_sampler_walk_reads_any_grid_of_source_pixels():
    """The compiled walk over the run ends (one search per column, then forward) gives the dense mask's pixels for
    rising, repeated and falling rows and columns alike."""
    rng = np.random.default_rng(3)
    m = rng.random((37, 53)) < 0.4
    r = rle.encode(m)
    for rows, cols in [(np.sort(rng.integers(0, 37, 91)), np.sort(rng.integers(0, 53, 70))),
                       (rng.integers(0, 37, 40), rng.integers(0, 53, 30)), (np.arange(37), np.arange(53))]:
        got = rle.sample_nearest(r, rows, cols)
        assert got.flags.f_contiguous
        np.testing.assert_array_equal(got, m[np.ix_(rows, cols)])


def test_the_huge_refcoco_answer_is_resized_from_its_runs_in_bounded_memory():
    """The 46-character answer scored against a 480 x 640 mask with resize_predictions="nearest": before, the
    32768 x 32768 mask was decoded whole (10 to 34 s and 2.2 GB; SIGSEGV under this cap: pycocotools does not check
    its malloc); now the target grid is sampled from its 2 runs. Every pixel of the answer is foreground, so
    IoU = |G| / (480 x 640)."""
    result = run_capped(f"""
import time
from perckit import lmms_eval, rle
from perckit.refcoco_m.metric import refer_iou
import numpy as np
gt = np.zeros((480, 640), dtype=bool)
gt[100:340, 200:520] = True  # 240 x 320 = 76,800 pixels
refer_iou([{{"expression_id": "e", "mask": rle.encode(gt)}}], [{{"expression_id": "e", "mask": rle.encode(gt)}}])  # warm
RESULT = {{"base_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10}}
start = time.perf_counter()
mask, form = lmms_eval.mask_from_text({HUGE_ANSWER!r}, 480, 640)
out = refer_iou([{{"expression_id": "e", "mask": mask}}], [{{"expression_id": "e", "mask": rle.encode(gt)}}],
                resize_predictions="nearest")
RESULT.update(form=form, size=mask["size"], miou=out["miou"], seconds=time.perf_counter() - start)
""")
    assert result["form"] == "rle" and result["size"] == [32768, 32768]
    assert result["miou"] == 76_800 / (480 * 640)
    assert result["seconds"] < 2 and result["peak_mib"] - result["base_mib"] < 64, result


@FAST
@given(rles(max_side=12), rles(max_side=12, canonical=True))
def test_refer_iou_with_resize_gives_the_iou_of_the_dense_resize(p, g):
    ours = refer_iou([{"expression_id": "e", "mask": p}], [{"expression_id": "e", "mask": g}], resize_predictions="nearest")
    resized = oracle.resize_nearest(p, g["size"], "opencv")  # refer_iou's rule
    a, b = oracle.dense(resized), oracle.dense(g)
    union = int((a | b).sum())
    assert ours["miou"] == (int((a & b).sum()) / union if union else 1.0)


# ---------------------------------------------------------------- cause 3: the pixel budget


def _huge_row(frames: int = 5) -> dict:
    return {"query_id": "q", "frames": [{"frame_id": i, "mask": dict(HUGE)} for i in range(frames)]}


@pytest.fixture
def no_decoding(monkeypatch):
    """rle.decode fails the test if it is called at all."""
    def refuse(_):
        raise AssertionError("a mask was decoded before the budget refused the batch")
    monkeypatch.setattr(rle, "decode", refuse)


def test_collate_refuses_a_tiny_row_declaring_gigabytes_before_decoding(no_decoding):
    """The issue's ~391-byte row (5 frames of 32768 x 32768): before, 153 s then a bare MemoryError; now an RLEError
    naming the mask that passes the budget, with nothing decoded."""
    row = _huge_row()
    assert len(json.dumps(row)) < 400
    with pytest.raises(RLEError) as e:  # no_decoding: refused from the declared sizes, nothing decoded
        pt.collate([row])
    assert str(e.value) == ("row 0: frames[1].mask: expected at most 1073741824 mask pixels decoded or resized per batch of "
                            "perckit.torch.collate, got 2147483648 with this mask's 1073741824 (pass max_pixels=... to "
                            "perckit.torch.collate to raise it)")
    # spread over the rows of a batch: still one budget
    with pytest.raises(RLEError, match=r"^row 1: frames\[0\]\.mask: expected at most 1073741824 .* per batch"):
        pt.collate([_huge_row(1), _huge_row(1)])


def test_decode_masks_and_the_transform_refuse_before_decoding(no_decoding):
    with pytest.raises(RLEError, match=r"^row\.frames\[1\]\.mask: .* per call of perckit\.torch\.decode_masks"):
        pt.decode_masks(_huge_row())
    batch = {"frames": [_huge_row()["frames"]], "query_id": ["q"]}
    with pytest.raises(RLEError, match=r"^frames\[0\]\[1\]\.mask: .* per batch of perckit\.torch\.masks_transform, got 2147483648 .*"
                                       r"pass max_pixels=\.\.\. to perckit\.torch\.masks_transform"):
        pt.masks_transform()(batch)
    ds = datasets.Dataset.from_list([_huge_row()]).with_transform(pt.masks_transform(["frames"]))
    with pytest.raises(RLEError, match=r"^frames\[0\]\[1\]\.mask: expected at most 1073741824"):
        ds[0]


def test_the_budget_counts_declared_pixels_and_max_pixels_raises_it():
    m = rle.encode(np.eye(10, dtype=bool))  # 100 pixels each
    row = {"a": m, "b": [m, {"size": [], "counts": ""}, m]}  # 300 pixels; the marker costs nothing
    with pytest.raises(RLEError, match=r"^row 0: b\[2\]: expected at most 250 mask pixels .*, got 300 with this mask's 100"):
        pt.collate([row], max_pixels=250)
    out = pt.collate([row], max_pixels=300)
    assert out["b"][0][1] is None and all(bool((t == pt.torch.eye(10, dtype=pt.torch.bool)).all()) for t in (out["a"][0], out["b"][0][0], out["b"][0][2]))
    assert pt.decode_masks(row, max_pixels=300)["b"][1] is None
    with pytest.raises(RLEError, match=r"^b\[0\]\[2\]: expected at most 299"):
        pt.masks_transform(max_pixels=299)({"a": [m], "b": [row["b"]]})
    assert pt.masks_transform(max_pixels=300)({"a": [m], "b": [row["b"]]})["b"][0][1] is None
    for bad in (0, -1, True, 1.5, "2**31"):
        with pytest.raises(OptionError, match="option 'max_pixels': expected a positive integer"):
            pt.collate([row], max_pixels=bad)
        with pytest.raises(OptionError, match="option 'max_pixels'"):
            pt.masks_transform(max_pixels=bad)
    with pytest.raises(RLEError, match=r"^row 0: a: expected 'size' = \[H, W\]"):  # a bad size: the decoder's error, first
        pt.collate([{"a": {"size": [2, "x"], "counts": "4"}, "b": _huge_row()["frames"]}])


def test_a_mask_temporal_prediction_row_has_one_resize_budget(monkeypatch):
    monkeypatch.setattr(rle, "PIXEL_BUDGET", 64)  # two 4 x 8 frames per prediction row
    small = rle.encode(np.eye(2, 4, dtype=bool))
    gt = rle.encode(np.repeat(np.repeat(np.eye(2, 4, dtype=bool), 2, 0), 2, 1))  # small upscaled 2x
    refs = [ref("q", [(1, gt), (2, gt), (3, gt)], [1, 2, 3]), ref("r", [(1, gt), (2, gt)], [1, 2])]
    preds = [pred("q", [(1, small), (2, small), (3, gt)]), pred("r", [(1, small), (2, small)])]
    out = r4d_metrics.mask_temporal(preds, refs, resize_predictions="nearest")  # 64 pixels resized in each row
    assert out["per_query"][0]["miou"] == out["per_query"][1]["miou"] == 1.0
    preds[0] = pred("q", [(1, small), (2, small), (3, small)])
    with pytest.raises(PredictionError) as e:
        r4d_metrics.mask_temporal(preds, refs, resize_predictions="nearest")
    assert str(e.value) == ("prediction query 'q': frame 3: expected at most 64 mask pixels decoded or resized per prediction "
                            "row, got 96 with this mask's 32 (predict the masks at the reference size, or resize them before scoring)")


def test_an_m4seg_prediction_row_has_one_resize_budget(monkeypatch):
    monkeypatch.setattr(rle, "PIXEL_BUDGET", 8)  # two masks resized to image 1 (1 x 4)
    few = {**S1_PRED, "groundings": [{"image_index": 1, "name": "chair", "segmentation": R("02", (1, 2))}] * 2}
    assert m4seg_metrics.compute([few], [S1_REF], resize_predictions="nearest", **NO_METEOR)["num_pred_groundings"] == 2
    many = {**few, "groundings": few["groundings"] * 2}
    with pytest.raises(PredictionError, match=r"^prediction 's1': groundings\[2\]\.segmentation: expected at most 8 mask pixels .* "
                                              r"per prediction row, got 12 with this mask's 4"):
        m4seg_metrics.compute([many], [S1_REF], resize_predictions="nearest", **NO_METEOR)


def test_a_preview_row_with_many_masks_is_refused_naming_the_mask(monkeypatch):
    tile = 384 * 512  # a 24 x 32 image is drawn at 384 x 512
    monkeypatch.setattr(rle, "PIXEL_BUDGET", 10 * tile)
    m = rle.encode(np.eye(24, 32, dtype=bool))
    row = {"image_id": 7, "image": None, "samples": [{"mask": m}] * 10}
    assert refcoco_preview.image_preview(row)[:8] == b"\x89PNG\r\n\x1a\n"
    row["samples"] = [{"mask": m}] * 5000
    start = time.perf_counter()
    with pytest.raises(RLEError, match=rf"^RefCOCO-M image 7: mask 10: expected at most {10 * tile} mask pixels .* per preview "
                                       rf"row, got {11 * tile} with this mask's {tile}$"):
        refcoco_preview.image_preview(row)
    assert time.perf_counter() - start < 2  # refused at the 11th mask, not after sampling 5000


def test_mask_overlay_charges_its_canvas_and_needs_one_size():
    gt = rle.encode(np.eye(4, dtype=bool))
    assert figures.mask_overlay(None, gt, gt, scale=2, max_pixels=128).size == (8, 8)  # 2 masks of 64 pixels
    with pytest.raises(RLEError, match=r"^mask_overlay: pred: expected at most 127 mask pixels .* per figure, got 128"):
        figures.mask_overlay(None, gt, gt, scale=2, max_pixels=127)
    with pytest.raises(RLEError, match=r"^mask_overlay: gt and pred: mask 1 has size \[2, 2\], expected \[4, 4\]"):
        figures.mask_overlay(None, gt, rle.encode(np.eye(2, dtype=bool)))


def test_decode_views_pycocotools_output_without_a_copy():
    m = np.random.default_rng(5).random((30, 20)) < 0.5
    out = rle.decode(rle.encode(m))
    assert out.dtype == bool and out.flags.f_contiguous and out.base is not None and out.base.dtype == np.uint8
    np.testing.assert_array_equal(out, m)
