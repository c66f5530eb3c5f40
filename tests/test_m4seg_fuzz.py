"""Fuzzing the M4Seg parsers: random bytes, random JSON, structure-shaped random inputs, and the spec's test
vectors and the small release's examples with random edits.

Same contract and harness as tests/test_benchmarks_fuzz.py (tests/helpers/fuzz.py): an input either parses, or raises
a documented perckit error (a :class:`perckit.errors.PerckitError` with a message); anything else fails the
test, every call runs under an alarm so a Python-level hang fails too, and every test must reach both its
parser's accepting and refusing branch. Targets: the prediction file reader ``load_predictions_jsonl`` and its
per-line parser ``prediction_row``, the model-output parser ``parse_grounded_answer``, the metric's core on
random prediction and reference rows, and the release readers (the native JSON.gz stream, one native
example, and one Parquet record by the column path, compared with the record-by-record oracle). Example counts are those of tests/test_benchmarks_fuzz.py (``PERCKIT_FUZZ_EXAMPLES`` for a
longer run).
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pyarrow as pa
from helpers.fuzz import FUZZ, FUZZ_SLOW, documented_only, exercise, folder, json_rle_dicts, json_values, mutated, random_bytes, reaches, record, rle_dicts
from helpers.harness import deadline
from helpers.m4seg import S1_PRED, S1_REF, S2_PRED, S3_PRED, S4_PRED, S4_REF, parquet_records, small_examples
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from oracles.m4seg_native import native_to_row as oracle_native_row
from oracles.m4seg_parquet import parquet_to_row

from perckit.hf.builder import rows_to_table
from perckit.errors import PerckitError
from perckit.m4seg.read import predictions as m4io
from perckit.m4seg import metric as core
from perckit.m4seg.metric import codes as m4codes
from perckit.m4seg.read import native as m4native
from perckit.m4seg.read import parquet as m4parquet
from perckit.m4seg import rows as m4rows

ROW_SCHEMA = m4parquet.row_schema()

# ---------------------------------------------------------------- strategies

image_indexes = st.integers(-2, 4) | st.sampled_from(["1", "one", 1.0, 1.5, None, True]) | json_values
names = st.sampled_from(["chair", "table", "cup", "", None]) | json_values
small_masks = st.sampled_from([
    {"size": [1, 4], "counts": "022"}, {"size": [1, 4], "counts": "13"}, {"size": [1, 2], "counts": "011"},
    {"size": [1, 4], "counts": [0, 2, 2]}, {"size": [1, 2], "counts": "2"},
])
masks = small_masks | json_rle_dicts | json_values
groundings = st.fixed_dictionaries({"image_index": image_indexes, "name": names, "segmentation": masks}) | json_values
prediction_rows = st.fixed_dictionaries(
    {"example_id": st.sampled_from(["s1", "s2"]) | json_values, "a": st.text(max_size=30) | json_values,
     "groundings": st.lists(groundings, max_size=3) | json_values},
    optional={"extra": json_values},
) | json_values
jsonl_files = st.lists(prediction_rows, max_size=4).map(lambda rows: "\n".join(json.dumps(r) for r in rows))

TOKENS = ["<p>", "</p>", "[SEG]", "(IMAGE1)", "(IMAGE2)", "(IMAGE 0)", "( IMAGE12 )", "(IMAGE", ")", " ", "chair", "\n", "<p"]
grounded_text = st.lists(st.sampled_from(TOKENS) | st.text(max_size=5), max_size=16).map("".join) | st.text(max_size=60)
mask_values = (
    hnp.arrays(st.sampled_from([np.bool_, np.uint8, np.float32]), st.tuples(st.integers(0, 3), st.integers(0, 5)))
    | small_masks | rle_dicts | json_values
)
mask_lists = (
    st.lists(mask_values, max_size=4)
    | hnp.arrays(np.bool_, st.tuples(st.integers(0, 3), st.integers(1, 3), st.integers(1, 4)))
    | json_values
)

reference_groundings = st.fixed_dictionaries(
    {"image_index": image_indexes, "name": names, "answer_span": st.lists(st.integers(-1, 40), max_size=3) | json_values, "segmentation": masks}
) | json_values
references = st.fixed_dictionaries({
    "example_id": st.just("s1"),
    "a": st.sampled_from(["chair_101 near table_102 and cup_201", ""]) | json_values,
    "type": st.just("spatial"), "dataset_name": st.just("coco_objects"), "granularity": st.just("object"),
    "images": st.just([{"height": 1, "width": 4}, {"height": 1, "width": 2}])
    | st.lists(st.fixed_dictionaries({"height": st.integers(-1, 5) | json_values, "width": st.integers(-1, 5) | json_values}) | json_values, max_size=3)
    | json_values,
    "groundings": st.lists(reference_groundings, max_size=3) | json_values,
})

#: masks of the examples' image sizes whose runs do not sum to H*W (the batch scan must refuse them as to_rle does)
short_masks = st.sampled_from([{"size": [1, 4], "counts": "2"}, {"size": [1, 4], "counts": [1, 2]}, {"size": [1, 2], "counts": "0"}])
native_groundings = st.fixed_dictionaries(
    {"name": names, "segmentation": masks | short_masks | st.lists(st.lists(st.integers(-2, 6), max_size=8), max_size=2)},
    optional={"answer_span": st.lists(st.integers(-1, 40), max_size=3) | json_values, "annotation_id": json_values, "object_id": json_values},
) | json_values
native_examples = st.fixed_dictionaries(
    {
        "a": st.sampled_from(["chair_101 near table_102 and cup_201", "dog_101", ""]) | json_values,
        "image_paths": st.just(["a.jpg", "b.jpg"]) | st.lists(st.text(max_size=4), max_size=3) | json_values,
        "image_sizes": st.just([[1, 4], [1, 2]]) | st.just([[4, 1], [2, 1]]) | st.lists(st.lists(st.integers(-1, 5) | json_values, max_size=3), max_size=3) | json_values,
        "groundings": st.dictionaries(st.sampled_from(["img_1", "img_2", "img_3", "img_01", "image_1"]), st.lists(native_groundings, max_size=3) | json_values, max_size=3)
        | st.lists(native_groundings, max_size=3) | json_values,
    },
    optional={"pair_id": json_values, "example_id": json_values, "image_ids": json_values, "q": json_values, "type": json_values},
) | json_values
parquet_records_random = st.fixed_dictionaries(
    {
        "example_id": st.just("e") | json_values,
        "a": st.sampled_from(["chair_101 near table_102 and cup_201", ""]) | json_values,
        "images": st.lists(st.fixed_dictionaries({"image_id": json_values, "path": json_values, "height": st.integers(-1, 5) | json_values,
                                                  "width": st.integers(-1, 5) | json_values}) | json_values, max_size=3) | json_values,
        "groundings": st.lists(
            st.fixed_dictionaries({"image_index": image_indexes, "name": names, "annotation_ids": json_values, "object_annotation_id": json_values,
                                   "answer_span": st.lists(st.integers(-1, 40), max_size=3) | json_values, "bbox": json_values, "segmentation": masks})
            | json_values, max_size=3) | json_values,
    },
) | json_values

STUB = {"embed_fn": "stub", "metrics": ["miou", "recall", "i_ss", "i_siou", "ss", "siou"]}
REF = {
    "example_id": "s1", "a": "chair_101 near table_102 and cup_201", "type": "spatial", "dataset_name": "coco_objects",
    "granularity": "object", "images": [{"height": 1, "width": 4}, {"height": 1, "width": 2}],
    "groundings": [
        {"image_index": 1, "name": "chair", "answer_span": [0, 9], "segmentation": {"size": [1, 4], "counts": "022"}},
        {"image_index": 2, "name": "cup", "answer_span": [29, 36], "segmentation": {"size": [1, 2], "counts": "011"}},
    ],
}


def _check_prediction_row(row: dict) -> None:
    assert set(row) == {"example_id", "a", "groundings"} and isinstance(row["example_id"], str) and isinstance(row["a"], str)
    for g in row["groundings"]:
        assert set(g) == {"image_index", "name", "segmentation"} and isinstance(g["image_index"], int) and isinstance(g["name"], str)
        with deadline():
            exercise(g["segmentation"])


# ---------------------------------------------------------------- valid inputs, to be mutated

PREDICTIONS = [S1_PRED, S2_PRED, S3_PRED, S4_PRED]
#: Predictions paired with their reference (spec section 7).
PAIRS = [(S1_PRED, S1_REF), (S2_PRED, S1_REF), (S3_PRED, S1_REF), (S4_PRED, S4_REF)]
EXAMPLES = small_examples()
RECORDS = parquet_records(EXAMPLES)


def _lines(rows) -> str:
    """JSON lines, one a row (a mutated list of rows may have become one JSON value: that value)."""
    return "\n".join(json.dumps(r) for r in rows) if isinstance(rows, list) else json.dumps(rows)


valid_jsonl_rows = st.lists(st.sampled_from([S1_PRED, S4_PRED]), min_size=1, max_size=2, unique_by=lambda r: r["example_id"])


# ---------------------------------------------------------------- prediction files and model output


@reaches("load_predictions_jsonl")
@FUZZ
@given(content=random_bytes | jsonl_files | st.text(max_size=200) | mutated(valid_jsonl_rows).map(_lines))
@example(content=_lines([S1_PRED, S4_PRED]))
@example(content=_lines([S1_PRED, S1_PRED]))
def test_m4seg_jsonl_prediction_files(content):
    with folder() as d:
        p = d / "p.jsonl"
        p.write_bytes(content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content)
        rows = documented_only(m4io.load_predictions_jsonl, p)
        for row in rows or ():
            _check_prediction_row(row)
        if rows:
            assert len({r["example_id"] for r in rows}) == len(rows)


@reaches("prediction_row")
@FUZZ
@given(obj=prediction_rows | mutated(st.sampled_from(PREDICTIONS)))
@example(obj=S4_PRED)
@example(obj={**S1_PRED, "example_id": None})
def test_m4seg_prediction_row_random_objects(obj):
    row = documented_only(m4io.prediction_row, obj, "fuzz")
    if row is not None:
        _check_prediction_row(row)


@reaches("parse_grounded_answer")
@FUZZ
@given(text=grounded_text | json_values, masks=mask_lists, example_id=st.text(max_size=4) | json_values)
@example(text="a <p>chair</p> [SEG] (IMAGE1)", masks=[np.ones((1, 4), dtype=bool)], example_id="s1")
@example(text="a <p>chair</p> [SEG]", masks=[np.ones((1, 4), dtype=bool)], example_id="s1")
def test_m4seg_parse_grounded_answer_random_text(text, masks, example_id):
    row = documented_only(m4io.parse_grounded_answer, text, masks, example_id)
    if row is not None:
        assert row["a"] == (text or "")
        _check_prediction_row(row)
        with deadline():
            assert isinstance(m4codes.clean_prediction_text(row["a"]), str)


def _paired_with_s1(prediction):
    """Random predictions mostly get the reference's id "s1", so their fields are reached."""
    if isinstance(prediction, dict) and "example_id" in prediction:
        return {**prediction, "example_id": "s1"}
    return prediction


