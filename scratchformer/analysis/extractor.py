"""Learned, embedding-layer and contextual embeddings from any Hugging Face encoder or encoder-decoder.

Three different tensors are all called "the embedding of a token". This module keeps them apart, because mixing
them up is the most common mistake in embedding analyses:

1. **Learned embedding** (``layer="learned"``): row ``token_id`` of the input embedding table,
   ``model.get_input_embeddings().weight[token_id]``. It is a trained parameter and the *same vector in every
   sentence*: "bank" by a river and "bank" holding money get the identical row (as long as they are the same token
   id; a byte-level BPE gives "bank" and " bank" different ids). No position, no scaling, no LayerNorm.
2. **Embedding-layer output** (``layer=0``): ``hidden_states[0]``, what layer 1 actually receives. For Scratchformer
   it is ``sqrt(d_model) * learned + sinusoidal positional encoding``; for BERT and DistilBERT it is
   ``LayerNorm(word + position (+ token type))``. It depends on the token's position but not yet on the other
   words. It is *not* the learned vector, although ``hidden_states[0]`` is often mistaken for it.
3. **Contextual embedding** (``layer=k`` for ``k >= 1``, default ``-1`` = ``last_hidden_state``): the output of
   layer ``k``. Self-attention has mixed in the other words, so "bank" near "river" and "bank" near "money" now
   differ. For an encoder-decoder the vectors come from the encoder (``model.get_encoder()``).

Everything runs batched, under ``torch.no_grad()``, with the model in ``eval()`` mode, with texts sorted by length
to limit padding, and with a ``tqdm`` progress bar on long inputs. Results are dataclasses that say which tokens
and which layer were used.

Example::

    from scratchformer.embeddings import EmbeddingExtractor

    ex = EmbeddingExtractor.from_pretrained("path/or/hub-id")
    a = ex.word_embedding("He sat on the river bank.", "bank")            # contextual, last layer, mean of sub-tokens
    b = ex.word_embedding("She took money from the bank.", "bank")
    learned = ex.word_embedding("He sat on the river bank.", "bank", layer="learned")
    print(a.location.tokens, ex.word_similarity(a, b))                    # cosine with its anisotropy baseline

Cosine similarities between contextual vectors are high even for unrelated words (anisotropy: all vectors share a
large common direction), so :meth:`EmbeddingExtractor.word_similarity` reports every cosine next to a baseline,
the mean cosine of unrelated word pairs from the same sentences, and a mean-centred cosine.
"""

from __future__ import annotations

import inspect
import math
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

LEARNED = "learned"
Layer = int | Literal["learned"]
WORD_POOLING_MODES = ("mean", "first", "last")
SENTENCE_POOLING_MODES = ("mean", "max", "cls", "first")
PROGRESS_MIN_TEXTS = 100  # show a progress bar by default from this many texts on
_WORD_RE = re.compile(r"\w+(?:[-'’]\w+)*")


# ----------------------------------------------------------------------------------------------------------------
# Result types
# ----------------------------------------------------------------------------------------------------------------


def describe_layer(layer: Layer, num_layers: int) -> str:
    """A human description of what ``layer`` means (for tables, JSON and plot labels)."""
    if layer == LEARNED:
        return "learned input embedding (raw row of get_input_embeddings(); same vector in every sentence)"
    if layer == 0:
        return ("embedding-layer output hidden_states[0] (input to layer 1: token embedding plus any position encoding "
                "the model adds there, e.g. none with rotary positions; not learned)")
    if layer == num_layers:
        return f"contextual, layer {layer} of {num_layers} (last_hidden_state)"
    return f"contextual, layer {layer} of {num_layers}"


def layer_kind(layer: Layer) -> str:
    """``"learned"``, ``"embedding_output"`` (layer 0) or ``"contextual"``."""
    if layer == LEARNED:
        return "learned"
    return "embedding_output" if layer == 0 else "contextual"


@dataclass
class TokenEmbeddings:
    """One vector per token of ``text``: ``vectors[i]`` belongs to ``tokens[i]`` (special tokens included)."""

    text: str
    tokens: list[str]
    token_ids: list[int]
    offsets: list[tuple[int, int]] | None  # character span of each token in ``text``; (0, 0) for special tokens
    layer: Layer  # "learned", or the index into hidden_states (0 = embedding-layer output), never negative
    kind: str  # "learned" | "embedding_output" | "contextual"
    description: str
    vectors: torch.Tensor  # (num_tokens, hidden_size)
    truncated: bool = False  # the text was longer than the model's maximum and was cut


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


@dataclass
class WordEmbedding:
    """The vector of one word occurrence: its sub-token vectors at ``layer`` pooled with ``pooling``."""

    location: WordLocation
    layer: Layer
    kind: str
    pooling: str  # "mean" | "first" | "last"
    used_token_indices: list[int]  # the tokens that went into the vector (all for mean, one for first/last)
    vector: torch.Tensor  # (hidden_size,)

    @property
    def word(self) -> str:
        return self.location.word

    @property
    def used_tokens(self) -> list[str]:
        idx = self.location.token_indices
        return [self.location.tokens[idx.index(i)] for i in self.used_token_indices]


