"""The pipeline's own Trainer callbacks: the noise's epoch, the time limit (``--max-minutes``), the stop of a run
whose loss is no longer finite (``--no-stop-on-nonfinite`` turns it off), and the record of where and how fast a run
trained (``run_record.json``)."""

from __future__ import annotations

import json
import math
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from .. import files
from ..errors import NonFiniteLossError


class EpochCallback(TrainerCallback):
    """Tell the noising collator which epoch it is in (its noise depends on it, so each epoch draws new noise)."""

    def __init__(self, collator):
        self.collator = collator

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.collator.epoch = int(math.floor((state.epoch or 0.0) + 1e-6))


class TimeLimit(TrainerCallback):
    """End training normally (checkpoint, final model, evaluation) after ``minutes`` of training in this call.
    The main process decides and tells the others, so every process stops after the same step."""

    def __init__(self, minutes: float):
        self.seconds = 60.0 * minutes
        self.start: float | None = None
        self.triggered = False

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        over = time.monotonic() - self.start >= self.seconds
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            # on the process's device: NCCL (GPUs) broadcasts no CPU tensor; one process alone needs no tensor
            # (and no device sync)
            flag = torch.tensor([float(over)], device=args.device)
            torch.distributed.broadcast(flag, src=0)
            over = bool(flag.item())
        if over and state.global_step < state.max_steps:
            self.triggered = True
            control.should_training_stop = True
            control.should_save = True


NO_BAD_STEP = 2**62  # NonFiniteLoss's "every loss so far was finite"


class NonFiniteLoss(TrainerCallback):
    """Stop a run at the step where its training loss became NaN or infinite, before that step's checkpoint. The flag
    stays on the device (no host sync per step) and is read only where the Trainer synchronises anyway; all processes
    stop at the earliest bad step of any of them."""

    def __init__(self):
        self.first_bad: torch.Tensor | None = None  # on the device: the first bad step, or NO_BAD_STEP
        self.step: int | None = None  # the step the run stopped at

    def observe(self, loss: torch.Tensor, step: int) -> None:
        if self.first_bad is None:
            self.first_bad = torch.full((), NO_BAD_STEP, dtype=torch.long, device=loss.device)
        bad = ~torch.isfinite(loss.detach()).all()
        self.first_bad = torch.where(bad & (self.first_bad == NO_BAD_STEP), step, self.first_bad)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if self.first_bad is None or not (control.should_log or control.should_save or control.should_evaluate
                                          or control.should_training_stop or state.global_step >= state.max_steps):
            return
        first = self.first_bad
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            first = first.clone()
            torch.distributed.all_reduce(first, op=torch.distributed.ReduceOp.MIN)
        bad = int(first)  # the one synchronisation, at a step that has one anyway
        if bad != NO_BAD_STEP:
            self.step = bad
            control.should_training_stop = True
            control.should_save = control.should_evaluate = False

    def error(self, args, output_dir: str | Path) -> NonFiniteLossError:
        """The one line that says where the run stopped, what it kept and what to try."""
        from .checkpoints import stopped_run_advice

        return NonFiniteLossError(f"the training loss became NaN or infinite at step {self.step}"
                                  f"{stopped_run_advice(args, output_dir, self.step)}")


class WatchesLoss:
    """Trainer mixin: each micro-batch's training loss goes to ``self.loss_watch`` (a :class:`NonFiniteLoss`), when
    there is one."""

    loss_watch: NonFiniteLoss | None = None

    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        if self.loss_watch is not None:
            self.loss_watch.observe(loss, self.state.global_step + 1)
        return loss


RUN_RECORD = "run_record.json"  # in OUTPUT_DIR at the end of a run, and in every checkpoint


def describe_hardware(args) -> dict[str, Any]:
    """What a run trains on, for the record and the model card: the device, the processes, the precision. On CPU
    cores also torch's CPU capability (``AVX2``, ``AVX512``, ...): one model name covers CPUs of other speeds."""
    import platform

    processes = max(1, getattr(args, "world_size", 1))
    cpu = {}
    if torch.cuda.is_available() and args.device.type == "cuda":
        device = f"{processes} x {torch.cuda.get_device_name(args.device)}"
    else:
        device = f"{_cpu_model() or platform.machine()}, {os.cpu_count()} CPU cores"
        if processes > 1:
            device += f", {processes} processes"
        cpu = {"cpu_capability": torch.backends.cpu.get_cpu_capability()}
    precision = "bf16" if args.bf16 else "fp16" if args.fp16 else "fp32"
    if precision != "bf16" and getattr(args, "tf32", None):
        precision += " (TF32 matmuls)"
    return {"device": device, **cpu, "processes": processes, "torch_threads": torch.get_num_threads(),
            "precision": precision, "torch": torch.__version__}


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


class RunRecord(TrainerCallback):
    """Where and how fast a run trained: one entry per invocation (a ``--resume`` adds one), saved in each checkpoint
    and written to ``OUTPUT_DIR`` at the end."""

    def __init__(self, args, examples_per_step: int, resume_from: str | None):
        self.examples_per_step = examples_per_step
        self.hardware = describe_hardware(args)
        self.earlier: list[dict[str, Any]] = []
        if resume_from is not None:
            try:
                self.earlier = json.loads((Path(resume_from) / RUN_RECORD).read_text())["invocations"]
            except (OSError, ValueError, KeyError, TypeError):
                self.earlier = []  # a checkpoint from before the record existed
        self.started: str | None = None
        self.start = 0.0
        self.start_step = 0

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.start = time.monotonic()
        self.start_step = state.global_step

    def current(self, step: int) -> dict[str, Any]:
        """This invocation, up to ``step``."""
        seconds = time.monotonic() - self.start
        steps = step - self.start_step
        rate = steps / seconds if seconds > 0 else 0.0
        return {"started": self.started, "start_step": self.start_step, "end_step": step,
                "seconds": round(seconds, 2), "steps_per_second": round(rate, 4),
                "examples_per_second": round(rate * self.examples_per_step, 2),
                "examples_per_step": self.examples_per_step, **self.hardware}

    def record(self, step: int) -> dict[str, Any]:
        """The whole record up to ``step``: every invocation and the totals (a run finished from a checkpoint
        without training: the checkpoint's record)."""
        invocations = [*self.earlier, self.current(step)] if self.started is not None else list(self.earlier)
        total = sum(i["seconds"] for i in invocations)
        return {"invocations": invocations, "total_seconds": round(total, 2), "final_step": step}

    def write(self, folder, step: int) -> None:
        """Write the record up to ``step`` into ``folder`` (a checkpoint being saved, or the run folder)."""
        if int(os.environ.get("RANK", "0")) == 0:
            files.write_json(Path(folder, RUN_RECORD), self.record(step))
