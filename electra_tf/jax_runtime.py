"""Pieces of a training loop on the JAX backend (KERAS_BACKEND=jax), beside runtime.py.

What the TensorFlow runtime does with tf.distribute, a JAX loop does here:
  * data parallelism is Keras' distribution API (`data_parallel`:
    keras.distribution.DataParallel over the local devices); the batch is
    one global array, sharded on its batch axis (`to_device`), and XLA
    reduces the gradients;
  * the step works on explicit state (`values` of the variables, `assign`ed
    back between compiled calls), clipped by `clip_by_global_norm`;
  * `Checkpoints` writes `checkpoints/jax-ckpt-<step>.npz` (model variables
    by path, optimizer variables by index), atomically, with the interface
    of runtime.Checkpoints. The format is the one jax_training.py writes;
    these checkpoints are not interchangeable with tf.train's.
The pre-training loop (jax_training.py) and the fine-tuning loop
(finetuning/jax_trainer.py) are built from them.
"""

from __future__ import annotations

import glob
import os
import re

import jax
import jax.numpy as jnp
import keras
import numpy as np

from electra_tf import artifacts, runtime
from electra_tf.config import ConfigError
from electra_tf.errors import InputError
from electra_tf.fileio import atomic_write

CHECKPOINT_GLOB = "jax-ckpt-*.npz"
_CHECKPOINT = re.compile(r"jax-ckpt-(\d+)\.npz$")
STRATEGIES = ("default", "mirrored")  # both mean: every local device (or --num_devices)


# === Devices ===
def data_parallel(strategy: str, num_devices: int, batch_sizes: dict[str, int]):
    """Checks the strategy, and shards batches over the local devices when there are several.

    Sets Keras' global distribution: DataParallel for more than one device
    (variables created afterwards are replicated, batches sharded), else none.

    Args:
      strategy: the run's --strategy (only default and mirrored are available).
      num_devices: at most this many devices (0: all).
      batch_sizes: {flag name: value}; each must split evenly over the devices.

    Returns:
      (number of devices, the DataParallel distribution or None).
    """
    if strategy not in STRATEGIES:
        raise ConfigError(f"--strategy={strategy} is not available on the JAX backend "
                          "(it uses every local device; multi-host is not supported yet)")
    devices = jax.local_devices()[:num_devices or None]
    for name, size in batch_sizes.items():
        if size % len(devices):
            raise ConfigError(f"--{name}={size} does not split over {len(devices)} devices")
    distribution = None
    if len(devices) > 1:
        distribution = keras.distribution.DataParallel(devices=devices)
    keras.distribution.set_distribution(distribution)  # None: a previous run's is dropped
    return len(devices), distribution


def to_device(batch: dict, distribution=None) -> dict:
    """NumPy arrays -> device arrays, sharded on the batch axis under `distribution`."""
    if distribution is None:
        return {k: jnp.asarray(v) for k, v in batch.items()}
    return {k: jax.device_put(v, distribution.get_data_layout(v.shape).backend_layout)
            for k, v in batch.items()}


# === State and the update ===
def values(variables) -> list:
    """The current arrays of Keras variables (a compiled step's explicit state)."""
    return [v.value for v in variables]


def assign(variables, arrays) -> None:
    for v, value in zip(variables, arrays):
        v.assign(value)


def training_state(model, optimizer) -> tuple[list, list, list]:
    """(trainable, non-trainable, optimizer) arrays: a compiled train step's state."""
    return (values(model.trainable_variables), values(model.non_trainable_variables),
            values(optimizer.variables))


def assign_training_state(model, optimizer, state) -> None:
    """The variables take a `training_state` a compiled step returned."""
    trainable, non_trainable, opt = state
    assign(model.trainable_variables, trainable)
    assign(model.non_trainable_variables, non_trainable)
    assign(optimizer.variables, opt)


def clip_by_global_norm(grads: list, clip_norm: float):
    """As tf.clip_by_global_norm: g * c / max(norm, c). Returns (grads, norm)."""
    norm = jnp.sqrt(sum(jnp.sum(jnp.square(g.astype("float32"))) for g in grads))
    scale = clip_norm / jnp.maximum(norm, clip_norm)
    return [g * scale.astype(g.dtype) for g in grads], norm


