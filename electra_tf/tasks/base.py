"""What a fine-tuning task is: the contract between task modules and the loop.

A task's `head` names what its fine-tuned model serves, in the one vocabulary
that the tasks, the model (tasks/model.py), the folder a run writes
(finetuning_config.json's "head") and the export (`--task`,
serving/export.py) share, HEADS: the names of tasks/heads/'s registry, each
a class that owns the head's layers, loss, record and serving outputs:
  sequence_classification   one output per text or text pair: classes, or with
                            `regression` one number (STS-B)
  token_classification      a tag per token (NER, chunking, your own tags)
  squad                     an answer span in a context; with `answerable` also
                            whether there is one (SQuAD 2.0)
The export serves these and the pre-trained discriminator's "rtd". A task
declares its head here and, by it, its loss (`Task.loss`: `Head.loss`).

Data flow:
  task.read(data_dir, split)              -> examples (task-specific objects)
  task.featurize(examples, tokenizer, L)  -> Features (numpy, one row per window)
  model(features.inputs)                  -> outputs (numpy after predict), by head:
      sequence_classification: "logits" [n, num_labels]; regression: [n]
      squad:          "start_logits", "end_logits" [n, L], "answerable_logits" [n];
                      the joint head predicts "start_logits" and its beam instead
                      of "end_logits": "start_top_log_probs", "start_top_index"
                      [n, K], "end_top_log_probs", "end_top_index" [n, K, K]
                      (tasks/model.py)
      token_classification: "tag_logits" [n, L, num_labels]
  task.loss(outputs, labels)                    -> the batch's summed loss (training)
  task.predictions(outputs, examples, features) -> predictions (per example)
  task.metrics(predictions, examples)           -> {name: float}
  task.write_predictions(predictions, examples, path)

`Features.labels` holds the training targets, by head:
  sequence_classification: "label" int32 [n] (regression: float32 [n])
  squad: "start_positions", "end_positions" int32 [n], "is_impossible" float32 [n]
  token_classification: "tag_ids" int32 [n, L], "tag_weights" float32 [n, L] (1 on
      the first wordpiece of each word a window is responsible for)
Splits with no labels (test sets) leave `labels` empty.

Bad input (a malformed row, an unknown label, an empty split) raises
`TaskDataError` whose message names the file and the line.
"""

from __future__ import annotations

import abc
import dataclasses
import json
import os
from types import MappingProxyType
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from electra_tf.core.errors import ConfigError, TaskDataError
from electra_tf.tasks import heads
from electra_tf.text.cleaning import (
    has_lone_surrogate,
    invisible_character,
    normalization_twins,
)

# What a fine-tuned model serves (see the module docstring): the registry's names
# (tasks/heads/__init__.py, which maps each to its class).
HEADS = tuple(heads.HEADS)

__all__ = ["HEADS", "Features", "Task", "TaskDataError", "TaskOptions", "option", "pack_pair"]


def option(name: str):
    """A TaskOptions field for the FinetuningConfig field `name`, with its default."""
    from electra_tf.core.config import FinetuningConfig

    return dataclasses.field(default=FinetuningConfig.__dataclass_fields__[name].default)


@dataclasses.dataclass(frozen=True)
class TaskOptions:
    """The task options a family of tasks reads: FinetuningConfig fields (each a flag of
    run_finetuning), with FinetuningConfig's defaults (`option`).

    A family's module (glue.py, squad.py, tagging.py, classification.py) subclasses
    this as `Options` and builds its tasks from it (`task_from_options`); an option of
    another family given to one of its tasks is refused by the registry in that
    family's words (`refusals`, else the generic line).
    """

    # The line refusing a field of this family to a task of another ({name!r}: that task).
    refusals: ClassVar[Mapping[str, str]] = MappingProxyType({})

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_config(cls, config) -> "TaskOptions":
        """The options a FinetuningConfig gives this family."""
        return cls(**{n: getattr(config, n) for n in cls.names()})

    def given(self) -> list[str]:
        """The options set to other than their default."""
        return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) != f.default]

    def unused(self, name: str) -> list[str]:
        """The options given (`given`) that change nothing for task `name` with the others
        as they are (a --beam_size with --joint_prediction=false), each as the note names
        it; none by default."""
        return []

    def decoding(self, name: str) -> tuple[str, ...]:
        """The options that only turn task `name`'s outputs into predictions (they change
        the scores, not the training), with the others as they are: a resumed run with
        other values scores its later epochs unlike its earlier ones. None by default."""
        return ()


