"""Tiny, deterministic fixtures shared by the whole suite."""

from __future__ import annotations

import os
import random
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

from electra_tf.tokenization import BERT_RESERVED_TOKENS  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORDS = ("the model reads a token and the discriminator learns which token was replaced "
         "by a small generator trained as a masked language model on every sentence of "
         "text in this corpus while sampling keeps the tokens plausible enough").split()


def make_corpus(num_docs: int, seed: int = 0, max_lines: int = 4, max_words: int = 8) -> str:
    """Pseudo-English: docs of 1..max_lines lines of 3..max_words words, blank-separated."""
    rng = random.Random(seed)
    docs = []
    for _ in range(num_docs):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, max_words)))
                 for _ in range(rng.randint(1, max_lines))]
        docs.append("\n".join(lines))
    return "\n\n".join(docs) + "\n"


def write_vocab(path, tokens) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")
    return str(path)


def tiny_vocab_tokens() -> list[str]:
    """BERT layout (specials at 0 and 100..103), the corpus words, some pieces and chars."""
    chars = list("abcdefghijklmnopqrstuvwxyz0123456789.,!?'-")
    pieces = ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"] + ["##ing", "##ed"]
    extra = ["hello", "world", "cafe", "中", "国", "人"]
    words = sorted(set(WORDS) - set(chars))
    return list(BERT_RESERVED_TOKENS) + words + extra + chars + pieces


def decode(tokenizer, ids) -> str:
    """Ids -> readable text for assertions: ## pieces joined, special tokens dropped."""
    from electra_tf.tokenization import SPECIAL_TOKENS

    words: list[str] = []
    for tok in tokenizer.convert_ids_to_tokens(ids):
        if tok in SPECIAL_TOKENS:
            continue
        if tok.startswith("##") and words:
            words[-1] += tok[2:]
        else:
            words.append(tok)
    return " ".join(words)


@pytest.fixture(scope="session")
def tiny_vocab(tmp_path_factory) -> str:
    return write_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt", tiny_vocab_tokens())


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(make_corpus(300, seed=1), encoding="utf-8")
    return str(path)


def run_module(module: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """Runs `python -m module args...` in a fresh process, from the repo root."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO)
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)
