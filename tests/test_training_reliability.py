"""Training that never loses work, never runs code unasked and never silently changes a run.

- code: a --model / --tokenizer folder whose code files write a marker file never runs them;
- output folders: a lock per folder, no reuse of a finished run or model without --resume / --overwrite_output_dir;
- checkpoints: a run SIGKILLed at several points of a save resumes from the newest complete checkpoint and ends with
  the weights of an uninterrupted run, bit for bit; incomplete checkpoints are skipped, never kept in the rotation;
- --resume refuses options that change the run and records the ones that do not;
- the default peak learning rate no longer grows as --max-steps shrinks;
- sacrebleu is checked before any data is read; only global rank 0 trains the tokenizer.

Tiny models, a few steps, data written by the tests.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from conftest import REPO_ROOT
from safetensors.torch import load_file
from test_training import FailIfTrainingStarts, StopAt, corpus, pairs, tiny, train_losses  # noqa: F401

from scratchformer import ScratchformerConfig, ScratchformerForConditionalGeneration
from scratchformer.cli import main as cli_main
from scratchformer.errors import DataError, TrainingSetupError
from scratchformer.models import CODE_FILES  # the code a checkpoint carries
from scratchformer.training import config_from_args, run_training
from scratchformer.training.checkpoints import (
    checkpoint_problems,
    list_checkpoints,
    newest_complete_checkpoint,
    rotate_checkpoints,
)
from scratchformer.training.model_setup import load_tokenizer
from scratchformer.training.output_dir import HOLDER_NAME, LOCK_NAME, OutputLock
from scratchformer.training.resume import continue_run_options, resolve_resume
from scratchformer.training.schedule import (
    default_warmup_steps,
    learning_rate_warning,
    max_default_peak,
    peak_learning_rate,
)

MODELS_DIR = REPO_ROOT / "scratchformer" / "models"
TOKENIZER_CODE = "tokenization_scratchformer.py"  # saved tokenizers carry no code; an attacker's folder may
TINY_CONFIG = dict(d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                   decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16)


def one_error_line(capsys) -> str:
    """The CLI's one error line (exit status 2 is checked by the caller)."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("scratchformer train: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# --------------------------------------------------------------------------------------------------------------------
# 1. Nothing runs code the user did not ask for
# --------------------------------------------------------------------------------------------------------------------


def booby_trap(folder: Path, marker: Path, names=CODE_FILES) -> None:
    """Make the folder's code files write ``marker`` when they are imported (the first line of each)."""
    for name in names:
        code = folder / name
        code.write_text(f"open({str(marker)!r}, 'w').write('x')\n" + (code.read_text() if code.exists() else ""))


def test_booby_trapped_model_and_tokenizer_folders_never_run(tmp_path, corpus):  # noqa: F811
    from scratchformer.tokenizer.training import train_fast_tokenizer

    marker = tmp_path / "PWNED"
    tokenizer = train_fast_tokenizer(corpus.read_text().splitlines(), 300)
    tok_dir = tmp_path / "tok"
    tokenizer.save_pretrained(tok_dir)
    model_dir = tmp_path / "model"
    config = ScratchformerConfig(**TINY_CONFIG, vocab_size=len(tokenizer))
    ScratchformerForConditionalGeneration(config).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    for folder in (tok_dir, model_dir):
        # what an attacker would ship: tokenizer code named in tokenizer_config.json's auto_map, trapped code files
        tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
        tokenizer_config["auto_map"] = {"AutoTokenizer": [f"{TOKENIZER_CODE[:-3]}.ScratchformerTokenizer", None]}
        (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
        (folder / TOKENIZER_CODE).write_text("from transformers import TokenizersBackend\n\n\n"
                                             "class ScratchformerTokenizer(TokenizersBackend):\n    pass\n")
        assert {p.name for p in folder.glob("*.py")} >= ({TOKENIZER_CODE} if folder is tok_dir
                                                         else {*CODE_FILES, TOKENIZER_CODE})
        booby_trap(folder, marker, [p.name for p in folder.glob("*.py")])

    for name, overrides in [("from-model", dict(model=str(model_dir), config_overrides="dropout=0.0")),
                            ("from-tokenizer", dict(tokenizer=str(tok_dir)))]:
        options, args = tiny(tmp_path, corpus, name, max_steps=2, save_steps=2, **overrides)
        run_training(options, args)
        assert not marker.exists(), name
        for folder in (Path(args.output_dir), Path(args.output_dir) / "checkpoint-2"):
            for code in CODE_FILES:  # the code that travels with the checkpoints is ours
                assert (folder / code).read_text() == (MODELS_DIR / code).read_text(), (name, folder, code)
            assert not (folder / TOKENIZER_CODE).exists()  # and no tokenizer code travels at all
    trained = ScratchformerForConditionalGeneration.from_pretrained(tmp_path / "from-model")
    assert trained.config.dropout == 0.0  # --config-overrides applied to the --model

    # the trap is real: transformers with trust_remote_code runs it (in a subprocess, with its own modules cache)
    probe = f"from transformers import AutoTokenizer; AutoTokenizer.from_pretrained({str(tok_dir)!r}, " \
            "trust_remote_code=True)"
    subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=120,
                   env={**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules")})
    assert marker.exists()


def test_foreign_remote_code_needs_trust_remote_code(tmp_path, corpus, capsys):  # noqa: F811
    """A model or tokenizer folder of another type that ships code: refused unless --trust-remote-code."""
    from scratchformer.tokenizer.training import train_fast_tokenizer
    from scratchformer.training import model_setup

    marker = tmp_path / "PWNED"
    model_dir = tmp_path / "evil-model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps({
        "model_type": "evil-seq2seq", "auto_map": {"AutoConfig": "configuration_evil.EvilConfig",
                                                   "AutoModelForSeq2SeqLM": "modeling_evil.EvilModel"}}))
    booby_trap(model_dir, marker, ["configuration_evil.py", "modeling_evil.py"])
    tok_dir, evil_tok_dir = tmp_path / "tok", tmp_path / "evil-tok"
    tokenizer = train_fast_tokenizer(corpus.read_text().splitlines(), 300)
    tokenizer.save_pretrained(tok_dir)
    tokenizer.save_pretrained(evil_tok_dir)
    settings = json.loads((evil_tok_dir / "tokenizer_config.json").read_text())
    settings.update(tokenizer_class="EvilTokenizer", auto_map={"AutoTokenizer": ["tokenization_evil.EvilTokenizer",
                                                                                   None]})
    (evil_tok_dir / "tokenizer_config.json").write_text(json.dumps(settings))
    booby_trap(evil_tok_dir, marker, ["tokenization_evil.py"])
    base = ["train", "--train-files", str(corpus), "--max-steps", "2", "--cache-dir", str(tmp_path / "cache")]
    for flag, extra, says in [
            ("--model", ["--model", str(model_dir), "--tokenizer", str(tok_dir)],
             "a 'evil-seq2seq' model whose config.json names its own code (auto_map); its Python code runs only with "
             "--trust-remote-code"),
            ("--tokenizer", ["--tokenizer", str(evil_tok_dir)],
             "a 'EvilTokenizer' tokenizer whose tokenizer_config.json names its own code (auto_map)")]:
        code = cli_main([*base, "--output-dir", str(tmp_path / flag), *extra])
        line = one_error_line(capsys)
        assert code == 2 and f"{flag} {tmp_path}/evil-" in line and says in line, line
        # found before any data is read; and the loaders themselves refuse too
        options, args = tiny(tmp_path, tmp_path / "missing.txt", flag + "2", **{flag[2:]: extra[1]})
        with pytest.raises(TrainingSetupError, match="--trust-remote-code"):
            run_training(options, args)
        with pytest.raises(TrainingSetupError, match="custom code.*loads only with --trust-remote-code"):
            if flag == "--model":
                model_setup._load_pretrained(extra[1], {}, trust_remote_code=False)
            else:
                model_setup.load_tokenizer_folder(extra[1], flag=flag)
    assert not marker.exists()
    assert config_from_args(["--train-files", "a", "--output-dir", "o", "--trust-remote-code"])[0].trust_remote_code


# --------------------------------------------------------------------------------------------------------------------
# 2. Output folders never lose work
# --------------------------------------------------------------------------------------------------------------------


def lock_is_free(output_dir: Path) -> bool:
    """Nobody holds ``output_dir``'s lock: we can take it (and give it back)."""
    try:
        OutputLock(output_dir).acquire().release()
    except TrainingSetupError:
        return False
    return True


HOLD_AND_WAIT = """
import sys, time
from scratchformer.training.output_dir import OutputLock
lock = OutputLock(sys.argv[1]).acquire()  # kept: a lock object that is collected lets go
print("held", flush=True)
time.sleep(600)
"""


def test_output_lock(tmp_path):
    out = tmp_path / "out"
    lock = OutputLock(out).acquire()
    assert f"process {os.getpid()} on {socket.gethostname()}" in (out / HOLDER_NAME).read_text()
    with pytest.raises(TrainingSetupError, match=f"in use by another run \\(process {os.getpid()} on "):
        OutputLock(out).acquire()  # held: refused, even in the same process
    lock.release()
    assert not (out / HOLDER_NAME).exists() and lock_is_free(out)


