"""Shared M4Seg test pieces: the spec's test vectors S1-S4 (section 7) with their row builders, and the
two-example test split of the small release (tests/conftest.py's ``m4_small`` fixture; native JSON.gz and
Parquet give identical rows) used by the bad-input and trust tests."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from perckit.hf.entrypoints import build_split
from perckit.samples import write_release
from perckit.m4seg import rows as m4rows
from perckit.m4seg.metric.text import stub_embed

#: The small release's test split: its native file and its Parquet shard (paths in the release root).
NATIVE = "annotations/m4seg_test.json.gz"
SHARD = "data/test-00000-of-00001.parquet"


def R(counts, size):
    """A COCO RLE dict: ``counts`` (compressed string or list) for a mask of ``size`` (height, width)."""
    return {"size": list(size), "counts": counts}


def ref_row(example_id, answer, images, groundings, question_type="spatial", dataset_name="coco_objects", granularity="object"):
    """A metric reference row; ``images`` are (height, width) pairs."""
    return {
        "example_id": example_id, "a": answer, "type": question_type, "dataset_name": dataset_name,
        "granularity": granularity, "images": [{"height": h, "width": w} for h, w in images], "groundings": groundings,
    }


def g_ref(k, name, span, mask):
    """A reference grounding on image ``k`` (1-based) with its answer span."""
    return {"image_index": k, "name": name, "answer_span": list(span), "segmentation": mask}


def g_pred(k, name, mask):
    """A predicted grounding on image ``k`` (1-based)."""
    return {"image_index": k, "name": name, "segmentation": mask}


# ---------------------------------------------------------------- spec section 7

S1_REF = ref_row("s1", "chair_101 near table_102 and cup_201", [(1, 4), (1, 2)], [
    g_ref(1, "chair", (0, 9), R("022", (1, 4))),
    g_ref(1, "table", (15, 24), R("22", (1, 4))),
    g_ref(2, "cup", (29, 36), R("011", (1, 2))),
])
S1_PRED = {"example_id": "s1", "a": "chair near table and mug", "groundings": [
    g_pred(1, "chair", R("013", (1, 4))),
    g_pred(2, "table", R("011", (1, 2))),
]}
S1_EXPECTED = {"miou": 0.75, "miou_strict": 0.5, "recall": 1 / 3, "ss": 0.8, "siou": 2 / 3, "i_siou": 0.25, "i_ss": 1 / 3}

S2_PRED = {"example_id": "s1", "a": "chair near table and cup", "groundings": [
    {"image_index": g["image_index"], "name": g["name"], "segmentation": g["segmentation"]} for g in S1_REF["groundings"]
]}
# S3: every prediction of S2 moved to the other image, masks resized (nearest) to that image's size.
S3_PRED = {"example_id": "s1", "a": "chair near table and cup", "groundings": [
    g_pred(2, "chair", R("011", (1, 2))),   # [[1,1,0,0]] -> [[1,0]]
    g_pred(2, "table", R("11", (1, 2))),    # [[0,0,1,1]] -> [[0,1]]
    g_pred(1, "cup", R("022", (1, 4))),     # [[1,0]] -> [[1,1,0,0]]
]}
S4_REF = ref_row("s4", "cat_101 and dog_102", [(1, 4)], [
    g_ref(1, "cat", (0, 7), R("022", (1, 4))),
    g_ref(1, "dog", (12, 19), R("22", (1, 4))),
])
S4_PRED = {"example_id": "s4", "a": "cat and dog", "groundings": [
    g_pred(1, "dog", R("022", (1, 4))),
    g_pred(1, "dog", R("211", (1, 4))),  # [[0,0,1,0]]: IoU 0.5 with the GT dog
]}
NO_METEOR = {"embed_fn": stub_embed, "metrics": ["miou", "recall", "i_ss", "i_siou", "ss", "siou"]}


# ---------------------------------------------------------------- the small release's test split


def small_examples() -> list[dict]:
    """Two native examples: COCO-style (explicit spans, compressed RLE) and PASCAL-style ([W, H] sizes,
    uncompressed RLE, spans derived from the entity codes, an image without groundings)."""
    return [
        {
            "pair_id": 7, "q": "Which objects are left of the cup?", "a": "chair_101 near table_102 and cup_201",
            "type": "spatial", "dataset_name": "coco_objects", "granularity": "object",
            "image_paths": ["coco_2017/val2017/000000000001.jpg", "coco_2017/val2017/000000000002.jpg"],
            "image_sizes": [[1, 4], [1, 2]],
            "groundings": {
                "img_1": [
                    {"name": "chair", "annotation_id": 11, "object_id": 11, "segmentation": R("022", (1, 4)), "answer_span": [0, 9]},
                    {"name": "table", "annotation_id": 12, "object_id": 12, "segmentation": R("22", (1, 4)), "answer_span": [15, 24]},
                ],
                "img_2": [{"name": "cup", "annotation_id": 21, "object_id": 21, "segmentation": R("011", (1, 2)), "answer_span": [29, 36]}],
            },
        },
        {
            "pair_id": "pas_0000008", "q": "How many legs?", "a": "dog_101 and its leg_10101", "type": "counting",
            "source": "pascal_part", "granularity": "part",
            "image_paths": ["Part_Segm/PASCAL-Part/VOCdevkit/VOC2010/JPEGImages/2008_000008.jpg",
                            "Part_Segm/PASCAL-Part/VOCdevkit/VOC2010/JPEGImages/2008_000009.jpg"],
            "image_sizes": [[3, 2], [2, 2]],  # [W, H]
            "groundings": {"img_1": [
                {"category": "dog", "id": 31, "segmentation": {"size": [2, 3], "counts": [0, 4, 2]}},
                {"category": "leg", "id": 32, "object_id": 31, "segmentation": {"size": [2, 3], "counts": [4, 2]}},
            ]},
        },
    ]


def parquet_records(examples: list[dict]) -> list[dict]:
    """The same examples as Parquet records (card field names), converted by the native reader itself."""
    state = m4rows.ConvertState("test", "m4seg_test.json.gz", quiet=True)
    out = []
    for ex in examples:
        row = m4rows.native_to_row(ex, state)
        out.append({
            "example_id": row["example_id"], "pair_id": row["pair_id"], "dataset_name": row["dataset_name"],
            "type": row["type"], "granularity": row["granularity"], "q": row["q"], "a": row["a"],
            "images": row["images"],
            "groundings": [{"image_index": g["image_index"], "name": g["name"], "annotation_ids": g["annotation_ids"],
                            "object_annotation_id": g["object_annotation_id"], "answer_span": g["answer_span"],
                            "bbox": g["bbox"], "segmentation": g["segmentation"]} for g in row["groundings"]],
        })
    return out


def write_parquet(path: Path, records: list[dict], schema_free: bool = False) -> None:
    """``records`` as a Parquet file, with the release's schema (or the types pyarrow infers: ``schema_free``)."""
    from perckit.samples.m4seg import _parquet_schema

    table = pa.Table.from_pylist(records) if schema_free else pa.Table.from_pylist(records, schema=_parquet_schema())
    pq.write_table(table, path)


def build_test_split(root: Path, cache: Path, source: str, **options):
    """The test split of the release at ``root`` read from ``source`` ("native" or "parquet")."""
    return build_split("m4seg", "default", root, cache, split="test", splits=("test",), source=source, **options)


def write_small_release(root: Path) -> Path:
    """A small synthetic M4Seg release at ``root`` whose test split is :func:`small_examples`, written both as
    the native file and as the Parquet shard."""
    write_release("m4seg", root, train_rows=4, test_rows=2, shards=1, write_manifest=False)
    (root / NATIVE).write_bytes(gzip.compress(json.dumps(small_examples()).encode()))
    write_parquet(root / SHARD, parquet_records(small_examples()))
    return root