@dataclass
class SentenceEmbeddings:
    """One vector per sentence, pooled over its tokens with padding masked out."""

    sentences: list[str]
    layer: Layer
    kind: str
    pooling: str
    vectors: torch.Tensor  # (num_sentences, hidden_size)
    truncated: list[bool] = field(default_factory=list)


@dataclass
class Similarity:
    """A cosine reported with what it should be compared against.

    ``baseline`` is the mean cosine of unrelated word pairs (different words) from the same sentences: a cosine only
    means "similar" when it is clearly above it. ``centred_cosine`` is the cosine after subtracting the mean of all
    word vectors of the sentences involved (an anisotropy correction); unrelated words score near 0 there.
    """

    cosine: float
    baseline: float | None
    baseline_pairs: int
    centred_cosine: float | None

    @property
    def above_baseline(self) -> float | None:
        return None if self.baseline is None else self.cosine - self.baseline

    def as_dict(self) -> dict[str, Any]:
        return {
            "cosine": self.cosine,
            "baseline": self.baseline,
            "baseline_pairs": self.baseline_pairs,
            "above_baseline": self.above_baseline,
            "centred_cosine": self.centred_cosine,
        }


@dataclass
class AttentionMaps:
    """Attention probabilities for one sentence, each ``(layers, heads, queries, keys)``.

    For an encoder-decoder the decoder reads ``decoder_tokens`` (teacher forcing) and ``cross`` maps decoder
    queries onto encoder keys.
    """

    tokens: list[str]
    encoder: torch.Tensor
    decoder_tokens: list[str] | None = None
    decoder: torch.Tensor | None = None
    cross: torch.Tensor | None = None


# ----------------------------------------------------------------------------------------------------------------
# Pooling and similarity (pure functions)
# ----------------------------------------------------------------------------------------------------------------


