"""Corruption, labels and losses against NumPy references."""

import numpy as np
import pytest

from electra_tf.objectives import (
    disc_loss,
    electra_loss,
    mlm_loss,
    rtd_labels,
    scatter_at_positions,
    sigmoid_cross_entropy,
)

RNG = np.random.default_rng(0)
B, L, N, V = 2, 8, 3, 11
MASK_ID = 4


def _batch():
    """Two rows; row 1 has padding from position 6 and one padded slot."""
    original = RNG.integers(5, V, size=(B, L)).astype(np.int32)
    original[:, 0] = 1  # [CLS]
    input_mask = np.ones((B, L), np.int32)
    input_mask[1, 6:] = 0
    original[1, 6:] = 0
    positions = np.array([[2, 5, 3], [1, 4, 0]], np.int32)
    weights = np.array([[1, 1, 1], [1, 1, 0]], np.float32)
    ids = original[np.arange(B)[:, None], positions] * (weights > 0)
    masked = original.copy()
    for b in range(B):
        for n in range(N):
            if weights[b, n] > 0:
                masked[b, positions[b, n]] = MASK_ID
    masked[0, 3] = original[0, 3]  # one chosen position kept its token (the 15%)
    return masked, original, input_mask, positions, ids.astype(np.int32), weights


def _np_scatter(ids, positions, values, weights):
    out = ids.copy()
    for b in range(ids.shape[0]):
        for n in range(positions.shape[1]):
            if weights[b, n] > 0:
                out[b, positions[b, n]] = values[b, n]
    return out


def test_scatter_matches_numpy_and_ignores_padding_slots():
    masked, _, _, positions, _, weights = _batch()
    values = RNG.integers(0, V, size=(B, N)).astype(np.int32)
    values[1, 2] = 9  # padded slot (position 0): must not overwrite [CLS]
    out = np.asarray(scatter_at_positions(masked, positions, values, weights))
    np.testing.assert_array_equal(out, _np_scatter(masked, positions, values, weights))
    assert out[1, 0] == 1


def test_scattering_the_masked_ids_undoes_the_masking():
    masked, original, _, positions, ids, weights = _batch()
    np.testing.assert_array_equal(scatter_at_positions(masked, positions, ids, weights), original)


def test_corrupted_inputs_and_labels():
    masked, original, input_mask, positions, ids, weights = _batch()
    sampled = ids.copy()
    sampled[0, 0] = (ids[0, 0] + 1) % V  # replaced
    sampled[1, 1] = (ids[1, 1] + 2) % V  # replaced; the other real slots equal the original
    sampled[1, 2] = 7  # padded slot: ignored
    corrupted = np.asarray(scatter_at_positions(masked, positions, sampled, weights))
    np.testing.assert_array_equal(corrupted, _np_scatter(masked, positions, sampled, weights))
    labels = np.asarray(rtd_labels(corrupted, original, input_mask))
    expected = np.zeros((B, L), np.float32)
    expected[0, positions[0, 0]] = 1.0
    expected[1, positions[1, 1]] = 1.0
    np.testing.assert_array_equal(labels, expected)  # a sample equal to the original is 0
    assert labels.dtype == np.float32


def _np_log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_mlm_loss_matches_numpy():
    logits = RNG.normal(size=(B, N, V)).astype(np.float32) * 3
    ids = RNG.integers(0, V, size=(B, N))
    weights = np.array([[1, 0, 1], [1, 1, 0]], np.float32)
    ce = -np.take_along_axis(_np_log_softmax(logits.astype(np.float64)), ids[..., None], -1)[..., 0]
    expected = (weights * ce).sum() / (weights.sum() + 1e-6)
    np.testing.assert_allclose(float(mlm_loss(logits, ids, weights)), expected, rtol=1e-5)
    # bf16 / f16 logits are computed in float32.
    out = mlm_loss(logits.astype(np.float16), ids, weights)
    assert str(out.dtype) in ("float32", "<dtype: 'float32'>")


def test_mlm_loss_all_padding_is_zero():
    logits = RNG.normal(size=(B, N, V)).astype(np.float32)
    assert float(mlm_loss(logits, np.zeros((B, N), np.int32), np.zeros((B, N)))) == 0.0


def _np_sigmoid_ce(x, z):
    # -(z log p + (1 - z) log(1 - p)) with p = sigmoid(x), in a stable form.
    return np.logaddexp(0.0, x) - x * z


def test_sigmoid_cross_entropy_is_stable_and_matches_numpy():
    x = np.array([-30.0, -2.0, 0.0, 1.5, 30.0], np.float32)
    z = np.array([1.0, 0.0, 1.0, 1.0, 0.0], np.float32)
    np.testing.assert_allclose(
        sigmoid_cross_entropy(x, z), _np_sigmoid_ce(x.astype(np.float64), z), rtol=1e-5
    )


def test_disc_loss_matches_numpy_with_padding():
    logits = RNG.normal(size=(B, L)).astype(np.float32) * 2
    labels = (RNG.random((B, L)) < 0.3).astype(np.float32)
    mask = np.ones((B, L), np.float32)
    mask[1, 5:] = 0
    labels[1, 5:] = 0
    per_token = _np_sigmoid_ce(logits.astype(np.float64), labels)
    expected = (mask * per_token).sum() / (mask.sum() + 1e-6)
    np.testing.assert_allclose(float(disc_loss(logits, labels, mask)), expected, rtol=1e-5)
    # Logits at padding do not matter.
    logits2 = logits.copy()
    logits2[1, 5:] = 100.0
    np.testing.assert_allclose(float(disc_loss(logits2, labels, mask)), expected, rtol=1e-5)


@pytest.mark.parametrize("gen_weight,disc_weight", [(1.0, 50.0), (0.5, 0.0)])
def test_electra_loss(gen_weight, disc_weight):
    assert electra_loss(2.0, 0.1, gen_weight, disc_weight) == pytest.approx(
        gen_weight * 2.0 + disc_weight * 0.1
    )
    assert electra_loss(2.0, 0.1) == pytest.approx(7.0)


def test_sigmoid_cross_entropy_gradient_is_sigmoid_minus_label_at_zero():
    import tensorflow as tf

    x = tf.constant([0.0, 0.0, 2.0, -3.0])
    z = tf.constant([0.75, 0.0, 0.3, 1.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(sigmoid_cross_entropy(x, z))
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(),
                               1 / (1 + np.exp(-x.numpy())) - z.numpy(), rtol=1e-6, atol=1e-7)
