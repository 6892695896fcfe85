"""A training run's checkpoints: tf.train on the TensorFlow backend, npz on JAX.

Both classes save a model + optimizer under `model_dir/checkpoints` and have
one interface: `latest`, `restore()` -> the path resumed from (or None) and
`save()`; the loops decide when (at the multiples of save_checkpoints_steps,
and at the end). Each backend writes its own format
(`TensorFlowCheckpoints`: `ckpt-<step>.index/.data-*`; `NpzCheckpoints`:
`jax-ckpt-<step>.npz`, model variables by path and optimizer variables by
index). Neither backend can resume the other's: `check_backend` refuses such a
folder with one line, for both loops, before anything is written.

TensorFlow is imported only by `TensorFlowCheckpoints`, so the JAX loop uses
this module on machines without it.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import time
import zipfile
import zlib

import numpy as np

from electra_tf.core.errors import ConfigError, InputError
from electra_tf.core.fileio import atomic_write, sync_file, sync_folder
from electra_tf.folders.files import CHECKPOINTS, remove_stale_temporaries, save_step
from electra_tf.training.loop import log

# What each backend's files look like in the checkpoint folder.
FILES = {"tensorflow": "ckpt-*.index", "jax": "jax-ckpt-*.npz"}
_ENV = {"tensorflow": "without KERAS_BACKEND=jax", "jax": "with KERAS_BACKEND=jax"}


class OtherBackendCheckpoints(InputError):
    """A checkpoint folder only the other backend can resume (`check_backend`)."""


def check_backend(directory: str, backend: str) -> None:
    """Refuses a checkpoint folder that only the other backend can resume.

    Args:
      directory: the checkpoint folder (folders.files.checkpoint_dir).
      backend: "tensorflow" or "jax", the running loop's.

    Raises:
      OtherBackendCheckpoints (an InputError): the folder holds the other backend's
        checkpoints and none of this one's.
    """
    (other,) = set(FILES) - {backend}
    if glob.glob(os.path.join(directory, FILES[backend])):
        return
    if glob.glob(os.path.join(directory, FILES[other])):
        name = "JAX" if other == "jax" else "TensorFlow"
        raise OtherBackendCheckpoints(
            f"{directory} holds {name} checkpoints ({FILES[other]}), which the "
            f"{'JAX' if backend == 'jax' else 'TensorFlow'} backend cannot read: rerun "
            f"{_ENV[other]}, or use another --model_dir")


def _misfit(path: str, detail: str) -> ConfigError:
    return ConfigError(f"cannot resume from {path}: its variables do not fit this model, which "
                       f"other flags built ({detail[:300]}); use the flags it was written with, "
                       "or another --model_dir")


def is_seed_state(path: str) -> bool:
    """A dropout layer's seed-generator state: Keras' Dropout has one only at a rate > 0,
    so a run that turns dropout off (or on) when it continues another's checkpoints
    (dropout changes no weight) has one fewer (or more); such a state alone is no misfit,
    and the model's own keeps its value where the checkpoint has none."""
    return path.rstrip("/").endswith("seed_generator_state")


def _check_fit(path: str, arrays: dict, variables: dict, extra_allowed: bool) -> None:
    """Raises the one-line misfit error unless `arrays` holds every variable, shaped as it
    (seed-generator states aside: `is_seed_state`).

    Args:
      extra_allowed: arrays of no variable are fine (else they are a misfit too).
    """
    extra = [] if extra_allowed else sorted(
        k for k in set(arrays) - set(variables) if not is_seed_state(k))
    missing = sorted(k for k in set(variables) - set(arrays) if not is_seed_state(k))
    wrong = [f"{k} {arrays[k].shape} (the model's {tuple(v.shape)})"
             for k, v in variables.items()
             if k in arrays and tuple(arrays[k].shape) != tuple(v.shape)]
    if extra or missing or wrong:
        raise _misfit(path, (wrong or [f"not in the model: {extra[:3]}" if extra else
                                       f"not in the checkpoint: {missing[:3]}"])[0])


def model_variables(model) -> dict:
    """The model's variables by path (checked unique: a checkpoint must miss none)."""
    variables = {v.path: v for v in model.variables}
    if len(variables) != len(model.variables):
        raise RuntimeError("model variable paths are not unique; checkpoints would lose some")
    return variables


