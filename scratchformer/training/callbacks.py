"""The pipeline's own Trainer callbacks: the noise's epoch, the time limit (``--max-minutes``), and the record of
where and how fast a run trained (``run_record.json``)."""

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


RUN_RECORD = "run_record.json"  # in OUTPUT_DIR at the end of a run, and in every checkpoint


def describe_hardware(args) -> dict[str, Any]:
    """What a run trains on, for the record and the model card: the device, the processes, the precision."""
    import platform

    processes = max(1, getattr(args, "world_size", 1))
    if torch.cuda.is_available() and args.device.type == "cuda":
        device = f"{processes} x {torch.cuda.get_device_name(args.device)}"
    else:
        device = f"{_cpu_model() or platform.machine()}, {os.cpu_count()} CPU cores"
        if processes > 1:
            device += f", {processes} processes"
    precision = "bf16" if args.bf16 else "fp16" if args.fp16 else "fp32"
    if precision != "bf16" and getattr(args, "tf32", None):
        precision += " (TF32 matmuls)"
    return {"device": device, "processes": processes, "torch_threads": torch.get_num_threads(),
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
    """Where and how fast a run trained: one entry per invocation (a ``--resume`` adds one) with its hardware, the
    steps it trained, its wall time and its steps/s. The record up to a checkpoint is saved in that checkpoint, so
    a resumed run continues the record of the checkpoint it resumes (time lost after the last checkpoint of a
    killed invocation is not counted); the whole record is written to ``OUTPUT_DIR`` at the end."""

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
