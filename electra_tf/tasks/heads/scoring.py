"""The score head: Electric's text scores, served from a pre-training folder.

Electric (Clark et al. 2020b) gives every token an energy E(x)_t, the
pre-trained discriminator's raw output (`rtd_logits`; objectives/electric.py):
a sequence's score is -sum_t E(x)_t over its word pieces ([CLS], [SEP] and
padding not counted), from one forward pass (serving/scoring.py has the
scoring command's scorer, which uses the same functions). Like the rtd head,
its layers are the pre-trained discriminator's, so this class is never built
as a fine-tuning layer; it serves only a folder pre-trained with
--objective=electric (`check_pretrained`).

Serving:
  text: score (float [B], -sum of the energies), token_energies (float [B, L], 0 at
        [CLS], [SEP] and padding), tokens (string [B, L]), token_start, token_end
        (int64 [B, L])
  ids:  score [B], token_energies [B, L]
"""

from __future__ import annotations

from typing import ClassVar

from electra_tf.core.errors import InputError
from electra_tf.tasks.heads.base import pad_window
from electra_tf.tasks.heads.rtd import RtdHead

_TEXT_FILLS = {"token_energies": 0.0, "tokens": "", "token_start": -1, "token_end": -1}


def token_energies(energies, word_ids, mask, cls_id: int, sep_id: int):
    """float32 [B, L]: E(x)_t at the scored tokens, 0 at [CLS], [SEP] and padding."""
    import tensorflow as tf

    scored = (tf.cast(mask, tf.float32)
              * tf.cast(tf.not_equal(word_ids, cls_id), tf.float32)
              * tf.cast(tf.not_equal(word_ids, sep_id), tf.float32))
    return tf.cast(energies, tf.float32) * scored


def sequence_scores(energies, word_ids, mask, cls_id: int, sep_id: int):
    """float32 [B]: -sum_t E(x)_t over the scored tokens."""
    return _negated_sum(token_energies(energies, word_ids, mask, cls_id, sep_id))


def _negated_sum(token_energies):
    """-sum over the last axis, 0.0 (not -0.0) for an empty text, as the score command
    prints it: negating the empty sum gives -0.0, and `0.0 - sum` did too in a traced
    graph (TensorFlow rewrites it as a negation), so the zero is chosen explicitly."""
    import tensorflow as tf

    total = tf.reduce_sum(token_energies, axis=-1)
    return tf.where(tf.equal(total, 0.0), tf.zeros_like(total), -total)


class ScoreHead(RtdHead):
    kind: ClassVar[str] = "score"
    serves_pretrained: ClassVar[bool] = True
    model_fills = {"rtd_logits": 0.0}
    text_fills = _TEXT_FILLS

    def __init__(self, *args, **kwargs):
        raise TypeError("the score head is the pre-trained Electric discriminator's "
                        "(modeling/models.py); fine-tuning builds no score head")

    @classmethod
    def check_pretrained(cls, folder: str, pretraining: dict) -> None:
        """Refuses a folder whose discriminator was not trained as Electric's energy model.

        pretraining: the "pretraining" section of the folder's pretraining_config.json.

        Raises:
          InputError: naming the folder and what it was pre-trained with.
        """
        objective = pretraining.get("objective", "")
        if objective != "electric":
            said = (f"its pretraining_config.json records objective={objective}" if objective
                    else "it records no pre-training objective")
            raise InputError(
                f"{folder} holds no Electric model ({said}); scores are the energies of a "
                "model pre-trained with --objective=electric")

    @classmethod
    def ids_outputs(cls, spec, out, word_ids, mask, type_ids, graph) -> dict:
        return cls._scores(spec, out, word_ids, mask)

    @classmethod
    def _scores(cls, spec, out, word_ids, mask) -> dict:
        tok = spec.tokenizer
        energies = token_energies(out["rtd_logits"], word_ids, mask, tok.cls_id, tok.sep_id)
        return {"score": _negated_sum(energies), "token_energies": energies}

    @classmethod
    def text_outputs(cls, spec, packer, tokenized, packed, out, graph) -> dict:
        (_, _, s_a, e_a) = tokenized[0]
        word_ids, mask, width = packed["input_word_ids"], packed["input_mask"], packed["width"]
        result = cls._scores(spec, out, word_ids, mask)
        result.update(tokens=packer.tokens(word_ids, mask),
                      token_start=packer.positions(s_a, packed["len_a"], width),
                      token_end=packer.positions(graph.char_ends(s_a, e_a), packed["len_a"],
                                                width))
        return pad_window(graph, result, spec.max_seq_length, _TEXT_FILLS)
