"""The distributed runtime both training loops share (tf.distribute).

The pre-training loop (`training.py`) and the fine-tuning loop
(`finetuning/trainer.py`) are built from these pieces; so is the TF1
checkpoint import (`interop/core.py`), which must write checkpoints the
pre-training loop can resume. Nothing here knows about ELECTRA.

One optimizer step, per replica (docs/reference.md, "Keras 3 on TF 2.20"):
  1. a forward/backward function, XLA-compiled when jit_compile is on, that
     holds neither `next(iterator)` nor `strategy.run` (XLA compiles
     neither) and returns `dense_gradients` of the loss pre-divided by the
     number of replicas (and micro-batches);
  2. `apply_reduced_gradients`, outside XLA: an all-reduce (sum) across
     replicas, global-norm clipping of the summed gradient, the AdamW update.
Seeds: `replica_seed` folds the replica id into every step's seed, so that
replicas draw different dropout masks and samples (a mirrored
SeedGenerator would give them all the same, silently).

TensorFlow is imported on first use: the JAX loop uses the parts that need
none (`log`, `set_precision`, the optimizer, `weights_checksum`,
`summary_writer(..., tensorflow=False)`) on machines without it.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np

from electra_tf import reporting
from electra_tf.config import ConfigError, PretrainingConfig
from electra_tf.errors import InputError
from electra_tf.optimization import create_optimizer


class _TensorFlowOnFirstUse:
    """The `tensorflow` module, imported when an attribute is first read."""

    def __getattr__(self, name):
        import tensorflow

        return getattr(tensorflow, name)


tf = _TensorFlowOnFirstUse()


class Interrupted(KeyboardInterrupt):
    """Ctrl-C after the loop saved a checkpoint; str() is the one line to print."""

    def __init__(self, step: int):
        super().__init__(f"interrupted at step {step}; checkpoint saved; rerun to resume")
        self.step = step


class InterruptGate:
    """Holds a Ctrl-C until the training loop reaches a point where stopping is safe.

    Python raises KeyboardInterrupt at whatever line runs when SIGINT arrives,
    which inside a loop can be TensorFlow's own code: a checkpoint save half
    done, a lock taken and never released. Within `with InterruptGate() as
    gate:`, a first Ctrl-C only marks the request; the loop calls
    `gate.check()` where stopping is safe (between chunks of steps, after a
    save), which raises KeyboardInterrupt there. The chunk that was running
    finishes first: a compiled call cannot be stopped midway anyway. A second
    Ctrl-C raises at once, as without the gate. A request the loop never
    reached a check for is raised when the block ends. Off the main thread
    (where no signal handler can be set), or where SIGINT is ignored, the
    gate does nothing.
    """

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self):
        # A process started with SIGINT ignored (`nohup`, a shell's background
        # job) keeps ignoring it.
        if threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def _on_sigint(self, signum, frame):
        if self.requested:  # the second Ctrl-C: stop now
            raise KeyboardInterrupt
        self.requested = True

    def check(self) -> None:
        """Raises KeyboardInterrupt if a Ctrl-C came since the gate opened."""
        if self.requested:
            raise KeyboardInterrupt

    def __exit__(self, exc_type, exc, tb):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
        if exc_type is None:
            self.check()
        return False


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


def make_strategy(name: str, num_devices: int = 0, tpu: str = "",
                  startup_timeout_s: float = 0) -> tf.distribute.Strategy:
    """default | mirrored | multi_worker (TF_CONFIG) | tpu.

    Call at program start, before any TF op: multi-worker collectives and the
    logical CPU split for a mirrored run without GPUs can only be set then.

    Args:
      startup_timeout_s: multi_worker: if the cluster is not up after this
        many seconds (a worker that never started, or died at start-up), end
        the process with one line on stderr (`StartupWatchdog`); 0 waits
        forever, as TensorFlow does.
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
        watchdog = None
        if startup_timeout_s > 0:
            watchdog = StartupWatchdog(startup_timeout_s, (
                f"error: --strategy=multi_worker: the cluster did not come up within "
                f"--worker_startup_timeout_s={startup_timeout_s:g}: not every task of TF_CONFIG "
                f"({_cluster_tasks()}) started, or one cannot be reached; start them all, or "
                "raise --worker_startup_timeout_s"))
        try:
            return tf.distribute.MultiWorkerMirroredStrategy()
        finally:
            if watchdog:
                watchdog.disarm()
    if name != "tpu":
        raise ConfigError(f"unknown strategy {name!r}")
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or None)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def _cluster_tasks() -> str:
    """TF_CONFIG's cluster as "worker 0 host:port, ..." (for messages)."""
    try:
        cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
        return ", ".join(f"{job} {i} {address}" for job, addresses in sorted(cluster.items())
                         for i, address in enumerate(addresses)) or "no cluster"
    except (ValueError, AttributeError):
        return "unreadable"


