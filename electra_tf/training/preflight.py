"""Checks before a pre-training run builds or writes anything (both backends).

Bad input stops a run here with one line: data files that are missing, not
TFRecords or built for another max_seq_length or casing, and a model_dir whose
checkpoints another vocabulary, casing or other model sizes wrote. Nothing here
needs TensorFlow unless the run reads its data through it (`tensorflow_io`).
"""

from __future__ import annotations

import dataclasses
import json

from electra_tf.core.config import EncoderConfig, PretrainingConfig, PretrainingRun
from electra_tf.core.errors import ConfigError, InputError
from electra_tf.core.fileio import check_output_folder
from electra_tf.data.features import records_stats
from electra_tf.data.masking import MaskingConfig
from electra_tf.data.packed import check_packed
from electra_tf.data.tfrecord_reader import LOCAL_FILES, check_records, tensorflow_files
from electra_tf.folders.files import (
    PRETRAINING_CONFIG,
    check_no_unfinished_conversion,
    has_checkpoints,
    latest_checkpoint_step,
    unreadable_record,
)
from electra_tf.folders.pretraining import PretrainingFolder, model_without_checkpoints
from electra_tf.folders.vocabulary import vocab_fingerprint


def preflight(config: PretrainingConfig, run: PretrainingRun, tensorflow_io: bool = True,
              packed: bool = False) -> dict[str, list[str]]:
    """Refuses bad input before a run builds or writes anything.

    Checks the data (`tfrecord_reader.check_records`: every glob matches,
    every file starts with a record of config.max_seq_length whose ids fit
    config.vocab_size; one record per file) and, when model_dir already holds checkpoints, that this run can
    resume them (`check_resume`). Returns {"train": files, "eval": files}.

    Args:
      tensorflow_io: the run reads its records through TensorFlow (tf.data),
        so the files are found with tf.io.gfile; False: with Python alone
        (the NumPy input pipeline), and TensorFlow is not imported.
      packed: the data are packed files (data/packed.py), checked whole
        (header, sizes, checksums) by `packed.check_packed`.

    Raises:
      InputError, ConfigError, VocabError: one line naming the flag or file.
    """
    check_output_folder(run.model_dir, "--model_dir", inside=("checkpoints", "train", "eval"))
    fs = _tensorflow_files() if tensorflow_io else LOCAL_FILES
    size = config.vocab_size

    def check(patterns: str, what: str, length: int = config.max_seq_length) -> list[str]:
        if packed:
            return check_packed(patterns, length, what, size)
        return check_records(patterns, length, what, fs, size)

    flag = {"train": "--train_data", "eval": "--eval_data", "phase2": "--phase2_train_data"}
    files = {"train": check(run.train_data, flag["train"]),
             "eval": check(run.eval_data, flag["eval"]) if run.eval_data else []}
    if config.phase2_steps:  # records of phase 2's length
        files["phase2"] = check(run.phase2_train_data, flag["phase2"],
                                config.phase2_max_seq_length)
    resumed = has_checkpoints(run.model_dir)
    if not resumed:
        for what, paths in files.items():
            check_data_casing(config, paths, fs, flag[what], packed)
    recorded = check_resume(config, run)  # first: a resume's vocabulary, casing, shapes
    if resumed:  # held to its recorded casing now; data it was not started on is checked
        # (a run started with unchecked records may still continue on them; a converted
        # model's record names no data)
        before = recorded.get("run", {})
        for what, paths in files.items():
            if getattr(run, DATA_FIELDS[what]) != before.get(DATA_FIELDS[what]):
                check_data_casing(config, paths, fs, flag[what], packed)
    for what, paths in files.items():  # phase 2's records may come with a resume
        check_data_vocabulary(run.vocab_file, paths, fs, flag[what], packed)
    return files


# preflight's keys (what `preflight` returns, Pretraining.files) -> their run flags
DATA_FIELDS = {"train": "train_data", "eval": "eval_data", "phase2": "phase2_train_data"}


