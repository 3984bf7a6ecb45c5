"""``--resume``: which complete checkpoint a run continues from, and whether the options continue the same run
(:func:`continue_run_options`; docs/training.md, "What ``--resume`` refuses")."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import TrainingSetupError
from .checkpoints import RUN_CONFIG, checkpoint_problems, describe_skipped, newest_complete_checkpoint
from .options import LATEST, option_flag, shown  # LATEST: what ``--resume`` without a value means

if TYPE_CHECKING:
    from .options import ScratchformerTrainingArguments, TrainOptions

WORLD_SIZE_KEY = "world_size"  # train_config.json also records the number of processes

# Options that may change between the invocations of one run: they change what is logged, evaluated, saved or how
# fast it goes, not the trained weights. (Evaluation never touches the training RNG or data order.)
FREE_TO_CHANGE = frozenset({
    # scratchformer
    "max_minutes", "save_dtype", "num_proc", "cache_dir", "max_eval_samples", "trust_remote_code",
    "overwrite_output_dir", "stop_on_nonfinite",
    # where and when to log, evaluate and save
    "output_dir", "resume_from_checkpoint", "logging_strategy", "logging_steps", "logging_first_step",
    "log_on_each_node", "logging_nan_inf_filter", "include_num_input_tokens_seen", "log_level", "log_level_replica",
    "disable_tqdm", "report_to", "run_name", "project", "trackio_space_id", "trackio_bucket_id",
    "trackio_static_space_id", "eval_strategy", "eval_steps", "eval_delay", "per_device_eval_batch_size",
    "prediction_loss_only", "eval_on_start", "eval_do_concat_batches", "eval_use_gather_object",
    "eval_accumulation_steps", "include_for_metrics", "batch_eval_metrics", "generation_max_length",
    "generation_num_beams", "generation_config", "predict_with_generate", "save_strategy", "save_steps",
    "save_on_each_node", "save_total_limit", "save_only_model", "enable_jit_checkpoint", "push_to_hub",
    "hub_private_repo", "hub_model_id", "hub_strategy", "hub_always_push", "hub_revision", "hub_token",
    "skip_memory_metrics", "debug", "do_train", "do_eval", "do_predict",
    # speed and memory, not the arithmetic of the run
    "dataloader_num_workers", "dataloader_pin_memory", "dataloader_persistent_workers", "dataloader_prefetch_factor",
    "dataloader_multiprocessing_context", "torch_empty_cache_steps", "gradient_checkpointing",
    "gradient_checkpointing_kwargs", "activation_checkpointing", "activation_checkpointing_kwargs",
    "torch_compile", "torch_compile_backend", "torch_compile_mode", "ddp_timeout", "ddp_backend", "ddp_bucket_cap_mb",
    "ddp_broadcast_buffers", "ddp_static_graph", "ddp_find_unused_parameters", "local_rank", "use_cpu",
    # the precision of the arithmetic, which follows the hardware (a run started on CPU cores in fp32 may go on on
    # a GPU in bf16 with TF32), not the recipe; fp16 is not here: its loss scaler is part of the run's state
    "bf16", "tf32",
})
BATCH_FIELDS = (WORLD_SIZE_KEY, "per_device_train_batch_size", "gradient_accumulation_steps")
LENGTH_FIELDS = ("max_steps", "num_train_epochs")
LENGTH_FREE_SCHEDULES = frozenset({"inverse_sqrt", "constant", "constant_with_warmup", "reduce_lr_on_plateau"})


def checkpoint_step(checkpoint: str | Path) -> int:
    """The optimizer step a Trainer checkpoint folder was saved at (from its ``trainer_state.json``)."""
    return int(json.loads((Path(checkpoint) / "trainer_state.json").read_text())["global_step"])


def resolve_resume(output_dir: str, resume: str | None, say: Callable[[str], None] = print) -> str | None:
    """The checkpoint folder to continue from, or ``None`` for a new run; skipped incomplete checkpoints (pickles the
    Trainer would refuse included) are reported through ``say``, and nothing complete to resume is refused."""
    if resume is None:
        return None
    out = Path(output_dir)
    if resume == LATEST:
        found, skipped = newest_complete_checkpoint(out, loadable=True)
        if found is None:
            if not skipped:
                raise TrainingSetupError(f"--resume: no checkpoint in {out} to continue from (start the run without "
                                         "--resume, or give --resume CHECKPOINT)")
            raise TrainingSetupError(f"--resume: no complete checkpoint in {out}; incomplete (the run was killed "
                                     f"while saving) or damaged: {describe_skipped(skipped)}")
        if skipped:
            say(f"--resume: skipping incomplete or damaged checkpoint(s) {describe_skipped(skipped)}; continuing from "
                f"{found.name}")
        return str(found)
    problems = checkpoint_problems(resume, loadable=True)
    if problems:
        found, _ = newest_complete_checkpoint(Path(resume).parent, loadable=True)
        hint = f"; the newest complete one next to it is {found}" if found is not None else ""
        raise TrainingSetupError(f"--resume {resume}: not a complete Trainer checkpoint ({'; '.join(problems[:4])})"
                                 f"{hint}")
    return resume


def finishes_without_training(resume_from: str | None, max_steps: int) -> bool:
    """``--resume CHECKPOINT --max-steps N`` with the checkpoint at step >= N: nothing left to train."""
    return resume_from is not None and checkpoint_step(resume_from) >= max_steps > 0


def saved_run_config(checkpoint: str | Path) -> tuple[dict[str, Any] | None, Path | None]:
    """The options a checkpoint was trained with: its ``train_config.json``, else its run folder's."""
    for path in (Path(checkpoint) / RUN_CONFIG, Path(checkpoint).parent / RUN_CONFIG):
        if path.is_file():
            try:
                saved = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as err:
                raise TrainingSetupError(f"--resume: {path} does not parse ({err}); cannot check that the options "
                                         "continue the same run") from None
            if isinstance(saved, dict):
                return saved, path
    return None, None


