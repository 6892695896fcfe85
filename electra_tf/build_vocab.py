r"""Learns a BERT-style WordPiece vocabulary with tensorflow-text's learner.

    python -m electra_tf.build_vocab --corpus='data/*.txt' --vocab_size=30522 \
        --output=vocab.txt [--nodo_lower_case] [--strip_accents=auto|true|false]

The special tokens keep the ids of BERT's uncased vocab ([PAD]=0, [UNK]=100,
[CLS]=101, [SEP]=102, [MASK]=103); the learning itself is
`electra_tf.text.vocab_builder.build_vocab`.
"""

from __future__ import annotations

from absl import app, flags

from electra_tf import cli
from electra_tf.core.errors import InputError
from electra_tf.text.vocab_builder import build_vocab

FLAGS = flags.FLAGS


def define_flags():
    """Flags of this entry point (defined only when it runs as main)."""
    flags.DEFINE_string("corpus", None, "Comma-separated globs of text files.")
    flags.DEFINE_integer("vocab_size", 30522, "Vocabulary size to learn (specials included); "
                         "every character of the corpus is kept as a token, which a small "
                         "corpus's alphabet can take past it.")
    flags.DEFINE_string("output", None, "Where to write vocab.txt.")
    flags.DEFINE_bool("do_lower_case", True, "Lower-case the text (uncased model).")
    cli.define_strip_accents_flag()
    flags.DEFINE_integer("min_count", 10, "Lowest frequency the learner's threshold search "
                         "considers; lower it for small corpora.")
    flags.DEFINE_integer("max_lines", 0, "Read at most this many lines (0: all).")
    flags.DEFINE_bool("overwrite", False, "Replace an existing --output file.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    for name in ("corpus", "output"):
        if not FLAGS[name].value:
            raise InputError(f"--{name} is required")
    build_vocab(FLAGS.corpus, FLAGS.vocab_size, FLAGS.output, FLAGS.do_lower_case,
                cli.tri_state(FLAGS.strip_accents), FLAGS.min_count, FLAGS.max_lines,
                FLAGS.overwrite)


def run():
    """The command line (console script `electra-build-vocab`)."""
    define_flags()
    cli.run_command(main, __name__)


if __name__ == "__main__":
    run()
