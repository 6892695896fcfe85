"""electra_tf.serving.encoder computes the Keras encoder's function (inference mode), in fewer ops."""

from types import SimpleNamespace

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.core.config import EncoderConfig
from electra_tf.modeling import build_discriminator
from electra_tf.modeling.models import dtype_policy_scope
from electra_tf.serving import encoder as serving_encoder
from electra_tf.tasks.model import FinetuningModel

ATOL = 1e-5


def _randomize(model, seed=0):
    """Non-trivial weights everywhere (LayerNorm gains/offsets and biases are 1/0 at init)."""
    rng = np.random.default_rng(seed)
    for v in model.weights:
        scale = 0.5 if any(n in v.path for n in ("gamma", "beta", "bias")) else 0.2
        base = 1.0 if "gamma" in v.path else 0.0
        v.assign((base + rng.normal(0, scale, v.shape)).astype(v.dtype))


def _inputs(batch, length, vocab, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab, [batch, length]).astype(np.int32)
    mask = np.ones([batch, length], np.int32)
    for b in range(batch):  # row b keeps a different number of real positions
        mask[b, max(1, length - 2 * b):] = 0
    ids[mask == 0] = 0
    types = (np.arange(length)[None, :] >= length // 2).astype(np.int32) * mask
    return {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
            "segment_ids": tf.constant(types)}


def _config(**overrides):
    values = dict(vocab_size=53, embedding_size=12, hidden_size=16, num_hidden_layers=2,
                  num_attention_heads=4, intermediate_size=24, max_position_embeddings=40,
                  hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3)
    return EncoderConfig(**{**values, **overrides})


SHORT = serving_encoder.SHORT_PATH_POSITIONS


@pytest.mark.parametrize("overrides,short_path_positions", [
    # SHORT: (1, 1) and (1, 7) below run the short path, (4, 24) and (3, 40) the long one
    ({}, SHORT),  # E != H: the embeddings projection
    ({"embedding_size": None, "num_attention_heads": 2, "hidden_act": "gelu_approximate"},
     SHORT),
    ({"hidden_act": "relu", "num_attention_heads": 1, "layer_norm_eps": 1e-3}, SHORT),
    ({}, 0),  # every call on the long path (no tf.cond)
    ({}, 10 ** 6),  # every call on the short path
])
def test_sequence_output_equals_the_keras_encoder(overrides, short_path_positions,
                                                  monkeypatch):
    monkeypatch.setattr(serving_encoder, "SHORT_PATH_POSITIONS", short_path_positions)
    keras.utils.set_random_seed(0)
    disc = build_discriminator(_config(**overrides))
    _randomize(disc)
    for batch, length in ((1, 1), (1, 7), (4, 24), (3, 40)):
        x = _inputs(batch, length, 53, seed=length)
        want = disc.encoder(x, training=False)["sequence_output"].numpy()
        got = tf.function(serving_encoder.serving_sequence_output)(
            disc.encoder, x["input_ids"], x["input_mask"], x["segment_ids"]).numpy()
        assert got.shape == want.shape
        # every position, padding included (the heads see them all)
        np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)
        assert np.abs(want).max() > 0.5  # not a vacuous comparison


@pytest.mark.parametrize("overrides", [{}, {"embedding_size": None}])  # E != H, E == H
def test_bfloat16_kernels_stay_within_rounding_of_the_keras_encoder(overrides):
    """--precision=bf16's encoder: every dense product in bfloat16, the rest float32."""
    keras.utils.set_random_seed(1)
    disc = build_discriminator(_config(**overrides))
    _randomize(disc, seed=2)
    kernels = serving_encoder.Bfloat16Kernels(disc.encoder)
    layers = disc.encoder.config.num_hidden_layers
    assert len(kernels.kernels) == 6 * layers + (disc.encoder.embeddings_project is not None)
    assert all(k.dtype == tf.bfloat16 for k in kernels.kernels)
    for batch, length in ((1, 7), (3, 40)):  # the short and the long path
        x = _inputs(batch, length, 53, seed=length)
        want = disc.encoder(x, training=False)["sequence_output"].numpy()
        got = tf.function(serving_encoder.serving_sequence_output)(
            disc.encoder, x["input_ids"], x["input_mask"], x["segment_ids"], kernels).numpy()
        diff = np.abs(got - want)
        # layer-normed outputs of about unit scale; bfloat16 keeps 8 bits of each product
        assert 1e-4 < diff.max() < 0.05, diff.max()
        assert diff.mean() < 0.005, diff.mean()