def test_a_lock_file_that_cannot_be_made_is_said_as_such_not_as_another_run(tmp_path, capsys, refuse_to_open):
    """``--output-dir /proc/x`` gave a traceback, and a lock file the file system will not make read as a lock held
    by another run (``filelock`` reports both as a timeout): one line that names the folder and the system's error."""
    refuse_to_open(LOCK_NAME)
    out = tmp_path / "out"
    code = cli_main(["train", "--train-files", str(tmp_path / "missing.txt"), "--output-dir", str(out)])
    line = one_error_line(capsys)
    assert code == 2 and line.startswith(f"scratchformer train: error: --output-dir {out}: cannot be written: "), line
    assert "No such file or directory" in line and "another run" not in line, line


def test_a_killed_runs_lock_dies_with_it(tmp_path):
    """The lock is the operating system's: a run killed with SIGKILL leaves nothing to break by hand."""
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_AND_WAIT, str(out)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(TrainingSetupError, match=f"in use by another run \\(process {holder.pid} on "):
            OutputLock(out).acquire()
    finally:
        holder.kill()
        holder.wait()
    said = []
    OutputLock(out, said.append).acquire().release()  # at once, without a word
    assert said == []


def test_sigterm_during_a_checkpoint_save_ends_the_run_as_ctrl_c_does(tmp_path, corpus):  # noqa: F811
    """Issue 67: SIGTERM or SIGHUP to ``train`` killed the process, and a checkpoint being saved stayed behind in
    ``_checkpoint-staging``. Now they end the run as Ctrl-C does: the staged checkpoint goes, the lock is released,
    status 128 + the signal."""
    ready, out = tmp_path / "ready", tmp_path / "out"
    script = textwrap.dedent(f"""
        import pathlib, time
        from scratchformer.cli import main
        from scratchformer.training import checkpoints
        def stalled(staged, final):  # checkpoint-2 is staged: wait here to be ended
            pathlib.Path({str(ready)!r}).write_text("staged")
            time.sleep(300)
        checkpoints.publish = stalled
        raise SystemExit(main(["train", "--train-files", {str(corpus)!r}, "--output-dir", {str(out)!r}, "--preset",
                               "tiny", "--tokenizer-vocab-size", "300", "--max-length", "32", "--max-steps", "4",
                               "--save-steps", "2", "--eval-steps", "0", "--no-progress-bar",
                               "--cache-dir", {str(tmp_path / "cache")!r}]))
    """)
    run = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    try:
        for _ in range(3000):
            if ready.exists() or run.poll() is not None:
                break
            time.sleep(0.1)
        assert ready.exists(), run.communicate(timeout=10)
        assert (out / "_checkpoint-staging" / "checkpoint-2" / "model.safetensors").is_file()
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert not (out / "_checkpoint-staging").exists() and not list(out.glob("checkpoint-*")), stderr[-3000:]
    assert lock_is_free(out)


def test_second_run_on_a_locked_folder_is_refused(tmp_path, corpus, capsys):  # noqa: F811
    out = tmp_path / "out"
    holder = OutputLock(out).acquire()
    try:
        options, args = tiny(tmp_path, corpus, "out")
        with pytest.raises(TrainingSetupError, match="is in use by another run"):
            run_training(options, args, callbacks=[FailIfTrainingStarts()])
        code = cli_main(["train", "--train-files", str(tmp_path / "missing.txt"), "--output-dir", str(out)])
        assert code == 2 and "is in use by another run" in one_error_line(capsys)  # before any data is read
        assert holder.held and (out / HOLDER_NAME).is_file()  # the holder's lock is untouched
    finally:
        holder.release()


def test_finished_model_folder_is_refused_without_flags(tmp_path, corpus, capsys):  # noqa: F811
    out = tmp_path / "out"
    ScratchformerForConditionalGeneration(ScratchformerConfig(**TINY_CONFIG, vocab_size=300)).save_pretrained(out)
    assert not list(out.glob("checkpoint-*"))
    code = cli_main(["train", "--train-files", str(tmp_path / "missing.txt"), "--output-dir", str(out)])
    line = one_error_line(capsys)
    assert code == 2 and "already holds a run or a model (config.json, model.safetensors)" in line
    assert "--resume" in line and "--overwrite_output_dir" in line
    assert lock_is_free(out)  # released after the refusal
    code = cli_main(["train", "--train-files", str(tmp_path / "missing.txt"), "--output-dir", str(out), "--resume",
                     "--overwrite_output_dir"])
    assert code == 2 and "give one of them" in one_error_line(capsys)

    options, args = tiny(tmp_path, corpus, "out", max_steps=2, save_steps=2, overwrite_output_dir=True)
    result = run_training(options, args)
    assert result["global_step"] == 2 and "overwrite_output_dir: deleted the earlier run's" in capsys.readouterr().err
    assert ScratchformerForConditionalGeneration.from_pretrained(out).config.d_model == 32  # the new model
    assert lock_is_free(out)
    with pytest.raises(TrainingSetupError, match=r"already holds a run or a model \(config.json, model.safetensors, "
                                                 r"train_config.json, checkpoint-2\)"):
        run_training(dataclasses.replace(options, overwrite_output_dir=False), args)


# --------------------------------------------------------------------------------------------------------------------
# 3. Crash-safe checkpoints
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory, corpus):  # noqa: F811
    """A run of 8 steps stopped after step 4 (complete checkpoint-2 and checkpoint-4); read-only for the tests."""
    tmp = tmp_path_factory.mktemp("stopped")
    options, args = tiny(tmp, corpus, "run", save_steps=2)
    assert run_training(options, args, callbacks=[StopAt(4)])["stopped"]
    return tmp, Path(args.output_dir)


def test_incomplete_checkpoints_are_found(tmp_path, stopped_run):
    _, run = stopped_run
    good = run / "checkpoint-4"
    assert checkpoint_problems(good) == []
    assert json.loads((good / "train_config.json").read_text())["max_steps"] == 8  # the options it was trained with

    def broken(name, damage):
        folder = tmp_path / name
        shutil.copytree(good, folder)
        damage(folder)
        return checkpoint_problems(folder)

    def truncate(path, keep=0.5):
        data = path.read_bytes()
        path.write_bytes(data[:int(len(data) * keep)])

    (problem,) = broken("checkpoint-1", lambda f: truncate(f / "model.safetensors"))
    assert problem == "model.safetensors is truncated or corrupted (incomplete metadata, file not fully covered)"
    assert broken("checkpoint-2", lambda f: truncate(f / "model.safetensors", 0.00001)) == [
        "model.safetensors is truncated or corrupted (header too small)"]
    assert broken("checkpoint-3", lambda f: truncate(f / "trainer_state.json")) == [
        "trainer_state.json does not parse (JSONDecodeError)"]
    assert broken("checkpoint-4", lambda f: (f / "optimizer.pt").unlink()) == ["no optimizer.pt"]
    assert broken("checkpoint-5", lambda f: truncate(f / "scheduler.pt", 0.9)) == [
        "scheduler.pt is truncated or not a torch.save file"]
    assert broken("checkpoint-6", lambda f: [p.unlink() for p in f.glob("rng_state*")]) == ["no rng_state*.pth"]
    assert broken("checkpoint-7", lambda f: (f / "config.json").unlink()) == ["no config.json"]
    (tmp_path / "checkpoint-8").mkdir()  # killed right after the folder was made
    assert "no config.json" in checkpoint_problems(tmp_path / "checkpoint-8")

    shutil.copytree(good, tmp_path / "checkpoint-0")
    said = []
    assert resolve_resume(str(tmp_path), "latest", said.append) == str(tmp_path / "checkpoint-0")
    assert said and said[0].startswith("--resume: skipping incomplete or damaged checkpoint(s) checkpoint-8 (no config.json")
    assert said[0].endswith("continuing from checkpoint-0")
    with pytest.raises(TrainingSetupError, match=r"checkpoint-3: not a complete Trainer checkpoint \(trainer_state."
                                                 r"json does not parse.*the newest complete one next to it is "
                                                 r".*checkpoint-0"):
        resolve_resume(str(tmp_path), str(tmp_path / "checkpoint-3"))


def test_a_checkpoint_whose_pickles_torch_refuses_is_skipped_on_resume(tmp_path, stopped_run, corpus,  # noqa: F811
                                                                       capsys):
    """The Trainer unpickles a checkpoint's optimizer, scheduler and RNG states with torch.load(weights_only=True):
    a state holding any other object (written by other code, or tampered with) ended --resume in UnpicklingError once
    the model and the data were loaded. Now --resume skips that checkpoint, says why and continues from the one
    before; --resume naming it is refused up front, in one line."""
    import argparse

    _, run = stopped_run
    shutil.copytree(run, tmp_path / "run")
    planted = tmp_path / "run" / "checkpoint-4"
    torch.save({"planted": argparse.Namespace(code="not a tensor")}, planted / "rng_state.pth")
    assert checkpoint_problems(planted) == []  # a complete zip archive: only unpickling tells
    assert checkpoint_problems(planted, loadable=True) == [
        "rng_state.pth holds pickled objects that torch.load(weights_only=True) refuses (GLOBAL argparse.Namespace)"]
    options, args = tiny(tmp_path, corpus, "run", save_steps=2, resume_from_checkpoint=str(planted))
    with pytest.raises(TrainingSetupError, match=r"checkpoint-4: not a complete Trainer checkpoint \(rng_state.pth "
                                                 r"holds pickled objects.*the newest complete one next to it is "
                                                 r".*checkpoint-2"):
        run_training(options, args)
    args.resume_from_checkpoint = "latest"
    capsys.readouterr()
    assert run_training(options, args)["global_step"] == 8
    assert ("--resume: skipping incomplete or damaged checkpoint(s) checkpoint-4 (rng_state.pth holds pickled objects that "
            "torch.load(weights_only=True) refuses (GLOBAL argparse.Namespace)); continuing from checkpoint-2"
            ) in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["a flipped bit in the weights", "a head count edited in config.json"])
