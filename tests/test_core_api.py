"""The one perckit API on both datasets lines (issue 16): perckit.load_dataset / load_metric / builder_path / metric_path."""

from __future__ import annotations

import json
import os
import subprocess

import datasets
import pytest

import perckit
from perckit.hf.entrypoints import build_split
from perckit.errors import InputNotFoundError, OptionError

from helpers.common import DS_MAJOR, REPO, needs_scripts
from helpers.digests import all_digests, table_digest


def test_dir_lists_the_public_api_without_importing_it():
    """dir(perckit) (tab completion) lists __all__, the lazy names included, and no other public name; listing them
    imports neither datasets nor evaluate (issue 33)."""
    import sys

    code = ("import sys, perckit; names = dir(perckit); "
            "print(names); print(perckit.__all__); print(sorted(m for m in ('datasets', 'evaluate', 'perckit.hf') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True).stdout.splitlines()
    names, public = eval(out[0]), eval(out[1])
    assert {"load_dataset", "load_metric", "accumulator", "merge_files", "load_state", "__version__"} <= set(public)
    assert [n for n in names if not n.startswith("_")] == sorted(n for n in public if not n.startswith("_"))
    assert set(public) <= set(names) and out[2] == "[]"
    assert all(callable(getattr(perckit, n)) for n in public if n != "__version__")


def test_script_folders_are_found_with_the_package():
    assert (perckit.builder_path("r4d_bench") / "r4d_bench.py").is_file()
    assert (perckit.builder_path("r4d_bench") / "README.md").is_file()
    assert (perckit.metric_path("mask_temporal") / "mask_temporal.py").is_file()
    with pytest.raises(InputNotFoundError, match=r"builders script 'nope' not found .*expected one of \['m4seg', 'r4d_bench'"):
        perckit.builder_path("nope")


def test_load_dataset_equals_the_builder_path_of_this_line(tmp_path):
    """perckit.load_dataset gives the rows of load_dataset(script) on 3.6 and of the plain class on 5.x."""
    from perckit.samples import write_release

    release = write_release("refcoco_m", tmp_path / "rc").root
    ours = perckit.load_dataset("refcoco_m", "expressions", data_dir=release, split="validation", cache_dir=tmp_path / "c1")
    theirs = build_split("refcoco_m", "expressions", release, tmp_path / "c2", split="validation")
    assert ours.features == theirs.features
    assert table_digest(ours) == table_digest(theirs)
    sliced = perckit.load_dataset("refcoco_m", data_dir=release, split="validation[:3]", cache_dir=tmp_path / "c1")
    assert sliced["expression_id"] == ours["expression_id"][:3]
    streamed = perckit.load_dataset("refcoco_m", data_dir=release, split="validation", streaming=True)
    assert [r["expression_id"] for r in streamed] == ours["expression_id"]


def test_load_dataset_errors_are_perckit_errors(tmp_path):
    with pytest.raises(OptionError, match="unknown config 'nope' of refcoco_m: expected one of"):
        perckit.load_dataset("refcoco_m", "nope", data_dir=tmp_path)
    with pytest.raises(InputNotFoundError, match="expected one of"):
        perckit.load_dataset("no_such_benchmark")


@needs_scripts
def test_builder_path_loads_as_a_script_from_another_folder(tmp_path, monkeypatch):
    from perckit.samples import write_release

    release = write_release("refcoco_m", tmp_path / "rc").root
    monkeypatch.chdir(tmp_path)
    ds = datasets.load_dataset(str(perckit.builder_path("refcoco_m")), "expressions", data_dir=str(release),
                               split="validation", trust_remote_code=True, cache_dir=str(tmp_path / "c"))
    assert ds.num_rows == perckit.load_dataset("refcoco_m", data_dir=release, split="validation", cache_dir=tmp_path / "c2").num_rows


def test_load_metric_gives_the_checkout_module_numbers():
    import evaluate

    ref = {"expression_id": "10:0", "mask": {"size": [2, 3], "counts": "033"}, "category": "dog", "supercategory": "animal"}
    pred = {"expression_id": "10:0", "mask": {"size": [2, 3], "counts": "021O1"}}
    ours = perckit.load_metric("refer_iou").compute(predictions=[pred], references=[ref])
    theirs = evaluate.load(str(REPO / "metrics" / "refer_iou")).compute(predictions=[pred], references=[ref])
    assert ours == theirs and ours["miou"] == 0.5


def test_the_cache_key_changes_with_the_code(monkeypatch, tmp_path):
    from perckit.hf import versioning

    first = versioning.core_fingerprint()
    assert len(first) == 16 and first == versioning.core_fingerprint() != versioning.core_fingerprint("a script")
    versioning._package_digest.cache_clear()
    monkeypatch.setattr(perckit, "__version__", "0.0.0-test")
    try:
        assert versioning.core_fingerprint() != first
    finally:
        versioning._package_digest.cache_clear()


OTHER_VENV = REPO / (".venv" if DS_MAJOR >= 4 else ".venv-ds5")


@pytest.mark.slow
def test_rows_are_identical_on_both_datasets_lines(tmp_path):
    """Every config of every benchmark: the digests of perckit.load_dataset on this line and on the other one."""
    python = OTHER_VENV / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"the other datasets line's environment {str(OTHER_VENV)!r} does not exist (make env env5 creates both)")
    out = tmp_path / "other.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    releases = tmp_path / "releases"
    subprocess.run([str(python), str(REPO / "tests" / "helpers" / "digests.py"), str(out), str(releases), str(tmp_path / "other")],
                   check=True, env=env, cwd=tmp_path, timeout=900)
    other = json.loads(out.read_text())
    ours = all_digests(releases, tmp_path / "ours")
    assert len(ours) >= 10
    from perckit.hf import benchmark as benchmarks

    for b in benchmarks.BENCHMARKS.values():  # the descriptor's splits are the ones the builders make
        assert {k.split("/")[2] for k in ours if k.startswith(b.name + "/")} == set(b.splits), b.name
    assert ours == other, {k: (ours.get(k), other.get(k)) for k in set(ours) | set(other) if ours.get(k) != other.get(k)}
