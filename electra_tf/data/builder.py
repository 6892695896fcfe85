"""Raw text -> sharded pre-training TFRecords, in parallel and deterministically.

Documents (runs of non-blank lines; a file's end also ends one) are numbered
in corpus order and document d goes to shard d % num_shards. The corpus order
is the files (sorted by path), and an archive's members, shuffled by the seed,
as the original's builders shuffle them: every shard runs through the corpus
in that order, so files named by source (books_*, wiki_*) would otherwise
train source by source. Each shard has its own `ExampleBuilder` seeded by (seed,
shard), and worker processes take whole shards. The bytes written therefore
depend on the corpus, the vocab, L, num_shards and seed, and not on
num_processes.

Shards are written under a temporary name and renamed when complete, so an
interrupted run never leaves a shard that looks finished; the next run into the
folder removes what an interrupted one left. The stats JSON is written before
the renames under a temporary name and renamed last, so the folder never pairs
new shards with an earlier build's stats.

A corpus file that is not UTF-8 text (binary, UTF-16: `fileio.check_text_file`)
is refused before anything is written.

A corpus file may also be an OpenWebText archive (data/corpus.py: an .xz tar of
.txt files, as distributed), read in memory without extracting it: its members,
in the order of their names, are units of text like files, each one document
unless `blanks_separate_docs` says otherwise. A damaged archive is refused in
one line naming it. So is a corpus that is mostly [UNK]
for the vocabulary (a binary file, another
language, a cased corpus with an uncased vocab) is refused, with nothing
written: each file's first lines are checked before building
(UNK_SAMPLE_LINES), the whole corpus before the shards are renamed into
place. `max_unk_rate` (default DEFAULT_MAX_UNK_RATE) sets the limit.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import os
import random
import signal
import sys
import threading
import time
import uuid

from electra_tf.core.errors import InputError, WorkerLost
from electra_tf.core.fileio import (
    FolderLock,
    Progress,
    check_output_folder,
    check_text_file,
    no_empty_folder_left,
    sync_file,
    sync_folder,
)
from electra_tf.data import features as features_lib
from electra_tf.data.corpus import CORPUS_FORMATS, first_lines, is_archive, text_units
from electra_tf.data.packing import ExampleBuilder, SpecialIds, to_features
from electra_tf.text.vocab import load_vocab, tokens_sha256

STATS_FILE = features_lib.STATS_FILE
_TOKENIZE_BATCH_LINES = 4096
DEFAULT_MAX_UNK_RATE = 0.1  # English text with a matching vocab: well under 1%
UNK_SAMPLE_LINES = 1000  # lines of each file checked before building


@dataclasses.dataclass(frozen=True)
class BuildOptions:
    """What to build; see `build_pretraining_data` for the meaning of each field."""

    files: tuple[str, ...]
    vocab_file: str
    output_dir: str
    max_seq_length: int = 128
    num_shards: int = 1
    num_processes: int = 1
    seed: int = 0
    do_lower_case: bool = True
    strip_accents: bool | None = None
    overwrite: bool = False
    max_unk_rate: float = DEFAULT_MAX_UNK_RATE  # refuse above this [UNK] rate; 1.0: never
    corpus_format: str = "auto"  # data/corpus.py: text, openwebtext, or auto (by file)
    # a blank line ends a document (True), or each text file / archive member is one
    # (False); None: True for text files, False for archive members (the original's)
    blanks_separate_docs: bool | None = None


def iter_document_pieces(files, corpus_format: str = "text",
                         blanks_separate_docs: bool | None = None,
                         shuffle_seed: int | None = None, on_empty_archive=None,
                         max_lines: int = _TOKENIZE_BATCH_LINES):
    """Yields (doc_index, [sentence, ...], last) over all files, in order: each document
    in pieces of at most `max_lines` lines, `last` on its final piece (which may hold
    no line). A document is never held whole: one long file without blank lines (or
    an archive member) is read a piece at a time, as the original reads a line at a
    time. Other arguments: see iter_documents."""
    index = 0
    for _, from_archive, lines in text_units(files, corpus_format, shuffle_seed,
                                             on_empty_archive):
        split = not from_archive if blanks_separate_docs is None else blanks_separate_docs
        doc: list[str] = []
        started = False  # a piece of this document was yielded
        for line in lines:
            if line:
                doc.append(line.replace("\n", " "))
                if len(doc) >= max_lines:
                    yield index, doc, False
                    doc, started = [], True
            elif split and (doc or started):
                yield index, doc, True
                index, doc, started = index + 1, [], False
        if doc or started:
            yield index, doc, True
            index += 1


def iter_documents(files, corpus_format: str = "text",
                   blanks_separate_docs: bool | None = None, shuffle_seed: int | None = None,
                   on_empty_archive=None):
    """Yields (doc_index, [sentence, ...]) over all files, in order (or in the order
    `shuffle_seed` shuffles files and archive members into: corpus.text_units).

    Args:
      files: corpus files. corpus_format: data/corpus.py's (text, openwebtext, auto).
      blanks_separate_docs: see BuildOptions (None: per unit, True for a text file).
      on_empty_archive: see corpus.text_units.
    """
    return _joined(iter_document_pieces(files, corpus_format, blanks_separate_docs,
                                        shuffle_seed, on_empty_archive))


def _joined(pieces):
    """(doc_index, [sentence, ...]) of iter_document_pieces' pieces, each document whole."""
    doc: list[str] = []
    for index, piece, last in pieces:
        doc += piece
        if last:
            yield index, doc
            doc = []


