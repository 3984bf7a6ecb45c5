"""scripts/senses_bootstrap.py: intervals on the word-sense figures, by resampling lemma groups."""

from __future__ import annotations

import json
import runpy

import numpy as np
import pytest
from conftest import REPO_ROOT
from test_embeddings import tiny_distilbert
from test_senses import write_tsv

from scratchformer.analysis.sense_data import read_senses_tsv
from scratchformer.analysis.senses import ScoredPairs, roc_auc

SCRIPT = runpy.run_path(str(REPO_ROOT / "scripts" / "senses_bootstrap.py"))


def save_tiny_distilbert(folder) -> None:
    """A random tiny DistilBERT and its WordPiece tokenizer, saved as a folder the script loads."""
    model, tokenizer = tiny_distilbert()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def parts(data: ScoredPairs, cosines: np.ndarray, hits: np.ndarray) -> dict:
    pair_group = data.group_of[data.pair_a]
    groups = np.array([roc_auc(data.same[pair_group == g], cosines[pair_group == g])
                       if 0 < data.same[pair_group == g].sum() < (pair_group == g).sum() else np.nan
                       for g in range(len(data.groups))])
    return {"cosines": cosines, "groups": groups, "hits": hits, "layer": 6}


def test_intervals_hold_the_full_data_figure_and_a_model_equals_itself(tmp_path):
    """A model that ranks every same-sense pair first scores 1.0 on every draw; against one that ranks them last,
    the difference is +1 in every draw; a model against itself differs by exactly 0."""
    data = ScoredPairs.of(read_senses_tsv(write_tsv(tmp_path / "s.tsv")))
    perfect = parts(data, data.same.astype(float), np.ones(len(data.used), dtype=bool))
    inverted = parts(data, 1.0 - data.same, np.zeros(len(data.used), dtype=bool))
    result = SCRIPT["bootstrap"](data, {"inverted": inverted, "perfect": perfect, "again": inverted}, resamples=200)
    assert result["groups"] == len(data.groups) == 2 and result["baseline"] == "inverted"
    best = result["models"]["perfect"]
    assert best["roc_auc"] == {"value": 1.0, "low": 1.0, "high": 1.0} and best["nn_accuracy"]["value"] == 1.0
    ahead = best["minus_baseline"]["roc_auc"]
    assert (ahead["value"], ahead["low"], ahead["high"], ahead["ahead_share"]) == (1.0, 1.0, 1.0, 1.0)
    same = result["models"]["again"]["minus_baseline"]
    assert all((d["value"], d["low"], d["high"], d["ahead_share"]) == (0.0, 0.0, 0.0, 0.0) for d in same.values())
    assert "minus_baseline" not in result["models"]["inverted"]
    assert "ahead in 100% of draws" in SCRIPT["table"](result)


