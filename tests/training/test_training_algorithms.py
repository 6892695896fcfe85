"""Two-stage and adversarial training (paper section 3.2)."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import TINY_MODEL, TINY_NO_DROPOUT

from electra_tf.core.config import PretrainingConfig
from electra_tf.core.errors import ConfigError
from electra_tf.folders.pretraining import load_discriminator
from electra_tf.objectives import losses
from electra_tf.objectives.pretrainer import ElectraPretrainer
from electra_tf.training.backends.tensorflow import TensorFlowPretraining


def generator_only(model):
    shared = {id(v) for v in model.discriminator.trainable_variables}
    return [v for v in model.generator.trainable_variables if id(v) not in shared]


@pytest.mark.slow
def test_the_switch_ends_a_progress_line(make_configs, tmp_path, capsys):
    """A stage switch between two lines (here at 3, a line every 4 steps) ends a line: the
    line at 4 had averaged the generator's 3 steps with the discriminator's one, under
    the second stage's name, without its disc columns ("(; not trained: mlm ...)")."""
    sized_like_g = {**TINY_MODEL, "num_attention_heads": 1, "intermediate_size": 64}
    config, run = make_configs(tmp_path / "m", training_algorithm="two_stage",
                               generator_hidden_size=1.0, num_train_steps=6,
                               iterations_per_loop=4, save_checkpoints_steps=100,
                               model_hparam_overrides=sized_like_g, run_overrides={
                                   "eval_data": ""})
    TensorFlowPretraining(config, run).train()
    lines = [line for line in capsys.readouterr().err.splitlines()
             if "[pretrain] step " in line and "/6 |" in line]
    assert [line.split()[2] for line in lines] == ["3/6", "4/6", "6/6"], lines
    assert "disc" not in lines[0] and "(mlm " in lines[0]  # the generator's stage
    assert "(disc " in lines[1] and "; not trained: mlm" in lines[1]  # the discriminator's


# A run through the switch, to the checkpoint fine-tuning loads: slow, as two-stage's
# other run (test_jax_training_options.py across a resume); its config checks below run
# by default.
@pytest.mark.slow
def test_two_stage_copies_g_into_d_then_freezes_g(make_configs, tmp_path):
    sized_like_g = {**TINY_MODEL, "num_attention_heads": 1, "intermediate_size": 64}
    config, run = make_configs(tmp_path / "m", training_algorithm="two_stage",
                               generator_hidden_size=1.0, num_train_steps=6,
                               iterations_per_loop=3, model_hparam_overrides=sized_like_g)
    assert config.stage_starts == (3,)
    first = TensorFlowPretraining(config, run)
    assert [(p.name, p.start, p.end) for p in first.phases] == [
        ("two_stage_generator", 0, 3), ("two_stage_discriminator", 3, 6)]
    model = first.model
    # G owns every variable it uses, its embedding tables included.
    assert not ({id(v) for v in model.generator.trainable_variables}
                & {id(v) for v in model.discriminator.trainable_variables})
    assert (model.generator.encoder.embeddings.word_embeddings.embeddings.shape
            == model.discriminator.encoder.embeddings.word_embeddings.embeddings.shape)
    d_before = [v.numpy().copy() for v in model.discriminator.trainable_variables]
    first.train(stop_at_step=3)  # the generator phase only
    g_after_phase_1 = [v.numpy().copy() for v in model.generator.trainable_variables]
    assert all(np.array_equal(v.numpy(), b) for v, b in zip(
        model.discriminator.trainable_variables, d_before)), "phase 1 must not train D"
    first.initialize_discriminator_from_generator()
    for d, g in zip(model.discriminator.encoder.get_weights(),
                    model.generator.encoder.get_weights()):
        np.testing.assert_array_equal(d, g)  # embeddings included

    resumed = TensorFlowPretraining(config, run)
    resumed.train()
    assert resumed.step == 6
    g_vars = resumed.model.generator.trainable_variables
    assert len(g_vars) == len(g_after_phase_1)
    for v, before in zip(g_vars, g_after_phase_1):
        np.testing.assert_array_equal(v.numpy(), before, err_msg=v.path)  # G frozen in phase 2
    d_table = resumed.model.discriminator.encoder.embeddings.word_embeddings.embeddings
    g_table = resumed.model.generator.encoder.embeddings.word_embeddings.embeddings
    assert not np.array_equal(d_table.numpy(), g_table.numpy()), "phase 2 trains D's tables"
    d_now = [v.numpy() for v in resumed.model.discriminator.encoder.trainable_variables
             if "layer_" in v.path]
    g_now = [v.numpy() for v in resumed.model.generator.encoder.trainable_variables
             if "layer_" in v.path]
    assert any(not np.array_equal(d, g) for d, g in zip(d_now, g_now)), "phase 2 trains D"
    # The final evaluation recorded, and the discriminator fine-tuning loads (of D's size)
    final = json.load(open(tmp_path / "m" / "final_eval.json"))
    assert final["step"] == 6
    assert np.isfinite(final["loss"]) and np.isfinite(final["masked_lm_loss"])
    discriminator, _ = load_discriminator(str(tmp_path / "m"))
    assert discriminator.config.hidden_size == 16


