"""Dynamic ELECTRA masking: a pure, seeded function on a batch.

Follows the original `pretrain_helpers.mask` (docs/reference.md, "Masking") with
one documented improvement: positions are drawn WITHOUT replacement (the
original draws with replacement, so a position could be picked twice).

Per sequence, k = max(1, min(N, round(num_real_tokens * mask_prob))) of the
candidate positions are chosen (never [CLS], [SEP], [MASK] or padding;
num_real_tokens counts the whole input_mask, as the original does). Of the
chosen positions, `mask_token_prob` (0.85) become [MASK], `random_token_prob`
(0.0 for ELECTRA; 0.1 gives BERT's 80/10/10 with mask_token_prob=0.8) become a
uniformly random token, and the rest keep their token. N =
max_predictions_per_seq slots are returned; unused slots have position 0,
id 0 and weight 0.

Everything is stateless (tf.random.stateless_*): the same batch and seed give
the same masks, eagerly, in tf.function and in tf.data. `mask_batch_numpy`
draws from the same distribution with NumPy, for machines without TensorFlow
(data/numpy_pipeline.py); tests/data/test_data_masking.py compares the two
statistically. This module imports TensorFlow only inside `mask_batch`.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
    """How to mask. Build it with `from_tokenizer` to get the special ids right."""

    mask_prob: float
    max_predictions_per_seq: int
    mask_id: int
    cls_id: int
    sep_id: int
    vocab_size: int
    mask_token_prob: float = 0.85
    random_token_prob: float = 0.0

    def __post_init__(self):
        if not 0.0 < self.mask_prob < 1.0:
            raise ValueError(f"mask_prob must be in (0, 1), got {self.mask_prob}")
        if self.max_predictions_per_seq < 1:
            raise ValueError("max_predictions_per_seq must be >= 1")
        if not (0.0 <= self.mask_token_prob and 0.0 <= self.random_token_prob
                and self.mask_token_prob + self.random_token_prob <= 1.0):
            raise ValueError("mask_token_prob + random_token_prob must be within [0, 1]")

    @classmethod
    def from_tokenizer(cls, tokenizer, mask_prob: float, max_predictions_per_seq: int,
                       **kwargs) -> "MaskingConfig":
        return cls(mask_prob=mask_prob, max_predictions_per_seq=max_predictions_per_seq,
                   mask_id=tokenizer.mask_id, cls_id=tokenizer.cls_id,
                   sep_id=tokenizer.sep_id, vocab_size=tokenizer.vocab_size, **kwargs)


# What the batch check below says when a record holds an id outside [0, vocab_size):
# electra_tf's own words, which the pre-training loop finds in tf.data's error. The
# model's lookup would not say it: keras.ops.take reads a negative id from the end of
# the table, and TensorFlow's GPU gather returns zeros for an id past its end.
ID_OUTSIDE_VOCABULARY = "electra_tf: a record holds a token id outside the vocabulary"


def mask_batch(input_ids, input_mask, seed, config: MaskingConfig) -> dict:
    """Masks a batch.

    Args:
      input_ids: int [batch, L], the original ids.
      input_mask: int [batch, L], 1 for real tokens.
      seed: int [2], the stateless seed for this batch.
      config: a MaskingConfig.

    Returns:
      A dict with
        input_ids: int32 [batch, L], the masked ids;
        masked_lm_positions: int32 [batch, N];
        masked_lm_ids: int32 [batch, N], the original ids at those positions;
        masked_lm_weights: float32 [batch, N], 1.0 for real slots.
    """
    import tensorflow as tf

    input_ids = tf.cast(input_ids, tf.int32)
    in_vocabulary = ((tf.reduce_min(input_ids) >= 0)
                     & (tf.reduce_max(input_ids) < config.vocab_size))
    with tf.control_dependencies([tf.debugging.Assert(in_vocabulary, [ID_OUTSIDE_VOCABULARY])]):
        input_ids = tf.identity(input_ids)
    input_mask = tf.cast(input_mask, tf.int32)
    n = config.max_predictions_per_seq
    seq_len = tf.shape(input_ids)[1]
    tf.debugging.assert_less_equal(n, seq_len, "max_predictions_per_seq exceeds the sequence length")
    pick_seed, kind_seed, random_seed = tf.unstack(
        tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 3))

    is_special = ((input_ids == config.cls_id) | (input_ids == config.sep_id)
                  | (input_ids == config.mask_id))
    candidates = (input_mask == 1) & ~is_special
    num_tokens = tf.cast(tf.reduce_sum(input_mask, -1), tf.float32)
    num_to_predict = tf.maximum(1, tf.minimum(
        n, tf.cast(tf.round(num_tokens * config.mask_prob), tf.int32)))
    # A row with fewer candidates than k masks all of them (e.g. "[CLS] [SEP]": none).
    num_to_predict = tf.minimum(num_to_predict,
                                tf.reduce_sum(tf.cast(candidates, tf.int32), -1))

    # Without replacement: the top-N of uniform keys over the candidates
    # (non-candidates get -1, below any key). The first k slots are used.
    keys = tf.random.stateless_uniform(tf.shape(input_ids), pick_seed)
    keys = tf.where(candidates, keys, -1.0)
    _, positions = tf.math.top_k(keys, k=n)
    weights = tf.sequence_mask(num_to_predict, n, dtype=tf.int32)
    positions = positions * weights
    masked_lm_ids = tf.gather(input_ids, positions, batch_dims=1) * weights

    draw = tf.random.stateless_uniform(tf.shape(positions), kind_seed)
    to_mask = draw < config.mask_token_prob
    to_random = (~to_mask) & (draw < config.mask_token_prob + config.random_token_prob)
    random_ids = tf.random.stateless_uniform(
        tf.shape(positions), random_seed, minval=0, maxval=config.vocab_size, dtype=tf.int32)
    new_ids = tf.where(to_mask, config.mask_id, tf.where(to_random, random_ids, masked_lm_ids))

    # Scatter the new ids into the used slots (positions are distinct).
    # Pure tf, not corruption.scatter_at_positions: tf.data runs it under any Keras backend.
    slots = tf.one_hot(positions, seq_len, dtype=tf.int32) * weights[:, :, None]  # [B, N, L]
    hit = tf.reduce_sum(slots, axis=1)
    masked_ids = tf.where(hit > 0, tf.reduce_sum(slots * new_ids[:, :, None], axis=1), input_ids)
    return {
        "input_ids": masked_ids,
        "masked_lm_positions": positions,
        "masked_lm_ids": masked_lm_ids,
        "masked_lm_weights": tf.cast(weights, tf.float32),
    }


def mask_batch_numpy(input_ids: np.ndarray, input_mask: np.ndarray, rng: np.random.Generator,
                     config: MaskingConfig) -> dict[str, np.ndarray]:
    """`mask_batch` with NumPy: the same rules, the same distribution, other draws.

    Args:
      input_ids, input_mask: int [batch, L].
      rng: the generator this batch draws from.
      config: a MaskingConfig.

    Returns:
      The dict `mask_batch` returns, as NumPy arrays of the same dtypes.
    """
    ids = np.asarray(input_ids, np.int32)
    real = np.asarray(input_mask, np.int32)
    batch, seq_len = ids.shape
    n = config.max_predictions_per_seq
    if n > seq_len:
        raise ValueError("max_predictions_per_seq exceeds the sequence length")
    special = (ids == config.cls_id) | (ids == config.sep_id) | (ids == config.mask_id)
    candidates = (real == 1) & ~special
    num_tokens = real.sum(-1).astype(np.float32)
    # float32 and round-half-to-even, as tf.round on a float32 product
    k = np.maximum(1, np.minimum(n, np.round(num_tokens * np.float32(config.mask_prob))
                                 .astype(np.int32)))
    k = np.minimum(k, candidates.sum(-1))
    keys = np.where(candidates, rng.random((batch, seq_len)), -1.0)
    positions = np.argsort(-keys, axis=-1, kind="stable")[:, :n].astype(np.int32)
    weights = (np.arange(n)[None, :] < k[:, None]).astype(np.int32)
    positions = positions * weights
    masked_lm_ids = np.take_along_axis(ids, positions, axis=1) * weights
    draw = rng.random((batch, n))
    to_mask = draw < config.mask_token_prob
    to_random = ~to_mask & (draw < config.mask_token_prob + config.random_token_prob)
    random_ids = rng.integers(0, config.vocab_size, (batch, n), dtype=np.int32)
    new_ids = np.where(to_mask, config.mask_id, np.where(to_random, random_ids, masked_lm_ids))
    masked = ids.copy()
    rows, slots = np.nonzero(weights)
    masked[rows, positions[rows, slots]] = new_ids[rows, slots]
    return {"input_ids": masked, "masked_lm_positions": positions,
            "masked_lm_ids": masked_lm_ids.astype(np.int32),
            "masked_lm_weights": weights.astype(np.float32)}
