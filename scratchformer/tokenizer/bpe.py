"""Byte Pair Encoding from scratch (Sennrich, Haddow and Birch 2016): the readable reference implementation.

Pre-tokenize text into counted words, split each word into symbols, then repeatedly merge the most frequent
adjacent pair (ties: the pair seen first in corpus order); encoding replays the merges by rank (docs/tokenizer.md,
"How BPE works"). :func:`learn_merges_naive` is the paper's listing, :func:`learn_merges` the incremental trainer
with identical merges. This module is the specification the fast tokenizer is tested against token for token.
"""

from __future__ import annotations

import functools
import heapq
import numbers
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate

import regex

Pair = tuple[str, str]

SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>", "<mask>")
"""Special tokens; their ids are their positions (0-4), as in ``ScratchformerConfig``."""
PAD, BOS, EOS, UNK, MASK = SPECIAL_TOKENS
LSTRIP_SPECIAL_TOKENS = frozenset({MASK})
"""Special tokens that absorb the whitespace before them (``"a <mask>"`` -> ``a``, ``<mask>``; no stray space)."""

BYTE_LEVEL = "byte_level"
WHITESPACE = "whitespace"
SCHEMES = (BYTE_LEVEL, WHITESPACE)
DEFAULT_SCHEME = BYTE_LEVEL

END_OF_WORD = "</w>"
"""The paper's end-of-word marker: a symbol of its own, appended to every word of the whitespace scheme."""
STORED_END_OF_WORD = "\ue000"
"""How ``tokenizer.json`` spells :data:`END_OF_WORD`.

``tokenizers`` splits a word into *characters*, so a four-character ``</w>`` cannot be one symbol there; its
``end_of_word_suffix`` option glues the marker onto the last character instead (``t</w>``), which gives different
merges than the paper. The fast tokenizer therefore inserts the private-use character U+E000 after every word and
stores ``</w>`` as that character. In the whitespace scheme both implementations delete U+E000 from input text, so
it cannot be confused with the marker (the byte-level scheme keeps every character).
"""

UNICODE_WHITESPACE = "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
"""The Unicode ``White_Space`` characters; Rust's ``char::is_whitespace`` (used by ``tokenizers``) is the same set."""
WHITESPACE_CLASS = "[" + regex.escape(UNICODE_WHITESPACE) + "]"


# ----------------------------------------------------------------------------------------------------------------
# Pre-tokenization: text -> words -> symbols
# ----------------------------------------------------------------------------------------------------------------


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from the 256 byte values to 256 printable characters.

    Bytes that are printable Latin-1 characters map to themselves; the others (control characters, space, ...) are
    shifted to code points from U+0100 up, so that a space byte is shown as ``Ġ`` (U+0120) and newline as ``Ċ``.
    Every token is then a readable string, and every possible byte sequence has a spelling: nothing is unknown.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping = {b: chr(b) for b in printable}
    shift = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + shift)
            shift += 1
    return mapping


BYTE_ENCODER = bytes_to_unicode()
BYTE_DECODER = {char: byte for byte, char in BYTE_ENCODER.items()}
BYTE_LEVEL_ALPHABET = tuple(BYTE_ENCODER[b] for b in range(256))
_LATIN1_TO_BYTE_SYMBOL = {b: BYTE_ENCODER[b] for b in range(256)}  # str.translate table over latin-1 decoded bytes

BYTE_LEVEL_SPLIT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
"""GPT-2's pre-tokenizer, character for character the one in ``tokenizers``' ``ByteLevel``.

A word keeps the single space before it (``" world"``); letters, digits and other characters form separate words;
English contractions are split off; a run of spaces gives all but its last space to the run.
"""
WHITESPACE_SPLIT = regex.compile("[^" + regex.escape(UNICODE_WHITESPACE) + "]+")


def check_text(text: object, what: str = "text") -> str:
    """Return ``text`` if it is a string that UTF-8 can encode, else raise a ``TypeError``/``ValueError``."""
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str, got {type(text).__name__}: {text!r:.60}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(
            f"{what} contains a lone surrogate {text[err.start]!r} at index {err.start}: it is not valid Unicode and "
            "cannot be tokenized. Fix how the text was decoded (e.g. open(..., errors='replace'))."
        ) from None
    return text


