"""metrics/m4seg: spec vectors S1-S4 with the stub encoder, options, matching, groups, evaluate (single and
distributed), prediction helpers and the missing-extra messages."""

import copy
import itertools
import json

import numpy as np
import pytest
from helpers.common import REPO
from helpers.distributed import run_distributed
from helpers.m4seg import NO_METEOR, R, S1_EXPECTED, S1_PRED, S1_REF, S2_PRED, S3_PRED, S4_PRED, S4_REF, g_pred, g_ref, ref_row

from perckit import rle
from perckit.errors import PredictionError
from perckit.m4seg import features as feats
from perckit.m4seg.read import predictions as m4io
from perckit.m4seg import metric as core
from perckit.m4seg.metric import codes as m4codes
from perckit.m4seg.metric import geometry as m4geom
from perckit.m4seg.metric import text as textmod
from perckit.m4seg.metric.text import stub_embed

SEVEN_BUT_METEOR = ("miou", "recall", "i_ss", "i_siou", "ss", "siou")


def _run(preds, refs, **kw):
    return core.compute(preds, refs, **{**NO_METEOR, **kw})


@pytest.fixture(scope="module")
def metric():
    import evaluate

    return evaluate.load(str(REPO / "metrics" / "m4seg"))


def test_stub_encoder():
    v = stub_embed(["chair", "chair", "table", "cup", "", "chair near table and mug", "chair near table and cup"])
    assert v[0] @ v[1] == pytest.approx(1.0) and v[2] @ v[3] == 0.0
    assert not v[4].any()
    assert v[5] @ v[6] == pytest.approx(0.8)


def test_s1(metric):
    out = _run([S1_PRED], [S1_REF])
    for k, v in S1_EXPECTED.items():
        assert out[k] == pytest.approx(v, abs=1e-12), k
    assert out["num_gt_groundings"] == 3 and out["num_pred_groundings"] == 2 and out["num_samples"] == 1
    via_evaluate = metric.compute(predictions=[S1_PRED], references=[S1_REF], **NO_METEOR)  # a callable passes through
    assert via_evaluate == out
    assert out["meteor"] is None and out["skipped"] == {"meteor": "not requested (option metrics)"}


def test_s2_prediction_equals_gt():
    out = _run([S2_PRED], [S1_REF])
    for k in SEVEN_BUT_METEOR:
        assert out[k] == pytest.approx(1.0), k
    assert out["miou"] == out["recall"] == out["siou"] == out["i_siou"] == 1.0  # exact
    assert out["giou"] == out["ciou"] == out["miou_strict"] == 1.0
    pct = _run([S2_PRED], [S1_REF], as_percent=True)
    assert pct["miou"] == pct["recall"] == pct["siou"] == pct["i_siou"] == 100.0 and pct["ss"] == pytest.approx(100.0)


def test_s3_wrong_image_zeroes_recall_and_i_metrics_only():
    s2, s3 = _run([S2_PRED], [S1_REF]), _run([S3_PRED], [S1_REF])
    assert s3["recall"] == 0 and s3["i_siou"] == 0 and s3["i_ss"] == 0
    assert s3["ss"] == s2["ss"] and s3["siou"] == s2["siou"]
    # resizing in the metric gives the same masks
    s3r = copy.deepcopy(S3_PRED)
    for g, src in zip(s3r["groundings"], (S1_REF["groundings"][0], S1_REF["groundings"][1], S1_REF["groundings"][2])):
        g["segmentation"] = src["segmentation"]
    assert _run([s3r], [S1_REF], resize_predictions="nearest") == s3 | {"options": _run([s3r], [S1_REF], resize_predictions="nearest")["options"]}


def test_s4_glamm_early_stop():
    out = _run([S4_PRED], [S4_REF])
    assert out["recall"] == 0.0
    assert out["miou"] == 0.75


def test_empty_prediction_scores_zero():
    out = _run([{"example_id": "s1", "a": "", "groundings": []}], [S1_REF])
    assert out["miou"] == 0 and out["recall"] == 0 and out["siou"] == 0 and out["ss"] == 0
    assert out["i_ss"] == 0 and out["i_siou"] == 0 and out["miou_strict"] == 0 and out["giou"] == 0


def test_all_zero_mask_is_never_paired():
    pred = copy.deepcopy(S2_PRED)
    pred["groundings"][0]["segmentation"] = R("4", (1, 4))
    out = _run([pred], [S1_REF], per_sample=True)
    assert out["miou"] == 1.0 and out["miou_strict"] == pytest.approx(2 / 3) and out["recall"] == pytest.approx(2 / 3)


