"""The 2019 MRQA shared task's format: NewsQA, Natural Questions, TriviaQA, SearchQA, or
any file of that format (`mrqa`), as the original's MRQATask (finetune/qa/qa_tasks.py).

    task = MrqaTask("newsqa")
    examples = task.read("data/newsqa", "dev")    # dev.jsonl.gz or dev.jsonl
    ...                                            # then as SquadTask (squad.py)
    task.metrics(preds, examples)                  # {"f1": ..., "exact_match": ...}

A file is `train.jsonl` / `dev.jsonl`, gzipped as distributed (`.jsonl.gz`) or
plain: a header line ({"header": {...}}), then one context per line:

    {"context": "...", "qas": [{"qid": "...", "question": "...",
      "answers": ["...", ...],
      "detected_answers": [{"text": "...", "char_spans": [[start, end]], ...}]}]}

Windows and decoding are SquadTask's (SQuAD 1.1: every question has an
answer, no null answer): the question cut to max_query_length (64)
tokens, windows every doc_stride (128) tokens, a window that does not hold the
whole answer trained to point at [CLS] (kept, as the original keeps it), and
each token decoded from its max-context window. What is MRQA's, as the
original reads it:
- training takes each question's first detected answer at the start of its
  first character span, `text` characters long (char_spans[0][0] and
  len(text): qa_tasks.py); a question whose answer runs past the context, or
  whose whitespace words there do not contain the answer text (case folded),
  is skipped with a warning, as the original skips it (`squad.recoverable`);
  the answer's tokens are SquadTask's, the original's rule
  (`squad.original_answer_span`);
- predictions are keyed by `qid`; the score is the MRQA official evaluation
  (`mrqa_eval`: EM and F1, the maximum over the question's `answers` strings,
  SQuAD normalization), which the original runs with skip_no_answer;
- the defaults of configure_finetuning.py, which gives a task with "qa" (or
  "squad") in its name 512 tokens and 2 epochs: newsqa, triviaqa, searchqa
  and mrqa; naturalqs has neither in its name, so the original gave it 128
  tokens and 3 epochs, and so does this port (--max_seq_length=512
  --num_train_epochs=2 is the QA setting).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

from absl import logging

from electra_tf.core.errors import InputError, TaskDataError
from electra_tf.tasks import base, mrqa_eval
from electra_tf.tasks.squad import (
    SpanOptions,
    SquadExample,
    SquadPrediction,
    SquadTask,
    json_kind,
    recoverable,
)

# The original's MRQA tasks (finetune/task_builder.py), and `mrqa` for any file of the format.
MRQA_TASKS = ("newsqa", "naturalqs", "triviaqa", "searchqa", "mrqa")


@dataclasses.dataclass(frozen=True)
class MrqaExample(SquadExample):
    """One MRQA question: `qas_id` is its qid, `answers` the training span (the first
    detected answer; empty where the original skips it or on dev without one), `gold`
    the answer strings the official evaluation scores against."""

    gold: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Options(SpanOptions):
    """The MRQA tasks' options (run_finetuning flags): the span tasks' (the windows, the
    decoding and the span head). SQuAD 2.0's null rule is not one: an MRQA task always
    has an answer (`squad_null_rule` and its thresholds are refused)."""


def task_from_options(name: str, options: Options) -> "MrqaTask":
    """An MRQA task (one of MRQA_TASKS) with its options."""
    return MrqaTask(name, **options.task_arguments())


class MrqaTask(SquadTask):
    """An MRQA task (a SquadTask of version 1.1 read from MRQA files).

    Args:
      name: one of MRQA_TASKS.
      **options: SquadTask's (max_query_length, doc_stride, n_best_size,
        max_answer_length, joint_prediction, beam_size).
    """

    def __init__(self, name: str = "mrqa", **options):
        if name not in MRQA_TASKS:
            raise ValueError(f"an MRQA task is one of {', '.join(MRQA_TASKS)}, got {name!r}")
        super().__init__(version="1.1", **options)
        self.name = name
        self.metric_names = ("f1", "exact_match")
        self.default_max_seq_length, epochs = base.original_defaults(name)
        self.default_epochs = int(epochs)

    # === Reading ===
    def data_file(self, data_dir: str, split: str) -> str:
        """A file is taken as is; a folder holds SPLIT.jsonl.gz or SPLIT.jsonl (not both)."""
        if os.path.isfile(data_dir):
            return data_dir
        found = [p for p in (os.path.join(data_dir, f"{split}.jsonl.gz"),
                             os.path.join(data_dir, f"{split}.jsonl")) if os.path.isfile(p)]
        if len(found) > 1:
            raise TaskDataError(f"{data_dir} holds both {split}.jsonl.gz and {split}.jsonl; "
                                "keep one")
        if not found:
            raise TaskDataError(f"{data_dir}: no {split}.jsonl.gz or {split}.jsonl (the MRQA "
                                "shared task's files, renamed by split)")
        return found[0]

    def read(self, data_dir: str, split: str) -> list[MrqaExample]:
        """An MRQA file -> examples. Raises TaskDataError (file:line) on bad input."""
        path = self.data_file(data_dir, split)
        training = split == "train"
        examples: list[MrqaExample] = []
        seen: set[str] = set()
        skipped: list[str] = []
        try:
            for number, paragraph in mrqa_eval.json_lines(path):
                examples += self._paragraph(paragraph, f"{path}:{number}", training, seen,
                                            skipped)
        except InputError as e:
            raise TaskDataError(str(e)) from None
        if skipped:
            logging.warning("%s: %d question(s) skipped, as the original skips them: the "
                            "detected answer's text is not at its char_spans (first: %s)",
                            path, len(skipped), skipped[0])
        if not examples:
            raise TaskDataError(f"{path}: no questions" + (
                f" ({len(skipped)} skipped: their answers are not at their char_spans)"
                if skipped else " (empty split)"))
        return examples

    def _paragraph(self, paragraph: dict, where: str, training: bool, seen: set,
                   skipped: list) -> list[MrqaExample]:
        context = _field(paragraph, "context", str, where)
        out = []
        for q, qa in enumerate(_field(paragraph, "qas", list, where)):
            qid = _field(qa, "qid", str, f"{where}: question {q}")
            here = f"{where}: question {qid!r}"
            if qid in seen:
                raise TaskDataError(f"{here}: the qid repeats")
            seen.add(qid)
            question = _field(qa, "question", str, here)
            gold = ()
            if not training or "answers" in qa:
                gold = tuple(_field(qa, "answers", list, here))
                if not gold or not all(isinstance(a, str) for a in gold):
                    raise TaskDataError(f"{here}: 'answers' must be a non-empty list of "
                                        "strings")
            try:
                span = self._detected(qa, context, here, required=training)
            except TaskDataError:
                if training:
                    raise
                span = None  # dev is scored on `answers`; the original reads no span there
            if training and span is None:
                skipped.append(here)
                continue
            out.append(MrqaExample(qid, question, context, (span,) if span else (), False,
                                   gold=gold))
        return out

    @staticmethod
    def _detected(qa: dict, context: str, here: str, required: bool):
        """(text, start) of the first detected answer (qa_tasks.py), or None where the
        original skips it; checked for shape (a dev question's, which the original does
        not read, is left out where it is malformed: `_paragraph`)."""
        if not required and "detected_answers" not in qa:
            return None
        detected = _field(qa, "detected_answers", list, here)
        if not detected:
            raise TaskDataError(f"{here}: 'detected_answers' is empty")
        text = _field(detected[0], "text", str, f"{here}: detected answer 0")
        spans = _field(detected[0], "char_spans", list, f"{here}: detected answer 0")
        ok = spans and all(isinstance(s, list) and len(s) == 2 and all(
            isinstance(x, int) and not isinstance(x, bool) for x in s) for s in spans)
        if not ok:
            raise TaskDataError(f"{here}: detected answer 0: 'char_spans' must be a non-empty "
                                f"list of [start, end] character offsets, got {spans!r}")
        start = spans[0][0]
        if not text or not 0 <= start < len(context):
            raise TaskDataError(f"{here}: detected answer 0 starts at character {start}, "
                                f"outside the context's {len(context)} characters"
                                if text else f"{here}: detected answer 0 has an empty text")
        return (text, start) if recoverable(context, start, text) else None

    # === Scores and files ===
    def metrics(self, predictions: dict[str, SquadPrediction],
                examples: Sequence[MrqaExample]) -> dict[str, float]:
        """The MRQA official EM and F1 (percent) over the examples' `gold` answers."""
        answers = {ex.qas_id: list(ex.gold) for ex in examples}
        result = mrqa_eval.evaluate(answers, {q: p.answer for q, p in predictions.items()},
                                    skip_no_answer=True)
        return {"f1": float(result["f1"]), "exact_match": float(result["exact_match"])}


def _field(obj, key: str, kind: type, where: str):
    if not isinstance(obj, dict) or key not in obj:
        raise TaskDataError(f"{where}: missing key {key!r}")
    value = obj[key]
    if not isinstance(value, kind):
        raise TaskDataError(f"{where}: {key!r} must be {json_kind(kind)}, got "
                            f"{json_kind(type(value))}")
    return value
