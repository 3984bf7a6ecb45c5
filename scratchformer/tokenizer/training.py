"""Build and train ``ScratchformerTokenizer`` (a ``tokenizer.json``): with ``tokenizers``' Rust trainer, or from the
reference merges of :mod:`~scratchformer.tokenizer.bpe`, and back (both give the same ids; docs/tokenizer.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

from ..files import available_memory
from ..models.tokenization_scratchformer import ScratchformerTokenizer
from . import bpe

DEFAULT_MODEL_MAX_LENGTH = 512  # ScratchformerConfig().max_position_embeddings

# tokenizers' BpeTrainer reserves its tables (word -> id, id -> word) up front for every token asked for: 66 to 71
# bytes a token measured with tokenizers 0.23 (71 GB for vocab_size=10**9, then a Rust panic), counted at 64. Its ids
# are 32-bit.
TRAINER_BYTES_PER_TOKEN = 64
MAX_VOCAB_SIZE = 2**32 - 1

_WS = "".join(f"\\x{{{ord(c):x}}}" for c in bpe.UNICODE_WHITESPACE)  # bpe.UNICODE_WHITESPACE in Oniguruma syntax


def special_added_tokens() -> list[AddedToken]:
    """``<pad> <s> </s> <unk> <mask>`` as ``AddedToken``; ``<mask>`` swallows the whitespace before it."""
    return [
        AddedToken(token, special=True, normalized=False, lstrip=token in bpe.LSTRIP_SPECIAL_TOKENS)
        for token in bpe.SPECIAL_TOKENS
    ]


def _pipeline(model: models.BPE, scheme: str) -> Tokenizer:
    """A ``tokenizers`` pipeline around ``model`` that pre-tokenizes exactly like :func:`bpe.pretokenize`."""
    backend = Tokenizer(model)
    template = processors.TemplateProcessing(
        single="$A </s>",
        pair="$A </s> $B:1 </s>:1",
        special_tokens=[(bpe.EOS, bpe.SPECIAL_TOKENS.index(bpe.EOS))],
    )
    if scheme == bpe.BYTE_LEVEL:
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        backend.decoder = decoders.ByteLevel()
        # trim_offsets: the offsets of 'Ġbank' cover "bank", not " bank"
        backend.post_processor = processors.Sequence(
            [processors.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True), template]
        )
    else:
        bpe.check_scheme(scheme)
        # '</w>' is stored as one character (see bpe.STORED_END_OF_WORD), inserted after every word
        backend.normalizer = normalizers.Sequence(
            [
                normalizers.Replace(bpe.STORED_END_OF_WORD, ""),
                normalizers.Replace(
                    Regex(f"(?<=[^{_WS}])(?=[{_WS}]|\\z)"),  # after a word's last character
                    bpe.STORED_END_OF_WORD,
                ),
            ]
        )
        backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        backend.decoder = decoders.BPEDecoder(suffix=bpe.STORED_END_OF_WORD)
        backend.post_processor = template
    return backend


def wrap_backend(backend: Tokenizer, model_max_length: int = DEFAULT_MODEL_MAX_LENGTH) -> ScratchformerTokenizer:
    """The ``transformers`` tokenizer around a ``tokenizers`` pipeline (special tokens must be ids 0-4)."""
    for i, token in enumerate(bpe.SPECIAL_TOKENS):
        if backend.token_to_id(token) != i:
            raise ValueError(f"the tokenizer must have {token!r} at id {i}, got {backend.token_to_id(token)}")
    names = ("pad_token", "bos_token", "eos_token", "unk_token", "mask_token")  # in bpe.SPECIAL_TOKENS's order
    return ScratchformerTokenizer(tokenizer_object=backend, model_max_length=model_max_length,
                                  clean_up_tokenization_spaces=False, **dict(zip(names, bpe.SPECIAL_TOKENS)))


def _stored(token: str, scheme: str) -> str:
    if scheme == bpe.WHITESPACE and token.endswith(bpe.END_OF_WORD):
        return token[: -len(bpe.END_OF_WORD)] + bpe.STORED_END_OF_WORD
    return token


def tokenizer_from_bpe(reference: bpe.BPE, model_max_length: int = DEFAULT_MODEL_MAX_LENGTH
                       ) -> ScratchformerTokenizer:
    """A fast tokenizer with the vocabulary and merges of a reference :class:`bpe.BPE` (same ids for every text)."""
    vocab = {_stored(token, reference.scheme): i for token, i in reference.vocab.items()}
    merges = [(_stored(a, reference.scheme), _stored(b, reference.scheme)) for a, b in reference.merges]
    backend = _pipeline(models.BPE(vocab=vocab, merges=merges, unk_token=bpe.UNK), reference.scheme)
    backend.add_special_tokens(special_added_tokens())
    return wrap_backend(backend, model_max_length)


def bpe_from_tokenizer(tokenizer: Any) -> bpe.BPE:
    """The reference :class:`bpe.BPE` of a fast tokenizer (a ``ScratchformerTokenizer``, a ``tokenizers.Tokenizer``,
    or the path of a ``tokenizer.json`` or of a folder holding one)."""
    if isinstance(tokenizer, (str, os.PathLike)):
        path = Path(tokenizer) / "tokenizer.json" if Path(tokenizer).is_dir() else Path(tokenizer)
        try:
            spec = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as error:  # not JSON, not UTF-8
            raise ValueError(f"{path} is not a tokenizer.json: {error}") from None
    elif isinstance(backend := getattr(tokenizer, "backend_tokenizer", tokenizer), Tokenizer):
        spec = json.loads(backend.to_str())
    else:
        raise TypeError(f"bpe_from_tokenizer needs a fast tokenizer, a tokenizers.Tokenizer or the path of a "
                        f"tokenizer.json, got {type(tokenizer).__name__}")
    model = spec.get("model") if isinstance(spec, dict) else None
    if not isinstance(model, dict) or not isinstance(model.get("vocab"), dict) or not isinstance(
            model.get("merges"), list):
        raise ValueError(f"{tokenizer} is not a tokenizer.json: it has no model with a vocab and merges")
    if model.get("type") != "BPE":
        raise ValueError(f"not a BPE tokenizer: its model is {model.get('type')}")
    scheme = bpe.BYTE_LEVEL if (spec.get("pre_tokenizer") or {}).get("type") == "ByteLevel" else bpe.WHITESPACE

    def readable(token: str) -> str:
        if scheme == bpe.WHITESPACE and token.endswith(bpe.STORED_END_OF_WORD):
            return token[:-1] + bpe.END_OF_WORD
        return token

    merges = [m.split(" ", 1) if isinstance(m, str) else m for m in spec["model"]["merges"]]
    return bpe.BPE(
        {readable(t): i for t, i in spec["model"]["vocab"].items()},
        [(readable(a), readable(b)) for a, b in merges],
        scheme,
    )


def check_vocab_size(vocab_size: object, trainer: str = "fast") -> None:
    """Refuse, before any text is read, a vocabulary size no tokenizer can number (32-bit ids) or whose tables the
    fast trainer would reserve beyond the memory available (``tokenizers`` would end the process in a Rust panic)."""
    if vocab_size > MAX_VOCAB_SIZE:
        raise ValueError(f"vocab_size={vocab_size:,} is more than the {MAX_VOCAB_SIZE:,} tokens a tokenizer can "
                         "number (its ids are 32-bit): ask for a smaller vocabulary")
    memory = available_memory()
    needed = vocab_size * TRAINER_BYTES_PER_TOKEN
    if trainer == "fast" and memory is not None and needed > memory:
        raise ValueError(f"vocab_size={vocab_size:,}: the fast trainer reserves about {needed / 2**30:,.1f} GiB for "
                         f"its tables before it reads a word, more than the {memory / 2**30:,.1f} GiB of memory "
                         "available on this machine: ask for a smaller vocabulary")


def train_fast_tokenizer(texts: Iterable[str], vocab_size: int, scheme: str = bpe.DEFAULT_SCHEME,
                         model_max_length: int = DEFAULT_MODEL_MAX_LENGTH, min_frequency: int = 2,
                         show_progress: bool = False) -> ScratchformerTokenizer:
    """Train with ``tokenizers``' ``BpeTrainer`` (Rust, multi-threaded) on an iterable of strings. ``show_progress``
    is honoured only on a terminal: the library ends its bars with newlines on standard output."""
    bpe.check_scheme(scheme)
    check_vocab_size(vocab_size)
    bpe.check_min_frequency(min_frequency)  # the library's own: OverflowError for -1
    if scheme == bpe.BYTE_LEVEL:
        bpe.check_base_size(vocab_size, len(bpe.BYTE_LEVEL_ALPHABET), scheme)
    backend = _pipeline(models.BPE(unk_token=bpe.UNK), scheme)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=special_added_tokens(),
        initial_alphabet=list(bpe.BYTE_LEVEL_ALPHABET) if scheme == bpe.BYTE_LEVEL else [],
        show_progress=show_progress and _on_a_terminal(),
    )
    checked = bpe.TrainingTexts(texts)
    length = len(texts) if isinstance(texts, Sequence) else None
    backend.train_from_iterator(checked, trainer, length=length)
    checked.check_words_seen()
    bpe.check_base_size(vocab_size, backend.get_vocab_size() - len(bpe.SPECIAL_TOKENS), scheme, " of this corpus")
    return wrap_backend(backend, model_max_length)


def saved_size(tokenizer: Any) -> int:
    """About the bytes ``tokenizer.save_pretrained`` writes: ``tokenizer.json`` as it is saved (indented) and a
    kilobyte for ``tokenizer_config.json`` (for the message of a full disk)."""
    return len(tokenizer.backend_tokenizer.to_str(pretty=True).encode("utf-8")) + 1024


def _on_a_terminal() -> bool:
    """Whether standard output and standard error (file descriptors 1 and 2, where the ``tokenizers`` library writes)
    are both a terminal."""
    return os.isatty(1) and os.isatty(2)  # False for a closed descriptor


def train_reference_tokenizer(texts: Iterable[str], vocab_size: int, scheme: str = bpe.DEFAULT_SCHEME,
                              model_max_length: int = DEFAULT_MODEL_MAX_LENGTH, min_frequency: int = 2,
                              progress: Callable[[int, int], object] | None = None) -> ScratchformerTokenizer:
    """Train with the readable incremental trainer of :mod:`scratchformer.bpe`, then build the fast tokenizer."""
    reference = bpe.train(texts, vocab_size, scheme, min_frequency=min_frequency, progress=progress)
    return tokenizer_from_bpe(reference, model_max_length)


def tokens_per_word(tokenizer: ScratchformerTokenizer, texts: Sequence[str], batch_size: int = 1000) -> float:
    """Average number of tokens (special tokens excluded) per whitespace-separated word of ``texts``."""
    backend = tokenizer.backend_tokenizer
    tokens = words = 0
    for start in range(0, len(texts), batch_size):
        batch = list(texts[start : start + batch_size])
        tokens += sum(len(e.ids) for e in backend.encode_batch(batch, add_special_tokens=False))
        words += sum(len(text.split()) for text in batch)
    return tokens / words if words else 0.0
