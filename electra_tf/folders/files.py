"""The files every electra_tf folder is made of: names, versioned JSON, weights.

The three kinds of folder (pre-training, fine-tuned, converted) are the types
of this floor's other modules (`electra_tf/folders/__init__.py` lists their
files); this module holds what they share. Every JSON file carries
"format_version" (FORMAT_VERSION); a file without one, or of a newer version
than this code knows, is refused with a clear error. Every file is written
atomically (temporary name, then rename), so a kill mid-write leaves the old
file or none, never a truncated one; the temporary file such a kill leaves
(`.tmp-*`) is removed when a run starts again (`remove_stale_temporaries`).
"""

from __future__ import annotations

import math
import os
import re

from electra_tf.core.config import EncoderConfig
from electra_tf.core.errors import ConfigError, InputError
from electra_tf.core.fileio import atomic_write, atomic_write_json, check_free_space, parse_json

FORMAT_VERSION = 1

PRETRAINING_CONFIG = "pretraining_config.json"
DISCRIMINATOR_WEIGHTS = "discriminator.weights.h5"
DISCRIMINATOR_CONFIG = "discriminator_config.json"
GENERATOR_WEIGHTS = "generator.weights.h5"
GENERATOR_CONFIG = "generator_config.json"
FINAL_EVAL = "final_eval.json"
FINETUNING_CONFIG = "finetuning_config.json"
FINETUNED_WEIGHTS = "finetuned.weights.h5"
TRIALS = "trials.json"  # a --num_trials group folder's record (training/trials.py)
RESULTS = "results.json"
CONVERSION_REPORT = "conversion_report.json"
VOCAB = "vocab.txt"
CHECKPOINTS = "checkpoints"
# Every name above: what a folder's model is made of (a file, or the checkpoints folder).
FOLDER_FILES = (PRETRAINING_CONFIG, DISCRIMINATOR_WEIGHTS, DISCRIMINATOR_CONFIG,
                GENERATOR_WEIGHTS, GENERATOR_CONFIG, FINAL_EVAL, FINETUNING_CONFIG,
                FINETUNED_WEIGHTS, RESULTS, CONVERSION_REPORT, VOCAB, CHECKPOINTS)

def checked_path(value, what: str, kind: str = "a folder's path") -> str:
    """`value` as a str path (a str or an os.PathLike of one).

    Raises:
      TypeError: anything else (None, a number), naming `what`; os.path's own message
        had named no argument.
    """
    path = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(path, str):
        raise TypeError(f"{what} must be {kind} (a str or os.PathLike), got "
                        f"{type(value).__name__}")
    return path


def check_save_target(path, what: str, writes: tuple[str, ...]) -> str:
    """The folder a Python save writes (`path` as a str), checked before anything is
    written: a folder that can be made and written, new, empty, or holding only what
    this save writes (`writes`: a save run again, and the `.tmp-*` files of one a kill
    stopped midway). A folder holding anything else
    (a run's checkpoints, results, predictions, another kind's model) is refused: the
    save had replaced some of its files and left the others, which then described
    another model (a fine-tuned folder's results, or its weights served in place of
    the discriminator saved).

    Raises:
      TypeError: not a path; InputError: a path where no folder can be written, or a
        folder holding other files.
    """
    from electra_tf.core.fileio import check_output_folder

    path = checked_path(path, what)
    check_output_folder(path, what)  # a file there, or a folder no file can be made in
    if os.path.isdir(path):
        # (a .tmp-* file is an earlier save's, stopped midway: it had made the folder
        # refuse the save run again)
        others = sorted(name for name in set(os.listdir(path)) - set(writes)
                        if not name.startswith(".tmp-"))
        if others:
            shown = ", ".join(others[:4]) + (", ..." if len(others) > 4 else "")
            raise InputError(f"{what} {path} already holds other files ({shown}): save into "
                             "a new or empty folder")
    return path


# In a folder while `convert` writes it: a kill leaves it beside a half model, which
# the loaders refuse and the next conversion into the folder replaces.
UNFINISHED_CONVERSION = ".conversion_unfinished"


def check_no_unfinished_conversion(folder: str, what: str) -> None:
    """Raises InputError where `folder` holds a conversion that was stopped midway."""
    if os.path.exists(os.path.join(folder, UNFINISHED_CONVERSION)):
        raise InputError(f"{what}: {folder} holds a conversion that was stopped midway "
                         f"({UNFINISHED_CONVERSION}): its model is incomplete; run the "
                         "conversion into it again")


