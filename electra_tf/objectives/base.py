"""What a pre-training objective is, so that variants plug into one loop.

A step runs: the generator on the masked batch -> its logits at the masked
slots -> `objective.fake_data` (what the discriminator reads) -> the
discriminator -> `objective.compute_loss` and `objective.metric_sums`.
Models compute no loss; objectives are pure functions of tensors.

Batch keys (from the data pipeline, already masked): input_ids,
input_mask, segment_ids [B, L]; masked_lm_positions, masked_lm_ids,
masked_lm_weights [B, N].
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol

Tensor = Any
Batch = Mapping[str, Tensor]


class Objective(Protocol):
    """A pre-training objective (ELECTRA, BERT-MLM, ELECTRA-15%, ...)."""

    name: str  # one of config.OBJECTIVES (or "adversarial")
    uses_discriminator: bool  # False: only the generator (MLM) is trained
    head_kind: str  # the discriminator's head: one of modeling.models.DISCRIMINATOR_HEADS
    masking: Mapping[str, float]  # MaskingConfig options ({}: ELECTRA's 85/15; BERT: 80/10/10)

    def fake_data(self, batch: Batch, mlm_logits: Tensor, seed: Any) -> dict[str, Tensor]:
        """The discriminator's inputs and targets, from G's logits [B, N, V].

        Returns input_ids [B, L] (what D reads), labels float32 [B, L] (1 where
        replaced), sampled_ids [B, N] and original_ids [B, L].
        """

    def compute_loss(
        self,
        batch: Batch,
        mlm_logits: Tensor,
        fake: Mapping[str, Tensor] | None,
        disc_outputs: Mapping[str, Tensor] | None,
    ) -> dict[str, Tensor]:
        """A dict with "loss" (the scalar to minimise) and its components.

        `disc_outputs` is the discriminator's output dict (rtd_logits [B, L],
        or mlm_logits and copy_logits for the MLM-style heads); None, as is
        `fake`, when the objective trains no discriminator.
        """

    def metric_sums(
        self,
        batch: Batch,
        mlm_logits: Tensor,
        fake: Mapping[str, Tensor] | None,
        disc_outputs: Mapping[str, Tensor] | None,
    ) -> dict[str, tuple[Tensor, Tensor]]:
        """(numerator, denominator) pairs: sums over the batch that add up across
        steps and replicas; the loop reports numerator / denominator."""
