"""The generator's MLM head activation across transformers <-> electra_tf, without torch.

transformers' ElectraGeneratorPredictions applies GELU whatever hidden_act says; the
original (and electra_tf by default) applies hidden_act. An import records
generator_head_act="gelu" when they differ; an export that transformers cannot
express warns.
"""

import json
import logging

import numpy as np
import pytest

from electra_tf.core.config import EncoderConfig
from electra_tf.interop import hf

_TINY = dict(vocab_size=40, embedding_size=16, hidden_size=24, num_hidden_layers=1,
             num_attention_heads=1, intermediate_size=96, max_position_embeddings=32)


def _hf_folder(tmp_path, hidden_act):
    folder = tmp_path / hidden_act
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "electra", "hidden_act": hidden_act, **_TINY}))
    return str(folder)


@pytest.mark.parametrize("hf_act,act,head_act", [
    ("gelu", "gelu", None),
    ("relu", "relu", "gelu"),
    ("gelu_new", "gelu_approximate", "gelu"),
])
def test_import_records_transformers_gelu_generator_head(tmp_path, hf_act, act, head_act):
    _, config = hf.read_config(_hf_folder(tmp_path, hf_act))
    assert (config.hidden_act, config.generator_head_act) == (act, head_act)


def test_export_warns_where_transformers_cannot_express_the_head():
    relu = EncoderConfig(**_TINY, hidden_act="relu")
    (warning,) = hf.export_warnings(relu, "ElectraForMaskedLM")
    assert "applies relu" in warning and "always applies gelu" in warning
    assert hf.export_warnings(relu, "ElectraForPreTraining") == []  # no MLM head there
    imported = EncoderConfig(**_TINY, hidden_act="relu", generator_head_act="gelu")
    assert hf.export_warnings(imported, "ElectraForMaskedLM") == []
    assert hf.export_warnings(EncoderConfig(**_TINY), "ElectraForMaskedLM") == []
    odd = EncoderConfig(**_TINY, generator_head_act="relu")
    assert len(hf.export_warnings(odd, "ElectraForMaskedLM")) == 1
    with pytest.raises(ValueError, match="unsupported generator_head_act 'tanh'"):
        EncoderConfig(**_TINY, generator_head_act="tanh")


def test_export_logs_the_warning_line(tmp_path, caplog):
    pytest.importorskip("safetensors")
    from electra_tf import folders
    from electra_tf.modeling.models import ElectraGenerator, build_discriminator

    config = EncoderConfig(**_TINY, hidden_act="relu")
    folders.pretraining.save_discriminator(str(tmp_path), build_discriminator(config))
    gen = ElectraGenerator(config)
    gen.build()
    folders.pretraining.save_generator(str(tmp_path), gen, standalone=True)
    with caplog.at_level(logging.WARNING):
        hf.export_model(str(tmp_path), str(tmp_path / "hf"), generator=True)
    lines = [r.getMessage() for r in caplog.records if "ElectraGeneratorPredictions" in
             r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0]


def _gelu(x):
    from math import erf, sqrt

    return 0.5 * x * (1.0 + np.vectorize(erf)(x / sqrt(2.0)))


def test_generator_head_uses_the_recorded_activation():
    """A relu generator imported from transformers: the encoder's FFN is relu, the MLM
    head GELU. By hand: logits = LN(gelu(h W + b)) E^T + bias at each position."""
    from electra_tf.modeling.models import ElectraGenerator

    config = EncoderConfig(**_TINY, hidden_act="relu", generator_head_act="gelu",
                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    gen = ElectraGenerator(config)
    gen.build()
    rng = np.random.default_rng(0)
    for v in gen.variables:
        v.assign(rng.normal(0, 0.5, v.shape).astype("float32"))
    ids = rng.integers(1, 40, (2, 8)).astype("int32")
    inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids),
              "masked_lm_positions": np.tile(np.arange(8, dtype="int32"), (2, 1))}
    out = gen(inputs)
    h = np.asarray(out["sequence_output"], np.float64)
    head = gen.mlm_head
    x = h @ np.asarray(head.dense.kernel) + np.asarray(head.dense.bias)
    x = _gelu(x)
    x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12)
    x = x * np.asarray(head.layer_norm.gamma) + np.asarray(head.layer_norm.beta)
    want = x @ np.asarray(gen.encoder.embeddings.word_embeddings.embeddings).T + np.asarray(
        head.output_bias)
    np.testing.assert_allclose(out["mlm_logits"], want, atol=1e-4, rtol=1e-4)
