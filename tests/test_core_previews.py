"""perckit.draw.previews: every benchmark's previewer on its sample release (deterministic, small, <= 512 px), the
column add_preview appends, the masks sampled from RLE runs, and rows with missing fields; the format chosen from
the picture (issue 32) against the previous output (``oracles.previews``)."""

import io
from collections import Counter

import numpy as np
import pytest
from PIL import Image

from perckit.draw import previews
from perckit.hf import benchmark as benchmarks
from perckit import rle
from perckit.hf.entrypoints import builder_class

CASES = [("r4d_bench", "all_queries"), ("r4d_bench", "subset_36"), ("r4d_bench", "frames"), ("refcoco_m", "expressions"),
         ("refcoco_m", "images"), ("m4seg", "default"), ("syn4d", "tracking"), ("syn4d", "challenge"), ("reason_av_edit", "default")]
CAP = 80_000


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    from perckit.samples import write_release

    base = tmp_path_factory.mktemp("previews")
    out = {}
    for b in {b for b, _ in CASES}:
        kw = {"image_root": base / "m4img"} if b == "m4seg" else {}
        write_release(b, base / b, **kw)
        out[b] = base / b
    out["m4img"] = base / "m4img"
    # photographs of RefCOCO-M's size (360 x 480 to 480 x 640): their previews were JPEG before too
    write_release("refcoco_m", base / "refcoco_m_large", num_images=4, min_size=(360, 480), max_size=(480, 640))
    out["refcoco_m_large"] = base / "refcoco_m_large"
    return out, base / "cache"


def _builder(releases, b, config, release=None, **kw):
    paths, cache = releases
    bl = builder_class(b)(config_name=config, data_dir=str(paths[release or b]), cache_dir=str(cache / (release or b)), **kw)
    bl.download_and_prepare()
    return bl


def _rows(ds, previewer):
    return ds.with_format("arrow").data.table.select([c for c in previewer.columns if c in ds.column_names]).to_pylist()


def _jpeg(data: bytes) -> bool:
    return data[:3] == bytes((0xFF, 0xD8, 0xFF))


def _pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=np.int16)


def _old_jpeg(png: bytes) -> bytes:
    """The old encoder's JPEG of the picture a PNG holds (quality 80, baseline, 4:2:0)."""
    buf = io.BytesIO()
    Image.open(io.BytesIO(png)).convert("RGB").save(buf, format="JPEG", quality=80, optimize=False, progressive=False, subsampling=2)
    return buf.getvalue()


#: every previewer on its sample release (and RefCOCO-M at its real image size; M4Seg with its photos), and whether
#: its pictures are drawn over a photograph or a video frame
COMPARED = [(b, c, None, {}, b not in ("m4seg", "syn4d") or c == "challenge") for b, c in CASES] + [
    ("refcoco_m", "expressions", "refcoco_m_large", {}, True), ("refcoco_m", "images", "refcoco_m_large", {}, True),
    ("m4seg", "default", None, {"image_root": "m4img", "splits": ("test",)}, True)]