metric_cases = (
    st.tuples(prediction_rows.map(_paired_with_s1), references | st.just(REF))
    | st.sampled_from(PAIRS).flatmap(lambda pair: st.tuples(mutated(st.just(pair[0]), max_edits=1), mutated(st.just(pair[1]), max_edits=1)))
)


@reaches("compute")
@FUZZ_SLOW
@given(case=metric_cases, strict=st.booleans())
@example(case=(S1_PRED, S1_REF), strict=False)
@example(case=(S4_PRED, S1_REF), strict=True)
def test_m4seg_metric_core_random_rows(case, strict):
    prediction, reference = case
    out = documented_only(core.compute, [prediction], [reference], strict=strict, **STUB)
    if out is not None:
        for k in ("miou", "recall", "ss", "siou", "i_ss", "i_siou", "giou", "ciou"):
            assert out[k] is None or 0.0 <= out[k] <= 1.0 + 1e-9, (k, out[k])


# ---------------------------------------------------------------- release readers

native_files = (
    st.tuples(random_bytes | st.lists(native_examples, max_size=3).map(json.dumps).map(str.encode) | random_bytes.map(gzip.compress), st.booleans())
    # the small release's examples (each at most once), with at most one edit in the file; gzip-compressed
    | st.tuples(mutated(st.sets(st.sampled_from(range(len(EXAMPLES))), min_size=1).map(lambda ix: [EXAMPLES[i] for i in sorted(ix)]), max_edits=1)
                .map(json.dumps).map(str.encode), st.just(True))
)


