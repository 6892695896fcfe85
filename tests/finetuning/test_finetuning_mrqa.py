"""MRQA tasks: the shared task's files (gzipped and plain), the original's preprocessing,
the official MRQA scoring, the eval_mrqa command, and one-line errors."""

import gzip
import json
import logging

import numpy as np
import pytest
from helpers import WORDS, tiny_vocab_tokens, write_vocab

from electra_tf.core.errors import InputError, TaskDataError
from electra_tf.tasks import mrqa_eval
from electra_tf.tasks.mrqa import MrqaTask
from electra_tf.tasks.registry import get_task
from electra_tf.text.tokenizer import Tokenizer

L, STRIDE = 32, 8
SHORT = "Hello  World,\tthe Café   sells 中国人 tea.\nDéjà vu!"
LONG_WORDS = [WORDS[(7 * i) % len(WORDS)] for i in range(80)]  # one token per word
LONG = " ".join(LONG_WORDS)
HEADER = {"header": {"dataset": "Toy", "split": "train"}}


def _detected(context, text, at=None, nth=0):
    start = context.index(text) if at is None else at
    for _ in range(nth):
        start = context.index(text, start + 1)
    return {"text": text, "char_spans": [[start, start + len(text) - 1]],
            "token_spans": [[0, 0]]}


def _far():
    """Words 70..72 of LONG: outside the first windows of L=32, stride 8."""
    start = len(" ".join(LONG_WORDS[:70])) + 1
    text = " ".join(LONG_WORDS[70:73])
    assert LONG[start:start + len(text)] == text
    return {"text": text, "char_spans": [[start, start + len(text) - 1]]}, text


def paragraphs():
    far, far_text = _far()
    return [
        {"context": SHORT, "qas": [
            {"qid": "q-cafe", "question": "which cafe?", "answers": ["Café", "the cafe"],
             "detected_answers": [_detected(SHORT, "Café")]},
            {"qid": "q-cjk", "question": "中 国", "answers": ["中国"],
             "detected_answers": [_detected(SHORT, "中国")]},
            {"qid": "q-deja", "question": "deja?", "answers": ["Déjà vu", "deja vu!"],
             "detected_answers": [_detected(SHORT, "Déjà vu")]},
            # the original's check: the whitespace words, lower-cased, contain the text
            {"qid": "q-case", "question": "hello?", "answers": ["hello world"],
             "detected_answers": [{"text": "hello world", "char_spans": [[0, 11]]}]},
            # not at its char_spans: the original skips it in training
            {"qid": "q-moved", "question": "tea?", "answers": ["tea"],
             "detected_answers": [_detected(SHORT, "tea", at=SHORT.index("sells"))]},
            # inside a word whose pieces (d ##e ##j ##a) do not hold the answer's own
            # (e ##j ##a): the original trains on the whole word (_improve_answer_span)
            {"qid": "q-mid", "question": "deja?", "answers": ["éjà"],
             "detected_answers": [_detected(SHORT, "éjà")]},
        ]},
        {"context": LONG, "qas": [
            {"qid": "q-far", "question": "the model", "answers": [far_text, "elsewhere"],
             "detected_answers": [far]}]},
    ]


def write_mrqa(path, paras=None, gz=False, header=True):
    lines = ([json.dumps(HEADER)] if header else []) + \
        [json.dumps(p, ensure_ascii=False) for p in (paras or paragraphs())]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    path.write_bytes(gzip.compress(data) if gz else data)
    return str(path)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return Tokenizer(write_vocab(tmp_path_factory.mktemp("v") / "vocab.txt", tiny_vocab_tokens()))


@pytest.fixture(scope="module")
def task():
    return MrqaTask("newsqa", max_query_length=8, doc_stride=STRIDE, joint_prediction=False)


def test_gzipped_and_plain_files_read_alike(task, tmp_path, caplog):
    write_mrqa(tmp_path / "train.jsonl.gz", gz=True)
    (tmp_path / "plain").mkdir()
    write_mrqa(tmp_path / "plain" / "train.jsonl")
    with caplog.at_level(logging.WARNING):
        examples = task.read(str(tmp_path), "train")
    assert "1 question(s) skipped, as the original skips them" in caplog.text
    assert "q-moved" in caplog.text
    assert task.read(str(tmp_path / "plain"), "train") == examples
    assert task.read(str(tmp_path / "train.jsonl.gz"), "train") == examples  # a file as is
    assert [e.qas_id for e in examples] == ["q-cafe", "q-cjk", "q-deja", "q-case", "q-mid",
                                            "q-far"]
    cafe = examples[0]
    assert cafe.answers == (("Café", SHORT.index("Café")),) and cafe.gold == ("Café", "the cafe")
    # dev keeps every question: it is scored on its answers, not on a span
    write_mrqa(tmp_path / "dev.jsonl")
    dev = task.read(str(tmp_path), "dev")
    assert [e.qas_id for e in dev][4] == "q-moved" and dev[4].answers == ()


