"""Pre-training objectives: pure functions of tensors (`keras.ops` only).

`electra.ElectraObjective` is the default (replaced token detection);
`losses`, `sampling`, `corruption` and `metrics` hold the pieces that the
paper's variants (BERT-MLM, ELECTRA-15%, Replace-MLM, All-Tokens MLM) reuse.
"""

from electra_tf.objectives.base import Objective
from electra_tf.objectives.corruption import rtd_labels, scatter_at_positions
from electra_tf.objectives.electra import ElectraObjective
from electra_tf.objectives.losses import (
    disc_loss,
    disc_per_example_loss,
    electra_loss,
    mlm_loss,
    sigmoid_cross_entropy,
    softmax_cross_entropy,
)
from electra_tf.objectives.metrics import (
    disc_probs,
    pretraining_metric_sums,
    token_cosine_sums,
)
from electra_tf.objectives.sampling import as_seed, sample_from_logits

__all__ = [
    "ElectraObjective",
    "Objective",
    "as_seed",
    "disc_loss",
    "disc_per_example_loss",
    "disc_probs",
    "electra_loss",
    "softmax_cross_entropy",
    "mlm_loss",
    "pretraining_metric_sums",
    "rtd_labels",
    "sample_from_logits",
    "scatter_at_positions",
    "sigmoid_cross_entropy",
    "token_cosine_sums",
]
