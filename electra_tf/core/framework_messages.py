"""The framework error texts electra_tf reads: every pattern once, here.

Where an error's type says what happened, callers test the type (a
TensorFlow PermissionDeniedError is a write the file system refused; a
DataLossError in the input, a corrupt record), and where a check before the
run can find a fault, it does (training/preflight.py, data/tfrecord_reader.py:
the first record of every file). What only the message tells is read here:

- TensorFlow, a bad record met mid-run (InvalidArgumentError, which is also
  every other bad argument): a record of another length or without a feature,
  a token id outside the embedding table; and the byte offset of a corrupt
  record (DataLossError), which names no file;
- TensorFlow, a full disk or quota (ResourceExhaustedError, which is also
  out of memory);
- TensorFlow, which task of a multi-worker cluster stopped (UnavailableError);
- JAX, a collective of a multi-host run whose peer is gone (its runtime error
  type is every runtime error's).

tests/test_framework_messages.py provokes each error from the framework itself
and checks that its pattern still matches (the multi-worker and multi-host
ones: the slow tests that kill a peer, tests/training/test_training_faults.py
and test_jax_multihost.py), so that a change of wording fails a test instead
of turning a one-line error into a traceback. Nothing here imports a
framework: the functions read the message text.
"""

from __future__ import annotations

import errno
import re

# === TensorFlow: tf.data and the model meet a bad record ===
# TFRecordDataset's DataLossError: the record's byte offset, not its file.
_CORRUPT_RECORD = re.compile(r"(corrupted|truncated) record at (\d+)")
# tf.io.parse_example with FixedLenFeature (data/features.py): a record of
# another length, or one without the feature.
_MISSHAPED_RECORD = re.compile(r"Number of int64 values != expected[^\n\]]*"
                               r"|Feature: \w+ \(data type: int64\) is required[^\n\]]*")
# The embedding lookup's bounds check (tf.gather on CPU) on a token id.
_ID_OUT_OF_RANGE = re.compile(r"indices\[[^\]]*\] = (-?\d+) is not in \[0, (\d+)\)")


def corrupt_record(message: str) -> tuple[str, int] | None:
    """("corrupted record at N", N) from a TFRecord DataLossError's message, else None."""
    match = _CORRUPT_RECORD.search(message or "")
    return (match.group(0), int(match.group(2))) if match else None


def misshaped_record(message: str) -> str | None:
    """What parse_example says of a record that does not fit the feature spec, else None."""
    match = _MISSHAPED_RECORD.search(message or "")
    return match.group(0).strip() if match else None


def id_out_of_range(message: str) -> tuple[int, int] | None:
    """(token id, table rows) from the embedding lookup's bounds error, else None."""
    match = _ID_OUT_OF_RANGE.search(message or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


# === TensorFlow: a write the file system refuses ===
# strerror(ENOSPC), strerror(EDQUOT) and strerror(EFBIG), which TensorFlow's IOError
# quotes ("PATH; No space left on device"; EFBIG as an OutOfRangeError); EACCES, EPERM
# and EROFS are a PermissionDeniedError.
DISK_FULL = ("No space left on device", "Disk quota exceeded", "File too large")
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # DISK_FULL's, in its order


def disk_full_line(message: str) -> str | None:
    """The line of a ResourceExhaustedError's (OutOfRangeError's) message that says the
    disk is full (the file too large), else None (out of memory, a dataset's end: the
    types' other causes). TensorFlow's "PATH; No space left on device [Op:WriteFile]"
    reads "PATH: No space left on device", as Python's OSError says it, and PATH is the
    file written where TensorFlow named its temporary (a SavedModel's
    "saved_model.pb.tmp<hex>", which it removed)."""
    line = next((line for line in (message or "").splitlines()
                 if any(cause in line for cause in DISK_FULL)), None)
    if line is None:
        return None
    causes = "|".join(DISK_FULL)
    line = re.sub(rf"(?:\.tmp[0-9a-f]+)?; ({causes})", r": \1", line)
    return re.sub(r"\s*\[Op:\w+\]\s*$", "", line)


def disk_full_errno(message: str) -> int:
    """The errno of the cause disk_full_line finds in `message`; 0 where it finds none."""
    line = disk_full_line(message) or ""
    return next((code for cause, code in zip(DISK_FULL, DISK_FULL_ERRNOS) if cause in line), 0)


def without_function_node(text: str) -> str:
    """`text` without TensorFlow's "{{function_node ...}}" annotations."""
    return re.sub(r"\{\{[^}]*\}\}\s*", "", text)


# === TensorFlow: a multi-worker peer is down (UnavailableError) ===
def unhealthy_tasks(message: str) -> list[tuple[str, str]]:
    """The (job, task index) pairs the coordination service reports as unhealthy
    ("... tasks are unhealthy ...: /job:worker/replica:0/task:1"), sorted; [] if none."""
    down = message.split("unhealthy", 1)[1] if "unhealthy" in message else ""
    return sorted(set(re.findall(r"/job:(\w+)/replica:\d+/task:(\d+)", down)))


def unreachable_tasks(message: str) -> list[tuple[str, str]]:
    """The (job, task index) pairs gRPC could not reach ("... from remote target
    /job:worker/replica:0/task:0 while calling ..."), sorted; [] if none."""
    return sorted(set(re.findall(r"remote target /job:(\w+)/replica:\d+/task:(\d+)", message)))


_GROUP_SIZES = re.compile(r"is joining a group with size\s*(\d+), but that group has "
                          r"size\s*(\d+)")


def group_sizes(message: str) -> tuple[int, int] | None:
    """(this task's group size, the group's) where a collective's InternalError says
    they differ: workers whose TF_CONFIG clusters list other numbers of tasks."""
    m = _GROUP_SIZES.search(message)
    return (int(m.group(1)), int(m.group(2))) if m else None


def first_reason(message: str) -> str:
    """The first line of a TensorFlow error that says something: without "Graph
    execution error:", its "Detected at node ... defined at" call stack and
    "{{function_node ...}}" annotations; "" if none."""
    for line in without_function_node(message).splitlines():
        line = line.strip()
        if not line or line.startswith(("Graph execution error", "Detected at node",
                                        'File "', "[[", "Additional GRPC error")):
            continue
        return line
    return ""


# === JAX: a multi-host collective whose peer is gone ===
# XLA's Gloo errors, the coordinator's heartbeat timeout, a peer's socket closed.
JAX_PEER_LOST = ("Gloo", "heartbeat timeout", "Connection reset", "Connection refused",
                 "UNAVAILABLE")


def jax_peer_lost(message: str) -> bool:
    """Whether a JAX runtime error's message says another process of the run is gone."""
    return any(s in (message or "") for s in JAX_PEER_LOST)
