"""Real ``torch.distributed`` gloo groups on CPU for the accumulators (tests/test_benchmarks_gloo.py).

:func:`run_group` starts ``world`` processes once (``torch.multiprocessing.start_processes``, forked from the warm
fork server of ``helpers.distributed.warm_context``, so no rank pays torch's and perckit's imports); each joins a gloo group through a
``file://`` init method and runs every job in the same order (:func:`run_rank`): it builds the job's accumulator,
feeds its own share of the rows with the update calls :func:`plan` drew for it, merges every rank's accumulator with
``perckit.torch.gather`` and computes. Every rank writes what it got (the result as canonical JSON text, or the error)
to ``rank<r>.json``. A failure inside a job is recorded, never raised before the job's gather: every rank calls the
collective once per job, so one failing rank cannot leave the others waiting.
"""

from __future__ import annotations

import datetime
import json
import random
import traceback
from pathlib import Path
from typing import Any

from helpers.accumulators import canonical, random_batches

GROUP_TIMEOUT_S = 180


def plan(pred_ids: list[str], ref_ids: list[str], world: int, seed: int, empty_last_rank: bool = False) -> list[list[tuple[list[int], list[int]]]]:
    """Each rank's update calls ``[(prediction indices, reference indices), ...]`` over rows of the given ids.

    The references are cut into ``world`` uneven shares at random points (the last rank gets none when
    ``empty_last_rank``); a prediction goes to its reference's rank, except one in eight, which goes to the next rank
    (its pair meets only in the merge). Each rank sends its predictions and its references in separate random
    orders and random batch sizes (1 to 6), so the two sides of an update call are not aligned.
    """
    rng = random.Random(seed)
    order = list(range(len(ref_ids)))
    rng.shuffle(order)
    parts = world - 1 if empty_last_rank and world > 1 else world
    cuts = sorted(rng.randint(0, len(order)) for _ in range(parts - 1))
    bounds = [0, *cuts, len(order)]
    ref_rank = {}
    for r in range(parts):
        for i in order[bounds[r] : bounds[r + 1]]:
            ref_rank[ref_ids[i]] = r
    refs_of = [[i for i in order if ref_rank[ref_ids[i]] == r] for r in range(world)]
    preds_of: list[list[int]] = [[] for _ in range(world)]
    for j, pid in enumerate(pred_ids):
        r = ref_rank[pid]
        preds_of[(r + 1) % world if rng.random() < 0.125 else r].append(j)
    calls = []
    for r in range(world):
        p = random_batches(preds_of[r], rng, largest=6)
        q = random_batches(refs_of[r], rng, largest=6)
        n = max(len(p), len(q))
        calls.append([(p[k] if k < len(p) else [], q[k] if k < len(q) else []) for k in range(n)])
    return calls


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def run_job(job: dict, rank: int, world: int) -> dict:
    """One job on this rank: update with this rank's calls, gather, compute (each step's error recorded). A job with
    ``group_ranks`` runs on that subgroup only (``gather(acc, group=...)``; its plan is indexed by the position in
    the subgroup); the other ranks only take part in creating the group and record ``{"in_group": False}``."""
    import torch.distributed as dist

    import perckit.torch as pt
    from perckit.hf.accumulate import accumulator

    out: dict[str, Any] = {"result": None, "error": None}
    group = None
    if "group_ranks" in job:
        group = dist.new_group(job["group_ranks"])  # every rank of the world calls it, in the same order
        if rank not in job["group_ranks"]:
            return {**out, "in_group": False}
        rank, world = job["group_ranks"].index(rank), len(job["group_ranks"])
    options = job["options_by_rank"][rank] if "options_by_rank" in job else job["options"]
    preds, refs = job["predictions"], job["references"]
    try:
        acc = accumulator(job["metric"], job["config"], **options)
    except Exception as e:  # still take part in the collective: the others must not wait
        out["error"] = "accumulator: " + _error(e)
        dist.all_gather_object([None] * world, None, group=group)
        return out
    try:
        for p_idx, r_idx in job["plan"][rank]:
            acc.update(predictions=[preds[i] for i in p_idx] if p_idx else None, references=[refs[i] for i in r_idx])
    except Exception as e:
        out["error"] = "update: " + _error(e) + "\n" + traceback.format_exc()
    try:
        merged = pt.gather(acc, group=group)
    except Exception as e:
        out["error"] = out["error"] or "gather: " + _error(e)
        return out
    try:
        out["result"] = canonical(merged.compute())
    except Exception as e:
        out["error"] = out["error"] or "compute: " + _error(e) + "\n" + traceback.format_exc()
    return out


def run_rank(rank: int, world: int, init_file: str, jobs: list[dict], out_dir: str) -> None:
    """The body of one spawned process (``torch.multiprocessing.spawn`` passes ``rank`` first)."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S))
    try:
        results = {job["name"]: run_job(job, rank, world) for job in jobs}
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(results), encoding="utf-8")
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_group(jobs: list[dict], world: int, tmp: Path) -> list[dict]:
    """Spawn ``world`` processes once, run every job in each, and return each rank's ``{job name: {result, error}}``."""
    import torch.multiprocessing as mp

    from helpers.distributed import warm_context

    warm_context()  # the fork server preloads torch and perckit: the ranks start without seconds of imports each
    tmp.mkdir(parents=True, exist_ok=True)
    init_file = tmp / "gloo_init"
    mp.start_processes(run_rank, args=(world, str(init_file), jobs, str(tmp)), nprocs=world, join=True, start_method="forkserver")
    return [json.loads((tmp / f"rank{r}.json").read_text(encoding="utf-8")) for r in range(world)]