def test_a_checkpoint_that_fails_its_checksums_is_skipped_on_resume_and_never_signed_again(
        tmp_path, stopped_run, corpus, capsys, damage):  # noqa: F811
    """--resume continued from a checkpoint whose weights failed their checksums, without a word, and the run's
    final folder then got fresh checksums that sha256sum -c accepts. Now --resume verifies what the checkpoint's
    checksums.sha256 lists (the weights, and config.json: a head count edited with the same shapes): naming it is
    refused in one line, and --resume (latest) skips it with a note and continues from the one before, whose
    continuation writes a healthy checkpoint-4 in its place. A manifest written before config.json was listed
    still resumes."""
    from scratchformer.integrity import CHECKSUMS, checksum_problems

    _, run = stopped_run
    shutil.copytree(run, tmp_path / "run")
    damaged = tmp_path / "run" / "checkpoint-4"
    older = tmp_path / "older" / "checkpoint-4"  # checksums.sha256 as written before it listed config.json
    shutil.copytree(damaged, older)
    manifest = (older / CHECKSUMS).read_text().splitlines()
    assert [line.split()[1] for line in manifest] == ["config.json", "model.safetensors", "tokenizer.json",
                                                     "tokenizer_config.json"]
    (older / CHECKSUMS).write_text(manifest[1] + "\n")
    assert checkpoint_problems(older, loadable=True) == []
    if damage == "a flipped bit in the weights":
        weights = damaged / "model.safetensors"
        data = bytearray(weights.read_bytes())
        data[-100] ^= 0x01  # inside the last tensor: the header and the size are intact
        weights.write_bytes(bytes(data))
        named = "model.safetensors is damaged"
    else:
        config = json.loads((damaged / "config.json").read_text())
        config["encoder_attention_heads"] = config["decoder_attention_heads"] = 1  # was 2: the same shapes
        (damaged / "config.json").write_text(json.dumps(config, indent=2))
        named = "config.json is damaged"
    assert checkpoint_problems(damaged) == []  # complete and parseable: only the checksums tell
    (problem,) = checkpoint_problems(damaged, loadable=True)
    assert problem.startswith(f"{named}: its sha256 is "), problem
    options, args = tiny(tmp_path, corpus, "run", save_steps=2, resume_from_checkpoint=str(damaged))
    with pytest.raises(TrainingSetupError, match=rf"checkpoint-4: not a complete Trainer checkpoint \({named}.*"
                                                 r"the newest complete one next to it is .*checkpoint-2"):
        run_training(options, args)
    args.resume_from_checkpoint = "latest"
    capsys.readouterr()
    assert run_training(options, args)["global_step"] == 8
    assert (f"--resume: skipping incomplete or damaged checkpoint(s) checkpoint-4 ({named}: its sha256 is "
            ) in capsys.readouterr().err
    for folder in (damaged, tmp_path / "run"):  # written again by the continuation of checkpoint-2, and signed
        assert checksum_problems(folder) == [] and checkpoint_problems(folder, model_only=True) == [], folder
    assert json.loads((damaged / "config.json").read_text())["encoder_attention_heads"] == 2


def test_train_with_a_hub_token_writes_it_into_no_file_and_still_pushes(tmp_path, corpus, monkeypatch):  # noqa: F811
    """train --hub-token stored the token in the clear in training_args.bin, in the run folder and in every
    checkpoint: the folder users upload. The arguments now pickle without it, while the Trainer's own push still
    sends it (the fake Hub accepts that token only), at each checkpoint and at the end, and uploads no file that
    holds it."""
    import huggingface_hub.constants
    import transformers.utils.hub
    from fake_hub import FakeHub

    token = "hf_TrainSecret0123456789abcdefXYZ"
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(transformers.utils.hub, "_hf_api", None, raising=False)  # made again, for this endpoint
    with FakeHub(token=token) as hub:
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.url)
        options, args = tiny(tmp_path, corpus, "run", max_steps=2, save_steps=2, hub_token=token, push_to_hub=True,
                             hub_model_id="alice/run")
        run_training(options, args)
    assert args.hub_token == token  # still in memory, for the push
    # the checkpoint's push reads the published checkpoint-2 (from the staging folder, it found no files)
    assert [commit["summary"] for commit in hub.repos["alice/run"].commits] == ["Training in progress, step 2",
                                                                               "Model save"]
    uploaded = hub.repos["alice/run"].files
    assert {"training_args.bin", "model.safetensors", "config.json"} <= set(uploaded), sorted(uploaded)
    # the run's own bookkeeping (lock, staging, deletions) starts with "_", which the Trainer's pushes skip
    assert not [name for name in uploaded if name.startswith(("_", "."))], sorted(uploaded)
    written = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    assert {tmp_path / "run" / "training_args.bin", tmp_path / "run" / "checkpoint-2" / "training_args.bin"} <= set(
        written)
    for name, data in [*uploaded.items(), *written.items()]:
        assert token.encode() not in data, name
    saved = torch.load(tmp_path / "run" / "training_args.bin", weights_only=False)
    assert saved.hub_token is None and saved.hub_model_id == "alice/run" and saved.max_steps == 2


def test_a_training_push_the_hub_refuses_shows_no_token_in_its_error_or_logs(tmp_path, corpus,  # noqa: F811
                                                                              monkeypatch):
    """The Trainer's own push (train --push-to-hub --hub-token) to a Hub that refuses the commit and echoes the
    request's headers: the HfHubHTTPError that ended the run quoted 'Bearer hf_...'. The run is under no_secrets
    now: the error and what it chains, what the Hub libraries logged and every file written hold no token."""
    import logging

    import huggingface_hub.constants
    import transformers.utils.hub
    from fake_hub import FakeHub
    from test_errors import chain_text

    token = "hf_TrainSecret0123456789abcdefXYZ"
    records: list[str] = []
    recorder = logging.Handler()
    recorder.emit = lambda record: records.append(record.getMessage())
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(transformers.utils.hub, "_hf_api", None, raising=False)  # made again, for this endpoint
    for name in ("transformers", "huggingface_hub"):
        logging.getLogger(name).addHandler(recorder)
    try:
        with FakeHub(token=token) as hub:
            hub.echo_headers, hub.refuse = True, {"commit"}
            monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.url)
            options, args = tiny(tmp_path, corpus, "run", max_steps=2, save_steps=2, hub_token=token,
                                 push_to_hub=True, hub_model_id="alice/run")
            with pytest.raises(Exception, match="rights to write") as caught:
                run_training(options, args)
    finally:
        for name in ("transformers", "huggingface_hub"):
            logging.getLogger(name).removeHandler(recorder)
    text, _ = chain_text(caught.value)
    assert "request headers" in text and token not in text, text[-3000:]  # the echo is there, redacted
    assert token not in "\n".join(records)
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or token.encode() not in path.read_bytes(), path


def test_checkpoints_and_hub_folders_share_one_safetensors_check(tmp_path):
    """A weights file with bytes appended (or cut short) is the same problem, said the same way, to --resume and to
    the Hub folder check: both call scratchformer.integrity.safetensors_file_problem."""
    from scratchformer.errors import HubError
    from scratchformer.hub.checks import check_folder
    from scratchformer.integrity import safetensors_file_problem
    from scratchformer.loading import pretrained_path

    folder = tmp_path / "model"
    shutil.copytree(pretrained_path("small"), folder)
    assert safetensors_file_problem(folder / "model.safetensors") is None and checkpoint_problems(folder, True) == []
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes() + b"appended")
    problem = safetensors_file_problem(weights)
    assert problem == "model.safetensors is truncated or corrupted (incomplete metadata, file not fully covered)"
    assert checkpoint_problems(folder, model_only=True) == [problem]
    with pytest.raises(HubError) as error:
        check_folder(folder)
    assert problem in str(error.value)
    assert safetensors_file_problem(tmp_path / "missing.safetensors") == "no missing.safetensors"


def test_rotation_keeps_complete_checkpoints_only(tmp_path, stopped_run):
    _, run = stopped_run
    for step in (2, 4, 6, 10):
        shutil.copytree(run / "checkpoint-4", tmp_path / f"checkpoint-{step}")
    (tmp_path / "checkpoint-12").mkdir()  # incomplete, newest
    (tmp_path / "checkpoint-10" / "trainer_state.json").write_text("{")  # incomplete
    (tmp_path / "_deleting-checkpoint-1").mkdir()  # an interrupted deletion
    said = []
    deleted = rotate_checkpoints(tmp_path, 2, say=said.append)
    assert [p.name for p in deleted] == ["checkpoint-2"]
    assert [p.name for _, p in list_checkpoints(tmp_path)] == ["checkpoint-4", "checkpoint-6", "checkpoint-10",
                                                                "checkpoint-12"]
    assert not (tmp_path / "_deleting-checkpoint-1").exists()
    assert said == ["incomplete checkpoint folder(s) not counted as checkpoints: checkpoint-10, checkpoint-12"]
    rotate_checkpoints(tmp_path, 1, best=str(tmp_path / "checkpoint-4"))
    assert [p.name for _, p in list_checkpoints(tmp_path)] == ["checkpoint-4", "checkpoint-6", "checkpoint-10",
                                                                "checkpoint-12"]  # the best and the newest complete
    rotate_checkpoints(tmp_path, 1)
    assert newest_complete_checkpoint(tmp_path)[0].name == "checkpoint-6"  # never deleted


