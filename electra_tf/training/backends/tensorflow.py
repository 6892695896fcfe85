"""The TensorFlow backend: tf.distribute strategies and tf.function steps.

What this backend owns, for both loops (training/pretraining.py and
training/finetuning.py hold the rest; backends/jax.py has the same sections):

* Devices and processes: `make_strategy` (default, mirrored, multi-worker
  from TF_CONFIG, TPU), made at program start (`start`), before any TF op;
  `is_chief` picks the one worker that writes.
* Seeds: `replica_seed` folds the replica id into every step's seed, so that
  replicas draw different dropout masks and samples (a mirrored
  SeedGenerator would give them all the same, silently).
* The update, per replica (docs/reference.md, "Keras 3 on TF 2.20"):
    1. a forward/backward function, XLA-compiled when jit_compile is on, that
       holds neither `next(iterator)` nor `strategy.run` (XLA compiles
       neither) and returns `dense_gradients` of the loss pre-divided by the
       number of replicas (and micro-batches);
    2. `apply_reduced_gradients`, outside XLA: an all-reduce (sum) across
       replicas, global-norm clipping of the summed gradient, the AdamW update.
  A host loop's chunk of steps is one tf.function call (`repeat`'s while
  loop; the steps are traced without autograph, `traced`);
  `Accumulators` sum what the chunk reports in host variables.
* Pre-training (`TensorFlowPretraining`) and fine-tuning
  (`TensorFlowFinetuning`): the compiled steps, the input through
  `strategy.distribute_datasets_from_function`, tf.train checkpoints.
"""

from __future__ import annotations

import json
import os
import signal
import threading

import tensorflow as tf

from electra_tf.core import peers
from electra_tf.core.config import (
    FinetuningConfig,
    FinetuningRun,
    PretrainingConfig,
    PretrainingRun,
)
from electra_tf.core.errors import ConfigError
from electra_tf.core.tracing import OwnTraceCount
from electra_tf.data.pipeline import pretraining_dataset
from electra_tf.folders.files import checkpoint_dir
from electra_tf.tasks.losses import EXAMPLE_WEIGHT
from electra_tf.training import reporting
from electra_tf.training.checkpoints import TensorFlowCheckpoints
from electra_tf.training.finetuning import Finetuning, split_batch
from electra_tf.training.loop import differing_digests, log
from electra_tf.training.phases import Phase
from electra_tf.training.pretraining import Pretraining
from electra_tf.training.watchdog import StartupWatchdog


def _local_devices(strategy: tf.distribute.Strategy) -> tuple[int, bool]:
    """The replicas this process runs and whether every one is a CPU (the memory
    check's: training/memory.py)."""
    try:
        local = len(strategy.extended.worker_devices)
    except RuntimeError:  # the default strategy: this process's one device
        local = 1
    return local, not tf.config.list_logical_devices("GPU")


def start(run) -> tf.distribute.Strategy:
    """The run's strategy; call at program start, before any TF op.

    Multi-worker collectives and the logical CPU split of a mirrored run
    without GPUs can only be set then.
    """
    strategy = make_strategy(run.strategy, run.num_devices, run.tpu,
                             run.worker_startup_timeout_s)
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        peers.register(end_meeting(is_chief(strategy)))
    return strategy


def end_meeting(chief: bool):
    """core.peers' meeting for a multi-worker run: a barrier of the cluster's
    coordination service (TensorFlow's eager context holds it; tf.distribute has no
    public barrier, and an all-reduce would have to follow the same collectives in
    every worker). True once every worker met it, on a worker other than the chief;
    False on the chief, or where the barrier failed (a worker gone, the time out)."""
    from tensorflow.python.eager import context

    def meet(timeout_s: float) -> bool:
        wait = getattr(context.context(), "wait_at_barrier", None)
        if wait is None:
            return False
        try:
            wait("electra_tf_end", int(timeout_s * 1000))
        except tf.errors.OpError:
            return False
        return not chief

    return meet


