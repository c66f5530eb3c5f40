"""Hand-crafted Parquet files for the size-guard tests: :func:`under_declare` rewrites a file's Thrift footer so that
every large column chunk declares a small uncompressed size (same byte lengths, nothing else moves): the footer
lies, the pages do not (tests/test_core_parquet_guard.py, tests/test_core_export_trust.py)."""

from __future__ import annotations

from pathlib import Path


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = out = 0
    while True:
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, pos
        shift += 7


def _i64_spans(buf: bytes, wanted: set) -> list[tuple[int, int]]:
    """Byte spans of the i64 fields at the Thrift paths in ``wanted`` (tuples of field ids, list levels
    skipped) of a compact-protocol FileMetaData."""
    spans: list[tuple[int, int]] = []

    def value(pos: int, ftype: int, path: tuple) -> int:
        if ftype in (1, 2):
            return pos
        if ftype == 3:
            return pos + 1
        if ftype in (4, 5, 6):
            start = pos
            _, pos = _varint(buf, pos)
            if ftype == 6 and path in wanted:
                spans.append((start, pos))
            return pos
        if ftype == 7:
            return pos + 8
        if ftype == 8:
            n, pos = _varint(buf, pos)
            return pos + n
        if ftype in (9, 10):
            head = buf[pos]
            pos += 1
            size, etype = head >> 4, head & 0x0F
            if size == 15:
                size, pos = _varint(buf, pos)
            for _ in range(size):
                pos = pos + 1 if etype in (1, 2) else value(pos, etype, path)
            return pos
        if ftype == 11:
            size, pos = _varint(buf, pos)
            if size:
                kv = buf[pos]
                pos += 1
                for _ in range(size):
                    pos = value(pos, kv >> 4, path)
                    pos = value(pos, kv & 0x0F, path)
            return pos
        if ftype == 12:
            return struct_(pos, path)
        raise AssertionError(ftype)

    def struct_(pos: int, path: tuple) -> int:
        last = 0
        while True:
            head = buf[pos]
            pos += 1
            if head == 0:
                return pos
            delta, ftype = head >> 4, head & 0x0F
            if delta:
                fid = last + delta
            else:
                z, pos = _varint(buf, pos)
                fid = (z >> 1) ^ -(z & 1)
            pos = value(pos, ftype, path + (fid,))
            last = fid

    struct_(0, ())
    return spans


def _padded_varint(value: int, length: int) -> bytes:
    """``value`` zigzag-encoded as a varint of exactly ``length`` bytes (non-minimal, as Thrift accepts)."""
    z = value << 1
    out = bytearray()
    for _ in range(length - 1):
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    assert z < 0x80
    out.append(z)
    return bytes(out)


def under_declare(path: Path, declared: int = 1000) -> None:
    """Rewrite the footer of ``path`` in place: every column chunk's total_uncompressed_size (and every row
    group's total_byte_size) becomes ``declared``, same byte lengths, so nothing else moves."""
    data = bytearray(path.read_bytes())
    assert data[-4:] == b"PAR1"
    n = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - n
    footer = bytes(data[start:len(data) - 8])
    # FileMetaData.row_groups(4) -> RowGroup.columns(1) -> ColumnChunk.meta_data(3) -> total_uncompressed_size(6);
    # RowGroup.total_byte_size(2)
    spans = _i64_spans(footer, {(4, 1, 3, 6), (4, 2)})
    assert spans
    rewritten = 0
    for s, e in spans:
        z, _ = _varint(footer, s)
        if (z >> 1) > declared:  # the small columns keep their (already small) sizes
            data[start + s:start + e] = _padded_varint(declared, e - s)
            rewritten += 1
    assert rewritten
    path.write_bytes(bytes(data))