def check_data_casing(config: PretrainingConfig, paths: list[str], fs=LOCAL_FILES,
                      what: str = "--train_data", packed: bool = False) -> None:
    """Refuses records built with another casing than config.do_lower_case, or with
    accent stripping other than BERT's rule (strip exactly when lower-casing), which
    every later tokenizer of the model follows.

    build_pretraining_data writes its options beside the records
    (`builder.STATS_FILE`), which pack_pretraining_data copies into a packed
    file's header; where a data file has one, its
    do_lower_case must be this run's, which the model folder records and
    fine-tuning and the export follow. Records without it are not checked, nor
    (`preflight`) are the records a resumed run was started on: `check_resume`
    holds it to the casing its folder recorded; other records (a converted model
    continued, a run continued on a new corpus) are checked.

    Raises:
      ConfigError: naming the flag, the stats file and both values.
    """
    for stats_path, stats in _recorded_tokenizations(paths, fs, packed):
        try:
            built, strip = stats.get("do_lower_case"), stats.get("strip_accents")
        except AttributeError:
            continue  # not an object: nothing recorded to check against
        if built is None:
            continue
        if bool(built) != config.do_lower_case:
            raise ConfigError(
                f"--do_lower_case={str(config.do_lower_case).lower()}: the records of {what} "
                f"were built with --do_lower_case={str(bool(built)).lower()} ({stats_path}); "
                f"pre-train with --do_lower_case={str(bool(built)).lower()}, which the model "
                "folder records for fine-tuning and the export, or rebuild the records with "
                f"--do_lower_case={str(config.do_lower_case).lower()} (a model whose folder "
                "records its casing continues with that one)")
        if strip is not None and bool(strip) != bool(built):
            raise ConfigError(
                f"the records of {what} were built with --strip_accents="
                f"{str(bool(strip)).lower()} and --do_lower_case={str(bool(built)).lower()} "
                f"({stats_path}); a model strips accents exactly when it lower-cases (BERT's "
                "rule, which fine-tuning, the export and convert follow): rebuild them with "
                "--strip_accents=auto")


def check_data_vocabulary(vocab_file: str, paths: list[str], fs=LOCAL_FILES,
                          what: str = "--train_data", packed: bool = False) -> None:
    """Refuses records built with another vocabulary than --vocab_file: ids in range
    (of a vocabulary of the same size, or a smaller one) would train the model on
    other tokens than its vocabulary names. The build records its vocabulary's
    `vocab_sha256` (the token list's, as model folders record theirs); records built
    before it are not checked.

    Raises:
      ConfigError: naming the flag, the stats file and both vocabularies.
    """
    mine = None
    for stats_path, stats in _recorded_tokenizations(paths, fs, packed):
        built = stats.get("vocab_sha256") if isinstance(stats, dict) else None
        if not isinstance(built, str):
            continue
        mine = mine or vocab_fingerprint(vocab_file)
        if built != mine:
            raise ConfigError(
                f"{what}: its records were built with another vocabulary ({stats_path}: "
                f"--vocab_file={stats.get('vocab_file', '?')}, sha256 {built[:12]}) than "
                f"--vocab_file={vocab_file} (sha256 {mine[:12]}); rebuild them with this "
                "vocabulary, or train with theirs")


def _recorded_tokenizations(paths: list[str], fs, packed: bool):
    """(where, its record) for each record of how `paths` were tokenized: the stats
    file beside TFRecords, a packed file's header (pack_pretraining_data copies it
    there). Missing or unreadable records are left out."""
    if packed:
        from electra_tf.data.packed import packed_tokenization

        for path in paths:
            recorded = packed_tokenization(path)
            if recorded is not None:
                yield path, recorded
        return
    yield from records_stats(paths, fs)


def pretraining_masking(config: PretrainingConfig, run: PretrainingRun) -> MaskingConfig:
    """The masking of a run's batches, after checking the vocab file against vocab_size.

    Only the special tokens' ids and the size matter here (the records are
    already token ids), so the vocab file is read without the tokenizer.

    Raises:
      ConfigError: --vocab_size is not the vocab file's size; VocabError: a bad file.
    """
    from electra_tf.objectives.variants import get_objective
    from electra_tf.text.vocab import CLS, MASK, SEP, load_vocab

    vocab = load_vocab(run.vocab_file)
    if len(vocab) != config.vocab_size:
        padded = ("" if len(vocab) > config.vocab_size else
                  f" (for an embedding table of {config.vocab_size} rows, padded past the "
                  f"vocabulary: --vocab_size={len(vocab)} and \"vocab_size\": "
                  f"{config.vocab_size} in --model_hparam_overrides)")
        raise ConfigError(f"vocab_size={config.vocab_size} but {run.vocab_file} holds "
                          f"{len(vocab)} tokens; set --vocab_size to match{padded}")
    ids = {token: i for i, token in enumerate(vocab)}
    return MaskingConfig(mask_prob=config.mask_prob,
                         max_predictions_per_seq=config.resolved_max_predictions_per_seq,
                         mask_id=ids[MASK], cls_id=ids[CLS], sep_id=ids[SEP],
                         vocab_size=len(vocab), **get_objective(config).masking)


