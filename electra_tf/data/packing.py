"""Packs tokenized sentences into pre-training examples, as the original does.

A port of google-research/electra's `build_pretraining_dataset.ExampleBuilder`
with its exact rules (docs/reference.md, "Pre-training data"):

- sentences are appended until the target length is reached; a blank line
  (end of document) flushes the example;
- with probability 0.1 the example has one segment, otherwise segment A aims
  at (target - 3) // 2 tokens;
- a sentence goes to A if A is empty, or still fits, or with probability 0.5
  when B is empty and A is under its target; otherwise to B;
- A is cut to L - 2 tokens and B to max(0, L - len(A) - 3);
- with probability 0.05 the next target is randint(5, L), otherwise L.

The builder is pure Python and draws from its own `random.Random`, so a seed
fixes the output exactly.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Sequence


@dataclasses.dataclass
class PackedExample:
    """One example before padding: [CLS] A [SEP] (B [SEP])."""

    first_segment: list[int]
    second_segment: list[int]


@dataclasses.dataclass
class SpecialIds:
    cls_id: int
    sep_id: int
    pad_id: int = 0


def to_features(example: PackedExample, ids: SpecialIds, max_length: int) -> dict[str, list[int]]:
    """[CLS] A [SEP] B [SEP] + padding -> input_ids, input_mask, segment_ids of length L."""
    input_ids = [ids.cls_id] + example.first_segment + [ids.sep_id]
    segment_ids = [0] * len(input_ids)
    if example.second_segment:
        input_ids += example.second_segment + [ids.sep_id]
        segment_ids += [1] * (len(example.second_segment) + 1)
    n = len(input_ids)
    if n > max_length:
        raise AssertionError(f"packed example of {n} tokens exceeds {max_length}")
    pad = max_length - n
    return {"input_ids": input_ids + [ids.pad_id] * pad,
            "input_mask": [1] * n + [0] * pad,
            "segment_ids": segment_ids + [0] * pad}


class ExampleBuilder:
    """Given a stream of tokenized sentences, creates pre-training examples.

    Args:
      max_length: L, the example length with [CLS]/[SEP] included.
      rng: the random source (seed it for reproducible data).
    """

    def __init__(self, max_length: int, rng: random.Random):
        if max_length < 8:
            raise ValueError(f"max_length must be >= 8, got {max_length}")
        self._max_length = max_length
        self._target_length = max_length
        self._rng = rng
        self._current_sentences: list[Sequence[int]] = []
        self._current_length = 0

    def add_sentence(self, token_ids: Sequence[int]) -> PackedExample | None:
        """Adds one tokenized line; returns an example when the target is reached."""
        self._current_sentences.append(token_ids)
        self._current_length += len(token_ids)
        if self._current_length >= self._target_length:
            return self._create_example()
        return None

    def end_document(self) -> PackedExample | None:
        """A blank line: flushes what has been collected, if anything."""
        if self._current_length != 0:
            return self._create_example()
        self._current_sentences = []
        return None

    def _create_example(self) -> PackedExample:
        # A small chance of a single segment, as in classification tasks.
        if self._rng.random() < 0.1:
            first_segment_target_length = 100000
        else:
            # -3: [CLS] and two [SEP] are not in the sentences yet.
            first_segment_target_length = (self._target_length - 3) // 2

        first_segment: list[int] = []
        second_segment: list[int] = []
        for sentence in self._current_sentences:
            # A, if A is empty, if the sentence still fits, or (half the time)
            # if it overflows A while B is still empty.
            if (len(first_segment) == 0
                    or len(first_segment) + len(sentence) < first_segment_target_length
                    or (len(second_segment) == 0
                        and len(first_segment) < first_segment_target_length
                        and self._rng.random() < 0.5)):
                first_segment += sentence
            else:
                second_segment += sentence

        # Trim to L, counting the [CLS]/[SEP] tokens still to be added.
        first_segment = first_segment[:self._max_length - 2]
        second_segment = second_segment[:max(0, self._max_length - len(first_segment) - 3)]

        self._current_sentences = []
        self._current_length = 0
        # A small chance of a random-length example instead of a full one.
        if self._rng.random() < 0.05:
            self._target_length = self._rng.randint(5, self._max_length)
        else:
            self._target_length = self._max_length
        return PackedExample(first_segment, second_segment)
