"""Counts said in words, for the commands' lines: "1 trial", "3 trials"."""

from __future__ import annotations


def count(n: int, noun: str) -> str:
    """`n` and `noun`, plural where n is not 1 ("1 text", "0 texts", "2 optimizer
    variables")."""
    return f"{n} {noun}" + ("" if n == 1 else "s")
