"""Gradient-disentangled embedding sharing (`gradient_disentangled_embeddings`, GDES)."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import RECORDS_SEQ as L
from helpers import TINY_NO_DROPOUT

from electra_tf import folders
from electra_tf.core.config import PretrainingConfig
from electra_tf.core.errors import ConfigError
from electra_tf.modeling.models import merged_discriminator
from electra_tf.objectives import losses
from electra_tf.objectives.flops import pretraining_flops
from electra_tf.objectives.pretrainer import ElectraPretrainer
from electra_tf.training.backends.tensorflow import TensorFlowPretraining

TABLES = ("word_embeddings", "position_embeddings", "token_type_embeddings")


def gdes_model(**overrides):
    cfg = PretrainingConfig(model_size="tiny", vocab_size=40, max_seq_length=12,
                            max_predictions_per_seq=3, generator_hidden_size=0.5,
                            model_hparam_overrides=TINY_NO_DROPOUT,
                            gradient_disentangled_embeddings=True, **overrides)
    keras.utils.set_random_seed(0)
    model = ElectraPretrainer(cfg)
    model.build_with_dummy_batch()
    return model


def a_batch(seed=0):
    ids = np.random.default_rng(seed).integers(5, 40, size=(4, 12)).astype(np.int32)
    return {"input_ids": tf.constant(ids), "input_mask": tf.ones((4, 12), tf.int32),
            "segment_ids": tf.constant([[0] * 6 + [1] * 6] * 4, tf.int32),
            "masked_lm_positions": tf.constant([[1, 4, 7]] * 4, tf.int32),
            "masked_lm_ids": tf.constant(ids[:, [1, 4, 7]]),
            "masked_lm_weights": tf.ones((4, 3))}


def tables(embeddings):
    return [getattr(embeddings, name).embeddings for name in TABLES]


def test_g_owns_the_tables_and_d_starts_with_zero_residuals():
    model = gdes_model()
    g_emb, d_emb = model.generator.encoder.embeddings, model.discriminator.encoder.embeddings
    assert d_emb is not g_emb and d_emb.residual_of is g_emb
    assert [t.path for t in tables(g_emb)] == [
        f"generator/encoder/embeddings/{n}/embeddings" for n in TABLES]
    assert [t.path for t in tables(d_emb)] == [
        f"discriminator/encoder/embeddings/{n}/embeddings" for n in TABLES]
    for g, d in zip(tables(g_emb), tables(d_emb)):
        assert g.shape == d.shape and np.any(g.numpy()) and not np.any(d.numpy())
    # D's LayerNorm is its own; the MLM head's output table is G's
    assert d_emb.layer_norm.gamma is not g_emb.layer_norm.gamma
    assert model.generator.mlm_head.token_embedding is g_emb.word_embeddings


def test_only_the_mlm_loss_trains_the_shared_tables_and_only_d_the_residuals():
    model = gdes_model()
    batch = a_batch()
    g_tables = tables(model.generator.encoder.embeddings)
    d_tables = tables(model.discriminator.encoder.embeddings)
    with tf.GradientTape(persistent=True) as tape:
        out = model(batch, training=True, seed=tf.constant([1, 2]))
        total = model.losses_from(batch, out)
        disc = losses.disc_loss(out["disc"]["rtd_logits"], out["fake"]["labels"],
                                batch["input_mask"])
    for g in tape.gradient(disc, g_tables):
        assert g is None or not np.any(tf.convert_to_tensor(g).numpy()), "RTD reached G's tables"
    for g in tape.gradient(disc, d_tables):
        assert np.any(tf.convert_to_tensor(g).numpy()), "RTD must train D's residuals"
    for g in tape.gradient(total["mlm_loss"], d_tables):
        assert g is None, "the MLM loss reached D's residuals"
    assert np.any(tf.convert_to_tensor(tape.gradient(total["mlm_loss"], g_tables[0])).numpy())
    # every trainable variable gets a gradient from the total loss
    grads = tape.gradient(total["loss"], model.trainable_variables)
    assert all(g is not None for g in grads)


def test_the_kept_discriminator_holds_the_sums_and_gives_the_same_outputs():
    model = gdes_model()
    rng = np.random.default_rng(1)
    for table in tables(model.discriminator.encoder.embeddings):  # as after training
        table.assign(rng.normal(0, 0.02, table.shape).astype("float32"))
    kept = model.kept_discriminator()
    assert kept is not model.discriminator
    assert getattr(kept.encoder.embeddings, "residual_of", None) is None
    for name, g, d in zip(TABLES, tables(model.generator.encoder.embeddings),
                          tables(model.discriminator.encoder.embeddings)):
        np.testing.assert_allclose(getattr(kept.encoder.embeddings, name).embeddings.numpy(),
                                   g.numpy() + d.numpy(), rtol=0, atol=0)
    inputs = {k: a_batch()[k] for k in ("input_ids", "input_mask", "segment_ids")}
    np.testing.assert_allclose(kept(inputs)["rtd_logits"].numpy(),
                               model.discriminator(inputs)["rtd_logits"].numpy(),
                               rtol=1e-5, atol=1e-5)
    # every weight but the tables is D's own
    others = [v for v in kept.weights if "embeddings/" not in v.path or "LayerNorm" in v.path]
    source = {v.path: v for v in model.discriminator.weights}
    for v in others:
        np.testing.assert_array_equal(v.numpy(), source[v.path].numpy(), err_msg=v.path)
    assert merged_discriminator(model.discriminator).count_params() == kept.count_params()


@pytest.mark.parametrize("clash, match", [
    (dict(untied_generator_embeddings=True), "untied_generator_embeddings"),
    (dict(uniform_generator=True), "uniform_generator"),
    (dict(objective="bert_mlm"), "objective=bert_mlm"),
    (dict(objective="replace_mlm"), "objective=replace_mlm"),
    (dict(training_algorithm="two_stage", generator_hidden_size=1.0), "two_stage"),
])
def test_gdes_refuses_what_it_cannot_share(clash, match):
    with pytest.raises(ConfigError, match=match):
        PretrainingConfig(gradient_disentangled_embeddings=True, **clash)


def test_adversarial_training_and_electra_15_build():
    assert gdes_model(training_algorithm="adversarial").generator.baseline_head is not None
    assert gdes_model(objective="electra_15").discriminator.encoder.embeddings.residual_of


# Three runs: slow. By default: test_the_cli_trains_with_the_flag_... (a GDES run end to
# end) and tests/training/test_training_loop.py (exact resume of the plain run).
@pytest.mark.slow
def test_a_gdes_run_resumes_exactly_and_writes_the_merged_discriminator(make_configs, tmp_path):
    config, run = make_configs(tmp_path / "a", gradient_disentangled_embeddings=True)
    straight = TensorFlowPretraining(config, run)
    straight.train()
    config_b, run_b = make_configs(tmp_path / "b", gradient_disentangled_embeddings=True)
    first = TensorFlowPretraining(config_b, run_b)
    first.train(stop_at_step=3)
    del first
    resumed = TensorFlowPretraining(config_b, run_b)
    resumed.train()
    assert resumed.step == 6
    for a, b in zip(straight.model.trainable_variables, resumed.model.trainable_variables,
                    strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    model = resumed.model
    for g, d in zip(tables(model.generator.encoder.embeddings),
                    tables(model.discriminator.encoder.embeddings)):
        assert np.any(d.numpy()), f"{d.path} did not train"
    # The folder's discriminator is the merged one; its generator loads on its own.
    saved, _ = folders.pretraining.load_discriminator(str(tmp_path / "b"))
    want = model.kept_discriminator()
    for a, b in zip(saved.weights, want.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    # Fine-tuning from the last checkpoint starts from the same merged discriminator.
    from electra_tf.core.config import FinetuningConfig, FinetuningRun
    from electra_tf.training.finetuning import initial_discriminator

    ckpt = str(tmp_path / "b" / "checkpoints" / "ckpt-6")
    at_6, _ = initial_discriminator(FinetuningConfig(task_name="sst2"), FinetuningRun(
        model_dir="unused", data_dir="unused", init_checkpoint=ckpt))
    for a, b in zip(at_6.weights, want.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    generator = folders.pretraining.load_generator(str(tmp_path / "b"))
    for a, b in zip(generator.weights, model.generator.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    # Resuming without the flag is refused, naming it.
    plain, run_c = make_configs(tmp_path / "b")
    with pytest.raises(ConfigError, match="gradient_disentangled_embeddings"):
        TensorFlowPretraining(plain, run_c)


def test_tf_and_jax_give_the_same_gdes_losses(tiny_records, tmp_path):
    from electra_tf.data.masking import MaskingConfig
    from electra_tf.data.pipeline import pretraining_dataset
    from electra_tf.text.tokenizer import Tokenizer, load_vocab
    from tests.training.test_jax_runtime import PARITY, parity_losses, run_python

    config = dict(model_size="tiny", model_hparam_overrides=TINY_NO_DROPOUT, max_seq_length=L,
                  vocab_size=len(load_vocab(tiny_records["vocab"])), generator_hidden_size=0.5,
                  gradient_disentangled_embeddings=True)
    masking = MaskingConfig.from_tokenizer(Tokenizer(tiny_records["vocab"]), 0.15,
                                           int((0.15 + 0.005) * L))
    batch = next(iter(pretraining_dataset(tiny_records["train"], 8, L, masking, seed=0)))
    np.savez(tmp_path / "batch.npz", **{k: v.numpy() for k, v in batch.items()})
    with np.load(tmp_path / "batch.npz") as data:
        tf_losses = parity_losses(config, str(tmp_path / "w"), {k: data[k] for k in data.files},
                                  ["electra"])
    args = (json.dumps(config), str(tmp_path / "w"), str(tmp_path / "batch.npz"),
            json.dumps(["electra"]))
    jax_losses = json.loads(run_python(PARITY, "jax", *args).splitlines()[-1])
    assert set(tf_losses["electra"]) == {"loss", "mlm_loss", "disc_loss"}
    for key, value in tf_losses["electra"].items():
        assert jax_losses["electra"][key] == pytest.approx(value, rel=1e-5, abs=1e-6), key


# Slow: a run through the command. By default GDES's model, losses and kept
# discriminator are checked above and against the JAX loop, and the recorded FLOPs of a
# run in tests/training/test_training_loop.py.
@pytest.mark.slow
def test_the_cli_trains_with_the_flag_and_counts_the_kept_discriminator(tiny_records, tmp_path):
    from helpers import run_module

    from tests.training.test_training_faults import pretrain_flags

    model_dir = tmp_path / "cli"
    proc = run_module("electra_tf.run_pretraining", *pretrain_flags(
        tiny_records, model_dir, gradient_disentangled_embeddings=True))
    assert proc.returncode == 0, proc.stderr[-3000:]
    saved, _ = folders.pretraining.load_discriminator(str(model_dir))
    line = next(x for x in proc.stderr.splitlines() if " params" in x)
    assert f"discriminator {saved.count_params():,} params" in line, line
    assert "gradient-disentangled" in line
    # the run's training FLOPs, printed and recorded (GDES: D's residual tables counted)
    recorded = json.load(open(model_dir / "pretraining_config.json"))["training_flops"]
    config = PretrainingConfig.from_dict(
        json.load(open(model_dir / "pretraining_config.json"))["pretraining"])
    assert recorded == pretraining_flops(config).to_dict()
    assert "discriminator_residual_embeddings" in recorded["phases"][0]["parts"]
    line = next(x for x in proc.stderr.splitlines() if "training FLOPs" in x)
    assert f"{recorded['total_flops']:.3e} for {config.num_train_steps:,} steps" in line, line


@pytest.mark.slow
def test_a_jax_gdes_run_resumes_exactly_and_writes_the_merged_discriminator(tiny_records,
                                                                            tmp_path):
    from tests.training.test_jax_runtime import config_json, train_runs

    straight, resumed = train_runs([
        (config_json(tiny_records, tmp_path / "a", gradient_disentangled_embeddings=True),
         [None]),
        (config_json(tiny_records, tmp_path / "b", gradient_disentangled_embeddings=True),
         [3, None])])
    assert straight["step"] == resumed["step"] == 6 and straight["final"] == resumed["final"]
    for a, b in zip(straight["weights"], resumed["weights"], strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # The JAX folder's discriminator is the merged one: its tables are G's + D's residuals.
    saved, _ = folders.pretraining.load_discriminator(str(tmp_path / "b"))
    config = PretrainingConfig(**json.loads(config_json(
        tiny_records, tmp_path / "b", gradient_disentangled_embeddings=True))["config"])
    model = ElectraPretrainer(config)
    model.build_with_dummy_batch()
    for variable, value in zip(model.trainable_variables, resumed["weights"], strict=True):
        variable.assign(np.asarray(value, dtype="float32"))
    for name, g, d in zip(TABLES, tables(model.generator.encoder.embeddings),
                          tables(model.discriminator.encoder.embeddings)):
        assert np.any(d.numpy()), f"{d.path} did not train under JAX"
        np.testing.assert_allclose(getattr(saved.encoder.embeddings, name).embeddings.numpy(),
                                   g.numpy() + d.numpy(), rtol=0, atol=1e-7)
