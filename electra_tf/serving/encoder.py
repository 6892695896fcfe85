"""The encoder's forward pass for serving: the Keras encoder's arithmetic in fewer ops.

Besides its matrix multiplications, the Keras encoder's graph spends time on
the layers' per-call bookkeeping: 3-D Dense layers reshaped to 2-D and back,
an einsum's reshapes and transposes per attention product, the mask bias
rebuilt in every layer, shape arithmetic. `serving_sequence_output` computes
the same function in inference mode, on the same variables (nothing is copied
into the SavedModel twice), with the activations kept 2-D [B*L, H] between
the layers and one attention-mask bias per call
(5-13% faster at 60 positions and more: benchmarks/export_latency.md):

    x = LayerNorm(word[ids] + position[:L] + type[type_ids]);  x = x @ P + p (E != H)
    per layer:  q, k, v = x @ Wq + bq, x @ Wk + bk, x @ Wv + bv   (split into heads)
                a = softmax(q k^T / sqrt(d) + mask_bias) v        (heads merged)
                x = LayerNorm(x + a @ Wo + bo)
                x = LayerNorm(x + act(x @ Wi + bi) @ Wf + bf)

What TF Serving's CPU build does with the graph decides the op choices below.
Its oneDNN graph rewrite turns MatMul, BatchMatMulV2, Softmax and Transpose
into oneDNN's ops. A 2-D product small enough for the L2 cache runs on one
thread; every other one of those ops splits each call over the intra-op
threads, which for a short request costs more than it saves (a tiny
[B, L, n, d] Transpose took 50 us with two threads where it took 11 with one).
So:

- Heads are split and merged by one gather of d-vectors (`_split_heads`,
  `_merge_heads`), never a Transpose, and q k^T is a product with adj_y.
- Calls of at most SHORT_PATH_POSITIONS positions (B x L, one bucket's rows)
  run the short path: the attention products as BatchMatMulV3 and the softmax
  as exp(LogSoftmax), ops the rewrite leaves to Eigen, whose kernels run a
  small call on one thread. Longer calls run the long path, BatchMatMulV2 and
  Softmax, where oneDNN's threads pay off. A tf.cond in each layer picks the
  path, around those three ops only: the executor still walks the branch not
  taken as dead ops, and one tf.cond around all the layers cost 0.5-0.7 ms
  more per short request.
- The dense products stay tf.matmul (`_matmul`), oneDNN's, on both paths:
  BatchMatMulV3 for them too was slower for long texts and batches
  (benchmarks/serving_threads_bmm.md).

At TensorFlow's default threads on 2 cores this takes a 20-word request, as
TF Serving runs the export, from 12.9 to 10.1 ms; 128 words and batches got
7% faster too (benchmarks/serving_threads.md).

It is the export's encoder: tests/export/test_serving_encoder.py holds it to
the Keras model to 1e-5 for every head, activation and padding, and the
export tests hold every bucket to the fixed window. Dropout is off, as at
inference. A model whose compute dtype is not float32 (a mixed-precision
policy) runs through the Keras layers instead, which own the casts.
"""

from __future__ import annotations

import numpy as np
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
    """x @ y for the dense layers' products (the one place to try another op:
    benchmarks/bench_serving_threads.py --encoders)."""
    return tf.matmul(x, y)


def _dense(x, layer, kernels=None):
    """layer(x) for a Dense layer of the encoder (no activation): with its bfloat16 kernel
    where `kernels` (a Bfloat16Kernels) holds one, x cast to bfloat16 for the product
    and the bias added in float32."""
    kernel = None if kernels is None else kernels.get(layer)
    if kernel is None:
        return tf.nn.bias_add(_matmul(x, layer.kernel.value), layer.bias.value)
    product = tf.matmul(tf.cast(x, tf.bfloat16), kernel)
    return tf.nn.bias_add(tf.cast(product, tf.float32), layer.bias.value)


