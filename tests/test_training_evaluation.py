"""Seq2seq evaluation during training generates as the evaluation after training does (issue 34, item 9).

The issue saw an in-loop evaluation take 113 s and the evaluation of the same weights after training 15.7 s. What
could make them differ is a setting, so these tests record what ``generate()`` runs with at each evaluation of a
tiny run: the model in eval mode, no autocast, the run's length and beams, and the key/value cache at every decoding
step (one new token per step); the in-loop and the after-training evaluation must agree on all of it. The cache must
be used even when the ``--model`` folder's config says ``use_cache: false`` and it has no generation_config.json.
Timings are in benchmarks/seq2seq_eval_in_loop.py, not here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO_ROOT
from test_training import BOOK_OF_REF, pairs, tiny  # noqa: F401  (pairs is a fixture)
from transformers import TrainerCallback

from scratchformer.integrity import write_checksums
from scratchformer.training import run_training


class GenerationSettings(TrainerCallback):
    """Records, for every evaluation, whether training had ended and what each ``generate()`` call ran with."""

    def __init__(self):
        self.training_done = False
        self.calls: list[dict] = []
        self.evaluations: list[tuple[bool, dict, list[dict]]] = []

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        generate, steps = model.generate, []

        def record_step(module, args, kwargs):
            cache = kwargs.get("cache", kwargs.get("past_key_values"))
            steps.append((kwargs["input_ids"].shape[-1], cache is not None and int(cache.get_seq_length()) > 0))

        def recorded_generate(*args, **kwargs):
            steps.clear()
            hook = model.get_decoder().register_forward_pre_hook(record_step, with_kwargs=True)
            try:
                out = generate(*args, **kwargs)
            finally:
                hook.remove()
            self.calls.append({"training_mode": model.training, "autocast": torch.is_autocast_enabled("cpu"),
                               "max_length": kwargs.get("max_length"), "num_beams": kwargs.get("num_beams"),
                               "steps": len(steps), "first_step_tokens": steps[0][0],
                               "later_steps_cached_one_token": all(n == 1 and cached for n, cached in steps[1:])})
            return out

        model.generate = recorded_generate

    def on_train_end(self, args, state, control, **kwargs):
        self.training_done = True

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self.evaluations.append((self.training_done, dict(metrics), self.calls))
        self.calls = []


def seq2seq_run(tmp_path: Path, pairs_file: Path, name: str, **overrides) -> tuple[GenerationSettings, dict]:  # noqa: F811
    watch = GenerationSettings()
    settings = dict(objective="seq2seq", source_column="src", target_column="tgt", max_steps=2, eval_steps=2,
                    save_steps=100, max_eval_samples=8, generation_max_length=12, group_column="ref",
                    group_pattern=BOOK_OF_REF, validation_groups=["Ruth"], config_overrides="dropout=0.1")
    options, args = tiny(tmp_path, pairs_file, name, **{**settings, **overrides})
    return watch, run_training(options, args, callbacks=[watch])


def expected_settings(calls: list[dict]) -> None:
    assert calls
    for call in calls:
        assert not call["training_mode"] and not call["autocast"]
        assert (call["max_length"], call["num_beams"]) == (12, 1)
        assert call["steps"] > 1 and call["later_steps_cached_one_token"], call


def test_in_loop_and_after_training_evaluations_generate_alike(tmp_path, pairs):  # noqa: F811
    """A run evaluates its final weights once (issue 43): in the loop when the Trainer evaluates the last step,
    after training otherwise (here --eval-steps 0). The same seed gives both runs the same weights at step 2."""
    watch, result = seq2seq_run(tmp_path, pairs, "in-loop")
    ((during, in_loop, in_loop_calls),) = watch.evaluations  # the Trainer's at step 2, not repeated after training
    watch, after_result = seq2seq_run(tmp_path, pairs, "after", eval_steps=0)
    ((after, final, final_calls),) = watch.evaluations
    assert (during, after) == (False, True)
    expected_settings(in_loop_calls)
    assert in_loop_calls == final_calls  # the same settings and the same number of decoding steps per batch
    for key in ("eval_loss", "eval_bleu", "eval_chrf"):
        assert in_loop[key] == result["metrics"][key] and final[key] == after_result["metrics"][key], key
        assert in_loop[key] == pytest.approx(final[key], abs=1e-6), key


def test_evaluation_uses_the_cache_even_when_the_models_config_turns_it_off(tmp_path, pairs):  # noqa: F811
    """A --model folder as a Trainer checkpoint leaves it (config.json: use_cache false) without its
    generation_config.json: generation would take use_cache from the config and decode without the cache."""
    _, first = seq2seq_run(tmp_path, pairs, "first")
    folder = tmp_path / "model"
    shutil.copytree(first["output_dir"], folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "use_cache": False}))
    write_checksums(folder)  # the checksums cover config.json: a checkpoint's are written with its config as it is
    (folder / "generation_config.json").unlink()
    shutil.rmtree(folder / "checkpoint-2", ignore_errors=True)
    watch, _ = seq2seq_run(tmp_path, pairs, "second", model=str(folder), preset="tiny")
    for _, _, calls in watch.evaluations:
        expected_settings(calls)


def test_the_benchmark_measures_both_evaluations_on_data_of_its_own(tmp_path):
    """benchmarks/seq2seq_eval_in_loop.py, one short run on a TSV written here (the real one needs ../shared)."""
    data = tmp_path / "pairs.tsv"
    rows = [f"And the man saw the river number {i}.\tThe man saw river {i}." for i in range(44)]
    data.write_text("ref\tkjv\tweb\n" + "".join(f"x {i}:1\t{row}\n" for i, row in enumerate(rows)))
    out = tmp_path / "result.json"
    done = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "seq2seq_eval_in_loop.py"), "--data", str(data),
                           "--repeats", "1", "--steps", "1", "--train-rows", "40", "--eval-rows", "4",
                           "--eval-start", "40", "--json", str(out), "--md", str(tmp_path / "result.md")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    summary = json.loads(out.read_text())["summary"]
    assert summary["same_generation_settings"] and summary["same_metrics"]
    settings = summary["generation_settings"]
    assert not settings["model_training"] and settings["generation_use_cache"]
    assert settings["steps_with_cache_and_one_token"] == settings["decoding_steps"] - 1
    assert "| in the loop (step 1) |" in (tmp_path / "result.md").read_text()
