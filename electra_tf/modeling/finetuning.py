"""Fine-tuning models: the pre-trained discriminator's encoder plus a task head.

Heads (all return float32 logits; docs/reference.md, "Fine-tuning"):
- `classification`: dropout(0.1) on the [CLS] vector, then dense(num_labels);
  with num_labels == 1 (STS-B) the logit is the regression score [B].
- `span`: start and end logits [B, L] from a dense(2) over the sequence,
  with only [CLS] (no answer) and the second segment (the context) allowed,
  as the original's qa_tasks.py; with `answerable=True` (SQuAD 2.0) also an
  answerability logit [B] from the [CLS] vector and the start-probability-
  weighted sequence vector, through dense(512, GELU) -> dense(1), as the
  original's qa_tasks.py (answerable_uses_start_logits).
- `tagging`: dropout, then dense(num_labels) at every token [B, L, T].

The head's variables sit under `task_specific/`, so layer-wise learning-rate
decay puts them at depth n + 2 (the original's key for heads).
"""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.config import EncoderConfig
from electra_tf.modeling.encoder import ElectraEncoder
from electra_tf.modeling.layers import Dropout, get_activation, kernel_initializer
from electra_tf.modeling.random import FINETUNING_ENCODER_SALT, FINETUNING_HEAD_SALT, fold_seed

# The task head kinds (a fine-tuning task's `head`): the one definition.
HEADS = ("classification", "regression", "span", "tagging")
_MASK_LOGIT = -10000.0


class TaskHead(keras.layers.Layer):
    """The task-specific layers on top of the encoder (see the module docstring).

    Args:
      kind: one of HEADS.
      num_labels: classes or tags (ignored for regression and span).
      hidden_size: the encoder width.
      answerable: span only: add the answerability classifier.
      dropout_prob: dropout before the output layer.
      initializer_range: truncated-normal stddev.
      hidden_act: activation of the answerability classifier's hidden layer.
    """

    def __init__(self, kind: str, num_labels: int, hidden_size: int, answerable: bool = False,
                 dropout_prob: float = 0.1, initializer_range: float = 0.02,
                 hidden_act: str = "gelu", **kwargs):
        kwargs.setdefault("name", "task_specific")
        super().__init__(**kwargs)
        if kind not in HEADS:
            raise ValueError(f"head kind must be one of {HEADS}, got {kind!r}")
        self.kind, self.num_labels, self.hidden_size = kind, num_labels, hidden_size
        self.answerable, self.dropout_prob = answerable, dropout_prob
        self.initializer_range, self.hidden_act = initializer_range, hidden_act
        width = {"classification": num_labels, "regression": 1, "span": 2,
                 "tagging": num_labels}[kind]

        # === Layers ===
        self.dropout = Dropout(dropout_prob, name="dropout")
        self.output_dense = keras.layers.Dense(
            width, kernel_initializer=kernel_initializer(initializer_range), dtype="float32",
            name="output")
        if kind == "span" and answerable:
            self.answerable_dense = keras.layers.Dense(
                512, kernel_initializer=kernel_initializer(initializer_range),
                dtype=self.dtype_policy, name="answerable_hidden")
            self.answerable_output = keras.layers.Dense(
                1, kernel_initializer=kernel_initializer(initializer_range), dtype="float32",
                name="answerable_output")

    def build(self, sequence_shape):
        self.dropout.build(sequence_shape)
        self.output_dense.build((None, None, self.hidden_size))
        if self.kind == "span" and self.answerable:
            self.answerable_dense.build((None, 2 * self.hidden_size))
            self.answerable_output.build((None, 512))
        self.built = True

    def call(self, sequence_output, input_mask, segment_ids=None, training=False, seed=None):
        """Args: sequence_output [B, L, H]; input_mask, segment_ids [B, L].

        Returns a dict of float32 logits (see the module docstring).
        """
        if self.kind in ("classification", "regression"):
            pooled = self.dropout(sequence_output[:, 0], training=training, seed=seed)
            logits = self.output_dense(pooled)
            return {"logits": ops.squeeze(logits, -1) if self.kind == "regression" else logits}
        if self.kind == "tagging":
            x = self.dropout(sequence_output, training=training, seed=seed)
            return {"tag_logits": self.output_dense(x)}
        logits = self.output_dense(sequence_output)  # [B, L, 2]
        allowed = ops.cast(input_mask, "float32")
        if segment_ids is not None:  # context tokens (segment 1) and [CLS]
            is_cls = ops.cast(ops.arange(ops.shape(allowed)[1]) == 0, "float32")[None]
            allowed = allowed * ops.maximum(ops.cast(segment_ids, "float32"), is_cls)
        pad = (1.0 - allowed) * _MASK_LOGIT
        start, end = logits[..., 0] + pad, logits[..., 1] + pad
        outputs = {"start_logits": start, "end_logits": end}
        if self.answerable:
            start_p = ops.softmax(start, axis=-1)
            start_vec = ops.einsum("bl,blh->bh", start_p,
                                   ops.cast(sequence_output, "float32"))
            rep = ops.concatenate([ops.cast(sequence_output[:, 0], "float32"), start_vec], -1)
            hidden = get_activation(self.hidden_act)(
                self.answerable_dense(ops.cast(rep, self.compute_dtype)))
            outputs["answerable_logits"] = ops.squeeze(self.answerable_output(hidden), -1)
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(kind=self.kind, num_labels=self.num_labels, hidden_size=self.hidden_size,
                      answerable=self.answerable, dropout_prob=self.dropout_prob,
                      initializer_range=self.initializer_range, hidden_act=self.hidden_act)
        return config


class FinetuningModel(keras.Model):
    """Encoder + TaskHead. call(inputs, training, seed) -> the head's dict.

    Args:
      encoder: a (pre-trained) ElectraEncoder, e.g. `discriminator.encoder`.
      kind, num_labels, answerable: see TaskHead.
    """

    def __init__(self, encoder: ElectraEncoder, kind: str, num_labels: int = 1,
                 answerable: bool = False, **kwargs):
        kwargs.setdefault("name", "finetuning_model")
        super().__init__(**kwargs)
        self.encoder = encoder
        config: EncoderConfig = encoder.config
        self.head = TaskHead(kind, num_labels, config.hidden_size, answerable=answerable,
                             dropout_prob=config.hidden_dropout_prob,
                             initializer_range=config.initializer_range,
                             hidden_act=config.hidden_act, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        if not self.encoder.built:
            self.encoder.build(None)
        self.head.build((None, None, self.encoder.config.hidden_size))
        self.built = True

    def call(self, inputs, training=False, seed=None):
        outputs = self.encoder(
            inputs, training=training,
            seed=None if seed is None else fold_seed(seed, FINETUNING_ENCODER_SALT))
        return self.head(outputs["sequence_output"], inputs["input_mask"],
                         inputs.get("segment_ids"), training=training,
                         seed=None if seed is None else fold_seed(seed, FINETUNING_HEAD_SALT))
