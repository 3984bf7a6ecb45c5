"""Training data for ``scratchformer train``, all through the ``datasets`` library: loading files or a Hub dataset,
holding out a validation split (whole groups or random rows) and tokenizing. Mistakes in the data are
:class:`DataError`, naming the file or column, before training starts."""

from __future__ import annotations

import gzip
import os
import re
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .. import files
from ..errors import DataError, no_secrets

if TYPE_CHECKING:
    from .options import TrainOptions

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

def file_format(path: str | os.PathLike) -> str:
    """The format key of ``path`` from its name: ``corpus.txt.gz`` -> ``"txt"``, ``pairs.tsv`` -> ``"tsv"``."""
    name = Path(path).name.lower().removesuffix(".gz")
    suffix = name.rsplit(".", 1)[-1] if "." in name else ""
    if suffix not in FILE_FORMATS:
        known = ", ".join(f".{k}" for k in FILE_FORMATS)
        raise DataError(f"{path}: unknown file type {suffix!r}; use one of {known} (optionally .gz), "
                        "or pass the format explicitly")
    return suffix


def _check_file(path: str | os.PathLike) -> None:
    files.check_file(path, DataError)  # empty, a loop of symbolic links, a named pipe, a device: said as such
    path = Path(path)
    if not path.exists():
        raise DataError(f"data file not found: {path}")
    with files.reading(path), open(path, "rb") as f:  # a file this user may not read: one line naming both
        gzipped = f.read(2) == b"\x1f\x8b"
    try:
        with (gzip.open if gzipped else open)(path, "rb") as f:
            head = f.read(4096)
    except (OSError, EOFError) as err:
        raise DataError(f"{path}: cannot read it ({err})") from None
    if not head.strip():
        raise DataError(f"data file is empty: {path}")


def load_data_files(files: Sequence[str | os.PathLike], fmt: str | None = None, cache_dir: str | None = None,
                    streaming: bool = False):
    """Local files as one ``datasets.Dataset`` (``streaming``: an ``IterableDataset`` read as it is iterated).
    ``fmt`` is a key of :data:`FILE_FORMATS`, by default from the file names; text files give one ``text`` column."""
    files = [str(f) for f in ([files] if isinstance(files, (str, os.PathLike)) else files)]
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
        return datasets.load_dataset(builder, data_files=files, split="train", cache_dir=cache_dir,
                                     streaming=streaming, **options)
    except Exception as err:  # datasets wraps parse errors in its own exception types
        cause = err.__cause__ or err
        raise DataError(f"could not read {files} as {fmt}: {type(cause).__name__}: {cause}") from err


HUB_DATASET_TIME_LIMIT = 3600.0  # seconds a --dataset-name download may take in all (local files for larger ones)


@no_secrets()
def load_hub_dataset(name: str, config: str | None = None, split: str = "train", cache_dir: str | None = None,
                     streaming: bool = False):
    """``datasets.load_dataset(name, config, split=split, streaming=streaming)``, with a clear error where the Hub
    cannot be reached or the load takes more than :data:`HUB_DATASET_TIME_LIMIT` (the client's timeouts never cut a
    server that answers one byte at a time), and no token in the logs or the error (:func:`no_secrets`)."""
    import datasets

    from ..loading import within

    try:
        return within(HUB_DATASET_TIME_LIMIT, lambda: datasets.load_dataset(
            name, config, split=split, cache_dir=cache_dir, streaming=streaming))
    except Exception as err:
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
        hint = " (HF_HUB_OFFLINE is set)" if offline else ""
        raise DataError(f"could not load the Hub dataset {name!r}{' / ' + config if config else ''} split "
                        f"{split!r}{hint}: {type(err).__name__}: {err}. Give local files instead.") from err


def column_names(dataset) -> list[str]:
    """The columns of a ``Dataset``, or of an ``IterableDataset`` whose features are not known before reading
    (a streamed text or CSV file): then the keys of its first row (one row is read)."""
    if dataset.column_names is not None:
        return list(dataset.column_names)
    first = first_row(dataset)
    return list(first) if first is not None else []


def first_row(stream) -> dict | None:
    """The first row of a stream, or ``None`` (not ``take(1)``: on one process's shard that takes its share of one
    row, which is nothing on every process but the first)."""
    rows = iter(stream)
    try:
        return next(rows, None)
    finally:
        getattr(rows, "close", lambda: None)()


def check_columns(dataset, columns: Sequence[str], what: str = "the data") -> None:
    """Raise :class:`DataError` naming the missing columns and the ones that exist."""
    existing = column_names(dataset)
    missing = [c for c in columns if c not in existing]
    if missing:
        raise DataError(f"unknown column{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))} in "
                        f"{what}; its columns are {', '.join(map(repr, existing))}")


