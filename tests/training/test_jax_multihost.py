"""Multi-host JAX pre-training (jax.distributed), as two processes on this machine.

The processes talk through jax.distributed's coordinator on 127.0.0.1 and
reduce across processes with XLA's CPU collectives (gloo). Skipped where jax
is not installed.
"""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import REPO, TINY_NO_DROPOUT, free_port, patience, signal_after

from tests.training.test_jax_no_tf import h5_arrays, pretraining_flags

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                reason="jax is not installed (pip install 'jax[cpu]')")


def start(records, model_dir, *extra: str, script: str = "") -> subprocess.Popen:
    """run_pretraining (or `script`, which runs it: python -c) on the JAX backend."""
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=REPO, JAX_PLATFORMS="cpu",
               TF_CPP_MIN_LOG_LEVEL="2")
    args = [*pretraining_flags(records, model_dir),
            f"--model_hparam_overrides={json.dumps(TINY_NO_DROPOUT)}",
            "--jax_input_pipeline=numpy", *extra]
    command = ["-c", script] if script else ["-m", "electra_tf.run_pretraining"]
    return subprocess.Popen([sys.executable, *command, *args],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(proc: subprocess.Popen) -> str:
    try:
        _, err = proc.communicate(timeout=patience(600))
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 0, err[-4000:]
    return err


def test_multihost_settings_are_checked_before_jax_starts():
    from electra_tf.core.config import RuntimeOptions
    from electra_tf.core.errors import ConfigError

    def options(address, n, i):
        return RuntimeOptions(jax_coordinator_address=address, jax_num_processes=n,
                              jax_process_id=i)

    with pytest.raises(ConfigError, match="needs both jax_coordinator_address"):
        options("", 2, 0)
    with pytest.raises(ConfigError, match="needs both jax_coordinator_address"):
        options("127.0.0.1:1", 1, 0)
    with pytest.raises(ConfigError, match=r"jax_process_id=2 is not in \[0, "):
        options("127.0.0.1:1", 2, 2)


# Run in helpers.run_jax_script's process: jax.distributed.initialize is put back after.
_RECORD_JAX_WAIT = """
import sys, jax
from electra_tf.core.config import RuntimeOptions
from electra_tf.training.backends import jax as backend

class Recorded(Exception):
    pass

def initialize(*args, **kwargs):  # records what the run asks jax.distributed for, stops there
    print("initialization_timeout", kwargs.get("initialization_timeout"))
    raise Recorded

real, jax.distributed.initialize = jax.distributed.initialize, initialize
try:
    backend.start(RuntimeOptions(jax_coordinator_address="127.0.0.1:" + sys.argv[1],
                                 jax_num_processes=2, worker_startup_timeout_s=int(sys.argv[2])))
except Recorded:
    pass
finally:
    jax.distributed.initialize = real
"""


@pytest.mark.parametrize("timeout", [600, 0])
def test_jax_waits_for_its_peers_as_long_as_the_watcher(timeout):
    """jax.distributed's own start-up wait (300 s by default) ends in a C++ abort: it must
    outlast --worker_startup_timeout_s (default 600; 0: forever), so that the watcher's one
    line is what a lone process gets, when the user asked for it."""
    from helpers import run_jax_script

    proc = run_jax_script(_RECORD_JAX_WAIT, str(free_port()), str(timeout))
    assert proc.returncode == 0, proc.stderr[-3000:]
    waits = int(proc.stdout.split("initialization_timeout")[1].split()[0])
    assert waits > (timeout or 10 ** 8), proc.stdout


def _ended(proc, timeout=120) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=patience(timeout))
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, err


