"""Fine-tuning models: the pre-trained discriminator's encoder plus a task head.

Heads, one per kind of task (base.HEADS: what the model serves; all return
float32 logits; docs/reference.md, "Fine-tuning"):
- `sequence_classification`: dropout(0.1) on the [CLS] vector, then
  dense(num_labels); with `regression` (STS-B) dense(1), whose logit [B] is the
  score. `classifier_head="mlp"` is transformers' ElectraClassificationHead
  instead: dropout, dense(hidden) ("classifier_dense"), GELU, dropout, then the
  output dense (what an imported ElectraForSequenceClassification holds).
- `squad`: start and end logits over the sequence, with only [CLS] (no
  answer) and the second segment (the context) allowed, as the original's
  qa_tasks.py, by one of two heads (`span_head`):
  - "independent": start and end logits [B, L] from one dense(2);
  - "joint" (the original's default, joint_prediction): start logits [B, L]
    from dense(1) ("start_output"); the end logits of a start s are
    dense(1) ("qa_logits") of GELU(dense(512) ("qa_hidden") of
    concat(h_s, h_e)) at every e. Training conditions them on the gold start
    (inputs["start_positions"]): end logits [B, L]. Prediction runs a beam:
    the `beam_size` best starts by log-probability, "start_top_log_probs",
    "start_top_index" [B, K], and for each the K best ends,
    "end_top_log_probs", "end_top_index" [B, K, K] (indices into the
    sequence).
  With `answerable=True` (SQuAD 2.0) also an
  answerability logit [B] from the [CLS] vector and the start-probability-
  weighted sequence vector, through dense(512, GELU) -> dense(1), as the
  original's qa_tasks.py (answerable_uses_start_logits).
- `token_classification`: dropout, then dense(num_labels) at every token [B, L, T].

The head's variables sit under `task_specific/`, so layer-wise learning-rate
decay puts them at depth n + 2 (the original's key for heads).
"""

from __future__ import annotations

import keras
from keras import ops

from electra_tf.core.config import EncoderConfig
from electra_tf.modeling.encoder import ElectraEncoder
from electra_tf.modeling.heads import gather_positions
from electra_tf.modeling.layers import Dropout, get_activation, kernel_initializer
from electra_tf.modeling.random import FINETUNING_ENCODER_SALT, FINETUNING_HEAD_SALT, fold_seed
from electra_tf.tasks.base import HEADS  # a task's `head`: what TaskHead's `kind` takes

SPAN_HEADS = ("independent", "joint")  # the squad head's variants (`span_head`)
# The sequence_classification head's variants (`classifier_head`): ELECTRA's one
# dense layer, or transformers' dense -> GELU -> dense.
CLASSIFIER_HEADS = ("dense", "mlp")
_SECOND_DROPOUT_SALT = 1  # the mlp classifier's second dropout (a stream of the head's seed)
# Added to the span logits of positions that cannot start or end an answer.
MASK_LOGIT = -10000.0


