"""The one error type for a user's mistakes.

Everything that is the caller's to fix - a bad option value, a missing or malformed file, a model folder that is not
one, a tokenizer that does not fit the model - raises a :class:`ScratchformerError` with a message that says what was
wrong and what to do. It subclasses ``ValueError``, so callers that catch ``ValueError`` keep working. The command
line catches this family in one place (:func:`scratchformer.cli.main`), prints ``scratchformer <command>: error:
<message>`` and exits with status 2; anything else is a bug and keeps its traceback.

The model core (:mod:`scratchformer.models`) travels with checkpoints and imports nothing of ours, so its config and
input checks raise plain ``ValueError``; the public entry points of the tooling turn those into this family.

This module imports nothing, so that the command line can use it before loading torch.
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
