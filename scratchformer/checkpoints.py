"""Pretrained checkpoints that ship inside the package (no download needed).

``load_pretrained("small")`` returns the model and its tokenizer; ``pretrained_path("small")`` the folder, which
any Hugging Face loader accepts (``AutoModel.from_pretrained(pretrained_path("small"))`` after ``import
scratchformer``). The weights are stored in float16 to keep the package small; the config says ``dtype: float32``,
so every loader gives a float32 model unless told otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"
CHECKPOINTS = {
    # name -> folder under scratchformer/pretrained/ (model card: that folder's README.md)
    "small": "scratchformer-small",
}


def pretrained_path(name: str = "small") -> Path:
    """The folder of a shipped checkpoint. ``ValueError`` for an unknown name, ``FileNotFoundError`` if missing."""
    if name not in CHECKPOINTS:
        raise ValueError(f"unknown pretrained checkpoint {name!r}; available: {sorted(CHECKPOINTS)}")
    folder = PRETRAINED_DIR / CHECKPOINTS[name]
    if not (folder / "model.safetensors").is_file():
        raise FileNotFoundError(
            f"the pretrained checkpoint {name!r} is not installed at {folder} (model.safetensors is missing); "
            "reinstall scratchformer, or train one with the command in docs/training.md"
        )
    return folder


def load_pretrained(name: str = "small", *, encoder_only: bool = False, attn_implementation: str | None = None,
                    ) -> tuple[Any, Any]:
    """Load a shipped checkpoint in float32 and eval mode: ``(model, tokenizer)``.

    ``encoder_only=True`` gives the :class:`ScratchformerEncoderModel` (contextual embeddings, what ``AutoModel``
    gives); otherwise the full :class:`ScratchformerForConditionalGeneration`.
    """
    import torch

    from .modeling_scratchformer import ScratchformerEncoderModel, ScratchformerForConditionalGeneration
    from .tokenization_scratchformer import ScratchformerTokenizer

    folder = pretrained_path(name)
    model_class = ScratchformerEncoderModel if encoder_only else ScratchformerForConditionalGeneration
    kwargs = {"attn_implementation": attn_implementation} if attn_implementation else {}
    model = model_class.from_pretrained(folder, dtype=torch.float32, **kwargs).eval()
    tokenizer = ScratchformerTokenizer.from_pretrained(folder)
    return model, tokenizer
