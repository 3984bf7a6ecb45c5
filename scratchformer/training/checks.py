"""Up-front checks of a run: every mistake that can be found before (or without) training raises
:class:`TrainingSetupError` naming the option, so that a bad run fails in seconds instead of after loading data.

- :func:`check_options`: the options alone (and the packages the objective needs), before any data is read;
- :func:`check_tokenizer_matches`: the tokenizer against the model, before training;
- :func:`check_batch_size`: the batch against the data and the memory of this machine, before training.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import TrainingSetupError
from ..tokenizer.bpe import SPECIAL_TOKENS
from .options import option_flag, parse_overrides
from .sampling import check_sampling

if TYPE_CHECKING:
    from .options import ScratchformerTrainingArguments, TrainOptions

MIN_VOCAB_SIZE = len(SPECIAL_TOKENS) + 256  # a byte-level BPE holds the special tokens and every byte


@dataclass(frozen=True)
class Rule:
    """An option's value must satisfy ``holds``; ``None`` (not given) always passes."""

    name: str
    holds: Callable[[Any], bool]
    says: str


def _at_least(minimum: float) -> Callable[[Any], bool]:
    return lambda value: value >= minimum


RULES = (
    # scratchformer's options
    Rule("max_length", _at_least(2), ">= 2 (room for text and </s>)"),
    Rule("max_source_length", _at_least(1), ">= 1"),
    Rule("max_target_length", _at_least(1), ">= 1"),
    Rule("validation_fraction", lambda v: 0 < v < 1, "in (0, 1)"),
    Rule("max_train_samples", _at_least(1), ">= 1"),
    Rule("max_eval_samples", _at_least(0), ">= 0 (0 = all)"),
    Rule("mask_ratio", lambda v: 0 <= v < 1, "in [0, 1)"),
    Rule("short_fraction", lambda v: 0 <= v <= 1, "in [0, 1]"),
    Rule("poisson_lambda", lambda v: v > 0, "positive"),
    Rule("contrastive_weight", lambda v: v >= 0, ">= 0 (0 = off)"),
    Rule("contrastive_temperature", lambda v: v > 0, "positive"),
    Rule("encoder_mlm_weight", lambda v: v >= 0, ">= 0 (0 = off)"),
    Rule("encoder_mlm_probability", lambda v: 0 < v < 1, "in (0, 1)"),
    Rule("max_tokens_per_character", lambda v: v > 0, "positive"),
    Rule("electra_weight", lambda v: v >= 0, ">= 0 (0 = off)"),
    Rule("electra_discriminator_weight", lambda v: v > 0, "positive"),
    Rule("electra_generator_width", _at_least(8), ">= 8"),
    Rule("electra_generator_layers", _at_least(1), ">= 1"),
    Rule("num_proc", _at_least(1), ">= 1"),
    Rule("tokenizer_vocab_size", _at_least(MIN_VOCAB_SIZE),
         f">= {MIN_VOCAB_SIZE} (the {len(SPECIAL_TOKENS)} special tokens and the 256 bytes)"),
    Rule("tokenizer_max_rows", _at_least(1), ">= 1"),
    Rule("streaming_validation_rows", _at_least(1), ">= 1"),
    Rule("max_minutes", lambda v: v > 0, "positive"),
    # the Trainer's options, as scratchformer uses them
    Rule("per_device_train_batch_size", _at_least(1), ">= 1"),
    Rule("per_device_eval_batch_size", _at_least(1), ">= 1"),
    Rule("gradient_accumulation_steps", _at_least(1), ">= 1"),
    Rule("max_steps", lambda v: v == -1 or v > 0, "a positive number of steps, or -1 (train for --num-train-epochs)"),
    Rule("num_train_epochs", lambda v: v > 0, "positive"),
    Rule("learning_rate", lambda v: v > 0, "positive"),
    Rule("warmup_steps", _at_least(0), ">= 0"),
    Rule("label_smoothing_factor", lambda v: 0 <= v < 1, "in [0, 1)"),
    Rule("save_steps", lambda v: v > 0, "positive"),
    Rule("logging_steps", lambda v: v > 0, "positive"),
    Rule("eval_steps", lambda v: v > 0, ">= 0 (0 = only at the end of the run)"),
    Rule("save_total_limit", _at_least(1), ">= 1"),
    Rule("generation_max_length", _at_least(1), ">= 1"),
    Rule("generation_num_beams", _at_least(1), ">= 1"),
)


def check_options(options: TrainOptions, args: ScratchformerTrainingArguments) -> None:
    """Every mistake in the options that needs no data (a value out of range, a missing companion option, a bad
    ``--config-overrides`` or ``--group-pattern``). Raises :class:`TrainingSetupError` naming the option."""
    _check_numbers_are_finite(options, args)
    _check_choices(options)
    for rule in RULES:
        value = getattr(options, rule.name) if hasattr(options, rule.name) else getattr(args, rule.name)
        if value is not None and not rule.holds(value):
            raise TrainingSetupError(f"{option_flag(rule.name)} must be {rule.says}, got {_shown(value)}")
    _check_data_source(options)
    _check_noise_options(options)
    _check_grouping(options)
    _check_streaming(options, args)
    check_sampling(args.train_sampling_strategy, options.streaming)
    _check_config_overrides(options.config_overrides)
    if options.overwrite_output_dir and args.resume_from_checkpoint is not None:
        raise TrainingSetupError("--resume continues the run in --output-dir and --overwrite_output_dir deletes it: "
                                 "give one of them")
    check_metric_packages(options)
    check_reporting_packages(args)


