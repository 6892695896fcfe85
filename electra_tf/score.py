"""Scores text with a pre-trained Electric model: one score per input line.

    python -m electra_tf.score --model_dir=M --input=sentences.txt [--energies]

(`electra-score` is the same command.) Each line of --input is one text; the
output has one line per input line, in order: its score, -sum_t E(x)_t over
its word pieces (higher: more likely; electra_tf/serving/scoring.py), from one
forward pass. With --energies each line is instead a JSON object: score,
tokens (the word pieces), energies (E(x)_t of each) and truncated. --output
writes the lines to a file (atomically) instead of stdout. The input is read,
scored and written a chunk at a time: a file of any length scores in the same
memory.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import time
from collections.abc import Iterator

from absl import app, flags

from electra_tf import cli
from electra_tf.core import fileio
from electra_tf.core.errors import InputError
from electra_tf.core.words import count

FLAGS = flags.FLAGS


def define_flags():
    """Flags of the command line (defined only when run as a program)."""
    flags.DEFINE_string("model_dir", None, "Pre-training model_dir of an Electric model "
                        "(--objective=electric), or a converted one.")
    flags.DEFINE_string("input", None, "Text file: one text per line ('-': stdin).")
    flags.DEFINE_string("output", "", "Write the lines here (default: stdout).")
    flags.DEFINE_bool("energies", False, "Print a JSON object per line with the word "
                      "pieces and their energies.")
    flags.DEFINE_integer("batch_size", 32, "Texts per forward pass.")
    flags.DEFINE_integer("max_seq_length", 0, "Longer texts are truncated (and say so); 0: "
                         "the length the model was pre-trained at (its "
                         "pretraining_config.json; 128 where it records none).")
    flags.DEFINE_string("vocab_file", "", "The vocabulary (default: the model_dir's).")


_CHUNK_TEXTS = 8192  # texts read, scored and written at a time ...
_CHUNK_BYTES = 8 << 20  # ... or fewer, once they hold this many bytes
# A longer line is read to its last space within this many bytes (its first word pieces,
# the only ones scored, come from far fewer); the rest of it is passed over unread. A
# line of 20 MB had been read and tokenized whole, 35 bytes of memory a byte.
MAX_LINE_BYTES = 1 << 20


def _read_line(f) -> bytes:
    """The next line of a binary file (b"" at its end), cut at its last space or tab
    within MAX_LINE_BYTES (else at a character's end) if longer: the rest is skipped.
    The part of the window left out is checked as UTF-8 too: a bad byte there returns
    the window whole, for _text_of to refuse by its column."""
    raw = f.readline(MAX_LINE_BYTES + 1)
    if len(raw) <= MAX_LINE_BYTES or raw.endswith(b"\n"):
        return raw
    rest = raw
    while rest and not rest.endswith(b"\n"):
        rest = f.readline(MAX_LINE_BYTES)
    window = raw[:MAX_LINE_BYTES]
    space = max(window.rfind(b" "), window.rfind(b"\t"))
    cut = space if space > 0 else len(window)
    try:
        window.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.reason != "unexpected end of data":  # a bad byte, not a character cut
            return window
        cut = min(cut, e.start)  # the character cut at the limit is left out
    return window[:cut]


def _text_of(raw: bytes, path: str, number: int) -> str:
    """One line of --input (its "\n", and a "\r" before it, dropped) as text."""
    raw = raw[:-1] if raw.endswith(b"\n") else raw
    raw = raw[:-1] if raw.endswith(b"\r") else raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"--input {path}:{number}: not UTF-8 (byte 0x{raw[e.start]:02x} at "
                         f"column {e.start + 1}){fileio.utf16_hint(raw)}; save the file as UTF-8") \
            from None


def _open_input(path: str):
    if path == "-":
        if sys.stdin is None:
            raise InputError("--input -: the standard input is closed")
        return contextlib.nullcontext(sys.stdin.buffer)
    try:
        return open(path, "rb")
    except OSError as e:
        raise InputError(f"--input {path}: {e.strerror or e}") from None


def read_chunks(path: str, size: int = _CHUNK_TEXTS) -> Iterator[list[str]]:
    """The texts of --input ('-': stdin), `size` at a time: split at "\n" only (and a
    "\r" before it), so that a line holding U+2028, a form feed or a lone "\r" is still
    one text with one score. A file is read as it is scored, never whole, and a line
    of more than MAX_LINE_BYTES to its last space within them (`_read_line`).

    Raises:
      InputError: the file cannot be read, or a line is not UTF-8 (its number).
    """
    number, chunk, held = 0, [], 0
    with _open_input(path) as f:
        try:
            while raw := _read_line(f):  # a binary file's lines end at b"\n" only
                number += 1
                chunk.append(_text_of(raw, path, number))
                held += len(raw)
                if len(chunk) == size or held >= _CHUNK_BYTES:
                    yield chunk
                    chunk, held = [], 0
        except OSError as e:  # a folder, a read error
            raise InputError(f"--input {path}: {e.strerror or e}") from None
    if chunk:
        yield chunk


def count_lines(path: str) -> int:
    """How many texts a --input file holds, each line checked as read_chunks reads it:
    a file that is not UTF-8 is refused before the model loads or anything is written.

    Raises:
      InputError: as read_chunks.
    """
    return sum(len(chunk) for chunk in read_chunks(path))


def read_lines(path: str) -> list[str]:
    """Every text of --input at once (read_chunks)."""
    return [text for chunk in read_chunks(path) for text in chunk]


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def _check_not_the_models(output: str, model_dir: str, vocab_file: str) -> None:
    """Refuses an --output that is a file of the model scored, at any depth of its
    folder (its weights, config, vocabulary, checkpoints, event files: replaced by the
    scores, the model or its resume had been lost with exit status 0), or the
    --vocab_file. A new file in the model's folder may be written."""
    if os.path.isdir(model_dir):
        folder = os.path.realpath(model_dir)
    elif os.path.isfile(model_dir):  # its weights file
        folder = os.path.dirname(os.path.realpath(model_dir))
    else:  # not there: the model's own check names it
        folder = None
    target = os.path.realpath(output)
    if folder and os.path.isfile(target) and target.startswith(folder + os.sep):
        raise InputError(f"--output {output} is a file of the model --model_dir names "
                         f"({os.path.relpath(target, folder)}); write the scores elsewhere")
    if vocab_file and _same_file(vocab_file, output):
        raise InputError(f"--output {output} is the --vocab_file; write the scores elsewhere")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    for name in ("model_dir", "input"):
        if not getattr(FLAGS, name):
            raise InputError(f"--{name} is required")
    if FLAGS.batch_size < 1:
        raise InputError(f"--batch_size must be >= 1, got {FLAGS.batch_size}")
    if FLAGS.output:
        fileio.check_output_file(FLAGS.output, "--output")
        if FLAGS.input != "-" and _same_file(FLAGS.input, FLAGS.output):
            raise InputError(f"--output {FLAGS.output} is the --input file it would replace; "
                             "write the scores elsewhere")
        _check_not_the_models(FLAGS.output, FLAGS.model_dir, FLAGS.vocab_file)
        for line in fileio.stale_write_note(os.path.realpath(FLAGS.output)):
            print(f"[score] {line}", file=sys.stderr)  # (a kill mid-write left it)
    # a file is read twice (checked and counted, then scored); a pipe (`<(...)`, a FIFO,
    # /dev/stdin) only once, as it comes, as `-` is: read twice, it had scored nothing
    regular = FLAGS.input != "-" and os.path.isfile(FLAGS.input)
    if regular:  # one that cannot be opened, before the model is looked at
        _open_input(FLAGS.input).close()
    elif FLAGS.input != "-" and not os.path.exists(FLAGS.input):
        raise InputError(f"--input {FLAGS.input}: No such file or directory")
    elif os.path.isdir(FLAGS.input):
        raise InputError(f"--input {FLAGS.input}: Is a directory")
    from electra_tf.folders import PretrainingFolder
    from electra_tf.serving.scoring import (  # TensorFlow (seconds): after the input's checks
        check_electric_folder,
        load_scorer,
    )

    # the model's objective before the input is read (a million lines took a minute first)
    folder = PretrainingFolder.open(FLAGS.model_dir, what="--model_dir")
    check_electric_folder(folder)
    # (a length past the model's positions is refused as the scorer loads: that line alone)
    warning = (0 < FLAGS.max_seq_length <= folder.encoder.max_position_embeddings
               and folder.untrained_positions_warning(FLAGS.max_seq_length,
                                                      "--max_seq_length"))
    if warning:
        print(f"[score] {warning}", file=sys.stderr)
    # a file is checked whole first (a bad line refused before any score is written) and
    # counted for the progress lines; stdin and pipes are scored as they come
    total = count_lines(FLAGS.input) if regular else None
    t0 = time.monotonic()
    scorer = load_scorer(FLAGS.model_dir, FLAGS.vocab_file, FLAGS.max_seq_length)
    t1 = time.monotonic()
    meter = fileio.Progress("score", total=total, unit="texts")  # a line every 5 s
    counts = {"texts": 0, "truncated": 0}

    def pieces():
        """Each chunk's output lines as one piece, as it is scored: neither the input
        nor the output is held whole (a million texts' word pieces and energies, held
        to the end, had taken 1.3 GB)."""
        for chunk in read_chunks(FLAGS.input):
            lines = []
            for s in scorer.score(chunk, FLAGS.batch_size,
                                  lambda n, done=counts["texts"]: meter.update(done + n)):
                counts["truncated"] += s.truncated
                lines.append(json.dumps({"score": s.score, "tokens": s.tokens,
                                         "energies": s.energies, "truncated": s.truncated},
                                        ensure_ascii=False) + "\n" if FLAGS.energies
                             else f"{s.score:.6f}\n")
            counts["texts"] += len(chunk)
            yield "".join(lines)

    written = 0  # texts whose score lines are out whole

    def lines_out(n: int) -> None:
        nonlocal written
        written += n

    def tracked():
        nonlocal written
        for piece in pieces():
            yield piece
            written = counts["texts"]  # (asked for the next: this one is written)

    # a regular file is replaced once every text is scored; a pipe, a device or
    # /dev/stdout is written as it goes, as stdout is. On stdout the lines are counted
    # as its descriptor takes them (a signal or a full disk midway had been said to
    # leave "the first 0 texts" where thousands were out); a signal is never held
    # back (a reader that stalls must not keep a SIGTERM from ending the command), so
    # the line after them may be cut.
    whole = bool(FLAGS.output) and fileio.writes_atomically(FLAGS.output)
    try:
        if FLAGS.output:
            fileio.write_output_text(FLAGS.output, tracked())
        else:
            for piece in pieces():
                cli.write_stdout(piece, lines_out)
    except KeyboardInterrupt as e:  # (the generic line, "run the same command again to
        # finish", read as if a rerun went on from where this one stopped)
        out = (f"the scores of the first {count(written, 'text')} were written whole, and "
               "the lines after them may be cut short")
        e.args = ((f"interrupted; --output {FLAGS.output} is as it was (it is written once "
                   "every text is scored); rerun the command: it starts from the first line"
                   if whole else
                   f"interrupted: {out}; rerun the command for the rest: it starts from the "
                   "first line"),)
        raise
    except InputError as e:  # a bad line of stdin or a pipe, met after scores were out
        if not whole and written:
            e.args = (f"{e.args[0]} (the scores of the first {count(written, 'text')} were "
                      "written before it)",)
        raise
    except OSError as e:  # a full disk or a file size limit under the stream
        if not whole and written and e.errno not in (errno.EPIPE,):
            raise OSError(e.errno, f"{e.strerror}; the scores of the first "
                                   f"{count(written, 'text')} were written whole, and the "
                                   "lines after them may be cut short", e.filename) from None
        raise
    t2 = time.monotonic()
    print(f"[score] {count(counts['texts'], 'text')} in {t2 - t1:.2f}s (model loaded in "
          f"{t1 - t0:.1f}s)" + (f"; {counts['truncated']} truncated to "
                                f"{scorer.max_seq_length - 2} word pieces"
                                if counts["truncated"] else ""),
          file=sys.stderr)


def run():
    """The command line (`electra-score`). Scores run on Keras' TensorFlow backend
    whatever KERAS_BACKEND says (a JAX run's folder scores alike)."""
    cli.tensorflow_backend("score", "scores are computed with Keras on TensorFlow")
    define_flags()
    cli.run_command(main, __name__)


if __name__ == "__main__":
    run()
