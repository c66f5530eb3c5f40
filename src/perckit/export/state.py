"""``.perckit_export.json``: the record that marks a folder as a perckit export, and its one reader.

``perckit convert`` writes it into every export; ``perckit convert`` (to merge a new config with the
others) and ``perckit push`` (to know which files to upload) read it back through :func:`read_state`.
An export folder may be a download from a stranger, so the record is untrusted: it is read under a byte
cap, and every field is checked before anything acts on it. A config's ``dir`` and every shard path go
through :func:`perckit.io.paths.resolve_under` (no absolute path, no ``..``, no symbolic link out of the
export) and must have the exact shape ``convert`` writes (``data`` or the config's name; shards
``<dir>/<split>-NNNNN-of-NNNNN.parquet``), so a record naming ``../x`` or ``/etc`` can neither make
``convert`` replace a folder outside the export nor make ``push`` upload a file from outside it.

Structure (version 2; version 1 is the same without the optional keys, and is still read)::

    {"format": "perckit-export", "version": 2, "benchmark": "<name>",
     "configs": {"<config>": {"default": bool, "dir": "data" | "<config>", "features": {...},
                              "splits": [{"name": str, "num_examples": int, "num_bytes": int,
                                          "files": ["<dir>/<split>-00000-of-00001.parquet", ...],
                                          # optional (version 2):
                                          "max_row_bytes": int, "max_row_group_bytes": int, "max_page_bytes": int}],
                              # optional (version 2):
                              "kind": "parquet",                       # the only kind; absent: "parquet"
                              "preview": "preview" | null,            # the Image column perckit added (in features)
                              "viewer": {"viewable": bool, "reason": str},
                              "description": str,                      # at most MAX_TEXT_CHARS characters
                              "parent": str}}}                         # a child config only

**The files of an export** are listed by one function, :func:`export_layout` (then
:meth:`ExportLayout.files`), which every reader of an export's shards calls (:func:`perckit.export.load_export`,
``perckit evaluate`` / ``gt-predictions --references``, :func:`perckit.lmms_eval.write_task`, ReasonAVEdit's
``load_back``): the shards come from the record when there is one, else (a copy of a pushed export: ``perckit
push`` uploads the card and the shards, not the record) from the card's YAML ``configs``
(:func:`perckit.export.card.read_card_configs`), never from wherever ``datasets.load_dataset(folder)`` would follow
the card. Every path and every match of a pattern is resolved under the export folder (no ``..``, no absolute
path, no symbolic link out of it; a Hub snapshot's links into its own ``blobs/`` are accepted), and every shard
is opened as a regular file and passes the Parquet size guard (:func:`perckit.io.parquetio.open_parquet`) before
anything decodes it, and no media value may name a file by path alone (:func:`perckit.export.parquet.check_media_table`:
on the shards, or on the rows a reader loads). With a record the card
is checked too (the entry of the config being read), so a card edited to point out of the folder is refused
either way.

A child config (ReasonAVEdit's ``videos``: see :mod:`perckit.export.hooks`) is a Parquet config like any other,
written by the conversion of another config, its ``parent``: it is never the default, its ``dir`` is its name,
and its ``parent`` names a config of the record that is not a child itself (re-converting the parent replaces its
children: :func:`drop_config`). Every config is Parquet: a card listing a Parquet config and a config of plain
files cannot load the latter (datasets infers one builder module per repository), so there is no other kind.

Records written before the ``format`` / ``version`` keys existed are accepted as version 1 when the rest
matches. Version 1 records may not carry the version 2 keys; version 2 records give ``num_bytes`` as an int.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ..errors import InputNotFoundError, OptionError, ReleaseFormatError, ReleaseNotFoundError
from ..io.jsonio import read_json
from ..io.parquetio import open_parquet
from ..io.paths import glob_under, relative_label, resolve_under
from .card import CONFIG_NAME, SPLIT_NAME, config_features, field_error, read_card_configs
from .parquet import check_media_bytes

STATE_FILE = ".perckit_export.json"
FORMAT = "perckit-export"
VERSION = 2
#: the record versions this perckit reads (it writes :data:`VERSION`)
READ_VERSIONS = (1, 2)
#: largest ``.perckit_export.json`` read (the features of every config; a real one is a few KB)
MAX_STATE_BYTES = 16 << 20
#: counts above this are not sizes of anything real
MAX_COUNT = 2**63 - 1

_RESERVED = {"README.md", STATE_FILE}
#: longest ``description`` / ``viewer.reason`` kept in a record (the card shows them)
MAX_TEXT_CHARS = 2000
#: the kinds of config entry (``kind`` is written so that a later kind can be told apart)
KINDS = ("parquet",)
_CONFIG_KEYS = {"default", "dir", "features", "splits"}
_CONFIG_KEYS_V2 = {"kind", "preview", "viewer", "description", "parent"}
_SPLIT_KEYS = {"name", "num_examples", "num_bytes", "files"}
_SPLIT_KEYS_V2 = {"max_row_bytes", "max_row_group_bytes", "max_page_bytes"}
_fail = partial(field_error, limit=120)


def _count(value: Any, where: str, estimate: bool = False) -> float:
    """A non-negative integer; ``estimate``: a byte count as the builder estimates it (an int or a float), finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float) if estimate else int) or not 0 <= value <= MAX_COUNT:
        raise _fail(where, "a non-negative number of bytes" if estimate else "a non-negative integer", value)  # NaN fails too
    return value


