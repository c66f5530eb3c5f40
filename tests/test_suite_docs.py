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
    missing = _missing(cites)
    assert not missing, f"docs/errors.md cites {len(missing)} test(s) that do not exist: {missing[:30]}"


def _missing(cites: list[tuple[str, str]]) -> list[str]:
    sources: dict[str, str] = {}
    out = []
    for module, test in cites:
        path = REPO / "tests" / module
        if module not in sources:
            sources[module] = path.read_text(encoding="utf-8") if path.is_file() else ""
        if not re.search(rf"^(?:async )?def {test}\b", sources[module], re.M):
            out.append(f"{module}::{test}")
    return sorted(set(out))


def test_every_number_has_a_status_and_its_cited_checks_exist():
    """Issue 30: every metric card has a "Status of each number" table (metric | status | source | check) whose
    rows each say (a), (b) or (c), and every test it or the README's benchmark table cites as a check exists."""
    cards = sorted((REPO / "metrics").glob("*/README.md"))
    assert len(cards) >= 7, cards
    for card in cards:
        text = card.read_text(encoding="utf-8")
        assert "\n## Status of each number\n" in text, f"{card.relative_to(REPO)} has no 'Status of each number' section"
        start = text.index("\n## Status of each number\n")
        section = text[start:text.index("\n## ", start + 5)]
        rows = [ln for ln in section.splitlines() if ln.startswith("| ") and not ln.startswith("| metric ")]
        assert rows, f"{card.relative_to(REPO)}: the status table has no row"
        for row in rows:
            status = row.split("|")[2]
            assert re.match(r"\s*\((a|b|c)\) ", status), f"{card.relative_to(REPO)}: a status is not (a), (b) or (c): {row[:80]}"
        cites = _cites(section)
        assert cites, f"{card.relative_to(REPO)}: the status table cites no test"
        missing = _missing(cites)
        assert not missing, f"{card.relative_to(REPO)} cites test(s) that do not exist: {missing}"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| benchmark | builder | metrics | status |"):readme.index("\n## Install")]
    cites = _cites(table)
    assert cites and not _missing(cites), _missing(cites)
