"""What the accumulator tests share: the canonical form of a result, rows fed to accumulators in random batches,
and tampered state files.

Every test that compares an accumulator (or a gloo group, or evaluate's distributed mode) with the core function
compares :func:`canonical` texts (or uses :func:`assert_same`, which also compares the Python values); every test
that feeds rows in random batches uses :func:`feed` (or :func:`random_batches` for a plan of its own). One random
source for all of them: a seeded ``random.Random``.

States are untrusted input (issue 28): :func:`tamper` writes a saved state with one edit, :func:`assert_refused`
checks that ``load_state`` and ``merge_files`` both refuse it with the exact message naming the file, the record
and the field; the property tests draw :func:`tampered_states` (valid saved states with hostile edits in their
records, their waiting rows or anywhere) and run :func:`load_tampered`: a clean load whose ``compute()`` stays in
the metric's ranges (:func:`assert_ranges`), or a perckit error naming the file.
"""

from __future__ import annotations

import copy
import json
import math
import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: row lists whose order follows the input (the batches, the ranks, the shards): compared sorted, at any depth
#: (Syn4D's ``coverage.sequences`` too)
ROW_LISTS = ("per_query", "per_example", "per_sample", "sequences", "failures")


def _row_key(row: Any) -> str:
    """The order of rows in a row list: their JSON text (keys sorted)."""
    return json.dumps(row, sort_keys=True, default=repr)


def _sort_rows(x: Any) -> Any:
    """``x`` with every list under a :data:`ROW_LISTS` key sorted by :func:`_row_key`, at any depth."""
    if isinstance(x, dict):
        return {k: sorted((_sort_rows(r) for r in v), key=_row_key) if k in ROW_LISTS and isinstance(v, list) else _sort_rows(v)
                for k, v in x.items()}
    if isinstance(x, list):
        return [_sort_rows(v) for v in x]
    return x


def canonical(result: Any) -> str:
    """The result as JSON text with the row lists sorted: equal text means every number equal, bit for bit.

    NaN stays comparable (written as the literal ``NaN``, so a NaN equals a NaN and nothing else); ``1`` and ``1.0``,
    ``True`` and ``1`` differ. A value that is not JSON (a numpy integer or float32, an array, an object) raises
    ``TypeError``: a result must hold plain Python numbers, as the core functions return them. Indented, so a
    failed comparison shows a readable diff.
    """
    plain = json.loads(json.dumps(result))
    return json.dumps(_sort_rows(plain), sort_keys=True, indent=1)


def sorted_rows(result: Any) -> Any:
    """A deep copy of ``result`` with its row lists sorted as :func:`canonical` sorts them, every Python type kept
    (a tuple stays a tuple, an int key an int): for comparisons with ``==``."""
    return _sort_rows(copy.deepcopy(result))


def assert_same(got: Any, want: Any) -> None:
    """``got`` equals ``want`` both as Python values (``==``, row lists sorted: a tuple is not a list, an int key not
    a str) and as :func:`canonical` text (an int is not a float, ``True`` not ``1``)."""
    assert sorted_rows(got) == sorted_rows(want)
    assert canonical(got) == canonical(want)