def _op_types(concrete):
    graph = concrete.graph.as_graph_def()
    return [n.op for n in graph.node] + [n.op for f in graph.library.function
                                         for n in f.node_def]


def test_heads_move_by_gather_and_a_cond_picks_the_short_or_long_path():
    """The op choices the module docstring explains: no Transpose (oneDNN's splits even a
    tiny one over the threads); a short path of ops oneDNN leaves to Eigen, a long one
    of its own, a tf.cond between them in each layer."""
    disc = build_discriminator(_config())
    spec = tf.TensorSpec([None, None], tf.int32)
    ops = _op_types(tf.function(
        lambda i, m, s: serving_encoder.serving_sequence_output(disc.encoder, i, m, s)
    ).get_concrete_function(spec, spec, spec))
    assert "Transpose" not in ops
    layers = disc.encoder.config.num_hidden_layers
    assert ops.count("StatelessIf") + ops.count("If") == layers
    assert ops.count("BatchMatMulV3") == ops.count("BatchMatMulV2") == 2 * layers
    assert ops.count("LogSoftmax") == ops.count("Softmax") == layers


@pytest.mark.parametrize("kind,options", [
    ("sequence_classification", {"num_labels": 3}),
    ("sequence_classification", {"num_labels": 2, "classifier_head": "mlp"}),
    ("sequence_classification", {"regression": True}),
    ("token_classification", {"num_labels": 5}),
    ("squad", {"span_head": "joint", "beam_size": 3, "answerable": True}),
    ("squad", {"span_head": "independent"}),
])
def test_model_outputs_equal_the_keras_model(kind, options):
    keras.utils.set_random_seed(1)
    model = FinetuningModel(build_discriminator(_config()).encoder, kind, **options)
    model.build()
    _randomize(model, seed=2)
    x = _inputs(3, 12, 53, seed=3)
    want = model(x, training=False)
    got = tf.function(lambda x: serving_encoder.model_outputs(model, x))(x)
    assert sorted(got) == sorted(want)
    for key in want:
        np.testing.assert_allclose(np.asarray(got[key]), np.asarray(want[key]),
                                   rtol=0, atol=ATOL, err_msg=key)


def test_rtd_discriminator_outputs_equal_the_keras_model():
    keras.utils.set_random_seed(3)
    disc = build_discriminator(_config())
    _randomize(disc, seed=4)
    x = _inputs(2, 9, 53, seed=5)
    got = serving_encoder.model_outputs(disc, x)
    np.testing.assert_allclose(got["rtd_logits"].numpy(),
                               disc(x, training=False)["rtd_logits"].numpy(), rtol=0, atol=ATOL)


def test_a_mixed_precision_model_runs_through_its_keras_layers():
    keras.utils.set_random_seed(4)
    with dtype_policy_scope("mixed_bfloat16"):
        model = FinetuningModel(build_discriminator(_config()).encoder,
                                "sequence_classification", 2)
        model.build()
    assert not serving_encoder.supported(model.encoder)
    assert not serving_encoder.runs_serving_encoder(model)
    x = _inputs(2, 6, 53)
    np.testing.assert_array_equal(serving_encoder.model_outputs(model, x)["logits"].numpy(),
                                  model(x, training=False)["logits"].numpy())
    # --precision=bf16 is refused for it: its policy owns the casts.
    from electra_tf.core.errors import InputError
    from electra_tf.serving import signatures

    spec = SimpleNamespace(precision="bf16", model=model, task="sequence_classification")
    with pytest.raises(InputError, match="--precision=bf16 is for a float32 fine-tuned or rtd "
                                         "model; the sequence_classification export of this"):
        signatures._bfloat16_kernels(spec)
    with pytest.raises(ValueError, match="from a float32 encoder"):
        serving_encoder.Bfloat16Kernels(model.encoder)
