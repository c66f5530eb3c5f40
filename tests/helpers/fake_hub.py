"""A minimal in-process Hub on 127.0.0.1: just the HTTP endpoints ``create_repo``, ``list_repo_tree``
and ``create_commit`` (regular uploads) use, so push tests exercise huggingface_hub itself and replace
only the network. Files are stored in memory; ``fail_after_commits`` simulates an interruption.

Downloads are faked one level up instead: :func:`fake_snapshot_download` stands in for
``huggingface_hub.snapshot_download`` and copies the matching files of a local folder.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, dict[str, bytes]] = {}
        self.commits: list[list[str]] = []
        self.requests: list[tuple[str, str]] = []
        self.fail_after_commits: int | None = None
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _json(self, code: int, obj) -> None:
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _body(self) -> bytes:
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def do_POST(self):  # noqa: N802
                path = urlparse(self.path).path
                hub.requests.append(("POST", path))
                body = self._body()
                if path == "/api/repos/create":
                    req = json.loads(body)
                    repo = f"{req['organization']}/{req['name']}" if req.get("organization") else req["name"]
                    if repo in hub.repos:
                        return self._json(409, {"error": "You already created this dataset repo", "url": f"{hub.endpoint}/datasets/{repo}"})
                    hub.repos[repo] = {}
                    return self._json(200, {"url": f"{hub.endpoint}/datasets/{repo}", "name": repo})
                if path == "/api/validate-yaml":
                    import yaml

                    content = json.loads(body)["content"]
                    front = content.split("---")[1] if content.startswith("---") else ""
                    try:
                        yaml.safe_load(front)
                    except yaml.YAMLError as e:
                        return self._json(400, {"error": f"Invalid metadata in README.md.\n- {e}"})
                    return self._json(200, {"errors": [], "warnings": []})
                parts = path.split("/")
                # /api/datasets/{org}/{name}/preupload/{rev} and /commit/{rev}
                if len(parts) >= 7 and parts[1] == "api" and parts[2] == "datasets":
                    repo = f"{parts[3]}/{parts[4]}"
                    if repo not in hub.repos:
                        return self._json(404, {"error": "Repository not found"})
                    if parts[5] == "preupload":
                        files = json.loads(body)["files"]
                        return self._json(200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]})
                    if parts[5] == "commit":
                        if hub.fail_after_commits is not None and len(hub.commits) >= hub.fail_after_commits:
                            return self._json(500, {"error": "simulated interruption"})
                        written = []
                        for line in body.decode().splitlines():
                            item = json.loads(line)
                            if item["key"] == "file":
                                v = item["value"]
                                hub.repos[repo][v["path"]] = base64.b64decode(v["content"])
                                written.append(v["path"])
                            elif item["key"] in ("lfsFile", "deletedFile", "deletedFolder"):
                                return self._json(400, {"error": f"fake hub does not support {item['key']}"})
                        hub.commits.append(written)
                        oid = hashlib.sha1(repr(written).encode()).hexdigest()
                        return self._json(200, {"commitUrl": f"{hub.endpoint}/datasets/{repo}/commit/{oid}", "commitOid": oid, "pullRequestUrl": None})
                return self._json(404, {"error": f"not implemented: POST {path}"})

            def do_GET(self):  # noqa: N802
                url = urlparse(self.path)
                path = unquote(url.path)
                hub.requests.append(("GET", path))
                parts = path.split("/")
                if len(parts) >= 7 and parts[1] == "api" and parts[2] == "datasets" and parts[5] == "tree":
                    repo = f"{parts[3]}/{parts[4]}"
                    if repo not in hub.repos:
                        return self._json(404, {"error": "Repository not found"})
                    prefix = "/".join(parts[7:]).strip("/")
                    items = []
                    for p, data in sorted(hub.repos[repo].items()):
                        if prefix and not p.startswith(prefix + "/"):
                            continue
                        items.append({"type": "file", "path": p, "size": len(data), "oid": _blob_id(data)})
                    return self._json(200, items)
                return self._json(404, {"error": f"not implemented: GET {path}"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeHub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


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