# --report-to integration -> (its availability check in transformers.integrations, the package to install)
REPORTING_PACKAGES = {
    "tensorboard": ("is_tensorboard_available", "tensorboard"),
    "trackio": ("is_trackio_available", "trackio"),
    "wandb": ("is_wandb_available", "wandb"),
    "mlflow": ("is_mlflow_available", "mlflow"),
    "comet_ml": ("is_comet_available", "comet_ml"),
    "clearml": ("is_clearml_available", "clearml"),
    "neptune": ("is_neptune_available", "neptune"),
    "dvclive": ("is_dvclive_available", "dvclive"),
    "swanlab": ("is_swanlab_available", "swanlab"),
}


def check_reporting_packages(args: ScratchformerTrainingArguments) -> None:
    """Each ``--report-to`` integration is one the Trainer knows, and its package is installed: found before any
    data is read, not when the Trainer is built after the data and the tokenizer."""
    from transformers import integrations
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    for name in args.report_to or []:
        if name not in INTEGRATION_TO_CALLBACK:
            raise TrainingSetupError(f"--report-to {name}: not one of the Trainer's integrations "
                                     f"({', '.join(INTEGRATION_TO_CALLBACK)}), nor none or all")
        check, package = REPORTING_PACKAGES.get(name, (None, name))
        if check is not None and not getattr(integrations, check)():
            raise TrainingSetupError(f"--report-to {name} needs the {package} package, which is not installed: "
                                     f"pip install {package}")


def check_metric_packages(options: TrainOptions) -> None:
    """The packages the objective's evaluation needs (seq2seq: sacrebleu for BLEU and chrF), before any data is read
    rather than at the first evaluation."""
    if options.objective != "seq2seq":
        return
    try:
        import sacrebleu  # noqa: F401
    except ImportError:
        raise TrainingSetupError("--objective seq2seq reports BLEU and chrF with sacrebleu, which is not installed: "
                                 "pip install 'scratchformer[train]'") from None


