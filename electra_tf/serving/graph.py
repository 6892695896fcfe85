"""The serving graph: in-graph tokenization, packing and per-task decoding.

Everything here runs inside the exported SavedModel, so it uses only ops that
stock TF Serving 2.12+ has: core TF ops plus the TF-Text ops FastBertTokenizer
needs (FastBertNormalize, FastWordpieceTokenizeWithOffsets), NormalizeUTF8
(the long-word count's NFD) and, for the cased / no-accent-stripping modes,
CaseFoldUTF8. No
RoundRobinTrimmer (TF-Text 2.13+, not in TF Serving 2.12-2.19): truncation is
BERT's "longest first" rule written in closed form.

Signature inputs and outputs (the names are stable; see docs/serving.md):

text signature `serving_default` (string [batch] inputs): by the head
  (`Head.text_inputs`, tasks/heads/): text, text + text_pair (a pair task), or
  question + context
ids signature `serving_ids` (and `serving_default` of an --ids_only export):
  input_word_ids, input_mask, input_type_ids: int32 [batch, seq]

Byte offsets are into the input string after invalid UTF-8 was replaced with
U+FFFD (identical to the input when it was valid UTF-8), end exclusive; -1
marks [CLS], [SEP] and padding. A character that normalizes to several
("…" -> "...", "⑴" -> "(1)", "ﷺ" -> four words) gives pieces that all start at
it and of which only the last ends at its end: the others have start == end
in wordpiece_* / token_* offsets, while words and SQuAD answers always span
whole characters (see char_ends). This holds for BERT's uncased mode (the
default: FastBertTokenizer's own normalizer maps offsets back) and for cased
vocabularies; the two other modes (lower-case without accent stripping, cased
with accent stripping) normalize before tokenizing, and their offsets and
word texts refer to the normalized text.
"""

from __future__ import annotations

import tensorflow as tf

from electra_tf.text.tokenizer import Tokenizer, flat_row_ids, kept_row_splits, value_rowids

NO_SPAN_SCORE = -1e9  # answer_score when the context has no valid span
_NEG = -1e30


def keep_first(rt, n):
    """The first n[b] elements of each row b of a 2-D ragged tensor.

    Args:
      rt: ragged [B, (T)].
      n: int64 [B], the number of elements each row keeps (rows shorter than
        n[b] are kept whole).
    Returns:
      ragged [B, (min(T, n))], of rt's dtype.
    """
    # On the flat values (cheap to trace, unlike ragged broadcasting).
    rows = value_rowids(rt)
    index = tf.range(tf.size(rt.flat_values, out_type=tf.int64))
    keep = index - tf.gather(rt.row_splits, rows) < tf.gather(n, rows)
    return tf.RaggedTensor.from_row_lengths(tf.boolean_mask(rt.flat_values, keep),
                                            tf.minimum(rt.row_lengths(), n), validate=False)


def split_rows(x, n):
    """(x[:n], x[n:]) of a tensor or a 2-D ragged tensor (whose slicing would trace to
    some fifty graph nodes a half)."""
    if not isinstance(x, tf.RaggedTensor):
        return x[:n], x[n:]
    splits, values = x.row_splits, x.flat_values
    middle = splits[n]

    def rows(s, v):
        return tf.RaggedTensor.from_row_splits(v, s - s[0], validate=False)

    return rows(splits[:n + 1], values[:middle]), rows(splits[n:], values[middle:])


