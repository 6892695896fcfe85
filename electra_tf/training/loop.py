"""What every host loop shares, whatever the backend: chunks, console lines, Ctrl-C.

Both loops (pre-training: pretraining.py, fine-tuning: finetuning.py) run
their backend's compiled steps in chunks, and between chunks print a line,
save, evaluate, and look for a Ctrl-C:

- `chunk_size` is the number of steps to the next boundary (a log line, a
  checkpoint, an evaluation, the end of a phase or an epoch), so a checkpoint
  asked for every N steps lands on the multiples of N;
- `InterruptGate` holds a Ctrl-C (or a SIGTERM: what Kubernetes, Slurm and
  preemptible VMs send before they kill a job) until the loop reaches such a
  point; the loop then saves and raises `Interrupted`, whose text is the one
  line the CLI prints. On a run of several processes the gate's check is a
  tiny collective, so that all of them stop at the same step and save once;
- `SlowChunkNote` says once, under Kubernetes or Slurm, when the chunks are
  longer than that scheduler's SIGTERM leaves before its kill;
- `log` prints the progress lines, on stderr;
- `check_finite` stops a run whose loss became NaN or infinite before the
  loop saves those weights.

Nothing here imports TensorFlow or JAX.
"""

from __future__ import annotations

import math
import os
import signal
import threading

import numpy as np

from electra_tf.core import signals
from electra_tf.core.errors import ConfigError, Diverged


def log(tag: str, message: str) -> None:
    """One progress line on stderr: `[tag] message` (whole, whatever a signal's
    watcher prints at the same moment)."""
    signals.say(f"[{tag}] {message}")


def chunk_size(step: int, end: int, *periods: int) -> int:
    """Steps from `step` to the next multiple of any period, or to `end`.

    Args:
      step: the current step.
      end: the loop's last step (exclusive bound of the chunk).
      periods: the loop's periods (log, save, eval); 0 means none.
    """
    n = end - step
    for period in periods:
        if period > 0:
            n = min(n, period - step % period)
    return n


def finite_weights(variables) -> bool:
    """Whether every floating-point variable holds only finite values (computed where the
    variables live; one small result each)."""
    import keras

    return all(bool(keras.ops.convert_to_numpy(keras.ops.all(keras.ops.isfinite(v))))
               for v in variables if "float" in str(v.dtype))


def check_finite(loss: float, first_step: int, last_step: int, checkpoint: str | None,
                 hint: str, grad_norm: float | None = None,
                 weights_finite: bool | None = None) -> None:
    """Raises Diverged, before anything is saved, if a chunk's loss is NaN or infinite,
    or (when given) its gradients' norm.

    A chunk's loss sums (or averages) its steps', so one non-finite step
    shows. The weights are then non-finite too: the loop must save nothing
    after this, so the last checkpoint stays the last good state. A step's loss
    is computed before its update, so a non-finite gradient in a chunk's last
    step shows only in the norm (clipping makes every gradient NaN, and the
    checkpoint after it had been saved with NaN weights).

    Args:
      loss: the chunk's loss.
      first_step, last_step: the chunk's steps (1-based, inclusive).
      checkpoint: the latest checkpoint's path, or None.
      hint: what to change, for the message.
      grad_norm: the chunk's mean gradient norm (before clipping), or None.
      weights_finite: whether the weights after the chunk are finite (`finite_weights`,
        asked before a save: an update too large for float32 overflows them from
        finite gradients), or None.
    """
    if math.isfinite(loss) and (grad_norm is None or math.isfinite(grad_norm)) \
            and weights_finite is not False:
        return
    steps = f"step {last_step}" if first_step == last_step else \
        f"steps {first_step}-{last_step}"
    kept = (f"the last checkpoint ({os.path.basename(checkpoint)}) is kept" if checkpoint
            else "no checkpoint was saved")
    what = (f"the training loss became {loss}" if not math.isfinite(loss) else
            "the weights became NaN or infinite (an update too large)"
            if grad_norm is None or math.isfinite(grad_norm) else
            f"the gradients' norm became {grad_norm}")
    raise Diverged(f"{what} in {steps}; stopped without saving "
                   f"those weights: {kept}, no final weights were written; {hint}")


