"""The package as pip builds and installs it (issue 33): the build raises no setuptools warning, the wheel ships
every builder and metric file, an editable install is ``src/`` on ``sys.path`` (a .pth line, no import hook), and
``python -m perckit`` / ``import perckit`` work from the folder that holds a clone named ``perckit``.

The builds run on a copy of what a build reads (pyproject.toml, setup.py, README.md, src/ with its links,
builders/, metrics/), with the running interpreter's setuptools and no network (``--no-build-isolation``,
``--no-index``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

import perckit

from helpers.common import REPO

#: what a build of the package reads
BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md", "src", "builders", "metrics")
#: a warning class in a build log (BuildBackendWarning, SetuptoolsDeprecationWarning, ...); pip's own notes are
#: "WARNING: ..." lines about this machine's index settings
WARNING = re.compile(r"\w*Warning\b")


def _needs_build_backend() -> None:
    """Skip unless the running interpreter has the setuptools that pyproject.toml's [build-system] requires."""
    from packaging.requirements import Requirement

    try:
        import tomllib
    except ImportError:  # Python 3.10
        from pip._vendor import tomli as tomllib

    requires = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]["requires"]
    for spec in map(Requirement, requires):
        try:
            have = metadata.version(spec.name)
        except metadata.PackageNotFoundError:
            pytest.skip(f"the build needs {spec}; {sys.executable} has no {spec.name}")
        if not spec.specifier.contains(have, prereleases=True):
            pytest.skip(f"the build needs {spec}; {sys.executable} has {spec.name} {have}")


@pytest.fixture(scope="module")
def project_copy(tmp_path_factory) -> Path:
    _needs_build_backend()
    root = tmp_path_factory.mktemp("project") / "perckit"
    root.mkdir()
    for name in BUILD_INPUTS:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, root / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(REPO / name, root / name)
    return root


def _run(*args: str, cwd: Path) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600)
    log = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{log[-4000:]}"
    return log


@pytest.fixture(scope="module")
def wheel(project_copy, tmp_path_factory) -> tuple[str, set[str]]:
    """(the log of ``pip wheel`` on the copy, the names in the wheel)."""
    out = tmp_path_factory.mktemp("wheel")
    log = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
               "--disable-pip-version-check", "-w", str(out), str(project_copy), cwd=out)
    [built] = out.glob("perckit-*.whl")
    with zipfile.ZipFile(built) as z:
        return log, set(z.namelist())


def test_build_log_has_no_setuptools_warning(wheel):
    log, _ = wheel
    assert not WARNING.findall(log), f"the wheel build warned:\n{log[-6000:]}"


def test_build_wheel_ships_every_builder_and_metric_file(wheel):
    _, names = wheel
    for kind in ("builders", "metrics"):
        files = [p for p in sorted((REPO / kind).rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
        assert len(files) >= 10, f"{kind}/ holds {len(files)} files"
        missing = [f.relative_to(REPO).as_posix() for f in files if f"perckit/{f.relative_to(REPO).as_posix()}" not in names]
        assert not missing, f"the wheel lacks {missing}"
    package = REPO / "src" / "perckit"  # its modules and data files (rglob does not enter the links builders/, metrics/)
    core = [p for pattern in ("**/*.py", "syn4d/metric/*.json", "lmms_eval/*/*.yaml") for p in sorted(package.glob(pattern))]
    assert len(core) > 100 and any(p.suffix == ".json" for p in core) and any(p.suffix == ".yaml" for p in core)
    missing = [p.relative_to(REPO / "src").as_posix() for p in core if p.relative_to(REPO / "src").as_posix() not in names]
    assert not missing, f"the wheel lacks {missing}"
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_build_editable_is_a_path_entry(project_copy, tmp_path):
    """The editable wheel setuptools builds for ``pip install -e .``: one .pth line naming ``src/`` (no import
    hook, which a folder named ``perckit`` in the working directory would shadow: issue 33), and no warning."""
    out = tmp_path / "editable"
    out.mkdir()
    log = _run(sys.executable, "-c", f"from setuptools import build_meta; print(build_meta.build_editable({str(out)!r}))",
               cwd=project_copy)
    assert not WARNING.findall(log), f"the editable build warned:\n{log[-6000:]}"
    [built] = out.glob("perckit-*.whl")
    with zipfile.ZipFile(built) as z:
        files = [n for n in z.namelist() if ".dist-info/" not in n]
        assert files == [f"__editable__.perckit-{perckit.__version__}.pth"], f"the editable wheel holds {files}"
        entries = z.read(files[0]).decode().split()
    assert entries == [str((project_copy / "src").resolve())]


def _editable_root() -> Path | None:
    """The folder the running interpreter's perckit is an editable install of (None when it is not one)."""
    try:
        text = metadata.distribution("perckit").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    info = json.loads(text or "{}")
    if not info.get("dir_info", {}).get("editable") or not info.get("url", "").startswith("file://"):
        return None
    return Path(info["url"][len("file://"):]).resolve()


def test_python_m_perckit_works_from_the_folder_of_a_clone_named_perckit(tmp_path):
    """From a folder holding ``perckit`` (the default clone name), the folder is a namespace package named perckit
    for the import system; the editable install's path entry must still win."""
    root = _editable_root()
    if root != REPO.resolve():
        pytest.skip(f"{sys.executable} is not an editable install of this checkout ({REPO}): its perckit is "
                    + (f"an editable install of {root}" if root else "not an editable install"))
    (tmp_path / "perckit").symlink_to(REPO, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-m", "perckit", "--version"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith(f"perckit {perckit.__version__} "), done.stdout + done.stderr
    done = subprocess.run([sys.executable, "-c", "import perckit, perckit.builders; print(perckit.__file__); print(*perckit.builders.__path__)"],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(REPO / "src" / "perckit" / "__init__.py"), str(REPO / "src" / "perckit" / "builders")]
