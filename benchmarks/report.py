"""What a run reports: the results files (JSON, merged group by group), the targets each group met or missed,
and the Markdown report rendered from the JSON, with the findings written by hand in the report itself.

The findings (why a target is missed, profiling notes, all dated) are never in code: they are the part of
``RESULTS.md`` / ``RESULTS_cuda.md`` between ``FINDINGS_START`` and ``FINDINGS_END``, which every rendering reads
back from the file it replaces and writes out again as it was. Every missed target needs an explanation there,
keyed ``<size> <dtype> <key>`` (see ``FINDINGS_TEMPLATE``); the renderer names those that have none, in the report
and on stderr.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
from pathlib import Path

from harness import CpuTimer, describe_machine
from workloads import (
    DEVICES,
    DIFFERENCES,
    DTYPE_TITLES,
    DTYPES,
    MATMUL_TARGET,
    SIZES,
    Size,
    describe_size,
    encoder_flops,
    plan,
)

RESULT_FILES = {"cpu": ("results.json", "RESULTS.md"), "cuda": ("results_cuda.json", "RESULTS_cuda.md")}
GPU_COMMAND = "python benchmarks/run.py --device cuda"
SCHEMA = 2
NOISY_SPREAD_PCT = 10.0  # median interquartile spread above which a group's ratios near 1 are called noise


def result_files(device: str) -> tuple[str, str]:
    """(JSON, Markdown) file names of a device: CPU and GPU results never overwrite each other."""
    return RESULT_FILES[device]


# --------------------------------------------------------------------------------------------------------------------
# Targets
# --------------------------------------------------------------------------------------------------------------------


def matmul_summary(size: Size, pairs: list[dict], device: str, dtype: str) -> dict:
    by_id = {p["id"]: p for p in pairs if not p.get("skipped")}
    # On a GPU a 64 x 128 encoder is far from compute-bound, and so is the overhead group's tiny model anywhere.
    target = MATMUL_TARGET if device == "cpu" and not size.overhead_bound else None
    matmul = {"n": size.matmul_n, "batch": size.encoder_batch, "length": size.long, "target": target,
              "precision": "bf16 (autocast)" if dtype == "bf16" else "fp32", "fraction": math.nan, "met": None,
              "encoders_gflops": {}}
    if "matmul" not in by_id:
        return matmul
    flop = encoder_flops(size, size.encoder_batch, size.long)
    mm = by_id["matmul"]
    matmul.update(encoder_gflop=flop / 1e9, matmul_gflops=2 * size.matmul_n**3 / mm["b"]["median_s"] / 1e9,
                  encoder_gflops=flop / mm["a"]["median_s"] / 1e9)
    matmul["fraction"] = matmul["encoder_gflops"] / matmul["matmul_gflops"]
    matmul["met"] = None if target is None else matmul["fraction"] >= target
    for p in by_id.values():
        if p["group"] == "encoder" and p["id"].startswith(f"encoder_b{size.encoder_batch}_s{size.long}_"):
            matmul["encoders_gflops"].setdefault(p["a"]["label"], flop / p["a"]["median_s"] / 1e9)
            matmul["encoders_gflops"][p["b"]["label"]] = flop / p["b"]["median_s"] / 1e9
    return matmul


def target_entries(pairs: list[dict], memory: list[dict], matmul: dict) -> list[tuple[str, dict]]:
    """(key, target) of every target of a group: the key names the target in the findings (a pair id,
    ``memory_<workload>_vs_<theirs>`` or ``matmul``)."""
    entries = [(p["id"], {"name": f"{p['title']}: {p['a']['label']} vs {p['b']['label']}", "group": p["group"],
                          "value": p["ratio"], "op": ">=", "target": p["target"], "met": p["met"]})
               for p in pairs if p["target"] is not None and not p.get("skipped")]
    entries += [(f"memory_{c['workload']}_vs_{c['theirs']}",
                 {"name": f"peak memory {c['workload']}: {c['ours']} / {c['theirs']}", "group": "memory",
                  "value": c["ratio"], "op": "<=", "target": c["target"], "met": c["met"]})
                for c in memory if c["target"] is not None]
    if matmul.get("met") is not None:
        entries.append(("matmul", {"name": "encoder forward / fp32 matmul throughput", "group": "matmul",
                                   "value": matmul["fraction"], "op": ">=", "target": matmul["target"],
                                   "met": matmul["met"]}))
    return entries


def collect_targets(pairs: list[dict], memory: list[dict], matmul: dict) -> list[dict]:
    return [target for _, target in target_entries(pairs, memory, matmul)]



# --------------------------------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------------------------------


def fmt_time(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.2f} s"


def _fmt_rate(rate: float | None) -> str:
    return "" if rate is None else f"{rate:,.0f}"


def _mark(met: bool | None, noise_reaches: bool = False) -> str:
    if met is None:
        return ""
    return "met" if met else "**missed**" + (" (within noise: per-round max >= target)" if noise_reaches else "")


def group_label(group: dict) -> str:
    return f"{group['size_name']}, {DTYPE_TITLES[group['dtype']]}"


# The issue's reference table (measured by its author, not by this benchmark): every report shows it.
ISSUE_H100 = """\
From the issue "Performance on the hardware users train on", measured by the issue author **before the changes**
(not reproduced here): one H100, PyTorch 2.11, transformers 5.23, ours vs `BartForConditionalGeneration` of the
same dimensions, CUDA-event timing, interleaved, medians; ratio = BART time / our time (> 1: ours is faster).

