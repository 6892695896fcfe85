"""Variable names: electra_tf's Keras variables <-> the original's <-> transformers'.

The original TF1 names (google-research/electra, model/modeling.py and
run_pretraining.py) are the pivot: an import reads any format into a dict
{original name: array}, an export writes one from it. Arrays keep the TF1
layout, which is also Keras' (dense kernels [in, out]); PyTorch's Linear
weights are the transposes.

Original names, with S = "electra" (D) or "generator" (G):

    electra/embeddings/{word,position,token_type}_embeddings     tied G and D
    generator/embeddings/...                       untied_generator_embeddings
    S/embeddings_project/{kernel,bias}                         only if E != H
    S/encoder/layer_N/attention/self/{query,key,value}/{kernel,bias}
    S/encoder/layer_N/attention/output/dense/{kernel,bias}
    S/encoder/layer_N/attention/output/LayerNorm/{gamma,beta}
    S/encoder/layer_N/intermediate/dense/{kernel,bias}
    S/encoder/layer_N/output/dense/{kernel,bias}
    S/encoder/layer_N/output/LayerNorm/{gamma,beta}
    discriminator_predictions/dense/{kernel,bias}          dense(H, GELU)
    discriminator_predictions/dense_1/{kernel,bias}        dense(1)
    generator_predictions/dense/{kernel,bias}, generator_predictions/LayerNorm/{gamma,beta}
    generator_predictions/output_bias                       [V]

Fine-tuning heads use `task_specific/<layer>/...` here (the head classes of
tasks/heads/ give them: `Head.original_variables`); the original's fine-tuned
checkpoints name them `task_specific/<task>/dense...`, which each head class maps
(`Head.tf1_variables`, read by interop/tf1.py).
"""

from __future__ import annotations

import re

# Training state the original checkpoints carry besides the weights.
_OPTIMIZER_RE = re.compile(r"(/adam_[mv]$|^global_step$|AdamWeightDecayOptimizer|/Adam(_\d+)?$)")


def is_optimizer_state(name: str) -> bool:
    """True for the original's Adam slots (`<var>/adam_m`, `<var>/adam_v`) and global_step."""
    return bool(_OPTIMIZER_RE.search(name))


def _dense(prefix: str, layer) -> dict:
    return {f"{prefix}/kernel": layer.kernel, f"{prefix}/bias": layer.bias}


def _layer_norm(prefix: str, layer) -> dict:
    return {f"{prefix}/gamma": layer.gamma, f"{prefix}/beta": layer.beta}


def embeddings_variables(scope: str, embeddings) -> dict:
    """{original name: variable} of an `ElectraEmbeddings` under `scope`/embeddings."""
    p = f"{scope}/embeddings"
    return {
        f"{p}/word_embeddings": embeddings.word_embeddings.embeddings,
        f"{p}/position_embeddings": embeddings.position_embeddings.embeddings,
        f"{p}/token_type_embeddings": embeddings.token_type_embeddings.embeddings,
        **_layer_norm(f"{p}/LayerNorm", embeddings.layer_norm),
    }


def encoder_variables(scope: str, encoder, embeddings_scope: str | None) -> dict:
    """{original name: variable} of an `ElectraEncoder`.

    Args:
      scope: "electra" or "generator".
      encoder: the ElectraEncoder.
      embeddings_scope: scope of its embeddings, or None to leave them out
        (they belong to another model: tied embeddings).
    """
    out = {}
    if embeddings_scope is not None:
        out.update(embeddings_variables(embeddings_scope, encoder.embeddings))
    if encoder.embeddings_project is not None:
        out.update(_dense(f"{scope}/embeddings_project", encoder.embeddings_project))
    for i, layer in enumerate(encoder.transformer_layers):
        p = f"{scope}/encoder/layer_{i}"
        for part in ("query", "key", "value"):
            out.update(_dense(f"{p}/attention/self/{part}", getattr(layer.attention, part)))
        out.update(_dense(f"{p}/attention/output/dense", layer.attention_output))
        out.update(_layer_norm(f"{p}/attention/output/LayerNorm", layer.attention_layer_norm))
        out.update(_dense(f"{p}/intermediate/dense", layer.intermediate))
        out.update(_dense(f"{p}/output/dense", layer.output_dense))
        out.update(_layer_norm(f"{p}/output/LayerNorm", layer.output_layer_norm))
    return out


def discriminator_variables(discriminator) -> dict:
    out = encoder_variables("electra", discriminator.encoder, "electra")
    out.update(_dense("discriminator_predictions/dense", discriminator.rtd_head.dense))
    out.update(_dense("discriminator_predictions/dense_1",
                      discriminator.rtd_head.dense_prediction))
    return out


def generator_head_variables(generator) -> dict:
    head = generator.mlm_head
    return {**_dense("generator_predictions/dense", head.dense),
            **_layer_norm("generator_predictions/LayerNorm", head.layer_norm),
            "generator_predictions/output_bias": head.output_bias}


