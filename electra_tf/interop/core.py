"""What every conversion shares: checked assignment, size checks, the output folder.

An import builds electra_tf's models, pairs every source array with a
variable by its original name (`names.py`) and refuses to guess: a source
variable that maps nowhere, a shape that differs or a model variable left
without a value is an error that names the variable.

The output folder is a converted folder (electra_tf/folders/converted.py, whose
`ConvertedFolder` writes every file), read as a pre-training folder:
- `discriminator.weights.h5` + `discriminator_config.json`: fine-tuning's
  `--init_checkpoint` (`PretrainingFolder`) and the export;
- `generator.weights.h5` (+ `generator_config.json` for a stand-alone
  transformers generator, or `pretraining_config.json` when G and D come from
  one pre-training checkpoint);
- `checkpoints/ckpt-0` (TF1 imports holding G and D, written by the writer
  the command hands in: training/checkpoints.py's, the loop's format), so `run_pretraining
  --model_dir=DIR` with matching size flags continues pre-training from the
  imported weights (step 0, fresh Adam moments: the original's slots are not
  carried, since its AdamW has no bias correction);
- `vocab.txt`, copied from beside the source when it is there;
- `conversion_report.json`: source -> target name of every variable, and the
  ones skipped on purpose (optimizer slots, buffers) or left at their
  initial values (a head the source does not have).
"""

from __future__ import annotations

import numpy as np

from electra_tf.core.config import MODEL_SIZES, EncoderConfig, size_mismatches
from electra_tf.core.errors import ConversionError
from electra_tf.folders.files import first_non_finite

# The vocabulary beside an original checkpoint or in a transformers folder (the
# source's own layout; electra_tf's folders are electra_tf/folders').
SOURCE_VOCAB = "vocab.txt"


def is_floating(value: np.ndarray) -> bool:
    """float16/32/64, and bfloat16 (ml_dtypes' type, of numpy kind "V")."""
    return value.dtype.kind == "f" or value.dtype.name == "bfloat16"


def check_finite(weights: dict[str, np.ndarray], source: str) -> None:
    """Raises ConversionError naming the first tensor that holds a NaN or an infinity."""
    arrays = ((key, np.asarray(weights[key])) for key in sorted(weights))
    found = first_non_finite((key, value.astype(np.float32)) for key, value in arrays
                             if is_floating(value))  # a bf16 checkpoint's NaN had passed
    if found:
        key, bad, size = found
        raise ConversionError(
            f"{source}: {key} holds {bad} NaN or infinite value(s) of {size}: "
            "a damaged model (a diverged training run?); only finite weights convert")


def check_model_size(config: EncoderConfig, model_size: str, evidence: dict[str, str]) -> None:
    """Raises ConversionError when `config` is not the `model_size` preset.

    Args:
      config: the encoder config read from the source.
      model_size: "" (no check) or a MODEL_SIZES key.
      evidence: EncoderConfig field -> the source variable (or file) it was read from.
    """
    if not model_size:
        return
    if model_size not in MODEL_SIZES:
        raise ConversionError(f"--model_size={model_size} is not one of {sorted(MODEL_SIZES)}")
    mismatches = size_mismatches(config, model_size)
    if mismatches:
        field, want, got = mismatches[0]
        raise ConversionError(
            f"the checkpoint is not --model_size={model_size}: {field} is {got} (from "
            f"{evidence.get(field, 'config.json')}), {model_size} has {want}")


def assign(weights: dict[str, np.ndarray], targets: dict[str, object], source: str,
           may_be_missing: tuple[str, ...] = (),
           source_names: dict[str, str] | None = None) -> dict[str, list[str]]:
    """Assigns `weights[name]` to `targets[name]` for every name, strictly.

    Args:
      weights: original name -> array (already in Keras layout).
      targets: original name -> Keras variable.
      source: the source's path, for messages.
      may_be_missing: name prefixes that the source may lack (their variables
        keep their initial values and are reported).
      source_names: {name in `weights`: what the source calls it}, where the two
        differ (a TF1 head's task_specific/<task>/dense): the messages use the latter.

    Returns:
      {"assigned": [...], "left_at_init": [...]}.
    Raises:
      ConversionError naming the first bad variables.
    """
    leftover = sorted(set(weights) - set(targets))
    if leftover:
        raise ConversionError(
            f"{source}: {len(leftover)} variable(s) map to nothing in electra_tf, e.g. "
            f"{', '.join(leftover[:5])} (wrong --model_size, or an unsupported variant)")
    missing = sorted(set(targets) - set(weights))
    left_at_init = [n for n in missing if n.startswith(may_be_missing)] if may_be_missing else []
    missing = [n for n in missing if n not in left_at_init]
    if missing:
        raise ConversionError(
            f"{source}: {len(missing)} variable(s) of the electra_tf model are not in the "
            f"source, e.g. {', '.join(missing[:5])}")
    for name in sorted(weights):
        var, value = targets[name], weights[name]
        if not is_floating(np.asarray(value)):  # it had been cast silently
            raise ConversionError(
                f"{source}: {(source_names or {}).get(name, name)} holds "
                f"{np.asarray(value).dtype.name} values, not floating-point weights")
        if tuple(var.shape) != tuple(value.shape):
            raise ConversionError(
                f"{source}: {(source_names or {}).get(name, name)} has shape "
                f"{tuple(value.shape)} but electra_tf's {var.path} wants {tuple(var.shape)}")
    for name, value in weights.items():
        targets[name].assign(np.asarray(value, dtype=targets[name].dtype))
    return {"assigned": sorted(weights), "left_at_init": left_at_init}


def check_vocabulary(tokens: list[str], source: str, rows: int, owner: str = "model") -> None:
    """A vocabulary a conversion keeps: usable word pieces, and no more tokens than the
    embedding table has rows (fewer is legal: transformers models often pad the table).

    Raises:
      ConversionError: naming `source` (and both sizes).
    """
    from electra_tf.core.errors import VocabError
    from electra_tf.text.vocab import check_word_pieces

    try:
        check_word_pieces(tokens, source)
    except VocabError as e:
        raise ConversionError(str(e)) from None
    if len(tokens) > rows:
        raise ConversionError(
            f"{source} holds {len(tokens)} tokens but the {owner}'s embedding table has "
            f"{rows} rows: it is not this {owner}'s vocabulary")
