"""Where the builder and metric scripts are, and the builder class of each benchmark (the datasets 5.x path).

The scripts (``builders/<name>/<name>.py``, ``metrics/<name>/<name>.py``) are for ``datasets.load_dataset`` on
datasets 3.6 and ``evaluate.load``; the core never imports them: :func:`builder_class` comes from the benchmark's
descriptor.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

#: The repository root when perckit runs from a source checkout (builders/ and metrics/ beside src/).
REPO_ROOT = Path(__file__).resolve().parents[3]

KINDS = ("builders", "metrics")


def scripts_root(kind: str) -> Path:
    """The folder holding ``<kind>/<name>/<name>.py``: the installed data package ``perckit.<kind>`` (a wheel
    ships the scripts there, see setup.py), else the source checkout's ``<kind>/`` folder (an older editable
    install, or ``src/`` on ``sys.path``)."""
    from ..errors import OptionError

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
    from ..errors import InputNotFoundError

    root = scripts_root(kind)
    path = root / name / f"{name}.py"
    if not path.is_file():
        known = sorted(p.name for p in root.iterdir() if (p / f"{p.name}.py").is_file()) if root.is_dir() else []
        raise InputNotFoundError(f"{kind} script {name!r} not found under {str(root)!r}: expected one of {known}")
    return path


def builder_class(name: str) -> type:
    """The builder class of benchmark ``name`` (e.g. ``builder_class("r4d_bench")``, :func:`perckit.hf.benchmark.builder_class`),
    the class ``builders/<name>/<name>.py`` subclasses, imported from the package (no source checkout needed).
    An unknown name is an :class:`~perckit.errors.InputNotFoundError` listing the known ones."""
    from . import benchmark
    from ..errors import InputNotFoundError

    if name not in benchmark.NAMES:
        raise InputNotFoundError(f"no builder for benchmark {name!r}: expected one of {sorted(benchmark.NAMES)}")
    return benchmark.builder_class(name)


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
