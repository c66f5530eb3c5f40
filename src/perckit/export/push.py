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
- **Safe by default.** The login checked before any conversion (:func:`check_account`, run by the CLI); the repository
  private unless ``public``, and public only when :func:`check_public` allows; every Hub failure one
  :class:`~perckit.errors.HubError` line (:func:`perckit.hf.hub.hub_errors`).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from ..errors import HubError, InputNotFoundError, OptionError, ReleaseFormatError
from ..hf.hub import hub_errors
from ..io.paths import resolve_under
from .card import builder_card_metadata
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
    only those whose content differs from the repository's, and does not say which it skipped); the card is
    uploaded after them; ``commits`` are the commit URLs the library returned (``upload_large_folder`` returns
    none); ``private``: the repository's visibility (an existing one keeps its own)."""

    repo_id: str
    method: str
    files: list[str] = field(default_factory=list)
    revision: str | None = None
    num_bytes: int = 0
    commits: list[str] = field(default_factory=list)
    private: bool = True


def literal_pattern(path: str) -> str:
    """An ``fnmatch`` pattern that matches exactly ``path``: ``*``, ``?`` and ``[`` are each wrapped in brackets
    (huggingface_hub's ``allow_patterns`` are ``fnmatch`` patterns matched against the whole relative path)."""
    return re.sub(r"([*?\[])", r"[\1]", path)


def _select(export_dir: Path, configs: Iterable[str] | None) -> tuple[dict, list[str], list[str]]:
    """(the record, the config names pushed, their data files as repository paths) for ``configs``
    (default all) of the export, from its record (:func:`perckit.export.state.read_state`), each path checked to
    stay inside the export and name a regular file, as must README.md. A chosen config brings its child configs
    (:func:`perckit.export.state.children`)."""
    state = read_state(export_dir)  # an InputNotFoundError for a folder that is not an export, or no folder
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
    return state, names, files


def folder_upload_resumes() -> bool:
    """True when the installed huggingface_hub's ``upload_folder`` is its resumable, multi-commit upload: release
    :data:`RESUMABLE_FOLDER_UPLOAD` or later with ``hf_xet`` available (and not disabled by ``HF_HUB_DISABLE_XET``)."""
    from huggingface_hub import __version__, hf_api
    from packaging.version import InvalidVersion, Version

    try:
        recent = Version(__version__) >= Version(RESUMABLE_FOLDER_UPLOAD)
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


def check_public(benchmark: str, public: bool, may_redistribute: bool) -> None:
    """The rule of a public push: an :class:`~perckit.errors.OptionError` naming the licence of ``benchmark`` (its
    packaged builder card's, :func:`builder_card_metadata`) when it is ``other`` (research-only terms, or none
    published: ``license_name`` says which) or ``unknown``, unless ``may_redistribute``. A Hub licence id grants it."""
    meta = builder_card_metadata(benchmark)
    if public and not may_redistribute and meta["license"] in ("other", "unknown"):
        terms = ", ".join(meta[k] for k in ("license_name", "license_link") if meta.get(k))
        raise OptionError(f"--public: the {benchmark} licence is {meta['license']!r} ({terms}), which does not grant "
                          "redistribution; push it private (leave out --public), or add --i-may-redistribute if its "
                          "owners allow you to publish it")


