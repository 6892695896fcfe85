"""The host loop both pre-training loops run (TensorFlow: training.py, JAX: jax_training.py).

`train(trainer)` resumes from the latest checkpoint, then runs the trainer's
compiled steps `iterations_per_loop` at a time (never across a phase
boundary), and after each chunk prints a console line, writes TensorBoard
summaries, saves a checkpoint when one is due and evaluates when asked. At
the end it evaluates on held-out records and writes the folder artifacts.py
describes. Ctrl-C lets the running chunk finish (runtime.InterruptGate: a
second Ctrl-C stops at once), saves a checkpoint, then stops with one line
(runtime.Interrupted); a record found corrupt mid-run saves a checkpoint,
then stops with one line naming the file.

A trainer provides: `config`, `run`, `chief`, `files` ({"train", "eval"}),
`model`, `optimizer`, `multi_worker`, `tensorflow_io` (whether it reads its
data through TensorFlow; if not, neither does this loop: summaries go
through the tensorboard package), the `step` property, `phase_at(step)`,
`restore()`, `make_train_iterator(step)`, `train_steps(iterator, n)`,
`evaluate()`, `save_checkpoint(force)` and
`initialize_discriminator_from_generator()`.
"""

from __future__ import annotations

import os
import re
import sys
import time

from electra_tf import artifacts, reporting, runtime
from electra_tf.data.tfrecord_reader import RecordError, locate_corrupt_record
from electra_tf.errors import InputError


def log(trainer, message: str, everyone: bool = False) -> None:
    if trainer.chief or everyone:
        runtime.log("pretrain", message)


def train(trainer, stop_at_step: int | None = None) -> dict:
    """Trains to num_train_steps (resuming if possible); returns the final eval.

    Args:
      trainer: a Pretraining or JaxPretraining.
      stop_at_step: leave early at this step, with a checkpoint, as a
        preempted job would (the schedule still targets num_train_steps).
    """
    cfg, run = trainer.config, trainer.run
    os.makedirs(run.model_dir, exist_ok=True)
    trainer.restore()
    if trainer.chief:
        for name in artifacts.remove_stale_temporaries(run.model_dir):
            log(trainer, f"removed {name}, left by a write that was killed midway")
        artifacts.write_pretraining_config(run.model_dir, cfg, run)
    train_writer, eval_writer = (
        runtime.summary_writer(os.path.join(run.model_dir, name) if trainer.chief else None,
                               tensorflow=trainer.tensorflow_io) for name in ("train", "eval"))
    log_every = run.log_every_steps or cfg.iterations_per_loop
    end = min(cfg.num_train_steps, stop_at_step or cfg.num_train_steps)
    try:
        with runtime.InterruptGate() as gate:
            if trainer.step == 0 and run.eval_data:
                report_eval(trainer, trainer.evaluate(), eval_writer)
            start_step, start_time = trainer.step, time.monotonic()
            iterator = trainer.make_train_iterator(trainer.step)
            while trainer.step < end:
                gate.check()  # a Ctrl-C stops here, between chunks (InterruptGate)
                step = trainer.step
                phase = trainer.phase_at(step)
                if phase.name == "two_stage_discriminator" and step == phase.start:
                    trainer.initialize_discriminator_from_generator()
                n = min(log_every - step % log_every, end - step, phase.end - step)
                if run.eval_every_steps:
                    n = min(n, run.eval_every_steps - step % run.eval_every_steps)
                t0 = time.monotonic()
                results = trainer.train_steps(iterator, n)
                results["learning_rate"] = float(trainer.optimizer.learning_rate)  # next step's
                results["sequences_per_second"] = (n * cfg.train_batch_size
                                                   / (time.monotonic() - t0))
                step = trainer.step
                runtime.write_scalars(train_writer, step, results)
                eta = (time.monotonic() - start_time) / max(step - start_step, 1) * (
                    cfg.num_train_steps - step)
                log(trainer, reporting.train_line(results, step, cfg.num_train_steps, eta))
                trainer.save_checkpoint()
                if run.eval_every_steps and step % run.eval_every_steps == 0 \
                        and step < cfg.num_train_steps:
                    report_eval(trainer, trainer.evaluate(), eval_writer)
            trainer.save_checkpoint(force=True)
            if trainer.step < cfg.num_train_steps:
                log(trainer, f"stopped at step {trainer.step} as asked; run again to resume")
                return {}
            final = trainer.evaluate() if run.eval_data else {}
    except KeyboardInterrupt:
        trainer.save_checkpoint(force=True)
        raise runtime.Interrupted(trainer.step) from None
    except _tensorflow_data_errors() as e:
        raise bad_record(trainer, e) from None
    except RecordError as e:  # the NumPy input names the file itself
        raise InputError(f"{e}, met at step {trainer.step}; {_save_after_bad_record(trainer)}; "
                         "replace or remove that file, then rerun to resume") from None
    report_eval(trainer, final, eval_writer)
    if trainer.chief:
        artifacts.save_discriminator(run.model_dir, trainer.model.kept_discriminator())
        artifacts.save_generator(run.model_dir, trainer.model.generator)
        artifacts.write_final_eval(run.model_dir, trainer.step, final)
        log(trainer, f"wrote {run.model_dir}/{artifacts.DISCRIMINATOR_WEIGHTS} and "
            f"{artifacts.DISCRIMINATOR_CONFIG}")
    checksum = runtime.weights_checksum(trainer.model.trainable_variables)
    log(trainer, f"final weights checksum {checksum:.8e}"
        + ("" if trainer.chief else " (worker)"), everyone=True)
    return final


def report_eval(trainer, results: dict, writer) -> None:
    if results:
        runtime.write_scalars(writer, trainer.step, results)
        log(trainer, reporting.eval_line(results, trainer.step))


def _tensorflow_data_errors() -> tuple:
    """tf.data's errors for a bad record; none where TensorFlow was never imported."""
    tf = sys.modules.get("tensorflow")
    return (tf.errors.DataLossError, tf.errors.InvalidArgumentError) if tf else ()


def _save_after_bad_record(trainer) -> str:
    """Saves a checkpoint where one can be; says what happened."""
    if trainer.multi_worker:
        return "no checkpoint saved (a multi-worker save needs every worker)"
    trainer.save_checkpoint(force=True)
    return f"checkpoint saved at step {trainer.step}"


def bad_record(trainer, error) -> Exception:
    """A corrupt or misshaped record met mid-run: save a checkpoint, name the file.

    tf.data's messages name neither the file nor the flag; the file is
    found from the byte offset (`locate_corrupt_record`). Other errors are
    returned unchanged (bugs keep their traceback).
    """
    message = error.message or ""
    corrupt = re.search(r"(corrupted|truncated) record at \d+", message)
    misshaped = re.search(r"Number of int64 values != expected[^\n\]]*"
                          r"|Feature: \w+ \(data type: int64\) is required[^\n\]]*", message)
    if not corrupt and not misshaped:
        return error
    step = trainer.step
    saved = _save_after_bad_record(trainer)
    if misshaped:
        return InputError(
            f"a record of --train_data or --eval_data does not fit --max_seq_length="
            f"{trainer.config.max_seq_length} ({misshaped.group(0).strip()}), met at step "
            f"{step}; {saved}; rebuild that file, then rerun to resume")
    path = locate_corrupt_record(trainer.files["train"] + trainer.files["eval"], message)
    where = path or "a file of --train_data or --eval_data"
    return InputError(f"{where}: corrupt TFRecord ({corrupt.group(0)}), met at step {step}; "
                      f"{saved}; replace or remove that file, then rerun to resume")
