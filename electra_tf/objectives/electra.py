"""The default objective: replaced token detection (paper section 2).

L = gen_weight * L_MLM(G) + disc_weight * L_Disc(D), with G's samples at the
masked positions (stop_gradient: G is trained by maximum likelihood only).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping

from electra_tf.modeling.models import RTD_HEAD
from electra_tf.objectives import corruption, losses, metrics, sampling
from electra_tf.objectives.base import Batch, Tensor


@dataclasses.dataclass(frozen=True)
class ElectraObjective:
    """Replaced token detection, with the original's options.

    Use: `fake = obj.fake_data(batch, mlm_logits, seed)`, run the
    discriminator on `fake["input_ids"]`, then
    `obj.compute_loss(batch, mlm_logits, fake, disc_outputs)["loss"]`, where
    `disc_outputs` is the discriminator's output dict (with "rtd_logits").
    """

    gen_weight: float = 1.0  # weight of the generator's MLM loss
    disc_weight: float = 50.0  # lambda
    temperature: float = 1.0  # generator sampling temperature
    disallow_correct: bool = False  # never sample the original token
    uniform_generator: bool = False  # sample uniformly (ablation)

    name: ClassVar[str] = "electra"
    uses_discriminator: ClassVar[bool] = True
    head_kind: ClassVar[str] = RTD_HEAD  # the discriminator's head (objectives.base.Objective)
    masking: ClassVar[dict] = {}  # MaskingConfig options (BERT: 80/10/10)
    unmasked_generator: ClassVar[bool] = False  # Electric: G reads the unmasked input

    def __post_init__(self):
        """The numbers a PretrainingConfig checks, checked here too, by its check (the
        objectives are public: a temperature of 0 or a string had sampled silently)."""
        from electra_tf.core.config import check_finite

        try:
            check_finite(self, ("gen_weight", "disc_weight"), ">= 0")
            check_finite(self, ("temperature",), "> 0")
        except ValueError as e:
            raise ValueError(f"{type(self).__name__}: {e}") from None

    @classmethod
    def from_config(cls, config: Any) -> "ElectraObjective":
        """From a `PretrainingConfig` (or anything with its attribute names)."""
        return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(cls)})

    def fake_data(self, batch: Batch, mlm_logits: Tensor, seed: Any) -> dict[str, Tensor]:
        """Samples G and builds the discriminator's input.

        Args:
            batch: the masked batch (see objectives.base).
            mlm_logits: float [B, N, V], G's logits at masked_lm_positions.
            seed: int, SeedGenerator, or int tensor [2].

        Returns:
            input_ids: int [B, L], the corrupted sequence for D.
            labels: float32 [B, L], 1 where a token was replaced.
            sampled_ids: int32 [B, N].
            original_ids: int [B, L], the unmasked sequence.
        """
        positions = batch["masked_lm_positions"]
        weights = batch["masked_lm_weights"]
        sampled = sampling.sample_from_logits(
            mlm_logits,
            seed,
            temperature=self.temperature,
            disallow_ids=batch["masked_lm_ids"] if self.disallow_correct else None,
            uniform=self.uniform_generator,
        )
        # The unmasked sequence, and the corrupted one D reads (G's samples in the slots).
        original = corruption.scatter_at_positions(
            batch["input_ids"], positions, batch["masked_lm_ids"], weights)
        corrupted = corruption.scatter_at_positions(batch["input_ids"], positions, sampled,
                                                    weights)
        return {
            "input_ids": corrupted,
            "labels": corruption.rtd_labels(corrupted, original, batch["input_mask"]),
            "sampled_ids": sampled,
            "original_ids": original,
        }

    def rtd_logits(self, fake: Mapping[str, Tensor], disc_outputs: Mapping[str, Tensor]):
        """The logits [B, L] of "replaced" the loss, metrics and AUC read (Electric
        adds its noise correction to the head's output)."""
        return disc_outputs["rtd_logits"]

    def compute_loss(
        self, batch: Batch, mlm_logits: Tensor, fake: Mapping[str, Tensor],
        disc_outputs: Mapping[str, Tensor],
    ) -> dict[str, Tensor]:
        """Returns loss, mlm_loss and disc_loss (float32 scalars)."""
        mlm = losses.mlm_loss(mlm_logits, batch["masked_lm_ids"], batch["masked_lm_weights"])
        disc = losses.disc_loss(disc_outputs["rtd_logits"], fake["labels"], batch["input_mask"])
        return {
            "loss": losses.electra_loss(mlm, disc, self.gen_weight, self.disc_weight),
            "mlm_loss": mlm,
            "disc_loss": disc,
        }

    def metric_sums(
        self, batch: Batch, mlm_logits: Tensor, fake: Mapping[str, Tensor],
        disc_outputs: Mapping[str, Tensor],
    ) -> dict[str, tuple[Tensor, Tensor]]:
        """All the original's eval metrics but disc_auc, as sums."""
        return metrics.pretraining_metric_sums(
            mlm_logits,
            batch["masked_lm_ids"],
            batch["masked_lm_weights"],
            sampled_ids=fake["sampled_ids"],
            disc_logits=disc_outputs["rtd_logits"],
            disc_labels=fake["labels"],
            input_mask=batch["input_mask"],
        )
