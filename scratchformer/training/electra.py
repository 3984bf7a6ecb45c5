"""Replaced-token detection on the encoder (ELECTRA, Clark et al., ICLR 2020), added to denoising: a narrow
generator fills the masked copy and the encoder tells each token original or replaced (docs/training.md,
"Objectives"). Generator and head are training machinery, saved as ``electra.safetensors``, never in the model."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers import TrainerCallback

from ..errors import ScratchformerError, TrainingSetupError
from ..models import paper_scratchformer as paper
from .encoder_mlm import MLM_KEYS

STATE_FILE = "electra.safetensors"  # the generator and the detection head, in every checkpoint of an ELECTRA run


class _Narrower:
    """The model's config with a few fields replaced: what the paper's layers read to build the generator's."""

    def __init__(self, config, **changes):
        self._config, self._changes = config, changes

    def __getattr__(self, name: str):
        return self._changes[name] if name in self._changes else getattr(self._config, name)


class Generator(nn.Module):
    """ELECTRA's generator: the encoder's embedding of the masked copy, projected to ``width``, through ``layers``
    of the paper's encoder layer, and back to ``d_model`` (dense, GELU, LayerNorm, as ELECTRA's generator head), for
    the tied output projection to score every token of the vocabulary."""

    def __init__(self, config, width: int, layers: int, heads: int):
        super().__init__()
        narrow = _Narrower(config, d_model=width, encoder_attention_heads=heads, encoder_ffn_dim=4 * width,
                           dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
        self.project_in = nn.Linear(config.d_model, width)
        rope = config.position_embedding_type == "rope"
        self.rotary = paper.RotaryEmbedding(width // heads, config.rope_theta) if rope else None
        self.layers = nn.ModuleList(paper.EncoderLayer(narrow) for _ in range(layers))
        self.layer_norm = nn.LayerNorm(width, eps=config.layer_norm_eps) if config.pre_layer_norm else None
        self.project_out = nn.Sequential(nn.Linear(width, config.d_model), nn.GELU(),
                                         nn.LayerNorm(config.d_model, eps=config.layer_norm_eps))

    def forward(self, embedded: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor
                ) -> torch.Tensor:
        # embedded: (B, T, D) the encoder's embeddings of the copy; attention_mask, position_ids: (B, T) -> (B, T, D)
        x = self.project_in(embedded)  # (B, T, W)
        rotary = self.rotary(position_ids) if self.rotary is not None else None
        mask = paper.padding_mask(attention_mask)  # (B, 1, 1, T)
        for layer in self.layers:
            x = layer(x, mask, rotary)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return self.project_out(x)


class DetectionHead(nn.Module):
    """ELECTRA's discriminator head: one logit per token, "this token was replaced" (dense, GELU, dense)."""

    def __init__(self, d_model: int):
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, 1)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.out(F.gelu(self.dense(hidden))).squeeze(-1)  # (B, T, D) -> (B, T)


class ElectraParts(nn.Module):
    """What an ELECTRA run trains beside the model: the generator and the detection head."""

    def __init__(self, config, width: int, layers: int, heads: int):
        super().__init__()
        self.generator = Generator(config, width, layers, heads)
        self.detection_head = DetectionHead(config.d_model)
        std = getattr(config, "init_std", 0.02)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)


