"""Repeated fine-tuning: N trials from one checkpoint with seeds seed .. seed+N-1.

The original's run_finetuning `num_trials` (configure_finetuning.py): fine-tuning
variance is large, and the results its README gives are medians over many
seeds. With `--num_trials=N` and `--model_dir=OUT`, trial k (1..N) is an
ordinary fine-tuning run in `OUT_k` (the original's `model_dir + "_" + k`)
with `--seed=seed+k-1`, and the group folder `OUT` holds:

  trials.json   every trial's seed, folder, model size and final dev results, the
                summary per split and metric (median, mean, standard deviation
                (n - 1), min, max, n over the finished trials), and the trials the
                group's latest run asked for (num_trials: the results table tells a
                group cut short from a finished one), written before the first
                trial trains and rewritten atomically after every trial
  results.txt   the same as text: a line per trial, as the original's
                results.txt, then the summary lines
  predictions/  with keep_all_models=False, trial_K/: the prediction files of
                each trial whose folder was removed

A trial whose training diverges (a NaN or infinite loss or gradient norm:
loop.check_finite) is recorded as such, with the error's line and no results,
and the group goes on to the next seed: the summary's n counts the trials that
finished, and the log and results.txt name the diverged ones. Each trial
resumes as a single run does (its own checkpoints): a finished or diverged
trial (recorded in trials.json) is skipped, so re-running the command after a
Ctrl-C in trial k skips 1..k-1 and resumes trial k. A group's trials share
their settings: re-running OUT with other hyperparameters, checkpoint or data
is refused in one line (a larger `--num_trials` adds trials). With
`keep_all_models=False` (the original's flag) every trial's folder but the
last is removed once its results are recorded (the last that finished: a
diverged trial's folder, which holds no model, goes, and the finished one
before it stays; a rerun after an interrupt removes the folders the stopped
run had not: each trial's record lists its prediction files and whether its
run kept every model); the prediction files of a removed folder are moved to
MODEL_DIR/predictions/trial_K/ first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import math
import os
import shutil
import statistics
from typing import Callable

from electra_tf.core import signals
from electra_tf.core.config import FinetuningConfig, FinetuningRun
from electra_tf.core.errors import ConfigError, Diverged, InputError, clipped
from electra_tf.core.fileio import FolderLock, atomic_write_text, no_empty_folder_left
from electra_tf.folders.files import (
    FINETUNING_CONFIG,
    TRIALS,
    checkpoint_dir,
    has_checkpoints,
    json_numbers,
    read_json,
    remove_stale_temporaries,
    trials_path,
    weights_file_folder,
    write_json,
)
from electra_tf.folders.finetuned import (
    has_finetuning_config,
    read_results,
    recorded_seed,
    recorded_task,
)
from electra_tf.training.loop import Interrupted, different_settings, log, settings_digest

RESULTS_TXT = "results.txt"
PREDICTIONS = "predictions"  # keep_all_models=False: the removed trials' prediction files
# What a trial's own folder and seed change; the rest of the settings are the group's.
_PER_TRIAL = ("seed", "model_dir", "num_trials", "keep_all_models")
# do_eval: a group trained without evaluating records no results, and a rerun that
# evaluates would skip its finished trials: refused as other settings.
_GROUP_RUN_FIELDS = ("init_checkpoint", "from_scratch", "data_dir", "vocab_file", "do_train",
                     "do_eval")
# Each worker's own: its paths, and their files' hashes (a copy with a file more differs;
# each trial's workers compare the examples and weights they read instead)
_WORKER_OWN = ("init_checkpoint", "data_dir", "vocab_file", "train_dev_sha256", "init_sha256")


def trial_dir(model_dir: str, trial: int) -> str:
    """Trial `trial`'s folder: the original's `model_dir + "_" + str(trial)`, beside the
    group folder itself where `model_dir` is a link to it (beside the link, a group
    reached through one had trained its interrupted trial again in another folder)."""
    folder = os.path.normpath(model_dir)
    if os.path.islink(folder):
        folder = os.path.realpath(folder)
    if os.path.basename(folder) in (".", ".."):  # --model_dir=. had made ./._1, hidden
        folder = os.path.abspath(folder)  # inside the group, and missed from elsewhere
    return f"{folder}_{trial}"


def is_trial_group(folder: str) -> bool:
    return os.path.isfile(trials_path(folder))


def check_single_run_folder(model_dir: str) -> None:
    """Refuses a trial group's folder as the --model_dir of a single run (num_trials 1),
    which would write a run's files among the group's.

    Raises:
      ConfigError: naming the folder.
    """
    if is_trial_group(model_dir):
        try:
            asked = f"--num_trials={int(read_trials(model_dir)['num_trials'])}"
        except (InputError, KeyError, TypeError, ValueError, OverflowError):
            asked = "its --num_trials"  # a record of an earlier version, or damaged
        raise ConfigError(f"--model_dir {model_dir} holds the {TRIALS} of a --num_trials run: "
                          f"rerun it with {asked}, or give another --model_dir")


def read_trials(folder: str) -> dict:
    """A group folder's trials.json.

    Raises:
      InputError: missing, not written by electra_tf, or without its fields.
    """
    path = trials_path(folder)
    record = read_json(path)
    for key in ("task", "settings", "trials"):
        if key not in record:
            raise InputError(f"{path}: lacks {key}; not a file electra_tf wrote")
    wrong = _wrong_field(record)
    if wrong:
        raise InputError(f"{path}: {wrong}; not a file electra_tf wrote")
    return record


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _wrong_field(record: dict) -> str | None:
    """What in a trials.json is not as electra_tf writes it (None: nothing). An edited
    file had failed in a KeyError or TypeError, some after a whole trial had trained."""
    if not isinstance(record["task"], str):
        return "task is not a string"
    if not isinstance(record["settings"], dict):
        return "settings is not an object"
    if not isinstance(record["trials"], list):
        return "trials is not a list"
    seen = set()
    for i, trial in enumerate(record["trials"]):
        if not isinstance(trial, dict):
            return f"trials[{i}] is not an object"
        if not _whole(trial.get("trial")) or trial["trial"] < 1:
            return f"trials[{i}] has no trial number (a whole number >= 1)"
        if trial["trial"] in seen:
            return f"trial {trial['trial']} is recorded twice"
        seen.add(trial["trial"])
        if not _whole(trial.get("seed")):
            return f"trial {trial['trial']} has no whole-number seed"
        if not isinstance(trial.get("model_dir", ""), str):
            return f"trial {trial['trial']}'s model_dir is not a string"
        results = trial.get("results")
        if not isinstance(results, dict) or not all(
                isinstance(split, dict) for split in results.values()):
            return f"trial {trial['trial']} has no results object of splits"
        for split, metrics in results.items():
            for name, value in metrics.items():
                # a string had been left out of the summary without a word, an integer
                # past a float's range had stopped results.txt's writing in a traceback
                # (a NaN or an infinity is a float the summary leaves out, as null)
                if value is not None and not isinstance(value, float) \
                        and finite_number(value) is None:
                    return (f"trial {trial['trial']}'s {split} {name} is "
                            f"{clipped(repr(value))}, not a number or null")
        if not isinstance(trial.get("model_size", ""), str):
            return f"trial {trial['trial']}'s model_size is not a string"
        if not isinstance(trial.get("diverged", ""), str):
            return f"trial {trial['trial']}'s diverged is not a string"
        if not isinstance(trial.get("keep_all_models", True), bool):
            return f"trial {trial['trial']}'s keep_all_models is not true or false"
        predictions = trial.get("predictions", [])
        if not (isinstance(predictions, list) and all(
                isinstance(name, str) and name and os.path.basename(name) == name
                for name in predictions)):
            return f"trial {trial['trial']}'s predictions is not a list of file names"
    if "num_trials" in record and not (_whole(record["num_trials"])
                                       and record["num_trials"] >= 1):
        return "num_trials is not a whole number >= 1"
    return None


def finite_number(value) -> float | None:
    """A JSON number as a finite float; None for anything else (a bool, a string, NaN,
    an infinity, an integer too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def summarize(results: list[dict]) -> dict:
    """{split: {metric: {median, mean, std, min, max, n}}} over trials' final results
    (std: the sample standard deviation, n - 1; None for one value, which has none).

    Args:
      results: each trial's final results, {split: {metric: value}}; a metric a
        trial lacks, or a value that is not a finite number, is left out of its n.
    """
    values: dict[str, dict[str, list[float]]] = {}
    for trial in results:
        for split, metrics in trial.items():
            for name, value in metrics.items():
                number = finite_number(value)
                if number is not None:
                    values.setdefault(split, {}).setdefault(name, []).append(number)
    return {split: {name: {"median": statistics.median(v), "mean": statistics.fmean(v),
                           "std": statistics.stdev(v) if len(v) > 1 else None,
                           "min": min(v), "max": max(v), "n": len(v)}
                    for name, v in metrics.items()}
            for split, metrics in values.items()}


def summary_lines(task: str, summary: dict, trials: int = 0) -> list[str]:
    """One line per split and metric, for the console and results.txt (a metric of one
    trial: its value, with no spread to give); `trials`: how many trials' results it
    summarizes (those it left out, a score that is no finite number or none, are
    counted as results_table counts them)."""
    def left_out(n: int) -> str:
        return f"; {trials - n} left out" if trials > n else ""

    return [f"{task} {split} {name}: median {s['median']:.4f}, mean {s['mean']:.4f}, "
            f"std {s['std']:.4f}, min {s['min']:.4f}, max {s['max']:.4f} (n={s['n']}"
            f"{left_out(s['n'])})"
            if s["n"] > 1 else f"{task} {split} {name}: {s['median']:.4f} (n=1: one trial, "
            f"no spread{left_out(1)})"
            for split, metrics in summary.items() for name, s in metrics.items()]


def _summarized(record: dict) -> int:
    """How many of a group record's trials its summary is over (the diverged are not)."""
    return sum(not t.get("diverged") for t in record["trials"])



_PATHS = ("init_checkpoint", "data_dir", "vocab_file")  # compared as the files they name
# Settings a rerun of the group may change: how often and how many checkpoints are
# kept, and the evaluation's batch (had been refused as other settings).
_RESULTS_UNCHANGED = ("save_checkpoints_steps", "keep_checkpoint_max", "eval_batch_size")
# How the trials compute (allowed to change, as a resumed single run's: the weights are
# float32 either way), recorded as the latest run's and said when a rerun changes them
# (a group extended in fp32 had mixed them into one median without a word).
_PRECISION = ("mixed_precision", "jit_compile")
# What the trials read, by content (sha256): data edited in place, or a checkpoint
# folder that pre-training went on writing, had been mixed into one median. Of
# --data_dir, the train and dev files (a test file or a README added later is no change:
# groups recorded before, under data_sha256 over every file, compare paths alone).
_CONTENTS = {"train_dev_sha256": ("data_dir", "the train or dev files in --data_dir"),
             "init_sha256": ("init_checkpoint", "the --init_checkpoint's files")}


# Recorded by earlier versions, compared no more: every file of --data_dir's sha256.
_RETIRED = ("data_sha256",)
# Settings later versions record that earlier ones held fixed at today's default (the
# original's hparams made flags): a group recorded without one trained at the default,
# and a rerun with another value is other settings (it had joined the group's median).
_FIXED_BEFORE = ("max_query_length", "doc_stride", "n_best_size", "max_answer_length",
                 "answerable_classifier", "answerable_uses_start_logits", "answerable_weight")


def _train_or_dev(name: str) -> bool:
    """A file of --data_dir whose contents a group's results depend on: every task's
    train and dev files are named train* or dev* (train.tsv, dev_matched.tsv,
    train-v1.1.json, dev.jsonl.gz, ...)."""
    return name.lower().startswith(("train", "dev"))


def _settings(config: FinetuningConfig, run: FinetuningRun, backend: str = "") -> dict:
    values = {k: v for k, v in config.to_dict().items() if k not in _PER_TRIAL}
    values.update({k: getattr(run, k) for k in _GROUP_RUN_FIELDS + _PRECISION})
    if backend:  # Keras' (each trial's checkpoints are the backend's own)
        values["backend"] = backend
    if backend == "jax":  # (JAX compiles every step, as each trial's record says: the
        values["jit_compile"] = True  # flag's false had been recorded, then noted)
    for key, (field, _) in _CONTENTS.items():
        values[key] = _content(field, values[field], config.task_name) if values[field] else ""
    return values


def _content(field: str, path: str, task_name: str) -> str:
    """content_sha256 of a _CONTENTS field's path: --data_dir's train and dev files,
    in the folder the task reads them from (`Task.data_folder`: GLUE's glue_data/SST-2
    for a --data_dir of glue_data), else the --init_checkpoint's files."""
    if field != "data_dir":
        return content_sha256(path)
    from electra_tf.tasks.registry import get_task

    try:
        path = get_task(task_name).data_folder(path)
    except (ValueError, ConfigError):  # not a task's name: the run refuses it
        pass
    return content_sha256(path, _train_or_dev)


def content_sha256(path: str, names: Callable[[str], bool] | None = None) -> str:
    """The sha256 of what `path` holds: a file's bytes; a folder's files (not its
    subfolders, not hidden files; with `names`, those whose name it keeps) by name; a
    checkpoint prefix's files (ckpt-N.*)."""
    import hashlib

    if os.path.isfile(path):
        files = [path]
    elif os.path.isdir(path):
        files = [os.path.join(path, n) for n in sorted(os.listdir(path))
                 if not n.startswith(".") and os.path.isfile(os.path.join(path, n))
                 and (names is None or names(n))]
    else:
        folder, prefix = os.path.split(path)
        files = [os.path.join(folder, n) for n in sorted(os.listdir(folder or "."))
                 if n.startswith(prefix + ".")] if os.path.isdir(folder or ".") else []
    if not files:  # nothing there to compare (the run itself refuses a missing path)
        return ""
    digest = hashlib.sha256()
    for name in files:
        digest.update(os.path.basename(name).encode("utf-8", "surrogateescape") + b"\0")
        with open(name, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _by_size(key: str, value, size: str):
    """A setting whose default depends on the model size (0 or -1: by size), as the
    trainer resolves it for `size` (FinetuningConfig's resolvers; "" unknown: as given)."""
    if not size or isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    size = "small" if size == "custom" else size  # as the trainer takes a custom size
    try:
        config = FinetuningConfig(**{key: value})
    except ConfigError:  # not a value a run takes: compared as it stands
        return value
    return (config.resolved_learning_rate(size) if key == "learning_rate"
            else config.resolved_layerwise_lr_decay(size))


def _changed(before: dict, settings: dict, size: str = "") -> list[str]:
    """The settings that differ from the recorded ones, as the refusal lists them:
    paths by the file they name (data/ and ./data are one folder), contents only
    where both record them (a group written before they were recorded), and a
    size-default (learning rate, layer-wise decay) by the value it gives the group's
    model `size` (a rerun naming the default the first run took is no change)."""
    changed = []
    if before:
        before = {**{k: getattr(FinetuningConfig, k) for k in _FIXED_BEFORE}, **before}
    for k in sorted(set(before) | set(settings)):
        if k not in before or k in _RESULTS_UNCHANGED + _PRECISION or k in _RETIRED:
            continue  # (not recorded by the group's version yet, or no longer; no change
            # to what a trial learns or scores)
        old, new = before.get(k), settings.get(k)
        if k in ("learning_rate", "layerwise_lr_decay"):
            old, new = _by_size(k, old, size), _by_size(k, new, size)
        if k in _CONTENTS:
            field = _CONTENTS[k][0]
            if old and new and old != new and before.get(field) != settings.get(field) \
                    and _same_path(field, before.get(field), settings.get(field)):
                # the checkpoint spelled the other way (its folder, or its weights file):
                # what the recorded spelling holds now
                new = _content(field, before[field], settings.get("task_name", ""))
            if old and new and old != new:
                changed.append(f"{_CONTENTS[k][1]} changed")
        elif k == "backend":  # (a caller that names none: not compared)
            if new and old != new:
                changed.append(f"Keras' backend {old} -> {new} (KERAS_BACKEND)")
        elif k in _PATHS and old and new:
            if not _same_path(k, old, new):
                changed.append(f"{k} {old!r} -> {new!r}")
        elif old != new:
            changed.append(f"{k} {old!r} -> {new!r}")
    return changed


def _same_path(field: str, a, b) -> bool:
    """Whether two spellings of a path setting name one thing: data/ and ./data; for
    --init_checkpoint also a model folder and its weights file, which it reads as one."""
    if not (isinstance(a, str) and isinstance(b, str) and a and b):
        return a == b
    if field == "init_checkpoint":
        a, b = weights_file_folder(a) or a, weights_file_folder(b) or b
    return os.path.realpath(a) == os.path.realpath(b)


def check_trial_folder(folder: str, run: FinetuningRun, seed: int | None = None,
                       task_name: str | None = None) -> None:
    """Refuses a trial folder that holds files no fine-tuning run wrote (keep_all_models
    False removes a finished trial's folder: a folder of data that happened to be
    named OUT_k had been trained in, then deleted), that is what the run reads, or
    (`seed`: the trial's) that holds a fine-tuning run of another seed, not this
    trial's (a single run given OUT_k had been found when the group reached trial k,
    refused as other settings to "resume with", which the group cannot), or
    (`task_name`: the group's) checkpoints of another task, or records (its
    finetuning_config.json's task, results.json) that cannot be read: before any
    trial runs, not when the group reaches it (an rte run's folder had been taken as
    an sst2 trial, its score in the median).

    Raises:
      InputError: naming the folder.
    """
    if not os.path.isdir(folder):
        return
    for field in ("data_dir", "init_checkpoint"):
        path = getattr(run, field)
        if path and os.path.exists(path) and os.path.samefile(path, folder):
            raise InputError(f"trial folder {folder} is the --{field}; give another "
                             "--model_dir")
    names = [n for n in os.listdir(folder) if not n.startswith(".")]
    if names and not (has_finetuning_config(folder)
                      or os.path.isdir(checkpoint_dir(folder))):
        raise InputError(f"trial folder {folder} already holds files that are not a "
                         f"fine-tuning run's (e.g. {sorted(names)[0]}); move them, or give "
                         "another --model_dir")
    if seed is not None:  # (a record that cannot be read: the trial's own resume names it)
        recorded = recorded_seed(folder)
        if recorded is not None and recorded != seed:
            raise InputError(f"trial folder {folder} holds a fine-tuning run of --seed="
                             f"{recorded}, not this group's (its trial there has seed {seed}):"
                             " another run's folder; move it, or give another --model_dir")
    if task_name is not None:
        check_trial_task(folder, task_name)


def check_trial_task(folder: str, task_name: str) -> None:
    """Refuses a trial folder whose checkpoints are of another task than the group's, or
    whose records (finetuning_config.json's task, results.json) cannot be read.

    Raises:
      InputError: naming the folder.
    """
    if has_checkpoints(folder) and has_finetuning_config(folder):
        recorded = recorded_task(folder)[0]
        if recorded != task_name:
            raise InputError(f"trial folder {folder} holds a fine-tuning run of --task_name="
                             f"{recorded}, not this group's {task_name}: another run's "
                             "folder; move it, or give another --model_dir")
        read_results(folder)


def _different_groups() -> ConfigError:
    """The refusal of a multi-worker run whose workers see other trial groups."""
    return different_settings(
        "--strategy=multi_worker", "the workers see different trial groups in --model_dir "
        "(a folder that is not one shared folder, or other flags); give every worker one "
        "shared --model_dir and the same flags")


def _agree_on_refusal(refusal: Exception, agree: Callable | None):
    """Raises `refusal`, a worker's own refusal of a group, after the workers' comparison
    of groups where there is one (`agree`): the other workers, which compare before they
    go on, would wait for this one, then say it cannot be reached. They see another
    group (`_different_groups`); workers refused alike each raise theirs."""
    if agree is not None:
        agree([settings_digest(["refused", str(refusal)])])
        refusal.left_peers = False  # every worker refuses here: they end together (cli)
    raise refusal


def evaluate_trials(config: FinetuningConfig, run: FinetuningRun, task_name: str,
                    make_trainer: Callable, final_results: Callable, chief: bool = True,
                    agree: Callable | None = None, backend: str = "") -> tuple[dict, int]:
    """`--do_train=false` with `--num_trials=N`: each trained trial of the group
    run.model_dir (1..N, as its trials.json records them) evaluated (do_eval) and
    predicted (do_predict) in its own folder, as a single run's --do_train=false
    evaluates a fine-tuning --model_dir (the original's run_finetuning, with do_train
    False, evaluates each model_dir_k). The group's record, its training's results,
    is kept; the trials' folders get what a single evaluation writes. Returns the
    summary of these evaluations (summarize; {} without do_eval) and the number of
    trials run.

    A trial not trained yet, diverged, or whose folder keep_all_models=False removed
    is named and skipped. Args as run_trials'.

    Raises:
      InputError: no trained group in run.model_dir, or no trial of it to evaluate.
      ConfigError: the group is of another task.
    """
    folder = os.path.normpath(run.model_dir)
    if not os.path.exists(trials_path(folder)):
        refusal = InputError(f"--do_train=false with --num_trials={run.num_trials} evaluates "
                             f"the trials of a trained group, and --model_dir {folder} holds "
                             f"no {TRIALS}: train the group first, or give one trial's folder "
                             "with --num_trials=1")
        _agree_on_refusal(refusal, agree)
    with contextlib.ExitStack() as held:
        try:  # refused here, a worker still compares (the others would wait for it)
            if chief:  # (a folder another run holds: refused too)
                held.enter_context(FolderLock(folder, "--model_dir"))
            record = read_trials(folder)
            if record["task"] != task_name:
                raise ConfigError(f"{trials_path(folder)} records trials of --task_name="
                                  f"{record['task']}, not {task_name}")
            trained_on = record["settings"].get("backend")
            if backend and trained_on and trained_on != backend:  # its checkpoints' kind
                raise ConfigError(f"{trials_path(folder)} records trials trained on Keras' "
                                  f"{trained_on} backend; evaluate them with "
                                  f"KERAS_BACKEND={trained_on}")
            for trial in record["trials"]:  # each folder evaluated, before the first is
                if trial["trial"] <= run.num_trials and not trial.get("diverged"):
                    check_trial_task(trial_dir(folder, trial["trial"]), task_name)
        except (InputError, ConfigError) as e:
            _agree_on_refusal(e, agree)
        if agree is not None and agree([settings_digest(
                [run.num_trials, [[t["trial"], t["seed"], bool(t.get("diverged"))]
                                  for t in record["trials"]]])]):
            raise _different_groups()
        if record.get("seed") is not None and record["seed"] != config.seed:
            log("finetune", f"note: --seed={config.seed} is not used: each trial is "
                            f"evaluated with the seed it was trained with ({record['seed']} "
                            "onwards)")
        n, evaluated, done = run.num_trials, [], 0
        for k in range(1, n + 1):
            trial, trial_folder = next(
                (t for t in record["trials"] if t["trial"] == k), None), trial_dir(folder, k)
            why = ("not trained yet" if trial is None else
                   "diverged in training" if trial.get("diverged") else
                   _folder_gone(trial, trial_folder))
            if why:
                log("finetune", f"trial {k}/{n} ({trial_folder}): {why}; not evaluated")
                continue
            log("finetune", f"trial {k}/{n}: evaluating --model_dir={trial_folder}")
            trainer = make_trainer(dataclasses.replace(config, seed=trial["seed"]),
                                   dataclasses.replace(run, model_dir=trial_folder,
                                                       num_trials=1))
            results = final_results(trainer.train())
            del trainer
            free_models()
            done += 1
            if run.do_eval:  # (else results.json's earlier scores: nothing evaluated now)
                log("finetune", f"trial {k}/{n} evaluated: {results}")
                evaluated.append(results)
            else:
                log("finetune", f"trial {k}/{n} done" + (
                    f": its test predictions written in {trial_folder}" if run.do_predict
                    else ""))
        if not done:
            raise InputError(f"no trial of the group {folder} up to --num_trials={n} can be "
                             "evaluated (each is named above)")
        summary = summarize(evaluated)
        for line in summary_lines(task_name, summary, len(evaluated)):
            log("finetune", line)
        return summary, done


def _folder_gone(trial: dict, folder: str) -> str:
    """Why a recorded trial's `folder` is not there ("" where it is): removed by its run's
    keep_all_models=False, or moved or removed by hand (it had been said removed by
    --keep_all_models=false either way)."""
    if os.path.isdir(folder):
        return ""
    if trial.get("keep_all_models") is False:
        return "its folder was removed (--keep_all_models=false)"
    return "its folder is missing (moved or removed since it trained)"


def _keep_last(model_dir: str, kept: tuple | None, k: int, folder: str,
               trial: dict) -> tuple | None:
    """keep_all_models=False after trial k (its record `trial`): the original keeps the
    last trial's folder, here the last that finished (a diverged trial's holds no
    model), so the folder `kept` had kept, or a diverged k's own, is removed. Returns
    the folder kept now: (trial, folder, its prediction files)."""
    files = [os.path.join(folder, name) for name in trial.get("predictions", [])]
    if trial.get("diverged"):
        gone = (k, folder, files)
    else:
        gone, kept = kept, (k, folder, files)
    if gone and os.path.isdir(gone[1]):
        remove_trial_folder(model_dir, *gone)
    return kept


def remove_trial_folder(model_dir: str, trial: int, folder: str, predictions: list[str]) -> None:
    """keep_all_models=False: removes a trial's folder, its prediction files (dev
    predictions, test submissions) moved first to MODEL_DIR/predictions/trial_K/, as
    the original's test predictions outlive the trial's model_dir."""
    if predictions:
        keep = os.path.join(model_dir, PREDICTIONS, f"trial_{trial}")
        os.makedirs(keep, exist_ok=True)
        for path in predictions:
            if os.path.isfile(path):
                shutil.move(path, os.path.join(keep, os.path.basename(path)))
    shutil.rmtree(folder)


def _read_text(path: str) -> str | None:
    """A text file's contents; None where it cannot be read as UTF-8 text."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _results_txt(record: dict) -> str:
    """results.txt of a record as trials.json holds it (`json_numbers`)."""
    lines = []
    for t in record["trials"]:
        if t.get("diverged"):
            lines.append(f"trial {t['trial']} (seed {t['seed']}) {record['task']}: diverged: "
                         f"{t['diverged']}")
        for split, metrics in t["results"].items():
            lines.append(f"trial {t['trial']} (seed {t['seed']}) {record['task']} {split}: "
                         + " - ".join(f"{k}: {v:.4f}" if finite_number(v) is not None
                                      else f"{k}: {json.dumps(v)} (left out)"
                                      for k, v in metrics.items()))
    return "\n".join(lines + summary_lines(record["task"], record["summary"],
                                           _summarized(record))) + "\n"


class TrialGroup:
    """The group folder of a `num_trials` run (see the module docstring).

    Args:
      model_dir: the group folder (the trials are its `_k` siblings).
      task: the task's name. config, run: the first trial's settings.

    Raises:
      ConfigError: the folder holds trials of other settings.
    """

    def __init__(self, model_dir: str, task: str, config: FinetuningConfig, run: FinetuningRun,
                 writer: bool = True, backend: str = ""):
        self.writer = writer  # a multi-worker run's chief (the others write nothing)
        self.written = False  # by this run
        self.folder = os.path.normpath(model_dir)
        self.path = trials_path(self.folder)
        if has_finetuning_config(self.folder):
            raise InputError(f"--model_dir {self.folder} is the folder of a single fine-tuning "
                             f"run ({FINETUNING_CONFIG}); --num_trials writes a group "
                             "folder and its _1 .. _N trials: give another --model_dir")
        settings = _settings(config, run, backend)
        if os.path.exists(self.path):
            self.record = read_trials(self.folder)
            sizes = [t.get("model_size", "") for t in self.record["trials"]]
            changed = _changed(self.record["settings"], settings, sizes[0] if sizes else "")
            if self.record["task"] != task or self.record.get("seed") != config.seed:
                changed.insert(0, f"task {self.record['task']} seed {self.record.get('seed')}"
                                  f" -> task {task} seed {config.seed}")
            if changed:
                raise ConfigError(f"{self.path} records trials of other settings ("
                                  f"{'; '.join(changed[:3])}); rerun with those, or use "
                                  "another --model_dir")
            recorded = self.record["settings"]
            done = {t["trial"] for t in self.record["trials"]}
            trains = any(k not in done for k in range(1, run.num_trials + 1))
            other = [k for k in _PRECISION if k in recorded and recorded[k] != settings[k]]
            if not trains:  # (a finished group run again: no trial takes the new ones)
                settings = {**settings, **{k: recorded[k] for k in other}}
            elif other and writer:

                def flags_of(values):
                    return " ".join(f"--{k}={str(values[k]).lower()}" for k in other)

                log("finetune", f"note: {self.folder}'s trials so far ran with "
                    f"{flags_of(recorded)}; those this run trains, with {flags_of(settings)}: "
                    "one median over both")
            self.record["settings"] = {**settings, **self.record["settings"],  # + new keys,
                                       **{k: settings[k] for k in _RESULTS_UNCHANGED + _PRECISION
                                          if k in settings}}  # latest run's (when written)
            # Another --num_trials is recorded before any trial runs, so that a group cut
            # short reads as such (results_table) even if no added trial finishes.
            self.asked_anew = self.record.get("num_trials") != run.num_trials
            self.record["num_trials"] = run.num_trials
            # The summary is the trials': recomputed, not read (an edited or older file's).
            self.stale = self.record.get("summary") != json_numbers(self._summary())
            self.record["summary"] = self._summary()
            # results.txt is written after trials.json: a run stopped between the two
            # writes of its last trial had left it a trial behind for good
            self.text_stale = not self.stale and _read_text(
                os.path.join(self.folder, RESULTS_TXT)) != _results_txt(
                json_numbers(self.record))
        else:
            if os.path.exists(os.path.join(self.folder, RESULTS_TXT)):
                # its own record is written before trial 1 (and removed if it is refused):
                # another results.txt (the original's run_finetuning writes one) had been
                # replaced, then removed
                raise InputError(f"--model_dir {self.folder} holds a {RESULTS_TXT} but no "
                                 f"{TRIALS}: not a trial group's; move it, or give another "
                                 "--model_dir")
            self.record = {"task": task, "seed": config.seed, "settings": settings,
                           "num_trials": run.num_trials, "trials": [], "summary": {}}
            self.stale = self.asked_anew = self.text_stale = False
        self.new = not os.path.exists(self.path)  # (written before its first trial trains)

    def _summary(self) -> dict:
        return summarize([t["results"] for t in self.record["trials"]])

    def finished(self, trial: int) -> dict | None:
        return next((t for t in self.record["trials"] if t["trial"] == trial), None)

    def diverged(self) -> list[dict]:
        """The trials recorded as diverged."""
        return [t for t in self.record["trials"] if t.get("diverged")]

    def add(self, trial: int, seed: int, model_dir: str, results: dict,
            model_size: str = "", diverged: str = "", predictions: list[str] = (),
            keep_all_models: bool = True) -> None:
        """Records a trial's final results, or (`diverged`: the error's line, no
        results) that its training diverged, the names of the prediction files its
        folder holds and the run's keep_all_models (a run with False moves those
        files out and removes the folder; after an interrupt, the next run does)."""
        trials = [t for t in self.record["trials"] if t["trial"] != trial]
        trials.append({"trial": trial, "seed": seed, "model_dir": model_dir,
                       "model_size": model_size, "results": results,
                       "predictions": sorted(os.path.basename(p) for p in predictions),
                       "keep_all_models": keep_all_models,
                       **({"diverged": diverged} if diverged else {})})
        self.record["trials"] = sorted(trials, key=lambda t: t["trial"])
        self.record["summary"] = self._summary()
        self.write()

    def write(self) -> None:
        """trials.json, then results.txt, each atomically (by the writer)."""
        if not self.writer:
            return
        os.makedirs(self.folder, exist_ok=True)
        record = json_numbers(self.record)
        write_json(self.path, record)
        atomic_write_text(os.path.join(self.folder, RESULTS_TXT), _results_txt(record))
        self.stale = self.text_stale = False
        self.written = True  # (the closing line says so only then)

    def remove(self) -> None:
        """Removes the files `write` wrote (a new group refused before a trial finished)."""
        if not self.writer:
            return
        for path in (self.path, os.path.join(self.folder, RESULTS_TXT)):
            if os.path.isfile(path):
                os.remove(path)


def free_models() -> None:
    """Frees the finished trial's model and graphs: the next trial builds its own."""
    import keras

    gc.collect()
    keras.backend.clear_session()


