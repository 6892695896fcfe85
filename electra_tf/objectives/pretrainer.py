"""One pre-training forward pass: generator -> sampling -> discriminator.

`ElectraPretrainer` is a `keras.Model` that holds G and D (built with the
configured weight sharing) and the configured objective (what `model.fit`
trains; the training loops pass each phase's objective to `call`). `call`
returns tensors only; the objective's pure functions turn them into the loss
and metrics. It is backend-portable (`keras.ops` only): the loops of
`electra_tf.training` drive it on either backend, and it also trains with
`model.fit` under KERAS_BACKEND=jax (tests/test_jax_backend.py).

Randomness: `call(batch, seed=...)` takes an int32 seed tensor [2] (the TF
loop passes one per replica and step, see docs/reference.md pitfalls). Without
one, the model's own SeedGenerator is used.
"""

from __future__ import annotations

import keras

from electra_tf.core.config import PretrainingConfig
from electra_tf.modeling.models import (
    RTD_HEAD,
    build_discriminator,
    build_pretraining_models,
    merged_discriminator,
)
from electra_tf.modeling.random import (
    DISCRIMINATOR_SALT,
    GENERATOR_SALT,
    SAMPLING_SALT,
    fold_seed,
    tensor_seed,
)
from electra_tf.objectives.auc import auc_histograms
from electra_tf.objectives.corruption import scatter_at_positions
from electra_tf.objectives.metrics import token_cosine_sums
from electra_tf.objectives.variants import get_objective

INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")


class ElectraPretrainer(keras.Model):
    """G + Gumbel sampling + D, with the loss left to `objective`.

    Args:
      config: the pre-training hyperparameters.
      objective: defaults to get_objective(config), the config's objective; Electric's
        cloze loss also needs the special ids, `get_objective(config, masking)`
        (a data.masking.MaskingConfig), without which its first step says so.
    """

    def __init__(self, config: PretrainingConfig, objective=None, **kwargs):
        kwargs.setdefault("name", "electra_pretrainer")
        super().__init__(**kwargs)
        self.config = config
        self.objective = objective or get_objective(config)
        # === Layers ===
        self.generator, self.discriminator = build_pretraining_models(
            config.encoders, head_kind=self.objective.head_kind)
        self.seed_generator = keras.random.SeedGenerator(config.seed, name="pretrainer_seed")

    def call(self, batch, training=False, seed=None, objective=None):
        """Runs G on the masked batch, samples, runs D on the corrupted batch.

        Args:
          batch: dict of int tensors: input_ids (masked), input_mask,
            segment_ids [B, L]; masked_lm_positions, masked_lm_ids [B, N];
            float masked_lm_weights [B, N].
          training: dropout on.
          seed: optional int32 tensor [2].
          objective: what builds D's input (default: the configured
            objective); a training phase passes its own (two-stage training).

        Returns:
          dict: mlm_logits float32 [B, N, V]; and when the objective trains a
          discriminator, fake (dict of input_ids, labels, sampled_ids,
          original_ids, and with adversarial training the generator's
          baseline_logits [B, N] for its samples, with Electric the cloze_logits
          [B, L, V]) and disc (D's head outputs:
          rtd_logits float32 [B, L], or for the MLM-style ablations
          mlm_logits and copy_logits).
        """
        objective = objective or self.objective
        if seed is None:
            seed = self.seed_generator.next()
        gen_inputs = {k: batch[k] for k in INPUT_KEYS + ("masked_lm_positions",)}
        if objective.unmasked_generator:  # Electric's cloze towers read the original text
            gen_inputs["input_ids"] = scatter_at_positions(
                batch["input_ids"], batch["masked_lm_positions"], batch["masked_lm_ids"],
                batch["masked_lm_weights"])
        gen = self.generator(gen_inputs, training=training, seed=fold_seed(seed, GENERATOR_SALT))
        mlm_logits = gen["mlm_logits"]
        outputs = {"mlm_logits": mlm_logits}
        if not objective.uses_discriminator:
            return outputs
        fake = objective.fake_data(batch, mlm_logits, tensor_seed(fold_seed(seed, SAMPLING_SALT)))
        if "baseline_logits" in gen:  # adversarial training's learned baseline, per sample
            fake = {**fake, "baseline_logits": gen["baseline_logits"]}
        if "cloze_logits" in gen:  # Electric's cloze distribution at every position
            fake = {**fake, "cloze_logits": gen["cloze_logits"]}
        disc_inputs = {"input_ids": fake["input_ids"], "input_mask": batch["input_mask"],
                       "segment_ids": batch["segment_ids"],
                       "masked_lm_positions": batch["masked_lm_positions"]}
        outputs["fake"] = fake
        outputs["disc"] = self.discriminator(disc_inputs, training=training,
                                             seed=fold_seed(seed, DISCRIMINATOR_SALT))
        return outputs

    def losses_from(self, batch, outputs, objective=None) -> dict:
        """The objective's loss dict ("loss" and its components)."""
        objective = objective or self.objective
        return objective.compute_loss(batch, outputs["mlm_logits"], outputs.get("fake"),
                                      outputs.get("disc"))

    def metric_sums_from(self, batch, outputs, objective=None) -> dict:
        """The objective's (numerator, denominator) metric pairs."""
        objective = objective or self.objective
        return objective.metric_sums(batch, outputs["mlm_logits"], outputs.get("fake"),
                                     outputs.get("disc"))

    def losses_and_metric_sums(self, batch, outputs, objective=None,
                               evaluation: bool = False) -> tuple[dict, dict]:
        """Losses, metric sums ("<name>/num", "<name>/den") and the AUC histograms.

        What a training or eval step reports: the sums add up over steps and
        replicas (objectives.metrics), the histograms give disc_auc
        (objectives.auc). `evaluation` adds disc_token_cosine, the spread of
        the discriminator's token states (objectives.metrics.token_cosine_sums).
        """
        losses = self.losses_from(batch, outputs, objective)
        sums = {}
        metric_sums = self.metric_sums_from(batch, outputs, objective)
        if evaluation and "sequence_output" in outputs.get("disc", {}):
            metric_sums["disc_token_cosine"] = token_cosine_sums(
                outputs["disc"]["sequence_output"], batch["input_mask"])
        for name, (num, den) in metric_sums.items():
            sums[name + "/num"], sums[name + "/den"] = num, den
        if "rtd_logits" in outputs.get("disc", {}):
            objective = objective or self.objective
            sums["auc/pos"], sums["auc/neg"] = auc_histograms(
                objective.rtd_logits(outputs["fake"], outputs["disc"]),
                outputs["fake"]["labels"], batch["input_mask"])
        return losses, sums

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """For model.fit (e.g. under JAX): the objective's total loss."""
        del y, sample_weight, training
        return self.losses_from(x, y_pred)["loss"]

    def kept_discriminator(self):
        """The model users fine-tune, as a discriminator with the RTD head.

        ELECTRA: the discriminator itself, or with gradient-disentangled
        embeddings a copy holding the merged tables. BERT-MLM: the generator's encoder.
        Replace-MLM / All-Tokens MLM: the main model's encoder (its RTD head
        is freshly initialized; fine-tuning does not use it).
        """
        uses_d = self.objective.uses_discriminator
        if uses_d and self.discriminator.head_kind == RTD_HEAD:
            if self.config.gradient_disentangled_embeddings:
                return merged_discriminator(self.discriminator)
            return self.discriminator
        source = self.discriminator.encoder if uses_d else self.generator.encoder
        kept = build_discriminator(source.config)
        kept.encoder.set_weights(source.get_weights())
        return kept

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
