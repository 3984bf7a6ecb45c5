"""The `scratchformer` command line."""

from __future__ import annotations

import subprocess
import sys

from scratchformer.cli import build_parser, main


def test_info_prints_versions_and_registered_classes(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for expected in ("torch", "transformers", "tokenizers", "ScratchformerConfig", "ScratchformerEncoderModel",
                     "ScratchformerForConditionalGeneration", "ScratchformerTokenizer"):
        assert expected in out


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
