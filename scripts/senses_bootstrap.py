"""How sure are the dev-set figures of ``scratchformer senses``? A paired bootstrap over the lemma groups.

The pairs and the 1-NN queries of one lemma are not independent, so the unit that is resampled is the group: each of
``--resamples`` draws takes as many groups as the data has, with replacement, and scores every model on the same
draw. For each model it gives the last layer's (or ``--layer``'s) ROC-AUC, within-lemma ROC-AUC and 1-NN accuracy
with a 95 % interval; for each model after the first, its difference to the first with a 95 % interval and the
share of draws in which it is ahead. A difference whose interval holds 0 is one the data cannot tell from chance.
``--words split`` (or ``whole``) scores only the lemmas that the first model's tokenizer splits into several tokens
in most of their occurrences (or keeps whole), so that a gap can be placed on the tokenizer or on the model.

    python scripts/senses_bootstrap.py small outputs/run minilm --data ../shared/data/wordnet_senses_dev.tsv
    python scripts/senses_bootstrap.py small minilm --data ../shared/data/wordnet_senses_dev.tsv --words split
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from scratchformer.analysis import senses as S
from scratchformer.analysis.extractor import load_extractor
from scratchformer.analysis.sense_data import read_senses_tsv
from scratchformer.errors import ScratchformerError
from scratchformer.files import write_json

FIGURES = ("roc_auc", "roc_auc_within_group", "nn_accuracy")


def model_parts(examples: list, data: S.ScoredPairs, source: str, layer: int) -> dict:
    """One model's per-pair cosines, per-group ROC-AUCs, per-occurrence 1-NN hits and the number of tokens each
    occurrence's word takes, at ``layer``."""
    extractor = load_extractor(source).extractor
    layer = layer if layer >= 0 else extractor.num_layers + 1 + layer
    raw, token_ids = S._word_vectors(extractor, [examples[i] for i in data.used], [layer], "mean")
    cosines = S.pair_cosines(raw[:, 0], data.pair_a, data.pair_b)
    return {"cosines": cosines, "layer": layer, "pieces": np.array([len(ids) for ids in token_ids]),
            "groups": S.group_roc_aucs(data.same, cosines, data.pair_group, len(data.groups)),
            "hits": S.nn_correct(torch.nn.functional.normalize(raw[:, 0], dim=-1), data.groups, data.senses)}


def figures(data: S.ScoredPairs, pairs_of: list[np.ndarray], parts: dict, draw: np.ndarray) -> np.ndarray:
    """The three figures on the groups ``draw`` (indices, repeats allowed); ``pairs_of`` lists each group's pairs.
    NaN for a figure the draw cannot give (no pair of one kind): such draws are left out of that figure's interval."""
    pairs = np.concatenate([pairs_of[g] for g in draw])
    members = np.concatenate([data.groups[g] for g in draw])
    same, within = data.same[pairs], parts["groups"][draw]
    return np.array([S.roc_auc(same, parts["cosines"][pairs]) if 0 < same.sum() < len(same) else np.nan,
                     np.nanmean(within) if np.isfinite(within).any() else np.nan, parts["hits"][members].mean()])


def split_groups(data: S.ScoredPairs, pieces: np.ndarray) -> np.ndarray:
    """``(groups,)`` bool: the lemma's word takes several tokens in most of its occurrences (``pieces`` per
    occurrence, as :func:`model_parts` counts them)."""
    return np.array([(pieces[members] > 1).mean() > 0.5 for members in data.groups])


