"""Up-front checks of a run: the options before any data is read (:func:`check_options`), then the tokenizer, the
model and the batch before training; each mistake raises :class:`TrainingSetupError` naming the option."""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import TrainingSetupError
from ..files import available_memory
from ..tokenizer.bpe import SPECIAL_TOKENS
from .options import option_flag, parse_overrides, process_counts, shown
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
    Rule("denoising_weight", lambda v: v >= 0, ">= 0"),
    Rule("encoder_mlm_weight", lambda v: v >= 0, ">= 0 (0 = off)"),
    Rule("encoder_mlm_probability", lambda v: 0 < v < 1, "in (0, 1)"),
    Rule("max_tokens_per_character", lambda v: v > 0, "positive"),
    Rule("electra_weight", lambda v: v >= 0, ">= 0 (0 = off)"),
    Rule("electra_discriminator_weight", lambda v: v > 0, "positive"),
    Rule("electra_generator_width", _at_least(8), ">= 8"),
    Rule("electra_generator_layers", _at_least(1), ">= 1"),
    Rule("word_contrast_weight", lambda v: v >= 0, ">= 0 (0 = off)"),
    Rule("word_contrast_temperature", lambda v: v > 0, "positive"),
    Rule("word_contrast_erase", lambda v: 0 <= v < 1, "in [0, 1)"),
    Rule("word_contrast_occurrences", _at_least(1), ">= 1"),
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
    Rule("save_steps", lambda v: v > 0, "positive"),
    Rule("logging_steps", lambda v: v > 0, "positive"),  # the Trainer refuses 0; -1 would log nothing
    # the Trainer's own parse says "not enough values to unpack (expected 2, got 1)"
    Rule("optim_args", lambda v: all(k and sep and value for k, sep, value in (
        pair.partition("=") for pair in v.replace(" ", "").split(","))),
         "key=value pairs separated by commas (e.g. 'weight_decouple=True,eps=1e-8')"),
    Rule("eval_steps", _at_least(0), ">= 0 (0 = only at the end of the run)"),
    Rule("save_total_limit", _at_least(1), ">= 1"),
    Rule("generation_max_length", _at_least(1), ">= 1"),
    Rule("generation_num_beams", _at_least(1), ">= 1"),
    Rule("seed", lambda v: 0 <= v < 2**32, "in [0, 2**32 - 1] (the seeds numpy takes)"),
    Rule("data_seed", lambda v: 0 <= v < 2**32, "in [0, 2**32 - 1] (the seeds numpy takes)"),
    Rule("eval_accumulation_steps", _at_least(1), ">= 1"),
)


def check_options(options: TrainOptions, args: ScratchformerTrainingArguments) -> None:
    """The mistakes in the options that need no data and that nothing below says clearly, in one place; options
    that have no effect in this run are warned about and ignored (:func:`_warn_ignored`), as transformers does."""
    _check_paths(options, args)
    _check_choices(options)
    for rule in RULES:
        value = getattr(options, rule.name) if hasattr(options, rule.name) else getattr(args, rule.name)
        if value is not None and not rule.holds(value):
            raise TrainingSetupError(f"{option_flag(rule.name)} must be {rule.says}, got {shown(value)}")
    _check_data_source(options)
    if options.objective == "denoise" and options.denoising_weight == 0 and not _encoder_losses_on(options):
        raise TrainingSetupError("--denoising-weight 0 turns the decoder's loss off and no encoder loss is on, "
                                 "so nothing would be learned: add --encoder-mlm-weight 1 (or --electra-weight, "
                                 "--contrastive-weight), or leave --denoising-weight out")
    _warn_ignored(options)
    _check_freezing(options)
    _check_grouping(options)
    _check_streaming(options, args)
    check_sampling(args.train_sampling_strategy, options.streaming)
    _check_config_overrides(options.config_overrides)
    if options.overwrite_output_dir and args.resume_from_checkpoint is not None:
        raise TrainingSetupError("--resume continues the run in --output-dir and --overwrite_output_dir deletes it: "
                                 "give one of them")
    _check_processes(options, args)
    _check_lock_path(args.output_dir)


