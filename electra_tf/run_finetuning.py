r"""Fine-tunes a pre-trained ELECTRA discriminator on one task.

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
finetuned.weights.h5. `--num_trials=N` runs N trials with seeds seed .. seed+N-1
in OUT_1 .. OUT_N (the original's names) and writes every trial's dev results
and their median, mean, standard deviation, min and max to OUT/trials.json
and OUT/results.txt; re-running skips the finished trials and resumes the
interrupted one, and with --do_train=false evaluates (and with --do_predict
predicts) each trained trial in its folder.

With KERAS_BACKEND=jax the same command trains on the JAX backend
(training/backends/jax.py): the same flags, console lines and folder.
"""

from __future__ import annotations

import sys

from absl import app, flags

from electra_tf import cli
from electra_tf import flags as flags_lib
from electra_tf.core.errors import ConfigError

FLAGS = flags.FLAGS


def require_tensorflow() -> None:
    """One line where TensorFlow or tensorflow-text is missing (a machine set up for
    JAX alone): fine-tuning reads its tasks through tf.data and tokenizes with
    tensorflow-text on either Keras backend. (It had been a traceback from the
    tokenizer's import.)"""
    import importlib.util

    for module, package in (("tensorflow", "TensorFlow"), ("tensorflow_text",
                                                           "tensorflow-text")):
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:  # an import hook that refuses it
            found = False
        if not found:
            raise ConfigError(
                f"run_finetuning needs {package}, which is not installed here: on either "
                "Keras backend (KERAS_BACKEND=jax too) it reads the task through tf.data "
                "and tokenizes with tensorflow-text; install electra_tf with its "
                "requirements (pip install -e .), or fine-tune where they are")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    from electra_tf.tasks.registry import task_from_config
    from electra_tf.training import backends
    from electra_tf.training.loop import different_settings, settings_digest

    config, run = flags_lib.finetuning_configs()

    def make_task(config):
        try:  # the task options (double_unordered, the SQuAD head and null rule) reach it
            return task_from_config(config)
        except ConfigError:
            raise
        except ValueError as e:  # options the task refuses together (combined + joint)
            raise ConfigError(f"--task_name={config.task_name}: {e}") from None

    def make_trainer(config, run):
        task = make_task(config)
        return (trainer_class(task, config, run, started) if started
                else trainer_class(task, config, run))

    # Bad flags and task options: one line before any folder is made, and before
    # TensorFlow or JAX is imported (seconds).
    make_task(config)
    from electra_tf.tasks.registry import unused_options

    for option in unused_options(config):  # given, and changing nothing for this task
        print(f"[finetune] note: {option} does nothing here", file=sys.stderr)
    if config.seed + run.num_trials - 1 > 2**32 - 1:  # trial k's seed is seed + k - 1
        raise ConfigError(f"--seed={config.seed} with --num_trials={run.num_trials}: the last "
                          f"trial's seed {config.seed + run.num_trials - 1} is past 2**32 - 1 "
                          "(it had failed after the trials before it); give a lower "
                          + ("--num_trials" if run.num_trials > 2**32 else
                             "--seed or --num_trials"))
    require_tensorflow()
    backend = backends.name()  # KERAS_BACKEND: training/backends/tensorflow.py or jax.py
    # Before any TF op or JAX device query: collectives and logical devices
    # are fixed at start-up.
    started = backends.load(backend).start(flags_lib.runtime_options())
    trainer_class = backends.finetuning_class(backend)
    agree = backends.agreement(backend, started)  # a multi-worker run's workers
    if agree is not None and agree([settings_digest([run.num_trials, run.keep_all_models])]):
        # first: a single run and a group compare other things (other collectives)
        raise different_settings("--strategy=multi_worker", "the workers were started with "
                                 "different --num_trials or --keep_all_models; start every "
                                 "worker with the same flags")
    note = backends.bf16_note(backend, run.mixed_precision)
    if note:
        print(f"[finetune] {note}", file=sys.stderr)

    if run.num_trials > 1 and not run.do_train:  # a trained group's trials, evaluated
        from electra_tf.core.words import count
        from electra_tf.training.trials import evaluate_trials

        summary, n = evaluate_trials(config, run, config.task_name, make_trainer,
                                     trainer_class.final_results,
                                     chief=backends.is_chief(backend, started), agree=agree,
                                     backend=trainer_class.backend)
        medians = {split: {k: round(v["median"], 4) for k, v in metrics.items()}
                   for split, metrics in summary.items()}
        print(f"[finetune] done: {count(n, 'trial')} " + (f"evaluated, medians {medians}" if run.do_eval
                                                else "run"), file=sys.stderr)
        return
    if run.num_trials > 1:  # MODEL_DIR_1 .. MODEL_DIR_N and MODEL_DIR/trials.json
        from electra_tf.training.trials import run_trials

        chief = backends.is_chief(backend, started)  # the one that writes the group's files
        summary = run_trials(config, run, config.task_name, make_trainer,
                             trainer_class.final_results, chief=chief,
                             agree=agree, backend=trainer_class.backend)
        medians = {split: {k: round(v["median"], 4) for k, v in metrics.items()}
                   for split, metrics in summary.items()}
        if not chief:
            print(f"[finetune] done: medians {medians}", file=sys.stderr)
            return
        from electra_tf.core.words import count
        from electra_tf.training.trials import read_trials

        recorded = read_trials(run.model_dir)["trials"]  # a rerun asking fewer keeps all
        diverged = sum(bool(t.get("diverged")) for t in recorded)
        print(f"[finetune] done: {count(len(recorded), 'trial')}"
              + (f" ({diverged} diverged)" if diverged else "") + f", medians {medians}",
              file=sys.stderr)
        return
    from electra_tf.training.trials import check_single_run_folder

    check_single_run_folder(run.model_dir)
    trainer = make_trainer(config, run)
    results = trainer.train()
    print(f"[finetune] done: {trainer.final_results(results)}", file=sys.stderr)


def run():
    """The command line (console script `electra-finetune`)."""
    flags_lib.define_finetuning_flags()
    cli.run_command(main, __name__)  # (its flagfiles first, as every command's)


if __name__ == "__main__":
    run()
