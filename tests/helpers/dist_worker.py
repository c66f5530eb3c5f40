"""One process of an evaluate distributed run: scores its shard; process 0 writes the result JSON.

argv: metric_dir inputs.json process_id num_process cache_dir experiment_id out.json batch_size [config_name]
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str] | None = None) -> None:
    """One process's run; ``argv`` as in the module docstring (without the script name; default ``sys.argv[1:]``)."""
    import evaluate  # here, not at import: the suite's rule (tests/test_suite_harness.py), and forked workers have it

    args = sys.argv[1:] if argv is None else argv
    metric_dir, inputs, pid, nproc, cache_dir, exp, out, batch = args[:8]
    config = args[8] if len(args) > 8 else None
    pid, nproc, batch = int(pid), int(nproc), int(batch)
    data = json.loads(open(inputs, encoding="utf-8").read())
    preds, refs = data["predictions"], data["references"]
    metric = evaluate.load(metric_dir, config, num_process=nproc, process_id=pid, cache_dir=cache_dir, experiment_id=exp, timeout=900)
    mine = list(range(pid, len(refs), nproc))
    for i in range(0, len(mine), batch):
        idx = mine[i : i + batch]
        metric.add_batch(predictions=[preds[j] for j in idx], references=[refs[j] for j in idx])
    result = metric.compute(**data.get("options", {}))
    if pid == 0:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(result, f, sort_keys=True)


if __name__ == "__main__":
    main()
