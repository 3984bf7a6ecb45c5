"""scripts/build_corpus.py: cleaning and assembly on fixture files laid out as the packages install them (no
installs, no network), and a small real run where a source package is already on the machine."""

from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT

_spec = importlib.util.spec_from_file_location("build_corpus", REPO_ROOT / "scripts" / "build_corpus.py")
bc = importlib.util.module_from_spec(_spec)
sys.modules["build_corpus"] = bc  # dataclasses look the module up by name
_spec.loader.exec_module(bc)

LONG = " ".join(f"Sentence number {i} says something plain about the weather today." for i in range(40))
HTML = f"""<html><head><title>collections</title><script>var x = 1;</script></head><body>
<div class="related"><a href="index.html">Prev</a> <a href="next.html">Next</a></div>
<h1>collections &mdash; Container datatypes<a class="headerlink" href="#x">&para;</a></h1>
<p>This module implements <em>specialized</em> container datatypes providing alternatives to the built-in
containers.[1]</p>
<dl><dt class="sig sig-object py">class ChainMap(*maps)</dt>
<dd><p>A ChainMap groups multiple dicts together to create a single, updateable view of them.</p></dd></dl>
<div class="highlight"><pre>for key in d:
    print(key, "is a key in the mapping", d[key], "and that is that.")</pre></div>
<p>This module implements specialized container datatypes providing alternatives to the built-in containers.</p>
<table><tr><td>deque</td><td>list-like container with fast appends</td></tr></table>
<p>Permission is granted to copy, distribute and modify this document under the terms of the licence.</p>
<p>{LONG}</p>
<p>The quick brown fox jumps over the lazy dog near the river bank.</p>
</body></html>"""
POD = """=head1 NAME

perlintro - a brief introduction

=head1 DESCRIPTION

This document gives you a I<quick> overview of the Perl language, see L<perlsyn|perlsyn> and C<< $a <=> $b >>.

    my $x = 1;   # verbatim code is left out
    print "hello, world and everybody else in the room\\n";

=begin html

<p>Raw HTML that must not appear in the corpus at all, whatever happens.</p>

=end html

Perl variables hold scalars, arrays and hashes; E<lt>STDINE<gt> reads a line from the keyboard.
"""
FORTUNES = """Anarchy is order without power, and that is all there is to say about it.
\t\t-- Someone
%
The quick brown fox jumps over the lazy dog near the river bank.
%
Anarchy is order without power, and that is all there is to say about it.
\t\t-- Someone
%
"""
DEVIL = {
    "abasement": "ABASEMENT, n.  A decent and customary mental attitude in the presence\nof wealth or power.\n",
    "absent": "ABSENT, adj.  Peculiarly exposed to the tooth of detraction; vilified;\nhopelessly in the wrong.\n",
}
GCIDE = {
    "Bank": ("Bank \\Bank\\ (b[a^]nk), n. [OE. banke; akin to E. bench.]\n"
             "   1. A mound, pile, or ridge of earth, raised above the surrounding\n"
             "      level; as, a bank of clouds; a bank of snow.\n"
             "      [1913 Webster]\n\n"
             "            They cast up a bank against the city. --2 Sam.\n"
             "                                                  xx. 15.\n"
             "      [1913 Webster]\n\n"
             "   2. a financial institution that accepts deposits and channels\n"
             "      the money into lending activities; \"he cashed a check at the bank\"\n\n"
             "   Syn: depository financial institution, banking company\n"
             "        [WordNet 1.5]\n"),
}


