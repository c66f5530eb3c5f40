"""perckit.m4seg.accumulate: the ``m4seg`` accumulator gives perckit.m4seg.metric.compute's numbers exactly, on the
sample release and the spec's vectors, in random batch sizes and orders (seeded), merged, through state_dict /
load_state_dict, through save / merge_files; duplicates refused; strict and lax; records are JSON data. A tampered
state (issue 28: inter > union, a matrix of the wrong shape, a pair outside its matrix) is refused naming the file,
the record and the field; random hostile edits of valid states load cleanly with numbers in range or are refused."""

import copy
import importlib.util
import json
import pickle
import random

import pytest
from helpers.accumulators import assert_ranges, assert_refused, assert_same, feed, load_tampered, tamper, tampered_states
from helpers.fuzz import FUZZ, reaches
from hypothesis import example, given
from helpers.m4seg import R, S1_PRED, S1_REF, S2_PRED, S3_PRED, S4_PRED, S4_REF, g_pred, g_ref, ref_row

from perckit import rle
from perckit.hf.accumulate import Accumulator, accumulator, load_state, merge_files
from perckit.errors import OptionError, PredictionError, ReleaseFormatError
from perckit.m4seg import features as feats
from perckit.m4seg import metric as core
from perckit.m4seg.metric import text as textmod
from perckit.m4seg.accumulate import geometry_from_state, geometry_to_state, m4seg_core
from perckit.m4seg.metric.geometry import sample_geometry
from perckit.m4seg.metric.options import M4SegOptions
from perckit.m4seg.metric.text import stub_embed

WITHOUT_METEOR = ["miou", "recall", "i_ss", "i_siou", "ss", "siou"]
#: JSON-safe options (the stub encoder by name): these states save to files
STUB = {"embed_fn": "stub", "metrics": WITHOUT_METEOR}


def _meteor_or_skip():
    if importlib.util.find_spec("pycocoevalcap") is None:
        pytest.skip(f"METEOR needs pycocoevalcap: {textmod.EXTRA_METEOR}")
    if not textmod.java_available():
        pytest.skip("METEOR needs Java (no 'java' on PATH): install a JRE, e.g. apt-get install default-jre-headless")


def _perturbed(rows):
    """Predictions from the GT with dropped, halved, renamed and moved groundings (every metric strictly in (0, 1))."""
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
            if p["groundings"]:
                p["groundings"][0]["name"] = "a different thing"
        if i % 5 == 2 and p["groundings"] and len(r["images"]) > 1:
            g = p["groundings"][0]
            other = 2 if g["image_index"] == 1 else 1
            im = r["images"][other - 1]
            g["segmentation"] = rle.resize_nearest(g["segmentation"], [im["height"], im["width"]], rule="opencv")
            g["image_index"] = other
        preds.append(p)
    return preds


@pytest.fixture(scope="module")
def release(m4_parquet):
    """Both splits of the sample release as (predictions, references)."""
    rows = list(m4_parquet["train"]) + list(m4_parquet["test"])
    return _perturbed(rows), [feats.to_metric_reference(r) for r in rows]


def _synthetic():
    """The spec's vectors plus a sample without groundings and a two-image one, with other group keys."""
    s4 = copy.deepcopy(S4_REF)
    s4["type"], s4["dataset_name"], s4["granularity"] = "counting", "paco_lvis", "part"
    s2_ref = copy.deepcopy(S1_REF) | {"example_id": "s2"}
    s3_ref = copy.deepcopy(S1_REF) | {"example_id": "s3", "type": "counting"}
    n0 = ref_row("n0", "Nothing to see.", [(1, 2), (1, 2)], [])
    u = ref_row("u", "chair_101 table_102 cup_201", [(1, 4), (1, 2)], [
        g_ref(1, "chair", (0, 9), R("022", (1, 4))), g_ref(1, "table", (10, 19), R("22", (1, 4))),
        g_ref(2, "cup", (20, 27), R("011", (1, 2)))], granularity="part")
    preds = [S1_PRED, S4_PRED, S2_PRED | {"example_id": "s2"}, S3_PRED | {"example_id": "s3"},
             {"example_id": "n0", "a": "Nothing to see.", "groundings": []},
             {"example_id": "u", "a": "", "groundings": [
                 g_pred(1, "chair", R("22", (1, 4))), g_pred(1, "table", R("022", (1, 4))), g_pred(2, "cup", R("02", (1, 2)))]}]
    return preds, [S1_REF, s4, s2_ref, s3_ref, n0, u]


#: M4Seg's random batches: 0 to 7 rows (some updates carry an empty side)
BATCHES = {"smallest": 0, "largest": 7}

