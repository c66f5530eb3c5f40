"""Where the R4D-Bench release keeps its files, the names of its scenes, and the byte limits of its reads.

Paths, names and limits only (no file is parsed here): the scene list and its [inferred] upstream aliases, the
evaluation files, the dense ground truth a config reads, the release-root check and the one guarded way from a scene
name to its folder. The readers (:mod:`perckit.r4d_bench.read`) resolve every path the release (or a prediction
file) names through :func:`perckit.io.paths.resolve_under` and read every file as a regular file under one of the
limits below: a COCO ``file_name``, a ``mask_image`` / ``combined_mask_image`` of the ``_with_paths`` ground truth,
a scene name, a planted symbolic link could otherwise copy an arbitrary local file into the rows, and a FIFO or
``/dev/zero`` planted as a frame image would hang the build."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Sequence

from ..errors import ReleaseNotFoundError, check_choice
from ..io.paths import resolve_under

SCENES = (
    "americano", "coffee_martini", "cook_spinach", "cut_lemon", "cut_roasted_beef", "espresso",
    "flame_salmon", "flame_steak", "keyboard", "sear_steak", "split_cookie", "torchchocolate",
)
#: [inferred] upstream capture spellings -> release folder names.
SCENE_ALIASES = {"torchocolate": "torchchocolate", "cut-lemon1": "cut_lemon", "cut_lemon1": "cut_lemon"}

QUERIES_META = "evaluation/R4D-Bench_queries.json"
TRACK_GT = "evaluation/R4D-Bench_predictions.json"
DENSE_GT_STEM = {
    "all_queries": "scripts/new_predictions_ground_truth_all_queries",
    "subset_36": "scripts/new_predictions_ground_truth_final",
}
SCENES_DIR = "data/scenes"
MASK_SOURCES = ("segmentation", "mask_image")

#: Largest JSON file of a release read (dense GT, query metadata, track GT, COCO files). The real
#: ``all_queries`` dense GT is tens of MB.
MAX_JSON_BYTES = 1 << 30
#: Largest frame image file (``frames`` config). Real frames are JPEGs of a few hundred KB.
MAX_IMAGE_BYTES = 64 << 20
#: Largest mask PNG file (``mask_source="mask_image"`` and prediction files). Real masks are a few KB.
MAX_MASK_PNG_BYTES = 64 << 20


# ---------------------------------------------------------------- naming


def normalise_scene(name: str, aliases: Mapping[str, str] = SCENE_ALIASES) -> str:
    """Folder spelling of a scene name: aliases first, then ``-`` -> ``_``."""
    name = aliases.get(name, name).replace("-", "_")
    return aliases.get(name, name)


def scene_from_query_id(query_id: str, aliases: Mapping[str, str] = SCENE_ALIASES) -> str:
    """``cook-spinach_q3`` -> ``cook_spinach``: prefix before the last ``_``, hyphens to underscores, aliases."""
    return normalise_scene(query_id.rsplit("_", 1)[0], aliases)


def dense_gt_file(config_name: str, mask_source: str) -> str:
    """The dense GT JSON a query config reads (the ``_with_paths`` file for PNG masks)."""
    check_choice("mask_source", mask_source, MASK_SOURCES)
    stem = DENSE_GT_STEM[config_name]
    return f"{stem}_with_paths.json" if mask_source == "mask_image" else f"{stem}.json"


def check_release_root(root: str | Path, required: Sequence[str] = ("evaluation", "scripts")) -> Path:
    root = Path(root)
    if not root.is_dir():
        raise ReleaseNotFoundError(
            f"R4D-Bench release folder {str(root)!r} does not exist; pass data_dir=<the release root> "
            "(the folder that holds evaluation/, scripts/ and data/)"
        )
    for sub in required:
        if not (root / sub).is_dir():
            raise ReleaseNotFoundError(
                f"R4D-Bench release {str(root)!r}: expected the folder {sub + '/'!r} under the release root, not found"
            )
    return root


def scene_folder(root: Path, scene: object, where: str) -> Path:
    """``<root>/data/scenes/<scene>`` for a scene name taken from the release (a query's ``scene``, its id, a
    folder of ``data/scenes/``): refused when it leaves ``data/scenes/`` (``..``, an absolute path, a
    symbolic link out of the release)."""
    return resolve_under(Path(root) / SCENES_DIR, scene, where)


def scene_names(root: Path) -> list[str]:
    folder = Path(root) / SCENES_DIR
    if not folder.is_dir():
        raise ReleaseNotFoundError(f"R4D-Bench release {str(root)!r}: expected the folder {SCENES_DIR + '/'!r}, not found")
    names = sorted(p.name for p in folder.iterdir() if p.is_dir())
    for name in names:  # a folder that is a symbolic link out of the release is refused
        scene_folder(root, name, f"R4D-Bench release {str(root)!r}: {SCENES_DIR}/{name}")
    return names
