"""The from-scratch BPE (scratchformer.bpe): the textbook example, naive == incremental, encoding, bad input."""

from __future__ import annotations

import importlib.util
import json
import random
import time
from pathlib import Path

import numpy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizer_fixtures import reference_bpe, unicode_text, unicode_text_without_specials

from scratchformer.tokenizer import bpe

REPO = Path(__file__).resolve().parents[1]


# --- the worked example (Sennrich et al. 2016) ------------------------------------------------------------------


@pytest.mark.parametrize("learn", [bpe.learn_merges_naive, bpe.learn_merges])
def test_worked_example_exactly(learn):
    corpus = ["low lowest newer wider"]
    word_counts = bpe.count_words(corpus, bpe.WHITESPACE)
    vocab = {bpe.word_to_symbols(w, bpe.WHITESPACE): c for w, c in word_counts.items()}
    merges = learn(vocab, 5)
    assert merges == [("l", "o"), ("lo", "w"), ("e", "r"), ("er", "</w>"), ("low", "</w>")]

    tokens = [*bpe.SPECIAL_TOKENS, *bpe.base_alphabet(word_counts, bpe.WHITESPACE), *(a + b for a, b in merges)]
    model = bpe.BPE(tokens, merges, bpe.WHITESPACE)
    segmentation = [" ".join(model.bpe(word)) for word in "low lowest newer wider".split()]
    assert segmentation == ["low</w>", "low e s t </w>", "n e w er</w>", "w i d er</w>"]


def test_train_gives_the_worked_example_vocabulary():
    model = bpe.train(["low lowest newer wider"], vocab_size=5 + 11 + 5, scheme=bpe.WHITESPACE, min_frequency=1)
    assert model.merges[-1] == ("low", "</w>")
    assert list(model.vocab)[:5] == list(bpe.SPECIAL_TOKENS)
    assert len(model) == 21
    assert model.tokenize("lowest") == ["low", "e", "s", "t", "</w>"]


# --- incremental == naive ---------------------------------------------------------------------------------------

