"""TaggingTask featurize / predictions / metrics / write_predictions on tiny data."""

from __future__ import annotations

import random

import numpy as np
import pytest
from helpers import tiny_vocab_tokens, write_vocab
from seqeval import metrics as sm

from electra_tf.core.errors import TaskDataError
from electra_tf.tasks.tagging import TaggingExample, TaggingTask, _windows
from electra_tf.text.tokenizer import Tokenizer
from tests.finetuning import original_tagging as original

# "Café" -> cafe (accent stripped); "hellos" -> hello ##s; "EU" -> e ##u;
# "Blackburn" -> 9 pieces; U+0301 alone tokenizes to nothing -> [UNK].
BIO_TRAIN = """\
-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
\u0301 NN I-NP O

Café NNP B-NP B-LOC
hellos NNS I-NP O
"""

BIOES_TRAIN = """\
-DOCSTART- O

the O
hello S-PER
world B-ORG
model I-ORG
tokens E-ORG
. O
"""

LONG_TAGS_BIO = ["O", "B-PER", "I-PER", "O", "B-ORG", "I-ORG", "I-ORG", "O", "B-LOC", "O"]
LONG_TAGS_BIOES = ["O", "B-PER", "E-PER", "O", "B-ORG", "I-ORG", "E-ORG", "O", "S-LOC", "O"]
LONG_WORDS = ["the", "Peter", "Blackburn", "reads", "hellos", "worlds", "Café", ",",
              "EU", "tokens"]


def long_sentence(scheme: str, repeat: int = 3) -> str:
    tags = LONG_TAGS_BIO if scheme == "BIO" else LONG_TAGS_BIOES
    middle = " X X " if scheme == "BIO" else " "  # the columns of BIO_TRAIN, BIOES_TRAIN
    lines = [f"{w}{middle}{t}" for _ in range(repeat) for w, t in zip(LONG_WORDS, tags)]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("tagging_vocab") / "vocab.txt"
    return Tokenizer(write_vocab(path, tiny_vocab_tokens()))


def load(tmp_path, scheme):
    """A task whose train split is the tiny file plus one long sentence."""
    base = BIO_TRAIN if scheme == "BIO" else BIOES_TRAIN
    (tmp_path / "train.txt").write_text(base + "\n" + long_sentence(scheme), encoding="utf-8")
    task = TaggingTask(scheme=scheme)
    return task, task.read(str(tmp_path), "train")


def gold_logits(task, examples, features, wrong_elsewhere=True):
    """Logits whose argmax is the gold tag at owned first pieces only.

    Every other position (later pieces, and first pieces in windows that do
    not own the word) points at a wrong tag, so reading the wrong position
    shows up as a wrong prediction.
    """
    n, L = features.inputs["input_ids"].shape
    T = len(task.label_names)
    logits = np.zeros((n, L, T), np.float32)
    for row, e in enumerate(features.example_index):
        window = features.extra[row]
        for pos in range(L):
            w = window.word_ids[pos]
            if w < 0:
                continue
            gold = task.label_names.index(examples[e].tags[w])
            tag = gold if window.owned[pos] or not wrong_elsewhere else (gold + 1) % T
            logits[row, pos, tag] = 5.0
    return logits


