"""The span head's joint variant (the original's joint_prediction, qa_tasks.py)."""

import math

import keras
import numpy as np
import pytest

from electra_tf.tasks.model import FinetuningModel, build_head

_gelu = np.vectorize(lambda x: 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0))))


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _joint_head(hidden, beam_size):
    head = build_head("squad", 1, hidden, span_head="joint", beam_size=beam_size)
    head.build((None, None, hidden))
    return head


def test_joint_head_by_hand():
    """H = 2, L = 4. Weights: start logit = h[0]; one qa_hidden unit = h_s[0] + h_e[1]
    (the start half of the concat first, as the original), the end logit = gelu of it.
    h = (0, 0), (2, 1), (1, -1), (3, 0.5); every position allowed ([CLS] and context).
    Start logits (0, 2, 1, 3): beam of 2 = starts 3, 1. End logits of start 3:
    gelu(3 + (0, 1, -1, 0.5)) -> best ends 1 (gelu 4), 3 (gelu 3.5); of start 1:
    gelu(2 + ...) -> ends 1, 3 again."""
    head = _joint_head(2, beam_size=2)
    assert [v.path for v in head.weights] == [
        "task_specific/start_output/kernel", "task_specific/start_output/bias",
        "task_specific/qa_hidden/kernel", "task_specific/qa_hidden/bias",
        "task_specific/qa_logits/kernel", "task_specific/qa_logits/bias"]
    head.start_dense.kernel.assign([[1.0], [0.0]])
    qa_hidden = np.zeros((4, 512), np.float32)
    qa_hidden[0, 0] = qa_hidden[3, 0] = 1.0
    head.qa_hidden.kernel.assign(qa_hidden)
    qa_logits = np.zeros((512, 1), np.float32)
    qa_logits[0, 0] = 1.0
    head.qa_logits.kernel.assign(qa_logits)
    h = np.array([[[0, 0], [2, 1], [1, -1], [3, 0.5]]], np.float32)
    mask, segments = np.ones((1, 4), np.int32), np.array([[0, 1, 1, 1]], np.int32)

    out = head(h, mask, segments, training=False)
    assert sorted(out) == ["end_top_index", "end_top_log_probs", "start_logits",
                           "start_top_index", "start_top_log_probs"]
    start_lp = _log_softmax(np.array([0.0, 2.0, 1.0, 3.0]))
    np.testing.assert_array_equal(out["start_top_index"], [[3, 1]])
    np.testing.assert_allclose(out["start_top_log_probs"], [start_lp[[3, 1]]], atol=1e-6)
    np.testing.assert_array_equal(out["end_top_index"], [[[1, 3], [1, 3]]])
    end_lp_3 = _log_softmax(_gelu(3.0 + np.array([0.0, 1.0, -1.0, 0.5])))
    end_lp_1 = _log_softmax(_gelu(2.0 + np.array([0.0, 1.0, -1.0, 0.5])))
    np.testing.assert_allclose(out["end_top_log_probs"], [[end_lp_3[[1, 3]], end_lp_1[[1, 3]]]],
                               atol=1e-6)

    # Training: the end logits of the gold start (3) over every position.
    train = head(h, mask, segments, training=True, start_positions=np.array([3]))
    assert sorted(train) == ["end_logits", "start_logits"]
    np.testing.assert_allclose(train["end_logits"], [_gelu(3.0 + np.array([0, 1, -1, 0.5]))],
                               atol=1e-6)
    with pytest.raises(ValueError, match="start_positions"):
        head(h, mask, segments, training=True)


