"""M⁴Seg (multi-image pixel-grounded reasoning, PRIMA) as a Hugging Face ``datasets`` builder.

datasets 3.6: load_dataset("builders/m4seg", data_dir=RELEASE, trust_remote_code=True)  # splits train, test
datasets 5.x: M4Seg(data_dir=RELEASE).download_and_prepare(); .as_dataset("test")
Options: source="auto"|"native"|"parquet", native_image_size_order, image_root, splits, repo_id, revision.
All logic lives in ``perckit.m4seg``; see README.md beside this file.
"""

from perckit.m4seg.builder import M4SegBuilder
from perckit.m4seg.builder import M4SegConfig


class M4Seg(M4SegBuilder):
    """M4Seg builder: config default; splits train and test; key example_id."""


__all__ = ["M4Seg", "M4SegConfig"]