class Bfloat16Kernels(tf.Module):
    """bfloat16 copies of an encoder's dense kernels: the export's --precision=bf16.

    A short request's time goes mostly to reading the weights: at batch 1 each
    kernel element serves a few dozen multiply-adds, and a Small encoder's
    float32 kernels (37.7 MB) do not stay in a CPU's last-level cache between
    requests. In bfloat16 they are half the bytes, and CPUs with AVX512-BF16 or
    AMX multiply bfloat16 at twice the float32 rate
    (benchmarks/serving_bf16.md). Only the dense products are bfloat16: each
    takes its input rounded to bfloat16 and rounds its result to bfloat16 (about
    3 significant digits), then the float32 bias is added; embeddings, layer
    norms, residual sums, the attention's products and softmax, the activations
    and the head stay float32.

    The serving graph reads these variables in place of the float32 kernels,
    so the SavedModel holds the kernels once, in bfloat16 (the export is a
    third smaller for Small). Built outside any tf.function (it makes variables).
    """

    def __init__(self, encoder):
        super().__init__(name="bf16_kernels")
        if not supported(encoder):
            raise ValueError("bfloat16 kernels are made from a float32 encoder")
        layers = [] if encoder.embeddings_project is None else [encoder.embeddings_project]
        for layer in encoder.transformer_layers:
            att = layer.attention
            layers += [att.query, att.key, att.value, layer.attention_output,
                       layer.intermediate, layer.output_dense]
        self._index = {id(layer): i for i, layer in enumerate(layers)}
        # (a function, which tracking passes over: the layers as attributes would be saved
        # with the export, their float32 kernels beside these)
        self._layers = lambda: layers
        self.kernels = [tf.Variable(tf.cast(layer.kernel.value, tf.bfloat16), trainable=False,
                                    name=layer.name + "_bf16")
                        for layer in layers]

    def refresh(self) -> None:
        """Rounds the encoder's kernels as they are now (a model whose weights changed
        after these were made: the Python API's Predictor, each call)."""
        for variable, layer in zip(self.kernels, self._layers()):
            variable.assign(tf.cast(layer.kernel.value, tf.bfloat16))

    def get(self, layer):
        """The bfloat16 kernel of `layer` (a Dense layer of the encoder), else None."""
        i = self._index.get(id(layer))
        return None if i is None else self.kernels[i]


# A call of at most this many positions (rows x width) runs the short path (0: none does).
SHORT_PATH_POSITIONS = 64


def _head_order(batch, length, heads):
    """The gather indices of `_split_heads` and `_merge_heads` (int32, computed once a call)."""
    r = tf.range(length * heads)
    to_heads = (r % length) * heads + r // length  # row h*L + l of [B, n*L] is l*n + h
    from_heads = (r % heads) * length + r // heads  # row l*n + h of [B, L*n] is h*L + l
    return to_heads, from_heads


def _split_heads(x, to_heads, split):
    """[B*L, n*d] -> [B, n, L, d]: one gather of d-vectors, not a Transpose (see the module)."""
    batch, length, heads, head_size = split
    rows = tf.reshape(x, [batch, length * heads, head_size])
    return tf.reshape(tf.gather(rows, to_heads, axis=1), [batch, heads, length, head_size])


def _merge_heads(x, from_heads, split):
    """[B, n, L, d] -> [B*L, n*d], `_split_heads` undone."""
    batch, length, heads, head_size = split
    rows = tf.reshape(x, [batch, heads * length, head_size])
    return tf.reshape(tf.gather(rows, from_heads, axis=1), [-1, heads * head_size])


def _attention_products(short: bool):
    """(q, k) -> q k^T, (probs, v) -> probs v, and the softmax, for one path.

    The long path: BatchMatMulV2 and Softmax, oneDNN's ops after its graph rewrite,
    which split every call over the intra-op threads. The short path: ops that
    rewrite leaves alone, whose Eigen kernels run a small call on one thread:
    BatchMatMulV3 and exp(LogSoftmax)."""
    if short:
        def scores(q, k):
            return tf.raw_ops.BatchMatMulV3(x=q, y=k, Tout=tf.float32, adj_y=True)

        def context(probs, v):
            return tf.raw_ops.BatchMatMulV3(x=probs, y=v, Tout=tf.float32)

        def softmax(logits):
            return tf.exp(tf.nn.log_softmax(logits))
        return scores, context, softmax
    return (lambda q, k: tf.matmul(q, k, adjoint_b=True), tf.matmul, tf.nn.softmax)


def _attention(q, k, v, mask_bias, scale, short):
    """softmax(q k^T * scale + mask_bias) v, [B, n, L, d]; short: the path, a bool, or a
    scalar bool tensor (a tf.cond between the two: only these ops are in its branches,
    so the branch not taken leaves few dead ops for the executor to walk)."""
    def path(is_short):
        scores, context_of, softmax = _attention_products(is_short)
        return context_of(softmax(scores(q, k) * scale + mask_bias), v)
    if isinstance(short, bool):
        return path(short)
    return tf.cond(short, lambda: path(True), lambda: path(False))


