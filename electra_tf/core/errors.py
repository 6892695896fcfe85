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


class ConversionError(ConfigError):
    """A checkpoint does not convert: leftover, missing or misshapen variables."""


class Diverged(RuntimeError):
    """Training met a non-finite loss and stopped before saving it.

    Not bad input as such (a learning rate, or records the checks did not
    reach); the message says where it happened and what was kept.
    """


class PeerLost(RuntimeError):
    """Another process of a multi-process run went away mid-run; this one stops too.

    The entry points print the message and end the process at once: the
    interpreter's exit would wait in a shutdown barrier for the lost peer.
    """


# What cli.run_cli reports as one line.
BAD_INPUT = (InputError, ConfigError, VocabError, TaskDataError)
