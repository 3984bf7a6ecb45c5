"""A pre-training sweep for one lent GPU (H100/H200), ready to fire: several recipes at once, each scored on the dev set.

    python scripts/gpu_sweep.py prepare            # here: wheels and data into .gpu_sweep/ (git-ignored)
    OUT=/tmp/out python scripts/gpu_sweep.py run   # there: the arms side by side, then the scores, then the best

``scripts/gpu_sweep.sh`` wraps both (it installs the carried wheels before ``run``); docs/training.md, "A GPU sweep
ready to fire", gives the exact ``run`` call. The arms (:data:`ARMS`) train at the same time on the one GPU, each a
``scratchformer train`` process with its own data-loader workers: a model this small leaves most of an H100 idle in
one process (it is bound by kernel launches and Python), so five at once cost little more wall time than one.
Each arm is stopped by ``--max-minutes`` so that the whole sweep ends within ``BUDGET`` seconds (500: a command's
10 minutes less the install, the start of Python and a margin); an arm that overruns is killed, and its newest checkpoint is scored.
Then each arm and v3 (``small``) is scored on the dev set (as ``scratchformer senses`` scores it), and ``$OUT``
gets:

- ``sweep.json``: each arm's command, how it ended, its training metrics (steps, epochs, losses) and its dev-set
  figures (last layer: ROC-AUC, within-lemma ROC-AUC, 1-NN; the best layer; every layer as ``senses`` wrote it),
  and v3's on the same machine; ``best``: the arm with the highest within-lemma ROC-AUC plus 1-NN at the last layer;
- ``best.tar.00``, ``best.tar.01``, ...: that arm's final model folder as a tar cut into parts of at most 15 MiB (a
  file back from the machine may have 16): ``cat best.tar.* | tar -x -C outputs/gpu-best``;
- ``sweep.log``: what the sweep did, and the end of each arm's log.

``SWEEP_SIZE=tiny`` runs the same arms at a toy size on CPU cores (the test suite does, end to end); ``ARMS`` picks
arms by name; ``SWEEP_DIR`` is the prepared folder; ``WORK`` the scratch folder of the runs (emptied first).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = "scratchformer/pretrained/scratchformer-small"  # v3's, so every arm scores on the same words
CORPUS, DEV = "corpus_en.txt.gz", "wordnet_senses_dev.tsv"
PART_BYTES = 15 * 2**20
# what the GPU image lacks or holds at another version than the tests here (KINDS.md of the device tool lists the
# image's packages): datasets, the two packages it needs that the image has not and the fsspec it pins, and the
# transformers and tokenizers the tests run. The image's huggingface_hub (1.33) serves both; ours (2.4) would need
# httpx2, which it lacks. The image's accelerate is ours (1.15.0), and it has pyarrow, pandas and matplotlib.
WHEELS = ("datasets==5.2.0", "dill==0.4.1", "multiprocess==0.70.19", "fsspec==2026.9.0", "transformers==5.24.0",
          "tokenizers==0.23.3")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")

# v3's recipe (docs/experiments.md, "v3") at the GPU's batch, as arms start from it
V3 = {"--preset": "small", "--config-overrides": "pre_layer_norm=true,dropout=0.1,position_embedding_type=rope",
      "--tokenizer": TOKENIZER, "--batch-size": 256, "--learning-rate": "2e-3", "--warmup-steps": 300,
      "--train-sampling-strategy": "batch_rebalance", "--mask-ratio": 0.5, "--encoder-mlm-weight": 1,
      "--weight-decay": 0.1, "--num-train-epochs": 10, "--save-steps": 1000}
# phase two from v3 with the word-level self-contrast loss beside the masked-token loss (experiments.md, issue 69)
WORD_CONTRAST = {"--model": "small", "--config-overrides": "dropout=0.1", "--batch-size": 128,
                 "--learning-rate": "1e-4", "--lr-schedule": "linear", "--warmup-steps": 60, "--max-steps": 600,
                 "--train-sampling-strategy": "batch_rebalance", "--mask-ratio": 0.5, "--encoder-mlm-weight": 1,
                 "--denoising-weight": 0, "--word-contrast-occurrences": 4, "--word-contrast-erase-word": True,
                 "--save-steps": 300}
ARMS: dict[str, dict] = {
    # seeds of v3's recipe for 10 epochs, with dropout and weight decay (several passes over a small corpus)
    "v3-e10-s42": {**V3, "--seed": 42},
    "v3-e10-s7": {**V3, "--seed": 7},
    # the best phase one on CPU cores (v4c: the encoder's loss alone, one-cycle linear schedule)
    "v4c": {"--preset": "small", "--config-overrides": "pre_layer_norm=true,dropout=0.0,position_embedding_type=rope",
            "--tokenizer": TOKENIZER, "--batch-size": 128, "--learning-rate": "2e-3", "--lr-schedule": "linear",
            "--warmup-steps": 1815, "--max-steps": 3300, "--train-sampling-strategy": "batch_rebalance",
            "--mask-ratio": 0.5, "--encoder-mlm-weight": 1, "--denoising-weight": 0, "--seed": 42,
            "--save-steps": 1100},
    "wc-m02": {**WORD_CONTRAST, "--word-contrast-weight": 0.2, "--seed": 42},
    "wc-m1": {**WORD_CONTRAST, "--word-contrast-weight": 1.0, "--seed": 42},
}
GPU = {"--bf16": True, "--tf32": "true", "--dataloader-num-workers": 2, "--num-proc": 2}
TINY = {"--batch-size": 4, "--max-length": 32, "--max-train-samples": 64, "--max-eval-samples": 8,
        "--warmup-steps": 1, "--max-steps": 2, "--save-steps": 2, "--num-train-epochs": None}


def arm_command(name: str, tiny: bool, data: Path, work: Path, minutes: float) -> list[str]:
    """The ``scratchformer train`` command line of arm ``name``."""
    options = {**ARMS[name], **(TINY if tiny else GPU)}
    if tiny and options.get("--preset") == "small":
        options["--preset"] = "tiny"
    options.update({"--train-files": str(data / CORPUS), "--output-dir": str(work / name), "--eval-steps": 0,
                    "--cache-dir": str(work / f"cache-{name}"), "--max-minutes": f"{minutes:.2f}",
                    "--disable-tqdm": "true", "--logging-steps": 1 if tiny else 50})
    argv = [sys.executable, "-m", "scratchformer", "train", "--objective", "denoise"]
    for flag, value in options.items():
        if value is True:
            argv.append(flag)
        elif value is not None:
            argv += [flag, str(value)]
    return argv


def prepare(folder: Path, data: Path) -> None:
    """Download the wheels for the GPU's Python (3.12) and copy the data into ``folder``; say its size."""
    wheels = folder / "wheels"
    shutil.rmtree(folder, ignore_errors=True)
    wheels.mkdir(parents=True)
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", *platforms, "-d", str(wheels), *WHEELS],
                   check=True)
    (folder / "data").mkdir()
    for name in (CORPUS, DEV):
        shutil.copyfile(data / name, folder / "data" / name)
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print(f"{folder}: {size / 2**20:.1f} MiB (a run carries at most 64 MiB with the working tree)")


