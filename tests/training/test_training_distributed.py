"""Distribution on CPU: MirroredStrategy over 2 logical devices (with XLA in
test_lamb_phases.py's slow mirrored run), and MultiWorkerMirroredStrategy with 2 worker processes on
127.0.0.1 (a run, and a run stopped by SIGTERM, then resumed)."""

import json
import os
import re
import signal
import subprocess
import textwrap

import pytest
from helpers import (
    TINY_MODEL,
    child_env,
    free_ports,
    popen_python,
    run_python,
    signal_after,
)

from tests.training.test_jax_no_tf import h5_arrays


def tiny_flags(records, vocab, model_dir, steps=4):
    from electra_tf.text.tokenizer import load_vocab

    return [f"--train_data={records['train']}", f"--eval_data={records['eval']}",
            f"--vocab_file={vocab}", f"--vocab_size={len(load_vocab(vocab))}",
            f"--model_dir={model_dir}", "--model_size=tiny",
            f"--model_hparam_overrides={json.dumps(TINY_MODEL)}", "--max_seq_length=32",
            "--generator_hidden_size=0.5", "--train_batch_size=8", "--eval_batch_size=8",
            f"--num_train_steps={steps}", "--iterations_per_loop=2", "--num_warmup_steps=1",
            "--num_eval_steps=2", "--seed=5"]


MIRRORED_SCRIPT = textwrap.dedent("""
    import sys, numpy as np, tensorflow as tf
    from absl import flags
    from electra_tf import flags as flags_lib
    from electra_tf.training.backends import tensorflow as backend
    flags_lib.define_pretraining_flags()
    flags.FLAGS(["x"] + sys.argv[1:])
    strategy = backend.make_strategy("mirrored", 2)
    config, run = flags_lib.pretraining_configs()
    t = backend.TensorFlowPretraining(config, run, strategy)
    assert t.num_replicas == 2, t.num_replicas
    local = t.strategy.experimental_local_results(next(t.make_train_iterator(0)))
    a, b = (x["masked_lm_positions"].numpy() for x in local)
    assert not np.array_equal(a, b), "replicas got the same masks"
    seeds = t.strategy.experimental_local_results(t.strategy.run(
        lambda: backend.replica_seed(config.seed, t.optimizer.iterations)))
    assert not np.array_equal(seeds[0].numpy(), seeds[1].numpy()), "replicas share a seed"
    # a resume at step 2 reads global batch 2 (each step takes a batch per replica: it
    # had skipped 2 per-replica batches, and read batch 1 again)
    fresh = t.make_train_iterator(0)
    global_batches = [t.strategy.experimental_local_results(next(fresh)) for _ in range(3)]
    resumed = t.strategy.experimental_local_results(next(t.make_train_iterator(2)))
    for want, got in zip(global_batches[2], resumed, strict=True):
        for key in ("input_ids", "masked_lm_positions"):
            assert np.array_equal(want[key].numpy(), got[key].numpy()), key
    final = t.train()
    assert np.isfinite(final["loss"]), final
    print("MIRRORED_OK", final["loss"])
""")


# XLA compiling each replica's step (slow): test_lamb_phases.py's mirrored run, with
# LAMB and a second phase, takes --jit_compile=true. This one (a fresh process of two
# logical CPUs: about 27 s of one worker on 2 cores) runs with the slow tests since
# 2026-12-07, to keep the default suite near its 6 minutes (benchmarks/test_suite.md).
@pytest.mark.slow
def test_mirrored_two_cpus(tiny_records, tmp_path):
    args = tiny_flags(tiny_records, tiny_records["vocab"], tmp_path / "m") + [
        "--strategy=mirrored", "--num_devices=2", "--jit_compile=false"]
    proc = run_python(["-c", MIRRORED_SCRIPT, *args], timeout=600)
    assert proc.returncode == 0 and "MIRRORED_OK" in proc.stdout, proc.stderr[-3000:]


# Worker 1's exit hooks take this long in every run here (slow_exit/sitecustomize.py),
# as a loaded machine's teardown can: had it not left at once at the end (core/peers.py),
# it would still be running when the chief, which hosts the cluster's coordination
# service, had gone, and TensorFlow would log a refused heartbeat (UNAVAILABLE) after its
# last line.
SLOW_EXIT_S = 10
SLOW_EXIT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "slow_exit")


def run_workers(args, signal_workers=(), after=r"step 2/", extra=((), ()),
                module="electra_tf.run_pretraining") -> list[tuple[int, str]]:
    """Two multi-worker processes of `module` (run_pretraining) with `args` (and each its
    `extra`); SIGTERM to each of
    `signal_workers` once the chief printed `after`. Returns each one's (status, stderr);
    neither holds a line of TensorFlow's about an unreachable peer."""
    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs = []
    for i in range(2):
        env = child_env(TF_CONFIG=json.dumps({"cluster": cluster,
                                              "task": {"type": "worker", "index": i}}))
        if i == 1:
            env["PYTHONPATH"] = os.pathsep.join([SLOW_EXIT_DIR, env["PYTHONPATH"]])
            env["ELECTRA_TEST_SLOW_EXIT_S"] = str(SLOW_EXIT_S)
        procs.append(popen_python(["-m", module, *args, *extra[i],
                                   "--strategy=multi_worker"], env=env,
                                  stderr=subprocess.PIPE, text=True))
    ended = signal_after(procs, after, signalled=signal_workers, wait_s=300 + SLOW_EXIT_S)
    for _, err in ended:
        assert "UNAVAILABLE" not in err and "Error received from peer" not in err, err[-3000:]
    return ended