# The names of a run's saves in MODEL_DIR/checkpoints: TensorFlow's tf.train
# prefix ckpt-N (files ckpt-N.index and ckpt-N.data-*) and JAX's jax-ckpt-N.npz.
_SAVE_NAME = re.compile(r"ckpt-(\d+)(\.index)?|jax-ckpt-(\d+)\.npz")


# === JSON and weights, versioned and atomic ===


def write_json(path: str, value: dict, sort_keys: bool = True) -> None:
    """Writes `value` + the format version, atomically (key-sorted, or with
    sort_keys=False, the version first and then `value`'s order)."""
    atomic_write_json(path, {"format_version": FORMAT_VERSION, **value}, sort_keys=sort_keys)


def json_numbers(value):
    """`value` with each NaN or infinite float as None (JSON's null): Python writes them
    as NaN and Infinity, which strict JSON readers refuse (a SQuAD 2.0 dev set without an
    answerable question has no HasAns score)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_numbers(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_numbers(v) for v in value]
    return value


def read_json(path: str) -> dict:
    """Reads a file `write_json` wrote.

    Raises:
      InputError: missing, not JSON, not written by electra_tf, or written by
        a newer electra_tf.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise InputError(f"{path} not found") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a folder, not a JSON file") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not a valid JSON file ({e})") from None
    except OSError as e:  # unreadable (permissions), or a failing disk (EIO)
        raise InputError(f"{path}: cannot read it ({e.strerror or e})") from None
    value = parse_json(text, path)
    if not isinstance(value, dict):
        raise InputError(f"{path}: expected a JSON object")
    if "format_version" not in value:
        raise InputError(f"{path}: no format_version; not a file electra_tf wrote")
    version = value.pop("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise InputError(f"{path} has format_version {version!r}; this electra_tf reads "
                         f"up to {FORMAT_VERSION} {_NEWER}")
    return value


_NEWER = "(upgrade electra_tf)"  # read_json's refusal of a newer electra_tf's file


def unreadable_record(error: InputError, record: str, model_dir: str) -> InputError:
    """The refusal of a run record (pretraining_config.json, finetuning_config.json) that
    cannot be read beside `model_dir`'s checkpoints: its own line, then what to do (it
    had been a bare `malformed JSON` line); an error of another file, or a newer
    electra_tf's record (not one to remove), as it is."""
    if not str(error).startswith(os.path.join(model_dir, record)) or _NEWER in str(error):
        return error
    return InputError(f"{error}; it records what {model_dir}'s checkpoints were trained with: "
                      "put back a whole copy, or remove it to resume them without those "
                      "checks (the run then records its own settings)")


def save_weights(model, path: str) -> None:
    """model.save_weights, atomically: the file model.save_weights writes, built in
    memory (`weights_file_in_memory`) and then written as bytes, so that a disk that
    fills during the write (another process's) is an OSError, not h5py crashing the
    process in File.close (exit 139); model.save_weights itself where this Keras has
    no in-memory weights store. The file is held in memory meanwhile (the model's
    size once more: 1.3 GB for ELECTRA-Large).

    Raises:
      OSError(ENOSPC) before anything is written, where the disk has no room for the
      file (its size in memory; `weights_file_bytes`, a bound about twice a tiny
      model's file, where it is written by Keras), or from the write.
    """
    data = weights_file_in_memory(model)
    if data is None:
        check_free_space(path, weights_file_bytes(model))
        atomic_write(path, model.save_weights, suffix=".weights.h5")
        return
    try:
        check_free_space(path, data.seek(0, 2))  # (the end's offset: the file's size)
    except OSError:
        data.close()
        raise

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(data.getbuffer())

    try:
        atomic_write(path, write, suffix=".weights.h5")
    finally:
        data.close()


def weights_file_in_memory(model):
    """The .weights.h5 file model.save_weights writes, as an io.BytesIO, or None where
    this Keras lacks what builds it (keras.src.saving.saving_lib's H5IOStore over a
    BytesIO and _save_state, Keras 3.10 to 3.15 at least: a private API, whence the
    fallback)."""
    import io

    try:
        from keras.src.saving.saving_lib import H5IOStore, _save_state
    except ImportError:
        return None
    buffer = io.BytesIO()
    try:
        store = H5IOStore(buffer, mode="w")
    except (TypeError, ValueError):  # a Keras whose store takes paths alone
        return None
    try:
        _save_state(model, weights_store=store, assets_store=None, inner_path="",
                    visited_saveables=set())
        # what the loader checks the arrays against (`check_weights_digest`)
        store.h5_file.attrs[WEIGHTS_DIGEST] = weights_digest(store.h5_file)
    except TypeError:  # another signature: model.save_weights says what a bug would
        return None
    finally:
        store.close()
    return buffer


