"""Shared helpers for the tokenizer tests: a small generated corpus and tokenizers trained on it (cached)."""

from __future__ import annotations

import functools
import gzip
import itertools
import random
import unicodedata
from pathlib import Path

import regex
from hypothesis import strategies as st

from scratchformer.tokenizer import bpe
from scratchformer.tokenizer import training as tt

WORDS = (
    "the a river bank of money deposit lower lowest newer wider walk walked walking run running bat bats ball "
    "fly flies tree trees they we you it is was were be been and or but not no yes I'm don't it's we've 2024 "
    "3.14 100 e-mail well-known naïve café résumé"
).split()

MULTILINGUAL = [
    "Grüße aus Köln, naïve café — “quoted” text…",
    "東京は日本の首都です。中文也可以。",
    "مرحبا بالعالم، هذا نص عربي",
    "שלום עולם, זה טקסט בעברית",
    "Emoji: 😀 👍🏽 👨‍👩‍👧 🇫🇷 and e\u0301 a\u0308\u0323 combining",
    "Ελληνικά και русский язык, 한국어 텍스트",
    "tabs\tand  spaces   and\r\nnewlines\u00a0nbsp\u3000ideographic",
]


def sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` pseudo-English lines (a deterministic word salad), plus a few multilingual lines."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        words = rng.choices(WORDS, k=rng.randint(3, 14))
        line = " ".join(words).capitalize() + rng.choice([".", "!", "?", ",", ""])
        lines.append(line)
        if i % 25 == 0:
            lines.append(MULTILINGUAL[(i // 25) % len(MULTILINGUAL)])
    return lines


@functools.cache
def reference_bpe(scheme: str = bpe.BYTE_LEVEL, vocab_size: int = 700) -> bpe.BPE:
    """A reference BPE trained on :func:`sentences` (min_frequency=1, so multi-byte characters get merges)."""
    return bpe.train(sentences(400), vocab_size, scheme, min_frequency=1)


@functools.cache
def fast_from_reference(scheme: str = bpe.BYTE_LEVEL, vocab_size: int = 700):
    return tt.tokenizer_from_bpe(reference_bpe(scheme, vocab_size))


def shared_corpus_lines(data_dir: Path, limit: int | None = None) -> list[str]:
    """Lines of the shared English corpus (newline removed)."""
    with gzip.open(data_dir / "corpus_en.txt.gz", "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in itertools.islice(f, limit)]


# --- hypothesis: arbitrary Unicode ------------------------------------------------------------------------------

_LETTER_OR_NUMBER = regex.compile(r"[\p{L}\p{N}]")


def same_unicode_tables(char: str) -> bool:
    """False for letters/numbers newer than Python's ``unicodedata`` (Unicode 14).

    The pre-tokenizer classes ``\\p{L}``/``\\p{N}`` come from the ``regex`` package's tables (Unicode 17) in the
    reference and from Oniguruma's (Unicode 16) in ``tokenizers``; characters first assigned in 17.0 are letters to
    one and unassigned to the other. Excluding every letter/number unknown to Python's tables avoids them (see
    docs/tokenizer.md).
    """
    return not (unicodedata.category(char) == "Cn" and _LETTER_OR_NUMBER.match(char))


FRAGMENTS = [
    "😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "e\u0301", "a\u0308\u0323", "\u0301", "東京", "中文", "مرحبا", "שלום", "\u200f",
    "\u200d", "\x00", "\x07", "\x1b[0m", "\x85", "\t", "\n", "\r\n", " " * 7, "\u3000", "\u00a0", "\u2028",
    "\ue000", "I'm", "don't", "'s", "3.14", "lowest", " bank", "<mask>", " <mask>", "  <mask>", "<s>", "</s>",
    "<pad>", "<unk>", "</w>", "\ufeff", "\U0010fffd",
]

any_char = st.characters(exclude_categories=("Cs",)).filter(same_unicode_tables)
unicode_text = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(any_char, max_size=8), st.sampled_from(WORDS).map(" ".__add__)),
    max_size=12,
).map("".join)
"""Arbitrary Unicode strings, biased toward emoji, combining marks, CJK, RTL, control characters, whitespace runs
and special-token strings."""

SPECIAL_STRINGS = tuple(bpe.SPECIAL_TOKENS)
unicode_text_without_specials = unicode_text.filter(lambda s: not any(t in s for t in SPECIAL_STRINGS))