small_corpus = st.lists(st.text(alphabet="abc d\n", max_size=30), min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(corpus=small_corpus, num_merges=st.integers(0, 40), min_frequency=st.integers(1, 3),
       scheme=st.sampled_from(bpe.SCHEMES))
def test_incremental_merges_equal_naive_merges(corpus, num_merges, min_frequency, scheme):
    """Small alphabets give many ties and repeated symbols (``aaaa``): the hard cases for the tie-break."""
    word_counts = bpe.count_words(corpus, scheme)
    vocab = {bpe.word_to_symbols(w, scheme): c for w, c in word_counts.items()}
    assert bpe.learn_merges(vocab, num_merges, min_frequency) == bpe.learn_merges_naive(vocab, num_merges, min_frequency)


@pytest.mark.parametrize("seed", range(3))
def test_incremental_equals_naive_on_larger_random_corpora(seed):
    rng = random.Random(seed)
    syllables = ["ka", "ri", "to", "an", "e", "s", "lo", "w", "er", "é", "東"]
    corpus = [" ".join("".join(rng.choices(syllables, k=rng.randint(1, 5))) for _ in range(rng.randint(1, 12)))
              for _ in range(300)]
    word_counts = bpe.count_words(corpus)
    vocab = {bpe.word_to_symbols(w): c for w, c in word_counts.items()}
    naive = bpe.learn_merges_naive(vocab, 150)
    assert len(naive) > 50  # the comparison is not vacuous
    assert bpe.learn_merges(vocab, 150) == naive


def test_training_stops_when_no_pair_is_frequent_enough():
    model = bpe.train(["ab ab cd"], vocab_size=1000, min_frequency=2)
    assert model.merges == [("a", "b")]
    assert len(model) == 5 + 256 + 1


# --- encoding ---------------------------------------------------------------------------------------------------


def test_merges_apply_by_rank_not_by_position():
    tokens = [*bpe.SPECIAL_TOKENS, *bpe.BYTE_LEVEL_ALPHABET, "bc", "abc"]
    model = bpe.BPE(tokens, [("b", "c"), ("a", "bc")])
    assert model.bpe("abcbc") == ("abc", "bc")
    # with the lower-ranked pair first in the word, the leftmost occurrence of the best pair still wins
    model = bpe.BPE([*bpe.SPECIAL_TOKENS, *bpe.BYTE_LEVEL_ALPHABET, "ab", "bc"], [("b", "c"), ("a", "b")])
    assert model.bpe("abc") == ("a", "bc")
    assert model.bpe("aaa") == ("a", "a", "a")


def test_bytes_to_unicode_is_a_printable_bijection():
    mapping = bpe.bytes_to_unicode()
    assert sorted(mapping) == list(range(256))
    assert len(set(mapping.values())) == 256
    assert all(c.isprintable() and not c.isspace() for c in mapping.values())
    assert mapping[ord(" ")] == "Ġ" and mapping[ord("\n")] == "Ċ" and mapping[ord("a")] == "a"


def test_byte_level_pretokenizer_keeps_the_space_with_the_word():
    words = bpe.pretokenize("Hello world, I'm here  now 42", bpe.BYTE_LEVEL)
    assert words == ["Hello", "Ġworld", ",", "ĠI", "'m", "Ġhere", "Ġ", "Ġnow", "Ġ42"]


def test_word_cache_is_used_and_gives_the_same_result():
    model = reference_bpe()
    model.cache.clear()
    first = model.tokenize("walking walking")
    assert "Ġwalking" in model.cache or "walking" in model.cache
    assert model.tokenize("walking walking") == first


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(text=unicode_text_without_specials)
def test_byte_level_round_trip_is_lossless(text):
    model = reference_bpe(bpe.BYTE_LEVEL)
    ids = model.encode(text)
    assert bpe.UNK not in model.tokenize(text)
    assert model.decode(ids, skip_special_tokens=True) == text


@settings(max_examples=100, deadline=None)
@given(text=unicode_text)
def test_special_token_strings_become_special_ids(text):
    model = reference_bpe(bpe.BYTE_LEVEL)
    ids = model.encode(text, add_special_tokens=False)
    assert ids.count(model.vocab["<mask>"]) == text.count("<mask>")


def test_mask_swallows_the_space_before_it():
    model = reference_bpe(bpe.BYTE_LEVEL)
    assert model.tokenize("the <mask> river") == [*model.tokenize("the"), "<mask>", *model.tokenize(" river")]
    assert model.decode(model.encode("the <mask> river")) == "the<mask> river</s>"


def test_whitespace_scheme_marks_word_ends_and_unknown_characters():
    model = reference_bpe(bpe.WHITESPACE)
    tokens = model.tokenize("lowest ☃x")
    assert tokens[-1] == "</w>" or tokens[-1].endswith("</w>")
    assert bpe.UNK in tokens  # '☃' was never seen in training
    assert model.decode(model.encode("the   river\nbank"), skip_special_tokens=True) == "the river bank"


# --- bad input --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad, error, message", [
    (None, TypeError, "must be a str, got NoneType"),
    (3, TypeError, "must be a str, got int"),
    (b"bytes", TypeError, "must be a str, got bytes"),
    ("ok \ud800 bad", ValueError, "lone surrogate '\\\\ud800' at index 3"),
])
def test_encode_rejects_bad_input_clearly(bad, error, message):
    with pytest.raises(error, match=message):
        reference_bpe().encode(bad)


def test_empty_string_encodes_to_end_of_sequence_only():
    model = reference_bpe()
    assert model.encode("") == [model.vocab["</s>"]]
    assert model.encode("", add_special_tokens=False) == []
    assert model.decode([]) == ""


def test_a_long_single_line_encodes_in_about_linear_time():
    """A line without a single space is one word of as many symbols; the heap keeps its merges O(n log n), where
    merging by rescanning the word is O(n^2). 4x the symbols may take at most 10x the CPU time (n log n: about 4.5x,
    quadratic: 16x); the least of 3 runs each, as CPU time of this process, so that other processes do not count."""
    model = reference_bpe()
    rng = random.Random(0)
    small, large = ("".join(rng.choices("abcdefghij", k=n)) for n in (500_000, 2_000_000))

    def seconds(word: str) -> float:
        times = []
        for _ in range(3):
            start = time.process_time()
            tokens = model.tokenize(word)
            times.append(time.process_time() - start)
        assert "".join(tokens) == word and len(tokens) < len(word)
        return min(times)

    small_s, large_s = seconds(small), seconds(large)
    assert large_s < 10 * small_s, f"{len(large):,} symbols took {large_s:.2f}s, {len(small):,} took {small_s:.2f}s"


@pytest.mark.parametrize("texts, message", [
    ([], "the training corpus is empty"),
    (["", "   ", "\n\t"], "the training corpus is empty"),
])
def test_training_on_an_empty_corpus_raises(texts, message):
    with pytest.raises(ValueError, match=message):
        bpe.train(texts, 1000)


def test_vocab_smaller_than_alphabet_plus_specials_raises():
    with pytest.raises(ValueError, match=r"smaller than the 5 special tokens plus the 256 symbols.*at least 261"):
        bpe.train(["hello world"], 260)
    with pytest.raises(ValueError, match=r"plus the 8 symbols of the whitespace base alphabet; ask for at least 13"):
        bpe.train(["hello world"], 12, scheme=bpe.WHITESPACE)  # </w> d e h l o r w


