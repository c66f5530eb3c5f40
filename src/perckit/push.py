"""Upload an export folder to a Hub dataset repository: idempotent, resumable, never deleting.

Each Parquet shard that is missing on the Hub (or differs from the local file) is committed on its
own, then the dataset card, so an interrupted push leaves only whole shards behind and a re-run
uploads just what is still missing. Files of other configs on the Hub are never touched.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from huggingface_hub import CommitOperationAdd, HfApi

from .errors import InputNotFoundError


@dataclass
class PushSummary:
    repo_id: str
    uploaded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a file's content (what the Hub reports as ``blob_id`` for non-LFS files)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _remote_state(api: HfApi, repo_id: str, revision: str | None) -> dict[str, tuple[str | None, str | None]]:
    """``{path: (blob_id, lfs sha256)}`` of every file in the repository."""
    out: dict[str, tuple[str | None, str | None]] = {}
    for item in api.list_repo_tree(repo_id, repo_type="dataset", revision=revision, recursive=True):
        if getattr(item, "blob_id", None) is None and not hasattr(item, "lfs"):
            continue  # a folder
        lfs = getattr(item, "lfs", None)
        sha256 = lfs.sha256 if lfs is not None else None
        out[item.path] = (getattr(item, "blob_id", None), sha256)
    return out


def _same(local: Path, remote: tuple[str | None, str | None]) -> bool:
    """The local file has the Hub file's content (hashed in 16 MiB chunks: shards can be large)."""
    blob_id, sha256 = remote
    size = local.stat().st_size
    h = hashlib.sha256() if sha256 else hashlib.sha1(b"blob %d\0" % size)
    with open(local, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    return h.hexdigest() == (sha256 or blob_id)


def files_to_push(export_dir: Path, configs: Iterable[str] | None = None) -> list[str]:
    """The export's Parquet shards (of ``configs``, default all) then README.md, as repository paths.

    The list comes from the export's record, read and checked by :func:`perckit.export_state.read_state` (the
    reader ``convert`` uses): every path stays inside the export (no ``..``, no absolute path, no symbolic link
    out of it) and names a regular file, so a planted record cannot upload a file from elsewhere."""
    import stat

    from .errors import ReleaseFormatError
    from .export_state import read_state
    from .paths import resolve_under

    export_dir = Path(export_dir)
    if not export_dir.is_dir():
        what = "a file, not a folder" if export_dir.exists() else "no such folder"
        raise InputNotFoundError(f"{str(export_dir)!r} is not a perckit export ({what}); run `perckit convert` first")
    state = read_state(export_dir)
    wanted = set(configs) if configs else set(state["configs"])
    unknown = wanted - set(state["configs"])
    if unknown:
        raise InputNotFoundError(f"config(s) {sorted(unknown)} are not in the export {str(export_dir)!r} (it has {sorted(state['configs'])})")
    files = [f for name in sorted(wanted) for s in state["configs"][name]["splits"] for f in s["files"]]
    for rel in files + ["README.md"]:
        path = resolve_under(export_dir, rel, f"{str(export_dir)!r}: {rel!r}", ReleaseFormatError)
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            raise InputNotFoundError(f"{str(export_dir)!r}: expected the file {rel!r} listed in .perckit_export.json, got "
                                     "nothing (the export is incomplete); run `perckit convert` again") from None
        if not stat.S_ISREG(mode):
            raise ReleaseFormatError(f"{str(export_dir)!r}: {rel!r}: expected a regular file, got {'a folder' if stat.S_ISDIR(mode) else 'a FIFO, device or socket'}")
    return files + ["README.md"]


def push_export(
    export_dir: str | Path,
    repo_id: str,
    configs: Iterable[str] | None = None,
    token: str | None = None,
    revision: str | None = None,
    private: bool | None = None,
    endpoint: str | None = None,
    log: Callable[[str], None] = print,
) -> PushSummary:
    """Push an export folder; only files absent or different on the Hub are committed (one commit each)."""
    export_dir = Path(export_dir)
    paths = files_to_push(export_dir, configs)
    api = HfApi(endpoint=endpoint, token=token)
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    remote = _remote_state(api, repo_id, revision)
    summary = PushSummary(repo_id)
    for rel in paths:
        local = export_dir / rel
        if rel in remote and _same(local, remote[rel]):
            summary.skipped.append(rel)
            continue
        api.create_commit(
            repo_id=repo_id, repo_type="dataset", revision=revision,
            operations=[CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(local))],
            commit_message=f"perckit: upload {rel}",
        )
        summary.uploaded.append(rel)
        log(f"uploaded {rel}")
    log(f"{repo_id}: {len(summary.uploaded)} file(s) uploaded, {len(summary.skipped)} already up to date")
    return summary
