r"""Pre-training TFRecords -> one packed file for the JAX backend's fastest input.

    python -m electra_tf.pack_pretraining_data \
        --records='pretrain_tfrecords/pretrain_data.tfrecord*' \
        --output=pretrain_tfrecords/pretrain_data.packed
    KERAS_BACKEND=jax python -m electra_tf.run_pretraining --jax_input_pipeline=packed \
        --train_data=pretrain_tfrecords/pretrain_data.packed ...

The packed file (electra_tf/data/packed.py) holds the same examples, without
padding, memory-mapped at training time: batches cost a few array gathers
instead of a Python parse of every record. Records built by the original's
build_pretraining_dataset.py pack too.
"""

from __future__ import annotations

import sys

from absl import app, flags

from electra_tf import cli
from electra_tf.core.errors import InputError

FLAGS = flags.FLAGS


def define_flags():
    """Flags of this entry point (defined only when it runs as main)."""
    flags.DEFINE_string("records", None, "Comma-separated globs of pre-training TFRecords.")
    flags.DEFINE_string("output", None, "The packed file to write.")
    flags.DEFINE_integer("max_seq_length", None,
                         "L the records must have (default: the first record's).")
    flags.DEFINE_bool("overwrite", False, "Replace an earlier packed file at --output (never "
                      "one of the --records, nor a file of another kind).")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    for name in ("records", "output"):
        if not FLAGS[name].value:
            raise InputError(f"--{name} is required")
    from electra_tf.data.packed import pack

    stats = pack(FLAGS.records, FLAGS.output, FLAGS.max_seq_length,
                 overwrite=FLAGS.overwrite)
    print(f"[pack] {stats['examples']:,} examples of max_seq_length {stats['max_seq_length']} "
          f"({stats['tokens']:,} tokens, largest id {stats['max_id']:,}) from "
          f"{stats['files']} file(s) -> {FLAGS.output} ({stats['bytes'] / 2 ** 20:,.1f} MiB)",
          file=sys.stderr)


def run():
    """The command line (console script `electra-pack-pretraining-data`)."""
    define_flags()
    cli.run_command(main, __name__)


if __name__ == "__main__":
    run()
