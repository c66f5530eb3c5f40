"""M⁴Seg entity codes: the grammar, GT answer resolution, ``answer_span`` derivation and the model-output tokens
dropped from a predicted answer (:func:`clean_prediction_text`).

An answer links phrases to groundings with codes [loader]:

- object code ``<name>_<3 digits>``: image index (1st digit, 1-based), object instance (2nd-3rd);
- part code ``<name>_<5 digits>``: image index, parent object instance (2nd-3rd), part number (4th-5th).

``\\w+`` is greedy, so ``dining_table_101`` has the name part ``dining_table``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from ...errors import ReleaseFormatError, check_choice

#: One regex for both code kinds; a 3-digit and a 5-digit match can never overlap because of the ``\b``.
CODE_RE = re.compile(r"\b(\w+)_(\d{5}|\d{3})\b")
#: ``img_<k>`` keys of the native ``groundings`` object.
IMG_KEY_RE = re.compile(r"^img_(\d+)$")
NAME_STYLES = ("name", "name_instance")
_WS = re.compile(r"\s+")
#: ``(IMAGE<k>)`` tags of GLaMM/PRIMA-style output.
IMAGE_TAG = r"\(\s*IMAGE\s*(\d+)\s*\)"
_TOKENS = re.compile(r"<p>|</p>|\[SEG\]|" + IMAGE_TAG)


def image_of(digits: str) -> int:
    """The 1-based image index a code's digits name: their first digit."""
    return int(digits[0])


@dataclass(frozen=True)
class EntityCode:
    """One code occurrence in an answer."""

    text: str  #: the whole code, e.g. ``leg_20103``
    name: str  #: the name part, e.g. ``leg`` (underscores kept)
    digits: str
    start: int
    end: int

    @property
    def is_part(self) -> bool:
        return len(self.digits) == 5

    @property
    def image_index(self) -> int:
        """1-based image index (the first digit)."""
        return image_of(self.digits)

    @property
    def object_instance(self) -> int:
        """Object instance number (object code) or parent object instance (part code)."""
        return int(self.digits[1:3])

    @property
    def part_number(self) -> int | None:
        return int(self.digits[3:5]) if self.is_part else None

    @property
    def instance(self) -> int:
        """The number shown by ``resolved_name_style="name_instance"``: the part number of a part code,
        the object instance of an object code."""
        return self.part_number if self.is_part else self.object_instance


def parse_code(text: str) -> EntityCode | None:
    """The code when ``text`` is exactly one code, else None (``parse_code("chair_102").object_instance == 2``)."""
    m = CODE_RE.fullmatch(text)
    return None if m is None else EntityCode(m.group(0), m.group(1), m.group(2), 0, len(text))


def find_codes(answer: str) -> list[EntityCode]:
    """Every code occurrence of ``answer``, in text order."""
    return [EntityCode(m.group(0), m.group(1), m.group(2), m.start(), m.end()) for m in CODE_RE.finditer(answer)]


def collapse_ws(text: str) -> str:
    return _WS.sub(" ", text).strip()


def clean_prediction_text(text: str) -> str:
    """A model's answer as plain text: ``<p>``, ``</p>``, ``[SEG]`` and ``(IMAGE<k>)`` tokens dropped, whitespace collapsed."""
    return collapse_ws(_TOKENS.sub(" ", text or ""))


def display_name(name: str) -> str:
    """A label or code name as text: underscores become spaces, whitespace collapsed."""
    return collapse_ws(str(name).replace("_", " "))


def img_key_index(key: str, where: str = "groundings") -> int:
    """``img_10`` -> 10; anything else raises."""
    m = IMG_KEY_RE.match(str(key))
    if m is None:
        raise ReleaseFormatError(f"{where}: expected keys 'img_1', 'img_2', ..., found {key!r}")
    return int(m.group(1))


def sorted_img_keys(keys: Iterable[str], where: str = "groundings") -> list[str]:
    """``img_k`` keys sorted **numerically** (``img_10`` after ``img_9``)."""
    return sorted(keys, key=lambda k: img_key_index(k, where))


