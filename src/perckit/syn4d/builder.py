"""The Syn4D ``datasets`` builder. ``builders/syn4d/syn4d.py`` is a thin entry point over it."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Iterator

import datasets

from ..hf.builder import PerckitConfig, PerckitTableBuilder, batched
from ..errors import ReleaseFormatError, ReleaseNotFoundError
from ..hf.benchmark import BENCHMARKS
from . import features as feats
from .layout import PathResolver, ReleasePaths, SequenceRecord, depth_frame_paths, release_files, resolve_release, select_records
from .read import checksum_verifier, exr_size, load_records, read_tracking_npy
from .rows import arrow_table, read_sequence_gt

DEFAULT_NUM_QUERIES = 512
DEFAULT_DEPTH_HW = (720, 1280)


@dataclasses.dataclass
class Syn4DConfig(PerckitConfig):
    """Options of both Syn4D configs (all defaulted; see the dataset card; ``repo_id`` / ``revision``: PerckitConfig)."""

    BENCHMARK = BENCHMARKS["syn4d"]

    tracking_gt_dir: str | None = None
    challenge_dir: str | None = None
    index_file: str | None = None
    variants: tuple | None = None
    scenes: tuple | None = None
    cameras: tuple | None = None
    limit: int | None = None
    num_queries: int | None = None
    depth_hw: tuple | None = None
    #: None: verify against SHA256SUMS when the release has one; True: require it; False: skip.
    verify_checksums: bool | None = None


def _stat_key(path: Path) -> tuple | None:
    """What tells a changed file (size, modification time in ns, inode, device), None when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)


