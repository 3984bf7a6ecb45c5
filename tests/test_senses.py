"""Word-sense evaluation: TSV reading and checking, ROC-AUC, 1-NN accuracy, the CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from test_embeddings import minilm_or_skip, tiny_distilbert

from scratchformer.analysis.extractor import EmbeddingExtractor
from scratchformer.analysis.sense_data import group_examples, read_senses_tsv
from scratchformer.analysis.senses import (
    SenseReport,
    evaluate_senses,
    pair_cosines,
    pairs_within,
    roc_auc,
    run_senses,
    within_group_roc_auc,
)
from scratchformer.errors import DataError

REPO_ROOT = Path(__file__).resolve().parents[1]
HEADER = "lemma\tpos\tsynset\tstart\tend\tsentence\tgloss\n"
# Synthetic rows (not from the WordNet file): bank as river side (1) and institution (2), fish as verb and noun.
SENTENCES = [
    ("bank", "n", "1", "bank", "he sat on the river bank", "side"),
    ("bank", "n", "1", "bank", "the bank of the stream", "side"),
    ("bank", "n", "2", "bank", "she took money to the bank", "institution"),
    ("bank", "n", "2", "bank", "the bank gave her money", "institution"),
    ("bank", "n", "2", "banks", "two of the banks closed", "institution"),
    ("fish", "v", "3", "fish", "we fish on the river", "catch"),
    ("fish", "n", "4", "fish", "the fish is on the plate", "animal"),
    ("write", "v", "5", "write", "write a poem", "compose"),
]
ROWS = [(lemma, pos, synset, s.index(w), s.index(w) + len(w), s, g) for lemma, pos, synset, w, s, g in SENTENCES]


def write_tsv(path, rows=ROWS, header=HEADER):
    path.write_text(header + "".join("\t".join(map(str, row)) + "\n" for row in rows))
    return path


def test_read_and_group(tmp_path):
    examples = read_senses_tsv(write_tsv(tmp_path / "s.tsv"))
    assert len(examples) == 8 and examples[0].word == "bank" and examples[4].word == "banks"
    assert examples[0].line == 2
    assert [len(g) for g in group_examples(examples)] == [5, 2]
    assert [len(g) for g in group_examples(examples, "lemma_pos")] == [5]  # fish n/v: two groups of one
    with pytest.raises(ValueError, match="group_by"):
        group_examples(examples, "synset")


@pytest.mark.parametrize(
    "header, rows, message",
    [
        ("lemma\tpos\tsynset\tsentence\tgloss\n", [("a", "n", "1", "a b", "g")], r"missing column\(s\) \['start', 'end'\]"),
        (HEADER, [("bank", "n", "1", 30, 34, "the bank", "g")], r":2: span 30-34 does not fit"),
        (HEADER, [("bank", "n", "1", 5, 8, "the bank", "g")], r"starts or ends inside a word.*off by one"),
        # the words' own rule (analysis.words): a combining accent and "_" belong to the word before them
        (HEADER, [("cafe", "n", "1", 4, 8, "the cafe\u0301 is open", "g")], r"starts or ends inside a word"),
        (HEADER, [("bank", "n", "1", 4, 8, "the bank_teller", "g")], r"starts or ends inside a word"),
        (HEADER, [("bank", "n", "1", 3, 8, "the bank", "g")], r"starts or ends with whitespace"),
        (HEADER, [("bank", "n", "1", "x", 8, "the bank", "g")], r"must be integers"),
        (HEADER, [("bank", "n", "1", 4, 8)], r"5 field\(s\) where the header has 7"),
        ("", [], "the file is empty"),
        (HEADER, [], "no data rows"),
    ],
)
def test_bad_tsv(tmp_path, header, rows, message):
    with pytest.raises(ValueError, match=message):
        read_senses_tsv(write_tsv(tmp_path / "bad.tsv", rows, header))


def test_a_bad_span_in_a_long_sentence_is_said_with_the_sentence_cut(tmp_path):
    long_sentence = "the bank " * 5_000
    path = write_tsv(tmp_path / "long.tsv", [("bank", "n", "1", 50_000, 50_004, long_sentence, "g")], HEADER)
    with pytest.raises(DataError, match=r"span 50000-50004 does not fit the 45000-character sentence "
                                        r"'the bank the bank .*'\.\.\. \(45,000 characters\)$") as caught:
        read_senses_tsv(path)
    assert len(str(caught.value)) < 300


def test_missing_file(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        read_senses_tsv(tmp_path / "nope.tsv")


def test_non_utf8_file_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.tsv"
    first_row = "\t".join(map(str, ROWS[0])) + "\n"
    path.write_bytes((HEADER + first_row).encode() + "café\tn\t1\t0\t4\tcafé\tg\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin1.tsv:3: not UTF-8 text \(byte 0xe9 .*save the file as UTF-8"):
        read_senses_tsv(path)


def test_a_gzipped_tsv_and_windows_line_ends_read_as_the_plain_file(tmp_path):
    """The sense TSV is read as ``geometry`` reads its data (one line reader): ``.gz`` is decompressed, ``\\r\\n``
    ends no cell, and a truncated ``.gz`` is a ``DataError`` naming the file."""
    import gzip

    plain = read_senses_tsv(write_tsv(tmp_path / "s.tsv"))
    text = (tmp_path / "s.tsv").read_text(encoding="utf-8")
    (tmp_path / "s.tsv.gz").write_bytes(gzip.compress(text.encode()))
    (tmp_path / "crlf.tsv").write_bytes(text.replace("\n", "\r\n").encode())
    assert read_senses_tsv(tmp_path / "s.tsv.gz") == read_senses_tsv(tmp_path / "crlf.tsv") == plain
    (tmp_path / "cut.tsv.gz").write_bytes(gzip.compress(text.encode())[:40])
    with pytest.raises(DataError, match=r"cut.tsv.gz: cannot read the file"):
        read_senses_tsv(tmp_path / "cut.tsv.gz")


def test_byte_order_mark_and_empty_cells(tmp_path):
    path = tmp_path / "bom.tsv"
    path.write_text("\ufeff" + HEADER + "\t".join(map(str, ROWS[0])) + "\n", encoding="utf-8")
    assert read_senses_tsv(path)[0].lemma == "bank"
    with pytest.raises(DataError, match=r":2: the synset column is empty"):
        read_senses_tsv(write_tsv(tmp_path / "s.tsv", [("bank", "n", " ", 4, 8, "the bank", "g")]))


def test_pairs_of_one_kind_only_are_refused(tmp_path):
    same_sense = [r for r in ROWS if r[2] == "1"]  # two occurrences of one sense: no different-sense pair
    with pytest.raises(DataError, match=r"1 same-sense and 0 different-sense pairs"):
        run_senses(write_tsv(tmp_path / "s.tsv", same_sense), ["does/not/exist"], output=tmp_path / "out")


def test_roc_auc_matches_sklearn_with_ties():
    metrics = pytest.importorskip("sklearn.metrics")
    import numpy as np

    rng = np.random.default_rng(0)
    labels = rng.random(300) < 0.3
    scores = np.round(rng.random(300) + 0.3 * labels, 1)  # many ties
    assert roc_auc(labels, scores) == pytest.approx(metrics.roc_auc_score(labels, scores), abs=1e-12)
    assert roc_auc([1, 0, 1, 0], [1.0, 1.0, 1.0, 1.0]) == 0.5
    with pytest.raises(ValueError, match="both classes"):
        roc_auc([1, 1], [0.2, 0.3])


def test_evaluate_on_tiny_distilbert(tmp_path):
    model, tokenizer = tiny_distilbert()
    examples = read_senses_tsv(write_tsv(tmp_path / "s.tsv"))
    report = evaluate_senses(EmbeddingExtractor(model, tokenizer), examples)
    assert (report.groups, report.examples, report.pairs) == (2, 7, 11)
    assert report.same_sense_pairs == 1 + 3 and report.different_sense_pairs == 7
    # chance of 1-NN: bank rows 1/4,1/4,2/4,2/4,2/4; fish rows 0, 0
    assert report.nn_chance == pytest.approx((0.25 * 2 + 0.5 * 3) / 7)
    assert [s.layer for s in report.layers] == ["learned", 0, 1, 2]
    assert all(0.0 <= s.roc_auc <= 1.0 and 0.0 <= s.nn_accuracy <= 1.0 for s in report.layers)
    # identical tokens -> learned cosine exactly 1.0: the 6 pairs among the four "bank" rows, and fish/fish
    assert report.learned_identical_token_pairs == 6 + 1
    assert "1-NN chance level" in report.table()
    assert re.fullmatch(r"context separates senses: (yes|no) \(last layer ROC-AUC \d\.\d{3} (>|<=) embedding output "
                        r"\d\.\d{3}; best layer \d: \d\.\d{3}; chance 0\.5\)", report.verdict), report.verdict
    assert f"verdict: {report.verdict}" in report.table() and report.as_dict()["verdict"] == report.verdict


def test_learned_score_is_one_half_when_tokens_are_identical(tmp_path):
    rows = [r for r in ROWS if r[5][r[3] : r[4]] == "bank"]  # only the exact word "bank"
    model, tokenizer = tiny_distilbert()
    report = evaluate_senses(EmbeddingExtractor(model, tokenizer), read_senses_tsv(write_tsv(tmp_path / "s.tsv", rows)))
    assert report.learned_identical_token_pairs == report.pairs == 6
    assert report.layers[0].roc_auc == 0.5


class FixedVectors:
    """A stand-in extractor whose word vectors are given: one per occurrence, the same at every layer; its sentence
    vectors are ``sentence_vectors`` when given, else the word vectors."""

    model_name, num_layers = "fixed", 1

    def __init__(self, vectors, sentence_vectors=None):
        self.vectors = vectors
        self.sentence_vectors = vectors if sentence_vectors is None else sentence_vectors

    def word_embeddings(self, words, layers, pooling):
        assert len(words) == len(self.vectors)
        return [[SimpleNamespace(vector=v, location=SimpleNamespace(token_ids=[i])) for _ in layers]
                for i, v in enumerate(self.vectors)]

    def sentence_embeddings(self, sentences, pooling, layer, exclude_special_tokens):
        assert len(sentences) == len(self.sentence_vectors) and (pooling, layer) == ("mean", -1)
        assert exclude_special_tokens  # as a word's vector leaves them out
        return SimpleNamespace(vectors=torch.stack(self.sentence_vectors))


def test_centred_score_ignores_a_direction_all_vectors_share(tmp_path):
    """Adding one vector to every word vector (anisotropy) changes the plain cosines but not the centred ROC-AUC."""
    examples = read_senses_tsv(write_tsv(tmp_path / "s.tsv"))
    used = sorted(i for group in group_examples(examples) for i in group)
    generator = torch.Generator().manual_seed(0)
    sense_direction = {synset: torch.randn(16, generator=generator) for synset in "1234"}
    vectors = [sense_direction[examples[i].synset] + 0.8 * torch.randn(16, generator=generator) for i in used]
    shared = 30.0 * torch.randn(16, generator=generator)
    plain = evaluate_senses(FixedVectors(vectors), examples).last_layer
    shifted = evaluate_senses(FixedVectors([v + shared for v in vectors]), examples).last_layer
    assert shifted.roc_auc_centred == pytest.approx(plain.roc_auc_centred, abs=1e-9)
    assert shifted.roc_auc != plain.roc_auc  # the shared direction squeezes every plain cosine towards 1
    assert 0.0 <= plain.roc_auc_centred <= 1.0


def test_within_group_score_sees_sense_separation_only():
    """Two lemmas: all pairs of the first are close (mostly same sense), all of the second far (mostly different).
    The global ROC-AUC rewards that; inside each lemma every cosine ties, so the within-group score is chance. A
    group with pairs of one kind only has no ROC-AUC and is left out of the mean."""
    same = np.array([True, True, False, False, False, True, True])
    cosines = np.array([0.9, 0.9, 0.9, 0.1, 0.1, 0.1, 0.5])
    groups = np.array([0, 0, 0, 1, 1, 1, 2])
    assert roc_auc(same, cosines) > 0.6
    assert within_group_roc_auc(same, cosines, groups) == pytest.approx(0.5, abs=1e-12)
    separated = np.array([0.9, 0.8, 0.1, 0.2, 0.3, 0.4, 0.5])  # inside each group, same-sense pairs closer
    assert within_group_roc_auc(same, separated, groups) == pytest.approx(1.0, abs=1e-12)
    assert np.isnan(within_group_roc_auc(same[:2], cosines[:2], groups[:2]))


def test_sentence_vector_alone_is_scored_apart_from_the_word(tmp_path):
    """Word vectors that carry no sense (one random vector per lemma) score chance inside each lemma; sentence
    vectors that follow the sense score 1.0. The report keeps the two apart and says so in its table."""
    examples = read_senses_tsv(write_tsv(tmp_path / "s.tsv"))
    used = sorted(i for group in group_examples(examples) for i in group)
    generator = torch.Generator().manual_seed(0)
    per_lemma = {ex.lemma: torch.randn(16, generator=generator) for ex in examples}
    per_sense = {ex.synset: torch.randn(16, generator=generator) for ex in examples}
    report = evaluate_senses(FixedVectors([per_lemma[examples[i].lemma] for i in used],
                                          [per_sense[examples[i].synset] for i in used]), examples)
    assert report.last_layer.roc_auc_within_group == pytest.approx(0.5, abs=1e-12)
    assert report.sentence_roc_auc == pytest.approx(1.0, abs=1e-12)
    assert report.sentence_roc_auc_within_group == pytest.approx(1.0, abs=1e-12)
    assert "sentence vector alone (last layer, mean over the whole sentence" in report.table()
    old = report.as_dict()
    del old["sentence_roc_auc"], old["sentence_roc_auc_within_group"]
    loaded = SenseReport.from_dict(old)  # a senses.json written before the sentence score existed
    assert np.isnan(loaded.sentence_roc_auc) and "sentence vector alone" not in loaded.table()
    from scratchformer.analysis.plots import plot_senses

    assert plot_senses([report, loaded], tmp_path / "both.png").stat().st_size > 1000  # one without the score plots too


def test_sentence_vector_is_the_mean_over_the_sentence_s_own_tokens(tmp_path):
    """On a real extractor the sentence score is that of the mean of the last layer over each sentence's tokens,
    special tokens left out (1e-9: the same float64 cosines, ranked)."""
    model, tokenizer = tiny_distilbert()
    extractor = EmbeddingExtractor(model, tokenizer)
    examples = read_senses_tsv(write_tsv(tmp_path / "s.tsv"))
    report = evaluate_senses(extractor, examples)
    used = sorted(i for group in group_examples(examples) for i in group)
    groups = [[used.index(i) for i in group] for group in group_examples(examples)]
    by_hand = []
    for i in used:
        encoded = tokenizer(examples[i].sentence, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**encoded).last_hidden_state[0, 1:-1]  # [CLS] ... [SEP]
        by_hand.append(hidden.mean(0).double())
    pair_a, pair_b = pairs_within(groups)
    same = np.array([examples[used[a]].synset == examples[used[b]].synset for a, b in zip(pair_a, pair_b)])
    cosines = pair_cosines(torch.stack(by_hand), pair_a, pair_b)
    assert report.sentence_roc_auc == pytest.approx(roc_auc(same, cosines), abs=1e-9)
    assert 0.0 <= report.sentence_roc_auc_within_group <= 1.0


def test_reports_written_before_the_within_group_score_still_load(tmp_path):
    examples = read_senses_tsv(write_tsv(tmp_path / "s.tsv"))
    used = sorted(i for group in group_examples(examples) for i in group)
    generator = torch.Generator().manual_seed(0)
    report = evaluate_senses(FixedVectors([torch.randn(16, generator=generator) for _ in used]), examples)
    assert all(0.0 <= layer.roc_auc_within_group <= 1.0 for layer in report.layers)
    assert "within" in report.table()
    old = report.as_dict()
    for layer in old["layers"]:
        del layer["roc_auc_within_group"]
    assert np.isnan(SenseReport.from_dict(old).last_layer.roc_auc_within_group)


def test_cli_writes_json_and_plot(tmp_path, capsys):
    from scratchformer.cli import main

    model, tokenizer = tiny_distilbert()
    model.save_pretrained(tmp_path / "distil")
    tokenizer.save_pretrained(tmp_path / "distil")
    data = write_tsv(tmp_path / "s.tsv")
    assert main(["senses", "--data", str(data), "--model", str(tmp_path / "distil"), "--output",
                 str(tmp_path / "out")]) == 0
    payload = json.loads((tmp_path / "out" / "senses.json").read_text())
    assert payload[0]["pairs"] == 11 and payload[0]["layers"][0]["layer"] == "learned"
    assert (tmp_path / "out" / "senses_auc_per_layer.png").stat().st_size > 1000
    assert "ROC-AUC" in capsys.readouterr().out


def test_a_word_past_a_model_s_positions_is_found_before_any_model_is_scored(tmp_path, monkeypatch):
    """The tiny model reads 64 tokens: a row whose word lies past them is named by its line before the first forward
    pass, not after the models before it were scored; a long row of a group that is not scored is not refused."""
    import scratchformer.analysis.senses as senses

    model, tokenizer = tiny_distilbert()
    model.save_pretrained(tmp_path / "distil")
    tokenizer.save_pretrained(tmp_path / "distil")
    far = "word " * 100 + "the river bank"
    rows = [*ROWS[:3], ("bank", "n", "2", far.index("bank"), far.index("bank") + 4, far, "side"), *ROWS[3:]]
    scored = []
    monkeypatch.setattr(senses, "evaluate_senses", lambda *args, **kwargs: scored.append(args))
    with pytest.raises(ValueError, match=r"s\.tsv:5 \(.*distil\): cannot embed 'bank' at characters 510-514 of "
                                         r"'word word .*'\.\.\. \(514 characters\): it lies past the model's "
                                         r"maximum of 64 tokens"):
        run_senses(write_tsv(tmp_path / "s.tsv", rows), [str(tmp_path / "distil")] * 2, output=tmp_path / "out")
    assert scored == []
    monkeypatch.undo()
    alone = ("write", "v", "5", far.index("bank"), far.index("bank") + 4, far, "a lemma of one row: never scored")
    (report,) = run_senses(write_tsv(tmp_path / "t.tsv", [*ROWS[:-1], alone]), [str(tmp_path / "distil")],
                           output=tmp_path / "out", quiet=True)
    assert report.pairs == 11


def test_cli_bad_data_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="missing column"):
        run_senses(write_tsv(tmp_path / "bad.tsv", [("a",)], "lemma\n"), ["unused"])


def test_minilm_on_dev_subset(shared_data):
    """A quick check on part of the dev file; the full run is documented in docs/embeddings.md."""
    model, tokenizer = minilm_or_skip()
    examples = read_senses_tsv(shared_data / "wordnet_senses_dev.tsv")
    keep = {i for group in group_examples(examples)[:20] for i in group}  # 136 occurrences, 461 pairs
    subset = [ex for i, ex in enumerate(examples) if i in keep]
    report = evaluate_senses(EmbeddingExtractor(model, tokenizer, batch_size=64), subset)
    assert report.pairs > 400
    assert report.last_layer.roc_auc > max(0.6, report.layers[1].roc_auc)  # contextual beats embedding-layer output
    assert report.last_layer.nn_accuracy > report.nn_chance


# ---------------------------------------------------------------------------------------------------------------
# Mistakes end as one line on stderr and exit status 2, found before any model loads
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, options, message",
    [
        ("missing.tsv", [], r"word-sense data '.*missing.tsv' not found"),
        ("columns", [], r"missing column\(s\) \['start', 'end'\]"),
        ("span", [], r"bad.tsv:2: span 30-34 does not fit"),
        ("integer", [], r"bad.tsv:2: start='x' and end='8' must be integers"),
        ("latin1", [], r"bad.tsv:2: not UTF-8 text"),
        ("empty", [], r"the file is empty"),
        ("good", ["--max-groups", "0"], r"--max-groups 0 must be a positive integer"),
        ("good", ["--output", "{file}"], r"--output .* is a file, not a folder"),
        ("good", [], r"no model at 'does/not/exist'"),
    ],
)
def test_cli_mistakes_end_with_one_error_line(tmp_path, capsys, data, options, message):
    from scratchformer.cli import main

    bad = tmp_path / "bad.tsv"
    contents = {
        "columns": ("lemma\tpos\tsynset\tsentence\tgloss\n", [("a", "n", "1", "a b", "g")]),
        "span": (HEADER, [("bank", "n", "1", 30, 34, "the bank", "g")]),
        "integer": (HEADER, [("bank", "n", "1", "x", 8, "the bank", "g")]),
        "empty": ("", []),
        "good": (HEADER, ROWS),
    }
    if data in contents:
        write_tsv(bad, contents[data][1], contents[data][0])
    elif data == "latin1":
        bad.write_bytes(HEADER.encode() + "café\tn\t1\t0\t4\tcafé\tg\n".encode("latin-1"))
    else:
        bad = tmp_path / data
    options = [option.format(file=bad) for option in options]
    output = [] if "--output" in options else ["--output", str(tmp_path / "out")]
    model = "does/not/exist" if "no model" in message else "small"  # names are found first, before the data
    assert main(["senses", "--data", str(bad), "--model", model, *options, *output]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("scratchformer senses: error: "), err
    assert re.search(message, err), err


def test_cli_error_in_a_subprocess_has_no_traceback(tmp_path):
    """The installed entry point's behaviour: exit status 2 and one line, whatever the Python warnings say."""
    bad = tmp_path / "latin1.tsv"
    bad.write_bytes(HEADER.encode() + "café\tn\t1\t0\t4\tcafé\tg\n".encode("latin-1"))
    done = subprocess.run([sys.executable, "-m", "scratchformer.cli", "senses", "--data", str(bad), "--output",
                           str(tmp_path / "out")], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"scratchformer senses: error: {bad}:2: not UTF-8 text (byte 0xe9 at column 4); save the file as UTF-8"]