# === Devices and strategies ===
def cpu_only() -> bool:
    """Whether this process computes on its CPU alone (no GPU or TPU device); after
    `start`, which fixes the logical devices."""
    return not (tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


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
        if num_devices > 1:  # (it had been ignored: one device, and the record said N)
            raise ConfigError(f"--num_devices={num_devices} is for --strategy=mirrored (on "
                              "the TensorFlow backend; JAX spreads over devices without it), "
                              "and this run's is default: one device; give "
                              "--strategy=mirrored")
        return tf.distribute.get_strategy()
    if name == "mirrored":
        configure_devices(name, num_devices)
        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]
        if num_devices > len(devices):  # (GPUs: it had trained on fewer, the record saying N)
            raise ConfigError(f"--num_devices={num_devices}, but this machine shows "
                              f"{len(devices)} GPU(s); give --num_devices={len(devices)} or "
                              "less (0: all)")
        if num_devices:
            devices = devices[:num_devices]
        return tf.distribute.MirroredStrategy(devices)
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise ConfigError("strategy=multi_worker needs the TF_CONFIG environment variable")
        check_tf_config(os.environ["TF_CONFIG"])
        # (a task that failed before it joined had left the others silent for the
        # whole wait)
        log("multi_worker", f"waiting for every task of TF_CONFIG ({_cluster_tasks()}) to "
                            "start" + (f", up to --worker_startup_timeout_s={startup_timeout_s:g}"
                                       if startup_timeout_s > 0 else ""))
        watchdog = None
        if startup_timeout_s > 0:
            watchdog = StartupWatchdog(startup_timeout_s, (
                f"error: --strategy=multi_worker: the cluster did not come up within "
                f"--worker_startup_timeout_s={startup_timeout_s:g}: not every task of TF_CONFIG "
                f"({_cluster_tasks()}) started, or one cannot be reached; start them all, or "
                "raise --worker_startup_timeout_s"))
        handler = signal.getsignal(signal.SIGTERM)
        try:
            return tf.distribute.MultiWorkerMirroredStrategy()
        finally:
            if watchdog:
                watchdog.disarm()
            # TensorFlow's coordination service installs its own SIGTERM handler (its
            # preemption notifier), which logs and swallows the signal while
            # signal.getsignal still names Python's: a SIGTERM from here to the training
            # loop had been lost, and the run trained to its end, exit 0
            if handler is not None and threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, handler)
    if name != "tpu":
        raise ConfigError(f"unknown strategy {name!r}")
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or None)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, OSError, RuntimeError, tf.errors.OpError) as e:
        # TensorFlow's own: a traceback (37 lines for no TPU name; a URLError for a
        # name it cannot look up)
        reason = " ".join(str(e).split()) or type(e).__name__
        raise ConfigError(
            f"--strategy=tpu: no TPU reached ({reason}); give --tpu=NAME (a Cloud TPU's "
            "name or grpc:// address; local on a TPU VM)" if not tpu else
            f"--strategy=tpu --tpu={tpu}: the TPU cannot be reached ({reason})") from None
    return tf.distribute.TPUStrategy(resolver)


