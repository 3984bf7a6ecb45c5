"""Which Trainer checkpoint a run continues from (``--resume``), and at which step a checkpoint was saved.

A run's checkpoints are ``OUTPUT_DIR/checkpoint-N`` folders with a ``trainer_state.json``. Starting a new run in a
folder that holds some is refused (it would mix two runs); ``--resume`` picks the latest, ``--resume PATH`` a given
one. ``--resume CHECKPOINT --max-steps N`` with N at most the checkpoint's step trains no further and only finishes
the run from it (:func:`finishes_without_training`), e.g. to end a long run early.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import TrainingSetupError

LATEST = "latest"  # what ``--resume`` without a value means


def checkpoint_step(checkpoint: str | Path) -> int:
    """The optimizer step a Trainer checkpoint folder was saved at (from its ``trainer_state.json``)."""
    return int(json.loads((Path(checkpoint) / "trainer_state.json").read_text())["global_step"])


def resolve_resume(output_dir: str, resume: str | None) -> str | None:
    """The checkpoint folder to continue from, or ``None`` for a new run; :class:`TrainingSetupError` for a new run
    in a folder with checkpoints, or a ``--resume`` with nothing to resume."""
    from transformers.trainer_utils import get_last_checkpoint

    out = Path(output_dir)
    latest = get_last_checkpoint(str(out)) if out.is_dir() else None
    if resume is None:
        if latest is not None:
            raise TrainingSetupError(
                f"{out} already holds checkpoints (latest: {Path(latest).name}); pass --resume to continue that "
                "run, or choose another --output-dir")
        return None
    if resume == LATEST:
        if latest is None:
            raise TrainingSetupError(f"--resume: no checkpoint-* folder in {out}")
        return latest
    if not (Path(resume) / "trainer_state.json").is_file():
        raise TrainingSetupError(f"--resume {resume}: not a Trainer checkpoint (no trainer_state.json)")
    return resume


def finishes_without_training(resume_from: str | None, max_steps: int) -> bool:
    """``--resume CHECKPOINT --max-steps N`` with the checkpoint at step >= N: nothing left to train."""
    return resume_from is not None and checkpoint_step(resume_from) >= max_steps > 0
