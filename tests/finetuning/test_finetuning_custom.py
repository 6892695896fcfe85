"""Fine-tuning on your own files: --task_name=classification (TSV, CSV, JSONL; single texts,
pairs, regression) and --task_name=tagging (any tag set), their bad input, and the export.

The runs are run_finetuning's main in this process (helpers.finetune), kept to a few
steps: they check the machinery (files, records, metric names, the export's spec). The
runs that check that a toy task is learned are slow.
"""

from __future__ import annotations

import csv
import json
import os
import random
import re

import numpy as np
import pytest
from helpers import WORDS, finetune

from electra_tf.core.errors import ConfigError, TaskDataError
from electra_tf.tasks import metrics
from electra_tf.tasks.registry import get_task
from electra_tf.tasks.tagging import span_scheme_of

L = 16
PLAIN = [w for w in WORDS if w != "replaced"]


def sentence(rng, keyword: bool) -> str:
    """3 to 8 words; "replaced" among them iff `keyword` (a separable toy task)."""
    words = [rng.choice(PLAIN) for _ in range(rng.randint(3, 8))]
    if keyword:
        words.insert(rng.randint(0, len(words)), "replaced")
    return " ".join(words)


def write_csv(path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture(scope="module")
def single_csv_dir(tmp_path_factory):
    """CSV, single texts: "positive" iff the text has "replaced"; commas inside texts
    (quoted fields); the test split has no label column."""
    out = tmp_path_factory.mktemp("single_csv")
    rng = random.Random(0)
    for split, n in (("train", 320), ("dev", 64)):
        rows = []
        for i in range(n):
            y = rng.random() < 0.5
            rows.append([i, sentence(rng, y) + ", said the model", "positive" if y else "negative"])
        write_csv(out / f"{split}.csv", ["id", "text", "label"], rows)
    write_csv(out / "test.csv", ["text"], [[sentence(rng, i % 2 == 0)] for i in range(6)])
    return out


@pytest.fixture(scope="module")
def pair_jsonl_dir(tmp_path_factory):
    """JSONL sentence pairs: "match" iff the SECOND text has "replaced" (the first one has
    it at random), integer-free string labels, other keys ignored."""
    out = tmp_path_factory.mktemp("pair_jsonl")
    rng = random.Random(1)
    for split, n in (("train", 320), ("dev", 64), ("test", 6)):
        rows = []
        for _ in range(n):
            y = rng.random() < 0.5
            row = {"premise": sentence(rng, rng.random() < 0.5),
                   "hypothesis": sentence(rng, y), "source": "toy"}
            if split != "test":
                row["gold"] = "match" if y else "other"
            rows.append(row)
        write_jsonl(out / f"{split}.jsonl", rows)
    return out


@pytest.fixture(scope="module")
def regression_tsv_dir(tmp_path_factory):
    """TSV regression: the target is 1.5 x the number of "replaced" words (0 to 2); the
    test split has no target column."""
    out = tmp_path_factory.mktemp("regression_tsv")
    rng = random.Random(2)
    for split, n in (("train", 320), ("dev", 64)):
        lines = ["text\tscore"]
        for _ in range(n):
            k = rng.randint(0, 2)
            words = sentence(rng, False).split()
            for _ in range(k):
                words.insert(rng.randint(0, len(words)), "replaced")
            lines.append(f"{' '.join(words)}\t{1.5 * k}")
        (out / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    (out / "test.tsv").write_text("text\nthe model\nreplaced the model\n")  # no targets
    return out


def pos_tag(word: str) -> str:
    return {"replaced": "VERB", "the": "DET", "a": "DET", "model": "NOUN"}.get(word, "X")


@pytest.fixture(scope="module")
def pos_dir(tmp_path_factory):
    """CoNLL "word TAG" lines with part-of-speech-like tags (no BIO prefixes); the test
    split has words only."""
    out = tmp_path_factory.mktemp("pos")
    rng = random.Random(3)
    for split, n in (("train", 240), ("dev", 48), ("test", 4)):
        lines = []
        for _ in range(n):
            words = sentence(rng, rng.random() < 0.6).split()
            lines += [w if split == "test" else f"{w}\t{pos_tag(w)}" for w in words] + [""]
        (out / f"{split}.txt").write_text("\n".join(lines) + "\n")
    return out


# === Reading ===

def test_csv_single_texts_learn_sorted_labels_and_an_unlabelled_test_split(single_csv_dir):
    task = get_task("classification")
    train = task.read(str(single_csv_dir), "train")
    assert task.label_names == ("negative", "positive") and not task.regression
    assert task.head == "sequence_classification"
    assert task.text_b is None and train[0].text_a.endswith(", said the model")
    assert train[0].source == f"{single_csv_dir / 'train.csv'}:2"
    test = task.read(str(single_csv_dir), "test")
    assert [e.label for e in test] == [None] * 6 and [e.index for e in test] == list(range(6))


def test_jsonl_pairs_are_packed_as_two_segments(pair_jsonl_dir, tiny_vocab):
    from electra_tf.text.tokenizer import Tokenizer

    task = get_task("classification", text_column="premise", text_pair_column="hypothesis",
                    label_column="gold")
    examples = task.read(str(pair_jsonl_dir), "train")[:4]
    assert task.label_names == ("match", "other") and task.text_b == "hypothesis"
    feats = task.featurize(examples, Tokenizer(tiny_vocab), L)
    assert feats.inputs["segment_ids"].max() == 1 and feats.inputs["input_ids"].shape == (4, L)
    np.testing.assert_array_equal(feats.labels["label"],
                                  [task.label_names.index(e.label) for e in examples])


def test_log_examples_shows_the_first_window_as_the_model_gets_it(pair_jsonl_dir, pos_dir,
                                                                  tiny_vocab):
    from electra_tf.text.tokenizer import Tokenizer
    from electra_tf.training.finetuning import window_example_lines

    tokenizer = Tokenizer(tiny_vocab)
    task = get_task("classification", text_column="premise", text_pair_column="hypothesis",
                    label_column="gold")
    examples = task.read(str(pair_jsonl_dir), "train")
    feats = task.featurize(examples, tokenizer, L)
    lines = window_example_lines("train", examples, feats, tokenizer, task.label_names)
    n = int(feats.inputs["input_mask"][0].sum())
    first = examples[0]
    assert lines[0] == (f"train example 1 of {len(examples)} ({first.source}), window 1 of "
                        f"{len(feats)}, {n} of {L} positions (the padding left out):")
    tokens = lines[1].split()[1:]
    assert tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2 and len(tokens) == n
    assert tokens[1:tokens.index("[SEP]")] == tokenizer.convert_ids_to_tokens(
        tokenizer.encode([first.text_a])[0])
    assert lines[2] == "  input_ids: " + " ".join(map(str, feats.inputs["input_ids"][0][:n]))
    assert lines[3] == "  input_mask: " + " ".join(["1"] * n)
    assert lines[4].startswith("  segment_ids: 0 ") and lines[4].endswith(" 1")
    assert lines[5] == f"  label: {task.label_names.index(first.label)} ({first.label})"
    # a tagger's targets are per position, cut as the tokens are
    tagger = get_task("tagging")
    words = tagger.read(str(pos_dir), "train")
    feats = tagger.featurize(words, tokenizer, L)
    lines = window_example_lines("train", words, feats, tokenizer, tagger.label_names)
    n = int(feats.inputs["input_mask"][0].sum())
    assert f"({words[0].path}:{words[0].line})" in lines[0]
    per_position = [line for line in lines[5:] if len(line.split()) == n + 1]
    assert per_position, lines


def test_tsv_regression_targets_are_floats(regression_tsv_dir, tiny_vocab):
    from electra_tf.text.tokenizer import Tokenizer

    task = get_task("classification", label_column="score", regression=True)
    examples = task.read(str(regression_tsv_dir), "dev")
    assert (task.head, task.regression, task.label_names) == (
        "sequence_classification", True, ())
    assert set(e.label for e in examples) <= {0.0, 1.5, 3.0}
    feats = task.featurize(examples, Tokenizer(tiny_vocab), L)
    assert feats.labels["label"].dtype == np.float32
    gold = np.array([e.label for e in examples])
    assert task.metrics(gold + 0.1, examples) == {"pearson": pytest.approx(1.0),
                                                  "spearman": pytest.approx(1.0)}


def test_given_label_names_fix_the_order_and_the_metrics(single_csv_dir, tmp_path):
    task = get_task("classification", label_names="positive, negative")
    examples = task.read(str(single_csv_dir), "dev")
    assert task.label_names == ("positive", "negative")
    gold = np.array([task.label_names.index(e.label) for e in examples])
    assert task.metrics(gold, examples) == {"accuracy": 1.0, "macro_f1": 1.0, "mcc": 1.0}
    wrong = 1 - gold
    assert task.metrics(wrong, examples)["mcc"] == pytest.approx(-1.0)
    path = tmp_path / "p.tsv"
    task.write_predictions(gold, examples, str(path))
    lines = path.read_text().splitlines()
    assert lines[0] == "index\tprediction\tlabel"
    assert lines[1] == f"0\t{examples[0].label}\t{examples[0].label}"


@pytest.mark.parametrize("seed", range(3))
def test_macro_f1_matches_sklearn(seed):
    from sklearn import metrics as skm

    rng = np.random.default_rng(seed)
    y, p = rng.integers(0, 4, 50), rng.integers(0, 3, 50)  # class 3 never predicted
    assert metrics.macro_f1(p, y) == pytest.approx(
        skm.f1_score(y, p, average="macro", zero_division=0.0))


def test_generic_tagging_reads_any_tags_and_scores_token_accuracy(pos_dir):
    task = get_task("tagging")
    train = task.read(str(pos_dir), "train")
    assert task.label_names == ("DET", "NOUN", "VERB", "X")  # sorted (no "O")
    assert task.span_scheme is None and task.metric_names == ("accuracy",)
    test = task.read(str(pos_dir), "test")
    assert all(ex.tags is None for ex in test)
    gold = [list(ex.tags) for ex in train[:20]]
    wrong = [["X"] * len(t) for t in gold]
    assert task.metrics(gold, train[:20]) == {"accuracy": 1.0}
    n = sum(len(t) for t in gold)
    assert task.metrics(wrong, train[:20])["accuracy"] == pytest.approx(
        sum(t == "X" for ts in gold for t in ts) / n)


def test_generic_tagging_scores_spans_where_the_tags_have_a_scheme(toy_ner_dir):
    assert span_scheme_of(["O", "B-ORG", "I-ORG"]) == "BIO"
    assert span_scheme_of(["O", "B-ORG", "E-ORG", "S-PER"]) == "BIOES"
    assert span_scheme_of(["O", "NOUN"]) is None and span_scheme_of([]) is None
    task = get_task("tagging")
    task.read(str(toy_ner_dir), "train")
    dev = task.read(str(toy_ner_dir), "dev")
    assert task.span_scheme == "BIO" and task.metric_names[0] == "f1"
    gold = [list(ex.tags) for ex in dev]
    assert task.metrics(gold, dev) == {"f1": 1.0, "precision": 1.0, "recall": 1.0,
                                       "accuracy": 1.0}
    given = get_task("tagging", label_names="NOUN,VERB")
    assert given.label_names == ("NOUN", "VERB") and given.metric_names == ("accuracy",)


# === Bad input: one TaskDataError naming the file and line ===

def _write(folder, name, text):
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return str(folder / name)


NOT_DECIMAL = (" (a plain decimal: an optional sign, digits, an optional fraction and "
               "exponent, as 3, -0.5 or 1e-3)")
CSV_HINT = (": a field with a comma, a quote or a line break must be in double quotes, its "
            "quotes doubled")
BAD_FILES = {
    # case: (file name, content, task options, split, (line, message))
    "missing column": ("train.csv", "sentence,label\nhello world,a\n", {}, "train",
                       (1, "the header has no column(s) 'text' (it has: 'sentence', 'label')")),
    "missing key": ("train.jsonl", '{"text": "a b", "label": "x"}\n\n{"label": "y"}\n', {},
                    "train", (3, "no column 'text' (the record has: 'label')")),
    "unknown given label": ("train.tsv", "text\tlabel\nhello\tyes\nworld\tmaybe\n",
                            {"label_names": "yes,no"}, "train",
                            (3, "label 'maybe' is not one of --label_names: yes, no")),
    "empty text": ("train.csv", 'text,label\nhello,a\n"  ",b\n', {}, "train",
                   (3, "empty text in column 'text'")),
    "empty pair text": ("train.jsonl", '{"a": "x", "b": "", "label": "y"}\n',
                        {"text_column": "a", "text_pair_column": "b"}, "train",
                        (1, "empty text in column 'b'")),
    # characters the tokenizer deletes, alone: had been read as a text of no tokens
    "zero-width text": ("train.jsonl", '{"text": "\\u200b \\u200b\\u0007", "label": "y"}\n',
                        {}, "train", (1, "empty text in column 'text' once the characters the "
                                         "tokenizer deletes are gone (it holds only format or "
                                         "control characters, such as U+200B, and spaces)")),
    # a test label after a first record without one: had been dropped unread
    "test label after none": ("test.jsonl", '{"text": "a"}\n{"text": "b", "label": "zz"}\n',
                              {}, "test", (2, "a label in column 'label', but the split's "
                                              "first record has none: give every record a "
                                              "label, or none")),
    # a zero-width space in a label: a class of its own that prints as "pos"
    "invisible in a label": ("train.jsonl", '{"text": "a", "label": "pos"}\n'
                             '{"text": "b", "label": "pos\\u200b"}\n', {}, "train",
                             (2, "label 'pos\\u200b' in column 'label' holds an invisible "
                                 "character (U+200B): it would print as another label; "
                                 "remove it")),
    # json.loads keeps the last of a repeated key: which label was meant is not known
    "repeated key": ("train.jsonl", '{"text": "a", "label": "pos", "label": "neg"}\n', {},
                     "train", (1, "the key 'label' repeats in one object (which value is "
                                  "meant?)")),
    "non-numeric target": ("train.tsv", "text\tlabel\nhello\t0.5\nworld\thigh\n",
                           {"regression": True}, "train",
                           (3, "regression target 'high' in column 'label' is not a number"
                               + NOT_DECIMAL)),
    "infinite target": ("train.jsonl", '{"text": "a", "label": "inf"}\n',
                        {"regression": True}, "train",
                        (1, "regression target 'inf' in column 'label' is not a number"
                            + NOT_DECIMAL)),
    "json NaN target": ("train.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": NaN}\n',
                        {"regression": True}, "train",
                        (2, "regression target nan in column 'label' is not a number")),
    "overflowing target": ("train.csv", "text,label\na,1e999\n", {"regression": True}, "train",
                           (2, "regression target '1e999' in column 'label' is beyond "
                               "float32's range (+-3.4e38): rescale the targets")),
    "json overflowing target": ("train.jsonl", '{"text": "a", "label": 1e400}\n',
                                {"regression": True}, "train",
                                (1, "regression target inf in column 'label' is not a finite "
                                    "number (JSON's Infinity, or a number beyond float32's "
                                    "range, +-3.4e38)")),
    "target beyond float32": ("train.jsonl", '{"text": "a", "label": -1e39}\n',
                              {"regression": True}, "train",
                              (1, "regression target -1e+39 in column 'label' is beyond "
                                  "float32's range (+-3.4e38): rescale the targets")),
    **{f"target {text!r}": ("train.tsv", f"text\tlabel\nhello\t2\nworld\t{text}\n",
                            {"regression": True}, "train",
                            (3, f"regression target {text!r} in column 'label' is not a number"
                                + NOT_DECIMAL))
       for text in ("1_000", "0x10", "nan", "-inf", "Infinity", " 1 ", "1.5 ", "+-1", "1e",
                    "\u0661", "1,5")},
    "malformed json": ("train.jsonl", '{"text": "a", "label": "x"}\n{"text": "b", label}\n', {},
                       "train", (2, "not valid JSON (Expecting property name enclosed in double "
                                    "quotes at column 15)")),
    "json nested too deep": ("train.jsonl", '{"text": "a", "label": "x"}\n{"text": '
                             + "[" * 200_000 + "]" * 200_000 + ', "label": "y"}\n', {}, "train",
                             (2, "not valid JSON (nested too deep to read; a record is one "
                                 "object of strings and numbers)")),
    "json array": ("train.jsonl", '["a", "x"]\n', {}, "train",
                   (1, "expected a JSON object, got list")),
    "json label type": ("train.jsonl", '{"text": "a", "label": [1]}\n', {}, "train",
                        (1, "label [1] in column 'label' must be a string or an integer")),
    "json label with a tab": ("train.jsonl", '{"text": "a", "label": "pos\\tx"}\n', {}, "train",
                              (1, "label 'pos\\tx' in column 'label' holds a control character "
                                  "(a tab or a line break): the prediction files are "
                                  "tab-separated lines")),
    "header only": ("train.csv", "text,label\n", {}, "train",
                    (1, "no rows (an empty file, or a header alone)")),
    "empty file": ("dev.jsonl", "\n\n", {}, "dev",
                   (1, "no rows (an empty file, or a header alone)")),
    "csv stray quote": ("train.csv", 'text,label\nhello,a\n"say "hi" now",b\n', {}, "train",
                        (3, "malformed CSV record (',' expected after '\"')" + CSV_HINT)),
    "csv open quote": ("train.csv", 'text,label\nhello,a\n"open,b\nmore,c\n', {}, "train",
                       (3, "malformed CSV record (unexpected end of data)" + CSV_HINT)),
    "tsv extra tab": ("train.tsv", "text\tlabel\nhello\tthere\ta\n", {}, "train",
                      (2, "3 tab-separated fields, but the header has 2 (text, label) (a tab "
                          "inside a text?)")),
    "tsv lone carriage return": ("train.tsv", "text\tlabel\nhello\ta\nold\rmac\tb\n", {},
                                 "train", (3, "1 tab-separated fields, but the header has 2 "
                                              "(text, label) (the file holds a carriage return "
                                              "alone, which ends a line here: old Mac line "
                                              "ends?; save it with \\n line ends)")),
    "one label": ("train.csv", "text,label\nhello,a\nworld,a\n", {}, "train",
                  (None, "the train split has 1 distinct label(s) ['a']; a classifier needs "
                         "two (or give --label_names)")),
    # files joined with cat: the second header had become a record, "label" a class
    "header again": ("train.csv", "\ufefftext,label\na,pos\nb,neg\n\ufefftext,label\nc,pos\n",
                     {}, "train", (4, "the header row again (files joined together?); "
                                      "remove it, it is no record")),
    "header again, tsv": ("dev.tsv", "text\tlabel\na\tpos\ntext \t label\n", {}, "dev",
                          (3, "the header row again (files joined together?); remove it, "
                              "it is no record")),
    # another file's header, in another case or column order: had been a record
    "header again, other case": ("train.csv", "text,label\na,pos\nb,neg\nText,Label\nc,pos\n",
                                 {}, "train", (4, "the header row again, written Text, Label "
                                                  "(files joined together?); remove it, it is "
                                                  "no record")),
    "header again, other order": ("train.tsv", "text\tlabel\na\tpos\nlabel\ttext\nneg\tb\n",
                                  {}, "train", (3, "the header row again, written label, text "
                                                   "(files joined together?; its columns come "
                                                   "in another order, as the rows after it "
                                                   "may); remove it, it is no record")),
    # a spreadsheet's integers written two ways: had been two classes
    "one number two ways": ("train.csv", "text,label\na,0\nb,1\nc,1.0\n", {}, "train",
                            (None, "the labels '1' and '1.0' are one number written two "
                                   "ways; write it one way (or give --label_names to keep "
                                   "them two classes)")),
    # a column typed by hand: "Pos" had been a class beside "pos" (full width too)
    "labels in two cases": ("train.csv", "text,label\na,pos\nb,Pos\nc,neg\n", {}, "train",
                            (None, "the labels 'Pos' and 'pos' differ only in case or "
                                   "character width; write them one way (or give "
                                   "--label_names to keep them two classes)")),
    "labels in two widths": ("train.jsonl", '{"text": "a", "label": "\uff50os"}\n'
                             '{"text": "b", "label": "pos"}\n{"text": "c", "label": "neg"}\n',
                             {}, "train",
                             (None, "the labels 'pos' and '\uff50os' differ only in case or "
                                    "character width; write them one way (or give "
                                    "--label_names to keep them two classes)")),
    "not utf-8": ("train.tsv", "text\tlabel\nhello\ta\ncaf\udce9\tb\n", {}, "train",
                  (3, "not valid UTF-8 (invalid continuation byte)")),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_file_is_one_error_naming_the_file_and_line(case, tmp_path):
    name, text, options, split, (line, message) = BAD_FILES[case]
    (tmp_path / "data").mkdir()
    path = tmp_path / "data" / name
    path.write_bytes(text.encode("utf-8", "surrogateescape"))  # "not utf-8": a Latin-1 é
    with pytest.raises(TaskDataError) as raised:
        get_task("classification", **options).read(str(tmp_path / "data"), split)
    where = path if line is None else f"{path}:{line}"
    assert str(raised.value) == f"{where}: {message}"


@pytest.mark.parametrize("name, text", [
    ("train.tsv", "text\tlabel\nhello\ta\n   \n\t\nworld\tb\n"),
    ("train.csv", "text,label\n  \nhello,a\n \t \nworld,b\n"),
    ("train.jsonl", '{"text": "hello", "label": "a"}\n   \n{"text": "world", "label": "b"}\n'),
])
def test_lines_of_spaces_are_blank_lines(name, text, tmp_path):
    """Blank lines are skipped (the docs), and a line of spaces is one too: it had been a
    row of one field in TSV and CSV (a line of only a tab is still a row of two)."""
    (tmp_path / name).write_text(text, encoding="utf-8")
    if name == "train.tsv":  # "\t" alone: two empty fields, an empty text
        with pytest.raises(TaskDataError, match=r"train.tsv:4: empty text in column 'text'"):
            get_task("classification").read(str(tmp_path), "train")
        (tmp_path / name).write_text(text.replace("\t\n", ""), encoding="utf-8")
    examples = get_task("classification").read(str(tmp_path), "train")
    assert [(e.text_a, e.label) for e in examples] == [("hello", "a"), ("world", "b")]


@pytest.mark.parametrize("name, text", [
    ("test.csv", "text,label\nhello,\nworld,\n"),  # what pandas writes for missing values
    ("test.jsonl", '{"text": "hello", "label": null}\n{"text": "world", "label": ""}\n'),
])
def test_a_test_split_whose_labels_are_all_empty_has_none(name, text, tmp_path):
    """An unlabelled split may have the label column, empty on every record: it had
    been refused as an empty label (CSV) or a label None (JSONL)."""
    (tmp_path / name).write_text(text, encoding="utf-8")
    examples = get_task("classification").read(str(tmp_path), "test")
    assert [(e.text_a, e.label) for e in examples] == [("hello", None), ("world", None)]
    # one empty label among labelled records is still refused, as is a label after none
    (tmp_path / name).write_text(text.replace("hello,", "hello,a").replace(
        '"label": null', '"label": "a"'), encoding="utf-8")
    last = 3 if name.endswith(".csv") else 2  # the second record's line
    with pytest.raises(TaskDataError, match=rf"{name}:{last}: empty label in column 'label'"):
        get_task("classification").read(str(tmp_path), "test")
    (tmp_path / name).write_text(text.replace("world,", "world,a").replace(
        '"label": ""', '"label": "a"'), encoding="utf-8")
    with pytest.raises(TaskDataError, match=rf"{name}:{last}: a label in column 'label', but"):
        get_task("classification").read(str(tmp_path), "test")


def test_a_text_the_tokenizer_keeps_nothing_of_is_refused(tiny_vocab, tmp_path):
    """Accents alone (stripped under lower-casing), a variation selector or a Hangul
    filler pass the reader's check but tokenize to no piece: they had trained as
    "[CLS] [SEP]", which the docs say is refused."""
    from electra_tf.text.tokenizer import Tokenizer

    for text in ("\u0301\u0301", "\ufe0f", "\u3164"):
        (tmp_path / "train.jsonl").write_text(
            '{"text": "a model", "label": "x"}\n'
            + json.dumps({"text": text, "label": "y"}) + "\n", encoding="utf-8")
        task = get_task("classification")
        examples = task.read(str(tmp_path), "train")
        with pytest.raises(TaskDataError) as raised:
            task.featurize(examples, Tokenizer(tiny_vocab), L)
        assert str(raised.value) == (
            f"{tmp_path / 'train.jsonl'}:2: empty text in column 'text' once tokenized: "
            "the tokenizer keeps none of its characters (such as accents or other combining "
            "marks alone, which --do_lower_case strips, or variation selectors)"), text
    # the second text of a pair; and a cased tokenizer keeps the accent
    (tmp_path / "train.jsonl").write_text(
        '{"a": "model", "b": "a", "label": "x"}\n{"a": "model", "b": "\u0301", "label": "y"}\n',
        encoding="utf-8")
    task = get_task("classification", text_column="a", text_pair_column="b")
    examples = task.read(str(tmp_path), "train")
    with pytest.raises(TaskDataError, match=r"train.jsonl:2: empty text in column 'b' once"):
        task.featurize(examples, Tokenizer(tiny_vocab), L)
    feats = task.featurize(examples, Tokenizer(tiny_vocab, do_lower_case=False), L)
    assert feats.inputs["input_mask"][1].sum() == 5  # [CLS] model [SEP] [UNK] [SEP]


def test_jsonl_texts_may_hold_line_separators_and_lone_surrogates(tmp_path):
    """Split at "\\n" only (U+2028 inside a JSON string had split its record); a lone
    surrogate escape becomes U+FFFD (it had ended in TensorFlow's traceback)."""
    rows = [{"text": "line one\u2028still one\u0085and\u2029one", "label": "a"},
            {"text": "x\ud800y", "label": "b"}]
    _write(tmp_path, "train.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                            for r in rows[:1]) + json.dumps(rows[1]) + "\n")
    got = get_task("classification").read(str(tmp_path), "train")
    assert [e.text_a for e in got] == [rows[0]["text"], "x\ufffdy"]


def test_numbers_beyond_floats_are_one_error(tmp_path):
    (tmp_path / "train.jsonl").write_text('{"text": "a", "label": 1' + "0" * 400 + "}\n")
    with pytest.raises(TaskDataError, match=r"train.jsonl:1: regression target 10+ in column "
                                             r"'label' is beyond float32's range"):
        get_task("classification", regression=True).read(str(tmp_path), "train")
    (tmp_path / "train.jsonl").write_text('{"text": "a", "label": 1' + "0" * 5000 + "}\n")
    with pytest.raises(TaskDataError, match=r"train.jsonl:1: not a record this reader takes"):
        get_task("classification", regression=True).read(str(tmp_path), "train")


def test_plain_decimal_targets_are_read(tmp_path):
    """What a spreadsheet or numpy writes is a target; JSON numbers too."""
    texts = ["3", "-0.5", "+2", ".5", "5.", "1e-3", "-2.5E+2", "007"]
    _write(tmp_path, "train.tsv", "text\tlabel\n" + "".join(f"w\t{t}\n" for t in texts))
    _write(tmp_path, "dev.jsonl", '{"text": "a", "label": 2}\n{"text": "b", "label": -1.5e1}\n'
                                  '{"text": "c", "label": "0.25"}\n')
    task = get_task("classification", regression=True)
    assert [e.label for e in task.read(str(tmp_path), "train")] == [float(t) for t in texts]
    assert [e.label for e in task.read(str(tmp_path), "dev")] == [2.0, -15.0, 0.25]


def test_a_jsonl_label_is_a_name_whatever_its_json_type(tmp_path, tiny_vocab):
    """1 and "1" in one file are one label, "1" (labels are names; --label_names and the
    predictions write them as text), not two classes the model must tell apart."""
    _write(tmp_path, "train.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": "1"}\n'
                                    '{"text": "c", "label": 0}\n{"text": "d", "label": "0"}\n')
    _write(tmp_path, "dev.jsonl", '{"text": "e", "label": "1"}\n{"text": "f", "label": 0}\n')
    task = get_task("classification")
    train = task.read(str(tmp_path), "train")
    assert task.label_names == ("0", "1")
    assert [e.label for e in train] == ["1", "1", "0", "0"]
    from electra_tf.text.tokenizer import Tokenizer

    dev = task.featurize(task.read(str(tmp_path), "dev"), Tokenizer(tiny_vocab), L)
    assert list(dev.labels["label"]) == [1, 0]
    given = get_task("classification", label_names="1,0")
    assert [e.label for e in given.read(str(tmp_path), "dev")] == ["1", "0"]


def test_fields_longer_than_csvs_default_limit_are_read(tmp_path):
    """csv refuses a field over 128 KiB by default; a long document is a text, not a
    malformed record (it was refused with advice on CSV quoting, in TSV too)."""
    long_text = "the model " * 20_000  # 200 KB
    _write(tmp_path, "train.tsv", f"text\tlabel\n{long_text}\ta\nshort\tb\n")
    _write(tmp_path, "dev.csv", f'text,label\n"{long_text}, said the model",a\n')
    task = get_task("classification")
    assert task.read(str(tmp_path), "train")[0].text_a == long_text
    assert task.read(str(tmp_path), "dev")[0].text_a == long_text + ", said the model"


def test_a_dev_label_outside_the_train_labels_is_refused(single_csv_dir, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_text((single_csv_dir / "train.csv").read_text())
    (data / "dev.csv").write_text("text,label\nthe model,positive\nthe text,neutral\n")
    task = get_task("classification")
    task.read(str(data), "train")
    with pytest.raises(TaskDataError, match=rf"^{data / 'dev.csv'}:3: label 'neutral' is not "
                                            "one of the train split's labels: negative, "
                                            r"positive \(a class the train split lacks: give "
                                            r"every class with --label_names\)$"):
        task.read(str(data), "dev")


def test_split_files_one_format_each(tmp_path):
    task = get_task("classification")
    _write(tmp_path, "train.tsv", "text\tlabel\na\tx\n")
    _write(tmp_path, "train.jsonl", '{"text": "a", "label": "x"}\n')
    with pytest.raises(TaskDataError, match=r"the train split is in more than one file "
                                            r"\(train.tsv, train.jsonl\); keep one"):
        task.read(str(tmp_path), "train")
    with pytest.raises(TaskDataError, match=r"dev.\{tsv,csv,jsonl\}: no such file"):
        task.read(str(tmp_path), "dev")


def test_options_that_do_not_fit_are_refused():
    with pytest.raises(ConfigError, match="--text_column is an option of "
                                          "--task_name=classification, not of 'sst2'"):
        get_task("sst2", text_column="sentence")
    with pytest.raises(ConfigError, match="--label_names is for classification and tagging"):
        get_task("mnli", label_names="a,b")
    with pytest.raises(ConfigError, match="takes no --label_names"):
        get_task("classification", regression=True, label_names="a,b")
    with pytest.raises(ConfigError, match="distinct non-empty names"):
        get_task("classification", label_names="a,,b")
    with pytest.raises(ConfigError, match="a name holds a control character"):
        get_task("classification", label_names='["a", "b\\nc"]')
    with pytest.raises(ConfigError, match="a name holds a control character"):
        get_task("tagging", label_names='["a", "b\\u2028c"]')
    with pytest.raises(ConfigError, match="a name holds a lone surrogate"):  # a crash after
        get_task("tagging", label_names='["a", "\\ud800"]')  # training, when written
    with pytest.raises(ConfigError, match="columns must differ"):
        get_task("classification", text_pair_column="text")
    with pytest.raises(ConfigError, match="label_names must be distinct BIO tags"):
        get_task("ner", label_names="O,NOUN")
    assert get_task("ner", label_names="O,B-PER,I-PER").label_names == ("O", "B-PER", "I-PER")


def test_a_bad_file_stops_the_run_before_anything_is_written(pretrained_dir, tmp_path):
    data = tmp_path / "data"
    _write(data, "train.jsonl", '{"text": "the model", "label": "a"}\n{"text": "x"}\n')
    with pytest.raises(TaskDataError, match=f"^{data / 'train.jsonl'}:2: no column 'label'"):
        finetune("--task_name=classification", f"--init_checkpoint={pretrained_dir}",
                 f"--data_dir={data}", f"--model_dir={tmp_path}/out")
    assert not (tmp_path / "out").exists()


def test_epochs_that_round_down_to_no_step_are_refused_before_anything_is_written(
        pretrained_dir, tmp_path):
    # 4 train records in one batch of 32: 1 step an epoch, and 0.5 epochs is 0 steps,
    # which had trained nothing, evaluated nothing and ended `done: {}`
    data = tmp_path / "data"
    _write(data, "train.jsonl", "".join(f'{{"text": "the model {i}", "label": "{i % 2}"}}\n'
                                        for i in range(4)))
    with pytest.raises(ConfigError, match=re.escape(
            "--num_train_epochs=0.5 of 1 steps/epoch (4 train windows, batches of 32) "
            "rounds down to 0 steps, as the original rounds it: give at least 1 epoch (or "
            "--do_train=false to evaluate)")):
        finetune("--task_name=classification", f"--init_checkpoint={pretrained_dir}",
                 f"--data_dir={data}", f"--model_dir={tmp_path}/out", "--num_train_epochs=0.5",
                 "--train_batch_size=32", "--do_eval=false")
    assert not (tmp_path / "out").exists()


# === Runs: results.json, prediction files, the record, the export's spec ===

def _run(pretrained_dir, data, out, *flags, task="classification"):
    """A run of a few steps (a fifth of an epoch) with test-split predictions."""
    return finetune(f"--task_name={task}", *flags, f"--init_checkpoint={pretrained_dir}",
                    f"--data_dir={data}", f"--model_dir={out}", f"--max_seq_length={L}",
                    "--train_batch_size=32", "--num_train_epochs=0.2", "--learning_rate=3e-3",
                    "--do_predict")


def test_pair_run_writes_results_predictions_and_a_record_the_export_serves(
        pretrained_dir, pair_jsonl_dir, tmp_path, capsys):
    from electra_tf import folders
    from electra_tf.serving.export import load_spec

    out = tmp_path / "out"
    trainer, results = _run(pretrained_dir, pair_jsonl_dir, out, "--text_column=premise",
                            "--text_pair_column=hypothesis", "--label_column=gold",
                            "--log_examples")
    # --log_examples: the first window of each split read, as the model gets it
    logged = capsys.readouterr().err
    for split in ("train", "dev", "test"):
        assert f"[finetune] {split} example 1 of " in logged, logged
    assert logged.count("[finetune]   tokens: [CLS] ") == 3
    assert "[finetune]   label: " in logged  # train and dev; the test split has none
    assert list(results["epoch_1"]["dev"]) == ["accuracy", "macro_f1", "mcc"]
    assert json.load(open(out / "results.json"))["epoch_1"] == results["epoch_1"]
    dev = (out / "classification_dev_predictions.tsv").read_text().splitlines()
    test = (out / "classification_test_predictions.tsv").read_text().splitlines()
    assert dev[0] == "index\tprediction\tlabel" and len(dev) == 65
    assert test[0] == "index\tprediction" and len(test) == 7
    assert {line.split("\t")[1] for line in dev[1:] + test[1:]} <= {"match", "other"}
    # each predictions file's logits beside it (the original pickles a test split's, for
    # ensembling trials): in the file's order, their argmax the label it names
    for split, lines in (("dev", dev), ("test", test)):
        with np.load(out / f"classification_{split}_logits.npz") as scores:
            assert sorted(scores.files) == ["index", "label_names", "logits"]
            assert scores["logits"].dtype == np.float32 and scores["logits"].shape == (
                len(lines) - 1, 2)
            assert list(scores["label_names"]) == ["match", "other"]
            assert list(scores["index"]) == [line.split("\t")[0] for line in lines[1:]]
            named = scores["label_names"][scores["logits"].argmax(-1)]
            assert list(named) == [line.split("\t")[1] for line in lines[1:]]
    record = folders.finetuned.read_finetuning_config(str(out))
    assert (record.task, record.head, record.pair, record.label_names) == (
        "classification", "sequence_classification", True, ("match", "other"))
    assert record.finetuning["text_pair_column"] == "hypothesis"
    spec = load_spec("sequence_classification", str(out))
    assert (spec.label_names, spec.pair, spec.regression, spec.task_name) == (
        ("match", "other"), True, False, "classification")
    examples, feats = trainer.features("dev")
    served = np.asarray(spec.model(feats.inputs, training=False)["logits"])
    np.testing.assert_allclose(served, trainer.predict(feats)["logits"], atol=1e-5)
    # Resuming with other labels would read every logit as another label: refused.
    with pytest.raises(ConfigError, match=r"trained with the labels \['match', 'other'\], but "
                                          r"this run has \['other', 'match'\]"):
        _run(pretrained_dir, pair_jsonl_dir, out, "--text_column=premise",
             "--text_pair_column=hypothesis", "--label_column=gold", "--label_names=other,match")


# === Learning the toy tasks (slow) ===

@pytest.fixture(scope="module")
def learned(pretrained_dir, single_csv_dir, regression_tsv_dir, pos_dir, tmp_path_factory):
    """case -> (the folder of its toy task learned in 6 epochs, its metric, its floor);
    each case's run once a module (the learning test checks it, the exports test serves
    it; tests/conftest.py's SHARED_FIXTURES keeps both on one xdist worker)."""
    runs = {}

    def learned_run(case):
        data, flags, metric, floor = {
            "single_csv": (single_csv_dir, ["--task_name=classification"], "accuracy", 0.9),
            "regression_tsv": (regression_tsv_dir, ["--task_name=classification",
                                                    "--label_column=score", "--regression"],
                               "pearson", 0.8),
            "pos": (pos_dir, ["--task_name=tagging"], "accuracy", 0.9)}[case]
        if case not in runs:
            out = tmp_path_factory.mktemp(f"learned_{case}") / "out"
            finetune(*flags, f"--init_checkpoint={pretrained_dir}", f"--data_dir={data}",
                     f"--model_dir={out}", f"--max_seq_length={L}", "--train_batch_size=16",
                     "--num_train_epochs=6", "--learning_rate=3e-3", "--do_predict")
            runs[case] = out
        return runs[case], metric, floor

    return learned_run


@pytest.mark.slow
@pytest.mark.parametrize("case", ["single_csv", "regression_tsv", "pos"])
def test_toy_tasks_are_learned(case, learned):
    """Each toy task is learned (6 epochs); the folder records what the export serves."""
    from electra_tf import folders
    from electra_tf.serving.export import load_spec

    out, metric, floor = learned(case)
    dev = json.load(open(out / "results.json"))["epoch_6"]["dev"]
    assert dev[metric] >= floor, dev
    record = folders.finetuned.read_finetuning_config(str(out))
    if case == "pos":  # token accuracy alone; words-only test lines get a tag each
        assert list(dev) == ["accuracy"]
        assert (record.task, record.label_names) == ("tagging", ("DET", "NOUN", "VERB", "X"))
        sentence_1 = (out / "tagging_test_predictions.txt").read_text().split("\n\n")[0]
        words_tags = [line.split() for line in sentence_1.splitlines()]
        assert all(len(wt) == 2 and wt[1] == pos_tag(wt[0]) for wt in words_tags), words_tags
        spec = load_spec("token_classification", str(out))
        assert spec.label_names == record.label_names
    else:
        spec = load_spec("sequence_classification", str(out))
        assert spec.regression == (case == "regression_tsv") and not spec.pair
        assert spec.label_names == (() if spec.regression else ("negative", "positive"))
        assert spec.label_scale == (0.0, 1.0)
        if case == "regression_tsv":
            test = (out / "classification_test_predictions.tsv").read_text().splitlines()
            assert test[0] == "index\tprediction" and float(test[2].split("\t")[1]) > float(
                test[1].split("\t")[1])  # "replaced" scores higher
        if case == "single_csv":
            test = (out / "classification_test_predictions.tsv").read_text().splitlines()
            assert test[1:] == [f"{i}\t{'positive' if i % 2 == 0 else 'negative'}"
                                for i in range(6)]


@pytest.mark.slow
def test_exports_of_own_data_models_serve_their_labels_in_a_fresh_process(learned, tmp_path):
    """The export of a fine-tuned classification and tagging folder (the learned toy
    tasks'), loaded as TF Serving would (tests/export/load_check.py: no project code):
    the text signature's labels are the recorded label names of the Keras model's argmax."""
    import sys

    from helpers import REPO

    sys.path.append(os.path.join(REPO, "tests", "export"))
    from export_helpers import keras_outputs, packed_for, run_fresh, text_inputs

    from electra_tf.serving.export import export, load_spec

    texts = ["the model replaced a token", "a small generator", "replaced", "hello world"]
    jobs, specs = [], []
    for name, case, kind in (("classification", "single_csv", "sequence_classification"),
                             ("tagging", "pos", "token_classification")):
        spec = load_spec(kind, str(learned(case)[0]))
        path = export(spec, str(tmp_path / "model_base"), name, warmup=False)
        jobs.append({"path": path, "signature": "serving_default",
                     "inputs": text_inputs(spec, texts)})
        specs.append(spec)
    results = run_fresh(jobs, str(tmp_path))["results"]
    for spec, job, result in zip(specs, jobs, results):
        assert "error" not in result["tf2"] and "error" not in result["tf1"], result
        keras = keras_outputs(spec, packed_for(spec, job["inputs"]))
        names = np.array([n.encode() for n in spec.label_names], object)
        for loader in ("tf2", "tf1"):
            out = result[loader]
            if spec.task == "sequence_classification":
                np.testing.assert_array_equal(out["label"], names[keras["logits"].argmax(-1)])
            else:
                mask = packed_for(spec, job["inputs"])["input_mask"].astype(bool)
                want = names[keras["tag_logits"].argmax(-1)]
                np.testing.assert_array_equal(out["wordpiece_labels"][mask], want[mask])


def test_label_names_that_train_never_has_are_warned(pretrained_dir, single_csv_dir, pos_dir,
                                                     tiny_vocab, tmp_path, capsys):
    """--label_names listing labels the train split never has reached accuracy 0.0 without
    a word (#54): one warning line at the start of training, naming them."""
    from electra_tf.text.tokenizer import Tokenizer
    from electra_tf.training.finetuning import unused_labels_warning

    finetune("--task_name=classification", "--label_names=negative,neutral,positive,mixed",
             f"--init_checkpoint={pretrained_dir}", f"--data_dir={single_csv_dir}",
             f"--model_dir={tmp_path}/out", f"--max_seq_length={L}", "--train_batch_size=32",
             "--num_train_epochs=0.1", "--do_predict=false", "--do_eval=false")
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == ["[finetune] warning: --label_names lists 2 label(s) that no example of "
                        "the train split has: neutral, mixed; the model never learns to "
                        "predict them (a misspelt label, or the train file of another task?)"]
    tokenizer = Tokenizer(tiny_vocab)
    for task, data, given, unused in (
            ("classification", single_csv_dir, "positive,negative", None),
            ("classification", single_csv_dir, None, None),  # learned labels: all in train
            ("tagging", pos_dir, "DET,NOUN,VERB,X", None),
            ("tagging", pos_dir, "DET,ADJ,NOUN,VERB,X", "ADJ")):
        task = get_task(task, **({"label_names": given} if given else {}))
        feats = task.featurize(task.read(str(data), "train"), tokenizer, L)
        line = unused_labels_warning(task, feats)
        assert (line is None) if unused is None else f"has: {unused};" in line, line


def test_evaluation_only_takes_the_labels_its_model_was_trained_with(
        pretrained_dir, single_csv_dir, tmp_path):
    """--do_train=false of a task that learns its labels from train reads the model's
    outputs as the labels its folder records: no train split, no --label_names."""
    import shutil

    out = tmp_path / "out"
    _, trained = _run(pretrained_dir, single_csv_dir, out)
    dev_only = tmp_path / "dev_only"
    dev_only.mkdir()
    shutil.copy(single_csv_dir / "dev.csv", dev_only)
    for init, model_dir in ((out, tmp_path / "eval"), (pretrained_dir, out)):
        trainer, results = finetune(
            "--task_name=classification", "--do_train=false", f"--init_checkpoint={init}",
            f"--data_dir={dev_only}", f"--model_dir={model_dir}", f"--max_seq_length={L}")
        assert trainer.task.label_names == ("negative", "positive")
        assert results["eval"]["dev"] == trained["epoch_1"]["dev"], (results, trained)
    # A dev label the model never learned names where its labels came from (it had
    # named --label_names, which nobody gave)
    (dev_only / "dev.csv").write_text("text,label\nthe model,neutral\n", encoding="utf-8")
    with pytest.raises(TaskDataError) as raised:
        finetune("--task_name=classification", "--do_train=false", f"--init_checkpoint={out}",
                 f"--data_dir={dev_only}", f"--model_dir={tmp_path / 'eval3'}",
                 f"--max_seq_length={L}")
    assert str(raised.value) == (f"{dev_only / 'dev.csv'}:2: label 'neutral' is not one of "
                                 f"the labels {out} was trained with: negative, positive")
    shutil.copy(single_csv_dir / "dev.csv", dev_only)
    # Layers or labels the folder lacks are refused, not scored at random values: the
    # MLP classifier over its dense one, a label it never learned.
    from electra_tf.core.errors import ConfigError

    for flags, lacks in ((["--classifier_head=mlp"], "task_specific/classifier_dense"),
                         (["--label_names=negative,positive,neutral"], "label neutral")):
        with pytest.raises(ConfigError, match=rf"--do_train=false evaluates --init_checkpoint="
                                              rf".*out's model as it is, but classification "
                                              rf"here has what it lacks \({lacks}\)"):
            finetune("--task_name=classification", "--do_train=false",
                     f"--init_checkpoint={out}", f"--data_dir={dev_only}",
                     f"--model_dir={tmp_path / 'eval2'}", f"--max_seq_length={L}", *flags)
