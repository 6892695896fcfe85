"""Electric's text scores: the command's scorer and the scoring export's outputs.

Electric (Clark et al. 2020b, "Pre-Training Transformers as Energy-Based Cloze
Models") gives every token an energy E(x)_t, the pre-trained discriminator's
raw output (`rtd_logits`, before the NCE correction training adds; see
objectives/electric.py): p(x_t | x_\\t) = exp(-E(x)_t) / Z(x_\\t). A sequence's
score is its pseudo-log-likelihood with the partition functions left out, as
the paper scores text for re-ranking:

    score(x) = -sum_t E(x)_t     over the sentence's word pieces

([CLS], [SEP] and padding are not counted), from ONE forward pass over the
whole sequence: a masked LM needs one pass per token for its pseudo-log-
likelihood (Salazar et al. 2020). Higher is more likely. Without the partition
functions the score is not normalized for length (energies are mostly positive:
a shorter text scores higher, an empty one 0), so hypotheses of different
lengths compare as the paper's re-ranking compares them: added, with a weight
tuned on held-out data, to the recognizer's or translator's own score.

`load_scorer(model_dir)` is what `python -m electra_tf.score` runs. The
`--task=score` export's outputs (text in, a score per sequence and the
per-token energies out, with the other exports' length buckets) are the score
head's (tasks/heads/scoring.py, ScoreHead), whose energy functions this module
shares.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from electra_tf.core.errors import InputError
from electra_tf.tasks.heads.scoring import ScoreHead, sequence_scores, token_energies

__all__ = ["ElectricScorer", "Scored", "check_electric_folder", "load_scorer",
           "sequence_scores", "token_energies"]


def check_electric_folder(folder) -> None:
    """Refuses a folder (a folders.PretrainingFolder) whose discriminator was not
    trained as Electric's energy model.

    Raises:
      InputError: naming the folder and what it was pre-trained with.
    """
    ScoreHead.check_pretrained(folder.path, folder.recorded.get("pretraining", {}))


@dataclasses.dataclass
class Scored:
    """One sentence's score, its word pieces and their energies."""

    score: float
    tokens: list
    energies: list
    truncated: bool


class ElectricScorer:
    """Scores sentences with a pre-trained Electric discriminator (one pass each)."""

    def __init__(self, discriminator, tokenizer, max_seq_length: int = 128):
        self.discriminator = discriminator
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self._forward = tf.function(
            lambda ids, mask: discriminator(
                {"input_ids": ids, "input_mask": mask, "segment_ids": tf.zeros_like(ids)},
                training=False)["rtd_logits"],
            reduce_retracing=True, autograph=False)

    def pack(self, texts):
        """[CLS] pieces [SEP] per text, truncated to max_seq_length, padded to the
        longest: (ids, mask int32 [B, W], truncated bool list)."""
        tok = self.tokenizer
        rows, truncated = [], []
        for ids in tok.encode(texts):
            keep = ids[:self.max_seq_length - 2]
            truncated.append(len(keep) < len(ids))
            rows.append([tok.cls_id, *keep, tok.sep_id])
        width = max(len(r) for r in rows)
        ids = np.full((len(rows), width), tok.pad_id, np.int32)
        mask = np.zeros((len(rows), width), np.int32)
        for i, row in enumerate(rows):
            ids[i, :len(row)], mask[i, :len(row)] = row, 1
        return ids, mask, truncated

    def energies(self, ids, mask) -> np.ndarray:
        """E(x)_t [B, W] (float32) from one forward pass, 0 where not scored."""
        tok = self.tokenizer
        raw = self._forward(tf.constant(ids), tf.constant(mask))
        return token_energies(raw, ids, mask, tok.cls_id, tok.sep_id).numpy()

    def score(self, texts, batch_size: int = 32, progress=None) -> list[Scored]:
        """Each text's Scored, in order (batches of `batch_size`, one pass each);
        `progress(n)` is called with the count scored after each batch."""
        out = []
        for start in range(0, len(texts), batch_size):
            chunk = list(texts[start:start + batch_size])
            ids, mask, truncated = self.pack(chunk)
            energies = self.energies(ids, mask)
            for i in range(len(chunk)):
                n = int(mask[i].sum())
                pieces = self.tokenizer.convert_ids_to_tokens(ids[i, 1:n - 1])
                e = energies[i, 1:n - 1]
                # + 0.0: an empty text's score is 0.0, not the negated sum's -0.0
                out.append(Scored(float(-e.astype(np.float64).sum()) + 0.0, pieces,
                                  [float(x) for x in e], truncated[i]))
            if progress is not None:
                progress(len(out))
        return out


def load_scorer(model_dir: str, vocab_file: str = "", max_seq_length: int | None = None
                ) -> ElectricScorer:
    """The scorer of a pre-training model_dir trained with --objective=electric.

    max_seq_length: None (or 0) is the length its model was pre-trained at, as its
    pretraining_config.json records it (128 where it records none).

    Raises:
      InputError: missing files, a folder of another objective, a bad length.
    """
    from electra_tf.folders import PretrainingFolder
    from electra_tf.modeling.models import dtype_policy_scope

    folder = PretrainingFolder.open(model_dir, what="--model_dir")
    with dtype_policy_scope("float32"):  # (whatever policy a training run in this process left set)
        discriminator = folder.load_discriminator()
    folder.vocab()  # its own vocabulary holds the recorded tokens, even beside --vocab_file
    check_electric_folder(folder)
    positions = discriminator.config.max_position_embeddings
    max_seq_length = folder.serving_length(max_seq_length, positions)
    if not 3 <= max_seq_length <= positions:
        raise InputError(f"--max_seq_length={max_seq_length}: the model takes 3 to "
                         f"{positions} positions")
    from electra_tf.folders.files import VOCAB
    from electra_tf.folders.vocabulary import check_vocab_fits
    from electra_tf.text.tokenizer import Tokenizer

    vocab = folder.vocab(vocab_file)
    if not vocab:
        raise InputError(f"--vocab_file is required ({folder.path} holds no {VOCAB} and "
                         "records none)")
    check_vocab_fits(vocab, discriminator.config.vocab_size)
    tokenizer = Tokenizer(vocab, do_lower_case=folder.do_lower_case)
    return ElectricScorer(discriminator, tokenizer, max_seq_length)