def bootstrap(data: S.ScoredPairs, parts: dict[str, dict], resamples: int = 2000, seed: int = 0,
              groups: np.ndarray | None = None) -> dict:
    """Each model's figures with 95 % intervals, and each later model's paired difference to the first; on the
    lemma groups ``groups`` (indices) only, when given."""
    pair_group = data.pair_group
    pairs_of = [np.flatnonzero(pair_group == g) for g in range(len(data.groups))]
    everything = np.arange(len(data.groups)) if groups is None else np.asarray(groups)
    rng = np.random.default_rng(seed)
    draws = [everything[rng.integers(0, len(everything), len(everything))] for _ in range(resamples)]
    point = {name: figures(data, pairs_of, p, everything) for name, p in parts.items()}
    drawn = {name: np.array([figures(data, pairs_of, p, draw) for draw in draws]) for name, p in parts.items()}
    first = next(iter(parts))
    result = {"groups": len(everything), "resamples": resamples, "seed": seed, "baseline": first, "models": {}}
    for name in parts:
        low, high = np.nanpercentile(drawn[name], [2.5, 97.5], axis=0)
        entry = {"layer": parts[name]["layer"], **{figure: {"value": float(v), "low": float(lo), "high": float(hi)}
                                                   for figure, v, lo, hi in zip(FIGURES, point[name], low, high)}}
        if name != first:
            diff = drawn[name] - drawn[first]
            low, high = np.nanpercentile(diff, [2.5, 97.5], axis=0)
            ahead = (diff > 0).sum(axis=0) / np.isfinite(diff).sum(axis=0)  # among the draws that give the figure
            entry["minus_baseline"] = {figure: {"value": float(v), "low": float(lo), "high": float(hi),
                                                "ahead_share": float(share)}
                                       for figure, v, lo, hi, share in zip(FIGURES, point[name] - point[first], low,
                                                                           high, ahead)}
        result["models"][name] = entry
    return result


def table(result: dict) -> str:
    words = {"split": f" (words that {result['baseline']}'s tokenizer splits)",
             "whole": f" (words that {result['baseline']}'s tokenizer keeps whole)"}.get(result.get("words"), "")
    lines = [f"paired bootstrap over {result['groups']} lemma groups{words}, {result['resamples']} draws; "
             "95 % intervals"]
    for name, entry in result["models"].items():
        lines.append(f"{name} (layer {entry['layer']}): " + "  ".join(
            f"{figure} {entry[figure]['value']:.4f} [{entry[figure]['low']:.4f}, {entry[figure]['high']:.4f}]"
            for figure in FIGURES))
        for figure, d in entry.get("minus_baseline", {}).items():
            lines.append(f"    {figure} minus {result['baseline']}: {d['value']:+.4f} [{d['low']:+.4f}, "
                         f"{d['high']:+.4f}], ahead in {d['ahead_share']:.0%} of draws")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help="models as senses takes them (small, minilm, a folder); the first "
                        "is the baseline")
    parser.add_argument("--data", type=Path, required=True, help="a word-sense TSV (wordnet_senses_dev.tsv)")
    parser.add_argument("--layer", type=int, default=-1, help="the layer scored (-1: the last)")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--words", choices=("all", "split", "whole"), default="all", help="only the lemmas the "
                        "first model's tokenizer splits into several tokens, or keeps whole (in most occurrences)")
    parser.add_argument("--output", type=Path, default=None, help="also write the result as JSON here")
    args = parser.parse_args(argv)
    if args.resamples < 1:
        parser.error("--resamples must be at least 1")
    if len(set(args.models)) < len(args.models):
        parser.error("each model once: the results are keyed by the name given")
    check_seed_and_output(parser, args)
    try:  # a missing or bad file, a model that does not load, a layer it lacks: one line and exit code 2
        examples = read_senses_tsv(args.data)
        data = S.ScoredPairs.of(examples)
        parts = {name: model_parts(examples, data, name, args.layer) for name in args.models}
    except ScratchformerError as error:
        parser.error(str(error))
    groups = None
    if args.words != "all":
        split = split_groups(data, parts[args.models[0]]["pieces"])
        groups = np.flatnonzero(split if args.words == "split" else ~split)
        if len(groups) == 0:
            parser.error(f"no lemma group is {args.words} by the tokenizer of {args.models[0]}")
    result = {**bootstrap(data, parts, args.resamples, args.seed, groups), "words": args.words}
    print(table(result))
    if args.output:
        write_json(args.output, result)
    return 0


def check_seed_and_output(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Before any model loads: a seed numpy takes, and an ``--output`` that is a file (not a folder) in a folder."""
    if not 0 <= args.seed < 2**32:
        parser.error(f"--seed must be in [0, 2**32 - 1] (the seeds numpy takes), got {args.seed}")
    if args.output is not None and (args.output.is_dir() or not args.output.parent.is_dir()):
        parser.error(f"--output {args.output}: give a JSON file's path in an existing folder")


if __name__ == "__main__":
    raise SystemExit(main())
