"""Data loading, splitting and the text-infilling noise of the training pipeline (tiny generated data only)."""

from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pytest

from scratchformer.training import TrainOptions, data
from scratchformer.training.data import DataError
from scratchformer.training.noise import DataCollatorForTextInfilling, text_infilling

MASK = 4


def write(path, text, gz=False):
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name, gz", [("a.txt", False), ("a.txt.gz", True)])
def test_text_files_one_row_per_line(tmp_path, name, gz):
    path = write(tmp_path / name, "first line\n\nsecond line\n", gz)
    ds = data.load_data_files([path], cache_dir=str(tmp_path / "cache"))
    assert ds.column_names == ["text"]
    assert ds["text"] == ["first line", "", "second line"]
    assert data.drop_empty(ds, ["text"])["text"] == ["first line", "second line"]


def test_tsv_keeps_quotes_and_na_as_text(tmp_path):
    path = write(tmp_path / "p.tsv.gz", 'ref\tkjv\tweb\nGenesis 1:1\tSaid "Let"\tNA\n', gz=True)
    ds = data.load_data_files([path], cache_dir=str(tmp_path / "cache"))
    assert ds[0] == {"ref": "Genesis 1:1", "kjv": 'Said "Let"', "web": "NA"}


def test_csv_and_jsonl(tmp_path):
    csv = write(tmp_path / "p.csv", "src,tgt\nhello,hola\n")
    assert data.load_data_files([csv], cache_dir=str(tmp_path / "c"))[0] == {"src": "hello", "tgt": "hola"}
    jsonl = write(tmp_path / "p.jsonl", json.dumps({"src": "a", "tgt": "b"}) + "\n")
    assert data.load_data_files([jsonl], cache_dir=str(tmp_path / "c"))[0] == {"src": "a", "tgt": "b"}


def test_bad_files_are_clear_errors(tmp_path):
    with pytest.raises(DataError, match="data file not found: .*missing.txt"):
        data.load_data_files([tmp_path / "missing.txt"])
    with pytest.raises(DataError, match="data file is empty"):
        data.load_data_files([write(tmp_path / "empty.txt", "\n\n")])
    with pytest.raises(DataError, match="unknown file type 'parquet'"):
        data.load_data_files([write(tmp_path / "x.parquet", "x")])
    with pytest.raises(DataError, match="different formats"):
        data.load_data_files([write(tmp_path / "a.txt", "x\n"), write(tmp_path / "b.tsv", "a\tb\n")])


def test_unknown_column_names_the_existing_ones(tmp_path):
    ds = data.load_data_files([write(tmp_path / "p.tsv", "ref\tkjv\n1\tx\n")], cache_dir=str(tmp_path / "c"))
    with pytest.raises(DataError, match=r"unknown column 'web' in the data; its columns are 'ref', 'kjv'"):
        data.check_columns(ds, ["kjv", "web"])


BOOK_OF_REF = r"^(.*?\S)\s+\d+:\d+$"  # the book of a Bible reference (examples/finetune_kjv_to_web.py)


@pytest.mark.parametrize("value, group", [("Genesis 1:1", "Genesis"), ("I Samuel 3:10", "I Samuel"),
                                          ("Song of Solomon 2:1", "Song of Solomon"), ("no verse", "no verse")])
def test_group_by_pattern_takes_the_first_group_or_the_whole_value(value, group):
    assert data.group_by_pattern(BOOK_OF_REF)(value) == group


def verses():
    import datasets

    refs = [f"{b} {c}:{v}" for b in ("Genesis", "Exodus", "Ruth", "Jonah", "Jude") for c in (1, 2) for v in (1, 2, 3)]
    return datasets.Dataset.from_dict({"ref": refs, "x": list(range(len(refs)))})


def test_split_by_pattern_keeps_groups_whole():
    ds = verses()
    book_of = data.group_by_pattern(BOOK_OF_REF)
    parts = data.split_by_group(ds, "ref", validation_fraction=0.3, seed=1, group_of=book_of)
    train_books = {book_of(r) for r in parts["train"]["ref"]}
    valid_books = {book_of(r) for r in parts["validation"]["ref"]}
    assert train_books and valid_books and not train_books & valid_books
    assert len(parts["train"]) + len(parts["validation"]) == len(ds)
    assert len(parts["validation"]) >= 0.3 * len(ds)
    again = data.split_by_group(ds, "ref", validation_fraction=0.3, seed=1, group_of=book_of)
    assert again["validation"]["ref"] == parts["validation"]["ref"]  # seeded
    named = data.split_by_group(ds, "ref", validation_groups=["Ruth", "Jude"], group_of=book_of)
    assert {book_of(r) for r in named["validation"]["ref"]} == {"Ruth", "Jude"}
    with pytest.raises(DataError, match="not in column 'ref'"):
        data.split_by_group(ds, "ref", validation_groups=["Tobit"], group_of=book_of)


