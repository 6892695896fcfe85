"""Learning a BERT-style WordPiece vocabulary with tensorflow-text's learner.

The special tokens keep the ids of BERT's uncased vocab ([PAD]=0,
[unused0..98]=1..99, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103), so code
written for that file works with a learned one and the other way round. The
text is split into words by BERT's basic tokenizer after the same
normalization that `electra_tf.text.tokenizer.Tokenizer` applies.
`python -m electra_tf.build_vocab` is the command line over `build_vocab`.
"""

from __future__ import annotations

import collections
import os
import sys

from electra_tf.core.errors import InputError
from electra_tf.core.fileio import (
    Progress,
    atomic_write_text,
    check_output_file,
    check_text_file,
    check_utf8_file,
    expand_files,
    not_utf8,
    stale_write_note,
    write_suffix,
)


def count_words(files: list[str], do_lower_case: bool, strip_accents: bool,
                max_lines: int = 0) -> tuple[collections.Counter, int]:
    """Words as BERT's basic tokenizer splits them -> counts, and lines read."""
    import tensorflow as tf
    from tensorflow_text.python.ops.bert_tokenizer import BasicTokenizer

    from electra_tf.text.tokenizer import pre_normalize

    splitter = BasicTokenizer(lower_case=do_lower_case and strip_accents)
    ds = tf.data.TextLineDataset(files).filter(lambda s: tf.strings.length(s) > 0)
    if max_lines:
        ds = ds.take(max_lines)
    # TensorFlow ops only: no AutoGraph conversion (a lambda here had once been matched
    # to another function's conversion in a long test process: "convert_ids_to_tokens()
    # takes 2 positional arguments but 3 were given").
    @tf.autograph.experimental.do_not_convert
    def split(s):
        text = pre_normalize(s, do_lower_case, strip_accents)
        # The tokenizer splits words at every Unicode space and separator (\p{Z}: a
        # no-break space, U+3000, U+2028); BERT's basic tokenizer here at ASCII
        # whitespace only, and a cased vocabulary of web text had learned pieces
        # such as '12\xa0km' that no text ever tokenizes to.
        text = tf.strings.regex_replace(text, r"\p{Z}", " ")
        return splitter.tokenize(text).flat_values, tf.shape(s)[0]

    ds = ds.batch(4096).map(split, num_parallel_calls=tf.data.AUTOTUNE,
                            deterministic=True).prefetch(2)
    counts: collections.Counter = collections.Counter()
    lines = 0
    progress = Progress("build_vocab", unit="lines")
    for words, n in ds.as_numpy_iterator():
        counts.update(w.decode("utf-8", errors="replace") for w in words)
        lines += int(n)
        progress.update(lines, extra=f"{len(counts):,} distinct words")
    return counts, lines


def _check_utf8_name(path: str) -> None:
    """A corpus file whose name is not UTF-8 (TensorFlow's file system, which reads the
    corpus here, takes UTF-8 paths only: a ValueError traceback)."""
    shown = not_utf8(path)
    if shown is not None:
        raise InputError(f"corpus file {shown}: its name is not UTF-8 (TensorFlow's file "
                         "system takes UTF-8 paths only); rename it")


def check_vocab_size(vocab_size: int) -> None:
    from electra_tf.text.vocab import BERT_RESERVED_TOKENS

    if vocab_size <= len(BERT_RESERVED_TOKENS):
        raise InputError(
            f"vocab_size must exceed the {len(BERT_RESERVED_TOKENS)} reserved tokens, "
            f"got {vocab_size}")


def learn_vocab(counts: collections.Counter, vocab_size: int, min_count: int = 10) -> list[str]:
    """Word counts -> WordPiece vocab with the BERT specials at BERT's ids."""
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    from electra_tf.text.tokenizer import BERT_RESERVED_TOKENS, MAX_CHARS_PER_WORD

    check_vocab_size(vocab_size)
    # Every character of a word the tokenizer reads (one of at most MAX_CHARS_PER_WORD
    # characters; a longer word is one [UNK]) is kept. The learner's defaults had
    # dropped two kinds of text silently: every word holding a character outside the
    # corpus's 1,000 most frequent ones (max_unique_chars: a CJK corpus came out 21%
    # [UNK]), and the characters of words over 50 characters (max_token_length, which
    # bounds the pieces it learns, and its cost: each word's substrings), left here.
    alphabet = {c for word in counts if len(word) <= MAX_CHARS_PER_WORD for c in word}
    vocab = learner.learn(list(counts.items()), vocab_size, list(BERT_RESERVED_TOKENS),
                          lower_thresh=max(1, min_count), max_unique_chars=len(alphabet) + 1)
    # The learner puts the reserved tokens first, in order; check, as ids matter.
    if vocab[:len(BERT_RESERVED_TOKENS)] != list(BERT_RESERVED_TOKENS) or len(set(vocab)) != len(vocab):
        raise RuntimeError("the WordPiece learner did not keep the reserved tokens in place")
    held = set(vocab)  # the characters only words over its max_token_length hold
    vocab += [piece for c in sorted(alphabet - held) for piece in (c, "##" + c)
              if piece not in held]
    return vocab


