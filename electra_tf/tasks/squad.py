"""SQuAD 1.1 and 2.0: official JSON in, sliding windows, span decoding, official EM/F1.

    task = SquadTask("2.0")
    examples = task.read("data/squad", "dev")             # data/squad/dev-v2.0.json
    features = task.featurize(examples, tokenizer, 512)   # one row per window
    outputs = ...  # the span head's outputs (numpy), see "Decoding" below
    preds = task.predictions(outputs, examples, features)
    task.metrics(preds, examples)                         # official evaluators
    task.write_predictions(preds, examples, "out/predictions.json")  # + null_odds.json

Character offsets. The context is tokenized once with byte offsets
(`Tokenizer.tokenize_with_offsets`); in BERT's uncased mode FastBertTokenizer
normalizes internally and its offsets already index the input bytes. The other
modes normalize first (NFKC case folding, NFD), which can change lengths
("ß" -> "ss"), so each character (with the combining marks after it) is
normalized on its own and the normalized bytes are mapped back to the
character they came from. Every token thus has a character
span [start, end) in the ORIGINAL context, and answers are sliced from it with
their original case, accents and inner whitespace (the original joins an answer's
words with single spaces: the same EM/F1, which split on whitespace). A token with an empty span
(uncased "ß" gives "s" + "##s", the first of zero width) covers the character
it sits on.

Windows follow BERT's run_squad: [CLS] question [SEP] context-window [SEP], the
question cut to max_query_length tokens, windows every doc_stride tokens, and
each context token decoded only from the window where it has the most context.

Training labels, as the original's qa_tasks.py (for SQuAD and MRQA alike): the
answer's tokens are those of the whitespace words its characters touch,
narrowed to the first run of them that is the answer text's own tokens
(_improve_answer_span; `original_answer_span`), and the train split leaves out
a question whose answer text is not in those words (`recoverable`).

Decoding. Two span heads (`joint_prediction`; the model takes
`task.head_options`):
- joint (the default, the original's joint_prediction, finetune/qa/qa_tasks.py
  and qa_metrics.py): the model's beam gives, per window, the beam_size best
  starts (start_top_log_probs, start_top_index [n, K]) and for each the K best
  ends (end_top_log_probs, end_top_index [n, K, K]); a span scores
  start log-probability + end log-probability;
- independent (joint_prediction=False): start_logits, end_logits [n, L]; the
  n_best_size best starts and ends of a window are paired (BERT's n-best) and
  a span scores start_logit + end_logit.
Either way only context tokens count, a span must start at a token its window
has the most context for, end at or after it and be at most
max_answer_length tokens long; the spans of all of a question's windows are
ranked by score and deduplicated by text (n_best_size kept).

Null score (2.0). answerable_logits[w] is the logit that the question is
answerable (tasks/losses.py trains it against 1 - is_impossible; the
original's logit, trained against is_impossible, is its negative). Two rules
(`null_odds_from`, FinetuningConfig.squad_null_rule):
- "answerable" (the default) is the original ELECTRA's rule
  (finetune/qa/qa_metrics.py with answerable_classifier):
      null_odds = null_score = min_w (-answerable_logits[w])
  with the original's threshold (FinetuningConfig.qa_na_threshold, -2.75);
- "combined" (electra_tf's earlier rule), per window w:
      null_w = start_logits[w, 0] + end_logits[w, 0] - 0.5 * answerable_logits[w]
      null_score = min_w null_w;  null_odds = null_score - best_non_null_score
  where best_non_null_score is start_logit + end_logit of the best span (BERT's
  null odds without answerable_logits; `combined_answerable_weight`, 0.5, is
  the weight above), with the
  threshold FinetuningConfig.no_answer_threshold (0.0).
The submitted answer is "" when null_odds > no_answer_threshold (the task's
threshold, whichever rule; tune it on dev with `best_threshold`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import numbers
import os
import re
import unicodedata
from typing import Any, Callable, Sequence

import numpy as np
from absl import logging

from electra_tf.core.errors import TaskDataError
from electra_tf.tasks import base, squad_eval
from electra_tf.text.cleaning import without_lone_surrogates

_BATCH = 256  # texts per tokenizer call
# Score of the empty answer when no window has a valid span: the answer is then "" (the
# original's qa_metrics.py submits the placeholder text "empty" there, scored 0).
_NO_SPAN_SCORE = -1e9


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question. `answers` are the gold (text, answer_start) pairs, in characters."""

    qas_id: str
    question: str
    context: str
    answers: tuple[tuple[str, int], ...] = ()
    is_impossible: bool = False
    title: str = ""


@dataclasses.dataclass
class SquadWindow:
    """Per-row decoding data (`Features.extra`): where a window's context tokens come from.

    Attributes:
      example_index: the example this window belongs to.
      doc_start, doc_length: the window's context tokens are the example's
        tokens [doc_start, doc_start + doc_length).
      context_offset: position of the first context token in input_ids.
      max_context: bool [doc_length], this window has the most context for the token.
      char_starts, char_ends: int [num_context_tokens], each context token's
        character span in the original context (shared by the example's windows).
    """

    example_index: int
    doc_start: int
    doc_length: int
    context_offset: int
    max_context: np.ndarray
    char_starts: np.ndarray
    char_ends: np.ndarray


@dataclasses.dataclass
class SquadPrediction:
    """The decoded answer of one question.

    Attributes:
      text: best non-null answer, sliced from the original context ("" if none).
      start_char, end_char: its span in the context, end exclusive.
      score: start_logit + end_logit of that span (joint head: the two
        log-probabilities).
      answer: what is submitted: `text`, or "" when null_odds > threshold (2.0).
      null_score, null_odds: 2.0 only (see the module docstring).
      nbest: up to n_best_size dicts (text, start_char, end_char, start_logit,
        end_logit, probability), best first.
    """

    text: str
    start_char: int
    end_char: int
    score: float
    answer: str
    null_score: float | None = None
    null_odds: float | None = None
    nbest: list[dict] = dataclasses.field(default_factory=list)