def _check_processes(options: TrainOptions, args: ScratchformerTrainingArguments) -> None:
    """What needs other processes has them (``--fsdp`` shards over the processes of a ``torchrun`` run), and what
    needs one process has one (``--denoising-weight 0``)."""
    if args.fsdp and process_counts()[0] < 2:
        raise TrainingSetupError("--fsdp shards the model over the processes of a distributed run and this run has "
                                 "one: launch it with torchrun --nproc_per_node=N or accelerate launch "
                                 "(docs/training.md), or leave --fsdp out")
    if options.objective == "denoise" and options.denoising_weight == 0 and process_counts()[0] > 1:
        raise TrainingSetupError("--denoising-weight 0 skips the model's own forward pass, which is where "
                                 "distributed training synchronises the gradients: run it in one process, or give "
                                 "the decoder's loss a weight above 0")


# the options that name files and folders
PATH_OPTIONS = ("train_files", "validation_files", "model", "tokenizer", "cache_dir", "output_dir",
                "resume_from_checkpoint")


def _check_paths(options: TrainOptions, args: ScratchformerTrainingArguments) -> None:
    """A path given as an empty string is refused: ``Path("")`` is the working folder, where an unset shell
    variable would send the run's lock, tokenizer and checkpoints (``--output-dir ""`` ended in a traceback there)."""
    for name in PATH_OPTIONS:
        value = getattr(options, name) if hasattr(options, name) else getattr(args, name)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and not item.strip():
                raise TrainingSetupError(f"{option_flag(name)} is empty ({item!r}): give a path")


def _check_lock_path(output_dir: str | None) -> None:
    """The run's lock file and its holder file (:mod:`scratchformer.training.output_dir`) can be made: nothing
    that is not a plain file stands where they go (a folder there made the lock a traceback)."""
    from .output_dir import HOLDER_NAME, LOCK_NAME

    if output_dir is None:
        return
    for name in (LOCK_NAME, HOLDER_NAME):
        path = Path(output_dir) / name
        if path.is_symlink() or (path.exists() and not path.is_file()):
            kind = "a symbolic link" if path.is_symlink() else "a folder" if path.is_dir() else "not a plain file"
            raise TrainingSetupError(f"--output-dir {output_dir}: {path} is {kind}, where the run keeps its lock "
                                     f"file; remove it, or choose another --output-dir")


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
                  "contrastive_weight", "contrastive_target", "contrastive_temperature", "denoising_weight", "encoder_mlm_weight",
                  "encoder_mlm_probability", "encoder_mlm_whole_words", "electra_weight", "electra_discriminator_weight",
                  "electra_generator_width", "electra_generator_layers", "word_contrast_weight",
                  "word_contrast_temperature", "word_contrast_erase", "word_contrast_erase_word",
                  "word_contrast_occurrences")


ENCODER_LOSSES = ("encoder_mlm_weight", "electra_weight", "contrastive_weight", "word_contrast_weight")  # the losses that train the encoder

# what the tokenizer decides: a new model takes them from it, whatever --config-overrides say
TOKENIZER_FIELDS = ("vocab_size", "pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")


def _encoder_losses_on(options: TrainOptions) -> list[str]:
    """The flags of the encoder's own losses that this run turns on (none outside denoising)."""
    if options.objective != "denoise":
        return []
    return [option_flag(name) for name in ENCODER_LOSSES if getattr(options, name) > 0]