# === tf.train (the TensorFlow backend) ===
_TEMP_SAVE = re.compile(r".+-\d+_temp")  # what tf.train leaves of a save killed midway


def _unreadable(path: str, reason: str, earlier: str | None) -> InputError:
    """The refusal of an unreadable latest save, naming the save before it (`earlier`,
    a file name) or saying there is none (it had advised removing the only save "to
    resume from the one before")."""
    return InputError(f"cannot resume from {path}: unreadable checkpoint ({reason}); " + (
        f"remove it to resume from the one before ({earlier})" if earlier else
        "there is no earlier save: without it the run starts again from step 0"))


class TensorFlowCheckpoints:
    """tf.train checkpoints of a model + optimizer under `directory`.

    The checkpoint holds explicit variable dicts (model by path, optimizer by
    index): tf.train.Checkpoint(model=keras_model) misses variables Keras
    keeps in Python lists (docs/reference.md); explicit dicts miss nothing,
    and restore().assert_consumed() checks it.

    On a multi-worker run, workers other than the chief must still take part
    in saving (the save is collective); they write to a scratch folder that is
    removed after each save. What a save killed midway left behind (tf.train's
    `ckpt-N_temp/` folders, a worker's scratch folder) is removed when the
    run starts again; finished checkpoints are never touched.

    Args:
      chief: False on the workers of a multi-worker run but the chief.
      task_id: such a worker's index (names its scratch folder).
    """

    backend = "tensorflow"

    def __init__(self, model, optimizer, directory: str, max_to_keep: int,
                 chief: bool = True, task_id: int = 0):
        import tensorflow as tf

        self.directory, self._max_to_keep = directory, max_to_keep
        opt_vars = {f"{i:05d}": v for i, v in enumerate(optimizer.variables)}
        self._variables = {"model": model_variables(model), "optimizer": opt_vars}
        self.checkpoint = tf.train.Checkpoint(**self._variables)
        self.step_counter = optimizer.iterations
        self._scratch = None
        if not chief:
            self._scratch = os.path.join(os.path.dirname(directory),
                                         f".worker_{task_id}_checkpoints")
            shutil.rmtree(self._scratch, ignore_errors=True)
        else:
            self._remove_unfinished_saves()
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, self._scratch or directory, max_to_keep=max_to_keep,
            step_counter=self.step_counter)
        self._restored_from = None
        self._saved_at = None

    def _remove_unfinished_saves(self) -> None:
        if not os.path.isdir(self.directory):
            return
        for name in sorted(os.listdir(self.directory)):
            path = os.path.join(self.directory, name)
            if _TEMP_SAVE.fullmatch(name) and os.path.isdir(path):
                shutil.rmtree(path)
                log("checkpoints", f"removed {path}, left by a save that did not finish")

    @property
    def latest(self) -> str | None:
        """The save to resume from: the one tf.train's `checkpoint` state file names, or,
        where that file is missing or names a save that is gone (a copy of the ckpt-*
        files alone), the highest finished save (ckpt-N.index) in the folder. Without
        the fall-back the run had started again from step 0 and written over them."""
        import tensorflow as tf

        if not os.path.isdir(self.directory):
            return None
        # The state file read here, not by tf.train.latest_checkpoint: that logs an
        # error line of its own ("Couldn't match files") beside the one below.
        state = tf.train.get_checkpoint_state(self.directory)
        named = state.model_checkpoint_path if state else ""
        if named and tf.io.gfile.exists(named + ".index"):
            return named
        # A save the disk filled up during leaves its .index cut short under its final
        # name (tf.train writes it in place) and no state file naming it: unreadable,
        # it is passed over (the rerun had refused it for good).
        for step in reversed(self._finished_steps()):
            found = os.path.join(self.directory, f"ckpt-{step}")
            if found == self._restored_from:
                return found
            try:
                tf.train.load_checkpoint(found)
            except (tf.errors.OpError, ValueError) as e:
                first = (getattr(e, "message", None) or str(e)).strip().splitlines()[:1]
                log("checkpoints", f"passing over {found}, a save that did not finish "
                                   f"({first[0][:200] if first else type(e).__name__})")
                continue
            state = os.path.join(self.directory, "checkpoint")
            what = "names no save that is there" if os.path.exists(state) else "is missing"
            log("checkpoints", f"{state} {what}; resuming from {found}, the latest one found")
            return found
        return None

    def restore(self) -> str | None:
        """Restores the latest checkpoint (all variables, checked); returns its path.

        Raises:
          ConfigError: its variables do not fit the model; InputError: unreadable,
            or the folder holds the JAX backend's checkpoints.
        """
        import tensorflow as tf

        check_backend(self.directory, self.backend)
        latest = self.latest
        if not latest or latest == self._restored_from:
            return None
        try:
            status = None
            try:
                status = self.checkpoint.restore(latest)  # ValueError: another shape
                status.assert_consumed()
            except (AssertionError, ValueError) as e:
                if status is not None:
                    status.expect_partial()  # checked here, not in warnings at exit
                if status is None or not self._restore_but_seed_states(latest):
                    first = str(e).strip().splitlines()[0] if str(e).strip() else \
                        type(e).__name__
                    raise _misfit(latest, first) from None
        except (tf.errors.OpError, IndexError) as e:  # IndexError: a truncated data file
            message = (getattr(e, "message", None) or str(e)).strip()
            first = message.splitlines()[0][:300] if message else type(e).__name__
            step = save_step(os.path.basename(latest), prefix=True)
            earlier = [s for s in self._finished_steps() if step is None or s < step]
            raise _unreadable(latest, first, f"ckpt-{earlier[-1]}" if earlier else None)
        self._restored_from = latest
        self._saved_at = int(self.step_counter.numpy())
        if not self._scratch:
            self._track_saves_found(latest)
        return latest

    def _finished_steps(self) -> list[int]:
        """The steps of the folder's finished saves (ckpt-N.index), lowest first."""
        return sorted(step for step in (save_step(n, prefix=False)
                                        for n in os.listdir(self.directory)
                                        if n.endswith(".index")) if step is not None)

    def _track_saves_found(self, latest: str) -> None:
        """Where `latest` was found without the state file naming it (`latest`'s fall-
        back), rewrites that file to list every save up to it, oldest first, so that the
        manager keeps the newest --keep_checkpoint_max of them and removes the others as
        it saves on: it tracks only the saves the file lists, and those it did not list
        had stayed on the disk for good (a checkpoint of a large model is gigabytes)."""
        import tensorflow as tf

        state = tf.train.get_checkpoint_state(self.directory)
        if state and os.path.abspath(state.model_checkpoint_path) == os.path.abspath(latest):
            return
        last = save_step(os.path.basename(latest), prefix=True)
        paths = [os.path.join(self.directory, f"ckpt-{step}")
                 for step in self._finished_steps() if step <= last]
        # (not after now: the manager drops every save of a later time, a copy's from a
        # machine whose clock runs ahead, and those had stayed for good again)
        now = time.time()
        times = [min(os.path.getmtime(path + ".index"), now - 1) for path in paths]
        tf.compat.v1.train.update_checkpoint_state(
            self.directory, latest, all_model_checkpoint_paths=paths,
            all_model_checkpoint_timestamps=times,
            last_preserved_timestamp=min(times) - 1)
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, self.directory, max_to_keep=self._max_to_keep,
            step_counter=self.step_counter)

    def _restore_but_seed_states(self, latest: str) -> bool:
        """Restores `latest` where it differs from the model in seed-generator states alone
        (`is_seed_state`: a continued run with dropout turned off or on) and returns True;
        returns False, restoring nothing, where any other variable differs."""
        import tensorflow as tf

        def key(group: str, name: str) -> str:  # tf.train's key of a dict entry
            return f"{group}/{name.replace('.', '..').replace('/', '.S')}"

        stored = {k.rsplit("/.ATTRIBUTES/", 1)[0] for k, _ in tf.train.list_variables(latest)
                  if "/.ATTRIBUTES/" in k and k.split("/", 1)[0] in self._variables}
        ours = {key(g, n): (g, n) for g, vs in self._variables.items() for n in vs}
        differ = (stored - set(ours)) | {k for k in ours if k not in stored}
        if not differ or not all(is_seed_state(ours[k][1] if k in ours else
                                                k.replace(".S", "/")) for k in differ):
            return False
        common = {g: {n: v for n, v in vs.items() if key(g, n) in stored}
                  for g, vs in self._variables.items()}
        tf.train.Checkpoint(**common).restore(latest).expect_partial() \
            .assert_existing_objects_matched()
        return True

    def save(self) -> str | None:
        """Saves at the current step (unless saved there already); returns its path."""
        step = int(self.step_counter.numpy())
        if self._saved_at == step:
            return self.manager.latest_checkpoint
        path = self.manager.save(checkpoint_number=step)
        if path:
            sync_saved(path)
        self._saved_at = step
        if path and self._scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)
        return path


