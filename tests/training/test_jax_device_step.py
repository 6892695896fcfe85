"""What the JAX pre-training step does with its buffers: the batches put on the device
one call ahead (--jax_device_prefetch) and the state donated to the compiled call
change neither the batches nor the results (backends/jax.py).

The training runs are a KERAS_BACKEND=jax subprocess, as in test_jax_runtime.py.
"""

import importlib.util
import json

import numpy as np
import pytest

from tests.training.test_jax_runtime import config_json, run_python

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                reason="jax is not installed (pip install 'jax[cpu]')")


def test_device_batches_stage_one_call_ahead_and_take_no_more_than_the_calls_use():
    from electra_tf.training.backends.jax import DeviceBatches

    events = []

    def source():
        for i in range(100):
            events.append(f"take {i}")
            yield {"input_ids": np.full((2, 3), i, np.int32)}

    sizes = [2, 2, 1]
    for ahead, expected in [
            (0, ["take 0", "take 1", "call 0", "take 2", "take 3", "call 1", "take 4",
                 "call 2"]),
            (1, ["take 0", "take 1", "take 2", "take 3", "call 0", "take 4", "call 1",
                 "call 2"])]:
        events.clear()
        it = source()
        got = []
        for i, batches in enumerate(DeviceBatches(it, sizes, ahead=ahead)):
            events.append(f"call {i}")
            got.append([int(np.asarray(b["input_ids"])[0, 0]) for b in batches])
        assert got == [[0, 1], [2, 3], [4]], ahead
        assert events == expected, ahead
        assert next(it)["input_ids"][0, 0] == 5  # nothing taken beyond the calls' batches
    # the iterator's own end comes out as it is (the loop tells it from its other errors)
    with pytest.raises(StopIteration):
        next(DeviceBatches(iter([]), [1], ahead=1))


# Three trainers from the same seed on the same records, 3 steps per call, chunks of 4
# (a call of 3, then a remainder call of 1) and 1: as they are, with
# jax_device_prefetch, and with the compiled calls jitted without donation. (3 steps per
# call, as test_jax_runtime.py's slow runs and test_jax_training_options.py's
# test_jax_steps_per_call_match_one_step_per_call[1-3] of the same config, which run
# before this test in its process: the plain and prefetching trainers' programs come
# from the compilation cache; only the undonated ones compile.) Prints each
# one's chunk results, weights, the order of batch reads and calls, and how much of the
# state handed to the first call was donated.
DEVICE_STEP = """
    import dataclasses, functools, json, sys
    import jax
    import numpy as np
    from electra_tf.core.config import PretrainingConfig, PretrainingRun
    from electra_tf.training.backends.jax import JaxPretraining, training_state
    spec = json.loads(sys.argv[1])
    out = {}
    for name, overrides in [("plain", {}), ("prefetch", {"jax_device_prefetch": True}),
                            ("undonated", {})]:
        t = JaxPretraining(PretrainingConfig(**spec["config"]),
                           PretrainingRun(**{**spec["run"], "jax_steps_per_call": 3, **overrides}))
        events = []
        compiled = t._compiled_steps
        if name == "undonated":
            cache = {}
            def compiled(phase, n):
                if (phase.name, n) not in cache:
                    cache[phase.name, n] = jax.jit(functools.partial(t._steps_fn, phase, n))
                return cache[phase.name, n]
        def logged(phase, n, compiled=compiled):
            def call(*args):
                events.append(f"call {n}")
                return compiled(phase, n)(*args)
            return call
        t._compiled_steps = logged
        batches = t.make_train_iterator(0)
        def counted():
            while True:
                events.append("take")
                yield next(batches)
        it = counted()
        first_state = jax.tree.leaves(training_state(t.model, t.optimizer))
        results = [t.train_steps(it, 4), t.train_steps(it, 1)]
        out[name] = {
            "results": results, "events": events,
            # the share of the state's bytes the first call took (JAX 0.11 on a CPU keeps
            # one int32 scalar)
            "donated": sum(x.nbytes for x in first_state if x.is_deleted())
                       / sum(x.nbytes for x in first_state),
            "weights": [np.asarray(v.value).tolist() for v in
                        list(t.model.trainable_variables) + list(t.optimizer.variables)]}
    print(json.dumps(out))
"""


@pytest.mark.slow
def test_prefetched_and_undonated_steps_train_as_the_plain_step(tiny_records, tmp_path):
    spec = config_json(tiny_records, tmp_path / "m")  # dropout and sampling on
    out = json.loads(run_python(DEVICE_STEP, "jax", spec).splitlines()[-1])
    plain = out["plain"]
    # chunk 4: a call of 3 and a remainder call of 1; chunk 1: one call of 1
    assert plain["events"] == ["take", "take", "take", "call 3", "take", "call 1",
                               "take", "call 1"]
    # one call ahead: the next call's batches are read (and put on the device) first,
    # within the chunk (the next chunk's only once it is asked for)
    assert out["prefetch"]["events"] == ["take", "take", "take", "take", "call 3", "call 1",
                                         "take", "call 1"]
    assert out["undonated"]["events"] == plain["events"]
    assert plain["donated"] > 0.99 and out["prefetch"]["donated"] > 0.99
    assert out["undonated"]["donated"] == 0
    for name in ("prefetch", "undonated"):  # the same program on the same batches
        assert out[name]["results"] == plain["results"], name
        for a, b in zip(out[name]["weights"], plain["weights"], strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert np.isfinite(plain["results"][-1]["loss"])
