"""Host-side prefetch: a thread runs an iterator ahead of its consumer.

    batches = prefetch(packed_pretraining_batches(...), depth=4)

While the device runs a step, the next batches are read and masked (NumPy
gives up the GIL in its array work). The items come in the iterator's order,
so a seeded pipeline stays exactly reproducible; an exception the iterator
raises reaches the consumer after the items before it. `close()` (or
dropping the iterator) stops the thread.
"""

from __future__ import annotations

import queue
import threading
from typing import Iterator, TypeVar

T = TypeVar("T")
_END = object()


class prefetch(Iterator[T]):  # noqa: N801 (used as a function)
    """Iterates `iterator` in a daemon thread, up to `depth` items ahead.

    Args:
      iterator: any iterator; it is advanced in the thread only.
      depth: items kept ready (>= 1).
    """

    def __init__(self, iterator: Iterator[T], depth: int = 4):
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self._queue: queue.Queue = queue.Queue(depth)
        self._stop = threading.Event()
        self._done = False
        # The thread holds the queue and the event, not self: dropping this object
        # (an evaluation that reads a few batches) stops it through __del__.
        self.thread = threading.Thread(target=_fill, args=(iterator, self._queue, self._stop),
                                       daemon=True, name="electra_tf-prefetch")
        self.thread.start()

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        item, error = self._queue.get()
        if item is _END:
            self._done = True
            if error is not None:
                raise error
            raise StopIteration
        return item

    def close(self) -> None:
        """Stops the thread (it ends at its next item)."""
        self._done = True
        self._stop.set()

    def __del__(self):
        self._stop.set()


def _put(items: queue.Queue, stop: threading.Event, item) -> bool:
    while not stop.is_set():
        try:
            items.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def _fill(iterator: Iterator, items: queue.Queue, stop: threading.Event) -> None:
    try:
        for item in iterator:
            if not _put(items, stop, (item, None)):
                return
    except BaseException as e:  # handed to the consumer, raised there
        _put(items, stop, (_END, e))
        return
    _put(items, stop, (_END, None))
