"""What the `python -m electra_tf.*` entry points share, and nothing else uses.

Library code raises ordinary exceptions (`errors.InputError` and the other
bad-input types); entry points turn those into one clear line on stderr and
exit status 2, and leave tracebacks for real bugs. No library module imports
this one.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

from absl import flags

# Entry points import this module before TensorFlow: keep the C++ runtime's
# INFO lines off the console (warnings and errors still show).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


def tri_state(value: str) -> bool | None:
    """'auto' -> None, 'true'/'false' -> bool (for BERT's strip_accents)."""
    return {"auto": None, "true": True, "false": False}[value.lower()]


def define_strip_accents_flag() -> None:
    flags.DEFINE_enum(
        "strip_accents", "auto", ["auto", "true", "false"],
        "Strip accents (NFD, drop combining marks). 'auto' follows do_lower_case, as BERT.")


def run_cli(main: Callable[[], None]) -> None:
    """Runs an entry point; expected input errors exit 2 with one line."""
    from absl import logging

    from electra_tf.config import ConfigError
    from electra_tf.errors import InputError
    from electra_tf.finetuning.base import TaskDataError
    from electra_tf.tokenization import VocabError

    logging.set_verbosity(logging.WARNING)  # TF's INFO lines (checkpoint sharding, ...)
    try:
        main()
    except (InputError, ConfigError, VocabError, TaskDataError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
