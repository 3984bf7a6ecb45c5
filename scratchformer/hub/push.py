"""``scratchformer push MODEL REPO_ID``: export a model and upload the folder to the Hub in one commit, with no
secret in the output and every request and the whole upload bounded in time (docs/hub.md, "Push").
"""

from __future__ import annotations

import socket
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from .. import files
from ..errors import HubError, no_secrets, one_line
from ..loading import describe_limit, is_network_error, redact, transfer_limit, within
from .destination import check_repo_id
from .export import export, require_onnx

TOKEN_HELP = ("set HF_TOKEN to a token with write access (https://huggingface.co/settings/tokens) or run "
              "`hf auth login`")
# seconds a Hub request may take to connect, and to make progress in each read or write once connected
CONNECT_TIMEOUT = 10.0
REQUEST_TIMEOUT = 20.0
# how long an upload past its time limit (loading.transfer_limit) has to stop, once its connections are shut
STOP_GRACE = 10.0
HTTP_HINTS = {401: "the token was rejected: check HF_TOKEN",
              403: "the token may not write there: use a token with write access to that namespace"}


def push(model_or_folder: Any, repo_id: str, tokenizer: Any = None, *, private: bool = False,
         commit_message: str | None = None, token: str | None = None, endpoint: str | None = None,
         **export_options: Any) -> Any:
    """Export ``model_or_folder`` and upload it to ``repo_id`` in one commit; returns the ``CommitInfo``."""
    from huggingface_hub import constants, get_token

    from .. import __version__

    check_repo_id(repo_id)  # before the staging folder is made
    if export_options.get("onnx"):
        require_onnx()  # before the token is looked for
    endpoint = endpoint or constants.ENDPOINT
    token = token or get_token()
    if not token:
        raise HubError(f"no Hugging Face token: {TOKEN_HELP}")
    message = commit_message or f"Upload Scratchformer model, code and tokenizer (scratchformer {__version__})"
    # SIGTERM and SIGHUP end the block like Ctrl-C, so that the staged export (22 MB for the shipped model) goes too
    with files.signals_end_the_block(), tempfile.TemporaryDirectory(prefix="scratchformer-push-") as tmp:
        folder = export(model_or_folder, Path(tmp) / "export", tokenizer, repo_id=repo_id, **export_options)
        size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
        limit, connections = transfer_limit(size), Connections()
        with no_secrets(token), _bounded_requests(connections):
            try:
                return within(limit, lambda: _upload(folder, repo_id, private=private, message=message, token=token,
                                                     endpoint=endpoint), stop=connections.stop, grace=STOP_GRACE)
            except TimeoutError:
                raise HubError(redact(
                    f"the push to the Hub at {endpoint} did not finish within its time limit of "
                    f"{describe_limit(limit)}: the Hub answers too slowly or not at all. Check the network "
                    f"connection, proxy settings and HF_ENDPOINT, and look at the repository {repo_id} before pushing "
                    "again", token)) from None


def _upload(folder: Path, repo_id: str, *, private: bool, message: str, token: str, endpoint: str) -> Any:
    """Create the repo if needed and commit ``folder`` to it, naming the step that failed in the error (redacted)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi(endpoint=endpoint, token=token)
    step = f"creating the repository {repo_id}"
    try:
        repo = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        step = f"uploading to {repo.repo_id} (the repository exists; nothing was committed)"
        return api.upload_folder(repo_id=repo.repo_id, folder_path=folder, repo_type="model", commit_message=message)
    except HfHubHTTPError as error:
        raise HubError(redact(_refusal(error, endpoint, step), token)) from None
    except Exception as error:
        if not is_network_error(error):
            raise
        reason = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        raise HubError(redact(f"cannot reach the Hub at {endpoint} while {step} ({reason}; each request may take "
                              f"{CONNECT_TIMEOUT:g} s to connect and {REQUEST_TIMEOUT:g} s to answer). Check the "
                              "network connection, proxy settings and HF_ENDPOINT", token)) from None


def _refusal(error: Any, endpoint: str, step: str) -> str:
    """The message for an HTTP error answer: status, the server's words (one line), and what to do about it."""
    status = error.response.status_code if error.response is not None else "?"
    server = f": {one_line(error.server_message)}" if error.server_message else ""
    hint = HTTP_HINTS.get(status, "see the server message")
    return f"the Hub at {endpoint} refused {step} (HTTP {status}{server}); {hint}"


class Connections:
    """The connections of a push, seen through the http client's hook, so that :meth:`stop` can shut them."""

    def __init__(self) -> None:
        self.stopped = False
        self._sockets: list[Any] = []

    def stop(self) -> None:
        """Refuse every further request and shut the connections, which wakes a request waiting on a slow server."""
        self.stopped = True
        for connection in list(self._sockets):
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def on_request(self, request: Any) -> None:
        """Refuse a request once stopped (a ``HubError``, which huggingface_hub does not retry); else note the socket
        of each new connection (the http core's ``trace`` extension)."""
        if self.stopped:
            raise HubError("the upload's time limit has passed")
        earlier = request.extensions.get("trace")

        def trace(event: str, info: dict) -> Any:
            if event.endswith("connect_tcp.complete") and info.get("return_value") is not None:
                connection = info["return_value"].get_extra_info("socket")
                if connection is not None:
                    self._sockets.append(connection)
            return earlier(event, info) if earlier is not None else None

        request.extensions["trace"] = trace


@contextmanager
def _bounded_requests(connections: Connections) -> Iterator[None]:
    """While the block runs, huggingface_hub's http client has timeouts and ``connections``' hook."""
    from huggingface_hub import set_client_factory
    from huggingface_hub.utils import _http

    previous: Callable[[], Any] = getattr(_http, "_GLOBAL_CLIENT_FACTORY", None) or _http.default_client_factory

    def bounded_client() -> Any:
        client = previous()
        client.timeout = type(client.timeout)(REQUEST_TIMEOUT, connect=CONNECT_TIMEOUT)
        client.event_hooks = {**client.event_hooks,
                              "request": [*client.event_hooks.get("request", []), connections.on_request]}
        return client

    set_client_factory(bounded_client)
    try:
        yield
    finally:
        set_client_factory(previous)

