"""The paper's learning-rate schedule (section 5.3) as Trainer options: the default warm-up and peak rate.

The paper's ``lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` equals transformers' ``inverse_sqrt``
schedule, ``lr(step) = peak * min(step / warmup, sqrt(warmup / step))``, with ``peak = d_model^-0.5 * warmup^-0.5``.
So ``--lr-schedule inverse_sqrt`` without ``--learning-rate`` is the paper's schedule (with its Adam beta2 = 0.98,
epsilon = 1e-9, the defaults of :class:`~scratchformer.training.options.ScratchformerTrainingArguments`).
"""

from __future__ import annotations

import math

PAPER_WARMUP_STEPS = 4000
OTHER_SCHEDULES_PEAK = 5e-4  # the peak when the schedule is not inverse_sqrt and no --learning-rate is given


def paper_warmup_steps(max_steps: int) -> int:
    """The paper's 4000 warm-up steps, capped at 10% of ``max_steps`` when that is set."""
    return PAPER_WARMUP_STEPS if max_steps <= 0 else min(PAPER_WARMUP_STEPS, max(1, max_steps // 10))


def training_step_count(max_steps: int, num_train_epochs: float, examples: int, examples_per_step: int) -> int:
    """The optimizer steps of a run: ``max_steps`` when set, else the steps of ``num_train_epochs`` epochs."""
    if max_steps > 0:
        return max_steps
    return max(1, math.ceil(num_train_epochs * math.ceil(examples / examples_per_step)))


def peak_learning_rate(learning_rate: float | None, lr_scheduler_type: str, d_model: int, warmup: int) -> float:
    """``learning_rate`` when given; else for ``inverse_sqrt`` the paper's peak ``d_model^-0.5 * warmup^-0.5``
    (5e-4 for the other schedules)."""
    if learning_rate is not None:
        return learning_rate
    if str(getattr(lr_scheduler_type, "value", lr_scheduler_type)) == "inverse_sqrt":
        return d_model ** -0.5 * max(1, warmup) ** -0.5
    return OTHER_SCHEDULES_PEAK
