"""Generator, discriminator and the three weight-sharing modes (paper section 3.2)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.core.config import PretrainingConfig
from electra_tf.modeling import (
    ElectraDiscriminator,
    ElectraGenerator,
    build_discriminator,
    build_pretraining_models,
    gather_positions,
    get_activation,
)


def _ids(variables):
    return {id(v) for v in variables}


def test_outputs_shapes_and_dtypes(pretraining_config, inputs):
    gen, disc = build_pretraining_models(pretraining_config().encoders)
    x = inputs()
    g, d = gen(x), disc(x)
    assert set(g) == {"mlm_logits", "sequence_output"}
    assert set(d) == {"rtd_logits", "sequence_output", "pooled_output"}
    assert g["mlm_logits"].shape == (2, 3, 32) and g["mlm_logits"].dtype == "float32"
    assert g["sequence_output"].shape == (2, 16, 8)
    assert d["rtd_logits"].shape == (2, 16) and d["rtd_logits"].dtype == "float32"
    np.testing.assert_array_equal(d["pooled_output"], d["sequence_output"][:, 0])


def test_mlm_head_gathers_then_uses_tied_table(pretraining_config, inputs):
    gen, disc = build_pretraining_models(pretraining_config().encoders)
    head = gen.mlm_head
    head.output_bias.assign(np.linspace(-1, 1, 32).astype("float32"))
    x = inputs()
    out = gen(x)
    hidden = gather_positions(out["sequence_output"], x["masked_lm_positions"])
    hidden = np.asarray(head.layer_norm(keras.activations.gelu(head.dense(hidden), False)))
    table = disc.encoder.embeddings.word_embeddings.embeddings.numpy()
    want = hidden @ table.T + head.output_bias.numpy()
    np.testing.assert_allclose(out["mlm_logits"], want, atol=1e-5)


def test_default_ties_embeddings_only(pretraining_config, inputs):
    gen, disc = build_pretraining_models(pretraining_config().encoders)
    assert gen.encoder is not disc.encoder
    assert gen.encoder.embeddings is disc.encoder.embeddings
    shared = _ids(disc.encoder.embeddings.weights)
    assert len(shared) == 5  # word, position and type tables + LayerNorm gamma/beta.
    assert _ids(gen.weights) & _ids(disc.weights) == shared
    # The MLM output weights are D's input word-embedding variable.
    word = disc.encoder.embeddings.word_embeddings.embeddings
    assert gen.mlm_head.token_embedding.embeddings is word
    assert all(p.startswith("discriminator/") for p in
               (v.path for v in disc.encoder.embeddings.weights))
    # Each keeps its own projection: D 8 -> 16, G embeds at 8 and is 8 wide.
    assert disc.encoder.embeddings_project.kernel.shape == (8, 16)
    assert gen.encoder.embeddings_project is None
    # Changing the shared table changes G's logits.
    x = inputs()
    before = np.asarray(gen(x)["mlm_logits"])
    word.assign(word.numpy() * 2.0)
    assert not np.allclose(before, gen(x)["mlm_logits"])


def test_projection_when_generator_is_narrower(pretraining_config):
    gen, disc = build_pretraining_models(pretraining_config(generator_hidden_size=0.25).encoders)
    assert gen.encoder.embeddings is disc.encoder.embeddings
    assert gen.encoder.embeddings_project.kernel.shape == (8, 4)
    assert gen.mlm_head.dense.kernel.shape == (4, 8)


def test_untied_generator_embeddings(pretraining_config):
    config = pretraining_config(untied_generator_embeddings=True)
    gen, disc = build_pretraining_models(config.encoders)
    assert not _ids(gen.weights) & _ids(disc.weights)
    # Untied, G embeds at its own width (8 = 0.5 * 16), as the original.
    assert gen.encoder.embeddings.word_embeddings.embeddings.shape == (32, 8)
    assert gen.encoder.config.embedding_size is None
    assert gen.mlm_head.token_embedding is gen.encoder.embeddings.word_embeddings


def test_fully_tied_generator(pretraining_config):
    config = pretraining_config(untied_generator=False, generator_hidden_size=1.0)
    gen, disc = build_pretraining_models(config.encoders)
    assert gen.encoder is disc.encoder
    own = _ids(gen.weights) - _ids(disc.weights)
    assert own == _ids(gen.mlm_head.weights) - _ids(disc.encoder.weights)
    assert len(own) == 5  # dense kernel/bias, LayerNorm gamma/beta, output_bias.
    with pytest.raises(ValueError, match="equal sizes"):
        pretraining_config(untied_generator=False, generator_hidden_size=0.5)


def test_bert_is_built_at_the_discriminators_full_size(pretraining_config, inputs):
    """The original builds BERT with D's config whatever generator_hidden_size says."""
    config = pretraining_config(generator_hidden_size=0.25, generator_layers=0.5,
                                objective="bert_mlm")
    assert config.generator_config() == config.discriminator_config()
    gen, disc = build_pretraining_models(config.encoders)
    assert gen.encoder is disc.encoder
    assert gen.encoder.config.hidden_size == 16 and len(gen.encoder.transformer_layers) == 2
    assert gen(inputs())["sequence_output"].shape == (2, 16, 16)


