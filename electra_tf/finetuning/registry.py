"""Task names -> Task objects for the fine-tuning CLI.

    task = task_from_config(config)   # a FinetuningConfig: its name and task options
    task = get_task("mrpc")           # the same with the FinetuningConfig defaults
"""

from __future__ import annotations

from electra_tf.config import FinetuningConfig
from electra_tf.errors import ConfigError

TAGGING_TASKS = ("ner", "chunking")
SQUAD_TASKS = {"squad_v1": "1.1", "squad_v2": "2.0"}


def task_names() -> list[str]:
    from electra_tf.finetuning.glue import GLUE_TASKS

    return sorted(GLUE_TASKS) + sorted(SQUAD_TASKS) + list(TAGGING_TASKS)


def task_from_config(config: FinetuningConfig):
    """A fresh Task for `config.task_name`, with the task options of `config`.

    The options: tagging_scheme (ner/chunking), double_unordered (MRPC,
    STS-B; ignored by the other GLUE tasks), SQuAD's head (joint_prediction,
    beam_size: the task's `head_options`) and SQuAD 2.0's null rule and its
    threshold (`squad_null_options`).
    """
    from electra_tf.finetuning import glue

    name = config.task_name
    if name in glue.GLUE_TASKS:
        task = glue.get_task(name)
        return glue.get_task(name, double_unordered=config.double_unordered) \
            if task.unordered else task
    if name in SQUAD_TASKS:
        from electra_tf.finetuning.squad import SquadTask

        return SquadTask(version=SQUAD_TASKS[name], joint_prediction=config.joint_prediction,
                         beam_size=config.beam_size, **squad_null_options(config.to_dict()))
    if name in TAGGING_TASKS:
        from electra_tf.finetuning.tagging import TaggingTask

        return TaggingTask(name=name, scheme=config.tagging_scheme)
    raise ConfigError(f"unknown task_name {name!r}; known: {', '.join(task_names())}")


def squad_null_options(finetuning: dict) -> dict:
    """SquadTask's null_odds_from and no_answer_threshold from FinetuningConfig fields.

    Args:
      finetuning: FinetuningConfig.to_dict(), or the "finetuning" dict of a
        finetuning_config.json. A record without squad_null_rule was written
        before the rule existed: its model used the "combined" rule.
    Returns:
      {"null_odds_from": rule, "no_answer_threshold": the rule's threshold
      (qa_na_threshold for "answerable", no_answer_threshold for "combined")}.
    """
    defaults = FinetuningConfig()
    rule = finetuning.get("squad_null_rule", "combined")
    threshold = (finetuning.get("qa_na_threshold", defaults.qa_na_threshold)
                 if rule == "answerable" else
                 finetuning.get("no_answer_threshold", defaults.no_answer_threshold))
    return {"null_odds_from": rule, "no_answer_threshold": float(threshold)}


def get_task(name: str, **options):
    """A fresh Task for `name` (GLUE task, squad_v1/squad_v2, ner/chunking).

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
    return task_from_config(FinetuningConfig(task_name=name, **options).validate())
