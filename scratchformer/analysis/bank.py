"""The "bank" study behind ``scratchformer compare``: a word's learned vector against its contextual ones, by sense
(what it prints and writes: docs/embeddings.md)."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from ..errors import ScratchformerError
from ..files import write_json
from .extractor import LoadedModel, load_extractor, model_sources
from .layers import LEARNED, describe_layer, is_contextual
from .output import check_output_folder, output_folder
from .results import (  # the study's types; re-exported: `from scratchformer.analysis.bank import Study` works
    LayerSummary,
    ModelStudy,
    PairScore,
    Study,
    StudyRun,
    StudySentence,
    StudyVectors,
    number,
)
from .similarity import centred_cosine, cosine, unrelated_pair_baseline
from .words import find_word, sentence_words, shown

BANK_STUDY = Study(
    word="bank",
    sentences=[
        StudySentence("river", "Write a poem about a man fishing on a river bank."),
        StudySentence("money", "Write a poem about a man withdrawing money from a bank."),
        StudySentence("river", "The children sat on the grassy bank of the stream."),  # control, river sense
        StudySentence("money", "She deposited her salary at the bank on Monday."),  # control, money sense
    ],
    context_words=["river", "fishing", "stream", "money", "withdrawing", "salary"],
)

_STOPWORDS = set(
    "a an the and or but of on in at to from for with by about as is are was were be been it its this that these "
    "those he she they we you i his her their our my your him them me us who which what when where how not no".split()
)
MAX_CONTEXT_WORDS = 8  # picked automatically for custom sentences


def make_study(word: str | None = None, sentences: list[str] | None = None, senses: list[str] | None = None,
               context_words: list[str] | None = None) -> Study:
    """The default bank study, or one built from command-line options (``senses`` label the sentences). Checks
    the options against each other and the sentences; needs no model."""
    study = _custom_study(word, sentences, senses) if sentences else _default_study(word, senses)
    if context_words:
        _check_context_words(context_words, study)
        study.context_words = list(context_words)
    elif sentences:
        study.context_words = _pick_context_words(study)
    return study


def _default_study(word: str | None, senses: list[str] | None) -> Study:
    if senses:
        raise ScratchformerError("--sense labels the --sentence options; give the sentences too")
    if word and word != BANK_STUDY.word:
        raise ScratchformerError(f"--word {word!r} needs --sentence options (at least two containing {word!r}): "
                                 "the default sentences are about 'bank'")
    return Study(BANK_STUDY.word, list(BANK_STUDY.sentences), list(BANK_STUDY.context_words))


def _custom_study(word: str | None, sentences: list[str], senses: list[str] | None) -> Study:
    if not word:
        raise ScratchformerError("--sentence needs --word: which word of the sentences to follow")
    if len(sentences) < 2:
        raise ScratchformerError("give at least two --sentence options to compare the word across contexts")
    if senses and len(senses) != len(sentences):
        raise ScratchformerError(f"got {len(senses)} --sense label(s) for {len(sentences)} --sentence option(s); "
                                 "give one each, in the same order, or none")
    for text in sentences:
        try:
            find_word(text, word)
        except ScratchformerError as error:
            raise ScratchformerError(f"{error}. Every --sentence must contain --word {word!r} as a whole word, "
                                     "spelled the same way") from None
    labels = senses or [f"s{i + 1}" for i in range(len(sentences))]
    return Study(word, [StudySentence(s, t) for s, t in zip(labels, sentences)])


def _check_context_words(context_words: list[str], study: Study) -> None:
    words = {w for s in study.sentences for w, _, _ in sentence_words(s.text)}
    missing = [w for w in context_words if w not in words]
    if missing:
        raise ScratchformerError(f"--context-word {missing} is not a word of the study sentences; pick from "
                                 f"{sorted(words)} (spelled the same way)")


def _pick_context_words(study: Study) -> list[str]:
    """Up to ``MAX_CONTEXT_WORDS`` content words of the sentences (4+ letters, no stopwords, not the study word)."""
    seen: list[str] = []
    for sentence in study.sentences:
        for w, _, _ in sentence_words(sentence.text):
            if len(w) >= 4 and w.lower() not in _STOPWORDS and w.lower() != study.word.lower() and w not in seen:
                seen.append(w)
    return seen[:MAX_CONTEXT_WORDS]


def headline_layer(loaded: LoadedModel, layer: int) -> int:
    """``layer`` checked against the model's depth, made non-negative."""
    n = loaded.extractor.num_layers
    if not is_contextual(layer, n):
        raise ScratchformerError(f"--layer {layer!r} is out of range for {loaded.label}, which has {n} layers: use "
                                 f"1..{n} or a negative index -{n}..-1 (-1 = last)")
    return layer % (n + 1)


