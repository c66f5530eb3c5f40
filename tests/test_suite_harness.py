"""The test suite's own rules (tests/README.md), checked by reading the test modules' source (AST):

- every test can fail: its body (or a function it calls, in its module or in tests/helpers/) asserts, uses
  ``pytest.raises`` / ``pytest.warns`` / ``pytest.fail``, or calls a helper that does (``expect``, ``check``,
  ``documented_error``...); no ``assert True``, no assert of a constant or of a value compared with itself, no
  ``assert isinstance(err, C)`` of an error already known to be a ``C`` (``err = expect(fn, C, ...)``, ``cause``
  and ``documented_error`` return a PerckitError, ``with pytest.raises(C) as info`` makes ``info.value`` a ``C``),
  and no broad ``except`` whose body only passes (it would swallow the failure it should report);
- no test module imports another test module or ``conftest`` (shared code lives in tests/helpers/, fixtures in
  tests/conftest.py);
- every fuzz test checks which branches its examples reached (``helpers.fuzz.reaches``), so a strategy that
  never produces an accepted input fails instead of passing quietly;
- collecting the suite imports none of evaluate, torch, transformers (seconds each): no test module, helper or
  conftest imports them at module level (inside a test or fixture, or ``helpers.common.lazy_import``).
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
HELPERS = TESTS / "helpers"
MODULES = sorted(TESTS.glob("test_*.py"))

#: Calls that fail a test by themselves (the last part of the called name).
FAILING_CALLS = {"raises", "warns", "fail", "deprecated_call"}
#: Test modules with fuzz tests: each ``@given`` test there must carry ``@reaches``.
FUZZ_MODULES = {"test_benchmarks_fuzz.py", "test_m4seg_fuzz.py"}


def _called_name(call: ast.Call) -> str | None:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


def _meaningful_assert(node: ast.Assert) -> bool:
    """An assert that can fail: not of a constant, not ``x == x``."""
    t = node.test
    if isinstance(t, ast.Constant):
        return False
    if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], (ast.Eq, ast.Is)):
        return ast.dump(t.left) != ast.dump(t.comparators[0])
    return True


#: Helpers that return an error already checked to be a PerckitError (``expect``: also of the class it is given).
RETURN_A_CHECKED_ERROR = {"expect", "cause", "documented_error"}


def _known_classes(test: ast.AST) -> dict[str, set[str]]:
    """``{expression: classes}``: what the test already knows an error to be an instance of (the source text of
    the expression and of each class): ``err = expect(fn, C, ...)`` (C and PerckitError), ``err = cause(...)`` /
    ``documented_error(...)`` (PerckitError), ``with pytest.raises(C) as info`` (``info.value``: C)."""
    known: dict[str, set[str]] = {}
    for sub in ast.walk(test):
        if (isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name)
                and isinstance(sub.value, ast.Call) and _called_name(sub.value) in RETURN_A_CHECKED_ERROR):
            classes = {"PerckitError"}
            if _called_name(sub.value) == "expect" and len(sub.value.args) >= 2:
                classes.add(ast.unparse(sub.value.args[1]))
            known[sub.targets[0].id] = classes
        if (isinstance(sub, ast.withitem) and isinstance(sub.context_expr, ast.Call) and _called_name(sub.context_expr) == "raises"
                and sub.context_expr.args and isinstance(sub.optional_vars, ast.Name)):
            known[f"{sub.optional_vars.id}.value"] = {ast.unparse(sub.context_expr.args[0])}
    return known


def _known_isinstance(node: ast.Assert, known: dict[str, set[str]]) -> str | None:
    """The part of ``node`` (it, or one operand of an ``and``) that checks ``isinstance(x, C)`` of an ``x`` already
    known to be a ``C``: it cannot fail."""
    parts = node.test.values if isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.And) else [node.test]
    for part in parts:
        if isinstance(part, ast.Call) and _called_name(part) == "isinstance" and len(part.args) == 2:
            cls = part.args[1]
            names = {ast.unparse(e) for e in cls.elts} if isinstance(cls, ast.Tuple) else {ast.unparse(cls)}
            if names & known.get(ast.unparse(part.args[0]), set()):
                return ast.unparse(part)
    return None


def _functions(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level functions (and methods, by name) of a module."""
    out: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = node
        elif isinstance(node, ast.ClassDef):
            out.update({n.name: n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))})
    return out


@lru_cache(maxsize=None)
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


