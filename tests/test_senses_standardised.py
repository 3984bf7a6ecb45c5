"""scripts/senses_standardised.py: the word-sense figures after a standardisation estimated on training text."""

from __future__ import annotations

import gzip
import json
import runpy

import pytest
from conftest import REPO_ROOT
from test_embeddings import tiny_distilbert
from test_senses import write_tsv

from scratchformer.analysis.extractor import EmbeddingExtractor
from scratchformer.analysis.sense_data import read_senses_tsv
from scratchformer.analysis.senses import evaluate_senses

SCRIPT = runpy.run_path(str(REPO_ROOT / "scripts" / "senses_standardised.py"))
TEXT = ["the children sat near the river bank on monday", "she deposited her salary at the bank",
        "hello world", "a man fishing from the grassy bank of the stream", "x" * 400,
        "write a poem about money", "the bank is near main street"]


def test_text_words_are_seeded_words_of_lines_of_the_right_length(tmp_path):
    path = tmp_path / "text.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(TEXT) + "\n")
    words = SCRIPT["text_words"](path, 4, seed=3)
    assert words == SCRIPT["text_words"](path, 4, seed=3) and len(words) == 4
    assert SCRIPT["text_words"](path, 100) != SCRIPT["text_words"](path, 100, seed=1)
    for line, (start, end) in words:
        assert 20 < len(line) < 300 and line[start:end].isalpha()
        assert (start == 0 or line[start - 1] == " ") and (end == len(line) or line[end] == " ")
    assert len(SCRIPT["text_words"](path, 100)) == 5  # "hello world" is too short, the 400 x's too long


def test_raw_scores_are_what_senses_reports_and_the_json_has_every_layer(tmp_path, capsys):
    """The raw column is `senses`' figure at every layer (to 1e-12); centred and standardised are scores too."""
    model, tokenizer = tiny_distilbert()
    model.save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    (tmp_path / "text.txt").write_text("\n".join(TEXT) + "\n")
    data, out = write_tsv(tmp_path / "s.tsv"), tmp_path / "std.json"
    assert SCRIPT["main"]([str(tmp_path / "m"), "--data", str(data), "--text", str(tmp_path / "text.txt"),
                           "--output", str(out)]) == 0
    (rows,) = json.loads(out.read_text())["models"].values()
    report = evaluate_senses(EmbeddingExtractor(model, tokenizer, progress=False), read_senses_tsv(data))
    assert [row["layer"] for row in rows] == [layer.layer for layer in report.layers]
    for row, layer in zip(rows, report.layers):
        assert row["raw"]["roc_auc"] == pytest.approx(layer.roc_auc, abs=1e-12)
        assert row["raw"]["roc_auc_within_group"] == pytest.approx(layer.roc_auc_within_group, abs=1e-12)
        assert row["raw"]["nn_accuracy"] == pytest.approx(layer.nn_accuracy, abs=1e-12)
        assert all(0 <= row[kind][figure] <= 1 for kind in SCRIPT["KINDS"] for figure in row[kind])
    assert "ROC-AUC / within lemma / 1-NN" in capsys.readouterr().out


def test_bad_options_and_files_are_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "short.txt").write_text("hello world\n")
    data = str(write_tsv(tmp_path / "s.tsv"))
    for argv, message in ((["--sentences", "1", "--text", str(tmp_path / "short.txt")], "at least 2"),
                          (["--text", str(tmp_path / "short.txt")], "fewer than 2 lines"),
                          (["--text", str(tmp_path / "missing.txt")], "not found"),
                          (["--text", str(tmp_path / "short.txt"), "--seed", "-1"], "--seed must be in [0, 2**32 - 1]"),
                          (["--text", str(tmp_path / "short.txt"), "--output", str(tmp_path)], "is a folder")):
        with pytest.raises(SystemExit) as stop:
            SCRIPT["main"](["small", "--data", data, *argv])
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert stop.value.code == 2 and message in error, error