OPTION_SETS = [
    {},
    {"miou_unit": "image", "as_percent": True},
    {"matching": "hungarian", "i_mode": "mask"},
    {"ss_level": "phrase", "siou_soft": True, "resolved_name_style": "name_instance", "per_sample": False},
    {"metrics": ["miou", "recall"], "recall_iou_threshold": 0.25},
]


@pytest.mark.parametrize("extra", OPTION_SETS, ids=lambda o: ",".join(o) or "defaults")
def test_synthetic_random_batches_equal_compute(extra):
    preds, refs = _synthetic()
    options = {**STUB, **extra}
    expected = core.compute(preds, refs, **options)
    for seed in range(6):
        acc = feed(accumulator("m4seg", **options), preds, refs, random.Random(seed), **BATCHES)
        assert_same(acc.compute(), expected)


def test_sample_release_random_batches_equal_compute(release):
    preds, refs = release
    expected = core.compute(preds, refs, **STUB)
    assert 0 < expected["miou"] < 1 and 0 < expected["recall"] < 1 and expected["num_samples"] == len(refs)
    for seed in range(3):
        assert_same(feed(accumulator("m4seg", **STUB), preds, refs, random.Random(seed), **BATCHES).compute(), expected)


#: METEOR's Java pipeline (the PTB tokenizer and the METEOR 1.5 jar, run for three computes): about 30 s, slow.
@pytest.mark.slow
def test_sample_release_with_meteor_equals_compute(release):
    _meteor_or_skip()
    preds, refs = release
    options = {"embed_fn": "stub"}
    expected = core.compute(preds, refs, **options)
    assert expected["meteor"] is not None and expected["skipped"] == {}
    acc = feed(accumulator("m4seg", **options), preds, refs, random.Random(7), **BATCHES)
    assert_same(acc.compute(), expected)
    half = len(refs) // 2
    a = accumulator("m4seg", **options).update(preds[:half], refs[:half])
    b = accumulator("m4seg", **options).update(preds[half:], refs[half:])
    assert_same(a.merge(b).compute(), expected)  # corpus METEOR over the merged records, not a mean of halves


def test_callable_encoder_and_meteor_fn_state_dict_works_save_refuses(tmp_path):
    def fake_meteor(cands, gts):
        return len(cands) / 10

    preds, refs = _synthetic()
    options = {"embed_fn": stub_embed, "meteor_fn": fake_meteor}
    expected = core.compute(preds, refs, **options)
    acc = feed(accumulator("m4seg", **options), preds, refs, random.Random(3), **BATCHES)
    assert_same(acc.compute(), expected)
    state = acc.state_dict()
    assert state["options"]["embed_fn"] is stub_embed
    restored = accumulator("m4seg", **options).load_state_dict(state)
    assert_same(restored.compute(), expected)
    other = accumulator("m4seg", **options)
    assert_same(other.merge(restored).compute(), expected)
    with pytest.raises(OptionError, match="cannot be saved in a JSON state file"):
        acc.save(tmp_path / "state.json")
    assert not (tmp_path / "state.json").exists()
    with pytest.raises(OptionError, match="same options"):
        accumulator("m4seg", **STUB).load_state_dict(state)


def test_merge_in_random_splits_equals_compute(release):
    preds, refs = release
    expected = core.compute(preds, refs, **STUB)
    rng = random.Random(11)
    for parts in (2, 3, 4):
        accs = [accumulator("m4seg", **STUB) for _ in range(parts)]
        for p in preds:  # a prediction and its reference may land in different accumulators
            accs[rng.randrange(parts)].update(predictions=[p])
        for r in refs:
            accs[rng.randrange(parts)].update(references=[r])
        merged = accs[0]
        for other in accs[1:]:
            merged.merge(other)
        assert_same(merged.compute(), expected)


def test_state_round_trip_midway(release):
    preds, refs = release
    expected = core.compute(preds, refs, **STUB)
    acc = accumulator("m4seg", **STUB).update(preds[:10], refs[5:20])  # some pending on both sides
    state = pickle.loads(pickle.dumps(acc.state_dict()))
    as_json = json.loads(json.dumps(state))  # records are JSON data: read back bit for bit
    for s in (state, as_json):
        resumed = accumulator("m4seg", **STUB).load_state_dict(s)
        resumed.update(preds[10:], refs[:5] + refs[20:])
        assert_same(resumed.compute(), expected)
    assert state["version"] == 1 and state["metric"] == "m4seg" and state["config"] is None


def test_record_round_trip_is_exact(release):
    preds, refs = release
    opts = M4SegOptions()
    for p, r in zip(preds, refs):
        geom = sample_geometry(p, r, opts)
        back = geometry_from_state(json.loads(json.dumps(geometry_to_state(geom))))
        assert geometry_to_state(back) == geometry_to_state(geom)
        for a, b in zip(back.images, geom.images):
            assert a.iou.shape == b.iou.shape and a.iou.dtype == b.iou.dtype and (a.iou == b.iou).all()