def raised_flags(settings) -> str:
    """`check_finite`'s hint for flags raised past their defaults, which can make a run
    diverge as a high learning rate does (a --disc_weight of 1e6): ", or --NAME (it was
    V; the default D)" for each (name, value, default) of `settings` above its default."""
    return "".join(f", or --{name} (it was {value:g}; the default {default:g})"
                   for name, value, default in settings if value > default)


def weights_checksum(variables) -> float:
    """A fingerprint of weights (sum of |w| weighted by position), to compare runs."""
    import keras

    return float(sum(np.abs(np.asarray(keras.ops.convert_to_numpy(v), np.float64)).sum()
                     * (i + 1) for i, v in enumerate(variables)))


# === The processes of one run (multi-worker, multi-host) ===
def settings_digest(values) -> list[int]:
    """Eight bytes (0-255 each) of the sha256 of `values` as sorted JSON: what the
    processes of one run compare (`differing_digests`), cheap to all-reduce."""
    import hashlib
    import json

    text = json.dumps(values, sort_keys=True, default=str)
    return list(hashlib.sha256(text.encode("utf-8")).digest()[:8])


def differing_digests(total, digests: list[list[int]], num_replicas: int) -> list[int]:
    """The indexes of `digests` that are not the same in every replica of a run,
    compared in one call of `total` (a SUM over the replicas of a float32 vector: the
    only reduction a collective offers, stop_agreement's): each byte b and b*b summed
    over the n replicas; all equal exactly where n * sum(b*b) == sum(b) ** 2 (exact in
    float32 for bytes)."""
    flat = np.asarray([b for d in digests for b in d], np.float64)
    summed = np.asarray(total(np.concatenate([flat, flat * flat]).astype(np.float32)),
                        np.float64)
    sums, squares = summed[:len(flat)], summed[len(flat):]
    same = num_replicas * squares == sums * sums
    differ, start = [], 0
    for i, digest in enumerate(digests):
        if not same[start:start + len(digest)].all():
            differ.append(i)
        start += len(digest)
    return differ


def flag_digests(values: dict) -> dict[str, list[int]]:
    """settings_digest of each flag's value (flag name -> eight bytes), in the names'
    order: compared one by one, the flags that differ between processes are named."""
    return {name: settings_digest(values[name]) for name in sorted(values)}


def different_flags(what: str, names: list[str], who: str = "processes of the run",
                    each: str = "process") -> ConfigError:
    """`different_settings` naming the flags whose digests differ (flag_digests' names;
    a resolved_X setting is --X's)."""
    flags = ", ".join(dict.fromkeys(f"--{name.removeprefix('resolved_')}" for name in names))
    return different_settings(what, f"the {who} were started with different {flags} "
                                    "(every flag but the paths must be the same); start "
                                    f"every {each} with the same flags")


