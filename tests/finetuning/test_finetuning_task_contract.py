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
    assert values["mnli"] == (False, 128, 3, ".txt", "sentence2",
                              ["MNLI-m.tsv", "MNLI-mm.tsv", "AX.tsv"])
    assert values["rte"] == (False, 128, 10, ".txt", "sentence2", ["RTE.tsv"])
    assert values["sst2"] == (False, 128, 3, ".txt", None, ["SST-2.tsv"])
    # The original's configure_finetuning.py: "squad" or "qa" in the name 512 tokens and 2
    # epochs, chunk 256 tokens (electra_tf's other taggers too), rte and sts 10 epochs.
    assert values["squad_v1"] == (False, 512, 2, ".json", None, [])
    assert values["squad_v2"] == (True, 512, 2, ".json", None, [])
    assert values["ner"] == values["chunking"] == values["tagging"] == (
        False, 256, 3, ".txt", None, [None])
    assert values["classification"][1:3] == (128, 3)


def test_the_original_tasks_defaults_are_its_rule():
    """Every task the original has (by its name: registry.ORIGINAL_TASK_NAMES) defaults to the
    length and epochs of configure_finetuning.py's rule, base.original_defaults, which
    the TF1 conversion reads too."""
    from electra_tf.tasks.mrqa import MRQA_TASKS

    ours = {v: k for k, v in registry.ORIGINAL_TASK_NAMES.items()}
    for name in [*glue.GLUE_TASKS, *MRQA_TASKS, "squad_v1", "squad_v2", "chunking"]:
        task = registry.get_task(name)
        length, epochs = base.original_defaults(ours.get(name, name))
        assert (task.default_max_seq_length, task.default_epochs) == (length, epochs), name
    assert base.original_defaults("naturalqs") == (128, 3.0)  # neither "qa" nor "squad"
    assert base.original_defaults("squad", n_tasks=2) == (128, 3.0)


def test_one_vocabulary_of_heads_from_task_to_export():
    """What a task's head is called is what its folder records and what the export's
    --task serves: tasks.base.HEADS, with no table in between; `regression` and
    `answerable` are the sequence_classification and squad heads' own."""
    from electra_tf.serving import export

    assert export.TASKS == base.HEADS + ("rtd", "score")  # score: Electric (serving/scoring.py)
    assert not hasattr(export, "EXPECTED_HEADS")
    heads = {}
    for name in registry.task_names():
        task = registry.get_task(name)
        heads[name] = (task.head, task.regression, task.answerable)
    assert heads["mnli"] == heads["sst2"] == heads["classification"] == (
        "sequence_classification", False, False)
    assert heads["stsb"] == ("sequence_classification", True, False)
    assert registry.get_task("classification", regression=True).regression
    assert heads["ner"] == heads["chunking"] == heads["tagging"] == (
        "token_classification", False, False)
    assert heads["squad_v1"] == ("squad", False, False)
    assert heads["squad_v2"] == ("squad", False, True)
    assert {h for h, _, _ in heads.values()} == set(base.HEADS)


def test_a_head_refuses_another_heads_options():
    from electra_tf.tasks.model import build_head

    with pytest.raises(ValueError, match="regression is a sequence_classification head's"):
        build_head("token_classification", 3, 8, regression=True)
    with pytest.raises(ValueError, match="answerable is a squad head's"):
        build_head("sequence_classification", 3, 8, answerable=True)
    with pytest.raises(ValueError, match="span_head is a squad head's"):
        build_head("token_classification", 3, 8, span_head="independent")
    with pytest.raises(ValueError, match="unknown head option 'beam'"):
        build_head("squad", 1, 8, beam=4)
    with pytest.raises(ValueError, match="head kind must be one of"):
        build_head("span", 1, 8)
    # A record's regression=False / answerable=False (every head records both) is no option
    # of another head's.
    assert build_head("squad", 1, 8, regression=False).span_head == "joint"


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


def test_each_task_option_belongs_to_one_family_with_the_flags_default():
    """The options a family reads are its module's Options; together they are the
    FinetuningConfig fields no shared code reads, each with the flag's default."""
    import dataclasses

    from electra_tf.core.config import FinetuningConfig

    defaults = FinetuningConfig()
    owned = {}
    for family in registry.FAMILIES:
        options = registry._module(family).Options
        for field in dataclasses.fields(options):
            assert field.default == getattr(defaults, field.name), (family, field.name)
            owned.setdefault(field.name, []).append(family)
    assert set(owned) == {
        "double_unordered", "squad_null_rule", "qa_na_threshold", "no_answer_threshold",
        "joint_prediction", "beam_size", "classifier_head", "tagging_scheme", "text_column",
        "text_pair_column", "label_column", "label_names", "regression", "skip_malformed_rows",
        "max_query_length", "doc_stride", "n_best_size", "max_answer_length",
        "answerable_classifier", "answerable_uses_start_logits", "answerable_weight"}
    assert owned["doc_stride"] == ["squad", "mrqa"]
    # what a record without them is read as (folders without Keras): the flags' defaults
    from electra_tf.tasks.heads.span_record import WINDOW_DEFAULTS

    assert WINDOW_DEFAULTS == {k: getattr(defaults, k) for k in WINDOW_DEFAULTS}
    assert owned["label_names"] == ["classification", "tagging"]
    assert owned["classifier_head"] == ["classification", "glue"]


