"""Order-independent reductions shared by every metric.

:func:`fmean` is the one mean of the project: an exactly rounded sum (``math.fsum``) divided by the
count, so the result does not depend on the order of the values (evaluate's distributed mode gathers
the shards in process order; a merge of accumulators adds them in any order).
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def fmean(values: Iterable[float], n: int | None = None) -> float | None:
    """Mean with an exactly rounded sum; ``None`` for no values.

    ``n`` divides by a given count instead of the number of values (a mean over a larger population
    whose other members count 0); it must be positive.
    """
    vals = [float(v) for v in values]
    if n is None:
        n = len(vals)
    elif n <= 0:
        raise ValueError(f"fmean: expected a positive count, got {n!r}")
    return math.fsum(vals) / n if n else None
