"""Pre-trains ELECTRA: generator + discriminator, replaced token detection.

    python -m electra_tf.run_pretraining --flagfile=configs/base.flags \
        --train_data='DATA/pretrain_data.tfrecord*' --eval_data='HELDOUT/*' \
        --vocab_file=vocab.txt --model_dir=MODEL_DIR

    # the demo: builds its own data from the docstrings of the standard library and
    # the installed packages
    python -m electra_tf.run_pretraining --flagfile=configs/demo.flags

    # the JAX backend, reading the records without TensorFlow (a machine with JAX alone)
    KERAS_BACKEND=jax python -m electra_tf.run_pretraining --jax_input_pipeline=numpy ...

    # multi-host JAX: the same command on every host, with its own --jax_process_id
    KERAS_BACKEND=jax python -m electra_tf.run_pretraining ... \
        --jax_coordinator_address=HOST0:1234 --jax_num_processes=2 --jax_process_id=0

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
from electra_tf.config import ConfigError

FLAGS = flags.FLAGS
flags_lib.define_pretraining_flags()
flags_lib.define_demo_flags()
flags.DEFINE_enum("jax_input_pipeline", "tf.data", ["tf.data", "numpy"],
                  "KERAS_BACKEND=jax: read the records with tf.data (as the TF loop), or with "
                  "NumPy alone (data/numpy_pipeline.py; the run then never imports TensorFlow).")
flags.DEFINE_string("jax_coordinator_address", "", "KERAS_BACKEND=jax multi-host: host:port of "
                    "process 0, the same for every process (jax.distributed).")
flags.DEFINE_integer("jax_num_processes", 1, "KERAS_BACKEND=jax multi-host: number of processes.")
flags.DEFINE_integer("jax_process_id", 0, "KERAS_BACKEND=jax multi-host: this process's index; "
                     "0 writes checkpoints, summaries and the folder.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    import keras

    jax_backend = keras.backend.backend() == "jax"  # KERAS_BACKEND=jax: jax_training.py
    multihost = FLAGS.jax_coordinator_address or FLAGS.jax_num_processes != 1
    if multihost and not jax_backend:
        raise ConfigError("--jax_coordinator_address/--jax_num_processes are for "
                          "KERAS_BACKEND=jax; the TensorFlow loop's multi-host is "
                          "--strategy=multi_worker")
    strategy = None
    if jax_backend:
        from electra_tf import jax_training

        if multihost:  # before anything touches JAX's devices
            jax_training.start_multihost(FLAGS.jax_coordinator_address,
                                         FLAGS.jax_num_processes, FLAGS.jax_process_id)
    else:
        from electra_tf import runtime

        # Before any TF op: collectives and logical devices are fixed at start-up.
        strategy = runtime.make_strategy(FLAGS.strategy, FLAGS.num_devices, FLAGS.tpu,
                                         FLAGS.worker_startup_timeout_s)
    if FLAGS.demo_data_dir:
        from electra_tf.data.demo_corpus import prepare_demo_data

        demo = prepare_demo_data(FLAGS.demo_data_dir, FLAGS.demo_vocab_size,
                                 FLAGS.max_seq_length, corpus=FLAGS.demo_corpus)
        for name, value in demo.items():
            if not FLAGS[name].present:  # explicit flags win
                FLAGS[name].value = value
    config, run = flags_lib.pretraining_configs()
    if jax_backend:
        trainer = jax_training.JaxPretraining(config, run, FLAGS.jax_input_pipeline)
    else:
        from electra_tf import training

        trainer = training.Pretraining(config, run, strategy)
    print(f"[pretrain] {config.model_size} discriminator "
          f"{trainer.model.discriminator.count_params():,} params, generator "
          f"{trainer.model.generator.count_params():,} (shared counted in both); "
          f"{trainer.num_replicas} replica(s), strategy={run.strategy}, "
          f"jit={True if jax_backend else run.jit_compile}, precision={run.mixed_precision}"
          f"{', backend=jax, input=' + FLAGS.jax_input_pipeline if jax_backend else ''}",
          file=sys.stderr)
    trainer.train()


if __name__ == "__main__":
    app.run(lambda argv: cli.run_cli(lambda: main(argv)))