def different_settings(what: str, reason: str) -> ConfigError:
    """The one line of a run whose processes were started with other settings (their
    digests differ): had trained on silently (another seed, batch or data on one
    worker) or ended in tracebacks, aborts or a wait forever (another model size,
    checkpoint or number of epochs). `reason`: what differs and what to do."""
    error = ConfigError(f"{what}: {reason}")
    error.left_peers = False  # every process refuses here: they end together (cli.run_cli)
    return error


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) after the loop saved a checkpoint; str() is the one line to
    print, `signum` the signal that stopped the run (the CLI exits with 128 + signum),
    `left_peers` whether this process stopped without the others of its run."""

    def __init__(self, step: int, saved: bool = True, signum: int | None = None,
                 left_peers: bool = False, why: str = "", message: str = ""):
        super().__init__(message or f"interrupted at step {step}; "
                         + ("checkpoint saved; rerun to resume" if saved else
                            f"no checkpoint was saved{why}; a rerun starts from the "
                            "latest one"))
        self.step = step
        self.signum = signum or signal.SIGINT
        # A process of several that stopped alone (a second signal): its exit hooks
        # would wait for the peers it left in a collective, so the CLI ends it at once.
        self.left_peers = left_peers


def save_after_interrupt(save) -> tuple[bool, str]:
    """Runs the save a stop signal promised (`save() -> whether it saved`), after the
    InterruptGate closed: a second Ctrl-C or SIGTERM during it (a large model's save
    takes seconds) stops it, as the first signal's line says a second one does.

    Returns:
      (saved, why): why is Interrupted's `why` for a save a second signal stopped ("":
      none did). What the stopped save left (a TensorFlow `ckpt-N_temp` folder) is
      removed by the next run; the checkpoint before it is whole.
    """
    try:
        return bool(save()), ""
    except KeyboardInterrupt:  # (had escaped as a bare KeyboardInterrupt: the generic line)
        return False, " (a second signal stopped its save)"


# The signals the gate holds: Ctrl-C, and the SIGTERM a scheduler (Kubernetes, Slurm, a
# preemptible VM) sends before it kills a job; both stop the run the same way.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class InterruptGate:
    """Holds a Ctrl-C or SIGTERM until the training loop reaches a point where stopping
    is safe.

    Python raises KeyboardInterrupt at whatever line runs when SIGINT arrives,
    which inside a loop can be TensorFlow's own code: a checkpoint save half
    done, a lock taken and never released. Within `with InterruptGate() as
    gate:`, a first Ctrl-C only marks the request; the loop calls
    `gate.check()` where stopping is safe (between chunks of steps, after a
    save), which raises KeyboardInterrupt there. The chunk that was running
    finishes first: a compiled call cannot be stopped midway anyway. A second
    Ctrl-C stops sooner: at the next `stop_point()`, which the loops reach
    between batches and compiled calls (evaluation and prediction batches, the
    JAX backend's calls, the end of a chunk), or at a check. In a command
    line's process (`signals.leave_at_once`) a watcher thread answers the first
    signal at once and ends the process on a second that the main thread cannot
    take up within seconds (inside a compiled chunk: `signals.Watcher`). A request the
    loop never reached a check for is raised when the block ends. SIGTERM is
    held the same way (a second signal of either kind stops at the next stop
    point); `signum` says which came first. Off the main thread (where no
    signal handler can be set) the gate does nothing; a signal that is ignored
    (SIGINT under `nohup` or in a shell's background job) stays ignored.

    The handler only records: it never raises. Python runs a signal handler
    at whatever line runs, which may be inside a library's callback (JAX's
    garbage-collection callback, a finalizer), where an exception is printed
    as "Exception ignored in ..." and dropped, and the stop with it.

    A run of several processes (tf.distribute's multi-worker strategy, a
    multi-host JAX run) must stop at one step in every process, or a process
    that went on would wait in a collective for one that left: give `agree`,
    a function that sums a small float vector over the processes (a
    collective; `check` is then one in every process, at the same points).
    Each check then asks every process whether it was signalled; where any
    was, all raise at that check, with the same `signum` (SIGTERM if any
    process got one), and `agreed` is True. One signal to one process stops
    them all; a scheduler's signals to all of them, landing in different
    chunks, stop them all at the first check after the first one. A second
    signal still stops its process at once: then `agreed` stays False, and
    the loop must not save (a save is collective in the others).

    A run with nothing to save (an evaluation-only fine-tuning) gives `prompt`:
    one process then stops at the first signal's next stop point (between
    evaluation and prediction batches), where waiting for the check would have
    let a whole evaluation and prediction run on past a scheduler's grace period.

    Args:
      agree: None for one process; else `votes -> their sum over processes`,
        votes a float32 [2] (this process got SIGINT, SIGTERM).
      prompt: stop at the first signal's next stop point (one process only: with
        `agree`, the processes still stop together at a check).
    """

    # The gate open in this process (the main thread's), for `stop_point()`.
    active: InterruptGate | None = None

    def __init__(self, agree=None, prompt: bool = False):
        self.requested = False
        self.prompt = prompt and agree is None
        self.taken = 0  # the signals the handler took up
        self.stop_now = False  # a second signal came: stop at the next stop point
        self.signum: int | None = None  # the first signal that came
        self.agreed = False  # the processes stopped together (`agree`)
        self._agree = agree
        self._previous: dict[int, object] = {}
        self._watcher: signals.Watcher | None = None

    @property
    def safe_to_save(self) -> bool:
        """Whether the loop may save after the stop: always for one process; for several,
        only when they stopped together (an agreed check), each then at the same step."""
        return self._agree is None or self.agreed

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                if signal.getsignal(signum) is not signal.SIG_IGN:
                    self._previous[signum] = signal.signal(signum, self._on_signal)
            InterruptGate.active = self
        pending = signals.take()  # a SIGTERM of start-up whose raise was lost
        if pending is not None:
            self.requested, self.signum, self.taken = True, pending, 1
            self.stop_now = self.prompt
        if signals.leave_at_once and self._previous:  # the command line's process
            self._watcher = signals.Watcher(
                lambda: self.taken >= 2,
                *((_prompt_signal_line, _prompt_leave_line) if self.prompt
                  else (_first_signal_line, _leave_line)),
                first=self.signum).start()
        return self

    def _on_signal(self, signum, frame):
        """Records the signal, never raises (see the class docstring)."""
        self.taken += 1
        if self.prompt:
            self.stop_now = True
        if self.requested:  # the second Ctrl-C (or SIGTERM): stop at the next stop point
            self.stop_now = True
        else:
            self.requested, self.signum = True, signum

    def stop_point(self) -> None:
        """Raises KeyboardInterrupt if a second signal came (this process alone)."""
        if self.stop_now:
            raise KeyboardInterrupt

    def check(self) -> None:
        """Raises KeyboardInterrupt if a Ctrl-C came since the gate opened (with `agree`:
        to any of the processes; one small collective). After a second signal it raises
        before the collective: this process stops alone, `agreed` stays False."""
        self.stop_point()
        if self._agree is None:
            if self.requested:
                raise KeyboardInterrupt
            return
        mine = [self.requested and self.signum == signal.SIGINT,
                self.requested and self.signum == signal.SIGTERM]
        sigint, sigterm = np.asarray(self._agree(np.asarray(mine, np.float32))).reshape(2)
        if sigint > 0 or sigterm > 0:
            self.requested, self.agreed = True, True
            self.signum = signal.SIGTERM if sigterm > 0 else signal.SIGINT
            raise KeyboardInterrupt

    def __exit__(self, exc_type, exc, tb):
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        for signum, previous in self._previous.items():
            signal.signal(signum, signal.SIG_DFL if previous is None else previous)
        self._previous = {}
        if InterruptGate.active is self:
            InterruptGate.active = None
        if exc_type is None:
            self.check()
        elif self.requested and not issubclass(exc_type, KeyboardInterrupt):
            # The block stopped on an error with a stop request pending (a run that
            # diverged as the signal came): kept for the caller (`signals.pending`), so
            # that a loop of runs (trials) stops instead of starting the next.
            signals.received = self.signum
        return False


def _first_signal_line(signum: int) -> str:
    """What the command line prints the moment a first stop signal comes (the watcher's:
    the loop may be inside a chunk of steps for minutes)."""
    said = signals.name(signum)
    return (f"{said}: stopping after the running chunk of steps, with a checkpoint (a second "
            f"{said} stops sooner: saving where the loop can stop, else at once without "
            "saving)")


def _prompt_signal_line(signum: int) -> str:
    """The first signal's line where the gate is `prompt` (nothing to save)."""
    return (f"{signals.name(signum)}: stopping after the running batch (an evaluation-only "
            "run: nothing to save)")


