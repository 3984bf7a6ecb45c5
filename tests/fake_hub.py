"""A tiny Hugging Face Hub look-alike on 127.0.0.1, enough for ``create_repo`` + ``upload_folder`` and for
``from_pretrained(repo_id)`` to download what was uploaded. Tests only; it never reaches the real Hub.

It keeps repos in memory (files of the latest commit), logs every request as ``"METHOD /path"`` and can refuse
repo creation and/or commits (403, ``hub.refuse = {"create", "commit"}``) to test error handling. ``hub.drip =
{"_resolve": 0.3}`` sends the bodies of those routes one byte every 0.3 s (a Hub too slow to finish). Two hostile modes:
``hub.echo_headers = True`` puts the request's headers (``Authorization`` included) into every error message, as a
careless server or proxy does; ``hub.silent = {"_preupload", ...}`` (handler names, or ``{"*"}``) makes those
routes accept the request and never answer, until the hub stops. :func:`silent_endpoint` is a socket that accepts
connections and never reads or answers at all. It binds port 0 (a free port), handles each request in a daemon
thread, and stops by itself after ``max_seconds``; past ``max_requests`` it answers 429, in case a client loops.

Requests it answers (what huggingface_hub 2.4 and transformers 5.23 send, found by logging them):

    POST /api/repos/create                         -> {"url", "name"}; 409 if it exists (create_repo exist_ok=True)
    POST /api/validate-yaml                        README.md metadata check -> {"errors": [], "warnings": []}
    POST /api/models/{repo}/preupload/{rev}        -> every file "regular" (content inline in the commit)
    POST /api/models/{repo}/commit/{rev}           NDJSON header + base64 files -> {"commitUrl", "commitOid"}
    HEAD|GET /{repo}/resolve/{rev}/{path}          ETag, X-Repo-Commit, Content-Length (+ body for GET);
                                                   404 + X-Error-Code: EntryNotFound / RepoNotFound
    GET /api/models/{repo}[/revision/{rev}]        model info with siblings
    GET /api/models/{repo}/tree/{rev}[/{path}]     file listing
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

REPO = r"(?P<repo>[\w.-]+(?:/[\w.-]+)?)"


@dataclass
class FakeRepo:
    private: bool = False
    files: dict[str, bytes] = field(default_factory=dict)
    commits: list[dict] = field(default_factory=list)  # {"oid", "summary", "files": [paths]}

    @property
    def head(self) -> str:
        return self.commits[-1]["oid"] if self.commits else "0" * 40


class FakeHub:
    """``with FakeHub(token="hf_x") as hub: ...`` serves on ``hub.url`` until the block ends."""

    def __init__(self, token: str = "hf_fake_token", max_seconds: float = 240.0, max_requests: int = 2000):
        self.token = token
        self.repos: dict[str, FakeRepo] = {}
        self.log: list[str] = []
        self.refuse: set[str] = set()  # "create" and/or "commit": answer 403
        self.echo_headers = False  # error messages repeat the request's headers, Authorization included
        self.silent: set[str] = set()  # handler names ("_preupload", ...) or "*": accept, never answer
        self.drip: dict[str, float] = {}  # handler name ("_resolve", ...) -> seconds between the bytes of its bodies
        self._stopping = threading.Event()  # releases the handlers kept silent
        self.max_requests = max_requests
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._watchdog = threading.Timer(max_seconds, self.stop)
        self._watchdog.daemon = True
        self._stopped = False

    def start(self, timeout: float = 10.0) -> FakeHub:
        import urllib.request

        self._thread.start()
        self._watchdog.start()
        deadline = time.monotonic() + timeout
        while True:  # poll for readiness
            try:
                with urllib.request.urlopen(f"{self.url}/api/health", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"fake hub did not come up on {self.url}") from None
                time.sleep(0.05)
        with self._lock:
            self.log.clear()
        return self

    def stop(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._stopping.set()
        self._watchdog.cancel()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _make_handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    """The request handler class of one server: :class:`FakeHubHandler` bound to ``hub``."""
    return type("Handler", (FakeHubHandler,), {"hub": hub})


class UnsupportedCommit(ValueError):
    """A commit line the fake does not implement (answered 400)."""


class FakeHubHandler(BaseHTTPRequestHandler):
    """Answers one request: :data:`ROUTES` picks the method; ``hub`` is set by :func:`_make_handler`."""

    protocol_version = "HTTP/1.1"
    hub: FakeHub

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    # ------------------------------------------------------------------------------------------------ plumbing
    def _reply(self, status: int, body: bytes | dict | list = b"", headers: dict | None = None) -> None:
        """Send ``body`` (JSON for a dict or list); a HEAD request gets the headers only."""
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, str(value))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        interval = self.hub.drip.get(getattr(self, "handler_name", ""))
        if self.command == "HEAD":
            return
        if not interval:
            self.wfile.write(body)
            return
        for index in range(len(body)):  # one byte at a time: no read timeout of the client ever fires
            self.wfile.write(body[index:index + 1])
            self.wfile.flush()
            if self.hub._stopping.wait(interval):
                self.close_connection = True
                return

    def _error(self, status: int, code: str, message: str) -> None:
        if self.hub.echo_headers:  # a careless server: the credentials come back in the message
            message += f" (request headers: {dict(self.headers.items())})"
        self._reply(status, {"error": message}, {"X-Error-Code": code, "X-Error-Message": message})

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _json_body(self) -> dict:
        return json.loads(self._body() or b"{}")

    def _authorized(self) -> bool:
        """``Bearer TOKEN``, or ``Basic`` with the token as password (an endpoint ``http://user:TOKEN@host``, which
        the http client turns into this header)."""
        sent = self.headers.get("Authorization") or ""
        if sent.startswith("Basic "):
            try:
                return base64.b64decode(sent[6:]).decode().partition(":")[2] == self.hub.token
            except ValueError:
                return False
        return sent == f"Bearer {self.hub.token}"

    def _dispatch(self) -> None:
        path = unquote(urlsplit(self.path).path)
        with self.hub._lock:
            self.hub.log.append(f"{self.command} {path}")
            too_many = len(self.hub.log) > self.hub.max_requests
        if too_many:
            self._error(429, "TooManyRequests", "fake hub request budget exhausted")
            return
        try:
            self._route(path)
        except Exception as error:  # a bug in the fake must show up as a server error, not a hang
            self._error(500, "FakeHubError", f"{type(error).__name__}: {error}")

    do_GET = do_HEAD = do_POST = _dispatch

    def _route(self, path: str) -> None:
        for methods, pattern, name in ROUTES:
            match = re.fullmatch(pattern, path)
            if match and (methods is None or self.command in methods):
                self.handler_name = name
                if {name, "*"} & self.hub.silent:
                    self.hub._stopping.wait()  # the request was read; the answer never comes
                    self.close_connection = True
                    return None
                return getattr(self, name)(**match.groupdict())
        return self._error(404, "NotFound", f"fake hub has no route for {self.command} {path}")

    def _readable_repo(self, repo_id: str, rev: str) -> FakeRepo | None:
        """The repo if this request may read it at ``rev``; otherwise answer 404 and return ``None``."""
        repo = self.hub.repos.get(repo_id)
        if repo is None or (repo.private and not self._authorized()):
            self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
            return None
        if rev not in ("main", repo.head):
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return None
        return repo

    # -------------------------------------------------------------------------------------------------- routes
    def _health(self) -> None:
        self._reply(200, {"ok": True})

    def _validate_yaml(self) -> None:
        """upload_folder checks README.md's metadata: the fake accepts any."""
        if not isinstance(self._json_body().get("content"), str):
            return self._error(400, "BadRequest", "validate-yaml needs 'content'")
        return self._reply(200, {"errors": [], "warnings": []})

    def _create_repo(self) -> None:
        payload = self._json_body()
        if not self._authorized():
            return self._error(401, "Unauthorized", "Invalid credentials in Authorization header")
        if "create" in self.hub.refuse:
            return self._error(403, "Forbidden", "You don't have the rights to create a model under this namespace")
        name = payload["name"]
        repo_id = f"{payload['organization']}/{name}" if payload.get("organization") else name
        if repo_id in self.hub.repos:
            return self._reply(409, {"error": "You already created this model repo", "url": f"{self.hub.url}/{repo_id}"})
        # huggingface_hub 2.x sends "visibility"; older clients sent "private"
        private = payload.get("visibility") == "private" or payload.get("private") is True
        self.hub.repos[repo_id] = FakeRepo(private=private)
        return self._reply(200, {"url": f"{self._echoed_base()}/{repo_id}", "name": repo_id, "id": repo_id})

    def _echoed_base(self) -> str:
        """The hub's URL; with ``echo_headers``, carrying the Basic credentials the client sent, as a careless
        server builds links from what it was sent."""
        sent = self.headers.get("Authorization") or ""
        if not (self.hub.echo_headers and sent.startswith("Basic ")):
            return self.hub.url
        return self.hub.url.replace("://", f"://{base64.b64decode(sent[6:]).decode()}@", 1)

    def _preupload(self, repo: str, rev: str) -> None:
        payload = self._json_body()
        if not self._authorized() or repo not in self.hub.repos:
            return self._error(404, "RepoNotFound", f"Repository {repo} not found")
        files = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in payload["files"]]
        return self._reply(200, {"files": files, "commitOid": self.hub.repos[repo].head})

    def _commit(self, repo: str, rev: str) -> None:
        lines = [json.loads(line) for line in self._body().splitlines() if line.strip()]
        if not self._authorized() or repo not in self.hub.repos:
            return self._error(404, "RepoNotFound", f"Repository {repo} not found")
        if "commit" in self.hub.refuse:
            return self._error(403, "Forbidden", "You don't have the rights to write to this repository")
        target = self.hub.repos[repo]
        try:
            header, added = _apply_commit(target, lines)
        except UnsupportedCommit as error:
            return self._error(400, "BadRequest", str(error))
        oid = hashlib.sha1(json.dumps([target.head, header, sorted(added)]).encode()).hexdigest()
        target.commits.append({"oid": oid, "summary": header.get("summary"), "files": sorted(added)})
        return self._reply(200, {"commitUrl": f"{self._echoed_base()}/{repo}/commit/{oid}", "commitOid": oid,
                                 "pullRequestUrl": None})

    def _resolve(self, repo: str, rev: str, file: str) -> None:
        found = self._readable_repo(repo, rev)
        if found is None:
            return None
        if file not in found.files:
            return self._error(404, "EntryNotFound", f"{file} does not exist on {rev}")
        content = found.files[file]
        etag = hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()  # git blob id, like the Hub
        headers = {"ETag": f'"{etag}"', "X-Repo-Commit": found.head, "Content-Type": "application/octet-stream"}
        return self._reply(200, content, headers)

    def _info(self, repo: str, rev: str | None) -> None:
        found = self._readable_repo(repo, rev or "main")
        if found is not None:
            siblings = [{"rfilename": name, "size": len(data)} for name, data in sorted(found.files.items())]
            self._reply(200, {"id": repo, "modelId": repo, "sha": found.head, "private": found.private,
                              "siblings": siblings, "tags": [], "downloads": 0, "likes": 0})

    def _tree(self, repo: str, rev: str, sub: str | None) -> None:
        found = self._readable_repo(repo, rev)
        if found is None:
            return
        prefix = f"{sub.rstrip('/')}/" if sub else ""
        entries = [{"type": "file", "path": name, "size": len(data), "oid": hashlib.sha1(data).hexdigest()}
                   for name, data in sorted(found.files.items()) if name.startswith(prefix)]
        self._reply(200, entries)


