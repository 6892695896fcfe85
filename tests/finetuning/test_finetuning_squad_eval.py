"""squad_eval and the eval_squad CLI: the official evaluators' numbers on random
predictions, and clear errors."""

import json
import random

import pytest
from helpers import WORDS, run_module
from official.nlp.tools import squad_evaluate_v1_1, squad_evaluate_v2_0


def random_squad(v2: bool, seed: int = 0, num_paragraphs: int = 4, num_qas: int = 5):
    """Random contexts of corpus words, 1..3 gold answers each (none when impossible)."""
    rng = random.Random(seed)
    data, qid = [], 0
    for _ in range(num_paragraphs):
        words = [rng.choice(WORDS).capitalize() if rng.random() < 0.2 else rng.choice(WORDS)
                 for _ in range(40)]
        context = " ".join(words) + "."
        qas = []
        for _ in range(num_qas):
            answers = []
            impossible = v2 and rng.random() < 0.3
            for _ in range(0 if impossible else rng.randint(1, 3)):
                i = rng.randrange(len(words) - 4)
                text = " ".join(words[i:i + rng.randint(1, 4)])
                answers.append({"text": text, "answer_start": context.index(text)})
            qa = {"id": f"q{qid}", "question": "which token?", "answers": answers}
            if v2:
                qa["is_impossible"] = impossible
            qas.append(qa)
            qid += 1
        data.append({"title": "t", "paragraphs": [{"context": context, "qas": qas}]})
    return {"version": "v2.0" if v2 else "1.1", "data": data}


def random_predictions(dataset, seed: int = 1):
    rng = random.Random(seed)
    preds, odds = {}, {}
    for article in dataset["data"]:
        for p in article["paragraphs"]:
            words = p["context"].split()
            for qa in p["qas"]:
                r = rng.random()
                if r < 0.3 and qa["answers"]:
                    preds[qa["id"]] = rng.choice(qa["answers"])["text"]
                elif r < 0.45:
                    preds[qa["id"]] = ""
                elif r < 0.95:
                    i = rng.randrange(len(words))
                    preds[qa["id"]] = "the " + " ".join(words[i:i + rng.randint(1, 5)])
                odds[qa["id"]] = rng.uniform(-3, 3)
    return preds, {q: odds[q] for q in preds}


_OFFICIAL = {"final_exact": "best_exact", "final_exact_thresh": "best_exact_thresh",
             "final_f1": "best_f1", "final_f1_thresh": "best_f1_thresh"}


def official_v2(dataset, preds, odds=None):
    """tf-models' v2.0 dict under the official script's names; without null odds the
    official script has no best-threshold (or precision-recall) keys."""
    result = squad_evaluate_v2_0.evaluate(dataset["data"], preds, odds)
    return {_OFFICIAL.get(k, k): v for k, v in result.items()
            if odds is not None or not k.startswith(("final_", "pr_"))}


def _files(tmp_path, dataset, preds, odds=None):
    paths = [tmp_path / "dev.json", tmp_path / "predictions.json", tmp_path / "null_odds.json"]
    for path, obj in zip(paths, (dataset, preds, odds)):
        if obj is not None:
            path.write_text(json.dumps(obj), "utf-8")
    return [str(p) for p in paths]


