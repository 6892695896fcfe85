"""GLUE tasks: the official TSV layouts, featurization, submission files, eval_glue.

The fixture writes a few rows of every file in the layout of GLUE's
download_glue_data.py, with unbalanced quotes inside sentences (the reason
for csv.QUOTE_NONE).
"""

from __future__ import annotations

import json
import os
import re
import types

import numpy as np
import pytest
from helpers import error_line, run_module

from electra_tf.core.errors import ConfigError, InputError
from electra_tf.tasks import base, glue
from electra_tf.text.tokenizer import Tokenizer

MNLI_COLS = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
             "sentence1_parse\tsentence2_parse\tsentence1\tsentence2")
STSB_COLS = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
PAIR = "index\tsentence1\tsentence2"
MRPC_COLS = "#1 ID\t#2 ID\t#1 String\t#2 String"


def _mnli(index, s1, s2, labels=None):
    row = f"{index}\t31193\t31193n\tgovernment\t( ( x ) )\t( y )\t(ROOT x)\t(ROOT y)\t{s1}\t{s2}"
    return row + ("\t" + "\t".join(labels) if labels else "")


GLUE_FILES = {
    "CoLA/train.tsv": 'gj04\t1\t\t"the model reads a token.\ngj04\t0\t*\tthe token the " reads.\n',
    "CoLA/dev.tsv": "cl03\t1\t\thello world.\n",
    "CoLA/test.tsv": "index\tsentence\n0\tthe \"small\" model.\n1\tcafe reads.\n",
    "SST-2/train.tsv": "sentence\tlabel\nit 's a \" charming journey \t1\nthe worst \t0\n",
    "SST-2/dev.tsv": "sentence\tlabel\nhello \t1\n",
    "SST-2/test.tsv": "index\tsentence\n0\tthe model \" reads\n",
    "MRPC/train.tsv": (f"Quality\t{MRPC_COLS}\n1\t702876\t702977\t\"the model\" reads.\t"
                       "the model reads\n0\t2108705\t2108831\tyes\tno \"\n"),
    "MRPC/dev.tsv": (f"Quality\t{MRPC_COLS}\n1\t1\t2\ta token\tthe token\n"
                     "0\t3\t4\thello\tworld\n1\t5\t6\tcafe\tcafe\n"),
    "MRPC/test.tsv": f"index\t{MRPC_COLS}\n0\t1\t2\ta\tb\n1\t3\t4\t\"c\td\n",
    "STS-B/train.tsv": (f"{STSB_COLS}\tscore\n0\tmain-captions\tMSRvid\t2012test\t0001\tnone"
                        "\tnone\tA \"plane\" is taking off.\tAn air plane is taking off.\t5.000\n"
                        "1\tmain-news\theadlines\t2015\t0002\tnone\tnone\ta\tb\t0.8\n"),
    "STS-B/dev.tsv": (f"{STSB_COLS}\tscore\n0\tg\tf\ty\to\ts\ts\tthe model\tthe model\t4.5\n"
                      "1\tg\tf\ty\to\ts\ts\ta token\tthe world\t1.0\n"
                      "2\tg\tf\ty\to\ts\ts\tcafe\thello\t2.25\n"),
    "STS-B/test.tsv": f"{STSB_COLS}\n0\tg\tf\ty\to\ts\ts\ta\tb\n",
    "QQP/train.tsv": ("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                      "133273\t213221\t213222\tHow is \"the model\"?\tWhat is it?\t0\n"
                      "402555\t536040\t536041\tWhy?\tWhy \"?\t1\n"),
    "QQP/dev.tsv": "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n201359\t1\t2\ta\tb\t1\n",
    "QQP/test.tsv": "id\tquestion1\tquestion2\n0\tWhat \"?\tWhich?\n",
    "MNLI/train.tsv": (f"{MNLI_COLS}\tlabel1\tgold_label\n"
                       + _mnli(0, 'the "model reads', "a token", ["neutral", "neutral"]) + "\n"
                       + _mnli(1, "hello", "world", ["entailment", "entailment"]) + "\n"),
    "MNLI/dev_matched.tsv": (
        f"{MNLI_COLS}\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label\n"
        + _mnli(0, "the model", "a model", ["neutral"] * 5 + ["contradiction"]) + "\n"),
    "MNLI/dev_mismatched.tsv": (
        f"{MNLI_COLS}\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label\n"
        + _mnli(0, "the model", "a model", ["entailment"] * 6) + "\n"
        + _mnli(1, "hello", "world", ["neutral"] * 6) + "\n"
        + _mnli(2, "cafe", "world", ["contradiction"] * 6) + "\n"),
    "MNLI/test_matched.tsv": f"{MNLI_COLS}\n" + _mnli(0, "a", "b") + "\n",
    "MNLI/test_mismatched.tsv": f"{MNLI_COLS}\n" + _mnli(0, "c", "d \"") + "\n",
    # GLUE's diagnostic set, where download_glue_data.py puts it (glue_data/diagnostic)
    "diagnostic/diagnostic.tsv": "index\tsentence1\tsentence2\n0\tThe cat sat.\tNo cat sat.\n",
    "QNLI/train.tsv": "index\tquestion\tsentence\tlabel\n0\tWhat \"?\tthe model.\tnot_entailment\n",
    "QNLI/dev.tsv": "index\tquestion\tsentence\tlabel\n0\tWho?\tthe model.\tentailment\n",
    "QNLI/test.tsv": "index\tquestion\tsentence\n0\tWho?\ta token.\n",
    "RTE/train.tsv": f"{PAIR}\tlabel\n0\tthe \"model\" reads.\tthe model reads\tentailment\n",
    "RTE/dev.tsv": (f"{PAIR}\tlabel\n0\tthe model reads a token\thello\tnot_entailment\n"
                    "1\thello world\tworld\tentailment\n"),
    "RTE/test.tsv": f"{PAIR}\n0\ta\tb\n1\tc\td\n",
    "WNLI/train.tsv": f"{PAIR}\tlabel\n0\tI stuck a pin \"through\ta carrot.\t1\n",
    "WNLI/dev.tsv": f"{PAIR}\tlabel\n0\ta\tb\t0\n",
    "WNLI/test.tsv": f"{PAIR}\n0\ta\tb\n",
}

