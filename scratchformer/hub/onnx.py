"""The encoder as ONNX (``scratchformer export --onnx``): ``onnx/model.onnx``, dynamic batch size and length.

Inputs ``input_ids`` and ``attention_mask`` (int64, ``(batch, sequence)``), output ``last_hidden_state`` (float32,
``(batch, sequence, d_model)``): what ``AutoModel`` (the encoder) gives. ONNX Runtime runs it (``tests/test_onnx.py``
checks it against PyTorch); ``onnx/model.onnx`` is where transformers.js and Optimum look for a model's ONNX file,
but neither has been run on it here.

Only the dynamo exporter (``torch.onnx.export(..., dynamo=True)``, which needs ``onnxscript``) is used. The legacy
TorchScript exporter runs without complaint on this model but records the shapes of the example input: the graph it
writes gives wrong outputs, or fails, for other lengths. The dynamo exporter traces the sinusoidal position table as
a function of the input length, so any length works; the export runs on a float32 copy of the encoder whose cached
position table is cleared, so the model passed in is left as it was.
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
    """Write the encoder of ``model`` (any Scratchformer model) to ``path`` as one self-contained ONNX file, traced
    on ``example`` (a tokenizer batch; by default a padded batch of two texts), with dynamic batch size and length."""
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
