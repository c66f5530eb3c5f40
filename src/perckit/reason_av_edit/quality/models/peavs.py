"""PEAVS (Goncalves et al., 2024): read the scores of the official implementation; perckit runs no PEAVS
network.

What exists (checked 2026-12-01, amazon-science/avgen-eval-toolkit at commit 9cf014b of 2024-09-28,
Apache-2.0): the code and the trained weights (``PEAVS/metric_weights/final_model.pt``) are public, but
as a script pipeline, not an installable package: ``run_PEAVS.sh`` extracts I3D RGB + optical-flow
features (video_features, with RAFT / PWC-Net flow) and VGGish features of every video in a folder into
files under its working directory, then ``PEAVS/metric.py`` runs a cross-modal transformer on them and
writes ``PEAVS/results/results.csv`` (columns ``filename,score``: the video's file stem and
``clamp(4 * prediction + 1, 1, 5)``). Porting that pipeline (three feature networks and the transformer)
is not done here.

So :func:`build_peavs` takes that CSV: run ``bash run_PEAVS.sh videos_folder=<folder>`` on the edited
videos named ``<sample_id>.mp4`` (the layout ``load_quality_predictions_dir`` reads) and pass
``models={"peavs": "<path to results.csv>"}``. ``measure`` looks the sample up by id; ``reduce`` is the
mean. Without the CSV the metric is skipped with this reason.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ....errors import OptionError, PredictionError
from .base import ModelOptions, ModelUnavailable, QualitySample, local_weights, mean_of

#: where the official implementation lives and what was found there
REPO = "amazon-science/avgen-eval-toolkit"
CHECKED = "2026-12-01 (commit 9cf014b, 2024-09-28)"
#: the official score range
LOW, HIGH = 1.0, 5.0
REASON = (
    f"PEAVS (Goncalves et al., 2024) has public code and weights ({REPO}, PEAVS/, checked {CHECKED}) but only "
    "as a script pipeline (I3D RGB + optical-flow and VGGish feature extraction, then its transformer), not an "
    "installable package, and perckit does not port it: run its run_PEAVS.sh on the edited videos named "
    "<sample_id>.mp4 and pass models={'peavs': '<path to PEAVS/results/results.csv>'}"
)


def load_peavs_csv(path: str | Path) -> dict[str, float]:
    """``{file stem: score}`` from the official ``results.csv`` (header ``filename,score``; one row per
    video; each score a finite number in [1, 5]; a stem twice is refused). A ``filename`` with a
    video extension (``.mp4``) is reduced to its stem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PredictionError(f"PEAVS scores {str(p)!r}: cannot be read as UTF-8 text ({e.__class__.__name__}: {e})") from None
    reader = csv.DictReader(text.splitlines())
    if reader.fieldnames is None or not {"filename", "score"} <= set(reader.fieldnames):
        raise PredictionError(f"PEAVS scores {str(p)!r}: expected a header with 'filename' and 'score', found {reader.fieldnames!r}")
    scores: dict[str, float] = {}
    for line, row in enumerate(reader, start=2):
        name = (row.get("filename") or "").strip()
        if not name:
            raise PredictionError(f"PEAVS scores {str(p)!r} line {line}: empty filename")
        stem = name[: -len(Path(name).suffix)] if Path(name).suffix.lower() in (".mp4", ".mkv", ".avi", ".mov", ".webm") else name
        try:
            value = float(row.get("score") or "")
        except ValueError:
            raise PredictionError(f"PEAVS scores {str(p)!r} line {line}: score {row.get('score')!r} is not a number") from None
        if not math.isfinite(value) or not LOW <= value <= HIGH:
            raise PredictionError(f"PEAVS scores {str(p)!r} line {line}: expected a score in [{LOW:g}, {HIGH:g}], got {value!r}")
        if stem in scores:
            raise PredictionError(f"PEAVS scores {str(p)!r} line {line}: {stem!r} is scored twice")
        scores[stem] = value
    return scores


class PEAVSMetric:
    """PEAVS from precomputed official scores ``{sample_id: score in [1, 5]}`` (see the module docstring);
    ``where`` names their file in messages. A sample without a score is a
    :class:`~perckit.errors.PredictionError`."""

    keys: tuple[str, ...] = ("peavs",)

    def __init__(self, scores: Mapping[str, float], where: str = "the PEAVS scores") -> None:
        if not isinstance(scores, Mapping):
            raise OptionError(f"PEAVSMetric: expected a mapping of sample id to score, got {type(scores).__name__}")
        self.scores = {str(k): float(v) for k, v in scores.items()}
        self.where = where

    def measure(self, sample: QualitySample) -> dict[str, Any]:
        """``{"peavs": the sample's score}``."""
        if sample.sample_id not in self.scores:
            raise PredictionError(f"sample {sample.sample_id!r} has no PEAVS score in {self.where} (expected a row named {sample.sample_id!r})")
        return {"peavs": self.scores[sample.sample_id]}

    def reduce(self, records: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
        """``{"peavs": mean score}`` (``None`` for no records)."""
        return {"peavs": mean_of(records, "peavs")}


def build_peavs(weights: Any, options: ModelOptions) -> PEAVSMetric:
    """PEAVS from the official ``results.csv`` given as ``weights``; :class:`ModelUnavailable` with
    :data:`REASON` when none is given (perckit cannot run PEAVS itself)."""
    if weights is None:
        raise ModelUnavailable(REASON)
    path = Path(local_weights(weights, "peavs"))
    if path.is_dir():
        path = path / "results.csv"
        if not path.is_file():
            raise ModelUnavailable(f"models['peavs']: folder has no results.csv; {REASON}")
    return PEAVSMetric(load_peavs_csv(path), where=repr(str(path)))


__all__ = ["PEAVSMetric", "REASON", "build_peavs", "load_peavs_csv"]
