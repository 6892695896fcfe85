"""Gumbel-max sampling: statistics, options, seeds and stop_gradient."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.objectives import sample_from_logits

LOGITS = np.array([1.0, 0.0, -1.0, 2.0, 0.5], np.float32)
DRAWS = 6000


def _softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def _frequencies(ids, vocab=5):
    return np.bincount(np.asarray(ids).ravel(), minlength=vocab) / np.asarray(ids).size


def _repeated(logits=LOGITS):
    # One call, DRAWS independent slots with the same distribution: [2, DRAWS/2, V].
    return np.tile(logits, (2, DRAWS // 2, 1))


@pytest.mark.parametrize("temperature", [1.0, 0.5, 2.0])
def test_frequencies_match_softmax_over_temperature(temperature):
    ids = sample_from_logits(_repeated(), seed=3, temperature=temperature)
    assert ids.shape == (2, DRAWS // 2) and ids.dtype == tf.int32
    np.testing.assert_allclose(_frequencies(ids), _softmax(LOGITS / temperature), atol=0.025)


def test_temperature_sharpens():
    cold = _frequencies(sample_from_logits(_repeated(), seed=1, temperature=0.25))
    warm = _frequencies(sample_from_logits(_repeated(), seed=1, temperature=1.0))
    assert cold[3] > warm[3] + 0.2  # the argmax token gains mass


def test_disallow_correct_never_returns_the_original():
    # The original id 3 is by far the most likely, and is never drawn.
    disallow = np.full((2, DRAWS // 2), 3, np.int32)
    ids = np.asarray(sample_from_logits(_repeated(LOGITS * 5), seed=0, disallow_ids=disallow))
    assert not np.any(ids == 3)
    rest = np.delete(_softmax(LOGITS * 5), 3)
    np.testing.assert_allclose(np.delete(_frequencies(ids), 3), rest / rest.sum(), atol=0.025)


def test_uniform_generator_is_uniform_and_still_disallows():
    ids = sample_from_logits(_repeated(LOGITS * 10), seed=0, uniform=True)
    np.testing.assert_allclose(_frequencies(ids), np.full(5, 0.2), atol=0.025)
    disallow = np.zeros((2, DRAWS // 2), np.int32)
    ids = sample_from_logits(_repeated(), seed=0, uniform=True, disallow_ids=disallow)
    freq = _frequencies(ids)
    assert freq[0] == 0.0
    np.testing.assert_allclose(freq[1:], np.full(4, 0.25), atol=0.025)


def test_seeds_int_tensor_and_generator():
    logits = np.random.default_rng(0).normal(size=(2, 8, 11)).astype(np.float32)
    a, b = sample_from_logits(logits, seed=7), sample_from_logits(logits, seed=7)
    np.testing.assert_array_equal(a, b)
    assert np.any(np.asarray(a) != np.asarray(sample_from_logits(logits, seed=8)))

    t1 = sample_from_logits(logits, seed=tf.constant([5, 9], tf.int32))
    t2 = sample_from_logits(logits, seed=tf.constant([5, 9], tf.int32))
    t3 = sample_from_logits(logits, seed=tf.constant([5, 10], tf.int32))
    np.testing.assert_array_equal(t1, t2)
    assert np.any(np.asarray(t1) != np.asarray(t3))

    gen_a, gen_b = keras.random.SeedGenerator(4), keras.random.SeedGenerator(4)
    first, second = sample_from_logits(logits, gen_a), sample_from_logits(logits, gen_a)
    assert np.any(np.asarray(first) != np.asarray(second))  # the stream advances
    np.testing.assert_array_equal(first, sample_from_logits(logits, gen_b))


def test_tensor_seed_under_xla():
    logits = np.random.default_rng(1).normal(size=(2, 4, 7)).astype(np.float32)

    @tf.function(jit_compile=True)
    def sample(seed):
        return sample_from_logits(logits, seed, temperature=0.7)

    seed = tf.constant([1, 2], tf.int32)
    np.testing.assert_array_equal(sample(seed), sample(seed))
    assert np.any(np.asarray(sample(seed)) != np.asarray(sample(tf.constant([1, 3]))))
    # Note: TF's stateless RNG may pick another algorithm under XLA, so the
    # jitted draw need not equal the eager one for the same seed.


def test_no_gradient_through_the_sample():
    logits = tf.constant(np.random.default_rng(2).normal(size=(2, 3, 6)).astype(np.float32))
    with tf.GradientTape() as tape:
        tape.watch(logits)
        ids = sample_from_logits(logits, seed=0)
        downstream = tf.reduce_sum(tf.one_hot(ids, 6) * 3.0) + tf.reduce_sum(
            tf.cast(ids, tf.float32)
        )
    grad = tape.gradient(downstream, logits)
    assert grad is None or not np.any(grad.numpy())
