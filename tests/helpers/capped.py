"""``run_capped``: Python code in a fresh interpreter whose address space is capped (``RLIMIT_AS``), for the tests
that prove a hostile input is refused in bounded memory and that the interpreter no longer dies (SIGSEGV)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import perckit

#: the folder holding the perckit package under test, and tests/ (for ``helpers``), put first on the child's path
_PATHS = [str(Path(perckit.__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1])]


def run_capped(code: str, limit_mib: int = 1024, timeout: float = 120) -> dict:
    """Run ``code`` in a new interpreter under an address-space cap of ``limit_mib`` MiB and ``timeout`` seconds; the
    child must exit 0 (a negative code is the signal that killed it: -11 is SIGSEGV) and print one JSON object as
    its last line, returned with ``peak_mib`` (the child's peak RSS) added."""
    limit = limit_mib << 20
    prelude = (f"import resource\nresource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))\n")
    epilogue = "\nprint(__import__('json').dumps({**RESULT, 'peak_mib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10}))\n"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(_PATHS + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    out = subprocess.run([sys.executable, "-c", prelude + code + epilogue], capture_output=True, text=True, timeout=timeout, env=env)
    assert out.returncode == 0, f"the child exited with {out.returncode} (-11: SIGSEGV): {out.stderr[-3000:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])
