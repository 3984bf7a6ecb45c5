"""What a run leaves behind about its losses: ``loss_history.json`` and ``loss_curve.png`` (each replaced whole or
not at all, :mod:`scratchformer.files`)."""

from __future__ import annotations

from pathlib import Path

from .. import files


def loss_history(log_history: list[dict]) -> dict[str, list[dict]]:
    """The Trainer's ``log_history`` split into training-loss and evaluation records."""
    train = [{k: e[k] for k in ("step", "epoch", "loss", "learning_rate", "grad_norm") if k in e}
             for e in log_history if "loss" in e and "step" in e]
    evals = [{k: v for k, v in e.items() if k == "step" or k == "epoch" or k.startswith("eval_")}
             for e in log_history if "eval_loss" in e]
    return {"train": train, "eval": evals}


def write_loss_curve(history: dict[str, list[dict]], output_dir: str | Path, title: str = "") -> list[Path]:
    """``loss_history.json`` and ``loss_curve.png``; returns the files written."""
    output_dir = Path(output_dir)
    written = [output_dir / "loss_history.json"]
    files.write_json(written[0], history, indent=1)
    import matplotlib  # a core dependency

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2))
    if history["train"]:
        ax.plot([e["step"] for e in history["train"]], [e["loss"] for e in history["train"]],
                label="training loss (label-smoothed)")
    if history["eval"]:
        ax.plot([e["step"] for e in history["eval"]], [e["eval_loss"] for e in history["eval"]], "o-",
                label="validation loss (cross-entropy)")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss per target token (nats)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    try:
        files.save_figure(fig, output_dir / "loss_curve.png", dpi=120)
    finally:
        plt.close(fig)
    written.append(output_dir / "loss_curve.png")
    return written
