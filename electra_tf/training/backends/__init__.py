"""The two backends, one file each with the same sections (devices and processes,
seeds, the update, pre-training, fine-tuning): `tensorflow` (tf.distribute,
tf.function) and `jax` (KERAS_BACKEND=jax: jitted stateless steps).

`load()` imports the one Keras runs on; each has `start(run)` (call at program
start), a pre-training class and a fine-tuning class.
"""

from __future__ import annotations

import importlib
import types

from electra_tf.core.cpu import emulates_bf16

# Keras backend name -> (module, pre-training class, fine-tuning class).
BACKENDS = {
    "tensorflow": ("tensorflow", "TensorFlowPretraining", "TensorFlowFinetuning"),
    "jax": ("jax", "JaxPretraining", "JaxFinetuning"),
}


def name() -> str:
    """The running Keras backend ("tensorflow" or "jax"); refuses any other, and one
    whose package is not installed (Keras' import had ended in a traceback)."""
    from electra_tf.core.errors import ConfigError

    try:
        import keras
    except ModuleNotFoundError as e:
        missing = (e.name or "").split(".")[0]
        if missing in ("jax", "jaxlib"):
            raise ConfigError("KERAS_BACKEND=jax needs JAX, which is not installed: pip "
                              "install 'jax[cpu]' (CPU) or 'jax[cuda12]' (NVIDIA GPUs); "
                              "docs/backends.md") from None
        if missing and missing != "keras":
            raise ConfigError(f"Keras' backend (KERAS_BACKEND or ~/.keras/keras.json) needs "
                              f"{missing}, which is not installed; electra_tf runs on "
                              "KERAS_BACKEND=tensorflow or jax") from None
        raise
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


def is_chief(backend: str, started) -> bool:
    """Whether this process writes what several processes of a run share (a trial
    group's record): a multi-worker run's chief (`started`: the TF backend's strategy),
    JAX's process 0; a run of one process is its own chief."""
    return load(backend).chief_process(started)


def agreement(backend: str, started):
    """A multi-worker run's comparison of the workers' digests (the TF backend's
    `agreement`); None for a run of one process (JAX fine-tuning runs one)."""
    return load(backend).agreement(started) if backend == "tensorflow" and started else None


def bf16_note(backend: str, mixed_precision: str, cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """A line for --mixed_precision=bf16 training on a CPU that emulates bfloat16
    products (no AVX512-BF16 or AMX, and no GPU or TPU in this process), else None.
    Call after the backend's `start`: it asks for the devices."""
    if mixed_precision != "bf16" or not emulates_bf16(cpuinfo) or not load(backend).cpu_only():
        return None
    return ("note: --mixed_precision=bf16 on a CPU without AVX512-BF16 or AMX: its "
            "bfloat16 products are emulated, and bf16 fine-tuned at half fp32's rate on "
            "such a CPU (docs/finetuning.md); --mixed_precision=fp32 is faster here.")
