"""The options of ``scratchformer train``: :class:`TrainOptions` (ours) and :class:`ScratchformerTrainingArguments`
(the Trainer's, with our defaults), read together by ``HfArgumentParser``; they never share a field."""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

import torch
from transformers import HfArgumentParser, Seq2SeqTrainingArguments
from transformers.trainer_utils import IntervalStrategy, SchedulerType

from ..errors import TrainingSetupError, one_line
from ..models import SAVE_DTYPES
from .schedule import default_warmup_steps

LATEST = "latest"  # what ``--resume`` without a value means (training.resume resolves it)

OBJECTIVES = ("denoise", "seq2seq")
STREAM_TOKENIZER_ROWS = 100_000  # --tokenizer-max-rows when --streaming leaves it unset

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


def _option(default: Any, help: str, **argparse_options: Any) -> Any:
    """A dataclass field with its ``--help`` text (and extra ``argparse`` settings such as ``choices``)."""
    return field(default=default, metadata={"help": help, **argparse_options})


@dataclass
class TrainOptions:
    """scratchformer's own options of ``scratchformer train`` (the flag is the field name, with ``-`` or ``_``)."""

    _argument_group_name = "scratchformer options"

    # --- data
    objective: str = _option("denoise", "denoise: BART text infilling on plain text; seq2seq: source -> target "
                                        "columns", choices=OBJECTIVES)
    train_files: list[str] | None = _option(None, "training data: .txt (one example per line), .tsv, .csv, .jsonl "
                                                  "(each optionally .gz)")
    validation_files: list[str] | None = _option(None, "validation data (default: held out from the training data)")
    data_format: str | None = _option(None, "txt, tsv, csv or jsonl (default: from the file names)")
    dataset_name: str | None = _option(None, "a Hugging Face Hub dataset instead of files (needs the Hub)")
    dataset_config: str | None = _option(None, "configuration name of --dataset-name")
    text_column: str = _option("text", "column with the text (denoise)")
    source_column: str | None = _option(None, "source column (seq2seq), e.g. kjv")
    target_column: str | None = _option(None, "target column (seq2seq), e.g. web")
    group_column: str | None = _option(None, "hold out whole groups of rows for validation, a group being the rows "
                                             "with the same value in this column (default: random rows)")
    group_pattern: str | None = _option(None, "with --group-column: a regular expression whose first group names "
                                              "a row's group, e.g. '^(.*?\\S)\\s+\\d+:\\d+$' for the book of "
                                              "'Genesis 1:1'; a value it does not match is its own group")
    validation_groups: list[str] | None = _option(None, "the groups to hold out (default: random, seeded, until "
                                                        "--validation-fraction is reached)")
    validation_fraction: float = _option(0.05, "fraction of the rows held out for validation")
    streaming: bool = _option(False, "read the training data as a stream (datasets' IterableDataset), tokenized on "
                                     "the fly, one shard per process; needs --max-steps (docs/training.md)")
    streaming_validation_rows: int = _option(512, "with --streaming and no --validation-files: the first this many "
                                                  "rows of the stream are the validation set, held out from "
                                                  "training")
    max_train_samples: int | None = _option(None, "use at most this many training rows (after the split)")
    max_eval_samples: int | None = _option(512, "evaluate on at most this many validation rows (0 = all)")
    max_length: int = _option(128, "denoise: texts are cut into chunks of at most this many tokens")
    max_source_length: int = _option(128, "seq2seq: source truncation length in tokens")
    max_target_length: int = _option(128, "seq2seq: target truncation length in tokens")
    mask_ratio: float = _option(0.3, "denoise: fraction of tokens covered by masked spans, in [0, 1)")
    poisson_lambda: float = _option(3.0, "denoise: mean span length (Poisson lambda)")
    short_fraction: float = _option(0.0, "denoise: also train on a short window (3-20 consecutive words) of about "
                                         "this fraction of the training rows (BERT's short_seq_prob), in [0, 1]")
    pack: bool = _option(False, "denoise: join consecutive chunks of text (each with its </s>) into training "
                                "examples of up to --max-length tokens (Cramming's packing)")
    max_tokens_per_character: float | None = _option(None, "denoise: drop the training rows with more tokens per "
                                                            "character than this (Cramming's corpus filtering)")
    contrastive_weight: float = _option(0.0, "denoise: add a contrastive loss on the encoder with this weight "
                                             "(Contriever's cropping, InfoNCE); 0 = off (docs/training.md)")
    contrastive_target: str = _option("tokens", "with --contrastive-weight: what must find the other window, each "
                                                "token vector of a window or its mean", choices=("tokens", "sentence"))
    contrastive_temperature: float = _option(0.05, "with --contrastive-weight: the InfoNCE temperature, > 0")
    denoising_weight: float = _option(1.0, "denoise: the weight of the decoder's denoising loss; 0 trains the "
                                           "encoder on its own losses alone and skips the decoder (one process)")
    freeze_encoder: bool = _option(False, "train the decoder alone: the encoder and the embedding table it shares "
                                          "with the decoder keep their weights (docs/training.md)")
    encoder_mlm_weight: float = _option(0.0, "denoise: add BERT's masked-token loss on the encoder with this "
                                             "weight; 0 = off (docs/training.md)")
    encoder_mlm_probability: float = _option(0.15, "with --encoder-mlm-weight: the share of tokens chosen (80 %% "
                                                   "become <mask>, 10 %% a random token, 10 %% stay), in (0, 1)")
    encoder_mlm_whole_words: bool = _option(False, "with --encoder-mlm-weight or --electra-weight: choose whole "
                                                   "words, all their pieces together (BERT's whole-word masking)")
    electra_weight: float = _option(0.0, "denoise: add ELECTRA's replaced-token detection on the encoder with this "
                                         "weight; 0 = off (docs/training.md)")
    electra_discriminator_weight: float = _option(50.0, "with --electra-weight: ELECTRA's lambda, the weight of "
                                                        "the detection loss against the generator's")
    electra_generator_width: int | None = _option(None, "with --electra-weight: the generator's width (default: a "
                                                        "quarter of d_model)")
    electra_generator_layers: int | None = _option(None, "with --electra-weight: the generator's layers (default: "
                                                         "the encoder's)")
    word_contrast_weight: float = _option(0.0, "denoise: add a word-level self-contrast loss on the encoder with "
                                               "this weight (MirrorWiC); 0 = off (docs/training.md)")
    word_contrast_temperature: float = _option(0.05, "with --word-contrast-weight: the InfoNCE temperature, > 0")
    word_contrast_erase: float = _option(0.2, "with --word-contrast-weight: the share of each view's window erased "
                                              "as one span that never touches the word, in [0, 1)")
    word_contrast_erase_word: bool = _option(False, "with --word-contrast-weight: also erase the word itself in one "
                                                    "view, so that its context must carry it")
    word_contrast_occurrences: int = _option(1, "with --word-contrast-weight: draw each word with this many "
                                                "occurrences in a batch (the others from other training texts), so "
                                                "its negatives include the same word in other sentences")
    num_proc: int | None = _option(None, "processes for datasets.map")
    cache_dir: str | None = _option(None, "datasets cache folder (default: the datasets default)")
    # --- model and tokenizer
    model: str | None = _option(None, "start from this checkpoint folder (fine-tuning) instead of a random model; "
                                      "'small' is the checkpoint shipped in the package")
    preset: str = _option("mini", "model size for a new model (docs/training.md)", choices=tuple(PRESETS))
    config_overrides: str | None = _option(None, "ScratchformerConfig fields, e.g. 'd_model=256,encoder_layers=4,"
                                                 "pre_layer_norm=true'")
    tokenizer: str | None = _option(None, "tokenizer folder (default: the --model's, else train one on the "
                                          "training text and save it in OUTPUT_DIR/tokenizer)")
    tokenizer_vocab_size: int = _option(16000, "vocabulary size of a tokenizer trained on the fly (byte-level BPE)")
    tokenizer_max_rows: int | None = _option(None, "train the tokenizer on at most this many training rows "
                                                   f"(default: all; with --streaming the first {STREAM_TOKENIZER_ROWS:,})")
    trust_remote_code: bool = _option(False, "run the Python code that a --model / --tokenizer folder of another "
                                             "model type ships (a scratchformer folder's code never runs)")
    # --- the run
    max_minutes: float | None = _option(None, "also stop (with checkpoint, final model and evaluation) after this "
                                              "many minutes of training")
    stop_on_nonfinite: bool = _option(True, "stop the run at the step where its training loss becomes NaN or "
                                            "infinite, keeping the checkpoints saved before it, and exit with an "
                                            "error (--no-stop-on-nonfinite trains on)")
    save_dtype: str = _option("float32", "dtype of the final model's weights (checkpoints stay float32)",
                              choices=SAVE_DTYPES)
    overwrite_output_dir: bool = _option(False, "start a new run in an --output-dir that holds an earlier run or "
                                                "model: its checkpoints, tokenizer and run files are deleted first "
                                                "(without this or --resume such a folder is refused)")


