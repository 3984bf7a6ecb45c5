"""The output folder of a run: never shared by two runs (an operating-system lock, :class:`OutputLock`), never an
input of the run, never reused by accident (:func:`claim_output_dir`; docs/training.md, "Output folders")."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from filelock import FileLock, Timeout

from .. import files
from ..errors import TrainingSetupError
from ..models import CODE_FILES
from .checkpoints import DELETING, STAGING, list_checkpoints

if TYPE_CHECKING:
    from .options import TrainOptions

LOCK_NAME = "_scratchformer.lock"  # "_*": the Trainer's pushes skip it and its holder file
HOLDER_NAME = LOCK_NAME + ".holder"  # who holds the lock, for the message of a refused run
PREVIOUS_RUN_FILES = ("config.json", "model.safetensors", "train_config.json")
# what ``scratchformer train`` writes in OUTPUT_DIR (deleted by --overwrite_output_dir)
RUN_FOLDERS = ("tokenizer", STAGING)
RUN_FILES = ("config.json", "generation_config.json", "model.safetensors", "model.safetensors.index.json",
             "checksums.sha256", "train_config.json", "training_args.bin", "tokenizer.json", "tokenizer_config.json",
             "special_tokens_map.json", "loss_history.json", "loss_curve.png", "all_results.json", "run_record.json",
             *CODE_FILES, "tokenization_scratchformer.py")


class OutputLock:
    """The lock of one output folder (see the module docstring): :meth:`acquire`, then :meth:`release`."""

    def __init__(self, output_dir: str | Path, say: Callable[[str], None] | None = None):
        self.path = Path(output_dir) / LOCK_NAME
        self.holder = Path(output_dir) / HOLDER_NAME
        self.say = say or (lambda text: print(f"[scratchformer train] {text}", file=sys.stderr, flush=True))
        self._lock = FileLock(str(self.path), timeout=0)

    def acquire(self) -> OutputLock:
        """Take the lock, or raise :class:`TrainingSetupError` at once if another run holds it (a
        :class:`~scratchformer.errors.StorageError` where the folder cannot be written, and a one-line error for any
        other failure to make it or its lock file: ``filelock`` would report that as a lock held)."""
        folder = self.path.parent
        files.check_writable(files.folder_of(folder))
        with files.writing(folder, every_os_error=True, what=f"--output-dir {folder}: cannot be written: "):
            folder.mkdir(parents=True, exist_ok=True)
            self.path.touch(exist_ok=True)
            try:
                self._lock.acquire()
            except Timeout:
                raise TrainingSetupError(self._refusal()) from None
            try:
                files.write_text(self.holder, f"process {os.getpid()} on {socket.gethostname()}, started "
                                              f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n")
            except BaseException:
                self._lock.release()
                raise
        return self

    @property
    def held(self) -> bool:
        return self._lock.is_locked

    def release(self) -> None:
        if self._lock.is_locked:
            self.holder.unlink(missing_ok=True)
            self._lock.release()

    def _refusal(self) -> str:
        try:
            holder = " (" + self.holder.read_text(encoding="utf-8").strip() + ")"
        except OSError:
            holder = ""
        return (f"--output-dir {self.path.parent} is in use by another run{holder}; wait for it to end or choose "
                "another --output-dir")


def previous_run(output_dir: str | Path) -> list[str]:
    """What in ``output_dir`` shows an earlier run or a model (names of files and checkpoint folders)."""
    out = Path(output_dir)
    if not out.is_dir():
        return []
    found = [name for name in PREVIOUS_RUN_FILES if (out / name).exists()]
    return found + [folder.name for _, folder in list_checkpoints(out)]


def run_inputs(options: TrainOptions) -> list[tuple[str, str]]:
    """``(option, path)`` of every local file or folder the run reads: ``--model`` and ``--tokenizer`` (aliases
    resolved), the training and validation files, and ``--dataset-name`` where it names a local folder."""
    from .model_setup import source_folder

    inputs = [(flag, source_folder(name)) for flag, name in (("--model", options.model),
                                                              ("--tokenizer", options.tokenizer)) if name]
    inputs += [("--train-files", path) for path in options.train_files or []]
    inputs += [("--validation-files", path) for path in options.validation_files or []]
    if options.dataset_name and os.path.exists(options.dataset_name):
        inputs.append(("--dataset-name", options.dataset_name))
    return inputs


def check_apart_from_inputs(options: TrainOptions, output_dir: str) -> None:
    """Refuse an ``--output-dir`` that is a file, may not be written into, or is, contains or is inside anything the
    run reads (:func:`run_inputs`), before anything is written or deleted, whatever ``--overwrite_output_dir`` says."""
    files.check_output_folder(output_dir, [(f"{flag} {path}", path) for flag, path in run_inputs(options)],
                              error=TrainingSetupError, name=f"--output-dir {output_dir}",
                              why="the run writes (and --overwrite_output_dir deletes) files in its output folder, so "
                              "it must be apart from everything the run reads; choose another --output-dir")


def claim_output_dir(output_dir: str, resume: str | None, overwrite: bool,
                     say: Callable[[str], None] | None = None) -> OutputLock:
    """Take the folder's lock, then check that the run may use the folder (docs/training.md); with
    ``overwrite``, delete what an earlier run left. Returns the held lock (release it when the run ends)."""
    out = Path(output_dir)  # not a file: check_apart_from_inputs said so first
    lock = OutputLock(out, say).acquire()
    try:
        found = previous_run(out)
        if found and resume is None and not overwrite:
            raise TrainingSetupError(
                f"--output-dir {out} already holds a run or a model ({', '.join(found[:6])}"
                f"{', ...' if len(found) > 6 else ''}); pass --resume to continue that run, --overwrite_output_dir "
                "to replace it, or choose another --output-dir")
        if overwrite:
            removed = clear_previous_run(out)
            if removed:
                lock.say(f"--overwrite_output_dir: deleted the earlier run's "
                         f"{', '.join(removed[:8])}{', ...' if len(removed) > 8 else ''} in {out}")
    except BaseException:
        lock.release()
        raise
    return lock


def clear_previous_run(output_dir: str | Path) -> list[str]:
    """Delete what ``scratchformer train`` writes in ``output_dir`` (checkpoints, the tokenizer it trained, the final
    model and run files); other files stay. Returns the names deleted."""
    out = Path(output_dir)
    removed = []
    folders = [folder for _, folder in list_checkpoints(out)] + [out / name for name in RUN_FOLDERS]
    for folder in [*folders, *out.glob(DELETING + "*")]:
        if folder.is_dir():
            shutil.rmtree(folder)
            removed.append(folder.name + "/")
    for name in RUN_FILES:
        if (out / name).is_file():
            (out / name).unlink()
            removed.append(name)
    return removed
