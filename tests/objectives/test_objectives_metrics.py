"""Pre-training metric sums against NumPy, and their aggregation."""

import numpy as np

from electra_tf.objectives import disc_probs, pretraining_metric_sums

RNG = np.random.default_rng(1)
B, L, N, V = 3, 7, 4, 9
METRIC_NAMES = ("masked_lm_accuracy", "masked_lm_loss", "sampled_masked_lm_accuracy",
                "disc_loss", "disc_accuracy", "disc_precision", "disc_recall")


def _ratios(sums):
    """numerator / denominator per metric, as the training loop reports them."""
    return {k: float(num) / float(den) for k, (num, den) in sums.items()}


def _inputs():
    mlm_logits = RNG.normal(size=(B, N, V)).astype(np.float32)
    ids = RNG.integers(0, V, size=(B, N)).astype(np.int32)
    ids[0, :2] = mlm_logits[0, :2].argmax(-1)  # some argmax hits
    weights = np.ones((B, N), np.float32)
    weights[2, 2:] = 0
    sampled = ids.copy()
    sampled[:, 1] = (ids[:, 1] + 1) % V
    disc_logits = RNG.normal(size=(B, L)).astype(np.float32)
    labels = (RNG.random((B, L)) < 0.4).astype(np.float32)
    mask = np.ones((B, L), np.float32)
    mask[1, 4:] = 0
    labels[1, 4:] = 0
    return mlm_logits, ids, weights, sampled, disc_logits, labels, mask


def _np_metrics(mlm_logits, ids, w, sampled, disc_logits, labels, mask):
    x = mlm_logits.astype(np.float64)
    x = x - x.max(-1, keepdims=True)
    logp = x - np.log(np.exp(x).sum(-1, keepdims=True))
    ce = -np.take_along_axis(logp, ids[..., None], -1)[..., 0]
    p = 1 / (1 + np.exp(-disc_logits.astype(np.float64)))
    tok = -(labels * np.log(p) + (1 - labels) * np.log(1 - p)) * mask
    pred = (disc_logits > 0).astype(np.float64)
    correct = (pred == labels) * mask
    return {
        "masked_lm_accuracy": (w * (mlm_logits.argmax(-1) == ids)).sum() / w.sum(),
        "masked_lm_loss": (w * ce).sum() / w.sum(),
        "sampled_masked_lm_accuracy": (w * (sampled == ids)).sum() / w.sum(),
        "disc_loss": np.mean(tok.sum(-1) / mask.sum(-1)),
        "disc_accuracy": correct.sum() / mask.sum(),
        "disc_precision": (correct * pred).sum() / (pred * mask).sum(),
        "disc_recall": (correct * labels).sum() / (labels * mask).sum(),
    }


def test_metric_sums_match_numpy():
    args = _inputs()
    sums = pretraining_metric_sums(
        *args[:3], sampled_ids=args[3], disc_logits=args[4], disc_labels=args[5], input_mask=args[6]
    )
    assert set(sums) == set(METRIC_NAMES)
    values = _ratios(sums)
    expected = _np_metrics(*args)
    for name in METRIC_NAMES:
        np.testing.assert_allclose(values[name], expected[name], rtol=1e-5, err_msg=name)


def test_sums_aggregate_across_batches():
    a, b = _inputs(), _inputs()

    def kw(x):
        return dict(sampled_ids=x[3], disc_logits=x[4], disc_labels=x[5], input_mask=x[6])

    sums_a = pretraining_metric_sums(*a[:3], **kw(a))
    sums_b = pretraining_metric_sums(*b[:3], **kw(b))
    merged = {k: (sums_a[k][0] + sums_b[k][0], sums_a[k][1] + sums_b[k][1]) for k in sums_a}
    both = [np.concatenate([x, y]) for x, y in zip(a, b)]
    whole = pretraining_metric_sums(*both[:3], **kw(both))
    for name in METRIC_NAMES:
        np.testing.assert_allclose(_ratios(merged)[name], _ratios(whole)[name], rtol=1e-5)


def test_generator_only_metrics_and_zero_denominators():
    mlm_logits, ids, _, *_ = _inputs()
    sums = pretraining_metric_sums(mlm_logits, ids, np.zeros((B, N), np.float32))
    assert set(sums) == {"masked_lm_accuracy", "masked_lm_loss"}
    assert all(float(num) == float(den) == 0.0 for num, den in sums.values())


def test_disc_probs():
    x = np.array([[-2.0, 0.0, 3.0]], np.float32)
    np.testing.assert_allclose(disc_probs(x), 1 / (1 + np.exp(-x)), rtol=1e-6)


def _mean_cosine(vectors):
    """The real-data study's measure (studies/real_data/probe_features.py)."""
    v = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    n = len(v)
    return ((v @ v.T).sum() - n) / (n * (n - 1))


def test_token_cosine_is_the_studys_mean_pairwise_cosine_of_real_states():
    from electra_tf.objectives import token_cosine_sums

    rng = np.random.default_rng(0)
    states = rng.normal(size=(3, 16, 4)).astype(np.float32)
    mask = np.ones((3, 16), np.int32)
    mask[1, 9:] = 0  # padding is left out
    num, den = token_cosine_sums(states, mask, sequences=2, positions=4)
    # Sampled: sequences 0 and 1, positions 0, 4, 8, 12; sequence 1's 12 is padding.
    real = np.concatenate([states[0, ::4], states[1, [0, 4, 8]]])
    assert float(den) == 7 * 6
    np.testing.assert_allclose(float(num) / float(den), _mean_cosine(real), rtol=1e-5)


def test_collinear_states_read_one_and_spread_ones_low():
    from electra_tf.objectives import token_cosine_sums

    rng = np.random.default_rng(1)
    mask = np.ones((4, 8), np.int32)
    collinear = np.ones((4, 8, 16), np.float32) * rng.uniform(0.5, 2.0, (4, 8, 1))
    num, den = token_cosine_sums(collinear, mask)
    assert abs(float(num) / float(den) - 1.0) < 1e-5
    spread = rng.normal(size=(4, 8, 16)).astype(np.float32)
    num, den = token_cosine_sums(spread, mask)
    assert abs(float(num) / float(den)) < 0.2
