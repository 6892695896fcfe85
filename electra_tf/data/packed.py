r"""Packed pre-training examples: the records in a memory-mapped file, read without TensorFlow.

    python -m electra_tf.pack_pretraining_data --records='DATA/pretrain_data.tfrecord*' \
        --output=DATA/pretrain_data.packed
    KERAS_BACKEND=jax python -m electra_tf.run_pretraining --jax_input_pipeline=packed \
        --train_data=DATA/pretrain_data.packed ...

Parsing TFRecords in Python (data/numpy_pipeline.py) costs tens of
microseconds a record: too slow to feed a GPU. Here a batch is a few
vectorized gathers from a memory-mapped file (benchmarks/packed_input.md).

What is stored is what build_pretraining_data writes, without the padding: an
example of n real tokens is `input_ids` = its n tokens then 0s, `input_mask`
= n 1s then 0s, `segment_ids` = 0 for its first `segment_a` positions
([CLS] A [SEP]), 1 up to n, 0 in the padding. That is the only form the
builder (and the original's build_pretraining_dataset.py) writes; `pack`
refuses a record of another form, naming the file and the record.

File layout (little-endian): MAGIC, uint32 FORMAT_VERSION, uint32 header
size, the JSON header, then three arrays, each at a multiple of 64 bytes:
  offsets    int64 [n + 1]  where example i's tokens start in `tokens`
  segment_a  uint16 [n]     example i's positions of segment 0
  tokens     uint16 [T]     every example's real tokens, back to back (uint32
                            when an id is 65536 or more)
The header gives max_seq_length, the counts, the largest id, and each
array's offset, size and CRC32; `PackedFile` checks all of them when it
opens a file, so a truncated or damaged file is one error naming it.

Batches (`packed_pretraining_batches`), as data/numpy_pipeline.py's but for
the order: training reads epoch after epoch, each a seeded permutation of
every example of every file (a full shuffle, not a shuffle buffer), and
batch b holds positions [b * B, (b + 1) * B) of that stream, so resuming at
any batch costs nothing. Masking as numpy_pipeline (mask_batch_numpy, one
stream [seed, 2, b] per batch). Evaluation reads the examples in order, once,
the last partial batch dropped.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import sys
import zlib
from typing import Iterator

import numpy as np

from electra_tf.core.errors import InputError, RecordError
from electra_tf.core.fileio import (
    Progress,
    atomic_write,
    check_output_file,
    expand_files,
    stale_write_note,
    write_suffix,
)
from electra_tf.data.features import (
    MAX_SEQ_LENGTH,
    PACKED_MAGIC,
    SHARD_PREFIX,
    STATS_FILE,
    check_one_build,
    recorded_examples,
)
from electra_tf.data.masking import MaskingConfig, mask_batch_numpy
from electra_tf.data.tfrecord_reader import (
    FEATURE_KEYS,
    LOCAL_FILES,
    length_flag,
    parse_example,
    read_records,
)

MAGIC = PACKED_MAGIC
FORMAT_VERSION = 1
_ALIGN = 64
_PREFIX = struct.Struct("<8sII")  # magic, version, header size
_ARRAYS = ("offsets", "segment_a", "tokens")
MAX_TOKEN_ID = 2**32 - 1  # tokens are uint16 or uint32 on disk


# === Reading ===
class PackedFile:
    """One packed file, memory-mapped and checked.

    Attributes:
      path, max_seq_length, num_examples, max_id; offsets, segment_a, tokens
      (read-only NumPy views of the file).

    Raises (from the constructor):
      InputError: not a packed file, a newer format, truncated, or an array
        that fails its checksum (one line naming `what` and the file).
    """

    def __init__(self, path: str, what: str = "--train_data"):
        self.path = path
        bad = f"{what}: {path}"
        try:
            size = os.path.getsize(path)
            with open(path, "rb") as f:
                prefix = f.read(_PREFIX.size)
        except OSError as e:
            raise InputError(f"{bad}: cannot read it ({e.strerror or e})") from None
        if not prefix:  # (had been "not a packed examples file")
            raise InputError(f"{bad} is empty (0 bytes); repack it")
        if len(prefix) < _PREFIX.size and (prefix.startswith(MAGIC)
                                           or MAGIC.startswith(prefix)):
            raise InputError(f"{bad} is truncated ({size:,} bytes); repack it")
        if len(prefix) < _PREFIX.size or prefix[:8] != MAGIC:
            raise InputError(f"{bad} is not a packed examples file (python -m "
                             "electra_tf.pack_pretraining_data writes them from TFRecords; "
                             "TFRecords themselves are read with --jax_input_pipeline=numpy "
                             "or tf.data)")
        _, version, header_size = _PREFIX.unpack(prefix)
        if version != FORMAT_VERSION:
            raise InputError(f"{bad} has packed format {version}; this electra_tf reads "
                             f"format {FORMAT_VERSION} (repack it from the TFRecords)")
        if size == 0 or _PREFIX.size + header_size > size:
            raise InputError(f"{bad} is truncated ({size:,} bytes); repack it")
        data = np.memmap(path, np.uint8, mode="r")
        try:
            header = json.loads(bytes(data[_PREFIX.size:_PREFIX.size + header_size]))
            self.max_seq_length = int(header["max_seq_length"])
            self.num_examples = int(header["num_examples"])
            self.max_id = int(header["max_id"])
            if header["token_dtype"] not in ("<u2", "<u4"):
                raise ValueError(f"token_dtype {header['token_dtype']!r}")
            dtypes = {"offsets": np.dtype("<i8"), "segment_a": np.dtype("<u2"),
                      "tokens": np.dtype(header["token_dtype"])}
            places = {name: [int(x) for x in header["arrays"][name]] for name in _ARRAYS}
        except (ValueError, KeyError, TypeError) as e:
            raise InputError(f"{bad} has a damaged header ({type(e).__name__}: {e}); "
                             "repack it") from None
        end = max(offset + nbytes for offset, nbytes, _ in places.values())
        if end != size:
            state = "truncated" if end > size else "longer than its header says"
            raise InputError(f"{bad} is {state} ({size:,} bytes, its header says {end:,}); "
                             "repack it")
        arrays = {}
        for name in _ARRAYS:
            offset, nbytes, crc = places[name]
            if zlib.crc32(data[offset:offset + nbytes]) != crc:
                raise InputError(f"{bad} is damaged: its {name} fail their checksum; repack it")
            arrays[name] = np.frombuffer(data, dtypes[name], nbytes // dtypes[name].itemsize,
                                         offset)
        self.offsets, self.segment_a, self.tokens = (arrays[n] for n in _ARRAYS)
        lengths = np.diff(self.offsets)
        if (len(self.offsets) != self.num_examples + 1 or len(self.segment_a)
                != self.num_examples or self.offsets[0] != 0
                or self.offsets[-1] != len(self.tokens) or (lengths < 1).any()
                or (lengths > self.max_seq_length).any() or (self.segment_a > lengths).any()):
            raise InputError(f"{bad} has arrays that do not agree with each other or with "
                             f"max_seq_length {self.max_seq_length}; repack it")
        # the header's max_id, which the vocabulary check reads, has no checksum of its own
        highest = int(self.tokens.max()) if len(self.tokens) else -1
        if highest != self.max_id:
            raise InputError(f"{bad} has a damaged header: its max_id {self.max_id} is not "
                             f"its tokens' highest id {highest}; repack it")

    def rows(self, indices: np.ndarray, max_seq_length: int) -> dict[str, np.ndarray]:
        """The examples at `indices`, as the records hold them.

        Returns:
          int32 [len(indices), max_seq_length] input_ids, input_mask, segment_ids.
        """
        starts = self.offsets[indices]
        lengths = (self.offsets[indices + 1] - starts)[:, None]
        columns = np.arange(max_seq_length)[None, :]
        real = columns < lengths
        ids = self.tokens[np.where(real, starts[:, None] + columns, 0)]
        second = columns >= self.segment_a[indices][:, None].astype(np.int64)
        return {"input_ids": np.where(real, ids, 0).astype(np.int32),
                "input_mask": real.astype(np.int32),
                "segment_ids": (real & second).astype(np.int32)}


class PackedExamples:
    """One or more packed files as one sequence of examples (in the files' sorted order).

    Args:
      file_pattern: comma-separated globs, or a list of paths.
      max_seq_length: what the run reads; every file must be packed for it.
      vocab_size: ids must lie in [0, vocab_size) (None: not checked).
      what: the flag the files come from, for messages.

    Raises:
      InputError: as PackedFile, a file of another length, ids past the
        vocabulary, a remote path, or no example at all.
    """

    def __init__(self, file_pattern: str | list[str], max_seq_length: int,
                 vocab_size: int | None = None, what: str = "--train_data"):
        patterns = file_pattern.split(",") if isinstance(file_pattern, str) else file_pattern
        remote = [p.strip() for p in patterns if "://" in p]
        if remote:
            raise InputError(f"{what}: {remote[0]} is a remote path; packed files are "
                             "memory-mapped, so copy them to a local disk")
        self.files = [PackedFile(p, what) for p in expand_files(file_pattern, what)]
        for f in self.files:
            if f.max_seq_length != max_seq_length:
                flag = length_flag(what)
                raise InputError(
                    f"{what}: {f.path} holds examples of max_seq_length {f.max_seq_length}, but "
                    f"{flag}={max_seq_length} (pack records built with --max_seq_length="
                    f"{max_seq_length}, or train with {flag}={f.max_seq_length})")
            if vocab_size is not None and f.max_id >= vocab_size:
                raise InputError(f"{what}: {f.path} holds token id {f.max_id}, outside the "
                                 f"vocabulary's [0, {vocab_size}) (were its records built "
                                 "with this --vocab_file?)")
        self.max_seq_length = max_seq_length
        self.starts = np.cumsum([0] + [f.num_examples for f in self.files])
        if self.starts[-1] == 0:
            raise InputError(f"{what}: the {len(self.files)} packed file(s) hold no example, "
                             f"e.g. {self.files[0].path}")

    def __len__(self) -> int:
        return int(self.starts[-1])

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    def rows(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """The examples at global `indices` (int [n]), in that order; int32 [n, L] each."""
        indices = np.asarray(indices, np.int64)
        if len(self.files) == 1:
            return self.files[0].rows(indices, self.max_seq_length)
        which = np.searchsorted(self.starts, indices, side="right") - 1
        out = {k: np.empty((len(indices), self.max_seq_length), np.int32) for k in FEATURE_KEYS}
        for i in np.unique(which):
            at = np.nonzero(which == i)[0]
            part = self.files[i].rows(indices[at] - self.starts[i], self.max_seq_length)
            for k in FEATURE_KEYS:
                out[k][at] = part[k]
        return out


def check_packed(file_pattern: str | list[str], max_seq_length: int,
                 what: str = "--train_data", vocab_size: int | None = None) -> list[str]:
    """Checks packed files before a run (as tfrecord_reader.check_records); returns them.

    Raises:
      InputError: naming the flag and the file.
    """
    return PackedExamples(file_pattern, max_seq_length, vocab_size, what).paths


def _epoch_order(seed: int, epoch: int, n: int) -> np.ndarray:
    return np.random.default_rng([seed, 0, epoch]).permutation(n)


def packed_pretraining_batches(file_pattern: str | list[str] | PackedExamples,
                               batch_size: int, max_seq_length: int,
                               masking: MaskingConfig | None, *, is_training: bool = True,
                               seed: int = 0, skip_batches: int = 0,
                               vocab_size: int | None = None,
                               ) -> Iterator[dict[str, np.ndarray]]:
    """Yields batches as numpy_pipeline.numpy_pretraining_batches does, from packed files.

    Args: as numpy_pretraining_batches; `file_pattern` may also be an open
      PackedExamples; `vocab_size` checks the files' ids (None: not checked).

    Yields:
      dicts of int32 [batch, L] input_ids (masked), input_mask, segment_ids;
      with masking also int32 [batch, N] masked_lm_positions, masked_lm_ids
      and float32 [batch, N] masked_lm_weights.
    """
    examples = (file_pattern if isinstance(file_pattern, PackedExamples)
                else PackedExamples(file_pattern, max_seq_length, vocab_size))
    n = len(examples)
    if not is_training and n < batch_size:
        return
    orders: dict[int, np.ndarray] = {}
    index = skip_batches
    while True:
        if not is_training:
            if (index + 1) * batch_size > n:
                return
            indices = np.arange(index * batch_size, (index + 1) * batch_size)
        else:
            stream = np.arange(index * batch_size, (index + 1) * batch_size, dtype=np.int64)
            epochs = stream // n
            for e in np.unique(epochs):
                if e not in orders:
                    orders[e] = _epoch_order(seed, int(e), n)
            for e in [e for e in orders if e < epochs[0]]:
                del orders[e]  # past epochs
            indices = np.empty(batch_size, np.int64)
            for e in np.unique(epochs):
                at = epochs == e
                indices[at] = orders[e][stream[at] - e * n]
        batch = examples.rows(indices)
        if masking is not None:
            rng = np.random.default_rng([seed, 2, index])  # one stream per batch
            batch.update(mask_batch_numpy(batch["input_ids"], batch["input_mask"], rng, masking))
        yield batch
        index += 1


# === Writing ===
def _example_form(example: dict[str, np.ndarray]) -> tuple[np.ndarray, int] | None:
    """(the real tokens, segment_a) of a record, or None when it is not of the packed form."""
    ids, mask, segments = (example[k] for k in FEATURE_KEYS)
    n = int(mask.sum())
    if n == 0 or not (mask[:n] == 1).all() or mask[n:].any() or ids[n:].any() or segments[n:].any():
        return None
    real = segments[:n]
    a = int(np.argmax(real != 0)) if real.any() else n
    if not (real[:a] == 0).all() or not (real[a:] == 1).all():
        return None
    return ids[:n], a


def pack(record_pattern: str | list[str], output: str, max_seq_length: int | None = None,
         progress: bool = True, overwrite: bool = False) -> dict:
    """Writes the pre-training records of `record_pattern` into one packed file.

    The examples keep the records' order (files sorted by name). The file is
    written under a temporary name and renamed: a kill leaves no partial file.

    Args:
      record_pattern: comma-separated TFRecord globs (build_pretraining_data's shards).
      output: the packed file to write.
      max_seq_length: L the records must have (None: the first record's).
      progress: print a progress line every few seconds on stderr.
      overwrite: replace an existing `output` (never one of the records).

    Returns:
      stats: files, examples, tokens, max_seq_length, max_id, bytes.

    Raises:
      InputError: no record, a corrupt record, or one of another length or form
        (naming the file and the record); shards of a build stopped midway; an output that is a folder, one of the
        records, or an existing file without `overwrite`.
    """
    paths = expand_files(record_pattern, "--records")
    firsts: dict[str, int] = {}  # each file's first record's length
    for path in paths:  # (its first bytes failed as a TFRecord's length checksum)
        with open(path, "rb") as f:
            if f.read(len(MAGIC)) == MAGIC:
                raise InputError(f"--records: {path} is a packed examples file already "
                                 "(pack_pretraining_data's output), not TFRecords; give the "
                                 "records it was packed from")
        if os.path.basename(path) == STATS_FILE:  # 'DIR/*' takes it in
            raise InputError(f"--records: {path} is build_pretraining_data's statistics, not "
                             f"records; give the shards ({os.path.dirname(path) or '.'}/"
                             f"{SHARD_PREFIX}*)")
        try:  # each file's first record before any is packed (had been met minutes in)
            first = next(read_records(path), None)
        except RecordError as e:
            raise InputError(f"--records: {e}") from None
        if first is not None:
            try:
                firsts[path] = len(parse_example(first, FEATURE_KEYS)["input_ids"])
            except (ValueError, IndexError, UnicodeDecodeError, KeyError):
                pass  # the packing loop says what is wrong with it, naming the record
    # Records of another length too, before any is packed (met when reached, after every
    # file before it had been packed: hours into a corpus-sized pack)
    length = max_seq_length or next(iter(firsts.values()), None)
    for path, n in firsts.items():
        if n != length:
            raise InputError(f"{path}: record 0 has length {n}, not max_seq_length={length} "
                             "(records built for another length)")
    check_one_build(paths, "--records", LOCAL_FILES)
    _check_output(output, paths, overwrite)
    for line in stale_write_note(output):  # (not removed: another pack may be writing it)
        print(f"[pack] {line}", file=sys.stderr)
    tokenization = records_tokenization(paths)
    offsets, segment_a, chunks, pending = [0], [], [], []
    max_id, length = -1, max_seq_length
    # the total the build recorded, for the percentage (a pack of millions of records
    # takes an hour, and its lines had given no total)
    meter = Progress("pack", total=recorded_examples(paths, LOCAL_FILES),
                     unit="records") if progress else None
    for path in paths:
        try:
            for index, data in enumerate(read_records(path)):
                where = f"{path}: record {index}"
                try:
                    example = parse_example(data, FEATURE_KEYS)
                except (ValueError, IndexError, UnicodeDecodeError) as e:
                    raise InputError(f"{where} is not a pre-training example ({e})") from None
                sizes = {k: len(v) for k, v in example.items()}
                if len(set(sizes.values())) > 1:
                    raise InputError(f"{where} is not a pre-training example: its features "
                                     "differ in length (" + ", ".join(
                                         f"{k} {n}" for k, n in sizes.items()) + ")")
                if length is None:
                    length = sizes["input_ids"]
                    if not 1 <= length <= MAX_SEQ_LENGTH:
                        raise InputError(f"{where} has length {length}; a packed file holds "
                                         f"examples of 1 to {MAX_SEQ_LENGTH:,} positions")
                if sizes["input_ids"] != length:
                    raise InputError(f"{where} has length {sizes['input_ids']}, not "
                                     f"max_seq_length={length} (records built for another "
                                     "length)")
                form = _example_form(example)
                if form is None:
                    raise InputError(
                        f"{where} is not of the form build_pretraining_data writes (real "
                        "tokens first, at least one, then padding with id 0; segment ids 0 "
                        "then 1), so it cannot be packed")
                tokens, a = form
                if tokens.min() < 0 or tokens.max() > MAX_TOKEN_ID:
                    bad = tokens.min() if tokens.min() < 0 else tokens.max()
                    raise InputError(f"{where} holds token id {bad}, outside the 0 to "
                                     f"{MAX_TOKEN_ID:,} a packed file stores")
                max_id = max(max_id, int(tokens.max()))
                pending.append(tokens.astype(np.uint32))
                if len(pending) == 4096:  # one array per 4,096 examples, not one each
                    chunks.append(np.concatenate(pending))
                    pending = []
                offsets.append(offsets[-1] + len(tokens))
                segment_a.append(a)
                if meter:
                    meter.update(len(segment_a))
        except RecordError as e:
            raise InputError(str(e)) from None
    if not segment_a:
        raise InputError(f"--records: the {len(paths)} file(s) hold no record, e.g. {paths[0]}")
    size = write_packed(output, np.asarray(offsets), np.asarray(segment_a),
                        np.concatenate(chunks + pending), length,
                        [os.path.basename(p) for p in paths], tokenization)
    if meter:
        meter.update(len(segment_a), force=True)
    return {"files": len(paths), "examples": len(segment_a), "tokens": int(offsets[-1]),
            "max_seq_length": length, "max_id": max_id, "bytes": size}


def _vocab_digest(path) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except (OSError, TypeError):
        return None


def records_tokenization(paths: list[str]) -> dict | None:
    """How the records were tokenized, from the `pretrain_data_stats.json` that
    build_pretraining_data writes beside them: do_lower_case, strip_accents and
    vocab_file (None: no folder of them records it).

    Raises:
      InputError: two folders of records built with another casing, accent
        stripping or vocabulary (other bytes; the same path where a file is gone).
    """
    from electra_tf.data.features import records_stats

    recorded = [(path, stats) for path, stats in records_stats(paths, LOCAL_FILES)
                if isinstance(stats, dict) and stats.get("do_lower_case") is not None]
    if not recorded:
        return None
    first_path, first = recorded[0]
    for path, stats in recorded[1:]:
        for key in ("do_lower_case", "strip_accents"):
            if stats.get(key) != first.get(key):
                raise InputError(
                    f"--records: {first_path} and {path} record other {key} "
                    f"({first.get(key)} and {stats.get(key)}); pack records of one "
                    "tokenization")
        a, b = first.get("vocab_file"), stats.get("vocab_file")
        digests = first.get("vocab_sha256"), stats.get("vocab_sha256")  # the build's record
        if None in digests:  # records built before it: the files where they still are
            digests = _vocab_digest(a), _vocab_digest(b)
        if (digests[0] != digests[1]) if None not in digests else a != b:
            raise InputError(f"--records: {first_path} and {path} were built with other "
                             f"vocabularies ({a} and {b}); pack records of one vocabulary")
    return {key: first.get(key) for key in ("do_lower_case", "strip_accents", "vocab_file",
                                            "vocab_sha256")}


def packed_tokenization(path: str) -> dict | None:
    """The tokenization a packed file's header records (`records_tokenization`), or
    None (none recorded, or not a readable packed file: `PackedFile` says why)."""
    try:
        with open(path, "rb") as f:
            prefix = f.read(_PREFIX.size)
            if len(prefix) < _PREFIX.size or prefix[:8] != MAGIC:
                return None
            header = json.loads(f.read(_PREFIX.unpack(prefix)[2]))
    except (OSError, ValueError):
        return None
    value = header.get("tokenization") if isinstance(header, dict) else None
    return value if isinstance(value, dict) else None


def _check_output(output: str, paths: list[str], overwrite: bool) -> None:
    """Refuses an output that would damage an input or a file the user did not mean."""
    if os.path.isdir(output):
        raise InputError(f"--output={output} is a folder; give the packed file's path "
                         f"(e.g. {os.path.join(output, 'pretrain_data.packed')})")
    check_output_file(output, "--output", special=False)
    if not os.path.exists(output):
        return
    for path in paths:
        if os.path.exists(path) and os.path.samefile(path, output):
            raise InputError(f"--output={output} is one of the --records it would read; "
                             "write the packed file elsewhere (e.g. pretrain_data.packed)")
    if not overwrite:
        raise InputError(f"--output={output} already exists; pass --overwrite to replace it "
                         "or choose another --output")
    with open(output, "rb") as f:
        start = f.read(len(MAGIC))
    if start and start != MAGIC:  # (the records' pretrain_data_stats.json had been replaced)
        raise InputError(f"--output={output} is not a packed examples file: --overwrite "
                         "replaces an earlier pack only; remove it first, or write the "
                         "packed file elsewhere")


def write_packed(output: str, offsets: np.ndarray, segment_a: np.ndarray, tokens: np.ndarray,
                 max_seq_length: int, records: list[str],
                 tokenization: dict | None = None) -> int:
    """Writes a packed file (the layout in the module docstring), atomically.

    Args:
      offsets: int [n + 1], where each example's tokens start in `tokens`.
      segment_a: int [n], each example's positions of segment 0.
      tokens: int [T], the real tokens back to back (uint16 on disk when every id fits).
      max_seq_length: L the examples were built for.
      records: what the examples came from, for the header.
      tokenization: how the records were tokenized (`records_tokenization`), for
        the header: run_pretraining checks the casing against it.

    Returns:
      the file's size in bytes.
    """
    max_id = int(tokens.max()) if len(tokens) else -1
    token_dtype = "<u2" if max_id < 1 << 16 else "<u4"
    arrays = {"offsets": np.asarray(offsets, "<i8"), "segment_a": np.asarray(segment_a, "<u2"),
              "tokens": np.asarray(tokens).astype(token_dtype)}
    header = {"max_seq_length": max_seq_length, "num_examples": len(arrays["segment_a"]),
              "num_tokens": len(arrays["tokens"]), "max_id": max_id,
              "token_dtype": token_dtype, "records": records}
    if tokenization:
        header["tokenization"] = tokenization
    blob = _layout(header, arrays)
    atomic_write(output, lambda tmp: _write_blob(tmp, blob), suffix=write_suffix(output))
    return sum(len(part) for part in blob)


def _layout(header: dict, arrays: dict[str, np.ndarray]) -> list[bytes]:
    """The file's parts: prefix and header, then each array at a multiple of _ALIGN."""
    def aligned(n: int) -> int:
        return -(-n // _ALIGN) * _ALIGN

    raw = {name: arrays[name].tobytes() for name in _ARRAYS}
    # The header holds the arrays' offsets, which follow the header's size: place the
    # arrays after a header with room for any offset's digits (20 a number).
    room = len(json.dumps({**header, "arrays": {n: [0, 0, 0] for n in _ARRAYS}},
                          sort_keys=True)) + 3 * 3 * 20
    offset, places = aligned(_PREFIX.size + room), {}
    for name in _ARRAYS:
        places[name] = [offset, len(raw[name]), zlib.crc32(raw[name])]
        offset = aligned(offset + len(raw[name]))
    text = json.dumps({**header, "arrays": places}, sort_keys=True).encode()
    assert _PREFIX.size + len(text) <= places[_ARRAYS[0]][0]
    parts, position = [_PREFIX.pack(MAGIC, FORMAT_VERSION, len(text)), text], \
        _PREFIX.size + len(text)
    for name in _ARRAYS:
        parts += [b"\0" * (places[name][0] - position), raw[name]]
        position = places[name][0] + len(raw[name])
    return parts


def _write_blob(path: str, parts: list[bytes]) -> None:
    with open(path, "wb") as f:
        for part in parts:
            f.write(part)