def pool_tokens(token_embeddings: torch.Tensor, attention_mask: torch.Tensor, mode: str = "mean") -> torch.Tensor:
    """Pool ``(batch, tokens, hidden)`` into ``(batch, hidden)`` ignoring positions where ``attention_mask`` is 0.

    ``mean`` divides the masked sum by the number of real tokens, ``max`` takes the maximum over real tokens only,
    ``cls``/``first`` takes the first real token (also under left padding). These are the formulas of
    sentence-transformers' ``Pooling`` module, so the results agree with it.
    """
    if mode not in SENTENCE_POOLING_MODES:
        raise ValueError(f"pooling={mode!r} is not supported; use one of {SENTENCE_POOLING_MODES}")
    if token_embeddings.dim() != 3 or attention_mask.shape != token_embeddings.shape[:2]:
        raise ValueError(
            f"pool_tokens expects token_embeddings (batch, tokens, hidden) and attention_mask (batch, tokens); got "
            f"{tuple(token_embeddings.shape)} and {tuple(attention_mask.shape)}"
        )
    if (attention_mask.sum(dim=1) == 0).any():
        raise ValueError("pool_tokens: a row of attention_mask has no real token; nothing to pool (empty text?)")
    mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)
    if mode == "mean":
        return (token_embeddings * mask).sum(dim=1) / torch.clamp(mask.sum(dim=1), min=1e-9)
    if mode == "max":
        return token_embeddings.masked_fill(mask == 0, float("-inf")).max(dim=1).values
    first = attention_mask.to(torch.int).argmax(dim=1)  # cls / first
    return token_embeddings[torch.arange(token_embeddings.shape[0]), first]


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine similarity of two vectors, as a Python float (0.0 when one of them is all zeros)."""
    return float(torch.nn.functional.cosine_similarity(a.double().flatten(), b.double().flatten(), dim=0, eps=1e-12))


def unrelated_pair_baseline(groups: Sequence[Sequence[tuple[str, torch.Tensor]]]) -> tuple[float | None, int]:
    """Mean cosine of "unrelated" word pairs: pairs ``(u, v)`` taken from *different* groups (sentences) whose
    words differ (case-insensitively). Returns ``(mean, number_of_pairs)``; ``(None, 0)`` when there is no pair.
    """
    total, count = 0.0, 0
    for i, group_a in enumerate(groups):
        for group_b in groups[i + 1 :]:
            for word_a, vec_a in group_a:
                for word_b, vec_b in group_b:
                    if word_a.lower() != word_b.lower():
                        total += cosine(vec_a, vec_b)
                        count += 1
    return (total / count if count else None), count


def centred_cosine(a: torch.Tensor, b: torch.Tensor, mean: torch.Tensor) -> float:
    """Cosine after subtracting ``mean`` (the average vector of a pool of words): removes the shared direction."""
    return cosine(a - mean, b - mean)


def sentence_words(sentence: str) -> list[tuple[str, int, int]]:
    """The words of ``sentence`` as ``(word, start, end)``; punctuation is not a word."""
    return [(m.group(), m.start(), m.end()) for m in _WORD_RE.finditer(sentence)]


# ----------------------------------------------------------------------------------------------------------------
# The extractor
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class _Encoded:
    """One tokenized text (internal)."""

    text: str
    input_ids: list[int]
    offsets: list[tuple[int, int]] | None
    special: list[bool]
    token_type_ids: list[int] | None
    truncated: bool


def _forward_takes_decoder_inputs(module: torch.nn.Module) -> bool:
    try:
        return "decoder_input_ids" in inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return False


class EmbeddingExtractor:
    """Extract learned, embedding-layer and contextual vectors from ``model`` with its ``tokenizer``.

    Args:
        model: any Hugging Face encoder (BERT, DistilBERT, ``ScratchformerEncoderModel``...) or encoder-decoder
            (``ScratchformerForConditionalGeneration``, BART, T5...); for an encoder-decoder the encoder is used.
        tokenizer: its tokenizer. Word location needs a *fast* tokenizer (character offsets).
        batch_size: texts per forward pass.
        max_length: most tokens per text (special tokens included); default: the smaller of the tokenizer's
            ``model_max_length`` and the config's ``max_position_embeddings``.
        long_inputs: ``"truncate"`` (default) cuts longer texts to ``max_length`` with a warning;
            ``"error"`` raises ``ValueError`` instead. A word that falls past the cut always raises.
        progress: show a tqdm bar; default ``None`` shows it from ``PROGRESS_MIN_TEXTS`` texts on.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        *,
        batch_size: int = 32,
        max_length: int | None = None,
        long_inputs: Literal["truncate", "error"] = "truncate",
        progress: bool | None = None,
    ) -> None:
        if not isinstance(model, torch.nn.Module):
            raise ValueError(f"model must be a torch.nn.Module (a Hugging Face model), got {type(model).__name__}")
        if not callable(tokenizer):
            raise ValueError(f"tokenizer must be a Hugging Face tokenizer, got {type(tokenizer).__name__}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size={batch_size!r} must be a positive integer")
        if long_inputs not in ("truncate", "error"):
            raise ValueError(f"long_inputs={long_inputs!r} must be 'truncate' or 'error'")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.long_inputs = long_inputs
        self.progress = progress
        # An encoder-decoder's forward needs decoder inputs; its encoder alone gives the vectors we want. An
        # encoder-only model is used as it is (BertModel.get_encoder() would return the bare layer stack).
        self.encoder = model.get_encoder() if _forward_takes_decoder_inputs(model) else model
        params = inspect.signature(self.encoder.forward).parameters
        self._takes_token_type_ids = "token_type_ids" in params
        self.max_length = max_length if max_length is not None else self._default_max_length()
        if self.max_length is not None and (not isinstance(self.max_length, int) or self.max_length < 2):
            raise ValueError(f"max_length={self.max_length!r} must be an integer >= 2")

    # -- construction ------------------------------------------------------------------------------------------

    @classmethod
    def from_pretrained(
        cls, source: str, *, trust_remote_code: bool = False, with_decoder: bool = False, **kwargs: Any
    ) -> EmbeddingExtractor:
        """Load tokenizer and model (an alias, a folder or a Hub id: :func:`scratchformer.loading.load`);
        ``kwargs`` go to ``__init__``."""
        from ..loading import load

        model, tokenizer = load(source, task="seq2seq" if with_decoder else "encoder",
                                trust_remote_code=trust_remote_code)
        return cls(model, tokenizer, **kwargs)

    def _default_max_length(self) -> int | None:
        candidates = []
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(tok_max, int) and 0 < tok_max < 1_000_000:
            candidates.append(tok_max)
        config = getattr(self.model, "config", None)
        uses_table = getattr(config, "position_embedding_type", "absolute") not in ("sinusoidal", "rope")
        pos_max = getattr(config, "max_position_embeddings", None)
        if uses_table and isinstance(pos_max, int) and pos_max > 0:
            candidates.append(pos_max)
        return min(candidates) if candidates else None

    @property
    def num_layers(self) -> int:
        """Number of layers of the (encoder) stack: valid layers are ``0..num_layers`` and ``"learned"``."""
        config = self.model.config
        for name in ("encoder_layers", "num_hidden_layers", "n_layers", "num_layers"):
            value = getattr(config, name, None)
            if isinstance(value, int):
                return value
        raise ValueError(f"cannot tell the number of layers of {type(self.model).__name__} from its config")

    @property
    def model_name(self) -> str:
        return str(getattr(self.model.config, "_name_or_path", "") or type(self.model).__name__)

    def resolve_layer(self, layer: Layer) -> Layer:
        """Check ``layer`` and turn a negative index into a non-negative one (``-1`` -> ``num_layers``)."""
        if layer == LEARNED:
            return LEARNED
        n = self.num_layers
        if isinstance(layer, bool) or not isinstance(layer, int) or not -(n + 1) <= layer <= n:
            raise ValueError(
                f"layer={layer!r} is out of range for a model with {n} layers: use 'learned' (the raw embedding "
                f"table), 0 (embedding-layer output), 1..{n} (layer outputs) or a negative index (-1 = last)"
            )
        return layer % (n + 1)

    def input_embedding_table(self) -> torch.Tensor:
        """The learned input embedding matrix ``(vocab_size, hidden_size)``; ``ValueError`` if the model has none."""
        try:
            embeddings = self.model.get_input_embeddings()
        except (NotImplementedError, AttributeError) as error:
            embeddings, cause = None, error
        else:
            cause = None
        weight = getattr(embeddings, "weight", None)
        if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
            raise ValueError(
                f"{type(self.model).__name__} has no input embedding table (get_input_embeddings() gave "
                f"{type(embeddings).__name__}{f': {cause}' if cause else ''}); learned embeddings need a model "
                "whose get_input_embeddings() returns an nn.Embedding"
            ) from cause
        return weight

    # -- tokenization ------------------------------------------------------------------------------------------

    def _tokenize(self, texts: Sequence[str]) -> list[_Encoded]:
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise ValueError(f"expected a list of texts, got {type(texts).__name__}")
        if len(texts) == 0:
            raise ValueError("no texts given: pass at least one non-empty sentence")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise ValueError(f"text {i} is a {type(text).__name__}, not a str")
            if not text.strip():
                raise ValueError(f"text {i} is empty: {text!r}; every sentence needs at least one word")
        fast = bool(getattr(self.tokenizer, "is_fast", False))
        kwargs: dict[str, Any] = dict(return_special_tokens_mask=True, return_offsets_mapping=fast)
        if self.max_length is not None and fast:
            kwargs.update(truncation=True, max_length=self.max_length, return_overflowing_tokens=True)
        enc = self.tokenizer(list(texts), **kwargs)
        rows = enc.get("overflow_to_sample_mapping", list(range(len(texts))))
        result: list[_Encoded | None] = [None] * len(texts)
        truncated: list[int] = []
        for row, sample in enumerate(rows):
            if result[sample] is not None:  # an overflow row: the text was longer than max_length
                if not result[sample].truncated:
                    result[sample].truncated = True
                    truncated.append(sample)
                continue
            ids = list(enc["input_ids"][row])
            result[sample] = _Encoded(
                text=texts[sample],
                input_ids=ids,
                offsets=[tuple(o) for o in enc["offset_mapping"][row]] if fast else None,
                special=[bool(s) for s in enc["special_tokens_mask"][row]],
                token_type_ids=list(enc["token_type_ids"][row]) if "token_type_ids" in enc else None,
                truncated=False,
            )
        if not fast and self.max_length is not None:  # slow tokenizer: check lengths ourselves
            for i, item in enumerate(result):
                if len(item.input_ids) > self.max_length:
                    truncated.append(i)
        if truncated:
            first = texts[truncated[0]]
            message = (
                f"{len(truncated)} text(s) are longer than the model's maximum of {self.max_length} tokens, e.g. "
                f"text {truncated[0]} ({first[:60]!r}...)"
            )
            if not fast:
                raise ValueError(f"{message}; shorten them (only fast tokenizers can be truncated here)")
            if self.long_inputs == "error":
                raise ValueError(f"{message}; shorten them, or use long_inputs='truncate' to cut them")
            warnings.warn(f"{message}; they were truncated to {self.max_length} tokens", stacklevel=3)
        return result

    def tokens(self, ids: Sequence[int]) -> list[str]:
        return list(self.tokenizer.convert_ids_to_tokens(list(ids)))

    # -- the forward pass --------------------------------------------------------------------------------------

    def _show_progress(self, n: int) -> bool:
        return self.progress if self.progress is not None else n >= PROGRESS_MIN_TEXTS

    def _forward_batch(self, batch: list[_Encoded], output_attentions: bool = False) -> Any:
        pad_id = self.tokenizer.pad_token_id
        pad_id = 0 if pad_id is None else pad_id
        length = max(len(e.input_ids) for e in batch)
        device = next(self.model.parameters()).device
        input_ids = torch.full((len(batch), length), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(batch), length), dtype=torch.long)
        for b, e in enumerate(batch):
            input_ids[b, : len(e.input_ids)] = torch.tensor(e.input_ids)
            attention_mask[b, : len(e.input_ids)] = 1
        inputs = {"input_ids": input_ids.to(device), "attention_mask": attention_mask.to(device)}
        if self._takes_token_type_ids and all(e.token_type_ids is not None for e in batch):
            token_type_ids = torch.zeros_like(input_ids)
            for b, e in enumerate(batch):
                token_type_ids[b, : len(e.token_type_ids)] = torch.tensor(e.token_type_ids)
            inputs["token_type_ids"] = token_type_ids.to(device)
        return self.encoder(**inputs, output_hidden_states=True, output_attentions=output_attentions, return_dict=True)

    def _map(self, texts: Sequence[str], keep: Callable[[int, _Encoded, torch.Tensor], Any]) -> list[Any]:
        """Run every text through the encoder (sorted by length, batched) and return ``keep(i, encoded, hidden)``
        for each text ``i``, where ``hidden`` is ``(num_layers + 1, num_tokens, hidden_size)`` for that text alone
        (its padding already cut off)."""
        from tqdm.auto import tqdm

        encoded = self._tokenize(texts)
        order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i].input_ids))
        results: list[Any] = [None] * len(encoded)
        with (
            torch.no_grad(),
            tqdm(total=len(encoded), desc="embedding", unit="text", disable=not self._show_progress(len(texts))) as bar,
        ):
            for start in range(0, len(order), self.batch_size):
                index = order[start : start + self.batch_size]
                output = self._forward_batch([encoded[i] for i in index])
                if not output.hidden_states:
                    raise ValueError(f"{type(self.encoder).__name__} returned no hidden_states")
                hidden = torch.stack(output.hidden_states, dim=1).float().cpu()  # (B, L+1, T, d)
                for b, i in enumerate(index):
                    results[i] = keep(i, encoded[i], hidden[b, :, : len(encoded[i].input_ids)])
                bar.update(len(index))
        return results

    def _vectors(self, encoded: _Encoded, hidden: torch.Tensor, layer: Layer) -> torch.Tensor:
        """``(num_tokens, hidden_size)`` vectors of one text at a resolved layer."""
        if layer == LEARNED:
            table = self.input_embedding_table()
            return table[torch.tensor(encoded.input_ids, device=table.device)].detach().float().cpu()
        return hidden[layer]

    # -- token-level -------------------------------------------------------------------------------------------

    def token_embeddings(self, texts: str | Sequence[str], layer: Layer = -1) -> list[TokenEmbeddings]:
        """Per-token vectors of each text at ``layer`` ("learned", 0 = embedding-layer output, k = layer k)."""
        texts = [texts] if isinstance(texts, str) else texts
        layer = self.resolve_layer(layer)
        if layer == LEARNED:
            self.input_embedding_table()  # fail before the forward pass

        def keep(i: int, e: _Encoded, hidden: torch.Tensor) -> TokenEmbeddings:
            return TokenEmbeddings(
                text=e.text,
                tokens=self.tokens(e.input_ids),
                token_ids=e.input_ids,
                offsets=e.offsets,
                layer=layer,
                kind=layer_kind(layer),
                description=describe_layer(layer, self.num_layers),
                vectors=self._vectors(e, hidden, layer),
                truncated=e.truncated,
            )

        return self._map(texts, keep)

    def learned_embeddings(self, text: str) -> TokenEmbeddings:
        """The raw learned rows of the embedding table for each token of ``text`` (no position, no context)."""
        return self.token_embeddings(text, layer=LEARNED)[0]

    def embedding_layer_output(self, text: str) -> TokenEmbeddings:
        """``hidden_states[0]``: what layer 1 receives (token embedding + position, maybe scaled/normalised)."""
        return self.token_embeddings(text, layer=0)[0]

    def contextual_embeddings(self, text: str, layer: int = -1) -> TokenEmbeddings:
        """Contextual vectors of each token after ``layer`` (default: the last layer, ``last_hidden_state``)."""
        if layer == LEARNED or layer == 0 or layer == -(self.num_layers + 1):
            raise ValueError(
                f"layer={layer!r} is not contextual: use learned_embeddings() or embedding_layer_output(), "
                f"or a layer 1..{self.num_layers} / -1"
            )
        return self.token_embeddings(text, layer=layer)[0]

    # -- word-level --------------------------------------------------------------------------------------------

    def _find_span(self, sentence: str, word: str, occurrence: int) -> tuple[int, int, int]:
        if not isinstance(word, str) or not word.strip():
            raise ValueError(f"word={word!r} is empty; give the word to look for in the sentence")
        word = word.strip()
        pattern = r"(?<!\w)" + re.escape(word) + r"(?!\w)"
        matches = list(re.finditer(pattern, sentence))
        if not matches:
            other_case = sorted({m.group() for m in re.finditer(pattern, sentence, flags=re.IGNORECASE)})
            hint = f" It occurs with other capitalisation as {other_case}; pass that spelling." if other_case else ""
            tokens = self.tokens(self._tokenize([sentence])[0].input_ids)
            raise ValueError(
                f"word {word!r} is not a whole word of the sentence {sentence!r}.{hint} "
                f"The sentence's words: {[w for w, _, _ in sentence_words(sentence)]}; its tokens: {tokens}"
            )
        if isinstance(occurrence, bool) or not isinstance(occurrence, int) or not -len(matches) <= occurrence < len(
            matches
        ):
            raise ValueError(
                f"occurrence={occurrence!r} is out of range: {word!r} occurs {len(matches)} time(s) in "
                f"{sentence!r}; use 0..{len(matches) - 1} (0 = first, -1 = last)"
            )
        match = matches[occurrence]
        return match.start(), match.end(), occurrence % len(matches)

    def _locate(self, e: _Encoded, start: int, end: int, occurrence: int) -> WordLocation:
        if e.offsets is None:
            raise ValueError(
                f"{type(self.tokenizer).__name__} gives no character offsets; word location needs a fast tokenizer "
                "(AutoTokenizer.from_pretrained(...) returns one for every tokenizer.json)"
            )
        indices, extends = [], False
        for i, ((a, b), special) in enumerate(zip(e.offsets, e.special)):
            if special or a >= b or not (a < end and b > start):
                continue
            # byte-level BPE offsets may include the leading space ('Ġbank' -> ' bank'): do not count it
            a += len(e.text[a:b]) - len(e.text[a:b].lstrip())
            extends = extends or a < start or b > end
            indices.append(i)
        if not indices:
            detail = (
                f"it lies past the model's maximum of {self.max_length} tokens (the text was truncated)"
                if e.truncated
                else "no token covers it"
            )
            raise ValueError(f"cannot embed {e.text[start:end]!r} at characters {start}-{end} of {e.text!r}: {detail}")
        ids = [e.input_ids[i] for i in indices]
        return WordLocation(
            sentence=e.text,
            word=e.text[start:end],
            occurrence=occurrence,
            char_start=start,
            char_end=end,
            token_indices=indices,
            tokens=self.tokens(ids),
            token_ids=ids,
            extends_beyond_word=extends,
        )

    def locate_word(self, sentence: str, word: str, occurrence: int = 0) -> WordLocation:
        """Find the ``occurrence``-th (0-based, ``-1`` = last) whole-word ``word`` in ``sentence`` and its tokens.

        Matching is case-sensitive on the original text; the tokens come from the tokenizer's character offsets, so
        it works for WordPiece (``bank ##s``), byte-level BPE (``Ġbank``, whose offsets may include the space) and
        ``</w>`` BPE alike.
        """
        start, end, occurrence = self._find_span(sentence, word, occurrence)
        return self._locate(self._tokenize([sentence])[0], start, end, occurrence)

    def _check_span(self, sentence: str, span: tuple[int, int]) -> tuple[int, int]:
        try:
            start, end = (int(span[0]), int(span[1]))
        except (TypeError, ValueError, IndexError):
            raise ValueError(f"span={span!r} must be a pair of character positions (start, end)") from None
        if not 0 <= start < end <= len(sentence) or not sentence[start:end].strip():
            raise ValueError(
                f"span=({start}, {end}) does not select a word of the {len(sentence)}-character sentence {sentence!r}"
            )
        return start, end

    def word_embeddings(
        self,
        queries: Sequence[tuple[str, str | tuple[int, int]] | tuple[str, str, int]],
        layers: Layer | Sequence[Layer] = -1,
        pooling: str = "mean",
    ) -> list[list[WordEmbedding]]:
        """Batched word vectors. Each query is ``(sentence, word)``, ``(sentence, word, occurrence)`` or
        ``(sentence, (start, end))`` (a character span). Returns, per query, one :class:`WordEmbedding` per layer
        in ``layers`` (one forward pass for all layers)."""
        if pooling not in WORD_POOLING_MODES:
            raise ValueError(f"pooling={pooling!r} is not supported for words; use one of {WORD_POOLING_MODES}")
        single = isinstance(layers, (int, str))
        layer_list = [self.resolve_layer(x) for x in ([layers] if single else layers)]
        if not layer_list:
            raise ValueError("layers is empty: give at least one layer")
        if LEARNED in layer_list:
            self.input_embedding_table()
        spans = []
        for q, query in enumerate(queries):
            if not isinstance(query, tuple) or len(query) not in (2, 3) or not isinstance(query[0], str):
                raise ValueError(f"query {q} = {query!r}: use (sentence, word), (sentence, word, n) or (sentence, (start, end))")
            sentence, target = query[0], query[1]
            if not sentence.strip():
                raise ValueError(f"query {q}: the sentence is empty")
            if isinstance(target, tuple):
                spans.append((*self._check_span(sentence, target), 0))
            else:
                spans.append(self._find_span(sentence, target, query[2] if len(query) == 3 else 0))

        def keep(i: int, e: _Encoded, hidden: torch.Tensor) -> list[WordEmbedding]:
            location = self._locate(e, *spans[i])
            return [self._pool_word(e, hidden, location, layer, pooling) for layer in layer_list]

        return self._map([query[0] for query in queries], keep)

    def _pool_word(
        self, e: _Encoded, hidden: torch.Tensor, location: WordLocation, layer: Layer, pooling: str
    ) -> WordEmbedding:
        used = {"mean": location.token_indices, "first": location.token_indices[:1], "last": location.token_indices[-1:]}
        used = used[pooling]
        vectors = self._vectors(e, hidden, layer)
        return WordEmbedding(
            location=location,
            layer=layer,
            kind=layer_kind(layer),
            pooling=pooling,
            used_token_indices=list(used),
            vector=vectors[used].mean(dim=0),
        )

    def word_embedding(
        self, sentence: str, word: str | tuple[int, int], occurrence: int = 0, layer: Layer = -1, pooling: str = "mean"
    ) -> WordEmbedding:
        """The vector of one word occurrence in its sentence (see :meth:`locate_word` for how it is found).

        ``word`` may also be a character span ``(start, end)``. ``pooling`` combines the word's sub-tokens:
        ``"mean"`` (default), ``"first"`` or ``"last"``; ``result.used_tokens`` says which were used.
        """
        query = (sentence, word) if isinstance(word, tuple) else (sentence, word, occurrence)
        return self.word_embeddings([query], layers=layer, pooling=pooling)[0][0]

    def sentence_word_embeddings(
        self, sentences: str | Sequence[str], layers: Layer | Sequence[Layer] = -1, pooling: str = "mean"
    ) -> list[list[list[WordEmbedding]]]:
        """Vectors of every word (see :func:`sentence_words`) of each sentence: ``result[s][w][l]`` is word ``w``
        of sentence ``s`` at the ``l``-th of ``layers``. Words past a truncation are left out."""
        sentences = [sentences] if isinstance(sentences, str) else list(sentences)
        single = isinstance(layers, (int, str))
        layer_list = [self.resolve_layer(x) for x in ([layers] if single else layers)]
        if pooling not in WORD_POOLING_MODES:
            raise ValueError(f"pooling={pooling!r} is not supported for words; use one of {WORD_POOLING_MODES}")

        def keep(i: int, e: _Encoded, hidden: torch.Tensor) -> list[list[WordEmbedding]]:
            words = []
            kept_until = max((b for (_, b), special in zip(e.offsets or [], e.special) if not special), default=0)
            for _, start, end in sentence_words(e.text):
                if e.truncated and start >= kept_until:
                    continue  # cut off by truncation
                location = self._locate(e, start, end, 0)
                words.append([self._pool_word(e, hidden, location, layer, pooling) for layer in layer_list])
            return words

        return self._map(sentences, keep)

    def word_similarity(self, a: WordEmbedding, b: WordEmbedding) -> Similarity:
        """Cosine of two word vectors (same layer and pooling), with the unrelated-pair baseline and the
        mean-centred cosine computed from all words of their sentences (the two target words excluded)."""
        if a.layer != b.layer or a.pooling != b.pooling:
            raise ValueError(f"compare vectors of the same layer and pooling, got {a.layer}/{a.pooling} and {b.layer}/{b.pooling}")
        same_sentence = a.location.sentence == b.location.sentence
        texts = [a.location.sentence] if same_sentence else [a.location.sentence, b.location.sentence]
        per_sentence = self.sentence_word_embeddings(texts, layers=a.layer, pooling=a.pooling)
        targets = {a.word.lower(), b.word.lower()}
        groups = [[(w[0].word, w[0].vector) for w in words if w[0].word.lower() not in targets] for words in per_sentence]
        if same_sentence:  # pairs within the one sentence
            groups = [[item] for item in groups[0]]
        baseline, pairs = unrelated_pair_baseline(groups)
        pool = torch.stack([w[0].vector for words in per_sentence for w in words])
        return Similarity(
            cosine=cosine(a.vector, b.vector),
            baseline=baseline,
            baseline_pairs=pairs,
            centred_cosine=centred_cosine(a.vector, b.vector, pool.mean(dim=0)) if len(pool) > 2 else None,
        )

    # -- sentence-level ----------------------------------------------------------------------------------------

    def sentence_embeddings(
        self,
        sentences: str | Sequence[str],
        pooling: str = "mean",
        layer: Layer = -1,
        exclude_special_tokens: bool = False,
    ) -> SentenceEmbeddings:
        """One vector per sentence: ``pooling`` (``mean``, ``max``, ``cls``/``first``) over its tokens at ``layer``.

        Each sentence is pooled over its own tokens only, so the result does not depend on which other sentences
        share its batch or how much padding they add. With the defaults (special tokens included, last layer) the
        vectors equal sentence-transformers' ``Pooling`` on the same model's ``last_hidden_state``.
        """
        sentences = [sentences] if isinstance(sentences, str) else list(sentences)
        if pooling not in SENTENCE_POOLING_MODES:
            raise ValueError(f"pooling={pooling!r} is not supported; use one of {SENTENCE_POOLING_MODES}")
        layer = self.resolve_layer(layer)
        truncated = [False] * len(sentences)

        def keep(i: int, e: _Encoded, hidden: torch.Tensor) -> torch.Tensor:
            truncated[i] = e.truncated
            vectors = self._vectors(e, hidden, layer)
            mask = torch.tensor([not s for s in e.special] if exclude_special_tokens else [1] * len(e.special))
            if not mask.any():
                raise ValueError(f"sentence {i} ({e.text!r}) has no token besides special tokens")
            return pool_tokens(vectors[None], mask[None], pooling)[0]

        vectors = self._map(sentences, keep)
        return SentenceEmbeddings(
            sentences=sentences,
            layer=layer,
            kind=layer_kind(layer),
            pooling=pooling,
            vectors=torch.stack(vectors),
            truncated=truncated,
        )

    # -- attention ---------------------------------------------------------------------------------------------

    def attention_maps(self, sentence: str) -> AttentionMaps:
        """Attention probabilities for one sentence (heads kept apart).

        For an encoder-decoder the decoder is fed the sentence itself shifted right (teacher forcing, as in
        training a denoising autoencoder), so decoder self-attention and cross-attention can be shown too.
        Models whose default attention kernel (sdpa) returns no weights are switched to eager for this call.
        """
        e = self._tokenize([sentence])[0]
        tokens = self.tokens(e.input_ids)
        seq2seq = self.encoder is not self.model
        if not seq2seq:
            output = self._eager_if_needed(lambda: self._forward_batch([e], output_attentions=True), "attentions")
            return AttentionMaps(tokens=tokens, encoder=_stack_attention(output.attentions))
        config = self.model.config
        start = next(
            (x for x in (config.decoder_start_token_id, config.bos_token_id, config.pad_token_id) if x is not None), 0
        )
        decoder_ids = [start] + e.input_ids[:-1]
        device = next(self.model.parameters()).device

        def run() -> Any:
            with torch.no_grad():
                return self.model(
                    input_ids=torch.tensor([e.input_ids], device=device),
                    attention_mask=torch.ones(1, len(e.input_ids), dtype=torch.long, device=device),
                    decoder_input_ids=torch.tensor([decoder_ids], device=device),
                    output_attentions=True,
                    return_dict=True,
                )

        output = self._eager_if_needed(run, "encoder_attentions")
        return AttentionMaps(
            tokens=tokens,
            encoder=_stack_attention(output.encoder_attentions),
            decoder_tokens=self.tokens(decoder_ids),
            decoder=_stack_attention(output.decoder_attentions),
            cross=_stack_attention(output.cross_attentions),
        )

    def _eager_if_needed(self, run: Callable[[], Any], field_name: str) -> Any:
        """Run with eager attention (sdpa and flash kernels return no weights), then restore the previous kernel."""
        previous = getattr(self.model.config, "_attn_implementation", None)
        switch = previous not in (None, "eager") and hasattr(self.model, "set_attn_implementation")
        if switch:
            try:
                self.model.set_attn_implementation("eager")
            except (ValueError, NotImplementedError):
                switch = False
        try:
            with torch.no_grad():
                output = run()
        finally:
            if switch:
                self.model.set_attn_implementation(previous)
        if not _has_attention(getattr(output, field_name, None)):
            raise ValueError(f"{type(self.model).__name__} returned no attention weights ({field_name})")
        return output


