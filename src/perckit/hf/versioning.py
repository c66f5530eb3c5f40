"""A fingerprint of the core package's sources, folded into every builder's cache key (``perckit.load_dataset``
and the builder scripts alike), so changed code means a new cache entry."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from ..io.paths import read_regular_file

#: the largest source file hashed (perckit's own modules are a few tens of KB)
MAX_SOURCE_BYTES = 16 << 20


@lru_cache(maxsize=1)
def _package_digest() -> str:
    """SHA-256 of perckit's version and every source file of the package, in sorted order."""
    from .. import __version__

    h = hashlib.sha256(__version__.encode())
    root = Path(__file__).resolve().parents[1]  # the perckit package
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(read_regular_file(path, "perckit's sources", MAX_SOURCE_BYTES))
    return h.hexdigest()


def core_fingerprint(script_hash: str | None = None) -> str:
    """``script_hash`` (what ``datasets`` computed for a builder script; None for the package's own class) combined
    with the core sources (first 16 hex digits)."""
    return hashlib.sha256(f"{script_hash or ''}:{_package_digest()}".encode()).hexdigest()[:16]
