"""A cheap check of encoded images that builders store as bytes (decoded later, by whoever reads the row).

Decoding every frame at build time would double the build of an image-heavy config; reading the header
and looking for the format's end marker costs next to nothing and catches what actually happens to files:
a cut download or copy. Pillow's decompression-bomb check runs on the header, too.
"""

from __future__ import annotations

import io
import zlib

import numpy as np

from .errors import ReleaseFormatError

#: JPEG: the end-of-image marker FF D9 must be in the last bytes (it cannot occur in entropy-coded data,
#: where FF is always followed by 00 or a restart marker D0..D7; some writers pad after it).
_JPEG_TAIL = 1024
#: PNG: the IEND chunk (12 bytes) ends the file.
_PNG_TAIL = 64


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """``(H, W)`` from the first SOF segment of a JPEG, or None when the marker walk finds anything unusual."""
    n = len(data)
    i = 2
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:  # markers without a length
            i += 2
            continue
        if marker in (0xD8, 0xD9, 0xDA):  # a second SOI, EOI or the scan before any frame header
            return None
        length = (data[i + 2] << 8) | data[i + 3]
        if length < 2 or i + 2 + length > n:
            return None
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if length < 7:
                return None
            return (data[i + 5] << 8) | data[i + 6], (data[i + 7] << 8) | data[i + 8]
        i += 2 + length
    return None


def _png_size(data: bytes) -> tuple[int, int] | None:
    """``(H, W)`` from a PNG's IHDR chunk (its CRC checked, as Pillow does), or None."""
    if len(data) < 33 or data[8:16] != b"\x00\x00\x00\rIHDR" or zlib.crc32(data[12:29]) != int.from_bytes(data[29:33], "big"):
        return None
    return int.from_bytes(data[20:24], "big"), int.from_bytes(data[16:20], "big")


def _fast_header(data: bytes) -> tuple[int, int, str] | None:
    """The size and format of a well-formed JPEG or PNG header without Pillow (which spends ~90 µs parsing
    every JPEG's tables: a third of an image-heavy build); None sends the image through Pillow."""
    from PIL import Image

    if data[:3] == b"\xff\xd8\xff":
        hw, fmt = _jpeg_size(data), "JPEG"
    elif data[:8] == b"\x89PNG\r\n\x1a\n":
        hw, fmt = _png_size(data), "PNG"
    else:
        return None
    if hw is None or hw[0] == 0 or hw[1] == 0:
        return None
    limit = Image.MAX_IMAGE_PIXELS
    if limit is not None and hw[0] * hw[1] > limit:  # Pillow's decompression-bomb warning or error
        return None
    return hw[0], hw[1], fmt


def check_encoded_image(data: bytes, where: str, error: type[Exception] = ReleaseFormatError) -> tuple[int, int]:
    """``(H, W)`` from the header of encoded image bytes; an unreadable header, a decompression bomb, or a
    JPEG / PNG without its end marker (a truncated file) raises ``error`` naming ``where``."""
    from PIL import Image, UnidentifiedImageError

    fast = _fast_header(data)
    if fast is not None:
        h, w, fmt = fast
    else:
        try:
            with Image.open(io.BytesIO(data)) as im:
                w, h = im.size
                fmt = im.format
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
            raise error(f"{where}: expected a readable image, got: {e}") from None
    if fmt == "JPEG" and b"\xff\xd9" not in data[-_JPEG_TAIL:]:
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
