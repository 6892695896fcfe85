"""The pre-training loop: read this file top to bottom.

`Pretraining` builds the model (ElectraPretrainer), the optimizer and the
input pipeline, then runs the training algorithm as a list of phases
(algorithms.py): joint and adversarial training are one phase; two-stage
training is G alone by MLM, then D (initialized from G) with G frozen.

One optimizer step, per replica (the pieces are in runtime.py):
  1. the phase's forward/backward (XLA-compiled with jit_compile): the
     pretrainer's forward pass with the phase's objective, the loss divided
     by the number of replicas and micro-batches, dense gradients;
  2. gradient accumulation over `gradient_accumulation_steps` micro-batches;
  3. the all-reduce, global-norm clipping and AdamW update, outside XLA.
The host loop runs `iterations_per_loop` steps per tf.function call, then
logs a console line and TensorBoard summaries, saves a checkpoint every
`save_checkpoints_steps` and evaluates on held-out records. The input
pipeline is a pure function of the seed and is fast-forwarded on resume, so
an interrupted run resumes exactly where it stopped. The folder it writes is
described in artifacts.py.

Bad input stops a run before anything is built or written (`preflight`): data
files that are missing, not TFRecords or built for another max_seq_length,
and a model_dir whose checkpoints another vocabulary or other model sizes
wrote. A record found corrupt mid-training, or Ctrl-C, saves a checkpoint
first, then stops with one line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time

import keras
import tensorflow as tf

from electra_tf import artifacts, runtime
from electra_tf.algorithms import Phase, make_phases
from electra_tf.config import ConfigError, PretrainingConfig, RunConfig
from electra_tf.data.masking import MaskingConfig
from electra_tf.data.pipeline import check_records, locate_corrupt_record, pretraining_dataset
from electra_tf.errors import InputError
from electra_tf.objectives.auc import auc_from_histograms
from electra_tf.pretrainer import ElectraPretrainer
from electra_tf.tokenization import Tokenizer


# === Checks before anything is built or written ===
def preflight(config: PretrainingConfig, run: RunConfig) -> dict[str, list[str]]:
    """Refuses bad input before a run builds or writes anything.

    Checks the data (`pipeline.check_records`: every glob matches, every file
    starts with a record of config.max_seq_length; one record per file) and,
    when model_dir already holds checkpoints, that this run can resume them
    (`check_resume`). Returns {"train": files, "eval": files}.

    Raises:
      InputError, ConfigError, VocabError: one line naming the flag or file.
    """
    files = {"train": check_records(run.train_data, config.max_seq_length, "--train_data"),
             "eval": (check_records(run.eval_data, config.max_seq_length, "--eval_data")
                      if run.eval_data else [])}
    check_resume(config, run)
    return files


# Flags whose values can change the variables (and so the checkpoints).
SHAPE_FLAGS = ("model_size", "model_hparam_overrides", "embedding_size", "vocab_size",
               "max_seq_length", "generator_hidden_size", "generator_layers",
               "untied_generator", "untied_generator_embeddings", "uniform_generator",
               "electra_objective", "objective", "training_algorithm")


def _variable_signature(config: PretrainingConfig) -> tuple:
    """What fixes the model's variables: the encoders' sizes, the weight sharing, the heads."""
    from electra_tf.objectives.variants import get_objective

    objective = get_objective(config)
    return (config.discriminator_config(), config.generator_config(), config.untied_generator,
            config.untied_generator_embeddings, config.uniform_generator,
            objective.head_kind, objective.uses_discriminator, config.training_algorithm)


def check_resume(config: PretrainingConfig, run: RunConfig) -> None:
    """Refuses to resume a model_dir whose checkpoints this run cannot continue.

    Only when model_dir holds checkpoints. The vocabulary must be the one
    recorded (same tokens, by fingerprint; folders written before the
    fingerprint skip this check), and no flag may change the variables'
    shapes. Nothing is written here.

    Raises:
      ConfigError: naming the flag, the recorded value and the new one.
    """
    if not artifacts.has_checkpoints(run.model_dir):
        return
    recorded = artifacts.read_pretraining_config(run.model_dir)
    where = f"{run.model_dir} holds checkpoints of a run"
    want = recorded.get("vocab_sha256", "")
    if want:
        got = artifacts.vocab_fingerprint(run.vocab_file)
        if got != want:
            from electra_tf.tokenization import load_vocab

            old = recorded.get("run", {}).get("vocab_file", "?")
            old_size = recorded.get("pretraining", {}).get("vocab_size", "?")
            size = len(load_vocab(run.vocab_file))
            raise ConfigError(
                f"--vocab_file={run.vocab_file} ({size} tokens, sha256 {got[:12]}) "
                f"is not the vocabulary {where} on --vocab_file={old} ({old_size} tokens, "
                f"sha256 {want[:12]}); resume with that vocabulary, or use another --model_dir")
    if "pretraining" not in recorded:
        return
    try:
        before = PretrainingConfig.from_dict(recorded["pretraining"])
        old_signature = _variable_signature(before)
    except (ConfigError, TypeError, ValueError):  # an older config: restore() checks the shapes
        return
    if _variable_signature(config) == old_signature:
        return
    changed = []
    for name in SHAPE_FLAGS:
        old, new = getattr(before, name), getattr(config, name)
        if old == new:
            continue
        try:  # only the flags that change the variables by themselves
            relevant = _variable_signature(
                dataclasses.replace(before, **{name: new}).validate()) != old_signature
        except (ConfigError, ValueError):
            relevant = True
        if relevant:
            changed.append(f"--{name}={_flag_value(new)} (it was --{name}={_flag_value(old)})")
    raise ConfigError(
        f"{where} with other variable shapes: " + ("; ".join(changed) or "other sizes")
        + "; rerun with the recorded values, or use another --model_dir")


def _flag_value(value) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else str(value)


class Pretraining:
    """Builds everything a pre-training run needs and runs it.

    Args:
      config: hyperparameters (PretrainingConfig).
      run: where and how (RunConfig).
      strategy: a strategy made at program start (runtime.make_strategy); by
        default one is made from `run` here.
    """

    def __init__(self, config: PretrainingConfig, run: RunConfig,
                 strategy: tf.distribute.Strategy | None = None):
        self.config, self.run = config.validate(), run.validate()
        if config.train_batch_size % run.gradient_accumulation_steps:
            raise ConfigError("train_batch_size must be a multiple of gradient_accumulation_steps")
        self.strategy = strategy or runtime.make_strategy(
            run.strategy, run.num_devices, run.tpu, run.worker_startup_timeout_s)
        runtime.set_precision(run.mixed_precision)
        self.files = preflight(config, run)
        tokenizer = Tokenizer(run.vocab_file, do_lower_case=config.do_lower_case)
        if tokenizer.vocab_size != config.vocab_size:
            raise ConfigError(f"vocab_size={config.vocab_size} but {run.vocab_file} holds "
                              f"{tokenizer.vocab_size} tokens; set --vocab_size to match")
        self.num_replicas = self.strategy.num_replicas_in_sync
        micro = config.train_batch_size // run.gradient_accumulation_steps
        if micro % self.num_replicas:
            raise ConfigError(f"the micro-batch {micro} does not split over "
                              f"{self.num_replicas} replicas")
        self.chief = runtime.is_chief(self.strategy)
        with self.strategy.scope():
            keras.utils.set_random_seed(config.seed)  # the initial weights follow the seed
            self.model = ElectraPretrainer(config)
            self.model.build_with_dummy_batch()
            self.optimizer = runtime.pretraining_optimizer(config, self.model.trainable_variables)
        self.masking = MaskingConfig.from_tokenizer(
            tokenizer, config.mask_prob, config.resolved_max_predictions_per_seq,
            **self.model.objective.masking)
        self.phases = make_phases(config, self.model)
        self._compiled: dict[str, tuple] = {}  # phase name -> (train loop, accumulators)
        self._eval = None
        self.checkpoints = runtime.Checkpoints(
            self.model, self.optimizer, artifacts.checkpoint_dir(run.model_dir),
            config.keep_checkpoint_max, config.save_checkpoints_steps, self.strategy)

    @property
    def step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    def phase_at(self, step: int) -> Phase:
        return next(p for p in self.phases if p.start <= step < p.end)

    def restore(self) -> int:
        """Resumes from the latest checkpoint if there is one. Returns the step."""
        path = self.checkpoints.restore()
        if path:
            self._log(f"resumed from {path} at step {self.step}")
        return self.step

    def initialize_discriminator_from_generator(self):
        """Two-stage training: D's encoder takes G's weights (equal sizes)."""
        self.model.discriminator.encoder.set_weights(self.model.generator.encoder.get_weights())
        self._log(f"step {self.step}: discriminator initialized from the generator")

    # === Data ===
    def make_train_iterator(self, step: int):
        """The distributed training input, positioned at optimizer step `step`.

        Resuming skips the batches already used (before parsing and masking,
        which is cheap) instead of checkpointing the iterator: this works for
        every strategy, and checkpoints stay small.
        """
        k = self.run.gradient_accumulation_steps
        return iter(self._input(self.run.train_data, self.config.train_batch_size // k,
                                self.config.seed, True, skip_batches=step * k))

    def _input(self, files, global_batch, seed, is_training, skip_batches=0):
        """Masked batches, each input pipeline reading its share (InputContext)."""
        return self.strategy.distribute_datasets_from_function(lambda ctx: pretraining_dataset(
            files, ctx.get_per_replica_batch_size(global_batch), self.config.max_seq_length,
            self.masking, is_training=is_training, input_context=ctx, seed=seed,
            skip_batches=skip_batches))

    # === The step ===
    def _forward_metrics(self, batch, seed, objective):
        outputs = self.model(batch, training=False, seed=seed, objective=objective)
        return self.model.losses_and_metric_sums(batch, outputs, objective)

    def _accumulators(self, objective, training: bool) -> runtime.Accumulators:
        """Host sums of what a loop reports, shaped by one forward pass."""
        batch = next(iter(pretraining_dataset(
            self.run.train_data, 2, self.config.max_seq_length, self.masking, seed=0,
            shuffle_buffer=1)))
        losses, sums = self._forward_metrics(batch, tf.constant([0, 0], tf.int32), objective)
        spec = {"loss/" + n: v.shape for n, v in losses.items()}
        spec.update({n: v.shape for n, v in sums.items()})
        if training:
            spec["grad_norm"] = ()
        return runtime.Accumulators(spec)

    def _compile(self, phase: Phase):
        """The phase's traced train loop and its accumulators (built once)."""
        if phase.name in self._compiled:
            return self._compiled[phase.name]
        k, variables = self.run.gradient_accumulation_steps, list(phase.variables)
        scale = float(self.num_replicas * k)

        def forward_backward(batch, seed):
            with tf.GradientTape() as tape:
                outputs = self.model(batch, training=True, seed=seed, objective=phase.objective)
                losses, sums = self.model.losses_and_metric_sums(batch, outputs,
                                                                 phase.objective)
                scaled = losses["loss"] / scale
            return losses, sums, runtime.dense_gradients(tape, scaled, variables)

        fwd_bwd = tf.function(forward_backward, jit_compile=self.run.jit_compile)

        def replica_step(micro_batches):  # gradient accumulation over k micro-batches
            total = None
            for i, batch in enumerate(micro_batches):
                out = fwd_bwd(batch, runtime.replica_seed(self.config.seed,
                                                          self.optimizer.iterations, i, k))
                total = out if total is None else tf.nest.map_structure(tf.add, total, out)
            losses, sums, grads = total
            losses = {n: v / k for n, v in losses.items()}
            norm = runtime.apply_reduced_gradients(self.optimizer, grads, variables,
                                                   self.config.clip_norm)
            return losses, sums, norm

        acc = self._accumulators(phase.objective, training=True)

        @tf.function
        def train_loop(iterator, num_steps):
            for _ in tf.range(num_steps):
                micro = tuple(next(iterator) for _ in range(k))
                losses, sums, norm = self.strategy.run(replica_step, args=(micro,))
                acc.add(self.strategy, {**{"loss/" + n: v for n, v in losses.items()},
                                        **sums, "grad_norm": norm})

        self._compiled[phase.name] = (train_loop, acc)
        return self._compiled[phase.name]

    def train_steps(self, iterator, num_steps: int) -> dict:
        """Runs `num_steps` optimizer steps of the current phase; returns their metrics.

        Args:
          iterator: from `make_train_iterator(self.step)`.
          num_steps: steps to run in one traced call (all within one phase).

        Returns:
          per-step means of the losses and grad_norm, the metric ratios and
          disc_auc over these steps.
        """
        train_loop, acc = self._compile(self.phase_at(self.step))
        acc.reset()
        train_loop(iterator, tf.constant(num_steps))
        return _with_auc(acc.results(num_steps))

    def evaluate(self, num_steps: int | None = None) -> dict:
        """Metrics of the original's eval, on up to num_eval_steps held-out batches."""
        if not self.run.eval_data:
            return {}
        if self._eval is None:
            objective, seed = self.model.objective, self.config.seed + 1
            fwd = tf.function(lambda b, s: self._forward_metrics(b, s, objective),
                              jit_compile=self.run.jit_compile)
            acc = self._accumulators(objective, training=False)

            @tf.function
            def eval_step(batch, index):
                out = self.strategy.run(
                    lambda b: fwd(b, runtime.replica_seed(seed, index)), args=(batch,))
                acc.add(self.strategy, {**{"loss/" + n: v for n, v in out[0].items()}, **out[1]})

            self._eval = (eval_step, acc)
        eval_step, acc = self._eval
        acc.reset()
        n = 0
        for batch in self._input(self.run.eval_data, self.config.eval_batch_size,
                                 self.config.seed + 1, False):
            if n >= (num_steps or self.config.num_eval_steps):
                break
            eval_step(batch, tf.constant(n, tf.int32))
            n += 1
        if n == 0:
            self._log("warning: the eval data is smaller than one eval batch; no eval")
            return {}
        return _with_auc(acc.results(n))

    # === The host loop ===
    def train(self, stop_at_step: int | None = None) -> dict:
        """Trains to num_train_steps (resuming if possible); returns the final eval.

        Args:
          stop_at_step: leave early at this step, with a checkpoint, as a
            preempted job would (the schedule still targets num_train_steps).
        """
        cfg, run = self.config, self.run
        os.makedirs(run.model_dir, exist_ok=True)
        self.restore()
        if self.chief:
            for name in artifacts.remove_stale_temporaries(run.model_dir):
                self._log(f"removed {name}, left by a write that was killed midway")
            artifacts.write_pretraining_config(run.model_dir, cfg, run)
        train_writer, eval_writer = (
            tf.summary.create_file_writer(os.path.join(run.model_dir, name)) if self.chief
            else tf.summary.create_noop_writer() for name in ("train", "eval"))
        log_every = run.log_every_steps or cfg.iterations_per_loop
        end = min(cfg.num_train_steps, stop_at_step or cfg.num_train_steps)
        try:
            if self.step == 0 and run.eval_data:
                self._report_eval(self.evaluate(), eval_writer)
            start_step, start_time = self.step, time.monotonic()
            iterator = self.make_train_iterator(self.step)
            while self.step < end:
                phase = self.phase_at(self.step)
                if phase.name == "two_stage_discriminator" and self.step == phase.start:
                    self.initialize_discriminator_from_generator()
                n = min(log_every - self.step % log_every, end - self.step,
                        phase.end - self.step)
                if run.eval_every_steps:
                    n = min(n, run.eval_every_steps - self.step % run.eval_every_steps)
                t0 = time.monotonic()
                results = self.train_steps(iterator, n)
                results["learning_rate"] = float(self.optimizer.learning_rate)  # next step's
                results["sequences_per_second"] = n * cfg.train_batch_size / (time.monotonic()
                                                                              - t0)
                self._report(results, train_writer, start_step, start_time)
                self.checkpoints.save()
                if run.eval_every_steps and self.step % run.eval_every_steps == 0 \
                        and self.step < cfg.num_train_steps:
                    self._report_eval(self.evaluate(), eval_writer)
            self.checkpoints.save(force=True)
            if self.step < cfg.num_train_steps:
                self._log(f"stopped at step {self.step} as asked; run again to resume")
                return {}
            final = self.evaluate() if run.eval_data else {}
        except KeyboardInterrupt:
            self.checkpoints.save(force=True)
            raise runtime.Interrupted(self.step) from None
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
            raise self._bad_record(e) from None
        self._report_eval(final, eval_writer)
        if self.chief:
            artifacts.save_discriminator(run.model_dir, self.model.kept_discriminator())
            artifacts.save_generator(run.model_dir, self.model.generator)
            artifacts.write_final_eval(run.model_dir, self.step, final)
            self._log(f"wrote {run.model_dir}/{artifacts.DISCRIMINATOR_WEIGHTS} and "
                      f"{artifacts.DISCRIMINATOR_CONFIG}")
        checksum = runtime.weights_checksum(self.model.trainable_variables)
        self._log(f"final weights checksum {checksum:.8e}"
                  + ("" if self.chief else " (worker)"), everyone=True)
        return final

    def _bad_record(self, error: tf.errors.OpError) -> Exception:
        """A corrupt or misshaped record met mid-run: save a checkpoint, name the file.

        tf.data's messages name neither the file nor the flag; the file is
        found from the byte offset (`locate_corrupt_record`). Other errors
        are returned unchanged (bugs keep their traceback).
        """
        message = error.message or ""
        corrupt = re.search(r"(corrupted|truncated) record at \d+", message)
        misshaped = re.search(r"Number of int64 values != expected[^\n\]]*"
                              r"|Feature: \w+ \(data type: int64\) is required[^\n\]]*",
                              message)
        if not corrupt and not misshaped:
            return error
        step = self.step
        if isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy):
            saved = "no checkpoint saved (a multi-worker save needs every worker)"
        else:
            self.checkpoints.save(force=True)
            saved = f"checkpoint saved at step {step}"
        if misshaped:
            return InputError(
                f"a record of --train_data or --eval_data does not fit --max_seq_length="
                f"{self.config.max_seq_length} ({misshaped.group(0).strip()}), met at step "
                f"{step}; {saved}; rebuild that file, then rerun to resume")
        path = locate_corrupt_record(self.files["train"] + self.files["eval"], message)
        where = path or "a file of --train_data or --eval_data"
        return InputError(f"{where}: corrupt TFRecord ({corrupt.group(0)}), met at step {step}; "
                          f"{saved}; replace or remove that file, then rerun to resume")

    def _log(self, message: str, everyone: bool = False):
        if self.chief or everyone:
            runtime.log("pretrain", message)

    def _report(self, results, writer, start_step, start_time):
        step, total = self.step, self.config.num_train_steps
        runtime.write_scalars(writer, step, results)
        eta = (time.monotonic() - start_time) / max(step - start_step, 1) * (total - step)
        nan = float("nan")
        self._log(
            f"step {step}/{total} | loss {results['loss']:.4f} (mlm {results.get('mlm_loss', 0):.3f}"
            f" disc {results.get('disc_loss', nan):.4f}) | mlm_acc "
            f"{results.get('masked_lm_accuracy', nan):.3f} disc_auc "
            f"{results.get('disc_auc', nan):.3f} | lr {results['learning_rate']:.2e} | "
            f"{results['sequences_per_second']:.0f} seq/s | eta {eta / 60:.1f} min")

    def _report_eval(self, results, writer):
        if not results:
            return
        runtime.write_scalars(writer, self.step, results)
        self._log(f"eval at step {self.step}: " + ", ".join(
            f"{k} {v:.4f}" for k, v in sorted(results.items())))


def _with_auc(results: dict) -> dict:
    """Replaces the summed AUC histograms by disc_auc."""
    if "auc/pos" in results:
        results["disc_auc"] = auc_from_histograms(results.pop("auc/pos"), results.pop("auc/neg"))
    return results
