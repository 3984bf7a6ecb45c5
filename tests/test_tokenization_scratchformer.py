"""ScratchformerTokenizer (fast, tokenizer.json) and its parity with the from-scratch BPE in scratchformer.bpe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from tokenizer_fixtures import (
    fast_from_reference,
    reference_bpe,
    sentences,
    shared_corpus_lines,
    unicode_text,
    unicode_text_without_specials,
)
from transformers import AutoTokenizer

import scratchformer
from scratchformer import ScratchformerConfig, ScratchformerTokenizer
from scratchformer.tokenizer import bpe
from scratchformer.tokenizer import training as tt


@pytest.fixture(scope="module")
def tok() -> ScratchformerTokenizer:
    return fast_from_reference(bpe.BYTE_LEVEL)


# --- special tokens, template, model inputs ---------------------------------------------------------------------


@pytest.mark.parametrize("scheme", bpe.SCHEMES)
def test_special_token_ids_agree_with_the_model_config(scheme):
    tokenizer = fast_from_reference(scheme)
    config = ScratchformerConfig()
    assert tokenizer.convert_ids_to_tokens([0, 1, 2, 3, 4]) == ["<pad>", "<s>", "</s>", "<unk>", "<mask>"]
    assert tokenizer.pad_token_id == config.pad_token_id == 0
    assert tokenizer.bos_token_id == config.bos_token_id == config.decoder_start_token_id == 1
    assert tokenizer.eos_token_id == config.eos_token_id == 2
    assert (tokenizer.unk_token_id, tokenizer.mask_token_id) == (3, 4)
    assert tokenizer.model_max_length == config.max_position_embeddings == 512


def test_template_appends_eos_and_labels_come_from_text_target(tok):
    source, target = "the river bank", "money deposit"
    enc = tok(source, text_target=target)
    assert enc["input_ids"] == tok(source, add_special_tokens=False)["input_ids"] + [2]
    assert enc["labels"] == tok(target, add_special_tokens=False)["input_ids"] + [2]
    assert 1 not in enc["input_ids"]  # <s> is the decoder start token, added by the model
    pair = tok("a b", "c d")["input_ids"]
    assert pair == tok("a b", add_special_tokens=False)["input_ids"] + [2] + tok(
        "c d", add_special_tokens=False)["input_ids"] + [2]


def test_padding_truncation_and_batching(tok):
    texts = ["the bank", "the river bank of money deposit lower lowest", ""]
    batch = tok(texts, padding=True, return_tensors="pt")
    lengths = [len(tok(t)["input_ids"]) for t in texts]
    assert batch["input_ids"].shape == (3, max(lengths))
    assert batch["attention_mask"].sum(1).tolist() == lengths
    for row, n in zip(batch["input_ids"].tolist(), lengths):
        assert row[n:] == [0] * (len(row) - n) and row[n - 1] == 2
    short = tok(texts[1], truncation=True, max_length=4)["input_ids"]
    assert len(short) == 4 and short[-1] == 2
    assert tok("x " * 2000, truncation=True)["input_ids"].__len__() == 512  # model_max_length


def test_model_max_length_is_taken_from_the_caller():
    tokenizer = tt.tokenizer_from_bpe(reference_bpe(), model_max_length=128)
    assert tokenizer.model_max_length == 128
    # any length transformers' own tokenizers take (issue 66: refusing what transformers accepts is a bug)
    assert tt.tokenizer_from_bpe(reference_bpe(), model_max_length=1).model_max_length == 1


def test_offsets_cover_the_word_without_its_leading_space_and_word_ids_group_tokens(tok):
    text = "We sat on the  river bank, lowest walking"
    enc = tok(text, return_offsets_mapping=True)
    words = enc.word_ids()
    assert words[-1] is None and enc["offset_mapping"][-1] == (0, 0)  # </s>
    spans: dict[int, list[tuple[int, int]]] = {}
    for word, (start, end) in zip(words, enc["offset_mapping"]):
        if word is not None:
            spans.setdefault(word, []).append((start, end))
    # each word's tokens are contiguous and together cover exactly one non-space run of the text
    pieces = [text[s[0][0] : s[-1][1]] for s in spans.values()]
    assert all(not p.startswith(" ") for p in pieces)
    assert "bank" in pieces and "river" in pieces and "lowest" in pieces
    bank = pieces.index("bank")
    start, end = spans[list(spans)[bank]][0][0], spans[list(spans)[bank]][-1][1]
    assert text[start:end] == "bank"


def test_mask_token_absorbs_the_space_before_it(tok):
    enc = tok("the <mask> river", return_offsets_mapping=True)
    ids = [tok(part, add_special_tokens=False)["input_ids"] for part in ("the", " river")]
    assert enc["input_ids"] == ids[0] + [4] + ids[1] + [2]  # no stray 'Ġ' token before <mask>
    assert enc["offset_mapping"][len(ids[0])] == (4, 10)  # "<mask>" itself


def test_decode_skips_special_tokens(tok):
    ids = tok(["naïve café 😀", "a"], padding=True)["input_ids"]
    assert tok.batch_decode(ids, skip_special_tokens=True) == ["naïve café 😀", "a"]
    assert tok.decode(ids[1]).startswith("a</s>")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(text=unicode_text_without_specials)
def test_default_scheme_round_trips_any_string(text):
    tokenizer = fast_from_reference(bpe.DEFAULT_SCHEME)
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids, skip_special_tokens=True) == text


def test_whitespace_scheme_joins_words_with_single_spaces():
    tokenizer = fast_from_reference(bpe.WHITESPACE)
    ids = tokenizer("the   river\n bank")["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "the river bank"
    assert ids[-1] == 2


# --- parity with the from-scratch implementation ----------------------------------------------------------------


@pytest.mark.parametrize("scheme", bpe.SCHEMES)
def test_tokenizer_json_round_trips_to_the_reference(scheme):
    reference = reference_bpe(scheme)
    back = tt.bpe_from_tokenizer(fast_from_reference(scheme))
    assert back.vocab == reference.vocab and back.merges == reference.merges and back.scheme == scheme


@pytest.mark.parametrize("scheme", bpe.SCHEMES)
@settings(max_examples=300, deadline=None)
@given(text=unicode_text)
def test_reference_and_fast_ids_agree_on_arbitrary_unicode(scheme, text):
    assert fast_from_reference(scheme)(text)["input_ids"] == reference_bpe(scheme).encode(text)


@pytest.mark.parametrize("scheme", bpe.SCHEMES)
def test_reference_and_fast_ids_agree_on_generated_sentences(scheme):
    texts = sentences(300, seed=1)
    assert fast_from_reference(scheme)(texts)["input_ids"] == [reference_bpe(scheme).encode(t) for t in texts]


def test_parity_on_every_line_of_the_shared_corpus(shared_data):
    """Fast-trained merges (4k byte-level) read back into the reference: identical ids on all 122k lines."""
    lines = shared_corpus_lines(shared_data)
    fast = tt.train_fast_tokenizer(lines[:5000], 4000)
    reference = tt.bpe_from_tokenizer(fast)
    assert len(fast) == len(reference) == 4000
    with ThreadPoolExecutor(1) as pool:  # Rust releases the GIL: encode both ways at once
        future = pool.submit(fast.backend_tokenizer.encode_batch_fast, lines)
        expected = [reference.encode(line) for line in lines]
        encoded = future.result()
    mismatches = [i for i, (ids, e) in enumerate(zip(expected, encoded)) if ids != e.ids]
    assert len(encoded) == len(lines) > 100_000
    assert mismatches == [], f"{len(mismatches)} lines differ, first: {lines[mismatches[0]]!r:.200}"


@pytest.mark.parametrize("scheme", bpe.SCHEMES)
def test_reference_trained_merges_agree_on_shared_corpus_lines(shared_data, scheme):
    lines = shared_corpus_lines(shared_data, limit=3000)
    reference = bpe.train(lines[:1500], 800, scheme)
    fast = tt.tokenizer_from_bpe(reference)
    encoded = fast.backend_tokenizer.encode_batch(lines)
    assert [e.ids for e in encoded] == [reference.encode(line) for line in lines]


def test_a_long_single_line_gives_the_same_ids(tok):
    """2 MB in one line. tokenizers needs ~2 s per MB for a single huge line (its pre-tokenizer), linearly; the
    reference encoder's 10 MB case is in test_bpe.py."""
    text = " ".join(sentences(200))
    text = (text * (2_000_000 // len(text) + 1))[:2_000_000]
    assert tok.backend_tokenizer.encode(text).ids == reference_bpe().encode(text)


# --- save / load ------------------------------------------------------------------------------------------------


def test_save_and_load_in_process_with_auto_tokenizer(tok, tmp_path):
    tok.save_pretrained(tmp_path)
    assert set(os.listdir(tmp_path)) == {"tokenizer.json", "tokenizer_config.json"}  # no code file
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert "auto_map" not in config and config["tokenizer_class"] == "ScratchformerTokenizer"
    assert config["model_input_names"] == ["input_ids", "attention_mask"]
    assert config["model_max_length"] == 512 and config["clean_up_tokenization_spaces"] is False
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert type(loaded) is scratchformer.ScratchformerTokenizer
    text = "the <mask> river bank 😀"
    assert loaded(text)["input_ids"] == tok(text)["input_ids"]
    assert loaded.model_max_length == 512 and loaded.mask_token_id == 4
    loaded.save_pretrained(tmp_path / "again")  # from_pretrained records is_local/local_files_only: not saved
    again = json.loads((tmp_path / "again" / "tokenizer_config.json").read_text())
    assert not {"is_local", "local_files_only"} & set(again), again
    assert {k: v for k, v in again.items()} == config


def test_save_pretrained_over_an_earlier_save_is_whole_or_untouched(tok, tmp_path, monkeypatch):
    """transformers writes tokenizer_config.json and tokenizer.json in place: a save that failed half-way (a full
    disk) left a truncated tokenizer.json over the earlier one. Now the files are written beside and renamed: a save
    that fails while writing tokenizer.json leaves the earlier save byte for byte and no temporary folder; one that
    succeeds returns where its files are, as transformers does. A path that is a file is refused."""
    import errno

    from transformers import TokenizersBackend

    folder = tmp_path / "tok"
    tok.save_pretrained(folder)
    earlier = {path.name: path.read_bytes() for path in folder.iterdir()}
    other = ScratchformerTokenizer.from_pretrained(folder, model_max_length=64)  # another tokenizer_config.json

    def half_then_a_full_disk(self, save_directory, file_names, *args, **kwargs):
        with open(os.path.join(save_directory, "tokenizer.json"), "w", encoding="utf-8") as handle:
            handle.write(self.backend_tokenizer.to_str()[:1000])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(TokenizersBackend, "_save_pretrained", half_then_a_full_disk)
        with pytest.raises(OSError, match="No space left on device"):
            other.save_pretrained(folder)
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == earlier  # no .saving- folder either
    saved = other.save_pretrained(folder)
    assert saved == (str(folder / "tokenizer_config.json"), str(folder / "tokenizer.json"))
    assert sorted(os.listdir(folder)) == ["tokenizer.json", "tokenizer_config.json"]
    assert ScratchformerTokenizer.from_pretrained(folder).model_max_length == 64
    with pytest.raises(NotADirectoryError, match="it is a file"):
        tok.save_pretrained(folder / "tokenizer.json")


FRESH_PROCESS = textwrap.dedent("""
    import json, sys
    sys.modules["scratchformer"] = None  # the package is installed (editable): make it unimportable
    try:
        import scratchformer
    except ImportError:
        pass
    else:
        raise SystemExit("scratchformer is importable")
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=sys.argv[3] == "trust")
    enc = tok(sys.argv[2], text_target=sys.argv[2], return_offsets_mapping=True)
    print(json.dumps(dict(module=type(tok).__module__, cls=type(tok).__name__, ids=enc["input_ids"],
                          labels=enc["labels"], offsets=enc["offset_mapping"], max_len=tok.model_max_length,
                          decoded=tok.decode(enc["input_ids"], skip_special_tokens=True))))
""")


@pytest.mark.parametrize("trust", ["trust", "no-trust"])
def test_fresh_process_loads_it_without_the_package_and_without_code(tok, tmp_path, trust):
    """A Hub user's view: tokenizer + config in one folder, no scratchformer installed, offline, empty HF_HOME. The
    tokenizer is transformers' built-in backend whatever trust_remote_code says: no code of the folder runs for it
    (with trust_remote_code=True the config's code does). With the flag the load says nothing; without it,
    transformers' AutoTokenizer first reads the model config through AutoConfig, which asks whether to run the
    config's code (declined here: no terminal) and warns, then gives the same ids."""
    folder = tmp_path / "checkpoint"
    tok.save_pretrained(folder)
    ScratchformerConfig(vocab_size=len(tok)).save_pretrained(folder)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HOME=str(tmp_path / "hf_home"), HF_HUB_OFFLINE="1")
    text = "the river bank, naïve 😀"
    result = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(folder), text, trust], cwd="/", env=env,
                            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["module"] == "transformers.tokenization_utils_tokenizers" and out["cls"] == "TokenizersBackend"
    expected = tok(text, return_offsets_mapping=True)
    assert out["ids"] == out["labels"] == expected["input_ids"]
    assert [tuple(o) for o in out["offsets"]] == expected["offset_mapping"]
    assert out["max_len"] == 512 and out["decoded"] == text
    if trust == "trust":
        assert "custom code" not in result.stderr and "instantiate a model of type" not in result.stderr, result.stderr


