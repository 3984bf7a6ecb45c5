"""Training data for ``scratchformer train``: loading, splitting, tokenizing and batching.

Everything goes through the ``datasets`` library:

- :func:`load_data_files` reads local text (one example per line), TSV, CSV or JSON-lines files, plain or gzipped,
  and :func:`load_hub_dataset` a dataset from the Hugging Face Hub where it is reachable;
- :func:`split_by_group` holds out whole groups (for the verse-aligned Bible file: whole *books*, so that
  neighbouring verses never sit on both sides) and :func:`random_split` holds out random rows;
- :func:`tokenize_for_denoising` and :func:`tokenize_pairs` tokenize with batched ``Dataset.map``;
- :class:`DataCollatorForTextInfilling` is BART's text-infilling noise (Lewis et al. 2020, section 2.2).

Errors about the data (missing files, empty data, unknown columns) are :class:`DataError` (a ``ValueError``) with a
message that names the file or column, raised before any training starts.
"""

from __future__ import annotations

import gzip
import math
import os
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError

# file suffix (after an optional .gz) -> (datasets builder, builder options)
FILE_FORMATS: dict[str, tuple[str, dict[str, Any]]] = {
    "txt": ("text", {}),
    "text": ("text", {}),
    # quoting=3 (csv.QUOTE_NONE): a '"' inside a verse is text, not a quote; keep_default_na: "NA" stays a string
    "tsv": ("csv", {"delimiter": "\t", "quoting": 3, "keep_default_na": False}),
    "csv": ("csv", {"keep_default_na": False}),
    "jsonl": ("json", {}),
    "json": ("json", {}),
}

# "Genesis 1:1", "I Samuel 3:10", "Song of Solomon 2:1" -> the book is everything before "<chapter>:<verse>"
_REF = re.compile(r"^(?P<book>.*?\S)\s+\d+[:.]\d+\s*$")


def file_format(path: str | os.PathLike) -> str:
    """The format key of ``path`` from its name: ``corpus.txt.gz`` -> ``"txt"``, ``pairs.tsv`` -> ``"tsv"``."""
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    suffix = name.rsplit(".", 1)[-1] if "." in name else ""
    if suffix not in FILE_FORMATS:
        known = ", ".join(f".{k}" for k in FILE_FORMATS)
        raise DataError(f"{path}: unknown file type {suffix!r}; use one of {known} (optionally .gz), "
                        "or pass the format explicitly")
    return suffix


