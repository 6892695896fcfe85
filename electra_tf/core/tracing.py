"""What electra_tf hands tf.function: each function as an object of its own.

TensorFlow keeps its "N out of the last M calls to <function> triggered
tf.function retracing" count by the code a function runs, so that the closures
and bound methods of one definition share one count: every Predictor's text
graph, each fine-tuning run's prediction step in a process that runs several,
traced once each, were said to retrace (a warning per Predictor from the fifth
on, in a service that reloads its models). Given a callable object instead,
TensorFlow counts by the object. Nothing here imports a framework.
"""

from __future__ import annotations

from typing import Any, Callable


class OwnTraceCount:
    """`function`, called as it is, as an object of its own (see the module docstring)."""

    def __init__(self, function: Callable[..., Any]):
        self._function = function

    def __call__(self, *args, **kwargs):
        return self._function(*args, **kwargs)