def sync_saved(path: str) -> None:
    """Puts a tf.train save's files (`path`.index, `path`.data-*) and the folder's
    `checkpoint` state file on the disk (fsync): tf.train renames them into place
    without, and a power loss could then leave `checkpoint` naming a save whose data
    never reached the disk (the JAX backend's saves go through atomic_write, which
    syncs)."""
    folder = os.path.dirname(path)
    for name in sorted(glob.glob(glob.escape(path) + ".*")) + [os.path.join(folder,
                                                                         "checkpoint")]:
        if os.path.isfile(name):
            sync_file(name)
    sync_folder(folder)


# === npz (the JAX backend) ===
def npz_checkpoint_files(directory: str) -> list[tuple[int, str]]:
    """(step, path) of every jax-ckpt in `directory`, oldest first."""
    found = []
    for path in glob.glob(os.path.join(directory, FILES["jax"])):
        step = save_step(os.path.basename(path), prefix=False)
        if step is not None:
            found.append((step, path))
    return sorted(found)


# What a truncated, bit-flipped or empty .npz raises: np.load opens the zip
# (BadZipFile, EOFError for an empty file), reading a member checks its CRC
# (BadZipFile) and inflates it (zlib.error), the array header is parsed (ValueError).
NPZ_ERRORS = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, KeyError)


