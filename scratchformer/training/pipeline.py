"""``scratchformer train``: one training pipeline, from a laptop to many machines, on the Hugging Face Trainer.

Two objectives:

- ``denoise``: BART text infilling on plain text (:class:`scratchformer.data.DataCollatorForTextInfilling`: spans
  with Poisson(3) lengths covering 30% of the tokens, each replaced by one ``<mask>``; the decoder rebuilds the
  original text);
- ``seq2seq``: supervised sequence-to-sequence on two columns (e.g. ``kjv`` -> ``web``), with BLEU and chrF from
  ``sacrebleu`` on generated outputs.

Underneath is ``transformers.Seq2SeqTrainer``: evaluation during training, checkpoints every ``save_steps``,
``--resume``, seeds, a progress bar, and - nothing home-made - data-parallel training by launching the same command
with ``torchrun --nproc_per_node=N`` or ``accelerate launch`` (gloo on CPU, NCCL on GPUs); only the main process
writes checkpoints, logs and plots.

The loss (``Seq2SeqLoss``) is the token-level cross-entropy with label smoothing ``epsilon`` (0.1, paper section
5.4) while training, normalised by the number of target tokens in the whole optimizer step (all micro-batches and
processes), and the plain cross-entropy on evaluation, so ``eval_loss`` is a true per-token negative
log-likelihood.

The paper's learning-rate schedule (section 5.3) is ``lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``.
It equals transformers' ``inverse_sqrt`` schedule, ``lr(step) = peak * min(step / warmup, sqrt(warmup / step))``,
with ``peak = d_model^-0.5 * warmup^-0.5``; that is what ``--lr-schedule inverse_sqrt`` without ``--learning-rate``
uses (with the paper's Adam beta2 = 0.98, epsilon = 1e-9).

This module imports only the standard library at the top, so ``scratchformer --help`` stays fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import TrainingSetupError

OBJECTIVES = ("denoise", "seq2seq")
LR_SCHEDULES = {  # ours -> transformers' lr_scheduler_type
    "inverse_sqrt": "inverse_sqrt",
    "linear": "linear",
    "cosine": "cosine",
    "constant": "constant_with_warmup",
}
SAVE_DTYPES = ("float32", "float16", "bfloat16")

# Model sizes (ScratchformerConfig fields). vocab_size and the special-token ids come from the tokenizer.
PRESETS: dict[str, dict[str, Any]] = {
    # for tests and smoke runs
    "tiny": dict(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                 encoder_ffn_dim=64, decoder_ffn_dim=64),
    # candidates for the shipped checkpoint (docs/training.md): an encoder-heavy shape, since the encoder's
    # contextual vectors are what the checkpoint is for, and a 1-2 layer decoder is enough to reconstruct text
    "mini": dict(d_model=192, encoder_layers=4, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
                 encoder_ffn_dim=768, decoder_ffn_dim=768),
    "small": dict(d_model=256, encoder_layers=6, decoder_layers=2, encoder_attention_heads=4,
                  decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024),
    "small-sym": dict(d_model=256, encoder_layers=3, decoder_layers=3, encoder_attention_heads=4,
                      decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024),
    # the paper's base model (Table 3)
    "base": dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8, decoder_attention_heads=8,
                 encoder_ffn_dim=2048, decoder_ffn_dim=2048),
}


def _opt(default, help: str, **extra):
    """A TrainConfig field with its ``--help`` text (and extra argparse options)."""
    return field(default=default, metadata={"help": help, **extra})


@dataclass
class TrainConfig:
    """Every option of ``scratchformer train`` (the CLI flag is the field name with dashes)."""

    # --- data
    objective: str = _opt("denoise", "denoise: BART text infilling on plain text; seq2seq: source -> target columns",
                          choices=OBJECTIVES)
    train_files: list[str] | None = _opt(None, "training data: .txt (one example per line), .tsv, .csv, .jsonl "
                                               "(each optionally .gz)", nargs="+")
    validation_files: list[str] | None = _opt(None, "validation data (default: held out from the training data)",
                                              nargs="+")
    data_format: str | None = _opt(None, "txt, tsv, csv or jsonl (default: from the file names)")
    dataset_name: str | None = _opt(None, "a Hugging Face Hub dataset instead of files (needs the Hub)")
    dataset_config: str | None = _opt(None, "configuration name of --dataset-name")
    text_column: str = _opt("text", "column with the text (denoise)")
    source_column: str | None = _opt(None, "source column (seq2seq), e.g. kjv")
    target_column: str | None = _opt(None, "target column (seq2seq), e.g. web")
    group_column: str | None = _opt(None, "hold out whole groups for validation: the book of this column's "
                                          "Bible reference ('Genesis 1:1' -> 'Genesis'); default 'ref' if present")
    validation_groups: list[str] | None = _opt(None, "the groups (books) to hold out (default: random, seeded, "
                                                     "until --validation-fraction is reached)", nargs="+")
    validation_fraction: float = _opt(0.05, "fraction of the rows held out for validation")
    max_train_samples: int | None = _opt(None, "use at most this many training rows (after the split)")
    max_eval_samples: int | None = _opt(512, "evaluate on at most this many validation rows (0 = all)")
    max_length: int = _opt(128, "denoise: texts are cut into chunks of at most this many tokens")
    max_source_length: int = _opt(128, "seq2seq: source truncation length in tokens")
    max_target_length: int = _opt(128, "seq2seq: target truncation length in tokens")
    mask_ratio: float = _opt(0.3, "denoise: fraction of tokens covered by masked spans")
    poisson_lambda: float = _opt(3.0, "denoise: mean span length (Poisson lambda)")
    num_proc: int | None = _opt(None, "processes for datasets.map")
    cache_dir: str | None = _opt(None, "datasets cache folder (default: the datasets default)")
    # --- model and tokenizer
    model: str | None = _opt(None, "start from this checkpoint folder (fine-tuning) instead of a random model")
    preset: str = _opt("mini", "model size for a new model (docs/training.md)", choices=tuple(PRESETS))
    config_overrides: str | None = _opt(None, "ScratchformerConfig fields, e.g. 'd_model=256,encoder_layers=4,"
                                              "pre_layer_norm=true'")
    tokenizer: str | None = _opt(None, "tokenizer folder (default: the --model's, else train one on the training "
                                       "text and save it in OUTPUT_DIR/tokenizer)")
    tokenizer_vocab_size: int = _opt(16000, "vocabulary size of a tokenizer trained on the fly (byte-level BPE)")
    tokenizer_max_rows: int | None = _opt(None, "train the tokenizer on at most this many training rows")
    # --- optimisation
    output_dir: str | None = _opt(None, "folder for checkpoints, the final model, logs and the loss curve")
    max_steps: int = _opt(-1, "optimizer steps (overrides --num-train-epochs when > 0)")
    num_train_epochs: float = _opt(1.0, "epochs, when --max-steps is not given")
    max_minutes: float | None = _opt(None, "also stop (with checkpoint, final model and evaluation) after this many "
                                           "minutes of training; the step reached then depends on the machine")
    batch_size: int = _opt(32, "examples per process per micro-batch")
    eval_batch_size: int | None = _opt(None, "evaluation batch size (default: --batch-size)")
    gradient_accumulation_steps: int = _opt(1, "micro-batches per optimizer step")
    lr_schedule: str = _opt("inverse_sqrt", "inverse_sqrt (the paper's warm-up then 1/sqrt(step)), linear, "
                                            "cosine or constant, all with linear warm-up", choices=tuple(LR_SCHEDULES))
    learning_rate: float | None = _opt(None, "peak learning rate (default: d_model^-0.5 * warmup^-0.5 for "
                                             "inverse_sqrt, the paper's value; 5e-4 otherwise)")
    warmup_steps: int | None = _opt(None, "linear warm-up steps (default: the paper's 4000, at most 10%% of "
                                          "--max-steps)")
    weight_decay: float = _opt(0.0, "AdamW weight decay")
    adam_beta1: float = _opt(0.9, "Adam beta1 (paper: 0.9)")
    adam_beta2: float = _opt(0.98, "Adam beta2 (paper: 0.98)")
    adam_epsilon: float = _opt(1e-9, "Adam epsilon (paper: 1e-9)")
    max_grad_norm: float = _opt(1.0, "gradient clipping norm (0 = off)")
    label_smoothing: float = _opt(0.1, "label smoothing epsilon of the training loss (paper: 0.1)")
    bf16: bool = _opt(False, "bfloat16 mixed precision (autocast)")
    # --- evaluation, checkpoints, logging
    eval_steps: int = _opt(500, "evaluate every this many steps (0 = only at the end)")
    save_steps: int = _opt(500, "write a checkpoint every this many steps (and at the end)")
    save_total_limit: int | None = _opt(3, "keep at most this many checkpoints")
    logging_steps: int = _opt(50, "log the training loss every this many steps")
    generation_max_length: int = _opt(128, "seq2seq: longest generated output during evaluation")
    generation_num_beams: int = _opt(1, "seq2seq: beams during evaluation (1 = greedy)")
    save_dtype: str = _opt("float32", "dtype of the final model's weights (checkpoints stay float32)",
                           choices=SAVE_DTYPES)
    resume: str | None = _opt(None, "continue from the latest checkpoint in OUTPUT_DIR, or from the given one",
                              nargs="?", const="latest")
    seed: int = _opt(42, "seed of the model initialisation, data order, noise and dropout")
    dataloader_num_workers: int = _opt(0, "data-loader worker processes")
    progress_bar: bool = _opt(True, "show a progress bar")

    # ------------------------------------------------------------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)


def _field_type(f: dataclasses.Field) -> type:
    hint = str(f.type)
    for name, typ in (("bool", bool), ("int", int), ("float", float)):
        if hint.startswith(name):
            return typ
    return str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One ``--flag`` per :class:`TrainConfig` field."""
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        meta = dict(f.metadata)
        help_text = meta.pop("help")
        typ = _field_type(f)
        if typ is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=help_text)
            continue
        if f.default is not None and "%(default)" not in help_text:
            help_text += " (default: %(default)s)"
        parser.add_argument(flag, type=typ, default=f.default, help=help_text, **meta)