def generator_shape(config, width: int | None, layers: int | None) -> tuple[int, int, int]:
    """``(width, layers, heads)`` of the generator: by default a quarter of the encoder's width (at least 32, a
    multiple of 32) and as many layers as the encoder, one head per 64 dimensions. A shape that cannot work is a
    :class:`~scratchformer.errors.ScratchformerError`."""
    width = width or max(32, config.d_model // 4 // 32 * 32)
    layers = layers or config.encoder_layers
    heads = max(1, width // 64)
    if width % heads or (width // heads) % 2:
        raise ScratchformerError(f"--electra-generator-width {width} must split into heads of an even size "
                                 f"({heads} head(s) of {width / heads:g})")
    return width, layers, heads


@dataclass
class ReplacedTokenDetection:
    """The loss of the module docstring (an :class:`~scratchformer.training.encoder_losses.EncoderLoss`, logged as
    ``electra_loss``, with ``electra_generator_loss`` and ``electra_discriminator_loss`` beside it)."""

    weight: float
    parts: ElectraParts
    special_ids: list[int]
    discriminator_weight: float = 50.0
    name = "electra"
    keys = MLM_KEYS
    logged: dict[str, torch.Tensor] = field(default_factory=dict)
    _banned: dict = field(default_factory=dict, repr=False)  # device -> the special ids as a vocabulary mask

    def __call__(self, model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """Generator loss + lambda x detection loss of one micro-batch, or ``None`` when no token was chosen."""
        positions = batch["mlm_positions"]
        if positions.numel() == 0:  # a shape, known on the host: no sync
            return None
        encoder = model.get_encoder()
        input_ids, attention_mask = batch["mlm_input_ids"], batch["mlm_attention_mask"]
        position_ids = paper.positions_skipping_padding(attention_mask)  # the model's own rule
        embedded = encoder.embeddings(input_ids, position_ids)  # (B, T, D), the shared embeddings
        hidden = self.parts.generator(embedded, attention_mask, position_ids)  # (B, T, D)
        chosen = hidden.reshape(-1, hidden.shape[-1]).index_select(0, positions)  # (N, D)
        logits = model.get_output_embeddings()(chosen).float()  # (N, V), the tied output projection
        generator_loss = F.cross_entropy(logits, batch["mlm_targets"])
        sampled = self._sample(logits.detach())  # (N,)
        flat = input_ids.reshape(-1)
        corrupted = flat.index_copy(0, positions, sampled).view_as(input_ids)  # the copy with the generator's words
        replaced = torch.zeros_like(flat, dtype=torch.float32).index_copy(
            0, positions, (sampled != batch["mlm_targets"]).float()).view_as(input_ids)  # (B, T): 1 = replaced
        encoded = encoder(input_ids=corrupted, attention_mask=attention_mask).last_hidden_state  # (B, T, D)
        detection = self.parts.detection_head(encoded).float()  # (B, T)
        real = attention_mask.float()
        per_token = F.binary_cross_entropy_with_logits(detection, replaced, reduction="none")
        discriminator_loss = (per_token * real).sum() / real.sum().clamp(min=1.0)
        self.logged = {"electra_generator": generator_loss.detach(),  # logged as electra_generator_loss
                       "electra_discriminator": discriminator_loss.detach()}
        return generator_loss + self.discriminator_weight * discriminator_loss

    def _sample(self, logits: torch.Tensor) -> torch.Tensor:
        """One token per chosen position from the generator's distribution (Gumbel-max: no host sync), never a
        special token."""
        banned = self._banned.get(logits.device)
        if banned is None:  # made once per device, not at every micro-batch
            banned = torch.zeros(logits.shape[-1], dtype=torch.bool)
            banned[[i for i in self.special_ids if 0 <= i < logits.shape[-1]]] = True
            banned = self._banned[logits.device] = banned.to(logits.device)
        uniform = torch.rand_like(logits).clamp_(min=1e-9, max=1.0 - 1e-9)
        gumbel = -torch.log(-torch.log(uniform))
        return (logits + gumbel).masked_fill(banned, -math.inf).argmax(-1)

    # checkpoints: the parts' weights travel in a file of their own

    def write(self, folder: Path, global_step: int) -> None:
        """Save the generator and the head into a checkpoint being written (main process only: the caller)."""
        from safetensors.torch import save_file

        state = {key: value.detach().contiguous().cpu() for key, value in self.parts.state_dict().items()}
        save_file(state, str(Path(folder) / STATE_FILE))

    def restore(self, checkpoint: str | Path) -> None:
        """Load the generator and the head from a checkpoint of an ELECTRA run; a checkpoint without them (a run
        started without ``--electra-weight``) is a :class:`~scratchformer.errors.ScratchformerError`."""
        from safetensors.torch import load_file

        path = Path(checkpoint) / STATE_FILE
        if not path.is_file():
            raise ScratchformerError(f"{checkpoint} has no {STATE_FILE}: it was not trained with --electra-weight, "
                                     "so --resume cannot continue it with replaced-token detection")
        device = next(self.parts.parameters()).device
        try:
            self.parts.load_state_dict(load_file(str(path), device=str(device)))
        except (RuntimeError, OSError) as error:
            raise ScratchformerError(f"{path} does not fit this run's generator (another --electra-generator-width "
                                     f"or --electra-generator-layers?): {str(error).splitlines()[0]}") from error


def check_electra(options, world_size: int) -> None:
    """ELECTRA trains in one process: its generator and head are not the model, so data parallelism (which
    averages the model's gradients) would leave theirs apart on each process."""
    if options.objective == "denoise" and options.electra_weight > 0 and world_size > 1:
        raise TrainingSetupError(f"--electra-weight trains in one process (this run has {world_size}): the "
                                 "generator's gradients are not averaged across processes; use one process per run")


def replaced_token_detection(options, model, tokenizer, device) -> ReplacedTokenDetection:
    """The loss of ``--electra-weight``, its generator and head built for ``model`` (seeded like the model: the
    pipeline calls it after ``set_seed``) and placed on ``device``."""
    width, layers, heads = generator_shape(model.config, options.electra_generator_width,
                                           options.electra_generator_layers)
    parts = ElectraParts(model.config, width, layers, heads).to(device)
    return ReplacedTokenDetection(options.electra_weight, parts, list(tokenizer.all_special_ids),
                                  options.electra_discriminator_weight)


class TrainsLossModules:
    """Trainer mixin: the encoder losses' modules (ELECTRA's generator and head) join the optimizer as a parameter
    group of their own, clipped and cleared on their own (the Trainer does both for the model's parameters only)."""

    encoder_losses: tuple = ()

    def loss_modules(self) -> list[nn.Module]:
        return [loss.parts for loss in self.encoder_losses if isinstance(getattr(loss, "parts", None), nn.Module)]

    def create_optimizer(self, *args, **kwargs):
        optimizer = super().create_optimizer(*args, **kwargs)
        params = [p for module in self.loss_modules() for p in module.parameters() if p.requires_grad]
        known = {id(p) for group in optimizer.param_groups for p in group["params"]}
        if params and id(params[0]) not in known:
            optimizer.add_param_group({"params": params, "weight_decay": self.args.weight_decay})
            self.add_callback(_ClearLossModuleGrads(self.loss_modules()))
        return optimizer

    def _clip_grad_norm(self, model):
        for module in self.loss_modules():
            torch.nn.utils.clip_grad_norm_(module.parameters(), self.args.max_grad_norm)
        return super()._clip_grad_norm(model)


class _ClearLossModuleGrads(TrainerCallback):
    """Clears the loss modules' gradients after each optimizer step, as the Trainer does the model's."""

    def __init__(self, modules: list[nn.Module]):
        self.modules = modules

    def on_optimizer_step(self, args, state, control, **kwargs):
        for module in self.modules:
            module.zero_grad(set_to_none=True)
