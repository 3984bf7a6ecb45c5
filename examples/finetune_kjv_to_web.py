"""Fine-tune a pre-trained Scratchformer on KJV -> WEB (archaic to modern English) and report BLEU / chrF.

The verse-aligned Bible file is split by *book*. Three disjoint sets of books are held out (never trained on):
set A (Joshua, Mark, Hosea, Galatians), set B (ten other whole books, prophets and letters) and set C (eight books
where the KJV is already close to the WEB, the hardest to beat by copying). After training, every verse of each set
is translated (beam search, 4 beams) and scored by ``sacrebleu``, next to the trivial system that copies the KJV
verse unchanged, which any model must beat. The report also says *how* the outputs go wrong: length against the
reference, repeated words, names lost, how many verses are worse than the copy, and the scores per book; every
scored verse goes to a TSV beside it (``kjv_to_web_scores.tsv``), with its chrF and the copy's.

    python examples/finetune_kjv_to_web.py                                   # the shipped scratchformer-small
    python examples/finetune_kjv_to_web.py --model outputs/pretrain-small    # or a pretraining output folder
    python examples/finetune_kjv_to_web.py --score-only outputs/finetune-kjv-web --num-beams 4   # re-score, no training
    python examples/finetune_kjv_to_web.py --max-steps 50 --max-score-verses 64     # a quick look

Any other ``scratchformer train`` option (``--batch-size``, ``--learning-rate``, ``--resume`` ...) is passed on. An
``--output-dir`` that holds an earlier run is refused: ``--resume`` continues it, ``--overwrite_output_dir`` replaces it.
It runs ``scratchformer train --objective seq2seq --source-column kjv --target-column web --group-column ref
--group-pattern BOOK_OF_REF``: the Bible-specific part, what a book is, lives here, not in the training code.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "parallel_kjv_web_spa.tsv.gz"
# Three disjoint held-out sets of whole books, each from the Old and the New Testament. C is the hard one: the books
# where the KJV is closest to the WEB (copying them scores chrF 64-76), so a model must rewrite little and lose
# nothing to beat the copy.
BOOK_SETS = {
    "A": ["Joshua", "Mark", "Hosea", "Galatians"],  # 1,677 verses
    "B": ["Lamentations", "Micah", "Nahum", "Habakkuk", "Zephaniah", "Haggai", "Malachi", "Colossians", "I John",
          "II Timothy"],  # 791 verses
    "C": ["Ezra", "Daniel", "Ephesians", "Amos", "II John", "Jude", "II Peter", "II Thessalonians"],  # 1,084 verses
}
# The book of a reference is everything before "<chapter>:<verse>": "Genesis 1:1", "I Samuel 3:10", "Song of
# Solomon 2:1" -> "Genesis", "I Samuel", "Song of Solomon"
BOOK_OF_REF = r"^(.*?\S)\s+\d+[:.]\d+\s*$"
# after these, a capital letter does not mark a name
SENTENCE_MARKS = ".!?:;,(\"'\u201c\u2018"


def book_of(ref: str) -> str:
    match = re.match(BOOK_OF_REF, ref)
    return match.group(1) if match else ref


def read_verses(path: str | Path) -> list[dict[str, str]]:
    """The rows of the verse file (``ref``, ``kjv``, ``web``, ...), gzip or plain TSV."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def source_token_bias(tokenizer, source_ids, bias: float, num_beams: int):
    """A logits processor that adds ``bias`` to the scores of the tokens of each row's own source (special tokens
    excepted): a nudge towards copying, for a task where most of the output is the input."""
    import torch
    from transformers import LogitsProcessor

    special = torch.tensor(tokenizer.all_special_ids)

    class SourceTokenBias(LogitsProcessor):
        bonus = None

        def __call__(self, input_ids, scores):
            if self.bonus is None:  # (B * beams, V): row i of the beams belongs to source row i // num_beams
                in_source = torch.zeros(source_ids.shape[0], scores.shape[-1], dtype=torch.bool)
                in_source.scatter_(1, source_ids, True)
                in_source[:, special] = False
                self.bonus = (in_source.to(scores.dtype) * bias).repeat_interleave(num_beams, 0).to(scores.device)
            return scores + self.bonus

    return SourceTokenBias()


