"""syn4d: the Syn4D metrics (configs tracking, depth, pose) as an evaluate module, matching the official evaluator.

All logic lives in ``perckit.syn4d.metric``; see README.md beside this file.
"""

from perckit.hf import metric as evaluate_base
from perckit.errors import OptionError
from perckit.syn4d import features as feats
from perckit.syn4d import metric as core

_DESCRIPTION = """\
Syn4D metrics, as the official Syn4D evaluator computes them. Config `tracking`: 3D point tracking after one
median-norm scale per sequence, accuracy within 0.1/0.3/0.5/1 m (inclusive), APD, EPE, the same on dynamic queries,
and score = 0.5 APD + 0.5 dynamic APD. Config `depth`: median-scaled video depth (AbsRel, SqRel, RMSE, RMSE log,
SILog, delta < 1.25^k). Config `pose`: Sim(3)-aligned camera trajectories (ATE, RPE translation / rotation,
translation direction, AUC). Aggregation is the official macro mean over sequences, by variant and by scene.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: list of {"sequence_id": str, "tracking_xyz": [T][Q][3] or None, "depth": [T][h][w] or None,
        "camera_c2w": [T][4][4] or None, "frame_indices": [T] or None} (the official NPZ content;
        perckit.syn4d.read.load_prediction_row(npz_path, sequence_id) reads one).
    references: builder rows projected with perckit.syn4d.features.to_metric_reference(row, task)
        (tracking: the `tracking` or `challenge` config; depth and pose: the `challenge` config).
    strict (bool, default True): a missing prediction or a failing task raises; False records failures and
        leaves those sequences out of the means, as the official evaluator without --strict.
    depth_align (str): "scale" (default), "scale_shift" or "metric".
    depth_min_m (float, 0.001), depth_max_m (float, 300.0), tracking_thresholds_m, dynamic_weight (0.5).
    min_coverage (float, 0.9): warn (LowCoverageWarning, once) when a sequence was scored on fewer than this
        fraction of its GT-valid points (tracking) or pixels (depth).
Returns:
    {"protocol", "task", "requested_sequences", "overall", "by_variant", "by_scene", "sequences", "failures",
    "coverage"} ("coverage" for tracking and depth: {"overall": {scored, gt_valid, coverage, ...}, "sequences"});
    perckit.syn4d.metric.to_official_summary({task: result, ...}) merges tasks into the official report shape.
"""

_CITATION = """\
Syn4D benchmark: https://huggingface.co/datasets/Syn4D/Syn4D_Benchmark ; official evaluator jzr99/Syn4D_benchmark.
"""


class Syn4D(evaluate_base.PerckitMetric):
    CARD = evaluate_base.Card(_DESCRIPTION, _KWARGS_DESCRIPTION, _CITATION, ("https://huggingface.co/datasets/Syn4D/Syn4D_Benchmark",))

    ACCUMULATOR = "syn4d"

    def schemas(self):
        if self.config_name not in core.TASKS:
            raise OptionError(f"evaluate.load('metrics/syn4d', config_name): expected one of {list(core.TASKS)}, got {self.config_name!r}")
        return feats.prediction_schema(), feats.reference_schema(self.config_name)