def generator_variables(generator, discriminator=None) -> dict:
    """G's variables by original name, sharing as the original does.

    With `discriminator` given, G's embeddings (or its whole encoder) are
    looked up by identity: shared ones are D's `electra/...` variables and are
    left out here.
    """
    encoder = generator.encoder
    out = {}
    if discriminator is None or encoder is not discriminator.encoder:
        shared = discriminator is not None and encoder.embeddings is discriminator.encoder.embeddings
        out.update(encoder_variables("generator", encoder, None if shared else "generator"))
    out.update(generator_head_variables(generator))
    return out


def task_head_variables(head) -> dict:
    """A fine-tuning head's variables by original name: its class's (`Head.original_variables`,
    tasks/heads/)."""
    return head.original_variables()


# === transformers (PyTorch) names ===
_HF_LAYER_RE = re.compile(r"encoder\.layer\.(\d+)\.")
_HF_HEADS = {  # transformers module -> original scope (heads outside `electra.`)
    "discriminator_predictions.dense_prediction": "discriminator_predictions/dense_1",
    "discriminator_predictions.dense": "discriminator_predictions/dense",
    "generator_predictions.dense": "generator_predictions/dense",
    "generator_predictions.LayerNorm": "generator_predictions/LayerNorm",
}
# A fine-tuning head's transformers names are its class's (`Head.hf_modules`,
# `hf_to_original`, `original_to_hf`: tasks/heads/).
# Buffers that transformers may save; they hold no weights.
HF_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")


def hf_to_original(key: str, scope: str) -> tuple[str, bool] | None:
    """A transformers state-dict key -> (original name, transpose?), or None.

    Args:
      key: e.g. "electra.encoder.layer.0.attention.self.query.weight" (the
        "electra." prefix is optional: ElectraModel saves without it).
      scope: "electra" for a discriminator, "generator" for a generator (whose
        embeddings then map to "generator/embeddings", untied).

    Returns None for keys this mapping does not know.
    """
    if key == "generator_lm_head.bias":
        return "generator_predictions/output_bias", False
    module, _, leaf = key.rpartition(".")
    for hf, orig in _HF_HEADS.items():
        if module == hf:
            return _leaf(orig, leaf, is_norm=orig.endswith("LayerNorm"))
    body = module.removeprefix("electra.")
    if body.startswith("embeddings.") or body == "embeddings_project":
        if body == "embeddings_project":
            return _leaf(f"{scope}/embeddings_project", leaf, False)
        name = body[len("embeddings."):]
        if name == "LayerNorm":
            return _leaf(f"{scope}/embeddings/LayerNorm", leaf, True)
        if name in ("word_embeddings", "position_embeddings", "token_type_embeddings") \
                and leaf == "weight":
            return f"{scope}/embeddings/{name}", False
        return None
    m = _HF_LAYER_RE.match(body)
    if not m:
        return None
    rest = body[m.end():].replace(".", "/")
    if rest not in ("attention/self/query", "attention/self/key", "attention/self/value",
                    "attention/output/dense", "attention/output/LayerNorm",
                    "intermediate/dense", "output/dense", "output/LayerNorm"):
        return None
    return _leaf(f"{scope}/encoder/layer_{m.group(1)}/{rest}", leaf, rest.endswith("LayerNorm"))


def _leaf(prefix: str, leaf: str, is_norm: bool) -> tuple[str, bool] | None:
    if leaf == "weight":
        return (f"{prefix}/gamma", False) if is_norm else (f"{prefix}/kernel", True)
    if leaf == "bias":
        return (f"{prefix}/beta" if is_norm else f"{prefix}/bias"), False
    return None


def original_to_hf(name: str) -> tuple[str, bool]:
    """An original name (D under "electra" or G under "generator") -> transformers key.

    The scope becomes transformers' "electra." base-model prefix, so a
    generator's names give an ElectraForMaskedLM state dict.
    """
    if name == "generator_predictions/output_bias":
        return "generator_lm_head.bias", False
    for hf, orig in _HF_HEADS.items():
        if name.startswith(orig + "/"):
            return _hf_leaf(hf, name[len(orig) + 1:])
    scope, _, rest = name.partition("/")
    if scope not in ("electra", "generator"):
        raise KeyError(f"no transformers name for {name}")
    if rest.startswith("embeddings/") and rest.count("/") == 1:
        return f"electra.{rest.replace('/', '.')}.weight", False
    module, _, leaf = rest.rpartition("/")
    module = re.sub(r"layer_(\d+)", r"layer.\1", module).replace("/", ".")
    return _hf_leaf(f"electra.{module}", leaf)


def _hf_leaf(module: str, leaf: str) -> tuple[str, bool]:
    return {"kernel": (f"{module}.weight", True), "bias": (f"{module}.bias", False),
            "gamma": (f"{module}.weight", False), "beta": (f"{module}.bias", False)}[leaf]