def run_config(options: TrainOptions, args: ScratchformerTrainingArguments, world_size: int) -> dict[str, Any]:
    """What ``train_config.json`` records: every option (field names of both dataclasses) and the processes."""
    from .options import options_as_dict

    return {**_as_json(options_as_dict(options, args)), WORLD_SIZE_KEY: world_size}


def continue_run_options(options: TrainOptions, args: ScratchformerTrainingArguments, resume_from: str,
                         world_size: int, say: Callable[[str], None] = print) -> ScratchformerTrainingArguments:
    """``args`` for continuing the run of ``resume_from``, with the run's learning rate and warm-up where not given;
    every option that would change the run is listed in one :class:`TrainingSetupError`, allowed changes through ``say``."""
    saved, source = saved_run_config(resume_from)
    if saved is None:
        say(f"--resume: {resume_from} has no {RUN_CONFIG} (nor its folder): the options cannot be compared with the "
            "run's")
        return args
    args = _with_the_runs_defaults(args, saved)
    current = run_config(options, args, world_size)
    step = checkpoint_step(resume_from)
    finishing = step >= args.max_steps > 0
    refused, changed = _batch_change(saved, current)
    batch_keys = set(BATCH_FIELDS) if WORLD_SIZE_KEY in saved else {WORLD_SIZE_KEY}
    for key in sorted(set(current) & set(saved) - batch_keys):
        if current[key] == saved[key]:
            continue
        change = f"{option_flag(key)} {shown(current[key])} (the run: {shown(saved[key])})"
        (changed if _may_change(key, saved, current, finishing, step) else refused).append(change)
    refused += _options_newer_than_the_run(options, current, saved)
    if refused:
        raise TrainingSetupError(
            f"--resume: these options differ from the run's ({source}) and would change the run: "
            f"{'; '.join(refused)}. Resume with the run's values, or start a new run (another --output-dir, or "
            "--overwrite_output_dir)")
    if changed:
        say(f"--resume: continuing {Path(resume_from).name} with {'; '.join(changed)} (these do not change the run)")
    return args