def _warn_ignored(options: TrainOptions) -> None:
    """One warning naming the given options that have no effect in this run (the denoising options of a seq2seq
    run, a companion option without the one it shapes, a tokenizer field in ``--config-overrides``)."""
    defaults = {spec.name: spec.default for spec in dataclasses.fields(options)}
    ignored = [option_flag(name) for name in DENOISING_ONLY
               if options.objective != "denoise" and getattr(options, name) != defaults[name]]
    if options.objective == "denoise" and not _encoder_losses_on(options) and options.denoising_weight != 1:
        ignored.append("--denoising-weight (it weighs the decoder's loss against the encoder's losses)")
    if options.objective == "denoise" and options.encoder_mlm_whole_words and not (
            options.encoder_mlm_weight > 0 or options.electra_weight > 0):
        ignored.append("--encoder-mlm-whole-words (without --encoder-mlm-weight or --electra-weight)")
    if options.group_column is None:
        ignored += [f"{option_flag(name)} (without --group-column)" for name in ("group_pattern", "validation_groups")
                    if getattr(options, name)]
    if not options.model:
        overrides = parse_overrides(options.config_overrides)
        ignored += [f"--config-overrides {key} (the tokenizer decides it)" for key in TOKENIZER_FIELDS
                    if key in overrides]
    if ignored:
        warnings.warn(f"these options have no effect in this run and are ignored: {'; '.join(ignored)}",
                      stacklevel=3)


def _check_freezing(options: TrainOptions) -> None:
    """``--freeze-encoder`` leaves the decoder's loss as the only thing to learn from: the encoder's own losses would
    train nothing."""
    if options.freeze_encoder and (encoder_losses := _encoder_losses_on(options)):
        raise TrainingSetupError(f"--freeze-encoder keeps the encoder's weights and {', '.join(encoder_losses)} "
                                 "trains them: give one of them")


def _check_grouping(options: TrainOptions) -> None:
    """``--group-column`` excludes ``--validation-files``; ``--group-pattern`` must compile and have a group."""
    if options.group_column is None:
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
    it all again), draw a word's other occurrences or hold out whole groups (both need all the rows first)."""
    if not options.streaming:
        return
    if args.max_steps <= 0:
        raise TrainingSetupError("--streaming needs --max-steps N: a stream has no length, so the run (and its "
                                 "learning-rate schedule) is measured in optimizer steps; --num-train-epochs cannot "
                                 "end it (the stream is read again from its start as often as the steps need)")
    if args.dataloader_num_workers > 0:
        raise TrainingSetupError("--streaming reads, tokenizes and noises the stream in each training process; "
                                 "--dataloader-num-workers must be 0 (every worker would read the whole shard again)")
    if options.objective == "denoise" and options.word_contrast_weight > 0 and options.word_contrast_occurrences > 1:
        raise TrainingSetupError("--word-contrast-occurrences draws other occurrences of a word from every training "
                                 "text, which a stream has not read yet: leave it at 1 with --streaming")
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


def _check_positions(config, options: TrainOptions) -> None:
    """Learned positions stop at ``max_position_embeddings``: every sequence of the run must fit (sinusoidal and
    rotary positions go on past it)."""
    if config.position_embedding_type != "learned":
        return
    flag, length = (("--max-length", options.max_length) if options.objective == "denoise" else
                    max(("--max-source-length", options.max_source_length),
                        ("--max-target-length", options.max_target_length), key=lambda pair: pair[1]))
    if config.max_position_embeddings < length:
        where = f"--model {options.model}" if options.model else "the model"
        raise TrainingSetupError(f"{flag} is {length} but the learned positions of {where} stop at "
                                 f"max_position_embeddings={config.max_position_embeddings}: lower {flag}, raise "
                                 "max_position_embeddings in --config-overrides (a new model), or use sinusoidal or "
                                 "rope positions")


