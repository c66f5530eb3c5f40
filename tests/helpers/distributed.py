"""Real multi-process evaluate runs: every process of one run started at once (tests/helpers/dist_worker.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from helpers.common import REPO


def run_workers(commands: list[list[str]], log_dir: Path, timeout: float = 900) -> None:
    """Start every command at once (the processes of one evaluate run), wait for all of them, and fail with the
    tail of each failed process's log. Output goes to files, not pipes: a process blocked on a full pipe while
    another one is waited for would stall the rendezvous of every process."""
    logs = [open(log_dir / f"process_{i}.log", "wb") for i in range(len(commands))]
    procs = [subprocess.Popen(cmd, env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT) for cmd, log in zip(commands, logs)]
    errors = []
    deadline = time.monotonic() + timeout
    for i, p in enumerate(procs):
        try:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        logs[i].close()
        if p.returncode != 0:
            errors.append(f"process {i} exited with {p.returncode}: {(log_dir / f'process_{i}.log').read_text(errors='replace')[-2000:]}")
    assert not errors, "\n".join(errors)


def run_distributed(metric: str, inputs: Path, nproc: int, tmp_path: Path, experiment_id: str, batch: int,
                    config: str | None = None, timeout: float = 900) -> dict:
    """Score ``inputs`` (JSON with predictions, references and options) with ``metrics/<metric>`` in ``nproc`` real
    evaluate processes (tests/helpers/dist_worker.py, batches of ``batch``); process 0's result."""
    out = tmp_path / "out.json"
    worker = str(REPO / "tests" / "helpers" / "dist_worker.py")
    run_workers([[sys.executable, worker, str(REPO / "metrics" / metric), str(inputs), str(i), str(nproc), str(tmp_path / "cache"),
                  experiment_id, str(out), str(batch)] + ([config] if config else []) for i in range(nproc)], tmp_path, timeout)
    return json.loads(out.read_text())


def batch_sizes(n: int, size: int) -> list[int]:
    """``n`` rows in batches of ``size`` (the last one shorter)."""
    return [min(size, n - start) for start in range(0, n, size)]


def compute_in_batches(metric, predictions: list, references: list, sizes: list[int], **options):
    """Feed ``metric`` with ``add_batch`` in batches of ``sizes`` (which must cover every row), then ``compute``."""
    if sum(sizes) != len(references):
        raise ValueError(f"batch sizes {sizes} cover {sum(sizes)} rows, not {len(references)}")
    start = 0
    for size in sizes:
        metric.add_batch(predictions=predictions[start : start + size], references=references[start : start + size])
        start += size
    return metric.compute(**options)
