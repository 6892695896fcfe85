"""Each objective of the paper's ablations trains, and its checkpoint is one that
fine-tuning loads."""

import json

import numpy as np
import pytest
from helpers import TINY_MODEL

from electra_tf.objectives.variants import OBJECTIVES

# The default suite runs BERT (a generator-only model) through the loop to a
# checkpoint fine-tuning loads. Joint ELECTRA is what most other tests train
# (trained_run: test_training_loop.py reads its final_eval.json, test_finetuning_init.py
# loads its discriminator), so it has no run here. Two-stage's run through the switch
# (test_training_algorithms.py) and Electric's exact resume (test_electric_training.py)
# check their final evaluation and the discriminator fine-tuning loads, as these runs do.
# Adversarial training's gradients are checked in test_training_algorithms.py and the
# other ablations' losses are unit-tested in tests/objectives/: their runs here are slow.
SLOW = {"electra_15", "all_tokens_mlm", "replace_mlm", "uniform_generator"}
ELSEWHERE = {("electra", "joint"), ("electric", "joint")}  # their runs: above
VARIANTS = [pytest.param(o, a, e, id=f"{o}-{a}-{'-'.join(e)}",
                         marks=[pytest.mark.slow] if SLOW & {o, *e} or (
                             not e and (o, a) == ("electra", "adversarial")) else [])
            for o, a, e in [(o, "joint", {}) for o in sorted(OBJECTIVES)
                            if (o, "joint") not in ELSEWHERE] + [
                ("electra", "adversarial", {}),
                ("electra", "joint", {"uniform_generator": True})]]


@pytest.mark.parametrize("objective,algorithm,extra", VARIANTS)
def test_each_variant_trains_and_fine_tunes(objective, algorithm, extra, make_configs,
                                            tmp_path):
    """In-process (run_pretraining's CLI is tests/training/test_training_faults.py's)."""
    from electra_tf.folders.pretraining import load_discriminator
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining

    config, run = make_configs(
        tmp_path, objective=objective, training_algorithm=algorithm,
        generator_hidden_size=0.5, model_hparam_overrides=TINY_MODEL, num_train_steps=2,
        iterations_per_loop=1, num_warmup_steps=1, num_eval_steps=1, **extra)
    TensorFlowPretraining(config, run).train()
    final = json.load(open(tmp_path / "final_eval.json"))
    assert final["step"] == 2
    assert np.isfinite(final["loss"]) and np.isfinite(final["masked_lm_loss"])
    discriminator, _ = load_discriminator(str(tmp_path))  # what run_finetuning loads
    # Every variant keeps a model of D's size: BERT too, whatever generator_hidden_size.
    assert discriminator.config.hidden_size == 16


def test_uniform_generator_trains_only_the_discriminator():
    """No generator network: the MLM loss is the constant log V and no gradient of
    it reaches D's (formerly shared) embeddings."""
    import keras
    import tensorflow as tf

    from electra_tf.core.config import PretrainingConfig
    from electra_tf.objectives import losses
    from electra_tf.objectives.pretrainer import ElectraPretrainer

    cfg = PretrainingConfig(model_size="tiny", vocab_size=40, max_seq_length=12,
                            max_predictions_per_seq=3, model_hparam_overrides=TINY_MODEL,
                            uniform_generator=True)
    keras.utils.set_random_seed(0)
    model = ElectraPretrainer(cfg)
    model.build_with_dummy_batch()
    assert {id(v) for v in model.trainable_variables} == {
        id(v) for v in model.discriminator.trainable_variables}
    ids = np.random.default_rng(0).integers(5, 40, size=(4, 12)).astype(np.int32)
    batch = {"input_ids": tf.constant(ids), "input_mask": tf.ones((4, 12), tf.int32),
             "segment_ids": tf.zeros((4, 12), tf.int32),
             "masked_lm_positions": tf.constant([[1, 4, 7]] * 4, tf.int32),
             "masked_lm_ids": tf.constant(ids[:, [1, 4, 7]]),
             "masked_lm_weights": tf.ones((4, 3))}
    table = model.discriminator.encoder.embeddings.word_embeddings.embeddings
    with tf.GradientTape(persistent=True) as tape:
        out = model(batch, training=True, seed=tf.constant([1, 2]))
        total = model.losses_from(batch, out)
        disc = losses.disc_loss(out["disc"]["rtd_logits"], out["fake"]["labels"],
                                batch["input_mask"])
    assert float(total["mlm_loss"]) == pytest.approx(np.log(40), rel=1e-5)
    np.testing.assert_allclose(tf.convert_to_tensor(tape.gradient(total["loss"], table)),
                               50.0 * tf.convert_to_tensor(tape.gradient(disc, table)),
                               rtol=1e-4, atol=1e-7)
