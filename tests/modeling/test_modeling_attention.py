"""The fused attention path (keras.ops.dot_product_attention) gives the einsum path's outputs."""

import numpy as np
import pytest

from electra_tf.core.config import ConfigError, RuntimeOptions
from electra_tf.modeling import transformer
from electra_tf.modeling.transformer import SelfAttention, set_attention_implementation


@pytest.fixture
def attention_impl():
    yield set_attention_implementation
    set_attention_implementation("einsum")


def inputs(seed=0, batch=3, length=7, hidden=16):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, length, hidden)).astype("float32")
    mask = np.ones((batch, length), "int32")
    mask[1, 4:] = 0  # padded keys
    mask[2, 1:] = 0  # one real token
    return x, mask


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_fused_attention_equals_einsum(attention_impl, dropout, monkeypatch):
    calls = []
    fused = transformer.ops.dot_product_attention
    monkeypatch.setattr(transformer.ops, "dot_product_attention",
                        lambda *a, **k: calls.append(1) or fused(*a, **k))
    layer = SelfAttention(16, 4, attention_probs_dropout_prob=dropout)
    x, mask = inputs()
    layer.build(x.shape)
    seed = np.asarray([3, 4], "int32")
    reference = {t: np.asarray(layer(x, mask, training=t, seed=seed)) for t in (False, True)}
    attention_impl("fused")
    for training in (False, True):
        got = np.asarray(layer(x, mask, training=training, seed=seed))
        # with attention dropout while training the layer keeps the einsum path: same draws
        np.testing.assert_allclose(got, reference[training], rtol=1e-5, atol=1e-5)
    assert len(calls) == (2 if dropout == 0.0 else 1)  # the fused kernel really ran
    # the padded keys are ignored: changing what a padded position holds changes nothing
    x2 = x.copy()
    x2[1, 5] += 10.0
    np.testing.assert_allclose(np.asarray(layer(x2, mask))[1, :4],
                               np.asarray(layer(x, mask))[1, :4], rtol=1e-5, atol=1e-5)


def test_an_unknown_implementation_is_refused():
    with pytest.raises(ValueError, match="einsum, fused"):
        set_attention_implementation("flash")
    with pytest.raises(ConfigError, match="attention_implementation must be one of"):
        RuntimeOptions(attention_implementation="flash")
    assert transformer._attention["implementation"] == "einsum"


def test_the_fused_bias_has_a_shape_cudnns_kernel_takes(attention_impl, monkeypatch):
    """Keras' JAX backend runs dot_product_attention as cuDNN's fused kernel only where
    JAX's cuDNN layout check passes (bf16 on a GPU); else it falls back to XLA's unfused
    attention. That check wants a bias of [B, 1 or heads, L, L]: a [B, 1, 1, L] key mask
    would make `fused` the einsum path under another name."""
    seen = {}
    fused = transformer.ops.dot_product_attention

    def spy(q, k, v, bias=None, **kwargs):
        seen.update(q=tuple(q.shape), bias=tuple(bias.shape))
        return fused(q, k, v, bias=bias, **kwargs)

    monkeypatch.setattr(transformer.ops, "dot_product_attention", spy)
    attention_impl("fused")
    layer = SelfAttention(16, 4, attention_probs_dropout_prob=0.0)
    x, mask = inputs(length=8)
    layer(x, mask, training=True)
    assert seen == {"q": (3, 8, 4, 4), "bias": (3, 1, 8, 8)}
    cudnn = pytest.importorskip("jax._src.cudnn.fused_attention_stablehlo")
    import inspect

    import ml_dtypes

    q = np.zeros(seen["q"], ml_dtypes.bfloat16)  # what a bf16 run hands it
    rest = [p for p in inspect.signature(cudnn.check_layout).parameters
            if p not in ("query", "key", "value", "bias", "layout")]
    cudnn.check_layout(q, q, q, np.zeros(seen["bias"], ml_dtypes.bfloat16),
                       layout=cudnn._normalize_layout("BTNH"), **dict.fromkeys(rest))
    with pytest.raises(ValueError, match="Bias must have same seq length"):  # the old shape
        cudnn.check_layout(q, q, q, np.zeros((3, 1, 1, 8), ml_dtypes.bfloat16),
                           layout=cudnn._normalize_layout("BTNH"), **dict.fromkeys(rest))