def _prompt_leave_line(signum: int) -> str:
    """The second signal's, ending a `prompt` gate's process inside a compiled call."""
    return (f"interrupted by a second {signals.name(signum)} inside a batch; nothing was "
            "saved (an evaluation-only run); a rerun evaluates again")


def _leave_line(signum: int) -> str:
    """What it prints as a second signal ends the process inside a chunk of steps."""
    return (f"interrupted by a second {signals.name(signum)} inside a chunk of steps; no "
            "checkpoint was saved; a rerun starts from the latest one")


def stop_point() -> None:
    """Where a loop may stop mid-chunk (between batches, between compiled calls): raises
    KeyboardInterrupt when a second Ctrl-C or SIGTERM came to the open InterruptGate."""
    gate = InterruptGate.active
    if gate is not None:
        gate.stop_point()


# Kubernetes (a pod's terminationGracePeriodSeconds) and Slurm (KillWait) kill a job
# 30 s after their SIGTERM unless configured otherwise. The SIGTERM waits for the
# running chunk of steps (InterruptGate), so a run under either saves on it only when
# a chunk and the save fit in that time.
SCHEDULERS = (  # (the variable each sets in a job's environment, name, its grace setting)
    ("KUBERNETES_SERVICE_HOST", "Kubernetes", "the pod's terminationGracePeriodSeconds"),
    ("SLURM_JOB_ID", "Slurm", "KillWait"),
)
SCHEDULER_GRACE_S = 30.0
SLOW_CHUNK_S = 20.0  # a longer chunk gets the note: with the save, it may not fit
SUGGESTED_CHUNK_S = 10.0  # the chunk length the note's --log_every_steps aims at


