"""Explicit, tensor-valued seeds for `keras.random`.

`keras.random.*` functions accept a Python int or a `keras.random.SeedGenerator`
as `seed`, never a tensor. A `SeedGenerator` keeps its state in a variable, and
under `tf.distribute.MirroredStrategy` that variable is mirrored: every replica
draws the same dropout mask, silently (see REFERENCE.md, "Keras 3 on TF 2.20:
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

# Not public; the trick itself rests on `draw_seed` calling `SeedGenerator.next`.
from keras.src.backend import random_seed_dtype

# Hashed seeds are drawn from [0, 2**30) so that adding small site offsets
# never overflows int32 (the JAX backend wants non-negative uint32 seeds).
_HASH_MAX = 2**30


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
        return ops.cast(self._seed, random_seed_dtype())

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
