"""The sequence_classification head: one output per text or text pair.

Classes (GLUE, your own labels), or with `regression` one number (STS-B).
Layers (docs/reference.md, "Fine-tuning"): dropout(0.1) on the [CLS]
vector, then dense(num_labels) ("output"); a regression has dense(1), whose
logit [B] is the score. `classifier_head="mlp"` is transformers'
ElectraClassificationHead instead: dropout, dense(hidden)
("classifier_dense"), GELU, dropout, then the output dense (what an imported
ElectraForSequenceClassification holds).

Outputs: "logits" [B, C] (a regression: [B]). Loss (the original's
classification_tasks.py): softmax cross-entropy, or squared error for a
regression, summed over the batch.

Serving (both signatures): probabilities [B, C], label (string [B]),
label_id (int32 [B]), logits [B, C]; a regression: score [B] (logit x max +
min of the recorded label_scale).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np
from keras import ops

from electra_tf.modeling.layers import get_activation
from electra_tf.modeling.random import fold_seed
from electra_tf.tasks import losses
from electra_tf.tasks.heads.base import Head, HeadConfig, ServingOptions, dense_names

# The variants (`classifier_head`): ELECTRA's one dense layer, or transformers'
# dense -> GELU -> dense.
CLASSIFIER_HEADS = ("dense", "mlp")
_SECOND_DROPOUT_SALT = 1  # the mlp classifier's second dropout (a stream of the head's seed)
_GELU_LINEAR_FROM = 10.0  # GELU(x) == x in float32 for x >= 10 (Phi(10) = 1 - 8e-24)
# transformers' problem_type values this head computes.
_PROBLEM_TYPES = (None, "single_label_classification", "regression")


@dataclasses.dataclass(frozen=True)
class ClassificationConfig(HeadConfig):
    regression: bool = False  # one output, the score [B] (STS-B)
    classifier_head: str = "dense"  # one of CLASSIFIER_HEADS

    def __post_init__(self):
        if self.classifier_head not in CLASSIFIER_HEADS:
            raise ValueError(f"classifier_head must be one of {CLASSIFIER_HEADS}, "
                             f"got {self.classifier_head!r}")

    def head_options(self) -> dict:
        return {} if self.classifier_head == "dense" else {"classifier_head": self.classifier_head}


@dataclasses.dataclass(frozen=True)
class ClassificationServing(ServingOptions):
    regression: bool = False
    label_scale: tuple = (0.0, 1.0)  # regression: score = logit * max + min (min, max)


class SequenceClassificationHead(Head):
    kind: ClassVar[str] = "sequence_classification"
    Config = ClassificationConfig
    ServingOptions = ClassificationServing
    hf_architecture = "ElectraForSequenceClassification"
    hf_modules = {"task_specific/output": "classifier.out_proj",
                  "task_specific/classifier_dense": "classifier.dense"}
    hf_output_weight = "classifier.out_proj.weight"  # its rows: the labels
    hf_droppable = True  # convert --drop_task_head keeps the encoder alone

    def __init__(self, config: ClassificationConfig, num_labels: int, hidden_size: int,
                 **kwargs):
        super().__init__(config, num_labels, hidden_size, **kwargs)
        self.regression, self.classifier_head = config.regression, config.classifier_head
        self.mlp = config.classifier_head == "mlp"
        # === Layers ===
        self.output_dense = self.dense(1 if config.regression else num_labels, "output")
        if self.mlp:  # transformers' ElectraClassificationHead.dense
            self.classifier_dense = self.dense(hidden_size, "classifier_dense", float32=False)

    def build(self, sequence_shape):
        self.dropout.build(sequence_shape)
        self.output_dense.build((None, None, self.hidden_size))
        if self.mlp:
            self.classifier_dense.build((None, self.hidden_size))
        self.built = True

    def call(self, sequence_output, input_mask, segment_ids=None, training=False, seed=None,
             start_positions=None):
        pooled = self.dropout(sequence_output[:, 0], training=training, seed=seed)
        if self.mlp:  # transformers' gelu is the exact (erf) one, as "gelu" here
            pooled = get_activation("gelu")(self.classifier_dense(pooled))
            pooled = self.dropout(pooled, training=training, seed=None if seed is None
                                  else fold_seed(seed, _SECOND_DROPOUT_SALT))
        logits = self.output_dense(pooled)
        return {"logits": ops.squeeze(logits, -1) if self.regression else logits}

    # === Options, loss, record ===
    @classmethod
    def learns_labels(cls, config) -> bool:
        return not config.regression

    @classmethod
    def loss(cls, config, outputs, labels):
        weight = labels.get(losses.EXAMPLE_WEIGHT)
        if config.regression:
            return losses.regression_loss(outputs["logits"], labels["label"], weight)
        return losses.classification_loss(outputs["logits"], labels["label"], weight)

    @classmethod
    def loss_count(cls, config, labels):
        return losses.example_count(labels, "label")

    @classmethod
    def describe(cls, config) -> str:
        return f"{cls.kind} head" + (" (a regression)" if config.regression else "")

    @classmethod
    def continues(cls, had, want) -> str | None:
        # A folder of the dense head records no classifier_head (as before it had one).
        if had.classifier_head != "dense" and had.classifier_head != want.classifier_head:
            return (f"the {had.classifier_head} classifier head; pass "
                    f"--classifier_head={had.classifier_head}")
        return None

    # === Names ===
    @classmethod
    def tf1_layers(cls, config) -> dict:
        """classification_tasks.py: dense(num_labels) on [CLS]; RegressionTask: dense(1)."""
        if config.classifier_head != "dense":
            raise ValueError(f"the original's classification head is one dense layer, not "
                             f"the {config.classifier_head} classifier head")
        return {"output": ("dense",)}

    def original_variables(self) -> dict:
        out = dense_names("task_specific/output", self.output_dense)
        if self.mlp:
            out.update(dense_names("task_specific/classifier_dense", self.classifier_dense))
        return out

    @classmethod
    def hf_detect(cls, keys) -> bool:
        return any(k.startswith(("classifier.dense.", "classifier.out_proj.")) for k in keys)

    @classmethod
    def hf_check(cls, path: str, hf_config: dict, width: int) -> None:
        """Refuses a transformers problem_type this head does not compute (ValueError)."""
        problem = hf_config.get("problem_type")
        if problem == "multi_label_classification":
            raise ValueError(
                f"{path}: problem_type multi_label_classification (a sigmoid per label, any "
                "number of labels at once) is not supported: electra_tf's classifier picks "
                "one label by softmax; --drop_task_head converts the encoder alone")
        if problem not in _PROBLEM_TYPES:
            raise ValueError(f"{path}: problem_type {problem!r} is not one of "
                             f"{', '.join(map(str, _PROBLEM_TYPES[1:]))}")
        if (problem == "regression" and width != 1) or \
                (problem == "single_label_classification" and width == 1):
            raise ValueError(
                f"{path}: problem_type {problem} with {width} output(s): electra_tf's "
                "regression head predicts one number and its classifier two or more labels")

    @classmethod
    def hf_import_config(cls, width: int) -> ClassificationConfig:
        """transformers' head: the mlp classifier; one output is a regression."""
        return ClassificationConfig(regression=width == 1, classifier_head="mlp")

    @classmethod
    def hf_default_task(cls, labels) -> str:
        return "classification"

    @classmethod
    def hf_finetuning_options(cls, config, task_name: str, labels) -> dict:
        options = {"classifier_head": "mlp"}
        if config.regression and task_name == "classification":
            options["regression"] = True
        return options

    @classmethod
    def hf_export_arrays(cls, config, arrays: dict, record, encoder) -> dict:
        """The dense head as transformers' dense -> GELU -> dense (`_dense_as_mlp`), and a
        regression's label scale folded into out_proj (transformers' logit is the score)."""
        if config.classifier_head == "dense":
            arrays = _dense_as_mlp(arrays, encoder)
        if config.regression:
            low, scale = record.label_scale
            arrays["task_specific/output/kernel"] *= scale
            arrays["task_specific/output/bias"] = arrays["task_specific/output/bias"] \
                * scale + low
        return arrays

    @classmethod
    def hf_export_config(cls, config, values: dict, record) -> dict:
        labels = list(record.label_names) or ["LABEL_0"]
        values.update(num_labels=len(labels), id2label={str(i): n for i, n in enumerate(labels)},
                      label2id={n: i for i, n in enumerate(labels)},
                      problem_type="regression" if config.regression
                      else "single_label_classification")
        return values

    # === Serving ===
    @classmethod
    def serving_options(cls, record, checkpoint: str, **flags):
        return ClassificationServing(regression=record.regression,
                                     label_scale=tuple(record.label_scale))

    @classmethod
    def text_inputs(cls, pair: bool) -> tuple[str, ...]:
        return ("text", "text_pair") if pair else ("text",)

    @classmethod
    def export_info(cls, spec) -> dict:
        info = {"regression": spec.regression}
        if spec.regression:
            info["label_scale"] = [float(x) for x in spec.label_scale]
        return info

    @classmethod
    def ids_outputs(cls, spec, out, word_ids, mask, type_ids, graph) -> dict:
        return graph.classification_outputs(out["logits"], spec.label_names, spec.regression,
                                            spec.label_scale)

    @classmethod
    def text_outputs(cls, spec, packer, tokenized, packed, out, graph) -> dict:
        return graph.classification_outputs(out["logits"], spec.label_names, spec.regression,
                                            spec.label_scale)


