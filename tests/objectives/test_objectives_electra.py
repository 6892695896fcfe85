"""The ELECTRA objective end to end on fixed logits, and backend purity."""

import pathlib

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.core.config import PretrainingConfig
from electra_tf.objectives import ElectraObjective, disc_loss, mlm_loss

B, L, N, V = 2, 8, 3, 13
MASK_ID = 4


def _batch():
    rng = np.random.default_rng(0)
    original = rng.integers(5, V, size=(B, L)).astype(np.int32)
    positions = np.array([[1, 3, 6], [2, 5, 0]], np.int32)
    weights = np.array([[1, 1, 1], [1, 1, 0]], np.float32)
    ids = np.take_along_axis(original, positions, 1) * (weights > 0)
    masked = original.copy()
    np.put_along_axis(masked, positions[:, :2], MASK_ID, 1)
    masked[0, 6] = MASK_ID
    return original, {
        "input_ids": tf.constant(masked),
        "input_mask": tf.ones((B, L), tf.int32),
        "segment_ids": tf.zeros((B, L), tf.int32),
        "masked_lm_positions": tf.constant(positions),
        "masked_lm_ids": tf.constant(ids),
        "masked_lm_weights": tf.constant(weights),
    }


def test_from_config():
    obj = ElectraObjective.from_config(PretrainingConfig(disc_weight=20.0, temperature=0.5))
    assert (obj.disc_weight, obj.temperature, obj.gen_weight) == (20.0, 0.5, 1.0)


def test_fake_data_loss_and_no_generator_gradient_from_disc():
    original, batch = _batch()
    obj = ElectraObjective(disallow_correct=True)
    mlm_logits = tf.constant(np.random.default_rng(1).normal(size=(B, N, V)).astype(np.float32))
    disc_logits = tf.constant(np.random.default_rng(2).normal(size=(B, L)).astype(np.float32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(mlm_logits)
        fake = obj.fake_data(batch, mlm_logits, seed=0)
        out = obj.compute_loss(batch, mlm_logits, fake, {"rtd_logits": disc_logits})
    np.testing.assert_array_equal(fake["original_ids"], original)
    # disallow_correct: every real slot is replaced, the padded slot is not.
    labels = fake["labels"].numpy()
    assert labels.sum() == 5 and labels[0, [1, 3, 6]].all() and labels[1, [2, 5]].all()
    assert labels[1, 0] == 0  # the padded slot (position 0) writes nothing
    expected = 1.0 * mlm_loss(
        mlm_logits, batch["masked_lm_ids"], batch["masked_lm_weights"]
    ) + 50.0 * disc_loss(disc_logits, labels, batch["input_mask"])
    np.testing.assert_allclose(out["loss"], expected, rtol=1e-6)
    # D's loss reaches G's logits only through the sample: no gradient.
    grad = tape.gradient(out["disc_loss"], mlm_logits)
    assert grad is None or not np.any(grad.numpy())
    assert np.any(tape.gradient(out["loss"], mlm_logits).numpy())  # via the MLM loss
    sums = obj.metric_sums(batch, mlm_logits, fake, {"rtd_logits": disc_logits})
    assert float(sums["sampled_masked_lm_accuracy"][0]) == 0.0


def test_objectives_do_not_import_tensorflow():
    package = pathlib.Path(__file__).parents[2] / "electra_tf" / "objectives"
    for path in package.glob("*.py"):
        text = path.read_text()
        assert "import tensorflow" not in text and "from tensorflow" not in text, path


def test_an_objective_of_numbers_no_config_would_take_is_refused():
    """The objectives are public: a temperature of 0, a string or NaN had sampled on
    silently (PretrainingConfig refuses them; an objective built by hand had not)."""
    import math

    from electra_tf.objectives.electra import ElectraObjective
    from electra_tf.objectives.electric import ElectricObjective

    for kwargs, name in (({"temperature": 0.0}, "temperature"),
                         ({"temperature": "x"}, "temperature"),
                         ({"disc_weight": math.nan}, "disc_weight"),
                         ({"gen_weight": -1.0}, "gen_weight"),
                         ({"temperature": True}, "temperature")):
        for cls in (ElectraObjective, ElectricObjective):
            with pytest.raises(ValueError, match=rf"^{cls.__name__}: {name} must be a finite "
                                                 r"number"):
                cls(**kwargs)
    assert ElectraObjective(disc_weight=0.0, temperature=0.5).temperature == 0.5