def check_complete_rows(paths: Sequence[str | os.PathLike], columns: Sequence[str], fmt: str | None = None) -> None:
    """Every row of the TSV, CSV and JSON-lines files has a value for each of ``columns``, else :class:`DataError`
    with the line numbers: pandas reads a missing field as empty text, so the row would vanish silently."""
    for path in paths:
        kind = fmt or file_format(path)
        if kind not in ("tsv", "csv", "jsonl"):
            continue
        short = _rows_without(path, kind, columns)
        if short:
            (line, missing), count = short[0], len(short)
            where = ", ".join(str(n) for n, _ in short[:5]) + (", ..." if count > 5 else "")
            others = f" ({count:,} rows lack a column, at lines {where})" if count > 1 else ""
            raise DataError(f"{path}: line {line} has no {missing!r} column{others}; every row needs a value in each "
                            f"of {', '.join(map(repr, columns))}: fix or remove such rows")


def _rows_without(path: str | os.PathLike, kind: str, columns: Sequence[str]) -> list[tuple[int, str]]:
    """``(line number, first missing column)`` of each row of ``path`` that lacks one of ``columns`` (the lines
    as an editor counts them; blank lines are no rows, as for ``pandas``)."""
    import csv
    import json

    short = []
    with _open_text(path) as text:
        if kind == "jsonl":
            for number, line in enumerate(text, 1):
                row = json.loads(line) if line.strip() else None
                if isinstance(row, dict) and (missing := [c for c in columns if row.get(c) is None]):
                    short.append((number, missing[0]))
            return short
        csv.field_size_limit(2**31 - 1)  # a long text in one field is a row, not an error
        reader = (csv.reader(text, delimiter="\t", quoting=csv.QUOTE_NONE) if kind == "tsv" else csv.reader(text))
        header, start = next(reader, []), reader.line_num + 1
        wanted = [(header.index(c), c) for c in columns if c in header]
        for row in reader:
            if any(field.strip() for field in row) and (missing := [c for i, c in wanted if i >= len(row)]):
                short.append((start, missing[0]))
            start = reader.line_num + 1
    return short


def _open_text(path: str | os.PathLike):
    """``path`` as text (UTF-8, undecodable bytes replaced), gunzipped when it is gzipped."""
    with open(path, "rb") as f:
        opener = gzip.open if f.read(2) == b"\x1f\x8b" else open
    return opener(path, "rt", encoding="utf-8-sig", errors="replace", newline="")


def map_options(dataset, num_proc: int | None, desc: str) -> dict[str, Any]:
    """``num_proc`` and ``desc`` for ``Dataset.map``/``filter``; an ``IterableDataset`` (a stream) takes neither:
    it maps lazily, in the process that reads it."""
    return {} if is_stream(dataset) else {"num_proc": num_proc, "desc": desc}


def is_stream(dataset) -> bool:
    """Whether ``dataset`` is a ``datasets.IterableDataset`` (read as it is iterated, no length)."""
    import datasets

    return isinstance(dataset, datasets.IterableDataset)


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else str(value)


def drop_empty(dataset, columns: Sequence[str], num_proc: int | None = None):
    """Rows whose ``columns`` all hold non-blank text (``None`` and numbers are turned into strings first)."""
    def keep(batch):
        return [all(_text(v).strip() for v in values) for values in zip(*(batch[c] for c in columns))]

    return dataset.filter(keep, batched=True, **map_options(dataset, num_proc, "dropping empty rows"))


def group_by_pattern(pattern: str) -> Callable[[str], str]:
    """A row's group from its value: the first group of ``pattern``'s first match (``re.search``); a value it does
    not match is its own group. ``r"^(.*?\\S)\\s+\\d+:\\d+$"`` gives the book of ``"I Samuel 3:10"``."""
    compiled = re.compile(pattern)

    def group_of(value: str) -> str:
        match = compiled.search(value)
        return match.group(1) if match and match.group(1) is not None else value

    return group_of


def split_by_group(dataset, group_column: str, validation_fraction: float = 0.05,
                   validation_groups: Sequence[str] | None = None, seed: int = 0,
                   group_of: Callable[[str], str] | None = None):
    """``train`` / ``validation`` with whole groups on one side, a row's group being ``group_of(row[group_column])``;
    ``validation_groups`` names the held-out groups, else seeded random groups reach ``validation_fraction``."""
    import datasets

    check_columns(dataset, [group_column], "the data (split column)")
    group_of = group_of or (lambda value: value)
    groups = [group_of(_text(v)) for v in dataset[group_column]]
    order = list(dict.fromkeys(groups))  # groups in order of first appearance
    if len(order) < 2:
        raise DataError(f"column {group_column!r} has only {len(order)} group(s); cannot hold out whole groups")
    if validation_groups:
        held = _named_groups(validation_groups, order, group_column)
    else:
        held = _random_groups(groups, order, validation_fraction, seed)
    train_idx = [i for i, g in enumerate(groups) if g not in held]
    valid_idx = [i for i, g in enumerate(groups) if g in held]
    return datasets.DatasetDict(train=dataset.select(train_idx), validation=dataset.select(valid_idx))


