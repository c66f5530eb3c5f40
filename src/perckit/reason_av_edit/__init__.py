"""ReasonAVEdit-Bench (instruction-guided joint audio-video editing, with reasoning ground truth).

``builder.py`` turns the release (``metadata.csv``, ``annotations/``, and the media tars under
``archives/`` or their extracted folders) into typed Arrow rows with the readers that ``release.py``
gathers (``metadata.py``, ``archives.py``, ``media.py``, ``rows.py``; ``extract.py`` unpacks for users);
``metrics.py`` is the ``av_reasoning`` metric [proposal] over ``inputs.py`` (input decoding) and
``audio.py``; ``io.py`` reads predictions from a folder.
"""

from .features import gt_as_prediction
from .features import make_prediction
from .features import to_metric_reference
from .io import gt_as_predictions
from .io import load_predictions_dir

__all__ = ["gt_as_prediction", "gt_as_predictions", "load_predictions_dir", "make_prediction", "to_metric_reference"]