MAX_MIN_FREQUENCY = 2**64 - 1  # the tokenizers library keeps it in an unsigned 64-bit integer


def check_min_frequency(min_frequency: int) -> int:
    """Return ``min_frequency`` if it is a count of occurrences (0 to 2**64 - 1; 0 and 1 both merge any pair that
    occurs), else raise a ``ValueError`` naming the argument (``tokenizers`` says only "can't convert negative int
    to unsigned" for -1, and the reference trainer would take it)."""
    if not 0 <= min_frequency <= MAX_MIN_FREQUENCY:
        raise ValueError(f"min_frequency must be a count of occurrences, 0 or more (at most 2**64 - 1), got "
                         f"{min_frequency}: a pair is merged only when seen at least that often")
    return min_frequency


def check_scheme(scheme: str) -> str:
    if scheme not in SCHEMES:
        raise ValueError(f"unknown pre-tokenization scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")
    return scheme


def pretokenize(text: str, scheme: str = DEFAULT_SCHEME) -> list[str]:
    """Split ``text`` into the words that BPE works on (no merge ever crosses a word boundary).

    ``byte_level``: GPT-2 split (:data:`BYTE_LEVEL_SPLIT`), each word spelled with :func:`bytes_to_unicode`
    characters, so ``"a café"`` -> ``['a', 'Ġcafé']`` with ``é`` as its two UTF-8 bytes ``Ã©``.
    ``whitespace``: words are the runs of non-whitespace characters; the spacing itself is lost.
    """
    if scheme == BYTE_LEVEL:
        return [
            word.encode("utf-8").decode("latin-1").translate(_LATIN1_TO_BYTE_SYMBOL)
            for word in BYTE_LEVEL_SPLIT.findall(text)
        ]
    check_scheme(scheme)
    return WHITESPACE_SPLIT.findall(text.replace(STORED_END_OF_WORD, ""))


def word_to_symbols(word: str, scheme: str = DEFAULT_SCHEME) -> tuple[str, ...]:
    """The initial symbols of a pre-tokenized word: its characters, plus ``</w>`` in the whitespace scheme."""
    return (*word, END_OF_WORD) if scheme == WHITESPACE else tuple(word)


def count_words(texts: Iterable[str], scheme: str = DEFAULT_SCHEME) -> dict[str, int]:
    """Word frequencies over ``texts``, in order of first occurrence (that order breaks ties in training)."""
    check_scheme(scheme)
    counts: dict[str, int] = {}
    for i, text in enumerate(texts):
        for word in pretokenize(check_text(text, f"text #{i}"), scheme):
            counts[word] = counts.get(word, 0) + 1
    return counts


# ----------------------------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------------------------

MAX_TRAINING_WORD = 100  # characters: longer whitespace-free runs are cut into pieces for training


@functools.lru_cache
def _long_run(max_length: int) -> regex.Pattern:
    """A whitespace-free run longer than ``max_length`` characters."""
    return regex.compile("[^" + regex.escape(UNICODE_WHITESPACE) + "]{" + str(max_length + 1) + ",}")


def training_pieces(text: str, max_length: int = MAX_TRAINING_WORD) -> list[str]:
    """``text`` as the trainers see it: every whitespace-free run longer than ``max_length`` characters cut into
    pieces of at most ``max_length``, each its own text, so that training stays linear in a long run's length (both
    trainers cut alike; docs/tokenizer.md)."""
    if len(text) <= max_length:
        return [text]
    pieces, last = [], 0
    for run in _long_run(max_length).finditer(text):
        pieces.append(text[last:run.start()])
        pieces += [run.group()[i:i + max_length] for i in range(0, len(run.group()), max_length)]
        last = run.end()
    pieces.append(text[last:])
    return [piece for piece in pieces if piece]


def get_stats(vocab: dict[tuple[str, ...], int]) -> dict[Pair, int]:
    """Frequency of every adjacent symbol pair (the paper's ``get_stats``), in first-occurrence order."""
    pairs: dict[Pair, int] = {}
    for symbols, freq in vocab.items():
        for pair in zip(symbols, symbols[1:]):
            pairs[pair] = pairs.get(pair, 0) + freq
    return pairs


