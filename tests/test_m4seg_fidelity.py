"""Issue 14, M4Seg: gIoU / cIoU pool the per-image union masks over every image of a sample (golden values by
hand), source="auto" gives the Hub Parquet's ids and rows, and an unclosed streaming iterator exits quietly."""

import subprocess
import sys
import textwrap

import pytest
from helpers.common import DS_MAJOR, REPO
from helpers.m4seg import NO_METEOR, R, g_pred, g_ref, ref_row

from perckit.hf.entrypoints import build_split
from perckit.m4seg import metric as core
from perckit.m4seg.metric import geometry as m4geom
from perckit.core import segmentation as seg
from perckit.core.segmentation import reduce_iou

# ---------------------------------------------------------------- gIoU / cIoU (metric card, "Extras")


def _score(preds, refs):
    return core.compute(preds, refs, **NO_METEOR, per_sample=True)


def _pred(eid, groundings):
    return {"example_id": eid, "a": "", "groundings": groundings}


# A: image 1 (1x2) predicted perfectly; image 2 (1x4) has no GT but a false full-image mask.
#    Per image: (I, U) = (2, 2) and (0, 4), so gIoU = 2 / 6 = 1/3 (before issue 14: image 2 was skipped, 1.0).
A_REF = ref_row("a", "cup_101", [(1, 2), (1, 4)], [g_ref(1, "cup", (0, 7), R("02", (1, 2)))])
A_PRED = _pred("a", [g_pred(1, "cup", R("02", (1, 2))), g_pred(2, "cup", R("04", (1, 4)))])
# B: image 1 predicted perfectly; image 2 has GT [[0,1,1,0]] and no prediction: (2, 2) + (0, 2), gIoU 2/4.
B_REF = ref_row("b", "cup_101 and cup_201", [(1, 2), (1, 4)], [
    g_ref(1, "cup", (0, 7), R("02", (1, 2))), g_ref(2, "cup", (12, 19), R("121", (1, 4)))])
B_PRED = _pred("b", [g_pred(1, "cup", R("02", (1, 2)))])
# C: image 1 GT [[1,0]] predicted perfectly; image 2 has neither GT nor prediction: (1, 1) + (0, 0), gIoU 1.
C_REF = ref_row("c", "cup_101", [(1, 2), (1, 4)], [g_ref(1, "cup", (0, 7), R("011", (1, 2)))])
C_PRED = _pred("c", [g_pred(1, "cup", R("011", (1, 2)))])
# D: one GT grounding whose mask is empty, no prediction: the pooled union is empty; gIoU 1 (refer_iou's rule).
D_REF = ref_row("d", "cup_101", [(1, 4)], [g_ref(1, "cup", (0, 7), R("4", (1, 4)))])
D_PRED = _pred("d", [])
# N: no GT grounding at all, a predicted mask: left out of gIoU and cIoU (unchanged).
N_REF = ref_row("n", "Nothing here.", [(1, 4)], [])
N_PRED = _pred("n", [g_pred(1, "cup", R("04", (1, 4)))])


def test_giou_counts_a_false_mask_in_an_image_without_gt():
    out = _score([A_PRED], [A_REF])
    assert out["giou"] == pytest.approx(1 / 3) and out["ciou"] == pytest.approx(1 / 3)
    row = out["per_sample"][0]
    assert (row["inter"], row["union"]) == (2, 6)
    assert out["miou"] == 1.0  # the mIoU pairing is per image and unchanged: the false mask has no GT to pair


def test_giou_image_with_gt_only():
    out = _score([B_PRED], [B_REF])
    assert out["giou"] == pytest.approx(0.5) and out["ciou"] == pytest.approx(0.5)
    assert (out["per_sample"][0]["inter"], out["per_sample"][0]["union"]) == (2, 4)


def test_giou_image_with_neither_adds_nothing():
    out = _score([C_PRED], [C_REF])
    assert out["giou"] == 1.0 and out["ciou"] == 1.0
    assert (out["per_sample"][0]["inter"], out["per_sample"][0]["union"]) == (1, 1)


def test_giou_and_ciou_of_an_empty_union_are_1_as_refer_iou():
    out = _score([D_PRED], [D_REF])
    assert (out["per_sample"][0]["inter"], out["per_sample"][0]["union"]) == (0, 0)
    assert out["giou"] == 1.0 and out["ciou"] == 1.0  # cIoU was 0.0 before issue 14
    assert reduce_iou([seg.PairScore(0, 0, 1.0)], ())["ciou"] == out["ciou"]  # the rule refer_iou reduces with
    assert out["miou"] == 0.0 and out["miou_strict"] == 0.0  # nothing paired: mIoU's own rule is unchanged


