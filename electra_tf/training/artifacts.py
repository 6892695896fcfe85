"""The folders electra_tf writes and reads: the one owner of their format.

Three kinds of folder, each a set of files with fixed names:

- pre-training model_dir (`run_pretraining`; also what `convert --from=tf1|hf`
  writes, in part):
    pretraining_config.json   {"pretraining": PretrainingConfig, "run": RunConfig
                               (at least vocab_file), "vocab_sha256" (of the token
                               list of vocab.txt; absent exactly when the folder has
                               no vocabulary, e.g. a converted checkpoint that came
                               without one), ["converted_from": path]}
    vocab.txt                 the vocabulary (`keep_vocab`): every reader checks it
                              against vocab_sha256 (`folder_vocab`, `checked_vocab`)
    discriminator.weights.h5  the model users fine-tune (RTD head)
    discriminator_config.json its EncoderConfig
    generator.weights.h5      [+ generator_config.json for a stand-alone one]
    final_eval.json           {"step", metrics...}
    checkpoints/              the loop's checkpoints (training/checkpoints.py)
    conversion_report.json    (converted folders only; an imported
                              transformers task model is a fine-tuning folder too)
- fine-tuning model_dir (`run_finetuning`):
    finetuning_config.json    {"finetuning", "run", "encoder", "task" (its name),
                               "head" (what the model serves: tasks/heads/,
                               which the export's --task names), "regression",
                               "answerable", "pair", "label_names", "head_options"
                               (FinetuningModel's head arguments, e.g. SQuAD's
                               span_head and beam_size), ["label_scale": [min, max]
                               of a regression target], "vocab_sha256", ...}
    vocab.txt                 the vocabulary, as in a pre-training folder
    finetuned.weights.h5      encoder + task head
    results.json              metrics per epoch
    checkpoints/, prediction files
    (either kind) .lock       while a run runs: its host and pid (fileio.FolderLock:
                              one run per folder; the lock dies with its process,
                              the file goes when the run ends)
- the TF Serving export is `export/`'s own layout (TF Serving's).

Every JSON file carries "format_version" (FORMAT_VERSION); a file without
one, or of a newer version than this code knows, is refused with a clear
error, and so is one without a field it must have (one line naming the file
and the field: there is one format, and nothing is guessed). Every file is written
atomically (temporary name, then rename), so a kill mid-write leaves the old
file or none, never a truncated one; the temporary file such a kill leaves
(`.tmp-*`) is removed when a run starts again (`remove_stale_temporaries`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
from typing import Any

from electra_tf.core.config import EncoderConfig, PretrainingConfig, model_size_of
from electra_tf.core.errors import ConfigError, InputError
from electra_tf.core.fileio import (
    atomic_write,
    atomic_write_json,
    atomic_write_text,
    check_free_space,
)
from electra_tf.tasks import heads

FORMAT_VERSION = 1

PRETRAINING_CONFIG = "pretraining_config.json"
DISCRIMINATOR_WEIGHTS = "discriminator.weights.h5"
DISCRIMINATOR_CONFIG = "discriminator_config.json"
GENERATOR_WEIGHTS = "generator.weights.h5"
GENERATOR_CONFIG = "generator_config.json"
FINAL_EVAL = "final_eval.json"
FINETUNING_CONFIG = "finetuning_config.json"
FINETUNED_WEIGHTS = "finetuned.weights.h5"
RESULTS = "results.json"
CONVERSION_REPORT = "conversion_report.json"
VOCAB = "vocab.txt"
CHECKPOINTS = "checkpoints"


# === JSON and weights, versioned and atomic ===
def write_json(path: str, value: dict) -> None:
    """Writes `value` + the format version, atomically."""
    atomic_write_json(path, {"format_version": FORMAT_VERSION, **value})


def read_json(path: str) -> dict:
    """Reads a file `write_json` wrote.

    Raises:
      InputError: missing, not JSON, not written by electra_tf, or written by
        a newer electra_tf.
    """
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except FileNotFoundError:
        raise InputError(f"{path} not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not a valid JSON file ({e})") from None
    if not isinstance(value, dict):
        raise InputError(f"{path}: expected a JSON object")
    if "format_version" not in value:
        raise InputError(f"{path}: no format_version; not a file electra_tf wrote")
    version = value.pop("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise InputError(f"{path} has format_version {version!r}; this electra_tf reads "
                         f"up to {FORMAT_VERSION} (upgrade electra_tf)")
    return value


def save_weights(model, path: str) -> None:
    """model.save_weights, atomically (Keras wants the .weights.h5 ending).

    Raises:
      OSError(ENOSPC) before h5py writes, where the disk has no room for the file
      (`weights_file_bytes`): h5py crashes the process on a full disk.
    """
    check_free_space(path, weights_file_bytes(model))
    atomic_write(path, model.save_weights, suffix=".weights.h5")


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
    if not os.path.isfile(path):
        raise InputError(f"{path} not found")
    try:
        model.load_weights(path)
    except ValueError as e:
        raise ConfigError(f"{path} does not fit the model's config: {e}") from None
    except (OSError, KeyError, RuntimeError) as e:  # h5py's errors for a damaged file
        raise InputError(f"{path}: not a readable weights file ({e})") from None


def checkpoint_dir(model_dir: str) -> str:
    return os.path.join(model_dir, CHECKPOINTS)


def has_checkpoints(model_dir: str) -> bool:
    """Whether model_dir/checkpoints holds a run's state to resume (a finished save)."""
    folder = checkpoint_dir(model_dir)
    return os.path.isdir(folder) and any(
        not name.startswith(".") and not name.endswith("_temp") for name in os.listdir(folder))


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


