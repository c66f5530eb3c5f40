"""Real multi-process evaluate runs: every process of one run started at once (tests/helpers/dist_worker.py).

The processes are forked from a warm interpreter instead of started fresh: :func:`warm_context` is the
``forkserver`` multiprocessing context whose server has already imported evaluate, datasets, torch and the
perckit modules the metric scripts need (a fresh ``python`` pays seconds of imports per process, most of it
``import evaluate``, which loads transformers' pipelines). The server starts once per test process (each xdist
worker has its own); every process forked from it is a new process with its own pid, files and locks, so
evaluate's file rendezvous and torch's gloo groups run exactly as they do across fresh interpreters.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Callable

from helpers.common import REPO

#: What the fork server imports once (a module that fails to import is skipped by multiprocessing, and is then
#: imported by each forked process on use, as a fresh interpreter would).
PRELOAD = (
    "numpy", "pyarrow", "datasets", "evaluate", "torch", "torch.distributed", "torch.multiprocessing",
    "perckit", "perckit.rle", "perckit.hf.metric", "perckit.hf.accumulate", "perckit.torch",
    "perckit.r4d_bench.features", "perckit.syn4d.features", "perckit.syn4d.metric", "perckit.refcoco_m.features",
    "perckit.reason_av_edit.features", "perckit.reason_av_edit.quality.metric", "perckit.reason_av_edit.quality.references",
    "perckit.reason_av_edit.quality.predictions", "perckit.m4seg.features",
)


def warm_context() -> multiprocessing.context.BaseContext:
    """The ``forkserver`` context whose server preloads :data:`PRELOAD` (set before the server first starts;
    later calls return the same running server)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


def _child(target: Callable[[list[str]], None], argv: list[str], env: dict[str, str], log: str) -> None:
    """The body of one forked process: the caller's environment, stdout and stderr to ``log``, then ``target(argv)``."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    target(argv)
    sys.stdout.flush()
    sys.stderr.flush()


def run_workers(target: Callable[[list[str]], None], argvs: list[list[str]], log_dir: Path, timeout: float = 900) -> None:
    """Start one process per ``argvs`` entry at once (the processes of one evaluate run), each running
    ``target(argv)`` (a worker script's ``main``), wait for all of them, and fail with the tail of each failed
    process's log. Output goes to files, not pipes: a process blocked on a full pipe while another one is waited
    for would stall the rendezvous of every process. An exception in ``target`` exits its process with 1 and
    its traceback in the log, as a script's would."""
    ctx = warm_context()
    logs = [str(log_dir / f"process_{i}.log") for i in range(len(argvs))]
    procs = [ctx.Process(target=_child, args=(target, list(argv), dict(os.environ), log)) for argv, log in zip(argvs, logs)]
    for p in procs:
        p.start()
    errors = []
    deadline = time.monotonic() + timeout
    for i, p in enumerate(procs):
        p.join(timeout=max(1.0, deadline - time.monotonic()))
        if p.exitcode is None:
            p.kill()
            p.join()
        if p.exitcode != 0:
            errors.append(f"process {i} exited with {p.exitcode}: {Path(logs[i]).read_text(errors='replace')[-2000:]}")
    assert not errors, "\n".join(errors)


def run_distributed(metric: str, inputs: Path, nproc: int, tmp_path: Path, experiment_id: str, batch: int,
                    config: str | None = None, timeout: float = 900) -> dict:
    """Score ``inputs`` (JSON with predictions, references and options) with ``metrics/<metric>`` in ``nproc`` real
    evaluate processes (tests/helpers/dist_worker.py, batches of ``batch``); process 0's result."""
    from helpers.dist_worker import main as worker

    out = tmp_path / "out.json"
    run_workers(worker, [[str(REPO / "metrics" / metric), str(inputs), str(i), str(nproc), str(tmp_path / "cache"),
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
