"""The ``scratchformer`` command line: one module per subcommand (nothing heavy imported at module level, so
``--help`` is fast), and one way to fail: :func:`main` turns a ``ScratchformerError`` into one line and exit status 2
(docs/architecture.md, "One way to fail").
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Iterator

from .. import __version__
from ..errors import ScratchformerError, one_line, require

# Modules providing ``add_subcommand(subparsers)``, in the order they appear in ``--help``.
COMMANDS = ["info", "compare", "senses", "geometry", "train", "train_tokenizer", "export", "push"]

EXIT_USER_ERROR = 2  # argparse's own status for a bad command line


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows every option's default (argparse's ``%(default)s``), except where there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, argparse.SUPPRESS) or "%(default)" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def add_command(subparsers: argparse._SubParsersAction, name: str, help: str, description: str | None = None,
                ) -> argparse.ArgumentParser:
    """A subcommand parser with the house formatter (defaults shown)."""
    return subparsers.add_parser(name, help=help, description=description or help, formatter_class=HelpFormatter)


def model_help(what: str) -> str:
    """The ``--model`` help of the analysis commands: what it adds, and every alias the one loader knows."""
    from ..loading import ALIASES

    return (f"{what}: a folder saved with save_pretrained, a Hub id, or an alias ({', '.join(ALIASES)}: small = our "
            "shipped checkpoint, minilm = the reference BERT all-MiniLM-L6-v2); repeatable")


def seed(text: str) -> int:
    """An argparse type: a seed numpy takes (``--seed -1`` ended in numpy's traceback)."""
    value = int(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be in [0, 2**32 - 1] (the seeds numpy takes), got {value}")
    return value


def checked_models(models: list[str] | None, defaults: bool) -> list[str]:
    """The models an analysis command runs (:func:`~scratchformer.loading.study_models`), each found before any
    loads, so that a typo ends the command in a second."""
    from ..loading import locate, study_models

    names = study_models(models, defaults)
    for name in names:
        locate(name, download=False)
    return names


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scratchformer", formatter_class=HelpFormatter,
                                     description="The 'Attention is All You Need' Transformer from scratch, as a "
                                     "Hugging Face model.")
    parser.add_argument("--version", action="version", version=f"scratchformer {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f".{name}", __name__).add_subcommand(subparsers)
    return parser


def check_optional_dependencies(args: argparse.Namespace) -> None:
    """Raise :class:`MissingDependencyError` naming the extra a training command needs, before it starts."""
    if args.command == "train":
        words = list(getattr(args, "train_arguments", None) or [])  # the train subparser keeps its words verbatim
        if "-h" in words or "--help" in words:
            return  # the options can be listed without the training packages
        require("datasets", "accelerate", extra="train", for_what="scratchformer train")
        if _option_value(words, "--objective") == "seq2seq":
            require("sacrebleu", extra="train", for_what="seq2seq training (BLEU/chrF at each evaluation)")
    elif args.command == "train-tokenizer":
        # it reads the text files with scratchformer.training.data.load_data_files, which uses datasets
        require("datasets", extra="train", for_what="scratchformer train-tokenizer")


def _option_value(words: list[str], flag: str) -> str | None:
    """The value of ``flag`` in a command line's words (``--flag value`` or ``--flag=value``; the last one wins)."""
    value = None
    for i, word in enumerate(words):
        if word == flag and i + 1 < len(words):
            value = words[i + 1]
        elif word.startswith(flag + "="):
            value = word.split("=", 1)[1]
    return value


@contextlib.contextmanager
def _library_bars_off() -> Iterator[None]:
    """transformers' and huggingface_hub's progress bars off while a command runs (noise beside ours), restored
    afterwards; transformers copies huggingface_hub's switch when it is imported later."""
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    hub_bars = not are_progress_bars_disabled()
    loaded = sys.modules.get("transformers.utils.logging")
    transformers_bars = loaded.is_progress_bar_enabled() if loaded else hub_bars  # what its import would copy
    disable_progress_bars()
    if loaded:
        loaded.disable_progress_bar()
    try:
        yield
    finally:
        if hub_bars:
            enable_progress_bars()
        if transformers_bars and (transformers := sys.modules.get("transformers.utils.logging")):
            transformers.enable_progress_bar()


class _OutputOutlivingItsReader:
    """Standard output that survives a closed pipe (``scratchformer info | head -1``): once the reader is gone,
    output goes to /dev/null, so that a training run or an export is not stopped by a pager that quit."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._discard()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._discard()

    def _discard(self) -> None:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), self._stream.fileno())

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; a :class:`ScratchformerError` ends it with one line on stderr and exit status 2."""
    stdout = sys.stdout
    sys.stdout = _OutputOutlivingItsReader(stdout)
    try:
        return _run(argv)
    finally:
        sys.stdout.flush()
        sys.stdout = stdout


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return EXIT_USER_ERROR
    if unknown:  # argparse would blame the top-level parser; name the command instead
        print(f"scratchformer {args.command}: error: unrecognized arguments: {' '.join(unknown)}", file=sys.stderr)
        return EXIT_USER_ERROR
    from .. import files

    try:
        check_optional_dependencies(args)
        # a full disk or a refused read or write (which, not known here) the command did not name itself: one line
        with files.writing(".", reading=None, named_by_error=True), _library_bars_off():
            return int(args.func(args) or 0)
    except ScratchformerError as error:  # one redacted line: no token or user:password@ reaches the terminal
        print(f"scratchformer {args.command}: error: {one_line(error)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print(f"scratchformer {args.command}: interrupted", file=sys.stderr)
        return 130