def _folder_of(path: str) -> str:
    return path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))


# === Pre-training folders ===
def write_pretraining_config(model_dir: str, config: PretrainingConfig | None,
                             run: Any, **extra) -> None:
    """pretraining_config.json: the hyperparameters and where the run read its data.

    Also keeps the vocabulary in the folder (model_dir/vocab.txt, `keep_vocab`)
    and records its fingerprint (`vocab_fingerprint`), which every later
    reader checks (`folder_vocab`) and a resumed run must match.

    Args:
      config: the PretrainingConfig (None for a converted discriminator alone).
      run: a RunConfig, or a dict with at least "vocab_file".
      **extra: more top-level keys (e.g. converted_from).
    """
    value = {"run": dataclasses.asdict(run) if dataclasses.is_dataclass(run) else dict(run)}
    if config is not None:
        value["pretraining"] = config.to_dict()
    value.update(keep_vocab(model_dir, value["run"].get("vocab_file", "")))
    write_json(os.path.join(model_dir, PRETRAINING_CONFIG), {**value, **extra})


def vocab_fingerprint(vocab_file: str) -> str:
    """sha256 of the vocabulary's token list (one per line): its identity, not its path.

    Raises:
      VocabError: the file is missing or not a vocabulary.
    """
    from electra_tf.text.vocab import load_vocab

    return _fingerprint(load_vocab(vocab_file))


def _fingerprint(tokens: list[str]) -> str:
    return hashlib.sha256("\n".join(tokens).encode("utf-8")).hexdigest()


# === Vocabularies: every folder carries its own ===
def keep_vocab(folder: str, vocab_file: str) -> dict:
    """Writes `vocab_file`'s tokens to folder/vocab.txt; returns {"vocab_sha256": ...}.

    What the folder's config records, so that the folder is self-contained:
    later commands read folder/vocab.txt wherever they run, and check it by
    this fingerprint. No `vocab_file`: {} (a folder without a vocabulary).

    Raises:
      VocabError: `vocab_file` is missing or not a vocabulary.
      ConfigError: folder/vocab.txt holds other tokens the folder does not record.
    """
    from electra_tf.core.errors import VocabError
    from electra_tf.text.vocab import load_vocab

    if not vocab_file:
        return {}
    tokens = load_vocab(vocab_file)
    target, fingerprint = os.path.join(folder, VOCAB), _fingerprint(tokens)
    if os.path.abspath(vocab_file) != os.path.abspath(target):
        if os.path.isfile(target):  # never overwrite a file electra_tf did not write there
            try:
                there = _fingerprint(load_vocab(target))
            except VocabError:
                there = ""
            if there != fingerprint and (not there or there != _recorded_fingerprint(folder)):
                raise ConfigError(f"{target} exists and holds other tokens than {vocab_file}, "
                                  f"and {folder} does not record it as its vocabulary; the "
                                  f"folder keeps its vocabulary there: move that file away "
                                  "or use another folder")
        atomic_write_text(target, "\n".join(tokens) + "\n")
    return {"vocab_sha256": fingerprint}


