"""The paper's efficiency ablations as objectives (section 3.5, Table 5).

All share the generator, the masking and the sampling of `ElectraObjective`:
- `bert_mlm`: BERT, as the original's electra_objective=False: one MLM model at
  D's full size (generator_hidden_size and generator_layers do not apply; see
  modeling.models.build_pretraining_models), with the original's masking,
  85% [MASK] / 15% kept (`bert_80_10_10=True`: BERT's 80% [MASK] / 10% random
  / 10% kept); its encoder is the model kept.
- `electra_15`: ELECTRA whose discriminator loss counts only the masked
  (15%) positions.
- `replace_mlm`: the masked positions get generator samples instead of [MASK];
  the main model is trained with MLM on those positions.
- `adversarial` (a training algorithm, section 3.2): G trained by REINFORCE to
  fool D instead of by maximum likelihood.
- `all_tokens_mlm`: Replace-MLM with the MLM loss on every token, through the
  paper's copy mechanism: p(x_t) = D_copy(t) * 1[x_t = input_t] +
  (1 - D_copy(t)) * softmax(logits_t)[x_t], D_copy a sigmoid gate per token.

The "discriminator" of the MLM-style objectives carries an MLM head (and the
copy gate) instead of the RTD head: `head_kind` says which. Losses of the
main model that are MLM-like take weight 1 (disc_weight scales only the
sigmoid RTD losses, as in the paper).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from keras import ops

from electra_tf import config as config_lib
from electra_tf.modeling.models import MLM_ALL_COPY_HEAD, MLM_HEAD, RTD_HEAD
from electra_tf.objectives import losses, metrics
from electra_tf.objectives.electra import ElectraObjective


def generator_mlm_loss(batch, mlm_logits):
    """G's MLM loss over the weighted masked slots (what every variant trains G with)."""
    return losses.mlm_loss(mlm_logits, batch["masked_lm_ids"], batch["masked_lm_weights"])


def masked_position_mask(positions, weights, seq_length):
    """float32 [B, L]: 1 at the used masked positions."""
    onehot = ops.one_hot(ops.cast(positions, "int32"), seq_length)  # [B, N, L]
    return ops.minimum(ops.sum(onehot * ops.cast(weights, "float32")[..., None], axis=1), 1.0)


def copy_mechanism_loss(logits, copy_logits, input_ids, original_ids, input_mask):
    """All-Tokens MLM with the copy mechanism, averaged over real tokens.

    Args:
      logits: float [B, L, V], the main model's MLM logits at every position.
      copy_logits: float [B, L], the copy gate (sigmoid -> P(copy the input)).
      input_ids: int [B, L], what the model read (the corrupted sequence).
      original_ids: int [B, L], the targets.
      input_mask: [B, L].
    Returns:
      scalar: mean over real tokens of -log p(original).
    """
    logits = ops.cast(logits, "float32")
    log_softmax = ops.log_softmax(logits, axis=-1)
    vocab = ops.shape(logits)[-1]
    target = ops.one_hot(ops.cast(original_ids, "int32"), vocab)
    log_p_mlm = ops.sum(target * log_softmax, axis=-1)  # [B, L]
    gate = ops.cast(copy_logits, "float32")
    log_copy = -ops.softplus(-gate)  # log sigmoid
    log_not_copy = -ops.softplus(gate)
    same = ops.cast(ops.equal(input_ids, original_ids), "float32")
    # log(c * 1[same] + (1 - c) * p): with same == 0 the first term vanishes.
    log_p = ops.where(same > 0, ops.logaddexp(log_copy, log_not_copy + log_p_mlm),
                      log_not_copy + log_p_mlm)
    mask = ops.cast(input_mask, "float32")
    return -ops.sum(log_p * mask) / (ops.sum(mask) + 1e-6)


@dataclasses.dataclass(frozen=True)
class BertMlmObjective(ElectraObjective):
    """BERT: one MLM model at D's size, trained alone.

    Masking as the original's (85% [MASK] / 15% kept, no random token);
    `bert_80_10_10` gives BERT's 80/10/10 instead.
    """

    bert_80_10_10: bool = False  # BERT's 80% [MASK] / 10% random / 10% kept

    name: ClassVar[str] = "bert_mlm"
    uses_discriminator: ClassVar[bool] = False
    head_kind: ClassVar[str] = RTD_HEAD

    @property
    def masking(self) -> dict:
        """MaskingConfig options: {} (the original's 85/15) or BERT's 80/10/10."""
        if self.bert_80_10_10:
            return {"mask_token_prob": 0.8, "random_token_prob": 0.1}
        return {}

    def fake_data(self, batch, mlm_logits, seed):
        return {}

    def compute_loss(self, batch, mlm_logits, fake, disc_outputs):
        mlm = generator_mlm_loss(batch, mlm_logits)
        return {"loss": self.gen_weight * mlm, "mlm_loss": mlm}

    def metric_sums(self, batch, mlm_logits, fake, disc_outputs):
        return metrics.pretraining_metric_sums(
            mlm_logits, batch["masked_lm_ids"], batch["masked_lm_weights"])


@dataclasses.dataclass(frozen=True)
class Electra15Objective(ElectraObjective):
    """ELECTRA whose discriminator loss sees only the masked positions."""

    name: ClassVar[str] = "electra_15"

    def compute_loss(self, batch, mlm_logits, fake, disc_outputs):
        mlm = generator_mlm_loss(batch, mlm_logits)
        only_masked = masked_position_mask(batch["masked_lm_positions"],
                                           batch["masked_lm_weights"],
                                           ops.shape(batch["input_ids"])[1])
        disc = losses.disc_loss(disc_outputs["rtd_logits"], fake["labels"], only_masked)
        return {"loss": losses.electra_loss(mlm, disc, self.gen_weight, self.disc_weight),
                "mlm_loss": mlm, "disc_loss": disc}


