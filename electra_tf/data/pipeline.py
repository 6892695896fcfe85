"""Pre-training TFRecords -> masked batches, with tf.data.

    ds = pretraining_dataset("out/pretrain_data.tfrecord*", batch_size=128,
                             max_seq_length=128, masking=masking_config, seed=0)

Training pipelines read files in a shuffled, repeated order, interleave them,
shuffle examples, batch with drop_remainder (static shapes for XLA/TPU), mask
each batch with its own stateless seed, and prefetch. Under tf.distribute,
pass the InputContext (e.g. from `strategy.distribute_datasets_from_function`):
each input pipeline reads its own share of the files (or of the records, when
there are fewer files than pipelines) and folds its id into the seeds, so
replicas never see the same masks.

Everything is seeded: the same files, seed and context give the same batches.

Before a run, `check_records` looks at every file cheaply (its first record);
if a file turns out corrupt further in, tf.data's error does not name it, and
`locate_corrupt_record` finds it from the byte offset in the message.
"""

from __future__ import annotations

import re
import struct
import time

import tensorflow as tf

from electra_tf.data import features as features_lib
from electra_tf.data.masking import MaskingConfig, mask_batch
from electra_tf.data.tfrecord_reader import masked_crc, parse_example
from electra_tf.errors import InputError
from electra_tf.fileio import expand_files

# Seed mixes that give each input pipeline (pipeline_id) its own streams from
# the one run seed. Pure tf.data: these are not the model's salts
# (electra_tf.modeling.random). Their values fix the batches: never change them.
MASK_SEED_MULTIPLIER = 1_000_003  # mask seed of a batch: [seed * this + pipeline_id, batch index]
SHUFFLE_SEED_PIPELINE_STRIDE = 7919  # example shuffle seed: seed + this * pipeline_id


def list_files(file_pattern: str | list[str]) -> list[str]:
    """Comma-separated globs (or a list of them) -> sorted files, through tf.io.gfile.

    Raises:
      InputError: a pattern matches no file.
    """
    return expand_files(file_pattern, "TFRecord", glob_fn=tf.io.gfile.glob,
                        isfile=lambda f: not tf.io.gfile.isdir(f))


