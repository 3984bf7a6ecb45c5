"""``scratchformer train``: one training pipeline on ``transformers.Seq2SeqTrainer``, from a laptop to many
machines (``torchrun`` or ``accelerate launch``). :func:`run_training` is a sequence of named steps; each step's job
is in its docstring."""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path
from typing import Any

import torch
from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainer, TrainerState, set_seed

from .. import files
from ..errors import NonFiniteLossError, no_secrets
from ..integrity import CHECKSUMS, check_finite, write_checksums
from . import checks, data, streaming
from .callbacks import RUN_RECORD, EpochCallback, NonFiniteLoss, RunRecord, TimeLimit, WatchesLoss
from .checkpoints import CrashSafeCheckpoints, evaluation_at, stopped_run_advice
from .contrastive import CROP_KEYS, CroppingLoss
from .electra import TrainsLossModules, check_electra, replaced_token_detection
from .encoder_losses import EncoderLosses
from .encoder_mlm import MLM_KEYS, MaskedTokenLoss
from .history import loss_history, write_loss_curve
from .metrics import GenerationMetrics, Seq2SeqLoss, argmax_logits, token_accuracy
from .model_setup import build_model, check_model_sources, freeze_encoder, load_tokenizer
from .noise import DataCollatorForTextInfilling
from .options import ScratchformerTrainingArguments, TrainOptions, process_counts, shown
from .output_dir import check_apart_from_inputs, claim_output_dir
from .resume import continue_run_options, finishes_without_training, resolve_resume, run_config
from .sampling import SeededSampling
from .schedule import default_warmup_steps, learning_rate_warning, peak_learning_rate, training_step_count
from .sharding import SavesPlainModelClass, prepare_sharding
from .word_contrast import WORD_KEYS, WordContrastCollator, WordContrastLoss, word_contrast_parts

LOG_PREFIX = "[scratchformer train]"


class ScratchformerTrainer(CrashSafeCheckpoints, SavesPlainModelClass, SeededSampling, streaming.StreamedTrainData,
                           EncoderLosses, TrainsLossModules, WatchesLoss, Seq2SeqTrainer):
    """``Seq2SeqTrainer`` with crash-safe checkpoints, a stream as training data, seeded sampling, sharded saving as
    our own class, and the encoder's own losses (one mixin each)."""

    extra_keys = CROP_KEYS + MLM_KEYS + WORD_KEYS


def run_training(options: TrainOptions, args: ScratchformerTrainingArguments,
                 callbacks: list | None = None) -> dict[str, Any]:
    """Train as the options say; returns ``{"global_step", "metrics", "output_dir", "files"}`` (``"stopped": True``
    when a callback stopped it). Bad input raises before training; ``args`` is not changed."""
    checks.check_options(options, args)
    check_apart_from_inputs(options, args.output_dir)
    is_main = args.process_index == 0
    lock = (claim_output_dir(args.output_dir, args.resume_from_checkpoint, options.overwrite_output_dir, _say)
            if is_main else None)
    try:
        # the Trainer's pushes show no token; a refused write the steps below do not name themselves (the datasets
        # cache, a log file) is a StorageError naming its file; SIGTERM and SIGHUP end the run as Ctrl-C does (a
        # checkpoint being staged is removed, the lock released)
        with no_secrets(args.hub_token), files.writing(args.output_dir, reading=None, named_by_error=True), \
                files.signals_end_the_block():
            return _run(options, args, callbacks, is_main)
    finally:
        if lock is not None:
            lock.release()


