"""A watcher process that ends this one if its multi-process start-up hangs.

Both backends' multi-process runs (TensorFlow's MultiWorkerMirroredStrategy,
JAX's jax.distributed) wait for their peers inside C++ code that holds the
GIL, where no Python thread, timer or signal handler of the waiting process
can run. `StartupWatchdog` is a small separate process that can still end
it, with one line. Nothing here imports TensorFlow or JAX.
"""

from __future__ import annotations

import os
import subprocess
import sys

_WATCHDOG = """
import os, select, signal, sys
pid, timeout, message = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
if select.select([sys.stdin], [], [], timeout)[0]:
    sys.exit(0)  # the pipe closed: disarmed, or the process is gone
sys.stderr.write(message + "\\n")
sys.stderr.flush()
os.kill(pid, signal.SIGKILL)
"""


class StartupWatchdog:
    """Ends this process with `message` on stderr unless `disarm` comes within timeout_s.

    A process that waits for its peers waits inside C++ start-up code (TF's
    cluster, jax.distributed's coordinator), holding the GIL, where no Python
    thread, timer or signal handler of its own can run (their own timeouts do
    not cover this wait, or abort with C++ stack traces). A small watcher
    process can still end it: it
    waits on a pipe that `disarm` (or this process's exit) closes, and past
    the timeout prints the message and kills this process (exit status 137).
    """

    def __init__(self, timeout_s: float, message: str):
        read, self._write = os.pipe()
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(timeout_s), message],
            stdin=read)
        os.close(read)

    def disarm(self) -> None:
        if self._write is not None:
            os.close(self._write)
            self._write = None
            self._proc.wait()
