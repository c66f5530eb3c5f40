"""The ReasonAVEdit-Bench export hook (:mod:`perckit.export.hooks`): sound and video the Dataset Viewer plays.

On the way to the Hub (:func:`export_split`), a split's builder rows become two Parquet configs:

- the parent config (``default``): the builder's rows without ``video`` and ``mask_video`` (every other column
  in its place, ``preview`` last when convert added it), ``audio`` and ``reason_audio`` typed ``datasets.Audio()``
  (a cast of the same ``{bytes, path}`` storage: the WAV bytes are kept, never re-encoded), so the Viewer plays
  them;
- the child config ``videos`` (:data:`CHILD_CONFIG`): one row per sample, ``sample_id``, ``category``,
  ``sub_track``, ``language``, ``instruction``, then ``video`` and ``mask_video`` typed ``datasets.Video()``
  holding the mp4 bytes (the Hub documents videos in Parquet; the Viewer makes a Video cell with bytes a video
  asset). One config of Parquet, not a folder of mp4 files: a card listing a Parquet config and a files config
  cannot load the latter (datasets infers one builder module per repository, from the first config).

The builder gives every clip as ``{bytes, path}`` with ``path`` relative to the release root, and both are kept,
so :func:`load_back` gives back exactly the builder's rows (``path`` included) and no local folder name reaches
the Hub. A value that names its file by ``path`` alone (a row not made by the builder) is read under
``release_root`` (:func:`perckit.io.paths.resolve_under`: relative, inside the root, no link out of it; a regular
file of at most :data:`~.layout.MAX_MEDIA_FILE_BYTES`); an absolute ``path`` is reduced to its base name. ``None``
and the "not provided" marker ``{bytes: None, path: ""}`` stay as they are. Sample ids are the join key: an
empty, missing or repeated one is refused.

:func:`load_back` reverses it for rows read back with plain ``datasets.load_dataset``: the ``videos`` shards the
export lists for the split (:func:`perckit.export.state.export_layout`: its record, or the card of a copy without
one) are opened under the export root (regular files, checked by :mod:`perckit.io.parquetio` before anything is
decompressed: at most
:data:`perckit.io.parquetio.MAX_COLUMN_CHUNK_BYTES` per column chunk, as the footer and the page headers declare it),
indexed by ``sample_id`` (a repeated id is refused naming both files), and ``video`` / ``mask_video`` are joined
back one row group at a time (a sample the shards lack is refused naming them; a clip over
:data:`~.layout.MAX_MEDIA_FILE_BYTES` too). The audio columns get the builder's media feature back and the columns
the builder's order (extra columns such as ``preview`` after).
"""

from __future__ import annotations

import hashlib
import os
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputNotFoundError, ReleaseFormatError
from ..export.hooks import ChildConfig, ExportParts
from . import features as feats
from .layout import MAX_MEDIA_FILE_BYTES

#: the child config that holds the clips
CHILD_CONFIG = "videos"
CHILD_DESCRIPTION = ("One row per sample: its source video and its target mask video (mp4, played by the Dataset "
                     "Viewer) with the sample's id, category, sub-track, language and instruction. Join it to the "
                     "default config on sample_id (perckit.export.load_export does).")
VIDEO_COLUMNS = ("video", "mask_video")
AUDIO_COLUMNS = ("audio", "reason_audio")
#: the sample's text columns the child keeps beside its clips (for the Viewer and for filtering)
CHILD_TEXT_COLUMNS = ("sample_id", "category", "sub_track", "language", "instruction")
#: rows per batch while rewriting or joining clips (a row holds a clip: a few MB)
BATCH_ROWS = 16


def _where(split: str) -> str:
    return f"reason_av_edit export, split {split!r}"


def _needs_rewrite(ds: datasets.Dataset, columns: list[str]) -> bool:
    """A clip names its file by ``path`` alone, or carries an absolute ``path``."""
    tables = ds.select_columns(columns).with_format("arrow").iter(batch_size=100)
    for chunk in (chunk for table in tables for column in table.columns for chunk in column.chunks):
        path = pc.struct_field(chunk, "path")
        path_only = pc.and_(pc.is_valid(chunk), pc.and_(pc.is_null(pc.struct_field(chunk, "bytes")),
                                                        pc.greater(pc.utf8_length(path), 0)))
        if pc.any(pc.fill_null(pc.or_(path_only, pc.starts_with(path, "/")), False)).as_py():
            return True
    return False


