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

import os
from typing import TYPE_CHECKING

from electra_tf.core.errors import InputError
from electra_tf.core.fileio import parse_json

if TYPE_CHECKING:
    import tensorflow as tf

FEATURE_KEYS = ("input_ids", "input_mask", "segment_ids")
SHARD_PREFIX = "pretrain_data.tfrecord"
STATS_FILE = "pretrain_data_stats.json"  # beside the shards: what the build counted
# The longest example the builders write: a packed file stores each example's segment
# boundary as uint16, and no position table comes near it.
MAX_SEQ_LENGTH = 65_535
# The first bytes of a packed examples file (data/packed.py): here, below both readers,
# so that the TFRecord readers name the input that reads one given to them.
PACKED_MAGIC = b"ELTFPACK"

# Present while a build moves its shards into place (from before the earlier build's
# stats go to after the new stats land): one left behind marks a folder whose shards
# may be of two builds, which the readers refuse and the next build replaces.
UNFINISHED_FILE = "pretrain_data.unfinished"


def shard_name(index: int, num_shards: int) -> str:
    return f"{SHARD_PREFIX}-{index:05d}-of-{num_shards:05d}"


def is_shard_name(name: str) -> bool:
    """Whether `name` is a shard a build wrote (and an --overwrite build replaces):
    `shard_name`'s, or the original's build_pretraining_dataset.py's, unpadded
    (pretrain_data.tfrecord-0-of-4)."""
    import re

    return re.fullmatch(rf"{re.escape(SHARD_PREFIX)}-\d+-of-\d+", name) is not None


def unfinished_builds(paths, fs):
    """The folders of `paths` whose build stopped while it moved its shards into place
    (an `UNFINISHED_FILE` there), read through `fs` (a tfrecord_reader.FileSystem)."""
    for folder in sorted({os.path.dirname(p) for p in paths}):
        try:
            fs.size(os.path.join(folder, UNFINISHED_FILE))  # (a GFile opens lazily)
        except fs.errors:
            continue
        yield folder or "."


def records_stats(paths, fs):
    """(its path, its JSON) of the STATS_FILE beside the records of each folder of
    `paths`, read through `fs` (tfrecord_reader's FileSystem); a folder without a
    readable one is left out. Opened, not globbed: a folder's name may hold glob
    characters ("rec[v2]").

    Raises:
      InputError: a stats file that is not a JSON object (damaged, or another file in
        its place): it had been taken for none, and the casing and vocabulary checks
        it serves were skipped without a word.
    """
    for folder in sorted({os.path.dirname(p) for p in paths}):
        stats_path = os.path.join(folder, STATS_FILE)
        try:
            with fs.open(stats_path) as f:
                data = f.read()
        except fs.errors:
            continue  # missing or not readable: nothing recorded
        hint = ("; it records how the records beside it were built (build_pretraining_data "
                "writes it): rebuild them, or remove it to go on without its checks")
        try:
            stats = parse_json(data.decode("utf-8"), stats_path)
        except UnicodeDecodeError:
            raise InputError(f"{stats_path}: not UTF-8 JSON{hint}") from None
        except InputError as e:
            raise InputError(f"{e}{hint}") from None
        if not isinstance(stats, dict):
            raise InputError(f"{stats_path}: not a JSON object{hint}")
        yield stats_path, stats


def recorded_examples(paths: list[str], fs) -> int | None:
    """The examples the STATS_FILE beside the records says `paths` hold, all together;
    None unless it records every one of them (records of another writer, or a stats
    file without per-shard counts)."""
    counts: dict[str, int] = {}
    for stats_path, stats in records_stats(paths, fs):
        per_shard = stats.get("examples_per_shard")
        if isinstance(per_shard, dict):
            folder = os.path.dirname(stats_path)
            counts.update({os.path.join(folder, name): n for name, n in per_shard.items()
                           if isinstance(n, int) and not isinstance(n, bool) and n >= 0})
    found = [counts.get(p) for p in paths]
    return None if not found or None in found else sum(found)


def check_one_build(paths: list[str], what: str, fs) -> None:
    """Refuses a folder's build_pretraining_data shards of two builds: an --overwrite
    build stopped while it renamed its shards into place, which a run would train on
    together. Its marker (`UNFINISHED_FILE`) says so, whatever the shard
    counts; without one (records of older builds), names ending -of-00003 and
    -of-00004 do.

    An empty shard that its folder's STATS_FILE records examples in (a copy or a
    download cut short, which a run had read as a shard the build left empty) is
    refused too.

    Raises:
      InputError: naming the flag and the folder (and the counts), or the shard.
    """
    for folder in unfinished_builds(paths, fs):
        raise InputError(
            f"{what} matches shards in {folder}, where a build_pretraining_data run was "
            f"stopped while it replaced them ({UNFINISHED_FILE}): some may be of the "
            "earlier build; run it again with --overwrite")
    counts: dict[str, set[str]] = {}
    for path in paths:
        folder, name = path.rsplit("/", 1) if "/" in path else (".", path)
        if is_shard_name(name):
            counts.setdefault(folder, set()).add(name.rsplit("-of-", 1)[1])
    for folder, totals in sorted(counts.items()):
        if len(totals) > 1:
            raise InputError(
                f"{what} matches shards of {len(totals)} builds in {folder} (-of-"
                f"{', -of-'.join(sorted(totals))}): a build_pretraining_data run was stopped "
                "midway; run it again with --overwrite, or give a pattern that matches one")
    empty = [p for p in paths if is_shard_name(os.path.basename(p)) and fs.size(p) == 0]
    if empty:
        for stats_path, stats in records_stats(empty, fs):
            counts = stats.get("examples_per_shard")
            for path in empty:
                n = counts.get(os.path.basename(path)) if isinstance(counts, dict) and \
                    os.path.dirname(path) == os.path.dirname(stats_path) else None
                if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                    raise InputError(
                        f"{what}: {path} is empty, but {stats_path} records {n:,} examples "
                        "in it (a copy or download cut short?): copy it again, or leave it "
                        "out of the pattern")


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
