"""Importing the thin builder / metric entry points as plain classes (the datasets 5.x path)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

#: The repository root when perckit runs from a source checkout (builders/ and metrics/ beside src/).
REPO_ROOT = Path(__file__).resolve().parents[2]

KINDS = ("builders", "metrics")


def scripts_root(kind: str) -> Path:
    """The folder holding ``<kind>/<name>/<name>.py``: the installed data package ``perckit.<kind>`` (a wheel
    ships the scripts there, see setup.py), else the source checkout's ``<kind>/`` folder (an older editable
    install, or ``src/`` on ``sys.path``)."""
    from .errors import OptionError

    if kind not in KINDS:
        raise OptionError(f"script kind {kind!r}: expected one of {list(KINDS)}")
    try:
        spec = importlib.util.find_spec(f"perckit.{kind}")
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        if Path(location).is_dir():
            return Path(location)
    return REPO_ROOT / kind


def script_path(kind: str, name: str) -> Path:
    """``<kind>/<name>/<name>.py`` (``builders`` or ``metrics``), installed with the package or in the checkout."""
    from .errors import InputNotFoundError

    root = scripts_root(kind)
    path = root / name / f"{name}.py"
    if not path.is_file():
        known = sorted(p.name for p in root.iterdir() if (p / f"{p.name}.py").is_file()) if root.is_dir() else []
        raise InputNotFoundError(f"{kind} script {name!r} not found under {str(root)!r}: expected one of {known}")
    return path


def import_script(path: str | Path) -> ModuleType:
    """Import a builder or metric script by path, registered in ``sys.modules`` (datasets re-imports it by name)."""
    path = Path(path).resolve()
    if path.is_dir():
        path = path / f"{path.name}.py"
    name = f"perckit_script_{path.parent.parent.name}_{path.stem}"
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"cannot import {str(path)!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def builder_class(name: str):
    """The builder class of ``builders/<name>/<name>.py`` (e.g. ``builder_class("r4d_bench")``)."""
    from datasets import DatasetBuilder

    module = import_script(script_path("builders", name))
    classes = [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, DatasetBuilder) and v.__module__ == module.__name__]
    if len(classes) != 1:
        raise ValueError(f"builders/{name}/{name}.py: expected exactly one builder class, found {[c.__name__ for c in classes]}")
    return classes[0]


def build_split(name: str, config: str, data_dir, cache_dir=None, split: str = "test", **kwargs):
    """One split of ``builders/<name>``: ``load_dataset(script)`` on datasets 3.6, the plain class on 4.x / 5.x."""
    import datasets

    cache = None if cache_dir is None else str(cache_dir)
    if int(datasets.__version__.split(".")[0]) < 4:
        return datasets.load_dataset(
            str(script_path("builders", name).parent), config, data_dir=str(data_dir), cache_dir=cache,
            trust_remote_code=True, **kwargs,
        )[split]
    builder = builder_class(name)(config_name=config, data_dir=str(data_dir), cache_dir=cache, **kwargs)
    builder.download_and_prepare()
    return builder.as_dataset(split)
