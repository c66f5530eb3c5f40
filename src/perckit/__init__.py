"""perckit: typed Hugging Face datasets and evaluate metrics for perception benchmarks.

``perckit.load_dataset(name, config, data_dir=...)`` and ``perckit.load_metric(name)`` work the same on
datasets 3.6 and 5.x, from a checkout or an installed wheel; see :mod:`perckit.api`.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_API = ("load_dataset", "load_metric", "builder_path", "metric_path")
__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    """The API functions, imported on first use (``import perckit`` stays free of datasets and evaluate)."""
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'perckit' has no attribute {name!r}")
