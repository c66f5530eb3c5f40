"""The fast path of the native reader: a list file decompressed in large chunks, each top-level example's
bytes found by a compiled scanner, parsed by ``orjson`` a chunk at a time.

It is an accelerator, never an authority: :func:`fast_items` yields ``(index, example)`` for the examples it
can prove the reference reader (ijson through :class:`perckit.m4seg.native.JsonGuard`) would give the same
value for, and :data:`FALLBACK` at the first place it cannot; the caller then re-reads the file with the
reference reader from that example on, which gives the row or raises the exact message. What it proves:

- the top level is ``[`` ws example (``,`` example)* ``]`` ws (one UTF-8 BOM skipped at the very start), every
  example an object, nesting within :data:`~perckit.m4seg.native.MAX_JSON_DEPTH`, no example longer than half
  of :data:`~perckit.m4seg.native.MAX_EXAMPLE_BYTES` (every read is capped: compressed reads of
  :data:`READ_BYTES`, decompressed output of at most :data:`CHUNK_BYTES` per step), one gzip member, nothing
  after it, its CRC and length checked by zlib;
- no object repeats a key: the scanner counts the colons outside strings of every example (one per key)
  and compares them with those of orjson's re-serialisation of the parsed example (one per distinct key);
- no integer literal of 19 or more digits (yajl refuses above 2**63 - 1, orjson would give a float or an
  unsigned int). An example that orjson refuses (a lone surrogate escape, which yajl reads as '?') or that
  carries such a number is parsed alone by ijson instead; only an error there falls back.

Without numba the scanner does not exist and :func:`available` is False: the reference reader runs.
"""

from __future__ import annotations

import io
import zlib
from functools import lru_cache
from typing import Any, BinaryIO, Iterator

import numpy as np

from .. import _kernels
from ..jsonio import UTF8_BOM
from .native import MAX_EXAMPLE_BYTES
from .native import MAX_JSON_DEPTH
from .native import iter_items

#: Largest decompressed output of one step (the parsed examples of one step are held at once).
CHUNK_BYTES = 1 << 20
#: Size of one read of compressed bytes.
READ_BYTES = 1 << 18
#: Longest example the fast path holds; a longer one falls back (the reference then refuses it or reads it).
MAX_FAST_EXAMPLE = MAX_EXAMPLE_BYTES // 2
#: Yielded instead of an example where the fast path cannot vouch for what follows.
FALLBACK: Any = object()

# scanner state slots
_PHASE, _DEPTH, _IN_STR, _ESC, _COLONS, _START, _DIGITS, _FLAG = range(8)
# top-level phases: before '[', after '[', after an example, after ',', after ']', inside an example
_BEFORE, _OPENED, _AFTER_ITEM, _AFTER_COMMA, _CLOSED, _IN_ITEM = range(6)