def load_npz(path: str) -> dict[str, np.ndarray]:
    """Every array of an .npz file, read now (np.load reads members lazily)."""
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


class NpzCheckpoints:
    """npz checkpoints of a model + optimizer, written atomically, with the interface
    of TensorFlowCheckpoints.

    Args:
      model, optimizer: their `variables` are saved (by path; by index).
      directory: where the files go (folders.files.checkpoint_dir).
      max_to_keep: older files are removed.
      writer: False on the processes of a multi-host run but the first: the
        weights are the same everywhere, one process writes them.
    """

    backend = "jax"

    def __init__(self, model, optimizer, directory: str, max_to_keep: int, writer: bool = True):
        self.directory, self.max_to_keep = directory, max_to_keep
        self.writer = writer
        self.step_counter = optimizer.iterations
        self.variables = {"model/" + k: v for k, v in model_variables(model).items()}
        self.variables.update({f"optimizer/{i:05d}": v
                               for i, v in enumerate(optimizer.variables)})
        self._last_saved = None
        for name in remove_stale_temporaries(directory):
            log("checkpoints", f"removed {os.path.join(directory, name)}, left by a save that "
                "did not finish")

    def _step(self) -> int:
        return int(np.asarray(self.step_counter.value))

    @property
    def latest(self) -> str | None:
        found = npz_checkpoint_files(self.directory)
        return found[-1][1] if found else None

    def restore(self) -> str | None:
        """Restores the latest checkpoint (every variable, checked); returns its path.

        Raises:
          InputError: the folder holds the TensorFlow backend's checkpoints, or
            the file is unreadable; ConfigError: its variables do not fit.
        """
        check_backend(self.directory, self.backend)
        path = self.latest
        if path is None:
            return None
        try:
            arrays = load_npz(path)
        except NPZ_ERRORS as e:
            earlier = npz_checkpoint_files(self.directory)[:-1]
            raise _unreadable(path, f"{type(e).__name__}: {e}",
                              os.path.basename(earlier[-1][1]) if earlier else None) from None
        _check_fit(path, arrays, self.variables, extra_allowed=False)
        for name, v in self.variables.items():
            if name in arrays:  # all but a seed-generator state the checkpoint lacks
                v.assign(arrays[name])
        self._last_saved = self._step()
        return path

    def save(self) -> str | None:
        """Saves at the current step (unless saved there already); keeps the newest
        `max_to_keep`. Returns its path (written by the writer process)."""
        step = self._step()
        if not self.writer or (self._last_saved == step and os.path.exists(self._path(step))):
            self._last_saved = step
            return self._path(step)
        arrays = {name: np.asarray(v.value) for name, v in self.variables.items()}

        def write(tmp):
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)

        path = self._path(step)
        atomic_write(path, write)
        self._last_saved = step
        for _, old in npz_checkpoint_files(self.directory)[:-self.max_to_keep]:
            os.remove(old)
        return path

    def _path(self, step: int) -> str:
        return os.path.join(self.directory, f"jax-ckpt-{step}.npz")


