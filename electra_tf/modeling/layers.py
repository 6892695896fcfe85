"""Building blocks: activations, a seedable dropout and the embeddings layer.

All layers use Keras 3 only (no `tensorflow` import) and follow the global
dtype policy: under `mixed_bfloat16` they compute in bfloat16 and keep float32
variables.
"""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.modeling.random import tensor_seed


def _in_float32(fn):
    """`fn` computed in float32 for a bfloat16 or float16 input, cast back.

    Under a mixed-precision policy on CPU, TensorFlow's bfloat16 erf and exp
    convert every element to float32 and back; the GELU's forward and backward
    passes took twice as long as with two casts around a float32 GELU, and the
    float32 form rounds once instead of at every step.
    """
    def apply(x):
        if keras.backend.standardize_dtype(x.dtype) == "float32":
            return fn(x)
        return ops.cast(fn(ops.cast(x, "float32")), x.dtype)
    return apply


def get_activation(name: str):
    """Maps an `EncoderConfig.hidden_act` name to a function.

    "gelu" is the exact erf form, `0.5 * x * (1 + erf(x / sqrt(2)))`, as the
    original's `modeling.gelu`; "gelu_approximate" is the tanh approximation.
    Both compute in float32 for a lower-precision input.
    """
    if name == "gelu":
        return _in_float32(lambda x: keras.activations.gelu(x, approximate=False))
    if name == "gelu_approximate":
        return _in_float32(lambda x: keras.activations.gelu(x, approximate=True))
    if name == "relu":
        return keras.activations.relu
    raise ValueError(f"unsupported activation {name!r}")


def kernel_initializer(initializer_range: float):
    """A fresh truncated-normal initializer (a new one per variable).

    Keras 3 fixes the seed of an unseeded initializer at construction, so one
    instance shared by several layers would give them identical weights.
    """
    return keras.initializers.TruncatedNormal(stddev=initializer_range)