@reaches("scan_native", "read_every_row")
@FUZZ_SLOW
@given(case=native_files, cut=st.floats(0, 1))
@example(case=(json.dumps(EXAMPLES).encode(), True), cut=1.0)
@example(case=(json.dumps([EXAMPLES[0], {**EXAMPLES[1], "image_sizes": [[3, 2]]}]).encode(), True), cut=1.0)
@example(case=(b"[", True), cut=1.0)
def test_m4seg_native_file_random_bytes(case, cut):
    """The native reader over random files: the prepass, then every row."""
    content, compress = case
    data = gzip.compress(content) if compress else content
    data = data[: max(1, int(len(data) * cut))] if cut < 0.2 else data
    with folder() as d:
        p = d / "m4seg_test.json.gz"
        p.write_bytes(data)
        scan = documented_only(m4native.scan_native, open, str(p), "test", need_count=True)
        if scan is not None:
            def read_every_row():
                return list(m4native.iter_native(open, m4native.native_shards(str(p), scan, 2), "test"))

            documented_only(read_every_row)


@reaches("native_to_row")
@FUZZ
@given(example=native_examples | mutated(st.sampled_from(EXAMPLES)), order=st.sampled_from(m4rows.SIZE_ORDERS))
@example(example=EXAMPLES[0], order="auto")
@example(example={**EXAMPLES[0], "image_sizes": [[1, 4]]}, order="auto")
def test_m4seg_native_to_row_random_examples(example, order):
    row = documented_only(m4rows.native_to_row, example, m4rows.ConvertState("test", "f", order, quiet=True), "e")
    if row is not None:
        assert isinstance(row["example_id"], str) and isinstance(row["a"], str)
        for g in row["groundings"]:
            im = row["images"][g["image_index"] - 1]
            assert g["segmentation"]["size"] == [im["height"], im["width"]] and len(g["answer_span"]) == 2


