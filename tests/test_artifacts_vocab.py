"""Every folder carries its own vocab.txt, checked by fingerprint wherever it is read.

A folder records the fingerprint of the vocabulary its model was trained with
(folders.vocabulary.vocab_fingerprint); the tokens it is later fed must be those, in that
order, and no more than the embedding table has rows.
"""

import os
import shutil

import pytest
from helpers import tiny_encoder_config, tiny_vocab_tokens, write_pretrained_dir, write_vocab

from electra_tf import folders
from electra_tf.core.errors import ConfigError, InputError, VocabError

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def swap_two_words(path) -> None:
    """Two word pieces swapped in place: the same size, other ids."""
    tokens = open(path, encoding="utf-8").read().splitlines()
    i, j = [k for k, t in enumerate(tokens) if t.isalpha() and len(t) > 3][:2]
    tokens[i], tokens[j] = tokens[j], tokens[i]
    write_vocab(path, tokens)


def append_two_words(path) -> None:
    tokens = open(path, encoding="utf-8").read().splitlines()
    write_vocab(path, tokens + ["zzfirst", "zzsecond"])


def test_a_pretraining_folder_carries_its_vocab_and_can_move(tiny_vocab, tmp_path):
    vocab = str(shutil.copy(tiny_vocab, tmp_path / "vocab_elsewhere.txt"))
    folder = write_pretrained_dir(tmp_path / "pre", vocab)
    own = os.path.join(folder, folders.files.VOCAB)
    assert folders.vocabulary.vocab_fingerprint(own) == folders.vocabulary.vocab_fingerprint(tiny_vocab) \
        == folders.PretrainingFolder.open(folder, discriminator=False).vocab_sha256
    os.remove(vocab)
    moved = shutil.move(folder, tmp_path / "moved")
    _, found = folders.pretraining.load_discriminator(str(moved))
    assert found == os.path.join(moved, folders.files.VOCAB)


@pytest.mark.parametrize("config", [folders.files.PRETRAINING_CONFIG, folders.files.FINETUNING_CONFIG])
def test_a_config_recording_a_vocab_path_without_its_fingerprint_is_one_line(
        tiny_vocab, tmp_path, config):
    """One format: a folder carries its vocab.txt and records its fingerprint; a config
    that records a vocab_file without vocab_sha256 is refused, not read through that path."""
    folder = write_pretrained_dir(tmp_path / "pre", tiny_vocab)
    path = os.path.join(folder, config)
    folders.files.write_json(path, {"run": {"vocab_file": tiny_vocab}})
    os.remove(os.path.join(folder, folders.files.VOCAB))
    with pytest.raises(InputError) as raised:
        folders.pretraining.load_discriminator(folder)
    assert str(raised.value) == (f"{path}: lacks vocab_sha256 (it records vocab_file "
                                 f"{tiny_vocab}); not a file electra_tf wrote")
    with pytest.raises(InputError, match="lacks vocab_sha256"):
        folders.vocabulary.checked_vocab(folder, tiny_vocab)


def test_a_recorded_vocab_that_is_gone_is_one_line(tiny_vocab, tmp_path):
    folder = write_pretrained_dir(tmp_path / "pre", tiny_vocab)
    own = os.path.join(folder, folders.files.VOCAB)
    os.remove(own)
    with pytest.raises(InputError) as raised:
        folders.vocabulary.folder_vocab(folder)
    message = str(raised.value)
    assert message.startswith(f"{own} not found: {folder}/pretraining_config.json records it "
                              "as the vocabulary the model was trained with (sha256 "), message
    assert message.endswith("; restore it, or give --vocab_file (that vocabulary)")
    assert folders.vocabulary.checked_vocab(folder, tiny_vocab) == tiny_vocab  # checked by fingerprint
    other = str(shutil.copy(tiny_vocab, tmp_path / "other.txt"))
    swap_two_words(other)
    with pytest.raises(ConfigError, match="holds other tokens than the vocabulary"):
        folders.vocabulary.checked_vocab(folder, other)


@pytest.mark.parametrize("damage", [swap_two_words, append_two_words])
def test_a_vocab_changed_after_training_is_refused(tiny_vocab, tmp_path, damage):
    folder = write_pretrained_dir(tmp_path / "pre", tiny_vocab)
    vocab = os.path.join(folder, folders.files.VOCAB)
    damage(vocab)
    with pytest.raises(ConfigError) as raised:
        folders.pretraining.load_discriminator(folder)
    message = str(raised.value)
    assert message.startswith(f"{vocab} holds other tokens than the vocabulary "), message
    assert "sha256" in message and "\n" not in message


