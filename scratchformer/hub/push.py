"""``scratchformer push MODEL REPO_ID``: export a model and upload the folder to the Hub in one commit.

The token and the endpoint come from ``HF_TOKEN`` / ``HF_ENDPOINT`` (or the stored login) unless given. Every way an
upload can fail that is the user's to fix - no token, a refused request, an unreachable Hub, offline mode - is a
:class:`HubError` that says which step failed and what to check.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from ..errors import HubError
from ..loading import is_network_error
from .destination import check_repo_id
from .export import export, require_onnx

TOKEN_HELP = ("set HF_TOKEN to a token with write access (https://huggingface.co/settings/tokens) or run "
              "`hf auth login`")
HTTP_HINTS = {401: "the token was rejected: check HF_TOKEN",
              403: "the token may not write there: use a token with write access to that namespace"}


def push(
    model_or_folder: Any,
    repo_id: str,
    tokenizer: Any = None,
    *,
    private: bool = False,
    commit_message: str | None = None,
    token: str | None = None,
    endpoint: str | None = None,
    **export_options: Any,
) -> Any:
    """Export ``model_or_folder`` (see :func:`~scratchformer.hub.export`) and upload it to ``repo_id`` in one commit.

    ``repo_id`` must be ``namespace/name``; it is checked before anything else happens, and so are the packages
    that ``onnx=True`` needs. The export is staged in a
    fresh temporary folder, which is removed afterwards. The token defaults to ``HF_TOKEN`` (or the stored
    ``hf auth login``) and the endpoint to ``HF_ENDPOINT`` (or https://huggingface.co). The repo is created if
    needed (``private`` applies only then). Returns the ``huggingface_hub.CommitInfo`` (``.commit_url``, ``.oid``).
    Raises :class:`HubError` for a bad repo id, a missing token, a refused request or an unreachable Hub.
    """
    from huggingface_hub import constants, get_token

    from .. import __version__

    check_repo_id(repo_id)
    if export_options.get("onnx"):
        require_onnx()
    endpoint = endpoint or constants.ENDPOINT
    token = token or get_token()
    if not token:
        raise HubError(f"no Hugging Face token: {TOKEN_HELP}")
    message = commit_message or f"Upload Scratchformer model, code and tokenizer (scratchformer {__version__})"
    with tempfile.TemporaryDirectory(prefix="scratchformer-push-") as tmp:
        folder = export(model_or_folder, Path(tmp) / "export", tokenizer, repo_id=repo_id, **export_options)
        return _upload(folder, repo_id, private=private, message=message, token=token, endpoint=endpoint)


def _upload(folder: Path, repo_id: str, *, private: bool, message: str, token: str, endpoint: str) -> Any:
    """Create the repo if needed and commit ``folder`` to it, naming the step that failed in the error."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    api = HfApi(endpoint=endpoint, token=token)
    step = f"creating the repository {repo_id}"
    try:
        repo = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        step = f"uploading to {repo.repo_id} (the repository exists; nothing was committed)"
        return api.upload_folder(repo_id=repo.repo_id, folder_path=folder, repo_type="model", commit_message=message)
    except OfflineModeIsEnabled as error:
        raise HubError("HF_HUB_OFFLINE is set, so uploads are disabled: unset it to push") from error
    except HfHubHTTPError as error:
        raise HubError(_refusal(error, endpoint, step)) from error
    except Exception as error:
        if not is_network_error(error):
            raise
        raise HubError(f"cannot reach the Hub at {endpoint} while {step}: {error}. Check the network connection, "
                       "proxy settings and HF_ENDPOINT") from error


def _refusal(error: Any, endpoint: str, step: str) -> str:
    """The message for an HTTP error answer: status, the server's words, and what to do about it."""
    status = error.response.status_code if error.response is not None else "?"
    server = f": {error.server_message}" if error.server_message else ""
    hint = HTTP_HINTS.get(status, "see the server message")
    return f"the Hub at {endpoint} refused {step} (HTTP {status}{server}); {hint}"