def _scores(report: dict) -> dict:
    """The figures of one model's report (as ``senses.json`` holds it): the last layer's three and the best layer's
    ROC-AUC."""
    contextual = [layer for layer in report["layers"] if isinstance(layer["layer"], int) and layer["layer"] > 0]
    last, best = contextual[-1], max(contextual, key=lambda layer: layer["roc_auc"])
    return {"last_layer": {"roc_auc": last["roc_auc"], "within_lemma": last["roc_auc_within_group"],
                           "nn_accuracy": last["nn_accuracy"]},
            "best_layer": {"layer": best["layer"], "roc_auc": best["roc_auc"]}, "senses": report}


def _model_folder(run: Path) -> Path | None:
    """The run's final model, else its newest complete checkpoint (an arm killed at the deadline), else ``None``."""
    if (run / "model.safetensors").is_file():
        return run
    checkpoints = sorted(run.glob("checkpoint-*/model.safetensors"), key=lambda p: int(p.parent.name.split("-")[1]))
    return checkpoints[-1].parent if checkpoints else None


def _wait(processes: dict[str, subprocess.Popen], deadline: float) -> dict[str, int | None]:
    """Each process's exit code, killing those still running at ``deadline`` (``None`` for them)."""
    codes: dict[str, int | None] = {}
    for name, process in processes.items():
        try:
            codes[name] = process.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            codes[name] = None
    return codes


def run(folder: Path, out: Path, work: Path, budget: float, tiny: bool, names: list[str]) -> dict:
    """Train the arms side by side, score them and v3, and write ``$OUT`` (the module docstring)."""
    start = time.monotonic()
    score_reserve = 30 if tiny else 90  # the scoring of every model, the tar and the parts
    setup_and_final = 0 if tiny else 75  # before the first step (data, model) and after the last (evaluate, save)
    train_deadline = start + budget - score_reserve
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep.log").write_text("")

    def say(text: str) -> None:  # printed, and kept in $OUT as it goes (a command cut short keeps its log)
        line = f"[{time.monotonic() - start:6.1f} s] {text}"
        print(line, flush=True)
        with open(out / "sweep.log", "a") as log:
            log.write(line + "\n")

    data = folder / "data"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1" if tiny else "2"}
    minutes = max(0.1, (train_deadline - time.monotonic() - setup_and_final) / 60)
    commands = {name: arm_command(name, tiny, data, work, minutes) for name in names}
    processes = {}
    for name, command in commands.items():
        with open(work / f"{name}.log", "w") as log:
            processes[name] = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    say(f"{len(processes)} arms started, each stopped after {minutes:.2f} minutes of training: {', '.join(names)}")
    codes = _wait(processes, train_deadline)
    models = {"v3": "small"}
    result: dict = {"size": "tiny" if tiny else "full", "budget_seconds": budget, "arms": {}}
    for name in names:
        folder_of_model = _model_folder(work / name)
        ended = {0: "finished", None: "killed at the deadline"}.get(codes[name], f"failed (exit {codes[name]})")
        results_file = work / name / "all_results.json"
        result["arms"][name] = {"command": " ".join(commands[name][1:]), "ended": ended,
                                "model": None if folder_of_model is None else str(folder_of_model),
                                "metrics": json.loads(results_file.read_text()) if results_file.is_file() else None}
        if folder_of_model is not None:
            models[name] = str(folder_of_model)
        say(f"{name}: {ended}; model {folder_of_model}")
    (out / "sweep.json").write_text(json.dumps(result, indent=2) + "\n")  # the runs, should the scoring fail
    _score(models, folder, tiny, start + budget - 15, say, result)
    _keep_best(result, models, out, say)
    (out / "sweep.json").write_text(json.dumps(result, indent=2) + "\n")
    tails = [f"--- {name}.log (end)\n" + "\n".join((work / f"{name}.log").read_text(errors="replace")
                                                    .splitlines()[-25:]) for name in names]
    with open(out / "sweep.log", "a") as log:
        log.write("\n".join(tails) + "\n")
    return result


