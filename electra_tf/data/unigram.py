"""Token frequencies of pre-training records, for `prior_output_biases`.

Reads the first records of every file (spread over the shards, so one
shard's documents do not dominate) with the pure-Python TFRecord reader, and
counts the ids at the real positions (`input_mask` 1).
"""

from __future__ import annotations

import numpy as np

from electra_tf.core.errors import RecordError
from electra_tf.data.tfrecord_reader import (
    LOCAL_FILES,
    FileSystem,
    parse_example,
    read_records,
)


def unigram_counts(paths: list[str], vocab_size: int, max_sequences: int = 4096,
                   fs: FileSystem = LOCAL_FILES) -> tuple[np.ndarray, int]:
    """Counts of each id over the real positions of up to `max_sequences` records.

    Returns:
      (int64 counts [vocab_size], number of sequences read).

    Raises:
      RecordError: a corrupt record or an id outside [0, vocab_size) (names the file).
    """
    if not paths:
        raise ValueError("unigram_counts needs at least one file")
    counts = np.zeros(vocab_size, np.int64)
    per_file = -(-max_sequences // len(paths))
    read = 0
    for path in paths:
        for k, data in enumerate(read_records(path, fs)):
            if k == per_file or read == max_sequences:
                break
            example = parse_example(data, ("input_ids", "input_mask"))
            ids = example["input_ids"][example["input_mask"] > 0]
            if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
                raise RecordError(f"{path}: record {k} has a token id outside "
                                  f"[0, {vocab_size})")
            counts += np.bincount(ids, minlength=vocab_size)
            read += 1
    return counts, read


def packed_unigram_counts(paths: list[str], vocab_size: int,
                          max_sequences: int = 4096) -> tuple[np.ndarray, int]:
    """`unigram_counts` of packed files (data/packed.py): the first examples of each file.

    Raises:
      InputError: a damaged file, or ids outside [0, vocab_size).
    """
    from electra_tf.data.packed import PackedFile

    if not paths:
        raise ValueError("packed_unigram_counts needs at least one file")
    counts = np.zeros(vocab_size, np.int64)
    per_file, read = -(-max_sequences // len(paths)), 0
    for path in paths:
        f = PackedFile(path)
        if f.max_id >= vocab_size:
            raise RecordError(f"{path}: holds a token id outside [0, {vocab_size})")
        take = min(per_file, f.num_examples, max_sequences - read)
        counts += np.bincount(f.tokens[:f.offsets[take]], minlength=vocab_size)
        read += take
    return counts, read


def log_unigram_prior(counts: np.ndarray, exclude_ids=(), floor: float = 0.5) -> np.ndarray:
    """log p(token), add-`floor` smoothed, as float32; `exclude_ids` (tokens never
    predicted, e.g. [CLS], [SEP], [MASK]) get the smallest value."""
    counts = counts.astype(np.float64).copy()
    keep = np.ones(counts.shape, bool)
    keep[list(exclude_ids)] = False
    counts[~keep] = 0.0
    smoothed = counts + floor
    prior = np.log(smoothed / smoothed[keep].sum())
    prior[~keep] = prior[keep].min()
    return prior.astype(np.float32)
