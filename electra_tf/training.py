"""The strategy-aware pre-training loop: read this file top to bottom.

One optimizer step, per replica (REFERENCE.md, "Keras 3 on TF 2.20: pitfalls"):
  1. `_forward_backward` (XLA-compiled when jit_compile is on): the
     pretrainer's forward pass, the objective's loss divided by the number of
     replicas and micro-batches, and the gradients. It holds neither
     `next(iterator)` nor `strategy.run`, which XLA cannot compile.
  2. gradient accumulation over `gradient_accumulation_steps` micro-batches;
  3. an all-reduce (sum) of the gradients across replicas, global-norm
     clipping of the summed gradient, and the AdamW update, outside XLA.
The seed of each replica and micro-step folds in the replica id, so replicas
draw different dropout and generator samples (a mirrored SeedGenerator would
give them all the same).

The host loop runs `iterations_per_loop` steps per tf.function call, then logs
a console line and TensorBoard summaries, saves a checkpoint every
`save_checkpoints_steps`, and evaluates on held-out records. Checkpoints hold
the model and optimizer variables by path; the input pipeline is a pure
function of the seed and is fast-forwarded on resume, so an interrupted run
resumes exactly where it stopped.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from electra_tf.config import ConfigError, PretrainingConfig, RunConfig
from electra_tf.data.masking import MaskingConfig
from electra_tf.data.pipeline import pretraining_dataset
from electra_tf.objectives import metrics as metrics_lib
from electra_tf.optimization import create_optimizer
from electra_tf.pretrainer import ElectraPretrainer
from electra_tf.tokenization import Tokenizer

AUC_BINS = 200  # thresholds of the bucketed disc_auc, as keras.metrics.AUC's default


# === Devices and strategies ===
def configure_devices(strategy: str, num_devices: int) -> None:
    """Splits the CPU into logical devices for a mirrored run without GPUs.

    Call before TensorFlow initializes its devices (before the first op).
    """
    if strategy != "mirrored" or num_devices < 2 or tf.config.list_physical_devices("GPU"):
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)
    except RuntimeError:
        if len(tf.config.list_logical_devices("CPU")) != num_devices:
            raise RuntimeError(
                f"cannot split the CPU into {num_devices} devices: TensorFlow was initialized "
                "before configure_devices() ran") from None


def make_strategy(name: str, num_devices: int = 0, tpu: str = "") -> tf.distribute.Strategy:
    """default | mirrored | multi_worker (TF_CONFIG) | tpu.

    Call at program start, before any TF op: multi-worker collectives and the
    logical CPU split for a mirrored run without GPUs can only be set then.
    """
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        configure_devices(name, num_devices)
        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]
        if num_devices:
            devices = devices[:num_devices]
        return tf.distribute.MirroredStrategy(devices)
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise ConfigError("strategy=multi_worker needs the TF_CONFIG environment variable")
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name != "tpu":
        raise ConfigError(f"unknown strategy {name!r}")
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or None)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def dense_gradients(tape, loss, variables):
    """Gradients as dense tensors (zeros for unused variables).

    Embedding IndexedSlices would not leave an XLA cluster, and dense tensors
    keep the all-reduce simple.
    """
    grads = tape.gradient(loss, variables)
    return [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
            for g, v in zip(grads, variables)]


def apply_reduced_gradients(optimizer, grads, variables, clip_norm):
    """In replica context: sum the gradients over replicas, clip, apply.

    Each replica's loss is pre-divided by the replica count, so the sum is the
    global mean gradient; clipping sees the global norm (Keras would clip each
    replica's gradient before its own all-reduce). The optimizer must have
    `gradients_already_reduced = True`. Returns the global norm.
    """
    ctx = tf.distribute.get_replica_context()
    grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
    grads, norm = tf.clip_by_global_norm(grads, clip_norm)
    optimizer.apply_gradients(zip(grads, variables))
    return norm


def variable_checkpoint(model, optimizer) -> tf.train.Checkpoint:
    """A checkpoint of explicit variable dicts (model by path, optimizer by index).

    tf.train.Checkpoint(model=keras_model) misses variables Keras keeps in
    Python lists (REFERENCE.md pitfalls); explicit dicts miss nothing, and
    restore().assert_consumed() checks it.
    """
    model_vars = {v.path: v for v in model.variables}
    if len(model_vars) != len(model.variables):
        raise RuntimeError("model variable paths are not unique; checkpoints would lose some")
    opt_vars = {f"{i:05d}": v for i, v in enumerate(optimizer.variables)}
    return tf.train.Checkpoint(model=model_vars, optimizer=opt_vars)


def auc_from_histograms(pos: np.ndarray, neg: np.ndarray) -> float:
    """ROC AUC from score histograms of positives and negatives (trapezoids)."""
    if pos.sum() == 0 or neg.sum() == 0:
        return float("nan")
    tpr = np.concatenate([[0.0], np.cumsum(pos[::-1]) / pos.sum()])
    fpr = np.concatenate([[0.0], np.cumsum(neg[::-1]) / neg.sum()])
    return float(np.trapezoid(tpr, fpr))


class Pretraining:
    """Builds everything a pre-training run needs and runs it.

    Args:
      config: hyperparameters (PretrainingConfig).
      run: where and how (RunConfig).
      strategy: a strategy made at program start (see make_strategy); by
        default one is made from `run` here.
    """

    def __init__(self, config: PretrainingConfig, run: RunConfig,
                 strategy: tf.distribute.Strategy | None = None):
        self.config = config.validate()
        self.run = run.validate()
        if config.train_batch_size % run.gradient_accumulation_steps:
            raise ConfigError("train_batch_size must be a multiple of gradient_accumulation_steps")
        self.strategy = strategy or make_strategy(run.strategy, run.num_devices, run.tpu)
        keras.mixed_precision.set_dtype_policy(
            "mixed_bfloat16" if run.mixed_precision == "bf16" else "float32")
        tokenizer = Tokenizer(run.vocab_file, do_lower_case=config.do_lower_case)
        if tokenizer.vocab_size != config.vocab_size:
            raise ConfigError(f"vocab_size={config.vocab_size} but {run.vocab_file} holds "
                              f"{tokenizer.vocab_size} tokens; set --vocab_size to match")
        from electra_tf.objectives.variants import OBJECTIVES, masking_options

        self.masking = MaskingConfig.from_tokenizer(
            tokenizer, config.mask_prob, config.resolved_max_predictions_per_seq,
            **masking_options(OBJECTIVES[config.resolved_objective]))
        self.num_replicas = self.strategy.num_replicas_in_sync
        micro = config.train_batch_size // run.gradient_accumulation_steps
        if micro % self.num_replicas:
            raise ConfigError(f"the micro-batch {micro} does not split over "
                              f"{self.num_replicas} replicas")
        self.chief = is_chief(self.strategy)

        with self.strategy.scope():
            keras.utils.set_random_seed(config.seed)  # the initial weights follow the seed
            self.model = ElectraPretrainer(config)
            self.model.build_with_dummy_batch()
            self.optimizer = create_optimizer(
                config.learning_rate, config.num_train_steps, config.num_warmup_steps,
                weight_decay_rate=config.weight_decay_rate, lr_decay_power=config.lr_decay_power,
                adam_epsilon=config.adam_epsilon, clip_norm=None)
            self.optimizer.gradients_already_reduced = True  # we all-reduce and clip below
            self.optimizer.build(self.model.trainable_variables)
        self.main_objective = self.model.objective
        self.phases = self._make_phases()
        self._set_phase(self.phases[0])
        self._eval_fwd = tf.function(self._forward_metrics, jit_compile=run.jit_compile)
        self._eval_loop = tf.function(self._eval_step_fn)
        self._make_checkpoint()

    # === Phases (the training algorithm) ===
    def _make_phases(self) -> list[dict]:
        """[start, end) step ranges, each with its objective and trained variables.

        joint / adversarial: one phase. two_stage (paper section 3.2): G alone
        by MLM for the first half, then D (initialized from G) by the
        discriminator loss for the second half, G frozen. With tied
        embeddings the shared tables belong to D in the second half.
        """
        from electra_tf.objectives.electra import ElectraObjective
        from electra_tf.objectives.variants import BertMlmObjective

        cfg, model = self.config, self.model
        total = cfg.num_train_steps
        generator_vars = list(model.generator.trainable_variables)
        if cfg.training_algorithm != "two_stage":
            # Train what the objective uses: BERT-MLM leaves the discriminator alone.
            used = (model.trainable_variables if self.main_objective.uses_discriminator
                    else generator_vars)
            return [dict(name=cfg.training_algorithm, start=0, end=total,
                         objective=self.main_objective, variables=list(used))]
        half = total // 2
        generator_only = BertMlmObjective(gen_weight=1.0)
        discriminator_only = dataclasses.replace(
            ElectraObjective.from_config(cfg), gen_weight=0.0)
        return [dict(name="two_stage_generator", start=0, end=half,
                     objective=generator_only, variables=generator_vars),
                dict(name="two_stage_discriminator", start=half, end=total,
                     objective=discriminator_only,
                     variables=list(model.discriminator.trainable_variables))]

    def _phase_at(self, step: int) -> dict:
        return next(p for p in self.phases if p["start"] <= step < p["end"])

    def _set_phase(self, phase: dict):
        """Makes `phase` the one the traced step functions use (one trace each)."""
        self.model.objective = phase["objective"]
        self._variables = phase["variables"]
        if "fwd_bwd" not in phase:
            phase["fwd_bwd"] = tf.function(self._forward_backward,
                                           jit_compile=self.run.jit_compile)
            phase["train_loop"] = tf.function(self._train_loop_fn)
        self._fwd_bwd, self._train_loop = phase["fwd_bwd"], phase["train_loop"]
        self._phase = phase

    def initialize_discriminator_from_generator(self):
        """Two-stage training: D's encoder takes G's weights (equal sizes)."""
        self.model.discriminator.encoder.set_weights(self.model.generator.encoder.get_weights())
        self._log(f"step {self.step}: discriminator initialized from the generator")

    # === Data ===
    def make_train_iterator(self, step: int):
        """The distributed training input, positioned at optimizer step `step`.

        The pipeline is a pure function of the seed, so resuming skips the
        batches already used (before parsing and masking, which is cheap)
        instead of checkpointing the iterator: this works for every
        strategy, and checkpoints stay small.
        """
        cfg, run = self.config, self.run
        micro = cfg.train_batch_size // run.gradient_accumulation_steps

        def train_fn(ctx):
            return pretraining_dataset(run.train_data, ctx.get_per_replica_batch_size(micro),
                                       cfg.max_seq_length, self.masking, input_context=ctx,
                                       seed=cfg.seed,
                                       skip_batches=step * run.gradient_accumulation_steps)

        return iter(self.strategy.distribute_datasets_from_function(train_fn))

    def _eval_dataset(self):
        cfg, run = self.config, self.run

        def eval_fn(ctx):
            return pretraining_dataset(run.eval_data, ctx.get_per_replica_batch_size(
                cfg.eval_batch_size), cfg.max_seq_length, self.masking, is_training=False,
                input_context=ctx, seed=cfg.seed + 1)

        return self.strategy.distribute_datasets_from_function(eval_fn)

    # === Checkpoints ===
    def _make_checkpoint(self):
        self.checkpoint = variable_checkpoint(self.model, self.optimizer)
        directory = os.path.join(self.run.model_dir, "checkpoints")
        if not self.chief:  # other workers write to a scratch folder, then drop it
            task = self.strategy.cluster_resolver.task_id
            directory = os.path.join(self.run.model_dir, f".worker_{task}_checkpoints")
        self._ckpt_dir = directory
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, directory, max_to_keep=self.config.keep_checkpoint_max,
            step_counter=self.optimizer.iterations,
            checkpoint_interval=self.config.save_checkpoints_steps)

    def restore(self) -> int:
        """Resumes from the latest checkpoint if there is one. Returns the step."""
        latest = tf.train.latest_checkpoint(os.path.join(self.run.model_dir, "checkpoints"))
        if latest and latest != getattr(self, "_restored_from", None):
            self._restored_from = latest
            self.checkpoint.restore(latest).assert_consumed()
            self._log(f"resumed from {latest} at step {self.step}")
        return self.step

    @property
    def step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    def _save(self, force=False):
        path = self.manager.save(checkpoint_number=self.optimizer.iterations,
                                 check_interval=not force)
        if path and not self.chief:
            shutil.rmtree(self._ckpt_dir, ignore_errors=True)
        return path

    # === The step ===
    def _forward_metrics(self, batch, seed):
        """Forward pass -> (loss dict, metric sums, AUC histograms). Float32 out."""
        outputs = self.model(batch, training=False, seed=seed)
        return self._losses_and_metrics(batch, outputs)

    def _losses_and_metrics(self, batch, outputs):
        losses = self.model.losses_from(batch, outputs)
        sums = {}
        for name, (num, den) in self.model.metric_sums_from(batch, outputs).items():
            sums[name + "/num"], sums[name + "/den"] = num, den
        if "rtd_logits" in outputs:
            probs = metrics_lib.disc_probs(outputs["rtd_logits"])
            bins = tf.minimum(tf.cast(probs * AUC_BINS, tf.int32), AUC_BINS - 1)
            onehot = tf.one_hot(bins, AUC_BINS) * tf.cast(batch["input_mask"], tf.float32)[..., None]
            labels = outputs["fake"]["labels"][..., None]
            sums["auc/pos"] = tf.reduce_sum(onehot * labels, axis=[0, 1])
            sums["auc/neg"] = tf.reduce_sum(onehot * (1.0 - labels), axis=[0, 1])
        return losses, sums

    def _forward_backward(self, batch, seed):
        scale = float(self.num_replicas * self.run.gradient_accumulation_steps)
        with tf.GradientTape() as tape:
            outputs = self.model(batch, training=True, seed=seed)
            losses, sums = self._losses_and_metrics(batch, outputs)
            scaled = losses["loss"] / scale
        return losses, sums, dense_gradients(tape, scaled, self._variables)

    def _replica_step(self, micro_batches):
        k = len(micro_batches)
        grads, losses, sums = None, None, None
        for i, batch in enumerate(micro_batches):
            l_i, s_i, g_i = self._fwd_bwd(batch, self.replica_seed(i))
            if grads is None:
                grads, losses, sums = g_i, l_i, s_i
            else:
                grads = [a + b for a, b in zip(grads, g_i)]
                losses = {n: losses[n] + l_i[n] for n in losses}
                sums = {n: sums[n] + s_i[n] for n in sums}
        losses = {n: v / k for n, v in losses.items()}
        grad_norm = apply_reduced_gradients(self.optimizer, grads, self._variables,
                                            self.config.clip_norm)
        return losses, sums, grad_norm

    def replica_seed(self, micro_step: int = 0):
        """The int32 [2] seed of this replica, optimizer step and micro-batch.

        Call in replica context. Folding in the replica id is what gives
        replicas different dropout masks and generator samples.
        """
        ctx = tf.distribute.get_replica_context()
        k = self.run.gradient_accumulation_steps
        step = tf.cast(self.optimizer.iterations, tf.int32)
        return tf.stack([tf.constant(self.config.seed, tf.int32),
                         (step * k + micro_step) * self.num_replicas
                         + ctx.replica_id_in_sync_group])

    def _train_loop_fn(self, iterator, num_steps, accumulators):
        for _ in tf.range(num_steps):
            micro = tuple(next(iterator) for _ in range(self.run.gradient_accumulation_steps))
            losses, sums, grad_norm = self.strategy.run(self._replica_step, args=(micro,))
            values = {**{"loss/" + n: v for n, v in losses.items()}, **sums,
                      "grad_norm": grad_norm}
            for name, value in values.items():
                op = (tf.distribute.ReduceOp.MEAN if name.startswith("loss/") or
                      name == "grad_norm" else tf.distribute.ReduceOp.SUM)
                accumulators[name].assign_add(self.strategy.reduce(op, value, axis=None))

    def _eval_step_fn(self, batch, index, accumulators):
        def replica_fn(b):
            ctx = tf.distribute.get_replica_context()
            seed = tf.stack([tf.constant(self.config.seed + 1, tf.int32),
                             index * self.num_replicas + ctx.replica_id_in_sync_group])
            return self._eval_fwd(b, seed)

        losses, sums = self.strategy.run(replica_fn, args=(batch,))
        for name, value in {**{"loss/" + n: v for n, v in losses.items()}, **sums}.items():
            op = tf.distribute.ReduceOp.MEAN if name.startswith("loss/") else \
                tf.distribute.ReduceOp.SUM
            accumulators[name].assign_add(self.strategy.reduce(op, value, axis=None))

    # === Metrics ===
    def _accumulators(self, spec):
        # Host variables (outside the strategy scope), reset for each loop.
        return {name: tf.Variable(tf.zeros(shape, tf.float32), trainable=False)
                for name, shape in spec.items()}

    def _accumulator_spec(self):
        """Names and shapes of what a loop accumulates, for the current phase."""
        batch = next(iter(pretraining_dataset(
            self.run.train_data, 2, self.config.max_seq_length, self.masking, seed=0,
            shuffle_buffer=1)))
        losses, sums = self._forward_metrics(batch, tf.constant([0, 0], tf.int32))
        spec = {"loss/" + n: v.shape for n, v in losses.items()}
        spec.update({n: v.shape for n, v in sums.items()})
        spec["grad_norm"] = ()
        return spec

    @staticmethod
    def _finish(values: dict, steps: int) -> dict:
        out = {}
        for name, value in values.items():
            if name.startswith("loss/"):
                out[name[5:]] = float(value) / max(steps, 1)
            elif name.endswith("/num"):
                den = float(values[name[:-4] + "/den"])
                out[name[:-4]] = float(value) / den if den else float("nan")
        if "auc/pos" in values:
            out["disc_auc"] = auc_from_histograms(np.asarray(values["auc/pos"]),
                                                  np.asarray(values["auc/neg"]))
        if "grad_norm" in values:
            out["grad_norm"] = float(values["grad_norm"]) / max(steps, 1)
        return out

    # === The host loop ===
    def _log(self, message: str, everyone: bool = False):
        if self.chief or everyone:
            print(f"[pretrain] {message}", file=sys.stderr, flush=True)

    def evaluate(self, num_steps: int | None = None) -> dict:
        """Metrics of the original's eval, on up to num_eval_steps held-out batches."""
        if not self.run.eval_data:
            return {}
        num_steps = num_steps or self.config.num_eval_steps
        training_phase = self._phase
        self.model.objective = self.main_objective  # evaluate what the run is for
        acc = self._accumulators(self._eval_spec)
        n = 0
        for batch in self._eval_dataset():
            if n >= num_steps:
                break
            self._eval_loop(batch, tf.constant(n, tf.int32), acc)
            n += 1
        self._set_phase(training_phase)
        if n == 0:
            self._log("warning: the eval data is smaller than one eval batch; no eval")
            return {}
        return self._finish({k: v.numpy() for k, v in acc.items() if k != "grad_norm"}, n)

    def train(self, stop_at_step: int | None = None) -> dict:
        """Trains to num_train_steps (resuming if possible); returns the final eval.

        Args:
          stop_at_step: leave early at this step, with a checkpoint, as a
            preempted job would (the schedule still targets num_train_steps).
        """
        cfg, run = self.config, self.run
        os.makedirs(run.model_dir, exist_ok=True)
        self.restore()
        self.model.objective = self.main_objective
        self._eval_spec = self._accumulator_spec()
        for phase in self.phases:
            self._set_phase(phase)
            phase["spec"] = self._accumulator_spec()
        self._set_phase(self._phase_at(min(self.step, cfg.num_train_steps - 1)))
        if self.chief:
            self._write_configs()
        writer = (tf.summary.create_file_writer(os.path.join(run.model_dir, "train"))
                  if self.chief else tf.summary.create_noop_writer())
        eval_writer = (tf.summary.create_file_writer(os.path.join(run.model_dir, "eval"))
                       if self.chief else tf.summary.create_noop_writer())
        log_every = run.log_every_steps or cfg.iterations_per_loop
        if self.step == 0 and run.eval_data:
            self._write_eval(self.evaluate(), eval_writer)
        start_step, start_time = self.step, time.monotonic()
        iterator = self.make_train_iterator(self.step)
        try:
            end = min(cfg.num_train_steps, stop_at_step or cfg.num_train_steps)
            while self.step < end:
                phase = self._phase_at(self.step)
                if phase is not self._phase or "acc" not in phase:
                    self._set_phase(phase)
                    phase["acc"] = self._accumulators(phase["spec"])
                if phase["name"] == "two_stage_discriminator" and self.step == phase["start"]:
                    self.initialize_discriminator_from_generator()
                acc = phase["acc"]
                n = min(log_every - self.step % log_every, end - self.step,
                        phase["end"] - self.step)
                if run.eval_every_steps:
                    n = min(n, run.eval_every_steps - self.step % run.eval_every_steps)
                for v in acc.values():
                    v.assign(tf.zeros_like(v))
                t0 = time.monotonic()
                self._train_loop(iterator, tf.constant(n), acc)
                seconds = time.monotonic() - t0
                results = self._finish({k: v.numpy() for k, v in acc.items()}, n)
                results["learning_rate"] = float(self.optimizer.learning_rate)  # next step's
                results["sequences_per_second"] = n * cfg.train_batch_size / seconds
                self._report(results, writer, start_step, start_time)
                self._save()
                if run.eval_every_steps and self.step % run.eval_every_steps == 0 \
                        and self.step < cfg.num_train_steps:
                    self._write_eval(self.evaluate(), eval_writer)
        except KeyboardInterrupt:
            self._log(f"interrupted at step {self.step}: saving a checkpoint")
            self._save(force=True)
            raise
        self._save(force=True)
        if self.step < cfg.num_train_steps:
            self._log(f"stopped at step {self.step} as asked; run again to resume")
            return {}
        final = self.evaluate() if run.eval_data else {}
        self._write_eval(final, eval_writer)
        if self.chief:
            self._write_final(final)
        self._log(f"final weights checksum {self.weights_checksum():.8e}"
                  + ("" if self.chief else " (worker)"), everyone=True)
        return final

    def weights_checksum(self) -> float:
        """A fingerprint of the trainable weights, to check that workers agree."""
        return float(sum(np.abs(np.asarray(v.numpy(), np.float64)).sum() * (i + 1)
                         for i, v in enumerate(self.model.trainable_variables)))

    def _report(self, results, writer, start_step, start_time):
        step, total = self.step, self.config.num_train_steps
        with writer.as_default(step=step):
            for name, value in results.items():
                tf.summary.scalar(name, value)
        writer.flush()
        elapsed = time.monotonic() - start_time
        eta = elapsed / max(step - start_step, 1) * (total - step)
        auc = results.get("disc_auc", float("nan"))
        self._log(
            f"step {step}/{total} | loss {results['loss']:.4f} (mlm {results.get('mlm_loss', 0):.3f}"
            f" disc {results.get('disc_loss', float('nan')):.4f}) | mlm_acc "
            f"{results.get('masked_lm_accuracy', float('nan')):.3f} disc_auc {auc:.3f} | "
            f"lr {results['learning_rate']:.2e} | {results['sequences_per_second']:.0f} seq/s"
            f" | eta {eta / 60:.1f} min")

    def _write_eval(self, results, writer):
        if not results:
            return
        with writer.as_default(step=self.step):
            for name, value in results.items():
                tf.summary.scalar(name, value)
        writer.flush()
        self._log(f"eval at step {self.step}: " + ", ".join(
            f"{k} {v:.4f}" for k, v in sorted(results.items())))

    def _write_configs(self):
        with open(os.path.join(self.run.model_dir, "pretraining_config.json"), "w") as f:
            json.dump({"pretraining": self.config.to_dict(), "run": dataclasses.asdict(self.run)},
                      f, indent=2, sort_keys=True)

    def kept_model(self):
        """The model users fine-tune, as a discriminator with the RTD head.

        ELECTRA: the discriminator itself. BERT-MLM: the generator's encoder.
        Replace-MLM / All-Tokens MLM: the main model's encoder (its RTD head
        is freshly initialized; fine-tuning does not use it).
        """
        from electra_tf.modeling.models import build_discriminator

        if self.model.objective.uses_discriminator and self.model.discriminator.head_kind == "rtd":
            return self.model.discriminator
        source = (self.model.discriminator.encoder if self.model.objective.uses_discriminator
                  else self.model.generator.encoder)
        kept = build_discriminator(source.config)
        kept.encoder.set_weights(source.get_weights())
        return kept

    def _write_final(self, final_eval):
        """The discriminator alone (what users fine-tune), its config, the last eval."""
        d = self.kept_model()
        d.save_weights(os.path.join(self.run.model_dir, "discriminator.weights.h5"))
        self.model.generator.save_weights(os.path.join(self.run.model_dir,
                                                       "generator.weights.h5"))
        with open(os.path.join(self.run.model_dir, "discriminator_config.json"), "w") as f:
            json.dump(d.config.to_dict(), f, indent=2, sort_keys=True)
        with open(os.path.join(self.run.model_dir, "final_eval.json"), "w") as f:
            json.dump({"step": self.step, **final_eval}, f, indent=2, sort_keys=True)
        self._log(f"wrote {self.run.model_dir}/discriminator.weights.h5 and "
                  "discriminator_config.json")
