"""Experiment tracking: ``--report-to`` (the Trainer's integrations; ours defaults to none).

TensorBoard is checked for real, offline, where it is installed: the events file appears with the training loss;
the loss curve PNG and ``loss_history.json`` are written as always. Integrations whose package is missing (e.g.
wandb here) are refused before any data is read.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_training import FailIfTrainingStarts, corpus, tiny  # noqa: F401

from scratchformer.training import config_from_args, run_training


def test_tensorboard_gets_the_loss_offline(tmp_path, corpus, monkeypatch):  # noqa: F811
    pytest.importorskip("tensorboard", reason="tensorboard is not installed (pip install tensorboard)")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    options, args = tiny(tmp_path, corpus, max_steps=3, save_steps=3, report_to=["tensorboard"])
    run_training(options, args)
    out = Path(args.output_dir)
    # the Trainer's default logging folder, in OUTPUT_DIR (one events file while training, one for the final
    # evaluation: the callback closes its writer when training ends)
    files = sorted(out.glob("runs/*/events.out.tfevents.*"))
    assert files
    scalars: dict[str, list] = {}
    for path in files:
        logged = EventAccumulator(str(path))
        logged.Reload()
        for tag in logged.Tags()["scalars"]:
            scalars.setdefault(tag, []).extend(logged.Scalars(tag))
    losses = scalars["train/loss"]
    assert [e.step for e in losses] == [1, 2, 3] and all(e.value > 0 for e in losses)
    assert "eval/loss" in scalars
    assert (out / "loss_curve.png").is_file() and (out / "loss_history.json").is_file()  # as always


def test_report_to_takes_several_integrations_and_checks_their_packages(tmp_path, corpus):  # noqa: F811
    for words, expected in [(["tensorboard", "wandb"], ["tensorboard", "wandb"]),
                            (["tensorboard,trackio"], ["tensorboard", "trackio"]), (["none"], [])]:
        _, args = config_from_args(["--train-files", "a.txt", "--output-dir", "o", "--report-to", *words])
        assert args.report_to == expected
    # an unknown integration, or one whose package is missing, is the Trainer's to say (issue 66), when it is built
    from transformers.integrations import get_reporting_integration_callbacks

    with pytest.raises(ValueError, match="tensorbord is not supported, only .* are supported"):
        get_reporting_integration_callbacks(["tensorbord"])
    try:
        import wandb  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="WandbCallback requires wandb to be installed"):
            get_reporting_integration_callbacks(["wandb"])[0]()
