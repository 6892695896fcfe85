"""Import of the original TF1 checkpoints (google-research/electra).

A released checkpoint (`electra_small/electra_small`, ...) holds D under
`electra/`, G under `generator/` (sharing `electra/embeddings` unless
`untied_generator_embeddings`), both heads, `global_step` and the Adam slots
(`<var>/adam_m`, `<var>/adam_v`). Sizes are read from the shapes and checked
against `--model_size` (plus overrides); the attention head counts, which no
shape shows, come from the preset (G: max(1, h // 64), as the original's
get_generator_config).
"""

from __future__ import annotations

import os
import re
from typing import Callable

import numpy as np

from electra_tf.core.config import PretrainingConfig
from electra_tf.folders import ConvertedFolder
from electra_tf.interop import core, names

_QUERY = "{}/encoder/layer_{}/attention/self/query/kernel"


def read_checkpoint(path: str) -> tuple[dict[str, np.ndarray], list[str]]:
    """The weights of a TF1 checkpoint by name, and the optimizer state's names.

    The optimizer slots (two per weight) are listed but not read.
    """
    import glob

    import tensorflow as tf

    if os.path.isdir(path) and tf.train.latest_checkpoint(path) is None:
        # A release folder without a `checkpoint` state file: its one *.index names the prefix.
        indexes = sorted(glob.glob(os.path.join(path, "*.index")))
        if len(indexes) != 1:
            raise core.ConversionError(f"{path} holds {len(indexes)} checkpoints (*.index); "
                                       "pass --checkpoint=PREFIX")
        path = indexes[0][:-len(".index")]
    try:  # a truncated or bit-flipped index or data file, or a missing data file
        reader = tf.train.load_checkpoint(path)
        all_names = sorted(reader.get_variable_to_shape_map())
        skipped = [n for n in all_names if names.is_optimizer_state(n)]
        weights = {n: reader.get_tensor(n) for n in all_names
                   if not names.is_optimizer_state(n)}
    except (tf.errors.OpError, ValueError, IndexError) as e:  # IndexError: a short read
        message = getattr(e, "message", None) or str(e)
        first = message.strip().splitlines()[0][:300] if message.strip() else type(e).__name__
        raise core.ConversionError(f"cannot read the checkpoint {path}: {first} (a damaged or "
                                   "incomplete checkpoint: the .index and every "
                                   ".data-* file are needed)") from None
    return weights, skipped


def _num_layers(weights: dict, scope: str) -> int:
    pattern = re.compile(rf"^{scope}/encoder/layer_(\d+)/")
    found = {int(m.group(1)) for n in weights if (m := pattern.match(n))}
    return max(found) + 1 if found else 0


def infer_config(weights: dict[str, np.ndarray], model_size: str,
                 overrides: dict | None = None) -> PretrainingConfig:
    """The PretrainingConfig whose models have exactly these variables' shapes.

    Generator fractions and sharing flags are read from the generator's
    variables; for a discriminator-only checkpoint they keep their defaults
    and only `discriminator_config()` matters.
    """
    word = "electra/embeddings/word_embeddings"
    if word not in weights:
        raise core.ConversionError(f"{word} is not in the checkpoint: not an ELECTRA checkpoint "
                                   "with the original names")
    vocab_size, emb = weights[word].shape
    d_layers = _num_layers(weights, "electra")
    if d_layers == 0:
        raise core.ConversionError("no electra/encoder/layer_N variables in the checkpoint")
    d_hidden = weights[_QUERY.format("electra", 0)].shape[1]
    found = {
        "hidden_size": (d_hidden, _QUERY.format("electra", 0)),
        "num_hidden_layers": (d_layers, f"electra/encoder/layer_{d_layers - 1}"),
        "intermediate_size": (weights["electra/encoder/layer_0/intermediate/dense/kernel"].shape[1],
                              "electra/encoder/layer_0/intermediate/dense/kernel"),
        "embedding_size": (emb, word),
    }
    hparams = {"max_position_embeddings": weights["electra/embeddings/position_embeddings"].shape[0],
               "type_vocab_size": weights["electra/embeddings/token_type_embeddings"].shape[0]}
    hparams.update(overrides or {})
    values = {"model_size": model_size, "vocab_size": int(vocab_size),
              "model_hparam_overrides": hparams,
              "max_seq_length": min(128, hparams["max_position_embeddings"]),
              "mask_prob": 0.25 if model_size == "large" else 0.15}
    g_layers = _num_layers(weights, "generator")
    if g_layers:
        g_hidden = weights[_QUERY.format("generator", 0)].shape[1]
        values.update(generator_hidden_size=g_hidden / d_hidden,
                      generator_layers=g_layers / d_layers,
                      untied_generator_embeddings="generator/embeddings/word_embeddings" in weights)
    elif "generator_predictions/output_bias" in weights:
        values.update(untied_generator=False, generator_hidden_size=1.0, generator_layers=1.0)
    config = PretrainingConfig(**values)
    disc = config.discriminator_config()
    wanted = f"--model_size={model_size}" + (f" with overrides {overrides}" if overrides else "")
    for field, (got, evidence) in found.items():
        want = disc.resolved_embedding_size if field == "embedding_size" else getattr(disc, field)
        if got != want:
            raise core.ConversionError(
                f"the checkpoint is not {wanted}: {field} is {got} (from {evidence}), "
                f"the model has {want}")
    return config


