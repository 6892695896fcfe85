"""The generator's MLM head works at the masked positions only: no tensor of a
training step's forward and backward pass spans the sequence and the vocabulary.

The vocabulary-wide work (the tied [E, V] projection, the softmax, the Gumbel
sample) is the largest per-position cost of the generator; gathering the N masked
positions before it (modeling/heads.py, MaskedLMHead) keeps it at N / L of what the
whole sequence would cost. Checked on the step's TensorFlow graph (the model code
is the same on both backends).
"""

import tensorflow as tf
from helpers import TINY_MODEL

from electra_tf.core.config import PretrainingConfig
from electra_tf.objectives.pretrainer import ElectraPretrainer

B, L, N, V = 3, 11, 2, 53  # distinct from each other and from the tiny model's widths


def test_no_tensor_of_the_training_step_spans_the_sequence_and_the_vocabulary():
    config = PretrainingConfig(model_size="tiny", vocab_size=V, max_seq_length=L,
                               max_predictions_per_seq=N, model_hparam_overrides=TINY_MODEL,
                               generator_hidden_size=0.5)
    model = ElectraPretrainer(config)
    model.build_with_dummy_batch()

    @tf.function
    def step(batch):
        with tf.GradientTape() as tape:
            outputs = model(batch, training=True, seed=tf.constant([1, 2]))
            losses, _ = model.losses_and_metric_sums(batch, outputs)
        return losses["loss"], tape.gradient(losses["loss"], model.trainable_variables)

    specs = {k: tf.TensorSpec((B, L), tf.int32) for k in ("input_ids", "input_mask",
                                                          "segment_ids")}
    specs.update(masked_lm_positions=tf.TensorSpec((B, N), tf.int32),
                 masked_lm_ids=tf.TensorSpec((B, N), tf.int32),
                 masked_lm_weights=tf.TensorSpec((B, N), tf.float32))
    graph = step.get_concrete_function(specs).graph
    shapes = {tuple(t.shape.as_list()) for op in graph.get_operations() for t in op.outputs
              if t.shape.rank}
    assert (B, N, V) in shapes  # the head's logits are in the graph
    wide = sorted(s for s in shapes if V in s and (L in s or B * L in s))
    assert not wide, wide
