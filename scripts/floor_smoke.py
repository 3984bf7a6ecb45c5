"""Smoke checks of an installed scratchformer, run by scripts/floor_check.sh in a venv that holds the LOWEST versions
pyproject.toml allows (scripts/floor-constraints.txt) and only the core dependencies.

Plain Python, no pytest: the floor venv stays small. Run it from outside the repository, with the interpreter of the
venv to check:

    python scripts/floor_smoke.py core    # core install: inference commands, remote code, no training packages
    python scripts/floor_smoke.py train   # after installing the [train] extra: a 3-step seq2seq training run

Each check prints one line; the first failure raises (exit status 1 with the traceback).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

TRAINING_ONLY = ("datasets", "accelerate", "sacrebleu")
SENSE_SENTENCES = [("1", "the bank of the river was muddy", "sloping land"),
                   ("1", "we sat on the bank by the water", "sloping land"),
                   ("2", "the bank lent us money", "a financial institution"),
                   ("2", "he went to the bank to cash a cheque", "a financial institution")]
SENSES_TSV = "lemma\tpos\tsynset\tstart\tend\tsentence\tgloss\n" + "".join(
    f"bank\tn\t{synset}\t{text.index('bank')}\t{text.index('bank') + 4}\t{text}\t{gloss}\n"
    for synset, text, gloss in SENSE_SENTENCES)
PARALLEL_TSV = "\n".join(["src\ttgt"] + [f"word {i} and {i + 1}\tmot {i} et {i + 1}" for i in range(40)]) + "\n"


def check(name: str):
    """Decorator: run the check, print its name and time."""
    def wrap(function):
        def run(*args):
            start = time.perf_counter()
            function(*args)
            print(f"ok  {name} ({time.perf_counter() - start:.1f} s)", flush=True)
        return run
    return wrap


def cli(*args: str, cwd: Path, expect: int = 0) -> subprocess.CompletedProcess:
    """Run the installed ``scratchformer`` console script (the one next to this interpreter)."""
    script = Path(sys.executable).with_name("scratchformer")
    result = subprocess.run([str(script), *args], cwd=cwd, capture_output=True, text=True, timeout=900)
    if result.returncode != expect:
        raise AssertionError(f"scratchformer {' '.join(args)} exited {result.returncode}, expected {expect}:\n"
                             f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


@check("versions")
def show_versions(_work: Path) -> None:
    from importlib.metadata import version

    names = ("torch", "transformers", "tokenizers", "huggingface_hub", "safetensors", "numpy", "matplotlib",
             "regex", "tqdm", *TRAINING_ONLY)
    found = {}
    for name in names:
        try:
            found[name] = version(name)
        except Exception:  # noqa: BLE001 - not installed
            found[name] = "-"
    print("    " + "  ".join(f"{k} {v}" for k, v in found.items()))


@check("the package is the installed one, not a source tree")
def installed_not_source(_work: Path) -> None:
    import scratchformer

    where = Path(scratchformer.__file__).resolve()
    assert "site-packages" in where.parts, f"scratchformer imported from {where}, not from the installed wheel"
    assert (where.parent / "py.typed").is_file(), "py.typed is not shipped"


@check("core install has no training packages")
def no_training_packages(_work: Path) -> None:
    from scratchformer.errors import missing_modules

    present = sorted(set(TRAINING_ONLY) - set(missing_modules(*TRAINING_ONLY)))
    assert not present, f"the core install pulled training-only packages: {present}"


@check("shipped checkpoint: generate, encoder, tokenizer")
def shipped_checkpoint(_work: Path) -> None:
    import torch

    from scratchformer import load_pretrained

    model, tokenizer = load_pretrained("small")
    batch = tokenizer(["The bank of the river.", "Money in the bank."], padding=True, return_tensors="pt")
    out = model.generate(**batch, max_new_tokens=6, do_sample=False, num_beams=2)
    assert out.shape[0] == 2 and out.shape[1] > 1, out.shape
    # the cache reaches forward and comes back under the name this transformers version uses (5.24 renamed it)
    cached = model.generate(**batch, max_new_tokens=8, do_sample=False)
    recomputed = model.generate(**batch, max_new_tokens=8, do_sample=False, use_cache=False)
    assert cached.tolist() == recomputed.tolist(), "cached greedy generation differs from recomputing every step"
    # the static cache (what compiled generation uses), with and without a decoder mask (our create_masks_for_generate)
    static = model.generate(**batch, max_new_tokens=8, do_sample=False, cache_implementation="static")
    assert static.tolist() == cached.tolist(), "static-cache greedy generation differs from the dynamic cache"
    start = torch.full((2, 1), model.config.decoder_start_token_id)
    masked = model.generate(**batch, decoder_input_ids=start, decoder_attention_mask=torch.ones_like(start),
                            max_new_tokens=8, do_sample=False, cache_implementation="static")
    assert masked.tolist() == cached.tolist(), "static-cache generation with a decoder mask differs"
    encoder, _ = load_pretrained("small", encoder_only=True)
    with torch.no_grad():
        states = encoder(**batch).last_hidden_state
    assert states.shape[:2] == batch["input_ids"].shape and torch.isfinite(states).all()
    text = "Attention is all you need."
    assert tokenizer.decode(tokenizer(text)["input_ids"], skip_special_tokens=True) == text


@check("remote code: save, then load in a process that cannot import scratchformer")
def remote_code(work: Path) -> None:
    import torch

    from scratchformer.loading import build_random_scratchformer

    texts = ["the bank of the river", "money in the bank", "attention is all you need"]
    model, tokenizer = build_random_scratchformer(texts, d_model=32, encoder_layers=2, decoder_layers=2,
                                                  encoder_attention_heads=4, decoder_attention_heads=4,
                                                  encoder_ffn_dim=64, decoder_ffn_dim=64)
    folder = work / "tiny-model"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    batch = tokenizer(texts[:2], padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = {
            "logits": model(**batch, decoder_input_ids=batch["input_ids"]).logits.tolist(),
            "encoder": model.get_encoder()(**batch).last_hidden_state.tolist(),
            "greedy": model.generate(**batch, max_new_tokens=5, do_sample=False).tolist(),
            "input_ids": batch["input_ids"].tolist(),
        }
    (work / "expected.json").write_text(json.dumps(expected))
    code = textwrap.dedent(f"""
        import json, sys
        sys.modules["scratchformer"] = None  # as for a Hub user: the package is not there
        import torch
        from transformers import AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer
        folder = {str(folder)!r}
        expected = json.load(open({str(work / "expected.json")!r}))
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        seq2seq = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True).eval()
        encoder = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
        assert type(seq2seq).__module__.startswith("transformers_modules"), type(seq2seq).__module__
        batch = tokenizer({texts[:2]!r}, padding=True, return_tensors="pt")
        assert batch["input_ids"].tolist() == expected["input_ids"], "the tokenizer differs"
        with torch.no_grad():
            logits = seq2seq(**batch, decoder_input_ids=batch["input_ids"]).logits
            states = encoder(**batch).last_hidden_state
            greedy = seq2seq.generate(**batch, max_new_tokens=5, do_sample=False)
        torch.testing.assert_close(logits, torch.tensor(expected["logits"]), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(states, torch.tensor(expected["encoder"]), atol=1e-5, rtol=1e-5)
        assert greedy.tolist() == expected["greedy"], (greedy.tolist(), expected["greedy"])
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HOME=str(work / "hf_home"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    result = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]


@check("scratchformer info / --help / train --help")
def cli_help(work: Path) -> None:
    assert "transformers" in cli("info", cwd=work).stdout
    cli("--help", cwd=work)
    assert "--objective" in cli("train", "--help", cwd=work).stdout


@check("scratchformer compare (plots)")
def cli_compare(work: Path) -> None:
    out = work / "compare_output"
    cli("compare", "--output", str(out), cwd=work)
    written = sorted(p.name for p in out.iterdir())
    assert "compare.json" in written and any(name.endswith(".png") for name in written), written


@check("scratchformer senses on a 4-line TSV")
def cli_senses(work: Path) -> None:
    data = work / "senses.tsv"
    data.write_text(SENSES_TSV)
    cli("senses", "--data", str(data), "--model", "small", "--output", str(work / "senses"), cwd=work)
    assert (work / "senses" / "senses.json").is_file()


@check("scratchformer export of the shipped checkpoint")
def cli_export(work: Path) -> None:
    from scratchformer import pretrained_path

    cli("export", str(pretrained_path("small")), str(work / "export"), cwd=work)
    assert (work / "export" / "model.safetensors").is_file() and (work / "export" / "README.md").is_file()


@check("training commands name the [train] extra in one line")
def cli_train_needs_extra(work: Path) -> None:
    data = work / "pairs.tsv"
    data.write_text(PARALLEL_TSV)
    for args in (("train", "--objective", "seq2seq", "--train-files", str(data), "--output-dir", str(work / "t")),
                 ("train-tokenizer", str(data), "--output", str(work / "tok"))):
        result = cli(*args, cwd=work, expect=2)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and 'pip install "scratchformer[train]"' in lines[0], result.stderr[-2000:]
    assert not (work / "t").exists(), "a refused training run left its output folder behind"


@check("scratchformer train --objective seq2seq, 3 steps")
def cli_train_seq2seq(work: Path) -> None:
    data = work / "pairs.tsv"
    data.write_text(PARALLEL_TSV)
    out = work / "run"
    cli("train", "--objective", "seq2seq", "--train-files", str(data), "--source-column", "src",
        "--target-column", "tgt", "--output-dir", str(out), "--preset", "tiny", "--tokenizer-vocab-size", "300",
        "--max-steps", "3", "--eval-steps", "3", "--save-steps", "3", "--batch-size", "4", "--logging-steps", "1",
        "--no-progress-bar", cwd=work)
    assert any(out.rglob("model.safetensors")), f"no model saved: {sorted(out.rglob('*'))[:20]}"
    metrics = " ".join(path.read_text() for path in out.rglob("*.json"))
    assert "bleu" in metrics and "chrf" in metrics, "the seq2seq evaluation reported no BLEU/chrF"
    assert any(out.rglob("loss_curve.png")), "no loss_curve.png: matplotlib did not import beside the [train] extra"


PHASES = {
    "core": [show_versions, installed_not_source, no_training_packages, shipped_checkpoint, remote_code, cli_help,
             cli_compare, cli_senses, cli_export, cli_train_needs_extra],
    "train": [show_versions, installed_not_source, cli_train_seq2seq],
}


def main() -> int:
    phase = sys.argv[1] if len(sys.argv) > 1 else "core"
    if phase not in PHASES:
        raise SystemExit(f"usage: floor_smoke.py {{{','.join(PHASES)}}}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("MPLBACKEND", "Agg")
    keep = os.environ.get("FLOOR_SMOKE_WORKDIR")  # set it to keep the files the checks write, for a look
    with tempfile.TemporaryDirectory(prefix=f"floor-{phase}-") as tmp:
        work = Path(keep) if keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for check_function in PHASES[phase]:
            check_function(work)
    print(f"floor smoke ({phase}): {len(PHASES[phase])} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
