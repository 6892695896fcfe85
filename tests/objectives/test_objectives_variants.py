"""The paper's ablation objectives: losses against NumPy (training: tests/training)."""


import numpy as np
import pytest
from keras import ops

from electra_tf.objectives.variants import (
    AllTokensMlmObjective,
    BertMlmObjective,
    Electra15Objective,
    ReplaceMlmObjective,
    copy_mechanism_loss,
)

RNG = np.random.default_rng(0)
B, L, N, V = 3, 7, 2, 11


def np_log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def np_mlm(logits, ids, w):
    ce = -np.take_along_axis(np_log_softmax(logits), ids[..., None], -1)[..., 0]
    return (ce * w).sum() / (w.sum() + 1e-6)


def batch():
    ids = RNG.integers(5, V, size=(B, L)).astype(np.int32)
    mask = np.ones((B, L), np.int32)
    mask[2, 5:] = 0
    positions = np.array([[1, 3], [2, 4], [1, 0]], np.int32)
    weights = np.array([[1, 1], [1, 1], [1, 0]], np.float32)
    return {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids),
            "masked_lm_positions": positions, "masked_lm_ids": ids[np.arange(B)[:, None],
                                                                   positions] * weights.astype(int),
            "masked_lm_weights": weights}


def test_electra_15_counts_only_masked_positions():
    b = batch()
    gen_logits = RNG.normal(size=(B, N, V)).astype(np.float32)
    disc_logits = RNG.normal(size=(B, L)).astype(np.float32)
    labels = RNG.integers(0, 2, size=(B, L)).astype(np.float32)
    out = Electra15Objective().compute_loss(b, gen_logits, {"labels": labels},
                                           {"rtd_logits": disc_logits})
    only = np.zeros((B, L), np.float32)
    for r in range(B):
        for p, w in zip(b["masked_lm_positions"][r], b["masked_lm_weights"][r]):
            if w:
                only[r, p] = 1
    ce = np.maximum(disc_logits, 0) - disc_logits * labels + np.log1p(np.exp(-abs(disc_logits)))
    disc = (ce * only).sum() / (only.sum() + 1e-6)
    mlm = np_mlm(gen_logits, b["masked_lm_ids"], b["masked_lm_weights"])
    np.testing.assert_allclose(float(out["disc_loss"]), disc, rtol=1e-5)
    np.testing.assert_allclose(float(out["loss"]), mlm + 50 * disc, rtol=1e-5)
    # evaluation reports that term as disc_loss, the loss over every real token under
    # its own name (it had replaced the term: an eval disc_loss ~8x the training one)
    from electra_tf.training.reporting import finish

    fake = {"labels": labels, "sampled_ids": np.zeros((B, N), np.int32)}
    sums = {f"loss/{k}": float(v) for k, v in out.items()}
    for name, (num, den) in Electra15Objective().metric_sums(
            b, gen_logits, fake, {"rtd_logits": disc_logits}).items():
        sums[f"{name}/num"], sums[f"{name}/den"] = float(num), float(den)
    results = finish(sums, 1, evaluation=True)
    np.testing.assert_allclose(results["disc_loss"], disc, rtol=1e-5)
    per_token = (ce * b["input_mask"]).sum(1) / b["input_mask"].sum(1)
    np.testing.assert_allclose(results["disc_loss_all_tokens"], per_token.mean(), rtol=1e-5)


def test_bert_and_replace_mlm_losses():
    b = batch()
    gen = RNG.normal(size=(B, N, V)).astype(np.float32)
    main = RNG.normal(size=(B, N, V)).astype(np.float32)
    mlm = np_mlm(gen, b["masked_lm_ids"], b["masked_lm_weights"])
    out = BertMlmObjective().compute_loss(b, gen, {}, None)
    np.testing.assert_allclose(float(out["loss"]), mlm, rtol=1e-5)
    out = ReplaceMlmObjective().compute_loss(b, gen, {}, {"mlm_logits": main})
    expected = mlm + np_mlm(main, b["masked_lm_ids"], b["masked_lm_weights"])
    np.testing.assert_allclose(float(out["loss"]), expected, rtol=1e-5)


def test_bert_masks_as_the_original_unless_asked_for_80_10_10():
    from electra_tf.core.config import PretrainingConfig
    from electra_tf.data.masking import MaskingConfig
    from electra_tf.objectives.variants import get_objective

    def masking(**overrides):
        objective = get_objective(PretrainingConfig(**overrides))
        return MaskingConfig(0.15, 19, 103, 101, 102, 30522, **objective.masking)

    # The original's pretrain_helpers.mask: 85% [MASK], 15% kept, for BERT too.
    for overrides in ({"objective": "bert_mlm"}, {}):
        m = masking(**overrides)
        assert (m.mask_token_prob, m.random_token_prob) == (0.85, 0.0), overrides
    m = masking(objective="bert_mlm", bert_80_10_10=True)
    assert (m.mask_token_prob, m.random_token_prob) == (0.8, 0.1)


