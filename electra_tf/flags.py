"""absl flags for the config dataclasses; only `run_*` entry points use them.

Every field of `PretrainingConfig` and `PretrainingRun` (and of `FinetuningConfig`
and `FinetuningRun`) becomes a flag of the same name, with the field's
`metadata["help"]` as help text, so a flagfile line like `--disc_weight=50.0`
means exactly the config field. Flags that are not set keep the dataclass
defaults. A field that takes one of a few names (its metadata's "choices")
lists them in its help; the config refuses any other at construction, with
one line. A name already defined is left as it is: the `RuntimeOptions` fields
that both runs share are defined once where one process defines both sets.
Each command lists only its own: run_finetuning has no flag for the runtime
options only pre-training takes (config.PRETRAINING_ONLY_OPTIONS, the JAX
loop's calls, input and hosts).

The flags belong to the module that calls a `define_*` function (absl's key
flags: this module disclaims them), so `python -m electra_tf.run_pretraining
--help` lists them, and absl's and TensorFlow's own stay behind --helpfull.
"""

from __future__ import annotations

import dataclasses
import json

from absl import flags

from electra_tf.core import config as config_lib
from electra_tf.core.errors import ConfigError

# Flags defined below are key flags of the entry point that asks for them, not of this
# module: --help lists the main module's key flags alone.
flags.disclaim_key_flags()

_DEFINERS = {
    "int": flags.DEFINE_integer,
    "float": flags.DEFINE_float,
    "bool": flags.DEFINE_bool,
    "str": flags.DEFINE_string,
}


def _define(cls, flag_values, leave_out: tuple[str, ...] = ()) -> None:
    """Defines one flag per field of the dataclass `cls` not yet in `flag_values`
    (and not in `leave_out`: fields whose default the command always keeps).

    Raises:
      TypeError: a field has no help text or a type no flag can hold.
    """
    for f in dataclasses.fields(cls):
        help_text = f.metadata.get("help")
        if not help_text:
            raise TypeError(f"{cls.__name__}.{f.name} has no help text: declare it with "
                            "config._field(default, help)")
        if f.name in flag_values or f.name in leave_out:
            continue
        choices = f.metadata.get("choices")
        if choices:
            help_text += " (one of: " + ", ".join(c or "''" for c in choices) + ")"
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        kind = str(f.type)
        if kind == "dict":
            flags.DEFINE_string(f.name, json.dumps(default), help_text + " (JSON)",
                                flag_values=flag_values)
        elif kind == "int | None":
            flags.DEFINE_integer(f.name, default, help_text, flag_values=flag_values)
        elif kind == "float | None":  # unset: None (the config resolves it)
            flags.DEFINE_float(f.name, default, help_text, flag_values=flag_values)
        elif kind == "bool | None":  # unset: None (the config resolves it)
            flags.DEFINE_bool(f.name, default, help_text, flag_values=flag_values)
        elif kind in _DEFINERS:
            _DEFINERS[kind](f.name, default, help_text, flag_values=flag_values)
        else:
            raise TypeError(f"no flag type for {cls.__name__}.{f.name}: {kind}")


def define_pretraining_flags(flag_values=flags.FLAGS) -> None:
    """Defines one flag per PretrainingConfig and PretrainingRun field."""
    _define(config_lib.PretrainingConfig, flag_values)
    _define(config_lib.PretrainingRun, flag_values)


def define_demo_flags(flag_values=flags.FLAGS) -> None:
    """run_pretraining's demo-data flags (data/demo_corpus.py builds the data)."""
    flags.DEFINE_string("demo_data_dir", "", "If set, build the embedded demo corpus, its "
                        "vocab and its train/held-out records here on first use, and train "
                        "on them; ignored when --train_data is given.", flag_values=flag_values)
    flags.DEFINE_integer("demo_vocab_size", 4000, "Vocabulary size of the demo data.",
                         flag_values=flag_values)
    flags.DEFINE_enum("demo_corpus", "stdlib", ["stdlib", "installed"],
                      "The demo corpus: docstrings of the standard library, or of it and every "
                      "installed package (data/demo_corpus.py).", flag_values=flag_values)


def define_finetuning_flags(flag_values=flags.FLAGS) -> None:
    """Defines one flag per FinetuningConfig and FinetuningRun field, but the runtime
    options only pre-training takes (config.PRETRAINING_ONLY_OPTIONS)."""
    _define(config_lib.FinetuningConfig, flag_values)
    _define(config_lib.FinetuningRun, flag_values, leave_out=config_lib.PRETRAINING_ONLY_OPTIONS)


