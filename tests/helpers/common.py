"""What every test module may need: the repository root, the datasets line it runs on, the skip mark for
builder scripts, the Syn4D parity fixture folder, and :func:`lazy_import` (a module imported at its first use, so
that collecting the suite does not import torch). Splits are built with ``perckit.hf.entrypoints.build_split``;
tests/conftest.py sets the offline cache environment before any of this is imported, and holds the fixtures."""

from __future__ import annotations

import ast
import importlib
import sys
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


class lazy_import:
    """The module ``name``, imported when one of its attributes is first used rather than now: a test module that
    needs torch at module level (``import torch``: ~2.5 s) would otherwise import it while the whole suite is only
    being collected. A stand-in object, not a module (``importlib``'s LazyLoader module is loaded by pytest's own
    ``isinstance`` checks of every module-level name); each public attribute is the real module's. A private or
    dunder name (what pytest probes every module-level name for: ``__test__``, ``pytestmark``...) is looked up
    only once the module is imported."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str):
        if attr.startswith("_") and self._name not in sys.modules:
            raise AttributeError(attr)
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"lazy_import({self._name!r})"
