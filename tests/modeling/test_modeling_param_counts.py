"""Discriminator encoder sizes against KerasHub's preset counts.

KerasHub's ELECTRA backbones add a tanh pooler dense (h * h + h) that ELECTRA
does not use (the pooled output is sequence_output[:, 0]); we subtract it.
"""

import math

import pytest

from electra_tf.core.config import MODEL_SIZES, EncoderConfig
from electra_tf.modeling import ElectraEncoder

KERAS_HUB_COUNTS = {"small": 13_548_800, "base": 109_482_240, "large": 335_141_888}


def _encoder_params(size):
    encoder = ElectraEncoder(EncoderConfig(vocab_size=30522, max_position_embeddings=512,
                                           **MODEL_SIZES[size]))
    encoder.build()
    return sum(math.prod(v.shape) for v in encoder.trainable_variables)


@pytest.mark.parametrize("size", [
    "small", "base",
    pytest.param("large", marks=pytest.mark.slow),  # ~6 s to initialise 334M weights.
])
def test_encoder_parameter_count(size):
    hidden = MODEL_SIZES[size]["hidden_size"]
    assert _encoder_params(size) == KERAS_HUB_COUNTS[size] - (hidden * hidden + hidden)