def merge_symbols(symbols: Sequence[str], pair: Pair) -> tuple[str, ...]:
    """Replace every occurrence of ``pair`` in ``symbols`` by the merged symbol, scanning left to right."""
    first, second = pair
    out: list[str] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == first and symbols[i + 1] == second:
            out.append(first + second)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def merge_vocab(pair: Pair, vocab: dict[tuple[str, ...], int]) -> dict[tuple[str, ...], int]:
    """Apply one merge to every word (the paper's ``merge_vocab``)."""
    return {merge_symbols(symbols, pair): freq for symbols, freq in vocab.items()}


def learn_merges_naive(
    vocab: dict[tuple[str, ...], int], num_merges: int, min_frequency: int = 1
) -> list[Pair]:
    """Learn ``num_merges`` merges the way the paper lists it: recount all pairs after every merge.

    ``vocab`` maps each word, as a tuple of symbols, to its frequency, in first-occurrence order. ``max`` returns
    the first of equally frequent pairs in ``get_stats``' insertion order, i.e. the pair seen first when scanning
    the corpus. Stops early when no pair occurs ``min_frequency`` times.
    """
    merges: list[Pair] = []
    for _ in range(num_merges):
        pairs = get_stats(vocab)
        if not pairs:
            break
        best = max(pairs, key=pairs.__getitem__)
        if pairs[best] < min_frequency:
            break
        merges.append(best)
        vocab = merge_vocab(best, vocab)
    return merges


def _pair_positions(symbols: Sequence[str]) -> set[tuple[Pair, int]]:
    """Every adjacent pair of ``symbols`` with the character offset where it starts in the word."""
    return set(zip(zip(symbols, symbols[1:]), accumulate(map(len, symbols), initial=0)))


class _PairIndex:
    """The pair counts of :func:`learn_merges`, kept current as pairs are merged.

    ``counts[pair]`` is the frequency-weighted number of occurrences, ``where[pair]`` the indices of the words that
    contain it, and ``first[pair]`` its first occurrence ``(word index, character offset)``, or ``None`` when that
    occurrence was merged away and must be looked up again.
    """

    def __init__(self, vocab: dict[tuple[str, ...], int]):
        self.words = list(vocab)
        self.freqs = list(vocab.values())
        self.counts: dict[Pair, int] = {}
        self.where: dict[Pair, set[int]] = {}
        self.first: dict[Pair, tuple[int, int] | None] = {}
        for w, symbols in enumerate(self.words):
            for pair, offset in _pair_positions(symbols):
                self._add(pair, w, offset)

    def _add(self, pair: Pair, w: int, offset: int) -> None:
        if pair not in self.counts:
            self.counts[pair], self.where[pair], self.first[pair] = 0, set(), (w, offset)
        elif self.first[pair] is not None and (w, offset) < self.first[pair]:
            self.first[pair] = (w, offset)
        self.counts[pair] += self.freqs[w]
        self.where[pair].add(w)

    def priority(self, pair: Pair) -> tuple[int, tuple[int, int]]:
        """``(-count, first occurrence)``: the smallest is the pair to merge next (ties go to the first seen)."""
        if self.first[pair] is None:  # its old first occurrence was merged away: look again
            w = min(self.where[pair])
            self.first[pair] = (w, min(offset for p, offset in _pair_positions(self.words[w]) if p == pair))
        return -self.counts[pair], self.first[pair]

    def merge(self, pair: Pair) -> set[Pair]:
        """Merge ``pair`` in every word that contains it; return the pairs that gained occurrences."""
        gained: set[Pair] = set()
        emptied: set[Pair] = set()
        for w in self.where[pair].copy():
            gained |= self._merge_in_word(w, pair, emptied)
        for p in emptied:
            if self.counts[p] == 0:
                del self.counts[p], self.where[p], self.first[p]
        return gained & self.counts.keys()

    def _merge_in_word(self, w: int, pair: Pair, emptied: set[Pair]) -> set[Pair]:
        old, new = self.words[w], merge_symbols(self.words[w], pair)
        old_positions, new_positions = _pair_positions(old), _pair_positions(new)
        for p, offset in old_positions - new_positions:  # occurrences the merge removed
            self.counts[p] -= self.freqs[w]
            if self.counts[p] == 0:
                emptied.add(p)
            if self.first[p] == (w, offset):
                self.first[p] = None
        still_there = {p for p, _ in new_positions}
        for p, _ in old_positions:
            if p not in still_there:
                self.where[p].discard(w)
        for p, offset in new_positions - old_positions:  # occurrences the merge created
            self._add(p, w, offset)
        self.words[w] = new
        return {p for p, _ in new_positions - old_positions}


