"""Packed examples (data/packed.py): the same examples as the records, seeded batches,
exact resume, one line for a damaged or mismatched file, and the packing command."""

import os
import re
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest
from helpers import patience

from electra_tf.core.errors import InputError
from electra_tf.core.fileio import expand_files
from electra_tf.data import features as features_lib
from electra_tf.data import packed
from electra_tf.data.builder import BuildOptions, build_pretraining_data
from electra_tf.data.masking import MaskingConfig
from electra_tf.data.prefetch import prefetch
from electra_tf.data.tfrecord_reader import parse_example, read_records
from electra_tf.text.tokenizer import Tokenizer

L = 32
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def records(tiny_corpus, tiny_vocab, tmp_path_factory):
    out = tmp_path_factory.mktemp("packed_records")
    build_pretraining_data(BuildOptions(files=(tiny_corpus,), vocab_file=tiny_vocab,
                                        output_dir=str(out), max_seq_length=L, num_shards=3))
    return str(out / "pretrain_data.tfrecord-*")


@pytest.fixture(scope="module")
def packed_file(records, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("packed") / "train.packed")
    packed.pack(records, path, progress=False)
    return path


def record_examples(records):
    return [parse_example(r, features_lib.FEATURE_KEYS)
            for f in expand_files(records, "TFRecord") for r in read_records(f)]


def masking_config(tiny_vocab):
    return MaskingConfig.from_tokenizer(Tokenizer(tiny_vocab), 0.15, int((0.15 + 0.005) * L))


def test_packed_examples_are_the_records(records, packed_file):
    ours = packed.PackedExamples(packed_file, L)
    theirs = record_examples(records)
    assert len(ours) == len(theirs) > 20
    rows = ours.rows(np.arange(len(ours)))
    for i, example in enumerate(theirs):
        for key in features_lib.FEATURE_KEYS:
            np.testing.assert_array_equal(rows[key][i], example[key])
    # both segments and single-segment examples are in the sample
    assert any(e["segment_ids"].any() for e in theirs)
    assert any(not e["segment_ids"].any() for e in theirs)


def test_several_files_read_as_one(records, packed_file, tmp_path):
    shards = expand_files(records, "TFRecord")
    for i, shard in enumerate(shards):
        packed.pack(shard, str(tmp_path / f"part-{i}.packed"), progress=False)
    both = packed.PackedExamples(str(tmp_path / "part-*.packed"), L)
    one = packed.PackedExamples(packed_file, L)
    assert len(both) == len(one)
    picks = np.random.default_rng(0).permutation(len(one))
    for key, value in both.rows(picks).items():
        np.testing.assert_array_equal(value, one.rows(picks)[key])


def test_batches_are_seeded_shuffled_and_resume_exactly(packed_file, tiny_vocab):
    masking = masking_config(tiny_vocab)
    n = len(packed.PackedExamples(packed_file, L))
    batches = packed.packed_pretraining_batches(packed_file, 8, L, masking, seed=3)
    # past the first epoch's end: batches there join two epochs
    count = 2 * n // 8 + 2
    first = [next(batches) for _ in range(count)]
    again = packed.packed_pretraining_batches(packed_file, 8, L, masking, seed=3)
    resumed = packed.packed_pretraining_batches(packed_file, 8, L, masking, seed=3,
                                                skip_batches=count - 4)
    for a in first:
        b = next(again)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    for a in first[-4:]:
        b = next(resumed)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    other = next(packed.packed_pretraining_batches(packed_file, 8, L, masking, seed=4))
    assert not np.array_equal(first[0]["input_ids"], other["input_ids"])
    # every example once per epoch, in another order than the file's
    plain = packed.packed_pretraining_batches(packed_file, 1, L, None, seed=3)
    epoch = np.concatenate([next(plain)["input_ids"] for _ in range(n)])
    everything = packed.PackedExamples(packed_file, L).rows(np.arange(n))["input_ids"]
    assert sorted(r.tobytes() for r in epoch) == sorted(r.tobytes() for r in everything)
    assert not np.array_equal(epoch, everything)
    assert first[0]["input_ids"].dtype == np.int32
    assert first[0]["masked_lm_weights"].dtype == np.float32
    assert first[0]["masked_lm_positions"].shape == (8, masking.max_predictions_per_seq)


