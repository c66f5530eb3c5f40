"""The raw inputs of a metric checked against its declared features, before ``evaluate`` encodes them.

``evaluate`` stores every batch through ``datasets.Features.encode_batch`` and Arrow, and both coerce
values silently: ``Value("int32")`` turns ``1.9`` into 1, ``True`` into 1 and ``"3"`` into 3,
``Value("string")`` turns 5 into ``"5"``, ``Value("bool")`` turns 2 or ``"yes"`` into ``True``,
``Value("float32")`` turns ``1e300`` into ``inf``, ``Value("binary")`` turns ``"abc"`` into ``b"abc"``,
and on datasets 5.x ``List(Value("int32"))`` reads the string ``"12"`` as ``[1, 2]``. The metric would
then score a value the user never gave. :func:`compile_feature` turns a declared feature into a checker
that refuses all of these, naming the exact place (``predictions[0].frames[2].frame_id``).

The rules, per declared ``Value`` dtype (``None`` is always accepted: it is stored as null and the
metric decides whether it is allowed):

- integers (``int8`` ... ``uint64``): an ``int`` or numpy integer inside the dtype's range, or a finite
  float with no fractional part (``2.0``); never a bool, a string, a fraction, NaN or an out-of-range value;
- floats (``float16`` / ``float32`` / ``float64``): a float or an int (not a bool, not a string) that the
  dtype can hold; NaN and infinities pass through unchanged, a finite value that would become infinite
  is refused;
- ``bool``: ``True`` / ``False`` (or numpy bools) only;
- ``string``: ``str`` only; ``binary``: ``bytes`` / ``bytearray`` only;
- sequences (``Sequence`` / ``List`` / ``LargeList`` / a list literal, ``Array2D`` ...): a list, a tuple or
  a numpy array (never a string, a dict or a set) of the declared length / shape, each item checked;
- dicts: a mapping with exactly the declared keys, each value checked.

Other features (``Image``, ``Audio``, ``ClassLabel``, other ``Value`` dtypes) are left to ``datasets``.

perckit's own records (an accumulator state's per-item records, :mod:`perckit.hf.accumulate`) are declared with the
same checkers and four declarations of this module, none of which needs ``datasets``: :class:`Scalar` (a dtype
with the range its values must lie in, finite unless a bound is infinite, NaN only when declared; an integer
must be an ``int``, never ``2.0``), :class:`Nullable` (``None`` allowed there), :class:`OptionalKey` (a dict key
that may be absent) and :class:`Positional` (a list of a fixed length whose items differ, named in messages).
Compiled with ``nulls=False``, ``None`` is refused everywhere it is not declared :class:`Nullable`.

A good batch costs little: the checkers are built once per metric, paths are only built when a value is
refused, flat lists of numbers are checked with C-speed builtins (``set(map(type, ...))``, ``min``,
``max``) and numpy arrays with one vectorised pass over the whole array.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import Any

import numpy as np

from ..errors import short_repr

_INT_RANGES = {f"int{b}": (-(1 << (b - 1)), (1 << (b - 1)) - 1) for b in (8, 16, 32, 64)}
_INT_RANGES.update({f"uint{b}": (0, (1 << b) - 1) for b in (8, 16, 32, 64)})
_FLOAT_MAX = {"float16": 65504.0, "half": 65504.0, "float32": float(np.finfo(np.float32).max), "float": float(np.finfo(np.float32).max),
              "float64": math.inf, "double": math.inf}
_NUMPY_FLOAT = {"float16": np.float16, "half": np.float16, "float32": np.float32, "float": np.float32}
_SEQUENCE_CLASSES = ("Sequence", "List", "LargeList")
_NONE = type(None)
_LISTS = frozenset({list, tuple, _NONE})
_ARRAY_CLASSES = ("Array2D", "Array3D", "Array4D", "Array5D")


@dataclass(frozen=True)
class Scalar:
    """A declared scalar of a perckit record: ``dtype`` a ``Value`` dtype name (``int64``, ``float64``, ``bool``,
    ``string``); numbers lie in ``[lo, hi]`` (``None``: the dtype's range, finite for floats; an infinite bound lets
    that infinity through) and are NaN only when ``nan``. An integer must be an ``int`` (or numpy integer)."""

    dtype: str
    lo: float | None = None
    hi: float | None = None
    nan: bool = False


@dataclass(frozen=True)
class Nullable:
    """``feature``, or ``None`` (under ``compile_feature(..., nulls=False)``, where ``None`` is otherwise refused)."""

    feature: Any


@dataclass(frozen=True)
class OptionalKey:
    """A dict key that may be absent; when present, its value is ``feature``."""

    feature: Any


@dataclass(frozen=True)
class Positional:
    """A list (or tuple) of exactly ``len(fields)`` items, item ``i`` the ``i``-th feature of ``fields`` (a dict:
    name -> feature; the name stands in messages: ``.intersection``)."""

    fields: Mapping[str, Any]


class Refused(Exception):
    """A value a checker refuses; containers add their key / index to ``path`` on the way up."""

    def __init__(self, expected: str, value: Any, got: str | None = None) -> None:
        super().__init__(expected)
        self.expected = expected
        self.got = got if got is not None else describe(value)
        self.path: list[str] = []

    def message(self, where: str) -> str:
        return f"{where}{''.join(reversed(self.path))}: expected {self.expected}, got {self.got}"


def describe(value: Any) -> str:
    """``value`` for a message, cut to 120 characters; a value ``repr`` cannot show (an int over Python's 4,300
    digits, a list holding one, an object whose ``repr`` raises) by its size or its type."""
    try:
        return short_repr(value, 120)
    except Exception:  # noqa: BLE001 - any repr failure: the message must still be built
        return f"an integer of {value.bit_length()} bits" if isinstance(value, int) else f"a {type(value).__name__}"


def _array_got(arr: np.ndarray) -> str:
    return f"a numpy array of dtype {arr.dtype} and shape {arr.shape}"


# ---------------------------------------------------------------- leaves


class _Leaf:
    """A checker of one declared ``Value``; ``check_list`` checks a flat Python list of them at once."""

    kind = "any"
    expected = ""
    #: ``None`` is accepted (a metric input: stored as null, the metric decides); False under ``nulls=False``
    null = True

    def __call__(self, v: Any) -> None:  # pragma: no cover - every leaf overrides it
        raise NotImplementedError

    def _none(self, v: None) -> None:
        if not self.null:
            raise Refused(self.expected, v)

    def check_list(self, items: list | tuple) -> None:
        """A flat list (or tuple) of values: :meth:`fast` first, then value by value to find and name a refusal."""
        if not self.fast(items):
            _walk((i, self, x) for i, x in enumerate(items))

    def fast(self, col: list) -> bool:
        """True when every value of ``col`` (one field across many rows) is certainly accepted; False means
        "not sure": the caller then checks row by row (which finds the value, or accepts them all)."""
        return False

    def check_array(self, arr: np.ndarray) -> None:
        """A numpy array whose every element is one value of this leaf (the dtype decides, vectorised)."""
        _walk(((idx, self, arr[idx]) for idx in np.ndindex(arr.shape)), _index)


def _present(col: list, null: bool = True) -> tuple[set, list]:
    """The types of the values of ``col`` other than ``None``, and those values (``col`` itself when none is None);
    with ``null`` False a ``None`` stays in (its type then fails every "only these types" test)."""
    types = set(map(type, col))
    if _NONE in types and null:
        types.discard(_NONE)
        col = [x for x in col if x is not None]
    return types, col


def _index(idx: tuple) -> str:
    return "".join(f"[{i}]" for i in idx)


_item, _attr = "[{}]".format, ".{}".format


def _walk(steps: Any, step_name: Any = _item) -> None:
    """``check(value)`` for each ``(key, check, value)`` of ``steps``; a refusal gets ``step_name(key)`` on its path."""
    key = None
    try:
        for key, check, value in steps:
            check(value)
    except Refused as r:
        r.path.append(step_name(key))
        raise


def _raise_at(leaf: Any, arr: np.ndarray, bad: np.ndarray) -> None:
    """Refuse the first element of ``arr`` where ``bad`` holds (if any), with the leaf's own wording and its index."""
    if not bad.any():
        return
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    _walk([(idx, leaf, arr[idx].item())], _index)