def _trainer_field(name: str, default: Any, help: str | None = None, **argparse_options: Any) -> Any:
    """``Seq2SeqTrainingArguments``' field ``name`` with scratchformer's ``default`` (and, where given, our help text
    and extra ``argparse`` settings, e.g. ``aliases`` for an earlier spelling of the option)."""
    metadata = dict(Seq2SeqTrainingArguments.__dataclass_fields__[name].metadata)
    if help is not None:
        metadata["help"] = help
    metadata.update(argparse_options)
    return field(default=default, metadata=metadata)


def _aliases(*names: str) -> list[str]:
    """``--batch-size`` and ``--batch_size`` for ``"batch_size"``."""
    return [spelling for name in names for spelling in (f"--{name.replace('_', '-')}", f"--{name}")]


@dataclass
class ScratchformerTrainingArguments(Seq2SeqTrainingArguments):
    """``transformers.Seq2SeqTrainingArguments`` with scratchformer's defaults, those that depend on other options
    filled in before the Trainer's checks; ``learning_rate`` stays ``None`` until the model is known."""

    _argument_group_name = "Trainer options (transformers.Seq2SeqTrainingArguments, with scratchformer's defaults)"

    output_dir: str | None = _trainer_field(
        "output_dir", None, "folder for checkpoints, the final model, logs and the loss curve (required)",
        required=True, metavar="DIR")
    per_device_train_batch_size: int = _trainer_field(
        "per_device_train_batch_size", 32, "examples per process per micro-batch", aliases=_aliases("batch_size"),
        metavar="N")
    per_device_eval_batch_size: int | None = _trainer_field(
        "per_device_eval_batch_size", None, "evaluation batch size per process (default: --batch-size)",
        aliases=_aliases("eval_batch_size"), metavar="N")
    num_train_epochs: float = _trainer_field("num_train_epochs", 1.0, "epochs, when --max-steps is not given")
    learning_rate: float | None = _trainer_field(
        "learning_rate", None, "peak learning rate (default for inverse_sqrt: the paper's d_model^-0.5 * "
                               "warmup^-0.5, at most 1e-3 * (d_model/512)^-0.5; 5e-4 for the other schedules; a "
                               "peak above twice that cap is warned about)")
    lr_scheduler_type: SchedulerType | str = _trainer_field(
        "lr_scheduler_type", "inverse_sqrt", "learning-rate schedule (a transformers SchedulerType): inverse_sqrt "
                                             "is the paper's linear warm-up then 1/sqrt(step); linear, cosine and "
                                             "constant_with_warmup also warm up linearly, constant does not",
        aliases=_aliases("lr_schedule"), metavar="SCHEDULE")
    warmup_steps: float | None = _trainer_field(
        "warmup_steps", None, "linear warm-up steps, or a fraction < 1 of the training steps (default: the paper's "
                              "4000, at most half of the training steps)")
    adam_beta2: float = _trainer_field("adam_beta2", 0.98, "Adam beta2 (paper: 0.98)")
    adam_epsilon: float = _trainer_field("adam_epsilon", 1e-9, "Adam epsilon (paper: 1e-9)")
    label_smoothing_factor: float = _trainer_field(
        "label_smoothing_factor", 0.1, "label smoothing epsilon of the training loss (paper: 0.1); evaluation "
                                       "reports the plain cross-entropy", aliases=_aliases("label_smoothing"),
        metavar="EPSILON")
    eval_strategy: IntervalStrategy | str = _trainer_field("eval_strategy", "steps")
    eval_steps: float | None = _trainer_field(
        "eval_steps", 500, "evaluate every this many steps (0 = only at the end of the run)")
    save_total_limit: int | None = _trainer_field("save_total_limit", 3, "keep at most this many checkpoints")
    logging_steps: float = _trainer_field("logging_steps", 50, "log the training loss every this many steps")
    logging_first_step: bool = _trainer_field("logging_first_step", True)
    # the Trainer's filter reads every micro-batch's loss on the host (bool of a device tensor: a GPU sync per step)
    # to keep NaN out of the logged mean; --stop-on-nonfinite stops such a run without one (callbacks.NonFiniteLoss)
    logging_nan_inf_filter: bool = _trainer_field(
        "logging_nan_inf_filter", False, "leave NaN/inf losses out of the logged training loss (costs a host "
                                         "synchronisation per step on a GPU; a run stops at a non-finite loss "
                                         "anyway, see --no-stop-on-nonfinite)")
    report_to: None | str | list[str] = _trainer_field(
        "report_to", "none", "where to report the logs besides loss_history.json and loss_curve.png: none, all, or "
                             "one or more of tensorboard, trackio, wandb, mlflow, ... (the Trainer's integrations; "
                             "several separated by spaces or commas)", nargs="+", metavar="INTEGRATION")
    disable_tqdm: bool = _trainer_field("disable_tqdm", False, "no progress bar", aliases=_aliases("no_progress_bar"))
    ddp_find_unused_parameters: bool | None = _trainer_field("ddp_find_unused_parameters", False)
    resume_from_checkpoint: str | None = _trainer_field(
        "resume_from_checkpoint", None, "continue the run in OUTPUT_DIR from its newest complete checkpoint (no "
                                        "value, or 'latest'), or from the given checkpoint folder; options that "
                                        "would change the run are refused", aliases=["--resume"], nargs="?",
        const=LATEST)
    generation_max_length: int | None = _trainer_field(
        "generation_max_length", 128, "seq2seq: longest generated output during evaluation")
    generation_num_beams: int | None = _trainer_field(
        "generation_num_beams", 1, "seq2seq: beams during evaluation (1 = greedy)")

    def __post_init__(self):
        self._fill_in_dependent_defaults()
        super().__post_init__()

    def __getstate__(self) -> dict[str, Any]:
        """What pickling stores: every attribute but the Hub token (``hub_token``, any ``*_token``, as ``to_dict``
        hides them), which is stored as ``None``. The Trainer pickles the arguments into ``training_args.bin`` in the
        run folder and every checkpoint, which users upload; the token stays in memory for the Trainer's own push."""
        return {name: None if name.endswith("_token") and isinstance(value, str) else value
                for name, value in self.__dict__.items()}

    def __copy__(self) -> ScratchformerTrainingArguments:
        """A copy that keeps the token (``copy.copy`` would otherwise go through :meth:`__getstate__`)."""
        copied = object.__new__(type(self))
        copied.__dict__.update(self.__dict__)
        return copied

    def __deepcopy__(self, memo: dict) -> ScratchformerTrainingArguments:
        """A deep copy that keeps the token, as :meth:`__copy__` does."""
        copied = object.__new__(type(self))
        memo[id(self)] = copied
        copied.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return copied

    def _fill_in_dependent_defaults(self) -> None:
        self.report_to = _integrations(self.report_to)
        self.warmup_is_default = self.warmup_steps is None  # not a field: the Trainer never sees it
        if self.warmup_steps is None:
            self.warmup_steps = default_warmup_steps(self.max_steps)
        elif self.warmup_steps >= 1 and float(self.warmup_steps).is_integer():
            self.warmup_steps = int(self.warmup_steps)  # a step count, not the fraction a float < 1 would be
        if self.per_device_eval_batch_size is None:
            self.per_device_eval_batch_size = self.per_device_train_batch_size
        if self.eval_steps == 0 and IntervalStrategy(self.eval_strategy) == IntervalStrategy.STEPS:
            self.eval_strategy, self.eval_steps = IntervalStrategy.NO, None
        if not torch.cuda.is_available():
            self.use_cpu = True
        if self.use_cpu and self.ddp_backend is None and process_counts()[0] > 1:
            self.ddp_backend = "gloo"


