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
"""

from __future__ import annotations

import struct
from typing import Iterator

import numpy as np

from electra_tf.errors import InputError

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


def read_records(path: str) -> Iterator[bytes]:
    """The records of one TFRecord file, CRC-checked.

    Raises:
      InputError: a truncated record or a CRC mismatch (names file and record).
    """
    with open(path, "rb") as f:
        index = 0
        while True:
            header = f.read(12)
            if not header:
                return
            if len(header) < 12:
                raise InputError(f"{path}: record {index} is truncated (corrupt TFRecord file)")
            length_bytes, length_crc = header[:8], struct.unpack("<I", header[8:])[0]
            if masked_crc(length_bytes) != length_crc:
                raise InputError(f"{path}: record {index} has a bad length checksum "
                                 "(corrupt TFRecord file)")
            length = struct.unpack("<Q", length_bytes)[0]
            data = f.read(length)
            footer = f.read(4)
            if len(data) < length or len(footer) < 4:
                raise InputError(f"{path}: record {index} is truncated (corrupt TFRecord file)")
            if masked_crc(data) != struct.unpack("<I", footer)[0]:
                raise InputError(f"{path}: record {index} has a bad data checksum "
                                 "(corrupt TFRecord file)")
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
    """(field number, wire type, value) of a protobuf message (types 0, 1, 2, 5)."""
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
    values: list[int] = []
    for number, _, int64_list in _fields(feature):
        if number != 3:  # Feature.int64_list; bytes_list (1) and float_list (2) are not ours
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
            for n, _, value in _fields(entry):
                if n == 1:
                    key = bytes(value).decode("utf-8")
                elif n == 2:
                    feature = value
            if key in keys and feature is not None:
                out[key] = np.asarray(_int64_list(feature), np.int64)
    missing = [k for k in keys if k not in out]
    if missing:
        raise ValueError(f"the record has no int64 feature {missing[0]!r}")
    return out
