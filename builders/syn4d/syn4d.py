"""Syn4D (3D tracking, depth, pose on synthetic dynamic scenes) as a Hugging Face ``datasets`` builder.

datasets 3.6: load_dataset("builders/syn4d", "tracking", data_dir=RELEASE, trust_remote_code=True)
datasets 5.x: Syn4D(config_name="tracking", data_dir=RELEASE).download_and_prepare(); .as_dataset("test")
All logic lives in ``perckit.syn4d``; see README.md beside this file.
"""

from perckit.syn4d.builder import Syn4DBuilder
from perckit.syn4d.builder import Syn4DConfig


class Syn4D(Syn4DBuilder):
    """Syn4D builder: configs tracking (default) and challenge; split test."""


__all__ = ["Syn4D", "Syn4DConfig"]
