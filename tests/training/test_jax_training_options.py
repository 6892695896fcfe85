"""The JAX loop's options and phases: steps per call, gradient accumulation,
objectives and algorithms that train part of the model (jax_training.py).

Each JAX run is a subprocess with KERAS_BACKEND=jax, as in test_jax_runtime.py.
"""

import importlib.util
import json

import numpy as np
import pytest
from helpers import TINY_MODEL, TINY_NO_DROPOUT

from tests.training.test_jax_runtime import (
    OBJECTIVE_LOSSES,
    config_json,
    run_python,
    train,
)

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                reason="jax is not installed (pip install 'jax[cpu]')")

def run_train_steps(spec: dict, overrides: dict, chunks: list, out: str, weights: str,
                    evaluate: bool) -> dict:
    """Runs train_steps() from step 0, in chunks of the given sizes, once per set of
    overrides (of PretrainingRun or PretrainingConfig fields), each a fresh trainer (the
    same seed: the same initial weights), on this process's backend's loop.

    weights: "save" writes each trainer's initial weights to OUT.weights.h5, a path
    loads them, "" neither. Writes the trainable and optimizer variables of each to
    OUT (npz); returns the chunks' results (and, with `evaluate`, a 1-batch
    evaluation's last).
    """
    import dataclasses

    import keras

    from electra_tf.core.config import PretrainingConfig, PretrainingRun

    backend = keras.backend.backend()
    run_fields = {f.name for f in dataclasses.fields(PretrainingRun)}
    arrays, results = {}, {}
    for name, values in overrides.items():
        run = PretrainingRun(**spec["run"], **{k: v for k, v in values.items() if k in run_fields})
        config = PretrainingConfig(**{**spec["config"], **{k: v for k, v in values.items()
                                                           if k not in run_fields}})
        if backend == "jax":
            from electra_tf.training.backends.jax import JaxPretraining
            t = JaxPretraining(config, run)
        else:
            from electra_tf.training.backends.tensorflow import TensorFlowPretraining
            t = TensorFlowPretraining(config, run)
        if weights == "save":
            t.model.save_weights(out + ".weights.h5")
        elif weights:
            t.model.load_weights(weights)
        it = t.make_train_iterator(0)
        results[name] = [t.train_steps(it, n) for n in chunks]
        if evaluate:
            results[name].append(t.evaluate(1))
        assert t.step == sum(chunks), t.step
        for i, v in enumerate(list(t.model.trainable_variables) + list(t.optimizer.variables)):
            arrays[f"{name}/{i:04d}"] = np.asarray(v.value if backend == "jax" else v.numpy())
    np.savez(out, **arrays)
    return results


TRAIN_STEPS = """
    import json, sys
    from tests.training.test_jax_training_options import run_train_steps
    spec, overrides, chunks = (json.loads(a) for a in sys.argv[1:4])
    print(json.dumps(run_train_steps(spec, overrides, chunks, sys.argv[4], sys.argv[5],
                                     sys.argv[6:] == ["eval"])))
"""


def train_steps(spec, overrides, chunks, out, backend="jax", weights="", evaluate=False):
    """{name: [chunk results]}, {name: [trainable + optimizer variables]}: a JAX process,
    or this one for "tensorflow" (the suite's backend)."""
    if backend == "tensorflow":
        results = json.loads(json.dumps(run_train_steps(
            json.loads(spec), overrides, chunks, str(out), weights, evaluate)))
    else:
        results = json.loads(run_python(TRAIN_STEPS, backend, spec, json.dumps(overrides),
                                        json.dumps(chunks), str(out), weights,
                                        *(["eval"] if evaluate else [])).splitlines()[-1])
    with np.load(out) as data:
        arrays = {k: data[k] for k in data.files}
    return results, {name: [arrays[k] for k in sorted(arrays) if k.startswith(name + "/")]
                     for name in overrides}


