"""SIMULATED Hugging Face Hub HTTP server: the endpoints huggingface_hub calls, on 127.0.0.1.

- `GET /api/models/{repo}[/revision/{rev}]`: model info (sha, gated, siblings with sizes
  when `blobs` is asked for), 401 RepoNotFound / 404 RevisionNotFound otherwise.
- `GET /api/models/{repo}/tree/{rev}[/{folder}][?recursive=true]`: the files (size, oid, lfs)
  and folders, as `list_repo_tree` and `snapshot_download` read them.
- `HEAD|GET /{repo}/resolve/{rev}/{file}`: the file, with `X-Repo-Commit`, `ETag` (and for
  shards `X-Linked-Etag` / `X-Linked-Size`), `Content-Length`, `Accept-Ranges`; a `Range`
  gets 206 and `Content-Range`. Gated repos answer 401 GatedRepo without a token and 403
  GatedRepo to a token without access, with the Hub's `X-Error-Code` / `X-Error-Message`.

Every request is recorded (method, path, range, whether a token came) so tests can see
what a client really asked; token values are never recorded. A slow Hub: `delay` seconds
before each answer; one that does not answer: `hold()` (until `release()` or `stop()`).
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import unquote, urlsplit

from spark_tui.sim.hub.repos import FileContent, SimulatedRepo, etag_of, size_of

_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")
_CREATED = datetime(2026, 1, 1, tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


@dataclass(frozen=True)
class SeenRequest:
    """One request the stand-in answered (no header values beyond these)."""

    method: str
    path: str
    range: str | None
    authorized: bool
    status: int


class SimulatedHub:
    """A simulated Hub on 127.0.0.1 (`endpoint` is its HF_ENDPOINT); use as a context manager."""

    def __init__(
        self, repos: list[SimulatedRepo] | None = None, port: int = 0, *, delay: float = 0.0
    ) -> None:
        self.repos: dict[str, SimulatedRepo] = {r.repo_id: r for r in repos or []}
        self.requests: list[SeenRequest] = []
        self.delay = delay
        self._answering = threading.Event()
        self._answering.set()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add(self, repo: SimulatedRepo) -> None:
        self.repos[repo.repo_id] = repo

    def hold(self) -> None:
        """Stop answering: requests are taken and left waiting (a Hub that hangs)."""
        self._answering.clear()

    def release(self) -> None:
        """Answer again, the waiting requests first."""
        self._answering.set()

    def wait_to_answer(self) -> None:
        """What a request goes through before its answer: the hold, then the delay."""
        self._answering.wait()
        if self.delay:
            time.sleep(self.delay)

    def record(self, seen: SeenRequest) -> None:
        with self._lock:
            self.requests.append(seen)

    def start(self) -> SimulatedHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> SimulatedHub:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _handler(hub: SimulatedHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "SimulatedHub/1"

        def log_message(self, format: str, *args: object) -> None:
            return  # quiet: tests read hub.requests instead

        def do_GET(self) -> None:
            self._serve(head=False)

        def do_HEAD(self) -> None:
            self._serve(head=True)

        # --- plumbing -------------------------------------------------------------------

        def _token(self) -> str | None:
            auth = self.headers.get("Authorization") or ""
            return auth[7:].strip() if auth.lower().startswith("bearer ") else None

        def _send(
            self,
            status: int,
            headers: dict[str, str],
            body: bytes = b"",
            *,
            head: bool = False,
            length: int | None = None,
        ) -> None:
            # Recorded before the answer goes out: a client that has its answer can then
            # read hub.requests without racing this thread.
            self._record(status)
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body) if length is None else length))
            self.end_headers()
            if not head and body:
                self.wfile.write(body)

        def _record(self, status: int) -> None:
            hub.record(
                SeenRequest(
                    self.command,
                    urlsplit(self.path).path,
                    self.headers.get("Range"),
                    self._token() is not None,
                    status,
                )
            )

        def _error(self, status: int, code: str, message: str, head: bool) -> None:
            body = json.dumps({"error": message}).encode()
            headers = {
                "Content-Type": "application/json",
                "X-Error-Code": code,
                "X-Error-Message": message,
            }
            self._send(status, headers, body, head=head)

        # --- routes ---------------------------------------------------------------------

        def _serve(self, head: bool) -> None:
            hub.wait_to_answer()
            path = unquote(urlsplit(self.path).path)
            tree = re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?", path)
            if tree:
                self._tree(tree.group(1), tree.group(2), tree.group(3) or "", head)
                return
            if path.startswith("/api/models/"):
                self._model_info(path.removeprefix("/api/models/"), head)
                return
            m = re.fullmatch(r"/(?:models/)?(.+?)/resolve/([^/]+)/(.+)", path)
            if m:
                self._resolve(m.group(1), m.group(2), m.group(3), head)
                return
            self._error(404, "EntryNotFound", "Not Found", head)

        def _model_info(self, rest: str, head: bool) -> None:
            repo_id, _, revision = rest.partition("/revision/")
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._error(401, "RepoNotFound", "Repository not found", head)
                return
            sha = repo.resolve(revision or None)
            if sha is None:
                self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", head)
                return
            blobs = "blobs=" in (urlsplit(self.path).query or "")
            files = repo.commits[sha]
            siblings = []
            for name, content in sorted(files.items()):
                entry: dict[str, object] = {"rfilename": name}
                if blobs:
                    entry["size"] = size_of(content)
                    entry["blobId"] = etag_of(content, name)
                    if not isinstance(content, bytes):
                        entry["lfs"] = {
                            "sha256": etag_of(content, name),
                            "size": content.size,
                            "pointerSize": 134,
                        }
                siblings.append(entry)
            doc = {
                "_id": sha[:24],
                "id": repo_id,
                "modelId": repo_id,
                "author": repo_id.split("/")[0],
                "sha": sha,
                "lastModified": _CREATED,
                "createdAt": _CREATED,
                "private": False,
                "gated": "manual" if repo.gated else False,
                "disabled": False,
                "downloads": 0,
                "likes": 0,
                "tags": ["safetensors", "simulated"],
                "library_name": "transformers",
                "siblings": siblings,
            }
            body = json.dumps(doc).encode()
            self._send(200, {"Content-Type": "application/json"}, body, head=head)

        def _tree(self, repo_id: str, revision: str, folder: str, head: bool) -> None:
            """The files and folders under `folder` (all below it with `recursive=true`), as
            the Hub's tree API lists them (one page: the Hub pages with a `Link` header)."""
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._error(401, "RepoNotFound", "Repository not found", head)
                return
            sha = repo.resolve(revision)
            if sha is None:
                self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", head)
                return
            recursive = "recursive=true" in (urlsplit(self.path).query or "").lower()
            prefix = folder.strip("/") + "/" if folder.strip("/") else ""
            entries: dict[str, dict[str, object]] = {}
            for name, content in sorted(repo.commits[sha].items()):
                if not name.startswith(prefix):
                    continue
                parts = name[len(prefix) :].split("/")
                for depth in range(1, len(parts)):
                    sub = prefix + "/".join(parts[:depth])
                    if recursive or depth == 1:
                        oid = etag_of(sub.encode(), sub)
                        entries.setdefault(
                            sub, {"type": "directory", "oid": oid, "size": 0, "path": sub}
                        )
                if len(parts) > 1 and not recursive:
                    continue
                entry: dict[str, object] = {
                    "type": "file",
                    "oid": etag_of(content, name),
                    "size": size_of(content),
                    "path": name,
                }
                if not isinstance(content, bytes):
                    entry["lfs"] = {
                        "oid": etag_of(content, name),
                        "size": content.size,
                        "pointerSize": 134,
                    }
                entries[name] = entry
            if prefix and not entries:
                self._error(404, "EntryNotFound", f"{folder} does not exist on {revision}", head)
                return
            body = json.dumps([entries[k] for k in sorted(entries)]).encode()
            self._send(200, {"Content-Type": "application/json"}, body, head=head)

        def _resolve(self, repo_id: str, revision: str, name: str, head: bool) -> None:
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._error(401, "RepoNotFound", "Repository not found", head)
                return
            token = self._token()
            if repo.gated and token is None:
                self._error(
                    401,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted. You must have access to it "
                    "and be authenticated to access it. Please log in.",
                    head,
                )
                return
            if repo.gated and token not in repo.granted:
                self._error(
                    403,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted and you are not in the "
                    "authorized list. Visit the model page to ask for access.",
                    head,
                )
                return
            sha = repo.resolve(revision)
            if sha is None:
                self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", head)
                return
            content = repo.commits[sha].get(name)
            if content is None:
                self._error(404, "EntryNotFound", f"{name} does not exist on {revision}", head)
                return
            self._file(sha, name, content, head)

        def _file(self, sha: str, name: str, content: FileContent, head: bool) -> None:
            size = size_of(content)
            etag = etag_of(content, name)
            headers = {
                "X-Repo-Commit": sha,
                "ETag": f'"{etag}"',
                "Accept-Ranges": "bytes",
                "Content-Type": "application/octet-stream",
            }
            if not isinstance(content, bytes):
                headers["X-Linked-Etag"] = f'"{etag}"'
                headers["X-Linked-Size"] = str(size)
            start, end, status = 0, size, 200
            wanted = self.headers.get("Range")
            if wanted:
                m = _RANGE.match(wanted.strip())
                if not m or (not m.group(1) and not m.group(2)):
                    self._error(416, "RangeNotSatisfiable", "bad range", head)
                    return
                if m.group(1):
                    start = int(m.group(1))
                    end = min(size, int(m.group(2)) + 1) if m.group(2) else size
                else:
                    start = max(0, size - int(m.group(2)))
                if start >= size:
                    headers["Content-Range"] = f"bytes */{size}"
                    self._error(416, "RangeNotSatisfiable", "range not satisfiable", head)
                    return
                status = 206
                headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
            self._record(status)  # before the answer (see _send)
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(end - start))
            self.end_headers()
            if not head:
                if isinstance(content, bytes):
                    self.wfile.write(content[start:end])
                else:
                    for piece in content.read(start, end):
                        self.wfile.write(piece)

    return Handler