@pytest.mark.slow
def test_two_processes_given_the_same_process_id_each_stop_with_one_line(tiny_records,
                                                                          tmp_path):
    """Both --jax_process_id=0: the second cannot serve the coordinator (a C++ abort
    before); the first waits for a process 1 that never comes (silence before), as a
    process whose peers never come: one line after --worker_startup_timeout_s
    (jax.distributed's own wait ended in a C++ abort after 5 minutes)."""
    address = f"127.0.0.1:{free_port()}"
    flags = (f"--jax_coordinator_address={address}", "--jax_num_processes=2",
             "--jax_process_id=0", "--worker_startup_timeout_s=8")
    first = start(tiny_records, tmp_path / "a", *flags)
    import time

    time.sleep(4)  # the first serves the coordinator by now
    second = start(tiny_records, tmp_path / "b", *flags)
    results = sorted([(*_ended(first), "a"), (*_ended(second), "b")])
    (code_waiting, err_waiting, waiting_dir), (code_second, err_second, _) = results
    assert code_waiting == -9, err_waiting[-3000:]  # the watchdog's SIGKILL, as the TF path's
    assert [line for line in err_waiting.splitlines() if line.startswith("error:")] == [
        f"error: --jax_num_processes=2: not every process joined the coordinator at {address} "
        "within --worker_startup_timeout_s=8: start all 2, each with its own --jax_process_id "
        "(0 to 1), with the coordinator's host:port reachable from every host; or raise "
        "--worker_startup_timeout_s"], err_waiting[-3000:]
    assert not (tmp_path / waiting_dir).exists()
    assert code_second == 2, err_second[-3000:]
    assert [line for line in err_second.splitlines() if line.startswith("error:")] == [
        f"error: --jax_coordinator_address={address}: port {address.split(':')[1]} is in use "
        "on this host (another process 0 of a run, or another program); each process needs "
        "its own --jax_process_id, and process 0 a free port"]
    assert "Traceback" not in err_waiting + err_second


def _stopped_by_sigterm(procs, signalled=(0, 1), after: str = "step 3/") -> list[str]:
    """SIGTERM to each process of `signalled` once process 0 printed `after` (a
    scheduler's preemption: each its own signal); returns every process's stderr, each
    checked for the one-line exit 143, all at one step."""
    import re
    import signal

    ended = signal_after(procs, re.escape(after), signalled=signalled)
    errs = [err for _, err in ended]
    for code, err in ended:
        assert code == 128 + signal.SIGTERM, err[-3000:]
        assert "Traceback" not in err and "\nerror:" not in err, err[-3000:]
        assert re.fullmatch(r"interrupted at step \d+; checkpoint saved; rerun to resume",
                            err.strip().splitlines()[-1]), err[-3000:]
    lines = [err.strip().splitlines()[-1] for err in errs]
    assert lines[0] == lines[1], lines
    return errs


# run_pretraining's trainer for its flags (sys.argv[2:]), as its main builds it, trained
# until step sys.argv[1] (a checkpoint there); run in helpers.run_jax_script's process.
_ONE_PROCESS_UNTIL = """
import sys
from electra_tf.training.backends.jax import JaxPretraining
from helpers import pretraining_from_flags

trainer = JaxPretraining(*pretraining_from_flags(*sys.argv[2:]))
trainer.train(stop_at_step=int(sys.argv[1]))
print("replicas", trainer.num_replicas, "step", trainer.step)
"""


def checkpoint_names(*steps: int) -> list[str]:
    return sorted(f"jax-ckpt-{step}.npz" for step in steps)