_WATCHDOG = """
import os, select, signal, sys
pid, timeout, message = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
if select.select([sys.stdin], [], [], timeout)[0]:
    sys.exit(0)  # the pipe closed: disarmed, or the process is gone
sys.stderr.write(message + "\\n")
sys.stderr.flush()
os.kill(pid, signal.SIGKILL)
"""


class StartupWatchdog:
    """Ends this process with `message` on stderr unless `disarm` comes within timeout_s.

    A process that waits for its multi-worker cluster waits inside
    TensorFlow's C++ start-up, holding the GIL, where no Python thread, timer
    or signal handler of its own can run (TensorFlow's own cluster timeout
    does not cover this wait). A small watcher process can still end it: it
    waits on a pipe that `disarm` (or this process's exit) closes, and past
    the timeout prints the message and kills this process (exit status 137).
    """

    def __init__(self, timeout_s: float, message: str):
        read, self._write = os.pipe()
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(timeout_s), message],
            stdin=read)
        os.close(read)

    def disarm(self) -> None:
        if self._write is not None:
            os.close(self._write)
            self._write = None
            self._proc.wait()


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True on the one worker that writes summaries, configs and final weights."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def log(tag: str, message: str) -> None:
    """One progress line on stderr: `[tag] message`."""
    print(f"[{tag}] {message}", file=sys.stderr, flush=True)


def set_precision(mixed_precision: str) -> None:
    """fp32 | bf16 as Keras' global dtype policy (process-wide)."""
    import keras

    keras.mixed_precision.set_dtype_policy(
        "mixed_bfloat16" if mixed_precision == "bf16" else "float32")


# === Seeds ===
def replica_seed(seed: int, counter, micro_step: int = 0, micro_steps: int = 1):
    """The int32 [2] seed of this replica at step `counter` (and micro-batch).

    `[seed, (counter * micro_steps + micro_step) * replicas + replica_id]`:
    every (step, micro-batch, replica) gets its own stream. Call in replica
    context. The loops pass the optimizer's step as `counter` (evaluation:
    the batch index, with a seed of its own).
    """
    ctx = tf.distribute.get_replica_context()
    counter = tf.cast(counter, tf.int32)
    return tf.stack([tf.constant(seed, tf.int32),
                     (counter * micro_steps + micro_step) * ctx.num_replicas_in_sync
                     + ctx.replica_id_in_sync_group])