def learn_merges(
    vocab: dict[tuple[str, ...], int],
    num_merges: int,
    min_frequency: int = 1,
    progress: Callable[[int, int], object] | None = None,
) -> list[Pair]:
    """Learn the same merges as :func:`learn_merges_naive`, updating pair counts incrementally.

    After merging a pair, only the words that contain it change, so only their pairs are recounted: an index from
    each pair to the words containing it finds them. The most frequent pair comes from a heap of
    ``(-count, first occurrence, pair)`` entries. The first occurrence is ``(word index, character offset)``: the
    smallest such position is exactly where the naive scan meets the pair first, so ties are broken the same way.

    Entries are never updated in place. An entry is pushed whenever a pair gains occurrences (its priority can only
    improve then); when a pair only loses occurrences its old entry overstates it, and is corrected when it reaches
    the top of the heap. So the heap top, once checked against the current counts, is the best pair.

    ``progress(done, num_merges)`` is called after every merge (for a progress bar).
    """
    index = _PairIndex(vocab)
    heap = [(*index.priority(pair), pair) for pair in index.counts]
    heapq.heapify(heap)
    merges: list[Pair] = []
    while len(merges) < num_merges and heap:
        neg_count, position, pair = heap[0]
        if pair not in index.counts:  # merged away, or no longer occurs
            heapq.heappop(heap)
            continue
        current = index.priority(pair)
        if current != (neg_count, position):  # stale entry: re-file it with its current priority
            heapq.heapreplace(heap, (*current, pair))
            continue
        if index.counts[pair] < min_frequency:
            break
        heapq.heappop(heap)
        merges.append(pair)
        for gained in index.merge(pair):
            heapq.heappush(heap, (*index.priority(gained), gained))
        if progress is not None:
            progress(len(merges), num_merges)
    return merges


def base_alphabet(word_counts: Iterable[str], scheme: str = DEFAULT_SCHEME) -> list[str]:
    """The symbols every word starts from: all 256 bytes, or ``</w>`` plus every character seen in training."""
    if scheme == BYTE_LEVEL:
        return list(BYTE_LEVEL_ALPHABET)
    check_scheme(scheme)
    return [END_OF_WORD, *sorted({char for word in word_counts for char in word})]


class TrainingTexts:
    """``texts`` as both trainers see them: each checked, long words cut (:func:`training_pieces`), noting whether any
    word was seen, for :meth:`check_words_seen`."""

    def __init__(self, texts: Iterable[str]):
        if isinstance(texts, (str, bytes)):  # would train on its characters, one text each
            raise TypeError(f"texts must be an iterable of strings (e.g. a list of lines), not one "
                            f"{type(texts).__name__}: {texts!r:.60}")
        self.texts, self.saw_words = texts, False

    def __iter__(self) -> Iterator[str]:
        for i, text in enumerate(self.texts):
            check_text(text, f"text #{i}")
            self.saw_words = self.saw_words or (not text.isspace() and text != "")
            yield from training_pieces(text)  # very long words cut: training time stays linear

    def check_words_seen(self) -> None:
        if not self.saw_words:
            raise ValueError("the training corpus is empty: it has no words (only empty or whitespace-only text)")


def check_base_size(vocab_size: int, alphabet: int, scheme: str, where: str = "") -> None:
    """Refuse a ``vocab_size`` below the special tokens plus the ``alphabet`` symbols of the base alphabet (``where``:
    whose alphabet, for the message)."""
    if vocab_size < len(SPECIAL_TOKENS) + alphabet:
        raise ValueError(f"vocab_size={vocab_size} is smaller than the {len(SPECIAL_TOKENS)} special tokens plus the "
                         f"{alphabet} symbols of the {scheme} base alphabet{where}; ask for at least "
                         f"{len(SPECIAL_TOKENS) + alphabet}")


