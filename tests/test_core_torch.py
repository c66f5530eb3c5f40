"""perckit.torch and perckit.rle.encode_masks: masks as torch tensors and back.

- ``encode_masks``: a property test against numpy (decode(encode(x)) == x, the counts of ``rle.encode`` mask by
  mask) for numpy arrays and torch tensors of every accepted dtype, lists of masks of different sizes, strided
  tensors, more than 255 masks at once; every refusal (floats, 0/255 images, negative values, shapes, sizes).
- ``collate`` as a DataLoader ``collate_fn`` and ``masks_transform`` through ``with_transform``, over every config of
  every builder on its sample release: each RLE value becomes a ``torch.bool`` tensor equal to its decoded mask,
  "not provided" markers become None, every other value is the row's own; the transform decodes the rows read only.
- ``gather`` outside a process group (the real groups are in tests/test_benchmarks_gloo.py); ``import perckit``
  never imports perckit.torch or torch.
"""

from __future__ import annotations

import ast
import pickle
import subprocess
import sys

import numpy as np
import pytest
from helpers.common import REPO, lazy_import
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from perckit.hf import accumulate
from perckit import rle
from perckit.errors import OptionError, ReleaseFormatError, RLEError

torch = lazy_import("torch")  # imported when the first test uses it, not while the suite is collected
pt = lazy_import("perckit.torch")
FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: every config of every builder, and whether its rows hold COCO RLE masks
CONFIGS = {("r4d_bench", "all_queries"): True, ("r4d_bench", "subset_36"): True, ("r4d_bench", "frames"): True,
           ("syn4d", "tracking"): False, ("syn4d", "challenge"): False, ("refcoco_m", "expressions"): True,
           ("refcoco_m", "images"): True, ("m4seg", "default"): True, ("reason_av_edit", "default"): True}


# ---------------------------------------------------------------- encode_masks

batches = hnp.arrays(bool, st.tuples(st.integers(0, 4), st.integers(1, 9), st.integers(1, 9)))
KINDS = ("numpy bool", "numpy uint8", "numpy int64", "torch bool", "torch uint8", "torch int32")


def as_kind(masks: np.ndarray, kind: str):
    lib, dtype = kind.split()
    if lib == "numpy":
        return masks.astype(dtype)
    return torch.from_numpy(masks).to(getattr(torch, dtype))


@FAST
@given(batches, st.sampled_from(KINDS))
def test_encode_masks_round_trips_against_numpy(masks, kind):
    out = rle.encode_masks(as_kind(masks, kind))
    assert len(out) == masks.shape[0]
    for m, r in zip(masks, out):
        assert r == rle.encode(m) and isinstance(r["counts"], str) and r["size"] == list(m.shape)
        assert np.array_equal(rle.decode(rle.validate(r)), m)


def test_one_mask_and_lists_of_masks_of_any_sizes():
    rng = np.random.default_rng(0)
    one = rng.random((5, 7)) < 0.5
    assert rle.encode_masks(one) == [rle.encode(one)] == rle.encode_masks(torch.from_numpy(one))
    masks = [rng.random((3, 4)) < 0.5, torch.from_numpy(rng.random((6, 2)) < 0.5), np.zeros((1, 1), dtype=np.uint8)]
    assert rle.encode_masks(masks) == [rle.encode(np.asarray(m)) for m in masks]
    assert rle.encode_masks(np.zeros((0, 4, 4), dtype=bool)) == [] == rle.encode_masks([])


def test_strided_tensors_and_many_masks_in_one_call():
    rng = np.random.default_rng(1)
    base = torch.from_numpy(rng.random((6, 9, 11)) < 0.5)
    for view in (base.transpose(1, 2), base[::2, 1::3, ::2], base.permute(2, 0, 1)):
        assert rle.encode_masks(view) == [rle.encode(m.numpy()) for m in view]
    many = rng.random((300, 4, 5)) < 0.5  # more than pycocotools' 255-item uint8 index
    out = rle.encode_masks(many)
    assert len(out) == 300 and all(np.array_equal(rle.decode(r), m) for r, m in zip(out, many))


