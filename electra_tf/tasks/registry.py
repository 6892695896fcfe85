"""Task names -> Task objects for the fine-tuning CLI.

    task = task_from_config(config)   # a FinetuningConfig: its name and task options
    task = get_task("mrpc")           # the same with the FinetuningConfig defaults

Each family of tasks owns its options: its module (glue.py, squad.py, mrqa.py,
tagging.py, classification.py) declares them as `Options` (the
FinetuningConfig fields it reads) and builds its tasks from them
(`task_from_options`). An option of one family given to a task of another is
refused here, in the words of the family that owns it. A new family is a
module of that shape and a line in FAMILIES.
"""

from __future__ import annotations

import importlib

from electra_tf.core.config import FinetuningConfig
from electra_tf.core.errors import ConfigError
from electra_tf.tasks.base import format_label_names, parse_label_names

__all__ = ["FAMILIES", "format_label_names", "get_task", "has_own_labels",
           "squad_null_options", "task_from_config", "task_names", "task_options"]

# Task families: module in tasks/ -> its task names (None: the module's GLUE_TASKS). The
# order is that in which a refused option is looked for (your own files' options first).
FAMILIES = {
    "classification": ("classification",),
    "tagging": ("ner", "chunking", "tagging"),
    "glue": None,
    "squad": ("squad_v1", "squad_v2"),
    "mrqa": ("newsqa", "naturalqs", "triviaqa", "searchqa", "mrqa"),
}
TAGGING_TASKS = ("ner", "chunking")
SQUAD_TASKS = {"squad_v1": "1.1", "squad_v2": "2.0"}
MRQA_TASKS = FAMILIES["mrqa"]  # tasks/mrqa.py
OWN_DATA_TASKS = ("classification", "tagging")  # your own files (classification.py, tagging.py)
# The original's task names (its finetune/task_builder.py) that electra_tf spells otherwise:
# read in the original's fine-tuned checkpoints (interop/tf1.py), and named in the refusal
# of a --task_name so spelled.
ORIGINAL_TASK_NAMES = {"sst": "sst2", "sts": "stsb", "squad": "squad_v2",
                       "squadv1": "squad_v1", "chunk": "chunking"}


def _module(family: str):
    return importlib.import_module(f"electra_tf.tasks.{family}")


def _names(family: str) -> tuple[str, ...]:
    names = FAMILIES[family]
    return tuple(_module(family).GLUE_TASKS) if names is None else names


def task_names() -> list[str]:
    return (sorted(_names("glue")) + sorted(SQUAD_TASKS) + list(MRQA_TASKS)
            + list(TAGGING_TASKS) + list(OWN_DATA_TASKS))


def task_options(name: str) -> tuple[str, ...]:
    """The FinetuningConfig fields task `name` takes (its family's Options).

    Raises:
      ConfigError: an unknown task.
    """
    return _module(_family_of(name)).Options.names()


def _family_of(name: str) -> str:
    for family in FAMILIES:
        if name in _names(family):
            return family
    several = [n for n in str(name).replace(" ", ",").split(",") if n]
    if len(several) > 1 and all(n in task_names() or spelled_as(n) for n in several):
        # the original's multi-task fine-tuning (its task_names list)
        raise ConfigError(f"--task_name={name}: a run fine-tunes one task (the original's "
                          "multi-task fine-tuning, several tasks on one encoder, is not "
                          "implemented); run each task on its own")
    ours = spelled_as(name)
    if ours:
        raise ConfigError(f"unknown task_name {name!r}: electra_tf calls that task {ours} "
                          f"(--task_name={ours})")
    raise ConfigError(f"unknown task_name {name!r}; known: {', '.join(task_names())}")


def _folded(name) -> str:
    return "".join(c for c in str(name).lower() if c.isalnum())


def spelled_as(name) -> str | None:
    """The task `name` spells otherwise: the original's name for it (`sst`, `sts`,
    `squad`, `squadv1`, `chunk`) or another case or punctuation of ours (GLUE's folder
    names: `SST-2`, `STS-B`, `CoLA`); None for a name of no task (or one of ours)."""
    if name in task_names():
        return None
    known = [ours for theirs, ours in ORIGINAL_TASK_NAMES.items()
             if _folded(theirs) == _folded(name)]
    known += [n for n in task_names() if _folded(n) == _folded(name)]
    return known[0] if known else None


def has_own_labels(name: str) -> bool:
    """Whether task `name` has labels of its own (a GLUE task: its label set and order,
    or its regression), rather than your data's or none (a span task)."""
    return _family_of(name) == "glue"


