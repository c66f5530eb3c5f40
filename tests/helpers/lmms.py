"""A task folder written by ``perckit.lmms_eval.write_task`` loaded the way lmms-eval loads one, without lmms-eval:
``load_task`` reads the YAML as ``lmms_eval.utils.load_yaml_config`` does (``!function module.attr`` is ``attr`` of the
file ``module.py`` beside the YAML, imported by its path), and ``task_docs`` loads the test split as
``ConfigurableTask.download`` does (``datasets.load_dataset(path=dataset_path, name=dataset_name, **dataset_kwargs)``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import datasets
import yaml


def load_task(path: Path) -> dict:
    class Loader(yaml.SafeLoader):
        pass

    def function(loader: yaml.SafeLoader, node: yaml.Node) -> object:
        *module, attr = loader.construct_scalar(node).split(".")
        name = ".".join(module)
        spec = importlib.util.spec_from_file_location(name, Path(path).parent / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return getattr(mod, attr)

    Loader.add_constructor("!function", function)
    return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=Loader)


def task_docs(path: Path, cache_dir: Path) -> datasets.Dataset:
    config = load_task(path)
    ds = datasets.load_dataset(config["dataset_path"], name=config.get("dataset_name"), cache_dir=str(cache_dir),
                               **(config.get("dataset_kwargs") or {}))
    return ds[config["test_split"]]
