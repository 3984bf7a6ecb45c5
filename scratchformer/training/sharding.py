"""Sharded training (FSDP through ``accelerate``; DeepSpeed ZeRO): what our three-way tied model and the saving of
its class need from the pipeline (docs/training.md, "Sharded: FSDP2, DeepSpeed ZeRO")."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..errors import TrainingSetupError

if TYPE_CHECKING:
    from .options import ScratchformerTrainingArguments, TrainOptions


def prepare_sharding(options: TrainOptions, trainer, model, say) -> None:
    """Before the trainer wraps the model: under FSDP the decoder reads the encoder's token table through the same
    module (FSDP2 wants every tied parameter in one unit; saving and loading handle the repeated path), FSDP that
    accelerate will not run here is said, and ``--save-dtype`` other than float32 is refused (docs/training.md)."""
    sharded = trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled
    if trainer.is_fsdp_enabled and getattr(model.config, "tie_word_embeddings", False):
        model.set_input_embeddings(model.get_input_embeddings())
        model.register_state_dict_post_hook(without_repeated_modules)
        model.register_load_state_dict_pre_hook(with_repeated_modules)
    if fsdp_requested(trainer.args) and not trainer.is_fsdp_enabled:
        say("warning: FSDP was asked for, but accelerate does not run it here (no GPU: its CPU mode is plain "
            "data-parallel), so this run is not sharded")
    if sharded and options.save_dtype != "float32":
        raise TrainingSetupError(f"--save-dtype {options.save_dtype} is not supported with FSDP or DeepSpeed; save "
                                 "float32 and convert: ScratchformerForConditionalGeneration.from_pretrained(OUT, "
                                 f"dtype=torch.{options.save_dtype}).save_pretrained(OUT2)")


def _repeated_entries(module, prefix: str) -> Iterator[tuple[str, str]]:
    """``(key, key of the same tensor under the module's first path)`` for each parameter and buffer of a module
    that ``module`` reaches by a second path."""
    first: dict[int, str] = {}
    for name, submodule in module.named_modules(remove_duplicate=False):
        path = f"{prefix}{name}." if name else prefix
        if id(submodule) not in first:
            first[id(submodule)] = path
            continue
        for key, _ in [*submodule.named_parameters(recurse=False), *submodule.named_buffers(recurse=False)]:
            yield path + key, first[id(submodule)] + key


def without_repeated_modules(module, state_dict, prefix, local_metadata) -> None:
    """A ``state_dict`` post-hook: drop the entries of a module reached again by another path (keep the first)."""
    for key, _ in _repeated_entries(module, prefix):
        state_dict.pop(key, None)


def with_repeated_modules(module, state_dict, prefix, *args) -> None:
    """A ``load_state_dict`` pre-hook: the entries :func:`without_repeated_modules` left out, from the first path."""
    for key, original in _repeated_entries(module, prefix):
        if key not in state_dict and original in state_dict:
            state_dict[key] = state_dict[original]


def fsdp_requested(args: ScratchformerTrainingArguments) -> bool:
    return bool(args.fsdp) or os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"


@contextlib.contextmanager
def plain_class(model) -> Iterator[None]:
    """While inside, a model that FSDP2 turned into a generated ``FSDP<Class>`` is of its own class again."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # torch without FSDP2
        FSDPModule = None
    generated = type(model)
    if FSDPModule is None or not isinstance(model, FSDPModule):
        yield
        return
    model.__class__ = next(c for c in generated.__mro__ if not issubclass(c, FSDPModule))
    try:
        yield
    finally:
        model.__class__ = generated


class SavesPlainModelClass:
    """Mixed into the run's trainer: saves (checkpoints and the final model) with the model's own class, so that
    the code files and ``auto_map`` saved with the weights are ours, not FSDP2's generated subclass's."""

    def _save(self, output_dir=None, state_dict=None):
        with plain_class(self.model):
            return super()._save(output_dir, state_dict=state_dict)