# (methods or None for any, path pattern, handler method): the first match answers; named groups are its arguments.
ROUTES = [
    (None, r"/api/health", "_health"),
    (("POST",), r"/api/repos/create", "_create_repo"),
    (("POST",), r"/api/validate-yaml", "_validate_yaml"),
    (None, rf"/api/models/{REPO}/preupload/(?P<rev>[^/]+)", "_preupload"),
    (None, rf"/api/models/{REPO}/commit/(?P<rev>[^/]+)", "_commit"),
    (None, rf"/api/models/{REPO}/tree/(?P<rev>[^/]+)(?:/(?P<sub>.*))?", "_tree"),
    (None, rf"/api/models/{REPO}(?:/revision/(?P<rev>[^/]+))?", "_info"),
    (None, rf"/{REPO}/resolve/(?P<rev>[^/]+)/(?P<file>.+)", "_resolve"),
]


def _apply_commit(repo: FakeRepo, lines: list[dict]) -> tuple[dict, list[str]]:
    """Apply the NDJSON lines of a commit to ``repo``'s files: ``(header, paths added)``."""
    header, added = {}, []
    for line in lines:
        if line["key"] == "header":
            header = line["value"]
        elif line["key"] == "file":
            repo.files[line["value"]["path"]] = base64.b64decode(line["value"]["content"])
            added.append(line["value"]["path"])
        elif line["key"] == "deletedFile":
            repo.files.pop(line["value"]["path"], None)
        else:
            raise UnsupportedCommit(f"fake hub does not support commit key {line['key']!r}")
    return header, added


