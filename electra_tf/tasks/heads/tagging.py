"""The token_classification head: a tag per token (NER, chunking, your own tags).

Layers: dropout, then dense(num_labels) ("output") at every token: "tag_logits"
[B, L, T]. Loss (the original's tagging_tasks.py): the token cross-entropy
times tag_weights (1 on the first wordpiece of each word a window owns),
summed over the batch's tokens; `loss_count` is the weighted tokens.

Serving:
  text: wordpiece_tokens, wordpiece_labels (string [B, L]), wordpiece_scores
        (float [B, L], max tag probability), wordpiece_start, wordpiece_end
        (int64 [B, L] bytes), word_texts, word_labels (string [B, W]),
        word_scores (float [B, W]), word_start, word_end (int64 [B, W]),
        num_words (int32 [B])
  ids:  tag_logits, tag_probabilities [B, L, T], tag_ids (int32),
        tag_labels (string), tag_scores [B, L]
"""

from __future__ import annotations

from typing import ClassVar

from keras import ops

from electra_tf.tasks import losses
from electra_tf.tasks.heads.base import Head, dense_names, pad_window

# The text signature's per-position outputs and their value at padding.
_TEXT_FILLS = {"wordpiece_tokens": "", "wordpiece_labels": "", "wordpiece_scores": 0.0,
               "wordpiece_start": -1, "wordpiece_end": -1}


class TokenClassificationHead(Head):
    kind: ClassVar[str] = "token_classification"
    hf_architecture = "ElectraForTokenClassification"
    hf_modules = {"task_specific/output": "classifier"}
    hf_output_weight = "classifier.weight"
    model_fills = {"tag_logits": 0.0}
    text_fills = _TEXT_FILLS

    def __init__(self, config, num_labels: int, hidden_size: int, **kwargs):
        super().__init__(config, num_labels, hidden_size, **kwargs)
        # === Layers ===
        self.output_dense = self.dense(num_labels, "output")

    def build(self, sequence_shape):
        self.dropout.build(sequence_shape)
        self.output_dense.build((None, None, self.hidden_size))
        self.built = True

    def call(self, sequence_output, input_mask, segment_ids=None, training=False, seed=None,
             start_positions=None):
        x = self.dropout(sequence_output, training=training, seed=seed)
        return {"tag_logits": self.output_dense(x)}

    # === Loss ===
    @classmethod
    def loss(cls, config, outputs, labels):
        return losses.tagging_loss(outputs["tag_logits"], labels["tag_ids"],
                                   labels["tag_weights"], labels.get(losses.EXAMPLE_WEIGHT))

    @classmethod
    def loss_count(cls, config, labels):
        """The weighted tokens (at least 1e-6)."""
        return ops.sum(losses.token_weights(labels["tag_weights"],
                                            labels.get(losses.EXAMPLE_WEIGHT))) + 1e-6

    # === Names ===
    @classmethod
    def tf1_layers(cls, config) -> dict:
        """tagging_tasks.py: dense(num_tags) at every token."""
        return {"output": ("dense",)}

    @classmethod
    def tf1_adjust(cls, arrays: dict) -> list[str]:
        """The original's tagger reads segment ids 1 (tagging_tasks.py), electra_tf's 0: the
        token type table's row 0 becomes its row 1."""
        import numpy as np

        name = "electra/embeddings/token_type_embeddings"
        types = np.array(arrays[name])
        types[0] = types[1]
        arrays[name] = types
        return [f"{name}: row 0 is the checkpoint's row 1 (the original's tagger reads "
                "segment ids 1, electra_tf's 0)"]

    def original_variables(self) -> dict:
        return dense_names("task_specific/output", self.output_dense)

    @classmethod
    def hf_detect(cls, keys) -> bool:
        return "classifier.weight" in keys

    @classmethod
    def hf_import_config(cls, width: int):
        return cls.Config()

    @classmethod
    def hf_default_task(cls, labels) -> str:
        """ner where the labels are BIO(ES) tags, else tagging (your own tags)."""
        import re

        tag = re.compile(r"^(O|[BIES]-\S+)$")
        return "ner" if all(tag.match(t) for t in labels) else "tagging"

    @classmethod
    def hf_finetuning_options(cls, config, task_name: str, labels) -> dict:
        if task_name in ("ner", "chunking") and any(t[:2] in ("E-", "S-") for t in labels):
            return {"tagging_scheme": "BIOES"}
        return {}

    @classmethod
    def hf_export_config(cls, config, values: dict, record) -> dict:
        labels = list(record.label_names) or ["LABEL_0"]
        values.update(num_labels=len(labels), id2label={str(i): n for i, n in enumerate(labels)},
                      label2id={n: i for i, n in enumerate(labels)})
        return values

    # === Serving ===
    @classmethod
    def ids_outputs(cls, spec, out, word_ids, mask, type_ids, graph) -> dict:
        probs, tag_ids, labels, scores = graph.tagging_piece_outputs(
            out["tag_logits"], mask, spec.label_names)
        return {"tag_logits": out["tag_logits"], "tag_probabilities": probs, "tag_ids": tag_ids,
                "tag_labels": labels, "tag_scores": scores}

    @classmethod
    def text_outputs(cls, spec, packer, tokenized, packed, out, graph) -> dict:
        (norm_a, ids_a, s_a, e_a) = tokenized[0]
        word_ids, mask = packed["input_word_ids"], packed["input_mask"]
        width = packed["width"]
        _, _, labels, scores = graph.tagging_piece_outputs(out["tag_logits"], mask,
                                                           spec.label_names)
        result = {"wordpiece_tokens": packer.tokens(word_ids, mask),
                  "wordpiece_labels": labels, "wordpiece_scores": scores,
                  "wordpiece_start": packer.positions(s_a, packed["len_a"], width),
                  "wordpiece_end": packer.positions(graph.char_ends(s_a, e_a),
                                                    packed["len_a"], width)}
        words = graph.tagging_word_outputs(packer, norm_a, ids_a, s_a, e_a, packed["len_a"],
                                           labels, scores)
        return {**pad_window(graph, result, spec.max_seq_length, _TEXT_FILLS), **words}
