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

import keras
import tensorflow as tf

from electra_tf import artifacts, host_loop, preflight, runtime
from electra_tf.algorithms import Phase, make_phases
from electra_tf.config import ConfigError, PretrainingConfig, RunConfig
from electra_tf.data.pipeline import pretraining_dataset
from electra_tf.pretrainer import ElectraPretrainer


class Pretraining:
    """Builds everything a pre-training run needs and runs it.

    Args:
      config: hyperparameters (PretrainingConfig).
      run: where and how (RunConfig).
      strategy: a strategy made at program start (runtime.make_strategy); by
        default one is made from `run` here.
    """

    tensorflow_io = True  # host_loop: tf.data input, tf.summary summaries

    def __init__(self, config: PretrainingConfig, run: RunConfig,
                 strategy: tf.distribute.Strategy | None = None):
        self.config, self.run = config.validate(), run.validate()
        if config.train_batch_size % run.gradient_accumulation_steps:
            raise ConfigError("train_batch_size must be a multiple of gradient_accumulation_steps")
        self.strategy = strategy or runtime.make_strategy(
            run.strategy, run.num_devices, run.tpu, run.worker_startup_timeout_s)
        runtime.set_precision(run.mixed_precision)
        self.files = preflight.preflight(config, run)
        self.masking = preflight.pretraining_masking(config, run)
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
        return acc.results(num_steps)

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
        return acc.results(n)

    # === The host loop (host_loop.py, shared with the JAX loop) ===
    def train(self, stop_at_step: int | None = None) -> dict:
        """Trains to num_train_steps (resuming if possible); returns the final eval.

        Args:
          stop_at_step: leave early at this step, with a checkpoint, as a
            preempted job would (the schedule still targets num_train_steps).
        """
        return host_loop.train(self, stop_at_step)

    def save_checkpoint(self, force: bool = False):
        return self.checkpoints.save(force=force)

    @property
    def multi_worker(self) -> bool:
        return isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy)

    def _log(self, message: str):
        host_loop.log(self, message)
