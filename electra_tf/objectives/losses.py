"""The generator's and discriminator's losses (paper section 2, eq. 1).

Every loss is computed in float32 (under mixed_bfloat16 the logits arrive in
bf16). Pure `keras.ops`: no TensorFlow import. `sigmoid_cross_entropy` is
also the fine-tuning losses' (`electra_tf.tasks.losses`).

Shapes: B batch, L sequence length, N max_predictions_per_seq, V vocab.
"""

from __future__ import annotations

from keras import ops


def softmax_cross_entropy(logits, ids):
    """Cross-entropy -log softmax(logits)[ids] over the last axis, in float32.

    The one softmax cross-entropy of electra_tf: the generator's MLM loss per
    masked slot, and every fine-tuning head's loss.

    The target's log-probability is picked with a one-hot product, as the
    original's `_get_masked_lm_output` (`reduce_sum(log_probs * one_hot)`):
    the same values as a gather, and on TensorFlow a cheaper gradient. A
    gather's gradient there is an UnsortedSegmentSum into a zeroed [..., V]
    tensor, which for the generator's [128, 19, 30522] logits took about 0.2 s
    more per step on a 2-core CPU (benchmarks/pretraining_profile_intel.md).

    Args:
        logits: float [..., V].
        ids: int [...], the target ids, in [0, V).

    Returns:
        float32 [...].
    """
    log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    target = ops.one_hot(ops.cast(ids, "int32"), ops.shape(log_probs)[-1], dtype="float32")
    return -ops.sum(log_probs * target, axis=-1)


def mlm_loss(logits, ids, weights):
    """The generator's MLM loss, as the original's `_get_masked_lm_output`.

    sum(w * CE) / (sum(w) + 1e-6): the mean over the real masked slots.

    Args:
        logits: float [B, N, V], the generator's logits at the masked slots.
        ids: int [B, N], masked_lm_ids (the original tokens).
        weights: float [B, N], masked_lm_weights (0 for padding slots).

    Returns:
        float32 scalar.
    """
    weights = ops.cast(weights, "float32")
    per_slot = softmax_cross_entropy(logits, ids)
    return ops.sum(weights * per_slot) / (ops.sum(weights) + 1e-6)


def sigmoid_cross_entropy(logits, labels):
    """Elementwise sigmoid cross-entropy with logits, numerically stable.

    max(x, 0) - x * z + log(1 + exp(-|x|)), written with `where` as tf.nn's, so
    that the gradient is sigmoid(x) - z at x = 0 too (the max/abs form gives
    1 - z there).

    Returns:
        float32, the shape of `logits`.
    """
    x = ops.cast(logits, "float32")
    z = ops.cast(labels, "float32")
    positive = ops.greater_equal(x, 0.0)
    relu = ops.where(positive, x, ops.zeros_like(x))
    neg_abs = ops.where(positive, -x, x)
    return relu - x * z + ops.log1p(ops.exp(neg_abs))


def disc_per_example_loss(logits, labels, input_mask):
    """Each sequence's mean token loss, the original's `per_example_loss`.

    Args:
        logits: float [B, L]. labels: [B, L]. input_mask: [B, L].

    Returns:
        float32 [B].
    """
    mask = ops.cast(input_mask, "float32")
    losses = sigmoid_cross_entropy(logits, labels) * mask
    return ops.sum(losses, axis=-1) / (ops.sum(mask, axis=-1) + 1e-6)


def disc_loss(logits, labels, input_mask):
    """The discriminator's loss, as the original's `_get_discriminator_output`.

    sum(mask * sigmoid_CE) / (sum(mask) + 1e-6) over every real token;
    [CLS] and [SEP] take part with label 0.

    Args:
        logits: float [B, L], one logit per token (> 0: "replaced").
        labels: [B, L], from `rtd_labels`.
        input_mask: [B, L], 1 for real tokens.

    Returns:
        float32 scalar.
    """
    mask = ops.cast(input_mask, "float32")
    losses = sigmoid_cross_entropy(logits, labels) * mask
    return ops.sum(losses) / (ops.sum(mask) + 1e-6)


def electra_loss(mlm, disc, gen_weight: float = 1.0, disc_weight: float = 50.0):
    """L = gen_weight * L_MLM + disc_weight * L_Disc (lambda = 50, section 2)."""
    return gen_weight * mlm + disc_weight * disc