@pytest.mark.parametrize("name, option, line", [
    ("squad_v1", {"tagging_scheme": "BIOES"},
     "--tagging_scheme is an option of --task_name=ner/chunking/tagging, not of 'squad_v1'"),
    ("mnli", {"joint_prediction": False},
     "--joint_prediction is an option of --task_name=squad_v1/squad_v2/newsqa/naturalqs/"
     "triviaqa/searchqa/mrqa, not of 'mnli'"),
    # MRQA tasks always have an answer: SQuAD 2.0's null rule is not theirs.
    ("newsqa", {"squad_null_rule": "combined"},
     "--squad_null_rule is an option of --task_name=squad_v1/squad_v2, not of 'newsqa'"),
    ("searchqa", {"answerable_weight": 1.0},
     "--answerable_weight is an option of --task_name=squad_v1/squad_v2, not of 'searchqa'"),
    ("triviaqa", {"tagging_scheme": "BIOES"},
     "--tagging_scheme is an option of --task_name=ner/chunking/tagging, not of 'triviaqa'"),
    ("squad_v2", {"double_unordered": False},
     "--double_unordered is an option of --task_name=cola/sst2/mrpc/stsb/qqp/mnli/qnli/rte/"
     "wnli, not of 'squad_v2'"),
    ("ner", {"classifier_head": "mlp"},
     "--classifier_head is an option of --task_name=classification/cola/sst2/mrpc/stsb/qqp/"
     "mnli/qnli/rte/wnli, not of 'ner'"),
    # Today's lines, kept: the own-data options first, label_names in its own words.
    ("mnli", {"regression": True, "label_names": "a,b"},
     "--regression is an option of --task_name=classification, not of 'mnli'"),
    ("squad_v1", {"label_names": "a,b"},
     "--label_names is for classification and tagging tasks; 'squad_v1' has its own labels"),
])
def test_an_option_of_another_family_is_refused_in_its_words(name, option, line):
    from electra_tf.core.errors import ConfigError

    with pytest.raises(ConfigError) as raised:
        registry.get_task(name, **option)
    assert str(raised.value) == line


def test_the_mrqa_family_takes_its_span_head_options():
    """An MRQA task is built by its own family (tasks/mrqa.py Options) with the span head's
    options, and records the span head's config."""
    from electra_tf.tasks import mrqa

    assert registry.FAMILIES["mrqa"] == mrqa.MRQA_TASKS
    task = registry.get_task("newsqa", joint_prediction=False, beam_size=7)
    assert isinstance(task, mrqa.MrqaTask) and task.name == "newsqa"
    config = task.head_config()
    assert (config.span_head, config.beam_size, config.answerable) == ("independent", 7, False)
    assert registry.get_task("searchqa").head_config().span_head == "joint"


def test_the_classifier_head_is_a_task_option_its_head_records():
    """--classifier_head reaches the head through the task (its head_options), for GLUE
    and your own files alike; the dense head records nothing (as folders always have)."""
    sst2 = registry.get_task("sst2", classifier_head="mlp")
    own = registry.get_task("classification", classifier_head="mlp")
    assert sst2.head_options == own.head_options == {"classifier_head": "mlp"}
    assert registry.get_task("sst2").head_options == {}
    config = sst2.head_config()
    assert (config.classifier_head, config.regression) == ("mlp", False)
    assert sst2.head_class.record(config) == {
        "regression": False, "answerable": False, "head_options": {"classifier_head": "mlp"}}
    squad = registry.get_task("squad_v2", beam_size=4)
    assert squad.head_class.record(squad.head_config()) == {
        "regression": False, "answerable": True,
        "head_options": {"span_head": "joint", "beam_size": 4}}


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
@pytest.mark.parametrize("name, file, text", [
    ("sst2", "train.tsv", "sentence\tlabel\nfine\t1\n"),
    ("classification", "train.tsv", "text\tlabel\nfine\t1\n"),
    ("tagging", "train.txt", "EU B-ORG\nrejects O\n\n"),
    ("squad_v1", "train-v1.1.json", '{"version": "1.1", "data": []}'),
])
def test_every_reader_names_a_utf16_file(tmp_path, name, file, text, encoding):
    """A UTF-16 file (a Windows editor's "Unicode") had been told `not valid UTF-8 (invalid
    start byte)` with no word of why; one without a byte-order mark, valid UTF-8 with a
    NUL in every other byte, had been read (a tagging file's words all NUL-spaced)."""
    (tmp_path / file).write_bytes(text.encode(encoding))
    with pytest.raises(base.TaskDataError,
                       match=rf"{file}:1: not UTF-8 text: it looks like UTF-16 or UTF-32 "
                             r"text \(iconv -f UTF-16 -t UTF-8 converts it\)"):
        registry.get_task(name).read(str(tmp_path), "train")