# --- bad input --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad, error, message", [
    ("ok \ud800", ValueError, r"text contains a lone surrogate '\\ud800' at index 3"),
    (["fine", "\udfff"], ValueError, r"text\[1\] contains a lone surrogate"),
    (["fine", None], TypeError, r"text\[1\] must be a str, got NoneType"),
    (3, ValueError, "text input must be of type `str`"),
])
def test_bad_input_gets_a_clear_error(tok, bad, error, message):
    with pytest.raises(error, match=message):
        tok(bad)


def test_none_and_empty_input(tok):
    with pytest.raises(ValueError, match="specify either `text` or `text_target`"):
        tok(None)
    assert tok("")["input_ids"] == [2]
    with pytest.raises(ValueError, match="text_pair contains a lone surrogate"):
        tok("a", "\ud800")


def test_fast_training_errors():
    with pytest.raises(ValueError, match="the training corpus is empty"):
        tt.train_fast_tokenizer(["", "  "], 300)
    with pytest.raises(ValueError, match="at least 261"):
        tt.train_fast_tokenizer(["hello"], 100)
    with pytest.raises(ValueError, match=r"whitespace base alphabet of this corpus; ask for at least 13"):
        tt.train_fast_tokenizer(["hello world"], 12, scheme=bpe.WHITESPACE)  # 5 + </w> d e h l o r w
    with pytest.raises(ValueError, match="lone surrogate"):
        tt.train_fast_tokenizer(["a", "\ud800"], 300)


