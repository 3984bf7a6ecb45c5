"""The tokenizer and the model a run starts from. A Scratchformer folder loads with this package's own classes,
whatever code files it holds; another model type's code runs only with ``--trust-remote-code``."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from transformers import PreTrainedConfig

from .. import files
from ..errors import ScratchformerError, TrainingSetupError, one_line
from ..models import ScratchformerConfig, ScratchformerForConditionalGeneration, ScratchformerTokenizer
from .options import PRESETS, STREAM_TOKENIZER_ROWS, parse_overrides
from .resume import finishes_without_training

if TYPE_CHECKING:
    from .options import TrainOptions

TOKENIZER_FOLDER = "tokenizer"  # under OUTPUT_DIR
MIN_POSITIONS = 512  # ScratchformerConfig().max_position_embeddings
REMOTE_CODE_HINT = (" (a model type other than scratchformer that ships its own Python code loads only with "
                    "--trust-remote-code)")


def load_tokenizer(options: TrainOptions, output_dir: str, train, columns: list[str], process_index: int,
                   resume_from: str | None):
    """The run's tokenizer: ``--tokenizer``, the ``--model``'s, the resumed checkpoint's, else a byte-level BPE that
    the main process (call it first) trains on ``train``'s ``columns`` and saves in ``OUTPUT_DIR/tokenizer``."""
    if options.tokenizer or options.model:
        flag = "--tokenizer" if options.tokenizer else "--model"
        return load_tokenizer_folder(source_folder(options.tokenizer or options.model), options.trust_remote_code,
                                     flag)
    saved = Path(output_dir) / TOKENIZER_FOLDER
    if resume_from is not None:  # the run's tokenizer: the one saved in the checkpoint, else OUTPUT_DIR/tokenizer
        for folder in (Path(resume_from), saved):
            if (folder / "tokenizer.json").is_file():
                return _own_tokenizer(folder)
        raise TrainingSetupError(f"--resume: the run's tokenizer is missing (neither {resume_from} nor {saved} has "
                                 "tokenizer.json)")
    if process_index != 0:
        if (saved / "tokenizer.json").is_file():
            return _own_tokenizer(saved)
        raise TrainingSetupError(
            f"process {process_index}: the tokenizer that the main process trained is not in {saved}; every process "
            "must see --output-dir (a shared file system when the run spans several machines)")
    return _train_tokenizer(options, train, columns, saved)


def source_folder(name: str) -> str:
    """The folder a ``--model`` / ``--tokenizer`` names: the shipped checkpoint for its aliases (``small``,
    ``scratchformer``, ``default``), as everywhere else (:mod:`scratchformer.loading`), else ``name`` itself."""
    from ..loading import SHIPPED_ALIASES, pretrained_path

    return str(pretrained_path("small")) if name in SHIPPED_ALIASES else name


def check_model_sources(options: TrainOptions) -> None:
    """Before any data is read: ``--model`` / ``--tokenizer`` are folders, and one that ships code of another model
    type (an ``auto_map``) needs ``--trust-remote-code``."""
    for flag, name in (("--model", options.model), ("--tokenizer", options.tokenizer)):
        if name is None:
            continue
        path = source_folder(name)
        if not Path(path).is_dir():
            raise TrainingSetupError(f"{flag} {path}: no such folder")
        for file in ("config.json", "tokenizer.json", "tokenizer_config.json"):  # a FIFO there would block a read
            files.check_file(Path(path) / file, TrainingSetupError)
        ships_code = _foreign_auto_map(Path(path))
        if ships_code and not options.trust_remote_code:
            raise TrainingSetupError(f"{flag} {path}: {ships_code}; its Python code runs only with "
                                     "--trust-remote-code (read it first)")


def _foreign_auto_map(folder: Path) -> str | None:
    """What in ``folder`` asks to run its own code for a type that is not ours, or ``None``."""
    config = json_dict(folder / "config.json")
    if config is not None:
        if config.get("model_type") == ScratchformerConfig.model_type:
            return None  # ours: loaded with our classes, its code files never run
        if config.get("auto_map"):
            return f"a {config.get('model_type')!r} model whose config.json names its own code (auto_map)"
    tokenizer_config = json_dict(folder / "tokenizer_config.json") or {}
    if tokenizer_config.get("tokenizer_class") != ScratchformerTokenizer.__name__ and tokenizer_config.get("auto_map"):
        return (f"a {tokenizer_config.get('tokenizer_class')!r} tokenizer whose tokenizer_config.json names its own "
                "code (auto_map)")
    return None