def config_from_args(argv: list[str] | None = None) -> TrainConfig:
    parser = argparse.ArgumentParser(prog="scratchformer train")
    add_arguments(parser)
    return TrainConfig(**vars(parser.parse_args(argv)))


# --------------------------------------------------------------------------------------------------------------------
# Checks that run before training
# --------------------------------------------------------------------------------------------------------------------


def check_options(cfg: TrainConfig) -> None:
    """Option errors that need no data."""
    if cfg.objective not in OBJECTIVES:
        raise TrainingSetupError(f"--objective must be one of {OBJECTIVES}, got {cfg.objective!r}")
    if not cfg.output_dir:
        raise TrainingSetupError("--output-dir is required")
    if not cfg.train_files and not cfg.dataset_name:
        raise TrainingSetupError("give --train-files (local data) or --dataset-name (a Hub dataset)")
    if cfg.objective == "seq2seq" and not (cfg.source_column and cfg.target_column):
        raise TrainingSetupError("--objective seq2seq needs --source-column and --target-column")
    for name in ("batch_size", "gradient_accumulation_steps", "max_length", "max_source_length",
                 "max_target_length", "generation_max_length", "generation_num_beams"):
        if getattr(cfg, name) < 1:
            raise TrainingSetupError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(cfg, name)}")
    if cfg.eval_batch_size is not None and cfg.eval_batch_size < 1:
        raise TrainingSetupError(f"--eval-batch-size must be >= 1, got {cfg.eval_batch_size}")
    if cfg.max_steps <= 0 and cfg.num_train_epochs <= 0:
        raise TrainingSetupError("give --max-steps > 0 or --num-train-epochs > 0")
    if not 0 < cfg.validation_fraction < 1:
        raise TrainingSetupError(f"--validation-fraction must be in (0, 1), got {cfg.validation_fraction}")
    if not 0 <= cfg.label_smoothing < 1:
        raise TrainingSetupError(f"--label-smoothing must be in [0, 1), got {cfg.label_smoothing}")
    if cfg.preset not in PRESETS:
        raise TrainingSetupError(f"--preset must be one of {tuple(PRESETS)}, got {cfg.preset!r}")
    if cfg.max_minutes is not None and not cfg.max_minutes > 0:
        raise TrainingSetupError(f"--max-minutes must be positive, got {cfg.max_minutes}")
    if cfg.save_steps < 1 or cfg.logging_steps < 1 or cfg.eval_steps < 0:
        raise TrainingSetupError("--save-steps and --logging-steps must be >= 1 and --eval-steps >= 0")
    parse_overrides(cfg.config_overrides)  # raises on a malformed string