@lru_cache(maxsize=None)
def _helper_functions() -> dict[str, ast.AST]:
    """Every function of tests/helpers/ and of the shared non-test modules in tests/, by name."""
    out: dict[str, ast.AST] = {}
    for path in sorted([*HELPERS.glob("*.py"), *(p for p in TESTS.glob("*.py") if not p.name.startswith("test_"))]):
        out.update(_functions(_parse(path)))
    return out


def _fails(node: ast.AST, local: dict[str, ast.AST], seen: set[str]) -> bool:
    """Whether ``node`` (a function) can fail: an assert, ``raise AssertionError``, a failing pytest call, or a
    call of a function (in its module or in tests/helpers/) that can, followed transitively."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assert) and _meaningful_assert(sub):
            return True
        if isinstance(sub, ast.Raise) and sub.exc is not None and "AssertionError" in ast.unparse(sub.exc):
            return True
        if isinstance(sub, ast.Call):
            name = _called_name(sub)
            if name is None:
                continue
            if name in FAILING_CALLS or name.startswith("assert"):
                return True
            target = local.get(name) or _helper_functions().get(name)
            if target is not None and name not in seen:
                seen.add(name)
                if _fails(target, local, seen):
                    return True
    return False


def _tests(tree: ast.Module):
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            yield node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            yield from (n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test"))


def _broad(handler: ast.ExceptHandler) -> bool:
    names = [handler.type] if not isinstance(handler.type, ast.Tuple) else list(handler.type.elts)
    return handler.type is None or any(isinstance(n, ast.Name) and n.id in {"Exception", "BaseException", "AssertionError"} for n in names)


def _swallows(handler: ast.ExceptHandler) -> bool:
    return all(isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) for s in handler.body)


def findings(path: Path) -> list[str]:
    """Every rule broken in the test module ``path``, as ``file::test: what``."""
    tree = _parse(path)
    local = _functions(tree)
    out = []
    for test in _tests(tree):
        where = f"{path.name}::{test.name}"
        if not _fails(test, local, {test.name}):
            out.append(f"{where}: nothing in it can fail (no assert, pytest.raises or asserting helper)")
        known = _known_classes(test)
        for sub in ast.walk(test):
            if isinstance(sub, ast.Assert) and not _meaningful_assert(sub):
                out.append(f"{where} line {sub.lineno}: an assert that cannot fail ({ast.unparse(sub.test)})")
            if isinstance(sub, ast.Assert) and (part := _known_isinstance(sub, known)):
                out.append(f"{where} line {sub.lineno}: an assert that cannot fail ({part}: expect / pytest.raises checked it)")
            if isinstance(sub, ast.ExceptHandler) and _broad(sub) and _swallows(sub):
                out.append(f"{where} line {sub.lineno}: a broad except whose body only passes swallows failures")
    return out


def test_every_test_can_fail():
    problems = [f for path in MODULES for f in findings(path)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("source, problem", [
    ("def test_x():\n    f()\n", "nothing in it can fail"),
    ("def test_x():\n    assert True\n", "cannot fail"),
    ("def test_x():\n    y = 1\n    assert y == y\n", "cannot fail"),
    ("def test_x():\n    try:\n        assert g()\n    except Exception:\n        pass\n", "swallows"),
    ("def test_x():\n    err = expect(f, OptionError, 'bad')\n    assert isinstance(err, PerckitError)\n", "checked it"),
    ("def test_x():\n    err = expect(f, OptionError, 'bad')\n    assert 'x' in str(err) and isinstance(err, OptionError)\n", "checked it"),
    ("def test_x():\n    with pytest.raises(OSError) as info:\n        f()\n    assert isinstance(info.value, OSError)\n", "checked it"),
])
def test_the_scan_finds_tests_that_cannot_fail(tmp_path, source, problem):
    path = tmp_path / "test_sample.py"
    path.write_text(source)
    assert any(problem in f for f in findings(path)), findings(path)


@pytest.mark.parametrize("source", [
    "def test_x():\n    assert f() == 2\n",
    "import pytest\ndef test_x():\n    with pytest.raises(ValueError):\n        f()\n",
    "def helper(v):\n    assert v\ndef test_x():\n    helper(f())\n",
    "def test_x():\n    expect(f, ValueError, 'bad')\n",
    "def test_x():\n    np.testing.assert_array_equal(f(), g())\n",
    "def test_x():\n    err = expect(f, OptionError, 'bad')\n    assert isinstance(err.__cause__, ValueError)\n",
    "def test_x():\n    with pytest.raises(OutputError) as info:\n        f()\n    assert isinstance(info.value, OSError)\n",
])
def test_the_scan_accepts_tests_that_can_fail(tmp_path, source):
    path = tmp_path / "test_sample.py"
    path.write_text(source)
    assert findings(path) == []


def test_no_test_module_imports_another_test_module_or_conftest():
    problems = []
    for path in [*MODULES, *HELPERS.glob("*.py")]:
        for node in ast.walk(_parse(path)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            problems += [f"{path.relative_to(TESTS)} line {node.lineno}: imports {n}" for n in names if n.split(".")[0].startswith("test_") or n == "conftest"]
    assert not problems, "\n".join(problems)


#: Libraries that take seconds to import: a module imports them where it uses them, never while it is collected.
HEAVY_IMPORTS = {"evaluate", "torch", "transformers", "torchvision", "torchaudio"}


def heavy_imports(path: Path) -> list[str]:
    """The module-level (not inside a function) imports of :data:`HEAVY_IMPORTS` in ``path``."""
    out = []
    stack = list(_parse(path).body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Import):
            out += [f"{path.name} line {node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] in HEAVY_IMPORTS]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in HEAVY_IMPORTS:
            out.append(f"{path.name} line {node.lineno}: from {node.module} import ...")
        else:
            stack.extend(ast.iter_child_nodes(node))
    return out


def test_collecting_the_suite_imports_no_heavy_library():
    problems = [f for path in [*MODULES, *HELPERS.glob("*.py"), TESTS / "conftest.py"] for f in heavy_imports(path)]
    assert not problems, "import these inside the tests / fixtures that use them:\n" + "\n".join(problems)


def test_the_heavy_import_scan_finds_module_level_imports_only(tmp_path):
    path = tmp_path / "test_sample.py"
    path.write_text("import os\nimport torch.nn\nif True:\n    from evaluate import load\ndef test_x():\n    import transformers\n")
    assert heavy_imports(path) == ["test_sample.py line 4: from evaluate import ...", "test_sample.py line 2: import torch.nn"]


def _decorator_names(fn: ast.AST) -> set[str]:
    out = set()
    for d in fn.decorator_list:
        call = d.func if isinstance(d, ast.Call) else d
        out.add(call.attr if isinstance(call, ast.Attribute) else getattr(call, "id", ""))
    return out


def _calls(node: ast.AST, local: dict[str, ast.AST], seen: set[str]) -> set[str]:
    """The names ``node`` calls, following the module's own functions transitively."""
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and (name := _called_name(sub)):
            out.add(name)
            if name in local and name not in seen:
                seen.add(name)
                out |= _calls(local[name], local, seen)
    return out