def _pieces(options: "BuildOptions"):
    """The pieces of the corpus's documents that a build reads, in its order (the seed's)."""
    return iter_document_pieces(options.files, options.corpus_format,
                                options.blanks_separate_docs, shuffle_seed=options.seed,
                                max_lines=_TOKENIZE_BATCH_LINES)


def _documents(options: "BuildOptions"):
    """The documents a build reads, whole, in its order (`_pieces` joined)."""
    return _joined(_pieces(options))


def scan_corpus(files, corpus_format: str = "text",
                blanks_separate_docs: bool | None = None) -> tuple[int, int]:
    """(non-blank lines, documents), to validate input and size the progress bar."""
    lines = docs = 0
    meter = Progress("build_pretraining_data", unit="lines checked")  # a big corpus: minutes
    def empty(path: str) -> None:  # (a corpus of only such archives is refused as empty)
        print(f"[build_pretraining_data] note: {path} holds no file (an empty archive, or "
              "folders alone): it adds nothing", file=sys.stderr)

    for _, piece, last in iter_document_pieces(files, corpus_format, blanks_separate_docs,
                                               on_empty_archive=empty):
        docs += last
        lines += len(piece)
        meter.update(lines, extra=f"{docs:,} documents (counting before the build)")
    return lines, docs