def test_pairs_within_keeps_every_pair_of_small_groups_and_samples_big_ones():
    import numpy as np

    from scratchformer.analysis.senses import pairs_within

    a, b = pairs_within([[0, 1, 2], [3, 4]])
    assert list(zip(a.tolist(), b.tolist())) == [(0, 1), (0, 2), (1, 2), (3, 4)]
    big = list(range(10, 510))  # 124,750 pairs
    a, b = pairs_within([big, [0, 1]], max_pairs_per_group=1000)
    assert len(a) == 1001
    pairs = set(zip(a[:-1].tolist(), b[:-1].tolist()))
    assert len(pairs) == 1000 and all(10 <= x < y < 510 for x, y in pairs)
    assert np.array_equal(pairs_within([big], max_pairs_per_group=1000)[0], pairs_within([big], 1000)[0])  # seeded


def test_blocked_pair_cosines_and_nearest_neighbours_equal_the_direct_computation():
    import numpy as np
    import torch

    from scratchformer.analysis import senses as s

    vectors = torch.randn(300, 16, dtype=torch.float64)
    a, b = s.pairs_within([list(range(300))])
    unit = torch.nn.functional.normalize(vectors, dim=-1)
    direct = (unit[torch.from_numpy(a)] * unit[torch.from_numpy(b)]).sum(-1).numpy().round(10)
    assert np.array_equal(s.pair_cosines(vectors, a, b, block=7), direct)  # tolerance 0: same arithmetic
    labels = [i % 3 for i in range(300)]
    full = s.nn_accuracy(unit, [list(range(300))], labels)
    original, s.NN_BLOCK_ELEMENTS = s.NN_BLOCK_ELEMENTS, 1000  # 3 query rows per block
    try:
        assert s.nn_accuracy(unit, [list(range(300))], labels) == full
    finally:
        s.NN_BLOCK_ELEMENTS = original
    assert s.nn_chance([[0, 1, 2, 3]], ["x", "x", "y", "x"]) == [2 / 3, 2 / 3, 0.0, 2 / 3]


