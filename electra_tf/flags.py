"""absl flags for the config dataclasses; only `run_*` entry points use them.

Every field of `PretrainingConfig` and `RunConfig` becomes a flag of the same
name, with its end-of-line comment in config.py as help text, so a flagfile
line like `--disc_weight=50.0` means exactly the config field. Flags that are
not set keep the dataclass defaults.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re

from absl import flags

from electra_tf import config as config_lib

_DEFINERS = {
    "int": flags.DEFINE_integer,
    "float": flags.DEFINE_float,
    "bool": flags.DEFINE_bool,
    "str": flags.DEFINE_string,
}


def _field_help(cls) -> dict[str, str]:
    """End-of-line comments of the dataclass body: `name: type = x  # help`."""
    source = inspect.getsource(cls)
    return {m.group(1): m.group(2).strip()
            for m in re.finditer(r"^\s+(\w+):[^#\n]*#\s*(.*)$", source, re.M)}


def _define(cls, flag_values) -> None:
    helps = _field_help(cls)
    for f in dataclasses.fields(cls):
        if f.name in flag_values:
            continue
        help_text = helps.get(f.name, f.name)
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        kind = str(f.type)
        if kind == "dict":
            flags.DEFINE_string(f.name, json.dumps(default), help_text + " (JSON)",
                                flag_values=flag_values)
        elif kind == "int | None":
            flags.DEFINE_integer(f.name, default, help_text, flag_values=flag_values)
        elif kind in _DEFINERS:
            _DEFINERS[kind](f.name, default, help_text, flag_values=flag_values)
        else:
            raise TypeError(f"no flag type for {cls.__name__}.{f.name}: {kind}")


def define_pretraining_flags(flag_values=flags.FLAGS) -> None:
    """Defines one flag per PretrainingConfig and RunConfig field."""
    _define(config_lib.PretrainingConfig, flag_values)
    _define(config_lib.RunConfig, flag_values)


def define_demo_flags(flag_values=flags.FLAGS) -> None:
    """run_pretraining's demo-data flags (data/demo_corpus.py builds the data)."""
    flags.DEFINE_string("demo_data_dir", "", "If set, build the embedded demo corpus, its "
                        "vocab and its train/held-out records here on first use, and train "
                        "on them.", flag_values=flag_values)
    flags.DEFINE_integer("demo_vocab_size", 4000, "Vocabulary size of the demo data.",
                         flag_values=flag_values)
    flags.DEFINE_enum("demo_corpus", "stdlib", ["stdlib", "installed"],
                      "The demo corpus: docstrings of the standard library, or of it and every "
                      "installed package (data/demo_corpus.py).", flag_values=flag_values)


def define_finetuning_flags(flag_values=flags.FLAGS) -> None:
    """Defines one flag per FinetuningConfig and FinetuneRun field."""
    _define(config_lib.FinetuningConfig, flag_values)
    _define(config_lib.FinetuneRun, flag_values)


def finetuning_configs(flag_values=flags.FLAGS):
    """Parsed flags -> (FinetuningConfig, FinetuneRun), both validated."""
    config = config_lib.FinetuningConfig.from_dict(_values(config_lib.FinetuningConfig,
                                                           flag_values))
    run = config_lib.FinetuneRun(**_values(config_lib.FinetuneRun, flag_values)).validate()
    return config, run


def _values(cls, flag_values) -> dict:
    out = {}
    for f in dataclasses.fields(cls):
        value = flag_values[f.name].value
        if str(f.type) == "dict":
            try:
                value = json.loads(value) if value else {}
            except json.JSONDecodeError as e:
                raise config_lib.ConfigError(f"--{f.name} is not valid JSON: {e}") from None
        out[f.name] = value
    return out


def pretraining_configs(flag_values=flags.FLAGS):
    """Parsed flags -> (PretrainingConfig, RunConfig), both validated."""
    pre = config_lib.PretrainingConfig.from_dict(_values(config_lib.PretrainingConfig,
                                                         flag_values))
    run = config_lib.RunConfig(**_values(config_lib.RunConfig, flag_values)).validate()
    return pre, run
