"""The benchmark descriptor (perckit.hf.benchmark) agrees with the code it describes, and `perckit list` shows it."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

from helpers.common import REPO

from perckit.hf import benchmark as benchmarks
from perckit.hf.entrypoints import builder_class, configs, script_path
from perckit.samples import write_release
from perckit.errors import InputNotFoundError, OptionError

from helpers.digests import table_digest
from helpers.fake_hub import fake_snapshot_download


@pytest.mark.parametrize("name", benchmarks.NAMES)
def test_descriptor_matches_the_builder_and_the_metric_scripts(name):
    b = benchmarks.get(name)
    cls = builder_class(name)
    assert cls.BUILDER_CONFIG_CLASS().hub_repo_id == b.hub_repo
    assert configs(name)[0] == cls.DEFAULT_CONFIG_NAME and set(configs(name)) == {c.name for c in cls.BUILDER_CONFIGS}
    assert b.metrics, f"{name} has no metric"
    for m in b.metrics:
        assert script_path("metrics", m.name).is_file()
        assert callable(m.projector(m.configs[0] if m.configs else None))


@pytest.mark.parametrize("name", benchmarks.NAMES)
def test_the_descriptor_builder_is_the_class_the_script_subclasses(name, tmp_path, monkeypatch):
    """builder_class comes from the package (no script imported by path); the script's one builder class
    subclasses it; the core class keeps the builder name (cache folder, info.builder_name) datasets gave the
    script class perckit imported before, and its config holds its benchmark's descriptor."""
    b = benchmarks.get(name)
    cls = builder_class(name)
    assert cls.__module__ == f"perckit.{name}.builder"
    assert cls.BUILDER_CONFIG_CLASS.BENCHMARK is b and cls.benchmark() is b
    # A copy of the script: instantiating a builder whose module was loaded by path makes datasets lock the
    # script's grandparent folder (``builders.lock`` beside ``builders/``), which must not land in the checkout.
    copy = tmp_path / "builders" / name / f"{name}.py"
    copy.parent.mkdir(parents=True)
    shutil.copyfile(script_path("builders", name), copy)
    spec = importlib.util.spec_from_file_location(f"test_script_{name}", copy)
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, script)  # datasets looks a builder's module up by name
    spec.loader.exec_module(script)
    ours = [v for v in vars(script).values() if isinstance(v, type) and issubclass(v, datasets.DatasetBuilder)
            and v.__module__ == script.__name__]
    assert len(ours) == 1 and issubclass(ours[0], cls) and ours[0].BUILDER_CONFIG_CLASS is cls.BUILDER_CONFIG_CLASS
    builder = cls(config_name=cls.DEFAULT_CONFIG_NAME, data_dir=str(tmp_path / "absent"), cache_dir=str(tmp_path / "c"))
    assert builder.name == builder.dataset_name == builder.info.builder_name == f"perckit_script_builders_{name}"
    assert builder._cache_dir.startswith(str(tmp_path / "c" / f"perckit_script_builders_{name}" / cls.DEFAULT_CONFIG_NAME))
    sub = ours[0](config_name=cls.DEFAULT_CONFIG_NAME, data_dir=str(tmp_path / "absent"), cache_dir=str(tmp_path / "c"))
    assert sub.name == f"test_script_{name}"  # a subclass keeps datasets' own naming (the script's module)
    with pytest.raises(InputNotFoundError, match=r"no builder for benchmark 'nope': expected one of \['m4seg'"):
        builder_class("nope")


def _rows(name: str, ds: datasets.Dataset, root) -> str:
    """The table digest; Syn4D's challenge rows name their video by its path under the release root: those
    paths are compared relative to it."""
    if name == "syn4d" and "video" in ds.column_names:
        videos = [None if v is None else Path(v["path"]).relative_to(root).as_posix() for v in ds.data.column("video").to_pylist()]
        return f"{table_digest(ds.remove_columns('video'))} {videos}"
    return table_digest(ds)