def _shown(value: Any) -> Any:
    """``-1`` for the ``-1.0`` a float option holds, so the message repeats what the user typed."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _check_numbers_are_finite(*dataclass_objects: Any) -> None:
    """No option takes NaN or infinity (``float("nan")`` passes argparse and every comparison-free check)."""
    for obj in dataclass_objects:
        for spec in dataclasses.fields(obj):
            value = getattr(obj, spec.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise TrainingSetupError(f"{option_flag(spec.name)} must be a finite number, got {value}")


def _check_choices(options: TrainOptions) -> None:
    """Options with a fixed set of values (``--objective``, ``--preset``, ``--save-dtype``) hold one of them (the
    command line checks this too; a :class:`TrainOptions` built in Python does not)."""
    for spec in dataclasses.fields(options):
        choices = spec.metadata.get("choices")
        if choices and getattr(options, spec.name) not in choices:
            raise TrainingSetupError(f"{option_flag(spec.name)} must be one of {', '.join(choices)}, got "
                                     f"{getattr(options, spec.name)!r}")


def _check_data_source(options: TrainOptions) -> None:
    if not options.train_files and not options.dataset_name:
        raise TrainingSetupError("give --train-files (local data) or --dataset-name (a Hub dataset)")
    if options.objective == "seq2seq" and not (options.source_column and options.target_column):
        raise TrainingSetupError("--objective seq2seq needs --source-column and --target-column")


# what only denoising uses: the noise of text infilling, and the encoder's own losses (contrastive, masked tokens)
DENOISING_ONLY = ("mask_ratio", "poisson_lambda", "short_fraction", "pack", "max_tokens_per_character",
                  "contrastive_weight", "contrastive_target", "contrastive_temperature", "encoder_mlm_weight",
                  "encoder_mlm_probability", "electra_weight", "electra_discriminator_weight",
                  "electra_generator_width", "electra_generator_layers")


def _check_noise_options(options: TrainOptions) -> None:
    """The noise and encoder-loss options shape denoising only; given to a seq2seq run they would change nothing,
    silently."""
    if options.objective == "denoise":
        return
    defaults = {spec.name: spec.default for spec in dataclasses.fields(options)}
    for name in DENOISING_ONLY:
        if getattr(options, name) != defaults[name]:
            raise TrainingSetupError(f"{option_flag(name)} belongs to --objective denoise; a seq2seq run adds no "
                                     f"noise and no encoder loss, so leave it out")


def _check_grouping(options: TrainOptions) -> None:
    """``--group-pattern`` and ``--validation-groups`` need ``--group-column``, which ``--validation-files``
    excludes; the pattern must compile and have a group."""
    if options.group_column is None:
        for name in ("group_pattern", "validation_groups"):
            if getattr(options, name):
                raise TrainingSetupError(f"{option_flag(name)} needs --group-column")
        return
    if options.validation_files:
        raise TrainingSetupError("--group-column holds out groups of the training data; it cannot be combined "
                                 "with --validation-files")
    if options.group_pattern is not None:
        try:
            pattern = re.compile(options.group_pattern)
        except re.error as err:
            raise TrainingSetupError(f"--group-pattern {options.group_pattern!r} is not a regular expression: "
                                     f"{err}") from None
        if pattern.groups < 1:
            raise TrainingSetupError(f"--group-pattern {options.group_pattern!r} has no (group) to name a row's "
                                     "group with")


def _check_streaming(options: TrainOptions, args: ScratchformerTrainingArguments) -> None:
    """What a stream cannot do: end by epochs (it has no length), be read by data-loader workers (each would read
    it all again), or hold out whole groups (that needs all the rows first)."""
    if not options.streaming:
        return
    if args.max_steps <= 0:
        raise TrainingSetupError("--streaming needs --max-steps N: a stream has no length, so the run (and its "
                                 "learning-rate schedule) is measured in optimizer steps; --num-train-epochs cannot "
                                 "end it (the stream is read again from its start as often as the steps need)")
    if args.dataloader_num_workers > 0:
        raise TrainingSetupError("--streaming reads, tokenizes and noises the stream in each training process; "
                                 "--dataloader-num-workers must be 0 (every worker would read the whole shard again)")
    if options.group_column is not None:
        raise TrainingSetupError("--group-column holds out whole groups, which needs every row first; with "
                                 "--streaming give --validation-files, or let --streaming-validation-rows hold out "
                                 "the first rows of the stream")


def _check_config_overrides(text: str | None) -> None:
    """``--config-overrides`` must be ``key=value`` pairs naming ``ScratchformerConfig`` fields."""
    overrides = parse_overrides(text)
    if not overrides:
        return
    from ..models import ScratchformerConfig

    unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(ScratchformerConfig)})
    if unknown:
        raise TrainingSetupError(f"--config-overrides: unknown ScratchformerConfig field(s) {unknown}")


def check_tokenizer_matches(tokenizer, config, objective: str) -> None:
    """:func:`scratchformer.loading.check_tokenizer_matches`, as a :class:`TrainingSetupError`; denoising needs
    ``<mask>``."""
    from ..loading import check_tokenizer_matches as check

    check(tokenizer, config, needs_mask=objective == "denoise", error=TrainingSetupError)


# --------------------------------------------------------------------------------------------------------------------
# The batch against the data and the memory
# --------------------------------------------------------------------------------------------------------------------


def available_memory() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (``None`` where there is no such file)."""
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
    d, S, T = config.d_model, source_length, target_length
    params = (config.vocab_size * d
              + config.encoder_layers * (4 * d ** 2 + 2 * d * config.encoder_ffn_dim)
              + config.decoder_layers * (8 * d ** 2 + 2 * d * config.decoder_ffn_dim))
    enc = batch_size * S * config.encoder_layers * (12 * d + 3 * config.encoder_ffn_dim
                                                    + 3 * config.encoder_attention_heads * S)
    dec = batch_size * T * config.decoder_layers * (20 * d + 3 * config.decoder_ffn_dim
                                                    + 3 * config.decoder_attention_heads * (T + S))
    head = batch_size * T * 4 * config.vocab_size
    return 16 * params + 4 * (enc + dec + head)


def check_batch_size(options: TrainOptions, args: ScratchformerTrainingArguments, config, num_train: int | None,
                     num_eval: int, world_size: int, local_world_size: int) -> None:
    """A batch size fits when (1) one optimizer step's examples, ``batch_size x processes x accumulation``, are no
    more than the training examples (unknown for a stream: ``num_train`` is ``None``), and (2) the estimated
    memory of a step with full-length sequences (:func:`estimate_step_memory`) times the processes on this machine
    is below the memory available now."""
    batch, accumulation = args.per_device_train_batch_size, args.gradient_accumulation_steps
    per_step = batch * world_size * accumulation
    if num_train is not None and per_step > num_train:
        raise TrainingSetupError(
            f"the batch does not fit the data: one optimizer step takes {per_step} examples (--batch-size "
            f"{batch} x {world_size} process(es) x --gradient-accumulation-steps {accumulation}) but there are only "
            f"{num_train} training examples")
    if num_eval < 1:
        raise TrainingSetupError("the validation set is empty")
    denoise = options.objective == "denoise"
    src = options.max_length if denoise else options.max_source_length
    tgt = options.max_length if denoise else options.max_target_length
    need = estimate_step_memory(config, batch, src, tgt) * local_world_size
    have = available_memory()
    if have is not None and need > 0.9 * have:
        raise TrainingSetupError(
            f"the batch does not fit in memory: a training step with --batch-size {batch} and {max(src, tgt)}-token "
            f"sequences needs about {need / 2**30:.1f} GiB on {local_world_size} process(es), "
            f"{have / 2**30:.1f} GiB are available; lower --batch-size and raise --gradient-accumulation-steps")