def test_samples_without_groundings():
    ref = ref_row("n0", "Nothing to see.", [(1, 2), (1, 2)], [])
    out = _run([S1_PRED, {"example_id": "n0", "a": "Nothing to see.", "groundings": []}], [S1_REF, ref])
    assert out["num_samples_without_groundings"] == 1 and out["num_samples"] == 2
    assert out["miou"] == 0.75 and out["recall"] == pytest.approx(1 / 3) and out["i_ss"] == pytest.approx(1 / 3)
    assert out["siou"] == pytest.approx((2 / 3 + 1) / 2) and out["i_siou"] == pytest.approx((0.25 + 1) / 2)
    assert out["ss"] == pytest.approx((0.8 + 1) / 2)


def _two_image_ref():
    return ref_row("u", "chair_101 table_102 cup_201", [(1, 4), (1, 2)], [
        g_ref(1, "chair", (0, 9), R("022", (1, 4))), g_ref(1, "table", (10, 19), R("22", (1, 4))), g_ref(2, "cup", (20, 27), R("011", (1, 2)))])


def test_miou_unit_and_strict():
    ref = _two_image_ref()
    pred = {"example_id": "u", "a": "", "groundings": [
        g_pred(1, "chair", R("022", (1, 4))), g_pred(1, "table", R("22", (1, 4))), g_pred(2, "cup", R("02", (1, 2)))]}
    assert _run([pred], [ref])["miou"] == pytest.approx(2.5 / 3)
    assert _run([pred], [ref], miou_unit="image")["miou"] == pytest.approx(0.75)


def test_i_mode_mask_uses_the_mask_pairing():
    ref = _two_image_ref()
    swapped = {"example_id": "u", "a": "", "groundings": [  # right names, each on the other object's mask
        g_pred(1, "chair", R("22", (1, 4))), g_pred(1, "table", R("022", (1, 4))), g_pred(2, "cup", R("011", (1, 2)))]}
    img = _run([swapped], [ref])
    mask = _run([swapped], [ref], i_mode="mask")
    assert img["i_ss"] == pytest.approx(1.0) and img["i_siou"] == 1.0
    assert mask["i_ss"] == pytest.approx(1 / 3) and mask["i_siou"] == pytest.approx(1 / 5)


def test_ss_phrase_level_and_siou_soft():
    assert _run([S1_PRED], [S1_REF], ss_level="phrase")["ss"] == pytest.approx(2 / 3)
    cos = stub_embed(["red chair", "chair"])
    c = np.array([[cos[0] @ cos[1]]])
    assert core.semantic_iou(c, 0.5, soft=False) == 1.0
    assert core.semantic_iou(c, 0.5, soft=True) == pytest.approx(c[0, 0] / (2 - c[0, 0]))
    assert core.semantic_iou(np.zeros((0, 0))) == 1.0 and core.semantic_iou(np.zeros((1, 0))) == 0.0


def test_resolved_name_style_changes_the_reference_text():
    out = _run([{**S1_PRED, "a": "chair 1 near table 2 and cup 1"}], [S1_REF], resolved_name_style="name_instance", per_sample=True)
    assert out["per_sample"][0]["gt_text"] == "chair 1 near table 2 and cup 1" and out["ss"] == pytest.approx(1.0)


def test_greedy_and_hungarian_pairing():
    iou = np.array([[0.9, 0.8], [0.85, 0.0]])
    assert m4geom.greedy_pairs(iou) == [(0, 0, 0.9)]
    assert sorted(m4geom.hungarian_pairs(iou)) == [(0, 1, 0.8), (1, 0, 0.85)]
    assert m4geom.greedy_pairs(np.array([[0.5, 0.5], [0.5, 0.5]])) == [(0, 0, 0.5), (1, 1, 0.5)]  # row-major ties
    assert m4geom.greedy_pairs(np.zeros((2, 3))) == [] and m4geom.hungarian_pairs(np.zeros((0, 3))) == []


def test_linear_assignment_is_optimal():
    rng = np.random.default_rng(0)
    for shape in [(1, 1), (2, 3), (3, 2), (4, 4), (3, 5), (5, 3)]:
        for _ in range(20):
            c = rng.random(shape).round(2)
            pairs = m4geom.linear_assignment(c)
            assert len(pairs) == min(shape) and len({i for i, _ in pairs}) == len({j for _, j in pairs}) == min(shape)
            n, m = shape
            if n <= m:
                best = min(sum(c[i, p[i]] for i in range(n)) for p in itertools.permutations(range(m), n))
            else:
                best = min(sum(c[p[j], j] for j in range(m)) for p in itertools.permutations(range(n), m))
            assert sum(c[i, j] for i, j in pairs) == pytest.approx(best)


def _span_mask(lo, hi, width=20):
    m = np.zeros((1, width), dtype=bool)
    m[0, lo:hi] = True
    return rle.encode(m)


