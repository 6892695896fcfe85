"""Import of an original-format Electric checkpoint (random values under the original's
names: generator_ltr / generator_rtl towers, cloze_predictions), checked against a NumPy
two-tower cloze model written from the original's code, and resumed by pre-training."""

import json
import math
import os

import numpy as np
import pytest

from electra_tf.core.config import PretrainingConfig
from electra_tf.folders import PretrainingFolder
from electra_tf.interop import tf1

TOL = 1e-4


def _writer():
    """convert's default: the checkpoint run_pretraining resumes from (checkpoints/ckpt-0)."""
    from electra_tf.training.checkpoints import write_fresh_pretraining_checkpoint

    return write_fresh_pretraining_checkpoint


def electric_weights(h, seed=0, untied=False):
    """D's weights (conftest's) + the original Electric generator's, by name."""
    s = h.sizes
    w = h.original_weights(seed=seed, generator=False)
    rng = np.random.default_rng(seed + 100)
    g_hidden, g_ffn = s["G_HIDDEN"], s["G_FFN"]

    def dense(name, n_in, n_out):
        w[f"{name}/kernel"] = rng.normal(0, 0.3, (n_in, n_out)).astype("float32")
        w[f"{name}/bias"] = rng.normal(0, 0.1, (n_out,)).astype("float32")

    def norm(name, n):
        w[f"{name}/gamma"] = (1 + rng.normal(0, 0.1, (n,))).astype("float32")
        w[f"{name}/beta"] = rng.normal(0, 0.1, (n,)).astype("float32")

    width = g_hidden if untied else s["EMBED"]
    for scope in ("generator_ltr", "generator_rtl"):
        if untied:
            for table, rows in (("word", s["VOCAB"]), ("position", s["POS"]), ("token_type", 2)):
                w[f"{scope}/embeddings/{table}_embeddings"] = rng.normal(
                    0, 0.5, (rows, width)).astype("float32")
            norm(f"{scope}/embeddings/LayerNorm", width)
        else:
            dense(f"{scope}/embeddings_project", width, g_hidden)
        for i in range(s["LAYERS"]):
            p = f"{scope}/encoder/layer_{i}"
            for part in ("query", "key", "value"):
                dense(f"{p}/attention/self/{part}", g_hidden, g_hidden)
            dense(f"{p}/attention/output/dense", g_hidden, g_hidden)
            norm(f"{p}/attention/output/LayerNorm", g_hidden)
            dense(f"{p}/intermediate/dense", g_hidden, g_ffn)
            dense(f"{p}/output/dense", g_ffn, g_hidden)
            norm(f"{p}/output/LayerNorm", g_hidden)
    dense("cloze_predictions/dense", 2 * g_hidden, width)
    norm("cloze_predictions/LayerNorm", width)
    w["cloze_predictions/output_bias"] = rng.normal(0, 0.1, (s["VOCAB"],)).astype("float32")
    return w


def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _ln(x, w, name):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-12) * w[f"{name}/gamma"] + w[f"{name}/beta"]


def _dense(x, w, name):
    return x @ w[f"{name}/kernel"] + w[f"{name}/bias"]