VERSIONS = {"squad_v1": "1.1", "squad_v2": "2.0"}  # task name -> SQuAD version
# The note of a --beam_size the independent span head does not read (squad and mrqa).
BEAM_UNUSED = "--beam_size (the joint head's beam; --joint_prediction=false decodes without one)"
# The note of an --n_best_size the joint head does not read (as the original's, whose
# joint decoding pairs its beam's starts and ends alone).
N_BEST_UNUSED = ("--n_best_size (the independent head's best starts and ends; the joint "
                 "head decodes its beam, --beam_size)")


@dataclasses.dataclass(frozen=True)
class SpanOptions(base.TaskOptions):
    """The options of every span task, SQuAD's and MRQA's (run_finetuning flags): the
    windows, the decoding and the span head."""

    joint_prediction: bool = base.option("joint_prediction")
    beam_size: int = base.option("beam_size")
    max_query_length: int = base.option("max_query_length")
    doc_stride: int = base.option("doc_stride")
    n_best_size: int = base.option("n_best_size")
    max_answer_length: int = base.option("max_answer_length")

    def unused(self, name: str) -> list[str]:
        """--beam_size without the joint head, --n_best_size with it."""
        given = self.given()
        out = [BEAM_UNUSED] if "beam_size" in given and not self.joint_prediction else []
        if "n_best_size" in given and self.joint_prediction:
            out.append(N_BEST_UNUSED)
        return out

    def decoding(self, name: str) -> tuple[str, ...]:
        """The longest answer, and the joint head's beam or the independent head's best
        starts and ends."""
        return ("beam_size" if self.joint_prediction else "n_best_size", "max_answer_length")

    def task_arguments(self) -> dict:
        """SquadTask's arguments of these options."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(SpanOptions)}


@dataclasses.dataclass(frozen=True)
class Options(SpanOptions):
    """The SQuAD tasks' options (run_finetuning flags): the span tasks', SQuAD 2.0's
    answerability classifier and its null rule."""

    answerable_classifier: bool = base.option("answerable_classifier")
    answerable_uses_start_logits: bool = base.option("answerable_uses_start_logits")
    answerable_weight: float = base.option("answerable_weight")
    squad_null_rule: str = base.option("squad_null_rule")
    qa_na_threshold: float = base.option("qa_na_threshold")
    no_answer_threshold: float = base.option("no_answer_threshold")

    def unused(self, name: str) -> list[str]:
        """The span tasks'; SQuAD 2.0's null rule and classifier on squad_v1, options of
        the classifier or the rule the run does not have on squad_v2."""
        given = self.given()
        out = super().unused(name)
        if VERSIONS.get(name) == "1.1":
            out += [f"--{n} (SQuAD 2.0's no-answer rule; {name} has an answer to every "
                    "question)" for n in ("squad_null_rule", "qa_na_threshold",
                                          "no_answer_threshold") if n in given]
            out += [f"--{n} (SQuAD 2.0's answerability classifier; {name} has none)"
                    for n in ("answerable_classifier", "answerable_uses_start_logits",
                              "answerable_weight") if n in given]
        else:
            out += [f"--{n} (the answerability classifier's; --answerable_classifier=false "
                    "trains none)" for n in ("answerable_uses_start_logits", "answerable_weight")
                    if n in given and not self.answerable_classifier]
            if "qa_na_threshold" in given and self.squad_null_rule == "combined":
                out.append("--qa_na_threshold (the answerable rule's threshold; "
                           "--squad_null_rule=combined reads --no_answer_threshold)")
        return out

    def decoding(self, name: str) -> tuple[str, ...]:
        """The span tasks'; on squad_v2 its no-answer rule and that rule's threshold."""
        if VERSIONS.get(name) == "1.1":
            return super().decoding(name)
        threshold = ("qa_na_threshold" if self.squad_null_rule == "answerable"
                     else "no_answer_threshold")
        return (*super().decoding(name), "squad_null_rule", threshold)


def null_options(finetuning) -> dict:
    """SquadTask's null_odds_from and no_answer_threshold from the options (a mapping of
    FinetuningConfig fields: Options as a dict, or a folder's recorded "finetuning")."""
    rule = finetuning["squad_null_rule"]
    threshold = finetuning["qa_na_threshold" if rule == "answerable" else "no_answer_threshold"]
    return {"null_odds_from": rule, "no_answer_threshold": float(threshold)}


def task_from_options(name: str, options: Options) -> "SquadTask":
    """squad_v1 or squad_v2 with its options.

    Raises:
      ValueError: options the task refuses together (the combined rule with the joint head).
    """
    return SquadTask(version=VERSIONS[name], **options.task_arguments(),
                     answerable_classifier=options.answerable_classifier,
                     answerable_uses_start_logits=options.answerable_uses_start_logits,
                     answerable_weight=options.answerable_weight,
                     **null_options(dataclasses.asdict(options)))


