"""TensorBoard scalars, through tf.summary or, without TensorFlow, the tensorboard package.

A loop that reads its data through TensorFlow writes with tf.summary; the JAX
loop on the NumPy input never imports TensorFlow and writes the same event
files with the tensorboard package alone (`EventWriter`).
"""

from __future__ import annotations

import functools
import itertools
import os
import socket
import time

import numpy as np

from electra_tf.training.loop import log


def summary_writer(logdir: str | None, tensorflow: bool = True):
    """A writer of TensorBoard scalars into `logdir` (None: one that writes nothing).

    Args:
      tensorflow: through tf.summary; False: with the tensorboard package
        alone (`EventWriter`: the JAX loop on the NumPy input, which never
        imports TensorFlow). Both write the same summaries: scalars as
        float32 tensors with the "scalars" plugin's metadata.

    Returns:
      An object for `write_scalars`, or None where summaries are off.
    """
    if logdir is None:
        return None
    if tensorflow:
        import tensorflow as tf

        return tf.summary.create_file_writer(logdir)
    try:
        return EventWriter(logdir)
    except ImportError as e:
        _warn_once(f"warning: no TensorBoard summaries: the tensorboard package is not "
                   f"installed ({e}); pip install tensorboard")
        return None


@functools.cache
def _warn_once(message: str) -> None:
    log("summaries", message)


class EventWriter:
    """TensorBoard scalars without TensorFlow, in the event files TensorFlow writes.

    The tensorboard package's own pieces: its RecordWriter (TFRecord framing),
    its Event and Summary protos and the scalar plugin's `scalar_pb`, over a
    local file named as tensorboard's EventFileWriter names one. (That
    writer itself opens files through tf.io.gfile, importing TensorFlow
    wherever it is installed.)
    """

    _uid = itertools.count()

    def __init__(self, logdir: str):
        from tensorboard.compat.proto import event_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter

        os.makedirs(logdir, exist_ok=True)
        name = "events.out.tfevents.%010d.%s.%s.%s" % (
            time.time(), socket.gethostname(), os.getpid(), next(self._uid))
        self.path = os.path.join(logdir, name)
        self._writer = RecordWriter(open(self.path, "wb"))
        self._write(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))

    def _write(self, event) -> None:
        try:
            self._writer.write(event.SerializeToString())
            self._writer.flush()
        except OSError as e:  # (a full disk's error had named no file: the command's
            if not e.filename:  # line then said every file is renamed into place)
                e.filename = self.path
            raise

    def scalars(self, step: int, results: dict) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.plugins.scalar.summary_v2 import scalar_pb

        values = [scalar_pb(name, value).value[0] for name, value in results.items()
                  if np.ndim(value) == 0]
        self._write(event_pb2.Event(wall_time=time.time(), step=int(step),
                                    summary=summary_pb2.Summary(value=values)))


def write_scalars(writer, step: int, results: dict) -> None:
    """TensorBoard scalars (arrays in `results` are skipped) into a `summary_writer`."""
    if writer is None:
        return
    if isinstance(writer, EventWriter):
        writer.scalars(step, results)
        return
    import tensorflow as tf

    with writer.as_default(step=step):
        for name, value in results.items():
            if np.ndim(value) == 0:
                tf.summary.scalar(name, value)
    writer.flush()
