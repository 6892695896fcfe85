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

    The one scatter of the objectives. With the pipeline's masked input_ids
    and masked_lm_positions / masked_lm_weights:
    - values = the generator's samples: the discriminator's input, x_corrupt
      (every real masked position, also the 15% that kept the original
      token, holds the sample);
    - values = masked_lm_ids: the original, unmasked input_ids.

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
    # keras.ops; data/masking.py's mask_batch has its own tf scatter (tf.data is backend-free).
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


def rtd_labels(corrupted_ids, original_ids, input_mask):
    """Replaced-token-detection labels (paper section 2).

    A sample equal to the original token is labelled "original" (0), unlike
    a GAN. Padding is 0.

    Args:
        corrupted_ids: int [B, L], the discriminator's input.
        original_ids: int [B, L], the unmasked input_ids.
        input_mask: [B, L], 1 for real tokens.

    Returns:
        float32 [B, L], 1.0 where the token was replaced.
    """
    replaced = ops.cast(ops.not_equal(corrupted_ids, original_ids), "float32")
    return replaced * ops.cast(input_mask, "float32")
