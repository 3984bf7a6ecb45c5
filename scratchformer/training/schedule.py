"""The paper's learning-rate schedule (section 5.3) as Trainer options: ``inverse_sqrt`` with the paper's peak
``d_model^-0.5 * warmup^-0.5``, a default warm-up and a capped default peak (docs/training.md, "The default
learning rate")."""

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
    """A warning when ``peak`` is above ``2e-3 * (d_model / 512)^-0.5`` (docs/training.md), else ``None``."""
    bound = WARNING_FACTOR * max_default_peak(d_model)
    if peak <= bound:
        return None
    return (f"the peak learning rate {peak:.3g} is above {bound:.3g} (= {WARNING_FACTOR * PEAK_CAP_AT_D512:g} * "
            f"(d_model/512)^-0.5 for d_model {d_model}): training may diverge; a smaller --learning-rate or a longer "
            "--warmup-steps is safer (docs/training.md, 'Reliability')")
