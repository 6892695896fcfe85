"""The pre-training loop on the JAX backend (KERAS_BACKEND=jax).

    KERAS_BACKEND=jax python -m electra_tf.run_pretraining --flagfile=configs/small.flags ...

The same model (ElectraPretrainer, keras.ops only), objectives, flags,
console lines, TensorBoard summaries and output folder (artifacts.py) as the
TensorFlow loop in training.py; what differs is the step:
  * one `jax.jit`-compiled function does the forward pass
    (`model.stateless_call`), the loss, the gradients, global-norm clipping
    and the optimizer's `stateless_apply`, on explicit state;
  * data parallelism over the local devices is Keras' distribution API
    (keras.distribution.DataParallel): the batch is sharded, the gradient
    reduction is XLA's;
  * seeds are [seed, step] (the TF loop's formula with one replica: the
    batch is one array here, whatever the number of devices); with
    gradient accumulation over k micro-batches, [seed, step * k + i];
  * `jax_steps_per_call` optimizer steps run in one compiled call
    (jax.lax.scan over the stacked batches), which saves the host's
    per-step dispatch; a chunk of the host loop that it does not divide
    runs its remainder one step per call;
  * a training phase (algorithms.py) that trains part of the model
    (bert_mlm, two_stage) differentiates its own variables only; one
    optimizer, built over the whole model as the TF loop's, updates them
    (the others keep their weights and optimizer slots);
  * checkpoints are `checkpoints/jax-ckpt-<step>.npz` (model variables by
    path, optimizer variables by index), written atomically; they are not
    interchangeable with the TF loop's checkpoints.
The input is the same tf.data pipeline (data/pipeline.py) as the TF loop with
the default strategy, so both loops see the same batches and masks; or, with
input_pipeline="numpy", data/numpy_pipeline.py, which reads the same
TFRecords and masks with the same distribution without TensorFlow.

With the NumPy input, nothing on the run's path imports TensorFlow (the
record checks, the vocab, the summaries through the tensorboard package, the
checkpoints, the final folder), so it runs on a machine with JAX alone.

Multi-host (`start_multihost`, before anything else touches JAX): one
process per host, the DataParallel mesh over every process's devices. Each
process reads the same global batches and puts its own rows on its devices
(so a run's batches do not depend on the number of processes); process 0
alone writes checkpoints, summaries and the folder, and every process
checks at start that it resumes from the same step.
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import keras
import numpy as np

from electra_tf import artifacts, host_loop, jax_runtime, preflight, reporting, runtime
from electra_tf.algorithms import make_phases
from electra_tf.config import ConfigError, PretrainingConfig, RunConfig
from electra_tf.data.numpy_pipeline import numpy_pretraining_batches
from electra_tf.errors import InputError
from electra_tf.pretrainer import ElectraPretrainer


class JaxPretraining:
    """Builds and runs a pre-training run on the JAX backend (see the module docstring)."""

    def __init__(self, config: PretrainingConfig, run: RunConfig, input_pipeline: str = "tf.data"):
        if input_pipeline not in ("tf.data", "numpy"):
            raise ConfigError(f"input_pipeline must be tf.data or numpy, got {input_pipeline!r}")
        self.input_pipeline = input_pipeline
        if keras.backend.backend() != "jax":
            raise ConfigError("JaxPretraining needs KERAS_BACKEND=jax")
        self.config, self.run = config.validate(), run.validate()
        if run.strategy not in ("default", "mirrored"):
            raise ConfigError(f"--strategy={run.strategy} is not available on the JAX backend "
                              "(it uses every local device; for multi-host, see "
                              "--jax_coordinator_address)")
        if config.train_batch_size % run.gradient_accumulation_steps:
            raise ConfigError("train_batch_size must be a multiple of gradient_accumulation_steps")
        runtime.set_precision(run.mixed_precision)
        self.tensorflow_io = input_pipeline == "tf.data"  # else TensorFlow is never imported
        self.files = preflight.preflight(config, run, tensorflow_io=self.tensorflow_io)
        # multi_worker stays False: a JAX save is no collective, any process can save.
        self.chief, self.multi_worker = jax.process_index() == 0, False
        self.masking = preflight.pretraining_masking(config, run)
        if jax.process_count() > 1:
            if run.num_devices:
                raise ConfigError("--num_devices caps the devices of one process; a multi-host "
                                  "run uses every device of every process")
            devices = jax.devices()  # every process's: the batch is split over all of them
        else:
            devices = jax.local_devices()[:run.num_devices or None]
        self.num_replicas = len(devices)
        micro = config.train_batch_size // run.gradient_accumulation_steps
        for name, size in (("the micro-batch", micro), ("eval_batch_size", config.eval_batch_size)):
            if size % self.num_replicas:
                raise ConfigError(f"{name} {size} does not split over {self.num_replicas} devices")
        self.distribution = None
        if self.num_replicas > 1:
            self.distribution = keras.distribution.DataParallel(devices=devices)
            keras.distribution.set_distribution(self.distribution)
        keras.utils.set_random_seed(config.seed)  # the initial weights follow the seed
        self.model = ElectraPretrainer(config)
        self.model.build_with_dummy_batch()
        self.phases = make_phases(config, self.model)
        # Where each phase's variables sit in model.trainable_variables.
        index = {id(v): i for i, v in enumerate(self.model.trainable_variables)}
        self._trained = {p.name: tuple(index[id(v)] for v in p.variables) for p in self.phases}
        # One optimizer over every trainable variable, as the TF loop's: a phase
        # updates its own variables (and their slots) only.
        self.optimizer = runtime.pretraining_optimizer(config, self.model.trainable_variables)
        self.checkpoint_dir = artifacts.checkpoint_dir(run.model_dir)
        self.checkpoints = jax_runtime.Checkpoints(
            self.model, self.optimizer, self.checkpoint_dir, config.keep_checkpoint_max,
            config.save_checkpoints_steps, writer=self.chief)
        self._compiled = {}  # (phase name, steps per call) -> jitted train function
        self._eval_step = jax.jit(self._eval_fn)

    # === State: explicit arrays in the step, Keras variables between steps ===
    def _state(self):
        return jax_runtime.training_state(self.model, self.optimizer)

    def _assign(self, state):
        jax_runtime.assign_training_state(self.model, self.optimizer, state)

    @property
    def step(self) -> int:
        if getattr(self, "_state_lost", False):  # see _recover_from_interrupt
            return self._lost_at_step
        return int(np.asarray(self.optimizer.iterations.value))

    # === The step ===
    def _step_fn(self, phase, state, micro_batches, seeds):
        """One optimizer step of `phase`, as the TF loop's replica_step.

        Args:
          phase: the algorithms.Phase being trained (its objective and variables).
          state: (trainable, non_trainable, optimizer) lists of arrays.
          micro_batches: a batch dict, each array [k, B / k, ...]: the step's k
            micro-batches (gradient accumulation; k = 1 without).
          seeds: int32 [k, 2], each micro-batch's seed.

        Returns:
          the new state, and the step's values: losses (means over the
          micro-batches), metric sums and grad_norm.
        """
        trainable, non_trainable, opt_vars = state
        trained = self._trained[phase.name]
        k = self.run.gradient_accumulation_steps

        def loss_fn(params, non_trainable, batch, seed):
            values = list(trainable)
            for i, value in zip(trained, params):
                values[i] = value
            outputs, new_non_trainable = self.model.stateless_call(
                values, non_trainable, batch, training=True, seed=seed,
                objective=phase.objective)
            losses, sums = self.model.losses_and_metric_sums(batch, outputs, phase.objective)
            # Divided by k, so that the summed gradient is the mean (as the TF loop).
            return losses["loss"] / k, (losses, sums, new_non_trainable)

        grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
        params = [trainable[i] for i in trained]
        if k == 1:
            batch = jax.tree.map(lambda x: x[0], micro_batches)
            (_, (losses, sums, non_trainable)), grads = grad_fn(params, non_trainable, batch,
                                                               seeds[0])
        else:  # summed in micro-batch order, one micro-batch's activations at a time
            def micro_step(carry, xs):
                non_trainable, total = carry
                (_, (losses, sums, non_trainable)), grads = grad_fn(params, non_trainable, *xs)
                return (non_trainable, jax.tree.map(jnp.add, total, (losses, sums, grads))), None

            (_, (loss_shapes, sum_shapes, _)), grad_shapes = jax.eval_shape(lambda: grad_fn(
                params, non_trainable, jax.tree.map(lambda x: x[0], micro_batches), seeds[0]))
            zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype),
                                 (loss_shapes, sum_shapes, grad_shapes))
            (non_trainable, (losses, sums, grads)), _ = jax.lax.scan(
                micro_step, (non_trainable, zeros), (micro_batches, seeds))
            losses = {n: v / k for n, v in losses.items()}
        grads, norm = jax_runtime.clip_by_global_norm(grads, self.config.clip_norm)
        # None for the variables the phase does not train: the optimizer skips them.
        all_grads = [None] * len(trainable)
        for i, g in zip(trained, grads):
            all_grads[i] = g
        with warnings.catch_warnings():  # Keras warns of the None gradients
            warnings.filterwarnings("ignore", message="Gradients do not exist")
            trainable, opt_vars = self.optimizer.stateless_apply(opt_vars, all_grads, trainable)
        values = {**{"loss/" + n: v for n, v in losses.items()}, **sums, "grad_norm": norm}
        return (trainable, non_trainable, opt_vars), values

    def _steps_fn(self, phase, num_steps, state, batches, seeds):
        """`num_steps` optimizer steps of `phase` in one call; returns their summed values.

        Args:
          batches: num_steps * k batch dicts (k micro-batches per step), in order.
          seeds: int32 [num_steps, k, 2].
        """
        k = self.run.gradient_accumulation_steps
        # Stacked here, on the device: arrays [num_steps, k, B / k, ...].
        batches = {name: jnp.stack([b[name] for b in batches]).reshape(
            (num_steps, k) + batches[0][name].shape) for name in batches[0]}
        if num_steps == 1:
            return self._step_fn(phase, state, jax.tree.map(lambda x: x[0], batches), seeds[0])

        def one_step(carry, xs):
            state, total = carry
            state, values = self._step_fn(phase, state, *xs)
            return (state, jax.tree.map(jnp.add, total, values)), None

        shapes = jax.eval_shape(lambda: self._step_fn(
            phase, state, jax.tree.map(lambda x: x[0], batches), seeds[0])[1])
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
        (state, total), _ = jax.lax.scan(one_step, (state, zeros), (batches, seeds))
        return state, total

    def _compiled_steps(self, phase, num_steps: int):
        key = (phase.name, num_steps)
        if key not in self._compiled:
            self._compiled[key] = jax.jit(functools.partial(self._steps_fn, phase, num_steps),
                                          donate_argnums=(0,))
        return self._compiled[key]

    def _eval_fn(self, state, batch, seed):
        trainable, non_trainable, _ = state
        outputs, _ = self.model.stateless_call(trainable, non_trainable, batch, training=False,
                                               seed=seed)
        losses, sums = self.model.losses_and_metric_sums(batch, outputs)
        return {**{"loss/" + n: v for n, v in losses.items()}, **sums}

    def _to_device(self, batch: dict) -> dict:
        return jax_runtime.to_device(batch, self.distribution)

    # === Data ===
    def _batches(self, files, batch_size, seed, is_training, skip_batches=0):
        """NumPy batches: the TF loop's tf.data pipeline, or data/numpy_pipeline.py."""
        if self.input_pipeline == "numpy":
            return numpy_pretraining_batches(files, batch_size, self.config.max_seq_length,
                                             self.masking, is_training=is_training, seed=seed,
                                             skip_batches=skip_batches)
        from electra_tf.data.pipeline import pretraining_dataset

        return pretraining_dataset(files, batch_size, self.config.max_seq_length, self.masking,
                                   is_training=is_training, seed=seed,
                                   skip_batches=skip_batches).as_numpy_iterator()

    def make_train_iterator(self, step: int):
        """Numpy micro-batches (train_batch_size / gradient_accumulation_steps)
        positioned at optimizer step `step`, as the TF loop's."""
        k = self.run.gradient_accumulation_steps
        return self._batches(self.run.train_data, self.config.train_batch_size // k,
                             self.config.seed, True, skip_batches=step * k)

    def train_steps(self, iterator, num_steps: int) -> dict:
        """Runs `num_steps` optimizer steps of the current phase; returns their metrics.

        As Pretraining.train_steps. Calls of `jax_steps_per_call` steps each,
        then the remainder one step per call; the seeds are [seed, step * k + i]
        for micro-batch i of k, whatever the calls.
        """
        phase, k = self.phase_at(self.step), self.run.gradient_accumulation_steps
        per_call = self.run.jax_steps_per_call
        if self.step + num_steps > phase.end:
            raise ValueError(f"{num_steps} steps from {self.step} cross the end of {phase.name}")
        step = self.step
        end = step + num_steps
        state, totals = self._state(), None  # donated: no variable is read until _assign
        try:
            while step < end:
                n = per_call if end - step >= per_call else 1
                batches = [self._to_device(next(iterator)) for _ in range(n * k)]
                seeds = jnp.asarray([[[self.config.seed, (step + i) * k + j] for j in range(k)]
                                     for i in range(n)], dtype="int32")
                state, values = self._compiled_steps(phase, n)(state, batches, seeds)
                totals = values if totals is None else jax.tree.map(jnp.add, totals, values)
                step += n
        except KeyboardInterrupt:
            self._recover_from_interrupt(state)
            raise
        self._assign(state)
        return reporting.finish(jax.device_get(totals), num_steps)

    def _recover_from_interrupt(self, state) -> None:
        """Ctrl-C inside train_steps: leaves the variables whole for the save that follows.

        The step donates its input buffers. Between calls, `state` is the last
        finished call's output, alive: the variables take it (the save then
        holds every finished step). If the interrupt landed after a call took
        `state` and before it returned, those buffers are gone: the variables
        go back to the latest checkpoint, or, with none yet, are left as they
        are and the save is skipped (save() says so).
        """
        if not any(x.is_deleted() for x in jax.tree.leaves(state)):
            self._assign(state)
        elif self.checkpoints.latest:
            self.checkpoints.restore()
        else:
            self._lost_at_step, self._state_lost = 0, True

    def evaluate(self, num_steps: int | None = None) -> dict:
        """Metrics of the original's eval, on up to num_eval_steps held-out batches."""
        if not self.run.eval_data:
            return {}
        data = self._batches(self.run.eval_data, self.config.eval_batch_size,
                             self.config.seed + 1, False)
        state, totals, n = self._state(), None, 0
        for batch in data:
            if n >= (num_steps or self.config.num_eval_steps):
                break
            seed = jnp.asarray([self.config.seed + 1, n], dtype="int32")
            values = self._eval_step(state, self._to_device(batch), seed)
            totals = values if totals is None else jax.tree.map(jnp.add, totals, values)
            n += 1
        if n == 0:
            self._log("warning: the eval data is smaller than one eval batch; no eval")
            return {}
        return reporting.finish(jax.device_get(totals), n)

    # === Checkpoints (jax_runtime.Checkpoints: npz, atomic, process 0 writes) ===
    def save(self, force: bool = False) -> str | None:
        """checkpoints/jax-ckpt-<step>.npz every save_checkpoints_steps (or now, `force`)."""
        if getattr(self, "_state_lost", False):
            self._log("interrupted inside the first compiled step: no checkpoint to save")
            return None
        return self.checkpoints.save(force=force)

    def restore(self) -> int:
        """Resumes from the latest jax-ckpt (every variable checked). Returns the step."""
        path = self.checkpoints.restore()
        if path:
            self._log(f"resumed from {path} at step {self.step}")
        return self._same_step_everywhere()

    def _same_step_everywhere(self) -> int:
        """The step, after checking that every process of a multi-host run has it."""
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            steps = multihost_utils.process_allgather(np.asarray(self.step)).tolist()
            if len(set(steps)) > 1:
                raise InputError(f"the processes would resume from different steps {steps}: "
                                 "every process must see the same --model_dir (a shared file "
                                 "system) and its checkpoints")
        return self.step

    # === The host loop (host_loop.py, shared with the TF loop) ===
    def train(self, stop_at_step: int | None = None) -> dict:
        """Trains to num_train_steps (resuming if possible); returns the final eval."""
        return host_loop.train(self, stop_at_step)

    def phase_at(self, step: int):
        return next(p for p in self.phases if p.start <= step < p.end)

    def initialize_discriminator_from_generator(self):
        """Two-stage training: D's encoder takes G's weights (equal sizes)."""
        self.model.discriminator.encoder.set_weights(self.model.generator.encoder.get_weights())
        self._log(f"step {self.step}: discriminator initialized from the generator")

    def save_checkpoint(self, force: bool = False):
        return self.save(force=force)

    def _log(self, message: str):
        host_loop.log(self, message)


def start_multihost(coordinator_address: str, num_processes: int, process_id: int) -> None:
    """Joins this process to a multi-host run (`jax.distributed.initialize`).

    Call in every process, before anything touches JAX's devices (before
    JaxPretraining). The processes' collectives are XLA's (gloo on CPU).

    Args:
      coordinator_address: host:port of process 0, which every process reaches.
      num_processes: processes in the run (>= 2).
      process_id: this process, in [0, num_processes); 0 writes the outputs.

    Raises:
      ConfigError: a setting missing or out of range.
    """
    if not coordinator_address or num_processes < 2:
        raise ConfigError("a multi-host JAX run needs --jax_coordinator_address=HOST:PORT and "
                          "--jax_num_processes >= 2 (and --jax_process_id for each process)")
    if not 0 <= process_id < num_processes:
        raise ConfigError(f"--jax_process_id={process_id} is not in [0, "
                          f"--jax_num_processes={num_processes})")
    jax.distributed.initialize(coordinator_address, num_processes, process_id)