@pytest.mark.parametrize("name", benchmarks.NAMES)
def test_sample_release_builds_and_the_hub_patterns_fetch_what_the_builder_reads(name, tmp_path, monkeypatch):
    """For every config: the descriptor's sample_release writes a release the descriptor's builder reads, and a
    build from the Hub (a stand-in snapshot_download holding that release, fetching only the descriptor's
    hub_patterns) gives the same rows as the build from data_dir."""
    from perckit.hf import hub

    b = benchmarks.get(name)
    release = tmp_path / "hub_repo"
    fx = write_release(name, release)
    assert fx.files and all((release / f).is_file() for f in fx.files)
    calls: list = []
    monkeypatch.setattr(hub, "snapshot_download", fake_snapshot_download(release, calls))
    cls = builder_class(name)
    for config in configs(name):
        local = cls(config_name=config, data_dir=str(release), cache_dir=str(tmp_path / "local"))
        local.download_and_prepare()
        before = len(calls)
        remote = cls(config_name=config, cache_dir=str(tmp_path / "hub"))
        remote.download_and_prepare()
        asked = calls[before]
        assert asked["repo_id"] == b.hub_repo and asked["repo_type"] == "dataset"
        assert asked["allow_patterns"] == list(cls.hub_patterns(cls.BUILDER_CONFIG_CLASS(name=config)))
        assert set(remote.info.splits) == set(local.info.splits) == set(b.splits), config
        snapshot = tmp_path / f"snapshot_{len(calls)}"
        for split in b.splits:
            assert local.info.splits[split].num_examples > 0, (config, split)
            assert _rows(name, remote.as_dataset(split), snapshot) == _rows(name, local.as_dataset(split), release), (config, split)


def test_unknown_names_are_option_errors():
    with pytest.raises(OptionError, match=r"unknown benchmark 'nope': expected one of \['m4seg'"):
        benchmarks.get("nope")
    with pytest.raises(OptionError, match=r"unknown metric 'nope': expected one of \['av_edit_quality', 'av_reasoning'"):
        benchmarks.metric("nope")
    with pytest.raises(OptionError, match="metric 'syn4d' needs --config, one of"):
        benchmarks.metric("syn4d")[1].projector(None)


def test_perckit_list_shows_every_benchmark_config_split_and_metric(capsys):
    from perckit.__main__ import main

    assert main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["benchmark"] for r in rows] == list(benchmarks.NAMES)
    by = {r["benchmark"]: r for r in rows}
    assert by["refcoco_m"]["splits"] == ["validation"] and by["m4seg"]["splits"] == ["train", "test"]
    assert by["r4d_bench"]["configs"] == ["all_queries", "subset_36", "frames"]
    assert {m["metric"] for m in by["r4d_bench"]["metrics"]} == {"mask_temporal", "track_id"}
    assert by["syn4d"]["metrics"][0]["configs"] == ["tracking", "depth", "pose"]
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    assert "configs: all_queries (default), subset_36, frames" in text and "metric:  refer_iou: scores expressions" in text


def test_each_benchmark_package_exports_its_helpers_lazily():
    """perckit.<benchmark> names its public helpers in __all__ and dir(); each resolves to a function of the
    package; importing the package alone imports no datasets (the helpers load their module on first use)."""
    import importlib

    for name in benchmarks.NAMES:
        package = importlib.import_module(f"perckit.{name}")
        assert package.__all__ and set(package.__all__) <= set(dir(package)), name
        for attr in package.__all__:
            fn = getattr(package, attr)
            assert callable(fn) and fn.__module__.startswith(f"perckit.{name}."), (name, attr)
    code = "import sys, perckit.r4d_bench, perckit.syn4d, perckit.refcoco_m, perckit.m4seg, perckit.reason_av_edit; print('datasets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.stdout.strip() == "False", out.stderr[-2000:]
