"""The encoder as ONNX (``scratchformer export --onnx``): ``onnx/model.onnx``, where transformers.js and Optimum look.

Only the dynamo exporter is used: the legacy TorchScript exporter's graph gives wrong outputs for other lengths.
"""

from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import Any

import torch

from ..models.paper_scratchformer import SinusoidalPositionalEncoding
from .layout import require_onnx

INPUT_NAMES = ("input_ids", "attention_mask")
OUTPUT_NAMES = ("last_hidden_state",)


class EncoderForExport(torch.nn.Module):
    """What is traced: a float32 copy of a model's encoder, returning ``last_hidden_state`` only. Its cached
    sinusoidal position table is cleared: traced as a constant of its length, longer inputs would index past it."""

    def __init__(self, model: Any):
        super().__init__()
        self.encoder = copy.deepcopy(model.get_encoder()).float().eval()
        for module in self.encoder.modules():
            if isinstance(module, SinusoidalPositionalEncoding):
                module._table = None

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def export_onnx(model: Any, path: str | Path, example: dict | None = None) -> Path:
    """The encoder of ``model`` as one ONNX file at ``path``, dynamic in batch and length, traced on ``example``."""
    require_onnx()
    if example is None:
        example = {"input_ids": torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]]),
                   "attention_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])}
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's notes on axis names and deprecated pytree helpers
        torch.onnx.export(
            EncoderForExport(model).eval(), (example["input_ids"].long(), example["attention_mask"].long()),
            str(path), dynamo=True, input_names=list(INPUT_NAMES), output_names=list(OUTPUT_NAMES),
            external_data=False, verbose=False, dynamic_shapes={name: {0: batch, 1: sequence} for name in INPUT_NAMES},
        )
    return path
