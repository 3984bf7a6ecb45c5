"""``scratchformer train`` (:mod:`scratchformer.training`). The real parser imports torch, so ``--help`` and
command-line mistakes are answered by a quick parser rebuilt from :data:`OPTIONS` while its :func:`fingerprint`
matches (docs/training.md, "Options")."""

from __future__ import annotations

import argparse
import hashlib
import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

HELP = "train a model (denoising pre-training or seq2seq); works under torchrun / accelerate launch"
# REMAINDER alone refuses a first word like --train-files; with NUL, which no word contains, as the only prefix,
# every word is a value
NO_OPTION_PREFIX = "\0"
OPTIONS = Path(__file__).with_name("train_options.json")  # the real parser's actions (write_options)
# argparse actions and types the description names (a type not listed, e.g. dict, is left to the real parser)
_ACTIONS = {"_StoreAction": "store", "_StoreFalseAction": "store_false", "_StoreTrueAction": "store_true",
            "_HelpAction": "help"}


def _train_command(args: argparse.Namespace) -> int:
    _check_quickly(args.train_arguments)
    from ..training import config_from_args, run_training

    options, training_args = config_from_args(args.train_arguments)
    run_training(options, training_args)
    return 0


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train", help=HELP, description=f"{HELP}. Run 'scratchformer train --help' for its options.",
        add_help=False, prefix_chars=NO_OPTION_PREFIX)
    parser.add_argument("train_arguments", nargs=argparse.REMAINDER, metavar="OPTIONS",
                        help="the options of scratchformer train (see scratchformer train --help)")
    parser.set_defaults(func=_train_command)


def fingerprint() -> str:
    """What the real parser is built from: the installed transformers' version and ``training/options.py``."""
    options = Path(__file__).parents[1] / "training" / "options.py"
    return f"transformers {version('transformers')}, options.py {hashlib.sha256(options.read_bytes()).hexdigest()}"


def describe(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """The real parser as JSON: each action's flags, help (as its formatter shows it), defaults and argparse
    settings, by argument group."""
    formatter = parser._get_formatter()
    groups = []
    for group in parser._action_groups:
        actions = [{"flags": a.option_strings, "dest": a.dest, "action": _ACTIONS[type(a).__name__],
                    "help": formatter._get_help_string(a) if a.help else a.help,
                    **({} if isinstance(a, argparse._HelpAction) else {"default": a.default}),
                    **({} if type(a).__name__ != "_StoreAction" else {
                        "nargs": a.nargs, "const": a.const, "choices": None if a.choices is None else list(a.choices),
                        "metavar": a.metavar, "required": a.required, "type": getattr(a.type, "__name__", None)})}
                   for a in group._group_actions]
        groups.append({"title": group.title, "description": group.description, "actions": actions})
    return {"fingerprint": fingerprint(), "prog": parser.prog, "usage": parser.usage,
            "description": parser.description, "groups": groups}


def write_options() -> None:
    """Write :data:`OPTIONS` from the real parser (after a change of ``training/options.py`` or of transformers;
    ``tests/test_training.py`` says when it is due)."""
    from ..training import TrainArgumentParser

    OPTIONS.write_text(json.dumps(describe(TrainArgumentParser()), indent=1) + "\n", encoding="utf-8")


class _QuickParser(argparse.ArgumentParser):
    def error(self, message: str):
        from ..errors import TrainingSetupError

        raise TrainingSetupError(message)  # as TrainArgumentParser says it


def _string_to_bool(value: str) -> bool:  # transformers.hf_argparser.string_to_bool, named alike for its messages
    if isinstance(value, bool) or value.lower() in ("yes", "true", "t", "y", "1"):
        return value if isinstance(value, bool) else True
    if value.lower() in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"Truthy value expected: got {value} but expected one of yes/no, true/false, "
                                     "t/f, y/n, 1/0 (case insensitive).")


_string_to_bool.__name__ = "string_to_bool"
_TYPES = {"int": int, "float": float, "string_to_bool": _string_to_bool}


def _check_quickly(words: list[str]) -> None:
    """Answer ``--help``, or raise the real parser's error for a mistake of the command line, without importing
    torch or transformers, where :data:`OPTIONS` describes the real parser; else do nothing."""
    try:
        described = json.loads(OPTIONS.read_text(encoding="utf-8"))
        usable = described["fingerprint"] == fingerprint()
    except (OSError, ValueError, KeyError, ImportError):  # no description, or no transformers: the real parser says
        return
    if not usable:
        return
    parser = _QuickParser(prog=described["prog"], usage=described["usage"], description=described["description"],
                          allow_abbrev=False, add_help=False)
    for group in described["groups"]:
        target = parser.add_argument_group(group["title"], group["description"])
        for action in group["actions"]:
            settings = {key: value for key, value in action.items() if key not in ("flags", "type")}
            if "type" in action:
                settings["type"] = _TYPES.get(action["type"], str)
            target.add_argument(*action["flags"], **settings)
    parser._action_groups = [group for group in parser._action_groups if group._group_actions]
    # every option preset, so that no default is converted by its type (argparse does that for str defaults)
    _, unknown = parser.parse_known_args(list(words), argparse.Namespace(**{
        action.dest: None for action in parser._actions}))
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
