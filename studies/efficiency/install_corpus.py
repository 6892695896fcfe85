r"""A pre-training corpus built from what a Python install carries.

    python -m studies.efficiency.install_corpus --output=DATA/corpus.txt \
        [--extra_dirs=/usr/share/doc] [--vocab_file=DATA/vocab.txt]

Run it from the repository root; the efficiency study (run.py) builds its
corpus with `write_install_corpus` directly.

The demo corpus (electra_tf/data/demo_corpus.py) is the standard library's
docstrings, about 1M tokens. This one adds every installed distribution: the
docstrings of each package's .py files (purelib and platlib), its
.rst/.md/.txt documents, and the long description of each
*.dist-info/METADATA (the package's README); optionally text files of other
folders (--extra_dirs, e.g. /usr/share/doc). Nothing is imported: sources are parsed with `ast`,
as the demo corpus does.

Output (the format build_pretraining_data reads): one sentence per line, a
blank line between documents; one document per source file. Beside it,
`<output>.sources.tsv` has one row per document (index, package, module,
path): `package` is the distribution that installed the file ("python" for
the standard library), `module` its top-level import name. The probes use
them as labels (probes.py).

Quality and duplicates: paragraphs that look like code, tables, directives
or lists of names are dropped (as in the demo corpus); a sentence needs four
words and mostly letters; a paragraph seen before anywhere in the corpus
(licence headers, vendored copies, "Returns the value.") is dropped; test,
vendored and licence files are skipped. The order is deterministic: roots,
then files, sorted; the work is spread over processes but results are taken
in order.
"""

from __future__ import annotations

import glob
import hashlib
import json
import multiprocessing
import os
import re
import site
import sys
import sysconfig
import textwrap
import time

from electra_tf.data.demo_corpus import docstring_sentences, source_docstrings, stdlib_files

_SKIP_DIRS = {"test", "tests", "testing", "__pycache__", "_vendor", "vendor", "vendored",
              "third_party", "node_modules", "include", "licenses", "LICENSES", "site-packages",
              "dist-packages", "idle_test", "lib2to3", "turtledemo", "ensurepip", "examples",
              "benchmarks", "data", "fixtures", "locale", "locales"}
_SKIP_NAME = re.compile(r"^(licen[cs]e|copying|notice|authors|contributors|record|top_level|"
                        r"entry_points|dependency_links|namespace_packages|sources|requires|"
                        r"requirements|installer|wheel|direct_url|third_party_notices|"
                        r"license-3rd-party)", re.I)
_DOC_EXT = (".rst", ".md", ".txt")
_EXTRA_NAME = re.compile(r"^(readme|news|faq|howto|guide|intro|overview|tutorial|manual|"
                         r"usage|.*\.(txt|md|rst)(\.gz)?$|.*\.[1-8]\w*(\.gz)?$)", re.I)
