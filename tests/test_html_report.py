"""``scratchformer compare --html``: one self-contained page, checked as a file and in a real headless browser.

The page is built from two tiny random models (a Scratchformer with 3 encoder and 2 decoder layers, like the
shipped checkpoint's unequal stacks, and a 2-layer DistilBERT), so the module runs in seconds. The browser tests
use Debian's Chromium (``apt-get install -y chromium``): driven by Playwright where it is installed (console
errors, switching the layer, a full-page screenshot), and through Chromium's own ``--dump-dom``/``--screenshot``
otherwise; the screenshot that ``compare --screenshot`` takes must be the whole page. Each skips cleanly when its tools are missing. The screenshots stay in the test's tmp dir; set
``SCRATCHFORMER_ARTIFACTS=folder`` to also copy them there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_embeddings import tiny_distilbert, tiny_scratchformer

from scratchformer.analysis.bank import BANK_STUDY, run_compare
from scratchformer.analysis.report import chromium_command, find_chromium, script_json


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    folders = []
    for name, (model, tokenizer) in {
        "scratch": tiny_scratchformer([s.text for s in BANK_STUDY.sentences], encoder_layers=3, decoder_layers=2),
        "distil": tiny_distilbert(),
    }.items():
        folder = tmp_path_factory.mktemp(name)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders.append(str(folder))
    out = tmp_path_factory.mktemp("report")
    run_compare(folders, include_defaults=False, output=out, html=True, quiet=True)
    return out / "index.html"


def keep_artifact(path: Path) -> None:
    """Copy ``path`` into ``$SCRATCHFORMER_ARTIFACTS`` when it is set (CI keeps it)."""
    folder = os.environ.get("SCRATCHFORMER_ARTIFACTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(folder) / path.name)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_report_is_one_self_contained_file(report):
    page = report.read_text(encoding="utf-8")
    parser = _Tags()
    parser.feed(page)
    tags = parser.tags
    assert not [t for t in tags if t[0] == "link"], "stylesheets must be inlined"
    assert all("src" not in attrs for tag, attrs in tags if tag == "script"), "scripts must be inlined"
    images = [attrs["src"] for tag, attrs in tags if tag == "img"]
    assert images and all(src.startswith("data:image/png;base64,") for src in images)
    assert len(images) == len({p.name for p in report.parent.glob("*.png")})  # every plot, once
    assert not re.search(r"(src|href)\s*=\s*['\"]?(https?:)?//", page), "nothing may load from the network"
    # the tables with the verdicts, and the attention data of both models
    assert page.count("senses separated:") >= 4  # the summary and each model's table
    data = json.loads(re.search(r'<script type="application/json" id="attention-data">(.*?)</script>', page,
                                re.S).group(1))
    scratch, distil = data["models"]
    assert [s["key"] for s in scratch["stacks"]] == ["encoder", "decoder", "cross"]
    assert [s["layers"] for s in scratch["stacks"]] == [3, 2, 2]
    assert "teacher forcing" in scratch["stacks"][1]["note"]
    assert [s["key"] for s in distil["stacks"]] == ["encoder"]


def test_sentences_that_look_like_markup_cannot_end_the_page_s_data_script():
    """A sentence's ``</script>`` would close the data's element; its ``<!--<script>`` would put the tokenizer into
    the double-escaped state, where the page's own ``</script>`` no longer closes it (the rest of the page becomes
    script). The data holds no ``<`` at all, and reads back the same."""
    payload = {"text": "<!--<script> the bank </script> & <b>", "tokens": ["</", "<!--", "a&b"]}
    text = script_json(payload)
    assert not set("<>&") & set(text)
    assert json.loads(text) == payload


def _colours(page, view: int) -> list[str]:
    return page.eval_on_selector_all(f".attention-view[data-model='{view}'] .cell",
                                     "cells => cells.map(c => c.style.background)")


def test_report_renders_in_chromium_and_the_layer_switch_changes_the_view(report, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium installed (Debian: apt-get install -y chromium)")
    errors: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(report.resolve().as_uri())
            views = page.locator(".attention-view")
            assert views.count() == 2
            ours = views.nth(0)
            assert ours.locator("select.stack option").count() == 3  # encoder self, decoder self, cross
            assert views.nth(1).locator("select.stack option").count() == 1  # an encoder: its self-attention only
            before = _colours(page, 0)
            assert len(before) == len(json.loads(page.eval_on_selector(
                "#attention-data", "e => e.textContent"))["models"][0]["stacks"][0]["query_tokens"]) ** 2
            ours.locator("select.layer").select_option("1")
            assert ours.get_attribute("data-layer") == "2"
            after = _colours(page, 0)
            assert after != before, "switching the layer must change the view"
            ours.locator("select.head").select_option("0")
            assert ours.get_attribute("data-head") == "0" and _colours(page, 0) != after
            ours.locator("select.stack").select_option("2")
            assert ours.get_attribute("data-stack") == "cross"
            assert "teacher forcing" in ours.locator(".stack-note").inner_text()
            assert ours.locator("select.layer option").count() == 2  # the decoder's own layer count
            shot = tmp_path / "index_report.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert not errors, errors
    assert shot.stat().st_size > 10_000
    keep_artifact(shot)


def test_report_renders_with_chromium_alone(report, tmp_path):
    """Without Playwright: Chromium's own --dump-dom shows the script ran (cells drawn, no error logged)."""
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium installed (Debian: apt-get install -y chromium)")
    done = subprocess.run(chromium_command(chromium, "--enable-logging=stderr", "--v=0", "--dump-dom",
                                           report.resolve().as_uri()),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert len(re.findall(r'class="cell', dom)) > 100 and 'data-layer="1"' in dom
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line and "ERROR" in line.upper()]
    assert not console, console


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG, from its IHDR chunk."""
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and header[12:16] == b"IHDR"
    return struct.unpack(">II", header[16:24])


def test_the_screenshot_is_the_whole_page(report, tmp_path):
    """``compare --screenshot`` saves the whole page, not a 1400x2400 window cut inside the first figure. The page's
    height is measured by Playwright where it is installed (a second opinion), else by the same measuring step."""
    from scratchformer.analysis.report import page_height, screenshot_report

    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium installed (Debian: apt-get install -y chromium)")
    before = sorted(report.parent.iterdir())
    shot = screenshot_report(report, tmp_path / "index_chromium.png")
    assert sorted(report.parent.iterdir()) == before  # the measuring copy of the page is gone
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        height = page_height(report, 1400)
    else:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(report.resolve().as_uri())
                height = page.evaluate("document.documentElement.scrollHeight")
            finally:
                browser.close()
    assert height > 2400  # the page is longer than the old fixed window, so the test tells the two apart
    assert png_size(shot) == (1400, height)
    assert shot.stat().st_size > 10_000
    keep_artifact(shot)


def test_without_chromium_the_screenshot_is_one_clear_error_and_leaves_nothing(tmp_path, monkeypatch):
    """No Chromium (``SCRATCHFORMER_CHROMIUM`` names no file, so the PATH is not searched): one
    ``ScratchformerError`` saying how to install it, no screenshot, and no measuring copy left beside the page."""
    from scratchformer.analysis.report import screenshot_report
    from scratchformer.errors import ScratchformerError

    monkeypatch.setenv("SCRATCHFORMER_CHROMIUM", str(tmp_path / "no-such-chromium"))
    page = tmp_path / "index.html"
    page.write_text("<html><body>bank</body></html>", encoding="utf-8")
    with pytest.raises(ScratchformerError, match=r"no Chromium found: install it .* SCRATCHFORMER_CHROMIUM"):
        screenshot_report(page, tmp_path / "index.png")
    with pytest.raises(ScratchformerError, match="no Chromium found"):
        chromium_command(None, "--dump-dom", page.as_uri())
    assert sorted(path.name for path in tmp_path.iterdir()) == ["index.html"]
