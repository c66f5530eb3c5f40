"""track_id: R4D-Bench (referring segmentation in dynamic 4D scenes) track-ID set metrics as an evaluate module.

All logic lives in ``perckit.r4d_bench.metric``; see README.md beside this file.
"""

from functools import partial

from perckit.hf import metric as evaluate_base
from perckit.r4d_bench import features as feats

_DESCRIPTION = """\
Track-ID metrics of R4D-Bench (referring segmentation in dynamic 4D scenes): per query, precision, recall and F1
of the predicted set of target track ids against the ground-truth set (ids compared as strings), and exact
match; macro means over queries and micro (pooled) precision / recall / F1.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: list of {"query_id": str, "target_track_ids": [str]}.
    references: the R4D-Bench builder's query rows projected with
        perckit.r4d_bench.features.to_track_reference(row) (keys query_id, scene, target_track_ids).
    only_query_prefix (str), only_queries (list of str): score a subset, like the official flags.
    strict (bool, default False): a reference without a prediction row raises; by default it is an empty set.
Returns:
    dict with precision, recall, f1, exact_match (macro), micro_precision, micro_recall, micro_f1,
    num_queries, num_missing_predictions, per_scene, positive, negative, per_query.
Examples:
    >>> import evaluate
    >>> metric = evaluate.load("metrics/track_id")
    >>> metric.compute(predictions=[{"query_id": "q1", "target_track_ids": ["3"]}],
    ...                references=[{"query_id": "q1", "scene": "s", "target_track_ids": ["3", "5"]}])["f1"]
    0.6666666666666666
"""

_CITATION = """\
R4D-Bench dataset repository: https://huggingface.co/datasets/LiYacheng/r4d-bench-qa
"""


class TrackId(evaluate_base.PerckitMetric):
    CARD = evaluate_base.Card(_DESCRIPTION, _KWARGS_DESCRIPTION, _CITATION, ("https://huggingface.co/datasets/LiYacheng/r4d-bench-qa",))
    SCHEMAS = (partial(feats.prediction_schema, "track_id"), partial(feats.reference_schema, "track_id"))
    ACCUMULATOR = "track_id"
