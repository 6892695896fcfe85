"""The rtd head: the pre-trained discriminator's replaced-token detection, served.

Its layers are the pre-training discriminator's (modeling/models.py,
ElectraDiscriminator's rtd_head: dense -> activation -> dense(1), the
original's discriminator_predictions) and its loss the pre-training
objective's (objectives/), so this class is never built as a fine-tuning
layer: it says how the export serves a pre-training folder (`serves_pretrained`).

Serving:
  text: replaced_probabilities (float [B, L], 0 at padding), tokens (string
        [B, L]), token_start, token_end (int64 [B, L])
  ids:  rtd_logits, replaced_probabilities [B, L]
"""

from __future__ import annotations

from typing import ClassVar

from electra_tf.tasks.heads.base import Head, pad_window

_TEXT_FILLS = {"replaced_probabilities": 0.0, "tokens": "", "token_start": -1,
               "token_end": -1}


class RtdHead(Head):
    kind: ClassVar[str] = "rtd"
    serves_pretrained: ClassVar[bool] = True  # the export loads a pre-training folder
    model_fills = {"rtd_logits": 0.0}
    text_fills = _TEXT_FILLS

    def __init__(self, *args, **kwargs):
        raise TypeError("the rtd head is the pre-trained discriminator's (modeling/models.py); "
                        "fine-tuning builds no rtd head")

    @classmethod
    def check_pretrained(cls, folder: str, pretraining: dict) -> None:
        """Refuses an Electric model: its discriminator's outputs are energies, which
        give a replaced probability only with its cloze model's noise probabilities
        (the original's electric_objective adds log q and log(p / (1 - p)) to them);
        sigmoid of an energy alone is no probability of anything.

        Raises:
          InputError: naming the folder and what to serve instead.
        """
        from electra_tf.core.errors import InputError

        if pretraining.get("objective") == "electric":
            raise InputError(f"{folder} holds an Electric model (its pretraining_config.json "
                             "records objective=electric): its discriminator gives energies, "
                             "not replaced-token probabilities; serve its text scores with "
                             "--task=score")

    @classmethod
    def ids_outputs(cls, spec, out, word_ids, mask, type_ids, graph) -> dict:
        import tensorflow as tf  # the serving graph's (this runs inside it)

        logits = out["rtd_logits"]
        return {"rtd_logits": logits,
                "replaced_probabilities": tf.sigmoid(logits) * tf.cast(mask, logits.dtype)}

    @classmethod
    def text_outputs(cls, spec, packer, tokenized, packed, out, graph) -> dict:
        import tensorflow as tf

        (_, _, s_a, e_a) = tokenized[0]
        word_ids, mask, width = packed["input_word_ids"], packed["input_mask"], packed["width"]
        probs = tf.sigmoid(out["rtd_logits"]) * tf.cast(mask, tf.float32)
        result = {"replaced_probabilities": probs, "tokens": packer.tokens(word_ids, mask),
                  "token_start": packer.positions(s_a, packed["len_a"], width),
                  "token_end": packer.positions(graph.char_ends(s_a, e_a), packed["len_a"], width)}
        return pad_window(graph, result, spec.max_seq_length, _TEXT_FILLS)