@lru_cache(maxsize=1)
def item_scanner():
    """The compiled ``scan(buf, pos, state, starts, ends, colons, flags) -> (n, odd)``, or None without numba.

    Scans ``buf[pos:]`` from ``state`` (updated in place): for every example closed in it, its byte range
    ``[starts[k], ends[k])``, its colons outside strings and a flag (1: an integer literal of 19+ digits).
    ``odd`` is 1 at the first byte that breaks the top-level grammar or nests deeper than the limit."""
    numba = _kernels._numba()
    if numba is None:
        return None
    max_item_depth = MAX_JSON_DEPTH - 1  # the list is level 1

    @numba.njit(cache=True, nogil=True)
    def scan(buf, pos, state, starts, ends, colons, flags):  # pragma: no cover - compiled
        phase = state[0]
        depth = state[1]
        in_str = state[2]
        esc = state[3]
        nc = state[4]
        istart = state[5]
        drun = state[6]
        flag = state[7]
        n = 0
        odd = 0
        p = pos
        size = buf.shape[0]
        while p < size:
            c = buf[p]
            if phase == 5:
                if in_str:
                    if esc:
                        esc = 0
                    elif c == 92:
                        esc = 1
                    elif c == 34:
                        in_str = 0
                elif c == 34:
                    in_str = 1
                    drun = 0
                elif c >= 48 and c <= 57:
                    drun += 1
                    if drun >= 19:
                        flag = 1
                else:
                    drun = 0
                    if c == 58:
                        nc += 1
                    elif c == 123 or c == 91:
                        depth += 1
                        if depth > max_item_depth:
                            odd = 1
                            break
                    elif c == 125 or c == 93:
                        depth -= 1
                        if depth == 0:
                            starts[n] = istart
                            ends[n] = p + 1
                            colons[n] = nc
                            flags[n] = flag
                            n += 1
                            phase = 2
            elif c == 32 or c == 10 or c == 13 or c == 9:
                pass
            elif phase == 0:
                if c == 91:
                    phase = 1
                else:
                    odd = 1
                    break
            elif phase == 1 or phase == 3:
                if c == 123:
                    phase = 5
                    depth = 1
                    istart = p
                    nc = 0
                    flag = 0
                    drun = 0
                    in_str = 0
                    esc = 0
                elif c == 93 and phase == 1:
                    phase = 4
                else:
                    odd = 1
                    break
            elif phase == 2:
                if c == 44:
                    phase = 3
                elif c == 93:
                    phase = 4
                else:
                    odd = 1
                    break
            else:
                odd = 1
                break
            p += 1
        state[0] = phase
        state[1] = depth
        state[2] = in_str
        state[3] = esc
        state[4] = nc
        state[5] = istart
        state[6] = drun
        state[7] = flag
        return n, odd

    return scan


def available() -> bool:
    """Whether the fast path can run (numba importable)."""
    return item_scanner() is not None


def _orjson():
    import orjson

    return orjson


class _Scan:
    """One scanner run over a buffer: the examples it closed (positions relative to the buffer)."""

    def __init__(self, buf: bytes, pos: int, state: np.ndarray) -> None:
        arr = np.frombuffer(buf, dtype=np.uint8)
        cap = (len(buf) - pos) // 2 + 1
        self.starts = np.empty(cap, dtype=np.int64)
        self.ends = np.empty(cap, dtype=np.int64)
        self.colons = np.empty(cap, dtype=np.int64)
        self.flags = np.empty(cap, dtype=np.int64)
        n, odd = item_scanner()(arr, pos, state, self.starts, self.ends, self.colons, self.flags)
        self.n, self.odd = int(n), bool(odd)


def _colons_of(items: list) -> np.ndarray | None:
    """Colons outside strings of every item of ``items`` as orjson serialises them (one per distinct key)."""
    out = _orjson().dumps(items)
    scan = _Scan(out, 0, np.zeros(8, dtype=np.int64))
    if scan.odd or scan.n != len(items):
        return None
    return scan.colons[: scan.n]


def _ijson_one(ijson_mod: Any, raw: bytes, where: str, index: int) -> Any:
    """The example ``raw`` parsed alone by ijson with the reference's repeated-key check, or FALLBACK."""
    try:
        for _, ex in iter_items(ijson_mod, io.BytesIO(b"[" + raw + b"]"), "list", where, index):
            return ex
    except Exception:  # noqa: BLE001 - any refusal: the reference reader raises the exact message
        return FALLBACK
    return FALLBACK


