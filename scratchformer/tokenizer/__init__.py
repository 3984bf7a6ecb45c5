"""Byte Pair Encoding: the readable reference BPE (:mod:`~scratchformer.tokenizer.bpe`) and the training of fast
Scratchformer tokenizers that encode exactly like it (:mod:`~scratchformer.tokenizer.training`)."""