def lay_out(width, parts, fill):
    """Each row's parts one after another, then `fill`: int64 [B, width].

    The dense form of concatenating ragged rows and padding them (which traces to
    some 150 graph nodes a concatenation), cut after `width` positions.

    Args:
      width: the positions of a row (int32 or int64 scalar).
      parts: (values, lengths) pairs, lengths int64 [B]: values a ragged [B, (T)]
        int64 whose first lengths[b] elements row b takes (lengths[b] <= its row's
        length), or an int64 scalar that row b takes lengths[b] times.
      fill: what follows the parts.
    """
    position = tf.range(tf.cast(width, tf.int64))[None, :]
    start = tf.zeros_like(parts[0][1])[:, None]
    out = tf.fill(tf.stack([tf.shape(start, out_type=tf.int64)[0], tf.cast(width, tf.int64)]),
                  tf.constant(fill, tf.int64))
    for values, lengths in parts:
        end = start + lengths[:, None]
        inside = (position >= start) & (position < end)
        if isinstance(values, tf.RaggedTensor):
            flat = tf.concat([values.flat_values, tf.constant([fill], tf.int64)], 0)
            first = values.row_splits[:-1, None]
            index = tf.where(inside, first + position - start, tf.size(flat, tf.int64) - 1)
            out = tf.where(inside, tf.gather(flat, index), out)
        else:
            out = tf.where(inside, tf.cast(values, tf.int64), out)
        start = end
    return out