def parse_overrides(text: str | None) -> dict[str, Any]:
    """``"d_model=256,pre_layer_norm=true,activation_function=gelu"`` -> a dict of typed values."""
    out: dict[str, Any] = {}
    if not text:
        return out
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise TrainingSetupError(f"--config-overrides: {item!r} is not key=value")
        value = value.strip()
        try:
            out[key.strip()] = json.loads(value.lower() if value.lower() in ("true", "false", "null") else value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def check_tokenizer_matches(tokenizer, config, objective: str) -> None:
    """:func:`scratchformer.loading.check_tokenizer_matches`, as a :class:`TrainingSetupError`; denoising needs
    ``<mask>``."""
    from ..loading import check_tokenizer_matches as check

    check(tokenizer, config, needs_mask=objective == "denoise", error=TrainingSetupError)


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def estimate_step_memory(config, batch_size: int, source_length: int, target_length: int) -> int:
    """A rough upper estimate, in bytes, of the memory one float32 training step needs on one process.

    Parameters, gradients and Adam's two moments (16 bytes per parameter), plus the activations kept for the
    backward pass: per encoder token and layer about ``12 d + 3 d_ff + 3 h S`` floats, per decoder token and layer
    about ``20 d + 3 d_ff + 3 h (T + S)``, and per decoder token ``4 V`` floats for the logits, their softmax and
    gradients.
    """
    params = (config.vocab_size * config.d_model
              + config.encoder_layers * (4 * config.d_model ** 2 + 2 * config.d_model * config.encoder_ffn_dim)
              + config.decoder_layers * (8 * config.d_model ** 2 + 2 * config.d_model * config.decoder_ffn_dim))
    d, S, T = config.d_model, source_length, target_length
    enc = batch_size * S * config.encoder_layers * (12 * d + 3 * config.encoder_ffn_dim + 3 * config.encoder_attention_heads * S)
    dec = batch_size * T * config.decoder_layers * (20 * d + 3 * config.decoder_ffn_dim
                                                     + 3 * config.decoder_attention_heads * (T + S))
    head = batch_size * T * 4 * config.vocab_size
    return 16 * params + 4 * (enc + dec + head)


def check_batch_size(cfg: TrainConfig, config, num_train: int, num_eval: int, world_size: int,
                     local_world_size: int) -> None:
    """A batch size fits when (1) one optimizer step's examples, ``batch_size x processes x accumulation``, are no
    more than the training examples, and (2) the estimated memory of a step with full-length sequences
    (:func:`estimate_step_memory`) times the processes on this machine is below the memory available now."""
    per_step = cfg.batch_size * world_size * cfg.gradient_accumulation_steps
    if per_step > num_train:
        raise TrainingSetupError(
            f"the batch does not fit the data: one optimizer step takes {per_step} examples (--batch-size "
            f"{cfg.batch_size} x {world_size} process(es) x --gradient-accumulation-steps "
            f"{cfg.gradient_accumulation_steps}) but there are only {num_train} training examples")
    if num_eval < 1:
        raise TrainingSetupError("the validation set is empty")
    src = cfg.max_length if cfg.objective == "denoise" else cfg.max_source_length
    tgt = cfg.max_length if cfg.objective == "denoise" else cfg.max_target_length
    need = estimate_step_memory(config, cfg.batch_size, src, tgt) * local_world_size
    have = _available_memory()
    if have is not None and need > 0.9 * have:
        raise TrainingSetupError(
            f"the batch does not fit in memory: a training step with --batch-size {cfg.batch_size} and "
            f"{max(src, tgt)}-token sequences needs about {need / 2**30:.1f} GiB on {local_world_size} process(es), "
            f"{have / 2**30:.1f} GiB are available; lower --batch-size and raise --gradient-accumulation-steps")


# --------------------------------------------------------------------------------------------------------------------
# Trainer pieces
# --------------------------------------------------------------------------------------------------------------------


class Seq2SeqLoss:
    """``compute_loss_func`` for the Trainer: label-smoothed cross-entropy while training (with gradients), plain
    cross-entropy on evaluation. The sum over target tokens is divided by ``num_items_in_batch`` (the Trainer's count
    of target tokens in the whole optimizer step, across accumulation and processes) when given, else by the tokens
    of this batch."""

    def __init__(self, label_smoothing: float = 0.1):
        self.label_smoothing = label_smoothing

    def __call__(self, outputs, labels, num_items_in_batch=None):
        import torch

        logits = outputs["logits"] if isinstance(outputs, dict) else outputs[0]
        smoothing = self.label_smoothing if torch.is_grad_enabled() else 0.0
        total = torch.nn.functional.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1).to(logits.device), ignore_index=-100,
            reduction="sum", label_smoothing=smoothing)
        if num_items_in_batch is None:
            num_items_in_batch = (labels != -100).sum()
        if torch.is_tensor(num_items_in_batch):
            num_items_in_batch = num_items_in_batch.to(total.device)
        return total / num_items_in_batch