# (task, split) -> (number of examples, first example's (index, text_a, text_b, label)).
# MRPC's and STS-B's train splits also hold every pair swapped (double_unordered).
EXPECTED = {
    ("cola", "train"): (2, ("0", '"the model reads a token.', None, "1")),
    ("cola", "test"): (2, ("0", 'the "small" model.', None, None)),
    ("sst2", "train"): (2, ("0", "it 's a \" charming journey ", None, "1")),
    ("sst2", "test"): (1, ("0", 'the model " reads', None, None)),
    ("mrpc", "train"): (4, ("0", '"the model" reads.', "the model reads", "1")),
    ("mrpc", "test"): (2, ("0", "a", "b", None)),
    ("stsb", "train"): (4, ("0", 'A "plane" is taking off.', "An air plane is taking off.", 5.0)),
    ("stsb", "test"): (1, ("0", "a", "b", None)),
    ("qqp", "train"): (2, ("133273", 'How is "the model"?', "What is it?", "0")),
    ("qqp", "test"): (1, ("0", 'What "?', "Which?", None)),
    ("mnli", "train"): (2, ("0", 'the "model reads', "a token", "neutral")),
    ("mnli", "dev_matched"): (1, ("0", "the model", "a model", "contradiction")),
    ("mnli", "dev_mismatched"): (3, ("0", "the model", "a model", "entailment")),
    ("mnli", "test_matched"): (1, ("0", "a", "b", None)),
    ("mnli", "test_mismatched"): (1, ("0", "c", 'd "', None)),
    ("mnli", "test_diagnostic"): (1, ("0", "The cat sat.", "No cat sat.", None)),
    ("qnli", "train"): (1, ("0", 'What "?', "the model.", "not_entailment")),
    ("qnli", "test"): (1, ("0", "Who?", "a token.", None)),
    ("rte", "train"): (1, ("0", 'the "model" reads.', "the model reads", "entailment")),
    ("rte", "test"): (2, ("0", "a", "b", None)),
    ("wnli", "train"): (1, ("0", 'I stuck a pin "through', "a carrot.", "1")),
    ("wnli", "test"): (1, ("0", "a", "b", None)),
}


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("glue_data")
    for rel, text in GLUE_FILES.items():
        os.makedirs(root / os.path.dirname(rel), exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return str(root)


@pytest.fixture(scope="module")
def tokenizer(tiny_vocab):
    return Tokenizer(tiny_vocab)


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8", "surrogateescape"))  # "\udce9": a Latin-1 é
    return str(path)


# === Reading ===

@pytest.mark.parametrize("name", list(glue.GLUE_TASKS))
def test_reads_every_split_of_every_task(glue_dir, name):
    task = glue.get_task(name)
    for split in task.splits():
        # data_dir may be glue_data/ (the task folder is found) or glue_data/<Task>.
        examples = task.read(os.path.join(glue_dir, task.dir_name), split)
        assert examples == task.read(glue_dir, split)
        assert len({e.guid for e in examples}) == len(examples)
        assert all(e.guid == f"{split}-{e.index}" for e in examples
                   if not e.guid.endswith("-swapped"))
        assert all((e.label is None) == split.startswith("test") for e in examples)
        assert all((e.text_b is None) == (name in ("cola", "sst2")) for e in examples)
        if (name, split) in EXPECTED:
            count, first = EXPECTED[name, split]
            e = examples[0]
            assert len(examples) == count
            assert (e.index, e.text_a, e.text_b, e.label) == first


def test_the_diagnostic_set_is_predicted_where_its_file_is(glue_dir, tmp_path):
    """GLUE's diagnostic set (AX.tsv of a submission) is MNLI's optional test split: the
    original predicts it with the MNLI model; a run without the file leaves it out."""
    from electra_tf.training.finetuning import Finetuning

    mnli = glue.get_task("mnli")
    for data_dir in (glue_dir, os.path.join(glue_dir, "MNLI")):
        assert mnli.optional_split(data_dir, glue.DIAGNOSTIC) is None
    _write(tmp_path, "MNLI/test_matched.tsv", "index\tsentence1\tsentence2\n0\ta\tb\n")
    alone = str(tmp_path / "MNLI")
    # the files looked for (it had named glue_data/diagnostic, not where it looked)
    assert mnli.optional_split(alone, glue.DIAGNOSTIC) == (
        f"no {alone}/diagnostic.tsv, {alone}/MNLI/diagnostic.tsv, "
        f"{alone}/diagnostic/diagnostic.tsv, {tmp_path}/diagnostic/diagnostic.tsv: GLUE's "
        "diagnostic set (AX.tsv) is not predicted")
    assert mnli.optional_split(alone, "test_matched") is None  # the others are required
    assert mnli._diagnostic_paths("gs://b/glue_data/MNLI/") == [  # (not gs:/, not local)
        "gs://b/glue_data/MNLI/diagnostic.tsv", "gs://b/glue_data/MNLI/MNLI/diagnostic.tsv",
        "gs://b/glue_data/MNLI/diagnostic/diagnostic.tsv",
        "gs://b/glue_data/diagnostic/diagnostic.tsv"]
    runs = {d: types.SimpleNamespace(task=mnli, run=types.SimpleNamespace(
        data_dir=d, do_train=False, do_eval=False, do_predict=True)) for d in (glue_dir, alone)}
    assert Finetuning._splits_to_read(runs[glue_dir]) == [
        "test_matched", "test_mismatched", "test_diagnostic"]
    assert Finetuning._splits_to_read(runs[alone]) == ["test_matched", "test_mismatched"]


def test_a_runs_prediction_files_are_those_it_wrote(glue_dir, tmp_path):
    """What keep_all_models=False moves out of a trial's folder before removing it: the
    dev predictions and test submissions there (SQuAD 2.0's null odds too)."""
    from electra_tf.tasks.registry import get_task
    from electra_tf.training.finetuning import Finetuning

    def prediction_files(task, *names):
        run = Finetuning.__new__(Finetuning)
        run.task = task
        run.run = types.SimpleNamespace(data_dir=glue_dir, model_dir=str(tmp_path / task.name),
                                        do_train=True, do_eval=True, do_predict=True)
        os.makedirs(run.run.model_dir)
        for name in names:
            (tmp_path / task.name / name).write_text("x")
        return sorted(os.path.basename(p) for p in run.prediction_files())

    mnli = glue.get_task("mnli")
    assert prediction_files(mnli, "MNLI-m.tsv", "AX.tsv", "mnli_dev_matched_predictions.txt",
                            "MNLI-m_logits.npz", "mnli_dev_matched_logits.npz",
                            "results.json") == [
        "AX.tsv", "MNLI-m.tsv", "MNLI-m_logits.npz", "mnli_dev_matched_logits.npz",
        "mnli_dev_matched_predictions.txt"]
    squad = get_task("squad_v2")
    assert prediction_files(squad, "squad_v2_dev_predictions.json",
                            "squad_v2_dev_null_odds.json") == [
        "squad_v2_dev_null_odds.json", "squad_v2_dev_predictions.json"]


def test_registry_defaults_and_submission_names():
    assert list(glue.GLUE_TASKS) == ["cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli",
                                     "rte", "wnli"]
    assert glue.get_task("SST-2") is glue.GLUE_TASKS["sst2"]
    stsb = glue.get_task("sts-b")
    assert (stsb.head, stsb.regression, stsb.num_labels) == ("sequence_classification", True, 1)
    assert not glue.get_task("sst2").regression
    assert {n: t.default_epochs for n, t in glue.GLUE_TASKS.items() if t.default_epochs != 3} == {
        "stsb": 10, "rte": 10}
    assert {t.default_max_seq_length for t in glue.GLUE_TASKS.values()} == {128}
    names = [t.submission_file(s) for t in glue.GLUE_TASKS.values() for s in t.test_splits()]
    assert names == ["CoLA.tsv", "SST-2.tsv", "MRPC.tsv", "STS-B.tsv", "QQP.tsv", "MNLI-m.tsv",
                     "MNLI-mm.tsv", "AX.tsv", "QNLI.tsv", "RTE.tsv", "WNLI.tsv"]
    mnli = glue.get_task("mnli")
    assert mnli.dev_splits() == ("dev_matched", "dev_mismatched")
    assert mnli.label_names == ("contradiction", "entailment", "neutral")
    assert glue.get_task("cola").metric_names == ("mcc",)
    assert glue.get_task("mrpc", skip_malformed_rows=True).skip_malformed_rows
    assert {n for n, t in glue.GLUE_TASKS.items() if t.unordered} == {"mrpc", "stsb"}
    with pytest.raises(ValueError, match="unknown GLUE task 'ax'"):
        glue.get_task("ax")
    with pytest.raises(ValueError, match="mnli has no split 'dev'"):
        mnli.read("glue_data", "dev")


# === Featurization ===

def test_featurize_packs_pairs_and_labels(glue_dir, tokenizer):
    task = glue.get_task("rte")
    examples = task.read(glue_dir, "dev")
    f = task.featurize(examples, tokenizer, 16)
    assert len(f) == 2 and f.example_index.tolist() == [0, 1]
    for key in ("input_ids", "input_mask", "segment_ids"):
        assert f.inputs[key].shape == (2, 16) and f.inputs[key].dtype == np.int32
    a, b = tokenizer.encode([examples[1].text_a, examples[1].text_b])
    expected = base.pack_pair(a, b, 16, tokenizer.cls_id, tokenizer.sep_id)
    assert [f.inputs[k][1].tolist() for k in ("input_ids", "input_mask", "segment_ids")] == list(
        expected)
    assert f.inputs["segment_ids"][1].tolist()[: len(a) + len(b) + 3] == (
        [0] * (len(a) + 2) + [1] * (len(b) + 1))
    assert f.labels["label"].tolist() == [1, 0] and f.labels["label"].dtype == np.int32
    # Truncation keeps [CLS] a [SEP] b [SEP] within L.
    short = task.featurize(examples, tokenizer, 5).inputs["input_ids"][0].tolist()
    assert short[0] == tokenizer.cls_id and short.count(tokenizer.sep_id) == 2


def _original_truncate_seq_pair(tokens_a, tokens_b, max_length):
    """finetune/classification/classification_tasks.py's _truncate_seq_pair, as it is."""
    while True:
        total_length = len(tokens_a) + len(tokens_b)
        if total_length <= max_length:
            break
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def _original_featurize_ids(tokens_a, tokens_b, max_seq_length, cls, sep):
    """finetune/classification/classification_tasks.py's featurize, from pieces: a pair
    only when tokens_b has pieces, else a alone; (input_ids, segment_ids) unpadded."""
    tokens_a = list(tokens_a)
    tokens_b = list(tokens_b) if tokens_b else None
    if tokens_b:
        _original_truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    elif len(tokens_a) > max_seq_length - 2:
        tokens_a = tokens_a[0:(max_seq_length - 2)]
    ids, segments = [cls, *tokens_a, sep], [0] * (len(tokens_a) + 2)
    if tokens_b:
        ids += [*tokens_b, sep]
        segments += [1] * (len(tokens_b) + 1)
    return ids, segments


def test_pair_packing_is_the_originals_and_the_export_packs_alike(tokenizer):
    """The longer side is cut first and B on a tie, as the original's _truncate_seq_pair:
    A had been cut on ties, so every pair with both sides past half of L - 3 (odd at 128)
    kept one piece of A fewer and one of B more than the model the paper fine-tuned. A
    second text of no pieces packs A alone, [CLS] a [SEP], as the original's featurize
    (it had packed [CLS] a [SEP] [SEP], A cut to L - 3)."""
    import tensorflow as tf

    from electra_tf.serving.graph import Packer

    L = 12
    rng = np.random.default_rng(0)
    lengths = [(9, 9), (10, 10), (5, 4), (4, 5), (0, 12), (12, 0), (9, 0), (10, 0), (0, 0),
               (3, 3), (20, 1), (1, 20)]
    lengths += [tuple(int(x) for x in rng.integers(0, 16, 2)) for _ in range(40)]
    rows_a = [[5 + i for i in range(la)] for la, _ in lengths]
    rows_b = [[100 + i for i in range(lb)] for _, lb in lengths]
    packed = Packer(tokenizer, L).pack(tf.ragged.constant(rows_a, tf.int64, ragged_rank=1),
                                       tf.ragged.constant(rows_b, tf.int64, ragged_rank=1))
    for i, (a, b) in enumerate(zip(rows_a, rows_b)):
        want, segments = _original_featurize_ids(a, b, L, tokenizer.cls_id, tokenizer.sep_id)
        pad = [0] * (L - len(want))
        got = base.pack_pair(a, b, L, tokenizer.cls_id, tokenizer.sep_id)
        assert got == (want + pad, [1] * len(want) + pad, segments + pad), lengths[i]
        width = packed["input_word_ids"].shape[1]
        assert packed["input_word_ids"][i].numpy().tolist() == (want + pad)[:width], lengths[i]
        assert packed["input_type_ids"][i].numpy().tolist() == (segments + pad)[:width]
        assert int(packed["input_mask"][i].numpy().sum()) == len(want), lengths[i]
    assert base.pack_pair(list(range(5, 14)), list(range(100, 109)), L, 2, 3)[0][:6] == \
        [2, 5, 6, 7, 8, 9]  # 9 + 9 pieces into 9: A keeps 5, B 4
    assert base.pack_pair([5] * 12, [], L, 2, 3)[0] == [2] + [5] * 10 + [3]


def test_featurize_single_sentence_regression_and_test(glue_dir, tokenizer):
    sst = glue.get_task("sst2")
    f = sst.featurize(sst.read(glue_dir, "train"), tokenizer, 8)
    assert f.inputs["segment_ids"].max() == 0
    assert f.inputs["input_ids"][0, 0] == tokenizer.cls_id
    stsb = glue.get_task("stsb")
    f = stsb.featurize(stsb.read(glue_dir, "dev"), tokenizer, 12)
    assert f.labels["label"].dtype == np.float32
    # The original's RegressionTask target: (score - 0.0) / 5.0.
    np.testing.assert_array_equal(f.labels["label"], np.float32([0.9, 0.2, 0.45]))
    f = stsb.featurize(stsb.read(glue_dir, "test"), tokenizer, 12)
    assert f.labels == {} and f.inputs["input_ids"].shape == (1, 12)
    with pytest.raises(ValueError, match="at least 3"):
        stsb.featurize([], tokenizer, 2)


# === Predictions, metrics, submission files ===

def test_predictions_metrics_and_submission_round_trip(glue_dir, tokenizer, tmp_path):
    task = glue.get_task("mnli")
    examples = task.read(glue_dir, "dev_mismatched")
    features = task.featurize(examples, tokenizer, 16)
    logits = np.array([[0.0, 2.0, 1.0], [0.0, 0.0, 3.0], [0.0, 1.0, 0.5]])  # ent, neu, ent
    preds = task.predictions({"logits": logits}, examples, features)
    assert preds.tolist() == [1, 2, 1]
    assert task.metrics(preds, examples) == {"accuracy": pytest.approx(2 / 3)}
    path = str(tmp_path / task.submission_file("dev_mismatched"))
    task.write_predictions(preds, examples, path)
    with open(path, encoding="utf-8") as f:
        assert f.read() == "index\tprediction\n0\tentailment\n1\tneutral\n2\tentailment\n"
    assert task.read_predictions(path, examples).tolist() == [1, 2, 1]
    from electra_tf.tasks.base import scores_file, write_scores

    scores = task.scores(preds, {"logits": logits}, examples, features)  # the original's pickle
    assert scores_file(path) == str(tmp_path / "MNLI-mm_logits.npz")
    write_scores(scores_file(path), scores)
    with np.load(scores_file(path)) as written:  # (no pickled objects: allow_pickle off)
        np.testing.assert_array_equal(written["logits"], logits.astype(np.float32))
        assert written["index"].tolist() == ["0", "1", "2"]
        assert written["label_names"].tolist() == list(task.label_names)

    stsb = glue.get_task("stsb")
    examples = stsb.read(glue_dir, "dev")
    features = stsb.featurize(examples, tokenizer, 16)
    scores = stsb.predictions({"logits": np.array([0.75, 0.05, 0.5], np.float32)}, examples,
                              features)
    # Back on the 0..5 scale: output x 5.0 + 0.0.
    np.testing.assert_allclose(scores, [3.75, 0.25, 2.5], rtol=1e-7)
    path = str(tmp_path / "STS-B.tsv")
    stsb.write_predictions(scores, examples, path)
    np.testing.assert_array_equal(stsb.read_predictions(path, examples), scores)
    written = stsb.scores(scores, {"logits": np.array([0.75, 0.05, 0.5])}, examples, features)
    assert sorted(written) == ["index", "predictions"]  # the 0..5 scores, full precision
    np.testing.assert_array_equal(written["predictions"], scores)
    dev_file = os.path.join(glue_dir, "STS-B", "dev.tsv")
    assert glue.evaluate_submission("sts-b", path, dev_file) == stsb.metrics(scores, examples)
    assert list(stsb.metrics(scores, examples)) == ["spearman", "pearson"]
    with pytest.raises(ValueError, match="unlabelled"):
        stsb.metrics(scores[:1], stsb.read(glue_dir, "test"))


def test_double_unordered_swaps_only_train_pairs_of_mrpc_and_stsb(glue_dir):
    """The original's double_unordered: MRPC's and STS-B's train split is followed by
    each pair in the other order; dev and test are not doubled, nor other tasks."""
    for name in ("mrpc", "stsb"):
        task = glue.get_task(name)
        train = task.read(glue_dir, "train")
        plain = glue.get_task(name, double_unordered=False).read(glue_dir, "train")
        assert len(plain) == 2 and train[:2] == plain
        assert [(e.guid, e.index, e.text_a, e.text_b, e.label) for e in train[2:]] == [
            (f"{e.guid}-swapped", e.index, e.text_b, e.text_a, e.label) for e in plain]
        assert len(task.read(glue_dir, "dev")) == 3 and len(task.read(glue_dir, "test")) == 2 - (
            name == "stsb")
    assert len(glue.get_task("qqp").read(glue_dir, "train")) == 2  # order matters (not swapped)
    # The FinetuningConfig flag (the original's name and default) reaches the task.
    from electra_tf.core.config import FinetuningConfig
    from electra_tf.tasks import registry

    assert FinetuningConfig().double_unordered and registry.get_task("mrpc").double_unordered
    off = FinetuningConfig(task_name="stsb", double_unordered=False)
    assert len(registry.task_from_config(off).read(glue_dir, "train")) == 2


def test_stsb_pearson_keeps_the_gold_scores_in_float64(tmp_path):
    """By hand: gold (0.1, 0.2, 0.6), predictions (0, 1, 0): deviations (-0.2, -0.1, 0.3)
    and (-1/3, 2/3, -1/3), covariance -0.1, norms^2 0.14 and 2/3: r = -sqrt(3/28).
    Gold rounded to float32 moves r by ~6e-9."""
    stsb = glue.get_task("stsb")
    rows = "".join(f"{i}\tg\tf\ty\to\ts\ts\ta\tb\t{v}\n" for i, v in enumerate(
        ("0.1", "0.2", "0.6")))
    examples = stsb.read_file(_write(tmp_path, "dev.tsv", f"{STSB_COLS}\tscore\n{rows}"), True)
    got = stsb.metrics(np.array([0.0, 1.0, 0.0]), examples)
    assert abs(got["pearson"] + np.sqrt(3 / 28)) < 1e-15
    assert got["spearman"] == 0.0  # ranks (1, 2, 3) and (1.5, 3, 1.5): no covariance


def test_eval_glue_scores_a_submission_file(glue_dir, tmp_path):
    """What eval_glue's main prints (as JSON), in this process."""
    task = glue.get_task("mrpc")
    examples = task.read(glue_dir, "dev")  # gold 1, 0, 1
    preds = np.array([1, 1, 0])
    path = str(tmp_path / "MRPC.tsv")
    task.write_predictions(preds, examples, path)
    dev_file = os.path.join(glue_dir, "MRPC", "dev.tsv")
    scores = json.loads(json.dumps(glue.evaluate_submission("mrpc", path, dev_file)))
    assert scores == pytest.approx({"f1": 0.5, "accuracy": 1 / 3})
    assert list(scores) == ["f1", "accuracy"]


def test_eval_glue_cli_bad_submission_is_one_line(glue_dir, tmp_path):
    """The one command-line test of eval_glue: `error: file:line: ...`, status 2. A
    value of 100,000 characters is quoted by its start and end (the line had been as
    long as the value: 50 MB for a 50 MB cell)."""
    dev_file = os.path.join(glue_dir, "MRPC", "dev.tsv")
    bad = _write(tmp_path, "bad.tsv", f"index\tprediction\n0\t1\n1\t{'y' * 100_000}\n2\t0\n")
    out = run_module("electra_tf.eval_glue", "--task=mrpc", f"--predictions={bad}",
                     f"--dev_file={dev_file}", timeout=120)
    line = error_line(out, f"error: {bad}:3: prediction '{'y' * 399}...[99,502 characters]..."
                           f"{'y' * 99}' is not one of 0, 1")
    # The last line (TF may log its CUDA probe before it).
    assert out.stderr.strip().splitlines()[-1] == line
    assert out.stdout == ""


# === Bad input: each error names the file and line ===

@pytest.mark.parametrize("task_name, rel, text, message", [
    ("rte", "RTE/dev.tsv", f"{PAIR}\tlabel\n0\ta\tb\tentailment\n1\ta\tb\n",
     r"RTE/dev.tsv:3: expected at least 4 tab-separated columns .*found 3"),
    ("cola", "CoLA/dev.tsv", "gj04\t1\t\tok\ngj04\t2\t*\tbad\n",
     r"CoLA/dev.tsv:2: label '2' is not one of 0, 1"),
    ("mnli", "MNLI/dev_matched.tsv",
     f"{MNLI_COLS}\tgold_label\n" + _mnli(0, "a", "b", ["-"]) + "\n",
     r"MNLI/dev_matched.tsv:2: label '-' is not one of contradiction, entailment, neutral"),
    ("stsb", "STS-B/dev.tsv", f"{STSB_COLS}\tscore\n0\tg\tf\ty\to\ts\ts\ta\tb\tfive\n",
     r"STS-B/dev.tsv:2: score 'five' is not a number"),
    ("stsb", "STS-B/dev.tsv", f"{STSB_COLS}\tscore\n0\tg\tf\ty\to\ts\ts\ta\tb\tinf\n",
     r"STS-B/dev.tsv:2: score 'inf' is not a finite number"),
    ("stsb", "STS-B/train.tsv", f"{STSB_COLS}\tscore\n0\tg\tf\ty\to\ts\ts\ta\tb\t7.5\n",
     r"STS-B/train.tsv:2: score '7.5' is outside STS-B's 0 to 5"),  # trained on, silently
    ("sst2", "SST-2/train.tsv", "sentence\tlabel\nfine\t1\ncaf\udce9\t0\n",
     r"SST-2/train.tsv:3: not valid UTF-8 \(invalid continuation byte\)"),  # was replaced
    ("qnli", "QNLI/dev.tsv", "index\tquestion\tsentence\n0\ta\tb\n",
     r"QNLI/dev.tsv:1: header lacks column\(s\) 'label'"),
    ("sst2", "SST-2/dev.tsv", "sentence\tlabel\nok\t1\nbad\rline\t0\n",  # csv.Error before
     r"SST-2/dev.tsv:3: a carriage return alone inside a row \(old Mac line ends\?\)"),
    ("sst2", "SST-2/dev.tsv", "sentence\tlabel\n", r"SST-2/dev.tsv: no examples"),
    ("wnli", "WNLI/dev.tsv", "", r"WNLI/dev.tsv: no examples"),
    # a test file's index twice: two submission rows of one index (it had been written)
    ("sst2", "SST-2/test.tsv", "index\tsentence\n7\thello\n7\tworld\n",
     r"SST-2/test.tsv:3: index '7' repeats \(first at .*SST-2/test.tsv:2\); the SST-2 "
     r"submission's rows are matched by index$"),
    # a dev file's index twice: scored by the run, then its predictions file was refused
    # by eval_glue
    ("qnli", "QNLI/dev.tsv", "index\tquestion\tsentence\tlabel\n1\ta\tb\tentailment\n"
     "1\tc\td\tentailment\n",
     r"QNLI/dev.tsv:3: index '1' repeats \(first at .*QNLI/dev.tsv:2\); predictions are "
     r"matched to its rows by index \(eval_glue\)$"),
    # a test row with an empty index: a submission row without one (it had been written)
    ("sst2", "SST-2/test.tsv", "index\tsentence\n0\thello\n\tworld\n",
     r"SST-2/test.tsv:3: its 'index' field is empty; the SST-2 submission's rows are "
     r"matched by index$"),
])
def test_bad_rows_name_file_and_line(tmp_path, task_name, rel, text, message):
    os.makedirs(tmp_path / os.path.dirname(rel))
    _write(tmp_path, rel, text)
    split = os.path.splitext(os.path.basename(rel))[0]
    with pytest.raises(base.TaskDataError, match=message):
        glue.get_task(task_name).read(str(tmp_path), split)


def test_skip_malformed_rows_skips_short_rows_as_the_original(tmp_path, caplog):
    """The original's _load_glue logs and drops a row it cannot read; electra_tf refuses the
    file unless --skip_malformed_rows (which the refusal names)."""
    from electra_tf.core.config import FinetuningConfig
    from electra_tf.tasks.registry import task_from_config

    _write(tmp_path, "RTE/dev.tsv", f"{PAIR}\tlabel\n0\ta\tb\tentailment\n1\ta\tb\n"
                                    "2\tc\td\tnot_entailment\n")
    with pytest.raises(base.TaskDataError, match="--skip_malformed_rows skips such rows"):
        task_from_config(FinetuningConfig(task_name="rte")).read(str(tmp_path / "RTE"), "dev")
    task = task_from_config(FinetuningConfig(task_name="rte", skip_malformed_rows=True))
    with caplog.at_level("WARNING"):
        examples = task.read(str(tmp_path / "RTE"), "dev")
    assert [e.index for e in examples] == ["0", "2"]
    assert "skipping malformed row" in caplog.text and "RTE/dev.tsv:3" in caplog.text
    with pytest.raises(ConfigError, match="--skip_malformed_rows is an option of"):
        task_from_config(FinetuningConfig(task_name="ner", skip_malformed_rows=True))


def test_skip_malformed_rows_skips_no_row_of_a_test_file(tmp_path):
    """A test file's rows are the GLUE submission's: a row skipped there had left its
    index out of RTE.tsv (an absl warning the only sign), a file GLUE refuses."""
    _write(tmp_path, "RTE/test.tsv", f"{PAIR}\n0\ta\tb\n   \n1\tonly\n2\tc\td\n")
    task = glue.get_task("rte", skip_malformed_rows=True)
    with pytest.raises(base.TaskDataError,
                       match=r"RTE/test.tsv:4: expected at least 3 tab-separated columns .*"
                             r"found 2: a test row is not skipped \(the RTE submission needs "
                             r"a prediction for every index"):
        task.read(str(tmp_path / "RTE"), "test")
    # (a line of spaces, line 3, holds no index: passed over as an empty line is; without
    # the flag the refusal does not name a flag that would refuse the row too)
    with pytest.raises(base.TaskDataError,
                       match=r"RTE/test.tsv:4: .*found 2: mend the row \(a test row is not "
                             r"skipped: the RTE submission needs a prediction for every index"):
        glue.get_task("rte").read(str(tmp_path / "RTE"), "test")


def test_a_trailing_tab_leaves_the_columns_counted_from_the_end_where_they_are(tmp_path):
    """STS-B's score and MNLI's label are read from the row's end, as the original reads
    them: a row ending in a tab had read its empty last field (`label '' is not a
    number`), where the same tab on RTE's rows was read as nothing."""
    _write(tmp_path, "STS-B/dev.tsv", f"{STSB_COLS}\tscore\n"
                                      "0\tg\tf\ty\to\ts\ts\ta\tb\t4.5\t\n")
    [example] = glue.get_task("stsb").read(str(tmp_path / "STS-B"), "dev")
    assert (example.text_a, example.text_b, example.label) == ("a", "b", 4.5)
    _write(tmp_path, "MNLI/dev_matched.tsv", f"{MNLI_COLS}\tgold_label\n"
           + _mnli(0, "a", "b", ["neutral"]) + "\t\t\n")
    [example] = glue.get_task("mnli").read(str(tmp_path / "MNLI"), "dev_matched")
    assert (example.text_a, example.text_b, example.label) == ("a", "b", "neutral")
    # a row without its score: its second text is read as the score, which is said
    _write(tmp_path, "STS-B/dev.tsv", f"{STSB_COLS}\tscore\n0\tg\tf\ty\to\ts\ts\ta\tb\n")
    with pytest.raises(base.TaskDataError,
                       match=r"STS-B/dev.tsv:2: score 'b' is not a number \(read from the "
                             r"row's end, as the original reads it: the row has 9 of the "
                             r"header's 10 columns; is one missing\?\)"):
        glue.get_task("stsb").read(str(tmp_path / "STS-B"), "dev")


def test_a_cola_file_with_a_header_line_is_told_it_has_none(tmp_path):
    """CoLA's train and dev files have no header: one given a header line had been told
    `label 'label' is not one of 0, 1` at line 1 alone."""
    _write(tmp_path, "CoLA/dev.tsv", "source\tlabel\tstar\tsentence\ngj04\t1\t\tok\n")
    with pytest.raises(base.TaskDataError,
                       match=r"CoLA/dev.tsv:1: label 'label' is not one of 0, 1 \(CoLA's "
                             r"train and dev files have no header line: remove it if this "
                             r"is one\)"):
        glue.get_task("cola").read(str(tmp_path / "CoLA"), "dev")


def test_eval_glue_skips_the_rows_a_run_with_skip_malformed_rows_skipped(tmp_path):
    """Its refusal names --skip_malformed_rows, which eval_glue takes too: the predictions
    of a run trained with it have no row for the dev file's short rows."""
    dev = _write(tmp_path, "RTE/dev.tsv", f"{PAIR}\tlabel\n0\ta\tb\tentailment\n1\ta\tb\n"
                                          "2\tc\td\tnot_entailment\n")
    preds = _write(tmp_path, "RTE.tsv", "index\tprediction\n0\tentailment\n2\tentailment\n")
    with pytest.raises(InputError, match="--skip_malformed_rows skips such rows"):
        glue.evaluate_submission("rte", preds, dev)
    assert glue.evaluate_submission("rte", preds, dev, skip_malformed_rows=True) == {
        "accuracy": 0.5}


def test_mnli_and_stsb_read_their_end_columns_from_the_end_of_a_short_row_too(tmp_path):
    """The original reads MNLI's label and STS-B's sentences and score counted from the
    row's end, so a row that lacks a field before them (an annotator's label, a metadata
    column) reads right there; electra_tf had refused it, saying the original skips it."""
    mnli = glue.get_task("mnli")
    four_labels = _mnli(0, "a", "b", ["neutral", "neutral", "neutral", "neutral"])
    _write(tmp_path, "MNLI/dev_matched.tsv",
           "\t".join([MNLI_COLS, "label1", "label2", "label3", "label4", "label5",
                      "gold_label"]) + "\n" + four_labels + "\tneutral\n"
           + _mnli(1, "c", "d", ["entailment"] * 5) + "\tentailment\n")
    examples = mnli.read(str(tmp_path / "MNLI"), "dev_matched")
    assert [(e.text_a, e.text_b, e.label) for e in examples] == [
        ("a", "b", "neutral"), ("c", "d", "entailment")]
    stsb = glue.get_task("stsb")
    _write(tmp_path, "STS-B/train.tsv", f"{STSB_COLS}\tscore\n"
           "0\tg\tf\ty\to\ts\ts\ta\tb\t1.5\n"
           "1\tg\tf\ty\ts\ts\tc\td\t2.5\n")  # no old_index
    examples = stsb.read(str(tmp_path / "STS-B"), "train")
    assert [(e.text_a, e.text_b, e.label) for e in examples][:2] == [
        ("a", "b", 1.5), ("c", "d", 2.5)]
    # a row too short for them is still refused, naming what is read from the end
    _write(tmp_path, "STS-B/dev.tsv", f"{STSB_COLS}\tscore\n0\t2.5\n")
    with pytest.raises(base.TaskDataError, match=re.escape(
            "STS-B/dev.tsv:2: expected at least 3 tab-separated columns (index, sentence1 "
            "(counted from the row's end), sentence2 (counted from the row's end), score "
            "(counted from the row's end)), found 2")):
        stsb.read(str(tmp_path / "STS-B"), "dev")


def test_a_byte_order_mark_is_dropped_and_wide_rows_are_warned(tmp_path, caplog):
    """A BOM (as editors write) read into the first column's name, which then was not
    found; a row with more fields than the header (a tab inside a text: the official
    MRPC has some) is read by position, as the original reads it, with one warning."""
    _write(tmp_path, "SST-2/train.tsv", "\ufeffsentence\tlabel\nthe cat\t1\n")
    assert [e.text_a for e in glue.get_task("sst2").read(str(tmp_path / "SST-2"),
                                                          "train")] == ["the cat"]
    _write(tmp_path, "CoLA/train.tsv", "gj04\t1\t\tthe cat sat\ton the mat\ngj04\t0\t*\tcat the\t\n")
    with caplog.at_level("WARNING"):
        examples = glue.get_task("cola").read(str(tmp_path / "CoLA"), "train")
    assert [e.text_a for e in examples] == ["the cat sat", "cat the"]
    warned = [r.getMessage() for r in caplog.records if "more tab-separated" in r.getMessage()]
    assert warned == [f"{tmp_path / 'CoLA' / 'train.tsv'}: 1 row(s) have more tab-separated "
                      "fields than its 4 columns (a tab inside a text?; first at line 1): read "
                      "by column position, as the original reads them (MNLI's label and "
                      "STS-B's columns counted from the row's end), so a text holding a tab is "
                      "cut there"], caplog.text
    # The original reads MNLI's label and STS-B's columns from the row's end: a tab inside
    # sentence1 had taken MNLI's label from label5 and STS-B's score from a sentence.
    _write(tmp_path, "MNLI/dev_matched.tsv",
           "index\tsentence1\tsentence2\tlabel1\tlabel5\tgold_label\n"
           "0\ta dog\truns\ta cat runs\tentailment\tcontradiction\tentailment\n")
    mnli = glue.get_task("mnli").read(str(tmp_path / "MNLI"), "dev_matched")
    assert (mnli[0].text_a, mnli[0].text_b, mnli[0].label) == ("a dog", "runs", "entailment")
    _write(tmp_path, "STS-B/train.tsv",
           "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\t"
           "sentence2\tscore\n0\tg\tf\ty\to\ts1\ts2\ta dog\truns\ta cat runs\t4.0\n")
    stsb = glue.get_task("stsb", double_unordered=False).read(str(tmp_path / "STS-B"), "train")
    assert (stsb[0].text_a, stsb[0].text_b, stsb[0].label) == ("runs", "a cat runs", 4.0)


def test_missing_file_and_skipping_malformed_rows(tmp_path):
    with pytest.raises(base.TaskDataError, match=r"RTE/test.tsv: no such file \(rte test\)"):
        glue.get_task("rte").read(str(tmp_path / "RTE"), "test")
    _write(tmp_path, "train.tsv", f"{PAIR}\tlabel\n0\ta\tb\t1\n1\tonly one column\n2\tc\td\t0\n")
    examples = glue.get_task("wnli", skip_malformed_rows=True).read(str(tmp_path), "train")
    assert [e.index for e in examples] == ["0", "2"]


def test_bad_prediction_files(glue_dir, tmp_path):
    task = glue.get_task("mrpc")
    dev_file = os.path.join(glue_dir, "MRPC", "dev.tsv")
    cases = {
        "index\tlabel\n0\t1\n": ":1: expected the header 'index<TAB>prediction'",
        "": ": empty: expected the header 'index<TAB>prediction' and a row per example",
        "index\tprediction\n0\t1\n1\t0\n": ": no prediction for 1 of 3 examples (indices 2)",
        "index\tprediction\n0\t1\n0\t0\n": ":3: index '0' repeats",
        "index\tprediction\n0\t1\n7\t0\n": ":3: index '7' is not in the gold file",
        "index\tprediction\n0\t1\t1\n": ":2: expected 2 columns, found 3",
    }
    for i, (text, message) in enumerate(cases.items()):
        path = _write(tmp_path, f"p{i}.tsv", text)
        with pytest.raises(InputError) as e:
            glue.evaluate_submission("mrpc", path, dev_file)
        assert str(e.value).startswith(path + message)
    with pytest.raises(InputError, match="no such file"):
        glue.evaluate_submission("mrpc", str(tmp_path / "none.tsv"), dev_file)
    with pytest.raises(InputError, match=f"{tmp_path}: a folder, not a file"):
        glue.evaluate_submission("mrpc", str(tmp_path), dev_file)
    bom = _write(tmp_path, "bom.tsv", "\ufeffindex\tprediction\n0\t1\n1\t0\n")
    with pytest.raises(InputError, match=r": no prediction for 1 of 3"):  # past the header
        glue.evaluate_submission("mrpc", bom, dev_file)
    with pytest.raises(InputError, match="unknown GLUE task 'sst': electra_tf calls that task "
                                         "sst2; known: "):  # (the original's name)
        glue.evaluate_submission("sst", str(tmp_path / "none.tsv"), dev_file)
    with pytest.raises(ValueError, match="out of range"):
        task.write_predictions([2], task.read(glue_dir, "dev")[:1], str(tmp_path / "x.tsv"))
    # A gold file with an index twice: the gold file is named, not the predictions (as
    # its reading refuses it, the run's too)
    os.makedirs(tmp_path / "gold")
    gold = _write(tmp_path, "gold/dev.tsv", f"{PAIR}\tlabel\n0\ta\tb\t1\n0\tc\td\t0\n")
    path = _write(tmp_path, "p.tsv", "index\tprediction\n0\t1\n")
    with pytest.raises(InputError) as e:
        glue.evaluate_submission("wnli", path, gold)
    assert str(e.value) == (f"{gold}:3: index '0' repeats (first at {gold}:2); predictions "
                            "are matched to its rows by index (eval_glue)"), e.value


def test_fields_longer_than_the_csv_modules_default_limit_are_read(tmp_path):
    """csv refuses fields over 128 KiB unless told otherwise; a long text is no error."""
    import csv

    long_text = "word " * 40_000  # 200,000 characters
    _write(tmp_path, "dev.tsv", f"{PAIR}\tlabel\n0\t{long_text}\tb\t1\n1\tc\td\t0\n")
    limit = csv.field_size_limit(131_072)  # the default, as a fresh process has it
    try:
        (example, _) = glue.get_task("wnli").read(str(tmp_path), "dev")
    finally:
        csv.field_size_limit(max(limit, csv.field_size_limit()))
    assert example.text_a == long_text