def _config_path(folder: str) -> str:
    """The config file that records the folder's vocabulary (fine-tuning's, else
    pre-training's; it may not exist)."""
    finetuning = os.path.join(folder, FINETUNING_CONFIG)
    return finetuning if os.path.exists(finetuning) else os.path.join(folder, PRETRAINING_CONFIG)


def _recorded_fingerprint(folder: str) -> str:
    """The vocab_sha256 the folder's config records, unchecked ("" if none)."""
    path = _config_path(folder)
    return read_json(path).get("vocab_sha256", "") if os.path.exists(path) else ""


def _check_vocab_record(path: str, value: dict) -> None:
    """A config that records a vocab_file records its fingerprint too (`keep_vocab`).

    Raises:
      InputError: one line naming the file and the field.
    """
    recorded = (value.get("run") or {}).get("vocab_file", "")
    if recorded and "vocab_sha256" not in value:
        raise InputError(f"{path}: lacks vocab_sha256 (it records vocab_file {recorded}); "
                         "not a file electra_tf wrote")


def _vocab_record(folder: str) -> tuple[str, str, str]:
    """What a folder records about its vocabulary: (fingerprint or "", the folder's
    vocab.txt or "" where there is none, the config file that records them).

    Raises:
      InputError: a config without a field it must have (`_check_vocab_record`).
    """
    config = _config_path(folder)
    value = read_json(config) if os.path.exists(config) else {}
    _check_vocab_record(config, value)
    own = os.path.join(folder, VOCAB)
    return value.get("vocab_sha256", ""), own if os.path.isfile(own) else "", config


def folder_vocab(folder: str) -> str:
    """The vocabulary of a folder electra_tf wrote (its own vocab.txt), checked by the
    fingerprint it records. "" when it holds and records none.

    Raises:
      ConfigError: the file holds other tokens than recorded (swapped, appended:
        ids would reach the wrong embeddings, or none).
      InputError: the recorded vocab.txt is gone, or a config lacks a field.
      VocabError: the file is not a vocabulary.
    """
    if not folder:
        return ""
    want, vocab, config = _vocab_record(folder)
    if want and not vocab:
        raise InputError(f"{os.path.join(folder, VOCAB)} not found: {config} records it as the "
                         f"vocabulary the model was trained with (sha256 {want[:12]}); restore "
                         "it, or give --vocab_file (that vocabulary)")
    if vocab and want:
        from electra_tf.text.vocab import load_vocab

        tokens = load_vocab(vocab)
        got = _fingerprint(tokens)
        if got != want:
            raise ConfigError(
                f"{vocab} holds other tokens than the vocabulary {config} records ({len(tokens)} "
                f"tokens, sha256 {got[:12]}, recorded {want[:12]}): it changed after the model "
                "was trained, and ids would reach other embeddings; restore that vocabulary")
    return vocab


def checked_vocab(folder: str, vocab_file: str = "", flag: str = "--vocab_file") -> str:
    """The vocabulary to feed `folder`'s model: `vocab_file` if given, else the folder's.

    A given one must hold the tokens the folder records (by fingerprint, or,
    where the folder holds a vocab.txt it records no fingerprint of, that file's).

    Raises:
      ConfigError: `vocab_file` holds other tokens (naming both files); and
        what `folder_vocab` raises.
    """
    if not vocab_file:
        return folder_vocab(folder)
    want, own, _ = _vocab_record(folder)
    if not want and own:
        from electra_tf.core.errors import VocabError

        try:
            want = vocab_fingerprint(own)
        except VocabError:
            want = ""
    got = vocab_fingerprint(vocab_file)
    if want and got != want:
        raise ConfigError(
            f"{flag}={vocab_file} holds other tokens than the vocabulary {folder} was trained "
            f"with ({own or os.path.join(folder, VOCAB)}, sha256 {want[:12]}; given: sha256 "
            f"{got[:12]}); use that vocabulary (or leave {flag} unset to use it)")
    return vocab_file