def assert_same_results(a: list, b: list, name: str):
    """Chunk results equal to float32 rounding: the loss a scan reports may be
    fused differently from the one-step program's (the weights are identical)."""
    for x, y in zip(a, b, strict=True):
        assert set(x) == set(y), name
        for key in x:
            assert x[key] == pytest.approx(y[key], rel=1e-6, abs=1e-7), f"{name}: {key}"


# (accumulation, steps): the first compiles no remainder step; the second runs a call
# of 3, then of 1. Slow: the default suite's JAX resume test (test_jax_runtime.py)
# trains a run at 3 steps per call beside one at 1 (to float rounding).
@pytest.mark.slow
@pytest.mark.parametrize("accumulation,steps", [(1, 3), (2, 4)])
def test_jax_steps_per_call_match_one_step_per_call(tiny_records, tmp_path, accumulation, steps):
    # Dropout and sampling on: every step's seeds must be the one-step-per-call ones.
    spec = config_json(tiny_records, tmp_path / "m")
    k = {"gradient_accumulation_steps": accumulation}
    overrides = {"1": k, "3": {**k, "jax_steps_per_call": 3}}
    results, weights = train_steps(spec, overrides, [steps], tmp_path / "out.npz")
    assert_same_results(results["3"], results["1"], "3")
    for a, b in zip(weights["3"], weights["1"], strict=True):
        np.testing.assert_array_equal(a, b)
    assert np.isfinite(results["1"][0]["loss"])


# Steps per call and accumulation over two devices: test_jax_runtime.py's
# test_jax_data_parallel_over_two_devices_matches_one.


# Slow: the default suite holds the JAX/TF parity of the ELECTRA step
# (test_jax_runtime.py) and of several steps per call (above).
@pytest.mark.slow
def test_jax_bert_mlm_and_gradient_accumulation_match_the_tf_loop(tiny_records, tmp_path):
    # bert_mlm draws nothing at random (no sampling; dropout off), so both loops
    # take the same steps from the same weights and batches: G's variables only,
    # accumulation over 2 micro-batches, clipping and AdamW.
    spec = config_json(tiny_records, tmp_path / "m", objective="bert_mlm",
                       model_hparam_overrides=TINY_NO_DROPOUT)
    overrides = {"k1": {}, "k2": {"gradient_accumulation_steps": 2}}
    tf_results, tf_vars = train_steps(spec, overrides, [1, 2], tmp_path / "tf.npz",
                                      backend="tensorflow", weights="save")
    jax_results, jax_vars = train_steps(spec, overrides, [1, 2], tmp_path / "jax.npz",
                                        weights=str(tmp_path / "tf.npz.weights.h5"))
    for name in overrides:
        for tf_chunk, jax_chunk in zip(tf_results[name], jax_results[name], strict=True):
            assert set(tf_chunk) == set(jax_chunk), name
            for key, value in tf_chunk.items():
                if key != "sequences_per_second":
                    assert jax_chunk[key] == pytest.approx(value, rel=1e-4, abs=1e-6), (
                        name, key)
        untouched = 0
        for a, b in zip(tf_vars[name], jax_vars[name], strict=True):
            if a.dtype.kind == "f" and not a.any():  # e.g. the slots of variables not trained
                np.testing.assert_array_equal(b, 0, err_msg=name)
                untouched += 1
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6, err_msg=name)
        # bert_mlm trains no RTD head (4 variables): their 8 optimizer slots stay zero.
        assert untouched >= 8, untouched
    # The first step's loss is at the same weights: accumulation averages two
    # micro-batches' losses, which differs from the whole batch's.
    assert tf_results["k2"][0]["loss"] != pytest.approx(tf_results["k1"][0]["loss"], rel=1e-4)


