"""The nine GLUE tasks, read from the official TSV files (download_glue_data.py).

    task = get_task("mnli")
    examples = task.read("glue_data/MNLI", "dev_matched")
    features = task.featurize(examples, tokenizer, task.default_max_seq_length)
    ...
    task.write_predictions(preds, test_examples, task.submission_file("test_matched"))

`data_dir` is the task's folder (glue_data/MNLI) or its parent (glue_data).
Files are `<split>.tsv`; MNLI's splits are train, dev_matched, dev_mismatched,
test_matched and test_mismatched, and test_diagnostic: GLUE's diagnostic set
(diagnostic.tsv, in the MNLI folder as the original reads it, or in
glue_data/diagnostic), predicted by the MNLI model as AX.tsv, and left out
where the file is not there. Columns are read by name from the header.
The two headerless layouts are CoLA's train/dev (source, label, star,
sentence); every test file has a header with an `index` (QQP: `id`) column.
Quotes are ordinary characters (csv.QUOTE_NONE): GLUE sentences contain
unbalanced quotes, and each record is one line.

Sentence pairs go in file order ([CLS] sentence1 [SEP] sentence2 [SEP]; MNLI
premise first), as BERT's and ELECTRA's readers do. For MRPC and STS-B, where
the order of the two sentences carries no meaning, the train split also holds
every pair in the other order, after all the pairs in file order (the
original's `double_unordered`, on by default; `double_unordered=False` turns
it off); other splits are never doubled. Labels are the Model Garden / ELECTRA
label lists. STS-B is a regression on the 0..5 score that, as the original's
RegressionTask, trains on (score - 0) / 5; `predictions` maps the model's
output back (x 5 + 0), so the metrics and the submission file are on the
0..5 scale. Gold scores stay float64 through the metrics. Defaults follow the
paper's Table 7: 10 epochs for RTE and STS-B, 3 for the rest, max_seq_length
128.

Predictions are written in GLUE's submission format: a `<TASK>.tsv` with the
header "index\tprediction", label names for classification, floats for STS-B.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import os
from typing import Any, Iterator, Sequence

import numpy as np
from absl import logging

from electra_tf.core.errors import InputError, TaskDataError
from electra_tf.core.fileio import atomic_write_text, is_file, utf16_hint
from electra_tf.tasks import metrics as metrics_lib
from electra_tf.tasks.base import (
    Features,
    Task,
    TaskOptions,
    allow_long_csv_fields,
    gold_labels,
    option,
    pack_pair,
    sequence_scores,
)

_ENCODE_CHUNK = 4096  # sentences per tokenizer call: bounds memory on MNLI/QQP


@dataclasses.dataclass(frozen=True)
class GlueExample:
    """One row of a GLUE file.

    Attributes:
      guid: "<split>-<index>", unique within a split.
      index: the file's index (QQP: id) column, or the 0-based row number where
        the file has none (CoLA, SST-2 and MRPC train/dev). Written back in
        submission files.
      text_a, text_b: the sentence(s); text_b is None for single-sentence tasks.
      label: the label name ("entailment", "1"), the STS-B score, or None (test).
      source: "path:line" of the row, for error messages.
    """

    guid: str
    index: str
    text_a: str
    text_b: str | None
    label: str | float | None
    source: str = ""


# GLUE's diagnostic set as a test split of MNLI (the original's "diagnostic"): its
# predictions, by the MNLI model, are the leaderboard's AX.tsv.
DIAGNOSTIC = "test_diagnostic"


@dataclasses.dataclass(frozen=True)
class GlueTask(Task):
    """A GLUE task (a `base.Task`); the registry below holds the nine.

    Attributes:
      name: registry name ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", ...).
      dir_name: the folder in glue_data/ and the submission file stem.
      label_names: classes, in logit order ([] for STS-B, a regression).
      text_a, text_b: column names of the sentence(s); text_b None for one.
      label_column: column of the gold label (STS-B: the score).
      headerless_columns: column names of labelled files that have no header
        (CoLA train/dev); () when every file has one.
      default_epochs, default_max_seq_length: the paper's settings.
      skip_malformed_rows: log and skip rows with too few columns instead of
        raising, as the original's _load_glue does (off: GLUE's files are clean
        under QUOTE_NONE; `--skip_malformed_rows` for copies that are not).
      from_end: columns the original reads counted from the row's end (MNLI's
        label, STS-B's sentences and score): on a row with more or fewer fields
        than the header (a tab inside a text, a metadata field left out) they are
        read there, as the original does.
      unordered: the two sentences' order carries no meaning (MRPC, STS-B).
      double_unordered: for an `unordered` task, the train split also holds
        each pair in the other order (the original's double_unordered).
      regression_min, regression_max: STS-B's score range; the training
        target is (score - min) / max and predictions are output * max + min,
        as the original's RegressionTask.
    """

    name: str
    dir_name: str
    label_names: tuple[str, ...]
    text_a: str
    # A field without a default (the base class's text_b = None is not one).
    text_b: str | None = dataclasses.field()
    label_column: str
    headerless_columns: tuple[str, ...] = ()
    default_epochs: int = 3
    default_max_seq_length: int = 128
    skip_malformed_rows: bool = False
    from_end: tuple[str, ...] = ()
    unordered: bool = False
    double_unordered: bool = True
    regression_min: float = 0.0
    regression_max: float = 1.0
    classifier_head: str = "dense"  # the head's variant (heads/classification.py)

    # === The base.Task contract ===

    head = "sequence_classification"

    @property
    def head_options(self) -> dict:
        """The classifier head chosen (recorded only where it is not the dense one)."""
        return {} if self.classifier_head == "dense" else {"classifier_head": self.classifier_head}

    @property
    def regression(self) -> bool:
        """STS-B: the head predicts the score (the task has no label names)."""
        return not self.label_names

    @property
    def num_labels(self) -> int:
        """Width of the head's output: classes, or 1 for STS-B."""
        return len(self.label_names) or 1

    @property
    def metric_names(self) -> tuple[str, ...]:
        return metrics_lib.glue_metric_names(self.name)

    def splits(self) -> tuple[str, ...]:
        if self.name == "mnli":
            return ("train", "dev_matched", "dev_mismatched", "test_matched", "test_mismatched",
                    DIAGNOSTIC)
        return ("train", "dev", "test")

    def _diagnostic_file(self, data_dir: str) -> str | None:
        """GLUE's diagnostic set (predicted by the MNLI model, submitted as AX.tsv): in
        the MNLI folder (where the original reads it), or in glue_data/diagnostic."""
        return next((p for p in self._diagnostic_paths(data_dir) if is_file(p)), None)

    def _diagnostic_paths(self, data_dir: str) -> list[str]:
        remote = "://" in data_dir  # (gs://: normpath would make it gs:/, a local path)
        base = data_dir.rstrip("/") if remote else os.path.abspath(data_dir)
        parent = os.path.dirname(base)
        paths = [os.path.join(data_dir, "diagnostic.tsv"),
                 os.path.join(data_dir, self.dir_name, "diagnostic.tsv"),
                 os.path.join(data_dir, "diagnostic", "diagnostic.tsv"),
                 os.path.join(parent, "diagnostic", "diagnostic.tsv")]
        return list(dict.fromkeys(p if remote else os.path.normpath(p) for p in paths))

    def optional_split(self, data_dir: str, split: str) -> str | None:
        if split != DIAGNOSTIC or self._diagnostic_file(data_dir):
            return None
        # (the paths looked at: it had named glue_data/diagnostic, which a --data_dir
        # of MNLI/ does not lead to)
        return (f"no {', '.join(self._diagnostic_paths(data_dir))}: GLUE's diagnostic set "
                "(AX.tsv) is not predicted")

    def dev_splits(self) -> tuple[str, ...]:
        """Labelled evaluation splits (MNLI: matched and mismatched)."""
        return tuple(s for s in self.splits() if s.startswith("dev"))

    def test_splits(self) -> tuple[str, ...]:
        """Unlabelled splits, for GLUE submissions."""
        return tuple(s for s in self.splits() if s.startswith("test"))

    def data_folder(self, data_dir: str) -> str:
        """`data_dir`, or its `<dir_name>` folder where train.tsv is there only (glue_data/
        as downloaded, holding SST-2/...), as `read` finds the files."""
        nested = os.path.join(data_dir, self.dir_name)
        if not is_file(os.path.join(data_dir, "train.tsv")) and \
                is_file(os.path.join(nested, "train.tsv")):
            return nested
        return data_dir

    def read(self, data_dir: str, split: str) -> list[GlueExample]:
        """Examples of `<data_dir>/<split>.tsv` (or `<data_dir>/<dir_name>/<split>.tsv`).

        The train split of an `unordered` task with `double_unordered` is
        followed by its pairs in the other order (guid "train-<index>-swapped").

        Raises:
          ValueError: an unknown split.
          TaskDataError: a missing file, a bad row or label, no examples.
        """
        if split not in self.splits():
            raise ValueError(f"{self.name} has no split {split!r}; "
                             f"splits: {', '.join(self.splits())}")
        path = os.path.join(data_dir, f"{split}.tsv")
        nested = os.path.join(data_dir, self.dir_name, f"{split}.tsv")
        if split == DIAGNOSTIC:
            path = self._diagnostic_file(data_dir) or os.path.join(data_dir, "diagnostic.tsv")
        elif not is_file(path) and is_file(nested):
            path = nested
        examples = self.read_file(path, labelled=not split.startswith("test"), split=split)
        if split == "train" and self.unordered and self.double_unordered:
            examples += [dataclasses.replace(e, guid=f"{e.guid}-swapped", text_a=e.text_b,
                                             text_b=e.text_a) for e in examples]
        return examples

    def read_file(self, path: str, labelled: bool, split: str = "") -> list[GlueExample]:
        """Examples of one TSV in this task's layout (labelled: train/dev; else test)."""
        if not is_file(path):
            raise TaskDataError(f"{path}: {_missing(path)} ({self.name} {split or 'data'})")
        split = split or os.path.splitext(os.path.basename(path))[0]
        examples = list(self._read_rows(path, labelled, split))
        if not examples:
            raise TaskDataError(f"{path}: no examples")
        return examples

    def featurize(self, examples: Sequence[GlueExample], tokenizer,
                  max_seq_length: int) -> Features:
        """Examples -> one packed row each; "label" targets when all are labelled.

        Returns:
          Features with int32 [n, L] inputs, labels {"label": int32 [n]} (STS-B:
          float32 [n]) or {} for test examples, and example_index = arange(n).
        """
        inputs = pack_examples(examples, tokenizer, max_seq_length, pair=bool(self.text_b))
        labels = {}
        if examples and all(e.label is not None for e in examples):
            gold = gold_labels(self, examples)
            if self.regression:  # the original's target: (score - min) / max
                gold = ((gold - self.regression_min) / self.regression_max).astype(np.float32)
            labels = {"label": gold}
        return Features(inputs=inputs, labels=labels,
                        example_index=np.arange(len(examples), dtype=np.int32))

    def predictions(self, outputs: dict[str, np.ndarray], examples: Sequence[GlueExample],
                    features: Features) -> np.ndarray:
        """outputs["logits"] -> label ids int64 [n_examples] (argmax) or STS-B scores
        (float64, output * regression_max + regression_min: the 0..5 scale)."""
        logits = np.asarray(outputs["logits"])
        if logits.shape[0] != len(features):
            raise ValueError(f"{logits.shape[0]} rows of logits for {len(features)} features")
        if self.regression:
            per_row = logits.reshape(len(features), -1)[:, 0].astype(np.float64)
            per_row = per_row * self.regression_max + self.regression_min
            result = np.full(len(examples), np.nan)
        else:
            per_row = np.argmax(logits.reshape(len(features), -1), axis=-1)
            result = np.full(len(examples), -1, dtype=np.int64)
        result[features.example_index] = per_row
        missing = len(examples) - len(np.unique(features.example_index))
        if missing:
            raise ValueError(f"{missing} example(s) have no feature row")
        return result

    scores = sequence_scores  # each example's logits, written beside its predictions

    def metrics(self, predictions: Sequence, examples: Sequence[GlueExample]) -> dict[str, float]:
        """`metrics.glue_metrics` against the examples' gold labels (primary first)."""
        if any(e.label is None for e in examples):
            raise ValueError(f"{self.name}: cannot score unlabelled (test) examples")
        return metrics_lib.glue_metrics(self.name, predictions, gold_labels(self, examples))

    def write_predictions(self, predictions: Sequence, examples: Sequence[GlueExample],
                          path: str) -> None:
        """GLUE's submission TSV: "index\\tprediction", label names or STS-B floats."""
        if len(predictions) != len(examples):
            raise ValueError(f"{len(predictions)} predictions for {len(examples)} examples")
        lines = ["index\tprediction"]
        for example, p in zip(examples, predictions):
            if self.regression:
                value = repr(float(p))
            elif 0 <= int(p) < len(self.label_names):
                value = self.label_names[int(p)]
            else:
                raise ValueError(f"label id {p} of example {example.index} is out of range")
            lines.append(f"{example.index}\t{value}")
        atomic_write_text(path, "\n".join(lines) + "\n")

    # === Submission files ===

    def submission_file(self, split: str = "test") -> str:
        """GLUE leaderboard file name: "CoLA.tsv", ..., "MNLI-m.tsv", "MNLI-mm.tsv".

        The name depends on the split only for MNLI (matched or mismatched), so
        it is the same for a dev split as for its test split.
        """
        if split == DIAGNOSTIC:
            return "AX.tsv"
        if self.name == "mnli":
            return "MNLI-mm.tsv" if split.endswith("mismatched") else "MNLI-m.tsv"
        return f"{self.dir_name}.tsv"

    def read_predictions(self, path: str, examples: Sequence[GlueExample]) -> np.ndarray:
        """Inverse of write_predictions: a submission TSV -> predictions in example order.

        Rows are matched to examples by index; every example needs exactly one.

        Raises:
          TaskDataError (file:line): a missing file or header, a bad row, an
            unknown label or index, a repeated or missing index.
        """
        if not is_file(path):
            raise TaskDataError(f"{path}: {_missing(path)}")
        position: dict[str, int] = {}
        for i, e in enumerate(examples):  # rows are matched by index: each must be one's
            if e.index in position:
                raise TaskDataError(f"{e.source}: index {e.index!r} repeats in the gold file "
                                    f"(first at {examples[position[e.index]].source}), so "
                                    "predictions cannot be matched to its examples")
            position[e.index] = i
        result: list[Any] = [None] * len(examples)
        with _open(path) as f:
            reader = _TsvReader(f, path)
            header = next(reader, None)  # (a byte-order mark: dropped by _open)
            if header is None:  # (it had been "found None")
                raise TaskDataError(f"{path}: empty: expected the header "
                                    "'index<TAB>prediction' and a row per example")
            if [c.strip() for c in header] != ["index", "prediction"]:
                raise TaskDataError(f"{path}:1: expected the header 'index<TAB>prediction', "
                                    f"found {header!r}")
            for row in reader:
                where = f"{path}:{reader.line_num}"
                if not row:
                    continue
                if len(row) != 2:
                    raise TaskDataError(f"{where}: expected 2 columns, found {len(row)}")
                index, value = row[0].strip(), row[1].strip()
                if index not in position:
                    raise TaskDataError(f"{where}: index {index!r} is not in the gold file")
                if result[position[index]] is not None:
                    raise TaskDataError(f"{where}: index {index!r} repeats")
                result[position[index]] = self._parse_label(value, where, "prediction")
        missing = [examples[i].index for i, r in enumerate(result) if r is None]
        if missing:
            raise TaskDataError(f"{path}: no prediction for {len(missing)} of {len(examples)} "
                                f"examples (indices {', '.join(missing[:5])}"
                                f"{', ...' if len(missing) > 5 else ''})")
        if self.regression:
            return np.asarray(result, np.float64)
        return np.asarray([self.label_names.index(r) for r in result], np.int64)

    # === Reading ===

    def _read_rows(self, path: str, labelled: bool, split: str) -> Iterator[GlueExample]:
        with _open(path) as f:
            reader = _TsvReader(f, path)
            if labelled and self.headerless_columns:
                columns = list(self.headerless_columns)
            else:
                header = next(reader, None)
                if header is None:
                    raise TaskDataError(f"{path}: no examples (empty file)")
                columns = [c.strip() for c in header]
            wanted = [self.text_a] + ([self.text_b] if self.text_b else [])
            wanted += [self.label_column] if labelled else []
            missing = [c for c in wanted if c not in columns]
            if missing:
                raise TaskDataError(
                    f"{path}:1: header lacks column(s) {', '.join(map(repr, missing))} "
                    f"of the {self.dir_name} {'train/dev' if labelled else 'test'} layout "
                    f"(found: {', '.join(columns) or 'nothing'})")
            at = {c: columns.index(c) for c in wanted}
            width = len(columns)

            def field(row, c):  # by header position; a from_end column of a row of
                odd_row = c in self.from_end and len(row) != width  # another width
                return row[at[c] - width] if odd_row else row[at[c]]  # from its end

            index_col = next((columns.index(c) for c in ("index", "id") if c in columns), None)
            # what the original indexes: from the start, and (from_end) from the end
            needed = max([*(at[c] + 1 for c in at if c not in self.from_end),
                          *(width - at[c] for c in at if c in self.from_end),
                          0 if index_col is None else index_col + 1])
            named = [c for i, c in enumerate(columns)  # the columns read, in file order
                     if i == index_col or c in at and c not in self.from_end] + [
                f"{c} (counted from the row's end)" for c in at if c in self.from_end]
            row_number, wide = 0, []
            first_at: dict[str, str] = {}  # a dev or test file's indexes: its predictions' keys
            for row in reader:
                where = f"{path}:{reader.line_num}"
                if not any(f.strip() for f in row):  # (a line of spaces too: no index)
                    continue
                if len(row) > width:
                    if any(f.strip() for f in row[width:]):
                        wide.append(reader.line_num)
                    else:  # trailing tabs: fields of nothing (the columns counted from the
                        row = row[:width]  # row's end had read them: STS-B's score '')
                if len(row) < needed:
                    message = (f"{where}: expected at least {needed} tab-separated columns "
                               f"({', '.join(named)}), found {len(row)}")
                    if self.skip_malformed_rows and labelled:
                        logging.warning("skipping malformed row %s", message)
                        continue
                    if self.skip_malformed_rows:  # a test file's rows are the submission's
                        raise TaskDataError(
                            f"{message}: a {split or 'test'} row is not skipped (the "
                            f"{self.dir_name} submission needs a prediction for every "
                            "index, and GLUE refuses one that lacks any); mend the row")
                    raise TaskDataError(f"{message} (--skip_malformed_rows skips such rows, "
                                        "as the original does)" if labelled else
                                        f"{message}: mend the row (a {split or 'test'} row "
                                        f"is not skipped: the {self.dir_name} submission "
                                        "needs a prediction for every index)")
                index = row[index_col].strip() if index_col is not None else str(row_number)
                row_number += 1
                if split != "train" and index_col is not None:
                    said = (f"the {self.dir_name} submission's rows are matched by index"
                            if not labelled else "predictions are matched to its rows "
                            "by index (eval_glue)")
                    if not index:  # (a submission row without an index had been written)
                        raise TaskDataError(f"{where}: its {columns[index_col]!r} field is "
                                            f"empty; {said}")
                    if index in first_at:  # (two submission rows of one index; a dev
                        # file's: scored here, then eval_glue refused the predictions)
                        raise TaskDataError(
                            f"{where}: index {index!r} repeats (first at {first_at[index]}); "
                            + said)
                    first_at[index] = where
                try:
                    label = (self._parse_label(field(row, self.label_column).strip(), where,
                                               "label") if labelled else None)
                except TaskDataError as e:
                    if labelled and self.headerless_columns and reader.line_num == 1:
                        raise TaskDataError(
                            f"{e} ({self.dir_name}'s train and dev files have no header "
                            "line: remove it if this is one)") from None
                    if self.label_column in self.from_end and len(row) < width:
                        raise TaskDataError(  # (its text read as the score, unexplained)
                            f"{e} (read from the row's end, as the original reads it: the "
                            f"row has {len(row)} of the header's {width} columns; is one "
                            "missing?)") from None
                    raise
                yield GlueExample(
                    guid=f"{split}-{index}", index=index, text_a=field(row, self.text_a),
                    text_b=field(row, self.text_b) if self.text_b else None,
                    label=label, source=where)
            if wide:  # the official files have a few (MRPC's, QQP's): read as the original does
                logging.warning(
                    "%s: %d row(s) have more tab-separated fields than its %d columns (a tab "
                    "inside a text?; first at line %d): read by column position, as the "
                    "original reads them (MNLI's label and STS-B's columns counted from the "
                    "row's end), so a text holding a tab is cut there",
                    path, len(wide), len(columns), wide[0])

    def _parse_label(self, value: str, where: str, what: str) -> str | float:
        if self.regression:
            try:
                score = float(value)
            except ValueError:
                score = float("nan")
            if not np.isfinite(score):  # (a gold file's column is STS-B's score)
                raise TaskDataError(f"{where}: {'score' if what == 'label' else what} "
                                    f"{value!r} is not a "
                                    + ("finite number" if score == score or value.strip()
                                       .lower() == "nan" else "number"))
            if what == "label" and not self.regression_min <= score <= self.regression_max:
                raise TaskDataError(
                    f"{where}: score {value!r} is outside {self.dir_name}'s "
                    f"{self.regression_min:g} to {self.regression_max:g} (it trains on the "
                    "score scaled to 0..1)")
            return score
        if value not in self.label_names:
            raise TaskDataError(f"{where}: {what} {value!r} is not one of "
                                f"{', '.join(self.label_names)}")
        return value


def _missing(path: str) -> str:
    """Why `is_file(path)` is False, in words."""
    return "a folder, not a file" if "://" not in path and os.path.isdir(path) \
        else "no such file"


@contextlib.contextmanager
def _open(path: str):
    """The file's lines for csv (local, or gs:// etc. through tf.io.gfile), read one at a
    time, whose fields may be of any length (a long text is no malformed row). UTF-8,
    strictly, as the original's tf.gfile read them (invalid bytes had been replaced
    with U+FFFD, and the texts trained on silently changed); a byte-order mark is
    dropped.

    Raises:
      TaskDataError: a line that is not UTF-8, naming the file and line; a file that
        cannot be read (permissions, a failing disk), naming it.
    """
    allow_long_csv_fields()
    if "://" in path:
        import tensorflow as tf
        handle = tf.io.gfile.GFile(path, "rb")
    else:
        try:
            handle = open(path, "rb")
        except OSError as e:
            raise TaskDataError(f"{path}: cannot read it ({e.strerror or e})") from None
    with handle as f:
        try:
            yield _decoded_lines(f, path)
        except OSError as e:  # a read of the lines failed (EIO)
            raise TaskDataError(f"{path}: cannot read it ({e.strerror or e})") from None


class _TsvReader:
    """csv.reader of tab-separated, unquoted rows (line_num as csv's), whose csv.Error
    (a lone carriage return: "new-line character seen in unquoted field") is a
    TaskDataError naming the file and line; it had been a traceback."""

    def __init__(self, lines, path: str):
        self._reader = csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
        self._path = path

    @property
    def line_num(self) -> int:
        return self._reader.line_num

    def __iter__(self):
        return self

    def __next__(self) -> list[str]:
        try:
            return next(self._reader)
        except csv.Error as e:
            why = ("a carriage return alone inside a row (old Mac line ends?); save the file "
                   "with \\n line ends" if "new-line" in str(e) else str(e))
            raise TaskDataError(f"{self._path}:{self._reader.line_num}: {why}") from None


def _decoded_lines(f, path: str) -> Iterator[str]:
    for number, raw in enumerate(iter(f.readline, b""), 1):
        hint = utf16_hint(raw) if number == 1 else ""
        if hint:  # (without a byte-order mark, valid UTF-8)
            raise TaskDataError(f"{path}:1: not UTF-8 text{hint}; GLUE's files are UTF-8 text")
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TaskDataError(f"{path}:{number}: not valid UTF-8 ({e.reason})"
                                f"{utf16_hint(raw)}; GLUE's files are UTF-8 text") from None
        yield line.removeprefix("\ufeff") if number == 1 else line


def _encode(tokenizer, texts: list[str]) -> list[list[int]]:
    ids: list[list[int]] = []
    for start in range(0, len(texts), _ENCODE_CHUNK):
        ids.extend(tokenizer.encode(texts[start:start + _ENCODE_CHUNK]))
    return ids


def pack_examples(examples, tokenizer, max_seq_length: int, pair: bool,
                  columns: tuple[str, ...] | None = None) -> dict:
    """Examples with text_a (and text_b) -> {"input_ids", "input_mask", "segment_ids"}
    int32 [n, L]: [CLS] a [SEP] (b [SEP]), the longer side truncated first (pack_pair).

    Args:
      columns: the names of the text (and pair) columns, to refuse a text the
        tokenizer leaves no piece of (your own files); None: packed as it is (GLUE).
    Raises:
      ValueError: max_seq_length shorter than the special tokens.
      TaskDataError: with `columns`, a text of no pieces (the example's source).
    """
    minimum = 3 if pair else 2
    if max_seq_length < minimum:
        raise ValueError(f"max_seq_length must be at least {minimum}, got {max_seq_length}")
    ids_a = _encode(tokenizer, [e.text_a for e in examples])
    ids_b = (_encode(tokenizer, [e.text_b or "" for e in examples]) if pair
             else [None] * len(examples))
    if columns is not None:
        for e, a, b in zip(examples, ids_a, ids_b):
            empty = columns[0] if not a else columns[1] if pair and not b else None
            if empty is not None:  # (accents alone had trained as "[CLS] [SEP]")
                raise TaskDataError(
                    f"{e.source}: empty text in column {empty!r} once tokenized: the "
                    "tokenizer keeps none of its characters (such as accents or other "
                    "combining marks alone, which --do_lower_case strips, or variation "
                    "selectors)")
    rows = [pack_pair(a, b, max_seq_length, tokenizer.cls_id, tokenizer.sep_id)
            for a, b in zip(ids_a, ids_b)]
    columns = [np.asarray([r[i] for r in rows], np.int32).reshape(-1, max_seq_length)
               for i in range(3)]
    return dict(zip(("input_ids", "input_mask", "segment_ids"), columns))


# === Registry ===

def _registry(*tasks: GlueTask) -> dict[str, GlueTask]:
    """{name: task} in `metrics.GLUE_TASK_NAMES` order, one task for each of those names."""
    by_name = {t.name: t for t in tasks}
    if len(by_name) != len(tasks) or set(by_name) != set(metrics_lib.GLUE_TASK_NAMES):
        raise RuntimeError(f"GLUE tasks {[t.name for t in tasks]} do not match "
                           f"metrics.GLUE_TASK_NAMES {list(metrics_lib.GLUE_TASK_NAMES)}")
    return {name: by_name[name] for name in metrics_lib.GLUE_TASK_NAMES}


_BINARY = ("0", "1")
_ENTAILMENT = ("entailment", "not_entailment")
GLUE_TASKS: dict[str, GlueTask] = _registry(
    GlueTask("cola", "CoLA", _BINARY, "sentence", None, "label",
             headerless_columns=("source", "label", "star", "sentence")),
    GlueTask("sst2", "SST-2", _BINARY, "sentence", None, "label"),
    GlueTask("mrpc", "MRPC", _BINARY, "#1 String", "#2 String", "Quality", unordered=True),
    GlueTask("stsb", "STS-B", (), "sentence1", "sentence2", "score", default_epochs=10,
             unordered=True, regression_min=0.0, regression_max=5.0,
             from_end=("sentence1", "sentence2", "score")),
    GlueTask("qqp", "QQP", _BINARY, "question1", "question2", "is_duplicate"),
    GlueTask("mnli", "MNLI", ("contradiction", "entailment", "neutral"),
             "sentence1", "sentence2", "gold_label", from_end=("gold_label",)),
    GlueTask("qnli", "QNLI", _ENTAILMENT, "question", "sentence", "label"),
    GlueTask("rte", "RTE", _ENTAILMENT, "sentence1", "sentence2", "label", default_epochs=10),
    GlueTask("wnli", "WNLI", _BINARY, "sentence1", "sentence2", "label"),
)


@dataclasses.dataclass(frozen=True)
class Options(TaskOptions):
    """The GLUE tasks' options (run_finetuning flags)."""

    double_unordered: bool = option("double_unordered")  # MRPC, STS-B; the others ignore it
    classifier_head: str = option("classifier_head")
    skip_malformed_rows: bool = option("skip_malformed_rows")


def task_from_options(name: str, options: Options) -> GlueTask:
    """The GLUE task `name` with its options."""
    task = get_task(name)
    overrides = {"classifier_head": options.classifier_head} \
        if options.classifier_head != task.classifier_head else {}
    if task.unordered:
        overrides["double_unordered"] = options.double_unordered
    if options.skip_malformed_rows:
        overrides["skip_malformed_rows"] = True
    return dataclasses.replace(task, **overrides) if overrides else task


def get_task(name: str, **overrides) -> GlueTask:
    """A GLUE task by name ("mnli", "SST-2", "sts-b", ...); overrides replace fields.

    Raises:
      ValueError: an unknown name.
    """
    key = metrics_lib.normalize_task_name(name)
    if key not in GLUE_TASKS:
        from electra_tf.tasks.registry import ORIGINAL_TASK_NAMES

        ours = ORIGINAL_TASK_NAMES.get(str(name).lower())
        said = f": electra_tf calls that task {ours}" if ours in GLUE_TASKS else ""
        raise ValueError(f"unknown GLUE task {name!r}{said}; known: {', '.join(GLUE_TASKS)}")
    task = GLUE_TASKS[key]
    return dataclasses.replace(task, **overrides) if overrides else task


def evaluate_submission(task_name: str, predictions_file: str, dev_file: str,
                        skip_malformed_rows: bool = False) -> dict[str, float]:
    """The task's GLUE metrics of a submission-format predictions file against a
    labelled file (`python -m electra_tf.eval_glue`); `skip_malformed_rows` reads the
    labelled file as fine-tuning's --skip_malformed_rows does (the rows a run so trained
    predicted).

    Raises:
      InputError: an unknown task or any bad file (message names file:line).
    """
    try:
        task = get_task(task_name, **({"skip_malformed_rows": True} if skip_malformed_rows
                                      else {}))
    except ValueError as e:
        raise InputError(str(e)) from None
    try:
        examples = task.read_file(dev_file, labelled=True)
        predictions = task.read_predictions(predictions_file, examples)
    except TaskDataError as e:
        raise InputError(str(e)) from None
    return task.metrics(predictions, examples)