def train(
    texts: Iterable[str],
    vocab_size: int,
    scheme: str = DEFAULT_SCHEME,
    min_frequency: int = 2,
    naive: bool = False,
    progress: Callable[[int, int], object] | None = None,
) -> BPE:
    """Train a BPE tokenizer on ``texts`` (an iterable of strings, e.g. lines).

    The vocabulary is the special tokens (ids 0-4), the base alphabet (:func:`base_alphabet`), then one token per
    merge, ``vocab_size`` in all (fewer when the corpus runs out of pairs seen ``min_frequency`` times, or when
    two merges spell the same token). ``naive=True`` uses :func:`learn_merges_naive` (same result, slower).
    """
    check_scheme(scheme)
    check_min_frequency(min_frequency)
    checked = TrainingTexts(texts)
    word_counts = count_words(checked, scheme)
    checked.check_words_seen()
    alphabet = base_alphabet(word_counts, scheme)
    check_base_size(vocab_size, len(alphabet), scheme)
    base_size = len(SPECIAL_TOKENS) + len(alphabet)
    symbols = {word_to_symbols(word, scheme): count for word, count in word_counts.items()}
    if naive:
        merges = learn_merges_naive(symbols, vocab_size - base_size, min_frequency)
    else:
        merges = learn_merges(symbols, vocab_size - base_size, min_frequency, progress)
    tokens = [*SPECIAL_TOKENS, *alphabet, *(a + b for a, b in merges)]
    return BPE(list(dict.fromkeys(tokens)), merges, scheme)


# ----------------------------------------------------------------------------------------------------------------
# Encoding and decoding
# ----------------------------------------------------------------------------------------------------------------


