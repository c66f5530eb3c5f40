"""perckit.core.matching (the one id matcher and its one set of messages) and perckit.core.stats.fmean (the one mean).

Golden messages: every metric pairs by id through :func:`perckit.core.matching.pair_by_id`, so the wrappers the
metric modules keep (``r4d_bench.metric.match_by_query_id``, ``m4seg.metrics.match_by_example_id``,
``segmentation.match_by_id``) must give exactly these texts.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

from perckit.core import segmentation as seg
from perckit.errors import PredictionError
from perckit.m4seg import metric as m4
from perckit.core.matching import QUOTED_IDS, index_by_id, missing_ids_message, pair_by_id, unknown_ids_message
from perckit.r4d_bench import metric as r4
from perckit.core.stats import fmean

REFS = [{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "c", "v": 3}]


def rows(*ids: str) -> list[dict]:
    return [{"k": i} for i in ids]


def message(fn, *args, **kwargs) -> str:
    with pytest.raises(PredictionError) as info:
        fn(*args, **kwargs)
    return str(info.value)


# ---------------------------------------------------------------- pairing


def test_strict_pairs_in_reference_order():
    pairs = pair_by_id(rows("c", "a", "b"), REFS, "k")
    assert [(p["k"], r["v"]) for p, r in pairs] == [("a", 1), ("b", 2), ("c", 3)]


def test_lax_pairs_a_missing_reference_with_none():
    pairs = pair_by_id(rows("b"), REFS, "k", strict=False)
    assert [(p and p["k"], r["k"]) for p, r in pairs] == [(None, "a"), ("b", "b"), (None, "c")]


def test_selects_keeps_some_references_but_still_checks_every_prediction():
    pairs = pair_by_id(rows("a", "b", "c"), REFS, "k", selects=lambda i: i != "b")
    assert [r["k"] for _, r in pairs] == ["a", "c"]
    # a reference left out by selects is never "missing", even in strict mode
    assert [r["k"] for _, r in pair_by_id(rows("a"), REFS, "k", selects=lambda i: i == "a")] == ["a"]
    # a prediction unknown to the references raises whatever selects keeps
    assert "unknown to the references" in message(pair_by_id, rows("a", "zz"), REFS, "k", selects=lambda i: i == "a")


def test_pair_by_id_messages_are_golden():
    assert message(pair_by_id, rows("a", "zz", "b", "yy"), REFS, "k") == (
        "predictions: k 'zz' is unknown to the references (2 unknown id(s), e.g. ['zz', 'yy'])"
    )
    assert message(pair_by_id, rows("a"), REFS, "k") == (
        "predictions: no prediction for 2 reference k(s), e.g. ['b', 'c']; give every reference a prediction"
    )
    assert message(pair_by_id, rows("a"), REFS, "k", empty_hint="frames=[] means no output", lax_option="strict=False") == (
        "predictions: no prediction for 2 reference k(s), e.g. ['b', 'c']; give every reference a prediction "
        "(frames=[] means no output) or pass strict=False to score missing predictions as empty"
    )
    assert message(pair_by_id, rows("a", "a"), REFS, "k") == "predictions: duplicate k 'a'"
    assert message(pair_by_id, rows("a"), REFS + [{"k": "a"}], "k") == "references: duplicate k 'a'"
    assert message(pair_by_id, [{"k": 5}], REFS, "k") == "predictions[0].k: expected a string, got 5"
    assert message(pair_by_id, ["a"], REFS, "k") == "predictions[0]: expected a dict with a string 'k', got str: 'a'"
    assert message(pair_by_id, {"k": "a"}, REFS, "k") == "predictions: expected a list of rows, got {'k': 'a'}"


def test_messages_quote_a_few_ids():
    ids = [f"r{i:02d}" for i in range(12)]
    text = missing_ids_message("query_id", ids)
    assert text.startswith("predictions: no prediction for 12 reference query_id(s), e.g. ")
    assert str(ids[:QUOTED_IDS]) in text and repr(ids[QUOTED_IDS]) not in text
    text = unknown_ids_message("query_id", ids)
    assert text == f"predictions: query_id 'r00' is unknown to the references (12 unknown id(s), e.g. {ids[:QUOTED_IDS]})"


def test_index_by_id():
    assert list(index_by_id(REFS, "references", "k")) == ["a", "b", "c"]
    assert list(index_by_id([{"query_id": "q"}], "references")) == ["q"]  # the default key


# ---------------------------------------------------------------- the metric wrappers give the same texts


def _qrows(*ids):
    return [{"query_id": i} for i in ids]


def test_r4d_wrapper_messages():
    refs = _qrows("A", "B")
    assert message(r4.match_by_query_id, _qrows("A"), refs, strict=True) == missing_ids_message(
        "query_id", ["B"], "frames=[] means no output", "strict=False"
    )
    assert message(r4.match_by_query_id, _qrows("Z"), refs) == unknown_ids_message("query_id", ["Z"])
    assert [p for p, _ in r4.match_by_query_id(_qrows("A"), refs)] == [{"query_id": "A"}, None]  # lax by default
    assert [r["query_id"] for _, r in r4.match_by_query_id(_qrows("A"), refs, lambda q: q == "A", strict=True)] == ["A"]
    # track_id's hint is its own empty prediction
    assert "(target_track_ids=[] means no output) or pass strict=False" in message(
        r4.track_id, [{"query_id": "A", "target_track_ids": []}], [{"query_id": "A"}, {"query_id": "B"}], strict=True
    )


def test_m4seg_wrapper_messages():
    refs = [{"example_id": "s1"}, {"example_id": "s2"}]
    assert message(m4.match_by_example_id, [{"example_id": "s1"}], refs) == (
        "predictions: no prediction for 1 reference example_id(s), e.g. ['s2']; give every reference a prediction "
        "(a='' and groundings=[] mean no output) or pass strict=False to score missing predictions as empty"
    )
    assert message(m4.match_by_example_id, [{"example_id": "zz"}], refs, strict=False) == unknown_ids_message("example_id", ["zz"])
    assert [p for p, _ in m4.match_by_example_id([{"example_id": "s2"}], refs, strict=False)] == [None, {"example_id": "s2"}]


def test_segmentation_wrapper_messages():
    assert message(seg.match_by_id, rows("a"), REFS, "k") == (
        "predictions: no prediction for 2 reference k(s), e.g. ['b', 'c']; give every reference a prediction "
        "(an empty mask means 'no object')"
    )
    assert message(seg.match_by_id, rows("a", "b", "c", "d"), REFS, "k") == unknown_ids_message("k", ["d"])


# ---------------------------------------------------------------- fmean


def test_fmean_is_exactly_rounded_and_order_independent():
    values = [1e16, 1.0, -1e16]
    assert sum(values) == 0.0  # the naive sum loses the 1
    for perm in itertools.permutations(values):
        assert fmean(perm) == 1 / 3
    rnd = random.Random(0)
    many = [rnd.uniform(-1, 1) * 10 ** rnd.randint(-8, 16) for _ in range(500)]
    shuffled = list(many)
    rnd.shuffle(shuffled)
    assert fmean(many) == fmean(shuffled) == math.fsum(many) / len(many)


def test_fmean_counts():
    assert fmean([]) is None
    assert fmean(iter([])) is None
    assert fmean([], 4) == 0.0  # a mean over a population whose members all count 0
    assert fmean([1.0, 2.0], 4) == 0.75  # divide by the population, not the number of values
    assert fmean(x for x in (0.5, 1.5)) == 1.0  # any iterable
    assert type(fmean([1, 2])) is float
    for bad in (0, -1):
        with pytest.raises(ValueError, match="positive count"):
            fmean([1.0], bad)
