"""The ELECTRA encoder (backbone): embeddings, optional projection, transformer.

Variable paths, with the encoder named `encoder` inside a model named
`discriminator` (the generator's are the same under `generator/`):

    discriminator/encoder/embeddings/word_embeddings/embeddings        [V, E]
    discriminator/encoder/embeddings/position_embeddings/embeddings    [P, E]
    discriminator/encoder/embeddings/token_type_embeddings/embeddings  [T, E]
    discriminator/encoder/embeddings/LayerNorm/{gamma,beta}            [E]
    discriminator/encoder/embeddings_project/{kernel,bias}    only if E != H
    discriminator/encoder/layer_<i>/attention/{query,key,value}/{kernel,bias}
    discriminator/encoder/layer_<i>/attention_output/{kernel,bias}
    discriminator/encoder/layer_<i>/attention_layer_norm/{gamma,beta}
    discriminator/encoder/layer_<i>/intermediate/{kernel,bias}         [H, I]
    discriminator/encoder/layer_<i>/output/{kernel,bias}               [I, H]
    discriminator/encoder/layer_<i>/output_layer_norm/{gamma,beta}

A variable's layer-wise learning-rate depth (docs/reference.md, "Fine-tuning") is
`encoder_variable_depth(path)`: embeddings and embeddings_project 0, layer_i
i + 1 (the optimizer's one source for it, see `optimization.layer_depth`).
Non-trainable dropout seed states live under the same prefixes.
Initializers are the original's: truncated normal (initializer_range) for the
tables and every transformer kernel, Glorot uniform for embeddings_project.
With tied embeddings the shared variables keep the path of the model that
built them first (the discriminator, in `build_pretraining_models`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import keras
import numpy as np
from keras import ops

from electra_tf.core.config import EncoderConfig
from electra_tf.modeling.layers import ElectraEmbeddings
from electra_tf.modeling.random import (
    EMBEDDINGS_STREAM,
    ENCODER_SALT,
    FIRST_LAYER_STREAM,
    fold_seed,
    offset_seed,
)
from electra_tf.modeling.transformer import TransformerLayer

_LAYER_RE = re.compile(r"(?:^|[/_])layer_(\d+)/")


def encoder_variable_depth(path: str) -> int | None:
    """Depth of an encoder variable for layer-wise learning-rate decay.

    The one definition of the depth; `optimization.layer_depth` (what the
    optimizer uses) puts the None paths (heads) at n_layers + 2.

    Args:
        path: a Keras variable `.path`.

    Returns:
        0 for a path containing "embeddings/" (all of `embeddings/`) or
        "embeddings_project/", i + 1 for `layer_<i>/`, None for anything else.
    """
    if "embeddings/" in path or "embeddings_project/" in path:
        return 0
    layer = _LAYER_RE.search(path)
    if layer:
        return int(layer.group(1)) + 1
    return None


def embeddings_for(config: EncoderConfig, **kwargs) -> ElectraEmbeddings:
    """The `embeddings` layer an encoder of `config` builds (kwargs: e.g. dtype,
    residual_of)."""
    kwargs.setdefault("name", "embeddings")
    return ElectraEmbeddings(
        config.vocab_size, config.resolved_embedding_size, config.max_position_embeddings,
        config.type_vocab_size, config.hidden_dropout_prob, config.initializer_range,
        config.layer_norm_eps, **kwargs)


ATTENTION_DIRECTIONS = (None, "ltr", "rtl")


def causal_attention_mask(input_mask, direction: str):
    """int32 [B, L, L]: 1 where query i attends key j (the original's 3-D mask).

    The padding mask of the keys times the original's causal band:
    tf.matrix_band_part(ones, -1, 0) for "ltr" (j <= i), (0, -1) for "rtl" (j >= i).
    """
    length = ops.shape(input_mask)[1]
    i = ops.arange(length, dtype="int32")[:, None]
    j = ops.arange(length, dtype="int32")[None, :]
    band = ops.less_equal(j, i) if direction == "ltr" else ops.greater_equal(j, i)
    keys = ops.cast(input_mask, "int32")[:, None, :]
    return keys * ops.cast(band, "int32")[None]


MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids")


class CheckedInputs:
    """Refuses, before Keras calls the model, inputs the encoder cannot take: not a dict
    of the three [batch, positions] arrays, or more positions than the position table.
    The layers refuse them too, but a layer's error reaches the caller inside Keras'
    "Exception encountered when calling ..." text (with the arguments and ANSI codes);
    this one is the plain line. Put it first: `class M(CheckedInputs, ..., keras.Model)`
    (a model whose encoder is `self.encoder`, or whose `config` is the encoder's)."""

    def __call__(self, inputs, *args, **kwargs):
        if not isinstance(inputs, Mapping):  # (a list had been Keras' wrapped TypeError)
            raise ValueError(f"the inputs must be a dict of {', '.join(MODEL_INPUTS)}, each "
                             f"[batch_size, positions], got a {type(inputs).__name__}")
        missing = [k for k in MODEL_INPUTS if k not in inputs]
        if missing:
            raise ValueError(f"the inputs lack {', '.join(missing)} (a dict of "
                             f"{', '.join(MODEL_INPUTS)}, each [batch_size, positions])")
        ids = inputs["input_ids"]
        shape = getattr(ids, "shape", None)
        if shape is not None and getattr(shape, "rank", 0) is None:
            return super().__call__(inputs, *args, **kwargs)  # unknown rank: Keras says
        shape = tuple(shape if shape is not None else np.shape(ids))
        if len(shape) != 2:
            raise ValueError(f"input_ids must be [batch_size, positions], got shape "
                             f"{shape}")
        config = getattr(getattr(self, "encoder", None), "config", None) or self.config
        if isinstance(shape[1], int) and shape[1] > config.max_position_embeddings:
            raise ValueError(f"input_ids of {shape[1]} positions, but the model has "
                             f"{config.max_position_embeddings} (max_position_embeddings)")
        return super().__call__(inputs, *args, **kwargs)


class EncoderConfigSerializable:
    """get_config/from_config for layers and models built from an EncoderConfig.

    Put it before the Keras base class: `class M(EncoderConfigSerializable, keras.Model)`.
    """

    def get_config(self):
        config = super().get_config()
        config.update({"config": self.config.to_dict()})
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        return cls(EncoderConfig.from_dict(config.pop("config")), **config)


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraEncoder(EncoderConfigSerializable, keras.Model):
    """BERT-style encoder: the generator's or the discriminator's body.

    Args:
        config: the `EncoderConfig` (or its dict).
        embeddings: optional `ElectraEmbeddings` of another encoder to reuse
            (tied embeddings, paper section 3.2). Its vocabulary, width and
            table sizes must match `config`. Not part of `get_config`.
        attention_direction: None (every position attends every real one),
            "ltr" (position i attends j <= i) or "rtl" (j >= i): the original
            BertModel's `ltr` / `rtl`, the towers of Electric's two-tower
            generator (modeling/electric.py).

    Call args:
        inputs: dict with "input_ids", "input_mask" (1 real, 0 padding) and
            "segment_ids", each an int tensor [batch_size, seq_length].
        training: bool; enables dropout.
        seed: optional int tensor [2]. When given, every dropout site draws a
            distinct stateless mask from it; otherwise the layers' own
            `SeedGenerator`s are used.

    Returns (call):
        dict with "sequence_output" [batch_size, seq_length, hidden_size],
        "pooled_output" [batch_size, hidden_size] (= sequence_output[:, 0]; no
        tanh pooler) and "embedding_output" [batch_size, seq_length, E], the
        embeddings after LayerNorm and dropout, before any projection.
    """

    def __init__(self, config: EncoderConfig | dict, embeddings: ElectraEmbeddings | None = None,
                 attention_direction: str | None = None, **kwargs):
        kwargs.setdefault("name", "encoder")
        super().__init__(**kwargs)
        if attention_direction not in ATTENTION_DIRECTIONS:
            raise ValueError(f"attention_direction must be one of {ATTENTION_DIRECTIONS}, "
                             f"got {attention_direction!r}")
        self.attention_direction = attention_direction
        if isinstance(config, dict):
            config = EncoderConfig.from_dict(config)
        self.config = config
        cfg = self.config
        emb_size = cfg.resolved_embedding_size

        # === Layers ===
        if embeddings is None:
            embeddings = embeddings_for(cfg, dtype=self.dtype_policy)
        else:
            want = (cfg.vocab_size, emb_size, cfg.max_position_embeddings, cfg.type_vocab_size)
            if embeddings.sizes != want:
                raise ValueError(f"shared embeddings have (vocab, width, positions, types) "
                                 f"{embeddings.sizes}, but the config wants {want}")
        self.embeddings = embeddings
        self.embeddings_project = None
        if emb_size != cfg.hidden_size:
            # The original's tf.layers.dense(..., name="embeddings_project") takes no
            # initializer: TF1's default, Glorot uniform (zero bias), not the
            # truncated normal of the other kernels.
            self.embeddings_project = keras.layers.Dense(
                cfg.hidden_size, kernel_initializer=keras.initializers.GlorotUniform(),
                dtype=self.dtype_policy, name="embeddings_project")
        self.transformer_layers = [
            TransformerLayer(cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size,
                             cfg.hidden_act, cfg.hidden_dropout_prob,
                             cfg.attention_probs_dropout_prob, cfg.initializer_range,
                             cfg.layer_norm_eps, dtype=self.dtype_policy, name=f"layer_{i}")
            for i in range(cfg.num_hidden_layers)
        ]

    def build(self, input_shape=None):
        if not self.embeddings.built:
            self.embeddings.build(None)
        if self.embeddings_project is not None:
            self.embeddings_project.build((None, None, self.config.resolved_embedding_size))
        for layer in self.transformer_layers:
            layer.build((None, None, self.config.hidden_size))
        if not self.trainable:
            # Frozen before its weights existed (from_config, a .keras load, clone_model):
            # the sublayers' setter marks their variables, which a model holding this
            # encoder would otherwise train again (`self.trainable = False` is a no-op
            # under TensorFlow's attribute tracking when the flag is already False).
            for layer in (self.embeddings, self.embeddings_project, *self.transformer_layers):
                if layer is not None:
                    layer.trainable = False
        self.built = True

    def get_config(self):
        config = super().get_config()
        config["attention_direction"] = self.attention_direction
        return config

    def call(self, inputs, training=False, seed=None):
        input_mask = inputs["input_mask"]
        if self.attention_direction is not None:
            input_mask = causal_attention_mask(input_mask, self.attention_direction)
        base = None if seed is None else fold_seed(seed, ENCODER_SALT)
        # Site seeds: embeddings base + [EMBEDDINGS_STREAM, 0]; layer_i
        # base + [FIRST_LAYER_STREAM + i, site] (see modeling.random).
        embedded = self.embeddings(
            inputs["input_ids"], inputs["segment_ids"], training=training,
            seed=None if base is None else offset_seed(base, stream=EMBEDDINGS_STREAM))
        x = embedded
        if self.embeddings_project is not None:
            x = self.embeddings_project(x)
        for i, layer in enumerate(self.transformer_layers):
            layer_seed = (None if base is None
                          else offset_seed(base, stream=FIRST_LAYER_STREAM + i))
            x = layer(x, input_mask, training=training, seed=layer_seed)
        return {
            "sequence_output": x,
            "pooled_output": x[:, 0],
            "embedding_output": embedded,
        }



def dummy_inputs(batch_size: int = 1, seq_length: int = 8) -> dict:
    """All-ones inputs to build a model eagerly: a dict of int32 [B, L] tensors."""
    ones = ops.ones((batch_size, seq_length), dtype="int32")
    return {"input_ids": ones, "input_mask": ones, "segment_ids": ops.zeros_like(ones)}
