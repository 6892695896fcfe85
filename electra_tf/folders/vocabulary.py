"""Every folder carries its own vocabulary: vocab.txt, checked by the fingerprint
its config records (`vocab_sha256`, the sha256 of the token list).

`FolderVocab` is what one folder records about its vocabulary, read once;
every reader asks it for the vocabulary to feed the folder's model.
"""

from __future__ import annotations

import dataclasses
import os
import shutil

from electra_tf.core.errors import ConfigError, InputError, VocabError
from electra_tf.core.fileio import atomic_write, atomic_write_text
from electra_tf.folders.files import (
    FINETUNING_CONFIG,
    PRETRAINING_CONFIG,
    VOCAB,
    has_checkpoints,
    read_json,
)
from electra_tf.text.vocab import load_vocab, tokens_sha256


def vocab_fingerprint(vocab_file: str) -> str:
    """sha256 of the vocabulary's token list (one per line): its identity, not its path.

    Raises:
      VocabError: the file is missing or not a vocabulary.
    """
    return tokens_sha256(load_vocab(vocab_file))


def keep_vocab(folder: str, vocab_file: str) -> dict:
    """Writes `vocab_file`'s tokens to folder/vocab.txt; returns {"vocab_sha256": ...}.

    What the folder's config records, so that the folder is self-contained:
    later commands read folder/vocab.txt wherever they run, and check it by
    this fingerprint. No `vocab_file`: {} (a folder without a vocabulary).

    Raises:
      VocabError: `vocab_file` is missing or not a vocabulary.
      ConfigError: folder/vocab.txt holds other tokens the folder does not record.
    """
    if not vocab_file:
        return {}
    tokens = load_vocab(vocab_file)
    target, fingerprint = os.path.join(folder, VOCAB), tokens_sha256(tokens)
    if os.path.abspath(vocab_file) != os.path.abspath(target):
        if os.path.isfile(target):  # never overwrite a file electra_tf did not write there
            try:
                there = tokens_sha256(load_vocab(target))
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


@dataclasses.dataclass(frozen=True)
class FolderVocab:
    """What one folder records about its vocabulary, read once.

    Read from the config that records it (fine-tuning's, else pre-training's;
    neither: a folder that records none).
    """

    folder: str
    sha256: str  # the recorded fingerprint ("" where none is recorded)
    own: str  # folder/vocab.txt where it exists, else ""
    config: str  # the config file that records them (it may not exist)

    @classmethod
    def read(cls, folder: str, value: dict | None = None) -> FolderVocab:
        """Reads it from the folder's config (`value`: that very config, already read).

        Raises:
          InputError: a config without a field it must have (`_check_vocab_record`).
        """
        config = _config_path(folder)
        if value is None:
            value = read_json(config) if os.path.exists(config) else {}
        _check_vocab_record(config, value)
        own = os.path.join(folder, VOCAB)
        return cls(folder, value.get("vocab_sha256", ""), own if os.path.isfile(own) else "",
                   config)

    def file(self, flag: str = "--vocab_file") -> str:
        """The folder's own vocab.txt, checked by the fingerprint it records ("" when it
        holds and records none). `flag`: the caller's flag that can give another copy
        ("": none, as convert --to=hf, which had been told to give --vocab_file).

        Raises:
          ConfigError: the file holds other tokens than recorded (swapped, appended:
            ids would reach the wrong embeddings, or none).
          InputError: the recorded vocab.txt is gone.
          VocabError: the file is not a vocabulary.
        """
        want, vocab, config = self.sha256, self.own, self.config
        if want and not vocab:
            raise InputError(f"{os.path.join(self.folder, VOCAB)} not found: {config} records "
                             f"it as the vocabulary the model was trained with (sha256 "
                             f"{want[:12]}); restore it"
                             + (f", or give {flag} (that vocabulary)" if flag else ""))
        if vocab and want:
            tokens = load_vocab(vocab)
            got = tokens_sha256(tokens)
            if got != want:
                raise ConfigError(
                    f"{vocab} holds other tokens than the vocabulary {config} records "
                    f"({len(tokens)} tokens, sha256 {got[:12]}, recorded {want[:12]}): it "
                    "changed after the model was trained, and ids would reach other "
                    "embeddings; restore that vocabulary")
        return vocab

    def checked(self, vocab_file: str = "", flag: str = "--vocab_file") -> str:
        """The vocabulary to feed the folder's model: `vocab_file` if given, else `file()`.

        A given one must hold the tokens the folder records (by fingerprint, or,
        where the folder holds a vocab.txt it records no fingerprint of, that file's).

        Raises:
          ConfigError: `vocab_file` holds other tokens (naming both files); and
            what `file` raises.
        """
        if not vocab_file:
            return self.file(flag)
        want, own = self.sha256, self.own
        if not want and own:
            try:
                want = vocab_fingerprint(own)
            except VocabError:
                want = ""
        got = vocab_fingerprint(vocab_file)
        if want and got != want:
            raise ConfigError(
                f"{flag}={vocab_file} holds other tokens than the vocabulary {self.folder} was "
                f"trained with ({own or os.path.join(self.folder, VOCAB)}, sha256 {want[:12]}; "
                f"given: sha256 {got[:12]}); use that vocabulary (or leave {flag} unset to use "
                "it)")
        return vocab_file


def folder_vocab(folder: str) -> str:
    """The vocabulary of a folder electra_tf wrote (`FolderVocab.file`); "" for no folder."""
    return FolderVocab.read(folder).file() if folder else ""


def checked_vocab(folder: str, vocab_file: str = "", flag: str = "--vocab_file") -> str:
    """`FolderVocab.checked` of `folder`."""
    if not vocab_file:
        return folder_vocab(folder)
    return FolderVocab.read(folder).checked(vocab_file, flag)


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
    want = FolderVocab.read(model_dir).sha256
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
    size = len(load_vocab(vocab_file))
    if size > rows:
        raise ConfigError(f"{vocab_file} holds {size} tokens but {table} embedding table has "
                          f"{rows} rows: it is not this model's vocabulary")


def copy_vocab_file(vocab: str, output: str) -> str:
    """Copies the vocab file `vocab` to output/vocab.txt; returns the copy's path."""
    target = os.path.join(output, VOCAB)
    if os.path.abspath(vocab) != os.path.abspath(target):
        atomic_write(target, lambda tmp: shutil.copyfile(vocab, tmp))
    return os.path.abspath(target)


def vocab_in(folder: str) -> str:
    """folder/vocab.txt where it is a file, else "" (a folder without one)."""
    path = os.path.join(folder, VOCAB)
    return path if os.path.isfile(path) else ""


def copy_vocab(source_dir: str, output: str) -> str:
    """Copies source_dir/vocab.txt (if any) into output; returns the copy's path or ""."""
    vocab = os.path.join(source_dir, VOCAB)
    if not os.path.isfile(vocab):
        return ""
    target = os.path.join(output, VOCAB)
    if os.path.abspath(vocab) != os.path.abspath(target):
        atomic_write(target, lambda tmp: shutil.copyfile(vocab, tmp))
    return os.path.abspath(target)


def write_vocab_tokens(folder: str, tokens: list[str]) -> str:
    """Writes `tokens` as folder/vocab.txt, one a line; returns its path."""
    path = os.path.abspath(os.path.join(folder, VOCAB))
    atomic_write_text(path, "\n".join(tokens) + "\n")
    return path
