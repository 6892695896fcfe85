"""Token classification (NER, chunking, any tag set) on CoNLL files: the
"token_classification" head.

The original ELECTRA fine-tunes on CoNLL-2000 chunking; NER (CoNLL-2003) is
what users ask for. Both use the same format and span F1 (see Metrics).

Input: one token per line, whitespace-separated columns, the word in the
first column and the tag in the last (CoNLL-2003: "EU NNP B-NP B-ORG", NER
tags; CoNLL-2000: "He PRP B-NP", chunk tags); blank lines end sentences and
`-DOCSTART-` lines are skipped. A line holding a tab is split on tabs alone,
so its word may hold spaces ("New York<TAB>B-LOC"). Every line has as many
columns as most lines of its file (a line that lost its tag column would
otherwise make its POS column the tag); a UTF-8 byte-order mark is dropped.
A file in which no line has a second column (words only) is read as
unlabelled.

Label set: given as `label_names`, or learned (sorted, "O" first) by
`read(data_dir, "train")` from train.txt and the labelled dev.txt and test.txt
beside it (as the original's label mapping), or by `fit_labels(examples)`. It must
be fixed before any split is featurized, and before the model is built
(`len(task.label_names)` is the head's output size). Once fixed, a tag outside
it is an error, in dev and test too.

Featurization (see `featurize`): every word is tokenized on its own and its
FIRST wordpiece carries its tag; the other pieces get weight 0. A sentence
longer than a window is split into overlapping word-aligned windows (BERT's
doc_stride), and each word is owned by exactly one window, so every word gets
exactly one prediction.

Schemes. BIO (O, B-X, I-X; CoNLL-2003's raw IOB1 reads too) trains on the
file's tags as they are. BIOES trains and scores as the original's chunking
does (tagging_tasks.py's LABEL_ENCODING): every sentence's tags are made BIOES
on reading (`to_bioes`: B-X I-X -> B-X E-X, a one-word span -> S-X), so BIO
files take it as BIOES files do; the tag set, gold tags and predictions are
BIOES.

Metrics: micro precision/recall/F1 over spans, and token accuracy. BIO uses
seqeval's default (conlleval) mode, which also reads CoNLL-2003's raw IOB1
tags as conlleval does; BIOES is scored as the original scores its chunking
(`span_f1`: tagging_metrics.py's EntityLevelF1Scorer over get_span_labels'
spans, which also reads a span its predictions leave unopened or unclosed).

Any tag set (`scheme=None`, the generic "tagging" task: part of speech,
...): tags are any non-blank strings. Span metrics are computed only when
the tag set is BIO-shaped (every tag O, B-X or I-X; scored as BIO) or
BIOES-shaped (O, B-, I-, E-, S-; scored as BIOES); otherwise the metric is
token accuracy alone, which is then the primary one.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re
from typing import Any, Sequence

import numpy as np
from absl import logging

from electra_tf.core.errors import ConfigError, TaskDataError
from electra_tf.core.fileio import atomic_write_text, utf16_hint
from electra_tf.tasks.base import (
    Features,
    Task,
    TaskOptions,
    check_normalization_twins,
    has_control_character,
    option,
    parse_label_names,
)
from electra_tf.text.cleaning import invisible_character

DOCSTART = "-DOCSTART-"
SCHEMES = {"BIO": "BI", "BIOES": "BIES"}  # the span prefixes each scheme allows
SPAN_METRICS = ("f1", "precision", "recall", "accuracy")


def _scheme_re(scheme: str) -> re.Pattern:
    return re.compile(rf"^(O|[{SCHEMES[scheme]}]-\S+)$")


def span_scheme_of(tags: Sequence[str]) -> str | None:
    """"BIO" or "BIOES" when every tag has that scheme's shape (BIO first), else None."""
    for scheme in SCHEMES:
        pattern = _scheme_re(scheme)
        if tags and all(pattern.match(t) for t in tags):
            return scheme
    return None