def test_first_piece_labelling(tmp_path, tokenizer):
    task, examples = load(tmp_path, "BIO")
    short = examples[:3]
    f = task.featurize(short, tokenizer, 32)
    assert len(f) == 3 and f.example_index.tolist() == [0, 1, 2]  # no windowing needed
    assert f.inputs["input_ids"].dtype == np.int32 and f.labels["tag_ids"].dtype == np.int32
    assert f.labels["tag_weights"].dtype == np.float32
    for row, ex in enumerate(short):
        ids = f.inputs["input_ids"][row]
        tokens = tokenizer.convert_ids_to_tokens(ids)
        n_real = int(f.inputs["input_mask"][row].sum())
        assert tokens[0] == "[CLS]" and tokens[n_real - 1] == "[SEP]"
        assert (ids[n_real:] == 0).all() and (f.inputs["segment_ids"][row] == 0).all()
        first = np.flatnonzero(f.labels["tag_weights"][row])
        assert len(first) == len(ex.words)  # one labelled piece per word
        assert not any(tokens[p].startswith("##") for p in first)
        assert f.extra[row].word_ids[first].tolist() == list(range(len(ex.words)))
        assert [task.label_names[i] for i in f.labels["tag_ids"][row][first]] == ex.tags
        unlabelled = np.ones_like(ids, bool)
        unlabelled[first] = False
        assert (f.labels["tag_ids"][row][unlabelled] == 0).all()
    # Row 1: [CLS] p ##e ##t ##e ##r b ##l ##a ##c ##k ##b ##u ##r ##n [UNK] [SEP]
    tokens = tokenizer.convert_ids_to_tokens(f.inputs["input_ids"][1][:17])
    assert tokens[1:3] == ["p", "##e"] and tokens[6:8] == ["b", "##l"]
    assert tokens[15:] == ["[UNK]", "[SEP]"]
    assert np.flatnonzero(f.labels["tag_weights"][1]).tolist() == [1, 6, 15]
    assert f.extra[1].word_ids[:17].tolist() == [-1] + [0] * 5 + [1] * 9 + [2, -1]
    # Row 2: "Café" is one piece (accent stripped), "hellos" two.
    assert tokenizer.convert_ids_to_tokens(f.inputs["input_ids"][2][:5]) == [
        "[CLS]", "cafe", "hello", "##s", "[SEP]"]


@pytest.mark.parametrize("scheme", ["BIO", "BIOES"])
@pytest.mark.parametrize("max_seq_length", [3, 6, 12, 20, 128])
def test_every_word_predicted_once_across_windows(tmp_path, tokenizer, scheme, max_seq_length):
    task, examples = load(tmp_path, scheme)
    f = task.featurize(examples, tokenizer, max_seq_length)
    long_index = len(examples) - 1
    n_long_rows = int((f.example_index == long_index).sum())
    if max_seq_length < 128:
        assert n_long_rows > 1  # the long sentence really is windowed
    assert (f.inputs["input_mask"].sum(1) <= max_seq_length).all()
    owners = {}
    for row, e in enumerate(f.example_index):
        window = f.extra[row]
        assert (f.labels["tag_weights"][row] == window.owned).all()
        for pos in np.flatnonzero(window.owned):
            key = (int(e), int(window.word_ids[pos]))
            assert key not in owners, f"word {key} owned twice"
            owners[key] = row
    assert sorted(owners) == [(e, w) for e, ex in enumerate(examples)
                              for w in range(len(ex.words))]

    logits = gold_logits(task, examples, f)
    preds = task.predictions({"tag_logits": logits}, examples, f)
    assert preds == [ex.tags for ex in examples]
    scores = task.metrics(preds, examples)
    assert scores["f1"] == scores["precision"] == scores["recall"] == scores["accuracy"] == 1.0


def test_windows_rule():
    rng = random.Random(0)
    for _ in range(300):
        budget = rng.randint(1, 12)
        lengths = [rng.randint(1, budget) for _ in range(rng.randint(1, 30))]
        spans = _windows(lengths, budget)
        owned = sorted(w for _, _, o in spans for w in o)
        assert owned == list(range(len(lengths)))  # each word owned exactly once
        assert spans[0][0] == 0 and spans[-1][1] == len(lengths)
        for (s, e, o), nxt in zip(spans, spans[1:] + [None]):
            assert e > s and o <= set(range(s, e)) and o  # each owns a word
            assert e - s == 1 or sum(lengths[s:e]) <= budget
            if nxt is not None:
                assert s < nxt[0] <= e  # moves on, leaves no gap
    # A window inside the one before it owned no word: (2, 3) after (0, 3) here
    assert [(s, e, sorted(o)) for s, e, o in _windows([1, 2, 1, 4], 4)] == [
        (0, 3, [0, 1, 2]), (3, 4, [3])]
    # Mid-window words are owned by the window where they are most central.
    spans = _windows([1] * 10, 4)
    assert [(s, e) for s, e, _ in spans] == [(0, 4), (2, 6), (4, 8), (6, 10)]
    assert [sorted(o) for _, _, o in spans] == [[0, 1, 2], [3, 4], [5, 6], [7, 8, 9]]


