"""The core every layer stands on: the one COCO counts scan (``counts``), the mask-pair core
(``segmentation``), id matching (``matching``), order-independent means (``stats``) and row schemas
(``schema``). ``perckit.rle`` and ``perckit.errors`` are the public modules of this layer."""
