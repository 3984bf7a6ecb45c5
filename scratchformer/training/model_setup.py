"""The tokenizer and the model a run starts from.

- :func:`load_tokenizer`: ``--tokenizer``, else the ``--model``'s, else a byte-level BPE trained on the training
  rows and saved in ``OUTPUT_DIR/tokenizer`` (a resumed run, and every process but the main one, loads that one);
- :func:`build_model`: ``--model`` (fine-tuning), else a new model of ``--preset`` size with ``--config-overrides``
  and the tokenizer's vocabulary; a resumed run must have the options of the run it continues.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, PreTrainedConfig

from ..errors import TrainingSetupError
from ..models import ScratchformerConfig, ScratchformerForConditionalGeneration
from .options import PRESETS, parse_overrides
from .resume import finishes_without_training

if TYPE_CHECKING:
    from .options import TrainOptions

TOKENIZER_FOLDER = "tokenizer"  # under OUTPUT_DIR
MIN_POSITIONS = 512  # ScratchformerConfig().max_position_embeddings


def load_tokenizer(options: TrainOptions, output_dir: str, train, columns: list[str], is_main: bool,
                   resume_from: str | None):
    """The run's tokenizer (see the module docstring); ``train`` holds the training rows of ``columns``."""
    if options.tokenizer or options.model:
        path = options.tokenizer or options.model
        if not Path(path).exists():
            raise TrainingSetupError(f"tokenizer folder not found: {path}")
        return AutoTokenizer.from_pretrained(path, trust_remote_code=True)
    saved = Path(output_dir) / TOKENIZER_FOLDER
    if (resume_from is not None or not is_main) and (saved / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(str(saved), trust_remote_code=True)
    if resume_from is not None:
        raise TrainingSetupError(f"--resume: the run's tokenizer is missing ({saved})")
    return _train_tokenizer(options, train, columns, saved)


def _train_tokenizer(options: TrainOptions, train, columns: list[str], folder: Path):
    """A byte-level BPE of ``--tokenizer-vocab-size`` trained on (at most ``--tokenizer-max-rows``) training rows,
    saved in ``folder``."""
    from ..tokenizer.training import train_fast_tokenizer

    limit = min(len(train), options.tokenizer_max_rows or len(train))
    tokenizer = train_fast_tokenizer(_texts(train, columns, limit), options.tokenizer_vocab_size,
                                     model_max_length=_longest_sequence(options))
    tokenizer.save_pretrained(str(folder))
    return tokenizer


def _texts(rows, columns: list[str], limit: int, chunk: int = 1000) -> Iterator[str]:
    """The non-empty texts of ``columns`` in the first ``limit`` rows, read ``chunk`` rows at a time."""
    for start in range(0, limit, chunk):
        batch = rows[start:min(start + chunk, limit)]
        for column in columns:
            yield from (t for t in batch[column] if t)


def _longest_sequence(options: TrainOptions) -> int:
    return max(options.max_length, options.max_source_length, options.max_target_length, MIN_POSITIONS)


def build_model(options: TrainOptions, tokenizer, resume_from: str | None, max_steps: int):
    """The model to train (see the module docstring). A run that resumes from a checkpoint at or past ``max_steps``
    gets that checkpoint's weights, since it will not train."""
    overrides = parse_overrides(options.config_overrides)
    if options.model:
        return _load_pretrained(options.model, overrides)
    config = new_model_config(options, tokenizer, overrides)
    if resume_from is None:
        return ScratchformerForConditionalGeneration(config)
    _check_same_model(config, resume_from)
    if finishes_without_training(resume_from, max_steps):
        return ScratchformerForConditionalGeneration.from_pretrained(resume_from, dtype=torch.float32)
    return ScratchformerForConditionalGeneration(config)


def _load_pretrained(folder: str, overrides: dict):
    try:
        return AutoModelForSeq2SeqLM.from_pretrained(folder, dtype=torch.float32, trust_remote_code=True, **overrides)
    except (OSError, ValueError) as err:
        raise TrainingSetupError(f"--model {folder}: cannot load it ({err})") from err


def new_model_config(options: TrainOptions, tokenizer, overrides: dict) -> ScratchformerConfig:
    """``--preset`` with ``--config-overrides``, positions for the longest sequence, and the tokenizer's vocabulary
    and special-token ids."""
    settings = {**PRESETS[options.preset], "max_position_embeddings": _longest_sequence(options)}
    settings.update(overrides)
    settings.update(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                    bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                    decoder_start_token_id=tokenizer.bos_token_id)
    try:
        return ScratchformerConfig(**settings)
    except (TypeError, ValueError) as err:
        raise TrainingSetupError(f"invalid model configuration: {err}") from err


def _check_same_model(config: ScratchformerConfig, checkpoint: str) -> None:
    """A resumed run must build the model of the run it continues: same architecture and training fields."""
    # use_cache is switched off by the Trainer while it trains
    own = ({f.name for f in dataclasses.fields(ScratchformerConfig)}
           - {f.name for f in dataclasses.fields(PreTrainedConfig)} - {"use_cache"})
    saved = ScratchformerConfig.from_pretrained(checkpoint).to_dict()
    ours = config.to_dict()
    differ = sorted(k for k in own if saved.get(k) != ours.get(k))
    if differ:
        raise TrainingSetupError(f"--resume: the model options differ from the checkpoint's in {differ}; resume "
                                 "with the options of the original run")
