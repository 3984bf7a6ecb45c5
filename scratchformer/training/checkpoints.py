"""Crash-safe Trainer checkpoints: a ``checkpoint-N`` folder appears only complete (staged, then renamed in one
``rename``), only complete ones count, and rotation never leaves a half-deleted one (docs/training.md, "Complete
checkpoints")."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

from .. import files
from ..errors import NonFiniteLossError, StorageError, redact
from ..integrity import check_finite, checksum_problems, safetensors_file_problem, write_checksums

CHECKPOINT_PREFIX = "checkpoint"  # transformers.trainer_utils.PREFIX_CHECKPOINT_DIR
CHECKPOINT_NAME = re.compile(rf"^{CHECKPOINT_PREFIX}-(\d+)$")
STAGING = "_checkpoint-staging"  # under OUTPUT_DIR; never matches checkpoint-*; "_*": no Hub push uploads it
DELETING = "_deleting-"  # prefix of a folder being deleted ("_*": no Hub push uploads it)
RUN_CONFIG = "train_config.json"
PICKLED_STATES = ("optimizer.pt", "scheduler.pt", "scaler.pt")  # what the Trainer unpickles on resume (+ rng_state*)
_REFUSED_GLOBAL = re.compile(r"Unsupported global: (GLOBAL \S+)")


# --------------------------------------------------------------------------------------------------------------------
# Is a checkpoint complete?
# --------------------------------------------------------------------------------------------------------------------


def checkpoint_problems(folder: str | Path, model_only: bool = False, loadable: bool = False) -> list[str]:
    """What keeps ``folder`` from being a complete Trainer checkpoint (empty list: complete). ``model_only``: saved
    with ``--save_only_model``. ``loadable`` (``--resume``) also verifies its ``checksums.sha256`` and unpickles the
    pickled states as the Trainer will (:func:`refused_pickles`)."""
    folder = Path(folder)
    if not folder.is_dir():
        return [f"{folder} is not a folder"]
    problems = _json_problems(folder / "config.json", None) + _weights_problems(folder)
    if model_only:
        return problems
    problems += _json_problems(folder / "trainer_state.json", "global_step")
    problems += _optimizer_problems(folder) + _torch_file_problems(folder / "scheduler.pt")
    rng_states = sorted(folder.glob("rng_state*.pth"))
    if not rng_states:
        problems.append("no rng_state*.pth")
    for path in [*rng_states, *folder.glob("scaler.pt"), *folder.glob("pytorch_model_fsdp*.bin")]:
        problems += _torch_file_problems(path)
    for path in sorted(folder.glob("stream_state_*.json")):
        problems += _json_problems(path, "stream")
    if loadable and not problems:
        problems += checksum_problems(folder) or refused_pickles(folder)
    return problems


def refused_pickles(folder: Path) -> list[str]:
    """What the Trainer's ``torch.load(..., weights_only=True)`` of ``--resume`` would refuse in ``folder`` (the RNG
    states with transformers' numpy allowlist), found before the model and data load; memory-mapped, so cheap."""
    import pickle

    import torch
    from transformers.trainer_pt_utils import safe_globals

    problems = []
    for path in [*(folder / name for name in PICKLED_STATES), *sorted(folder.glob("rng_state*.pth"))]:
        if not path.is_file():
            continue
        allowed = safe_globals() if path.name.startswith("rng_state") else contextlib.nullcontext()
        try:
            with allowed:
                torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except pickle.UnpicklingError as error:
            refused = _REFUSED_GLOBAL.search(str(error))
            problems.append(f"{path.name} holds pickled objects that torch.load(weights_only=True) refuses"
                            f"{f' ({refused.group(1)})' if refused else ''}")
        except (RuntimeError, OSError, ValueError, EOFError) as error:
            problems.append(f"{path.name} does not load ({type(error).__name__})")
    return problems