@pytest.mark.slow
def test_jax_trains_every_objective(tiny_records, tmp_path):
    """Each objective's step (the path the efficiency study runs on GPU), and
    its eval, on the JAX loop; parity of their losses with TF is in
    test_jax_runtime.py."""
    from electra_tf.training.reporting import SAME_QUANTITY

    spec = config_json(tiny_records, tmp_path / "m")
    objectives = [o for o in OBJECTIVE_LOSSES if o != "electra"]  # electra: everywhere else
    overrides = {o: {"objective": o} for o in objectives}
    overrides["adversarial"] = {"training_algorithm": "adversarial"}  # REINFORCE + baseline
    terms = {**OBJECTIVE_LOSSES, "adversarial": {"loss", "mlm_loss", "disc_loss",
                                                 "reinforce_loss", "baseline_loss"}}
    results, _ = train_steps(spec, overrides, [2], tmp_path / "out.npz", evaluate=True)
    for name in overrides:
        trained, evaluation = results[name]
        assert terms[name] <= set(trained), name
        for term in terms[name]:
            assert np.isfinite(trained[term]), (name, term)
        # eval: the configured objective, its loss terms under the original's eval names
        # where those measure the same quantity (mlm_loss -> masked_lm_loss)
        for term in OBJECTIVE_LOSSES[name if name in OBJECTIVE_LOSSES else "electra"]:
            term = SAME_QUANTITY.get(term, term)
            assert np.isfinite(evaluation[term]), (name, term)
        assert trained["grad_norm"] > 0, name


# Equal sizes, as two-stage training needs (G takes 4h FFN and h/64 heads).
SIZED_LIKE_G = {**TINY_MODEL, "num_attention_heads": 1, "intermediate_size": 64}