def check_tf_config(value: str) -> None:
    """Refuses a TF_CONFIG that TensorFlow would stop on with a traceback (or wait on).

    Raises:
      ConfigError: not JSON, no cluster, a job but chief and worker, a job that
        is not a list of host:port addresses (a port 1 to 65535), more than one
        chief, a task whose type is no job of the cluster, or whose index is out
        of that job's range.
    """
    try:
        config = json.loads(value)
    except ValueError as e:
        raise ConfigError(f"TF_CONFIG is not valid JSON ({e})") from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    if not isinstance(cluster, dict) or not cluster:
        raise ConfigError('TF_CONFIG needs a "cluster" of jobs and a "task", e.g. {"cluster": '
                          '{"worker": ["host1:port", "host2:port"]}, "task": {"type": "worker", '
                          '"index": 0}}')
    jobs = sorted(set(cluster) - {"chief", "worker"})
    if jobs:  # (a "ps" job had been waited on until the start-up timeout)
        raise ConfigError(f"TF_CONFIG's cluster has a {jobs[0]!r} job: "
                          "MultiWorkerMirroredStrategy takes \"chief\" and \"worker\" "
                          "jobs only (every task trains)")
    for job, addresses in cluster.items():
        if not isinstance(addresses, list) or not addresses or not all(
                isinstance(a, str) for a in addresses):
            raise ConfigError(f"TF_CONFIG's {job!r} job is {json.dumps(addresses)}: give a "
                              f'list of "host:port" strings, e.g. ["host1:2222", "host2:2222"]')
        for address in addresses:
            if peers.address_port(address) is None:
                raise ConfigError(f"TF_CONFIG's {job!r} job lists {address!r}: an address is "
                                  "host:port, the port 1 to 65535")
    seen: dict[str, str] = {}
    for job, addresses in sorted(cluster.items()):
        for i, address in enumerate(addresses):
            if address in seen:  # (the cluster had waited for --worker_startup_timeout_s)
                raise ConfigError(f"TF_CONFIG's cluster lists {address} twice ({seen[address]} "
                                  f"and {job} {i}): give each task its own host:port")
            seen[address] = f"{job} {i}"
    if len(cluster.get("chief", [])) > 1:
        raise ConfigError(f"TF_CONFIG's cluster has {len(cluster['chief'])} \"chief\" tasks: "
                          "at most one (the others are \"worker\" tasks)")
    rpc = config.get("rpc_layer")
    # (TensorFlow takes `rpc_layer or "grpc"`; another had been its 150-line "No server
    # factory registered" dump)
    if rpc not in (None, "", "grpc"):
        raise ConfigError(f"TF_CONFIG's rpc_layer is {json.dumps(rpc)}: "
                          "MultiWorkerMirroredStrategy's servers speak \"grpc\" (leave it out)")
    task = config.get("task")
    if not isinstance(task, dict) or not isinstance(task.get("type"), str) \
            or task["type"] not in cluster:  # (a list or object: a TypeError traceback)
        raise ConfigError(f"TF_CONFIG's task {json.dumps(task)} names no job of its cluster "
                          f"({', '.join(sorted(cluster))})")
    if "index" not in task:  # (TensorFlow's own ValueError traceback)
        raise ConfigError(f"TF_CONFIG's task {json.dumps(task)} has no \"index\": give its "
                          f"place in the {task['type']} job, 0 to "
                          f"{len(cluster[task['type']]) - 1}")
    addresses, index = cluster[task["type"]], task["index"]
    whole = _whole_number(index)  # TensorFlow reads int(index): "1" and 1.0 are task 1
    if whole is None:
        raise ConfigError(f"TF_CONFIG's task index {json.dumps(index)} is not a whole number: "
                          f"give its place in the {task['type']} job, 0 to "
                          f"{len(addresses) - 1}")
    index = whole
    if not 0 <= index < len(addresses):
        raise ConfigError(f"TF_CONFIG's task index {json.dumps(index)} is out of range: its "
                          f"cluster has {len(addresses)} {task['type']} task(s), 0 to "
                          f"{len(addresses) - 1}")
    _check_own_port(str(addresses[index]), f"{task['type']} {index}")


def _whole_number(value) -> int | None:
    """`value` as TensorFlow's int(task index) reads it, where that is exact: an int, an
    integral float, or a string int() reads ("1", "+1"); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)  # ("+1"; not "²", which str.isdigit passes)
        except ValueError:
            return None
    return None


def _check_own_port(address: str, task: str) -> None:
    """Refuses, by name, the port of this task's own TF_CONFIG address where another
    process holds it (TensorFlow's gRPC server failed with a traceback, and the other
    workers waited for --worker_startup_timeout_s). A host that is not this machine's,
    or an address without a port, is left to TensorFlow.

    Raises:
      ConfigError: the port is in use on this host.
    """
    port = peers.address_port(address)
    if port is None:  # (TensorFlow's to judge)
        return
    try:
        held = peers.port_in_use(port)
    except OSError:  # one not to be bound here
        return
    if held:
        raise ConfigError(f"TF_CONFIG's {task} is {address}, but port {port} is in use on this "
                          "host (another worker of a run, or another program); give each task "
                          "a free port")


def _cluster_tasks() -> str:
    """TF_CONFIG's cluster as "worker 0 host:port, ..." (for messages)."""
    try:
        cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
        return ", ".join(f"{job} {i} {address}" for job, addresses in sorted(cluster.items())
                         for i, address in enumerate(addresses)) or "no cluster"
    except (ValueError, AttributeError):
        return "unreadable"


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True on the one worker that writes summaries, configs and final weights."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief




def chief_process(strategy: tf.distribute.Strategy | None) -> bool:
    """backends.is_chief: this process's `is_chief` under the strategy `start` made."""
    return strategy is None or is_chief(strategy)