def test_masks_only_real_non_special_positions(packed_file, tiny_vocab):
    masking = masking_config(tiny_vocab)
    batch = next(packed.packed_pretraining_batches(packed_file, 16, L, masking, seed=0))
    original = packed.PackedExamples(packed_file, L)
    weights = batch["masked_lm_weights"] > 0
    assert weights.any(axis=1).all()
    positions = batch["masked_lm_positions"][weights]
    rows = np.nonzero(weights)[0]
    assert (batch["input_mask"][rows, positions] == 1).all()
    specials = {masking.cls_id, masking.sep_id, masking.mask_id}
    assert not set(batch["masked_lm_ids"][weights].tolist()) & specials
    del original


def test_eval_reads_every_example_once_in_order(records, packed_file):
    theirs = record_examples(records)
    batches = list(packed.packed_pretraining_batches(packed_file, 4, L, None, is_training=False))
    assert len(batches) == len(theirs) // 4  # the remainder is dropped, as tf.data's
    np.testing.assert_array_equal(batches[1]["input_ids"][0], theirs[4]["input_ids"])
    assert list(packed.packed_pretraining_batches(packed_file, 10 ** 6, L, None,
                                                  is_training=False)) == []


def rewrite(path, target, change):
    data = bytearray(open(path, "rb").read())
    change(data)
    with open(target, "wb") as f:
        f.write(bytes(data))
    return str(target)


def test_damaged_or_mismatched_files_are_one_clear_error(packed_file, records, tmp_path):
    size = os.path.getsize(packed_file)

    def flip_last(data):
        data[-3] ^= 0x40

    def max_id_one(data):  # the header's max_id as 1, its length kept (JSON's spaces)
        digits = re.search(rb'"max_id": (\d+)', data).span(1)
        data[slice(*digits)] = b" " * (digits[1] - digits[0] - 1) + b"1"

    cases = {
        "truncated": (lambda d: d.__delitem__(slice(size - 5, size)), "is truncated"),
        "longer": (lambda d: d.extend(b"\0\0"), "longer than its header says"),
        "flipped": (flip_last, "tokens fail their checksum"),
        "header": (lambda d: d.__setitem__(slice(16, 20), b"{{{{"), "damaged header"),
        "version": (lambda d: d.__setitem__(slice(8, 12), struct.pack("<I", 9)),
                    "has packed format 9"),
        # the header has no checksum: a max_id below the tokens' had passed the
        # vocabulary check
        "max_id": (max_id_one, "damaged header: its max_id 1 is not its tokens' highest id"),
        "empty": (lambda d: d.__delitem__(slice(0, size)), r"is empty \(0 bytes\)"),
        # cut inside its magic (it had been called not a packed file too)
        "cut_magic": (lambda d: d.__delitem__(slice(5, size)), r"is truncated \(5 bytes\)"),
        # its magic whole, the rest of its 16-byte prefix cut (it had been called not a
        # packed file)
        "cut_prefix": (lambda d: d.__delitem__(slice(10, size)), r"is truncated \(10 bytes\)"),
    }
    for name, (change, message) in cases.items():
        path = rewrite(packed_file, tmp_path / f"{name}.packed", change)
        with pytest.raises(InputError, match=message) as e:
            packed.PackedExamples(path, L)
        assert str(e.value).startswith(f"--train_data: {path}") and "\n" not in str(e.value)
    tfrecord = expand_files(records, "TFRecord")[0]
    with pytest.raises(InputError, match="is not a packed examples file .*numpy or tf.data"):
        packed.PackedExamples(tfrecord, L)
    with pytest.raises(InputError, match="max_seq_length 32, but --max_seq_length=64"):
        packed.PackedExamples(packed_file, 64)
    with pytest.raises(InputError, match=r"holds token id \d+, outside the vocabulary's \[0, 5\)"):
        packed.check_packed(packed_file, L, vocab_size=5)
    with pytest.raises(InputError, match="remote path"):
        packed.PackedExamples("gs://bucket/x.packed", L)
    with pytest.raises(InputError, match="matches no file"):
        packed.PackedExamples(str(tmp_path / "none-*.packed"), L)