def _parse_run(ijson_mod: Any, buf: bytes, scan: _Scan, first: int, where: str) -> list:
    """The examples the scan closed, parsed; FALLBACK in place of the first one that cannot be vouched for
    (the list stops there)."""
    orjson = _orjson()
    n = scan.n
    starts, ends = scan.starts[:n], scan.ends[:n]
    try:
        items = orjson.loads(b"[" + buf[int(starts[0]):int(ends[-1])] + b"]")
    except orjson.JSONDecodeError:
        items = []
        for s, e in zip(starts.tolist(), ends.tolist()):
            try:
                items.append(orjson.loads(buf[s:e]))
            except orjson.JSONDecodeError:
                items.append(None)  # parsed by ijson below
    suspect = scan.flags[:n] != 0
    if any(x is None for x in items):
        suspect |= np.array([x is None for x in items])
    good = np.flatnonzero(~suspect)
    counted = _colons_of([items[k] for k in good.tolist()]) if good.size else None
    if counted is None:
        suspect[good] = True
    else:
        suspect[good[counted != scan.colons[:n][good]]] = True
    if suspect.any():
        for k in np.flatnonzero(suspect).tolist():
            ex = _ijson_one(ijson_mod, buf[int(starts[k]):int(ends[k])], where, first + k)
            items[k] = ex
            if ex is FALLBACK:
                return items[: k + 1]
    return items


def fast_items(ijson_mod: Any, f: BinaryIO, where: str, start: int = 0, stop: int | None = None,
               parse_skipped: bool = True) -> Iterator[tuple[int, Any]]:
    """``(index, example)`` of the examples ``start`` .. ``stop`` of a native list file, then, if the fast path
    could not vouch for everything, one ``(index, FALLBACK)``: the reference reader takes over at ``index``.

    Examples before ``start`` are parsed and checked too when ``parse_skipped`` (as the reference reader
    does without a seek offset), else only scanned."""
    state = np.zeros(8, dtype=np.int64)
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    pending = b""  # the bytes of the example still open (or the first bytes, before the BOM check)
    started = False
    index = 0
    while True:
        try:
            data = d.decompress(d.unconsumed_tail, CHUNK_BYTES) if d.unconsumed_tail else b""
            if not data and not d.eof:
                comp = f.read(READ_BYTES)
                data = d.decompress(comp, CHUNK_BYTES)  # (an empty read drains what zlib still holds)
                truncated = not comp and not data and not d.eof
            else:
                truncated = False
            ended = d.eof and not d.unconsumed_tail
            extra = ended and bool(d.unused_data or f.read(1))
        except (zlib.error, OSError, EOFError):
            yield index, FALLBACK
            return
        if extra or truncated:
            yield index, FALLBACK  # trailing bytes, another gzip member, or a cut stream
            return
        buf = pending + data
        if not started:
            if len(buf) < len(UTF8_BOM) and UTF8_BOM.startswith(buf) and not ended:
                pending = buf
                continue
            started = True
            if buf.startswith(UTF8_BOM):
                buf = buf[len(UTF8_BOM):]
        pos = len(pending) if state[_PHASE] == _IN_ITEM else 0
        if state[_PHASE] == _IN_ITEM:
            state[_START] = 0
        scan = _Scan(buf, pos, state)
        if scan.n:
            first = index
            take = scan.n
            if stop is not None:
                take = min(take, max(stop - index, 0))
            scan.n = take
            if index + take > start and take:
                skip = max(start - index, 0)
                if not parse_skipped and skip:
                    scan.starts, scan.ends = scan.starts[skip:], scan.ends[skip:]
                    scan.colons, scan.flags = scan.colons[skip:], scan.flags[skip:]
                    scan.n -= skip
                    first += skip
                items = _parse_run(ijson_mod, buf, scan, first, where)
                for k, ex in enumerate(items):
                    if ex is FALLBACK:
                        yield first + k, FALLBACK
                        return
                    if first + k >= start:
                        yield first + k, ex
            elif parse_skipped and take:
                items = _parse_run(ijson_mod, buf, scan, first, where)
                if items and items[-1] is FALLBACK:
                    yield first + len(items) - 1, FALLBACK
                    return
            index += take
            if stop is not None and index >= stop:
                return
        if scan.odd:
            yield index, FALLBACK
            return
        if state[_PHASE] == _IN_ITEM:
            pending = buf[int(state[_START]):]
            if len(pending) > MAX_FAST_EXAMPLE:
                yield index, FALLBACK
                return
        else:
            pending = b""
        if ended or truncated:
            if state[_PHASE] != _CLOSED:
                yield index, FALLBACK
            return
