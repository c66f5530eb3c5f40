"""R4D-Bench (referring segmentation in dynamic 4D scenes) as a Hugging Face ``datasets`` builder.

datasets 3.6: load_dataset("builders/r4d_bench", data_dir=RELEASE, trust_remote_code=True)
datasets 5.x: R4DBench(data_dir=RELEASE).download_and_prepare(); .as_dataset("test")
All logic lives in ``perckit.r4d_bench``; see README.md beside this file.
"""

from perckit.r4d_bench.builder import R4DBenchBuilder
from perckit.r4d_bench.builder import R4DBenchConfig


class R4DBench(R4DBenchBuilder):
    """R4D-Bench builder: configs all_queries (default), subset_36, frames; split test."""


__all__ = ["R4DBench", "R4DBenchConfig"]