def test_pack_refuses_what_it_cannot_represent_and_writes_nothing(records, tmp_path):
    import tensorflow as tf

    def write(name, ids, mask, segments):
        path = str(tmp_path / name)
        with tf.io.TFRecordWriter(path) as w:
            w.write(features_lib.serialize({"input_ids": ids, "input_mask": mask,
                                            "segment_ids": segments}))
        return path

    gap = write("gap.tfrecord", [2, 5, 0, 6] + [0] * 4, [1, 1, 0, 1] + [0] * 4, [0] * 8)
    segs = write("segs.tfrecord", [2, 5, 6, 3] + [0] * 4, [1] * 4 + [0] * 4,
                 [0, 1, 0, 0] + [0] * 4)
    negative = write("neg.tfrecord", [2, -5, 3] + [0] * 5, [1] * 3 + [0] * 5, [0] * 8)
    # what uint32 tokens and uint16 segment boundaries would have wrapped, silently
    huge_id = write("huge_id.tfrecord", [2, 2**32 + 7, 3] + [0] * 5, [1] * 3 + [0] * 5, [0] * 8)
    long = write("long.tfrecord", [2] * 70_000, [1] * 70_000, [0] * 70_000)
    ragged = write("ragged.tfrecord", [2, 5, 3] + [0] * 5, [1] * 3 + [0] * 4, [0] * 8)
    out = str(tmp_path / "out.packed")
    for path, message in ((gap, "gap.tfrecord: record 0 is not of the form"),
                          (segs, "segs.tfrecord: record 0 is not of the form"),
                          (negative, "holds token id -5, outside the 0 to 4,294,967,295"),
                          (huge_id, "holds token id 4294967303, outside the 0 to 4,294,967,295"),
                          (long, "has length 70000; a packed file holds examples of 1 to "
                                 "65,535 positions"),
                          (ragged, r"its features differ in length \(input_ids 8, input_mask "
                                   r"7, segment_ids 8\)")):
        with pytest.raises(InputError, match=message):
            packed.pack(path, out, progress=False)
        assert not os.path.exists(out)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp")]
    with pytest.raises(InputError, match="not max_seq_length=16"):
        packed.pack(gap, out, max_seq_length=16, progress=False)


def test_records_of_another_proto_or_float_features_are_one_clear_line(tmp_path):
    """A record that is not a tf.train.Example (a number where the Example has its
    features) had ended in a TypeError traceback; float segment_ids had been read as
    none, and the refusal had said "records of max_seq_length 8, but --max_seq_length=8"."""
    import tensorflow as tf

    from electra_tf.data.tfrecord_reader import LOCAL_FILES, check_records

    other = str(tmp_path / "other.tfrecord")
    with tf.io.TFRecordWriter(other) as w:
        for _ in range(3):
            w.write(b"\x08\x96\x01garbage-proto")
    floats = str(tmp_path / "floats.tfrecord")
    feature = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * 8))
               for k in ("input_ids", "input_mask")}
    feature["segment_ids"] = tf.train.Feature(float_list=tf.train.FloatList(value=[0.0] * 8))
    with tf.io.TFRecordWriter(floats) as w:
        w.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    for path, reason in ((other, "a number where the proto has a message"),
                         (floats, "its 'segment_ids' is a float list, not int64")):
        with pytest.raises(InputError, match=re.escape(
                f"{path} does not hold pre-training examples ({reason}")):
            check_records(path, 8, "--train_data", LOCAL_FILES)
        with pytest.raises(InputError, match=re.escape(
                f"{path}: record 0 is not a pre-training example ({reason}")):
            packed.pack(path, str(tmp_path / "out.packed"), progress=False)
        with pytest.raises(ValueError, match=re.escape(reason)):
            parse_example(next(read_records(path)), features_lib.FEATURE_KEYS)