def validate(options: BuildOptions) -> tuple[int, int]:
    """Checks everything before any output exists. Returns (lines, documents)."""
    if not 8 <= options.max_seq_length <= features_lib.MAX_SEQ_LENGTH:
        raise InputError(f"max_seq_length must be 8 to {features_lib.MAX_SEQ_LENGTH:,}, got "
                         f"{options.max_seq_length}")
    if options.num_shards < 1 or options.num_processes < 1:
        raise InputError("num_shards and num_processes must be >= 1")
    if options.seed < 0:  # (Python seeds its Random with |seed|: -1 had built seed 1's bytes)
        raise InputError(f"seed must be >= 0, got {options.seed}")
    if not 0.0 <= options.max_unk_rate <= 1.0:
        raise InputError(f"max_unk_rate must be in [0, 1], got {options.max_unk_rate}")
    if options.corpus_format not in CORPUS_FORMATS:
        raise InputError(f"corpus_format must be one of {', '.join(CORPUS_FORMATS)}, "
                         f"got {options.corpus_format!r}")
    check_output_folder(options.output_dir, "--output_dir")
    check_open_files(options)
    load_vocab(options.vocab_file)  # raises VocabError with the reason
    for path in options.files:
        if not os.path.isfile(path):
            raise InputError(f"corpus file not found: {path}")
        if not is_archive(path, options.corpus_format):  # an archive's members: when read
            check_text_file(path, compressed_hint=" (a tar of text files, as an OpenWebText "
                            "archive is: --corpus_format=openwebtext reads it)")
    # the output folder's checks before the corpus is read (an OpenWebText scan takes
    # minutes, then had told the user to pass --overwrite)
    if os.path.isdir(options.output_dir):  # the rename over one was a traceback, late
        written = {features_lib.shard_name(s, options.num_shards)
                   for s in range(options.num_shards)}
        written |= {STATS_FILE, features_lib.UNFINISHED_FILE, FolderLock.NAME}
        for name in sorted(written.intersection(os.listdir(options.output_dir))):
            if os.path.isdir(os.path.join(options.output_dir, name)):
                raise InputError(f"{os.path.join(options.output_dir, name)} is a folder where "
                                 "the build writes a file; move it away, then rerun")
    if os.path.isdir(options.output_dir) and not options.overwrite:
        existing = [f for f in os.listdir(options.output_dir)
                    if f.startswith(features_lib.SHARD_PREFIX) or f in (STATS_FILE,
                                                                         features_lib.UNFINISHED_FILE)]
        if features_lib.UNFINISHED_FILE in existing:  # (it had read as a whole build)
            raise InputError(
                f"{options.output_dir} holds the shards of a build that stopped midway "
                f"({features_lib.UNFINISHED_FILE}); pass --overwrite to build them again, or "
                "choose another --output_dir")
        if existing:
            raise InputError(
                f"{options.output_dir} already holds pre-training data ({existing[0]}, ...); "
                "pass --overwrite or choose another --output_dir")
    lines, docs = scan_corpus(options.files, options.corpus_format,
                              options.blanks_separate_docs)
    if lines == 0:
        raise InputError(f"the corpus is empty: {len(options.files)} file(s) with no text")
    if options.max_unk_rate < 1.0:
        check_unk_rate(options)
    return lines, docs


