"""Byte Pair Encoding: the readable from-scratch algorithm and the training of Scratchformer tokenizers.

- :mod:`scratchformer.tokenizer.bpe` - the reference BPE (Sennrich et al. 2016): pre-tokenize, count, merge, encode;
- :mod:`scratchformer.tokenizer.training` - train a fast ``tokenizers``-backed
  :class:`~scratchformer.models.ScratchformerTokenizer` (with the Rust trainer or from the reference merges), and go
  back from one to the reference BPE (the two give exactly the same tokens).
"""