def _optimizer_problems(folder: Path) -> list[str]:
    """The optimizer state: ``optimizer.pt`` (plain, DDP), ``optimizer.bin`` (FSDP with ``FULL_STATE_DICT``), an
    ``optimizer_0`` folder (FSDP with ``SHARDED_STATE_DICT``) or the ``global_step*`` folder a DeepSpeed
    checkpoint's ``latest`` names (the last two only checked for presence)."""
    for name in ("optimizer.pt", "optimizer.bin"):
        if (folder / name).exists():
            return _torch_file_problems(folder / name)
    if (folder / "optimizer_0").is_dir():
        return []
    latest = folder / "latest"
    if latest.is_file() and (folder / latest.read_text(encoding="utf-8").strip()).is_dir():
        return []
    return ["no optimizer.pt"]


def _json_problems(path: Path, required_key: str | None) -> list[str]:
    if not path.is_file():
        return [f"no {path.name}"]
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return [f"{path.name} does not parse ({err.__class__.__name__})"]
    if not isinstance(value, dict) or (required_key is not None and required_key not in value):
        return [f"{path.name} is not a complete {'Trainer state' if required_key else 'config'}"]
    return []


def _weights_problems(folder: Path) -> list[str]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (OSError, ValueError, KeyError, AttributeError):
            return [f"{index.name} does not parse"]
        return [problem for shard in shards if (problem := safetensors_file_problem(folder / shard))]
    problem = safetensors_file_problem(folder / "model.safetensors")
    return [problem] if problem else []


def _torch_file_problems(path: Path) -> list[str]:
    """``torch.save`` writes a zip archive whose directory is at the end: a file cut short has none."""
    if not path.is_file():
        return [f"no {path.name}"]
    try:
        with zipfile.ZipFile(path) as archive:
            if not archive.namelist():
                return [f"{path.name} is empty"]
    except (OSError, zipfile.BadZipFile, ValueError):
        return [f"{path.name} is truncated or not a torch.save file"]
    return []


def list_checkpoints(output_dir: str | Path) -> list[tuple[int, Path]]:
    """``(step, folder)`` of every ``checkpoint-N`` folder in ``output_dir``, by step."""
    found = Path(output_dir).glob(f"{CHECKPOINT_PREFIX}-*")
    return sorted((int(m.group(1)), p) for p in found if (m := CHECKPOINT_NAME.match(p.name)) and p.is_dir())


def newest_complete_checkpoint(output_dir: str | Path, model_only: bool = False, loadable: bool = False
                               ) -> tuple[Path | None, list[tuple[Path, list[str]]]]:
    """The newest complete checkpoint of ``output_dir`` (or ``None``), and the newer incomplete ones skipped on the
    way, each with its problems (``loadable``: see :func:`checkpoint_problems`)."""
    skipped = []
    for _, folder in reversed(list_checkpoints(output_dir)):
        problems = checkpoint_problems(folder, model_only, loadable)
        if not problems:
            return folder, skipped
        skipped.append((folder, problems))
    return None, skipped


def describe_skipped(skipped: list[tuple[Path, list[str]]]) -> str:
    """``checkpoint-8 (no trainer_state.json), checkpoint-6 (...)``."""
    return ", ".join(f"{folder.name} ({'; '.join(problems[:3])})" for folder, problems in skipped)


# --------------------------------------------------------------------------------------------------------------------
# Rotation
# --------------------------------------------------------------------------------------------------------------------


def checkpoint_bytes(model) -> int:
    """About the bytes of a checkpoint of ``model``: its weights, and Adam's two moments of the same size (for the
    message of a full disk)."""
    return 3 * sum(p.numel() * p.element_size() for p in model.parameters())


def remove_folder(folder: Path) -> None:
    """Delete ``folder`` so that a kill half-way never leaves a half-deleted folder under its name: rename it to
    ``_deleting-NAME`` first (atomic), then delete that."""
    shutil.rmtree(_moved_aside(folder), ignore_errors=True)


def _moved_aside(folder: Path) -> Path:
    """Rename ``folder`` to ``_deleting-NAME`` (one atomic rename; a leftover of that name is deleted first)."""
    doomed = folder.with_name(DELETING + folder.name)
    shutil.rmtree(doomed, ignore_errors=True)
    os.rename(folder, doomed)
    return doomed