def _run(options: TrainOptions, args: ScratchformerTrainingArguments, callbacks: list | None,
         is_main: bool) -> dict[str, Any]:
    """:func:`run_training` once the output folder is the run's."""
    say = _say if is_main else (lambda text: None)
    world_size, local_world_size = process_counts()
    check_model_sources(options)
    check_electra(options, world_size)
    if options.streaming:  # the stream's position is restored from the checkpoint, not by skipping batches
        args = copy.copy(args)
        args.ignore_data_skip = True
    resume_from = resolve_resume(args.output_dir, args.resume_from_checkpoint, say)
    checks.check_resume_steps(resume_from, args.max_steps)
    if resume_from is not None:
        args = continue_run_options(options, args, resume_from, world_size, say)
        if options.streaming:
            streaming.check_resume(resume_from, world_size)
    splits = _load_data(options, args)
    tokenizer, model = _tokenizer_and_model(options, args, splits, resume_from)
    train_ds, valid_ds = _tokenize(options, args, splits, tokenizer)
    num_train = None if options.streaming else len(train_ds)
    checks.check_batch_size(options, args, model.config, num_train, len(valid_ds), world_size, local_world_size)
    args = _with_model_dependent_arguments(options, args, model, num_train, world_size, resume_from, say)
    trainer, time_limit = _build_trainer(options, args, model, tokenizer, train_ds, valid_ds, callbacks)
    prepare_sharding(options, trainer, model, say)
    if options.streaming:
        _stream_into(trainer, train_ds, resume_from)
    _keep_a_record(trainer, args, world_size, resume_from)
    _loss_modules_in_checkpoints(trainer, resume_from)
    trainer.run_config = run_config(options, args, world_size)
    _announce(options, args, trainer, splits, num_train, len(valid_ds), world_size)
    metrics = _train(trainer, args, resume_from, time_limit)
    if metrics is None:
        # stopped early by a callback (e.g. a test's interruption): leave the checkpoints as they are
        return {"global_step": trainer.state.global_step, "stopped": True}
    return _finish(options, args, trainer, tokenizer, metrics)


def _say(text: str) -> None:
    print(f"{LOG_PREFIX} {text}", file=sys.stderr, flush=True)


def _load_data(options: TrainOptions, args: ScratchformerTrainingArguments) -> data.RawSplits:
    """The raw training and validation rows (the main process first; the others reuse its ``datasets`` cache); with
    ``--streaming`` the training rows are a stream, not read yet."""
    trained = options.train_files or []
    for path in options.validation_files or []:
        also = next((t for t in trained if files.overlap(path, t) == "is"), None)
        if also is not None and args.process_index == 0:
            _say(f"warning: --validation-files {path} is the training file {also}: the validation loss is measured "
                 "on rows the model trains on, so it says nothing of unseen text")
    if options.streaming:
        return streaming.load_stream_splits(options, args.seed)
    with args.main_process_first(desc="loading data"):
        return data.load_raw_splits(options, args.seed)


def _tokenizer_and_model(options: TrainOptions, args: ScratchformerTrainingArguments, splits: data.RawSplits,
                         resume_from: str | None):
    """The tokenizer (trained by global rank 0 alone, ``local=False``; the others wait and load it), then the seeded
    model; they must match."""
    with args.main_process_first(local=False, desc="tokenizer"):
        tokenizer = load_tokenizer(options, args.output_dir, splits.train, splits.columns, args.process_index,
                                   resume_from)
    set_seed(args.seed)
    model = build_model(options, tokenizer, resume_from, args.max_steps,  # a typo's huge model: refused before allocation
                        lambda config: checks.check_step_memory(options, args, config, process_counts()[1]))
    if options.freeze_encoder:
        freeze_encoder(model)
    checks.check_tokenizer_matches(tokenizer, model.config, options)
    return tokenizer, model


def _tokenize(options: TrainOptions, args: ScratchformerTrainingArguments, splits: data.RawSplits, tokenizer):
    """``(train, validation)`` token datasets for the objective; :class:`DataError` when no training example is
    left."""
    if options.streaming:  # this process's shard, tokenized as training reads it
        train_ds = streaming.token_stream(options, splits.train, tokenizer, args.process_index, args.world_size,
                                          args.device, args.seed)
        return train_ds, data.tokenize_for_objective(splits.validation, tokenizer, options, args.seed)
    with args.main_process_first(desc="tokenizing"):
        train_ds = data.tokenize_for_objective(splits.train, tokenizer, options, args.seed, training=True)
        valid_ds = data.tokenize_for_objective(splits.validation, tokenizer, options, args.seed)
    if len(train_ds) == 0:
        raise data.DataError(f"no training example is left after tokenization (texts under 4 tokens are dropped "
                             f"for denoising); {len(splits.train)} rows were read")
    return train_ds, valid_ds


