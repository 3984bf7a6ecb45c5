"""Fast tokenizer for Scratchformer, backed by a ``tokenizers`` ``tokenizer.json``.

Copied next to the weights by ``save_pretrained`` (remote code): imports only ``transformers``. Everything about the
tokenizer (BPE model, pre-tokenizer, ``$A </s>`` template, special tokens) lives in ``tokenizer.json``, which this
class loads verbatim because it defines no ``__init__``. Build one with ``scratchformer.tokenizer_training``.
"""

from transformers import TokenizersBackend


def _check_texts(texts, what):
    """Raise a clear error for input the Rust tokenizer would reject with an obscure one (None, lone surrogates)."""
    if texts is None or isinstance(texts, str):
        items = [] if texts is None else [texts]
    elif isinstance(texts, (list, tuple)):
        items = list(texts)
    else:
        return  # transformers' own check gives a clear message for other types
    for i, item in enumerate(items):
        name = what if isinstance(texts, str) else f"{what}[{i}]"
        if isinstance(item, (list, tuple)):
            _check_texts(item, name)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as err:
                raise ValueError(
                    f"{name} contains a lone surrogate {item[err.start]!r} at index {err.start}: it is not valid "
                    "Unicode and cannot be tokenized. Fix how the text was decoded (e.g. errors='replace')."
                ) from None
        else:
            raise TypeError(f"{name} must be a str, got {type(item).__name__}")


class ScratchformerTokenizer(TokenizersBackend):
    """Byte-level BPE tokenizer with the special tokens ``<pad> <s> </s> <unk> <mask>`` (ids 0-4).

    ``tok(text)`` gives ``text-ids </s>``; ``tok(source, text_target=target)`` adds ``labels`` = ``target-ids
    </s>`` (the model prepends the decoder start token ``<s>`` itself when it shifts the labels).
    """

    vocab_files_names = {"tokenizer_file": "tokenizer.json"}
    model_input_names = ["input_ids", "attention_mask"]

    def _encode_plus(self, text, text_pair=None, *args, **kwargs):
        _check_texts(text, "text")
        _check_texts(text_pair, "text_pair")
        return super()._encode_plus(text, text_pair, *args, **kwargs)