def _clip(value: Any, where: str, release_root: Path | None) -> dict | None:
    """A clip as the child stores it: ``{bytes, path}`` with the bytes (read under ``release_root`` when the value
    names its file alone) and a relative path (an absolute one reduced to its base name)."""
    if value is None or not feats.is_media_provided(value):
        return value
    path = value.get("path")
    data = value.get("bytes")
    if data is None:
        if release_root is None:
            raise ReleaseFormatError(f"{where}: expected the clip's bytes (the builder gives them), got only the path "
                                     f"{path!r} and no release folder to read it under")
        from ..io.paths import read_regular_file, resolve_under

        file = resolve_under(release_root, path, f"{where}: path", ReleaseFormatError)
        data = read_regular_file(file, where, MAX_MEDIA_FILE_BYTES, ReleaseFormatError, InputNotFoundError)
    if isinstance(path, str) and os.path.isabs(path):
        path = os.path.basename(path)
    return {"bytes": data, "path": path}


def _child_rows(ds: datasets.Dataset, present: list[str], split: str, release_root: Path | None) -> datasets.Dataset:
    columns = [c for c in CHILD_TEXT_COLUMNS if c in ds.column_names] + present
    part = ds.select_columns(columns)
    target = datasets.Features({c: datasets.Video() if c in VIDEO_COLUMNS else part.features[c] for c in columns})
    if _needs_rewrite(part, present):
        stored = datasets.Features({c: datasets.Video(decode=False) if c in VIDEO_COLUMNS else part.features[c] for c in columns})
        storage = stored.arrow_schema

        def rewrite(table: pa.Table) -> pa.Table:
            ids = table.column("sample_id").to_pylist()
            for col in present:
                values = [_clip(v, f"{_where(split)}, sample {sid!r}, column {col!r}", release_root)
                          for v, sid in zip(table.column(col).to_pylist(), ids)]
                idx = table.schema.get_field_index(col)
                table = table.set_column(idx, storage.field(col), pa.array(values, type=storage.field(col).type))
            return table

        part = part.with_format("arrow").map(rewrite, batched=True, batch_size=BATCH_ROWS, features=stored,
                                             load_from_cache_file=False, desc=None).with_format(None)
    return part.cast(target)


def _cast_audio(ds: datasets.Dataset) -> datasets.Dataset:
    for col in AUDIO_COLUMNS:
        feature = ds.features.get(col)
        if isinstance(feature, dict) and set(feature) == {"bytes", "path"}:
            ds = ds.cast_column(col, datasets.Audio())
    return ds


def export_split(ds: datasets.Dataset, config: str, split: str, root: Path, release_root: Path | None = None) -> ExportParts:
    """The parent rows of ``split`` and its ``videos`` child rows (module docstring); ``root`` (the export folder)
    is not used: both are Parquet the integrator writes.

    Errors: :class:`ReleaseFormatError` for a missing, empty or repeated sample id, or a clip given by path alone
    without ``release_root``, or read under it from a path that leaves it, is not a regular file or is over the cap;
    :class:`~perckit.errors.InputNotFoundError` for a missing file."""
    present = [c for c in VIDEO_COLUMNS if c in ds.column_names]
    if not present:
        return ExportParts(_cast_audio(ds), [])
    if "sample_id" not in ds.column_names:
        raise ReleaseFormatError(f"{_where(split)}: expected a 'sample_id' column (the key that joins the videos config), "
                                 f"got columns {ds.column_names}")
    seen: set[str] = set()
    for sid in ds.select_columns(["sample_id"]).with_format("arrow")[:].column(0).to_pylist():
        if not isinstance(sid, str) or not sid:
            raise ReleaseFormatError(f"{_where(split)}: expected every row to have a sample_id, got {sid!r}")
        if sid in seen:
            raise ReleaseFormatError(f"{_where(split)}: expected every sample_id once (the key of the videos config), "
                                     f"got {sid!r} twice")
        seen.add(sid)
    child = _child_rows(ds, present, split, release_root)
    return ExportParts(_cast_audio(ds.remove_columns(present)), [ChildConfig(CHILD_CONFIG, child, CHILD_DESCRIPTION)])