def sense_verdict(summary: LayerSummary) -> str:
    """The one-line answer of the study: ``senses separated: yes (same-sense 0.866 > cross-sense 0.768)``."""
    separated = summary.separated
    if separated is None:
        return "senses separated: n/a (needs two sentences of the same sense and sentences of two senses)"
    same, cross = summary.same_sense_mean, summary.cross_sense_mean
    return (f"senses separated: {'yes' if separated else 'no'} (same-sense {same:.3f} "
            f"{'>' if separated else '<='} cross-sense {cross:.3f})")


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _summarise(study: Study, vectors: StudyVectors, layers: list[Any], k: int, num_layers: int) -> LayerSummary:
    """Same-sense / cross-sense cosines of the study word at layer position ``k``, and the baseline."""
    senses = [s.sense for s in study.sentences]
    targets = [t[k].vector for t in vectors.targets]
    pool = torch.stack([w[k].vector for sentence in vectors.words for w in sentence]).mean(dim=0)  # (hidden,)
    pairs = [
        PairScore(i, j, "same sense" if senses[i] == senses[j] else "cross sense", cosine(targets[i], targets[j]),
                  centred_cosine(targets[i], targets[j], pool))
        for i in range(len(targets))
        for j in range(i + 1, len(targets))
    ]
    groups = [[(w[k].word, w[k].vector) for w in sentence if w[k].word.lower() != study.word.lower()]
              for sentence in vectors.words]
    baseline, n_pairs = unrelated_pair_baseline(groups)
    return LayerSummary(
        layer=layers[k],
        description=describe_layer(layers[k], num_layers),
        same_sense_mean=_mean([p.cosine for p in pairs if p.relation == "same sense"]),
        cross_sense_mean=_mean([p.cosine for p in pairs if p.relation == "cross sense"]),
        baseline=baseline,
        baseline_pairs=n_pairs,
        pairs=pairs,
    )


def run_study(loaded: LoadedModel, study: Study, layer: int = -1) -> tuple[ModelStudy, StudyVectors]:
    """Embed the study's word and all words of its sentences at every layer; returns the result and the raw
    vectors the plots need."""
    ex = loaded.extractor
    layer = headline_layer(loaded, layer)
    texts = [s.text for s in study.sentences]
    layers = [LEARNED, *range(ex.num_layers + 1)]
    vectors = StudyVectors(targets=ex.word_embeddings([(t, study.word) for t in texts], layers=layers),
                           words=ex.sentence_word_embeddings(texts, layers=layers), layer_index=layers.index(layer))
    per_layer = [_summarise(study, vectors, layers, k, ex.num_layers) for k in range(len(layers))]
    result = ModelStudy(
        label=loaded.label,
        source=loaded.source,
        random_init=loaded.random_init,
        note=loaded.note,
        num_layers=ex.num_layers,
        layer=layer,
        target_tokens=[t[0].location.tokens for t in vectors.targets],
        learned_cosines=per_layer[0].pairs,
        learned_vs_contextual=[cosine(t[0].vector, t[vectors.layer_index].vector) for t in vectors.targets],
        headline=per_layer[vectors.layer_index],
        per_layer=per_layer,
        verdict=sense_verdict(per_layer[vectors.layer_index]),
    )
    return result, vectors


