"""The LR schedule, AdamW decay exclusion, clipping and layer-wise LR decay."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.training.optimization import (
    ElectraAdamW,
    ElectraLamb,
    WarmupPolynomialDecay,
    applies_weight_decay,
    create_optimizer,
    layer_depth,
)

# === Schedule ===


@pytest.mark.parametrize(
    "step,expected",
    [
        (0, 0.0),  # warmup starts at 0, as the original's global_step
        (5, 1e-3 * 0.95 * 0.5),  # mid-warmup: decay * step / warmup
        (10, 1e-3 * 0.9),  # end of warmup
        (55, 1e-3 * 0.45),  # linear decay
        (100, 0.0),  # decays to 0 at num_train_steps
        (150, 0.0),  # and stays there (no cycle)
    ],
)
def test_warmup_linear_decay(step, expected):
    schedule = WarmupPolynomialDecay(1e-3, num_train_steps=100, num_warmup_steps=10)
    assert float(schedule(step)) == pytest.approx(expected, abs=1e-10)


def test_power_two_and_no_warmup():
    schedule = WarmupPolynomialDecay(2.0, num_train_steps=100, num_warmup_steps=0, power=2.0)
    for step in (0, 20, 50, 99):
        assert float(schedule(step)) == pytest.approx(2.0 * (1 - step / 100) ** 2, rel=1e-5)


def test_schedule_restarts_for_a_second_stage():
    """Two-stage training: each stage of 50 steps warms up over 10 and decays to 0."""
    schedule = WarmupPolynomialDecay(1e-3, num_train_steps=100, num_warmup_steps=10,
                                     restarts=(50,))
    for step, expected in [(0, 0.0), (5, 1e-3 * 0.9 * 0.5), (10, 1e-3 * 0.8), (49, 1e-3 * 0.02),
                           (50, 0.0), (55, 1e-3 * 0.9 * 0.5), (60, 1e-3 * 0.8),
                           (99, 1e-3 * 0.02), (100, 0.0), (130, 0.0)]:
        assert float(schedule(step)) == pytest.approx(expected, abs=1e-10), step
    again = WarmupPolynomialDecay.from_config(schedule.get_config())
    assert again.restarts == (50,) and float(again(55)) == pytest.approx(float(schedule(55)))
    opt = create_optimizer(1e-3, 100, 10, schedule_restarts=(50,))
    assert opt._learning_rate.restarts == (50,)
    for bad in ((0,), (100,), (30, 30)):
        with pytest.raises(ValueError):
            WarmupPolynomialDecay(1e-3, 100, 10, restarts=bad)


def test_schedule_config_round_trip():
    schedule = WarmupPolynomialDecay(5e-4, 1000, 100, power=2.0)
    again = WarmupPolynomialDecay.from_config(schedule.get_config())
    assert float(again(300)) == pytest.approx(float(schedule(300)))


# === A toy model with ELECTRA-like variable paths ===


class _Block(keras.layers.Layer):
    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(units, name="dense")
        self.norm = keras.layers.LayerNormalization(name="LayerNorm")

    def build(self, input_shape):
        self.dense.build(input_shape)
        self.norm.build(input_shape[:-1] + (self.dense.units,))

    def call(self, x):
        return self.norm(self.dense(x))


class _Toy(keras.Model):
    """embeddings/, embeddings_project/, encoder/layer_i/, and a head."""

    def __init__(self, n_layers=2, **kwargs):
        super().__init__(**kwargs)
        self.embeddings = _Block(4, name="embeddings")
        self.project = keras.layers.Dense(3, name="embeddings_project")
        self.encoder = [_Block(3, name=f"layer_{i}") for i in range(n_layers)]
        self.head = keras.layers.Dense(1, name="classifier")

    def call(self, x):
        h = self.project(self.embeddings(x))
        for block in self.encoder:
            h = block(h)
        return self.head(h)


def _toy(n_layers=2):
    model = _Toy(n_layers, name="electra")
    model(np.zeros((1, 5), np.float32))
    # Give every variable a nonzero value, so that decay of zero-init
    # biases and betas would show.
    for v in model.trainable_variables:
        v.assign(np.full(v.shape, 0.5, np.float32))
    return model


def _step(optimizer, model, grads):
    """Applies one update; returns {path: value before - value after}."""
    before = [v.numpy().copy() for v in model.trainable_variables]
    optimizer.apply(grads, model.trainable_variables)
    return {v.path: b - v.numpy() for v, b in zip(model.trainable_variables, before)}


# === Weight decay ===


def test_weight_decay_skips_layernorm_and_bias():
    model = _toy()
    opt = create_optimizer(0.1, num_train_steps=1000, num_warmup_steps=0, weight_decay_rate=0.01)
    zeros = [tf.zeros_like(v) for v in model.trainable_variables]
    deltas = _step(opt, model, zeros)
    for path, delta in deltas.items():
        decayed = path.endswith("kernel")
        assert applies_weight_decay(path) == decayed, path
        expected = 0.5 * 0.01 * 0.1 if decayed else 0.0
        np.testing.assert_allclose(delta, expected, rtol=1e-3, atol=1e-12, err_msg=path)
    assert {p.rsplit("/", 1)[-1] for p in deltas} == {"kernel", "bias", "gamma", "beta"}


def test_applies_weight_decay_patterns():
    assert applies_weight_decay("electra/layer_0/attention/query/kernel")
    assert applies_weight_decay("electra/embeddings/word_embeddings/embeddings")
    for path in (
        "electra/embeddings/LayerNorm/gamma",
        "x/attention_layer_norm/beta",
        "electra/layer_0/output/bias",
        "generator_predictions/output_bias",
        "head/norm/gamma",
    ):
        assert not applies_weight_decay(path), path


# === Clipping ===


def test_global_norm_clipping():
    """A huge gradient moves the weights as the gradient clipped to norm 1."""
    g1 = [tf.constant([[300.0, -40.0]]), tf.constant([500.0])]
    g2 = [tf.constant([[0.1, 0.2]]), tf.constant([-0.3])]
    norm = float(tf.linalg.global_norm(g1))
    clipped = [g / norm for g in g1]

    def run(first, clip_norm):
        variables = [
            keras.Variable(np.ones((1, 2), np.float32), name="kernel"),
            keras.Variable(np.ones((2,), np.float32)[:1], name="w"),
        ]
        opt = create_optimizer(0.1, 1000, 0, weight_decay_rate=0.0, clip_norm=clip_norm)
        opt.apply(first, variables)
        opt.apply(g2, variables)  # the second step shows the first step's scale
        return [v.numpy() for v in variables]

    for a, b in zip(run(g1, 1.0), run(clipped, 1.0)):
        np.testing.assert_allclose(a, b, rtol=1e-5)
    # Without clipping the first step's scale changes the result.
    assert not np.allclose(run(g1, None)[0], run(clipped, 1.0)[0], rtol=1e-3)


# === Layer-wise LR decay ===


def test_layer_depth():
    n = 12
    assert layer_depth("electra/embeddings/word_embeddings/embeddings", n) == 0
    assert layer_depth("electra/word_embeddings/embeddings", n) == 0
    assert layer_depth("electra/embeddings_project/kernel", n) == 0
    assert layer_depth("electra/encoder/layer_0/attention/kernel", n) == 1
    assert layer_depth("electra/encoder/layer_1/dense/kernel", n) == 2
    assert layer_depth("electra/encoder/layer_11/dense/kernel", n) == 12
    assert layer_depth("classifier/kernel", n) == n + 2
    with pytest.raises(ValueError):
        layer_depth("encoder/layer_12/dense/kernel", n)


def _expected_multipliers(model, decay, n):
    """{path: decay ** (n + 2 - depth)}, the depths read off the toy's layout."""
    depths = {"embeddings": 0, "embeddings_project": 0, "layer_0": 1, "layer_1": 2,
              "classifier": n + 2}
    return {v.path: decay ** (n + 2 - depths[v.path.split("/")[1]])
            for v in model.trainable_variables}