def test_only_the_header_line_is_skipped(task, tmp_path):
    """Every line holding a "header" key was skipped, a context with its questions too
    (from training and from eval_mrqa's gold answers alike)."""
    from electra_tf.tasks.mrqa_eval import read_answers

    paras = paragraphs()
    paras[1] = {**paras[1], "header": "section 2"}
    path = write_mrqa(tmp_path / "dev.jsonl", paras)
    every = [qa["qid"] for p in paras for qa in p["qas"]]
    assert [e.qas_id for e in task.read(str(tmp_path), "dev")] == every
    assert list(read_answers(path)) == every


def test_labels_point_at_the_answer_or_at_cls(task, tokenizer, tmp_path):
    write_mrqa(tmp_path / "train.jsonl")
    examples = task.read(str(tmp_path), "train")
    feats = task.featurize(examples, tokenizer, L)
    starts, ends = feats.labels["start_positions"], feats.labels["end_positions"]
    found = {}
    for r, w in enumerate(feats.extra):
        ex = examples[w.example_index]
        s, e = int(starts[r]), int(ends[r])
        if (s, e) == (0, 0):
            continue
        first = w.doc_start + s - w.context_offset
        last = w.doc_start + e - w.context_offset
        found.setdefault(ex.qas_id, []).append(ex.context[w.char_starts[first]:w.char_ends[last]])
    # Unicode offsets are characters: the spans are exactly the detected answers
    assert found["q-cafe"] == ["Café"] * len(found["q-cafe"])
    assert set(found["q-cjk"]) == {"中国"} and set(found["q-deja"]) == {"Déjà vu"}
    # its 11 characters' tokens, as the original's _improve_answer_span narrows the words
    # "Hello World," to the tokenized answer "hello world"
    assert set(found["q-case"]) == {"Hello  World"}
    assert set(found["q-mid"]) == {"Déjà"}
    far = [r for r, w in enumerate(feats.extra) if examples[w.example_index].qas_id == "q-far"]
    assert len(far) > 3 and 0 < len(found["q-far"]) < len(far)  # windows without it: [CLS]
    assert set(found["q-far"]) == {" ".join(LONG_WORDS[70:73])}
    assert all(starts[r] == ends[r] == 0 for r in far[:3])


def test_mrqa_official_scores():
    answers = {"a": ["Café", "the cafe"], "b": ["tea", "sells tea now"], "c": ["x"]}
    predictions = {"a": "The  Café!", "b": "sells tea"}
    # a: EM 1 (normalized "café"); b: F1 max(2/3 vs "tea", 0.8 vs "sells tea now"), EM 0
    skip = mrqa_eval.evaluate(answers, predictions, skip_no_answer=True)
    assert skip == pytest.approx({"exact_match": 50.0, "f1": 90.0})
    counted = mrqa_eval.evaluate(answers, predictions)  # the official default: c scores 0
    assert counted == pytest.approx({"exact_match": 100 / 3, "f1": 60.0})
    with pytest.raises(InputError, match="no question has a prediction"):
        mrqa_eval.evaluate(answers, {}, skip_no_answer=True)


def _perfect_outputs(feats):
    """Independent-head logits that pick each labelled window's gold span."""
    n = len(feats)
    start, end = np.zeros((n, L), np.float32), np.zeros((n, L), np.float32)
    for r in range(n):
        s, e = feats.labels["start_positions"][r], feats.labels["end_positions"][r]
        if s or e:
            start[r, s], end[r, e] = 10.0, 10.0
    return {"start_logits": start, "end_logits": end}


