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
- `adversarial` (a training algorithm, section 3.2, Appendix F): G trained by
  REINFORCE to maximize D's loss instead of by maximum likelihood, with the
  paper's learned baseline.
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

from electra_tf.core import config as config_lib
from electra_tf.modeling.models import MLM_ALL_COPY_HEAD, MLM_HEAD, RTD_HEAD
from electra_tf.objectives import losses, metrics
from electra_tf.objectives.electra import ElectraObjective
from electra_tf.objectives.electric import ElectricObjective


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

    def metric_sums(self, batch, mlm_logits, fake, disc_outputs):
        """ELECTRA's, the all-token disc loss as `disc_loss_all_tokens`: under the name
        `disc_loss` it had stood in evaluation for this objective's masked-only term (an
        eval curve ~8x its training curve, and not the term in its eval `loss`)."""
        sums = super().metric_sums(batch, mlm_logits, fake, disc_outputs)
        sums["disc_loss_all_tokens"] = sums.pop("disc_loss")
        return sums


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
    """Adversarial ELECTRA (paper section 3.2 and Appendix F): G trained by REINFORCE.

    G maximizes D's loss. Under the paper's simplifying assumption (D's score
    for a sampled token depends only on that token and the unmasked context)
    the reward of the sample x_hat_t at each masked position t is D's loss on
    it: R = -log D(original) if x_hat_t equals the original token (D should
    say "original"), -log(1 - D(original)) otherwise; in our logit's terms
    (rtd > 0: replaced) R = sigmoid_cross_entropy(rtd_logit_t, replaced_t), on
    every sampled position, samples equal to the original included.

    The learned baseline is the paper's b = -log sigmoid(w . h_G(x_masked)_t),
    a dense(1) on the generator's hidden states (`fake["baseline_logits"]`,
    from modeling.models.ElectraGenerator's baseline head). It is trained by
    cross-entropy to match the reward: sigmoid(w . h) is fit to exp(-R), D's
    probability of the right label, whose minimizer is b = R. Its loss also
    reaches G's encoder (as a shared-body actor-critic baseline; the paper
    does not say otherwise).

    Per masked slot, averaged over the real slots:
      reinforce = -(R - b) * log p_G(x_hat_t), with R and b constants;
      baseline_loss = sigmoid_cross_entropy(baseline_logit_t, exp(-R)).
    loss = gen_weight * (reinforce + baseline_loss) + disc_weight * L_Disc.
    Nothing flows through the sampling or from D's loss into G; D is trained
    as in ELECTRA. The MLE loss is reported (mlm_loss) but not trained.
    """

    name: ClassVar[str] = "adversarial"

    def compute_loss(self, batch, mlm_logits, fake, disc_outputs):
        if "baseline_logits" not in fake:
            raise ValueError("adversarial training needs the generator's learned baseline "
                             "(fake['baseline_logits']: build G with baseline_head=True)")
        weights = ops.cast(batch["masked_lm_weights"], "float32")
        positions = ops.cast(batch["masked_lm_positions"], "int32")
        sampled = ops.cast(fake["sampled_ids"], "int32")
        d_at_slots = ops.take_along_axis(ops.cast(disc_outputs["rtd_logits"], "float32"),
                                        positions, axis=1)
        replaced = ops.cast(ops.not_equal(sampled, ops.cast(batch["masked_lm_ids"], "int32")),
                            "float32")
        reward = ops.stop_gradient(losses.sigmoid_cross_entropy(d_at_slots, replaced))
        baseline_logits = ops.cast(fake["baseline_logits"], "float32")
        baseline = ops.stop_gradient(ops.softplus(-baseline_logits))  # -log sigmoid(z)
        denom = ops.sum(weights) + 1e-6
        baseline_loss = ops.sum(weights * losses.sigmoid_cross_entropy(
            baseline_logits, ops.exp(-reward))) / denom
        log_p = -losses.softmax_cross_entropy(mlm_logits, sampled)  # log softmax at the samples
        reinforce = -ops.sum((reward - baseline) * log_p * weights) / denom
        disc = losses.disc_loss(disc_outputs["rtd_logits"], fake["labels"], batch["input_mask"])
        mlm = ops.stop_gradient(generator_mlm_loss(batch, mlm_logits))
        return {"loss": self.gen_weight * (reinforce + baseline_loss) + self.disc_weight * disc,
                "mlm_loss": mlm, "disc_loss": disc, "reinforce_loss": reinforce,
                "baseline_loss": baseline_loss,
                "generator_reward": ops.sum(reward * weights) / denom}


OBJECTIVES: dict[str, Any] = {cls.name: cls for cls in (
    ElectraObjective, BertMlmObjective, Electra15Objective, ReplaceMlmObjective,
    AllTokensMlmObjective, ElectricObjective)}
# config.OBJECTIVES names the choices a config may make; each needs its class.
assert tuple(OBJECTIVES) == config_lib.OBJECTIVES, (tuple(OBJECTIVES), config_lib.OBJECTIVES)


def get_objective(config, masking=None) -> ElectraObjective:
    """The objective a PretrainingConfig asks for (`objective`;
    training_algorithm=adversarial swaps ELECTRA's generator loss for REINFORCE).

    `masking` (a data.masking.MaskingConfig) gives Electric the special ids its
    cloze loss leaves out; the other objectives do not read it.
    """
    if config.training_algorithm == "adversarial":
        return AdversarialObjective.from_config(config)
    objective = OBJECTIVES[config.objective].from_config(config)
    if isinstance(objective, ElectricObjective) and masking is not None:
        objective = dataclasses.replace(
            objective, special_ids=(masking.cls_id, masking.sep_id, masking.mask_id))
    return objective
