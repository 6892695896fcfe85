"""Layers checked against NumPy references: embeddings, transformer block, GELU."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from electra_tf.modeling.heads import DiscriminatorHead, MaskedLMHead, gather_positions
from electra_tf.modeling.layers import Dropout, ElectraEmbeddings, get_activation
from electra_tf.modeling.transformer import SelfAttention, TransformerLayer

_erf = np.vectorize(math.erf)


def gelu_exact(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _randomize(layer, rng, scale=0.5):
    # Non-trivial weights (biases and LayerNorm too) make the reference meaningful.
    for v in layer.trainable_variables:
        offset = 1.0 if v.name == "gamma" else 0.0
        v.assign(rng.normal(0.0, scale, v.shape).astype("float32") + offset)


def test_gelu_is_exact_erf():
    x = np.linspace(-4, 4, 81).astype("float32")
    got = np.asarray(get_activation("gelu")(x))
    np.testing.assert_allclose(got, gelu_exact(x), atol=1e-6)
    assert np.abs(gelu_exact(x) - gelu_tanh(x)).max() > 1e-4  # The check can tell them apart.


@pytest.mark.parametrize("name,reference", [("gelu", "exact"), ("gelu_approximate", "tanh")])
def test_gelu_under_bfloat16_rounds_once(name, reference):
    # Computed in float32 between two casts: within half a bfloat16 step of the
    # exact value at the rounded input, give or take float32 in the tails
    # (bfloat16 arithmetic, rounding at each op, missed it at 22-33% of them).
    x = ops.cast(np.linspace(-6, 6, 2001).astype("float32"), "bfloat16")
    got = get_activation(name)(x)
    assert got.dtype == "bfloat16"
    x32 = np.asarray(ops.cast(x, "float32"), "float64")
    want = gelu_exact(x32) if reference == "exact" else gelu_tanh(x32)
    got = np.asarray(ops.cast(got, "float32"), "float64")
    np.testing.assert_array_less(np.abs(got - want), np.abs(want) * 2.0**-8 + 1e-6)


def reference_block(x, mask, w, heads, eps, gelu):
    """NumPy post-LN BERT block; `w` maps sub-layer names to (kernel, bias)."""
    b, length, h = x.shape
    d = h // heads

    def dense(name, t):
        return t @ w[name][0] + w[name][1]

    q, k, v = (dense(n, x).reshape(b, length, heads, d) for n in ("query", "key", "value"))
    scores = np.einsum("bqnd,bknd->bnqk", q, k) / math.sqrt(d)
    scores = scores + (1.0 - mask[:, None, None, :]) * -10000.0
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    context = np.einsum("bnqk,bknd->bqnd", probs, v).reshape(b, length, h)
    x = layer_norm(x + dense("attention_output", context), *w["attention_layer_norm"], eps)
    ffn = dense("output", gelu(dense("intermediate", x)))
    return layer_norm(x + ffn, *w["output_layer_norm"], eps)


def test_transformer_layer_matches_numpy_reference(inputs):
    rng = np.random.default_rng(0)
    layer = TransformerLayer(16, 2, 32, layer_norm_eps=1e-12, name="layer_0")
    layer.build((None, None, 16))
    _randomize(layer, rng)
    x = rng.normal(size=(2, 16, 16)).astype("float32")
    mask = inputs()["input_mask"]
    got = np.asarray(layer(x, mask))
    w = {}
    for var in layer.trainable_variables:
        parent = var.path.split("/")[-2]
        w.setdefault(parent, {})[var.name] = var.numpy().astype("float64")
    w = {k: (v.get("kernel", v.get("gamma")), v.get("bias", v.get("beta"))) for k, v in w.items()}
    want = reference_block(x.astype("float64"), mask, w, 2, 1e-12, gelu_exact)
    np.testing.assert_allclose(got, want, atol=2e-4)
    approx = reference_block(x.astype("float64"), mask, w, 2, 1e-12, gelu_tanh)
    assert np.abs(got - approx).max() > 10 * np.abs(got - want).max()


def test_embeddings_match_numpy_reference(inputs):
    rng = np.random.default_rng(1)
    layer = ElectraEmbeddings(32, 8, max_position_embeddings=16, name="embeddings")
    layer.build()
    _randomize(layer, rng)
    x = inputs()
    got = np.asarray(layer(x["input_ids"], x["segment_ids"]))
    summed = (layer.word_embeddings.embeddings.numpy()[x["input_ids"]]
              + layer.position_embeddings.embeddings.numpy()[None, :16]
              + layer.token_type_embeddings.embeddings.numpy()[x["segment_ids"]])
    want = layer_norm(summed, layer.layer_norm.gamma.numpy(), layer.layer_norm.beta.numpy(), 1e-12)
    np.testing.assert_allclose(got, want, atol=1e-5)
    # more positions than the table's 16: one line (JAX's gather had clamped them to its
    # last row, silently; TensorFlow's had raised from GatherV2)
    long = np.zeros((1, 17), np.int32)
    with pytest.raises(ValueError, match=r"input_ids of 17 positions, but the model has 16 "
                                         r"\(max_position_embeddings\)"):
        layer(long, long)
    # ids of another rank, segment ids of another shape: one line each (an IndexError, a
    # broadcasting error from the sum)
    with pytest.raises(ValueError, match=r"input_ids must be \[batch_size, seq_length\], got "
                                         r"rank 1"):
        layer(np.zeros(5, np.int32), np.zeros(5, np.int32))
    with pytest.raises(ValueError, match=r"segment_ids must be of input_ids' shape \(1, 5\), "
                                         r"got \(1, 4\)"):
        layer(np.zeros((1, 5), np.int32), np.zeros((1, 4), np.int32))


def test_dropout_seed_and_training_flag():
    layer = Dropout(0.5)
    x = np.ones((4, 32), "float32")
    np.testing.assert_array_equal(layer(x), x)
    seed = tf.constant([1, 2])
    a = layer(x, training=True, seed=seed)
    np.testing.assert_array_equal(a, layer(x, training=True, seed=seed))
    assert not np.array_equal(a, layer(x, training=True, seed=seed + 1))
    # Without a seed the layer's own SeedGenerator advances between calls.
    assert not np.array_equal(layer(x, training=True), layer(x, training=True))
    assert set(np.unique(a)) <= {0.0, 2.0}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_dropout_keeps_the_rate_under_mixed_precision(dtype):
    # The mask is drawn in float32: a bfloat16 draw (TensorFlow's uniforms on a
    # grid of 1/128) kept 0.898 of the units at rate 0.1, scaled by 1.109.
    x = keras.random.normal((1000, 1000), seed=0)
    layer = Dropout(0.1, dtype=f"mixed_{dtype}")
    got = layer(ops.cast(x, dtype), training=True, seed=tf.constant([1, 2]))
    assert got.dtype == dtype
    got = np.asarray(ops.cast(got, "float32"))
    kept = got != 0
    assert abs(kept.mean() - 0.9) < 1e-3  # the standard error is 3e-4
    rounded = np.asarray(ops.cast(ops.cast(x, dtype), "float32"))
    scaled = np.asarray(ops.cast(ops.cast(rounded * np.float32(1 / 0.9), dtype), "float32"))
    np.testing.assert_array_equal(got[kept], scaled[kept])


def test_gather_positions():
    seq = np.arange(2 * 5 * 3, dtype="float32").reshape(2, 5, 3)
    pos = np.array([[4, 0], [1, 1]], "int32")
    np.testing.assert_array_equal(gather_positions(seq, pos), seq[np.arange(2)[:, None], pos])


@pytest.mark.parametrize("layer", [
    Dropout(0.2, seed_init=3, name="d"),
    ElectraEmbeddings(32, 8, 16, 2, 0.1, 0.02, 1e-12, name="embeddings"),
    SelfAttention(16, 4, 0.0, 0.05, name="attention"),
    TransformerLayer(16, 2, 32, "relu", 0.2, 0.3, 0.05, 1e-6, name="layer_3"),
    DiscriminatorHead(16, "gelu_approximate", 0.05, name="discriminator_predictions"),
    MaskedLMHead(keras.layers.Embedding(32, 8, name="word_embeddings"), "relu", 0.05, 1e-5),
], ids=lambda layer: type(layer).__name__)
def test_layer_get_config_round_trip(layer):
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config
