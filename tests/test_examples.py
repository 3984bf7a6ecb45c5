"""The scripts in examples/ run as a user would run them."""

from __future__ import annotations

import csv
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO_ROOT


def test_reverse_task_learns_to_99_percent_exact_match():
    """A from-scratch model that cannot learn to reverse short sequences is broken; ours gets >= 99% exact match
    on 500 held-out sequences (the script prints the training time; it is about a minute on 2 CPU cores)."""
    result = subprocess.run([sys.executable, str(REPO_ROOT / "examples" / "reverse_task.py")],
                            capture_output=True, text=True, timeout=900, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    match = re.search(r"held-out exact match: ([\d.]+)%", result.stdout)
    assert match, result.stdout
    assert float(match.group(1)) >= 99.0, result.stdout


# The training examples on tiny data, for a few steps: they must run end to end and write what they promise.
# (Their real runs - the shipped checkpoint, the kjv -> web scores - are in docs/experiments.md.)

WORDS = "the a light word earth water spirit good day night heaven made said let was".split()


def run_example(name: str, *args: str, tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_DATASETS_CACHE": str(tmp_path / "hf-cache")}
    result = subprocess.run([sys.executable, str(REPO_ROOT / "examples" / name), *args], capture_output=True,
                            text=True, timeout=600, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result


@pytest.fixture
def corpus(tmp_path) -> Path:
    rng = random.Random(0)
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 15))) + "."
                              for _ in range(200)) + "\n")
    return path


def test_pretrain_denoising_example_runs(tmp_path, corpus):
    """The shipped recipe on a tiny corpus: in bf16 where this CPU has its kernels, else with ``--bf16 false``
    (emulated bfloat16 is tens of times slower)."""
    out, bf16 = tmp_path / "pretrain", torch.backends.cpu.get_cpu_capability() == "AVX512"
    run_example("pretrain_denoising.py", "--train-files", str(corpus), "--output-dir", str(out), "--preset", "tiny",
                "--tokenizer-vocab-size", "300", "--max-length", "32", "--batch-size", "8", "--max-steps", "4",
                "--warmup-steps", "2", "--eval-steps", "0", "--save-steps", "100", "--max-eval-samples", "16",
                "--no-progress-bar", *([] if bf16 else ["--bf16", "false"]), tmp_path=tmp_path)
    for name in ("model.safetensors", "tokenizer.json", "loss_curve.png", "loss_history.json"):
        assert (out / name).is_file(), name
    config = json.loads((out / "config.json").read_text())
    # the recipe's overrides are applied
    assert config["pre_layer_norm"] is True and config["dropout"] == 0.0
    assert config["position_embedding_type"] == "rope"
    trained = json.loads((out / "train_config.json").read_text())  # and the shipped recipe's objective
    assert trained["mask_ratio"] == 0.5 and trained["encoder_mlm_weight"] == 1.0
    assert trained["bf16"] is bf16


def test_pretrain_encoder_first_example_trains_the_decoder_on_phase_ones_encoder(tmp_path, corpus):
    """Both phases in one command: phase one trains the encoder alone, phase two the decoder alone, so the
    final model's encoder is phase one's bit for bit; run again with --resume, a finished phase is skipped, and a
    missing phase two is trained again from the same encoder."""
    from safetensors.torch import load_file

    out = tmp_path / "v4"
    both = ["--train-files", str(corpus), "--output-dir", str(out), "--max-length", "32", "--batch-size", "8",
            "--gradient-accumulation-steps", "1", "--max-eval-samples", "16", "--no-progress-bar"]
    phases = ["--phase-one", "--preset", "tiny", "--tokenizer-vocab-size", "300", "--max-steps", "4",
              "--warmup-steps", "2", "--phase-two", "--max-steps", "3", "--warmup-steps", "1"]
    run_example("pretrain_encoder_first.py", *both, *phases, tmp_path=tmp_path)
    encoder, model = load_file(out / "encoder" / "model.safetensors"), load_file(out / "model" / "model.safetensors")
    assert encoder.keys() == model.keys()
    decoder_names = [name for name in model if ".decoder." in name]
    assert decoder_names and any(not torch.equal(encoder[name], model[name]) for name in decoder_names)
    assert all(torch.equal(encoder[name], model[name]) for name in model if name not in decoder_names)
    one = json.loads((out / "encoder" / "train_config.json").read_text())
    two = json.loads((out / "model" / "train_config.json").read_text())
    assert (one["encoder_mlm_weight"], one["denoising_weight"], one["mask_ratio"]) == (1.0, 0.0, 0.5)
    assert two["freeze_encoder"] is True and two["mask_ratio"] == 0.3
    config = json.loads((out / "model" / "config.json").read_text())  # phase one's shape, kept by phase two
    assert (config["pre_layer_norm"], config["dropout"], config["position_embedding_type"]) == (True, 0.0, "rope")

    weights = (out / "encoder" / "model.safetensors").stat().st_mtime_ns
    shutil.rmtree(out / "model")
    again = run_example("pretrain_encoder_first.py", *both, "--resume", *phases, tmp_path=tmp_path)
    assert "phase one: already finished" in again.stdout and "phase two: training" in again.stdout
    assert (out / "encoder" / "model.safetensors").stat().st_mtime_ns == weights
    assert load_file(out / "model" / "model.safetensors").keys() == model.keys()
    done = run_example("pretrain_encoder_first.py", *both, "--resume", *phases, tmp_path=tmp_path)
    assert done.stdout.count("already finished") == 2


