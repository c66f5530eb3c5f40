"""``av_edit_quality``: the ReasonAVEdit-Bench final edit quality of edited clips, as accumulate / reduce halves.

The formulas (E the edited clip, S its source, R the target region; each is written once: the model-free ones in
:mod:`.pixel`, the numpy half of the model metrics in :mod:`.formulas`, with their exact conventions)::

    psnr     = mean over frames of 10 log10(255^2 / MSE(E_t, S_t))             (capped at psnr_cap)
    ssim     = mean over frames of SSIM(E_t, S_t)                               (scikit-image's definition)
    bg_psnr  = the same PSNR on the pixels outside R
    bg_ssim  = the SSIM map of E_t with R pasted back from S_t, against S_t, averaged outside R
    fvd, fad = |mu_E - mu_S|^2 + Tr(C_E + C_S - 2 (C_E C_S)^(1/2))              (I3D / VGGish features of the set)
    tv_a     = mean over frames of w max(cos(image_t, text), 0);  tc = mean of cos(image_t, image_t+1)   (CLIP)
    ta_a     = cos(text, audio) (CLAP);  av_a = cos(video, audio) (ImageBind)
    sync_d   = min over offsets of the mean window distance;  sync_c = its median - that minimum   (SyncNet)
    desync   = mean |offset| of the first and last 4.8 s windows, offsets on linspace(-2, 2, 21) s   (Synchformer)
    lpaps    = sum over layers l of the mean over (f, t) of sum_c w_lc (n0_lc - n1_lc)^2   (SpecVQGAN)
    pq, peavs: the score of Audiobox Aesthetics' PQ axis / of the official PEAVS pipeline

Accumulate: :func:`av_edit_quality` pairs predictions with references by ``sample_id``
(:func:`perckit.core.matching.pair_by_id`), decodes one sample at a time (:func:`.decode.decode_sample`), scores the
exact model-free metrics (:func:`.pixel.clip_scores`: ``ssim``, ``psnr``, ``bg_psnr``, ``bg_ssim``) and runs the
``measure`` half of every available model metric (:mod:`.models`), keeping one small record per sample.
Reduce: :func:`table` turns any subset of the records into one table (means by :func:`perckit.core.stats.fmean`, so
independent of the order; a model metric's own ``reduce`` on the subset's records, so set-level statistics such
as FVD are computed per table too).

The tables: the top level is the main ranking over the pure-instruction samples (category != ``reference``),
``reference`` the reference-guided samples, ``per_category``, ``per_sub_track``, ``per_language`` and
``per_orientation`` (:func:`..metric.group_blocks`, shared with ``av_reasoning``); each holds every output key
(:data:`OUTPUT_KEYS`), ``n_<key>`` and ``num_samples``. ``skipped`` gives the reason for every top-level key that
is ``None``; ``suggested`` the card's per-category diagnostic keys (:data:`SUGGESTED`).

Model metrics come from ``models={name or key: weights or a ModelMetric}``; an entry not given is built by its
factory with ``None`` (a local default or the Hugging Face cache, never a download). A factory that raises
:class:`.models.ModelUnavailable`, or whose module is not importable, leaves its keys ``None`` with the reason.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from ...errors import OptionError, PerckitError, PredictionError, check_choice, check_option_type, make_options, short_repr
from ...core.matching import missing_ids_message, pair_by_id
from ...hf.cli import progress
from ..metric import group_blocks, group_values
from . import models as registry
from .decode import decode_sample
from .pixel import FRAME_MISMATCH, PIXEL_KEYS, RESIZE_EDITED, SSIM_IMPLS, clip_scores, mean_table, torch_device

logger = logging.getLogger(__name__)

#: Every output key, in output order: the model-free ones, then the model-based ones.
OUTPUT_KEYS: tuple[str, ...] = PIXEL_KEYS + registry.MODEL_KEYS
#: The model metrics (entry names) that need the edited audio, and those that also need the source audio.
NEEDS_EDITED_AUDIO = ("fad", "ta_a", "av_a", "lpaps", "sync", "pq", "desync", "peavs")
NEEDS_SOURCE_AUDIO = ("fad", "lpaps")
#: [card] "Suggested metrics": the diagnostic quality keys of each category (final quality keys apply to all).
SUGGESTED: dict[str, tuple[str, ...]] = {
    "where_only": ("bg_psnr", "bg_ssim"),
    "which_only": ("lpaps",),
    "when_only": ("desync",),
    "combined": ("bg_psnr", "bg_ssim", "lpaps", "desync"),
}
MISSING = ("error", "skip")
ADDITION_REGION = ("box", "mask")
EMPTY_PREDICTION = "an unedited sample is make_quality_prediction(sample_id, <the source video>)"
MAIN = "pure-instruction (non-reference)"


@dataclass(frozen=True)
class EditQualityOptions:
    """Every option of ``av_edit_quality``, with its default (see the metric card)."""

    #: PSNR of identical frames (and the most any frame scores), in dB
    psnr_cap: float = 100.0
    #: SSIM window side (odd, >= 3; scikit-image's default 7)
    ssim_win_size: int = 7
    #: "boxsum" (scikit-image's SSIM from exact window sums, compiled) or "skimage" (scikit-image itself)
    ssim_impl: str = "boxsum"
    #: torch device of the model-free metrics (None: the compiled CPU kernels, no torch)
    pixel_device: str | None = None
    #: processes scoring the model-free metrics, one clip at a time each (1: this process)
    num_proc: int = 1
    #: mask-video gray values above this are the target region
    mask_threshold: int = 127
    #: the region of the instance-addition sub-tracks (C4, R3): the placement "box" or the raw "mask"
    addition_region: str = "box"
    #: another frame count in the edited video: None refuses, "truncate", "resample"
    frame_mismatch: str | None = None
    #: another frame size in the edited video: None refuses, "bilinear"
    resize_edited: str | None = None
    #: a reference without a prediction: "error", or "skip" (left out, counted in num_missing)
    missing: str = "error"
    #: the output keys to compute (None: all); the others are None and listed in ``skipped``
    metrics: Sequence[str] | None = None
    #: {model entry name or output key: weights (a path / repo id) or a ModelMetric}
    models: Mapping[str, Any] | None = None
    #: torch device and batch size given to every model factory
    device: str = "cpu"
    batch_size: int = 16
    #: settings of single model metrics ({name: value}, the names of :data:`.models.MODEL_OPTIONS`)
    model_options: Mapping[str, Any] | None = None
    #: add ``per_sample`` (one record per sample, sorted by sample_id)
    return_per_sample: bool = False

    def __post_init__(self) -> None:
        o = "av_edit_quality"
        check_option_type("psnr_cap", self.psnr_cap, "number", owner=o)
        if not (math.isfinite(self.psnr_cap) and self.psnr_cap > 0):
            raise OptionError(f"option 'psnr_cap': expected a finite number of dB > 0, got {self.psnr_cap!r}")
        check_option_type("ssim_win_size", self.ssim_win_size, "int", owner=o)
        if self.ssim_win_size < 3 or self.ssim_win_size % 2 == 0:
            raise OptionError(f"option 'ssim_win_size': expected an odd integer >= 3, got {self.ssim_win_size!r}")
        check_option_type("mask_threshold", self.mask_threshold, "int", owner=o)
        if not 0 <= self.mask_threshold <= 255:
            raise OptionError(f"option 'mask_threshold': expected an int in [0, 255], got {self.mask_threshold!r}")
        check_choice("ssim_impl", self.ssim_impl, SSIM_IMPLS)
        if check_option_type("pixel_device", self.pixel_device, "str | None", owner=o) is not None:
            torch_device(self.pixel_device, self.ssim_impl)
        check_choice("addition_region", self.addition_region, ADDITION_REGION)
        check_choice("frame_mismatch", self.frame_mismatch, FRAME_MISMATCH)
        check_choice("resize_edited", self.resize_edited, RESIZE_EDITED)
        check_choice("missing", self.missing, MISSING)
        if self.metrics is not None:
            check_option_type("metrics", self.metrics, "strs", owner=o)
            unknown = [k for k in self.metrics if k not in OUTPUT_KEYS]
            if unknown or not self.metrics:
                raise OptionError(f"option 'metrics': expected some of {list(OUTPUT_KEYS)}, got {list(self.metrics)!r}")
        if self.models is not None:
            if not isinstance(self.models, Mapping):
                raise OptionError(f"av_edit_quality: option 'models': expected a dict {{model name or key: weights or a ModelMetric}}, "
                                  f"got {type(self.models).__name__}: {short_repr(self.models)}")
            names = [e.name for e in registry.ENTRIES]
            unknown = [k for k in self.models if k not in names and k not in registry.BY_KEY]
            if unknown:
                raise OptionError(f"option 'models': unknown model(s) {unknown}; expected entry names {names} or keys {list(registry.MODEL_KEYS)}")
        if self.model_options is not None:
            if not isinstance(self.model_options, Mapping):
                raise OptionError(f"av_edit_quality: option 'model_options': expected a dict {{setting: value}}, "
                                  f"got {type(self.model_options).__name__}: {short_repr(self.model_options)}")
            unknown = sorted(k for k in self.model_options if k not in registry.MODEL_OPTIONS)
            if unknown:
                raise OptionError(f"option 'model_options': unknown setting(s) {unknown}; expected some of {sorted(registry.MODEL_OPTIONS)}")
        check_option_type("device", self.device, "str", owner=o)
        for name in ("batch_size", "num_proc"):
            if check_option_type(name, getattr(self, name), "int", owner=o) < 1:
                raise OptionError(f"option {name!r}: expected an integer >= 1, got {getattr(self, name)!r}")
        check_option_type("return_per_sample", self.return_per_sample, "bool", owner=o)

    def selected(self) -> tuple[str, ...]:
        return OUTPUT_KEYS if self.metrics is None else tuple(k for k in OUTPUT_KEYS if k in self.metrics)


@dataclass
class ActiveModel:
    """A model metric that runs: its entry, the instance, and the keys it fills."""

    entry: registry.ModelEntry
    metric: Any
    keys: tuple[str, ...]

    @property
    def needs_audio(self) -> bool:
        return self.entry.name in NEEDS_EDITED_AUDIO


@dataclass
class SampleRecord:
    """One sample's accumulate half: its pixel scores and one record per model metric that measured it."""

    sample_id: str
    category: str
    sub_track: str
    pixel: dict[str, Any]
    models: dict[str, Any] = field(default_factory=dict)
    has_edited_audio: bool = False
    language: str | None = None
    orientation: str | None = None