def stop_agreement(strategy: tf.distribute.Strategy):
    """loop.InterruptGate's `agree` for a multi-worker run: sums every worker's votes (a
    float32 [2]) in one all-reduce of 2 floats, the same collective in every worker; None
    for a run of one process (nothing to agree with).

    A SIGTERM (or Ctrl-C) to one worker then stops every worker at the same chunk
    boundary, where all save the checkpoint (tf.train's save is collective); without it,
    the worker that stopped left the others waiting in the next step's all-reduce.
    """
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return None

    @traced
    def total(votes):  # as Accumulators.add's reduce: each replica's copy, on its device
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(tf.identity,
                                                                        args=(votes,)), axis=None)

    return lambda votes: total(tf.constant(votes, tf.float32)).numpy()


def agreement(strategy: tf.distribute.Strategy):
    """For a multi-worker run: a function (a list of digests, loop.settings_digest's) ->
    the indexes of those that differ between the workers, in one all-reduce (the same
    collective in every worker, as `stop_agreement`'s); None for a run of one process."""
    total = stop_agreement(strategy)
    if total is None:
        return None
    return lambda digests: differing_digests(total, digests, strategy.num_replicas_in_sync)


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

    Each replica's loss is scaled so that the sum is the gradient of the global
    batch's loss (pre-training: the mean, each replica's divided by the replica
    count; fine-tuning: the sum, each replica's as it is), which one device
    would compute; clipping sees the global norm (Keras would clip each
    replica's gradient before its own all-reduce). The optimizer comes from
    `build_optimizer`. Returns the global norm.
    """
    ctx = tf.distribute.get_replica_context()
    grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
    grads, norm = tf.clip_by_global_norm(grads, clip_norm)
    # The step count moves with the update: Keras' `iterations.assign_add(1)` depends
    # on no input, so a traced step could count itself before its batch was read, and
    # a bad record met there left a checkpoint one step past the weights it held.
    with tf.control_dependencies([norm]):
        optimizer.apply_gradients(zip(grads, variables))
    return norm




# === Traced functions ===
def traced(fn=None, **options):
    """tf.function without autograph: the steps hold no Python control flow on
    tensors (a chunk's loop is `repeat`'s tf.while_loop), and autograph would
    convert every function they call from source, in every run: about 2.5 s of
    a tiny model's start-up on 2 cores, whatever the model's size."""
    if fn is None:
        return lambda f: traced(f, **options)
    # (an object of its own: TensorFlow's retracing count is by the code, which each
    # trainer's closures share: core/tracing.py)
    return tf.function(OwnTraceCount(fn), autograph=False, **options)


def accumulate(fwd_bwd, micro_batches, seed_of):
    """The sum of fwd_bwd(batch, seed_of(i)) over the micro-batches, run one at a time.

    k > 1: a tf.while_loop of one iteration at a time (parallel_iterations=1) from
    zeros. Unrolled, the k calls shared no data and TensorFlow's inter-op threads ran
    several at once, so a step's peak memory grew with k (a tiny model's 4
    micro-batches of 8 x 512 took 1.6x one's, 8 of them 2x), where accumulation is
    there to bound it to one micro-batch's; control dependencies between the
    unrolled calls had not stopped it.

    The micro-batches are dense tensors of one shape and the outputs of fixed shapes,
    as the input pipeline's batches (drop_remainder) and the step's sums are: the
    loop starts from zeros of those shapes (a loop from the first micro-batch's
    outputs would not wait for it, only its sum would).
    """
    if len(micro_batches) == 1:
        return fwd_bwd(micro_batches[0], seed_of(0))
    outputs = fwd_bwd.get_concrete_function(micro_batches[0], seed_of(0)).structured_outputs
    for index, t in enumerate(tf.nest.flatten(outputs)):
        if not t.shape.is_fully_defined():
            raise ValueError(f"gradient accumulation sums outputs of fixed shapes; output "
                             f"{index} (of tf.nest.flatten's) has shape {t.shape}")
    zeros = tf.nest.map_structure(lambda t: tf.zeros(t.shape, t.dtype), outputs)
    stacked = tf.nest.map_structure(lambda *parts: tf.stack(parts), *micro_batches)

    def body(i, total):
        batch = tf.nest.map_structure(lambda parts: parts[i], stacked)
        out = fwd_bwd(batch, seed_of(i))
        return i + 1, tf.nest.map_structure(tf.add, total, out)

    _, total = tf.while_loop(lambda i, _: i < len(micro_batches), body,
                             (tf.constant(0), zeros), parallel_iterations=1)
    return total


def repeat(num_steps, body) -> None:
    """Runs body() num_steps (an int32 scalar tensor) times, inside a traced
    function: what autograph makes of `for _ in tf.range(num_steps): body()`."""
    def step(i):
        body()
        return i + 1

    tf.while_loop(lambda i: i < num_steps, step, [tf.constant(0, num_steps.dtype)])


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

    def results(self, steps: int, evaluation: bool = False) -> dict:
        """Per-step means, num/den ratios and disc_auc (reporting.finish)."""
        return reporting.finish({k: v.numpy() for k, v in self.variables.items()}, steps,
                                evaluation)




def task_id(strategy: tf.distribute.Strategy) -> int:
    resolver = getattr(strategy, "cluster_resolver", None)
    return int(getattr(resolver, "task_id", 0) or 0)


# === Pre-training ===
class TensorFlowPretraining(Pretraining):
    """Pre-training under tf.distribute (see the module docstring and pretraining.py).

    One optimizer step, per replica: the phase's forward/backward (the loss
    divided by the number of replicas and micro-batches, dense gradients),
    summed over `gradient_accumulation_steps` micro-batches, then the
    all-reduce, clipping and AdamW update. A chunk of steps is one traced call.

    Args:
      config, run: as Pretraining.
      strategy: a strategy made at program start (`start`); by default one is
        made from `run` here.
    """

    backend = "tensorflow"
    tensorflow_io = True

    def __init__(self, config: PretrainingConfig, run: PretrainingRun,
                 strategy: tf.distribute.Strategy | None = None):
        self.strategy = strategy or start(run)
        self._compiled: dict[str, tuple] = {}  # phase name -> (train loop, accumulators)
        self._eval = None
        super().__init__(config, run)

    def _setup_devices(self) -> None:
        self.num_replicas = self.strategy.num_replicas_in_sync
        self.chief = is_chief(self.strategy)
        self.multi_worker = isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy)
        self.local_replicas, self.on_cpu = _local_devices(self.strategy)

    def _agree_on_settings(self) -> None:
        """Every worker's settings digest, compared in one all-reduce
        (loop.differing_digests)."""
        if not self.multi_worker:
            return
        parts = self.settings_digests()
        differ = agreement(self.strategy)(list(parts.values()))
        if differ:
            raise self.differing_settings("--strategy=multi_worker",
                                          [list(parts)[i] for i in differ])

    def _scope(self):
        return self.strategy.scope()

    def _make_checkpoints(self) -> TensorFlowCheckpoints:
        return TensorFlowCheckpoints(
            self.model, self.optimizer, checkpoint_dir(self.run.model_dir),
            self.config.keep_checkpoint_max, chief=self.chief, task_id=task_id(self.strategy))

    def _stop_agreement(self):
        return stop_agreement(self.strategy)

    def _batches(self, files, batch_size, seed, is_training, skip_batches=0,
                 max_seq_length=None, masking=None, what="--train_data"):
        """Masked global batches, each input pipeline reading its share (InputContext);
        at the config's length and masking unless given (phase 2); `what` (the flag)
        is not read: tf.data's messages name the files. `skip_batches`
        counts global batches: a pipeline yields per-replica batches, one for each of
        its replicas a step (a mirrored resume had skipped 1/replicas of them, and
        trained again on batches it had used)."""
        def dataset(ctx):
            per_pipeline = ctx.num_replicas_in_sync // ctx.num_input_pipelines
            return pretraining_dataset(
                files, ctx.get_per_replica_batch_size(batch_size),
                max_seq_length or self.config.max_seq_length, masking or self.masking,
                is_training=is_training, input_context=ctx, seed=seed,
                skip_batches=skip_batches * per_pipeline)

        return iter(self.strategy.distribute_datasets_from_function(dataset))

    # === The step ===
    def _forward_metrics(self, batch, seed, objective, evaluation: bool = False):
        outputs = self.model(batch, training=False, seed=seed, objective=objective)
        return self.model.losses_and_metric_sums(batch, outputs, objective, evaluation)

    def _accumulators(self, objective, training: bool) -> Accumulators:
        """Host sums of what a loop reports, shaped by one forward pass."""
        # A batch of --train_data, also for an evaluation's: a bad record met here is
        # named as --train_data's (_bad_record), not as the evaluation's.
        evaluating, self._evaluating = self._evaluating, False
        batch = next(iter(pretraining_dataset(
            self.run.train_data, 2, self.config.max_seq_length, self.masking, seed=0,
            shuffle_buffer=1)))
        self._evaluating = evaluating
        losses, sums = self._forward_metrics(batch, tf.constant([0, 0], tf.int32), objective,
                                             evaluation=not training)
        spec = {"loss/" + n: v.shape for n, v in losses.items()}
        spec.update({n: v.shape for n, v in sums.items()})
        if training:
            spec["grad_norm"] = ()
        return Accumulators(spec)

    def _compile(self, phase: Phase):
        """The phase's traced train loop and its accumulators (built once)."""
        if phase.name in self._compiled:
            return self._compiled[phase.name]
        k, variables = phase.gradient_accumulation_steps, list(phase.variables)
        scale = float(self.num_replicas * k)

        def forward_backward(batch, seed):
            with tf.GradientTape() as tape:
                outputs = self.model(batch, training=True, seed=seed, objective=phase.objective)
                losses, sums = self.model.losses_and_metric_sums(batch, outputs,
                                                                 phase.objective)
                scaled = losses["loss"] / scale
            return losses, sums, dense_gradients(tape, scaled, variables)

        fwd_bwd = traced(forward_backward, jit_compile=self.run.jit_compile)

        def replica_step(micro_batches):  # gradient accumulation over k micro-batches
            losses, sums, grads = accumulate(
                fwd_bwd, micro_batches,
                lambda i: replica_seed(self.config.seed, self.optimizer.iterations, i, k))
            losses = {n: v / k for n, v in losses.items()}
            norm = apply_reduced_gradients(self.optimizer, grads, variables,
                                           self.config.clip_norm)
            return losses, sums, norm

        acc = self._accumulators(phase.objective, training=True)

        @traced
        def train_loop(iterator, num_steps):
            def step():
                micro = tuple(next(iterator) for _ in range(k))
                losses, sums, norm = self.strategy.run(replica_step, args=(micro,))
                acc.add(self.strategy, {**{"loss/" + n: v for n, v in losses.items()},
                                        **sums, "grad_norm": norm})

            repeat(num_steps, step)

        self._compiled[phase.name] = (train_loop, acc)
        return self._compiled[phase.name]

    def train_steps(self, iterator, num_steps: int) -> dict:
        """Runs `num_steps` optimizer steps of the current phase in one traced call.

        Args:
          iterator: from `make_train_iterator(self.step)`.
          num_steps: steps to run (all within one phase).

        Returns:
          per-step means of the losses and grad_norm, the metric ratios and
          disc_auc over these steps.
        """
        train_loop, acc = self._compile(self.phase_at(self.step))
        acc.reset()
        train_loop(iterator, tf.constant(num_steps))
        return acc.results(num_steps)

    def _eval_batch(self, batch, index: int) -> None:
        if self._eval is None:
            objective, seed = self.model.objective, self.config.seed + 1
            fwd = traced(lambda b, s: self._forward_metrics(b, s, objective, True),
                         jit_compile=self.run.jit_compile)
            acc = self._accumulators(objective, training=False)

            @traced
            def eval_step(batch, index):
                out = self.strategy.run(
                    lambda b: fwd(b, replica_seed(seed, index)), args=(batch,))
                acc.add(self.strategy, {**{"loss/" + n: v for n, v in out[0].items()}, **out[1]})

            self._eval = (eval_step, acc)
        eval_step, acc = self._eval
        if index == 0:
            acc.reset()
        eval_step(batch, tf.constant(index, tf.int32))

    def _eval_results(self, num_batches: int) -> dict:
        return self._eval[1].results(num_batches, evaluation=True)

    def _first_replica(self, batch) -> dict:
        return self.strategy.experimental_local_results(batch)[0]