def format_table(result: ModelStudy, study: Study) -> str:
    """The per-model table printed by ``scratchformer compare``."""
    h = result.headline
    lines = [f"=== {result.label}" + (f"  [{result.note}]" if result.note else "")]
    lines.append(f"word {study.word!r}; headline numbers: {h.description}")
    lines.append(f"{'#':>2} {'sense':<8} {'tokens':<22} {'cos(learned, contextual)':>24}  sentence")
    for i, s in enumerate(study.sentences):
        tokens = " ".join(result.target_tokens[i])
        lines.append(f"{i + 1:>2} {s.sense:<8} {tokens:<22} {result.learned_vs_contextual[i]:>24.3f}  {shown(s.text)}")
    lines.append(f"{'pair':<6} {'relation':<12} {'learned':>8} {'contextual':>10} {'centred':>8}")
    for learned, p in zip(result.learned_cosines, h.pairs):
        lines.append(f"{p.a + 1}-{p.b + 1:<4} {p.relation:<12} {learned.cosine:>8.3f} {p.cosine:>10.3f} "
                     f"{p.centred_cosine:>8.3f}")
    lines.append(
        f"contextual: same-sense {number(h.same_sense_mean)}, cross-sense {number(h.cross_sense_mean)}, baseline "
        f"(unrelated word pairs, n={h.baseline_pairs}) {number(h.baseline)}"
    )
    lines.append("per layer (same / cross / baseline): " + "  ".join(
        f"{s.layer}: {number(s.same_sense_mean)}/{number(s.cross_sense_mean)}/{number(s.baseline)}" for s in result.per_layer
    ))
    separated = [str(s.layer) for s in result.per_layer if s.separated]
    lines.append("same-sense > cross-sense at layers: " + (", ".join(separated) or "none"))
    lines.append(f"verdict: {result.verdict}")
    return "\n".join(lines)


def rotary_table(config: Any, num_positions: int) -> torch.Tensor:
    """What rotary positions do, as a table ``(positions, d_k)``: the cosines, then the sines, of the angles by which
    an encoder head turns its query/key pairs (the cosine of two rows depends on their distance only)."""
    from ..models.paper_scratchformer import RotaryEmbedding

    head_dim = config.d_model // config.encoder_attention_heads
    cos, sin = RotaryEmbedding(head_dim, config.rope_theta)(torch.arange(num_positions)[None])
    half = head_dim // 2  # cos/sin: (1, 1, positions, d_k), each angle twice ("rotate half")
    return torch.cat([cos[0, 0, :, :half], sin[0, 0, :, :half]], dim=1)


def position_table(model: Any, num_positions: int) -> tuple[torch.Tensor, str] | None:
    """``(table (positions, dims), description)`` of the additive positional encoding of ``model``; for rotary
    positions :func:`rotary_table`; ``None`` when it has neither (relative position biases)."""
    config = model.config
    if getattr(config, "model_type", "") == "scratchformer":
        if config.position_embedding_type == "sinusoidal":
            from ..models.paper_scratchformer import sinusoidal_position_encoding

            table = sinusoidal_position_encoding(num_positions, config.d_model)
            # sin (even dims) and cos (odd dims) side by side: smooth bands, not stripes alternating every column
            table = torch.cat([table[:, 0::2], table[:, 1::2]], dim=1)
            return table, "sinusoidal PE (section 3.5): sine columns (even dims), then cosine columns (odd dims)"
        if config.position_embedding_type == "rope":
            return rotary_table(config, num_positions), ("rotary positions (RoPE), nothing added: cos, then sin, "
                                                         "of each query/key pair's angle")
    for name, module in model.named_modules():
        if name.endswith("position_embeddings") and isinstance(module, torch.nn.Embedding):
            n = min(num_positions, module.num_embeddings)
            return module.weight[:n].detach().float().cpu(), f"learned position embeddings ({name})"
    return None


