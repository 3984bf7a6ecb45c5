"""Training on the Hugging Face ``Seq2SeqTrainer``: ``scratchformer train`` and its Python API.

One module per job:

- :mod:`~scratchformer.training.options` - the options (ours and the Trainer's, with our defaults) and the parser;
- :mod:`~scratchformer.training.checks` - up-front checks: options, tokenizer against model, batch against data
  and memory;
- :mod:`~scratchformer.training.data` - loading, splitting and tokenizing the data;
- :mod:`~scratchformer.training.noise` - BART's text-infilling noise and its collator;
- :mod:`~scratchformer.training.encoder_losses` - losses on the encoder's own output, added to denoising:
  :mod:`~scratchformer.training.encoder_mlm` (BERT's masked tokens), :mod:`~scratchformer.training.electra`
  (replaced-token detection), :mod:`~scratchformer.training.contrastive` (two windows of one text) and
  :mod:`~scratchformer.training.word_contrast` (a word's occurrences in other texts);
- :mod:`~scratchformer.training.sampling` - the order of the training examples;
- :mod:`~scratchformer.training.model_setup` - the tokenizer and the model a run starts from;
- :mod:`~scratchformer.training.schedule` - the paper's learning-rate schedule as Trainer options;
- :mod:`~scratchformer.training.metrics` - the loss and the evaluation metrics;
- :mod:`~scratchformer.training.callbacks` - the noise's epoch and the time limit;
- :mod:`~scratchformer.training.history` - ``loss_history.json`` and ``loss_curve.png``;
- :mod:`~scratchformer.training.resume` - which checkpoint a run continues from;
- :mod:`~scratchformer.training.checkpoints` - crash-safe checkpoints: a folder appears only complete;
- :mod:`~scratchformer.training.output_dir` - the run's output folder, never shared by two runs;
- :mod:`~scratchformer.training.streaming` - ``--streaming``: training from an ``IterableDataset``, one shard per
  process, its position saved with each checkpoint;
- :mod:`~scratchformer.training.sharding` - what FSDP and DeepSpeed need from our model and pipeline;
- :mod:`~scratchformer.training.pipeline` - :func:`run_training`, the run as a sequence of named steps.

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