@dataclasses.dataclass(frozen=True)
class ReplaceMlmObjective(ElectraObjective):
    """Masked positions hold generator samples; the main model does MLM there."""

    name: ClassVar[str] = "replace_mlm"
    head_kind: ClassVar[str] = MLM_HEAD

    def compute_loss(self, batch, mlm_logits, fake, disc_outputs):
        mlm = generator_mlm_loss(batch, mlm_logits)
        main = losses.mlm_loss(disc_outputs["mlm_logits"], batch["masked_lm_ids"],
                               batch["masked_lm_weights"])
        return {"loss": self.gen_weight * mlm + main, "mlm_loss": mlm, "main_mlm_loss": main}

    def metric_sums(self, batch, mlm_logits, fake, disc_outputs):
        sums = metrics.pretraining_metric_sums(
            mlm_logits, batch["masked_lm_ids"], batch["masked_lm_weights"],
            sampled_ids=fake["sampled_ids"])
        main = metrics.pretraining_metric_sums(
            disc_outputs["mlm_logits"], batch["masked_lm_ids"], batch["masked_lm_weights"])
        sums["main_mlm_accuracy"] = main["masked_lm_accuracy"]
        return sums


@dataclasses.dataclass(frozen=True)
class AllTokensMlmObjective(ReplaceMlmObjective):
    """Replace-MLM with the MLM loss on every token and the copy mechanism."""

    name: ClassVar[str] = "all_tokens_mlm"
    head_kind: ClassVar[str] = MLM_ALL_COPY_HEAD

    def compute_loss(self, batch, mlm_logits, fake, disc_outputs):
        mlm = generator_mlm_loss(batch, mlm_logits)
        main = copy_mechanism_loss(disc_outputs["mlm_logits"], disc_outputs["copy_logits"],
                                   fake["input_ids"], fake["original_ids"], batch["input_mask"])
        return {"loss": self.gen_weight * mlm + main, "mlm_loss": mlm, "main_mlm_loss": main}

    def metric_sums(self, batch, mlm_logits, fake, disc_outputs):
        sums = metrics.pretraining_metric_sums(
            mlm_logits, batch["masked_lm_ids"], batch["masked_lm_weights"],
            sampled_ids=fake["sampled_ids"])
        predicted = ops.argmax(disc_outputs["mlm_logits"], axis=-1)
        mask = ops.cast(batch["input_mask"], "float32")
        hit = ops.cast(ops.equal(ops.cast(predicted, "int32"),
                                 ops.cast(fake["original_ids"], "int32")), "float32")
        sums["main_mlm_accuracy"] = (ops.sum(hit * mask), ops.sum(mask))
        return sums


@dataclasses.dataclass(frozen=True)
class AdversarialObjective(ElectraObjective):
    """Adversarial ELECTRA (paper section 3.2): G trained by REINFORCE.

    G's reward for a sampled token is D's loss on it when it replaced the
    original (-log sigmoid(d), "how well it fooled D"), and 0 when it equals
    the original. A batch-mean baseline cuts the variance; the reward and the
    baseline carry no gradient, and nothing flows through the sampling, so G
    learns only through the REINFORCE term. D is trained as in ELECTRA. The
    MLE loss is still reported (as mlm_loss) but not trained.
    """

    name: ClassVar[str] = "adversarial"

    def compute_loss(self, batch, mlm_logits, fake, disc_outputs):
        weights = ops.cast(batch["masked_lm_weights"], "float32")
        positions = ops.cast(batch["masked_lm_positions"], "int32")
        d_at_slots = ops.take_along_axis(ops.cast(disc_outputs["rtd_logits"], "float32"),
                                        positions, axis=1)
        replaced = ops.cast(ops.not_equal(fake["sampled_ids"],
                                          ops.cast(batch["masked_lm_ids"], "int32")), "float32")
        reward = ops.stop_gradient(ops.softplus(-d_at_slots) * replaced * weights)
        denom = ops.sum(weights) + 1e-6
        baseline = ops.stop_gradient(ops.sum(reward) / denom)
        log_probs = ops.log_softmax(ops.cast(mlm_logits, "float32"), axis=-1)
        log_p = ops.take_along_axis(log_probs, ops.cast(fake["sampled_ids"], "int32")[..., None],
                                    axis=-1)[..., 0]
        reinforce = -ops.sum((reward - baseline) * log_p * weights) / denom
        disc = losses.disc_loss(disc_outputs["rtd_logits"], fake["labels"], batch["input_mask"])
        mlm = ops.stop_gradient(generator_mlm_loss(batch, mlm_logits))
        return {"loss": self.gen_weight * reinforce + self.disc_weight * disc,
                "mlm_loss": mlm, "disc_loss": disc, "reinforce_loss": reinforce,
                "generator_reward": ops.sum(reward) / denom}


OBJECTIVES: dict[str, Any] = {cls.name: cls for cls in (
    ElectraObjective, BertMlmObjective, Electra15Objective, ReplaceMlmObjective,
    AllTokensMlmObjective)}
# config.OBJECTIVES names the choices a config may make; each needs its class.
assert tuple(OBJECTIVES) == config_lib.OBJECTIVES, (tuple(OBJECTIVES), config_lib.OBJECTIVES)


def get_objective(config) -> ElectraObjective:
    """The objective a PretrainingConfig asks for (`objective`, or the original's
    electra_objective=False for BERT; training_algorithm=adversarial swaps
    ELECTRA's generator loss for REINFORCE)."""
    if config.training_algorithm == "adversarial":
        return AdversarialObjective.from_config(config)
    return OBJECTIVES[config.resolved_objective].from_config(config)