def test_joint_head_equals_the_originals_tile_and_concat():
    """Random weights and inputs, padding and a question segment: the split-kernel
    computation equals the original's tile -> concat -> dense(512, gelu) -> dense(1),
    masks (+ -10000 outside [CLS] and the context) and top-k beams."""
    rng = np.random.default_rng(0)
    b, length, hidden, k = 2, 7, 6, 3
    head = _joint_head(hidden, beam_size=k)
    for v in head.weights:
        v.assign(rng.normal(0, 0.5, v.shape).astype("float32"))
    h = rng.normal(0, 1, (b, length, hidden)).astype("float32")
    mask = np.array([[1] * 7, [1] * 5 + [0] * 2], np.int32)
    segments = np.array([[0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 1, 0, 0]], np.int32)
    allowed = mask * np.maximum(segments, np.arange(length) == 0)
    pad = (1 - allowed) * -10000.0
    w = {v.path.split("/", 1)[1]: np.asarray(v, np.float64) for v in head.weights}

    def end_logits(start_vec):  # start_vec [B, K, H] -> [B, K, L], literally as the original
        tiled_start = np.repeat(start_vec[:, :, None, :], length, axis=2)
        tiled_end = np.repeat(h[:, None].astype(np.float64), start_vec.shape[1], axis=1)
        x = np.concatenate([tiled_start, tiled_end], -1)
        x = _gelu(x @ w["qa_hidden/kernel"] + w["qa_hidden/bias"])
        return (x @ w["qa_logits/kernel"] + w["qa_logits/bias"])[..., 0] + pad[:, None]

    start = (h @ w["start_output/kernel"] + w["start_output/bias"])[..., 0] + pad
    start_lp = _log_softmax(start)
    top = np.argsort(-start_lp, axis=-1, kind="stable")[:, :k]
    end_lp = _log_softmax(end_logits(h[np.arange(b)[:, None], top]))
    end_top = np.argsort(-end_lp, axis=-1, kind="stable")[..., :k]

    out = head(h, mask, segments, training=False)
    np.testing.assert_allclose(out["start_logits"], start, atol=1e-4)
    np.testing.assert_array_equal(out["start_top_index"], top)
    np.testing.assert_allclose(out["start_top_log_probs"],
                               np.take_along_axis(start_lp, top, -1), atol=1e-4)
    np.testing.assert_array_equal(out["end_top_index"], end_top)
    np.testing.assert_allclose(out["end_top_log_probs"],
                               np.take_along_axis(end_lp, end_top, -1), atol=1e-4)
    gold = np.array([4, 0])
    train = head(h, mask, segments, training=True, start_positions=gold)
    np.testing.assert_allclose(train["end_logits"],
                               end_logits(h[np.arange(b), gold][:, None])[:, 0], atol=1e-4)


def test_finetuning_model_passes_start_positions_and_records_the_head(tiny_encoder):
    model = FinetuningModel(tiny_encoder, "squad", answerable=True, span_head="joint",
                            beam_size=4)
    model.build()
    assert model.head.get_config()["span_head"] == "joint"
    rng = np.random.default_rng(1)
    ids = rng.integers(1, 30, (2, 16)).astype("int32")
    inputs = {"input_ids": ids, "input_mask": np.ones_like(ids),
              "segment_ids": (np.arange(16)[None] >= 5).astype("int32").repeat(2, 0)}
    train = model({**inputs, "start_positions": np.array([6, 0], np.int32)}, training=True)
    assert {k: tuple(v.shape) for k, v in train.items()} == {
        "start_logits": (2, 16), "end_logits": (2, 16), "answerable_logits": (2,)}
    out = model(inputs, training=False)
    assert {k: tuple(v.shape) for k, v in out.items()} == {
        "start_logits": (2, 16), "start_top_log_probs": (2, 4), "start_top_index": (2, 4),
        "end_top_log_probs": (2, 4, 4), "end_top_index": (2, 4, 4), "answerable_logits": (2,)}
    assert FinetuningModel(tiny_encoder, "squad").head.span_head == "joint"  # as the CLI's
    with pytest.raises(ValueError, match="span_head"):
        build_head("squad", 1, 8, span_head="beam")


@pytest.fixture
def tiny_encoder(encoder_config):
    from electra_tf.modeling.encoder import ElectraEncoder

    return ElectraEncoder(encoder_config(), name="encoder")


def test_joint_head_under_mixed_bfloat16_returns_float32(mixed_bfloat16, encoder_config):
    from electra_tf.modeling.encoder import ElectraEncoder

    model = FinetuningModel(ElectraEncoder(encoder_config(), name="encoder"), "squad",
                            answerable=True, span_head="joint", beam_size=3)
    model.build()
    ids = np.ones((1, 16), np.int32)
    inputs = {"input_ids": ids, "input_mask": ids, "segment_ids": ids}
    out = model(inputs, training=False)
    dtypes = {k: keras.backend.standardize_dtype(v.dtype) for k, v in out.items()}
    assert dtypes == {k: "int32" if "index" in k else "float32" for k in out}
    train = model({**inputs, "start_positions": np.array([3], np.int32)}, training=True)
    assert keras.backend.standardize_dtype(train["end_logits"].dtype) == "float32"


def test_the_answerability_classifier_uses_gelu_whatever_the_encoders_activation():
    """qa_tasks.py builds its 512-unit layer with modeling.gelu; it had followed the
    encoder's hidden_act (relu for a model pre-trained with it)."""
    rng = np.random.default_rng(0)
    seq = rng.normal(size=(2, 5, 4)).astype(np.float32)
    mask = np.ones((2, 5), np.int32)
    segments = np.array([[0, 0, 1, 1, 1]] * 2, np.int32)
    logits, kept = [], {}
    for act in ("gelu", "relu"):
        head = build_head("squad", 1, 4, hidden_act=act, answerable=True)
        head.build((None, None, 4))
        for v in head.weights:  # the same weights in both
            kept.setdefault(v.path, rng.normal(0, 0.5, v.shape).astype(np.float32))
            v.assign(kept[v.path])
        out = head(seq, mask, segments)
        logits.append(np.asarray(out["answerable_logits"]))
    np.testing.assert_allclose(logits[0], logits[1], atol=1e-6)