def test_pretrain_encoder_first_example_stops_at_a_phase_that_fails(tmp_path, corpus):
    """A bad option for phase one is the CLI's one line and exit code 2, and phase two does not start."""
    out = tmp_path / "v4"
    result = subprocess.run([sys.executable, str(REPO_ROOT / "examples" / "pretrain_encoder_first.py"),
                             "--train-files", str(corpus), "--output-dir", str(out), "--phase-one", "--mask-ratio",
                             "1.5"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "--mask-ratio must be in [0, 1), got 1.5" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (out / "model").exists()


def test_finetune_kjv_to_web_example_scores_held_out_books(tmp_path):
    """From the shipped checkpoint, on a 4-book verse file with two held-out books: the report has BLEU / chrF of the
    fine-tuned model and of copying the source, and the diagnostics, on the held-out verses only; --score-only
    re-scores the fine-tuned folder with other decoding settings without training."""
    rng = random.Random(1)
    rows = ["ref\tkjv\tweb"]
    for book in ("Genesis", "Joshua", "Mark", "Jude"):
        for verse in range(1, 16):
            words = [rng.choice(WORDS) for _ in range(rng.randint(4, 10))]
            rows.append(f"{book} 1:{verse}\t{' '.join(words)} hath\t{' '.join(words)} has")
    data = tmp_path / "verses.tsv"
    data.write_text("\n".join(rows) + "\n")
    out = tmp_path / "finetune"
    result = run_example("finetune_kjv_to_web.py", "--data", str(data), "--output-dir", str(out),
                         "--validation-books", "Mark", "Jude", "--max-steps", "2", "--batch-size", "4",
                         "--max-eval-samples", "6", "--generation-max-length", "16", "--eval-steps", "0",
                         "--save-steps", "100", "--no-progress-bar", "--max-score-verses", "6", tmp_path=tmp_path)
    report = json.loads((out / "kjv_to_web_scores.json").read_text())
    (custom,) = report["sets"].values()
    assert custom["books"] == ["Mark", "Jude"] and custom["verses"] == 6
    assert {e["ref"].split()[0] for e in custom["examples"]} <= {"Mark", "Jude"}  # held-out verses only
    for system in ("fine_tuned", "copy_source"):
        assert 0.0 <= custom[system]["bleu"] <= 100.0 and 0.0 <= custom[system]["chrf"] <= 100.0, report
    assert custom["copy_source"]["bleu"] > 0.0  # "x hath" vs "x has": most words match
    diagnostics = custom["diagnostics"]
    assert 0.0 <= diagnostics["worse_than_copy"] <= 1.0 and diagnostics["length_ratio"] >= 0.0
    assert diagnostics["missing_reference_words_copy"] > 0.0  # "hath" is not "has"
    printed = json.loads(result.stdout[result.stdout.rindex('{\n  "model"'):])
    assert printed["sets"]["custom"]["fine_tuned"] == custom["fine_tuned"]  # printed too
    assert set(custom["per_book"]) == {"Mark", "Jude"} and "outputs" not in custom  # per-book scores; outputs -> TSV
    for book in custom["per_book"].values():
        assert 0.0 <= book["fine_tuned"]["chrf"] <= 100.0 and book["copy_source"]["bleu"] > 0.0
    with open(out / "kjv_to_web_scores.tsv", encoding="utf-8", newline="") as f:
        verses = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\"))
    assert len(verses) == 6 and {v["set"] for v in verses} == {"custom"}  # every scored verse, with its chrF
    assert all(v["ref"].split()[0] in {"Mark", "Jude"} and 0.0 <= float(v["chrf"]) <= 100.0 for v in verses)

    rescored, weights = tmp_path / "beam.json", (out / "model.safetensors").stat().st_mtime_ns
    run_example("finetune_kjv_to_web.py", "--data", str(data), "--score-only", str(out), "--validation-books", "Jude",
                "--num-beams", "2", "--no-repeat-ngram-size", "3", "--report", str(rescored), tmp_path=tmp_path)
    beam = json.loads(rescored.read_text())
    assert beam["generation"]["num_beams"] == 2 and beam["sets"]["custom"]["verses"] == 15
    assert (out / "model.safetensors").stat().st_mtime_ns == weights  # nothing was trained


def test_measure_step_time_example_prints_a_row_per_preset(tmp_path, corpus):
    """One row per preset and precision; bf16 where this CPU has its kernels (emulated elsewhere, tens of times slower;
    tests/test_encoder_mlm.py checks that it reaches the encoder's loss on any CPU)."""
    bf16 = torch.backends.cpu.get_cpu_capability() == "AVX512"
    out, precisions = tmp_path / "steps.json", ["fp32", "bf16"] if bf16 else ["fp32"]
    run_example("measure_step_time.py", "--corpus", str(corpus), "--presets", "tiny", "--steps", "4", "--skip", "1",
                "--batch-size", "4", "--max-length", "32", "--rows", "100", "--json", str(out),
                "--precision", *precisions, "--encoder-mlm-weight", "1", "--denoising-weight", "0",
                "--gradient-accumulation-steps", "2", "--train-sampling-strategy", "batch_rebalance",
                "--max-tokens-per-character", "1.0", tmp_path=tmp_path)
    rows = json.loads(out.read_text())
    assert [row["precision"] for row in rows] == precisions
    for row in rows:
        assert row["preset"] == "tiny" and row["steps_timed"] == 2 and row["wall_s_per_step"] > 0 and row["params"] > 0
    if len(rows) == 2:
        assert rows[0]["train_loss"] != rows[1]["train_loss"]  # the same run but for the precision: bf16 reached it


@pytest.mark.parametrize("args, message", [
    (["--steps", "3", "--skip", "5"], "need --rounds >= 1 and --steps > --skip + 1 >= 1"),  # no median of nothing
    (["--presets", "huge"], "--preset must be one of tiny, mini"),  # was a TrainingSetupError traceback
])
def test_measure_step_time_example_refuses_what_it_cannot_time_in_one_line(tmp_path, corpus, args, message):
    result = subprocess.run([sys.executable, str(REPO_ROOT / "examples" / "measure_step_time.py"), "--corpus",
                             str(corpus), *args], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert message in result.stderr.strip().splitlines()[-1]


def test_kjv_to_web_example_says_bad_options_and_missing_inputs_in_one_line(tmp_path, capsys):
    """Before the fine-tune: a count the scoring cannot use (num_beams=0 failed in generate() after the training);
    a missing model or data file is scratchformer's one line, not a traceback."""
    sys.path.insert(0, str(REPO_ROOT / "examples"))
    try:
        import finetune_kjv_to_web as example
    finally:
        sys.path.remove(str(REPO_ROOT / "examples"))
    for argv, message in ((["--num-beams", "0"], "--num-beams must be >= 1, got 0"),
                          (["--score-batch-size", "0"], "--score-batch-size must be >= 1"),
                          (["--max-score-verses", "-1"], "--max-score-verses must be >= 0")):
        with pytest.raises(SystemExit) as stop:
            example.main([*argv, "--score-only", str(tmp_path)])
        assert stop.value.code == 2 and message in capsys.readouterr().err
    for argv, message in ((["--score-only", str(tmp_path / "none")], "no model at "),
                          (["--data", str(tmp_path / "none.tsv"), "--output-dir", str(tmp_path / "o")],
                           "data file not found: ")):
        assert example.main(argv) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith("finetune_kjv_to_web.py: error: ") and message in line, line


def test_kjv_to_web_diagnostics_count_what_they_say():
    """The fine-tuning report's diagnostics on hand-made verses: a repetition is a word pair said more often than
    the reference says it, a missing word is a reference word (with multiplicity) the output lacks."""
    sys.path.insert(0, str(REPO_ROOT / "examples"))
    try:
        import finetune_kjv_to_web as example
    finally:
        sys.path.remove(str(REPO_ROOT / "examples"))
    assert example._repeats("he went to the to the house", "he went to the house")
    assert not example._repeats("holy, holy, holy is the Lord", "Holy, holy, holy is the Lord")  # as the reference
    assert example._missing("He taught", "He taught them") == pytest.approx(1 / 3)
    assert example._missing("the the", "the the the") == pytest.approx(1 / 3)  # multiplicity counts
    report = example.diagnostics(["And he taught them", "unto the land", "the LORD spake"],
                                 ["He taught", "to the land the land", "the LORD spoke"],
                                 ["He taught them", "to the land", "the LORD spoke"])
    assert report["short_outputs"] == pytest.approx(1 / 3) and report["repetitions"] == pytest.approx(1 / 3)
    assert report["missing_reference_words"] == pytest.approx((1 / 3 + 0 + 0) / 3)
    assert report["missing_reference_words_copy"] == pytest.approx((0 + 1 / 3 + 1 / 3) / 3)  # "unto", "spake"
    assert report["length_ratio"] == pytest.approx(10 / 9)
    # the first two lose to the copy (a dropped word; an added phrase); the third equals the reference
    assert report["worse_than_copy"] == pytest.approx(2 / 3)
    assert report["lost_names"] == 0.0  # no verse has a name

    # names: capitalised source words past the first that the reference keeps; "LORD" becomes "Yahweh", not a name
    assert example._names("Now Cyrus king of Persia saw the LORD", "Now Cyrus king of Persia saw Yahweh") == {
        "Cyrus": 1, "Persia": 1}
    assert example._lost_names("Now Baasha king of Egypt", "Now Cyrus king of Persia", "Now Cyrus king of Persia") \
        == (2, 2)
    # not names: any word after punctuation ("said, Go"), single letters, words in capitals
    assert example._names("And he said, Go; I will send O Israel to Ai", "He said, Go! I will send O Israel to Ai") \
        == {"Israel": 1, "Ai": 1}
    named = example.diagnostics(["in Judah and Benjamin", "to Jerusalem"], ["in Judah and Ephraim", "to Jerusalem"],
                                ["in Judah and Benjamin", "to Jerusalem"])
    assert named["lost_names"] == pytest.approx(1 / 3)  # Benjamin lost, of Judah, Benjamin and Jerusalem


def test_copy_bias_raises_each_rows_own_source_tokens_in_every_beam():
    """--copy-bias: row b of a batch (and each of its beams) gets the bias on its own source's tokens only, never
    on special tokens (</s> would end outputs early)."""
    import torch

    sys.path.insert(0, str(REPO_ROOT / "examples"))
    try:
        import finetune_kjv_to_web as example
    finally:
        sys.path.remove(str(REPO_ROOT / "examples"))

    class Tokenizer:
        all_special_ids = [0, 2]  # <pad>, </s>

    sources = torch.tensor([[5, 6, 2], [7, 2, 0]])  # two padded rows ending in </s>
    processor = example.source_token_bias(Tokenizer(), sources, 1.5, num_beams=2)
    scores = processor(torch.zeros(4, 1, dtype=torch.long), torch.zeros(4, 10))
    expected = torch.zeros(4, 10)
    expected[0:2, [5, 6]] = 1.5  # beams of row 0
    expected[2:4, 7] = 1.5  # beams of row 1
    torch.testing.assert_close(scores, expected, atol=0, rtol=0)
