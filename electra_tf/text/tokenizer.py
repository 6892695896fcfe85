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

Before that, as the original's `_clean_text`: invalid UTF-8 is replaced with
U+FFFD (so no input crashes the graph), and then U+FFFD, NUL and every
character of Unicode's C categories but tab, newline and carriage return are
deleted: controls (C0, DEL, C1: "don\x92t" of cp1252 text read as Latin-1 is
"dont"), format characters (soft hyphen, zero-width space and joiners, BOM,
bidi marks: "wor\u00adld" is "world"), private use and unassigned code points.
tensorflow-text's tokenizer alone split words at them, or made them [UNK].
Offsets still index the input (`tokenize_with_offsets`). CJK characters are
split one per token as in BERT, and a word of more than MAX_CHARS_PER_WORD
characters is one [UNK] (the original's max_input_chars_per_word), whatever
its script.
"""

from __future__ import annotations

import os
from typing import Iterable, NamedTuple, Sequence

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

# The original's WordpieceTokenizer: a longer word (in characters) is one [UNK].
MAX_CHARS_PER_WORD = 200
# tensorflow-text limits a word in UTF-8 bytes: 4 bytes a character lets every word of
# MAX_CHARS_PER_WORD characters through, and `_long_words_unknown` makes longer ones [UNK].
_MAX_BYTES_PER_WORD = 4 * MAX_CHARS_PER_WORD

# What the original's _clean_text deletes: NUL, U+FFFD and _is_control's characters,
# category C* but \t, \n and \r (Cc, Cf, Co; Cs cannot be in valid UTF-8; Cn, the
# unassigned code points, are the characters of no RE2 category).
_DELETED = (r"[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F\p{Cf}\p{Co}\x{FFFD}]"
            r"|[^\p{L}\p{M}\p{N}\p{P}\p{S}\p{Z}\p{C}]")
# More than MAX_CHARS_PER_WORD characters without an ASCII space between them: a text
# may then hold a longer word (BERT's words split at more than that), and only a batch
# that holds one pays for `_long_words_unknown`.
_LONG_RUN = r"(?s).*\S{%d}.*" % (MAX_CHARS_PER_WORD + 1)
# BERT's uncased mode counts a word's characters after NFD (and accent stripping): these
# characters are 2 or 3 there (Hangul syllables their jamo; a few Indic, Balinese and
# musical ones two parts), so a run of a third of the limit may hold a longer word.
_EXPANDING = (r"(?s).*[\x{9CB}-\x{9CC}\x{B4B}-\x{B4C}\x{B94}\x{BCA}-\x{BCC}\x{CCB}"
              r"\x{D4A}-\x{D4C}\x{DDC}-\x{DDE}\x{1B06}\x{1B08}\x{1B0A}\x{1B0C}\x{1B0E}"
              r"\x{1B12}\x{1B40}-\x{1B41}\x{AC00}-\x{D7A3}\x{1134B}-\x{1134C}\x{114BC}"
              r"\x{114BE}\x{115BA}-\x{115BB}\x{11938}\x{1D15E}-\x{1D164}\x{1D1BB}-\x{1D1C0}].*")
_EXPANDED_RUN = r"(?s).*\S{%d}.*" % (MAX_CHARS_PER_WORD // 3 + 1)


class _Pieces(NamedTuple):
    """A batch's word pieces as flat values: ids, byte starts and ends (end exclusive)
    and the row splits that cut them into the batch's rows."""

    ids: tf.Tensor
    starts: tf.Tensor
    ends: tf.Tensor
    splits: tf.Tensor


class Tokenizer(tf.Module):
    """BERT WordPiece tokenizer for ELECTRA, usable eagerly, in tf.data and in exports.

    Args:
      vocab_file: path of a BERT-style vocab.txt (e.g. the 30,522-token uncased file).
      do_lower_case: lower-case the input (the original's do_lower_case).
      strip_accents: strip accents; None follows do_lower_case, as BERT does.
    """

    def __init__(self, vocab_file: str, do_lower_case: bool = True,
                 strip_accents: bool | None = None, name: str = "tokenizer"):
        super().__init__(name=name)
        self.vocab_file = os.fspath(vocab_file)
        self.vocab = load_vocab(self.vocab_file)
        check_word_pieces(self.vocab, self.vocab_file)  # before tensorflow-text's traceback
        self.do_lower_case = bool(do_lower_case)
        self.strip_accents = resolve_strip_accents(do_lower_case, strip_accents)
        self.token_to_id = {t: i for i, t in enumerate(self.vocab)}
        self.pad_id = self.token_to_id[PAD]
        self.unk_id = self.token_to_id[UNK]
        self.cls_id = self.token_to_id[CLS]
        self.sep_id = self.token_to_id[SEP]
        self.mask_id = self.token_to_id[MASK]
        self._is_suffix = tf.constant([t.startswith("##") for t in self.vocab])
        # FastBertTokenizer's own normalizer does BERT's uncased form (lower-case,
        # NFD, accents stripped) with compatibility decomposition and case folding on
        # top: "…" becomes "...", fullwidth "Ｈｅｌｌｏ" "hello", "ß" "ss" and "ﬁ" "fi",
        # where BERT's tokenizer (and transformers') keeps each whole, mostly [UNK].
        # Other modes pre-normalize. FastBertTokenizer's two parts, as it builds them:
        # its tokenize_with_offsets maps the offsets back with a ragged batched gather
        # of hundreds of graph nodes, which `_pieces` does with three flat ones.
        self._fast_lower = self.do_lower_case and self.strip_accents
        self._normalizer = tf_text.FastBertNormalizer(
            lower_case_nfd_strip_accents=self._fast_lower)
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            trie_tokens(self.vocab), max_bytes_per_word=_MAX_BYTES_PER_WORD,
            token_out_type=tf.int64, unknown_token=UNK)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def normalize(self, texts: tf.Tensor) -> tf.Tensor:
        """Repairs invalid UTF-8, cleans (`clean_text`) and applies the pre-WordPiece
        normalization of the mode (`pre_normalize`)."""
        return pre_normalize(texts, self.do_lower_case, self.strip_accents)

    # TensorFlow ops only, with explicit tf.conds: no AutoGraph conversion (in a long
    # process, a tf.data map's conversion of the branches defined inside had been
    # matched to another function's: "convert_ids_to_tokens() takes 2 positional
    # arguments but 3 were given", as build_vocab's word splitting once was). Ragged
    # tensors are handled as flat values and row splits: the RaggedTensor ops would add
    # thousands of shape checks and constants to an export's text function, which
    # a server's graph optimizer then spends seconds on at its first request.
    @tf.autograph.experimental.do_not_convert
    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Strings [batch] -> int64 ragged ids [batch, (tokens)]; no [CLS]/[SEP]."""
        normalized = self.normalize(tf.convert_to_tensor(texts, tf.string))

        def long_words():
            pieces = self._long_words_unknown(normalized, self._pieces(normalized))
            return pieces.ids, pieces.splits

        def plain():
            ids = self._wordpiece.tokenize(self._normalizer.normalize(normalized))
            return ids.flat_values, ids.row_splits

        values, splits = tf.cond(self._may_hold_long_word(normalized), long_words, plain)
        return tf.RaggedTensor.from_row_splits(values, splits, validate=False)

    @tf.autograph.experimental.do_not_convert
    def tokenize_with_offsets(self, texts: tf.Tensor):
        """Like tokenize, plus byte offsets [batch, (tokens)] into the text they index.

        Works eagerly and inside a tf.function: the SQuAD featurizer and the
        TF Serving export's in-graph tokenization (electra_tf/serving/graph.py) use it.

        Returns:
          (ids, starts, ends, texts): int64 ragged ids, starts and ends (end
          exclusive) and the string tensor the offsets index. In BERT's uncased
          mode and the cased one that is the input with invalid UTF-8 replaced by
          U+FFFD (the input itself where it was valid): the characters the
          cleaning deletes are inside or between the tokens' spans. In the two
          other modes it is the normalized text.
        """
        source = repair_utf8(tf.convert_to_tensor(texts, tf.string))
        cleaned = clean_text(source)
        normalized = _mode_normalize(cleaned, self.do_lower_case, self.strip_accents)
        pieces = self._pieces(normalized)
        pieces = _Pieces(*tf.cond(self._may_hold_long_word(normalized),
                                  lambda: tuple(self._long_words_unknown(normalized, pieces)),
                                  lambda: tuple(pieces)))
        if _offsets_kept(self.do_lower_case, self.strip_accents):
            starts, ends = tf.cond(
                tf.reduce_any(tf.strings.length(cleaned) < tf.strings.length(source)),
                lambda: _to_source_offsets(source, pieces),
                lambda: (pieces.starts, pieces.ends))
            pieces, texts = pieces._replace(starts=starts, ends=ends), source
        else:
            texts = normalized

        def ragged(values):
            return tf.RaggedTensor.from_row_splits(values, pieces.splits, validate=False)

        return ragged(pieces.ids), ragged(pieces.starts), ragged(pieces.ends), texts

    def _pieces(self, texts) -> _Pieces:
        """FastBertTokenizer.tokenize_with_offsets(texts) as flat tensors: its
        normalizer, its WordPiece, then each piece's offsets mapped back through the
        normalizer's byte offsets (the row's offsets start at its row split)."""
        normalized, offsets = self._normalizer.normalize_with_offsets(texts)
        ids, starts, ends = self._wordpiece.tokenize_with_offsets(normalized)
        splits = ids.row_splits
        base = tf.gather(offsets.row_splits, value_rowids(ids))
        return _Pieces(ids.flat_values, tf.gather(offsets.flat_values, starts.flat_values + base),
                       tf.gather(offsets.flat_values, ends.flat_values + base), splits)

    def _long_words_unknown(self, texts, pieces: _Pieces) -> _Pieces:
        """`pieces` with each word of more than MAX_CHARS_PER_WORD characters one [UNK]
        spanning it, as the original's WordpieceTokenizer gives it.

        A word is a piece that is no ##suffix and the ##suffixes after it; its
        characters are counted in `texts` between its first start and last end (in
        BERT's uncased mode, the one whose normalization runs inside tensorflow-text,
        as the original counts them after its NFD and accent stripping: a combining
        mark is none, a Hangul syllable its 2 or 3 jamo)."""
        chars, char_starts = tf.strings.unicode_split_with_offsets(texts, "UTF-8")
        positions = char_starts.flat_values
        position_rows = value_rowids(char_starts)
        weights = None
        if self._fast_lower:
            weights = tf.strings.length(tf.strings.regex_replace(
                tf_text.normalize_utf8(chars.flat_values, "NFD"), r"\p{Mn}", ""),
                unit="UTF8_CHAR")
        ids, starts, ends, splits = pieces
        piece_rows = flat_row_ids(splits, tf.size(ids, tf.int64))
        is_word = tf.logical_not(tf.gather(self._is_suffix, ids))
        word = tf.cumsum(tf.cast(is_word, tf.int64)) - 1  # per piece: its word (all rows)
        rows = tf.boolean_mask(piece_rows, is_word)  # per word: its row
        first = tf.math.segment_min(starts, word)
        last = tf.math.segment_max(ends, word)
        chars_in = _count_between(texts, positions, position_rows, rows, first, last, weights)
        long = tf.gather(chars_in > MAX_CHARS_PER_WORD, word)  # per piece
        keep = tf.logical_not(long & tf.logical_not(is_word))
        new_ids = tf.where(long, tf.constant(self.unk_id, ids.dtype), ids)
        new_ends = tf.where(long, tf.gather(last, word), ends)
        return _Pieces(tf.boolean_mask(new_ids, keep), tf.boolean_mask(starts, keep),
                       tf.boolean_mask(new_ends, keep), kept_row_splits(splits, keep))

    def _may_hold_long_word(self, texts: tf.Tensor) -> tf.Tensor:
        """Whether a text of the batch may hold a word of more than MAX_CHARS_PER_WORD
        characters as `_long_words_unknown` counts them (a scalar bool)."""
        long = tf.strings.regex_full_match(texts, _LONG_RUN)
        if self._fast_lower:
            long |= (tf.strings.regex_full_match(texts, _EXPANDED_RUN)
                     & tf.strings.regex_full_match(texts, _EXPANDING))
        return tf.reduce_any(long)

    def encode(self, texts: Sequence[str | bytes]) -> list[list[int]]:
        """Python convenience: a list of strings -> a list of id lists (a lone surrogate,
        which has no UTF-8 form, is deleted as the original deletes it).

        Raises:
          TypeError: a single str or bytes (a list of them is what it takes: a str had
            been read as a list of one-character texts), or a row that is neither.
        """
        if isinstance(texts, (str, bytes, bytearray)) or texts is None:
            raise TypeError(f"encode takes a list of texts, got a single "
                            f"{type(texts).__name__}: encode([text])[0] for one")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, (str, bytes)):
                raise TypeError(f"texts[{i}] must be a str or UTF-8 bytes, got "
                                f"{type(t).__name__}")
        if not texts:
            return []
        from electra_tf.text.cleaning import without_lone_surrogates

        texts = [without_lone_surrogates(t) if isinstance(t, str) else t for t in texts]
        ragged = self.tokenize(tf.constant(texts, dtype=tf.string))
        return split_ragged(ragged)

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        return [self.vocab[int(i)] for i in ids]


def pre_normalize(texts: tf.Tensor, do_lower_case: bool, strip_accents: bool) -> tf.Tensor:
    """What runs before FastBertTokenizer (and before vocab learning).

    Invalid UTF-8 becomes U+FFFD, then the original's cleaning (`clean_text`).
    BERT's uncased mode (lower-case and strip accents) is left to
    FastBertTokenizer's own normalizer; the other modes are done here with
    TF-Text ops that TF Serving 2.12+ links.

    Args:
      texts: string tensor of any shape.
    Returns:
      A string tensor of the same shape.
    """
    return _mode_normalize(clean_text(repair_utf8(texts)), do_lower_case, strip_accents)


def repair_utf8(texts: tf.Tensor) -> tf.Tensor:
    """`texts` with each invalid UTF-8 sequence replaced by U+FFFD (any shape)."""
    return tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace",
                                        replacement_char=0xFFFD)


def clean_text(texts: tf.Tensor) -> tf.Tensor:
    """Valid UTF-8 strings without the characters the original's _clean_text deletes
    (NUL, U+FFFD, controls but tab and line ends, format, private-use and unassigned
    code points); any shape."""
    return tf.strings.regex_replace(texts, _DELETED, "")


def _mode_normalize(texts: tf.Tensor, do_lower_case: bool, strip_accents: bool) -> tf.Tensor:
    """The casing and accent mode's normalization of cleaned text (see the module)."""
    if do_lower_case and strip_accents:
        return texts
    if do_lower_case:
        return tf_text.case_fold_utf8(texts)
    if strip_accents:
        texts = tf_text.normalize_utf8(texts, "NFD")
        return tf.strings.regex_replace(texts, r"\p{Mn}", "")
    return texts


