"""``scratchformer compare --html``: the whole study in one self-contained page, ``index.html`` (figures, CSS,
JavaScript and attention weights inlined), and a Chromium screenshot of it."""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import files
from ..errors import ScratchformerError
from .geometry import GEOMETRY_JSON, MEASURE_NAMES, PLOT_FILES, reference_note
from .plots import ATTENTION_CMAP, ATTENTION_GAMMA
from .report_assets import ATTENTION_JS, REPORT_CSS
from .results import number

if TYPE_CHECKING:
    from .attention import AttentionMaps, AttentionStack
    from .results import ModelStudy, Study, StudyRun

COLOUR_STOPS = 17  # samples of the colour map handed to the page (it interpolates between them)
LEGEND_TICKS = (0, 0.02, 0.1, 0.25, 0.5, 1)


def _e(value: Any) -> str:
    return html.escape(str(value))


def _rounded(t: Any) -> Any:
    return [[round(float(v), 4) for v in row] for row in t] if t.dim() == 2 else [_rounded(x) for x in t]


def _stack_data(stack: AttentionStack) -> dict[str, Any]:
    return {
        "key": stack.key,
        "title": stack.title,
        "note": stack.note,
        "layers": stack.num_layers,
        "heads": stack.num_heads,
        "query_tokens": stack.query_tokens,
        "key_tokens": stack.key_tokens,
        "query_groups": [[g.label, g.first, g.end] for g in stack.query_groups],
        "key_groups": [[g.label, g.first, g.end] for g in stack.key_groups],
        "mean": _rounded(stack.weights.mean(dim=1)),  # (layers, q, k)
        "per_head": _rounded(stack.weights),  # (layers, heads, q, k)
    }


def attention_data(label: str, maps: AttentionMaps) -> dict[str, Any]:
    """What the page's attention view reads for one model."""
    return {"label": label, "text": maps.text, "stacks": [_stack_data(s) for s in maps.stacks()]}


def colour_stops() -> list[list[int]]:
    """The PNGs' attention colour map sampled at evenly spaced points of sqrt(weight), as RGB 0-255."""
    import matplotlib

    cmap = matplotlib.colormaps[ATTENTION_CMAP]
    return [[round(255 * c) for c in cmap(i / (COLOUR_STOPS - 1))[:3]] for i in range(COLOUR_STOPS)]


