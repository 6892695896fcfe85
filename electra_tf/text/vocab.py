"""The vocabulary file (one WordPiece token per line) and its special tokens.

Reading it needs no TensorFlow, so a JAX pre-training run on a machine
without TensorFlow can check its vocabulary and set up masking; the
tokenizer itself (tokenizer.py, tensorflow-text) re-exports these names.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata

from electra_tf.core.errors import VocabError
from electra_tf.core.fileio import not_a_file, utf16_hint

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)

# BERT's uncased vocab: [PAD]=0, [unused0..98]=1..99, [UNK]=100, [CLS]=101,
# [SEP]=102, [MASK]=103. Learned vocabularies keep these ids.
BERT_RESERVED_TOKENS = (
    [PAD] + [f"[unused{i}]" for i in range(99)] + [UNK, CLS, SEP, MASK])


def _read_bytes(vocab_file: str) -> bytes | None:
    """The file's bytes, or None if it does not exist.

    Remote paths (gs://, ...) go through tf.io.gfile, so they need
    TensorFlow; local files are read with Python alone.
    """
    if "://" in vocab_file:
        import tensorflow as tf

        if not tf.io.gfile.exists(vocab_file):
            return None
        with tf.io.gfile.GFile(vocab_file, "rb") as f:
            return f.read()
    if not os.path.isfile(vocab_file):
        return None
    try:
        with open(vocab_file, "rb") as f:
            return f.read()
    except OSError as e:  # its permissions: one line, not the file-system hint
        raise VocabError(f"vocab file {vocab_file}: cannot read it ({e.strerror or e})"
                         ) from None


def load_vocab(vocab_file: str) -> list[str]:
    """Reads a BERT-style vocab (one token per line) and checks its specials.

    Raises:
      VocabError: the file is missing, empty or not UTF-8, a token repeats or has
        whitespace at its ends, a special token is missing, or [PAD] is not id 0
        (padding is written as 0).
    """
    data = _read_bytes(os.fspath(vocab_file))
    if data is None:
        if os.path.isdir(os.fspath(vocab_file)):
            raise VocabError(f"vocab file {vocab_file} is a folder; give the vocab.txt in it")
        if "://" not in os.fspath(vocab_file) and os.path.exists(os.fspath(vocab_file)):
            raise VocabError(f"vocab file {vocab_file} is {not_a_file(os.fspath(vocab_file))}, "
                             "not a regular file; give the vocab.txt file")
        raise VocabError(f"vocab file not found: {vocab_file}")
    if data.startswith(b"\xef\xbb\xbf"):
        raise VocabError(f"{vocab_file} starts with a UTF-8 byte-order mark (U+FEFF), which "
                         "would become part of its first token; save it as UTF-8 without one")
    # Lines end at \n, \r\n or \r alone (bytes.splitlines: not at U+2028 or U+0085,
    # which a token may hold); a multi-byte character never holds those bytes.
    tokens = []
    for number, line in enumerate(data.splitlines(), start=1):
        try:
            tokens.append(line.decode("utf-8"))
        except UnicodeDecodeError as e:  # a Latin-1 vocab: its tokens would match no text
            raise VocabError(f"{vocab_file}:{number}: not UTF-8 (byte 0x{line[e.start]:02x})"
                             f"{utf16_hint(line)}; save the vocabulary as UTF-8") from None
    while tokens and not tokens[-1]:
        tokens.pop()
    if not tokens:
        raise VocabError(f"vocab file is empty: {vocab_file}")
    seen: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        if not tok:  # (the original reads the token "" there, silently)
            raise VocabError(f"{vocab_file}:{i + 1}: an empty line among the tokens (a "
                             "damaged file? a line lost its token, and every later id "
                             "moved one up); restore the file, or, where a model was "
                             "trained with the line as a token, write a placeholder on it "
                             f"([unused_line{i + 1}])")
        if tok != tok.strip():  # (kept as written, the token had matched no word: [UNK])
            ends = _end_whitespace(tok)
            how = ("sed -i 's/^[[:space:]]*//; s/[[:space:]]*$//' FILE" if all(
                c in " \t\v\f" for c in ends) else "sed's [[:space:]] does not match "
                "every one of them: edit the line")
            raise VocabError(f"{vocab_file}:{i + 1}: token {tok!r} has whitespace at its "
                             f"ends ({_named(ends)}), which no word piece holds (the "
                             "original's load_vocab strips it: its model read "
                             f"{tok.strip()!r} there); remove it ({how})")
        if tok in seen:
            raise VocabError(
                f"{vocab_file}:{i + 1}: token {tok!r} repeats line {seen[tok] + 1}")
        seen[tok] = i
    missing = [t for t in SPECIAL_TOKENS if t not in seen]
    if missing:
        kind = (" (a JSON file? a vocabulary is one token per line: the vocab.txt beside "
                "it)" if _looks_json(data) else "")
        raise VocabError(f"{vocab_file} lacks the special token(s) {', '.join(missing)}"
                         + kind)
    if seen[PAD] != 0:
        raise VocabError(f"{vocab_file}: [PAD] must be id 0, found at id {seen[PAD]}")
    return tokens


def _end_whitespace(token: str) -> str:
    """The whitespace characters at `token`'s two ends."""
    return token[:len(token) - len(token.lstrip())] + token[len(token.rstrip()):]


def _named(chars: str) -> str:
    """Each distinct character as its code point and name ("U+00A0 NO-BREAK SPACE")."""
    return ", ".join(dict.fromkeys(f"U+{ord(c):04X} {unicodedata.name(c, 'CONTROL')}"
                                   for c in chars))


def _looks_json(data: bytes) -> bool:
    """Whether a file read as a vocabulary is JSON (tokenizer.json, vocab.json): an object,
    or a list whose first line is not a bracketed token as a vocabulary's "[PAD]" (a cut
    vocab.txt had been asked whether it was JSON)."""
    first = data.lstrip()[:1]
    if first == b"{":
        return True
    line = data.lstrip().split(b"\n", 1)[0].strip()
    return first == b"[" and not re.fullmatch(rb"\[[^\[\]\s]+\]", line)


def tokens_sha256(tokens: list[str]) -> str:
    """sha256 of a token list (one per line): a vocabulary's identity, not its path,
    which model folders and built records record as `vocab_sha256`."""
    return hashlib.sha256("\n".join(tokens).encode("utf-8")).hexdigest()


def _is_punctuation(char: str) -> bool:
    """BERT's punctuation: ASCII symbols, and every Unicode P* character."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _unmatchable_char(char: str) -> bool:
    """Whitespace splits the text and BERT's cleaning drops control characters."""
    return char.isspace() or unicodedata.category(char) == "Cc"


def is_word_piece(token: str) -> bool:
    """Whether WordPiece can ever emit `token` for some text.

    The text is split at whitespace and punctuation first, so a piece of more
    than one character that holds punctuation ([PAD], [unused0], <x>) never
    matches; tensorflow-text leaves such tokens out of its trie. Nor does a
    piece holding whitespace or a control character ("the ", a NUL), or longer
    than MAX_TRIE_TOKEN_BYTES, which `trie_tokens` keeps out of it.
    """
    body = token[2:] if token.startswith("##") else token
    if not body.strip() or _not_in_trie(token):
        return False
    return len(body) == 1 or not any(map(_is_punctuation, body))


def trie_tokens(tokens: list[str]) -> list[str]:
    """The vocabulary as tensorflow-text's WordPiece gets it: ids unchanged, and
    a token holding whitespace or a control character replaced by a name no
    text matches. Left in, tensorflow-text matched "the " across the space of
    "the theme", and a NUL in a token ended in a traceback; BERT's and
    transformers' tokenizers split at whitespace first, so they never emit one.
    So is a token whose body (without "##") is longer than tensorflow-text's
    limit, MAX_TRIE_TOKEN_BYTES of UTF-8 (it refused the whole vocabulary with a
    traceback): such a piece matches no text here, where the original's
    tokenizer could still emit it for a word of up to 200 characters.
    """
    return [f"[unmatchable{i}]" if _not_in_trie(t) else t for i, t in enumerate(tokens)]


# tensorflow-text's FastWordpieceTokenizer refuses a vocabulary holding a longer token.
MAX_TRIE_TOKEN_BYTES = 256


def _not_in_trie(token: str) -> bool:
    body = token[2:] if token.startswith("##") else token
    return (any(map(_unmatchable_char, token))
            or len(body.encode("utf-8", "surrogatepass")) > MAX_TRIE_TOKEN_BYTES)


def check_word_pieces(tokens: list[str], vocab_file: str) -> None:
    """Refuses a vocabulary that cannot tokenize any text: special tokens only.

    Raises:
      VocabError: one line naming the file (tensorflow-text would end in a
        traceback: "No valid vocab tokens were found to build the trie").
    """
    if not any(map(is_word_piece, tokens)):
        shown = ", ".join(tokens[:6]) + (", ..." if len(tokens) > 6 else "")
        raise VocabError(f"{vocab_file} holds no word piece, only special tokens ({len(tokens)}: "
                         f"{shown}): it cannot tokenize any text; use the vocabulary the "
                         "model was trained with")


def resolve_strip_accents(do_lower_case: bool, strip_accents: bool | None) -> bool:
    """BERT's rule: accents are stripped with lower-casing unless told not to."""
    return do_lower_case if strip_accents is None else strip_accents