def test_every_fuzz_test_records_the_branches_it_reaches():
    """In the fuzz modules every ``@given`` test, elsewhere every one that records outcomes (``documented_only``,
    ``record``), carries ``@reaches``: otherwise the record is never checked."""
    missing = []
    for path in MODULES:
        tree = _parse(path)
        local = _functions(tree)
        for test in _tests(tree):
            names = _decorator_names(test)
            if "given" not in names or "reaches" in names:
                continue
            if path.name in FUZZ_MODULES or _calls(test, local, {test.name}) & {"documented_only", "record"}:
                missing.append(f"{path.name}::{test.name}")
    assert not missing, f"fuzz tests without @reaches (tests/helpers/fuzz.py): {missing}"


def test_every_case_runs_every_case_and_names_the_failing_one():
    from helpers.cases import every_case

    ran = []
    every_case(list(range(40)), ran.append, first=[7])
    assert ran[0] == 7 and sorted(set(ran)) == list(range(40))  # the explicit example first, then every case
    def refuses_from_12(case):
        assert case < 12, f"case {case}"

    with pytest.raises(AssertionError, match="case 12"):
        every_case(list(range(40)), refuses_from_12)  # shrunk to the first failing case of the table
    with pytest.raises(AssertionError, match="the same key"):
        every_case([1, 1], lambda c: None)


def test_paths_fail_when_a_path_is_never_taken():
    from helpers.cases import Paths

    paths = Paths()
    for case in range(5):
        paths.note(case, "reference")  # a fast path that refused every case
    with pytest.raises(AssertionError, match=r"paths never taken: \['fast'\]"):
        paths.check("fast", "reference")
    paths.note(5, "fast")
    paths.check("fast", "reference")
    paths.note(6, "other")
    with pytest.raises(AssertionError, match=r"unknown paths: \['other'\]"):
        paths.check("fast", "reference")