class BPE:
    """A trained BPE tokenizer: a vocabulary, ranked merges and a pre-tokenization scheme.

    ``encode`` follows the same pipeline as the fast tokenizer: special-token strings in the text become their ids,
    the rest is pre-tokenized, each word is split into symbols and merged by rank, and ``</s>`` is appended (the
    ``$A </s>`` template). Words seen before come from a cache.
    """

    def __init__(self, vocab: Sequence[str] | dict[str, int], merges: Sequence[Pair], scheme: str = DEFAULT_SCHEME):
        self.scheme = check_scheme(scheme)
        if not isinstance(vocab, dict):
            vocab = {token: i for i, token in enumerate(vocab)}
        self.vocab: dict[str, int] = dict(vocab)
        self.id_to_token = {i: token for token, i in self.vocab.items()}
        for i, token in enumerate(SPECIAL_TOKENS):
            if self.vocab.get(token) != i:
                raise ValueError(f"the vocabulary must have {token!r} at id {i}, as the model config expects")
        self.merges = [tuple(pair) for pair in merges]
        for pair in self.merges:
            missing = [t for t in (*pair, pair[0] + pair[1]) if t not in self.vocab]
            if len(pair) != 2 or missing:
                raise ValueError(f"merge {pair!r} uses tokens that are not in the vocabulary: {missing}")
        self.ranks: dict[Pair, int] = {pair: rank for rank, pair in enumerate(self.merges)}
        if len(self.ranks) != len(self.merges):
            raise ValueError("the merges list contains the same pair twice")
        self._merged = [a + b for a, b in self.merges]
        self.cache: dict[str, tuple[str, ...]] = {}  # word -> tokens
        self.ids_cache: dict[str, tuple[int, ...]] = {}  # word -> ids
        self._special_split = regex.compile(
            "|".join(
                (WHITESPACE_CLASS + "*" if token in LSTRIP_SPECIAL_TOKENS else "") + regex.escape(token)
                for token in sorted(SPECIAL_TOKENS, key=len, reverse=True)
            )
        )

    def __len__(self) -> int:
        return len(self.vocab)

    def bpe(self, word: str) -> tuple[str, ...]:
        """Segment one pre-tokenized word: apply the learned merges, lowest rank first.

        Symbols form a linked list; a heap holds the candidate merges ``(rank, position)``, so that the leftmost
        occurrence of the best-ranked pair is merged first. After a merge the pairs it formed with its neighbours
        become candidates; entries whose symbols have changed since are skipped. This is what ``tokenizers`` does,
        and it takes O(n log n) even for a 10 MB word (rescanning the word after every merge would take O(n^2)).
        """
        if word in self.cache:
            return self.cache[word]
        symbols = list(word_to_symbols(word, self.scheme))
        nxt = list(range(1, len(symbols) + 1))  # index of the next live symbol (len: none)
        prev = list(range(-1, len(symbols) - 1))  # index of the previous live symbol (-1: none)
        ranks = self.ranks
        heap = [(ranks[pair], i) for i, pair in enumerate(zip(symbols, symbols[1:])) if pair in ranks]
        heapq.heapify(heap)
        while heap:
            rank, i = heapq.heappop(heap)
            j = nxt[i]
            if not symbols[i] or j >= len(symbols) or (symbols[i], symbols[j]) not in ranks:
                continue  # the pair at i has changed since this entry was pushed
            if symbols[i] + symbols[j] != self._merged[rank]:
                continue  # (checked by result, as ``tokenizers`` does: ``a + bc`` may stand for ``ab + c``)
            symbols[i] += symbols[j]  # merge j into i and unlink j
            symbols[j] = ""
            nxt[i] = nxt[j]
            if nxt[j] < len(symbols):
                prev[nxt[j]] = i
            for left in (prev[i], i):
                right = nxt[left] if left >= 0 else len(symbols)
                if left >= 0 and right < len(symbols) and (symbols[left], symbols[right]) in ranks:
                    heapq.heappush(heap, (ranks[symbols[left], symbols[right]], left))
        pieces = tuple(s for s in symbols if s)
        if len(word) < 256 and len(self.cache) < 1_000_000:
            self.cache[word] = pieces
        return pieces

    def _segments(self, text: str) -> list[tuple[bool, str]]:
        """Split ``text`` around special-token strings: ``[(is_special, piece), ...]``."""
        if "<" not in text:  # every special token starts with '<'
            return [(False, text)]
        out: list[tuple[bool, str]] = []
        start = 0
        for match in self._special_split.finditer(text):
            out.append((False, text[start : match.start()]))
            out.append((True, match.group().lstrip(UNICODE_WHITESPACE)))
            start = match.end()
        out.append((False, text[start:]))
        return out

    def tokenize(self, text: str) -> list[str]:
        """The tokens of ``text`` (no template); characters outside the vocabulary become ``<unk>``."""
        tokens: list[str] = []
        for special, piece in self._segments(check_text(text)):
            if special:
                tokens.append(piece)
                continue
            for word in pretokenize(piece, self.scheme):
                tokens.extend(token if token in self.vocab else UNK for token in self.bpe(word))
        return tokens

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of ``text``, followed by ``</s>`` when ``add_special_tokens``."""
        ids: list[int] = []
        cache = self.ids_cache
        for special, piece in self._segments(check_text(text)):
            if special:
                ids.append(self.vocab[piece])
                continue
            for word in pretokenize(piece, self.scheme):
                ids.extend(cache[word] if word in cache else self.word_ids(word))
        return [*ids, self.vocab[EOS]] if add_special_tokens else ids

    def word_ids(self, word: str) -> tuple[int, ...]:
        """The ids of one pre-tokenized word (cached, as ``tokenize`` would give them)."""
        unk = self.vocab[UNK]
        ids = tuple(self.vocab.get(token, unk) for token in self.bpe(word))
        if len(word) < 256 and len(self.ids_cache) < 1_000_000:
            self.ids_cache[word] = ids
        return ids

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """Text of ``ids``. Byte-level decoding is exact; the whitespace scheme joins words with single spaces. An id
        that is not a token of this vocabulary is a ``ValueError``, as in the fast tokenizer."""
        ids = list(ids)
        if bad := [i for i in ids if not isinstance(i, numbers.Integral) or i not in self.id_to_token]:
            raise ValueError(f"decode got {bad[:5]} which are not token ids of this tokenizer (its vocabulary has "
                             f"{len(self)} tokens); were they made by a different tokenizer?")
        tokens = [self.id_to_token[i] for i in ids if not (skip_special_tokens and i < len(SPECIAL_TOKENS))]
        if self.scheme == BYTE_LEVEL:
            data = bytes(BYTE_DECODER[char] for token in tokens for char in token)
            return data.decode("utf-8", errors="replace")
        # as ``tokenizers``' BPEDecoder: the marker is a space, except in the last token
        return "".join(t.replace(END_OF_WORD, " " if k < len(tokens) - 1 else "") for k, t in enumerate(tokens))