def check_open_files(options: BuildOptions) -> None:
    """Each process keeps one file open per shard it writes: raises the soft limit
    on open files to what that needs (up to the hard limit), or refuses.

    Raises:
      InputError: more shards per process than the hard limit allows.
    """
    try:
        import resource
    except ImportError:  # not a POSIX system
        return
    procs = build_processes(options)  # (the CPUs cut --num_processes: counted after it)
    per_process = -(-options.num_shards // procs)
    needed = per_process + 64  # the corpus, the vocab, TensorFlow's own
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard == resource.RLIM_INFINITY or hard >= needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))  # inherited by workers
        return
    most = min(usable_cpus(), options.num_shards)  # the processes that could run
    more = ("raise --num_processes" if -(-options.num_shards // most) + 64 <= hard else
            f"give fewer --num_shards (at most {most} processes run, one per CPU it may use"
            " and shard)")
    raise InputError(
        f"--num_shards={options.num_shards} with --num_processes={options.num_processes} "
        f"keeps {per_process} shard files open in each process, {needed} open files with the "
        f"corpus, the vocabulary and TensorFlow's, above this system's limit of {hard}; "
        f"{more} (or raise the limit: ulimit -n)")


def _unk_hint(options: BuildOptions) -> str:
    return (f"is it text, and are --vocab_file and --do_lower_case right for it? "
            f"(--max_unk_rate={options.max_unk_rate:g}; --max_unk_rate=1 builds anyway)")


def check_unk_rate(options: BuildOptions) -> None:
    """Refuses a corpus file whose first UNK_SAMPLE_LINES lines are mostly [UNK].

    Raises:
      InputError: naming the file and its [UNK] rate.
    """
    from electra_tf.text.tokenizer import Tokenizer

    tokenizer = Tokenizer(options.vocab_file, options.do_lower_case, options.strip_accents)
    for path in options.files:
        sample = first_lines(path, options.corpus_format, UNK_SAMPLE_LINES)
        ids = [i for sentence in tokenizer.encode(sample) for i in sentence]
        rate = ids.count(tokenizer.unk_id) / max(1, len(ids))
        if rate > options.max_unk_rate:
            raise InputError(f"{path}: {rate:.0%} of the tokens of its first "
                             f"{_counted(len(sample), 'line')} are [UNK]; " + _unk_hint(options))


def _new_stats() -> dict[str, int]:
    return dict(documents=0, lines=0, examples=0, tokens=0, unk_tokens=0,
                example_tokens=0, truncated_tokens=0, two_segment_examples=0)


def _build_shards(options: BuildOptions, shards: list[int], tmp_tag: str,
                  lines_done=None, total_lines=None) -> dict[int, dict[str, int]]:
    """Worker: builds the given shards. Writes them under temporary names."""
    import tensorflow as tf

    from electra_tf.text.tokenizer import Tokenizer

    tokenizer = Tokenizer(options.vocab_file, options.do_lower_case, options.strip_accents)
    special = SpecialIds(tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id)
    L = options.max_seq_length
    wanted = set(shards)
    builders = {s: ExampleBuilder(L, random.Random(options.seed * 1_000_003 + s)) for s in shards}
    stats = {s: _new_stats() for s in shards}
    writers = {s: tf.io.TFRecordWriter(os.path.join(
        options.output_dir, f".{features_lib.shard_name(s, options.num_shards)}.{tmp_tag}"))
        for s in shards}
    progress = (None if lines_done is not None
                else Progress("build_pretraining_data", total=total_lines))
    # In-process runs print their own progress; workers count into lines_done.
    total_lines = total_examples = 0

    collected = {s: 0 for s in shards}  # tokens given to a builder since its last example

    def emit(shard, example):
        nonlocal total_examples
        if example is None:
            return
        feats = to_features(example, special, L)
        st = stats[shard]
        kept = len(example.first_segment) + len(example.second_segment)
        st["truncated_tokens"] += collected[shard] - kept
        collected[shard] = 0
        st["examples"] += 1
        st["example_tokens"] += sum(feats["input_mask"])
        st["two_segment_examples"] += bool(example.second_segment)
        writers[shard].write(features_lib.serialize(feats))
        total_examples += 1

    def flush(pending):
        nonlocal total_lines
        lines = [line for _, piece, _ in pending for line in piece]
        ids = tokenizer.encode(lines)
        k = 0
        for shard, piece, last in pending:
            builder, st = builders[shard], stats[shard]
            for _ in piece:
                sentence = ids[k]
                k += 1
                st["lines"] += 1
                st["tokens"] += len(sentence)
                st["unk_tokens"] += sentence.count(tokenizer.unk_id)
                collected[shard] += len(sentence)
                emit(shard, builder.add_sentence(sentence))
            if last:
                st["documents"] += 1
                emit(shard, builder.end_document())
        total_lines += len(lines)
        if lines_done is not None:  # a worker process: the parent prints progress
            with lines_done.get_lock():
                lines_done.value += len(lines)
        if progress is not None:
            progress.update(total_lines, extra=_counted(total_examples, 'example'))

    try:
        pending, n = [], 0
        # a piece of a document at a time: a document is never held whole
        for index, piece, last in _pieces(options):
            shard = index % options.num_shards
            if shard not in wanted:
                continue
            pending.append((shard, piece, last))
            n += len(piece)
            if n >= _TOKENIZE_BATCH_LINES:
                flush(pending)
                pending, n = [], 0
        if pending:
            flush(pending)
        if progress is not None and total_lines:  # the last line says 100%
            progress.update(total_lines, extra=_counted(total_examples, 'example'), force=True)
    finally:
        for w in writers.values():
            w.close()
    return stats


def _counted(n: int, noun: str) -> str:
    """"1 example", "31,585 examples": a count in words."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _exit_with_parent(parent: int) -> None:
    """A worker's thread: ends the worker once its parent is gone (killed), so no
    orphan goes on writing shards that nothing will rename."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _init_counter(lines_done, parent: int):
    global _LINES_DONE
    _LINES_DONE = lines_done
    # Ctrl-C reaches the whole process group: the parent stops the pool (its
    # workers end with it), where each worker had also printed the start of a
    # KeyboardInterrupt traceback ("Process SpawnPoolWorker-2:").
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The parent's pid as it gave it: one killed before this worker got here is gone already.
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()


def build_processes(options: BuildOptions) -> int:
    """The processes that build the shards: --num_processes, at most one per shard and
    one per CPU this process may use."""
    return max(1, min(options.num_processes, options.num_shards, usable_cpus()))


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, as a batch system or container
    sets it), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _check_workers(workers: dict, result) -> None:
    """Raises WorkerLost where a pool worker seen before has ended while the build runs
    (killed: out of memory, or by hand). A Pool replaces a dead worker silently, and
    its jobs never finish: the build had waited forever, its progress frozen.
    `workers` (pid -> process) gathers the pool's workers across calls."""
    alive = {p.pid: p for p in mp.active_children()}
    workers.update(alive)
    dead = [p for pid, p in workers.items() if pid not in alive]
    if dead and not result.ready():
        code = dead[0].exitcode
        how = (f"was killed by {signal.Signals(-code).name}" if code is not None and code < 0
               and -code in signal.valid_signals() else f"ended (status {code})")
        raise WorkerLost(f"a build process (pid {dead[0].pid}) {how} before its shards were "
                       "done (out of memory? --num_processes=1 holds the least); nothing "
                       "was written: run the same command again")