class SlowChunkNote:
    """Says once, under a scheduler, that its SIGTERM would wait for a chunk of steps
    longer than the scheduler's default grace period allows.

    Where a run's chunks are long (a large model, or a CPU: 200 steps of
    pre-training can take minutes), a scheduler's SIGTERM lets the running chunk
    finish before the save, and the scheduler's SIGKILL 30 s later ends the job
    first: everything since the last checkpoint is lost. The loop cannot stop
    a chunk midway, so the note names the flag that shortens chunks, with a
    value measured on this run.

    Args:
      say: prints the note (the loop's own log: the chief's alone on a run of
        several processes).
      periods: the loop's periods, as chunk_size's (log, save, eval, epoch; 0 means
        none): its longest chunk is the shortest of them.
      environ: the environment to look for a scheduler in (os.environ).
    """

    def __init__(self, say, *periods: int, environ=None):
        environ = os.environ if environ is None else environ
        self.say = say
        self.period = min(p for p in periods if p > 0)  # steps of the longest chunk
        self.scheduler = next((s for s in SCHEDULERS if environ.get(s[0])), None)
        self._chunks = 0
        self._per_step: float | None = None  # the fastest step seen, in seconds
        self.said: str | None = None

    def chunk(self, steps: int, seconds: float) -> None:
        """Records a chunk of `steps` that took `seconds`. The run's first chunk is not
        counted (it traces or compiles the step), and the note waits for two more: a
        chunk of another length can compile again (JAX's calls of several steps), so
        the estimate is the fastest step of those."""
        self._chunks += 1
        if self.said or self.scheduler is None or self._chunks == 1 or steps < 1:
            return
        per_step = seconds / steps
        if self._per_step is not None:
            per_step = min(per_step, self._per_step)
        self._per_step = per_step
        if self._chunks < 3:
            return
        period = self.period
        longest = per_step * period  # seconds
        if longest <= SLOW_CHUNK_S:
            return
        _, name, setting = self.scheduler
        if per_step * 2 > SCHEDULER_GRACE_S:  # even one step a chunk leaves too little
            advice = (f"A step takes about {per_step:.0f} s here: give the job a grace "
                      f"period longer than a step and a save")
        else:
            suggested = max(1, int(SUGGESTED_CHUNK_S / per_step))
            advice = (f"--log_every_steps={suggested} keeps a chunk near "
                      f"{max(SUGGESTED_CHUNK_S, per_step):.0f} s; or give the job a longer "
                      f"grace period")
        self.said = (
            f"note: under {name} a SIGTERM waits for the running chunk of steps, about "
            f"{longest:.0f} s here ({period} step{'s' if period > 1 else ''}), and the kill "
            f"follows {SCHEDULER_GRACE_S:.0f} s after it unless {setting} is longer: that "
            f"SIGTERM would end the run before it saves. {advice}.")
        self.say(self.said)


def set_precision(mixed_precision: str, attention_implementation: str = "einsum") -> None:
    """fp32 | bf16 as Keras' global dtype policy, and how attention is computed
    (modeling/transformer.py); both process-wide."""
    import keras

    from electra_tf.modeling.transformer import set_attention_implementation

    keras.mixed_precision.set_dtype_policy(
        "mixed_bfloat16" if mixed_precision == "bf16" else "float32")
    set_attention_implementation(attention_implementation)
