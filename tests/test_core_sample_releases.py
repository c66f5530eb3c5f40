"""The sample releases (perckit.samples): each writer spells its release layout itself, never through the
benchmark's readers, so a wrong constant in a reader fails the builder tests instead of being written into the
sample release too; the writer comes from the benchmark's descriptor."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from perckit.hf import benchmark as benchmarks
from perckit.errors import OptionError

#: The benchmark subpackages (their readers, builders and features): no writer may import from them.
BENCHMARK_PACKAGES = tuple(f"perckit.{n}" for n in benchmarks.NAMES)


def writer_module(name: str) -> str:
    return f"perckit.samples.{name}"


def imports_of(module: str) -> list[tuple[int, str]]:
    """Every module an ``import`` / ``from ... import`` anywhere in ``module``'s source names (relative imports
    resolved; ``from a import b`` counts as ``a`` and ``a.b``, since ``b`` may be a submodule)."""
    spec = importlib.util.find_spec(module)
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    package = module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level else node.module
            found += [(node.lineno, base)] + [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return found


def benchmark_imports(module: str) -> list[str]:
    return [f"line {line}: {name}" for line, name in imports_of(module)
            if any(name == p or name.startswith(p + ".") for p in BENCHMARK_PACKAGES)]


def test_the_import_scan_sees_relative_and_function_level_imports():
    """The scan itself: Syn4D's predictions writer reads a release with the Syn4D readers (it is a consumer of
    the release, not a writer, and lives apart for that reason); the scan must see those imports."""
    found = benchmark_imports("perckit.samples.syn4d_predictions")
    assert any(f.endswith(": perckit.syn4d.read") for f in found) and any(f.endswith(": perckit.syn4d.rows") for f in found)


@pytest.mark.parametrize("name", benchmarks.NAMES)
def test_the_writer_does_not_import_the_benchmark_readers(name):
    """An AST scan of the descriptor's writer module (every import, also inside functions) and of the base module
    all writers share: nothing from any ``perckit.<benchmark>`` subpackage."""
    for module in (writer_module(name), "perckit.samples.base"):
        assert benchmark_imports(module) == [], f"{module} imports from a benchmark subpackage"


@pytest.mark.parametrize("name", benchmarks.NAMES)
def test_writing_a_sample_release_loads_none_of_the_benchmark_code(name, tmp_path):
    """The same at run time, imports of imports included: in a fresh interpreter, importing the writer and writing
    the release loads no module of any benchmark subpackage."""
    module = writer_module(name)
    attr = "write_release"
    code = (
        "import importlib, json, sys\n"
        f"writer = getattr(importlib.import_module({module!r}), {attr!r})\n"
        f"writer({str(tmp_path / 'release')!r})\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({BENCHMARK_PACKAGES!r}))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == []
    assert any((tmp_path / "release").rglob("*"))


def test_write_release_uses_the_descriptor_writer(tmp_path):
    from perckit.samples import write_release
    from perckit.samples import refcoco_m

    fx = write_release("refcoco_m", tmp_path / "a", seed=3, num_images=4, shards=1)
    again = refcoco_m.write_release(tmp_path / "b", seed=3, num_images=4, shards=1)
    assert fx.files == again.files == ["data/validation-00000-of-00001.parquet", "README.md"]
    assert (tmp_path / "a" / fx.files[0]).read_bytes() == (tmp_path / "b" / fx.files[0]).read_bytes()
    with pytest.raises(OptionError, match=r"unknown benchmark 'nope': expected one of \['m4seg'"):
        write_release("nope", tmp_path / "c")


def test_write_sample(tmp_path, capsys):
    from perckit.__main__ import main

    command = "write-sample"
    assert main([command, "refcoco_m", str(tmp_path / "rc")]) == 0
    assert capsys.readouterr().out == f"wrote 3 files of the refcoco_m sample release (synthetic, seed 0) to {tmp_path / 'rc'}\n"
    assert main([command, "refcoco_m", str(tmp_path / "rc")]) == 2
    assert f"{command} output " in capsys.readouterr().err