def test_uniform_generator_is_no_network(pretraining_config, inputs):
    """The original's uniform_generator: constant zero logits, no generator variables."""
    from electra_tf.modeling.models import UniformGenerator

    gen, disc = build_pretraining_models(pretraining_config(uniform_generator=True).encoders)
    assert isinstance(gen, UniformGenerator) and not gen.weights and gen.count_params() == 0
    out = gen(inputs())
    assert set(out) == {"mlm_logits"} and out["mlm_logits"].dtype == "float32"
    np.testing.assert_array_equal(out["mlm_logits"], np.zeros((2, 3, 32), np.float32))
    assert UniformGenerator.from_config(gen.get_config()).config == gen.config
    with pytest.raises(ValueError, match="uniform_generator"):
        pretraining_config(uniform_generator=True, objective="bert_mlm")


def test_hidden_size_override_rederives_heads_and_ffn():
    """As the original's training_utils.get_bert_config (D) and get_generator_config (G)."""
    small = PretrainingConfig(model_size="small", model_hparam_overrides={"hidden_size": 512})
    d, g = small.discriminator_config(), small.generator_config()
    assert (d.hidden_size, d.num_attention_heads, d.intermediate_size) == (512, 8, 2048)
    assert (g.hidden_size, g.num_attention_heads, g.intermediate_size) == (128, 2, 512)
    assert d.resolved_embedding_size == 128  # Small's embedding size stays
    explicit = PretrainingConfig(model_size="small", model_hparam_overrides={
        "hidden_size": 512, "num_attention_heads": 2, "intermediate_size": 1000})
    d, g = explicit.discriminator_config(), explicit.generator_config()
    assert (d.num_attention_heads, d.intermediate_size) == (2, 1000)
    # G re-derives its own from its width whatever the overrides, as the original.
    assert (g.num_attention_heads, g.intermediate_size) == (2, 512)
    base = PretrainingConfig(model_size="base").discriminator_config()
    assert (base.num_attention_heads, base.intermediate_size) == (12, 3072)