@pytest.mark.parametrize("benchmark,config,release,kw,photo", COMPARED, ids=lambda v: v if isinstance(v, str) else None)
def test_previews_against_the_previous_output(releases, monkeypatch, benchmark, config, release, kw, photo):
    """Issue 32: the format follows from the picture (JPEG over a photograph or a video frame, PNG on a flat canvas),
    each picture encoded once. Against the previous path (``oracles.previews``: PNG, re-encoded as JPEG past 48 KB;
    every row decoded and drawn): a row whose format stays PNG or stays JPEG gives the same bytes; a photograph's
    preview that was a PNG (a small image enlarged: the sample releases) is now exactly the JPEG the old encoder made
    of that same picture (and a flat drawing that was a JPEG would be the PNG of the picture that JPEG encoded),
    within q80's error of the lossless PNG (stated: mean absolute difference <= 5 levels, PSNR >= 28 dB on these
    noise textures, JPEG's worst case)."""
    from oracles import previews as old

    paths, _ = releases
    kw = {k: str(paths[v]) if k == "image_root" else v for k, v in kw.items()}
    bl = _builder(releases, benchmark, config, release, **kw)
    ds = bl.as_dataset(list(bl.info.splits)[-1])
    new = [c["bytes"] for c in previews.add_preview(ds, benchmarks.get(benchmark), bl, config).with_format("arrow")["preview"].to_pylist()]
    pv = benchmarks.get(benchmark).preview(bl, config)
    with monkeypatch.context() as mp:
        old.old_path(mp)
        before = [pv.draw(r) for r in _rows(ds, pv)]
    seen = Counter()
    for was, now in zip(before, new, strict=True):
        assert _jpeg(now) == photo
        seen["JPEG" if _jpeg(was) else "PNG", "JPEG" if _jpeg(now) else "PNG"] += 1
        if _jpeg(was) == _jpeg(now) and release == "refcoco_m_large":  # images shrunk: OpenCV's bilinear, was Pillow's
            diff = np.abs(_pixels(now) - _pixels(was))
            assert diff.mean() <= 10, diff.mean()  # noise after JPEG: 9 levels (smooth: within 1, see test_core_figures)
        elif _jpeg(was) == _jpeg(now):
            assert now == was
        else:  # the same picture: the JPEG is the old encoder's JPEG of the PNG's pixels
            png, jpeg = (was, now) if _jpeg(now) else (now, was)
            assert jpeg == _old_jpeg(png)
            diff = np.abs(_pixels(now) - _pixels(was))
            assert diff.mean() <= 5 and 10 * np.log10(255**2 / max(float((diff.astype(float) ** 2).mean()), 1e-9)) >= 28
    assert sum(seen.values()) == ds.num_rows > 0, seen
    if release == "refcoco_m_large":
        assert seen == {("JPEG", "JPEG"): ds.num_rows}  # photographs of the real size: JPEG before and now


@pytest.mark.parametrize("benchmark,config,release", [("refcoco_m", "expressions", "refcoco_m_large"), ("r4d_bench", "all_queries", None),
                                                      ("m4seg", "default", None), ("reason_av_edit", "default", None)])
def test_previews_are_deterministic_whatever_came_before(releases, monkeypatch, benchmark, config, release):
    """Two runs, one over the rows in order and one in reverse (so neither a kept canvas nor a shared picture carries
    over the same way): the same bytes for every row. In order, each picture is encoded once (one ``Image.save``; was
    two for a JPEG) and each image decoded once per run of rows over it (the expressions of one sample share one
    drawing)."""
    from perckit.draw import figures

    bl = _builder(releases, benchmark, config, release)
    ds = bl.as_dataset(list(bl.info.splits)[-1])
    rows = _rows(ds, benchmarks.get(benchmark).preview(bl, config))
    counts = Counter()
    for name, mod in (("save", Image.Image), ("open_canvas", figures)):
        fn = getattr(mod, name)
        monkeypatch.setattr(mod, name, lambda *a, _fn=fn, _name=name, **k: (counts.update([_name]), _fn(*a, **k))[1])
    pv = benchmarks.get(benchmark).preview(bl, config)
    first = [pv(r) for r in rows]
    key = [[r.get(c) for c in pv.same or pv.columns] for r in rows]
    assert counts["save"] == sum(i == 0 or k != key[i - 1] for i, k in enumerate(key))  # one encoding per picture
    if benchmark == "refcoco_m":  # the rows of an image, and of a sample, are consecutive
        assert counts["save"] < len(rows) and counts["open_canvas"] == len({r["image"]["bytes"] for r in rows})
    pv = benchmarks.get(benchmark).preview(bl, config)
    assert [pv(r) for r in reversed(rows)][::-1] == first


@pytest.mark.parametrize("benchmark,config", CASES)
def test_every_previewer_on_its_sample_release(releases, benchmark, config):
    bl = _builder(releases, benchmark, config)
    split = list(bl.info.splits)[-1]
    ds = bl.as_dataset(split)
    out = previews.add_preview(ds, benchmarks.get(benchmark), bl, config)
    assert out.column_names == ds.column_names + [previews.PREVIEW_COLUMN]
    assert {k: v for k, v in out.features.items() if k != previews.PREVIEW_COLUMN} == ds.features
    assert type(out.features[previews.PREVIEW_COLUMN]).__name__ == "Image"
    cells = out.with_format("arrow")[previews.PREVIEW_COLUMN].to_pylist()
    again = previews.add_preview(ds.select(range(min(3, ds.num_rows))), benchmarks.get(benchmark), bl, config)
    assert [c["bytes"] for c in again.with_format("arrow")[previews.PREVIEW_COLUMN].to_pylist()] == [c["bytes"] for c in cells[:3]]
    for c in cells:
        assert 0 < len(c["bytes"]) <= CAP
        im = Image.open(io.BytesIO(c["bytes"]))
        assert im.format in ("PNG", "JPEG") and max(im.size) <= previews.MAX_SIDE


