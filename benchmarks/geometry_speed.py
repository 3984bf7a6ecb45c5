"""How long ``scratchformer geometry`` takes: the documented run, and corpus runs of growing size (ours only: no peer).

    python benchmarks/geometry_speed.py            # the dev set with small + MiniLM (3 runs), corpus 5k/10k/20k
    python benchmarks/geometry_speed.py --quick    # 200 dev sentences, --model small, one run (what the test runs)

Each run is the command a user types (``python -m scratchformer geometry ...``, plots included) in a fresh process,
so imports and model loading count. We report the wall time (the median where a case runs more than once), the
process's CPU time and peak resident set (``os.wait4``), and the 1-minute load average before and after each run:
on a shared machine the wall time is mostly other people's work, and the load says how much. The corpus cases
(``--model small``) take sentences of 5 to 60 words from ``corpus_en.txt.gz`` (paragraphs in a seeded order, split
after ``.``, ``!`` or ``?``, as docs/embeddings.md describes) to show that the time grows linearly with the sentences:
seconds per 1,000 sentences should stay flat. Writes ``benchmarks/geometry_speed.json`` and ``.md`` (or
``--json``/``--md``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "data"
DEV_SET = DATA / "wordnet_senses_dev.tsv"
CORPUS = DATA / "corpus_en.txt.gz"


def corpus_sentences(count: int, corpus: Path = CORPUS) -> list[str]:
    """``count`` sentences of 5 to 60 words: the corpus's paragraphs in a seeded random order, split after . ! ?"""
    with gzip.open(corpus, "rt", encoding="utf-8") as handle:
        paragraphs = [line.strip() for line in handle if line.strip()]
    random.Random(0).shuffle(paragraphs)
    sentences: list[str] = []
    for paragraph in paragraphs:
        sentences += [s for s in re.split(r"(?<=[.!?])\s+", paragraph) if 5 <= len(s.split()) <= 60]
        if len(sentences) >= count:
            break
    return sentences[:count]


def one_run(data: Path, models: list[str], out: Path, extra: list[str]) -> dict:
    """The command once, in a fresh process: wall and CPU seconds, peak RSS, load before and after."""
    command = [sys.executable, "-m", "scratchformer", "geometry", "--data", str(data), "--output", str(out), *extra]
    for model in models:
        command += ["--model", model]
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    with open(out.parent / f"{out.name}.log", "w+") as log:  # a file, not a pipe: nothing to drain while waiting
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(process.pid, 0)  # reaps the child with its own resource usage
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        if process.returncode != 0:
            sys.exit(f"{' '.join(command)} failed ({process.returncode}):\n{log.read()[-4000:]}")
    report = json.loads((out / "geometry.json").read_text())
    return {"wall_s": round(wall, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_mb": round(usage.ru_maxrss / 1024), "load_before": round(load_before, 2),
            "load_after": round(os.getloadavg()[0], 2), "sentences": report["sentences"],
            "models": [m["model"].split(" (")[0] for m in report["models"]],
            "words": [m["words"] for m in report["models"]], "pairs": [m["pairs"] for m in report["models"]]}


def measure(name: str, data: Path, models: list[str], repeats: int, folder: Path, extra: list[str]) -> dict:
    runs = [one_run(data, models, folder / f"{re.sub(r'[^a-z0-9]+', '-', name)}-{i}", extra) for i in range(repeats)]
    for run in runs:
        print(f"{name}: {json.dumps(run)}", flush=True)
    median = statistics.median(r["wall_s"] for r in runs)
    return {"case": name, "models": runs[0]["models"], "sentences": runs[0]["sentences"], "runs": runs,
            "median_wall_s": median, "wall_s_per_1000_sentences": round(1000 * median / runs[0]["sentences"], 2)}


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def markdown(result: dict) -> str:
    lines = ["# `scratchformer geometry`: time", "",
             f"`{result['command']}` on {result['machine']}, {result['date']}, commit {result['commit']}; "
             f"OMP_WAIT_POLICY of the command: {result['omp_wait_policy']}. Each run is a fresh "
             "`python -m scratchformer geometry` process (imports, model loading and plots included).", "",
             "| case | models | sentences | wall, median | runs (s) | CPU (s) | peak RSS (MB) | s per 1,000 sentences "
             "| load (1 min) before / after |",
             "| --- | --- | ---: | ---: | --- | --- | --- | ---: | --- |"]
    for case in result["cases"]:
        runs = case["runs"]
        lines.append(
            f"| {case['case']} | {' + '.join(case['models'])} | {case['sentences']:,} | {case['median_wall_s']:.1f} s "
            f"| {', '.join(str(r['wall_s']) for r in runs)} | {', '.join(str(r['cpu_s']) for r in runs)} | "
            f"{max(r['peak_rss_mb'] for r in runs)} | {case['wall_s_per_1000_sentences']} | "
            f"{', '.join(str(r['load_before']) + ' / ' + str(r['load_after']) for r in runs)} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 dev-set sentences, --model small, once (seconds)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of the documented case (the median is reported)")
    parser.add_argument("--sizes", default="5000,10000,20000", help="corpus cases, comma-separated sentence counts")
    parser.add_argument("--json", default=str(HERE / "geometry_speed.json"))
    parser.add_argument("--md", default=str(HERE / "geometry_speed.md"))
    args = parser.parse_args()
    if not DEV_SET.is_file():
        sys.exit(f"{DEV_SET} not found (the development data in ../shared/data)")
    cases: list[dict] = []
    result = {"command": " ".join(["python benchmarks/geometry_speed.py", *sys.argv[1:]]),
              "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": _commit(),
              "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "PASSIVE (the command's default)"),
              "cases": cases}

    def run(*case) -> None:  # the files are rewritten after each case: a long run that is cut keeps what it measured
        cases.append(measure(*case))
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
        Path(args.md).write_text(markdown(result))

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.quick:
            run("dev set, first 200 sentences", DEV_SET, ["small"], 1, folder,
                ["--max-sentences", "200", "--min-occurrences", "2", "--no-plots"])
        else:
            run("dev set, the documented run", DEV_SET, [], args.repeats, folder, [])
            for size in [int(s) for s in args.sizes.split(",") if s.strip()]:
                data = folder / f"corpus-{size}.txt"
                data.write_text("\n".join(corpus_sentences(size)) + "\n", encoding="utf-8")
                run(f"corpus, {size:,} sentences", data, ["small"], 1, folder, [])
    print(markdown(result))


if __name__ == "__main__":
    main()