def _argmax_logits(logits, labels):
    """``preprocess_logits_for_metrics``: keep only the predicted ids (the Trainer would otherwise gather V floats
    per token)."""
    if isinstance(logits, (tuple, list)):
        logits = logits[0]
    return logits.argmax(dim=-1)


def token_accuracy(eval_pred) -> dict[str, float]:
    """Share of target tokens that the teacher-forced argmax predicts exactly."""

    preds, labels = eval_pred.predictions, eval_pred.label_ids
    if isinstance(preds, tuple):
        preds = preds[0]
    mask = labels != -100
    return {"token_accuracy": float((preds[mask] == labels[mask]).mean()) if mask.any() else 0.0}


class GenerationMetrics:
    """BLEU and chrF (``sacrebleu``) of generated outputs against the references."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def decode(self, ids) -> list[str]:
        import numpy as np

        ids = np.where(ids < 0, self.tokenizer.pad_token_id, ids)
        return [t.strip() for t in self.tokenizer.batch_decode(ids, skip_special_tokens=True)]

    def __call__(self, eval_pred) -> dict[str, float]:
        import sacrebleu

        preds = eval_pred.predictions[0] if isinstance(eval_pred.predictions, tuple) else eval_pred.predictions
        hyps, refs = self.decode(preds), self.decode(eval_pred.label_ids)
        return {"bleu": sacrebleu.corpus_bleu(hyps, [refs]).score, "chrf": sacrebleu.corpus_chrf(hyps, [refs]).score}


def _make_callbacks(collator, max_minutes: float | None):
    """The pipeline's own callbacks: the noise epoch, and the time limit."""
    import torch
    from transformers import TrainerCallback

    class EpochCallback(TrainerCallback):
        """Tell the noising collator which epoch it is in (its noise depends on it)."""

        def on_epoch_begin(self, args, state, control, **kwargs):
            collator.epoch = int(math.floor((state.epoch or 0.0) + 1e-6))

    class TimeLimit(TrainerCallback):
        """End training normally (checkpoint, final model, evaluation) after ``minutes`` of training in this call.
        The main process decides and tells the others, so every process stops after the same step."""

        def __init__(self, minutes: float):
            self.seconds = 60.0 * minutes
            self.start = None
            self.triggered = False

        def on_train_begin(self, args, state, control, **kwargs):
            self.start = time.monotonic()

        def on_step_end(self, args, state, control, **kwargs):
            flag = torch.tensor([float(time.monotonic() - self.start >= self.seconds)])
            if torch.distributed.is_available() and torch.distributed.is_initialized():
                torch.distributed.broadcast(flag, src=0)
            if flag.item() and state.global_step < state.max_steps:
                self.triggered = True
                control.should_training_stop = True
                control.should_save = True

    out = []
    if collator is not None and hasattr(collator, "epoch"):
        out.append(EpochCallback())
    if max_minutes:
        out.append(TimeLimit(max_minutes))
    return out


