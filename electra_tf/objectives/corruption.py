"""Building the discriminator's input and labels (paper section 2).

x_corrupt = REPLACE(x, m, x_hat): the sampled ids are written at the masked
positions. Everything is one_hot based with static shapes, so it compiles
under XLA and runs under any Keras backend.

Shapes: B batch, L sequence length, N max_predictions_per_seq.
"""

from __future__ import annotations

from keras import ops


def scatter_at_positions(ids, positions, values, weights):
    """Writes `values` into `ids` at `positions` where `weights` > 0.

    Padding slots (weight 0, position 0) write nothing. Positions are
    expected to be distinct among the real slots of a row; if one repeats,
    its values are averaged (integer division), as the original
    `pretrain_helpers.scatter_update` does, which is exact only when the
    repeated values agree.

    Args:
        ids: int [B, L].
        positions: int [B, N], indices into L.
        values: int [B, N], cast to the dtype of `ids`.
        weights: float or int [B, N], > 0 for a real slot.

    Returns:
        [B, L] with the dtype of `ids`.
    """
    seq_length = ops.shape(ids)[-1]
    ids = ops.convert_to_tensor(ids)
    dtype = ids.dtype
    # [B, N, L]: 1 where slot n writes position l.
    hits = ops.one_hot(positions, seq_length, dtype="int32")
    hits = hits * ops.cast(ops.greater(weights, 0), "int32")[:, :, None]
    values = ops.cast(values, "int32")[:, :, None]
    count = ops.sum(hits, axis=1)  # [B, L]
    written = ops.sum(hits * values, axis=1) // ops.maximum(count, 1)
    replaced = ops.minimum(count, 1)
    out = (1 - replaced) * ops.cast(ids, "int32") + replaced * written
    return ops.cast(out, dtype)


def corrupt_inputs(masked_input_ids, positions, sampled_ids, weights):
    """The discriminator's input: generator samples at the masked positions.

    Args:
        masked_input_ids: int [B, L], the pipeline's masked input_ids.
        positions: int [B, N], masked_lm_positions.
        sampled_ids: int [B, N], from `sample_from_logits`.
        weights: [B, N], masked_lm_weights.

    Returns:
        int [B, L]; every real masked position (also the 15% that kept the
        original token) holds the sample.
    """
    return scatter_at_positions(masked_input_ids, positions, sampled_ids, weights)


def original_inputs(masked_input_ids, positions, masked_lm_ids, weights):
    """Undoes the masking: the original ids back at the masked positions.

    Args:
        masked_input_ids: int [B, L].
        positions: int [B, N], masked_lm_positions.
        masked_lm_ids: int [B, N], the original ids at those positions.
        weights: [B, N], masked_lm_weights.

    Returns:
        int [B, L], the unmasked input_ids.
    """
    return scatter_at_positions(masked_input_ids, positions, masked_lm_ids, weights)


def rtd_labels(corrupted_ids, original_ids, input_mask):
    """Replaced-token-detection labels (paper section 2).

    A sample equal to the original token is labelled "original" (0), unlike
    a GAN. Padding is 0.

    Args:
        corrupted_ids: int [B, L], the discriminator's input.
        original_ids: int [B, L], from `original_inputs`.
        input_mask: [B, L], 1 for real tokens.

    Returns:
        float32 [B, L], 1.0 where the token was replaced.
    """
    replaced = ops.cast(ops.not_equal(corrupted_ids, original_ids), "float32")
    return replaced * ops.cast(input_mask, "float32")
