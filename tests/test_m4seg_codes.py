"""M4Seg entity codes (spec S5), GT answer resolution, span derivation and code/span agreement on the fixture."""

import logging

import pyarrow as pa
import pytest
from helpers.m4seg import S1_REF

from perckit.errors import ReleaseFormatError
from perckit.m4seg.metric import codes
from perckit.m4seg.read import parquet as m4parquet
from perckit.m4seg import rows as m4rows


def test_s5_code_grammar():
    c = codes.parse_code("dining_table_101")
    assert (c.name, c.image_index, c.object_instance, c.part_number, c.is_part) == ("dining_table", 1, 1, None, False)
    p = codes.parse_code("leg_20103")
    assert (p.name, p.image_index, p.object_instance, p.part_number, p.is_part) == ("leg", 2, 1, 3, True)
    assert codes.parse_code("chair_102").object_instance == 2
    assert codes.parse_code("chair_1020") is None and codes.parse_code("chair_10") is None
    found = codes.find_codes("The dining_table_101 has a leg_20103; chair_1020 is no code, nor x_12.")
    assert [c.text for c in found] == ["dining_table_101", "leg_20103"]
    assert found[0].start == 4 and found[0].end == 20


def test_s5_img_keys_sort_numerically():
    keys = [f"img_{k}" for k in (10, 2, 9, 1, 3, 4, 5, 6, 7, 8)]
    assert codes.sorted_img_keys(keys) == [f"img_{k}" for k in range(1, 11)]
    with pytest.raises(ReleaseFormatError, match="img_1"):
        codes.sorted_img_keys(["image_1"])


def test_s5_native_img10_after_img9():
    """Ten images: img_10's grounding comes last, and its code (first digit 1) is read as image 1's digit."""
    n = 10
    answer = "x"
    ex = {
        "pair_id": "p", "a": answer, "q": "?", "image_paths": [f"im/{k}.jpg" for k in range(n)], "image_sizes": [[1, 2]] * n,
        "groundings": {f"img_{k + 1}": [{"name": f"o{k}", "segmentation": {"size": [1, 2], "counts": "02"}, "answer_span": [0, 1]}]
                       for k in reversed(range(n))},
    }
    row = m4rows.native_to_row(ex, m4rows.ConvertState("test", "x.json.gz"))
    assert [g["image_index"] for g in row["groundings"]] == list(range(1, 11))
    assert row["groundings"][-1]["name"] == "o9"


def test_resolve_answer():
    assert codes.resolve_answer(S1_REF["a"], S1_REF["groundings"]) == "chair near table and cup"
    assert codes.resolve_answer(S1_REF["a"], S1_REF["groundings"], "name_instance") == "chair 1 near table 2 and cup 1"
    gs = [{"name": "dining table", "answer_span": [4, 20]}]
    # the grounding's name replaces its span; the repeated mention and an unknown code become their name part
    assert codes.resolve_answer("The dining_table_101 and leg_20103, again dining_table_101.", gs) == "The dining table and leg, again dining table."
    assert codes.resolve_answer("a  leg_20103\n b", [], "name_instance") == "a leg 3 b"
    with pytest.raises(ValueError, match="resolved_name_style"):
        codes.resolve_answer("x", [], "fancy")


def test_derive_spans_first_mention_and_count_check():
    a = "Look: leg_20103 near chair_101, chair_101 again, then cup_102 and arm_20201."
    spans = codes.derive_spans(a, {1: 2, 2: 2}, "ex")
    assert spans[1] == [[a.index("chair_101"), a.index("chair_101") + 9], [a.index("cup_102"), a.index("cup_102") + 7]]
    assert [a[s:e] for s, e in spans[2]] == ["leg_20103", "arm_20201"]
    with pytest.raises(ReleaseFormatError, match=r"ex: answer_span: .*image 2: expected 3 .*found 2"):
        codes.derive_spans(a, {1: 2, 2: 3}, "ex")


def test_span_code_problems_are_warnings(caplog):
    gs = [{"image_index": 2, "answer_span": [0, 9]}, {"image_index": 1, "answer_span": [10, 14]}]
    problems = codes.span_code_problems("chair_101 near x", gs)
    assert len(problems) == 2 and "names image 1, but image_index is 2" in problems[0] and "not an entity code" in problems[1]
    state = m4rows.ConvertState("test", "f.parquet")
    rec = {"example_id": "e", "a": "chair_101 near x", "images": [{"image_id": "i", "path": "p", "height": 1, "width": 2}] * 2,
           "groundings": [{"image_index": 2, "name": "chair", "answer_span": [0, 9], "segmentation": {"size": [1, 2], "counts": "02"}}]}
    with caplog.at_level(logging.WARNING, logger="perckit.m4seg"):
        batch = pa.Table.from_pylist([rec]).to_batches()[0]
        row = m4parquet.batch_to_table(batch, state, m4parquet.row_schema()).to_pylist()[0]
    assert row["groundings"][0]["image_index"] == 2  # kept as released
    assert "example 'e'" in caplog.text and "names image 1" in caplog.text


def test_codes_agree_with_spans_on_every_fixture_row(m4_parquet):
    n = 0
    for split in ("train", "test"):
        for row in m4_parquet[split]:
            assert codes.span_code_problems(row["a"], row["groundings"]) == [], row["example_id"]
            # spans are first mentions, and groundings follow image order then first-mention order
            firsts = codes._first_mentions(row["a"])
            for k in {g["image_index"] for g in row["groundings"]}:
                mine = [g["answer_span"] for g in row["groundings"] if g["image_index"] == k]
                assert mine == [[m.start(), m.end()] for m in firsts[k]]
            assert [g["image_index"] for g in row["groundings"]] == sorted(g["image_index"] for g in row["groundings"])
            n += 1
    assert n == 72