def check_resumed_vocab(model_dir: str, vocab_file: str) -> None:
    """Refuses to resume a fine-tuning model_dir's checkpoints with another vocabulary.

    Only when model_dir holds checkpoints and records the fingerprint of the
    vocabulary they were trained with.

    Raises:
      ConfigError: naming both files.
    """
    if not (has_checkpoints(model_dir)
            and os.path.exists(os.path.join(model_dir, FINETUNING_CONFIG))):
        return
    want, _, _ = _vocab_record(model_dir)
    got = vocab_fingerprint(vocab_file) if want else ""
    if got != want:
        raise ConfigError(
            f"{model_dir} holds checkpoints trained on the vocabulary "
            f"{os.path.join(model_dir, VOCAB)} (sha256 {want[:12]}), but this run reads "
            f"{vocab_file} (sha256 {got[:12]}); resume with that run's --init_checkpoint, or "
            "use another --model_dir")


def check_vocab_fits(vocab_file: str, rows: int, table: str = "the model's") -> None:
    """Refuses a vocabulary with more tokens than the embedding table has rows.

    Its last tokens would get ids past the table: every text holding one would
    fail in the served graph, or read memory it should not. A smaller
    vocabulary is legal (transformers models often pad the table).

    Raises:
      ConfigError: naming both sizes; VocabError: not a vocabulary.
    """
    from electra_tf.text.vocab import load_vocab

    size = len(load_vocab(vocab_file))
    if size > rows:
        raise ConfigError(f"{vocab_file} holds {size} tokens but {table} embedding table has "
                          f"{rows} rows: it is not this model's vocabulary")


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


def recorded_vocab_fingerprint(folder: str) -> str:
    """The vocab fingerprint a pre-training folder records ("" where its vocab was
    unreadable when the folder was written)."""
    return read_pretraining_config(folder).get("vocab_sha256", "")


def read_pretraining_config(folder: str) -> dict:
    """The pretraining_config.json of `folder` ({} when there is none).

    Raises:
      InputError: not a file electra_tf wrote, or one without a field it must
        have ("run"; "vocab_sha256" beside a recorded vocab_file).
    """
    path = os.path.join(folder, PRETRAINING_CONFIG)
    if not os.path.exists(path):
        return {}
    value = read_json(path)
    if "run" not in value:
        raise InputError(f"{path}: lacks run; not a file electra_tf wrote")
    _check_vocab_record(path, value)
    return value


def recorded_vocab(folder: str) -> str:
    """The vocab file a pre-training folder records ("" if none)."""
    return read_pretraining_config(folder).get("run", {}).get("vocab_file", "")


def recorded_do_lower_case(folder: str) -> bool:
    """Whether the folder's model was pre-trained on lower-cased text (default True)."""
    return read_pretraining_config(folder).get("pretraining", {}).get("do_lower_case", True)


def record_vocab(folder: str, vocab: str) -> None:
    """Records `vocab` where fine-tuning looks for it, unless a config exists."""
    if vocab and not os.path.exists(os.path.join(folder, PRETRAINING_CONFIG)):
        write_pretraining_config(folder, None, {"vocab_file": vocab})


def copy_vocab_file(vocab: str, output: str) -> str:
    """Copies the vocab file `vocab` to output/vocab.txt; returns the copy's path."""
    target = os.path.join(output, VOCAB)
    if os.path.abspath(vocab) != os.path.abspath(target):
        atomic_write(target, lambda tmp: shutil.copyfile(vocab, tmp))
    return os.path.abspath(target)


def copy_vocab(source_dir: str, output: str) -> str:
    """Copies source_dir/vocab.txt (if any) into output; returns the copy's path or ""."""
    vocab = os.path.join(source_dir, VOCAB)
    if not os.path.isfile(vocab):
        return ""
    target = os.path.join(output, VOCAB)
    if os.path.abspath(vocab) != os.path.abspath(target):
        atomic_write(target, lambda tmp: shutil.copyfile(vocab, tmp))
    return os.path.abspath(target)


