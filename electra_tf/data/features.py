"""The TFRecord format of pre-training data, identical to the original's.

Each record is a `tf.train.Example` with three int64 features of length L:
`input_ids`, `input_mask` and `segment_ids` (google-research/electra's
build_pretraining_dataset.py). Data built by either implementation loads in
the other unchanged.

TensorFlow is imported where a function needs it: the names and the shard
layout are read by the builder's input checks, which then fail before the
TensorFlow import (seconds) is paid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tensorflow as tf

FEATURE_KEYS = ("input_ids", "input_mask", "segment_ids")
SHARD_PREFIX = "pretrain_data.tfrecord"
# The longest example the builders write: a packed file stores each example's segment
# boundary as uint16, and no position table comes near it.
MAX_SEQ_LENGTH = 65_535
# The first bytes of a packed examples file (data/packed.py): here, below both readers,
# so that the TFRecord readers name the input that reads one given to them.
PACKED_MAGIC = b"ELTFPACK"


def shard_name(index: int, num_shards: int) -> str:
    return f"{SHARD_PREFIX}-{index:05d}-of-{num_shards:05d}"


def is_shard_name(name: str) -> bool:
    """Whether `name` is one `shard_name` gives (a file a build wrote, and may replace)."""
    import re

    return re.fullmatch(rf"{re.escape(SHARD_PREFIX)}-\d{{5,}}-of-\d{{5,}}", name) is not None


def serialize(features: dict[str, list[int]]) -> bytes:
    """input_ids/input_mask/segment_ids lists -> serialized tf.train.Example."""
    import tensorflow as tf

    feature = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=features[k]))
               for k in FEATURE_KEYS}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(
        deterministic=True)  # map order would otherwise vary between processes


def feature_spec(max_seq_length: int) -> dict[str, tf.io.FixedLenFeature]:
    import tensorflow as tf

    return {k: tf.io.FixedLenFeature([max_seq_length], tf.int64) for k in FEATURE_KEYS}


def parse_examples(serialized: tf.Tensor, max_seq_length: int) -> dict[str, tf.Tensor]:
    """Serialized examples [batch] -> int32 tensors [batch, L] (int32, as on TPU)."""
    import tensorflow as tf

    parsed = tf.io.parse_example(serialized, feature_spec(max_seq_length))
    return {k: tf.cast(v, tf.int32) for k, v in parsed.items()}
