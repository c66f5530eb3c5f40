"""A cheap check of encoded images that builders store as bytes (decoded later, by whoever reads the row).

Decoding every frame at build time would double the build of an image-heavy config; reading the header
and looking for the format's end marker costs next to nothing and catches what actually happens to files:
a cut download or copy. Pillow reads the header (the one header reader: its own rules decide what is
readable), and its decompression-bomb check runs on it, too.
"""

from __future__ import annotations

import io

import numpy as np

from ..errors import ReleaseFormatError

#: JPEG: the end-of-image marker FF D9 must be in the last bytes (it cannot occur in entropy-coded data,
#: where FF is always followed by 00 or a restart marker D0..D7; some writers pad after it).
_JPEG_TAIL = 1024
#: PNG: the IEND chunk (12 bytes) ends the file.
_PNG_TAIL = 64


def check_encoded_image(data: bytes, where: str, error: type[Exception] = ReleaseFormatError) -> tuple[int, int]:
    """``(H, W)`` from the header of encoded image bytes, as Pillow reads it (about 40 µs for a JPEG: its
    tables are parsed too); a header Pillow cannot read, a decompression bomb, or a JPEG / PNG without its end
    marker (a truncated file) raises ``error`` naming ``where``."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as im:
            w, h = im.size
            fmt = im.format
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise error(f"{where}: expected a readable image, got: {e}") from None
    if fmt in ("JPEG", "MPO") and b"\xff\xd9" not in data[-_JPEG_TAIL:]:  # MPO: a JPEG with more pictures
        raise error(f"{where}: expected a complete JPEG, got a truncated one (no end-of-image marker in its last bytes)")
    if fmt == "PNG" and b"IEND" not in data[-_PNG_TAIL:]:
        raise error(f"{where}: expected a complete PNG, got a truncated one (no IEND chunk at its end)")
    return int(h), int(w)


def mask_foreground(arr: np.ndarray, mode: str, threshold: int = 0) -> np.ndarray:
    """The one rule that turns a decoded mask image into a boolean mask, for every reader of mask PNGs.

    A pixel is foreground when **any of its stored channels, alpha included, exceeds** ``threshold``
    (R4D-Bench's official reader: "RGB/RGBA: any channel > 0"). So an RGBA mask drawn only in its alpha
    channel counts, and so does a coloured pixel. Gray and 16-bit images compare their values; palette
    images (``P``) compare their palette indices; a 1-bit image's set pixels are 255.
    """
    if mode == "1":
        arr = arr.astype(np.uint8) * 255
    if arr.ndim == 3:
        return (arr > threshold).any(axis=2)
    return arr > threshold