# The root attribute of a .weights.h5 electra_tf writes: the sha256 of its arrays.
WEIGHTS_DIGEST = "electra_tf_weights_sha256"


def weights_digest(h5_file) -> str:
    """The sha256 of every array of an open .weights.h5 (h5py.File): each dataset's
    name, dtype, shape and bytes, in the file's order of names."""
    import hashlib

    import h5py
    import numpy as np

    digest = hashlib.sha256()

    def add(name, item):
        if isinstance(item, h5py.Dataset):
            value = np.ascontiguousarray(item[()])
            digest.update(f"{name}\0{value.dtype.str}\0{value.shape}\0".encode())
            digest.update(value.tobytes())

    h5_file.visititems(add)
    return digest.hexdigest()


def check_weights_digest(path: str) -> None:
    """Refuses a .weights.h5 whose arrays no longer match the sha256 written with them
    (bits changed on a disk or in a copy: the file reads, and a model had served or
    fine-tuned from the changed values without a word). A file written without one
    (before electra_tf recorded it, or by Keras itself) is not checked."""
    import h5py

    try:
        with h5py.File(path, "r") as f:
            recorded = f.attrs.get(WEIGHTS_DIGEST)
            if recorded is None:
                return
            actual = weights_digest(f)
    except (OSError, KeyError, RuntimeError, ValueError) as e:  # h5py's, for a damaged file
        raise InputError(f"{path}: not a readable weights file ({e})") from None
    if isinstance(recorded, bytes):
        recorded = recorded.decode("ascii", "replace")
    if actual != recorded:
        raise InputError(f"{path}: its weights do not match the checksum written with them "
                         "(a damaged copy: bits changed on the disk or in a transfer); copy "
                         "the file again from where it was written")


# Per variable of a .weights.h5, its name, object header and group entry: about
# 2.3 KiB measured (h5py 3.16); a fixed 64 KiB more for the file's own.

_H5_BYTES_PER_VARIABLE, _H5_BYTES = 4096, 65536


def weights_file_bytes(model) -> int:
    """An upper bound on the size of the file model.save_weights writes."""
    def itemsize(dtype) -> int:
        import numpy as np

        try:
            return np.dtype(dtype).itemsize
        except TypeError:  # bfloat16, which numpy lacks
            return 2

    return _H5_BYTES + sum(math.prod(w.shape) * itemsize(w.dtype) + _H5_BYTES_PER_VARIABLE
                           for w in model.weights)


def load_weights(model, path: str) -> None:
    """model.load_weights with errors that name the file.

    Raises:
      InputError: missing or unreadable file; ConfigError: shapes do not fit.
    """
    if os.path.isdir(path):
        raise InputError(f"{path} is a folder, not a weights file")
    if not os.path.isfile(path):
        raise InputError(f"{path} not found")
    check_weights_digest(path)
    try:
        model.load_weights(path)
    except ValueError as e:  # Keras' message, without its list of every layer, on one line
        reason = (_shape_difference(model, path) or " ".join(
            str(e).split("List of objects that could not be loaded:")[0].split()))
        raise ConfigError(f"{path} does not fit the model's config: {reason}") from None
    except (OSError, KeyError, RuntimeError) as e:  # h5py's errors for a damaged file
        raise InputError(f"{path}: not a readable weights file ({e})") from None
    _check_finite_weights(model, path)


def _shape_difference(model, path: str) -> str | None:
    """Which weight shapes the file holds that the model has not, and the other way
    ("the file holds (16, 3), (3,) where the model has (16, 2), (2,)"), or None where
    both hold the same shapes (or the file cannot be listed). Keras' own message for a
    head of another size ("expected 2 variables, but received 0") names neither."""
    import collections

    import h5py

    held = []
    try:
        with h5py.File(path, "r") as f:
            f.visititems(lambda name, item: held.append(tuple(item.shape))
                         if isinstance(item, h5py.Dataset) else None)
    except (OSError, KeyError, RuntimeError):
        return None
    held = collections.Counter(held)
    wanted = collections.Counter(tuple(int(d) for d in v.shape) for v in model.weights)
    if held == wanted:
        return None

    def shapes(counter) -> str:
        listed = sorted(counter.elements(), key=lambda s: (len(s), s), reverse=True)
        return ", ".join(str(s) for s in listed) or "nothing more"

    return f"the file holds {shapes(held - wanted)} where the model has {shapes(wanted - held)}"