class Syn4DBuilder(PerckitTableBuilder):
    """Syn4D: configs ``tracking`` (default) and ``challenge``; one ``test`` split keyed by ``sequence_id``.

    Rows are read as before (:meth:`_row`) and go to Arrow in tables of ``writer_batch_size`` rows built from
    their numpy arrays (:func:`perckit.syn4d.rows.arrow_table`, equal to the per-example encoding).
    """

    BUILDER_CONFIGS = [
        Syn4DConfig(name="tracking", description="tracking ground truth of every sequence (from the NPYs)"),
        Syn4DConfig(name="challenge", description="tracking + video + depth (m) + camera poses"),
    ]
    DEFAULT_WRITER_BATCH_SIZE = 64

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.config.name == "challenge" and kwargs.get("writer_batch_size") is None:
            self._writer_batch_size = 1  # a full-size challenge row is about 118 MB

    @staticmethod
    def hub_patterns(config: Syn4DConfig) -> list[str]:
        """The release files a config needs, narrowed by the variant / scene filters."""
        pats = ["benchmark/sequences.jsonl", "benchmark/SHA256SUMS"]
        for v in config.variants or ["*"]:
            for s in config.scenes or ["*"]:
                pats.append(f"benchmark/data/tracking_gt/{v}/{s}/*.npy")
                if config.name == "challenge":
                    pats += [f"{base}/{v}/{s}/{d}/*" for base in ("challenge_eval", "benchmark/challenge_eval")
                             for d in ("mp4", "exr_layers/depth", "ground_truth/meta_exr_csv")]
        return pats

    # ------------------------------------------------------------ shapes fixed per build

    def _data_root(self) -> str | None:
        """``data_dir``, else the Hub snapshot fetched by this build (kept on the builder: the config object
        may be the class's shared ``BUILDER_CONFIGS`` entry, which later builds must find unchanged)."""
        return self.config.data_dir or getattr(self, "_snapshot", None)

    def _paths(self) -> ReleasePaths:
        c = self.config
        return resolve_release(self._data_root(), c.tracking_gt_dir, c.challenge_dir, c.index_file)

    def _records(self, paths: ReleasePaths) -> list[SequenceRecord]:
        """The selected records. The index is read once per builder while it is unchanged (the same paths, the
        same file: size, modification time and inode), e.g. by ``_shapes`` at construction and again by
        ``_split_generators``; any change reads it again."""
        c = self.config
        key = (paths, c.variants, c.scenes, c.cameras, c.limit, _stat_key(paths.index) if paths.index is not None else None)
        cached = getattr(self, "_records_cache", None)
        if cached is not None and cached[0] == key and key[-1] is not None:
            return list(cached[1])
        records = select_records(load_records(paths), c.variants, c.scenes, c.cameras, c.limit)
        self._records_cache = (key, tuple(records))
        return records

    def _shapes(self) -> tuple[int, tuple[int, int]]:
        """Q and (H, W): the options, else read from the first NPY / EXR of a local release, else the real sizes."""
        c = self.config
        q, hw = c.num_queries, tuple(c.depth_hw) if c.depth_hw else None
        root = self._data_root()
        if (q is None or (hw is None and c.name == "challenge")) and root and Path(root).is_dir():
            paths = self._paths()
            records = self._records(paths)
            if q is None:
                npy = next((r.tracking_npy(paths.tracking_gt) for r in records if r.tracking_npy(paths.tracking_gt).is_file()), None)
                if npy is not None:
                    q = read_tracking_npy(npy)["tracks_ref0"].shape[1]
            if hw is None:  # the first frame's EXR of the first sequence that has one
                firsts = (depth_frame_paths(r.depth_dir, r.sequence, r.frame_indices)[0] for r in records
                          if r.depth_dir is not None and r.depth_dir.is_dir())
                first = next((p for p in firsts if p.is_file()), None)
                hw = exr_size(first) if first is not None else None
        return int(q or DEFAULT_NUM_QUERIES), tuple(hw or DEFAULT_DEPTH_HW)

    def _features(self) -> datasets.Features:
        self._q, self._hw = self._shapes()
        f = feats.challenge_features(self._q, self._hw) if self.config.name == "challenge" else feats.tracking_features(self._q)
        return datasets.Features(f)

    # ------------------------------------------------------------ generation

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        c = self.config
        if not self._data_root():
            self._snapshot = str(self._release_root())
            # Q and (H, W) can only be read now that the files are here (as packaged builders infer features).
            self.info.features = self._features()
        paths = self._paths()
        verifier = checksum_verifier(paths, c.verify_checksums)
        records = self._records(paths)
        if not records:
            raise ReleaseFormatError(f"Syn4D: no sequence selected from {str(paths.index or paths.tracking_gt)!r} (check variants/scenes/cameras)")
        if c.name == "challenge" and paths.challenge is None:
            raise ReleaseNotFoundError(
                f"Syn4D 'challenge' config: no challenge_eval/ folder under {str(paths.benchmark)!r} or {str(paths.root)!r} "
                "(pass challenge_dir=...)"
            )
        if c.name == "tracking":
            resolver = PathResolver(paths.tracking_gt)
            missing = [r.sequence_id for r in records if not r.tracking_npy(paths.tracking_gt, resolver).is_file()]
            if missing:
                raise ReleaseNotFoundError(
                    f"Syn4D: {len(missing)} tracking NPY(s) missing under {str(paths.tracking_gt)!r}, e.g. {missing[:3]}"
                )
        if verifier is not None:
            # Before generation, so that a mismatch reaches the user as its own ReleaseFormatError and not
            # wrapped in datasets' DatasetGenerationError: every listed file this config reads.
            challenge = c.name == "challenge"
            verifier.check_all(release_files(paths, records, tracking=True, depth=challenge, camera=challenge))
        return [datasets.SplitGenerator(name=datasets.Split.TEST, gen_kwargs={"records": records, "paths": paths})]

    def _generate_tables(self, records: list, paths: ReleasePaths) -> Iterator[tuple[str, Any]]:
        """Tables of ``writer_batch_size`` rows in order, keyed by the first ``sequence_id`` (one row for
        ``challenge``: a full-size row is about 118 MB)."""
        resolver = PathResolver(paths.tracking_gt)
        for batch in batched(records, max(1, int(self._writer_batch_size or self.DEFAULT_WRITER_BATCH_SIZE))):
            yield batch[0].sequence_id, arrow_table([self._row(r, paths, resolver) for r in batch], self.info.features)

    def _row(self, r: SequenceRecord, paths: ReleasePaths, resolver: PathResolver | None = None) -> dict:
        row: dict[str, Any] = {
            "sequence_id": r.sequence_id, "variant": r.variant, "scene": r.scene, "sequence": r.sequence,
            "camera": r.camera, "frame_indices": list(r.frame_indices),
        }
        row.update(read_sequence_gt(r, paths, "tracking", resolver=resolver))  # every field None when the NPY is absent
        if row["tracks_ref0"] is not None and row["tracks_ref0"].shape[1] != self._q:
            raise ReleaseFormatError(
                f"{str(r.tracking_npy(paths.tracking_gt))!r}: has Q = {row['tracks_ref0'].shape[1]} queries, this build "
                f"expects {self._q}; set the option num_queries"
            )
        if self.config.name == "challenge":
            row["video"] = {"path": str(r.video), "bytes": None} if r.video is not None and r.video.is_file() else None
            row.update(read_sequence_gt(r, paths, "depth", self._hw))
            row.update(read_sequence_gt(r, paths, "pose"))
        return row
