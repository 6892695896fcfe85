"""Task names -> Task objects for the fine-tuning CLI."""

from __future__ import annotations

from electra_tf.config import ConfigError

TAGGING_TASKS = ("ner", "chunking")
SQUAD_TASKS = {"squad_v1": "1.1", "squad_v2": "2.0"}


def task_names() -> list[str]:
    from electra_tf.finetuning.glue import GLUE_TASKS

    return sorted(GLUE_TASKS) + sorted(SQUAD_TASKS) + list(TAGGING_TASKS)


def get_task(name: str, tagging_scheme: str = "BIO", no_answer_threshold: float = 0.0):
    """A fresh Task for `name` (GLUE task, squad_v1/squad_v2, ner/chunking)."""
    from electra_tf.finetuning import glue

    if name in glue.GLUE_TASKS:
        return glue.get_task(name)
    if name in SQUAD_TASKS:
        from electra_tf.finetuning.squad import SquadTask

        return SquadTask(version=SQUAD_TASKS[name], no_answer_threshold=no_answer_threshold)
    if name in TAGGING_TASKS:
        from electra_tf.finetuning.tagging import TaggingTask

        return TaggingTask(name=name, scheme=tagging_scheme)
    raise ConfigError(f"unknown task_name {name!r}; known: {', '.join(task_names())}")