# --------------------------------------------------------------------------------------------------- reading back


def _child_files(layout: Any, ds: datasets.Dataset) -> list[str]:
    """The ``videos`` shards of the rows' split (relative to the export root), as the one lister of an export's
    files gives them (:func:`perckit.export.state.export_layout`: the record's list, or in a copy downloaded from the
    Hub, which has no record, the card's ``data_files``; every shard inside the export and past the Parquet guard):
    the split named like the rows', else the only one."""
    from ..io.paths import relative_label

    export_root = layout.root
    names = layout.names()
    if CHILD_CONFIG not in names or (layout.record is not None and "parent" not in layout.record["configs"][CHILD_CONFIG]):
        raise InputNotFoundError(f"reason_av_edit export {str(export_root)!r}: expected a {CHILD_CONFIG!r} config written with "
                                 f"the rows (the clips of video and mask_video), the export has {names}; "
                                 "run `perckit convert` again")
    splits = layout.splits(CHILD_CONFIG)
    name = str(ds.split) if ds.split is not None else None
    split = name if name in splits else (splits[0] if len(splits) == 1 else None)
    if split is None:
        raise ReleaseFormatError(f"reason_av_edit export {str(export_root)!r}: expected the rows' split ({name!r}) among the "
                                 f"{CHILD_CONFIG!r} splits {sorted(splits)}; load a split of the export by name")
    # media=False: every clip joined is checked for its bytes in _Clips.get, not by a second read of every shard
    return [relative_label(p, export_root) or str(p) for p in layout.files(CHILD_CONFIG, [split], media=False)[split]]


#: The Arrow types of a text column and of a bytes column.
_STRING = (pa.string(), pa.large_string())
_BINARY = (pa.binary(), pa.large_binary())


def _check_schema(schema: pa.Schema, columns: list[str], where: str) -> None:
    def ok(name: str) -> bool:
        i = schema.get_field_index(name)
        if i < 0:
            return False
        t = schema.field(i).type
        if name == "sample_id":
            return t in _STRING
        return (pa.types.is_struct(t) and t.get_field_index("bytes") >= 0 and t.get_field_index("path") >= 0
                and t.field("bytes").type in _BINARY and t.field("path").type in _STRING)

    bad = [c for c in ["sample_id", *columns] if not ok(c)]
    if bad:
        raise ReleaseFormatError(f"{where}: expected a string column 'sample_id' and {columns} as video {{bytes, path}} "
                                 f"structs, got {[f'{f.name}: {f.type}' for f in schema if f.name in bad] or 'none of'} for {bad}")


