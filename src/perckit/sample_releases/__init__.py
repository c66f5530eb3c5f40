"""The sample releases: for each benchmark a small synthetic release that mirrors the real layout (the same
paths, names, schemas and quirks), so that builders, metrics, tests and the demo run without the real data.

``write_release(benchmark, root, seed=0, **scale)`` writes one with the writer the benchmark's descriptor names
(:attr:`perckit.benchmarks.Benchmark.sample_release`); ``perckit.sample_releases.<benchmark>`` holds each
writer. Each writer spells the release layout itself (file and folder names, columns, scene lists) from the
benchmark's spec and never imports the benchmark's readers, so a wrong constant in a reader fails the tests
instead of being written into the sample release too. Output is deterministic for a seed: listings are sorted
and all randomness comes from one seeded ``numpy.random.Generator``. ``perckit.fixtures`` is the former name.
"""

from __future__ import annotations

from .base import write_release

__all__ = ["write_release"]
