"""The fine-tuning loop: one task, the pre-trained discriminator, either backend.

Reads top to bottom like the pre-training loop (pretraining.py), and its
backends are the same (backends/tensorflow.py, backends/jax.py): a compiled
forward/backward, global-norm clipping of the summed gradient and the AdamW
update, with per-replica seeds. What differs from pre-training:
- data are in-memory features (base.Features), shuffled per epoch with a
  seed, so resuming skips the batches of the current epoch already done;
- layer-wise learning-rate decay (embeddings at depth 0, layer i at i + 1,
  the head at n + 2) and 10% linear warmup, as the original;
- dropout is fine-tuning's own (0.1 by default, as the original), whatever
  the checkpoint was pre-trained with (`with_dropout`);
- the head is the task's (`task.head_config`: its class in tasks/heads/ and
  its options, SQuAD's joint span head by default), and the joint head reads
  the gold start positions in training (its end logits are conditioned on them);
- after every epoch: predictions on each dev split, the task's metrics, the
  official prediction files and results.json; a checkpoint.
Every split the run will read (train, dev with do_eval, test with
do_predict) is read and featurized before the first step, so bad data stops
the run before it trains; so does a --vocab_file other than the
checkpoint's, or a sequence longer than its positions. The workers of a
multi-worker run compare their flags, labels and checkpoints before the model
is built, then their training examples and initial weights before the first
step (`_agree`): a worker that differs is refused on every worker. A loss that becomes
NaN or infinite stops the run before those weights are saved, and so does a
non-finite gradient norm (loop.check_finite: in a chunk's last step only the
norm shows it, its loss being computed before the update). Ctrl-C or SIGTERM lets the running chunk of steps finish
(loop.InterruptGate), saves a checkpoint, then stops with one line (a run of
several processes: all of them, at the same step, `_stop_agreement`); a second
Ctrl-C during an epoch's dev evaluation stops it at once, and the resumed run
does that evaluation first. The folder it writes is described in folders/finetuned.py.

`Finetuning` is what both backends share, as `Pretraining` is for
pre-training: the model, the data, the optimizer, prediction, evaluation and
the host loop. A backend (`TensorFlowFinetuning`, `JaxFinetuning`) adds where variables are created,
the train iterator and steps, one prediction batch, and its checkpoints.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shlex
import signal
import time

import keras
import numpy as np

from electra_tf.core import signals
from electra_tf.core.config import (
    MAX_STEPS,
    MODEL_SIZES,
    FinetuningConfig,
    FinetuningRun,
    model_size_of,
)
from electra_tf.core.errors import ConfigError, InputError
from electra_tf.core.fileio import FolderLock, check_output_folder, no_empty_folder_left
from electra_tf.folders.files import (
    CHECKPOINTS,
    FINAL_EVAL,
    FINETUNED_WEIGHTS,
    FINETUNING_CONFIG,
    PRETRAINING_CONFIG,
    RESULTS,
    has_checkpoints,
    holds_weights,
    latest_checkpoint_step,
    model_folder,
    remove_stale_temporaries,
    unreadable_record,
)
from electra_tf.folders.finetuned import (
    FinetunedFolder,
    final_results,
    finetuned_vocab,
    has_finetuning_config,
    is_finetuning_folder,
    read_finetuning_config,
    read_results,
    recorded_labels,
    recorded_total_steps,
    save_finetuned,
    write_finetuning_config,
    write_results,
)
from electra_tf.folders.pretraining import (
    PretrainingFolder,
    final_eval_of,
    final_eval_path,
    is_pretraining_folder,
    load_discriminator,
)
from electra_tf.folders.vocabulary import check_resumed_vocab, check_vocab_fits, checked_vocab
from electra_tf.tasks import base
from electra_tf.tasks.losses import EXAMPLE_WEIGHT
from electra_tf.tasks.model import FinetuningModel, output_layout
from electra_tf.tasks.registry import decoding_options, format_label_names, task_from_config
from electra_tf.training import reporting, summaries
from electra_tf.training.checkpoints import (
    OtherBackendCheckpoints,
    checkpoint_path,
    checkpoint_step,
    model_variables,
    read_model_arrays,
)
from electra_tf.training.loop import (
    Interrupted,
    InterruptGate,
    SlowChunkNote,
    check_finite,
    chunk_size,
    different_flags,
    different_settings,
    finite_weights,
    flag_digests,
    log,
    raised_flags,
    save_after_interrupt,
    set_precision,
    settings_digest,
    stop_point,
)
from electra_tf.training.optimization import build_optimizer
from electra_tf.training.trials import finite_number

INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")


def steps_in_epoch(windows: int, train_batch_size: int) -> int:
    """An epoch's steps: every window once, the last batch filled with rows of weight 0
    (the original's padding of its train file to a multiple of the batch)."""
    return -(-windows // train_batch_size)


def total_steps(steps_per_epoch: int, epochs: float) -> int:
    """A run's steps: the original's int(n // batch * epochs), so that a fractional
    epoch count rounds down."""
    return int(steps_per_epoch * epochs)


def split_batch(batch: dict) -> tuple[dict, dict]:
    """A train batch -> (model inputs, labels).

    The joint span head also reads the gold start positions (its end logits
    are conditioned on them), so they are in both.
    """
    inputs = {k: batch[k] for k in INPUT_KEYS}
    labels = {k: v for k, v in batch.items() if k not in INPUT_KEYS}
    if "start_positions" in batch:
        inputs["start_positions"] = batch["start_positions"]
    return inputs, labels


def unused_labels_warning(task, train_feats: base.Features) -> str | None:
    """One line where --label_names lists labels no train example has, else None.

    Such a label's logit is only ever pushed down: the classifier never predicts it,
    and a dev split of those labels scores 0 without a word (a misspelt name, or the
    train file of another task). Given labels only: learned ones all occur in train."""
    if not getattr(task, "labels_given", False) or getattr(task, "regression", False):
        return None
    labels = train_feats.labels
    if "label" in labels:
        seen = set(np.unique(labels["label"]).tolist())
    elif "tag_ids" in labels:
        seen = set(np.unique(labels["tag_ids"][labels["tag_weights"] > 0]).tolist())
    else:
        return None
    unused = [name for i, name in enumerate(task.label_names) if i not in seen]
    if not unused:
        return None
    return (f"warning: --label_names lists {len(unused)} label(s) that no example of the "
            f"train split has: {', '.join(unused)}; the model never learns to predict them "
            "(a misspelt label, or the train file of another task?)")


def pretraining_folder_of(init_checkpoint: str) -> str:
    """The pre-training folder whose weights `init_checkpoint` names, whichever way:
    MODEL_DIR (with or without a trailing /), MODEL_DIR/discriminator.weights.h5,
    MODEL_DIR/checkpoints, MODEL_DIR/checkpoints/ckpt-N or .../jax-ckpt-N[.npz]."""
    path = os.path.abspath(checkpoint_path(init_checkpoint))
    if checkpoint_step(path) is not None:
        return os.path.dirname(os.path.dirname(path))
    if os.path.isfile(path) or os.path.basename(path) == CHECKPOINTS:
        return os.path.dirname(path)
    return path


def collapse_warning(init_checkpoint: str) -> str | None:
    """One line where the final_eval.json of the pre-training folder `init_checkpoint`
    names (`pretraining_folder_of`: the folder, its weights file or one of its
    checkpoints) shows a collapsed discriminator (disc_token_cosine in reporting's
    collapsed range), else None.

    A folder without the file, or whose evaluation has no discriminator states
    (no metric), says nothing: this is advice, and the weights load either way."""
    folder = pretraining_folder_of(init_checkpoint)
    path = final_eval_path(folder)
    try:
        final = final_eval_of(folder)
        cosine = None if final is None else reporting.collapsed_cosine(final)
    except (InputError, OSError):  # unreadable: the weights, not this file, are loaded
        return None
    if cosine is None:
        return None
    where = f"its {FINAL_EVAL}"
    if folder != os.path.abspath(init_checkpoint).rstrip(os.sep):
        step = checkpoint_step(checkpoint_path(init_checkpoint))
        where = f"its pre-training folder's {path}"
        if step is not None and step != final.get("step"):
            where += f" (of step {final.get('step')}; this checkpoint is of step {step})"
    return (f"warning: --init_checkpoint={init_checkpoint}: {where} shows "
            f"disc_token_cosine {cosine:.3f} (>= {reporting.COLLAPSED_TOKEN_COSINE}): the "
            "discriminator's token states are nearly collinear, and fine-tuning from it may "
            "do worse than from random weights; compare with the from-scratch baseline "
            "(--from_scratch --model_size=... --vocab_file=..., docs/finetuning.md)")


def initial_discriminator(config: FinetuningConfig, run: FinetuningRun):
    """The discriminator fine-tuning starts from, and the vocab recorded with it.

    One of: a pre-training model_dir (its final discriminator.weights.h5), one
    checkpoint of it (MODEL_DIR/checkpoints/ckpt-N or jax-ckpt-N.npz, either
    backend's: the kept discriminator at step N, as the run would have written
    it had it ended there), a fine-tuning model_dir (its model's encoder; the
    head follows in `start_from_finetuned`), or, with from_scratch, a randomly initialized
    discriminator of config.model_size and the vocab file's size (the
    baseline of a pre-training comparison; the weights follow config.seed).

    Returns:
      (discriminator, vocab_file or "").
    Raises:
      InputError, ConfigError: one line naming the flag.
    """
    from electra_tf.core.config import MODEL_SIZES, EncoderConfig
    from electra_tf.modeling.models import build_discriminator

    run.check_start()
    if run.from_scratch:
        if not config.model_size or not run.vocab_file:
            raise ConfigError("--from_scratch needs --model_size (one of "
                              f"{', '.join(MODEL_SIZES)}) and --vocab_file")
        from electra_tf.text.vocab import load_vocab

        encoder = EncoderConfig(**MODEL_SIZES[config.model_size],
                                vocab_size=len(load_vocab(run.vocab_file)))
        return build_discriminator(encoder), run.vocab_file
    if is_finetuning_folder(run.init_checkpoint):
        folder = FinetunedFolder.open(run.init_checkpoint)
        return discriminator_of(folder.load_model(), folder.record)
    path = checkpoint_path(run.init_checkpoint)  # ckpt-N of a JAX run: its jax-ckpt-N.npz
    if checkpoint_step(path) is None:
        return load_discriminator(run.init_checkpoint, config.model_size, "--init_checkpoint")
    folder = PretrainingFolder.open(model_folder(path), "--init_checkpoint", discriminator=False)
    if folder.config is None:
        raise InputError(f"--init_checkpoint={run.init_checkpoint}: {folder.path} records no "
                         f"pre-training settings ({PRETRAINING_CONFIG}), which "
                         "give the checkpoint's model")
    from electra_tf.objectives.pretrainer import ElectraPretrainer

    pretrainer = ElectraPretrainer(folder.config)
    pretrainer.build_with_dummy_batch()
    arrays = read_model_arrays(path, pretrainer)
    for name, variable in model_variables(pretrainer).items():
        variable.assign(arrays[name])
    discriminator = pretrainer.kept_discriminator()
    size = model_size_of(discriminator.config)
    if config.model_size and size != config.model_size:
        raise ConfigError(f"{run.init_checkpoint} holds a {size}-sized discriminator, not "
                          f"--model_size={config.model_size}")
    return discriminator, folder.vocab()


def discriminator_of(finetuned, record):
    """A fine-tuned model's encoder as a discriminator, and its vocab (as
    `initial_discriminator` returns them)."""
    from electra_tf.modeling.models import build_discriminator

    discriminator = build_discriminator(record.encoder)
    copy_weights(finetuned.encoder, discriminator.encoder)
    return discriminator, finetuned_vocab(record)


def copy_weights(source, target) -> None:
    """Assigns `source`'s weights to `target`'s of the same paths (dropout seed states,
    which a rate of 0 does not create, left out)."""
    weights = {v.path: v for v in source.weights if "seed_generator" not in v.path}
    for variable in target.weights:
        if "seed_generator" not in variable.path:
            variable.assign(weights.pop(variable.path))
    if weights:
        raise RuntimeError(f"copy_weights: weights not copied: {sorted(weights)[:3]}")


def start_from_finetuned(model, finetuned, record, init_checkpoint: str, task,
                         head_config, evaluation: bool = False) -> str:
    """Starts a fine-tuning model's head from a fine-tuning folder's model (`finetuned`
    and its `record`, loaded once; the encoder came through `discriminator_of`);
    returns what was done, for the log.

    The folder's head must be the task's (the same head, described alike: a
    regression or not), with the same variant (`Head.continues`: the span or
    classifier head) and task options (`Task.continues`: a tagger's scheme).
    Its output columns are taken by label name in the task's order; a label, or
    a layer (SQuAD 2.0's answerability classifier), the folder lacks starts from
    its initial values; with `evaluation` (the run only evaluates this model)
    it is refused: it would be scored at random values. Labels and layers the task
    has no use for (SQuAD 2.0's classifier continued as SQuAD 1.1) are left out,
    and the line returned says so.

    Raises:
      ConfigError: another head kind or variant (naming the flag that continues it), or
        with `evaluation` a label or layer the folder lacks.
    """
    had_cls, want_cls = record.head_class, task.head_class
    had, want = had_cls.describe(record.head_config), want_cls.describe(head_config)
    if had_cls is not want_cls or had != want:
        raise ConfigError(f"--init_checkpoint={init_checkpoint} holds {record.task}'s {had}, "
                          f"but {task.name} has a {want}")
    differs = want_cls.continues(record.head_config, head_config) or task.continues(record)
    if differs:
        raise ConfigError(f"--init_checkpoint={init_checkpoint} holds {differs} to continue it")
    source, target = finetuned.head, model.head
    mine = {v.path.split("/", 1)[1]: v for v in target.weights
            if "seed_generator" not in v.path}
    theirs = {v.path.split("/", 1)[1]: v for v in source.weights}
    fresh = sorted(k for k in mine if k not in theirs)
    unused = sorted(k for k in theirs if k not in mine)  # e.g. SQuAD 2.0's classifier in 1.1
    old, new = list(record.label_names), list(task.label_names)
    for key, variable in mine.items():
        if key not in theirs:
            continue
        value = np.asarray(keras.ops.convert_to_numpy(theirs[key]))
        if key.startswith("task_specific/output/") and old and new and old != new:
            index = [old.index(name) if name in old else -1 for name in new]
            init = np.asarray(keras.ops.convert_to_numpy(variable))
            value = np.stack([value[..., i] if i >= 0 else init[..., j]
                              for j, i in enumerate(index)], axis=-1)
        variable.assign(value)
    missing = [name for name in new if old and name not in old]
    if evaluation and (missing or fresh):
        lacks = [f"label {n}" for n in missing] + sorted({k.rsplit("/", 1)[0] for k in fresh})
        raise ConfigError(
            f"--do_train=false evaluates --init_checkpoint={init_checkpoint}'s model as it is, "
            f"but {task.name} here has what it lacks ({', '.join(lacks)}), which would be "
            f"scored at random values; evaluate it as it was trained ({record.task}, its "
            "recorded options), or train those (--do_train)")
    notes = [f"its head from {init_checkpoint}"]
    if old and new and old != new:
        notes.append("output columns matched by label name")
    if missing or fresh:
        notes.append("starting from init: " + ", ".join(
            [f"label {n}" for n in missing] + sorted({k.rsplit("/", 1)[0] for k in fresh})))
    dropped = [name for name in old if new and name not in new]
    if dropped or unused:
        notes.append("left out (this task has no use for them): " + ", ".join(
            [f"label {n}" for n in dropped] + sorted({k.rsplit("/", 1)[0] for k in unused})))
    return "; ".join(notes)


def with_dropout(discriminator, hidden: float, attention: float):
    """The discriminator with fine-tuning's dropout rates, and the same weights.

    A checkpoint's config carries the dropout it was pre-trained with (none,
    for the demo's); the original fine-tunes with 0.1 whatever pre-training
    used (FinetuningConfig.hidden_dropout_prob, attention_probs_dropout_prob).
    The task head takes the encoder config's hidden rate.
    """
    from electra_tf.modeling.models import ElectraDiscriminator

    cfg = discriminator.config
    if (cfg.hidden_dropout_prob, cfg.attention_probs_dropout_prob) == (hidden, attention):
        return discriminator
    config = dataclasses.replace(cfg, hidden_dropout_prob=hidden,
                                 attention_probs_dropout_prob=attention)
    fresh = ElectraDiscriminator(config, head_kind=discriminator.head_kind)
    fresh.build()
    copy_weights(discriminator, fresh)  # by path: a rate of 0 made no dropout seed state
    return fresh


def untrained_positions_note(init_checkpoint: str, max_seq_length: int,
                             which: str) -> str | None:
    """One line where fine-tuning's window `max_seq_length` (said as `which`) is past
    the longest length the pre-training model `init_checkpoint` (its folder or one of
    its checkpoints) was pre-trained at: the position embeddings beyond it start as
    initialized. The original does the same (ELECTRA-Small, pre-trained at 128,
    fine-tunes SQuAD at 512), so this is a note; None where the length is not
    recorded or not exceeded."""
    folder = model_folder(init_checkpoint)
    if not os.path.isdir(folder) or not is_pretraining_folder(folder):
        return None
    try:
        trained = PretrainingFolder.open(folder, "--init_checkpoint", discriminator=False) \
            .trained_length_at(checkpoint_step(checkpoint_path(init_checkpoint)))
    except (InputError, ConfigError, OSError):  # the load reports its own problems
        return None
    if trained is None or max_seq_length <= trained:
        return None
    return (f"note: {which} is past the {trained} tokens --init_checkpoint was pre-trained "
            f"at: positions {trained + 1}-{max_seq_length} start from their initial "
            "embeddings and learn from this task alone (windows of at most "
            f"{trained} tokens do not use them)")


def check_pretraining_vocab(vocab_file: str, init_checkpoint: str) -> str:
    """Refuses a --vocab_file whose tokens are not those the checkpoint was trained with.

    Compared by fingerprint (folders.vocabulary.checked_vocab) with the vocabulary of
    the checkpoint's folder: a vocabulary of the same size but other tokens
    would feed every id to the wrong embedding without any error. Returns the
    vocabulary to use: `vocab_file`, else the folder's.

    Raises:
      ConfigError: naming both files.
    """
    return checked_vocab(model_folder(init_checkpoint), vocab_file)


def _casing(lower: bool) -> str:
    return "lower-cased" if lower else "cased"


def check_casing(do_lower_case: bool, init_checkpoint: str,
                 recorded: bool | None = None) -> None:
    """Refuses a --do_lower_case other than the casing the checkpoint's model was
    trained with, as its folder records it (`recorded`, else the pre-training or
    converted folder's `recorded_do_lower_case`; not recorded: not checked).

    Tokenized with the other casing, a cased model sees lower-cased words it
    mostly has as other pieces, or [UNK], and an uncased one sees capitals it
    never had: fine-tuning would run and do worse, without any error.

    Raises:
      ConfigError: naming the flag, the folder and the casing to pass.
    """
    if recorded is None:
        folder = model_folder(init_checkpoint)
        if not os.path.isdir(folder):
            return
        recorded = PretrainingFolder.open(folder, "--init_checkpoint",
                                          discriminator=False).recorded_do_lower_case
    if recorded is None or bool(recorded) == bool(do_lower_case):
        return
    raise ConfigError(
        f"--do_lower_case={str(do_lower_case).lower()}: --init_checkpoint={init_checkpoint} "
        f"records a model trained on {_casing(recorded)} text; fine-tune with "
        f"--do_lower_case={str(recorded).lower()}, the casing its vocabulary and weights "
        "were made for")


def check_resumed_record(model_dir: str) -> None:
    """Refuses, saying what to do, a finetuning_config.json beside checkpoints that cannot
    be read (emptied, cut short, edited out of shape): it had been a bare `malformed
    JSON` line.

    Raises:
      InputError: the record's own error, then what to do.
    """
    if not (has_checkpoints(model_dir) and has_finetuning_config(model_dir)):
        return
    try:
        read_finetuning_config(model_dir)
    except InputError as e:
        raise unreadable_record(e, FINETUNING_CONFIG, model_dir) from None


def check_resumed_task(task_name: str, model_dir: str) -> None:
    """Refuses to resume (or evaluate in place) a model_dir's checkpoints of another task:
    an rte folder given --task_name=sst2 had been taken as a finished sst2 run (its dev
    scores, predictions and a trial group's median written as sst2's).

    Raises:
      ConfigError: naming both tasks.
    """
    if not (has_checkpoints(model_dir) and has_finetuning_config(model_dir)):
        return
    recorded = recorded_labels(model_dir)[0]
    if recorded != task_name:
        raise ConfigError(f"--task_name={task_name}: {model_dir} holds checkpoints of a "
                          f"fine-tuning run of --task_name={recorded}; give that to resume or "
                          "evaluate them, or another --model_dir")


def check_resumed_casing(do_lower_case: bool, model_dir: str) -> None:
    """Refuses to resume a fine-tuning model_dir's checkpoints with another casing.

    Raises:
      ConfigError: naming the flag, the folder and the recorded casing.
    """
    if not (has_checkpoints(model_dir) and has_finetuning_config(model_dir)):
        return
    recorded = read_finetuning_config(model_dir).do_lower_case
    if recorded != bool(do_lower_case):
        raise ConfigError(
            f"--do_lower_case={str(do_lower_case).lower()}: {model_dir} holds checkpoints "
            f"trained on {_casing(recorded)} text; resume with --do_lower_case="
            f"{str(recorded).lower()}, or use another --model_dir")


# What a resumed run must share with the checkpoints' run: the schedule, the
# optimizer, the batches and what the model sees (FinetuningConfig's names).
RESUMED_SETTINGS = ("learning_rate", "layerwise_lr_decay", "weight_decay_rate",
                    "warmup_proportion", "num_train_epochs", "train_batch_size",
                    "max_seq_length", "adam_epsilon", "adam_bias_correction", "clip_norm",
                    "hidden_dropout_prob", "attention_probs_dropout_prob", "seed",
                    "double_unordered", "max_query_length", "doc_stride",
                    "answerable_classifier", "answerable_uses_start_logits",
                    "answerable_weight")


def _resolved_settings(config: FinetuningConfig, task, size: str) -> dict:
    """RESUMED_SETTINGS as the run uses them: a flag left at its default (0, -1) and
    the value that default stands for are the same setting."""
    size = size if size in MODEL_SIZES else "small"
    values = {name: getattr(config, name) for name in RESUMED_SETTINGS}
    if not task.answerable:  # no classifier (squad_v1, or none asked): no variant of it
        values["answerable_uses_start_logits"] = True
        values["answerable_weight"] = FinetuningConfig.answerable_weight
    values.update(learning_rate=config.resolved_learning_rate(size),
                  layerwise_lr_decay=config.resolved_layerwise_lr_decay(size),
                  max_seq_length=config.max_seq_length or task.default_max_seq_length,
                  num_train_epochs=config.num_train_epochs or task.default_epochs)
    return values


def check_resumed_settings(config: FinetuningConfig, model_dir: str, task, size: str) -> None:
    """Refuses to resume training a model_dir's checkpoints with other settings than its
    record's: they would continue another schedule (or report the results of the
    model trained before as this run's).

    Raises:
      ConfigError: one line naming each flag, its recorded value and the new one.
    """
    if not (has_checkpoints(model_dir) and has_finetuning_config(model_dir)):
        return
    try:
        recorded = FinetuningConfig.from_dict(read_finetuning_config(model_dir).finetuning)
    except (ConfigError, TypeError):
        return  # a record of another version: the restore checks what it can
    before = _resolved_settings(recorded, task, size)
    now = _resolved_settings(config, task, size)
    changed = [f"--{name}={now[name]} (trained with {before[name]})"
               for name in RESUMED_SETTINGS if now[name] != before[name]]
    if changed:
        raise ConfigError(f"{model_dir} holds checkpoints trained with other settings: "
                          f"{', '.join(changed)}; resume with the recorded ones, or use "
                          "another --model_dir")


def check_resumed_steps(model_dir: str, total: int, windows: int, steps_per_epoch: int) -> None:
    """Refuses to resume a model_dir's checkpoints on a schedule of another length than
    its record's: the train split changed since (another number of windows), or an
    earlier electra_tf trained them (it left out each epoch's last partial batch).

    Raises:
      ConfigError: one line with both step counts.
    """
    if not (has_checkpoints(model_dir) and has_finetuning_config(model_dir)):
        return
    try:
        recorded = recorded_total_steps(model_dir)
    except InputError:
        return  # a record of another version: the restore checks what it can
    if recorded is not None and recorded != total:
        raise ConfigError(
            f"{model_dir} holds checkpoints of a run of {recorded} steps; this one would run "
            f"{total} ({windows} train windows, {steps_per_epoch} steps an epoch): the train "
            "split changed since, or an earlier electra_tf trained them (it left out each "
            "epoch's last partial batch); resume with that run's data and version, or use "
            "another --model_dir")


def check_splits(task, run: FinetuningRun) -> None:
    """Refuses what would read no split or one file as two: --do_predict for a task
    without a test split (SQuAD, MRQA: it had predicted nothing, silently), and a
    --data_dir that is one file (SQuAD, MRQA, tagging take a file as every split) with
    both training and evaluation (the model had been scored on its training data).

    Raises:
      ConfigError: naming the flags.
    """
    if run.do_predict and not any(s.startswith("test") for s in task.splits()):
        raise ConfigError(f"--do_predict: {task.name} has no test split (its splits: "
                          f"{', '.join(task.splits())}); leave --do_predict out")
    if run.do_train and run.do_eval and os.path.isfile(run.data_dir):
        raise ConfigError(f"--data_dir {run.data_dir} is one file, which would be both the "
                          "train and the dev split; give the folder of the task's files, or "
                          "--do_eval=false (--do_train=false to evaluate on the file)")


def check_model_dir_and_init(run: FinetuningRun) -> None:
    """Refuses, before anything is written, a run that would replace a fine-tuned model
    or evaluate a head never trained: a --model_dir holding a fine-tuned model but no
    checkpoints (the run would rewrite its record at once, beside the old weights, then
    replace them), and --do_train=false where neither the --model_dir's checkpoints nor a
    fine-tuning --init_checkpoint hold a trained head.

    Raises:
      InputError: naming the folder and what to give instead.
    """
    resuming = has_checkpoints(run.model_dir)
    if not resuming and holds_weights(run.model_dir, FINETUNED_WEIGHTS):
        raise InputError(
            f"--model_dir {run.model_dir} holds a fine-tuned model ({FINETUNED_WEIGHTS}) and "
            "no checkpoints to resume: this run would replace it; give a new --model_dir "
            f"(with --init_checkpoint={run.model_dir} to start from, or evaluate, that model)")
    if run.do_train or resuming:
        return
    if run.from_scratch:
        raise InputError("--do_train=false with --from_scratch would evaluate random weights; "
                         "give --init_checkpoint a fine-tuned model to evaluate")
    if not is_finetuning_folder(run.init_checkpoint):
        raise InputError(
            f"--do_train=false evaluates a fine-tuned model, but --init_checkpoint "
            f"{run.init_checkpoint} holds no task head (a pre-training model: the head would be "
            f"random) and --model_dir {run.model_dir} no checkpoints; give --init_checkpoint a "
            "fine-tuning folder (run_finetuning's --model_dir, or convert's output), or the "
            "--model_dir of a fine-tuning run")


def evaluated_labels(task, run: FinetuningRun) -> tuple[list[str], dict, str]:
    """The labels an evaluation-only run (--do_train=false) of a task that learns them
    from train reads its model's outputs as: those the --model_dir's record holds,
    else those of an --init_checkpoint fine-tuning folder of the same task ([]: none
    recorded, so the train split gives them); the task options they go with (a
    BIOES tagger's tagging_scheme, which its tag names need); and the folder."""
    for folder in (run.model_dir, "" if run.from_scratch else run.init_checkpoint):
        if folder and has_finetuning_config(folder):
            record = read_finetuning_config(folder)
            if record.task == task.name and record.label_names:
                return list(record.label_names), task.label_options(record), folder
    return [], {}, ""


def check_recorded_labels(task, model_dir: str) -> None:
    """Refuses to resume (or evaluate) checkpoints trained with other label names.

    Labels learned from the train split change when its file does; resuming
    would then read every logit as another label without any error.

    Raises:
      ConfigError: naming both label lists.
    """
    recorded = recorded_labels(model_dir)
    if recorded is None:
        return
    name, names = recorded
    if name == task.name and names != list(task.label_names):
        new = [label for label in task.label_names if label not in names]
        if new:  # --label_names would not do (the data holding them is then refused)
            raise ConfigError(f"{model_dir} holds checkpoints trained with the labels "
                              f"{names}, but this run has {list(task.label_names)}, "
                              f"{new} of which they never learned; give another "
                              "--model_dir")
        raise ConfigError(f"{model_dir} holds checkpoints trained with the labels {names}, "
                          f"but this run has {list(task.label_names)}; give --label_names="
                          f"{shlex.quote(format_label_names(names))} or another --model_dir")


def trim_bucket(max_seq_length: int) -> int:
    """The step a compiled step's batches (XLA, JAX) are cut to multiples of: an eighth
    of max_seq_length (at least 8), so that it compiles for at most 8 lengths."""
    return max(8, -(-max_seq_length // 8))


def trim_batch(batch: dict, max_seq_length: int, step: int = 1) -> dict:
    """A batch of [B, max_seq_length] features cut to the positions its examples use.

    The kept length is one past the last position any example's input_mask marks,
    rounded up to a multiple of `step` (at most max_seq_length). Every
    [B, max_seq_length] feature (the ids, masks, per-token labels) is sliced to it;
    the others (labels, answer positions) are kept whole. The positions cut are
    padding every example's mask excludes: the encoder attends no padded key, and
    the heads read [CLS], mask the padded span logits, or weight the padded tags 0,
    so the loss and its gradient are those of the full batch (dropout masks aside,
    which are drawn for the shape). Runs inside tf.data.
    """
    import tensorflow as tf

    used = tf.reduce_any(tf.not_equal(batch["input_mask"], 0), axis=0)  # [max_seq_length]
    last = tf.maximum(1, tf.reduce_max(tf.where(used, tf.range(1, max_seq_length + 1), 0)))
    length = tf.minimum(max_seq_length, -(-last // step) * step)
    return {k: v[:, :length] if v.shape.rank == 2 and v.shape[1] == max_seq_length else v
            for k, v in batch.items()}


# Batches are cut only where that saves at least this share of the positions: a cut
# batch's length is unknown when the step is traced, and the dynamic shape cost an
# ELECTRA-Small step on CPU about 5% where every batch filled the window
# (benchmarks/finetuning_throughput.md).
MIN_TRIM_SAVING = 0.1


def used_lengths(input_mask: np.ndarray) -> np.ndarray:
    """Per row of `input_mask` [N, max_seq_length]: one past the last position it marks
    (1 for a row that marks none)."""
    max_seq_length = input_mask.shape[1]
    return np.where(input_mask.any(1), max_seq_length - np.argmax(input_mask[:, ::-1] != 0, 1), 1)


def mean_trimmed_length(input_mask: np.ndarray, batch_size: int, step: int = 1,
                        samples: int = 256, seed: int = 0) -> float:
    """The mean length trim_batch(..., step) gives batches of `batch_size` random rows of
    `input_mask` [N, max_seq_length] (`samples` batches, drawn without replacement)."""
    n, max_seq_length = input_mask.shape
    used = used_lengths(input_mask)
    rng = np.random.default_rng(seed)
    batch = min(batch_size, n)
    longest = [used[rng.choice(n, batch, replace=False)].max() for _ in range(samples)]
    return float(np.mean(np.minimum(max_seq_length, -(-np.asarray(longest) // step) * step)))


def prediction_batches(input_mask: np.ndarray, batch_size: int, step: int = 1,
                       min_length: int = 1, trim: bool = True) -> list[tuple[np.ndarray, int]]:
    """The prediction batches of the rows of `input_mask` [N, max_seq_length]: a list
    of (row indices, length the batch runs at).

    With `trim`, the rows go in order of their used length (used_lengths; stable), so
    that a batch holds examples of similar length, and each batch is cut to its
    longest row's, rounded up to a multiple of `step`, at least `min_length` and at
    most max_seq_length. Where that saves under MIN_TRIM_SAVING of the positions, or
    without `trim`, the rows keep their order and every batch runs at max_seq_length.
    """
    n, max_seq_length = input_mask.shape
    full = [(np.arange(start, min(start + batch_size, n)), max_seq_length)
            for start in range(0, n, batch_size)]
    if not trim or n == 0:
        return full
    used = used_lengths(input_mask)
    order = np.argsort(used, kind="stable")
    batches = []
    for start in range(0, n, batch_size):
        rows = order[start:start + batch_size]
        length = -(-int(used[rows].max()) // step) * step
        batches.append((rows, min(max_seq_length, max(length, min_length))))
    kept = sum(length * len(rows) for rows, length in batches)
    return batches if kept <= (1 - MIN_TRIM_SAVING) * n * max_seq_length else full


class RunSummaries:
    """A fine-tuning run's TensorBoard summaries in model_dir/train and model_dir/eval,
    each writer made at its first write (a rerun of a finished run makes none)."""

    def __init__(self, model_dir: str):
        self.model_dir = model_dir  # "": a process that writes none (not the chief)
        self.writers = {}

    def write(self, name: str, step: int, values: dict) -> None:
        if not self.model_dir:
            return
        if name not in self.writers:
            self.writers[name] = summaries.summary_writer(os.path.join(self.model_dir, name))
        summaries.write_scalars(self.writers[name], step, values)

    def scores(self, step: int, results: dict) -> None:
        """An evaluation's {split: {metric: value}} as eval/ tags split/metric (a score
        that is not a number, SQuAD 2.0's HasAns_* without an answerable question, left
        out)."""
        self.write("eval", step, {f"{split}/{name}": value
                                  for split, metrics in results.items()
                                  for name, value in metrics.items()
                                  if finite_number(value) is not None})


# What the workers of a multi-worker run compare (`Finetuning._agree`): each part's
# refusal, after "--strategy=multi_worker: the workers ".
_DIFFERENT = {
    "labels": "learned different labels from their training data (other files in "
              "--data_dir); give every worker the same files",
    "checkpoints": "see different checkpoints in --model_dir (a folder that is not one "
                   "shared folder); give every worker one shared --model_dir",
    "examples": "read different training examples (other files in --data_dir, or another "
                "--vocab_file); give every worker the same files",
    "weights": "start from different weights (other files in --init_checkpoint); give "
               "every worker the same model to start from",
    "evaluation": "read different dev or test examples (other files in --data_dir); give "
                  "every worker the same files",
}
# The run options a worker may have of its own: paths (each machine's copy), its wait, and
# what only it prints (as pre-training's _PROCESS_OWN).
_WORKER_OWN = frozenset({"model_dir", "data_dir", "init_checkpoint", "vocab_file", "tpu",
                         "worker_startup_timeout_s", "log_examples"})


def _arrays_digest(arrays) -> list[int]:
    """settings_digest's eight bytes of numpy arrays' shapes, types and bytes."""
    import hashlib

    digest = hashlib.blake2b(digest_size=32)
    for array in arrays:
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    return settings_digest(digest.hexdigest())


def _features_arrays(feats) -> list:
    """The arrays of training features (base.Features), in a fixed order."""
    if not len(feats):
        return []
    return ([feats.inputs[k] for k in sorted(feats.inputs)]
            + [feats.labels[k] for k in sorted(feats.labels)] + [feats.example_index])


def window_example_lines(split: str, examples: list, features: base.Features, tokenizer,
                  label_names=()) -> list[str]:
    """The first window of a split as the model gets it (the original's log_examples):
    its example, tokens, input_ids, input_mask and segment_ids up to the window's last
    real token, then each target (those of a position, cut the same; a class id with its
    name)."""
    if not len(features):
        return []
    example = examples[int(features.example_index[0])]
    where = (getattr(example, "source", None) or getattr(example, "qas_id", None)
             or (f"{example.path}:{example.line}" if hasattr(example, "path") else ""))
    mask = np.asarray(features.inputs["input_mask"][0])
    length = int(np.nonzero(mask)[0][-1]) + 1 if mask.any() else 0
    ids = [int(i) for i in np.asarray(features.inputs["input_ids"][0])[:length]]

    def numbers(values) -> str:
        return " ".join(str(v) for v in np.asarray(values).tolist())

    lines = [f"{split} example 1 of {len(examples)} ({where}), window 1 of {len(features)}, "
             f"{length} of {mask.shape[0]} positions (the padding left out):",
             "  tokens: " + " ".join(tokenizer.convert_ids_to_tokens(ids)),
             "  input_ids: " + numbers(ids)]
    for key in ("input_mask", "segment_ids"):
        lines.append(f"  {key}: " + numbers(np.asarray(features.inputs[key][0])[:length]))
    for key, values in sorted(features.labels.items()):
        value = np.asarray(values[0])
        if value.ndim:
            lines.append(f"  {key}: " + numbers(value[:length]))
        else:
            named = (f" ({label_names[int(value)]})" if key == "label" and label_names
                     and value.dtype.kind in "iu" and 0 <= int(value) < len(label_names)
                     else "")
            lines.append(f"  {key}: {value.tolist()}{named}")
    return lines


class Finetuning:
    """What both backends' fine-tuning loops share (see the module docstring).

    A subclass sets `chief` before this constructor runs, and provides
    `_scope()` (where variables are created), `train_iterator(epoch, skip)`,
    `train_steps(iterator, n)`, `_predict_batch(inputs)` and
    `make_checkpoints()` (checkpoints.TensorFlowCheckpoints or NpzCheckpoints), and
    sets `backend`.
    """

    chief = True
    multi_worker = False  # a run of several worker processes (the TF backend's)
    # The share of each batch this process holds, and whether on CPUs: what the memory
    # check reads (training/memory.py).
    local_share, on_cpu = 1.0, True
    backend = ""  # "tensorflow" or "jax"
    last_grad_norm: float | None = None  # the last train_steps' mean gradient norm

    @property
    def step(self) -> int:
        return int(keras.ops.convert_to_numpy(self.optimizer.iterations))

    def __init__(self, task, config: FinetuningConfig, run: FinetuningRun):
        self.task, self.config, self.run = task, config, run
        # the subfolders this run writes: training's saves and loss, evaluation's scores
        check_output_folder(run.model_dir, "--model_dir", inside=(
            ("checkpoints", "train") if run.do_train else ()) + (
            ("eval",) if run.do_eval else ()))
        if is_pretraining_folder(run.model_dir):
            raise InputError(f"--model_dir {run.model_dir} is a pre-training folder (it holds "
                             f"{PRETRAINING_CONFIG}): fine-tuning writes a folder of "
                             "its own; give a new --model_dir (that folder goes in "
                             "--init_checkpoint)")
        check_splits(task, run)
        check_model_dir_and_init(run)
        check_resumed_record(run.model_dir)
        check_resumed_task(task.name, run.model_dir)
        set_precision(run.mixed_precision, run.attention_implementation)
        head_config = task.head_config()  # the task's head and its options
        if task.head_class.learns_labels(head_config) and not task.label_names:
            # Own-data classes and tags: learned from train; they size the head. An
            # evaluation takes those its model was trained with, where recorded.
            recorded, options, folder = (([], {}, "") if run.do_train
                                         else evaluated_labels(task, run))
            if recorded:
                changed = {k: v for k, v in options.items() if getattr(config, k) != v}
                if changed:
                    log("finetune", "reading the model's labels as it was trained: " + " ".join(
                        f"--{k}={v}" for k, v in changed.items()))
                config = self.config = dataclasses.replace(
                    config, label_names=format_label_names(recorded), **options)
                task = self.task = task_from_config(config)
                # (a dev label outside them had been said to be outside --label_names)
                task.labels_from = f"the labels {folder} was trained with"
            else:
                task.read(run.data_dir, "train")
        check_recorded_labels(task, run.model_dir)
        if not run.do_train and not run.from_scratch and not has_checkpoints(run.model_dir) \
                and is_finetuning_folder(run.init_checkpoint):
            # An evaluation of a fine-tuning folder: its model as it was trained, not with
            # layers the task would add (SQuAD 2.0's classifier, random).
            record = read_finetuning_config(run.init_checkpoint)
            if record.head_class is task.head_class:
                head_config, changes = task.head_class.as_recorded(record, head_config, config)
                if changes:
                    config = self.config = dataclasses.replace(config, **changes)
                    try:
                        task = self.task = task_from_config(config)
                    except ValueError as e:  # the run's options beside the folder's model
                        raise ConfigError(
                            f"--do_train=false evaluates --init_checkpoint="
                            f"{run.init_checkpoint}'s model as it was trained ("
                            + " ".join(f"--{k}={v}" for k, v in changes.items())
                            + f"): {e}") from None
                    log("finetune", f"evaluating {run.init_checkpoint}'s model as it was "
                                    "trained: " + " ".join(f"--{k}={v}"
                                                           for k, v in changes.items()))
        # Before the model's variables: creating them is a collective (the chief's
        # initial values go to every worker), which other shapes would end in tracebacks.
        self._agree(self._start_digests())
        with self._scope():
            keras.utils.set_random_seed(config.seed)
            init = None  # a fine-tuning folder's model: its encoder, then its head
            if not run.from_scratch and is_finetuning_folder(run.init_checkpoint):
                folder = FinetunedFolder.open(run.init_checkpoint)
                init = folder.load_model(), folder.record
                discriminator, recorded_vocab = discriminator_of(*init)
                if not config.max_seq_length and (not run.do_train
                                                  or folder.record.task == task.name):
                    # An evaluation of a fine-tuned (or converted) model, or more training
                    # of it on its task: at the window it was trained with, not the task's
                    # default (which its positions may not even hold).
                    config = self.config = dataclasses.replace(
                        config, max_seq_length=folder.record.max_seq_length)
                    if run.do_train:
                        self._log(f"continuing {run.init_checkpoint}'s {task.name} model at "
                                  f"its max_seq_length {config.max_seq_length} "
                                  "(--max_seq_length to change it)")
            else:
                discriminator, recorded_vocab = initial_discriminator(config, run)
                if not run.from_scratch and collapse_warning(run.init_checkpoint):
                    self._log(collapse_warning(run.init_checkpoint))
            discriminator = with_dropout(discriminator, config.hidden_dropout_prob,
                                         config.attention_probs_dropout_prob)
            self.encoder_config = discriminator.config
            self.size = config.model_size or model_size_of(self.encoder_config)
            num_labels = max(1, len(task.label_names))
            # Recorded with the folder: the export rebuilds the model from the record.
            self.head_config = head_config
            if not run.from_scratch:
                # The head's initial weights (and the dropout's seeds) follow the seed
                # alone, not how the encoder was reached: a pre-training folder builds a
                # discriminator, one of its checkpoints a whole pre-training model, and
                # each had drawn other random numbers before the head (the same
                # discriminator fine-tuned from different heads). A random encoder
                # (--from_scratch) goes on drawing from its seed.
                keras.utils.set_random_seed(config.seed)
            self.model = FinetuningModel(discriminator.encoder, task.head, num_labels,
                                         config=head_config)
            self.model.build()
            if init is not None:
                log("finetune", start_from_finetuned(
                    self.model, *init, run.init_checkpoint, task, head_config,
                    evaluation=not run.do_train and not has_checkpoints(run.model_dir)))
        vocab_file = run.vocab_file or recorded_vocab
        if run.vocab_file and not run.from_scratch:
            check_pretraining_vocab(run.vocab_file, run.init_checkpoint)
        resuming = has_checkpoints(run.model_dir) and has_finetuning_config(run.model_dir)
        if not run.from_scratch and not resuming:  # a resumed run: the casing it recorded
            check_casing(config.do_lower_case, run.init_checkpoint,
                         init[1].do_lower_case if init is not None else None)
        check_resumed_casing(config.do_lower_case, run.model_dir)
        if run.do_train:  # an evaluation in place may take other training flags
            check_resumed_settings(config, run.model_dir, task, self.size)
        if not vocab_file:
            raise InputError("--vocab_file is required (none is recorded with the checkpoint)")
        check_vocab_fits(vocab_file, self.encoder_config.vocab_size)
        check_resumed_vocab(run.model_dir, vocab_file)
        # Imported here: backends/jax.py imports this module, and JAX pre-training
        # runs where TensorFlow (which the tokenizer needs) is not installed.
        from electra_tf.text.tokenizer import Tokenizer

        self.tokenizer = Tokenizer(vocab_file, do_lower_case=config.do_lower_case)
        self.max_seq_length = config.max_seq_length or task.default_max_seq_length
        positions = self.encoder_config.max_position_embeddings
        which = (f"--max_seq_length={self.max_seq_length}" if config.max_seq_length else
                 f"{task.name}'s default max_seq_length {self.max_seq_length}")
        if self.max_seq_length > positions:
            raise ConfigError(f"{which} exceeds the checkpoint's {positions} positions "
                              f"(max_position_embeddings); set --max_seq_length <= {positions}")
        refusal = task.segments_refusal(self.encoder_config.type_vocab_size)
        if refusal:
            raise ConfigError(f"--init_checkpoint={run.init_checkpoint}: {refusal}")
        if run.do_train and init is None and not run.from_scratch:
            note = untrained_positions_note(run.init_checkpoint, self.max_seq_length, which)
            if note:
                self._log(note)
        self.epochs = config.num_train_epochs or task.default_epochs
        self._variables = list(self.model.trainable_variables)
        self._features: dict[str, tuple[list, base.Features]] = {}

    def _scope(self):
        return contextlib.nullcontext()

    def _agree(self, parts: dict) -> None:
        """A multi-worker run: every worker's digest of each part (name -> a function
        giving eight bytes), compared in one collective; the first part that differs is
        refused on every worker (`different_settings`), before it had trained a model of
        mixed seeds, or left a worker waiting forever. One process: nothing to compare."""
        if not self.multi_worker:
            return
        owners, digests = [], []  # (part, flag or None) of each digest compared
        for name, part in parts.items():
            digest = part()
            if isinstance(digest, dict):  # the flags: each its own, to name those differing
                owners += [(name, flag) for flag in digest]
                digests += list(digest.values())
            else:
                owners.append((name, None))
                digests.append(digest)
        differ = [owners[i] for i in self._differing(digests)]
        if differ and differ[0][0] == "flags":
            raise different_flags("--strategy=multi_worker",
                                  [flag for part, flag in differ if part == "flags"],
                                  who="workers", each="worker")
        if differ:
            raise different_settings("--strategy=multi_worker",
                                     "the workers " + _DIFFERENT[differ[0][0]])

    def _start_digests(self) -> dict:
        """`_agree`'s parts before the model is built: the flags (but each worker's own
        paths; each flag's digest, to name those that differ), the labels learned from
        the train split, the latest checkpoint's step."""
        run = self.run
        return {
            "flags": lambda: flag_digests(
                {**self.config.to_dict(),
                 **{k: v for k, v in dataclasses.asdict(run).items()
                    if k not in _WORKER_OWN and not k.startswith("jax_")}}),
            "labels": lambda: settings_digest(list(self.task.label_names)),
            "checkpoints": lambda: settings_digest(latest_checkpoint_step(run.model_dir) or 0)}

    def _model_digests(self, train_feats) -> dict:
        """`_agree`'s parts before the first step: the training examples (the data and
        the vocabulary they were tokenized with), the model's weights as it starts
        (the --init_checkpoint's, before a checkpoint of --model_dir is restored) and
        the dev and test examples (each worker evaluates and predicts)."""
        splits = [s for s in self._splits_to_read() if s != "train"]
        return {"examples": lambda: _arrays_digest(_features_arrays(train_feats)),
                "weights": self._weights_digest,
                "evaluation": lambda: settings_digest([splits] + [
                    _arrays_digest(_features_arrays(self.features(s)[1])) for s in splits])}

    def _weights_digest(self) -> list[int]:
        """_arrays_digest of the model's weights as they stand."""
        return _arrays_digest(keras.ops.convert_to_numpy(w) for w in self.model.weights)

    def _differing(self, digests: list[list[int]]) -> list[int]:
        """The indexes of `digests` that differ between the workers (a backend's
        collective; loop.differing_digests)."""
        raise NotImplementedError(f"{type(self).__name__} runs one process")

    # === Data ===
    def features(self, split: str) -> tuple[list, base.Features]:
        """Examples and features of a split, read and tokenized once per run."""
        cache = self._features
        if split not in cache:
            examples = self.task.read(self.run.data_dir, split)
            if not examples:
                raise InputError(f"the {split} split of {self.task.name} is empty")
            cache[split] = (examples, self.task.featurize(examples, self.tokenizer,
                                                          self.max_seq_length))
            if self.run.log_examples and self.chief:
                for line in window_example_lines(split, *cache[split], self.tokenizer,
                                          self.task.label_names):
                    self._log(line)
        return cache[split]

    def train_dataset(self, epoch: int, skip: int = 0):
        """The train split's global batches of `epoch` (seeded shuffle), after `skip`: a
        tf.data.Dataset of steps_per_epoch batches.

        Every row carries labels[EXAMPLE_WEIGHT] (tasks/losses.py): 1, and 0 on the
        rows of zeros that fill the epoch's last batch to train_batch_size, as the
        original pads its train file to a multiple of the batch with rows its loss
        leaves out. Every window is thus trained on once an epoch."""
        import tensorflow as tf

        feats = self.features("train")[1]
        n = len(feats)
        tensors = {**feats.inputs, **feats.labels, EXAMPLE_WEIGHT: np.ones([n], np.float32)}
        ds = tf.data.Dataset.from_tensor_slices(tensors)
        ds = ds.shuffle(n, seed=self.config.seed + epoch, reshuffle_each_iteration=False)
        fill = -n % self.config.train_batch_size
        if fill:
            ds = ds.concatenate(tf.data.Dataset.from_tensor_slices(
                {k: np.zeros((fill, *np.shape(v)[1:]), np.asarray(v).dtype)
                 for k, v in tensors.items()}))
        ds = ds.batch(self.config.train_batch_size, drop_remainder=True).skip(skip)
        if self.trims_batches:
            from electra_tf.data.pipeline import plain

            ds = ds.map(plain(lambda batch: trim_batch(batch, self.max_seq_length,
                                                       self.trim_step)))
        return ds

    @property
    def trim_step(self) -> int:
        """What trim_batch rounds a cut batch's length up to: 1 (the longest example
        itself) where the step is not compiled (TensorFlow without --jit_compile: a new
        length costs nothing), trim_bucket's eighth of max_seq_length where it is (XLA,
        JAX: each length compiles once)."""
        if self.backend == "tensorflow" and not self.run.jit_compile:
            return 1
        return trim_bucket(self.max_seq_length)

    @functools.cached_property
    def trims_batches(self) -> bool:
        """Whether training cuts its batches (trim_batch): --trim_batches, where that
        saves at least MIN_TRIM_SAVING of the positions on the train split (decided once)."""
        if not self.run.trim_batches:
            return False
        mask = self.features("train")[1].inputs["input_mask"]
        mean = mean_trimmed_length(mask, self.config.train_batch_size, self.trim_step)
        trim = mean <= (1 - MIN_TRIM_SAVING) * self.max_seq_length
        self._log(f"training batches {'cut' if trim else 'not cut'} to their longest example: "
                  f"{mean:.0f} of {self.max_seq_length} positions on average"
                  + ("" if trim else f" (cut where that saves {MIN_TRIM_SAVING:.0%})"))
        return trim

    # === The optimizer ===
    def build_optimizer(self, total_steps: int):
        """AdamW for `total_steps` with the run's learning rate, warmup and layer-wise decay."""
        cfg = self.config
        size = self.size if self.size != "custom" else "small"
        decay = cfg.resolved_layerwise_lr_decay(size)
        with self._scope():
            self.optimizer = build_optimizer(
                self._variables, cfg.resolved_learning_rate(size), total_steps,
                cfg.warmup_proportion * total_steps, weight_decay_rate=cfg.weight_decay_rate,
                adam_epsilon=cfg.adam_epsilon, adam_bias_correction=cfg.adam_bias_correction,
                layerwise_lr_decay=decay,
                n_layers=self.encoder_config.num_hidden_layers if decay else None)
        return self.optimizer

    # === Prediction and evaluation ===
    def predict(self, feats: base.Features) -> dict[str, np.ndarray]:
        """Model outputs for every row, in row order, batch by batch (prediction_batches:
        with --trim_batches, rows of similar length together, each batch cut to its
        longest; the last batch padded to eval_batch_size). Outputs with a position axis
        come back at max_seq_length, past a batch's length filled as the serving export
        fills them (the head's model_fills; the head ignores those positions)."""
        b, L = self.config.eval_batch_size, self.max_seq_length
        batches = prediction_batches(feats.inputs["input_mask"], b, self.trim_step,
                                     self.model.head.min_positions(), self.run.trim_batches)
        outputs: dict[str, list] = {}
        for rows, length in batches:
            stop_point()  # a second Ctrl-C or SIGTERM stops here (loop.InterruptGate)
            size = len(rows)
            if size < b:  # one shape for the compiled function
                rows = np.concatenate([rows, np.repeat(rows[-1:], b - size)])
            chunk = {k: v[rows, :length] if v.ndim == 2 and v.shape[1] == L else v[rows]
                     for k, v in feats.inputs.items()}
            for k, v in self._predict_batch(chunk).items():
                v = np.asarray(v)[:size]
                if length < L and k in self._positional_outputs:
                    pad = [(0, 0)] * v.ndim
                    pad[1] = (0, L - length)
                    v = np.pad(v, pad, constant_values=self.model.head.model_fills.get(k, 0))
                outputs.setdefault(k, []).append(v)
        order = np.concatenate([rows for rows, _ in batches]) if batches else np.zeros(0, int)
        inverse = np.argsort(order, kind="stable")
        return {k: np.concatenate(v)[inverse] for k, v in outputs.items()}

    @functools.cached_property
    def _positional_outputs(self) -> frozenset:
        """The names of the model's outputs with a position axis (axis 1)."""
        return frozenset(k for k, (_, _, positional) in output_layout(self.model).items()
                         if positional)

    def evaluate(self, split: str, write_to: str | None = None) -> dict[str, float]:
        examples, feats = self.features(split)
        outputs = self.predict(feats)
        predictions = self.task.predictions(outputs, examples, feats)
        if write_to and self.chief:
            self._write_predictions(predictions, outputs, examples, feats, write_to)
        return self.task.metrics(predictions, examples)

    def _write_predictions(self, predictions, outputs, examples, feats, path: str) -> None:
        """The task's predictions file, and its scores beside it where the task gives
        them (`tasks.base.scores_file`: a sequence head's logits)."""
        self.task.write_predictions(predictions, examples, path)
        scores = self.task.scores(predictions, outputs, examples, feats)
        if scores is not None:
            base.write_scores(base.scores_file(path), scores)

    def _dev_splits(self):
        return [s for s in self.task.splits() if s.startswith("dev")]

    def _splits_to_read(self) -> list[str]:
        """Every split this run reads: train (do_train), dev (do_eval), test (do_predict);
        an optional one (MNLI's diagnostic set) only where its file is there."""
        splits = self.task.splits()
        return ["train"] * self.run.do_train + [
            s for s in splits if ((self.run.do_eval and s.startswith("dev"))
                                  or (self.run.do_predict and s.startswith("test")))
            and self.task.optional_split(self.run.data_dir, s) is None]

    def _test_splits(self) -> list[str]:
        """The test splits --do_predict predicts (those there: `_splits_to_read`)."""
        return [s for s in self._splits_to_read() if s.startswith("test")]

    # === The host loop ===
    def _log(self, message):
        if self.chief:
            log("finetune", message)

    def train(self, stop_at_step: int | None = None) -> dict:
        """Trains for the configured epochs (resuming if possible); returns results.

        Args:
          stop_at_step: leave at this step with a checkpoint, as a preempted job
            would (the schedule still targets the full run).
        """
        cfg, run = self.config, self.run
        for split in self._splits_to_read():  # bad data stops the run before it trains
            self.features(split)
        if run.do_predict:
            for split in self.task.splits():
                left_out = self.task.optional_split(run.data_dir, split)
                if left_out:
                    self._log(left_out)
        train_feats, steps_per_epoch = [], 0  # --do_train=false: the train split is not read
        if run.do_train:
            _, train_feats = self.features("train")
            if unused_labels_warning(self.task, train_feats):
                self._log(unused_labels_warning(self.task, train_feats))
            steps_per_epoch = steps_in_epoch(len(train_feats), cfg.train_batch_size)
            steps = total_steps(steps_per_epoch, self.epochs)
            if steps > MAX_STEPS:  # an endless run, its learning rate ~0 in the warm-up
                raise ConfigError(f"--num_train_epochs={self.epochs:g}: {steps_per_epoch} "
                                  f"steps/epoch x {self.epochs:g} epochs is past 2**62 steps")
            if steps == 0:  # it had trained nothing, evaluated nothing, and said `done: {}`
                raise ConfigError(
                    f"--num_train_epochs={self.epochs:g} of {steps_per_epoch} steps/epoch "
                    f"({len(train_feats)} train windows, batches of {cfg.train_batch_size}) "
                    f"rounds down to 0 steps, as the original rounds it: give at least "
                    f"{1 / steps_per_epoch:.3g} epoch{'' if steps_per_epoch == 1 else 's'} "
                    "(or --do_train=false to evaluate)")
        # A run refused before it wrote anything (the workers' comparison) leaves no
        # empty --model_dir behind. The chief makes the folder (a worker's scratch
        # checkpoints make theirs as they save): a worker that made a shared folder
        # first had left the chief, which then found it there, not removing it.
        with no_empty_folder_left(run.model_dir):
            if self.chief:
                os.makedirs(run.model_dir, exist_ok=True)
            # One run per model_dir (the chief writes it): a second is refused by name.
            with FolderLock(run.model_dir, "--model_dir") if self.chief \
                    else contextlib.nullcontext():
                return self._train(stop_at_step, train_feats, steps_per_epoch)

    def _train(self, stop_at_step, train_feats, steps_per_epoch) -> dict:
        cfg, run = self.config, self.run
        # The model a worker would train, before the first step (its checkpoints were
        # compared before the model was built).
        self._agree(self._model_digests(train_feats))
        total = total_steps(steps_per_epoch, self.epochs)  # 0: evaluation only
        if run.do_train:
            check_resumed_steps(run.model_dir, total, len(train_feats), steps_per_epoch)
        size = self.size if self.size != "custom" else "small"
        decay = cfg.resolved_layerwise_lr_decay(size)
        self.build_optimizer(max(total, 1))  # evaluation only: a checkpoint's slots restore
        # a worker's scratch checkpoints go in the folder, which the chief made before
        # the comparison above (on a file system of the worker's own, it makes it)
        os.makedirs(self.run.model_dir, exist_ok=True)
        checkpoints = self.make_checkpoints()
        try:
            restored = checkpoints.restore()
        except OtherBackendCheckpoints as e:
            if run.do_train or not holds_weights(run.model_dir, FINETUNED_WEIGHTS):
                raise
            raise InputError(f"{e} (its {FINETUNED_WEIGHTS} evaluates on either backend: "
                             f"--init_checkpoint={run.model_dir} with another "
                             "--model_dir)") from None
        if restored:  # the same step in two folders that are not one: other weights
            self._agree({"checkpoints": self._weights_digest})
            self._log(f"resumed from {restored}" if run.do_train else
                      f"evaluating {restored}")
        if self.chief:
            for name in remove_stale_temporaries(run.model_dir):
                self._log(f"removed {name}, left by a write that did not finish")
        # An evaluation keeps the record of a model_dir that training wrote, and so does
        # a rerun of a finished run (it trains nothing: its run options had replaced
        # the ones the weights were trained with).
        recorded = has_finetuning_config(run.model_dir)
        ran = run
        if self.chief and recorded and restored and run.do_train and self.step < total:
            before = read_finetuning_config(run.model_dir)
            self._note_other_precision(before.run)
            self._note_other_decoding(before.finetuning)
            ran = self._started_from(before.run)
        if self.chief and (not recorded or run.do_train and self.step < total):
            # What ran: JAX compiles every step whatever --jit_compile said.
            ran = dataclasses.replace(ran, jit_compile=True) if self.backend == "jax" else ran
            write_finetuning_config(
                run.model_dir, task=self.task, config=cfg, run=ran, backend=self.backend,
                encoder=self.encoder_config,
                model_size=self.size, max_seq_length=self.max_seq_length, epochs=self.epochs,
                head_config=self.head_config, total_steps=total, layerwise_lr_decay=decay,
                learning_rate=cfg.resolved_learning_rate(size),  # (0 in the flags: by size)
                vocab_file=self.tokenizer.vocab_file,
                initialized_from="scratch" if ran.from_scratch else ran.init_checkpoint)
        results = read_results(run.model_dir)
        if run.do_train:
            self._log(f"{self.task.name}: {len(train_feats)} train windows, {steps_per_epoch} "
                      f"steps/epoch x {self.epochs} epochs = {total} steps, lr "
                      f"{cfg.resolved_learning_rate(size):.1e}, layer-wise decay {decay}")
            windows = len(train_feats)
            if cfg.train_batch_size > windows:  # (a batch of 10**6 had been killed: 137)
                self._log(f"note: --train_batch_size={cfg.train_batch_size:,} is more than "
                          f"the {windows:,} train windows: each step takes them all and "
                          f"{cfg.train_batch_size - windows:,} rows of zeros, which the step "
                          "computes and its loss leaves out; a batch near the window count "
                          "trains on the same rows at less cost")
            if self.on_cpu:
                from electra_tf.training import memory

                length = self.max_seq_length
                if self.trims_batches:  # no batch is longer than its longest window
                    longest = int(used_lengths(train_feats.inputs["input_mask"]).max())
                    length = min(length, -(-longest // self.trim_step) * self.trim_step)
                line = memory.finetuning_warning(
                    self.encoder_config, cfg.train_batch_size, self.local_share,
                    length, memory.available_bytes())
                if line:
                    self._log(f"warning: {line}")
        else:
            self._log(f"{self.task.name}: evaluation only (--do_train=false; the train split "
                      "is not read)")
        # An evaluation-only run has nothing to save: a signal stops it between batches
        # (it had let the whole evaluation and prediction run on, and a second one had
        # saved the loaded weights as ckpt-0, which later runs then resumed from)
        gate = InterruptGate(self._stop_agreement(), prompt=not self.run.do_train)
        finished = None
        try:
            with gate:
                finished = self._train_loop(checkpoints, results, steps_per_epoch, total,
                                            stop_at_step, gate)
                return finished
        except KeyboardInterrupt:
            if finished is not None:  # (had been "interrupted at step N ... rerun to resume",
                # exit 143, for a run whose every file was written: a scheduler retried it)
                said = signals.name(gate.signum or signal.SIGINT)
                self._log(f"{said} after the run finished: every file is written")
                return finished
            if not self.run.do_train:
                raise Interrupted(self.step, saved=False, signum=gate.signum,
                                  left_peers=not gate.safe_to_save,
                                  message="interrupted during an evaluation-only run "
                                          "(--do_train=false): nothing was saved; a rerun "
                                          "evaluates again") from None
            # Weights a diverging step left NaN are never saved (a second signal stops
            # before the chunk's check).
            finite = not gate.safe_to_save or finite_weights(self.model.weights)
            saved, why = (save_after_interrupt(lambda: checkpoints.save() is not None)
                          if gate.safe_to_save and finite else (False, ""))
            raise Interrupted(self.step, saved=saved, signum=gate.signum,
                              left_peers=not gate.safe_to_save,
                              why=why if finite else " (the weights had become NaN or "
                                                     "infinite: the run was diverging)") from None

    def _stop_agreement(self):
        """On a run of several processes, the collective by which they agree to stop
        (loop.InterruptGate's `agree`); None for one process."""
        return None

    def _note_other_precision(self, recorded_run: dict) -> None:
        """Says so when the checkpoints resumed were trained at another
        --mixed_precision (allowed: the variables are float32 either way), or with another
        --strategy or --num_devices; `recorded_run`: the run options the folder's record
        holds."""
        before = recorded_run.get("mixed_precision")
        if before and before != self.run.mixed_precision:
            self._log(f"note: {self.run.model_dir}'s checkpoints were trained with "
                      f"--mixed_precision={before}; this run continues them with "
                      f"{self.run.mixed_precision} ({FINETUNING_CONFIG} now records it)")
        # and XLA on TensorFlow, as pre-training's note and a trial group's say (it had
        # been recorded anew without a word)
        jit = recorded_run.get("jit_compile")
        if isinstance(jit, bool) and jit != self.run.jit_compile and self.backend == "tensorflow":
            self._log(f"note: {self.run.model_dir}'s checkpoints were trained with "
                      f"--jit_compile={str(jit).lower()}; this run continues them with "
                      f"--jit_compile={str(self.run.jit_compile).lower()} (compiled steps "
                      f"draw other dropout masks; {FINETUNING_CONFIG} now records it)")
        # Other devices (allowed: the global batch and the schedule are the same; the
        # replicas' dropout masks differ from here on)
        devices = [k for k in ("strategy", "num_devices")
                   if k in recorded_run and recorded_run[k] != getattr(self.run, k)]
        if devices:
            self._log(f"note: {self.run.model_dir}'s checkpoints were trained with "
                      + " ".join(f"--{k}={recorded_run[k]}" for k in devices)
                      + "; this run continues them with "
                      + " ".join(f"--{k}={getattr(self.run, k)}" for k in devices)
                      + f" (the same global batches; {FINETUNING_CONFIG} now records it)")

    def _note_other_decoding(self, recorded: dict) -> None:
        """Says so when a resumed run decodes its predictions otherwise than the record's
        (`recorded`: its FinetuningConfig fields): allowed (the training is the same),
        but the epochs it scores are scored unlike those results.json already holds
        (none: nothing to say)."""
        changed = [(name, recorded[name], getattr(self.config, name))
                   for name in decoding_options(self.config)
                   if name in recorded and recorded[name] != getattr(self.config, name)]
        if changed and final_results(read_results(self.run.model_dir)):  # (scores to differ)
            self._log(f"note: {self.run.model_dir}'s earlier epochs were scored with "
                      + " ".join(f"--{name}={before}" for name, before, _ in changed)
                      + "; this run scores the next with "
                      + " ".join(f"--{name}={now}" for name, _, now in changed)
                      + f" ({RESULTS} keeps the earlier scores; {FINETUNING_CONFIG} now "
                        "records these, which an export serves)")

    def _started_from(self, recorded_run: dict):
        """The run options to record on resuming: this run's, with what the resumed
        checkpoints (`recorded_run`: the record's run options) started from (they, not
        --init_checkpoint, hold the weights now), and a note where this run names
        another start."""
        run = self.run
        init, scratch = recorded_run.get("init_checkpoint"), recorded_run.get("from_scratch")
        if not isinstance(init, str) or not isinstance(scratch, bool):
            return run  # a record without them: this run's stand
        if (init, scratch) != (run.init_checkpoint, run.from_scratch):
            started = "scratch" if scratch else init
            given = "--from_scratch" if run.from_scratch else f"--init_checkpoint={run.init_checkpoint}"
            self._log(f"note: {run.model_dir}'s checkpoints started from {started}; this run "
                      f"resumes them, so {given} is not what its weights come from "
                      f"({FINETUNING_CONFIG} keeps {started})")
        return dataclasses.replace(run, init_checkpoint=init, from_scratch=scratch)

    def _train_loop(self, checkpoints, results, steps_per_epoch, total, stop_at_step, gate):
        cfg, run = self.config, self.run
        step = self.step
        end = min(total, stop_at_step or total)
        learning_rate = cfg.resolved_learning_rate(self.size if self.size != "custom" else "small")
        # TensorBoard, as the original's Estimator: the training loss (model_dir/train) and
        # the dev scores (model_dir/eval, tags split/metric)
        self.summaries = RunSummaries(run.model_dir if self.chief else "")
        if run.do_train and run.do_eval:
            self._evaluate_missed_epoch(results, step, steps_per_epoch, total)
        if run.do_train and step < end and results.pop("eval", None) is not None:
            self._save_results(results)  # an evaluation in place of an earlier checkpoint
        slow_chunks = SlowChunkNote(self._log, run.log_every_steps, cfg.save_checkpoints_steps,
                                    steps_per_epoch)
        # the task's loss weights, which can make a run diverge as a high rate does
        # (--answerable_weight=1e38 had been blamed on the learning rate alone)
        raised_weights = [(name, value, getattr(FinetuningConfig, name))
                          for name, value in self.task.loss_options.items()
                          if name in FinetuningConfig.__dataclass_fields__]
        while run.do_train and step < end:
            epoch, done = divmod(step, steps_per_epoch)
            n = min(steps_per_epoch - done, end - step)
            iterator = self.train_iterator(epoch, done)
            t0 = time.monotonic()
            # Chunks that end at a progress line, a checkpoint or the epoch's end; a
            # Ctrl-C waits at most one chunk, and train() saves where it stopped.
            while n > 0:
                gate.check()  # a Ctrl-C stops here, between chunks (InterruptGate)
                k = chunk_size(step, step + n, cfg.save_checkpoints_steps, run.log_every_steps)
                t_chunk = time.monotonic()
                loss = self.train_steps(iterator, k)
                slow_chunks.chunk(k, time.monotonic() - t_chunk)
                saving = k == n or cfg.save_checkpoints_steps > 0 \
                    and (step + k) % cfg.save_checkpoints_steps == 0
                check_finite(float(loss), step + 1, step + k, checkpoints.latest,
                             f"lower --learning_rate (it was {learning_rate:.1e})"
                             + raised_flags([("weight_decay_rate", cfg.weight_decay_rate,
                                              FinetuningConfig.weight_decay_rate)]
                                            + raised_weights),
                             grad_norm=self.last_grad_norm,
                             weights_finite=finite_weights(self.model.weights) if saving
                             else None)
                stop_point()  # a second signal during the chunk: stop before the save
                step += k
                n -= k
                if saving:
                    checkpoints.save()
                rate = k * cfg.train_batch_size / (time.monotonic() - t0)
                self._log(f"epoch {epoch + 1} step {step}/{total} loss {loss:.4f} "
                          f"({rate:.0f} ex/s)")
                self.summaries.write("train", step, {"loss": float(loss),
                                                     "examples_per_second": rate})
                t0 = time.monotonic()
            if run.do_eval and (step % steps_per_epoch == 0 or step == total):
                results[f"epoch_{epoch + 1}"] = self._eval_all(final=step == total)
                # the summary first: killed between the two, the resumed run evaluates
                # the epoch again (results.json lacks it), where the other order had
                # lost the epoch's point for good
                self.summaries.scores(step, results[f"epoch_{epoch + 1}"])
                self._save_results(results)
        if step < total and run.do_train:
            self._log(f"stopped at step {step} as asked; run again to resume")
            return results
        if not run.do_train and run.do_eval:
            results["eval"] = self._eval_all(final=True)
            self.summaries.scores(self.step, results["eval"])  # (first: as the loop's)
            self._save_results(results)
        if run.do_predict:
            for split in self._test_splits():
                examples, feats = self.features(split)
                outputs = self.predict(feats)
                preds = self.task.predictions(outputs, examples, feats)
                if self.chief:
                    self._write_predictions(preds, outputs, examples, feats,
                                            self._prediction_path(split))
        if self.chief:
            save_finetuned(run.model_dir, self.model)
        return results

    def _evaluate_missed_epoch(self, results, step, steps_per_epoch, total) -> None:
        """Evaluates the epoch a resumed run stands at the end of, if results.json lacks it.

        A second Ctrl-C stops the run at the next batch (loop.InterruptGate): at an epoch's
        end that is inside its dev evaluation, after the epoch's checkpoint, so
        the resumed run starts on the next epoch and would never evaluate it.
        """
        if step == 0 or (step % steps_per_epoch and step != total):
            return
        key = f"epoch_{-(-step // steps_per_epoch)}"  # as the loop names it: the epoch's number
        if key not in results:
            self._log(f"resuming at the end of {key}, which results.json lacks: evaluating it")
            results[key] = self._eval_all(final=step == total)
            self.summaries.scores(step, results[key])  # (first: as the loop's)
            self._save_results(results)

    def _prediction_path(self, split: str) -> str:
        submission = self.task.submission_file(split) if split.startswith("test") else None
        if submission:  # GLUE's <TASK>.tsv
            return os.path.join(self.run.model_dir, submission)
        return os.path.join(self.run.model_dir,
                            f"{self.task.name}_{split}_predictions{self.task.prediction_suffix}")

    def prediction_files(self) -> list[str]:
        """The prediction files of the dev and test splits in the run's folder (those the
        run wrote: a dev split's at the end of training, a test split's with do_predict)."""
        paths = [p for split in self._dev_splits() + self._test_splits()
                 for path in [self._prediction_path(split)]
                 for p in [*self.task.prediction_files(path), base.scores_file(path)]]
        return [p for p in dict.fromkeys(paths) if os.path.isfile(p)]

    def _eval_all(self, final: bool) -> dict:
        out = {}
        for split in self._dev_splits():
            path = self._prediction_path(split) if final else None
            out[split] = self.evaluate(split, write_to=path)
            self._log(f"{split}: " + ", ".join(f"{k} {v:.4f}" for k, v in out[split].items()))
        return out

    # The last evaluation in train's return (folders.finetuned.final_results).
    final_results = staticmethod(final_results)

    def _save_results(self, results):
        if self.chief:
            write_results(self.run.model_dir, results)
