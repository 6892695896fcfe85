"""GLUE metrics in plain NumPy: accuracy, binary and macro F1, MCC, Pearson and Spearman.

Each function takes two 1-D sequences of equal, non-zero length and returns a
Python float. They match scikit-learn (`accuracy_score`, `f1_score`,
`f1_score(average="macro")`, `matthews_corrcoef`) and scipy.stats (`pearsonr`, `spearmanr`), which the
tests check. Degenerate inputs never give NaN: an undefined F1, MCC or
correlation (no positives anywhere, a constant column) is 0.0, so a model
that predicts one class scores MCC 0 and best-checkpoint selection never
compares NaNs. (scipy returns NaN for a constant input; sklearn returns 0.)

`glue_metrics` returns the metric set GLUE reports per task, primary first
(`GLUE_METRIC_NAMES`, which is also THE list of the nine GLUE tasks: the
`finetuning.glue` registry, the task registry and eval_glue take it from here):

| task        | metrics (first = primary)  |
|-------------|----------------------------|
| cola        | mcc                        |
| stsb        | spearman, pearson          |
| mrpc, qqp   | f1, accuracy               |
| the rest    | accuracy                   |

Spearman is primary for STS-B because the ELECTRA paper reports it for STS
(Section 3.1). For MRPC and QQP the order follows the GLUE leaderboard ("F1 /
Accuracy"); note the ELECTRA paper itself quotes accuracy for them.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

GLUE_METRIC_NAMES: dict[str, tuple[str, ...]] = {
    "cola": ("mcc",),
    "sst2": ("accuracy",),
    "mrpc": ("f1", "accuracy"),
    "stsb": ("spearman", "pearson"),
    "qqp": ("f1", "accuracy"),
    "mnli": ("accuracy",),
    "qnli": ("accuracy",),
    "rte": ("accuracy",),
    "wnli": ("accuracy",),
}
"""GLUE task -> its metrics, primary first; the keys are the nine tasks, in order."""
GLUE_TASK_NAMES: tuple[str, ...] = tuple(GLUE_METRIC_NAMES)


def _pair(predictions: Sequence, labels: Sequence, dtype=None) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(predictions, dtype=dtype).reshape(-1)
    y = np.asarray(labels, dtype=dtype).reshape(-1)
    if p.shape != y.shape:
        raise ValueError(f"{p.size} predictions for {y.size} labels")
    if p.size == 0:
        raise ValueError("no predictions to score")
    return p, y


def accuracy(predictions: Sequence, labels: Sequence) -> float:
    """Fraction of predictions equal to the label."""
    p, y = _pair(predictions, labels)
    return float(np.mean(p == y))


def f1(predictions: Sequence[int], labels: Sequence[int]) -> float:
    """Binary F1 of the positive class 1; 0.0 when there is no positive anywhere."""
    p, y = _pair(predictions, labels)
    p, y = p == 1, y == 1
    tp = float(np.sum(p & y))
    denominator = 2.0 * tp + float(np.sum(p & ~y)) + float(np.sum(~p & y))
    return 0.0 if denominator == 0 else 2.0 * tp / denominator


def macro_f1(predictions: Sequence, labels: Sequence) -> float:
    """Unweighted mean of each class's F1, over the classes in the labels or the
    predictions (as sklearn's average="macro"); a class's undefined F1 is 0.0."""
    p, y = _pair(predictions, labels)
    scores = []
    for c in np.unique(np.concatenate([y, p])):
        tp = float(np.sum((p == c) & (y == c)))
        denominator = 2.0 * tp + float(np.sum((p == c) & (y != c))) + float(
            np.sum((p != c) & (y == c)))
        scores.append(0.0 if denominator == 0 else 2.0 * tp / denominator)
    return float(np.mean(scores))


def matthews_corrcoef(predictions: Sequence[int], labels: Sequence[int]) -> float:
    """Matthews correlation (multi-class R_K form, as sklearn); 0.0 when undefined."""
    p, y = _pair(predictions, labels)
    classes, codes = np.unique(np.concatenate([y, p]), return_inverse=True)
    k, n = len(classes), y.size
    confusion = np.zeros((k, k), dtype=np.float64)
    np.add.at(confusion, (codes[:n], codes[n:]), 1.0)
    t_sum, p_sum = confusion.sum(axis=1), confusion.sum(axis=0)
    correct, total = np.trace(confusion), float(n)
    cov_yp = correct * total - t_sum @ p_sum
    cov_pp = total * total - p_sum @ p_sum
    cov_yy = total * total - t_sum @ t_sum
    if cov_pp == 0 or cov_yy == 0:
        return 0.0
    return float(cov_yp / np.sqrt(cov_yy * cov_pp))


def _unit_scale(v: np.ndarray) -> np.ndarray:
    """v over its largest magnitude (v itself when that is 0)."""
    top = np.abs(v).max() if len(v) else 0.0
    return v / top if top > 0 else v


def pearson(predictions: Sequence[float], labels: Sequence[float]) -> float:
    """Pearson's r; 0.0 when either side is constant."""
    p, y = _pair(predictions, labels, np.float64)
    # Each side scaled to a largest magnitude of 1 after centring, and before it where
    # values come near float64's maximum: r does not change, and squares of values near
    # 1e200, or a sum (the mean) of values near 1e308, would overflow (r came out 0.0 or
    # NaN, with a RuntimeWarning). Ordinary values are centred unscaled, exactly.
    p, y = (_unit_scale(v) if len(v) and np.abs(v).max() > 1e300 else v for v in (p, y))
    p, y = _unit_scale(p - p.mean()), _unit_scale(y - y.mean())
    norm = np.sqrt((p @ p) * (y @ y))
    if norm == 0:
        return 0.0
    return float(np.clip((p @ y) / norm, -1.0, 1.0))


def rankdata(values: Sequence[float]) -> np.ndarray:
    """1-based ranks; tied values share the average of their ranks (float64 [n])."""
    x = np.asarray(values).reshape(-1)
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    # Start index of each run of equal values, in sorted order.
    starts = np.flatnonzero(np.concatenate([[True], sorted_x[1:] != sorted_x[:-1]]))
    ends = np.concatenate([starts[1:], [x.size]])
    run_rank = (starts + ends + 1) / 2.0  # mean of ranks starts+1 .. ends
    ranks = np.empty(x.size, dtype=np.float64)
    ranks[order] = np.repeat(run_rank, ends - starts)
    return ranks


def spearman(predictions: Sequence[float], labels: Sequence[float]) -> float:
    """Spearman's rho: Pearson's r of the average-tie ranks; 0.0 when constant."""
    p, y = _pair(predictions, labels, np.float64)
    return pearson(rankdata(p), rankdata(y))


_FUNCTIONS = {"accuracy": accuracy, "f1": f1, "macro_f1": macro_f1, "mcc": matthews_corrcoef,
              "pearson": pearson, "spearman": spearman}


def normalize_task_name(task_name: str) -> str:
    """'SST-2', 'sts_b', 'MNLI' -> 'sst2', 'stsb', 'mnli'."""
    return task_name.lower().replace("-", "").replace("_", "")


def glue_metric_names(task_name: str) -> tuple[str, ...]:
    """The metrics `glue_metrics` returns for a task, primary first."""
    name = normalize_task_name(task_name)
    if name not in GLUE_TASK_NAMES:
        raise ValueError(f"unknown GLUE task {task_name!r}; known: {', '.join(GLUE_TASK_NAMES)}")
    return GLUE_METRIC_NAMES[name]


def glue_metrics(task_name: str, predictions: Sequence, labels: Sequence) -> dict[str, float]:
    """GLUE's metric set for one task (see the module docstring), primary first.

    Args:
      task_name: a GLUE task, e.g. "cola", "sst-2", "STS-B", "mnli".
      predictions: [n] label ids (classification) or scores (STS-B).
      labels: [n] gold label ids or scores.
    Returns:
      {metric name: value}, in `glue_metric_names(task_name)` order.
    """
    return {m: _FUNCTIONS[m](predictions, labels) for m in glue_metric_names(task_name)}