@pytest.mark.parametrize("call, message", [
    (lambda t: t.decode([5, 10**6]), "not token ids of this tokenizer"),
    (lambda t: t.decode([5, -100]), "-100, the label id the loss ignores"),
    (lambda t: t.batch_decode([[5, 6], [7, -1]]), "not token ids"),
    (lambda t: t("hello world", truncation=True, max_length=0), "max_length=0 leaves no room"),
    (lambda t: t([]), "empty batch"),
])
def test_ids_and_lengths_that_make_no_sense_are_refused_not_dropped(call, message):
    from scratchformer.loading import load_tokenizer

    tokenizer = load_tokenizer("small")
    with pytest.raises(ValueError, match=message):
        call(tokenizer)
    assert tokenizer("hello world", truncation=True, max_length=1)["input_ids"] == [tokenizer.eos_token_id]
    assert tokenizer.decode(tokenizer("a bank")["input_ids"], skip_special_tokens=True) == "a bank"


@pytest.mark.parametrize("call, error, message", [
    (lambda tmp: tt.bpe_from_tokenizer(None), TypeError, "needs a fast tokenizer, a tokenizers.Tokenizer or the path"),
    (lambda tmp: tt.bpe_from_tokenizer(_written(tmp, "not json")), ValueError, r"tokenizer.json is not a tokenizer.json"),
    (lambda tmp: tt.bpe_from_tokenizer(_written(tmp, '{"x": 1}')), ValueError, "has no model with a vocab and merges"),
    # Python's own errors name what is missing (issue 66: no type check of our own in front of them)
    (lambda tmp: tt.tokenizer_from_bpe(None), AttributeError, "'NoneType' object has no attribute 'vocab'"),
    (lambda tmp: tt.wrap_backend(None), AttributeError, "'NoneType' object has no attribute 'token_to_id'"),
], ids=["not a tokenizer", "not JSON", "no model", "not a BPE", "no backend"])
def test_the_conversions_and_trainers_refuse_what_they_cannot_read(tmp_path, call, error, message):
    """docs/tokenizer.md's functions, given something else: a file that is not a tokenizer.json is said so, not a
    KeyError deep inside."""
    with pytest.raises(error, match=message):
        call(tmp_path)


def _written(folder, text: str):
    (folder / "tokenizer.json").write_text(text, encoding="utf-8")
    return folder