@pytest.mark.parametrize("benchmark,config", [c for c in CASES if c[1] in ("all_queries", "expressions", "default", "tracking")])
def test_every_colour_a_preview_draws_is_in_its_legend(releases, benchmark, config):
    """The legend the demo report prints beside a default config's preview (issue 33): every palette colour found in the
    first rows' pictures is one of the row's legend colours, and a picture drawn on a canvas says so."""
    from perckit.draw import figures

    bl = _builder(releases, benchmark, config)
    ds = bl.as_dataset(list(bl.info.splits)[-1])
    previewer = benchmarks.get(benchmark).preview(bl, config)
    palette = set(figures.OBJECT_COLOURS) | {figures.NEUTRAL}
    for row in ds.with_format("arrow")[0:4].to_pylist():
        data = previewer(row)
        legend = list(previewer.legend(row))
        assert legend and all(isinstance(label, str) and label for label, _ in legend)
        if data[:3] == bytes((0xFF, 0xD8, 0xFF)):
            continue  # a JPEG's colours are not exact
        pixels = {tuple(c) for c in np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).reshape(-1, 3)}
        drawn = palette & pixels
        assert drawn <= {tuple(c) for _, c in legend if c is not None}, (row.get("sample_id"), drawn, legend)


def test_m4seg_with_photos(releases):
    paths, _ = releases
    bl = _builder(releases, "m4seg", "default", image_root=str(paths["m4img"]), splits=("test",))
    ds = bl.as_dataset("test")
    out = previews.add_preview(ds, benchmarks.get("m4seg"), bl, "default")
    assert all(0 < len(c["bytes"]) <= CAP for c in out.with_format("arrow")["preview"].to_pylist())


def test_a_large_split_draws_in_several_processes_with_the_same_bytes(releases, monkeypatch):
    """Above PARALLEL_ROWS rows (lowered here) the previews are drawn by ``datasets.map`` in several processes: the
    same cells, in the same order, as one process draws."""
    bl = _builder(releases, "m4seg", "default", splits=("test",))
    ds = bl.as_dataset("test")
    one = previews.add_preview(ds, benchmarks.get("m4seg"), bl, "default").with_format("arrow")["preview"].to_pylist()
    monkeypatch.setattr(previews, "PARALLEL_ROWS", 4)
    monkeypatch.setattr(previews, "BATCH_ROWS", 3)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    assert previews.preview_processes(ds.num_rows, len) == 2
    assert previews.preview_processes(3, len) is None  # a small split: one process
    many = previews.add_preview(ds, benchmarks.get("m4seg"), bl, "default").with_format("arrow")["preview"].to_pylist()
    assert [c["bytes"] for c in many] == [c["bytes"] for c in one] and len(one) == ds.num_rows


def test_previews_draw_on_one_opencv_thread_and_restore_the_count(releases, monkeypatch, tmp_path):
    """The preview pass runs OpenCV on one thread (its pool's workers spun between the small calls: 0.7 s of CPU in a
    4.9 s pass over 600 RefCOCO-M images) and gives the caller's thread count back; the pictures are the bytes that
    OpenCV's threads draw."""
    import cv2

    from perckit.draw import figures

    bl = _builder((releases[0], tmp_path), "refcoco_m", "expressions", "refcoco_m_large")  # a cache of its own: drawn, not loaded
    ds = bl.as_dataset("validation")
    pv = benchmarks.get("refcoco_m").preview(bl, "expressions")
    caller = cv2.getNumThreads()
    seen = []
    open_canvas = figures.open_canvas
    monkeypatch.setattr(figures, "open_canvas", lambda *a, **k: (seen.append(cv2.getNumThreads()), open_canvas(*a, **k))[1])
    try:
        cv2.setNumThreads(3)
        cells = previews.add_preview(ds, benchmarks.get("refcoco_m"), bl, "expressions").with_format("arrow")["preview"]
        assert seen and set(seen) == {1} and cv2.getNumThreads() == 3
        threaded = [pv(r) for r in _rows(ds, pv)]  # drawn here, on OpenCV's 3 threads
    finally:
        cv2.setNumThreads(caller)
    assert [c["bytes"] for c in cells.to_pylist()] == threaded and len(threaded) == ds.num_rows
    big = np.random.default_rng(0).integers(0, 256, (1440, 1920, 3), dtype=np.uint8)  # large enough for OpenCV to split
    mask = np.zeros(big.shape[:2], bool)
    mask[100:1300, 200:1700] = True
    drawn = {}
    for n in (1, 4):
        try:
            cv2.setNumThreads(n)
            drawn[n] = [figures.resized(big, 480, 640), figures.resized(big, 1000, 1500),
                        figures.paint_masks(big, [(mask, (0, 114, 178))], line=3)]
        finally:
            cv2.setNumThreads(caller)
    assert all(np.array_equal(a, b) for a, b in zip(drawn[1], drawn[4], strict=True))