def run_trials(config: FinetuningConfig, run: FinetuningRun, task_name: str,
               make_trainer: Callable, final_results: Callable, chief: bool = True,
               agree: Callable | None = None, backend: str = "") -> dict:
    """Runs (or resumes) `run.num_trials` fine-tuning trials; returns the summary.

    Args:
      config, run: the first trial's settings (run.model_dir is the group folder).
      task_name: the task's name, recorded with the group.
      make_trainer: (config, run) -> a trainer whose train() returns its results
        (a fresh task and trainer per trial: the backend's Finetuning subclass).
      final_results: a trainer's results -> the final evaluation ({split: metrics}).
      chief: False on a multi-worker run's other workers: they train every trial with
        the chief (each trial's workers compare their settings, as a single run's do)
        and write, lock or remove nothing of the group's; the chief does.
      agree: a multi-worker run's comparison of the workers' digests (the backend's
        `agreement`): the workers' groups (its settings, the trials finished) are
        compared before any trial, so that workers that see different groups (a
        --model_dir that is not one shared folder) are refused together.
      backend: Keras' backend the trials train on ("tensorflow", "jax"), recorded with
        the group: a rerun on the other had added its trials to the median, and no
        backend could evaluate the group after (each reads its own checkpoints).
    Raises:
      Interrupted: from the trial that was running (the finished ones are recorded).
      Diverged: every trial diverged (each recorded).
    """
    n = run.num_trials
    # a group refused at its first trial (another vocabulary) had left an empty folder
    with contextlib.ExitStack() as held:
        try:  # refused here, a worker still compares (the others would wait for it)
            if chief:  # (a folder another run holds: refused too)
                held.enter_context(no_empty_folder_left(run.model_dir))
                held.enter_context(FolderLock(os.path.normpath(run.model_dir), "--model_dir"))
                # (the group's own files, trials.json and results.txt, are written under
                # temporary names too: a kill mid-write had left one there for good)
                for name in remove_stale_temporaries(run.model_dir):
                    log("finetune", f"removed {name}, left by a write that did not finish")
            group = TrialGroup(run.model_dir, task_name, config, run, writer=chief,
                               backend=backend)
            for k in range(1, n + 1):  # every trial's folder before the first trains
                if group.finished(k) is None:
                    check_trial_folder(trial_dir(run.model_dir, k), run, config.seed + k - 1,
                                       task_name)
            seen = [  # (paths: each worker's own copy)
                run.num_trials, config.seed,
                {k: v for k, v in group.record["settings"].items() if k not in _WORKER_OWN},
                [[t["trial"], bool(t.get("diverged"))] for t in group.record["trials"]]]
        except (InputError, ConfigError) as e:
            _agree_on_refusal(e, agree)
        if agree is not None and agree([settings_digest(seen)]):
            raise _different_groups()
        if group.asked_anew or group.new:  # (a summary out of step is still named at the end)
            # a new group's record before its first trial trains: a group stopped in
            # it reads as one with no trial finished (results_table), not as no group
            stale = group.stale
            group.write()
            group.stale = stale
        try:
            _run_trials(group, config, run, task_name, make_trainer, final_results)
        except Exception:  # a refusal or a fault, not a Ctrl-C or SIGTERM (Interrupted)
            if group.new and not group.record["trials"]:
                group.remove()  # a new group refused at its first trial leaves no trace
            raise
    return group.record["summary"]