def _with_model_dependent_arguments(options: TrainOptions, args: ScratchformerTrainingArguments, model,
                                    num_train: int | None, world_size: int, resume_from: str | None,
                                    say) -> ScratchformerTrainingArguments:
    """A copy of ``args`` with what depends on the model, the data and the objective: an epoch run's default warm-up,
    the peak learning rate (warned about above the safe bound) and generation during evaluation (seq2seq)."""
    args = copy.copy(args)
    per_step = args.per_device_train_batch_size * world_size * args.gradient_accumulation_steps
    steps = training_step_count(args.max_steps, args.num_train_epochs, num_train or 0, per_step)
    if getattr(args, "warmup_is_default", False) and args.max_steps <= 0:
        args.warmup_steps = default_warmup_steps(steps)
    d_model = model.config.d_model if hasattr(model.config, "d_model") else model.config.hidden_size
    args.learning_rate = peak_learning_rate(args.learning_rate, args.lr_scheduler_type, d_model,
                                            args.get_warmup_steps(steps))
    warning = learning_rate_warning(args.learning_rate, d_model)
    if warning and resume_from is None:
        say(f"warning: {warning}")
    args.predict_with_generate = options.objective == "seq2seq"
    return args


def _objective_parts(options: TrainOptions, args: ScratchformerTrainingArguments, tokenizer, model, train_ds):
    """``(collator, compute_metrics, preprocess_logits_for_metrics)`` of the objective (for seq2seq, also the model's
    generation length during evaluation, and generation with the key/value cache)."""
    if options.objective == "denoise":
        words = word_contrast_parts(options, tokenizer, train_ds) if options.word_contrast_weight > 0 else {}
        collator = (WordContrastCollator if words else DataCollatorForTextInfilling).from_tokenizer(
            tokenizer, model.config.decoder_start_token_id, mask_ratio=options.mask_ratio,
            poisson_lambda=options.poisson_lambda, seed=args.seed, crop_pairs=options.contrastive_weight > 0,
            encoder_mlm_probability=(options.encoder_mlm_probability
                                     if options.encoder_mlm_weight > 0 or options.electra_weight > 0 else 0.0),
            mlm_whole_words=options.encoder_mlm_whole_words, **words)
        return collator, token_accuracy, argmax_logits
    model.generation_config.max_length = args.generation_max_length
    # The Trainer turns the config's use_cache off for training; evaluation generates with the key/value cache
    # whatever the --model folder's config says (a folder without generation_config.json takes use_cache from its
    # config.json, and a checkpoint's says false): without it greedy decoding is 4-14x slower (benchmarks/RESULTS.md)
    model.generation_config.use_cache = True
    return DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100), GenerationMetrics(tokenizer), None


def _build_trainer(options: TrainOptions, args: ScratchformerTrainingArguments, model, tokenizer, train_ds,
                   valid_ds, callbacks: list | None) -> tuple[ScratchformerTrainer, TimeLimit | None]:
    """The ``Seq2SeqTrainer`` with our loss, metrics and callbacks (and the caller's), and the time limit if any."""
    collator, compute_metrics, preprocess = _objective_parts(options, args, tokenizer, model, train_ds)
    time_limit = TimeLimit(options.max_minutes) if options.max_minutes else None
    loss_watch = NonFiniteLoss() if options.stop_on_nonfinite else None
    own_callbacks = [c for c in (EpochCallback(collator) if hasattr(collator, "epoch") else None, time_limit,
                                 loss_watch) if c]
    trainer = ScratchformerTrainer(
        model=model,
        args=args,
        data_collator=collator,
        train_dataset=train_ds,
        eval_dataset=valid_ds,
        processing_class=tokenizer,
        compute_loss_func=Seq2SeqLoss(args.label_smoothing_factor),
        compute_metrics=compute_metrics,
        preprocess_logits_for_metrics=preprocess,
        callbacks=own_callbacks + list(callbacks or []),
    )
    trainer.loss_watch = loss_watch
    if options.objective == "denoise":
        trainer.encoder_losses = tuple(
            ([CroppingLoss(options.contrastive_weight, options.contrastive_target, options.contrastive_temperature)]
             if options.contrastive_weight > 0 else [])
            + ([MaskedTokenLoss(options.encoder_mlm_weight)] if options.encoder_mlm_weight > 0 else [])
            + ([replaced_token_detection(options, model, tokenizer, args.device)] if options.electra_weight > 0
               else [])
            + ([WordContrastLoss(options.word_contrast_weight, options.word_contrast_temperature)]
               if options.word_contrast_weight > 0 else []))
        # the decoder's loss is weighed against the encoder's; with none, --denoising-weight is ignored (a warning said)
        trainer.denoising_weight = options.denoising_weight if trainer.encoder_losses else 1.0
    return trainer, time_limit


