"""``--streaming``: train from a stream of rows (``datasets.IterableDataset``) that is never loaded whole, one shard
per process, its position saved in every checkpoint (docs/training.md, "Streaming")."""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from transformers import TrainerCallback

from .. import files
from ..errors import DataError, TrainingSetupError
from . import data

if TYPE_CHECKING:
    from .options import TrainOptions

STATE_FILE = "stream_state_{rank}.json"  # in each checkpoint, one per process
LOG_ENV = "SCRATCHFORMER_LOG_TRAIN_EXAMPLES"
KEEP_POSITIONS = 64  # batch positions kept beyond the gradient-accumulation window (the loader reads ahead)


# --------------------------------------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------------------------------------


def load_stream_splits(options: TrainOptions, seed: int) -> data.RawSplits:
    """The training rows as a stream and the validation rows as a small ``Dataset`` (docs/training.md);
    ``--max-train-samples`` caps the stream, ``--max-eval-samples`` the validation set (a seeded sample)."""
    columns = data.text_columns(options)
    train = data.load_training_rows(options, streaming=True)
    if not data.column_names(train):
        raise DataError("the training data has no rows")
    data.check_columns(train, columns, "the training data")
    if options.validation_files:
        files = data.load_data_files(options.validation_files, options.data_format, options.cache_dir, streaming=True)
        data.check_columns(files, columns, "the validation data")
        valid = _first_rows(files, options.max_eval_samples or None)
    else:
        valid = _first_rows(train, options.streaming_validation_rows)
        train = train.filter(_not_in(valid, columns), batched=True)
    valid = data.drop_empty(valid, columns)
    if len(valid) == 0:
        raise DataError("the validation data has no rows with text")
    if options.max_eval_samples and len(valid) > options.max_eval_samples:
        valid = valid.shuffle(seed=seed).select(range(options.max_eval_samples))
    train = data.drop_empty(train, columns)
    if options.max_train_samples:
        train = train.take(options.max_train_samples)
    return data.RawSplits(train, valid, columns, None)


def _first_rows(stream, count: int | None):
    """The first ``count`` rows (all with ``None``) of a stream, as an in-memory ``Dataset``."""
    import datasets

    rows = list(stream.take(count) if count else stream)
    if not rows:
        raise DataError("the validation data has no rows")
    return datasets.Dataset.from_list(rows)


def _row_key(values) -> tuple[str, ...]:
    return tuple(data._text(value) for value in values)


def _not_in(held_out, columns: list[str]):
    """A batched filter that drops every row equal (in ``columns``) to a held-out one."""
    held = {_row_key(values) for values in zip(*(held_out[c] for c in columns))}

    def keep(batch):
        return [_row_key(values) not in held for values in zip(*(batch[c] for c in columns))]

    return keep


# --------------------------------------------------------------------------------------------------------------------
# This process's examples, pass after pass
# --------------------------------------------------------------------------------------------------------------------


class PassesOverStream(torch.utils.data.IterableDataset):
    """A ``datasets.IterableDataset`` read again from its start each time it ends (pass 0, 1, ...; the pass is
    ``set_epoch``), without end. With ``tag_pass`` each example carries its pass as ``"epoch"`` (the noise of
    denoising depends on it). :meth:`state_dict` is the stream's own (its ``"epoch"`` is the pass)."""

    def __init__(self, stream, tag_pass: bool = True):
        super().__init__()
        self.stream = stream
        self.tag_pass = tag_pass
        self.passes = 0
        self._resume_at: dict | None = None  # a loaded state, until iteration starts from it
        self._started = False

    def state_dict(self) -> dict:
        if not self._started:
            return self._resume_at or {"epoch": self.passes, "examples_iterable": None}
        return self.stream.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.passes = int(state["epoch"])
        self._resume_at = state if state.get("examples_iterable") is not None else None
        if self._resume_at is not None:
            self.stream.load_state_dict(state)

    def __iter__(self):
        self._started = True
        while True:
            resuming = self._resume_at is not None and int(self._resume_at["epoch"]) == self.passes
            self.stream.set_epoch(self.passes)
            empty = True
            for example in self.stream:
                empty = False
                yield {**example, "epoch": self.passes} if self.tag_pass else example
            if empty and not resuming:
                raise DataError(f"pass {self.passes} over the training stream gave no example")
            self.passes += 1


def token_stream(options: TrainOptions, train, tokenizer, rank: int, world_size: int,
                 device: torch.device | str = "cpu", seed: int = 0) -> PassesOverStream:
    """Process ``rank``'s shard of the training stream (``split_dataset_by_node``), tokenized as it is read; raises
    :class:`DataError` on every process when any process's shard gives no example."""
    from datasets.distributed import split_dataset_by_node

    shard = split_dataset_by_node(train, rank=rank, world_size=world_size)
    tokens = data.tokenize_for_objective(shard, tokenizer, options, seed, training=True)
    _check_every_shard_has_examples(tokens, rank, device)
    return PassesOverStream(tokens, tag_pass=options.objective == "denoise")


