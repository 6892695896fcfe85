"""Pre-training eval metrics as sums, as the original run_pretraining.py.

Every metric is a (numerator, denominator) pair of float32 scalars, so
batches and replicas aggregate by addition and the training loop divides at
the end. disc_auc is not a ratio of sums: the loop bins `disc_probs`.
disc_token_cosine (the evaluation's only) measures the discriminator's
representations rather than its predictions: `token_cosine_sums`.

Pure `keras.ops`: no TensorFlow import.
"""

from __future__ import annotations

from keras import ops

from electra_tf.objectives.losses import disc_per_example_loss, softmax_cross_entropy


def disc_probs(logits):
    """P(replaced) per token, float32 [B, L], for the AUC metric.

    The original fed AUC probs * input_mask with labels * input_mask, which
    counts padding as confident negatives; pass input_mask as the AUC's
    sample_weight instead to leave padding out.
    """
    return ops.sigmoid(ops.cast(logits, "float32"))


def pretraining_metric_sums(
    mlm_logits,
    masked_lm_ids,
    masked_lm_weights,
    sampled_ids=None,
    disc_logits=None,
    disc_labels=None,
    input_mask=None,
) -> dict:
    """Numerators and denominators of the original's eval metrics.

    Args:
        mlm_logits: float [B, N, V], the generator's logits at the masked slots.
        masked_lm_ids: int [B, N], the original ids.
        masked_lm_weights: float [B, N], 0 for padding slots.
        sampled_ids: optional int [B, N], the generator's samples; adds
            sampled_masked_lm_accuracy.
        disc_logits: optional float [B, L]; with disc_labels and input_mask
            adds the disc_* metrics.
        disc_labels: [B, L], from `rtd_labels`.
        input_mask: [B, L].

    Returns:
        dict name -> (numerator, denominator), float32 scalars:
        masked_lm_accuracy: argmax(G) == original, weighted by the slot weights.
        masked_lm_loss: CE weighted by the slot weights.
        sampled_masked_lm_accuracy: sample == original, weighted.
        disc_loss: the mean over sequences of each sequence's mean token loss
            (the original's per_example_loss metric; the training loss
            instead weights every token equally).
        disc_accuracy: (logit > 0) == label over input_mask.
        disc_precision: correct among predicted-replaced tokens.
        disc_recall: correct among replaced tokens.
    """
    w = ops.cast(masked_lm_weights, "float32")
    ids = ops.cast(masked_lm_ids, "int32")
    w_sum = ops.sum(w)
    preds = ops.cast(ops.argmax(mlm_logits, axis=-1), "int32")
    sums = {
        "masked_lm_accuracy": (ops.sum(w * ops.cast(ops.equal(preds, ids), "float32")), w_sum),
        "masked_lm_loss": (ops.sum(w * softmax_cross_entropy(mlm_logits, ids)), w_sum),
    }
    if sampled_ids is not None:
        hit = ops.cast(ops.equal(ops.cast(sampled_ids, "int32"), ids), "float32")
        sums["sampled_masked_lm_accuracy"] = (ops.sum(w * hit), w_sum)
    if disc_logits is not None:
        if disc_labels is None or input_mask is None:
            raise ValueError("disc metrics need disc_labels and input_mask")
        mask = ops.cast(input_mask, "float32")
        labels = ops.cast(disc_labels, "float32")
        pred = ops.cast(ops.greater(ops.cast(disc_logits, "float32"), 0.0), "float32")
        correct = ops.cast(ops.equal(pred, labels), "float32") * mask
        per_example = disc_per_example_loss(disc_logits, labels, mask)
        sums["disc_loss"] = (ops.sum(per_example), ops.cast(ops.shape(per_example)[0], "float32"))
        sums["disc_accuracy"] = (ops.sum(correct), ops.sum(mask))
        sums["disc_precision"] = (ops.sum(correct * pred), ops.sum(mask * pred))
        sums["disc_recall"] = (ops.sum(correct * labels), ops.sum(mask * labels))
    return sums


# Sequences and positions per sequence that token_cosine_sums samples: at most
# 32 x 8 = 256 states (65,280 pairs) per eval batch, a few [256, H] sums.
COSINE_SEQUENCES = 32
COSINE_POSITIONS = 8


def token_cosine_sums(sequence_output, input_mask, sequences: int = COSINE_SEQUENCES,
                      positions: int = COSINE_POSITIONS) -> tuple:
    """The mean pairwise cosine of final token states, as a (sum, count) pair.

    Over n unit vectors u, the sum of u_i . u_j over all ordered pairs is
    |sum u|^2, so no [n, n] matrix is built; the n self-pairs are taken out.

    How spread the discriminator's representations are: near 0.4 at random
    initialization, 0.84-0.91 when a short pre-training has made the token
    states all but collinear and fine-tuning from them does worse than from
    random weights (studies/real_data/FINDINGS.md). A sample keeps it cheap:
    the first `sequences` sequences of the batch, every (L // positions)-th
    position of each; padding and self-pairs are left out, and every pair of
    real states (across sequences too) counts once each way.

    Args:
        sequence_output: float [B, L, H], the encoder's final states.
        input_mask: [B, L], 1 at real tokens.
        sequences, positions: the sample's size (static).

    Returns:
        (sum of the pairs' cosines, number of pairs), float32 scalars.
    """
    length = sequence_output.shape[1]
    stride = max(1, length // positions) if length else 1
    states = ops.cast(sequence_output[:sequences, ::stride], "float32")
    weights = ops.cast(input_mask[:sequences, ::stride], "float32")
    states = ops.reshape(states, (-1, ops.shape(states)[-1]))
    weights = ops.reshape(weights, (-1,))
    unit = states / ops.maximum(ops.norm(states, axis=-1, keepdims=True), 1e-12)
    weighted = unit * weights[:, None]
    total = ops.sum(weighted, axis=0)  # sum over pairs of u_i . u_j = |sum u_i|^2
    self_pairs = ops.sum(ops.sum(weighted * weighted, axis=-1))
    count = ops.sum(weights)
    return ops.sum(total * total) - self_pairs, count * count - count
