"""Would a fixed per-dimension standardisation lift the dev-set figures of ``scratchformer senses``?

Timkey & van Schijndel (EMNLP 2021) find that a few "rogue" dimensions dominate the cosine of contextual vectors and
that standardising each dimension removes them. A shipped model could carry such a step in its weights, so its
statistics must come from training text, not from the data scored: each layer's mean and standard deviation are
estimated on one seeded random word from each of ``--sentences`` lines of ``--text`` (lines of 20 to 300 characters,
so that no word falls past a model's length). Every layer is then scored three ways: raw (what ``senses`` reports),
centred (minus the mean) and standardised (minus the mean, over the deviation).

    python scripts/senses_standardised.py small minilm --data ../shared/data/wordnet_senses_dev.tsv \
        --text ../shared/data/corpus_en.txt.gz
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import torch

from scratchformer.analysis import senses as S
from scratchformer.analysis.extractor import load_extractor
from scratchformer.analysis.geometry import Standardiser
from scratchformer.analysis.geometry_data import read_sentences
from scratchformer.analysis.sense_data import read_senses_tsv
from scratchformer.analysis.words import sentence_words
from scratchformer.errors import ScratchformerError
from scratchformer.files import write_json

KINDS = ("raw", "centred", "standardised")


def text_words(path: Path, sentences: int, seed: int = 0) -> list[tuple[str, tuple[int, int]]]:
    """One seeded random word (its character span) from each of ``sentences`` random lines of 20-300 characters."""
    rng = random.Random(seed)
    lines = [line for line in read_sentences(path).sentences if 20 < len(line) < 300]
    rng.shuffle(lines)
    words = []
    for line in lines[:sentences]:
        _, start, end = rng.choice(sentence_words(line))
        words.append((line, (start, end)))
    return words


def score(vectors: torch.Tensor, data: S.ScoredPairs) -> dict[str, float]:
    """The three figures of ``senses`` from ``(occurrences, hidden)`` word vectors."""
    cosines = S.pair_cosines(vectors, data.pair_a, data.pair_b)
    return {"roc_auc": S.roc_auc(data.same, cosines),
            "roc_auc_within_group": S.within_group_roc_auc(data.same, cosines, data.pair_group),
            "nn_accuracy": S.nn_accuracy(torch.nn.functional.normalize(vectors, dim=-1), data.groups, data.senses)}


def model_scores(source: str, examples: list, data: S.ScoredPairs, words: list) -> list[dict]:
    """Per layer (learned, embedding output, contextual layers): the figures raw, centred and standardised."""
    extractor = load_extractor(source).extractor
    layers = [S.LEARNED, *range(extractor.num_layers + 1)]
    sample = torch.stack([torch.stack([w.vector for w in per]) for per in
                          extractor.word_embeddings(words, layers=layers, pooling="mean")]).double()
    standardise = Standardiser(len(layers), sample.shape[-1]).fit(sample.transpose(0, 1))  # geometry's own
    raw, _ = S._word_vectors(extractor, [examples[i] for i in data.used], layers, "mean")
    return [{"layer": layer, **{kind: score(v, data) for kind, v in
                                zip(KINDS, (raw[:, k], raw[:, k] - standardise.mean[k], standardise(raw[:, k], k)))}}
            for k, layer in enumerate(layers)]


def table(result: dict) -> str:
    lines = [f"statistics from {result['sentences']} words of {result['text']}; each cell: ROC-AUC / within lemma / 1-NN"]
    for name, rows in result["models"].items():
        lines.append(f"{name}: layer  " + "  ".join(f"{kind:>19}" for kind in KINDS))
        for row in rows:
            lines.append(f"  {str(row['layer']):>12}  " + "  ".join(
                "{roc_auc:.3f} / {roc_auc_within_group:.3f} / {nn_accuracy:.3f}".format(**row[kind]) for kind in KINDS))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help="models as senses takes them (small, minilm, a folder)")
    parser.add_argument("--data", type=Path, required=True, help="a word-sense TSV (wordnet_senses_dev.tsv)")
    parser.add_argument("--text", type=Path, required=True, help="training text, one line an example (.gz read as "
                        "gzip): where the statistics come from")
    parser.add_argument("--sentences", type=int, default=3000, help="lines sampled for the statistics, a word each")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=None, help="also write the result as JSON here")
    args = parser.parse_args(argv)
    if args.sentences < 2:
        parser.error("--sentences must be at least 2 (a standard deviation needs two words)")
    if not 0 <= args.seed < 2**32:
        parser.error(f"--seed must be in [0, 2**32 - 1], got {args.seed}")
    if args.output is not None and args.output.is_dir():
        parser.error(f"--output {args.output} is a folder: give a JSON file's path")
    try:  # a missing or unreadable file, a model that does not load: one line and exit code 2, as in the CLI
        words = text_words(args.text, args.sentences, args.seed)
        if len(words) < 2:
            parser.error(f"{args.text} has fewer than 2 lines of 20-300 characters with a word")
        examples = read_senses_tsv(args.data)
        data = S.ScoredPairs.of(examples)
        result = {"text": str(args.text), "sentences": len(words), "seed": args.seed,
                  "models": {name: model_scores(name, examples, data, words) for name in args.models}}
    except ScratchformerError as error:
        parser.error(str(error))
    print(table(result))
    if args.output:
        write_json(args.output, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
