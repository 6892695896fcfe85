"""The demo corpus: English prose from the docstrings of Python's standard library
and, for the demo itself, of the installed packages.

Every Python install carries it, offline, so the demo and the tests need no
download. `prepare_demo_data(corpus="stdlib")` uses the standard library
alone (406 modules, ~260k words: the tests and the CPU efficiency study);
`corpus="installed"` (configs/demo.flags) adds every .py file of the running
interpreter's site-packages (electra_tf's dependencies: ~8,000 more documents,
~3M words), so that 2,400 demo steps see most sequences once instead of
one corpus 30 times over; the vocab is still learned from the standard
library's part (the same pieces, and ~80 s less on 2 cores). Sources are parsed with `ast` (nothing is imported or executed);
the docstrings of one source file make one document, written one sentence
per line with a blank line between documents: the format
`build_pretraining_data` reads. (Single docstrings are mostly one or two
sentences; a whole module's fill 128-token examples.)

Lines that look like code (doctests, indented blocks, reST directives and
tables) are dropped, so what remains is mostly prose. The text differs a little
between Python versions, so the corpus is rebuilt from the running one.

    python -m electra_tf.data.demo_corpus --output=demo/corpus.txt
"""

from __future__ import annotations

import ast
import os
import re
import sys
import sysconfig
import warnings

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")
_CODE_LIKE = re.compile(r"^(>>>|\.\.\.|\.\. |[-=~*+#|]{3,}|:\w+:|\$ |%|\{|\}|@)")
# Folders of the standard library that hold tests, tools or vendored code.
_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages",
              "__pycache__", "lib2to3", "turtledemo", "idlelib", "ensurepip"}


def stdlib_files(stdlib_dir: str | None = None) -> list[str]:
    """Sorted .py files of the standard library, tests and vendored code left out."""
    root = stdlib_dir or sysconfig.get_paths()["stdlib"]
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        out.extend(os.path.join(folder, f) for f in sorted(files) if f.endswith(".py"))
    return sorted(out)


def docstrings(path: str) -> list[str]:
    """Module, class and function docstrings of one source file, in file order."""
    with open(path, "rb") as f:
        return source_docstrings(f.read(), path)


