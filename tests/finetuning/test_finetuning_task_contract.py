"""base.Task: every registered task subclasses it, with the values the trainer reads."""

from __future__ import annotations

import pytest

from electra_tf.tasks import base, glue, metrics, registry


def test_every_task_is_a_task_with_its_values():
    values = {}
    for name in registry.task_names():
        task = registry.get_task(name)
        assert isinstance(task, base.Task) and task.name == name and task.head in base.HEADS
        tests = [s for s in task.splits() if s.startswith("test")]
        values[name] = (task.answerable, task.default_max_seq_length, task.default_epochs,
                        task.prediction_suffix, task.text_b,
                        [task.submission_file(s) for s in tests])
    assert values["mnli"] == (False, 128, 3, ".txt", "sentence2", ["MNLI-m.tsv", "MNLI-mm.tsv"])
    assert values["rte"] == (False, 128, 10, ".txt", "sentence2", ["RTE.tsv"])
    assert values["sst2"] == (False, 128, 3, ".txt", None, ["SST-2.tsv"])
    assert values["squad_v1"] == (False, 128, 3, ".json", None, [])
    assert values["squad_v2"] == (True, 128, 3, ".json", None, [])
    assert values["ner"] == values["chunking"] == (False, 128, 3, ".txt", None, [None])


def test_glue_task_names_have_one_definition():
    assert tuple(glue.GLUE_TASKS) == metrics.GLUE_TASK_NAMES == tuple(metrics.GLUE_METRIC_NAMES)
    assert all(t.metric_names == metrics.GLUE_METRIC_NAMES[n] for n, t in glue.GLUE_TASKS.items())
    assert [n for n in registry.task_names() if n in metrics.GLUE_TASK_NAMES] == sorted(
        metrics.GLUE_TASK_NAMES)


def test_task_is_abstract():
    with pytest.raises(TypeError):
        base.Task()

    class Partial(base.Task):
        def splits(self):
            return ("train",)

    with pytest.raises(TypeError, match="abstract"):
        Partial()
