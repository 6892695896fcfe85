"""The JAX backend (KERAS_BACKEND=jax): jitted stateless steps, Keras' DataParallel.

    KERAS_BACKEND=jax python -m electra_tf.run_pretraining --flagfile=configs/small.flags ...

What this backend owns, for both loops (training/pretraining.py and
training/finetuning.py hold the rest; backends/tensorflow.py has the same
sections):

* Devices and processes: `start` joins a multi-host run
  (`jax.distributed.initialize`, one process per host, before anything touches
  JAX's devices); `data_parallel` shards batches over every device of every
  process with Keras' distribution API (keras.distribution.DataParallel),
  and XLA reduces the gradients. Each process reads the same global batches
  and puts its own rows on its devices (`to_device`), so a run's batches do
  not depend on the number of processes; process 0 alone writes.
* Seeds: [seed, step] (the TF loop's formula with one replica: the batch is
  one array here, whatever the number of devices); with gradient accumulation
  over k micro-batches, [seed, step * k + i].
* The update: one `jax.jit`-compiled function does the forward pass
  (`model.stateless_call`), the loss, the gradients, global-norm clipping
  (`clip_by_global_norm`) and the optimizer's `stateless_apply`, on explicit
  state; the Keras variables take the state back between calls. Pre-training
  runs `jax_steps_per_call` steps per call (`jax.lax.scan` over the stacked
  batches), which saves the host's per-step dispatch. The state is donated to
  the call; with jax_device_prefetch the next call's batches go to the device
  before the current call is dispatched (`DeviceBatches`).
* Pre-training (`JaxPretraining`) and fine-tuning (`JaxFinetuning`): the
  compiled steps, the input (the TF loop's tf.data pipeline; with
  jax_input_pipeline="numpy" data/numpy_pipeline.py, which reads the same
  TFRecords and masks them with the same distribution without TensorFlow;
  with "packed", data/packed.py's memory-mapped files, fast enough for a
  GPU; both in a thread ahead of the device, data/prefetch.py), npz
  checkpoints.

With the NumPy or packed input, nothing on a pre-training run's path imports
TensorFlow (the record checks, the vocab, the summaries through the
tensorboard package, the checkpoints, the final folder), so it runs on a
machine with JAX alone.
"""

from __future__ import annotations

import collections
import functools
import warnings

import jax
import jax.numpy as jnp
import keras
import numpy as np

from electra_tf.core import framework_messages
from electra_tf.core.config import (
    FinetuningConfig,
    FinetuningRun,
    PretrainingConfig,
    PretrainingRun,
)
from electra_tf.core.errors import ConfigError, InputError, PeerLost
from electra_tf.core.fileio import expand_files
from electra_tf.data.numpy_pipeline import numpy_pretraining_batches
from electra_tf.data.packed import PackedExamples, packed_pretraining_batches
from electra_tf.data.prefetch import prefetch
from electra_tf.folders.files import checkpoint_dir
from electra_tf.training import reporting
from electra_tf.training.checkpoints import NpzCheckpoints, checkpoint_step
from electra_tf.training.finetuning import Finetuning, split_batch
from electra_tf.training.loop import stop_point
from electra_tf.training.pretraining import Pretraining
from electra_tf.training.watchdog import StartupWatchdog

# The strategies (config.STRATEGIES) this backend runs: both mean every device
# (or --num_devices); multi-host is `start`'s.
JAX_STRATEGIES = ("default", "mirrored")


# === Devices and processes ===
def cpu_only() -> bool:
    """Whether this process computes on its CPU alone (JAX's default backend is the CPU);
    after `start`, since it initializes JAX's backend."""
    return jax.default_backend() == "cpu"


