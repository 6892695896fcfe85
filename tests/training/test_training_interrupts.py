"""Ctrl-C inside a training loop: held by loop.InterruptGate until a safe point.

A KeyboardInterrupt raised wherever SIGINT lands can cut TensorFlow's own
code midway (a checkpoint save, a lock). The gate turns the first Ctrl-C
into a request the loop acts on between chunks; a second one stops at the next stop
point (between batches and compiled calls). The handler never raises.
Each test that sends a Ctrl-C installs Python's own SIGINT handler first
(`sigint_handler`): a suite started with SIGINT ignored has none.
"""

import dataclasses
import os
import signal
import subprocess
import threading
import time

import pytest

from electra_tf.training import loop
from electra_tf.training.backends.tensorflow import TensorFlowPretraining

# The runs stopped here evaluate nothing (no --eval_data): the stop is what is checked.
NO_EVAL = {"eval_data": ""}


def ctrl_c():
    """SIGINT to this process; Python runs the handler within the next few lines."""
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)


def test_the_first_ctrl_c_waits_for_a_check(sigint_handler):
    previous = signal.getsignal(signal.SIGINT)
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with loop.InterruptGate() as gate:
            ctrl_c()
            reached.append(gate.requested)  # the work after the Ctrl-C still runs
            gate.check()
            reached.append("after check")
    assert reached == [True]
    assert signal.getsignal(signal.SIGINT) is previous


def test_a_request_no_check_reached_is_raised_when_the_block_ends(sigint_handler):
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with loop.InterruptGate():
            ctrl_c()
            reached.append("end of block")
    assert reached == ["end of block"]


def test_a_second_ctrl_c_stops_at_the_next_stop_point(sigint_handler):
    """The handler only records (a raise could land in a library's callback and be lost,
    #54); the loops' stop points, between batches and compiled calls, act on it."""
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with loop.InterruptGate() as gate:
            ctrl_c()
            reached.append("after the first")
            loop.stop_point()  # one signal: the chunk goes on
            ctrl_c()
            reached.append("after the second")
            assert gate.stop_now and loop.InterruptGate.active is gate
            loop.stop_point()
            reached.append("after the stop point")
    assert reached == ["after the first", "after the second"]
    assert loop.InterruptGate.active is None
    loop.stop_point()  # no gate open: nothing to do


