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


def test_the_readmes_commands_and_python_names_exist(capsys):
    """README.md matches the code (issue 33): every `perckit ...` line of its bash blocks (and `$ perckit ...` of its
    text blocks) parses with perckit's own parser, and every dotted `perckit.<name>` it mentions resolves (the
    wheel's script folders `perckit.builders` / `perckit.metrics` are the checkout's builders/ and metrics/)."""
    import importlib
    import shlex

    from perckit.__main__ import build_parser

    text = (REPO / "README.md").read_text(encoding="utf-8")
    commands = []
    for lang, body in re.findall(r"^```(bash|text)\n(.*?)^```", text, re.M | re.S):
        for line in body.replace("\\\n", " ").splitlines():
            line = line[2:] if lang == "text" and line.startswith("$ ") else line if lang == "bash" else ""
            if line.startswith("perckit "):
                commands.append(shlex.split(line, comments=True)[1:])
    assert len(commands) >= 15 and ["write-sample", "refcoco_m", "release"] in commands, commands
    for argv in commands:
        try:
            build_parser().parse_args(argv)
        except SystemExit as e:  # --version exits 0; a wrong command or option exits 2
            assert e.code == 0 and argv == ["--version"], (argv, capsys.readouterr().err)
    names = sorted(set(re.findall(r"\bperckit(?:\.[A-Za-z_]\w*)+", text)))
    unresolved = []
    for name in names:
        parts = name.split(".")
        if parts[1] in ("builders", "metrics"):
            assert (REPO / parts[1]).is_dir()
            continue
        for i in range(len(parts), 0, -1):  # the longest module prefix, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:i]))
                break
            except ImportError:
                continue
        for attr in parts[i:]:
            obj = getattr(obj, attr, None)
        unresolved += [name] if obj is None else []
    assert len(names) > 25 and not unresolved, unresolved
