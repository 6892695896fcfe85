"""How the processes of a multi-process run end once they ended their work together.

The chief of a TensorFlow multi-worker run hosts the cluster's coordination
service. A worker still in its exit hooks (Python's finalization, TensorFlow's
teardown: a second or more, longer on a loaded machine) when the chief has gone
has its next heartbeat refused, and TensorFlow logs an UNAVAILABLE error with a
gRPC dump after the worker's last line ("interrupted at step N; ...", or the
end of a finished run), as if the run had failed.

So a run whose processes ended together (trained to the end, or stopped at the
step they agreed on) meets once more: the backend that started the run
registers a meeting (`register`), and the command line calls `end_together`
with the exit status. Every process waits for the others there; a process other
than the chief then ends at once (its output flushed, without its exit hooks:
it holds no writer, the chief writes every file), so that none outlives the
chief. A meeting that fails (a peer already gone, which its own error
explained, or one still busy after `END_TIMEOUT_S`) leaves the normal exit.

And how they start: `port_in_use`, the check both backends make of a process's own
server port before their framework binds it, and `address_port`, how they read one.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

# How long a process waits at the end for the others of its run (the chief may
# still be writing the final weights or a fine-tuning run's predictions).
END_TIMEOUT_S = 300.0

# The registered meeting: meet(timeout_s) -> True where this process is to leave
# at once (the others have met it, and it is not the chief).
_meeting: Callable[[float], bool] | None = None


def register(meet: Callable[[float], bool]) -> None:
    """Sets the meeting `end_together` runs (the backend, at program start)."""
    global _meeting
    _meeting = meet


def end_together(status: int) -> None:
    """Meets the run's other processes, once, where a meeting was registered; a
    process that is to leave at once exits here with `status`. Returns otherwise
    (no meeting, the chief, or a failed meeting: the caller exits as usual)."""
    global _meeting
    meet, _meeting = _meeting, None
    if meet is None or not meet(END_TIMEOUT_S):
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more to say on it
            pass
    os._exit(status)


def address_port(address: str) -> int | None:
    """The port of a `host:port` address (after its last colon), 1 to 65535; None for an
    address without a host or with another port. ASCII digits only: `²` passes
    str.isdigit, not int (a ValueError traceback before)."""
    host, _, port = address.rpartition(":")
    if not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        return None
    return int(port)


def port_in_use(port: int) -> bool:
    """Whether another process holds `port` on this host (a bind to it fails with
    EADDRINUSE): a multi-process run's own server port, checked before its framework
    starts a server there and fails with a traceback or a C++ abort.

    The probe binds as those servers do, with SO_REUSEADDR: connections of a run that
    just ended (TCP's TIME_WAIT, about a minute) leave the port free to them, and a
    prompt rerun on the same ports had been refused as "in use"; a listener still
    holds it."""
    import errno
    import socket

    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("0.0.0.0", port))
    except OSError as e:
        if e.errno != errno.EADDRINUSE:
            raise
        return True
    finally:
        probe.close()
    return False