@pytest.mark.slow
def test_two_processes_train_as_one_stop_at_one_step_on_sigterm_and_resume_exactly(
        tiny_records, tmp_path):
    """Two processes train as one process on the same global batches; SIGTERM to both
    mid-run (they land in different chunks) stops both at the same step (a
    process_allgather of the votes at each chunk boundary), process 0 saves it, and the
    rerun ends with the weights of a run never stopped (before, a process that stopped
    first left the other in a collective: Gloo's error, or a wait). Last, processes whose
    model dirs hold different steps stop with one line before restoring (restoring is
    collective: the check ran after it, and both aborted in a mismatched Gloo call).
    The run never stopped ("whole") serves each comparison."""
    steps = ("--num_train_steps=30", "--iterations_per_loop=1", "--log_every_steps=1",
             "--save_checkpoints_steps=6")

    def two(model_dir, *extra):
        address = f"127.0.0.1:{free_port()}"
        return [start(tiny_records, model_dir, f"--jax_coordinator_address={address}",
                      "--jax_num_processes=2", f"--jax_process_id={i}", *steps, *extra)
                for i in (0, 1)]

    chief, worker = (finish(p) for p in two(tmp_path / "whole"))
    # The one-process reference: the same flags' trainer in helpers.run_jax_script's
    # process (no process start), stopped at the step compared (its schedule still the
    # 30 steps': the same first 6 steps, and their checkpoint).
    from helpers import run_jax_script

    one = run_jax_script(_ONE_PROCESS_UNTIL, "6",
                         *pretraining_flags(tiny_records, tmp_path / "one"),
                         f"--model_hparam_overrides={json.dumps(TINY_NO_DROPOUT)}",
                         "--jax_input_pipeline=numpy", *steps)
    assert one.returncode == 0, one.stderr[-4000:]
    assert "2 replica(s)" in chief, chief[-3000:]
    assert one.stdout.splitlines()[-1].split() == ["replicas", "1", "step", "6"], one.stdout
    # Process 0 alone writes: one event file per folder, one set of checkpoints.
    for name in ("train", "eval"):
        assert len(os.listdir(tmp_path / "whole" / name)) == 1
    assert sorted(os.listdir(tmp_path / "whole" / "checkpoints")) == checkpoint_names(
        6, 12, 18, 24, 30)
    assert "step 30/30" in chief and "step 30/30" not in worker
    checksums = [line.split("checksum ")[1].split()[0] for err in (chief, worker)
                 for line in err.splitlines() if "final weights checksum" in line]
    assert len(checksums) == 2 and checksums[0] == checksums[1]  # both processes agree

    # The same global batches and seeds: the same weights, up to the reduction order
    # (after 6 steps, as the 6-step runs this compared before).
    def model_arrays(folder):
        with np.load(folder / "checkpoints" / "jax-ckpt-6.npz") as data:
            return {k: data[k] for k in data.files if k.startswith("model/")}

    a, b = model_arrays(tmp_path / "one"), model_arrays(tmp_path / "whole")
    assert a.keys() == b.keys() and any("/discriminator/" in k for k in a) \
        and any("/generator/" in k for k in a)
    for key in a:
        np.testing.assert_allclose(b[key], a[key], rtol=1e-5, atol=1e-6, err_msg=key)

    line = _stopped_by_sigterm(two(tmp_path / "stopped"))[0].strip().splitlines()[-1]
    step = int(line.split()[3].rstrip(";"))
    assert 3 <= step < 30, line
    # the periodic checkpoints before it, and the one at the stop
    assert sorted(os.listdir(tmp_path / "stopped" / "checkpoints")) == checkpoint_names(
        *range(6, step, 6), step)
    chief, _ = (finish(p) for p in two(tmp_path / "stopped"))
    assert f"jax-ckpt-{step}.npz at step {step}" in chief, chief[-3000:]
    for name in ("discriminator.weights.h5", "generator.weights.h5"):
        a = h5_arrays(tmp_path / "whole" / name)
        b = h5_arrays(tmp_path / "stopped" / name)
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(b[key], a[key], err_msg=key)

    address = f"127.0.0.1:{free_port()}"
    procs = [start(tiny_records, tmp_path / name, f"--jax_coordinator_address={address}",
                   "--jax_num_processes=2", f"--jax_process_id={i}", *steps,
                   "--num_train_steps=40") for i, name in ((0, "whole"), (1, "fresh"))]
    for code, err in (_ended(p) for p in procs):
        assert code == 2, err[-3000:]
        assert [line for line in err.splitlines() if line.startswith("error:")] == [
            "error: the processes would resume from different steps [30, 0]: every process "
            "must see the same --model_dir (a shared file system) and its checkpoints"]
    assert not (tmp_path / "fresh" / "checkpoints").exists()  # nothing was trained or saved

    # another --seed on process 1: named (the refusal had said "different settings")
    address = f"127.0.0.1:{free_port()}"
    procs = [start(tiny_records, tmp_path / "seeds", f"--jax_coordinator_address={address}",
                   "--jax_num_processes=2", f"--jax_process_id={i}", *steps, *extra)
             for i, extra in ((0, ()), (1, ("--seed=99",)))]
    for code, err in (_ended(p) for p in procs):
        assert code == 2, err[-3000:]
        assert [line for line in err.splitlines() if line.startswith("error:")] == [
            "error: --jax_num_processes=2: the processes of the run were started with "
            "different --seed (every flag but the paths must be the same); start every "
            "process with the same flags"]
    assert not (tmp_path / "seeds" / "checkpoints").exists()


