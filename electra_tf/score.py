"""Scores text with a pre-trained Electric model: one score per input line.

    python -m electra_tf.score --model_dir=M --input=sentences.txt [--energies]

(`electra-score` is the same command.) Each line of --input is one text; the
output has one line per input line, in order: its score, -sum_t E(x)_t over
its word pieces (higher: more likely; electra_tf/serving/scoring.py), from one
forward pass. With --energies each line is instead a JSON object: score,
tokens (the word pieces), energies (E(x)_t of each) and truncated. --output
writes the lines to a file (atomically) instead of stdout.
"""

from __future__ import annotations

import json
import os
import sys
import time

from absl import app, flags

from electra_tf import cli
from electra_tf.core import fileio
from electra_tf.core.errors import InputError
from electra_tf.text.cleaning import newline_lines

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


_CHUNK_TEXTS = 8192  # texts scored before their results are formatted


def read_lines(path: str) -> list[str]:
    """The texts of --input ('-': stdin): split at "\\n" only (and a "\\r" before it),
    so that a line holding U+2028, a form feed or a lone "\\r" is still one text
    with one score.

    Raises:
      InputError: the file cannot be read, or is not UTF-8.
    """
    try:
        if path == "-":
            if sys.stdin is None:
                raise InputError("--input -: the standard input is closed")
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"--input {path}: {e}") from None
    return newline_lines(text)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


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
    from electra_tf.folders import PretrainingFolder
    from electra_tf.serving.scoring import (  # TensorFlow: after the checks
        check_electric_folder,
        load_scorer,
    )

    # the model's objective before the input is read (a million lines took a minute first)
    check_electric_folder(PretrainingFolder.open(FLAGS.model_dir, what="--model_dir"))
    lines = read_lines(FLAGS.input)
    t0 = time.monotonic()
    scorer = load_scorer(FLAGS.model_dir, FLAGS.vocab_file, FLAGS.max_seq_length)
    t1 = time.monotonic()
    meter = fileio.Progress("score", total=len(lines), unit="texts")  # a line every 5 s
    # Each chunk's results become their output lines at once: a million texts' word
    # pieces and energies, held to the end, had taken 1.3 GB.
    out, truncated = [], 0
    for start in range(0, len(lines), _CHUNK_TEXTS):
        for s in scorer.score(lines[start:start + _CHUNK_TEXTS], FLAGS.batch_size,
                              lambda n, done=start: meter.update(done + n)):
            truncated += s.truncated
            out.append(json.dumps({"score": s.score, "tokens": s.tokens,
                                   "energies": s.energies, "truncated": s.truncated},
                                  ensure_ascii=False) if FLAGS.energies else f"{s.score:.6f}")
    t2 = time.monotonic()
    text = "".join(line + "\n" for line in out)
    if FLAGS.output:
        fileio.write_output_text(FLAGS.output, text)
    else:
        cli.write_stdout(text)
    print(f"[score] {len(out)} texts in {t2 - t1:.2f}s (model loaded in {t1 - t0:.1f}s)"
          + (f"; {truncated} truncated to {scorer.max_seq_length - 2} word pieces"
             if truncated else ""),
          file=sys.stderr)


def run():
    """The command line (`electra-score`)."""
    define_flags()
    cli.run_command(main, __name__)


if __name__ == "__main__":
    run()