def script_json(payload: Any) -> str:
    """JSON that is safe inside ``<script>``: it holds no ``<``, ``>`` or ``&`` (each is its ``\\u`` escape, which
    JSON reads back as the character), so a sentence's ``</script>`` cannot close the element, nor its ``<!--<script>``
    keep the page's own ``</script>`` from closing it."""
    text = json.dumps(payload, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{_e(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _verdict_class(verdict: str) -> str:
    return "yes" if ": yes" in verdict else "no" if ": no" in verdict else "na"


def _model_section(result: ModelStudy, study: Study) -> str:
    h = result.headline
    sentences = _table(
        ["#", "sense", "tokens of the word", "cos(learned, contextual)", "sentence"],
        [[i + 1, s.sense, " ".join(result.target_tokens[i]), number(result.learned_vs_contextual[i]), s.text]
         for i, s in enumerate(study.sentences)],
        "The learned vector is one row of the table; the contextual one depends on the sentence.")
    pairs = _table(
        ["pair", "relation", "learned", "contextual", "centred"],
        [[f"{p.a + 1}-{p.b + 1}", p.relation, number(learned.cosine), number(p.cosine), number(p.centred_cosine)]
         for learned, p in zip(result.learned_cosines, h.pairs)],
        f"Cosines of {study.word!r} between sentences (centred: after subtracting the mean word vector).")
    layers = _table(
        ["layer", "same-sense", "cross-sense", "baseline", "same > cross"],
        [[s.layer, number(s.same_sense_mean), number(s.cross_sense_mean), number(s.baseline),
          {None: "n/a", True: "yes", False: "no"}[s.separated]] for s in result.per_layer],
        "Per layer (learned = table row, 0 = embedding-layer output); baseline = unrelated word pairs.")
    note = f"<p class='note'>{_e(result.note)}</p>" if result.note else ""
    return (f"<section class='model'><h3>{_e(result.label)}</h3>{note}"
            f"<p class='verdict {_verdict_class(result.verdict)}'>{_e(result.verdict)}</p>"
            f"<p>Headline numbers: {_e(h.description)}. Same-sense {number(h.same_sense_mean)}, cross-sense "
            f"{number(h.cross_sense_mean)}, baseline {number(h.baseline)} ({h.baseline_pairs} unrelated pairs).</p>"
            f"{sentences}{pairs}{layers}</section>")


def _figure(path: str | Path, caption: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return (f"<figure><img class='zoomable' alt='{_e(caption)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{_e(caption)} <span class='hint'>(click the image to see it at full size)</span>"
            "</figcaption></figure>")


FIGURE_CAPTIONS = {
    "projection": "Learned vs contextual vectors of the study word and context words, ours beside the reference "
                  "BERT (2-D PCA per panel).",
    "positional_encoding": "What is added to each token's vector to say where it is: the sinusoids of the paper "
                           "and BERT's learned table (for rotary positions, which add nothing, the rotation of "
                           "queries and keys); cosine between positions on one range for all models.",
    "attention": "Attention in sentence 1, mean of the heads, every layer of every stack.",
}


def _figures(results: Sequence[ModelStudy], kinds: Sequence[str]) -> str:
    parts, seen = [], set()
    for result in results:
        for kind, path in result.plots.items():
            if path in seen or kind not in kinds:
                continue
            seen.add(path)
            owner = "" if kind in ("projection", "positional_encoding") else f"{result.label}: "
            parts.append(_figure(path, owner + FIGURE_CAPTIONS.get(kind, kind)))
    return "".join(parts)


def _attention_views(runs: Sequence[StudyRun]) -> str:
    return "".join(f"<div class='attention-view' data-model='{i}'>"
                   f"<h3>{_e(run.result.label)}</h3>"
                   "<div class='controls'>"
                   "<label>attention <select class='stack'></select></label>"
                   "<label>layer <select class='layer'></select></label>"
                   "<label>head <select class='head'></select></label>"
                   "</div><p class='stack-note'></p><div class='attention-grid'></div></div>"
                   for i, run in enumerate(runs))


def _legend() -> str:
    ticks = "".join(f"<span style='left:{100 * t ** ATTENTION_GAMMA:.1f}%'>{t:g}</span>" for t in LEGEND_TICKS)
    return ("<div class='legend'><div class='legend-bar'></div><div class='legend-ticks'>" + ticks + "</div>"
            "<div class='legend-label'>attention weight (square-root scale, 0 to 1, as in the PNGs)</div></div>")


def render_report(runs: Sequence[StudyRun], study: Study, geometry: str = "") -> str:
    """The page as a string (see the module docstring); ``geometry`` is :func:`geometry_section`'s HTML."""
    results = [run.result for run in runs]
    verdicts = "".join(f"<li><b>{_e(r.label)}</b>: <span class='verdict {_verdict_class(r.verdict)}'>"
                       f"{_e(r.verdict)}</span></li>" for r in results)
    sentences = "".join(f"<li><span class='sense'>{_e(s.sense)}</span> {_e(s.text)}</li>" for s in study.sentences)
    data = {"colormap": colour_stops(), "gamma": ATTENTION_GAMMA,
            "models": [attention_data(run.result.label, run.attention) for run in runs if run.attention is not None]}
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>scratchformer compare: {_e(study.word)!s} in context</title>
<style>{REPORT_CSS}</style></head>
<body>
<header><h1>Learned vs contextual embeddings: {_e(study.word)!r} in context</h1>
<p>A Transformer turns a word's fixed <em>learned</em> vector (a row of its embedding table) into a
<em>contextual</em> one that depends on the sentence. Does context pull the senses of {_e(study.word)!r} apart?
Senses are separated when the mean cosine of the word between sentences of the same sense is above the mean
cosine across senses.</p>
<ol class="sentences">{sentences}</ol>
<ul class="verdicts">{verdicts}</ul></header>
<main>
<h2>Attention, interactive</h2>
<p>Sentence 1, every model. Pick the kind of attention, the layer and one head or the mean of the heads. Rows are
queries (the token that attends), columns are keys (the tokens attended to); each row sums to 1. Hover over a cell
for its value. A word split into several tokens spans several rows and columns.</p>
{_legend()}
<div class="attention-views">{_attention_views(runs)}</div>
<h2>Tables</h2>
<div class="models">{''.join(_model_section(r, study) for r in results)}</div>
<h2>Figures</h2>
{_figures(results, ("projection", "positional_encoding"))}
<h2>Attention, every layer at once</h2>
{_figures(results, ("attention",))}
{geometry}
</main>
<footer>Written by <code>scratchformer compare --html</code>. The numbers are also in compare.json.</footer>
<script type="application/json" id="attention-data">{script_json(data)}</script>
<script>{ATTENTION_JS}</script>
</body></html>
"""


def write_report(runs: Sequence[StudyRun], study: Study, path: str | Path) -> Path:
    """Write :func:`render_report` to ``path``, with the geometry section when a ``geometry.json`` is beside it."""
    path = Path(path)
    return files.write_text(path, render_report(runs, study, geometry_section(path.parent)))


GEOMETRY_HEADER = ["layer", "self-sim.", "intra-sent.", "MEV", "baseline", "self - base", "intra - base",
                   "std: self-sim.", "std: intra", "std: MEV", "std: baseline"]


def _geometry_table(model: dict[str, Any]) -> str:
    rows = [[row["layer"], *(number(row.get(name)) for name in (
        "self_similarity", "intra_sentence_similarity", "mev", "anisotropy_baseline", "self_similarity_adjusted",
        "intra_sentence_similarity_adjusted", "self_similarity_standardised",
        "intra_sentence_similarity_standardised", "mev_standardised", "anisotropy_baseline_standardised"))]
        for row in model["rows"]]
    notes = "".join(f"<p class='note'>{_e(row['note'])}</p>" for row in model["rows"] if row.get("note"))
    caption = (f"{model['words']:,} words in {model['sentences']:,} sentences ({model['pairs']:,} pairs; MEV on "
               f"{model['mev_words']:,} words); baseline: {model['baseline_sentences']:,} sampled sentences, one "
               "word each. std = after per-dimension standardisation.")
    return (f"<section class='model'><h3>{_e(model['model'])}</h3>{_table(GEOMETRY_HEADER, rows, caption)}{notes}"
            "</section>")


def geometry_section(folder: str | Path) -> str:
    """The page's "Embedding geometry" section from ``folder/geometry.json`` and its plots; empty without one."""
    folder = Path(folder)
    try:
        payload = json.loads((folder / GEOMETRY_JSON).read_text(encoding="utf-8"))
        models = payload["models"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    figures = "".join(_figure(folder / name, f"{MEASURE_NAMES[m]} per layer, one line per model "
                              f"(dashed: standardised; {reference_note(m)})")
                      for m, name in PLOT_FILES.items() if (folder / name).is_file())
    return ("<h2>Embedding geometry: how contextual are the vectors?</h2>"
            f"<p>The measures of Ethayarajh (2019) per layer on {_e(Path(str(payload.get('data', ''))).name)}: "
            "self-similarity (a word's mean cosine across its occurrences in different sentences), intra-sentence "
            "similarity (words against their sentence's mean), maximum explainable variance (the first principal "
            "component's share of a word's variance) and the anisotropy baseline (random words of different "
            "sentences), each also minus the baseline and after per-dimension standardisation. The learned row "
            "is 1 by construction. Written by <code>scratchformer geometry</code>; the numbers are in "
            "geometry.json.</p>"
            f"<div class='models'>{''.join(_geometry_table(m) for m in models)}</div>{figures}")


CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """A Chromium executable: ``$SCRATCHFORMER_CHROMIUM``, else the first of :data:`CHROMIUM_NAMES` on the PATH
    (Debian's ``apt-get install chromium`` gives ``/usr/bin/chromium``); ``None`` when there is none."""
    given = os.environ.get("SCRATCHFORMER_CHROMIUM")
    if given:
        return given if Path(given).is_file() else None
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


def chromium_command(chromium: str | None, *args: str) -> list[str]:
    """A headless Chromium command line (``chromium``, else :func:`find_chromium`'s). ``--no-sandbox``: CI runs as
    root, where the sandbox refuses to start; the page is our own file."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise ScratchformerError("no Chromium found: install it (Debian: apt-get install -y chromium) or set "
                                 "SCRATCHFORMER_CHROMIUM to its path")
    return [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args]


PAGE_HEIGHT_ATTRIBUTE = "data-scratchformer-page-height"  # set on <html> by the measuring copy (page_height)
_MEASURE_SCRIPT = (
    "<script>(() => { const mark = () => document.documentElement.setAttribute("
    f"'{PAGE_HEIGHT_ATTRIBUTE}', String(Math.ceil(document.documentElement.scrollHeight))); "
    "mark(); addEventListener('load', mark); })();</script>")


def screenshot_report(page: str | Path, png: str | Path, width: int = 1400, height: int = 1000,
                      chromium: str | None = None, timeout: float = 120) -> Path:
    """Save a full-page screenshot of the HTML file ``page``, ``width`` pixels wide, into ``png`` with Chromium's own
    ``--screenshot``. That takes the window only, so the page is measured first (:func:`page_height`) and shot in
    a window that tall."""
    page, png = Path(page).resolve(), Path(png).resolve()
    full_height = max(height, page_height(page, width, height, chromium=chromium, timeout=timeout))
    with files.replace_file(png, suffix=".tmp.png") as temporary:  # an earlier index.png stays until it is done
        command = chromium_command(chromium, f"--window-size={width},{full_height}", f"--screenshot={temporary}",
                                   page.as_uri())
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0 or not temporary.stat().st_size:
            raise ScratchformerError(f"Chromium could not take the screenshot (exit {done.returncode}): "
                                     f"{done.stderr.strip()[-500:]}")
    return png


def page_height(page: str | Path, width: int = 1400, height: int = 1000, *, chromium: str | None = None,
                timeout: float = 120) -> int:
    """The height in CSS pixels of the HTML file ``page`` laid out in a ``width`` x ``height`` window of a headless
    Chromium: a copy of the page beside it writes its height into the DOM, which ``--dump-dom`` prints."""
    page = Path(page).resolve()
    command = chromium_command(chromium, f"--window-size={width},{height}", "--dump-dom")  # no Chromium: no copy
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".html", prefix=f".{page.stem}.measure-",
                                     dir=page.parent, delete=False) as copy:
        copy.write(page.read_text(encoding="utf-8") + _MEASURE_SCRIPT)
    try:
        done = subprocess.run([*command, Path(copy.name).as_uri()], capture_output=True, text=True, timeout=timeout)
    finally:
        Path(copy.name).unlink(missing_ok=True)
    found = re.search(rf'{PAGE_HEIGHT_ATTRIBUTE}="(\d+)"', done.stdout)
    if done.returncode != 0 or found is None:
        raise ScratchformerError(f"Chromium could not measure the page {page} (exit {done.returncode}): "
                                 f"{done.stderr.strip()[-500:]}")
    return int(found.group(1))
