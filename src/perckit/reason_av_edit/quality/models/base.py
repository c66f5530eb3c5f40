"""The one protocol every model-based edit-quality metric follows, and the registry that names them.

A model-based metric (FVD, FAD, TV-A / TC, TA-A, AV-A, LPAPS, Sync-C / Sync-D, PQ, DeSync, PEAVS) is a
:class:`ModelMetric`: ``measure(sample)`` is the accumulate half (one decoded :class:`QualitySample` in,
one small picklable record of numpy arrays / floats out, the networks run here and nowhere else);
``reduce(records)`` is the reduce half (any subset of the records in, ``{key: float | None}`` out, numpy
only, so the per-category and per-sub-track tables reuse it). The math of each reduce (Fréchet distance,
cosine scores, offsets) is a numpy function of its own module with golden tests.

Each metric is built by the factory its :class:`ModelEntry` names, ``factory(weights, options)``:
``weights`` is what the user passed for it in ``models={...}`` (a local path or a Hugging Face repo id,
``None`` for the default), ``options`` the :class:`ModelOptions`. A factory raises
:class:`ModelUnavailable` with the reason and what to install or pass when its library or its weights
are absent; the metric then reports ``None`` and the reason in ``skipped``. Nothing here downloads:
weights come from a local path or the user's Hugging Face cache (``local_files_only``). Weights are data,
never code: every weights file is read by :func:`read_checkpoint` (:mod:`perckit.io.model_files`: a checked,
size-capped regular file, ``torch.load(weights_only=True)``, TorchScript refused), every model folder handed
to a third-party loader is checked first (:func:`perckit.io.model_files.check_model_folder`), and a file picked
from a folder is resolved inside it (:func:`perckit.io.model_files.folder_file`).
A user (or a test) may also pass a ready :class:`ModelMetric` instance in ``models``.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np

from ....errors import InputNotFoundError, OptionError, check_option_type
from ....io.model_files import folder_file, load_torch_checkpoint
from ....core.stats import fmean


#: what to install for the metrics whose only needs are perckit's ``quality`` extra and torch
QUALITY_EXTRA = "pip install 'perckit[quality]' (a CPU torch first: pip install torch==2.13.0)"
#: a Hugging Face repo id (``owner/name``), which a weights string that is not a local path may be (:func:`cached_repo`)
REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


class ModelUnavailable(Exception):
    """A model-based metric cannot run here: its library or weights are absent. The message says what is missing
    first (up to its first ``: `` or ``; ``; the demo report's table quotes that much), then what to install or pass;
    the metric reports the key as ``None`` with this reason in ``skipped``."""


@dataclass(frozen=True)
class Clip:
    """One decoded side of a sample: RGB frames and the audio track.

    ``frames`` is uint8 ``(T, H, W, 3)``; ``audio`` float32 mono in [-1, 1] at ``sample_rate`` (``None``
    when the side has no audio)."""

    frames: np.ndarray
    fps: float
    audio: np.ndarray | None
    sample_rate: int


@dataclass(frozen=True)
class QualitySample:
    """Everything a quality metric may look at for one sample, decoded once.

    ``region`` is the target region per frame, bool ``(T, H, W)`` on the source grid (``None`` when the
    reference has no mask video); ``ref_image`` the reference image as uint8 ``(H, W, 3)`` or ``None``;
    ``target_text`` the text the edit should match (the instruction unless the options say otherwise)."""

    sample_id: str
    category: str
    sub_track: str
    instruction: str
    target_text: str
    edited: Clip
    source: Clip
    region: np.ndarray | None = None
    ref_image: np.ndarray | None = None
    edit_window_s: tuple[float, float] | None = None


@runtime_checkable
class ModelMetric(Protocol):
    """A model-based metric: accumulate with :meth:`measure`, reduce with :meth:`reduce`."""

    #: the output keys this metric fills, e.g. ``("sync_c", "sync_d")``
    keys: tuple[str, ...]

    def measure(self, sample: QualitySample) -> Mapping[str, Any]:
        """One sample's record (picklable: numpy arrays, floats, ints)."""
        ...

    def reduce(self, records: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
        """``{key: value}`` for every key of :attr:`keys` over ``records`` (``None`` where undefined,
        e.g. a Fréchet distance over fewer than two samples)."""
        ...


def mean_of(records: Sequence[Mapping[str, Any]], key: str) -> float | None:
    """The mean of ``record[key]`` over the records that have a value (:func:`perckit.core.stats.fmean`, order
    independent; ``None`` when none has): the reduce of every per-sample model metric."""
    return fmean(float(r[key]) for r in records if r.get(key) is not None)


class MeanOfKeys:
    """The reduce of a per-sample model metric: :func:`mean_of` each of its ``keys``."""

    keys: tuple[str, ...] = ()

    def reduce(self, records: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
        return {k: mean_of(records, k) for k in self.keys}


def count_records(records: Sequence[Mapping[str, Any]], key: str) -> int:
    """How many of ``records`` entered ``key`` (the table's ``n_<key>``): a metric may say so itself with a
    ``counts(records) -> {key: int}`` method; otherwise a per-sample record that carries ``key`` counts when
    its value is not ``None``, a set-level record (feature rows ``"edited"`` / ``"source"``, as FVD and
    FAD keep) counts when both sides have rows, and any other record counts."""
    if any(key in r for r in records):
        return sum(1 for r in records if r.get(key) is not None)
    if any("edited" in r or "source" in r for r in records):
        return sum(1 for r in records if np.size(r.get("edited", ())) and np.size(r.get("source", ())))
    return len(records)


@dataclass(frozen=True)
class ModelOptions:
    """What every factory may read: the torch device, the batch size, and whether a Hugging Face repo id
    may be looked up in the local cache (never downloaded)."""

    device: str = "cpu"
    batch_size: int = 16
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelEntry:
    """One model-based metric: its name, the keys it fills, its factory (``"module:function"``, imported
    only when used), where its definition comes from, and what to install / pass to enable it."""

    name: str
    keys: tuple[str, ...]
    factory: str
    source: str
    install: str
    weights: str
    #: ``None`` when a public implementation exists; otherwise why the metric can never run
    unavailable: str | None = None

    def build(self, weights: Any, options: ModelOptions) -> ModelMetric:
        module, _, attr = self.factory.partition(":")
        fn: Callable[[Any, ModelOptions], ModelMetric] = getattr(importlib.import_module(module, __name__.rsplit('.', 1)[0]), attr)
        return fn(weights, options)


def positive_int(name: str, value: Any) -> int:
    """``value`` as a positive integer, else :class:`OptionError` naming ``name``."""
    check_option_type(name, value, "int")
    if value < 1:
        raise OptionError(f"option {name!r}: expected a positive integer, got {value!r}")
    return int(value)


def require(module: str, install: str) -> Any:
    """Import ``module`` or raise :class:`ModelUnavailable` saying what to install."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ModelUnavailable(f"{module} is not installed ({e.__class__.__name__}: {e}); {install}") from None


def local_weights(weights: Any, what: str, default: str | None = None, pass_as: str = "") -> str:
    """A weights file or folder given by the user (must exist: an explicit path that does not is an
    :class:`~perckit.errors.InputNotFoundError`), else ``default`` if it is an existing path, else
    :class:`ModelUnavailable` saying what to pass."""
    if weights is not None:
        if not isinstance(weights, (str, os.PathLike)):
            raise OptionError(f"models[{what!r}]: expected a path, a Hugging Face repo id or a ModelMetric, got {type(weights).__name__}")
        p = Path(weights).expanduser()
        if not p.exists():
            raise InputNotFoundError(f"models[{what!r}]: weights {str(weights)!r} do not exist")
        return str(p)
    if default is not None and Path(default).expanduser().exists():
        return str(Path(default).expanduser())
    raise ModelUnavailable(f"no weights for {what}: pass models={{{what!r}: <path>}}{pass_as}")


def weights_in(path: str, what: str, names: Sequence[str], missing: str, error: type[Exception] = ModelUnavailable,
               link_error: type[Exception] = OptionError) -> str:
    """``path`` itself when it is not a folder; for a folder, the first of ``names`` it holds (resolved inside it:
    :func:`perckit.io.model_files.folder_file`, a link out of it refused with ``link_error``), else
    ``error(missing)``."""
    if not os.path.isdir(path):
        return path
    for name in names:
        found = folder_file(path, name, f"models[{what!r}]: the folder {str(path)!r}", link_error)
        if found is not None:
            return str(found)
    raise error(missing)


def cached_repo(repo_id: str, what: str, filename: str | None = None) -> str:
    """The local snapshot folder (or ``filename`` in it) of ``repo_id`` in the user's Hugging Face cache,
    never downloading; :class:`ModelUnavailable` when it is not cached."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.utils import LocalEntryNotFoundError

    try:
        folder = snapshot_download(repo_id, local_files_only=True)
    except (LocalEntryNotFoundError, FileNotFoundError, OSError, ValueError) as e:
        raise ModelUnavailable(f"{repo_id!r} is not in the Hugging Face cache ({e.__class__.__name__}); download it once with "
                               f"`huggingface-cli download {repo_id}` or pass models={{{what!r}: <local path>}}") from None
    if filename is None:
        return folder
    p = folder_file(folder, filename, f"models[{what!r}]: the cached snapshot of {repo_id!r}")
    if p is None:
        raise ModelUnavailable(f"{repo_id!r} is cached but has no {filename!r}; pass models={{{what!r}: <local path>}}")
    return str(p)


def read_checkpoint(path: str, what: str, expected: str, hint: str = "", torchscript_hint: str = "") -> Mapping[str, Any]:
    """The mapping a weights file holds, read as data by :func:`perckit.io.model_files.load_torch_checkpoint`
    (a regular file of at most ``MAX_WEIGHTS_BYTES``, ``torch.load(weights_only=True)`` on the checked file
    object; a TorchScript archive refused, never loaded: no code from the file runs). A file torch cannot read
    that way, a TorchScript archive, or one that holds no mapping, is an :class:`~perckit.errors.OptionError`
    naming ``models[what]``, the file and what was ``expected`` (``hint``: where the right file comes from;
    ``torchscript_hint``: what to convert a TorchScript archive to); a missing file an ``InputNotFoundError``."""
    state = load_torch_checkpoint(path, f"models[{what!r}]", expected, hint, torchscript_hint or hint)
    if not isinstance(state, Mapping):
        raise OptionError(f"models[{what!r}]: {path!r} holds a {type(state).__name__}, expected {expected}{hint}")
    return state


def load_strict(module: Any, state: Mapping[str, Any], path: str, what: str, expected: str, hint: str = "") -> Any:
    """``module`` with ``state`` loaded ``strict=True`` (every key and shape); a mismatch is an
    :class:`~perckit.errors.OptionError` naming ``models[what]``, the file and the first difference."""
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as e:
        detail = " ".join(str(e).split())  # torch's first line is only "Error(s) in loading state_dict for X:"
        raise OptionError(f"models[{what!r}]: {path!r} does not match {expected} ({detail[:300]}){hint}") from None
    return module