def _options_newer_than_the_run(options: TrainOptions, current: dict[str, Any], saved: dict[str, Any]) -> list[str]:
    """A run recorded by an older version lacks the options added since; it ran with their defaults, so a value
    other than the default would change the run."""
    defaults = {spec.name: spec.default for spec in dataclasses.fields(options)}
    return [f"{option_flag(key)} {shown(current[key])} (the run: recorded before this option existed, so "
            f"{shown(defaults[key])})"
            for key in sorted(set(defaults) & set(current) - set(saved) - FREE_TO_CHANGE)
            if current[key] != _as_json({key: defaults[key]})[key]]


def _with_the_runs_defaults(args: ScratchformerTrainingArguments,
                            saved: dict[str, Any]) -> ScratchformerTrainingArguments:
    """The learning rate and warm-up the run used, where this command leaves them to their defaults."""
    args = copy.copy(args)
    if args.learning_rate is None and saved.get("learning_rate") is not None:
        args.learning_rate = saved["learning_rate"]
    if getattr(args, "warmup_is_default", False) and saved.get("warmup_steps") is not None:
        args.warmup_steps = saved["warmup_steps"]
        args.warmup_is_default = False
    return args


def _may_change(key: str, saved: dict[str, Any], current: dict[str, Any], finishing: bool,
                resume_step: int) -> bool:
    """Whether option ``key`` may differ from the run's (docs/training.md, "What ``--resume`` refuses")."""
    if key in FREE_TO_CHANGE:
        return True
    if key == "num_train_epochs" and saved.get("max_steps", -1) > 0 and current.get("max_steps", -1) > 0:
        return True  # --max-steps decides the length; the epochs are unused
    return key in LENGTH_FIELDS and (finishing or _length_is_free(saved) or _in_warm_up(saved, resume_step))


def _length_is_free(saved: dict[str, Any]) -> bool:
    """Whether the run's schedule is the same curve for any length: ``inverse_sqrt``, ``constant``,
    ``constant_with_warmup`` with a warm-up in steps (a fraction < 1 would scale with the length)."""
    warmup = saved.get("warmup_steps") or 0
    return saved.get("lr_scheduler_type") in LENGTH_FREE_SCHEDULES and (warmup == 0 or warmup >= 1)


def _in_warm_up(saved: dict[str, Any], step: int) -> bool:
    """Whether the checkpoint is still in a warm-up given in steps: every schedule rises as ``step / warm-up`` there
    whatever the length, so the steps trained so far are the same for any ``--max-steps``."""
    warmup = saved.get("warmup_steps") or 0
    return warmup >= 1 and step <= warmup


def _batch_change(saved: dict[str, Any], current: dict[str, Any]) -> tuple[list[str], list[str]]:
    """``(refused, changed)`` about the batch: the examples of one optimizer step (processes x batch x accumulation)
    must stay the run's; how they are split may change (the seedable sampler gives the same examples to each step),
    except the size of a micro-batch when the contrastive loss draws its negatives from it."""
    if WORLD_SIZE_KEY not in saved:
        return [], []  # a run recorded without its process count: the batch fields are compared one by one
    now, before = (tuple(config[key] for key in BATCH_FIELDS) for config in (current, saved))
    if now == before:
        return [], []
    change = (f"{now[0]} process(es) x --batch-size {now[1]} x --gradient-accumulation-steps {now[2]} = "
              f"{math.prod(now)} examples per optimizer step (the run: {before[0]} x {before[1]} x "
              f"{before[2]} = {math.prod(before)})")
    same = math.prod(now) == math.prod(before)
    if same and now[1] != before[1] and saved.get("objective") == "denoise" and (
            saved.get("contrastive_weight", 0) > 0 or saved.get("word_contrast_weight", 0) > 0):
        # the contrastive loss tells each window apart from the others of its micro-batch: another micro-batch size
        # is another loss
        return [change + " (with --contrastive-weight or --word-contrast-weight the micro-batch is the set of "
                         f"negatives: keep --batch-size {before[1]})"], []
    return ([], [change]) if same else ([change], [])


def _as_json(values: dict[str, Any]) -> dict[str, Any]:
    """The values as ``train_config.json`` holds them (enums as their values, tuples as lists)."""
    return json.loads(json.dumps(values, default=lambda v: getattr(v, "value", str(v))))