# Flags whose values can change the variables (and so the checkpoints).
SHAPE_FLAGS = ("model_size", "model_hparam_overrides", "embedding_size", "vocab_size",
               "max_seq_length", "phase2_max_seq_length", "generator_hidden_size",
               "generator_layers",
               "untied_generator", "untied_generator_embeddings", "uniform_generator",
               "gradient_disentangled_embeddings",
               "objective", "training_algorithm")


# EncoderConfig fields that change neither a variable nor what the layers compute
# from them: a run may continue another's checkpoints with other values (dropout
# off for a last phase; the initializer only draws the weights a restore replaces).
RUN_ONLY_ENCODER_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob",
                           "initializer_range")


def _architecture(encoder):
    """An EncoderConfig without its RUN_ONLY_ENCODER_FIELDS: its shapes and layers."""
    return dataclasses.replace(encoder, **{
        name: getattr(EncoderConfig(), name) for name in RUN_ONLY_ENCODER_FIELDS})


def _variable_signature(config: PretrainingConfig) -> tuple:
    """What fixes the model's variables and layers: the encoders' sizes and activations,
    the weight sharing, the heads (not dropout: RUN_ONLY_ENCODER_FIELDS)."""
    from electra_tf.objectives.variants import get_objective

    objective = get_objective(config)
    encoders = dataclasses.replace(
        config.encoders, generator=_architecture(config.encoders.generator),
        discriminator=_architecture(config.encoders.discriminator))
    return (encoders, config.untied_generator,
            config.untied_generator_embeddings, config.uniform_generator,
            config.gradient_disentangled_embeddings,
            objective.head_kind, objective.uses_discriminator, config.training_algorithm)