def expected_shard(rel: str, folder: str, split: str) -> bool:
    """``rel`` is ``<folder>/<split>-NNNNN-of-NNNNN.parquet`` (the names :func:`perckit.export.write_split` writes)."""
    m = re.fullmatch(r"([^/]+)/(.+)-(\d{5,9})-of-(\d{5,9})\.parquet", rel)
    return bool(m) and m.group(1) == folder and m.group(2) == split and int(m.group(3)) < int(m.group(4))


def _text(value: Any, where: str, empty: bool = True) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT_CHARS or (not empty and not value.strip()):
        what = "a string" if empty else "a non-empty string"
        got = value if not isinstance(value, str) or len(value) <= MAX_TEXT_CHARS else f"{len(value)} characters"
        raise _fail(where, f"{what} of at most {MAX_TEXT_CHARS} characters", got)
    return value


def _version(state: dict, where: str) -> int:
    if "format" not in state and "version" not in state:
        return 1  # a record written before the keys existed
    if state.get("format") != FORMAT:
        raise _fail(f"{where}: 'format'", repr(FORMAT), state.get("format"))
    version = state.get("version")
    if isinstance(version, bool) or version not in READ_VERSIONS:
        raise _fail(f"{where}: 'version'", f"one of {list(READ_VERSIONS)} (this perckit reads versions {list(READ_VERSIONS)})", version)
    return version


def _check_v2_keys(c: dict, at: str, version: int) -> None:
    """The optional keys of a config entry (version 2); ``parent`` is checked against the record later."""
    if version < 2:
        return
    kind = c.get("kind", "parquet")
    if kind not in KINDS:
        raise _fail(f"{at}: 'kind'", f"one of {list(KINDS)} (every config of an export is Parquet)", kind)
    if "preview" in c:
        preview = c["preview"]
        if preview is not None and preview != "preview":
            raise _fail(f"{at}: 'preview'", "'preview' (the Image column perckit added) or null", preview)
        if preview is not None and (not isinstance(c["features"], dict) or preview not in c["features"]):
            raise _fail(f"{at}: 'preview'", "a column of this config's features", preview)
    if "viewer" in c:
        viewer = c["viewer"]
        if not isinstance(viewer, dict) or set(viewer) != {"viewable", "reason"} or not isinstance(viewer["viewable"], bool):
            raise _fail(f"{at}: 'viewer'", "an object {viewable: true | false, reason: str}", viewer)
        _text(viewer["reason"], f"{at}: 'viewer': 'reason'", empty=viewer["viewable"])
    if "description" in c:
        _text(c["description"], f"{at}: 'description'")
    if "parent" in c and c["default"]:
        raise _fail(f"{at}: 'default'", "false (a child config, with a 'parent', is never the default)", True)