def _check_finite_weights(model, path: str) -> None:
    """Refuses weights holding NaN or infinity (a diverged run saved, bits flipped on
    disk): a model served or fine-tuned from them answers NaN, and fine-tuning's own
    check would blame its learning rate. As convert refuses them."""
    import keras
    import numpy as np

    found = first_non_finite(
        (variable.path, keras.ops.convert_to_numpy(variable.value).astype(np.float32))
        for variable in model.weights
        if "float" in str(variable.dtype))  # bfloat16 too; seeds and steps are integers
    if found:
        name, bad, size = found
        raise InputError(f"{path}: {name} holds {bad} NaN or infinite value(s) of {size}: a "
                         "damaged model (a diverged run, or a damaged file)")


def first_non_finite(named_arrays) -> tuple[str, int, int] | None:
    """(name, how many values are NaN or infinite, size) of the first (name, float
    array) pair holding any; None where all are finite. Loading a folder and converting
    a checkpoint both refuse such weights."""
    import numpy as np

    for name, value in named_arrays:
        finite = np.count_nonzero(np.isfinite(value))
        if finite != value.size:
            return name, int(value.size - finite), int(value.size)
    return None


def read_encoder_config(path: str) -> EncoderConfig:
    """An EncoderConfig JSON (discriminator_config.json, generator_config.json)."""
    try:
        return EncoderConfig.from_dict(read_json(path))
    except (TypeError, ConfigError) as e:
        raise InputError(f"{path}: not an encoder config ({e})") from None


# === Where things are in a folder ===
def checkpoint_dir(model_dir: str) -> str:
    return os.path.join(model_dir, CHECKPOINTS)


def has_checkpoints(model_dir: str) -> bool:
    """Whether model_dir/checkpoints holds a run's state to resume (a finished save)."""
    folder = checkpoint_dir(model_dir)
    # (a state file or a .data file alone had counted: a finished run's folder whose one
    # save had lost its .index then started again from step 0 over its model)
    return os.path.isdir(folder) and any(
        save_step(name, prefix=False) is not None for name in os.listdir(folder))


def weights_file_folder(path: str) -> str | None:
    """The folder `path` is the model weights file of (its discriminator.weights.h5 or
    finetuned.weights.h5, which --init_checkpoint takes for the folder), or None."""
    if os.path.basename(path) in (DISCRIMINATOR_WEIGHTS, FINETUNED_WEIGHTS) \
            and os.path.isfile(path):
        return os.path.dirname(path) or "."
    return None


def trials_path(folder: str) -> str:
    """Where a trial group folder's trials.json lies (whether or not it is there)."""
    return os.path.join(folder, TRIALS)


def what_it_holds(folder: str) -> str:
    """What a folder that is not the kind asked for holds instead, for the refusal
    ("; it holds ..."), or "" (nothing recognised, or a folder it cannot list). A
    missing-file error had always described the kind expected: a fine-tuned folder
    given as a pre-training one, a run that has not finished, an export's model folder."""
    try:
        return _what_it_holds(folder)
    except OSError:  # unreadable: the refusal's own line says enough
        return ""


def original_checkpoint_hint(path: str) -> str:
    """"; it is a checkpoint of the original ..." where `path` is a TF1 checkpoint's
    prefix or a folder holding one (google-research/electra's release or fine-tuning
    output), else "": such a path had been "not found", or told the files it lacks."""
    try:
        def original(name: str) -> bool:  # not a run's own saves, nor a SavedModel's
            return save_step(name, prefix=False) is None and name != "variables.index"

        prefix = os.path.isfile(path + ".index") and original(os.path.basename(path) + ".index")
        folder = not prefix and os.path.isdir(path) and any(
            name.endswith(".index") and original(name) for name in os.listdir(path))
    except OSError:
        return ""
    if not (prefix or folder):
        return ""
    return (f"; it {'is' if prefix else 'holds'} a checkpoint of the original ELECTRA "
            f"(TensorFlow 1): convert it first, python -m electra_tf.convert --from=tf1 "
            f"--checkpoint={path} --output=NEW_FOLDER (docs/conversion.md)")