def source_docstrings(source: bytes, filename: str = "<source>") -> list[str]:
    """Module, class and function docstrings of Python source, in order ([] if it
    does not parse)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source, filename=filename)
    except (SyntaxError, ValueError, MemoryError, RecursionError):  # ValueError: bad bytes too
        return []
    nodes = [tree] + [n for n in ast.walk(tree) if isinstance(
        n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    nodes.sort(key=lambda n: getattr(n, "lineno", 0))
    out = []
    for node in nodes:
        doc = ast.get_docstring(node, clean=True)
        if doc:
            out.append(doc)
    return out


def docstring_sentences(doc: str) -> list[str]:
    """Prose paragraphs of a docstring -> one sentence per element."""
    sentences = []
    for para in re.split(r"\n\s*\n", doc):
        lines = para.split("\n")
        if any(line.startswith((" ", "\t")) or _CODE_LIKE.match(line.strip()) for line in lines):
            continue  # code, a table, a directive or an indented block
        # A NUL (a docstring's "\0" escape) would make the corpus file look binary.
        text = " ".join(line.strip() for line in lines).replace("\x00", " ").strip()
        if len(text) < 20 or not any(c.isalpha() for c in text):
            continue
        sentences.extend(s.strip() for s in _SENTENCE_END.split(text) if s.strip())
    return sentences


def _file_sentences(path: str) -> list[str]:
    return [s for doc in docstrings(path) for s in docstring_sentences(doc)]


def write_corpus(output: str, max_documents: int = 0, stdlib_dir: str | None = None,
                 min_sentences: int = 2, package_dirs: tuple[str, ...] = (),
                 processes: int = 1, stdlib_output: str | None = None) -> dict:
    """Writes the corpus file atomically. Returns counts of files/documents/lines.

    package_dirs: more roots (e.g. site-packages) whose .py files follow the
    standard library's, in sorted order, tests and vendored code left out as
    there. processes: parse files on this many processes (same output).
    stdlib_output: also write the standard library's documents alone there
    (what `write_corpus` without package_dirs writes; the demo's vocab
    corpus), counted as stdlib_documents and stdlib_lines.
    """
    from electra_tf.core.errors import InputError
    from electra_tf.core.fileio import atomic_write_text

    docs, stdlib_docs = [], []
    stdlib_root = stdlib_dir or sysconfig.get_paths()["stdlib"]
    files = stdlib_files(stdlib_dir)
    roots = [stdlib_root] * len(files)
    for extra in package_dirs:
        more = stdlib_files(extra)
        files, roots = files + more, roots + [extra] * len(more)
    if processes > 1 and not max_documents:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(processes) as pool:
            parsed = pool.map(_file_sentences, files, chunksize=64)
    else:
        parsed = map(_file_sentences, files)
    for root, sentences in zip(roots, parsed):
        if len(sentences) >= min_sentences:
            docs.append(sentences)
            if root == stdlib_root:
                stdlib_docs.append(sentences)
        if max_documents and len(docs) >= max_documents:
            break
    if not docs or (stdlib_output and not stdlib_docs):
        raise InputError(f"no docstrings found under {stdlib_dir or 'the standard library'}")
    stats = {"source_files": len(files), "documents": len(docs),
             "lines": sum(len(d) for d in docs)}
    if stdlib_output:  # first: `output` there says both are (a kill between had left
        # the demo's folder without its vocab corpus, and every rerun failing)
        atomic_write_text(stdlib_output, "\n\n".join("\n".join(d) for d in stdlib_docs) + "\n")
        stats.update(stdlib_documents=len(stdlib_docs),
                     stdlib_lines=sum(len(d) for d in stdlib_docs))
    atomic_write_text(output, "\n\n".join("\n".join(d) for d in docs) + "\n")
    return stats


DEMO_CORPORA = ("stdlib", "installed")


def prepare_demo_data(data_dir: str, vocab_size: int, max_seq_length: int,
                      corpus: str = "stdlib") -> dict:
    """Builds (once) the docstring corpus, vocab and records. Returns paths.

    corpus: "stdlib" or "installed" (see the module docstring); a data_dir
    built for the other one is an error.
    """
    from electra_tf.core.errors import InputError
    from electra_tf.core.fileio import atomic_write_text

    if corpus not in DEMO_CORPORA:
        raise InputError(f"demo corpus must be one of {DEMO_CORPORA}, got {corpus!r}")
    from electra_tf.data.builder import BuildOptions, build_pretraining_data
    from electra_tf.data.features import STATS_FILE, shard_name
    from electra_tf.text.vocab_builder import build_vocab

    kind, corpus = corpus, os.path.join(data_dir, "corpus.txt")
    vocab = os.path.join(data_dir, "vocab.txt")
    marker = os.path.join(data_dir, "demo_corpus.txt")  # which corpus this folder holds
    if os.path.exists(corpus):
        built = open(marker, encoding="utf-8").read().strip() if os.path.exists(marker) else "stdlib"
        if built != kind:
            raise InputError(f"{data_dir} holds the {built!r} demo corpus, not {kind!r}: use "
                             "another data_dir, or delete it to rebuild")
    records = os.path.join(data_dir, f"records_{max_seq_length}")
    num_shards = 10  # shards 0-8 train, shard 9 is held out for eval
    stdlib_corpus = os.path.join(data_dir, "stdlib_corpus.txt") if kind == "installed" else corpus
    if not os.path.exists(corpus):
        os.makedirs(data_dir, exist_ok=True)
        atomic_write_text(marker, kind + "\n")
        if kind == "installed":
            site = sysconfig.get_paths()["purelib"]
            print(f"[demo] reading the docstrings of {site} (a minute or two on 2 cores) ...",
                  file=sys.stderr, flush=True)
            stats = write_corpus(corpus, package_dirs=(site,),
                                 processes=min(os.cpu_count() or 1, 8),
                                 stdlib_output=stdlib_corpus)
            print(f"[demo] vocab corpus: {stats['stdlib_documents']} documents, "
                  f"{stats['stdlib_lines']} lines of standard-library docstrings -> "
                  f"{stdlib_corpus}", file=sys.stderr)
            what = "standard-library and installed-package docstrings"
        else:
            stats = write_corpus(corpus)
            what = "standard-library docstrings"
        print(f"[demo] corpus: {stats['documents']} documents, {stats['lines']} lines of "
              f"{what} -> {corpus}", file=sys.stderr)
    size_marker = os.path.join(data_dir, "demo_vocab_size.txt")  # the size it was built for
    if os.path.exists(vocab):
        built = (open(size_marker, encoding="utf-8").read().strip()
                 if os.path.exists(size_marker) else "")  # (a folder of an older version)
        if built and built != str(vocab_size):
            raise InputError(f"{data_dir} holds a vocabulary built for --demo_vocab_size="
                             f"{built}, not {vocab_size}: use another --demo_data_dir, or "
                             "delete it to rebuild")
    else:
        atomic_write_text(size_marker, f"{vocab_size}\n")
        build_vocab(stdlib_corpus, vocab_size, vocab, min_count=5)
    if not os.path.exists(os.path.join(records, STATS_FILE)):
        build_pretraining_data(BuildOptions(
            files=(corpus,), vocab_file=vocab, output_dir=records,
            max_seq_length=max_seq_length, num_shards=num_shards, overwrite=True))
    shards = [os.path.join(records, shard_name(i, num_shards)) for i in range(num_shards)]
    with open(vocab, encoding="utf-8") as f:
        size = sum(1 for line in f if line.rstrip("\n"))
    return {"vocab_file": vocab, "train_data": ",".join(shards[:-1]),
            "eval_data": shards[-1], "vocab_size": size}


def main(argv):
    from absl import flags

    del argv
    flags_ = flags.FLAGS
    stats = write_corpus(flags_.output, flags_.max_documents)
    print(f"[demo_corpus] wrote {stats['documents']:,} documents, {stats['lines']:,} lines "
          f"to {flags_.output}", flush=True)


if __name__ == "__main__":
    from absl import app, flags

    from electra_tf import cli

    flags.DEFINE_string("output", None, "Where to write the corpus.", required=True)
    flags.DEFINE_integer("max_documents", 0, "Keep at most this many documents (0: all).")
    app.run(lambda argv: cli.run_cli(lambda: main(argv)))
