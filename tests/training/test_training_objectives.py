"""Each objective of the paper's ablations trains through the CLI, and its
checkpoint is one that fine-tuning loads."""

import json

import numpy as np
import pytest

from electra_tf.objectives.variants import OBJECTIVES

VARIANTS = [(o, "joint", "") for o in sorted(OBJECTIVES)] + [
    ("electra", "two_stage", ""), ("electra", "adversarial", ""),
    ("electra", "joint", "--uniform_generator")]


@pytest.mark.parametrize("objective,algorithm,extra", VARIANTS)
def test_each_variant_trains_through_the_cli_and_fine_tunes(objective, algorithm, extra,
                                                            tiny_records, tmp_path):
    from conftest import run_module

    from electra_tf.artifacts import load_discriminator
    from electra_tf.tokenization import load_vocab

    tiny = {"embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 2,
            "num_attention_heads": 2, "intermediate_size": 32}
    gen_size = "0.5"
    if algorithm == "two_stage":  # G and D of one size
        tiny.update(num_attention_heads=1, intermediate_size=64)
        gen_size = "1.0"
    vocab = tiny_records["vocab"]
    proc = run_module(
        "electra_tf.run_pretraining", f"--objective={objective}",
        f"--training_algorithm={algorithm}", f"--generator_hidden_size={gen_size}",
        f"--train_data={tiny_records['train']}", f"--eval_data={tiny_records['eval']}",
        f"--vocab_file={vocab}", f"--vocab_size={len(load_vocab(vocab))}",
        f"--model_dir={tmp_path}", "--model_size=tiny",
        f"--model_hparam_overrides={json.dumps(tiny)}", "--max_seq_length=32",
        "--train_batch_size=8", "--eval_batch_size=8",
        "--num_train_steps=2", "--iterations_per_loop=1", "--num_warmup_steps=1",
        "--num_eval_steps=1", *([extra] if extra else []))
    assert proc.returncode == 0, proc.stderr[-3000:]
    final = json.load(open(tmp_path / "final_eval.json"))
    assert np.isfinite(final["loss"]) and np.isfinite(final["mlm_loss"])
    discriminator, _ = load_discriminator(str(tmp_path))  # what run_finetuning loads
    # Every variant keeps a model of D's size: BERT too, whatever generator_hidden_size.
    assert discriminator.config.hidden_size == 16


def test_uniform_generator_trains_only_the_discriminator():
    """No generator network: the MLM loss is the constant log V and no gradient of
    it reaches D's (formerly shared) embeddings."""
    import keras
    import tensorflow as tf

    from electra_tf.config import PretrainingConfig
    from electra_tf.objectives import losses
    from electra_tf.pretrainer import ElectraPretrainer

    tiny = {"embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 2,
            "num_attention_heads": 2, "intermediate_size": 32}
    cfg = PretrainingConfig(model_size="tiny", vocab_size=40, max_seq_length=12,
                            max_predictions_per_seq=3, model_hparam_overrides=tiny,
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