def _pool_worker(job):
    options, shards, tmp_tag = job
    return _build_shards(options, shards, tmp_tag, _LINES_DONE)


def remove_partial_files(output_dir: str) -> None:
    """Removes the temporary shards and stats an interrupted build left in
    `output_dir` (hidden names: a glob of the shards would match them)."""
    prefixes = (f".{features_lib.SHARD_PREFIX}", f".{STATS_FILE}.")
    partial = [f for f in os.listdir(output_dir)
               if f.startswith(prefixes) and ".tmp-" in f]
    for f in partial:
        os.remove(os.path.join(output_dir, f))
    if partial:
        print(f"[build_pretraining_data] removed {len(partial)} partial file(s) of an "
              f"interrupted build from {output_dir}", file=sys.stderr)


def summarize(per_shard: dict[int, dict[str, int]], options: BuildOptions,
              seconds: float) -> dict:
    total = _new_stats()
    for st in per_shard.values():
        for k, v in st.items():
            total[k] += v
    L = options.max_seq_length
    total.update(
        fill_ratio=total["example_tokens"] / max(1, total["examples"] * L),
        unk_rate=total["unk_tokens"] / max(1, total["tokens"]),
        two_segment_fraction=total["two_segment_examples"] / max(1, total["examples"]),
        max_seq_length=L, num_shards=options.num_shards,
        num_processes=options.num_processes, seed=options.seed,
        vocab_file=os.path.abspath(options.vocab_file),
        vocab_sha256=tokens_sha256(load_vocab(options.vocab_file)),
        do_lower_case=options.do_lower_case, strip_accents=options.strip_accents,
        files=len(options.files), corpus_format=options.corpus_format,
        blanks_separate_docs=options.blanks_separate_docs, seconds=round(seconds, 3),
        lines_per_second=total["lines"] / max(seconds, 1e-9),
        tokens_per_second=total["tokens"] / max(seconds, 1e-9),
        examples_per_shard={features_lib.shard_name(s, options.num_shards): st["examples"]
                            for s, st in sorted(per_shard.items())})
    return total


