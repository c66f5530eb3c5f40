"""What the accumulator tests share: the canonical form of a result, and rows fed to accumulators in random batches.

Every test that compares an accumulator (or a gloo group, or evaluate's distributed mode) with the core function
compares :func:`canonical` texts (or uses :func:`assert_same`, which also compares the Python values); every test
that feeds rows in random batches uses :func:`feed` (or :func:`random_batches` for a plan of its own). One random
source for all of them: a seeded ``random.Random``.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Sequence
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