def _integrations(report_to: None | str | list[str]) -> None | str | list[str]:
    """``--report-to tensorboard wandb`` or ``--report-to tensorboard,wandb``: a list of names (``none`` and
    ``all`` stay as they are, the Trainer reads them)."""
    if report_to is None:
        return None
    names = [name.strip() for value in ([report_to] if isinstance(report_to, str) else report_to)
             for name in str(value).split(",") if name.strip()]
    return names[0] if len(names) == 1 and names[0] in ("none", "all") else names


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows every option's default, except where there is none to show (``None``) or the help text
    already says what the default is."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default in (None, argparse.SUPPRESS) or "%(default)" in text or "(default:" in text:
            return action.help
        return super()._get_help_string(action)


class TrainArgumentParser(HfArgumentParser):
    """``HfArgumentParser`` over both dataclasses; a bad command line raises :class:`TrainingSetupError` instead of
    exiting, and abbreviated options are refused (among a hundred Trainer options an abbreviation is a typo)."""

    def __init__(self) -> None:
        super().__init__(
            (TrainOptions, ScratchformerTrainingArguments), prog="scratchformer train", allow_abbrev=False,
            formatter_class=HelpFormatter,
            usage="%(prog)s (--train-files FILE [FILE ...] | --dataset-name NAME) --output-dir DIR [OPTIONS]",
            description="Denoising pre-training or seq2seq training on the Hugging Face Seq2SeqTrainer. "
                        "scratchformer's own options come first, then every Seq2SeqTrainingArguments option under "
                        "its Hugging Face name (with '_' or '-'); the defaults shown are the ones a run uses.")

    def error(self, message: str):
        raise TrainingSetupError(message)

    def parse(self, argv: list[str]) -> tuple[TrainOptions, ScratchformerTrainingArguments]:
        with _setup_errors():
            options, args, unknown = self.parse_args_into_dataclasses(
                argv, return_remaining_strings=True, look_for_args_file=False)
        if unknown:
            raise TrainingSetupError(f"unrecognized arguments: {' '.join(unknown)}")
        return options, args


def config_from_args(argv: list[str] | None = None) -> tuple[TrainOptions, ScratchformerTrainingArguments]:
    """The options of a ``scratchformer train`` command line (``argv`` without the ``train``)."""
    return TrainArgumentParser().parse(list(argv or []))


def config_from_dict(settings: dict[str, Any]) -> tuple[TrainOptions, ScratchformerTrainingArguments]:
    """The options from a dict of field names of either dataclass (``{"preset": "tiny", "max_steps": 8, ...}``).
    The values are taken as they are (``HfArgumentParser.parse_dict``), not converted as a command line's are."""
    with _setup_errors():
        return TrainArgumentParser().parse_dict(settings)


@contextlib.contextmanager
def _setup_errors() -> Iterator[None]:
    """Parsing's failures as :class:`TrainingSetupError`: the Trainer's own checks of its options (``ValueError``)
    and an option whose package is missing (``ImportError``; ``--deepspeed``: deepspeed)."""
    try:
        yield
    except TrainingSetupError:
        raise
    except ValueError as err:
        raise TrainingSetupError(str(err)) from err
    except ImportError as err:
        raise TrainingSetupError(f"an option needs a package that is not installed: {one_line(err)}") from err


def process_counts() -> tuple[int, int]:
    """``(processes in the run, processes on this machine)``, as ``torchrun`` and ``accelerate launch`` set them."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    return world_size, int(os.environ.get("LOCAL_WORLD_SIZE", str(world_size)))


def shown(value: Any) -> Any:
    """An option's value as the user typed it, for a message: ``-1`` for the ``-1.0`` a float option holds, an enum
    option's value (``paged_adamw_8bit``, not ``OptimizerNames.PAGED_ADAMW_8BIT``)."""
    value = getattr(value, "value", value)
    return int(value) if isinstance(value, float) and value.is_integer() else value


def option_flag(name: str) -> str:
    """How ``--help`` names the field ``name``: its scratchformer alias if it has one (``--batch-size`` for
    ``per_device_train_batch_size``), else the name with dashes."""
    for dataclass_type in (TrainOptions, ScratchformerTrainingArguments):
        spec = dataclass_type.__dataclass_fields__.get(name)
        if spec is not None and spec.metadata.get("aliases"):
            return spec.metadata["aliases"][0]
    return "--" + name.replace("_", "-")


def parse_overrides(text: str | None) -> dict[str, Any]:
    """``"d_model=256,pre_layer_norm=true,activation_function=gelu"`` -> a dict of typed values (JSON numbers,
    ``true``/``false``/``null`` in any case; anything else stays text)."""
    out: dict[str, Any] = {}
    for item in (text or "").split(","):
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


def options_as_dict(options: TrainOptions, args: ScratchformerTrainingArguments) -> dict[str, Any]:
    """Both dataclasses as one flat dict (their field names never collide): what ``train_config.json`` holds."""
    ours = {f.name: getattr(options, f.name) for f in fields(options)}
    return {**ours, **args.to_dict()}
