"""Sampling replacement tokens from the generator (paper section 2).

The generator's logits exist only at the N masked slots ([batch, N, vocab]),
so the Gumbel noise is drawn over [batch, N, vocab] and never over the whole
[batch, seq_length, vocab]; under XLA on CPU the full-size noise dominated the
step (docs/reference.md, Keras 3 pitfalls).

Pure `keras.ops`; no TensorFlow import, so this also runs under JAX.
"""

from __future__ import annotations

import numbers
from typing import Any

import keras
from keras import ops

from electra_tf.modeling.random import TensorSeed


def as_seed(seed: Any):
    """Returns a seed `keras.random.*` accepts.

    Args:
        seed: a Python int, a `keras.random.SeedGenerator`, or an integer
            tensor of shape [2].
    """
    if isinstance(seed, keras.random.SeedGenerator):
        return seed
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        return int(seed)
    return TensorSeed(seed)


def sample_from_logits(
    logits, seed, temperature: float = 1.0, disallow_ids=None, uniform: bool = False
):
    """Draws one token per slot with the Gumbel-max trick.

    As the original `pretrain_helpers.sample_from_softmax` and
    `_get_fake_data`: logits are divided by `temperature`, then
    1000 * one_hot(disallow_ids) is subtracted (disallow_correct), then
    argmax(logits + Gumbel noise) with noise -log(-log(U + 1e-9) + 1e-9).

    Args:
        logits: float [batch, N, vocab], the generator's logits at the masked
            slots. Computed in float32 whatever their dtype.
        seed: int, `keras.random.SeedGenerator`, or int tensor [2].
        temperature: > 0; below 1 sharpens the distribution.
        disallow_ids: optional int [batch, N], ids that may not be drawn (the
            original tokens, for the disallow_correct option).
        uniform: sample uniformly over the vocabulary instead (the
            uniform_generator ablation); disallow_ids still applies.

    Returns:
        int32 [batch, N] sampled ids, wrapped in stop_gradient: no gradient
        flows from the discriminator into the generator through sampling.
    """
    logits = ops.cast(logits, "float32")
    if uniform:
        # The original zeroes the logits, so the Gumbel noise alone decides.
        logits = ops.zeros_like(logits)
    logits = logits / temperature
    vocab_size = ops.shape(logits)[-1]
    if disallow_ids is not None:
        logits = logits - 1000.0 * ops.one_hot(disallow_ids, vocab_size, dtype="float32")
    u = keras.random.uniform(
        ops.shape(logits), minval=0.0, maxval=1.0, dtype="float32", seed=as_seed(seed)
    )
    gumbel = -ops.log(-ops.log(u + 1e-9) + 1e-9)
    ids = ops.cast(ops.argmax(logits + gumbel, axis=-1), "int32")
    return ops.stop_gradient(ids)
