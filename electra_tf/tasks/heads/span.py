"""The span head (recorded as "squad"): an answer span in a context (SQuAD, MRQA).

Start and end logits over the sequence, with only [CLS] (no answer) and the
second segment (the context) allowed, as the original's qa_tasks.py, by one of
two variants (`span_head`):
  - "independent": start and end logits [B, L] from one dense(2) ("output");
  - "joint" (the original's default, joint_prediction): start logits [B, L]
    from dense(1) ("start_output"); the end logits of a start s are
    dense(1) ("qa_logits") of GELU(dense(512) ("qa_hidden") of
    concat(h_s, h_e)) at every e. Training conditions them on the gold start
    (inputs["start_positions"]): end logits [B, L]. Prediction runs a beam:
    the `beam_size` best starts by log-probability, "start_top_log_probs",
    "start_top_index" [B, K], and for each the K best ends,
    "end_top_log_probs", "end_top_index" [B, K, K] (indices into the
    sequence).
With `answerable` (SQuAD 2.0) also an answerability logit [B]
("answerable_logits") from the [CLS] vector and the start-probability-weighted
sequence vector, through dense(512, GELU) -> dense(1), as the original's
qa_tasks.py (answerable_uses_start_logits); with
answerable_uses_start_logits=False, dense(1) of the [CLS] vector alone.

Loss (qa_tasks.py): (CE(start) + CE(end)) / 2, plus 0.5 x sigmoid CE of the
answerability logit, summed over the batch (tasks/losses.py span_loss).

Serving:
  text: answer_text (string [B]), answer_start, answer_end (int64 [B], bytes
        into the context), answer_score, no_answer_score, null_odds (float [B]),
        has_answer (bool [B])
  ids:  start_logits and end_logits [B, L] (independent) or the joint beam
        start_top_log_probs, start_top_index [B, K], end_top_log_probs,
        end_top_index [B, K, K]; answerable_logits [B] (2.0);
        answer_start_index, answer_end_index (int32 [B]), answer_score,
        no_answer_score, null_odds, has_answer
  The span follows the trained variant (graph.span_outputs,
  graph.beam_span_outputs) and the null odds the recorded null rule
  (graph.null_outputs; has_answer: null_odds <= the rule's threshold).
  The text signature reads a long context in windows, one every doc_stride
  pieces (graph.doc_windows, as tasks/squad.py's featurize), and answers from
  all of them as tasks/squad.py decodes a question's windows: the best span
  starting at a piece its window has the most context for, the lowest
  no-answer score; truncated: the question was cut.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from keras import ops

from electra_tf.core.errors import ConfigError, InputError
from electra_tf.modeling.heads import gather_positions
from electra_tf.modeling.layers import get_activation
from electra_tf.tasks import losses
from electra_tf.tasks.heads import span_record
from electra_tf.tasks.heads.base import Head, HeadConfig, ServingOptions, dense_names

SPAN_HEADS = ("independent", "joint")  # the variants (`span_head`)
# Added to the span logits of positions that cannot start or end an answer.
MASK_LOGIT = -10000.0
# The joint head's raw outputs (in place of end_logits).
JOINT_OUTPUTS = ("start_logits", "start_top_log_probs", "start_top_index",
                 "end_top_log_probs", "end_top_index")
# The original's answerability classifier under task_specific/<task>/ (SpanHead.tf1_layers).
_TF1_ANSWERABLE = {"answerable_hidden": ("dense_2",), "answerable_output": ("dense_3",)}


@dataclasses.dataclass(frozen=True)
class SpanConfig(HeadConfig):
    answerable: bool = False  # the answerability classifier (SQuAD 2.0)
    span_head: str = "joint"  # one of SPAN_HEADS
    beam_size: int = 20  # the joint head's beam (the original's beam_size)
    # The answerability classifier reads [CLS] and the start-probability-weighted
    # sequence through dense(512, GELU) (the original's default); False: dense(1) of
    # [CLS] alone, as its answerable_uses_start_logits=False.
    answerable_uses_start_logits: bool = True

    def __post_init__(self):
        if self.span_head not in SPAN_HEADS:
            raise ValueError(f"span_head must be one of {SPAN_HEADS}, got {self.span_head!r}")
        if self.beam_size < 1:
            raise ValueError(f"beam_size must be >= 1, got {self.beam_size}")
        if not isinstance(self.answerable_uses_start_logits, bool):
            raise ValueError("answerable_uses_start_logits must be true or false, got "
                             f"{self.answerable_uses_start_logits!r}")

    def head_options(self) -> dict:
        options = {"span_head": self.span_head, "beam_size": self.beam_size}
        if not self.answerable_uses_start_logits:  # (recorded only where it is not the default)
            options["answerable_uses_start_logits"] = False
        return options


@dataclasses.dataclass(frozen=True)
class SpanServing(ServingOptions):
    answerable: bool = False  # an answerability logit (SQuAD 2.0, as electra_tf trains it)
    # SQuAD 2.0 (with or without that logit): has_answer also needs null_odds <= the
    # threshold. Without the logit (a transformers or the original's classifier-less
    # model) the null rule is "combined" of start + end at [CLS].
    v2: bool = False
    span_head: str = "independent"  # the trained variant ("joint": a beam)
    max_query_length: int = 64
    doc_stride: int = 128  # the text signature's windows over a long context
    max_answer_length: int = 30
    null_rule: str = "combined"  # SQuAD 2.0: "answerable" or "combined" (tasks/squad.py)
    no_answer_threshold: float = 0.0  # SQuAD 2.0: has_answer when null_odds <= it
    answerable_weight: float = 0.5  # the "combined" rule's weight of the answerable logit


class SpanHead(Head):
    kind: ClassVar[str] = "squad"
    Config = SpanConfig
    ServingOptions = SpanServing
    hf_architecture = "ElectraForQuestionAnswering"
    hf_modules = {"task_specific/output": "qa_outputs"}
    hf_output_weight = "qa_outputs.weight"
    hf_labelled = False  # start and end, no labels
    model_fills = {"start_logits": MASK_LOGIT, "end_logits": MASK_LOGIT}

    def __init__(self, config: SpanConfig, num_labels: int, hidden_size: int, **kwargs):
        super().__init__(config, num_labels, hidden_size, **kwargs)
        self.answerable, self.span_head = config.answerable, config.span_head
        self.beam_size = config.beam_size
        self.joint = config.span_head == "joint"
        self.regression = False
        # === Layers ===
        if self.joint:  # the original's joint_prediction layers
            self.start_dense = self.dense(1, "start_output")
            self.qa_hidden = self.dense(512, "qa_hidden", float32=False)
            self.qa_logits = self.dense(1, "qa_logits")
        else:
            self.output_dense = self.dense(2, "output")
        self.uses_start_logits = config.answerable_uses_start_logits
        if config.answerable:
            if self.uses_start_logits:
                self.answerable_dense = self.dense(512, "answerable_hidden", float32=False,
                                                   fresh=True)
            self.answerable_output = self.dense(1, "answerable_output", fresh=True)

    def build(self, sequence_shape):
        self.dropout.build(sequence_shape)
        if self.joint:
            self.start_dense.build((None, None, self.hidden_size))
            self.qa_hidden.build((None, None, 2 * self.hidden_size))
            self.qa_logits.build((None, None, 512))
        else:
            self.output_dense.build((None, None, self.hidden_size))
        if self.answerable and self.uses_start_logits:
            self.answerable_dense.build((None, 2 * self.hidden_size))
            self.answerable_output.build((None, 512))
        elif self.answerable:
            self.answerable_output.build((None, self.hidden_size))
        self.built = True

    def call(self, sequence_output, input_mask, segment_ids=None, training=False, seed=None,
             start_positions=None):
        """start_positions int [B]: the gold starts, which the joint head needs in training."""
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
        if self.answerable and not self.uses_start_logits:  # dense(1) of [CLS]
            outputs["answerable_logits"] = ops.squeeze(
                self.answerable_output(sequence_output[:, 0]), -1)
        elif self.answerable:
            start_p = ops.softmax(start, axis=-1)
            start_vec = ops.einsum("bl,blh->bh", start_p,
                                   ops.cast(sequence_output, "float32"))
            rep = ops.concatenate([ops.cast(sequence_output[:, 0], "float32"), start_vec], -1)
            hidden = get_activation("gelu")(  # the original's modeling.gelu, whatever
                self.answerable_dense(ops.cast(rep, self.compute_dtype)))  # hidden_act
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

    # === Options, loss, record ===
    @classmethod
    def learns_labels(cls, config) -> bool:
        return False

    @classmethod
    def loss(cls, config, outputs, labels, answerable_weight: float = losses.ANSWERABLE_WEIGHT):
        """The span loss; SQuAD 2.0's answerability loss weighs `answerable_weight` (the
        task's loss_options: the original's answerable_weight)."""
        return losses.span_loss(outputs["start_logits"], outputs["end_logits"],
                                labels["start_positions"], labels["end_positions"],
                                outputs.get("answerable_logits"), labels.get("is_impossible"),
                                labels.get(losses.EXAMPLE_WEIGHT), answerable_weight)

    @classmethod
    def loss_count(cls, config, labels):
        return losses.example_count(labels, "start_positions")

    @classmethod
    def record_lacks(cls, value) -> list[str]:
        """The variant (never read as a default) and SQuAD 2.0's null rule fields
        (span_record.py: read without Keras)."""
        return span_record.record_lacks(value)

    @classmethod
    def as_recorded(cls, record, config, finetuning):
        """The folder's span head (an evaluation needs no --joint_prediction to match:
        transformers' and many original models have the independent one). A model
        without an answerability classifier (imported from transformers, the
        original's answerable_classifier=False, or trained on SQuAD 1.1) evaluated on
        SQuAD 2.0: without one (answerable_classifier=False), by the folder's null rule
        and threshold (unless the run asks for the combined rule itself), not with a
        random classifier. The
        run's --max_query_length, --doc_stride, --n_best_size and --max_answer_length
        left at their defaults are the folder's.

        Raises:
          ConfigError: that with the joint head, which has no end logit at [CLS] for
            the combined rule.
        """
        had = record.head_config
        changes = {}
        if config.span_head != had.span_head:
            config = dataclasses.replace(config, span_head=had.span_head)
            changes["joint_prediction"] = had.span_head == "joint"
        if record.answerable and \
                config.answerable_uses_start_logits != had.answerable_uses_start_logits:
            config = dataclasses.replace(
                config, answerable_uses_start_logits=had.answerable_uses_start_logits)
            changes["answerable_uses_start_logits"] = had.answerable_uses_start_logits
        # Its windows and decoding, as its own evaluation read them (and its export
        # serves them), where the run leaves them at their defaults.
        for name, default in span_record.WINDOW_DEFAULTS.items():
            if name == "n_best_size" and had.span_head == "joint":
                continue  # (the joint head decodes its beam: it had been named as taken)
            recorded = record.finetuning.get(name, default)
            if getattr(finetuning, name) == default and recorded != default:
                changes[name] = recorded
        if not config.answerable or record.answerable:
            return config, changes
        if config.span_head == "joint":
            raise ConfigError(
                f"{record.model_dir} holds a joint-head model without an answerability "
                "classifier (trained on SQuAD 1.1 or MRQA): SQuAD 2.0's no-answer score "
                "needs that classifier, or the independent head's end logit at [CLS], and "
                f"it has neither; evaluate it as {record.task}")
        changes["answerable_classifier"] = False
        if finetuning.squad_null_rule != "combined":  # the run's default rule: the folder's
            from electra_tf.core.config import FinetuningConfig

            own = record.finetuning
            if own.get("squad_null_rule") == "combined":  # (a transformers import's)
                changes.update(squad_null_rule="combined",
                               no_answer_threshold=record.no_answer_threshold)
            elif finetuning.qa_na_threshold == FinetuningConfig.qa_na_threshold and \
                    own.get("qa_na_threshold", FinetuningConfig.qa_na_threshold) \
                    != FinetuningConfig.qa_na_threshold:
                changes["qa_na_threshold"] = own["qa_na_threshold"]
        return dataclasses.replace(config, answerable=False), changes

    @classmethod
    def continues(cls, had, want) -> str | None:
        if had.span_head != want.span_head:
            return (f"the {had.span_head} span head; pass "
                    f"--joint_prediction={str(had.span_head == 'joint').lower()}")
        if had.answerable and want.answerable and \
                had.answerable_uses_start_logits != want.answerable_uses_start_logits:
            flag = str(had.answerable_uses_start_logits).lower()
            return (f"the answerability classifier of answerable_uses_start_logits={flag}; "
                    f"pass --answerable_uses_start_logits={flag}")
        return None

    # === Names ===
    @classmethod
    def tf1_layers(cls, config) -> dict:
        """qa_tasks.py. With joint_prediction (its default): dense(1) start logits, then
        qa_hidden (dense(512, gelu) of concat(h_start, h_end)) and dense(1) end logits;
        without: dense(1) start, dense(1) end. The answerability classifier
        (answerable_uses_start_logits, on by default for every QA task): dense(512, gelu),
        then dense(1), built after the span layers; without start logits dense(1) alone."""
        if config.span_head == "joint":
            layers = {"start_output": ("dense",), "qa_hidden": ("qa_hidden",),
                      "qa_logits": ("dense_1",)}
        else:
            layers = {"output": ("dense", "dense_1")}
        if config.answerable and config.answerable_uses_start_logits:
            layers.update(_TF1_ANSWERABLE)
        elif config.answerable:
            layers["answerable_output"] = _TF1_ANSWERABLE["answerable_hidden"]  # dense_2
        return layers

    @classmethod
    def tf1_variant(cls, config, present):
        """SQuAD 2.0 trained with the original's answerable_classifier=False: no
        dense_2/dense_3. qa_metrics.py then scores no-answer BERT's way, null odds =
        min over windows of start[0] + end[0], minus the best span's start + end
        logits, against qa_na_threshold: the "combined" rule without an answerability
        logit, at the original's threshold.

        A one-layer classifier (dense_2 alone): the original's
        answerable_uses_start_logits=False, dense(1) of [CLS].

        Raises:
          ValueError: no classifier with the joint head (whose null score the original
            reads from the [CLS] start logit against beam log-probabilities).
        """
        if not config.answerable:
            return config, {}
        if "dense_2" in present and "dense_3" not in present:
            return (dataclasses.replace(config, answerable_uses_start_logits=False),
                    {"answerable_uses_start_logits": False})
        if "dense_2" in present:
            return config, {}
        if config.span_head == "joint":
            raise ValueError("the head has no answerability classifier (the original's "
                             "answerable_classifier=False) and the joint span head, whose "
                             "no-answer score the original reads from the [CLS] start logit "
                             "against the beam's log-probabilities: a rule electra_tf does "
                             "not have")
        from electra_tf.core.config import FinetuningConfig

        return (dataclasses.replace(config, answerable=False),
                {"answerable_classifier": False, "squad_null_rule": "combined",
                 "no_answer_threshold": FinetuningConfig.qa_na_threshold})

    @classmethod
    def tf1_unread(cls, config) -> dict:
        """The original builds the answerability classifier for every QA task; a head
        without `answerable` never reads it."""
        return {} if config.answerable else dict(_TF1_ANSWERABLE)

    @classmethod
    def tf1_width(cls, config, num_labels: int) -> int:
        return 1  # dense: the start logit

    @classmethod
    def tf1_adjust(cls, arrays: dict) -> list[str]:
        """The original's answerability logit is that the question is impossible (trained
        against is_impossible; "" above qa_na_threshold), electra_tf's that it is
        answerable (tasks/losses.py): its last layer is negated. Copied as it was, every
        no-answer decision of a converted SQuAD 2.0 model had been the wrong way round."""
        changed = []
        for leaf in ("kernel", "bias"):
            name = f"task_specific/answerable_output/{leaf}"
            if name in arrays:
                arrays[name] = -arrays[name]
                changed.append(f"{name}: negated (the original's logit is that the question "
                               "is impossible, electra_tf's that it is answerable)")
        return changed

    def original_variables(self) -> dict:
        if self.joint:
            out = {**dense_names("task_specific/start_output", self.start_dense),
                   **dense_names("task_specific/qa_hidden", self.qa_hidden),
                   **dense_names("task_specific/qa_logits", self.qa_logits)}
        else:
            out = dense_names("task_specific/output", self.output_dense)
        if self.answerable and self.uses_start_logits:
            out.update(dense_names("task_specific/answerable_hidden", self.answerable_dense))
        if self.answerable:
            out.update(dense_names("task_specific/answerable_output", self.answerable_output))
        return out

    @classmethod
    def hf_detect(cls, keys) -> bool:
        return "qa_outputs.weight" in keys

    @classmethod
    def hf_import_config(cls, width: int) -> SpanConfig:
        """transformers' QA head: one dense(2), no answerability classifier."""
        if width != 2:
            raise ValueError(f"qa_outputs has {width} outputs, not 2")
        return SpanConfig(span_head="independent")

    @classmethod
    def hf_default_task(cls, labels) -> str:
        return "squad_v1"

    @classmethod
    def hf_head_options(cls, config) -> dict:
        """transformers' QA head has no beam: its folders record the variant alone."""
        return {"span_head": config.span_head}

    @classmethod
    def hf_finetuning_options(cls, config, task_name: str, labels) -> dict:
        # squad_v2 answers "" by the start + end logits at [CLS]: the combined rule.
        return {"joint_prediction": False, "squad_null_rule": "combined",
                "no_answer_threshold": 0.0}

    @classmethod
    def hf_export_check(cls, config, model_dir: str) -> None:
        if config.span_head == "joint" or config.answerable:
            what = ("the joint span head" if config.span_head == "joint"
                    else "an answerability classifier")
            raise ValueError(
                f"{model_dir} has {what}, which transformers' ElectraForQuestionAnswering (one "
                "dense layer for start and end logits) cannot hold; fine-tune with "
                "--joint_prediction=false on squad_v1 (on squad_v2 also with "
                "--answerable_classifier=false) to export to transformers")

    @classmethod
    def hf_export_note(cls, record) -> str | None:
        """A SQuAD 2.0 model (without an answerability classifier: hf_export_check)
        answers "" by its null rule, at its threshold; a run's windows and answer
        length other than the original's; transformers' model holds the logits alone."""
        from electra_tf.tasks.squad import VERSIONS, null_options

        notes = []
        if VERSIONS.get(record.task) == "2.0":
            threshold = null_options(record.finetuning)["no_answer_threshold"]
            notes.append(
                f"{record.model_dir} answers \"\" where start + end logits at [CLS], less "
                f"the best span's, exceed {threshold:g} (its null rule without an "
                "answerability classifier); transformers' ElectraForQuestionAnswering "
                "holds the logits only: apply that threshold to them yourself")
        # transformers' question-answering pipeline takes them (its own names)
        pipeline = {"max_query_length": "max_question_len", "doc_stride": "doc_stride",
                    "max_answer_length": "max_answer_len"}
        own = {name: record.finetuning.get(name, default)
               for name, default in span_record.WINDOW_DEFAULTS.items() if name in pipeline}
        own = {k: v for k, v in own.items() if v != span_record.WINDOW_DEFAULTS[k]}
        if own:
            notes.append(
                f"{record.model_dir} was fine-tuned with "
                + " ".join(f"--{k}={v}" for k, v in own.items())
                + ", which transformers' config does not hold: give its question-answering "
                "pipeline " + ", ".join(f"{pipeline[k]}={v}" for k, v in own.items()))
        return "; ".join(notes) or None

    @classmethod
    def hf_export_config(cls, config, values: dict, record) -> dict:
        labels = ["LABEL_0", "LABEL_1"]
        values.update(num_labels=2, id2label={str(i): n for i, n in enumerate(labels)},
                      label2id={n: i for i, n in enumerate(labels)})
        return values

    # === Serving ===
    @classmethod
    def serving_options(cls, record, checkpoint: str, max_query_length: int = 0,
                        max_answer_length: int = 0, doc_stride: int = 0, **flags):
        """The recorded variant, and SQuAD 2.0's null rule and its threshold
        (squad.null_options: qa_na_threshold for the "answerable" rule,
        no_answer_threshold for "combined"); the question limit, answer length and
        windows given, or (0) the fine-tuning run's (64, 30 and 128 where the record
        has none: the original's, which every run took before they were flags).

        Raises:
          InputError: the combined rule recorded with the joint head.
        """
        from electra_tf.tasks.squad import VERSIONS, null_options

        given = {"max_query_length": max_query_length, "max_answer_length": max_answer_length,
                 "doc_stride": doc_stride}
        max_query_length, max_answer_length, doc_stride = (
            value or record.finetuning.get(name, span_record.WINDOW_DEFAULTS[name])
            for name, value in given.items())
        null = null_options(record.finetuning)
        span_head = record.head_options["span_head"]
        if record.answerable and span_head == "joint" and null["null_odds_from"] == "combined":
            raise InputError(f"--checkpoint {checkpoint}: the combined null rule needs the "
                             "independent head's end logits, but the model has the joint head")
        return SpanServing(answerable=record.answerable, span_head=span_head,
                           v2=record.answerable or VERSIONS.get(record.task) == "2.0",
                           max_query_length=max_query_length, doc_stride=doc_stride,
                           max_answer_length=max_answer_length,
                           null_rule=null["null_odds_from"],
                           no_answer_threshold=null["no_answer_threshold"])

    @classmethod
    def text_inputs(cls, pair: bool) -> tuple[str, ...]:
        return ("question", "context")

    @classmethod
    def min_seq_length(cls, pair: bool = True) -> int:
        """[CLS] question [SEP] context [SEP] with a piece of each (fine-tuning's
        featurize reads it too)."""
        return 5

    @classmethod
    def min_length(cls, spec) -> int:
        """The joint head's beam needs beam_size positions."""
        return spec.model.head.min_positions()

    def min_positions(self) -> int:
        """The joint head's beam needs beam_size positions."""
        return int(self.beam_size) if self.joint else 1

    @classmethod
    def pack_limit(cls, spec) -> int | None:
        """The question keeps at most max_query_length pieces (squad.question_limit)."""
        from electra_tf.tasks.squad import question_limit

        return question_limit(spec.max_query_length, spec.max_seq_length)

    @classmethod
    def export_info(cls, spec) -> dict:
        info = {"regression": False, "span_head": spec.span_head,
                "max_answer_length": spec.max_answer_length,
                "max_query_length": spec.max_query_length,
                "question_limit": cls.pack_limit(spec), "doc_stride": spec.doc_stride}
        if spec.v2:
            info.update(null_rule=cls._null_rule(spec),
                        no_answer_threshold=spec.no_answer_threshold)
        return info

    @classmethod
    def _null_rule(cls, spec) -> str:
        """The recorded rule with an answerability logit; without one the combined rule's
        start + end at [CLS] (the joint head has no end logit there: "none")."""
        if spec.answerable:
            return spec.null_rule
        return "none" if spec.span_head == "joint" else "combined"

    @classmethod
    def _best_span(cls, spec, out, mask, type_ids, graph, start_ok=None):
        """The best span of each row by the model's head (graph.span_outputs,
        graph.beam_span_outputs; `start_ok`: the starts a window may take)."""
        if spec.span_head == "joint":
            return graph.beam_span_outputs(*(out[k] for k in JOINT_OUTPUTS[1:]), mask,
                                           type_ids, spec.max_answer_length, start_ok)
        return graph.span_outputs(out["start_logits"], out["end_logits"], mask, type_ids,
                                  spec.max_answer_length, start_ok)

    @classmethod
    def _null(cls, spec, out, answer_score, graph):
        """Each row's (no_answer_score, null_odds) by the model's null rule."""
        return graph.null_outputs(
            cls._null_rule(spec), answer_score,
            out.get("answerable_logits") if spec.answerable else None,
            out["start_logits"], out.get("end_logits"), spec.answerable_weight)

    @classmethod
    def _has_answer(cls, spec, has_span, null_odds):
        if spec.v2:
            return has_span & (null_odds <= spec.no_answer_threshold)
        return has_span

    @classmethod
    def ids_outputs(cls, spec, out, word_ids, mask, type_ids, graph) -> dict:
        """One window per row, as sent."""
        span = cls._best_span(spec, out, mask, type_ids, graph)
        span["no_answer_score"], span["null_odds"] = cls._null(spec, out, span["answer_score"],
                                                               graph)
        span["has_answer"] = cls._has_answer(spec, span["has_span"], span["null_odds"])
        raw = JOINT_OUTPUTS if spec.span_head == "joint" else ("start_logits", "end_logits")
        result = {**{k: out[k] for k in raw},
                  **{k: v for k, v in span.items() if k != "has_span"}}
        if spec.answerable:
            result["answerable_logits"] = out["answerable_logits"]
        return result

    @classmethod
    def pack_texts(cls, spec, packer, tokenized, graph) -> dict:
        """The question (cut to `pack_limit` pieces) with each window of its context,
        one model row per window (graph.doc_windows: a window every doc_stride pieces,
        as fine-tuning's featurize); "truncated" [B]: the question was cut."""
        import tensorflow as tf  # the serving graph's (this runs inside it)

        (_, question, _, _), (_, context, _, _) = tokenized
        limit = cls.pack_limit(spec)
        kept = tf.minimum(question.row_lengths(), limit)
        windows = graph.doc_windows(kept, context.row_lengths(), spec.max_seq_length,
                                    spec.doc_stride)
        row = windows["row"]
        packed = packer.pack(
            graph.row_slices(question, row, tf.zeros_like(row), tf.gather(kept, row)),
            graph.row_slices(context, row, windows["start"], windows["length"]),
            limit_a=tf.constant(limit, tf.int64))
        offset = packed["len_a"] + 2  # [CLS] question [SEP]
        return {**packed, "windows": windows, "context_offset": offset,
                "max_context": graph.window_max_context(windows, offset, packed["width"]),
                "truncated": question.row_lengths() > kept}

    @classmethod
    def text_outputs(cls, spec, packer, tokenized, packed, out, graph) -> dict:
        """The question is the first text, the context the second: each request's answer
        is the best span of its windows (a window's span starting at a piece it has the
        most context for), its no-answer score the lowest of its windows', as
        fine-tuning's evaluation decodes a question's windows (tasks/squad.py)."""
        import tensorflow as tf  # the serving graph's (this runs inside it)

        _, (norm_b, _, s_b, e_b) = tokenized
        windows, offset = packed["windows"], packed["context_offset"]
        span = cls._best_span(spec, out, packed["input_mask"], packed["input_type_ids"],
                              graph, start_ok=packed["max_context"])
        no_answer, _ = cls._null(spec, out, span["answer_score"], graph)
        batch = tf.shape(norm_b, out_type=tf.int64)[0]
        best = graph.best_of_rows(span["answer_score"], windows["row"], batch)
        has_span = tf.gather(span["has_span"], best)
        answer_score = tf.gather(span["answer_score"], best)
        no_answer = tf.math.unsorted_segment_min(no_answer, windows["row"], batch)
        null_odds = no_answer if cls._null_rule(spec) == "answerable" else no_answer - answer_score
        # An answer ends at the end of its last piece's character (never inside one).
        window = {k: tf.gather(v, best) if k in ("row", "start", "length") else v
                  for k, v in windows.items()}
        s_byte = graph.window_values(s_b, window, tf.gather(offset, best),
                                     tf.gather(span["answer_start_index"], best))
        e_byte = graph.window_values(graph.char_ends(s_b, e_b), window, tf.gather(offset, best),
                                     tf.gather(span["answer_end_index"], best))
        s_byte = tf.where(has_span, s_byte, 0)
        e_byte = tf.where(has_span, e_byte, 0)
        return {"answer_text": graph.substr_bytes(norm_b, s_byte, e_byte),
                "answer_start": s_byte, "answer_end": e_byte, "answer_score": answer_score,
                "no_answer_score": no_answer, "null_odds": null_odds,
                "has_answer": cls._has_answer(spec, has_span, null_odds)}
