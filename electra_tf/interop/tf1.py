"""Import of the original TF1 checkpoints (google-research/electra).

A released checkpoint (`electra_small/electra_small`, ...) holds D under
`electra/`, G under `generator/` (sharing `electra/embeddings` unless
`untied_generator_embeddings`), both heads, `global_step` and the Adam slots
(`<var>/adam_m`, `<var>/adam_v`). Sizes are read from the shapes and checked
against `--model_size` (plus overrides); the attention head counts, which no
shape shows, come from the preset (G: max(1, h // 64), as the original's
get_generator_config).

A checkpoint of the original's run_finetuning.py (the encoder and a task's
head under `task_specific/<task>/`) becomes a fine-tuning folder instead
(`import_finetuned`; the head's names: its class's `tf1_layers`, tasks/heads/).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Callable

import numpy as np

from electra_tf.core.config import PretrainingConfig
from electra_tf.core.errors import ConfigError
from electra_tf.core.fileio import not_utf8
from electra_tf.folders import ConvertedFolder
from electra_tf.interop import core, electric, names
from electra_tf.tasks.registry import ORIGINAL_TASK_NAMES

_QUERY = "{}/encoder/layer_{}/attention/self/query/kernel"


def checkpoint_prefix(path: str) -> str:
    """The prefix of the checkpoint `path` names: itself, that of its .index, .meta or
    .data-* file, or of a folder's `checkpoint` state file (else its one *.index).

    Raises:
      ConversionError: a folder of several checkpoints and no state file naming one; a
        prefix with no .index (naming the checkpoints beside it).
    """
    import glob

    shown = not_utf8(path)
    if shown is not None:  # TensorFlow's file system takes UTF-8 paths only
        raise core.ConversionError(f"cannot read the checkpoint {shown}: its path is not "
                                   "UTF-8, which TensorFlow's file system needs; rename it")
    for suffix in (".index", ".meta"):  # the prefix is what names a checkpoint
        if path.endswith(suffix) and os.path.isfile(path):
            path = path[:-len(suffix)]
    if re.search(r"\.data-\d+-of-\d+$", path) and os.path.isfile(path):
        path = path[:path.rindex(".data-")]
    if os.path.isdir(path):
        latest = _state_file_checkpoint(path)
        if latest is not None:
            return latest
        # A release folder without a `checkpoint` state file: its one *.index names the prefix.
        indexes = sorted(glob.glob(os.path.join(path, "*.index")))
        if len(indexes) != 1:
            raise core.ConversionError(f"{path} holds {len(indexes)} checkpoints (*.index); "
                                       "pass --checkpoint=PREFIX")
        path = indexes[0][:-len(".index")]
    if "://" not in path and not os.path.exists(path + ".index") \
            and not os.path.isfile(path):  # (a typo had been called a damaged checkpoint)
        folder = os.path.dirname(path) or "."
        if not os.path.isdir(folder):
            raise core.ConversionError(f"no checkpoint {path}: its folder {folder} does "
                                       "not exist")
        beside = sorted(os.path.basename(p)[:-len(".index")]
                        for p in glob.glob(os.path.join(glob.escape(folder), "*.index")))
        holds = (f"its folder holds {', '.join(beside[:5])}"
                 + (f" and {len(beside) - 5} more" if len(beside) > 5 else "")
                 if beside else "its folder holds no checkpoint (*.index)")
        raise core.ConversionError(f"no checkpoint {path} ({os.path.basename(path)}.index "
                                   f"does not exist); {holds}")
    return path


def _state_file_checkpoint(folder: str) -> str | None:
    """The checkpoint a folder's `checkpoint` state file names, where its .index exists
    (None: no readable state file; ConversionError: it names a checkpoint not there). A
    state file copied from the training machine names its paths (gs://..., /home/...):
    tf.train.latest_checkpoint logged an error line for them on a conversion that then
    went well."""
    import tensorflow as tf

    try:
        state = tf.train.get_checkpoint_state(folder)
    except (tf.errors.OpError, ValueError, UnicodeDecodeError):  # (google.protobuf's
        return None  # text-format errors are ValueErrors)
    named = state.model_checkpoint_path if state is not None else ""
    if named and "://" not in named and os.path.exists(named + ".index"):
        return named
    if not named:
        return None
    beside = os.path.join(folder, os.path.basename(named))
    if os.path.exists(beside + ".index"):  # (copied)
        return beside
    import glob

    # An incomplete copy: the folder's other checkpoint had been converted, silently
    held = sorted(os.path.basename(p)[:-len(".index")]
                  for p in glob.glob(os.path.join(folder, "*.index")))
    raise core.ConversionError(
        f"{os.path.join(folder, 'checkpoint')} (the state file) names "
        f"{os.path.basename(named)} as the latest checkpoint, and {folder} does not hold it "
        "(an incomplete copy?)" + (f"; to convert another, pass --checkpoint=PREFIX: it holds "
                                   f"{', '.join(held)}" if held else ""))


def read_checkpoint(path: str) -> tuple[dict[str, np.ndarray], list[str]]:
    """The weights of a TF1 checkpoint by name, and the optimizer state's names.

    The optimizer slots (two per weight) are listed but not read.
    """
    import tensorflow as tf

    path = checkpoint_prefix(path)
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
    core.check_finite(weights, path)
    return weights, skipped


def source_step(path: str) -> int | None:
    """The `global_step` a TF1 checkpoint was saved at (None: it holds none). Not
    converted (the continued run starts at step 0, with fresh Adam moments), but
    recorded: what the source trained sizes the steps and warmup still to come."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(checkpoint_prefix(path))  # (read once already)
    if "global_step" not in reader.get_variable_to_shape_map():
        return None
    return int(np.asarray(reader.get_tensor("global_step")).reshape(-1)[0])


def _num_layers(weights: dict, scope: str) -> int:
    pattern = re.compile(rf"^{scope}/encoder/layer_(\d+)/")
    found = {int(m.group(1)) for n in weights if (m := pattern.match(n))}
    return max(found) + 1 if found else 0


def _shape(weights: dict, name: str, rank: int) -> tuple[int, ...]:
    """The shape of a variable the config is read from.

    Raises:
      ConversionError: the checkpoint lacks it, or it has another rank.
    """
    if name not in weights:
        raise core.ConversionError(f"{name} is not in the checkpoint, which an ELECTRA "
                                   "checkpoint of the original names holds")
    shape = tuple(np.shape(weights[name]))
    if len(shape) != rank:
        raise core.ConversionError(f"{name} has shape {list(shape)}; an ELECTRA checkpoint's "
                                   f"has {rank} dimension(s)")
    return shape


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
    vocab_size, emb = _shape(weights, word, 2)
    d_layers = _num_layers(weights, "electra")
    if d_layers == 0:
        raise core.ConversionError("no electra/encoder/layer_N variables in the checkpoint")
    d_hidden = _shape(weights, _QUERY.format("electra", 0), 2)[1]
    intermediate = "electra/encoder/layer_0/intermediate/dense/kernel"
    found = {
        "hidden_size": (d_hidden, _QUERY.format("electra", 0)),
        "num_hidden_layers": (d_layers, f"electra/encoder/layer_{d_layers - 1}"),
        "intermediate_size": (_shape(weights, intermediate, 2)[1], intermediate),
        "embedding_size": (emb, word),
    }
    hparams = {
        "max_position_embeddings": _shape(weights, "electra/embeddings/position_embeddings", 2)[0],
        "type_vocab_size": _shape(weights, "electra/embeddings/token_type_embeddings", 2)[0]}
    hparams.update(overrides or {})
    values = {"model_size": model_size, "vocab_size": int(vocab_size),
              "model_hparam_overrides": hparams,
              "max_seq_length": min(128, hparams["max_position_embeddings"]),
              "mask_prob": 0.25 if model_size == "large" else 0.15}
    g_layers = _num_layers(weights, "generator")
    if electric.is_electric(weights):
        values.update(electric.generator_values(weights, d_hidden, d_layers, _num_layers,
                                                _shape))
    elif g_layers:
        g_hidden = _shape(weights, _QUERY.format("generator", 0), 2)[1]
        values.update(generator_hidden_size=g_hidden / d_hidden,
                      generator_layers=g_layers / d_layers,
                      untied_generator_embeddings="generator/embeddings/word_embeddings" in weights)
    elif "generator_predictions/output_bias" in weights and is_bert(weights):
        values.update(objective="bert_mlm")  # (G is D's encoder: no generator sizes)
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


def heads_notes(overrides: dict | None, heads: dict[str, int]) -> list[str]:
    """What a custom-size conversion says of the attention head counts, which no
    variable's shape holds: taken as the preset derives them, so a model trained with
    other counts would convert without a word and compute something else.

    Args:
      overrides: the --model_hparam_overrides given (none: a preset's sizes, whose head
        counts are the released models').
      heads: {"discriminator": n, "generator": m} as the converted models have them.
    """
    if not overrides or "num_attention_heads" in overrides or "hidden_size" not in overrides:
        return []  # (a preset's width: the released models' counts)
    counts = ", ".join(f"{k} {v}" for k, v in heads.items())
    return [f"attention heads taken as the sizes derive them ({counts}: hidden size / 64, "
            "at least 1), which no variable of the checkpoint records; a model trained "
            "with another count computes otherwise once converted: pass its "
            "num_attention_heads in --model_hparam_overrides"]


def is_bert(weights: dict) -> bool:
    """Whether a pre-training checkpoint is the original's BERT (electra_objective=False):
    a masked LM's head on the `electra/` encoder, no generator scope and no
    replaced-token-detection head (it had been refused as missing those variables)."""
    return ("generator_predictions/output_bias" in weights
            and not any(n.startswith(("generator/", "discriminator_predictions/"))
                        for n in weights))


def import_checkpoint(path: str, model_size: str, output: str,
                      overrides: dict | None = None,
                      resume_checkpoint: Callable[[str, object], str] | None = None,
                      do_lower_case: bool = True, **task_options) -> dict:
    """Converts an original checkpoint into an electra_tf model_dir (see core.py).

    A checkpoint of the original's run_finetuning.py (task_specific/* variables)
    becomes a fine-tuning folder instead (`import_finetuned`, which takes
    `task_options`).

    Args:
      path: the checkpoint prefix (".../model.ckpt-1000000").
      model_size: small | base | large (| tiny); checked against the shapes.
      output: the folder to write.
      overrides: EncoderConfig fields on top of the preset (custom sizes).
      resume_checkpoint: when G is present, writes checkpoints/ckpt-0 for
        run_pretraining to continue from: (checkpoint folder, ElectraPretrainer)
        -> its path (the command passes training.checkpoints'
        `write_fresh_pretraining_checkpoint`); None: no checkpoint.
      do_lower_case: the original's do_lower_case (True for the released models),
        recorded with the model: fine-tuning refuses another casing, and the
        export's tokenizer follows it.

    Returns:
      the conversion report (also written as conversion_report.json).
    """
    from electra_tf.modeling.models import build_discriminator
    from electra_tf.objectives.pretrainer import ElectraPretrainer

    weights, skipped = read_checkpoint(path)
    source = os.path.abspath(checkpoint_prefix(path))  # a folder: the one read
    if is_finetuned(weights):
        return import_finetuned(path, model_size, output, overrides, weights=weights,
                                skipped=skipped, do_lower_case=do_lower_case, **task_options)
    vocab_file = task_options.pop("vocab_file", "") or ""
    given = sorted(k for k, v in task_options.items() if v)
    if given:  # what a fine-tuned checkpoint takes; here it would be dropped silently
        raise core.ConversionError(
            f"--{given[0]} is for a fine-tuned checkpoint (task_specific/* variables), and "
            f"{path} holds a pre-training one; leave it out")
    if vocab_file and not os.path.isfile(vocab_file):
        raise core.ConversionError(f"--vocab_file {vocab_file}: no such file")
    config = dataclasses.replace(infer_config(weights, model_size, overrides),
                                 do_lower_case=bool(do_lower_case))
    source_dir = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    config = padded_table(config, vocab_file or os.path.join(source_dir, core.SOURCE_VOCAB))
    has_generator = any(n.startswith(("generator/", "generator_predictions/"))
                        for n in weights) or electric.is_electric(weights)
    folder = ConvertedFolder(output)
    report = {"source": source, "format": "tf1", "skipped": skipped,
              "source_global_step": source_step(path),
              "notes": _vocabulary_notes(vocab_file, source_dir)}
    if has_generator:
        pretrainer = ElectraPretrainer(config)
        pretrainer.build_with_dummy_batch()
        generator, discriminator = pretrainer.generator, pretrainer.discriminator
        g_names = (electric.generator_variables if config.objective == "electric"
                   else names.generator_variables)
        targets = {**names.discriminator_variables(discriminator),
                   **g_names(generator, discriminator)}
    else:
        discriminator = build_discriminator(config.discriminator_config())
        targets = names.discriminator_variables(discriminator)
    bert = config.objective == "bert_mlm"
    # an encoder alone (a fine-tuned checkpoint stripped of its head): converted with the
    # head at its initial values, as an ElectraModel from transformers (it had been refused)
    encoder_only = not has_generator and not any(
        n.startswith("discriminator_predictions/") for n in weights)
    report.update(core.assign(
        weights, targets, path,
        may_be_missing=("discriminator_predictions/",) if bert or encoder_only else ()))
    if encoder_only and not bert:
        report["notes"].append(
            "an encoder alone (no discriminator_predictions/ variables, no generator): the "
            "encoder is converted; the replaced-token detection head is left at its initial "
            "values (fine-tuning reads the encoder; an --task=rtd export of this folder would "
            "serve that untrained head)")
    report["mapping"] = {n: targets[n].path for n in report["assigned"]}
    report["num_attention_heads"] = {"discriminator": config.discriminator_config()
                                     .num_attention_heads}
    if has_generator and not bert:
        report["num_attention_heads"]["generator"] = \
            config.generator_config().num_attention_heads
    report["notes"] += heads_notes(overrides, report["num_attention_heads"])
    if bert:
        report["notes"].append(
            "a BERT checkpoint (the original's electra_objective=False): its masked LM and "
            "encoder are converted; the replaced-token detection head, which BERT has not, is "
            "left at its initial values (fine-tuning reads the encoder; an --task=rtd export "
            "of this folder would serve that untrained head)")
    folder.save_discriminator(discriminator)
    vocab = (folder.keep_vocab_file(vocab_file) if vocab_file
             else folder.keep_vocab_beside(source_dir))
    report["resumable"] = has_generator  # (a ckpt-0 to continue pre-training from)
    if has_generator:
        folder.save_generator(generator)
        folder.write_pretraining_config(config, vocab, converted_from=source)
        if resume_checkpoint is not None:
            report["checkpoint"] = resume_checkpoint(folder.checkpoint_dir, pretrainer)
            report["resume_flags"] = resume_flags(config) + (
                "" if vocab else " --vocab_file=VOCAB")  # (it keeps none: see the notes)
    else:
        folder.record_vocab(vocab, do_lower_case)
    folder.write_report(report)
    return report


def _vocabulary_notes(vocab_file: str, source_dir: str) -> list[str]:
    """What a pre-trained checkpoint's conversion says of its vocabulary: none beside it
    and none given (the output has none: it had gone without a word, and was found
    missing at --to=hf), or a --vocab_file that is not the one beside it (it is used)."""
    from electra_tf.text.vocab import load_vocab

    beside = os.path.join(source_dir, core.SOURCE_VOCAB)
    if not vocab_file:
        return [] if os.path.isfile(beside) else [
            f"no {core.SOURCE_VOCAB} beside the checkpoint ({source_dir}) and no --vocab_file: "
            "the output holds no vocabulary; rerun with --vocab_file=the vocab.txt it was "
            "pre-trained with (fine-tuning, the export and --to=hf need it)"]
    from electra_tf.core.errors import VocabError

    try:
        same = not os.path.isfile(beside) or load_vocab(beside) == load_vocab(vocab_file)
    except VocabError:  # the one beside cannot be read (--vocab_file was checked)
        same = False
    if not same:
        return [f"--vocab_file {vocab_file} is not the {core.SOURCE_VOCAB} beside the "
                f"checkpoint ({beside}): the output holds --vocab_file's"]
    return []


def padded_table(config: PretrainingConfig, vocab_file: str) -> PretrainingConfig:
    """`config` after checking the vocabulary (`check_vocab_size`); where the embedding
    table has more rows than the vocabulary has tokens (a table padded to a round size,
    which the original allows), --vocab_size is the vocabulary's and the overrides hold the
    table's rows, as run_pretraining takes them (its --vocab_size must be the vocab file's
    size: the table's had been printed and recorded, and the continued run refused)."""
    tokens = check_vocab_size(vocab_file, config.vocab_size)
    if tokens is None or tokens == config.vocab_size:
        return config
    overrides = {**config.model_hparam_overrides, "vocab_size": config.vocab_size}
    return dataclasses.replace(config, vocab_size=tokens, model_hparam_overrides=overrides)


def check_vocab_size(vocab_file: str, vocab_size: int) -> int | None:
    """Refuses a vocab.txt beside the checkpoint that its embedding table cannot take;
    returns its token count (None: no such file).

    More tokens than rows: the folder would serve ids past the table (every
    request holding one would fail); special tokens only: nothing could be
    tokenized; a token with whitespace around it (load_vocab: the original's strips
    it, its model saw "the" at that id, where no text would match "the "). Fewer tokens than
    rows is legal (a padded table). Nothing is checked without a vocab.txt (none is
    copied then).

    Raises:
      ConversionError: naming the file (and both sizes).
    """
    if os.path.isdir(vocab_file):  # (it had been passed over silently)
        raise core.ConversionError(f"{vocab_file} is a folder, not a vocabulary file")
    if not os.path.isfile(vocab_file):
        return None
    from electra_tf.core.errors import VocabError
    from electra_tf.text.vocab import load_vocab

    try:
        tokens = load_vocab(vocab_file)
    except VocabError as e:
        raise core.ConversionError(str(e)) from None
    core.check_vocabulary(tokens, vocab_file, vocab_size, owner="checkpoint")
    return len(tokens)


def resume_flags(config: PretrainingConfig) -> str:
    """The run_pretraining flags whose models match an imported checkpoint."""
    flags = [f"--model_size={config.model_size}", f"--vocab_size={config.vocab_size}"]
    if config.objective != "bert_mlm":  # (BERT's one model: the flags would do nothing)
        flags += [f"--generator_hidden_size={config.generator_hidden_size:g}",
                  f"--generator_layers={config.generator_layers:g}"]
    if config.untied_generator_embeddings:
        flags.append("--untied_generator_embeddings")
    if not config.untied_generator:
        flags.append("--nountied_generator")
    if config.objective in ("electric", "bert_mlm"):
        flags.append(f"--objective={config.objective}")
    if not config.do_lower_case:
        flags.append("--nodo_lower_case")
    overrides = dict(config.model_hparam_overrides or {})
    try:  # only the overrides the models need (the sizes read from the shapes): one
        # equal to the preset's value still counts where another override moves what the
        # preset derives from it (a hidden_size sets the heads and the FFN width)
        def models(kept):
            again = dataclasses.replace(config, model_hparam_overrides=kept)
            return again.discriminator_config(), again.generator_config()

        want = models(overrides)
        for name in sorted(overrides):
            fewer = {k: v for k, v in overrides.items() if k != name}
            if models(fewer) == want:
                overrides = fewer
    except (ConfigError, ValueError):
        pass
    if overrides:  # a custom-size model: the printed command had been refused on resume
        flags.append(f"--model_hparam_overrides='{json.dumps(overrides, sort_keys=True)}'")
    try:  # fewer positions than the default length: the printed command had been refused
        positions = config.discriminator_config().max_position_embeddings
    except (ConfigError, ValueError):
        positions = None
    if positions is not None and positions < PretrainingConfig().max_seq_length:
        flags.append(f"--max_seq_length={positions}")
    return " ".join(flags)


# === The original's fine-tuned models ===
# run_finetuning.py builds one BertModel (under "electra/") and each task's head in
# tf.variable_scope("task_specific/" + task.name); which layers a head has there, and
# electra_tf's head layer each becomes, is the head class's (tasks/heads/: `Head.tf1_layers`,
# `tf1_unread`, `tf1_width`, `tf1_adjust`); its task names, those electra_tf spells
# otherwise mapped by tasks.registry.ORIGINAL_TASK_NAMES.


def original_max_seq_length(scope: str, n_tasks: int) -> int:
    """The max_seq_length the original fine-tuned task `scope` at by default
    (tasks.base.original_defaults: 512 for a single SQuAD or QA task, 256 for chunk,
    128 otherwise and for every task of a multi-task run)."""
    from electra_tf.tasks.base import original_defaults

    return original_defaults(scope, n_tasks)[0]


def is_finetuned(weights: dict) -> bool:
    """Whether a TF1 checkpoint is one of run_finetuning.py's (it holds task_specific/*)."""
    return any(n.startswith("task_specific/") for n in weights)


def _head_scope(weights: dict, task_name: str, tf1_task: str = "") -> tuple[str, list[str]]:
    """The original task scope to convert (task_specific/<scope>/) and the others.

    `tf1_task` names the scope; else `task_name` does (electra_tf's name or the
    original's); else the checkpoint's only one.

    Raises:
      ConversionError: no such scope, several and none chosen, or a `task_name` that
        is another task than the original's head (mrpc's head as qqp).
    """
    from electra_tf.tasks.registry import get_task, has_own_labels, task_names

    scopes = sorted({n.split("/")[1] for n in weights if n.startswith("task_specific/")})
    heads = f"task_specific/{', task_specific/'.join(scopes)}"
    if tf1_task:
        if tf1_task not in scopes:
            raise core.ConversionError(f"--tf1_task={tf1_task}: the checkpoint holds no "
                                       f"task_specific/{tf1_task} (it holds {heads})")
        chosen = [tf1_task]
    else:
        chosen = [s for s in scopes
                  if task_name and task_name in (s, ORIGINAL_TASK_NAMES.get(s, s))]
        if len(scopes) == 1 and not chosen:  # e.g. your own data's head, recorded as `tagging`
            chosen = scopes
    if len(chosen) != 1 and task_name:  # (it had been told to pass the --task_name it gave)
        raise core.ConversionError(
            f"--task_name={task_name}: the checkpoint holds no head of that task ({heads}); "
            "give one of theirs, or --tf1_task=NAME to read a head as --task_name's (your "
            "own data's as classification or tagging)")
    if len(chosen) != 1:
        raise core.ConversionError(
            f"the checkpoint holds the heads of {len(scopes)} tasks ({heads}); pass "
            "--task_name to choose one (--tf1_task=NAME where --task_name is not the "
            "original's task name: your own data's as classification or tagging)")
    scope = chosen[0]
    known = ORIGINAL_TASK_NAMES.get(scope, scope)
    if task_name and known in task_names() and task_name not in (scope, known):
        # Another task of the same head, without labels of its own (your data's, or a
        # span task's): a GLUE task's labels, or another head, would be the wrong model.
        head = get_task(known).head
        others = [n for n in task_names()
                  if n != known and not has_own_labels(n) and get_task(n).head == head]
        if task_name not in others:
            raise core.ConversionError(
                f"--task_name={task_name}: task_specific/{scope} is the original's {scope} "
                f"head (electra_tf's {known}, a {head} head); leave --task_name out, or "
                f"record it as another task of that head: {', '.join(others)}")
    return scope, [s for s in scopes if s != scope]


def head_arrays(weights: dict, scope: str, layers: dict) -> tuple[dict[str, np.ndarray],
                                                                  dict[str, str]]:
    """The TaskHead's arrays {"task_specific/<layer>/<kernel|bias>": array} from the original
    head under task_specific/<scope>/, and {source name: the array's name}.

    Args:
      layers: the head class's tf1_layers(config).
    """
    arrays, used = {}, {}
    for layer, sources in layers.items():
        for leaf in ("kernel", "bias"):
            names_ = [f"task_specific/{scope}/{s}/{leaf}" for s in sources]
            absent = [n for n in names_ if n not in weights]
            if absent:
                raise core.ConversionError(f"{absent[0]} is not in the checkpoint: not the "
                                           f"original's head of this task ({layer} reads it)")
            target = f"task_specific/{layer}/{leaf}"
            shapes = [np.shape(weights[n]) for n in names_]
            if len({s[:-1] for s in shapes}) > 1:  # read side by side: one input width
                raise core.ConversionError(
                    f"{names_[1]} has shape {shapes[1]} and {names_[0]} {shapes[0]}: not the "
                    f"original's head of this task ({layer} reads them side by side)")
            arrays[target] = np.concatenate([weights[n] for n in names_], axis=-1)
            used.update(dict.fromkeys(names_, target))
    return arrays, used


def original_tag_names(data_dir: str, scope: str) -> list[str]:
    """The tag order of the original's tagging head, from the task's CoNLL files.

    tagging_tasks.py's _get_label_mapping: the sorted tags of train.txt, dev.txt
    and test.txt (those there; the last column, -DOCSTART- lines skipped), each
    sentence's tags first made BIOES (tagging_utils.get_span_labels, get_tags)
    for a span task (the original's chunk), as they are. As the original's
    _get_labeled_sentences, a sentence counts when a blank line ends it: a
    file's last sentence without one after it is not read (nor trained on).

    Raises:
      ConversionError: no file, or no tag in them.
    """
    from electra_tf.tasks.tagging import to_bioes

    files = [os.path.join(data_dir, f"{split}.txt") for split in ("train", "dev", "test")]
    files = [f for f in files if os.path.isfile(f)]
    if not files:
        raise core.ConversionError(f"--data_dir={data_dir} holds no train.txt, dev.txt or "
                                   "test.txt (the original task's CoNLL files)")
    tags: set[str] = set()
    for path in files:
        sentence: list[str] = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                words = line.strip().split()
                if words and words[0] != "-DOCSTART-":
                    sentence.append(words[-1])
                elif not words and sentence:
                    tags.update(to_bioes(sentence) if scope == "chunk" else sentence)
                    sentence = []
    if not tags:
        raise core.ConversionError(f"--data_dir={data_dir}: no tags in {', '.join(files)}")
    return sorted(tags)


def _task_of(scope: str, task_name: str, weights: dict, label_names: str, do_lower_case: bool,
             max_seq_length: int, positions: int, data_dir: str = "", n_tasks: int = 1):
    """The FinetuningConfig and Task an original head becomes (checked against its shapes);
    `n_tasks`: the task heads the checkpoint holds."""
    from electra_tf.core.config import FinetuningConfig
    from electra_tf.core.errors import ConfigError
    from electra_tf.tasks.registry import task_from_config, task_names

    name = ORIGINAL_TASK_NAMES.get(task_name, task_name) if task_name else \
        ORIGINAL_TASK_NAMES.get(scope, scope)
    if name not in task_names():
        raise core.ConversionError(
            f"the checkpoint's head is task_specific/{scope}, which is no electra_tf task; pass "
            "--task_name (classification or tagging for your own data, or a task of "
            "electra_tf with this head)")
    prefix = f"task_specific/{scope}/"
    width = weights.get(prefix + "dense/kernel", np.zeros((0, 0))).shape[-1]
    options = {"task_name": name, "do_lower_case": do_lower_case}
    from electra_tf.tasks.registry import task_options

    if label_names and "label_names" not in task_options(name):
        raise core.ConversionError(
            f"--label_names: task {name} takes none (a GLUE task's labels are its own, in "
            "the original's order); leave it out, or pass --task_name=classification to "
            "record the head as your own data's")
    if data_dir and "tagging_scheme" not in task_options(name):
        raise core.ConversionError(f"--data_dir is for a tagging head's labels (its CoNLL "
                                   f"files); task {name} does not read it: leave it out")
    if "joint_prediction" in task_options(name):  # qa_tasks.py's joint_prediction
        options["joint_prediction"] = any(n.startswith(prefix + "qa_hidden/") for n in weights)
    # what the message below names as the labels' source (the label count had been
    # pinned on a --task_name the user never gave)
    labels_from = ("--label_names gives" if label_names else f"--task_name={name} has"
                   if task_name else f"task {name} has")
    if name == "classification" and width == 1 and not label_names:
        options["regression"] = True
    elif name in ("classification", "tagging", "ner", "chunking"):
        if not label_names and data_dir and name != "classification":
            labels_from = "--data_dir's tags give"
            from electra_tf.tasks.registry import format_label_names

            label_names = format_label_names(original_tag_names(data_dir, scope))
        if not label_names:
            raise core.ConversionError(
                f"task_specific/{scope} predicts {width} labels the checkpoint does not name: "
                "pass --label_names in the original's label order (its label_list; for tagging "
                "the sorted tags of the task's files, BIOES for chunk, which --data_dir "
                "reads)")
        options["label_names"] = label_names
        from electra_tf.tasks.registry import _label_names
        try:
            tags = _label_names(label_names) or ()
        except ConfigError as e:
            raise core.ConversionError(str(e)) from None
        if name in ("ner", "chunking") and any(t[:2] in ("E-", "S-") for t in tags):
            options["tagging_scheme"] = "BIOES"
    present = {n[len(prefix):].split("/")[0] for n in weights if n.startswith(prefix)}
    try:
        config = FinetuningConfig(**options)
        task = task_from_config(config)
        head_config, variant = task.head_class.tf1_variant(task.head_config(), present)
        if variant:  # e.g. SQuAD 2.0 without the answerability classifier: its null rule
            options.update(variant)
            config = FinetuningConfig(**options)
            task = task_from_config(config)
    except (ConfigError, TypeError) as e:
        raise core.ConversionError(f"--task_name={name}: {e}") from None
    except ValueError as e:  # tf1_variant: a variant of the head electra_tf has not
        raise core.ConversionError(f"task_specific/{scope}: {e}") from None
    length = max_seq_length or min(positions, original_max_seq_length(scope, n_tasks))
    if length > positions:
        raise core.ConversionError(f"--max_seq_length={length}: the model has {positions} "
                                   "positions (electra/embeddings/position_embeddings)")
    config = FinetuningConfig(**{**options, "max_seq_length": length})
    want = task.head_class.tf1_width(head_config, len(task.label_names))
    if width != want:
        labels = "1 output (a regression)" if task.regression else \
            f"{want} outputs" + (f" ({', '.join(task.label_names)})" if task.label_names else "")
        raise core.ConversionError(
            f"task_specific/{scope}/dense/kernel has {width} outputs, but {labels_from} "
            f"{labels}")
    return config, task, head_config


def import_finetuned(path: str, model_size: str, output: str, overrides: dict | None = None,
                     task_name: str = "", label_names: str = "", vocab_file: str = "",
                     do_lower_case: bool = True, max_seq_length: int = 0, data_dir: str = "",
                     weights: dict | None = None, skipped: list | None = None,
                     tf1_task: str = "") -> dict:
    """Converts a checkpoint of the original's run_finetuning.py into a fine-tuning folder.

    The folder (finetuning_config.json + finetuned.weights.h5, beside the
    discriminator's files) evaluates, fine-tunes further and exports like one
    run_finetuning wrote. The head: its class's tf1_layers. The task: `task_name`
    (electra_tf's or the original's name), else the original's scope name
    (ORIGINAL_TASK_NAMES). The labels: the GLUE task's own (the original's order),
    else `label_names`, else for a tagger the tags of the task's files in
    `data_dir`, ordered as the original orders them. SQuAD 1.1 and MRQA read
    no answerability logit, so the answerability classifier the original
    trains for them too is skipped (reported). A tagging head: electra_tf feeds segment ids 0 to a tagger
    where the original fed 1, so the imported token-type row 0 is the
    original's row 1 (the original's computation, exactly).

    Args:
      path: the checkpoint prefix (or its folder).
      model_size, overrides: as import_checkpoint.
      task_name, label_names: see above; `label_names` as run_finetuning's flag.
      tf1_task: the original's task (task_specific/<tf1_task>) to convert, where
        `task_name` does not name it (your own task in a multi-task checkpoint).
      data_dir: a tagging head without `label_names`: the task's CoNLL files, whose
        tags give the original's label order (`original_tag_names`).
      vocab_file: the vocabulary fine-tuned with, where no vocab.txt lies beside the
        checkpoint (the original keeps it in its data_dir).
      do_lower_case: the original's do_lower_case (True for the released models).
      max_seq_length: 0: the original's (512 for QA, 256 for tagging, else 128).

    Returns:
      the conversion report (also written as conversion_report.json).
    Raises:
      ConversionError: one line naming the variable, task or flag.
    """
    from electra_tf.core.config import FinetuningRun, model_size_of
    from electra_tf.modeling.models import build_discriminator
    from electra_tf.tasks.model import FinetuningModel

    if weights is None:
        weights, skipped = read_checkpoint(path)
    source = os.path.abspath(checkpoint_prefix(path))  # a folder: the one read
    scope, others = _head_scope(weights, task_name, tf1_task)
    encoder_weights = {n: v for n, v in weights.items() if not n.startswith("task_specific/")}
    config = infer_config(encoder_weights, model_size, overrides).discriminator_config()
    ft_config, task, head_config = _task_of(scope, task_name, weights, label_names,
                                            do_lower_case, max_seq_length,
                                            config.max_position_embeddings, data_dir,
                                            n_tasks=1 + len(others))
    source_dir = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    vocab = vocab_file or os.path.join(source_dir, core.SOURCE_VOCAB)
    if not os.path.isfile(vocab):
        raise core.ConversionError(
            f"{vocab_file or source_dir}: no vocabulary" + ("" if vocab_file else " (vocab.txt)")
            + "; pass --vocab_file, the vocab.txt the model was fine-tuned with")
    check_vocab_size(vocab, config.vocab_size)
    head = task.head_class
    try:
        layers = head.tf1_layers(head_config)
    except ValueError as e:
        raise core.ConversionError(f"--task_name={task.name}: {e}") from None
    arrays, used = head_arrays(weights, scope, layers)
    prefix = f"task_specific/{scope}/"
    unused = sorted(n for n in weights if n.startswith(prefix) and n not in used)
    unread = {f"{prefix}{s}/{leaf}" for layer in head.tf1_unread(head_config).values()
              for s in layer for leaf in ("kernel", "bias")}
    skipped = list(skipped or [])
    if unread and set(unused) <= unread:
        skipped += [f"{n} (the answerability classifier, which {task.name} never reads)"
                    for n in unused]
        unused = []
    if unused:
        raise core.ConversionError(
            f"{path}: {len(unused)} variable(s) of the head map to nothing in electra_tf, e.g. "
            f"{', '.join(unused[:5])} (a head variant electra_tf does not have: the "
            "original's answerable_uses_start_logits=False, or another task's layers)")
    skipped += [f"{n} (the head of task {n.split('/')[1]}, not converted)"
                for n in sorted(weights) if n.split("/")[0] == "task_specific"
                and n.split("/")[1] in others]
    converted = {**encoder_weights, **arrays}
    adjusted = head.tf1_adjust(converted)

    discriminator = build_discriminator(config)
    model = FinetuningModel(discriminator.encoder, task.head, max(1, len(task.label_names)),
                            config=head_config)
    model.build()
    targets = {**names.discriminator_variables(discriminator),
               **{f"task_specific/{w.path.split('/')[-2]}/{w.path.split('/')[-1]}": w
                  for w in model.head.weights}}
    report = {"source": source, "format": "tf1", "kind": task.head,
              "task": task.name, "tf1_task": scope}
    sources: dict[str, list[str]] = {}
    for name, target in used.items():
        sources.setdefault(target, []).append(name)
    report.update(core.assign(converted, targets, path, ("discriminator_predictions/",),
                              {t: " + ".join(n) for t, n in sources.items()}))
    report["mapping"] = {n: targets[n].path for n in report["assigned"]}
    report["head_mapping"] = {n: targets[t].path for n, t in used.items()}
    report["num_attention_heads"] = {"discriminator": config.num_attention_heads}
    report["notes"] = heads_notes(overrides, report["num_attention_heads"])
    report["skipped"], report["adjusted"] = skipped, adjusted
    folder = ConvertedFolder(output)
    vocab = folder.keep_vocab_file(vocab)
    folder.save_discriminator(discriminator)
    folder.record_vocab(vocab)
    run = FinetuningRun(model_dir=output, vocab_file=vocab,
                        init_checkpoint=source)
    folder.save_finetuned(
        model, task=task, config=ft_config, run=run, encoder=config,
        model_size=model_size_of(config), max_seq_length=ft_config.max_seq_length,
        head_config=head_config, converted_from=source)
    folder.write_report(report, kind=task.head)
    return report

