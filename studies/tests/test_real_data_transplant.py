"""studies/real_data/transplant.py: the transplanted parts, and nothing else, come from the donor."""

import keras
import numpy as np
import pytest

from electra_tf import folders
from electra_tf.core.config import EncoderConfig
from electra_tf.modeling import build_discriminator
from studies.real_data import transplant as tp

_SMALL = dict(vocab_size=30, embedding_size=8, hidden_size=16, num_hidden_layers=2,
              num_attention_heads=2, intermediate_size=32)


def _saved(folder, seed, **overrides):
    keras.utils.set_random_seed(seed)
    disc = build_discriminator(EncoderConfig(**{**_SMALL, **overrides}))
    folders.pretraining.save_discriminator(str(folder), disc)
    return {v.path: np.array(v) for v in disc.weights}


def _weights(folder):
    disc, _ = folders.pretraining.load_discriminator(str(folder))
    return {v.path: np.array(v) for v in disc.weights}


@pytest.mark.parametrize("part", sorted(tp.PARTS))
def test_each_part_takes_exactly_its_weights(tmp_path, part):
    base = _saved(tmp_path / "base", 0)
    donor = _saved(tmp_path / "donor", 1)
    taken = tp.transplant(str(tmp_path / "base"), str(tmp_path / "donor"),
                          str(tmp_path / "out"), part)
    out = _weights(tmp_path / "out")
    expected = {
        "word_embeddings": lambda p: "word_embeddings" in p,
        "embeddings": lambda p: "/embeddings" in p,  # the tables, LayerNorm, projection
        "layers": lambda p: "/layer_" in p,
        "encoder": lambda p: "word_embeddings" not in p,
        "whole": lambda p: True,
    }[part]
    assert sorted(taken) == sorted(p for p in base if expected(p))
    assert taken, part
    for path, value in out.items():
        source = donor if expected(path) else base
        np.testing.assert_array_equal(value, source[path], err_msg=f"{part}: {path}")
    if part == "embeddings":  # position/segment tables and the projection are embeddings
        assert any("position_embeddings" in p for p in taken)
        assert any("embeddings_project" in p for p in taken)
        assert not any("/layer_" in p for p in taken)


def test_unknown_part_and_other_sizes_are_refused(tmp_path):
    _saved(tmp_path / "base", 0)
    _saved(tmp_path / "wide", 1, hidden_size=24, intermediate_size=48)
    with pytest.raises(ValueError, match="unknown part"):
        tp.transplant(str(tmp_path / "base"), str(tmp_path / "base"), str(tmp_path / "o"), "head")
    with pytest.raises(ValueError, match="different sizes"):
        tp.transplant(str(tmp_path / "base"), str(tmp_path / "wide"), str(tmp_path / "o"),
                      "layers")
    assert not (tmp_path / "o").exists()


def test_layer_cosines_one_per_layer_and_random_pieces_not_collinear(tmp_path):
    _saved(tmp_path / "m", 0)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"])
                     + "\n")
    cos = tp.layer_cosines(str(tmp_path / "m"), ["a b c", "c b a a"], str(vocab), length=8)
    assert len(cos) == _SMALL["num_hidden_layers"] + 1
    assert all(-1.0 <= c <= 1.0 for c in cos)
    # random embeddings of distinct pieces are far from collinear
    assert cos[0] < 0.9
