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
from helpers import REPO, TINY_NO_DROPOUT, free_port

from tests.training.test_jax_no_tf import h5_arrays, pretraining_flags

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                reason="jax is not installed (pip install 'jax[cpu]')")


def start(records, model_dir, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=REPO, JAX_PLATFORMS="cpu",
               TF_CPP_MIN_LOG_LEVEL="2")
    args = [*pretraining_flags(records, model_dir),
            f"--model_hparam_overrides={json.dumps(TINY_NO_DROPOUT)}",
            "--jax_input_pipeline=numpy", *extra]
    return subprocess.Popen([sys.executable, "-m", "electra_tf.run_pretraining", *args],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(proc: subprocess.Popen) -> str:
    try:
        _, err = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 0, err[-4000:]
    return err


@pytest.mark.slow
def test_two_processes_train_as_one_with_the_same_global_batch(tiny_records, tmp_path):
    address = f"127.0.0.1:{free_port()}"
    two = [start(tiny_records, tmp_path / "two", f"--jax_coordinator_address={address}",
                 "--jax_num_processes=2", f"--jax_process_id={i}") for i in (0, 1)]
    chief, worker = (finish(p) for p in two)
    one = finish(start(tiny_records, tmp_path / "one"))

    assert "2 replica(s)" in chief and "1 replica(s)" in one
    # Process 0 alone writes: one event file per folder, one set of checkpoints.
    for name in ("train", "eval"):
        assert len(os.listdir(tmp_path / "two" / name)) == 1
    assert sorted(os.listdir(tmp_path / "two" / "checkpoints")) == [
        "jax-ckpt-3.npz", "jax-ckpt-6.npz"]
    assert "step 6/6" in chief and "step 6/6" not in worker
    checksums = [line.split("checksum ")[1].split()[0] for err in (chief, worker)
                 for line in err.splitlines() if "final weights checksum" in line]
    assert len(checksums) == 2 and checksums[0] == checksums[1]  # both processes agree

    # The same global batches and seeds: the same weights, up to the reduction order.
    for name in ("discriminator.weights.h5", "generator.weights.h5"):
        a, b = h5_arrays(tmp_path / "one" / name), h5_arrays(tmp_path / "two" / name)
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_allclose(b[key], a[key], rtol=1e-5, atol=1e-6, err_msg=key)


def test_multihost_settings_are_checked_before_jax_starts():
    from electra_tf.config import RuntimeOptions
    from electra_tf.errors import ConfigError

    def options(address, n, i):
        return RuntimeOptions(jax_coordinator_address=address, jax_num_processes=n,
                              jax_process_id=i).validate()

    with pytest.raises(ConfigError, match="needs both jax_coordinator_address"):
        options("", 2, 0)
    with pytest.raises(ConfigError, match="needs both jax_coordinator_address"):
        options("127.0.0.1:1", 1, 0)
    with pytest.raises(ConfigError, match=r"jax_process_id=2 is not in \[0, "):
        options("127.0.0.1:1", 2, 2)