@pytest.mark.slow
def test_sigterm_to_one_process_stops_both_with_a_checkpoint(tiny_records, tmp_path):
    """SIGTERM to process 1 alone: process 0 stops at the same step and saves it. Before,
    process 1 left, and process 0 stopped on the lost peer without saving (exit 1)."""
    address = f"127.0.0.1:{free_port()}"
    procs = [start(tiny_records, tmp_path / "m", f"--jax_coordinator_address={address}",
                   "--jax_num_processes=2", f"--jax_process_id={i}", "--num_train_steps=1000",
                   "--iterations_per_loop=1", "--log_every_steps=1") for i in (0, 1)]
    line = _stopped_by_sigterm(procs, signalled=(1,))[0].strip().splitlines()[-1]
    step = int(line.split()[3].rstrip(";"))
    assert (tmp_path / "m" / "checkpoints" / f"jax-ckpt-{step}.npz").exists()


_TWO_SIGTERMS_IN_CHUNK_2 = """
import os, runpy, signal, sys, time
from electra_tf.training.backends.jax import JaxPretraining

real, calls = JaxPretraining.train_steps, []

def train_steps(self, iterator, n):  # two SIGTERMs as the second chunk starts
    calls.append(n)
    if len(calls) == 2:
        for _ in range(2):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
    return real(self, iterator, n)

JaxPretraining.train_steps = train_steps
sys.argv = ["run_pretraining", *sys.argv[1:]]
runpy.run_module("electra_tf.run_pretraining", run_name="__main__")
"""


@pytest.mark.slow
def test_a_second_sigterm_stops_its_process_alone_and_the_other_with_one_line(tiny_records,
                                                                             tmp_path):
    """Two SIGTERMs to process 1 within a chunk: the second stops it at once, alone, so it
    saves nothing and ends without its exit hooks (which would wait for process 0);
    process 0 finds its peer gone and stops with its one line, at once, as a survivor of
    a peer killed mid-run (it had printed a Gloo traceback, then aborted about 60 s later
    in the exit's shutdown barrier)."""
    import signal
    import time

    address = f"127.0.0.1:{free_port()}"
    flags = [f"--jax_coordinator_address={address}", "--jax_num_processes=2",
             "--num_train_steps=100000", "--iterations_per_loop=2",
             "--save_checkpoints_steps=1000"]
    first = start(tiny_records, tmp_path / "m", *flags, "--jax_process_id=0")
    second = start(tiny_records, tmp_path / "m", *flags, "--jax_process_id=1",
                   script=_TWO_SIGTERMS_IN_CHUNK_2)
    code1, err1 = _ended(second)
    gone = time.monotonic()
    code0, err0 = _ended(first)
    assert time.monotonic() - gone < 30
    assert code1 == 128 + signal.SIGTERM, err1[-3000:]
    assert err1.strip().splitlines()[-1] == (
        "interrupted at step 2; no checkpoint was saved; a rerun starts from the latest one"), \
        err1[-3000:]
    assert code0 == 1, err0[-3000:]
    errors = [line for line in err0.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(
        "error: --jax_num_processes=2: another process of the run stopped at step "), err0
    assert "Traceback" not in err0 + err1
    assert not (tmp_path / "m" / "checkpoints").exists()