def rotate_checkpoints(output_dir: str | Path, save_total_limit: int | None, best: str | None = None,
                       model_only: bool = False, say: Callable[[str], None] = print) -> list[Path]:
    """Keep the newest ``save_total_limit`` complete checkpoints and ``best``, delete older complete ones and
    leftovers of interrupted deletions (incomplete ones are neither counted nor deleted); returns the deleted."""
    out = Path(output_dir)
    for leftover in out.glob(DELETING + "*"):
        shutil.rmtree(leftover, ignore_errors=True)
    if not save_total_limit or save_total_limit <= 0:
        return []
    complete, incomplete = [], []
    for _, folder in list_checkpoints(out):
        (incomplete if checkpoint_problems(folder, model_only) else complete).append(folder)
    keep = set(complete[-save_total_limit:])
    if best is not None:
        keep.add(Path(best))
    deleted = [folder for folder in complete if folder not in keep]
    for folder in deleted:
        remove_folder(folder)
    if incomplete:
        say(f"incomplete checkpoint folder(s) not counted as checkpoints: {', '.join(p.name for p in incomplete)}")
    return deleted


# --------------------------------------------------------------------------------------------------------------------
# Atomic saving
# --------------------------------------------------------------------------------------------------------------------


def _fsync_tree(folder: Path) -> None:
    """Flush the files of ``folder`` and the folder itself to disk (a machine that loses power keeps them)."""
    for path in [*sorted(p for p in folder.rglob("*") if p.is_file()), folder]:
        _fsync(path)


def _fsync(path: Path) -> None:
    """:func:`scratchformer.files.fsync`, where it can be done (some file systems cannot fsync a folder)."""
    with contextlib.suppress(OSError):
        files.fsync(path)