def _refuse_others_options(name: str, family: str, config: FinetuningConfig) -> None:
    """Refuses an option of another family, set to other than its default, naming it.

    Raises:
      ConfigError: "--OPTION is an option of --task_name=A/B, not of 'NAME'" (or the
        owning family's own line, its Options.refusals).
    """
    mine = set(_module(family).Options.names())
    defaults = FinetuningConfig()
    for other in FAMILIES:
        options = _module(other).Options
        for field in options.names():
            if field in mine or getattr(config, field) == getattr(defaults, field):
                continue
            line = options.refusals.get(field)
            if line is None:
                owners = [n for f in FAMILIES if field in _module(f).Options.names()
                          for n in _names(f)]
                line = (f"--{field} is an option of --task_name={'/'.join(owners)}, "
                        "not of {name!r}")
            raise ConfigError(line.format(name=name))


def task_from_config(config: FinetuningConfig):
    """A fresh Task for `config.task_name`, with the task options of `config`.

    The options each family reads are its module's `Options`: double_unordered
    and classifier_head (GLUE; double_unordered matters to MRPC and STS-B),
    joint_prediction, beam_size and SQuAD 2.0's null rule and its thresholds
    (squad), joint_prediction and beam_size (the MRQA tasks), tagging_scheme and
    label_names (ner, chunking, tagging), text_column, text_pair_column,
    label_column, regression, label_names and classifier_head (classification).
    label_names is comma-separated (or a JSON list).

    Raises:
      ConfigError: an unknown task, an option given to a task that does not
        take it, or options the task refuses (label_names that are not distinct
        names, ...).
    """
    name = config.task_name
    family = _family_of(name)
    _refuse_others_options(name, family, config)
    module = _module(family)
    return module.task_from_options(name, module.Options.from_config(config))


def unused_options(config: FinetuningConfig) -> list[str]:
    """The task options `config` gives that change nothing for its task (each as a note
    names it: `TaskOptions.unused`), e.g. --beam_size with --joint_prediction=false, or
    SQuAD 2.0's threshold on squad_v1. An option of another family is refused instead
    (task_from_config)."""
    name = config.task_name
    return _module(_family_of(name)).Options.from_config(config).unused(name)


def decoding_options(config: FinetuningConfig) -> tuple[str, ...]:
    """The FinetuningConfig fields that only decode its task's predictions
    (`TaskOptions.decoding`): SQuAD's beam or n-best, longest answer and no-answer rule."""
    name = config.task_name
    return _module(_family_of(name)).Options.from_config(config).decoding(name)


_label_names = parse_label_names  # the name earlier versions had


def squad_null_options(finetuning: dict) -> dict:
    """SquadTask's null_odds_from and no_answer_threshold from FinetuningConfig fields.

    Args:
      finetuning: FinetuningConfig.to_dict(), or the "finetuning" dict of a span
        head's finetuning_config.json (folders.finetuned.read_finetuning_config checks
        that it holds these fields).
    Returns:
      {"null_odds_from": rule, "no_answer_threshold": the rule's threshold
      (qa_na_threshold for "answerable", no_answer_threshold for "combined")}.
    """
    return _module("squad").null_options(finetuning)


def get_task(name: str, **options):
    """A fresh Task for `name` (GLUE task, squad_v1/squad_v2, MRQA_TASKS, ner/chunking,
    classification/tagging).

    Args:
      options: FinetuningConfig fields (tagging_scheme="BIOES",
        joint_prediction=False, ...); the others take their defaults.
        SQuAD 2.0's threshold is qa_na_threshold under the default null rule
        ("answerable"); no_answer_threshold is that of squad_null_rule="combined",
        and is refused without it rather than ignored.

    Raises:
      ConfigError: an unknown option, or no_answer_threshold without the rule it sets.
    """
    return task_from_config(task_config(name, **options))


def task_config(name: str, what: str = "get_task", /, **options) -> FinetuningConfig:
    """The FinetuningConfig of task `name` with `options` (as `get_task` takes them);
    `what` names the caller in the error.

    Raises:
      ConfigError: an unknown option, or no_answer_threshold without the rule it sets.
    """
    fields = FinetuningConfig.__dataclass_fields__
    unknown = sorted(set(options) - set(fields))
    if unknown:
        raise ConfigError(f"{what}: unknown option(s) {', '.join(unknown)}; the options are "
                          "FinetuningConfig fields")
    if "no_answer_threshold" in options and \
            options.get("squad_null_rule", fields["squad_null_rule"].default) != "combined":
        raise ConfigError(f"{what}: no_answer_threshold is the threshold of "
                          "squad_null_rule='combined'; the default rule ('answerable') "
                          "reads qa_na_threshold")
    return FinetuningConfig(task_name=name, **options)