| size | dtype | encoder fwd 64x128 (half the rows padded) | train step 64x128 | greedy generate batch 1, 64 new tokens | batch 32 |
|---|---|---|---|---|---|
| d256, 4+4 layers, 16k vocab | fp32 | 1.03 | 0.96 | 0.77 | 1.34 |
| same | bf16 autocast | 1.07 | 0.97 | 0.78 | 1.04 |
| paper base, d512, 6+6 | fp32 | 1.08 | 0.90 | 0.87 | 0.72 |
| same | bf16 autocast | 1.05 | 1.16 | 0.91 | 0.98 |
"""

METHODS = {
    "cpu": ("Each pair runs in its own process forked from the parent before anything is computed; wall-clock "
            "time (`time.perf_counter`) per call. Peak memory: resident set of one forked child per (workload, "
            "model), see the memory table of each group."),
    "cuda": ("Every pair runs in the benchmark's process, one after the other, with fresh models; between pairs the "
             "models are dropped, `torch.cuda.empty_cache()` and `torch._dynamo.reset()` run (no fork after CUDA "
             "is initialised; spawning a child per pair would pay an interpreter and a CUDA context each time, and "
             "the GPU's caching allocator has none of the heap-layout and page-fault effects the CPU forks are "
             "for). Time per call: `torch.cuda.Event(enable_timing=True)` around the call, "
             "`torch.cuda.synchronize()` before the start event and after the end event only. `peak/call` = "
             "`torch.cuda.max_memory_allocated()` during one extra untimed call after the warm-up (peak stats "
             "reset before it), minus what was allocated before it: activations, caches, gradients and temporary "
             "buffers, not the weights or the optimizer state (both models of a pair are resident)."),
}


def _speed_rows(group: dict, with_memory: bool) -> list[str]:
    rows = []
    for p in group["pairs"]:
        a, b = p["a"], p["b"]
        if p.get("skipped"):
            rows.append(f"| {p['title']} | {a['label']} | {b['label']} | not measured: {p['skipped']} "
                        + "| " * (8 if with_memory else 7) + "|")
            continue
        target = "" if p["target"] is None else (
            f">= {p['target']:g} {_mark(p['met'], p['round_ratio_max'] >= p['target'])}")
        peaks = (a.get("peak_call_mb"), b.get("peak_call_mb"))
        memory = "" if not with_memory else " |" if None in peaks else f" {peaks[0]:.0f} / {peaks[1]:.0f} MB |"
        rows.append(
            f"| {p['title']} | {a['label']} | {b['label']} | {fmt_time(a['median_s'])} | {fmt_time(b['median_s'])} "
            f"| {_fmt_rate(a['tokens_per_s'])} | {_fmt_rate(b['tokens_per_s'])} | **{p['ratio']:.3f}** "
            f"| {p['round_ratio_median']:.3f} [{p['round_ratio_min']:.2f}, {p['round_ratio_max']:.2f}] "
            f"| {a['spread_pct']:.1f}% / {b['spread_pct']:.1f}% |{memory} {target} |")
    return rows


def _speed_section(group: dict) -> list[str]:
    with_memory = group["device"] == "cuda"
    memory = " peak/call A / B |" if with_memory else ""
    return [
        "### Speed", "",
        "`ratio` = median time of B / median time of A = A tokens/s over B tokens/s (> 1: A faster). "
        "`per-round` = median [min, max] of B_i / A_i over neighbouring calls. `spread` = interquartile range "
        "/ median.", "",
        f"| pair | A | B | A median | B median | A tokens/s | B tokens/s | ratio | per-round | spread A / B |{memory} "
        "target |",
        "|---" * (11 + with_memory) + "|",
        *_speed_rows(group, with_memory),
        *_compile_notes(group),
    ]


def _compile_notes(group: dict) -> list[str]:
    """What torch.compile did in the compiled pairs: graphs and graph breaks of each side's first call (where
    generate() compiles), and graphs compiled during the timed rounds (should be 0: else compile time is timed)."""
    notes = []
    for p in group["pairs"]:
        notes += [f"- {p['title']}: note: {note}" for note in p.get("notes", [])]
        if "compile" not in p:
            continue
        sides = [f"{p[side]['label']}: {c['graphs']} graphs, {c['graph_breaks']} graph breaks"
                 for side in ("a", "b") if (c := p["compile"][side]) is not None]
        notes.append(f"- {p['title']}: {'; '.join(sides)}; graphs compiled while timed: "
                     f"{p['compile']['graphs_while_timed']}")
    return ["", "torch.compile in the compiled pairs (first call of each side), and notes:", "", *notes] if notes else []


def _matmul_section(group: dict) -> list[str]:
    m = group["matmul"]
    if "matmul_gflops" not in m:
        return []
    target = "" if m.get("target") is None else (
        f" (target >= {100 * m['target']:.0f}%: {_mark(m['met'])})")
    return [
        "", "### Against the machine's matmul throughput", "",
        f"{m.get('precision', 'fp32')} `torch.mm` {m['n']}x{m['n']}: **{m['matmul_gflops']:.1f} GFLOP/s** (median, "
        f"timed alternately with the encoder). Our encoder forward at batch {m['batch']} x {m['length']} "
        f"({m['encoder_gflop']:.1f} GFLOP per call): {m['encoder_gflops']:.1f} GFLOP/s = "
        f"**{100 * m['fraction']:.0f}%** of it{target}.", "",
        "Encoder throughput of every encoder at that shape (same FLOP count; medians from the encoder pairs): "
        + ", ".join(f"{k} {v:.1f} GFLOP/s ({100 * v / m['matmul_gflops']:.0f}%)"
                    for k, v in m["encoders_gflops"].items()) + ".",
    ]


def _memory_section(group: dict) -> list[str]:
    if group["device"] != "cpu":
        return []
    lines = [
        "", "### Peak memory (RSS)", "",
        "One forked child process per (workload, model) builds the model, then runs the workload twice; `increment` "
        "= peak resident set (VmHWM) while running minus the child's resident set before the model was built (the "
        "interpreter and libraries, the same for all): weights, activations, caches, optimizer state. The "
        "transients of building a model from random weights are not counted. In the children glibc maps every "
        "allocation of 128 KiB or more on its own and unmaps it on free, so the resident set follows the live "
        "tensors (with its defaults the same child varied by +-15% between runs). `code` = library code paged in "
        "on first use (file-backed, shared between processes), part of the increment. Target: ours <= theirs.", "",
        "| workload | ours | theirs | ours increment | theirs increment | ratio | ours / theirs code | ours peak "
        "| theirs peak | target |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in group["memory"]:
        lines.append(
            f"| {c['workload']} | {c['ours']} | {c['theirs']} | {c['ours_increment_mb']:.1f} MB "
            f"| {c['theirs_increment_mb']:.1f} MB | **{c['ratio']:.3f}** "
            f"| {c['ours_code_mb']:.1f} / {c['theirs_code_mb']:.1f} MB | {c['ours_peak_mb']:.0f} MB "
            f"| {c['theirs_peak_mb']:.0f} MB | {'' if c['target'] is None else _mark(c['met'])} |")
    if not group["memory"] and group["size"].get("overhead_bound"):
        lines.append("| (not measured in this group: a tiny model's peak is library code paged in, not data) "
                     "| | | | | | | | | |")
    elif not group["memory"]:
        lines.append("| (not measured: --no-memory, --only, or no Linux /proc/self/clear_refs) | | | | | | | | | |")
    return lines


def group_spread(group: dict) -> float | None:
    """Median interquartile spread (% of the median) of every timed side of the group's pairs."""
    spreads = [p[side]["spread_pct"] for p in group["pairs"] if not p.get("skipped") for side in ("a", "b")]
    return statistics.median(spreads) if spreads else None