def test_an_explicit_vocab_of_other_tokens_is_refused_naming_both(tiny_vocab, tmp_path):
    folder = write_pretrained_dir(tmp_path / "pre", tiny_vocab)
    other = str(shutil.copy(tiny_vocab, tmp_path / "other.txt"))
    swap_two_words(other)
    with pytest.raises(ConfigError) as raised:
        folders.vocabulary.checked_vocab(folder, str(other))
    message = str(raised.value)
    assert message.startswith(f"--vocab_file={other} holds other tokens than"), message
    assert os.path.join(folder, folders.files.VOCAB) in message
    same = str(shutil.copy(tiny_vocab, tmp_path / "same.txt"))  # the same tokens: accepted
    assert folders.vocabulary.checked_vocab(folder, str(same)) == str(same)
    assert folders.vocabulary.checked_vocab(folder) == os.path.join(folder, folders.files.VOCAB)


def test_a_vocab_of_special_tokens_only_is_one_error(tmp_path):
    from electra_tf.text.tokenizer import Tokenizer

    vocab = write_vocab(tmp_path / "vocab.txt", SPECIALS + ["[unused0]"])
    with pytest.raises(VocabError, match=r"holds no word piece, only special tokens"):
        Tokenizer(vocab)


def test_a_utf16_vocab_is_named_so(tmp_path):
    """A vocab.txt saved as UTF-16 had been told `not UTF-8 (byte 0xff)` alone."""
    from electra_tf.text.vocab import load_vocab

    path = tmp_path / "vocab.txt"
    path.write_bytes("\n".join(SPECIALS + ["fine"]).encode("utf-16"))
    with pytest.raises(VocabError, match=r"vocab.txt:1: not UTF-8 \(byte 0xff\): it looks like "
                                         r"UTF-16 or UTF-32 text \(iconv -f UTF-16 -t UTF-8 "
                                         r"converts it\); save the vocabulary as UTF-8"):
        load_vocab(str(path))


# === The export of a folder made by hand (rtd) ===
def test_export_refuses_a_vocab_larger_than_the_table(tiny_vocab, tmp_path):
    from electra_tf.serving.export import load_spec
    from electra_tf.text.vocab import load_vocab

    size = len(load_vocab(tiny_vocab))
    small = write_pretrained_dir(tmp_path / "small", tiny_vocab, tiny_encoder_config(size - 2))
    with pytest.raises(ConfigError, match=rf"holds {size} tokens but the model's embedding "
                                          rf"table has {size - 2} rows"):
        load_spec("rtd", small)
    padded = write_pretrained_dir(tmp_path / "padded", tiny_vocab, tiny_encoder_config(size + 3))
    assert load_spec("rtd", padded).tokenizer.vocab_size == size  # a padded table is legal


def test_export_refuses_a_vocab_of_special_tokens_only(tmp_path):
    from electra_tf.serving.export import load_spec

    vocab = write_vocab(tmp_path / "vocab.txt", SPECIALS)
    folder = write_pretrained_dir(tmp_path / "pre", vocab, tiny_encoder_config(16))
    with pytest.raises(VocabError, match=r"holds no word piece"):
        load_spec("rtd", folder)


def test_resuming_pretraining_reads_the_folders_vocab(tiny_vocab, tmp_path):
    from helpers import pretraining_from_flags

    vocab = str(shutil.copy(tiny_vocab, tmp_path / "vocab_elsewhere.txt"))
    folder = write_pretrained_dir(tmp_path / "pre", vocab)
    os.makedirs(os.path.join(folder, folders.files.CHECKPOINTS))
    open(os.path.join(folder, folders.files.CHECKPOINTS, "ckpt-1.index"), "w").close()
    os.remove(vocab)
    config, run = pretraining_from_flags(f"--model_dir={folder}", "--train_data=x.tfrecord",
                                         "--model_size=tiny")
    assert run.vocab_file == os.path.join(folder, folders.files.VOCAB)
    assert config.vocab_size == len(tiny_vocab_tokens())


def test_a_vocab_txt_the_folder_does_not_record_is_never_overwritten(tiny_vocab, tmp_path):
    """A model_dir that already holds someone's vocab.txt of other tokens (a data folder)."""
    folder = tmp_path / "data_and_model"
    folder.mkdir()
    theirs = write_vocab(folder / folders.files.VOCAB, SPECIALS + ["mine", "only"])
    before = open(theirs, encoding="utf-8").read()
    with pytest.raises(ConfigError, match=r"exists and holds other tokens than .* does not "
                                          r"record it as its vocabulary"):
        write_pretrained_dir(folder, tiny_vocab)
    assert open(theirs, encoding="utf-8").read() == before
    # One the folder records (a fresh run over an earlier run of another vocabulary) is replaced.
    other = write_vocab(tmp_path / "other.txt", SPECIALS + ["other", "words"])
    fresh = write_pretrained_dir(tmp_path / "fresh", other, tiny_encoder_config(16))
    write_pretrained_dir(fresh, tiny_vocab)
    assert folders.vocabulary.folder_vocab(fresh) == os.path.join(fresh, folders.files.VOCAB)
    assert folders.vocabulary.vocab_fingerprint(folders.vocabulary.folder_vocab(fresh)) == \
        folders.vocabulary.vocab_fingerprint(tiny_vocab)