def save_discriminator(folder: str, discriminator) -> None:
    """discriminator.weights.h5 + discriminator_config.json."""
    save_weights(discriminator, os.path.join(folder, DISCRIMINATOR_WEIGHTS))
    write_json(os.path.join(folder, DISCRIMINATOR_CONFIG), discriminator.config.to_dict())


def save_generator(folder: str, generator, standalone: bool = False) -> None:
    """generator.weights.h5 (+ generator_config.json when no pre-training config sizes it)."""
    save_weights(generator, os.path.join(folder, GENERATOR_WEIGHTS))
    if standalone:
        write_json(os.path.join(folder, GENERATOR_CONFIG), generator.config.to_dict())


def write_final_eval(folder: str, step: int, results: dict) -> None:
    write_json(os.path.join(folder, FINAL_EVAL), {"step": step, **results})


def read_final_eval(folder: str) -> dict:
    return read_json(os.path.join(folder, FINAL_EVAL))


def read_encoder_config(path: str) -> EncoderConfig:
    """An EncoderConfig JSON (discriminator_config.json, generator_config.json)."""
    try:
        return EncoderConfig.from_dict(read_json(path))
    except (TypeError, ConfigError) as e:
        raise InputError(f"{path}: not an encoder config ({e})") from None


def load_discriminator(init_checkpoint: str, model_size: str = "",
                       what: str = "init_checkpoint"):
    """A discriminator with pre-trained weights, and the vocab recorded with it.

    Args:
      init_checkpoint: a pre-training model_dir (holding discriminator.weights.h5
        and discriminator_config.json) or the .weights.h5 file itself.
      model_size: if given, the checkpoint must be of this size.
      what: names the folder in the error for a missing file (the caller's flag).

    Returns:
      (discriminator, vocab_file or "").
    Raises:
      InputError: files missing or unreadable; ConfigError: wrong size or shapes.
    """
    weights = init_checkpoint
    if os.path.isdir(init_checkpoint):
        weights = os.path.join(init_checkpoint, DISCRIMINATOR_WEIGHTS)
    folder = _folder_of(weights)
    config_file = os.path.join(folder, DISCRIMINATOR_CONFIG)
    for path in (weights, config_file):
        if not os.path.exists(path):
            raise InputError(f"{what}: {path} not found (expected a pre-training "
                             f"model_dir with {DISCRIMINATOR_WEIGHTS} and {DISCRIMINATOR_CONFIG})")
    config = read_encoder_config(config_file)
    size = model_size_of(config)
    if model_size and size != model_size:
        raise ConfigError(f"{weights} holds a {size}-sized discriminator (hidden "
                          f"{config.hidden_size}, {config.num_hidden_layers} layers), not "
                          f"--model_size={model_size}")
    from electra_tf.modeling.models import build_discriminator  # Keras: after the checks

    discriminator = build_discriminator(config)
    load_weights(discriminator, weights)
    return discriminator, folder_vocab(folder)


def load_generator(model_dir: str):
    """The generator of a pre-training folder (stand-alone or sized by its config).

    Raises:
      InputError: no generator, or nothing that gives its sizes.
    """
    from electra_tf.modeling.models import ElectraGenerator, build_pretraining_models

    weights = os.path.join(model_dir, GENERATOR_WEIGHTS)
    if not os.path.exists(weights):
        raise InputError(f"{weights} not found: this model_dir has no generator")
    standalone = os.path.join(model_dir, GENERATOR_CONFIG)
    if os.path.exists(standalone):
        generator = ElectraGenerator(read_encoder_config(standalone))
        generator.build()
    else:
        recorded = read_pretraining_config(model_dir)
        if "pretraining" not in recorded:
            raise InputError(f"neither {GENERATOR_CONFIG} nor a pre-training config in "
                             f"{model_dir}: the generator's sizes are unknown")
        config = PretrainingConfig.from_dict(recorded["pretraining"])
        generator, disc = build_pretraining_models(config.encoders)
        if generator.encoder.embeddings is disc.encoder.embeddings:  # G embeds with D's tables
            load_weights(disc, os.path.join(model_dir, DISCRIMINATOR_WEIGHTS))
    load_weights(generator, weights)
    return generator


