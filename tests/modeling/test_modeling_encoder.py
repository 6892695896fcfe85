"""ElectraEncoder: shapes, masking, dropout and seeds, variable paths, config."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.modeling.encoder import ElectraEncoder, dummy_inputs, encoder_variable_depth
from electra_tf.modeling.layers import Dropout


def _encoder(config):
    encoder = ElectraEncoder(config)
    encoder.build()
    return encoder


def _features(x):
    return {k: x[k] for k in ("input_ids", "input_mask", "segment_ids")}


def test_outputs_shapes_and_pooled(encoder_config, inputs):
    encoder = _encoder(encoder_config())
    out = encoder(_features(inputs()))
    assert set(out) == {"sequence_output", "pooled_output", "embedding_output"}
    assert out["sequence_output"].shape == (2, 16, 16)
    assert out["embedding_output"].shape == (2, 16, 8)
    assert out["pooled_output"].shape == (2, 16)
    assert all(v.dtype == "float32" for v in out.values())
    np.testing.assert_array_equal(out["pooled_output"], out["sequence_output"][:, 0])


def test_initializers_are_the_originals(encoder_config):
    """Truncated normal (0.02) for tables and transformer kernels; the original's
    embeddings_project is a tf.layers.dense without initializer: Glorot uniform."""
    encoder = _encoder(encoder_config(vocab_size=512, embedding_size=64, hidden_size=96,
                                      num_attention_heads=2, intermediate_size=64))
    project = encoder.embeddings_project
    assert isinstance(project.kernel_initializer, keras.initializers.GlorotUniform)
    kernel = project.kernel.numpy()
    limit = np.sqrt(6 / (64 + 96))  # 0.19; the truncated normal stays within 0.04
    assert np.abs(kernel).max() <= limit and np.abs(kernel).max() > 0.9 * limit
    assert kernel.std() == pytest.approx(limit / np.sqrt(3), rel=0.05)
    assert not np.any(project.bias.numpy())
    for v in encoder.trainable_variables:
        if v.path.endswith(("kernel", "embeddings")) and "embeddings_project" not in v.path:
            assert np.abs(v.numpy()).max() <= 2 * 0.02 + 1e-6, v.path
            assert v.numpy().std() == pytest.approx(0.02 * 0.88, rel=0.15), v.path


def test_no_projection_when_embedding_size_equals_hidden(encoder_config, inputs):
    encoder = _encoder(encoder_config(embedding_size=None))
    assert encoder.embeddings_project is None
    assert not any("embeddings_project" in v.path for v in encoder.variables)
    assert encoder(_features(inputs()))["embedding_output"].shape == (2, 16, 16)


def test_padding_invariance(encoder_config, inputs):
    encoder = _encoder(encoder_config())
    x = _features(inputs(num_real=(16, 10)))
    y = dict(x, input_ids=np.where(x["input_mask"] == 1, x["input_ids"], 7),
             segment_ids=np.where(x["input_mask"] == 1, x["segment_ids"], 1))
    a, b = encoder(x)["sequence_output"], encoder(y)["sequence_output"]
    np.testing.assert_allclose(a[0], b[0], atol=1e-6)
    np.testing.assert_allclose(a[1, :10], b[1, :10], atol=1e-6)
    assert not np.allclose(a[1, 10:], b[1, 10:])  # Padded positions did change.


def test_dropout_and_seeds(encoder_config, inputs):
    encoder = _encoder(encoder_config())
    x = _features(inputs())

    def seq(**kwargs):
        return np.asarray(encoder(x, **kwargs)["sequence_output"])

    inference = seq()
    np.testing.assert_array_equal(inference, seq(training=False))
    np.testing.assert_array_equal(inference, seq(training=False, seed=tf.constant([1, 2])))
    seeded = seq(training=True, seed=tf.constant([1, 2]))
    assert not np.allclose(seeded, inference)
    np.testing.assert_array_equal(seeded, seq(training=True, seed=tf.constant([1, 2])))
    assert not np.allclose(seeded, seq(training=True, seed=tf.constant([1, 3])))
    # Without a seed the layers' SeedGenerators advance: two calls differ.
    assert not np.allclose(seq(training=True), seq(training=True))


def test_every_dropout_site_gets_its_own_seed(encoder_config, monkeypatch):
    encoder = _encoder(encoder_config(num_hidden_layers=3))
    seeds = []
    original = Dropout.call

    def spy(self, inputs, training=False, seed=None):
        seeds.append((self.path, tuple(np.asarray(seed))))
        return original(self, inputs, training=training, seed=seed)

    monkeypatch.setattr(Dropout, "call", spy)
    encoder(dummy_inputs(2, 16), training=True, seed=tf.constant([4, 5]))
    # Embeddings, then attention probs, attention output and FFN output per layer.
    assert len(seeds) == 1 + 3 * 3
    assert len({s for _, s in seeds}) == len(seeds), seeds
    assert len({p for p, _ in seeds}) == len(seeds)


def test_seeded_forward_under_xla(encoder_config, inputs):
    encoder = _encoder(encoder_config())
    x = {k: tf.constant(v) for k, v in _features(inputs()).items()}
    fn = tf.function(lambda x, s: encoder(x, training=True, seed=s)["sequence_output"],
                     jit_compile=True)
    a = fn(x, tf.constant([1, 2]))
    np.testing.assert_array_equal(a, fn(x, tf.constant([1, 2])))
    assert not np.allclose(a, fn(x, tf.constant([2, 2])))
    infer = tf.function(lambda x: encoder(x)["sequence_output"], jit_compile=True)
    np.testing.assert_allclose(infer(x), encoder(x)["sequence_output"], atol=1e-5)


def test_variable_paths_map_to_layerwise_depths(encoder_config):
    encoder = _encoder(encoder_config(num_hidden_layers=3))
    patterns = [r"(^|/)embeddings/", r"(^|/)embeddings_project/", r"(^|/)layer_\d+/"]
    depths = {}
    for v in encoder.variables:  # Trainable weights and dropout seed states.
        matches = [p for p in patterns if re.search(p, v.path)]
        assert len(matches) == 1, (v.path, matches)
        depths.setdefault(encoder_variable_depth(v.path), []).append(v.path)
    assert sorted(depths) == [0, 1, 2, 3]
    assert all(p.startswith("encoder/layer_2/") for p in depths[3])
    assert any("embeddings_project/" in p for p in depths[0])
    assert encoder_variable_depth("discriminator/discriminator_predictions/dense/kernel") is None
    assert encoder_variable_depth("x/layer_11/output/kernel") == 12


def test_get_config_round_trip(encoder_config):
    encoder = ElectraEncoder(encoder_config(hidden_act="relu"), name="my_encoder")
    config = encoder.get_config()
    assert config["config"] == encoder_config(hidden_act="relu").to_dict()
    clone = ElectraEncoder.from_config(config)
    clone.build()
    encoder.build()
    assert clone.name == "my_encoder" and clone.get_config() == config
    assert [v.shape for v in clone.weights] == [v.shape for v in encoder.weights]
    assert ElectraEncoder(config["config"]).config == encoder.config  # A dict also works.


def test_shared_embeddings_must_match(encoder_config):
    donor = _encoder(encoder_config())
    shared = ElectraEncoder(encoder_config(hidden_size=8, num_attention_heads=1),
                            embeddings=donor.embeddings)
    assert shared.embeddings is donor.embeddings
    with pytest.raises(ValueError, match="shared embeddings"):
        ElectraEncoder(encoder_config(embedding_size=4), embeddings=donor.embeddings)


def test_mixed_bfloat16_encoder(encoder_config, inputs, mixed_bfloat16):
    encoder = _encoder(encoder_config())
    out = encoder(_features(inputs()), training=True, seed=tf.constant([0, 1]))
    assert out["sequence_output"].dtype == "bfloat16"
    assert all(v.dtype == "float32" for v in encoder.trainable_variables)
    assert keras.config.dtype_policy().name == "mixed_bfloat16"


def test_a_keras_file_of_a_model_holding_the_encoder_loads_without_custom_objects(
        encoder_config, tmp_path):
    """The models and layers are registered with Keras: a functional model around the
    encoder, and a discriminator, saved as .keras load by name (they had needed
    custom_objects: `Could not locate class 'ElectraDiscriminator'`)."""
    from electra_tf.modeling.models import build_discriminator

    config = encoder_config()
    encoder = _encoder(config)
    ids = keras.Input((8,), dtype="int32", name="input_ids")
    mask = keras.Input((8,), dtype="int32", name="input_mask")
    segments = keras.Input((8,), dtype="int32", name="segment_ids")
    pooled = encoder({"input_ids": ids, "input_mask": mask, "segment_ids": segments})[
        "pooled_output"]
    functional = keras.Model([ids, mask, segments], keras.layers.Dense(2)(pooled))
    discriminator = build_discriminator(config)
    x = dummy_inputs(2, 8)
    batch = [x["input_ids"], x["input_mask"], x["segment_ids"]]
    for model, inputs in ((functional, batch), (discriminator, x)):
        path = str(tmp_path / f"{model.name}.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
        for key, value in _outputs(model(inputs)).items():
            np.testing.assert_allclose(_outputs(loaded(inputs))[key], value, atol=1e-6)


@pytest.mark.parametrize("kind,num_labels,options", [
    ("sequence_classification", 3, {}),
    ("token_classification", 5, {}),
    ("squad", 1, {"answerable": True, "beam_size": 4}),
])
def test_a_finetuning_model_saves_as_keras_and_rebuilds_from_its_config(
        encoder_config, tmp_path, kind, num_labels, options):
    """model.save(.keras), from_config and clone_model (Keras had refused each: the
    encoder argument is not serialisable by itself); the head's options come back."""
    from electra_tf.modeling.models import build_discriminator
    from electra_tf.tasks.model import FinetuningModel

    keras.utils.set_random_seed(1)
    model = FinetuningModel(build_discriminator(encoder_config()).encoder, kind, num_labels,
                            **options)
    model.build()
    x = _features(dummy_inputs(2, 8))
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is FinetuningModel
    assert loaded.head.head_config == model.head.head_config
    assert loaded.get_config() == model.get_config()
    for key, value in _outputs(model(x)).items():
        np.testing.assert_allclose(_outputs(loaded(x))[key], value, atol=1e-6)
    rebuilt = FinetuningModel.from_config(model.get_config())
    rebuilt.build()
    assert [v.shape for v in rebuilt.weights] == [v.shape for v in model.weights]
    # the precision policy comes back whatever the global one is then (it had been lost)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        mixed = FinetuningModel(build_discriminator(encoder_config()).encoder, kind,
                                num_labels, **options)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert FinetuningModel.from_config(mixed.get_config()).dtype_policy.name == "mixed_bfloat16"
    assert keras.models.clone_model(model).get_config() == model.get_config()


