"""perckit.torch.gather on real torch.distributed gloo groups of 2 and 4 CPU processes: every metric's accumulator,
fed with each rank's uneven share of a sample release in random batch sizes and orders, gives on every rank exactly
the one-process numbers of the metric's core function.

The processes are spawned once per world size (``torch.multiprocessing.spawn``, a ``file://`` init method under
tmp_path) and each runs every job in a row (tests/helpers/gloo.py). The inputs are the sample releases scored with
perturbed predictions (R4D-Bench and RefCOCO-M as the demo perturbs them, Syn4D's noisy NPZ predictions, M4Seg and
ReasonAVEdit-Bench perturbed here) and lax options where the metric has them, so missing predictions, task failures,
empty masks and several groups are in the numbers. A share may be empty (the last rank of the first job gets no
rows), and one prediction in eight is sent from another rank than its reference (the pair meets in the merge).

Row lists (per_query, per_example, per_sample, sequences, failures) follow the ranks, so they are compared sorted;
every number must be identical, bit for bit. Two more jobs check the refusals: ranks scoring with different options
(OptionError on every rank) and an item scored on two ranks (PredictionError naming DistributedSampler's padding).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.accumulators import canonical
from helpers.gloo import plan, run_group

from perckit.hf import accumulate
from perckit.hf import benchmark as benchmarks
from perckit import rle

pytestmark = pytest.mark.slow  # 2 + 4 interpreters importing torch

SUBGROUP = [1, 3]
M4_SIX = ["miou", "recall", "i_ss", "i_siou", "ss", "siou"]
WORLDS = (2, 4)


# ---------------------------------------------------------------- the sample releases as metric inputs


def _split(benchmark: str, config: str, root, cache):
    from perckit.hf.entrypoints import builder_class

    bl = builder_class(benchmark)(config_name=config, data_dir=str(root), cache_dir=str(cache / benchmark))
    bl.download_and_prepare()
    return bl.as_dataset(list(bl.info.splits)[-1])


def r4d_inputs(base, cache):
    from perckit.demo import perturb_r4d
    from perckit.r4d_bench import features as feats
    from perckit.r4d_bench import metric as m
    from perckit.samples import write_release

    write_release("r4d_bench", base / "r4d_bench")
    rows = _split("r4d_bench", "all_queries", base / "r4d_bench", cache).to_list()
    masks, tracks = perturb_r4d(rows)
    masks = [p for i, p in enumerate(masks) if i % 9 != 4]  # missing predictions: "no output" in lax mode
    refs = [feats.to_metric_reference(r) for r in rows]
    subset = sorted(r["query_id"] for r in rows)[::3]
    return {
        "mask_temporal": ("mask_temporal", None, {"strict": False}, masks, refs, m.mask_temporal),
        "mask_temporal_subset": ("mask_temporal", None, {"strict": False, "only_queries": subset}, masks, refs, m.mask_temporal),
        "track_id": ("track_id", None, {}, tracks[::2] + tracks[1::4], [feats.to_track_reference(r) for r in rows], m.track_id),
    }


def refcoco_inputs(base, cache):
    from perckit.demo import perturb_masks
    from perckit.refcoco_m import features as feats
    from perckit.refcoco_m import metric as m
    from perckit.samples import write_release

    write_release("refcoco_m", base / "refcoco_m")
    rows = _split("refcoco_m", "expressions", base / "refcoco_m", cache).remove_columns(["image"]).to_list()
    preds = [{"expression_id": r["expression_id"], "mask": mk} for r, mk in zip(rows, perturb_masks([r["mask"] for r in rows]))]
    return {"refer_iou": ("refer_iou", None, {"return_per_example": True}, preds, [feats.to_metric_reference(r) for r in rows], m.refer_iou)}


def syn4d_inputs(base, cache):
    from perckit.samples import write_release
    from perckit.samples.syn4d_predictions import write_predictions
    from perckit.syn4d.read import load_prediction_rows
    from perckit.syn4d import metric as core
    from perckit.syn4d.features import to_metric_reference

    fx = write_release("syn4d", base / "syn4d")
    rows = _split("syn4d", "challenge", base / "syn4d", cache).remove_columns(["video"]).to_list()
    ids = [r["sequence_id"] for r in rows]
    preds = load_prediction_rows(write_predictions(fx, base / "syn4d_predictions", noise=0.05), ids)
    preds[2] = {**preds[2], "tracking_xyz": None, "depth": None, "camera_c2w": None}  # a failure in lax mode
    preds = preds[:5] + preds[6:]  # a missing prediction: another failure

    def truth(task):
        return lambda p, r, **o: core.compute_task(p, r, task, core.Syn4DOptions.from_kwargs(**o), coverage=True)

    return {f"syn4d_{t}": ("syn4d", t, {"strict": False}, preds, [to_metric_reference(r, t) for r in rows], truth(t)) for t in core.TASKS}


def m4seg_inputs(base, cache):
    from perckit.m4seg import features as feats
    from perckit.m4seg import metric as m
    from perckit.samples import write_release

    write_release("m4seg", base / "m4seg", image_root=base / "m4img")
    rows = _split("m4seg", "default", base / "m4seg", cache).to_list()
    preds = []
    for i, r in enumerate(rows):
        p = feats.gt_as_prediction(r)
        gs = []
        for j, g in enumerate(p["groundings"]):
            g = dict(g)
            if (i + j) % 3 == 0:
                g["segmentation"] = rle.encode(np.roll(rle.decode(g["segmentation"]), 2, axis=1))
            if (i + j) % 5 == 4:
                g["name"] = "object"
            if (i + j) % 7 != 6:
                gs.append(g)
        preds.append({**p, "groundings": gs, "a": p["a"] if i % 4 else "A different answer."})
    return {"m4seg": ("m4seg", None, {"embed_fn": "stub", "metrics": M4_SIX}, preds, [feats.to_metric_reference(r) for r in rows], m.compute)}


def av_inputs(base, cache):
    from perckit.reason_av_edit import features as feats
    from perckit.reason_av_edit import metric as m
    from perckit.samples import write_release

    write_release("reason_av_edit", base / "reason_av_edit")
    ds = _split("reason_av_edit", "default", base / "reason_av_edit", cache)
    rows = ds.remove_columns(["video", "audio", "reason_visual", "reason_visual_mask", "ref_image"]).to_list()
    refs = [feats.to_metric_reference(r) for r in rows]
    preds = []
    for i, r in enumerate(refs):
        p = feats.gt_as_prediction(r)
        if r["edit_window_s"]:
            a, b = r["edit_window_s"]
            p["edit_window_s"] = [a + 0.08 * (i % 3), b + 0.04 * (i % 2)]
        if i % 2:
            p["reason_audio"] = dict(feats.NOT_PROVIDED_MEDIA)
        if i % 4 == 1 and r["anchor_mask"]["size"]:
            p["anchor_mask"] = rle.empty(*r["anchor_mask"]["size"])
        elif i % 4 == 3 and r["anchor_mask"]["size"]:
            p["anchor_mask"] = rle.encode(np.roll(rle.decode(r["anchor_mask"]), 1, axis=0))
        preds.append(p)
    return {"av_reasoning": ("av_reasoning", None, {"return_per_sample": True}, preds, refs, m.av_reasoning)}


MAKERS = (r4d_inputs, refcoco_inputs, syn4d_inputs, m4seg_inputs, av_inputs)
#: every job this module runs, and the metric it scores
JOBS = {"mask_temporal": "mask_temporal", "mask_temporal_subset": "mask_temporal", "track_id": "track_id", "refer_iou": "refer_iou",
        "syn4d_tracking": "syn4d", "syn4d_depth": "syn4d", "syn4d_pose": "syn4d", "m4seg": "m4seg", "av_reasoning": "av_reasoning"}


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """Every job: metric, config, options, predictions, references, the one-process result."""
    base = tmp_path_factory.mktemp("gloo_inputs")
    cache = base / "cache"
    out = {}
    for make in MAKERS:
        for name, (metric, config, options, preds, refs, truth) in make(base, cache).items():
            out[name] = {"name": name, "metric": metric, "config": config, "options": options, "predictions": preds, "references": refs,
                         "single": canonical(truth(preds, refs, **options))}
    return out


def _refusal_jobs(jobs: dict, world: int) -> list[dict]:
    """Ranks whose options differ; an item scored on rank 0 and on rank 1."""
    track = jobs["track_id"]
    refs, preds = track["references"], {p["query_id"]: p for p in track["predictions"]}
    both = [i for i, r in enumerate(refs) if r["query_id"] in preds][0]
    pred_list = [preds[refs[both]["query_id"]]]
    nothing = [[] for _ in range(world - 2)]
    return [
        {"name": "options_differ", "metric": "track_id", "config": None, "predictions": pred_list, "references": refs,
         "options_by_rank": [{}] + [{"only_query_prefix": "x"}] * (world - 1), "plan": [[([0], [both])], []] + nothing},
        {"name": "scored_twice", "metric": "track_id", "config": None, "options": {}, "predictions": pred_list, "references": refs,
         "plan": [[([0], [both])], [([0], [both])]] + nothing},
    ]


def _world_jobs(jobs: dict, world: int) -> list[dict]:
    """The jobs one spawn of ``world`` processes runs: every runnable metric job with its plan, the refusals, and
    (in the 4-process world) a job on a 2-rank subgroup."""
    out = []
    for k, (name, job) in enumerate(jobs.items()):
        key = accumulate.core(job["metric"], job["config"]).id_key
        out.append({**{f: job[f] for f in ("name", "metric", "config", "options", "predictions", "references")},
                    "plan": plan([p[key] for p in job["predictions"]], [r[key] for r in job["references"]], world, seed=100 * world + k,
                                 empty_last_rank=k == 0)})
    out += _refusal_jobs(jobs, world)
    if world == 4:  # gather(acc, group=...): a 2-rank subgroup of the 4
        job, key = jobs["mask_temporal"], "query_id"
        out.append({**{f: job[f] for f in ("metric", "config", "options", "predictions", "references")}, "name": "subgroup",
                    "group_ranks": SUBGROUP, "plan": plan([p[key] for p in job["predictions"]], [r[key] for r in job["references"]], 2, seed=7)})
    return out


@pytest.fixture(scope="module")
def gloo_results(jobs, tmp_path_factory):
    """``{world: [each rank's {job: {result, error}}]}``: one spawn of ``world`` processes per world size, each
    process running every job."""
    return {world: run_group(_world_jobs(jobs, world), world, tmp_path_factory.mktemp(f"gloo{world}")) for world in WORLDS}


def test_every_metric_has_a_job():
    assert set(JOBS.values()) == {m for m, (_, spec) in benchmarks.metrics().items() if spec.core is not None}


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("name", list(JOBS))
def test_gloo_group_gives_the_one_process_numbers(gloo_results, jobs, name, world):
    job = jobs[name]
    ranks = gloo_results[world]
    for rank, got in enumerate(ranks):
        assert got[name]["error"] is None, f"world {world}, rank {rank}: {got[name]['error']}"
        assert got[name]["result"] == job["single"], f"world {world}, rank {rank}"


def test_the_inputs_are_not_trivial(jobs):
    """Guards the test itself: imperfect scores, missing predictions and failures, so a wrong merge would show."""
    import json

    def res(name):
        return json.loads(jobs[name]["single"])

    mt = res("mask_temporal")
    assert mt["num_missing_predictions"] > 0 and 0 < mt["miou"] < 1
    assert res("mask_temporal_subset")["num_queries"] < mt["num_queries"]
    assert 0 < res("track_id")["f1"] < 1 and res("track_id")["num_missing_predictions"] > 0
    assert 0 < res("refer_iou")["miou"] < 1 and len(res("refer_iou")["per_example"]) == len(jobs["refer_iou"]["references"])
    for task in ("tracking", "depth", "pose"):
        assert len(res(f"syn4d_{task}")["failures"]) == 2 and len(res(f"syn4d_{task}")["by_scene"]) > 1, task
    for key in ("miou", "recall", "siou"):
        assert 0 < res("m4seg")[key] < 1, key
    av = res("av_reasoning")
    assert 0 < av["visual_iou"] < 1 and len(av["per_sample"]) == len(jobs["av_reasoning"]["references"])


@pytest.mark.parametrize("world", WORLDS)
def test_ranks_with_different_options_are_refused_on_every_rank(gloo_results, world):
    for rank, got in enumerate(gloo_results[world]):
        err = got["options_differ"]["error"] or ""
        assert err.startswith("gather: OptionError") and "same options" in err, f"rank {rank}: {err}"


@pytest.mark.parametrize("world", WORLDS)
def test_an_item_scored_on_two_ranks_is_refused_on_every_rank(gloo_results, world):
    for rank, got in enumerate(gloo_results[world]):
        err = got["scored_twice"]["error"] or ""
        assert err.startswith("gather: PredictionError") and "scored in both" in err and "DistributedSampler" in err, f"rank {rank}: {err}"


def test_a_subgroup_gathers_its_ranks_only(gloo_results, jobs):
    """``gather(acc, group=new_group([1, 3]))`` in the 4-process world: ranks 1 and 3 get the one-process numbers."""
    for rank, got in enumerate(gloo_results[4]):
        if rank in SUBGROUP:
            assert got["subgroup"]["error"] is None and got["subgroup"]["result"] == jobs["mask_temporal"]["single"], f"rank {rank}"
        else:
            assert got["subgroup"] == {"result": None, "error": None, "in_group": False}, f"rank {rank}"


# ---------------------------------------------------------------- the same inputs in one process: batches and the evaluate module


@pytest.mark.parametrize("name", list(JOBS))
def test_one_accumulator_in_random_batches_and_the_evaluate_module_give_the_same_numbers(jobs, name):
    """Issue 19's "done": the gloo groups above, one accumulator fed in random batch sizes and orders, and the
    evaluate module (``perckit.load_metric``: a thin wrapper over the accumulator) all give the core function's
    numbers, bit for bit; the evaluate module's ``add_batch`` too."""
    from perckit.hf.api import load_metric

    job = jobs[name]
    key = accumulate.core(job["metric"], job["config"]).id_key
    preds, refs = job["predictions"], job["references"]
    (calls,) = plan([p[key] for p in preds], [r[key] for r in refs], 1, seed=11)
    acc = accumulate.accumulator(job["metric"], job["config"], **job["options"])
    for p_idx, r_idx in calls:
        acc.update(predictions=[preds[i] for i in p_idx], references=[refs[i] for i in r_idx])
    assert canonical(acc.compute()) == job["single"]
    # evaluate takes aligned pairs: a lax job's references without a prediction are left out on both sides
    by_id = {p[key]: p for p in preds}
    paired = [r for r in refs if r[key] in by_id]
    aligned = [by_id[r[key]] for r in paired]
    want = job["single"] if len(paired) == len(refs) else canonical(
        accumulate.accumulator(job["metric"], job["config"], **job["options"]).update(aligned, paired).compute())
    module = load_metric(job["metric"], job["config"])
    assert canonical(module.compute(predictions=aligned, references=paired, **job["options"])) == want
    for start in range(0, len(paired), 5):
        module.add_batch(predictions=aligned[start:start + 5], references=paired[start:start + 5])
    assert canonical(module.compute(**job["options"])) == want