def _check_file(path: str | os.PathLike) -> None:
    path = Path(path)
    if not path.exists():
        raise DataError(f"data file not found: {path}")
    if not path.is_file():
        raise DataError(f"not a file: {path}")
    with open(path, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    try:
        with (gzip.open if gzipped else open)(path, "rb") as f:
            head = f.read(4096)
    except (OSError, EOFError) as err:
        raise DataError(f"{path}: cannot read it ({err})") from None
    if not head.strip():
        raise DataError(f"data file is empty: {path}")


def load_data_files(files: Sequence[str | os.PathLike], fmt: str | None = None, cache_dir: str | None = None):
    """Load local files into one ``datasets.Dataset``.

    ``fmt`` is a key of :data:`FILE_FORMATS`; by default it comes from the file names, which must then agree.
    Text files give a single ``text`` column with one row per line.
    """
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    files = [str(f) for f in files]
    if not files:
        raise DataError("no data files given")
    for f in files:
        _check_file(f)
    if fmt is None:
        formats = {file_format(f) for f in files}
        if len({FILE_FORMATS[k][0] for k in formats}) > 1 or len(formats) > 1 and "tsv" in formats:
            raise DataError(f"the data files have different formats ({', '.join(sorted(formats))}): {files}")
        fmt = formats.pop()
    elif fmt not in FILE_FORMATS:
        raise DataError(f"unknown data format {fmt!r}; use one of {', '.join(FILE_FORMATS)}")
    builder, options = FILE_FORMATS[fmt]

    import datasets

    try:
        return datasets.load_dataset(builder, data_files=files, split="train", cache_dir=cache_dir, **options)
    except Exception as err:  # datasets wraps parse errors in its own exception types
        cause = err.__cause__ or err
        raise DataError(f"could not read {files} as {fmt}: {type(cause).__name__}: {cause}") from err


def load_hub_dataset(name: str, config: str | None = None, split: str = "train", cache_dir: str | None = None):
    """``datasets.load_dataset(name, config, split=split)``, with a clear error where the Hub cannot be reached."""
    import datasets

    try:
        return datasets.load_dataset(name, config, split=split, cache_dir=cache_dir)
    except Exception as err:
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
        hint = " (HF_HUB_OFFLINE is set)" if offline else ""
        raise DataError(f"could not load the Hub dataset {name!r}{' / ' + config if config else ''} split "
                        f"{split!r}{hint}: {type(err).__name__}: {err}. Give local files instead.") from err


def check_columns(dataset, columns: Sequence[str], what: str = "the data") -> None:
    """Raise :class:`DataError` naming the missing columns and the ones that exist."""
    missing = [c for c in columns if c not in dataset.column_names]
    if missing:
        raise DataError(f"unknown column{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))} in "
                        f"{what}; its columns are {', '.join(map(repr, dataset.column_names))}")


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else str(value)


def drop_empty(dataset, columns: Sequence[str], num_proc: int | None = None):
    """Rows whose ``columns`` all hold non-blank text (``None`` and numbers are turned into strings first)."""
    def keep(batch):
        return [all(_text(v).strip() for v in values) for values in zip(*(batch[c] for c in columns))]

    return dataset.filter(keep, batched=True, num_proc=num_proc, desc="dropping empty rows")


def book_of(ref: str) -> str:
    """The book of a Bible reference: ``"I Samuel 3:10"`` -> ``"I Samuel"``; anything else is its own group."""
    match = _REF.match(_text(ref))
    return match.group("book") if match else _text(ref)


def split_by_group(dataset, group_column: str, validation_fraction: float = 0.05,
                   validation_groups: Sequence[str] | None = None, seed: int = 0,
                   group_of: Callable[[str], str] = book_of):
    """Split into ``train`` / ``validation`` with whole groups (``group_of(row[group_column])``) on one side.

    ``validation_groups`` names the held-out groups; otherwise groups are drawn at random (seeded) until they hold
    at least ``validation_fraction`` of the rows. Returns a ``datasets.DatasetDict``.
    """
    import datasets

    check_columns(dataset, [group_column], "the data (split column)")
    groups = [group_of(v) for v in dataset[group_column]]
    order = list(dict.fromkeys(groups))  # groups in order of first appearance
    if len(order) < 2:
        raise DataError(f"column {group_column!r} has only {len(order)} group(s); cannot hold out whole groups")
    if validation_groups:
        unknown = [g for g in validation_groups if g not in order]
        if unknown:
            raise DataError(f"validation group(s) {unknown} not in column {group_column!r}; "
                            f"groups are {order[:10]}{' ...' if len(order) > 10 else ''}")
        held = set(validation_groups)
        if held == set(order):
            raise DataError("every group is held out for validation; nothing is left to train on")
    else:
        sizes = {g: 0 for g in order}
        for g in groups:
            sizes[g] += 1
        rng = np.random.default_rng(seed)
        held, count = set(), 0
        for i in rng.permutation(len(order)):
            if count >= validation_fraction * len(groups) or len(held) == len(order) - 1:
                break
            held.add(order[i])
            count += sizes[order[i]]
    train_idx = [i for i, g in enumerate(groups) if g not in held]
    valid_idx = [i for i, g in enumerate(groups) if g in held]
    return datasets.DatasetDict(train=dataset.select(train_idx), validation=dataset.select(valid_idx))


def random_split(dataset, validation_fraction: float = 0.05, seed: int = 0, max_validation: int | None = None):
    """Hold out random rows (at least one): a ``datasets.DatasetDict`` with ``train`` and ``validation``."""
    if len(dataset) < 2:
        raise DataError(f"the data has {len(dataset)} row(s); need at least 2 to hold out a validation set")
    size = max(1, round(validation_fraction * len(dataset)))
    if max_validation:
        size = min(size, max_validation)
    size = min(size, len(dataset) - 1)
    parts = dataset.train_test_split(test_size=size, seed=seed, shuffle=True)
    import datasets

    return datasets.DatasetDict(train=parts["train"], validation=parts["test"])


# ----------------------------------------------------------------------------------------------------------------
# Tokenization
# ----------------------------------------------------------------------------------------------------------------


def tokenize_for_denoising(dataset, tokenizer, text_column: str = "text", max_length: int = 128,
                           min_tokens: int = 4, num_proc: int | None = None):
    """Token ids for text infilling: each row's text is cut into chunks of at most ``max_length - 1`` tokens, each
    followed by ``</s>`` (as the tokenizer's ``$A </s>`` template does); chunks shorter than ``min_tokens`` tokens
    are dropped. Returns a dataset with one ``input_ids`` column (the clean text; the collator adds the noise)."""
    check_columns(dataset, [text_column])
    if max_length < 2:
        raise DataError(f"max_length={max_length} leaves no room for text before </s>")
    eos = tokenizer.eos_token_id
    width = max_length - 1

    def chunk(batch):
        encoded = tokenizer([_text(t) for t in batch[text_column]], add_special_tokens=False, verbose=False)["input_ids"]
        out = []
        for ids in encoded:
            for start in range(0, len(ids), width):
                piece = ids[start:start + width]
                if len(piece) >= min_tokens:
                    out.append(piece + [eos])
        return {"input_ids": out}

    return dataset.map(chunk, batched=True, remove_columns=dataset.column_names, num_proc=num_proc,
                       desc="tokenizing (denoising)")


def tokenize_pairs(dataset, tokenizer, source_column: str, target_column: str, max_source_length: int = 128,
                   max_target_length: int = 128, num_proc: int | None = None):
    """``input_ids``/``attention_mask`` from ``source_column`` and ``labels`` from ``target_column`` (both end with
    ``</s>``; longer texts are truncated). The raw columns are dropped."""
    check_columns(dataset, [source_column, target_column])

    def encode(batch):
        enc = tokenizer([_text(t) for t in batch[source_column]], max_length=max_source_length, truncation=True)
        enc["labels"] = tokenizer(text_target=[_text(t) for t in batch[target_column]],
                                  max_length=max_target_length, truncation=True)["input_ids"]
        return enc

    return dataset.map(encode, batched=True, remove_columns=dataset.column_names, num_proc=num_proc,
                       desc="tokenizing (pairs)")


# ----------------------------------------------------------------------------------------------------------------
# Text infilling
# ----------------------------------------------------------------------------------------------------------------


def text_infilling(ids: Sequence[int], mask_token_id: int, rng: np.random.Generator, mask_ratio: float = 0.3,
                   poisson_lambda: float = 3.0) -> list[int]:
    """BART text infilling of one token sequence (without its final ``</s>``).

    1. ``m = ceil(mask_ratio * n)`` tokens are to be masked. Span lengths are drawn from Poisson(``poisson_lambda``)
       until they add up to at least ``m``; the last one is cut so that they add up to exactly ``m``.
    2. Spans of length >= 1 are placed at random, never touching one another (at least one kept token between two
       spans), and each span is replaced by a single ``<mask>``. If ``n`` is too short to keep them apart, the last
       spans are dropped.
    3. Each span of length 0 inserts a ``<mask>`` at a random position (a token the model must learn is *not*
       missing), at most as many as keep the noised text no longer than the original.
    """
    n = len(ids)
    if n == 0 or mask_ratio <= 0:
        return list(ids)
    to_mask = math.ceil(mask_ratio * n)
    lengths: list[int] = []
    total = 0
    while total < to_mask:
        length = int(rng.poisson(poisson_lambda))
        lengths.append(length)
        total += length
    lengths[-1] -= total - to_mask
    spans = [length for length in lengths if length > 0]
    inserts = len(lengths) - len(spans)
    while spans and n - sum(spans) < len(spans) - 1:
        spans.pop()
    k, masked = len(spans), sum(spans)
    out: list[int] = []
    if k:
        # gaps between spans: g_0 >= 0, g_1..g_{k-1} >= 1, g_k >= 0, summing to the n - masked kept tokens
        free = n - masked - (k - 1)
        bars = np.sort(rng.choice(free + k, size=k, replace=False))
        gaps = np.diff(np.concatenate(([-1], bars))) - 1
        gaps[1:] += 1
        pos = 0
        for gap, length in zip(gaps.tolist(), spans):
            out.extend(ids[pos:pos + gap])
            out.append(mask_token_id)
            pos += gap + length
        out.extend(ids[pos:])
    else:
        out = list(ids)
    inserts = min(inserts, masked - k)
    if inserts > 0:
        for where in sorted(rng.integers(0, len(out) + 1, size=inserts).tolist(), reverse=True):
            out.insert(where, mask_token_id)
    return out


@dataclass
class DataCollatorForTextInfilling:
    """Batches for denoising pre-training: the encoder reads the noised text, the decoder rebuilds the original.

    Each feature is ``{"input_ids": clean ids ending with </s>}``. The batch has ``input_ids`` (noised, padded with
    ``pad_token_id``), ``attention_mask``, ``labels`` (the clean ids, padded with -100) and ``decoder_input_ids``
    (the labels shifted right behind ``decoder_start_token_id``, as the model would build them itself; the Trainer
    needs them because label smoothing takes ``labels`` out of the model's inputs).

    The noise of a sequence is a function of ``(seed, epoch, its token ids)`` only, not of a global random state,
    so that a resumed run sees exactly the batches of an uninterrupted one, whatever the number of processes or
    data-loader workers. ``epoch`` is set by :class:`scratchformer.training.EpochCallback` so each epoch draws new
    noise.
    """

    pad_token_id: int
    mask_token_id: int
    eos_token_id: int
    decoder_start_token_id: int
    mask_ratio: float = 0.3
    poisson_lambda: float = 3.0
    seed: int = 0
    epoch: int = 0
    pad_to_multiple_of: int | None = None

    def __post_init__(self):
        if not 0.0 <= self.mask_ratio < 1.0:
            raise ValueError(f"mask_ratio={self.mask_ratio} must be in [0, 1)")
        if not self.poisson_lambda > 0:
            raise ValueError(f"poisson_lambda={self.poisson_lambda} must be positive")

    @classmethod
    def from_tokenizer(cls, tokenizer, decoder_start_token_id: int, **kwargs) -> DataCollatorForTextInfilling:
        if tokenizer.mask_token_id is None:
            raise DataError("the tokenizer has no <mask> token; text infilling needs one")
        return cls(pad_token_id=tokenizer.pad_token_id, mask_token_id=tokenizer.mask_token_id,
                   eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=decoder_start_token_id, **kwargs)

    def rng_for(self, ids: Sequence[int]) -> np.random.Generator:
        key = zlib.crc32(np.asarray(ids, dtype=np.int64).tobytes())
        return np.random.default_rng([self.seed, self.epoch, key, len(ids)])

    def noise(self, ids: Sequence[int]) -> list[int]:
        ids = list(ids)
        body, tail = (ids[:-1], ids[-1:]) if ids and ids[-1] == self.eos_token_id else (ids, [])
        return text_infilling(body, self.mask_token_id, self.rng_for(ids), self.mask_ratio,
                              self.poisson_lambda) + tail

    def _pad(self, rows: list[list[int]], value: int):
        import torch

        width = max(len(r) for r in rows)
        if self.pad_to_multiple_of:
            width = -(-width // self.pad_to_multiple_of) * self.pad_to_multiple_of
        out = torch.full((len(rows), width), value, dtype=torch.long)
        for i, r in enumerate(rows):
            out[i, :len(r)] = torch.tensor(r, dtype=torch.long)
        return out

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        clean = [list(f["input_ids"]) for f in features]
        noised = [self.noise(ids) for ids in clean]
        input_ids = self._pad(noised, self.pad_token_id)
        attention_mask = self._pad([[1] * len(r) for r in noised], 0)
        labels = self._pad(clean, -100)
        decoder_input_ids = labels.new_full(labels.shape, self.pad_token_id)
        decoder_input_ids[:, 0] = self.decoder_start_token_id
        decoder_input_ids[:, 1:] = labels[:, :-1].masked_fill(labels[:, :-1] == -100, self.pad_token_id)
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "labels": labels,
            "decoder_input_ids": decoder_input_ids,
        }
