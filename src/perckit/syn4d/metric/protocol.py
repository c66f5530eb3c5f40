"""The release's ``protocol.json`` checked against the rules perckit hard-codes.

The Syn4D release ships ``benchmark/protocol.json``: the frames, variants, scenes and cameras of the benchmark, the
tracking thresholds, the depth valid range, and each task's alignment rule and the aggregation, the last ones as
short sentences. perckit's scoring does not read it (the numbers are constants in :mod:`perckit.syn4d.metric` and
:mod:`perckit.syn4d.layout`, as in the official evaluator); the file runner reads it and refuses to score when the
two disagree, so that a release with another protocol is never scored by the wrong rules without a word.

Which sentence of the file corresponds to which implemented rule is our reading of it [inferred]: it is kept in this
one module, in :data:`EXPECTED`, and the check can be turned off (``check_protocol=False``,
``--no-check-protocol``). A field of the expected JSON type that disagrees refuses the run; a file that is not an
object, or fields that are missing or of another type, are our reading failing, not the release: one warning naming
the file, and the check is skipped (the file runner, through :func:`perckit.errors.inferred_reading`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import InferredShapeError, ReleaseFormatError, ReleaseNotFoundError
from ...io.jsonio import read_json
from ...io.paths import resolve_under
from ..layout import FRAME_INDICES, SCENES, VARIANTS, ReleasePaths
from . import DEPTH_MAX_M, DEPTH_MIN_M, DYNAMIC_WEIGHT, TRACKING_THRESHOLDS_M

PROTOCOL_FILE = "protocol.json"
#: ``protocol.json`` is a few KB; a larger file is refused before it is read.
MAX_PROTOCOL_BYTES = 1 << 20
MEDIAN_SCALE = "one median scale per sequence"
#: The GT-side label of a dynamic query (accumulated world path in metres); perckit reads the label from the NPY.
DYNAMIC_THRESHOLD_M = 0.01

#: ``(dotted field, the value perckit implements, how it is compared)``: ``"equal"`` (JSON value equal to
#: the hard-coded one, order included), ``"set"`` (same members, any order), ``"text"`` (the rule sentence,
#: compared after trimming spaces and ignoring case).
EXPECTED: tuple[tuple[str, Any, str], ...] = (
    ("input.frames", list(FRAME_INDICES), "equal"),
    ("input.variants", list(VARIANTS), "set"),
    ("input.scenes", list(SCENES), "set"),
    ("input.cameras", [0, 1], "set"),
    ("tracking.query_frame", 0, "equal"),
    ("tracking.coordinate_system", "OpenCV frame-0 camera coordinates", "text"),
    ("tracking.alignment", MEDIAN_SCALE, "text"),
    ("tracking.thresholds_m", list(TRACKING_THRESHOLDS_M), "equal"),
    ("tracking.dynamic_threshold_m", DYNAMIC_THRESHOLD_M, "equal"),
    ("tracking.score", f"{DYNAMIC_WEIGHT:g} * APD(all valid) + {1 - DYNAMIC_WEIGHT:g} * APD(dynamic valid)", "text"),
    ("depth.units", "meters", "text"),
    ("depth.alignment", MEDIAN_SCALE, "text"),
    ("depth.valid_range_m", [DEPTH_MIN_M, DEPTH_MAX_M], "equal"),
    ("pose.representation", "camera-to-world 4x4 matrices", "text"),
    ("pose.alignment", "normalize to frame 0, then one Sim(3) per sequence", "text"),
    ("aggregation", "macro average over sequences; also report by variant and scene", "text"),
)

_MISSING = object()


def find_protocol(paths: ReleasePaths) -> Path | None:
    """``B/protocol.json`` when the release has one (a symbolic link out of ``B`` is refused), else None."""
    if not (paths.benchmark / PROTOCOL_FILE).is_file():
        return None
    return resolve_under(paths.benchmark, PROTOCOL_FILE, f"Syn4D release {str(paths.root)!r}: protocol")


def read_protocol(path: str | Path) -> Mapping[str, Any]:
    """The parsed ``protocol.json`` (a JSON object; repeated keys refused, at most :data:`MAX_PROTOCOL_BYTES`;
    another JSON value: :class:`~perckit.errors.InferredShapeError`)."""
    data = read_json(path, ReleaseFormatError, ReleaseNotFoundError, limit=MAX_PROTOCOL_BYTES)
    if not isinstance(data, Mapping):
        raise InferredShapeError(f"{str(path)!r}: expected a JSON object, got {type(data).__name__}")
    return data


def _lookup(protocol: Mapping[str, Any], dotted: str) -> Any:
    node: Any = protocol
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _agrees(actual: Any, expected: Any, how: str) -> bool:
    if how == "text":
        return isinstance(actual, str) and " ".join(actual.split()).casefold() == " ".join(expected.split()).casefold()
    if how == "set":
        return isinstance(actual, list) and len(actual) == len(expected) and sorted(map(repr, actual)) == sorted(map(repr, expected))
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(
            type(a) is not bool and a == e for a, e in zip(actual, expected))
    return type(actual) is not bool and actual == expected


def check_protocol(protocol: Mapping[str, Any], where: str) -> None:
    """Raise :class:`ReleaseFormatError` naming ``where``, the field, perckit's value and the file's at the
    first field of :data:`EXPECTED` that disagrees; when none does but one is missing or of another JSON type
    (the fields are [inferred]: the card names none), :class:`~perckit.errors.InferredShapeError` naming them."""
    other_shape = []
    for dotted, expected, how in EXPECTED:
        actual = _lookup(protocol, dotted)
        kind = str if how == "text" else list if isinstance(expected, list) else (int, float)
        if actual is _MISSING or not isinstance(actual, kind) or type(actual) is bool:
            other_shape.append(f"{dotted!r}: expected {expected!r}, got {'no such field' if actual is _MISSING else repr(actual)[:80]}")
        elif not _agrees(actual, expected, how):
            raise ReleaseFormatError(f"{where}, field {dotted!r}: expected {expected!r} (the rule perckit implements), got "
                                     f"{repr(actual)[:200]}; this release follows another protocol than the one perckit scores; "
                                     f"pass check_protocol=False (--no-check-protocol) to score with perckit's rules anyway")
    if other_shape:
        raise InferredShapeError(f"{where}: fields of another shape than perckit reads: {'; '.join(other_shape)}")
