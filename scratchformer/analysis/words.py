"""Finding a word in a sentence: its characters (a whole-word match or a span), then the tokens whose character
offsets cover them, alike for WordPiece, byte-level BPE and ``</w>`` BPE."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ScratchformerError, quoted
from .encoding import Encoded

# a word character: \w, or a combining mark (an accent written as its own code point, "cafe\u0301" for "café")
_W = r"[\w\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]"
_WORD_RE = re.compile(rf"{_W}+(?:[-'’]{_W}+)*")


def is_word_character(character: str) -> bool:
    """Whether ``character`` belongs to a word: the one rule of :func:`sentence_words`, :func:`find_word` and the
    word-sense spans (:mod:`~scratchformer.analysis.sense_data`)."""
    return re.fullmatch(_W, character) is not None


def shown(text: str, limit: int = 80) -> str:
    """``text`` for a table or a figure: as it is, or past ``limit`` characters cut as messages quote it
    (:func:`~scratchformer.errors.quoted`), so that a 20,000-word sentence stays one short line."""
    return text if len(text) <= limit else quoted(text, limit)


WordQuery = tuple[str, str] | tuple[str, str, int] | tuple[str, tuple[int, int]]  # see :func:`parse_query`


def sentence_words(sentence: str) -> list[tuple[str, int, int]]:
    """The words of ``sentence`` as ``(word, start, end)``; punctuation is not a word."""
    return [(m.group(), m.start(), m.end()) for m in _WORD_RE.finditer(sentence)]


@dataclass
class WordSpan:
    """Where a word's characters are: ``sentence[start:end]``, the ``occurrence``-th whole-word match."""

    sentence: str
    start: int
    end: int
    occurrence: int = 0  # 0 when given as a span


@dataclass
class WordLocation:
    """Where a word sits in a sentence: its characters and the tokens that cover them."""

    sentence: str
    word: str  # sentence[char_start:char_end]
    occurrence: int  # 0-based index among the whole-word occurrences of ``word`` (0 when given as a span)
    char_start: int
    char_end: int
    token_indices: list[int]  # positions in the tokenized sentence (special tokens count)
    tokens: list[str]
    token_ids: list[int]
    extends_beyond_word: bool = False  # a token also covers characters outside the word (e.g. "bank" in "banks")


def find_word(sentence: str, word: str, occurrence: int = 0,
              tokens_of: Callable[[str], list[str]] | None = None) -> WordSpan:
    """The ``occurrence``-th (0-based, ``-1`` = last) whole-word, case-sensitive match of ``word`` in ``sentence``;
    when it is not there, the error lists the sentence's words, other capitalisations and (``tokens_of``) tokens."""
    if not isinstance(word, str) or not word.strip():
        raise ScratchformerError(f"word={word!r} is empty; give the word to look for in the sentence")
    word = word.strip()
    pattern = rf"(?<!{_W}){re.escape(word)}(?!{_W})"
    matches = list(re.finditer(pattern, sentence))
    if not matches:
        raise ScratchformerError(_not_found_message(sentence, word, pattern, tokens_of))
    if not -len(matches) <= occurrence < len(matches):
        raise ScratchformerError(
            f"occurrence={occurrence!r} is out of range: {quoted(word)} occurs {len(matches)} time(s) in "
            f"{quoted(sentence)}; use 0..{len(matches) - 1} (0 = first, -1 = last)"
        )
    match = matches[occurrence]
    return WordSpan(sentence, match.start(), match.end(), occurrence % len(matches))


def _not_found_message(sentence: str, word: str, pattern: str, tokens_of: Callable[[str], list[str]] | None) -> str:
    other_case = sorted({m.group() for m in re.finditer(pattern, sentence, flags=re.IGNORECASE)})
    hint = f" It occurs with other capitalisation as {other_case}; pass that spelling." if other_case else ""
    if not hint and unicodedata.normalize("NFC", word) in unicodedata.normalize("NFC", sentence):
        hint = (" The sentence writes it with other Unicode code points (an accent as a combining mark, say): "
                "normalise both with unicodedata.normalize('NFC', text).")
    tokens = f"; its tokens: {_some(tokens_of(sentence))}" if tokens_of else ""
    return (f"word {quoted(word)} is not a whole word of the sentence {quoted(sentence)}.{hint} "
            f"The sentence's words: {_some([w for w, _, _ in sentence_words(sentence)])}{tokens}")


def _some(items: list[str], limit: int = 40) -> str:
    """A list for a message, its first ``limit`` items and how many more: a long sentence's words stay one line."""
    return f"{items[:limit]} and {len(items) - limit:,} more" if len(items) > limit else str(items)