def span_labels(tags: Sequence[str]) -> list[tuple[int, int, str]]:
    """A sentence's spans (start, end, type), read as the original reads them
    (tagging_utils.get_span_labels): a B- or S- (or an O) ends the span before; an I- or
    E- continues it, whatever its type (the span takes its last tag's type), and an I-
    or E- after an O starts one. A tag's type is all after its first "-"."""
    spans, last, start = [], "O", -1
    for i, tag in enumerate(tags):
        pos = None if tag == "O" else tag.split("-", 1)[0]
        if (pos in ("S", "B") or tag == "O") and last != "O":
            spans.append((start, i - 1, last.split("-", 1)[-1]))
        if pos in ("B", "S") or last == "O":
            start = i
        last = tag
    if tags and tags[-1] != "O":
        spans.append((start, len(tags) - 1, tags[-1].split("-", 1)[-1]))
    return spans


def to_bioes(tags: Sequence[str]) -> list[str]:
    """A sentence's span tags (BIO, IOB1 or BIOES) made BIOES, as the original makes every
    chunking sentence's (tagging_tasks.py's LABEL_ENCODING = "BIOES":
    tagging_utils.get_tags(get_span_labels(tags), len(tags), "BIOES")): `span_labels`'
    spans, tagged again; well-formed BIOES comes back as it is."""
    out = ["O"] * len(tags)
    for s, e, t in span_labels(tags):
        out[s:e + 1] = [f"I-{t}"] * (e + 1 - s)
        out[e], out[s] = f"E-{t}", f"B-{t}"
        if s == e:
            out[s] = f"S-{t}"
    return out


def span_f1(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
            ) -> dict[str, float]:
    """Micro span precision/recall/F1 as the original's EntityLevelF1Scorer
    (tagging_metrics.py) computes them over `span_labels`' spans of each sentence (as
    fractions; all 0 where no span is right)."""
    correct = predicted_n = gold_n = 0
    for tags, preds in zip(gold, predicted):
        want, got = set(span_labels(tags)), set(span_labels(preds))
        correct += len(want & got)
        gold_n += len(want)
        predicted_n += len(got)
    if not correct:
        return {"f1": 0.0, "precision": 0.0, "recall": 0.0}
    p, r = correct / predicted_n, correct / gold_n
    return {"f1": 2 * p * r / (p + r), "precision": p, "recall": r}


@dataclasses.dataclass
class TaggingExample:
    """One sentence.

    Attributes:
      words: the sentence's words.
      tags: one gold tag per word, or None for unlabelled files.
      path: the file it was read from.
      line: 1-based line of the first word; word i is on line `line + i`.
    """

    words: list[str]
    tags: list[str] | None
    path: str = "<memory>"
    line: int = 1

    def where(self, i: int = 0) -> str:
        return f"{self.path}:{self.line + i}"


@dataclasses.dataclass
class TaggingWindow:
    """Per-row reassembly data (Features.extra entries).

    Attributes:
      word_ids: int32 [L], the sentence word index of each position's piece
        (-1 on [CLS], [SEP] and padding).
      owned: bool [L], True at the first piece of each word this window owns;
        the prediction for that word is read there.
    """

    word_ids: np.ndarray
    owned: np.ndarray


TASKS = ("ner", "chunking", "tagging")  # CoNLL NER and chunking, and your own tags


@dataclasses.dataclass(frozen=True)
class Options(TaskOptions):
    """The tagging tasks' options (run_finetuning flags)."""

    tagging_scheme: str = option("tagging_scheme")  # ner, chunking (tagging takes any tags)
    label_names: str = option("label_names")  # comma-separated; empty: learned from train


def task_from_options(name: str, options: Options) -> "TaggingTask":
    """ner, chunking or tagging with its options.

    Raises:
      ConfigError: label names that are not distinct tags (of the scheme).
    """
    label_names = parse_label_names(options.label_names)
    if name == "tagging" and options.tagging_scheme != "BIO":  # (it had been recorded, unread)
        raise ConfigError(f"--tagging_scheme={options.tagging_scheme}: --task_name=tagging "
                          "learns the tags as your files give them, in any scheme; the BIO "
                          "to BIOES conversion is ner's and chunking's")
    try:
        return TaggingTask(name=name, label_names=label_names,
                           scheme=None if name == "tagging" else options.tagging_scheme)
    except ValueError as e:  # a name with a space, or outside the scheme
        raise ConfigError(f"--label_names: {e}") from None


