"""The R4D-Bench ``datasets`` builder. ``builders/r4d_bench/r4d_bench.py`` is a thin entry point over it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Iterator

import datasets

from ..hf.builder import PerckitConfig, PerckitTableBuilder
from ..hf.benchmark import BENCHMARKS
from . import features as feats
from . import layout
from . import read
from . import rows


@dataclasses.dataclass
class R4DBenchConfig(PerckitConfig):
    """Options of every R4D-Bench config (all defaulted; see the dataset card; ``repo_id`` / ``revision``: PerckitConfig)."""

    BENCHMARK = BENCHMARKS["r4d_bench"]

    mask_source: str = "segmentation"
    coco_json_name: str | None = None
    frame_id_pattern: str = r"(\d+)"
    scene_aliases: dict = dataclasses.field(default_factory=lambda: dict(layout.SCENE_ALIASES))
    #: ``frames``: which source names an annotation's track when both do (``"coco"`` or ``"scene_json"``).
    track_id_precedence: str = "coco"


def hub_patterns(config: R4DBenchConfig) -> list[str]:
    """The release files a config needs (what the Hub download fetches)."""
    patterns = [layout.QUERIES_META, layout.TRACK_GT, f"{layout.SCENES_DIR}/*/_annotations*.coco.json"]
    if config.name == "frames":
        # fnmatch's "*" crosses "/", so no "<scene>/*.png" pattern: it would pull every query mask too.
        patterns.append(f"{layout.SCENES_DIR}/*/images/*")
        # The scene track JSON, by its candidate names (a "*/*.json" pattern would cross folders as well).
        patterns += [f"{layout.SCENES_DIR}/{s}/{n}" for s in layout.SCENES for n in read.scene_track_json_names(s, config.scene_aliases)]
    else:
        patterns.append(layout.dense_gt_file(config.name, config.mask_source))
        if config.mask_source == "mask_image":
            masks_dir = "query_masks" if config.name == "all_queries" else "query_masks_36"
            patterns.append(f"{layout.SCENES_DIR}/*/{masks_dir}/**")
    return patterns


class R4DBenchBuilder(PerckitTableBuilder):
    """R4D-Bench: configs ``all_queries`` (default), ``subset_36`` and ``frames``; one ``test`` split."""

    hub_patterns = staticmethod(hub_patterns)
    BUILDER_CONFIGS = [
        R4DBenchConfig(name="all_queries", description="89 queries with dense per-frame masks"),
        R4DBenchConfig(name="subset_36", description="the optional 36-query subset (3 per scene)"),
        R4DBenchConfig(name="frames", description="every COCO-annotated scene frame with its instances"),
    ]
    #: ``frames`` rows carry an encoded image each; 64 of them make tables of a few MB.
    ROWS_PER_TABLE = 64
    OPTION_CHECKS = {"mask_source": layout.MASK_SOURCES, "track_id_precedence": read.TRACK_ID_PRECEDENCES}

    def _features(self) -> datasets.Features:
        return feats.frame_features() if self.config.name == "frames" else feats.query_features()

    def _release_root(self) -> Path:
        needs = ("data/scenes",) if self.config.name == "frames" else ("evaluation", "scripts")
        return layout.check_release_root(super()._release_root(), needs)

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        root = self._release_root()
        cfg = self.config
        # (parsing the JSON files builds millions of small containers: PerckitTableBuilder pauses the collector)
        if cfg.name == "frames":
            kwargs: dict = {"scenes": [
                read.read_scene(root, s, cfg.coco_json_name, cfg.frame_id_pattern, read_tracks=True, aliases=cfg.scene_aliases)
                for s in layout.scene_names(root)
            ]}
        else:
            kwargs = {"release_data": read.open_query_release(
                root, cfg.name, cfg.mask_source, cfg.coco_json_name, cfg.frame_id_pattern, cfg.scene_aliases
            )}
        return [datasets.SplitGenerator(name=datasets.Split.TEST, gen_kwargs=kwargs)]

    def _generate_tables(self, release_data: read.QueryRelease | None = None, scenes: list | None = None) -> Iterator[tuple[str, Any]]:
        if scenes is not None:  # frames: tables built column by column
            yield from rows.scenes_frame_tables(scenes, self.config.track_id_precedence, self.info.features.arrow_schema, self.ROWS_PER_TABLE)
        else:
            yield from super()._generate_tables(release_data=release_data)

    def _generate_rows(self, release_data: read.QueryRelease | None = None, scenes: list | None = None) -> Iterator[tuple[str, dict]]:
        """The rows (for ``frames``: those of the tables :meth:`_generate_tables` writes, read back)."""
        if scenes is not None:
            for _, table in self._generate_tables(scenes=scenes):
                yield from ((f"{row['scene']}/{row['frame_id']:06d}", row) for row in table.to_pylist())
        else:
            yield from rows.query_rows(release_data, self.config.mask_source, self.config.scene_aliases)
