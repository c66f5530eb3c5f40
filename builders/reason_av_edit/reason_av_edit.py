"""ReasonAVEdit-Bench (instruction-guided joint audio-video editing with reasoning GT) as a Hugging Face ``datasets`` builder.

datasets 3.6: load_dataset("builders/reason_av_edit", data_dir=RELEASE, trust_remote_code=True)
datasets 5.x: ReasonAVEdit(data_dir=RELEASE).download_and_prepare(); .as_dataset("test")
All logic lives in ``perckit.reason_av_edit``; see README.md beside this file.
"""

from perckit.reason_av_edit.builder import ReasonAVEditBuilder
from perckit.reason_av_edit.builder import ReasonAVEditConfig


class ReasonAVEdit(ReasonAVEditBuilder):
    """ReasonAVEdit-Bench builder: one config (default), split test; reads archives/*.tar or the extracted folders."""


__all__ = ["ReasonAVEdit", "ReasonAVEditConfig"]