# === Converted folders ===
def write_conversion_report(folder: str, report: dict, kind: str | None = None) -> None:
    """conversion_report.json; with `kind`, merged under that key (several imports)."""
    path = os.path.join(folder, CONVERSION_REPORT)
    if kind is None:
        write_json(path, report)
        return
    merged = read_json(path) if os.path.exists(path) else {}
    merged[kind] = report
    write_json(path, merged)


# === Fine-tuning folders ===
@dataclasses.dataclass(frozen=True)
class FinetunedRecord:
    """What finetuning_config.json records about a fine-tuned model."""

    task: str  # the task name (registry)
    head: str  # what the model serves: a name of tasks/heads/ (the task's `head`)
    regression: bool  # a sequence_classification head that predicts a number
    answerable: bool  # a squad head with an answerability logit (SQuAD 2.0)
    pair: bool  # the task reads two texts
    label_names: tuple[str, ...]
    encoder: EncoderConfig
    max_seq_length: int
    finetuning: dict  # the FinetuningConfig fields
    run: dict  # the FinetuneRun fields
    # FinetuningModel's head arguments (task.head_options; a span head's name its
    # span_head).
    head_options: dict = dataclasses.field(default_factory=dict)
    # Regression: the target trained was (score - min) / max, so a score is
    # logit * max + min (recorded for a regression head; (0, 1) for the others).
    label_scale: tuple[float, float] = (0.0, 1.0)
    model_dir: str = ""  # the folder it was read from (its vocab.txt: `finetuned_vocab`)

    @property
    def do_lower_case(self) -> bool:
        return bool(self.finetuning.get("do_lower_case", True))

    @property
    def no_answer_threshold(self) -> float:
        return float(self.finetuning.get("no_answer_threshold", 0.0))

    @property
    def head_class(self):
        """The recorded head's class (tasks/heads/)."""
        return heads.head_class(self.head)

    @property
    def head_config(self):
        """The recorded head's config (ValueError, TypeError: options that make none)."""
        return self.head_class.config_from_record({
            "regression": self.regression, "answerable": self.answerable,
            "head_options": self.head_options})


def write_finetuning_config(model_dir: str, *, task, config, run, encoder: EncoderConfig,
                            model_size: str, max_seq_length: int, head_config=None,
                            head_options=None, label_scale=None, vocab_file: str = "",
                            **extra) -> None:
    """finetuning_config.json: the task, its head, the encoder and the run.

    Also keeps the vocabulary in the folder (model_dir/vocab.txt) and records
    its fingerprint, as `write_pretraining_config` does.

    Args:
      task: the tasks.base.Task trained (its head, what its head class records of
        its config: `Head.record`, and, for a regression, regression_min and
        regression_max).
      config, run: FinetuningConfig and FinetuneRun.
      encoder: the encoder's config; model_size: its size name.
      head_config, label_scale: what the model has where it differs from the
        task's own (the classifier head chosen, an imported model); head_options:
        what to record of it where that differs from `Head.record`'s (an import's).
      **extra: more keys (epochs, total_steps, layerwise_lr_decay).
    """
    value = {
        "finetuning": config.to_dict(), "run": dataclasses.asdict(run),
        "encoder": encoder.to_dict(), "model_size": model_size, "task": task.name,
        "head": task.head,
        **task.head_class.record(task.head_config() if head_config is None else head_config),
        **({} if head_options is None else {"head_options": dict(head_options)}),
        "pair": task.text_b is not None,
        "label_names": list(task.label_names), "max_seq_length": max_seq_length}
    if task.regression:
        value["label_scale"] = [float(v) for v in label_scale or (task.regression_min,
                                                                   task.regression_max)]
    value.update(keep_vocab(model_dir, vocab_file or run.vocab_file))
    write_json(os.path.join(model_dir, FINETUNING_CONFIG), {**value, **extra})


