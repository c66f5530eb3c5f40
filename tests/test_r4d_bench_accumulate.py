"""mask_temporal and track_id as accumulators (issue 19): the sample release's queries in random batch sizes and
orders, split over several accumulators and merged, through state_dict and through files, equal to the core
functions (and so to the evaluate modules, which wrap the accumulators) bit for bit."""

from __future__ import annotations

import pickle
import random

import pytest
from helpers.accumulators import canonical, feed

from perckit.accumulate import accumulator, load_state, merge_files
from perckit.demo import perturb_r4d
from perckit.errors import OptionError, PredictionError
from perckit.r4d_bench import features as feats
from perckit.r4d_bench import metrics as core

CASES = [("mask_temporal", {}), ("mask_temporal", {"strict": False}),
         ("mask_temporal", {"strict": False, "iou_threshold": 0.7, "evaluated_frames": "annotated"}),
         ("mask_temporal", {"strict": False, "only_query_prefix": "americano"}),
         ("track_id", {}), ("track_id", {"strict": True}), ("track_id", {"only_queries": ["americano_q1", "espresso_q2"]})]


@pytest.fixture(scope="module")
def inputs(r4d_queries):
    rows = r4d_queries.to_list()
    masks, tracks = perturb_r4d(rows)
    return {
        "mask_temporal": (masks, [feats.to_metric_reference(r) for r in rows], core.mask_temporal),
        "track_id": (tracks, [feats.to_track_reference(r) for r in rows], core.track_id),
    }


@pytest.mark.parametrize("name, options", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_random_batches_and_merges_give_the_core_numbers(inputs, name, options, seed):
    preds, refs, fn = inputs[name]
    lax = options.get("strict", name == "mask_temporal") is False  # mask_temporal is strict by default, track_id lax
    preds = preds[:-4] if lax else preds  # lax: some queries have no prediction
    want = canonical(fn(preds, refs, **options))
    rng = random.Random(seed)
    parts = [accumulator(name, **options) for _ in range(3)]
    feed(parts, preds, refs, rng)
    merged = accumulator(name, **options)
    for part in parts:  # each part's state travels as a pickle (what torch.distributed sends)
        state = pickle.loads(pickle.dumps(part.state_dict()))
        merged.merge(accumulator(name, **options).load_state_dict(state))
    assert canonical(merged.compute()) == want


def test_files_from_separate_jobs_merge(inputs, tmp_path):
    preds, refs, fn = inputs["mask_temporal"]
    want = canonical(fn(preds, refs))
    rng = random.Random(3)
    parts = [accumulator("mask_temporal") for _ in range(4)]
    feed(parts, preds, refs, rng)
    paths = [part.save(tmp_path / f"rank{i}.json") for i, part in enumerate(parts)]
    assert canonical(merge_files(paths).compute()) == want
    assert canonical(load_state(paths[0]).merge(load_state(paths[1])).merge(load_state(paths[2])).merge(load_state(paths[3])).compute()) == want


def test_compute_leaves_the_state_and_reset_empties_it(inputs):
    preds, refs, fn = inputs["mask_temporal"]
    acc = accumulator("mask_temporal").update(preds[:10], refs[:10])
    first = canonical(acc.compute())
    assert canonical(acc.compute()) == first  # compute does not consume the records
    acc.update(preds[10:], refs[10:])
    assert canonical(acc.compute()) == canonical(fn(preds, refs))
    acc.reset()
    with pytest.raises(PredictionError, match="no prediction for|num_queries|empty"):
        acc.update([], refs[:1]).compute()


def test_duplicates_unknown_and_missing_are_refused_with_the_core_messages(inputs):
    preds, refs, fn = inputs["mask_temporal"]
    acc = accumulator("mask_temporal").update(preds[:2], refs[:2])
    with pytest.raises(PredictionError, match=r"predictions: duplicate query_id"):
        acc.update(preds[:1], [])
    with pytest.raises(PredictionError, match=r"references: duplicate query_id"):
        acc.update([], refs[1:2])
    with pytest.raises(PredictionError) as core_error:
        fn(preds[1:2], refs[:2])
    with pytest.raises(PredictionError) as acc_error:
        accumulator("mask_temporal").update(preds[1:2], refs[:2]).compute()
    assert str(acc_error.value) == str(core_error.value)
    unknown = dict(preds[0], query_id="not_a_query")
    with pytest.raises(PredictionError, match="unknown to the references"):
        accumulator("mask_temporal").update([unknown], refs[:1]).compute()


def test_a_pair_that_fails_to_score_is_kept_waiting(inputs):
    """A prediction whose scoring raises stays unpaired (nothing is silently lost); compute then refuses."""
    preds, refs, _ = inputs["mask_temporal"]
    bad = dict(preds[0], frames=[{"frame_id": preds[0]["frames"][0]["frame_id"], "mask": {"size": [1, 1], "counts": "!!"}}]) \
        if preds[0]["frames"] else dict(preds[0], frames="not a list")
    acc = accumulator("mask_temporal")
    with pytest.raises(PredictionError):
        acc.update([bad], refs[:1])
    assert "0 scored" in repr(acc) and "1 predictions and 1 references waiting" in repr(acc)


def test_merging_other_options_or_metrics_is_refused(inputs):
    with pytest.raises(OptionError, match="same options"):
        accumulator("mask_temporal").merge(accumulator("mask_temporal", iou_threshold=0.7))
    with pytest.raises(OptionError, match="expected an accumulator of 'mask_temporal'"):
        accumulator("mask_temporal").merge(accumulator("track_id"))
    with pytest.raises(OptionError, match="unknown option"):
        accumulator("track_id", iou_threshold=0.5)
    with pytest.raises(OptionError, match="no configs"):
        accumulator("mask_temporal", "tracking")