def check_stopped_together(ended, model_dir, steps: int) -> int:
    """Both workers exited 143 with the same `interrupted at step N` line, and the chief
    saved that step's checkpoint; returns N."""
    lines = []
    for code, err in ended:
        assert code == 128 + signal.SIGTERM, err[-3000:]
        assert "Traceback" not in err and "\nerror:" not in err, err[-3000:]
        lines.append(err.strip().splitlines()[-1])
    assert lines[0] == lines[1], lines
    match = re.fullmatch(r"interrupted at step (\d+); checkpoint saved; rerun to resume",
                         lines[0])
    assert match and 2 <= int(match.group(1)) < steps, lines
    step = int(match.group(1))
    assert (model_dir / "checkpoints" / f"ckpt-{step}.index").exists()
    assert not list(model_dir.glob(".worker_*"))  # the other worker's scratch save is gone
    return step


# Two worker processes: slow. By default the workers' stop agreement runs in
# test_training_interrupts.py and a peer that never starts in test_training_faults.py.
@pytest.mark.slow  # three 2-worker runs; the agreement itself: test_training_interrupts.py
def test_multi_worker_sigterm_stops_every_worker_at_one_step_and_resumes_exactly(
        tiny_records, tmp_path):
    """SIGTERM to every worker, as a scheduler's preemption sends it (the signals land in
    different chunks): every worker stops at the same step, the chief saves that step's
    checkpoint, each prints the one line and exits 143, and the rerun ends with the
    weights of a run never stopped, bit for bit. That run never stopped is the plain
    two-worker run: both workers end with one weights checksum, over 2 replicas."""
    steps = 30
    stopped, whole = tmp_path / "stopped", tmp_path / "whole"
    flags = tiny_flags(tiny_records, tiny_records["vocab"], stopped, steps)
    step = check_stopped_together(run_workers(flags, signal_workers=(0, 1)), stopped, steps)
    resumed = run_workers(flags)
    for code, err in resumed:
        assert code == 0, err[-3000:]
    assert f"ckpt-{step} at step {step}" in resumed[0][1], resumed[0][1][-3000:]
    # The run never stopped: two workers that agree (each ends with the same weights,
    # over 2 replicas), the chief's weights, no scratch folder left.
    outs = []
    for code, err in run_workers(tiny_flags(tiny_records, tiny_records["vocab"], whole, steps)):
        assert code == 0, err[-3000:]
        outs.append(err)
    sums = [re.findall(r"final weights checksum (\S+)", err) for err in outs]
    assert sums[0] and sums[1] and sums[0] == sums[1], sums
    assert "2 replica(s)" in outs[0]
    assert not list(whole.glob(".worker_*"))
    for name in ("discriminator.weights.h5", "generator.weights.h5"):
        a, b = h5_arrays(whole / name), h5_arrays(stopped / name)
        assert a.keys() == b.keys()
        for key in a:
            assert (a[key] == b[key]).all(), f"{name} {key} differs"


@pytest.mark.slow  # a 2-worker run
def test_multi_worker_sigterm_to_one_worker_stops_them_all(tiny_records, tmp_path):
    """SIGTERM to worker 1 alone: the chief stops at the same step and saves. Before,
    worker 1 left, the chief waited in an all-reduce for it and ended with an error,
    and no checkpoint was saved (worker 1's own save went to its scratch folder)."""
    steps = 30
    model_dir = tmp_path / "m"
    check_stopped_together(run_workers(tiny_flags(
        tiny_records, tiny_records["vocab"], model_dir, steps), signal_workers=(1,)),
        model_dir, steps)


@pytest.mark.slow  # a 2-worker start
@pytest.mark.parametrize("own,named", [
    (("--seed=99",), "--seed"),
    # run flags: another --eval_every_steps had ended in a collective's traceback, another
    # --mixed_precision trained silently (the chief's record saying fp32)
    (("--eval_every_steps=2", "--mixed_precision=bf16"),
     "--eval_every_steps, --mixed_precision")])
def test_workers_started_with_other_settings_are_refused(own, named, tiny_records, tmp_path):
    """Another --seed on worker 1 had trained on silently (another batch size too, with
    a global batch neither flag gave; another model size ended in collective tracebacks):
    both workers compare their settings before the model is built."""
    model_dir = tmp_path / "m"
    ended = run_workers(tiny_flags(tiny_records, tiny_records["vocab"], model_dir),
                        extra=((), own))
    for code, err in ended:
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert code == 2 and errors and errors[0].startswith(
            "error: --strategy=multi_worker: the processes of the run were started with "
            f"different {named} (every flag but the paths"), err[-3000:]
        assert "Traceback" not in err, err[-3000:]
    assert not (model_dir / "checkpoints").exists()
