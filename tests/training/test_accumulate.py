"""Gradient accumulation's micro-batches run one at a time (backends/tensorflow.accumulate)."""

import numpy as np
import tensorflow as tf

from electra_tf.training.backends.tensorflow import accumulate


def _calls(graph, name):
    return [op for op in graph.get_operations()
            if op.type in ("PartitionedCall", "StatefulPartitionedCall")
            and name in op.get_attr("f").name]


def test_each_micro_batch_waits_for_the_running_total():
    """The k calls share no data: without a dependency TensorFlow's inter-op threads ran
    several at once, and a step's peak memory grew with k (1.4x one micro-batch's at k=4)."""
    @tf.function(autograph=False)
    def fwd_bwd(batch, seed):
        return {"loss": tf.reduce_sum(batch) + tf.cast(seed, tf.float32)}, [batch * 2.0]

    @tf.function(autograph=False)
    def step(a, b, c):
        return accumulate(fwd_bwd, (a, b, c), lambda i: tf.constant(i))

    x = [tf.constant([1.0, 2.0]) * (i + 1) for i in range(3)]
    losses, grads = step(*x)
    assert float(losses["loss"]) == 3 + 6 + 9 + 0 + 1 + 2
    np.testing.assert_allclose(grads[0].numpy(), [12.0, 24.0])

    graph = step.get_concrete_function(*x).graph
    calls = _calls(graph, "fwd_bwd")
    assert len(calls) == 3
    for before, call in zip(calls, calls[1:]):  # (TensorFlow puts the control input on
        # the first op made in the dependency's scope: here, the seed each call reads)
        assert before in _ancestors(call), call.name
    assert calls[1] not in _ancestors(calls[0])


def _ancestors(op):  # op itself and every op it reads or waits for
    seen, todo = {op}, [op]
    while todo:
        o = todo.pop()
        for t in list(o.inputs) + list(o.control_inputs):
            p = t.op if hasattr(t, "op") else t
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return seen