def np_tower(w, scope, emb, inputs, ltr):
    """The original BertModel with ltr / rtl: the padding mask times the band."""
    ids, mask, seg = inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"]
    L = ids.shape[1]
    x = (w[f"{emb}/embeddings/word_embeddings"][ids] + w[f"{emb}/embeddings/position_embeddings"]
         [:L][None] + w[f"{emb}/embeddings/token_type_embeddings"][seg])
    x = _ln(x, w, f"{emb}/embeddings/LayerNorm")
    if f"{scope}/embeddings_project/kernel" in w:
        x = _dense(x, w, f"{scope}/embeddings_project")
    band = np.tril(np.ones((L, L))) if ltr else np.triu(np.ones((L, L)))
    bias = ((1.0 - mask[:, None, :] * band[None]) * -10000.0)[:, None]
    heads = 1  # G_HIDDEN // 64 -> max(1, 0)
    i = 0
    while f"{scope}/encoder/layer_{i}/attention/self/query/kernel" in w:
        p = f"{scope}/encoder/layer_{i}"
        q, k, v = (_dense(x, w, f"{p}/attention/self/{n}")[:, None] for n in ("query", "key",
                                                                             "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(x.shape[-1] // heads) + bias
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v)[:, 0]
        x = _ln(x + _dense(ctx, w, f"{p}/attention/output/dense"), w,
                f"{p}/attention/output/LayerNorm")
        ffn = _dense(_gelu(_dense(x, w, f"{p}/intermediate/dense")), w, f"{p}/output/dense")
        x = _ln(x + ffn, w, f"{p}/output/LayerNorm")
        i += 1
    return x


def np_cloze_logits(w, inputs, untied):
    """run_pretraining.py's TwoTowerClozeTransformer + _get_cloze_outputs, in NumPy."""
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    ltr = np_tower(w, "generator_ltr", "generator_ltr" if untied else "electra", inputs, True)
    rtl = np_tower(w, "generator_rtl", "generator_rtl" if untied else "electra", inputs, False)

    def roll(a, d):
        return np.concatenate([a[:, d:], a[:, :d]], axis=1)

    x = np.concatenate([roll(ltr, -1), roll(rtl, 1)], -1)
    x = _ln(_gelu(_dense(x, w, "cloze_predictions/dense")), w, "cloze_predictions/LayerNorm")
    table = w[("generator_ltr" if untied else "electra") + "/embeddings/word_embeddings"]
    return x @ table.T + w["cloze_predictions/output_bias"]


@pytest.mark.parametrize("untied", [False, True], ids=["tied_embeddings", "untied_embeddings"])
def test_an_original_electric_checkpoint_imports_with_its_towers(h, tmp_path, untied):
    weights = electric_weights(h, seed=1, untied=untied)
    prefix = h.write_tf1_checkpoint(tmp_path / "ckpt" / "model.ckpt",
                                    h.with_optimizer_state(weights))
    out = str(tmp_path / "out")
    report = tf1.import_checkpoint(prefix, "small", out, h.TINY_OVERRIDES, _writer())
    assert sorted(report["assigned"]) == sorted(weights)  # every tower variable has a home
    assert "--objective=electric" in report["resume_flags"]
    with open(os.path.join(out, "pretraining_config.json")) as f:
        config = PretrainingConfig.from_dict(json.load(f)["pretraining"])
    assert config.objective == "electric" and config.untied_generator_embeddings == untied
    assert config.generator_hidden_size == 0.75

    generator = PretrainingFolder.open(out).load_generator()
    inputs = h.padded_inputs()
    got = generator({**inputs, "masked_lm_positions": np.zeros((3, 1), "int32")})
    want = np_cloze_logits(weights, inputs, untied)
    # At t with t + 1 in the padding, the right-to-left half comes from a padded query
    # that attends nothing (every key at -10000): float32 (ours, and the original's)
    # rounds scores of -10000 + s to ~1e-3 there, so those rows match more loosely.
    L = inputs["input_ids"].shape[1]
    length = inputs["input_mask"].sum(-1)
    t = np.arange(L)
    exact = (t[None] + 1 < length[:, None]) | (t[None] == L - 1)
    np.testing.assert_allclose(np.asarray(got["cloze_logits"])[exact], want[exact],
                               atol=TOL, rtol=0)
    np.testing.assert_allclose(got["cloze_logits"], want, atol=1e-2, rtol=0)
    disc = PretrainingFolder.open(out).load_discriminator()
    seq = h.np_encoder(weights, "electra", inputs, heads=h.sizes["HEADS"])
    np.testing.assert_allclose(disc(inputs)["rtd_logits"], h.np_rtd_logits(weights, seq),
                               atol=TOL, rtol=0)


def test_an_imported_electric_checkpoint_continues_pre_training(h, tmp_path):
    from electra_tf.objectives.pretrainer import ElectraPretrainer
    from electra_tf.training.checkpoints import TensorFlowCheckpoints
    from electra_tf.training.optimization import create_optimizer

    weights = electric_weights(h, seed=2)
    prefix = h.write_tf1_checkpoint(tmp_path / "ckpt" / "model.ckpt", weights)
    out = str(tmp_path / "out")
    tf1.import_checkpoint(prefix, "small", out, h.TINY_OVERRIDES, _writer())
    with open(os.path.join(out, "pretraining_config.json")) as f:
        config = PretrainingConfig.from_dict(json.load(f)["pretraining"])
    model = ElectraPretrainer(config)
    model.build_with_dummy_batch()
    optimizer = create_optimizer(config.learning_rate, config.num_train_steps,
                                 config.num_warmup_steps, clip_norm=None)
    optimizer.build(model.trainable_variables)
    assert TensorFlowCheckpoints(model, optimizer, os.path.join(out, "checkpoints"),
                                 max_to_keep=1).restore()  # every variable, checked
    np.testing.assert_array_equal(model.generator.rtl.transformer_layers[1].output_dense
                                  .kernel.numpy(),
                                  weights["generator_rtl/encoder/layer_1/output/dense/kernel"])
    np.testing.assert_array_equal(model.generator.cloze_head.output_bias.numpy(),
                                  weights["cloze_predictions/output_bias"])
    assert model.generator.ltr.embeddings is model.discriminator.encoder.embeddings


def test_an_electric_generator_is_not_exported_to_transformers(h, tmp_path):
    from electra_tf.interop import core, hf

    weights = electric_weights(h, seed=3)
    prefix = h.write_tf1_checkpoint(tmp_path / "ckpt" / "model.ckpt", weights)
    out = str(tmp_path / "out")
    tf1.import_checkpoint(prefix, "small", out, h.TINY_OVERRIDES, _writer())
    with pytest.raises(core.ConversionError, match="two-tower generator"):
        hf.export_model(out, str(tmp_path / "hf"), generator=True)
    assert not os.path.exists(tmp_path / "hf" / "model.safetensors")


@pytest.mark.parametrize("change", ["missing", "1-D"])
def test_an_electric_tower_without_its_sizes_is_one_line(h, tmp_path, change):
    """The tower's first query kernel gives the generator's width: a checkpoint lacking it
    (or with it 1-D) had ended in a KeyError (IndexError) traceback."""
    from electra_tf.interop.core import ConversionError

    weights = electric_weights(h, seed=3)
    name = "generator_ltr/encoder/layer_0/attention/self/query/kernel"
    if change == "missing":
        del weights[name]
    else:
        weights[name] = weights[name][0]
    prefix = h.write_tf1_checkpoint(tmp_path / "ckpt" / "model.ckpt", weights)
    with pytest.raises(ConversionError, match=f"^{name} (is not in the checkpoint|has shape)"):
        tf1.import_checkpoint(prefix, "small", str(tmp_path / "out"), h.TINY_OVERRIDES,
                              _writer())


def test_towers_of_different_depths_are_named_as_such(h, tmp_path):
    """A checkpoint whose right-to-left tower lacks a layer the other has had been
    refused as "map to nothing ... (wrong --model_size, or an unsupported variant)"."""
    from electra_tf.interop.core import ConversionError

    weights = electric_weights(h, seed=4)
    last = max(int(n.split("/")[2].split("_")[1]) for n in weights
               if n.startswith("generator_ltr/encoder/layer_"))
    if last == 0:  # a one-layer generator: give the left-to-right tower a second layer
        for name in [n for n in weights if n.startswith("generator_ltr/encoder/layer_0/")]:
            weights[name.replace("layer_0", "layer_1")] = weights[name]
        ltr, rtl = 2, 1
    else:  # drop the right-to-left tower's last layer
        for name in [n for n in weights if n.startswith(f"generator_rtl/encoder/layer_{last}/")]:
            del weights[name]
        ltr, rtl = last + 1, last
    prefix = h.write_tf1_checkpoint(tmp_path / "ckpt" / "model.ckpt", weights)
    with pytest.raises(ConversionError, match=(
            rf"^the generator's towers differ, .*: generator_ltr has {ltr} layer\(s\) of width "
            rf"\d+, generator_rtl has {rtl} layer\(s\)")):
        tf1.import_checkpoint(prefix, "small", str(tmp_path / "out"), h.TINY_OVERRIDES,
                              _writer())
    assert not (tmp_path / "out").exists()

