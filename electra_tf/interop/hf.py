"""transformers (Hugging Face) ELECTRA weights, both ways.

Import reads `config.json` and `model.safetensors` (or a sharded
`model.safetensors.index.json`) with the `safetensors` package's numpy API,
so no PyTorch is needed; `pytorch_model.bin` is read only where torch is
installed. Classes, recognised by their weight names:

| transformers class | electra_tf output |
|---|---|
| ElectraModel | the discriminator's encoder (its RTD head stays at its initial values) |
| ElectraForPreTraining | the discriminator with its RTD head |
| ElectraForMaskedLM | a stand-alone generator (`generator.weights.h5` + `generator_config.json`) |
| ElectraForTokenClassification | D + a `tagging` head (`finetuned.weights.h5`, `task_head.json`) |
| ElectraForQuestionAnswering | D + a `span` head (likewise) |
| ElectraForSequenceClassification | refused: its head is dense -> GELU -> dense, electra_tf's is one dense; `--drop_task_head` keeps the encoder only |

Export writes `config.json` + `model.safetensors` of an ElectraForPreTraining
(the discriminator) and, on request, of an ElectraForMaskedLM (the generator,
under `generator/`), which `from_pretrained` loads.

The generator's MLM head. transformers' ElectraGeneratorPredictions applies
GELU whatever `hidden_act` says, where the original (and electra_tf by
default) applies `hidden_act`. An import therefore records
`generator_head_act="gelu"` in the EncoderConfig when hidden_act is not gelu,
so the generator computes what transformers computes; an export whose
generator head activation is not GELU, which transformers' config cannot
express, logs a warning line (`export_warnings`).
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
from absl import logging

from electra_tf import artifacts
from electra_tf.config import EncoderConfig
from electra_tf.fileio import atomic_write_json
from electra_tf.interop import core, names

_ACT_FROM_HF = {"gelu": "gelu", "gelu_new": "gelu_approximate", "gelu_fast": "gelu_approximate",
                "gelu_pytorch_tanh": "gelu_approximate", "relu": "relu"}
_ACT_TO_HF = {"gelu": "gelu", "gelu_approximate": "gelu_new", "relu": "relu"}
_ENCODER_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                   "num_attention_heads", "intermediate_size", "hidden_dropout_prob",
                   "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
                   "initializer_range", "layer_norm_eps")


# === Reading ===
def read_config(model_dir: str) -> tuple[dict, EncoderConfig]:
    path = os.path.join(model_dir, "config.json")
    if not os.path.exists(path):
        raise core.ConversionError(f"{path} not found (a transformers model folder holds "
                                   "config.json and model.safetensors)")
    with open(path) as f:
        hf = json.load(f)
    if hf.get("model_type", "electra") != "electra":
        raise core.ConversionError(f"{path}: model_type {hf.get('model_type')!r} is not electra")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise core.ConversionError(f"{path}: position_embedding_type "
                                   f"{hf['position_embedding_type']!r} is not supported")
    act = hf.get("hidden_act", "gelu")
    if act not in _ACT_FROM_HF:
        raise core.ConversionError(f"{path}: hidden_act {act!r} is not supported")
    values = {k: hf[k] for k in _ENCODER_FIELDS if k in hf}
    values["hidden_act"] = _ACT_FROM_HF[act]
    if values["hidden_act"] != "gelu":  # transformers' generator head is always GELU
        values["generator_head_act"] = "gelu"
    return hf, EncoderConfig.from_dict(values)


def read_weights(model_dir: str) -> dict[str, np.ndarray]:
    """The state dict as float32 numpy arrays (safetensors, else pytorch_model.bin)."""
    single = os.path.join(model_dir, "model.safetensors")
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(single) or os.path.exists(index):
        load_file = _safetensors().load_file

        files = [single]
        if not os.path.exists(single):
            with open(index) as f:
                files = sorted({os.path.join(model_dir, v)
                                for v in json.load(f)["weight_map"].values()})
        weights = {}
        for path in files:
            try:
                weights.update(load_file(path))
            except (TypeError, ValueError) as e:  # e.g. bfloat16, which numpy lacks
                raise core.ConversionError(f"{path}: {e}; save the model in float32") from None
    else:
        path = os.path.join(model_dir, "pytorch_model.bin")
        if not os.path.exists(path):
            raise core.ConversionError(f"no model.safetensors or pytorch_model.bin in {model_dir}")
        try:
            import torch
        except ImportError:
            raise core.ConversionError(f"{path} needs torch to read; install electra_tf[interop] "
                                       "or convert it to model.safetensors") from None
        state = torch.load(path, map_location="cpu", weights_only=True)
        weights = {k: v.float().numpy() for k, v in state.items()}
    return {k: np.asarray(v, dtype=np.float32) if v.dtype.kind == "f" else v
            for k, v in weights.items()}


def detect_kind(weights: dict) -> str:
    """pretraining | masked_lm | token_classification | question_answering |
    sequence_classification | model."""
    keys = set(weights)
    if any(k.startswith(("generator_predictions.", "generator_lm_head.")) for k in keys):
        return "masked_lm"
    if any(k.startswith("discriminator_predictions.") for k in keys):
        return "pretraining"
    if any(k.startswith(("classifier.dense.", "classifier.out_proj.")) for k in keys):
        return "sequence_classification"
    if "classifier.weight" in keys:
        return "token_classification"
    if "qa_outputs.weight" in keys:
        return "question_answering"
    return "model"


# === Import ===
def import_model(model_dir: str, output: str, model_size: str = "",
                 drop_task_head: bool = False) -> dict:
    """Converts one transformers ELECTRA folder into (part of) an electra_tf model_dir.

    Returns the conversion report (also merged into conversion_report.json).
    """
    from electra_tf.modeling.finetuning import FinetuningModel
    from electra_tf.modeling.models import ElectraGenerator, build_discriminator

    hf_config, config = read_config(model_dir)
    weights = read_weights(model_dir)
    kind = detect_kind(weights)
    if kind != "masked_lm":  # a generator is a fraction of the size it goes with
        core.check_model_size(config, model_size, {})
    scope = "generator" if kind == "masked_lm" else "electra"
    skipped, converted = [], {}
    for key, value in weights.items():
        if key.endswith(names.HF_BUFFERS):
            skipped.append(f"{key} (buffer)")
            continue
        if key == "generator_lm_head.weight":  # tied to the input table, as in ELECTRA
            table = weights.get("electra.embeddings.word_embeddings.weight")
            if table is None or not np.array_equal(table, value):
                raise core.ConversionError(
                    f"{model_dir}: generator_lm_head.weight differs from the word embeddings; "
                    "electra_tf's MLM head is tied to them")
            skipped.append(f"{key} (tied to the word embeddings)")
            continue
        if kind == "sequence_classification" and key.startswith("classifier."):
            if not drop_task_head:
                raise core.ConversionError(
                    f"{model_dir}: {key} belongs to ElectraForSequenceClassification's "
                    "dense -> GELU -> dense head, which electra_tf's one-dense head cannot "
                    "hold; pass --drop_task_head to convert the encoder only")
            skipped.append(f"{key} (task head dropped)")
            continue
        mapped = names.hf_to_original(key, scope)
        if mapped is None:
            raise core.ConversionError(f"{model_dir}: {key} (shape {tuple(value.shape)}) maps "
                                       "to nothing in electra_tf")
        name, transpose = mapped
        converted[name] = value.T if transpose else value
    os.makedirs(output, exist_ok=True)
    may_be_missing: tuple[str, ...] = ()
    task_model = None
    if kind == "masked_lm":
        model = ElectraGenerator(config)
        model.build()
        targets = names.generator_variables(model)
    else:
        model = build_discriminator(config)
        targets = names.discriminator_variables(model)
        if kind != "pretraining":
            may_be_missing = ("discriminator_predictions/",)
        if kind in ("token_classification", "question_answering"):
            width = converted["task_specific/output/kernel"].shape[1]
            if kind == "question_answering" and width != 2:
                raise core.ConversionError(f"{model_dir}: qa_outputs has {width} outputs, not 2")
            head_kind = "tagging" if kind == "token_classification" else "span"
            task_model = FinetuningModel(model.encoder, head_kind, num_labels=width,
                                         span_head="independent")  # transformers' qa_outputs
            task_model.build()
            targets.update(names.task_head_variables(task_model.head))
    report = core.assign(converted, targets, model_dir, may_be_missing)
    report.update(source=os.path.abspath(model_dir), format="hf", kind=kind, skipped=skipped,
                  mapping={n: targets[n].path for n in report["assigned"]})
    vocab = artifacts.copy_vocab(model_dir, output)
    if kind == "masked_lm":
        artifacts.save_generator(output, model, standalone=True)
    else:
        artifacts.save_discriminator(output, model)
        artifacts.record_vocab(output, vocab)
    if task_model is not None:
        artifacts.save_task_head(output, task_model, hf_config.get("id2label", {}))
    artifacts.write_conversion_report(output, report, kind=kind)
    return report


# === Export ===
def hf_config(config: EncoderConfig, architecture: str) -> dict:
    values = {k: getattr(config, k) for k in _ENCODER_FIELDS}
    values.update(embedding_size=config.resolved_embedding_size, architectures=[architecture],
                  model_type="electra", hidden_act=_ACT_TO_HF[config.hidden_act],
                  position_embedding_type="absolute", pad_token_id=0, classifier_dropout=None,
                  tie_word_embeddings=True, summary_type="first", summary_use_proj=True,
                  summary_activation="gelu", summary_last_dropout=0.1)
    return values


def export_warnings(config: EncoderConfig, architecture: str) -> list[str]:
    """What transformers' `architecture` with hf_config(config) computes differently."""
    head_act = config.generator_head_act or config.hidden_act
    if architecture == "ElectraForMaskedLM" and head_act != "gelu":
        return [f"the generator's MLM head applies {head_act}, but transformers' "
                f"ElectraGeneratorPredictions always applies gelu: the exported "
                f"ElectraForMaskedLM's logits will differ from electra_tf's"]
    return []