def _named_groups(validation_groups: Sequence[str], order: list[str], group_column: str) -> set[str]:
    """The held-out groups the user named, checked against the groups there are."""
    unknown = [g for g in validation_groups if g not in order]
    if unknown:
        raise DataError(f"validation group(s) {unknown} not in column {group_column!r}; "
                        f"groups are {order[:10]}{' ...' if len(order) > 10 else ''}")
    held = set(validation_groups)
    if held == set(order):
        raise DataError("every group is held out for validation; nothing is left to train on")
    return held


def _random_groups(groups: list[str], order: list[str], validation_fraction: float, seed: int) -> set[str]:
    """Groups drawn at random (seeded) until they hold ``validation_fraction`` of the rows; one is always left."""
    sizes = Counter(groups)
    rng = np.random.default_rng(seed)
    held: set[str] = set()
    count = 0
    for i in rng.permutation(len(order)):
        if count >= validation_fraction * len(groups) or len(held) == len(order) - 1:
            break
        held.add(order[i])
        count += sizes[order[i]]
    return held


def random_split(dataset, validation_fraction: float = 0.05, seed: int = 0, max_validation: int | None = None):
    """Hold out random rows (at least one): a ``datasets.DatasetDict`` with ``train`` and ``validation``."""
    if len(dataset) < 2:
        raise DataError(f"the data has {len(dataset)} row(s); need at least 2 to hold out a validation set")
    import datasets

    size = min(max(1, round(validation_fraction * len(dataset))), max_validation or len(dataset), len(dataset) - 1)
    parts = dataset.train_test_split(test_size=size, seed=seed, shuffle=True)
    return datasets.DatasetDict(train=parts["train"], validation=parts["test"])


class RawSplits(NamedTuple):
    """A run's data before tokenization: rows of text, and the columns that matter."""

    train: Any  # datasets.Dataset
    validation: Any  # datasets.Dataset
    columns: list[str]  # the text columns the objective reads
    group_column: str | None  # the column whose groups were held out, if any
    rows_without_text: int = 0  # rows read but dropped for an empty column (said when the run starts)


def text_columns(options: TrainOptions) -> list[str]:
    """The columns the objective reads: the text (denoise), or the source and target (seq2seq)."""
    return [options.text_column] if options.objective == "denoise" else [options.source_column, options.target_column]


def load_raw_splits(options: TrainOptions, seed: int) -> RawSplits:
    """The training and validation rows as ``options`` say: read, checked (columns, rows with text), split
    (``--validation-files``, held-out groups, else random rows) and capped (``--max-*-samples``, seeded)."""
    columns = text_columns(options)
    train = load_training_rows(options)
    valid = (load_data_files(options.validation_files, options.data_format, options.cache_dir)
             if options.validation_files else None)
    check_columns(train, columns, "the training data")
    if valid is not None:
        check_columns(valid, columns, "the validation data")
    elif options.group_column is not None:
        check_columns(train, [options.group_column], "the training data (--group-column)")
    needed = columns + ([options.group_column] if options.group_column and valid is None else [])
    check_complete_rows(options.train_files or [], needed, options.data_format)
    check_complete_rows(options.validation_files or [], columns, options.data_format)
    if len(train) == 0:
        raise DataError("the training data has no rows")
    read = len(train) + (len(valid) if valid is not None else 0)
    train = drop_empty(train, columns, options.num_proc)
    if len(train) == 0:
        raise DataError(f"the training data has no row with text in {columns}")
    if valid is None:
        train, valid = _hold_out(train, options, seed)
    else:
        valid = drop_empty(valid, columns, options.num_proc)
    if len(valid) == 0:
        raise DataError("the validation data has no rows with text")
    without_text = read - len(train) - len(valid)
    train, valid = _capped(train, valid, options, seed)
    return RawSplits(train, valid, columns, options.group_column, without_text)


def load_training_rows(options: TrainOptions, streaming: bool = False):
    """The training rows from the files or the Hub dataset the options name (``streaming``: as a stream)."""
    if options.train_files:
        return load_data_files(options.train_files, options.data_format, options.cache_dir, streaming)
    return load_hub_dataset(options.dataset_name, options.dataset_config, "train", options.cache_dir, streaming)


