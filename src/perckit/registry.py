"""Which metric belongs to which benchmark, and how a builder row becomes that metric's reference.

Kept for existing callers; the records live in each benchmark's descriptor (:mod:`perckit.benchmarks`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping


def reference_projector(metric: str, config: str | None = None) -> Callable[[Mapping], dict]:
    """The function turning a builder row into a reference of ``metric`` (``config`` for multi-config metrics)."""
    from .benchmarks import metric as lookup

    return lookup(metric)[1].projector(config)