def state_dict(variables: dict) -> dict[str, np.ndarray]:
    """{original name: variable} -> transformers' {key: array} (Linear weights transposed)."""
    out = {}
    for name, var in variables.items():
        key, transpose = names.original_to_hf(name)
        value = np.asarray(var.numpy(), dtype=np.float32)
        out[key] = np.ascontiguousarray(value.T if transpose else value)
    return out


def _safetensors():
    """safetensors.numpy, or a ConversionError that names the extra to install."""
    try:
        from safetensors import numpy as safetensors_numpy
    except ImportError:
        raise core.ConversionError("transformers folders are read and written with the "
                                   "safetensors package: pip install 'electra_tf[interop]'") from None
    return safetensors_numpy


def _save(output: str, tensors: dict, config: dict) -> list[str]:
    save_file = _safetensors().save_file

    os.makedirs(output, exist_ok=True)
    weights = os.path.join(output, "model.safetensors")
    save_file(tensors, weights, metadata={"format": "pt"})
    atomic_write_json(os.path.join(output, "config.json"), config)  # transformers' format
    return [os.path.join(output, "config.json"), weights]


def export_model(model_dir: str, output: str, generator: bool = False) -> list[str]:
    """Writes transformers folders for an electra_tf model_dir.

    Args:
      model_dir: holds discriminator.weights.h5 + discriminator_config.json
        (and for `generator`, generator.weights.h5 + its config).
      output: gets config.json + model.safetensors (ElectraForPreTraining), and
        with `generator` a `generator/` folder (ElectraForMaskedLM).

    Returns the written paths.
    """
    discriminator, vocab = artifacts.load_discriminator(model_dir)
    written = _save(output, state_dict(names.discriminator_variables(discriminator)),
                    hf_config(discriminator.config, "ElectraForPreTraining"))
    if vocab and os.path.exists(vocab):  # for transformers' ElectraTokenizer
        shutil.copyfile(vocab, os.path.join(output, artifacts.VOCAB))
        written.append(os.path.join(output, artifacts.VOCAB))
    if generator:
        gen = artifacts.load_generator(model_dir)
        for warning in export_warnings(gen.config, "ElectraForMaskedLM"):
            logging.warning("%s: %s", model_dir, warning)
        written += _save(os.path.join(output, "generator"),
                         state_dict(names.generator_variables(gen)),
                         hf_config(gen.config, "ElectraForMaskedLM"))
    return written