def loss_history(log_history: list[dict]) -> dict[str, list[dict]]:
    """The Trainer's ``log_history`` split into training-loss and evaluation records."""
    train = [{k: e[k] for k in ("step", "epoch", "loss", "learning_rate", "grad_norm") if k in e}
             for e in log_history if "loss" in e and "step" in e]
    evals = [{k: v for k, v in e.items() if k == "step" or k == "epoch" or k.startswith("eval_")}
             for e in log_history if "eval_loss" in e]
    return {"train": train, "eval": evals}


def write_loss_curve(history: dict[str, list[dict]], output_dir: str | Path, title: str = "") -> list[Path]:
    """``loss_history.json`` and, when matplotlib is installed, ``loss_curve.png``."""
    output_dir = Path(output_dir)
    written = [output_dir / "loss_history.json"]
    written[0].write_text(json.dumps(history, indent=1))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no loss_curve.png (pip install matplotlib)", file=sys.stderr)
        return written
    fig, ax = plt.subplots(figsize=(7, 4.2))
    if history["train"]:
        ax.plot([e["step"] for e in history["train"]], [e["loss"] for e in history["train"]],
                label="training loss (label-smoothed)")
    if history["eval"]:
        ax.plot([e["step"] for e in history["eval"]], [e["eval_loss"] for e in history["eval"]], "o-",
                label="validation loss (cross-entropy)")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss per target token (nats)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(output_dir / "loss_curve.png", dpi=120)
    plt.close(fig)
    written.append(output_dir / "loss_curve.png")
    return written


# --------------------------------------------------------------------------------------------------------------------
# The pipeline
# --------------------------------------------------------------------------------------------------------------------


def _resolve_resume(cfg: TrainConfig) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    out = Path(cfg.output_dir)
    latest = get_last_checkpoint(str(out)) if out.is_dir() else None
    if cfg.resume is None:
        if latest is not None:
            raise TrainingSetupError(
                f"{out} already holds checkpoints (latest: {Path(latest).name}); pass --resume to continue that "
                "run, or choose another --output-dir")
        return None
    if cfg.resume == "latest":
        if latest is None:
            raise TrainingSetupError(f"--resume: no checkpoint-* folder in {out}")
        return latest
    if not (Path(cfg.resume) / "trainer_state.json").is_file():
        raise TrainingSetupError(f"--resume {cfg.resume}: not a Trainer checkpoint (no trainer_state.json)")
    return cfg.resume


