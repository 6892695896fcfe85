"""--label_names: comma-separated, or a JSON list for names that hold commas; and the
hints that print it give a value that reads back as the same labels."""

import pytest

from electra_tf import folders
from electra_tf.core.config import FinetuningConfig
from electra_tf.core.errors import ConfigError
from electra_tf.tasks.classification import ClassificationTask
from electra_tf.tasks.registry import format_label_names, task_from_config


def test_label_names_flag_takes_a_json_list():
    config = FinetuningConfig(task_name="classification", label_names='["a,b", " c"]')
    assert task_from_config(config).label_names == ("a,b", " c")
    config = FinetuningConfig(task_name="classification", label_names="a, b")
    assert task_from_config(config).label_names == ("a", "b")
    with pytest.raises(ConfigError, match="JSON list"):
        task_from_config(FinetuningConfig(task_name="classification", label_names='["a", 1]'))
    for bad in ("[" * 100_000, "[1" + "0" * 5000 + "]"):  # tracebacks before
        with pytest.raises(ConfigError, match="opens with \\[ but is not a JSON list"):
            task_from_config(FinetuningConfig(task_name="classification", label_names=bad))
    for names in (["a,b", "c"], ["[x", "y"], ["neg", "pos"]):
        value = format_label_names(names)
        config = FinetuningConfig(task_name="classification", label_names=value)
        assert list(task_from_config(config).label_names) == names, value
    assert format_label_names(["neg", "pos"]) == "neg,pos"


def test_the_resume_hint_gives_labels_holding_commas_as_a_json_list(tmp_path):
    from electra_tf.training.finetuning import check_recorded_labels

    folders.files.write_json(str(tmp_path / folders.files.FINETUNING_CONFIG),
                         {"task": "classification", "label_names": ["a,b", "c"]})
    (tmp_path / folders.files.CHECKPOINTS).mkdir()
    (tmp_path / folders.files.CHECKPOINTS / "ckpt-1.index").write_text("")
    task = ClassificationTask(label_names=("c", "a,b"))
    with pytest.raises(ConfigError, match=r"""give --label_names='\["a,b", "c"\]' or"""):
        check_recorded_labels(task, str(tmp_path))
    # a label the checkpoints never learned: --label_names would not do (the train file
    # holds it, and is then refused), which the hint had suggested
    task = ClassificationTask(label_names=("a,b", "c", "mid"))
    with pytest.raises(ConfigError, match=r"but this run has \['a,b', 'c', 'mid'\], \['mid'\] "
                                          r"of which they never learned; give another "
                                          r"--model_dir$"):
        check_recorded_labels(task, str(tmp_path))


@pytest.mark.parametrize("task_name", ["classification", "tagging"])
def test_a_label_name_holding_an_invisible_character_is_refused(task_name):
    # 'posi\u200btive' prints as 'positive': a data label is refused it, and so is the flag
    # (the mismatch it caused printed two names that look the same).
    config = FinetuningConfig(task_name=task_name, label_names="negative,posi\u200btive")
    with pytest.raises(ConfigError, match=r"--label_names: the name 'posi\\u200btive' holds "
                                          r"an invisible character \(U\+200B\)"):
        task_from_config(config)
    # soft hyphen, BOM, private use; Hangul's filler, the combining grapheme joiner (kept
    # by the tokenizer but printing as nothing: they had passed)
    for name in ("a\u00ad", "\ufeffb", "c\ue000", "pos\u3164", "b\u034f", "\u115fx"):
        with pytest.raises(ConfigError, match="invisible character"):
            task_from_config(FinetuningConfig(task_name=task_name, label_names=f"x,{name}"))
    # visible marks and other scripts stay names
    config = FinetuningConfig(task_name=task_name, label_names="caf\u00e9,\u0645\u062b\u0628\u062a")
    assert task_from_config(config).label_names == ("caf\u00e9", "\u0645\u062b\u0628\u062a")


def test_labels_that_are_one_text_in_two_unicode_spellings_are_refused(tmp_path):
    # NFC and NFD "café" had been two classes that print alike
    from electra_tf.core.errors import TaskDataError
    from electra_tf.tasks.tagging import TaggingTask

    composed, decomposed = "caf\u00e9", "cafe\u0301"
    with pytest.raises(ConfigError, match="are one text in two Unicode spellings"):
        task_from_config(FinetuningConfig(task_name="classification",
                                          label_names=f"{composed},{decomposed}"))
    (tmp_path / "train.tsv").write_text(f"text\tlabel\nx\t{composed}\ny\t{decomposed}\n",
                                        encoding="utf-8")
    with pytest.raises(TaskDataError, match=r"train.tsv: the labels .* are one text in two "
                                            r"Unicode spellings"):
        ClassificationTask().read(str(tmp_path), "train")
    (tmp_path / "train.txt").write_text(f"x B-{composed}\ny B-{decomposed}\n",
                                        encoding="utf-8")
    # the two spellings shown apart (they print alike)
    with pytest.raises(TaskDataError, match=r"one text in two Unicode spellings \('B-cafe\\u0301' "
                                            r"and 'B-caf\\xe9': composed and decomposed"):
        TaggingTask().read(str(tmp_path), "train")
    # tagging learns its tags as given: BIOES is ner's and chunking's (it had been recorded)
    with pytest.raises(ConfigError, match=r"^--tagging_scheme=BIOES: --task_name=tagging learns "
                                          r"the tags as your files give them"):
        task_from_config(FinetuningConfig(task_name="tagging", tagging_scheme="BIOES"))