def _offsets_kept(do_lower_case: bool, strip_accents: bool) -> bool:
    """Whether the mode's normalization keeps byte offsets into its input: BERT's
    uncased mode (FastBertTokenizer maps them back) and the cased one (none)."""
    return do_lower_case == bool(strip_accents)


def _row_bases(texts) -> tf.Tensor:
    """Each text's first byte in the batch's texts laid end to end, one byte apart
    (int64 [B]): offsets plus their row's base sort as one sequence, so one searchsorted
    serves every row (no [B, longest] padding: a batch may hold one long document among
    short lines), and a row's end never equals the next row's start."""
    return tf.math.cumsum(tf.cast(tf.strings.length(texts), tf.int64) + 1, exclusive=True)


def flat_row_ids(splits, size) -> tf.Tensor:
    """The row of each of `size` flat values under row `splits` (int64 [size]): a
    ragged tensor's value_rowids() in three graph nodes instead of some seventy."""
    return tf.searchsorted(splits[1:], tf.range(size, dtype=splits.dtype), side="right",
                           out_type=tf.int64)


def value_rowids(rt) -> tf.Tensor:
    """rt.value_rowids() of a 2-D ragged tensor (int64), by flat_row_ids."""
    return flat_row_ids(rt.row_splits, tf.size(rt.flat_values, out_type=tf.int64))


