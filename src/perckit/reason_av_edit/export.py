"""The ReasonAVEdit-Bench export hook (:mod:`perckit.export_hooks`): sound the Viewer plays, video as the Hub documents it.

On the way to the Hub (:func:`export_split`):

- ``audio`` and ``reason_audio`` are typed ``datasets.Audio()`` (a cast of the same ``{bytes, path}`` storage: the
  WAV bytes are kept, never re-encoded), so the Dataset Viewer plays them;
- ``video`` and ``mask_video`` leave the Parquet rows: each clip is written as a file
  ``videos/<split>/<stem>.mp4`` (the mask video ``<stem>.mask.mp4``) with ``videos/<split>/metadata.jsonl``, one
  line per file (``file_name``, ``sample_id``, ``kind`` = ``"video"`` | ``"mask_video"``, ``source_path`` = the
  clip's release path, and the sample's ``category``, ``sub_track``, ``language``, ``orientation``,
  ``instruction``): the video-folder layout of the Hub's documentation. The ``videos`` config (``kind: "files"``)
  then loads with plain ``datasets.load_dataset(export, "videos")`` on datasets 3.6 and 5.x, with a ``video``
  column (decoding it needs torchvision on 3.6 and torchcodec on 5.x; ``cast_column("video",
  Video(decode=False))`` gives the file paths without either);
- the Parquet rows keep string columns in their place: ``video_file`` / ``mask_video_file``, the export-relative
  path of the file (``videos/test/w1_0000.mp4``); ``None`` where the builder's value was null, ``""`` where it was
  the "not provided" marker ``{bytes: None, path: ""}``.

One line per file, not ``file_name`` + ``mask_video_file_name`` on one line: both datasets lines read
``*_file_name`` columns, but datasets 3.6 fails on a null one, and a sample's mask video may be null.

``<stem>`` is the sample id with every character outside ``[A-Za-z0-9._-]`` replaced by ``_`` (runs of ``.``
made one, a leading character that is not a letter or digit prefixed with ``s``, at most
:data:`MAX_STEM_CHARS` characters): deterministic; two samples with the same stem are refused.

:func:`load_back` reverses it for rows read back with plain ``datasets.load_dataset``: ``video`` / ``mask_video``
become ``{bytes, path}`` again (the file's bytes, the release path from ``metadata.jsonl``), the audio columns the
builder's ``{bytes, path}`` struct, columns in the builder's order (extra columns such as ``preview`` after).
Files are read only under the export root: a name that is not ``videos/<split>/<name>``, a symbolic link out of
the export, a FIFO or a device, and a file over :data:`~.limits.MAX_MEDIA_FILE_BYTES` are refused.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterator

import datasets

from ..errors import InputNotFoundError, ReleaseFormatError
from ..export_hooks import ExportParts, FilesConfig
from . import features as feats
from .limits import MAX_MEDIA_FILE_BYTES

#: the files config, its folder, and the Parquet column that replaces each video column
FILES_CONFIG = "videos"
FILES_DIR = "videos"
VIDEO_COLUMNS = {"video": "video_file", "mask_video": "mask_video_file"}
#: what a file's name adds to the stem, per video column
KIND_SUFFIX = {"video": "", "mask_video": ".mask"}
AUDIO_COLUMNS = ("audio", "reason_audio")
#: the sample's text columns copied into every line of metadata.jsonl (for the Viewer and for filtering)
METADATA_COLUMNS = ("category", "sub_track", "language", "orientation", "instruction")
#: video extensions both datasets lines' video folder reads (a clip keeps its own when it is one of these)
VIDEO_EXTENSIONS = (".mp4", ".mov", ".avi", ".mkv", ".mpeg")
MAX_STEM_CHARS = 180
#: largest metadata.jsonl :func:`load_back` reads (a line is a few hundred bytes)
MAX_METADATA_BYTES = 64 << 20
#: rows per batch while writing files and reading them back (a row holds a clip: a few MB)
BATCH_ROWS = 16

_SPLIT_NAME = re.compile(r"^\w{1,128}(\.\w{1,128})*$", re.ASCII)


def file_stem(sample_id: str) -> str:
    """The file stem of ``sample_id`` (the rule in the module docstring)."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", sample_id)
    stem = re.sub(r"\.{2,}", ".", stem)
    if not stem or not stem[0].isascii() or not stem[0].isalnum():
        stem = "s" + stem
    return stem[:MAX_STEM_CHARS]


def _extension(path: Any) -> str:
    ext = os.path.splitext(path)[1].lower() if isinstance(path, str) else ""
    return ext if ext in VIDEO_EXTENSIONS else ".mp4"


