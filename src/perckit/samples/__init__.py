"""The sample releases: for each benchmark a small synthetic release that mirrors the real layout (the same
paths, names, schemas and quirks), so that builders, metrics, tests and the demo run without the real data.

``write_release(benchmark, root, seed=0, **scale)`` writes one with the benchmark's writer (:data:`WRITERS`);
``perckit.samples.<benchmark>`` holds each writer. Each writer spells the release layout itself (file and folder names, columns, scene lists) from the
benchmark's spec and never imports the benchmark's readers, so a wrong constant in a reader fails the tests
instead of being written into the sample release too. Output is deterministic for a seed: listings are sorted
and all randomness comes from one seeded ``numpy.random.Generator``. ``perckit.samples`` is the former name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from . import m4seg, r4d_bench, reason_av_edit, refcoco_m, syn4d

#: Each benchmark's sample-release writer: ``fn(root, seed=0, **scale)`` returning a summary with ``files``.
WRITERS: dict[str, Callable[..., Any]] = {
    "r4d_bench": r4d_bench.write_release, "syn4d": syn4d.write_release, "refcoco_m": refcoco_m.write_release,
    "m4seg": m4seg.write_release, "reason_av_edit": reason_av_edit.write_release,
}


def write_release(benchmark: str, root: str | Path, seed: int = 0, **scale: Any) -> Any:
    """Write the sample release of ``benchmark`` under ``root``; ``scale`` goes to its writer. Returns the writer's
    summary (its ``root``, ``files`` and what the tests need to know of the content). An unknown benchmark is an
    :class:`~perckit.errors.OptionError` listing the known ones."""
    from ..errors import OptionError

    if benchmark not in WRITERS:
        raise OptionError(f"unknown benchmark {benchmark!r}: expected one of {sorted(WRITERS)}")
    return WRITERS[benchmark](root, seed=seed, **scale)


__all__ = ["WRITERS", "write_release"]
