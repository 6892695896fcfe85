"""Tiny fixtures for the modeling tests (vocab 32, hidden 16, 2 layers, seq 16)."""

import keras
import numpy as np
import pytest
from helpers import TINY_MODEL as ONE_LAYER

from electra_tf.core.config import EncoderConfig, PretrainingConfig

TINY_MODEL = {**ONE_LAYER, "num_hidden_layers": 2}  # the layers' stacking is tested here
VOCAB, SEQ, BATCH = 32, 16, 2
HIDDEN, EMBED, LAYERS = (TINY_MODEL[k] for k in ("hidden_size", "embedding_size",
                                                  "num_hidden_layers"))


def tiny_encoder_config(**overrides) -> EncoderConfig:
    values = {"vocab_size": VOCAB, **TINY_MODEL, "max_position_embeddings": SEQ}
    values.update(overrides)
    return EncoderConfig(**values)


def tiny_pretraining_config(**overrides) -> PretrainingConfig:
    hparams = {**TINY_MODEL, "max_position_embeddings": SEQ}
    values = {"model_size": "tiny", "vocab_size": VOCAB, "max_seq_length": SEQ,
              "model_hparam_overrides": hparams, "generator_hidden_size": 0.5}
    values.update(overrides)
    return PretrainingConfig(**values)


def make_inputs(batch=BATCH, seq=SEQ, num_real=(16, 10), seed=0, num_predictions=3):
    """Random ids with padding after `num_real[b]` tokens, plus MLM positions."""
    rng = np.random.default_rng(seed)
    input_ids = rng.integers(1, VOCAB, size=(batch, seq)).astype("int32")
    input_mask = (np.arange(seq)[None, :] < np.array(num_real)[:, None]).astype("int32")
    segment_ids = (np.arange(seq)[None, :] >= seq // 2).astype("int32") * input_mask
    input_ids = input_ids * input_mask
    positions = np.stack([rng.choice(n, num_predictions, replace=False) for n in num_real])
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
            "masked_lm_positions": positions.astype("int32")}


@pytest.fixture(autouse=True)
def _seeded():
    keras.utils.set_random_seed(1234)
    yield


@pytest.fixture
def mixed_bfloat16():
    from electra_tf.modeling.models import dtype_policy_scope

    with dtype_policy_scope("mixed_bfloat16"):
        yield


# Helpers as fixtures: with --import-mode=importlib tests cannot import conftest.
@pytest.fixture
def encoder_config():
    return tiny_encoder_config


@pytest.fixture
def pretraining_config():
    return tiny_pretraining_config


@pytest.fixture
def inputs():
    return make_inputs
