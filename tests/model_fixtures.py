"""Small model configurations and helpers shared by the tests (imported as a plain module by pytest)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from scratchformer import ScratchformerConfig

TINY = dict(
    vocab_size=61,
    d_model=32,
    encoder_layers=2,
    decoder_layers=3,
    encoder_attention_heads=4,
    decoder_attention_heads=2,
    encoder_ffn_dim=48,
    decoder_ffn_dim=40,
    max_position_embeddings=64,
    dropout=0.0,
)


def tiny_config(**overrides) -> ScratchformerConfig:
    """A few-thousand-parameter config (2 encoder / 3 decoder layers, different head counts per side)."""
    return ScratchformerConfig(**{**TINY, **overrides})


def run_without_scratchformer(code: str, workdir: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python process in which ``import scratchformer`` fails, as for a Hub user.

    The process starts in ``workdir`` with an empty ``HF_HOME`` and the Hub switched off; ``sys.modules`` is
    poisoned first, so any attempt to import the package raises ``ImportError``.
    """
    prelude = textwrap.dedent(
        """
        import sys
        sys.modules["scratchformer"] = None  # the package is not installed for a Hub user
        try:
            import scratchformer  # noqa: F401
        except ImportError:
            pass
        else:
            raise SystemExit("scratchformer is importable: the test would prove nothing")
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(HF_HOME=str(workdir / "hf_home"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)], cwd=workdir, env=env, capture_output=True,
        text=True, timeout=timeout,
    )
