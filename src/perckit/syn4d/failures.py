"""Syn4D's failure policy (spec §4.3), written once: the metric (:func:`perckit.syn4d.metrics.score_sequences`)
and the file runner (:func:`perckit.syn4d.evaluate.evaluate_release`) both go through :class:`FailurePolicy`.

Strict (``strict=True``, the official ``--strict``, leaderboard mode): the first missing prediction or failing
task raises. Lax: each becomes a failure record and the run goes on; a missing prediction leaves the sequence
out of every task's means, a task error leaves it out of that task's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..errors import InputNotFoundError, PerckitError, PredictionError

T = TypeVar("T")

#: The official failure reason of a sequence without a prediction (the file runner adds the NPZ path).
MISSING_PREDICTION = "missing prediction"


class TaskFailedError(PerckitError, RuntimeError):
    """A task of a sequence failed in strict mode: the official ``RuntimeError("<sequence_id> <task> failed")``,
    whose ``__cause__`` is the error naming the field and the problem."""


def failure_reason(exc: BaseException) -> str:
    """The official failure text: ``"<ExceptionType>: <message>"``."""
    return f"{type(exc).__name__}: {exc}"


class FailurePolicy:
    """The strict / lax policy of one run; ``failures`` collects the lax records in the order they happened."""

    def __init__(self, strict: bool) -> None:
        self.strict = bool(strict)
        self.failures: list[dict] = []

    def missing(self, sequence_id: str, path: str | Path | None = None) -> None:
        """``sequence_id`` has no prediction: no row (or a row whose arrays are all ``None``) or, given ``path``,
        no NPZ file there.

        Strict: raises :class:`~perckit.errors.PredictionError` ``"<sequence_id>: missing prediction"``, or for
        a file :class:`~perckit.errors.InputNotFoundError` (a ``FileNotFoundError``) ``"missing prediction
        <path>"``, the official texts. Lax: records the task-less failure ``{"sequence_id", "reason"}``, the
        reason ``"missing prediction"`` (``"missing prediction <path>"`` for a file)."""
        reason = MISSING_PREDICTION if path is None else f"{MISSING_PREDICTION} {path}"
        if self.strict:
            if path is None:
                raise PredictionError(f"{sequence_id}: {reason}")
            raise InputNotFoundError(reason)
        self.failures.append({"sequence_id": sequence_id, "reason": reason})

    def attempt(self, sequence_id: str, task: str, score: Callable[..., T], *args: Any) -> T | None:
        """``score(*args)`` for one task of one sequence, or ``None`` when it failed in lax mode.

        As the official loop, any exception is a task failure: strict raises :class:`TaskFailedError`
        ``"<sequence_id> <task> failed"`` from it; lax records ``{"sequence_id", "task", "reason":
        "<ExceptionType>: <message>"}`` (:func:`failure_reason`)."""
        try:
            return score(*args)
        except Exception as exc:  # the official loop records any task error in lax mode
            if self.strict:
                raise TaskFailedError(f"{sequence_id} {task} failed") from exc
            self.failures.append({"sequence_id": sequence_id, "task": task, "reason": failure_reason(exc)})
            return None