def _hold_out(train, options: TrainOptions, seed: int):
    """``(train, validation)``: whole groups with ``--group-column``, else random rows."""
    if options.group_column is None:
        parts = random_split(train, options.validation_fraction, seed)
    else:
        group_of = group_by_pattern(options.group_pattern) if options.group_pattern else None
        parts = split_by_group(train, options.group_column, options.validation_fraction, options.validation_groups,
                               seed, group_of)
    return parts["train"], parts["validation"]


def _capped(train, valid, options: TrainOptions, seed: int):
    """At most ``--max-train-samples`` training rows (the first ones) and ``--max-eval-samples`` validation rows (a
    seeded sample)."""
    if options.max_train_samples:
        train = train.select(range(min(options.max_train_samples, len(train))))
    if options.max_eval_samples and len(valid) > options.max_eval_samples:
        valid = valid.shuffle(seed=seed).select(range(options.max_eval_samples))
    return train, valid


# ----------------------------------------------------------------------------------------------------------------
# Tokenization
# ----------------------------------------------------------------------------------------------------------------


SHORT_WINDOW_WORDS = (3, 20)  # the length range (in words) of the short windows added by ``short_fraction``


def short_window(text: str, rng: np.random.Generator, words: tuple[int, int] = SHORT_WINDOW_WORDS) -> str | None:
    """A random run of ``words[0]``..``words[1]`` consecutive words of ``text``, cut at spaces (like a dictionary's
    example phrase), or ``None`` when ``text`` has no more words than the window would."""
    tokens = text.split()
    lo, hi = words
    if len(tokens) <= lo:
        return None
    length = int(rng.integers(lo, min(hi, len(tokens) - 1) + 1))
    start = int(rng.integers(0, len(tokens) - length + 1))
    return " ".join(tokens[start:start + length])


def tokenize_for_denoising(dataset, tokenizer, text_column: str = "text", max_length: int = 128,
                           min_tokens: int = 4, num_proc: int | None = None, short_fraction: float = 0.0,
                           seed: int = 0, pack: bool = False, max_tokens_per_character: float | None = None):
    """Token ids for text infilling: each text cut into chunks of at most ``max_length - 1`` tokens plus ``</s>``,
    shorter than ``min_tokens`` dropped; ``short_fraction`` adds short windows, ``max_tokens_per_character`` and
    ``pack`` are Cramming's filtering and packing (docs/training.md, "Objectives"). The collator adds the noise."""
    check_columns(dataset, [text_column])
    eos = tokenizer.eos_token_id
    width = max_length - 1

    def with_short_windows(texts: list[str]) -> list[str]:
        out = list(texts)
        for text in texts:
            rng = np.random.default_rng([seed, zlib.crc32(text.encode("utf-8"))])
            if rng.random() < short_fraction and (window := short_window(text, rng)) is not None:
                out.append(window)
        return out

    def chunk(batch):
        texts = [_text(t) for t in batch[text_column]]
        if short_fraction > 0:
            texts = with_short_windows(texts)
        encoded = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
        out = []
        for text, ids in zip(texts, encoded):
            if max_tokens_per_character is not None and len(ids) > max_tokens_per_character * max(1, len(text)):
                continue
            for start in range(0, len(ids), width):
                piece = ids[start:start + width]
                if len(piece) >= min_tokens:
                    out.append(piece + [eos])
        return {"input_ids": packed(out, max_length) if pack else out}

    return dataset.map(chunk, batched=True, remove_columns=column_names(dataset),
                       **map_options(dataset, num_proc, "tokenizing (denoising)"))


def tokenize_for_objective(rows, tokenizer, options: TrainOptions, seed: int, training: bool = False):
    """``rows`` tokenized for ``--objective`` (:func:`tokenize_for_denoising` or :func:`tokenize_pairs`); short
    windows, packing and filtering shape the training rows only (``training``): the validation set stays as it is."""
    if options.objective == "denoise":
        return tokenize_for_denoising(
            rows, tokenizer, options.text_column, options.max_length, num_proc=options.num_proc, seed=seed,
            short_fraction=options.short_fraction if training else 0.0, pack=training and options.pack,
            max_tokens_per_character=options.max_tokens_per_character if training else None)
    return tokenize_pairs(rows, tokenizer, options.source_column, options.target_column, options.max_source_length,
                          options.max_target_length, options.num_proc)


def packed(chunks: list[list[int]], max_length: int) -> list[list[int]]:
    """Consecutive ``chunks`` joined in order into examples of at most ``max_length`` tokens (a chunk is never
    split; one longer than ``max_length`` stays alone)."""
    out: list[list[int]] = []
    for chunk in chunks:
        if out and len(out[-1]) + len(chunk) <= max_length:
            out[-1] = out[-1] + chunk
        else:
            out.append(list(chunk))
    return out


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

    return dataset.map(encode, batched=True, remove_columns=column_names(dataset),
                       **map_options(dataset, num_proc, "tokenizing (pairs)"))
