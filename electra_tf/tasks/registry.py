"""Task names -> Task objects for the fine-tuning CLI.

    task = task_from_config(config)   # a FinetuningConfig: its name and task options
    task = get_task("mrpc")           # the same with the FinetuningConfig defaults
"""

from __future__ import annotations

import json

from electra_tf.core.config import FinetuningConfig
from electra_tf.core.errors import ConfigError

TAGGING_TASKS = ("ner", "chunking")
SQUAD_TASKS = {"squad_v1": "1.1", "squad_v2": "2.0"}
MRQA_TASKS = ("newsqa", "naturalqs", "triviaqa", "searchqa", "mrqa")  # tasks/mrqa.py
OWN_DATA_TASKS = ("classification", "tagging")  # your own files (classification.py, tagging.py)
# FinetuningConfig fields only the own-data tasks read (--label_names: tagging tasks too).
_OWN_DATA_OPTIONS = ("text_column", "text_pair_column", "label_column", "regression")


def task_names() -> list[str]:
    from electra_tf.tasks.glue import GLUE_TASKS

    return (sorted(GLUE_TASKS) + sorted(SQUAD_TASKS) + list(MRQA_TASKS) + list(TAGGING_TASKS)
            + list(OWN_DATA_TASKS))


def task_from_config(config: FinetuningConfig):
    """A fresh Task for `config.task_name`, with the task options of `config`.

    The options: tagging_scheme (ner/chunking), double_unordered (MRPC,
    STS-B; ignored by the other GLUE tasks), SQuAD's and MRQA's head
    (joint_prediction, beam_size: the task's `head_options`) and SQuAD 2.0's null rule and its
    threshold (`squad_null_options`); classification's text_column,
    text_pair_column, label_column and regression; label_names
    (comma-separated) for classification and the tagging tasks.

    Raises:
      ConfigError: an unknown task, an own-data option given to a task that
        does not read it, or label_names that are not distinct names.
    """
    from electra_tf.tasks import glue

    name = config.task_name
    defaults = FinetuningConfig()
    given = [f for f in _OWN_DATA_OPTIONS if getattr(config, f) != getattr(defaults, f)]
    if name != "classification" and given:
        raise ConfigError(f"--{given[0]} is an option of --task_name=classification, not of "
                          f"{name!r}")
    label_names = _label_names(config.label_names)
    if label_names is not None and name not in ("classification", "tagging") + TAGGING_TASKS:
        raise ConfigError(f"--label_names is for classification and tagging tasks; {name!r} "
                          "has its own labels")
    if name == "classification":
        from electra_tf.tasks.classification import ClassificationTask

        if config.regression and label_names is not None:
            raise ConfigError("--regression predicts a number: it takes no --label_names")
        try:
            return ClassificationTask(
                text_column=config.text_column, text_pair_column=config.text_pair_column,
                label_column=config.label_column, label_names=label_names,
                regression=config.regression)
        except ValueError as e:
            raise ConfigError(f"--task_name=classification: {e}") from None
    if name == "tagging":
        from electra_tf.tasks.tagging import TaggingTask

        try:
            return TaggingTask(name=name, label_names=label_names, scheme=None)
        except ValueError as e:  # a name with a space
            raise ConfigError(f"--label_names: {e}") from None
    if name in glue.GLUE_TASKS:
        task = glue.get_task(name)
        return glue.get_task(name, double_unordered=config.double_unordered) \
            if task.unordered else task
    if name in SQUAD_TASKS:
        from electra_tf.tasks.squad import SquadTask

        return SquadTask(version=SQUAD_TASKS[name], joint_prediction=config.joint_prediction,
                         beam_size=config.beam_size, **squad_null_options(config.to_dict()))
    if name in MRQA_TASKS:
        from electra_tf.tasks.mrqa import MrqaTask

        return MrqaTask(name, joint_prediction=config.joint_prediction,
                        beam_size=config.beam_size)
    if name in TAGGING_TASKS:
        from electra_tf.tasks.tagging import TaggingTask

        try:
            return TaggingTask(name=name, label_names=label_names, scheme=config.tagging_scheme)
        except ValueError as e:  # label names outside the scheme
            raise ConfigError(f"--label_names: {e}") from None
    raise ConfigError(f"unknown task_name {name!r}; known: {', '.join(task_names())}")


def _label_names(value: str) -> tuple[str, ...] | None:
    """--label_names "a,b,c" -> ("a", "b", "c"); '["a,b", "c"]' (a JSON list, for names
    holding commas) -> ("a,b", "c"); "" -> None (learned from train).

    Raises:
      ConfigError: an empty or repeated name, or a "[" that does not open a JSON list
        of strings.
    """
    if not value.strip():
        return None
    if value.strip().startswith("["):
        try:
            names = json.loads(value)
        except json.JSONDecodeError as e:
            raise ConfigError(f"--label_names {value!r} opens with [ but is not a JSON list "
                              f"({e})") from None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ConfigError(f"--label_names {value!r}: expected a JSON list of strings")
        names = tuple(names)
    else:
        names = tuple(n.strip() for n in value.split(","))
    if not all(names) or len(set(names)) != len(names):
        raise ConfigError(f"--label_names must be distinct non-empty names separated by "
                          f"commas (or a JSON list of them), got {value!r}")
    return names


def format_label_names(names) -> str:
    """The --label_names value `_label_names` reads back as `names`: comma-separated, or
    a JSON list where a name holds a comma, starts with [ or has spaces at its ends."""
    if any("," in n or n.startswith("[") or n != n.strip() for n in names):
        return json.dumps(list(names), ensure_ascii=False)
    return ",".join(names)


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
    rule = finetuning["squad_null_rule"]
    threshold = finetuning["qa_na_threshold" if rule == "answerable" else "no_answer_threshold"]
    return {"null_odds_from": rule, "no_answer_threshold": float(threshold)}


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
    fields = FinetuningConfig.__dataclass_fields__
    unknown = sorted(set(options) - set(fields))
    if unknown:
        raise ConfigError(f"get_task: unknown option(s) {', '.join(unknown)}; the options are "
                          "FinetuningConfig fields")
    if "no_answer_threshold" in options and \
            options.get("squad_null_rule", fields["squad_null_rule"].default) != "combined":
        raise ConfigError("get_task: no_answer_threshold is the threshold of "
                          "squad_null_rule='combined'; the default rule ('answerable') "
                          "reads qa_na_threshold")
    return task_from_config(FinetuningConfig(task_name=name, **options))
