"""--optimizer=lamb: NVIDIA's TF2 ELECTRA LAMB (tfa's update) against a NumPy reference,
its exclusions, its schedule, its restart at a second phase, and the JAX backend."""

import json

import keras
import numpy as np
import pytest
from helpers import run_jax_script

from electra_tf.training.optimization import (
    ElectraLamb,
    WarmupPolynomialDecay,
    create_optimizer,
)

# Hand-made variables with ELECTRA-like paths: a kernel, a LayerNorm gamma, a bias, and a
# kernel at zero (its trust ratio is 1: ||w|| = 0).
_SHAPES = {"encoder/layer_0/dense/kernel": (3, 4), "encoder/layer_0/LayerNorm/gamma": (4,),
           "encoder/layer_0/dense/bias": (4,), "heads/zero/kernel": (2, 2)}
_DECAYS = {"encoder/layer_0/dense/kernel": True, "encoder/layer_0/LayerNorm/gamma": False,
           "encoder/layer_0/dense/bias": False, "heads/zero/kernel": True}


def _initial(seed=0):
    rng = np.random.default_rng(seed)
    out = {p: rng.normal(size=s).astype(np.float32) for p, s in _SHAPES.items()}
    out["heads/zero/kernel"][:] = 0.0
    return out


def _grads(steps, seed=1):
    rng = np.random.default_rng(seed)
    return [{p: rng.normal(size=s).astype(np.float32) for p, s in _SHAPES.items()}
            for _ in range(steps)]


def reference_lamb(weights, grads, lrs, b1=0.878, b2=0.974, eps=1e-6, wd=0.01,
                   skip_adaptive=True, restart=None):
    """tensorflow_addons.optimizers.LAMB._resource_apply_dense, as NVIDIA calls it
    (exclude_from_weight_decay = LayerNorm and bias; exclude_from_layer_adaptation the
    same with --skip_adaptive, else none), in float64; t starts again at `restart`
    (NVIDIA's phase 2 resets the optimizer's iterations, keeping m and v)."""
    w = {p: v.astype(np.float64) for p, v in weights.items()}
    m = {p: np.zeros_like(v) for p, v in w.items()}
    v_ = {p: np.zeros_like(v) for p, v in w.items()}
    for step, (g, lr) in enumerate(zip(grads, lrs)):
        t = step + 1 if restart is None or step < restart else step - restart + 1
        for p in w:
            m[p] = m[p] * b1 + g[p] * (1 - b1)
            v_[p] = v_[p] * b2 + g[p] ** 2 * (1 - b2)
            u = (m[p] / (1 - b1 ** t)) / (np.sqrt(v_[p] / (1 - b2 ** t)) + eps)
            if _DECAYS[p]:
                u = u + wd * w[p]
            ratio = 1.0
            if _DECAYS[p] or not skip_adaptive:
                wn, un = np.linalg.norm(w[p]), np.linalg.norm(u)
                ratio = wn / un if wn > 0 and un > 0 else 1.0
            w[p] = w[p] - ratio * lr * u
    return w


def _run_ours(weights, grads, optimizer):
    variables = [keras.Variable(weights[p], name=p.split("/")[-1]) for p in _SHAPES]
    for var, p in zip(variables, _SHAPES):  # the Keras path the exclusions read
        object.__setattr__(var, "_path", p)
    optimizer.build(variables)
    lrs = []
    for g in grads:
        lrs.append(float(keras.ops.convert_to_numpy(optimizer.learning_rate)))
        optimizer.apply_gradients([(keras.ops.convert_to_tensor(g[p]), var)
                                   for p, var in zip(_SHAPES, variables)])
    return {p: keras.ops.convert_to_numpy(v) for p, v in zip(_SHAPES, variables)}, lrs


@pytest.mark.parametrize("skip_adaptive", [True, False])
def test_lamb_matches_tfa_update_with_exclusions(skip_adaptive):
    weights, grads = _initial(), _grads(6)
    opt = create_optimizer(1e-2, 10, 3, weight_decay_rate=0.01, clip_norm=None,
                           optimizer="lamb", skip_adaptive=skip_adaptive)
    assert isinstance(opt, ElectraLamb) and (opt.beta_1, opt.beta_2, opt.epsilon) == (
        0.878, 0.974, 1e-6)
    ours, lrs = _run_ours(weights, grads, opt)
    want = reference_lamb(weights, grads, lrs, skip_adaptive=skip_adaptive)
    for p in _SHAPES:
        np.testing.assert_allclose(ours[p], want[p], rtol=1e-5, atol=1e-6, err_msg=p)
    # the exclusions did something: with decay and adaptation on every variable, the
    # LayerNorm's weights end elsewhere
    everything = reference_lamb(weights, grads, lrs, skip_adaptive=False)
    if skip_adaptive:
        assert not np.allclose(ours["encoder/layer_0/LayerNorm/gamma"],
                               everything["encoder/layer_0/LayerNorm/gamma"], atol=1e-6)
    assert opt._decays == [True, False, False, True]
    assert opt._adapts == [True, not skip_adaptive, not skip_adaptive, True]


def test_lamb_bias_correction_restarts_at_the_second_phase():
    """NVIDIA's phase 2 resets iterations (not m, v): t counts from 1 again at the stage."""
    weights, grads = _initial(2), _grads(6, seed=3)
    opt = create_optimizer(1e-2, 6, 1, clip_norm=None, optimizer="lamb",
                           schedule_restarts=(3,), stage_rates=((5e-3, 2),))
    ours, lrs = _run_ours(weights, grads, opt)
    want = reference_lamb(weights, grads, lrs, restart=3)
    for p in _SHAPES:
        np.testing.assert_allclose(ours[p], want[p], rtol=1e-5, atol=1e-6, err_msg=p)
    # phase 2's own warmup (2 steps to 5e-3) from lr 0 at its first step
    assert lrs[3:5] == pytest.approx([0.0, 2.5e-3], abs=1e-9)
    no_restart = reference_lamb(weights, grads, lrs)
    assert not np.allclose(ours["encoder/layer_0/dense/kernel"],
                           no_restart["encoder/layer_0/dense/kernel"], atol=1e-6)


