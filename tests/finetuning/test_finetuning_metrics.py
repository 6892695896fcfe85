"""GLUE metrics against scikit-learn and scipy.stats, including degenerate inputs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm

from electra_tf.tasks import metrics


@pytest.mark.parametrize("seed", range(5))
def test_classification_metrics_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    y, p = rng.integers(0, 2, n), rng.integers(0, 2, n)
    assert metrics.accuracy(p, y) == pytest.approx(skm.accuracy_score(y, p))
    assert metrics.f1(p, y) == pytest.approx(skm.f1_score(y, p, zero_division=0.0))
    assert metrics.matthews_corrcoef(p, y) == pytest.approx(skm.matthews_corrcoef(y, p))
    # Three classes (MNLI-sized label set): MCC's multi-class form.
    y3, p3 = rng.integers(0, 3, n), rng.integers(0, 3, n)
    assert metrics.matthews_corrcoef(p3, y3) == pytest.approx(skm.matthews_corrcoef(y3, p3))
    assert metrics.accuracy(p3, y3) == pytest.approx(skm.accuracy_score(y3, p3))


@pytest.mark.parametrize("seed", range(5))
def test_correlations_match_scipy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 80))
    y = rng.integers(0, 6, n).astype(float)  # many ties, like STS-B's scores
    p = y + rng.normal(0, 2, n)
    p[: n // 3] = np.round(p[: n // 3])  # ties in the predictions too
    assert metrics.pearson(p, y) == pytest.approx(stats.pearsonr(p, y)[0], abs=1e-12)
    assert metrics.spearman(p, y) == pytest.approx(stats.spearmanr(p, y)[0], abs=1e-12)
    np.testing.assert_allclose(metrics.rankdata(p), stats.rankdata(p, method="average"))


def test_constant_predictions_score_zero_without_nan():
    y = np.array([0, 1, 1, 0, 1])
    ones, zeros = np.ones(5, int), np.zeros(5, int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert skm.matthews_corrcoef(y, ones) == 0.0
        assert np.isnan(stats.pearsonr(ones.astype(float), y)[0])  # scipy: NaN; ours: 0
    assert metrics.matthews_corrcoef(ones, y) == 0.0
    assert metrics.matthews_corrcoef(zeros, zeros) == 0.0
    assert metrics.f1(zeros, zeros) == 0.0  # no positive anywhere
    assert metrics.f1(ones, y) == pytest.approx(skm.f1_score(y, ones))
    assert metrics.pearson(ones, y) == 0.0
    assert metrics.spearman(y, ones) == 0.0
    assert metrics.accuracy([1], [1]) == 1.0
    assert metrics.matthews_corrcoef(y, y) == pytest.approx(1.0)
    assert metrics.pearson([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == pytest.approx(-1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # squares of 1e200 had overflowed: r was 0.0
        assert metrics.pearson([1e200, 2e200, 3.1e200], [1.0, 2.0, 3.0]) == pytest.approx(
            stats.pearsonr([1.0, 2.0, 3.1], [1.0, 2.0, 3.0])[0], abs=1e-12)
        # values near the float64 maximum: their sum (the mean) had overflowed: r was NaN
        assert metrics.pearson([1.7e308, -1.7e308, 1e308], [1.0, 3.5, 5.0]) == pytest.approx(
            stats.pearsonr([1.7, -1.7, 1.0], [1.0, 3.5, 5.0])[0], abs=1e-12)


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match="3 predictions for 2 labels"):
        metrics.accuracy([0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match="no predictions"):
        metrics.f1([], [])


def test_glue_metric_sets_primary_first():
    y, p = [0, 1, 1, 0], [0, 1, 0, 0]
    assert list(metrics.glue_metrics("cola", p, y)) == ["mcc"]
    assert list(metrics.glue_metrics("STS-B", [0.1, 2.0, 3.0], [0.0, 2.5, 2.0])) == [
        "spearman", "pearson"]
    for name in ("mrpc", "QQP"):
        scores = metrics.glue_metrics(name, p, y)
        assert scores == {"f1": pytest.approx(2 / 3), "accuracy": 0.75}
        assert list(scores) == ["f1", "accuracy"]
    for name in ("sst-2", "mnli", "qnli", "rte", "wnli"):
        assert metrics.glue_metrics(name, p, y) == {"accuracy": 0.75}
    with pytest.raises(ValueError, match="unknown GLUE task 'ax'"):
        metrics.glue_metrics("ax", p, y)