def test_noisy_figures_get_an_interval_around_them(tmp_path):
    """With random cosines the interval is wide and holds the figure on all the data."""
    # 10 lemmas, 6 occurrences each, two senses per lemma; the word is the sentence's first
    rows = [(f"w{k // 6}", "n", str(k % 2 + 2 * (k // 6)), 0, 4, f"word here {k}", "g") for k in range(60)]
    tsv = write_tsv(tmp_path / "many.tsv", rows)
    data = ScoredPairs.of(read_senses_tsv(tsv))
    rng = np.random.default_rng(1)
    noisy = parts(data, rng.random(len(data.pair_a)), rng.random(len(data.used)) < 0.5)
    (entry,) = SCRIPT["bootstrap"](data, {"noisy": noisy}, resamples=300)["models"].values()
    for figure in ("roc_auc", "roc_auc_within_group", "nn_accuracy"):
        assert entry[figure]["low"] < entry[figure]["value"] < entry[figure]["high"], figure
        assert entry[figure]["high"] - entry[figure]["low"] > 0.05, figure


def test_the_script_scores_saved_models(tmp_path, capsys):
    """End to end on a saved DistilBERT folder and a copy of it: the JSON has both, with no difference between them."""
    import shutil

    save_tiny_distilbert(tmp_path / "m")
    shutil.copytree(tmp_path / "m", tmp_path / "copy")
    out = tmp_path / "boot.json"
    assert SCRIPT["main"]([str(tmp_path / "m"), str(tmp_path / "copy"), "--data", str(write_tsv(tmp_path / "s.tsv")),
                           "--resamples", "20", "--output", str(out)]) == 0
    result = json.loads(out.read_text())
    assert list(result["models"]) == [str(tmp_path / "m"), str(tmp_path / "copy")]
    first, second = result["models"].values()
    assert first["layer"] == second["layer"] == 2  # the last of the tiny model's 2 layers
    assert all(d["value"] == d["low"] == d["high"] == 0.0 for d in second["minus_baseline"].values())
    assert "paired bootstrap over 2 lemma groups" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        SCRIPT["main"]([str(tmp_path / "m"), "--data", str(tmp_path / "s.tsv"), "--resamples", "0"])
    with pytest.raises(SystemExit):
        SCRIPT["main"]([str(tmp_path / "m"), str(tmp_path / "m"), "--data", str(tmp_path / "s.tsv")])
    capsys.readouterr()
    for argv, message in ((["--layer", "9"], "layer=9 is out of range for a model with 2 layers"),  # were tracebacks
                          (["--seed", "-1"], "--seed must be in [0, 2**32 - 1]"),
                          (["--output", str(tmp_path)], "give a JSON file's path in an existing folder"),
                          (["--output", str(tmp_path / "no" / "b.json")], "in an existing folder")):
        with pytest.raises(SystemExit) as stop:
            SCRIPT["main"]([str(tmp_path / "m"), "--data", str(tmp_path / "s.tsv"), *argv])
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert stop.value.code == 2 and message in error, error


def values(result: dict) -> dict:
    """The one model's three figures in a result."""
    (entry,) = result["models"].values()
    return {figure: entry[figure]["value"] for figure in SCRIPT["FIGURES"]}


def test_words_split_or_kept_whole_by_the_first_models_tokenizer(tmp_path, capsys):
    """--words scores only the lemmas whose word the first model's tokenizer splits (banks = bank ##s) in most
    occurrences, or keeps whole; each subset's figures are those of a run on that subset's rows alone."""
    save_tiny_distilbert(tmp_path / "m")
    sentences = [("bank", "1", "banks", "the banks of the river"), ("bank", "1", "banks", "river banks are grassy"),
                 ("bank", "2", "banks", "the banks gave her money"), ("bank", "2", "bank", "the bank gave money"),
                 ("fish", "3", "fish", "we fish on the river"), ("fish", "3", "fish", "she is at the river to fish"),
                 ("fish", "4", "fish", "the fish is on the plate"), ("fish", "4", "fish", "a fish from the stream")]
    rows = [(lemma, "n", sense, s.index(w), s.index(w) + len(w), s, "g") for lemma, sense, w, s in sentences]
    results = {}
    for words, data_rows in (("all", rows), ("split", rows), ("whole", rows), ("alone", rows[4:])):
        out = tmp_path / f"{words}.json"
        args = [str(tmp_path / "m"), "--data", str(write_tsv(tmp_path / f"{words}.tsv", data_rows)),
                "--resamples", "20", "--output", str(out)]
        assert SCRIPT["main"](args + (["--words", words] if words in ("split", "whole") else [])) == 0
        results[words] = json.loads(out.read_text())
    assert [results[w]["groups"] for w in ("all", "split", "whole")] == [2, 1, 1]
    assert "(words that" in capsys.readouterr().out
    assert values(results["whole"]) == pytest.approx(values(results["alone"]), abs=1e-12)  # fish alone
    assert values(results["split"]) != pytest.approx(values(results["whole"]))
    with pytest.raises(SystemExit):  # no lemma of fish's rows is split
        SCRIPT["main"]([str(tmp_path / "m"), "--data", str(tmp_path / "alone.tsv"), "--words", "split"])