def test_split_by_group_without_pattern_groups_equal_values():
    ds = verses().map(lambda row: {"book": row["ref"].split()[0]})
    parts = data.split_by_group(ds, "book", validation_groups=["Ruth"])
    assert set(parts["validation"]["book"]) == {"Ruth"} and "Ruth" not in set(parts["train"]["book"])


def write_verses(tmp_path):
    rows = ["ref\tsrc\ttgt"] + [f"{book} 1:{verse}\tsome words {verse}\tSOME WORDS {verse}"
                                for book in ("Genesis", "Exodus", "Ruth", "Jonah") for verse in range(1, 26)]
    return write(tmp_path / "verses.tsv", "\n".join(rows) + "\n")


def test_raw_splits_are_random_rows_unless_grouping_is_asked_for(tmp_path):
    """A file with a ``ref`` column is not split by book by default: grouping is opt-in."""
    options = TrainOptions(objective="seq2seq", train_files=[str(write_verses(tmp_path))], source_column="src",
                           target_column="tgt", validation_fraction=0.2, cache_dir=str(tmp_path / "cache"))
    book_of = data.group_by_pattern(BOOK_OF_REF)
    random_rows = data.load_raw_splits(options, seed=0)
    assert random_rows.group_column is None and len(random_rows.validation) == 20
    assert len({book_of(r) for r in random_rows.validation["ref"]}) > 1  # 20 random verses of 4 books
    assert {book_of(r) for r in random_rows.validation["ref"]} & {book_of(r) for r in random_rows.train["ref"]}

    options.group_column, options.group_pattern, options.validation_groups = "ref", BOOK_OF_REF, ["Ruth"]
    by_book = data.load_raw_splits(options, seed=0)
    assert by_book.group_column == "ref" and len(by_book.validation) == 25
    assert {book_of(r) for r in by_book.validation["ref"]} == {"Ruth"}
    assert "Ruth" not in {book_of(r) for r in by_book.train["ref"]}


def test_text_infilling_masks_thirty_percent_in_poisson_spans():
    rng = np.random.default_rng(0)
    ids = list(range(10, 110))  # 100 distinct tokens, none is the mask id
    removed, masks, span_lengths = [], [], []
    for _ in range(500):
        out = text_infilling(ids, MASK, rng)
        kept = [t for t in out if t != MASK]
        assert kept == sorted(kept) and set(kept) <= set(ids)  # order kept, nothing invented
        assert len(out) <= len(ids)
        removed.append(len(ids) - len(kept))
        masks.append(out.count(MASK))
        # lengths of the removed runs between kept tokens
        prev = 9
        for t in kept + [110]:
            if t - prev > 1:
                span_lengths.append(t - prev - 1)
            prev = t
    assert set(removed) == {30}  # exactly ceil(0.3 * 100) tokens are removed
    assert 9 <= np.mean(masks) <= 12  # ~30 / 3 spans (+ a few zero-length insertions)
    assert 2.5 <= np.mean(span_lengths) <= 3.6  # Poisson(3) conditioned on >= 1 has mean ~3.16


def test_text_infilling_replaces_each_span_by_one_mask():
    rng = np.random.default_rng(3)
    ids = list(range(10, 60))
    for _ in range(200):
        out = text_infilling(ids, MASK, rng, poisson_lambda=8.0)  # P(zero-length span) = e^-8: no insertions here
        # between two neighbouring kept tokens: one mask if tokens were removed there, none otherwise
        masks_between, prev = 0, 9
        for t in out + [60]:
            if t == MASK:
                masks_between += 1
                continue
            assert masks_between == (1 if t - prev > 1 else 0), out
            masks_between, prev = 0, t


def test_text_infilling_short_and_empty():
    rng = np.random.default_rng(0)
    assert text_infilling([], MASK, rng) == []
    assert text_infilling([7], MASK, rng) == [MASK]
    assert text_infilling([7, 8, 9], MASK, rng, mask_ratio=0.0) == [7, 8, 9]


@pytest.mark.parametrize("setting, message", [
    ({"poisson_lambda": 0}, r"poisson_lambda=0 must be positive"),
    ({"mask_ratio": 1.5}, r"mask_ratio=1.5 must be in \[0, 1\)"),
    ({"mask_ratio": math.nan}, r"mask_ratio=nan must be a finite number"),
])
def test_text_infilling_refuses_noise_that_means_nothing_or_never_ends(setting, message):
    """``poisson_lambda=0`` drew empty spans forever (the list of lengths grew until memory ran out); a ratio of 1.5
    masked past the text in silence; NaN failed inside ``math.ceil``."""
    with pytest.raises(ValueError, match=message):
        text_infilling([5, 6, 7, 8], MASK, np.random.default_rng(0), **setting)


