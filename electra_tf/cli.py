"""What the `python -m electra_tf.*` entry points share, and nothing else uses.

Library code raises ordinary exceptions (`errors.InputError` and the other
bad-input types); entry points turn those into one clear line on stderr and
exit status 2, and leave tracebacks for real bugs. No library module imports
this one.
"""

from __future__ import annotations

import os
import re
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


EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C


def run_cli(main: Callable[[], None]) -> None:
    """Runs an entry point: one line on stderr instead of a traceback for

    - bad input (InputError, ConfigError, VocabError, TaskDataError):
      `error: ...`, exit status 2;
    - Ctrl-C: the loops save a checkpoint and say so (training.loop.Interrupted:
      `interrupted at step N; checkpoint saved; rerun to resume`); elsewhere
      `interrupted`; exit status 130;
    - a multi-worker peer found down mid-run (tf.errors.UnavailableError), or
      a non-finite loss (errors.Diverged): `error: ...`, exit status 1.
    Anything else is a bug and keeps its traceback.
    """
    from absl import logging

    from electra_tf.errors import BAD_INPUT, Diverged

    logging.set_verbosity(logging.WARNING)  # TF's INFO lines (checkpoint sharding, ...)
    try:
        main()
    except BAD_INPUT as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt as e:
        print(str(e) or "interrupted", file=sys.stderr, flush=True)
        sys.exit(EXIT_INTERRUPTED)
    except Diverged as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except Exception as e:
        tf = sys.modules.get("tensorflow")
        if tf is None or not isinstance(e, tf.errors.UnavailableError):
            raise
        print(f"error: {_peer_down(e.message or '')}", file=sys.stderr)
        sys.exit(1)


def _peer_down(message: str) -> str:
    """One line for TensorFlow's UnavailableError: which task of the cluster stopped."""
    down = message.split("unhealthy", 1)[1] if "unhealthy" in message else ""
    tasks = sorted(set(re.findall(r"/job:(\w+)/replica:\d+/task:(\d+)", down)))
    if tasks:
        names = ", ".join(f"{job} {task}" for job, task in tasks)
        return (f"--strategy=multi_worker: {names} of TF_CONFIG's cluster stopped (its own "
                "log says why), so this worker stops too; rerun every worker to resume")
    reason = re.sub(r"\{\{[^}]*\}\}\s*", "", message).strip().splitlines()
    return ("--strategy=multi_worker: a worker of the cluster is down or cannot be reached ("
            + (reason[0][:300] if reason else "unavailable") + ")")
