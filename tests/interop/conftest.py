"""Interop fixtures: tiny sizes, padded inputs, original-name checkpoints, a NumPy ELECTRA.

The NumPy forward pass is written from the paper's and BERT's equations on the
original variable names, independently of electra_tf's modeling and of
electra_tf.interop.names, so that a wrong name mapping shows as a mismatch.
Helpers are fixtures: with --import-mode=importlib tests cannot import conftest.
"""

import math
import types

import numpy as np
import pytest

_erf = np.vectorize(math.erf)

VOCAB, EMBED, HIDDEN, LAYERS, HEADS, FFN, POS = 40, 16, 32, 2, 2, 64, 32
G_HIDDEN, G_FFN = 24, 96  # generator: 0.75 of D's width, one head (24 // 64 -> 1)
TINY_OVERRIDES = {"embedding_size": EMBED, "hidden_size": HIDDEN, "num_hidden_layers": LAYERS,
                  "num_attention_heads": HEADS, "intermediate_size": FFN}


def padded_inputs(batch=3, seq=12, seed=0, vocab=VOCAB):
    """int32 ids / mask / segments [batch, seq], rows padded after 12, 9 and 5 tokens."""
    rng = np.random.default_rng(seed)
    lengths = np.array([seq, seq - 3, seq - 7])[:batch]
    mask = (np.arange(seq)[None] < lengths[:, None]).astype("int32")
    ids = rng.integers(1, vocab, (batch, seq)).astype("int32") * mask
    segments = ((np.arange(seq)[None] >= lengths[:, None] // 2) * mask).astype("int32")
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def original_weights(seed=0, generator=True, untied_embeddings=False, vocab=VOCAB):
    """Random values under the original checkpoint's names (D, and G with its heads)."""
    rng = np.random.default_rng(seed)
    w = {}

    def dense(name, n_in, n_out):
        w[f"{name}/kernel"] = rng.normal(0, 0.3, (n_in, n_out))
        w[f"{name}/bias"] = rng.normal(0, 0.1, (n_out,))

    def norm(name, n):
        w[f"{name}/gamma"] = 1 + rng.normal(0, 0.1, (n,))
        w[f"{name}/beta"] = rng.normal(0, 0.1, (n,))

    def embeddings(scope, width):
        w[f"{scope}/embeddings/word_embeddings"] = rng.normal(0, 0.5, (vocab, width))
        w[f"{scope}/embeddings/position_embeddings"] = rng.normal(0, 0.5, (POS, width))
        w[f"{scope}/embeddings/token_type_embeddings"] = rng.normal(0, 0.5, (2, width))
        norm(f"{scope}/embeddings/LayerNorm", width)

    def encoder(scope, width, hidden, ffn):
        if width != hidden:
            dense(f"{scope}/embeddings_project", width, hidden)
        for i in range(LAYERS):
            p = f"{scope}/encoder/layer_{i}"
            for part in ("query", "key", "value"):
                dense(f"{p}/attention/self/{part}", hidden, hidden)
            dense(f"{p}/attention/output/dense", hidden, hidden)
            norm(f"{p}/attention/output/LayerNorm", hidden)
            dense(f"{p}/intermediate/dense", hidden, ffn)
            dense(f"{p}/output/dense", ffn, hidden)
            norm(f"{p}/output/LayerNorm", hidden)

    embeddings("electra", EMBED)
    encoder("electra", EMBED, HIDDEN, FFN)
    dense("discriminator_predictions/dense", HIDDEN, HIDDEN)
    dense("discriminator_predictions/dense_1", HIDDEN, 1)
    if generator:
        g_width = G_HIDDEN if untied_embeddings else EMBED
        if untied_embeddings:
            embeddings("generator", g_width)
        encoder("generator", g_width, G_HIDDEN, G_FFN)
        dense("generator_predictions/dense", G_HIDDEN, g_width)
        norm("generator_predictions/LayerNorm", g_width)
        w["generator_predictions/output_bias"] = rng.normal(0, 0.1, (vocab,))
    return {k: v.astype(np.float32) for k, v in w.items()}


def with_optimizer_state(weights):
    """Adds the original's AdamWeightDecayOptimizer slots and global_step."""
    out = dict(weights)
    for name, value in weights.items():
        out[f"{name}/adam_m"] = np.full_like(value, 0.01)
        out[f"{name}/adam_v"] = np.full_like(value, 0.001)
    out["global_step"] = np.array(1000, dtype=np.int64)
    return out


def write_tf1_checkpoint(prefix, weights):
    """A TF1-format (V2 bundle) checkpoint with exactly these names, as the original's Saver."""
    import os

    import tensorflow as tf

    os.makedirs(os.path.dirname(str(prefix)), exist_ok=True)
    names = sorted(weights)
    tf.raw_ops.SaveV2(prefix=str(prefix), tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(weights[n]) for n in names])
    return str(prefix)


# === A NumPy ELECTRA (BERT post-LN encoder; paper section 2 heads) ===
def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _ln(x, w, name, eps=1e-12):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w[f"{name}/gamma"] + w[f"{name}/beta"]


def _dense(x, w, name):
    return x @ w[f"{name}/kernel"] + w[f"{name}/bias"]


def np_encoder(w, scope, inputs, heads, emb_scope=None):
    """Sequence output [B, L, H] of the encoder under `scope` (float64)."""
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    e = emb_scope or scope
    ids, mask, seg = inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"]
    L = ids.shape[1]
    x = (w[f"{e}/embeddings/word_embeddings"][ids]
         + w[f"{e}/embeddings/position_embeddings"][:L][None]
         + w[f"{e}/embeddings/token_type_embeddings"][seg])
    x = _ln(x, w, f"{e}/embeddings/LayerNorm")
    if f"{scope}/embeddings_project/kernel" in w:
        x = _dense(x, w, f"{scope}/embeddings_project")
    bias = (1.0 - mask[:, None, None, :]) * -10000.0
    i = 0
    while f"{scope}/encoder/layer_{i}/attention/self/query/kernel" in w:
        p = f"{scope}/encoder/layer_{i}"
        B, _, H = x.shape
        d = H // heads

        def split(t, B=B, d=d):
            return t.reshape(B, L, heads, d).transpose(0, 2, 1, 3)

        q, k, v = (split(_dense(x, w, f"{p}/attention/self/{n}")) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(B, L, H)
        x = _ln(x + _dense(ctx, w, f"{p}/attention/output/dense"), w,
                f"{p}/attention/output/LayerNorm")
        ffn = _dense(_gelu(_dense(x, w, f"{p}/intermediate/dense")), w, f"{p}/output/dense")
        x = _ln(x + ffn, w, f"{p}/output/LayerNorm")
        i += 1
    return x


def np_rtd_logits(w, sequence_output):
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    h = _gelu(_dense(sequence_output, w, "discriminator_predictions/dense"))
    return _dense(h, w, "discriminator_predictions/dense_1")[..., 0]


def np_mlm_logits(w, sequence_output, emb_scope="electra"):
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    h = _ln(_gelu(_dense(sequence_output, w, "generator_predictions/dense")), w,
            "generator_predictions/LayerNorm")
    return h @ w[f"{emb_scope}/embeddings/word_embeddings"].T + w["generator_predictions/output_bias"]


class Helpers:
    padded_inputs = staticmethod(padded_inputs)
    original_weights = staticmethod(original_weights)
    with_optimizer_state = staticmethod(with_optimizer_state)
    write_tf1_checkpoint = staticmethod(write_tf1_checkpoint)
    np_encoder = staticmethod(np_encoder)
    np_rtd_logits = staticmethod(np_rtd_logits)
    np_mlm_logits = staticmethod(np_mlm_logits)
    TINY_OVERRIDES = TINY_OVERRIDES
    sizes = types.MappingProxyType({
        "VOCAB": VOCAB, "EMBED": EMBED, "HIDDEN": HIDDEN, "LAYERS": LAYERS, "HEADS": HEADS,
        "FFN": FFN, "POS": POS, "G_HIDDEN": G_HIDDEN, "G_FFN": G_FFN})


@pytest.fixture
def h():
    return Helpers