def _bound(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


class _Number(_Leaf):
    """A numeric leaf: its native Python type first (:meth:`_native`), then ``None`` (:meth:`_none`), then any
    integer (:meth:`_integer`) or float (:meth:`_floating`); a boolean or anything else is refused."""

    native: type = int

    def __call__(self, v: Any) -> None:
        if type(v) is self.native:
            return self._native(v)
        if v is None:
            return self._none(v)
        if isinstance(v, (bool, np.bool_)):
            raise Refused(self.expected, v)
        if isinstance(v, (int, np.integer)):
            return self._integer(v)
        if isinstance(v, (float, np.floating)):
            return self._floating(v)
        raise Refused(self.expected, v)


class _Int(_Number):
    kind = "int"

    def __init__(self, dtype: str, lo: int | None = None, hi: int | None = None, exact: bool = False) -> None:
        """A ``Value`` integer dtype; a :class:`Scalar` narrows the range to ``[lo, hi]`` and is ``exact`` (a float
        such as ``2.0`` is refused: no storage step turns it into an int)."""
        self.dtype = dtype
        self.lo, self.hi = _INT_RANGES[dtype]
        self.exact = exact
        self.expected = "an integer"
        self.narrowed = lo is not None or hi is not None or exact
        if self.narrowed:
            self.lo = self.lo if lo is None else max(self.lo, math.ceil(lo))
            self.hi = self.hi if hi is None else min(self.hi, math.floor(hi))
            self.expected = f"an integer in [{self.lo}, {self.hi}]"

    def _range(self, v: Any, n: int) -> None:
        if not self.lo <= n <= self.hi:
            raise Refused(self.expected if self.narrowed else f"an integer in the {self.dtype} range [{self.lo}, {self.hi}]", v)

    def _native(self, v: int) -> None:
        if not self.lo <= v <= self.hi:
            self._range(v, v)

    def _integer(self, v: Any) -> None:
        self._range(v, int(v))

    def _floating(self, v: Any) -> None:
        if self.exact or not math.isfinite(v) or not float(v).is_integer():
            raise Refused(self.expected, v)
        self._range(v, int(v))

    def fast(self, col: list) -> bool:
        types, col = _present(col, self.null)
        return types <= {int} and (not col or (self.lo <= min(col) and max(col) <= self.hi))

    def check_array(self, arr: np.ndarray) -> None:
        kind = arr.dtype.kind
        if kind in "iu":
            if arr.size and (np.iinfo(arr.dtype).min < self.lo or np.iinfo(arr.dtype).max > self.hi):
                _raise_at(self, arr, (arr < self.lo) | (arr > self.hi))
            return
        if kind == "f":
            with np.errstate(invalid="ignore"):
                bad = ~np.isfinite(arr) | (arr != np.trunc(arr)) | (arr < self.lo) | (arr > self.hi)
            if self.exact:
                bad = np.ones(arr.shape, dtype=bool)
            _raise_at(self, arr, bad)  # with the right wording (fraction, NaN or range)
            return
        if kind == "O":
            return super().check_array(arr)
        raise Refused(f"integers ({self.dtype})", arr, _array_got(arr))


class _Float(_Number):
    kind = "float"
    native = float

    def __init__(self, dtype: str, lo: float | None = None, hi: float | None = None, nan: bool = True,
                 bounded: bool = False) -> None:
        """A ``Value`` float dtype (NaN and infinities pass: the metric decides); ``bounded`` (a :class:`Scalar`):
        every value lies in ``[lo, hi]`` (``None``: finite), NaN only when ``nan``."""
        self.dtype = dtype
        self.max = _FLOAT_MAX[dtype]
        self.bounded = bounded
        self.nan = nan
        self.expected = "a number"
        if bounded:
            finite = min(self.max, sys.float_info.max)
            self.lo = -finite if lo is None else float(lo)
            self.hi = finite if hi is None else float(hi)
            if lo is None and hi is None:
                text = "a finite number"
            elif hi is None:
                text = f"a finite number >= {_bound(lo)}"
            elif lo is None:
                text = f"a finite number <= {_bound(hi)}"
            else:
                text = f"a number in [{_bound(lo)}, {_bound(hi)}]"
            self.expected = text + (" or NaN" if nan else "")

    def _fits(self, v: Any, f: float) -> None:
        if self.max != math.inf and math.isfinite(f) and abs(f) > self.max:
            raise Refused(f"a number that fits in {self.dtype} (|x| <= {self.max:g})", v)
        if self.bounded and not self.lo <= f <= self.hi and not (self.nan and f != f):
            raise Refused(self.expected, v)

    def _native(self, v: float) -> None:
        if self.max != math.inf or self.bounded:
            self._fits(v, v)

    def _integer(self, v: Any) -> None:
        try:
            f = float(v)
        except OverflowError:
            raise Refused(self.expected if self.bounded else f"a number that fits in {self.dtype}", v) from None
        self._fits(v, f)

    def _floating(self, v: Any) -> None:
        self._fits(v, float(v))

    def fast(self, col: list) -> bool:
        types, col = _present(col, self.null)
        if not types <= {float, int} or not col:
            return not types
        if self.bounded:  # every value certainly in [lo, hi]: no NaN (which min / max skip)
            return types == {float} and not any(map(math.isnan, col)) and self.lo <= min(col) and max(col) <= self.hi
        if types == {float} and self.max == math.inf:
            return True
        return max(map(abs, col)) <= min(self.max, 1e308)  # NaN or a huge int: "not sure"

    def check_array(self, arr: np.ndarray) -> None:
        kind = arr.dtype.kind
        if self.bounded and kind in "fiu":
            if arr.size:
                with np.errstate(invalid="ignore"):
                    values = arr.astype(np.float64)
                    bad = ~((values >= self.lo) & (values <= self.hi))
                    if self.nan:
                        bad &= ~np.isnan(values)
                _raise_at(self, arr, bad)
            return
        if kind == "f":
            if self.max != math.inf and arr.dtype.itemsize > np.dtype(_NUMPY_FLOAT[self.dtype]).itemsize and arr.size:
                with np.errstate(invalid="ignore"):
                    bad = np.isfinite(arr) & (np.abs(arr) > self.max)
                _raise_at(self, arr, bad)
            return
        if kind in "iu":
            if self.max != math.inf and arr.size and arr.dtype.itemsize >= 4:
                _raise_at(self, arr, np.abs(arr.astype(np.float64)) > self.max)
            return
        if kind == "O":
            return super().check_array(arr)
        raise Refused(f"numbers ({self.dtype})", arr, _array_got(arr))


class _Typed(_Leaf):
    """A leaf that accepts exactly the Python types :attr:`types` (and ``None``) and the numpy dtype kinds
    :attr:`array_kinds` (``bool``, ``string`` and ``binary`` differ only in these class attributes)."""

    #: the exact Python types of an accepted value
    types: frozenset = frozenset()
    #: the numpy dtype kinds of an accepted array (``"O"`` arrays are checked element by element)
    array_kinds: str = ""
    #: what a refused array was expected to hold
    array_expected: str = ""
    #: the classes whose instances are accepted too (subclasses, numpy scalars)
    instances: tuple = ()

    def __call__(self, v: Any) -> None:
        if type(v) in self.types or isinstance(v, self.instances):
            return
        if v is None:
            return self._none(v)
        raise Refused(self.expected, v)

    def fast(self, col: list) -> bool:
        return set(map(type, col)) <= (self.types | {_NONE} if self.null else self.types)

    def check_array(self, arr: np.ndarray) -> None:
        if arr.dtype.kind in self.array_kinds:
            return
        if arr.dtype.kind == "O":
            return super().check_array(arr)
        raise Refused(self.array_expected, arr, _array_got(arr))


class _Bool(_Typed):
    kind = "bool"
    expected = "True or False"
    types = frozenset({bool})
    instances = (np.bool_,)
    array_kinds = "b"
    array_expected = "booleans"


class _String(_Typed):
    kind = "string"
    expected = "a string"
    types = frozenset({str})
    instances = (str,)
    array_kinds = "U"
    array_expected = "strings"

    def fast(self, col: list) -> bool:
        try:
            "".join(col)  # C-speed: a TypeError at the first value that is not a str
            return True
        except TypeError:
            return super().fast(col)


class _Binary(_Typed):
    kind = "binary"
    expected = "bytes"
    types = frozenset({bytes})
    instances = (bytes, bytearray)
    array_expected = "bytes"

class _Any:
    """A feature left to ``datasets`` (an ``Image``, a ``ClassLabel``, a ``Value`` of another dtype)."""

    leaf_depth = None
    null = True

    def __call__(self, v: Any) -> None:
        return None

    def fast(self, col: list) -> bool:
        return True


# ---------------------------------------------------------------- containers


class _Dict:
    leaf_depth = None

    def __init__(self, fields: dict[str, Any], null: bool = True) -> None:
        self.fields = [(k, v.feature if isinstance(v, OptionalKey) else v) for k, v in fields.items()]
        self.keys = frozenset(fields)
        #: the keys that must be there (:class:`OptionalKey` declares the others)
        self.required = frozenset(k for k, v in fields.items() if not isinstance(v, OptionalKey))
        #: ``None`` accepted (a nested dict of a metric input); False for a row of the batch or under ``nulls=False``
        self.null = null

    def fast(self, col: list) -> bool:
        types, col = _present(col, self.null)  # a None left in (null False) fails the dict-only test
        if not types <= {dict} or self.required != self.keys:
            return False
        if sum(map(len, col)) != len(self.keys) * len(col):  # with every declared key present: no other key
            return False
        try:
            return all(check.fast(list(map(itemgetter(k), col))) for k, check in self.fields)
        except KeyError:  # a declared key is missing somewhere
            return False

    def __call__(self, v: Any) -> None:
        if v is None and self.null:
            return
        if not isinstance(v, Mapping):
            raise Refused(f"a dict with the keys {sorted(self.keys)}", v, f"{type(v).__name__}: {describe(v)}")
        if v.keys() != self.keys and not (self.required <= v.keys() <= self.keys):
            missing = sorted(k for k in self.required if k not in v)
            extra = sorted((k for k in v if k not in self.keys), key=repr)
            want = f"exactly the keys {sorted(self.keys)}" if self.required == self.keys else \
                f"the keys {sorted(self.required)} and some of {sorted(self.keys - self.required)}"
            raise Refused(want, v, f"{sorted(v, key=repr)} (missing {missing}, unexpected {extra})")
        optional = self.required != self.keys
        _walk(((k, check, v[k]) for k, check in self.fields if not optional or k in v), _attr)


class _Positional:
    """A compiled :class:`Positional`: a list / tuple of ``len(fields)`` items, each checked by its own checker."""

    leaf_depth = None

    def __init__(self, fields: dict[str, Any], null: bool = True) -> None:
        self.fields = list(fields.items())
        self.null = null

    def __call__(self, v: Any) -> None:
        if v is None and self.null:
            return
        if type(v) not in (list, tuple) or len(v) != len(self.fields):
            names = ", ".join(name for name, _ in self.fields)
            got = f"{type(v).__name__}: {describe(v)}" if not isinstance(v, (list, tuple)) else f"{len(v)} items: {describe(v)}"
            raise Refused(f"a list [{names}]", v, got)
        _walk(((name, check, x) for (name, check), x in zip(self.fields, v)), _attr)

    def fast(self, col: list) -> bool:
        types = set(map(type, col))
        if not types <= {list, tuple} or not set(map(len, col)) <= {len(self.fields)}:
            return False
        return all(check.fast(list(map(itemgetter(i), col))) for i, (_, check) in enumerate(self.fields))


class _Seq:
    def __init__(self, item: Any, length: int = -1, null: bool = True) -> None:
        self.item = item
        self.length = -1 if length is None else length
        self.null = null
        #: how many sequence levels lead from here down to a leaf value (None: not a pure nest of numbers)
        if isinstance(item, _Leaf):
            self.leaf_depth, self.leaf = 1, item
        elif isinstance(item, _Seq) and item.leaf_depth is not None:
            self.leaf_depth, self.leaf = item.leaf_depth + 1, item.leaf
        else:
            self.leaf_depth, self.leaf = None, None

    def fast(self, col: list) -> bool:
        types = set(map(type, col))
        if _NONE in types and not self.null:
            return False
        if types <= _LISTS:
            if _NONE in types:
                col = [x for x in col if x is not None]
            if self.length >= 0 and not set(map(len, col)) <= {self.length}:
                return False
            return self.item.fast(list(chain.from_iterable(col)))
        if types <= _LISTS | {np.ndarray}:  # arrays: each checked whole (vectorised), lists as usual
            try:
                for x in col:
                    self(x)
            except Refused:
                return False
            return True
        return False

    def __call__(self, v: Any) -> None:
        if v is None:
            if self.null:
                return
            raise Refused("a list" if self.length < 0 else f"a list of {self.length}", v)
        t = type(v)
        if t is not list and t is not tuple:
            if isinstance(v, np.ndarray):
                return self.check_array(v)
            if isinstance(v, (str, bytes, bytearray, Mapping, set, frozenset)) or not (
                isinstance(v, (list, tuple)) or hasattr(v, "__array__")
            ):
                raise Refused("a list" if self.length < 0 else f"a list of {self.length}", v, f"{type(v).__name__}: {describe(v)}")
            if not isinstance(v, (list, tuple)):  # a tensor of another library
                return self.check_array(np.asarray(v))
        if self.length >= 0 and len(v) != self.length:
            raise Refused(f"a list of {self.length}", v, f"{len(v)} items: {describe(v)}")
        item = self.item
        if isinstance(item, _Leaf):
            return item.check_list(v)
        _walk((i, item, x) for i, x in enumerate(v))

    def check_array(self, arr: np.ndarray) -> None:
        if self.leaf_depth is None or arr.dtype.kind == "O":
            if arr.ndim == 0:
                raise Refused("a list", arr, _array_got(arr))
            if self.length >= 0 and len(arr) != self.length:
                raise Refused(f"a list of {self.length}", arr, _array_got(arr))
            return _walk((i, self.item, arr[i]) for i in range(len(arr)))
        shape, s = [], self
        while isinstance(s, _Seq):
            shape.append(s.length)
            s = s.item
        if arr.ndim != self.leaf_depth or any(n >= 0 and n != m for n, m in zip(shape, arr.shape)):
            want = "x".join("N" if n < 0 else str(n) for n in shape)
            raise Refused(f"a {self.leaf_depth}-D array (or nested lists) of shape {want}", arr, _array_got(arr))
        self.leaf.check_array(arr)


# ---------------------------------------------------------------- compile


def _value(dtype: str) -> _Leaf | _Any:
    """The leaf of a ``Value(dtype)`` (:class:`_Any`: one left to ``datasets``)."""
    if dtype in _INT_RANGES:
        return _Int(dtype)
    if dtype in _FLOAT_MAX:
        return _Float(dtype)
    if dtype == "bool":
        return _Bool()
    if dtype in ("string", "large_string"):
        return _String()
    return _Binary() if dtype in ("binary", "large_binary") else _Any()


def _scalar(s: Scalar) -> _Leaf:
    """The leaf of a :class:`Scalar` declaration."""
    if s.dtype in _INT_RANGES:
        return _Int(s.dtype, s.lo, s.hi, exact=True)
    if s.dtype in _FLOAT_MAX:
        return _Float(s.dtype, s.lo, s.hi, nan=s.nan, bounded=True)
    if s.lo is not None or s.hi is not None or s.nan:
        raise TypeError(f"Scalar({s.dtype!r}): a range or NaN is declared for numbers only")
    if s.dtype == "bool" or s.dtype in ("string", "large_string"):
        return _value(s.dtype)
    raise TypeError(f"Scalar: expected a number, bool or string dtype, got {s.dtype!r}")


def compile_feature(feature: Any, nulls: bool = True) -> Any:
    """A checker (a callable raising :class:`Refused`) for values of the declared ``feature``.

    ``nulls``: ``None`` is accepted wherever a value is declared (a metric input: stored as null, the metric
    decides); ``False`` (a perckit record): only where the declaration is :class:`Nullable`."""
    check = _compile(feature, nulls)
    if hasattr(check, "null"):
        check.null = nulls or isinstance(feature, Nullable)
    return check


def _compile(feature: Any, nulls: bool) -> Any:
    def sub(f: Any) -> Any:
        return compile_feature(f, nulls)

    if isinstance(feature, Nullable):
        return _compile(feature.feature, nulls)
    if isinstance(feature, Scalar):
        return _scalar(feature)
    if isinstance(feature, Positional):
        return _Positional({k: sub(v) for k, v in feature.fields.items()})
    if isinstance(feature, Mapping):
        return _Dict({k: OptionalKey(sub(v.feature)) if isinstance(v, OptionalKey) else sub(v) for k, v in feature.items()})
    if isinstance(feature, (list, tuple)):
        return _Seq(sub(feature[0]))
    name = type(feature).__name__
    if name == "Value":
        return _value(feature.dtype)
    if name in _SEQUENCE_CLASSES:
        inner = feature.feature
        if isinstance(inner, Mapping) and name == "Sequence":  # datasets 3.x: a dict of lists (or a list of dicts)
            return _SeqOfDict(sub(inner), {k: sub(type(feature)(v)) for k, v in inner.items()})
        return _Seq(sub(inner), getattr(feature, "length", -1))
    if name in _ARRAY_CLASSES:
        check: Any = _value(feature.dtype)
        if isinstance(check, (_Any, _String, _Binary)):  # arrays of numbers and bools only
            return _Any()
        for n in reversed(feature.shape):
            check = _Seq(check, -1 if n is None else n)
        return check
    return _Any()


#: The ``Value`` dtypes whose ``datasets`` encoding is a plain cast (``int(v)``, ``float(v)``, ``bool(v)``, ``str(v)``,
#: the value itself) that pyarrow's own conversion to the dtype makes too.
_CAST_DTYPES = frozenset(_INT_RANGES) | frozenset(_FLOAT_MAX) | {"bool", "string", "large_string", "binary", "large_binary"}


def arrow_direct(feature: Any) -> bool:
    """Whether checked rows of ``feature`` may go to Arrow as they are (``pyarrow.array`` with its Arrow type) instead of
    through ``datasets``' per-value ``encode_batch``: dicts, list literals and ``Sequence`` / ``List`` / ``LargeList`` (no
    fixed length; no ``Sequence`` of a dict) down to ``Value`` leaves of :data:`_CAST_DTYPES`.
    There pyarrow builds the array ``datasets`` writes, or raises (an int a float32 cannot hold exactly, a 2-D numpy
    array in a list field), as ``tests/test_benchmarks_metric_inputs.py`` checks against evaluate's own ``add_batch``."""
    if isinstance(feature, Mapping):
        return all(map(arrow_direct, feature.values()))
    if isinstance(feature, (list, tuple)):
        return len(feature) == 1 and arrow_direct(feature[0])
    name = type(feature).__name__
    if name in _SEQUENCE_CLASSES:
        inner = feature.feature  # datasets 3's Sequence of a dict takes a dict of lists too
        return getattr(feature, "length", -1) == -1 and not (name == "Sequence" and isinstance(inner, Mapping)) and arrow_direct(inner)
    return name == "Value" and feature.dtype in _CAST_DTYPES


class _SeqOfDict:
    """datasets 3.x ``Sequence({...})``: a list of dicts, or (the TFDS form evaluate accepts) a dict of lists."""

    leaf_depth = None
    null = True

    def __init__(self, item: _Dict, columns: dict[str, Any]) -> None:
        self.rows = _Seq(item)
        self.columns = _Dict(columns)

    def __call__(self, v: Any) -> None:
        if v is None and not self.null:
            raise Refused("a list", v)
        return self.columns(v) if isinstance(v, Mapping) else self.rows(v)

    def fast(self, col: list) -> bool:
        return set(map(type, col)) <= (_LISTS if self.null else {list, tuple}) and self.rows.fast(col)


def compile_rows(schema: Any) -> Any:
    """The checker of one row of a batch side (a top-level dict schema refuses ``None`` rows)."""
    check = compile_feature(schema)
    if isinstance(check, _Dict):
        check.null = False
    return check


def check_rows_type(rows: Any, side: str) -> str | None:
    """A message when ``rows`` (one side of a batch) is not a list of rows (a string, a dict, None ...)."""
    if rows is None or isinstance(rows, (str, bytes, Mapping)) or not hasattr(rows, "__len__"):
        return f"{side}: expected a list of rows, got {type(rows).__name__}: {short_repr(rows, 120)}"
    return None


def check_side(check: Any, rows: Any, side: str, one: bool = False) -> str | None:
    """The first refusal in ``rows`` (one side of a batch) as a message naming ``side[i]`` and the field;
    ``one``: ``rows`` is one row (``evaluate``'s ``add``), named ``side`` (``prediction``)."""
    if one:
        rows = [rows]
    else:
        bad = check_rows_type(rows, side)
        if bad:
            return bad
        if type(rows) in (list, tuple) and check.fast(rows):  # the common case: one pass per field, C-speed
            return None
    for i, row in enumerate(rows):
        try:
            check(row)
        except Refused as r:
            return r.message(side if one else f"{side}[{i}]")
    return None
