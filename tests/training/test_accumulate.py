"""Gradient accumulation's micro-batches run one at a time (backends/tensorflow.accumulate)."""

import numpy as np
import tensorflow as tf

from electra_tf.training.backends.tensorflow import accumulate


@tf.function(autograph=False)
def fwd_bwd(batch, seed):
    return {"loss": tf.reduce_sum(batch["x"]) + tf.cast(seed, tf.float32)}, [batch["x"] * 2.0]


def _whiles(graph):
    return [op for op in graph.get_operations() if op.type in ("While", "StatelessWhile")]


def test_micro_batches_run_in_a_loop_of_one_iteration_at_a_time():
    """Unrolled, the k calls shared no data and TensorFlow's inter-op threads ran several
    at once: a step's peak memory grew with k (1.6x one micro-batch's at k=4, 2x at 8;
    benchmarks/memory_accumulation.md), and control dependencies had not stopped it."""
    @tf.function(autograph=False)
    def step(a, b, c):
        return accumulate(fwd_bwd, ({"x": a}, {"x": b}, {"x": c}), lambda i: i * 10)

    x = [tf.constant([1.0, 2.0]) * (i + 1) for i in range(3)]
    losses, grads = step(*x)
    assert float(losses["loss"]) == 3 + 6 + 9 + 0 + 10 + 20
    np.testing.assert_allclose(grads[0].numpy(), [12.0, 24.0])
    (loop,) = _whiles(step.get_concrete_function(*x).graph)
    assert loop.get_attr("parallel_iterations") == 1


def test_one_micro_batch_is_one_call():
    @tf.function(autograph=False)
    def step(a):
        return accumulate(fwd_bwd, ({"x": a},), lambda i: tf.constant(7))

    losses, grads = step(tf.constant([1.0, 2.0]))
    assert float(losses["loss"]) == 10.0
    assert not _whiles(step.get_concrete_function(tf.constant([1.0, 2.0])).graph)


def test_an_output_of_no_fixed_shape_is_named():
    """The loop starts from zeros of the outputs' shapes (the pipeline's batches have
    one): an output of unknown size is one line, not TensorFlow's conversion error."""
    import pytest

    @tf.function(autograph=False)
    def ragged(batch, seed):
        return {"loss": tf.reduce_sum(batch["x"])}, [tf.reduce_sum(batch["x"], axis=1)]

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None, 2]),
                                                   tf.TensorSpec([None, 2])])
    def step(a, b):
        return accumulate(ragged, ({"x": a}, {"x": b}), lambda i: i)

    with pytest.raises(ValueError, match=r"^gradient accumulation sums outputs of fixed "
                                         r"shapes; output 1 \(of tf.nest.flatten's\) has shape "
                                         r"\(None,\)$"):
        step.get_concrete_function()