def start(run) -> None:
    """Joins this process to a multi-host run when `run` asks for one.

    Call in every process at program start, before anything touches JAX's
    devices. The processes' collectives are XLA's (gloo on CPU).

    Args:
      run: RuntimeOptions (checked at construction: the multi-host settings
        go together).
    """
    if run.jax_num_processes <= 1:
        return
    n, timeout = run.jax_num_processes, run.worker_startup_timeout_s
    if run.jax_process_id == 0:
        _check_coordinator_port(run.jax_coordinator_address)
    watchdog = None
    if timeout > 0:
        watchdog = StartupWatchdog(timeout, (
            f"error: --jax_num_processes={n}: not every process joined the coordinator at "
            f"{run.jax_coordinator_address} within --worker_startup_timeout_s={timeout:g}: "
            f"start all {n}, each with its own --jax_process_id (0 to {n - 1}), with the "
            "coordinator's host:port reachable from every host; or raise "
            "--worker_startup_timeout_s"))
    # jax.distributed's own wait (300 s by default) ends in a C++ abort: it must outlast the
    # watcher, whose one line is what a lone process is meant to get (0: wait forever).
    jax_wait = timeout + 60 if timeout > 0 else 10 ** 9
    try:
        jax.distributed.initialize(run.jax_coordinator_address, n, run.jax_process_id,
                                   initialization_timeout=jax_wait)
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("electra_tf start-up")  # every process is in
    finally:
        if watchdog:
            watchdog.disarm()


def _check_coordinator_port(address: str) -> None:
    """Process 0 serves the coordinator on the address's port: refuses, by name, a port
    another process holds (a second process 0 aborted in C++ before).

    Raises:
      ConfigError: the port is in use on this host.
    """
    from electra_tf.core.peers import address_port, port_in_use

    port = address_port(address)  # (RuntimeOptions refused any other)
    if port_in_use(port):
        raise ConfigError(f"--jax_coordinator_address={address}: port {port} is in use on "
                          "this host (another process 0 of a run, or another program); each "
                          "process needs its own --jax_process_id, and process 0 a free "
                          "port")


def chief_process(_started=None) -> bool:
    """backends.is_chief: process 0 of a multi-host run (the one that writes)."""
    return jax.process_index() == 0


def stop_agreement():
    """loop.InterruptGate's `agree` for a multi-host run: every process's votes (a float32
    [2]) gathered (`process_allgather`, one small collective) and summed; None for one
    process.

    A SIGTERM (or Ctrl-C) to one process then stops every process at the same chunk
    boundary; without it, the process that stopped left the others in the next step's
    collective, which failed (Gloo) or waited for it.
    """
    if jax.process_count() < 2:
        return None
    from jax.experimental import multihost_utils

    return lambda votes: np.asarray(multihost_utils.process_allgather(
        np.asarray(votes, np.float32))).reshape(-1, 2).sum(axis=0)


def data_parallel(strategy: str, num_devices: int, batch_sizes: dict[str, int]):
    """Checks the strategy, and shards batches over the devices when there are several.

    Sets Keras' global distribution: DataParallel for more than one device
    (variables created afterwards are replicated, batches sharded), else none.

    Args:
      strategy: the run's --strategy (only default and mirrored are available).
      num_devices: at most this many devices of this process (0: all); a
        multi-host run uses every device of every process.
      batch_sizes: {flag name: value}; each must split evenly over the devices.

    Returns:
      (number of devices, the DataParallel distribution or None).
    """
    if strategy not in JAX_STRATEGIES:
        raise ConfigError(f"--strategy={strategy} is not available on the JAX backend "
                          "(it uses every local device; for multi-host pre-training, see "
                          "--jax_coordinator_address)")
    if jax.process_count() > 1:
        if num_devices:
            raise ConfigError("--num_devices caps the devices of one process; a multi-host "
                              "run uses every device of every process")
        devices = jax.devices()  # every process's: the batch is split over all of them
    else:
        local = jax.local_devices()
        if num_devices > len(local):  # (it had trained on fewer, the record saying N)
            kind = local[0].platform
            raise ConfigError(
                f"--num_devices={num_devices}, but JAX sees {len(local)} {kind} device(s)"
                + ("; a CPU shows N with XLA_FLAGS=--xla_force_host_platform_device_count=N "
                   "set before the run" if kind == "cpu" else "")
                + f"; give --num_devices={len(local)} or less (0: all)")
        devices = local[:num_devices or None]
    for name, size in batch_sizes.items():
        if size % len(devices):
            raise ConfigError(f"{name} {size} does not split over {len(devices)} devices")
    distribution = None
    if len(devices) > 1:
        distribution = keras.distribution.DataParallel(devices=devices)
    keras.distribution.set_distribution(distribution)  # None: a previous run's is dropped
    return len(devices), distribution


def to_device(batch: dict, distribution=None) -> dict:
    """NumPy arrays -> device arrays, sharded on the batch axis under `distribution`."""
    if distribution is None:
        return {k: jnp.asarray(v) for k, v in batch.items()}
    return {k: jax.device_put(v, distribution.get_data_layout(v.shape).backend_layout)
            for k, v in batch.items()}


