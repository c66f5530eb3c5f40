"""The RefCOCO-M ``datasets`` builder. ``builders/refcoco_m/refcoco_m.py`` is a thin entry point over it."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator

import datasets

from ..hf.builder import PerckitBuilder, PerckitConfig
from ..io.paths import checked_opener
from ..hf.benchmark import BENCHMARKS
from . import features as feats
from . import read as release


@dataclasses.dataclass
class RefCocoMConfig(PerckitConfig):
    """Options of both RefCOCO-M configs (all defaulted; see the dataset card; ``repo_id`` / ``revision``: PerckitConfig)."""

    BENCHMARK = BENCHMARKS["refcoco_m"]

    #: ``expressions`` only: carry the image in every row (False drops the column; join ``images`` on image_id).
    with_images: bool = True
    #: Accept ground-truth masks with zero area (the release has none).
    allow_empty_masks: bool = False
    #: Compare every image's header size with its masks' ``size`` and raise on a mismatch.
    check_image_size: bool = True


class RefCocoMBuilder(PerckitBuilder):
    """RefCOCO-M: configs ``expressions`` (default) and ``images``; one ``validation`` split."""

    BUILDER_CONFIGS = [
        RefCocoMConfig(name="expressions", description="one row per (image, sample, sentence), keyed by expression_id"),
        RefCocoMConfig(name="images", description="one row per image, as released"),
    ]
    #: Rows carry image bytes (about 0.5 MB each on the real data): keep the writer's buffer small.
    DEFAULT_WRITER_BATCH_SIZE = 64
    OPTION_CHECKS = dict.fromkeys(("with_images", "allow_empty_masks", "check_image_size"), bool)

    @staticmethod
    def hub_patterns(config: RefCocoMConfig) -> list[str]:
        """The release files every config needs: the Parquet shards of the one split."""
        return [release.SHARD_PATTERN]

    def _features(self) -> datasets.Features:
        c = self.config
        return feats.images_features() if c.name == "images" else feats.expression_features(c.with_images)

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        root = self._release_root()
        shards = release.find_shards(root)
        labels = [release.shard_label(p, root) for p in shards]
        # Checked here, before generation, so that these errors reach the caller unwrapped.
        for path, label in zip(shards, labels):
            with checked_opener(open)(path) as f:
                release.open_shard(f, label)
        return [datasets.SplitGenerator(name=datasets.Split(release.SPLIT),
                                        gen_kwargs={"shards": [str(p) for p in shards], "labels": labels})]

    def _generate_examples(self, shards: list[str], labels: list[str]) -> Iterator[tuple[Any, dict]]:
        c = self.config
        options = release.ReadOptions(c.allow_empty_masks, c.check_image_size,
                                      read_images=c.name == "images" or c.with_images or c.check_image_size)
        state = release.SplitState()
        for path, label in zip(shards, labels):
            # ``open`` of this module is patched by datasets' streaming mode; a local shard is a checked regular file.
            with checked_opener(open)(path) as f:
                for row in release.read_rows(f, label, options, state):
                    if c.name == "images":
                        yield row["image_id"], release.image_row(row)
                    else:
                        yield from release.expression_rows(row, c.with_images)