def build_models(options: EditQualityOptions) -> tuple[list[ActiveModel], dict[str, str]]:
    """The model metrics that run (selected, and built or given) and ``{key: reason}`` for every selected model key
    that will be ``None`` whatever the data (library or weights absent, no public implementation)."""
    selected = set(options.selected())
    given = dict(options.models or {})
    mopts = registry.ModelOptions(device=options.device, batch_size=options.batch_size, extra=dict(options.model_options or {}))
    active: list[ActiveModel] = []
    skipped: dict[str, str] = {}
    for entry in registry.ENTRIES:
        keys = tuple(k for k in entry.keys if k in selected)
        if not keys:  # not selected: reduce_records says so
            continue
        names = [n for n in dict.fromkeys((entry.name, *entry.keys)) if n in given]  # an entry named as its key counts once
        if len(names) > 1:
            raise OptionError(f"option 'models': {names} name the same model {entry.name!r}; give it once")
        value = given[names[0]] if names else None
        if callable(getattr(value, "measure", None)) and callable(getattr(value, "reduce", None)) and hasattr(value, "keys"):
            metric = value
        elif entry.unavailable is not None:
            skipped.update({k: entry.unavailable for k in keys})
            continue
        else:
            try:
                metric = entry.build(value, mopts)
            except registry.ModelUnavailable as e:
                skipped.update({k: str(e) for k in keys})
                continue
            except ImportError as e:  # the model module (or a library it imports at module level) is absent
                reason = f"the {entry.name} model module is not available ({type(e).__name__}: {e}); {entry.install}"
                skipped.update({k: reason for k in keys})
                continue
        fills = tuple(k for k in keys if k in tuple(getattr(metric, "keys", ())))
        for k in keys:
            if k not in fills:
                skipped[k] = f"the {entry.name} metric given fills only {list(getattr(metric, 'keys', ()))}"
        if fills:
            active.append(ActiveModel(entry, metric, fills))
    return active, skipped


