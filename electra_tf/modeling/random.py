"""Explicit, tensor-valued seeds for `keras.random`.

`keras.random.*` functions accept a Python int or a `keras.random.SeedGenerator`
as `seed`, never a tensor. A `SeedGenerator` keeps its state in a variable, and
under `tf.distribute.MirroredStrategy` that variable is mirrored: every replica
draws the same dropout mask, silently (see docs/reference.md, "Keras 3 on TF 2.20:
pitfalls"). The training loop therefore passes a per-replica, per-step seed
tensor of shape [2] into the model, and every random site derives its own seed
from it with the helpers below.

`TensorSeed` is a `SeedGenerator` that owns no variable: its `next()` returns
the tensor it was given. `keras.src.random.seed_generator.draw_seed` calls
`seed.next()` on any `SeedGenerator`, so a `TensorSeed` can be passed wherever
`keras.random` takes a seed, eagerly, inside `tf.function` and under XLA, and
on the JAX backend.

Typical use:

    base = fold_seed(step_seed, salt=1)                 # hash once per call
    keras.random.dropout(x, 0.1, seed=tensor_seed(base, 0))
    keras.random.uniform(shape, seed=tensor_seed(base, 1))
"""

from __future__ import annotations

import keras
from keras import ops

# === Salts and streams: every seed derivation of the model code ===
# A training step's seed tensor reaches each random site through this chain;
# the values are part of the checkpoints' reproducibility: never change them.
#
# ElectraPretrainer.call (pretrainer.py): fold_seed(step_seed, salt) per phase.
GENERATOR_SALT = 101  # the seed passed to the generator's call
SAMPLING_SALT = 102  # the Gumbel noise of sampling the replacement tokens
DISCRIMINATOR_SALT = 103  # the seed passed to the discriminator's call
# ElectraGenerator / ElectraDiscriminator.call (models.py): fold_seed(seed, salt)
# before the encoder, so that G's and D's dropout masks differ even when the
# caller gives both the same seed (with untied_generator=False they share one encoder).
GENERATOR_DROPOUT_SALT = 1
DISCRIMINATOR_DROPOUT_SALT = 2
# TwoTowerClozeGenerator.call (electric.py): after G's salt, one per tower.
LTR_TOWER_SALT = 3
RTL_TOWER_SALT = 4
# FinetuningModel.call (finetuning.py): fold_seed(seed, salt) per part.
FINETUNING_ENCODER_SALT = 1  # the encoder's dropout
FINETUNING_HEAD_SALT = 2  # the task head's dropout
# ElectraEncoder.call (encoder.py): base = fold_seed(seed, ENCODER_SALT), then
# the embeddings' dropout uses base + [EMBEDDINGS_STREAM, 0] and layer_i's
# sites use base + [FIRST_LAYER_STREAM + i, site].
ENCODER_SALT = 0
EMBEDDINGS_STREAM = 0
FIRST_LAYER_STREAM = 1
# TransformerLayer.call (transformer.py): a layer's dropout sites, as offsets
# added to its seed's second component.
ATTENTION_PROBS_SITE = 0  # the attention probabilities
ATTENTION_OUTPUT_SITE = 1  # the attention sub-layer's output
FFN_OUTPUT_SITE = 2  # the feed-forward sub-layer's output

# Hashed seeds are drawn from [0, 2**30) so that adding small site offsets
# never overflows int32 (the JAX backend wants non-negative uint32 seeds).
_HASH_MAX = 2**30


def _seed_dtype() -> str:
    """The dtype the Keras backend draws seeds in (int64 on TF, uint32 on JAX).

    Keras 3 has no public API for it, and `TensorSeed.next` must return that
    dtype as `SeedGenerator.next` does; this adapter is the one place that
    imports the private `keras.src.backend.random_seed_dtype`, with a fallback
    to the values of the two backends this project runs on should a Keras
    release move it.
    """
    try:
        from keras.src.backend import random_seed_dtype
    except ImportError:
        return "int64" if keras.backend.backend() == "tensorflow" else "uint32"
    return random_seed_dtype()


class TensorSeed(keras.random.SeedGenerator):
    """A variable-free `SeedGenerator` whose `next()` returns a fixed tensor.

    Do not assign a `TensorSeed` to a layer attribute: Keras would track it as
    a layer's seed generator. Create one right where it is used.

    Args:
        seed: int tensor of shape [2], the stateless seed to hand out.
    """

    def __init__(self, seed):
        # Deliberately skips SeedGenerator.__init__, which creates a variable.
        self.name = "tensor_seed"
        self.backend = keras.backend
        self._initial_seed = None
        self._seed = seed

    @property
    def state(self):
        return self._seed

    def next(self, ordered=True):
        del ordered  # A tensor seed is stateless: every draw uses the same seed.
        return ops.cast(self._seed, _seed_dtype())

    def get_config(self):
        raise NotImplementedError("TensorSeed wraps a runtime tensor; it is not serializable.")


def offset_seed(seed, offset: int = 0, stream: int = 0):
    """Returns `seed + [stream, offset]` as an int32 tensor of shape [2].

    Args:
        seed: int tensor (or array-like) of shape [2].
        offset: small non-negative int added to the second component.
        stream: small non-negative int added to the first component.

    Returns:
        int32 tensor of shape [2].
    """
    seed = ops.cast(ops.convert_to_tensor(seed), "int32")
    if offset == 0 and stream == 0:
        return seed
    return seed + ops.convert_to_tensor([stream, offset], dtype="int32")


def tensor_seed(seed, offset: int = 0, stream: int = 0) -> TensorSeed:
    """A seed object for `keras.random.*` that yields `seed + [stream, offset]`.

    Offsets alone do not decorrelate seeds that the caller built with a
    structure of its own (e.g. `[run_seed, step]`); hash such a seed with
    `fold_seed` first, then use offsets for the random sites of one call.

    Args:
        seed: int tensor of shape [2].
        offset: site index added to the second component.
        stream: index added to the first component (e.g. a layer index).

    Returns:
        A `TensorSeed`, accepted as `seed=` by every `keras.random` function.
    """
    return TensorSeed(offset_seed(seed, offset, stream))


def fold_seed(seed, salt: int = 0):
    """Derives a fresh seed from `seed` and an int `salt` (a stateless hash).

    The result is `uniform_int(seed) + [0, salt]`, so two different `(seed,
    salt)` pairs give colliding seeds only by chance (about 2**-58 per pair),
    whatever structure the input seeds have.

    Args:
        seed: int tensor of shape [2].
        salt: small non-negative int that names an independent stream.

    Returns:
        int32 tensor of shape [2], entries in [0, 2**30 + salt).
    """
    hashed = keras.random.randint((2,), 0, _HASH_MAX, dtype="int32", seed=tensor_seed(seed))
    return offset_seed(hashed, salt)