def test_generator_size_follows_config_fractions():
    hparams = {"embedding_size": 32, "hidden_size": 256, "num_hidden_layers": 4,
               "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 16}
    config = PretrainingConfig(model_size="tiny", vocab_size=32, max_seq_length=16,
                               model_hparam_overrides=hparams, generator_hidden_size=0.5,
                               generator_layers=0.5)
    gen, disc = build_pretraining_models(config.encoders)
    assert len(disc.encoder.transformer_layers) == 4
    assert len(gen.encoder.transformer_layers) == 2
    layer = gen.encoder.transformer_layers[0]
    assert layer.attention.query.kernel.shape == (128, 128)
    assert layer.attention.num_attention_heads == 2  # max(1, 128 // 64)
    assert layer.intermediate.kernel.shape == (128, 512)  # 4h
    assert gen.encoder.embeddings_project.kernel.shape == (32, 128)


def test_mixed_bfloat16_gives_float32_logits(pretraining_config, inputs, mixed_bfloat16):
    gen, disc = build_pretraining_models(pretraining_config().encoders)
    x = inputs()
    g = gen(x, training=True, seed=tf.constant([1, 1]))
    d = disc(x, training=True, seed=tf.constant([1, 1]))
    assert g["mlm_logits"].dtype == "float32" and d["rtd_logits"].dtype == "float32"
    assert d["sequence_output"].dtype == "bfloat16"
    assert all(v.dtype == "float32" for v in gen.trainable_variables + disc.trainable_variables)
    # The tied matmul reads the table in float32, not an autocast bfloat16 copy.
    head, word = gen.mlm_head, disc.encoder.embeddings.word_embeddings.embeddings
    word.assign(np.random.default_rng(0).normal(0, 1, word.shape).astype("float32"))
    head.output_bias.assign(np.linspace(-1, 1, 32).astype("float32"))
    out = gen(x)
    hidden = gather_positions(out["sequence_output"], x["masked_lm_positions"])
    hidden = head.layer_norm(get_activation("gelu")(head.dense(hidden)))
    assert hidden.dtype == "bfloat16"
    hidden = np.asarray(tf.cast(hidden, tf.float32), "float64")
    want = hidden @ word.numpy().astype("float64").T + head.output_bias.numpy()
    np.testing.assert_allclose(out["mlm_logits"], want, atol=1e-4)
    rounded = np.asarray(tf.cast(tf.cast(word, tf.bfloat16), tf.float32), "float64")
    assert np.abs(hidden @ rounded.T + head.output_bias.numpy() - want).max() > 1e-3


def test_seeds_and_salts(pretraining_config, inputs):
    config = pretraining_config(untied_generator=False, generator_hidden_size=1.0)
    gen, disc = build_pretraining_models(config.encoders)
    x = inputs()
    seed = tf.constant([3, 4])
    d1 = disc(x, training=True, seed=seed)["sequence_output"]
    np.testing.assert_array_equal(d1, disc(x, training=True, seed=seed)["sequence_output"])
    assert not np.allclose(d1, disc(x, training=True, seed=seed + 1)["sequence_output"])
    # G runs D's very encoder; one step seed must still give G other masks.
    assert not np.allclose(d1, gen(x, training=True, seed=seed)["sequence_output"])


def test_every_trainable_variable_gets_a_gradient(pretraining_config, inputs):
    gen, disc = build_pretraining_models(pretraining_config().encoders)
    x = inputs()
    with tf.GradientTape() as tape:
        loss = (tf.reduce_sum(gen(x, training=True)["mlm_logits"] ** 2)
                + tf.reduce_sum(disc(x, training=True)["rtd_logits"] ** 2))
    variables = {id(v): v for v in gen.trainable_variables + disc.trainable_variables}
    grads = tape.gradient(loss, list(variables.values()))
    missing = [v.path for v, g in zip(variables.values(), grads, strict=True) if g is None]
    assert not missing


def test_jit_compiled_forward(pretraining_config, inputs):
    gen, disc = build_pretraining_models(pretraining_config().encoders)
    x = {k: tf.constant(v) for k, v in inputs().items()}

    @tf.function(jit_compile=True)
    def forward(x, seed):
        return gen(x, training=True, seed=seed)["mlm_logits"], disc(x)["rtd_logits"]

    mlm, rtd = forward(x, tf.constant([0, 1]))
    np.testing.assert_allclose(rtd, disc(x)["rtd_logits"], atol=1e-5)
    np.testing.assert_array_equal(mlm, forward(x, tf.constant([0, 1]))[0])


@pytest.mark.parametrize("cls", [ElectraGenerator, ElectraDiscriminator])
def test_model_get_config_round_trip(cls, encoder_config):
    model = cls(encoder_config())
    config = model.get_config()
    clone = cls.from_config(config)
    assert clone.get_config() == config and clone.config == model.config


def test_generator_baseline_head(pretraining_config, inputs):
    """Adversarial training's learned baseline: dense(1) on G's states at the slots."""
    gen, _ = build_pretraining_models(pretraining_config(training_algorithm="adversarial").encoders)
    x = inputs()
    out = gen(x)
    hidden = gather_positions(out["sequence_output"], x["masked_lm_positions"])
    head = gen.baseline_head
    want = (np.asarray(hidden) @ head.kernel.numpy())[..., 0] + head.bias.numpy()
    assert out["baseline_logits"].shape == (2, 3) and out["baseline_logits"].dtype == "float32"
    np.testing.assert_allclose(out["baseline_logits"], want, atol=1e-5)
    assert ElectraGenerator.from_config(gen.get_config()).baseline_head is not None


def test_build_discriminator_has_variables(encoder_config):
    disc = build_discriminator(encoder_config())
    assert disc.built and len(disc.trainable_variables) == 7 + 16 * 2 + 4