class TaggingTask(Task):
    """CoNLL token classification (a base.Task with head "token_classification").

    Args:
      name: task name, e.g. "ner", "chunking" or "tagging".
      label_names: the tag set, or None to learn it from the train split.
      scheme: "BIO" (O, B-X, I-X; IOB1 files also pass), "BIOES" (adds E-X,
        S-X; BIO and IOB1 files are made BIOES, `to_bioes`), or None: any tags,
        span metrics only for a BIO- or BIOES-shaped tag set (`span_scheme`).
    """

    head = "token_classification"
    default_max_seq_length = 256  # configure_finetuning.py: chunk's 256 (epochs: 3)

    def __init__(self, name: str = "ner", label_names: Sequence[str] | None = None,
                 scheme: str | None = "BIO"):
        if scheme is not None and scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {sorted(SCHEMES)} or None, got {scheme!r}")
        self.name = name
        self.scheme = scheme
        self._tag_re = _scheme_re(scheme) if scheme else re.compile(r"^\S+$")
        self._label_names: tuple[str, ...] = ()
        self._label_ids: dict[str, int] = {}
        self.labels_given = label_names is not None
        if label_names is not None:
            bad = [t for t in label_names if not self._tag_re.match(t)]
            if bad or not label_names or len(set(label_names)) != len(label_names):
                raise ValueError(f"label_names must be distinct {scheme or 'non-blank'} tags, "
                                 f"got {list(label_names)!r}")
            self._set_labels(list(label_names))

    def label_options(self, record) -> dict:
        if self.scheme is None:  # tagging: its tags as the files give them, whatever recorded
            return {}
        had = record.finetuning.get("tagging_scheme")
        return {"tagging_scheme": had} if had else {}

    def continues(self, record) -> str | None:
        """A BIOES tagger goes on as one (and a BIO one as BIO): under another scheme its
        tags would be learned anew, and the head's other columns start from init."""
        had = self.label_options(record).get("tagging_scheme")
        if self.scheme is None or record.task != self.name or had in (None, self.scheme):
            return None
        return f"a {had} tagger; pass --tagging_scheme={had}"

    # === Labels ===

    @property
    def span_scheme(self) -> str | None:
        """The scheme spans are scored under: the given one, or (scheme None) the shape
        of the tag set (`span_scheme_of`); None: token accuracy only."""
        return self.scheme or span_scheme_of(self._label_names)

    @property
    def metric_names(self) -> tuple[str, ...]:
        """Span F1 (primary), precision, recall and token accuracy; accuracy alone for a
        tag set without spans."""
        return SPAN_METRICS if self.span_scheme else ("accuracy",)

    @property
    def label_names(self) -> tuple[str, ...]:
        """The tag set; empty until given or learned (then index = tag id)."""
        return self._label_names

    def _set_labels(self, names: list[str]) -> None:
        self._label_names = tuple(names)
        self._label_ids = {t: i for i, t in enumerate(names)}

    def fit_labels(self, examples: Sequence[TaggingExample]) -> tuple[str, ...]:
        """Learns the tag set from (train) examples: sorted, "O" first; every type's
        tags of the scheme, B- and I- (BIO), B-, I-, E- and S- (BIOES): the original maps
        the tags of train, dev and test, and a dev span of a type whose train spans
        take other prefixes (one-word ones only, or IOB1's I- only) was refused.

        Does nothing when label_names was given to the constructor.
        """
        if self.labels_given:
            return self._label_names
        tags = {t for ex in examples for t in (ex.tags or ())}
        if not tags:
            raise ValueError("cannot learn the tag set from examples without tags")
        if self.scheme:  # (the generic task's tags are as its files give them)
            tags |= {f"{p}-{t.split('-', 1)[1]}" for t in tags - {"O"}
                     for p in SCHEMES[self.scheme]}
        check_normalization_twins(sorted(tags), examples[0].path)  # (tags: some example)
        self._set_labels((["O"] if "O" in tags else []) + sorted(tags - {"O"}))
        return self._label_names

    # === Reading ===

    def splits(self) -> Sequence[str]:
        return ("train", "dev", "test")

    def read(self, data_dir: str, split: str) -> list[TaggingExample]:
        """Reads `data_dir/{split}.txt`, or `data_dir` itself when it is a file.

        Reading the "train" split learns the tag set unless it was given.

        Raises:
          TaskDataError: (file:line) a missing file, a line with another number
            of columns than most of the file's (or an empty one between tabs),
            a tag invalid under the scheme or outside a fixed tag set, an
            unlabelled train or dev split, or a split without sentences.
        """
        path = data_dir if os.path.isfile(data_dir) else os.path.join(data_dir, f"{split}.txt")
        if os.path.isdir(path):
            raise TaskDataError(f"{path}: a folder, not a file (split {split!r} of task "
                                f"{self.name!r})")
        if not os.path.isfile(path):
            raise TaskDataError(f"{path}: no such file (split {split!r} of task {self.name!r})")
        learn = split == "train" and not self.labels_given
        examples = self.read_file(path, check_label_set=not learn)
        if split != "test" and examples[0].tags is None:  # train learns them, dev scores them
            raise TaskDataError(f"{path}:{examples[0].line}: the {split} split has no tag "
                                "column (the tag is the last column)")
        if split == "train":
            self.fit_labels(examples)
            if learn and len(self._label_names) == 1:
                raise TaskDataError(
                    f"{path}: every word of the train split has the tag "
                    f"{self._label_names[0]!r}: nothing to learn (are its tags in the last "
                    "column, one word per line?); give --label_names to train on it anyway")
            if learn and os.path.isdir(data_dir):
                self._add_other_splits_tags(data_dir, examples)
        return examples

    def _add_other_splits_tags(self, data_dir: str, train: list[TaggingExample]) -> None:
        """Learns the tag set from the dev and test files beside train.txt too, as the
        original's label mapping does (tagging_tasks.py's _get_label_mapping reads train,
        dev and test): a dev or test tag train lacks had stopped the run, where the
        original scores its spans as missed. A split that does not read is left to its
        own read, which says why."""
        extra: list[TaggingExample] = []
        for split in ("dev", "test"):
            path = os.path.join(data_dir, f"{split}.txt")
            if os.path.isfile(path):
                try:
                    extra += [ex for ex in self.read_file(path, check_label_set=False)
                              if ex.tags is not None]
                except TaskDataError:
                    continue
        before = set(self._label_names)
        self.fit_labels(train + extra)
        added = [t for t in self._label_names if t not in before]
        if added:
            logging.warning("%s: the tag set holds %d tag(s) only the dev or test split has "
                            "(learned from train, dev and test, as the original does; "
                            "predicted only where training taught them): %s", data_dir,
                            len(added), ", ".join(added))

    def read_file(self, path: str, check_label_set: bool = True) -> list[TaggingExample]:
        """Parses one CoNLL file (see `read`); does not learn the tag set.

        Args:
          check_label_set: also reject tags outside the current tag set (when
            there is one); the scheme is always checked.
        """
        rows: list[tuple[int, list[str]]] = []  # (line number, columns); [] ends a sentence
        for number, text in _lines(path):
            cols = _columns(text, f"{path}:{number}")
            rows.append((number, [] if cols and cols[0] == DOCSTART else cols))
        n_lines = len(rows)
        width = _usual_width(rows)
        # A word and a tag on most lines (one line of two columns in a file of words had
        # made a test file "tagged", its first line then blamed for a missing tag)
        labelled = width >= 2

        examples: list[TaggingExample] = []
        words: list[str] = []
        tags: list[str] = []
        first = 0
        for number, cols in rows + [(n_lines + 1, [])]:
            if not cols:
                if words:
                    examples.append(TaggingExample(words, tags if labelled else None, path, first))
                words, tags = [], []
                continue
            if labelled and len(cols) < 2:
                raise TaskDataError(
                    f"{path}:{number}: too few columns ({len(cols)}) for a word and its tag: "
                    f"{' '.join(cols)!r}")
            if len(cols) != width:
                tie = _tied_width(rows, len(cols), width)
                if tie:  # (the larger count had been taken as right, this line blamed)
                    raise TaskDataError(
                        f"{path}:{number}: {len(cols)} columns, but as many of the file's "
                        f"lines have {width} (the first: line {tie}); every line has the "
                        "word first and the tag last, in as many columns")
                why = ("a column lost?" if len(cols) < width else
                       "a word with a space in it? separate the columns with tabs")
                raise TaskDataError(
                    f"{path}:{number}: {len(cols)} columns, but the file's other lines have "
                    f"{width} (the word first, the tag last; {why}): {' '.join(cols)!r}")
            if not words:
                first = number
            words.append(cols[0])
            if labelled:
                tags.append(self._check_tag(cols[-1], f"{path}:{number}"))
        if not examples:
            raise TaskDataError(f"{path}:{max(1, n_lines)}: empty split: no sentences "
                                "(only blank or -DOCSTART- lines)")
        if self.scheme == "BIOES" and labelled:
            changed, first, bioes_file = 0, None, False
            for ex in examples:
                bioes = to_bioes(ex.tags)
                bioes_file |= any(t[:2] in ("E-", "S-") for t in ex.tags)
                for i, (a, b) in enumerate(zip(ex.tags, bioes)):
                    if a != b:
                        changed += 1
                        first = first or f"{ex.where(i)}: {a} -> {b}"
                ex.tags = bioes
            if changed and bioes_file:  # a BIOES file whose spans do not close: say so
                logging.warning("%s: %d tag(s) did not form BIOES spans and are read as the "
                                "original reads them (first: %s)", path, changed, first)
            elif changed:
                logging.info("%s: %d BIO tag(s) made BIOES, as the original trains and "
                             "scores them", path, changed)
        if labelled and check_label_set and self._label_ids:
            for ex in examples:
                for i, tag in enumerate(ex.tags):
                    if tag not in self._label_ids:
                        made = " (the file's tags made BIOES)" if self.scheme == "BIOES" else ""
                        known = self.labels_from or "the tag set"
                        raise TaskDataError(f"{ex.where(i)}: tag {tag!r}{made} is not in "
                                            f"{known} {list(self._label_names)}")
        return examples

    def _check_tag(self, tag: str, where: str) -> str:
        odd = invisible_character(tag) or next(
            (c for c in tag if has_control_character(c)), None)
        if odd:
            raise TaskDataError(f"{where}: tag {tag!r} holds an invisible or control "
                                f"character (U+{ord(odd):04X})")
        if self.scheme is None and not self._tag_re.match(tag):  # a tab-separated column
            raise TaskDataError(f"{where}: tag {tag!r} holds whitespace; a tag is one word")
        if not self._tag_re.match(tag):
            allowed = ", ".join(["O"] + [f"{p}-X" for p in SCHEMES[self.scheme]])
            hint = ("; BIOES files: --tagging_scheme=BIOES" if self.scheme == "BIO"
                    and _scheme_re("BIOES").match(tag) else "")
            raise TaskDataError(f"{where}: tag {tag!r} is not valid under {self.scheme} "
                                f"({allowed}){hint}")
        return tag

    # === Features ===

    def featurize(self, examples: Sequence[TaggingExample], tokenizer,
                  max_seq_length: int) -> Features:
        """Sentences -> windows of [CLS] pieces [SEP], padded to L = max_seq_length.

        Windowing rule: a window holds at most B = L - 2 pieces and always
        starts at a word. A word with more than B pieces keeps its first B.
        Sentences of at most B pieces are one window. Longer ones: each window
        takes whole words from its start while they fit; the next window starts
        at the first word at least B // 2 pieces after the current start (the
        stride), but never after the current window's end, so windows overlap
        and cover every word. Each word is owned by the window where its first
        piece has the most context, min(pieces to its left, pieces to its right)
        + 0.01 * window length (BERT SQuAD's "max context" rule; ties go to the
        earlier window). Only owned words get weight 1 and predictions.

        Returns:
          Features with inputs int32 [n, L]; labels "tag_ids" int32 [n, L] (the
          tag id at owned first pieces, 0 elsewhere) and "tag_weights" float32
          [n, L] when all examples are labelled, {} when none are; extra: one
          `TaggingWindow` per row.

        Raises:
          ValueError: labelled examples but no tag set yet, or L < 3.
          TaskDataError: (file:line) a tag outside the tag set.
        """
        if max_seq_length < 3:
            raise ValueError(f"max_seq_length must be >= 3, got {max_seq_length}")
        n_labelled = sum(ex.tags is not None for ex in examples)
        if n_labelled not in (0, len(examples)):
            raise ValueError("mixing labelled and unlabelled examples in one featurize call")
        labelled = bool(examples) and n_labelled == len(examples)
        if labelled and not self._label_ids:
            raise ValueError(f"task {self.name!r} has no tag set yet: read the train split "
                             "or call fit_labels(train_examples) before featurizing")
        budget = max_seq_length - 2
        pieces = self._word_pieces(examples, tokenizer, budget)

        ids_rows, lengths, tag_rows, weight_rows, index, extra = [], [], [], [], [], []
        for e, ex in enumerate(examples):
            word_pieces = pieces[e]
            tag_ids = ([self._tag_id(t, ex, i) for i, t in enumerate(ex.tags)]
                       if labelled else None)
            for start, end, owned_words in _windows([len(p) for p in word_pieces], budget):
                ids = [tokenizer.cls_id]
                word_ids = [-1]
                owned = np.zeros(max_seq_length, bool)
                tags = np.zeros(max_seq_length, np.int32)
                for w in range(start, end):
                    if w in owned_words:
                        owned[len(ids)] = True
                        if labelled:
                            tags[len(ids)] = tag_ids[w]
                    ids += word_pieces[w]
                    word_ids += [w] * len(word_pieces[w])
                ids.append(tokenizer.sep_id)
                word_ids.append(-1)
                pad = max_seq_length - len(ids)
                lengths.append(len(ids))
                ids_rows.append(ids + [0] * pad)
                extra.append(TaggingWindow(np.array(word_ids + [-1] * pad, np.int32), owned))
                tag_rows.append(tags)
                weight_rows.append(owned.astype(np.float32))
                index.append(e)

        n, L = len(ids_rows), max_seq_length
        input_ids = np.array(ids_rows, np.int32).reshape(n, L)
        inputs = {"input_ids": input_ids,
                  "input_mask": (np.arange(L)[None, :] < np.array(lengths, np.int32).reshape(n, 1)
                                 ).astype(np.int32),
                  "segment_ids": np.zeros((n, L), np.int32)}
        labels = {}
        if labelled:
            labels = {"tag_ids": np.array(tag_rows, np.int32).reshape(n, L),
                      "tag_weights": np.array(weight_rows, np.float32).reshape(n, L)}
        return Features(inputs, labels, np.array(index, np.int32), extra)

    def _word_pieces(self, examples, tokenizer, budget: int) -> list[list[list[int]]]:
        """Pieces of every word (one tokenizer call); empty words become [UNK]."""
        flat = [w for ex in examples for w in ex.words]
        encoded = tokenizer.encode(flat) if flat else []
        out, k = [], 0
        for ex in examples:
            out.append([(p or [tokenizer.unk_id])[:budget] for p in encoded[k:k + len(ex.words)]])
            k += len(ex.words)
        return out

    def _tag_id(self, tag: str, ex: TaggingExample, i: int) -> int:
        if tag not in self._label_ids:
            raise TaskDataError(f"{ex.where(i)}: tag {tag!r} is not in the tag set "
                                f"{list(self._label_names)}")
        return self._label_ids[tag]

    # === Predictions and metrics ===

    def predictions(self, outputs: dict[str, Any], examples: Sequence[TaggingExample],
                    features: Features) -> list[list[str]]:
        """"tag_logits" [n, L, T] -> one tag per word of each sentence.

        A word's tag is the argmax at its first piece in the window that owns it.
        """
        logits = np.asarray(outputs["tag_logits"])
        if logits.shape[:2] != (len(features), features.inputs["input_ids"].shape[1]):
            raise ValueError(f"tag_logits has shape {logits.shape}, expected "
                             f"[{len(features)}, L, {len(self._label_names)}]")
        best = logits.argmax(-1)
        preds: list[list[str | None]] = [[None] * len(ex.words) for ex in examples]
        for row, e in enumerate(features.example_index):
            window = features.extra[row]
            for pos in np.flatnonzero(window.owned):
                preds[e][window.word_ids[pos]] = self._label_names[best[row, pos]]
        for ex, p in zip(examples, preds):
            if None in p:  # a featurize/predictions mismatch, not bad data
                raise ValueError(f"{ex.where(p.index(None))}: word has no prediction; were "
                                 "the features made from these examples?")
        return preds

    def metrics(self, predictions: Sequence[Sequence[str]],
                examples: Sequence[TaggingExample]) -> dict[str, float]:
        """Span precision/recall/F1 (micro: BIO as seqeval's default, conlleval's, mode
        computes them; BIOES as the original's chunking scorer, `span_f1`) and token
        accuracy; token accuracy alone for a tag set without spans (`metric_names`)."""
        from seqeval import metrics as sm

        if any(ex.tags is None for ex in examples):
            raise ValueError("metrics need gold tags; these examples are unlabelled")
        y_true = [list(ex.tags) for ex in examples]
        y_pred = [list(p) for p in predictions]
        scheme = self.span_scheme
        if scheme is None:
            return {"accuracy": float(sm.accuracy_score(y_true, y_pred))}
        if scheme == "BIOES":  # the original's chunking
            return {**span_f1(y_true, y_pred), "accuracy": float(sm.accuracy_score(y_true, y_pred))}
        kw: dict[str, Any] = {"zero_division": 0}  # = seqeval's "warn" value, without the warning
        return {"f1": float(sm.f1_score(y_true, y_pred, **kw)),
                "precision": float(sm.precision_score(y_true, y_pred, **kw)),
                "recall": float(sm.recall_score(y_true, y_pred, **kw)),
                "accuracy": float(sm.accuracy_score(y_true, y_pred))}

    def write_predictions(self, predictions: Sequence[Sequence[str]],
                          examples: Sequence[TaggingExample], path: str) -> None:
        """CoNLL: "word gold predicted" ("word predicted" when unlabelled) per
        line, a blank line after each sentence (conlleval reads it as is). The
        columns are joined by spaces, or by tabs throughout when a word holds
        whitespace (one read from a tab-separated line), so the file reads back
        with the same words (conlleval: `-d '\t'`)."""
        separator = " "
        if any(len(word.split()) != 1 for ex in examples for word in ex.words):
            separator = "\t"
        lines = []
        for ex, pred in zip(examples, predictions):
            for i, word in enumerate(ex.words):
                cols = [word] + ([ex.tags[i]] if ex.tags is not None else []) + [pred[i]]
                lines.append(separator.join(cols))
            lines.append("")
        atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))