def publish(staged: Path, final: Path) -> None:
    """Move the complete checkpoint ``staged`` to ``final`` with one rename (a folder already at ``final``, e.g. the
    same step of a run resumed from an earlier checkpoint, is moved aside first and deleted after)."""
    _fsync_tree(staged)
    old = _moved_aside(final) if final.exists() else None
    os.rename(staged, final)
    _fsync(final.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


class CrashSafeCheckpoints:
    """Mixed into a ``transformers.Trainer``: every checkpoint is staged, renamed into place once every process has
    written its part, and rotated; ``run_config``, when set, is saved in each as ``train_config.json``."""

    run_config: dict | None = None
    # callables (folder, global_step) that every process calls to add its own files to a checkpoint before it is
    # published (a streamed run's stream_state_<rank>.json)
    process_files: tuple = ()
    _staging_root: str | None = None
    _push_when_published = False
    failed_pushes: tuple | list = ()

    def _get_output_dir(self, trial) -> str:
        # while a checkpoint is being written, the Trainer's "run folder" is the staging folder
        return self._staging_root or super()._get_output_dir(trial)

    def _save_checkpoint(self, model, trial) -> None:
        run_dir = Path(super()._get_output_dir(trial))
        name = f"{CHECKPOINT_PREFIX}-{self.state.global_step}"
        staging_root = run_dir / STAGING
        self.finish_checkpoint_push()  # the upload walks the run folder, which this save changes
        with self._failed_save_is_one_error(run_dir / name, staging_root):
            if self.args.should_save:
                shutil.rmtree(staging_root, ignore_errors=True)  # what a killed save left behind
                staging_root.mkdir(parents=True)
            self.accelerator.wait_for_everyone()
            self._staging_root = str(staging_root)
            try:
                # the Trainer's own save (weights, optimizer, scheduler, RNG states of every process, trainer state);
                # its rotation sees only the staging folder, which holds one checkpoint, so it deletes nothing
                super()._save_checkpoint(model, trial)
                for write in self.process_files:
                    write(staging_root / name, self.state.global_step)
            finally:
                self._staging_root = None
            self.accelerator.wait_for_everyone()  # every process has written its rng_state_<rank>.pth
            if self.args.should_save:
                self._publish(staging_root / name, run_dir / name)
                shutil.rmtree(staging_root, ignore_errors=True)
                rotate_checkpoints(run_dir, self.args.save_total_limit, self.state.best_model_checkpoint,
                                   model_only=self.args.save_only_model, say=lambda text: None)
                if self._push_when_published:  # last: the folder stays as it is until the next save or the end
                    self._push_when_published = False
                    super()._push_from_checkpoint(str(run_dir / name))

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        """``--push-to-hub``: the Trainer's background push of a checkpoint waits until it is published and reads it
        there, not in the staging folder that is renamed the moment after."""
        if self._staging_root is not None:
            self._push_when_published = True
            return
        super()._push_from_checkpoint(checkpoint_folder)

    def finish_checkpoint_push(self) -> None:
        """Wait for the background push of the last checkpoint (``--push-to-hub``), whose upload walks the run
        folder that a save would change under it; failures are kept, redacted, in ``failed_pushes``."""
        push, self.push_in_progress = getattr(self, "push_in_progress", None), None
        if push is not None:
            push.wait_until_done()
            self.failed_pushes = [*self.failed_pushes, *(
                f"{type(job.exception()).__name__}: {redact(job.exception(), self.args.hub_token)}"
                for job in push.jobs if job.exception() is not None)]

    @contextlib.contextmanager
    def _failed_save_is_one_error(self, checkpoint: Path, staging_root: Path) -> Iterator[None]:
        """A save the file system refuses (a full disk: ``torch.save`` says only "unexpected pos") deletes what it
        staged and ends the run with a :class:`~scratchformer.errors.StorageError` naming the folder and the space."""
        try:
            with files.writing(checkpoint, checkpoint_bytes(self.model)):
                yield
        except BaseException as error:  # Ctrl-C during the save too: the staged half is removed, not left behind
            shutil.rmtree(staging_root, ignore_errors=True)
            if not isinstance(error, StorageError):
                raise
            earlier = ("; the earlier checkpoints are intact (--resume continues from the newest complete one)"
                       if list_checkpoints(checkpoint.parent) else "")
            raise StorageError(f"{checkpoint.name} was not saved: {error}{earlier}", error.errno,
                               error.filename) from (error.__cause__ or error)

    def _publish(self, staged: Path, final: Path) -> None:
        if self.run_config is not None:
            files.write_json(staged / RUN_CONFIG, self.run_config)
        if self.state.best_model_checkpoint is not None and Path(self.state.best_model_checkpoint) == staged:
            self.state.best_model_checkpoint = str(final)  # the Trainer found the best checkpoint in staging
            self.state.save_to_json(str(staged / "trainer_state.json"))
        step = self.state.global_step
        check_finite(final.name, saved_weights(staged), evaluation_at(self.state.log_history, step),
                     error=NonFiniteLossError, advice=stopped_run_advice(self.args, final.parent, step))
        write_checksums(staged)  # checksums.sha256 of the weights: scratchformer.load verifies them
        publish(staged, final)


def saved_weights(folder: Path) -> Iterator[tuple[str, object]]:
    """``(name, tensor)`` of every weight in the safetensors files of ``folder``, one tensor read at a time."""
    from safetensors import safe_open

    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(str(path), framework="pt") as handle:
            for name in handle.keys():
                yield name, handle.get_tensor(name)


def evaluation_at(log_history: list[dict], step: int) -> dict | None:
    """The metrics of the Trainer's evaluation at ``step`` (the latest evaluation logged, if it is of that step;
    ``Trainer.log`` adds ``"step"``), or ``None``."""
    for entry in reversed(log_history):
        if any(key.startswith("eval_") for key in entry):
            return {k: v for k, v in entry.items() if k != "step"} if entry.get("step") == step else None
    return None


def stopped_run_advice(args, output_dir: str | Path, step: int) -> str:
    """What a run stopped at ``step`` by a non-finite loss or model kept (its newest complete checkpoint before
    ``step``), and what to try."""
    kept = next((folder for at, folder in reversed(list_checkpoints(output_dir))
                 if at < step and not checkpoint_problems(folder)), None)
    keeps = (f"its last good checkpoint is {kept} (--resume {kept} continues the same run; --model {kept} starts "
             "a new one from its weights, where the options below may change)" if kept is not None
             else "no checkpoint was saved before it")
    return (f"; the run stopped there and {keeps}. Try a lower --learning-rate (the peak was {args.learning_rate:.3g}), "
            "float32 instead of --fp16/--bf16, or a smaller init_std in --config-overrides; --no-stop-on-nonfinite "
            "trains on past a non-finite training loss")