@dataclasses.dataclass
class Features:
    """Model inputs and targets for a list of examples, as numpy arrays.

    Attributes:
      inputs: "input_ids", "input_mask", "segment_ids": int32 [n, L].
      labels: targets by head (see the module docstring); {} without labels.
      example_index: int32 [n], the example each row (window) comes from.
      extra: task-specific per-row data the postprocessing needs (e.g. token
        to character offsets for SQuAD), any Python objects, length n.
    """

    inputs: dict[str, np.ndarray]
    labels: dict[str, np.ndarray]
    example_index: np.ndarray
    extra: list[Any] = dataclasses.field(default_factory=list)

    def __len__(self) -> int:
        return int(self.example_index.shape[0])


class Task(abc.ABC):
    """A fine-tuning task (see the module docstring for the data flow).

    Every task class subclasses this. A subclass provides `name`, `head`,
    `label_names` and `metric_names` (as class or instance attributes, fields
    or properties) and the abstract methods; the other attributes have defaults
    that it overrides where they differ.
    """

    name: str
    """The task's name, e.g. "mnli", "squad_v2", "ner"."""
    head: str
    """What the model serves, one of HEADS; it gives the model's head and the loss."""
    label_names: Sequence[str]
    """Classes or tags, in logit order ([] for a regression and for squad)."""
    metric_names: Sequence[str]
    """What metrics() returns; the first is the primary one."""
    labels_from: str = ""
    """Where given label names came from, for messages about a label outside them
    ("the labels FOLDER was trained with": an evaluation reads its model's), or "":
    --label_names, or the train split's."""

    regression: bool = False
    """sequence_classification only: the head predicts one number, not classes."""
    answerable: bool = False
    """squad only: the head also predicts answerability (SQuAD 2.0)."""
    default_max_seq_length: int = 128
    """max_seq_length when the configuration gives none."""
    default_epochs: float = 3
    """Training epochs when the configuration gives none."""
    prediction_suffix: str = ".txt"
    """Extension of the prediction files (<name>_<split>_predictions<suffix>)."""
    text_b: str | None = None
    """The second text column of a sentence-pair task; None for single-text tasks."""
    head_options: Mapping[str, Any] = MappingProxyType({})
    """More FinetuningModel arguments for this task's head (SQuAD: span_head,
    beam_size); whoever builds the model passes them."""
    loss_options: Mapping[str, Any] = MappingProxyType({})
    """More arguments of the head's loss (`Head.loss`) that are not the model's (SQuAD
    2.0: the answerability loss's weight): training reads them, the folder records them
    with the run's settings, not with the head."""

    @property
    def second_segment(self) -> bool:
        """Whether its inputs hold segment id 1: a text pair's second text, SQuAD's and
        MRQA's contexts (a model of one segment type, type_vocab_size 1, cannot read
        them)."""
        return self.text_b is not None or self.head == "squad"

    def segments_refusal(self, type_vocab_size: int) -> str | None:
        """Why a model of `type_vocab_size` segment types cannot take this task's
        inputs (one type, where they hold segment id 1), else None: its id had gone
        past the table (a traceback on CPU; a GPU's gather gives zeros, silently)."""
        if not self.second_segment or type_vocab_size >= 2:
            return None
        what = "the second text" if self.text_b is not None else "the context"
        return (f"{self.name}'s inputs hold segment id 1 ({what}), but the model has "
                f"type_vocab_size {type_vocab_size} (one segment type); fine-tune it on "
                "single texts, or start from a model of two segment types")

    @property
    def head_class(self):
        """The class of this task's head (tasks/heads/; Keras is imported on first use)."""
        return heads.head_class(self.head)

    def head_config(self):
        """The options this task trains its head with (`Head.config_for_task`)."""
        return self.head_class.config_for_task(self)

    def loss(self, outputs: Mapping[str, Any], labels: Mapping[str, Any]):
        """The summed loss of a batch (a scalar tensor): the head's (`Head.loss`).

        `outputs` as the model returns them in training, `labels` as
        Features.labels. Divide by `loss_count(labels)` for the mean to report.
        """
        return self.head_class.loss(self.head_config(), outputs, labels,
                                    **self.loss_options)

    def loss_count(self, labels: Mapping[str, Any]):
        """What `loss` sums over, as a float32 scalar (examples, or weighted tokens)."""
        return self.head_class.loss_count(self.head_config(), labels)

    def submission_file(self, split: str) -> str | None:
        """File name of a split's predictions in a leaderboard's submission format
        (GLUE's "MNLI-m.tsv"), or None to use <name>_<split>_predictions<suffix>.

        The fine-tuning loop asks only for test splits.
        """
        return None

    @abc.abstractmethod
    def splits(self) -> Sequence[str]:
        """Split names, e.g. ("train", "dev", "test") or MNLI's matched/mismatched."""

    def continues(self, record) -> str | None:
        """None when a fine-tuned model of this task (its folder's `record`) can go on
        training as this task; else what differs and the flag that continues it."""
        return None

    def label_options(self, record) -> dict:
        """The task options a fine-tuned model's recorded labels are read with (its
        folder's `record`): a tagger's tagging_scheme, which its tag names need."""
        return {}

    def optional_split(self, data_dir: str, split: str) -> str | None:
        """For a split a run may go without (MNLI's diagnostic set): None where its file
        is in `data_dir`, else the line that says it is left out. Every other split is
        required (None)."""
        return None

    def data_folder(self, data_dir: str) -> str:
        """The folder whose train and dev files `read` reads for `data_dir` (what a trial
        group hashes): `data_dir` itself, or a file the task reads as every split; GLUE's
        `<data_dir>/<task folder>` where the files are there."""
        return data_dir

    @abc.abstractmethod
    def read(self, data_dir: str, split: str) -> list:
        """Examples of one split. Raises TaskDataError (file:line) on bad input."""

    @abc.abstractmethod
    def featurize(self, examples: list, tokenizer, max_seq_length: int) -> Features:
        """Examples -> fixed-length windows; targets when the examples are labelled."""

    @abc.abstractmethod
    def predictions(self, outputs: dict[str, np.ndarray], examples: list,
                    features: Features) -> Any:
        """Model outputs per window -> one prediction per example."""

    @abc.abstractmethod
    def metrics(self, predictions: Any, examples: list) -> dict[str, float]:
        """Scores against the examples' gold labels."""

    @abc.abstractmethod
    def write_predictions(self, predictions: Any, examples: list, path: str) -> None:
        """The official output format (GLUE submission TSV, SQuAD JSON, CoNLL)."""

    def prediction_files(self, path: str) -> list[str]:
        """The files `write_predictions(..., path)` writes."""
        return [path]

    def scores(self, predictions: Any, outputs: dict[str, np.ndarray], examples: list,
               features: Features) -> dict[str, np.ndarray] | None:
        """Each example's raw scores, written beside its predictions file
        (`scores_file`), or None where the task writes none. The original pickles a
        GLUE test split's logits per trial so that trials can be ensembled; a sequence
        head's task gives them (`sequence_scores`)."""
        return None


