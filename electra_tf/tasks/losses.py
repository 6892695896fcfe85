"""Fine-tuning losses: pure keras.ops functions of logits and targets.

Each head class (tasks/heads/) picks its loss here (`Head.loss`) and says
what it sums over (`Head.loss_count`).

As the original's run_finetuning.py, the loss is SUMMED over the batch: each
task's `get_prediction_module` returns per-example losses, and the original's
FinetuningModel sums them (`tf.reduce_sum`, over the batch and the one-hot
task id). Global-norm clipping at 1.0 therefore acts on the gradient of a sum
over 32 examples, as in the original (on a mean it would almost never act).
The per-example losses are the original's:

- sequence_classification (classification_tasks.py): softmax cross-entropy;
  with `regression` (STS-B) squared error;
- squad (qa_tasks.py): (CE(start) + CE(end)) / 2, plus 0.5 x sigmoid CE of the
  answerability logit for SQuAD 2.0 (the original's logit predicts
  "impossible"; ours predicts "answerable" and is trained against
  1 - is_impossible, the same loss with the logit's sign flipped);
- token_classification (tagging_tasks.py): token cross-entropy times
  tag_weights (the first wordpiece of each word a window owns), summed over
  the tokens: the batch's loss is the sum over all weighted tokens.

A head's `loss_count` gives what the sum runs over (examples; weighted tokens
for token_classification), so that a loop can report the readable mean, loss /
count. A task's `loss` and `loss_count` (base.Task) are its head's.

Training pads each epoch's last batch to the full batch with rows of weight 0
(labels[EXAMPLE_WEIGHT], float [B], 1 on real rows), as the original pads its
train file to a multiple of the batch with rows of no task (task_id outside
the one-hot): every loss takes that weight, and such a row adds nothing.

Everything is computed in float32 with the pre-training losses' own softmax
and sigmoid cross-entropies (`electra_tf.objectives.losses`).
"""

from __future__ import annotations

from keras import ops

from electra_tf.objectives.losses import sigmoid_cross_entropy, softmax_cross_entropy

ANSWERABLE_WEIGHT = 0.5
EXAMPLE_WEIGHT = "example_weight"  # the train batches' row weights (1 real, 0 padding)


def _weighted_sum(per_example, weight):
    """sum(per_example [B] x weight [B]); weight None: every row counts once."""
    if weight is None:
        return ops.sum(per_example)
    return ops.sum(per_example * ops.cast(weight, "float32"))


def example_count(labels, first: str):
    """What an example-summed loss sums over, float32: the rows of weight 1
    (labels[EXAMPLE_WEIGHT], at least 1: a replica given only padding rows reports
    a mean of 0), else the rows of labels[first]."""
    if EXAMPLE_WEIGHT in labels:
        return ops.maximum(ops.sum(ops.cast(labels[EXAMPLE_WEIGHT], "float32")), 1.0)
    return ops.cast(ops.shape(labels[first])[0], "float32")


def classification_loss(logits, label, weight=None):
    """logits [B, C], label int [B] (weight [B]) -> scalar: the summed cross-entropy."""
    return _weighted_sum(softmax_cross_entropy(logits, label), weight)


def regression_loss(logits, label, weight=None):
    """logits [B], label float [B] (weight [B]) -> scalar: the summed squared error."""
    return _weighted_sum(
        ops.square(ops.cast(logits, "float32") - ops.cast(label, "float32")), weight)


def span_loss(start_logits, end_logits, start_positions, end_positions,
              answerable_logits=None, is_impossible=None, weight=None,
              answerable_weight: float = ANSWERABLE_WEIGHT):
    """Start/end CE over [B, L] logits, plus the answerability loss times
    `answerable_weight` (the original's answerable_weight, 0.5), summed."""
    per_example = 0.5 * (softmax_cross_entropy(start_logits, start_positions)
                         + softmax_cross_entropy(end_logits, end_positions))
    if answerable_logits is not None:
        answerable = 1.0 - ops.cast(is_impossible, "float32")
        per_example = per_example + answerable_weight * sigmoid_cross_entropy(
            answerable_logits, answerable)
    return _weighted_sum(per_example, weight)


def token_weights(tag_weights, weight=None):
    """tag_weights [B, L] times the rows' weight [B] (None: 1), float32 [B, L]."""
    w = ops.cast(tag_weights, "float32")
    return w if weight is None else w * ops.cast(weight, "float32")[:, None]


def tagging_loss(tag_logits, tag_ids, tag_weights, weight=None):
    """tag_logits [B, L, T], tag_ids int [B, L], tag_weights [B, L] (weight [B]) -> scalar.

    The weighted token cross-entropy summed over every token of the batch.
    """
    return ops.sum(softmax_cross_entropy(tag_logits, tag_ids)
                   * token_weights(tag_weights, weight))
