"""The discriminator's ROC AUC over many batches, as score histograms.

Per batch, `auc_histograms` counts the real tokens' P(replaced) in `bins`
equal buckets, separately for replaced and original tokens (`keras.ops`, so
it runs inside any backend's compiled step and sums across replicas). On the
host, `auc_from_histograms` turns the summed counts into the AUC with
trapezoids, as keras.metrics.AUC does with its default 200 thresholds.
"""

from __future__ import annotations

import numpy as np
from keras import ops

from electra_tf.objectives.metrics import disc_probs

AUC_BINS = 200  # thresholds of the bucketed disc_auc, as keras.metrics.AUC's default


def auc_histograms(rtd_logits, labels, input_mask, bins: int = AUC_BINS):
    """Histograms of P(replaced), for replaced and original real tokens.

    Args:
      rtd_logits: float [B, L], the discriminator's logits.
      labels: float [B, L], 1 where the token was replaced.
      input_mask: [B, L], 1 on real tokens.
      bins: number of buckets of [0, 1].

    Returns:
      (positives, negatives): float32 [bins] counts.
    """
    probs = disc_probs(rtd_logits)
    index = ops.minimum(ops.cast(probs * bins, "int32"), bins - 1)
    onehot = ops.one_hot(index, bins) * ops.cast(input_mask, "float32")[..., None]
    labels = ops.cast(labels, "float32")[..., None]
    return (ops.sum(onehot * labels, axis=[0, 1]),
            ops.sum(onehot * (1.0 - labels), axis=[0, 1]))


def auc_from_histograms(pos: np.ndarray, neg: np.ndarray) -> float:
    """ROC AUC from score histograms of positives and negatives (trapezoids)."""
    if pos.sum() == 0 or neg.sum() == 0:
        return float("nan")
    tpr = np.concatenate([[0.0], np.cumsum(pos[::-1]) / pos.sum()])
    fpr = np.concatenate([[0.0], np.cumsum(neg[::-1]) / neg.sum()])
    return float(np.trapezoid(tpr, fpr))