class _Clips:
    """The clips of the ``videos`` shards of one split, by sample id, read one row group at a time."""

    def __init__(self, stack: ExitStack, export_root: Path, files: list[str], columns: list[str]) -> None:
        from ..io.parquetio import open_parquet
        from ..io.paths import resolve_under

        self.columns = columns
        self.files = files
        self.shards: list[Any] = []
        self.index: dict[str, tuple[int, int, int]] = {}
        self._cached: tuple[tuple[int, int], pa.Table] | None = None
        for i, rel in enumerate(files):
            where = f"reason_av_edit export {str(export_root)!r}: {rel}"
            path = resolve_under(export_root, rel, where, ReleaseFormatError)
            # the footer and the page headers checked again on the descriptor read here, before decompressing
            pf = stack.enter_context(open_parquet(path, where, InputNotFoundError))
            _check_schema(pf.schema_arrow, columns, where)
            self.shards.append(pf)
            for g in range(pf.num_row_groups):
                for offset, sid in enumerate(pf.read_row_group(g, columns=["sample_id"]).column(0).to_pylist()):
                    if sid in self.index:
                        raise ReleaseFormatError(f"{where}: expected every sample_id once in the {CHILD_CONFIG!r} config, got "
                                                 f"{sid!r} again (first in {files[self.index[sid][0]]})")
                    self.index[sid] = (i, g, offset)

    def get(self, sid: Any, where: str) -> dict[str, Any]:
        """``{column: {bytes, path} | None}`` of sample ``sid``."""
        loc = self.index.get(sid)
        if loc is None:
            raise ReleaseFormatError(f"{where}: expected a row for sample {sid!r} in the {CHILD_CONFIG!r} shards "
                                     f"{self.files}, found none")
        shard, group, offset = loc
        if self._cached is None or self._cached[0] != (shard, group):
            self._cached = None  # release the previous row group first
            self._cached = ((shard, group), self.shards[shard].read_row_group(group, columns=self.columns))
        table = self._cached[1]
        out = {}
        for col in self.columns:
            value = table.column(col)[offset].as_py()
            data = value.get("bytes") if value else None
            if value and data is None and value.get("path"):  # datasets' Video would read that file from this machine
                raise ReleaseFormatError(f"{where}, column {col!r} ({self.files[shard]}): expected the clip's bytes (an export "
                                         f"embeds them), got only the path {str(value['path'])[:200]!r}")
            if data is not None and len(data) > MAX_MEDIA_FILE_BYTES:
                raise ReleaseFormatError(f"{where}, column {col!r} ({self.files[shard]}): a clip of {len(data)} bytes, more "
                                         f"than the limit of {MAX_MEDIA_FILE_BYTES} bytes")
            out[col] = value
        return out


def _fingerprint(ds: datasets.Dataset, export_root: Path, files: list[str]) -> str:
    h = hashlib.sha256(f"reason_av_edit load_back\0{ds._fingerprint}\0{export_root.resolve()}".encode())
    for rel in files:
        st = os.stat(export_root / rel)
        h.update(f"\0{rel}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return h.hexdigest()[:32]


def load_back(ds: datasets.Dataset, layout: Any) -> datasets.Dataset:
    """Rows of the export (read with plain ``datasets.load_dataset``) as the builder's rows (module docstring):
    ``video`` / ``mask_video`` joined from the ``videos`` config when the rows lack them, every media column with
    the builder's feature, the builder's column order. Errors: :class:`ReleaseFormatError` /
    :class:`InputNotFoundError` naming the export, the shard and the sample."""
    export_root = Path(layout.root)  # the export's checked ExportLayout (perckit.export.state.export_layout)
    builder = feats.builder_features()
    missing = [c for c in VIDEO_COLUMNS if c not in ds.column_names] if "sample_id" in ds.column_names else []
    media = (*VIDEO_COLUMNS, *AUDIO_COLUMNS)  # Video() / Audio() in the export, the same {bytes, path} storage
    features = {name: builder[name] if name in media else feature for name, feature in ds.features.items()}
    features.update({c: builder[c] for c in missing})
    order = [c for c in builder if c in features] + [c for c in features if c not in builder]
    target = datasets.Features({c: features[c] for c in order})
    if not missing:
        if order == ds.column_names and all(target[c] == ds.features[c] for c in order):
            return ds
        return ds.select_columns(order).cast(target)
    files = _child_files(layout, ds)
    storage = target.arrow_schema
    with ExitStack() as stack:
        clips = _Clips(stack, export_root, files, missing)

        def restore(table: pa.Table) -> pa.Table:
            ids = table.column("sample_id").to_pylist()
            joined = [clips.get(sid, f"reason_av_edit export {str(export_root)!r}: sample {sid!r}") for sid in ids]
            columns = []
            for name in order:
                field = storage.field(name)
                if name in missing:
                    columns.append(pa.array([row[name] for row in joined], type=field.type))
                else:
                    column = table.column(name)
                    columns.append(column.cast(field.type) if column.type != field.type else column)
            return pa.Table.from_arrays(columns, schema=pa.schema([storage.field(n) for n in order]))

        out = ds.with_format("arrow").map(restore, batched=True, batch_size=BATCH_ROWS, features=target,
                                          remove_columns=ds.column_names, load_from_cache_file=False, desc=None,
                                          new_fingerprint=_fingerprint(ds, export_root, files))
    return out.with_format(None)