def _check_split(s: Any, sat: str, folder: str, version: int, seen: set, export_dir) -> None:
    allowed = _SPLIT_KEYS | (_SPLIT_KEYS_V2 if version >= 2 else set())
    if not isinstance(s, dict) or not _SPLIT_KEYS <= set(s) <= allowed:
        extra = " (optional: max_row_bytes, max_row_group_bytes, max_page_bytes)" if allowed != _SPLIT_KEYS else ""
        raise _fail(sat, f"an object {{name, num_examples, num_bytes, files}}{extra}", sorted(s) if isinstance(s, dict) else s)
    if not isinstance(s["name"], str) or not SPLIT_NAME.match(s["name"]) or s["name"] in seen:
        raise _fail(f"{sat}: 'name'", "a split name (letters, digits, '_'), once per config", s["name"])
    seen.add(s["name"])
    _count(s["num_examples"], f"{sat}: 'num_examples'")
    _count(s["num_bytes"], f"{sat}: 'num_bytes'", estimate=version < 2)  # version 2 writes an int
    for key in sorted(_SPLIT_KEYS_V2 & set(s)):
        _count(s[key], f"{sat}: {key!r}")
    files = s["files"]
    if not isinstance(files, list):
        raise _fail(f"{sat}: 'files'", "a list of shard paths", files)
    for j, rel in enumerate(files):
        resolve_under(export_dir, rel, f"{sat}: files[{j}]", ReleaseFormatError)
        if not expected_shard(rel, folder, s["name"]):
            raise _fail(f"{sat}: files[{j}]", f"'{folder}/{s['name']}-NNNNN-of-NNNNN.parquet'", rel)


def validate_state(state: Any, export_dir: str | os.PathLike, where: str) -> dict:
    """``state`` when it has the structure above (paths checked to stay inside ``export_dir``), else
    :class:`~perckit.errors.ReleaseFormatError` naming ``where`` (the file), the field and what was found."""
    from ..hf.benchmark import NAMES as BENCHMARKS

    if not isinstance(state, dict):
        raise _fail(where, "a JSON object {format, version, benchmark, configs}", type(state).__name__)
    version = _version(state, where)
    unknown = sorted(set(state) - {"format", "version", "benchmark", "configs"})
    if unknown:
        raise _fail(where, "only the keys format, version, benchmark, configs", unknown)
    if state.get("benchmark") not in BENCHMARKS:
        raise _fail(f"{where}: 'benchmark'", f"one of {sorted(BENCHMARKS)}", state.get("benchmark"))
    configs = state.get("configs")
    if not isinstance(configs, dict):
        raise _fail(f"{where}: 'configs'", "an object {config name: entry}", configs)
    dirs: dict[str, str] = {}
    allowed = _CONFIG_KEYS | (_CONFIG_KEYS_V2 if version >= 2 else set())
    for name, c in configs.items():
        at = f"{where}: configs[{name!r}]"
        if not CONFIG_NAME.match(name):
            raise _fail(f"{where}: 'configs'", "config names of letters, digits, '_', '.', '-'", name)
        if not isinstance(c, dict) or not _CONFIG_KEYS <= set(c) <= allowed:
            expected = "an object {default, dir, features, splits}"
            if version >= 2:
                expected += " (optional: kind, preview, viewer, description, parent)"
            elif isinstance(c, dict) and _CONFIG_KEYS <= set(c) <= _CONFIG_KEYS | _CONFIG_KEYS_V2:
                expected += " (a version 1 record has no kind, preview, viewer, description or parent)"
            raise _fail(at, expected, sorted(c) if isinstance(c, dict) else c)
        if not isinstance(c["default"], bool):
            raise _fail(f"{at}: 'default'", "true or false", c["default"])
        if not isinstance(c["features"], dict):
            raise _fail(f"{at}: 'features'", "an object (datasets.Features.to_dict())", c["features"])
        _check_v2_keys(c, at, version)
        folder = c["dir"]
        resolve_under(export_dir, folder, f"{at}: 'dir'", ReleaseFormatError)
        expected_dir = "data" if c["default"] else name
        if folder != expected_dir or folder in _RESERVED:
            raise _fail(f"{at}: 'dir'", f"{expected_dir!r} (the folder convert writes for this config)", folder)
        if folder in dirs:
            raise _fail(f"{at}: 'dir'", f"a folder of its own (config {dirs[folder]!r} uses it too)", folder)
        dirs[folder] = name
        splits = c["splits"]
        if not isinstance(splits, list) or not splits:
            raise _fail(f"{at}: 'splits'", "a non-empty list of splits", splits)
        seen: set[str] = set()
        for i, s in enumerate(splits):
            _check_split(s, f"{at}: splits[{i}]", folder, version, seen, export_dir)
    for name, c in configs.items():
        if "parent" in c:
            parent = c["parent"]
            if not isinstance(parent, str) or parent == name or parent not in configs or "parent" in configs[parent]:
                raise _fail(f"{where}: configs[{name!r}]: 'parent'",
                            "the name of another config of this record that is not a child itself", parent)
    if sum(c["default"] for c in configs.values()) > 1:
        raise _fail(f"{where}: 'configs'", "at most one default config", sorted(n for n, c in configs.items() if c["default"]))
    return state


