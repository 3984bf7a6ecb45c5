"""Peak memory of the word-sense evaluation (`scratchformer senses`) when one lemma has thousands of occurrences.

    python benchmarks/senses_memory.py            # 3,000 rows of one lemma; 20,000 rows over 400 lemmas
    python benchmarks/senses_memory.py --quick    # 600 rows of one lemma (seconds; what the test runs)

Pair cosines used to be one ``(pairs, hidden)`` gather in float64: 3,000 rows of one lemma are 4.5M pairs, and a
384-wide model then needs ~14 GB per gather. Now pairs are scored in blocks, a lemma with more than
``MAX_PAIRS_PER_GROUP`` pairs is scored on a seeded random sample of that many (the report says so), and the 1-NN
search goes in blocks of queries. Each case runs ``evaluate_senses`` in its own process on synthetic data (two senses
per lemma) with a random Scratchformer encoder of width 384 (MiniLM's), and reports the process's peak resident
set, the part above the same process with the model loaded and the data read, and the wall time.
Writes ``benchmarks/senses_memory.json`` and ``.md`` (or ``--json``/``--md``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import resource
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORDS = "river money stone light water field table paper glass music garden window letter market".split()


def write_tsv(path: Path, lemmas: int, rows_per_lemma: int) -> None:
    """Synthetic sense data: each lemma in short sentences, half in one sense, half in another."""
    rng = random.Random(0)
    lines = ["lemma\tpos\tsynset\tstart\tend\tsentence"]
    for k in range(lemmas):
        lemma = f"bank{k}"
        for i in range(rows_per_lemma):
            before = " ".join(rng.choices(WORDS, k=3))
            sentence = f"{before} {lemma} {' '.join(rng.choices(WORDS, k=3))}."
            start = len(before) + 1
            lines.append(f"{lemma}\tn\t{lemma}.n.0{1 + i % 2}\t{start}\t{start + len(lemma)}\t{sentence}")
    path.write_text("\n".join(lines) + "\n")


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def run_case(tsv: str, queue) -> None:
    import torch

    from scratchformer.analysis.extractor import EmbeddingExtractor
    from scratchformer.analysis.sense_data import read_senses_tsv
    from scratchformer.analysis.senses import evaluate_senses
    from scratchformer.loading import build_random_scratchformer

    torch.set_num_threads(1)
    examples = read_senses_tsv(tsv)
    model, tokenizer = build_random_scratchformer(
        [e.sentence for e in examples[:2000]], d_model=384, encoder_layers=2, decoder_layers=1,
        encoder_attention_heads=6, decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536)
    extractor = EmbeddingExtractor(model, tokenizer, batch_size=64, progress=False)
    baseline = _peak_rss_mb()
    start = time.perf_counter()
    report = evaluate_senses(extractor, examples)
    queue.put({"rows": len(examples), "pairs": report.pairs, "subsampled_groups": report.subsampled_groups,
               "peak_rss_mb": round(_peak_rss_mb(), 1), "above_loaded_mb": round(_peak_rss_mb() - baseline, 1),
               "seconds": round(time.perf_counter() - start, 1),
               "last_layer_roc_auc": round(report.last_layer.roc_auc, 4)})


def measure(name: str, lemmas: int, rows_per_lemma: int, folder: Path) -> dict:
    tsv = folder / f"{name}.tsv"
    write_tsv(tsv, lemmas, rows_per_lemma)
    queue = multiprocessing.get_context("spawn").Queue()
    process = multiprocessing.get_context("spawn").Process(target=run_case, args=(str(tsv), queue))
    process.start()
    result = queue.get()
    process.join()
    return {"case": name, "lemmas": lemmas, "rows_per_lemma": rows_per_lemma, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one small case (seconds)")
    parser.add_argument("--json", default=str(HERE / "senses_memory.json"))
    parser.add_argument("--md", default=str(HERE / "senses_memory.md"))
    args = parser.parse_args()
    cases = [("600 rows, 1 lemma", 1, 600)] if args.quick else [
        ("3,000 rows, 1 lemma", 1, 3000), ("20,000 rows, 400 lemmas", 400, 50)]
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for name, lemmas, per_lemma in cases:
            rows.append(measure(name, lemmas, per_lemma, Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    from scratchformer.analysis.senses import MAX_PAIRS_PER_GROUP

    result = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
              "model": "random Scratchformer encoder, d_model 384, 2 layers (MiniLM's width)",
              "max_pairs_per_group": MAX_PAIRS_PER_GROUP, "rows": rows}
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    lines = ["# Word-sense evaluation: peak memory", "",
             f"`python benchmarks/senses_memory.py` on {result['machine']}; {result['model']}; lemmas with more than "
             f"{MAX_PAIRS_PER_GROUP:,} pairs are scored on a seeded sample of that many.", "",
             "| case | pairs scored | sampled lemmas | peak RSS (MB) | above model + data (MB) | seconds |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    lines += [f"| {r['case']} | {r['pairs']:,} | {r['subsampled_groups']} | {r['peak_rss_mb']} | "
              f"{r['above_loaded_mb']} | {r['seconds']} |" for r in rows]
    Path(args.md).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