class SquadTask(base.Task):
    """SQuAD 1.1 or 2.0 (a base.Task, head "squad"; `answerable` for 2.0).

    Args:
      version: "1.1" or "2.0".
      max_query_length, doc_stride, n_best_size, max_answer_length: as in the
        original configure_finetuning.py (64, 128, 20, 30).
      no_answer_threshold: 2.0: answer "" when null_odds exceeds it (tune on dev
        with `best_threshold`); the default is the original's qa_na_threshold
        for its "answerable" rule.
      combined_answerable_weight: weight of -answerable_logits in the "combined" null
        score.
      null_odds_from: "answerable" (the original's) or "combined" (see the module
        docstring); "combined" needs the independent head.
      joint_prediction: the original's joint start/end head and beam decoding
        (else the independent head); the model takes `head_options`.
      beam_size: the joint head's beam (the original's 20).
      answerable_classifier: SQuAD 2.0's answerability classifier (the original's
        default; False: none, and null_odds_from "answerable" is then the original's
        rule without it: start + end logits at [CLS], less the best span's, the
        "combined" rule without the classifier's logit, at no_answer_threshold).
      answerable_uses_start_logits: SQuAD 2.0's classifier reads the start-probability-
        weighted sequence too (the original's default; False: dense(1) of [CLS]).
      answerable_weight: SQuAD 2.0: the weight of the classifier's loss in the training
        loss (the original's answerable_weight, 0.5; the span loss weighs 1).
    """

    head = "squad"
    label_names: Sequence[str] = ()
    prediction_suffix = ".json"  # the trainer writes <name>_<split>_predictions.json
    # configure_finetuning.py: a task with "squad" or "qa" in its name.
    default_max_seq_length = 512
    default_epochs = 2

    def __init__(self, version: str = "1.1", max_query_length: int = 64, doc_stride: int = 128,
                 n_best_size: int = 20, max_answer_length: int = 30,
                 no_answer_threshold: float = -2.75, combined_answerable_weight: float = 0.5,
                 null_odds_from: str = "answerable", joint_prediction: bool = True,
                 beam_size: int = 20, answerable_classifier: bool = True,
                 answerable_uses_start_logits: bool = True, answerable_weight: float = 0.5):
        if version not in ("1.1", "2.0"):
            raise ValueError(f"SQuAD version must be '1.1' or '2.0', got {version!r}")
        if null_odds_from not in ("answerable", "combined"):
            raise ValueError(f"null_odds_from must be 'answerable' or 'combined', "
                             f"got {null_odds_from!r}")
        if min(max_query_length, doc_stride, n_best_size, max_answer_length, beam_size) < 1:
            raise ValueError("max_query_length, doc_stride, n_best_size, max_answer_length "
                             "and beam_size must be >= 1")
        if isinstance(answerable_weight, bool) or not isinstance(answerable_weight, numbers.Real) \
                or not math.isfinite(answerable_weight) or answerable_weight < 0:
            raise ValueError(f"answerable_weight must be a finite number >= 0, got "
                             f"{answerable_weight!r}")
        if version == "2.0" and not answerable_classifier:
            if joint_prediction:
                raise ValueError(
                    "without the answerability classifier (answerable_classifier=False) the "
                    "no-answer score reads the end logit at [CLS], which the joint head does "
                    "not predict: use joint_prediction=False with it (the original's joint "
                    "head reads its [CLS] start logit against the beam's log-probabilities "
                    "instead, a rule electra_tf does not have)")
            # The original's rule without its classifier (qa_metrics.py): start + end logits
            # at [CLS], less the best span's, at the rule's threshold.
            null_odds_from = "combined"
        if version == "2.0" and joint_prediction and null_odds_from == "combined":
            raise ValueError("the combined null rule reads the end logit at [CLS], which the "
                             "joint head does not predict: use joint_prediction=False with it")
        self.version = version
        self.v2 = version == "2.0"
        # the trainer adds the answerability classifier
        self.answerable = self.v2 and answerable_classifier
        self.name = "squad_v2" if self.v2 else "squad_v1"
        self.max_query_length = max_query_length
        self.doc_stride = doc_stride
        self.n_best_size = n_best_size
        self.max_answer_length = max_answer_length
        self.no_answer_threshold = no_answer_threshold
        self.combined_answerable_weight = combined_answerable_weight
        self.answerable_weight = answerable_weight
        self.null_odds_from = null_odds_from
        self.joint_prediction = joint_prediction
        self.beam_size = beam_size
        self.answerable_uses_start_logits = answerable_uses_start_logits
        self._cut_said: set[int] = set()  # window lengths whose question cut was said
        self.metric_names = (
            ("f1", "exact", "HasAns_f1", "HasAns_exact", "NoAns_f1", "NoAns_exact",
             "best_f1", "best_f1_thresh", "best_exact", "best_exact_thresh")
            if self.v2 else ("f1", "exact"))

    @property
    def head_options(self) -> dict:
        """FinetuningModel's span head arguments for this task."""
        options = {"span_head": "joint" if self.joint_prediction else "independent",
                   "beam_size": self.beam_size}
        if self.answerable and not self.answerable_uses_start_logits:  # (else the default)
            options["answerable_uses_start_logits"] = False
        return options

    @property
    def loss_options(self) -> dict:
        """The span head's loss arguments: SQuAD 2.0's answerability loss weight."""
        return {"answerable_weight": self.answerable_weight} if self.answerable else {}

    # === Reading ===

    def splits(self) -> Sequence[str]:
        return ("train", "dev")

    def data_file(self, data_dir: str, split: str) -> str:
        """A file path is taken as is; a folder gets the official name (dev-v2.0.json)."""
        if os.path.isfile(data_dir):
            return data_dir
        return os.path.join(data_dir, f"{split}-v{self.version}.json")

    def read(self, data_dir: str, split: str) -> list[SquadExample]:
        """The official SQuAD JSON -> examples. Raises TaskDataError on bad input.

        The train split leaves out, with a warning, the questions the original's
        qa_tasks.py skips: those whose first answer's text is not in the
        whitespace words it touches (`recoverable`: an answer_start that does not
        point at the text, or an answer with a no-break or thin space, which the
        original's answer cleaning splits on and its context words do not). The
        other splits keep every answer (the official evaluators score the texts);
        an answer_start off its text is said in a warning."""
        path = self.data_file(data_dir, split)
        try:
            raw, data = squad_eval.read_squad_json(path)
        except ValueError as e:
            raise TaskDataError(str(e)) from None
        examples = parse_examples(data, raw, path, self.v2)
        if split != "train":
            # The official evaluators score answers by their text: an answer_start that
            # does not point at it (files converted from other datasets often hold
            # some) is said, not refused (the whole split had been; the original
            # reads no answer_start outside training)
            off = [(ex.qas_id, text, start, _text_at(ex.context, start, len(text)))
                   for ex in examples for text, start in ex.answers
                   if _text_at(ex.context, start, len(text)) != text]
            if off:
                logging.warning("%s: %d answer(s) whose answer_start does not point at "
                                "their text (first: question id %r, answer %r at "
                                "answer_start=%d, where the context has %r): scored by "
                                "their text, as the official evaluator scores them", path,
                                len(off), *off[0])
            return examples
        kept, skipped = [], []
        for ex in examples:
            ok = not ex.answers or recoverable(ex.context, ex.answers[0][1], ex.answers[0][0])
            (kept if ok else skipped).append(ex)
        if skipped:
            logging.warning("%s: %d question(s) skipped, as the original skips them: the "
                            "answer's text is not in the context's whitespace words its "
                            "answer_start and length touch (first: question id %r, answer "
                            "%r at answer_start=%d)", path, len(skipped), skipped[0].qas_id,
                            skipped[0].answers[0][0], skipped[0].answers[0][1])
        if not kept:
            raise TaskDataError(f"{path}: no questions ({len(examples)} skipped: their "
                                "answers are not in the context's whitespace words "
                                "their answer_start and length touch)")
        return kept

    # === Features ===

    def featurize(self, examples: list[SquadExample], tokenizer,
                  max_seq_length: int) -> base.Features:
        """Examples -> windows [CLS] question [SEP] context-window [SEP], padded to L.

        Labels (when every example has answers or is impossible): start/end
        positions of the first gold answer inside the window (its tokens by the
        original's rule, `original_answer_span`), 0/0 ([CLS]) when it is not
        wholly inside or the question is impossible; is_impossible is the
        example's (as the original), repeated on each of its windows.
        """
        length = max_seq_length
        if length < self.head_class.min_seq_length():  # a piece of each (as the export)
            raise ValueError(f"max_seq_length {length} leaves no room for a question and context")
        query_limit = question_limit(self.max_query_length, length)
        if query_limit != self.max_query_length and length not in self._cut_said:
            self._cut_said.add(length)  # (once a window length: featurize runs per split)
            logging.warning(
                "%s: --max_query_length=%d leaves no context piece in a window of %d "
                "positions: questions are cut to %d pieces, half of what [CLS] and the two "
                "[SEP]s leave (the export cuts them so too)", self.name,
                self.max_query_length, length, query_limit)
        contexts = list(dict.fromkeys(ex.context for ex in examples))
        by_context = dict(zip(contexts, tokenize_with_char_offsets(tokenizer, contexts)))
        questions = _ids(tokenizer, [ex.question for ex in examples])
        labelled = bool(examples) and all(ex.is_impossible or ex.answers for ex in examples)
        answer_ids = _ids(tokenizer, [ex.answers[0][0] if labelled and ex.answers else ""
                                      for ex in examples])
        cls, sep = tokenizer.cls_id, tokenizer.sep_id

        rows, extra, ex_index, starts, ends, impossible = [], [], [], [], [], []
        missed = 0
        for i, ex in enumerate(examples):
            query = list(questions[i][:query_limit])
            doc_ids, char_starts, char_ends = by_context[ex.context]
            spans = doc_spans(len(doc_ids), length - len(query) - 3, self.doc_stride)
            masks = max_context_masks(spans, len(doc_ids))
            answer = None
            if labelled and not ex.is_impossible:
                text, start = ex.answers[0]
                answer = original_answer_span(ex.context, start, text, char_starts, doc_ids,
                                              answer_ids[i])
                missed += answer is None
            offset = len(query) + 2
            for (doc_start, doc_len), mask in zip(spans, masks):
                ids = [cls] + query + [sep] + list(doc_ids[doc_start:doc_start + doc_len]) + [sep]
                rows.append(ids)
                ex_index.append(i)
                extra.append(SquadWindow(i, doc_start, doc_len, offset, mask,
                                         char_starts, char_ends))
                s = e = 0
                if answer is not None and doc_start <= answer[0] and \
                        answer[1] < doc_start + doc_len:
                    s, e = answer[0] - doc_start + offset, answer[1] - doc_start + offset
                starts.append(s)
                ends.append(e)
                impossible.append(float(ex.is_impossible))
        if missed:
            logging.warning("%s: %d answer(s) cover no token; their windows point at [CLS]",
                            self.name, missed)

        n = len(rows)
        input_ids = np.zeros([n, length], np.int32)
        input_mask = np.zeros([n, length], np.int32)
        segment_ids = np.zeros([n, length], np.int32)
        for r, (ids, window) in enumerate(zip(rows, extra)):
            input_ids[r, :len(ids)] = ids
            input_mask[r, :len(ids)] = 1
            segment_ids[r, window.context_offset:len(ids)] = 1  # context and its [SEP]
        labels = {}
        if labelled:
            labels = {"start_positions": np.asarray(starts, np.int32),
                      "end_positions": np.asarray(ends, np.int32),
                      "is_impossible": np.asarray(impossible, np.float32)}
        inputs = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
        return base.Features(inputs, labels, np.asarray(ex_index, np.int32), extra)

    # === Decoding ===

    def predictions(self, outputs: dict[str, np.ndarray], examples: list[SquadExample],
                    features: base.Features) -> dict[str, SquadPrediction]:
        """Window outputs -> {qas_id: SquadPrediction}, n-best over all windows of a question.

        The outputs of the joint head's beam (start_top_index, ...) are decoded
        as the original's joint_prediction, start and end logits as BERT's
        n-best (see the module docstring), whichever the model gave.
        """
        joint = "start_top_index" in outputs
        if joint:
            beam = [np.asarray(outputs[k]) for k in ("start_top_log_probs", "start_top_index",
                                                     "end_top_log_probs", "end_top_index")]
        else:
            if self.joint_prediction:
                logging.warning("%s: decoding start/end logits, but the task is set for the "
                                "joint head: build the model with task.head_options",
                                self.name)
            start_logits = np.asarray(outputs["start_logits"], np.float32)
            end_logits = np.asarray(outputs["end_logits"], np.float32)
        if self.v2 and joint and self.null_odds_from == "combined":
            raise ValueError("null_odds_from='combined' needs the independent head's end logits")
        answerable = outputs.get("answerable_logits")
        if self.v2 and answerable is None and self.null_odds_from == "answerable":
            raise KeyError("null_odds_from='answerable' needs outputs['answerable_logits']")
        answerable = (np.zeros(len(features), np.float32) if answerable is None
                      else np.asarray(answerable, np.float32).reshape(-1))
        rows_of: list[list[int]] = [[] for _ in examples]
        for row, i in enumerate(features.example_index):
            rows_of[int(i)].append(row)

        preds: dict[str, SquadPrediction] = {}
        for i, ex in enumerate(examples):
            if joint:
                cands = [c for r in rows_of[i]
                         for c in self._beam_candidates(*(b[r] for b in beam), features.extra[r])]
            else:
                cands = [c for r in rows_of[i]
                         for c in self._window_candidates(start_logits[r], end_logits[r],
                                                          features.extra[r])]
            nbest = self._nbest(cands, ex.context)
            best = nbest[0] if nbest else None
            pred = SquadPrediction(
                text=best["text"] if best else "",
                start_char=best["start_char"] if best else 0,
                end_char=best["end_char"] if best else 0,
                score=best["start_logit"] + best["end_logit"] if best else _NO_SPAN_SCORE,
                answer="", nbest=nbest)
            if self.v2 and rows_of[i]:
                rows = rows_of[i]
                if self.null_odds_from == "answerable":
                    pred.null_score = float(np.min(-answerable[rows]))
                    pred.null_odds = pred.null_score
                else:
                    null = (start_logits[rows, 0] + end_logits[rows, 0]
                            - self.combined_answerable_weight * answerable[rows])
                    pred.null_score = float(np.min(null))
                    pred.null_odds = pred.null_score - pred.score
            preds[ex.qas_id] = pred
        return apply_threshold(preds, self.no_answer_threshold)

    def _window_candidates(self, start_logits: np.ndarray, end_logits: np.ndarray,
                           window: SquadWindow) -> list[tuple[float, float, int, int]]:
        """(start_logit, end_logit, start_char, end_char) of the valid spans of one window.

        As the original (qa_metrics.py, `_get_best_indexes`): the n_best_size best
        starts and ends of the whole row (ties in position order; [CLS] and the
        final [SEP], which the head does not mask, take their places when they
        rank there) are paired; only context tokens are kept, and a span must
        start at a token this window has the most context for, end at or after
        it, and be at most max_answer_length tokens long.
        """
        n, off = window.doc_length, window.context_offset
        if n == 0:
            return []
        s_logits, e_logits = start_logits[off:off + n], end_logits[off:off + n]
        s_idx = np.argsort(-start_logits, kind="stable")[:self.n_best_size] - off
        e_idx = np.argsort(-end_logits, kind="stable")[:self.n_best_size] - off
        s_idx = s_idx[(s_idx >= 0) & (s_idx < n)]
        e_idx = e_idx[(e_idx >= 0) & (e_idx < n)]
        s_idx = s_idx[window.max_context[s_idx]]
        s_grid, e_grid = np.meshgrid(s_idx, e_idx, indexing="ij")
        ok = (e_grid >= s_grid) & (e_grid - s_grid < self.max_answer_length)
        s_sel, e_sel = s_grid[ok], e_grid[ok]
        doc_s, doc_e = s_sel + window.doc_start, e_sel + window.doc_start
        return list(zip(s_logits[s_sel].tolist(), e_logits[e_sel].tolist(),
                        window.char_starts[doc_s].tolist(), window.char_ends[doc_e].tolist()))

    def _beam_candidates(self, start_log_probs: np.ndarray, start_index: np.ndarray,
                         end_log_probs: np.ndarray, end_index: np.ndarray,
                         window: SquadWindow) -> list[tuple[float, float, int, int]]:
        """(start_log_prob, end_log_prob, start_char, end_char) of the valid spans of
        one window's beam (start_index [K], end_index [K, K]: positions in the
        window), under the same rules as `_window_candidates`."""
        n, off = window.doc_length, window.context_offset
        if n == 0:
            return []
        s_pos = np.broadcast_to(start_index[:, None], end_index.shape).astype(np.int64) - off
        e_pos = end_index.astype(np.int64) - off
        s_lp = np.broadcast_to(start_log_probs[:, None], end_log_probs.shape)
        ok = (s_pos >= 0) & (s_pos < n) & (e_pos >= 0) & (e_pos < n)
        ok &= window.max_context[np.clip(s_pos, 0, n - 1)]
        ok &= (e_pos >= s_pos) & (e_pos - s_pos < self.max_answer_length)
        s_sel, e_sel = s_pos[ok], e_pos[ok]
        doc_s, doc_e = s_sel + window.doc_start, e_sel + window.doc_start
        return list(zip(s_lp[ok].astype(np.float64).tolist(),
                        end_log_probs[ok].astype(np.float64).tolist(),
                        window.char_starts[doc_s].tolist(), window.char_ends[doc_e].tolist()))

    def _nbest(self, cands: list, context: str) -> list[dict]:
        """Best-first unique answer texts (as the original, deduplicated by text)."""
        cands.sort(key=lambda c: c[0] + c[1], reverse=True)
        seen, nbest = set(), []
        for s_logit, e_logit, s_char, e_char in cands:
            text = context[s_char:e_char]
            if text in seen:
                continue
            seen.add(text)
            nbest.append({"text": text, "start_char": int(s_char), "end_char": int(e_char),
                          "start_logit": float(s_logit), "end_logit": float(e_logit)})
            if len(nbest) == self.n_best_size:
                break
        if nbest:
            scores = np.array([c["start_logit"] + c["end_logit"] for c in nbest], np.float64)
            probs = np.exp(scores - scores.max())
            for c, p in zip(nbest, probs / probs.sum()):
                c["probability"] = float(p)
        return nbest

    # === Scores and files ===

    def metrics(self, predictions: dict[str, SquadPrediction],
                examples: list[SquadExample]) -> dict[str, float]:
        """EM/F1 (percent) by the official evaluators; 2.0 adds HasAns/NoAns and best-threshold.

        "f1"/"exact" score the submitted answers (no_answer_threshold applied);
        "best_*" are the official find_best_thresh over null_odds.
        """
        dataset = official_dataset(examples)
        answers = {q: p.answer for q, p in predictions.items()}
        if not self.v2:
            r = squad_eval.official_evaluate("1.1", dataset, answers)
            return {"f1": 100.0 * r["final_f1"], "exact": 100.0 * r["exact_match"]}
        r = squad_eval.official_evaluate("2.0", dataset, answers)
        best = squad_eval.official_evaluate(
            "2.0", dataset, {q: p.text for q, p in predictions.items()},
            {q: p.null_odds for q, p in predictions.items()})
        out = {name: float(r.get(name, float("nan"))) for name in self.metric_names[:6]}
        out.update({name: best[name] for name in self.metric_names[6:]})
        return {k: float(v) for k, v in out.items()}

    def write_predictions(self, predictions: dict[str, SquadPrediction],
                          examples: list[SquadExample], path: str) -> None:
        """{qas_id: answer} at `path` (the official format); 2.0 adds null_odds.json beside it."""
        from electra_tf.core.fileio import atomic_write_text

        atomic_write_text(path, _dumps({q: p.answer for q, p in predictions.items()}))
        if self.v2:
            atomic_write_text(sibling_path(path, "null_odds"),
                              _dumps({q: p.null_odds for q, p in predictions.items()}))

    def prediction_files(self, path: str) -> list[str]:
        return [path, sibling_path(path, "null_odds")] if self.v2 else [path]


