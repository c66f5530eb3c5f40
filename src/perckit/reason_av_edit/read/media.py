"""Where each media value of a ReasonAVEdit-Bench row comes from: a tar read, the disk, or a lookup by id.

:class:`MediaStore` keeps the members a build wants from the non-video tars (:mod:`.archives` reads them)
and falls back to the extracted file on disk; :func:`read_disk_media` reads an extracted release. Every disk
path is a CSV media path checked by :func:`perckit.io.paths.resolve_under` (it stays inside the release root
after symbolic links) and read as a regular file of at most :data:`archives.MAX_MEMBER_BYTES`. When
``metadata.csv`` has no column for the mask video or the reference image, :func:`apply_lookup` finds the
member by sample id. A missing member is a :class:`~perckit.errors.ReleaseNotFoundError` naming the archive
it should have been in, the CSV line and column (or the lookup) and the sample.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import posixpath
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Iterable, Sequence

from ...errors import ReleaseFormatError, ReleaseNotFoundError
from ...io.paths import read_regular_file, resolve_under
from .archives import MAX_MEMBER_BYTES, check_name
from ..layout import ARCHIVES_DIR, METADATA
from .metadata import Sample

logger = logging.getLogger(__name__)


def top_folder(path: str) -> str:
    """The first component of a member path (``videos`` of ``videos/a.mp4``); ``""`` for a bare name."""
    return path.split("/", 1)[0] if "/" in path else ""


def archive_stems(labels: Iterable[str]) -> dict[str, str]:
    """``{folder: label}``: each archive label by the folder it is named after (``videos`` for ``archives/videos.tar``)."""
    return {posixpath.splitext(posixpath.basename(lab))[0]: lab for lab in labels}


def pick_video_archive(labels: Sequence[str], samples: Sequence[Sample]) -> str:
    """The tar that holds the clips: the one named after the folder of the CSV ``video`` paths.

    Tar names are not documented [inferred]: they are used only here. The folder is the most
    common first path component of the ``video`` column (``videos`` in the release).
    """
    folders = Counter(top_folder(s.video) for s in samples)
    folder = max(sorted(folders), key=lambda k: folders[k]) if folders else "videos"
    stems = archive_stems(labels)
    for name in (folder, "videos", "video"):
        if name and name in stems:
            return stems[name]
    raise ReleaseNotFoundError(f"no video archive among {list(labels)}: expected '{ARCHIVES_DIR}/{folder or 'videos'}.tar', "
                               f"named after the folder of the {METADATA} 'video' paths")


@dataclass
class MediaStore:
    """The media of one build: ``{member path: bytes}`` from the non-video tars, with a disk fallback.

    ``folder_archive`` remembers which archive held each top-level folder, so a missing member is
    reported against the archive it should have been in.
    """

    root: Path
    labels: list[str]
    data: dict[str, bytes] = field(default_factory=dict)
    folder_archive: dict[str, str] = field(default_factory=dict)

    def add_archive(self, items: Iterable[tuple[str, bytes]], label: str, wanted: set[str]) -> None:
        """Keep the ``wanted`` members of one archive; ``items`` from :func:`.archives.iter_tar_members` or
        :func:`.archives.iter_tar_file`."""
        for path, data in items:
            self.folder_archive.setdefault(top_folder(path), label)
            if path in wanted:
                self.data[path] = data

    def missing(self, path: str, sample: Sample, fld: str) -> ReleaseNotFoundError:
        folder = top_folder(path)  # the archive that held the folder, else the one named after it
        label = self.folder_archive.get(folder, archive_stems(self.labels).get(folder, f"{ARCHIVES_DIR}/{folder}.tar"))
        state = "has no member" if label in self.labels else "does not exist; it should hold member"
        return ReleaseNotFoundError(f"archive {label!r} {state} {path!r}, named in {METADATA} line {sample.line} "
                                    f"({_origin(sample, fld)}, sample {sample.sample_id!r}); the archive may be truncated, and "
                                    f"the file is not on disk under {str(self.root)!r} either")

    def get(self, path: str, sample: Sample, fld: str) -> bytes:
        if path in self.data:
            return self.data[path]
        data = _disk_media(self.root, path, sample, fld)
        if data is None:
            raise self.missing(path, sample, fld)
        return data


def _origin(sample: Sample, fld: str) -> str:
    """Where a media path of ``sample`` came from, for messages: ``column 'mask'``, or the by-id lookup."""
    if sample.columns.get(fld) is None and fld in sample.looked_up:
        return f"no column for {fld!r}, looked up by sample id"
    return f"column {sample.columns.get(fld) or fld!r}"


def _media_where(path: str, sample: Sample, fld: str) -> str:
    return f"{METADATA} line {sample.line}, {_origin(sample, fld)} (sample {sample.sample_id!r}): {path!r}"


def _disk_media(root: Path, path: str, sample: Sample, fld: str) -> bytes | None:
    """The bytes of ``root/path`` (a CSV media path), ``None`` when nothing is there. The path must stay
    inside the root after symbolic links, and be a regular file of at most :data:`MAX_MEMBER_BYTES`."""
    where = _media_where(path, sample, fld)
    disk = resolve_under(root, path, where)
    if not os.path.lexists(disk):
        return None
    try:
        return read_regular_file(disk, where, MAX_MEMBER_BYTES)
    except ReleaseNotFoundError:  # a dangling link inside the root, or a parent that is a file
        return None


def read_disk_media(root: Path, path: str, sample: Sample, fld: str) -> bytes:
    """The bytes of an extracted media file (checked like :func:`_disk_media`); a missing one raises naming the
    CSV line and column."""
    data = _disk_media(root, path, sample, fld)
    if data is None:
        raise ReleaseNotFoundError(f"{path!r} (named in {METADATA} line {sample.line}, {_origin(sample, fld)}, sample "
                                   f"{sample.sample_id!r}) not found under {str(root)!r}; expected the extracted media folders "
                                   f"next to {METADATA}")
    return data


def disk_present(root: Path, path: str, sample: Sample, fld: str) -> bool:
    """Whether something exists at ``root/path`` (checked by :func:`perckit.io.paths.resolve_under`: a path that
    resolves through a symbolic link out of the root raises). What is there is read, and refused when it is not
    a regular file under the cap, by :func:`read_disk_media` / :meth:`MediaStore.get`."""
    return os.path.exists(resolve_under(root, path, _media_where(path, sample, fld)))


# ---------------------------------------------------------------- members looked up by sample id


#: [inferred] The member looked up by sample id for a media field when ``metadata.csv`` has no column for it
#: (the card's documented columns name neither the mask video nor the reference image). The card names only
#: the folders (``masks/``, ``ref_images/``); the file is ``<folder>/<id><ext>``, named by id like
#: ``annotations/<id>.json``, with the extensions of the spec's file types: a mask video ``.mp4``; an image,
#: format not stated, so PNG or JPEG (lower case). Nothing else is tried and no folder is listed.
LOOKUP_MEMBERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "mask_video": ("masks", (".mp4",)),
    "ref_image": ("ref_images", (".png", ".jpg", ".jpeg")),
}
#: [card] Who is expected to have one: ``masks/`` holds 1,200 files, one per sample (``None``: every sample);
#: ``ref_images/`` holds 150, for the reference-guided (R) and instance-addition (C4; R3 is an R track) tracks.
LOOKUP_EXPECTED: dict[str, tuple[str, ...] | None] = {"mask_video": None, "ref_image": ("R", "C4")}
#: How many sample ids the lookup warning lists.
LOOKUP_WARN_IDS = 5


def lookup_fields(samples: Sequence[Sample]) -> tuple[str, ...]:
    """The media fields of :data:`LOOKUP_MEMBERS` that ``metadata.csv`` has no column for. A column that is
    there wins, even with empty cells (an empty cell means none)."""
    return tuple(f for f in LOOKUP_MEMBERS if samples[0].columns.get(f) is None) if samples else ()


def lookup_candidates(sample_id: str, fld: str) -> list[str]:
    """The member names tried for ``fld`` of one sample, in order (``masks/<id>.mp4``; ``ref_images/<id>.png``,
    ``.jpg``, ``.jpeg``), each checked by :func:`perckit.io.paths.check_relative` (through :func:`check_name`)."""
    folder, exts = LOOKUP_MEMBERS[fld]
    where = f"{METADATA}: sample {sample_id!r}: the {fld!r} member looked up by sample id"
    return [check_name(f"{folder}/{sample_id}{ext}", where) for ext in exts]


def lookup_wanted(samples: Sequence[Sample], fields: Sequence[str]) -> frozenset[str]:
    """Every member name the lookup may need, computed from the sample ids before any archive is read."""
    return frozenset(c for s in samples for fld in fields for c in lookup_candidates(s.sample_id, fld))


def apply_lookup(samples: Sequence[Sample], fields: Sequence[str], present: Callable[[str, Sample, str], bool]) -> list[Sample]:
    """The samples with the ``fields`` that ``metadata.csv`` has no column for filled by looking their member up
    by sample id (:func:`lookup_candidates`); ``present(member, sample, field)`` says whether a member exists
    (in a tar read, or on disk). No member: the value stays null. Two candidates of one sample present (e.g.
    ``ref_images/x.png`` and ``ref_images/x.jpg``): :class:`ReleaseFormatError`. One warning for the whole
    build lists, per field, how many of the samples expected to have one (:data:`LOOKUP_EXPECTED`: a sub-track
    code, or a one-letter track, listed there) have none, with a few of their ids; samples not expected to have one
    (a reference image outside R and C4) are not counted, and get one when it is there."""
    if not fields:
        return list(samples)
    out: list[Sample] = []
    none: dict[str, list[str]] = {f: [] for f in fields}
    expected: dict[str, int] = dict.fromkeys(fields, 0)
    for s in samples:
        s = dataclasses.replace(s, looked_up=tuple(fields))  # so that messages say where the path came from
        found: dict[str, str] = {}
        for fld in fields:
            hits = [c for c in lookup_candidates(s.sample_id, fld) if present(c, s, fld)]
            if len(hits) > 1:
                raise ReleaseFormatError(f"{METADATA} line {s.line} (sample {s.sample_id!r}): no column for {fld!r}, and the "
                                         f"lookup by sample id found {len(hits)} members {hits}; expected at most one")
            if hits:
                found[fld] = hits[0]
            codes, code = LOOKUP_EXPECTED[fld], s.sub_track.split("_", 1)[0].upper()
            if codes is None or any(code == c or (len(c) == 1 and code[:1] == c) for c in codes):  # the card expects one
                expected[fld] += 1
                if not hits:
                    none[fld].append(s.sample_id)
        out.append(dataclasses.replace(s, **found) if found else s)
    parts = []
    for fld in fields:
        if none[fld]:
            folder, exts = LOOKUP_MEMBERS[fld]
            codes = LOOKUP_EXPECTED[fld]
            who = "samples" if codes is None else f"samples of the tracks expected to have one ({', '.join(codes)})"
            ids = ", ".join(repr(i) for i in none[fld][:LOOKUP_WARN_IDS]) + (", ..." if len(none[fld]) > LOOKUP_WARN_IDS else "")
            parts.append(f"{fld}: {len(none[fld])} of {expected[fld]} {who} have no {folder}/<id>{'|'.join(exts)} ({ids})")
    if parts:
        logger.warning("%s has no column for %s, so these members were looked up by sample id; %s; those values are null",
                       METADATA, list(fields), "; ".join(parts))
    return out
