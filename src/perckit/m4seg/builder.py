"""The M⁴Seg ``datasets`` builder. ``builders/m4seg/m4seg.py`` is a thin entry point over it.

``open`` and ``glob.glob`` are called from this module so that streaming mode (which patches the builder
modules) can read remote files; the readers in :mod:`perckit.m4seg.read` receive them as arguments, ``open``
behind :func:`perckit.io.paths.checked_opener` (a local file is opened as a checked regular file).
"""

from __future__ import annotations

import dataclasses
import glob
from pathlib import Path
from typing import Any, Iterator, Sequence

import datasets
import pyarrow as pa

from ..hf.builder import PerckitConfig, PerckitTableBuilder, batched, rows_to_table
from ..errors import OptionError, ReleaseNotFoundError, check_choice
from ..io.paths import checked_opener
from ..hf.benchmark import BENCHMARKS
from . import features as feats
from .layout import NATIVE_FILE, PARQUET_GLOB, SOURCES, SPLITS, confine_files, native_path, parquet_paths, resolve_source
from .read.ids import IdGuard
from .read.images import iter_image_paths, missing_images, read_image_bytes
from .read.native import iter_native, native_shards, scan_native
from .read.parquet import iter_parquet_tables, parquet_shards, scan_parquet_ids
from .rows import SIZE_ORDERS


def _opener() -> Any:
    """This module's ``open`` (``xopen`` in streaming mode) behind :func:`perckit.io.paths.checked_opener`: local
    release files are opened as checked regular files."""
    return checked_opener(open)


@dataclasses.dataclass
class M4SegConfig(PerckitConfig):
    """Options of the M4Seg builder (all defaulted; see the dataset card; ``repo_id`` / ``revision``: PerckitConfig)."""

    BENCHMARK = BENCHMARKS["m4seg"]

    #: "auto" (the Parquet data/{split}-*.parquet when it exists, else the native JSON), "native" or "parquet".
    source: str = "auto"
    #: How to read native ``image_sizes``: "auto" (checked against the masks), "hw" or "wh".
    native_image_size_order: str = "auto"
    #: Root of the source images (PRIMA's data/ layout); when set, the images are embedded as ``image_files``.
    image_root: str | None = None
    #: The splits to build (and to download from the Hub).
    splits: tuple = SPLITS


