"""Model code is keras.ops-only: the pretrainer trains under KERAS_BACKEND=jax.

Runs where jax is installed (`pip install "jax[cpu]"`); skipped otherwise, as
jax is not a dependency.
"""

import importlib.util

import pytest
from helpers import run_jax_script

SCRIPT = r'''
import os, sys
os.environ["KERAS_BACKEND"] = "jax"
import numpy as np, keras
assert keras.backend.backend() == "jax"
from electra_tf.core.config import PretrainingConfig
from electra_tf.objectives.pretrainer import ElectraPretrainer
V, L, B, N = 120, 16, 8, 3
from helpers import TINY_MODEL
cfg = PretrainingConfig(model_size="tiny", vocab_size=V, max_seq_length=L, generator_hidden_size=0.5, seed=0,
    max_predictions_per_seq=N, model_hparam_overrides=TINY_MODEL)
keras.utils.set_random_seed(0)
m = ElectraPretrainer(cfg); m.build_with_dummy_batch()
rng = np.random.default_rng(0)
ids = rng.integers(110, V, size=(64, L)).astype("int32"); ids[:, 0] = 101; ids[:, -1] = 102
pos = np.stack([rng.choice(np.arange(1, L - 1), N, replace=False) for _ in range(64)]).astype("int32")
lm_ids = np.take_along_axis(ids, pos, 1)
masked = ids.copy(); np.put_along_axis(masked, pos, 103, 1)
x = {"input_ids": masked, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids),
     "masked_lm_positions": pos, "masked_lm_ids": lm_ids, "masked_lm_weights": np.ones((64, N), "float32")}
m.compile(optimizer=keras.optimizers.AdamW(1e-3), jit_compile=True)
h = m.fit(x, epochs=12, batch_size=B, verbose=0)
assert h.history["loss"][-1] < 0.7 * h.history["loss"][0], h.history["loss"]
out = m(x, training=False)
assert tuple(out["disc"]["rtd_logits"].shape) == (64, L) and str(out["mlm_logits"].dtype) == "float32"
print("JAX_OK")
'''


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_pretrainer_fits_under_jax():
    """Keras' own fit on the JAX backend. Slow: the default suite trains the pretrainer
    under JAX through the JAX loop (tests/training/test_jax_runtime.py: its losses equal
    TF's; it trains, resumes and exports), and its updates equal the TF loop's
    (test_jax_training_options.py), which overfits a batch (test_training_overfit.py)."""
    # In helpers.run_jax_script's process (tests/ on its path: the script imports helpers).
    proc = run_jax_script(SCRIPT)
    assert proc.returncode == 0 and "JAX_OK" in proc.stdout, proc.stderr[-3000:]