def load_raw_splits(cfg: TrainConfig):
    """``(train, validation, text columns, group column)`` as ``datasets.Dataset`` rows of text, checked and split
    as ``cfg`` says (validation files, held-out groups/books, or random rows; at most ``max_eval_samples``
    validation rows, drawn with ``cfg.seed``)."""
    from . import data

    if cfg.train_files:
        train = data.load_data_files(cfg.train_files, cfg.data_format, cfg.cache_dir)
    else:
        train = data.load_hub_dataset(cfg.dataset_name, cfg.dataset_config, "train", cfg.cache_dir)
    valid = data.load_data_files(cfg.validation_files, cfg.data_format, cfg.cache_dir) if cfg.validation_files \
        else None
    columns = [cfg.text_column] if cfg.objective == "denoise" else [cfg.source_column, cfg.target_column]
    data.check_columns(train, columns, "the training data")
    if valid is not None:
        data.check_columns(valid, columns, "the validation data")
    group = cfg.group_column
    if group is None and valid is None and cfg.objective == "seq2seq" and "ref" in train.column_names:
        group = "ref"
    if group is not None and valid is None:
        data.check_columns(train, [group], "the training data (--group-column)")
    if len(train) == 0:
        raise data.DataError("the training data has no rows")
    train = data.drop_empty(train, columns, cfg.num_proc)
    if len(train) == 0:
        raise data.DataError(f"the training data has no row with text in {columns}")
    if valid is not None:
        valid = data.drop_empty(valid, columns, cfg.num_proc)
    elif group is not None:
        parts = data.split_by_group(train, group, cfg.validation_fraction, cfg.validation_groups, cfg.seed)
        train, valid = parts["train"], parts["validation"]
    else:
        parts = data.random_split(train, cfg.validation_fraction, cfg.seed)
        train, valid = parts["train"], parts["validation"]
    if len(valid) == 0:
        raise data.DataError("the validation data has no rows with text")
    if cfg.max_train_samples:
        train = train.select(range(min(cfg.max_train_samples, len(train))))
    if cfg.max_eval_samples:
        valid = valid.shuffle(seed=cfg.seed).select(range(min(cfg.max_eval_samples, len(valid)))) \
            if len(valid) > cfg.max_eval_samples else valid
    return train, valid, columns, group


