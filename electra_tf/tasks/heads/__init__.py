"""What a model predicts, one class per kind of head: the registry.

A head class (tasks/heads/base.py, `Head`) owns everything that depends on
which head a model has: its Keras layers, its options (a small frozen
config), its loss, what a fine-tuning folder records of it, its serving
outputs (text and ids signatures) and its transformers and TF1 variable
names. Nothing outside its own file asks which head it is.

The name a folder records (finetuning_config.json's "head", the export's
`--task`) maps to the class here, so that folders written by earlier
versions keep loading. This module imports nothing heavy: the names are
known before Keras (and TensorFlow) are imported, and `head_class` imports
a head's module on first use.

A new kind of head is one file in this folder (a `Head` subclass) and one
line below; a head whose folder record needs fields of its own also names, in
RECORD_CHECKS, a module without Keras that checks them (span_record.py), so
that a folder opens without the framework.
"""

from __future__ import annotations

import importlib

# Fine-tuning heads: recorded name -> "module:Class" in electra_tf/tasks/heads/.
HEADS = {
    "sequence_classification": "classification:SequenceClassificationHead",
    "token_classification": "tagging:TokenClassificationHead",
    "squad": "span:SpanHead",
}
# Heads of a pre-trained model that the export serves from a pre-training folder.
PRETRAINED_HEADS = {
    "rtd": "rtd:RtdHead",
    "score": "scoring:ScoreHead",  # Electric's text scores
}
SERVED = {**HEADS, **PRETRAINED_HEADS}  # what the export's --task takes
# What a pre-training folder serves where no --task names a head (the Python API);
# an Electric model's, whose discriminator gives energies: its text scores.
PRETRAINED_DEFAULT = "rtd"
ELECTRIC_DEFAULT = "score"


def pretrained_default(pretraining: dict) -> str:
    """The head a pre-training folder serves by default; pretraining: the "pretraining"
    section of its pretraining_config.json."""
    return ELECTRIC_DEFAULT if pretraining.get("objective") == "electric" else PRETRAINED_DEFAULT


# Heads whose record needs more fields than every head's, checked without Keras (a
# folder is opened before any model is built): name -> "module:function" here.
RECORD_CHECKS = {"squad": "span_record:record_lacks"}


def record_lacks(name: str, value) -> list[str]:
    """The fields head `name` needs that a finetuning_config.json `value` lacks (the
    head class's `record_lacks`, from a module that imports no Keras)."""
    if name not in RECORD_CHECKS:
        return []
    module, _, function = RECORD_CHECKS[name].partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)(value)


def head_class(name: str):
    """The head class a recorded name (or --task) names.

    Raises:
      ValueError: a name no head has.
    """
    if name not in SERVED:
        raise ValueError(f"head kind must be one of {tuple(SERVED)}, got {name!r}")
    module, _, cls = SERVED[name].partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def head_classes() -> list:
    """Every registered head class, fine-tuning heads first."""
    return [head_class(name) for name in SERVED]