def test_collator_batches_and_is_a_function_of_seed_epoch_and_text():
    collator = DataCollatorForTextInfilling(pad_token_id=0, mask_token_id=MASK, eos_token_id=2,
                                            decoder_start_token_id=1, seed=5)
    features = [{"input_ids": list(range(10, 40)) + [2]}, {"input_ids": [11, 12, 13, 2]}]
    batch = collator(features)
    assert set(batch) == {"input_ids", "attention_mask", "labels", "decoder_input_ids"}
    assert batch["labels"].shape == (2, 31)
    assert batch["labels"][1].tolist() == [11, 12, 13, 2] + [-100] * 27
    assert batch["decoder_input_ids"][1, :5].tolist() == [1, 11, 12, 13, 2]
    assert batch["decoder_input_ids"][0, 1:].tolist() == batch["labels"][0, :-1].tolist()
    for row, mask in zip(batch["input_ids"].tolist(), batch["attention_mask"].tolist()):
        n = sum(mask)
        assert row[n - 1] == 2 and all(t == 0 for t in row[n:]) and MASK in row[:n]
    # same seed, epoch and text -> same noise, in any batch and any order
    again = collator(features[::-1])
    assert again["input_ids"][1].tolist()[:sum(again["attention_mask"][1])] == \
        batch["input_ids"][0].tolist()[:sum(batch["attention_mask"][0])]
    collator.epoch = 1
    assert collator(features)["input_ids"].tolist() != batch["input_ids"].tolist()


@pytest.mark.parametrize("setting, error, message", [
    ({"poisson_lambda": math.inf}, ValueError, r"poisson_lambda=inf must be a finite number"),  # would never end
    ({"mask_ratio": 1.5}, ValueError, r"mask_ratio=1.5 must be in \[0, 1\)"),  # would mask past the text
    ({"seed": -1}, ValueError, "negative"),  # numpy's own
])
def test_collator_settings_that_noise_nothing_sensible_are_refused(setting, error, message):
    """The collator is public (docs/training.md): its noise is checked when it is built; the ids and the seed are
    numpy's to refuse, at the first batch."""
    settings = {"pad_token_id": 0, "mask_token_id": MASK, "eos_token_id": 2, "decoder_start_token_id": 1, **setting}
    with pytest.raises(error, match=message):
        DataCollatorForTextInfilling(**settings)([{"input_ids": [11, 12, 13, 14, 2]}])


def test_short_window_is_a_run_of_consecutive_words_in_the_asked_range():
    text = " ".join(f"w{i}" for i in range(40))
    for seed in range(50):
        window = data.short_window(text, np.random.default_rng(seed), (3, 8))
        words = window.split()
        assert 3 <= len(words) <= 8
        start = int(words[0][1:])
        assert words == [f"w{i}" for i in range(start, start + len(words))]
    assert data.short_window("one two three", np.random.default_rng(0), (3, 8)) is None  # no shorter window
    # a window is always shorter than its text
    assert {data.short_window("a b c d", np.random.default_rng(s), (3, 8)) for s in range(20)} == {"a b c", "b c d"}


def _denoising_rows(short_fraction, seed=0, rows=None):
    from datasets import Dataset

    from tests.tokenizer_fixtures import fast_from_reference

    tokenizer = fast_from_reference()
    rows = rows or [" ".join(f"word{i}x{j}" for i in range(30)) for j in range(200)]
    dataset = Dataset.from_dict({"text": rows})
    return tokenizer, data.tokenize_for_denoising(dataset, tokenizer, max_length=512, short_fraction=short_fraction,
                                                  seed=seed)["input_ids"]


def test_short_fraction_adds_short_windows_of_about_that_fraction_of_rows():
    tokenizer, plain = _denoising_rows(0.0)
    assert len(plain) == 200
    _, more = _denoising_rows(0.25)
    assert more[:200] == plain  # the full rows are all still there
    extra = more[200:]
    assert 25 <= len(extra) <= 75, len(extra)  # binomial(200, 0.25): mean 50, sd 6; 4 sd either side
    for ids in extra:
        assert ids[-1] == tokenizer.eos_token_id
        words = tokenizer.decode(ids[:-1]).split()
        assert 3 <= len(words) <= 20
        assert " ".join(words) in tokenizer.decode(plain[int(words[0].split("x")[1])][:-1])
    assert _denoising_rows(0.25)[1] == more  # a function of the seed and the texts
    assert _denoising_rows(0.25, seed=1)[1] != more
    assert len(_denoising_rows(1.0)[1]) == 400