# === Thresholds ===

def apply_threshold(predictions: dict[str, SquadPrediction],
                    threshold: float) -> dict[str, SquadPrediction]:
    """Sets each answer: "" when null_odds > threshold (2.0), else the best span's text."""
    for p in predictions.values():
        p.answer = "" if p.null_odds is not None and p.null_odds > threshold else p.text
    return predictions


def best_threshold(null_odds: dict[str, float], predictions: dict[str, Any], dataset: Any,
                   metric: str = "f1") -> float:
    """The no-answer threshold that maximizes F1 (or EM) on dev (official find_best_thresh).

    Args:
      null_odds: {qas_id: null odds}.
      predictions: {qas_id: best non-null text or SquadPrediction (its `text` is used)}.
      dataset: the examples, or the official JSON's "data" list (or the whole JSON).
      metric: "f1" or "exact".
    """
    texts = {q: p.text if isinstance(p, SquadPrediction) else p for q, p in predictions.items()}
    if isinstance(dataset, dict):
        dataset = dataset["data"]
    if dataset and isinstance(dataset[0], SquadExample):
        dataset = official_dataset(dataset)
    result = squad_eval.official_evaluate("2.0", dataset, texts, null_odds)
    return float(result[f"best_{metric}_thresh"])


# === Helpers ===

