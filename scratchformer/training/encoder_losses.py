"""Losses on the encoder's own output, added to denoising by the Trainer as ``weight x loss / accumulation steps``
under the run's mixed precision; ``--denoising-weight`` scales the decoder's loss (docs/training.md, "Objectives")."""

from __future__ import annotations

from typing import Protocol

import torch


class EncoderLoss(Protocol):
    """What :class:`EncoderLosses` needs of a loss."""

    name: str  # logged as ``<name>_loss``
    keys: tuple[str, ...]  # the batch keys it reads (taken out of the model's inputs)
    weight: float

    def __call__(self, model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """The loss of one micro-batch (``model`` unwrapped from DDP and the like), or ``None`` when the batch
        gives it nothing to learn from."""


class EncoderLosses:
    """Trainer mixin: adds each loss of ``self.encoder_losses`` to the training loss and logs its mean. The keys of
    every known loss are always taken out of the inputs before the model sees them, whether the loss is on or not."""

    encoder_losses: tuple[EncoderLoss, ...] = ()
    extra_keys: tuple[str, ...] = ()  # every key a collator may add (set by the pipeline)
    denoising_weight: float = 1.0  # --denoising-weight: 0 skips the model's own (decoder) pass in training

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        extra = {key: inputs.pop(key) for key in self.extra_keys if key in inputs}
        if not extra or not self.encoder_losses or not model.training:
            return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
        unwrapped = self.accelerator.unwrap_model(model)
        if self.denoising_weight == 0 and not return_outputs:  # the encoder's losses alone: no decoder pass
            result = unwrapped.get_input_embeddings().weight.sum() * 0.0  # a zero in the graph, if they give none
        else:
            result = super().compute_loss(model, inputs, return_outputs=return_outputs,
                                          num_items_in_batch=num_items_in_batch)
            if self.denoising_weight != 1:
                result = (result[0] * self.denoising_weight, result[1]) if return_outputs \
                    else result * self.denoising_weight
        steps = getattr(self, "current_gradient_accumulation_steps", self.args.gradient_accumulation_steps)
        added = 0.0
        for loss_fn in self.encoder_losses:
            with self.accelerator.autocast():  # --bf16/--fp16: accelerate casts only the model's own forward
                value = loss_fn(unwrapped, {key: extra[key] for key in loss_fn.keys if key in extra})
            if value is None:
                continue
            value = value.float()
            self._remember(loss_fn.name, value.detach())
            for name, part in getattr(loss_fn, "logged", {}).items():  # a loss's parts, logged beside it
                self._remember(name, part)
            added = added + loss_fn.weight * value / steps
        if return_outputs:
            return result[0] + added, result[1]
        return result + added

    def _remember(self, name: str, value: torch.Tensor) -> None:
        """Sum on the device; read only when logging (no host sync per step)."""
        sums = self.__dict__.setdefault("_encoder_loss_sums", {})
        total, count = sums.get(name, (0.0, 0))
        sums[name] = (total + value, count + 1)

    def log(self, logs: dict[str, float], *args, **kwargs) -> None:
        sums = self.__dict__.get("_encoder_loss_sums")
        if "loss" in logs and sums:
            logs = {**logs, **{f"{name}_loss": round(float(total) / count, 4)
                               for name, (total, count) in sums.items()}}
            sums.clear()
        super().log(logs, *args, **kwargs)
