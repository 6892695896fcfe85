"""Reads the pre-training TFRecords without TensorFlow (for JAX-only machines).

The files are the ones `build_pretraining_data` writes (data/features.py):
TFRecord framing around serialized `tf.train.Example`s with three int64
features. This module reads them with NumPy alone:

- framing: uint64 length, masked CRC32C of the length, the data, masked
  CRC32C of the data (little-endian), as TensorFlow's record writer; both
  CRCs are checked, so a truncated or bit-flipped file is an error that names
  the file and the record, never silent garbage;
- the record: the protobuf wire format of Example -> Features ->
  map<string, Feature> -> Int64List (packed or not), which is all these
  records use.
CRC32C comes from `google-crc32c` (Google's maintained C implementation)
when it is installed, else from a table-driven fallback here.

Before a run, `check_records` looks at every file cheaply (its first record);
`locate_corrupt_record` names the file behind tf.data's "corrupted record at
N", which gives only a byte offset. Both read through a `FileSystem`: Python's
own (`LOCAL_FILES`, no TensorFlow) or tf.io.gfile's (`tensorflow_files()`,
remote paths such as gs:// too).
"""

from __future__ import annotations

import glob
import os
import struct
import time
from typing import BinaryIO, Callable, Iterator, NamedTuple

import numpy as np

from electra_tf.core import framework_messages
from electra_tf.core.errors import InputError, RecordError, RecordFileGone
from electra_tf.core.fileio import expand_files
from electra_tf.data.features import FEATURE_KEYS, PACKED_MAGIC, check_one_build

_MASK_DELTA = 0xA282EAD8


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of `data`."""
    try:
        import google_crc32c

        return google_crc32c.value(bytes(data))
    except ImportError:
        crc = 0xFFFFFFFF
        for byte in data:
            crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
        return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC: rotate right by 15, add a constant."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


GONE = "no longer there (moved or deleted since the run started)"
_READ_ERRORS = {"truncated": "is truncated", "length": "has a bad length checksum",
                "data": "has a bad data checksum"}


def read_records(path: str, files: FileSystem | None = None) -> Iterator[bytes]:
    """The records of one TFRecord file, CRC-checked (`_read_record`).

    Args:
      files: the file system to read through (default: local files).

    Raises:
      RecordError: a truncated record or a CRC mismatch (names file and record).
      RecordFileGone: no file at `path` (listed before, then moved or deleted).
    """
    try:
        opened = files.open(path) if files else open(path, "rb")
    except FileNotFoundError:  # (had been a traceback mid-run, the steps since a save lost)
        raise RecordFileGone(f"{path}: {GONE}") from None
    with opened as f:
        size = files.size(path) if files else os.fstat(f.fileno()).st_size
        offset, index = 0, 0
        while True:
            try:
                found = _read_record(f, offset, size)
            except _BadRecord as e:
                raise RecordError(f"{path}: record {index} {_READ_ERRORS[e.reason]} "
                                  "(corrupt TFRecord file)") from None
            if found is None:
                return
            data, offset = found
            yield data
            index += 1


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of a protobuf message (types 0, 1, 2, 5).

    Raises:
      ValueError: `buf` is a number where a message belongs (a record of another proto
        whose field has the number this reader expects a message at).
    """
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise ValueError("a number where the proto has a message (not a tf.train.Example)")
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = buf[pos:pos + size], pos + size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def _int64_list(feature: bytes) -> list[int]:
    """A tf.train.Feature's int64 values (ValueError: its list is of bytes or floats)."""
    values: list[int] = []
    for number, _, int64_list in _fields(feature):
        if number in (1, 2):  # Feature.bytes_list, float_list
            raise ValueError(f"a {'bytes' if number == 1 else 'float'} list, not int64")
        if number != 3:  # Feature.int64_list
            continue
        for field, wire, value in _fields(int64_list):
            if field != 1:
                continue
            if wire == 2:  # packed
                pos = 0
                while pos < len(value):
                    v, pos = _varint(value, pos)
                    values.append(v)
            else:
                values.append(value)
    # int64 travels as two's complement in 64 bits
    return [v - (1 << 64) if v >= 1 << 63 else v for v in values]


