"""What every test module may need: the repository root, the datasets line it runs on, the skip mark for
builder scripts, and the Syn4D parity fixture folder. Splits are built with ``perckit.entrypoints.build_split``;
tests/conftest.py sets the offline cache environment before any of this is imported, and holds the fixtures."""

from __future__ import annotations

import ast
from pathlib import Path

import datasets
import pytest

#: The checkout: tests/helpers/common.py -> the repository root.
REPO = Path(__file__).resolve().parents[2]
#: The datasets major version: 3 runs builder scripts through load_dataset, 4 and later only the plain classes.
DS_MAJOR = int(datasets.__version__.split(".")[0])
needs_scripts = pytest.mark.skipif(DS_MAJOR >= 4, reason=f"datasets {datasets.__version__} cannot run builder scripts (3.6 line only)")
#: The Syn4D release whose official scores are checked in tests/data/syn4d_seed0.
SYN4D_PARITY = REPO / "tests" / "data" / "syn4d_seed0"


def dotted(node: ast.AST) -> str:
    """The dotted name of a call's target for the source scans: ``np.lib.format.read_array`` for an attribute
    chain, ``eval`` for a name, ``f().read`` for an attribute of a call's result, "" otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if isinstance(node, ast.Call):
        inner = dotted(node.func)
        return ".".join([f"{inner}()" if inner else "?", *reversed(parts)]) if parts else ""
    return ""
