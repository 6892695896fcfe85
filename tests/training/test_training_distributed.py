"""Distribution on CPU: MirroredStrategy over 2 logical devices (with XLA in
the slow variant), and MultiWorkerMirroredStrategy with 2 worker processes on
127.0.0.1."""

import json
import re
import subprocess
import textwrap

import pytest
from helpers import TINY_MODEL, child_env, free_ports, patience, popen_python, run_python


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
    final = t.train()
    assert np.isfinite(final["loss"]), final
    print("MIRRORED_OK", final["loss"])
""")


# XLA compiles each replica's step (about 15 s of CPU more): the slow variant.
@pytest.mark.parametrize("jit_compile", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_mirrored_two_cpus(tiny_records, tmp_path, jit_compile):
    args = tiny_flags(tiny_records, tiny_records["vocab"], tmp_path / "m") + [
        "--strategy=mirrored", "--num_devices=2", f"--jit_compile={str(jit_compile).lower()}"]
    proc = run_python(["-c", MIRRORED_SCRIPT, *args], timeout=600)
    assert proc.returncode == 0 and "MIRRORED_OK" in proc.stdout, proc.stderr[-3000:]


def test_multi_worker_two_processes_agree(tiny_records, tmp_path):
    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    args = tiny_flags(tiny_records, tiny_records["vocab"], tmp_path / "mw") + [
        "--strategy=multi_worker"]
    procs = []
    for i in range(2):
        env = child_env(TF_CONFIG=json.dumps({"cluster": cluster,
                                              "task": {"type": "worker", "index": i}}))
        procs.append(popen_python(["-m", "electra_tf.run_pretraining", *args], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    try:
        for p in procs:
            _, err = p.communicate(timeout=patience(600))
            outs.append(err)
    finally:
        for p in procs:
            p.kill()
    for p, err in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    sums = [re.findall(r"final weights checksum (\S+)", err) for err in outs]
    assert sums[0] and sums[1] and sums[0] == sums[1], sums
    assert "2 replica(s)" in outs[0]
    assert (tmp_path / "mw" / "discriminator.weights.h5").exists()
    assert not list((tmp_path / "mw").glob(".worker_*"))