def random_batches(rows: Sequence, rng: random.Random, largest: int | None = None, smallest: int = 1) -> list[list]:
    """``rows`` shuffled and cut into batches of random sizes, ``smallest`` to ``largest`` (``None``: a third of
    the rows, at least 1); ``smallest=0`` gives some empty batches too."""
    rows = list(rows)
    top = max(1, len(rows) // 3) if largest is None else largest
    rng.shuffle(rows)
    out = []
    while rows:
        n = rng.randint(smallest, top)
        out.append(rows[:n])
        rows = rows[n:]
    return out


def feed(accumulators: Any, predictions: Sequence, references: Sequence, rng: random.Random, predictions_first: bool = False,
         largest: int | None = None, smallest: int = 1, together: float = 0.3) -> Any:
    """Update ``accumulators`` (one accumulator, or a list: each call goes to a random one of them) with both sides
    in :func:`random_batches` (``largest``, ``smallest``), and return them as given.

    The prediction and reference batches are interleaved in a random order, and two neighbouring batches of
    different sides go in one call with probability ``together``; or, with ``predictions_first``, every
    prediction batch comes before any reference batch, one side per call. With one accumulator, a seed draws the
    same calls whatever the list of candidates would have been (no draw picks the accumulator).
    """
    accs = list(accumulators) if isinstance(accumulators, (list, tuple)) else [accumulators]
    ops = [("p", b) for b in random_batches(predictions, rng, largest, smallest)]
    ops += [("r", b) for b in random_batches(references, rng, largest, smallest)]
    if predictions_first:
        ops.sort(key=lambda op: op[0] != "p")
    else:
        rng.shuffle(ops)
    i = 0
    while i < len(ops):
        side, batch = ops[i]
        if not predictions_first and i + 1 < len(ops) and ops[i + 1][0] != side and rng.random() < together:
            other = ops[i + 1][1]
            preds, refs = (batch, other) if side == "p" else (other, batch)
            step = 2
        else:
            preds, refs = (batch, None) if side == "p" else (None, batch)
            step = 1
        acc = accs[0] if len(accs) == 1 else rng.choice(accs)
        if refs is None:
            acc.update(predictions=preds)
        elif preds is None:
            acc.update(references=refs)
        else:
            acc.update(predictions=preds, references=refs)
        i += step
    return accumulators


# ---------------------------------------------------------------- tampered states (issue 28)


def tamper(path: Path, edit: Callable[[dict], Any], name: str = "tampered.json") -> Path:
    """A copy of the state file ``path``, beside it as ``name``, with ``edit(state)`` applied to its JSON."""
    state = json.loads(Path(path).read_text())
    edit(state)
    out = Path(path).with_name(name)
    out.write_text(json.dumps(state, allow_nan=True))
    return out


def assert_refused(bad: Path, good: Sequence[Path], message: str) -> None:
    """``load_state(bad)`` and ``merge_files(good + [bad])`` both raise ``ReleaseFormatError`` whose message is
    ``'<bad>': <message>`` exactly (the file, then the record and the field); the good files still load."""
    import pytest

    from perckit.hf.accumulate import load_state, merge_files
    from perckit.errors import ReleaseFormatError

    want = f"{str(bad)!r}: {message}"
    for load in (lambda: load_state(bad), lambda: merge_files([*good, bad]), lambda: merge_files([bad, *good])):
        with pytest.raises(ReleaseFormatError) as e:
            load()
        assert str(e.value) == want
    merge_files(good).compute()


#: A number, a text or a container a tampered state puts in place of a value: out of every range, NaN, the
#: infinities, integers past int64 and past float (10**400, an OverflowError in ``math.fsum``), a bool for a
#: number, a number as a string, a list for a scalar, nulls; next to helpers.fuzz's arbitrary JSON.
HOSTILE = [7.0, -1.0, 1.5, 50, -3, 0, 1, 0.0, 1.0, 1e300, float("nan"), float("inf"), float("-inf"), 10**400, 2**63, 2**64 + 1,
           True, False, "0.5", "", "x", [0.5], [], {}, None]


def hostile_values():
    """The hypothesis strategy of the values :func:`tampered_states` writes (HOSTILE, or arbitrary JSON)."""
    from helpers.fuzz import edit_values
    from hypothesis import strategies as st

    return st.sampled_from(HOSTILE) | edit_values


def tampered_states(bases: Sequence[dict] | Callable[[], Sequence[dict]], max_edits: int = 3):
    """A strategy: one of the valid saved states ``bases`` (JSON data; or a function returning them, called at the
    first draw: states whose scoring is slow are not built when the module is collected), with 0 to ``max_edits`` hostile edits
    (a value replaced, a key or an item dropped or added: helpers.fuzz.mutated), each aimed at one record (most
    often), one waiting row, or anywhere in the state."""
    from helpers.fuzz import mutated
    from hypothesis import strategies as st

    values = hostile_values()
    base = st.deferred(lambda: st.sampled_from(list(bases() if callable(bases) else bases)))

    @st.composite
    def draw_state(draw):
        state = copy.deepcopy(draw(base))
        for _ in range(draw(st.integers(0, max_edits))):
            target = draw(st.sampled_from(["record", "record", "record", "pending", "state"]))
            if not isinstance(state, dict):  # an earlier edit replaced the whole state
                target = "state"
            pending = [(side, i) for side in ("predictions", "references") if isinstance(state, dict) and isinstance(state.get(side), list)
                       for i in range(len(state[side]))]
            if target == "record" and isinstance(state.get("records"), list) and state["records"]:
                i = draw(st.integers(0, len(state["records"]) - 1))
                triple = state["records"][i]
                if isinstance(triple, list) and len(triple) == 3:
                    triple[1] = draw(mutated(st.just(triple[1]), max_edits=1, values=values))
                    continue
            if target == "pending" and pending:
                side, i = draw(st.sampled_from(pending))
                state[side][i] = draw(mutated(st.just(state[side][i]), max_edits=1, values=values))
                continue
            state = draw(mutated(st.just(state), max_edits=1, values=values))
        return state

    return draw_state()


def load_tampered(state: Any, in_range: Callable[[dict], None]) -> None:
    """Write ``state`` to a file and load it: either ``load_state`` raises a perckit error naming the file, or it
    loads and ``compute()`` returns a result within the metric's ranges (``in_range``) or raises a perckit error
    (a waiting reference of a strict metric, a prediction no reference has: what a valid state can give too).
    Nothing else may escape: no ValueError, TypeError, KeyError, OverflowError, ZeroDivisionError. Each outcome
    is recorded for ``helpers.fuzz.reaches`` ("load_state": accepted / refused)."""
    from helpers.fuzz import SECONDS, folder, record
    from helpers.harness import deadline

    from perckit.hf.accumulate import load_state
    from perckit.errors import PerckitError

    with folder() as d:
        path = d / "state.json"
        path.write_text(json.dumps(state, allow_nan=True))
        with deadline(SECONDS):
            try:
                acc = load_state(path)
            except PerckitError as e:
                assert str(e).startswith(f"{str(path)!r}: "), f"a refusal that does not name the file: {e}"
                record("load_state", "refused", type(e).__name__)
                return
            record("load_state", "accepted")
            try:
                out = acc.compute()
            except PerckitError as e:
                record("compute", "refused", type(e).__name__)
                return
            record("compute", "accepted")
            in_range(out)


def assert_ranges(result: Any, ranges: Sequence[tuple[str, float, float]], where: str = "result") -> None:
    """Every value of ``result`` (at any depth, texts aside) under a key matching one of ``ranges`` (``(regex, lo,
    hi)``, the first match decides) is a finite number in ``[lo, hi]`` (+inf too when ``hi`` is; ``None``: not
    computed); any other ``num_*`` / ``n_*`` key is a count, an int >= 0; no bool stands for a number."""
    if isinstance(result, dict):
        for k, v in result.items():
            at = f"{where}.{k}"
            if isinstance(v, (dict, list)):
                assert_ranges(v, ranges, at)
                continue
            if isinstance(v, str):  # a text (a skip reason, a group label)
                continue
            for pattern, lo, hi in ranges:
                if re.fullmatch(pattern, str(k)):
                    assert v is None or (type(v) in (int, float) and (math.isfinite(v) or v == hi == math.inf) and lo <= v <= hi), \
                        f"{at}: expected a number in [{lo}, {hi}], got {v!r}"
                    break
            else:
                if re.fullmatch(r"(num|n)_.*", str(k)):
                    assert v is None or (type(v) is int and v >= 0), f"{at}: expected a count, got {v!r}"
    elif isinstance(result, list):
        for i, v in enumerate(result):
            assert_ranges(v, ranges, f"{where}[{i}]")
