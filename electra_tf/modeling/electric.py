"""Electric's generator: the original's two-tower cloze model (`TwoTowerClozeTransformer`).

Clark et al., "Pre-Training Transformers as Energy-Based Cloze Models" (EMNLP
2020); google-research/electra run_pretraining.py with
`electric_objective=True`, which forces `two_tower_generator=True`.

Two encoders of the generator's size read the *unmasked* input: `generator_ltr`
(position i attends j <= i) and `generator_rtl` (j >= i). Their outputs are
shifted by one position each way and concatenated, [B, L, 2 * H_G]:

    h_t = concat(ltr[t - 1], rtl[t + 1])   (the original's roll(ltr, -1), roll(rtl, 1))

so the cloze prediction at t sees every token but x_t. The shifts wrap around,
as the original's: h_0 takes ltr[L - 1] and h_{L-1} takes rtl[0]; both sit on
[CLS] / [SEP] / padding, which the cloze loss does not count. `cloze_predictions`
(dense(E, hidden_act) -> LayerNorm -> logits against the word-embedding table
+ output_bias, the original's get_token_logits) gives the cloze logits at
every position.

Weights: with tied embeddings (the default) both towers read the
discriminator's `embeddings` layer (the original's shared `electra/embeddings`
scope) and each projects to its width with its own `embeddings_project`;
`untied_generator_embeddings`: each tower owns its tables at its own width, and
the cloze head's output table is the left-to-right tower's (the original's
`ltr.embedding_table`).
"""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.core.config import EncoderConfig
from electra_tf.modeling.encoder import ElectraEncoder, EncoderConfigSerializable
from electra_tf.modeling.heads import MaskedLMHead, gather_positions
from electra_tf.modeling.layers import ElectraEmbeddings
from electra_tf.modeling.random import (
    GENERATOR_DROPOUT_SALT,
    LTR_TOWER_SALT,
    RTL_TOWER_SALT,
    fold_seed,
)


def roll(sequence, direction: int):
    """The original's roll: concat(x[:, d:], x[:, :d]) along the sequence axis.

    direction -1: out[t] = x[t - 1] (out[0] = x[L - 1]); +1: out[t] = x[t + 1].
    """
    return ops.concatenate([sequence[:, direction:], sequence[:, :direction]], axis=1)


@keras.saving.register_keras_serializable(package="electra_tf")
class TwoTowerClozeGenerator(EncoderConfigSerializable, keras.Model):
    """Electric's generator: two causal towers and the cloze head.

    Args:
        config: G's `EncoderConfig` (each tower's).
        embeddings: optional `ElectraEmbeddings` both towers share (tied with
            D, the default); None: each tower owns its tables.

    Call args:
        inputs: dict with the *unmasked* "input_ids", "input_mask",
            "segment_ids" [B, L] and "masked_lm_positions" [B, N].
        training: bool; enables dropout.
        seed: optional int tensor [2] for stateless dropout.

    Returns (call):
        dict with "cloze_logits" float32 [B, L, V] (at t: x_t's distribution
        given every other token) and "mlm_logits" float32 [B, N, V] (the cloze
        logits at masked_lm_positions: what the fakes are sampled from).
    """

    def __init__(self, config: EncoderConfig | dict, embeddings: ElectraEmbeddings | None = None,
                 **kwargs):
        kwargs.setdefault("name", "generator")
        super().__init__(**kwargs)
        self.config = EncoderConfig.from_dict(config) if isinstance(config, dict) else config

        # === Layers ===
        self.ltr = ElectraEncoder(self.config, embeddings=embeddings, attention_direction="ltr",
                                  dtype=self.dtype_policy, name="generator_ltr")
        self.rtl = ElectraEncoder(self.config, embeddings=embeddings, attention_direction="rtl",
                                  dtype=self.dtype_policy, name="generator_rtl")
        self.cloze_head = MaskedLMHead(
            self.ltr.embeddings.word_embeddings, self.config.hidden_act,
            self.config.initializer_range, self.config.layer_norm_eps,
            dtype=self.dtype_policy, name="cloze_predictions")

    @property
    def encoder(self):
        """The left-to-right tower (whose word table the cloze head reads)."""
        return self.ltr

    def build(self, input_shape=None):
        for tower in (self.ltr, self.rtl):
            if not tower.built:
                tower.build(None)
        self.cloze_head.build((None, None, 2 * self.config.hidden_size), None)
        self.built = True

    def call(self, inputs, training=False, seed=None):
        if seed is not None:
            seed = fold_seed(seed, GENERATOR_DROPOUT_SALT)
        towers = {k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids")}
        ltr = self.ltr(towers, training=training,
                       seed=None if seed is None else fold_seed(seed, LTR_TOWER_SALT))
        rtl = self.rtl(towers, training=training,
                       seed=None if seed is None else fold_seed(seed, RTL_TOWER_SALT))
        hidden = ops.concatenate([roll(ltr["sequence_output"], -1),
                                  roll(rtl["sequence_output"], 1)], axis=-1)
        cloze_logits = self.cloze_head(hidden, None)
        return {"cloze_logits": cloze_logits,
                "mlm_logits": gather_positions(cloze_logits, inputs["masked_lm_positions"])}
