"""The training pipeline (``scratchformer train``) on tiny models and tiny generated data.

The slowest test is the 2-process ``torchrun`` run; the whole file takes well under two minutes on 2 idle cores.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback
from transformers.testing_utils import CaptureLogger
from transformers.trainer import logger as trainer_logger

from scratchformer import ScratchformerConfig, ScratchformerForConditionalGeneration
from scratchformer.cli import main as cli_main
from scratchformer.errors import DataError, TrainingSetupError
from scratchformer.training import (
    ScratchformerTrainingArguments,
    TrainOptions,
    config_from_args,
    config_from_dict,
    run_training,
)
from scratchformer.training.checks import check_batch_size, estimate_step_memory
from scratchformer.training.metrics import Seq2SeqLoss
from scratchformer.training.schedule import peak_learning_rate

REPO_ROOT = Path(__file__).resolve().parents[1]

SUBJECTS = ["the cat", "a dog", "my friend", "the old man", "a young girl", "the teacher", "our neighbour"]
VERBS = ["sees", "likes", "finds", "follows", "watches", "calls", "helps"]
OBJECTS = ["the river", "a small house", "the red car", "an apple tree", "the market", "a quiet road"]
BOOKS = ["Genesis", "Exodus", "Ruth", "I Samuel", "Song of Solomon", "Jonah"]
BOOK_OF_REF = r"^(.*?\S)\s+\d+:\d+$"  # "I Samuel 1:3" -> "I Samuel"


def sentence(rng: random.Random) -> str:
    return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """300 lines of a tiny regular language (the loss has something to learn)."""
    rng = random.Random(0)
    path = tmp_path_factory.mktemp("data") / "corpus.txt"
    path.write_text("\n".join(". ".join(sentence(rng) for _ in range(rng.randint(1, 3))) + "."
                              for _ in range(300)) + "\n")
    return path


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> Path:
    """A verse-aligned TSV: ``ref`` (6 books), ``src`` and ``tgt`` (= src in upper case)."""
    rng = random.Random(1)
    path = tmp_path_factory.mktemp("data") / "pairs.tsv"
    rows = ["ref\tsrc\ttgt"]
    for book in BOOKS:
        for verse in range(1, 21):
            text = sentence(rng)
            rows.append(f"{book} 1:{verse}\t{text}\t{text.upper()}")
    path.write_text("\n".join(rows) + "\n")
    return path


def tiny(tmp_path: Path, train_file: Path, name: str = "out",
         **overrides) -> tuple[TrainOptions, ScratchformerTrainingArguments]:
    """A tiny run's options; ``overrides`` are field names of either dataclass."""
    settings = dict(train_files=[str(train_file)], output_dir=str(tmp_path / name), preset="tiny",
                    tokenizer_vocab_size=300, max_length=32, per_device_train_batch_size=8, max_steps=8, eval_steps=0,
                    save_steps=4, logging_steps=1, learning_rate=3e-3, warmup_steps=2, disable_tqdm=True,
                    max_eval_samples=16, cache_dir=str(tmp_path / "cache"))
    settings.update(overrides)
    return config_from_dict(settings)


def train_losses(output_dir: Path) -> dict[int, float]:
    history = json.loads((output_dir / "loss_history.json").read_text())
    return {e["step"]: e["loss"] for e in history["train"]}


