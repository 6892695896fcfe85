"""Pre-training TFRecords -> masked NumPy batches, without TensorFlow.

    batches = numpy_pretraining_batches("out/pretrain_data.tfrecord*", batch_size=128,
                                        max_seq_length=128, masking=masking_config, seed=0)

The counterpart of data/pipeline.py's tf.data pipeline for machines with JAX
and no TensorFlow: the same files (read by data/tfrecord_reader.py), the same
steps (shuffled file order per epoch, an example shuffle buffer, batches of a
fixed size, dynamic masking per batch) and the same masking distribution
(masking.mask_batch_numpy), though not the same draws as tf.data. Everything
is seeded: the same files, seed and `skip_batches` give the same batches, so
a run resumes exactly.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from electra_tf.core.fileio import expand_files
from electra_tf.data.masking import MaskingConfig, mask_batch_numpy
from electra_tf.data.tfrecord_reader import (
    FEATURE_KEYS,
    RecordError,
    parse_example,
    read_records,
)


def _examples(files: list[str], max_seq_length: int, rng: np.random.Generator | None,
              vocab_size: int | None = None):
    """Examples of the files, file order reshuffled every epoch (forever) when rng is given;
    `vocab_size`: each example's ids must lie in [0, vocab_size) (RecordError otherwise)."""
    while True:
        order = rng.permutation(len(files)) if rng is not None else range(len(files))
        for i in order:
            for index, record in enumerate(read_records(files[i])):
                try:
                    example = parse_example(record, FEATURE_KEYS)
                except (ValueError, IndexError) as e:
                    raise RecordError(f"{files[i]}: record {index} is not a pre-training "
                                     f"example ({e})") from None
                if any(len(v) != max_seq_length for v in example.values()):
                    raise RecordError(
                        f"{files[i]}: record {index} has length {len(example['input_ids'])}, "
                        f"not --max_seq_length={max_seq_length} (records built for another "
                        "length)")
                ids = example["input_ids"]
                if vocab_size is not None and len(ids) and (ids.min() < 0
                                                             or ids.max() >= vocab_size):
                    bad = ids.min() if ids.min() < 0 else ids.max()
                    raise RecordError(f"{files[i]}: record {index} holds token id {bad}, "
                                      f"outside the vocabulary's [0, {vocab_size})")
                yield example
        if rng is None:
            return


def numpy_pretraining_batches(file_pattern: str | list[str], batch_size: int,
                              max_seq_length: int, masking: MaskingConfig | None, *,
                              is_training: bool = True, seed: int = 0,
                              shuffle_buffer: int = 10000,
                              skip_batches: int = 0) -> Iterator[dict[str, np.ndarray]]:
    """Yields batches as data/pipeline.pretraining_dataset does, as NumPy arrays.

    Args: as `pretraining_dataset` (one input pipeline).

    Yields:
      dicts of int32 [batch, L] input_ids (masked), input_mask, segment_ids;
      with masking also int32 [batch, N] masked_lm_positions, masked_lm_ids
      and float32 [batch, N] masked_lm_weights.
    """
    files = expand_files(file_pattern, "TFRecord")
    examples = _examples(files, max_seq_length,
                         np.random.default_rng([seed, 0]) if is_training else None,
                         masking.vocab_size if masking is not None else None)
    shuffle = np.random.default_rng([seed, 1])
    buffer: list[dict] = []
    index = 0

    def next_example():
        if not is_training:
            return next(examples, None)
        while len(buffer) < shuffle_buffer:
            example = next(examples, None)
            if example is None:
                break
            buffer.append(example)
        if not buffer:
            return None
        j = int(shuffle.integers(len(buffer)))
        buffer[j], buffer[-1] = buffer[-1], buffer[j]
        return buffer.pop()

    while True:
        rows = []
        while len(rows) < batch_size:
            example = next_example()
            if example is None:
                return  # drop_remainder, as the tf.data pipeline
            rows.append(example)
        if index >= skip_batches:
            batch = {k: np.stack([r[k] for r in rows]).astype(np.int32) for k in FEATURE_KEYS}
            if masking is not None:
                rng = np.random.default_rng([seed, 2, index])  # one stream per batch
                batch.update(mask_batch_numpy(batch["input_ids"], batch["input_mask"], rng,
                                              masking))
            yield batch
        index += 1
