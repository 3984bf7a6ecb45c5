"""Nothing a user had is lost, and every refusal of the file system is one line (scratchformer.files).

- an output folder that is, holds or lies inside an input (model, tokenizer, data) is refused before anything is
  written or deleted, ``--overwrite_output_dir`` or not; the analysis commands never write into a model folder they
  read nor over their data;
- every writer that replaces a file writes a temporary file and renames it: on a full disk (a small tmpfs, mounted
  where this machine allows it: CI runs as root) the earlier file stays as it was and no partial file is left, and
  the command ends with one line that names the folder, the space needed and the space free;
- as another user (``setpriv`` to nobody, where this machine allows it), an unreadable data file and an output
  folder that may not be written are one line naming the path and the user.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import REPO_ROOT
from test_senses import write_tsv
from test_training import corpus, tiny  # noqa: F401
from transformers import TrainerCallback

from scratchformer import ScratchformerConfig, ScratchformerForConditionalGeneration, files
from scratchformer.analysis.senses import run_senses
from scratchformer.cli import main as cli_main
from scratchformer.errors import ScratchformerError, StorageError
from scratchformer.loading import pretrained_path
from scratchformer.training import run_training
from scratchformer.training.checkpoints import checkpoint_problems, list_checkpoints

TINY_CONFIG = dict(d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                   decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, vocab_size=300)
RANDOM_MODEL = ["--no-defaults", "--model", "random-scratchformer"]


def one_error_line(capsys, command: str) -> str:
    """The CLI's one error line for ``command`` (and no traceback)."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith(f"scratchformer {command}: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too: a temporary file left behind shows) and its bytes."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def tiny_model_folder(folder: Path) -> Path:
    ScratchformerForConditionalGeneration(ScratchformerConfig(**TINY_CONFIG)).save_pretrained(folder)
    return folder


