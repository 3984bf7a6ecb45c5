"""``--streaming``: training from a stream (``datasets.IterableDataset``) of a gzip file the tests write.

- in one process: nothing is converted or cached before training, the tokenizer reads only the first rows, the
  first rows are held out for validation, and a run stopped after a checkpoint resumes to the very losses and
  weights of an uninterrupted one (the stream's position comes back from the checkpoint);
- the options a stream cannot have are refused before any data is read;
- two processes under ``torchrun`` (gloo): each reads its own shard, no example is seen twice in a pass across
  processes, the loss falls, and ``--resume`` continues each process's stream with the first batch it had not
  trained.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import socket
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO_ROOT
from safetensors.torch import load_file
from test_training import OBJECTS, SUBJECTS, VERBS, FailIfTrainingStarts, StopAt, tiny, train_losses

from scratchformer.cli import main as cli_main
from scratchformer.errors import DataError, TrainingSetupError
from scratchformer.training import run_training
from scratchformer.training.checkpoints import checkpoint_problems
from scratchformer.training.streaming import LOG_ENV, check_resume

VALIDATION_ROWS = 10


@pytest.fixture(scope="module")
def stream_file(tmp_path_factory) -> Path:
    """70 short, distinct lines (``row N: a sentence.``), gzipped: each is one denoising example."""
    rng = random.Random(3)
    path = tmp_path_factory.mktemp("stream") / "corpus.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i in range(70):
            f.write(f"row {i}: {rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}.\n")
    return path


def lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def streamed(tmp_path: Path, train_file: Path, name: str = "out", **overrides):
    settings = dict(streaming=True, streaming_validation_rows=VALIDATION_ROWS, max_length=48)
    return tiny(tmp_path, train_file, name, **{**settings, **overrides})


def example_ids(tokenizer_dir: Path, texts: list[str], max_length: int = 48) -> list[int]:
    """The CRC-32 of each text's clean token ids, as ``SCRATCHFORMER_LOG_TRAIN_EXAMPLES`` logs them (each text
    here is one denoising chunk)."""
    from scratchformer.models import ScratchformerTokenizer

    tokenizer = ScratchformerTokenizer.from_pretrained(str(tokenizer_dir))
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    assert all(len(i) < max_length - 1 for i in ids)
    return [zlib.crc32(np.asarray(i + [tokenizer.eos_token_id], dtype=np.int64).tobytes()) for i in ids]


# --------------------------------------------------------------------------------------------------------------------
# One process
# --------------------------------------------------------------------------------------------------------------------


def test_streamed_run_reads_lazily_holds_out_the_first_rows_and_resumes_exactly(tmp_path, stream_file, capsys,
                                                                                  monkeypatch):
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "log"))
    options, args = streamed(tmp_path, stream_file, "full", tokenizer_max_rows=25)
    full = run_training(options, args)
    out = Path(full["output_dir"])
    said = capsys.readouterr()
    assert "tokenizer: trained on 25 rows" in said.out + said.err  # only the first --tokenizer-max-rows rows
    assert "streamed training / 10 validation examples" in said.out
    assert not list((tmp_path / "cache").rglob("*.arrow"))  # nothing converted or cached before (or during) training
    losses = train_losses(out)
    assert sorted(losses) == list(range(1, 9)) and losses[8] < losses[1]

    # the first 10 rows are the validation set and never trained on; 8 steps x 8 = 64 > 60 rows: a second pass
    rows = lines(stream_file)
    held_out, training = example_ids(out / "tokenizer", rows[:VALIDATION_ROWS]), example_ids(out / "tokenizer",
                                                                                              rows[VALIDATION_ROWS:])
    logged = [json.loads(line) for line in (tmp_path / "log" / "examples-rank0.jsonl").read_text().splitlines()]
    seen = [(epoch, crc) for entry in logged[:8] for epoch, crc in entry["examples"]]
    assert [crc for epoch, crc in seen if epoch == 0] == training  # pass 0: every training row once, in order
    assert [crc for epoch, crc in seen if epoch == 1] == training[:4]
    assert not set(held_out) & {crc for _, crc in seen}

    # stopped after the checkpoint of step 4, then resumed: the same losses and weights, bit for bit
    monkeypatch.delenv(LOG_ENV)
    options, args = streamed(tmp_path, stream_file, "resumed", tokenizer_max_rows=25)
    assert run_training(options, args, callbacks=[StopAt(4)])["stopped"]
    checkpoint = Path(args.output_dir) / "checkpoint-4"
    assert checkpoint_problems(checkpoint) == []
    state = json.loads((checkpoint / "stream_state_0.json").read_text())
    assert (state["world_size"], state["global_step"], state["stream"]["epoch"]) == (1, 4, 0)
    args.resume_from_checkpoint = "latest"
    assert run_training(options, args)["global_step"] == 8
    assert train_losses(Path(args.output_dir)) == losses
    final, expected = load_file(Path(args.output_dir) / "model.safetensors"), load_file(out / "model.safetensors")
    for name in expected:
        assert torch.equal(final[name], expected[name]), name


def test_streamed_run_adds_short_windows_to_training_only(tmp_path, stream_file, monkeypatch):
    """``--short-fraction 1`` on a stream: every training row is still read, in order, and short windows of the
    rows are trained on besides; the held-out first rows stay out of training."""
    monkeypatch.setenv(LOG_ENV, str(tmp_path / "log"))
    options, args = streamed(tmp_path, stream_file, "short", short_fraction=1.0)
    out = Path(run_training(options, args)["output_dir"])
    rows = lines(stream_file)
    held_out, training = example_ids(out / "tokenizer", rows[:VALIDATION_ROWS]), example_ids(out / "tokenizer",
                                                                                              rows[VALIDATION_ROWS:])
    logged = [json.loads(line) for line in (tmp_path / "log" / "examples-rank0.jsonl").read_text().splitlines()]
    seen = [crc for entry in logged for epoch, crc in entry["examples"] if epoch == 0]
    whole = [crc for crc in seen if crc in training]
    assert whole and whole == training[:len(whole)] and len(whole) < len(seen)  # the rows in order, windows besides
    assert not set(held_out) & set(seen)


def test_streamed_seq2seq_with_validation_files(tmp_path):
    rng = random.Random(4)
    rows = ["src\ttgt"] + [f"{s}\t{s.upper()}" for s in (f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} "
                                                           f"{rng.choice(OBJECTS)}" for _ in range(40))]
    train = tmp_path / "train.tsv.gz"
    with gzip.open(train, "wt", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")
    valid = tmp_path / "valid.tsv"
    valid.write_text("\n".join(rows[:1] + rows[-6:]) + "\n")
    options, args = tiny(tmp_path, train, streaming=True, objective="seq2seq", source_column="src",
                         target_column="tgt", validation_files=[str(valid)], max_steps=3, save_steps=3,
                         max_eval_samples=4, generation_max_length=8)
    result = run_training(options, args)
    assert result["global_step"] == 3 and {"eval_bleu", "eval_chrf"} <= set(result["metrics"])
    assert (Path(args.output_dir) / "checkpoint-3" / "stream_state_0.json").is_file()


@pytest.mark.parametrize("overrides, message", [
    (dict(max_steps=-1), "--streaming needs --max-steps N: a stream has no length"),
    (dict(dataloader_num_workers=2), "--dataloader-num-workers must be 0"),
    (dict(group_column="ref"), "with --streaming give --validation-files"),
    (dict(streaming_validation_rows=0), "--streaming-validation-rows must be >= 1"),
    (dict(train_sampling_strategy="batch_rebalance"), "--train-sampling-strategy batch_rebalance needs the lengths"),
    (dict(train_sampling_strategy="group_by_length"), "--train-sampling-strategy group_by_length needs the lengths"),
])
def test_what_a_stream_cannot_do_is_refused_before_any_data(tmp_path, overrides, message):
    options, args = streamed(tmp_path, tmp_path / "missing.txt.gz", **overrides)
    with pytest.raises(TrainingSetupError, match=message):
        run_training(options, args, callbacks=[FailIfTrainingStarts()])


def test_stream_errors_are_clear(tmp_path, capsys, stream_file):
    code = cli_main(["train", "--streaming", "--train-files", str(tmp_path / "missing.txt"), "--output-dir",
                     str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "scratchformer train: error: --streaming needs --max-steps N" in err
    with pytest.raises(DataError, match="could not load the Hub dataset 'no-such/dataset'.*HF_HUB_OFFLINE is set"):
        run_training(*tiny(tmp_path, stream_file, "hub", train_files=None, dataset_name="no-such/dataset",
                           streaming=True))
    with pytest.raises(DataError, match="unknown column 'body' in the training data; its columns are 'text'"):
        run_training(*streamed(tmp_path, stream_file, "col", text_column="body"))

    # a streamed run resumes with the processes it had: each had its own shard and position
    folder = tmp_path / "checkpoint-2"
    folder.mkdir()
    with pytest.raises(TrainingSetupError, match="not saved by a --streaming run"):
        check_resume(folder, 1)
    for rank in range(2):
        (folder / f"stream_state_{rank}.json").write_text(json.dumps({"world_size": 2, "stream": {}}))
    check_resume(folder, 2)
    with pytest.raises(TrainingSetupError, match="resume it with 2 process\\(es\\), not 1"):
        check_resume(folder, 1)


# --------------------------------------------------------------------------------------------------------------------
# Two processes under torchrun
# --------------------------------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(tmp_path: Path, words: list[str], log: Path) -> None:
    command = [str(Path(sys.executable).with_name("torchrun")), "--nnodes", "1", "--nproc-per-node", "2",
               "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "-m", "scratchformer.cli",
               "train", *words]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT), LOG_ENV: str(log)}
    proc = subprocess.run(command, capture_output=True, text=True, timeout=400, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]


def logged_batches(log: Path, rank: int) -> list[list[list[int]]]:
    return [json.loads(line)["examples"] for line in (log / f"examples-rank{rank}.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_torchrun_two_processes_stream_their_own_shards_and_resume(tmp_path, stream_file):
    out = tmp_path / "out"
    words = ["--streaming", "--train-files", str(stream_file), "--output-dir", str(out), "--preset", "tiny",
             "--tokenizer-vocab-size", "300", "--max-length", "48", "--batch-size", "5", "--eval-steps", "0",
             "--save-steps", "4", "--logging-steps", "1", "--learning-rate", "3e-3", "--warmup-steps", "2",
             "--no-progress-bar", "--streaming-validation-rows", str(VALIDATION_ROWS), "--max-eval-samples", "10",
             "--cache-dir", str(tmp_path / "cache")]
    torchrun(tmp_path, [*words, "--max-steps", "4"], tmp_path / "first")
    assert {p.name for p in (out / "checkpoint-4").glob("stream_state_*")} == {"stream_state_0.json",
                                                                               "stream_state_1.json"}
    torchrun(tmp_path, [*words, "--max-steps", "10", "--resume"], tmp_path / "resumed")

    rows = lines(stream_file)
    held_out = set(example_ids(out / "tokenizer", rows[:VALIDATION_ROWS]))
    training = example_ids(out / "tokenizer", rows[VALIDATION_ROWS:])
    pass_0: list[int] = []
    for rank in range(2):
        first, resumed = logged_batches(tmp_path / "first", rank), logged_batches(tmp_path / "resumed", rank)
        # the first run trained batches 1-4 (and its loader read batch 5 ahead); the resumed run starts at batch 5
        assert resumed[0] == first[4], rank
        trained = first[:4] + resumed[:6]  # steps 1-10 (the loader of the resumed run also read one ahead)
        pass_0 += [crc for batch in trained for epoch, crc in batch if epoch == 0]
        assert {epoch for batch in trained for epoch, _ in batch} == {0, 1}  # 30 rows a process: a second pass
        assert not held_out & {crc for batch in trained for _, crc in batch}
    assert sorted(pass_0) == sorted(training)  # the two shards: every training row once per pass, none twice

    losses = train_losses(out)
    assert sorted(losses) == list(range(1, 11))
    assert np.mean([losses[s] for s in (8, 9, 10)]) < np.mean([losses[s] for s in (1, 2, 3)])
    assert checkpoint_problems(out / "checkpoint-10") == []
