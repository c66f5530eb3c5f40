"""The M4Seg native example converter of before issue 32, one example at a time with every mask converted as its
grounding is read (``rle.to_rle``) and the boxes computed per example: the reference the batch conversion
(``perckit.m4seg.rows.native_rows``: the masks of many examples by one ``rle.to_rles``, their boxes by one
pycocotools call, entity-code warnings looked for only where a span was given) is tested against, row for row and
message for message (tests/test_m4seg_native_reader.py, tests/test_m4seg_fuzz.py). The example-level reading (ids,
answer, images, grounding keys, mask sizes, derived spans, the grounding fields) is the build's own
``perckit.m4seg.rows.native_parts``: one reader of the format. Test-only.
"""

from __future__ import annotations

from typing import Any, Mapping

from perckit import rle as rle_ops
from perckit.m4seg.metric import codes
from perckit.m4seg.rows import ConvertState, _bboxes, mask_where, native_parts


def native_to_row(example: Mapping[str, Any], state: ConvertState, example_id: str | None = None) -> dict:
    """One native example as a builder row: :func:`perckit.m4seg.rows.native_parts`, then each mask by
    ``rle.to_rle`` in grounding order (the first refusal raised, then the grounding's own), then the boxes of the
    example and its entity-code warnings."""
    row, masks, error, _ = native_parts(example, state, example_id)
    for g, obj, hw, k, i in masks:
        g["segmentation"] = rle_ops.to_rle(obj, size=hw, where=mask_where(state, row["example_id"], k, i, hw))
    if error is not None:
        raise error
    for g, box in zip(row["groundings"], _bboxes([g["segmentation"] for g in row["groundings"]])):
        g["bbox"] = box
    problems = codes.span_code_problems(row["a"], row["groundings"])
    if problems:
        state.warn_spans(row["example_id"], problems)
    return row