def has_state(export_dir: str | os.PathLike) -> bool:
    """True when ``export_dir`` holds a ``.perckit_export.json`` entry of any kind (even a broken one)."""
    return os.path.lexists(Path(export_dir) / STATE_FILE)


def read_state(export_dir: str | os.PathLike, features: bool = True) -> dict:
    """The validated record of the export ``export_dir``.

    Errors: :class:`~perckit.errors.InputNotFoundError` when there is no record (not a perckit export);
    :class:`~perckit.errors.ReleaseFormatError` naming the file for one that is not a regular file, is over
    :data:`MAX_STATE_BYTES`, is not JSON (or repeats a key), leaves the export through a symbolic link, or does
    not have the structure above. ``features=False`` skips rebuilding the features (``push`` needs only paths)."""
    export_dir = Path(export_dir)
    path = export_dir / STATE_FILE
    where = repr(str(path))
    if not os.path.lexists(path):
        raise InputNotFoundError(f"{str(export_dir)!r} is not a perckit export (no {STATE_FILE}); run `perckit convert` first")
    resolve_under(export_dir, STATE_FILE, where, ReleaseFormatError)  # a link to a file outside the export
    state = validate_state(read_json(path, error=ReleaseFormatError, not_found=InputNotFoundError, limit=MAX_STATE_BYTES), export_dir, where)
    if features:  # every config's features must rebuild as datasets.Features (the card is generated from them)
        for name, c in state["configs"].items():
            config_features(name, c, where)
    return state


def new_state(benchmark: str) -> dict:
    return {"format": FORMAT, "version": VERSION, "benchmark": benchmark, "configs": {}}


def dump_state(state: dict) -> str:
    """The text of ``.perckit_export.json``, always version :data:`VERSION` (feature order kept). A config merged
    from a version 1 record keeps its entry; its ``num_bytes`` (a float estimate there) is written as an int."""
    configs = {name: dict(c, splits=[dict(s, num_bytes=int(s["num_bytes"])) for s in c["splits"]])
               for name, c in state["configs"].items()}
    out = {"format": FORMAT, "version": VERSION, "benchmark": state["benchmark"], "configs": configs}
    return json.dumps(out, indent=2) + "\n"


def owned_files(state: dict) -> set[str]:
    """Every path of the export that perckit wrote (relative, POSIX): the card, the record and the shards of
    every config (child configs included)."""
    return {"README.md", STATE_FILE} | {f for c in state["configs"].values() for s in c["splits"] for f in s["files"]}


def children(state: dict, config: str) -> list[str]:
    """The child configs whose ``parent`` is ``config`` (sorted)."""
    return sorted(n for n, c in state["configs"].items() if c.get("parent") == config)


def drop_config(state: dict, config: str) -> list[str]:
    """Remove ``config`` and the child configs it wrote from ``state`` (in place), before a re-conversion
    of ``config`` adds it again; returns the names removed (no child is left without its parent)."""
    removed = [config] if config in state["configs"] else []
    removed += children(state, config)
    for name in removed:
        state["configs"].pop(name, None)
    return removed


# ---------------------------------------------------------------------------------------- the files of an export

#: most shard files one split of an export may name (the record's list, or the card's patterns once expanded)
MAX_SPLIT_FILES = 10_000
#: how messages name the folder a path must stay in
INSIDE = "the export folder"


