"""Every error type that means "bad input", in one place.

Library code raises these; the `python -m` entry points turn every one of
them into a single `error: ...` line and exit status 2 (`cli.run_cli`).
Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input: a missing file, an empty corpus, a bad value."""


class ConfigError(ValueError):
    """A hyperparameter or run option has a bad name or value."""


class VocabError(ValueError):
    """The vocabulary file is missing, empty or lacks a special token."""


class TaskDataError(ValueError):
    """A task file is malformed; the message names the file and line."""


class RecordError(InputError):
    """A record read mid-run is corrupt or does not fit (the message names the file)."""


class RecordFileGone(RecordError):
    """A record file listed at the start is gone when read (moved or deleted mid-run)."""


class ConversionError(ConfigError):
    """A checkpoint does not convert: leftover, missing or misshapen variables."""


class Diverged(RuntimeError):
    """Training met a non-finite loss and stopped before saving it.

    Not bad input as such (a learning rate, or records the checks did not
    reach); the message says where it happened and what was kept.
    """


class WorkerLost(RuntimeError):
    """A worker process of a command's own pool (build_pretraining_data --num_processes)
    ended before its work was done (killed: out of memory, or by hand). One line, status
    1; what was written before is kept as it was."""


class PeerLost(RuntimeError):
    """Another process of a multi-process run went away mid-run; this one stops too.

    The entry points print the message and end the process at once: the
    interpreter's exit would wait in a shutdown barrier for the lost peer.
    """


# What cli.run_cli reports as one line.
BAD_INPUT = (InputError, ConfigError, VocabError, TaskDataError)


# A command's error or warning line quotes what it refuses (a label, an index, a
# header); a value of megabytes would make that line megabytes (`clipped`).
LONG_WORD_CHARS = 1000  # longer than any path a line names in practice
LONG_LINE_CHARS = 8000


def clipped(text: str) -> str:
    """`text` with each run of more than LONG_WORD_CHARS non-space characters cut to
    its start and end around `...[N characters]...`, and the whole cut the same way
    at LONG_LINE_CHARS: the line a command prints of a message quoting its input."""
    import re

    def cut(t: str, head: int, tail: int) -> str:
        return f"{t[:head]}...[{len(t) - head - tail:,} characters]...{t[-tail:]}"

    text = re.sub(r"\S{%d,}" % (LONG_WORD_CHARS + 1),
                  lambda m: cut(m.group(), 400, 100), text)
    return cut(text, 6000, 1000) if len(text) > LONG_LINE_CHARS else text