KILLER = textwrap.dedent('''
    """Run ``scratchformer train`` and SIGKILL the process at one point of the save of checkpoint-STEP."""
    import dataclasses, json, os, shutil, signal, sys

    import torch
    from transformers import Trainer, TrainerState
    from transformers.modeling_utils import PreTrainedModel

    import scratchformer.training.checkpoints as checkpoints
    from scratchformer.cli import main

    point, step, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    saving = {"step": None}

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    def armed():
        return saving["step"] == step

    def wrap(owner, name, before=None, after=None):
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            if before is not None:
                before(*args, **kwargs)
            result = original(*args, **kwargs)
            if after is not None:
                after(*args, **kwargs)
            return result
        setattr(owner, name, wrapper)

    wrap(Trainer, "_save_checkpoint", before=lambda self, *a: saving.update(step=self.state.global_step))
    if point == "folder":  # right after the checkpoint folder is made
        wrap(PreTrainedModel, "save_pretrained",
             before=lambda self, folder, *a, **k: armed() and (os.makedirs(folder, exist_ok=True), die()))
    elif point == "weights":  # right after the weights are written
        wrap(PreTrainedModel, "save_pretrained", after=lambda *a, **k: armed() and die())
    elif point == "state":  # half-way through trainer_state.json
        def half_state(self, path):
            if armed():
                text = json.dumps(dataclasses.asdict(self), indent=2)
                open(path, "w").write(text[: len(text) // 2])
                die()
        wrap(TrainerState, "save_to_json", before=half_state)
    elif point == "rotation":  # half-way through deleting the oldest checkpoint
        def half_delete(path, *a, **k):
            if armed() and os.path.basename(str(path)).startswith("_deleting-") and os.path.isdir(path):
                os.remove(os.path.join(path, sorted(os.listdir(path))[0]))
                die()
        wrap(shutil, "rmtree", before=half_delete)
    sys.exit(main(["train", *sys.argv[4:]]))
''')


def command_line(settings: dict) -> list[str]:
    words = []
    for key, value in settings.items():
        if value is True:
            words.append(f"--{key}")
        else:
            words += [f"--{key}", *(map(str, value) if isinstance(value, list) else [str(value)])]
    return words


@pytest.mark.slow
def test_killed_saves_resume_to_the_uninterrupted_weights(tmp_path, corpus, capsys):  # noqa: F811
    """SIGKILL during four saves (after the folder is made, after the weights, mid trainer_state.json, mid rotation),
    each time --resume; the final weights equal an uninterrupted run's bit for bit."""
    settings = dict(train_files=[str(corpus)], preset="tiny", tokenizer_vocab_size=300, max_length=32,
                    per_device_train_batch_size=8, max_steps=8, eval_steps=0, save_steps=2, save_total_limit=2,
                    logging_steps=1, learning_rate=3e-3, warmup_steps=2, disable_tqdm=True, max_eval_samples=16)
    reference = run_training(*config_from_args(command_line({**settings, "output_dir": tmp_path / "reference",
                                                             "cache_dir": tmp_path / "cache"})))
    out = tmp_path / "killed"
    words = command_line({**settings, "output_dir": out, "cache_dir": tmp_path / "cache"})
    killer = tmp_path / "killer.py"
    killer.write_text(KILLER)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_DATASETS_OFFLINE": "1"}
    expected_complete = {"folder": [2], "weights": [2], "state": [2], "rotation": [4, 6]}
    for i, (point, step) in enumerate([("folder", 4), ("weights", 4), ("state", 4), ("rotation", 6)]):
        command = [sys.executable, str(killer), point, str(step), str(torch.get_num_threads()), *words,
                   *(["--resume"] if i else [])]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == -signal.SIGKILL, (point, proc.stdout[-2000:], proc.stderr[-3000:])
        checkpoints = list_checkpoints(out)
        assert [step for step, _ in checkpoints] == expected_complete[point], point
        assert all(checkpoint_problems(folder) == [] for _, folder in checkpoints), point  # only complete ones
        assert lock_is_free(out)  # the killed run's lock died with it

    # an incomplete checkpoint-7 as a kill during a non-atomic save would leave it: skipped, and never a keeper
    shutil.copytree(out / "checkpoint-6", out / "checkpoint-7")
    (out / "checkpoint-7" / "trainer_state.json").write_text('{"global_st')
    resumed = run_training(*config_from_args([*words, "--resume"]))
    err = capsys.readouterr().err
    assert "skipping incomplete or damaged checkpoint(s) checkpoint-7 (trainer_state.json does not parse" in err
    assert "continuing from checkpoint-6" in err
    assert resumed["global_step"] == 8
    assert [step for step, _ in list_checkpoints(out)] == [6, 7, 8]  # 6 and 8 kept: 7 is not counted
    assert lock_is_free(out) and not list(out.glob("_deleting-*")) and not list(out.glob("_checkpoint-*"))

    final, expected = load_file(out / "model.safetensors"), load_file(Path(reference["output_dir"]) / "model.safetensors")
    assert final.keys() == expected.keys()
    for name in expected:
        assert torch.equal(final[name], expected[name]), name  # bit-exact
    assert train_losses(out) == train_losses(Path(reference["output_dir"]))


# --------------------------------------------------------------------------------------------------------------------
# 4. A changed run is refused, not silently different
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("changes, refused", [
    (dict(learning_rate=1e-3), "--learning-rate 0.001 (the run: 0.003)"),
    (dict(seed=1), "--seed 1 (the run: 42)"),
    (dict(warmup_steps=3), "--warmup-steps 3 (the run: 2)"),
    (dict(lr_scheduler_type="cosine"), "--lr-schedule cosine (the run: inverse_sqrt)"),
    (dict(per_device_train_batch_size=4), "1 process(es) x --batch-size 4 x --gradient-accumulation-steps 1 = 4 "
                                          "examples per optimizer step (the run: 1 x 8 x 1 = 8)"),
    (dict(gradient_accumulation_steps=2), "= 16 examples per optimizer step"),
    (dict(mask_ratio=0.5), "--mask-ratio 0.5 (the run: 0.3)"),
    (dict(short_fraction=0.5), "--short-fraction 0.5 (the run: 0)"),
    (dict(contrastive_weight=0.5), "--contrastive-weight 0.5 (the run: 0)"),
    (dict(encoder_mlm_weight=0.5), "--encoder-mlm-weight 0.5 (the run: 0)"),
    (dict(preset="mini"), "--preset mini (the run: tiny)"),
])
def test_resume_refuses_options_that_change_the_run(stopped_run, corpus, changes, refused):  # noqa: F811
    tmp, run = stopped_run
    options, args = tiny(tmp, corpus, "run", save_steps=2, resume_from_checkpoint="latest", **changes)
    with pytest.raises(TrainingSetupError, match="these options differ from the run's") as error:
        run_training(options, args, callbacks=[FailIfTrainingStarts()])
    assert refused in str(error.value) and "Resume with the run's values" in str(error.value)
    assert str(run / "checkpoint-4" / "train_config.json") in str(error.value)


def test_resume_allows_and_records_what_does_not_change_the_run(stopped_run, corpus, tmp_path):  # noqa: F811
    tmp, run = stopped_run
    checkpoint = str(run / "checkpoint-4")
    said = []
    options, args = tiny(tmp, corpus, "run", save_steps=5, resume_from_checkpoint="latest", max_steps=20,
                         logging_steps=3, max_minutes=9, dataloader_num_workers=1, max_eval_samples=4, bf16=True)
    continued = continue_run_options(options, args, checkpoint, 1, said.append)
    assert continued.max_steps == 20 and continued.learning_rate == 3e-3 and continued.warmup_steps == 2
    assert len(said) == 1 and "(these do not change the run)" in said[0]
    for change in ("--max-steps 20 (the run: 8)", "--save-steps 5 (the run: 2)", "--max-minutes 9 (the run: None)",
                   "--dataloader-num-workers 1 (the run: 0)", "--max-eval-samples 4 (the run: 16)",
                   "--bf16 True (the run: False)"):  # a run may move from CPU cores to a GPU
        assert change in said[0], change

    # the learning rate and warm-up left to their defaults are the run's (their defaults depend on --max-steps)
    options, args = tiny(tmp, corpus, "run", save_steps=2, resume_from_checkpoint="latest", max_steps=20,
                         learning_rate=None, warmup_steps=None)
    assert args.learning_rate is None and args.warmup_steps == 10
    continued = continue_run_options(options, args, checkpoint, 1, said.append)
    assert (continued.learning_rate, continued.warmup_steps) == (3e-3, 2)

    # the same batch split differently (2 processes x 4) is the same run
    options, args = tiny(tmp, corpus, "run", save_steps=2, resume_from_checkpoint="latest",
                         per_device_train_batch_size=4)
    continue_run_options(options, args, checkpoint, 2, said.append)
    assert "2 process(es) x --batch-size 4 x --gradient-accumulation-steps 1 = 8 examples" in said[-1]

    # a longer run is another run where the schedule is laid out over its length (linear, cosine, ...)
    saved = json.loads((run / "checkpoint-4" / "train_config.json").read_text())
    (tmp_path / "checkpoint-4").mkdir()
    (tmp_path / "checkpoint-4" / "train_config.json").write_text(json.dumps(dict(saved, lr_scheduler_type="linear")))
    shutil.copy(run / "checkpoint-4" / "trainer_state.json", tmp_path / "checkpoint-4")
    options, args = tiny(tmp, corpus, "run", save_steps=2, lr_scheduler_type="linear", max_steps=20)
    with pytest.raises(TrainingSetupError, match=r"--max-steps 20 \(the run: 8\)"):
        continue_run_options(options, args, str(tmp_path / "checkpoint-4"), 1)
    options, args = tiny(tmp, corpus, "run", save_steps=2, lr_scheduler_type="linear", max_steps=4)
    continue_run_options(options, args, str(tmp_path / "checkpoint-4"), 1, said.append)  # only finishing the run

    # ... except while the checkpoint is still in a warm-up given in steps: the curve so far is the same for any length
    (tmp_path / "checkpoint-4" / "train_config.json").write_text(
        json.dumps(dict(saved, lr_scheduler_type="linear", warmup_steps=4)))
    for length in (20, 6):
        options, args = tiny(tmp, corpus, "run", save_steps=2, lr_scheduler_type="linear", warmup_steps=4,
                             max_steps=length)
        continue_run_options(options, args, str(tmp_path / "checkpoint-4"), 1, said.append)
        assert f"--max-steps {length} (the run: 8)" in said[-1]
    (tmp_path / "checkpoint-4" / "train_config.json").write_text(
        json.dumps(dict(saved, lr_scheduler_type="linear", warmup_steps=3)))
    options, args = tiny(tmp, corpus, "run", save_steps=2, lr_scheduler_type="linear", warmup_steps=3, max_steps=20)
    with pytest.raises(TrainingSetupError, match=r"--max-steps 20 \(the run: 8\)"):
        continue_run_options(options, args, str(tmp_path / "checkpoint-4"), 1)  # step 4 is past a warm-up of 3