def _one_batch(record) -> pa.RecordBatch | None:
    """The record as a one-row record batch whose columns the builder reads, or None: Arrow cannot hold it, or
    ``check_parquet_schema`` refuses its columns (a shard like that is refused before any row is read)."""
    try:
        batch = pa.Table.from_pylist([record]).to_batches()[0]
        m4parquet.check_parquet_schema(batch.schema, "f")
    except (pa.ArrowException, TypeError, ValueError, OverflowError, AttributeError, KeyError, IndexError):
        return None
    return batch


def parquet_column_row(batch: pa.RecordBatch) -> dict:
    """The column path on a one-row batch (its name is what ``reaches`` counts)."""
    return m4parquet.batch_to_table(batch, m4rows.ConvertState("test", "f", quiet=True), ROW_SCHEMA).to_pylist()[0]


def _outcome(fn, *args):
    """``fn(*args)``: ("row", the row as the builder's table holds it) or ("error", type, message)."""
    try:
        row = fn(*args)
    except PerckitError as e:
        return ("error", type(e).__name__, str(e))
    return ("row", rows_to_table([row], ROW_SCHEMA).to_pylist()[0])


@reaches("parquet_column_row")
@FUZZ
@given(record=parquet_records_random | mutated(st.sampled_from(RECORDS)))
@example(record=RECORDS[1])
@example(record={**RECORDS[0], "images": RECORDS[0]["images"][:1]})
def test_m4seg_parquet_column_path_equals_the_oracle_on_random_records(record):
    """Every record Arrow can hold: the column path gives the row or the error the record-by-record oracle
    gives (tests/oracles/m4seg_parquet.parquet_to_row), message for message."""
    batch = _one_batch(record)
    if batch is None:
        return
    row = documented_only(parquet_column_row, batch)
    oracle = _outcome(parquet_to_row, batch.to_pylist()[0], m4rows.ConvertState("test", "f", quiet=True))
    assert _outcome(parquet_column_row, batch) == oracle
    if row is not None:
        for g in row["groundings"]:
            im = row["images"][g["image_index"] - 1]
            assert g["segmentation"]["size"] == [im["height"], im["width"]] and len(g["bbox"]) == 4