def _noise_warning(group: dict) -> list[str]:
    spread = group_spread(group)
    if spread is None or spread <= NOISY_SPREAD_PCT:
        return []
    return [f"**Noisy run: the median spread of the calls was {spread:.0f}%** (on a quiet machine 1-5%). Speed "
            "ratios within that distance of 1 are not differences; the per-round ratios (neighbouring calls) and "
            "the memory numbers are the more reliable ones here. Rerun the group on a quieter machine to settle "
            "them.", ""]


def _group_section(group: dict) -> list[str]:
    run, size = group["run"], group["size"]
    load = run["load_average"]
    padded = " (rows B/2.. of the encoder batch padded to half their length)" if size.get("encoder_pad_half") else ""
    return [
        f"## {group_label(group)}: {describe_size(size)}", "",
        f"Measured by `{run['command']}` on {run['date']} ({run['mode']} mode, {run['duration_s']:.0f} s), "
        f"scratchformer {run['versions']['scratchformer']} at commit {run['git']['commit']}"
        + (" (model files modified)" if run["git"]["model_file_modified"] else "")
        + f"; torch {run['versions']['torch']} ({run['threads']} intra-op threads), transformers "
        f"{run['versions']['transformers']}, Python {run['versions']['python']}. {describe_machine(run['machine'])}. "
        f"Timer: {run['timer']}. Load "
        f"average (1 min) before / after: {load['before'][0]:.2f} / {load['after'][0]:.2f}. {run['shared_note']}", "",
        f"Warm-up {size['warmup']} calls each, then {size['repeats']} rounds A/B/A/B ({size['slow_repeats']} for "
        f"the no-cache generation){padded}. Memory allocator during the timings: {run['allocator']}. Parameters: "
        + ", ".join(f"{k} {v / 1e6:.2f} M" for k, v in group["parameters"].items()) + ".", "",
        *_noise_warning(group), *_speed_section(group), *_matmul_section(group), *_memory_section(group), "",
    ]