def test_two_stage_needs_untied_generator():
    with pytest.raises(ConfigError, match="untied_generator=True"):
        PretrainingConfig(training_algorithm="two_stage", untied_generator=False,
                          generator_hidden_size=1.0)


def test_two_stage_needs_equal_sizes():
    with pytest.raises(ConfigError, match="equal sizes"):
        PretrainingConfig(training_algorithm="two_stage")


def test_adversarial_gradients_reach_g_only_through_reinforce_and_its_baseline():
    cfg = PretrainingConfig(model_size="tiny", vocab_size=40, max_seq_length=12,
                            max_predictions_per_seq=3, generator_hidden_size=0.5,
                            model_hparam_overrides=TINY_NO_DROPOUT, training_algorithm="adversarial")
    keras.utils.set_random_seed(0)
    model = ElectraPretrainer(cfg)
    model.build_with_dummy_batch()
    assert model.objective.name == "adversarial"
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 40, size=(4, 12)).astype(np.int32)
    batch = {"input_ids": tf.constant(ids), "input_mask": tf.ones((4, 12), tf.int32),
             "segment_ids": tf.zeros((4, 12), tf.int32),
             "masked_lm_positions": tf.constant([[1, 4, 7]] * 4, tf.int32),
             "masked_lm_ids": tf.constant(ids[:, [1, 4, 7]]),
             "masked_lm_weights": tf.ones((4, 3))}
    g_vars = generator_only(model)
    baseline_vars = model.generator.baseline_head.trainable_variables
    assert [v.path for v in baseline_vars] == ["generator/generator_baseline/kernel",
                                               "generator/generator_baseline/bias"]
    assert all(any(v is b for v in g_vars) for b in baseline_vars)
    seed = tf.constant([1, 2])
    with tf.GradientTape(persistent=True) as tape:
        out = model(batch, training=True, seed=seed)
        total = model.losses_from(batch, out)
        disc = losses.disc_loss(out["disc"]["rtd_logits"], out["fake"]["labels"], batch["input_mask"])
        generator_losses = total["reinforce_loss"] + total["baseline_loss"]
    assert out["fake"]["baseline_logits"].shape == (4, 3)
    g_total = tape.gradient(total["loss"], g_vars)
    g_generator = tape.gradient(generator_losses, g_vars)
    g_disc = tape.gradient(disc, g_vars)
    g_mle = tape.gradient(total["mlm_loss"], g_vars)
    assert all(g is None or not np.any(g.numpy()) for g in g_disc), "D's loss reached G"
    assert all(g is None or not np.any(g.numpy()) for g in g_mle), "MLE trains G"
    assert all(g is not None and np.any(g.numpy())
               for g in tape.gradient(total["baseline_loss"], baseline_vars))
    assert all(g is None for g in tape.gradient(total["reinforce_loss"], baseline_vars))
    for a, b in zip(g_total, g_generator):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-8)


def test_only_adversarial_training_builds_the_baseline_head():
    cfg = PretrainingConfig(model_size="tiny", vocab_size=40, max_seq_length=12,
                            max_predictions_per_seq=3, generator_hidden_size=0.5,
                            model_hparam_overrides=TINY_NO_DROPOUT)
    model = ElectraPretrainer(cfg)
    model.build_with_dummy_batch()
    assert model.generator.baseline_head is None
    assert not any("baseline" in v.path for v in model.trainable_variables)