def _check_every_shard_has_examples(tokens, rank: int, device: torch.device | str) -> None:
    has = torch.tensor([float(data.first_row(tokens) is not None)], device=device)  # NCCL reduces no CPU tensor
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(has, op=torch.distributed.ReduceOp.MIN)
    if not has.item():
        raise DataError(f"no training example is left after tokenization in some process's shard of the stream "
                        f"(this is process {rank}; texts under 4 tokens are dropped for denoising); give more data "
                        "or fewer processes")


# --------------------------------------------------------------------------------------------------------------------
# Batches, and where the stream was at each checkpoint
# --------------------------------------------------------------------------------------------------------------------


class StreamPosition(TrainerCallback):
    """The training batches of a stream and its position after each, saved into and restored from checkpoints. The
    loader reads ahead, so the position is looked up by the batches trained: ``(global_step - start) x accumulation``."""

    def __init__(self, stream: PassesOverStream, collator, rank: int, world_size: int, accumulation: int):
        self.stream, self.collator = stream, collator
        self.rank, self.world_size, self.accumulation = rank, world_size, accumulation
        self.collated = 0
        self.start_step = 0
        self.positions: dict[int, dict] = {0: stream.state_dict()}
        log_dir = os.environ.get(LOG_ENV)
        self.log = Path(log_dir) / f"examples-rank{rank}.jsonl" if log_dir else None

    def collate(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        batch = self.collator(features)
        self.collated += 1
        self.positions[self.collated] = self.stream.state_dict()
        self.positions.pop(self.collated - KEEP_POSITIONS - 2 * self.accumulation, None)
        if self.log is not None:
            self._log(features)
        return batch

    def _log(self, features: list[dict[str, Any]]) -> None:
        examples = [[f.get("epoch", 0), zlib.crc32(np.asarray(f["input_ids"], dtype=np.int64).tobytes())]
                    for f in features]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "a") as f:
            f.write(json.dumps({"batch": self.collated, "examples": examples}) + "\n")

    def on_train_begin(self, args, state, control, **kwargs):
        self.start_step = state.global_step
        self.collated = 0
        self.positions = {0: self.stream.state_dict()}

    def write(self, folder: Path, global_step: int) -> None:
        """Save the stream's position after the batches trained up to ``global_step`` into ``folder``."""
        taken = (global_step - self.start_step) * self.accumulation
        if taken not in self.positions:
            raise RuntimeError(f"stream position after batch {taken} was not kept (have {sorted(self.positions)})")
        folder.mkdir(parents=True, exist_ok=True)
        state = {"stream": self.positions[taken], "rank": self.rank, "world_size": self.world_size,
                 "global_step": global_step}
        files.write_text(folder / STATE_FILE.format(rank=self.rank), json.dumps(state))

    def restore(self, checkpoint: str | Path) -> None:
        """Continue the stream where ``checkpoint`` left it (see :func:`check_resume` for the checks)."""
        saved = json.loads((Path(checkpoint) / STATE_FILE.format(rank=self.rank)).read_text())
        self.stream.load_state_dict(saved["stream"])
        self.positions = {0: self.stream.state_dict()}


def check_resume(checkpoint: str | Path, world_size: int) -> None:
    """Before any data is read: a streamed run resumes with the stream position of each of its processes, so with
    the same number of processes (the shards depend on it)."""
    folder = Path(checkpoint)
    found = sorted(folder.glob(STATE_FILE.format(rank="*")))
    if not found:
        raise TrainingSetupError(f"--resume {folder}: no {STATE_FILE.format(rank='<rank>')} in it: it was not saved "
                                 "by a --streaming run, so where the stream was cannot be restored")
    saved = json.loads(found[0].read_text())["world_size"]
    if saved != world_size or len(found) != world_size:
        raise TrainingSetupError(f"--resume {folder}: the streamed run had {saved} process(es), each with its own "
                                 f"shard and position in the stream; resume it with {saved} process(es), not "
                                 f"{world_size}")


class StreamedTrainData:
    """Mixed into the run's trainer: with ``stream_position`` set, the training data loader reads this process's
    shard of the stream (already split by :func:`token_stream`, so not split again across processes) through
    :meth:`StreamPosition.collate`; evaluation keeps the trainer's own loader and collator."""

    stream_position: StreamPosition | None = None

    def get_train_dataloader(self):
        if self.stream_position is None:
            return super().get_train_dataloader()
        from accelerate.data_loader import prepare_data_loader
        from torch.utils.data import DataLoader

        # its own generator: starting to read must not draw from the global RNG (dropout), which --resume restores
        # before the loader starts, so that a resumed run draws the same dropout masks as an uninterrupted one
        loader = DataLoader(self.stream_position.stream, batch_size=self._train_batch_size,
                            collate_fn=self.stream_position.collate, num_workers=0,
                            pin_memory=self.args.dataloader_pin_memory, generator=torch.Generator())
        # one process's view: placed on its device, neither re-sharded nor dispatched from process 0
        return prepare_data_loader(loader, device=self.args.device, num_processes=1, process_index=0,
                                   put_on_device=True, dispatch_batches=False)