@keras.saving.register_keras_serializable(package="electra_tf")
class Dropout(keras.layers.Layer):
    """Dropout that can draw its mask from an explicit seed tensor.

    With `seed=None` it behaves as `keras.layers.Dropout` (a per-layer
    `SeedGenerator`, seeded by `seed_init`). With a seed tensor of shape [2]
    the mask is a stateless function of that seed, so a training loop can pass
    distinct per-replica, per-step seeds (see `electra_tf.modeling.random`).

    Args:
        rate: float in [0, 1), the fraction of units to drop.
        seed_init: optional int that seeds the fallback `SeedGenerator`.
    """

    def __init__(self, rate: float, seed_init: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"rate must be in [0, 1), got {rate}")
        self.rate = rate
        self.seed_init = seed_init
        self.supports_masking = True
        self.seed_generator = None

    def build(self, input_shape=None):
        # Created here, not in __init__, so that the state's variable path sits
        # under the parent layers' names (e.g. "layer_0/output_dropout/...").
        if self.rate > 0:
            self.seed_generator = keras.random.SeedGenerator(self.seed_init, name="seed_generator")
        self.built = True

    def call(self, inputs, training=False, seed=None):
        """Applies dropout when training.

        Args:
            inputs: float tensor of any shape.
            training: bool; dropout is applied only when True.
            seed: optional int tensor of shape [2]; the mask's stateless seed.

        Returns:
            A tensor of the shape and dtype of `inputs`.
        """
        if not training or self.rate == 0:
            return inputs
        rng = self.seed_generator if seed is None else tensor_seed(seed)
        if keras.backend.standardize_dtype(inputs.dtype) == "float32":
            return keras.random.dropout(inputs, self.rate, seed=rng)
        # Under a mixed-precision policy the mask and the scale are float32:
        # keras.random.dropout draws its uniforms in the input's dtype, and
        # TensorFlow draws bfloat16 uniforms on a grid of 1/128, so rate 0.1
        # kept 89.8% of the units and scaled them by bfloat16's 1/0.9 (1.109),
        # shrinking every dropout site's mean output by 0.3%.
        keep = keras.random.uniform(ops.shape(inputs), dtype="float32", seed=rng) >= self.rate
        scaled = ops.cast(inputs, "float32") * (1.0 / (1.0 - self.rate))
        return ops.cast(ops.where(keep, scaled, 0.0), inputs.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"rate": self.rate, "seed_init": self.seed_init})
        return config


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraEmbeddings(keras.layers.Layer):
    """Token + position + segment embeddings, then LayerNorm and dropout.

    This is the original's `embeddings` scope, which the generator and the
    discriminator share by default (paper section 3.2). Sub-layers:
    `word_embeddings` [vocab_size, E], `position_embeddings`
    [max_position_embeddings, E], `token_type_embeddings` [type_vocab_size, E],
    `LayerNorm` and `dropout`.

    Args:
        vocab_size: rows of the token table.
        embedding_size: E, the embedding width.
        max_position_embeddings: rows of the position table.
        type_vocab_size: rows of the segment table.
        hidden_dropout_prob: dropout rate after the LayerNorm.
        initializer_range: stddev of the truncated-normal tables.
        layer_norm_eps: LayerNorm epsilon.
        residual_of: gradient-disentangled embedding sharing (GDES, DeBERTa-v3,
            He et al. 2021): another `ElectraEmbeddings` of the same sizes (the
            generator's). Each table then reads stop_gradient(shared table) +
            this layer's own table, which starts at zero, so the discriminator's
            loss trains only the residuals and the generator's MLM alone trains
            the shared tables. The LayerNorm is this layer's own. Only the
            pre-training discriminator is built this way; the model users keep
            holds the sums (`merged_tables`).
    """

    def __init__(self, vocab_size: int, embedding_size: int, max_position_embeddings: int = 512,
                 type_vocab_size: int = 2, hidden_dropout_prob: float = 0.1,
                 initializer_range: float = 0.02, layer_norm_eps: float = 1e-12,
                 residual_of: "ElectraEmbeddings | None" = None, **kwargs):
        super().__init__(**kwargs)
        self.residual_of = residual_of
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        if residual_of is not None and residual_of.sizes != self.sizes:
            raise ValueError(f"residual_of has (vocab, width, positions, types) "
                             f"{residual_of.sizes}, but this layer has {self.sizes}")
        self.hidden_dropout_prob = hidden_dropout_prob
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps

        # === Layers ===
        init = ("zeros" if residual_of is not None
                else kernel_initializer(initializer_range))

        def table(rows, name):
            return keras.layers.Embedding(
                rows, embedding_size, embeddings_initializer=init,
                dtype=self.dtype_policy, name=name)

        self.word_embeddings = table(vocab_size, "word_embeddings")
        self.position_embeddings = table(max_position_embeddings, "position_embeddings")
        self.token_type_embeddings = table(type_vocab_size, "token_type_embeddings")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype=self.dtype_policy, name="LayerNorm")
        self.dropout = Dropout(hidden_dropout_prob, dtype=self.dtype_policy, name="dropout")

    def build(self, input_shape=None):
        self.word_embeddings.build((None, None))
        self.position_embeddings.build((None, None))
        self.token_type_embeddings.build((None, None))
        self.layer_norm.build((None, None, self.embedding_size))
        self.built = True

    def call(self, input_ids, segment_ids, training=False, seed=None):
        """Embeds a batch of token ids.

        Args:
            input_ids: int tensor [batch_size, seq_length].
            segment_ids: int tensor [batch_size, seq_length].
            training: bool; enables dropout.
            seed: optional int tensor [2] for the dropout mask.

        Returns:
            float tensor [batch_size, seq_length, embedding_size].
        """
        ids, segments = ops.shape(input_ids), ops.shape(segment_ids)
        if len(ids) != 2:  # (an IndexError from the line below)
            raise ValueError(f"input_ids must be [batch_size, seq_length], got rank "
                             f"{len(ids)}")
        if len(segments) != 2 or any(  # (statically known sizes: a traced call's may not be)
                isinstance(a, int) and isinstance(b, int) and a != b
                for a, b in zip(ids, segments)):
            raise ValueError(f"segment_ids must be of input_ids' shape {ids}, got {segments}")
        seq_length = ids[1]
        if isinstance(seq_length, int) and seq_length > self.max_position_embeddings:
            # (JAX's gather clamps: positions past the table had all read its last row;
            # TensorFlow's CPU gather raised an InvalidArgumentError naming GatherV2)
            raise ValueError(f"input_ids of {seq_length} positions, but the model has "
                             f"{self.max_position_embeddings} (max_position_embeddings)")
        positions = ops.expand_dims(ops.arange(seq_length, dtype="int32"), 0)
        x = (self.word_embeddings(input_ids)
             + self.position_embeddings(positions)
             + self.token_type_embeddings(segment_ids))
        if self.residual_of is not None:
            shared = self.residual_of
            x = x + ops.stop_gradient(shared.word_embeddings(input_ids)
                                      + shared.position_embeddings(positions)
                                      + shared.token_type_embeddings(segment_ids))
        x = self.layer_norm(x)
        return self.dropout(x, training=training, seed=seed)

    TABLES = ("word_embeddings", "position_embeddings", "token_type_embeddings")

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        """(vocab_size, embedding_size, max_position_embeddings, type_vocab_size)."""
        return (self.vocab_size, self.embedding_size, self.max_position_embeddings,
                self.type_vocab_size)

    def merged_tables(self) -> dict:
        """{table name: numpy array} of the tables this layer embeds with: its own, or
        with `residual_of`, the shared table + the residual."""
        out = {}
        for name in self.TABLES:
            table = ops.convert_to_numpy(getattr(self, name).embeddings)
            if self.residual_of is not None:
                table = table + ops.convert_to_numpy(
                    getattr(self.residual_of, name).embeddings)
            out[name] = table
        return out

    def get_config(self):
        if self.residual_of is not None:
            raise NotImplementedError("gradient-disentangled embeddings are not serialized: "
                                      "save the merged tables (merged_tables)")
        config = super().get_config()
        config.update({
            "vocab_size": self.vocab_size,
            "embedding_size": self.embedding_size,
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_size": self.type_vocab_size,
            "hidden_dropout_prob": self.hidden_dropout_prob,
            "initializer_range": self.initializer_range,
            "layer_norm_eps": self.layer_norm_eps,
        })
        return config