# What a document is, by --blanks_separate_docs (None: auto), for the empty-shard warning.
_DOCUMENT_RULES = {True: "a blank line ends one", False: "a file or an archive's page is one",
                   None: "a blank line ends one in a text file; an archive's page is one"}


# Tokens a corpus line may hold on average and still read as one sentence a line (the
# mostly-cut-off warning blames --max_seq_length below it, the corpus above).
SENTENCE_TOKENS = 100


def build_pretraining_data(options: BuildOptions) -> dict:
    """Builds the shards and the stats JSON. Returns the stats.

    One build writes to an --output_dir at a time (FolderLock): a second would
    remove the first's temporary shards as an interrupted build's.

    Raises:
      InputError / VocabError: bad input, or the folder in use by another build,
        before anything is written.
    """
    total_lines, _ = validate(options)
    with no_empty_folder_left(options.output_dir), \
            FolderLock(options.output_dir, "--output_dir"):
        stats = _build_in(options, total_lines)
    if stats["truncated_tokens"] > stats["tokens"] / 2:
        per_line = stats["tokens"] / max(1, stats["lines"])
        # Lines of sentence length, as long as an example holds or longer: the length
        # cuts them. Shorter on average: a few very long lines hold what was cut.
        short = options.max_seq_length / 2 < per_line <= SENTENCE_TOKENS
        why = (f"its lines hold {per_line:.0f} tokens on average: give a larger "
               "--max_seq_length" + (" (the paper's 128 or 512)"
                                     if options.max_seq_length < 128 else "") if short
               else "does the corpus hold very long lines (one sentence per line is "
               "expected), or old Mac line ends (\\r only)?")
        print(f"[build_pretraining_data] warning: {stats['truncated_tokens']:,} of the "
              f"{stats['tokens']:,} tokens did not fit an example of {options.max_seq_length} "
              f"and were dropped: {why}", file=sys.stderr)
    empty = [name for name, n in stats["examples_per_shard"].items() if not n]
    if empty:
        print(f"[build_pretraining_data] warning: {len(empty)} of the {options.num_shards} "
              f"shards hold no example ({empty[0]}, ...): a document goes to one shard whole, "
              f"and the corpus has {stats['documents']:,} document(s) ("
              f"{_DOCUMENT_RULES[options.blanks_separate_docs]}"
              "); training reads the others", file=sys.stderr)
    print(f"[build_pretraining_data] {_counted(stats['examples'], 'example')} from "
          f"{_counted(stats['documents'], 'document')} / {_counted(stats['lines'], 'line')} in "
          f"{stats['seconds']:.1f}s; fill "
          f"{stats['fill_ratio']:.3f}, [UNK] rate {stats['unk_rate']:.4f}", file=sys.stderr)
    return stats


