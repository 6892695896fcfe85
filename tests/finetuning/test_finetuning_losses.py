"""Fine-tuning losses are sums over the batch, as the original's run_finetuning.py
(the per-example losses of its classification, qa and tagging tasks)."""

import numpy as np
import pytest
from keras import ops

from electra_tf.tasks.heads import head_class
from electra_tf.tasks.losses import (
    classification_loss,
    regression_loss,
    span_loss,
    tagging_loss,
)


def head_loss(kind, outputs, labels, **options):
    """The summed loss of a batch by the head class of `kind` (tasks/heads/)."""
    cls = head_class(kind)
    return cls.loss(cls.make_config(**options), outputs, labels)


def head_loss_count(kind, labels, **options):
    cls = head_class(kind)
    return cls.loss_count(cls.make_config(**options), labels)

LN2, LN3 = np.log(2.0), np.log(3.0)


def value(x):
    return float(ops.convert_to_numpy(x))


def test_classification_sums_per_example_cross_entropy():
    logits = np.array([[0.0, 0.0], [LN3, 0.0]], np.float32)
    # CE: -log(1/2) = ln 2, and -log(1/4) = ln 4 for label 1 of [ln 3, 0].
    got = classification_loss(logits, np.array([0, 1]))
    assert value(got) == pytest.approx(LN2 + 2 * LN2, rel=1e-6)  # the mean would be 1.5 ln 2


def test_regression_sums_squared_errors():
    got = regression_loss(np.array([1.0, 2.0, 0.5], np.float32), np.array([0.0, 2.0, 1.5]))
    assert value(got) == pytest.approx(2.0)


def test_tagging_sums_over_weighted_tokens():
    logits = np.zeros((2, 3, 4), np.float32)  # uniform over 4 tags: ln 4 per token
    weights = np.array([[1, 0, 1], [1, 1, 0]], np.float32)
    labels = {"tag_ids": np.array([[0, 1, 2], [3, 0, 1]]), "tag_weights": weights}
    got = tagging_loss(logits, labels["tag_ids"], weights)
    assert value(got) == pytest.approx(4 * 2 * LN2, rel=1e-6)
    assert value(head_loss_count("token_classification", labels)) == pytest.approx(4.0)
    out = head_loss("token_classification", {"tag_logits": logits}, labels)
    assert value(out) / value(head_loss_count("token_classification", labels)) == \
        pytest.approx(2 * LN2)


def test_span_sums_start_end_and_answerability():
    zeros = np.zeros((2, 2), np.float32)  # CE of a uniform start (end) over 2: ln 2
    answerable_logits = np.array([0.0, LN3], np.float32)
    is_impossible = np.array([1, 0])
    # Answerability CE: example 0 (impossible) at logit 0: ln 2; example 1
    # (answerable) at ln 3: -log sigmoid(ln 3) = ln(4/3).
    got = span_loss(zeros, zeros, np.array([0, 1]), np.array([1, 1]), answerable_logits,
                    is_impossible)
    expected = 2 * LN2 + 0.5 * (LN2 + np.log(4 / 3))
    assert value(got) == pytest.approx(expected, rel=1e-6)
    assert value(span_loss(zeros, zeros, np.array([0, 1]), np.array([1, 1]))) == pytest.approx(
        2 * LN2, rel=1e-6)


def test_squad_v2_weighs_the_answerability_loss_by_its_answerable_weight():
    """The original's answerable_weight (qa_tasks.py: losses += answerable_loss *
    answerable_weight, 0.5): the task hands its weight to the span head's loss; squad_v1
    and a v2 run without the classifier have no answerability loss to weigh."""
    from electra_tf.tasks.registry import get_task

    zeros = np.zeros((2, 2), np.float32)
    outputs = {"start_logits": zeros, "end_logits": zeros,
               "answerable_logits": np.array([0.0, LN3], np.float32)}
    labels = {"start_positions": np.array([0, 1]), "end_positions": np.array([1, 1]),
              "is_impossible": np.array([1, 0])}
    bce = LN2 + np.log(4 / 3)
    for weight in (0.5, 2.0, 0.0):
        task = get_task("squad_v2", answerable_weight=weight)
        assert task.loss_options == {"answerable_weight": weight}
        assert value(task.loss(outputs, labels)) == pytest.approx(2 * LN2 + weight * bce,
                                                                  rel=1e-6)
    assert get_task("squad_v1").loss_options == {}
    assert get_task("squad_v2", answerable_classifier=False, joint_prediction=False,
                    answerable_weight=3.0).loss_options == {}
    for bad in (-0.1, float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match="answerable_weight must be a (finite )?number"):
            get_task("squad_v2", answerable_weight=bad)


def test_span_matches_the_originals_impossible_logit_convention():
    """The original trains its logit against is_impossible; ours against answerable."""
    rng = np.random.default_rng(0)
    start, end = rng.normal(size=(2, 5, 7)).astype(np.float32)
    positions = rng.integers(0, 7, size=(2, 5))
    logit = rng.normal(size=5).astype(np.float32)
    impossible = np.array([1, 0, 0, 1, 0])

    def log_softmax(x):
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    def ce(x, p):
        return -np.take_along_axis(log_softmax(x), p[:, None], -1)[:, 0]

    # qa_tasks.py: losses = (start + end) / 2 + 0.5 * sigmoid_CE(labels=is_impossible,
    # logits=its logit), its logit being the negative of ours; then summed.
    theirs = -logit
    bce = np.maximum(theirs, 0) - theirs * impossible + np.log1p(np.exp(-abs(theirs)))
    expected = ((ce(start, positions[0]) + ce(end, positions[1])) / 2 + 0.5 * bce).sum()
    got = head_loss("squad", {"start_logits": start, "end_logits": end,
                             "answerable_logits": logit},
                    {"start_positions": positions[0], "end_positions": positions[1],
                     "is_impossible": impossible})
    assert value(got) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("head,key", [("sequence_classification", "label"),
                                      ("squad", "start_positions")])
def test_count_is_the_number_of_examples(head, key):
    assert value(head_loss_count(head, {key: np.zeros(5)})) == 5.0


def test_unknown_head():
    for old in ("nope", "span", "tagging", "classification", "regression"):
        with pytest.raises(ValueError, match="head kind must be one of"):
            head_class(old)


def test_the_rtd_head_is_served_not_fine_tuned():
    """The pre-trained discriminator's head has no fine-tuning loss (the objective's)."""
    with pytest.raises(NotImplementedError, match="rtd head does not fine-tune"):
        head_loss("rtd", {}, {})


def test_a_task_owns_the_loss_of_its_head():
    """Task.loss is its head's: STS-B (a regression) squared error, SST-2 cross-entropy,
    both over the same "logits" / "label" keys; the count is the examples."""
    from electra_tf.tasks.registry import get_task

    stsb, sst2 = get_task("stsb"), get_task("sst2")
    assert (stsb.head, stsb.regression) == (sst2.head, not sst2.regression) == (
        "sequence_classification", True)
    logits = np.array([1.0, 2.0, 0.5], np.float32)
    target = np.array([0.0, 2.0, 1.5], np.float32)
    assert value(stsb.loss({"logits": logits}, {"label": target})) == pytest.approx(2.0)
    class_logits = np.array([[0.0, 0.0], [LN3, 0.0]], np.float32)
    got = sst2.loss({"logits": class_logits}, {"label": np.array([0, 1])})
    assert value(got) == pytest.approx(3 * LN2, rel=1e-6)
    assert value(stsb.loss_count({"label": target})) == 3.0
