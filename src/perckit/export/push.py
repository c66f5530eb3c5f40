"""Upload an export folder to a Hub dataset repository with huggingface_hub's own folder uploads.

Rules:

- **Only the record's files.** :func:`push_export` lists the files of the chosen configs from the export's
  record (``.perckit_export.json``, read and checked by :func:`perckit.export.state.read_state`): the Parquet
  shards (a config's child configs, such as ReasonAVEdit's ``videos``, come with it: one conversion wrote
  them), then ``README.md``. The record itself is perckit's local bookkeeping and is never uploaded, nor
  is anything else in the folder (a user's notes, the ``.cache/huggingface/`` state an upload leaves): the
  upload's ``allow_patterns`` name exactly the listed files, each escaped so that ``[``, ``*`` and ``?`` in a
  name match only themselves (:func:`literal_pattern`; huggingface_hub matches with ``fnmatch``).
- **The library does the uploading.** The data files go in one call of ``HfApi.upload_folder`` (huggingface_hub
  1.20 and later with ``hf_xet``: streamed, committed in batches, retried; re-running the same call resumes
  an interrupted push, files whose content the Hub already has are not committed again) or, on an older
  huggingface_hub whose ``upload_folder`` is one commit, ``HfApi.upload_large_folder`` for a large export
  (more than :data:`LARGE_FOLDER_BYTES` bytes or :data:`LARGE_FOLDER_FILES` files, or ``large=True``), which
  keeps its resumable state under ``.cache/huggingface/`` inside the export (:func:`choose_method`).
- **The card last**, in its own commit (``HfApi.upload_file``), after every data file is on the Hub, so the
  Hub never shows a card naming files that are not there yet; an interrupted data upload leaves the previous
  card in place.
- **Never deleting.** No ``delete_patterns``: files of other configs (or anything else) on the Hub stay.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from ..errors import InputNotFoundError, ReleaseFormatError
from ..io.paths import resolve_under
from .parquet import size_text
from .state import children, read_state

CARD = "README.md"
#: above this many bytes of data files an export counts as large (see :func:`choose_method`)
LARGE_FOLDER_BYTES = 1_000_000_000
#: above this many data files an export counts as large
LARGE_FOLDER_FILES = 100
#: the huggingface_hub release whose ``upload_folder`` became the resumable, multi-commit upload (with hf_xet)
RESUMABLE_FOLDER_UPLOAD = "1.20"


@dataclass
class PushSummary:
    """What a push handed to the Hub. ``files`` are the data files given to the upload call (the library commits
    only those whose content differs from the repository's, and does not say which it skipped); ``card`` is
    uploaded after them; ``commits`` are the commit URLs the library returned (``upload_large_folder`` returns
    none)."""

    repo_id: str
    method: str
    files: list[str] = field(default_factory=list)
    card: str = CARD
    revision: str | None = None
    num_bytes: int = 0
    commits: list[str] = field(default_factory=list)


def literal_pattern(path: str) -> str:
    """An ``fnmatch`` pattern that matches exactly ``path``: ``*``, ``?`` and ``[`` are each wrapped in brackets
    (huggingface_hub's ``allow_patterns`` are ``fnmatch`` patterns matched against the whole relative path)."""
    return re.sub(r"([*?\[])", r"[\1]", path)


def _select(export_dir: Path, configs: Iterable[str] | None) -> tuple[dict, list[str], list[str]]:
    """(the record, the config names pushed, their files then README.md as repository paths) for ``configs``
    (default all) of the export, from its record (:func:`perckit.export.state.read_state`), each path checked to
    stay inside the export and name a regular file. A chosen config brings its child configs
    (:func:`perckit.export.state.children`)."""
    if not export_dir.is_dir():
        what = "a file, not a folder" if export_dir.exists() else "no such folder"
        raise InputNotFoundError(f"{str(export_dir)!r} is not a perckit export ({what}); run `perckit convert` first")
    state = read_state(export_dir)
    wanted = set(configs) if configs else set(state["configs"])
    unknown = wanted - set(state["configs"])
    if unknown:
        raise InputNotFoundError(f"config(s) {sorted(unknown)} are not in the export {str(export_dir)!r} (it has {sorted(state['configs'])})")
    wanted |= {child for name in list(wanted) for child in children(state, name)}
    names = sorted(wanted)
    files = [f for name in names for s in state["configs"][name]["splits"] for f in s["files"]]
    for rel in files + [CARD]:
        path = resolve_under(export_dir, rel, f"{str(export_dir)!r}: {rel!r}", ReleaseFormatError)
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            raise InputNotFoundError(f"{str(export_dir)!r}: expected the file {rel!r} listed in .perckit_export.json, got "
                                     "nothing (the export is incomplete); run `perckit convert` again") from None
        if not stat.S_ISREG(mode):
            raise ReleaseFormatError(f"{str(export_dir)!r}: {rel!r}: expected a regular file, got {'a folder' if stat.S_ISDIR(mode) else 'a FIFO, device or socket'}")
    return state, names, files + [CARD]


def folder_upload_resumes() -> bool:
    """True when the installed huggingface_hub's ``upload_folder`` is its resumable, multi-commit upload: release
    :data:`RESUMABLE_FOLDER_UPLOAD` or later with ``hf_xet`` available (and not disabled by ``HF_HUB_DISABLE_XET``)."""
    import huggingface_hub
    from huggingface_hub import hf_api
    from packaging.version import InvalidVersion, Version

    try:
        recent = Version(huggingface_hub.__version__) >= Version(RESUMABLE_FOLDER_UPLOAD)
    except InvalidVersion:
        return False
    is_xet_available = getattr(hf_api, "is_xet_available", None)
    return recent and callable(is_xet_available) and bool(is_xet_available())


def choose_method(num_bytes: int, num_files: int, large: bool | None = None) -> str:
    """``"upload_large_folder"`` or ``"upload_folder"``.

    The rule: an export is large when ``large`` is True, or ``large`` is None and its data files total more than
    :data:`LARGE_FOLDER_BYTES` bytes or number more than :data:`LARGE_FOLDER_FILES`. A large export goes through
    ``upload_large_folder`` only where the installed huggingface_hub has it and its ``upload_folder`` is not
    already resumable (:func:`folder_upload_resumes`; huggingface_hub 1.20 deprecated ``upload_large_folder`` for
    it and 2.0 removed it). Everything else goes through ``upload_folder``."""
    from huggingface_hub import HfApi

    is_large = large if large is not None else (num_bytes > LARGE_FOLDER_BYTES or num_files > LARGE_FOLDER_FILES)
    if is_large and hasattr(HfApi, "upload_large_folder") and not folder_upload_resumes():
        return "upload_large_folder"
    return "upload_folder"


def push_export(
    export_dir: str | Path,
    repo_id: str,
    configs: Iterable[str] | None = None,
    token: str | None = None,
    revision: str | None = None,
    private: bool | None = None,
    endpoint: str | None = None,
    log: Callable[[str], None] = print,
    large: bool | None = None,
) -> PushSummary:
    """Push the export's files of ``configs`` (default all) to the dataset repository ``repo_id`` (created if
    absent, as ``private`` when given): the data files in one upload call (:func:`choose_method`), then the card
    in its own commit. Every check of the record runs before the first Hub call. Re-running after an
    interruption resumes: the library skips what the Hub already has. Nothing on the Hub is deleted."""
    from huggingface_hub import HfApi

    export_dir = Path(export_dir)
    state, names, paths = _select(export_dir, configs)
    data = [p for p in paths if p != CARD]
    num_bytes = sum(os.stat(export_dir / rel).st_size for rel in data)
    method = choose_method(num_bytes, len(data), large)
    summary = PushSummary(repo_id, method, files=data, revision=revision, num_bytes=num_bytes)
    benchmark = state["benchmark"]
    others = sorted(set(state["configs"]) - set(names))
    if others:
        log(f"note: the card lists config(s) {', '.join(others)} too; push them as well unless they are already on the Hub")

    api = HfApi(endpoint=endpoint, token=token)
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    where = f"{repo_id}" + (f"@{revision}" if revision else "")
    patterns = [literal_pattern(p) for p in data]
    if method == "upload_large_folder":
        how = "resumable: re-run the same command after an interruption"
    elif folder_upload_resumes():
        how = "resumable, batched commits, unchanged files skipped"
    else:
        how = "one commit; install hf_xet for huggingface_hub's resumable, batched upload"
    log(f"{where}: uploading {len(data)} data file(s) ({size_text(num_bytes)}) of {', '.join(names)} with HfApi.{method} ({how})")
    infos = []  # what the commits returned (upload_large_folder reports none)
    if method == "upload_large_folder":
        api.upload_large_folder(repo_id=repo_id, folder_path=str(export_dir), repo_type="dataset", revision=revision,
                                private=private, allow_patterns=patterns)
    else:
        infos.append(api.upload_folder(repo_id=repo_id, folder_path=str(export_dir), repo_type="dataset", revision=revision,
                                       allow_patterns=patterns,
                                       commit_message=f"perckit: {benchmark} data files of {', '.join(names)}"))
    infos.append(api.upload_file(path_or_fileobj=str(export_dir / CARD), path_in_repo=CARD, repo_id=repo_id,
                                 repo_type="dataset", revision=revision, commit_message=f"perckit: {benchmark} dataset card"))
    summary.commits += [info.commit_url for info in infos if getattr(info, "commit_url", None)]
    log(f"{where}: {len(data)} data file(s) and {CARD} sent (the Hub keeps only what changed); "
        "nothing was deleted on the Hub")
    return summary