def _finite(v: Any) -> float | None:
    return float(v) if v is not None and math.isfinite(float(v)) else None


def table(records: Sequence[SampleRecord], active: Sequence[ActiveModel], selected: Sequence[str] = OUTPUT_KEYS) -> dict[str, Any]:
    """One table over ``records``: every key of :data:`OUTPUT_KEYS` (``None`` where not computed) with its
    ``n_<key>`` (the samples that entered it), ``num_samples`` and ``num_without_edited_audio``."""
    values: dict[str, Any] = mean_table([r.pixel for r in records])
    for k in PIXEL_KEYS:
        if k not in selected:
            values[k], values[f"n_{k}"] = None, 0
    for m in active:
        recs = [r.models[m.entry.name] for r in records if m.entry.name in r.models]
        got = m.metric.reduce(recs) if recs else {}
        counts = m.metric.counts(recs) if callable(getattr(m.metric, "counts", None)) else {}
        for k in m.keys:
            values[k] = _finite(got.get(k))
            values[f"n_{k}"] = int(counts[k]) if k in counts else registry.count_records(recs, k)
    out: dict[str, Any] = {}
    for k in OUTPUT_KEYS:
        out.update({k: values.get(k), f"n_{k}": values.get(f"n_{k}", 0)})
    out["num_samples"] = len(records)
    out["num_without_edited_audio"] = sum(1 for r in records if not r.has_edited_audio)
    return out


