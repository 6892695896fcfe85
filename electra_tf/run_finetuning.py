"""Fine-tunes a pre-trained ELECTRA discriminator on one task.

    python -m electra_tf.run_finetuning --flagfile=configs/glue_mnli.flags \
        --init_checkpoint=PRETRAIN_MODEL_DIR --data_dir=glue_data/MNLI --model_dir=OUT

Tasks: cola sst2 mrpc stsb qqp mnli qnli rte wnli (GLUE TSVs), squad_v1 squad_v2
(SQuAD JSON), newsqa naturalqs triviaqa searchqa and mrqa (MRQA shared-task
files, .jsonl.gz or .jsonl), ner / chunking (CoNLL files), and on your own files:
classification (TSV, CSV or JSONL; single texts, pairs or --regression) and
tagging (CoNLL files with any tag set). The learning rate, layer-wise
decay, epochs and sequence length default to the original's per model size
and task; every FinetuningConfig field is a flag. Re-running resumes. OUT
gets results.json (metrics after every epoch), the official prediction files
for the dev (and with --do_predict test) splits, checkpoints and
finetuned.weights.h5.

With KERAS_BACKEND=jax the same command trains on the JAX backend
(training/backends/jax.py): the same flags, console lines and folder.
"""

from __future__ import annotations

import sys

from absl import app, flags

from electra_tf import cli
from electra_tf import flags as flags_lib

FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    from electra_tf.core.errors import ConfigError
    from electra_tf.tasks.registry import task_from_config
    from electra_tf.training import backends

    backend = backends.name()  # KERAS_BACKEND: training/backends/tensorflow.py or jax.py
    # Before any TF op or JAX device query: collectives and logical devices
    # are fixed at start-up.
    started = backends.load(backend).start(flags_lib.runtime_options())
    config, run = flags_lib.finetuning_configs()
    try:  # the task options (double_unordered, the SQuAD head and null rule) reach the task
        task = task_from_config(config)
    except ConfigError:
        raise
    except ValueError as e:  # options the task refuses together (combined rule + joint head)
        raise ConfigError(f"--task_name={config.task_name}: {e}") from None
    trainer_class = backends.finetuning_class(backend)
    trainer = (trainer_class(task, config, run, started) if started
               else trainer_class(task, config, run))
    results = trainer.train()
    print(f"[finetune] done: {trainer.final_results(results)}", file=sys.stderr)


def run():
    """The command line (console script `electra-finetune`)."""
    flags_lib.define_finetuning_flags()
    cli.run_command(main, __name__, argv=cli.flagfiles_first(sys.argv))


if __name__ == "__main__":
    run()
