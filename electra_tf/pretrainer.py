"""One pre-training forward pass: generator -> sampling -> discriminator.

`ElectraPretrainer` is a `keras.Model` that holds G and D (built with the
configured weight sharing) and an objective. `call` returns tensors only; the
objective's pure functions turn them into the loss and metrics. It is
backend-portable (`keras.ops` only): the TF training loop in
`electra_tf.training` drives it under tf.distribute, and it also trains with
`model.fit` under KERAS_BACKEND=jax (tests/test_jax_backend.py, where jax is
installed).

Randomness: `call(batch, seed=...)` takes an int32 seed tensor [2] (the TF
loop passes one per replica and step, see REFERENCE.md pitfalls). Without
one, the model's own SeedGenerator is used.
"""

from __future__ import annotations

import keras

from electra_tf.config import PretrainingConfig
from electra_tf.modeling.models import build_pretraining_models
from electra_tf.modeling.random import fold_seed, tensor_seed
from electra_tf.objectives.variants import get_objective

_GEN_SALT, _SAMPLE_SALT, _DISC_SALT = 101, 102, 103
INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")


class ElectraPretrainer(keras.Model):
    """G + Gumbel sampling + D, with the loss left to `objective`.

    Args:
      config: the pre-training hyperparameters.
      objective: defaults to ElectraObjective.from_config(config).
    """

    def __init__(self, config: PretrainingConfig, objective=None, **kwargs):
        kwargs.setdefault("name", "electra_pretrainer")
        super().__init__(**kwargs)
        self.config = config.validate()
        self.objective = objective or get_objective(config)
        # === Layers ===
        self.generator, self.discriminator = build_pretraining_models(
            config, head_kind=self.objective.head_kind)
        self.seed_generator = keras.random.SeedGenerator(config.seed, name="pretrainer_seed")

    def call(self, batch, training=False, seed=None):
        """Runs G on the masked batch, samples, runs D on the corrupted batch.

        Args:
          batch: dict of int tensors: input_ids (masked), input_mask,
            segment_ids [B, L]; masked_lm_positions, masked_lm_ids [B, N];
            float masked_lm_weights [B, N].
          training: dropout on.
          seed: optional int32 tensor [2].

        Returns:
          dict: mlm_logits float32 [B, N, V]; fake (dict of input_ids, labels,
          sampled_ids, original_ids); rtd_logits float32 [B, L], or for the
          MLM-style ablations disc_outputs (the main model's mlm_logits and
          copy_logits); neither when the objective trains no discriminator.
        """
        if seed is None:
            seed = self.seed_generator.next()
        gen_inputs = {k: batch[k] for k in INPUT_KEYS + ("masked_lm_positions",)}
        mlm_logits = self.generator(gen_inputs, training=training,
                                    seed=fold_seed(seed, _GEN_SALT))["mlm_logits"]
        outputs = {"mlm_logits": mlm_logits}
        if not self.objective.uses_discriminator:
            return outputs
        fake = self.objective.fake_data(batch, mlm_logits,
                                        tensor_seed(fold_seed(seed, _SAMPLE_SALT)))
        disc_inputs = {"input_ids": fake["input_ids"], "input_mask": batch["input_mask"],
                       "segment_ids": batch["segment_ids"],
                       "masked_lm_positions": batch["masked_lm_positions"]}
        outputs["fake"] = fake
        disc = self.discriminator(disc_inputs, training=training,
                                  seed=fold_seed(seed, _DISC_SALT))
        if "rtd_logits" in disc:
            outputs["rtd_logits"] = disc["rtd_logits"]
        else:  # the MLM-style ablations: the objective reads the head's dict
            outputs["disc_outputs"] = {k: disc[k] for k in ("mlm_logits", "copy_logits")
                                       if k in disc}
        return outputs

    def _disc(self, outputs):
        return outputs.get("rtd_logits", outputs.get("disc_outputs"))

    def losses_from(self, batch, outputs) -> dict:
        """The objective's loss dict ("loss" and its components)."""
        return self.objective.compute_loss(batch, outputs["mlm_logits"], outputs.get("fake"),
                                           self._disc(outputs))

    def metric_sums_from(self, batch, outputs) -> dict:
        return self.objective.metric_sums(batch, outputs["mlm_logits"], outputs.get("fake"),
                                          self._disc(outputs))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """For model.fit (e.g. under JAX): the objective's total loss."""
        del y, sample_weight, training
        return self.losses_from(x, y_pred)["loss"]

    def build_with_dummy_batch(self, batch_size: int = 2) -> None:
        """Creates every variable with one forward pass (needed before checkpoints)."""
        from keras import ops

        from electra_tf.modeling.encoder import dummy_inputs

        n = self.config.resolved_max_predictions_per_seq
        batch = dummy_inputs(batch_size, self.config.max_seq_length)
        batch.update(masked_lm_positions=ops.zeros((batch_size, n), "int32"),
                     masked_lm_ids=ops.zeros((batch_size, n), "int32"),
                     masked_lm_weights=ops.zeros((batch_size, n), "float32"))
        self(batch, training=False)