def test_packing_joins_consecutive_chunks_in_order_up_to_max_length_and_loses_no_token():
    assert data.packed([[1, 2], [3, 4, 5], [6], [7, 8, 9, 10, 11, 12]], 6) == [[1, 2, 3, 4, 5, 6],
                                                                             [7, 8, 9, 10, 11, 12]]
    assert data.packed([[1] * 9, [2]], 4) == [[1] * 9, [2]]  # a chunk is never split
    from datasets import Dataset

    from tests.tokenizer_fixtures import fast_from_reference

    tokenizer = fast_from_reference()
    rows = [" ".join(f"w{i}x{j}" for i in range(1 + j % 7)) for j in range(100)]
    dataset = Dataset.from_dict({"text": rows})
    plain = data.tokenize_for_denoising(dataset, tokenizer, max_length=64, min_tokens=1)["input_ids"]
    packed = data.tokenize_for_denoising(dataset, tokenizer, max_length=64, min_tokens=1, pack=True)["input_ids"]
    assert [t for row in packed for t in row] == [t for row in plain for t in row]  # the same text, in order
    assert len(packed) < len(plain) / 2 and max(len(row) for row in packed) <= 64
    assert all(row[-1] == tokenizer.eos_token_id for row in packed)


def test_rows_the_tokenizer_compresses_worst_are_dropped_by_max_tokens_per_character():
    """A row of rare symbols costs many tokens per character; ordinary words few: only the first is dropped."""
    from datasets import Dataset

    from tests.tokenizer_fixtures import fast_from_reference

    tokenizer = fast_from_reference()
    words, symbols = "the cat sat on the mat and the dog sat too", "~^|@#$%&*{}[]\\`" * 3
    ratios = {text: len(tokenizer(text, add_special_tokens=False)["input_ids"]) / len(text)
              for text in (words, symbols)}
    assert ratios[words] < ratios[symbols]
    threshold = (ratios[words] + ratios[symbols]) / 2
    dataset = Dataset.from_dict({"text": [words, symbols, words]})
    kept = data.tokenize_for_denoising(dataset, tokenizer, max_length=512,
                                       max_tokens_per_character=threshold)["input_ids"]
    everything = data.tokenize_for_denoising(dataset, tokenizer, max_length=512)["input_ids"]
    assert len(everything) == 3 and kept == [everything[0], everything[2]]


HUB_DATASET = """
import sys
from test_errors import chain_text
from scratchformer.training.data import DataError, load_hub_dataset

try:
    load_hub_dataset("me/corpus")
except DataError as error:
    text, length = chain_text(error)
    print(text)
    print(f"CHAINED {length}")
"""


def test_a_hub_dataset_that_fails_leaves_no_secret_in_the_error_or_what_it_chains(tmp_path):
    """train --dataset-name against a Hub that echoes the request's headers: the DataError quoted the library's
    error, 'Authorization: Bearer hf_...' included, and chained it. The error and every exception it chains are
    redacted now (the echo stays, with *** for the token)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from fake_hub import FakeHub

    token = "hf_DatasetSecret0123456789abcdef"
    with FakeHub(token=token) as hub:
        hub.echo_headers = True
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")}
        env.update(HF_ENDPOINT=hub.url, HF_TOKEN=token, HF_HOME=str(tmp_path / "hf"), HF_HUB_DISABLE_TELEMETRY="1",
                   PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), env.get("PYTHONPATH", "")]))
        done = subprocess.run([sys.executable, "-c", HUB_DATASET], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=240)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "CHAINED " in done.stdout, output[-3000:]
    assert "'authorization': '***'" in output and token not in output, output[-3000:]
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or token.encode() not in path.read_bytes(), path


HUB_DATASET_SLOW = """
import time
from scratchformer.training import data

data.HUB_DATASET_TIME_LIMIT = 3.0
start = time.monotonic()
try:
    data.load_hub_dataset("me/corpus")
except data.DataError as error:
    print(f"REFUSED {time.monotonic() - start:.1f} {error}")
"""


def test_a_hub_dataset_served_one_byte_at_a_time_is_given_up_at_its_total_time_limit(tmp_path):
    """train --dataset-name against a server that answers one byte every 0.3 s: the client's read timeout never
    fires, so the load waited for ever; it now ends at HUB_DATASET_TIME_LIMIT (3 s here) with one DataError."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from fake_hub import slow_endpoint

    with slow_endpoint(0.3) as endpoint:
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE",
                                                                 "TRANSFORMERS_OFFLINE")}
        env.update(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "hf"), HF_HUB_DISABLE_TELEMETRY="1",
                   PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), env.get("PYTHONPATH", "")]))
        done = subprocess.run([sys.executable, "-c", HUB_DATASET_SLOW], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=200)
    assert "REFUSED" in done.stdout, (done.stdout + done.stderr)[-3000:]
    seconds = float(done.stdout.split("REFUSED ")[1].split()[0])
    assert 3.0 <= seconds < 30.0 and "could not load the Hub dataset 'me/corpus'" in done.stdout