def test_copy_mechanism_loss_matches_numpy():
    logits = RNG.normal(size=(B, L, V)).astype(np.float32)
    gate = RNG.normal(size=(B, L)).astype(np.float32)
    original = RNG.integers(0, V, size=(B, L)).astype(np.int32)
    inputs = original.copy()
    inputs[:, ::3] = (inputs[:, ::3] + 1) % V  # some replaced tokens
    mask = np.ones((B, L), np.float32)
    mask[1, 4:] = 0
    p_mlm = np.exp(np.take_along_axis(np_log_softmax(logits), original[..., None], -1)[..., 0])
    c = 1 / (1 + np.exp(-gate))
    p = c * (inputs == original) + (1 - c) * p_mlm
    expected = -(np.log(p) * mask).sum() / mask.sum()
    got = copy_mechanism_loss(logits, gate, inputs, original, mask)
    np.testing.assert_allclose(float(ops.convert_to_numpy(got)), expected, rtol=1e-4)


def test_all_tokens_objective_uses_copy_loss():
    b = batch()
    gen = RNG.normal(size=(B, N, V)).astype(np.float32)
    main = {"mlm_logits": RNG.normal(size=(B, L, V)).astype(np.float32),
            "copy_logits": RNG.normal(size=(B, L)).astype(np.float32)}
    fake = {"input_ids": b["input_ids"], "original_ids": b["input_ids"]}
    out = AllTokensMlmObjective().compute_loss(b, gen, fake, main)
    expected = float(copy_mechanism_loss(main["mlm_logits"], main["copy_logits"],
                                         b["input_ids"], b["input_ids"], b["input_mask"]))
    np.testing.assert_allclose(float(out["main_mlm_loss"]), expected, rtol=1e-5)


def test_adversarial_reward_and_learned_baseline_by_hand():
    """Paper Appendix F: R = D's loss on every sampled position (a sample equal to
    the original included); b = -log sigmoid(z), z fit to exp(-R) by cross-entropy."""
    import tensorflow as tf

    from electra_tf.objectives.variants import AdversarialObjective

    ln2, ln3, ln15 = np.log(2.0), np.log(3.0), np.log(1.5)
    batch = {"input_ids": np.array([[5, 6, 7, 8]]), "input_mask": np.ones((1, 4), np.int32),
             "masked_lm_positions": np.array([[1, 3]]), "masked_lm_ids": np.array([[1, 2]]),
             "masked_lm_weights": np.ones((1, 2), np.float32)}
    # Slot 0 samples the original (1); slot 1 replaces 2 by 0.
    fake = {"sampled_ids": np.array([[1, 0]]), "labels": np.array([[0.0, 0.0, 0.0, 1.0]])}
    mlm_logits = tf.constant([[[0.0, 0.0, 0.0], [ln2, 0.0, 0.0]]])  # p = 1/3; [1/2, 1/4, 1/4]
    rtd = tf.constant([[9.0, 0.0, 9.0, ln3]])  # D at the slots: 0 and ln 3
    z = tf.constant([[ln3, 0.0]])  # b = -log sigmoid(z) = ln(4/3), ln 2
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([mlm_logits, rtd, z])
        out = AdversarialObjective().compute_loss(batch, mlm_logits,
                                                  {**fake, "baseline_logits": z},
                                                  {"rtd_logits": rtd})
        generator_loss = out["reinforce_loss"] + out["baseline_loss"]
    # Rewards: -log(1 - sigmoid(0)) = ln 2 for the correct sample (not 0), and
    # -log sigmoid(ln 3) = ln(4/3) for the replaced one. Advantages +-ln 1.5.
    assert float(out["generator_reward"]) == pytest.approx((ln2 + np.log(4 / 3)) / 2, rel=1e-5)
    # reinforce = -(ln1.5 * log(1/3) - ln1.5 * log(1/2)) / 2 = ln1.5^2 / 2
    assert float(out["reinforce_loss"]) == pytest.approx(ln15 ** 2 / 2, rel=1e-4)
    # CE(z=ln3, target exp(-ln2) = 1/2) and CE(z=0, target exp(-ln(4/3)) = 3/4), averaged.
    baseline = (0.5 * (np.log(4 / 3) + np.log(4.0)) + ln2) / 2
    assert float(out["baseline_loss"]) == pytest.approx(baseline, rel=1e-5)
    ce = [np.log1p(np.exp(-9.0)) + 9.0, ln2, np.log1p(np.exp(-9.0)) + 9.0, np.log(4 / 3)]
    assert float(out["disc_loss"]) == pytest.approx(sum(ce) / 4, rel=1e-5)
    assert float(out["loss"]) == pytest.approx(ln15 ** 2 / 2 + baseline + 50 * sum(ce) / 4,
                                               rel=1e-5)
    # d reinforce / d logits = -(R - b) (onehot(sample) - softmax) / 2 per slot.
    grad = tape.gradient(generator_loss, mlm_logits).numpy()
    np.testing.assert_allclose(grad[0, 0], -ln15 * (np.array([0, 1, 0]) - 1 / 3) / 2, atol=1e-6)
    np.testing.assert_allclose(grad[0, 1], ln15 * np.array([0.5, -0.25, -0.25]) / 2, atol=1e-6)
    # d baseline_loss / dz = (sigmoid(z) - exp(-R)) / 2: (3/4 - 1/2) / 2, (1/2 - 3/4) / 2.
    np.testing.assert_allclose(tape.gradient(generator_loss, z).numpy(), [[0.125, -0.125]],
                               atol=1e-6)
    assert tape.gradient(generator_loss, rtd) is None  # R and b are constants for G