@pytest.mark.parametrize("step,expected", [
    (0, 0.0), (5, 0.5 * 6e-3),        # linear warmup to the peak
    (10, 6e-3),                       # the peak at the warmup's end (not 6e-3 * 0.9)
    (55, 6e-3 * 0.5 ** 0.5),          # then sqrt decay over the 90 steps left
    (100, 0.0), (120, 0.0)])
def test_nvidia_schedule_warmup_then_decay(step, expected):
    """NVIDIA's WarmUp(PolynomialDecay(decay_steps=T - w, power=0.5))."""
    schedule = WarmupPolynomialDecay(6e-3, 100, 10, power=0.5, decay_after_warmup=True)
    assert float(schedule(step)) == pytest.approx(expected, abs=1e-9)
    again = WarmupPolynomialDecay.from_config(schedule.get_config())
    assert float(again(step)) == pytest.approx(expected, abs=1e-9)


def test_phase2_schedule_has_its_own_rate_and_warmup():
    schedule = WarmupPolynomialDecay(6e-3, 120, 10, power=0.5, restarts=(100,),
                                     stage_rates=((4e-3, 5),), decay_after_warmup=True)
    for step, expected in [(99, 6e-3 * (1 / 90) ** 0.5), (100, 0.0), (102, 4e-3 * 0.4),
                           (105, 4e-3), (110, 4e-3 * (2 / 3) ** 0.5)]:
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-5, abs=1e-9), step
    # the electra schedule takes per-stage rates too
    plain = WarmupPolynomialDecay(1e-3, 100, 10, restarts=(50,), stage_rates=((2e-3, 0),))
    assert float(plain(60)) == pytest.approx(2e-3 * 0.8)
    with pytest.raises(ValueError):
        WarmupPolynomialDecay(1e-3, 100, 10, restarts=(50,), stage_rates=((1e-3, 1),) * 2)


def test_lamb_refuses_layerwise_decay_and_config_round_trips():
    with pytest.raises(ValueError, match="layer-wise"):
        create_optimizer(1e-3, 10, 1, optimizer="lamb", layerwise_lr_decay=0.8, n_layers=2)
    opt = create_optimizer(1e-3, 10, 1, optimizer="lamb", skip_adaptive=False,
                           schedule_restarts=(5,), beta_1=0.9)
    again = ElectraLamb.from_config(opt.get_config())
    assert (again.beta_1, again.skip_adaptive, again.stage_starts) == (0.9, False, (5,))


def test_the_decay_power_unset_is_the_optimizers():
    """NVIDIA's --lr_decay_power defaults to 0.5 (LAMB); the original's decay is linear."""
    from electra_tf.core.config import PretrainingConfig
    from electra_tf.training.optimization import pretraining_optimizer

    def power(**kw):
        config = PretrainingConfig(model_size="tiny", num_train_steps=10, **kw)
        return pretraining_optimizer(config, [keras.Variable(np.zeros(2, np.float32))]
                                     )._learning_rate.power

    assert (power(optimizer="lamb"), power(), power(optimizer="lamb", lr_decay_power=1.0)) == (
        0.5, 1.0, 1.0)
    assert create_optimizer(1e-3, 10, 1, optimizer="lamb")._learning_rate.power == 0.5


_JAX_SCRIPT = r"""
import json, sys
import numpy as np
import keras
from electra_tf.training.optimization import create_optimizer
from tests.test_optimization_lamb import _initial, _grads, _run_ours
weights, grads = _initial(), _grads(6)
opt = create_optimizer(1e-2, 6, 1, clip_norm=None, optimizer="lamb",
                       schedule_restarts=(3,), stage_rates=((5e-3, 2),))
ours, lrs = _run_ours(weights, grads, opt)
# and as the JAX loop applies it: stateless, on explicit state
opt2 = create_optimizer(1e-2, 6, 1, clip_norm=None, optimizer="lamb",
                        schedule_restarts=(3,), stage_rates=((5e-3, 2),))
variables = [keras.Variable(weights[p]) for p in weights]
for var, p in zip(variables, weights):
    object.__setattr__(var, "_path", p)
opt2.build(variables)
state, params = [v.value for v in opt2.variables], [v.value for v in variables]
for g in grads:
    params, state = opt2.stateless_apply(state, [g[p] for p in weights], params)
print(json.dumps({"apply": {p: v.tolist() for p, v in ours.items()},
                  "stateless": {p: np.asarray(v).tolist() for p, v in zip(weights, params)},
                  "lrs": lrs}))
"""


def test_lamb_jax_backend_matches_the_reference_and_tf():
    proc = run_jax_script(_JAX_SCRIPT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    weights, grads = _initial(), _grads(6)
    want = reference_lamb(weights, grads, out["lrs"], restart=3)
    tf_opt = create_optimizer(1e-2, 6, 1, clip_norm=None, optimizer="lamb",
                              schedule_restarts=(3,), stage_rates=((5e-3, 2),))
    tf_ours, _ = _run_ours(weights, grads, tf_opt)
    for p in _SHAPES:
        for got in (out["apply"][p], out["stateless"][p]):
            np.testing.assert_allclose(np.asarray(got), want[p], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(np.asarray(got), tf_ours[p], rtol=1e-5, atol=1e-6)