def _skip_reason(key: str, top: Mapping[str, Any], main: Sequence[SampleRecord], active: Sequence[ActiveModel],
                 selected: Sequence[str]) -> str:
    if key not in selected:
        return f"not selected (metrics={list(selected)})"
    if not main:
        return f"no {MAIN} sample"
    if key in ("bg_psnr", "bg_ssim"):
        return "no frame of a main sample has a background pixel (the target region covers the frame)"
    model = next((m for m in active if key in m.keys), None)
    if model is not None and model.needs_audio and top[f"n_{key}"] == 0:
        need = "edited and source audio" if model.entry.name in NEEDS_SOURCE_AUDIO else "edited audio"
        return f"no {MAIN} sample has {need} (edited_audio or the edited video's audio track; the reference audio)"
    return f"undefined over the {top[f'n_{key}']} {MAIN} sample(s) measured (e.g. a Fréchet distance needs two)"


def _score(pred: Mapping, ref: Mapping, o: EditQualityOptions, active: Sequence[ActiveModel], pixel: bool) -> SampleRecord:
    d = decode_sample(pred, ref, mask_threshold=o.mask_threshold, addition_region=o.addition_region,
                      frame_mismatch=o.frame_mismatch, resize_edited=o.resize_edited,
                      decode_audio=any(m.needs_audio for m in active))
    s = d.sample
    px = clip_scores(s.edited.frames, s.source.frames, s.region, o.psnr_cap, o.ssim_win_size, f"sample {s.sample_id!r}", o.ssim_impl,
                     o.pixel_device) if pixel else {}
    rec = SampleRecord(s.sample_id, s.category, s.sub_track, px, has_edited_audio=d.has_edited_audio, **group_values(ref))
    for m in active:
        if m.needs_audio and not (d.has_edited_audio and (d.has_source_audio or m.entry.name not in NEEDS_SOURCE_AUDIO)):
            continue
        rec.models[m.entry.name] = m.metric.measure(s)
    return rec


