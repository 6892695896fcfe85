"""Text as the readers take it: lone surrogates (no UTF-8 form) replaced, and lines
split at newlines only."""

from __future__ import annotations

import unicodedata


def has_lone_surrogate(text: str) -> bool:
    """Whether `text` holds a code point of U+D800-U+DFFF (JSON's "\\ud800": valid JSON,
    no UTF-8 form)."""
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def without_lone_surrogates(text: str) -> str:
    """`text` with each lone surrogate (`has_lone_surrogate`, which TensorFlow will not
    convert) replaced by U+FFFD, one character for one, so character offsets keep
    their meaning; the graph reads invalid UTF-8 the same way."""
    if not has_lone_surrogate(text):
        return text
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def newline_lines(text: str) -> list[str]:
    """`text`'s lines split at "\\n" only (and a "\\r" before it dropped): str.splitlines
    also splits at U+2028, U+2029, U+0085, form feeds and lone "\\r", which a line of
    text (or a JSON string written with ensure_ascii=False) may hold."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the last line's end
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _deleted(c: str) -> bool:
    """Whether the tokenizer's cleaning (tokenizer.clean_text, the original's _clean_text)
    deletes the character: NUL and controls but tab and line ends, format, private-use
    and unassigned code points, U+FFFD (what a lone surrogate becomes)."""
    o = ord(c)
    return (o <= 0x08 or o in (0x0B, 0x0C) or 0x0E <= o <= 0x1F or 0x7F <= o <= 0x9F
            or o == 0xFFFD or 0xD800 <= o <= 0xDFFF
            or unicodedata.category(c) in ("Cf", "Co", "Cn"))


def has_visible_text(text: str) -> bool:
    """Whether `text` keeps a character once the tokenizer's cleaning deleted its
    characters (_deleted) and whitespace split it: a text of zero-width spaces (U+200B)
    or controls alone is as empty as one of spaces. A code point this Python's Unicode
    tables do not assign counts as kept: TensorFlow's newer tables may assign it (a
    CJK Extension H character becomes [UNK]); a text the tokenizer keeps nothing of is
    refused where it is tokenized."""
    return any(not c.isspace() and (not _deleted(c) or unicodedata.category(c) == "Cn")
               for c in text)


def invisible_character(text: str) -> str | None:
    """The first character of `text` the tokenizer's cleaning deletes (_deleted: a
    control, format character such as U+200B, private-use or unassigned code point),
    or that prints as nothing though kept (_BLANK: the Hangul fillers, the combining
    grapheme joiner, the braille blank), or None: a name holding one prints as another
    without it."""
    return next((c for c in text if _deleted(c) or c in _BLANK), None)


# Letters and marks (not format characters) that print as nothing: Hangul's fillers
# (U+115F, U+1160, U+3164, U+FFA0), the combining grapheme joiner, the braille blank.
_BLANK = frozenset("\u115f\u1160\u3164\uffa0\u034f\u2800")


def twins(names, key) -> tuple[str, str] | None:
    """The first two different names of `names` with one key(name), or None (a key of
    None: the name has no twin)."""
    seen: dict = {}
    for name in names:
        k = key(name)
        if k is not None and seen.setdefault(k, name) != name:
            return seen[k], name
    return None


def normalization_twins(names) -> tuple[str, str] | None:
    """Two of `names` that are one text in two Unicode spellings (equal once NFC
    normalizes them: "café" with U+00E9 and with e + U+0301), or None: they print
    alike and are two classes."""
    return twins(names, lambda name: unicodedata.normalize("NFC", name))
