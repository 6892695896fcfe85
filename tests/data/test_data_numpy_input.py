"""The TensorFlow-free input path: TFRecord reader, NumPy masking, NumPy pipeline.

The reader must give exactly what tf.data parses; the NumPy masking must draw
from the same distribution as the tf masking (checked with chi-square tests
on fixed seeds, so the outcome is deterministic).
"""

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

from electra_tf.core.errors import InputError
from electra_tf.core.fileio import expand_files
from electra_tf.data import features as features_lib
from electra_tf.data.builder import BuildOptions, build_pretraining_data
from electra_tf.data.masking import MaskingConfig, mask_batch, mask_batch_numpy
from electra_tf.data.numpy_pipeline import numpy_pretraining_batches
from electra_tf.data.tfrecord_reader import crc32c, parse_example, read_records
from electra_tf.text.tokenizer import Tokenizer

L = 32


@pytest.fixture(scope="module")
def records(tiny_corpus, tiny_vocab, tmp_path_factory):
    out = tmp_path_factory.mktemp("np_records")
    build_pretraining_data(BuildOptions(files=(tiny_corpus,), vocab_file=tiny_vocab,
                                        output_dir=str(out), max_seq_length=L, num_shards=2))
    return str(out / "pretrain_data.tfrecord-*")


def test_crc32c_known_values():
    assert crc32c(b"") == 0
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720, 32 bytes of zeros


def test_reader_gives_exactly_what_tf_data_parses(records):
    for path in expand_files(records, "TFRecord"):
        ours = [parse_example(r, features_lib.FEATURE_KEYS) for r in read_records(path)]
        theirs = list(tf.data.TFRecordDataset(path).batch(1000).map(
            lambda s: features_lib.parse_examples(s, L)).unbatch().as_numpy_iterator())
        assert len(ours) == len(theirs) > 0
        for a, b in zip(ours, theirs):
            for key in features_lib.FEATURE_KEYS:
                np.testing.assert_array_equal(a[key], b[key])


def test_corrupt_and_truncated_files_are_one_clear_error(records, tmp_path):
    data = open(expand_files(records, "TFRecord")[0], "rb").read()
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x10
    (tmp_path / "flipped").write_bytes(bytes(flipped))
    (tmp_path / "truncated").write_bytes(data[:-7])
    with pytest.raises(InputError, match=r"flipped: record \d+ has a bad (data|length) checksum"):
        list(read_records(str(tmp_path / "flipped")))
    with pytest.raises(InputError, match=r"truncated: record \d+ is truncated"):
        list(read_records(str(tmp_path / "truncated")))


def masking_config(tiny_vocab, **kwargs):
    return MaskingConfig.from_tokenizer(Tokenizer(tiny_vocab), 0.15, int((0.15 + 0.005) * L),
                                        **kwargs)


def test_records_of_another_length_are_refused(records, tiny_vocab):
    with pytest.raises(InputError, match="not --max_seq_length=64"):
        next(numpy_pretraining_batches(records, 4, 64, masking_config(tiny_vocab)))


def test_numpy_pipeline_is_seeded_and_resumes_exactly(records, tiny_vocab):
    masking = masking_config(tiny_vocab)
    full = numpy_pretraining_batches(records, 8, L, masking, seed=3, shuffle_buffer=50)
    first = [next(full) for _ in range(5)]
    again = numpy_pretraining_batches(records, 8, L, masking, seed=3, shuffle_buffer=50)
    resumed = numpy_pretraining_batches(records, 8, L, masking, seed=3, shuffle_buffer=50,
                                        skip_batches=2)
    other_seed = next(numpy_pretraining_batches(records, 8, L, masking, seed=4,
                                                shuffle_buffer=50))
    for a, b in zip(first, again):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    for a in first[2:]:
        b = next(resumed)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(first[0]["input_ids"], other_seed["input_ids"])
    assert first[0]["masked_lm_positions"].dtype == np.int32
    assert first[0]["masked_lm_weights"].dtype == np.float32


def test_eval_mode_reads_every_example_once_in_order(records, tiny_vocab):
    files = expand_files(records, "TFRecord")
    count = sum(1 for f in files for _ in read_records(f))
    batches = list(numpy_pretraining_batches(records, 4, L, None, is_training=False))
    assert len(batches) == count // 4  # drop_remainder
    first = parse_example(next(read_records(files[0])), features_lib.FEATURE_KEYS)
    np.testing.assert_array_equal(batches[0]["input_ids"][0], first["input_ids"])


@pytest.mark.parametrize("bert", [False, True], ids=["electra_85_15", "bert_80_10_10"])
def test_numpy_masking_has_the_tf_masking_distribution(records, tiny_vocab, bert):
    kwargs = {"mask_token_prob": 0.8, "random_token_prob": 0.1} if bert else {}
    masking = masking_config(tiny_vocab, **kwargs)
    batch = next(numpy_pretraining_batches(records, 16, L, None, is_training=False))
    ids, real = batch["input_ids"], batch["input_mask"]
    draws = 150
    tf_out = [{k: v.numpy() for k, v in mask_batch(ids, real, tf.constant([7, i]),
                                                    masking).items()} for i in range(draws)]
    np_out = [mask_batch_numpy(ids, real, np.random.default_rng([7, i]), masking)
              for i in range(draws)]

    def tallies(outs):
        positions = np.zeros((ids.shape[0], L))
        kinds = np.zeros(3)  # [MASK], kept, random token
        for out in outs:
            w = out["masked_lm_weights"] > 0
            # What is masked is always a real, non-special token, and the slot
            # records the original id.
            rows = np.nonzero(w)[0]
            pos = out["masked_lm_positions"][w]
            np.testing.assert_array_equal(out["masked_lm_ids"][w], ids[rows, pos])
            assert np.all(real[rows, pos] == 1)
            assert not np.isin(ids[rows, pos], [masking.cls_id, masking.sep_id,
                                                masking.mask_id]).any()
            np.add.at(positions, (rows, pos), 1)
            new = out["input_ids"][rows, pos]
            kinds += [np.sum(new == masking.mask_id),
                      np.sum((new == ids[rows, pos]) & (new != masking.mask_id)),
                      np.sum((new != ids[rows, pos]) & (new != masking.mask_id))]
        return positions, kinds, np.stack([o["masked_lm_weights"].sum(1) for o in outs])

    tf_pos, tf_kinds, tf_k = tallies(tf_out)
    np_pos, np_kinds, np_k = tallies(np_out)
    np.testing.assert_array_equal(tf_k, np_k)  # how many per row is not random
    # Where: per row, the same distribution over positions.
    for row in range(ids.shape[0]):
        cols = (tf_pos[row] + np_pos[row]) > 0
        if cols.sum() > 1:
            p = stats.chi2_contingency(np.stack([tf_pos[row][cols], np_pos[row][cols]]))[1]
            assert p > 1e-3, (row, p)
    # What: the same [MASK] / kept / random shares, and the configured ones.
    used = [k for k in range(3) if tf_kinds[k] + np_kinds[k] > 0]
    assert stats.chi2_contingency(np.stack([tf_kinds[used], np_kinds[used]]))[1] > 1e-3
    expected = np.array([masking.mask_token_prob, 0.0, masking.random_token_prob])
    expected[1] = 1 - expected[0] - expected[2]
    share = np_kinds / np_kinds.sum()
    # A random token may equal the original (counted as kept): a small slack.
    np.testing.assert_allclose(share, expected, atol=0.03)
