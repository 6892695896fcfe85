"""Pre-training heads: the generator's masked-LM head and the RTD head.

Both return float32 logits whatever the dtype policy, so that losses under
`mixed_bfloat16` are computed in float32 (docs/reference.md, pitfalls).
"""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.modeling.layers import get_activation, kernel_initializer


def gather_positions(sequence, positions):
    """Gathers the vectors at given positions of each sequence.

    Args:
        sequence: tensor [batch_size, seq_length, width].
        positions: int tensor [batch_size, num_positions].

    Returns:
        tensor [batch_size, num_positions, width].
    """
    batch_size, seq_length, width = ops.shape(sequence)
    positions = ops.cast(positions, "int32")
    offsets = ops.arange(batch_size, dtype="int32")[:, None] * seq_length
    flat = ops.reshape(sequence, (-1, width))
    gathered = ops.take(flat, ops.reshape(positions + offsets, (-1,)), axis=0)
    return ops.reshape(gathered, (*ops.shape(positions), width))


@keras.saving.register_keras_serializable(package="electra_tf")
class MaskedLMHead(keras.layers.Layer):
    """The generator's MLM head, tied to the input word embeddings.

    gather -> dense(embedding_size, GELU) -> LayerNorm -> float32 logits
    against the word-embedding table + `output_bias` [V] (the original's
    `generator_predictions`). Gathering first keeps the vocabulary-wide work
    to the masked positions. The tied matmul and the bias run in float32
    (the layer does not autocast its variables).

    Args:
        token_embedding: the `keras.layers.Embedding` whose table [V, E] gives
            the output weights (tied with the encoder's input).
        hidden_act: activation of the dense layer ("gelu" is exact erf).
        initializer_range: stddev of the truncated-normal kernel.
        layer_norm_eps: LayerNorm epsilon.
    """

    def __init__(self, token_embedding: keras.layers.Embedding, hidden_act: str = "gelu",
                 initializer_range: float = 0.02, layer_norm_eps: float = 1e-12, **kwargs):
        # autocast=False: under a mixed policy this layer reads the tied table
        # and the bias in float32; its sub-layers still compute in bfloat16.
        super().__init__(autocast=False, **kwargs)
        self.token_embedding = token_embedding
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.vocab_size = token_embedding.input_dim
        self.embedding_size = token_embedding.output_dim
        self._activation = get_activation(hidden_act)

        # === Layers ===
        self.dense = keras.layers.Dense(
            self.embedding_size, kernel_initializer=kernel_initializer(initializer_range),
            dtype=self.dtype_policy, name="dense")
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, dtype=self.dtype_policy, name="LayerNorm")

    def build(self, sequence_output_shape, masked_lm_positions_shape=None):
        self.dense.build((None, None, sequence_output_shape[-1]))
        self.layer_norm.build((None, None, self.embedding_size))
        self.output_bias = self.add_weight(shape=(self.vocab_size,), initializer="zeros",
                                           dtype="float32", name="output_bias")
        self.built = True

    def call(self, sequence_output, masked_lm_positions):
        """Computes vocabulary logits at the masked positions.

        Args:
            sequence_output: float tensor [batch_size, seq_length, hidden_size].
            masked_lm_positions: int tensor [batch_size, num_predictions]; None:
                every position (Electric's cloze head, no gather).

        Returns:
            float32 tensor [batch_size, num_predictions, vocab_size].
        """
        x = (sequence_output if masked_lm_positions is None
             else gather_positions(sequence_output, masked_lm_positions))
        x = self.layer_norm(self._activation(self.dense(x)))
        table = ops.cast(self.token_embedding.embeddings, "float32")
        # One [rows, E] x [E, V] product. A batched einsum ("bne,ve->bnv") broadcast the
        # table over the batch, and TensorFlow's gradient of that product formed
        # [batch, E, V] before summing it over the batch (2 GB for Small's batch of 128).
        rows = ops.reshape(ops.cast(x, "float32"), (-1, self.embedding_size))
        logits = ops.matmul(rows, ops.transpose(table))
        logits = ops.reshape(logits, (*ops.shape(x)[:-1], self.vocab_size))
        return logits + self.output_bias

    def compute_output_shape(self, sequence_output_shape, masked_lm_positions_shape):
        return (*masked_lm_positions_shape, self.vocab_size)

    def get_config(self):
        # Like KerasHub's MaskedLMHead: from_config rebuilds an *untied* copy.
        config = super().get_config()
        config.update({
            "token_embedding": keras.layers.serialize(self.token_embedding),
            "hidden_act": self.hidden_act,
            "initializer_range": self.initializer_range,
            "layer_norm_eps": self.layer_norm_eps,
        })
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config["token_embedding"], dict):
            config["token_embedding"] = keras.layers.deserialize(config["token_embedding"])
        return cls(**config)


@keras.saving.register_keras_serializable(package="electra_tf")
class DiscriminatorHead(keras.layers.Layer):
    """The replaced-token-detection head: dense(hidden, GELU) -> dense(1).

    The original's `discriminator_predictions`. The last layer runs in float32.

    Args:
        hidden_size: width of the first dense layer (D's hidden size).
        hidden_act: its activation ("gelu" is exact erf).
        initializer_range: stddev of the truncated-normal kernels.
    """

    def __init__(self, hidden_size: int, hidden_act: str = "gelu",
                 initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self._activation = get_activation(hidden_act)

        # === Layers ===
        self.dense = keras.layers.Dense(
            hidden_size, kernel_initializer=kernel_initializer(initializer_range),
            dtype=self.dtype_policy, name="dense")
        self.dense_prediction = keras.layers.Dense(
            1, kernel_initializer=kernel_initializer(initializer_range),
            dtype="float32", name="dense_prediction")

    def build(self, sequence_shape):
        self.dense.build((None, None, sequence_shape[-1]))
        self.dense_prediction.build((None, None, self.hidden_size))
        self.built = True

    def call(self, sequence_output):
        """Scores every token as original (< 0) or replaced (> 0).

        Args:
            sequence_output: float tensor [batch_size, seq_length, hidden_size].

        Returns:
            float32 tensor [batch_size, seq_length] of logits.
        """
        x = self._activation(self.dense(sequence_output))
        return ops.squeeze(self.dense_prediction(x), axis=-1)

    def compute_output_shape(self, sequence_shape):
        return tuple(sequence_shape)[:-1]

    def get_config(self):
        config = super().get_config()
        config.update({
            "hidden_size": self.hidden_size,
            "hidden_act": self.hidden_act,
            "initializer_range": self.initializer_range,
        })
        return config
