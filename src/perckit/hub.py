"""Fetching a release from its Hub repository, only the files a config needs."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from huggingface_hub import snapshot_download

from .errors import ReleaseNotFoundError


def download_release(
    repo_id: str,
    allow_patterns: Sequence[str],
    revision: str | None = None,
    benchmark: str = "release",
    builder_path: str = "builders/<name>",
) -> Path:
    """Download the files of ``repo_id`` (a dataset repo) that match ``allow_patterns``; return the local root.

    Any failure (offline, unknown repo, gated repo) becomes a
    :class:`ReleaseNotFoundError` that says how to pass ``data_dir`` instead.
    """
    try:
        path = snapshot_download(
            repo_id=repo_id, repo_type="dataset", revision=revision, allow_patterns=list(allow_patterns)
        )
    except Exception as e:  # huggingface_hub raises many types (HTTP, offline, auth): all end here
        raise ReleaseNotFoundError(
            f"could not download the {benchmark} release from the Hub dataset repository {repo_id!r} "
            f"({type(e).__name__}: {e}). Without network access, copy the release to this machine and pass "
            f"data_dir=<release root>, e.g. load_dataset({builder_path!r}, data_dir='/path/to/release', "
            "trust_remote_code=True), or another repository with repo_id=..."
        ) from e
    return Path(path)
