"""The ReasonAVEdit-Bench ``datasets`` builder. ``builders/reason_av_edit/reason_av_edit.py`` is a thin entry point over it.

Archive mode (the Hub layout, streaming-friendly): ``_split_generators`` passes one
``dl_manager.iter_archive(tar)`` per tar, with the tar's path (a tuple: gen_kwargs lists would be read
as shards); ``_generate_rows`` reads ``metadata.csv`` and the annotations first, keeps the referenced
members of every non-video tar in memory, then makes one pass over the video tar and yields one row per
clip, in video-tar order. Nothing is extracted to disk. When not streaming and the tar is a local file,
the same pass reads each member with one ``read`` at its offset (:func:`.read.archives.iter_tar_file`) instead
of through the iterator's 10 KB stream blocks; streaming uses the iterator. Extracted mode reads the seven folders next
to ``metadata.csv``, in CSV order. Both modes give identical rows: every media value is
``{"bytes": <file bytes>, "path": <release-relative path>}``.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any, Iterator

import datasets

from ..hf.builder import PerckitConfig, PerckitTableBuilder
from ..errors import OptionError, ReleaseNotFoundError
from ..io.prefetch import in_background
from ..hf.benchmark import BENCHMARKS
from . import features as feats
from .layout import ANNOTATIONS_DIR, ARCHIVE_PATTERN, METADATA
from .read.archives import archive_label, find_archives, iter_tar_file, iter_tar_members
from .read.media import MediaStore, apply_lookup, disk_present, lookup_fields, lookup_wanted, pick_video_archive, read_disk_media, top_folder
from .read.metadata import Sample, annotation_path, read_annotation, read_metadata
from .rows import build_row

logger = logging.getLogger(__name__)

SOURCES = ("auto", "archives", "extracted")


@dataclasses.dataclass
class ReasonAVEditConfig(PerckitConfig):
    """Options of the one ReasonAVEdit-Bench config (all defaulted; see the dataset card; ``repo_id`` / ``revision``:
    PerckitConfig)."""

    BENCHMARK = BENCHMARKS["reason_av_edit"]

    #: "auto": "extracted" when the folder of the CSV's video paths (``videos/``) exists, else "archives".
    source: str = "auto"
    #: ``anchor_mask`` foreground is a ``reason_visual_mask`` pixel value > this.
    png_mask_threshold: int = 0
    #: When ``metadata.csv`` has no column for the mask video / the reference image (the card's documented
    #: columns have neither), look ``masks/<id>.mp4`` and ``ref_images/<id>.png|.jpg|.jpeg`` up by sample id
    #: (``read.media.apply_lookup``) [inferred]. ``False``: those values stay null.
    media_lookup: bool = True


def _check_threshold(name: str, t: object) -> None:
    if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < 255:
        raise OptionError(f"option {name!r}: expected an int in [0, 254], got {t!r}")


class ReasonAVEditBuilder(PerckitTableBuilder):
    """ReasonAVEdit-Bench: one config (``default``), one ``test`` split keyed by ``sample_id``."""

    BUILDER_CONFIGS = [ReasonAVEditConfig(name="default", description="one row per sample (1,200 in the release)")]
    #: Rows carry the media bytes of a sample (a few MB each on the real data).
    DEFAULT_WRITER_BATCH_SIZE = 16
    #: One row per table: its media bytes then go to the Arrow file without a copy (see ``rows_to_table``).
    ROWS_PER_TABLE = 1
    OPTION_CHECKS = {"source": SOURCES, "png_mask_threshold": _check_threshold, "media_lookup": bool}

    @staticmethod
    def hub_patterns(config: ReasonAVEditConfig) -> list[str]:
        """The only release files the one config needs: the CSV, the annotations and the tars."""
        return [METADATA, f"{ANNOTATIONS_DIR}/*.json", ARCHIVE_PATTERN]

    def _features(self) -> datasets.Features:
        return feats.builder_features()

    def _source(self, root: Path, samples: list[Sample]) -> str:
        folder = top_folder(samples[0].video) or "videos"
        if self.config.source == "auto":
            return "extracted" if (root / folder).is_dir() else "archives"
        if self.config.source == "extracted" and not (root / folder).is_dir():
            raise ReleaseNotFoundError(
                f"source='extracted' but {str(root / folder)!r} does not exist; unpack archives/*.tar next to "
                f"{METADATA} or use source='archives'"
            )
        return self.config.source

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        root = self._release_root()
        # Parsed here too, so that CSV errors reach the caller unwrapped (generation re-reads it, and warns).
        samples = read_metadata(root, warn=False)
        source = self._source(root, samples)
        kwargs: dict[str, Any] = {"root": str(root), "source": source, "archives": (), "video_archive": None,
                                  "local": not getattr(dl_manager, "is_streaming", False)}
        if source == "archives":
            tars = find_archives(root)
            labels = tuple(archive_label(p, root) for p in tars)
            kwargs["video_archive"] = pick_video_archive(labels, samples)
            # A tuple, not a list: datasets reads gen_kwargs lists as shards.
            kwargs["archives"] = tuple((label, str(p), dl_manager.iter_archive(str(p))) for label, p in zip(labels, tars))
        return [datasets.SplitGenerator(name=datasets.Split.TEST, gen_kwargs=kwargs)]

    def _generate_rows(self, root: str, source: str, archives: tuple = (), video_archive: str | None = None, local: bool = False) -> Iterator[tuple[str, dict]]:
        root_path = Path(root)
        threshold = self.config.png_mask_threshold
        samples = read_metadata(root_path)
        annotations = {s.sample_id: read_annotation(annotation_path(root_path, s.sample_id)) for s in samples}
        # Fields metadata.csv has no column for, looked up by sample id (a column that is there wins).
        lookup = lookup_fields(samples) if self.config.media_lookup else ()
        if source == "extracted":
            samples = apply_lookup(samples, lookup, lambda p, s, fld: disk_present(root_path, p, s, fld))
            for s in samples:  # annotations[id]: (fields, text)
                yield s.sample_id, build_row(s, *annotations[s.sample_id],
                                             lambda fld, path, s=s: read_disk_media(root_path, path, s, fld), threshold)
            return
        # Only the members some row names are read; the others are skipped without reading their data.
        videos = frozenset(s.video for s in samples)
        wanted = frozenset(p for s in samples for f, p in s.media().items() if f != "video") | lookup_wanted(samples, lookup)
        extra: list[str] = []
        items = {label: _member_reader(label, path, members, local, videos if label == video_archive else wanted,
                                       extra if label == video_archive else None)
                 for label, path, members in archives}
        yield from self._archive_rows(root_path, samples, annotations, items, video_archive, threshold, extra, lookup)

    @staticmethod
    def _archive_rows(root: Path, samples: list, annotations: dict, archives: dict, video_archive: str, threshold: int,
                      extra: list | None = None, lookup: tuple = ()) -> Iterator[tuple[str, dict]]:
        """``archives``: ``{label: (member path, bytes) iterator}`` in archive order. ``extra`` collects the
        members of the video tar that no row names (skipped by its reader). ``lookup``: the media fields looked
        up by sample id once the non-video tars are read (in them, else on disk)."""
        store = MediaStore(root, list(archives))
        wanted = {p for s in samples for f, p in s.media().items() if f != "video"} | lookup_wanted(samples, lookup)
        for label, items in archives.items():
            if label != video_archive:
                store.add_archive(items, label, wanted)
        samples = apply_lookup(
            samples, lookup, lambda p, s, fld: p in store.data or disk_present(root, p, s, fld)
        )
        by_video = {s.video: s for s in samples}
        done: set[str] = set()
        extra = [] if extra is None else extra
        for path, data in archives[video_archive]:
            store.folder_archive.setdefault(top_folder(path), video_archive)
            s = by_video.get(path)
            if s is None or s.sample_id in done:
                extra.append(path)
                continue
            done.add(s.sample_id)
            yield s.sample_id, build_row(s, *annotations[s.sample_id],
                                         lambda fld, p, s=s, data=data: data if fld == "video" else store.get(p, s, fld),
                                         threshold)
        if extra:
            logger.warning("archive %r: %d member(s) not named (or named twice) in the 'video' column of %s were skipped, e.g. %s",
                           video_archive, len(extra), METADATA, extra[:3])
        # Clips missing from the video tar: from disk when present, else an error naming the archive and member.
        for s in [s for s in samples if s.sample_id not in done]:
            yield s.sample_id, build_row(s, *annotations[s.sample_id], lambda fld, p, s=s: store.get(p, s, fld), threshold)


def _member_reader(label: str, path: str, members: Any, local: bool, wanted: frozenset | None = None,
                   skipped: list | None = None) -> Iterator[tuple[str, bytes]]:
    """The ``(member path, bytes)`` of the ``wanted`` members of one tar: the direct reader for a local file
    outside streaming, else the stream of ``dl_manager.iter_archive`` (both under :class:`archives.MemberGuard`)."""
    if local and Path(path).is_file():
        return in_background(iter_tar_file(path, label, wanted, skipped))
    return iter_tar_members(members, label, wanted, skipped)
