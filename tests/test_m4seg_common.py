"""Shared M4Seg test pieces: the synthetic release, its two builds, and the spec's test vectors S1-S4.

Other test_m4seg_* modules import from here (the fixtures are module-scoped copies, cheap to build).
"""

import pytest
from helpers.harness import messages  # noqa: F401  (the m4seg tests import it from here)
from conftest import build_split

from perckit.m4seg.text import stub_embed


def R(counts, size):
    return {"size": list(size), "counts": counts}


def ref_row(example_id, answer, images, groundings, question_type="spatial", dataset_name="coco_objects", granularity="object"):
    return {
        "example_id": example_id, "answer": answer, "question_type": question_type, "dataset_name": dataset_name,
        "granularity": granularity, "images": [{"height": h, "width": w} for h, w in images], "groundings": groundings,
    }


def g_ref(k, name, span, mask):
    return {"image_index": k, "name": name, "answer_span": list(span), "mask": mask}


def g_pred(k, name, mask):
    return {"image_index": k, "name": name, "mask": mask}


# ---------------------------------------------------------------- spec section 7

S1_REF = ref_row("s1", "chair_101 near table_102 and cup_201", [(1, 4), (1, 2)], [
    g_ref(1, "chair", (0, 9), R("022", (1, 4))),
    g_ref(1, "table", (15, 24), R("22", (1, 4))),
    g_ref(2, "cup", (29, 36), R("011", (1, 2))),
])
S1_PRED = {"example_id": "s1", "answer": "chair near table and mug", "groundings": [
    g_pred(1, "chair", R("013", (1, 4))),
    g_pred(2, "table", R("011", (1, 2))),
]}
S1_EXPECTED = {"miou": 0.75, "miou_strict": 0.5, "recall": 1 / 3, "ss": 0.8, "siou": 2 / 3, "i_siou": 0.25, "i_ss": 1 / 3}

S2_PRED = {"example_id": "s1", "answer": "chair near table and cup", "groundings": [
    {"image_index": g["image_index"], "name": g["name"], "mask": g["mask"]} for g in S1_REF["groundings"]
]}
# S3: every prediction of S2 moved to the other image, masks resized (nearest) to that image's size.
S3_PRED = {"example_id": "s1", "answer": "chair near table and cup", "groundings": [
    g_pred(2, "chair", R("011", (1, 2))),   # [[1,1,0,0]] -> [[1,0]]
    g_pred(2, "table", R("11", (1, 2))),    # [[0,0,1,1]] -> [[0,1]]
    g_pred(1, "cup", R("022", (1, 4))),     # [[1,0]] -> [[1,1,0,0]]
]}
S4_REF = ref_row("s4", "cat_101 and dog_102", [(1, 4)], [
    g_ref(1, "cat", (0, 7), R("022", (1, 4))),
    g_ref(1, "dog", (12, 19), R("22", (1, 4))),
])
S4_PRED = {"example_id": "s4", "answer": "cat and dog", "groundings": [
    g_pred(1, "dog", R("022", (1, 4))),
    g_pred(1, "dog", R("211", (1, 4))),  # [[0,0,1,0]]: IoU 0.5 with the GT dog
]}
NO_METEOR = {"embed_fn": stub_embed, "metrics": ["miou", "recall", "i_ss", "i_siou", "ss", "siou"]}


# ---------------------------------------------------------------- the synthetic release


@pytest.fixture(scope="module")
def m4_release(tmp_path_factory):
    from perckit.fixtures.base import write_release

    base = tmp_path_factory.mktemp("m4seg")
    return write_release("m4seg", base / "release", image_root=base / "images")


@pytest.fixture(scope="module")
def m4_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("m4seg_cache")


@pytest.fixture(scope="module")
def m4_parquet(m4_release, m4_cache):
    return {s: build_split("m4seg", "default", m4_release.root, m4_cache, split=s, source="parquet") for s in ("train", "test")}


@pytest.fixture(scope="module")
def m4_native(m4_release, m4_cache):
    return {s: build_split("m4seg", "default", m4_release.root, m4_cache, split=s, source="native") for s in ("train", "test")}


