"""One API on both datasets lines: ``perckit.load_dataset``, ``perckit.load_metric`` and the installed scripts' folders.

datasets 3.6 runs builder scripts (``load_dataset("builders/r4d_bench", trust_remote_code=True)``); datasets 4
and 5 no longer do. :func:`load_dataset` runs the builder class itself on every line, so a user of either gets
the same rows, features and errors; the cache is keyed by a hash of perckit's own code, so an edited (or
upgraded) perckit never reuses rows an older one wrote. :func:`builder_path` / :func:`metric_path` give the
script folders installed with the package, for ``datasets.load_dataset`` / ``evaluate.load`` from any folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import OptionError
from .entrypoints import builder_class, script_path


def builder_path(name: str) -> Path:
    """The folder of the ``name`` builder script installed with perckit (``load_dataset(builder_path("r4d_bench"),
    ..., trust_remote_code=True)`` works under datasets 3.6 from any folder)."""
    return script_path("builders", name).parent


def metric_path(name: str) -> Path:
    """The folder of the ``name`` metric module installed with perckit (``evaluate.load(str(metric_path(name)))``)."""
    return script_path("metrics", name).parent


def load_dataset(name: str, config: str | None = None, *, data_dir: str | os.PathLike | None = None, split: str | None = None,
                 streaming: bool = False, cache_dir: str | os.PathLike | None = None, **options: Any):
    """Build ``config`` of benchmark ``name`` (``"r4d_bench"``, ``"syn4d"``, ``"refcoco_m"``, ``"m4seg"``,
    ``"reason_av_edit"``) and return it like ``datasets.load_dataset``: a ``DatasetDict`` (or the one ``split``,
    slices such as ``"test[:10]"`` included), or an ``IterableDataset(Dict)`` with ``streaming=True``.

    ``options`` are the builder config's options (e.g. ``mask_source="mask_image"``) and ``repo_id`` /
    ``revision`` for the Hub download used when ``data_dir`` is None. Works unchanged on datasets 3.6 and 5.x."""
    cls = builder_class(name)
    names = [c.name for c in cls.BUILDER_CONFIGS]
    config = config or cls.DEFAULT_CONFIG_NAME
    if config not in names:
        raise OptionError(f"unknown config {config!r} of {name}: expected one of {names}")
    builder = cls(config_name=config, data_dir=None if data_dir is None else str(data_dir),
                  cache_dir=None if cache_dir is None else str(cache_dir), **options)
    if streaming:
        return builder.as_streaming_dataset(split=split)
    builder.download_and_prepare()
    return builder.as_dataset(split=split)


def load_metric(name: str, config: str | None = None, **kwargs: Any):
    """The ``evaluate`` module ``name`` (``"mask_temporal"``, ``"track_id"``, ``"refer_iou"``, ``"syn4d"``,
    ``"m4seg"``, ``"av_reasoning"``) loaded from the installed package: the same numbers as
    ``evaluate.load("metrics/<name>")`` in a checkout. ``kwargs`` go to ``evaluate.load`` (``num_process``,
    ``process_id``, ``experiment_id``, ...)."""
    import evaluate

    return evaluate.load(str(metric_path(name)), config, **kwargs)