def test_giou_and_ciou_pooled_over_samples():
    out = _score([A_PRED, B_PRED, C_PRED, D_PRED, N_PRED], [A_REF, B_REF, C_REF, D_REF, N_REF])
    assert out["num_samples_without_groundings"] == 1  # N is not in gIoU / cIoU
    assert out["giou"] == pytest.approx((1 / 3 + 1 / 2 + 1 + 1) / 4)
    assert out["ciou"] == pytest.approx((2 + 2 + 1 + 0) / (6 + 4 + 1 + 0))
    pct = core.compute([A_PRED], [A_REF], **NO_METEOR, as_percent=True)
    assert pct["giou"] == pytest.approx(100 / 3) and pct["ciou"] == pytest.approx(100 / 3)


def test_giou_groups_pool_the_same_way():
    b_ref = dict(B_REF, type="counting")
    out = _score([A_PRED, B_PRED], [A_REF, b_ref])
    assert out["per_question_type"]["spatial"]["giou"] == pytest.approx(1 / 3)
    assert out["per_question_type"]["counting"]["ciou"] == pytest.approx(0.5)


def test_union_mask_counts_directly():
    full, left = R("04", (1, 4)), R("022", (1, 4))
    assert m4geom.union_mask_counts([full], [], [1, 4], "x") == (0, 4)
    assert m4geom.union_mask_counts([], [left], [1, 4], "x") == (0, 2)
    assert m4geom.union_mask_counts([], [], [1, 4], "x") == (0, 0)
    assert m4geom.union_mask_counts([left, R("211", (1, 4))], [full], [1, 4], "x") == (3, 4)


# ---------------------------------------------------------------- source="auto" and the Hub Parquet's ids


def _copy_release(src, dst, parts=("data", "annotations")):
    import shutil

    for p in parts:
        shutil.copytree(src / p, dst / p)
    return dst


def _rewrite_parquet_ids(root, split, prefix):
    """Give the Parquet rows ids of another scheme (the Hub's scheme is not documented), leaving the native file
    as it is: a build that reads the native file then gives other ids than the Parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids = []
    for path in sorted((root / "data").glob(f"{split}-*.parquet")):
        table = pq.read_table(path)
        new = [f"{prefix}{len(ids) + i:06d}" for i in range(table.num_rows)]
        ids += new
        table = table.set_column(table.schema.get_field_index("example_id"), "example_id", pa.array(new, pa.string()))
        pq.write_table(table, path, row_group_size=1000)
    return ids


def test_auto_native_and_parquet_give_the_same_ids_and_rows_on_the_sample_release(m4_release, tmp_path):
    built = {src: {s: build_split("m4seg", "default", m4_release.root, tmp_path / src, split=s, source=src) for s in ("train", "test")}
             for src in ("native", "parquet", "auto")}
    for split, ids in (("train", m4_release.train_ids), ("test", m4_release.test_ids)):
        assert built["parquet"][split]["example_id"] == ids
        assert built["native"][split]["example_id"] == ids  # pair_id, or pair_id#k for a repeated one, as the Parquet
        assert built["auto"][split]["example_id"] == ids
        assert built["auto"][split].to_list() == built["parquet"][split].to_list() == built["native"][split].to_list()


def test_auto_prefers_the_parquet_when_both_are_present(m4_release, tmp_path, caplog):
    import logging

    root = _copy_release(m4_release.root, tmp_path / "rel")
    hub_ids = _rewrite_parquet_ids(root, "test", "m4seg-test-")
    parquet = build_split("m4seg", "default", root, tmp_path / "p", split="test", source="parquet", splits=("test",))
    native = build_split("m4seg", "default", root, tmp_path / "n", split="test", source="native", splits=("test",))
    assert "only as [W, H]" in caplog.text  # the native file's PASCAL sizes are [W, H]: reading it warns
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="perckit.m4seg"):
        auto = build_split("m4seg", "default", root, tmp_path / "a", split="test", splits=("test",))
    assert parquet["example_id"] == hub_ids and native["example_id"] == m4_release.test_ids  # the two sources differ here
    assert auto["example_id"] == hub_ids  # before issue 14, auto read the native file: m4_release.test_ids
    assert auto.to_list() == parquet.to_list()
    assert "only as [W, H]" not in caplog.text  # the native file (PASCAL sizes as [W, H]) was not read


def test_auto_reads_the_native_file_of_a_split_without_parquet(m4_release, tmp_path):
    root = _copy_release(m4_release.root, tmp_path / "rel", parts=("annotations",))
    auto = build_split("m4seg", "default", root, tmp_path / "a", split="test", splits=("test",))
    assert auto["example_id"] == m4_release.test_ids


def test_auto_per_split(m4_release, tmp_path):
    """Parquet for the split that has shards, native for the one that has only its JSON file."""
    root = _copy_release(m4_release.root, tmp_path / "rel")
    for p in (root / "data").glob("test-*.parquet"):
        p.unlink()
    train_ids = _rewrite_parquet_ids(root, "train", "m4seg-train-")
    assert build_split("m4seg", "default", root, tmp_path / "a", split="train")["example_id"] == train_ids
    assert build_split("m4seg", "default", root, tmp_path / "a", split="test")["example_id"] == m4_release.test_ids


def test_auto_hub_download_fetches_the_parquet_first(m4_release, tmp_path, monkeypatch):
    import shutil

    from helpers.fake_hub import fake_snapshot_download

    from perckit.hf import hub
    from perckit.hf.entrypoints import builder_class

    source = tmp_path / "hub_repo"
    shutil.copytree(m4_release.root, source)
    calls = []
    monkeypatch.setattr(hub, "snapshot_download", fake_snapshot_download(source, calls))
    b = builder_class("m4seg")(config_name="default", cache_dir=str(tmp_path / "c1"), splits=("test",))
    b.download_and_prepare()
    assert [c["allow_patterns"] for c in calls] == [["data/test-*.parquet"]]
    assert b.as_dataset("test")["example_id"] == m4_release.test_ids
    for p in (source / "data").glob("test-*.parquet"):  # a repository without Parquet: auto falls back to native
        p.unlink()
    b = builder_class("m4seg")(config_name="default", cache_dir=str(tmp_path / "c2"), splits=("test",))
    b.download_and_prepare()
    assert [c["allow_patterns"] for c in calls[1:]] == [["data/test-*.parquet"], ["annotations/m4seg_test.json.gz"]]
    assert b.as_dataset("test")["example_id"] == m4_release.test_ids


# ---------------------------------------------------------------- an unclosed streaming iterator at exit

STREAM_SCRIPT = """
import sys
how, source, root = sys.argv[1:4]
if how == "script":  # datasets 3.6: the builder script, as a user loads it
    import datasets
    ds = datasets.load_dataset({builders!r}, data_dir=root, trust_remote_code=True, streaming=True, source=source)["train"]
