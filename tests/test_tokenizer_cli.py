"""``scratchformer train-tokenizer``: files in (plain or .gz), a loadable tokenizer folder out, clear errors."""

from __future__ import annotations

import gzip
import re

import pytest
from tokenizer_fixtures import sentences
from transformers import AutoTokenizer

import scratchformer
from scratchformer.cli import build_parser, main

scratchformer.register()  # ScratchformerTokenizer with AutoTokenizer


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    lines = sentences(600)
    plain, packed = folder / "a.txt", folder / "b.txt.gz"
    plain.write_text("\n".join(lines[:300]) + "\n", encoding="utf-8")
    with gzip.open(packed, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines[300:]) + "\n")
    return plain, packed


def test_help_lists_the_subcommand():
    assert "train-tokenizer" in build_parser().format_help()


@pytest.mark.parametrize("trainer, scheme, vocab_size", [
    ("fast", "byte_level", 400),
    ("reference", "whitespace", 150),
])
def test_train_tokenizer_writes_a_loadable_folder(corpus_files, tmp_path, capsys, trainer, scheme, vocab_size):
    out = tmp_path / "tok"
    rc = main(["train-tokenizer", *map(str, corpus_files), "--vocab-size", str(vocab_size), "--scheme", scheme,
               "--trainer", trainer, "--output", str(out), "--no-progress", "--model-max-length", "256"])
    stdout = capsys.readouterr().out
    assert rc == 0
    assert f"vocabulary size: {vocab_size}" in stdout
    tokens_per_word = float(re.search(r"tokens per word: ([\d.]+)", stdout).group(1))
    assert 1.0 <= tokens_per_word < 5.0  # a trained subword vocabulary; never fewer tokens than words here
    tok = AutoTokenizer.from_pretrained(out)
    assert len(tok) == vocab_size and tok.model_max_length == 256
    assert tok("the river bank")["input_ids"][-1] == tok.eos_token_id == 2


def test_default_is_fast_byte_level(corpus_files, tmp_path, capsys):
    out = tmp_path / "tok"
    assert main(["train-tokenizer", str(corpus_files[0]), "--vocab-size", "300", "--output", str(out)]) == 0
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.backend_tokenizer.pre_tokenizer.__class__.__name__ == "ByteLevel"
    assert tok.decode(tok("naïve  😀\tx")["input_ids"], skip_special_tokens=True) == "naïve  😀\tx"


def test_the_fast_trainer_prints_no_blank_lines(corpus_files, tmp_path, capfd):
    """With progress on (the default) and the output not a terminal, the tokenizers library drew no bar but ended each
    of its three stages with a newline, written to file descriptor 1 by its Rust code (capfd sees it, capsys would
    not)."""
    out = tmp_path / "tok"
    assert main(["train-tokenizer", str(corpus_files[0]), "--vocab-size", "300", "--output", str(out)]) == 0
    stdout, stderr = capfd.readouterr()
    assert stdout.splitlines() == [line for line in stdout.splitlines() if line.strip()], repr(stdout)
    assert stdout.startswith("saved to ") and "\n\n" not in stderr
    assert sorted(p.name for p in out.iterdir()) == ["tokenizer.json", "tokenizer_config.json"]


def test_help_names_the_files_it_writes(capsys):
    with pytest.raises(SystemExit):
        main(["train-tokenizer", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "tokenizer.json and tokenizer_config.json" in text and "tokenizer code" not in text


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.txt", "data file not found"),
    (lambda d: d, "is a folder, not a regular file"),
    (lambda d: (d / "bin.txt").write_bytes(bytes(range(256)) * 10) and d / "bin.txt", "UnicodeDecodeError"),
    (lambda d: (d / "bad.txt.gz").write_bytes(b"\x1f\x8b\x08garbage") and d / "bad.txt.gz", "cannot read it"),
    (lambda d: (d / "empty.txt").write_text("\n\n  \n") and d / "empty.txt", "data file is empty"),
])
def test_bad_files_give_a_clear_error(tmp_path, capsys, make, message):
    path = make(tmp_path)
    rc = main(["train-tokenizer", str(path), "--output", str(tmp_path / "out"), "--no-progress"])
    assert rc == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_too_small_vocabulary_is_refused(corpus_files, tmp_path, capsys):
    rc = main(["train-tokenizer", str(corpus_files[0]), "--vocab-size", "100", "--output", str(tmp_path / "o")])
    assert rc == 2
    assert "ask for at least 261" in capsys.readouterr().err