def test_pack_names_what_a_killed_pack_left(records, tmp_path, capsys):
    """A pack killed while writing leaves its temporary file (full size): the next pack
    into the same file names it (it had stayed, unsaid; another pack may be writing it,
    so it is not removed)."""
    (tmp_path / ".tmp-k1ll3d00.out.packed").write_bytes(b"x" * (3 << 20))
    (tmp_path / ".tmp-other.else.packed").write_bytes(b"x")
    (tmp_path / ".tmp-k3j9x0qa.en.out.packed").write_bytes(b"x")  # en.out.packed's
    packed.pack(records, str(tmp_path / "out.packed"), progress=False)
    err = capsys.readouterr().err
    assert f"[pack] note: {tmp_path}/.tmp-k1ll3d00.out.packed (3.0 MiB) is what a stopped run " \
        "writing out.packed left half-written; remove it" in err, err
    assert "other" not in err
    assert "k3j9x0qa" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".tmp-k1ll3d00.out.packed", ".tmp-k3j9x0qa.en.out.packed", ".tmp-other.else.packed",
        "out.packed"]


def test_pack_given_a_packed_file_says_so(packed_file, tmp_path):
    """A packed file as --records had been called a corrupt TFRecord ("record 0 has a
    bad length checksum")."""
    out = str(tmp_path / "again.packed")
    with pytest.raises(InputError, match=rf"^--records: {re.escape(str(packed_file))} is a "
                       r"packed examples file already \(pack_pretraining_data's output\), "
                       r"not TFRecords; give the records it was packed from$"):
        packed.pack(str(packed_file), out, progress=False)
    assert not os.path.exists(out)


def test_pack_checks_every_files_first_record_before_packing(records, tmp_path, capsys,
                                                           monkeypatch):
    """'DIR/*' takes in the build's statistics, and a damaged file last: each had been met
    after every file before it was packed (seconds of progress lines on a real build),
    the statistics called a corrupt TFRecord."""
    folder = tmp_path / "build"
    folder.mkdir()
    for path in expand_files(records):
        shutil.copy(path, folder)
    (folder / "pretrain_data_stats.json").write_text("{}\n")
    out = str(tmp_path / "out.packed")
    with pytest.raises(InputError) as raised:
        packed.pack(f"{folder}/*", out)
    assert str(raised.value) == (
        f"--records: {folder}/pretrain_data_stats.json is build_pretraining_data's "
        f"statistics, not records; give the shards ({folder}/pretrain_data.tfrecord*)")
    (folder / "pretrain_data_stats.json").unlink()
    (folder / "zz_damaged").write_bytes(b"not a record at all")
    with pytest.raises(InputError) as raised:
        packed.pack(f"{folder}/*", out)
    assert str(raised.value) == (f"--records: {folder}/zz_damaged: record 0 has a bad length "
                                 "checksum (corrupt TFRecord file)")
    assert "[pack]" not in capsys.readouterr().err  # no record was packed first
    assert not os.path.exists(out)
    # a file of records of another length, last: refused before any record is packed too
    import tensorflow as tf

    (folder / "zz_damaged").unlink()
    with tf.io.TFRecordWriter(str(folder / "zz_other_length")) as w:
        w.write(features_lib.serialize({"input_ids": [2, 5, 3] + [0] * 13,
                                        "input_mask": [1] * 3 + [0] * 13,
                                        "segment_ids": [0] * 16}))
    parsed = []

    def parse(data, keys):
        parsed.append(1)
        return parse_example(data, keys)

    monkeypatch.setattr(packed, "parse_example", parse)
    with pytest.raises(InputError) as raised:
        packed.pack(f"{folder}/*", out)
    assert str(raised.value) == (f"{folder}/zz_other_length: record 0 has length 16, not "
                                 f"max_seq_length={L} (records built for another length)")
    assert len(parsed) == len(os.listdir(folder))  # each file's first record alone
    assert not os.path.exists(out)


