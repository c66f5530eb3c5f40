"""What the accumulator tests share: feeding rows in random batches, the canonical form of a result."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

#: row lists whose order follows the input: compared sorted
ROW_LISTS = ("per_query", "per_example", "per_sample", "sequences", "failures")


def canonical(result) -> str:
    """The result as JSON text with the row lists sorted: equal text means every number equal, bit for bit."""

    def walk(x):
        if isinstance(x, dict):
            return {k: sorted((walk(r) for r in v), key=lambda r: json.dumps(r, sort_keys=True))
                    if k in ROW_LISTS and isinstance(v, list) else walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x

    return json.dumps(walk(json.loads(json.dumps(result, default=str))), sort_keys=True)


def random_batches(rows: Sequence, rng: random.Random, largest: int = 7) -> list[list]:
    """``rows`` shuffled and cut into batches of random sizes (1 to ``largest``)."""
    rows = list(rows)
    rng.shuffle(rows)
    out = []
    while rows:
        n = rng.randint(1, largest)
        out.append(rows[:n])
        rows = rows[n:]
    return out


def feed(accumulators: Sequence, predictions: Sequence, references: Sequence, rng: random.Random) -> None:
    """Both sides in random batches, interleaved, each batch to a random one of ``accumulators``."""
    p, r = random_batches(predictions, rng), random_batches(references, rng)
    while p or r:
        acc = rng.choice(list(accumulators))
        acc.update(p.pop() if p and rng.random() < 0.5 else [], r.pop() if r and rng.random() < 0.5 else [])