def translate(model, tokenizer, sources: list[str], generation: dict, batch_size: int, max_length: int,
              copy_bias: float = 0.0) -> list[str]:
    """The model's output for each source verse (batched by length, so little padding), in the input order."""
    import torch
    from tqdm.auto import tqdm
    from transformers import LogitsProcessorList

    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    outputs: list[str] = [""] * len(sources)
    for start in tqdm(range(0, len(order), batch_size), desc="translating", unit="batch", leave=False):
        chunk = order[start:start + batch_size]
        batch = tokenizer([sources[i] for i in chunk], return_tensors="pt", padding=True, truncation=True,
                          max_length=max_length)
        processors = LogitsProcessorList([source_token_bias(tokenizer, batch["input_ids"], copy_bias,
                                                            generation.get("num_beams", 1))] if copy_bias else [])
        with torch.inference_mode():
            ids = model.generate(**batch, max_length=max_length, logits_processor=processors, **generation)
        for i, text in zip(chunk, tokenizer.batch_decode(ids, skip_special_tokens=True)):
            outputs[i] = text.strip()
    return outputs


def _words(text: str) -> Counter:
    return Counter(re.findall(r"\w+", text.lower()))


def _stutters(text: str) -> Counter:
    """Immediate repetitions: a word twice in a row ("great great") or a word pair twice in a row ("the land the
    land"), counted."""
    words = re.findall(r"\w+", text.lower())
    return Counter(tuple(words[i:i + n]) for n in (1, 2) for i in range(len(words) - 2 * n + 1)
                   if words[i:i + n] == words[i + n:i + 2 * n])


def _repeats(text: str, reference: str) -> bool:
    """Whether ``text`` stutters (see :func:`_stutters`) where the reference does not ("holy, holy, holy" is fine
    when the reference says it too)."""
    allowed = _stutters(reference)
    return any(count > allowed[repeat] for repeat, count in _stutters(text).items())


def _missing(text: str, reference: str) -> float:
    """The fraction of the reference's words (with multiplicity) that ``text`` does not have: dropped words."""
    wanted = _words(reference)
    return sum((wanted - _words(text)).values()) / max(1, sum(wanted.values()))


def _names(source: str, reference: str) -> Counter:
    """The names a translation must carry over: capitalised words of the source that the reference has too
    ("Cyrus", "Persia", "Jerusalem", "God"), except where any word is capitalised (the verse's first word, after
    punctuation: "said, Go"), single letters ("I", "O") and words in capitals ("LORD", which the WEB renders
    "Yahweh")."""
    kept = Counter(re.findall(r"\w+", reference))
    names = Counter()
    for match in re.finditer(r"\w+", source):
        word, before = match.group(), source[:match.start()].rstrip()
        if before and before[-1] not in SENTENCE_MARKS and len(word) > 1 and word[0].isupper() \
                and not word.isupper() and kept[word]:
            names[word] += 1
    return names


def _lost_names(output: str, source: str, reference: str) -> tuple[int, int]:
    """How many of the names of :func:`_names` the output lacks, and how many there are."""
    names = _names(source, reference)
    return sum((names - Counter(re.findall(r"\w+", output))).values()), sum(names.values())


def diagnostics(sources: list[str], outputs: list[str], references: list[str]) -> dict[str, float]:
    """How the outputs go wrong, per verse: length against the reference, short outputs (dropped clauses), the
    reference words an output lacks (next to the copy's), repetitions, names lost (a copy loses none), and verses
    whose chrF is below the copy's."""
    import sacrebleu

    n = max(1, len(outputs))
    lost, names = map(sum, zip((0, 0), *(_lost_names(o, s, r) for s, o, r in zip(sources, outputs, references))))
    out_words = [len(o.split()) for o in outputs]
    ref_words = [len(r.split()) for r in references]
    worse = sum(sacrebleu.sentence_chrf(o, [r]).score < sacrebleu.sentence_chrf(s, [r]).score
                for s, o, r in zip(sources, outputs, references))
    return {"length_ratio": sum(out_words) / max(1, sum(ref_words)),
            "short_outputs": sum(o < 0.8 * r for o, r in zip(out_words, ref_words)) / n,
            "missing_reference_words": sum(_missing(o, r) for o, r in zip(outputs, references)) / n,
            "missing_reference_words_copy": sum(_missing(s, r) for s, r in zip(sources, references)) / n,
            "repetitions": sum(_repeats(o, r) for o, r in zip(outputs, references)) / n,
            "lost_names": lost / max(1, names),
            "worse_than_copy": worse / n}


