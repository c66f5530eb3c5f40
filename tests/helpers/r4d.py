"""The spec's R4D test vectors: the 1x4 masks G, P1, P34 and E, the row builders, and vector V1 (two queries,
one of them negative) shared by the golden-value and the evaluate-module tests."""

G = {"size": [1, 4], "counts": "022"}  # [1,1,0,0]
P1 = {"size": [1, 4], "counts": "013"}  # [1,0,0,0]
P34 = {"size": [1, 4], "counts": "22"}  # [0,0,1,1]
E = {"size": [1, 4], "counts": "4"}  # empty


def ref(qid, frames, evaluated, negative=False, scene="s1", qtype="A", scene_frames=None):
    """A mask_temporal reference row: ``frames`` are (frame_id, mask) pairs, ``evaluated`` the scored frame ids."""
    return {
        "query_id": qid, "scene": scene, "query_type": qtype, "is_negative": negative,
        "frames": [{"frame_id": f, "mask": m} for f, m in frames],
        "evaluated_frame_ids": evaluated, "scene_frame_ids": scene_frames or evaluated,
    }


def pred(qid, frames):
    """A mask_temporal prediction row: ``frames`` are (frame_id, mask) pairs."""
    return {"query_id": qid, "frames": [{"frame_id": f, "mask": m} for f, m in frames]}


V1_REFS = [
    ref("A", [(1, G), (2, G), (3, E)], [1, 2, 3]),
    ref("B", [(1, E), (2, E)], [1, 2], negative=True, scene="s2", qtype="B"),
]
V1_PREDS = [pred("A", [(1, P1), (3, P34)]), pred("B", [(1, E), (2, P1)])]
