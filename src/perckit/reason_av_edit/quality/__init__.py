"""``av_edit_quality``: the final edit quality of ReasonAVEdit-Bench edited clips (issue 17).

- :mod:`.references` (``to_quality_reference``) and :mod:`.predictions` (``make_quality_prediction``,
  ``load_quality_predictions_dir``): the metric's inputs;
- :mod:`.decode`: one sample decoded (PyAV video and audio, the target region from the mask video);
- :mod:`.pixel`: the exact model-free metrics (``ssim``, ``psnr``, ``bg_psnr``, ``bg_ssim``);
- :mod:`.formulas`: the numpy half of the model-based metrics (Fréchet distance, cosine scores, Sync-C / Sync-D,
  DeSync, LPAPS);
- :mod:`.models`: the model-based metrics (one protocol, one list of entries; no model library is imported
  until one runs);
- :mod:`.metric`: ``av_edit_quality`` (pairing, accumulate, the tables).
"""

from .predictions import load_quality_predictions_dir, make_quality_prediction
from .references import to_quality_reference

__all__ = ["load_quality_predictions_dir", "make_quality_prediction", "to_quality_reference"]
