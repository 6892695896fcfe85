"""Electric (Clark et al. 2020b, "Pre-Training Transformers as Energy-Based Cloze
Models"): the original's `electric_objective` (run_pretraining.py).

The generator is the two-tower cloze model (modeling/electric.py), run on the
*unmasked* input; its cloze logits q(. | x_\\t) exist at every position.

- Cloze loss: mean over the candidate positions (real tokens but [CLS],
  [SEP], [MASK]; the original's get_candidates_mask) of -log q(x_t | x_\\t)
  (the original's `cloze_predictions` softmax output), scaled by gen_weight.
- Fakes: at the masked positions, samples of q (temperature,
  disallow_correct as ELECTRA's). EVERY sampled position is labelled fake
  (1), also where the sample equals the original token (unlike ELECTRA).
- Discriminator (noise-contrastive estimation): the RTD head's output is the
  energy E(x)_t; the logit of "fake" is
      E(x)_t + stop_gradient(log q(x'_t | x_\\t)) + log(mask_prob / (1 - mask_prob)),
  with x' the corrupted input and q the cloze distribution of the original
  context; sigmoid cross-entropy over every real token, scaled by disc_weight.

L = gen_weight * L_cloze + disc_weight * L_disc (the original's total_loss).
Scoring (serving/scoring.py, the paper's section 5): -sum_t E(x)_t.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

from keras import ops

from electra_tf.objectives import corruption, losses, metrics, sampling
from electra_tf.objectives.electra import ElectraObjective


def masked_positions(positions, weights, seq_length):
    """float32 [B, L]: 1 at the real masked slots' positions, as the original's
    scatter_update mask (which never marks position 0)."""
    onehot = ops.one_hot(ops.cast(positions, "int32"), seq_length)  # [B, N, L]
    hit = ops.sum(onehot * ops.cast(ops.greater(weights, 0), "float32")[..., None], axis=1)
    not_first = ops.cast(ops.greater(ops.arange(seq_length), 0), "float32")[None]
    return ops.minimum(hit, 1.0) * not_first


def candidates_mask(input_ids, input_mask, special_ids):
    """float32 [B, L]: real tokens that are none of `special_ids` (the original's
    get_candidates_mask: not [SEP], [CLS], [MASK], not padding)."""
    keep = ops.cast(input_mask, "float32")
    ids = ops.cast(input_ids, "int32")
    for special in special_ids:
        keep = keep * ops.cast(ops.not_equal(ids, special), "float32")
    return keep


def cloze_loss(cloze_logits, ids, weights):
    """sum(w * -log softmax(logits)[ids]) / (sum(w) + 1e-6), the original's
    get_softmax_output over every position. cloze_logits [B, L, V], ids, weights [B, L]."""
    return losses.mlm_loss(cloze_logits, ids, weights)


def log_q(cloze_logits, ids):
    """float32 [B, L]: log softmax(cloze_logits)[ids] at every position."""
    return -losses.softmax_cross_entropy(cloze_logits, ids)


def nce_logits(energy, cloze_logits, corrupted_ids, mask_prob: float):
    """The logit of "fake" the discriminator's loss reads (the original's
    `_get_discriminator_output` with electric_objective):
    E + stop_gradient(log q(x'_t)) + log(mask_prob / (1 - mask_prob))."""
    correction = ops.stop_gradient(log_q(cloze_logits, corrupted_ids))
    return (ops.cast(energy, "float32") + correction
            + math.log(mask_prob / (1.0 - mask_prob)))


@dataclasses.dataclass(frozen=True)
class ElectricObjective(ElectraObjective):
    """Electric's NCE objective, with the original's hyperparameters.

    `special_ids` ([CLS], [SEP], [MASK]) exclude those tokens from the cloze
    loss; the training loop fills them from the vocab
    (`objectives.variants.get_objective(config, masking)`).
    """

    mask_prob: float = 0.15
    special_ids: tuple = ()

    name: ClassVar[str] = "electric"
    unmasked_generator: ClassVar[bool] = True  # G reads the unmasked input

    @classmethod
    def from_config(cls, config) -> "ElectricObjective":
        """From a PretrainingConfig (special_ids stay empty: see get_objective)."""
        return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(cls)
                      if f.name != "special_ids"})

    def fake_data(self, batch, mlm_logits, seed):
        """As ELECTRA's, but every sampled (real, masked) position is labelled 1."""
        positions = batch["masked_lm_positions"]
        weights = batch["masked_lm_weights"]
        sampled = sampling.sample_from_logits(
            mlm_logits, seed, temperature=self.temperature,
            disallow_ids=batch["masked_lm_ids"] if self.disallow_correct else None)
        original = corruption.scatter_at_positions(
            batch["input_ids"], positions, batch["masked_lm_ids"], weights)
        corrupted = corruption.scatter_at_positions(batch["input_ids"], positions, sampled,
                                                    weights)
        length = ops.shape(batch["input_ids"])[1]
        labels = masked_positions(positions, weights, length) * ops.cast(
            batch["input_mask"], "float32")
        return {"input_ids": corrupted, "labels": labels, "sampled_ids": sampled,
                "original_ids": original}

    def rtd_logits(self, fake, disc_outputs):
        """The NCE-corrected logit of "fake" [B, L] (what the loss, the metrics and
        the AUC read; the raw head output is the energy)."""
        return nce_logits(disc_outputs["rtd_logits"], fake["cloze_logits"],
                          fake["input_ids"], self.mask_prob)

    def compute_loss(self, batch, mlm_logits, fake, disc_outputs):
        """loss, cloze_loss (what G trains), mlm_loss (the cloze loss at the
        masked slots, the original's masked_lm_loss) and disc_loss."""
        if not self.special_ids:
            raise ValueError("ElectricObjective needs special_ids ([CLS], [SEP], [MASK]) for "
                             "its cloze loss: build it with get_objective(config, masking)")
        original = fake["original_ids"]
        weights = candidates_mask(original, batch["input_mask"], self.special_ids)
        cloze = cloze_loss(fake["cloze_logits"], original, weights)
        mlm = losses.mlm_loss(mlm_logits, batch["masked_lm_ids"], batch["masked_lm_weights"])
        disc = losses.disc_loss(self.rtd_logits(fake, disc_outputs), fake["labels"],
                                batch["input_mask"])
        return {"loss": self.gen_weight * cloze + self.disc_weight * disc,
                "cloze_loss": cloze, "mlm_loss": mlm, "disc_loss": disc}

    def metric_sums(self, batch, mlm_logits, fake, disc_outputs):
        """The original's eval metrics, the disc ones on the NCE-corrected logits."""
        return metrics.pretraining_metric_sums(
            mlm_logits, batch["masked_lm_ids"], batch["masked_lm_weights"],
            sampled_ids=fake["sampled_ids"], disc_logits=self.rtd_logits(fake, disc_outputs),
            disc_labels=fake["labels"], input_mask=batch["input_mask"])