def serving_sequence_output(encoder, input_ids, input_mask, segment_ids, kernels=None):
    """The encoder's sequence_output [B, L, H] for int32 [B, L] inputs, inference mode.

    Calls of at most SHORT_PATH_POSITIONS positions (B x L) run the layers' short
    path, longer ones the long path (see the module); the two compute the same
    function.

    Args:
      encoder: a built electra_tf ElectraEncoder with float32 weights (see `supported`).
      input_ids, input_mask, segment_ids: int32 [B, L] (L <= max_position_embeddings).
      kernels: the encoder's Bfloat16Kernels, for bfloat16 products (default: float32).
    """
    config = encoder.config
    hidden, heads = config.hidden_size, config.num_attention_heads
    batch, length = tf.shape(input_ids)[0], tf.shape(input_ids)[1]

    emb = encoder.embeddings
    x = (tf.gather(emb.word_embeddings.embeddings.value, input_ids)
         + emb.position_embeddings.embeddings.value[None, :length]
         + tf.gather(emb.token_type_embeddings.embeddings.value, segment_ids))
    x = _layer_norm(x, emb.layer_norm)
    x = tf.reshape(x, [-1, x.shape[-1]])  # [B*L, E]
    if encoder.embeddings_project is not None:
        x = _dense(x, encoder.embeddings_project, kernels)
    # [B, 1, 1, L]: 0 for real keys, MASK_BIAS for padded ones (as SelfAttention).
    mask_bias = (1.0 - tf.cast(input_mask, tf.float32))[:, None, None, :] * MASK_BIAS
    split = [batch, length, heads, hidden // heads]
    to_heads, from_heads = _head_order(batch, length, heads)
    scale = 1.0 / float(split[3]) ** 0.5
    short = False if SHORT_PATH_POSITIONS <= 0 else batch * length <= SHORT_PATH_POSITIONS
    activation = get_activation(config.hidden_act)
    for layer in encoder.transformer_layers:
        att = layer.attention
        q, k, v = (_split_heads(_dense(x, dense, kernels), to_heads, split)
                   for dense in (att.query, att.key, att.value))  # [B, n, L, d]
        context = _merge_heads(_attention(q, k, v, mask_bias, scale, short), from_heads, split)
        x = _layer_norm(x + _dense(context, layer.attention_output, kernels),
                        layer.attention_layer_norm)
        ffn = _dense(activation(_dense(x, layer.intermediate, kernels)), layer.output_dense,
                     kernels)
        x = _layer_norm(x + ffn, layer.output_layer_norm)
    return tf.reshape(x, [batch, length, hidden])


def _serving_head(model, inputs: dict):
    """The function sequence_output -> outputs that model_outputs applies after
    serving_sequence_output, or None where the model runs through its Keras call."""
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
    return head if head is not None and supported(model.encoder) else None


def runs_serving_encoder(model) -> bool:
    """Whether model_outputs runs this model's encoder as serving_sequence_output (so
    that Bfloat16Kernels apply): a float32 fine-tuned or RTD model."""
    return _serving_head(model, {}) is not None


def model_outputs(model, inputs: dict, kernels=None) -> dict:
    """The exported model's outputs in inference mode, its encoder run by
    `serving_sequence_output`: a FinetuningModel's head outputs, or an RTD
    discriminator's rtd_logits. Any other model, or one `supported` refuses, runs
    through its Keras call. inputs: input_ids, input_mask, segment_ids. kernels:
    serving_sequence_output's (a model that runs_serving_encoder only)."""
    head = _serving_head(model, inputs)
    if head is None:
        if kernels is not None:
            raise ValueError("bfloat16 kernels need a model that runs_serving_encoder")
        return _tensors(model(inputs, training=False))
    return _tensors(head(serving_sequence_output(model.encoder, inputs["input_ids"],
                                                 inputs["input_mask"], inputs["segment_ids"],
                                                 kernels)))


def _tensors(outputs: dict) -> dict:
    """A model's outputs as TensorFlow tensors. Keras on another backend (the Python
    API's Predictor, run eagerly in a KERAS_BACKEND=jax process) returns its own arrays,
    which the serving graph's shape-reading ops do not take; on TensorFlow, as given."""
    import keras

    if keras.backend.backend() == "tensorflow":
        return outputs
    return {k: tf.convert_to_tensor(np.asarray(v)) for k, v in outputs.items()}