# --------------------------------------------------------------------------------------------------------------------
# Findings: written by hand in the report, kept by every rendering
# --------------------------------------------------------------------------------------------------------------------


FINDINGS_START = "<!-- findings: hand-written, kept by run.py -->"
FINDINGS_END = "<!-- /findings -->"
FINDINGS_HEADING = "## Findings (written by hand)"
FINDINGS_LINK = "[the findings](#findings-written-by-hand)"
FINDINGS_TEMPLATE = f"""\
{FINDINGS_START}
{FINDINGS_HEADING}

Written by hand and dated; every run of `benchmarks/run.py` (and `--render-only`) keeps this part, between the
`findings` markers, as it is, and regenerates everything above it. Every missed target needs an explanation here: a
list item `- **<size> <dtype> <key>[, <key>...]** (YYYY-MM-DD): why`, where a key is a pair id
(`train_step_vs_bart`), a memory comparison (`memory_generate_b8_vs_bart_s2s`) or a whole target group (`encoder`,
`s2s_forward`, `train_step`, `generate`, `cache`, `compiled`, `memory`, `matmul`). "Missed targets" above names the
key of each miss; a run names on stderr, and in that list, every miss without an explanation.

### Why targets are missed

None written yet.

### Profiling notes

None written yet.
{FINDINGS_END}
"""
_FINDING = re.compile(r"^- \*\*(?P<size>[\w-]+) (?P<dtype>" + "|".join(DTYPES) + r") (?P<keys>\w+(?:, \w+)*)\*\*"
                      r"(?P<rest>.*)$", re.MULTILINE)