def parse_examples(data: list, raw: str, path: str, v2: bool) -> list[SquadExample]:
    """The official JSON's "data" list -> examples, checking every field.

    Error messages give the line of the question's id, searched in `raw` only
    when there is an error (a search per question would be quadratic).
    """
    examples: list[SquadExample] = []
    seen: set[str] = set()
    for a, article in enumerate(data):
        paragraphs = _get(article, "paragraphs", list, lambda: f"{path}: article {a}")
        for p, paragraph in enumerate(paragraphs):
            where_p = f"{path}: article {a} paragraph {p}"
            context = _get(paragraph, "context", str, lambda: where_p)
            for q, qa in enumerate(_get(paragraph, "qas", list, lambda: where_p)):
                qid = _get(qa, "id", str, lambda: f"{where_p} question {q}")

                def where(suffix="", occurrence=1):
                    return (f"{path}:{_line_of(raw, qid, occurrence)}: question id "
                            f"{qid!r}{suffix}")

                if qid in seen:  # (at the repeat's line, not the first copy's)
                    raise TaskDataError(where(": the id repeats", occurrence=2))
                seen.add(qid)
                question = _get(qa, "question", str, where)
                answers = []
                for answer in _get(qa, "answers", list, where):
                    text = _get(answer, "text", str, lambda: where(": answer"))
                    start = _get(answer, "answer_start", int, lambda: where(": answer"))
                    if not context:
                        raise TaskDataError(where(f": answer {text!r}, but the context is "
                                                  "empty"))
                    if not text:
                        raise TaskDataError(where(f": answer {text!r} at answer_start="
                                                  f"{start} is empty"))
                    answers.append((text, start))
                # true or false (or absent, null: false); a string "false" had been true
                impossible = qa.get("is_impossible") is not None and \
                    _get(qa, "is_impossible", bool, where)
                if impossible and not v2:
                    raise TaskDataError(where(": is_impossible in a SQuAD 1.1 file; "
                                                   "use version 2.0"))
                if impossible and answers:
                    raise TaskDataError(where(": is_impossible is true but it has answers"))
                if not answers and not (v2 and impossible):
                    raise TaskDataError(where(": no answers (and not is_impossible)"))
                examples.append(SquadExample(qid, question, context, tuple(answers),
                                             impossible, str(article.get("title", ""))))
    if not examples:
        raise TaskDataError(f"{path}: no questions (empty split)")
    return examples