def _write_new(path: Path, data: bytes, where: str) -> None:
    """``data`` into a new file (``O_EXCL``: an existing file or link at ``path`` is refused, never followed)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
    except FileExistsError:
        raise ReleaseFormatError(f"{where}: expected a new file, but {str(path)!r} exists already (two samples with one file name?)") from None
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _batches(ds: datasets.Dataset, columns: list[str]) -> Iterator[list[dict]]:
    """The rows of ``columns`` as Python dicts, :data:`BATCH_ROWS` at a time (media as ``{bytes, path}``, undecoded)."""
    part = ds.select_columns(columns).with_format("arrow")
    for table in part.iter(batch_size=BATCH_ROWS):
        yield table.to_pylist()


def _audio_feature(feature: Any) -> bool:
    """The column stores ``{bytes, path}`` (the builder's media struct, or ``Audio`` already)."""
    return isinstance(feature, datasets.Audio) or (isinstance(feature, dict) and set(feature) == {"bytes", "path"})


def export_split(ds: datasets.Dataset, config: str, split: str, root: Path) -> ExportParts:
    """The Parquet rows of ``split`` and the ``videos`` files config written under ``root`` (module docstring).

    Errors: :class:`ReleaseFormatError` for a split name that is not a plain name, a row without a ``sample_id``,
    two samples whose files would have one name, or a video value that is not ``{bytes, path}``."""
    present = [c for c in VIDEO_COLUMNS if c in ds.column_names]
    if not present:
        return ExportParts(_cast_audio(ds), [])
    if not isinstance(split, str) or not _SPLIT_NAME.match(split):
        raise ReleaseFormatError(f"reason_av_edit export: expected a split name of letters, digits and '_', got {split!r}")
    rel_dir = f"{FILES_DIR}/{split}"
    folder = Path(root) / FILES_DIR / split
    folder.mkdir(parents=True, exist_ok=True)
    meta_cols = [c for c in METADATA_COLUMNS if c in ds.column_names]
    names: dict[str, list] = {c: [] for c in present}
    stems: dict[str, str] = {}
    files: list[str] = []
    lines: list[str] = []
    total = 0
    for rows in _batches(ds, ["sample_id", *present, *meta_cols]):
        for row in rows:
            sid = row["sample_id"]
            if not isinstance(sid, str) or not sid:
                raise ReleaseFormatError(f"reason_av_edit export, split {split!r}: expected every row to have a sample_id, got {sid!r}")
            stem = file_stem(sid)
            if stem in stems:
                raise ReleaseFormatError(f"reason_av_edit export, split {split!r}: samples {stems[stem]!r} and {sid!r} would both "
                                         f"be written as {rel_dir}/{stem}.*; expected sample ids that differ after sanitising")
            stems[stem] = sid
            for col in present:
                value = row[col]
                where = f"reason_av_edit export, sample {sid!r}, column {col!r}"
                if value is None:
                    names[col].append(None)
                    continue
                if not feats.is_media_provided(value):
                    names[col].append("")  # the "not provided" marker
                    continue
                data = feats.media_bytes(value, where)
                name = f"{stem}{KIND_SUFFIX[col]}{_extension(value.get('path'))}"
                _write_new(folder / name, data, where)
                total += len(data)
                files.append(f"{rel_dir}/{name}")
                names[col].append(f"{rel_dir}/{name}")
                line = {"file_name": name, "sample_id": sid, "kind": col, "source_path": value.get("path")}
                line.update({c: row[c] for c in meta_cols})
                lines.append(json.dumps(line, ensure_ascii=False))
    configs = []
    if lines:
        text = ("\n".join(lines) + "\n").encode("utf-8")
        _write_new(folder / "metadata.jsonl", text, f"reason_av_edit export, split {split!r}")
        files.append(f"{rel_dir}/metadata.jsonl")
        configs.append(FilesConfig(FILES_CONFIG, FILES_DIR, split, files, len(lines), total + len(text), files_features(meta_cols)))
    else:
        folder.rmdir()
    return ExportParts(_parquet_rows(ds, present, names), configs)


def files_features(meta_cols: list[str] | tuple[str, ...] = METADATA_COLUMNS) -> dict:
    """``Features.to_dict()`` of the ``videos`` config as ``datasets.load_dataset`` reads it (``file_name`` becomes
    the ``video`` column, in its place)."""
    string = datasets.Value("string")
    return datasets.Features({"video": datasets.Video(), "sample_id": string, "kind": string, "source_path": string,
                              **{c: string for c in meta_cols}}).to_dict()


def _cast_audio(ds: datasets.Dataset) -> datasets.Dataset:
    for col in AUDIO_COLUMNS:
        if col in ds.column_names and _audio_feature(ds.features[col]) and not isinstance(ds.features[col], datasets.Audio):
            ds = ds.cast_column(col, datasets.Audio())
    return ds


def _parquet_rows(ds: datasets.Dataset, present: list[str], names: dict[str, list]) -> datasets.Dataset:
    """``ds`` with each video column replaced, in its place, by its file-name column, and the audio typed ``Audio``."""
    order = [VIDEO_COLUMNS.get(c, c) if c in present else c for c in ds.column_names]
    out = ds.remove_columns(present)
    for col in present:
        out = out.add_column(VIDEO_COLUMNS[col], names[col], feature=datasets.Value("string"))
    return _cast_audio(out.select_columns(order))


# --------------------------------------------------------------------------------------------------- reading back


def _read_metadata(export_root: Path, rel_dir: str, cache: dict) -> dict[str, Any]:
    """``{file_name: source_path}`` of ``<rel_dir>/metadata.jsonl`` (read once, capped, every line checked)."""
    if rel_dir in cache:
        return cache[rel_dir]
    from ..export_state import FILE_NAME
    from ..paths import read_regular_file, resolve_under

    rel = f"{rel_dir}/metadata.jsonl"
    where = f"reason_av_edit export {str(export_root)!r}: {rel}"
    path = resolve_under(export_root, rel, where, ReleaseFormatError)
    data = read_regular_file(path, where, MAX_METADATA_BYTES, ReleaseFormatError, InputNotFoundError)
    out: dict[str, Any] = {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ReleaseFormatError(f"{where}: expected UTF-8 JSON Lines, got bytes that do not decode") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except (ValueError, RecursionError) as e:
            raise ReleaseFormatError(f"{where} line {number}: expected a JSON object, got: {str(e)[:200]}") from None
        name = item.get("file_name") if isinstance(item, dict) else None
        source = item.get("source_path") if isinstance(item, dict) else None
        if not isinstance(name, str) or not FILE_NAME.match(name) or ".." in name or (source is not None and not isinstance(source, str)):
            raise ReleaseFormatError(f"{where} line {number}: expected an object with a file name 'file_name' and a string or null "
                                     f"'source_path', got {line[:200]!r}")
        if name in out:
            raise ReleaseFormatError(f"{where} line {number}: expected every file once, got {name!r} again")
        out[name] = source
    cache[rel_dir] = out
    return out


def read_video(export_root: Path, rel: Any, where: str, cache: dict) -> dict | None:
    """The builder's ``{bytes, path}`` for a ``*_file`` cell: ``None`` for null, the "not provided" marker for ``""``,
    else the file ``videos/<split>/<name>`` read under ``export_root`` with its release path from metadata.jsonl."""
    from ..export_state import FILE_NAME
    from ..paths import read_regular_file, resolve_under

    if rel is None:
        return None
    if rel == "":
        return dict(feats.NOT_PROVIDED_MEDIA)
    parts = rel.split("/") if isinstance(rel, str) else []
    if (len(parts) != 3 or parts[0] != FILES_DIR or not _SPLIT_NAME.match(parts[1]) or not FILE_NAME.match(parts[2])
            or ".." in parts[2]):
        raise ReleaseFormatError(f"{where}: expected '{FILES_DIR}/<split>/<file name>' (a file of the export's videos config), got {rel!r}")
    path = resolve_under(export_root, rel, where, ReleaseFormatError)
    sources = _read_metadata(export_root, f"{parts[0]}/{parts[1]}", cache)
    if parts[2] not in sources:
        raise ReleaseFormatError(f"{where}: expected {rel!r} to be listed in {parts[0]}/{parts[1]}/metadata.jsonl, it is not")
    data = read_regular_file(path, where, MAX_MEDIA_FILE_BYTES, ReleaseFormatError, InputNotFoundError)
    return {"bytes": data, "path": sources[parts[2]]}


def load_back(ds: datasets.Dataset, export_root: Path) -> datasets.Dataset:
    """Rows of the export's default config (read with plain ``datasets.load_dataset``) as the builder's rows
    (module docstring); errors: :class:`ReleaseFormatError` / :class:`InputNotFoundError` naming the row and file."""
    import pyarrow as pa

    export_root = Path(export_root)
    file_cols = {f: c for c, f in VIDEO_COLUMNS.items() if f in ds.column_names}
    builder = feats.builder_features()
    features = {}
    for name, feature in ds.features.items():
        if name in file_cols:
            features[file_cols[name]] = builder[file_cols[name]]
        elif name in AUDIO_COLUMNS and _audio_feature(feature):
            features[name] = builder[name]
        else:
            features[name] = feature
    order = [c for c in builder if c in features] + [c for c in features if c not in builder]
    target = datasets.Features({c: features[c] for c in order})
    storage = target.arrow_schema
    cache: dict = {}

    def restore(table: pa.Table) -> pa.Table:
        columns = []
        ids = table.column("sample_id").to_pylist() if "sample_id" in table.column_names else [None] * table.num_rows
        for name in order:
            file_col = next((f for f, c in file_cols.items() if c == name), None)
            if file_col is None:
                column = table.column(name)
                columns.append(column.cast(storage.field(name).type) if column.type != storage.field(name).type else column)
                continue
            values = [read_video(export_root, rel, f"{str(export_root)!r}: sample {sid!r}, column {file_col!r}", cache)
                      for rel, sid in zip(table.column(file_col).to_pylist(), ids)]
            columns.append(pa.array(values, type=storage.field(name).type))
        return pa.Table.from_arrays(columns, schema=pa.schema([storage.field(n) for n in order]))

    if not file_cols and all(features[c] == ds.features[c] for c in ds.column_names) and order == ds.column_names:
        return ds
    out = ds.with_format("arrow").map(restore, batched=True, batch_size=BATCH_ROWS, features=target,
                                      remove_columns=ds.column_names, load_from_cache_file=False, desc=None)
    return out.with_format(None)
