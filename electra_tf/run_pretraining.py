"""Pre-trains ELECTRA: generator + discriminator, replaced token detection.

    python -m electra_tf.run_pretraining --flagfile=configs/base.flags \
        --train_data='DATA/pretrain_data.tfrecord*' --eval_data='HELDOUT/*' \
        --vocab_file=vocab.txt --model_dir=MODEL_DIR

    # the demo: builds its own data from the Python standard library's docstrings
    python -m electra_tf.run_pretraining --flagfile=configs/demo.flags

Re-running the same command resumes from the latest checkpoint in model_dir.
At the end, MODEL_DIR holds discriminator.weights.h5 and
discriminator_config.json (what fine-tuning loads), the checkpoints, and
TensorBoard summaries under train/ and eval/.
"""

from __future__ import annotations

import os
import sys

from absl import app, flags

from electra_tf import cli
from electra_tf import flags as flags_lib

FLAGS = flags.FLAGS
flags_lib.define_pretraining_flags()
flags.DEFINE_string("demo_data_dir", "", "If set, build the embedded demo corpus, its vocab and "
                    "its train/held-out records here on first use, and train on them.")
flags.DEFINE_integer("demo_vocab_size", 4000, "Vocabulary size of the demo data.")


def prepare_demo_data(data_dir: str, vocab_size: int, max_seq_length: int) -> dict:
    """Builds (once) the stdlib-docstring corpus, vocab and records. Returns paths."""
    from electra_tf.build_vocab import build_vocab
    from electra_tf.data.builder import BuildOptions, build_pretraining_data
    from electra_tf.data.demo_corpus import write_corpus
    from electra_tf.data.features import shard_name

    corpus = os.path.join(data_dir, "corpus.txt")
    vocab = os.path.join(data_dir, "vocab.txt")
    records = os.path.join(data_dir, f"records_{max_seq_length}")
    num_shards = 10  # shards 0-8 train, shard 9 is held out for eval
    if not os.path.exists(corpus):
        stats = write_corpus(corpus)
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
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    from electra_tf import training

    # Before any TF op: collectives and logical devices are fixed at start-up.
    strategy = training.make_strategy(FLAGS.strategy, FLAGS.num_devices, FLAGS.tpu)
    if FLAGS.demo_data_dir:
        demo = prepare_demo_data(FLAGS.demo_data_dir, FLAGS.demo_vocab_size,
                                 FLAGS.max_seq_length)
        for name, value in demo.items():
            if not FLAGS[name].present:  # explicit flags win
                FLAGS[name].value = value
    config, run = flags_lib.pretraining_configs()
    trainer = training.Pretraining(config, run, strategy)
    print(f"[pretrain] {config.model_size} discriminator "
          f"{trainer.model.discriminator.count_params():,} params, generator "
          f"{trainer.model.generator.count_params():,} (shared counted in both); "
          f"{trainer.num_replicas} replica(s), strategy={run.strategy}, "
          f"jit={run.jit_compile}, precision={run.mixed_precision}", file=sys.stderr)
    trainer.train()


if __name__ == "__main__":
    app.run(lambda argv: cli.run_cli(lambda: main(argv)))
