"""The generator and discriminator models and the weight-sharing factory.

Both models take the data pipeline's dict of int tensors [batch_size,
seq_length] ("input_ids", "input_mask", "segment_ids"; the generator also
"masked_lm_positions" [batch_size, num_predictions]) and return dicts of
tensors. They compute no loss: losses live in `electra_tf.objectives`.

Weight sharing (paper section 3.2; `PretrainingConfig` flags):
- default: G's encoder reuses D's `embeddings` layer (token, position and type
  tables and the embedding LayerNorm). G embeds at D's embedding size and
  projects to its own width with its own `embeddings_project`.
- `untied_generator_embeddings=True`: nothing is shared; G embeds at its own
  width.
- `untied_generator=False`: G runs D's whole encoder object (equal sizes) and
  adds only its MLM head.
In every mode the MLM head's output weights are G's input word embeddings.
"""

from __future__ import annotations

import keras

from electra_tf.config import EncoderConfig, PretrainingConfig
from electra_tf.modeling.encoder import ElectraEncoder, EncoderConfigSerializable
from electra_tf.modeling.heads import DiscriminatorHead, MaskedLMHead
from electra_tf.modeling.layers import ElectraEmbeddings
from electra_tf.modeling.random import fold_seed

# Salts that keep G's and D's dropout masks independent when the caller gives
# both the same step seed (they can even share one encoder).
GENERATOR_SEED_SALT = 1
DISCRIMINATOR_SEED_SALT = 2


def _config_from(config) -> EncoderConfig:
    return EncoderConfig.from_dict(config) if isinstance(config, dict) else config.validate()


class ElectraGenerator(EncoderConfigSerializable, keras.Model):
    """The generator: an encoder and a masked-LM head (original `generator`).

    Args:
        config: G's `EncoderConfig` (ignored in favour of `encoder.config`
            when `encoder` is given).
        encoder: optional encoder to run instead of a new one (all weights
            tied with D, `untied_generator=False`).
        embeddings: optional `ElectraEmbeddings` for a new encoder to share
            (tied embeddings, the default).

    Call args:
        inputs: dict with "input_ids", "input_mask", "segment_ids" [B, L] and
            "masked_lm_positions" [B, N] int tensors.
        training: bool; enables dropout.
        seed: optional int tensor [2] for stateless dropout (see `ElectraEncoder`).

    Returns (call):
        dict with "mlm_logits" float32 [B, N, vocab_size] and
        "sequence_output" [B, L, hidden_size].
    """

    def __init__(self, config: EncoderConfig | dict, encoder: ElectraEncoder | None = None,
                 embeddings: ElectraEmbeddings | None = None, **kwargs):
        kwargs.setdefault("name", "generator")
        super().__init__(**kwargs)
        if encoder is not None and embeddings is not None:
            raise ValueError("pass either a whole encoder or embeddings to share, not both")
        self.config = encoder.config if encoder is not None else _config_from(config)

        # === Layers ===
        self.encoder = encoder or ElectraEncoder(self.config, embeddings=embeddings,
                                                 dtype=self.dtype_policy, name="encoder")
        self.mlm_head = MaskedLMHead(
            self.encoder.embeddings.word_embeddings, self.config.hidden_act,
            self.config.initializer_range, self.config.layer_norm_eps,
            dtype=self.dtype_policy, name="generator_predictions")

    def build(self, input_shape=None):
        if not self.encoder.built:
            self.encoder.build(None)
        self.mlm_head.build((None, None, self.config.hidden_size), (None, None))
        self.built = True

    def call(self, inputs, training=False, seed=None):
        if seed is not None:
            seed = fold_seed(seed, GENERATOR_SEED_SALT)
        outputs = self.encoder(inputs, training=training, seed=seed)
        sequence_output = outputs["sequence_output"]
        return {
            "mlm_logits": self.mlm_head(sequence_output, inputs["masked_lm_positions"]),
            "sequence_output": sequence_output,
        }



class ElectraDiscriminator(EncoderConfigSerializable, keras.Model):
    """The discriminator: an encoder and the RTD head (original `electra`).

    Args:
        config: D's `EncoderConfig`.

    Call args:
        inputs: dict with "input_ids", "input_mask", "segment_ids" [B, L].
        training: bool; enables dropout.
        seed: optional int tensor [2] for stateless dropout.

    Returns (call):
        dict with "rtd_logits" float32 [B, L] (> 0: replaced),
        "sequence_output" [B, L, hidden_size] and "pooled_output" [B, hidden_size].
    """

    def __init__(self, config: EncoderConfig | dict, **kwargs):
        kwargs.setdefault("name", "discriminator")
        super().__init__(**kwargs)
        self.config = _config_from(config)

        # === Layers ===
        self.encoder = ElectraEncoder(self.config, dtype=self.dtype_policy, name="encoder")
        self.rtd_head = DiscriminatorHead(
            self.config.hidden_size, self.config.hidden_act, self.config.initializer_range,
            dtype=self.dtype_policy, name="discriminator_predictions")

    def build(self, input_shape=None):
        self.encoder.build(None)
        self.rtd_head.build((None, None, self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=False, seed=None):
        if seed is not None:
            seed = fold_seed(seed, DISCRIMINATOR_SEED_SALT)
        outputs = self.encoder(inputs, training=training, seed=seed)
        return {
            "rtd_logits": self.rtd_head(outputs["sequence_output"]),
            "sequence_output": outputs["sequence_output"],
            "pooled_output": outputs["pooled_output"],
        }



# === Factories ===
def build_discriminator(encoder_config: EncoderConfig) -> ElectraDiscriminator:
    """A built discriminator (variables exist on return), e.g. for fine-tuning."""
    discriminator = ElectraDiscriminator(encoder_config)
    discriminator.build()
    return discriminator


def build_pretraining_models(
        config: PretrainingConfig) -> tuple[ElectraGenerator, ElectraDiscriminator]:
    """Builds G and D with the sharing that `config` asks for.

    D is built first, so that shared variables carry D's paths
    (`discriminator/encoder/embeddings/...`). Both models are built on return.

    Args:
        config: the pre-training hyperparameters (validated here).

    Returns:
        (generator, discriminator).
    """
    config.validate()
    discriminator = build_discriminator(config.discriminator_config())
    if not config.untied_generator:
        generator = ElectraGenerator(None, encoder=discriminator.encoder)
    elif config.untied_generator_embeddings:
        generator = ElectraGenerator(config.generator_config())
    else:
        generator = ElectraGenerator(config.generator_config(),
                                     embeddings=discriminator.encoder.embeddings)
    generator.build()
    return generator, discriminator
