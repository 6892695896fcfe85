"""A seeded generator of odd input strings (bytes) for the text signatures' fuzz tests.

`odd_texts(n, seed)` mixes: words of many scripts (Latin, Greek, Cyrillic,
Arabic, Hebrew, Devanagari, Thai, CJK, Hangul, emoji, math letters),
combining marks (stacked, or leading a string), control and format
characters (C0/C1, zero-width, bidi, BOM, noncharacters), invalid UTF-8
(stray continuation bytes, truncated sequences, overlong forms, encoded
surrogates, F5-FF), Unicode spaces, characters that normalize to several
pieces ("…", "⑴", "㈱", "⒜", "㍻", "ﷻ", "ﷺ" and their blocks), long words
(past FastBertTokenizer's 100-byte word limit), very long strings and empty
or whitespace-only ones. Deterministic for a seed (no dependency beyond the
standard library).
"""

from __future__ import annotations

import random

import numpy as np

SCRIPTS = [(0x41, 0x5A), (0x61, 0x7A), (0xC0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF),
           (0x5D0, 0x5EA), (0x620, 0x64A), (0x905, 0x939), (0xE01, 0xE30), (0x4E00, 0x9FFF),
           (0x3040, 0x30FF), (0xAC00, 0xD7A3), (0x1F300, 0x1F64F), (0x1D400, 0x1D7FF),
           (0x20000, 0x2A6DF)]
COMBINING = [(0x300, 0x36F), (0x483, 0x489), (0x591, 0x5BD), (0x64B, 0x65F), (0x93C, 0x94D),
             (0x1AB0, 0x1AFF), (0x20D0, 0x20FF), (0xFE20, 0xFE2F)]
CONTROLS = [chr(c) for c in list(range(0x00, 0x20)) + list(range(0x7F, 0xA0))] + [
    "\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u202a", "\u202e", "\u2066", "\u2069",
    "\ufeff", "\ufffe", "\uffff", "\U000e0001", "\u00ad", "\u061c", "\U0010ffff"]
SPACES = [" ", "\t", "\n", "\r", "\u00a0", "\u1680", "\u2000", "\u2007", "\u200a", "\u2028",
          "\u2029", "\u202f", "\u205f", "\u3000", "\x0b", "\x0c", "\x85"]
MULTI_PIECE = ["…", "⑴", "㈱", "⒜", "㍻", "ﷻ", "ﷺ", "ﬁ", "ﬃ", "½", "™", "℡", "㎏", "ǆ", "ﾊﾟ",
               "ﷲ", "ﷰ", "ẛ̣", "ΐ", "ŉ", "⁇", "‥", "㏒", "㋿", "🄐", "🅐"]
MULTI_PIECE_BLOCKS = [(0x2460, 0x24FF), (0x3200, 0x33FF), (0xFB00, 0xFB4F), (0xFDF0, 0xFDFD),
                      (0xFE30, 0xFE6B), (0xFF01, 0xFFEE), (0x1F100, 0x1F1AD), (0x2150, 0x218B)]
INVALID_UTF8 = [b"\x80", b"\xbf", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xc0\x80", b"\xc1\xbf",
                b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5",
                b"\xf8\x88\x80\x80\x80", b"\xfe", b"\xff", b"\xfe\xff", b"\xff\xfe"]
ASCII_WORDS = ("the model reads a token and the discriminator learns which token was replaced "
               "hello world cafe x y z 1 2024 3.14 e-mail don't ,.;:!?()[]{}<>@#$%^&*_+=|~`"
               ).split()


def _char(rng: random.Random, ranges) -> str:
    lo, hi = rng.choice(ranges)
    return chr(rng.randint(lo, hi))


def _word(rng: random.Random, kind: str) -> bytes:
    if kind == "ascii":
        return rng.choice(ASCII_WORDS).encode()
    if kind == "script":
        return "".join(_char(rng, SCRIPTS) for _ in range(rng.randint(1, 8))).encode()
    if kind == "combining":
        base = rng.choice(["", "a", "e", "ß", "я", "ह", "中", _char(rng, SCRIPTS)])
        return (base + "".join(_char(rng, COMBINING)
                               for _ in range(rng.randint(1, 6)))).encode()
    if kind == "control":
        return "".join(rng.choice(CONTROLS + ["a", "b"]) for _ in range(rng.randint(1, 4))).encode()
    if kind == "invalid":
        parts = [rng.choice(INVALID_UTF8) if rng.random() < 0.5 else rng.choice(ASCII_WORDS).encode()
                 for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.3:
            parts.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 12))))
        return b"".join(parts)
    if kind == "multi":
        chars = [rng.choice(MULTI_PIECE) if rng.random() < 0.6 else _char(rng, MULTI_PIECE_BLOCKS)
                 for _ in range(rng.randint(1, 5))]
        glue = rng.choice(["", "", "a", "x", " ", "中", "é"])
        return glue.join(chars).encode()
    if kind == "long_word":
        return (rng.choice(["a", "é", "中", "ab", "…", "⑴"]) * rng.randint(40, 200)).encode()
    raise ValueError(kind)


KINDS = ("ascii", "script", "combining", "control", "invalid", "multi", "long_word")


def odd_text(rng: random.Random) -> bytes:
    r = rng.random()
    if r < 0.04:
        return b""
    if r < 0.08:
        return "".join(rng.choice(SPACES) for _ in range(rng.randint(1, 6))).encode()
    if r < 0.10:  # very long: thousands of words (truncated in-graph)
        kinds = rng.sample(KINDS, 3)
        return b" ".join(_word(rng, rng.choice(kinds)) for _ in range(rng.randint(1000, 3000)))
    kinds = rng.sample(KINDS, rng.randint(1, 3))
    words = [_word(rng, rng.choice(kinds)) for _ in range(rng.randint(1, 12))]
    out = b""
    for w in words:  # glued, or split by any kind of space
        out += w if rng.random() < 0.2 else rng.choice(SPACES).encode() + w
    return out


def odd_texts(n: int, seed: int = 0) -> list[bytes]:
    """n odd strings; the first ones are fixed cases (empty, the multi-piece characters)."""
    fixed = [b"", b" ", "…".encode(), "ﷺ".encode(), "a…b ⑴ ㈱ ⒜ ㍻ ﷻ ﷺ".encode(),
             "\u0301".encode(), b"\xff", b"x" * 300]
    rng = random.Random(seed)
    return (fixed + [odd_text(rng) for _ in range(max(0, n - len(fixed)))])[:n]


def batches(texts: list, seed: int = 0, sizes=(1, 2, 3, 5, 8, 13, 32, 64)) -> list[list]:
    """texts cut into consecutive batches of varied sizes."""
    rng = random.Random(seed + 1)
    out, i = [], 0
    while i < len(texts):
        k = rng.choice(sizes)
        out.append(texts[i:i + k])
        i += k
    return out


FUZZ_DEFAULT = (300, 0)  # the default suite's strings: (how many, seed)


def fuzz_jobs(exports, texts, seed):
    """load_check.py jobs sending `texts` (in batches) to ner, mrpc and squad, and their
    (export, inputs)."""
    jobs, meta = [], []
    for batch in batches(texts, seed):
        arr = np.array(batch, object)
        other = arr[::-1].copy()
        for name, inputs in (("ner", {"text": arr}),
                             ("mrpc", {"text": arr, "text_pair": other}),
                             ("squad", {"question": other, "context": arr})):
            jobs.append({"path": exports[name][1], "signature": "serving_default",
                         "inputs": inputs})
            meta.append((name, inputs))
    return jobs, meta