def parse_example(record: bytes, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """A serialized tf.train.Example -> {key: int64 array} for the int64 features `keys`."""
    out = {}
    for number, _, features in _fields(record):
        if number != 1:  # Example.features
            continue
        for field, _, entry in _fields(features):
            if field != 1:  # Features.feature (map entry)
                continue
            key = feature = None
            for n, wire, value in _fields(entry):
                if n == 1 and wire == 2:
                    key = bytes(value).decode("utf-8")
                elif n == 2:
                    feature = value
            if key in keys and feature is not None:
                try:
                    out[key] = np.asarray(_int64_list(feature), np.int64)
                except ValueError as e:
                    raise ValueError(f"its {key!r} is {e}") from None
    missing = [k for k in keys if k not in out]
    if missing:
        raise ValueError(f"the record has no int64 feature {missing[0]!r}")
    return out


# === Checking records before and during a run ===
class FileSystem(NamedTuple):
    """The file operations the record checks need."""

    glob: Callable[[str], list[str]]
    isdir: Callable[[str], bool]
    open: Callable[[str], BinaryIO]  # opens for reading bytes
    size: Callable[[str], int]
    errors: tuple  # what a failed read raises


LOCAL_FILES = FileSystem(glob.glob, os.path.isdir, lambda path: open(path, "rb"),
                         os.path.getsize, (OSError,))


def length_flag(what: str) -> str:
    """The flag that sets the length the records of `what` must have."""
    return "--phase2_max_seq_length" if what == "--phase2_train_data" else "--max_seq_length"


def tensorflow_files() -> FileSystem:
    """tf.io.gfile's file system (what tf.data reads through)."""
    import tensorflow as tf

    gfile = tf.io.gfile
    return FileSystem(gfile.glob, gfile.isdir, lambda path: gfile.GFile(path, "rb"),
                      lambda path: gfile.stat(path).length, (tf.errors.OpError, OSError))


class _BadRecord(Exception):
    """The record at an offset is truncated or fails its checksum.

    reason: "truncated", "length" (the length's checksum) or "data" (the data's).
    """

    def __init__(self, reason: str, offset: int):
        kind = "truncated" if reason == "truncated" else "corrupted"
        super().__init__(f"{kind} record at byte {offset}")
        self.reason = reason


def _read_record(f, offset: int, size: int) -> tuple[bytes, int] | None:
    """The TFRecord at `offset` of an open file of `size` bytes, and the next offset.

    Returns None at the end of the file. Raises _BadRecord (with the reason).
    Framing: uint64 length, masked CRC32C of it, the data, masked CRC32C of it.
    """
    if offset >= size:
        return None
    f.seek(offset)
    header = f.read(12)
    if len(header) < 12:
        raise _BadRecord("truncated", offset)
    if masked_crc(header[:8]) != struct.unpack("<I", header[8:])[0]:
        raise _BadRecord("length", offset)
    length = struct.unpack("<Q", header[:8])[0]
    if offset + 16 + length > size:
        raise _BadRecord("truncated", offset)
    data, footer = f.read(length), f.read(4)
    if masked_crc(data) != struct.unpack("<I", footer)[0]:
        raise _BadRecord("data", offset)
    return data, offset + 16 + length


def check_records(file_pattern: str | list[str], max_seq_length: int,
                  what: str = "--train_data", files: FileSystem | None = None,
                  vocab_size: int | None = None) -> list[str]:
    """Checks pre-training TFRecords before a run; returns the files.

    Cheap at any corpus size: it reads one record per file. Every pattern
    must match a file, every file must open and start with a valid record
    (or be empty; no folder may hold shards of two builds: `features.check_one_build`),
    and that record must hold input_ids, input_mask and
    segment_ids of length `max_seq_length`, with ids in [0, vocab_size). A
    corrupt record further in is met only when training reads it (see
    `locate_corrupt_record`).

    Args:
      file_pattern: comma-separated globs, or a list.
      max_seq_length: L the run reads the records with.
      what: the flag the files come from, for messages ("--eval_data").
      files: the file system the run reads through (default: tf.io.gfile's);
        with LOCAL_FILES a remote path is refused, as nothing could read it.
      vocab_size: the model's vocabulary size (None: ids are not checked).

    Raises:
      InputError: naming the flag and the file.
    """
    fs = files or tensorflow_files()
    patterns = file_pattern.split(",") if isinstance(file_pattern, str) else file_pattern
    remote = [p.strip() for p in patterns if "://" in p]
    if fs is LOCAL_FILES and remote:
        raise InputError(f"{what}: {remote[0]} is a remote path, which only TensorFlow's file "
                         "systems read (use the tf.data input pipeline, or copy the files)")
    paths = expand_files(file_pattern, what, glob_fn=fs.glob, isfile=lambda f: not fs.isdir(f))
    check_one_build(paths, what, fs)
    if not any([_check_first_record(path, max_seq_length, what, fs, vocab_size)
                for path in paths]):
        raise InputError(f"{what}: all {len(paths)} file(s) are empty, e.g. {paths[0]}")
    return paths


def _check_first_record(path: str, max_seq_length: int, what: str, fs: FileSystem,
                        vocab_size: int | None = None) -> bool:
    """Raises InputError unless the file's first record fits; False if it is empty."""
    try:
        with fs.open(path) as f:
            first = _read_record(f, 0, fs.size(path))
    except _BadRecord as e:
        with fs.open(path) as f:
            if f.read(len(PACKED_MAGIC)) == PACKED_MAGIC:
                raise InputError(f"{what}: {path} is a packed examples file, which only "
                                 "KERAS_BACKEND=jax with --jax_input_pipeline=packed reads "
                                 "(the others read the TFRecords it was packed from)") from None
        raise InputError(f"{what}: {path} is not a TFRecord file or is corrupt ({e})") from None
    except fs.errors as e:
        raise InputError(f"{what}: cannot read {path} ({getattr(e, 'message', e)})") from None
    if first is None:
        return False
    try:
        features = parse_example(first[0], FEATURE_KEYS)
        lengths = {k: len(v) for k, v in features.items()}
    except (ValueError, IndexError, UnicodeDecodeError) as e:
        raise InputError(f"{what}: {path} does not hold pre-training examples "
                         f"({e}; expected int64 {', '.join(FEATURE_KEYS)})") from None
    if set(lengths.values()) != {max_seq_length}:
        found = lengths["input_ids"]
        flag = length_flag(what)
        raise InputError(f"{what}: {path} holds records of max_seq_length {found}, but "
                         f"{flag}={max_seq_length} (rebuild the data with "
                         f"--max_seq_length={max_seq_length} or train with {flag}={found})")
    ids = features["input_ids"]
    if vocab_size is not None and len(ids) and (ids.min() < 0 or ids.max() >= vocab_size):
        bad = ids.min() if ids.min() < 0 else ids.max()
        raise InputError(f"{what}: {path} holds token id {bad}, outside the vocabulary's "
                         f"[0, {vocab_size}) (were its records built with this --vocab_file?)")
    return True


def locate_corrupt_record(paths: list[str], error_message: str, budget_s: float = 300.0,
                          files: FileSystem | None = None) -> str | None:
    """The file a tf.data DataLossError ("corrupted record at N") came from.

    TFRecordDataset's message gives the record's byte offset but not the
    file. A file whose record at that offset fails its check is the one; to
    know the offset is a record boundary, each file's record headers are
    walked up to it (only the headers are read). Gives up (None) after
    `budget_s` seconds.
    """
    found = framework_messages.corrupt_record(error_message)
    if not found:
        return None
    fs = files or tensorflow_files()
    offset, deadline = found[1], time.monotonic() + budget_s
    for path in paths:
        if time.monotonic() > deadline:
            return None
        try:
            size = fs.size(path)
            if size < offset:
                continue
            with fs.open(path) as f:
                if _bad_record_near(f, offset, size, deadline):
                    return path
        except fs.errors:
            continue
    return None


def locate_misshaped_record(paths: list[str], length: int, budget_s: float = 300.0,
                            files: FileSystem | None = None) -> tuple[str, int] | None:
    """(file, record index) of the first record of `paths` whose features are not
    `length` long (or not a pre-training example): what tf.data's reshape error met
    mid-run, whose message names neither. Every record is read, up to `budget_s`
    seconds (None: not found in that time)."""
    fs = files or tensorflow_files()
    deadline = time.monotonic() + budget_s
    for path in paths:
        try:
            with fs.open(path) as f:
                size, offset, index = fs.size(path), 0, 0
                while offset < size:
                    if time.monotonic() > deadline:
                        return None
                    record = _read_record(f, offset, size)
                    if record is None:
                        break
                    data, offset = record
                    try:
                        example = parse_example(data, FEATURE_KEYS)
                    except (ValueError, IndexError, UnicodeDecodeError):
                        return path, index
                    if any(len(v) != length for v in example.values()):
                        return path, index
                    index += 1
        except (_BadRecord, *fs.errors):
            continue
    return None


def _bad_record_near(f, offset: int, size: int, deadline: float) -> bool:
    """True if this file's record at `offset` is bad, or one before it.

    TensorFlow names the record's start when its header is bad and the start
    + 12 (its data) when the data is, so both count as "at offset".
    """
    position = 0
    while position <= offset:
        if time.monotonic() > deadline:
            return False
        if position in (offset, offset - 12):
            try:
                _read_record(f, position, size)
            except _BadRecord:
                return True
        f.seek(position)
        header = f.read(12)
        if len(header) < 12 or masked_crc(header[:8]) != struct.unpack("<I", header[8:])[0]:
            return True
        position += 16 + struct.unpack("<Q", header[:8])[0]
    return False