def _grounding_edit(example: dict, j: int, **edit) -> dict:
    """``example`` with its ``img_1`` grounding ``j`` updated by ``edit``."""
    import copy

    out = copy.deepcopy(example)
    out["groundings"]["img_1"][j].update(edit)
    return out


def native_batch_rows(examples: list, order: str, state: m4rows.ConvertState | None = None) -> tuple[list, tuple | None]:
    """The batch conversion of examples in order, as the native reader runs it (``native_parts`` of each until one
    refuses, then ``native_rows``): the rows before the first refusal and the refusal (its name is what
    ``reaches`` counts)."""
    state, parts, rows, error = state or m4rows.ConvertState("test", "f", order, quiet=True), [], [], None
    for ex in examples:
        try:
            parts.append(m4rows.native_parts(ex, state, "e"))
        except PerckitError as e:
            error = e
            break
    try:
        for row in m4rows.native_rows(parts, state):
            rows.append(row)
    except PerckitError as e:
        error = e
    return rows, None if error is None else ("error", type(error).__name__, str(error))


@reaches("native_batch_rows")
@FUZZ
@given(examples=st.lists(native_examples | mutated(st.sampled_from(EXAMPLES)), min_size=1, max_size=4), order=st.sampled_from(m4rows.SIZE_ORDERS))
@example(examples=[EXAMPLES[0], {**EXAMPLES[1], "image_sizes": [[3, 2]]}, EXAMPLES[0]], order="auto")
@example(examples=[EXAMPLES[1], _grounding_edit(EXAMPLES[0], 0, answer_span=[9, 1]), EXAMPLES[1]], order="auto")
@example(examples=[EXAMPLES[1], _grounding_edit(_grounding_edit(EXAMPLES[0], 0, segmentation={"size": [1, 4], "counts": "zz"}), 1,
                                                answer_span=[9, 1])], order="auto")
@example(examples=[_grounding_edit(EXAMPLES[0], 1, segmentation={"size": [1, 4], "counts": "zz"}), {**EXAMPLES[1], "image_paths": "x"}], order="auto")
@example(examples=[EXAMPLES[1], _grounding_edit(EXAMPLES[0], 1, answer_span=[0, 5])], order="auto")  # a span that is no code: a warning
@example(examples=[EXAMPLES[1], _grounding_edit(EXAMPLES[0], 1, segmentation={"size": [1, 4], "counts": "2"})], order="auto")  # runs sum to 2
def test_m4seg_native_batch_equals_the_oracle_on_random_examples(examples, order):
    """Examples converted together (their masks by one ``rle.to_rles``) give the rows, and then the refusal, of
    converting them one by one with the converter of before (tests/oracles/m4seg_native.py), message for message."""
    import copy

    want, state = [], m4rows.ConvertState("test", "f", order, quiet=True)
    for ex in copy.deepcopy(examples):
        outcome = _outcome(lambda e: oracle_native_row(e, state, "e"), ex)
        if outcome[0] == "error":
            break
        want.append(outcome[1])
    batch_state = m4rows.ConvertState("test", "f", order, quiet=True)
    got, error = documented_only(native_batch_rows, examples, order, batch_state)
    if error is not None:
        record("native_batch_rows", "refused", error[1])
    assert [rows_to_table([r], ROW_SCHEMA).to_pylist()[0] for r in got] == want
    assert error == (None if outcome[0] == "row" else outcome)
    # the entity-code warnings (looked for only where a span was given) are the oracle's, which looks everywhere
    assert batch_state.span_warnings == state.span_warnings