def _score(models: dict[str, str], folder: Path, tiny: bool, deadline: float, say, result: dict) -> None:
    """Each model on the dev set as ``scratchformer senses`` scores it (last layer, mean over a word's tokens), on
    the GPU where there is one, one model after the other until ``deadline``."""
    import torch

    from scratchformer.analysis import senses
    from scratchformer.analysis.extractor import load_extractor
    from scratchformer.analysis.sense_data import read_senses_tsv

    dev = folder / "data" / DEV
    examples = senses.first_groups(read_senses_tsv(dev), "lemma", 3 if tiny else None)
    for label, source in models.items():
        if time.monotonic() > deadline:
            say(f"{label}: not scored, the budget is spent")
            continue
        try:  # one model that cannot be scored (a checkpoint cut short) leaves the others' scores
            extractor = load_extractor(source, batch_size=256).extractor
            if torch.cuda.is_available():
                extractor.model.to("cuda")
            report = senses.evaluate_senses(extractor, examples, model_label=label, data_label=str(dev)).as_dict()
        except Exception as error:  # noqa: BLE001 - said in the log and the JSON, and the sweep goes on
            say(f"{label}: not scored: {type(error).__name__}: {error}")
            continue
        scores = _scores(report)
        if label == "v3":
            result["v3"] = scores
        else:
            result["arms"][label]["scores"] = scores
        say(f"scored {label}: " + ", ".join(f"{k} {v:.3f}" for k, v in scores["last_layer"].items()))


def _keep_best(result: dict, models: dict[str, str], out: Path, say) -> None:
    """Name the best scored arm and put its model folder into ``out`` as tar parts of at most 15 MiB."""
    scored = {name: arm["scores"]["last_layer"] for name, arm in result["arms"].items() if arm.get("scores")}
    if not scored:
        result["best"] = None
        say("no arm was scored: nothing kept")
        return
    best = max(scored, key=lambda name: scored[name]["within_lemma"] + scored[name]["nn_accuracy"])
    result["best"] = best
    tar_path = out / "best.tar"
    with tarfile.open(tar_path, "w") as tar:  # the model's own files, not its checkpoints
        for path in sorted(Path(models[best]).iterdir()):
            if path.is_file():
                tar.add(path, arcname=path.name)
    data = tar_path.read_bytes()
    tar_path.unlink()
    parts = []
    for number, offset in enumerate(range(0, len(data), PART_BYTES)):
        part = out / f"best.tar.{number:02d}"
        part.write_bytes(data[offset:offset + PART_BYTES])
        parts.append(part.name)
    result["best_parts"] = parts
    say(f"best: {best} ({models[best]}), kept as {', '.join(parts)}")


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "run"
    folder = Path(os.environ.get("SWEEP_DIR", ROOT / ".gpu_sweep"))
    if command == "prepare":
        prepare(folder, Path(os.environ.get("DATA", ROOT.parent / "shared" / "data")))
        return 0
    if command != "run":
        print(f"usage: {Path(__file__).name} [prepare | run]", file=sys.stderr)
        return 2
    tiny = os.environ.get("SWEEP_SIZE", "full") == "tiny"
    names = os.environ.get("ARMS", " ".join(ARMS)).split()
    unknown = [name for name in names if name not in ARMS]
    if unknown or "OUT" not in os.environ or not (folder / "data" / CORPUS).is_file():
        print(f"set OUT, prepare {folder} first ({Path(__file__).name} prepare), and name arms of {list(ARMS)}"
              f"{f' (not {unknown})' if unknown else ''}", file=sys.stderr)
        return 2
    result = run(folder, Path(os.environ["OUT"]), Path(os.environ.get("WORK", "/tmp/gpu_sweep")),
                 float(os.environ.get("BUDGET", "500")), tiny, names)
    return 0 if result.get("best") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