def _run(*args):
    proc = run_module("electra_tf.eval_squad", *args, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("version", ["1.1", "2.0"])
def test_equals_the_official_evaluators(tmp_path, version):
    from electra_tf.tasks.squad_eval import evaluate_files

    dataset = random_squad(version == "2.0")
    preds, odds = random_predictions(dataset)
    assert 0 < len(preds) < 20  # some questions are left unanswered
    files = _files(tmp_path, dataset, preds, odds if version == "2.0" else None)
    if version == "1.1":  # tf-models' v1.1 copy returns fractions; the codalab script
        fractions = squad_evaluate_v1_1.evaluate(dataset["data"], preds)  # printed percent
        expected = {"exact_match": 100 * fractions["exact_match"],
                    "f1": 100 * fractions["final_f1"]}
        got = evaluate_files(version, *files[:2])
        assert 0 < got["f1"] < 100
    else:
        expected = official_v2(dataset, preds, odds)
        got = evaluate_files(version, *files)
        assert 0 < got["best_f1"] < 100 and "pr_f1_ap" in got and "final_f1" not in got
    assert json.loads(json.dumps(got)) == dict(expected) and list(got) == list(expected)


def test_v2_null_odds_above_the_threshold_count_as_no_answer(tmp_path):
    """As the official script's -n with its -t (default 1.0): an answer whose null odds
    are above the threshold scores as "no answer"; --na_prob_thresh sets it (inf: the
    submitted answers as they are, as a run's results.json scores them)."""
    from electra_tf.tasks.squad_eval import evaluate_files

    dataset = {"version": "v2.0", "data": [{"paragraphs": [{"context": "x y", "qas": [
        {"id": "q1", "question": "?", "answers": [{"text": "x", "answer_start": 0}]},
        {"id": "q2", "question": "?", "answers": [], "is_impossible": True}]}]}]}
    files = _files(tmp_path, dataset, {"q1": "x", "q2": ""}, {"q1": 1.5, "q2": 3.0})
    default = evaluate_files("2.0", *files)
    assert default == official_v2(dataset, {"q1": "x", "q2": ""}, {"q1": 1.5, "q2": 3.0})
    assert (default["exact"], default["HasAns_exact"]) == (50.0, 0.0)
    for thresh in (2.0, float("inf")):
        got = evaluate_files("2.0", *files, na_prob_thresh=thresh)
        assert (got["exact"], got["HasAns_exact"], got["NoAns_exact"]) == (100.0, 100.0, 100.0)
        assert {k: got[k] for k in got if k.startswith(("best_", "pr_"))} == {
            k: default[k] for k in default if k.startswith(("best_", "pr_"))}
    code, out, err = _run("--version=2.0", f"--data_file={files[0]}",
                          f"--predictions={files[1]}", f"--null_odds={files[2]}",
                          "--na_prob_thresh=2")
    assert code == 0, err
    assert json.loads(out)["exact"] == 100.0
    # without --null_odds the threshold does nothing: said so (it had been silent)
    code, out, err = _run("--version=2.0", f"--data_file={files[0]}",
                          f"--predictions={files[1]}", "--na_prob_thresh=2")
    assert code == 0 and json.loads(out)["exact"] == 100.0, err
    assert err.strip().splitlines()[-1] == ("note: --na_prob_thresh=2 applies with "
                                            "--null_odds only (every answer as submitted "
                                            "is scored)")
    # a threshold that is no number: its refusal alone (a note had come first)
    code, out, err = _run("--version=2.0", f"--data_file={files[0]}",
                          f"--predictions={files[1]}", "--na_prob_thresh=nan")
    assert code == 2 and err.strip().splitlines() == [
        "error: --na_prob_thresh is not a number"], err


def test_v2_best_threshold_ties_keep_the_null_odds_file_order(tmp_path):
    """The official find_best_thresh walks sorted(na_probs): a stable sort, so equal
    odds keep the null-odds file's order, here q2 before q1 (the predictions file
    has q1 first). By hand: 1 no-answer question -> start at 1 correct; q2 (no
    answer, answered "x") -> 0; q1 (answered right) -> 1, no better than the
    start: best 1 / 2 = 50% at threshold 0.0. In the predictions' order q1 would
    come first (2 correct: 100% at 0.5)."""
    from electra_tf.tasks.squad_eval import evaluate_files

    dataset = {"version": "v2.0", "data": [{"paragraphs": [{"context": "a b", "qas": [
        {"id": "q1", "question": "?", "answers": [{"text": "a", "answer_start": 0}]},
        {"id": "q2", "question": "?", "answers": [], "is_impossible": True}]}]}]}
    files = _files(tmp_path, dataset, {"q1": "a", "q2": "x"}, {"q2": 0.5, "q1": 0.5})
    got = evaluate_files("2.0", *files)
    assert {k: got[k] for k in ("exact", "f1", "HasAns_exact", "NoAns_exact")} == {
        "exact": 50.0, "f1": 50.0, "HasAns_exact": 100.0, "NoAns_exact": 0.0}
    assert {k: got[k] for k in ("best_exact", "best_exact_thresh", "best_f1",
                                "best_f1_thresh")} == {
        "best_exact": 50.0, "best_exact_thresh": 0.0, "best_f1": 50.0, "best_f1_thresh": 0.0}
    without = evaluate_files("2.0", *files[:2])
    assert not any(k.startswith(("best_", "final_", "pr_")) for k in without)


def test_the_files_score_as_the_official_json(tmp_path):
    """What eval_squad's main prints (as one JSON line), in this process."""
    from electra_tf.tasks.squad_eval import evaluate_files

    dataset = random_squad(True, seed=5)
    preds, odds = random_predictions(dataset, seed=6)
    data, pred_file, odds_file = _files(tmp_path, dataset, preds, odds)
    out = json.dumps(evaluate_files("2.0", data, pred_file, odds_file))
    assert json.loads(out) == official_v2(dataset, preds, odds)
    # files a Windows editor saved, with a byte-order mark, score the same (they had
    # been "malformed JSON: Unexpected UTF-8 BOM (decode using utf-8-sig)")
    for path in (data, pred_file, odds_file):
        with open(path, "rb") as f:
            text = f.read()
        with open(path, "wb") as f:
            f.write(b"\xef\xbb\xbf" + text)
    assert evaluate_files("2.0", data, pred_file, odds_file) == json.loads(out)


def test_official_evaluate_without_null_odds_and_extra_ids():
    from electra_tf.tasks.squad_eval import official_evaluate

    dataset = random_squad(True, seed=3)
    preds, _ = random_predictions(dataset, seed=4)
    # An id the data lacks is ignored, as the official script does; no null odds:
    # no best-threshold keys.
    got = official_evaluate("2.0", dataset["data"], {**preds, "stray": "x"})
    assert got == official_v2(dataset, preds) and "best_f1" not in got


def test_bad_files_are_clear(tmp_path):
    from electra_tf.core.errors import InputError
    from electra_tf.tasks.squad_eval import evaluate_files

    v1, v2 = random_squad(False), random_squad(True)
    preds, odds = random_predictions(v2)
    data, pred_file, odds_file = _files(tmp_path, v2, preds, {**odds, "q0": "high"})
    (tmp_path / "broken.json").write_text('{"q0": "a",\n "q1": }', "utf-8")
    (tmp_path / "v1.json").write_text(json.dumps(v1), "utf-8")
    (tmp_path / "list.json").write_text(json.dumps(["a", "b"]), "utf-8")
    (tmp_path / "partial.json").write_text(json.dumps({q: 0.0 for q in list(preds)[1:]}), "utf-8")
    (tmp_path / "nodata.json").write_text(json.dumps({"data": [{"title": "x"}]}), "utf-8")
    (tmp_path / "strays.json").write_text(json.dumps({"zz": "a"}), "utf-8")
    (tmp_path / "twice.json").write_text('{"q0": "a", "q0": "b"}', "utf-8")
    repeated = json.loads(json.dumps(v1))
    first = repeated["data"][0]["paragraphs"][0]["qas"]
    first.append(dict(first[0]))
    (tmp_path / "repeated.json").write_text(json.dumps(repeated), "utf-8")
    # a number as an id (it had been told it has none)
    numbered = json.loads(json.dumps(v1))
    numbered["data"][0]["paragraphs"][0]["qas"][0]["id"] = 5
    (tmp_path / "numbered.json").write_text(json.dumps(numbered), "utf-8")
    cases = [
        ("1.1", f"{tmp_path}/numbered.json", pred_file, None,
         "article 0 paragraph 0 question 0: its 'id' must be a string, got 5"),

        ("2.0", f"{tmp_path}/none.json", pred_file, None, "SQuAD data file not found"),
        ("2.0", data, str(tmp_path), None, f"predictions {tmp_path} is a folder, not a file"),
        ("2.0", data, f"{tmp_path}/twice.json", None,
         f"{tmp_path}/twice.json: the key 'q0' repeats in one object"),
        ("2.0", data, f"{tmp_path}/broken.json", None, "broken.json:2:8: malformed JSON"),
        ("2.0", f"{tmp_path}/nodata.json", pred_file, None, "article 0 has no 'paragraphs'"),
        ("2.0", data, f"{tmp_path}/list.json", None, "predictions must be a JSON object"),
        ("2.0", data, pred_file, odds_file,
         "null odds must be a JSON object {question id: finite number}"),
        ("2.0", data, pred_file, f"{tmp_path}/partial.json",
         f"no null odds for 1 predicted question(s), e.g. {list(preds)[0]!r}"),
        ("1.1", f"{tmp_path}/v1.json", pred_file, odds_file, "--null_odds is for --version=2.0"),
        ("1.1", data, pred_file, None, "has no answers; a SQuAD 2.0 file? (use --version=2.0)"),
        # v1.1 scores a question without a prediction as 0, but none at all is a mismatch
        ("1.1", f"{tmp_path}/v1.json", f"{tmp_path}/strays.json", None,
         f"strays.json: none of its question ids is in {tmp_path}/v1.json"),
        ("1.1", f"{tmp_path}/repeated.json", pred_file, None,
         f"question {len(first) - 1}: the question id {first[0]['id']!r} repeats"),
    ]
    # predictions for questions the data lacks beside its own (the official scripts
    # ignore them, silently), as eval_mrqa refuses them
    (tmp_path / "extra.json").write_text(json.dumps({**preds, "zz": "a"}), "utf-8")
    # a Latin-1 byte on line 3: its line, as the other readers name it (it had been the
    # byte offset alone)
    (tmp_path / "latin1.json").write_bytes(b'{"q0": "a",\n "q1": "b",\n "q2": "caf\xe9"}')
    (tmp_path / "cut.json").write_text('{"q0": "a', "utf-8")  # a file cut short
    cases.append(("2.0", data, f"{tmp_path}/cut.json", None,  # (Python's "...starting at")
                  "cut.json:1:8: malformed JSON: Unterminated string (it starts there)"))
    cases.append(("2.0", data, f"{tmp_path}/latin1.json", None,
                  f"{tmp_path}/latin1.json:3: not UTF-8 (invalid continuation byte at byte "
                  "35); convert the file to UTF-8"))
    cases.append(("2.0", data, f"{tmp_path}/extra.json", None,
                  "extra.json: 1 prediction(s) for questions "))
    for version, data_file, predictions, null_odds, message in cases:
        with pytest.raises(InputError) as err:
            evaluate_files(version, data_file, predictions, null_odds)
        assert message in str(err.value)


def test_questions_without_a_prediction_are_one_line(tmp_path, capfd):
    """v1.1's evaluator logged an error line for each (scored 0); now one line says how
    many, with the score the official script's."""
    from electra_tf.tasks.squad_eval import evaluate_files, official_evaluate

    dataset = random_squad(False, seed=2)
    preds, _ = random_predictions(dataset, seed=3)
    kept = dict(list(preds.items())[2:])
    data, pred_file, _ = _files(tmp_path, dataset, kept)
    capfd.readouterr()
    got = evaluate_files("1.1", data, pred_file)
    lines = capfd.readouterr().err.splitlines()
    assert lines == [f"[eval_squad] 2 of {len(preds)} questions have no prediction (e.g. "
                     f"{list(preds)[0]!r}): scored 0, as the official v1.1 script scores them"]
    fractions = official_evaluate("1.1", dataset["data"], kept)
    assert got == {"exact_match": 100 * fractions["exact_match"],
                   "f1": 100 * fractions["final_f1"]}


def test_cli_error_exits_2_with_one_line(tmp_path):
    """The one command-line test of eval_squad."""
    data, pred_file, _ = _files(tmp_path, random_squad(True), {"q0": 1})
    rc, out, err = _run("--version=2.0", f"--data_file={data}", f"--predictions={pred_file}")
    # TensorFlow may log a line before it (cli imports it); ours is the last, no traceback.
    assert rc == 2 and out == "" and "Traceback" not in err, err
    assert err.splitlines()[-1] == (f"error: {pred_file}: predictions must be a JSON object "
                                    "{question id: answer text}")
