"""docs/errors.md cites tests by name: every cited module and test exists (a renamed or removed test fails here)."""

from __future__ import annotations

import re

from helpers.common import REPO

#: docs/errors.md's short names (its legend, lines 17-18)
ALIASES = {"bad": "test_benchmarks_bad_inputs.py", "m4bad": "test_m4seg_bad_inputs.py", "m4trust": "test_m4seg_trust.py"}


def _cites(text: str) -> list[tuple[str, str]]:
    """``(module, test)`` of every `` `module::test[...]` `` / `` `alias::test` `` / `` `::test` `` cite; a bare
    ``::test`` belongs to the module cited last before it in the same table cell."""
    out = []
    for line in text.splitlines():
        for cell in line.split("|"):
            module = None
            for tok in re.findall(r"`([^`]*)`", cell):
                m = re.fullmatch(r"(?:tests/)?([\w]+\.py|bad|m4bad|m4trust)?::(test_\w+)(?:\[[^\]]*\])?", tok)
                if not m:
                    continue
                if m.group(1):
                    module = ALIASES.get(m.group(1), m.group(1))
                if module is not None:
                    out.append((module, m.group(2)))
    return out


def test_every_cited_test_exists():
    text = (REPO / "docs" / "errors.md").read_text(encoding="utf-8")
    cites = _cites(text)
    assert len(cites) > 200, len(cites)
    missing = []
    sources: dict[str, str] = {}
    for module, test in cites:
        path = REPO / "tests" / module
        if module not in sources:
            sources[module] = path.read_text(encoding="utf-8") if path.is_file() else ""
        if not re.search(rf"^(?:async )?def {test}\b", sources[module], re.M):
            missing.append(f"{module}::{test}")
    assert not missing, f"docs/errors.md cites {len(missing)} test(s) that do not exist: {sorted(set(missing))[:30]}"