# === Fine-tuning ===
class TensorFlowFinetuning(Finetuning):
    """Fine-tunes the discriminator on one task under tf.distribute (finetuning.py).

    Args:
      task, config, run: as Finetuning.
      strategy: a strategy made at program start (`start`); by default one is
        made from `run` here.
    """

    backend = "tensorflow"

    def __init__(self, task, config: FinetuningConfig, run: FinetuningRun,
                 strategy: tf.distribute.Strategy | None = None):
        self.strategy = strategy or start(run)
        self.chief = is_chief(self.strategy)
        self.multi_worker = isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy)
        local, self.on_cpu = _local_devices(self.strategy)
        self.local_share = local / self.strategy.num_replicas_in_sync
        super().__init__(task, config, run)
        self._fwd_bwd = traced(self._forward_backward, jit_compile=run.jit_compile)
        # Prediction batches are cut to their longest example (Finetuning.predict): one
        # trace for every length, not one per length.
        self._predict = traced(lambda x: self.model(x, training=False),
                               jit_compile=run.jit_compile, reduce_retracing=True)
        self._train_steps = traced(self._train_steps_fn)
        self._loss_sum = tf.Variable(0.0, trainable=False)  # host-side, per train_steps call
        self._norm_sum = tf.Variable(0.0, trainable=False)

    def _scope(self):
        return self.strategy.scope()

    def train_iterator(self, epoch: int, skip: int = 0):
        """The distributed train split of `epoch` (seeded shuffle), after `skip` batches."""
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
        return iter(self.strategy.experimental_distribute_dataset(
            self.train_dataset(epoch, skip).with_options(options).prefetch(2)))

    # === The step ===
    def _forward_backward(self, batch, seed):
        inputs, labels = split_batch(batch)
        with tf.GradientTape() as tape:
            outputs = self.model(inputs, training=True, seed=seed)
            # Summed over the batch, as the original (so clipping acts); the
            # all-reduce sums the replicas' sums: the global batch's, as on one
            # device (dividing by the replica count had scaled the gradient, and
            # so what clip_norm clips, by 1/replicas).
            loss = self.task.loss(outputs, labels)
        grads = dense_gradients(tape, loss, self._variables)
        # What the loss sums over, for the reported mean: the replicas' sums over their
        # counts, as one device's over its batch (a mean of the replicas' own means had
        # weighed a replica of filler rows, or of fewer rows, as much as the others).
        # loss_count's floor of 1 would count a replica given only filler rows.
        count = self.task.loss_count(labels)
        if EXAMPLE_WEIGHT in labels:
            count *= tf.cast(tf.reduce_sum(labels[EXAMPLE_WEIGHT]) > 0, count.dtype)
        return loss, count, grads

    def _replica_step(self, batch):
        seed = replica_seed(self.config.seed, self.optimizer.iterations)
        loss, count, grads = self._fwd_bwd(batch, seed)
        norm = apply_reduced_gradients(self.optimizer, grads, self._variables,
                                       self.config.clip_norm)
        return loss, count, norm

    def _train_steps_fn(self, iterator, num_steps):
        def step():
            loss, count, norm = self.strategy.run(self._replica_step, args=(next(iterator),))
            total = tf.distribute.ReduceOp.SUM
            self._loss_sum.assign_add(self.strategy.reduce(total, loss, None) / tf.maximum(
                self.strategy.reduce(total, count, None), 1e-6))
            self._norm_sum.assign_add(self.strategy.reduce(tf.distribute.ReduceOp.MEAN,
                                                           norm, None))

        repeat(num_steps, step)

    def train_steps(self, iterator, num_steps: int) -> float:
        """Runs `num_steps` optimizer steps (after build_optimizer); returns the mean loss
        (and sets `last_grad_norm`).

        Args:
          iterator: from `train_iterator`.
        """
        self._loss_sum.assign(0.0)
        self._norm_sum.assign(0.0)
        self._train_steps(iterator, tf.constant(num_steps))
        self.last_grad_norm = float(self._norm_sum.numpy()) / num_steps
        return float(self._loss_sum.numpy()) / num_steps

    def _predict_batch(self, inputs: dict) -> dict:
        return self._predict(inputs)

    def _stop_agreement(self):
        return stop_agreement(self.strategy)

    def _differing(self, digests: list[list[int]]) -> list[int]:
        return agreement(self.strategy)(digests)

    def make_checkpoints(self) -> TensorFlowCheckpoints:
        """tf.train checkpoints of the model and the optimizer under model_dir/checkpoints."""
        return TensorFlowCheckpoints(
            self.model, self.optimizer, checkpoint_dir(self.run.model_dir),
            self.config.keep_checkpoint_max, chief=self.chief, task_id=task_id(self.strategy))
