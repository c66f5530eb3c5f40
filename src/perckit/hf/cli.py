"""The scaffold of perckit's command lines: the rules they share, each written once.

Used by ``python -m perckit`` (:mod:`perckit.__main__`) and by the drop-in command lines that take the
official scripts' syntax (``python -m perckit.syn4d.evaluate``, ``python -m
perckit.r4d_bench.evaluate_mask_temporal``, ``evaluate_track_id`` and ``evaluate_r4dgs``):

- **Which errors are reported** (:data:`HANDLED`): what perckit raises on purpose
  (:class:`~perckit.errors.PerckitError`), an ``OSError`` (a missing or unreadable file, a full disk) and a
  ``ValueError``. Anything else is a bug and keeps its traceback.
- **How** (:func:`error_line`): one line on stderr, ``error: <message>``, never a traceback.
- **With which exit code**: ``perckit`` exits 2 when the command line is wrong and 1 when the data is
  (:func:`exit_code`); a drop-in command line exits 2 on every error (:func:`drop_in_exit_code`), as it always
  has. Both exit 0 when done; argparse's own usage errors exit 2.
- **Where the report goes** (:func:`write_json`): sorted keys, indent 2, a final newline, written beside the
  target and moved into place, so a reader never sees half a report.
- **The official list syntax** (:func:`split_list`): ``--tasks tracking,depth`` and ``--tasks tracking depth``.
- **The summary and the self-check verdict** of the drop-ins that have ``--self-check`` (:func:`finish`).
- **Progress** (:func:`progress`, :func:`progress_bars`): one tqdm bar on stderr for each step that can take more than
  a few seconds, on while ``perckit`` runs without ``--quiet``; ``--quiet`` also silences datasets' and huggingface_hub's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from ..errors import InputNotFoundError, OptionError, PerckitError, ReleaseNotFoundError
from ..io.paths import write_atomic

T = TypeVar("T")

#: Exit codes: 0 done; 1 the data (a release, a prediction or results file, an I/O error) is wrong; 2 the command
#: line is wrong (argparse's own usage errors, an :class:`~perckit.errors.OptionError`, or a path named on the
#: command line that does not exist).
EXIT_OK, EXIT_DATA, EXIT_USAGE = 0, 1, 2

#: The errors a command line reports as one line (everything else is a bug: its traceback is kept).
HANDLED: tuple[type[BaseException], ...] = (PerckitError, OSError, ValueError)

#: How the offline error of :func:`perckit.hf.hub.download_release` tells the user to pass a local release: the
#: library's ``data_dir=...`` by default; ``perckit`` sets ``--data-dir ...`` while it runs.
DATA_DIR_HINT: ContextVar[str | None] = ContextVar("perckit_data_dir_hint", default=None)

#: perckit's progress bars: on while ``perckit`` runs a command without ``--quiet`` (:func:`progress_bars`), off in
#: library use. A bar appears only once its step has run :data:`BAR_DELAY` seconds: short runs and test logs stay clean.
BARS: ContextVar[bool] = ContextVar("perckit_bars", default=False)
BAR_DELAY = 2.0


def progress(iterable: Iterable[T] | None = None, desc: str = "", on: bool | None = None, **tqdm_options: Any) -> Any:
    """A tqdm bar on stderr over ``iterable`` (without one, a bar to ``update(n)``, e.g. with ``total=``) when ``on``
    (default :data:`BARS`); off, the iterable itself (tqdm is not even imported)."""
    on = BARS.get() if on is None else on
    if not on and iterable is not None:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, disable=not on, delay=BAR_DELAY, leave=False, **tqdm_options)


#: The other bars ``--quiet`` silences: (the module holding the library's switch, the switch, the environment variable
#: it reads on import; transformers reads huggingface_hub's setting on import, as sentence-transformers' models load).
LIBRARY_BARS = (("datasets.utils.tqdm", "disable_progress_bars", "HF_DATASETS_DISABLE_PROGRESS_BARS"),
                ("huggingface_hub.utils.tqdm", "disable_progress_bars", "HF_HUB_DISABLE_PROGRESS_BARS"),
                ("transformers.utils.logging", "disable_progress_bar", "HF_HUB_DISABLE_PROGRESS_BARS"))


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set for a block, then as it was (a variable that was unset is removed again)."""
    old = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def progress_bars(on: bool) -> Iterator[None]:
    """:data:`BARS` set to ``on`` for a block. Off also silences the :data:`LIBRARY_BARS`, importing nothing: through
    the library's switch when it is imported, else through its environment variable for the block (a library
    imported meanwhile stays quiet)."""
    token, variables = BARS.set(on), {}
    for module, switch, env in () if on else LIBRARY_BARS:
        if module in sys.modules:
            getattr(sys.modules[module], switch)()
        else:
            variables[env] = "1"
    try:
        with environment(variables):
            yield
    finally:
        BARS.reset(token)