class TaskHead(keras.layers.Layer):
    """The task-specific layers on top of the encoder (see the module docstring).

    Args:
      kind: one of HEADS.
      num_labels: classes or tags (ignored for a regression and for squad).
      hidden_size: the encoder width.
      regression: sequence_classification only: one output, the score [B].
      answerable: squad only: add the answerability classifier.
      dropout_prob: dropout before the output layer.
      initializer_range: truncated-normal stddev.
      hidden_act: activation of the answerability classifier's hidden layer.
      span_head: squad only: "independent" or "joint" (see the module docstring).
      classifier_head: sequence_classification only: "dense" or "mlp" (see the
        module docstring).
      beam_size: the joint span head's beam (the original's beam_size, 20).
    """

    def __init__(self, kind: str, num_labels: int, hidden_size: int, answerable: bool = False,
                 dropout_prob: float = 0.1, initializer_range: float = 0.02,
                 hidden_act: str = "gelu", span_head: str = "joint", beam_size: int = 20,
                 classifier_head: str = "dense", regression: bool = False, **kwargs):
        kwargs.setdefault("name", "task_specific")
        super().__init__(**kwargs)
        if kind not in HEADS:
            raise ValueError(f"head kind must be one of {HEADS}, got {kind!r}")
        if regression and kind != "sequence_classification":
            raise ValueError(f"regression is a sequence_classification head's, not {kind!r}'s")
        if answerable and kind != "squad":
            raise ValueError(f"answerable is a squad head's, not {kind!r}'s")
        if classifier_head not in CLASSIFIER_HEADS:
            raise ValueError(f"classifier_head must be one of {CLASSIFIER_HEADS}, "
                             f"got {classifier_head!r}")
        if span_head not in SPAN_HEADS:
            raise ValueError(f"span_head must be one of {SPAN_HEADS}, got {span_head!r}")
        if beam_size < 1:
            raise ValueError(f"beam_size must be >= 1, got {beam_size}")
        self.kind, self.num_labels, self.hidden_size = kind, num_labels, hidden_size
        self.answerable, self.regression, self.dropout_prob = answerable, regression, dropout_prob
        self.initializer_range, self.hidden_act = initializer_range, hidden_act
        self.span_head, self.beam_size = span_head, beam_size
        self.classifier_head = classifier_head
        self.joint = kind == "squad" and span_head == "joint"
        self.mlp = kind == "sequence_classification" and classifier_head == "mlp"
        width = 2 if kind == "squad" else 1 if regression else num_labels

        # === Layers ===
        init = kernel_initializer(initializer_range)
        self.dropout = Dropout(dropout_prob, name="dropout")
        if self.joint:  # the original's joint_prediction layers
            self.start_dense = keras.layers.Dense(1, kernel_initializer=init, dtype="float32",
                                                  name="start_output")
            self.qa_hidden = keras.layers.Dense(512, kernel_initializer=init,
                                                dtype=self.dtype_policy, name="qa_hidden")
            self.qa_logits = keras.layers.Dense(1, kernel_initializer=init, dtype="float32",
                                                name="qa_logits")
        else:
            self.output_dense = keras.layers.Dense(width, kernel_initializer=init,
                                                   dtype="float32", name="output")
        if self.mlp:  # transformers' ElectraClassificationHead.dense
            self.classifier_dense = keras.layers.Dense(
                hidden_size, kernel_initializer=init, dtype=self.dtype_policy,
                name="classifier_dense")
        if answerable:
            self.answerable_dense = keras.layers.Dense(
                512, kernel_initializer=kernel_initializer(initializer_range),
                dtype=self.dtype_policy, name="answerable_hidden")
            self.answerable_output = keras.layers.Dense(
                1, kernel_initializer=kernel_initializer(initializer_range), dtype="float32",
                name="answerable_output")

    def build(self, sequence_shape):
        self.dropout.build(sequence_shape)
        if self.joint:
            self.start_dense.build((None, None, self.hidden_size))
            self.qa_hidden.build((None, None, 2 * self.hidden_size))
            self.qa_logits.build((None, None, 512))
        else:
            self.output_dense.build((None, None, self.hidden_size))
        if self.mlp:
            self.classifier_dense.build((None, self.hidden_size))
        if self.answerable:
            self.answerable_dense.build((None, 2 * self.hidden_size))
            self.answerable_output.build((None, 512))
        self.built = True

    def call(self, sequence_output, input_mask, segment_ids=None, training=False, seed=None,
             start_positions=None):
        """Args: sequence_output [B, L, H]; input_mask, segment_ids [B, L];
        start_positions int [B]: the gold starts, which the joint squad head
        needs in training.

        Returns a dict of float32 logits (see the module docstring).
        """
        if self.kind == "sequence_classification":
            pooled = self.dropout(sequence_output[:, 0], training=training, seed=seed)
            if self.mlp:  # transformers' gelu is the exact (erf) one, as "gelu" here
                pooled = get_activation("gelu")(self.classifier_dense(pooled))
                pooled = self.dropout(pooled, training=training, seed=None if seed is None
                                      else fold_seed(seed, _SECOND_DROPOUT_SALT))
            logits = self.output_dense(pooled)
            return {"logits": ops.squeeze(logits, -1) if self.regression else logits}
        if self.kind == "token_classification":
            x = self.dropout(sequence_output, training=training, seed=seed)
            return {"tag_logits": self.output_dense(x)}
        allowed = ops.cast(input_mask, "float32")
        if segment_ids is not None:  # context tokens (segment 1) and [CLS]
            is_cls = ops.cast(ops.arange(ops.shape(allowed)[1]) == 0, "float32")[None]
            allowed = allowed * ops.maximum(ops.cast(segment_ids, "float32"), is_cls)
        pad = (1.0 - allowed) * MASK_LOGIT
        if self.joint:
            start = ops.squeeze(self.start_dense(sequence_output), -1) + pad
            outputs = {"start_logits": start}
            if training:
                if start_positions is None:
                    raise ValueError("the joint span head needs the gold start_positions in "
                                     "training (the end logits are conditioned on them)")
                starts = ops.reshape(ops.cast(start_positions, "int32"), (-1, 1))
                start_vec = gather_positions(sequence_output, starts)  # [B, 1, H]
                end = self._end_logits(start_vec, sequence_output)[:, 0] + pad
                outputs["end_logits"] = end
            else:
                outputs.update(self._beam(start, sequence_output, pad))
        else:
            logits = self.output_dense(sequence_output)  # [B, L, 2]
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

    def _end_logits(self, start_vec, sequence_output):
        """End logits [B, K, L] of K starts: qa_logits(GELU(qa_hidden(concat(h_s, h_e)))).

        qa_hidden's kernel is split into its start and end halves, so that
        concat(h_s, h_e) W = h_s W_s + h_e W_e is never built [B, K, L, 2H].
        """
        dtype, h = self.compute_dtype, self.hidden_size
        kernel = ops.cast(self.qa_hidden.kernel, dtype)
        from_start = ops.matmul(ops.cast(start_vec, dtype), kernel[:h])  # [B, K, 512]
        from_end = ops.matmul(ops.cast(sequence_output, dtype), kernel[h:])  # [B, L, 512]
        hidden = (from_start[:, :, None, :] + from_end[:, None, :, :]
                  + ops.cast(self.qa_hidden.bias, dtype))
        hidden = get_activation("gelu")(hidden)  # the original's modeling.gelu
        return ops.squeeze(self.qa_logits(hidden), -1)

    def _beam(self, start_logits, sequence_output, pad):
        """The original's joint decoding: top-K starts by log-probability, then the
        top-K ends of each (K = beam_size, at most the sequence length)."""
        length = sequence_output.shape[1]
        k = min(self.beam_size, length) if length is not None else self.beam_size
        start_top_log_probs, start_top_index = ops.top_k(
            ops.log_softmax(start_logits, axis=-1), k=k)
        start_vec = gather_positions(sequence_output, start_top_index)  # [B, K, H]
        end_logits = self._end_logits(start_vec, sequence_output) + pad[:, None, :]
        end_top_log_probs, end_top_index = ops.top_k(ops.log_softmax(end_logits, axis=-1), k=k)
        return {"start_top_log_probs": start_top_log_probs,
                "start_top_index": ops.cast(start_top_index, "int32"),
                "end_top_log_probs": end_top_log_probs,
                "end_top_index": ops.cast(end_top_index, "int32")}

    def get_config(self):
        config = super().get_config()
        config.update(kind=self.kind, num_labels=self.num_labels, hidden_size=self.hidden_size,
                      answerable=self.answerable, dropout_prob=self.dropout_prob,
                      initializer_range=self.initializer_range, hidden_act=self.hidden_act,
                      span_head=self.span_head, beam_size=self.beam_size,
                      classifier_head=self.classifier_head, regression=self.regression)
        return config


