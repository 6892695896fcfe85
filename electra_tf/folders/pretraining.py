"""A pre-training model_dir: what `run_pretraining` writes, fine-tuning starts from and
the export serves for rtd (a converted one: `converted.py`).

    pretraining_config.json   {"pretraining": PretrainingConfig, "run": PretrainingRun
                               (at least vocab_file), "vocab_sha256" (of the token
                               list of vocab.txt; absent exactly when the folder has
                               no vocabulary, e.g. a converted checkpoint that came
                               without one), ["converted_from": path],
                               ["do_lower_case": a converted model's casing, where
                               no PretrainingConfig records it]}
    vocab.txt                 the vocabulary (`vocabulary.keep_vocab`): every reader
                              checks it against vocab_sha256 (`FolderVocab`)
    discriminator.weights.h5  the model users fine-tune (RTD head)
    discriminator_config.json its EncoderConfig
    generator.weights.h5      [+ generator_config.json for a stand-alone one]
    final_eval.json           {"step", metrics...}
    checkpoints/              the loop's checkpoints (training/checkpoints.py)

`PretrainingFolder.open` reads it once (the configs parsed and checked, the
vocabulary's record read, the weights found); the functions below it write it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any

from electra_tf.core.config import EncoderConfig, PretrainingConfig, model_size_of
from electra_tf.core.errors import ConfigError, InputError
from electra_tf.folders.files import (
    CHECKPOINTS,
    DISCRIMINATOR_CONFIG,
    DISCRIMINATOR_WEIGHTS,
    FINAL_EVAL,
    GENERATOR_CONFIG,
    GENERATOR_WEIGHTS,
    PRETRAINING_CONFIG,
    VOCAB,
    _folder_of,
    check_no_unfinished_conversion,
    check_save_target,
    checked_path,
    has_checkpoints,
    holds_weights,
    load_weights,
    read_encoder_config,
    read_json,
    save_weights,
    what_it_holds,
    write_json,
)
from electra_tf.folders.vocabulary import FolderVocab, _check_vocab_record, keep_vocab


@dataclasses.dataclass(frozen=True)
class PretrainingFolder:
    """A pre-training model_dir, opened once (`open`), then carried.

    Attributes:
      path: the folder.
      recorded: its pretraining_config.json, checked ({} where it has none).
      vocabulary: what it records about its vocabulary (`FolderVocab`).
      encoder: its discriminator's EncoderConfig (None: a folder opened without one).
      weights: the discriminator's .weights.h5 ("" likewise).
    """

    path: str
    recorded: dict
    vocabulary: FolderVocab
    encoder: EncoderConfig | None = None
    weights: str = ""

    @classmethod
    def open(cls, checkpoint: str, what: str = "model_dir",
             discriminator: bool = True) -> PretrainingFolder:
        """Opens a pre-training model_dir (or, with `discriminator`, its .weights.h5 file).

        Args:
          checkpoint: the folder, or its discriminator.weights.h5 (or another
            .weights.h5 beside a discriminator_config.json).
          what: names the folder in the error for a missing file (the caller's flag;
            by default "model_dir", as FinetunedFolder.open names its argument).
          discriminator: the folder must hold a discriminator (its weights and config).
        Raises:
          InputError: files missing or unreadable, a config without a field it must have.
          TypeError: a checkpoint that is not a path.
        """
        checkpoint = checked_path(checkpoint, what)
        if discriminator and os.path.isfile(checkpoint) \
                and not checkpoint.endswith(".weights.h5"):
            raise InputError(f"{what}: {checkpoint} is a file, not a pre-training model_dir "
                             f"(or its {DISCRIMINATOR_WEIGHTS})")
        if discriminator and os.path.basename(checkpoint) == GENERATOR_WEIGHTS:
            raise InputError(f"{what}: {checkpoint} is the generator (the masked LM), not the "
                             f"discriminator: give its folder, or its {DISCRIMINATOR_WEIGHTS}")
        weights = checkpoint
        if os.path.isdir(checkpoint) or not discriminator:
            weights = os.path.join(checkpoint, DISCRIMINATOR_WEIGHTS)
        folder = checkpoint if os.path.isdir(checkpoint) or not discriminator \
            else _folder_of(weights)
        check_no_unfinished_conversion(folder, what)
        encoder = None
        if discriminator:
            config_file = os.path.join(folder, DISCRIMINATOR_CONFIG)
            for path in (weights, config_file):
                if not os.path.exists(path):
                    raise InputError(f"{what}: {path} not found (expected a pre-training model_dir "
                                     f"with {DISCRIMINATOR_WEIGHTS} and {DISCRIMINATOR_CONFIG})"
                                     + what_it_holds(folder))
            encoder = read_encoder_config(config_file)
        recorded = read_pretraining_config(folder)
        return cls(folder, recorded, FolderVocab.read(folder), encoder,
                   weights if discriminator else "")

    @classmethod
    def save(cls, path: str, discriminator, vocab_file: str,
             config: PretrainingConfig | None = None) -> PretrainingFolder:
        """Writes a pre-training folder of a discriminator you built, and opens it.

        Its weights and config, and `vocab_file` kept as the folder's vocab.txt
        with its fingerprint: what fine-tuning's --init_checkpoint, the export's
        --task=rtd and `Predictor.open` read.

        Args:
          discriminator: an ElectraDiscriminator (modeling.models.build_discriminator).
          vocab_file: the vocabulary its embedding table was made for.
          config: the PretrainingConfig it was trained with, if any.
        Raises:
          ConfigError: not an ElectraDiscriminator, a config that is not a
            PretrainingConfig, or a vocabulary larger than its embedding table;
          VocabError: `vocab_file` is missing or not a vocabulary.
          Each before anything is written.
        """
        from electra_tf.folders.vocabulary import check_vocab_fits
        from electra_tf.modeling.models import ElectraDiscriminator

        if not isinstance(discriminator, ElectraDiscriminator):
            raise ConfigError(f"PretrainingFolder.save takes an ElectraDiscriminator "
                              f"(modeling.build_discriminator), got {type(discriminator).__name__}")
        if config is not None and not isinstance(config, PretrainingConfig):
            raise ConfigError(f"config must be a PretrainingConfig or None, got "
                              f"{type(config).__name__}")
        if config is not None:  # it describes the model (a config of another had been
            # recorded, and the folder then refused by what reads it)
            differ = _differences(config.discriminator_config(), discriminator.config)
            if differ:
                raise ConfigError(f"config does not describe this discriminator: {differ}; "
                                  "pass the PretrainingConfig it was built from, or none")
        if not discriminator.weights:  # (its folder had been written, and never opened)
            raise ConfigError("the discriminator has no weights yet: build it with "
                              "modeling.build_discriminator(config), or call it once, "
                              "before saving")
        vocab_file = checked_path(vocab_file, "vocab_file", "a vocabulary file's path")
        check_vocab_fits(vocab_file, discriminator.config.vocab_size)
        path = check_save_target(path, "PretrainingFolder.save: path",
                                 (DISCRIMINATOR_WEIGHTS, DISCRIMINATOR_CONFIG,
                                  PRETRAINING_CONFIG, VOCAB))
        os.makedirs(path, exist_ok=True)
        # A folder saved over: the old model's files go first, the record and vocabulary
        # come before the weights and their config, so that a save stopped midway leaves
        # a folder that refuses to open (its discriminator missing), never the new
        # weights beside the old record and vocabulary.
        for name in (DISCRIMINATOR_CONFIG, DISCRIMINATOR_WEIGHTS):
            if os.path.isfile(os.path.join(path, name)):
                os.remove(os.path.join(path, name))
        write_pretraining_config(path, config, {"vocab_file": vocab_file})
        save_discriminator(path, discriminator)
        return cls.open(path)

    # === What it records ===
    @property
    def config(self) -> PretrainingConfig | None:
        """The PretrainingConfig of the run that wrote it (None: a converted discriminator)."""
        if "pretraining" not in self.recorded:
            return None
        return PretrainingConfig.from_dict(self.recorded["pretraining"])

    @property
    def recorded_do_lower_case(self) -> bool | None:
        """Whether its model was pre-trained on lower-cased text, as the folder records
        it (`recorded_casing`)."""
        return recorded_casing(self.recorded)

    @property
    def do_lower_case(self) -> bool:
        """Whether its model was pre-trained on lower-cased text (not recorded: True, as
        ELECTRA's released models)."""
        recorded = self.recorded_do_lower_case
        return True if recorded is None else recorded

    @property
    def trained_length(self) -> int | None:
        """The longest max_seq_length its model was pre-trained at (phase 2's when it had
        one; a converted model's recorded length); None: not recorded."""
        return self.trained_length_at(None)

    def trained_length_at(self, step: int | None) -> int | None:
        """trained_length as of the checkpoint of `step` (None: the folder's model): phase
        1's length for a checkpoint saved before phase 2 trained (phase 2 is the last
        phase2_steps of num_train_steps)."""
        record = self.recorded.get("pretraining", {})
        phase2 = record.get("phase2_steps")
        if phase2 and step is not None and isinstance(record.get("num_train_steps"), int):
            phase2 = step > record["num_train_steps"] - phase2
        length = record.get("phase2_max_seq_length") if phase2 else record.get("max_seq_length")
        return length if isinstance(length, int) and not isinstance(length, bool) \
            and length > 0 else None

    def untrained_positions_warning(self, length: int, what: str) -> str | None:
        """A warning where a window of `length` (the flag `what` gave it) is past the
        longest length the model was pre-trained at: its position embeddings there
        were never trained, and what a longer text gets on them (an Electric score, a
        replaced-token probability) is noise. None where not past it or not recorded."""
        trained = self.trained_length
        if trained is None or length <= trained:
            return None
        return (f"warning: {what}={length} is past the {trained} tokens the model was "
                f"pre-trained at: positions {trained + 1}-{length} were never trained, so "
                f"the word pieces of a text past the first {trained - 2} are judged on "
                f"untrained positions (give {what}={trained}, or leave it out)")

    def serving_length(self, given: int | None, positions: int) -> int:
        """The window of a score or rtd request: `given` (a flag), else trained_length,
        else 128 (at most the model's positions). A model pre-trained at 32 had been
        served at 128, on position embeddings it never trained."""
        return given or self.trained_length or min(128, positions)

    @property
    def recorded_vocab_file(self) -> str:
        """The vocab file the run read ("" if none recorded)."""
        return self.recorded.get("run", {}).get("vocab_file", "")

    @property
    def vocab_sha256(self) -> str:
        """The vocab fingerprint it records ("" where its vocab was unreadable when the
        folder was written)."""
        return self.recorded.get("vocab_sha256", "")

    def vocab(self, vocab_file: str = "", flag: str = "--vocab_file") -> str:
        """The vocabulary to feed its model (`FolderVocab.checked`)."""
        return self.vocabulary.checked(vocab_file, flag)

    @property
    def has_checkpoints(self) -> bool:
        return has_checkpoints(self.path)

    @property
    def checkpoint_dir(self) -> str:
        return os.path.join(self.path, CHECKPOINTS)

    def final_eval(self) -> dict | None:
        """Its final_eval.json (None where it has none).

        Raises:
          InputError: not a file electra_tf wrote.
        """
        return final_eval_of(self.path)

    # === Its models ===
    def load_discriminator(self, model_size: str = ""):
        """The discriminator with its weights.

        Args:
          model_size: if given, the discriminator must be of this size.
        Raises:
          InputError: unreadable weights; ConfigError: wrong size or shapes.
        """
        config = self.encoder
        size = model_size_of(config)
        if model_size and size != model_size:
            raise ConfigError(f"{self.weights} holds a {size}-sized discriminator (hidden "
                              f"{config.hidden_size}, {config.num_hidden_layers} layers), not "
                              f"--model_size={model_size}")
        from electra_tf.modeling.models import build_discriminator  # Keras: after the checks

        discriminator = build_discriminator(config)
        load_weights(discriminator, self.weights)
        return discriminator

    def load_generator(self):
        """The generator (stand-alone, or sized by the pre-training config).

        Raises:
          InputError: no generator, or nothing that gives its sizes.
        """
        from electra_tf.modeling.models import ElectraGenerator, build_pretraining_models

        weights = os.path.join(self.path, GENERATOR_WEIGHTS)
        if not os.path.exists(weights):
            raise InputError(f"{weights} not found: this model_dir has no generator")
        standalone = os.path.join(self.path, GENERATOR_CONFIG)
        if os.path.exists(standalone):
            generator = ElectraGenerator(read_encoder_config(standalone))
            generator.build()
        else:
            if "pretraining" not in self.recorded:
                raise InputError(f"neither {GENERATOR_CONFIG} nor a pre-training config in "
                                 f"{self.path}: the generator's sizes are unknown")
            generator, disc = build_pretraining_models(self.config.encoders)
            if generator.encoder.embeddings is disc.encoder.embeddings:  # G uses D's tables
                load_weights(disc, os.path.join(self.path, DISCRIMINATOR_WEIGHTS))
        load_weights(generator, weights)
        return generator


def load_discriminator(init_checkpoint: str, model_size: str = "",
                       what: str = "init_checkpoint"):
    """A discriminator with pre-trained weights, and its folder's vocabulary (checked).

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
    folder = PretrainingFolder.open(init_checkpoint, what)
    discriminator = folder.load_discriminator(model_size)
    return discriminator, folder.vocab()


def load_generator(model_dir: str):
    """The generator of a pre-training folder (`PretrainingFolder.load_generator`)."""
    return PretrainingFolder.open(model_dir, "model_dir", discriminator=False).load_generator()


def is_pretraining_folder(path: str) -> bool:
    """Whether `path` holds a pre-training config (a folder of run_pretraining's)."""
    return bool(path) and os.path.isfile(os.path.join(path, PRETRAINING_CONFIG))


def final_eval_path(folder: str) -> str:
    """Where the final_eval.json of `folder` lies (whether or not it is there)."""
    return os.path.join(folder, FINAL_EVAL)


def final_eval_of(folder: str) -> dict | None:
    """final_eval.json of `folder` (None where it has none).

    Raises:
      InputError: not a file electra_tf wrote.
    """
    path = final_eval_path(folder)
    return read_json(path) if os.path.isfile(path) else None


# === Writing one ===
def write_pretraining_config(model_dir: str, config: PretrainingConfig | None,
                             run: Any, **extra) -> None:
    """pretraining_config.json: the hyperparameters and where the run read its data.

    Also keeps the vocabulary in the folder (model_dir/vocab.txt, `keep_vocab`)
    and records its fingerprint (`vocab_fingerprint`), which every later
    reader checks (`folder_vocab`) and a resumed run must match.

    Args:
      config: the PretrainingConfig (None for a converted discriminator alone).
      run: a PretrainingRun, or a dict with at least "vocab_file".
      **extra: more top-level keys (e.g. converted_from).
    """
    value = {"run": dataclasses.asdict(run) if dataclasses.is_dataclass(run) else dict(run)}
    if config is not None:
        value["pretraining"] = config.to_dict()
    value.update(keep_vocab(model_dir, value["run"].get("vocab_file", "")))
    try:  # a converted model continued: where it came from stays recorded
        before = read_pretraining_config(model_dir)
    except InputError:  # a damaged record is replaced, as before
        before = {}
    if isinstance(before.get("converted_from"), str):
        value["converted_from"] = before["converted_from"]
    write_json(os.path.join(model_dir, PRETRAINING_CONFIG), {**value, **extra})


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


def recorded_casing(record: dict) -> bool | None:
    """The casing a pretraining_config.json's `record` gives: its PretrainingConfig's,
    else a converted model's; None: not recorded."""
    for part in (record.get("pretraining", {}), record):
        if "do_lower_case" in part:
            return bool(part["do_lower_case"])
    return None


def record_vocab(folder: str, vocab: str, do_lower_case: bool | None = None) -> None:
    """Records `vocab`, and the casing `do_lower_case` where known, where fine-tuning
    and the export look for them, unless a config exists."""
    if os.path.exists(os.path.join(folder, PRETRAINING_CONFIG)):
        return
    extra = {} if do_lower_case is None else {"do_lower_case": bool(do_lower_case)}
    if vocab or extra:
        write_pretraining_config(folder, None, {"vocab_file": vocab}, **extra)


def _differences(want: EncoderConfig, got: EncoderConfig) -> str:
    """The EncoderConfig fields in which `want` (a config's) and `got` (a model's)
    differ, as "name X (the model: Y)", or ""."""
    a, b = want.to_dict(), got.to_dict()
    return ", ".join(f"{k} {a[k]!r} (the model: {b[k]!r})" for k in sorted(a)
                     if a[k] != b.get(k))


def save_discriminator(folder: str, discriminator) -> None:
    """discriminator.weights.h5 + discriminator_config.json."""
    save_weights(discriminator, os.path.join(folder, DISCRIMINATOR_WEIGHTS))
    write_json(os.path.join(folder, DISCRIMINATOR_CONFIG), discriminator.config.to_dict())


def saved_discriminator_config(folder: str):
    """(EncoderConfig, its file) of the discriminator `save_discriminator` wrote into
    `folder` (a conversion's output, mid-conversion), or None where it holds none."""
    path = os.path.join(folder, DISCRIMINATOR_CONFIG)
    if not (holds_weights(folder, DISCRIMINATOR_WEIGHTS) and os.path.isfile(path)):
        return None
    return read_encoder_config(path), path


def save_generator(folder: str, generator, standalone: bool = False) -> None:
    """generator.weights.h5 (+ generator_config.json when no pre-training config sizes it)."""
    save_weights(generator, os.path.join(folder, GENERATOR_WEIGHTS))
    if standalone:
        write_json(os.path.join(folder, GENERATOR_CONFIG), generator.config.to_dict())


def model_without_checkpoints(model_dir: str) -> str | None:
    """The refusal of a pre-training --model_dir that holds a model and no checkpoints
    (a finished run's folder emptied of its saves; a conversion from transformers, or
    of a discriminator alone, which writes none), or None."""
    if has_checkpoints(model_dir) or not holds_weights(model_dir, DISCRIMINATOR_WEIGHTS):
        return None
    return (f"--model_dir {model_dir} holds a model ({DISCRIMINATOR_WEIGHTS}) and no "
            "checkpoints to continue: a new run would replace it; give another --model_dir "
            "(a conversion from transformers, or of a discriminator alone, writes no "
            "checkpoint and cannot be pre-trained further; a TF1 conversion of both models "
            "can)")


def remove_final_outputs(folder: str, step: int) -> None:
    """Removes an earlier end's generator.weights.h5 and final_eval.json from `folder`
    before a run writes its own end at `step` (the discriminator first): a run extended
    past its end and stopped between the two writes had left the new discriminator
    beside the old generator and a final_eval.json of the old step, a folder that opened
    as whole. An end of the same step (a finished run run again, which writes the same
    files again) keeps them: a full disk during the rewrite had left it without them."""
    try:
        same_end = (final_eval_of(folder) or {}).get("step") == step
    except InputError:  # (a damaged one: removed, as an earlier end's)
        same_end = False
    if same_end:
        return
    for name in (FINAL_EVAL, GENERATOR_WEIGHTS):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(folder, name))


def write_final_eval(folder: str, step: int, results: dict) -> None:
    write_json(os.path.join(folder, FINAL_EVAL), {"step": step, **results})


def read_final_eval(folder: str) -> dict:
    return read_json(os.path.join(folder, FINAL_EVAL))
