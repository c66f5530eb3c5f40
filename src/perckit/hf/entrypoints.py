"""Where the builder and metric scripts are, and the builder class of each benchmark (the datasets 5.x path).

The scripts (``builders/<name>/<name>.py``, ``metrics/<name>/<name>.py``) are for ``datasets.load_dataset`` on
datasets 3.6 and ``evaluate.load``; the core never imports them: :func:`builder_class` imports the benchmark's
builder class from the package.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputNotFoundError, OptionError

KINDS = ("builders", "metrics")


def scripts_root(kind: str) -> Path:
    """The folder holding ``<kind>/<name>/<name>.py``: the data package ``perckit.<kind>`` (a wheel ships the
    scripts there; in a checkout it is the link ``src/perckit/<kind>`` to the top-level ``<kind>/``, see setup.py)."""
    if kind not in KINDS:
        raise OptionError(f"script kind {kind!r}: expected one of {list(KINDS)}")
    return Path(__file__).parents[1] / kind


def script_path(kind: str, name: str) -> Path:
    """``<kind>/<name>/<name>.py`` (``builders`` or ``metrics``), installed with the package or in the checkout."""
    root = scripts_root(kind)
    path = root / name / f"{name}.py"
    if not path.is_file():
        known = sorted(p.name for p in root.iterdir() if (p / f"{p.name}.py").is_file()) if root.is_dir() else []
        raise InputNotFoundError(f"{kind} script {name!r} not found under {str(root)!r}: expected one of {known}")
    return path


def builder_class(name: str) -> type:
    """The builder class of benchmark ``name`` (e.g. ``builder_class("r4d_bench")``; imports ``datasets``), the
    class ``builders/<name>/<name>.py`` subclasses, imported from the package (no source checkout needed).
    An unknown name is an :class:`~perckit.errors.InputNotFoundError` listing the known ones."""
    from .benchmark import NAMES

    if name not in NAMES:
        raise InputNotFoundError(f"no builder for benchmark {name!r}: expected one of {sorted(NAMES)}")
    if name == "r4d_bench":
        from ..r4d_bench.builder import R4DBenchBuilder as cls
    elif name == "syn4d":
        from ..syn4d.builder import Syn4DBuilder as cls
    elif name == "refcoco_m":
        from ..refcoco_m.builder import RefCocoMBuilder as cls
    elif name == "m4seg":
        from ..m4seg.builder import M4SegBuilder as cls
    else:
        from ..reason_av_edit.builder import ReasonAVEditBuilder as cls
    return cls


def configs(name: str) -> list[str]:
    """The config names of benchmark ``name``'s builder, default first."""
    cls = builder_class(name)
    return sorted((c.name for c in cls.BUILDER_CONFIGS), key=lambda n: n != cls.DEFAULT_CONFIG_NAME)


def listing() -> list[dict]:
    """What ``perckit list`` prints: every benchmark with its configs, splits and metrics (with their configs)."""
    from .benchmark import BENCHMARKS

    return [
        {"benchmark": b.name, "name": b.pretty_name, "configs": configs(b.name), "splits": list(b.splits), "hub_repo": b.hub_repo,
         "metrics": [{"metric": m.name, "configs": list(m.configs or []), "scores": m.scores} for m in b.metrics]}
        for b in BENCHMARKS.values()
    ]


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