def _check_same_vocabulary(options: TrainOptions, tokenizer, config) -> None:
    """A ``--model`` trains on the ids of its own vocabulary: a ``--tokenizer`` with another one (another token
    behind an id) would train it on ids that mean other tokens, silently, as long as the ids fit."""
    if not (options.model and options.tokenizer):
        return
    given = tokenizer.get_vocab()
    own = _vocabulary(config.name_or_path)  # the --model's folder
    if own is not None and given != own:
        moved = sum(own.get(token) != index for token, index in given.items())
        raise TrainingSetupError(f"--tokenizer {options.tokenizer} has another vocabulary than --model "
                                 f"{options.model}'s own tokenizer ({len(given):,} and {len(own):,} tokens; "
                                 f"{moved:,} of its tokens have another id or none in the model's): leave out "
                                 "--tokenizer to train with the model's own")
    if own is None and len(given) != config.vocab_size:
        raise TrainingSetupError(f"--tokenizer {options.tokenizer} has {len(given):,} tokens and --model "
                                 f"{options.model} reads {config.vocab_size:,}: a tokenizer of another vocabulary "
                                 "would train the model on ids that mean other tokens; give the model's own tokenizer")


def _vocabulary(folder: str) -> dict[str, int] | None:
    """``token -> id`` of the ``tokenizer.json`` in ``folder`` (added tokens included), or ``None`` where there is
    no readable one (the tokenizer's loader then says why, or the folder holds another kind of tokenizer)."""
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        return None
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(path)).get_vocab(with_added_tokens=True)
    except Exception:  # tokenizers raises its own bare Exception for a file it cannot parse
        return None


def check_resume_steps(resume_from: str | None, max_steps: int) -> None:
    """``--resume CHECKPOINT --max-steps N``: N at the checkpoint's step finishes the run from it; N below it would
    end a run before a step it has already trained (and report the checkpoint's weights as N steps')."""
    from .resume import checkpoint_step

    if resume_from is None or max_steps <= 0:
        return
    step = checkpoint_step(resume_from)
    if max_steps < step:
        raise TrainingSetupError(f"--max-steps {max_steps} is below the step of the checkpoint to resume, "
                                 f"{resume_from} (step {step}): give --max-steps {step} to finish the run from it, "
                                 f"or --resume an earlier checkpoint-N with N <= {max_steps}")


def check_tokenizer_matches(tokenizer, config, options: TrainOptions) -> None:
    """Once both are built: :func:`scratchformer.loading.check_tokenizer_matches` (denoising needs ``<mask>``), a
    ``--tokenizer`` of the ``--model``'s vocabulary, and learned positions that reach every sequence."""
    from ..loading import check_tokenizer_matches as check

    _check_positions(config, options)
    _check_same_vocabulary(options, tokenizer, config)
    check(tokenizer, config, needs_mask=options.objective == "denoise", error=TrainingSetupError)


# --------------------------------------------------------------------------------------------------------------------
# The batch against the data and the memory
# --------------------------------------------------------------------------------------------------------------------


def estimate_step_memory(config, batch_size: int, source_length: int, target_length: int) -> int:
    """A rough upper estimate, in bytes, of the memory one float32 training step needs on one process (the terms
    are in docs/training.md)."""
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
    """One optimizer step's examples are no more than the training examples (unknown for a stream), and the
    estimated memory of a full-length step times the processes on this machine is below the memory available."""
    batch, accumulation = args.per_device_train_batch_size, args.gradient_accumulation_steps
    per_step = batch * world_size * accumulation
    if num_train is not None and per_step > num_train:
        raise TrainingSetupError(
            f"the batch does not fit the data: one optimizer step takes {per_step} examples (--batch-size "
            f"{batch} x {world_size} process(es) x --gradient-accumulation-steps {accumulation}) but there are only "
            f"{num_train} training examples")
    if num_eval < 1:
        raise TrainingSetupError("the validation set is empty")
    check_step_memory(options, args, config, local_world_size)


def check_step_memory(options: TrainOptions, args: ScratchformerTrainingArguments, config,
                      local_world_size: int) -> None:
    """The estimated memory of a full-length training step (:func:`estimate_step_memory`) times the processes on
    this machine is below the memory available now."""
    batch = args.per_device_train_batch_size
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
