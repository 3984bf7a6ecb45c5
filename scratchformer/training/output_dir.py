"""The output folder of a run: never shared by two runs, never reused by accident.

- :class:`OutputLock`: ``OUTPUT_DIR/.scratchformer.lock`` holds the pid, host and start time of the run that uses
  the folder. It is created with ``os.open(O_CREAT | O_EXCL)``, so of two runs starting at once exactly one gets it,
  and removed when the run ends (also on an error). A lock left by a killed run (its pid no longer runs on this
  host, or now belongs to a younger process) is reported and broken; a lock of a live run, or of another host, is
  refused with a message that says who holds it. Under ``torchrun`` only the main process (global rank 0) takes it.
- :func:`claim_output_dir`: takes the lock, then refuses a folder that holds an earlier run or a model
  (``config.json``, ``model.safetensors``, ``checkpoint-*``, ``train_config.json``) unless the run continues it
  (``--resume``) or replaces it (``--overwrite_output_dir``, which deletes the earlier run's files first).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import TrainingSetupError
from .checkpoints import DELETING, STAGING, list_checkpoints

LOCK_NAME = ".scratchformer.lock"
PREVIOUS_RUN_FILES = ("config.json", "model.safetensors", "train_config.json")
# what ``scratchformer train`` writes in OUTPUT_DIR (deleted by --overwrite_output_dir)
RUN_FOLDERS = ("tokenizer", STAGING)
RUN_FILES = ("config.json", "generation_config.json", "model.safetensors", "model.safetensors.index.json",
             "train_config.json", "training_args.bin", "tokenizer.json", "tokenizer_config.json",
             "special_tokens_map.json", "loss_history.json", "loss_curve.png", "all_results.json", "run_record.json",
             "configuration_scratchformer.py", "modeling_scratchformer.py", "tokenization_scratchformer.py")


def _process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (field 22 of ``/proc/PID/stat``), to tell it from a later process that
    reuses the pid; ``None`` where there is no ``/proc``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]


def _runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


class OutputLock:
    """The lock of one output folder (see the module docstring): :meth:`acquire`, then :meth:`release`."""

    def __init__(self, output_dir: str | Path, say: Callable[[str], None] | None = None):
        self.path = Path(output_dir) / LOCK_NAME
        self.say = say or (lambda text: print(f"[scratchformer train] {text}", file=sys.stderr, flush=True))
        self.held: dict[str, Any] | None = None

    def acquire(self) -> OutputLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "process_start": _process_start(os.getpid()),
              "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._break_if_stale()
                continue
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
            self.held = me
            return self
        raise TrainingSetupError(f"--output-dir {self.path.parent}: could not take the lock {self.path}")

    def release(self) -> None:
        """Remove the lock if it is still ours."""
        if self.held is not None and self._read() == self.held:
            self.path.unlink(missing_ok=True)
        self.held = None

    def _read(self) -> dict[str, Any] | None:
        try:
            holder = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        return holder if isinstance(holder, dict) else None

    def _break_if_stale(self) -> None:
        """Remove a lock whose run is gone (see :meth:`_stale_reason`); otherwise refuse."""
        holder = self._read()
        if holder is None and not self.path.exists():
            return  # released meanwhile
        reason = self._stale_reason(holder)
        if reason is None:
            raise TrainingSetupError(self._refusal(holder))
        # rename first: of two runs breaking the same stale lock, only one removes it (and never a fresh one)
        aside = self.path.with_name(f"{LOCK_NAME}.stale.{os.getpid()}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        try:
            moved = json.loads(aside.read_text())
        except (OSError, ValueError):
            moved = None
        if moved != holder:  # someone else's fresh lock: put it back
            try:
                os.link(aside, self.path)
            except FileExistsError:
                pass
            aside.unlink(missing_ok=True)
            raise TrainingSetupError(self._refusal(self._read()))
        aside.unlink(missing_ok=True)
        self.say(f"removed the stale lock {self.path}: {reason}")

    def _stale_reason(self, holder: dict[str, Any] | None) -> str | None:
        if holder is None or holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
            return None  # unreadable, or another machine's: cannot tell
        pid = holder["pid"]
        if not _runs(pid):
            return f"process {pid} of the run that held it no longer runs (killed?)"
        start = holder.get("process_start")
        if start is not None and _process_start(pid) not in (None, start):
            return f"process {pid} of the run that held it has ended (the pid now belongs to another process)"
        return None

    def _refusal(self, holder: dict[str, Any] | None) -> str:
        if holder is None:
            return (f"--output-dir {self.path.parent} is locked by another run ({self.path} is unreadable); if no run "
                    f"uses this folder, delete {self.path}")
        return (f"--output-dir {self.path.parent} is in use by another run (process {holder.get('pid')} on "
                f"{holder.get('host')}, started {holder.get('started')}); wait for it to end or choose another "
                f"--output-dir. If that run is gone (e.g. its machine rebooted), delete {self.path}")


def previous_run(output_dir: str | Path) -> list[str]:
    """What in ``output_dir`` shows an earlier run or a model (names of files and checkpoint folders)."""
    out = Path(output_dir)
    if not out.is_dir():
        return []
    found = [name for name in PREVIOUS_RUN_FILES if (out / name).exists()]
    return found + [folder.name for _, folder in list_checkpoints(out)]


def claim_output_dir(output_dir: str, resume: str | None, overwrite: bool,
                     say: Callable[[str], None] | None = None) -> OutputLock:
    """Take the folder's lock, then check that the run may use the folder (see the module docstring); with
    ``overwrite``, delete what an earlier run left. Returns the held lock (release it when the run ends)."""
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise TrainingSetupError(f"--output-dir {out} is a file, not a folder")
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
