"""ELECTRA models in Keras 3 (no TensorFlow imports): layers, encoder, heads.

Models return dicts of tensors and compute no loss. See `encoder.py` for the
variable-path layout and `random.py` for explicit per-call seeds. The models and
layers are registered with Keras (package "electra_tf"): a `.keras` file of a
model holding them loads with `keras.saving.load_model` once electra_tf.modeling
is imported.
"""

from electra_tf.modeling.encoder import ElectraEncoder, dummy_inputs, encoder_variable_depth
from electra_tf.modeling.heads import DiscriminatorHead, MaskedLMHead, gather_positions
from electra_tf.modeling.layers import Dropout, ElectraEmbeddings, get_activation
from electra_tf.modeling.models import (
    ElectraDiscriminator,
    ElectraGenerator,
    build_discriminator,
    build_pretraining_models,
)
from electra_tf.modeling.random import TensorSeed, fold_seed, offset_seed, tensor_seed
from electra_tf.modeling.transformer import SelfAttention, TransformerLayer

__all__ = [
    "DiscriminatorHead", "Dropout", "ElectraDiscriminator", "ElectraEmbeddings",
    "ElectraEncoder", "ElectraGenerator", "MaskedLMHead", "SelfAttention", "TensorSeed",
    "TransformerLayer", "build_discriminator", "build_pretraining_models", "dummy_inputs",
    "encoder_variable_depth", "fold_seed", "gather_positions", "get_activation",
    "offset_seed", "tensor_seed",
]
