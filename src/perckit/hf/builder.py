"""What every perckit builder shares: the config fields and the Hub download that come from the benchmark's
descriptor (:mod:`perckit.hf.benchmark`), the cache fingerprint, the builder's name, the ``DatasetInfo`` (the texts
and option checks each builder declares, its ``_features``), and for the media-heavy builders a writer that skips
``datasets``' per-example encoding."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import datasets
import numpy as np
import pyarrow as pa

from . import hub
from .descriptor import Benchmark
from ..errors import OptionError, check_choice
from ..io.prefetch import batched, gc_paused
from .versioning import core_fingerprint

#: The name ``datasets`` gives a builder of perckit's own classes (its cache folder and ``info.builder_name``):
#: the name it derived when perckit imported ``builders/<name>/<name>.py`` as the module
#: ``perckit_script_builders_<name>``, kept so that caches and built infos keep their names.
BUILDER_NAME = "perckit_script_builders_{}"


@dataclasses.dataclass
class PerckitConfig(datasets.BuilderConfig):
    """The options every perckit config has, for the Hub download used when ``data_dir`` is not given.

    Each benchmark's config class holds its benchmark's descriptor in the class attribute ``BENCHMARK`` (a
    :class:`perckit.hf.descriptor.Benchmark`); the defaults come from it.
    """

    #: The Hub dataset repository of the release; None: the descriptor's ``hub_repo``. Pass it as ``repo_id=...``
    #: (the builder maps it here: ``datasets.DatasetBuilder`` itself takes a ``repo_id`` argument with another meaning).
    hub_repo_id: str | None = None
    #: A branch, tag or commit of that repository (None: its default branch).
    revision: str | None = None
    #: Every perckit config is version 1.0.0 (``BuilderConfig``'s default is 0.0.0).
    version: datasets.Version | str | None = datasets.Version("1.0.0")

    #: The descriptor of the benchmark these configs are of (a class attribute, not an option).
    BENCHMARK: ClassVar[Benchmark | None] = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hub_repo_id is None and self.BENCHMARK:
            self.hub_repo_id = self.BENCHMARK.hub_repo


class _PerckitOptions:
    """- The cache key of a builder script covers the script only: fold in the core package's sources.
    - ``repo_id=...`` names the release's Hub repository. ``datasets.DatasetBuilder`` takes an
      argument of that name with another meaning, so it is stored as the config field ``hub_repo_id``.
    - ``datasets`` names a builder after the last part of its class's module, which is ``builder`` for each of
      perckit's own classes: those are named :data:`BUILDER_NAME` instead (a script's subclass keeps the name
      ``datasets`` gives it, e.g. ``r4d_bench`` under ``load_dataset("builders/r4d_bench")``).
    - :meth:`_release_root`: ``data_dir``, else the files the config needs from its Hub repository.
    - A class that declares ``BUILDER_CONFIGS`` gets ``BUILDER_CONFIG_CLASS`` (their class) and
      ``DEFAULT_CONFIG_NAME`` (the first of them: every listing shows the default first) from them.
    """

    BUILDER_CONFIG_CLASS: type[PerckitConfig]
    #: ``fn(config) -> [pattern]``: the release files a config needs from the Hub (each builder sets it)
    hub_patterns: Callable[[PerckitConfig], Sequence[str]]
    VERSION = datasets.Version("1.0.0")
    #: The options :meth:`_info` checks before the features, in order: ``{name: check}``, a check being the allowed
    #: values (:func:`~perckit.errors.check_choice`), ``bool`` (True or False) or ``fn(name, value)`` that raises.
    OPTION_CHECKS: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "BUILDER_CONFIGS" in cls.__dict__:
            cls.BUILDER_CONFIG_CLASS = type(cls.BUILDER_CONFIGS[0])
            cls.DEFAULT_CONFIG_NAME = cls.BUILDER_CONFIGS[0].name

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["hash"] = core_fingerprint(kwargs.get("hash"))
        if (repo_id := kwargs.pop("repo_id", None)) is not None:
            kwargs["hub_repo_id"] = repo_id
        b = self.benchmark()  # the descriptor's own builder class is named BUILDER_NAME; a subclass keeps its name
        own = BUILDER_NAME.format(b.name) if type(self).__module__ == f"perckit.{b.name}.builder" else None
        if own is not None and kwargs.get("dataset_name") is None:
            kwargs["dataset_name"] = own  # the cache folder
        super().__init__(*args, **kwargs)
        if own is not None:
            self.name = self.info.builder_name = own

    @classmethod
    def benchmark(cls) -> Benchmark:
        """The descriptor of this builder's benchmark (its config class's ``BENCHMARK``)."""
        return cls.BUILDER_CONFIG_CLASS.BENCHMARK

    def _info(self) -> datasets.DatasetInfo:
        self._check_options()
        b = self.benchmark()  # the texts of the DatasetInfo (the same for every config) are the descriptor's
        return datasets.DatasetInfo(description=b.description, citation=b.citation, homepage=b.homepage, license=b.license,
                                    features=self._features())

    def _check_options(self) -> None:
        """Raise an :class:`~perckit.errors.OptionError` for the first option refused by :attr:`OPTION_CHECKS`."""
        for name, check in self.OPTION_CHECKS.items():
            value = getattr(self.config, name)
            if check is bool:
                if not isinstance(value, bool):
                    raise OptionError(f"option {name!r}: expected True or False, got {value!r}")
            elif callable(check):
                check(name, value)
            else:
                check_choice(name, value, check)

    def _features(self) -> datasets.Features:
        """The features of the config (its options checked)."""
        raise NotImplementedError

    def _release_root(self) -> Path:
        """The release root: ``data_dir`` when given, else a Hub snapshot of the files this config needs (the
        builder's ``hub_patterns``)."""
        if self.config.data_dir:
            return Path(self.config.data_dir)
        return self._download(self.hub_patterns(self.config))

    def _download(self, patterns: Sequence[str]) -> Path:
        """The files of the config's Hub repository (``hub_repo_id`` at ``revision``) that match ``patterns``; a
        :class:`~perckit.errors.ReleaseNotFoundError` saying how to pass ``data_dir`` when they cannot be fetched."""
        b, c = self.benchmark(), self.config
        return hub.download_release(c.hub_repo_id, patterns, c.revision, benchmark=b.label, builder_path=f"builders/{b.name}")


class PerckitBuilder(_PerckitOptions, datasets.GeneratorBasedBuilder):
    """Base of the perckit builders whose rows need ``datasets``' encoding (numpy arrays, Python values)."""


class PerckitTableBuilder(_PerckitOptions, datasets.ArrowBasedBuilder):
    """Base of the builders whose rows are already in Arrow storage form (RLE dicts, ``{"bytes", "path"}``
    media dicts, plain strings and numbers): ``_generate_rows`` yields ``(key, row)`` like a
    ``_generate_examples`` would, and the rows go to Arrow in tables of ``ROWS_PER_TABLE``.

    ``datasets``' per-example path (``Features.encode_example`` walking every nested dict, then a typed
    sequence per column) costs more than reading the files of an image-heavy config; pyarrow converts
    the same rows in C++ and the result is the same table (``tests`` compare both paths row by row).
    """

    #: Rows per Arrow table (and per record batch written); media builders lower it to bound memory.
    ROWS_PER_TABLE = 256

    def _generate_rows(self, **kwargs: Any) -> Iterator[tuple[str, dict]]:
        raise NotImplementedError

    def _download_and_prepare(self, *args: Any, **kwargs: Any) -> Any:
        # The cyclic collector is paused for the whole build, not per step: the release metadata (millions of small
        # containers) stays alive until the splits are written, and every pass would traverse it (rows hold no cycles).
        with gc_paused():
            return super()._download_and_prepare(*args, **kwargs)

    def _generate_tables(self, **kwargs: Any) -> Iterator[tuple[str, pa.Table]]:
        schema = self.info.features.arrow_schema
        names = set(schema.names)

        def checked() -> Iterator[tuple[str, dict]]:
            for key, row in self._generate_rows(**kwargs):
                if row.keys() != names:  # a programming error, never user input: say which keys differ
                    raise ValueError(
                        f"row {key!r}: expected the keys of the features {sorted(names)}, got {sorted(row)} "
                        f"(missing {sorted(names - row.keys())}, extra {sorted(row.keys() - names)})"
                    )
                yield key, row

        for batch in batched(checked(), self.ROWS_PER_TABLE):
            yield str(batch[0][0]), rows_to_table([row for _, row in batch], schema)


_MAX_BINARY = 2**31 - 2
#: The Arrow storage of ``Image``, ``Audio`` and ``Video`` features.
MEDIA_STORAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def rows_to_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Rows in Arrow storage form as a table of ``schema``.

    One row with media columns: their bytes are wrapped, not copied (a media build's data is copied only by
    the read and the write, not a third time into Arrow buffers). Many rows whose media values are all plain
    ``{"bytes": bytes, "path": str | None}`` dicts: each media column is one join of the bytes (one copy,
    no per-value conversion; from_pylist's growing buffers cost several times that) and the rest
    ``from_pylist``; the same table (tests compare). Otherwise ``pa.Table.from_pylist``.
    """
    media = [f.name for f in schema if f.type == MEDIA_STORAGE]
    columns = None
    if len(rows) > 1 and media:
        columns = {name: media_column([row.get(name) for row in rows]) for name in media}
        columns = columns if all(c is not None for c in columns.values()) else None
    elif len(rows) == 1 and media:
        columns = {name: _media_array(rows[0][name]) for name in media}
    if columns is None:
        return pa.Table.from_pylist(rows, schema=schema)
    rest = pa.schema([f for f in schema if f.name not in media])
    base = pa.Table.from_pylist([{k: v for k, v in row.items() if k not in columns} for row in rows], schema=rest)
    return pa.Table.from_arrays([columns[f.name] if f.name in columns else base.column(f.name) for f in schema], schema=schema)


def media_column(values: list) -> pa.Array | None:
    """The ``{bytes, path}`` struct array of many plain media dicts (exactly the keys ``bytes`` (a ``bytes``)
    and ``path`` (a ``str`` or None), under 2 GiB in all), the bytes joined once; None for anything else
    (the caller then converts with ``from_pylist``)."""
    for v in values:
        if (type(v) is not dict or len(v) != 2 or type(v.get("bytes")) is not bytes
                or type(v.get("path", 0)) not in (str, type(None))):  # exactly {"bytes": bytes, "path": str | None}
            return None
    data = [v["bytes"] for v in values]
    paths = [v["path"] for v in values]
    offsets = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum([len(d) for d in data], out=offsets[1:])
    if offsets[-1] > _MAX_BINARY:
        return None
    blob = pa.Array.from_buffers(pa.binary(), len(data), [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(data))])
    return pa.StructArray.from_arrays([blob, pa.array(paths, pa.string())], fields=list(MEDIA_STORAGE))


def _media_array(value: dict | None) -> pa.Array:
    """A one-element ``{bytes, path}`` struct array over the row's own bytes object (zero-copy)."""
    if value is None:
        return pa.nulls(1, MEDIA_STORAGE)
    data = value.get("bytes")
    if data is None:
        blob = pa.nulls(1, pa.binary())
    else:
        if len(data) > _MAX_BINARY:  # Arrow's binary type has 32-bit offsets (so does from_pylist's)
            raise ValueError(f"{value.get('path')!r}: expected a media file under 2 GiB, got {len(data)} bytes")
        offsets = pa.py_buffer(np.array([0, len(data)], dtype=np.int32))
        blob = pa.Array.from_buffers(pa.binary(), 1, [None, offsets, pa.py_buffer(data)])
    return pa.StructArray.from_arrays([blob, pa.array([value.get("path")], pa.string())], fields=list(MEDIA_STORAGE))