@pytest.mark.parametrize("bias_correction", [False, True])
def test_layerwise_effective_learning_rates(bias_correction):
    """Adam's first step moves each weight by its own lr."""
    n, decay, lr = 2, 0.5, 0.01
    model = _toy(n)
    for v in model.trainable_variables:  # at 0 the update is exact in float32
        v.assign(tf.zeros_like(v))
    opt = create_optimizer(lr, 1000, 0, weight_decay_rate=0.0, layerwise_lr_decay=decay,
                           n_layers=n, adam_bias_correction=bias_correction)
    multipliers = _expected_multipliers(model, decay, n)
    deltas = _step(opt, model, [tf.ones_like(v) for v in model.trainable_variables])
    g = 1 / np.sqrt(sum(np.prod(v.shape) for v in model.trainable_variables))  # clipped to norm 1
    assert set(deltas) == set(multipliers)
    for path, delta in deltas.items():
        if bias_correction:
            # Keras: lr * m_hat / (sqrt(v_hat) + eps) = lr * g / (g + eps / sqrt(1 - beta_2)).
            step = g / (g + 1e-6 / np.sqrt(1 - 0.999))
        else:
            # The original: lr * m / (sqrt(v) + eps), m = 0.1 g, v = 0.001 g^2.
            step = 0.1 * g / (np.sqrt(0.001) * g + 1e-6)
        np.testing.assert_allclose(delta, lr * multipliers[path] * step, rtol=1e-5,
                                   err_msg=path)
    for v in model.trainable_variables:
        assert opt.lr_multiplier(v) == pytest.approx(multipliers[v.path])


