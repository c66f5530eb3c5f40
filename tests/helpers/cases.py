"""Tables of cases run as one property test each, and the record of which path each case of a parity test took.

:func:`every_case` runs ``check(case)`` over a table computed when the test runs (not while the suite is
collected: a table derived from the metrics' declared schemas loads the metric modules), as a hypothesis test
over ``st.sampled_from(cases)``: derandomised (the same order on every run), no example database, the cases that
matter most first as explicit ``@example`` s. It records the case of every example and fails unless every case of
the table ran, so one test id covers a table of hundreds of cases without leaving any out, and a failure names
the failing case (shrunk to the first one of the table that fails).

:class:`Paths` is for a parity test between two implementations: each case notes the path it took, and
:meth:`Paths.check` fails unless every named path was taken at least once (a fast path that refuses every case
and hands it to the other one fails, instead of passing by comparing the other path with itself).
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Hashable, Sequence

from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st


def every_case(cases: Sequence, check: Callable[[object], None], *, key: Callable[[object], Hashable] = repr,
               first: Sequence = ()) -> None:
    """``check(case)`` for every case of ``cases`` (a hypothesis test over them), the ``first`` cases as explicit
    examples; fails unless every case ran. ``key`` names a case (distinct cases, distinct keys)."""
    assert cases, "an empty table of cases: nothing would be checked"
    names = [key(c) for c in cases]
    assert len(set(names)) == len(names), f"cases with the same key: {sorted(k for k, n in Counter(names).items() if n > 1)}"
    missing_first = [key(c) for c in first if key(c) not in set(names)]
    assert not missing_first, f"explicit examples that are not cases of the table: {missing_first}"
    ran: set = set()

    def run(case):
        ran.add(key(case))
        check(case)

    test = given(st.sampled_from(list(cases)))(run)
    for case in reversed(list(first)):
        test = example(case)(test)
    # the search space is the table itself: hypothesis stops once every index of it has been drawn
    test = settings(max_examples=4 * len(cases) + 10, derandomize=True, database=None, deadline=None,
                    phases=(Phase.explicit, Phase.generate, Phase.shrink),
                    suppress_health_check=list(HealthCheck))(test)
    test()
    left = [n for n in names if n not in ran]
    assert not left, f"{len(left)} of {len(names)} cases never ran: {left[:10]}"


class Paths:
    """Which path every case of a parity test took: ``note(case, path)`` per case, then ``check(*paths)``."""

    def __init__(self) -> None:
        self.taken: dict[Hashable, str] = {}

    def note(self, case: Hashable, path: str) -> None:
        self.taken[case] = path

    def check(self, *paths: str) -> None:
        """Every path of ``paths`` was taken by at least one case (and no case took another path)."""
        counts = Counter(self.taken.values())
        missing = [p for p in paths if not counts[p]]
        other = sorted(set(counts) - set(paths))
        assert not missing and not other, f"paths never taken: {missing}; unknown paths: {other}; taken: {dict(counts)}"