def test_resume_of_a_run_recorded_before_an_option_existed_allows_only_its_default(stopped_run, corpus,  # noqa: F811
                                                                                      tmp_path):
    """A run recorded by an older version has no ``contrastive_weight``: it ran without the loss, so resuming it
    with the loss on is refused, and resuming it without is the same run."""
    tmp, run = stopped_run
    saved = json.loads((run / "checkpoint-4" / "train_config.json").read_text())
    old = {key: value for key, value in saved.items() if not key.startswith("contrastive_")}
    (tmp_path / "checkpoint-4").mkdir()
    (tmp_path / "checkpoint-4" / "train_config.json").write_text(json.dumps(old))
    shutil.copy(run / "checkpoint-4" / "trainer_state.json", tmp_path / "checkpoint-4")
    options, args = tiny(tmp, corpus, "run", save_steps=2, contrastive_weight=0.5)
    with pytest.raises(TrainingSetupError, match=r"--contrastive-weight 0.5 \(the run: recorded before this option "
                                                 r"existed, so 0\)"):
        continue_run_options(options, args, str(tmp_path / "checkpoint-4"), 1)
    options, args = tiny(tmp, corpus, "run", save_steps=2)
    said = []
    continue_run_options(options, args, str(tmp_path / "checkpoint-4"), 1, said.append)
    assert said == []


def test_resume_with_the_contrastive_loss_keeps_the_micro_batch(stopped_run, corpus, tmp_path):  # noqa: F811
    """With the contrastive loss the micro-batch holds the negatives: 8 examples per step as 2 x 4 instead of 1 x 8
    is another run then (without it, the same run: the test above)."""
    tmp, run = stopped_run
    saved = json.loads((run / "checkpoint-4" / "train_config.json").read_text())
    (tmp_path / "checkpoint-4").mkdir()
    (tmp_path / "checkpoint-4" / "train_config.json").write_text(json.dumps(dict(saved, contrastive_weight=1.0)))
    shutil.copy(run / "checkpoint-4" / "trainer_state.json", tmp_path / "checkpoint-4")
    options, args = tiny(tmp, corpus, "run", save_steps=2, contrastive_weight=1.0, per_device_train_batch_size=4,
                         gradient_accumulation_steps=2)
    with pytest.raises(TrainingSetupError, match="the micro-batch is the set of negatives: keep --batch-size 8"):
        continue_run_options(options, args, str(tmp_path / "checkpoint-4"), 1)
    options, args = tiny(tmp, corpus, "run", save_steps=2, contrastive_weight=1.0, per_device_train_batch_size=8)
    continue_run_options(options, args, str(tmp_path / "checkpoint-4"), 1)  # the same split: the same run


def test_resumed_run_records_the_options_it_used(tmp_path, corpus):  # noqa: F811
    options, args = tiny(tmp_path, corpus, "run", max_steps=4, save_steps=2, learning_rate=None, warmup_steps=None)
    assert run_training(options, args, callbacks=[StopAt(2)])["stopped"]
    first = json.loads((Path(args.output_dir) / "train_config.json").read_text())
    assert first["warmup_steps"] == 2 and first["learning_rate"] == pytest.approx(max_default_peak(32))
    options, args = tiny(tmp_path, corpus, "run", max_steps=6, save_steps=2, learning_rate=None, warmup_steps=None,
                         resume_from_checkpoint="latest")
    assert run_training(options, args)["global_step"] == 6
    used = json.loads((Path(args.output_dir) / "train_config.json").read_text())
    assert (used["max_steps"], used["warmup_steps"], used["learning_rate"]) == (6, 2, first["learning_rate"])
    assert json.loads((Path(args.output_dir) / "checkpoint-6" / "train_config.json").read_text()) == used


# --------------------------------------------------------------------------------------------------------------------
# 5. The default peak learning rate
# --------------------------------------------------------------------------------------------------------------------