@pytest.mark.parametrize("bad, message", [
    (lambda: torch.rand(2, 3, 3), "got dtype torch.float32: threshold the scores first"),  # tensors made by the test
    (lambda: torch.rand(2, 3, 3, dtype=torch.float64, requires_grad=True), "got dtype torch.float64"),
    (np.full((2, 2), 0.7), "got dtype float64: threshold the scores first"),
    (np.array([[0, 255]], dtype=np.uint8), "got values in [0, 255] (a 0/255 mask image: pass masks > 0)"),
    (np.array([[0, -1]]), "got values in [-1, 0]"),
    (np.zeros(4, dtype=bool), "expected shape [N, H, W] or [H, W], got (4,)"),
    (np.zeros((1, 2, 3, 4), dtype=bool), "got (1, 2, 3, 4)"),
    (np.zeros((2, 0, 3), dtype=bool), "at least 1x1 pixels"),
    (np.array([["a"]]), "got dtype <U1"),
    ([[0, 1], [1, 0]], "masks[0]: expected a torch tensor or a numpy array"),
    ([np.zeros((2, 2, 2), dtype=bool)], "masks[0]: expected a 2-D mask [H, W], got shape (2, 2, 2)"),
    ("mask", "got str"),
])
def test_encode_masks_refusals(bad, message):
    with pytest.raises(RLEError) as e:
        rle.encode_masks(bad() if callable(bad) else bad)
    assert message in str(e.value)


def test_encode_masks_size_limit(monkeypatch):
    monkeypatch.setattr(rle, "MAX_PIXELS", 100)
    with pytest.raises(RLEError, match="exceeds the limit of 100 pixels"):
        rle.encode_masks(np.zeros((1, 11, 10), dtype=bool))
    assert len(rle.encode_masks(np.zeros((2, 10, 10), dtype=bool))) == 2


# ---------------------------------------------------------------- collate and masks_transform on every config


@pytest.fixture(scope="module")
def splits(tmp_path_factory):
    """One split of every config of every builder, built from its sample release."""
    from perckit.hf.entrypoints import builder_class
    from perckit.samples import write_release

    base = tmp_path_factory.mktemp("torch_releases")
    out = {}
    for benchmark in sorted({b for b, _ in CONFIGS}):
        write_release(benchmark, base / benchmark, **({"image_root": base / "m4img"} if benchmark == "m4seg" else {}))
        for config in [c.name for c in builder_class(benchmark).BUILDER_CONFIGS]:
            bl = builder_class(benchmark)(config_name=config, data_dir=str(base / benchmark), cache_dir=str(base / "cache" / benchmark))
            bl.download_and_prepare()
            out[benchmark, config] = bl.as_dataset(list(bl.info.splits)[-1])
    return out


def test_the_configs_are_every_builder_config(splits):
    assert set(splits) == set(CONFIGS)


def same_but_masks(row, got, where: str) -> tuple[int, int]:
    """Walk a row and its collated form together: every RLE is a bool tensor equal to its decoded mask (None for the
    "not provided" marker), every other value equal; returns (masks, not-provided markers) seen."""
    if isinstance(row, dict) and "size" in row and "counts" in row:
        if not row["size"]:
            assert got is None, where
            return 0, 1
        assert isinstance(got, torch.Tensor) and got.dtype == torch.bool and got.is_contiguous(), where
        assert list(got.shape) == list(row["size"]) and np.array_equal(got.numpy(), rle.decode(row)), where
        return 1, 0
    if isinstance(row, dict):
        assert isinstance(got, dict) and list(got) == list(row), where
        counts = [same_but_masks(row[k], got[k], f"{where}.{k}") for k in row]
        return sum(c[0] for c in counts), sum(c[1] for c in counts)
    if isinstance(row, list):
        assert isinstance(got, list) and len(got) == len(row), where
        counts = [same_but_masks(a, b, f"{where}[{i}]") for i, (a, b) in enumerate(zip(row, got))]
        return sum(c[0] for c in counts), sum(c[1] for c in counts)
    assert got == row or (isinstance(row, float) and np.isnan(row) and np.isnan(got)), where
    return 0, 0


def check_batches(batches, ds, where: str) -> int:
    masks, rows = 0, 0
    for batch in batches:
        assert list(batch) == ds.column_names
        n = len(batch[ds.column_names[0]])
        assert 1 <= n <= 4 and all(len(v) == n for v in batch.values())
        for i in range(n):
            row = ds[rows + i]
            got = {k: batch[k][i] for k in batch}
            masks += same_but_masks(row, got, f"{where} row {rows + i}")[0]
        rows += n
    assert rows == ds.num_rows
    return masks


@pytest.mark.parametrize("benchmark,config", list(CONFIGS))
def test_a_dataloader_with_collate_yields_mask_tensors(splits, benchmark, config):
    ds = splits[benchmark, config]
    masks = check_batches(torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=pt.collate), ds, f"{benchmark}/{config}")
    assert (masks > 0) == CONFIGS[benchmark, config]