def official_dataset(examples: Sequence[SquadExample]) -> list[dict]:
    """Examples -> the "data" list the official evaluators read (one paragraph per question)."""
    return [{"paragraphs": [{"context": ex.context, "qas": [{
        "id": ex.qas_id, "question": ex.question,
        "answers": [{"text": t, "answer_start": s} for t, s in ex.answers]}]}]}
        for ex in examples]


def question_limit(max_query_length: int, max_seq_length: int) -> int:
    """The question's pieces kept in a window of max_seq_length: max_query_length, as the
    original cuts it, when that leaves a context token beside [CLS] and the two [SEP]s
    (64 at 128: 61 context tokens); else half of what the three leave (a short window).
    (min(64, (L - 3) // 2) had cut a 128-token window's questions at 62.)"""
    if max_query_length + 3 < max_seq_length:
        return max_query_length
    return (max_seq_length - 3) // 2


def doc_spans(num_tokens: int, max_tokens: int, stride: int) -> list[tuple[int, int]]:
    """BERT's sliding windows: (start, length) every `stride` tokens, the last one ending
    at the document's end; one empty window for an empty context."""
    spans, start = [], 0
    while True:
        length = min(num_tokens - start, max_tokens)
        spans.append((start, length))
        if start + length >= num_tokens:
            return spans
        start += min(length, stride)