def test_prefetch_keeps_order_passes_errors_and_stops():
    def numbers():
        yield from range(50)
        raise InputError("boom at 50")

    ahead = prefetch(numbers(), depth=3)
    assert [next(ahead) for _ in range(50)] == list(range(50))
    with pytest.raises(InputError, match="boom at 50"):
        next(ahead)
    endless = prefetch(iter(lambda: 1, None), depth=2)
    assert next(endless) == 1
    endless.close()
    endless.thread.join(10)
    assert not endless.thread.is_alive()
    assert list(prefetch(iter([]), depth=2)) == []
    dropped = prefetch(iter(lambda: 1, None), depth=2)
    thread = dropped.thread
    del dropped  # as an evaluation that reads a few batches and leaves
    thread.join(10)
    assert not thread.is_alive()


def test_pack_progress_counts_against_the_builds_recorded_total(records, tmp_path, capsys):
    """The stats file beside the records gives the total (the lines had given none: an
    hour's pack with no percentage); records without one give no total."""
    from electra_tf.data.tfrecord_reader import LOCAL_FILES

    shards = expand_files(records, "TFRecord")
    total = len(record_examples(records))
    assert features_lib.recorded_examples(shards, LOCAL_FILES) == total
    assert features_lib.recorded_examples(shards[:1], LOCAL_FILES) == len(
        record_examples(shards[0]))
    packed.pack(records, str(tmp_path / "out.packed"))
    assert f"[pack] {total:,}/{total:,} records (100.0%)" in capsys.readouterr().err
    (tmp_path / "copy").mkdir()
    shutil.copy(shards[0], tmp_path / "copy")  # its stats file left behind
    assert features_lib.recorded_examples(
        [str(tmp_path / "copy" / os.path.basename(shards[0])), *shards[1:]], LOCAL_FILES) is None


def test_pack_command(records, tmp_path):
    out = str(tmp_path / "cli.packed")
    proc = subprocess.run([sys.executable, "-m", "electra_tf.pack_pretraining_data",
                           f"--records={records}", f"--output={out}"],
                          capture_output=True, text=True, cwd=REPO, timeout=patience(600))
    assert proc.returncode == 0, proc.stderr
    assert "examples" in proc.stderr and os.path.exists(out)
    proc = subprocess.run([sys.executable, "-m", "electra_tf.pack_pretraining_data",
                           f"--records={tmp_path}/nothing*", f"--output={out}"],
                          capture_output=True, text=True, cwd=REPO, timeout=patience(600))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: --records pattern '{tmp_path}/nothing*' matches no file"]


def test_pack_never_replaces_an_input_or_an_existing_file(records, tmp_path):
    shards = expand_files(records, "TFRecord")
    before = {path: open(path, "rb").read() for path in shards}
    with pytest.raises(InputError, match="is one of the --records it would read"):
        packed.pack(records, shards[0], progress=False, overwrite=True)
    assert {path: open(path, "rb").read() for path in shards} == before
    with pytest.raises(InputError, match="is a folder; give the packed file's path"):
        packed.pack(records, str(tmp_path), progress=False)
    (tmp_path / "a_file").write_text("mine")  # refused before any record is read
    with pytest.raises(InputError, match="a_file is a file, not a folder"):
        packed.pack(records, str(tmp_path / "a_file" / "out.packed"), progress=False)
    # a folder's path (the rename had failed after every record was read, a traceback)
    for path in (tmp_path / "new_folder", tmp_path / "a_file"):
        with pytest.raises(InputError, match=f"--output {path}/ ends in /, a folder's path"):
            packed.pack(records, f"{path}/", progress=False)
    out = tmp_path / "out.packed"
    out.write_bytes(b"mine")
    with pytest.raises(InputError, match="already exists; pass --overwrite"):
        packed.pack(records, str(out), progress=False)
    assert out.read_bytes() == b"mine"
    # --overwrite replaces an earlier pack, not another file (the build's
    # pretrain_data_stats.json beside the records had been replaced, and the records then
    # refused for their stats)
    stats = os.path.join(os.path.dirname(shards[0]), features_lib.STATS_FILE)
    stats_before = open(stats, "rb").read()
    for other in (str(out), stats):
        with pytest.raises(InputError, match="is not a packed examples file: --overwrite "
                                             "replaces an earlier pack only"):
            packed.pack(records, other, progress=False, overwrite=True)
    assert out.read_bytes() == b"mine" and open(stats, "rb").read() == stats_before
    out.write_bytes(b"")
    packed.pack(records, str(out), progress=False, overwrite=True)
    first = out.read_bytes()
    packed.pack(records, str(out), progress=False, overwrite=True)  # an earlier pack
    assert out.read_bytes() == first
    assert len(packed.PackedExamples(str(out), L)) == len(record_examples(records))
    # a device or a pipe: --overwrite had renamed the packed file over it (as root,
    # /dev/null itself would have become a regular file)
    import stat

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="pipe is a device or a pipe, not a file"):
        packed.pack(records, str(fifo), progress=False, overwrite=True)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    # the command: the shard of the report, and a folder, are one line each
    for output, message in ((shards[0], "is one of the --records"), (str(tmp_path), "is a folder")):
        proc = subprocess.run([sys.executable, "-m", "electra_tf.pack_pretraining_data",
                               f"--records={records}", f"--output={output}", "--overwrite"],
                              capture_output=True, text=True, cwd=REPO, timeout=patience(600))
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: --output=") and message in lines[0]
    assert {path: open(path, "rb").read() for path in shards} == before