def _build_in(options: BuildOptions, total_lines: int) -> dict:
    """build_pretraining_data's work in its locked, existing --output_dir: the stats."""
    remove_partial_files(options.output_dir)
    tmp_tag = f"tmp-{uuid.uuid4().hex[:8]}"
    stats_tmp = os.path.join(options.output_dir, f".{STATS_FILE}.{tmp_tag}")
    procs = build_processes(options)
    if procs < min(options.num_processes, options.num_shards):
        # (a process per shard of 1,000 had spawned until memory ran out)
        print(f"[build_pretraining_data] note: --num_processes={options.num_processes} is more "
              f"than the {procs} CPU(s) this process may use: {procs} processes build the "
              "shards (the same bytes)", file=sys.stderr)
    jobs = [list(range(p, options.num_shards, procs)) for p in range(procs)]
    start = time.monotonic()
    per_shard: dict[int, dict[str, int]] = {}
    renaming = False
    try:
        if procs == 1:
            per_shard = _build_shards(options, jobs[0], tmp_tag, total_lines=total_lines)
        else:
            ctx = mp.get_context("spawn")  # TF is not fork-safe
            lines_done = ctx.Value("q", 0)
            progress = Progress("build_pretraining_data", total=total_lines)
            with ctx.Pool(procs, initializer=_init_counter,
                          initargs=(lines_done, os.getpid())) as pool:
                result = pool.map_async(_pool_worker, [(options, j, tmp_tag) for j in jobs])
                workers: dict[int, mp.process.BaseProcess] = {}
                while not result.ready():
                    result.wait(1.0)
                    progress.update(lines_done.value)
                    _check_workers(workers, result)
                parts = result.get()  # (a worker's error first, without a 100% line)
                # the last line says 100% (a small corpus had shown 0% until the summary:
                # the workers count a batch of lines when it is done)
                progress.update(lines_done.value, force=True)
                for part in parts:
                    per_shard.update(part)
        unk = sum(st["unk_tokens"] for st in per_shard.values())
        rate = unk / max(1, sum(st["tokens"] for st in per_shard.values()))
        if rate > options.max_unk_rate:  # the first lines of each file looked fine
            raise InputError(f"{rate:.1%} of the corpus's tokens are [UNK], nothing was "
                             f"written; " + _unk_hint(options))
        stats = summarize(per_shard, options, time.monotonic() - start)
        if not stats["examples"]:
            raise InputError(
                f"the corpus gave no examples: its {stats['lines']:,} line(s) hold no token "
                "for this vocabulary (only whitespace, control or zero-width characters?); "
                "nothing was written")
        with open(stats_tmp, "w", encoding="utf-8") as f:  # a full disk fails here, not later
            f.write(json.dumps(stats, indent=2, sort_keys=True) + "\n")
        for s in range(options.num_shards):  # on the disk before any is renamed
            sync_file(os.path.join(options.output_dir,
                                   f".{features_lib.shard_name(s, options.num_shards)}.{tmp_tag}"))
        sync_file(stats_tmp)
        # From here on nothing needs space: an earlier build's stats go first, so
        # that an interruption can leave shards without stats, never beside wrong ones,
        # and the marker says so until the new stats are in place.
        unfinished = os.path.join(options.output_dir, features_lib.UNFINISHED_FILE)
        try:
            with open(unfinished, "w", encoding="utf-8") as f:
                f.write("build_pretraining_data was stopped while it replaced the shards of "
                        "this folder; run it again with --overwrite\n")
        except OSError as e:  # nothing replaced yet: an empty marker would refuse the folder
            if os.path.isfile(unfinished):
                os.remove(unfinished)
            raise OSError(e.errno, e.strerror, unfinished) from None
        renaming = True  # the marker is in place: a rerun needs --overwrite
        if os.path.exists(os.path.join(options.output_dir, STATS_FILE)):
            os.remove(os.path.join(options.output_dir, STATS_FILE))
        for s in range(options.num_shards):
            name = features_lib.shard_name(s, options.num_shards)
            os.replace(os.path.join(options.output_dir, f".{name}.{tmp_tag}"),
                       os.path.join(options.output_dir, name))
        if options.overwrite:  # drop shards of an earlier build with another shard count
            keep = {features_lib.shard_name(s, options.num_shards)
                    for s in range(options.num_shards)}
            for f in os.listdir(options.output_dir):  # only the shards a build names
                path = os.path.join(options.output_dir, f)
                if features_lib.is_shard_name(f) and f not in keep and os.path.isfile(path):
                    os.remove(path)
        os.replace(stats_tmp, os.path.join(options.output_dir, STATS_FILE))
        sync_folder(options.output_dir)  # the renames, before the marker goes
        os.remove(unfinished)
    except KeyboardInterrupt as e:
        if renaming and not str(e):  # ("run the same command again" had been refused)
            e.args = (f"interrupted while the shards were renamed into place "
                      f"({features_lib.UNFINISHED_FILE} marks the folder); run the same "
                      "command again with --overwrite to finish",)
        raise
    finally:
        for f in os.listdir(options.output_dir):
            if f.endswith(tmp_tag):
                os.remove(os.path.join(options.output_dir, f))
    return stats
