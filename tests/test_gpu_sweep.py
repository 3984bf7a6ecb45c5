"""scripts/gpu_sweep.sh end to end on CPU cores at a toy size (``SWEEP_SIZE=tiny``): every arm trains, is scored
on the dev set, and the best one comes back as tar parts that rebuild a model folder."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from test_training import OBJECTS, SUBJECTS, VERBS

ROOT = Path(__file__).resolve().parents[1]
SENSES = [  # lemma, synset, sentence, where the word is
    ("bank", "1", "we sat on the bank of the river", "bank"), ("bank", "1", "the river bank was muddy", "bank"),
    ("bank", "2", "she paid the money into the bank", "bank"), ("bank", "2", "the bank lent him money", "bank"),
    ("play", "1", "the children play in the garden", "play"), ("play", "1", "dogs play with a ball", "play"),
    ("play", "2", "we saw a play at the theatre", "play"), ("play", "2", "the play had three acts", "play"),
    ("light", "1", "turn on the light please", "light"), ("light", "1", "the light was too bright", "light"),
    ("light", "2", "the box is light enough to carry", "light"), ("light", "2", "a light bag", "light"),
]


@pytest.mark.slow
def test_the_sweep_runs_every_arm_scores_them_and_keeps_the_best(tmp_path):
    folder = tmp_path / "sweep"
    (folder / "data").mkdir(parents=True)
    rng = random.Random(3)
    lines = [". ".join(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}"
                       for _ in range(rng.randint(3, 6))) + "." for _ in range(120)]
    with gzip.open(folder / "data" / "corpus_en.txt.gz", "wt") as corpus:
        corpus.write("\n".join(lines) + "\n")
    rows = ["lemma\tpos\tsynset\tstart\tend\tsentence\tgloss"]
    for lemma, synset, sentence, word in SENSES:
        start = sentence.index(word)
        rows.append(f"{lemma}\tn\t{synset}\t{start}\t{start + len(word)}\t{sentence}\tsense {synset}")
    (folder / "data" / "wordnet_senses_dev.tsv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "out"
    env = {**os.environ, "SWEEP_SIZE": "tiny", "SWEEP_DIR": str(folder), "OUT": str(out), "WORK": str(tmp_path / "w"),
           "BUDGET": "300", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_sweep.sh"), "run"], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((out / "sweep.json").read_text())
    assert len(result["arms"]) >= 5 and result["size"] == "tiny"
    for name, arm in result["arms"].items():
        assert arm["ended"] == "finished", (name, (tmp_path / "w" / f"{name}.log").read_text()[-2000:])
        assert arm["metrics"]["train_loss"] > 0
        figures = arm["scores"]["last_layer"]
        assert 0 <= figures["roc_auc"] <= 1 and 0 <= figures["within_lemma"] <= 1 and 0 <= figures["nn_accuracy"] <= 1
    assert "--word-contrast-weight" in result["arms"]["wc-m02"]["command"]
    assert result["v3"]["last_layer"]["roc_auc"] > 0
    best = result["best"]
    sums = {n: a["scores"]["last_layer"]["within_lemma"] + a["scores"]["last_layer"]["nn_accuracy"]
            for n, a in result["arms"].items()}
    assert sums[best] == max(sums.values())
    parts = sorted(out.glob("best.tar.*"))
    assert [p.name for p in parts] == result["best_parts"] and all(p.stat().st_size <= 15 * 2**20 for p in parts)
    whole = tmp_path / "best.tar"
    whole.write_bytes(b"".join(p.read_bytes() for p in parts))
    with tarfile.open(whole) as tar:
        tar.extractall(tmp_path / "best", filter="data")
    from scratchformer import load

    model, _ = load(str(tmp_path / "best"), task="encoder")
    assert model.config.d_model > 0
    assert len(list(out.iterdir())) <= 8  # what a device call brings back


def test_every_full_size_arm_is_a_command_line_that_passes_the_checks(tmp_path):
    """The GPU arms parse and pass the up-front checks here (without --bf16 and --tf32, which need the GPU), so a
    lent machine's minutes are not lost to a typo in an arm."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import gpu_sweep

    from scratchformer.training import config_from_args
    from scratchformer.training.checks import check_options

    for name in gpu_sweep.ARMS:
        argv = gpu_sweep.arm_command(name, False, tmp_path, tmp_path / "work", 5.0)[4:]
        tf32 = argv.index("--tf32")
        del argv[tf32:tf32 + 2]
        argv.remove("--bf16")
        options, args = config_from_args(argv)
        check_options(options, args)
        assert (options.word_contrast_weight > 0) == name.startswith("wc-"), name