# Characters that end a line for str.splitlines() (and some editors) but not for a
# CoNLL reader: inside a line, str.split() took them for column separators.
_LINE_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _lines(path: str):
    """(line number, text) of a UTF-8 file, lines ending at "\n" (after any "\r"s: "\r\n",
    "\r\r\n", as the original's reader strips them) or a lone "\r" (old Mac files), a
    byte-order mark dropped at any line's start (files joined by `cat` carry one in the
    middle).

    Raises:
      TaskDataError: (file:line) unreadable, not UTF-8, or a line holding another
        line-break character (U+2028, a form feed, ...).
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TaskDataError(f"{path}: cannot read it ({e.strerror or e})") from None
    hint = utf16_hint(data)
    if hint:  # (without a byte-order mark, valid UTF-8)
        raise TaskDataError(f"{path}:1: not UTF-8 text{hint}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        number = data[:e.start].count(b"\n") + 1
        raise TaskDataError(f"{path}:{number}: not valid UTF-8 ({e.reason})") from None
    lines = re.split("\r*\n|\r", text)  # "\r\r\n" (a CRLF file's CRs doubled) ends one line
    if lines and lines[-1] == "":
        lines.pop()  # the end of the last line
    for number, line in enumerate(lines, start=1):
        line = line.removeprefix("\ufeff")
        odd = _LINE_BREAKS.search(line)
        if odd:
            raise TaskDataError(f"{path}:{number}: holds a line-break character "
                                f"(U+{ord(odd.group()):04X}) inside a line: {line!r}")
        yield number, line


def _columns(text: str, where: str) -> list[str]:
    """A line's columns: split on tabs when it holds one (each column stripped, so a
    word may hold spaces), else on whitespace; [] for a blank line.

    Raises:
      TaskDataError: (`where`) an empty column between two tabs.
    """
    if "\t" not in text.strip():  # a trailing tab is whitespace, as the original reads it
        return text.split()
    cols = [c.strip() for c in text.strip().split("\t")] if text.strip() else []
    if "" in cols:
        raise TaskDataError(f"{where}: empty column {cols.index('') + 1} (two tabs in a row?): "
                            f"{text.strip()!r}")
    return cols


def _usual_width(rows: Sequence[tuple[int, list[str]]]) -> int:
    """The number of columns most token lines have (ties: the larger); 0 without any."""
    counts = collections.Counter(len(cols) for _, cols in rows if cols)
    return max(counts, key=lambda n: (counts[n], n)) if counts else 0


def _tied_width(rows: Sequence[tuple[int, list[str]]], width: int, usual: int) -> int:
    """The first line of `usual` columns where as many lines have `width` (a tie: which
    count is right cannot be told); 0 where `usual` is the more common."""
    counts = collections.Counter(len(cols) for _, cols in rows if cols)
    if counts[width] != counts[usual]:
        return 0
    return next(number for number, cols in rows if len(cols) == usual)


def _windows(lengths: Sequence[int], budget: int) -> list[tuple[int, int, set[int]]]:
    """Word-aligned windows over words of `lengths` pieces (see featurize).

    Returns:
      (start word, end word exclusive, words owned) per window; every word is
      owned by exactly one window, and every window owns a word (a window inside
      the one before it, where a long word follows short ones, owned none: it was
      trained on with weight 0 and counted in the epoch's steps).
    """
    n = len(lengths)
    if n == 0:
        return [(0, 0, set())]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(int)
    stride = max(1, budget // 2)
    spans = []
    start = 0
    while True:
        end = start + 1
        while end < n and offsets[end + 1] - offsets[start] <= budget:
            end += 1
        spans.append((start, end))
        if end >= n:
            break
        nxt = start + 1
        while nxt < end and offsets[nxt] < offsets[start] + stride:
            nxt += 1
        start = nxt
    best: dict[int, tuple[float, int]] = {}
    for k, (s, e) in enumerate(spans):
        length = offsets[e] - offsets[s]
        for w in range(s, e):
            left = offsets[w] - offsets[s]
            right = offsets[e] - offsets[w] - 1
            score = min(left, right) + 0.01 * length
            if w not in best or score > best[w][0]:
                best[w] = (score, k)
    owned: list[set[int]] = [set() for _ in spans]
    for w, (_, k) in best.items():
        owned[k].add(w)
    return [(s, e, owned[k]) for k, (s, e) in enumerate(spans) if owned[k]]