def test_a_frozen_encoder_stays_frozen_in_a_saved_and_rebuilt_finetuning_model(
        encoder_config, tmp_path):
    """An encoder frozen by the user (`model.encoder.trainable = False`) comes back frozen
    from a .keras file, from_config and clone_model: its variables had come back
    trainable, and the model trained the whole encoder again."""
    from electra_tf.modeling.models import build_discriminator
    from electra_tf.tasks.model import FinetuningModel

    model = FinetuningModel(build_discriminator(encoder_config()).encoder,
                            "sequence_classification", 3)
    model.build()
    model.encoder.trainable = False
    head_only = len(model.head.trainable_weights)
    assert len(model.trainable_weights) == head_only
    path = str(tmp_path / "model.keras")
    model.save(path)
    for again in (keras.saving.load_model(path), FinetuningModel.from_config(model.get_config()),
                  keras.models.clone_model(model)):
        if not again.built:
            again.build()
        assert not again.encoder.trainable
        assert len(again.trainable_weights) == head_only, again


def test_models_refuse_inputs_the_encoder_cannot_take_in_one_plain_line(encoder_config):
    """A fine-tuning model and a discriminator given too many positions, a dict lacking a
    key or ids of another rank: the plain line (the layers' had come inside Keras'
    "Exception encountered when calling ..." text, with ANSI codes; a missing key as a
    KeyError)."""
    from electra_tf.modeling.models import build_discriminator
    from electra_tf.tasks.model import FinetuningModel

    discriminator = build_discriminator(encoder_config(max_position_embeddings=16))
    classifier = FinetuningModel(discriminator.encoder, "sequence_classification", 2)
    classifier.build()
    long = _features(dummy_inputs(1, 17))
    for model in (classifier, discriminator):
        for inputs, message in (
                (long, "input_ids of 17 positions, but the model has 16 "
                       "(max_position_embeddings)"),
                ({"input_ids": long["input_ids"]}, "the inputs lack input_mask, segment_ids "
                 "(a dict of input_ids, input_mask, segment_ids, each [batch_size, positions])"),
                ({k: v[0] for k, v in long.items()},
                 "input_ids must be [batch_size, positions], got shape (17,)"),
                (list(long.values()), "the inputs must be a dict of input_ids, input_mask, "
                 "segment_ids, each [batch_size, positions], got a list")):
            with pytest.raises(ValueError) as raised:
                model(inputs)
            assert str(raised.value) == message
        assert _outputs(model({k: v[:, :8] for k, v in long.items()}))


def _outputs(out):
    return {k: np.asarray(v) for k, v in out.items()} if isinstance(out, dict) else {
        "out": np.asarray(out)}