class StopAt(TrainerCallback):
    """Stop training after ``step`` optimizer steps, as an interruption would (after that step's checkpoint)."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= self.step:
            control.should_training_stop = True


class FailIfTrainingStarts(TrainerCallback):
    def on_train_begin(self, args, state, control, **kwargs):
        raise AssertionError("training started although the input was bad")


# --------------------------------------------------------------------------------------------------------------------
# Denoising: a full run, reproducibility and exact resume
# --------------------------------------------------------------------------------------------------------------------


def test_denoising_run_is_reproducible_and_resumes_exactly(tmp_path, corpus):
    full = run_training(*tiny(tmp_path, corpus, "full"))
    out = Path(full["output_dir"])
    assert full["global_step"] == 8
    for name in ("config.json", "model.safetensors", "tokenizer.json", "loss_curve.png", "loss_history.json",
                 "all_results.json", "train_config.json", "tokenizer/tokenizer.json"):
        assert (out / name).is_file(), name
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-8"]
    losses = train_losses(out)
    assert sorted(losses) == list(range(1, 9))
    assert losses[8] < losses[1]
    assert 0.0 <= full["metrics"]["eval_token_accuracy"] <= 1.0 and math.isfinite(full["metrics"]["eval_loss"])
    # where and how fast it trained: the whole run in OUTPUT_DIR, the run up to each checkpoint in the checkpoint
    record = json.loads((out / "run_record.json").read_text())
    (only,) = record["invocations"]
    assert (only["start_step"], only["end_step"], only["examples_per_step"]) == (0, 8, 8)
    assert only["seconds"] > 0 and only["steps_per_second"] == pytest.approx(8 / only["seconds"], rel=0.05)  # seconds are rounded to 0.01
    assert "CPU cores" in only["device"] and only["precision"] == "fp32" and record["final_step"] == 8
    assert only["cpu_capability"] == torch.backends.cpu.get_cpu_capability()  # "AMD EPYC" was AVX2 and AVX-512
    assert json.loads((out / "checkpoint-4" / "run_record.json").read_text())["invocations"][0]["end_step"] == 4

    # interrupted after step 4 (checkpoint-4 is written), then resumed with the same options
    options, args = tiny(tmp_path, corpus, "resumed")
    stopped = run_training(options, args, callbacks=[StopAt(4)])
    assert stopped == {"global_step": 4, "stopped": True}
    resumed_dir = Path(args.output_dir)
    assert sorted(p.name for p in resumed_dir.glob("checkpoint-*")) == ["checkpoint-4"]
    assert not (resumed_dir / "model.safetensors").exists()
    with pytest.raises(TrainingSetupError, match=r"already holds a run or a model \(train_config.json, checkpoint-4\); "
                                                 "pass --resume"):
        run_training(options, args)
    args.resume_from_checkpoint = "latest"
    with CaptureLogger(trainer_logger) as log:
        resumed = run_training(options, args)
    assert resumed["global_step"] == 8
    assert "missing keys" not in log.out  # the tied copies (lm_head, decoder embeddings) are re-tied, not "missing"
    invocations = json.loads((resumed_dir / "run_record.json").read_text())["invocations"]
    assert [(i["start_step"], i["end_step"]) for i in invocations] == [(0, 4), (4, 8)]

    # same seed -> the same tokenizer and the same losses; resumed steps 5-8 equal the uninterrupted ones
    assert (resumed_dir / "tokenizer.json").read_text() == (out / "tokenizer.json").read_text()
    again = train_losses(resumed_dir)
    assert sorted(again) == list(range(1, 9))  # the history before the interruption is kept
    for step in range(1, 9):
        assert again[step] == pytest.approx(losses[step], abs=1e-6), step
    a = ScratchformerForConditionalGeneration.from_pretrained(out)
    b = ScratchformerForConditionalGeneration.from_pretrained(resumed_dir)
    for (name, pa), pb in zip(a.state_dict().items(), b.state_dict().values()):
        torch.testing.assert_close(pa, pb, atol=1e-6, rtol=0, msg=name)
    assert resumed["metrics"]["eval_loss"] == pytest.approx(full["metrics"]["eval_loss"], abs=1e-6)

    # ending a run early: --resume CHECKPOINT --max-steps N (N <= its step) only finishes the run from it
    args.resume_from_checkpoint, args.max_steps = str(resumed_dir / "checkpoint-4"), 4
    early = run_training(options, args)
    assert early["global_step"] == 4 and "eval_loss" in early["metrics"]
    # the run folder's record is the checkpoint's: how the weights it now holds were trained
    record = json.loads((resumed_dir / "run_record.json").read_text())
    assert [(i["start_step"], i["end_step"]) for i in record["invocations"]] == [(0, 4)] and record["final_step"] == 4
    c = ScratchformerForConditionalGeneration.from_pretrained(resumed_dir)
    d = ScratchformerForConditionalGeneration.from_pretrained(resumed_dir / "checkpoint-4")
    for (name, pc), pd in zip(c.state_dict().items(), d.state_dict().values()):
        torch.testing.assert_close(pc, pd, atol=0, rtol=0, msg=name)


@pytest.mark.parametrize("sampling", ["random", "group_by_length", "batch_rebalance"])
def test_accumulated_batches_are_the_same_run_as_one_big_batch(tmp_path, corpus, sampling):
    """The CPU path of a GPU recipe: --batch-size 4 --gradient-accumulation-steps 2 trains on the same examples,
    with the same noise and the same loss normalisation, as --batch-size 8, with random (the recipe's) or
    length-grouped batches; so with dropout 0 (the shipped recipe's; dropout draws its masks per forward pass) the
    weights agree up to float rounding. Adam divides by sqrt(v), so rounding in a near-zero gradient entry can
    become a sizeable step: measured up to 1.1e-5 on an AMD EPYC (AVX-512), hence 1e-4, against 1.3e-2 between
    runs that draw their examples in another order."""
    weights = []
    for name, batch, accumulation in (("big", 8, 1), ("accumulated", 4, 2)):
        result = run_training(*tiny(tmp_path, corpus, name, per_device_train_batch_size=batch, max_steps=4,
                                    gradient_accumulation_steps=accumulation, save_steps=100,
                                    train_sampling_strategy=sampling, config_overrides="dropout=0.0"))
        model = ScratchformerForConditionalGeneration.from_pretrained(result["output_dir"])
        weights.append(model.state_dict())
    for name, value in weights[0].items():
        torch.testing.assert_close(weights[1][name], value, atol=1e-4, rtol=1e-4)


def test_batch_rebalance_shuffles_with_the_runs_seed(tmp_path, corpus):
    """transformers builds its BatchRebalanceSampler with seed 42 whatever ``--seed``; ours shuffles with
    ``--data-seed``, else ``--seed``, as the random sampler does, so a different seed is a different order."""
    seeds = {}

    class SamplerSeed(TrainerCallback):
        def on_train_begin(self, args, state, control, train_dataloader=None, **kwargs):
            sampler = train_dataloader.batch_sampler
            sampler = getattr(sampler, "batch_sampler", sampler)  # accelerate's wrapper, if any
            seeds[args.output_dir.rsplit("/", 1)[-1]] = (type(sampler).__name__, sampler.seed)

    for name, seed, data_seed in (("seed7", 7, None), ("seed42", 42, None), ("data3", 7, 3)):
        run_training(*tiny(tmp_path, corpus, name, seed=seed, data_seed=data_seed, max_steps=1, save_steps=100,
                           train_sampling_strategy="batch_rebalance"), callbacks=[SamplerSeed()])
    assert seeds == {"seed7": ("BatchRebalanceSampler", 7), "seed42": ("BatchRebalanceSampler", 42),
                     "data3": ("BatchRebalanceSampler", 3)}


def test_short_fraction_adds_short_windows_to_the_training_split_only(tmp_path, corpus, capsys):
    """``--short-fraction`` reaches the training data (more examples) and leaves the validation set, and so the
    validation loss of different recipes, comparable."""
    counts = {}
    for name, fraction in (("plain", 0.0), ("short", 1.0)):
        run_training(*tiny(tmp_path, corpus, name, short_fraction=fraction, max_steps=1, save_steps=100))
        found = re.search(r"denoise: (\d+) training / (\d+) validation examples", capsys.readouterr().out)
        counts[name] = int(found[1]), int(found[2])
    (plain, plain_valid), (short, short_valid) = counts["plain"], counts["short"]
    assert plain < short <= 2 * plain and short_valid == plain_valid


def test_validation_files_that_are_a_training_file_are_warned_of(tmp_path, corpus, capsys):
    """The same file by another path (a link, ``..``): the run goes on, but its validation loss would measure rows it
    trains on, and the first lines say so; a file of its own is not warned of."""
    link = tmp_path / "same.txt"
    link.symlink_to(corpus)
    held_out = tmp_path / "held_out.txt"
    held_out.write_text("\n".join(corpus.read_text().splitlines()[:40]) + "\n")
    for name, validation, warned in (("same", link, True), ("apart", held_out, False)):
        run_training(*tiny(tmp_path, corpus, name, validation_files=[str(validation)], max_steps=1, save_steps=100))
        err = capsys.readouterr().err
        said = f"warning: --validation-files {validation} is the training file {corpus}: the validation loss"
        assert (said in err) == warned, err[-2000:]


def test_crammings_options_reach_the_run(tmp_path, corpus, capsys):
    """``--pack`` and ``--max-tokens-per-character`` shape the training split only (fewer, fuller examples; the
    validation set as it was), ``bias=false`` gives a model without biases in its linears, and a one-cycle schedule
    (``linear`` with half the steps as warm-up) peaks at the middle step and ends near zero."""
    counts, histories = {}, {}
    for name, extra in (("plain", {}), ("packed", dict(pack=True, max_tokens_per_character=0.5,
                                                      config_overrides="bias=false,dropout=0.0",
                                                      lr_scheduler_type="linear", warmup_steps=2, max_steps=4))):
        out = Path(run_training(*tiny(tmp_path, corpus, name, **{"max_steps": 1, "save_steps": 100, **extra}))
                   ["output_dir"])
        found = re.search(r"denoise: (\d+) training / (\d+) validation examples", capsys.readouterr().out)
        counts[name] = int(found[1]), int(found[2])
        histories[name] = json.loads((out / "loss_history.json").read_text())
    assert counts["packed"][0] < counts["plain"][0] / 2 and counts["packed"][1] == counts["plain"][1]
    model = ScratchformerForConditionalGeneration.from_pretrained(tmp_path / "packed")
    assert not [name for name, _ in model.named_parameters() if name.endswith("proj.bias") or ".fc" in name
                and name.endswith("bias")]
    rates = [entry["learning_rate"] for entry in histories["packed"]["train"]]
    assert rates.index(max(rates)) == 2 and rates[-1] <= max(rates) / 2  # 0, half, peak, half (then 0)


def test_batch_rebalance_resumes_exactly_across_epochs(tmp_path, corpus):
    """The v2 recipe on CPU cores runs in sittings: stopped at step 6 (inside the second epoch of 5 steps) and
    resumed, a batch_rebalance run with accumulation has the losses and weights of the uninterrupted run."""
    def options(name):
        return tiny(tmp_path, corpus, name, per_device_train_batch_size=4, gradient_accumulation_steps=2,
                    max_train_samples=24, save_steps=2, train_sampling_strategy="batch_rebalance",
                    config_overrides="dropout=0.0")

    full = Path(run_training(*options("full"))["output_dir"])
    first, args = options("resumed")
    assert run_training(first, args, callbacks=[StopAt(6)])["global_step"] == 6
    args.resume_from_checkpoint = "latest"
    resumed = Path(run_training(first, args)["output_dir"])
    losses, again = train_losses(full), train_losses(resumed)
    assert sorted(again) == list(range(1, 9)) and json.loads((full / "all_results.json").read_text())["epoch"] == 1.6
    for step in range(1, 9):
        assert again[step] == pytest.approx(losses[step], abs=1e-6), step
    a = ScratchformerForConditionalGeneration.from_pretrained(full).state_dict()
    b = ScratchformerForConditionalGeneration.from_pretrained(resumed).state_dict()
    for name, value in a.items():
        torch.testing.assert_close(b[name], value, atol=1e-6, rtol=0, msg=name)


def test_batch_rebalance_on_an_older_transformers_is_refused(tmp_path, monkeypatch):
    """Before transformers 5.17 there is no BatchRebalanceSampler and the Trainer would train in random order."""
    monkeypatch.setattr("scratchformer.training.sampling.BatchRebalanceSampler", None)
    options, args = tiny(tmp_path, tmp_path / "missing.txt", train_sampling_strategy="batch_rebalance")
    with pytest.raises(TrainingSetupError, match=r"batch_rebalance needs transformers 5.17 or newer \(this is 5\."):
        run_training(options, args)


# --------------------------------------------------------------------------------------------------------------------
# Seq2seq with BLEU / chrF, held-out books
# --------------------------------------------------------------------------------------------------------------------


class SourcesSeen(TrainerCallback):
    """Keeps the decoded source of every training and evaluation example, as the trainer holds them."""

    def on_evaluate(self, args, state, control, train_dataloader=None, eval_dataloader=None, processing_class=None,
                    **kwargs):
        self.sources = {split: [processing_class.decode(example["input_ids"], skip_special_tokens=True)
                                for example in loader.dataset]
                        for split, loader in (("train", train_dataloader), ("eval", eval_dataloader))}


def test_seq2seq_run_reports_bleu_and_chrf_on_held_out_books(tmp_path):
    """Every verse evaluated is from the held-out book, and no verse of it is trained on (each source names its book:
    the trainer's own datasets show which went where)."""
    rng = random.Random(1)
    rows = ["ref\tsrc\ttgt"]
    for book in BOOKS:
        for verse in range(1, 21):
            text = f"{sentence(rng)} in {book.lower()}"
            rows.append(f"{book} 1:{verse}\t{text}\t{text.upper()}")
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("\n".join(rows) + "\n")
    options, args = tiny(tmp_path, pairs, objective="seq2seq", source_column="src", target_column="tgt", max_steps=4,
                         save_steps=100, max_eval_samples=8, generation_max_length=12, group_column="ref",
                         group_pattern=BOOK_OF_REF, validation_groups=["Ruth"], save_dtype="float16")
    seen = SourcesSeen()
    result = run_training(options, args, callbacks=[seen])
    books_of = {split: {book for book in BOOKS for text in texts if text.endswith(f" in {book.lower()}")}
                for split, texts in seen.sources.items()}
    assert len(seen.sources["eval"]) == 8 and books_of["eval"] == {"Ruth"}
    assert all(text.endswith(" in ruth") for text in seen.sources["eval"]), seen.sources["eval"]
    assert len(seen.sources["train"]) == 100 and books_of["train"] == set(BOOKS) - {"Ruth"}
    assert not any("ruth" in text for text in seen.sources["train"])
    metrics = result["metrics"]
    assert {"eval_loss", "eval_bleu", "eval_chrf"} <= set(metrics)
    assert 0.0 <= metrics["eval_bleu"] <= 100.0 and 0.0 <= metrics["eval_chrf"] <= 100.0
    out = Path(args.output_dir)
    model = ScratchformerForConditionalGeneration.from_pretrained(out, dtype=torch.float32)
    assert next(model.parameters()).dtype == torch.float32
    from safetensors import safe_open

    with safe_open(str(out / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float16}


def test_time_limit_ends_the_run_normally(tmp_path, corpus):
    options, args = tiny(tmp_path, corpus, max_steps=50, max_minutes=1e-6, save_steps=100)
    result = run_training(options, args)
    assert result["global_step"] == 1 and "eval_loss" in result["metrics"]
    out = Path(args.output_dir)
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1"]
    assert (out / "model.safetensors").is_file() and (out / "loss_curve.png").is_file()


class Evaluations(TrainerCallback):
    """The step of every evaluation of a run, the Trainer's in the loop and the pipeline's after it alike."""

    def __init__(self):
        self.steps: list[int] = []

    def on_evaluate(self, args, state, control, **kwargs):
        self.steps.append(state.global_step)


@pytest.mark.parametrize("overrides, evaluated", [
    (dict(max_steps=4, eval_steps=2), [2, 4]),  # --max-steps on an evaluation step
    (dict(max_steps=3, eval_steps=2), [2, 3]),  # --max-steps between two: the Trainer evaluates the last step itself
    (dict(max_steps=3, eval_steps=0), [3]),  # no evaluation in the loop: the pipeline's, after training
    (dict(max_steps=50, max_minutes=1e-6, eval_steps=2), [1]),  # --max-minutes: stopped after step 1
    (dict(max_steps=50, max_minutes=1e-6, eval_steps=1), [1]),  # ... on an evaluation step
    (dict(max_steps=-1, num_train_epochs=1, max_train_samples=24, eval_steps=1000), "last"),  # the epochs' end
], ids=["max-steps", "max-steps-between", "eval-steps-0", "max-minutes", "max-minutes-on-eval-step", "epochs"])
def test_a_run_evaluates_its_final_weights_once(tmp_path, corpus, overrides, evaluated):
    """Issue 43: _finish evaluated again what the Trainer had just evaluated (313 s + 293 s for one 10-step run)."""
    watch = Evaluations()
    result = run_training(*tiny(tmp_path, corpus, save_steps=100, **overrides), callbacks=[watch])
    last = result["global_step"]
    assert watch.steps == ([last] if evaluated == "last" else evaluated) and watch.steps.count(last) == 1
    assert "eval_loss" in result["metrics"]
    saved = json.loads((Path(result["output_dir"]) / "all_results.json").read_text())
    assert saved["eval_loss"] == result["metrics"]["eval_loss"]


def test_a_resumed_run_evaluates_its_final_weights_once(tmp_path, corpus):
    options, args = tiny(tmp_path, corpus, max_steps=4, eval_steps=3, save_steps=2)
    first = Evaluations()
    assert run_training(options, args, callbacks=[first])["global_step"] == 4 and first.steps == [3, 4]
    args.resume_from_checkpoint, args.max_steps = str(Path(args.output_dir) / "checkpoint-2"), 3
    continued = Evaluations()  # trains step 3, which the Trainer evaluates
    assert run_training(options, args, callbacks=[continued])["global_step"] == 3 and continued.steps == [3]
    args.resume_from_checkpoint, args.max_steps = str(Path(args.output_dir) / "checkpoint-2"), 2
    finished = Evaluations()  # nothing to train: the pipeline evaluates the checkpoint's weights, once
    assert run_training(options, args, callbacks=[finished])["global_step"] == 2 and finished.steps == [2]


# --------------------------------------------------------------------------------------------------------------------
# Bad input: clear errors before training starts
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides, error, message", [
    (dict(train_files=["/nonexistent/corpus.txt"]), DataError, "data file not found: /nonexistent/corpus.txt"),
    (dict(objective="seq2seq", source_column="kjv", target_column="tgt"), DataError,
     "unknown column 'kjv' in the training data; its columns are 'ref', 'src', 'tgt'"),
    (dict(objective="seq2seq"), TrainingSetupError, "needs --source-column and --target-column"),
    (dict(objective="seq2seq", source_column="src", target_column="tgt", group_column="book"), DataError,
     "unknown column 'book'"),
    (dict(config_overrides="d_modle=64"), TrainingSetupError, r"unknown ScratchformerConfig field\(s\) \['d_modle'\]"),
    (dict(config_overrides="d_model=33"), TrainingSetupError, "invalid model configuration: .*d_model=33 must be divisible"),
    (dict(per_device_train_batch_size=1000), TrainingSetupError,
     "the batch does not fit the data: one optimizer step takes 1000"),
    (dict(per_device_train_batch_size=0), TrainingSetupError, "--batch-size must be >= 1"),
    (dict(resume_from_checkpoint="latest"), TrainingSetupError, "--resume: no checkpoint"),
    (dict(objective="seq2seq", source_column="src", target_column="tgt", group_column="ref",
          group_pattern=BOOK_OF_REF, validation_groups=["Tobit"]), DataError, r"validation group\(s\) \['Tobit'\]"),
])
def test_bad_input_is_a_clear_error_before_training(tmp_path, pairs, overrides, error, message):
    options, args = tiny(tmp_path, pairs, **{"objective": "denoise", "text_column": "src", **overrides})
    with pytest.raises(error, match=message):
        run_training(options, args, callbacks=[FailIfTrainingStarts()])


def test_empty_data_is_a_clear_error(tmp_path):
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\n")
    with pytest.raises(DataError, match="data file is empty"):
        run_training(*tiny(tmp_path, blank), callbacks=[FailIfTrainingStarts()])
    short = tmp_path / "short.txt"
    short.write_text("a\nb\nc\nd\n")  # rows, but every text is shorter than the 4 tokens a denoising chunk needs
    with pytest.raises(DataError, match="no training example is left after tokenization"):
        run_training(*tiny(tmp_path, short, tokenizer_vocab_size=262), callbacks=[FailIfTrainingStarts()])


def test_tokenizer_that_does_not_match_the_model_is_refused(tmp_path, corpus):
    from scratchformer.tokenizer.training import train_fast_tokenizer

    tok_dir = tmp_path / "tok"
    train_fast_tokenizer(corpus.read_text().splitlines(), 300).save_pretrained(tok_dir)
    for fields, message in [
        (dict(vocab_size=300, pad_token_id=3), "pad: tokenizer '<pad>' has id 0, the model's pad_token_id is 3"),
        # a --tokenizer of another size than the --model's table (checks.check_tokenizer_matches)
        (dict(vocab_size=100), "has 300 tokens and --model"),
    ]:
        model_dir = tmp_path / f"model-{len(fields)}-{fields['vocab_size']}"
        config = ScratchformerConfig(**{**dict(d_model=16, encoder_layers=1, decoder_layers=1,
                                               encoder_attention_heads=2, decoder_attention_heads=2,
                                               encoder_ffn_dim=16, decoder_ffn_dim=16), **fields})
        ScratchformerForConditionalGeneration(config).save_pretrained(model_dir)
        options, args = tiny(tmp_path, corpus, model=str(model_dir), tokenizer=str(tok_dir))
        with pytest.raises(TrainingSetupError, match="the tokenizer does not match the model|another vocabulary") \
                as err:
            run_training(options, args, callbacks=[FailIfTrainingStarts()])
        assert message in str(err.value)


def test_batch_that_does_not_fit_in_memory_is_refused(monkeypatch, tmp_path):
    import scratchformer.training.checks as checks

    config = ScratchformerConfig(vocab_size=16000, d_model=256, encoder_layers=6, decoder_layers=2,
                                 encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=1024,
                                 decoder_ffn_dim=1024)
    need = estimate_step_memory(config, 32, 128, 128)
    assert 0.5 * 2**30 < need < 4 * 2**30  # a plausible size for this model and batch
    options, args = TrainOptions(max_length=128), ScratchformerTrainingArguments(str(tmp_path))
    assert args.per_device_train_batch_size == 32  # our default
    monkeypatch.setattr(checks, "available_memory", lambda: 4 * need)
    check_batch_size(options, args, config, num_train=1000, num_eval=10, world_size=1, local_world_size=1)
    monkeypatch.setattr(checks, "available_memory", lambda: need // 2)
    with pytest.raises(TrainingSetupError, match="the batch does not fit in memory"):
        check_batch_size(options, args, config, num_train=1000, num_eval=10, world_size=1, local_world_size=1)


# --------------------------------------------------------------------------------------------------------------------
# Loss, schedule, CLI
# --------------------------------------------------------------------------------------------------------------------


def test_loss_is_label_smoothed_in_training_and_plain_in_evaluation():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 11, requires_grad=True)
    labels = torch.tensor([[1, 2, 3, -100, -100], [4, 5, 6, 7, 8]])
    loss = Seq2SeqLoss(0.1)
    flat = logits.reshape(-1, 11), labels.reshape(-1)
    expected = torch.nn.functional.cross_entropy(*flat, ignore_index=-100, label_smoothing=0.1)
    torch.testing.assert_close(loss({"logits": logits}, labels), expected)
    # normalised by the tokens of the whole optimizer step when the Trainer gives their number
    torch.testing.assert_close(loss({"logits": logits}, labels, num_items_in_batch=16), expected * 8 / 16)
    with torch.no_grad():
        plain = torch.nn.functional.cross_entropy(*flat, ignore_index=-100)
        torch.testing.assert_close(loss({"logits": logits}, labels), plain)


def test_what_torch_and_the_trainer_refuse_clearly_is_theirs():
    """Issue 66: these values were refused by scratchformer's own checks; they now get torch's or transformers' own
    error, which says what to fix (when the optimizer, the data loader, the loss or the Trainer meets them)."""
    from transformers import Trainer, TrainingArguments
    from transformers.integrations import get_reporting_integration_callbacks

    weights = [torch.nn.Parameter(torch.zeros(2))]
    for settings, message in [(dict(betas=(1.0, 0.98)), "Invalid beta parameter at index 0: 1.0"),
                              (dict(eps=-1.0), "Invalid epsilon value: -1.0"),
                              (dict(weight_decay=-0.1), "Invalid weight_decay value: -0.1")]:
        with pytest.raises(ValueError, match=re.escape(message)):
            torch.optim.AdamW(weights, **settings)
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        torch.utils.data.DataLoader([1], num_workers=-1)
    with pytest.raises(RuntimeError, match=r"label_smoothing must be between 0.0 and 1.0. Got: 1.5"):
        Seq2SeqLoss(1.5)({"logits": torch.zeros(1, 2, 5)}, torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match="bogus is not supported, only .* are supported"):
        get_reporting_integration_callbacks(["bogus"])
    if importlib.util.find_spec("bitsandbytes") is None:
        with pytest.raises((ImportError, ValueError), match="install `bitsandbytes`"):
            Trainer.get_optimizer_cls_and_kwargs(TrainingArguments("out", optim="paged_adamw_8bit", use_cpu=True))
    # a Python caller's values are taken as they are, as TrainingArguments takes them: "8" fails its own checks
    with pytest.raises(TypeError, match="'<=' not supported between instances of 'str' and 'int'"):
        config_from_dict({"train_files": ["corpus.txt"], "output_dir": "out", "max_steps": "8"})


def test_inverse_sqrt_schedule_is_the_papers():
    from transformers.optimization import _get_inverse_sqrt_schedule_lr_lambda

    d_model, warmup = 512, 4000  # the paper's base model and warm-up: the default peak is the paper's, not capped
    peak = peak_learning_rate(None, "inverse_sqrt", d_model, warmup)
    for step in [*range(1, 200), *range(3900, 4100), 10_000, 100_000]:
        paper = d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)
        hf = peak * _get_inverse_sqrt_schedule_lr_lambda(step, num_warmup_steps=warmup, timescale=warmup)
        assert hf == pytest.approx(paper, rel=1e-12), step


def test_command_line_reads_our_options_and_every_trainer_option():
    options, args = config_from_args([
        "--train-files", "a.txt", "--output-dir", "o", "--objective", "seq2seq", "--source-column", "kjv",
        "--target_column", "web", "--group-column", "ref", "--validation-groups", "Ruth", "Jude",
        # the Trainer's options under their Hugging Face names, with '_' or '-'
        "--gradient_accumulation_steps", "4", "--report_to", "tensorboard", "--lr_scheduler_type", "cosine",
        "--dataloader-num-workers", "2", "--weight_decay", "0.01",
        # and the spellings of earlier scratchformer versions
        "--batch-size", "16", "--no-progress-bar", "--label-smoothing", "0.2", "--resume"])
    assert (options.objective, options.source_column, options.target_column, options.validation_groups) == \
        ("seq2seq", "kjv", "web", ["Ruth", "Jude"])
    assert (args.gradient_accumulation_steps, args.report_to, args.lr_scheduler_type.value,
            args.dataloader_num_workers, args.weight_decay) == (4, ["tensorboard"], "cosine", 2, 0.01)
    assert (args.per_device_train_batch_size, args.per_device_eval_batch_size, args.disable_tqdm,
            args.label_smoothing_factor, args.resume_from_checkpoint) == (16, 16, True, 0.2, "latest")


def test_defaults_are_scratchformers_not_the_trainers():
    options, args = config_from_args(["--train-files", "a.txt", "--output-dir", "o", "--max-steps", "1000"])
    assert (options.objective, options.preset, options.max_length, options.mask_ratio) == ("denoise", "mini", 128, 0.3)
    assert options.group_column is None  # no grouping unless asked
    assert (args.per_device_train_batch_size, args.num_train_epochs, args.learning_rate, args.lr_scheduler_type.value,
            args.adam_beta2, args.adam_epsilon, args.label_smoothing_factor) == (32, 1.0, None, "inverse_sqrt", 0.98,
                                                                                  1e-9, 0.1)
    assert args.warmup_steps == 500  # the paper's 4000, at most half of --max-steps
    assert (args.eval_strategy.value, args.eval_steps, args.save_steps, args.save_total_limit, args.logging_steps,
            args.logging_first_step, args.report_to) == ("steps", 500, 500, 3, 50, True, [])
    _, only_at_the_end = config_from_args(["--train-files", "a.txt", "--output-dir", "o", "--eval-steps", "0"])
    assert only_at_the_end.eval_strategy.value == "no" and only_at_the_end.warmup_steps == 4000


def training_commands(markdown: str) -> list[list[str]]:
    """The ``scratchformer train ...`` commands of a markdown file (continued over lines ending with a backslash),
    as argument lists without the ``train``."""
    text = re.sub(r"\\\n", " ", markdown)
    commands = re.findall(r"scratchformer train (--[^#`\n]*)", text)
    return [shlex.split(command) for command in commands if "..." not in command and "--help" not in command]


def test_documented_commands_still_parse():
    """Every option spelling that the README, docs/training.md, the model card, the experiment record
    (docs/experiments.md) and the examples use keeps working."""
    sources = [REPO_ROOT / "README.md", REPO_ROOT / "docs" / "training.md",
               REPO_ROOT / "scratchformer" / "pretrained" / "scratchformer-small" / "README.md",
               REPO_ROOT / "docs" / "experiments.md"]
    commands = [command for source in sources for command in training_commands(source.read_text())]
    assert len(commands) >= 4, commands
    recipe = runpy.run_path(str(REPO_ROOT / "examples" / "pretrain_denoising.py"))["DEFAULTS"]
    two = runpy.run_path(str(REPO_ROOT / "examples" / "pretrain_encoder_first.py"))  # and each phase of v4's candidate
    phases = [[*two["COMMON"], *two[phase], "--output-dir", "x"] for phase in ("PHASE_ONE", "PHASE_TWO")]
    for command in [*commands, recipe, *phases]:
        if "--tf32" in command and not torch.cuda.is_available():  # the Trainer checks the GPU while parsing
            at = command.index("--tf32")
            command = command[:at] + command[at + 2:]
        options, args = config_from_args(command)
        assert options.train_files and args.output_dir, command

    def run_shape(command: list[str]) -> tuple:
        """What decides the weights a command trains (not where it writes, how long a sitting is, or the logs)."""
        options, args = config_from_args(command)
        return (options.preset, options.config_overrides, options.mask_ratio, options.encoder_mlm_weight,
                options.contrastive_weight, args.per_device_train_batch_size, args.gradient_accumulation_steps,
                args.train_sampling_strategy, args.bf16, args.learning_rate, args.warmup_steps, args.seed,
                args.max_steps)

    # the example runs the shipped checkpoint's recipe: the model card's command, but for the tokenizer, which the
    # example trains (--tokenizer-vocab-size) where the card's run reused v2's, trained that way
    card = training_commands(sources[2].read_text())[0]
    assert run_shape(recipe) == run_shape(card)
    assert "--tokenizer-vocab-size" in recipe and run_shape(card)[2:5] == (0.5, 1.0, 0.0)


@pytest.mark.parametrize("option, message", [
    (["--mask-ratio", "1.5"], "--mask-ratio must be in [0, 1), got 1.5"),
    (["--poisson-lambda", "0"], "--poisson-lambda must be positive"),
    (["--short-fraction", "-0.1"], "--short-fraction must be in [0, 1], got -0.1"),
    (["--tokenizer-vocab-size", "10"], "--tokenizer-vocab-size must be >= 261"),
    (["--learning-rate", "nan"], "--learning-rate must be positive, got nan"),  # the RULES compare: NaN fails
    (["--learning-rate", "0"], "--learning-rate must be positive, got 0"),
    (["--max-steps", "-5"], "--max-steps must be a positive number of steps, or -1"),
    (["--save-steps", "-1"], "--save-steps must be positive, got -1"),
    (["--eval-steps", "-1"], "--eval-steps must be >= 0"),
    (["--warmup-steps", "-3"], "warmup_steps"),
    (["--batch-size", "0"], "--batch-size must be >= 1"),
    (["--batch-size", "abc"], "--batch-size/--batch_size: invalid int value: 'abc'"),
    (["--validation-fraction", "1.5"], "--validation-fraction must be in (0, 1)"),
    (["--objective", "translate"], "argument --objective: invalid choice: 'translate'"),
    (["--lr-schedule", "paper"], "invalid choice: 'paper'"),
    (["--no-such-option", "1"], "unrecognized arguments: --no-such-option 1"),
    (["--group-column", "ref", "--group-pattern", "(unclosed"], "--group-pattern '(unclosed' is not a regular"),
    (["--group-column", "ref", "--group-pattern", "no group"], "has no (group)"),
    (["--config-overrides", "d_model"], "--config-overrides: 'd_model' is not key=value"),
    (["--config-overrides", "d_modle=64"], "unknown ScratchformerConfig field(s) ['d_modle']"),
    (["--objective", "seq2seq"], "--objective seq2seq needs --source-column and --target-column"),
    (["--contrastive-weight", "-1"], "--contrastive-weight must be >= 0 (0 = off), got -1"),
    (["--contrastive-temperature", "0"], "--contrastive-temperature must be positive, got 0"),
    (["--contrastive-target", "words"], "--contrastive-target: invalid choice: 'words'"),
    (["--encoder-mlm-weight", "-0.5"], "--encoder-mlm-weight must be >= 0 (0 = off), got -0.5"),
    (["--encoder-mlm-probability", "1"], "--encoder-mlm-probability must be in (0, 1), got 1"),
    (["--encoder-mlm-probability", "0"], "--encoder-mlm-probability must be in (0, 1), got 0"),
    (["--denoising-weight", "-1"], "--denoising-weight must be >= 0, got -1"),
    (["--denoising-weight", "0"], "--denoising-weight 0 turns the decoder's loss off and no encoder loss is on"),
    (["--freeze-encoder", "--encoder-mlm-weight", "1"],
     "--freeze-encoder keeps the encoder's weights and --encoder-mlm-weight trains them: give one of them"),
])
def test_bad_option_fails_fast_with_one_line(tmp_path, capsys, option, message):
    """A mistake in the options is one line on stderr and exit status 2, found before any data is read (the
    training file does not exist, and the message is about the option)."""
    missing = tmp_path / "missing.txt"
    code = cli_main(["train", "--train-files", str(missing), "--output-dir", str(tmp_path / "o"), *option])
    err = capsys.readouterr().err
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("scratchformer train: error: "), err
    assert message in lines[0] and "Traceback" not in err and "missing.txt" not in err


SEQ2SEQ = ["--objective", "seq2seq", "--source-column", "a", "--target-column", "b"]


@pytest.mark.parametrize("option, ignored", [
    (["--group-pattern", "(.*) 1:1"], "--group-pattern (without --group-column)"),
    (["--validation-groups", "Ruth"], "--validation-groups (without --group-column)"),
    ([*SEQ2SEQ, "--short-fraction", "0.5", "--mask-ratio", "0.4"], "--mask-ratio; --short-fraction"),
    ([*SEQ2SEQ, "--contrastive-weight", "1", "--encoder-mlm-weight", "1"], "--contrastive-weight; --encoder-mlm-weight"),
    ([*SEQ2SEQ, "--denoising-weight", "0.5"], "--denoising-weight"),
    (["--denoising-weight", "0.5"], "--denoising-weight (it weighs the decoder's loss against the encoder's losses)"),
    (["--encoder-mlm-whole-words"], "--encoder-mlm-whole-words (without --encoder-mlm-weight or --electra-weight)"),
    (["--config-overrides", "vocab_size=10,pad_token_id=7"],
     "--config-overrides vocab_size (the tokenizer decides it); --config-overrides pad_token_id"),
])
def test_options_without_effect_are_warned_about_in_one_warning_and_ignored(tmp_path, option, ignored):
    """As transformers' ``GenerationConfig.validate``: settings that do nothing in this run are one warning naming
    them all, not a refusal (the run goes on)."""
    from scratchformer.training.checks import check_options

    with pytest.warns(UserWarning) as caught:
        check_options(*config_from_args(["--train-files", "a.txt", "--output-dir", str(tmp_path / "o"), *option]))
    assert len(caught) == 1
    assert str(caught[0].message).startswith("these options have no effect in this run and are ignored: ")
    assert ignored in str(caught[0].message)


def test_missing_data_file_is_one_line(tmp_path, capsys):
    code = cli_main(["train", "--train-files", str(tmp_path / "missing.txt"), "--output-dir", str(tmp_path / "o")])
    assert code == 2
    assert "scratchformer train: error: data file not found" in capsys.readouterr().err


def test_the_quick_train_parser_describes_the_real_one():
    """``train --help`` and option mistakes are answered from cli/train_options.json without torch; it must describe
    the real parser. After a change of training/options.py or of transformers, write it again:
    ``python -c "from scratchformer.cli.train import write_options; write_options()"``."""
    from scratchformer.cli.train import OPTIONS, describe
    from scratchformer.training import TrainArgumentParser

    assert json.loads(OPTIONS.read_text()) == json.loads(json.dumps(describe(TrainArgumentParser())))


@pytest.mark.parametrize("argv", [
    ["--max-steps", "x"], ["--objective", "foo"], ["--bogus", "1"], ["--fp16", "maybe"], ["--batch-size"],
    ["--report-to"], ["--lr-schedule", "nope"], ["--save-dtype", "int8"], ["--max-step", "3"], ["--preset"],
])
def test_train_option_mistakes_are_answered_before_torch_with_the_real_parsers_message(argv):
    """Issue 67: ``train``'s mistakes took 5-6 s (importing transformers and torch before reading the arguments).
    The quick parser says what the real one says, word for word, and imports neither."""
    from scratchformer.cli.train import _check_quickly

    argv = ["--train-files", "a.txt", "--output-dir", "out", *argv]
    with pytest.raises(TrainingSetupError) as quick:
        _check_quickly(argv)
    with pytest.raises(TrainingSetupError) as real:
        config_from_args(argv)
    assert str(quick.value) == str(real.value)
    probe = ("import sys, scratchformer_launcher; from scratchformer.cli import main; code = main(['train', "
             f"*{argv!r}]); print(code, sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert result.stdout.strip() == "2 []" and str(real.value) in result.stderr, result.stdout + result.stderr


def test_train_help_shows_every_default_and_top_level_help_stays_light(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli_main(["train", "--help"])
    assert exit_.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    for expected in ("--batch-size N", "examples per process per micro-batch (default: 32)", "(default: inverse_sqrt)",
                     "--gradient_accumulation_steps", "--report-to", "(default: 500)", "(default: mini)",
                     "(default: 0.98)", "--resume"):
        assert expected in help_text, expected
    from scratchformer.training import TrainArgumentParser

    assert help_text == " ".join(TrainArgumentParser().format_help().split())  # the real parser's help
    # neither the top-level help nor train's (answered from cli/train_options.json) imports torch or transformers
    probe = "\n".join([
        "import contextlib, io, sys, scratchformer_launcher",
        "from scratchformer.cli import build_parser, main",
        "build_parser()",
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):",
        "    main(['train', '--help'])",
        "print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))"])
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


# --------------------------------------------------------------------------------------------------------------------
# Two processes under torchrun (gloo on CPU)
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_torchrun_two_processes(tmp_path, corpus):
    out = tmp_path / "ddp"
    torchrun = Path(sys.executable).with_name("torchrun")
    command = [str(torchrun), "--standalone", "--nproc_per_node=2", "-m", "scratchformer.cli", "train",
               "--train-files", str(corpus), "--output-dir", str(out), "--preset", "tiny",
               "--tokenizer-vocab-size", "300", "--max-length", "32", "--batch-size", "8", "--max-steps", "12",
               "--eval-steps", "0", "--save-steps", "1000", "--logging-steps", "2", "--learning-rate", "3e-3",
               "--warmup-steps", "2", "--no-progress-bar", "--max-eval-samples", "16",
               "--cache-dir", str(tmp_path / "cache")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(command, capture_output=True, text=True, timeout=400, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count("[scratchformer train] denoise:") == 1  # only rank 0 talks
    assert "2 process(es)" in proc.stdout
    losses = train_losses(out)
    assert losses[max(losses)] < losses[min(losses)]
    checkpoints = sorted(p.name for p in out.glob("checkpoint-*"))
    assert checkpoints == ["checkpoint-12"]  # exactly one, the final one, written once
    assert len(list((out / "checkpoint-12").glob("*.safetensors"))) == 1
    assert {p.name for p in (out / "checkpoint-12").glob("rng_state*")} == {"rng_state_0.pth", "rng_state_1.pth"}
    state = json.loads((out / "checkpoint-12" / "trainer_state.json").read_text())
    assert state["global_step"] == 12 and state["train_batch_size"] == 8
    for folder in (out, out / "checkpoint-12"):
        model = ScratchformerForConditionalGeneration.from_pretrained(folder)
        assert model.config.vocab_size <= 300


@pytest.mark.slow
def test_torchrun_two_processes_with_batch_rebalance_are_the_run_of_one(tmp_path, corpus):
    """batch_rebalance splits each step's examples over processes x accumulation by length: 2 processes x 2 x 2
    give the weights of 1 process x 8 (dropout 0; to float rounding, 1e-6), as the v2 recipe's docs claim."""
    options = ["--train-files", str(corpus), "--preset", "tiny", "--tokenizer-vocab-size", "300", "--max-length", "32",
               "--max-steps", "4", "--eval-steps", "0", "--save-steps", "1000", "--learning-rate", "3e-3",
               "--warmup-steps", "2", "--no-progress-bar", "--max-eval-samples", "16", "--seed", "3",
               "--config-overrides", "dropout=0.0", "--train-sampling-strategy", "batch_rebalance",
               "--cache-dir", str(tmp_path / "cache")]
    torchrun = Path(sys.executable).with_name("torchrun")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    runs = {"one": [sys.executable, "-m", "scratchformer.cli", "train", *options, "--batch-size", "8"],
            "two": [str(torchrun), "--standalone", "--nproc_per_node=2", "-m", "scratchformer.cli", "train", *options,
                    "--batch-size", "2", "--gradient-accumulation-steps", "2"]}
    weights = {}
    for name, command in runs.items():
        proc = subprocess.run([*command, "--output-dir", str(tmp_path / name)], capture_output=True, text=True,
                              timeout=400, env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        weights[name] = ScratchformerForConditionalGeneration.from_pretrained(tmp_path / name).state_dict()
    # k_proj.bias is left out: its exact gradient is zero (softmax ignores a constant added to a row's scores), so
    # Adam turns the reduction-order noise of 2 processes into updates of lr size; every other weight agrees
    for key, value in weights["one"].items():
        if not key.endswith("k_proj.bias"):
            torch.testing.assert_close(weights["two"][key], value, atol=1e-6, rtol=1e-5, msg=key)


@pytest.mark.parametrize("checkpointing", [False, True], ids=["plain", "gradient-checkpointing"])
def test_freeze_encoder_trains_the_decoder_alone(tmp_path, corpus, checkpointing):
    """``--freeze-encoder``: the encoder and the shared embedding table end as they started (bit for bit, after 1
    and after 3 steps of the same seed), the decoder learns, and the optimizer holds state for the decoder's
    parameters alone; also under reentrant ``--gradient-checkpointing``, where the decoder's first layer takes frozen
    embeddings and still has to pass a gradient back to its own weights."""
    runs = {}
    for steps in (1, 3):
        reentrant = {"gradient_checkpointing_kwargs": {"use_reentrant": True}} if checkpointing else {}
        options, args = tiny(tmp_path, corpus, f"s{steps}", max_steps=steps, save_steps=100, freeze_encoder=True,
                             gradient_checkpointing=checkpointing, **reentrant)
        runs[steps] = ScratchformerForConditionalGeneration.from_pretrained(run_training(options, args)["output_dir"])
    one, three = runs[1].model, runs[3].model
    for a, b in zip(one.encoder.parameters(), three.encoder.parameters(), strict=True):
        assert torch.equal(a, b)
    assert torch.equal(runs[1].get_input_embeddings().weight, runs[3].get_input_embeddings().weight)
    assert not torch.equal(one.decoder.layers[0].cross_attn.q_proj.weight, three.decoder.layers[0].cross_attn.q_proj.weight)
    optimizer = torch.load(tmp_path / "s3" / "checkpoint-3" / "optimizer.pt", weights_only=True)
    held = sum(state["exp_avg"].numel() for state in optimizer["state"].values())
    embedding = runs[3].get_input_embeddings().weight
    decoder = {id(p): p for p in three.decoder.parameters() if p is not embedding}
    assert held == sum(p.numel() for p in decoder.values()) > 0