@pytest.mark.slow
def test_jax_two_stage_crosses_the_switch_and_resumes_exactly(tiny_records, tmp_path):
    def spec(name):
        return config_json(tiny_records, tmp_path / name, training_algorithm="two_stage",
                           generator_hidden_size=1.0, model_hparam_overrides=SIZED_LIKE_G)

    straight = train(spec("a"), [None])
    # Stopped at the switch (D not yet initialized from G), then one step after it.
    resumed = train(spec("b"), [3, 4, None])
    assert straight["step"] == resumed["step"] == 6
    assert straight["final"] == resumed["final"] and np.isfinite(straight["final"]["loss"])
    for a, b in zip(straight["weights"], resumed["weights"], strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    def checkpoint(step):
        with np.load(tmp_path / "b" / "checkpoints" / f"jax-ckpt-{step}.npz") as data:
            return {k: data[k] for k in data.files}

    at_switch, after_one, final = checkpoint(3), checkpoint(4), checkpoint(6)
    g_names = [k for k in final if k.startswith("model/generator/")]
    for name in g_names:  # G frozen in the second stage
        np.testing.assert_array_equal(final[name], at_switch[name], err_msg=name)
    encoder = [k for k in g_names if "/encoder/" in k and "seed_generator" not in k]

    def distance_d_to_g(ckpt):
        return max(np.max(np.abs(ckpt[k.replace("/generator/", "/discriminator/")] - ckpt[k]))
                   for k in encoder)

    # D starts stage 2 from G's encoder: one AdamW step away (< 10 lr), not before.
    assert distance_d_to_g(after_one) < 1e-2 < distance_d_to_g(at_switch)

    # The folder loads, as a TF run's does.
    from electra_tf import folders

    discriminator, vocab = folders.pretraining.load_discriminator(str(tmp_path / "b"))
    # the folder carries its own copy of the vocabulary
    assert vocab == str(tmp_path / "b" / "vocab.txt") and discriminator.count_params() > 0
    assert open(vocab).read() == open(tiny_records["vocab"]).read()


# Ctrl-C inside train_steps, where the step has donated its input buffers:
# (a) between two compiled calls (the iterator raises), (b) after a call took
# the state and before it returned (the call runs, then raises). Then the host
# loop's save. Prints the steps and whether the saved weights equal a straight
# run's after the same number of finished steps.
INTERRUPTED = """
    import json, os, sys
    import numpy as np
    from electra_tf.core.config import PretrainingConfig, PretrainingRun
    from electra_tf.training.backends.jax import JaxPretraining
    spec = json.loads(sys.argv[1])

    def trainer(model_dir):
        return JaxPretraining(PretrainingConfig(**spec["config"]),
                              PretrainingRun(**{**spec["run"], "model_dir": model_dir}))

    def weights(t):
        return [np.asarray(v.value) for v in t.model.trainable_variables]

    out = {}
    straight = trainer(sys.argv[2] + "/straight")
    it = straight.make_train_iterator(0)
    straight.train_steps(it, 2)
    after_2 = weights(straight)
    straight.train_steps(it, 1)
    after_3 = weights(straight)

    # (a) the iterator raises before the 4th batch: 3 calls finished.
    t = trainer(sys.argv[2] + "/a")
    batches = t.make_train_iterator(0)
    def interrupting(n=[0]):
        while True:
            n[0] += 1
            if n[0] == 4:
                raise KeyboardInterrupt
            yield next(batches)
    try:
        t.train_steps(interrupting(), 5)
    except KeyboardInterrupt:
        out["a_step"] = t.step
    out["a_path"] = bool(t.save_checkpoint())
    out["a_same"] = all(np.array_equal(x, y) for x, y in zip(weights(t), after_3))

    # (b) 2 steps saved, then a call takes the state and the interrupt lands.
    t = trainer(sys.argv[2] + "/b")
    it = t.make_train_iterator(0)
    t.train_steps(it, 2)
    t.save_checkpoint()
    real = t._compiled_steps
    def interrupted_call(phase, n):
        def call(*args):
            real(phase, n)(*args)  # donates args[0]
            raise KeyboardInterrupt
        return call
    t._compiled_steps = interrupted_call
    try:
        t.train_steps(it, 1)
    except KeyboardInterrupt:
        out["b_step"] = t.step
    out["b_same"] = all(np.array_equal(x, y) for x, y in zip(weights(t), after_2))
    out["b_saved"] = t.save_checkpoint()
    out["b_files"] = sorted(os.listdir(sys.argv[2] + "/b/checkpoints"))
    print(json.dumps(out))
"""


# Slow: the default suite holds the TF loop's Ctrl-C tests and the JAX loop's exact
# resume (test_jax_runtime.py).
@pytest.mark.slow
def test_jax_ctrl_c_inside_train_steps_leaves_whole_variables(tiny_records, tmp_path):
    spec = config_json(tiny_records, tmp_path / "unused", model_hparam_overrides=TINY_NO_DROPOUT)
    out = json.loads(run_python(INTERRUPTED, "jax", spec, str(tmp_path)).splitlines()[-1])
    # (a) every finished step is kept, and saved.
    assert out["a_step"] == 3 and out["a_same"] and out["a_path"], out
    # (b) the donated state is gone: back to the checkpoint of step 2 (nothing to save anew).
    assert out["b_step"] == 2 and out["b_same"], out
    assert out["b_saved"].endswith("jax-ckpt-2.npz") and out["b_files"] == ["jax-ckpt-2.npz"], out


def test_more_devices_than_jax_sees_are_refused():
    """--num_devices=2 on one device had trained on one, the record saying 2."""
    out = run_python("""
        from electra_tf.core.errors import ConfigError
        from electra_tf.training.backends.jax import data_parallel
        try:
            data_parallel("default", 2, {})
        except ConfigError as e:
            print(e)
        """, "jax")
    assert out.strip().splitlines()[-1] == (
        "--num_devices=2, but JAX sees 1 cpu device(s); a CPU shows N with XLA_FLAGS="
        "--xla_force_host_platform_device_count=N set before the run; give --num_devices=1 "
        "or less (0: all)")
