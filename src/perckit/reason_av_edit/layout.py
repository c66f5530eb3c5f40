"""Where the files of a ReasonAVEdit-Bench release are: the one place each name of the layout is written.

The Hub release keeps ``metadata.csv``, ``annotations/`` and ``README.md`` loose and ships the seven
media folders as one tar each under ``archives/`` (members carry the folder prefix, e.g.
``videos/<file>``). Unpacked next to ``metadata.csv`` they give the same seven folders.
"""

from __future__ import annotations

METADATA = "metadata.csv"
ANNOTATIONS_DIR = "annotations"
ARCHIVES_DIR = "archives"
ARCHIVE_PATTERN = f"{ARCHIVES_DIR}/*.tar"
#: [card] the seven media folders (one tar each on the Hub).
MEDIA_FOLDERS = ("videos", "audios", "masks", "reason_visual", "reason_visual_mask", "reason_audio", "ref_images")