def _records(pairs: list[tuple[Mapping, Mapping]], o: EditQualityOptions, active: Sequence[ActiveModel], pixel: bool) -> list[SampleRecord]:
    """Every pair's :class:`SampleRecord`, in the order of ``pairs``. With ``num_proc`` > 1 the model-free metrics run
    in that many worker processes (each decodes its clip), while this process runs the model metrics (decoding the
    clip again) and takes the workers' answers in order: the same records as one process."""
    shown = progress(pairs, "av_edit_quality: decoding, model features", unit="sample")
    if o.num_proc <= 1 or not pixel or len(pairs) < 2:
        return [_score(p, r, o, active, pixel) for p, r in shown]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn when a torch device scores the pixels (a forked CUDA context is unusable); else the platform's default
    pool = ProcessPoolExecutor(min(o.num_proc, len(pairs)), mp_context=multiprocessing.get_context("spawn" if o.pixel_device else None))
    try:
        answers = pool.map(partial(_score, o=replace(o, models=None), active=(), pixel=True), *zip(*pairs))
        records = []
        for p, r in shown:
            rec = _score(p, r, o, active, False) if active else None  # the model metrics, here, meanwhile
            try:
                got = next(answers)
            except PerckitError as e:  # a user's error: its message, without the worker's traceback
                raise e from None
            records.append(got if rec is None else replace(rec, pixel=got.pixel))
        return records
    finally:
        pool.shutdown(cancel_futures=True)


def reduce_records(records: Sequence[SampleRecord], active: Sequence[ActiveModel], skipped_models: Mapping[str, str],
                   options: EditQualityOptions, num_missing: int = 0) -> dict[str, Any]:
    """Reduce half: the top-level table (main ranking), ``reference``, the per-group tables (``per_category``,
    ``per_sub_track``, ``per_language``, ``per_orientation``: :func:`..metric.group_blocks`), ``suggested``, ``skipped``
    and the counts."""
    selected = options.selected()
    main = [r for r in records if r.category != "reference"]
    out = table(main, active, selected)
    out["num_reference_samples"] = len(records) - len(main)
    out["num_missing"] = num_missing
    out["reference"] = table([r for r in records if r.category == "reference"], active, selected)
    out.update(group_blocks(records, lambda subset: table(subset, active, selected)))
    out["suggested"] = {c: list(ks) for c, ks in SUGGESTED.items()}
    out["skipped"] = {k: skipped_models[k] if k in skipped_models else _skip_reason(k, out, main, active, selected)
                      for k in OUTPUT_KEYS if out[k] is None}
    if options.return_per_sample:
        rows = []
        for r in sorted(records, key=lambda r: r.sample_id):
            row = {"sample_id": r.sample_id, "category": r.category, "sub_track": r.sub_track, "language": r.language,
                   "orientation": r.orientation, **r.pixel, "has_edited_audio": r.has_edited_audio}
            for m in active:
                got = m.metric.reduce([r.models[m.entry.name]]) if m.entry.name in r.models else {}
                row.update({k: _finite(got.get(k)) for k in m.keys})
            rows.append(row)
        out["per_sample"] = rows
    return out


def av_edit_quality(predictions: Sequence[Mapping], references: Sequence[Mapping], **options: Any) -> dict:
    """Score edited clips against their reference rows (see the ``av_edit_quality`` metric card).

    Predictions are matched by ``sample_id`` (:func:`perckit.core.matching.pair_by_id`): a duplicate id on either side
    or an unknown prediction id raises :class:`PredictionError`; a reference without a prediction raises too,
    unless ``missing="skip"`` (then it is left out, counted in ``num_missing`` and warned about).
    """
    o = make_options("av_edit_quality", EditQualityOptions, options)
    pairs = pair_by_id(predictions, references, "sample_id", strict=False)
    missing = [r["sample_id"] for p, r in pairs if p is None]
    if missing and o.missing == "error":
        raise PredictionError(missing_ids_message("sample_id", missing, EMPTY_PREDICTION)
                              + " or pass missing='skip' to leave them out (counted in num_missing)")
    if missing:
        logger.warning("av_edit_quality: %d reference sample(s) have no prediction and are left out (missing='skip'), e.g. %s",
                       len(missing), missing[:5])
    active, skipped_models = build_models(o)
    pixel = any(k in o.selected() for k in PIXEL_KEYS)
    records = _records([(p, r) for p, r in pairs if p is not None], o, active, pixel)
    return reduce_records(records, active, skipped_models, o, len(missing))


__all__ = ["EditQualityOptions", "NEEDS_EDITED_AUDIO", "OUTPUT_KEYS", "SUGGESTED", "SampleRecord", "av_edit_quality",
           "build_models", "reduce_records", "table"]
