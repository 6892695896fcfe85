"""Sequence classification and regression on your own files: --task_name=classification.

    task = ClassificationTask(text_column="review", label_column="stars")
    examples = task.read("my_data", "train")  # learns the labels: sorted, as strings
    features = task.featurize(examples, tokenizer, 128)

Files: `DATA_DIR/<split>.tsv`, `.csv` or `.jsonl` for the splits train, dev
and (optional, read with --do_predict) test; each split in one format (two
files for one split are refused). Columns are read by name:
- TSV: a header row, then one record per line; quotes are ordinary
  characters (no quoting: a field cannot hold a tab or a line break), and a
  row must have as many fields as the header.
- CSV: a header row, then RFC 4180 records (Python's csv, strict): a field
  with a comma, a double quote or a line break is in double quotes, its
  quotes doubled.
- JSONL: one JSON object per line, the columns as keys (texts are strings,
  labels strings or integers, regression targets numbers or numeric strings).
  A label is a name: the integer 1 and the string "1" are one label, "1".
Blank lines are skipped; a UTF-8 byte-order mark is allowed. Other columns
are ignored.

The text is the `text_column`, paired (segment 1, "[CLS] a [SEP] b [SEP]")
with the `text_pair_column` when one is given. The label is the
`label_column`: a class name, or with `regression` a number: a JSON number or
a plain decimal (optional sign, digits, optional fraction and exponent: 3,
-0.5, .5, 1e-3); "1_000", "0x10", "nan", "inf" or " 1 " are refused. Classes are
`label_names` (in logit order) when given, else the sorted set of the train
split's labels (learned by `read(data_dir, "train")` or `fit_labels`); a label
outside them is an error in every split. The test split's labels are
optional (read when the column is there); train and dev need them.

Bad input raises TaskDataError "PATH:LINE: ...": a missing column, an empty
text, an unknown label, a target that is not a number, a malformed JSON line
or CSV record, a file with no rows.

Metrics: accuracy (primary), macro-F1 and MCC; regression: Pearson (primary)
and Spearman. Regression trains on the raw target (no scaling). Predictions
are written as TSV: "index<TAB>prediction" (and "<TAB>label", the gold label,
when the split has labels); index is the record's 0-based position in its
file.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import re
import unicodedata
from typing import Any, Iterator, Sequence

import numpy as np

from electra_tf.core.errors import ConfigError, TaskDataError
from electra_tf.core.fileio import atomic_write_text, is_file, utf16_hint
from electra_tf.tasks import metrics as metrics_lib
from electra_tf.tasks.base import (
    Features,
    Task,
    TaskOptions,
    allow_long_csv_fields,
    check_normalization_twins,
    gold_labels,
    has_control_character,
    option,
    parse_label_names,
    sequence_scores,
)
from electra_tf.text.cleaning import (
    has_visible_text,
    invisible_character,
    newline_lines,
    twins,
    without_lone_surrogates,
)

FORMATS = ("tsv", "csv", "jsonl")
"""File extensions read, one per split."""
_FLOAT32_MAX = float(np.finfo(np.float32).max)  # a larger regression target trains as inf
# A regression target written as text: what a spreadsheet or numpy writes. Python's
# float() reads more ("1_000", "nan", "inf", " 1 "), none of which is a measured target.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def number_twins(names) -> tuple[str, str] | None:
    """Two of `names` that are one number written two ways ("1" and "1.0", as a
    spreadsheet or pandas may write a column of integers), or None."""
    def value(name):
        number = float(name) if _DECIMAL.fullmatch(name) else None
        return number if number is not None and np.isfinite(number) else None

    return twins(names, value)


def case_twins(names) -> tuple[str, str] | None:
    """Two of `names` that differ only in case or character width ("Pos" and "pos",
    full-width "ｐｏｓ" and "pos": NFKC, then case-folded), or None."""
    return twins(names, lambda name: unicodedata.normalize("NFKC", name).casefold())


@dataclasses.dataclass(frozen=True)
class TextExample:
    """One record of a classification file.

    Attributes:
      index: the record's 0-based position in its file (written in prediction files).
      text_a, text_b: the text, and the second text of a pair (None for single texts).
      label: the class name, the regression target, or None (unlabelled test split).
      source: "path:line" of the record, for error messages.
    """

    index: int
    text_a: str
    text_b: str | None
    label: str | float | None
    source: str = ""


@dataclasses.dataclass(frozen=True)
class Options(TaskOptions):
    """The options of classification on your own files (run_finetuning flags)."""

    text_column: str = option("text_column")
    text_pair_column: str = option("text_pair_column")
    label_column: str = option("label_column")
    regression: bool = option("regression")
    label_names: str = option("label_names")  # comma-separated; empty: learned from train
    classifier_head: str = option("classifier_head")

    refusals = {"label_names": "--label_names is for classification and tagging tasks; "
                               "{name!r} has its own labels"}


def task_from_options(name: str, options: Options) -> "ClassificationTask":
    """classification with its options.

    Raises:
      ConfigError: label names with --regression, or options the task refuses (columns).
    """
    label_names = parse_label_names(options.label_names)
    if options.regression and label_names is not None:
        raise ConfigError("--regression predicts a number: it takes no --label_names")
    try:
        return ClassificationTask(
            text_column=options.text_column, text_pair_column=options.text_pair_column,
            label_column=options.label_column, label_names=label_names,
            regression=options.regression, classifier_head=options.classifier_head)
    except ValueError as e:
        raise ConfigError(f"--task_name=classification: {e}") from None


class ClassificationTask(Task):
    """Single texts or pairs -> a class or a number (a base.Task; see the module docstring).

    Args:
      text_column, text_pair_column, label_column: column names (JSONL keys);
        text_pair_column "" or None for single texts.
      label_names: the classes in logit order, or None to learn them from the
        train split; must be None with `regression`.
      regression: the label is a float target (a regression head).
      name: the task name recorded with the model.

    Raises:
      ValueError: options that do not go together.
    """

    head = "sequence_classification"
    default_max_seq_length = 128
    default_epochs = 3
    prediction_suffix = ".tsv"
    # Regression trains on the raw target: score = output * max + min with (0, 1)
    # (folders.finetuned records it as the label scale, which the export applies).
    regression_min = 0.0
    regression_max = 1.0

    def __init__(self, text_column: str = "text", text_pair_column: str | None = None,
                 label_column: str = "label", label_names: Sequence[str] | None = None,
                 regression: bool = False, name: str = "classification",
                 classifier_head: str = "dense"):
        columns = [c for c in (text_column, text_pair_column, label_column) if c]
        if not text_column or not label_column:
            raise ValueError("text_column and label_column must be given")
        if len(set(columns)) != len(columns):
            raise ValueError(f"the text, text pair and label columns must differ, got {columns}")
        if regression and label_names is not None:
            raise ValueError("a regression has no label names")
        self.name = name
        self.text_column = text_column
        self.text_b = text_pair_column or None
        self.label_column = label_column
        self.regression = regression
        self.classifier_head = classifier_head  # the head's variant (heads/classification.py)
        self.labels_given = label_names is not None
        self._label_names: tuple[str, ...] = ()
        if label_names is not None:
            names = tuple(label_names)
            if len(names) < 2 or len(set(names)) != len(names) or not all(names):
                raise ValueError(f"label_names must be two or more distinct non-empty names, "
                                 f"got {list(names)!r}")
            self._label_names = names

    # === The base.Task contract ===

    @property
    def head_options(self) -> dict:
        """The classifier head chosen (recorded only where it is not the dense one)."""
        return {} if self.classifier_head == "dense" else {"classifier_head": self.classifier_head}

    @property
    def label_names(self) -> tuple[str, ...]:
        """The classes in logit order; empty for a regression and until learned."""
        return self._label_names

    @property
    def metric_names(self) -> tuple[str, ...]:
        return ("pearson", "spearman") if self.regression else ("accuracy", "macro_f1", "mcc")

    def splits(self) -> tuple[str, ...]:
        return ("train", "dev", "test")

    def fit_labels(self, examples: Sequence[TextExample]) -> tuple[str, ...]:
        """Learns the classes from (train) examples: their sorted set of labels.

        Does nothing when label_names was given, or for a regression.

        Raises:
          TaskDataError: fewer than two distinct labels; two that are one label
            written two ways (Unicode spellings, numbers, case or width).
        """
        if self.labels_given or self.regression:
            return self._label_names
        names = sorted({e.label for e in examples if e.label is not None})
        where = examples[0].source.rsplit(":", 1)[0] if examples else "the train split"
        check_normalization_twins(names, where)
        twins = number_twins(names)
        if twins:  # (they had been two classes)
            raise TaskDataError(f"{where}: the labels {twins[0]!r} and {twins[1]!r} are one "
                                "number written two ways; write it one way (or give "
                                "--label_names to keep them two classes)")
        twins = case_twins(names)
        if twins:  # (a column typed by hand: "Pos" had been a class beside "pos")
            raise TaskDataError(f"{where}: the labels {twins[0]!r} and {twins[1]!r} differ "
                                "only in case or character width; write them one way (or "
                                "give --label_names to keep them two classes)")
        if len(names) < 2:
            raise TaskDataError(f"{where}: the train split has {len(names)} distinct label(s) "
                                f"{names!r}; a classifier needs two (or give --label_names)")
        self._label_names = tuple(names)
        return self._label_names

    def read(self, data_dir: str, split: str) -> list[TextExample]:
        """Examples of `data_dir/<split>.{tsv,csv,jsonl}`; the train split learns the labels
        (unless given).

        Raises:
          ValueError: an unknown split.
          TaskDataError: no file or two for the split, or a bad record (PATH:LINE).
        """
        if split not in self.splits():
            raise ValueError(f"{self.name} has no split {split!r}; "
                             f"splits: {', '.join(self.splits())}")
        path = split_file(data_dir, split)
        learn = split == "train" and not self.labels_given
        examples = self.read_file(path, labelled=split != "test", check_labels=not learn)
        if split == "train":
            self.fit_labels(examples)
        return examples

    def read_file(self, path: str, labelled: bool = True,
                  check_labels: bool = True) -> list[TextExample]:
        """The records of one file (its format by extension).

        Args:
          labelled: every record must have a label (train, dev); otherwise the
            labels are read only where the file has the column (test).
          check_labels: refuse labels outside label_names (once there are some).
        """
        ext = os.path.splitext(path)[1].lstrip(".").lower()
        if ext not in FORMATS:
            raise TaskDataError(f"{path}: not a .tsv, .csv or .jsonl file")
        data = _read_text(path)
        required = [self.text_column] + ([self.text_b] if self.text_b else []) + (
            [self.label_column] if labelled else [])
        rows = (_jsonl_rows(path, data) if ext == "jsonl"
                else _table_rows(path, data, ext, required))
        examples = []
        has_label = labelled
        for line, row in rows:
            where = f"{path}:{line}"
            # An unlabelled split's empty label (a CSV's empty field, JSON's null: what
            # pandas writes for a missing value) is no label
            value = row.get(self.label_column)
            present = self.label_column in row and (labelled or value is not None and not (
                isinstance(value, str) and not value.strip()))
            if not examples:  # the first record decides whether an unlabelled split has labels
                has_label = labelled or present
            elif not has_label and present:  # (had been dropped unread)
                raise TaskDataError(f"{where}: a label in column {self.label_column!r}, but "
                                    "the split's first record has none: give every record "
                                    "a label, or none")
            text_a = self._text(row, self.text_column, where)
            text_b = self._text(row, self.text_b, where) if self.text_b else None
            label = None
            if has_label:
                label = self._label(_column(row, self.label_column, where), where,
                                    check_labels)
            examples.append(TextExample(len(examples), text_a, text_b, label, where))
        if not examples:
            raise TaskDataError(f"{path}:1: no rows (an empty file, or a header alone)")
        return examples

    def featurize(self, examples: Sequence[TextExample], tokenizer,
                  max_seq_length: int) -> Features:
        """Examples -> one packed row each ("[CLS] a [SEP] (b [SEP])", the longer text
        truncated first); "label" targets when every example has one.

        Returns:
          Features with int32 [n, L] inputs, labels {"label": int32 [n] class ids
          (regression: float32 [n] targets)} or {}, and example_index = arange(n).

        Raises:
          ValueError: labelled examples of a classification without classes yet.
          TaskDataError: a label outside the classes; a text the tokenizer keeps
            nothing of (the reader's check cannot know --do_lower_case's accent
            stripping).
        """
        from electra_tf.tasks.glue import pack_examples

        inputs = pack_examples(examples, tokenizer, max_seq_length, pair=bool(self.text_b),
                               columns=(self.text_column, self.text_b or ""))
        labels = {}
        if examples and all(e.label is not None for e in examples):
            gold = gold_labels(self, examples)
            labels = {"label": gold.astype(np.float32) if self.regression else gold}
        return Features(inputs=inputs, labels=labels,
                        example_index=np.arange(len(examples), dtype=np.int32))

    def predictions(self, outputs: dict[str, np.ndarray], examples: Sequence[TextExample],
                    features: Features) -> np.ndarray:
        """outputs["logits"] -> class ids int64 [n] (argmax), or targets float64 [n]."""
        logits = np.asarray(outputs["logits"])
        if logits.shape[0] != len(features) or len(features) != len(examples):
            raise ValueError(f"{logits.shape[0]} rows of logits for {len(features)} features "
                             f"of {len(examples)} examples")
        per_row = logits.reshape(len(features), -1)
        result = (per_row[:, 0].astype(np.float64) if self.regression
                  else np.argmax(per_row, axis=-1).astype(np.int64))
        out = np.empty_like(result)
        out[features.example_index] = result
        return out

    scores = sequence_scores  # each example's logits, written beside its predictions

    def metrics(self, predictions: Sequence, examples: Sequence[TextExample]) -> dict[str, float]:
        """Accuracy, macro-F1 and MCC (regression: Pearson and Spearman), primary first."""
        if any(e.label is None for e in examples):
            raise ValueError(f"{self.name}: cannot score unlabelled examples")
        gold = gold_labels(self, examples)
        functions = {"accuracy": metrics_lib.accuracy, "macro_f1": metrics_lib.macro_f1,
                     "mcc": metrics_lib.matthews_corrcoef, "pearson": metrics_lib.pearson,
                     "spearman": metrics_lib.spearman}
        return {m: functions[m](predictions, gold) for m in self.metric_names}

    def write_predictions(self, predictions: Sequence, examples: Sequence[TextExample],
                          path: str) -> None:
        """TSV: "index<TAB>prediction" (+ "<TAB>label" when every example has a label):
        class names, or targets as Python floats."""
        if len(predictions) != len(examples):
            raise ValueError(f"{len(predictions)} predictions for {len(examples)} examples")
        gold = all(e.label is not None for e in examples)
        lines = ["index\tprediction" + ("\tlabel" if gold else "")]
        for example, p in zip(examples, predictions):
            value = repr(float(p)) if self.regression else self.label_names[int(p)]
            row = [str(example.index), value]
            if gold:
                row.append(repr(float(example.label)) if self.regression else example.label)
            lines.append("\t".join(row))
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        atomic_write_text(path, "\n".join(lines) + "\n")

    # === Fields of a record ===

    @staticmethod
    def _text(row: dict, column: str, where: str) -> str:
        value = _column(row, column, where)
        if not isinstance(value, str):
            raise TaskDataError(f"{where}: {column!r} must be a string, got "
                                f"{type(value).__name__} {value!r}")
        if not value.strip():
            raise TaskDataError(f"{where}: empty text in column {column!r}")
        if not has_visible_text(value):  # (zero-width spaces alone had been read)
            raise TaskDataError(f"{where}: empty text in column {column!r} once the "
                                "characters the tokenizer deletes are gone (it holds only "
                                "format or control characters, such as U+200B, and spaces)")
        return without_lone_surrogates(value)  # JSON's "\\ud800" has no UTF-8 form

    def _label(self, value: Any, where: str, check: bool) -> str | float:
        column = self.label_column
        if self.regression:
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise TaskDataError(f"{where}: regression target {value!r} in column "
                                    f"{column!r} is not a number")
            # A JSON number is a plain decimal already; text is held to the same form.
            if isinstance(value, str) and not _DECIMAL.fullmatch(value):
                raise TaskDataError(f"{where}: regression target {value!r} in column "
                                    f"{column!r} is not a number (a plain decimal: an "
                                    "optional sign, digits, an optional fraction and "
                                    "exponent, as 3, -0.5 or 1e-3)")
            try:
                target = float(value)
            except OverflowError:  # a JSON integer beyond a float's range
                target = float("inf")
            if np.isnan(target):
                raise TaskDataError(f"{where}: regression target {value!r} in column "
                                    f"{column!r} is not a number")
            if isinstance(value, float) and np.isinf(value):  # JSON's Infinity, or 1e400
                raise TaskDataError(f"{where}: regression target {value!r} in column "
                                    f"{column!r} is not a finite number (JSON's Infinity, "
                                    "or a number beyond float32's range, +-3.4e38)")
            if abs(target) > _FLOAT32_MAX:  # trained in float32: it became inf there
                raise TaskDataError(f"{where}: regression target {value!r} in column "
                                    f"{column!r} is beyond float32's range (+-3.4e38): "
                                    "rescale the targets")
            return target
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise TaskDataError(f"{where}: label {value!r} in column {column!r} must be a "
                                "string or an integer")
        label = str(value).strip()
        if not label:
            raise TaskDataError(f"{where}: empty label in column {column!r}")
        if has_control_character(label):
            raise TaskDataError(f"{where}: label {label!r} in column {column!r} holds a control "
                                "character (a tab or a line break): the prediction files are "
                                "tab-separated lines")
        odd = invisible_character(label)
        if odd:  # ('pos\u200b' and 'pos' had been two classes that print alike)
            raise TaskDataError(f"{where}: label {label!r} in column {column!r} holds an "
                                f"invisible character (U+{ord(odd):04X}): it would print as "
                                "another label; remove it")
        if check and self._label_names and label not in self._label_names:
            known = self.labels_from or ("--label_names" if self.labels_given
                                         else "the train split's labels")
            # (learned: a class the train split lacks needs every class given)
            hint = ("" if self.labels_from or self.labels_given else
                    " (a class the train split lacks: give every class with --label_names)")
            raise TaskDataError(f"{where}: label {label!r} is not one of {known}: "
                                f"{', '.join(self._label_names)}{hint}")
        return label


def split_file(data_dir: str, split: str) -> str:
    """`data_dir/<split>.tsv`, `.csv` or `.jsonl`: the one that exists.

    Raises:
      TaskDataError: none exists, or more than one (one format per split).
    """
    found = [os.path.join(data_dir, f"{split}.{ext}") for ext in FORMATS]
    found = [p for p in found if is_file(p)]
    if len(found) > 1:
        raise TaskDataError(f"{data_dir}: the {split} split is in more than one file "
                            f"({', '.join(os.path.basename(p) for p in found)}); keep one")
    if not found:
        raise TaskDataError(f"{os.path.join(data_dir, split)}.{{{','.join(FORMATS)}}}: no "
                            f"such file (the {split} split)")
    return found[0]


def _column(row: dict, column: str, where: str):
    if column not in row:
        raise TaskDataError(f"{where}: no column {column!r} (the record has: "
                            f"{', '.join(map(repr, row)) or 'nothing'})")
    return row[column]


def _read_text(path: str) -> str:
    """The file's text (UTF-8, a byte-order mark dropped; gs:// etc. through tf.io.gfile)."""
    if "://" in path:
        import tensorflow as tf
        with tf.io.gfile.GFile(path, "rb") as f:
            data = f.read()
    else:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:  # unreadable (permissions), or a failing disk (EIO)
            raise TaskDataError(f"{path}: cannot read it ({e.strerror or e})") from None
    hint = utf16_hint(data)
    if hint:  # (without a byte-order mark, valid UTF-8)
        raise TaskDataError(f"{path}:1: not UTF-8 text{hint}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise TaskDataError(f"{path}:{line}: not valid UTF-8 ({e.reason})") from None


class _RepeatedKey(Exception):
    """A JSON object holding one key twice (json.loads keeps the last value silently)."""


def _no_repeated_key(pairs: list) -> dict:
    row = {}
    for key, value in pairs:
        if key in row:
            raise _RepeatedKey(key)
        row[key] = value
    return row


def _jsonl_rows(path: str, text: str) -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-blank line."""
    # newline_lines: str.splitlines also splits at U+2028, U+2029 and U+0085, which
    # JSON may hold raw inside a string.
    for number, line in enumerate(newline_lines(text), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line, object_pairs_hook=_no_repeated_key)
        except _RepeatedKey as e:
            raise TaskDataError(f"{path}:{number}: the key {str(e)!r} repeats in one object "
                                "(which value is meant?)") from None
        except json.JSONDecodeError as e:
            raise TaskDataError(f"{path}:{number}: not valid JSON ({e.msg} at column "
                                f"{e.colno})") from None
        except ValueError as e:  # an integer of more than 4,300 digits
            raise TaskDataError(f"{path}:{number}: not a record this reader takes ({e})") \
                from None
        except RecursionError:  # Python's reader recurses once per [ or {
            raise TaskDataError(f"{path}:{number}: not valid JSON (nested too deep to read; "
                                "a record is one object of strings and numbers)") from None
        if not isinstance(row, dict):
            raise TaskDataError(f"{path}:{number}: expected a JSON object, got "
                                f"{type(row).__name__}")
        yield number, row


def _table_rows(path: str, text: str, ext: str,
                required: Sequence[str]) -> Iterator[tuple[int, dict]]:
    """(line number, {column: field}) of each record after the header, which must name
    the `required` columns. Fields may be of any length (FIELD_SIZE_LIMIT)."""
    allow_long_csv_fields()
    if ext == "tsv":
        reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t",
                            quoting=csv.QUOTE_NONE, strict=True)
        kind = "tab-separated fields"
        hint = "TSV has no quoting: a field cannot hold a tab or a line break"
    else:
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
        kind = "comma-separated fields"
        hint = ("a field with a comma, a quote or a line break must be in double quotes, "
                "its quotes doubled")
    header: list[str] | None = None
    while True:
        start = reader.line_num + 1
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise TaskDataError(f"{path}:{start}: malformed {ext.upper()} record ({e}): "
                                f"{hint}") from None
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            continue  # a blank line, or one of spaces only
        if header is None:
            header = [c.strip() for c in fields]
            folded = [c.casefold() for c in header]  # (the header again, in another case)
            repeated = sorted({c for c in required if header.count(c) > 1})
            if repeated:
                raise TaskDataError(f"{path}:{start}: the header repeats column(s) "
                                    f"{', '.join(map(repr, repeated))}")
            missing = [c for c in required if c not in header]
            if missing:
                raise TaskDataError(f"{path}:{start}: the header has no column(s) "
                                    f"{', '.join(map(repr, missing))} (it has: "
                                    f"{', '.join(map(repr, header))})")
            continue
        cells = [f.lstrip("\ufeff").strip() for f in fields]
        if cells == header:
            # (files joined with cat: the header had become a record, its label a class)
            raise TaskDataError(f"{path}:{start}: the header row again (files joined "
                                "together?); remove it, it is no record")
        # (another file's header, "Text,Label" or "label,text": it had been a record)
        if len(cells) == len(folded) and sorted(c.casefold() for c in cells) == sorted(folded):
            order = ("" if [c.casefold() for c in cells] == folded
                     else "; its columns come in another order, as the rows after it may")
            raise TaskDataError(f"{path}:{start}: the header row again, written "
                                f"{', '.join(cells)} (files joined together?{order}); "
                                "remove it, it is no record")
        if len(fields) != len(header):
            hint = " (a tab inside a text?)" if ext == "tsv" and len(fields) > len(header) else ""
            if ext == "tsv" and re.search("\r(?!\n)", text):
                hint = (" (the file holds a carriage return alone, which ends a line here: old "
                        "Mac line ends?; save it with \\n line ends)")
            raise TaskDataError(f"{path}:{start}: {len(fields)} {kind}, but the header has "
                                f"{len(header)} ({', '.join(header)}){hint}")
        yield start, dict(zip(header, fields))
