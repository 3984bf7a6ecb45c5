"""The paper's learning-rate schedule (section 5.3) as Trainer options: the default warm-up and peak rate.

The paper's ``lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` equals transformers' ``inverse_sqrt``
schedule, ``lr(step) = peak * min(step / warmup, sqrt(warmup / step))``, with ``peak = d_model^-0.5 * warmup^-0.5``.
So ``--lr-schedule inverse_sqrt`` without ``--learning-rate`` is the paper's schedule (with its Adam beta2 = 0.98,
epsilon = 1e-9, the defaults of :class:`~scratchformer.training.options.ScratchformerTrainingArguments`).

The paper's peak grows as the warm-up shrinks, and the warm-up of a short run must be short: the old default
(warm-up = 10% of ``--max-steps``) gave ``--preset mini`` (d_model 192) a peak of 7.2e-3 at 1000 steps and 2.3e-2
at 100 steps. So the defaults are now

- warm-up: the paper's 4000 steps, at most half of the run (:func:`default_warmup_steps`);
- peak: the paper's formula, but at most :func:`max_default_peak` ``= 1e-3 * (d_model / 512)^-0.5``, which is the
  paper's formula at a warm-up of 1953 steps (so a run with the paper's 4000-step warm-up is never capped: its
  peak, 6.99e-4 for d_model 512, stays the paper's);
- a warning (:func:`learning_rate_warning`) when the peak that a run uses, given or computed, is above twice that
  cap (``2e-3 * (d_model / 512)^-0.5``: 2.8e-3 for d_model 256, 3.3e-3 for 192). The shipped checkpoint trained
  stably at 2e-3 with d_model 256 (pre-LN, 300 warm-up steps), 1.4 times the cap, so the bound leaves room for such
  a tuned recipe and catches the old default's 7.2e-3 and 2.3e-2.
"""

from __future__ import annotations

import math

PAPER_WARMUP_STEPS = 4000
OTHER_SCHEDULES_PEAK = 5e-4  # the peak when the schedule is not inverse_sqrt and no --learning-rate is given
PEAK_CAP_AT_D512 = 1e-3  # the largest default peak for d_model 512; it scales as d_model^-0.5 like the paper's
WARNING_FACTOR = 2.0  # warn when a run's peak is above this many times the default cap


def default_warmup_steps(total_steps: int) -> int:
    """The paper's 4000 warm-up steps, at most half of ``total_steps`` when that is known (> 0)."""
    return PAPER_WARMUP_STEPS if total_steps <= 0 else min(PAPER_WARMUP_STEPS, max(1, total_steps // 2))


def training_step_count(max_steps: int, num_train_epochs: float, examples: int, examples_per_step: int) -> int:
    """The optimizer steps of a run: ``max_steps`` when set, else the steps of ``num_train_epochs`` epochs."""
    if max_steps > 0:
        return max_steps
    return max(1, math.ceil(num_train_epochs * math.ceil(examples / examples_per_step)))


def paper_peak(d_model: int, warmup: int) -> float:
    """The paper's peak rate, ``d_model^-0.5 * warmup^-0.5``."""
    return d_model ** -0.5 * max(1, warmup) ** -0.5


def max_default_peak(d_model: int) -> float:
    """The largest peak scratchformer picks by itself: ``1e-3 * (d_model / 512)^-0.5``."""
    return PEAK_CAP_AT_D512 * (d_model / 512) ** -0.5


def is_inverse_sqrt(lr_scheduler_type) -> bool:
    return str(getattr(lr_scheduler_type, "value", lr_scheduler_type)) == "inverse_sqrt"


def peak_learning_rate(learning_rate: float | None, lr_scheduler_type: str, d_model: int, warmup: int) -> float:
    """``learning_rate`` when given; else for ``inverse_sqrt`` the paper's peak ``d_model^-0.5 * warmup^-0.5``
    capped at :func:`max_default_peak` (5e-4 for the other schedules)."""
    if learning_rate is not None:
        return learning_rate
    if is_inverse_sqrt(lr_scheduler_type):
        return min(paper_peak(d_model, warmup), max_default_peak(d_model))
    return OTHER_SCHEDULES_PEAK


def learning_rate_warning(peak: float, d_model: int) -> str | None:
    """A warning when ``peak`` is above ``2e-3 * (d_model / 512)^-0.5`` (see the module docstring), else ``None``."""
    bound = WARNING_FACTOR * max_default_peak(d_model)
    if peak <= bound:
        return None
    return (f"the peak learning rate {peak:.3g} is above {bound:.3g} (= {WARNING_FACTOR * PEAK_CAP_AT_D512:g} * "
            f"(d_model/512)^-0.5 for d_model {d_model}): training may diverge; a smaller --learning-rate or a longer "
            "--warmup-steps is safer (docs/training.md, 'Reliability')")