# === The original's AdamWeightDecayOptimizer, in NumPy ===


def _original_adam_weight_decay(params, grads_per_step, paths, lr, num_train_steps,
                                num_warmup_steps, weight_decay_rate, layer_decay, n_layers,
                                power=1.0, clip_norm=1.0):
    """google-research/electra model/optimization.py, transcribed to NumPy (float64).

    create_optimizer: lr_t = polynomial_decay(lr, step, T, end 0, power) * min(1,
    step / warmup) at the global step before the update; _get_layer_lrs scales it
    by layer_decay ** (n_layers + 2 - depth); the gradients are clipped to
    global norm 1. AdamWeightDecayOptimizer._apply_gradients: no bias
    correction, decay added to the update unless the name matches
    ["LayerNorm", "layer_norm", "bias"].
    """
    import re

    depths = {"embeddings": 0, "embeddings_project": 0, "classifier": n_layers + 2,
              **{f"layer_{i}": i + 1 for i in range(n_layers)}}
    params = [np.asarray(p, np.float64).copy() for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    history = []
    for step, grads in enumerate(grads_per_step):
        grads = [np.asarray(g, np.float64) for g in grads]
        norm = np.sqrt(sum((g ** 2).sum() for g in grads))
        grads = [g * clip_norm / max(norm, clip_norm) for g in grads]
        lr_t = lr * (1 - min(step, num_train_steps) / num_train_steps) ** power
        lr_t *= min(1.0, step / num_warmup_steps)
        for i, (g, path) in enumerate(zip(grads, paths)):
            layer_lr = lr_t * layer_decay ** (n_layers + 2 - depths[path.split("/")[1]])
            m[i] = 0.9 * m[i] + (1 - 0.9) * g
            v[i] = 0.999 * v[i] + (1 - 0.999) * g ** 2
            update = m[i] / (np.sqrt(v[i]) + 1e-6)
            if not any(re.search(r, path) for r in ("LayerNorm", "layer_norm", "bias")):
                update += weight_decay_rate * params[i]
            params[i] = params[i] - layer_lr * update
        history.append([p.copy() for p in params])
    return history, m, v


def test_matches_the_original_adam_weight_decay_optimizer_step_by_step():
    """Several steps of warmup and decay, with decay, exclusions, layer-wise rates
    and clipping, against the original's update rule."""
    n, steps = 2, 8
    model = _toy(n)
    rng = np.random.default_rng(0)
    for v in model.trainable_variables:
        v.assign(rng.normal(0, 0.5, v.shape).astype(np.float32))
    variables = model.trainable_variables
    start = [v.numpy().copy() for v in variables]
    # Scales of 0.05 and 3: some steps are clipped, others not.
    grads = [[(rng.normal(size=v.shape) * (3.0 if s % 3 == 0 else 0.05)).astype(np.float32)
              for v in variables] for s in range(steps)]
    opt = create_optimizer(1e-2, num_train_steps=10, num_warmup_steps=3, weight_decay_rate=0.1,
                           layerwise_lr_decay=0.7, n_layers=n)
    expected, m, v = _original_adam_weight_decay(
        start, grads, [v.path for v in variables], 1e-2, 10, 3, 0.1, 0.7, n)
    for s in range(steps):
        opt.apply([tf.constant(g) for g in grads[s]], variables)
        for var, want in zip(variables, expected[s]):
            np.testing.assert_allclose(var.numpy(), want, rtol=1e-5, atol=1e-7,
                                       err_msg=f"step {s}: {var.path}")
    # The moments live in Keras' Adam slots, in variable order (what checkpoints hold).
    for i in range(len(variables)):
        np.testing.assert_allclose(opt._momentums[i].numpy(), m[i], rtol=1e-4, atol=1e-9)
        np.testing.assert_allclose(opt._velocities[i].numpy(), v[i], rtol=1e-4, atol=1e-12)
    names = [x.name for x in opt.variables]
    assert names == ["iteration"] + [f"{x.path.replace('/', '_')}_{kind}"
                                     for x in variables for kind in ("momentum", "velocity")]


@pytest.mark.parametrize("traced", [False, True])
def test_bias_correction_flag_is_keras_adam(traced):
    """adam_bias_correction=True: each step is Keras' Adam step plus the decoupled decay,
    to the bit, eagerly and traced (the update makes its per-step scalars once per
    apply, as the same expressions)."""
    model = _toy()
    variables = model.trainable_variables
    rng = np.random.default_rng(1)
    grads = [[rng.normal(size=v.shape).astype(np.float32) * 0.01 for v in variables]
             for _ in range(3)]
    ours = create_optimizer(1e-2, 100, 0, weight_decay_rate=0.0, clip_norm=None,
                            adam_bias_correction=True)
    keras_adam = keras.optimizers.Adam(
        WarmupPolynomialDecay(1e-2, 100, 0), beta_1=0.9, beta_2=0.999, epsilon=1e-6)
    twin = _toy()
    for a, b in zip(twin.trainable_variables, variables):
        a.assign(b)
    step_ours = lambda g: ours.apply(g, variables)  # noqa: E731
    step_keras = lambda g: keras_adam.apply(g, twin.trainable_variables)  # noqa: E731
    if traced:
        step_ours, step_keras = tf.function(step_ours), tf.function(step_keras)
    for g in grads:
        step_ours([tf.constant(x) for x in g])
        step_keras([tf.constant(x) for x in g])
    for a, b in zip(variables, twin.trainable_variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("kind", ["adamw", "adamw_bias_corrected", "lamb"])
def test_the_per_step_scalars_are_made_once_per_step_not_per_variable(kind):
    """A traced update computes the learning rate, the bias correction's powers and the
    update's constants once, however many variables it updates: on TensorFlow each
    per-variable copy was ops in the training step's graph, about half the optimizer's
    (the traces of the tests' tiny runs). Same values: the tests above and below."""
    import collections

    def op_counts(n_layers):
        variables = _toy(n_layers).trainable_variables
        optimizer = (ElectraLamb(1e-3) if kind == "lamb" else create_optimizer(
            1e-2, 100, 10, clip_norm=None, adam_bias_correction=kind != "adamw"))
        optimizer.build(variables)
        grads = [tf.ones_like(v.value) for v in variables]
        graph = tf.function(lambda g: optimizer.apply(g, variables)).get_concrete_function(
            grads).graph
        return len(variables), collections.Counter(op.type for op in graph.get_operations())

    (few, small), (many, large) = op_counts(2), op_counts(6)
    assert many > few
    assert small["Pow"] == large["Pow"] <= 3  # the schedule's, and beta_1^t and beta_2^t
    if kind != "lamb":  # (LAMB's trust ratio has two constants of its own per variable)
        assert small["Const"] == large["Const"]


def test_layerwise_weight_decay_uses_the_scaled_rate():
    n, decay, lr, wd = 2, 0.5, 0.1, 0.1
    model = _toy(n)
    opt = create_optimizer(lr, 1000, 0, weight_decay_rate=wd, layerwise_lr_decay=decay, n_layers=n)
    multipliers = _expected_multipliers(model, decay, n)
    deltas = _step(opt, model, [tf.zeros_like(v) for v in model.trainable_variables])
    for path, delta in deltas.items():
        expected = 0.5 * wd * lr * multipliers[path] if path.endswith("kernel") else 0.0
        # float32 ulps at 0.5 bound the precision of the difference.
        np.testing.assert_allclose(delta, expected, rtol=1e-3, atol=1e-12, err_msg=path)


def test_layerwise_decay_needs_n_layers():
    with pytest.raises(ValueError):
        create_optimizer(1e-4, 100, 10, layerwise_lr_decay=0.8)


# === In a compiled train step, and serialization ===


def test_fit_and_config_round_trip():
    model = _toy()
    opt = create_optimizer(1e-2, 10, 2, layerwise_lr_decay=0.8, n_layers=2)
    model.compile(optimizer=opt, loss="mse")
    x, y = np.ones((4, 5), np.float32), np.zeros((4, 1), np.float32)
    model.fit(x, y, epochs=1, batch_size=2, verbose=0)  # graph mode: index lookups work
    assert int(opt.iterations) == 2
    again = ElectraAdamW.from_config(opt.get_config())
    assert (
        again.layerwise_lr_decay,
        again.n_layers,
        again.global_clipnorm,
        again.epsilon,
        again.weight_decay,
        again.bias_correction,
    ) == (0.8, 2, 1.0, 1e-6, 0.01, False)
    assert isinstance(again._learning_rate, WarmupPolynomialDecay)