@pytest.mark.parametrize("benchmark,config", list(CONFIGS))
def test_with_transform_decodes_masks_for_the_dataloader(splits, benchmark, config):
    ds = splits[benchmark, config]
    lazy = ds.with_transform(pt.masks_transform())
    masks = check_batches(torch.utils.data.DataLoader(lazy, batch_size=4, collate_fn=pt.collate), ds, f"{benchmark}/{config} with_transform")
    assert (masks > 0) == CONFIGS[benchmark, config]
    assert same_but_masks(ds[ds.num_rows - 1], lazy[ds.num_rows - 1], "last row")[0] == sum(
        same_but_masks(ds[ds.num_rows - 1], pt.decode_masks(ds[ds.num_rows - 1]), "decode_masks"))


def test_the_transform_with_torchs_default_collate_and_convert(splits):
    """What the README says of masks_transform and PyTorch's defaults (issue 33), on RefCOCO-M's expressions: with
    ``batch_size=None`` (torch's default_convert, one row at a time) the rows come with ``torch.bool`` masks and PIL
    images; with a batch size and no collate_fn, torch's default_collate refuses the PIL images, and without them the
    masks of different sizes; ``collate_fn=perckit.torch.collate`` batches the same rows as lists."""
    from PIL import Image

    ds = splits["refcoco_m", "expressions"]
    lazy = ds.with_transform(pt.masks_transform())
    rows = list(torch.utils.data.DataLoader(lazy, batch_size=None))
    assert len(rows) == ds.num_rows and all(r["mask"].dtype == torch.bool and isinstance(r["image"], Image.Image) for r in rows)
    assert [list(r["mask"].shape) for r in rows] == [m["size"] for m in ds["mask"]]
    with pytest.raises(TypeError, match=r"^default_collate: batch must contain tensors.* found <class 'PIL\."):
        next(iter(torch.utils.data.DataLoader(lazy, batch_size=2)))
    assert len({tuple(m["size"]) for m in ds["mask"]}) > 1  # masks of several sizes: default_collate cannot stack them
    no_images = ds.select_columns(["expression_id", "mask"]).with_transform(pt.masks_transform())
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        next(iter(torch.utils.data.DataLoader(no_images, batch_size=ds.num_rows)))
    batch = next(iter(torch.utils.data.DataLoader(lazy, batch_size=ds.num_rows, collate_fn=pt.collate)))
    assert all(torch.equal(a, r["mask"]) for a, r in zip(batch["mask"], rows)) and batch["image"][0].size == rows[0]["image"].size


def test_not_provided_masks_become_none(splits):
    """The metric rows carry "not provided" markers (``size: []``): av_reasoning predictions made without a mask."""
    from perckit.reason_av_edit import features as feats

    ds = splits["reason_av_edit", "default"].select_columns(["sample_id", "anchor_mask"])
    rows = [feats.make_prediction(r["sample_id"], anchor_mask=r["anchor_mask"] if i % 3 else None) for i, r in enumerate(ds)]
    assert rows[0]["anchor_mask"] == feats.NOT_PROVIDED_RLE and rows[1]["anchor_mask"]["size"]
    for batch in (pt.collate(rows), pt.masks_transform()({k: [r[k] for r in rows] for k in rows[0]})):
        assert [m is None for m in batch["anchor_mask"]] == [i % 3 == 0 for i in range(len(rows))]
        assert all(torch.equal(m, torch.from_numpy(rle.decode(r["anchor_mask"]))) for m, r in zip(batch["anchor_mask"], rows) if m is not None)
        assert [m is None for m in batch["reason_audio"]] == [False] * len(rows)  # a media marker is not a mask


def test_the_transform_decodes_only_the_rows_read(splits, monkeypatch):
    ds = splits["r4d_bench", "all_queries"]
    decoded = []
    real = rle.decode
    monkeypatch.setattr(rle, "decode", lambda r: decoded.append(r) or real(r))
    lazy = ds.with_transform(pt.masks_transform())
    assert decoded == []
    wanted = [i for i in range(ds.num_rows) if ds[i]["frames"]][:2]
    rows = lazy[wanted[0] : wanted[1] + 1]
    expected = sum(len(ds[i]["frames"]) for i in range(wanted[0], wanted[1] + 1))
    assert len(decoded) == expected and expected > 0
    assert all(isinstance(f["mask"], torch.Tensor) for frames in rows["frames"] for f in frames)


