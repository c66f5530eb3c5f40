"""Shared fixtures. Caches go to a private temp folder and the Hub is offline: tests never touch the network."""

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