def test_default_peak_learning_rate_does_not_grow_as_max_steps_shrinks():
    mini, small, base = 192, 256, 512
    # the old default (warm-up = 10% of --max-steps, uncapped) gave mini 7.2e-3 at 1000 steps and 2.3e-2 at 100
    assert mini ** -0.5 * 100 ** -0.5 == pytest.approx(7.2e-3, rel=0.01)
    assert mini ** -0.5 * 10 ** -0.5 == pytest.approx(2.3e-2, rel=0.01)
    peaks = {}
    for max_steps in (10, 100, 1000, 4000, 8000, 100_000):
        warmup = default_warmup_steps(max_steps)
        assert warmup == min(4000, max_steps // 2)
        peaks[max_steps] = peak_learning_rate(None, "inverse_sqrt", mini, warmup)
    assert max_default_peak(mini) == pytest.approx(1.633e-3, rel=1e-3)
    assert peaks[10] == peaks[100] == peaks[1000] == max_default_peak(mini)  # capped
    assert peaks[4000] == pytest.approx(1.614e-3, rel=1e-3)  # warm-up 2000: the paper's formula, under the cap
    assert peaks[8000] == peaks[100_000] == pytest.approx(1.141e-3, rel=1e-3)  # warm-up 4000
    assert list(peaks.values()) == sorted(peaks.values(), reverse=True)  # never grows as --max-steps shrinks
    # the paper's base model with its 4000 warm-up steps keeps the paper's peak
    assert peak_learning_rate(None, "inverse_sqrt", base, 4000) == pytest.approx(6.988e-4, rel=1e-3)
    assert peak_learning_rate(None, "linear", mini, 50) == 5e-4
    assert peak_learning_rate(2e-3, "inverse_sqrt", small, 300) == 2e-3  # a given rate is used as it is

    # a warning above twice the cap: the old defaults warn, the shipped recipe (2e-3, d_model 256) does not
    assert learning_rate_warning(7.2e-3, mini) is not None
    assert "above 0.00327" in learning_rate_warning(2.3e-2, mini)
    assert learning_rate_warning(2e-3, small) is None and learning_rate_warning(max_default_peak(mini), mini) is None


def test_reproduce_command_and_help_keep_their_learning_rate(capsys):
    card = (REPO_ROOT / "scratchformer" / "pretrained" / "scratchformer-small" / "README.md").read_text()
    from test_training import training_commands

    (command,) = [c for c in training_commands(card) if "--preset" in c]
    _, args = config_from_args(command)
    assert (args.learning_rate, args.warmup_steps) == (2e-3, 300)
    with pytest.raises(SystemExit):
        cli_main(["train", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "at most 1e-3 * (d_model/512)^-0.5" in help_text and "at most half of the training steps" in help_text
    assert "Reliability" in (REPO_ROOT / "docs" / "training.md").read_text()


def test_too_high_peak_is_warned_about(tmp_path, corpus):  # noqa: F811
    from types import SimpleNamespace

    from scratchformer.training.pipeline import _with_model_dependent_arguments

    model = SimpleNamespace(config=SimpleNamespace(d_model=32))
    for learning_rate, warned in [(0.5, True), (None, False), (3e-3, False)]:
        said = []
        options, args = tiny(tmp_path, corpus, learning_rate=learning_rate, max_steps=100, warmup_steps=None)
        args = _with_model_dependent_arguments(options, args, model, 1000, 1, None, said.append)
        assert (args.warmup_steps, len(said)) == (50, int(warned))
    assert said == [] and args.learning_rate == 3e-3
    assert _with_model_dependent_arguments(*tiny(tmp_path, corpus, learning_rate=None, max_steps=100),
                                           model, 1000, 1, None, said.append).learning_rate == max_default_peak(32)


# --------------------------------------------------------------------------------------------------------------------
# 6. Metric packages before step 1; 7. one process trains the tokenizer
# --------------------------------------------------------------------------------------------------------------------


def test_missing_sacrebleu_is_found_before_data(tmp_path, pairs, monkeypatch, capsys):  # noqa: F811
    """The command says it before any data is read (cli.check_optional_dependencies); in Python the seq2seq
    metrics import it when the trainer is built, before any training step, not at the first evaluation."""
    from scratchformer.training.metrics import GenerationMetrics

    monkeypatch.setitem(sys.modules, "sacrebleu", None)
    code = cli_main(["train", "--objective", "seq2seq", "--source-column", "src", "--target-column", "tgt",
                     "--train-files", str(tmp_path / "missing.tsv"), "--output-dir", str(tmp_path / "o")])
    assert code == 2 and 'scratchformer[train]' in one_error_line(capsys)
    with pytest.raises(ImportError, match="sacrebleu"):
        GenerationMetrics(tokenizer=None)


def test_only_global_rank_0_trains_the_tokenizer(tmp_path, corpus, monkeypatch):  # noqa: F811
    import scratchformer.training.model_setup as model_setup

    trained = []
    monkeypatch.setattr(model_setup, "_train_tokenizer", lambda *a: trained.append(a) or "trained")
    options, _ = tiny(tmp_path, corpus)
    # process 1 (e.g. the first process of the second machine) never trains one: it loads rank 0's, or says why not
    with pytest.raises(TrainingSetupError, match="process 1: the tokenizer that the main process trained is not in"):
        load_tokenizer(options, str(tmp_path / "out"), None, ["text"], 1, None)
    assert load_tokenizer(options, str(tmp_path / "out"), None, ["text"], 0, None) == "trained"
    assert len(trained) == 1

    calls = []

    class FakeArgs:  # what _tokenizer_and_model asks of the Trainer arguments
        process_index, output_dir, seed, max_steps = 1, str(tmp_path / "out"), 0, 8

        def main_process_first(self, local=True, desc=""):
            calls.append(local)
            return __import__("contextlib").nullcontext()

    from scratchformer.training import pipeline

    with pytest.raises(TrainingSetupError):
        pipeline._tokenizer_and_model(options, FakeArgs(), type("S", (), {"train": None, "columns": ["text"]}), None)
    assert calls == [False]  # the whole run's main process goes first, not each machine's


@pytest.mark.slow
def test_torchrun_two_nodes_train_one_tokenizer(tmp_path, corpus):  # noqa: F811
    """Two machines of one process each (two torchrun launchers on 127.0.0.1, c10d rendezvous, gloo): each is its
    machine's local main process, and only global rank 0 trains and saves the tokenizer."""
    out = tmp_path / "ddp"
    torchrun = Path(sys.executable).with_name("torchrun")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    common = [str(torchrun), "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
              f"127.0.0.1:{port}", "--rdzv-id", "trainrel", "-m", "scratchformer.cli", "train",
              "--train-files", str(corpus), "--output-dir", str(out), "--preset", "tiny",
              "--tokenizer-vocab-size", "300", "--max-length", "32", "--batch-size", "8", "--max-steps", "2",
              "--eval-steps", "0", "--save-steps", "1000", "--learning-rate", "3e-3", "--warmup-steps", "1",
              "--no-progress-bar", "--max-eval-samples", "16"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    nodes = [subprocess.Popen(common + ["--cache-dir", str(tmp_path / f"cache{i}")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for i in range(2)]
    outputs = [node.communicate(timeout=400) for node in nodes]
    for node, (stdout, stderr) in zip(nodes, outputs):
        assert node.returncode == 0, stdout[-2000:] + stderr[-3000:]
    both = "".join(stdout + stderr for stdout, stderr in outputs)
    assert both.count("tokenizer: trained") == 1, both[-3000:]
    assert "2 process(es)" in both
    assert (out / "tokenizer" / "tokenizer.json").is_file() and (out / "checkpoint-2").is_dir()
    assert lock_is_free(out)


# --------------------------------------------------------------------------------------------------------------------
# 8. Every option checked before any work; a non-finite loss stops the run; rows short of a column are refused
# --------------------------------------------------------------------------------------------------------------------


def installed(package: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(package) is not None


@pytest.mark.parametrize("option, message", [
    (["--seed", "-1"], "--seed must be in [0, 2**32 - 1] (the seeds numpy takes), got -1"),
    (["--seed", str(2**32)], f"--seed must be in [0, 2**32 - 1] (the seeds numpy takes), got {2**32}"),
    (["--data-seed", "-3"], "--data-seed must be in [0, 2**32 - 1]"),
    (["--deepspeed", "ds.json"], "an option needs a package that is not installed: "),
    (["--fsdp", "full_shard"], "--fsdp shards the model over the processes of a distributed run and this run has one"),
    (["--optim-args", "eps"], "--optim-args must be key=value pairs separated by commas"),
    (["--optim-args", "eps=1e-8,"], "--optim-args must be key=value pairs separated by commas"),
])
def test_every_option_mistake_is_one_line_before_any_data(tmp_path, capsys, option, message):
    """A bad value, a missing package or options that contradict each other (or the tokenizer, or the machine):
    one line, exit status 2, found before the (missing) training file is read."""
    for package in ("bitsandbytes", "torchao", "galore_torch", "deepspeed"):
        if (f"`{package}" in message or f"--{package}" in option) and installed(package):
            pytest.skip(f"{package} is installed")
    code = cli_main(["train", "--train-files", str(tmp_path / "missing.txt"), "--output-dir", str(tmp_path / "o"),
                     *option])
    line = one_error_line(capsys)
    assert code == 2 and message in line, line
    assert "missing.txt" not in line and not (tmp_path / "o" / "tokenizer").exists()


@pytest.mark.parametrize("option, message", [
    (["--config-overrides", "d_model=30"], "invalid model configuration: ScratchformerConfig.encoder_attention_heads=4 "
                                           "is invalid: d_model=30 must be divisible by the number of heads"),
    (["--preset", "tiny", "--config-overrides", "decoder_attention_heads=3"],
     "invalid model configuration: ScratchformerConfig.decoder_attention_heads=3 is invalid"),
    (["--config-overrides", "position_embedding_type=learned,max_position_embeddings=8", "--max-length", "32"],
     "--max-length is 32 but the learned positions of the model stop at max_position_embeddings=8: lower "
     "--max-length, raise max_position_embeddings in --config-overrides (a new model), or use sinusoidal or rope "
     "positions"),
    (["--config-overrides", "d_model=65536,encoder_layers=64"],  # refused before its weights are allocated
     "the batch does not fit in memory: a training step with --batch-size 32 and 128-token sequences needs about "),
    (["--preset", "tiny", "--max-length", "1000000", "--batch-size", "2", "--gradient-accumulation-steps", "1"],
     "the batch does not fit in memory: a training step with --batch-size 2 and 1000000-token sequences"),
])
def test_a_model_or_batch_that_cannot_train_is_one_line_before_training(tmp_path, corpus, capsys, option, message):  # noqa: F811
    """The model the options build (its config, its learned positions) and a step's estimated memory: one line,
    exit status 2, once the model is built and before any step is trained."""
    code = cli_main(["train", "--train-files", str(corpus), "--output-dir", str(tmp_path / "o"),
                     "--tokenizer-vocab-size", "300", *option])
    line = one_error_line(capsys)
    assert code == 2 and message in line, line
    assert not list((tmp_path / "o").glob("checkpoint-*"))


def test_a_model_and_a_tokenizer_of_other_vocabularies_are_refused_before_training(tmp_path, corpus, capsys):  # noqa: F811
    """--model with a tokenizer of another vocabulary (which trained as long as the ids fitted), overrides against
    the model, learned positions of a --model shorter than --max-length: one line once the model is built, before
    training. A valid size (d_model=30 with 2 heads, which transformers' decoder view of the config once refused)
    builds."""
    from scratchformer.tokenizer.training import train_fast_tokenizer

    lines = corpus.read_text().splitlines()
    own, other = train_fast_tokenizer(lines, 300), train_fast_tokenizer([line[::-1] for line in lines], 300)
    assert len(own) == len(other) == 300 and own.get_vocab() != other.get_vocab()  # same size, other tokens
    model_dir, bare_dir, other_dir = tmp_path / "model", tmp_path / "bare", tmp_path / "other-tok"
    model = ScratchformerForConditionalGeneration(ScratchformerConfig(**TINY_CONFIG, vocab_size=len(own)))
    model.save_pretrained(model_dir)
    own.save_pretrained(model_dir)
    ScratchformerForConditionalGeneration(ScratchformerConfig(
        **TINY_CONFIG, vocab_size=400, position_embedding_type="learned", max_position_embeddings=16)
    ).save_pretrained(bare_dir)  # no tokenizer of its own
    other.save_pretrained(other_dir)
    for extra, message in [
            (["--model", str(model_dir), "--tokenizer", str(other_dir)],
             f"--tokenizer {other_dir} has another vocabulary than --model {model_dir}'s own tokenizer (300 and 300 "
             "tokens; "),
            (["--model", str(bare_dir), "--tokenizer", str(other_dir), "--max-length", "16"],
             f"--tokenizer {other_dir} has 300 tokens and --model {bare_dir} reads 400: a tokenizer of another "
             "vocabulary would train the model on ids that mean other tokens"),
            (["--model", str(bare_dir), "--tokenizer", str(other_dir), "--max-length", "32"],
             f"--max-length is 32 but the learned positions of --model {bare_dir} stop at max_position_embeddings=16"),
            (["--model", str(model_dir), "--config-overrides", "pad_token_id=7"],
             "the tokenizer does not match the model: pad: tokenizer '<pad>' has id 0, the model's pad_token_id is 7"),
            (["--model", str(model_dir), "--config-overrides", "d_model=30"],
             f"--config-overrides do not fit --model {model_dir}: Error(s) in loading state_dict"),
            (["--model", str(model_dir), "--config-overrides", "dropout=0.0,encoder_attention_heads=3"],
             f"--config-overrides do not fit --model {model_dir}: ScratchformerConfig.encoder_attention_heads=3 is "
             "invalid")]:
        code = cli_main(["train", "--train-files", str(corpus), "--output-dir", str(tmp_path / "o"), "--max-steps",
                         "1", *extra])
        line = one_error_line(capsys)
        assert code == 2 and message in line, (extra, line)
    # what agrees passes: the model's own tokenizer, named or not; a new model of a valid size builds and generates
    for tokenizer in (None, str(model_dir)):
        options, args = tiny(tmp_path, corpus, f"agrees-{tokenizer is None}", model=str(model_dir),
                             tokenizer=tokenizer)
        with pytest.raises(AssertionError, match="training started"):
            run_training(options, args, callbacks=[FailIfTrainingStarts()])
    config = ScratchformerConfig(**{**TINY_CONFIG, "d_model": 30}, vocab_size=300)
    built = ScratchformerForConditionalGeneration(config)
    assert built.generate(torch.tensor([[5, 6, 7, 2]]), max_new_tokens=2).shape[0] == 1


def test_a_named_pipe_in_a_model_or_tokenizer_folder_is_one_line_not_a_hang(tmp_path, capsys):
    """A FIFO as --model's config.json or --tokenizer's tokenizer.json: reading it waited forever for a writer (the
    remote-code look at config.json); now one line, exit 2. A writer thread stands by, so that a read (the
    regression) ends at once with an empty file and fails the test instead of hanging the suite."""
    import threading

    for flag, name in (("--model", "config.json"), ("--tokenizer", "tokenizer.json")):
        folder = tmp_path / flag.strip("-")
        folder.mkdir()
        fifo = folder / name
        os.mkfifo(fifo)
        writer = threading.Thread(target=lambda path=fifo: open(path, "w").close(), daemon=True)  # opens once a reader does
        writer.start()
        code = cli_main(["train", "--train-files", str(tmp_path / "missing.txt"), "--output-dir",
                         str(tmp_path / f"o{flag}"), flag, str(folder)])
        line = one_error_line(capsys)
        assert code == 2 and f"{fifo} is a named pipe" in line, line
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # let the writer go: nobody read the pipe
        writer.join()


def test_a_folder_where_the_lock_file_goes_is_one_line(tmp_path, capsys):
    """A folder (or a link) where the run keeps its lock file: one line, before any data; nothing is touched."""
    for name, make in [("_scratchformer.lock", lambda p: (p.mkdir(), (p / "keep").write_text("x"))),
                       ("_scratchformer.lock.holder", lambda p: p.mkdir()),
                       ("_scratchformer.lock", lambda p: p.symlink_to(tmp_path / "elsewhere"))]:
        out = tmp_path / f"o-{len(list(tmp_path.iterdir()))}"
        out.mkdir()
        make(out / name)
        code = cli_main(["train", "--train-files", str(tmp_path / "missing.txt"), "--output-dir", str(out)])
        line = one_error_line(capsys)
        kind = "a symbolic link" if (out / name).is_symlink() else "a folder"
        assert code == 2 and f"{out / name} is {kind}, where the run keeps its lock file" in line, line
        assert sorted(p.name for p in out.iterdir()) == [name]  # nothing added, nothing removed
    assert (tmp_path / "o-0" / "_scratchformer.lock" / "keep").read_text() == "x"


def test_resume_with_max_steps_below_its_checkpoint_is_refused(stopped_run, corpus, capsys):  # noqa: F811
    """--resume of checkpoint-4 with --max-steps 3 used to end "done" at step 4; it is refused, naming the step to
    give (--max-steps 4 finishes the run from it, as before)."""
    tmp, run = stopped_run
    for resume in ("latest", str(run / "checkpoint-4")):
        options, args = tiny(tmp, corpus, "run", save_steps=2, resume_from_checkpoint=resume, max_steps=3)
        with pytest.raises(TrainingSetupError, match=r"--max-steps 3 is below the step of the checkpoint to resume, "
                                                     r".*checkpoint-4 \(step 4\): give --max-steps 4 to finish the "
                                                     r"run from it, or --resume an earlier checkpoint-N with N <= 3"):
            run_training(options, args, callbacks=[FailIfTrainingStarts()])
    code = cli_main(["train", "--train-files", str(corpus), "--output-dir", str(run), "--resume", "--max-steps", "1"])
    assert code == 2 and "--max-steps 1 is below the step of the checkpoint" in one_error_line(capsys)
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]


def poison_at(update: int):
    """A callback that makes every weight NaN in the optimizer update of step ``update`` (the loss of that step is
    still finite: the next step's is not)."""
    from transformers import TrainerCallback

    class Poison(TrainerCallback):
        def on_optimizer_step(self, args, state, control, model=None, **kwargs):
            if state.global_step + 1 == update:
                with torch.no_grad():
                    for parameter in model.parameters():
                        parameter.fill_(float("nan"))

    return Poison()


@pytest.mark.parametrize("update, stopped, kept", [
    # the loss of step 6 is NaN; found at the checkpoint step 6
    (5, "the training loss became NaN or infinite at step 6", ["checkpoint-2", "checkpoint-4"]),
    # finite loss, NaN weights at a checkpoint step: refused where the checkpoint is published
    (4, "checkpoint-4 is not published: its weight model.", ["checkpoint-2"]),
    # finite loss, NaN weights at the last step (a checkpoint there would be refused as above): the final model is
    (7, "the final model (step 7) is not published: its ", []),
    (1, "the training loss became NaN or infinite at step 2", []),  # nothing good to keep
])
def test_a_non_finite_loss_stops_the_run_at_its_step_and_keeps_the_good_checkpoints(tmp_path, corpus, update,  # noqa: F811
                                                                                    stopped, kept):
    from safetensors.torch import load_file as load_weights

    from scratchformer.errors import NonFiniteLossError

    last = dict(max_steps=7, save_strategy="no") if update == 7 else {}
    options, args = tiny(tmp_path, corpus, save_steps=2, logging_steps=100, **last)
    with pytest.raises(NonFiniteLossError) as error:
        run_training(options, args, callbacks=[poison_at(update)])
    out = Path(args.output_dir)
    said = str(error.value)
    assert said.startswith(stopped) and "; the run stopped there and " in said, said
    assert all(hint in said for hint in ("--learning-rate", "--fp16/--bf16", "init_std", "--no-stop-on-nonfinite"))
    assert sorted(p.name for p in out.glob("checkpoint-*")) == kept
    if kept:
        assert (f"its last good checkpoint is {out / kept[-1]} (--resume {out / kept[-1]} continues the same run; "
                f"--model {out / kept[-1]} starts a new one from its weights") in said
    else:
        assert "no checkpoint was saved before it" in said
    for name in kept:  # every checkpoint kept is good
        weights = load_weights(out / name / "model.safetensors")
        assert all(torch.isfinite(t).all() for t in weights.values()), name
    assert not (out / "model.safetensors").exists()  # no final model of NaN weights
    assert not (out / "_checkpoint-staging").exists()
    if update == 5:  # what the line offers works: a new run from the last good checkpoint's weights
        again = run_training(*tiny(tmp_path, corpus, "again", model=str(out / kept[-1]), max_steps=2, save_steps=2))
        assert again["global_step"] == 2 and math.isfinite(again["metrics"]["eval_loss"])


def test_a_diverging_run_ends_in_one_line_unless_told_to_train_on(tmp_path, corpus, capsys):  # noqa: F811
    """--learning-rate 1e6 and init_std=1e30 ended with exit 0 and a NaN loss; now one line and exit 2. With
    --no-stop-on-nonfinite the run trains on, as before."""
    base = ["train", "--train-files", str(corpus), "--preset", "tiny", "--tokenizer-vocab-size", "300",
            "--max-length", "32", "--batch-size", "8", "--max-steps", "6", "--save-steps", "3", "--eval-steps", "0",
            "--no-progress-bar", "--max-eval-samples", "8", "--warmup-steps", "1", "--cache-dir",
            str(tmp_path / "cache")]
    for name, extra in [("lr", ["--learning-rate", "1e6", "--lr-schedule", "constant"]),
                        ("init", ["--config-overrides", "init_std=1e30"])]:
        code = cli_main([*base, "--output-dir", str(tmp_path / name), *extra])
        line = one_error_line(capsys)
        assert code == 2 and "the training loss became NaN or infinite at step " in line, line
    # it trains on past the NaN loss of step 2, up to the first checkpoint, whose NaN weights are not published
    code = cli_main([*base, "--output-dir", str(tmp_path / "on"), "--learning-rate", "1e6", "--lr-schedule",
                     "constant", "--no-stop-on-nonfinite"])
    line = one_error_line(capsys)
    assert code == 2 and line.startswith("scratchformer train: error: checkpoint-3 is not published: its "), line
    assert not list((tmp_path / "on").glob("*checkpoint*")) and not (tmp_path / "on" / "model.safetensors").exists()


@pytest.mark.parametrize("eval_steps", ["500", "0"])
def test_a_model_whose_final_evaluation_is_nan_is_not_published(tmp_path, corpus, capsys, eval_steps):  # noqa: F811
    """Issue 66: --learning-rate 1e7 leaves finite weights (about 5e6) whose evaluation loss is NaN; the run said
    "done", exited 0 and published them. Now one line, exit 2, and neither the checkpoint of that step (with the
    Trainer's evaluation at the last step) nor the final model (evaluated by the pipeline: --eval-steps 0)."""
    out = tmp_path / "run"
    code = cli_main(["train", "--train-files", str(corpus), "--output-dir", str(out), "--preset", "tiny",
                     "--tokenizer-vocab-size", "300", "--max-length", "32", "--max-steps", "2", "--learning-rate",
                     "1e7", "--eval-steps", eval_steps, "--save-steps", "500", "--no-progress-bar",
                     "--max-eval-samples", "16", "--cache-dir", str(tmp_path / "cache")])
    line = one_error_line(capsys)
    what = "checkpoint-2" if eval_steps == "500" else "the final model (step 2)"
    assert code == 2 and f"error: {what} is not published: its eval_loss is nan; the run stopped there" in line, line
    assert not (out / "model.safetensors").exists() and not (out / "all_results.json").exists()
    # without an evaluation of its own (--eval-steps 0) the checkpoint of step 2 has only its finite weights checked
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ([] if eval_steps == "500" else ["checkpoint-2"])


def test_the_publishing_check_names_the_first_non_finite_value():
    """integrity.check_finite: an eval_* metric that is NaN or infinite, else the first weight that holds one;
    training loss, step counts and finite values pass."""
    from scratchformer.integrity import check_finite

    fine = [("a", torch.ones(2)), ("ids", torch.tensor([1, 2]))]
    check_finite("m", fine, {"eval_loss": 1.5, "train_loss": float("nan"), "epoch": 1})
    with pytest.raises(TrainingSetupError, match=r"^m is not published: its eval_loss is inf; try$"):
        check_finite("m", fine, {"eval_loss": float("inf")}, error=TrainingSetupError, advice="; try")
    with pytest.raises(ValueError, match=r"^m is not published: its weight b holds NaN or infinite values$"):
        check_finite("m", [*fine, ("b", torch.tensor([0.0, float("nan")], dtype=torch.float16))])


@pytest.mark.slow
def test_two_processes_stop_together_at_a_non_finite_loss(tmp_path, corpus):  # noqa: F811
    """torchrun with 2 processes (gloo): both stop at the same step with the one line (the earliest bad step of
    either, through the all-reduce), and neither waits for the other."""
    torchrun = Path(sys.executable).with_name("torchrun")
    command = [str(torchrun), "--nproc-per-node", "2", "-m", "scratchformer.cli", "train", "--train-files",
               str(corpus), "--output-dir", str(tmp_path / "ddp"), "--preset", "tiny", "--tokenizer-vocab-size", "300",
               "--max-length", "32", "--batch-size", "4", "--max-steps", "8", "--save-steps", "2", "--eval-steps",
               "0", "--learning-rate", "1e6", "--lr-schedule", "constant", "--warmup-steps", "1",
               "--no-progress-bar", "--max-eval-samples", "8", "--cache-dir", str(tmp_path / "cache")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)})
    # each process says it once; the two writes share one pipe and may land on one line
    steps = re.findall(r"became NaN or infinite at step (\d+);", done.stderr)
    assert done.returncode != 0 and len(steps) == 2, done.stderr[-3000:]
    assert steps[0] == steps[1]
    assert not (tmp_path / "ddp" / "model.safetensors").exists()


def test_the_loss_watch_reads_the_device_only_at_steps_that_synchronise_anyway():
    """NonFiniteLoss.observe never reads its tensor (meta tensors cannot be read: any read would raise), and
    on_step_end reads it only at a logging, evaluation or checkpoint step or the last step."""
    from transformers import TrainerControl, TrainerState

    from scratchformer.training.callbacks import NonFiniteLoss

    watch = NonFiniteLoss()
    for step in range(1, 4):
        watch.observe(torch.empty((), device="meta"), step)
    state = TrainerState(global_step=3, max_steps=10)
    watch.on_step_end(None, state, TrainerControl())  # no sync asked for: nothing read, nothing raised
    assert watch.step is None and watch.first_bad.device.type == "meta"
    # nor does the Trainer's own NaN filter of the logged loss, which reads every step's loss: off by default
    assert config_from_args(["--train-files", "a", "--output-dir", "o"])[1].logging_nan_inf_filter is False
    watch = NonFiniteLoss()
    for step, loss in enumerate([1.0, 2.0, float("inf"), float("nan")], 1):
        watch.observe(torch.tensor(loss), step)
    control = TrainerControl(should_log=True, should_save=True)
    watch.on_step_end(None, TrainerState(global_step=4, max_steps=10), control)
    assert watch.step == 3 and control.should_training_stop and not control.should_save


def test_rows_missing_a_column_are_refused_with_their_line_numbers(tmp_path, capsys):
    """A seq2seq TSV where a quarter of the rows miss a column trained without a word (pandas reads the missing
    value as empty text, and empty rows are dropped); it is refused with the line numbers, in TSV, CSV, JSON lines
    and gzip. An empty value in a present column, blank lines and a column the run does not read stay as before."""
    import gzip

    from scratchformer.training.data import check_complete_rows

    rows = [f"a{i} b\tA{i} B" if i % 4 else f"a{i} b" for i in range(1, 41)]  # rows 4, 8, ... miss tgt
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("src\ttgt\n" + "\n".join(rows) + "\n")
    gz = tmp_path / "pairs.tsv.gz"
    gz.write_bytes(gzip.compress(tsv.read_bytes()))
    expected = "line 5 has no 'tgt' column (10 rows lack a column, at lines 5, 9, 13, 17, 21, ...); every row needs " \
               "a value in each of 'src', 'tgt': fix or remove such rows"
    for path in (tsv, gz):
        with pytest.raises(DataError, match=f"^{path}: " + expected.replace("(", r"\(").replace(")", r"\)")
                           .replace(".", r"\.")):
            check_complete_rows([path], ["src", "tgt"])
    csv_file = tmp_path / "pairs.csv"
    csv_file.write_text('src,tgt\na,A\n"two\nlines",B\nc\n')  # a quoted field over two lines: row 3 starts at line 5
    with pytest.raises(DataError, match=f"^{csv_file}: line 5 has no 'tgt' column; every row"):
        check_complete_rows([csv_file], ["src", "tgt"])
    jsonl = tmp_path / "pairs.jsonl"
    jsonl.write_text('{"src": "a", "tgt": "A"}\n\n{"src": "b"}\n{"src": "c", "tgt": null}\n')
    with pytest.raises(DataError, match=f"^{jsonl}: line 3 has no 'tgt' column \\(2 rows lack a column, at lines "
                                        "3, 4\\)"):
        check_complete_rows([jsonl], ["src", "tgt"])
    fine = tmp_path / "fine.tsv"
    fine.write_text("ref\tsrc\ttgt\nr1\ta\tA\n\nr2\tb\t\nr3\tc\tC\n")  # a blank line, an empty (present) value
    check_complete_rows([fine], ["src", "tgt"])
    check_complete_rows([tsv], ["src"])  # a denoising run reads src only
    code = cli_main(["train", "--objective", "seq2seq", "--source-column", "src", "--target-column", "tgt",
                     "--train-files", str(tsv), "--output-dir", str(tmp_path / "o"), "--preset", "tiny",
                     "--cache-dir", str(tmp_path / "cache")])
    assert code == 2 and f"{tsv}: line 5 has no 'tgt' column" in one_error_line(capsys)
    assert not (tmp_path / "o" / "tokenizer").exists()  # refused before a tokenizer is trained
    # rows whose column is there but empty are still dropped, and now said: counted in the run's first line
    empty = tmp_path / "empty.tsv"
    empty.write_text("src\ttgt\n" + "\n".join(f"a{i} b\t" + (f"A{i} B" if i % 4 else "") for i in range(1, 41)))
    options, args = tiny(tmp_path, empty, "o2", objective="seq2seq", source_column="src", target_column="tgt",
                         max_steps=1, save_steps=1, max_eval_samples=2, generation_max_length=4)
    run_training(options, args)
    assert "(10 rows with an empty src/tgt dropped)" in capsys.readouterr().out


def test_a_training_batch_without_labels_gives_zero_as_the_model_does():
    """The training loss of a batch with no labelled token was NaN (0/0) where the model's own loss is 0: one rule
    now (mean_over_labelled), and on a labelled batch both give the same number (1e-6)."""
    from scratchformer.training.metrics import Seq2SeqLoss

    torch.manual_seed(0)
    model = ScratchformerForConditionalGeneration(ScratchformerConfig(**TINY_CONFIG, vocab_size=50)).eval()
    ids = torch.randint(4, 50, (2, 6))
    labels = ids.clone()
    labels[0, :3] = -100
    for target in (labels, torch.full_like(labels, -100)):
        out = model(input_ids=ids, labels=target)
        with torch.no_grad():
            ours = Seq2SeqLoss(0.0)(out, target)
        assert torch.isfinite(ours) and abs(ours.item() - out.loss.item()) < 1e-6
    empty = torch.full_like(labels, -100)
    smoothed = Seq2SeqLoss(0.1)(model(input_ids=ids, labels=labels), empty)  # with gradients, label smoothing
    assert smoothed.item() == 0.0
    assert Seq2SeqLoss(0.1)(model(input_ids=ids, labels=labels), empty, torch.tensor(0)).item() == 0.0