_MAN_PAGE = re.compile(r"\.[1-8]\w*(\.gz)?$")
_ROFF_ESCAPE = re.compile(r"\\(f[BIRPC]|f\(..|s[-+]?\d|\(..|\*\(..|\*.|[&|^e-]|.)")
_MAX_DOC_BYTES = 2_000_000  # larger text files are data (word lists, label sets)
_ROLE = re.compile(r":[\w:.-]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")  # :class:`x <y>` -> x
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)|`([^`<]*?)\s*<[^>]*>`_+")  # [t](u), `t <u>`_
_TICKS = re.compile(r"`+([^`]*)`+_?")
_EMPH = re.compile(r"(\*\*|__|\*)(\S[^*]*?)\1")
_URL = re.compile(r"https?://\S+|<[^>\s]+>")
_FENCE = re.compile(r"^\s*(```|~~~)")
_BULLET = re.compile(r"^\s*([-*+]|\d+[.)])\s+")
_HEADING = re.compile(r"^\s*(#{1,6}\s|[=\-~^\"'`#*+]{3,}\s*$)")
_PROSE_END = re.compile(r"[.!?:)\"']$")


def inline_text(text: str) -> str:
    """reST/Markdown inline markup -> plain words (roles, links, literals, emphasis, URLs)."""
    text = _ROLE.sub(r"\1", text)
    text = _LINK.sub(lambda m: m.group(1) or m.group(2) or "", text)
    text = _TICKS.sub(r"\1", text)
    text = _EMPH.sub(r"\2", text)
    text = _URL.sub("", text)
    return re.sub(r"\s+", " ", text).strip()


def is_prose(sentence: str) -> bool:
    """Four words or more, mostly letters: not a name list, a number table or code."""
    if len(sentence) > 600 or len(sentence.split()) < 4:
        return False
    letters = sum(c.isalpha() or c == " " for c in sentence)
    return letters >= 0.75 * len(sentence) and sentence[0].isalnum()


def markup_paragraphs(text: str) -> list[str]:
    """A .rst/.md/.txt document -> paragraphs in the docstring format (code blocks,
    headings and HTML dropped; each list item a paragraph of its own)."""
    out, block, fenced = [], [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            line = ""
        if fenced or _HEADING.match(line) or line.lstrip().startswith("<"):
            line = ""
        if _BULLET.match(line):
            out.append("\n".join(block))
            block = [_BULLET.sub("", line)]
            continue
        if not line.strip():
            out.append("\n".join(block))
            block = []
        else:
            block.append(line)
    out.append("\n".join(block))
    return [p for p in out if p.strip()]


_FIELD_HEAD = re.compile(r"^[\w*.,\[\]| ]{1,60}(\([^)]{0,80}\))?\s*:\s*")  # "x (int): "


def field_paragraphs(para: str) -> list[str]:
    """An indented docstring section (Google "Args:" or NumPy "Parameters") -> the
    description of each entry, one paragraph each; [] for code or doctests."""
    if ">>>" in para or "::" in para:
        return []
    lines = [ln for ln in textwrap.dedent(para).split("\n") if ln.strip()]
    lines = [ln for ln in lines if not (re.fullmatch(r"[-=~^]{3,}", ln.strip()) or (
        ln.strip().endswith(":") and len(ln.split()) <= 3))]  # section headers, underlines
    if not lines:
        return []
    indent = min(len(ln) - len(ln.lstrip()) for ln in lines)
    entries: list[list[str]] = []
    for line in lines:
        stripped = line.strip()
        if len(line) - len(line.lstrip()) > indent and entries:
            entries[-1].append(stripped)  # continuation of the entry above
        elif re.match(r"^[\w*, ]+ : ", stripped):
            entries.append([])  # NumPy's "name : type" line; the description follows
        else:
            head = _FIELD_HEAD.match(stripped)
            entries.append([stripped[head.end():] if head else stripped])
    out = []
    for entry in entries:
        text = " ".join(e for e in entry if e)
        if len(text) >= 20:
            out.append(text)
    return out


def roff_text(text: str) -> str:
    """A man page (roff) -> plain paragraphs: requests dropped, font escapes removed,
    text macros (.B, .I, .BR, ...) kept as words; .PP/.SH/.TP start a paragraph."""
    out = []
    for line in text.splitlines():
        if line.startswith((".", "'")):
            request, _, rest = line[1:].partition(" ")
            if request in ("B", "I", "BR", "BI", "IR", "IB", "RB", "RI", "SM"):
                line = rest.replace('"', "")
            else:
                out.append("")  # .PP, .SH, .TP, .IP, .br, .nf ...: a break
                continue
        out.append(_ROFF_ESCAPE.sub(lambda m: "-" if m.group(1) == "-" else "", line))
    return "\n".join(out)


def metadata_description(text: str) -> str:
    """METADATA (email-header format) -> its body, the long description (a README)."""
    head, _, body = text.partition("\n\n")
    if body.strip():
        return body
    lines = [ln[len("Description: "):] for ln in head.splitlines()
             if ln.startswith("Description: ")]  # metadata 1.x puts it in a header
    return "\n".join(lines)


def _clean_paragraph(sentences: list[str]) -> list[str]:
    kept = [inline_text(s) for s in sentences]
    kept = [s for s in kept if is_prose(s)]
    if not kept or not any(_PROSE_END.search(s) for s in kept):
        return []  # a heading or a label list, not prose
    return kept


def file_paragraphs(path: str) -> list[list[str]]:
    """One source file -> its prose paragraphs, each a list of sentences.

    .py files give their docstrings (ast, nothing imported); METADATA its long
    description; other files are read as reST/Markdown/plain text.
    """
    try:
        if os.path.getsize(path) > _MAX_DOC_BYTES and not path.endswith(".py"):
            return []
        with open(path, "rb") as f:
            raw = f.read()
        if path.endswith(".gz"):
            import gzip

            raw = gzip.decompress(raw)[:4 * _MAX_DOC_BYTES]
    except (OSError, EOFError):
        return []
    if path.endswith(".py"):
        paragraphs = []
        for doc in source_docstrings(raw, path):
            for para in re.split(r"\n\s*\n", doc):
                if docstring_sentences(para):
                    paragraphs.append(para)
                else:  # an indented section: its entries' descriptions
                    paragraphs.extend(field_paragraphs(para))
    else:
        text = raw.decode("utf-8", errors="replace")
        if "\x00" in text or text.count("\ufffd") > 10:
            return []
        if os.path.basename(path) in ("METADATA", "PKG-INFO"):
            text = metadata_description(text)
        elif _MAN_PAGE.search(path):
            text = roff_text(text)
        paragraphs = markup_paragraphs(text)
    out = []
    for para in paragraphs:
        sentences = _clean_paragraph(docstring_sentences(para))
        if sentences:
            out.append(sentences)
    return out


# Where other Python installs of a machine keep their packages (--site_dirs=all).
_OTHER_SITE_DIRS = ("/usr/lib/python3*/dist-packages", "/usr/local/lib/python3*/dist-packages",
                    "/usr/local/lib/python3*/site-packages",
                    "/opt/*/.venv/lib/python3*/site-packages",
                    "~/.pyenv/versions/*/lib/python3*/site-packages")


def source_roots(site_dirs: str = "") -> list[str]:
    """The package folders read: the running interpreter's purelib and platlib;
    with site_dirs="all" also its base interpreter's and every other Python 3
    install's found at the usual places; or more folders, comma-separated."""
    paths = sysconfig.get_paths()
    roots = [paths["purelib"], paths["platlib"], *site.getsitepackages()]
    for extra in (d for d in site_dirs.split(",") if d):
        if extra != "all":
            roots.append(extra)
            continue
        base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})
        roots += [base["purelib"], base["platlib"]]
        for pattern in _OTHER_SITE_DIRS:
            roots += sorted(glob.glob(os.path.expanduser(pattern)))
    out = []
    for root in roots:
        real = os.path.realpath(root)
        if os.path.isdir(real) and real not in out:
            out.append(real)
    return out


def _distribution_names(root: str) -> dict[str, str]:
    """Top-level name under `root` -> the distribution that installed it (from RECORD)."""
    names: dict[str, str] = {}
    for entry in sorted(os.listdir(root)):
        if not entry.endswith(".dist-info"):
            continue
        dist = re.sub(r"[-_.]+", "-", entry[:-len(".dist-info")].rsplit("-", 1)[0]).lower()
        names[entry] = dist
        try:
            with open(os.path.join(root, entry, "RECORD"), encoding="utf-8") as f:
                for line in f:
                    top = line.split(",", 1)[0].split("/", 1)[0]
                    if top and not top.startswith("..") and top not in names:
                        names[top] = dist
        except OSError:
            continue
    return names


def _wanted(name: str) -> bool:
    if name == "METADATA" or name.endswith(".py"):
        return True
    return name.endswith(_DOC_EXT) and not _SKIP_NAME.match(name)


def install_sources(extra_dirs: tuple[str, ...] = (), include_stdlib: bool = True,
                    site_dirs: str = "", roots: list[str] | None = None
                    ) -> list[tuple[str, str, str]]:
    """(path, package, module) of every file the corpus reads, in a fixed order.

    roots: read these package folders instead of `source_roots(site_dirs)`.
    """
    out = []
    if include_stdlib:
        stdlib = sysconfig.get_paths()["stdlib"]
        for path in stdlib_files(stdlib):
            module = os.path.relpath(path, stdlib).split(os.sep)[0]
            out.append((path, "python", module.removesuffix(".py")))
    for root in roots if roots is not None else source_roots(site_dirs):
        dists = _distribution_names(root)
        for top in sorted(os.listdir(root)):
            full = os.path.join(root, top)
            module = top.removesuffix(".py")
            if top.endswith(".dist-info"):
                meta = os.path.join(full, "METADATA")
                if os.path.isfile(meta):
                    out.append((meta, dists[top], dists[top]))
                continue
            package = dists.get(top, module)
            if os.path.isfile(full):
                if top.endswith(".py") and not top.startswith("_"):
                    out.append((full, package, module))
                continue
            if top in _SKIP_DIRS or top.endswith((".libs", ".data", ".egg-info")):
                continue
            for folder, dirs, files in os.walk(full):
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
                out.extend((os.path.join(folder, f), package, module)
                           for f in sorted(files) if _wanted(f) and not f.startswith("test_"))
    for extra in extra_dirs:
        for folder, dirs, files in os.walk(extra):
            dirs[:] = sorted(dirs)
            label = os.path.relpath(folder, extra).split(os.sep)[0]
            out.extend((os.path.join(folder, f), "extra:" + os.path.basename(extra.rstrip("/")),
                        label) for f in sorted(files) if _EXTRA_NAME.match(f)
                       and not _SKIP_NAME.match(f) and os.path.isfile(os.path.join(folder, f)))
    return out


def _fingerprint(sentences: list[str]) -> bytes:
    return hashlib.blake2b(" ".join(sentences).lower().encode("utf-8"), digest_size=12).digest()


def write_install_corpus(output: str, extra_dirs: tuple[str, ...] = (),
                         include_stdlib: bool = True, site_dirs: str = "", min_sentences: int = 2,
                         processes: int = 0, max_files: int = 0,
                         roots: list[str] | None = None) -> dict:
    """Writes the corpus and `<output>.sources.tsv` atomically. Returns counts.

    Args:
      output: the corpus file.
      extra_dirs: more folders whose README/.txt/.md/.rst files are read.
      include_stdlib: also read the standard library (as the demo corpus).
      site_dirs: more package folders ("all": every Python install found; see
        `source_roots`).
      min_sentences: a document with fewer sentences (after deduplication) is dropped.
      processes: worker processes (0: the CPU count).
      max_files: read at most this many source files (0: all; for tests).
      roots: read these package folders instead of the installed ones (tests).
    """
    from electra_tf.core.errors import InputError
    from electra_tf.core.fileio import atomic_write_text

    sources = install_sources(tuple(extra_dirs), include_stdlib, site_dirs, roots)
    if max_files:
        sources = sources[:max_files]
    seen: set[bytes] = set()
    docs, rows = [], []
    stats = {"source_files": len(sources), "paragraphs_read": 0, "duplicate_paragraphs": 0}
    t0 = last = time.monotonic()
    workers = processes or os.cpu_count() or 1
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        results = pool.imap(file_paragraphs, [s[0] for s in sources], chunksize=8)
        for i, ((path, package, module), paragraphs) in enumerate(zip(sources, results)):
            doc = []
            for sentences in paragraphs:
                stats["paragraphs_read"] += 1
                key = _fingerprint(sentences)
                if key in seen:
                    stats["duplicate_paragraphs"] += 1
                    continue
                seen.add(key)
                doc.extend(sentences)
            if len(doc) >= min_sentences:
                docs.append(doc)
                rows.append(f"{len(rows)}\t{package}\t{module}\t{path}")
            if time.monotonic() - last > 10 or i + 1 == len(sources):
                last = time.monotonic()
                print(f"[install_corpus] {i + 1:,}/{len(sources):,} files, {len(docs):,} "
                      f"documents, {sum(map(len, docs)):,} sentences ({last - t0:.0f} s)",
                      file=sys.stderr, flush=True)
    if not docs:
        raise InputError("no documents found in the installed packages")
    atomic_write_text(output, "\n\n".join("\n".join(d) for d in docs) + "\n")
    atomic_write_text(output + ".sources.tsv",
                      "index\tpackage\tmodule\tpath\n" + "\n".join(rows) + "\n")
    stats.update(documents=len(docs), lines=sum(map(len, docs)),
                 packages=len({r.split("\t")[1] for r in rows}),
                 characters=sum(len(s) + 1 for d in docs for s in d))
    return stats


def read_sources(corpus: str) -> list[dict]:
    """Rows of `<corpus>.sources.tsv`, in document order."""
    import csv

    with open(corpus + ".sources.tsv", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def count_tokens(corpus: str, vocab_file: str, batch_lines: int = 8192) -> dict:
    """WordPiece tokens of the corpus under `vocab_file` (the project's tokenizer):
    {"tokens", "unk_tokens", "lines", "by_package": {package: tokens}} (by_package
    when `<corpus>.sources.tsv` exists)."""
    from electra_tf.data.builder import iter_documents
    from electra_tf.text.tokenizer import Tokenizer

    tokenizer = Tokenizer(vocab_file, do_lower_case=True)
    has_sources = os.path.exists(corpus + ".sources.tsv")
    packages = [r["package"] for r in read_sources(corpus)] if has_sources else []
    by_package: dict[str, int] = {}
    totals = {"tokens": 0, "unk_tokens": 0, "lines": 0}
    batch: list[str] = []
    owners: list[str] = []

    def flush():
        for ids, owner in zip(tokenizer.encode(batch), owners):
            totals["tokens"] += len(ids)
            totals["unk_tokens"] += sum(1 for t in ids if t == tokenizer.unk_id)
            by_package[owner] = by_package.get(owner, 0) + len(ids)
        batch.clear()
        owners.clear()

    for index, doc in iter_documents([corpus]):
        batch.extend(doc)
        owners.extend([packages[index] if has_sources else ""] * len(doc))
        totals["lines"] += len(doc)
        if len(batch) >= batch_lines:
            flush()
            print(f"[install_corpus] counted {totals['lines']:,} lines, {totals['tokens']:,} "
                  "tokens", file=sys.stderr, flush=True)
    if batch:
        flush()
    if has_sources:
        totals["by_package"] = dict(sorted(by_package.items(), key=lambda kv: -kv[1]))
    return totals


def main(argv):
    del argv
    from absl import flags

    from electra_tf.core.fileio import atomic_write_text
    from electra_tf.text.vocab_builder import build_vocab

    f = flags.FLAGS
    t0 = time.monotonic()
    stats = write_install_corpus(f.output, tuple(d for d in f.extra_dirs.split(",") if d),
                                 site_dirs=f.site_dirs, processes=f.processes)
    print(f"[install_corpus] wrote {stats['documents']:,} documents of {stats['packages']:,} "
          f"packages, {stats['lines']:,} sentences, {stats['characters']:,} characters to "
          f"{f.output} ({time.monotonic() - t0:.0f} s; {stats['duplicate_paragraphs']:,} "
          "duplicate paragraphs dropped)", flush=True)
    if f.vocab_file:
        if not os.path.exists(f.vocab_file):
            build_vocab(f.output, f.vocab_size, f.vocab_file)
        counts = count_tokens(f.output, f.vocab_file)
        atomic_write_text(f.output + ".tokens.json", json.dumps(counts, indent=1) + "\n")
        print(f"[install_corpus] {counts['tokens']:,} WordPiece tokens "
              f"({counts['unk_tokens']:,} [UNK]) under {f.vocab_file}", flush=True)


if __name__ == "__main__":
    from absl import app, flags

    from electra_tf import cli

    flags.DEFINE_string("output", None, "Where to write the corpus.", required=True)
    flags.DEFINE_string("extra_dirs", "", "Comma-separated folders of more text (README, "
                        ".txt, .md, .rst files), e.g. /usr/share/doc.")
    flags.DEFINE_string("vocab_file", "", "If set, count WordPiece tokens with this vocab "
                        "(learned from the corpus first if the file does not exist).")
    flags.DEFINE_string("site_dirs", "", "More package folders, comma-separated; 'all': every "
                        "Python 3 install found at the usual places (see source_roots).")
    flags.DEFINE_integer("vocab_size", 30522, "Size of a vocab learned for --vocab_file.")
    flags.DEFINE_integer("processes", 0, "Worker processes (0: the CPU count).")
    app.run(lambda argv: cli.run_cli(lambda: main(argv)))
