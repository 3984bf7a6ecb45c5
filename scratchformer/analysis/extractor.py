"""Learned, embedding-layer and contextual embeddings from any Hugging Face encoder or encoder-decoder
(:class:`EmbeddingExtractor`; the three kinds and its API: docs/embeddings.md)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import ScratchformerError, quoted
from .attention import AttentionMaps, attention_maps
from .encoding import Encoded, TextEncoder
from .layers import (
    LEARNED,
    Layer,
    count_layers,
    describe_layer,
    is_contextual,
    layer_kind,
    resolve_layers,
    vectors_at,
)
from .pooling import pool_sentence, pool_word
from .results import SentenceEmbeddings, TokenEmbeddings, WordEmbedding
from .similarity import Similarity, similarity_in_context
from .words import WordLocation, WordQuery, WordSpan, find_word, locate, parse_query, words_kept


class EmbeddingExtractor(TextEncoder):
    """Learned, embedding-layer and contextual vectors of words, tokens and sentences from any Hugging Face encoder
    or encoder-decoder; the arguments are :class:`~scratchformer.analysis.encoding.TextEncoder`'s."""

    @classmethod
    def from_pretrained(cls, source: str, *, trust_remote_code: bool = False, with_decoder: bool = False,
                        **kwargs: Any) -> EmbeddingExtractor:
        """Load model and tokenizer with :func:`scratchformer.loading.load`; ``kwargs`` go to ``__init__``."""
        from ..loading import load

        model, tokenizer = load(source, task="seq2seq" if with_decoder else "encoder",
                                trust_remote_code=trust_remote_code)
        return cls(model, tokenizer, **kwargs)

    @property
    def num_layers(self) -> int:
        """Number of layers of the (encoder) stack: valid layers are ``0..num_layers`` and ``"learned"``."""
        return count_layers(self.model)

    @property
    def model_name(self) -> str:
        return str(getattr(self.model.config, "_name_or_path", "") or type(self.model).__name__)

    def token_embeddings(self, texts: str | Sequence[str], layer: Layer = -1) -> list[TokenEmbeddings]:
        """Per-token vectors of each text at ``layer`` ("learned", 0 = embedding-layer output, k = layer k)."""
        texts = [texts] if isinstance(texts, str) else texts
        (layer,) = resolve_layers(layer, self.num_layers)

        def keep(i: int, e: Encoded, hidden: torch.Tensor) -> TokenEmbeddings:
            return TokenEmbeddings(
                text=e.text,
                tokens=self.tokens(e.input_ids),
                token_ids=e.input_ids,
                offsets=e.offsets,
                layer=layer,
                kind=layer_kind(layer),
                description=describe_layer(layer, self.num_layers),
                vectors=vectors_at(self.model, e.input_ids, hidden, layer),
                truncated=e.truncated,
            )

        return self.map(texts, keep)

    def learned_embeddings(self, text: str) -> TokenEmbeddings:
        """The raw learned rows of the embedding table for each token of ``text`` (no position, no context)."""
        return self.token_embeddings(text, layer=LEARNED)[0]

    def embedding_layer_output(self, text: str) -> TokenEmbeddings:
        """``hidden_states[0]``: what layer 1 receives (token embedding + position, maybe scaled/normalised)."""
        return self.token_embeddings(text, layer=0)[0]

    def contextual_embeddings(self, text: str, layer: int = -1) -> TokenEmbeddings:
        """Contextual vectors of each token after ``layer`` (default: the last layer, ``last_hidden_state``)."""
        if not is_contextual(layer, self.num_layers):
            raise ScratchformerError(
                f"layer={layer!r} is not contextual: use learned_embeddings() or embedding_layer_output(), "
                f"or a layer 1..{self.num_layers} / -1"
            )
        return self.token_embeddings(text, layer=layer)[0]

    def locate_word(self, sentence: str, word: str, occurrence: int = 0) -> WordLocation:
        """The ``occurrence``-th whole-word ``word`` in ``sentence`` (case-sensitive), and the tokens that cover it."""
        span = find_word(sentence, word, occurrence, self._sentence_tokens)
        return locate(self.tokenize([sentence])[0], span, self.tokens, self.max_length)

    def word_embeddings(self, queries: Sequence[WordQuery], layers: Layer | Sequence[Layer] = -1,
                        pooling: str = "mean") -> list[list[WordEmbedding]]:
        """Per query (``(sentence, word)``, ``(sentence, word, occurrence)`` or ``(sentence, (start, end))``), one
        :class:`WordEmbedding` per layer in ``layers``, from one forward pass."""
        layer_list = resolve_layers(layers, self.num_layers)
        spans = [parse_query(q, query, self._sentence_tokens) for q, query in enumerate(queries)]

        def keep(i: int, e: Encoded, hidden: torch.Tensor) -> list[WordEmbedding]:
            location = locate(e, spans[i], self.tokens, self.max_length)
            return [self._word(e, hidden, location, layer, pooling) for layer in layer_list]

        return self.map([span.sentence for span in spans], keep)

    def check_words(self, queries: Sequence[WordQuery], where: Callable[[int], str] = "query {}".format) -> None:
        """Raises for the first query whose word cannot be embedded (past the model's positions), from tokenizing
        alone: a long evaluation finds it before its first forward pass. ``where(q)`` names query ``q``."""
        spans = [parse_query(q, query, self._sentence_tokens) for q, query in enumerate(queries)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the forward pass warns of the truncated texts, once
            encoded = self.tokenize([span.sentence for span in spans])
        for q, (e, span) in enumerate(zip(encoded, spans)):
            try:
                locate(e, span, self.tokens, self.max_length)
            except ScratchformerError as error:
                raise ScratchformerError(f"{where(q)}: {error}") from None

    def word_embedding(self, sentence: str, word: str | tuple[int, int], occurrence: int = 0, layer: Layer = -1,
                       pooling: str = "mean") -> WordEmbedding:
        """The vector of one word occurrence (or character span ``(start, end)``) in its sentence, its sub-tokens
        pooled with ``"mean"``, ``"first"`` or ``"last"``."""
        query = (sentence, word) if isinstance(word, tuple) else (sentence, word, occurrence)
        return self.word_embeddings([query], layers=layer, pooling=pooling)[0][0]

    def sentence_word_embeddings(self, sentences: str | Sequence[str], layers: Layer | Sequence[Layer] = -1,
                                 pooling: str = "mean") -> list[list[list[WordEmbedding]]]:
        """``result[s][w][l]``: word ``w`` of sentence ``s`` at the ``l``-th of ``layers`` (none past a cut)."""
        sentences = [sentences] if isinstance(sentences, str) else list(sentences)
        layer_list = resolve_layers(layers, self.num_layers)

        def keep(i: int, e: Encoded, hidden: torch.Tensor) -> list[list[WordEmbedding]]:
            words = []
            for _, start, end in words_kept(e):
                location = locate(e, WordSpan(e.text, start, end), self.tokens, self.max_length)
                words.append([self._word(e, hidden, location, layer, pooling) for layer in layer_list])
            return words

        return self.map(sentences, keep)

    def word_similarity(self, a: WordEmbedding, b: WordEmbedding) -> Similarity:
        """Cosine of two word vectors, with the baseline and centred cosine from the words of their sentences."""
        if a.layer != b.layer or a.pooling != b.pooling:
            raise ScratchformerError(f"compare vectors of the same layer and pooling, got {a.layer}/{a.pooling} and "
                                     f"{b.layer}/{b.pooling}")
        sentences = list(dict.fromkeys([a.location.sentence, b.location.sentence]))  # one or two, in order
        per_sentence = self.sentence_word_embeddings(sentences, layers=a.layer, pooling=a.pooling)
        words = [[(w[0].word, w[0].vector) for w in sentence] for sentence in per_sentence]
        return similarity_in_context(a.vector, b.vector, words, {a.word.lower(), b.word.lower()})

    def sentence_embeddings(self, sentences: str | Sequence[str], pooling: str = "mean", layer: Layer = -1,
                            exclude_special_tokens: bool = False) -> SentenceEmbeddings:
        """One vector per sentence: ``pooling`` (``mean``, ``max``, ``cls``/``first``) over its own tokens at
        ``layer``, so that the batch it shares and its padding change nothing."""
        sentences = [sentences] if isinstance(sentences, str) else list(sentences)
        (layer,) = resolve_layers(layer, self.num_layers)
        truncated = [False] * len(sentences)

        def keep(i: int, e: Encoded, hidden: torch.Tensor) -> torch.Tensor:
            truncated[i] = e.truncated
            vectors = vectors_at(self.model, e.input_ids, hidden, layer)
            return pool_sentence(vectors, e.special, pooling, exclude_special_tokens, f"sentence {i} ({quoted(e.text)})")

        vectors = self.map(sentences, keep)
        return SentenceEmbeddings(sentences=sentences, layer=layer, kind=layer_kind(layer), pooling=pooling,
                                  vectors=torch.stack(vectors), truncated=truncated)

    def attention_maps(self, sentence: str, target: str | None = None) -> AttentionMaps:
        """Attention probabilities for one sentence, heads kept apart (:mod:`~scratchformer.analysis.attention`)."""
        return attention_maps(self, sentence, target)

    def _sentence_tokens(self, sentence: str) -> list[str]:
        """The token strings of ``sentence`` (for error messages)."""
        return self.tokens(self.tokenize([sentence])[0].input_ids)

    def _word(self, e: Encoded, hidden: torch.Tensor, location: WordLocation, layer: Layer,
              pooling: str) -> WordEmbedding:
        used, vector = pool_word(vectors_at(self.model, e.input_ids, hidden, layer), location.token_indices, pooling)
        return WordEmbedding(location=location, layer=layer, kind=layer_kind(layer), pooling=pooling,
                             used_token_indices=used, vector=vector)


@dataclass
class LoadedModel:
    """A model ready for analysis: its label for tables and plots, where it came from, and its extractor."""

    label: str
    source: str
    random_init: bool
    extractor: EmbeddingExtractor
    note: str = ""


RANDOM_NOTE = ("paper base sizes, random weights (seed 0), our byte-level BPE trained on the analysed sentences only; "
               "what a Transformer gives before any training")


def load_extractor(name: str, *, batch_size: int = 32, texts: Sequence[str] | None = None,
                   with_decoder: bool = False, trust_remote_code: bool = False) -> LoadedModel:
    """:func:`scratchformer.loading.load` wrapped in an :class:`EmbeddingExtractor`; ``with_decoder`` loads an
    encoder-decoder whole (for its attention maps), ``texts`` train the tokenizer of ``random-scratchformer``."""
    from ..loading import RANDOM_SCRATCHFORMER, describe, load, resolve

    model, tokenizer = load(name, task="seq2seq" if with_decoder else "encoder", texts=texts,
                            trust_remote_code=trust_remote_code)
    random_init = str(name) == RANDOM_SCRATCHFORMER
    return LoadedModel(describe(name), str(name) if random_init else resolve(name), random_init,
                       EmbeddingExtractor(model, tokenizer, batch_size=batch_size),
                       RANDOM_NOTE if random_init else "")


def model_list(models: Any) -> list[str]:
    """``models`` as a list of model names: one name alone (a ``str``) is one model, not its characters."""
    return [models] if isinstance(models, (str, os.PathLike)) else list(models or [])


def model_sources(models: list[str] | None, include_defaults: bool) -> list[str]:
    """The models a study runs (:func:`~scratchformer.loading.study_models`); none at all is a mistake."""
    from ..loading import study_models

    sources = study_models(models, include_defaults)
    if not sources:
        raise ScratchformerError("no model to compare: give --model, or leave out --no-defaults")
    return sources
