"""The pytest fixtures, and the offline environment every test runs in: caches go to a private temp folder and the
Hub is offline, so tests never touch the network. Helpers that are not fixtures live in tests/helpers/ (see
tests/README.md); test modules import them from there, never from this file or from another test module."""

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

import pytest  # noqa: E402
from helpers.common import REPO, SYN4D_PARITY  # noqa: E402
from hypothesis import settings as _hypothesis  # noqa: E402

# Property tests draw the same examples on every run (a seed from each test's own code), so `make test` and CI
# pass or fail alike; PERCKIT_HYPOTHESIS=explore draws new ones each run, to look for more.
_hypothesis.register_profile("perckit", derandomize=True)
_hypothesis.register_profile("explore", derandomize=False)
_hypothesis.load_profile(os.environ.get("PERCKIT_HYPOTHESIS", "perckit"))

from perckit.hf.entrypoints import build_split  # noqa: E402


def _checkout_files() -> set[str]:
    """Files at the checkout's top level and in builders/ and metrics/ (where a stray lock or cache would land)."""
    return {
        str(p.relative_to(REPO)) for d in (REPO, REPO / "builders", REPO / "metrics") if d.is_dir() for p in d.iterdir()
        if p.name not in _TOOL_FOLDERS and not p.name.endswith(".egg-info") and not p.name.startswith(".venv")
    }


#: What pytest, hypothesis, Python and the wheel build keep in a checkout by design.
_TOOL_FOLDERS = frozenset({".hypothesis", ".pytest_cache", "__pycache__", "build"})


@pytest.fixture(scope="session", autouse=True)
def checkout_left_clean():
    """The suite writes nothing into the checkout (a builder instantiated from a script loaded by path makes
    datasets write ``builders.lock`` beside ``builders/``: tests load copies of the scripts instead)."""
    before = _checkout_files()
    yield
    new = sorted(_checkout_files() - before)
    if new:
        pytest.fail(f"the test run wrote into the checkout: {new}", pytrace=False)


@pytest.fixture(scope="session")
def r4d_release(tmp_path_factory):
    from perckit.samples import write_release

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


@pytest.fixture(scope="session")
def syn4d_release(tmp_path_factory):
    from perckit.samples import write_release

    return write_release("syn4d", tmp_path_factory.mktemp("syn4d_release"))


@pytest.fixture(scope="session")
def syn4d_parity_rows(tmp_path_factory):
    """The parity fixture built with the ``challenge`` config (tracking + depth + pose ground truth)."""
    from perckit.syn4d.features import to_numpy_row

    ds = build_split("syn4d", "challenge", SYN4D_PARITY, tmp_path_factory.mktemp("cache"))
    return [to_numpy_row(r) for r in ds]


@pytest.fixture(scope="session")
def refcoco_release(tmp_path_factory):
    from perckit.samples import write_release

    return write_release("refcoco_m", tmp_path_factory.mktemp("refcoco_release"))


@pytest.fixture(scope="session")
def rcm_release(refcoco_release):
    """The RefCOCO-M sample release (the name the RefCOCO-M modules use)."""
    return refcoco_release


@pytest.fixture(scope="session")
def rcm_expressions(rcm_release, tmp_path_factory):
    """The ``expressions`` config of the RefCOCO-M sample release, built once."""
    return build_split("refcoco_m", "expressions", rcm_release.root, tmp_path_factory.mktemp("cache"), split="validation")


@pytest.fixture(scope="module")
def refer_metric():
    import evaluate

    return evaluate.load(str(REPO / "metrics" / "refer_iou"))


@pytest.fixture(scope="session")
def reason_av_edit_release(tmp_path_factory):
    from perckit.samples import write_release

    return write_release("reason_av_edit", tmp_path_factory.mktemp("reason_av_edit_release"))


# ---------------------------------------------------------------- M4Seg (module-scoped: each module builds its own copy, cheaply)


@pytest.fixture(scope="module")
def m4_release(tmp_path_factory):
    """The synthetic M4Seg release (with its images under a sibling folder)."""
    from perckit.samples import write_release

    base = tmp_path_factory.mktemp("m4seg")
    return write_release("m4seg", base / "release", image_root=base / "images")


@pytest.fixture(scope="module")
def m4_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("m4seg_cache")


@pytest.fixture(scope="module")
def m4_parquet(m4_release, m4_cache):
    """Both splits of ``m4_release`` read from the Parquet shards."""
    return {s: build_split("m4seg", "default", m4_release.root, m4_cache, split=s, source="parquet") for s in ("train", "test")}


@pytest.fixture(scope="module")
def m4_native(m4_release, m4_cache):
    """Both splits of ``m4_release`` read from the native JSON.gz files."""
    return {s: build_split("m4seg", "default", m4_release.root, m4_cache, split=s, source="native") for s in ("train", "test")}


@pytest.fixture(scope="module")
def m4_small(tmp_path_factory):
    """A small release whose test split is the two hand-written examples of tests/helpers/m4seg.py."""
    from helpers.m4seg import write_small_release

    return write_small_release(tmp_path_factory.mktemp("m4_small") / "release")


#: Tests that start several interpreters, run the whole demo or build large inputs: `make test-fast` leaves them out
#: (`-m "not slow"`); `make test` runs everything. By module: the four-process runs of every metric, the demo, the
#: Parquet guard (its fixture writes 96 MiB values, 20-30 s) and the package builds (pip, setuptools). By name: every
#: distributed run (two or four evaluate processes), and the M4Seg native examples of 70 MiB (a 27 s build). Others
#: carry @pytest.mark.slow themselves (the cross-line comparison, convert killed at every step).
SLOW_MODULES = {"test_benchmarks_distributed.py", "test_core_demo.py", "test_core_parquet_guard.py", "test_core_install.py"}
SLOW_NAMES = ("distributed", "two_processes", "four_processes", "of-70-mib")


#: Tests whose outcome cannot depend on the datasets line: the resize rules (PIL / cv2 arithmetic on every length
#: pair), the cross-line comparison (it runs both lines itself) and the package builds (test_core_install.py's
#: test_build_*). `make test` runs its two suites side by side with PERCKIT_SUITE set to ds3 / ds5; the 5.x suite then
#: leaves these to the 3.6 suite (`make test-ds5` runs them).
LINE_INDEPENDENT_MODULES = {"test_core_resize_rules.py"}
LINE_INDEPENDENT_NAMES = ("test_rows_are_identical_on_both_datasets_lines", "test_build_")


def pytest_collection_modifyitems(config, items):
    elsewhere = pytest.mark.skip(reason="independent of the datasets line: make test runs it in the datasets 3.6 suite")
    for item in items:
        if item.path.name in SLOW_MODULES or any(s in item.name for s in SLOW_NAMES):
            item.add_marker(pytest.mark.slow)
        independent = item.path.name in LINE_INDEPENDENT_MODULES or item.name.startswith(LINE_INDEPENDENT_NAMES)
        if independent and os.environ.get("PERCKIT_SUITE") == "ds5":
            item.add_marker(elsewhere)