def _tokenizer(cfg: TrainConfig, train, columns, is_main: bool, resume_from: str | None):
    from transformers import AutoTokenizer

    from ..tokenizer.training import train_fast_tokenizer

    if cfg.tokenizer or cfg.model:
        path = cfg.tokenizer or cfg.model
        if not Path(path).exists():
            raise TrainingSetupError(f"tokenizer folder not found: {path}")
        return AutoTokenizer.from_pretrained(path, trust_remote_code=True)
    saved = Path(cfg.output_dir) / "tokenizer"
    if (resume_from is not None or not is_main) and (saved / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(str(saved), trust_remote_code=True)
    if resume_from is not None:
        raise TrainingSetupError(f"--resume: the run's tokenizer is missing ({saved})")
    limit = min(len(train), cfg.tokenizer_max_rows or len(train))

    def texts():
        for start in range(0, limit, 1000):
            batch = train[start:min(start + 1000, limit)]
            for column in columns:
                yield from (t for t in batch[column] if t)

    model_max_length = max(cfg.max_length, cfg.max_source_length, cfg.max_target_length, 512)
    tokenizer = train_fast_tokenizer(texts(), cfg.tokenizer_vocab_size, model_max_length=model_max_length)
    tokenizer.save_pretrained(str(saved))
    return tokenizer


def _model(cfg: TrainConfig, tokenizer, resume_from: str | None):
    import torch
    from transformers import AutoModelForSeq2SeqLM

    from ..models import ScratchformerConfig, ScratchformerForConditionalGeneration

    overrides = parse_overrides(cfg.config_overrides)
    fields = {f.name for f in dataclasses.fields(ScratchformerConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise TrainingSetupError(f"--config-overrides: unknown ScratchformerConfig field(s) {unknown}")
    if cfg.model:
        try:
            return AutoModelForSeq2SeqLM.from_pretrained(cfg.model, dtype=torch.float32, trust_remote_code=True,
                                                         **overrides)
        except (OSError, ValueError) as err:
            raise TrainingSetupError(f"--model {cfg.model}: cannot load it ({err})") from err
    settings = {**PRESETS[cfg.preset], "max_position_embeddings": max(512, cfg.max_length, cfg.max_source_length,
                                                                       cfg.max_target_length)}
    settings.update(overrides)
    settings.update(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                    bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                    decoder_start_token_id=tokenizer.bos_token_id)
    try:
        config = ScratchformerConfig(**settings)
    except (TypeError, ValueError) as err:
        raise TrainingSetupError(f"invalid model configuration: {err}") from err
    if resume_from is not None:
        from transformers import PreTrainedConfig

        # the architecture and training fields; use_cache is switched off by the Trainer while it trains
        own = fields - {f.name for f in dataclasses.fields(PreTrainedConfig)} - {"use_cache"}
        saved = ScratchformerConfig.from_pretrained(resume_from).to_dict()
        ours = config.to_dict()
        differ = sorted(k for k in own if saved.get(k) != ours.get(k))
        if differ:
            raise TrainingSetupError(
                f"--resume: the model options differ from the checkpoint's in {differ}; resume with the options "
                "of the original run")
        if checkpoint_step(resume_from) >= cfg.max_steps > 0:
            return ScratchformerForConditionalGeneration.from_pretrained(resume_from, dtype=torch.float32)
    return ScratchformerForConditionalGeneration(config)


def checkpoint_step(checkpoint: str | Path) -> int:
    """The optimizer step a Trainer checkpoint folder was saved at (from its ``trainer_state.json``)."""
    return int(json.loads((Path(checkpoint) / "trainer_state.json").read_text())["global_step"])


def warmup_steps(cfg: TrainConfig) -> int:
    """``--warmup-steps``, or the paper's 4000 capped at 10% of ``--max-steps``."""
    if cfg.warmup_steps is not None:
        return cfg.warmup_steps
    return 4000 if cfg.max_steps <= 0 else min(4000, max(1, cfg.max_steps // 10))


def peak_learning_rate(cfg: TrainConfig, d_model: int, warmup: int) -> float:
    """``--learning-rate``, or for ``inverse_sqrt`` the paper's peak ``d_model^-0.5 * warmup^-0.5`` (5e-4 for the
    other schedules)."""
    if cfg.learning_rate is not None:
        return cfg.learning_rate
    return d_model ** -0.5 * max(1, warmup) ** -0.5 if cfg.lr_schedule == "inverse_sqrt" else 5e-4


def run_training(cfg: TrainConfig, callbacks: list | None = None) -> dict[str, Any]:
    """Train as ``cfg`` says; returns the final metrics and paths. Raises :class:`TrainingSetupError` or
    :class:`scratchformer.data.DataError` before training for bad input."""
    check_options(cfg)
    resume_from = _resolve_resume(cfg)

    import torch
    from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainer, Seq2SeqTrainingArguments, set_seed

    from . import data

    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", str(world_size)))
    use_cpu = not torch.cuda.is_available()
    out = Path(cfg.output_dir)

    # Building the arguments sets up torch.distributed under torchrun / accelerate launch.
    args = Seq2SeqTrainingArguments(
        output_dir=str(out),
        seed=cfg.seed,
        use_cpu=use_cpu,
        ddp_backend="gloo" if use_cpu and world_size > 1 else None,
        ddp_find_unused_parameters=False,
        per_device_train_batch_size=cfg.batch_size,
        per_device_eval_batch_size=cfg.eval_batch_size or cfg.batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        max_steps=cfg.max_steps,
        warmup_steps=warmup_steps(cfg),
        num_train_epochs=cfg.num_train_epochs,
        lr_scheduler_type=LR_SCHEDULES[cfg.lr_schedule],
        weight_decay=cfg.weight_decay,
        adam_beta1=cfg.adam_beta1,
        adam_beta2=cfg.adam_beta2,
        adam_epsilon=cfg.adam_epsilon,
        max_grad_norm=cfg.max_grad_norm,
        bf16=cfg.bf16,
        eval_strategy="steps" if cfg.eval_steps > 0 else "no",
        eval_steps=cfg.eval_steps or None,
        save_strategy="steps",
        save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit,
        logging_strategy="steps",
        logging_steps=cfg.logging_steps,
        logging_first_step=True,
        report_to="none",
        disable_tqdm=not cfg.progress_bar,
        dataloader_num_workers=cfg.dataloader_num_workers,
        predict_with_generate=cfg.objective == "seq2seq",
        generation_max_length=cfg.generation_max_length,
        generation_num_beams=cfg.generation_num_beams,
    )
    is_main = args.process_index == 0

    with args.main_process_first(desc="loading data"):
        train_raw, valid_raw, columns, group = load_raw_splits(cfg)
    with args.main_process_first(desc="tokenizer"):
        tokenizer = _tokenizer(cfg, train_raw, columns, is_main, resume_from)
    set_seed(cfg.seed)
    model = _model(cfg, tokenizer, resume_from)
    check_tokenizer_matches(tokenizer, model.config, cfg.objective)

    def tokenize(rows):
        if cfg.objective == "denoise":
            return data.tokenize_for_denoising(rows, tokenizer, cfg.text_column, cfg.max_length,
                                               num_proc=cfg.num_proc)
        return data.tokenize_pairs(rows, tokenizer, cfg.source_column, cfg.target_column, cfg.max_source_length,
                                   cfg.max_target_length, cfg.num_proc)

    with args.main_process_first(desc="tokenizing"):
        train_ds, valid_ds = tokenize(train_raw), tokenize(valid_raw)
    if len(train_ds) == 0:
        raise data.DataError(f"no training example is left after tokenization (texts under 4 tokens are dropped "
                             f"for denoising); {len(train_raw)} rows were read")
    check_batch_size(cfg, model.config, len(train_ds), len(valid_ds), world_size, local_world_size)

    warmup = warmup_steps(cfg)
    lr = args.learning_rate = peak_learning_rate(cfg, model.config.d_model, warmup)

    if cfg.objective == "denoise":
        collator = data.DataCollatorForTextInfilling.from_tokenizer(
            tokenizer, model.config.decoder_start_token_id, mask_ratio=cfg.mask_ratio,
            poisson_lambda=cfg.poisson_lambda, seed=cfg.seed)
        compute_metrics, preprocess = token_accuracy, _argmax_logits
    else:
        collator = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)
        compute_metrics, preprocess = GenerationMetrics(tokenizer), None
        model.generation_config.max_length = cfg.generation_max_length

    own_callbacks = _make_callbacks(collator, cfg.max_minutes)
    time_limit = next((c for c in own_callbacks if hasattr(c, "triggered")), None)
    trainer = Seq2SeqTrainer(
        model=model,
        args=args,
        data_collator=collator,
        train_dataset=train_ds,
        eval_dataset=valid_ds,
        processing_class=tokenizer,
        compute_loss_func=Seq2SeqLoss(cfg.label_smoothing),
        compute_metrics=compute_metrics,
        preprocess_logits_for_metrics=preprocess,
        callbacks=own_callbacks + list(callbacks or []),
    )
    if is_main:
        out.mkdir(parents=True, exist_ok=True)
        (out / "train_config.json").write_text(cfg.to_json())
        print(f"[scratchformer train] {cfg.objective}: {len(train_ds):,} training / {len(valid_ds):,} validation "
              f"examples{f' (held-out groups of {group!r})' if group else ''}; model {model.num_parameters():,} "
              f"parameters; {world_size} process(es); lr {cfg.lr_schedule} peak {lr:.3g}, warm-up {warmup}",
              flush=True)

    start = time.time()
    if resume_from is not None and checkpoint_step(resume_from) >= cfg.max_steps > 0:
        # "--resume --max-steps N" with a checkpoint at step >= N: no more training, just finish the run (final
        # model, evaluation, loss curve) from that checkpoint, e.g. to end a long run early
        from transformers import TrainerState

        trainer.state = TrainerState.load_from_json(str(Path(resume_from) / "trainer_state.json"))
        metrics: dict[str, Any] = {"finished_from_checkpoint": resume_from}
    else:
        train_result = trainer.train(resume_from_checkpoint=resume_from)
        finished = trainer.state.global_step >= trainer.state.max_steps or (time_limit and time_limit.triggered)
        if not finished:
            # stopped early by a callback (e.g. a test's interruption): leave the checkpoints as they are
            return {"global_step": trainer.state.global_step, "stopped": True}
        metrics = dict(train_result.metrics)
        metrics["train_wall_seconds"] = time.time() - start
    eval_metrics = trainer.evaluate()
    metrics.update(eval_metrics)

    result: dict[str, Any] = {"global_step": trainer.state.global_step, "metrics": metrics,
                              "output_dir": str(out)}
    model.config.use_cache = True  # the Trainer turned it off for training; generation wants it
    if cfg.save_dtype == "float32":
        trainer.save_model(str(out))  # writes on the main process only
    if trainer.is_world_process_zero():
        if cfg.save_dtype != "float32":
            _save_converted(model, tokenizer, out, cfg.save_dtype)
        history = loss_history(trainer.state.log_history)
        result["files"] = [str(p) for p in write_loss_curve(history, out, f"scratchformer {cfg.objective}")]
        (out / "all_results.json").write_text(json.dumps(metrics, indent=2))
        print(f"[scratchformer train] done: step {trainer.state.global_step}, " + ", ".join(
            f"{k}={v:.4g}" for k, v in eval_metrics.items() if isinstance(v, float)), flush=True)
    trainer.accelerator.wait_for_everyone()
    return result


def _save_converted(model, tokenizer, out: Path, save_dtype: str) -> None:
    """The final model with its weights in ``save_dtype`` (load it with ``dtype=torch.float32`` to run in fp32)."""
    import copy

    import torch

    copy.deepcopy(model).to(getattr(torch, save_dtype)).save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))