SCORES_SUFFIX = "_logits.npz"


def scores_file(predictions_path: str) -> str:
    """Where `Task.scores` are written for a predictions file: `cola_test_predictions.tsv`
    -> `cola_test_logits.npz`, GLUE's `CoLA.tsv` -> `CoLA_logits.npz`."""
    stem = os.path.splitext(predictions_path)[0]
    stem = stem[:-len("_predictions")] if stem.endswith("_predictions") else stem
    return stem + SCORES_SUFFIX


def write_scores(path: str, scores: dict[str, np.ndarray]) -> None:
    """`scores` as an uncompressed .npz (no pickled objects: `np.load` reads it with
    allow_pickle off), written whole or not at all."""
    from electra_tf.core.fileio import atomic_write

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            np.savez(f, **scores)

    atomic_write(path, write)


def sequence_scores(task: Task, predictions: Any, outputs: dict[str, np.ndarray],
                    examples: Sequence, features: Features) -> dict[str, np.ndarray]:
    """`Task.scores` of a sequence head (one window per example): `index` [n] (each
    example's index, as text, as its predictions file writes it), and `logits` float32
    [n, classes] with `label_names` [classes] in logit order (the original's pickled
    logits), or for a regression `predictions` float64 [n] (the values the file holds
    at full precision)."""
    index = np.array([str(e.index) for e in examples])
    if task.regression:
        return {"index": index, "predictions": np.asarray(predictions, np.float64)}
    logits = np.asarray(outputs["logits"], np.float32).reshape(len(features), -1)
    by_example = np.zeros((len(examples), logits.shape[1]), np.float32)
    by_example[features.example_index] = logits
    return {"index": index, "logits": by_example,
            "label_names": np.array(list(task.label_names))}