@contextlib.contextmanager
def small_disk(folder: Path, size: str = "1M"):
    """A tmpfs of ``size`` mounted at ``folder`` for the block (root only; the test skips where mounting is not
    permitted), unmounted afterwards whatever happens."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root (CI runs as root)")
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(disk: Path, leave: int = 0) -> None:
    """Take all but ``leave`` bytes of the free space of ``disk``."""
    free = shutil.disk_usage(disk).free
    with contextlib.suppress(OSError), open(disk / "filler", "wb") as handle:
        handle.write(b"\0" * max(free - leave, 0))


# --------------------------------------------------------------------------------------------------------------------
# 1. Outputs apart from inputs
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["model is the output", "tokenizer is the output", "output inside the model",
                                  "training file inside the output", "output is a link to the model"])
def test_an_output_dir_that_is_holds_or_lies_inside_an_input_is_refused_before_anything_is_deleted(
        tmp_path, corpus, capsys, monkeypatch, case):  # noqa: F811
    """``train --model X --output-dir X --overwrite_output_dir`` used to delete X before reading it; the same with
    --tokenizer, and with a training file inside the output folder. Relative paths and links are resolved."""
    model = tiny_model_folder(tmp_path / "model")
    data = tmp_path / "run" / "data" / "corpus.txt"
    data.parent.mkdir(parents=True)
    shutil.copy(corpus, data)
    (tmp_path / "link").symlink_to(model)
    monkeypatch.chdir(tmp_path)
    words = {
        "model is the output": ["--model", str(model), "--output-dir", "model"],
        "tokenizer is the output": ["--tokenizer", "model", "--output-dir", str(model)],
        "output inside the model": ["--model", "model", "--output-dir", "model/finetuned"],
        "training file inside the output": ["--output-dir", "run"],
        "output is a link to the model": ["--model", str(model), "--output-dir", "link"],
    }[case]
    if "--output-dir" in words and words[words.index("--output-dir") + 1] == "run":
        (tmp_path / "run" / "config.json").write_text("{}")  # an earlier run there: --overwrite_output_dir would clear
    before = {folder: snapshot(folder) for folder in (model, tmp_path / "run")}
    code = cli_main(["train", "--train-files", str(data), *words, "--overwrite_output_dir", "--preset", "tiny"])
    line = one_error_line(capsys, "train")
    assert code == 2 and "--output-dir" in line and "apart from everything the run reads" in line
    assert {folder: snapshot(folder) for folder in (model, tmp_path / "run")} == before  # nothing deleted or written
    assert not (model / "finetuned").exists()


def test_analysis_commands_never_write_into_a_model_folder_or_over_their_data(tmp_path, capsys, monkeypatch):
    """``senses --model small --output <the shipped folder>`` would replace the shipped senses.json; compare into
    the model folder it reads (by a relative path); senses whose results would replace its own --data file."""
    shipped = pretrained_path("small")
    before = snapshot(shipped)
    (tmp_path / "shipped").symlink_to(shipped)
    data = write_tsv(tmp_path / "s.tsv")
    assert cli_main(["senses", "--data", str(data), "--model", "small", "--output", str(tmp_path / "shipped")]) == 2
    assert "the folder of the model 'small'" in one_error_line(capsys, "senses")
    model = tiny_model_folder(tmp_path / "model")
    monkeypatch.chdir(model)
    assert cli_main(["compare", "--no-defaults", "--model", str(model), "--no-plots", "--output", "."]) == 2
    assert "'.' is the folder of the model" in one_error_line(capsys, "compare")
    (tmp_path / "out").mkdir()
    clash = write_tsv(tmp_path / "out" / "senses.json")
    with pytest.raises(ScratchformerError, match="would replace the data file"):
        run_senses(clash, ["random-scratchformer"], output=tmp_path / "out", quiet=True)
    assert snapshot(shipped) == before and not (model / "compare.json").exists()
    assert clash.read_text().startswith("lemma\t")


def test_train_tokenizer_never_saves_over_its_training_file(tmp_path, capsys):
    text = tmp_path / "tokenizer.json"
    text.write_text("the cat sees the dog\n" * 50)
    before = text.read_bytes()
    assert cli_main(["train-tokenizer", str(text), "--output", str(tmp_path), "--vocab-size", "300",
                     "--overwrite"]) == 2
    assert "would replace the training file" in one_error_line(capsys, "train-tokenizer")
    assert text.read_bytes() == before


# --------------------------------------------------------------------------------------------------------------------
# 2. Files replaced whole or not at all
# --------------------------------------------------------------------------------------------------------------------


def test_a_replaced_file_is_whole_or_untouched_and_gets_the_permissions_of_a_plain_write(tmp_path):
    target = tmp_path / "results.json"
    target.write_text("old")
    with pytest.raises(RuntimeError, match="killed"), files.replace_file(target) as temporary:
        temporary.write_text("half of the new")
        raise RuntimeError("killed half-way")
    assert target.read_text() == "old" and sorted(tmp_path.iterdir()) == [target]  # no temporary file left
    umask = os.umask(0o027)
    try:
        assert files.current_umask() == 0o027
        new = files.write_json(tmp_path / "new.json", {"a": 1})
        assert new.stat().st_mode & 0o777 == 0o640  # mkstemp's 0600 corrected to what the umask gives
    finally:
        os.umask(umask)
    target.chmod(0o604)
    files.write_text(target, "new")
    assert target.read_text() == "new" and target.stat().st_mode & 0o777 == 0o604  # a replaced file keeps its mode
    link = tmp_path / "link.json"
    link.symlink_to(target)
    files.write_text(link, "through the link")
    assert link.is_symlink() and target.read_text() == "through the link"


def test_library_reports_of_a_full_disk_are_recognised_and_said_in_one_line(tmp_path, capsys, monkeypatch):
    """tokenizers' bare ``Exception``, safetensors' error and torch.save's ``unexpected pos`` all mean a full disk;
    an ``OSError`` that no command turned into a StorageError still ends the CLI with one line."""
    full = files.storage_error(Exception("No space left on device (os error 28)"), tmp_path / "tokenizer.json", 9300)
    assert isinstance(full, StorageError) and full.errno == errno.ENOSPC and isinstance(full, OSError)
    assert str(full).startswith(f"no space left on the device of {tmp_path}: writing tokenizer.json needs about "
                                "9.3 kB, ") and " free; " in str(full)
    safetensors = files.storage_error(RuntimeError("Error while serializing: I/O error: No space left on device "
                                                   "(os error 28)"), tmp_path / "model.safetensors")
    assert safetensors is not None and safetensors.errno == errno.ENOSPC
    huge = 10 ** 18  # more than any disk has free
    torch_save = files.storage_error(RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs "
                                                  "534"), tmp_path / "optimizer.pt", huge)
    assert torch_save is not None and torch_save.errno == errno.ENOSPC
    assert files.storage_error(ValueError("a bug"), tmp_path) is None

    def full_disk(args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "x.json"))

    monkeypatch.setattr("scratchformer.analysis.bank.run_compare", lambda *a, **k: full_disk(None))
    assert cli_main(["compare", "--no-plots", "--output", str(tmp_path / "c")]) == 2
    assert f"no space left on the device of {tmp_path}" in one_error_line(capsys, "compare")


# --------------------------------------------------------------------------------------------------------------------
# 3. A full disk
# --------------------------------------------------------------------------------------------------------------------


def test_a_full_disk_in_compare_keeps_the_earlier_results_and_is_one_line(tmp_path, capsys):
    with small_disk(tmp_path / "disk") as disk:
        out = disk / "compare"
        assert cli_main(["compare", *RANDOM_MODEL, "--no-plots", "--output", str(out)]) == 0
        earlier = snapshot(out)
        assert json.loads(earlier["compare.json"])
        fill(disk)
        capsys.readouterr()
        assert cli_main(["compare", *RANDOM_MODEL, "--no-plots", "--output", str(out)]) == 2
        line = one_error_line(capsys, "compare")
        assert f"no space left on the device of {out}: writing compare.json needs about" in line and " free" in line
        assert snapshot(out) == earlier  # the earlier compare.json whole, no partial file
        assert cli_main(["compare", *RANDOM_MODEL, "--output", str(out)]) == 2  # the plots come first
        assert ".png needs about" in one_error_line(capsys, "compare")
        assert snapshot(out) == earlier


def test_a_full_disk_in_senses_keeps_the_earlier_results_and_is_one_line(tmp_path, capsys):
    data = write_tsv(tmp_path / "s.tsv")
    with small_disk(tmp_path / "disk") as disk:
        out = disk / "senses"
        out.mkdir()
        (out / "senses.json").write_text('[{"model": "an earlier run"}]\n')
        (out / "senses_auc_per_layer.png").write_bytes(b"\x89PNG an earlier plot")
        earlier = snapshot(out)
        fill(disk)
        assert cli_main(["senses", "--data", str(data), "--model", "random-scratchformer", "--output", str(out)]) == 2
        assert "no space left on the device of" in one_error_line(capsys, "senses")
        assert snapshot(out) == earlier


def test_train_tokenizer_overwrite_on_a_full_disk_keeps_the_earlier_tokenizer(tmp_path, capsys):
    text = tmp_path / "corpus.txt"
    text.write_text("".join(f"the cat number {i} sees the dog {i * 7}\n" for i in range(300)))
    with small_disk(tmp_path / "disk") as disk:
        out = disk / "tok"
        assert cli_main(["train-tokenizer", str(text), "--output", str(out), "--vocab-size", "300"]) == 0
        earlier = snapshot(out)
        fill(disk)
        capsys.readouterr()
        assert cli_main(["train-tokenizer", str(text), "--output", str(out), "--vocab-size", "320",
                         "--overwrite"]) == 2
        line = one_error_line(capsys, "train-tokenizer")
        assert f"no space left on the device of {out}" in line and "needs about" in line
        assert snapshot(out) == earlier  # tokenizer.json whole, and no .saving- folder left


def test_save_pretrained_on_a_full_disk_keeps_the_earlier_save(tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        folder = tiny_model_folder(disk / "model")
        earlier = snapshot(folder)
        fill(disk)
        model = ScratchformerForConditionalGeneration(ScratchformerConfig(**{**TINY_CONFIG, "dropout": 0.0}))
        with pytest.raises(Exception) as caught:
            model.save_pretrained(folder)
        assert "No space left on device" in str(caught.value) or getattr(caught.value, "errno", None) == errno.ENOSPC
        assert snapshot(folder) == earlier  # config.json and the weights of the earlier save, nothing half-written


def test_tokenizer_save_pretrained_on_a_full_disk_keeps_the_earlier_save(tmp_path):
    """ScratchformerTokenizer.save_pretrained over an earlier tokenizer on a full disk left a truncated 8 KB
    tokenizer.json (transformers writes it in place): now the earlier files stay whole and nothing is left behind."""
    from scratchformer.tokenizer.training import train_fast_tokenizer

    texts = [f"the cat number {i} sees the dog {i * 7} by the river bank" for i in range(300)]
    with small_disk(tmp_path / "disk") as disk:
        folder = disk / "tok"
        train_fast_tokenizer(texts[:100], 300).save_pretrained(folder)
        earlier = snapshot(folder)
        fill(disk)
        bigger = train_fast_tokenizer(texts, 400)
        with pytest.raises(Exception) as caught:
            bigger.save_pretrained(folder)
        assert "No space left on device" in str(caught.value) or getattr(caught.value, "errno", None) == errno.ENOSPC
        assert snapshot(folder) == earlier  # tokenizer_config.json and tokenizer.json whole, no .saving- folder
        assert sorted(path.name for path in disk.iterdir()) == ["filler", "tok"]


def test_config_save_pretrained_on_a_full_disk_keeps_the_earlier_config(tmp_path):
    """ScratchformerConfig.save_pretrained writes config.json on its own (transformers writes it in place: a full disk
    left it empty or cut short): now the earlier config.json stays whole and no temporary file is left."""
    with small_disk(tmp_path / "disk") as disk:
        folder = disk / "model"
        ScratchformerConfig(**TINY_CONFIG).save_pretrained(folder)
        earlier = snapshot(folder)
        fill(disk)
        with pytest.raises(OSError) as caught:
            ScratchformerConfig(**{**TINY_CONFIG, "dropout": 0.3, "encoder_layers": 3}).save_pretrained(folder)
        assert caught.value.errno == errno.ENOSPC
        assert snapshot(folder) == earlier
    config = ScratchformerConfig(**TINY_CONFIG)
    config.save_pretrained(tmp_path / "plain")  # off the small disk: written, with the umask's mode, nothing beside
    assert not [path.name for path in (tmp_path / "plain").iterdir() if path.name.startswith(".")]
    assert ScratchformerConfig.from_pretrained(tmp_path / "plain").to_dict() == config.to_dict()
    assert (tmp_path / "plain" / "config.json").stat().st_mode & 0o777 == 0o666 & ~files.current_umask()


def test_a_full_disk_in_export_is_one_line_and_keeps_the_earlier_export(tmp_path, capsys):
    """tokenizers' save says a full disk with a bare ``Exception``, safetensors with its own error: either way one
    line, and the earlier export stays whole."""
    from scratchformer.tokenizer.training import train_fast_tokenizer

    source = tiny_model_folder(tmp_path / "model")
    train_fast_tokenizer(["the cat sees the dog"] * 20, 300).save_pretrained(source)
    with small_disk(tmp_path / "disk") as disk:
        out = disk / "export"
        assert cli_main(["export", str(source), str(out)]) == 0
        earlier = snapshot(out)
        fill(disk)
        capsys.readouterr()
        assert cli_main(["export", str(source), str(out), "--overwrite", "--model-name", "another card"]) == 2
        line = one_error_line(capsys, "export")
        assert f"cannot export to {out}: no space left on the device of" in line
        assert ": writing export needs more space than there is, " in line and " free; free some space" in line, line
        assert snapshot(out) == earlier and sorted(p.name for p in disk.iterdir()) == ["export", "filler"]


def test_a_full_disk_at_the_first_save_of_a_run_is_one_line(tmp_path, corpus, capsys):  # noqa: F811
    """The run's first file of any size is its tokenizer."""
    with small_disk(tmp_path / "disk") as disk:
        fill(disk, leave=8192)
        out = disk / "run"
        code = cli_main(["train", "--train-files", str(corpus), "--output-dir", str(out), "--preset", "tiny",
                         "--tokenizer-vocab-size", "300", "--max-steps", "2", "--cache-dir", str(tmp_path / "cache")])
        line = one_error_line(capsys, "train")
        assert code == 2 and "no space left on the device of" in line and "tokenizer" in line
        assert not list(out.rglob("tokenizer.json"))


