"""Upload an export folder to a Hub dataset repository: idempotent, resumable, never deleting.

Each Parquet shard that is missing on the Hub (or differs from the local file) is committed on its
own, then the dataset card, so an interrupted push leaves only whole shards behind and a re-run
uploads just what is still missing. Files of other configs on the Hub are never touched.
"""

from __future__ import annotations

import hashlib
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
    data = local.read_bytes()
    blob_id, sha256 = remote
    if sha256:
        return hashlib.sha256(data).hexdigest() == sha256
    return blob_id == git_blob_sha1(data)


def files_to_push(export_dir: Path, configs: Iterable[str] | None = None) -> list[str]:
    """The export's Parquet shards (of ``configs``, default all) then README.md, as repository paths."""
    import json

    state_file = export_dir / ".perckit_export.json"
    if not state_file.is_file():
        raise InputNotFoundError(f"{str(export_dir)!r} is not a perckit export (no .perckit_export.json); run `perckit convert` first")
    state = json.loads(state_file.read_text(encoding="utf-8"))
    wanted = set(configs) if configs else set(state["configs"])
    unknown = wanted - set(state["configs"])
    if unknown:
        raise InputNotFoundError(f"config(s) {sorted(unknown)} are not in the export {str(export_dir)!r} (it has {sorted(state['configs'])})")
    files = [f for name in sorted(wanted) for s in state["configs"][name]["splits"] for f in s["files"]]
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
