"""What a fine-tuning task is: the contract between task modules and the loop.

Data flow:
  task.read(data_dir, split)              -> examples (task-specific objects)
  task.featurize(examples, tokenizer, L)  -> Features (numpy, one row per window)
  model(features.inputs)                  -> outputs (numpy after predict), by head:
      classification: "logits" [n, num_labels]
      regression:     "logits" [n]
      span:           "start_logits", "end_logits" [n, L], "answerable_logits" [n]
      tagging:        "tag_logits" [n, L, num_labels]
  task.predictions(outputs, examples, features) -> predictions (per example)
  task.metrics(predictions, examples)           -> {name: float}
  task.write_predictions(predictions, examples, path)

`Features.labels` holds the training targets, by head:
  classification: "label" int32 [n]          regression: "label" float32 [n]
  span: "start_positions", "end_positions" int32 [n], "is_impossible" float32 [n]
  tagging: "tag_ids" int32 [n, L], "tag_weights" float32 [n, L] (1 on the
      first wordpiece of each word a window is responsible for)
Splits with no labels (test sets) leave `labels` empty.

Bad input (a malformed row, an unknown label, an empty split) raises
`TaskDataError` whose message names the file and the line.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, Sequence

import numpy as np

HEADS = ("classification", "regression", "span", "tagging")


class TaskDataError(ValueError):
    """A task file is malformed; the message names the file and line."""


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


class Task(Protocol):
    """A fine-tuning task (see the module docstring for the data flow)."""

    name: str  # e.g. "mnli", "squad_v2", "ner"
    head: str  # one of HEADS
    label_names: Sequence[str]  # classes or tags ([] for regression and span)
    metric_names: Sequence[str]  # what metrics() returns; the first is the primary one

    def splits(self) -> Sequence[str]:
        """Split names, e.g. ("train", "dev", "test") or MNLI's matched/mismatched."""

    def read(self, data_dir: str, split: str) -> list:
        """Examples of one split. Raises TaskDataError (file:line) on bad input."""

    def featurize(self, examples: list, tokenizer, max_seq_length: int) -> Features:
        """Examples -> fixed-length windows; targets when the examples are labelled."""

    def predictions(self, outputs: dict[str, np.ndarray], examples: list,
                    features: Features) -> Any:
        """Model outputs per window -> one prediction per example."""

    def metrics(self, predictions: Any, examples: list) -> dict[str, float]:
        """Scores against the examples' gold labels."""

    def write_predictions(self, predictions: Any, examples: list, path: str) -> None:
        """The official output format (GLUE submission TSV, SQuAD JSON, CoNLL)."""


def pack_pair(tokens_a: list[int], tokens_b: list[int] | None, max_seq_length: int,
              cls_id: int, sep_id: int) -> tuple[list[int], list[int], list[int]]:
    """[CLS] a [SEP] (b [SEP]) padded to L, truncating the longer side first (BERT).

    Returns:
      (input_ids, input_mask, segment_ids), each of length max_seq_length.
    """
    a, b = list(tokens_a), list(tokens_b) if tokens_b is not None else None
    budget = max_seq_length - (3 if b is not None else 2)
    if b is None:
        a = a[:budget]
    else:
        while len(a) + len(b) > budget:
            (a if len(a) >= len(b) else b).pop()
    ids = [cls_id] + a + [sep_id]
    segments = [0] * len(ids)
    if b is not None:
        ids += b + [sep_id]
        segments += [1] * (len(b) + 1)
    pad = max_seq_length - len(ids)
    return ids + [0] * pad, [1] * len(ids) + [0] * pad, segments + [0] * pad
