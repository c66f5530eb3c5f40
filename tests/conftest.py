"""Shared fixtures. Caches go to a private temp folder and the Hub is offline: tests never touch the network."""

import json
import os
import tempfile

_CACHE = tempfile.mkdtemp(prefix="perckit-test-cache-")
os.environ.setdefault("HF_HOME", os.path.join(_CACHE, "hf"))
os.environ["HF_DATASETS_CACHE"] = os.path.join(_CACHE, "datasets")
os.environ["HF_MODULES_CACHE"] = os.path.join(_CACHE, "modules")
os.environ["HF_EVALUATE_CACHE"] = os.path.join(_CACHE, "evaluate")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_EVALUATE_OFFLINE"] = "1"
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")

from pathlib import Path  # noqa: E402

import datasets  # noqa: E402
import pytest  # noqa: E402

from perckit.entrypoints import build_split  # noqa: E402,F401  (re-exported for the tests)

REPO = Path(__file__).resolve().parents[1]
DS_MAJOR = int(datasets.__version__.split(".")[0])
needs_scripts = pytest.mark.skipif(DS_MAJOR >= 4, reason=f"datasets {datasets.__version__} cannot run builder scripts (3.6 line only)")


@pytest.fixture(scope="session")
def r4d_release(tmp_path_factory):
    from perckit.fixtures.base import write_release

    root = tmp_path_factory.mktemp("r4d_release")
    return write_release("r4d_bench", root)


@pytest.fixture(scope="session")
def r4d_queries(r4d_release, tmp_path_factory):
    return build_split("r4d_bench", "all_queries", r4d_release.root, tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session")
def mask_metric():
    import evaluate

    return evaluate.load(str(REPO / "metrics" / "mask_temporal"))


@pytest.fixture(scope="session")
def track_metric():
    import evaluate

    return evaluate.load(str(REPO / "metrics" / "track_id"))


SYN4D_PARITY = REPO / "tests" / "data" / "syn4d_seed0"


def run_workers(commands: list[list[str]], log_dir: Path, timeout: float = 900) -> None:
    """Start every command at once (the processes of one evaluate run), wait for all of them, and fail with the
    tail of each failed process's log. Output goes to files, not pipes: a process blocked on a full pipe while
    another one is waited for would stall the rendezvous of every process."""
    import subprocess
    import time

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
    import sys

    out = tmp_path / "out.json"
    worker = str(REPO / "tests" / "helpers" / "dist_worker.py")
    run_workers([[sys.executable, worker, str(REPO / "metrics" / metric), str(inputs), str(i), str(nproc), str(tmp_path / "cache"),
                  experiment_id, str(out), str(batch)] + ([config] if config else []) for i in range(nproc)], tmp_path, timeout)
    return json.loads(out.read_text())


@pytest.fixture(scope="session")
def syn4d_release(tmp_path_factory):
    from perckit.fixtures.base import write_release

    return write_release("syn4d", tmp_path_factory.mktemp("syn4d_release"))


@pytest.fixture(scope="session")
def syn4d_parity_rows(tmp_path_factory):
    """The parity fixture built with the ``challenge`` config (tracking + depth + pose ground truth)."""
    from perckit.syn4d.features import to_numpy_row

    ds = build_split("syn4d", "challenge", SYN4D_PARITY, tmp_path_factory.mktemp("cache"))
    return [to_numpy_row(r) for r in ds]


def fake_snapshot_download(source, calls):
    """Stands in for ``huggingface_hub.snapshot_download`` at its boundary: filters the files of ``source``
    with huggingface_hub's own pattern matcher and copies them into a fresh snapshot folder."""
    import shutil

    from huggingface_hub.utils import filter_repo_objects

    def fake(repo_id, repo_type, revision, allow_patterns):
        calls.append({"repo_id": repo_id, "repo_type": repo_type, "allow_patterns": allow_patterns})
        files = sorted(p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file())
        dest = source.parent / f"snapshot_{len(calls)}"
        for f in filter_repo_objects(files, allow_patterns=allow_patterns):
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source / f, dest / f)
        return str(dest)

    return fake


@pytest.fixture(scope="session")
def refcoco_release(tmp_path_factory):
    from perckit.fixtures.base import write_release

    return write_release("refcoco_m", tmp_path_factory.mktemp("refcoco_release"))


@pytest.fixture(scope="session")
def reason_av_edit_release(tmp_path_factory):
    from perckit.fixtures.base import write_release

    return write_release("reason_av_edit", tmp_path_factory.mktemp("reason_av_edit_release"))


#: Tests that start several interpreters, run the whole demo or build large inputs: `make test-fast` leaves them out
#: (`-m "not slow"`); `make test` runs everything.
SLOW_MODULES = {"test_distributed.py", "test_demo.py"}
SLOW_NAMES = ("distributed", "two_processes", "four_processes")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SLOW_MODULES or any(s in item.name for s in SLOW_NAMES):
            item.add_marker(pytest.mark.slow)