@contextmanager
def silent_endpoint(userinfo: str = "") -> Iterator[str]:
    """``http://[userinfo@]127.0.0.1:PORT`` of a socket that listens and never accepts, reads or answers: the kernel
    completes each connection, so a client connects, sends its request and waits (a network that drops answers).
    Closed when the block ends."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        yield f"http://{userinfo + '@' if userinfo else ''}127.0.0.1:{silent.getsockname()[1]}"


@contextmanager
def slow_endpoint(interval: float = 5.0, userinfo: str = "", max_seconds: float = 240.0) -> Iterator[str]:
    """``http://[userinfo@]127.0.0.1:PORT`` of a server that reads each request, then answers one byte every
    ``interval`` seconds and never finishes (a header line that never ends): a client whose read timeout is longer
    than ``interval`` waits for ever. Stops when the block ends, or drops each connection after ``max_seconds``
    (so that a test of a client that never gives up fails instead of hanging)."""
    stopping = threading.Event()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.1)

    def drip(connection: socket.socket) -> None:
        answer = b"HTTP/1.1 200 OK\r\nX-Slow: "
        with connection:
            connection.settimeout(1.0)
            try:
                connection.recv(65536)
                deadline = time.monotonic() + max_seconds
                for sent in range(10**6):
                    if stopping.is_set() or time.monotonic() > deadline:
                        return
                    connection.sendall(answer[sent:sent + 1] or b"a")
                    stopping.wait(interval)
            except OSError:  # the client gave up and closed the connection
                return

    def accept() -> None:
        while not stopping.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=drip, args=(connection,), daemon=True).start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"http://{userinfo + '@' if userinfo else ''}127.0.0.1:{server.getsockname()[1]}"
    finally:
        stopping.set()
        acceptor.join(5)
        server.close()