def _dense_as_mlp(arrays: dict, encoder) -> dict:
    """One dense layer on [CLS] as transformers' dense -> GELU -> dense, exactly.

    The [CLS] vector is the last LayerNorm's output x = gamma * z + beta, with
    |z_i| <= sqrt(H - 1) for a normalized vector of width H; so x + c, with
    c = 10 + sqrt(H - 1) max|gamma| + max|beta|, is >= 10 everywhere, where
    GELU is the identity in float32. dense: identity, bias c; out_proj: W and
    b - c W^T 1.
    """
    hidden = encoder.config.hidden_size
    norm = encoder.transformer_layers[-1].output_layer_norm
    gamma = np.abs(np.asarray(ops.convert_to_numpy(norm.gamma), np.float64)).max()
    beta = np.abs(np.asarray(ops.convert_to_numpy(norm.beta), np.float64)).max()
    shift = _GELU_LINEAR_FROM + np.sqrt(hidden - 1) * gamma + beta
    kernel, bias = arrays["task_specific/output/kernel"], arrays["task_specific/output/bias"]
    return {"task_specific/classifier_dense/kernel": np.eye(hidden),
            "task_specific/classifier_dense/bias": np.full(hidden, shift),
            "task_specific/output/kernel": kernel,
            "task_specific/output/bias": bias - shift * kernel.sum(axis=0)}