def exit_code(e: BaseException) -> int:
    """``perckit``'s rule: :data:`EXIT_USAGE` for an :class:`~perckit.errors.OptionError` and for a path named on
    the command line that does not exist (an :class:`~perckit.errors.InputNotFoundError` that is not a
    :class:`~perckit.errors.ReleaseNotFoundError`), :data:`EXIT_DATA` for everything else."""
    if isinstance(e, OptionError) or (isinstance(e, InputNotFoundError) and not isinstance(e, ReleaseNotFoundError)):
        return EXIT_USAGE
    return EXIT_DATA


def drop_in_exit_code(e: BaseException) -> int:
    """The drop-in command lines' rule: :data:`EXIT_USAGE` for every error (what they have always returned)."""
    return EXIT_USAGE


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).splitlines()) or type(e).__name__


def error_line(e: BaseException) -> str:
    """``error: <message>`` on one line (the message's lines joined by spaces; the type's name when it has no
    message), followed by `` (caused by <Type>: <message>)`` when ``e`` was raised from another error whose
    text the message does not already carry (the Syn4D strict failure ``"<sequence_id> <task> failed"``)."""
    text = f"error: {_one_line(e)}"
    cause = e.__cause__
    if cause is not None and str(cause) not in str(e):
        text += f" (caused by {type(cause).__name__}: {_one_line(cause)})"
    return text


def run_guarded(
    command: Callable[[argparse.Namespace], int],
    args: argparse.Namespace,
    exit_code: Callable[[BaseException], int] = drop_in_exit_code,
) -> int:
    """``command(args)``, its exit code; a :data:`HANDLED` error is printed as :func:`error_line` on stderr and
    gives ``exit_code(error)`` (default: the drop-in rule, 2)."""
    try:
        return command(args)
    except HANDLED as e:
        print(error_line(e), file=sys.stderr)
        return exit_code(e)


def write_json(path: str | os.PathLike, obj: Any, default: Callable[[Any], Any] | None = None) -> Path:
    """Write ``obj`` as JSON (sorted keys, indent 2, a final newline) to ``path``, creating its folder; the text
    goes to a temporary file beside it first and is moved into place in one step (``os.replace``), so an
    interrupted run leaves the previous file or none, never a truncated one. ``default`` as in ``json.dumps``."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(out, json.dumps(obj, indent=2, sort_keys=True, default=default) + "\n")


def split_list(values: Sequence[str] | None) -> list[str]:
    """The official list syntax: comma-separated (``tracking,depth,pose``), space-separated (``nargs="+"``), or
    both mixed; parts are stripped and empty ones dropped (``--variants ""`` gives no part: no filter, as the
    official)."""
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


def add_query_filters(parser: argparse.ArgumentParser) -> None:
    """``--only-query-prefix`` and ``--only-queries`` (space- or comma-separated, :func:`split_list`)."""
    parser.add_argument("--only-query-prefix", help="score only queries whose id starts with this prefix")
    parser.add_argument("--only-queries", nargs="+", help="score only these query ids (space- or comma-separated)")


def predictions_or_self_check(args: argparse.Namespace, ground_truth: Callable[[], T], load: Callable[[str], T]) -> T:
    """The predictions of a drop-in with ``--self-check``: the ground truth itself (``ground_truth()``) under
    ``--self-check``, else ``load(args.predictions)``; neither given is an :class:`~perckit.errors.OptionError`."""
    if args.self_check:
        return ground_truth()
    if args.predictions:
        return load(args.predictions)
    raise OptionError("--predictions is required (or pass --self-check)")


def finish(
    report: dict, output: str | None, self_check: bool, summary_keys: Sequence[str], check_keys: Sequence[str],
    lead_keys: Sequence[str] = (),
) -> int:
    """Print the summary (one line a key, the name right-aligned in 36 columns, floats with 6 decimals), write the
    report JSON (:func:`write_json`), and in self-check mode fail (exit 1) unless every checked key is 1.0. With
    ``output``, the last line on stdout names the file written.

    ``lead_keys`` (the paper's keys, e.g. ``acc`` and ``viou``) are named first in the self-check verdict."""
    values = [(k, report.get(k)) for k in summary_keys]
    print("\n".join(f"{k:>36s}  {v:.6f}" if isinstance(v, float) else f"{k:>36s}  {v}" for k, v in values))
    if output:
        write_json(output, report)
    code = EXIT_OK
    if self_check:
        ordered = list(lead_keys) + [k for k in check_keys if k not in lead_keys]
        bad = [k for k in ordered if report[k] != 1.0]
        lead = ", ".join(f"{k} = 1.0" for k in lead_keys)
        if bad:
            print(f"self-check FAILED: {bad} are not 1.0", file=sys.stderr)
            code = EXIT_DATA
        else:
            print(f"self-check passed: {lead} and every other metric is 1.0" if lead else "self-check passed: every metric is 1.0")
    if output:
        print(f"report written to {output}")
    return code
