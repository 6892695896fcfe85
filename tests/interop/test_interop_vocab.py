"""Conversion refuses a vocabulary the embedding table cannot take: more tokens than
rows (naming both sizes), or special tokens only. A smaller one is legal: transformers
models often pad the table. Checked before any weight is read or written."""

import json
import os

import pytest
from helpers import error_line, run_module

from electra_tf.interop import core, hf, tf1

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _hf_folder(h, path, tokens=None, tokenizer_json=None):
    s = h.sizes
    os.makedirs(path)
    config = {"model_type": "electra", "vocab_size": s["VOCAB"], "embedding_size": s["EMBED"],
              "hidden_size": s["HIDDEN"], "num_hidden_layers": s["LAYERS"],
              "num_attention_heads": s["HEADS"], "intermediate_size": s["FFN"],
              "max_position_embeddings": s["POS"], "architectures": ["ElectraForPreTraining"]}
    (path / "config.json").write_text(json.dumps(config))
    if tokens is not None:
        (path / "vocab.txt").write_text("\n".join(tokens) + "\n")
    if tokenizer_json is not None:
        (path / "tokenizer.json").write_text(json.dumps(tokenizer_json))
    return str(path)


def test_hf_refuses_a_vocab_longer_than_the_table(h, tmp_path):
    rows = h.sizes["VOCAB"]
    tokens = SPECIALS + [f"w{i}" for i in range(rows - len(SPECIALS) + 2)]
    folder = _hf_folder(h, tmp_path / "hf", tokens)
    with pytest.raises(core.ConversionError, match=rf"holds {rows + 2} tokens but the model's "
                                                   rf"embedding table has {rows} rows"):
        hf.import_model(folder, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_hf_refuses_a_tokenizer_of_special_tokens_only_in_one_line(h, tmp_path):
    tokenizer = {"model": {"type": "WordPiece", "vocab": {t: i for i, t in enumerate(SPECIALS)}}}
    folder = _hf_folder(h, tmp_path / "hf", tokenizer_json=tokenizer)
    proc = run_module("electra_tf.convert", "--from=hf", f"--model_dir={folder}",
                      f"--output={tmp_path}/out")
    error_line(proc, "holds no word piece, only special tokens")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("token, what", [("", "empty"),
                                          (" x", "a word piece with whitespace at its ends")])
def test_hf_refuses_a_tokenizer_json_token_no_vocab_txt_line_holds(h, tmp_path, token, what):
    """Written to vocab.txt, such a token was refused by the vocab loader, naming the
    file the failed conversion had just removed."""
    tokens = SPECIALS + ["a", token, "b"]
    tokenizer = {"model": {"type": "WordPiece", "vocab": {t: i for i, t in enumerate(tokens)}}}
    folder = _hf_folder(h, tmp_path / "hf", tokenizer_json=tokenizer)
    with pytest.raises(core.ConversionError) as raised:
        hf.import_model(folder, str(tmp_path / "out"))
    assert str(raised.value) == (
        f"{folder}/tokenizer.json: token {token!r} (id 6) is {what}, which no vocab.txt line "
        "holds (electra_tf refuses an empty line and whitespace at a token's ends); pass "
        "--vocab_file, a vocab.txt with a placeholder such as [unused_id6] on line 7")
    assert not (tmp_path / "out").exists()


def test_tf1_takes_a_smaller_vocab_and_refuses_a_special_only_one(h, tmp_path):
    weights = h.original_weights(seed=6, generator=False)
    prefix = h.write_tf1_checkpoint(tmp_path / "ckpt" / "model.ckpt", weights)
    vocab = tmp_path / "ckpt" / "vocab.txt"
    vocab.write_text("\n".join(SPECIALS) + "\n")
    with pytest.raises(core.ConversionError, match="holds no word piece"):
        tf1.import_checkpoint(prefix, "small", str(tmp_path / "special"), h.TINY_OVERRIDES)
    assert not (tmp_path / "special").exists()
    vocab.write_text("\n".join(SPECIALS + [f"w{i}" for i in range(10)]) + "\n")  # 15 < 40 rows
    tf1.import_checkpoint(prefix, "small", str(tmp_path / "out"), h.TINY_OVERRIDES)
    assert (tmp_path / "out" / "vocab.txt").read_text() == vocab.read_text()


def test_hf_a_pretraining_folder_keeps_the_vocab_of_its_tokenizer_json(tiny_vocab, tmp_path):
    """A transformers folder with tokenizer.json and no vocab.txt: the converted folder
    carries the vocabulary too (a task model's always did), with its fingerprint."""
    pytest.importorskip("safetensors")
    from helpers import write_pretrained_dir

    from electra_tf import folders
    from electra_tf.text.vocab import load_vocab

    pre = write_pretrained_dir(tmp_path / "pre", tiny_vocab)
    hf.export_model(pre, str(tmp_path / "hf"))
    os.remove(tmp_path / "hf" / "vocab.txt")
    tokens = load_vocab(tiny_vocab)
    (tmp_path / "hf" / "tokenizer.json").write_text(json.dumps(
        {"model": {"type": "WordPiece", "vocab": {t: i for i, t in enumerate(tokens)}}}))
    out = str(tmp_path / "out")
    hf.import_model(str(tmp_path / "hf"), out)
    assert os.path.isfile(os.path.join(out, folders.files.VOCAB))
    vocab = folders.vocabulary.folder_vocab(out)
    assert vocab == os.path.join(out, folders.files.VOCAB)
    assert folders.vocabulary.vocab_fingerprint(vocab) == folders.PretrainingFolder.open(out, discriminator=False).vocab_sha256 \
        == folders.vocabulary.vocab_fingerprint(tiny_vocab)


@pytest.mark.parametrize("token, named", [("the ", "U+0020 SPACE"), (" the", "U+0020 SPACE"),
                                          ("the\t", "U+0009 CONTROL")])
def test_tf1_refuses_a_token_the_original_would_have_stripped(h, tmp_path, token, named):
    """The original's load_vocab strips each line: its model read "the" at that id,
    which electra_tf (as transformers) would keep as "the " (no text matches it)."""
    weights = h.original_weights(seed=6, generator=False)
    prefix = h.write_tf1_checkpoint(tmp_path / "ckpt" / "model.ckpt", weights)
    (tmp_path / "ckpt" / "vocab.txt").write_text(
        "\n".join(SPECIALS + ["a", token, "b"]) + "\n")
    with pytest.raises(core.ConversionError) as raised:
        tf1.import_checkpoint(prefix, "small", str(tmp_path / "out"), h.TINY_OVERRIDES)
    assert str(raised.value).startswith(
        f"{tmp_path / 'ckpt' / 'vocab.txt'}:7: token {token!r} has whitespace at its ends "
        f"({named}), which no word piece holds (the original's load_vocab strips it: its model read "
        "'the' there)")
    assert not (tmp_path / "out").exists()