def length_buckets(max_seq_length: int, buckets=None, min_length: int = 1) -> tuple[int, ...]:
    """The lengths a serving batch is padded to, ascending; the last is max_seq_length.

    Each batch is padded to the shortest bucket that holds its longest row, so
    a short request does not pay for the full window while the number of
    shapes (each warmed up at export) stays small.

    Args:
      max_seq_length: L, the longest packed sequence (always the last bucket).
      buckets: the lengths below L to use; None: 8, 16, 24, then the powers of
        two from 32 and 1.5 times them (8, 16, 24, 32, 48, 64, 96, 128, 192,
        256, 384, ...) below L, so that a row pads by at most a third (and 7
        below 24). The steps of 8 are for one-sentence requests: with one
        thread ELECTRA-Small's encoder takes 4.9 ms at 24 positions and 5.5 ms
        at 32 (benchmarks/serving_floor.md).
        Lengths >= L are dropped; [L] (or any list of them) is the fixed window.
      min_length: buckets below it are dropped (the joint span head's beam
        needs at least beam_size positions).
    Raises:
      ValueError: a bucket below 1.
    """
    L = int(max_seq_length)
    if buckets is None:
        chosen, b = [8, 16, 24], 32
        while b < L:
            chosen += [b, b * 3 // 2]
            b *= 2
    else:
        chosen = sorted({int(b) for b in buckets})
        if chosen and chosen[0] < 1:
            raise ValueError(f"length buckets must be >= 1, got {chosen[0]}")
    return tuple(b for b in chosen if min_length <= b < L) + (L,)


def bucket_width(buckets: tuple[int, ...], longest, seq=None):
    """The padded length for rows whose longest position is `longest` (int32, a scalar or
    [B]: elementwise): the shortest bucket >= it, never more than `seq` (when given);
    `seq` or the last bucket when none holds it."""
    b = tf.constant(buckets, tf.int32)
    cap = tf.constant(buckets[-1], tf.int32) if seq is None else seq
    longest = tf.convert_to_tensor(longest)[..., None]
    return tf.minimum(tf.reduce_min(tf.where(b >= longest, b, cap), axis=-1), cap)


def pad_positions(x, length, fill):
    """x [B, W, ...] -> [B, length, ...]: cut after `length` positions, or padded with
    `fill` up to it."""
    x = x[:, :length]
    paddings = [[0, 0], [0, length - tf.shape(x)[1]]] + [[0, 0]] * (x.shape.rank - 2)
    return tf.pad(x, paddings, constant_values=fill)


class Packer(tf.Module):
    """Strings -> [CLS] a [SEP] (b [SEP]) ids, padded to the batch's length bucket, in-graph.

    Args:
      tokenizer: an electra_tf Tokenizer (FastBertTokenizer inside).
      max_seq_length: L, the longest packed sequence (longer inputs are truncated).
      buckets: see length_buckets (None: its default).
      min_length: see length_buckets.
    """

    def __init__(self, tokenizer: Tokenizer, max_seq_length: int, buckets=None,
                 min_length: int = 1, name: str = "packer"):
        super().__init__(name=name)
        if max_seq_length < 3:
            raise ValueError(f"max_seq_length must be >= 3, got {max_seq_length}")
        self.tokenizer = tokenizer
        self.max_seq_length = int(max_seq_length)
        self.buckets = length_buckets(max_seq_length, buckets, min_length)
        self.vocab_strings = tf.constant(tokenizer.vocab)
        self.is_continuation = tf.constant([t.startswith("##") for t in tokenizer.vocab])

    def tokenize(self, texts):
        """[B] strings -> (normalized [B], ids, starts, ends ragged [B, (T)] int64)."""
        ids, starts, ends, normalized = self.tokenizer.tokenize_with_offsets(texts)
        return normalized, ids, starts, ends

    def pack(self, ids_a, ids_b=None, limit_a=None):
        """Truncates and packs; returns dense int32 [B, W] tensors and the kept lengths.

        W is the batch's bucket: the shortest of self.buckets that holds its
        longest packed row (at most L). Single segment: a keeps its first L - 2
        pieces. Pair: BERT's rule (pop from the longer side, b on ties: the
        original's _truncate_seq_pair, tasks/base.pack_pair) until
        len(a) + len(b) <= L - 3, which in closed form is
        a' = min(la, max(budget - lb, ceil(budget / 2))), b' = min(lb, budget - a');
        a row whose b has no pieces is packed as a single segment ([CLS] a [SEP],
        as the original's featurize).
        `limit_a` (SQuAD's max_query_length) caps a first, and then b takes the rest.

        Returns:
          dict: input_word_ids, input_mask, input_type_ids int32 [B, W];
          len_a, len_b int64 [B] (kept pieces); truncated bool [B]; width (W,
          int32 scalar).
        """
        L = self.max_seq_length
        la = ids_a.row_lengths()
        closing = None  # int64 [B]: 1 where b and its [SEP] follow a (pairs only)
        if ids_b is None:
            a_len = tf.minimum(la, L - 2)
            b_len = tf.zeros_like(a_len)
            truncated = la > a_len
            specials = 2
        else:
            lb = ids_b.row_lengths()
            budget = tf.constant(L - 3, tf.int64)
            if limit_a is not None:
                a_len = tf.minimum(la, limit_a)
                b_len = tf.minimum(lb, budget - a_len)
            else:
                # An empty b packs a alone, as pack_pair and the original's featurize.
                has_b = lb > 0
                a_len = tf.where(has_b,
                                 tf.minimum(la, tf.maximum(budget - lb, (budget + 1) // 2)),
                                 tf.minimum(la, L - 2))
                b_len = tf.where(has_b, tf.minimum(lb, budget - a_len), tf.zeros_like(lb))
                closing = tf.cast(has_b, tf.int64)
            truncated = (la > a_len) | (lb > b_len)
            specials = 3
        one = tf.ones_like(a_len)
        cls, sep = self.tokenizer.cls_id, self.tokenizer.sep_id
        parts = [(cls, one), (ids_a, a_len), (sep, one)]
        if ids_b is not None:
            parts += [(ids_b, b_len), (sep, one if closing is None else closing)]
        kept = a_len + b_len + (specials if closing is None else 2 + closing)
        longest = tf.cast(tf.reduce_max(tf.concat([kept, [specials]], 0)), tf.int32)
        width = bucket_width(self.buckets, longest)
        word_ids = tf.cast(lay_out(width, parts, 0), tf.int32)
        position = tf.range(tf.cast(width, tf.int64))[None, :]
        mask = tf.cast(position < kept[:, None], tf.int32)
        type_ids = mask * tf.cast(position >= (a_len + 2)[:, None], tf.int32)
        return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": type_ids,
                "len_a": a_len, "len_b": b_len, "truncated": truncated, "width": width}

    def positions(self, values, len_a, width, len_b=None, values_b=None, fill=-1):
        """Per-piece values (ragged, e.g. byte offsets) laid out like pack(): [B, width] int64."""
        one = tf.ones_like(len_a)
        parts = [(fill, one), (values, tf.minimum(len_a, values.row_lengths())), (fill, one)]
        if values_b is not None:
            parts.append((values_b, tf.minimum(len_b, values_b.row_lengths())))
        return lay_out(width, parts, fill)

    def tokens(self, input_word_ids, input_mask):
        """Vocab strings [B, W] ("" at padding)."""
        return tf.where(input_mask > 0, tf.gather(self.vocab_strings, input_word_ids), "")


def char_ends(starts, ends):
    """Piece ends moved to the end of the character each piece comes from: every
    piece of such a character spans the character (the served pieces' and answers'
    byte spans).

    FastBertTokenizer maps the pieces of a character that normalizes to
    several ("…" -> ". . .", "⑴" -> "( 1 )", "ﷺ" -> four Arabic words) to
    offsets that all start at the character, and only the last of which ends
    at its end: the others are empty (start == end). This gives every empty
    piece the end of the next non-empty piece of its row (its character's
    end); non-empty pieces keep theirs. Computed on the untruncated pieces, it
    also covers a truncation that keeps only the first pieces of a character.

    Args:
      starts, ends: ragged [B, (T)] int64 byte offsets.
    Returns:
      ragged [B, (T)] int64, like ends.
    """
    s, e = starts.flat_values, ends.flat_values
    rows = value_rowids(starts)
    n = tf.size(e, out_type=tf.int64)
    nonempty = e > s
    # The k-th non-empty piece, for k = the number of non-empty pieces before
    # piece i, is the first non-empty piece at or after i (n when none is).
    where = tf.concat([tf.where(nonempty)[:, 0], tf.reshape(n, [1])], axis=0)
    nxt = tf.gather(where, tf.cumsum(tf.cast(nonempty, tf.int64), exclusive=True))
    none = tf.constant([-1], tf.int64)
    same_row = tf.gather(tf.concat([rows, none], axis=0), nxt) == rows
    moved = tf.gather(tf.concat([e, none], axis=0), nxt)
    return ends.with_flat_values(tf.where(nonempty | ~same_row, e, moved))


def substr_bytes(texts, starts, ends):
    """texts[b][starts:ends] by bytes, elementwise ("" where start < 0 or end <= start)."""
    ok = (starts >= 0) & (ends > starts)
    s = tf.where(ok, starts, 0)
    n = tf.where(ok, ends - starts, 0)
    return tf.strings.substr(texts, s, n, unit="BYTE")


# === Task decoders: model outputs (+ the packing) -> named outputs ===

def classification_outputs(logits, label_names, regression: bool,
                           label_scale: tuple[float, float] = (0.0, 1.0)):
    """logits [B, C] (or [B] for regression) -> probabilities / label / score.

    Regression: score = logit * label_scale[1] + label_scale[0], the inverse of
    the training target (score - min) / max (STS-B trains on score / 5 and
    serves 0..5; models recorded before the scale trained on raw scores, (0, 1)).
    """
    if regression:
        low, high = (float(x) for x in label_scale)
        return {"score": tf.reshape(logits, [-1]) * high + low}
    probs = tf.nn.softmax(logits, axis=-1)
    label_id = tf.argmax(probs, axis=-1, output_type=tf.int32)
    return {"probabilities": probs, "label_id": label_id,
            "label": tf.gather(tf.constant(list(label_names)), label_id), "logits": logits}


def tagging_piece_outputs(tag_logits, input_mask, label_names):
    """tag_logits [B, L, T] -> per-wordpiece probabilities, tag ids, labels, scores (max
    probability); at padding (input_mask 0) probabilities and scores are 0, the label "",
    the tag id 0."""
    probs = tf.nn.softmax(tag_logits, axis=-1) * tf.cast(input_mask, tag_logits.dtype)[..., None]
    tag_ids = tf.argmax(probs, axis=-1, output_type=tf.int32)
    scores = tf.reduce_max(probs, axis=-1)
    labels = tf.where(input_mask > 0, tf.gather(tf.constant(list(label_names)), tag_ids), "")
    return probs, tag_ids, labels, scores


def tagging_word_outputs(packer: Packer, texts, ids, starts, ends, len_a, piece_labels,
                         piece_scores):
    """Groups the kept wordpieces of `text` into words and aligns them to the input.

    A word is a FastBertTokenizer pre-token (split at whitespace, punctuation
    and each CJK character): its first piece is one whose vocab entry does not
    start with "##". The pre-tokens of one input character that normalizes to
    several ("…" -> ". . .", "⑴" -> "( 1 )") are one word: a piece that follows
    an empty piece (start == end, see char_ends) continues its word. Its
    label and score are those of its first piece (training labels a CoNLL word at its
    first piece too, but a CoNLL word holding punctuation, "model-token", is several
    words here, each labelled at its own first piece: docs/serving.md); its bytes
    run from its first piece's start to its last kept piece's character's end,
    so no word is empty and words never overlap.

    Returns:
      word_texts (string), word_labels (string), word_scores (float32),
      word_start, word_end (int64, -1 padded): [B, W], W = most words in the
      batch; num_words int32 [B].
    """
    empty = keep_first(ends.with_flat_values(tf.equal(starts.flat_values, ends.flat_values)),
                       len_a).flat_values
    ends = keep_first(char_ends(starts, ends), len_a)
    ids = keep_first(ids, len_a)
    starts = keep_first(starts, len_a)
    # On the flat pieces: a word starts at a row's first piece, or at a
    # non-"##" piece that does not follow an empty one (of the same
    # character), and ends before the next start or at the row's end.
    flat = ids.flat_values
    rows = value_rowids(ids)
    index = tf.range(tf.size(flat, out_type=tf.int64))
    splits = ids.row_splits
    after_empty = tf.concat([[False], empty], axis=0)[:-1]
    first = (tf.logical_not(tf.gather(packer.is_continuation, flat)) & ~after_empty) | (
        index == tf.gather(splits[:-1], rows))
    last = tf.concat([first[1:], [True]], axis=0) | (index == tf.gather(splits[1:], rows) - 1)
    # Piece labels/scores of text positions 1 .. len_a, flat like ids.
    at = tf.stack([rows, index - tf.gather(splits, rows) + 1], axis=1)
    p_labels, p_scores = tf.gather_nd(piece_labels, at), tf.gather_nd(piece_scores, at)
    # Each row's words in order: its pieces' firsts and lasts pair up one to one.
    w_start, w_end = tf.boolean_mask(starts.flat_values, first), tf.boolean_mask(
        ends.flat_values, last)
    w_label, w_score = tf.boolean_mask(p_labels, first), tf.boolean_mask(p_scores, first)
    w_rows = tf.boolean_mask(rows, first)
    # A guard for a normalizer that maps offsets otherwise (TF Serving links
    # its own TF-Text): a word that would still be empty is left out.
    keep = w_end > w_start
    w_splits = kept_row_splits(kept_row_splits(splits, first), keep)
    w_start, w_end, w_label, w_score, w_rows = (tf.boolean_mask(w, keep) for w in (
        w_start, w_end, w_label, w_score, w_rows))
    w_text = substr_bytes(tf.gather(texts, w_rows), w_start, w_end)
    w_start, w_end, w_label, w_score, w_text = (
        tf.RaggedTensor.from_row_splits(w, w_splits, validate=False)
        for w in (w_start, w_end, w_label, w_score, w_text))
    return {"word_texts": w_text.to_tensor(""), "word_labels": w_label.to_tensor(""),
            "word_scores": w_score.to_tensor(0.0), "word_start": w_start.to_tensor(-1),
            "word_end": w_end.to_tensor(-1),
            "num_words": tf.cast(w_start.row_lengths(), tf.int32)}


def _context_positions(input_mask, input_type_ids):
    """bool [B, L]: the context tokens (type 1, not the final [SEP])."""
    mask = tf.cast(input_mask, tf.bool)
    length = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1, keepdims=True)
    pos = tf.range(tf.shape(input_mask)[1])[None, :]
    return mask & (input_type_ids == 1) & (pos < length - 1)


def doc_windows(question_len, context_len, max_seq_length: int, doc_stride: int) -> dict:
    """SQuAD's sliding windows over each context, in-graph: tasks/squad.py's doc_spans,
    as fine-tuning's evaluation reads a long context.

    A row's question keeps question_len[b] pieces; each window holds up to
    M = max_seq_length - question_len - 3 context pieces (beside [CLS] and the two
    [SEP]s), and a window starts every min(doc_stride, M) pieces until one reaches
    the context's end (one empty window for an empty context).

    Args:
      question_len, context_len: int64 [B], the question's kept and the context's pieces.
    Returns:
      dict of int64: row, index, start, length [N] (each window's request row, its
      place among the row's windows, its first context piece and its pieces; the rows
      in order, a row's windows in order), and per request row [B]: count (its
      windows), stride, max_tokens (M), pieces (the context's).
    """
    max_tokens = tf.cast(max_seq_length, tf.int64) - question_len - 3
    # (a stride past the window is the window: no piece is skipped; nor does 10**30
    # overflow the constant)
    stride = tf.minimum(tf.constant(min(doc_stride, max_seq_length), tf.int64), max_tokens)
    count = 1 + tf.maximum((context_len - max_tokens + stride - 1) // stride, 0)
    splits = tf.concat([tf.zeros([1], tf.int64), tf.math.cumsum(count)], 0)
    row = flat_row_ids(splits, splits[-1])
    index = tf.range(splits[-1]) - tf.gather(splits, row)
    start = index * tf.gather(stride, row)
    length = tf.minimum(tf.gather(context_len, row) - start, tf.gather(max_tokens, row))
    return {"row": row, "index": index, "start": start, "length": length, "count": count,
            "stride": stride, "max_tokens": max_tokens, "pieces": context_len}


def row_slices(values, rows, starts, lengths):
    """ragged [N, (lengths)]: values[rows[i]][starts[i]:starts[i] + lengths[i]] (a 2-D
    ragged `values`; each slice inside its row)."""
    splits = tf.concat([tf.zeros([1], tf.int64), tf.math.cumsum(lengths)], 0)
    piece = flat_row_ids(splits, splits[-1])
    first = tf.gather(values.row_splits, rows) + starts
    index = tf.gather(first, piece) + tf.range(splits[-1]) - tf.gather(splits, piece)
    return tf.RaggedTensor.from_row_splits(tf.gather(values.flat_values, index), splits,
                                           validate=False)


def window_max_context(windows: dict, offset, width):
    """bool [N, width]: the packed positions (offset[i] + t, t < length[i]) of the context
    pieces whose max-context window window i is: tasks/squad.py's max_context_masks
    (BERT's _check_is_max_context: min(left, right context) + 0.01 x the window's
    length, the first window on a tie), which training's evaluation requires of an
    answer's start.

    In closed form, in memory of N x width (a table of every window that holds a piece
    had been N x width x 2M/stride: gigabytes at a small stride): every window but a
    row's last holds M pieces, so among those that hold piece p the score
    min(p - j*stride, j*stride + M - 1 - p) first rises then falls with j, and the
    best is one of the two windows beside where its terms cross,
    (2p - M + 1) / (2 stride), kept inside the full windows that hold p; the last
    window, shorter, wins where its score is higher (it comes after them).

    Args:
      windows: doc_windows' dict; offset: int64 [N], the first context position of
        each packed window; width: the packed windows' positions.
    """
    row, start, length = windows["row"], windows["start"], windows["length"]

    def per_window(name):
        return tf.gather(windows[name], row)[:, None]

    stride, size = per_window("stride"), per_window("max_tokens")
    count, pieces = per_window("count"), per_window("pieces")
    t = tf.range(tf.cast(width, tf.int64))[None, :] - offset[:, None]  # [N, width]
    inside = (t >= 0) & (t < length[:, None])
    piece = start[:, None] + t

    def score(first, n):  # x 100: integers, exact
        return 100 * tf.minimum(piece - first, first + n - 1 - piece) + n

    # The full windows (all but the last) that hold the piece: lo..hi.
    lo = tf.maximum(tf.math.floordiv(piece - size, stride) + 1, 0)
    hi = tf.minimum(tf.math.floordiv(piece, stride), count - 2)
    cross = tf.math.floordiv(2 * piece - size + 1, 2 * stride)
    a = tf.clip_by_value(cross, lo, tf.maximum(hi, lo))
    b = tf.clip_by_value(cross + 1, lo, tf.maximum(hi, lo))
    score_a, score_b = score(a * stride, size), score(b * stride, size)
    full = tf.where(score_b > score_a, b, a)  # the first on a tie
    full_score = tf.maximum(score_a, score_b)
    last_start = (count - 1) * stride
    last_length = pieces - last_start
    last_holds = piece >= last_start
    last_wins = last_holds & ((hi < lo) | (score(last_start, last_length) > full_score))
    best = tf.where(last_wins, count - 1, full)
    return inside & (best == windows["index"][:, None])


def window_values(values, windows: dict, offset, index):
    """values[row][start + index - offset] of each window (a context piece's byte offset
    at a packed position), 0 where the position holds no context piece.

    Args:
      values: ragged [B, (T)] int64, per context piece; windows: doc_windows'
      dict; offset: int64 [N] (window_max_context's); index: int [N] positions.
    """
    t = tf.cast(index, tf.int64) - offset
    ok = (t >= 0) & (t < windows["length"])
    flat = tf.gather(values.row_splits, windows["row"]) + windows["start"] + t
    padded = tf.concat([values.flat_values, tf.zeros([1], values.flat_values.dtype)], 0)
    return tf.gather(padded, tf.where(ok, flat, tf.size(values.flat_values, tf.int64)))


def best_of_rows(score, row, batch):
    """int64 [batch]: for each request row, its window (an index into `score` [N]) with
    the highest score, the first on a tie (every row has a window)."""
    best = tf.math.unsorted_segment_max(score, row, batch)
    n = tf.size(score, out_type=tf.int64)
    index = tf.where(score >= tf.gather(best, row), tf.range(n), n)
    found = tf.math.unsorted_segment_min(index, row, batch)
    # A row whose scores are all NaN (a broken model) has none >= its max: its first window.
    first = tf.math.unsorted_segment_min(tf.range(n), row, batch)
    return tf.where(found < n, found, first)


def _longest(max_answer_length: int) -> int:
    """An answer length the int32 positions compare with (a longer one is no limit)."""
    return min(int(max_answer_length), 2**31 - 1)


def span_outputs(start_logits, end_logits, input_mask, input_type_ids,
                 max_answer_length: int, start_ok=None):
    """Best valid span per row of the independent head, in-graph (the argmax over
    all spans, no n-best list).

    Valid spans start and end on context tokens (type 1, not the final [SEP]),
    end >= start and are at most max_answer_length tokens long, and start where
    `start_ok` (bool [B, L], a window's max-context pieces) says, if given; the
    Python decoder (tasks/squad.py, as the original) pairs the row's 20 best
    starts and 20 best ends, which gives the same best span unless its start or
    its end is not among them.

    Returns:
      answer_start_index, answer_end_index int32 [B] (0 when no span);
      answer_score float32 [B] (start + end logit, -1e9 when no span);
      has_span bool [B].
    """
    context = _context_positions(input_mask, input_type_ids)
    pos = tf.range(tf.shape(input_mask)[1])
    scores = start_logits[:, :, None] + end_logits[:, None, :]
    i, j = pos[:, None], pos[None, :]
    shape_ok = (j >= i) & (j - i < _longest(max_answer_length))
    starts = context if start_ok is None else context & start_ok
    valid = starts[:, :, None] & context[:, None, :] & shape_ok[None]
    flat = tf.reshape(tf.where(valid, scores, _NEG), [tf.shape(scores)[0], -1])
    best = tf.argmax(flat, axis=-1, output_type=tf.int32)
    seq = tf.shape(input_mask)[1]
    any_valid = tf.reduce_any(tf.reshape(valid, [tf.shape(valid)[0], -1]), axis=-1)
    return {"answer_start_index": tf.where(any_valid, best // seq, 0),
            "answer_end_index": tf.where(any_valid, best % seq, 0),
            "answer_score": tf.where(any_valid, tf.reduce_max(flat, axis=-1), NO_SPAN_SCORE),
            "has_span": any_valid}


def beam_span_outputs(start_top_log_probs, start_top_index, end_top_log_probs, end_top_index,
                      input_mask, input_type_ids, max_answer_length: int, start_ok=None):
    """Best valid span per row of the joint head's beam, in-graph.

    The beam (tasks/model.py): the K best starts (start_top_log_probs,
    start_top_index [B, K]) and the K best ends of each (end_top_log_probs,
    end_top_index [B, K, K]). As tasks/squad.py decodes one window: a
    pair is valid when both ends are context tokens, end >= start and it is at
    most max_answer_length tokens long, and it scores start log-probability +
    end log-probability; the best valid pair wins (the first in beam order on
    a tie). `start_ok` (bool [B, L], a window's max-context pieces) also limits
    the starts, as span_outputs'.

    Returns:
      answer_start_index, answer_end_index int32 [B] (0 when no pair is valid);
      answer_score float32 [B] (the pair's log-probability, -1e9 when none);
      has_span bool [B].
    """
    context = _context_positions(input_mask, input_type_ids)
    k = tf.shape(end_top_index)[1]
    starts = tf.broadcast_to(tf.cast(start_top_index, tf.int32)[:, :, None],
                             tf.shape(end_top_index))
    ends = tf.cast(end_top_index, tf.int32)
    batch = tf.shape(ends)[0]
    flat_s, flat_e = tf.reshape(starts, [batch, -1]), tf.reshape(ends, [batch, -1])
    # A request narrower than the beam ran the model on beam_size positions (the
    # bucketing's min_length), whose beam may name the padding past its width: never
    # context (the Keras head takes a beam of min(beam_size, width) instead).
    widest = tf.maximum(tf.reduce_max(flat_s), tf.reduce_max(flat_e)) + 1
    context = pad_positions(context, tf.maximum(tf.shape(context)[1], widest), False)
    starts = context if start_ok is None else context & pad_positions(
        tf.cast(start_ok, tf.bool), tf.shape(context)[1], False)
    valid = (tf.gather(starts, flat_s, batch_dims=1) & tf.gather(context, flat_e, batch_dims=1)
             & (flat_e >= flat_s) & (flat_e - flat_s < _longest(max_answer_length)))
    scores = tf.reshape(start_top_log_probs[:, :, None] + end_top_log_probs, [batch, k * k])
    scores = tf.where(valid, scores, _NEG)
    best = tf.argmax(scores, axis=-1, output_type=tf.int32)
    any_valid = tf.reduce_any(valid, axis=-1)
    return {"answer_start_index": tf.where(any_valid, tf.gather(flat_s, best, batch_dims=1), 0),
            "answer_end_index": tf.where(any_valid, tf.gather(flat_e, best, batch_dims=1), 0),
            "answer_score": tf.where(any_valid, tf.reduce_max(scores, axis=-1), NO_SPAN_SCORE),
            "has_span": any_valid}


def null_outputs(rule: str, answer_score, answerable_logits=None, start_logits=None,
                 end_logits=None, answerable_weight: float = 0.5):
    """The no-answer score and null odds of one window, by the model's null rule
    (the text signature, as tasks/squad.py, takes the minimum over a question's
    windows: SpanHead.text_outputs):
      "answerable" (the original's): no_answer_score = null_odds = -answerable_logit;
      "combined": no_answer_score = start[0] + end[0] - answerable_weight *
        answerable_logit (SQuAD 1.1: start[0] + end[0]), null_odds =
        no_answer_score - answer_score;
      "none" (SQuAD 1.1 with the joint head, which predicts no end logit at
        [CLS]): no_answer_score = -1e9, null_odds = no_answer_score - answer_score.

    Returns:
      no_answer_score, null_odds float32 [B].
    """
    if rule == "answerable":
        null = -answerable_logits
        return null, null
    if rule == "combined":
        null = start_logits[:, 0] + end_logits[:, 0]
        if answerable_logits is not None:
            null = null - answerable_weight * answerable_logits
    elif rule == "none":
        null = tf.fill(tf.shape(answer_score), tf.constant(NO_SPAN_SCORE, answer_score.dtype))
    else:
        raise ValueError(f"unknown null rule {rule!r}")
    return null, null - answer_score