def kept_row_splits(splits, keep) -> tf.Tensor:
    """The row splits of the flat values that `keep` (bool, one per value under row
    `splits`) keeps: a ragged boolean_mask's, without its hundred-odd graph nodes."""
    kept_before = tf.concat([tf.zeros([1], splits.dtype),
                             tf.math.cumsum(tf.cast(keep, splits.dtype))], 0)
    return tf.gather(kept_before, splits)


def _count_between(texts, positions, position_rows, rows, low, high, weights=None):
    """Per (row, low, high): how many of row's `positions` (flat byte offsets into
    `texts`, sorted per row; `position_rows` their rows) are in [low, high), or the sum
    of their `weights` (int32, one per position)."""
    bases = _row_bases(texts)
    keys = positions + tf.gather(bases, position_rows)
    base = tf.gather(bases, rows)
    above, below = (tf.searchsorted(keys, bound + base, side="left") for bound in (high, low))
    if weights is None:
        return above - below
    total = tf.concat([tf.zeros([1], weights.dtype), tf.math.cumsum(weights)], 0)
    return tf.gather(total, above) - tf.gather(total, below)


def _to_source_offsets(source, pieces: _Pieces):
    """The pieces' starts and ends, byte offsets into clean_text(source), moved to the
    bytes of `source` they came from (each kept character's bytes are its own: an
    offset moves by the bytes deleted before that character)."""
    chars, char_starts = tf.strings.unicode_split_with_offsets(source, "UTF-8")
    kept = tf.logical_not(tf.strings.regex_full_match(chars.flat_values, _DELETED))
    char_rows = value_rowids(chars)
    sizes = tf.cast(tf.boolean_mask(tf.strings.length(chars.flat_values), kept), tf.int64)
    rows = tf.boolean_mask(char_rows, kept)  # per kept character: its row
    # Each kept character's first byte in its row of clean_text(source): the sizes
    # before it in all rows, less those before its row's first kept character.
    total = tf.concat([tf.zeros([1], tf.int64), tf.math.cumsum(sizes)], 0)
    clean_starts = total[:-1] - tf.gather(total, tf.gather(
        kept_row_splits(chars.row_splits, kept), rows))
    shift = tf.boolean_mask(char_starts.flat_values, kept) - clean_starts
    bases = _row_bases(clean_text(source))
    key_base = tf.gather(bases, rows)
    last = tf.maximum(tf.size(shift, out_type=tf.int64) - 1, 0)
    offset_base = tf.gather(bases, flat_row_ids(pieces.splits, tf.size(pieces.ids, tf.int64)))

    def moved(offsets, keys):  # the kept character whose key the offset is
        at = tf.searchsorted(keys + key_base, offsets + offset_base, side="left")
        return offsets + tf.gather(shift, tf.minimum(tf.cast(at, tf.int64), last))

    new_starts = moved(pieces.starts, clean_starts)
    # a piece of no width (one of several a character normalizes to) ends where it starts
    return new_starts, tf.maximum(moved(pieces.ends, clean_starts + sizes), new_starts)


def split_ragged(ragged: tf.RaggedTensor) -> list[list[int]]:
    """A 2-D ragged tensor -> Python lists, without a slow to_list() walk."""
    values = ragged.flat_values.numpy().tolist()
    splits = ragged.row_splits.numpy().tolist()
    return [values[a:b] for a, b in zip(splits[:-1], splits[1:])]