def parse_query(index: int, query: Any, tokens_of: Callable[[str], list[str]] | None = None) -> WordSpan:
    """A word query - ``(sentence, word)``, ``(sentence, word, occurrence)`` or ``(sentence, (start, end))`` - as
    the span of characters it asks for. ``index`` numbers the query in error messages."""
    if not isinstance(query, tuple) or len(query) not in (2, 3) or not isinstance(query[0], str):
        raise ScratchformerError(
            f"query {index} = {quoted(query)}: use (sentence, word), (sentence, word, n) or (sentence, (start, end))")
    sentence, target = query[0], query[1]
    if isinstance(target, tuple):  # a character span: it must select non-blank characters of the sentence
        start, end = target
        if not 0 <= start < end <= len(sentence) or not sentence[start:end].strip():
            raise ScratchformerError(f"span=({start}, {end}) does not select a word of the {len(sentence)}-character "
                                     f"sentence {quoted(sentence)}")
        return WordSpan(sentence, start, end)
    return find_word(sentence, target, query[2] if len(query) == 3 else 0, tokens_of)


def words_kept(encoded: Encoded) -> list[tuple[str, int, int]]:
    """The words of an encoded text (:func:`sentence_words`) that were not cut off by truncation."""
    words = sentence_words(encoded.text)
    if not encoded.truncated:
        return words
    kept_until = max((b for (_, b), special in zip(encoded.offsets or [], encoded.special) if not special), default=0)
    return [(w, start, end) for w, start, end in words if start < kept_until]


def covering_tokens(encoded: Encoded, start: int, end: int) -> tuple[list[int], bool]:
    """Indices of the (non-special) tokens that overlap characters ``start..end``, and whether one of them also
    covers characters outside that span."""
    indices, extends = [], False
    for i, ((a, b), special) in enumerate(zip(encoded.offsets, encoded.special)):
        if special or a >= b or not (a < end and b > start):
            continue
        # byte-level BPE offsets may include the leading space ('Ġbank' -> ' bank'): do not count it
        a += len(encoded.text[a:b]) - len(encoded.text[a:b].lstrip())
        extends = extends or a < start or b > end
        indices.append(i)
    return indices, extends


def locate(encoded: Encoded, span: WordSpan, tokens: Callable[[Sequence[int]], list[str]],
           max_length: int | None) -> WordLocation:
    """The tokens of ``encoded`` that cover ``span`` (``tokens`` turns ids into token strings)."""
    if encoded.offsets is None:
        raise ScratchformerError(
            "the tokenizer gives no character offsets; word location needs a fast tokenizer "
            "(AutoTokenizer.from_pretrained(...) returns one for every tokenizer.json)"
        )
    indices, extends = covering_tokens(encoded, span.start, span.end)
    if not indices:
        detail = (f"it lies past the model's maximum of {max_length} tokens (the text was truncated)"
                  if encoded.truncated else "no token covers it")
        raise ScratchformerError(f"cannot embed {quoted(encoded.text[span.start:span.end])} at characters "
                                 f"{span.start}-{span.end} of {quoted(encoded.text)}: {detail}")
    ids = [encoded.input_ids[i] for i in indices]
    return WordLocation(
        sentence=encoded.text,
        word=encoded.text[span.start : span.end],
        occurrence=span.occurrence,
        char_start=span.start,
        char_end=span.end,
        token_indices=indices,
        tokens=tokens(ids),
        token_ids=ids,
        extends_beyond_word=extends,
    )


@dataclass(frozen=True)
class TokenGroup:
    """One axis label: the text of a word and the tokens ``first..end - 1`` that spell it (``Write`` spelled
    ``W r ite``); a special token and a punctuation mark are groups of their own."""

    label: str
    first: int
    end: int  # exclusive

    @property
    def size(self) -> int:
        return self.end - self.first


def _is_punctuation(text: str) -> bool:
    return bool(text) and not any(c.isalnum() for c in text)


def token_groups(encoded: Encoded, tokens: Sequence[str]) -> list[TokenGroup]:
    """The words of an encoded text as :class:`TokenGroup` labels: a token continues the word before it when no
    whitespace separates them and neither is punctuation (found from the offsets; without them, a token each)."""
    if encoded.offsets is None:
        return [TokenGroup(token, i, i + 1) for i, token in enumerate(tokens)]
    groups: list[TokenGroup] = []
    prev_end, prev_text = None, ""
    for i, ((a, b), special) in enumerate(zip(encoded.offsets, encoded.special)):
        text = encoded.text[a:b].strip()
        if special or not text:
            groups.append(TokenGroup(tokens[i], i, i + 1))
            prev_end, prev_text = None, ""
            continue
        a += len(encoded.text[a:b]) - len(encoded.text[a:b].lstrip())  # 'Ġbank' may cover ' bank'
        joins = prev_end is not None and a == prev_end and not _is_punctuation(text) and not _is_punctuation(prev_text)
        if joins:
            last = groups[-1]
            groups[-1] = TokenGroup(last.label + encoded.text[a:b], last.first, i + 1)
        else:
            groups.append(TokenGroup(text, i, i + 1))
        prev_end, prev_text = b, text
    return groups


def shifted_groups(groups: Sequence[TokenGroup], start_label: str, length: int) -> list[TokenGroup]:
    """The groups of a decoder input made by teacher forcing from the same text: ``start_label`` (``<s>``) first,
    then the text's groups one token later, cut at ``length`` tokens (the last token of the text is not fed)."""
    return [TokenGroup(start_label, 0, 1)] + [TokenGroup(g.label, g.first + 1, min(g.end + 1, length))
                                              for g in groups if g.first + 1 < length]
