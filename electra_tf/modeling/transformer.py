"""The post-LayerNorm BERT transformer layer used by both ELECTRA encoders.

    x = LayerNorm(x + Dropout(Dense(SelfAttention(x))))
    x = LayerNorm(x + Dropout(Dense(GELU(Dense(x)))))

Sub-layer names mirror the original's `attention/self/{query,key,value}`,
`attention/output/{dense,LayerNorm}`, `intermediate/dense` and
`output/{dense,LayerNorm}`, flattened to one level: `attention/{query,key,value}`,
`attention_output`, `attention_layer_norm`, `intermediate`, `output`,
`output_layer_norm`.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from electra_tf.core import config as config_lib
from electra_tf.modeling.layers import Dropout, get_activation, kernel_initializer
from electra_tf.modeling.random import (
    ATTENTION_OUTPUT_SITE,
    ATTENTION_PROBS_SITE,
    FFN_OUTPUT_SITE,
    offset_seed,
)

# Added to the attention scores of padded keys, as the original's -10000.
MASK_BIAS = -10000.0

# How SelfAttention computes softmax(QK^T / sqrt(d) + mask) V (process-wide, as Keras'
# dtype policy; the trainers set it from RuntimeOptions.attention_implementation):
#   einsum  two einsums around a float32 softmax (the reference);
#   fused   keras.ops.dot_product_attention, which the backend may run as one kernel
#           (cuDNN / flash attention on a GPU). It has no dropout on the attention
#           probabilities, so a layer that would apply some (training with
#           attention_probs_dropout_prob > 0) keeps the einsum path.
ATTENTION_IMPLEMENTATIONS = config_lib.ATTENTION_IMPLEMENTATIONS
_attention = {"implementation": "einsum"}


def set_attention_implementation(name: str) -> None:
    """Selects how every SelfAttention computes attention from its next call on."""
    if name not in ATTENTION_IMPLEMENTATIONS:
        raise ValueError(f"attention implementation must be one of "
                         f"{', '.join(ATTENTION_IMPLEMENTATIONS)}, got {name!r}")
    _attention["implementation"] = name


def _dense(units, initializer_range, dtype, name):
    return keras.layers.Dense(units, kernel_initializer=kernel_initializer(initializer_range),
                              bias_initializer="zeros", dtype=dtype, name=name)


def _key_mask(input_mask):
    """float32 [B, 1, 1, L] from a key padding mask [B, L], or [B, 1, L, L] from an
    attention mask [B, L, L] (query, key: 1 where the query attends the key; the
    original's 3-D `attention_mask`, e.g. with Electric's left-to-right towers)."""
    mask = ops.cast(input_mask, "float32")
    if len(ops.shape(mask)) == 3:
        return mask[:, None, :, :]
    return mask[:, None, None, :]


@keras.saving.register_keras_serializable(package="electra_tf")
class SelfAttention(keras.layers.Layer):
    """Multi-head scaled dot-product self-attention with a key padding mask.

    Query, key and value are separate [hidden, hidden] dense layers (as in the
    original checkpoints). Scores, mask and softmax are computed in float32;
    the probabilities go through dropout in the compute dtype.

    Args:
        hidden_size: H, the model width.
        num_attention_heads: heads; H must be a multiple of it.
        attention_probs_dropout_prob: dropout rate on the attention probabilities.
        initializer_range: stddev of the truncated-normal kernels.
    """

    def __init__(self, hidden_size: int, num_attention_heads: int,
                 attention_probs_dropout_prob: float = 0.1, initializer_range: float = 0.02,
                 **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(f"hidden_size {hidden_size} is not a multiple of "
                             f"num_attention_heads {num_attention_heads}")
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        self.head_size = hidden_size // num_attention_heads

        # === Layers ===
        policy = self.dtype_policy
        self.query = _dense(hidden_size, initializer_range, policy, "query")
        self.key = _dense(hidden_size, initializer_range, policy, "key")
        self.value = _dense(hidden_size, initializer_range, policy, "value")
        self.dropout = Dropout(attention_probs_dropout_prob, dtype=policy, name="dropout")

    def build(self, input_shape):
        for layer in (self.query, self.key, self.value):
            layer.build(input_shape)
        self.dropout.build(None)
        self.built = True

    def _split_heads(self, x):
        # [B, L, H] -> [B, L, heads, head_size]
        return ops.reshape(x, (*ops.shape(x)[:-1], self.num_attention_heads, self.head_size))

    def call(self, x, input_mask, training=False, seed=None):
        """Attends every position to the real (unpadded) positions.

        Args:
            x: float tensor [batch_size, seq_length, hidden_size].
            input_mask: int tensor [batch_size, seq_length], 1 real, 0 padding; or
                [batch_size, seq_length, seq_length], 1 where query i attends key j.
            training: bool; enables dropout on the attention probabilities.
            seed: optional int tensor [2] for the dropout mask.

        Returns:
            float tensor [batch_size, seq_length, hidden_size], the context.
        """
        q = self._split_heads(self.query(x))
        k = self._split_heads(self.key(x))
        v = self._split_heads(self.value(x))
        if _attention["implementation"] == "fused" and not (
                training and self.attention_probs_dropout_prob > 0):
            # [B, L] -> [B, 1, L, L], the same additive mask as below. Spelt out over the
            # queries: cuDNN's fused kernel (which Keras' JAX backend picks for bf16 on a
            # GPU) takes a bias of [B or 1, heads or 1, L, L] only, and Keras falls back to
            # XLA's unfused attention for any other shape, [B, 1, 1, L] included.
            bias = (1.0 - _key_mask(input_mask)) * MASK_BIAS
            length = ops.shape(q)[1]
            bias = ops.broadcast_to(ops.cast(bias, q.dtype),
                                    (ops.shape(q)[0], 1, length, length))
            context = ops.dot_product_attention(
                q, k, v, bias=bias, scale=1.0 / math.sqrt(self.head_size))
            return ops.reshape(context, (*ops.shape(context)[:-2], self.hidden_size))
        scores = ops.einsum("bqnd,bknd->bnqk", q, k)
        scores = ops.cast(scores, "float32") * (1.0 / math.sqrt(self.head_size))
        # [B, L] -> [B, 1, 1, L] ([B, L, L] -> [B, 1, L, L]): 0 for the keys a query
        # attends, -10000 for the others.
        key_mask = _key_mask(input_mask)
        probs = ops.softmax(scores + (1.0 - key_mask) * MASK_BIAS, axis=-1)
        probs = self.dropout(ops.cast(probs, self.compute_dtype), training=training, seed=seed)
        context = ops.einsum("bnqk,bknd->bqnd", probs, v)
        return ops.reshape(context, (*ops.shape(context)[:-2], self.hidden_size))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "hidden_size": self.hidden_size,
            "num_attention_heads": self.num_attention_heads,
            "attention_probs_dropout_prob": self.attention_probs_dropout_prob,
            "initializer_range": self.initializer_range,
        })
        return config


@keras.saving.register_keras_serializable(package="electra_tf")
class TransformerLayer(keras.layers.Layer):
    """One post-LayerNorm BERT block: self-attention, then the feed-forward net.

    Dropout sites (seed offsets, named in `modeling.random`): 0 attention
    probabilities, 1 attention output, 2 feed-forward output.

    Args:
        hidden_size: H, the model width.
        num_attention_heads: attention heads.
        intermediate_size: feed-forward width (4H in the presets).
        hidden_act: "gelu" (exact erf), "gelu_approximate" or "relu".
        hidden_dropout_prob: dropout rate on the two sub-layer outputs.
        attention_probs_dropout_prob: dropout rate on the attention probabilities.
        initializer_range: stddev of the truncated-normal kernels.
        layer_norm_eps: LayerNorm epsilon.
    """

    def __init__(self, hidden_size: int, num_attention_heads: int, intermediate_size: int,
                 hidden_act: str = "gelu", hidden_dropout_prob: float = 0.1,
                 attention_probs_dropout_prob: float = 0.1, initializer_range: float = 0.02,
                 layer_norm_eps: float = 1e-12, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self._activation = get_activation(hidden_act)

        # === Layers ===
        policy = self.dtype_policy
        self.attention = SelfAttention(hidden_size, num_attention_heads,
                                       attention_probs_dropout_prob, initializer_range,
                                       dtype=policy, name="attention")
        self.attention_output = _dense(hidden_size, initializer_range, policy, "attention_output")
        self.attention_dropout = Dropout(hidden_dropout_prob, dtype=policy,
                                         name="attention_dropout")
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype=policy, name="attention_layer_norm")
        self.intermediate = _dense(intermediate_size, initializer_range, policy, "intermediate")
        self.output_dense = _dense(hidden_size, initializer_range, policy, "output")
        self.output_dropout = Dropout(hidden_dropout_prob, dtype=policy, name="output_dropout")
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype=policy, name="output_layer_norm")

    def build(self, input_shape):
        hidden_shape = (None, None, self.hidden_size)
        self.attention.build(hidden_shape)
        self.attention_output.build(hidden_shape)
        self.attention_dropout.build(None)
        self.attention_layer_norm.build(hidden_shape)
        self.intermediate.build(hidden_shape)
        self.output_dense.build((None, None, self.intermediate_size))
        self.output_dropout.build(None)
        self.output_layer_norm.build(hidden_shape)
        self.built = True

    def call(self, x, input_mask, training=False, seed=None):
        """Runs the block.

        Args:
            x: float tensor [batch_size, seq_length, hidden_size].
            input_mask: int tensor [batch_size, seq_length], 1 real, 0 padding.
            training: bool; enables dropout.
            seed: optional int tensor [2]; the block's dropout sites use
                `seed + [0, site]`.

        Returns:
            float tensor [batch_size, seq_length, hidden_size].
        """
        def site(i):
            return None if seed is None else offset_seed(seed, i)

        context = self.attention(x, input_mask, training=training,
                                 seed=site(ATTENTION_PROBS_SITE))
        attended = self.attention_dropout(self.attention_output(context),
                                          training=training, seed=site(ATTENTION_OUTPUT_SITE))
        x = self.attention_layer_norm(x + attended)
        ffn = self.output_dense(self._activation(self.intermediate(x)))
        ffn = self.output_dropout(ffn, training=training, seed=site(FFN_OUTPUT_SITE))
        return self.output_layer_norm(x + ffn)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "hidden_size": self.hidden_size,
            "num_attention_heads": self.num_attention_heads,
            "intermediate_size": self.intermediate_size,
            "hidden_act": self.hidden_act,
            "hidden_dropout_prob": self.hidden_dropout_prob,
            "attention_probs_dropout_prob": self.attention_probs_dropout_prob,
            "initializer_range": self.initializer_range,
            "layer_norm_eps": self.layer_norm_eps,
        })
        return config