def _dictd_number(value: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    digits = ""
    while True:
        value, digit = divmod(value, 64)
        digits = alphabet[digit] + digits
        if value == 0:
            return digits


def write_dictd(folder: Path, name: str, entries: dict[str, str]) -> None:
    """A dictd database: NAME.dict.dz (gzip) and NAME.index (headword, offset, length)."""
    folder.mkdir(parents=True, exist_ok=True)
    body, index = b"00-database-short\n     Notes that are not entries\n", []
    index.append(f"00-database-short\t{_dictd_number(0)}\t{_dictd_number(len(body))}")
    for headword, text in entries.items():
        data = text.encode()
        index.append(f"{headword}\t{_dictd_number(len(body))}\t{_dictd_number(len(data))}")
        body += data
    (folder / f"{name}.dict.dz").write_bytes(gzip.compress(body))
    (folder / f"{name}.index").write_text("\n".join(index) + "\n")


def write_root(root: Path) -> None:
    """Files where the Debian packages put them."""
    html = root / "usr/share/doc/python3.11/html/library/collections.html"
    html.parent.mkdir(parents=True)
    html.write_text(HTML)
    (html.parent.parent / "genindex.html").write_text("<p>An index page that is excluded by its name alone.</p>")
    pod = root / "usr/share/perl/5.36.0/pod/perlintro.pod"
    pod.parent.mkdir(parents=True)
    pod.write_text(POD)
    fortune = root / "usr/share/games/fortunes/anarchism"
    fortune.parent.mkdir(parents=True)
    fortune.write_text(FORTUNES)
    write_dictd(root / "usr/share/dictd", "devil", DEVIL)
    write_dictd(root / "usr/share/dictd", "gcide", GCIDE)


def read_lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def test_text_helpers():
    pieces = bc.split_long(LONG, 50)
    assert all(bc.words(p) <= 50 for p in pieces) and " ".join(pieces) == LONG
    assert all(p.endswith("today.") for p in pieces)  # cut at sentence ends
    assert bc.split_long("word " * 120, 50) == ["word " * 49 + "word"] * 2 + ["word " * 19 + "word"]
    assert bc.is_prose("The cat sat on the mat and looked at the dog.")
    assert not bc.is_prose("for (i = 0; i < n; i++) { x[i] = y[i] * 2; }")
    assert not bc.is_prose("Permission is granted to copy this document under the terms given here.")
    assert not bc.is_prose("| Name | Value | Notes | are a table row of cells here.")
    assert not bc.is_prose("Too short.")
    assert bc.dedupe_key("Hello,  World!") == bc.dedupe_key("hello world")
    assert bc.normalise("a&nbsp;b\n\tc &amp; d\u00ad") == "a b c & d"


def test_build_from_fixture_packages(tmp_path):
    root, out = tmp_path / "root", tmp_path / "out"
    write_root(root)
    existing = tmp_path / "existing.txt.gz"
    with gzip.open(existing, "wt", encoding="utf-8") as f:
        f.write("An old line of the existing corpus.\nThe quick brown fox jumps over the lazy dog near the river bank.\n")
    holdout = tmp_path / "senses.tsv"
    holdout.write_text("lemma\tsentence\nbank\the cashed a check at the bank this very morning\n")

    sources = "fortune-anarchism,devils-dictionary,gcide,python-docs,perl-docs,gnome-help"
    assert bc.main(["--root", str(root), "--out", str(out), "--cache", str(tmp_path / "cache"), "--sources", sources,
                    "--max-words", "60", "--append", str(existing), "--holdout", str(holdout)]) == 0

    lines = read_lines(out / "corpus_extra.txt.gz")
    text = "\n".join(lines)
    assert all(0 < bc.words(line) <= 60 for line in lines)
    assert len({bc.dedupe_key(line) for line in lines}) == len(lines)  # no duplicates
    assert "river bank" not in text  # already in the existing corpus
    assert text.count("Anarchy is order without power") == 1 and "-- Someone" in text
    assert "This module implements specialized container datatypes providing alternatives to the built-in " \
           "containers." in lines  # inline markup joined, footnote mark dropped, second copy deduped
    assert "A ChainMap groups multiple dicts together to create a single, updateable view of them." in lines
    for junk in ("print(key", "Prev", "class ChainMap(*maps)", "Permission is granted", "var x", "list-like",
                 "index page", "my $x", "Raw HTML", "\u00b6", "[1]"):
        assert junk not in text, junk
    assert sum("Sentence number" in line for line in lines) == 7  # 40 sentences of 9 words, 6 per line
    # POD: formatting codes resolved, commands and verbatim blocks left out
    assert ("This document gives you a quick overview of the Perl language, see perlsyn and $a <=> $b." in lines)
    assert "Perl variables hold scalars, arrays and hashes; <STDIN> reads a line from the keyboard." in lines
    # dictionaries: headword prefixed, pronunciation/etymology/sense number/citation removed, WordNet left out
    assert "abasement: A decent and customary mental attitude in the presence of wealth or power." in lines
    assert "Bank: A mound, pile, or ridge of earth, raised above the surrounding level; as, a bank of clouds; " \
           "a bank of snow." in lines
    assert "Bank: They cast up a bank against the city." in lines
    assert "financial institution" not in text and "cashed a check" not in text

    summary = json.loads((out / "SOURCES.json").read_text())
    records = {r["name"]: r for r in summary["sources"]}
    assert records["gnome-help"]["status"] == "missing" and "lines" not in records["gnome-help"]
    used = [r for r in records.values() if r["status"] == "used"]
    assert {r["name"] for r in used} == set(sources.split(",")) - {"gnome-help"}
    assert all(r["licence"] and r["attribution"] and r["lines"] > 0 for r in used)
    assert records["gcide"]["licence"] == "GPL-2.0-or-later" and records["python-docs"]["licence"] == "PSF-2.0"
    assert sum(r["words"] for r in used) == summary["summary"]["words"] == sum(map(bc.words, lines))
    assert records["fortune-anarchism"]["duplicates_dropped"] == 2  # its repeat and the existing corpus's line
    assert summary["rejected"] and summary["summary"]["combined"]["lines"] == len(lines) + 2
    assert read_lines(out / "corpus_combined.txt.gz")[:2] == read_lines(existing)
    licences = (out / "LICENSES.md").read_text()
    assert "GPL-2.0-or-later" in licences and "PSF-2.0" in licences and "gnome-help" not in licences
    assert "begins with `existing.txt.gz`" in licences


def test_unknown_source_is_an_error(tmp_path):
    with pytest.raises(SystemExit, match="unknown source"):
        bc.main(["--out", str(tmp_path), "--sources", "no-such-source"])
    with pytest.raises(SystemExit, match="unknown kind.s.: novels; known: dictionary, documentation"):
        bc.main(["--out", str(tmp_path), "--kinds", "literature,novels"])  # it wrote an empty corpus
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("argv, message", [
    (["--max-words", "0"], "--max-words must be a positive number of words, got 0"),
    (["--holdout", "{tmp}/missing.tsv"], "--holdout {tmp}/missing.tsv: no such file"),  # a traceback after the build
    (["--append", "{tmp}"], "--append {tmp}: no such file"),
])
def test_bad_options_are_one_line_before_any_source_is_read(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        bc.main(["--out", str(tmp_path / "out"), *[arg.format(tmp=tmp_path) for arg in argv]])
    assert stop.value.code == 2 and message.format(tmp=tmp_path) in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


SMALL = ("fortune-anarchism", "devils-dictionary", "cfi-en", "jargon-file")


def test_real_run_on_installed_packages(tmp_path):
    """Where a small source is installed (system-wide, or in the default cache of ``--install``), build it."""
    cache = bc.DEFAULT_OUT / "cache"
    present = [s.name for s in bc.SOURCES if s.name in SMALL and bc.source_files(s, Path("/"), cache)]
    if not present:
        pytest.skip("none of the small source packages is installed")
    out = tmp_path / "out"
    assert bc.main(["--out", str(out), "--cache", str(cache), "--sources", ",".join(present)]) == 0
    records = json.loads((out / "SOURCES.json").read_text())["sources"]
    assert all(r["status"] == "used" and r["lines"] > 100 and r["version"] for r in records)
    lines = read_lines(out / "corpus_extra.txt.gz")
    assert len(lines) == sum(r["lines"] for r in records)
    assert all(bc.words(line) <= 150 for line in lines)