@dataclass(frozen=True)
class ExportLayout:
    """An export folder's configs as its record (``record``) or, without one, its card (``card``) names them;
    see :func:`export_layout`. ``card`` is the card's checked ``configs`` (``None``: no card)."""

    root: Path
    record: dict | None
    card: dict | None

    @property
    def benchmark(self) -> str | None:
        """The benchmark the record names (``None`` for a copy without a record)."""
        return self.record["benchmark"] if self.record is not None else None

    def names(self) -> list[str]:
        """The config names (the record's, else the card's), sorted."""
        return sorted(self.record["configs"] if self.record is not None else self.card)

    def config_name(self, config: str | None) -> str:
        """``config``, or for ``None`` the default config (the one marked default, else the only one, else one named
        ``default``), as ``datasets`` picks it; :class:`~perckit.errors.OptionError` listing the configs otherwise."""
        names = self.names()
        if config is None:
            record = self.record["configs"] if self.record is not None else None
            marked = [n for n in names if (record[n]["default"] if record is not None else self.card[n].default)]
            if marked or len(names) == 1 or "default" in names:
                return marked[0] if marked else names[0] if len(names) == 1 else "default"
            raise OptionError(f"export {str(self.root)!r}: expected a config name (no config is the default), got none; "
                              f"the export has the configs {names}")
        if not isinstance(config, str) or config not in names:
            raise OptionError(f"export {str(self.root)!r}: expected one of the configs {names}, got {config!r}")
        return config

    def splits(self, config: str | None = None) -> list[str]:
        """The split names of ``config`` (default: :meth:`config_name`), in the record's or the card's order."""
        name = self.config_name(config)
        if self.record is not None:
            return [s["name"] for s in self.record["configs"][name]["splits"]]
        return list(self.card[name].data_files)

    def files(self, config: str | None = None, splits: list[str] | None = None, media: bool = True) -> dict[str, list[Path]]:
        """``{split: [shard path]}`` of ``config`` (default: :meth:`config_name`) for ``splits`` (default: all, in
        order), every shard checked before anything decodes it (module docstring). ``media=False`` leaves the media
        check to a caller that loads the rows and checks them itself, where it is nearly free
        (:func:`perckit.export.load_files`: the loaded table's validity bitmaps, not a second read of every media
        byte; ReasonAVEdit's ``load_back``: each clip it joins). Errors: an unknown config or
        split, :class:`~perckit.errors.OptionError` listing what the export has; a path that leaves the folder
        (``..``, absolute, a symbolic link out, a pattern matching one), a file that is not a regular file or not
        Parquet, a column chunk over the Parquet guard's limit, a media value without its bytes:
        :class:`~perckit.errors.ReleaseFormatError` naming the card or record field, or the shard; a missing
        shard (or a pattern matching none): :class:`~perckit.errors.ReleaseNotFoundError`."""
        name = self.config_name(config)
        available = self.splits(name)
        wanted = list(available) if splits is None else list(splits)
        for split in wanted:
            if split not in available:
                raise OptionError(f"export {str(self.root)!r}, config {name!r}: expected one of the splits {available}, "
                                  f"got {split!r}")
        card = self.card.get(name) if self.card else None
        # with a record the card is only checked (a pattern may match nothing: the record names the shards)
        from_card = _card_files(self.root, card, self.record is None) if card is not None else {}
        if self.record is not None:
            where = f"{str(self.root / STATE_FILE)!r}: configs[{name!r}]"
            listed = {s["name"]: [resolve_under(self.root, rel, f"{where}: splits[{i}]: files[{j}]", ReleaseFormatError, INSIDE)
                                  for j, rel in enumerate(s["files"])] for i, s in enumerate(self.record["configs"][name]["splits"])}
        else:
            listed = from_card
        out: dict[str, list[Path]] = {}
        first: tuple[Path, Any] | None = None
        for split in wanted:
            paths = listed[split]
            if len(paths) > MAX_SPLIT_FILES:
                raise ReleaseFormatError(f"export {str(self.root)!r}, config {name!r}, split {split!r}: expected at most "
                                         f"{MAX_SPLIT_FILES} shard files, got {len(paths)}")
            for path in paths:
                schema = check_shard(self.root, path, media)
                if first is None:
                    first = (path, schema)
                elif not schema.equals(first[1]):  # datasets would fail casting one to the other, deep in its builder
                    raise ReleaseFormatError(f"{shard_label(self.root, path)}: expected the columns of "
                                             f"{_rel(self.root, first[0])} (every shard of config {name!r} alike), "
                                             f"got {_columns_text(schema)} instead of {_columns_text(first[1])}")
            out[split] = paths
        return out


def literal_data_files(files: dict[str, list[Path]], real: bool = False) -> dict[str, list[str]]:
    """``files`` (checked by :meth:`ExportLayout.files`) as ``data_files`` for ``datasets``, which takes every entry as
    a glob pattern: each an absolute path (``real``: every link resolved) with ``*``, ``?`` and ``[`` escaped
    (``glob.escape``), then resolved by datasets' own pattern resolution and checked to name exactly those files.
    Unescaped, a folder named ``exports[1]`` reads ``exports1/`` instead, and one named ``d*`` also reads a linked
    ``dz/`` beside it: files nobody checked."""
    import glob

    from datasets.data_files import DataFilesDict

    want = {s: [os.path.realpath(p) if real else os.path.abspath(p) for p in paths] for s, paths in files.items()}
    out = {s: [glob.escape(p) for p in paths] for s, paths in want.items()}
    try:
        resolved = DataFilesDict.from_patterns(out, base_path=os.sep)
        got = {s: [str(f) for f in resolved[s]] for s in out}
    except (FileNotFoundError, ValueError) as e:
        raise ReleaseFormatError(f"expected datasets to find the export's checked files {want}, got {type(e).__name__}: "
                                 f"{str(e)[:200]}") from None
    for s in want:
        if sorted(got[s]) != sorted(want[s]):
            raise ReleaseFormatError(f"split {s!r}: expected datasets to read exactly the export's checked files "
                                     f"{want[s][:5]}, it would read {got[s][:5]}")
    return out