def score(model, tokenizer, rows: list[dict[str, str]], generation: dict, batch_size: int,
          max_length: int, copy_bias: float = 0.0) -> dict:
    """BLEU / chrF of the model and of copying the source on ``rows``, the diagnostics, and a few examples."""
    import sacrebleu

    sources, references = [r["kjv"] for r in rows], [r["web"] for r in rows]
    outputs = translate(model, tokenizer, sources, generation, batch_size, max_length, copy_bias)

    def corpus_scores(hypotheses: list[str]) -> dict[str, float]:
        return {"bleu": sacrebleu.corpus_bleu(hypotheses, [references]).score,
                "chrf": sacrebleu.corpus_chrf(hypotheses, [references]).score}

    books: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        books.setdefault(book_of(row["ref"]), []).append(i)
    per_book = {}
    for book, indices in books.items():
        reference_of_book = [[references[i] for i in indices]]
        per_book[book] = {system: {"bleu": sacrebleu.corpus_bleu([texts[i] for i in indices], reference_of_book).score,
                                   "chrf": sacrebleu.corpus_chrf([texts[i] for i in indices], reference_of_book).score}
                          for system, texts in (("fine_tuned", outputs), ("copy_source", sources))}
    return {"verses": len(rows), "fine_tuned": corpus_scores(outputs), "copy_source": corpus_scores(sources),
            "diagnostics": diagnostics(sources, outputs, references), "per_book": per_book,
            "examples": [{"ref": r["ref"], "kjv": r["kjv"], "web": r["web"], "output": o}
                         for r, o in list(zip(rows, outputs))[:5]],
            "outputs": outputs}


def write_outputs(path: Path, sets: dict[str, list[dict[str, str]]], report: dict) -> None:
    """Every scored verse as a TSV row (set, ref, kjv, web, output, and the verse's chrF for the output and for the
    copy), to read what went wrong where."""
    import sacrebleu

    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\", lineterminator="\n")
        writer.writerow(["set", "ref", "kjv", "web", "output", "chrf", "copy_chrf"])
        for name, rows in sets.items():
            for row, output in zip(rows, report["sets"][name].pop("outputs")):
                writer.writerow([name, row["ref"], row["kjv"], row["web"], output,
                                 f"{sacrebleu.sentence_chrf(output, [row['web']]).score:.1f}",
                                 f"{sacrebleu.sentence_chrf(row['kjv'], [row['web']]).score:.1f}"])