def check_resume(config: PretrainingConfig, run: PretrainingRun) -> dict:
    """Refuses to resume a model_dir whose checkpoints this run cannot continue; returns
    the folder's record, read once here ({}: no checkpoints to resume).

    A model_dir holding a model but no checkpoints is refused (a new run would
    replace it). Otherwise only when model_dir holds checkpoints: the vocabulary must be the one
    recorded (same tokens, by fingerprint, where one was recorded), the optimizer
    the recorded one (its moments are in the checkpoints), and no flag may
    change the variables' shapes. Nothing is written here.

    Raises:
      ConfigError: naming the flag, the recorded value and the new one.
    """
    # (a killed conversion's folder had been refused as a model without checkpoints)
    check_no_unfinished_conversion(run.model_dir, "--model_dir")
    if not has_checkpoints(run.model_dir):
        refusal = model_without_checkpoints(run.model_dir)
        if refusal:
            # A fresh run rewrites the record (vocabulary, casing) at once, beside the old
            # weights, which a crash or a refusal then leaves paired with it.
            raise ConfigError(refusal)
        return {}
    try:
        recorded = PretrainingFolder.open(run.model_dir, "--model_dir",
                                          discriminator=False).recorded
    except InputError as e:  # an emptied or damaged record beside the checkpoints
        raise unreadable_record(e, PRETRAINING_CONFIG, run.model_dir) from None
    where = f"{run.model_dir} holds checkpoints of a run"
    want = recorded.get("vocab_sha256", "")
    if want:
        got = vocab_fingerprint(run.vocab_file)
        if got != want:
            from electra_tf.text.vocab import load_vocab

            old = recorded.get("run", {}).get("vocab_file", "?")
            old_size = recorded.get("pretraining", {}).get("vocab_size", "?")
            size = len(load_vocab(run.vocab_file))
            raise ConfigError(
                f"--vocab_file={run.vocab_file} ({size} tokens, sha256 {got[:12]}) "
                f"is not the vocabulary {where} on --vocab_file={old} ({old_size} tokens, "
                f"sha256 {want[:12]}); resume with that vocabulary, or use another --model_dir")
    if "pretraining" not in recorded:
        return recorded
    try:
        before = PretrainingConfig.from_dict(recorded["pretraining"])
    except (ConfigError, TypeError) as e:
        raise ConfigError(f"{run.model_dir}/{PRETRAINING_CONFIG} records settings "
                          f"this electra_tf cannot read ({e}); use another --model_dir") from None
    if before.do_lower_case != config.do_lower_case:
        old = str(before.do_lower_case).lower()
        raise ConfigError(
            f"--do_lower_case={str(config.do_lower_case).lower()}: {where} on text "
            f"{'lower-cased' if before.do_lower_case else 'kept cased'} (--do_lower_case="
            f"{old}); resume with --do_lower_case={old}, or use another --model_dir")
    if before.optimizer != config.optimizer:
        raise ConfigError(
            f"--optimizer={config.optimizer}: {where} with --optimizer={before.optimizer}, "
            f"whose moments its checkpoints hold; resume with --optimizer={before.optimizer}, "
            "or use another --model_dir")
    _check_stage_switch(before, config, run.model_dir, where)
    old_signature = _variable_signature(before)
    if _variable_signature(config) == old_signature:
        return recorded
    changed = []
    for name in SHAPE_FLAGS:
        old, new = getattr(before, name), getattr(config, name)
        if old == new:
            continue
        try:  # only the flags that change the variables by themselves
            relevant = _variable_signature(
                dataclasses.replace(before, **{name: new})) != old_signature
        except (ConfigError, ValueError):
            relevant = True
        if relevant and name == "model_hparam_overrides":
            changed.append(_overrides_change(before, config))
        elif relevant:
            changed.append(f"--{name}={_flag_value(new)} (it was --{name}={_flag_value(old)})")
    positions = [c.encoders.discriminator.max_position_embeddings for c in (before, config)]
    if positions[0] != positions[1]:  # (a phase 2 beyond 512 tokens added to a phase-1 run)
        changed.append(f"the position table: {positions[1]} positions, where the checkpoints "
                       f"hold {positions[0]} (max(512, --max_seq_length, "
                       "--phase2_max_seq_length) unless --model_hparam_overrides sets "
                       "max_position_embeddings)")
    raise ConfigError(
        f"{where} with other variable shapes: " + ("; ".join(changed) or "other sizes")
        + "; rerun with the recorded values, or use another --model_dir")


def _switch_step(config: PretrainingConfig) -> int | None:
    """The step where a run's second stage starts (two-stage training's discriminator
    stage, phase 2), None without one."""
    return config.stage_starts[0] if config.stage_starts else None


def _stage(config: PretrainingConfig) -> str:
    switch = _switch_step(config)
    if switch is None:
        return "no phase 2"
    if config.training_algorithm == "two_stage":
        return (f"the discriminator's stage from step {switch} (half of --num_train_steps="
                f"{config.num_train_steps})")
    return (f"phase 2 from step {switch} (--num_train_steps={config.num_train_steps} - "
            f"--phase2_steps={config.phase2_steps})")


def _check_stage_switch(before: PretrainingConfig, config: PretrainingConfig, model_dir: str,
                        where: str) -> None:
    """Refuses a resume that moves the start of the second stage (two-stage training's
    discriminator stage, phase 2) to or from a step the checkpoints are past: the
    steps trained in one stage would be counted in the other (two-stage training
    re-initialized its trained discriminator from the generator; a phase-2 run went
    back to phase 1). Moving it while the checkpoints are before both is allowed, and
    so is adding phase 2 at the checkpoints' step or later.

    Raises:
      ConfigError: naming both switch steps and what to give.
    """
    old, new = _switch_step(before), _switch_step(config)
    step = latest_checkpoint_step(model_dir)
    if old == new or step is None:
        return
    past = [s for s in (old, new) if s is not None and s < step]
    if not past:
        return
    stages = [_stage(before), _stage(config)]
    if "two_stage" in (before.training_algorithm, config.training_algorithm) and \
            before.training_algorithm != config.training_algorithm:
        # (the advice had been the --num_train_steps the run gave already, and the
        # stage "no phase 2")
        stages = [stage if _switch_step(c) is not None else
                  f"no second stage (--training_algorithm={c.training_algorithm})"
                  for c, stage in zip((before, config), stages)]
        keep = (f"resume with --training_algorithm={before.training_algorithm}"
                + (f" --num_train_steps={before.num_train_steps}"
                   if before.num_train_steps != config.num_train_steps
                   and before.training_algorithm == "two_stage" else ""))
    elif old is None:
        keep = (f"start phase 2 at step {step} or later (--num_train_steps - --phase2_steps "
                f">= {step})")
    elif before.training_algorithm == "two_stage":
        keep = f"resume with --num_train_steps={before.num_train_steps}"
    else:
        keep = f"keep --num_train_steps - --phase2_steps = {old}"
    raise ConfigError(
        f"{where} at step {step} with {stages[0]}; this run's flags give "
        f"{stages[1]}, which would count steps already trained in the other stage; "
        f"{keep}, or use another --model_dir")


