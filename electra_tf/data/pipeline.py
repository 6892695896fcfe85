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
`locate_corrupt_record` finds it from the byte offset in the message (both in
data/tfrecord_reader.py, which needs no TensorFlow; here they read through
tf.io.gfile, as tf.data does).
"""

from __future__ import annotations

import tensorflow as tf

from electra_tf.core.fileio import expand_files
from electra_tf.data import features as features_lib
from electra_tf.data.masking import MaskingConfig, mask_batch
from electra_tf.data.tfrecord_reader import (  # noqa: F401 (re-exported)
    check_records,
    locate_corrupt_record,
)

# Seed mixes that give each input pipeline (pipeline_id) its own streams from
# the one run seed. Pure tf.data: these are not the model's salts
# (electra_tf.modeling.random). Their values fix the batches: never change them.
MASK_SEED_MULTIPLIER = 1_000_003  # mask seed of a batch: [seed * this + pipeline_id, batch index]
SHUFFLE_SEED_PIPELINE_STRIDE = 7919  # example shuffle seed: seed + this * pipeline_id


def plain(fn):
    """fn for Dataset.map as written: tf.data would convert it with autograph
    (from source, for every dataset; the masking alone took 0.15 s a dataset),
    and none of these functions branches on a tensor."""
    return tf.autograph.experimental.do_not_convert(fn)


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
    if num_pipelines > 1:
        # Empty shards (a corpus of fewer documents than shards) take no share: a pipeline
        # given only empty files would wait for its first batch forever.
        files = [f for f in files if tf.io.gfile.stat(f).length > 0] or files
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
    ds = ds.map(plain(lambda s: features_lib.parse_examples(s, max_seq_length)),
                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if masking is not None:
        # One stateless seed per batch: (seed, pipeline), batch index.
        seeds = tf.data.Dataset.counter(start=skip_batches).map(plain(
            lambda i: tf.stack([tf.cast(seed, tf.int64) * MASK_SEED_MULTIPLIER + pipeline_id, i])))
        ds = tf.data.Dataset.zip(ds, seeds).map(
            plain(lambda batch, s: _mask(batch, s, masking)),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.prefetch(tf.data.AUTOTUNE)


def _mask(batch, seed, masking):
    out = dict(batch)
    out.update(mask_batch(batch["input_ids"], batch["input_mask"], seed, masking))
    return out