def json_dict(path: Path) -> dict | None:
    """The JSON object in ``path``, or ``None`` where there is none to read (missing, unreadable, not an object)."""
    if not path.is_file():  # missing, or a FIFO that a read would wait on forever (the loader names it)
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def load_tokenizer_folder(path: str, trust_remote_code: bool = False, flag: str = "--tokenizer"):
    """The tokenizer of a folder: ours for a Scratchformer model folder or a folder saved from our tokenizer (never
    the folder's code), else ``AutoTokenizer`` (the folder's code only with ``trust_remote_code``)."""
    folder = Path(path)
    if not folder.is_dir():
        raise TrainingSetupError(f"{flag} {path}: tokenizer folder not found")
    try:
        if (folder / "config.json").is_file():  # a model folder: the one loader decides
            from ..loading import load_tokenizer as load

            return load(str(folder), trust_remote_code=trust_remote_code)
        tokenizer_class = (json_dict(folder / "tokenizer_config.json") or {}).get("tokenizer_class")
        if tokenizer_class == ScratchformerTokenizer.__name__:
            return _own_tokenizer(folder)
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(folder), trust_remote_code=trust_remote_code)
    except (ScratchformerError, OSError, ValueError, KeyError) as err:
        hint = "" if trust_remote_code else REMOTE_CODE_HINT
        raise TrainingSetupError(f"{flag} {path}: cannot load its tokenizer: {one_line(err)}{hint}") from err


def _own_tokenizer(folder: Path):
    """A folder saved from :class:`ScratchformerTokenizer`, loaded with it (its code files never run)."""
    try:
        return ScratchformerTokenizer.from_pretrained(str(folder))
    except (OSError, ValueError) as err:
        raise TrainingSetupError(f"cannot load the tokenizer in {folder}: {one_line(err)}") from err


def _train_tokenizer(options: TrainOptions, train, columns: list[str], folder: Path):
    """A byte-level BPE of ``--tokenizer-vocab-size`` trained on at most ``--tokenizer-max-rows`` training rows (a
    stream's first :data:`~scratchformer.training.options.STREAM_TOKENIZER_ROWS` by default), saved in ``folder``."""
    from ..tokenizer.training import saved_size, train_fast_tokenizer

    rows_read = [0]
    if hasattr(train, "__len__"):
        rows_read[0] = min(len(train), options.tokenizer_max_rows or len(train))
        texts = _texts(train, columns, rows_read[0])
    else:
        texts = _stream_texts(train, columns, options.tokenizer_max_rows or STREAM_TOKENIZER_ROWS, rows_read)
    tokenizer = train_fast_tokenizer(texts, options.tokenizer_vocab_size, model_max_length=longest_sequence(options))
    # whole files or none (the other processes wait for tokenizer.json); a full disk is one line
    files.save_files_into(folder, lambda staging: tokenizer.save_pretrained(str(staging)),
                          needed=saved_size(tokenizer))
    print(f"[scratchformer train] tokenizer: trained on {rows_read[0]:,} rows ({len(tokenizer):,} tokens), saved in "
          f"{folder}", flush=True)
    return tokenizer


def _texts(rows, columns: list[str], limit: int, chunk: int = 1000) -> Iterator[str]:
    """The non-empty texts of ``columns`` in the first ``limit`` rows, read ``chunk`` rows at a time."""
    for start in range(0, limit, chunk):
        batch = rows[start:min(start + chunk, limit)]
        for column in columns:
            yield from (t for t in batch[column] if t)


def _stream_texts(stream, columns: list[str], limit: int, rows_read: list[int]) -> Iterator[str]:
    """The non-empty texts of ``columns`` in the first ``limit`` rows of a stream (``rows_read[0]`` counts them)."""
    for row in stream.take(limit):
        rows_read[0] += 1
        yield from (row[column] for column in columns if row[column])


def longest_sequence(options: TrainOptions) -> int:
    return max(options.max_length, options.max_source_length, options.max_target_length, MIN_POSITIONS)


