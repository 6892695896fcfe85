"""The demo corpus: English prose from the docstrings of Python's standard library.

Every Python install carries it, offline, so the demo and the tests need no
download. Sources are parsed with `ast` (nothing is imported or executed);
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
    try:
        with open(path, "rb") as f:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(f.read(), filename=path)
    except (SyntaxError, ValueError, UnicodeDecodeError):
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
        text = " ".join(line.strip() for line in lines).strip()
        if len(text) < 20 or not any(c.isalpha() for c in text):
            continue
        sentences.extend(s.strip() for s in _SENTENCE_END.split(text) if s.strip())
    return sentences


def write_corpus(output: str, max_documents: int = 0, stdlib_dir: str | None = None,
                 min_sentences: int = 2, sources_output: str | None = None) -> dict:
    """Writes the corpus file atomically. Returns counts of files/documents/lines.

    With `sources_output`, also writes one row per document (index, package
    "python", module: the top-level module, path), the layout of
    experiments/install_corpus.py's `.sources.tsv`, for the package probe.
    """
    from electra_tf.errors import InputError
    from electra_tf.fileio import atomic_write_text

    docs, rows = [], []
    root = stdlib_dir or sysconfig.get_paths()["stdlib"]
    files = stdlib_files(stdlib_dir)
    for path in files:
        sentences = [s for doc in docstrings(path) for s in docstring_sentences(doc)]
        if len(sentences) >= min_sentences:
            docs.append(sentences)
            module = os.path.relpath(path, root).split(os.sep)[0].removesuffix(".py")
            rows.append(f"{len(rows)}\tpython\t{module}\t{path}")
        if max_documents and len(docs) >= max_documents:
            break
    if not docs:
        raise InputError(f"no docstrings found under {stdlib_dir or 'the standard library'}")
    atomic_write_text(output, "\n\n".join("\n".join(d) for d in docs) + "\n")
    if sources_output:
        atomic_write_text(sources_output,
                          "index\tpackage\tmodule\tpath\n" + "\n".join(rows) + "\n")
    return {"source_files": len(files), "documents": len(docs),
            "lines": sum(len(d) for d in docs)}


def prepare_demo_data(data_dir: str, vocab_size: int, max_seq_length: int,
                      with_sources: bool = False) -> dict:
    """Builds (once) the stdlib-docstring corpus, vocab and records. Returns paths.

    with_sources: also write corpus.txt.sources.tsv (see `write_corpus`) with
    the corpus; a corpus already there without one is an error.
    """
    from electra_tf.data.builder import BuildOptions, build_pretraining_data
    from electra_tf.data.features import shard_name
    from electra_tf.data.vocab import build_vocab

    corpus = os.path.join(data_dir, "corpus.txt")
    vocab = os.path.join(data_dir, "vocab.txt")
    records = os.path.join(data_dir, f"records_{max_seq_length}")
    num_shards = 10  # shards 0-8 train, shard 9 is held out for eval
    sources = corpus + ".sources.tsv" if with_sources else None
    if sources and os.path.exists(corpus) and not os.path.exists(sources):
        from electra_tf.errors import InputError

        raise InputError(f"{corpus} exists without {sources}: use another data_dir, or "
                         "delete it to rebuild both")
    if not os.path.exists(corpus):
        stats = write_corpus(corpus, sources_output=sources)
        print(f"[demo] corpus: {stats['documents']} documents, {stats['lines']} lines of "
              f"standard-library docstrings -> {corpus}", file=sys.stderr)
    if not os.path.exists(vocab):
        build_vocab(corpus, vocab_size, vocab, min_count=5)
    if not os.path.exists(os.path.join(records, "pretrain_data_stats.json")):
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