def _stream_into(trainer: ScratchformerTrainer, stream: streaming.PassesOverStream, resume_from: str | None) -> None:
    """Give the trainer its stream: batches through a :class:`~scratchformer.training.streaming.StreamPosition`,
    whose positions go into every checkpoint (and come back from ``resume_from``)."""
    position = streaming.StreamPosition(stream, trainer.data_collator, trainer.args.process_index,
                                        trainer.args.world_size, trainer.args.gradient_accumulation_steps)
    if resume_from is not None:
        position.restore(resume_from)
    trainer.stream_position = position
    trainer.process_files = (*trainer.process_files, position.write)
    trainer.add_callback(position)


def _loss_modules_in_checkpoints(trainer: ScratchformerTrainer, resume_from: str | None) -> None:
    """The encoder losses that train modules of their own (ELECTRA's generator and head) save them into every
    checkpoint and, on ``--resume``, continue from the checkpoint's."""
    for loss in trainer.encoder_losses:
        if hasattr(loss, "restore"):
            if resume_from is not None:
                loss.restore(resume_from)
            if trainer.is_world_process_zero():
                trainer.process_files = (*trainer.process_files, loss.write)


def _keep_a_record(trainer: ScratchformerTrainer, args: ScratchformerTrainingArguments, world_size: int,
                   resume_from: str | None) -> None:
    """Record where and how fast the run trains (:class:`~scratchformer.training.callbacks.RunRecord`): into every
    checkpoint, and into ``OUTPUT_DIR/run_record.json`` at the end."""
    per_step = args.per_device_train_batch_size * world_size * args.gradient_accumulation_steps
    record = RunRecord(args, per_step, resume_from)
    trainer.run_record = record
    trainer.process_files = (*trainer.process_files, record.write)
    trainer.add_callback(record)


def _announce(options: TrainOptions, args: ScratchformerTrainingArguments, trainer: Seq2SeqTrainer,
              splits: data.RawSplits, num_train: int | None, num_valid: int, world_size: int) -> None:
    """On the main process: ``train_config.json`` (every option of the run) and one line about the run."""
    if not trainer.is_world_process_zero():
        return
    out = Path(args.output_dir)
    with files.writing(out):
        out.mkdir(parents=True, exist_ok=True)
    files.write_json(out / "train_config.json", trainer.run_config)
    groups = f" (held-out groups of {splits.group_column!r})" if splits.group_column else ""
    schedule = shown(args.lr_scheduler_type)
    training = f"{num_train:,} training" if num_train is not None else "streamed training"
    if splits.rows_without_text:
        groups += f" ({splits.rows_without_text:,} rows with an empty {'/'.join(splits.columns)} dropped)"
    trainable = (f" ({trainer.model.num_parameters(only_trainable=True):,} trained: the encoder frozen)"
                 if options.freeze_encoder else "")
    print(f"{LOG_PREFIX} {options.objective}: {training} / {num_valid:,} validation examples{groups}; "
          f"model {trainer.model.num_parameters():,} parameters{trainable}; {world_size} process(es); lr {schedule} peak "
          f"{args.learning_rate:.3g}, warm-up {args.warmup_steps}", flush=True)


def _train(trainer: Seq2SeqTrainer, args: ScratchformerTrainingArguments, resume_from: str | None,
           time_limit: TimeLimit | None) -> dict[str, Any] | None:
    """Train to the end (or the time limit); the training metrics, or ``None`` when a callback stopped it early.
    A checkpoint at or past ``--max-steps`` is not trained further: its state is loaded to finish the run."""
    if finishes_without_training(resume_from, args.max_steps):
        trainer.state = TrainerState.load_from_json(str(Path(resume_from) / "trainer_state.json"))
        return {"finished_from_checkpoint": resume_from}
    start = time.time()
    result = trainer.train(resume_from_checkpoint=resume_from)
    if trainer.loss_watch is not None and trainer.loss_watch.step is not None:
        raise trainer.loss_watch.error(args, args.output_dir)
    reached_the_end = trainer.state.global_step >= trainer.state.max_steps
    if not (reached_the_end or (time_limit is not None and time_limit.triggered)):
        return None
    return {**result.metrics, "train_wall_seconds": time.time() - start}