# === Gradients and the optimizer ===
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
    replica's gradient before its own all-reduce). The optimizer comes from
    `build_optimizer`. Returns the global norm.
    """
    ctx = tf.distribute.get_replica_context()
    grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
    grads, norm = tf.clip_by_global_norm(grads, clip_norm)
    optimizer.apply_gradients(zip(grads, variables))
    return norm


def build_optimizer(variables, learning_rate: float, num_train_steps: int,
                    num_warmup_steps: int, **kwargs):
    """AdamW with the original's schedule, built for `variables`, for this runtime.

    Clipping is left to `apply_reduced_gradients` (global norm after the
    all-reduce). The slots are created here, before any checkpoint restore:
    restoring into an unbuilt optimizer loses them (docs/reference.md).

    Args:
      variables: the variables it will update.
      learning_rate, num_train_steps, num_warmup_steps, **kwargs: as
        `optimization.create_optimizer`.
    """
    optimizer = create_optimizer(learning_rate, num_train_steps, num_warmup_steps,
                                 clip_norm=None, **kwargs)
    optimizer.gradients_already_reduced = True  # apply_reduced_gradients did it
    optimizer.build(variables)
    return optimizer


def pretraining_optimizer(config: PretrainingConfig, variables):
    """The pre-training optimizer (what pre-training checkpoints hold)."""
    return build_optimizer(
        variables, config.learning_rate, config.num_train_steps, config.num_warmup_steps,
        weight_decay_rate=config.weight_decay_rate, lr_decay_power=config.lr_decay_power,
        adam_epsilon=config.adam_epsilon, adam_bias_correction=config.adam_bias_correction,
        schedule_restarts=config.stage_starts)


# === Checkpoints ===
def variable_checkpoint(model, optimizer) -> tf.train.Checkpoint:
    """A checkpoint of explicit variable dicts (model by path, optimizer by index).

    tf.train.Checkpoint(model=keras_model) misses variables Keras keeps in
    Python lists (docs/reference.md); explicit dicts miss nothing, and
    restore().assert_consumed() checks it.
    """
    model_vars = {v.path: v for v in model.variables}
    if len(model_vars) != len(model.variables):
        raise RuntimeError("model variable paths are not unique; checkpoints would lose some")
    opt_vars = {f"{i:05d}": v for i, v in enumerate(optimizer.variables)}
    return tf.train.Checkpoint(model=model_vars, optimizer=opt_vars)


_TEMP_SAVE = re.compile(r".+-\d+_temp")  # what tf.train leaves of a save killed midway


class Checkpoints:
    """Saves and restores a model + optimizer under `directory`, every `interval` steps.

    On a multi-worker run, workers other than the chief must still take part
    in saving (the save is collective); they write to a scratch folder that is
    removed after each save. What a save killed midway left behind (tf.train's
    `ckpt-N_temp/` folders, a worker's scratch folder) is removed when the
    run starts again; finished checkpoints are never touched.
    """

    def __init__(self, model, optimizer, directory: str, max_to_keep: int, interval: int,
                 strategy: tf.distribute.Strategy | None = None):
        self.directory = directory
        self.checkpoint = variable_checkpoint(model, optimizer)
        self.step_counter = optimizer.iterations
        self._scratch = None
        if strategy is not None and not is_chief(strategy):
            task = strategy.cluster_resolver.task_id
            self._scratch = os.path.join(os.path.dirname(directory), f".worker_{task}_checkpoints")
            shutil.rmtree(self._scratch, ignore_errors=True)
        else:
            self._remove_unfinished_saves()
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, self._scratch or directory, max_to_keep=max_to_keep,
            step_counter=self.step_counter, checkpoint_interval=interval)
        self._restored_from = None

    def _remove_unfinished_saves(self) -> None:
        if not os.path.isdir(self.directory):
            return
        for name in sorted(os.listdir(self.directory)):
            path = os.path.join(self.directory, name)
            if _TEMP_SAVE.fullmatch(name) and os.path.isdir(path):
                shutil.rmtree(path)
                log("checkpoints", f"removed {path}, left by a save that was killed midway")

    @property
    def latest(self) -> str | None:
        return tf.train.latest_checkpoint(self.directory)

    def restore(self) -> str | None:
        """Restores the latest checkpoint (all variables, checked); returns its path.

        Raises:
          ConfigError: its variables do not fit the model; InputError: unreadable.
        """
        latest = self.latest
        if latest and latest != self._restored_from:
            try:
                self.checkpoint.restore(latest).assert_consumed()
            except (AssertionError, ValueError) as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise ConfigError(
                    f"cannot resume from {latest}: its variables do not fit this model, which "
                    f"other flags built ({first[:300]}); use the flags it was written with, "
                    "or another --model_dir") from None
            except tf.errors.OpError as e:
                raise InputError(f"cannot resume from {latest}: unreadable checkpoint "
                                 f"({e.message.strip().splitlines()[0][:300]})") from None
            self._restored_from = latest
            return latest
        return None

    def save(self, force: bool = False) -> str | None:
        """Saves at the current step (if the interval is due, or `force`)."""
        path = self.manager.save(checkpoint_number=self.step_counter, check_interval=not force)
        if path and self._scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)
        return path


# === Host-side metric accumulation ===
class Accumulators:
    """Host variables that sum a loop's per-step values across replicas.

    Names decide how replicas combine and how `results` normalizes:
    "loss/<name>" and "grad_norm" are means over replicas, averaged over the
    steps; everything else is summed ("<name>/num" + "<name>/den" pairs, the
    AUC histograms), then `reporting.finish` makes the results.
    """

    def __init__(self, spec: dict[str, tuple]):
        self.variables = {name: tf.Variable(tf.zeros(shape, tf.float32), trainable=False)
                          for name, shape in spec.items()}

    @staticmethod
    def reduce_op(name: str):
        mean = name.startswith("loss/") or name == "grad_norm"
        return tf.distribute.ReduceOp.MEAN if mean else tf.distribute.ReduceOp.SUM

    def add(self, strategy: tf.distribute.Strategy, values: dict) -> None:
        """In cross-replica context (inside a tf.function): reduce and add."""
        for name, value in values.items():
            self.variables[name].assign_add(
                strategy.reduce(self.reduce_op(name), value, axis=None))

    def reset(self) -> None:
        for v in self.variables.values():
            v.assign(tf.zeros_like(v))

    def results(self, steps: int) -> dict:
        """Per-step means, num/den ratios and disc_auc (reporting.finish)."""
        return reporting.finish({k: v.numpy() for k, v in self.variables.items()}, steps)


def weights_checksum(variables) -> float:
    """A fingerprint of weights (sum of |w| weighted by position), to compare runs."""
    return float(sum(np.abs(np.asarray(v.numpy(), np.float64)).sum() * (i + 1)
                     for i, v in enumerate(variables)))


# === TensorBoard summaries ===
def summary_writer(logdir: str | None, tensorflow: bool = True):
    """A writer of TensorBoard scalars into `logdir` (None: one that writes nothing).

    Args:
      tensorflow: through tf.summary; False: with the tensorboard package
        alone (`EventWriter`: the JAX loop on the NumPy input, which never
        imports TensorFlow). Both write the same summaries: scalars as
        float32 tensors with the "scalars" plugin's metadata.

    Returns:
      An object for `write_scalars`, or None where summaries are off.
    """
    if logdir is None:
        return tf.summary.create_noop_writer() if tensorflow else None
    if tensorflow:
        return tf.summary.create_file_writer(logdir)
    try:
        return EventWriter(logdir)
    except ImportError as e:
        _warn_once(f"warning: no TensorBoard summaries: the tensorboard package is not "
                   f"installed ({e}); pip install tensorboard")
        return None


@functools.cache
def _warn_once(message: str) -> None:
    log("summaries", message)


class EventWriter:
    """TensorBoard scalars without TensorFlow, in the event files TensorFlow writes.

    The tensorboard package's own pieces: its RecordWriter (TFRecord framing),
    its Event and Summary protos and the scalar plugin's `scalar_pb`, over a
    local file named as tensorboard's EventFileWriter names one. (That
    writer itself opens files through tf.io.gfile, importing TensorFlow
    wherever it is installed.)
    """

    _uid = itertools.count()

    def __init__(self, logdir: str):
        from tensorboard.compat.proto import event_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter

        os.makedirs(logdir, exist_ok=True)
        name = "events.out.tfevents.%010d.%s.%s.%s" % (
            time.time(), socket.gethostname(), os.getpid(), next(self._uid))
        self._writer = RecordWriter(open(os.path.join(logdir, name), "wb"))
        self._write(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))

    def _write(self, event) -> None:
        self._writer.write(event.SerializeToString())
        self._writer.flush()

    def scalars(self, step: int, results: dict) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.plugins.scalar.summary_v2 import scalar_pb

        values = [scalar_pb(name, value).value[0] for name, value in results.items()
                  if np.ndim(value) == 0]
        self._write(event_pb2.Event(wall_time=time.time(), step=int(step),
                                    summary=summary_pb2.Summary(value=values)))


def write_scalars(writer, step: int, results: dict) -> None:
    """TensorBoard scalars (arrays in `results` are skipped) into a `summary_writer`."""
    if writer is None:
        return
    if isinstance(writer, EventWriter):
        writer.scalars(step, results)
        return
    with writer.as_default(step=step):
        for name, value in results.items():
            if np.ndim(value) == 0:
                tf.summary.scalar(name, value)
    writer.flush()