def write_plots(runs: list[StudyRun], study: Study, out: Path) -> dict[str, str]:
    """The study's figures into ``out``; fills each ``run.result.plots`` and returns the shared figures."""
    from .plots import plot_attention, plot_positions, plot_projection

    shared = {"projection": str(plot_projection([(r.result, r.vectors) for r in runs], study,
                                                out / "projection.png"))}
    tables = {id(run): position_table(run.loaded.extractor.model, num_positions=64) for run in runs}
    rows = [(run.result.label, *tables[id(run)]) for run in runs if tables[id(run)] is not None]
    if rows:
        shared["positional_encoding"] = str(plot_positions(rows, out / "positional_encoding.png"))
    for run in runs:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", run.result.label.split(" (")[0]).strip("-").lower() or "model"
        run.result.plots = {
            "projection": shared["projection"],
            "attention": str(plot_attention(run.result.label, run.attention,
                                            out / f"{slug}_attention.png")),
        }
        if tables[id(run)] is not None:
            run.result.plots["positional_encoding"] = shared["positional_encoding"]
    return shared


def compare_payload(study: Study, results: list[ModelStudy]) -> dict[str, Any]:
    """What ``compare.json`` holds: the study, what the corrections mean, the verdicts and each model's numbers."""
    return {
        "study": asdict(study),
        "baseline": "mean cosine of unrelated word pairs (different words from different study sentences)",
        "centred_cosine": "cosine after subtracting the mean vector of all words of the study sentences",
        "verdict": "senses separated = the mean same-sense cosine of the study word is above the mean cross-sense "
                   "cosine, at the headline layer",
        "verdicts": {r.label: r.verdict for r in results},
        "models": [asdict(r) for r in results],
    }


def _screenshot(page: Path, png: Path, quiet: bool) -> list[str]:
    """``[png name]`` after taking the page's screenshot; ``[]`` with a note when no Chromium is installed (the
    screenshot is an extra for CI artifacts, not worth failing the study for)."""
    from .report import find_chromium, screenshot_report

    if find_chromium() is None:
        if not quiet:
            print("note: no Chromium installed (apt-get install -y chromium): no screenshot of index.html")
        return []
    return [screenshot_report(page, png).name]


def run_compare(
    models: list[str] | None = None,
    *,
    study: Study | None = None,
    include_defaults: bool = True,
    layer: int = -1,
    output: str | Path = "compare_output",
    plots: bool = True,
    html: bool = False,
    screenshot: bool = False,
    quiet: bool = False,
) -> list[ModelStudy]:
    """Run the study on the default models plus ``models`` and write its files into ``output``. Options, then every
    model and ``layer`` against it, are checked before the study runs, so a mistake leaves no output half written."""
    study = study or make_study()
    sources = model_sources(models, include_defaults)
    out = check_output_folder(output, sources)  # made once there is something to write
    loaded = [load_extractor(source, texts=[s.text for s in study.sentences], with_decoder=True) for source in sources]
    for model in loaded:
        headline_layer(model, layer)
    runs = []
    for model in loaded:
        result, vectors = run_study(model, study, layer)
        maps = model.extractor.attention_maps(study.sentences[0].text) if plots or html else None  # sentence 1
        runs.append(StudyRun(model, result, vectors, maps))
        if not quiet:
            print(format_table(result, study), end="\n\n")
    output_folder(out)
    if plots or html:  # the report shows the plots
        write_plots(runs, study, out)
    results = [run.result for run in runs]
    write_json(out / "compare.json", compare_payload(study, results))
    written = ["compare.json"] + (["the plots"] if plots or html else [])
    if html:
        from .report import write_report

        written.append(write_report(runs, study, out / "index.html").name)
        if screenshot:
            written += _screenshot(out / "index.html", out / "index.png", quiet)
    if not quiet:
        for result in results:
            print(f"{result.label}: {result.verdict}")
        print(f"wrote {', '.join(written[:-1]) + ' and ' if len(written) > 1 else ''}{written[-1]} into {out}/")
    return results
