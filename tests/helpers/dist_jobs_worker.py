"""One process of several evaluate distributed runs in a row, so that one set of processes covers every metric.

argv: jobs.json process_id num_process

jobs.json is a list of {metric_dir, config, inputs, cache_dir, experiment_id, out, batch}; every process runs
the jobs in the same order, scores its shard of each (rows i with i % num_process == process_id, added in
batches of ``batch``), and process 0 writes each job's result JSON to ``out``.

Process 0 reaches a job late (it computes the previous one while the others only add their rows), and
evaluate's rendezvous is racy then: two processes polling process 0's lock file at once can each see it
"locked" (one holds it for a moment to test it), and one may pass before process 0 holds the rendezvous
lock. So processes > 0 first wait for process 0's cache file of the job, which it creates once it holds both.
"""

from __future__ import annotations

import json
import os
import sys
import time

MASTER_TIMEOUT_S = 600


def wait_for_master(metric, experiment_id: str, nproc: int) -> None:
    path = os.path.join(metric.data_dir, f"{experiment_id}-{nproc}-0.arrow")
    deadline = time.monotonic() + MASTER_TIMEOUT_S
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"process 0 did not start {experiment_id!r} within {MASTER_TIMEOUT_S} s ({path} does not exist)")
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> None:
    """One process's jobs; ``argv`` as in the module docstring (without the script name; default ``sys.argv[1:]``)."""
    import evaluate  # here, not at import: tests/test_benchmarks_distributed.py imports this module while collecting

    args = sys.argv[1:] if argv is None else argv
    jobs_file, pid, nproc = args[0], int(args[1]), int(args[2])
    with open(jobs_file, encoding="utf-8") as f:
        jobs = json.load(f)
    for job in jobs:
        with open(job["inputs"], encoding="utf-8") as f:
            data = json.load(f)
        preds, refs = data["predictions"], data["references"]
        metric = evaluate.load(
            job["metric_dir"], job.get("config"), num_process=nproc, process_id=pid,
            cache_dir=job["cache_dir"], experiment_id=job["experiment_id"], timeout=900,
        )
        if pid > 0:
            wait_for_master(metric, job["experiment_id"], nproc)
        mine = list(range(pid, len(refs), nproc))
        batch = int(job["batch"])
        for i in range(0, len(mine), batch):
            idx = mine[i : i + batch]
            metric.add_batch(predictions=[preds[j] for j in idx], references=[refs[j] for j in idx])
        result = metric.compute(**data.get("options", {}))
        if pid == 0:
            with open(job["out"], "w", encoding="utf-8") as f:
                json.dump(result, f, sort_keys=True)


if __name__ == "__main__":
    main()
