"""Overfit one batch: the whole forward/backward/update path can learn."""

import keras
import numpy as np
import tensorflow as tf

from electra_tf.core.config import PretrainingConfig
from electra_tf.data.masking import MaskingConfig, mask_batch
from electra_tf.objectives.pretrainer import ElectraPretrainer
from electra_tf.training.optimization import create_optimizer

V, L, B = 120, 16, 8


def test_overfits_a_fixed_batch():
    cfg = PretrainingConfig(
        model_size="tiny", vocab_size=V, max_seq_length=L, generator_hidden_size=0.5, seed=0,
        model_hparam_overrides={"embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
                                "num_attention_heads": 2, "intermediate_size": 64,
                                "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0})
    keras.utils.set_random_seed(0)
    model = ElectraPretrainer(cfg)
    model.build_with_dummy_batch()
    opt = create_optimizer(3e-3, 1000, 0, weight_decay_rate=0.0)
    opt.build(model.trainable_variables)
    rng = np.random.default_rng(0)
    ids = rng.integers(110, V, size=(B, L)).astype(np.int32)
    ids[:, 0], ids[:, -1] = 101, 102
    masking = MaskingConfig(0.15, 3, mask_id=103, cls_id=101, sep_id=102, vocab_size=V)
    batch = mask_batch(tf.constant(ids), tf.ones((B, L), tf.int32), tf.constant([0, 0]), masking)
    batch.update(input_mask=tf.ones((B, L), tf.int32), segment_ids=tf.zeros((B, L), tf.int32))

    @tf.function
    def step(seed):
        with tf.GradientTape() as tape:
            losses = model.losses_from(batch, model(batch, training=True, seed=seed))
        grads = tape.gradient(losses["loss"], model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return losses

    first = step(tf.constant([0, 0]))
    for i in range(1, 150):
        last = step(tf.constant([0, i]))
    assert float(last["mlm_loss"]) < 0.25 * float(first["mlm_loss"]), (first, last)
    assert float(last["disc_loss"]) < 0.5 * float(first["disc_loss"]), (first, last)
