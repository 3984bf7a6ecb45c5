"""Fast tokenizer for Scratchformer: ``tokenizer.json`` as it is (no ``__init__``), plus clear input errors.

Not remote code: without the ``scratchformer`` package a saved folder loads as transformers' built-in
``TokenizersBackend``, with the same ids (docs/hub.md). Build one with ``scratchformer.tokenizer.training``.
"""

import json
import os
import shutil
import tempfile

from transformers import TokenizersBackend
from transformers.tokenization_utils_base import TOKENIZER_CONFIG_FILE

# keys from_pretrained records about the load itself (where the files came from), not about the tokenizer
LOAD_TIME_KEYS = ("is_local", "local_files_only", "cache_dir", "revision", "token", "trust_remote_code",
                  "_commit_hash", "_from_auto")
# the keywords of save_pretrained(push_to_hub=True) that go to the upload (push_to_hub) rather than to the save
PUSH_KEYWORDS = ("repo_id", "commit_message", "commit_description", "private", "token", "revision", "create_pr", "tags")


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
        if isinstance(text, (list, tuple)) and not text:
            raise ValueError("the tokenizer got an empty batch ([]): pass at least one text")
        max_length = kwargs.get("max_length")
        truncating = str(kwargs.get("truncation_strategy", "do_not_truncate")).lower().split(".")[-1] != (
            "do_not_truncate")
        if truncating and max_length is not None and max_length < 1:
            raise ValueError(f"max_length={max_length} leaves no room for a single token: truncation needs "
                             "max_length >= 1 (the end-of-sequence token </s> counts)")
        return super()._encode_plus(text, text_pair, *args, **kwargs)

    def _decode(self, token_ids, *args, **kwargs):
        """Decode as usual, but refuse ids that are not tokens instead of dropping them without a word."""
        ids = [token_ids] if isinstance(token_ids, int) else token_ids
        if isinstance(ids, (list, tuple)):
            if -100 in ids:
                raise ValueError("decode got -100, the label id the loss ignores, not a token: replace it first, "
                                 "e.g. labels.masked_fill(labels == -100, tokenizer.pad_token_id)")
            if bad := [i for i in ids if not isinstance(i, int) or not 0 <= i < len(self)]:
                raise ValueError(f"decode got {bad[:5]} which are not token ids of this tokenizer (valid: "
                                 f"0..{len(self) - 1}); were they made by a different tokenizer?")
        return super()._decode(token_ids, *args, **kwargs)

    def save_pretrained(self, save_directory, *args, push_to_hub=False, **kwargs):
        """Save as transformers does, but through a temporary folder moved into place, so a failure (a full disk)
        leaves the earlier save whole; ``push_to_hub=True`` then uploads (:data:`PUSH_KEYWORDS` go there)."""
        if os.path.isfile(save_directory):
            raise NotADirectoryError(f"cannot save the tokenizer into {save_directory}: it is a file, not a folder")
        upload = {key: kwargs.pop(key) for key in PUSH_KEYWORDS if key in kwargs} if push_to_hub else {}
        os.makedirs(save_directory, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".saving-", dir=save_directory)
        try:
            saved = super().save_pretrained(staging, *args, **kwargs)
            _move_into(staging, save_directory)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        saved = tuple(os.path.join(save_directory, os.path.relpath(name, staging)) for name in saved or ())
        if push_to_hub:
            self.push_to_hub(upload.pop("repo_id", os.path.basename(os.path.abspath(save_directory))), **upload)
        return saved

    def _save_pretrained(self, save_directory, file_names, *args, **kwargs):
        """Make the saved ``tokenizer_config.json`` load without this file: no ``auto_map``, nothing recorded about
        its own load, and the model inputs stated (the built-in backend would add ``token_type_ids``)."""
        for name in file_names:
            if os.path.basename(name).endswith(TOKENIZER_CONFIG_FILE):
                with open(name, encoding="utf-8") as handle:
                    config = json.load(handle)
                for key in ("auto_map", *LOAD_TIME_KEYS):  # auto_map: code to run
                    config.pop(key, None)
                config["model_input_names"] = list(self.model_input_names)
                with open(name, "w", encoding="utf-8") as handle:
                    handle.write(json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        return super()._save_pretrained(save_directory, file_names, *args, **kwargs)


def _move_into(source, target):
    """Every file under the folder ``source`` into ``target`` (sub-folders merged), each flushed to disk and then
    renamed over what was there: one ``os.replace`` each, so each file is the old one or the new one, whole."""
    for name in sorted(os.listdir(source)):
        here, there = os.path.join(source, name), os.path.join(target, name)
        if os.path.isdir(here) and not os.path.islink(here):
            os.makedirs(there, exist_ok=True)
            _move_into(here, there)
            continue
        with open(here, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(here, there)