def read_finetuning_config(model_dir: str) -> FinetunedRecord:
    """The record of a fine-tuning model_dir.

    Raises:
      InputError: no finetuning_config.json (not a fine-tuning model_dir), or
        one without a field it must have (one line naming the file and the fields),
        or with a head this electra_tf does not know.
    """
    path = os.path.join(model_dir, FINETUNING_CONFIG)
    if not os.path.exists(path):
        raise InputError(f"{path} not found (expected a fine-tuning model_dir with "
                         f"{FINETUNED_WEIGHTS} and {FINETUNING_CONFIG})")
    value = read_json(path)
    missing = [k for k in ("task", "head", "regression", "answerable", "pair", "encoder",
                           "max_seq_length", "head_options", "label_names", "finetuning", "run")
               if k not in value]
    head = value.get("head")
    if value.get("regression") and "label_scale" not in value:
        missing.append("label_scale")
    if head in heads.HEADS:  # what the head's class needs (a span head's variant, ...)
        missing += heads.head_class(head).record_lacks(value)
    if missing:
        raise InputError(f"{path}: lacks {', '.join(missing)}; not a file electra_tf wrote")
    if head not in heads.HEADS:
        raise InputError(f"{path}: head {head!r} is not one of {', '.join(heads.HEADS)}")
    _check_vocab_record(path, value)
    return FinetunedRecord(
        task=value["task"], head=head, regression=bool(value["regression"]),
        answerable=bool(value["answerable"]),
        pair=bool(value["pair"]), label_names=tuple(value["label_names"]),
        encoder=EncoderConfig.from_dict(value["encoder"]),
        max_seq_length=int(value["max_seq_length"]),
        finetuning=value["finetuning"], run=value["run"],
        head_options=dict(value["head_options"]),
        label_scale=_label_scale(value.get("label_scale", (0.0, 1.0)), path),
        model_dir=model_dir)


def _label_scale(value, path: str) -> tuple[float, float]:
    try:
        low, high = (float(x) for x in value)
    except (TypeError, ValueError):
        raise InputError(f"{path}: label_scale must be [min, max], got {value!r}") from None
    return low, high


def is_finetuning_folder(path: str) -> bool:
    """Whether `path` is a fine-tuning model_dir (run_finetuning's, or an imported task
    model's): it holds finetuning_config.json and finetuned.weights.h5."""
    return bool(path) and os.path.isdir(path) and all(
        os.path.exists(os.path.join(path, name)) for name in (FINETUNING_CONFIG,
                                                               FINETUNED_WEIGHTS))


def save_finetuned(model_dir: str, model) -> None:
    save_weights(model, os.path.join(model_dir, FINETUNED_WEIGHTS))


def load_finetuned(model_dir: str):
    """The fine-tuned model of a fine-tuning model_dir, and its record.

    The model has the recorded head (`head_options`: SQuAD's joint or
    independent span head).

    Returns:
      (FinetuningModel with the weights loaded, FinetunedRecord).
    """
    record = read_finetuning_config(model_dir)
    weights = os.path.join(model_dir, FINETUNED_WEIGHTS)
    if not os.path.exists(weights):
        raise InputError(f"{weights} not found (expected a fine-tuning model_dir with "
                         f"{FINETUNED_WEIGHTS} and {FINETUNING_CONFIG})")
    # Keras (and its backend) only once the files are there: a missing one is
    # reported before seconds of imports.
    from electra_tf.modeling.models import build_discriminator
    from electra_tf.tasks.model import FinetuningModel

    encoder = build_discriminator(record.encoder).encoder
    try:
        model = FinetuningModel(encoder, record.head, max(1, len(record.label_names)),
                                config=record.head_config)
    except (TypeError, ValueError) as e:
        raise InputError(f"{os.path.join(model_dir, FINETUNING_CONFIG)}: head_options "
                         f"{record.head_options!r} do not build a model ({e})") from None
    model.build()
    load_weights(model, weights)
    return model, record


def finetuned_vocab(record: FinetunedRecord) -> str:
    """The vocab a fine-tuned model was trained with (`folder_vocab` of its folder)."""
    return folder_vocab(record.model_dir)


def read_results(model_dir: str) -> dict:
    path = os.path.join(model_dir, RESULTS)
    return read_json(path) if os.path.exists(path) else {}


def write_results(model_dir: str, results: dict) -> None:
    write_json(os.path.join(model_dir, RESULTS), results)
