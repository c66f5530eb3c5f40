"""The Hub replaced at huggingface_hub's API boundary, for push and download tests (never the network).

:class:`HubRecorder` stands in for the ``HfApi`` methods ``perckit push`` calls (``create_repo``,
``upload_folder``, ``upload_large_folder``, ``upload_file``): each call is checked against the method's
signature, recorded, and applied to an in-memory repository (``repos[(repo_id, revision)]``, path -> bytes).
Folder uploads select their files with huggingface_hub's own ``filter_repo_objects`` and default ignore
patterns, so a wrong ``allow_patterns`` uploads the wrong files and fails the test; ``delete_patterns`` is
applied too (remote files matching it are deleted), so a push that deletes something is caught.
``fail_after_files`` makes the next folder upload stop with a ``ConnectionError`` after that many files.
The calls that change nothing are recorded in ``lookups``: ``whoami`` answers ``account`` (a write token of
``student``, member of ``org``) or raises ``login_error``; ``repo_info`` answers for a repository in ``repos``
(public when its id is in ``public``, as ``create_repo`` with ``private=False`` makes it), else raises
huggingface_hub's own ``RepositoryNotFoundError``.

Downloads are faked the same way: :func:`fake_snapshot_download` stands in for
``huggingface_hub.snapshot_download`` and copies the matching files of a local folder; :func:`blob_snapshot`
lays a folder out as the Hub cache does (snapshot files linked into the repository's ``blobs/``).
"""

from __future__ import annotations

import inspect
import shutil
from fnmatch import fnmatchcase
from pathlib import Path
from types import SimpleNamespace


def _upload_large_folder_signature(self, repo_id, folder_path, *, repo_type, revision=None, private=None,
                                   allow_patterns=None, ignore_patterns=None, num_workers=None, print_report=True,
                                   print_report_every=60):
    """The signature of ``HfApi.upload_large_folder`` (huggingface_hub 0.25 to 1.x; 2.0 removed the method)."""


class HubRecorder:
    def __init__(self) -> None:
        self.repos: dict[tuple[str, str], dict[str, bytes]] = {}
        self.created: list[dict] = []
        self.calls: list[tuple[str, dict]] = []  # (method, its arguments); folder uploads add "sent": the files
        self.lookups: list[tuple[str, dict]] = []  # the calls that change nothing: whoami, repo_info
        self.fail_after_files: int | None = None
        self.account = {"type": "user", "name": "student", "orgs": [{"name": "org"}], "auth": {"accessToken": {"role": "write"}}}
        self.login_error: BaseException | None = None
        self.public: set[str] = set()

    def install(self, monkeypatch, large_folder: bool = False) -> "HubRecorder":
        """Replace the HfApi methods; ``large_folder=True`` also provides ``upload_large_folder`` (an older
        huggingface_hub), otherwise the class keeps whatever the installed release has."""
        from huggingface_hub import HfApi

        real = {name: inspect.signature(getattr(HfApi, name))
                for name in ("create_repo", "upload_folder", "upload_file", "whoami", "repo_info")}
        real["upload_large_folder"] = inspect.signature(_upload_large_folder_signature)
        hub = self

        def bound(name, api, args, kwargs) -> dict:
            arguments = real[name].bind(api, *args, **kwargs)  # a TypeError for an argument the method does not take
            arguments.apply_defaults()
            return {k: v for k, v in arguments.arguments.items() if k != "self"}

        def whoami(api, *args, **kwargs):
            hub.lookups.append(("whoami", {**bound("whoami", api, args, kwargs), "api_token": api.token}))
            if hub.login_error is not None:
                raise hub.login_error
            return hub.account

        def repo_info(api, *args, **kwargs):
            from huggingface_hub.utils import RepositoryNotFoundError

            a = bound("repo_info", api, args, kwargs)
            assert a["repo_type"] == "dataset"
            hub.lookups.append(("repo_info", a))
            if (a["repo_id"], "main") not in hub.repos:
                raise RepositoryNotFoundError("404 Client Error: Repository Not Found", response=http_response(404))
            return SimpleNamespace(id=a["repo_id"], private=a["repo_id"] not in hub.public)

        def create_repo(api, *args, **kwargs):
            a = bound("create_repo", api, args, kwargs)
            assert a["repo_type"] == "dataset" and a["exist_ok"] is True
            hub.created.append(a)
            hub.calls.append(("create_repo", a))
            if (a["repo_id"], "main") not in hub.repos and not a["private"]:
                hub.public.add(a["repo_id"])
            hub.repos.setdefault((a["repo_id"], "main"), {})
            return f"https://huggingface.co/datasets/{a['repo_id']}"

        def folder(name):
            def upload(api, *args, **kwargs):
                a = bound(name, api, args, kwargs)
                assert a["repo_type"] == "dataset"
                hub.calls.append((name, a))  # recorded before it runs: an interrupted call is a call too
                a["sent"] = []
                hub._apply_folder(a)
                return _Commit(a["repo_id"], len(hub.calls)) if name == "upload_folder" else None
            return upload

        def upload_file(api, *args, **kwargs):
            a = bound("upload_file", api, args, kwargs)
            assert a["repo_type"] == "dataset"
            hub.calls.append(("upload_file", a))
            hub._repo(a)[a["path_in_repo"]] = Path(a["path_or_fileobj"]).read_bytes()
            return _Commit(a["repo_id"], len(hub.calls))

        monkeypatch.setattr(HfApi, "whoami", whoami)
        monkeypatch.setattr(HfApi, "repo_info", repo_info)
        monkeypatch.setattr(HfApi, "create_repo", create_repo)
        monkeypatch.setattr(HfApi, "upload_folder", folder("upload_folder"))
        monkeypatch.setattr(HfApi, "upload_file", upload_file)
        if large_folder:
            monkeypatch.setattr(HfApi, "upload_large_folder", folder("upload_large_folder"), raising=False)
        return self

    def _repo(self, a: dict) -> dict[str, bytes]:
        if (a["repo_id"], "main") not in self.repos:
            raise AssertionError(f"{a['repo_id']}: uploaded to before create_repo")
        return self.repos.setdefault((a["repo_id"], a.get("revision") or "main"), {})

    def _apply_folder(self, a: dict) -> None:
        from huggingface_hub.utils import filter_repo_objects
        from huggingface_hub.utils._paths import DEFAULT_IGNORE_PATTERNS

        root = Path(a["folder_path"])
        local = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
        ignore = list(DEFAULT_IGNORE_PATTERNS) + list(a.get("ignore_patterns") or [])
        sent = list(filter_repo_objects(local, allow_patterns=a["allow_patterns"], ignore_patterns=ignore))
        repo = self._repo(a)
        for pattern in [a["delete_patterns"]] if isinstance(a.get("delete_patterns"), str) else a.get("delete_patterns") or []:
            for path in [p for p in repo if fnmatchcase(p, pattern)]:
                del repo[path]
        for i, rel in enumerate(sent):
            if self.fail_after_files is not None and i >= self.fail_after_files:
                self.fail_after_files = None
                raise ConnectionError(f"simulated interruption after {i} file(s)")
            repo[rel] = (root / rel).read_bytes()
            a["sent"].append(rel)

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


