"""Training on the Hugging Face ``Seq2SeqTrainer``: ``scratchformer train`` and its Python API.

Its modules, in the order a run meets them (:func:`run_training` in the last runs them as named steps):
scratchformer.training.options, scratchformer.training.checks, scratchformer.training.data,
scratchformer.training.noise, scratchformer.training.encoder_losses, scratchformer.training.encoder_mlm,
scratchformer.training.electra, scratchformer.training.contrastive, scratchformer.training.word_contrast,
scratchformer.training.sampling, scratchformer.training.model_setup, scratchformer.training.schedule,
scratchformer.training.metrics, scratchformer.training.callbacks, scratchformer.training.history,
scratchformer.training.resume, scratchformer.training.checkpoints, scratchformer.training.output_dir,
scratchformer.training.streaming, scratchformer.training.sharding and scratchformer.training.pipeline.

In Python: ``run_training(*config_from_args([...]))``; ``python -m scratchformer.training ARGS`` is ``scratchformer
train ARGS`` (for ``torchrun``).
"""

from .data import load_raw_splits
from .options import (
    PRESETS,
    ScratchformerTrainingArguments,
    TrainArgumentParser,
    TrainOptions,
    config_from_args,
    config_from_dict,
)
from .pipeline import run_training
from .resume import checkpoint_step

__all__ = [
    "PRESETS",
    "ScratchformerTrainingArguments",
    "TrainArgumentParser",
    "TrainOptions",
    "checkpoint_step",
    "config_from_args",
    "config_from_dict",
    "load_raw_splits",
    "run_training",
]