def _columns_text(schema: Any) -> str:
    text = ", ".join(f"{f.name}: {f.type}" for f in schema)
    return text if len(text) <= 300 else text[:297] + "..."


def _rel(root: Path, path: Path) -> str:
    """``path`` relative to the export root, as messages name it (POSIX; the full path when it is not under it)."""
    return relative_label(path, root) or str(path)


def _card_files(root: Path, card, require: bool = True) -> dict[str, list[Path]]:
    """The files the card's ``data_files`` of one config match (:func:`perckit.io.paths.glob_under`: inside the export
    folder, sorted per pattern, each file once per split); with ``require``, a pattern matching nothing is an error
    naming its field."""
    out: dict[str, list[Path]] = {}
    for split, patterns in card.data_files.items():
        seen: dict[str, Path] = {}
        for pattern, where in patterns:
            matches = glob_under(root, pattern, where, ReleaseFormatError, INSIDE)
            if not matches and require:
                raise ReleaseNotFoundError(f"{where}: expected the config's files in {INSIDE} {str(root)!r}, got no file "
                                           f"matching {pattern[:200]!r}")
            for m in matches:
                seen.setdefault(str(m), m)
                if len(seen) > MAX_SPLIT_FILES:
                    raise ReleaseFormatError(f"{where}: expected at most {MAX_SPLIT_FILES} files per split, got more")
        out[split] = list(seen.values())
    return out


def shard_label(root: Path, path: Path) -> str:
    """How messages name a shard: ``'<export>': data/validation-00000-of-00001.parquet``."""
    return f"{str(root)!r}: {_rel(root, path)}"


def check_shard(root: Path, path: Path, media: bool = True) -> Any:
    """One shard of an export, before anything decodes it: a regular file, a readable Parquet file whose column
    chunks pass the size guard (:func:`perckit.io.parquetio.open_parquet`: the footer and the page headers), whose
    ``huggingface`` schema metadata (if any) loads as ``datasets.Features`` (the parquet builder takes the features
    from it), and (``media``) whose media values carry their bytes (:func:`perckit.export.parquet.check_media_bytes`).
    Returns its Arrow schema without the metadata."""
    import datasets

    where = shard_label(root, path)
    with open_parquet(path, where) as pf:
        schema = pf.schema_arrow
        try:
            datasets.Features.from_arrow_schema(schema)
        except Exception as e:  # a hostile metadata dict: ValueError, KeyError, TypeError, RecursionError, ...
            raise ReleaseFormatError(f"{where}: expected 'huggingface' schema metadata that loads as datasets.Features, got "
                                     f"one that does not ({type(e).__name__}: {str(e)[:200]})") from None
        if media:
            check_media_bytes(pf, where)
    return schema.remove_metadata()


def export_layout(export_dir: str | os.PathLike) -> ExportLayout:
    """The configs of the export folder ``export_dir``: its record (:func:`read_state`) when it has one, and its
    card's checked ``configs`` (:func:`perckit.export.card.read_card_configs`). Errors:
    :class:`~perckit.errors.InputNotFoundError` when the folder is missing or has neither a record nor a card with
    ``configs`` (not an export); the readers' :class:`~perckit.errors.ReleaseFormatError` for a bad record or card."""

    root = Path(export_dir)
    if not root.is_dir():
        got = "a file" if root.exists() else "nothing there"
        raise InputNotFoundError(f"{str(root)!r}: expected an export folder (written by `perckit convert`, or a copy of a "
                                 f"pushed one), got {got}")
    record = read_state(root) if has_state(root) else None
    card = read_card_configs(root)
    if record is None and not card:
        raise InputNotFoundError(f"{str(root)!r} is not a perckit export: expected a {STATE_FILE} record (run `perckit "
                                 "convert`) or a README.md card whose YAML 'configs' name each config's data_files (a copy "
                                 "of a pushed export), got neither")
    return ExportLayout(root, record, card)
