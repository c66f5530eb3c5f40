"""Fetching a release from its Hub repository, only the files a config needs."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from huggingface_hub import snapshot_download

from ..errors import ReleaseNotFoundError
from .cli import DATA_DIR_HINT


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
        hint = DATA_DIR_HINT.get()
        how = (
            f"pass {hint} (the release root)" if hint else
            f"pass data_dir=<release root>, e.g. perckit.load_dataset({Path(builder_path).name!r}, data_dir='/path/to/release') "
            f"or load_dataset({builder_path!r}, data_dir='/path/to/release', trust_remote_code=True) on datasets 3.6, "
            "or another repository with repo_id=..."
        )
        raise ReleaseNotFoundError(
            f"could not download the {benchmark} release from the Hub dataset repository {repo_id!r} "
            f"({type(e).__name__}: {e}). Without network access, copy the release to this machine and {how}"
        ) from e
    return Path(path)
