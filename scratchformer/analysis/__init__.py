"""Embedding analysis that works the same on Scratchformer and on any BERT/DistilBERT-style model.

- :mod:`scratchformer.analysis.extractor` - learned, embedding-layer and contextual embeddings, per token, per word
  and per sentence, and attention maps;
- :mod:`scratchformer.analysis.bank` - the "bank" study behind ``scratchformer compare`` (tables, JSON, plots);
- :mod:`scratchformer.analysis.senses` - the WordNet word-sense evaluation behind ``scratchformer senses``.

This layer reads models through :func:`scratchformer.loading.load`; it never imports the training code.
"""
