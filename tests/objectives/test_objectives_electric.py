"""Electric (objectives/electric.py, modeling/electric.py): the two towers' masks, the
loss terms against their formulas in NumPy, and the labels of sampled-equal positions."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
from helpers import TINY_NO_DROPOUT
from keras import ops

from electra_tf.core.config import PretrainingConfig
from electra_tf.core.errors import ConfigError
from electra_tf.objectives.electra import ElectraObjective
from electra_tf.objectives.electric import ElectricObjective
from electra_tf.objectives.pretrainer import ElectraPretrainer
from electra_tf.objectives.variants import get_objective

V, L = 40, 12
CLS, SEP, MASK = 1, 2, 3


class _Masking:
    cls_id, sep_id, mask_id = CLS, SEP, MASK


def _config(**kw):
    return PretrainingConfig(model_size="tiny", model_hparam_overrides=TINY_NO_DROPOUT,
                             vocab_size=V, objective="electric", max_seq_length=L, **kw)


def _pretrainer(**kw):
    cfg = _config(**kw)
    keras.utils.set_random_seed(0)
    model = ElectraPretrainer(cfg, get_objective(cfg, _Masking))
    model.build_with_dummy_batch()
    return model


def _cloze(generator, ids, mask):
    inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids),
              "masked_lm_positions": np.zeros((ids.shape[0], 1), "int32")}
    return ops.convert_to_numpy(generator(inputs)["cloze_logits"])


@pytest.mark.parametrize("untied", [False, True])
def test_cloze_logit_at_t_never_sees_x_t_but_sees_its_neighbours(untied):
    model = _pretrainer(untied_generator_embeddings=untied)
    rng = np.random.default_rng(0)
    ids = rng.integers(4, V, (1, L)).astype("int32")
    ids[0, 0], ids[0, 9] = CLS, SEP
    mask = (np.arange(L) < 10).astype("int32")[None]  # 2 padding positions
    base = _cloze(model.generator, ids, mask)
    for t in range(1, 9):  # the candidates: between [CLS] and [SEP]
        changed = ids.copy()
        changed[0, t] = 4 + (ids[0, t] - 4 + 7) % (V - 4)
        logits = _cloze(model.generator, changed, mask)
        # exactly: a masked key's weight is exp(-10000 + ...) == 0 in float32
        np.testing.assert_array_equal(logits[0, t], base[0, t], err_msg=f"t={t}")
        # ... but the positions next to it read it (t - 1 through rtl, t + 1 through ltr)
        assert np.abs(logits[0, t - 1] - base[0, t - 1]).max() > 1e-4, t
        assert np.abs(logits[0, t + 1] - base[0, t + 1]).max() > 1e-4, t


def test_a_plain_encoder_would_fail_the_mask_test():
    # the check above can fail: without the causal masks, x_t reaches the logit at t
    # (through attention only: small at initialization, but not 0)
    model = _pretrainer()
    for tower in (model.generator.ltr, model.generator.rtl):
        tower.attention_direction = None
    ids = np.full((1, L), 5, "int32")
    ids[0, 0], ids[0, -1] = CLS, SEP
    mask = np.ones((1, L), "int32")
    changed = ids.copy()
    changed[0, 4] = 9
    diff = np.abs(_cloze(model.generator, changed, mask)[0, 4]
                  - _cloze(model.generator, ids, mask)[0, 4]).max()
    assert diff > 1e-7


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _bce(logit, label):
    return np.maximum(logit, 0) - logit * label + np.log1p(np.exp(-np.abs(logit)))


def test_losses_against_the_formulas():
    rng = np.random.default_rng(1)
    B, N = 2, 3
    original = rng.integers(4, V, (B, L)).astype("int32")
    original[:, 0] = CLS
    original[0, 7], original[1, 11] = SEP, SEP
    input_mask = np.stack([np.arange(L) < 8, np.arange(L) < 12]).astype("int32")
    original[0, 8:] = 0
    positions = np.array([[2, 5, 0], [1, 4, 9]], "int32")
    weights = np.array([[1, 1, 0], [1, 1, 1]], "float32")
    masked_lm_ids = np.take_along_axis(original, positions, 1) * weights.astype("int32")
    masked = original.copy()
    for b in range(B):
        for n in range(N):
            if weights[b, n]:
                masked[b, positions[b, n]] = MASK
    corrupted = original.copy()
    sampled = rng.integers(4, V, (B, N)).astype("int32")
    labels = np.zeros((B, L), "float32")
    for b in range(B):
        for n in range(N):
            if weights[b, n]:
                corrupted[b, positions[b, n]] = sampled[b, n]
                labels[b, positions[b, n]] = 1.0
    cloze_logits = rng.normal(size=(B, L, V)).astype("float32")
    mlm_logits = np.take_along_axis(cloze_logits, positions[..., None], 1)
    energy = rng.normal(size=(B, L)).astype("float32")
    batch = {"input_ids": masked, "input_mask": input_mask, "segment_ids": 0 * masked,
             "masked_lm_positions": positions, "masked_lm_ids": masked_lm_ids,
             "masked_lm_weights": weights}
    fake = {"input_ids": corrupted, "labels": labels, "sampled_ids": sampled,
            "original_ids": original, "cloze_logits": cloze_logits}
    objective = ElectricObjective(mask_prob=0.2, gen_weight=1.5, disc_weight=50.0,
                                  special_ids=(CLS, SEP, MASK))
    got = {k: float(v) for k, v in objective.compute_loss(
        batch, mlm_logits, fake, {"rtd_logits": energy}).items()}

    logq = _log_softmax(cloze_logits.astype("float64"))
    cand = input_mask * (original != CLS) * (original != SEP) * (original != MASK)
    nll = -np.take_along_axis(logq, original[..., None], -1)[..., 0]
    cloze = (cand * nll).sum() / (cand.sum() + 1e-6)
    logit = (energy + np.take_along_axis(logq, corrupted[..., None], -1)[..., 0]
             + math.log(0.2 / 0.8))
    disc = (_bce(logit, labels) * input_mask).sum() / (input_mask.sum() + 1e-6)
    mlm_nll = -np.take_along_axis(_log_softmax(mlm_logits.astype("float64")),
                                  masked_lm_ids[..., None], -1)[..., 0]
    mlm = (weights * mlm_nll).sum() / (weights.sum() + 1e-6)
    np.testing.assert_allclose(got["cloze_loss"], cloze, rtol=1e-5)
    np.testing.assert_allclose(got["disc_loss"], disc, rtol=1e-5)
    np.testing.assert_allclose(got["mlm_loss"], mlm, rtol=1e-5)
    np.testing.assert_allclose(got["loss"], 1.5 * cloze + 50.0 * disc, rtol=1e-5)


def test_sampled_positions_equal_to_the_original_are_fake():
    B = 2
    ids = np.tile(np.arange(L, dtype="int32") % (V - 4) + 4, (B, 1))
    ids[:, 0], ids[:, -1] = CLS, SEP
    positions = np.array([[2, 5, 0], [1, 4, 9]], "int32")
    weights = np.array([[1, 1, 0], [1, 1, 1]], "float32")
    masked_lm_ids = np.take_along_axis(ids, positions, 1) * weights.astype("int32")
    masked = ids.copy()
    np.put_along_axis(masked, positions[:, :2], MASK, 1)
    batch = {"input_ids": masked, "input_mask": np.ones((B, L), "int32"),
             "segment_ids": 0 * ids, "masked_lm_positions": positions,
             "masked_lm_ids": masked_lm_ids, "masked_lm_weights": weights}
    # logits that put all their mass on the original token: every sample equals it
    mlm_logits = 1e4 * np.eye(V, dtype="float32")[masked_lm_ids]
    seed = np.array([3, 4], "int32")
    want = np.zeros((B, L), "float32")
    want[0, [2, 5]] = 1.0
    want[1, [1, 4, 9]] = 1.0
    fake = ElectricObjective(special_ids=(CLS, SEP, MASK)).fake_data(batch, mlm_logits, seed)
    np.testing.assert_array_equal(ops.convert_to_numpy(fake["input_ids"]), ids)
    np.testing.assert_array_equal(ops.convert_to_numpy(fake["labels"]), want)
    # ELECTRA labels the same samples original
    electra = ElectraObjective().fake_data(batch, mlm_logits, seed)
    assert float(ops.sum(electra["labels"])) == 0.0


def test_the_generator_reads_the_unmasked_input():
    model = _pretrainer()
    rng = np.random.default_rng(2)
    ids = rng.integers(4, V, (1, L)).astype("int32")
    ids[0, 0], ids[0, -1] = CLS, SEP
    positions = np.array([[3, 6]], "int32")
    masked = ids.copy()
    masked[0, [3, 6]] = MASK
    batch = {"input_ids": masked, "input_mask": np.ones((1, L), "int32"),
             "segment_ids": 0 * ids, "masked_lm_positions": positions,
             "masked_lm_ids": ids[:, [3, 6]], "masked_lm_weights": np.ones((1, 2), "float32")}
    out = model(batch, seed=np.array([1, 2], "int32"))
    np.testing.assert_allclose(ops.convert_to_numpy(out["fake"]["cloze_logits"]),
                               _cloze(model.generator, ids, batch["input_mask"]), atol=1e-6)


def test_config_refuses_what_the_original_cannot_build():
    with pytest.raises(ConfigError, match="electric"):
        _config(uniform_generator=True)
    with pytest.raises(ConfigError, match="electric"):
        _config(untied_generator=False, generator_hidden_size=1.0)
    assert _config().encoders.two_tower


def test_the_loss_needs_the_special_ids():
    with pytest.raises(ValueError, match="special_ids"):
        ElectricObjective().compute_loss({}, None, {"original_ids": None}, {})