def _on_cpu() -> bool:
    """Whether the run's devices are CPUs (the memory check's: training/memory.py)."""
    return jax.devices()[0].platform == "cpu"


class DeviceBatches:
    """The batches of a run of compiled calls, on the device: one list per call.

    `sizes` gives each call's number of batches. With `ahead` = 0 a call's batches
    are put on the device when it asks for them; with 1 (--jax_device_prefetch) the
    next call's are put there too before this call's are handed out, so that their
    copy (jax.device_put returns at once) runs while this call is dispatched and runs.
    Takes no more than sum(sizes) batches from `iterator`, in order: the batches, and
    so the results, are those of ahead = 0. An error of the iterator comes out of the
    call that staged it (one call early with ahead = 1), StopIteration included.
    """

    def __init__(self, iterator, sizes: list[int], distribution=None, ahead: int = 0):
        self._iterator, self._sizes = iterator, list(sizes)
        self._distribution, self._ahead = distribution, ahead
        self._staged = collections.deque()
        self._taken = self._handed = 0  # calls staged, calls handed out

    def __iter__(self):
        return self

    def __next__(self) -> list[dict]:
        while self._taken < len(self._sizes) and self._taken <= self._handed + self._ahead:
            self._staged.append([to_device(next(self._iterator), self._distribution)
                                 for _ in range(self._sizes[self._taken])])
            self._taken += 1
        if not self._staged:
            raise StopIteration
        self._handed += 1
        return self._staged.popleft()


# === State and the update ===
def values(variables) -> list:
    """The current arrays of Keras variables (a compiled step's explicit state)."""
    return [v.value for v in variables]


def assign(variables, arrays) -> None:
    for v, value in zip(variables, arrays):
        v.assign(value)


def training_state(model, optimizer) -> tuple[list, list, list]:
    """(trainable, non-trainable, optimizer) arrays: a compiled train step's state."""
    return (values(model.trainable_variables), values(model.non_trainable_variables),
            values(optimizer.variables))


def assign_training_state(model, optimizer, state) -> None:
    """The variables take a `training_state` a compiled step returned."""
    trainable, non_trainable, opt = state
    assign(model.trainable_variables, trainable)
    assign(model.non_trainable_variables, non_trainable)
    assign(optimizer.variables, opt)


def clip_by_global_norm(grads: list, clip_norm: float):
    """As tf.clip_by_global_norm: g * c / max(norm, c). Returns (grads, norm)."""
    norm = jnp.sqrt(sum(jnp.sum(jnp.square(g.astype("float32"))) for g in grads))
    scale = clip_norm / jnp.maximum(norm, clip_norm)
    return [g * scale.astype(g.dtype) for g in grads], norm


def _add(totals, values):
    return values if totals is None else jax.tree.map(jnp.add, totals, values)


