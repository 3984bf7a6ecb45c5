"""``scratchformer train-tokenizer``: train a BPE tokenizer on text files and save it as a tokenizer folder."""

from __future__ import annotations

import argparse
import sys

from ..errors import ScratchformerError
from . import add_command


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    from ..tokenizer.bpe import DEFAULT_SCHEME, SCHEMES

    cmd = add_command(
        subparsers, "train-tokenizer",
        help="train a BPE tokenizer on text files (plain or .gz) and save it for AutoTokenizer",
        description="Train a BPE tokenizer (special tokens <pad> <s> </s> <unk> <mask> = ids 0-4) on text files, "
        "one example per line, and save it to OUTPUT as two JSON files, tokenizer.json and tokenizer_config.json "
        "(AutoTokenizer loads the folder; it holds no code).",
    )
    cmd.add_argument("files", nargs="+", help="training text files, UTF-8, plain or .gz")
    cmd.add_argument("--vocab-size", type=int, default=16000, help="vocabulary size, special tokens included")
    cmd.add_argument(
        "--scheme",
        choices=SCHEMES,
        default=DEFAULT_SCHEME,
        help="byte_level (default: lossless, no unknown tokens) or whitespace (words + </w>, as in Sennrich et al.)",
    )
    cmd.add_argument("--output", required=True, help="folder to save the tokenizer into (created if needed)")
    cmd.add_argument("--overwrite", action="store_true", help="replace a tokenizer already saved in --output")
    cmd.add_argument(
        "--trainer",
        choices=("fast", "reference"),
        default="fast",
        help="fast: the tokenizers library's BpeTrainer; reference: the readable pure-Python trainer (slow)",
    )
    cmd.add_argument("--min-frequency", type=int, default=2, help="merge only pairs seen at least this often")
    cmd.add_argument(
        "--model-max-length",
        type=int,
        default=512,
        help="longest input the model takes (its max_position_embeddings; default 512)",
    )
    cmd.add_argument("--no-progress", action="store_true", help="do not show progress bars")
    cmd.set_defaults(func=_train_tokenizer)


SAVED_FILES = ("tokenizer.json", "tokenizer_config.json")  # what save_pretrained writes into --output


def _check_output(output: str, overwrite: bool, inputs: list[str] = ()) -> None:
    """Before any training: ``--output`` is a folder (or nothing yet) this user may write into, not a model's folder
    (its checksums do not cover the tokenizer), holds no tokenizer unless ``overwrite``, and is none of the inputs."""
    from .. import files

    folder = files.check_output_folder(output, [(f"the training file {path}", path) for path in inputs],
                                       writes=SAVED_FILES, name=f"--output {output!r}")
    if model := next((path.name for path in (folder / "config.json", *folder.glob("*.safetensors"))
                      if path.exists()), None):
        raise ScratchformerError(f"--output {output!r} is a model's folder ({model}): its weights go with its own "
                                 "tokenizer, which train-tokenizer never replaces; choose another folder")
    if (folder / "tokenizer.json").exists() and not overwrite:
        raise ScratchformerError(f"--output {output!r} already holds a tokenizer (tokenizer.json): choose another "
                                 "folder, or pass --overwrite to replace it")


def _train_tokenizer(args: argparse.Namespace) -> int:
    from .. import files
    from ..tokenizer import training as tt
    from ..training.data import load_data_files

    _check_output(args.output, args.overwrite, args.files)
    with files.signals_end_the_block():  # SIGTERM, SIGHUP: as Ctrl-C, the staged save (.saving-*) goes
        try:
            tt.check_vocab_size(args.vocab_size, args.trainer)  # before the data is read
            texts = load_data_files(args.files, fmt="txt")["text"]  # a bad file is a DataError naming it
            show_progress = not args.no_progress
            print(f"training a {args.scheme} BPE ({args.trainer} trainer) on {len(texts):,} lines", file=sys.stderr)
            settings = dict(model_max_length=args.model_max_length, min_frequency=args.min_frequency)
            if args.trainer == "fast":
                tokenizer = tt.train_fast_tokenizer(
                    texts, args.vocab_size, args.scheme, show_progress=show_progress, **settings
                )
            else:
                from tqdm.auto import tqdm

                with tqdm(unit="merge", disable=not show_progress) as bar:

                    def progress(done: int, total: int) -> None:
                        bar.total = total
                        bar.update(done - bar.n)

                    tokenizer = tt.train_reference_tokenizer(
                        texts, args.vocab_size, args.scheme, progress=progress, **settings
                    )
            # each file whole or not at all: an earlier tokenizer (--overwrite) stays intact if the save fails
            files.save_files_into(args.output, lambda staging: tokenizer.save_pretrained(str(staging)),
                                  needed=tt.saved_size(tokenizer))
        except ScratchformerError:
            raise
        except (ValueError, TypeError, OSError) as err:
            raise ScratchformerError(str(err)) from err
    print(f"saved to {args.output}")
    print(f"vocabulary size: {len(tokenizer)}")
    print(f"tokens per word: {tt.tokens_per_word(tokenizer, texts):.3f}")
    return 0
