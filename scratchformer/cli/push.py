"""``scratchformer push``: export a model and upload it to the Hub (:mod:`scratchformer.hub`)."""

from __future__ import annotations

import argparse

from . import add_command
from .export import add_card_arguments, card_options


def _push_command(args: argparse.Namespace) -> int:
    from ..errors import redact
    from ..hub import push

    commit = push(args.model, args.repo_id, private=args.private, commit_message=args.message,
                  **card_options(args))
    print(redact(f"pushed to {commit.repo_url}: {commit.commit_url}"))  # an HF_ENDPOINT may carry user:password@
    return 0


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers, "push", help="export MODEL and upload it to the Hub in one commit (HF_TOKEN, HF_ENDPOINT)")
    add_card_arguments(parser)
    parser.add_argument("repo_id", metavar="REPO_ID", help="namespace/name of the model repo (checked before anything "
                        "is exported)")
    parser.add_argument("--private", action="store_true", help="create the repo as private")
    parser.add_argument("-m", "--message", help="commit message")
    parser.set_defaults(func=_push_command)
