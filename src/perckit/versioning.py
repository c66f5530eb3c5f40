"""A fingerprint of the core package's sources, folded into builder cache keys."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from . import __version__


@lru_cache(maxsize=1)
def _package_digest() -> str:
    h = hashlib.sha256(__version__.encode())
    root = Path(__file__).parent
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def core_fingerprint(script_hash: str | None = None) -> str:
    """``script_hash`` (what ``datasets`` computed for the builder script) combined with the core sources."""
    return hashlib.sha256(f"{script_hash or ''}:{_package_digest()}".encode()).hexdigest()[:16]