def test_predictions_are_keyed_by_qid_and_score_as_eval_mrqa(task, tokenizer, tmp_path):
    from helpers import run_module

    paras = paragraphs()
    paras[0]["qas"].pop(4)  # q-moved: no span to point the logits at
    data = write_mrqa(tmp_path / "dev.jsonl.gz", paras, gz=True)
    examples = task.read(data, "dev")
    feats = task.featurize(examples, tokenizer, L)
    preds = task.predictions(_perfect_outputs(feats), examples, feats)
    assert {q: p.answer for q, p in preds.items()} == {
        "q-cafe": "Café", "q-cjk": "中国", "q-deja": "Déjà vu", "q-case": "Hello  World",
        "q-mid": "Déjà", "q-far": " ".join(LONG_WORDS[70:73])}
    metrics = task.metrics(preds, examples)
    # q-mid's gold is "éjà": "deja" normalized is another word (EM 0, F1 0)
    assert metrics == pytest.approx({"f1": 500 / 6, "exact_match": 500 / 6})
    path = tmp_path / "newsqa_dev_predictions.json"
    task.write_predictions(preds, examples, str(path))
    proc = run_module("electra_tf.eval_mrqa", f"--data_file={data}", f"--predictions={path}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == pytest.approx(metrics)


def test_eval_mrqa_bad_input_is_one_line(tmp_path):
    from helpers import error_line, run_module

    data = write_mrqa(tmp_path / "dev.jsonl")
    (tmp_path / "p.json").write_text(json.dumps({"q-cafe": "Café", "q-other": "x"}))
    proc = run_module("electra_tf.eval_mrqa", f"--data_file={data}",
                      f"--predictions={tmp_path / 'p.json'}")
    error_line(proc, "1 prediction(s) for questions", "'q-other'", "not this data's predictions")
    # an empty object: refused, as eval_squad refuses it (it had scored 0, status 0)
    (tmp_path / "none.json").write_text("{}")
    with pytest.raises(InputError, match=r"none.json: no predictions \(an empty object\); not "
                                         rf"{data}'s predictions$"):
        mrqa_eval.evaluate_files(str(data), str(tmp_path / "none.json"))


def test_eval_mrqa_counts_the_questions_without_a_prediction(tmp_path):
    """They scored 0 without a word (the official script printed a line for each)."""
    from helpers import run_module

    data = write_mrqa(tmp_path / "dev.jsonl")
    answers = mrqa_eval.read_answers(data)
    first = next(iter(answers))
    (tmp_path / "p.json").write_text(json.dumps({first: answers[first][0]}))
    for skip, what in (("false", "scored 0, as the official script scores them"),
                       ("true", "left out (--skip_no_answer)")):
        proc = run_module("electra_tf.eval_mrqa", f"--data_file={data}",
                          f"--predictions={tmp_path / 'p.json'}", f"--skip_no_answer={skip}")
        assert proc.returncode == 0, proc.stderr[-2000:]
        second = list(answers)[1]
        assert (f"[eval_mrqa] {len(answers) - 1} of {len(answers)} questions have no "
                f"prediction (e.g. {second!r}): {what}") in proc.stderr
        scores = json.loads(proc.stdout.strip().splitlines()[-1])
        assert scores["exact_match"] == pytest.approx(
            100.0 if skip == "true" else 100.0 / len(answers))


def test_the_reader_holds_one_line_at_a_time(tmp_path):
    """A whole-file read (bytes, text and lines at once) had peaked at three times the
    file; lines are read one at a time, plain or gzipped."""
    import tracemalloc

    context = " ".join(WORDS * 40)
    para = {"context": context, "qas": [{"qid": "q", "question": "a", "answers": ["a"]}]}
    line = json.dumps(para)
    for gz in (False, True):
        path = tmp_path / ("big.jsonl.gz" if gz else "big.jsonl")
        payload = (json.dumps(HEADER) + "\n" + (line + "\n") * 400).encode()
        path.write_bytes(gzip.compress(payload) if gz else payload)
        tracemalloc.start()
        count = sum(1 for _ in mrqa_eval.json_lines(str(path)))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert count == 400 and len(payload) > 400 * len(line)
        assert peak < 20 * len(line) + (1 << 20), (gz, peak, len(payload))


def test_predictions_holding_line_separators_are_read(tmp_path):
    """run_finetuning writes predictions with ensure_ascii=False: a raw U+2028 in an
    answer had split the file's line and made it malformed JSON."""
    from electra_tf.tasks.mrqa_eval import read_predictions

    path = tmp_path / "p.json"
    path.write_text(json.dumps({"q1": "a\u2028b\u0085c", "q2": "d"}, ensure_ascii=False,
                               indent=1), encoding="utf-8")
    assert read_predictions(str(path)) == {"q1": "a\u2028b\u0085c", "q2": "d"}


@pytest.mark.parametrize("case", [
    "malformed_json", "not_an_object", "no_qas", "no_qid", "repeated_qid", "empty_answers",
    "answers_not_strings", "no_detected_answers", "bad_char_spans", "span_outside_context",
    "damaged_gzip", "corrupt_gzip", "deep_json", "not_utf8", "header_only", "missing_file",
    "both_formats", "all_skipped", "cr_line_ends"])
def test_bad_mrqa_files_are_one_line_naming_file_and_line(task, tmp_path, case):
    paras = paragraphs()
    qa = paras[0]["qas"][0]
    split, name = "train", "train.jsonl"
    expected = {
        "no_qas": r"train.jsonl:2: missing key 'qas'",
        "no_qid": r"train.jsonl:2: question 0: missing key 'qid'",
        "repeated_qid": r"train.jsonl:3: question 'q-cafe': the qid repeats",
        "empty_answers": r"dev.jsonl:2: question 'q-cafe': 'answers' must be a non-empty list",
        "answers_not_strings": r"train.jsonl:2: question 'q-cafe': 'answers' must be a "
                               r"non-empty list of strings",
        "no_detected_answers": r"train.jsonl:2: question 'q-cafe': missing key "
                               r"'detected_answers'",
        "bad_char_spans": r"train.jsonl:2: question 'q-cafe': detected answer 0: 'char_spans' "
                          r"must be a non-empty list of \[start, end\]",
        "span_outside_context": r"train.jsonl:2: question 'q-cafe': detected answer 0 starts "
                                r"at character 999, outside the context's 48 characters",
        "malformed_json": r"train.jsonl:3:\d+: malformed JSON",
        "deep_json": r"train.jsonl:2: unreadable JSON \(nested too deeply\)",
        "not_an_object": r"train.jsonl:2: expected a JSON object",
        "damaged_gzip": r"train.jsonl.gz: a damaged gzip file",
        "corrupt_gzip": r"train.jsonl.gz: a damaged gzip file",
        "not_utf8": r"train.jsonl:2: not UTF-8 \(invalid start byte at byte 0 of the line\)",
        "header_only": r"train.jsonl: no questions \(empty split\)",
        "missing_file": r"no train.jsonl.gz or train.jsonl",
        "both_formats": r"holds both train.jsonl.gz and train.jsonl",
        "all_skipped": r"train.jsonl: no questions \(1 skipped: their answers are not at "
                       r"their char_spans\)",
        # (had been a bare "malformed JSON: Extra data")
        "cr_line_ends": r"train.jsonl:1:\d+: malformed JSON: Extra data \(its lines end in "
                        r"\\r alone, which reads as one line: save it with \\n line ends\)",
    }[case]
    if case == "no_qas":
        del paras[0]["qas"]
    elif case == "no_qid":
        del qa["qid"]
    elif case == "repeated_qid":
        paras[1]["qas"][0]["qid"] = "q-cafe"
    elif case == "empty_answers":
        qa["answers"], split, name = [], "dev", "dev.jsonl"
    elif case == "answers_not_strings":
        qa["answers"] = [{"text": "Café"}]
    elif case == "no_detected_answers":
        del qa["detected_answers"]
    elif case == "bad_char_spans":
        qa["detected_answers"][0]["char_spans"] = [[1]]
    elif case == "span_outside_context":
        qa["detected_answers"][0]["char_spans"] = [[999, 1002]]
    elif case == "all_skipped":
        paras = [{"context": SHORT, "qas": [paras[0]["qas"][4]]}]
    if case == "missing_file":
        pass
    elif case == "malformed_json":
        write_mrqa(tmp_path / name, paras)
        with open(tmp_path / name, "a") as f:
            f.write('{"context": "x", "qas": [\n')
        text = (tmp_path / name).read_text().splitlines()
        (tmp_path / name).write_text("\n".join(text[:2] + [text[-1]] + text[2:-1]) + "\n")
    elif case == "not_an_object":
        (tmp_path / name).write_text(json.dumps(HEADER) + "\n[1, 2]\n")
    elif case == "cr_line_ends":
        (tmp_path / name).write_bytes("\r".join(json.dumps(x) for x in [HEADER] + paras)
                                      .encode())
    elif case == "damaged_gzip":
        name = "train.jsonl.gz"
        data = gzip.compress(b"x" * 1000)
        (tmp_path / name).write_bytes(data[:len(data) // 2])
    elif case == "corrupt_gzip":  # whole, its deflate stream damaged: zlib's own error
        name = "train.jsonl.gz"
        data = gzip.compress(b"x" * 1000)
        (tmp_path / name).write_bytes(data[:10] + b"\xff" * 20 + data[30:])
    elif case == "deep_json":
        (tmp_path / name).write_text(json.dumps(HEADER) + "\n" + "[" * 100_000 + "\n")
    elif case == "not_utf8":
        (tmp_path / name).write_bytes(json.dumps(HEADER).encode() + b"\n\xff\xfe\n")
    elif case == "header_only":
        write_mrqa(tmp_path / name, [{"context": SHORT, "qas": []}])
    elif case == "both_formats":
        write_mrqa(tmp_path / name, paras)
        write_mrqa(tmp_path / "train.jsonl.gz", paras, gz=True)
    else:
        write_mrqa(tmp_path / name, paras)
    with pytest.raises(TaskDataError, match=expected) as error:
        task.read(str(tmp_path), split)
    assert "\n" not in str(error.value)


def test_mrqa_task_names_and_the_originals_defaults():
    for name in ("newsqa", "triviaqa", "searchqa", "mrqa"):
        t = get_task(name)
        assert (t.name, t.head, t.answerable, t.default_max_seq_length, t.default_epochs) == \
            (name, "squad", False, 512, 2)
        assert t.metric_names == ("f1", "exact_match")
    # configure_finetuning.py: no "qa" in "naturalqs", so the GLUE defaults
    t = get_task("naturalqs")
    assert (t.default_max_seq_length, t.default_epochs) == (128, 3)
    assert get_task("triviaqa", joint_prediction=False).head_options["span_head"] == \
        "independent"


def test_mrqa_flagfile_is_the_qa_setting_for_each_task():
    from helpers import finetuning_from_flags

    for name in ("newsqa", "naturalqs"):
        task, config, _ = finetuning_from_flags(
            "--flagfile=configs/mrqa.flags", f"--task_name={name}", "--init_checkpoint=m",
            "--data_dir=d", "--model_dir=o")
        assert (task.name, config.max_seq_length, config.num_train_epochs) == (name, 512, 2)
        assert task.head_options == {"span_head": "joint", "beam_size": 20}


def _toy_mrqa_dir(folder):
    """newsqa's layout (train.jsonl.gz, dev.jsonl.gz): the answer is the word 'replaced';
    dev questions also accept 'the replaced token'."""
    import random

    rng = random.Random(5)
    folder.mkdir()
    words = [w for w in WORDS if w != "replaced"]
    for split, n in (("train", 160), ("dev", 24)):
        paras = []
        for i in range(n):
            context = [rng.choice(words) for _ in range(rng.randint(4, 9))]
            context.insert(rng.randint(0, len(context)), "replaced")
            text = " ".join(context)
            paras.append({"context": text, "qas": [{
                "qid": f"{split}-{i}", "question": "which token was replaced ?",
                "answers": ["replaced", "the replaced token"],
                "detected_answers": [_detected(text, "replaced")]}]})
        write_mrqa(folder / f"{split}.jsonl.gz", paras, gz=True)
    return str(folder)


@pytest.mark.slow
def test_newsqa_learns_toy_data_and_exports_the_squad_signature(pretrained_dir, tmp_path):
    """run_finetuning --task_name=newsqa: dev predictions keyed by qid and scored by the
    MRQA evaluation; the folder exports with --task=squad and answers a question."""
    import tensorflow as tf
    from helpers import finetune

    from electra_tf.serving.export import export, load_spec

    data = _toy_mrqa_dir(tmp_path / "newsqa")
    out = tmp_path / "out"
    finetune("--task_name=newsqa", f"--init_checkpoint={pretrained_dir}", f"--data_dir={data}",
             f"--model_dir={out}", "--num_train_epochs=3", "--learning_rate=3e-3",
             "--train_batch_size=16", "--max_seq_length=24")
    results = json.load(open(out / "results.json"))
    dev = results["epoch_3"]["dev"]
    assert set(dev) >= {"f1", "exact_match"} and dev["f1"] >= 90.0, results
    predictions = json.load(open(out / "newsqa_dev_predictions.json"))
    assert sorted(predictions) == sorted(f"dev-{i}" for i in range(24))
    assert mrqa_eval.evaluate_files(f"{data}/dev.jsonl.gz",
                                    str(out / "newsqa_dev_predictions.json"),
                                    skip_no_answer=True) == pytest.approx(
        {"f1": dev["f1"], "exact_match": dev["exact_match"]})
    path = export(load_spec("squad", str(out)), str(tmp_path / "models"), "newsqa")
    served = tf.saved_model.load(path).signatures["serving_default"](
        question=tf.constant(["which token was replaced ?"]),
        context=tf.constant(["the model reads a replaced token"]))
    assert served["answer_text"].numpy()[0].decode() == "replaced"