def test_the_transform_columns_option(splits):
    ds = splits["r4d_bench", "frames"]
    only = ds.with_transform(pt.masks_transform("annotations"))[0]
    assert all(isinstance(a["segmentation"], torch.Tensor) for a in only["annotations"]) and only["scene"] == ds[0]["scene"]
    queries = splits["r4d_bench", "all_queries"]
    row = next(r for r in queries.with_transform(pt.masks_transform(["scene"])) if r["frames"])
    assert isinstance(row["frames"][0]["mask"], dict)  # a column not named is left as it is
    with pytest.raises(OptionError, match=r"columns \['mask'\] are not in the batch; its columns are"):
        queries.with_transform(pt.masks_transform(["mask"]))[0]
    with pytest.raises(OptionError, match="must be column names"):
        pt.masks_transform([1])


def test_the_transform_pickles_for_dataloader_workers():
    t = pickle.loads(pickle.dumps(pt.masks_transform(["mask"])))
    out = t({"mask": [rle.encode(np.eye(3, dtype=bool)), {"size": [], "counts": ""}], "id": [1, 2]})
    assert torch.equal(out["mask"][0], torch.eye(3, dtype=torch.bool)) and out["mask"][1] is None and out["id"] == [1, 2]
    assert repr(t) == "perckit.torch.masks_transform(columns=['mask'])"


def test_collate_refusals_and_edge_cases():
    good = rle.encode(np.ones((2, 3), dtype=bool))
    assert pt.collate([]) == {}
    with pytest.raises(ReleaseFormatError, match=r"row 1: expected the columns of row 0 \['id', 'mask'\], got \['id'\]"):
        pt.collate([{"id": 0, "mask": good}, {"id": 1}])
    with pytest.raises(ReleaseFormatError, match="row 0: expected a mapping of columns"):
        pt.collate([(1, 2)])
    bad = {"size": [2, 3], "counts": good["counts"] + "1"}
    with pytest.raises(RLEError, match=r"row 1: frames\[0\]\.mask"):
        pt.collate([{"frames": [{"mask": good}]}, {"frames": [{"mask": bad}]}])
    # a torch- or numpy-formatted dataset gives the size as a tensor or an array; uncompressed counts are taken too
    out = pt.collate([{"m": {"size": torch.tensor([2, 3]), "counts": good["counts"]}},
                      {"m": {"size": np.array([], dtype=np.int32), "counts": ""}},
                      {"m": {"size": [2, 3], "counts": [0, 6]}}])
    assert torch.equal(out["m"][0], torch.ones(2, 3, dtype=torch.bool)) and out["m"][1] is None
    assert torch.equal(out["m"][2], torch.ones(2, 3, dtype=torch.bool))


# ---------------------------------------------------------------- gather without a group, import hygiene


def test_gather_needs_an_initialised_process_group():
    assert not torch.distributed.is_initialized()
    with pytest.raises(OptionError, match=r"torch.distributed is not initialised: call torch.distributed.init_process_group"):
        pt.gather(accumulate.accumulator("track_id"))
    with pytest.raises(OptionError, match="expected a perckit Accumulator"):
        pt.gather({"format": "perckit-accumulator"})


def test_perckit_never_imports_perckit_torch():
    code = ("import sys, perckit, perckit.rle, perckit.hf.accumulate, perckit.hf.benchmark, perckit.core.segmentation; "
            "[perckit.hf.accumulate.core(n, 'tracking' if n == 'syn4d' else None) for n, (_, s) in perckit.hf.benchmark.metrics().items() if s.core]; "
            "print(sorted(m for m in ('torch', 'perckit.torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout  # neither perckit.torch nor torch itself
    importers = []
    for path in sorted((REPO / "src" / "perckit").rglob("*.py")):
        if path.name == "torch.py" and path.parent.name == "perckit":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module == "perckit.torch" or (node.module == "torch" and node.level >= 1)
                                                     or (node.level and node.module is None and any(a.name == "torch" for a in node.names))):
                importers.append(str(path.relative_to(REPO)))
            if isinstance(node, ast.Import) and any(a.name == "perckit.torch" for a in node.names):
                importers.append(str(path.relative_to(REPO)))
    assert importers == []


def test_import_perckit_torch_is_the_real_torch_inside():
    assert pt.torch is sys.modules["torch"] and pt.__name__ == "perckit.torch"
    assert set(pt.__all__) == {"collate", "decode_masks", "gather", "masks_transform", "MasksTransform"}
