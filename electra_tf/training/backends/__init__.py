"""The two backends, one file each with the same sections (devices and processes,
seeds, the update, pre-training, fine-tuning): `tensorflow` (tf.distribute,
tf.function) and `jax` (KERAS_BACKEND=jax: jitted stateless steps).

`load()` imports the one Keras runs on; each has `start(run)` (call at program
start), a pre-training class and a fine-tuning class.
"""

from __future__ import annotations

import importlib
import types

# Keras backend name -> (module, pre-training class, fine-tuning class).
BACKENDS = {
    "tensorflow": ("tensorflow", "TensorFlowPretraining", "TensorFlowFinetuning"),
    "jax": ("jax", "JaxPretraining", "JaxFinetuning"),
}


def name() -> str:
    """The running Keras backend ("tensorflow" or "jax"); refuses any other."""
    import keras

    from electra_tf.core.errors import ConfigError

    backend = keras.backend.backend()
    if backend not in BACKENDS:
        raise ConfigError(f"KERAS_BACKEND={backend} is not supported: use tensorflow or jax")
    return backend


def load(backend: str | None = None) -> types.ModuleType:
    """The backend module (`backend` or the running Keras backend's)."""
    return importlib.import_module(f"{__name__}.{BACKENDS[backend or name()][0]}")


def pretraining_class(backend: str | None = None) -> type:
    return getattr(load(backend), BACKENDS[backend or name()][1])


def finetuning_class(backend: str | None = None) -> type:
    return getattr(load(backend), BACKENDS[backend or name()][2])
