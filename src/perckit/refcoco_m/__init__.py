"""RefCOCO-M (referring expression segmentation on the cleaned RefCOCO validation split).

The builder (``builder.py``) reads the Parquet release; ``metrics.py`` is the ``refer_iou``
metric over :mod:`perckit.segmentation`; ``io.py`` adapts other tools' prediction formats.
"""

from .features import to_metric_prediction
from .features import to_metric_reference
from .io import flatten_image_predictions
from .io import gt_as_predictions
from .io import load_predictions_jsonl

__all__ = [
    "flatten_image_predictions", "gt_as_predictions", "load_predictions_jsonl", "to_metric_prediction", "to_metric_reference",
]
