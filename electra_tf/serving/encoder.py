"""The encoder's forward pass for serving: the Keras encoder's arithmetic in fewer ops.

Besides its matrix multiplications, the Keras encoder's graph spends time on
the layers' per-call bookkeeping: 3-D Dense layers reshaped to 2-D and back,
an einsum's reshapes and transposes per attention product, the mask bias
rebuilt in every layer, shape arithmetic. `serving_sequence_output` computes
the same function in inference mode, on the same variables (nothing is copied
into the SavedModel twice), with the activations kept 2-D [B*L, H] between
the layers, one attention-mask bias per call and one transpose per tensor
(5-13% faster at 60 positions and more: benchmarks/export_latency.md):

    x = LayerNorm(word[ids] + position[:L] + type[type_ids]);  x = x @ P + p (E != H)
    per layer:  q, k, v = x @ Wq + bq, x @ Wk + bk, x @ Wv + bv   (heads split by reshape)
                a = softmax(q k^T / sqrt(d) + mask_bias) v
                x = LayerNorm(x + a @ Wo + bo)
                x = LayerNorm(x + act(x @ Wi + bi) @ Wf + bf)

Every matrix product goes through `_matmul` (tf.matmul: MatMul, BatchMatMulV2),
which TensorFlow built with oneDNN rewrites into oneDNN's ops when the graph is
loaded. Tried and not kept: BatchMatMulV3, which that rewrite skips (it rewrites
only ops with a "T" attribute), so that the products run on Eigen's kernels.
Side by side it was no faster for a short request at TensorFlow's default
threads and slower for long texts and batches (benchmarks/serving_threads_bmm.md).

It is the export's encoder: tests/export/test_serving_encoder.py holds it to
the Keras model to 1e-5 for every head, activation and padding, and the
export tests hold every bucket to the fixed window. Dropout is off, as at
inference. A model whose compute dtype is not float32 (a mixed-precision
policy) runs through the Keras layers instead, which own the casts.
"""

from __future__ import annotations

import tensorflow as tf

from electra_tf.modeling.layers import get_activation
from electra_tf.modeling.transformer import MASK_BIAS


def supported(encoder) -> bool:
    """Whether `serving_sequence_output` computes this encoder (float32 weights and compute)."""
    return encoder.compute_dtype == "float32" and encoder.variable_dtype == "float32"


def _layer_norm(x, layer):
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return tf.nn.batch_normalization(x, mean, variance, layer.beta.value, layer.gamma.value,
                                     layer.epsilon)


def _matmul(x, y):
    """x @ y, batched over the leading dimensions: every matrix product of the encoder
    (the one place to try another op: benchmarks/bench_serving_threads.py --encoders)."""
    return tf.matmul(x, y)


def _dense(x, layer):
    return tf.nn.bias_add(_matmul(x, layer.kernel.value), layer.bias.value)


def serving_sequence_output(encoder, input_ids, input_mask, segment_ids):
    """The encoder's sequence_output [B, L, H] for int32 [B, L] inputs, inference mode.

    Args:
      encoder: a built electra_tf ElectraEncoder with float32 weights (see `supported`).
      input_ids, input_mask, segment_ids: int32 [B, L] (L <= max_position_embeddings).
    """
    config = encoder.config
    hidden, heads = config.hidden_size, config.num_attention_heads
    head_size = hidden // heads
    batch, length = tf.shape(input_ids)[0], tf.shape(input_ids)[1]

    emb = encoder.embeddings
    x = (tf.gather(emb.word_embeddings.embeddings.value, input_ids)
         + emb.position_embeddings.embeddings.value[None, :length]
         + tf.gather(emb.token_type_embeddings.embeddings.value, segment_ids))
    x = _layer_norm(x, emb.layer_norm)
    x = tf.reshape(x, [-1, x.shape[-1]])  # [B*L, E]
    if encoder.embeddings_project is not None:
        x = _dense(x, encoder.embeddings_project)
    # [B, 1, 1, L]: 0 for real keys, MASK_BIAS for padded ones (as SelfAttention).
    mask_bias = (1.0 - tf.cast(input_mask, tf.float32))[:, None, None, :] * MASK_BIAS
    scale = 1.0 / float(head_size) ** 0.5
    split = [batch, length, heads, head_size]
    activation = get_activation(config.hidden_act)
    for layer in encoder.transformer_layers:
        att = layer.attention
        q = tf.transpose(tf.reshape(_dense(x, att.query), split), [0, 2, 1, 3])  # [B, n, L, d]
        k = tf.transpose(tf.reshape(_dense(x, att.key), split), [0, 2, 3, 1])  # [B, n, d, L]
        v = tf.transpose(tf.reshape(_dense(x, att.value), split), [0, 2, 1, 3])  # [B, n, L, d]
        probs = tf.nn.softmax(_matmul(q, k) * scale + mask_bias)
        context = tf.reshape(tf.transpose(_matmul(probs, v), [0, 2, 1, 3]), [-1, hidden])
        x = _layer_norm(x + _dense(context, layer.attention_output), layer.attention_layer_norm)
        ffn = _dense(activation(_dense(x, layer.intermediate)), layer.output_dense)
        x = _layer_norm(x + ffn, layer.output_layer_norm)
    return tf.reshape(x, [batch, length, hidden])


def model_outputs(model, inputs: dict) -> dict:
    """The exported model's outputs in inference mode, its encoder run by
    `serving_sequence_output`: a FinetuningModel's head outputs, or an RTD
    discriminator's rtd_logits. Any other model, or one `supported` refuses, runs
    through its Keras call. inputs: input_ids, input_mask, segment_ids."""
    from electra_tf.modeling.models import RTD_HEAD, ElectraDiscriminator
    from electra_tf.tasks.model import FinetuningModel

    head = None
    if isinstance(model, FinetuningModel):
        def head(sequence):
            return model.head(sequence, inputs["input_mask"], inputs["segment_ids"],
                              training=False)
    elif isinstance(model, ElectraDiscriminator) and model.head_kind == RTD_HEAD:
        def head(sequence):
            return {"rtd_logits": model.rtd_head(sequence)}
    if head is None or not supported(model.encoder):
        return model(inputs, training=False)
    return head(serving_sequence_output(model.encoder, inputs["input_ids"],
                                        inputs["input_mask"], inputs["segment_ids"]))