def test_bad_record_in_a_state_is_a_release_format_error():
    acc = accumulator("m4seg", **STUB).update([S1_PRED], [S1_REF])
    state = acc.state_dict()
    state["records"][0][1]["images"][0]["iou"] = [[0.5], [0.0]]  # image 1: 1 prediction x 2 GT groundings
    with pytest.raises(ReleaseFormatError, match=r"state_dict: records\[0\] 's1'.images\[0\].iou: expected a 1 x 2 matrix"):
        accumulator("m4seg", **STUB).load_state_dict(state)
    state = acc.state_dict()
    state["records"][0][1]["images"][0]["inter"] = "2"
    with pytest.raises(ReleaseFormatError, match=r"records\[0\] 's1'.images\[0\].inter: expected an integer in \[0, 9223372036854775807\], got '2'"):
        accumulator("m4seg", **STUB).load_state_dict(state)


def test_save_and_merge_files(release, tmp_path):
    preds, refs = release
    expected = core.compute(preds, refs, **STUB)
    paths = []
    for k in range(3):
        acc = accumulator("m4seg", **STUB).update(preds[k::3], refs[k::3])
        paths.append(acc.save(tmp_path / f"rank{k}.json"))
    assert_same(merge_files(paths).compute(), expected)
    one = load_state(paths[0])
    assert isinstance(one, Accumulator)
    assert_same(one.compute(), core.compute(preds[0::3], refs[0::3], **STUB))


def test_duplicates_refused():
    acc = accumulator("m4seg", **STUB).update([S1_PRED], [S1_REF])
    with pytest.raises(PredictionError, match="references: duplicate example_id 's1'"):
        acc.update(references=[S1_REF])
    with pytest.raises(PredictionError, match="predictions: duplicate example_id 's1'"):
        acc.update(predictions=[S1_PRED])
    with pytest.raises(PredictionError, match="predictions: duplicate example_id 's4'"):
        accumulator("m4seg", **STUB).update(predictions=[S4_PRED, S4_PRED])
    other = accumulator("m4seg", **STUB).update([S1_PRED], [S1_REF])
    with pytest.raises(PredictionError, match="scored in both accumulators"):
        acc.merge(other)


def test_strict_and_lax():
    preds, refs = _synthetic()
    strict = accumulator("m4seg", **STUB).update(preds[1:], refs)
    with pytest.raises(PredictionError, match="'s1'.*a='' and groundings=\\[\\] mean no output.*strict=False"):
        strict.compute()
    with pytest.raises(PredictionError, match="'s1'"):
        core.compute(preds[1:], refs, **STUB)
    lax = {**STUB, "strict": False}
    expected = core.compute(preds[1:], refs, **lax)
    assert expected["num_missing_predictions"] == 1
    assert_same(feed(accumulator("m4seg", **lax), preds[1:], refs, random.Random(5), **BATCHES).compute(), expected)
    unknown = accumulator("m4seg", **lax).update([S1_PRED, S4_PRED], [S4_REF])
    with pytest.raises(PredictionError, match="'s1' is unknown to the references"):
        unknown.compute()


def test_reset_and_repeated_compute():
    preds, refs = _synthetic()
    acc = accumulator("m4seg", **STUB).update(preds, refs)
    first = acc.compute()
    assert_same(acc.compute(), first)  # compute leaves the state alone
    acc.reset()
    acc.update(preds[:2], refs[:2])
    assert_same(acc.compute(), core.compute(preds[:2], refs[:2], **STUB))


def test_bad_prediction_is_refused_when_it_is_scored():
    bad = copy.deepcopy(S1_PRED)
    bad["groundings"][0]["image_index"] = 3
    acc = accumulator("m4seg", **STUB).update(predictions=[bad])
    with pytest.raises(PredictionError, match="prediction 's1': groundings\\[0\\].image_index: expected 1..2"):
        acc.update(references=[S1_REF])


def test_options_and_config_checked():
    with pytest.raises(OptionError, match="m4seg: unknown option\\(s\\) \\['nope'\\]"):
        accumulator("m4seg", nope=1)
    with pytest.raises(OptionError, match="option 'miou_unit'"):
        accumulator("m4seg", miou_unit="pixel")
    with pytest.raises(OptionError, match="metric 'm4seg' has no configs"):
        m4seg_core("default")
    a = accumulator("m4seg", **STUB)
    with pytest.raises(OptionError, match="same options"):
        a.merge(accumulator("m4seg", embed_fn="stub"))


# ---------------------------------------------------------------- tampered states (issue 28)


