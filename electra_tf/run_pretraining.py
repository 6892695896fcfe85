r"""Pre-trains ELECTRA: generator + discriminator, replaced token detection.

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

import dataclasses
import os
import sys

from absl import app, flags

from electra_tf import cli
from electra_tf import flags as flags_lib
from electra_tf.core.config import JAX_MULTI_HOST_OPTIONS
from electra_tf.core.errors import ConfigError, InputError

FLAGS = flags.FLAGS
flags_lib.define_pretraining_flags()
flags_lib.define_demo_flags()


def _check_local_records(run) -> None:
    """--train_data/--eval_data patterns on the local file system must match a
    file (remote ones, gs://..., are checked by the input pipeline)."""
    from electra_tf.core.fileio import expand_files

    for flag, patterns in (("--train_data", run.train_data), ("--eval_data", run.eval_data)):
        local = [p for p in patterns.split(",") if p.strip() and "://" not in p]
        if local:
            expand_files(local, flag)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    # Bad flags, a missing vocab or no training file are one line before Keras
    # and its backend are imported (seconds). Not on a multi-host run: there a
    # process that stops before joining its cluster leaves the others waiting
    # for it, while one that stops after start-up is seen by them (they stop
    # too, see training/backends). The demo's flags come from the data it
    # builds below.
    multi_host = (FLAGS.strategy == "multi_worker" or FLAGS.jax_num_processes != 1
                  or bool(FLAGS.jax_coordinator_address))
    # configs/demo.flags with one's own --train_data: the user's data, not the demo's
    # (building the demo corpus takes minutes and is not what was asked for).
    demo_data_dir = "" if FLAGS["train_data"].present else FLAGS.demo_data_dir
    configs = None
    if demo_data_dir and not multi_host:  # the flags before the demo's data is built
        flags_lib.check_pretraining_flags(("train_data", "eval_data", "vocab_file",
                                           "vocab_size"))
        from electra_tf.text.vocab_builder import check_vocab_size

        try:  # (checked after the corpus was built, and named as --vocab_size)
            check_vocab_size(FLAGS.demo_vocab_size)
        except InputError as e:
            raise InputError(f"--demo_{e}") from None
    if not (demo_data_dir or multi_host):
        configs = flags_lib.pretraining_configs()
        _check_local_records(configs[1])
    if not multi_host and os.path.isdir(FLAGS.model_dir) and os.access(FLAGS.model_dir, os.W_OK):
        # A run already writing there: one line now, not after the model is built and
        # described (train() takes the lock for the run's length).
        from electra_tf.core.fileio import FolderLock

        with FolderLock(FLAGS.model_dir, "--model_dir"):
            pass
    from electra_tf.training import backends

    backend = backends.name()  # KERAS_BACKEND: training/backends/tensorflow.py or jax.py
    options = flags_lib.runtime_options()
    if backend != "jax":  # the TensorFlow loop had trained, ignoring them
        given = [f.name for f in dataclasses.fields(options)
                 if f.name.startswith("jax_") and getattr(options, f.name) != f.default]
        if given:
            hosts = not set(given).isdisjoint(JAX_MULTI_HOST_OPTIONS)
            raise ConfigError(f"--{', --'.join(given)}: for KERAS_BACKEND=jax, and this run is on "
                              f"{backend}" + (" (the TensorFlow loop's multi-host is "
                                              "--strategy=multi_worker)" if hosts else ""))
    # Before any TF op or JAX device query: collectives, logical devices and
    # the multi-host run are fixed at start-up.
    started = backends.load(backend).start(options)
    if demo_data_dir:
        from electra_tf.data.demo_corpus import prepare_demo_data

        demo = prepare_demo_data(demo_data_dir, FLAGS.demo_vocab_size,
                                 FLAGS.max_seq_length, corpus=FLAGS.demo_corpus)
        for name, value in demo.items():
            if not FLAGS[name].present:  # explicit flags win
                FLAGS[name].value = value
    config, run = configs or flags_lib.pretraining_configs()
    for line in config.unused():  # given, and changing nothing for this objective
        print(f"[pretrain] note: {line}", file=sys.stderr)
    trainer_class = backends.pretraining_class(backend)
    trainer = trainer_class(config, run, started) if started else trainer_class(config, run)
    jax_backend = backend == "jax"
    from electra_tf.training.reporting import models_line

    models = models_line(config, trainer.model.discriminator, trainer.model.generator)
    print(f"[pretrain] {config.model_size} {models}; "
          f"{trainer.num_replicas} replica(s), strategy={run.strategy}, "
          f"jit={True if jax_backend else run.jit_compile}, precision={run.mixed_precision}"
          f"{', backend=jax, input=' + run.jax_input_pipeline if jax_backend else ''}",
          file=sys.stderr)
    print(f"[pretrain] {trainer.flops.summary()}", file=sys.stderr)
    for line in trainer.memory_warnings():
        print(f"[pretrain] warning: {line}", file=sys.stderr)
    note = backends.bf16_note(backend, run.mixed_precision)
    if note:
        print(f"[pretrain] {note}", file=sys.stderr)
    trainer.train()


def run():
    """The command line (console script `electra-pretrain`)."""
    cli.run_command(main, __name__)  # (its flagfiles first, as every command's)


if __name__ == "__main__":
    run()
