"""The pipeline's own Trainer callbacks: the noise's epoch, and the time limit (``--max-minutes``)."""

from __future__ import annotations

import math
import time

import torch
from transformers import TrainerCallback


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
        # on the process's device: NCCL (GPUs) broadcasts no CPU tensor
        flag = torch.tensor([float(time.monotonic() - self.start >= self.seconds)], device=args.device)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.broadcast(flag, src=0)
        if flag.item() and state.global_step < state.max_steps:
            self.triggered = True
            control.should_training_stop = True
            control.should_save = True
