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

    name: str
    uses_discriminator: bool  # False: only the generator (MLM) is trained

    def fake_data(self, batch: Batch, mlm_logits: Tensor, seed: Any) -> dict[str, Tensor]:
        """The discriminator's inputs and targets, from G's logits [B, N, V]."""

    def compute_loss(
        self,
        batch: Batch,
        mlm_logits: Tensor,
        fake: Mapping[str, Tensor],
        disc_logits: Tensor | None,
    ) -> dict[str, Tensor]:
        """A dict with "loss" (the scalar to minimise) and its components."""

    def metric_sums(
        self,
        batch: Batch,
        mlm_logits: Tensor,
        fake: Mapping[str, Tensor],
        disc_logits: Tensor | None,
    ) -> dict[str, tuple[Tensor, Tensor]]:
        """(numerator, denominator) pairs; see metrics.reduce_metric_sums."""
