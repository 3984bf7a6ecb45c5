"""Fast tokenizer for Scratchformer, backed by a ``tokenizers`` ``tokenizer.json``.

Copied next to the weights by ``save_pretrained`` (remote code): imports only ``transformers``.
"""

from transformers import TokenizersBackend


class ScratchformerTokenizer(TokenizersBackend):
    """Byte-level BPE tokenizer with the special tokens ``<pad> <s> </s> <unk> <mask>`` (ids 0-4)."""

    vocab_files_names = {"tokenizer_file": "tokenizer.json"}
    model_input_names = ["input_ids", "attention_mask"]