class FinetuningModel(keras.Model):
    """Encoder + TaskHead. call(inputs, training, seed) -> the head's dict.

    Args:
      encoder: a (pre-trained) ElectraEncoder, e.g. `discriminator.encoder`.
      kind, num_labels, answerable, regression, span_head, beam_size,
        classifier_head: see TaskHead (kind is the task's `head`; the recorded
        `head_options` give the last three).

    The joint squad head reads inputs["start_positions"] in training.
    """

    def __init__(self, encoder: ElectraEncoder, kind: str, num_labels: int = 1,
                 answerable: bool = False, span_head: str = "joint", beam_size: int = 20,
                 classifier_head: str = "dense", regression: bool = False, **kwargs):
        kwargs.setdefault("name", "finetuning_model")
        super().__init__(**kwargs)
        self.encoder = encoder
        config: EncoderConfig = encoder.config
        self.head = TaskHead(kind, num_labels, config.hidden_size, answerable=answerable,
                             dropout_prob=config.hidden_dropout_prob,
                             initializer_range=config.initializer_range,
                             hidden_act=config.hidden_act, span_head=span_head,
                             beam_size=beam_size, classifier_head=classifier_head,
                             regression=regression, dtype=self.dtype_policy)

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
                         seed=None if seed is None else fold_seed(seed, FINETUNING_HEAD_SALT),
                         start_positions=inputs.get("start_positions"))