def _finish(options: TrainOptions, args: ScratchformerTrainingArguments, trainer: Seq2SeqTrainer, tokenizer,
            metrics: dict[str, Any]) -> dict[str, Any]:
    """Evaluate (once: not again when the Trainer has just evaluated these weights), save the final model, and
    write the loss curve and ``all_results.json`` (main process)."""
    eval_metrics = None  # the Trainer's own evaluation of these weights in this call, if any: not paid for twice
    if "finished_from_checkpoint" not in metrics and not args.load_best_model_at_end:  # else none, or other weights
        eval_metrics = evaluation_at(trainer.state.log_history, trainer.state.global_step)
    if eval_metrics is None:
        eval_metrics = trainer.evaluate()
    metrics.update(eval_metrics)
    out = Path(args.output_dir)
    step = trainer.state.global_step
    result: dict[str, Any] = {"global_step": step, "metrics": metrics, "output_dir": str(out)}
    dtype = getattr(torch, options.save_dtype)  # as written: a weight of 1e5 is finite in float32, inf in float16
    check_finite(f"the final model (step {step})", ((n, p.to(dtype)) for n, p in trainer.model.named_parameters()),
                 eval_metrics, error=NonFiniteLossError, advice=stopped_run_advice(args, out, step))
    _save_final_model(trainer, tokenizer, out, options.save_dtype)
    if trainer.is_world_process_zero():
        history = loss_history(trainer.state.log_history)
        result["files"] = [str(p) for p in write_loss_curve(history, out, f"scratchformer {options.objective}")]
        files.write_json(out / "all_results.json", metrics)
        print(f"{LOG_PREFIX} done: step {trainer.state.global_step}, " + ", ".join(
            f"{k}={v:.4g}" for k, v in eval_metrics.items() if isinstance(v, float)), flush=True)
        _report_speed(trainer, out)
    trainer.accelerator.wait_for_everyone()
    return result


def _report_speed(trainer: ScratchformerTrainer, out: Path) -> None:
    """Write ``run_record.json`` and say how fast this invocation trained, on what."""
    record = getattr(trainer, "run_record", None)
    if record is None:
        return
    step = trainer.state.global_step
    record.write(out, step)
    if record.started is None:  # finished from a checkpoint: nothing was trained now, its record is the run's
        return
    now = record.current(step)
    print(f"{LOG_PREFIX} trained steps {now['start_step']}-{step} in {now['seconds'] / 60:.1f} min: "
          f"{now['steps_per_second']:.3g} steps/s, {now['examples_per_second']:.3g} examples/s on {now['device']} "
          f"({now['precision']}); the whole run: {record.record(step)['total_seconds'] / 60:.1f} min ({RUN_RECORD})",
          flush=True)


def _save_final_model(trainer: Seq2SeqTrainer, tokenizer, out: Path, save_dtype: str) -> None:
    """The final model and tokenizer in ``out``, with the weights in ``save_dtype`` (checkpoints stay float32; load
    a half-precision one with ``dtype=torch.float32`` to run it in float32)."""
    trainer.model.config.use_cache = True  # the Trainer turned it off for training; generation wants it
    trainer.finish_checkpoint_push()  # its upload reads the folder written below
    for failure in trainer.failed_pushes:
        _say(f"warning: a checkpoint's push to the Hub failed ({failure}); the final push uploads the same files")
    if trainer.is_world_process_zero():
        (out / CHECKSUMS).unlink(missing_ok=True)  # an earlier save's: stale once the new weights are written
    size = torch.finfo(getattr(torch, save_dtype)).bits // 8
    with files.writing(out, needed=trainer.model.num_parameters() * size):  # a full disk: one line, not a traceback
        if save_dtype == "float32":
            trainer.save_model(str(out))  # every process calls it; the main process writes
        elif trainer.is_world_process_zero():
            copy.deepcopy(trainer.model).to(getattr(torch, save_dtype)).save_pretrained(str(out))
            tokenizer.save_pretrained(str(out))
        if trainer.is_world_process_zero():
            write_checksums(out)  # checksums.sha256: scratchformer.load verifies the weights against it