def original_defaults(name: str, n_tasks: int = 1) -> tuple[int, float]:
    """(max_seq_length, num_train_epochs) the original gives a run of the task `name`
    (the original's task name) among `n_tasks` (configure_finetuning.py): for a single
    task, 512 tokens and 2 epochs where the name holds "squad" or "qa", 256 tokens for
    chunk, 10 epochs for rte and sts; else, and for every task of a multi-task run,
    128 tokens and 3 epochs."""
    if n_tasks != 1:
        return 128, 3.0
    if "squad" in name or "qa" in name:
        return 512, 2.0
    if name == "chunk":
        return 256, 3.0
    return 128, (10.0 if name in ("rte", "sts") else 3.0)


def parse_label_names(value: str) -> tuple[str, ...] | None:
    """--label_names "a,b,c" -> ("a", "b", "c"); '["a,b", "c"]' (a JSON list, for names
    holding commas) -> ("a,b", "c"); "" -> None (learned from train).

    Raises:
      ConfigError: an empty or repeated name, a "[" that does not open a JSON list
        of strings, or a name holding a control, lone surrogate or invisible character
        (one the tokenizer deletes, such as U+200B: the data's labels are refused it).
    """
    if not value.strip():
        return None
    if value.strip().startswith("["):
        try:
            names = json.loads(value)
        except (ValueError, RecursionError) as e:  # also 4,300+ digits, deep nesting
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
    if any(has_control_character(n) for n in names):
        raise ConfigError(f"--label_names {value!r}: a name holds a control character (a tab "
                          "or a line break), which the tab-separated prediction files cannot")
    if any(has_lone_surrogate(n) for n in names):
        raise ConfigError(f"--label_names {value!r}: a name holds a lone surrogate (\\ud800 "
                          "to \\udfff), which no UTF-8 file can hold")
    for n in names:
        odd = invisible_character(n)
        if odd:  # 'posi\u200btive' prints as 'positive', which the data's labels cannot be
            raise ConfigError(f"--label_names: the name {n!r} holds an invisible character "
                              f"(U+{ord(odd):04X}) and would print as another name; remove it")
    check_normalization_twins(names, "--label_names", ConfigError)
    return names