# === Checkpoints ===
def checkpoint_files(directory: str) -> list[tuple[int, str]]:
    """(step, path) of every jax-ckpt in `directory`, oldest first."""
    found = []
    for path in glob.glob(os.path.join(directory, CHECKPOINT_GLOB)):
        m = _CHECKPOINT.search(path)
        if m:
            found.append((int(m.group(1)), path))
    return sorted(found)


class Checkpoints:
    """Saves and restores a model + optimizer as npz files, as runtime.Checkpoints does
    with tf.train: `restore()` -> the path resumed from (or None), `save(force)`.

    Args:
      model, optimizer: their `variables` are saved (by path; by index).
      directory: where the files go (artifacts.checkpoint_dir(model_dir)).
      max_to_keep: older files are removed.
      interval: save() without force saves at most once per this many steps.
      writer: False on the processes of a multi-host run but the first: the
        weights are the same everywhere, one process writes them.
    """

    def __init__(self, model, optimizer, directory: str, max_to_keep: int, interval: int,
                 writer: bool = True):
        self.directory, self.max_to_keep, self.interval = directory, max_to_keep, interval
        self.writer = writer
        self.step_counter = optimizer.iterations
        self.variables = {"model/" + v.path: v for v in model.variables}
        if len(self.variables) != len(model.variables):
            raise RuntimeError("model variable paths are not unique; checkpoints would lose some")
        self.variables.update({f"optimizer/{i:05d}": v
                               for i, v in enumerate(optimizer.variables)})
        self._last_saved = None
        for name in artifacts.remove_stale_temporaries(directory):
            runtime.log("checkpoints", f"removed {os.path.join(directory, name)}, left by a "
                        "save that was killed midway")

    def _step(self) -> int:
        return int(np.asarray(self.step_counter.value))

    @property
    def latest(self) -> str | None:
        found = checkpoint_files(self.directory)
        return found[-1][1] if found else None

    def restore(self) -> str | None:
        """Restores the latest checkpoint (every variable, checked); returns its path.

        Raises:
          InputError: the folder holds tf.train checkpoints (the TF backend's),
            or the file is unreadable; ConfigError: its variables do not fit.
        """
        path = self.latest
        if path is None:
            # tf.train's files, recognized without importing TensorFlow.
            if glob.glob(os.path.join(self.directory, "ckpt-*.index")):
                raise InputError(f"{self.directory} holds TensorFlow checkpoints, which the "
                                 "JAX backend cannot resume: rerun without KERAS_BACKEND=jax, "
                                 "or use another --model_dir")
            return None
        try:
            with np.load(path) as data:
                arrays = {k: data[k] for k in data.files}
        except (OSError, ValueError) as e:
            raise InputError(f"cannot resume from {path}: unreadable checkpoint ({e})") from None
        extra, missing = sorted(set(arrays) - set(self.variables)), sorted(
            set(self.variables) - set(arrays))
        wrong = [f"{k} {arrays[k].shape} (the model's {tuple(v.shape)})"
                 for k, v in self.variables.items()
                 if k in arrays and tuple(arrays[k].shape) != tuple(v.shape)]
        if extra or missing or wrong:
            first = (wrong or [f"not in the model: {extra[:3]}" if extra else
                               f"not in the checkpoint: {missing[:3]}"])[0]
            raise ConfigError(f"cannot resume from {path}: its variables do not fit this model, "
                              f"which other flags built ({first}); use the flags it was "
                              "written with, or another --model_dir")
        for name, v in self.variables.items():
            v.assign(arrays[name])
        self._last_saved = self._step()
        return path

    def save(self, force: bool = False) -> str | None:
        """Saves at the current step (if `interval` steps passed since the last save, or
        `force`); keeps the newest `max_to_keep`. Returns the path, or None."""
        step = self._step()
        if self._last_saved == step and os.path.exists(self._path(step)):
            return None
        if not force and self._last_saved is not None and step - self._last_saved < self.interval:
            return None
        if not self.writer:
            self._last_saved = step
            return None
        arrays = {name: np.asarray(v.value) for name, v in self.variables.items()}

        def write(tmp):
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)

        path = self._path(step)
        atomic_write(path, write)
        self._last_saved = step
        for _, old in checkpoint_files(self.directory)[:-self.max_to_keep]:
            os.remove(old)
        return path

    def _path(self, step: int) -> str:
        return os.path.join(self.directory, f"jax-ckpt-{step}.npz")
