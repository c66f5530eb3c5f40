"""M⁴Seg (multi-image pixel-grounded reasoning, PRIMA): builder, readers, entity codes and the seven metrics.

The helpers users call most are re-exported here: :func:`to_metric_reference`, :func:`gt_as_prediction`,
:func:`parse_grounded_answer`, :func:`load_predictions_jsonl` and :func:`resolve_answer`.
"""

from .metric.codes import resolve_answer
from .features import gt_as_prediction
from .features import to_metric_prediction
from .features import to_metric_reference
from .read.predictions import load_predictions_jsonl
from .read.predictions import parse_grounded_answer

__all__ = [
    "gt_as_prediction", "load_predictions_jsonl", "parse_grounded_answer", "resolve_answer",
    "to_metric_prediction", "to_metric_reference",
]