def http_response(status: int) -> SimpleNamespace:
    """The parts of an HTTP response huggingface_hub's ``HfHubHTTPError`` reads (any huggingface_hub release)."""
    return SimpleNamespace(status_code=status, headers={}, request=None)


class _Commit:
    """What ``upload_folder`` / ``upload_file`` return (the part perckit reads)."""

    def __init__(self, repo_id: str, n: int) -> None:
        self.commit_url = f"https://huggingface.co/datasets/{repo_id}/commit/{n:040x}"


def fake_snapshot_download(source, calls):
    """Stands in for ``huggingface_hub.snapshot_download`` at its boundary: filters the files of ``source``
    with huggingface_hub's own pattern matcher and copies them into a fresh snapshot folder; every call's
    arguments are appended to ``calls``."""
    from huggingface_hub.utils import filter_repo_objects

    def fake(repo_id, repo_type, revision, allow_patterns):
        calls.append({"repo_id": repo_id, "repo_type": repo_type, "allow_patterns": allow_patterns})
        files = sorted(p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file())
        dest = source.parent / f"snapshot_{len(calls)}"
        for f in filter_repo_objects(files, allow_patterns=allow_patterns):
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source / f, dest / f)
        return str(dest)

    return fake


def blob_snapshot(source, cache, repo: str = "datasets--org--export", revision: str = "0" * 40,
                  skip=(".perckit_export.json",)):
    """A ``snapshot_download``-shaped copy of the folder ``source`` in the Hub cache layout: every file stored once
    in ``<cache>/<repo>/blobs/<sha256>`` and linked from ``<cache>/<repo>/snapshots/<revision>/<path>`` (relative
    links, as huggingface_hub makes them); the names in ``skip`` (the local record, which ``perckit push`` never
    uploads) are left out. Returns the snapshot folder."""
    import hashlib
    import os

    source, cache = Path(source), Path(cache)
    blobs = cache / repo / "blobs"
    snapshot = cache / repo / "snapshots" / revision
    blobs.mkdir(parents=True, exist_ok=True)
    for f in sorted(p for p in source.rglob("*") if p.is_file()):
        rel = f.relative_to(source)
        if rel.as_posix() in skip:
            continue
        data = f.read_bytes()
        blob = blobs / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    return snapshot