def test_inter_above_union_is_refused_naming_the_file_the_record_and_the_field(tmp_path):
    """Issue 28's attack: an image's gIoU counts with inter > union made the sample's gIoU 101 / 5 = 20.2."""
    a = accumulator("m4seg", **STUB).update([S4_PRED], [S4_REF]).save(tmp_path / "a.json")
    b = accumulator("m4seg", **STUB).update([S1_PRED], [S1_REF]).save(tmp_path / "b.json")
    assert 0 <= merge_files([a, b]).compute()["giou"] <= 1

    def attack(s):
        s["records"][0][1]["images"][0].update(inter=101, union=5)

    assert_refused(tamper(b, attack), [a], "records[0] 's1'.images[0].inter: expected at most the union (5), got 101")


def _image(field, value, n=0):
    return lambda s: s["records"][0][1]["images"][n].__setitem__(field, value)


M4SEG_ATTACKS = [
    (_image("union", -1), ".images[0].union: expected an integer in [0, 9223372036854775807], got -1"),
    (_image("iou", [[0.5, 2.0]]), ".images[0].iou[0][1]: expected a number in [0, 1], got 2.0"),
    (_image("iou", [[0.5]]), ".images[0].iou: expected a 1 x 2 matrix (a row per predicted, a column per ground-truth grounding), got [[0.5]]"),
    (_image("pairs", [[0, 5, 0.5]]), ".images[0].pairs[0]: expected a cell of the 1 x 2 matrix, got [0, 5, 0.5]"),
    (_image("pairs", [[0, 0, 0.25]]), ".images[0].pairs[0].iou: expected the matrix's IoU 0.5, > 0, got 0.25"),
    (_image("pairs", [[0, 0, 0.5], [0, 0, 0.5]]), ".images[0].pairs[1]: expected each prediction and ground truth in one pair at most, got [0, 0, 0.5]"),
    (_image("k", 2), ".images[0].k: expected 1 (the images in order), got 2"),
    (_image("pred", [0, 1]), ".images[0].iou: expected a 2 x 2 matrix (a row per predicted, a column per ground-truth grounding), got [[0.5, 0.0]]"),
    (_image("gt", [0, 0]), ".images: expected the gt indices 0..2 of gt_names, each in one image, got [0, 0, 2]"),
    (lambda s: s["records"][0][1].__setitem__("images", []), ".images: expected at least one image, got []"),
    (lambda s: s["records"][0][1].__setitem__("pred_names", ["chair"]), ".images: expected the pred indices 0..0 of pred_names, each in one image, got [0, 1]"),
    (lambda s: s["records"][0][1].__setitem__("gt_text", 5), ".gt_text: expected a string, got 5"),
]


@pytest.mark.parametrize("edit, message", M4SEG_ATTACKS, ids=[m.split(":")[0] for _, m in M4SEG_ATTACKS])
def test_every_part_of_an_m4seg_record_is_checked(tmp_path, edit, message):
    a = accumulator("m4seg", **STUB).update([S4_PRED], [S4_REF]).save(tmp_path / "a.json")
    b = accumulator("m4seg", **STUB).update([S1_PRED], [S1_REF]).save(tmp_path / "b.json")
    assert json.loads(b.read_text())["records"][0][1]["images"][0]["iou"] == [[0.5, 0.0]]  # 1 prediction x 2 GT groundings
    assert_refused(tamper(b, edit), [a], "records[0] 's1'" + message)


def _json(acc) -> dict:
    return json.loads(json.dumps(acc.state_dict(), allow_nan=True))


#: Valid saved states (the spec's vectors): lax with a reference waiting (scored as an empty prediction at compute),
#: and strict with a prediction waiting (compute then refuses it, after the load).
M4SEG_STATES = [
    _json(accumulator("m4seg", **STUB, strict=False, per_sample=True).update([S1_PRED], [S1_REF, S4_REF])),
    _json(accumulator("m4seg", **STUB).update([S4_PRED, S1_PRED], [S4_REF])),
]
M4SEG_RANGES = [(r"(miou|miou_strict|recall|siou|i_siou|giou|ciou)", 0, 1), (r"(ss|i_ss)", -1 - 1e-9, 1 + 1e-9),
                (r"(inter|union|recall_tp)", 0, float("inf"))]


@reaches("load_state")
@FUZZ
@given(state=tampered_states(M4SEG_STATES))
@example(state=M4SEG_STATES[0])
@example(state=copy.deepcopy(M4SEG_STATES[1]) | {"records": [[r[0], {**r[1], "images": [{**r[1]["images"][0], "inter": 101, "union": 5}]}, r[2]]
                                                        for r in M4SEG_STATES[1]["records"][:1]]})
def test_tampered_m4seg_states_load_in_range_or_are_refused(state):
    load_tampered(state, lambda out: assert_ranges(out, M4SEG_RANGES))
