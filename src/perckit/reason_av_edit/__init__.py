"""ReasonAVEdit-Bench (instruction-guided joint audio-video editing, with reasoning ground truth).

``builder.py`` turns the release (``metadata.csv``, ``annotations/``, and the media tars under
``archives/`` or their extracted folders) into typed Arrow rows with the readers that ``release.py``
gathers (``metadata.py``, ``archives.py``, ``media.py``, ``rows.py``; ``extract.py`` unpacks for users);
``metrics.py`` is the ``av_reasoning`` metric [proposal] over ``inputs.py`` (input decoding) and
``audio.py``; ``io.py`` reads predictions from a folder. ``quality/`` is the ``av_edit_quality`` metric (the final
edit quality of edited clips: ``to_quality_reference``, ``make_quality_prediction``, ``load_quality_predictions_dir``).
"""

from .features import gt_as_prediction
from .features import make_prediction
from .features import to_metric_reference
from .io import gt_as_predictions
from .io import load_predictions_dir
from .quality import load_quality_predictions_dir
from .quality import make_quality_prediction
from .quality import to_quality_reference

__all__ = ["gt_as_prediction", "gt_as_predictions", "load_predictions_dir", "load_quality_predictions_dir", "make_prediction",
           "make_quality_prediction", "to_metric_reference", "to_quality_reference"]
