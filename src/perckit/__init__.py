"""perckit: typed Hugging Face datasets and evaluate metrics for perception benchmarks.

``perckit.load_dataset(name, config, data_dir=...)`` and ``perckit.load_metric(name)`` work the same on
datasets 3.6 and 5.x, from a checkout or an installed wheel; see :mod:`perckit.hf.api`. ``perckit.accumulator(name,
config, **options)`` scores batch by batch inside a loop, and ``perckit.merge_files(paths)`` merges the states of
separate jobs; see :mod:`perckit.hf.accumulate` (and :mod:`perckit.torch` for ``torch.distributed``).
"""

__version__ = "0.1.0"

_API = ("load_dataset", "load_metric", "builder_path", "metric_path")
_ACCUMULATE = ("accumulator", "merge_files", "load_state")
__all__ = ["__version__", *_API, *_ACCUMULATE]


def __getattr__(name: str) -> object:
    """The API functions, imported on first use (``import perckit`` stays free of datasets and evaluate)."""
    if name in _API:
        from .hf import api

        return getattr(api, name)
    if name in _ACCUMULATE:
        from .hf import accumulate

        return getattr(accumulate, name)
    raise AttributeError(f"module 'perckit' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names with the lazy ones (tab completion lists them): the public ones are :data:`__all__` (and the
    subpackages imported so far)."""
    return sorted(set(globals()) | set(__all__))
