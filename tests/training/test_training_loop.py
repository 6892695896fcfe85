"""The pre-training loop: resume == uninterrupted, determinism, outputs, bf16."""

import json
import os

import keras
import numpy as np
import pytest

from electra_tf import folders
from electra_tf.objectives.auc import auc_from_histograms
from electra_tf.objectives.flops import pretraining_flops
from electra_tf.training.backends.tensorflow import TensorFlowPretraining


def weights(trainer):
    return [np.array(v.numpy()) for v in trainer.model.trainable_variables]


def test_resumed_run_equals_uninterrupted_run(trained_run, make_configs, tmp_path):
    config, run = make_configs(tmp_path / "resumed")
    assert config == trained_run["config"]  # the uninterrupted run's
    first = TensorFlowPretraining(config, run)
    first.train(stop_at_step=3)
    assert first.step == 3
    del first
    second = TensorFlowPretraining(config, run)  # a new process would do the same
    assert second.restore() == 3
    second.train()
    assert second.step == 6
    assert len(trained_run["weights"]) == len(weights(second))
    for a, b in zip(trained_run["weights"], weights(second)):
        np.testing.assert_array_equal(a, b)


def test_same_seed_same_weights_other_seed_differs(make_configs, tmp_path):
    """Two trainers of one seed start from the same weights, seed 4 from other ones (that
    a run of seed 3 also ends where another one does: test_resumed_run_equals_uninterrupted_run,
    whose second half starts afresh from the first's checkpoint)."""
    start = weights(TensorFlowPretraining(*make_configs(tmp_path / "a")))
    again = weights(TensorFlowPretraining(*make_configs(tmp_path / "b")))
    for a, b in zip(start, again, strict=True):
        np.testing.assert_array_equal(a, b)
    other = weights(TensorFlowPretraining(*make_configs(tmp_path / "c", seed=4)))
    assert any(not np.array_equal(a, c) for a, c in zip(start, other, strict=True))


def test_outputs_summaries_and_final_files(trained_run):
    final = trained_run["final"]
    for key in ("masked_lm_accuracy", "sampled_masked_lm_accuracy", "disc_auc", "disc_accuracy",
                "disc_precision", "disc_recall", "disc_loss", "masked_lm_loss", "loss",
                "disc_token_cosine"):
        assert key in final and np.isfinite(final[key]), key
    assert 0.0 < final["disc_token_cosine"] < 1.0
    model_dir = trained_run["model_dir"]
    recorded = json.load(open(model_dir / "final_eval.json"))
    assert recorded["disc_token_cosine"] == pytest.approx(final["disc_token_cosine"])
    for name in ("discriminator.weights.h5", "discriminator_config.json",
                 "pretraining_config.json", "final_eval.json"):
        assert (model_dir / name).exists(), name
    assert os.listdir(model_dir / "train") and os.listdir(model_dir / "eval")
    saved = json.load(open(model_dir / "pretraining_config.json"))
    assert saved["pretraining"]["disc_weight"] == 50.0
    assert saved["format_version"] == folders.files.FORMAT_VERSION
    assert saved["backend"] == "tensorflow"
    # the run's training FLOPs (the original's count): per step x steps
    assert saved["training_flops"] == pretraining_flops(trained_run["config"]).to_dict()
    assert saved["training_flops"]["total_flops"] == pytest.approx(
        saved["training_flops"]["flops_per_step"] * trained_run["config"].num_train_steps)
    # The saved discriminator loads into a fresh one with the saved config.
    from electra_tf.modeling import build_discriminator

    d = build_discriminator(folders.files.read_encoder_config(
        str(model_dir / "discriminator_config.json")))
    d.load_weights(str(model_dir / "discriminator.weights.h5"))


def test_bf16_and_gradient_accumulation_train(make_configs, tmp_path):
    config, run = make_configs(tmp_path / "bf16", num_train_steps=2, iterations_per_loop=2,
                               run_overrides={"mixed_precision": "bf16",
                                              "gradient_accumulation_steps": 2})
    try:
        t = TensorFlowPretraining(config, run)
        final = t.train()
        assert np.isfinite(final["loss"])
        assert t.model.generator.encoder.compute_dtype == "bfloat16"
        assert all(v.dtype == "float32" for v in t.model.trainable_variables)
    finally:
        keras.mixed_precision.set_dtype_policy("float32")


def test_vocab_size_mismatch_is_clear(make_configs):
    from electra_tf.core.errors import ConfigError

    config, run = make_configs(vocab_size=30522)
    with pytest.raises(ConfigError, match="vocab_size"):
        TensorFlowPretraining(config, run)


def test_auc_from_histograms():
    rng = np.random.default_rng(0)
    pos_scores, neg_scores = rng.normal(1, 1, 5000), rng.normal(0, 1, 5000)
    bins = np.linspace(-6, 6, 401)
    pos, _ = np.histogram(pos_scores, bins)
    neg, _ = np.histogram(neg_scores, bins)
    exact = (pos_scores[:, None] > neg_scores[None, :]).mean()
    assert auc_from_histograms(pos.astype(float), neg.astype(float)) == pytest.approx(exact,
                                                                                        abs=0.01)
