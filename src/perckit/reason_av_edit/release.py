"""Reading the ReasonAVEdit-Bench release: one import for the builder, the fixture and the tests.

The release's code lives in modules that each do one thing; this module only re-exports their names
(every name that was importable from here still is):

- :mod:`.layout`: where the files are (``metadata.csv``, ``annotations/``, ``archives/*.tar``, the seven
  media folders);
- :mod:`.metadata`: ``metadata.csv`` into :class:`Sample` rows and ``annotations/<id>.json`` into typed
  fields, with the card's categories and sub-tracks;
- :mod:`.archives`: finding the tars, the member guard every tar is read under, and the bounded local and
  streaming readers;
- :mod:`.extract`: :func:`extract_archives`, the safe extractor for users and tests (the builder never
  extracts);
- :mod:`.media`: where each media value comes from (the tars read, the disk, the lookup by sample id);
- :mod:`.rows`: one builder row from a sample, its annotation and its media bytes.

The builder (``builder.py``) only wires these to ``datasets``. Errors name the file, the archive member
or the CSV column, what was expected and what was found.
"""

from __future__ import annotations

from .archives import MAX_MEMBER_BYTES, MAX_MEMBERS, MemberGuard, _unreadable, archive_label, check_name, find_archives
from .archives import iter_tar_file, iter_tar_members, iter_tar_stream
from .extract import extract_archives
from .layout import ANNOTATIONS_DIR, ARCHIVE_PATTERN, ARCHIVES_DIR, MEDIA_FOLDERS, METADATA
from .media import LOOKUP_EXPECTED, LOOKUP_MEMBERS, LOOKUP_WARN_IDS, MediaStore, apply_lookup, archive_stems, disk_present
from .media import expects_member, lookup_candidates, lookup_fields, lookup_wanted, pick_video_archive, read_disk_media, top_folder
from .metadata import ANCHOR_KEYS, ANNOTATION_FIELDS, CARD_AUDIO_NULL, CARD_VISUAL_NULL, CATEGORIES, CATEGORY_BY_PREFIX
from .metadata import COLUMN_ALIASES, DOCUMENTED_COLUMNS, INSTANCE_KEYS, MAX_ANNOTATION_BYTES, MAX_METADATA_BYTES, MEDIA_FIELDS
from .metadata import SUB_TRACKS, WINDOW_F_KEYS, WINDOW_F_PAIRS, WINDOW_S_KEYS, WINDOW_S_PAIRS, Sample, annotation_path
from .metadata import category_of, check_sample_id, extract_annotation_fields, normalise_member_path, parse_annotation
from .metadata import parse_metadata, read_annotation, read_metadata, resolve_columns
from .rows import anchor_mask_from_png, build_row

__all__ = [
    "ANCHOR_KEYS", "ANNOTATIONS_DIR", "ANNOTATION_FIELDS", "ARCHIVES_DIR", "ARCHIVE_PATTERN", "CARD_AUDIO_NULL",
    "CARD_VISUAL_NULL", "CATEGORIES", "CATEGORY_BY_PREFIX", "COLUMN_ALIASES", "DOCUMENTED_COLUMNS", "INSTANCE_KEYS",
    "LOOKUP_EXPECTED", "LOOKUP_MEMBERS", "LOOKUP_WARN_IDS", "MAX_ANNOTATION_BYTES", "MAX_MEMBERS", "MAX_MEMBER_BYTES",
    "MAX_METADATA_BYTES", "MEDIA_FIELDS", "MEDIA_FOLDERS", "METADATA", "MediaStore", "MemberGuard", "SUB_TRACKS",
    "Sample", "WINDOW_F_KEYS", "WINDOW_F_PAIRS", "WINDOW_S_KEYS", "WINDOW_S_PAIRS", "_unreadable", "anchor_mask_from_png",
    "annotation_path", "apply_lookup", "archive_label", "archive_stems", "build_row", "category_of", "check_name",
    "check_sample_id", "disk_present", "expects_member", "extract_annotation_fields", "extract_archives",
    "find_archives", "iter_tar_file", "iter_tar_members", "iter_tar_stream", "lookup_candidates", "lookup_fields",
    "lookup_wanted", "normalise_member_path", "parse_annotation", "parse_metadata", "pick_video_archive",
    "read_annotation", "read_disk_media", "read_metadata", "resolve_columns", "top_folder",
]