class M4SegBuilder(PerckitTableBuilder):
    """M4Seg: one config ``default``; splits ``train`` and ``test``; key ``example_id``; rows in file order.

    Arrow-based: the Parquet source becomes one table per record batch (:mod:`perckit.m4seg.read.parquet`,
    rows never materialised), the native rows go to Arrow in tables of ``ROWS_PER_TABLE``
    (:func:`perckit.hf.builder.rows_to_table`); both are exactly the tables ``datasets``' per-example
    encoding would give (``tests/test_m4seg_tables.py``).
    """

    BUILDER_CONFIGS = [M4SegConfig(name="default", description="every example with its groundings")]
    DEFAULT_WRITER_BATCH_SIZE = 10_000
    ROWS_PER_TABLE = 1000
    OPTION_CHECKS = {"source": SOURCES, "native_image_size_order": SIZE_ORDERS}

    @staticmethod
    def hub_patterns(config: M4SegConfig, source: str | None = None, splits: Sequence[str] | None = None) -> list[str]:
        """The release files the config's ``splits`` (or these ``splits``) need from one source: ``source``, else
        the one the Hub download tries first (the native file for ``source="native"``, else the Parquet shards:
        ``"auto"`` prefers them, see ``resolve_source``)."""
        source = source or ("native" if config.source == "native" else "parquet")
        pattern = NATIVE_FILE if source == "native" else PARQUET_GLOB
        return [pattern.format(split=s) for s in (config.splits if splits is None else splits)]

    def _check_options(self) -> None:
        super()._check_options()
        c = self.config
        c.splits = (c.splits,) if isinstance(c.splits, str) else tuple(c.splits)
        if not c.splits:
            raise OptionError(f"option 'splits': expected a non-empty subset of {list(SPLITS)}, got {c.splits!r}")
        for s in c.splits:
            check_choice("splits", s, SPLITS)

    def _features(self) -> datasets.Features:
        return feats.row_features(with_images=self.config.image_root is not None)

    def _download_and_prepare(self, dl_manager: Any, verification_mode: Any, **prepare_split_kwargs: Any) -> None:
        # _split_generators shards the native file only when several processes will read it.
        self._m4seg_num_proc = prepare_split_kwargs.get("num_proc") or 1
        super()._download_and_prepare(dl_manager, verification_mode, **prepare_split_kwargs)

    # ------------------------------------------------------------ files

    def _roots(self) -> dict[str, Path]:
        """The release root of each split: ``data_dir``, or a Hub snapshot with only the files the split needs."""
        c = self.config
        if c.data_dir:
            root = Path(c.data_dir)
            if not root.is_dir():
                raise ReleaseNotFoundError(
                    f"M4Seg release folder {str(root)!r} does not exist; pass data_dir=<the release root> (the folder "
                    "that holds annotations/ and/or data/)"
                )
            return {s: root for s in c.splits}

        root = self._download(self.hub_patterns(c))
        roots = {s: root for s in c.splits if c.source != "auto" or parquet_paths(root, s, glob.glob)}
        rest = [s for s in c.splits if s not in roots]
        if rest:  # source="auto" and the repository has no Parquet shard for these splits
            root = self._download(self.hub_patterns(c, "native", rest))
            roots.update({s: root for s in rest})
        return roots

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        c = self.config
        self._check_options()
        nproc = int(getattr(self, "_m4seg_num_proc", 1) or 1)
        gens = []
        for split, root in self._roots().items():
            source = resolve_source(root, split, c.source, glob.glob)
            files = [str(native_path(root, split))] if source == "native" else parquet_paths(root, split, glob.glob)
            # before any read: a shard or the native file that is a FIFO, or (data_dir) linked out of the folder
            confine_files(root, files, split, links=bool(c.data_dir))
            if source == "native":
                path = files[0]
                scan = scan_native(_opener(), path, split, need_count=nproc > 1, size_order=c.native_image_size_order)
                shards: list = native_shards(path, scan, nproc)
                kind = scan.kind
            else:
                kind = "list"
                scan_parquet_ids(_opener(), files, split)  # the whole split's ids, before any row (and any worker)
                shards = parquet_shards(_opener(), files, split=split, rows_per_shard=None if nproc == 1 else 20_000)
            if c.image_root is not None:
                self._check_images(split, source, files, kind)
            gens.append(datasets.SplitGenerator(name=split, gen_kwargs={"split": split, "source": source, "shards": shards}))
        return gens

    def _check_images(self, split: str, source: str, files: list[str], kind: str) -> None:
        root = Path(self.config.image_root)
        if not root.is_dir():
            raise ReleaseNotFoundError(f"M4Seg: image_root {str(root)!r} is not a folder (expected PRIMA's image layout, e.g. coco_2017/train2017/...)")
        first, missing, checked = missing_images(root, iter_image_paths(_opener(), source, files, kind, split))
        if missing:
            listing = "\n  ".join(first)
            raise ReleaseNotFoundError(
                f"M4Seg {split} split: {missing} of {checked} image path(s) not found under image_root {str(root)!r}; "
                f"the first {len(first)}:\n  {listing}\n(paths are relative to PRIMA's data/ root: coco_2017/..., "
                "Part_Segm/..., Semantic_Segm/...; keep the ADE20K object and ADE20KPart234 roots separate; "
                "omit image_root to build without pixels)"
            )

    # ------------------------------------------------------------ generation

    def _generate_tables(self, split: str, source: str, shards: list) -> Iterator[tuple[str, pa.Table]]:
        """Tables of exactly ``info.features.arrow_schema`` (the writer's cast is then free), keyed by the
        first example id of each. Native ids are checked unique in file order, after their rows' conversion (the
        Parquet ids before any row: ``_split_generators``); with ``image_root`` each row's images are read after
        its id check."""
        c = self.config
        schema = self.info.features.arrow_schema
        guard = IdGuard(f"M4Seg {split} split ({source})")
        if source == "native":
            rows = batched(self._native_rows(split, shards, guard), self.ROWS_PER_TABLE)
            tables = (rows_to_table(batch, schema) for batch in rows)
        else:
            row_schema = pa.schema([f for f in schema if f.name != feats.IMAGE_FILES])
            tables = iter_parquet_tables(_opener(), shards, split, row_schema)
        for table in tables:
            if c.image_root is not None and source != "native":
                table = self._with_image_files(table, split, schema)
            if table.num_rows:
                yield table.column("example_id")[0].as_py(), table
        guard.flush()

    def _native_rows(self, split: str, shards: list, guard: IdGuard) -> Iterator[dict]:
        """The rows of ``iter_native``, each id checked, with their ``image_files`` under ``image_root``."""
        c = self.config
        for row in iter_native(_opener(), shards, split, c.native_image_size_order):
            guard.add(row["example_id"])
            if c.image_root is not None:
                row[feats.IMAGE_FILES] = self._image_files(split, row["example_id"], [im["path"] for im in row["images"]])
            yield row

    def _image_files(self, split: str, example_id: str, paths: list) -> list[dict]:
        where = f"M4Seg {split} split: example {example_id!r}"
        root = self.config.image_root
        return [read_image_bytes(_opener(), root, p, f"{where}: images[{k}].path") for k, p in enumerate(paths)]

    def _with_image_files(self, table: pa.Table, split: str, schema: pa.Schema) -> pa.Table:
        """``table`` with its ``image_files`` column (the bytes of every image, in ``images`` order)."""
        paths = [[im["path"] for im in images] for images in table.column("images").to_pylist()]
        files = [self._image_files(split, eid, p) for eid, p in zip(table.column("example_id").to_pylist(), paths)]
        column = pa.array(files, type=schema.field(feats.IMAGE_FILES).type)
        return pa.Table.from_arrays([*table.columns, column], schema=schema)
