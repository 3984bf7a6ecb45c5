"""The PNG figures of ``scratchformer compare`` (the bank study) and ``scratchformer senses``.

Every figure is drawn with matplotlib's non-interactive Agg backend; matplotlib is imported on first use
(:func:`pyplot`), so importing this module stays cheap. The functions take results, not models: the numbers come
from :mod:`~scratchformer.analysis.bank` and :mod:`~scratchformer.analysis.senses`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from .attention import AttentionMaps
    from .bank import ModelStudy, Study, StudyVectors
    from .senses import SenseReport


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (files only, no window)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | Path, dpi: int) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path


# ----------------------------------------------------------------------------------------------------------------
# The bank study: projection of learned and contextual vectors
# ----------------------------------------------------------------------------------------------------------------


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
            label = f"{study.word} ({members[0] + 1}: {study.sentences[members[0]].sense})"
        else:
            label = f"{study.word} (sentences {', '.join(str(i + 1) for i in members)})"
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
                points.append((w.vector, w.word if k == 0 else f"{w.word} ({i + 1})", study.sentences[i].sense))
    return points


def _projection_panel(ax: Any, study: Study, vectors: StudyVectors, k: int, colours: dict[str, Any]) -> None:
    targets, context = _target_points(study, vectors, k), _context_points(study, vectors, k)
    xy = pca_2d(torch.stack([p[0] for p in targets + context])).numpy()  # (points, 2)
    for (x, y), (_, label, sense) in zip(xy, targets):
        ax.scatter(x, y, s=120, marker="*", color=colours.get(sense, "black"), edgecolor="black", zorder=3)
        ax.annotate(label, (x, y), fontsize=8, xytext=(4, 4), textcoords="offset points")
    for (x, y), (_, label, sense) in zip(xy[len(targets) :], context):
        ax.scatter(x, y, s=40, color=colours[sense], alpha=0.6)
        ax.annotate(label, (x, y), fontsize=8, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.grid(alpha=0.3)


def plot_projection(result: ModelStudy, study: Study, vectors: StudyVectors, path: str | Path) -> Path:
    """Two PCA panels: learned vectors (one point per distinct token sequence) and contextual vectors."""
    plt = pyplot()
    colours = {s: plt.cm.tab10(i) for i, s in enumerate(sorted({s.sense for s in study.sentences}))}
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    _projection_panel(axes[0], study, vectors, 0, colours)
    axes[0].set_title("learned input embeddings (table rows)\n(the same token is the same point in every sentence)",
                      fontsize=10)
    _projection_panel(axes[1], study, vectors, vectors.layer_index, colours)
    axes[1].set_title(f"contextual vectors, layer {result.layer}", fontsize=10)
    fig.suptitle(f"{result.label}: {study.word!r} in context (PCA per panel; colour = sense of the sentence)",
                 fontsize=11)
    return _save(fig, path, dpi=110)


# ----------------------------------------------------------------------------------------------------------------
# The bank study: positional encoding and attention
# ----------------------------------------------------------------------------------------------------------------


def plot_positions(label: str, table: torch.Tensor, description: str, path: str | Path) -> Path:
    """Heatmap of a ``(positions, dims)`` positional-encoding table, and the cosine between positions."""
    plt = pyplot()
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
    fig.suptitle(f"{label}: positional encoding, first {table.shape[0]} positions", fontsize=11)
    return _save(fig, path, dpi=110)


def readable_tokens(tokens: Sequence[str], tokenizer: Any) -> list[str]:
    """Token labels for axes: each token decoded on its own ('Ġbank' -> 'bank', 'bank</w>' -> 'bank')."""
    labels = []
    for token in tokens:
        try:
            labels.append(tokenizer.convert_tokens_to_string([token]).strip() or token)
        except (TypeError, ValueError, KeyError):
            labels.append(token)
    return labels


def _attention_rows(maps: AttentionMaps, tokenizer: Any) -> list[tuple[str, torch.Tensor, list[str], list[str]]]:
    """``(title, (layers, heads, q, k) maps, query labels, key labels)`` per kind of attention."""
    tokens = readable_tokens(maps.tokens, tokenizer)
    rows = [("encoder self-attention", maps.encoder, tokens, tokens)]
    if maps.decoder is not None:
        decoder_tokens = readable_tokens(maps.decoder_tokens, tokenizer)
        rows.append(("decoder self-attention", maps.decoder, decoder_tokens, decoder_tokens))
        rows.append(("cross-attention (decoder -> encoder)", maps.cross, decoder_tokens, tokens))
    return rows


def plot_attention(label: str, maps: AttentionMaps, tokenizer: Any, path: str | Path) -> Path:
    """Head-averaged attention per layer: encoder self-attention, and for an encoder-decoder decoder
    self-attention (decoder fed the sentence shifted right) and cross-attention."""
    plt = pyplot()
    rows = _attention_rows(maps, tokenizer)
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
    fig.suptitle(f"{label}: attention (0 to 1) for {' '.join(rows[0][2])!r}", fontsize=10)
    return _save(fig, path, dpi=100)


# ----------------------------------------------------------------------------------------------------------------
# Word senses
# ----------------------------------------------------------------------------------------------------------------


def plot_senses(reports: Sequence[SenseReport], path: str | Path) -> Path:
    """ROC-AUC and 1-NN accuracy per layer, one line per model (PNG)."""
    plt = pyplot()
    fig, (ax_auc, ax_nn) = plt.subplots(1, 2, figsize=(12, 4.5))
    for report in reports:
        x = list(range(len(report.layers)))
        line, = ax_auc.plot(x, [s.roc_auc for s in report.layers], marker="o", label=report.model)
        ax_auc.plot(x, [s.roc_auc_centred for s in report.layers], linestyle=":", color=line.get_color(),
                    label=f"{report.model}, mean-centred")
        ax_nn.plot(x, [s.nn_accuracy for s in report.layers], marker="o", label=report.model)
    longest = max(reports, key=lambda r: len(r.layers))
    labels = ["learned", "0\n(emb. out)", *[str(s.layer) for s in longest.layers[2:]]]
    for ax in (ax_auc, ax_nn):
        ax.set_xticks(range(len(labels)), labels)
        ax.set_xlabel("layer (learned = raw embedding row; 0 = embedding-layer output)")
        ax.grid(alpha=0.3)
    first = reports[0]
    ax_auc.axhline(0.5, color="grey", linestyle="--", label="chance / learned by construction (0.5)")
    ax_auc.set_ylabel("ROC-AUC, same vs different sense")
    ax_auc.set_title(f"Word-sense pairs ({first.pairs} pairs, {first.pooling} of sub-tokens)")
    ax_nn.axhline(first.nn_chance, color="grey", linestyle="--", label=f"chance ({first.nn_chance:.3f})")
    ax_nn.set_ylabel("1-NN sense accuracy")
    ax_nn.set_title(f"Nearest other occurrence ({first.nn_queries} queries)")
    ax_auc.legend(fontsize=8)
    ax_nn.legend(fontsize=8)
    return _save(fig, path, dpi=120)