def _run_trials(group: TrialGroup, config: FinetuningConfig, run: FinetuningRun,
                task_name: str, make_trainer: Callable, final_results: Callable) -> None:
    """run_trials' trials, under its lock; the summary is group.record's."""
    n = run.num_trials
    kept = None  # keep_all_models=False: the last finished trial's (number, folder, files)
    unpredicted = []  # finished before, without predictions: --do_predict skips them too
    for k in range(1, n + 1):
        seed = config.seed + k - 1
        folder = trial_dir(run.model_dir, k)
        done = group.finished(k)
        if done is not None:
            if run.do_predict and not done.get("diverged") and not done.get("predictions"):
                unpredicted.append(k)
            what = (f"diverged, skipped: {done['diverged']}" if done.get("diverged")
                    else f"finished, skipped: {done['results']}")
            gone = _folder_gone(done, folder)
            if gone and not done.get("diverged") and done.get("keep_all_models") is not False:
                what += f"; note: {gone}"
            log("finetune", f"trial {k}/{n} (seed {seed}, {folder}): {what}")
            if (not run.keep_all_models and group.writer and os.path.isdir(folder)
                    and done.get("keep_all_models") is False):
                # a folder an interrupted run of keep_all_models=False had not removed
                # yet (the one to keep was tracked within that run): the last finished
                # trial's stays, as in one run; a run that kept them all, kept them
                kept = _keep_last(run.model_dir, kept, k, folder, done)
            continue
        check_trial_folder(folder, run, seed, task_name)
        log("finetune", f"trial {k}/{n}: seed {seed}, --model_dir={folder}")
        trainer = make_trainer(dataclasses.replace(config, seed=seed),
                               dataclasses.replace(run, model_dir=folder, num_trials=1))
        diverged = ""
        try:
            results = final_results(trainer.train())
        except Diverged as e:  # this seed's; the next ones may train
            results, diverged = {}, str(e)
        except Interrupted as e:  # its line names the trial that stopped
            raise Interrupted(e.step, signum=e.signum, left_peers=e.left_peers,
                              message=f"trial {k}/{n} ({folder}): {e}") from None
        size = getattr(trainer, "size", "")  # the checkpoint's size name, or "custom"
        written = getattr(trainer, "prediction_files", list)()
        del trainer
        free_models()
        group.add(k, seed, folder, results, size, diverged=diverged, predictions=written,
                  keep_all_models=run.keep_all_models)
        if diverged:
            log("finetune", f"trial {k}/{n} diverged: {diverged}; recorded, left out of "
                            "the summary" + ("; the next trial goes on" if k < n else ""))
        else:
            log("finetune", f"trial {k}/{n} done: {results}")
        if not run.keep_all_models and group.writer:
            kept = _keep_last(run.model_dir, kept, k, folder, group.finished(k))
        signum = signals.pending() if diverged else None
        if signum is not None:  # Ctrl-C or SIGTERM came as the trial diverged
            signals.take()
            raise Interrupted(0, signum=signum, message=(
                f"interrupted in trial {k}/{n}, which diverged (recorded in "
                f"{group.path})" + (f"; rerun to go on with trial {k + 1}" if k < n
                                    else "")))
    if unpredicted:  # (the rerun had ended as if it had predicted, writing nothing)
        log("finetune", f"note: trial {', '.join(map(str, unpredicted))} had finished without "
                        "--do_predict, which a finished trial is not trained again for: no "
                        "test predictions were written for "
                        + ("it" if len(unpredicted) == 1 else "them")
                        + "; add --do_train=false (and --do_eval=false) to predict with each "
                          "trained trial")
    if group.stale:  # every trial had finished: the files' summary is brought up to date
        log("finetune", f"{group.path}: its summary differed from its trials' results; "
                        "rewritten from them")
        group.write()
    elif group.text_stale:
        text = os.path.join(group.folder, RESULTS_TXT)
        log("finetune", f"{text} did not match {group.path} (a run stopped between writing "
                        "the two, or an edit); rewritten from it")
        group.write()
    more = len(group.record["trials"]) - n
    if more > 0:
        log("finetune", f"{group.path} holds {more} more recorded trial(s) than "
                        f"--num_trials={n}: the summary is over all "
                        f"{len(group.record['trials'])}")
    # a trial past --num_trials that an earlier run (asking more) left unfinished
    k = n + 1
    while os.path.isdir(trial_dir(run.model_dir, k)):
        if group.finished(k) is None:
            log("finetune", f"note: {trial_dir(run.model_dir, k)} holds trial {k}, not "
                            f"finished (past --num_trials={n}: left as it is, and out of the "
                            f"summary; --num_trials={k} goes on with it, where it was trained "
                            "with this group's settings)")
        k += 1
    for line in summary_lines(task_name, group.record["summary"], _summarized(group.record)):
        log("finetune", line)
    bad = group.diverged()
    if bad and len(bad) == len(group.record["trials"]):
        raise Diverged(f"every trial diverged ({len(bad)}; recorded in {group.path}), "
                       f"e.g. trial {bad[0]['trial']}: {bad[0]['diverged']}")
    if bad:
        log("finetune", f"{len(bad)} of {len(group.record['trials'])} trials diverged "
                        f"(trial {', '.join(str(t['trial']) for t in bad)}): the summary "
                        "is over the others")
    if group.writer and group.written:  # (a finished group run again writes nothing)
        log("finetune", f"wrote {group.path} and {os.path.join(group.folder, RESULTS_TXT)}")