def _has_attention(attentions: Any) -> bool:
    return bool(attentions) and all(a is not None for a in attentions)


def _stack_attention(attentions: Any) -> torch.Tensor:
    """HF tuple of ``(1, heads, q, k)`` per layer -> ``(layers, heads, q, k)``."""
    if not _has_attention(attentions):
        raise ValueError("the model returned no attention weights")
    return torch.stack([a[0] for a in attentions]).float().cpu()


# ----------------------------------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class LoadedModel:
    """A model ready for analysis: its label for tables and plots, where it came from, and its extractor."""

    label: str
    source: str
    random_init: bool
    extractor: EmbeddingExtractor
    note: str = ""


RANDOM_NOTE = ("paper base sizes, random weights (seed 0), our byte-level BPE trained on the study sentences only; "
               "what a Transformer gives before any training")


def load_extractor(name: str, *, batch_size: int = 32, texts: Sequence[str] | None = None,
                   with_decoder: bool = False, trust_remote_code: bool = False) -> LoadedModel:
    """:func:`scratchformer.loading.load` (an alias, a folder or a Hub id) wrapped in an :class:`EmbeddingExtractor`.
    ``with_decoder`` loads an encoder-decoder whole (decoder and cross attention maps); ``texts`` train the tokenizer
    of ``random-scratchformer``."""
    from ..loading import RANDOM_SCRATCHFORMER, describe, load, resolve

    model, tokenizer = load(name, task="seq2seq" if with_decoder else "encoder", texts=texts,
                            trust_remote_code=trust_remote_code)
    random_init = str(name) == RANDOM_SCRATCHFORMER
    return LoadedModel(describe(name), str(name) if random_init else resolve(name), random_init,
                       EmbeddingExtractor(model, tokenizer, batch_size=batch_size),
                       RANDOM_NOTE if random_init else "")


def finite_or_none(value: float | None) -> float | None:
    """JSON-safe float (``None`` for missing or non-finite values)."""
    return None if value is None or not math.isfinite(value) else float(value)