def test_a_previewer_that_cannot_be_pickled_draws_in_this_process(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert previews.preview_processes(10**6, len) == 4
    pending = (i for i in range(3))  # a generator does not pickle: a previewer holding one runs in this process

    def draw(table):
        return next(pending)

    assert previews.preview_processes(10**6, draw) is None


def test_no_previewer_leaves_the_dataset():
    import datasets

    ds = datasets.Dataset.from_dict({"a": [1]})
    assert previews.add_preview(ds, benchmarks.get("m4seg"), None, "not_a_config") is ds


def test_small_mask_matches_the_decoded_mask():
    rng = np.random.default_rng(0)
    m = rng.random((37, 53)) > 0.6
    r = rle.encode(m)
    assert (previews.small_mask(r, 37, 53) == m).all()
    ys = ((np.arange(20) + 0.5) * 37 / 20).astype(int)
    xs = ((np.arange(31) + 0.5) * 53 / 31).astype(int)
    assert (previews.small_mask(r, 20, 31) == m[np.ix_(ys, xs)]).all()
    assert not previews.small_mask(rle.empty(5, 7), 10, 14).any()


def test_odd_rows_draw_what_exists():
    from perckit.m4seg.preview import row_preview as m4
    from perckit.reason_av_edit.preview import row_preview as rav
    from perckit.refcoco_m.preview import expression_preview, image_preview
    from perckit.syn4d.preview import row_preview as syn

    marker = {"size": [], "counts": ""}
    for fn, row in [
        (m4, {"example_id": "x", "images": None, "groundings": None}),
        (m4, {"example_id": "x", "images": [{"height": 10, "width": 12}], "groundings": [{"image_index": 1, "mask": marker}, None]}),
        (expression_preview, {"expression_id": "e", "image": None, "mask": None, "height": None, "width": None}),
        (image_preview, {"image_id": 1, "image": {"bytes": None, "path": None}, "samples": [{"mask": marker}]}),
        (syn, {"sequence_id": "s", "image_size": None, "intrinsics": None, "tracks_ref0": None}),
        (rav, {"sample_id": "r", "video": {"bytes": None, "path": None}, "anchor_mask": marker, "anchor_frame": None}),
    ]:
        data = fn(row)
        assert Image.open(io.BytesIO(data)).size[0] > 0


def test_unreadable_image_bytes_raise_a_perckit_error():
    from perckit.errors import ReleaseFormatError
    from perckit.refcoco_m.preview import expression_preview

    with pytest.raises(ReleaseFormatError, match="expression 'e'"):
        expression_preview({"expression_id": "e", "image": {"bytes": b"not an image", "path": None}, "mask": rle.empty(4, 4), "height": 4, "width": 4})


def test_r4d_missing_frame_file_names_it(releases, tmp_path):
    import shutil

    from perckit.errors import ReleaseNotFoundError
    from perckit.r4d_bench.preview import make_previewer

    paths, cache = releases
    copy = tmp_path / "r4d"
    shutil.copytree(paths["r4d_bench"], copy)
    bl = builder_class("r4d_bench")(config_name="all_queries", data_dir=str(copy), cache_dir=str(tmp_path / "cache"))
    bl.download_and_prepare()
    row = bl.as_dataset("test").data.slice(0, 1).to_pylist()[0]
    pv = make_previewer(bl, "all_queries")
    for p in (copy / "data" / "scenes" / row["scene"]).rglob("*.jpg"):
        p.unlink()
    with pytest.raises(ReleaseNotFoundError, match="R4D-Bench scene"):
        pv(row)