# === One checkpoint of a pre-training run, for fine-tuning ===
def checkpoint_step(path: str) -> int | None:
    """The step of `path` when it names one checkpoint of a pre-training folder
    (MODEL_DIR/checkpoints/ckpt-N or .../jax-ckpt-N.npz), else None."""
    path = os.path.abspath(path)
    if os.path.basename(os.path.dirname(path)) != CHECKPOINTS:
        return None
    return save_step(os.path.basename(path), prefix=True)


def checkpoint_path(path: str) -> str:
    """`path`, or the JAX save it names by its step: MODEL_DIR/checkpoints/ckpt-N where
    that folder holds jax-ckpt-N.npz and no tf.train save of step N (a JAX run's
    folder), and .../jax-ckpt-N without its .npz."""
    folder, name = os.path.split(os.path.normpath(path))
    m = re.fullmatch(r"(?:jax-)?ckpt-(\d+)", name)
    if (m and os.path.basename(os.path.abspath(folder)) == CHECKPOINTS
            and not os.path.exists(os.path.join(folder, f"ckpt-{m.group(1)}.index"))):
        npz = os.path.join(folder, f"jax-ckpt-{m.group(1)}.npz")
        if os.path.exists(npz):
            return npz
    return path


def read_model_arrays(path: str, model) -> dict:
    """The arrays one checkpoint (either backend's) holds for `model`'s variables.

    Args:
      path: a tf.train checkpoint prefix (ckpt-N) or a jax-ckpt-N.npz file.
      model: the model the checkpoint's "model" part was saved from.

    Returns:
      {variable path: array}, for every variable of `model`.

    Raises:
      InputError: missing or unreadable; ConfigError: its variables do not fit.
    """
    variables = model_variables(model)
    stored = (_npz_model_arrays(path) if path.endswith(".npz")
              else _tf_model_arrays(path, list(variables)))
    # The checkpoint also holds what fine-tuning drops (the optimizer, G's head).
    _check_fit(path, stored, variables, extra_allowed=True)
    return stored


def _npz_model_arrays(path: str) -> dict:
    try:
        arrays = load_npz(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such checkpoint") from None
    except NPZ_ERRORS as e:
        raise InputError(f"{path}: unreadable checkpoint ({type(e).__name__}: {e})") from None
    return {k[len("model/"):]: v for k, v in arrays.items() if k.startswith("model/")}


def _tf_model_arrays(path: str, names: list[str]) -> dict:
    import tensorflow as tf

    # tf.train's escaping of a dict key: "." -> "..", "/" -> ".S".
    keys = {name: "model/" + name.replace(".", "..").replace("/", ".S")
            + "/.ATTRIBUTES/VARIABLE_VALUE" for name in names}
    try:
        reader = tf.train.load_checkpoint(path)
        shapes = reader.get_variable_to_shape_map()
        return {name: reader.get_tensor(key) for name, key in keys.items() if key in shapes}
    except (tf.errors.OpError, ValueError, IndexError) as e:  # IndexError: a short read
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        raise InputError(f"{path}: no readable checkpoint ({first})") from None


# === A fresh checkpoint of converted weights ===
def write_fresh_pretraining_checkpoint(directory: str, pretrainer) -> str:
    """ckpt-0 in the pre-training loop's format (a fresh optimizer) in `directory`, so
    that run_pretraining continues from imported weights (`convert --from=tf1`'s
    `resume_checkpoint`); returns its path."""
    from electra_tf.training.optimization import pretraining_optimizer

    optimizer = pretraining_optimizer(pretrainer.config, pretrainer.trainable_variables)
    return TensorFlowCheckpoints(pretrainer, optimizer, directory, max_to_keep=1).save()