@pytest.fixture
def sigterm_default():
    """SIGTERM's default action for the test, then the previous handler: a process that
    ignores SIGTERM (as a pytest-xdist worker can) gets no gate handler for it, and the
    test's SIGTERM would go nowhere."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("first,second", [(signal.SIGINT, signal.SIGINT),
                                          (signal.SIGTERM, signal.SIGTERM),
                                          (signal.SIGINT, signal.SIGTERM)])
def test_a_second_signal_during_a_gc_callback_is_never_lost(first, second, sigint_handler,
                                                            sigterm_default, monkeypatch):
    """The issue's race, made certain: the second signal's handler runs while a garbage-
    collection callback runs (as JAX's _xla_gc_callback). A handler that raised there was
    'Exception ignored in: <function ...>', and the stop was lost (#54); now nothing is
    raised in the callback and the next stop point stops."""
    import gc

    ignored = []
    monkeypatch.setattr("sys.unraisablehook", ignored.append)
    in_callback = []

    def callback(phase, info):
        if phase == "start" and not in_callback:
            in_callback.append(True)
            os.kill(os.getpid(), second)
            for _ in range(10_000):  # the handler runs within these lines
                pass
            in_callback.append("callback ended")

    with pytest.raises(KeyboardInterrupt):
        with loop.InterruptGate() as gate:
            os.kill(os.getpid(), first)
            time.sleep(0.05)
            assert gate.requested and not gate.stop_now
            gc.callbacks.append(callback)
            try:
                gc.collect(0)  # the youngest generation: a full one takes seconds in a
            finally:           # worker that has run many tests, and calls the same callbacks
                gc.callbacks.remove(callback)
            assert in_callback == [True, "callback ended"]  # nothing raised inside it
            assert gate.stop_now and gate.signum == first
            loop.stop_point()
    assert ignored == []


def test_no_ctrl_c_no_interrupt(sigint_handler):
    with loop.InterruptGate() as gate:
        gate.check()
    assert not gate.requested


def test_ctrl_c_during_a_chunk_lets_it_finish_then_saves_at_its_end(make_configs, tmp_path,
                                                                   sigint_handler, capsys):
    """The Ctrl-C comes as the second chunk (steps 3-6) starts: the chunk runs to
    step 6, then the loop saves and stops there (without the gate it stopped at 3,
    the KeyboardInterrupt cutting into the chunk's first lines). The steps trained since
    the last console line (one every 9 steps here) get their training summary point.
    The chunks are --iterations_per_loop's 3 steps though lines and saves come every 9
    (they had been 9 steps: a SIGTERM waited for a whole log period)."""
    config, run = make_configs(tmp_path / "m", num_train_steps=9, save_checkpoints_steps=9,
                               run_overrides={**NO_EVAL, "log_every_steps": 9})
    trainer = TensorFlowPretraining(config, run)
    real_train_steps, calls = trainer.train_steps, []

    def train_steps(iterator, n):
        calls.append(trainer.step)
        if len(calls) == 2:
            ctrl_c()
        return real_train_steps(iterator, n)

    trainer.train_steps = train_steps
    with pytest.raises(loop.Interrupted) as raised:
        trainer.train()
    assert calls == [0, 3]
    assert raised.value.step == 6 and trainer.step == 6
    assert str(raised.value) == "interrupted at step 6; checkpoint saved; rerun to resume"
    assert trainer.checkpoints.latest.endswith("ckpt-6")
    from tests.training.test_jax_no_tf import scalars

    assert sorted(scalars(os.path.join(run.model_dir, "train"))) == [6]
    resumed = TensorFlowPretraining(config, run)
    assert resumed.restore() == 6
    # a Ctrl-C during the last chunk: the run has finished, its final files are written
    # (it had stopped without them, "interrupted at step 9", for a rerun to write them)
    real_resumed = resumed.train_steps

    def last_steps(iterator, n):
        ctrl_c()
        return real_resumed(iterator, n)

    resumed.train_steps = last_steps
    resumed.train()
    assert resumed.step == 9
    assert os.path.exists(os.path.join(run.model_dir, "discriminator.weights.h5"))
    assert "[pretrain] Ctrl-C during the last steps: the run has finished; writing its final " \
           "files" in capsys.readouterr().err.splitlines()


# A second run traced and trained (6 s alone, 40 s beside the other worker's tests in the
# default suite): with the slow tests.
@pytest.mark.slow
def test_a_failed_chunk_leaves_the_steps_before_it_their_summary_point(make_configs,
                                                                      tmp_path):
    """As at an interrupt, the steps trained since the last console line keep their
    training summary point on a stop of another kind (a record gone bad, a lost peer, a
    divergence): here the third chunk's call fails after two trained."""
    config, run = make_configs(tmp_path / "m", num_train_steps=9,
                               run_overrides={**NO_EVAL, "log_every_steps": 9})
    from tests.training.test_jax_no_tf import scalars

    failing = dataclasses.replace(run, model_dir=str(tmp_path / "failing"))
    trainer = TensorFlowPretraining(config, failing)
    real_train_steps, calls = trainer.train_steps, []

    def failing_steps(iterator, n):
        calls.append(trainer.step)
        if len(calls) == 3:
            raise RuntimeError("the third chunk fails")
        return real_train_steps(iterator, n)

    trainer.train_steps = failing_steps
    with pytest.raises(RuntimeError, match="the third chunk fails"):
        trainer.train()
    assert sorted(scalars(os.path.join(failing.model_dir, "train"))) == [6]


def test_an_ignored_sigint_stays_ignored():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with loop.InterruptGate() as gate:
            ctrl_c()
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert not gate.requested
    finally:
        signal.signal(signal.SIGINT, previous)


class _NotHeld(Exception):
    pass


def _not_held(signum, frame):
    raise _NotHeld


def test_sigterm_is_held_like_a_ctrl_c(sigint_handler):
    """SIGTERM (what Kubernetes and Slurm send before a kill) waits for a check, as a
    Ctrl-C does; the SIGTERM handler the block found is back after it."""
    previous = signal.signal(signal.SIGTERM, _not_held)  # what SIGTERM did before the gate
    try:
        reached = []
        with pytest.raises(KeyboardInterrupt):
            with loop.InterruptGate() as gate:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
                reached.append(gate.signum)
                gate.check()
        assert reached == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is _not_held
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.slow  # the Ctrl-C test beside it runs the same path by default
def test_sigterm_during_a_chunk_saves_at_its_end_and_resumes_exactly(make_configs, tmp_path,
                                                                    sigint_handler):
    """The loop stops as for a Ctrl-C, saying the signal; the resumed run ends with the
    weights of a run never stopped, bit for bit."""
    config, run = make_configs(tmp_path / "m", num_train_steps=9)
    whole_config, whole_run = make_configs(tmp_path / "whole", num_train_steps=9)
    whole = TensorFlowPretraining(whole_config, whole_run)
    whole.train()
    trainer = TensorFlowPretraining(config, run)
    real_train_steps, calls = trainer.train_steps, []

    def train_steps(iterator, n):
        calls.append(trainer.step)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
        return real_train_steps(iterator, n)

    trainer.train_steps = train_steps
    previous = signal.signal(signal.SIGTERM, _not_held)  # not the default: it ends pytest
    try:
        with pytest.raises(loop.Interrupted) as raised:
            trainer.train()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert raised.value.step == 6 and raised.value.signum == signal.SIGTERM
    assert str(raised.value) == "interrupted at step 6; checkpoint saved; rerun to resume"
    resumed = TensorFlowPretraining(config, run)
    resumed.train()
    assert (loop.weights_checksum(resumed.model.trainable_variables)
            == loop.weights_checksum(whole.model.trainable_variables))


def test_a_second_ctrl_c_during_the_interrupts_save_is_said(make_configs, tmp_path,
                                                            sigint_handler):
    """The first signal's line promises that a second one stops "at once without
    saving"; one landing in the save after the stop (a large model's save takes seconds)
    had escaped as a bare KeyboardInterrupt, the CLI's generic line. Now the one line
    says no checkpoint was saved, and the run resumes from the one before."""
    config, run = make_configs(tmp_path / "m", num_train_steps=9, save_checkpoints_steps=9)
    trainer = TensorFlowPretraining(config, run)
    real_train_steps, real_save, calls = trainer.train_steps, trainer.save_checkpoint, []

    def train_steps(iterator, n):
        calls.append(trainer.step)
        if len(calls) == 2:
            ctrl_c()
        return real_train_steps(iterator, n)

    def save_checkpoint():
        if trainer.step == 6:  # the save after the stop (none is due before step 9)
            ctrl_c()
        return real_save()

    trainer.train_steps, trainer.save_checkpoint = train_steps, save_checkpoint
    with pytest.raises(loop.Interrupted) as raised:
        trainer.train()
    assert str(raised.value) == ("interrupted at step 6; no checkpoint was saved (a second "
                                 "signal stopped its save); a rerun starts from the latest one")
    assert not (tmp_path / "m" / "checkpoints" / "ckpt-6.index").exists()
    resumed = TensorFlowPretraining(config, run)
    resumed.restore()
    assert resumed.step == 0


# === Several processes: they agree on the check at which all of them stop ===
class Peers:
    """A stand-in for the collective of a run of several processes (InterruptGate's
    `agree`): adds the votes of peers that were signalled, from the given check on."""

    def __init__(self, signalled_at: int | None = None, signum=signal.SIGTERM):
        self.signalled_at, self.signum, self.calls = signalled_at, signum, []

    def __call__(self, votes):
        self.calls.append(votes.tolist())
        peer = [0.0, 0.0]
        if self.signalled_at is not None and len(self.calls) >= self.signalled_at:
            peer[self.signum == signal.SIGTERM] = 1.0
        return votes + peer


def test_with_peers_every_check_asks_them_and_none_signalled_goes_on(sigint_handler):
    peers = Peers()
    with loop.InterruptGate(peers) as gate:
        gate.check()
        gate.check()
    assert peers.calls == [[0.0, 0.0]] * 3  # two checks and the block's end: one each
    assert not gate.requested


def test_a_peers_sigterm_stops_this_process_at_the_same_check(sigint_handler):
    """One worker got the scheduler's SIGTERM; this one, not signalled, stops at the same
    check, with the same signal (so the same exit status), and may save (all stop there)."""
    peers = Peers(signalled_at=2)
    checks = []
    with pytest.raises(KeyboardInterrupt):
        with loop.InterruptGate(peers) as gate:
            for i in range(5):
                checks.append(i)
                gate.check()
    assert checks == [0, 1]
    assert gate.signum == signal.SIGTERM and gate.agreed and gate.safe_to_save


def test_with_peers_this_process_ctrl_c_is_voted_at_the_next_check_and_sigterm_wins(
        sigint_handler):
    peers = Peers(signalled_at=2)
    with pytest.raises(KeyboardInterrupt):
        with loop.InterruptGate(peers) as gate:
            gate.check()
            ctrl_c()
            gate.check()
    assert peers.calls == [[0.0, 0.0], [1.0, 0.0]]  # this one's Ctrl-C, sent to the others
    assert gate.signum == signal.SIGTERM  # a peer's SIGTERM: every process exits 143


def test_with_peers_a_second_signal_stops_at_once_without_a_save(sigint_handler):
    """Stopped alone, mid-chunk: the others are in a collective this process left, so the
    loop must not save (a save is collective too)."""
    with pytest.raises(KeyboardInterrupt):
        with loop.InterruptGate(Peers()) as gate:
            ctrl_c()
            ctrl_c()
    assert not gate.agreed and not gate.safe_to_save
    assert loop.InterruptGate().safe_to_save  # one process: always


def test_a_peers_signal_stops_the_loop_with_a_checkpoint(make_configs, tmp_path,
                                                        sigint_handler):
    """The loops' gate asks the backend's agreement (here a stand-in for the multi-worker
    all-reduce): a SIGTERM to a peer during the second chunk stops this process after
    it, at step 6, with a checkpoint, exit status 143."""
    config, run = make_configs(tmp_path / "m", num_train_steps=9, save_checkpoints_steps=100,
                               run_overrides=NO_EVAL)
    trainer = TensorFlowPretraining(config, run)
    peers = Peers(signalled_at=3)  # chunks start at steps 0, 3 (checks 1, 2), then 6
    trainer._stop_agreement = lambda: peers
    with pytest.raises(loop.Interrupted) as raised:
        trainer.train()
    assert raised.value.step == 6 and raised.value.signum == signal.SIGTERM
    assert str(raised.value) == "interrupted at step 6; checkpoint saved; rerun to resume"
    assert trainer.checkpoints.latest.endswith("ckpt-6") and not raised.value.left_peers


@pytest.mark.slow  # the gate's part runs by default (above), the CLI's: test_training_faults.py
def test_with_peers_a_second_signal_mid_chunk_stops_alone_without_saving(
        make_configs, tmp_path, sigint_handler):
    """Two Ctrl-C during a chunk of a run of several processes: this one stops at the
    chunk's end, alone, so the loop saves nothing (a save would wait for the others in a collective)
    and says so; the CLI then ends it without its exit hooks (`left_peers`)."""
    config, run = make_configs(tmp_path / "m", num_train_steps=9, save_checkpoints_steps=100)
    trainer = TensorFlowPretraining(config, run)
    trainer._stop_agreement = lambda: Peers()
    real_train_steps, calls = trainer.train_steps, []

    def train_steps(iterator, n):
        calls.append(trainer.step)
        if len(calls) == 2:
            ctrl_c()
            ctrl_c()
        return real_train_steps(iterator, n)

    trainer.train_steps = train_steps
    with pytest.raises(loop.Interrupted) as raised:
        trainer.train()
    # the traced chunk (steps 3-6) is one call: it ends, then the stop point stops
    assert raised.value.left_peers and raised.value.step == 6
    assert str(raised.value) == ("interrupted at step 6; no checkpoint was saved; a rerun "
                                 "starts from the latest one")
    assert trainer.checkpoints.latest is None


def test_one_process_has_nothing_to_agree_with():
    import tensorflow as tf

    from electra_tf.training.backends.tensorflow import stop_agreement

    assert stop_agreement(tf.distribute.get_strategy()) is None


def test_a_sigterm_of_start_up_whose_raise_was_lost_stops_at_the_first_check():
    """The command line's SIGTERM handler raises to stop start-up at once; a raise that
    lands in a garbage-collection callback is printed and dropped, and the run had
    trained to the end with exit 0. The handler also records the signal, and the
    loop's gate takes it up: the run stops at its first check, as after a SIGTERM
    during training."""
    from electra_tf import cli
    from electra_tf.core import signals

    with pytest.raises(cli.Terminated):
        cli._on_sigterm(signal.SIGTERM, None)  # what the handler does
    with pytest.raises(KeyboardInterrupt):
        with loop.InterruptGate() as gate:
            assert gate.requested and gate.signum == signal.SIGTERM
            gate.check()
    assert signals.received is None  # taken: the next gate opens clean
    with loop.InterruptGate() as gate:
        gate.check()


@pytest.mark.parametrize("variable, name, setting", [
    ("KUBERNETES_SERVICE_HOST", "Kubernetes", "terminationGracePeriodSeconds"),
    ("SLURM_JOB_ID", "Slurm", "KillWait"),
])
def test_a_scheduler_is_told_once_when_a_chunk_outlasts_its_grace_period(variable, name,
                                                                        setting):
    said = []
    note = loop.SlowChunkNote(said.append, 200, 0, 1000, environ={variable: "x"})
    note.chunk(5, 100.0)  # the first chunk traces or compiles: not counted
    note.chunk(200, 19.0)  # 19 s: with the save, within 30 s
    note.chunk(50, 12.5)  # 0.25 s a step: 200 steps would take 50 s
    assert said == []  # the fastest step so far: 0.095 s
    note.chunk(10, 40.0)  # a compile again (a chunk of another length): 4 s a step
    assert said == []
    fresh = loop.SlowChunkNote(said.append, 200, environ={variable: "x"})
    fresh.chunk(5, 100.0)
    fresh.chunk(1, 30.0)  # one step with a compile
    assert said == []  # two chunks after the first are needed
    fresh.chunk(50, 12.5)  # 0.25 s a step: 200 steps take 50 s
    assert len(said) == 1
    assert f"under {name} a SIGTERM waits for the running chunk of steps, about 50 s here " \
           f"(200 steps)" in said[0] and setting in said[0]
    assert "--log_every_steps=40 keeps a chunk near 10 s" in said[0]  # 10 s / 0.25 s
    fresh.chunk(200, 60.0)
    assert len(said) == 1  # once a run
    slow = loop.SlowChunkNote(said.append, 10, environ={variable: "x"})
    for _ in range(3):
        slow.chunk(2, 24.0)  # 12 s a step: one step a chunk is all the flag can do
    assert said[-1].endswith("--log_every_steps=1 keeps a chunk near 12 s; or give the job "
                             "a longer grace period.")
    slower = loop.SlowChunkNote(said.append, 1, environ={variable: "x"})
    for _ in range(3):
        slower.chunk(1, 45.0)  # a step longer than the grace period: no flag helps
    assert "about 45 s here (1 step), and the kill follows 30 s after it" in said[-1]
    assert said[-1].endswith("before it saves. A step takes about 45 s here: give the job a "
                             "grace period longer than a step and a save.")


def test_no_scheduler_no_note_and_fast_chunks_no_note():
    said = []
    note = loop.SlowChunkNote(said.append, 200, environ={"HOME": "/root"})
    for _ in range(3):
        note.chunk(200, 600.0)
    fast = loop.SlowChunkNote(said.append, 200, environ={"SLURM_JOB_ID": "7"})
    for _ in range(3):
        fast.chunk(200, 20.0)
    assert said == [] and note.scheduler is None


# A command line's process (signals.leave_at_once, set by cli.run_command): phase A, a
# main thread in Python takes up both Ctrl-Cs and the process stays; phase B, a main
# thread inside a compiled call (a TensorFlow loop of hours) cannot, and the second
# Ctrl-C ends the process GRACE_S later, without the call's end.
_WATCHED = r"""
import os, signal, sys, time
from electra_tf.core import signals
from electra_tf.training import loop

signals.leave_at_once = True
try:
    with loop.InterruptGate() as gate:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(signals.GRACE_S + 0.5)  # a sleep runs the handler: taken up at once
        assert gate.stop_now
except KeyboardInterrupt:
    print("phase A: stayed", file=sys.stderr, flush=True)

import tensorflow as tf

@tf.function
def chunk():
    with tf.control_dependencies([tf.print("phase B: in the chunk", output_stream=sys.stderr)]):
        i = tf.constant(0, tf.int64)
    return tf.while_loop(lambda i: i < 10**15, lambda i: i + 1, [i])

signals.GRACE_S = 0.5
with loop.InterruptGate():
    chunk()
print("phase B: the chunk ended", file=sys.stderr)
"""


@pytest.mark.slow  # a TensorFlow process signalled inside a compiled call (12 s)
def test_a_second_ctrl_c_inside_a_compiled_call_leaves_at_once():
    """The first Ctrl-C is answered at once (a chunk can run for minutes on CPU, and
    Python's handler waits for its end); a second that the main thread cannot take up
    (inside a compiled call) ends the process, 130, without saving."""
    from helpers import patience, popen_python

    proc = popen_python(["-c", _WATCHED], stderr=subprocess.PIPE, text=True)
    hung = threading.Timer(patience(60), proc.kill)  # a process the Ctrl-Cs left running
    hung.start()
    lines = []
    try:
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if line.startswith("phase B: in the chunk"):
                proc.send_signal(signal.SIGINT)
            elif line.startswith("Ctrl-C: stopping") and any(
                    x.startswith("phase B") for x in lines):
                proc.send_signal(signal.SIGINT)
        proc.wait()
    finally:
        hung.cancel()
        proc.kill()
    said = [x for x in lines if x.startswith(("Ctrl-C", "phase", "interrupted"))]
    acknowledged = ("Ctrl-C: stopping after the running chunk of steps, with a checkpoint (a "
                    "second Ctrl-C stops sooner: saving where the loop can stop, else at once "
                    "without saving)")
    assert said == [acknowledged, "phase A: stayed", "phase B: in the chunk", acknowledged,
                    "interrupted by a second Ctrl-C inside a chunk of steps; no checkpoint "
                    "was saved; a rerun starts from the latest one"], "\n".join(lines)[-3000:]
    assert proc.returncode == 130


class _SlowStream:
    """A stream whose every write lets another thread run (as a write to a pipe may)."""

    def __init__(self):
        self.text = ""

    def write(self, s):
        time.sleep(0.001)
        self.text += s

    def flush(self):
        pass


def test_a_signal_line_never_lands_inside_a_progress_line(monkeypatch):
    # The loop's progress lines (main thread) and the signal watcher's first line (its
    # own thread) go to one stream: each line whole, never `... eta 2 minSIGTERM: ...`.
    from electra_tf.core import signals

    stream = _SlowStream()
    monkeypatch.setattr("sys.stderr", stream)
    watcher_lines = threading.Thread(
        target=lambda: [signals.say(f"SIGTERM line {i}") for i in range(50)])
    watcher_lines.start()
    for i in range(50):
        loop.log("pretrain", f"step {i}/100")
    watcher_lines.join()
    lines = stream.text.splitlines()
    assert sorted(lines) == sorted([f"[pretrain] step {i}/100" for i in range(50)]
                                   + [f"SIGTERM line {i}" for i in range(50)]), lines


def test_a_prompt_gate_stops_at_the_first_signals_next_stop_point(sigint_handler):
    """An evaluation-only run (nothing to save) stops between batches at the first signal;
    with peers the gate is never prompt (they stop together, at a check)."""
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with loop.InterruptGate(prompt=True):
            ctrl_c()
            reached.append("after the first")
            loop.stop_point()
            reached.append("after the stop point")
    assert reached == ["after the first"]
    assert not loop.InterruptGate(agree=lambda votes: votes, prompt=True).prompt
