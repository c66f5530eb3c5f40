"""The fuzz tests' harness (tests/test_benchmarks_fuzz.py, tests/test_m4seg_fuzz.py): settings, the documented-only
guard and its record of which branch each example took, and the strategies the two modules share.

The contract (docs/errors.md): an input either parses, or raises one of the documented perckit errors (a
:class:`perckit.errors.PerckitError` with a message); any other exception fails the test, and every call runs
under :func:`helpers.harness.deadline`, so a Python-level hang fails too.

A fuzz test that never reaches its parser's accepting branch tests only the refusals, and the checks it
makes on a parsed result never run. So :func:`documented_only` records every outcome, per function, as a
``hypothesis.event`` (``pytest --hypothesis-show-statistics`` prints the counts) and in a tally that
:func:`reaches` reads once all the examples of a test have run: the test fails unless each named function
accepted an input (with a non-empty result) and refused one. The strategies build valid inputs and then
mutate them (:func:`mutated`) next to the purely random ones, so both branches are exercised with many
inputs; every test also carries an explicit valid and an invalid ``@example``, so the check cannot flake.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import numpy as np
from helpers.harness import deadline
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from perckit import rle as R
from perckit.errors import PerckitError

EXAMPLES = int(os.environ.get("PERCKIT_FUZZ_EXAMPLES", 100))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FUZZ_SLOW = settings(max_examples=max(1, EXAMPLES // 2), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SECONDS = 20  # per call: generous, a real hang is infinite

# ---------------------------------------------------------------- the guard and its record

#: (function name, "accepted" | "empty" | "refused") -> examples, for the property test that is running.
_OUTCOMES: Counter[tuple[str, str]] = Counter()


def _name(fn: Callable) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def record(name: str, outcome: str, detail: str = "") -> None:
    """Note that an example reached ``outcome`` ("accepted", "empty" or "refused") of the function ``name``: a
    ``hypothesis.event`` and the tally :func:`reaches` checks. :func:`documented_only` calls it; a property test
    with its own ``try`` / ``except`` calls it directly."""
    _OUTCOMES[(name, outcome)] += 1
    if currently_in_test_context():
        event(f"{name}: {outcome}{f' ({detail})' if detail else ''}")


def _is_empty(out: Any) -> bool:
    return isinstance(out, (list, tuple, dict, str, bytes)) and len(out) == 0


def documented_only(fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)`` under a deadline, or ``None`` when it raises a documented perckit error (whose
    message must not be empty); anything else propagates. The outcome is recorded for :func:`reaches`:
    "accepted" (a non-empty result), "empty" (an empty list, dict or string) or "refused" (a PerckitError)."""
    name = _name(fn)
    with deadline(SECONDS):
        try:
            out = fn(*args, **kwargs)
        except PerckitError as e:
            assert str(e), "a documented error with an empty message"
            record(name, "refused", type(e).__name__)
            return None
    record(name, "empty" if _is_empty(out) else "accepted")
    return out


def reaches(*functions: str, refused: bool = True):
    """Decorator for a property test, above its ``@given``: once all its examples have run, every function
    named (as :func:`documented_only` or :func:`record` saw it) must have accepted an input at least once (and,
    unless ``refused=False``, refused one). Fails with the outcome counts otherwise."""

    def wrap(test):
        @functools.wraps(test)
        def run(*args, **kwargs):
            _OUTCOMES.clear()
            test(*args, **kwargs)
            wanted = ("accepted", "refused") if refused else ("accepted",)
            missing = [f"{f}: {o}" for f in functions for o in wanted if not _OUTCOMES[(f, o)]]
            seen = {f"{f}: {o}": n for (f, o), n in sorted(_OUTCOMES.items())}
            assert not missing, f"{test.__name__}: no example reached {missing}; outcomes {seen}"

        return run

    return wrap


# ---------------------------------------------------------------- shared strategies

scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=16,
)
COCO_CHARS = "".join(chr(c) for c in range(48, 112))
counts_text = st.text(alphabet=COCO_CHARS, max_size=24) | st.text(alphabet=COCO_CHARS + "!~ \x00é", max_size=24)
sizes = (
    st.tuples(st.integers(1, 40), st.integers(1, 40)).map(list)
    | st.lists(st.integers(-3, 2**33), max_size=3)
    | st.lists(st.floats(allow_nan=True), min_size=2, max_size=2)
    | json_values
)
rle_counts = counts_text | st.binary(max_size=24) | st.lists(st.integers(-3, 2000), max_size=8) | json_values
rle_dicts = st.fixed_dictionaries({"size": sizes, "counts": rle_counts}) | st.dictionaries(st.sampled_from(["size", "counts", "other"]), json_values, max_size=3)
json_rle_dicts = st.fixed_dictionaries({"size": sizes, "counts": counts_text | st.lists(st.integers(-3, 2000), max_size=8) | json_values})
polygons = st.lists(st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**40), 2**40), max_size=10), max_size=3)
random_bytes = st.binary(max_size=300)

#: Replacement values for :func:`mutated`: boundary integers next to arbitrary JSON.
edit_values = st.integers(-2, 10) | st.sampled_from(["", "1", "x"]) | st.builds(list) | st.builds(dict) | json_values

# Valid by construction: binary masks and their RLEs (compressed, with str counts).
binary_masks = st.integers(1, 8).flatmap(lambda h: st.integers(1, 8).flatmap(
    lambda w: st.lists(st.booleans(), min_size=h * w, max_size=h * w).map(lambda bits: np.array(bits, dtype=bool).reshape(h, w))))
valid_rles = binary_masks.map(R.encode)


def uncompressed(rle: dict) -> dict:
    """``rle`` with its counts as the list of run lengths (an uncompressed COCO RLE)."""
    return {"size": list(rle["size"]), "counts": [int(x) for x in R.decode_counts(rle["counts"])]}


#: The valid RLE in each of its accepted spellings: str counts, bytes counts, uncompressed list counts.
rle_spellings = valid_rles.flatmap(lambda r: st.sampled_from([
    r, {"size": r["size"], "counts": r["counts"].encode()}, uncompressed(r),
]))


def _edit(draw, value: Any, values: st.SearchStrategy) -> Any:
    """One random edit somewhere in ``value`` (changed in place where it is a container; returns the result)."""
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(list(value)))
        value[key] = _edit(draw, value[key], values)
        return value
    if isinstance(value, list) and value and draw(st.booleans()):
        i = draw(st.integers(0, len(value) - 1))
        value[i] = _edit(draw, value[i], values)
        return value
    op = draw(st.sampled_from(["replace", "drop", "add"]))
    if op == "drop" and isinstance(value, dict) and value:
        del value[draw(st.sampled_from(list(value)))]
    elif op == "drop" and isinstance(value, list) and value:
        del value[draw(st.integers(0, len(value) - 1))]
    elif op == "add" and isinstance(value, dict):
        value[draw(st.text(max_size=6))] = copy.deepcopy(draw(values))
    elif op == "add" and isinstance(value, list):
        value.append(copy.deepcopy(draw(values)))
    else:
        return copy.deepcopy(draw(values))  # a copy: a later edit must not change a value the strategy shares
    return value


@st.composite
def mutated(draw, valid: st.SearchStrategy, max_edits: int = 2, values: st.SearchStrategy = edit_values) -> Any:
    """A value of the strategy ``valid`` (a valid input: JSON-like dicts and lists), deep-copied, with 0 to
    ``max_edits`` random edits: a value anywhere in it replaced by one of ``values``, a key or an item removed,
    or one added. Unedited draws exercise the accepting branch, edited ones the checks next to it."""
    value = copy.deepcopy(draw(valid))
    for _ in range(draw(st.integers(0, max_edits))):
        value = _edit(draw, value, values)
    return value


# ---------------------------------------------------------------- checks and files


def exercise(out: dict) -> None:
    """A validated RLE must be safe for every pycocotools-backed helper."""
    assert set(out) == {"size", "counts"} and isinstance(out["counts"], str)
    a = R.area(out)
    assert 0 <= a <= out["size"][0] * out["size"][1]
    inter, union = R.intersection_union(out, out)
    assert inter == union == a
    R.to_bbox(out)
    R.union([out, out])
    if out["size"][0] * out["size"][1] <= 4096:
        assert int(R.decode(out).sum()) == a


@contextlib.contextmanager
def folder():
    """A fresh temporary folder (a ``Path``), removed afterwards: one per example (no function-scoped fixture)."""
    with tempfile.TemporaryDirectory(prefix="perckit-fuzz-") as d:
        yield Path(d)