def pretraining_dataset(file_pattern: str | list[str], batch_size: int, max_seq_length: int,
                        masking: MaskingConfig | None, *, is_training: bool = True,
                        input_context: tf.distribute.InputContext | None = None,
                        seed: int = 0, shuffle_buffer: int = 10000,
                        cycle_length: int = 8, skip_batches: int = 0) -> tf.data.Dataset:
    """Builds the pre-training input pipeline.

    Args:
      file_pattern: TFRecord globs, comma-separated, or a list.
      batch_size: the batch size of THIS pipeline (per replica under a strategy;
        use input_context.get_per_replica_batch_size(global_batch)).
      max_seq_length: L of the records.
      masking: how to mask; None yields unmasked batches (input_ids,
        input_mask, segment_ids only).
      is_training: repeat and shuffle (else one deterministic pass).
      input_context: tf.distribute's InputContext, for per-pipeline sharding.
      seed: seeds the file order, the example shuffle and the masks.
      shuffle_buffer: example-level shuffle buffer (training only).
      cycle_length: files read in parallel.
      skip_batches: start after this many batches (to resume a run); skipped
        batches are neither parsed nor masked, and the masks that follow are
        those an uninterrupted pipeline would have drawn.

    Returns:
      A dataset of dicts: int32 [batch, L] input_ids (masked), input_mask,
      segment_ids; with masking also int32 [batch, N] masked_lm_positions,
      masked_lm_ids and float32 [batch, N] masked_lm_weights.
    """
    files = list_files(file_pattern)
    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    shard_records = num_pipelines > 1 and len(files) < num_pipelines

    ds = tf.data.Dataset.from_tensor_slices(files)
    if num_pipelines > 1 and not shard_records:
        ds = ds.shard(num_pipelines, pipeline_id)
    if is_training:
        ds = ds.repeat().shuffle(len(files), seed=seed)
    ds = ds.interleave(tf.data.TFRecordDataset,
                       cycle_length=min(cycle_length, len(files)), block_length=1,
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if shard_records:
        ds = ds.shard(num_pipelines, pipeline_id)
    if is_training:
        ds = ds.shuffle(shuffle_buffer, seed=seed + SHUFFLE_SEED_PIPELINE_STRIDE * pipeline_id)
    ds = ds.batch(batch_size, drop_remainder=True)
    if skip_batches:
        ds = ds.skip(skip_batches)
    ds = ds.map(lambda s: features_lib.parse_examples(s, max_seq_length),
                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if masking is not None:
        # One stateless seed per batch: (seed, pipeline), batch index.
        seeds = tf.data.Dataset.counter(start=skip_batches).map(
            lambda i: tf.stack([tf.cast(seed, tf.int64) * MASK_SEED_MULTIPLIER + pipeline_id, i]))
        ds = tf.data.Dataset.zip(ds, seeds).map(
            lambda batch, s: _mask(batch, s, masking),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.prefetch(tf.data.AUTOTUNE)


def _mask(batch, seed, masking):
    out = dict(batch)
    out.update(mask_batch(batch["input_ids"], batch["input_mask"], seed, masking))
    return out


# === Checking records before and during a run ===
class _BadRecord(Exception):
    """The record at an offset is truncated or fails its checksum."""


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
        raise _BadRecord(f"truncated record at byte {offset}")
    if masked_crc(header[:8]) != struct.unpack("<I", header[8:])[0]:
        raise _BadRecord(f"corrupted record at byte {offset}")
    length = struct.unpack("<Q", header[:8])[0]
    if offset + 16 + length > size:
        raise _BadRecord(f"truncated record at byte {offset}")
    data, footer = f.read(length), f.read(4)
    if masked_crc(data) != struct.unpack("<I", footer)[0]:
        raise _BadRecord(f"corrupted record at byte {offset}")
    return data, offset + 16 + length


def check_records(file_pattern: str | list[str], max_seq_length: int,
                  what: str = "--train_data") -> list[str]:
    """Checks pre-training TFRecords before a run; returns the files.

    Cheap at any corpus size: it reads one record per file. Every pattern
    must match a file, every file must open and start with a valid record
    (or be empty), and that record must hold input_ids, input_mask and
    segment_ids of length `max_seq_length`. A corrupt record further in is
    met only when training reads it (see `locate_corrupt_record`).

    Args:
      file_pattern: comma-separated globs, or a list.
      max_seq_length: L the run reads the records with.
      what: the flag the files come from, for messages ("--eval_data").

    Raises:
      InputError: naming the flag and the file.
    """
    files = expand_files(file_pattern, what, glob_fn=tf.io.gfile.glob,
                         isfile=lambda f: not tf.io.gfile.isdir(f))
    if not any([_check_first_record(path, max_seq_length, what) for path in files]):
        raise InputError(f"{what}: all {len(files)} file(s) are empty, e.g. {files[0]}")
    return files


def _check_first_record(path: str, max_seq_length: int, what: str) -> bool:
    """Raises InputError unless the file's first record fits; False if it is empty."""
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            first = _read_record(f, 0, tf.io.gfile.stat(path).length)
    except _BadRecord as e:
        raise InputError(f"{what}: {path} is not a TFRecord file or is corrupt ({e})") from None
    except (tf.errors.OpError, OSError) as e:
        raise InputError(f"{what}: cannot read {path} ({getattr(e, 'message', e)})") from None
    if first is None:
        return False
    try:
        lengths = {k: len(v) for k, v in
                   parse_example(first[0], features_lib.FEATURE_KEYS).items()}
    except (ValueError, IndexError, UnicodeDecodeError) as e:
        raise InputError(f"{what}: {path} does not hold pre-training examples "
                         f"({e}; expected int64 {', '.join(features_lib.FEATURE_KEYS)})") from None
    if set(lengths.values()) != {max_seq_length}:
        found = lengths["input_ids"]
        raise InputError(f"{what}: {path} holds records of max_seq_length {found}, but "
                         f"--max_seq_length={max_seq_length} (rebuild the data with "
                         f"--max_seq_length={max_seq_length} or train with {found})")
    return True


_DATA_LOSS = re.compile(r"(corrupted|truncated) record at (\d+)")


def locate_corrupt_record(files: list[str], error_message: str,
                          budget_s: float = 300.0) -> str | None:
    """The file a tf.data DataLossError ("corrupted record at N") came from.

    TFRecordDataset's message gives the record's byte offset but not the
    file. A file whose record at that offset fails its check is the one; to
    know the offset is a record boundary, each file's record headers are
    walked up to it (only the headers are read). Gives up (None) after
    `budget_s` seconds.
    """
    match = _DATA_LOSS.search(error_message)
    if not match:
        return None
    offset, deadline = int(match.group(2)), time.monotonic() + budget_s
    for path in files:
        if time.monotonic() > deadline:
            return None
        try:
            size = tf.io.gfile.stat(path).length
            if size < offset:
                continue
            with tf.io.gfile.GFile(path, "rb") as f:
                if _bad_record_near(f, offset, size, deadline):
                    return path
        except (tf.errors.OpError, OSError):
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