def test_a_lemma_past_the_occurrence_cap_is_scored_on_a_stated_seeded_sample(tmp_path, monkeypatch):
    """50,000 occurrences of one lemma ran past 7 minutes (a forward pass each, and a 1-NN search of every one
    against every other): past MAX_OCCURRENCES_PER_GROUP (lowered to 40 here, to keep the test small) a lemma is
    scored on a seeded sample of that many, which only those occurrences' sentences are run for, and the report
    says so in its table and its JSON."""
    from scratchformer.analysis import senses

    rows = [("bank", "n", str(1 + i % 2), 0, 4, f"bank number {i} of {'the river' if i % 2 else 'money'}", "g")
            for i in range(300)] + ROWS[5:7]  # 300 "bank" rows, and the two "fish" rows
    examples = read_senses_tsv(write_tsv(tmp_path / "big.tsv", rows))
    model, tokenizer = tiny_distilbert()
    extractor = EmbeddingExtractor(model, tokenizer)
    read = []
    word_embeddings = extractor.word_embeddings
    monkeypatch.setattr(extractor, "word_embeddings", lambda words, **kw: read.extend(words) or word_embeddings(words, **kw))
    monkeypatch.setattr(senses, "MAX_OCCURRENCES_PER_GROUP", 40)
    report = evaluate_senses(extractor, examples)
    assert (report.examples, report.groups, report.sampled_groups, report.max_occurrences_per_group) == (42, 2, 1, 40)
    assert len(read) == 42 and report.pairs == 40 * 39 // 2 + 1
    assert "1 group(s) with more than 40 occurrences: scored on a random sample of 40 of them (seeded)" in report.table()
    assert SenseReport.from_dict(json.loads(json.dumps(report.as_dict()))) == report
    again = evaluate_senses(EmbeddingExtractor(model, tokenizer), examples)
    assert again.layers == report.layers  # the sample is seeded: the same scores


def test_sample_members_keeps_small_groups_and_samples_big_ones_in_order():
    from scratchformer.analysis.senses import sample_members

    big = list(range(100, 400))
    small, sampled = sample_members([[1, 2, 3], big], most=50)
    assert small == [1, 2, 3] and len(set(sampled)) == 50 and sampled == sorted(sampled) and set(sampled) <= set(big)
    assert sample_members([big], most=50) == [sampled]  # seeded
    assert sample_members([big], most=50, seed=1) != [sampled]