def build_vocab(corpus: str, vocab_size: int, output: str, do_lower_case: bool = True,
                strip_accents: bool | None = None, min_count: int = 10,
                max_lines: int = 0, overwrite: bool = False) -> list[str]:
    """Counts words in the corpus files, learns the vocab and writes it atomically.

    The learner keeps every character it saw as a token, so a small corpus's
    alphabet can take the vocabulary past `vocab_size` (a note says so).

    Raises:
      InputError: before the corpus is read: `output` is a directory, a device or
        a pipe, one of the corpus files, lies under a file or in a folder that
        cannot be written, or exists and `overwrite` is False (records and models
        built with a vocabulary need it as it is); a corpus file's name is not UTF-8;
        `vocab_size` leaves no room past the reserved tokens; `max_lines` < 0 or
        `min_count` < 1; a corpus file is
        not UTF-8 text (`fileio.check_text_file`); then: the corpus has no words.
    """
    from electra_tf.text.vocab import resolve_strip_accents  # no TensorFlow: bad input fails fast

    if os.path.isdir(output):
        raise InputError(f"--output {output} is a directory; give the vocab file's path "
                         "(e.g. {}/vocab.txt)".format(output.rstrip("/")))
    check_output_file(output, "--output", special=False)
    if os.path.exists(output) and not overwrite:
        raise InputError(f"--output {output} exists; records and models built with it need it "
                         "as it is: pass --overwrite to replace it, or choose another path")
    check_vocab_size(vocab_size)
    for line in stale_write_note(output):  # (not removed: another run may be writing it)
        print(f"[build_vocab] {line}", file=sys.stderr)
    if max_lines < 0:
        raise InputError(f"--max_lines must be >= 0 (0: every line), got {max_lines}")
    if min_count < 1:  # (a threshold of 0 or below had been taken as 1 without a word)
        raise InputError(f"--min_count must be >= 1 (a word seen once is 1), got {min_count}")

    files = expand_files(corpus)
    for path in files:
        if os.path.exists(output) and os.path.exists(path) \
                and os.path.samefile(path, output):  # --overwrite had
            raise InputError(f"--output={output} is one of the --corpus files it would "
                             "read; write the vocabulary elsewhere")  # replaced it
        _check_utf8_name(path)
        # (an OpenWebText archive's advice had gone in a circle: decompress it, then
        # "compress it with xz")
        check_text_file(path, compressed_hint=" and extract its text files (an OpenWebText "
                        "archive's pages: tar -xJf); this command reads text files only",
                        reads_archives=False)
    for path in files:  # all of it: a Latin-1 part further in had become "�" tokens
        check_utf8_file(path)
    strip = resolve_strip_accents(do_lower_case, strip_accents)
    counts, lines = count_words(files, do_lower_case, strip, max_lines)
    if not counts:
        held = (f"; its {lines:,} non-empty line(s) hold only whitespace or characters the "
                "tokenizer drops" if lines else "")
        raise InputError(f"corpus {corpus!r} has no words ({len(files)} file(s){held})")
    print(f"[build_vocab] {lines:,} lines, {sum(counts.values()):,} words, "
          f"{len(counts):,} distinct; learning up to {vocab_size:,} pieces", file=sys.stderr)
    vocab = learn_vocab(counts, vocab_size, min_count)
    from electra_tf.text.tokenizer import BERT_RESERVED_TOKENS, MAX_CHARS_PER_WORD

    if len(vocab) == len(BERT_RESERVED_TOKENS):
        raise InputError(f"corpus {corpus!r} has no word the tokenizer reads (every one is "
                         f"longer than {MAX_CHARS_PER_WORD:,} characters, one [UNK]): no "
                         "vocabulary to learn")
    atomic_write_text(output, "\n".join(vocab) + "\n", suffix=write_suffix(output))
    print(f"[build_vocab] wrote {len(vocab):,} tokens to {output}", file=sys.stderr)
    if len(vocab) > vocab_size:
        print(f"[build_vocab] note: {len(vocab):,} tokens, above --vocab_size={vocab_size:,}: "
              "the learner keeps every character of the corpus as a token", file=sys.stderr)
    elif len(vocab) < 0.9 * vocab_size:  # (a small corpus' vocabulary had come out silently)
        rarer = (f": --min_count={min_count} leaves out the rarer words; lower it for a small "
                 "corpus" if any(c < min_count for c in counts.values()) else
                 f": --max_lines={max_lines} read part of the corpus" if max_lines else
                 ": the corpus has no more words to learn from")
        print(f"[build_vocab] note: {len(vocab):,} tokens, well below --vocab_size="
              f"{vocab_size:,}{rarer}", file=sys.stderr)
    return vocab
