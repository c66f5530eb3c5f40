"""Fetching a release from its Hub repository, only the files a config needs; Hub failures as one line."""

from __future__ import annotations

import traceback
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Iterator, Sequence

from huggingface_hub import snapshot_download

from ..errors import HubError, ReleaseNotFoundError

#: How the offline error tells the user to pass a local release: the library's ``data_dir=...`` by default; the
#: command line sets ``--data-dir ...`` while it runs.
DATA_DIR_HINT: ContextVar[str | None] = ContextVar("perckit_data_dir_hint", default=None)


def download_release(
    repo_id: str,
    allow_patterns: Sequence[str],
    revision: str | None = None,
    benchmark: str = "release",
    builder_path: str = "builders/<name>",
) -> Path:
    """Download the files of ``repo_id`` (a dataset repo) that match ``allow_patterns``; return the local root. Any
    failure (offline, unknown repo, gated repo) becomes a :class:`ReleaseNotFoundError` saying how to pass ``data_dir``."""
    try:
        path = snapshot_download(repo_id=repo_id, repo_type="dataset", revision=revision, allow_patterns=list(allow_patterns))
    except Exception as e:  # huggingface_hub raises many types (HTTP, offline, auth): all end here
        hint = DATA_DIR_HINT.get()
        how = (f"pass {hint} (the release root)" if hint else
               f"pass data_dir=<release root>, e.g. perckit.load_dataset({Path(builder_path).name!r}, "
               f"data_dir='/path/to/release') or load_dataset({builder_path!r}, data_dir='/path/to/release', "
               "trust_remote_code=True) on datasets 3.6, or another repository with repo_id=...")
        raise ReleaseNotFoundError(f"could not download the {benchmark} release from the Hub dataset repository {repo_id!r} "
                                   f"({type(e).__name__}: {e}). Without network access, copy the release to this machine "
                                   f"and {how}") from e
    return Path(path)


#: The HTTP clients huggingface_hub has used: their errors mean the Hub was not reached (offline, DNS, a timeout).
HTTP_CLIENTS = ("requests", "urllib3", "httpx", "httpcore", "httpx2")
LOGIN_HINT = "log in with `hf auth login` (a token with write access) or pass --token"


@contextmanager
def hub_errors(doing: str, endpoint: str) -> Iterator[None]:
    """Run the Hub calls of ``doing``; an error of the Hub (a ``ConnectionError`` or ``TimeoutError``, or one whose
    class, or code it passed through, is of huggingface_hub, hf_xet or :data:`HTTP_CLIENTS`) becomes one
    :class:`~perckit.errors.HubError` line naming ``endpoint``: no token or a refused one (HTTP 401) says how to log
    in, another HTTP answer gives its status and words. Other errors (perckit's own, a bug) pass through."""
    try:
        yield
    except Exception as e:
        package = type(e).__module__.partition(".")[0]
        frames = [frame.f_globals.get("__name__", "").partition(".")[0] for frame, _ in traceback.walk_tb(e.__traceback__)]
        network = isinstance(e, (ConnectionError, TimeoutError)) or package in HTTP_CLIENTS
        if not network and not {package, *frames} & {"huggingface_hub", "hf_xet", *HTTP_CLIENTS}:
            raise
        status = getattr(getattr(e, "response", None), "status_code", None)
        words = f"{type(e).__name__}: " + " ".join(str(getattr(e, "server_message", None) or e).split())[:300]
        if status == 401 or type(e).__name__ == "LocalTokenNotFoundError":
            what = f"{'refused the token (HTTP 401)' if status else 'has no login here (no token found)'}; {LOGIN_HINT}"
        elif status:
            what = f"answered HTTP {status} ({words})" + ("; the token may not write there" if status == 403 else "")
        elif network:
            what = f"could not be reached ({words}); check the network connection (offline? a proxy? HF_HUB_OFFLINE?) and retry"
        else:
            what = f"did not take the call ({words})"
        raise HubError(f"{doing}: the Hub at {endpoint} {what}") from None
