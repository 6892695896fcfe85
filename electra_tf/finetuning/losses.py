"""Fine-tuning losses by head kind: pure keras.ops functions of logits and targets.

All are computed in float32 with the pre-training losses' own softmax and
sigmoid cross-entropies (`electra_tf.objectives.losses`).

- classification: softmax cross-entropy, averaged over the batch;
- regression (STS-B): mean squared error;
- span: (CE(start) + CE(end)) / 2, plus 0.5 x sigmoid CE of the answerability
  logit against "answerable" for SQuAD 2.0 (docs/reference.md, Fine-tuning);
- tagging: token cross-entropy weighted by tag_weights (first wordpieces of
  the words a window owns), divided by the weight sum.
"""

from __future__ import annotations

from keras import ops

from electra_tf.objectives.losses import sigmoid_cross_entropy, softmax_cross_entropy

ANSWERABLE_WEIGHT = 0.5


def classification_loss(logits, label):
    """logits [B, C], label int [B] -> scalar."""
    return ops.mean(softmax_cross_entropy(logits, label))


def regression_loss(logits, label):
    """logits [B], label float [B] -> scalar MSE."""
    return ops.mean(ops.square(ops.cast(logits, "float32") - ops.cast(label, "float32")))


def span_loss(start_logits, end_logits, start_positions, end_positions,
              answerable_logits=None, is_impossible=None):
    """Start/end CE over [B, L] logits, plus the weighted answerability loss."""
    loss = 0.5 * (ops.mean(softmax_cross_entropy(start_logits, start_positions))
                  + ops.mean(softmax_cross_entropy(end_logits, end_positions)))
    if answerable_logits is not None:
        answerable = 1.0 - ops.cast(is_impossible, "float32")
        bce = sigmoid_cross_entropy(answerable_logits, answerable)
        loss = loss + ANSWERABLE_WEIGHT * ops.mean(bce)
    return loss


def tagging_loss(tag_logits, tag_ids, tag_weights):
    """tag_logits [B, L, T], tag_ids int [B, L], tag_weights [B, L] -> scalar."""
    w = ops.cast(tag_weights, "float32")
    return ops.sum(softmax_cross_entropy(tag_logits, tag_ids) * w) / (ops.sum(w) + 1e-6)


def task_loss(kind: str, outputs: dict, labels: dict):
    """Dispatches on the head kind; `labels` as base.Features.labels."""
    if kind == "classification":
        return classification_loss(outputs["logits"], labels["label"])
    if kind == "regression":
        return regression_loss(outputs["logits"], labels["label"])
    if kind == "span":
        return span_loss(outputs["start_logits"], outputs["end_logits"],
                         labels["start_positions"], labels["end_positions"],
                         outputs.get("answerable_logits"), labels.get("is_impossible"))
    if kind == "tagging":
        return tagging_loss(outputs["tag_logits"], labels["tag_ids"], labels["tag_weights"])
    raise ValueError(f"unknown head kind {kind!r}")