def test_bad_training_arguments_raise():
    with pytest.raises(ValueError, match="unknown pre-tokenization scheme 'bytes'"):
        bpe.train(["a"], 300, scheme="bytes")
    with pytest.raises(TypeError, match="'<' not supported between instances of 'str' and 'int'"):  # Python's
        bpe.train(["a"], "300")
    with pytest.raises(TypeError, match=r"text #1 must be a str, got NoneType"):
        bpe.train(["a", None], 300)


@pytest.mark.parametrize("texts", ["the bank by the river", b"the bank by the river"])
def test_one_string_is_refused_as_a_corpus_by_both_trainers(texts):
    """A ``str`` is an iterable of characters: trained on, each character would be a text of its own."""
    from scratchformer.tokenizer.training import train_fast_tokenizer

    with pytest.raises(TypeError, match=r"texts must be an iterable of strings \(e.g. a list of lines\), not one"):
        bpe.train(texts, 300)
    with pytest.raises(TypeError, match=r"texts must be an iterable of strings"):
        train_fast_tokenizer(texts, 300)


@pytest.mark.parametrize("ids", [[-1], [10**6], [5, 1.5], "abc", [None]])
def test_reference_decode_refuses_what_is_not_a_token_id(ids):
    """As the fast tokenizer's ``decode``: one ``ValueError`` naming the ids, not a bare ``KeyError``."""
    model = reference_bpe()
    with pytest.raises(ValueError, match=r"decode got .* which are not token ids of this tokenizer"):
        model.decode(ids)
    assert model.decode(numpy.array(model.encode("the bank"))) == model.decode(model.encode("the bank"))


def test_bpe_rejects_inconsistent_vocabularies():
    with pytest.raises(ValueError, match="'<pad>' at id 0"):
        bpe.BPE(["a", *bpe.SPECIAL_TOKENS], [])
    with pytest.raises(ValueError, match="not in the vocabulary"):
        bpe.BPE([*bpe.SPECIAL_TOKENS, "a", "b"], [("a", "b")])


# --- benchmark smoke test ---------------------------------------------------------------------------------------


def _benchmark_module():
    spec = importlib.util.spec_from_file_location("bpe_speed", REPO / "benchmarks" / "bpe_speed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_quick_mode_runs_and_merges_agree(tmp_path):
    """Uses generated text (no shared data needed); the >= 20x claim is for the full run, see BPE_SPEED.md."""
    bench = _benchmark_module()
    out_json, out_md = tmp_path / "speed.json", tmp_path / "SPEED.md"
    rc = bench.main(["--quick", "--data", str(tmp_path / "absent.txt"), "--json", str(out_json), "--md", str(out_md)])
    assert rc == 0
    result = json.loads(out_json.read_text())
    assert result["identical_merges"] is True
    assert result["merges"] == 100
    assert result["speedup"] > 0
    assert "speed-up" in out_md.read_text()


@given(st.text(alphabet="ab \n", max_size=400), st.integers(min_value=1, max_value=30))
def test_training_pieces_cut_only_long_words_and_lose_nothing(text, max_length):
    pieces = bpe.training_pieces(text, max_length)
    assert "".join(pieces) == text
    for piece in pieces:
        assert all(len(word) <= max_length for word in piece.split())
    if all(len(word) <= max_length for word in text.split()):
        assert pieces == [text]


def test_both_trainers_train_on_the_cut_pieces():
    """A line of 300,000 letters is cut into MAX_TRAINING_WORD-letter pieces for training by both trainers, so that
    training time stays linear in the line (benchmarks/tokenizer_long_lines.py times it): each trainer learns from
    the line exactly what it learns from its pieces."""
    from scratchformer.tokenizer.training import bpe_from_tokenizer, train_fast_tokenizer

    rng = random.Random(0)
    texts = ["".join(rng.choices("abcdefgh", k=300_000)), "the bank of the river", "a bank holds money"]
    pieces = [piece for text in texts for piece in bpe.training_pieces(text)]
    assert len(pieces) > 3000 and max(map(len, pieces)) == bpe.MAX_TRAINING_WORD
    assert bpe.train(texts, 320).merges == bpe.train(pieces, 320).merges
    fast = bpe_from_tokenizer(train_fast_tokenizer(texts, 320))
    assert fast.merges == bpe_from_tokenizer(train_fast_tokenizer(pieces, 320)).merges
    assert "".join(fast.tokenize(texts[0])) == texts[0]  # encoding is not cut
