"""``scratchformer export``: a self-contained Hub-ready folder (:mod:`scratchformer.hub`)."""

from __future__ import annotations

import argparse

from . import add_command


def card_options(args: argparse.Namespace) -> dict:
    return dict(tokenizer=args.tokenizer, scores=args.scores, model_name=args.model_name, license=args.license,
                language=args.language, datasets=args.dataset, tags=args.tag or ())


def add_card_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="folder saved with save_pretrained (safetensors weights)")
    parser.add_argument("--tokenizer", help="tokenizer folder (default: the tokenizer in MODEL)")
    parser.add_argument("--scores", help="JSON of measured scores (default: MODEL/scores.json, if present)")
    parser.add_argument("--model-name", help="title of the model card")
    parser.add_argument("--license", default="apache-2.0", help="license id for the card (default: apache-2.0)")
    parser.add_argument("--language", action="append", help="language code for the card (repeatable)")
    parser.add_argument("--dataset", action="append", help="training dataset id for the card (repeatable)")
    parser.add_argument("--tag", action="append", help="extra tag for the card (repeatable)")


def _export_command(args: argparse.Namespace) -> int:
    from ..hub.export import export

    folder = export(args.model, args.out, overwrite=args.overwrite, repo_id=args.repo_id, **card_options(args))
    print(f"exported to {folder}: " + ", ".join(sorted(path.name for path in folder.iterdir())))
    return 0


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers, "export", help="write a self-contained Hub-ready folder (safetensors, code, tokenizer, model card)")
    add_card_arguments(parser)
    parser.add_argument("out", metavar="OUT", help="folder to write")
    parser.add_argument("--repo-id", help="Hub repo the folder is meant for (used in the card's snippets)")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it is not empty")
    parser.set_defaults(func=_export_command)
