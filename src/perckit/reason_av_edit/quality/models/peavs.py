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
import io
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ....errors import InputNotFoundError, OptionError, PredictionError
from ....io.paths import read_regular_file
from .base import ModelOptions, ModelUnavailable, QualitySample, local_weights, MeanOfKeys, weights_in

#: where the official implementation lives and what was found there
REPO = "amazon-science/avgen-eval-toolkit"
CHECKED = "2026-12-01 (commit 9cf014b, 2024-09-28)"
#: the official score range
LOW, HIGH = 1.0, 5.0
#: Largest results.csv read (64 MiB): the official file has one short row ("<stem>,<score>") per video, about
#: 70 KB for the benchmark's 1,200 samples; checked on the open file before anything is read.
MAX_RESULTS_BYTES = 64 << 20
REASON = (f"no PEAVS results.csv: PEAVS (Goncalves et al., 2024) has public code and weights ({REPO}, PEAVS/, checked {CHECKED}) but only "
          "as a script pipeline (I3D RGB + optical-flow and VGGish feature extraction, then its transformer), not an "
          "installable package, and perckit does not port it: run its run_PEAVS.sh on the edited videos named "
          "<sample_id>.mp4 and pass models={'peavs': '<path to PEAVS/results/results.csv>'}")


def _long_field(line: str, header: list[str], limit: int) -> str:
    """Which field of the physical CSV ``line`` is over ``limit`` characters, for a message: the header's name
    of the first comma-separated piece that long (a quoted comma can only shift it), else "a field"."""
    for i, piece in enumerate(line.split(",")):
        if len(piece) > limit:
            return f"field {header[i]!r}" if i < len(header) else f"field {i + 1} (past the header's {len(header)})"
    return "a field"


def load_peavs_csv(path: str | Path) -> dict[str, float]:
    """``{file stem: score}`` from the official ``results.csv`` (header ``filename,score``; one row per
    video; each score a finite number in [1, 5]; a stem twice is refused). A ``filename`` with a
    video extension (``.mp4``) is reduced to its stem.

    The file is read by :func:`perckit.io.paths.read_regular_file`: a regular file of at most
    :data:`MAX_RESULTS_BYTES` (a FIFO, ``/dev/zero``, a folder, a larger file are refused before anything is
    read), UTF-8 text, then parsed by ``csv`` under its field-size limit (``csv.field_size_limit()``, 131072
    characters): every refusal is a :class:`~perckit.errors.PredictionError` naming the file (and the line and
    field where there is one); a missing file an :class:`~perckit.errors.InputNotFoundError`."""
    p = Path(path)
    where = f"PEAVS scores {str(p)!r}"
    raw = read_regular_file(p, where, MAX_RESULTS_BYTES, PredictionError, InputNotFoundError)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PredictionError(f"{where}: expected UTF-8 text, got byte {raw[e.start]:#04x} at offset {e.start} that is not UTF-8") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] = []
    scores: dict[str, float] = {}
    try:
        header = next(reader, None) or []
        if not {"filename", "score"} <= set(header):
            raise PredictionError(f"{where}: expected a header with 'filename' and 'score', found {header[:10]!r}")
        col = {name: header.index(name) for name in ("filename", "score")}
        for row in reader:
            line = reader.line_num
            if not row:
                continue
            values = {k: (row[i] if i < len(row) else "") for k, i in col.items()}
            name = values["filename"].strip()
            if not name:
                raise PredictionError(f"{where} line {line}: empty filename")
            suffix = Path(name).suffix
            stem = name[: -len(suffix)] if suffix.lower() in (".mp4", ".mkv", ".avi", ".mov", ".webm") else name
            try:
                value = float(values["score"])
            except ValueError:
                raise PredictionError(f"{where} line {line}: score {values['score'][:200]!r} is not a number") from None
            if not math.isfinite(value) or not LOW <= value <= HIGH:
                raise PredictionError(f"{where} line {line}: expected a score in [{LOW:g}, {HIGH:g}], got {value!r}")
            if stem in scores:
                raise PredictionError(f"{where} line {line}: {stem[:200]!r} is scored twice")
            scores[stem] = value
    except csv.Error as e:  # a field over the field-size limit, a NUL byte, an unterminated quote at the end
        line = reader.line_num
        limit = csv.field_size_limit()
        if "field larger than field limit" in str(e):
            physical = text.splitlines()[line - 1] if 0 < line <= len(text.splitlines()) else ""
            field = _long_field(physical, header or ["filename", "score"], limit)
            raise PredictionError(f"{where} line {line}, {field}: expected at most {limit} characters (a file name or a "
                                  f"score), got a longer field") from None
        raise PredictionError(f"{where} line {line}: expected CSV rows 'filename,score', got text csv cannot parse ({e})") from None
    return scores


class PEAVSMetric(MeanOfKeys):
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


def build_peavs(weights: Any, options: ModelOptions) -> PEAVSMetric:
    """PEAVS from the official ``results.csv`` given as ``weights``; :class:`ModelUnavailable` with
    :data:`REASON` when none is given (perckit cannot run PEAVS itself)."""
    if weights is None:
        raise ModelUnavailable(REASON)
    path = weights_in(local_weights(weights, "peavs"), "peavs", ["results.csv"],
                      f"models['peavs']: folder has no results.csv; {REASON}", link_error=PredictionError)
    return PEAVSMetric(load_peavs_csv(path), where=repr(str(path)))


__all__ = ["MAX_RESULTS_BYTES", "PEAVSMetric", "REASON", "build_peavs", "load_peavs_csv"]
