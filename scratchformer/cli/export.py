"""``scratchformer export``: a self-contained Hub-ready folder (:mod:`scratchformer.hub`); the card options are shared
with ``scratchformer push``."""

from __future__ import annotations

import argparse

from . import add_command

DTYPES = ("float32", "float16", "bfloat16")  # scratchformer.models.SAVE_DTYPES (not imported: it loads torch)

OVERWRITE_HELP = (
    "replace an earlier export in OUT. OUT must look like one (every file an export writes, our model code among "
    "them, no subfolder); only the files an export writes are replaced or removed, "
    "any other file in OUT is kept. OUT may never be MODEL, a folder inside MODEL or a folder that contains it")


def card_options(args: argparse.Namespace) -> dict:
    """The keyword arguments of ``export``/``push`` that the shared card options give."""
    return dict(tokenizer=args.tokenizer, scores=args.scores, model_name=args.model_name, license=args.license,
                language=args.language, datasets=args.dataset, tags=args.tag or (),
                data_sources=args.data_source or (), onnx=args.onnx, dtype=args.dtype)


def add_card_arguments(parser: argparse.ArgumentParser) -> None:
    """MODEL, the model-card options, ``--dtype`` and ``--onnx``, the same for ``export`` and ``push``."""
    parser.add_argument("model", metavar="MODEL", help="folder saved with save_pretrained (safetensors weights), or "
                        "small: our shipped checkpoint")
    parser.add_argument("--tokenizer", help="tokenizer folder (default: the tokenizer in MODEL)")
    parser.add_argument("--scores", help="JSON of measured scores (default: MODEL/scores.json, if present)")
    parser.add_argument("--model-name", help="title of the model card")
    parser.add_argument("--license", help="license id for the card (default: the source card's, else apache-2.0)")
    parser.add_argument("--language", action="append", help="language code for the card (repeatable)")
    parser.add_argument("--dataset", action="append", help="Hub id of a training dataset, for the card's metadata "
                        "(repeatable; only real Hub dataset ids)")
    parser.add_argument("--data-source", action="append", help="a line for the card's 'Training data' section: what "
                        "the data is and its licence, e.g. 'Wikipedia summaries (CC BY-SA 4.0)' (repeatable)")
    parser.add_argument("--tag", action="append", help="extra tag for the card (repeatable)")
    parser.add_argument("--dtype", choices=DTYPES, help="store the weights in this dtype (default: the dtype they "
                        "have in MODEL: the shipped checkpoint's are float16). config.json keeps MODEL's dtype, which "
                        "is what from_pretrained gives")
    parser.add_argument("--onnx", action="store_true", help="also write onnx/model.onnx, the encoder, with the dynamo "
                        "exporter (dynamic batch and length; needs onnx, onnxscript and onnxruntime: "
                        'pip install "scratchformer[onnx]")')


def _export_command(args: argparse.Namespace) -> int:
    from ..hub import export

    folder = export(args.model, args.out, overwrite=args.overwrite, repo_id=args.repo_id, **card_options(args))
    print(f"exported to {folder}: " + ", ".join(sorted(path.name for path in folder.iterdir())))
    return 0


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers, "export", help="write a self-contained Hub-ready folder (safetensors, code, tokenizer, model card)")
    add_card_arguments(parser)
    parser.add_argument("out", metavar="OUT", help="folder to write: new or empty (see --overwrite)")
    parser.add_argument("--repo-id", help="Hub repo namespace/name the folder is meant for (used in the card's "
                        "snippets)")
    parser.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
    parser.set_defaults(func=_export_command)