def check_pretraining_flags(data_fields=(), flag_values=flags.FLAGS) -> None:
    """pretraining_configs' checks of the flags alone, where the data is yet to be
    made: each of `data_fields` (e.g. the demo's train_data, eval_data, vocab_file,
    vocab_size) that no flag gives stands in for what will be set, and no file is
    read. So a bad flag is refused before minutes of data building, not after.

    Raises:
      ConfigError: as pretraining_configs.
    """
    values = _values(config_lib.PretrainingConfig, flag_values)
    run_values = _values(config_lib.PretrainingRun, flag_values)
    for name in data_fields:  # a config's field (vocab_size) keeps its default
        if name in run_values and not flag_values[name].present and not run_values[name]:
            run_values[name] = "(made)"
    config_lib.check_run(config_lib.PretrainingConfig.from_dict(values),
                         config_lib.PretrainingRun(**run_values))


def finetuning_configs(flag_values=flags.FLAGS):
    """Parsed flags -> (FinetuningConfig, FinetuningRun), each checked at construction,
    and the flags a fine-tuning run requires (the classes allow them empty)."""
    values = _values(config_lib.FinetuningConfig, flag_values)
    if not values["task_name"]:
        raise ConfigError("task_name is required")
    config = config_lib.FinetuningConfig.from_dict(values)
    run = config_lib.FinetuningRun(**_values(config_lib.FinetuningRun, flag_values))
    for name in ("model_dir", "data_dir"):
        if not getattr(run, name):
            raise ConfigError(f"--{name} is required")
    run.check_start()
    default = config_lib.FinetuningConfig.__dataclass_fields__["no_answer_threshold"].default
    if config.no_answer_threshold != default and config.squad_null_rule != "combined":
        # (get_task refuses it too; the command had trained by qa_na_threshold silently)
        raise ConfigError("--no_answer_threshold is the threshold of "
                          "--squad_null_rule=combined; the default rule (answerable) reads "
                          "--qa_na_threshold")
    return config, run


def _values(cls, flag_values) -> dict:
    """The fields of `cls` that are flags, by the flags' values (a field the command
    has no flag for keeps its default)."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.name not in flag_values:
            continue
        value = flag_values[f.name].value
        if str(f.type) == "dict":
            try:
                value = json.loads(value) if value else {}
            except (ValueError, RecursionError) as e:  # also 4,300+ digits, deep nesting
                raise ConfigError(f"--{f.name} is not valid JSON: {e}") from None
        out[f.name] = value
    return out


def runtime_options(flag_values=flags.FLAGS) -> config_lib.RuntimeOptions:
    """Parsed flags -> the RuntimeOptions alone (checked at construction).

    For what must happen before the rest of the flags are read (the
    distribution strategy, a multi-host start), under either set of flags.
    """
    return config_lib.RuntimeOptions(**_values(config_lib.RuntimeOptions, flag_values))


def pretraining_configs(flag_values=flags.FLAGS):
    """Parsed flags -> (PretrainingConfig, PretrainingRun), each checked at construction,
    and together (config.check_run).

    Without --vocab_size, the vocabulary's size is --vocab_file's (a learned
    vocabulary often holds fewer pieces than asked for); given, it must match
    the file (the run checks). Without --vocab_file, a run that resumes a
    model_dir reads the vocabulary the folder carries (folders.vocabulary.folder_vocab,
    checked by its fingerprint).
    """
    values = _values(config_lib.PretrainingConfig, flag_values)
    run_values = _values(config_lib.PretrainingRun, flag_values)
    if not run_values["vocab_file"] and run_values["model_dir"]:
        from electra_tf.folders.files import check_no_unfinished_conversion, has_checkpoints
        from electra_tf.folders.vocabulary import folder_vocab

        check_no_unfinished_conversion(run_values["model_dir"], "--model_dir")
        if has_checkpoints(run_values["model_dir"]):
            run_values["vocab_file"] = folder_vocab(run_values["model_dir"])
            if not run_values["vocab_file"]:  # (had been: "vocab_file is required")
                raise ConfigError(f"--vocab_file is required: {run_values['model_dir']} "
                                  "records no vocabulary (a conversion that found none "
                                  "keeps none); pass the vocab.txt its model was "
                                  "pre-trained with")
        else:  # (a converted folder had been told first that vocab_file is required)
            from electra_tf.folders.pretraining import model_without_checkpoints

            refusal = model_without_checkpoints(run_values["model_dir"])
            if refusal:
                raise ConfigError(refusal)
    if not flag_values["vocab_size"].present and run_values["vocab_file"]:
        from electra_tf.text.vocab import load_vocab

        values["vocab_size"] = len(load_vocab(run_values["vocab_file"]))
    pre = config_lib.PretrainingConfig.from_dict(values)
    run = config_lib.PretrainingRun(**run_values)
    config_lib.check_run(pre, run)
    return pre, run
