"""Readers of the R4D-Bench release layout (JSON + PNG folders) and the row builders.

R4D-Bench here is the referring-segmentation benchmark on dynamic 4D scenes
(Hub: ``LiYacheng/r4d-bench-qa``), not NVIDIA's region-prompted VQA benchmark
of the same name. Every decision marked [inferred] in the spec lives in one
named function or option of the modules below; this one re-exports all their names (the builder, the
metrics' file readers, the tests and user code import them from here):

- :mod:`perckit.r4d_bench.layout`: the scene names and where the release keeps each file;
- :mod:`perckit.r4d_bench.queries`: the query metadata, track-ID and dense ground truth, and the rows of the
  query configs (``all_queries``, ``subset_36``);
- :mod:`perckit.r4d_bench.scenes`: a scene's COCO file and frames, its scene track JSON, and the tables of the
  ``frames`` config;
- :mod:`perckit.r4d_bench.masks`: mask PNGs and the frame mask of a dense-GT frame;
- :mod:`perckit.r4d_bench.files`: the byte limits and the guarded reads.
"""

from __future__ import annotations

from ..errors import RLEError  # noqa: F401  (callers catch mask errors from this module)
from . import files  # noqa: F401
from .files import MAX_JSON_BYTES  # noqa: F401
from .files import MAX_MASK_PNG_BYTES  # noqa: F401
from .layout import DENSE_GT_STEM  # noqa: F401
from .layout import MASK_SOURCES  # noqa: F401
from .layout import QUERIES_META  # noqa: F401
from .layout import SCENE_ALIASES  # noqa: F401
from .layout import SCENES  # noqa: F401
from .layout import SCENES_DIR  # noqa: F401
from .layout import TRACK_GT  # noqa: F401
from .layout import check_release_root  # noqa: F401
from .layout import dense_gt_file  # noqa: F401
from .layout import normalise_scene  # noqa: F401
from .layout import scene_folder  # noqa: F401
from .layout import scene_from_query_id  # noqa: F401
from .layout import scene_names  # noqa: F401
from .masks import frame_mask_from_pngs  # noqa: F401
from .masks import frame_mask_from_segmentations  # noqa: F401
from .masks import png_mask  # noqa: F401
from .scenes import TRACK_ID_PRECEDENCES  # noqa: F401
from .scenes import check_image_bytes  # noqa: F401
from .scenes import coco_track_id  # noqa: F401
from .scenes import find_coco_json  # noqa: F401
from .scenes import find_scene_track_json  # noqa: F401
from .scenes import frame_id_of  # noqa: F401
from .scenes import frame_tables  # noqa: F401
from .scenes import FrameInfo  # noqa: F401
from .scenes import read_ahead  # noqa: F401
from .scenes import read_scene  # noqa: F401
from .scenes import read_scene_tracks  # noqa: F401
from .scenes import resolve_track_id  # noqa: F401
from .scenes import scene_track_json_names  # noqa: F401
from .scenes import scene_track_links  # noqa: F401
from .scenes import SceneInfo  # noqa: F401
from .queries import KNOWN_QUERY_KEYS  # noqa: F401
from .queries import _as_bool  # noqa: F401
from .queries import entry_scene  # noqa: F401
from .queries import load_dense_gt  # noqa: F401
from .queries import load_queries_meta  # noqa: F401
from .queries import load_track_gt  # noqa: F401
from .queries import open_query_release  # noqa: F401
from .queries import query_row  # noqa: F401
from .queries import query_rows  # noqa: F401
from .queries import QueryRelease  # noqa: F401
from .queries import track_id_list  # noqa: F401

# Re-exported for callers that catch mask errors from this module.
__all__ = [
    "RLEError", "SCENES", "SCENE_ALIASES", "QueryRelease", "SceneInfo", "frame_tables", "load_dense_gt",
    "load_queries_meta", "load_track_gt", "open_query_release", "query_rows", "read_scene", "read_scene_tracks", "resolve_track_id",
    "scene_from_query_id", "scene_names",
]