def changed_settings(before: PretrainingConfig, config: PretrainingConfig,
                     step: int | None = None) -> list[str]:
    """The settings a resumed run changes that change what is trained (allowed, but not
    the run its checkpoints started): "--name=new (it was old)" each. The schedule
    (learning rate, warmup, steps, the second stage's schedule flags, which
    check_resume holds to the steps trained), the periods and the eval settings
    may change without a word (phase 2's batch size and sequence length are said,
    as phase 1's are), and check_resume refuses what changes the variables, the
    vocabulary, the casing or the optimizer. Given the `step` resumed, phase 2's
    settings are said only once phase 2 has trained (a phase 2 added to a run that
    has not reached it continues that run exactly)."""
    # (and --model_size where the overrides keep every shape: it had changed unsaid, and
    # the record and the start line then named a size the model is not)
    said_shapes = ("objective", "max_seq_length", "phase2_max_seq_length", "model_size")
    quiet = {"learning_rate", "num_warmup_steps", "num_train_steps", "iterations_per_loop",
             "save_checkpoints_steps", "keep_checkpoint_max", "num_eval_steps",
             "eval_batch_size", "prior_output_biases", "do_lower_case", "optimizer",
             *(name for name in SHAPE_FLAGS if name not in said_shapes)}
    phase2_trained = step is None or (before.phase2_steps and step > config.phase2_start)
    def value(c: PretrainingConfig, name: str):
        # adam_bias_correction and lr_decay_power unset are the size's and the
        # optimizer's defaults (their values, not None); max_predictions_per_seq unset
        # follows mask_prob, which is said itself
        if name in ("adam_bias_correction", "lr_decay_power"):
            return getattr(c, f"resolved_{name}")
        return getattr(c, name)

    return [f"--{f.name}={_flag_value(value(config, f.name))} (it was "
            f"{_flag_value(value(before, f.name))})"
            for f in dataclasses.fields(PretrainingConfig)
            if f.name not in quiet and (not f.name.startswith("phase2_") or (
                phase2_trained and f.name in ("phase2_train_batch_size",
                                              "phase2_max_seq_length")))
            and value(before, f.name) != value(config, f.name)]


def _overrides_change(before: PretrainingConfig, config: PretrainingConfig) -> str:
    """--model_hparam_overrides' keys that change the discriminator's shapes or layers."""
    old, new = (_architecture(c.discriminator_config()) for c in (before, config))
    keys = [f"{f.name}={getattr(new, f.name)!r} (it was {getattr(old, f.name)!r})"
            for f in dataclasses.fields(EncoderConfig) if getattr(old, f.name) != getattr(
                new, f.name)]
    return ("--model_hparam_overrides changes " + ", ".join(keys) if keys else
            f"--model_hparam_overrides={_flag_value(config.model_hparam_overrides)} (it was "
            f"--model_hparam_overrides={_flag_value(before.model_hparam_overrides)})")


def _flag_value(value) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else str(value)


def _tensorflow_files():
    """tf.io.gfile's file system; where TensorFlow is not installed, one line saying which
    input pipelines read without it (only the JAX backend gets here then: its default,
    tf.data, reads through TensorFlow)."""
    try:
        return tensorflow_files()
    except ModuleNotFoundError as e:
        if e.name != "tensorflow":
            raise
        raise ConfigError("--jax_input_pipeline=tf.data (the default) reads the records "
                          "through TensorFlow, which is not installed here; pass "
                          "--jax_input_pipeline=numpy (the same TFRecords) or packed "
                          "(pack_pretraining_data's files)") from None
