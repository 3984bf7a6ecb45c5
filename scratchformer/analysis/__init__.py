"""Embedding analysis that works the same on Scratchformer and on any BERT/DistilBERT-style model, and the studies
built on it (``compare``, ``senses``, ``geometry``); docs/embeddings.md lists what each module does.
"""