def test_matching_option_end_to_end():
    ref = ref_row("h", "a_101 b_102", [(1, 20)], [g_ref(1, "a", (0, 5), _span_mask(0, 10)), g_ref(1, "b", (6, 11), _span_mask(10, 20))])
    # IoU (rows p0, p1; columns a, b) = [[2/3, 1/4], [1/2, 0]]: greedy keeps 2/3 alone, Hungarian 1/4 + 1/2
    pred = {"example_id": "h", "a": "", "groundings": [g_pred(1, "a", _span_mask(0, 15)), g_pred(1, "b", _span_mask(0, 5))]}
    assert _run([pred], [ref], matching="greedy")["miou"] == pytest.approx(2 / 3)
    assert _run([pred], [ref], matching="hungarian")["miou"] == pytest.approx(0.375)


def test_recall_loop():
    assert core.recall_true_positives(np.array([[1.0, 0.0], [0.0, 0.5]]), np.array([[0.0, 1.0], [1.0, 1.0]])) == 0
    assert core.recall_true_positives(np.array([[1.0, 0.0], [0.0, 0.5]]), np.ones((2, 2))) == 2
    assert core.recall_true_positives(np.array([[0.6]]), np.ones((1, 1)), iou_threshold=0.7) == 0


def test_groups_and_corpus_meteor_per_group():
    refs = [S1_REF, copy.deepcopy(S4_REF)]
    refs[1]["type"], refs[1]["dataset_name"], refs[1]["granularity"] = "counting", "paco_lvis", "part"
    calls = []

    def fake_meteor(cands, gts):
        calls.append(len(cands))
        return len(cands) / 10

    out = core.compute([S1_PRED, S4_PRED], refs, embed_fn=stub_embed, meteor_fn=fake_meteor)
    assert out["meteor"] == 0.2 and out["per_question_type"]["spatial"]["meteor"] == 0.1
    assert set(out["per_dataset_name"]) == {"coco_objects", "paco_lvis"} and set(out["per_granularity"]) == {"object", "part"}
    assert out["per_question_type"]["counting"]["recall"] == 0.0 and out["per_question_type"]["spatial"]["recall"] == pytest.approx(1 / 3)
    assert out["recall"] == pytest.approx(1 / 5)  # micro: 1 TP over 5 GT groundings
    assert out["per_granularity"]["part"]["miou"] == 0.75 and out["per_granularity"]["part"]["num_samples"] == 1


def test_missing_extras_name_the_extra(monkeypatch):
    def no_st():
        raise textmod.TextToolUnavailable(f"needs sentence-transformers; install the text extra: {textmod.EXTRA_TEXT}")

    monkeypatch.setattr(textmod, "_sentence_transformers", no_st)
    with pytest.raises(textmod.TextToolUnavailable, match=r"pip install 'perckit\[text\]'"):
        core.compute([S1_PRED], [S1_REF], metrics=["ss"])
    out = core.compute([S1_PRED], [S1_REF], metrics=["miou", "ss", "recall"], skip_unavailable=True)
    assert out["ss"] is None and out["recall"] is None and out["miou"] == 0.75
    assert "perckit[text]" in out["skipped"]["ss"] and "perckit[text]" in out["skipped"]["recall"]
    monkeypatch.setattr(textmod, "java_available", lambda: False)
    with pytest.raises(textmod.TextToolUnavailable, match=r"Java.*pip install 'perckit\[meteor\]'"):
        core.compute([S1_PRED], [S1_REF], embed_fn="stub", metrics=["meteor"])
    out = core.compute([S1_PRED], [S1_REF], embed_fn="stub", skip_unavailable=True)
    assert out["meteor"] is None and "Java" in out["skipped"]["meteor"] and out["ss"] == pytest.approx(0.8)


def test_missing_model_names_option_and_env(monkeypatch, tmp_path):
    monkeypatch.setattr(textmod, "packaged_minilm_path", lambda: None)
    monkeypatch.delenv(textmod.ENV_TEXT_MODEL, raising=False)
    with pytest.raises(textmod.TextToolUnavailable, match="text_model_path.*M4SEG_TEXT_MODEL"):
        textmod.minilm_source()[0]
    with pytest.raises(textmod.TextToolUnavailable, match="not a folder"):
        textmod.minilm_source(tmp_path / "nope")
    with pytest.raises(textmod.TextToolUnavailable, match="bert_model_path.*M4SEG_BERT_MODEL"):
        textmod.bert_meanpool_embed_fn(None)


