"""Helpers shared by the `python -m electra_tf.*` entry points.

Library code raises ordinary exceptions; entry points turn the expected ones
(bad input) into one clear line on stderr and exit status 2, and leave
tracebacks for real bugs.
"""

from __future__ import annotations

import glob
import os
import sys
import tempfile
import time
from typing import Callable

from absl import flags

# Entry points import this module before TensorFlow: keep the C++ runtime's
# INFO lines off the console (warnings and errors still show).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


class InputError(ValueError):
    """Bad user input: a missing file, an empty corpus, a bad value."""


def expand_files(patterns: str, what: str = "corpus") -> list[str]:
    """Comma-separated globs -> sorted unique file paths (directories skipped).

    Raises:
      InputError: a pattern matches nothing.
    """
    files: set[str] = set()
    for pattern in (p.strip() for p in patterns.split(",")):
        if not pattern:
            continue
        matched = [f for f in glob.glob(os.path.expanduser(pattern)) if os.path.isfile(f)]
        if not matched:
            raise InputError(f"{what} pattern {pattern!r} matches no file")
        files.update(matched)
    if not files:
        raise InputError(f"no {what} file given")
    return sorted(files)


def tri_state(value: str) -> bool | None:
    """'auto' -> None, 'true'/'false' -> bool (for BERT's strip_accents)."""
    return {"auto": None, "true": True, "false": False}[value.lower()]


def define_strip_accents_flag() -> None:
    flags.DEFINE_enum(
        "strip_accents", "auto", ["auto", "true", "false"],
        "Strip accents (NFD, drop combining marks). 'auto' follows do_lower_case, as BERT.")


def atomic_write_text(path: str, text: str) -> None:
    """Writes a file under a temporary name in the same folder, then renames it."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def run_cli(main: Callable[[], None]) -> None:
    """Runs an entry point; expected input errors exit 2 with one line."""
    from absl import logging

    from electra_tf.config import ConfigError
    from electra_tf.finetuning.base import TaskDataError
    from electra_tf.tokenization import VocabError

    logging.set_verbosity(logging.WARNING)  # TF's INFO lines (checkpoint sharding, ...)
    try:
        main()
    except (InputError, ConfigError, VocabError, TaskDataError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


class Progress:
    """Throttled progress lines on stderr: at most one every `every` seconds."""

    def __init__(self, label: str, total: int | None = None, unit: str = "lines",
                 every: float = 5.0):
        self.label, self.total, self.unit, self.every = label, total, unit, every
        self.start = self._last = time.monotonic()

    def update(self, done: int, extra: str = "", force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.every:
            return
        self._last = now
        rate = done / max(now - self.start, 1e-9)
        pct = f" ({100.0 * done / self.total:5.1f}%)" if self.total else ""
        of = f"/{self.total:,}" if self.total else ""
        print(f"[{self.label}] {done:,}{of} {self.unit}{pct}, {rate:,.0f} {self.unit}/s"
              f"{', ' + extra if extra else ''}", file=sys.stderr, flush=True)
