"""The source images of an M⁴Seg build (option ``image_root``): every ``image_paths`` / ``images[].path``
string of the release is resolved under ``image_root`` with :func:`perckit.io.paths.resolve_under` (no absolute
path, no ``..``, no symbolic link out of the root) and read with :func:`perckit.io.paths.read_regular_file`
(regular files only, at most :data:`MAX_IMAGE_BYTES`).

A release is a download from a stranger: without these checks an ``image_paths`` entry such as ``/etc/passwd`` or
``../../.ssh/id_rsa`` would copy the bytes of an arbitrary local file into the rows."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Mapping
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa

from ...errors import ReleaseFormatError, ReleaseNotFoundError
from ...io.paths import read_regular_file, resolve_under
from .native import pull_translating, read_examples, reading_error
from .parquet import BATCH_SIZE, PARQUET_ERRORS, open_parquet

#: Largest source image embedded in a row (COCO, ADE20K and PASCAL images are well under 10 MB). Checked with
#: ``fstat`` before the read, so a FIFO, ``/dev/zero`` or a huge file planted as an image is refused at once.
MAX_IMAGE_BYTES = 64 << 20


def iter_image_paths(opener: Callable, source: str, files: Sequence[str], kind: str = "list", split: str = "") -> Iterator[tuple[str, Any]]:
    """``(where, path)`` of every image path of a split in order; ``where`` names the file, the example
    (index and id when known) and the field. Malformed entries other than the path are left to the row checks."""
    if source == "parquet":
        for p in files:
            where = f"M4Seg {split} split, {Path(p).name}"
            with opener(p, "rb") as f:
                pf = open_parquet(f, where)

                def unreadable(e: BaseException, where: str = where) -> Exception:
                    return ReleaseFormatError(
                        f"{where}: the images column cannot be read (corrupt or truncated Parquet data; {type(e).__name__}: {e})"
                    )

                columns = (
                    (b.column(0).to_pylist(), b.column(1).to_pylist())
                    for b in pf.iter_batches(batch_size=BATCH_SIZE, columns=["example_id", "images"])
                )
                i = 0
                # batches are read and decoded under the error translation; the yields stay outside any try
                for ids, images_col in pull_translating(columns, (pa.ArrowException, *PARQUET_ERRORS), unreadable):
                    for eid, images in zip(ids, images_col):
                        for k, im in enumerate(images if isinstance(images, list) else ()):
                            if isinstance(im, Mapping) and im.get("path") is not None:
                                yield f"{where}: row {i} (example {eid!r}): images[{k}].path", im["path"]
                        i += 1
        return
    for p in files:
        where = f"M4Seg {split} split, {Path(p).name}"
        errors, convert = reading_error(where)
        for i, (key, ex) in enumerate(pull_translating(read_examples(opener, p, where), errors, convert)):
            m = ex if isinstance(ex, Mapping) else {}
            paths = m.get("image_paths")
            eid = key if key is not None else next(
                (m[k] for k in ("example_id", "pair_id", "id") if m.get(k) is not None), None)
            for k, v in enumerate(paths if isinstance(paths, list) else ()):
                yield f"{where}: example {i} ({eid!r}): image_paths[{k}]", v


def missing_images(image_root: str | Path, paths: Iterator, limit: int = 10) -> tuple[list[str], int, int]:
    """(first ``limit`` missing paths, number missing, number checked) under ``image_root``.

    ``paths`` gives ``(where, path)`` pairs (as :func:`iter_image_paths`) or bare paths. Every path is resolved
    with :func:`~perckit.io.paths.resolve_under`: one that leaves the root raises :class:`ReleaseFormatError`
    naming ``where``, before any file is read."""
    root = Path(image_root)
    first: list[str] = []
    missing = checked = 0
    last = None
    for item in paths:
        where, p = item if isinstance(item, tuple) else ("M4Seg image path", item)
        if p == last:
            continue
        full = resolve_under(root, p, where)
        last = p
        checked += 1
        if not full.is_file():
            if full.exists():  # a FIFO, a device or a folder planted as an image
                raise ReleaseFormatError(f"{where}: expected a regular image file under image_root, got {p!r}, which is not one")
            missing += 1
            if len(first) < limit:
                first.append(p)
    return first, missing, checked


def read_image_bytes(opener: Callable, image_root: str | Path, rel_path: Any, where: str, limit: int | None = None) -> dict:
    """``{"path", "bytes"}`` of one source image under ``image_root`` (a local folder: ``opener`` is unused).

    The path must stay inside the root (:func:`~perckit.io.paths.resolve_under`) and name a regular file of at most
    ``limit`` bytes (default :data:`MAX_IMAGE_BYTES`); otherwise :class:`ReleaseFormatError` naming ``where``
    and the field. A missing file is a :class:`ReleaseNotFoundError`."""
    del opener
    path = resolve_under(image_root, rel_path, where)
    try:
        data = read_regular_file(path, where, MAX_IMAGE_BYTES if limit is None else limit, ReleaseFormatError, not_found=ReleaseNotFoundError)
    except ReleaseNotFoundError:
        raise ReleaseNotFoundError(f"{where}: source image {rel_path!r} not found under image_root {str(image_root)!r}") from None
    return {"path": rel_path, "bytes": data}