_DATED = re.compile(r"^ \(\d{4}-\d{2}-\d{2}[^)]*\): \S")


def read_findings(path: Path) -> str:
    """The findings part of the report at ``path``, markers included; the empty template when there is no report
    or it has no markers. ValueError when the markers are not one start before one end: better than rewriting the
    report without what was written there."""
    text = path.read_text() if path.exists() else ""
    starts, ends = text.count(FINDINGS_START), text.count(FINDINGS_END)
    if starts == ends == 0:
        return FINDINGS_TEMPLATE
    start, end = text.find(FINDINGS_START), text.find(FINDINGS_END)
    if starts != 1 or ends != 1 or end < start:
        raise ValueError(f"{path}: the findings need one {FINDINGS_START!r} line before one {FINDINGS_END!r} line; "
                         "fix the markers by hand (the report was not rewritten)")
    return text[start:end + len(FINDINGS_END)] + "\n"


def explained_keys(findings: str) -> tuple[set[tuple[str, str, str]], list[str]]:
    """((size, dtype, key) of every dated explanation in ``findings``, the explanations without a date or text)."""
    explained, undated = set(), []
    for match in _FINDING.finditer(findings):
        if not _DATED.match(match["rest"]):
            undated.append(match[0][:80])
            continue
        explained.update((match["size"], match["dtype"], key) for key in match["keys"].split(", "))
    return explained, undated


def missed_targets(results: dict, explained: set[tuple[str, str, str]]) -> list[tuple[dict, dict, str, bool]]:
    """(group, target, key, explained?) of every missed target; the key is the explanation's (a pair id before its
    target group), or the pair id to write one under."""
    missed = []
    for group in results["groups"]:
        where = (group["size_name"], group["dtype"])
        keys = {target["name"]: key for key, target in
                target_entries(group["pairs"], group["memory"], group["matmul"])}
        for target in group["targets"]:
            if target["met"]:
                continue
            candidates = [keys.get(target["name"], target["group"]), target["group"]]
            key = next((key for key in candidates if (*where, key) in explained), None)
            missed.append((group, target, key or candidates[0], key is not None))
    return missed


def finding_key(group: dict, key: str) -> str:
    return f"{group['size_name']} {group['dtype']} {key}"


def unexplained(results: dict, findings: str) -> list[str]:
    """The finding keys (``<size> <dtype> <key>``) of the missed targets that ``findings`` does not explain."""
    explained, _ = explained_keys(findings)
    return [finding_key(group, key) for group, _, key, known in missed_targets(results, explained) if not known]


def findings_problems(name: str, results: dict, findings: str) -> list[str]:
    """What a rendering of the report ``name`` warns about: misses without an explanation, undated ones."""
    _, undated = explained_keys(findings)
    missing_ones = unexplained(results, findings)
    problems = [f"{name}: {len(missing_ones)} missed target(s) without an explanation in the findings: "
                + ", ".join(f"`{key}`" for key in missing_ones)] if missing_ones else []
    return problems + [f"{name}: a finding needs a date and a text, `(YYYY-MM-DD): why`: {item}" for item in undated]