def check_account(repo_id: str, token: str | None = None, endpoint: str | None = None) -> None:
    """The login (``HfApi.whoami`` with ``token``, else the one huggingface_hub finds; none, refused or the Hub not
    reached: :func:`perckit.hf.hub.hub_errors`), then: a read-only token is a :class:`~perckit.errors.HubError`, a
    ``repo_id`` namespace that is not the account or one of its organisations an :class:`~perckit.errors.OptionError`."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint, token=token)
    with hub_errors(f"checking the Hub login for {repo_id}", api.endpoint):
        me = api.whoami()
    name, orgs = me.get("name"), sorted(str(org.get("name")) for org in me.get("orgs") or [])
    if ((me.get("auth") or {}).get("accessToken") or {}).get("role") == "read":
        raise HubError(f"the Hub token of {name!r} is read-only; log in with a write token (`hf auth login`) or pass --token")
    namespace, _, rest = repo_id.rpartition("/")
    if name and namespace and namespace not in [name, *orgs]:
        raise OptionError(f"--repo-id {repo_id!r}: expected a repository of {name!r} or of its organisations {orgs}, got "
                          f"one of {namespace!r}, where its token cannot write; push to {name}/{rest} instead")


def push_export(
    export_dir: str | Path,
    repo_id: str,
    configs: Iterable[str] | None = None,
    token: str | None = None,
    revision: str | None = None,
    public: bool = False,
    endpoint: str | None = None,
    log: Callable[[str], None] = print,
    large: bool | None = None,
    may_redistribute: bool = False,
) -> PushSummary:
    """Push the export's files of ``configs`` (default all) to the dataset repository ``repo_id``, private unless
    ``public`` (:func:`check_public`; an existing public one only when ``public``): the data files in one upload call
    (:func:`choose_method`), then the card in its own commit. The record and the licence are checked before the first
    Hub call (the login: :func:`check_account`, which the CLI runs before it converts). Re-running after an
    interruption resumes: the library skips what the Hub already has. Nothing on the Hub is deleted."""
    from huggingface_hub import HfApi

    export_dir = Path(export_dir)
    state, names, data = _select(export_dir, configs)
    benchmark = state["benchmark"]
    check_public(benchmark, public, may_redistribute)
    num_bytes = sum(os.stat(export_dir / rel).st_size for rel in data)
    method = choose_method(num_bytes, len(data), large)
    summary = PushSummary(repo_id, method, files=data, revision=revision, num_bytes=num_bytes)
    others = sorted(set(state["configs"]) - set(names))
    if others:
        log(f"note: the card lists config(s) {', '.join(others)} too; push them as well unless they are already on the Hub")

    api = HfApi(endpoint=endpoint, token=token)
    where = f"{repo_id}" + (f"@{revision}" if revision else "")
    with hub_errors(f"pushing to {where}", api.endpoint):
        api.create_repo(repo_id, repo_type="dataset", private=not public, exist_ok=True)
        summary.private = api.repo_info(repo_id, repo_type="dataset").private  # an existing one keeps its visibility
        if not summary.private and not public:
            raise OptionError(f"--repo-id {repo_id!r}: expected a private or new repository, got a public one; "
                              "pass --public to push to it (the licence check applies)")
        how = ("resumable: re-run the same command after an interruption" if method == "upload_large_folder" else
               "resumable, batched commits, unchanged files skipped" if folder_upload_resumes() else
               "one commit; install hf_xet for huggingface_hub's resumable, batched upload")
        log(f"{where}: uploading {len(data)} data file(s) ({size_text(num_bytes)}) of {', '.join(names)} with "
            f"HfApi.{method} ({how})")
        own = ({"private": not public} if method == "upload_large_folder"  # upload_large_folder returns no commit
               else {"commit_message": f"perckit: {benchmark} data files of {', '.join(names)}"})
        infos = [getattr(api, method)(repo_id=repo_id, folder_path=str(export_dir), repo_type="dataset", revision=revision,
                                      allow_patterns=[literal_pattern(p) for p in data], **own)]
        infos.append(api.upload_file(path_or_fileobj=str(export_dir / CARD), path_in_repo=CARD, repo_id=repo_id,
                                     repo_type="dataset", revision=revision, commit_message=f"perckit: {benchmark} dataset card"))
    summary.commits += [info.commit_url for info in infos if getattr(info, "commit_url", None)]
    log(f"{where}: {len(data)} data file(s) and {CARD} sent to the {'private' if summary.private else 'public'} dataset "
        f"repository (the Hub keeps only what changed); nothing was deleted on the Hub; the export stays in {export_dir}")
    return summary
