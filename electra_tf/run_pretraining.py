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

import sys

from absl import app, flags

from electra_tf import cli
from electra_tf import flags as flags_lib

FLAGS = flags.FLAGS
flags_lib.define_pretraining_flags()
flags.DEFINE_string("demo_data_dir", "", "If set, build the embedded demo corpus, its vocab and "
                    "its train/held-out records here on first use, and train on them.")
flags.DEFINE_integer("demo_vocab_size", 4000, "Vocabulary size of the demo data.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    import keras

    from electra_tf import runtime, training

    jax_backend = keras.backend.backend() == "jax"  # KERAS_BACKEND=jax: jax_training.py
    # Before any TF op: collectives and logical devices are fixed at start-up.
    strategy = None if jax_backend else runtime.make_strategy(
        FLAGS.strategy, FLAGS.num_devices, FLAGS.tpu, FLAGS.worker_startup_timeout_s)
    if FLAGS.demo_data_dir:
        from electra_tf.data.demo_corpus import prepare_demo_data

        demo = prepare_demo_data(FLAGS.demo_data_dir, FLAGS.demo_vocab_size,
                                 FLAGS.max_seq_length)
        for name, value in demo.items():
            if not FLAGS[name].present:  # explicit flags win
                FLAGS[name].value = value
    config, run = flags_lib.pretraining_configs()
    if jax_backend:
        from electra_tf.jax_training import JaxPretraining

        trainer = JaxPretraining(config, run)
    else:
        trainer = training.Pretraining(config, run, strategy)
    print(f"[pretrain] {config.model_size} discriminator "
          f"{trainer.model.discriminator.count_params():,} params, generator "
          f"{trainer.model.generator.count_params():,} (shared counted in both); "
          f"{trainer.num_replicas} replica(s), strategy={run.strategy}, "
          f"jit={True if jax_backend else run.jit_compile}, precision={run.mixed_precision}"
          f"{', backend=jax' if jax_backend else ''}", file=sys.stderr)
    trainer.train()


if __name__ == "__main__":
    app.run(lambda argv: cli.run_cli(lambda: main(argv)))