def _targets_section(results: dict, findings: str) -> list[str]:
    lines, explained = ["## Targets", ""], explained_keys(findings)[0]
    for group in results["groups"]:
        for t in group["targets"]:
            lines.append(f"- [{group_label(group)}] {t['name']}: {t['value']:.3f} (target {t['op']} {t['target']:g}) "
                         f"{_mark(t['met'])}")
    missed = missed_targets(results, explained)
    if missed:
        lines += ["", "## Missed targets: what remains and why", "",
                  f"Why each target below is missed is written by hand in {FINDINGS_LINK} at the end, under the key "
                  "given here.", ""]
    for group, t, key, known in missed:
        spread = group_spread(group) or 0
        timed = t["group"] != "memory"  # the memory children are not timings
        noisy = f"noisy run (median spread {spread:.0f}%); " if timed and spread > NOISY_SPREAD_PCT else ""
        where = f"{group['size_name']} {group['dtype']}"
        why = (f"explained in the findings under {where} `{key}`." if known else
               f"**not explained yet**: add `- **{where} {key}** (YYYY-MM-DD): why` to the findings.")
        lines.append(f"- **[{group_label(group)}] {t['name']}**: {noisy}{why}")
    return lines + [""]


def missing(device: str, results: dict | None) -> list[dict]:
    """The planned measurements of ``device`` that ``results`` lacks, with the reason where a pair was skipped."""
    measured, skipped = set(), {}
    for group in (results or {}).get("groups", []):
        for p in group["pairs"]:
            key = (group["size_name"], group["dtype"], p["id"])
            if p.get("skipped"):
                skipped[key] = p["skipped"]
            else:
                measured.add(key)
    return [{**item, "reason": skipped.get((item["size_name"], item["dtype"], item["id"]))}
            for item in plan(device) if (item["size_name"], item["dtype"], item["id"]) not in measured]


def _missing_lines(items: list[dict]) -> list[str]:
    by_pair: dict[tuple[str, str, str], list[str]] = {}
    for item in items:
        where = f"{item['size_name']} {DTYPE_TITLES[item['dtype']]}"
        by_pair.setdefault((item["title"], item["a"], item["b"]), []).append(
            where + (f" ({item['reason']})" if item["reason"] else ""))
    return [f"- {title}: {a} vs {b} -- {'; '.join(where)}" for (title, a, b), where in by_pair.items()]


def _unmeasured_section(device: str, results: dict, gpu_results: dict | None) -> list[str]:
    gpu_missing = missing("cuda", gpu_results)
    lines = ["## Not measured yet", ""]
    if gpu_results is None:
        lines += ["**GPU: none of the GPU numbers exist yet.** No GPU was available when the GPU path of this "
                  f"benchmark was written. Produce them on a CUDA machine with `{GPU_COMMAND}` (fp32 and bf16 "
                  "autocast, sizes d256 and base; writes `results_cuda.json` and `RESULTS_cuda.md` beside these "
                  "files, this report's list below updates on the next run or `--render-only`). Until then the "
                  "only GPU numbers are the issue author's table above. Planned:", ""]
    elif gpu_missing:
        lines += [f"**GPU: not measured or not supported** in `results_cuda.json` (rerun `{GPU_COMMAND}`):", ""]
    else:
        lines += ["GPU: every planned GPU measurement is in `RESULTS_cuda.md`.", ""]
    lines += _missing_lines(gpu_missing)
    quick_only = all(group["size_name"] == "quick" for group in results["groups"])  # a smoke test
    own = missing(device, results) if device == "cpu" and not quick_only else []
    if own:
        lines += ["", "**CPU: not measured or not supported** (rerun the group: `python benchmarks/run.py --sizes "
                  "<size> --threads 1`):", "", *_missing_lines(own)]
    return lines + [""]


