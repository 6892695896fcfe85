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

received: int | None = None  # the signal number, until a gate takes it up


def take() -> int | None:
    """The recorded signal (None: none), cleared."""
    global received
    signum, received = received, None
    return signum


def pending() -> int | None:
    """The recorded signal (None: none), left recorded."""
    return received