def test_gt_as_prediction_through_evaluate_is_one(m4_parquet, metric):
    rows = m4_parquet["test"]
    refs = [feats.to_metric_reference(r) for r in rows]
    preds = [feats.gt_as_prediction(r) for r in rows]
    out = metric.compute(predictions=preds, references=refs, embed_fn=stub_embed, metrics=list(SEVEN_BUT_METEOR), as_percent=True)
    assert out["miou"] == out["recall"] == out["siou"] == out["i_siou"] == 100.0
    assert out["ss"] == pytest.approx(100.0) and out["i_ss"] == pytest.approx(100.0)
    assert out["num_samples"] == 24 and set(out["per_dataset_name"]) <= set(feats.SOURCE_GRANULARITY)
    assert set(refs[0]) == set(feats.reference_schema()) and set(refs[0]["groundings"][0]) == {"image_index", "name", "answer_span", "segmentation"}


def _perturbed(rows):
    preds = []
    for i, r in enumerate(rows):
        p = feats.gt_as_prediction(r)
        if i % 3 == 0:
            p["groundings"] = p["groundings"][1:]
        if i % 2 == 0 and p["groundings"]:
            m = rle.decode(p["groundings"][-1]["segmentation"])
            m[:, : m.shape[1] // 2] = False
            p["groundings"][-1]["segmentation"] = rle.encode(m)
        if i % 4 == 1:
            p["a"] = "something else entirely"
        if i % 5 == 2 and p["groundings"]:
            g = p["groundings"][0]
            other = 2 if g["image_index"] == 1 else 1
            im = r["images"][other - 1]
            g["segmentation"] = rle.resize_nearest(g["segmentation"], [im["height"], im["width"]], rule="opencv")
            g["image_index"] = other
        preds.append(p)
    return preds


def test_distributed_matches_single_process(m4_parquet, metric, tmp_path):
    rows = m4_parquet["train"]
    refs = [feats.to_metric_reference(r) for r in rows]
    preds = _perturbed(rows)
    options = {"embed_fn": "stub", "metrics": list(SEVEN_BUT_METEOR)}
    single = metric.compute(predictions=preds, references=refs, **options)
    assert 0 < single["miou"] < 1 and 0 < single["recall"] < 1
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"predictions": preds, "references": refs, "options": options}))
    dist = run_distributed("m4seg", inputs, 2, tmp_path, "m4seg-dist", 5, timeout=600)
    assert dist == json.loads(json.dumps(single))  # bit-identical, per-sample table included (sorted by example_id)


def test_parse_grounded_answer():
    a = np.zeros((1, 4), dtype=bool)
    a[0, :2] = True
    text = "The <p> red chair </p> [SEG] (IMAGE1) is near <p>the cup</p> [SEG](IMAGE2)."
    row = m4io.parse_grounded_answer(text, [a, {"size": [1, 2], "counts": b"011"}], example_id="s1")
    assert [(g["image_index"], g["name"]) for g in row["groundings"]] == [(1, "red chair"), (2, "the cup")]
    assert row["groundings"][0]["segmentation"] == R("022", (1, 4)) and row["groundings"][1]["segmentation"] == R("011", (1, 2))
    assert m4codes.clean_prediction_text(text) == "The red chair is near the cup ."
    with pytest.raises(PredictionError, match="'s1'.*no \\(IMAGEk\\) tag"):
        m4io.parse_grounded_answer("<p>x</p> [SEG] here", [a], example_id="s1")
    with pytest.raises(PredictionError, match="2 \\[SEG\\] token\\(s\\) but only 1 mask"):
        m4io.parse_grounded_answer(text, [a], example_id="s1")
    out = _run([row], [S1_REF])
    assert out["miou"] == 1.0 and out["recall"] == pytest.approx(2 / 3)  # "the cup" vs "cup": cos 1/sqrt(2)


def test_load_predictions_jsonl(tmp_path):
    p = tmp_path / "preds.jsonl"
    lines = [
        {"example_id": "s1", "a": None, "groundings": [{"image_index": 1, "name": "chair", "segmentation": {"size": [1, 4], "counts": [0, 2, 2]}}]},
        {"example_id": "s4", "a": "x", "extra": 1},
    ]
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    rows = m4io.load_predictions_jsonl(p)
    assert rows[0] == {"example_id": "s1", "a": "", "groundings": [{"image_index": 1, "name": "chair", "segmentation": R("022", (1, 4))}]}
    assert rows[1] == {"example_id": "s4", "a": "x", "groundings": []}
    p.write_text(json.dumps(lines[1]) + "\n" + json.dumps(lines[1]) + "\n")
    with pytest.raises(PredictionError, match="line 2: duplicate example_id 's4'"):
        m4io.load_predictions_jsonl(p)
    p.write_text('{"example_id": "s1", "groundings": [{"image_index": 1, "segmentation": {"size": [1, 4], "counts": "9"}}]}\n')
    with pytest.raises(PredictionError, match="line 1: groundings\\[0\\].segmentation"):
        m4io.load_predictions_jsonl(p)
