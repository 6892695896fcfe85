r"""Raw text -> pre-training TFRecords (the original's build_pretraining_dataset.py).

    python -m electra_tf.build_pretraining_data --corpus='data/*.txt' \
        --vocab_file=vocab.txt --output_dir=pretrain_tfrecords \
        --max_seq_length=128 --num_shards=64 --num_processes=8 --seed=0

    # OpenWebText as distributed: the .xz archives that openwebtext.tar.xz extracts to
    python -m electra_tf.build_pretraining_data --corpus='openwebtext/*.xz' ...

Input: one sentence per line, a blank line between documents; or OpenWebText
archives (.xz tars of .txt files, read without extracting them: each page one
document, as the original's build_openwebtext_pretraining_dataset.py). Output:
`pretrain_data.tfrecord-SSSSS-of-NNNNN` shards of tf.train.Examples with int64
`input_ids`, `input_mask`, `segment_ids`, and `pretrain_data_stats.json`.
The same seed and shard count give the same bytes, whatever --num_processes.
"""

from __future__ import annotations

from absl import app, flags

from electra_tf import cli
from electra_tf.core.errors import InputError
from electra_tf.core.fileio import expand_files

FLAGS = flags.FLAGS


def define_flags():
    """Flags of this entry point (defined only when it runs as main)."""
    from electra_tf.data.builder import DEFAULT_MAX_UNK_RATE, UNK_SAMPLE_LINES
    from electra_tf.data.corpus import CORPUS_FORMATS

    flags.DEFINE_string("corpus", None, "Comma-separated globs of text files (or of "
                        "OpenWebText's .xz archives).")
    flags.DEFINE_enum("corpus_format", "auto", list(CORPUS_FORMATS),
                      "text: every file is text; openwebtext: every file is an archive (a tar, "
                      "xz-compressed, of .txt files: OpenWebText's openwebtext/*.xz); auto: an "
                      "archive where the file starts as an .xz file does.")
    flags.DEFINE_enum("blanks_separate_docs", "auto", ["auto", "true", "false"],
                      "true: a blank line ends a document; false: each text file or archive "
                      "member is one document (blank lines skipped); auto: true for text "
                      "files, false for archive members (the original's OpenWebText builder).")
    flags.DEFINE_string("vocab_file", None, "WordPiece vocab.txt.")
    flags.DEFINE_string("output_dir", None, "Where to write the shards.")
    flags.DEFINE_integer("max_seq_length", 128, "L: tokens per example, [CLS]/[SEP] included.")
    flags.DEFINE_integer("num_shards", 1, "Output files.")
    flags.DEFINE_integer("num_processes", 1, "Worker processes (at most num_shards are used).")
    flags.DEFINE_integer("seed", 0, "Seed of the packing randomness.")
    flags.DEFINE_bool("do_lower_case", True, "Lower-case the text (uncased vocab).")
    cli.define_strip_accents_flag()
    flags.DEFINE_bool("overwrite", False, "Replace pre-training data already in --output_dir.")
    flags.DEFINE_float(
        "max_unk_rate", DEFAULT_MAX_UNK_RATE,
        "Refuse to build, writing nothing, when more than this fraction of the tokens is [UNK], "
        f"in the first {UNK_SAMPLE_LINES} lines of any corpus file or in the whole corpus (a "
        "binary file, another language, the wrong vocab or --do_lower_case). 1: never refuse.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    for name in ("corpus", "vocab_file", "output_dir"):
        if not FLAGS[name].value:
            raise InputError(f"--{name} is required")
    from electra_tf.data.builder import BuildOptions, build_pretraining_data

    build_pretraining_data(BuildOptions(
        files=tuple(expand_files(FLAGS.corpus)), vocab_file=FLAGS.vocab_file,
        output_dir=FLAGS.output_dir, max_seq_length=FLAGS.max_seq_length,
        num_shards=FLAGS.num_shards, num_processes=FLAGS.num_processes, seed=FLAGS.seed,
        do_lower_case=FLAGS.do_lower_case, strip_accents=cli.tri_state(FLAGS.strip_accents),
        overwrite=FLAGS.overwrite, max_unk_rate=FLAGS.max_unk_rate,
        corpus_format=FLAGS.corpus_format,
        blanks_separate_docs=cli.tri_state(FLAGS.blanks_separate_docs)))


def run():
    """The command line (console script `electra-build-pretraining-data`)."""
    define_flags()
    cli.run_command(main, __name__)


if __name__ == "__main__":
    run()