def render_markdown(results: dict, gpu_results: dict | None = None, findings: str = FINDINGS_TEMPLATE) -> str:
    """The report of ``results``; ``findings`` is the hand-written part, as ``read_findings`` returns it."""
    device = results["device"]
    gpu_results = results if device == "cuda" else gpu_results
    machines = list(dict.fromkeys(describe_machine(g["run"]["machine"]) for g in results["groups"]))
    lines = [
        f"# Scratchformer vs Hugging Face models: benchmark results ({'GPU' if device == 'cuda' else 'CPU'})", "",
        "Generated by `benchmarks/run.py" + (" --device cuda`" if device == "cuda" else "`")
        + "; each group below names the command, date and commit of its own run. Do not edit by hand, except "
        f"{FINDINGS_LINK} at the end (between the `findings` markers), which every run keeps as written: rerun the "
        "command (`--render-only` rewrites the rest of this file from the JSON).", "",
        *([f"**No GPU numbers have been measured by this benchmark yet**: see [Not measured yet](#not-measured-yet) "
           f"for the list and the command (`{GPU_COMMAND}`), and the issue author's H100 table (before the "
           "changes) above it.", ""] if gpu_results is None else []),
        "## Machine and versions", "",
        *(f"- {m}" for m in machines), "",
        *(["The groups below were measured on different machines (each group names its own): compare ratios "
           "within a group, not absolute times across groups.", ""] if len(machines) > 1 else []),
        "## What is compared", "",
        "Every pair compares models of identical dimensions (per group below), sdpa attention unless stated, ReLU. "
        + METHODS[device], "",
        DIFFERENCES,
    ]
    for group in results["groups"]:
        lines += _group_section(group)
    lines += _targets_section(results, findings)
    lines += ["## GPU: the issue's H100 numbers (before the changes)", "", ISSUE_H100]
    lines += _unmeasured_section(device, results, gpu_results)
    return "\n".join(lines).rstrip("\n") + "\n\n" + findings


# --------------------------------------------------------------------------------------------------------------------
# Results files
# --------------------------------------------------------------------------------------------------------------------


def upgrade(results: dict) -> dict:
    """A results.json written before size groups (one CPU group at d256, fp32) in the current layout."""
    if results.get("schema") == SCHEMA:
        return results
    run = dict(results["meta"])
    size, parameters = run.pop("size"), run.pop("parameters")
    size_name = "quick" if run.get("mode") == "quick" else "d256"
    if size_name == "d256":  # the same group is now measured by this command
        run["original_command"] = run["command"]
        run["command"] = run["command"].replace("run.py", "run.py --sizes d256", 1)
    run["timer"] = CpuTimer.name
    group = {"size_name": size_name, "dtype": "fp32", "device": "cpu", "run": run, "size": size,
             "parameters": parameters, **{key: results[key] for key in ("pairs", "matmul", "memory",
                                                                          "memory_children", "targets")}}
    return {"schema": SCHEMA, "device": "cpu", "groups": [group]}


def load_results(path: Path) -> dict | None:
    return upgrade(json.loads(path.read_text())) if path.exists() else None


def merge_results(existing: dict | None, new: dict) -> dict:
    """``new``'s groups replace those of the same (size, dtype) in ``existing``; the others are kept."""
    groups = {(g["size_name"], g["dtype"]): g for g in (existing or {}).get("groups", [])}
    groups.update({(g["size_name"], g["dtype"]): g for g in new["groups"]})
    order = [(name, dtype) for name in SIZES[new["device"]] for dtype in DTYPES]
    ordered = sorted(groups.items(), key=lambda item: order.index(item[0]) if item[0] in order else len(order))
    return {"schema": SCHEMA, "device": new["device"], "groups": [group for _, group in ordered]}


def render_files(out_dir: Path) -> dict[str, dict | None]:
    """Rewrite the Markdown of every device whose JSON is in ``out_dir`` (the CPU report lists what the GPU
    results lack), keeping the findings written in it; warn on stderr about every missed target they leave
    unexplained."""
    loaded = {device: load_results(out_dir / result_files(device)[0]) for device in DEVICES}
    for device, results in loaded.items():
        if results is None:
            continue
        path = out_dir / result_files(device)[1]
        if path.exists() and FINDINGS_START not in path.read_text():
            print(f"warning: {path} had no findings part: writing an empty one", file=sys.stderr)
        findings = read_findings(path)
        path.write_text(render_markdown(results, loaded["cuda"], findings))
        for problem in findings_problems(path.name, results, findings):
            print(f"warning: {problem}", file=sys.stderr)
    return loaded


def write_results(out_dir: Path, results: dict) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / result_files(results["device"])[0]
    merged = merge_results(load_results(path), results)
    path.write_text(json.dumps(merged, indent=1) + "\n")
    render_files(out_dir)
    print(f"wrote {path} and {out_dir / result_files(results['device'])[1]}")
    return merged