def max_context_masks(spans: list[tuple[int, int]], num_tokens: int) -> list[np.ndarray]:
    """For each window, bool [length]: the window is the token's max-context one.

    BERT's _check_is_max_context: score = min(left, right context) + 0.01 * length,
    the first window wins ties. Memory in proportion to the tokens (a windows x tokens
    table of a 1 MB context had asked for 37 GiB).
    """
    best_score = np.full(num_tokens, -np.inf)
    best = np.zeros(num_tokens, np.int64)
    for k, (start, length) in enumerate(spans):
        pos = np.arange(length)
        score = np.minimum(pos, length - 1 - pos) + 0.01 * length
        here = slice(start, start + length)
        wins = score > best_score[here]  # strictly: the first window wins ties
        best_score[here] = np.where(wins, score, best_score[here])
        best[here] = np.where(wins, k, best[here])
    return [best[s:s + n] == k for k, (s, n) in enumerate(spans)]


# qa_tasks.py's words: runs of characters between its is_whitespace ones (U+202F too).
_WORD = re.compile("[^ \t\r\n\u202f]+")


@functools.lru_cache(maxsize=8)  # a context's questions come one after another
def _words(context: str) -> tuple[np.ndarray, list[str]]:
    """The context's whitespace words and their first characters."""
    found = [(m.start(), m.group()) for m in _WORD.finditer(context)]
    return np.array([s for s, _ in found], np.int64), [w for _, w in found]


def _word_of(context: str, char: int) -> int:
    """qa_tasks.py's char_to_word_offset: the word a character is in (a whitespace
    character: the word before it)."""
    return int(np.searchsorted(_words(context)[0], char, side="right")) - 1


def _text_at(context: str, start: int, length: int) -> str:
    """The context's `length` characters from `start`; "" where `start` is outside it
    (a slice would count a negative one from the context's end)."""
    return context[start:start + length] if 0 <= start < len(context) else ""


def recoverable(context: str, start: int, text: str) -> bool:
    """qa_tasks.py's check: the answer ends inside the context and the whitespace words
    it touches, joined by spaces and lower-cased, contain the answer text's words."""
    end = start + len(text) - 1
    if start < 0 or end >= len(context):  # (the original: an IndexError past the end)
        return False
    words = _words(context)[1]
    actual = " ".join(words[_word_of(context, start):_word_of(context, end) + 1]).lower()
    return " ".join(text.split()).lower() in actual


def original_answer_span(context: str, start: int, text: str, char_starts: np.ndarray,
                         doc_ids: np.ndarray, answer_ids: np.ndarray) -> tuple[int, int] | None:
    """qa_tasks.py's answer tokens: every token of the whitespace words the answer's
    characters touch, narrowed to the first sub-span (by start, then longest) whose
    tokens are the answer text's own tokens (_improve_answer_span), if one is.

    Args:
      char_starts: each context token's first character; doc_ids: the tokens' ids;
      answer_ids: the ids of the tokenized answer text.
    """
    if not 0 <= start < len(context):  # a dev answer_start outside it (kept, said)
        return None
    word_starts = _words(context)[0]
    first_word, last_word = _word_of(context, start), _word_of(context, start + len(text) - 1)
    if first_word < 0:
        return None
    tok_start = int(np.searchsorted(char_starts, word_starts[first_word], side="left"))
    tok_end = (int(np.searchsorted(char_starts, word_starts[last_word + 1], side="left")) - 1
               if last_word + 1 < len(word_starts) else len(doc_ids) - 1)
    if tok_start > tok_end:
        return None
    want = list(answer_ids)
    for new_start in range(tok_start, tok_end + 1):
        for new_end in range(tok_end, new_start - 1, -1):
            if list(doc_ids[new_start:new_end + 1]) == want:
                return new_start, new_end
    return tok_start, tok_end