def resolve_answer(answer: str, groundings: Sequence[Mapping[str, Any]] = (), style: str = "name") -> str:
    """The GT answer as plain text (what a prediction's text is compared with).

    Each grounding's ``answer[start:end]`` becomes its ``name``; any other code becomes its name part; underscores
    become spaces and whitespace is collapsed. ``style="name_instance"`` appends the code's instance number
    (``chair_102`` -> ``chair 2``; a part code shows its part number)."""
    check_choice("resolved_name_style", style, NAME_STYLES)
    answer = answer or ""
    repl: list[tuple[int, int, str]] = []
    for g in groundings or ():
        span = g.get("answer_span") or []
        if len(span) != 2:
            continue
        s, e = int(span[0]), int(span[1])
        if not 0 <= s <= e <= len(answer):
            continue
        text = display_name(g.get("name") or "")
        if style == "name_instance":
            code = parse_code(answer[s:e])
            if code is not None:
                text = f"{text} {code.instance}"
        repl.append((s, e, text))
    repl.sort()
    # Drop overlapping grounding spans (keep the first) so the rewrite stays well defined.
    kept: list[tuple[int, int, str]] = []
    for r in repl:
        if not kept or r[0] >= kept[-1][1]:
            kept.append(r)
    for c in find_codes(answer):
        if any(s < c.end and c.start < e for s, e, _ in kept):
            continue
        text = display_name(c.name) + (f" {c.instance}" if style == "name_instance" else "")
        kept.append((c.start, c.end, text))
    kept.sort()
    out, pos = [], 0
    for s, e, text in kept:
        # A code is delimited by \b on both sides, so its replacement never glues two words together.
        out += (answer[pos:s], text)
        pos = e
    out.append(answer[pos:])
    return collapse_ws("".join(out))


def _first_mentions(answer: str) -> dict[int, list[re.Match]]:
    """Image index -> the first mention of each of its distinct codes, in order (``CODE_RE`` matches)."""
    first: dict[str, re.Match] = {}  # code -> its first mention, in text order
    for m in CODE_RE.finditer(answer):
        first.setdefault(m[0], m)
    out: dict[int, list[re.Match]] = {}
    for m in first.values():
        out.setdefault(image_of(m[2]), []).append(m)
    return out


def derive_spans(answer: str, counts: Mapping[int, int], where: str = "example") -> dict[int, list[list[int]]]:
    """``answer_span`` of every grounding when the release omits it.

    ``counts`` maps an image index k to the number of groundings of ``img_k``. The i-th distinct code of image k
    (first-mention order) is the i-th grounding of ``img_k``; its span is that first mention. Unequal code and
    grounding counts raise, naming the example and the image."""
    mentions = _first_mentions(answer)
    out: dict[int, list[list[int]]] = {}
    for k, n in counts.items():
        found = mentions.get(k, [])
        if len(found) != n:
            raise ReleaseFormatError(
                f"{where}: answer_span: cannot derive spans for image {k}: expected {n} distinct entity code(s) "
                f"with first digit {k} (one per grounding of 'img_{k}'), found {len(found)} "
                f"({[m.group(0) for m in found]}) in the answer"
            )
        out[k] = [[m.start(), m.end()] for m in found]
    return out


def span_code_problems(answer: str, groundings: Sequence[Mapping[str, Any]]) -> list[str]:
    """Consistency checks that warn but never raise: ``a[start:end]`` is a code whose first digit is ``image_index``."""
    problems = []
    for j, g in enumerate(groundings):
        span = g.get("answer_span") or []
        if len(span) != 2:
            continue
        text = answer[int(span[0]) : int(span[1])]
        code = CODE_RE.fullmatch(text)  # (parse_code's match, without its EntityCode: every row of a build comes here)
        if code is None:
            problems.append(f"groundings[{j}]: answer[{span[0]}:{span[1]}] = {text!r} is not an entity code")
        elif image_of(code.group(2)) != int(g.get("image_index") or 0):
            problems.append(
                f"groundings[{j}]: code {text!r} names image {image_of(code.group(2))}, but image_index is {g.get('image_index')}"
            )
    return problems
