"""RefCOCO-M (referring expression segmentation, cleaned RefCOCO validation) as a Hugging Face ``datasets`` builder.

datasets 3.6: load_dataset("builders/refcoco_m", "expressions", data_dir=RELEASE, trust_remote_code=True)
datasets 5.x: RefCocoM(config_name="expressions", data_dir=RELEASE).download_and_prepare(); .as_dataset("validation")
All logic lives in ``perckit.refcoco_m``; see README.md beside this file.
"""

from perckit.refcoco_m.builder import RefCocoMBuilder
from perckit.refcoco_m.builder import RefCocoMConfig


class RefCocoM(RefCocoMBuilder):
    """RefCOCO-M builder: configs expressions (default) and images; split validation."""


__all__ = ["RefCocoM", "RefCocoMConfig"]
