"""Dynamic masking statistics, eagerly and inside tf.data; purity and seeding."""

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.data.masking import MaskingConfig, mask_batch
from electra_tf.objectives.corruption import scatter_at_positions

CLS, SEP, MASK, VOCAB, L, N = 101, 102, 103, 400, 64, 10


def config(**kw):
    return MaskingConfig(mask_prob=0.15, max_predictions_per_seq=N, mask_id=MASK, cls_id=CLS,
                         sep_id=SEP, vocab_size=VOCAB, **kw)


def make_batch(batch=64, seed=0):
    """Rows of varied length: [CLS] A [SEP] B [SEP] + padding, some [MASK] ids in text."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((batch, L), np.int32)
    mask = np.zeros((batch, L), np.int32)
    for r in range(batch):
        n = int(rng.integers(2, L + 1))
        row = rng.integers(104, VOCAB, size=n)
        row[0], row[n - 1] = CLS, SEP
        if n > 6:
            row[n // 2] = SEP
            row[1] = MASK  # a literal [MASK] in the input is never chosen
        ids[r, :n], mask[r, :n] = row, 1
    return tf.constant(ids), tf.constant(mask)


def check_batch(ids, mask, out, cfg):
    ids, mask = ids.numpy(), mask.numpy()
    pos = out["masked_lm_positions"].numpy()
    lm_ids = out["masked_lm_ids"].numpy()
    w = out["masked_lm_weights"].numpy()
    masked = out["input_ids"].numpy()
    stats = {"chosen": 0, "to_mask": 0, "kept": 0, "random": 0}
    for r in range(ids.shape[0]):
        n_real = mask[r].sum()
        candidates = {i for i in range(L) if mask[r, i] and ids[r, i] not in (CLS, SEP, MASK)}
        k = max(1, min(N, int(np.round(n_real * cfg.mask_prob))))
        k = min(k, len(candidates))
        assert w[r].sum() == k and np.all(w[r, :k] == 1) and np.all(w[r, k:] == 0)
        chosen = pos[r, :k]
        assert len(set(chosen)) == k, "positions must be distinct (no replacement)"
        assert set(chosen) <= candidates
        assert np.all(pos[r, k:] == 0) and np.all(lm_ids[r, k:] == 0)
        assert np.array_equal(lm_ids[r, :k], ids[r, chosen])
        untouched = np.ones(L, bool)
        untouched[chosen] = False
        assert np.array_equal(masked[r, untouched], ids[r, untouched])
        for p in chosen:
            stats["chosen"] += 1
            if masked[r, p] == MASK:
                stats["to_mask"] += 1
            elif masked[r, p] == ids[r, p]:
                stats["kept"] += 1
            else:
                stats["random"] += 1
    return stats


def test_masking_rules_and_85_15_split_eager():
    cfg = config()
    ids, mask = make_batch(256)
    totals = {"chosen": 0, "to_mask": 0, "kept": 0, "random": 0}
    for step in range(8):
        out = mask_batch(ids, mask, tf.constant([5, step]), cfg)
        for k, v in check_batch(ids, mask, out, cfg).items():
            totals[k] += v
    frac_mask = totals["to_mask"] / totals["chosen"]
    assert totals["chosen"] > 3000
    assert abs(frac_mask - 0.85) < 0.03, frac_mask
    assert totals["random"] == 0  # ELECTRA: no random-token replacement


def test_mask_rate_is_fifteen_percent_of_real_tokens():
    ids = tf.constant([[CLS] + list(range(200, 298)) + [SEP]] * 4)  # 100 real tokens
    mask = tf.ones_like(ids)
    cfg = MaskingConfig(mask_prob=0.15, max_predictions_per_seq=20, mask_id=MASK, cls_id=CLS,
                        sep_id=SEP, vocab_size=VOCAB)
    out = mask_batch(ids, mask, tf.constant([1, 2]), cfg)
    assert out["masked_lm_weights"].numpy().sum(-1).tolist() == [15.0] * 4


def test_bert_80_10_10():
    cfg = config(mask_token_prob=0.8, random_token_prob=0.1)
    ids, mask = make_batch(256, seed=1)
    totals = {"chosen": 0, "to_mask": 0, "kept": 0, "random": 0}
    for step in range(6):
        out = mask_batch(ids, mask, tf.constant([9, step]), cfg)
        for k, v in check_batch(ids, mask, out, cfg).items():
            totals[k] += v
    assert abs(totals["to_mask"] / totals["chosen"] - 0.8) < 0.03
    # A random draw can hit the original token, so "random" is a bit under 10%.
    assert abs(totals["random"] / totals["chosen"] - 0.1) < 0.03


def test_positions_are_uniform_over_candidates():
    ids = tf.constant([[CLS] + list(range(200, 230)) + [SEP]] * 128)
    mask = tf.ones_like(ids)
    counts = np.zeros(32)
    for step in range(20):
        out = mask_batch(ids, mask, tf.constant([0, step]), config())
        pos = out["masked_lm_positions"].numpy()[out["masked_lm_weights"].numpy() > 0]
        counts += np.bincount(pos, minlength=32)
    assert counts[0] == 0 and counts[31] == 0
    inner = counts[1:31]
    assert inner.min() > 0.7 * inner.mean() and inner.max() < 1.3 * inner.mean()


def test_pure_and_seeded():
    ids, mask = make_batch(16)
    a = mask_batch(ids, mask, tf.constant([1, 1]), config())
    b = mask_batch(ids, mask, tf.constant([1, 1]), config())
    c = mask_batch(ids, mask, tf.constant([1, 2]), config())
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert not np.array_equal(a["masked_lm_positions"], c["masked_lm_positions"])
    g = tf.function(lambda i, m, s: mask_batch(i, m, s, config()))(ids, mask, tf.constant([1, 1]))
    np.testing.assert_array_equal(a["input_ids"], g["input_ids"])


def test_inside_tf_data_same_rules_and_same_values_as_eager():
    cfg = config()
    ids, mask = make_batch(64, seed=3)
    ds = tf.data.Dataset.from_tensors((ids, mask)).repeat(4).enumerate().map(
        lambda i, x: mask_batch(x[0], x[1], tf.stack([tf.constant(4, tf.int64), i]), cfg))
    for i, out in enumerate(ds):
        check_batch(ids, mask, out, cfg)
        eager = mask_batch(ids, mask, tf.constant([4, i], tf.int64), cfg)
        np.testing.assert_array_equal(out["input_ids"], eager["input_ids"])


def test_scattering_masked_lm_ids_restores_the_original():
    ids, mask = make_batch(32)
    out = mask_batch(ids, mask, tf.constant([3, 3]), config(mask_token_prob=0.8,
                                                              random_token_prob=0.1))
    restored = scatter_at_positions(out["input_ids"], out["masked_lm_positions"],
                                    out["masked_lm_ids"], out["masked_lm_weights"])
    np.testing.assert_array_equal(restored, ids)


def test_rows_without_candidates_get_no_slots():
    ids = tf.constant([[CLS, SEP] + [0] * 14, [CLS, 300, SEP] + [0] * 13])
    mask = tf.constant([[1, 1] + [0] * 14, [1, 1, 1] + [0] * 13])
    out = mask_batch(ids, mask, tf.constant([0, 0]), config())
    assert out["masked_lm_weights"].numpy().sum(-1).tolist() == [0.0, 1.0]
    assert out["masked_lm_positions"].numpy()[1, 0] == 1


def test_bad_config():
    with pytest.raises(ValueError):
        config(mask_token_prob=0.9, random_token_prob=0.2)
    with pytest.raises(ValueError):
        MaskingConfig(0.0, 5, MASK, CLS, SEP, VOCAB)