def test_pack_keeps_the_records_tokenization_and_refuses_a_mix(records, packed_file, tmp_path):
    """The records' pretrain_data_stats.json goes into the packed header, where
    run_pretraining's casing check reads it; records of another casing or vocabulary
    are not packed together."""
    import dataclasses
    import json
    import shutil

    from electra_tf.core.config import PretrainingConfig
    from electra_tf.core.errors import ConfigError
    from electra_tf.data.builder import STATS_FILE
    from electra_tf.training.preflight import check_data_casing

    folder = os.path.dirname(records)
    recorded = packed.packed_tokenization(packed_file)
    built = json.loads(open(os.path.join(folder, STATS_FILE)).read())
    assert recorded == {"do_lower_case": True, "strip_accents": None,
                        "vocab_file": built["vocab_file"], "vocab_sha256": built["vocab_sha256"]}
    config = PretrainingConfig(vocab_size=200)
    check_data_casing(config, [packed_file], packed=True)
    with pytest.raises(ConfigError, match="were built with --do_lower_case=true"):
        check_data_casing(dataclasses.replace(config, do_lower_case=False), [packed_file],
                          packed=True)
    cased = tmp_path / "cased"
    shutil.copytree(folder, cased)
    stats = json.loads((cased / STATS_FILE).read_text())
    (cased / STATS_FILE).write_text(json.dumps({**stats, "do_lower_case": False}))
    both = f"{records},{cased}/pretrain_data.tfrecord-*"
    with pytest.raises(InputError, match="record other do_lower_case"):
        packed.pack(both, str(tmp_path / "mixed.packed"), progress=False)
    other_vocab = tmp_path / "vocab.txt"
    other_vocab.write_text(open(stats["vocab_file"]).read() + "extra\n")
    from electra_tf.text.vocab import load_vocab, tokens_sha256

    other = {"vocab_file": str(other_vocab),
             "vocab_sha256": tokens_sha256(load_vocab(str(other_vocab)))}
    without_sha = {k: v for k, v in stats.items() if k != "vocab_sha256"}
    # the builds' records of their vocabularies; where one has none (built before it),
    # the vocabulary files where they still are
    for recorded_other in ({**stats, **other}, {**without_sha, "vocab_file": str(other_vocab)}):
        (cased / STATS_FILE).write_text(json.dumps(recorded_other))
        with pytest.raises(InputError, match="were built with other vocabularies"):
            packed.pack(both, str(tmp_path / "mixed.packed"), progress=False)
    assert not (tmp_path / "mixed.packed").exists()
    # A packed file's header carries the vocabulary: a run of another is refused.
    from electra_tf.training.preflight import check_data_vocabulary

    check_data_vocabulary(stats["vocab_file"], [packed_file], packed=True)
    with pytest.raises(ConfigError, match="its records were built with another vocabulary"):
        check_data_vocabulary(str(other_vocab), [packed_file], packed=True)