# === Pre-training ===
class JaxPretraining(Pretraining):
    """Pre-training on the JAX backend (see the module docstring and pretraining.py).

    A training phase that trains part of the model (bert_mlm, two_stage)
    differentiates its own variables only; the one optimizer over the whole
    model updates them (the others keep their weights and optimizer slots).
    """

    backend = "jax"

    def __init__(self, config: PretrainingConfig, run: PretrainingRun):
        if keras.backend.backend() != "jax":
            raise ConfigError("JaxPretraining needs KERAS_BACKEND=jax")
        # The NumPy input never imports TensorFlow (nor does anything else here).
        self.tensorflow_io = run.jax_input_pipeline == "tf.data"
        self.packed_input = run.jax_input_pipeline == "packed"
        self._compiled = {}  # (phase name, steps per call) -> jitted train function
        self._state_lost: int | None = None  # the step whose state is gone: see
        # _recover_from_interrupt
        super().__init__(config, run)
        # Where each phase's variables sit in model.trainable_variables.
        index = {id(v): i for i, v in enumerate(self.model.trainable_variables)}
        self._trained = {p.name: tuple(index[id(v)] for v in p.variables) for p in self.phases}
        self._eval_step = jax.jit(self._eval_fn)

    def _setup_devices(self) -> None:
        # Pretraining.__init__ checks that the batches split over the devices.
        self.num_replicas, self.distribution = data_parallel(
            self.run.strategy, self.run.num_devices, {})
        # multi_worker stays False: a JAX save is no collective, any process can save.
        self.chief = jax.process_index() == 0
        self.local_replicas = max(1, self.num_replicas // jax.process_count())
        self.on_cpu = _on_cpu()

    def _agree_on_settings(self) -> None:
        """Every process's settings digest, gathered: one that differs is refused (a
        --seed or batch size of its own had ended in tracebacks and Gloo aborts). The
        checkpoints' steps are compared by `restore`, which names them."""
        if jax.process_count() < 2:
            return
        from jax.experimental import multihost_utils

        mine = self.settings_digests(latest=False)
        every = np.asarray(multihost_utils.process_allgather(np.asarray(list(mine.values()))))
        differ = [name for i, name in enumerate(mine) if (every[:, i] != every[0, i]).any()]
        if differ:
            raise self.differing_settings(f"--jax_num_processes={jax.process_count()}", differ)

    def _make_checkpoints(self) -> NpzCheckpoints:
        return NpzCheckpoints(self.model, self.optimizer,
                              checkpoint_dir(self.run.model_dir),
                              self.config.keep_checkpoint_max, writer=self.chief)

    def _stop_agreement(self):
        return stop_agreement()

    @property
    def step(self) -> int:
        if self._state_lost is not None:
            return self._state_lost
        return super().step

    # === Data ===
    def _batches(self, files, batch_size, seed, is_training, skip_batches=0,
                 max_seq_length=None, masking=None, what="--train_data"):
        """NumPy batches: the TF loop's tf.data pipeline, data/numpy_pipeline.py or
        data/packed.py (these two read and mask in a thread, ahead of the device); at the
        config's length and masking unless given (phase 2). `what`: the flag the files
        come from, for messages.

        The files are found (and packed files opened and checked) here, before the
        thread starts: files gone or damaged since the run started (phase 2's, met
        where it starts; --eval_data's) are the caller's InputError, which saves the
        steps so far and names the flag (in the thread they had ended the run with
        --train_data's name and the steps since the last checkpoint lost)."""
        length, masking = max_seq_length or self.config.max_seq_length, masking or self.masking
        if self.packed_input:
            return prefetch(packed_pretraining_batches(
                PackedExamples(files, length, what=what), batch_size, length, masking,
                is_training=is_training, seed=seed, skip_batches=skip_batches))
        if not self.tensorflow_io:
            return prefetch(numpy_pretraining_batches(
                expand_files(files, "TFRecord"), batch_size, length, masking,
                is_training=is_training, seed=seed, skip_batches=skip_batches))
        from electra_tf.data.pipeline import pretraining_dataset

        return pretraining_dataset(files, batch_size, length, masking,
                                   is_training=is_training, seed=seed,
                                   skip_batches=skip_batches).as_numpy_iterator()

    # === The step ===
    def _step_fn(self, phase, state, micro_batches, seeds):
        """One optimizer step of `phase`, as the TF backend's replica step.

        Args:
          phase: the phases.Phase being trained (its objective and variables).
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
        k = phase.gradient_accumulation_steps

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
        grads, norm = clip_by_global_norm(grads, self.config.clip_norm)
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
        k = phase.gradient_accumulation_steps
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

    def train_steps(self, iterator, num_steps: int) -> dict:
        """Runs `num_steps` optimizer steps of the current phase; returns their metrics.

        As TensorFlowPretraining.train_steps. Calls of `jax_steps_per_call`
        steps each, then the remainder one step per call; the seeds are
        [seed, step * k + i] for micro-batch i of k, whatever the calls.
        """
        phase = self.phase_at(self.step)
        k = phase.gradient_accumulation_steps
        per_call = self.run.jax_steps_per_call
        if self.step + num_steps > phase.end:
            raise ValueError(f"{num_steps} steps from {self.step} cross the end of {phase.name}")
        step = self.step
        calls, left = [], num_steps  # steps per compiled call
        while left:
            calls.append(per_call if left >= per_call else 1)
            left -= calls[-1]
        staged = DeviceBatches(iterator, [n * k for n in calls], self.distribution,
                               ahead=1 if self.run.jax_device_prefetch else 0)
        state, totals = training_state(self.model, self.optimizer), None
        try:  # `state` is donated: no variable is read until it is assigned back
            for n in calls:
                stop_point()  # a second Ctrl-C or SIGTERM (loop.InterruptGate)
                batches = next(staged)
                seeds = jnp.asarray([[[self.config.seed, (step + i) * k + j] for j in range(k)]
                                     for i in range(n)], dtype="int32")
                state, values = self._compiled_steps(phase, n)(state, batches, seeds)
                totals = _add(totals, values)
                step += n
        except BaseException:  # Ctrl-C, or a collective that lost a peer mid-chunk
            self._recover_from_interrupt(state, step)
            raise
        assign_training_state(self.model, self.optimizer, state)
        return reporting.finish(jax.device_get(totals), num_steps)

    def _recover_from_interrupt(self, state, step: int) -> None:
        """Ctrl-C (or an error: a multi-host peer lost) inside train_steps: leaves the
        variables whole for the save (or the error's message, which reads the step) that
        follows.

        The step donates its input buffers. Between calls, `state` is the last
        finished call's output, alive: the variables take it (the save then
        holds every finished step). If the interrupt landed after a call took
        `state` and before it returned, those buffers are gone: the variables
        go back to the latest checkpoint, or, with none yet, are left as they
        are and the save is skipped. On a multi-host run (a second signal, which
        stopped this process alone: loop.InterruptGate) the restore, a collective,
        is not tried: the others are elsewhere, and the loop saves nothing then.

        Args:
          state: the training state the loop holds; step: its step.
        """
        if not any(x.is_deleted() for x in jax.tree.leaves(state)):
            assign_training_state(self.model, self.optimizer, state)
        elif self.checkpoints.latest and jax.process_count() == 1:
            self.checkpoints.restore()
        else:
            self._state_lost = step

    @property
    def state_lost(self) -> bool:
        return self._state_lost is not None

    def save_checkpoint(self) -> str | None:
        if self._state_lost is not None:
            self._log("interrupted inside a compiled step, whose state is gone: no "
                      "checkpoint to save")
            return None
        return super().save_checkpoint()

    def _peer_lost(self, error: Exception) -> Exception | None:
        """A collective that failed because another process of a multi-host run is gone
        (killed, crashed): XLA's Gloo errors and the coordinator's heartbeat timeout."""
        if jax.process_count() < 2:
            return None
        message = str(error)
        if not framework_messages.jax_peer_lost(message):
            return None
        first = next((line.strip() for line in message.splitlines() if line.strip()), "")
        return PeerLost(
            f"--jax_num_processes={jax.process_count()}: another process of the run stopped "
            f"at step {self.step} or soon after ({first[:200]}); this process stops too, "
            "without saving (its peers' state is gone); rerun every process to resume from "
            "the last checkpoint")

    def restore(self) -> int:
        """Resumes from the latest checkpoint; every process must resume at one step.

        The processes compare the steps their model_dir's latest checkpoint
        names before any of them restores: assigning the restored arrays to
        variables laid out over every process is itself collective, so a
        process that restores while another does not would meet it in a
        mismatched collective (a Gloo abort).
        """
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            latest = self.checkpoints.latest
            step = checkpoint_step(latest) if latest else 0
            steps = multihost_utils.process_allgather(np.asarray(step)).tolist()
            if len(set(steps)) > 1:
                raise InputError(f"the processes would resume from different steps {steps}: "
                                 "every process must see the same --model_dir (a shared file "
                                 "system) and its checkpoints")
        return super().restore()

    # === Evaluation ===
    def _eval_fn(self, state, batch, seed):
        trainable, non_trainable = state
        outputs, _ = self.model.stateless_call(trainable, non_trainable, batch, training=False,
                                               seed=seed)
        losses, sums = self.model.losses_and_metric_sums(batch, outputs, evaluation=True)
        return {**{"loss/" + n: v for n, v in losses.items()}, **sums}

    def _eval_batch(self, batch, index: int) -> None:
        if index == 0:
            self._eval_totals = None
        state = (values(self.model.trainable_variables),
                 values(self.model.non_trainable_variables))
        seed = jnp.asarray([self.config.seed + 1, index], dtype="int32")
        self._eval_totals = _add(self._eval_totals, self._eval_step(
            state, to_device(batch, self.distribution), seed))

    def _eval_results(self, num_batches: int) -> dict:
        return reporting.finish(jax.device_get(self._eval_totals), num_batches, evaluation=True)


# === Fine-tuning ===
class JaxFinetuning(Finetuning):
    """Fine-tunes the discriminator on one task with JAX (finetuning.py).

    The gradient is that of the batch's summed loss divided by the number of
    devices, as the TF loop's all-reduce of per-replica sums pre-divided by
    the replica count gives. The dropout masks differ from a TF run's (each
    backend draws its own); the batches are the same tf.data shuffle of the
    same features. Prediction is a second compiled function.
    """

    backend = "jax"

    def __init__(self, task, config: FinetuningConfig, run: FinetuningRun):
        if keras.backend.backend() != "jax":
            raise ConfigError("JaxFinetuning needs KERAS_BACKEND=jax")
        self.num_replicas, self.distribution = data_parallel(
            run.strategy, run.num_devices, {"--train_batch_size": config.train_batch_size,
                                            "--eval_batch_size": config.eval_batch_size})
        self.chief = jax.process_index() == 0
        self.local_share = 1.0 / jax.process_count()
        self.on_cpu = _on_cpu()
        super().__init__(task, config, run)
        # A symbolic call creates what layers make at their first call (the
        # embeddings' dropout seed state): a stateless step cannot create state.
        self.model.compute_output_spec({k: keras.KerasTensor((1, 2), "int32")
                                        for k in ("input_ids", "input_mask", "segment_ids")})
        self._train_step = jax.jit(self._step_fn)
        self._predict_fn = jax.jit(self._predict_step)

    def train_iterator(self, epoch: int, skip: int = 0):
        """NumPy global batches of `epoch` (the TF loop's shuffle), after `skip` batches."""
        return self.train_dataset(epoch, skip).prefetch(2).as_numpy_iterator()

    # === The step ===
    def _step_fn(self, state, batch, seed):
        trainable, non_trainable, opt_vars = state
        inputs, labels = split_batch(batch)
        task = self.task

        def loss_fn(trainable):
            outputs, new_non_trainable = self.model.stateless_call(
                trainable, non_trainable, inputs, training=True, seed=seed)
            # Summed over the (global, sharded) batch, as the original (so
            # clipping acts): one device's gradient, on any number of devices.
            loss = task.loss(outputs, labels)
            return loss, (loss, new_non_trainable)

        (_, (loss, non_trainable)), grads = jax.value_and_grad(loss_fn, has_aux=True)(trainable)
        grads, norm = clip_by_global_norm(grads, self.config.clip_norm)
        trainable, opt_vars = self.optimizer.stateless_apply(opt_vars, grads, trainable)
        return (trainable, non_trainable, opt_vars), loss / task.loss_count(labels), norm

    def train_steps(self, iterator, num_steps: int) -> float:
        """Runs `num_steps` optimizer steps (after build_optimizer); returns the mean loss
        (and sets `last_grad_norm`).

        The variables hold the state of the last finished step even when
        Ctrl-C lands between steps (so the loop's checkpoint is of that step).
        """
        state, step = training_state(self.model, self.optimizer), self.step
        total = norms = 0.0
        try:
            for i in range(num_steps):
                stop_point()  # a second Ctrl-C or SIGTERM (loop.InterruptGate)
                seed = jnp.asarray([self.config.seed, step + i], dtype="int32")
                batch = to_device(next(iterator), self.distribution)
                state, loss, norm = self._train_step(state, batch, seed)
                total, norms = total + loss, norms + norm
        finally:
            assign_training_state(self.model, self.optimizer, state)
        self.last_grad_norm = float(norms) / num_steps
        return float(total) / num_steps

    # === Prediction and checkpoints ===
    def _predict_step(self, trainable, non_trainable, inputs):
        outputs, _ = self.model.stateless_call(trainable, non_trainable, inputs, training=False)
        return outputs

    def _predict_batch(self, inputs: dict) -> dict:
        outputs = self._predict_fn(values(self.model.trainable_variables),
                                   values(self.model.non_trainable_variables),
                                   to_device(inputs, self.distribution))
        return jax.device_get(outputs)

    def make_checkpoints(self) -> NpzCheckpoints:
        """npz checkpoints of the model and the optimizer under model_dir/checkpoints."""
        return NpzCheckpoints(self.model, self.optimizer,
                              checkpoint_dir(self.run.model_dir),
                              self.config.keep_checkpoint_max, writer=self.chief)

    def _stop_agreement(self):
        return stop_agreement()