class FillTheDiskAfter(TrainerCallback):
    """Once checkpoint ``step`` is saved, take the disk's free space but ``leave`` bytes."""

    def __init__(self, step: int, disk: Path, leave: int):
        self.step, self.disk, self.leave = step, disk, leave

    def on_save(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            fill(self.disk, self.leave)


def test_a_full_disk_at_a_later_checkpoint_keeps_the_earlier_ones_and_is_one_error(tmp_path, corpus):  # noqa: F811
    """torch.save of the optimizer says no more than "unexpected pos": the error says the disk is full, the folder,
    and that the earlier checkpoints are intact; the staged half of the new one is gone."""
    with small_disk(tmp_path / "disk") as disk:
        options, args = tiny(tmp_path, corpus, save_steps=2, output_dir=str(disk / "run"))
        with pytest.raises(StorageError) as caught:
            run_training(options, args, callbacks=[FillTheDiskAfter(2, disk, leave=100_000)])
        message = str(caught.value)
        assert message.startswith(f"checkpoint-4 was not saved: no space left on the device of {disk / 'run'}")
        assert "the earlier checkpoints are intact" in message
        assert [folder.name for _, folder in list_checkpoints(disk / "run")] == ["checkpoint-2"]
        assert checkpoint_problems(disk / "run" / "checkpoint-2", loadable=True) == []
        assert not (disk / "run" / "_checkpoint-staging").exists()


def test_ctrl_c_during_a_checkpoint_save_leaves_no_staging_folder(tmp_path, corpus, monkeypatch):  # noqa: F811
    """SIGINT while checkpoint-4 was being written left OUTPUT_DIR/_checkpoint-staging (the next save, if any, removed
    it). The interrupted save now removes it at once; the earlier checkpoint stays complete."""
    import signal

    from scratchformer.training.checkpoints import STAGING, CrashSafeCheckpoints

    def interrupt(folder: Path, step: int) -> None:  # the Trainer has written its files into the staging folder
        if step == 4:
            assert (folder / "model.safetensors").is_file()
            os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C sends: Python raises KeyboardInterrupt here

    monkeypatch.setattr(CrashSafeCheckpoints, "process_files", (interrupt,))
    # Python's own Ctrl-C handler, whatever this process inherited: a shell that starts a job in the background
    # (`cmd &`, as a CI runner may) makes it ignore SIGINT, and then the signal would do nothing at all
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    options, args = tiny(tmp_path, corpus, save_steps=2)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_training(options, args)
    finally:
        signal.signal(signal.SIGINT, previous)
    run = tmp_path / "out"
    assert not (run / STAGING).exists()
    assert [folder.name for _, folder in list_checkpoints(run)] == ["checkpoint-2"]
    assert checkpoint_problems(run / "checkpoint-2", loadable=True) == []


# --------------------------------------------------------------------------------------------------------------------
# 4. Another user
# --------------------------------------------------------------------------------------------------------------------

AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
RUN_COMMANDS = """
import json, sys
from scratchformer.cli import main
for argv in json.loads(sys.argv[1]):
    print(main(argv), flush=True)
"""


def test_unreadable_data_and_unwritable_output_folders_are_one_line_for_another_user(tmp_path):
    """As nobody: an unreadable --data TSV, an --output-dir in a folder nobody may write into, and an unreadable
    training file each end in one line naming the path and the user."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("switching to another user needs root and setpriv")
    if subprocess.run([*AS_NOBODY, sys.executable, "-c", "import scratchformer.cli"], capture_output=True,
                      cwd=REPO_ROOT).returncode != 0:
        pytest.skip("nobody cannot run this Python (setpriv not permitted, or the environment is not readable)")
    work = Path(tempfile.mkdtemp(prefix="scratchformer-nobody-"))  # pytest's tmp_path is root's alone
    try:
        work.chmod(0o755)
        home = work / "home"
        home.mkdir(mode=0o777)
        home.chmod(0o777)
        secret = write_tsv(work / "secret.tsv")
        secret.chmod(0o600)
        corpus_text = work / "corpus.txt"
        corpus_text.write_text("the cat sees the dog\n" * 50)
        corpus_text.chmod(0o600)
        closed = work / "closed"
        closed.mkdir(mode=0o755)
        commands = [
            ["senses", "--data", str(secret), "--model", "random-scratchformer", "--output", str(home / "s")],
            ["train", "--train-files", str(write_tsv(work / "open.tsv")), "--output-dir", str(closed / "out")],
            ["train", "--train-files", str(corpus_text), "--output-dir", str(home / "out")],
        ]
        env = {**os.environ, "HOME": str(home), "HF_HOME": str(home / "hf"), "MPLCONFIGDIR": str(home / "mpl"),
               "XDG_CACHE_HOME": str(home / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run([*AS_NOBODY, sys.executable, "-c", RUN_COMMANDS, json.dumps(commands)],
                              capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=600)
        assert done.stdout.split() == ["2", "2", "2"] and "Traceback" not in done.stderr, done.stderr[-3000:]
        lines = [line for line in done.stderr.splitlines() if ": error: " in line]
        assert len(lines) == 3, done.stderr[-3000:]
        senses, closed_output, unreadable = lines
        assert senses.startswith("scratchformer senses: error: permission denied: user nobody (uid 65534) may not "
                                 f"read {secret}")
        assert closed_output.startswith("scratchformer train: error: permission denied: user nobody (uid 65534) may "
                                        f"not write into {closed}")
        assert unreadable.startswith("scratchformer train: error: permission denied: user nobody (uid 65534) may "
                                     f"not read {corpus_text}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------------------------------------------------
# 5. Odd files where a file is read, odd file systems, a folder where a file goes
# --------------------------------------------------------------------------------------------------------------------

ODD_KINDS = {"loop": "is a loop of symbolic links", "fifo": "is a named pipe (FIFO",
             "socket": "is a socket", "device": "is a character device"}


def make_odd(path: Path, kind: str) -> Path:
    """A loop of symbolic links, a named pipe, a socket (kept bound) or a link to /dev/zero (which never ends) at
    ``path``, in place of a file."""
    import socket

    if kind == "loop":
        path.symlink_to(path.name)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        make_odd.sockets.append(server)
    else:
        path.symlink_to("/dev/zero")
    return path


make_odd.sockets = []


def run_bounded(command: list[str], seconds: float = 300) -> int:
    """``cli_main(command)`` in a thread, failing the test (not hanging it) when it has not returned in time: a
    read of a named pipe blocks for ever."""
    import threading

    result = []
    worker = threading.Thread(target=lambda: result.append(cli_main(command)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"{command} still runs after {seconds} s"
    return result[0]


@pytest.mark.parametrize("kind", sorted(ODD_KINDS))
def test_a_loop_fifo_socket_or_device_where_a_file_is_read_is_one_line_in_every_command(tmp_path, capsys, kind):
    """A config.json that is a loop of symbolic links was a traceback in compare and export, one that is a FIFO hung
    export, a stray FIFO named *.safetensors hung load(). Each odd file in place of a file we read is now one line
    that names it and what it is, before anything opens it: load, compare, senses, geometry, export (the model
    folder, --scores, --tokenizer), train and train-tokenizer."""
    from test_hub import make_tokenizer

    from scratchformer.loading import load

    good = tiny_model_folder(tmp_path / "good")
    make_tokenizer().save_pretrained(good)
    stray = tmp_path / "stray"
    shutil.copytree(good, stray)
    make_odd(stray / "extra.safetensors", kind)
    odd_config = tmp_path / "odd-config"
    shutil.copytree(good, odd_config)
    (odd_config / "config.json").unlink()
    make_odd(odd_config / "config.json", kind)
    odd_tokenizer = tmp_path / "odd-tokenizer"
    odd_tokenizer.mkdir()
    make_odd(odd_tokenizer / "tokenizer.json", kind)
    data = make_odd(tmp_path / "data.tsv", kind)
    text = make_odd(tmp_path / "data.txt", kind)
    scores = make_odd(tmp_path / "scores.json", kind)
    out = tmp_path / "out"
    try:
        with pytest.raises(ScratchformerError) as caught:
            load(stray)
        assert str(caught.value).startswith(f"{stray / 'extra.safetensors'} {ODD_KINDS[kind]}"), caught.value
        commands = {
            odd_config / "config.json": [["compare", "--no-defaults", "--model", str(odd_config), "--no-plots",
                                          "--output", str(out)], ["export", str(odd_config), str(out)]],
            stray / "extra.safetensors": [["export", str(stray), str(out)]],
            scores: [["export", str(good), str(out), "--scores", str(scores)]],
            odd_tokenizer / "tokenizer.json": [["export", str(good), str(out), "--tokenizer", str(odd_tokenizer)]],
            data: [["senses", "--data", str(data), "--model", "random-scratchformer", "--output", str(out)]],
            text: [["geometry", "--data", str(text), "--model", "random-scratchformer", "--no-plots", "--output",
                    str(out)], ["train", "--train-files", str(text), "--output-dir", str(out)],
                   ["train-tokenizer", str(text), "--output", str(out), "--vocab-size", "300"]],
        }
        capsys.readouterr()
        for odd, runs in commands.items():
            for command in runs:
                assert run_bounded(command) == 2, command
                line = one_error_line(capsys, command[0])
                assert f"{odd} {ODD_KINDS[kind]}" in line, (command, line)
                assert command[0].startswith("train") or not out.exists(), command  # train locks its folder first
    finally:
        while make_odd.sockets:
            make_odd.sockets.pop().close()


def test_a_read_only_file_system_and_a_disk_without_inodes_are_named_as_such(tmp_path, capsys):
    """A read-only file system was "permission denied ... chmod" (os.access says no there, even to root), and a disk
    out of inodes was "no space ... 21 MB free". Each now names its real cause, in compare and export alike."""
    source = tiny_model_folder(tmp_path / "model")
    from test_hub import make_tokenizer

    make_tokenizer().save_pretrained(source)
    with small_disk(tmp_path / "ro") as disk:
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True, capture_output=True)
        for command in (["compare", *RANDOM_MODEL, "--no-plots", "--output", str(disk / "c")],
                        ["export", str(source), str(disk / "e")]):
            assert run_bounded(command) == 2, command
            line = one_error_line(capsys, command[0])
            assert f"{disk} is on a read-only file system" in line and "chmod" not in line, line
        assert "read-only file system" in str(files.permission_denied(disk / "x"))
    with small_disk(tmp_path / "few", "1M,nr_inodes=3") as disk:
        (disk / "a").write_text("one file")  # the root folder and this take two of the three inodes
        (disk / "b").write_text("another")
        with pytest.raises(OSError) as full:
            (disk / "c").write_text("no inode left for me")
        assert full.value.errno == errno.ENOSPC and shutil.disk_usage(disk).free > 100_000  # bytes are free
        for command in (["compare", *RANDOM_MODEL, "--no-plots", "--output", str(disk)],
                        ["export", str(source), str(disk / "e")]):
            assert run_bounded(command) == 2, command
            line = one_error_line(capsys, command[0])
            assert f"no free inodes on the device of {disk}" in line and "no space left" not in line, line


@pytest.mark.parametrize("name, command", [
    ("compare.json", ["compare", *RANDOM_MODEL, "--no-plots"]),
    ("senses.json", ["senses", "--model", "random-scratchformer"]),
])
def test_a_folder_where_a_result_file_goes_is_one_line_and_stays(tmp_path, capsys, name, command):
    """compare.json or senses.json being a folder was a traceback (os.replace: Is a directory). It is one line now,
    and the folder stays as it was."""
    out = tmp_path / "out"
    (out / name).mkdir(parents=True)
    (out / name / "mine.txt").write_text("the user's own file")
    data = ["--data", str(write_tsv(tmp_path / "s.tsv"))] if command[0] == "senses" else []
    assert run_bounded([*command, *data, "--output", str(out)]) == 2
    line = one_error_line(capsys, command[0])
    assert f"cannot write {out / name}: a folder is in the way" in line, line
    assert (out / name / "mine.txt").read_text() == "the user's own file"
    assert not [path.name for path in out.iterdir() if path.name.startswith(f".{name}")]  # no temporary file left
