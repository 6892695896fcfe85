"""The error types that mean "bad input", shared by the library and the CLIs.

Library code raises these (or `config.ConfigError`, `tokenization.VocabError`,
`finetuning.base.TaskDataError`); the `python -m` entry points turn every one
of them into a single `error: ...` line and exit status 2 (`cli.run_cli`).
Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input: a missing file, an empty corpus, a bad value."""
