"""README's headline numbers are derived, not typed: each test reads what README prints and recomputes it with the
public commands (``scratchformer compare``, ``scratchformer senses``, the KJV -> WEB example's own held-out sets and
sacrebleu), comparing at the precision README prints. A changed checkpoint or analysis then fails here instead of
leaving README stale. (The fill-mask top-5 is held the same way in ``test_pipelines.py``.)
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from scratchformer.cli import main
from scratchformer.loading import pretrained_path

REPO_ROOT = Path(__file__).resolve().parents[1]
CARD = pretrained_path("small")


def _text(path: Path) -> str:
    """The file's text with every run of white space made one space (README wraps its sentences anywhere)."""
    return " ".join(path.read_text().split())


def _as_printed(value: float, printed: str) -> str:
    """``value`` rounded to as many decimals as ``printed`` shows."""
    return f"{value:.{len(printed.partition('.')[2])}f}"


def _quoted(pattern: str, text: str, where: str) -> re.Match:
    found = re.search(pattern, text)
    assert found, f"{where} no longer says {pattern!r}: update this test with it"
    return found


def test_readme_shows_the_real_bank_verdict(tmp_path, capsys):
    """"the two senses separate (same-sense 0.597 > cross-sense 0.587": ``scratchformer compare``'s study of the
    shipped checkpoint at its last layer; the card's verdict and ``bank_study.json`` are that study's too."""
    quoted = _quoted(r"the two senses separate \(same-sense (\d+\.\d+) > cross-sense (\d+\.\d+)",
                     _text(REPO_ROOT / "README.md"), "README")
    out = tmp_path / "compare"
    assert main(["compare", "--no-defaults", "--model", "small", "--no-plots", "--output", str(out)]) == 0
    (study,) = json.loads((out / "compare.json").read_text())["models"]
    same, cross = study["headline"]["same_sense_mean"], study["headline"]["cross_sense_mean"]
    assert study["layer"] == study["num_layers"]  # the last layer, as README says
    assert same > cross, study["verdict"]  # "separate"
    assert (_as_printed(same, quoted[1]), _as_printed(cross, quoted[2])) == (quoted[1], quoted[2])
    card = _quoted(r"\*\*(senses separated: [^*]+)\*\*", _text(CARD / "README.md"), "the model card")
    recorded = json.loads((CARD / "bank_study.json").read_text())
    assert card[1] == recorded["verdict"] == study["verdict"]


@pytest.mark.slow
def test_readme_shows_the_real_word_sense_roc_auc(shared_data, tmp_path, capsys):
    """"word-sense ROC-AUC 0.702 at the last layer, which is also its best layer", "0.656 within a lemma":
    ``scratchformer senses`` on the dev set with the shipped checkpoint alone (about a minute on 2 cores); the card's
    ``scores.json`` records the same last-layer score."""
    readme = _text(REPO_ROOT / "README.md")
    last_quoted = _quoted(r"word-sense ROC-AUC \*\*(\d+\.\d+) at the last layer\*\*, which is also its best layer",
                          readme, "README")[1]
    within_quoted = _quoted(r"\*\*, which is also its best layer \([^)]*\), (\d+\.\d+) within a lemma", readme,
                            "README")[1]
    out = tmp_path / "senses"
    assert main(["senses", "--data", str(shared_data / "wordnet_senses_dev.tsv"), "--model", "small", "--output",
                 str(out)]) == 0
    (report,) = json.loads((out / "senses.json").read_text())
    contextual = [layer for layer in report["layers"] if isinstance(layer["layer"], int) and layer["layer"] >= 1]
    last = contextual[-1]
    assert max(contextual, key=lambda layer: layer["roc_auc"]) is last  # "also its best layer"
    assert _as_printed(last["roc_auc"], last_quoted) == last_quoted
    assert _as_printed(last["roc_auc_within_group"], within_quoted) == within_quoted
    (recorded,) = [result["metrics"]["roc_auc"] for result in json.loads((CARD / "scores.json").read_text())["results"]
                   if result["dataset"] == "wordnet_senses_dev"]
    assert _as_printed(last["roc_auc"], str(recorded)) == str(recorded)


def _kjv_to_web_example():
    path = REPO_ROOT / "examples" / "finetune_kjv_to_web.py"
    spec = importlib.util.spec_from_file_location("finetune_kjv_to_web", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_shows_the_recorded_kjv_to_web_scores(shared_data):
    """README's BLEU / chrF per held-out set: copying the KJV verse is recomputed on every verse of the example's
    sets (as the example scores it, sacrebleu's corpus BLEU and chrF); the fine-tuned model's scores, which take a
    25-minute fine-tune, are held to the record of that run in docs/experiments.md (v3 and v2 tables), as the model
    card records no KJV -> WEB score."""
    import sacrebleu

    quoted = _quoted(r"set A (\S+) / (\S+) against copying's (\S+) / (\S+), B (\S+) / (\S+) against (\S+) / (\S+), "
                     r"and C, [^,]*, (\S+) / (\S+) against (\S+) / (\S+) \(v2: (\S+) / (\S+), (\S+) / (\S+), "
                     r"(\S+) / (\S+)\)", _text(REPO_ROOT / "README.md"), "README").groups()
    readme = {name: {"fine_tuned": quoted[4 * i:4 * i + 2], "copy": quoted[4 * i + 2:4 * i + 4],
                     "v2": quoted[12 + 2 * i:14 + 2 * i]} for i, name in enumerate("ABC")}
    example = _kjv_to_web_example()
    sets = example.held_out_sets(shared_data / "parallel_kjv_web_spa.tsv.gz", example.BOOK_SETS, 0)
    assert list(sets) == list(readme)
    for name, rows in sets.items():
        sources, references = [row["kjv"] for row in rows], [[row["web"] for row in rows]]
        copy = (sacrebleu.corpus_bleu(sources, references).score, sacrebleu.corpus_chrf(sources, references).score)
        shown = readme[name]["copy"]
        assert tuple(_as_printed(value, printed) for value, printed in zip(copy, shown)) == shown, name
    diary = (REPO_ROOT / "docs" / "experiments.md").read_text()
    for version, key in (("v3", "fine_tuned"), ("v2", "v2")):
        section = _quoted(rf"(?s)### From {version}:.*?\n(\|.*?)\n\n", diary, "docs/experiments.md")[1]
        rows = [re.match(r"\| (\w) \| \*\*(\S+) / (\S+)\*\* \| (\S+) / (\S+) \|", line)
                for line in section.splitlines()]
        recorded = {row[1]: {key: row.groups()[1:3], "copy": row.groups()[3:5]} for row in rows if row}
        assert set(recorded) == set("ABC"), section
        for name, scores in readme.items():
            assert recorded[name] == {key: scores[key], "copy": scores["copy"]}, (version, name, recorded[name])
