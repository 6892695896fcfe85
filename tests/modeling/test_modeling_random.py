"""Tensor seeds for keras.random: eager, tf.function and XLA."""

import keras
import numpy as np
import tensorflow as tf

from electra_tf.modeling.random import TensorSeed, fold_seed, offset_seed, tensor_seed


def _uniform(seed, offset=0):
    return keras.random.uniform((4, 5), seed=tensor_seed(seed, offset))


def test_tensor_seed_is_a_stateless_seed_generator():
    seed = tf.constant([3, 4])
    gen = tensor_seed(seed)
    assert isinstance(gen, keras.random.SeedGenerator)
    assert not isinstance(getattr(gen, "state", None), keras.Variable)
    a = keras.random.uniform((8,), seed=gen)
    b = keras.random.uniform((8,), seed=gen)  # The same object draws the same values.
    np.testing.assert_array_equal(a, b)


def test_same_seed_same_values_other_seed_or_offset_differs():
    a = _uniform(tf.constant([1, 2]))
    np.testing.assert_array_equal(a, _uniform(tf.constant([1, 2])))
    assert not np.allclose(a, _uniform(tf.constant([1, 3])))
    assert not np.allclose(a, _uniform(tf.constant([1, 2]), offset=1))


def test_tensor_seed_in_tf_function_and_xla():
    seed = tf.constant([7, 9], dtype=tf.int32)
    eager = _uniform(seed, 2)
    np.testing.assert_array_equal(eager, tf.function(lambda s: _uniform(s, 2))(seed))
    # XLA may pick another stateless RNG algorithm than the TF kernels, so the
    # values differ from eager ones, but they are a deterministic function of the seed.
    jitted = tf.function(lambda s: _uniform(s, 2), jit_compile=True)
    np.testing.assert_array_equal(jitted(seed), jitted(tf.identity(seed)))
    # A traced function must not freeze the seed: a new seed gives new values.
    fn = tf.function(lambda s: keras.random.dropout(tf.ones((64,)), 0.5, seed=TensorSeed(s)),
                     jit_compile=True)
    assert not np.array_equal(fn(seed), fn(seed + 1))


def test_fold_seed_decorrelates_structured_seeds():
    # Plain offsets collide for seeds built as [run, step]: [0, 1] + 0 == [0, 0] + 1.
    np.testing.assert_array_equal(offset_seed([0, 1], 0), offset_seed([0, 0], 1))
    folded = {tuple(np.asarray(fold_seed(tf.constant([0, step]), salt)))
              for step in range(4) for salt in range(3)}
    assert len(folded) == 12
    np.testing.assert_array_equal(fold_seed(tf.constant([5, 6]), 1),
                                  fold_seed(tf.constant([5, 6]), 1))
    assert fold_seed(tf.constant([5, 6])).dtype == tf.int32