def _what_it_holds(folder: str) -> str:
    def has(name: str) -> bool:
        return os.path.exists(os.path.join(folder, name))

    if not os.path.isdir(folder):
        return original_checkpoint_hint(folder)  # (a checkpoint's prefix, or nothing)
    if has(FINETUNING_CONFIG) and has(FINETUNED_WEIGHTS):
        return f"; it is a fine-tuning folder ({FINETUNING_CONFIG}, {FINETUNED_WEIGHTS})"
    if has(DISCRIMINATOR_WEIGHTS) and has(DISCRIMINATOR_CONFIG):
        return f"; it is a pre-training folder ({DISCRIMINATOR_WEIGHTS})"
    if has(FINETUNED_WEIGHTS):
        return (f"; it holds a fine-tuned model's {FINETUNED_WEIGHTS} without the "
                f"{FINETUNING_CONFIG} that records its head and labels: copy the whole folder")
    if has(GENERATOR_WEIGHTS) and not has(DISCRIMINATOR_WEIGHTS) and not has_checkpoints(folder):
        return (f"; it holds a generator alone ({GENERATOR_WEIGHTS}: a masked LM, as a "
                "conversion of a transformers ElectraForMaskedLM writes), no discriminator")
    if has_checkpoints(folder):
        kind = ("fine-tuning " if has(FINETUNING_CONFIG) else
                "pre-training " if has(PRETRAINING_CONFIG) else "")
        return (f"; it holds a {kind}run that has not finished: {CHECKPOINTS}/ holds its "
                "saves, and the final weights are written at its end (rerun its command to "
                "resume and finish)")
    if has(TRIALS):
        parent, base = os.path.split(os.path.normpath(folder))
        trials = sorted((n for n in os.listdir(parent or ".") if n.startswith(base + "_")
                         and n[len(base) + 1:].isdecimal()
                         and os.path.isdir(os.path.join(parent, n))),
                        key=lambda n: int(n[len(base) + 1:]))
        return (f"; it is a trial group ({TRIALS}): give one of its trials' folders ("
                + (", ".join(trials[:5]) + (", ..." if len(trials) > 5 else "") if trials
                   else f"none is left beside it: {base}_K, K from 1") + ")")
    parent, base = os.path.split(os.path.normpath(folder))
    if base == CHECKPOINTS and has_checkpoints(parent or "."):
        return (f"; it is the {CHECKPOINTS}/ folder of the run in {parent or '.'}: give that "
                "folder")
    versions = sorted((n for n in os.listdir(folder) if n.isdecimal() and any(
        os.path.isfile(os.path.join(folder, n, pb))
        for pb in ("saved_model.pb", "saved_model.pbtxt"))), key=int)
    if versions:
        return (f"; it is an export's model folder (version{'s' * (len(versions) > 1)} "
                f"{', '.join(versions)}: SavedModels): give the model_dir it was exported from")
    return original_checkpoint_hint(folder)  # (after the kinds above: they say more)


def save_step(name: str, *, prefix: bool) -> int | None:
    """The step of the save named `name` (a file name, no folder), else None.

    prefix=True takes the names a user gives a save by (ckpt-N, jax-ckpt-N.npz);
    prefix=False the files that mark a finished one (ckpt-N.index,
    jax-ckpt-N.npz: a tf.train save writes its .index last).
    """
    m = _SAVE_NAME.fullmatch(name)
    if not m:
        return None
    if m.group(3) is not None:
        return int(m.group(3))
    return int(m.group(1)) if (m.group(2) is None) == prefix else None


def latest_checkpoint_step(model_dir: str) -> int | None:
    """The highest step among model_dir/checkpoints' saves of either backend
    (ckpt-N.index, jax-ckpt-N.npz); None without one."""
    folder = checkpoint_dir(model_dir)
    names = os.listdir(folder) if os.path.isdir(folder) else []
    steps = [step for step in (save_step(name, prefix=False) for name in names) if step is not None]
    return max(steps, default=None)


def holds_weights(model_dir: str, weights: str) -> bool:
    """Whether model_dir holds a model's final weights file `weights`
    (DISCRIMINATOR_WEIGHTS, FINETUNED_WEIGHTS)."""
    return os.path.exists(os.path.join(model_dir, weights))


def remove_stale_temporaries(folder: str) -> list[str]:
    """Removes the `.tmp-*` files a kill mid-write left in `folder`; returns their names.

    Call when a run starts, before it writes anything: only one run writes a
    folder at a time.
    """
    removed = []
    if os.path.isdir(folder):
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if name.startswith(".tmp-") and os.path.isfile(path):
                os.remove(path)
                removed.append(name)
    return removed


def model_folder(checkpoint: str) -> str:
    """The folder of a model: `checkpoint` itself, the folder of a .weights.h5 file, or
    the model_dir of one of its checkpoints (MODEL_DIR/checkpoints/ckpt-N)."""
    path = os.path.abspath(checkpoint)
    if os.path.isdir(path):
        return checkpoint
    if os.path.basename(os.path.dirname(path)) == CHECKPOINTS:
        return os.path.dirname(os.path.dirname(path))
    if path.endswith(".h5"):
        return os.path.dirname(path)
    return checkpoint  # a folder, even one that is gone (so the error names it)


def _folder_of(path: str) -> str:
    return path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