def held_out_sets(path: str | Path, sets: dict[str, list[str]], limit: int) -> dict[str, list[dict[str, str]]]:
    """Every verse of each held-out set (at most ``limit`` per set, spread over the set, when ``limit`` > 0)."""
    rows = read_verses(path)
    chosen = {}
    for name, books in sets.items():
        verses = [r for r in rows if book_of(r["ref"]) in books]
        missing = sorted(set(books) - {book_of(r["ref"]) for r in verses})
        if missing:
            raise SystemExit(f"finetune_kjv_to_web.py: error: book(s) {missing} of set {name} are not in {path}")
        if 0 < limit < len(verses):
            verses = [verses[i * len(verses) // limit] for i in range(limit)]
        chosen[name] = verses
    return chosen


def parse_arguments(argv: list[str] | None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], add_help=True)
    parser.add_argument("--model", default=None,
                        help="pre-trained checkpoint folder (model + tokenizer); default: the shipped scratchformer-small")
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--output-dir", default=str(REPO / "outputs" / "finetune-kjv-web"))
    parser.add_argument("--book-sets", nargs="+", default=list(BOOK_SETS), choices=list(BOOK_SETS),
                        help="held-out sets of books (each scored on its own)")
    parser.add_argument("--validation-books", nargs="+", default=None,
                        help="hold out and score these books instead, as one set")
    parser.add_argument("--score-only", metavar="FOLDER", default=None,
                        help="do not train: score this fine-tuned folder (decoding options below)")
    parser.add_argument("--num-beams", type=int, default=4, help="scoring: beam size (1 = greedy; 4 scores about 2 "
                        "BLEU and 2 chrF above greedy, docs/experiments.md)")
    parser.add_argument("--length-penalty", type=float, default=1.0, help="scoring: beam search length penalty")
    parser.add_argument("--no-repeat-ngram-size", type=int, default=0,
                        help="scoring: forbid repeating any n-gram of this size in an output (0 = allowed)")
    parser.add_argument("--copy-bias", type=float, default=0.0,
                        help="scoring: add this to the log-probabilities of the source verse's own tokens (0 = off)")
    parser.add_argument("--score-batch-size", type=int, default=32)
    parser.add_argument("--max-score-verses", type=int, default=0, help="score at most this many verses per set (0 = all)")
    parser.add_argument("--report", default=None, help="where to write the scores (default "
                        "OUTPUT/kjv_to_web_scores.json; the verses go to the same name with .tsv)")
    opts, rest = parser.parse_known_args(argv)
    for option, lowest in (("num_beams", 1), ("score_batch_size", 1), ("max_score_verses", 0)):
        if getattr(opts, option) < lowest:
            parser.error(f"--{option.replace('_', '-')} must be >= {lowest}, got {getattr(opts, option)}")
    return opts, rest


def main(argv: list[str] | None = None) -> int:
    from scratchformer.errors import ScratchformerError

    opts, rest = parse_arguments(argv)
    try:  # a missing file or model, a bad option of the run: one line and exit code 2, as scratchformer train says it
        return fine_tune_and_score(opts, rest)
    except ScratchformerError as error:
        print(f"finetune_kjv_to_web.py: error: {error}", file=sys.stderr)
        return 2


def fine_tune_and_score(opts: argparse.Namespace, rest: list[str]) -> int:
    """Fine-tune the shipped model (unless ``--score-only``), then score the held-out books."""
    sets = {"custom": opts.validation_books} if opts.validation_books else {k: BOOK_SETS[k] for k in opts.book_sets}
    held_out = sorted({book for books in sets.values() for book in books})
    folder = opts.score_only
    if folder is None:
        from scratchformer.loading import pretrained_path
        from scratchformer.training import config_from_args, run_training

        options, args = config_from_args([
            "--objective", "seq2seq", "--train-files", opts.data, "--source-column", "kjv", "--target-column", "web",
            "--group-column", "ref", "--group-pattern", BOOK_OF_REF, "--validation-groups", *held_out,
            "--model", opts.model or str(pretrained_path("small")), "--output-dir", opts.output_dir,
            "--max-steps", "1500", "--batch-size", "32", "--max-source-length", "96", "--max-target-length", "96",
            "--lr-schedule", "inverse_sqrt", "--learning-rate", "2e-3", "--warmup-steps", "100",
            "--eval-steps", "500", "--save-steps", "500", "--logging-steps", "25", "--max-eval-samples", "300",
            "--generation-max-length", "96", *rest,
        ])
        if "metrics" not in run_training(options, args):
            return 0
        folder = args.output_dir
    from scratchformer.loading import load

    model, tokenizer = load(folder, task="seq2seq")
    generation = {"num_beams": opts.num_beams, "length_penalty": opts.length_penalty,
                  "no_repeat_ngram_size": opts.no_repeat_ngram_size, "do_sample": False}
    report = {"model": str(folder), "generation": generation, "copy_bias": opts.copy_bias, "sets": {}}
    scored = held_out_sets(opts.data, sets, opts.max_score_verses)
    for name, rows in scored.items():
        report["sets"][name] = {"books": sets[name], **score(model, tokenizer, rows, generation,
                                                             opts.score_batch_size, 96, opts.copy_bias)}
    report_path = Path(opts.report or Path(folder, "kjv_to_web_scores.json"))
    write_outputs(report_path.with_suffix(".tsv"), scored, report)
    print(json.dumps({k: v for k, v in report.items() if k != "sets"} | {"sets": {
        n: {k: v for k, v in s.items() if k not in ("examples", "per_book")} for n, s in report["sets"].items()}},
        indent=2))
    report_path.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