def tokenize_with_char_offsets(tokenizer, texts: Sequence[str]):
    """Texts -> per text (ids, char_starts, char_ends), int arrays [tokens].

    Offsets are character (code point) indices into the ORIGINAL text, end
    exclusive; see the module docstring for how they are found. Characters that
    normalize to nothing (combining accents in the strip-accents modes) belong
    to the token before them.
    """
    out = []
    for b in range(0, len(texts), _BATCH):
        batch = [without_lone_surrogates(t) for t in texts[b:b + _BATCH]]
        ids, starts, ends, normalized = tokenizer.tokenize_with_offsets(batch)
        for text, t_ids, t_s, t_e, norm in zip(batch, _rows(ids), _rows(starts), _rows(ends),
                                               normalized.numpy()):
            raw = text.encode("utf-8")
            if norm == raw:  # offsets index the text's own bytes
                lead = np.flatnonzero((np.frombuffer(raw, np.uint8) & 0xC0) != 0x80)
                keys = 2 * lead
            else:  # normalization changed the bytes: normalize per character
                t_ids, t_s, t_e, keys = _tokenize_per_char(tokenizer, text)
            out.append((t_ids, *_bytes_to_chars(t_s, t_e, keys, len(text))))
    return out


def _tokenize_per_char(tokenizer, text: str):
    """Tokenizes the concatenation of each character's own normalization.

    A character and the combining marks after it are normalized together (NFKC
    case folding composes them); the marks then count as characters of no bytes.
    """
    if not text:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, empty
    clusters: list[str] = []
    for c in text:
        if clusters and unicodedata.category(c).startswith("M") and not clusters[-1].isspace():
            clusters[-1] += c
        else:
            clusters.append(c)
    pieces = tokenizer.normalize(clusters).numpy()
    joined = b"".join(pieces)
    ids, starts, ends, normalized = tokenizer.tokenize_with_offsets([joined])
    norm = normalized.numpy()[0]
    lengths = np.zeros(len(text), np.int64)
    lengths[np.cumsum([0] + [len(c) for c in clusters[:-1]])] = [len(p) for p in pieces]
    if norm != joined:  # normalization reached across clusters (rare): approximate
        logging.warning("SQuAD: approximate character offsets for a text starting %r",
                        text[:40])
        lengths = np.diff(np.arange(len(text) + 1) * len(norm) // len(text))
    return _rows(ids)[0], _rows(starts)[0], _rows(ends)[0], _char_keys(lengths)


def _char_keys(byte_lengths: np.ndarray) -> np.ndarray:
    """2 x each character's first normalized byte, minus 1 for a character of no bytes
    (so it sorts before the byte where it would be and joins the token before it)."""
    byte_starts = np.cumsum(byte_lengths) - byte_lengths
    return 2 * byte_starts - (byte_lengths == 0)


def _bytes_to_chars(starts, ends, keys, num_chars):
    """Byte spans -> character spans [start, end); a span inside a character, or of
    zero width, covers that character."""
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    char_starts = np.maximum(np.searchsorted(keys, 2 * starts, side="right") - 1, 0)
    # Counting keys below 2 * end also takes the no-byte characters right after it.
    char_ends = np.searchsorted(keys, 2 * ends, side="left")
    char_ends = np.minimum(np.maximum(char_ends, char_starts + 1), num_chars)
    return char_starts, char_ends




def _ids(tokenizer, texts: list[str]) -> list[np.ndarray]:
    out = []
    for b in range(0, len(texts), _BATCH):
        out += _rows(tokenizer.tokenize([without_lone_surrogates(t)
                                      for t in texts[b:b + _BATCH]]))
    return out


def _rows(ragged) -> list[np.ndarray]:
    values, splits = ragged.flat_values.numpy(), ragged.row_splits.numpy()
    return [values[a:b] for a, b in zip(splits[:-1], splits[1:])]


_JSON_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
               list: "a list", dict: "an object", type(None): "null"}


def json_kind(kind: type) -> str:
    """What a JSON value of Python type `kind` is called in an error line."""
    return next((name for t, name in _JSON_KINDS.items() if issubclass(kind, t)),
                kind.__name__)


def _get(obj: Any, key: str, kind: type, where: Callable[[], str]):
    """obj[key], checked to be a `kind`; where() says where, for the error message."""
    if not isinstance(obj, dict) or key not in obj:
        raise TaskDataError(f"{where()}: missing key {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TaskDataError(f"{where()}: {key!r} must be {json_kind(kind)}, "
                            f"got {json_kind(type(value))}")
    return value


def _line_of(raw: str, qid: str, occurrence: int = 1) -> int | str:
    """Line of the `occurrence`-th `"id": "QID"` in the file (else of the quoted id
    alone, as a text may hold it too; '?' when not found)."""
    for quoted in (json.dumps(qid, ensure_ascii=False), json.dumps(qid)):
        for pattern in (r'"id"\s*:\s*' + re.escape(quoted), re.escape(quoted)):
            found = [m.start() for m in re.finditer(pattern, raw)]
            if found:
                return raw.count("\n", 0, found[min(occurrence, len(found)) - 1]) + 1
    return "?"


def sibling_path(path: str, kind: str) -> str:
    """predictions.json -> null_odds.json; dev_predictions.json -> dev_null_odds.json."""
    folder, name = os.path.split(path)
    if "predictions" in name:
        name = name.replace("predictions", kind, 1)
    else:
        name = os.path.splitext(name)[0] + f"_{kind}.json"
    return os.path.join(folder, name)


def _dumps(obj) -> str:
    """JSON as UTF-8 text; with \\u escapes throughout where an id or an answer holds a
    lone surrogate (JSON's "\\ud800" in the data, cut as it is from its context), which
    UTF-8 cannot hold: the write had failed after the evaluation, and the escapes read
    back as the data's own strings, so the official evaluator matches them."""
    text = json.dumps(obj, ensure_ascii=False, indent=2) + "\n"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, indent=2) + "\n"
    return text