def check_normalization_twins(names, where: str, error=TaskDataError) -> None:
    """Refuses two names that are one text in two Unicode spellings (NFC and NFD
    "café"): two classes that print alike."""
    twins = normalization_twins(names)
    if twins:
        raise error(f"{where}: the labels {twins[0]!r} and {twins[1]!r} are one text in two "
                    f"Unicode spellings ({ascii(twins[0])} and {ascii(twins[1])}: composed and "
                    "decomposed accents, which print alike): write them alike")


def has_control_character(text: str) -> bool:
    """Whether `text` holds a tab, a line break (also U+2028, U+2029) or another control
    character (Unicode category Cc), which a name in a tab-separated line of a
    prediction file cannot."""
    import unicodedata

    return any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in text)


def format_label_names(names) -> str:
    """The --label_names value `parse_label_names` reads back as `names`: comma-separated, or
    a JSON list where a name holds a comma, starts with [ or has spaces at its ends."""
    if any("," in n or n.startswith("[") or n != n.strip() for n in names):
        return json.dumps(list(names), ensure_ascii=False)
    return ",".join(names)


# csv refuses fields over 128 KiB by default, and a long text is no malformed record.
# A field can be no longer than the file; 2**31 - 1 is the largest limit every
# platform's C long holds (sys.maxsize overflows Windows').
FIELD_SIZE_LIMIT = 2**31 - 1


def allow_long_csv_fields() -> None:
    """Lets the csv module read fields of any length (FIELD_SIZE_LIMIT); process-wide,
    and it only ever raises the limit."""
    import csv

    if csv.field_size_limit() < FIELD_SIZE_LIMIT:
        csv.field_size_limit(FIELD_SIZE_LIMIT)


def pack_pair(tokens_a: list[int], tokens_b: list[int] | None, max_seq_length: int,
              cls_id: int, sep_id: int) -> tuple[list[int], list[int], list[int]]:
    """[CLS] a [SEP] (b [SEP]) padded to L, truncating the longer side first, b on ties
    (BERT's and the original's _truncate_seq_pair). An empty b (None, or a second
    text of no pieces) packs a alone, [CLS] a [SEP], as the original's featurize does.

    Returns:
      (input_ids, input_mask, segment_ids), each of length max_seq_length.
    """
    a, b = list(tokens_a), list(tokens_b) if tokens_b else None
    budget = max_seq_length - (3 if b is not None else 2)
    if b is None:
        a = a[:budget]
    else:
        while len(a) + len(b) > budget:
            (a if len(a) > len(b) else b).pop()
    ids = [cls_id] + a + [sep_id]
    segments = [0] * len(ids)
    if b is not None:
        ids += b + [sep_id]
        segments += [1] * (len(b) + 1)
    pad = max_seq_length - len(ids)
    return ids + [0] * pad, [1] * len(ids) + [0] * pad, segments + [0] * pad


def gold_labels(task: Task, examples: Sequence) -> np.ndarray:
    """The gold of labelled examples (each with `label` and `source`) of a sequence
    classification task: targets float64 [n] of a regression, else class ids int32
    [n] in `task.label_names` order.

    Raises:
      ValueError: the task has no labels yet (learned from the train split).
      TaskDataError: a label not among them (naming the example's file and line).
    """
    if task.regression:
        return np.asarray([e.label for e in examples], np.float64)
    names = tuple(task.label_names)
    if not names:
        raise ValueError(f"task {task.name!r} has no labels yet: read the train split "
                         "or call fit_labels(train_examples) first")
    ids = {name: i for i, name in enumerate(names)}
    gold = []
    for e in examples:
        if e.label not in ids:
            raise TaskDataError(f"{e.source}: label {e.label!r} is not one of "
                                f"{', '.join(names)}")
        gold.append(ids[e.label])
    return np.asarray(gold, np.int32)
