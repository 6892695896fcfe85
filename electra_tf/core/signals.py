"""A stop signal that came before a training loop could hold it.

The command line's SIGTERM handler raises (`cli.Terminated`) so that start-up
stops at once; a raise that lands in a library's callback (a garbage-collection
hook) is printed as "Exception ignored" and lost, and the run would train on.
The handler also records the signal here, and the training loop's gate
(`training.loop.InterruptGate`) takes it up when it opens. A gate that closes on
an error (a run that diverged) with a signal pending records it here again, so
that what runs the loops (a group of trials) stops rather than starting another.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable

received: int | None = None  # the signal number, until a gate takes it up

# Set by the command line (cli.run_command), never by a Python session or a test that
# runs a loop in its own process: the training loops' gate then watches for a second
# signal it cannot take up (`Watcher`), and leaves the process at once on one.
leave_at_once = False


# One lock for the lines of the main thread and of the watcher's thread: print() writes
# its text and its newline in two calls, and a line the watcher printed between them
# ran on after another's text (`... eta 2400.7 minSIGTERM: stopping ...`).
_say_lock = threading.RLock()


def say(line: str, stream=None) -> None:
    """Writes `line` and its newline to `stream` (sys.stderr) in one call, flushed,
    never inside another thread's line."""
    stream = sys.stderr if stream is None else stream
    with _say_lock:
        stream.write(line + "\n")
        stream.flush()


def take() -> int | None:
    """The recorded signal (None: none), cleared."""
    global received
    signum, received = received, None
    return signum


def pending() -> int | None:
    """The recorded signal (None: none), left recorded."""
    return received


# How long the main thread has to take up a second signal before the watcher ends the
# process: Python runs a handler within a few lines of bytecode; a main thread that has
# not within seconds is inside a call that runs none (a compiled chunk of steps).
GRACE_S = 3.0


class Watcher:
    """Sees each SIGINT and SIGTERM the moment it comes, where Python's handler waits.

    Python runs a signal's handler in the main thread, between lines of Python; a
    main thread inside a compiled chunk of steps (one TensorFlow call of minutes on
    CPU) runs it only when the chunk ends, so a Ctrl-C went unanswered and a second
    one too. The C-level handler also writes the signal's number to the wakeup file
    descriptor (signal.set_wakeup_fd) at once; a thread reading it here prints
    `first_line(signum)` on the first signal, and on a second, if `handled()` (the
    Python handler having taken it up) is still False GRACE_S later, prints
    `leave_line(signum)` and ends the process without its exit hooks, status 128 +
    the first signal's number. Its files are whole: every write is atomic.

    `start` does nothing off the main thread or where another watcher holds the
    wakeup descriptor (asyncio's); `stop` ends the watch (before a handler that
    would run is restored), once the signals that came are read: the main thread
    may have taken up a first one and closed the gate before this thread ran, and
    its line still comes before the loop's own.
    """

    def __init__(self, handled: Callable[[], bool], first_line: Callable[[int], str],
                 leave_line: Callable[[int], str], first: int | None = None,
                 grace_s: float | None = None):
        self._handled, self._first_line, self._leave_line = handled, first_line, leave_line
        self._first = first  # a signal the gate took up before the watch began
        self._grace_s = GRACE_S if grace_s is None else grace_s
        self._closed = threading.Event()
        self._thread = None
        self._fds: tuple[int, int] | None = None

    def start(self) -> Watcher:
        if threading.current_thread() is not threading.main_thread():
            return self
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)  # set_wakeup_fd's rule: the C handler never waits
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        if previous != -1:  # another's: left to it
            signal.set_wakeup_fd(previous)
            os.close(read_fd)
            os.close(write_fd)
            return self
        self._fds = (read_fd, write_fd)
        self._thread = threading.Thread(target=self._watch, name="electra_tf-signals",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._fds is None:
            return
        self._closed.set()
        signal.set_wakeup_fd(-1)
        read_fd, write_fd = self._fds
        os.close(write_fd)  # the thread's read ends (end of file)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            os.close(read_fd)
        self._fds = None

    def _watch(self) -> None:
        read_fd = self._fds[0]
        first = self._first
        while True:  # to the pipe's end: `stop` closes its other end
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if not data:
                return
            for signum in data:  # those that came before `stop` too: the first is said
                if signum not in (signal.SIGINT, signal.SIGTERM):
                    continue
                if first is None:
                    first = signum
                    say(self._first_line(signum))
                    continue
                if self._closed.wait(self._grace_s) or self._handled():
                    return  # the loop stopped, or will at its next stop point
                say(self._leave_line(signum))
                sys.stdout.flush()
                os._exit(128 + first)


def name(signum: int) -> str:
    """How a user sent it: "Ctrl-C" for SIGINT, else the signal's name (SIGTERM)."""
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