else:
    import perckit
    ds = perckit.load_dataset("m4seg", data_dir=root, split="train", streaming=True, source=source)
first = next(iter(ds))     # a temporary iterator, dropped at once
it = iter(ds)              # one held until the interpreter exits, never closed
row = next(it)
assert first["example_id"] == row["example_id"]
print("ROW", row["example_id"])
"""


@pytest.mark.parametrize("source", ["native", "parquet", "auto"])
@pytest.mark.parametrize("how", ["script", "perckit"])
def test_unclosed_streaming_iterator_exits_quietly(m4_release, tmp_path, how, source):
    if how == "script" and DS_MAJOR >= 4:
        pytest.skip("builder scripts run on datasets 3.6 only")
    script = tmp_path / "stream_one.py"
    script.write_text(textwrap.dedent(STREAM_SCRIPT.format(builders=str(REPO / "builders" / "m4seg"))))
    proc = subprocess.run([sys.executable, str(script), how, source, str(m4_release.root)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"ROW {m4_release.train_ids[0]}" in proc.stdout
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr[-3000:]


def test_iter_native_leaves_consumer_exceptions_alone(m4_release):
    """Only reading errors become ReleaseFormatError: an exception thrown in at the yield (as GeneratorExit is
    at close) passes through unchanged, and closing releases the file."""
    from perckit.m4seg import layout as m4layout
    from perckit.m4seg.read import native as m4native

    opened = []

    def opener(path, mode):
        f = open(path, mode)
        opened.append(f)
        return f

    path = str(m4layout.native_path(m4_release.root, "test"))
    shards = m4native.native_shards(path, m4native.scan_native(open, path, "test"), 1)
    rows = m4native.iter_native(opener, shards, "test")
    assert next(rows)["example_id"] == m4_release.test_ids[0]
    with pytest.raises(OSError, match="the consumer's own"):
        rows.throw(OSError("the consumer's own"))  # an OSError is a gzip reading error inside the reader
    assert opened and opened[0].closed
    rows = m4native.iter_native(opener, shards, "test")
    next(rows)
    rows.close()
    assert opened[1].closed


@pytest.mark.parametrize("source", ["native", "parquet"])
def test_iter_image_paths_leaves_consumer_exceptions_alone(m4_release, source):
    """The image-path reader (image_root) follows the same rule as the row readers."""
    from perckit.m4seg import layout as m4layout
    from perckit.m4seg.read import images as m4images

    files = ([str(m4layout.native_path(m4_release.root, "test"))] if source == "native"
             else m4layout.parquet_paths(m4_release.root, "test"))
    paths = m4images.iter_image_paths(open, source, files, "list", "test")
    where, first = next(paths)
    assert "test split" in where and isinstance(first, str)
    with pytest.raises(OSError, match="the consumer's own"):
        paths.throw(OSError("the consumer's own"))
    paths = m4images.iter_image_paths(open, source, files, "list", "test")
    next(paths)
    paths.close()  # no error