def test_output_that_is_a_file_or_holds_a_tokenizer_is_refused_before_training(corpus_files, tmp_path, capsys):
    existing_file = tmp_path / "a-file"
    existing_file.write_text("keep me")
    args = [str(corpus_files[0]), "--vocab-size", "300", "--no-progress"]
    assert main(["train-tokenizer", *args, "--output", str(existing_file)]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err and existing_file.read_text() == "keep me"
    folder = tmp_path / "tok"
    assert main(["train-tokenizer", *args, "--output", str(folder)]) == 0
    saved = (folder / "tokenizer.json").read_text()
    assert main(["train-tokenizer", *args, "--output", str(folder)]) == 2
    assert "already holds a tokenizer" in capsys.readouterr().err
    assert (folder / "tokenizer.json").read_text() == saved
    assert main(["train-tokenizer", *args, "--output", str(folder), "--overwrite"]) == 0


@pytest.mark.parametrize("trainer", ["fast", "reference"])
def test_a_negative_min_frequency_is_refused_by_both_trainers(corpus_files, tmp_path, capsys, trainer):
    """The fast trainer raised OverflowError for -1 (tokenizers keeps it unsigned) and the reference one took it
    silently; both refuse it now, naming the argument, and the command says so in one line."""
    from scratchformer.tokenizer import bpe
    from scratchformer.tokenizer.training import train_fast_tokenizer, train_reference_tokenizer

    train = train_fast_tokenizer if trainer == "fast" else train_reference_tokenizer
    with pytest.raises(ValueError, match=r"min_frequency must be a count of occurrences, 0 or more .*got -1"):
        train(["the cat sees the dog"], 300, min_frequency=-1)
    if trainer == "fast":  # tokenizers' own TypeError; the reference trainer compares counts with 2.5 as they are
        with pytest.raises(TypeError, match="'float' object cannot be interpreted as an integer"):
            train(["the cat sees the dog"], 300, min_frequency=2.5)
    with pytest.raises(ValueError, match="min_frequency"):
        bpe.train(["the cat sees the dog"], 300, min_frequency=2**64)
    rc = main(["train-tokenizer", str(corpus_files[0]), "--trainer", trainer, "--min-frequency", "-1", "--output",
               str(tmp_path / "tok"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("scratchformer train-tokenizer: error: min_frequency must be")
    assert not (tmp_path / "tok").exists()


def test_a_vocabulary_the_trainer_cannot_hold_is_refused_before_the_data_is_read(tmp_path, capsys, monkeypatch):
    """tokenizers' BpeTrainer reserves its tables for the whole vocabulary first (71 GB for 10**9 tokens), then
    panics in Rust; ids are 32-bit. The data file here does not exist: the size is refused before it is read. The
    memory is fixed at 2 GiB so that the case does not depend on the machine."""
    from scratchformer.tokenizer import training

    missing = str(tmp_path / "no-such-corpus.txt")
    for vocab_size, trainer, message in (
        (2**32, "fast", "vocab_size=4,294,967,296 is more than the 4,294,967,295 tokens a tokenizer can number"),
        (2**64 - 1, "reference", "vocab_size=18,446,744,073,709,551,615 is more than the 4,294,967,295 tokens"),
        (10**8, "fast", "vocab_size=100,000,000: the fast trainer reserves about 6.0 GiB for its tables before it "
                        "reads a word, more than the 2.0 GiB of memory available"),
    ):
        monkeypatch.setattr(training, "available_memory", lambda: 2 * 2**30)
        rc = main(["train-tokenizer", missing, "--vocab-size", str(vocab_size), "--trainer", trainer,
                   "--output", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith(f"scratchformer train-tokenizer: error: {message}") and err.count("\n") == 1
        assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="its ids are 32-bit"):
        training.train_fast_tokenizer(["hello world"], 2**64 - 1)  # was the Rust panic "capacity overflow"


def test_a_models_folder_is_never_given_another_tokenizer(corpus_files, tmp_path, capsys):
    """Issue 67: ``--overwrite --output MODEL_FOLDER`` swapped a model's tokenizer for another of another vocabulary,
    without a word (its checksums do not cover the tokenizer). A command never writes into a model's folder."""
    args = [str(corpus_files[0]), "--vocab-size", "300", "--no-progress"]
    model = tmp_path / "model"
    assert main(["train-tokenizer", *args, "--output", str(model)]) == 0
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights")
    saved = (model / "tokenizer.json").read_text()
    capsys.readouterr()
    assert main(["train-tokenizer", *args, "--vocab-size", "400", "--output", str(model), "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"scratchformer train-tokenizer: error: --output '{model}' is a model's folder "
                          "(config.json): its weights go with its own tokenizer"), err
    assert (model / "tokenizer.json").read_text() == saved


def test_an_output_that_is_a_loop_of_symbolic_links_is_refused_before_training(corpus_files, tmp_path, capsys):
    """Issue 67: it was said only after training, as "File exists"; now before any data is read."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    rc = main(["train-tokenizer", str(tmp_path / "no-such-corpus.txt"), "--output", str(loop), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("scratchformer train-tokenizer: error: ") and err.count("\n") == 1, err
    assert f"{loop}" in err and "is a loop of symbolic links; give a folder to write into" in err, err


def test_sighup_while_saving_ends_the_command_and_leaves_no_staging_folder(corpus_files, tmp_path):
    """Issue 67: SIGTERM or SIGHUP while the tokenizer was saved killed the process and left ``.saving-*`` in
    --output; now they end it as Ctrl-C does: the staging folder goes, status 128 + the signal."""
    import signal
    import subprocess
    import sys
    import textwrap
    import time

    ready, out = tmp_path / "ready", tmp_path / "tok"
    script = textwrap.dedent(f"""
        import pathlib, signal, time
        from scratchformer import files
        from scratchformer.cli import main
        signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as in a terminal: under nohup the runner's SIG_IGN is inherited
        def stalled(source, target):  # the tokenizer is staged: wait here to be ended
            pathlib.Path({str(ready)!r}).write_text("staged")
            time.sleep(120)
        files._move_into = stalled
        raise SystemExit(main(["train-tokenizer", {str(corpus_files[0])!r}, "--vocab-size", "300", "--output",
                               {str(out)!r}, "--no-progress"]))
    """)
    run = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready.exists(), run.communicate(timeout=10)
        assert [p.name[:8] for p in out.iterdir()] == [".saving-"]
        run.send_signal(signal.SIGHUP)
        _, stderr = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 128 + signal.SIGHUP, stderr[-3000:]
    assert list(out.iterdir()) == [], stderr[-3000:]