def import_checkpoint(path: str, model_size: str, output: str,
                      overrides: dict | None = None,
                      resume_checkpoint: Callable[[str, object], str] | None = None) -> dict:
    """Converts an original checkpoint into an electra_tf model_dir (see core.py).

    Args:
      path: the checkpoint prefix (".../model.ckpt-1000000").
      model_size: small | base | large (| tiny); checked against the shapes.
      output: the folder to write.
      overrides: EncoderConfig fields on top of the preset (custom sizes).
      resume_checkpoint: when G is present, writes checkpoints/ckpt-0 for
        run_pretraining to continue from: (checkpoint folder, ElectraPretrainer)
        -> its path (the command passes training.checkpoints'
        `write_fresh_pretraining_checkpoint`); None: no checkpoint.

    Returns:
      the conversion report (also written as conversion_report.json).
    """
    from electra_tf.modeling.models import build_discriminator
    from electra_tf.objectives.pretrainer import ElectraPretrainer

    weights, skipped = read_checkpoint(path)
    config = infer_config(weights, model_size, overrides)
    source_dir = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    check_vocab_size(os.path.join(source_dir, core.SOURCE_VOCAB), config.vocab_size)
    has_generator = any(n.startswith(("generator/", "generator_predictions/")) for n in weights)
    folder = ConvertedFolder(output)
    report = {"source": os.path.abspath(path), "format": "tf1", "skipped": skipped}
    if has_generator:
        pretrainer = ElectraPretrainer(config)
        pretrainer.build_with_dummy_batch()
        generator, discriminator = pretrainer.generator, pretrainer.discriminator
        targets = {**names.discriminator_variables(discriminator),
                   **names.generator_variables(generator, discriminator)}
    else:
        discriminator = build_discriminator(config.discriminator_config())
        targets = names.discriminator_variables(discriminator)
    report.update(core.assign(weights, targets, path))
    report["mapping"] = {n: targets[n].path for n in report["assigned"]}
    folder.save_discriminator(discriminator)
    vocab = folder.keep_vocab_beside(source_dir)
    if has_generator:
        folder.save_generator(generator)
        folder.write_pretraining_config(config, vocab, converted_from=os.path.abspath(path))
        if resume_checkpoint is not None:
            report["checkpoint"] = resume_checkpoint(folder.checkpoint_dir, pretrainer)
            report["resume_flags"] = resume_flags(config)
    else:
        folder.record_vocab(vocab)
    folder.write_report(report)
    return report


def check_vocab_size(vocab_file: str, vocab_size: int) -> None:
    """Refuses a vocab.txt beside the checkpoint that its embedding table cannot take.

    More tokens than rows: the folder would serve ids past the table (every
    request holding one would fail); special tokens only: nothing could be
    tokenized. Fewer tokens than rows is legal (a padded table). Nothing is
    checked without a vocab.txt (none is copied then).

    Raises:
      ConversionError: naming the file (and both sizes).
    """
    if not os.path.isfile(vocab_file):
        return
    from electra_tf.core.errors import VocabError
    from electra_tf.text.vocab import load_vocab

    try:
        tokens = load_vocab(vocab_file)
    except VocabError as e:
        raise core.ConversionError(str(e)) from None
    core.check_vocabulary(tokens, vocab_file, vocab_size, owner="checkpoint")


def resume_flags(config: PretrainingConfig) -> str:
    """The run_pretraining flags whose models match an imported checkpoint."""
    flags = [f"--model_size={config.model_size}", f"--vocab_size={config.vocab_size}",
             f"--generator_hidden_size={config.generator_hidden_size:g}",
             f"--generator_layers={config.generator_layers:g}"]
    if config.untied_generator_embeddings:
        flags.append("--untied_generator_embeddings")
    if not config.untied_generator:
        flags.append("--nountied_generator")
    return " ".join(flags)
