"""WordPiece tokenization: one wrapper around tensorflow-text's FastBertTokenizer.

The same `Tokenizer` serves the data builder (Python lists in, ids out), the
tf.data pipelines (string tensors in, ragged ids out, inside the graph) and the
TF Serving export (it is a `tf.Module`, so it can be tracked and saved).

Normalization follows the original BERT/ELECTRA options:

| do_lower_case | strip_accents | what happens before WordPiece            |
|---------------|---------------|-------------------------------------------|
| True          | None or True  | lower-case, NFD, drop accents (BERT uncased) |
| True          | False         | Unicode case folding only                 |
| False         | None or False | nothing (cased)                           |
| False         | True          | NFD, drop accents, keep case              |

Invalid UTF-8 is first replaced with U+FFFD, so no input crashes the graph;
CJK characters are split one per token as in BERT.
"""

from __future__ import annotations

import os
from typing import Iterable, Sequence

import tensorflow as tf
import tensorflow_text as tf_text

# The vocab file and its special tokens need no TensorFlow (vocab.py);
# they are re-exported here, where most callers look for them.
from electra_tf.text.vocab import (  # noqa: F401
    BERT_RESERVED_TOKENS,
    CLS,
    MASK,
    PAD,
    SEP,
    SPECIAL_TOKENS,
    UNK,
    check_word_pieces,
    load_vocab,
    resolve_strip_accents,
    trie_tokens,
)


class Tokenizer(tf.Module):
    """BERT WordPiece tokenizer for ELECTRA, usable eagerly, in tf.data and in exports.

    Args:
      vocab_file: path of a BERT-style vocab.txt (e.g. the 30,522-token uncased file).
      do_lower_case: lower-case the input (the original's do_lower_case).
      strip_accents: strip accents; None follows do_lower_case, as BERT does.
      max_bytes_per_word: longer words become [UNK].
    """

    def __init__(self, vocab_file: str, do_lower_case: bool = True,
                 strip_accents: bool | None = None, max_bytes_per_word: int = 100,
                 name: str = "tokenizer"):
        super().__init__(name=name)
        self.vocab_file = os.fspath(vocab_file)
        self.vocab = load_vocab(self.vocab_file)
        check_word_pieces(self.vocab, self.vocab_file)  # before tensorflow-text's traceback
        self.do_lower_case = bool(do_lower_case)
        self.strip_accents = resolve_strip_accents(do_lower_case, strip_accents)
        self.max_bytes_per_word = max_bytes_per_word
        self.token_to_id = {t: i for i, t in enumerate(self.vocab)}
        self.pad_id = self.token_to_id[PAD]
        self.unk_id = self.token_to_id[UNK]
        self.cls_id = self.token_to_id[CLS]
        self.sep_id = self.token_to_id[SEP]
        self.mask_id = self.token_to_id[MASK]
        # FastBertTokenizer's own normalizer does BERT's uncased form (lower-case,
        # NFD, accents stripped) with compatibility decomposition and case folding on
        # top: "…" becomes "...", fullwidth "Ｈｅｌｌｏ" "hello", "ß" "ss" and "ﬁ" "fi",
        # where BERT's tokenizer (and transformers') keeps each whole, mostly [UNK].
        # Other modes pre-normalize.
        self._fast_lower = self.do_lower_case and self.strip_accents
        self._fast = tf_text.FastBertTokenizer(
            vocab=trie_tokens(self.vocab), token_out_type=tf.int64, unknown_token=UNK,
            max_bytes_per_word=max_bytes_per_word,
            lower_case_nfd_strip_accents=self._fast_lower)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def normalize(self, texts: tf.Tensor) -> tf.Tensor:
        """Repairs invalid UTF-8 and applies the pre-WordPiece normalization."""
        return pre_normalize(texts, self.do_lower_case, self.strip_accents)

    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Strings [batch] -> int64 ragged ids [batch, (tokens)]; no [CLS]/[SEP]."""
        return self._fast.tokenize(self.normalize(tf.convert_to_tensor(texts, tf.string)))

    def tokenize_with_offsets(self, texts: tf.Tensor):
        """Like tokenize, plus byte offsets [batch, (tokens)] into the normalized text.

        Works eagerly and inside a tf.function: the SQuAD featurizer and the
        TF Serving export's in-graph tokenization (electra_tf/serving/graph.py) use it.

        Returns:
          (ids, starts, ends, normalized_texts): int64 ragged ids, starts and
          ends (end exclusive) and the string tensor the offsets index. It
          equals the input wherever that was valid UTF-8 and the mode is
          uncased or cased-without-accent-stripping.
        """
        normalized = self.normalize(tf.convert_to_tensor(texts, tf.string))
        ids, starts, ends = self._fast.tokenize_with_offsets(normalized)
        return ids, starts, ends, normalized

    def encode(self, texts: Sequence[str | bytes]) -> list[list[int]]:
        """Python convenience: a list of strings -> a list of id lists."""
        if not texts:
            return []
        ragged = self.tokenize(tf.constant(list(texts), dtype=tf.string))
        return split_ragged(ragged)

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        return [self.vocab[int(i)] for i in ids]


def pre_normalize(texts: tf.Tensor, do_lower_case: bool, strip_accents: bool) -> tf.Tensor:
    """What runs before FastBertTokenizer (and before vocab learning).

    Invalid UTF-8 becomes U+FFFD. BERT's uncased mode (lower-case and strip
    accents) is left to FastBertTokenizer's own normalizer; the other modes
    are done here with TF-Text ops that TF Serving 2.12+ links.

    Args:
      texts: string tensor of any shape.
    Returns:
      A string tensor of the same shape.
    """
    texts = tf.strings.unicode_transcode(
        texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
    if do_lower_case and strip_accents:
        return texts
    if do_lower_case:
        return tf_text.case_fold_utf8(texts)
    if strip_accents:
        texts = tf_text.normalize_utf8(texts, "NFD")
        return tf.strings.regex_replace(texts, r"\p{Mn}", "")
    return texts


def split_ragged(ragged: tf.RaggedTensor) -> list[list[int]]:
    """A 2-D ragged tensor -> Python lists, without a slow to_list() walk."""
    values = ragged.flat_values.numpy().tolist()
    splits = ragged.row_splits.numpy().tolist()
    return [values[a:b] for a, b in zip(splits[:-1], splits[1:])]