@pytest.mark.parametrize("scheme", ["BIO", "BIOES"])
def test_metrics_equal_the_reference_scorer_on_random_predictions(scheme):
    """BIO: seqeval's default (conlleval) mode; BIOES: the original's chunking scorer (it
    had been seqeval's strict IOBES mode, which drops the spans a prediction leaves
    unclosed: 0.955 where the original's reads 0.927 on noisy chunking predictions)."""
    rng = random.Random(1)
    types = ["PER", "ORG", "LOC"]
    prefixes = "BI" if scheme == "BIO" else "BIES"
    tags = ["O"] + [f"{p}-{t}" for p in prefixes for t in types]
    task = TaggingTask(label_names=tags, scheme=scheme)
    examples = [TaggingExample(["w"] * n, [rng.choice(tags) for _ in range(n)])
                for n in (rng.randint(1, 12) for _ in range(40))]
    for _ in range(5):
        preds = [[t if rng.random() < 0.6 else rng.choice(tags) for t in ex.tags]
                 for ex in examples]
        y_true = [ex.tags for ex in examples]
        scores = task.metrics(preds, examples)
        if scheme == "BIO":
            want = {"f1": sm.f1_score(y_true, preds), "precision": sm.precision_score(
                y_true, preds), "recall": sm.recall_score(y_true, preds)}
        else:
            want = original.entity_f1(y_true, preds)
        assert scores == {**want, "accuracy": sm.accuracy_score(y_true, preds)}
        assert 0.0 < scores["f1"] < 1.0
    if scheme == "BIOES":  # two cases strict IOBES had scored otherwise
        for gold, pred, f1 in ((["B-ORG", "E-ORG", "S-PER"], ["B-ORG", "I-ORG", "S-PER"], 1.0),
                               (["B-ORG", "E-ORG", "O", "S-PER"],
                                ["B-ORG", "E-ORG", "I-PER", "S-PER"], 0.5)):
            assert task.metrics([pred], [TaggingExample(["w"] * len(gold), gold)])["f1"] == f1


def test_unlabelled_split_and_write_predictions(tmp_path, tokenizer):
    task, examples = load(tmp_path, "BIO")
    (tmp_path / "test.txt").write_text("-DOCSTART-\n\nEU\nCafé\n\nhellos\n", encoding="utf-8")
    test = task.read(str(tmp_path), "test")
    f = task.featurize(test, tokenizer, 8)
    assert f.labels == {}
    logits = np.zeros((len(f), 8, len(task.label_names)), np.float32)
    logits[..., task.label_names.index("B-LOC")] = 1.0
    preds = task.predictions({"tag_logits": logits}, test, f)
    assert preds == [["B-LOC", "B-LOC"], ["B-LOC"]]
    out = tmp_path / "out" / "test_predictions.txt"
    task.write_predictions(preds, test, str(out))
    assert out.read_text(encoding="utf-8") == "EU B-LOC\nCafé B-LOC\n\nhellos B-LOC\n\n"

    # Labelled: word, gold, predicted; reads back with the predicted tags (the last column).
    f = task.featurize(examples, tokenizer, 10)
    preds = task.predictions({"tag_logits": gold_logits(task, examples, f)}, examples, f)
    preds[0][0] = "O"
    out = tmp_path / "dev_predictions.txt"
    task.write_predictions(preds, examples, str(out))
    assert out.read_text(encoding="utf-8").startswith("EU B-ORG O\nrejects O O\n")
    back = TaggingTask(label_names=task.label_names).read_file(str(out))
    sentences = out.read_text(encoding="utf-8").strip("\n").split("\n\n")
    assert [[line.split()[1] for line in s.split("\n")] for s in sentences] == [
        ex.tags for ex in examples]
    assert [ex.tags for ex in back] == preds
    assert [ex.words for ex in back] == [ex.words for ex in examples]


def test_featurize_needs_a_tag_set(tokenizer):
    task = TaggingTask()
    with pytest.raises(ValueError, match="fit_labels"):
        task.featurize([TaggingExample(["EU"], ["B-ORG"])], tokenizer, 8)
    task.fit_labels([TaggingExample(["EU"], ["B-ORG"])])
    with pytest.raises(TaskDataError, match=r"<memory>:2: tag 'B-PER' is not in the tag set"):
        task.featurize([TaggingExample(["EU", "Peter"], ["B-ORG", "B-PER"])], tokenizer, 8)