def build_model(options: TrainOptions, tokenizer, resume_from: str | None, max_steps: int,
                check_config: Callable[[ScratchformerConfig], None]):
    """``--model`` (fine-tuning), else a new model of ``--preset`` whose config passes ``check_config`` before its
    weights are allocated; a checkpoint at or past ``max_steps`` gives its weights, since it will not train."""
    overrides = parse_overrides(options.config_overrides)
    if options.model:
        return _load_pretrained(source_folder(options.model), overrides, options.trust_remote_code)
    config = new_model_config(options, tokenizer, overrides)
    check_config(config)
    if resume_from is None:
        return ScratchformerForConditionalGeneration(config)
    _check_same_model(config, resume_from)
    if finishes_without_training(resume_from, max_steps):
        return ScratchformerForConditionalGeneration.from_pretrained(resume_from, dtype=torch.float32)
    return ScratchformerForConditionalGeneration(config)


def freeze_encoder(model) -> None:
    """``--freeze-encoder``: the encoder and the shared embedding table stop taking gradients, so the optimizer
    leaves them out and no backward pass runs through the encoder."""
    for parameter in (*model.get_encoder().parameters(), model.get_input_embeddings().weight):
        parameter.requires_grad_(False)


def _load_pretrained(folder: str, overrides: dict, trust_remote_code: bool):
    """``--model``: through :func:`scratchformer.loading.load_model` (our classes for a Scratchformer folder, never
    its code), in float32, with ``--config-overrides`` applied."""
    from ..loading import load_model

    try:
        model = load_model(folder, task="seq2seq", dtype="float32", trust_remote_code=trust_remote_code)
    except ScratchformerError as err:
        hint = "" if trust_remote_code else REMOTE_CODE_HINT
        raise TrainingSetupError(f"--model {folder}: cannot load it ({one_line(err)}){hint}") from err
    if not getattr(model.config, "is_encoder_decoder", False):
        raise TrainingSetupError(f"--model {folder}: a {type(model).__name__} is not an encoder-decoder model")
    return _with_overrides(model, overrides, folder) if overrides else model


def _with_overrides(model, overrides: dict, folder: str):
    """The model rebuilt with ``overrides`` set on its config (e.g. ``dropout=0.0``) and its weights copied."""
    config = copy.deepcopy(model.config)
    for key, value in overrides.items():
        setattr(config, key, value)
    try:
        if hasattr(config, "validate_values"):
            config.validate_values()
        rebuilt = type(model)(config)
        rebuilt.load_state_dict(model.state_dict())
    except (TypeError, ValueError, RuntimeError) as err:
        raise TrainingSetupError(f"--config-overrides do not fit --model {folder}: {one_line(err)}") from err
    return rebuilt.to(torch.float32)


def new_model_config(options: TrainOptions, tokenizer, overrides: dict) -> ScratchformerConfig:
    """``--preset`` with ``--config-overrides``, positions for the longest sequence, and the tokenizer's vocabulary
    and special-token ids."""
    return model_config(options, overrides, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                        decoder_start_token_id=tokenizer.bos_token_id)


def model_config(options: TrainOptions, overrides: dict, **from_tokenizer) -> ScratchformerConfig:
    """The config of a new model: ``--preset``, positions for the longest sequence, ``overrides``, then what the
    tokenizer decides (``from_tokenizer``; the up-front checks pass its expected size before there is one)."""
    settings = {**PRESETS[options.preset], "max_position_embeddings": longest_sequence(options), **overrides,
                **from_tokenizer}
    try:
        return ScratchformerConfig(**settings)
    except (TypeError, ValueError) as err:
        raise TrainingSetupError(f"invalid model configuration: {err}") from err


def _check_same_model(config: ScratchformerConfig, checkpoint: str) -> None:
    """A resumed run must build the model of the run it continues: same architecture and training fields."""
    # use_cache is switched off by the Trainer while it trains
    own = ({f.name for f in dataclasses.fields(ScratchformerConfig)}
           - {f.name for f in dataclasses.fields(PreTrainedConfig)} - {"use_cache"})
    # resolve_resume has checked that the checkpoint is complete, config.json included
    saved = ScratchformerConfig.from_pretrained(checkpoint).to_dict()
    ours = config.to_dict()
    differ = sorted(k for k in own if saved.get(k) != ours.get(k))
    if differ:
        raise TrainingSetupError(f"--resume: the model options differ from the checkpoint's in {differ}; resume "
                                 "with the options of the original run")
