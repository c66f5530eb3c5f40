"""The Syn4D parity comparison rule (spec §5.3), shared by the metric, builder and file-runner tests.

``assert_official_equal(ours, official)``: identical key sets at every level;
bools, ints, strings and zeros equal exactly (an official int must be an int
of ours, an official float a float, so ``32`` vs ``32.0`` is a difference);
other floats within ``1e-9`` relative; ``failures`` lists compared on
``sequence_id``, ``task`` and the reason prefix only ("missing prediction",
or the exception type before the first ``:``), because the official
missing-prediction reason embeds an absolute path and the ``KeyError`` text
depends on the NumPy version.
"""

from __future__ import annotations

import math
from typing import Any

REL_TOL = 1e-9
MISSING_PREFIX = "missing prediction"


def reason_prefix(reason: str) -> str:
    """``"missing prediction"`` for a missing-prediction reason, else the text up to and including the first ``:``."""
    if reason.startswith(MISSING_PREFIX):
        return MISSING_PREFIX
    head, sep, _ = reason.partition(":")
    return head + sep


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "dict"
    if isinstance(value, (list, tuple)):
        return "list"
    return type(value).__name__


def _compare_failures(ours: Any, official: Any, path: str) -> None:
    assert isinstance(ours, list), f"{path}: expected a list, got {type(ours).__name__}"
    assert len(ours) == len(official), f"{path}: {len(ours)} failures, official has {len(official)}: {ours!r} vs {official!r}"
    for i, (a, b) in enumerate(zip(ours, official)):
        where = f"{path}[{i}]"
        assert isinstance(a, dict), f"{where}: expected a dict, got {a!r}"
        assert set(a) == set(b), f"{where}: keys {sorted(a)} != official {sorted(b)}"
        assert a["sequence_id"] == b["sequence_id"], f"{where}: sequence_id {a['sequence_id']!r} != {b['sequence_id']!r}"
        assert a.get("task") == b.get("task"), f"{where}: task {a.get('task')!r} != {b.get('task')!r}"
        assert isinstance(a["reason"], str), f"{where}: reason {a['reason']!r} is not a str"
        pa, pb = reason_prefix(a["reason"]), reason_prefix(b["reason"])
        assert pa == pb, f"{where}: reason {a['reason']!r} (prefix {pa!r}) != official {b['reason']!r} (prefix {pb!r})"


def _compare(ours: Any, official: Any, path: str, worst: list[float]) -> None:
    ko, kb = _kind(ours), _kind(official)
    assert ko == kb, f"{path}: type {ko} ({ours!r}) != official {kb} ({official!r})"
    if kb == "dict":
        assert set(ours) == set(official), (
            f"{path or '<root>'}: keys differ: only ours {sorted(set(ours) - set(official))}, "
            f"only official {sorted(set(official) - set(ours))}"
        )
        for key in official:
            sub = f"{path}/{key}"
            if key == "failures" and isinstance(official[key], list):
                _compare_failures(ours[key], official[key], sub)
            else:
                _compare(ours[key], official[key], sub, worst)
    elif kb == "list":
        assert len(ours) == len(official), f"{path}: length {len(ours)} != official {len(official)}"
        for i, (a, b) in enumerate(zip(ours, official)):
            _compare(a, b, f"{path}[{i}]", worst)
    elif kb == "float":
        if math.isnan(official):
            assert math.isnan(ours), f"{path}: {ours!r} != official NaN"
        elif official == 0.0 or math.isinf(official):
            assert ours == official, f"{path}: {ours!r} != official {official!r} (zeros and infinities must be exact)"
        else:
            rel = abs(ours - official) / abs(official)
            worst[0] = max(worst[0], rel)
            assert rel <= REL_TOL, f"{path}: {ours!r} vs official {official!r}: relative error {rel:.3e} > {REL_TOL:g}"
    else:
        assert ours == official, f"{path}: {ours!r} != official {official!r}"


def assert_official_equal(ours: Any, official: Any) -> float:
    """Assert ``ours`` matches the official JSON under the spec §5.3 rule; return the largest relative float error seen."""
    worst = [0.0]
    _compare(ours, official, "", worst)
    return worst[0]
