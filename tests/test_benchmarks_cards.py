"""Every metric card says where each of its formulas lives, and what it names is there (issue 15)."""

from __future__ import annotations

import re

import pytest
from helpers.common import REPO

from perckit.hf import benchmark as benchmarks

METRICS = sorted({m.name for name in benchmarks.NAMES for m in benchmarks.get(name).metrics})


def _code_table(card: str) -> list[tuple[list[str], list[str]]]:
    start = card.index("## Where the code lives")
    end = card.find("\n## ", start + 5)
    rows = []
    for line in card[start:end].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and "src/perckit/" in cells[1]:
            files = re.findall(r"`(src/perckit/[\w/]+\.py)`", cells[1])
            functions = re.findall(r"`(\w+)`", cells[2])
            rows.append((files, functions))
    return rows


@pytest.mark.parametrize("metric", METRICS)
def test_card_names_the_file_of_each_formula(metric):
    card = (REPO / "metrics" / metric / "README.md").read_text(encoding="utf-8")
    assert "## Where the code lives" in card, f"metrics/{metric}/README.md has no 'Where the code lives' section"
    rows = _code_table(card)
    assert len(rows) >= 3, rows
    for files, functions in rows:
        assert files, f"metrics/{metric}: a row names no file"
        sources = []
        for f in files:
            assert (REPO / f).is_file(), f"metrics/{metric}: {f} does not exist"
            sources.append((REPO / f).read_text(encoding="utf-8"))
        for fn in functions:
            assert any(re.search(rf"^(def|class) {fn}\b", src, re.M) for src in sources), (
                f"metrics/{metric}: {fn} is not defined in {files}"
            )
