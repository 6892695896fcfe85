"""SQuAD scoring: reads and checks the official files, runs the official v1.1 / v2.0 evaluators.

    result = evaluate_files("2.0", "dev-v2.0.json", "predictions.json", "null_odds.json")

`official_evaluate` runs tf-models-official's copies of the official scripts
(official/nlp/tools/squad_evaluate_v1_1.py and squad_evaluate_v2_0.py). v1.1
returns that copy's dict unchanged; mind its scale: fractions
({"exact_match": 0.81, "final_f1": 0.88}) where the codalab script printed
percentages, which `evaluate_files` (the command line) prints, under that
script's names ({"exact_match": 81.0, "f1": 88.0}). v2.0 returns percentages
under the official evaluate-v2.0.py's
names: "exact", "f1", "total", "HasAns_*", "NoAns_*" and, only when null odds
are given, the best-threshold "best_exact", "best_exact_thresh", "best_f1",
"best_f1_thresh" (tf-models' copy names them "final_*" and computes them
without null odds too), followed by tf-models' precision-recall "pr_*" APs
(which the official script writes only with --out-image-dir). The
best-threshold search walks the questions by null odds with a stable sort,
so ties keep the null-odds file's order, as in the official script. With null
odds, "exact"/"f1" (and HasAns/NoAns) count an answer as "" where its null odds
are above `na_prob_thresh`: the official script's -t, 1.0 unless given.

v2.0 scores only the questions that have a prediction (tf-models' copy drops
the others from the data; the official script raises KeyError when a
question has no prediction); v1.1 scores a missing one as 0. `evaluate_files`
(the command line) says how many are missing in one line, and refuses
predictions for questions the data does not hold, as eval_mrqa does (the
official scripts ignore them).

Bad files (missing, malformed JSON, wrong structure, predictions or null odds
that do not fit the data) raise `errors.InputError` with a message naming the
file. `finetuning.squad` reads its data with `read_squad_json` and scores with
`official_evaluate`; `python -m electra_tf.eval_squad` is the command line.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys

from electra_tf.core.errors import InputError
from electra_tf.core.fileio import check_input_file, parse_json, utf16_hint
from electra_tf.tasks import mrqa_eval


def read_json(path: str, what: str, unique_keys: bool = False):
    """(raw text, parsed JSON). Raises InputError naming the file (and line:column);
    `unique_keys`: also a key twice in one object (fileio.parse_json)."""
    check_input_file(path, what)
    try:
        with open(path, "rb") as f:
            data = f.read()
        hint = utf16_hint(data)
        if hint:  # (without a byte-order mark, valid UTF-8)
            raise InputError(f"{path}:1: not UTF-8 text{hint}")
        raw = data.decode("utf-8")
    except UnicodeDecodeError as e:  # (at its line, as the other readers say)
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(f"{path}:{line}: not UTF-8 ({e.reason} at byte {e.start}); "
                         "convert the file to UTF-8") from None
    except OSError as e:  # unreadable (permissions), or a failing disk (EIO)
        raise InputError(f"{path}: cannot read it ({e.strerror or e})") from None
    return raw, parse_json(raw, path, unique_keys=unique_keys)


def read_squad_json(path: str) -> tuple[str, list]:
    """An official SQuAD file -> (raw text, its "data" list of articles)."""
    raw, obj = read_json(path, "SQuAD data")
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
        raise InputError(f"{path}: not a SQuAD file: expected an object "
                         '{"version": ..., "data": [articles]}')
    return raw, obj["data"]


def check_dataset(data: list, path: str, version: str) -> None:
    """What the official evaluators read: paragraphs, qas, id, answers[].text; each id
    once (the v1.1 evaluator would score a repeated id twice, v2.0's once)."""
    seen = set()
    for a, article in enumerate(data):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise InputError(f"{path}: article {a} has no 'paragraphs' list")
        for p, paragraph in enumerate(paragraphs):
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(qas, list):
                raise InputError(f"{path}: article {a} paragraph {p} has no 'qas' list")
            for q, qa in enumerate(qas):
                if not isinstance(qa, dict) or "id" not in qa:
                    raise InputError(
                        f"{path}: article {a} paragraph {p} question {q} has no 'id'")
                if not isinstance(qa["id"], str):  # (it had been told it has none)
                    raise InputError(
                        f"{path}: article {a} paragraph {p} question {q}: its 'id' must be "
                        f"a string, got {json.dumps(qa['id'])}")
                if qa["id"] in seen:
                    raise InputError(f"{path}: article {a} paragraph {p} question {q}: the "
                                     f"question id {qa['id']!r} repeats")
                seen.add(qa["id"])
                answers = qa.get("answers")
                if not isinstance(answers, list) or not all(
                        isinstance(x, dict) and isinstance(x.get("text"), str) for x in answers):
                    raise InputError(f"{path}: question id {qa['id']!r}: 'answers' must be "
                                     'a list of {"text": ...}')
                if version == "1.1" and not answers:
                    raise InputError(f"{path}: question id {qa['id']!r} has no answers; "
                                     "a SQuAD 2.0 file? (use --version=2.0)")


def check_predictions(obj, path: str) -> dict[str, str]:
    """The predictions JSON, checked to be {question id: answer text}."""
    if not isinstance(obj, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in obj.items()):
        raise InputError(f"{path}: predictions must be a JSON object "
                         "{question id: answer text}")
    return obj


def _finite(value) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond a float's range
        return False


def check_null_odds(obj, path: str, predictions: dict[str, str]) -> dict[str, float]:
    """The null-odds JSON, checked: a finite number for every predicted question.

    Returns the predicted questions' odds in the FILE's order: the official
    best-threshold search breaks ties between equal odds by that order.
    """
    if not isinstance(obj, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and _finite(v)
            for v in obj.values()):
        raise InputError(f"{path}: null odds must be a JSON object "
                         "{question id: finite number}")
    missing = [q for q in predictions if q not in obj]
    if missing:
        raise InputError(f"{path}: no null odds for {len(missing)} predicted question(s), "
                         f"e.g. {missing[0]!r}")
    return {q: float(v) for q, v in obj.items() if q in predictions}


def official_evaluate(version: str, dataset: list, predictions: dict[str, str],
                      null_odds: dict[str, float] | None = None,
                      na_prob_thresh: float = 1.0) -> dict:
    """The official evaluator's result dict (see the module docstring for its keys).

    Args:
      version: "1.1" or "2.0".
      dataset: the official JSON's "data" list.
      predictions: {question id: answer text}.
      null_odds: 2.0 only, {question id: null odds} for every predicted id; its
        order breaks ties in the best-threshold search (the official script's
        stable sort), so pass it in the null-odds file's order.
      na_prob_thresh: with null_odds, the official script's -t: an answer whose
        null odds are above it is scored as "no answer" in exact/f1 (inf: none is).
    """
    if version == "1.1":
        from official.nlp.tools import squad_evaluate_v1_1

        if null_odds is not None:
            raise InputError("null odds are for SQuAD 2.0 only")
        return dict(squad_evaluate_v1_1.evaluate(dataset, predictions))
    from official.nlp.tools import squad_evaluate_v2_0

    # tf-models' copy always runs the precision-recall analysis, which fails on a
    # predicted id that the data lacks; the official script ignores such ids.
    qids = {qa["id"] for article in dataset for p in article["paragraphs"] for qa in p["qas"]}
    predictions = {q: a for q, a in predictions.items() if q in qids}
    if null_odds is not None:
        missing = [q for q in predictions if q not in null_odds]
        if missing:
            raise InputError(f"no null odds for {len(missing)} predicted question(s), "
                             f"e.g. {missing[0]!r}")
        null_odds = {q: v for q, v in null_odds.items() if q in predictions}
    result = dict(_evaluate_v2(squad_evaluate_v2_0, dataset, predictions, null_odds,
                               na_prob_thresh))
    # The official names; without null odds the official script has no
    # best-threshold (nor precision-recall) scores.
    return {_OFFICIAL_V2_NAMES.get(k, k): v for k, v in result.items()
            if null_odds is not None or not k.startswith(("final_", "pr_"))}


def _evaluate_v2(ev, dataset, predictions, na_probs, na_prob_thresh):
    """tf-models' squad_evaluate_v2_0.evaluate, step for step, with the official
    script's -t (the copy fixes it at its default, 1.0)."""
    dataset = [{"paragraphs": [{"qas": [qa]}]} for article in dataset
               for p in article["paragraphs"] for qa in p["qas"] if qa["id"] in predictions]
    if na_probs is None:
        na_probs = {k: 0.0 for k in predictions}
    qid_to_has_ans = ev._make_qid_to_has_ans(dataset)
    has_ans_qids = [k for k, v in qid_to_has_ans.items() if v]
    no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v]
    exact_raw, f1_raw = ev._get_raw_scores(dataset, predictions)
    exact_thresh = ev._apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans,
                                              na_prob_thresh)
    f1_thresh = ev._apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    out_eval = ev._make_eval_dict(exact_thresh, f1_thresh)
    if has_ans_qids:
        ev._merge_eval(out_eval, ev._make_eval_dict(exact_thresh, f1_thresh,
                                                    qid_list=has_ans_qids), "HasAns")
    if no_ans_qids:
        ev._merge_eval(out_eval, ev._make_eval_dict(exact_thresh, f1_thresh,
                                                    qid_list=no_ans_qids), "NoAns")
    ev._find_all_best_thresh(out_eval, predictions, exact_raw, f1_raw, na_probs,
                             qid_to_has_ans)
    ev._run_precision_recall_analysis(out_eval, exact_raw, f1_raw, na_probs, qid_to_has_ans)
    return out_eval


_OFFICIAL_V2_NAMES = {"final_exact": "best_exact", "final_exact_thresh": "best_exact_thresh",
                      "final_f1": "best_f1", "final_f1_thresh": "best_f1_thresh"}


def evaluate_files(version: str, data_file: str, predictions_file: str,
                   null_odds_file: str | None = None, na_prob_thresh: float = 1.0) -> dict:
    """Reads and checks the three files, then runs the official evaluator (v1.1: its
    numbers as the official script prints them, percentages)."""
    if math.isnan(na_prob_thresh):
        raise InputError("--na_prob_thresh is not a number")
    _, data = read_squad_json(data_file)
    check_dataset(data, data_file, version)
    predictions = check_predictions(
        read_json(predictions_file, "predictions", unique_keys=True)[1], predictions_file)
    null_odds = None
    if null_odds_file:
        if version != "2.0":
            raise InputError("--null_odds is for --version=2.0 only")
        null_odds = check_null_odds(read_json(null_odds_file, "null odds", unique_keys=True)[1],
                                    null_odds_file, predictions)
    qids = [qa["id"] for article in data for p in article["paragraphs"] for qa in p["qas"]]
    if not qids:
        raise InputError(f"{data_file}: no questions")
    known = set(qids)
    if not any(q in known for q in predictions):
        raise InputError(f"{predictions_file}: none of its question ids is in {data_file}")
    # As eval_mrqa: the official scripts ignore predictions for other questions, silently
    missing = mrqa_eval.check_predictions(dict.fromkeys(qids), predictions, data_file,
                                          predictions_file)
    if missing:  # (v1.1's evaluator logged a line for each)
        what = ("scored 0, as the official v1.1 script scores them" if version == "1.1" else
                "left out, as tf-models-official's v2.0 evaluator leaves them")
        print(f"[eval_squad] {len(missing)} of {len(qids)} questions have no prediction "
              f"(e.g. {missing[0]!r}): {what}", file=sys.stderr)
    with _quiet_absl():
        result = official_evaluate(version, data, predictions, null_odds, na_prob_thresh)
    if version == "1.1":  # the official evaluate-v1.1.py's names and scale
        return {"exact_match": 100.0 * result["exact_match"], "f1": 100.0 * result["final_f1"]}
    return result


@contextlib.contextmanager
def _quiet_absl():
    """absl's logging above errors only: the v1.1 evaluator logs an error line for each
    question without a prediction (said above in one line)."""
    from absl import logging

    level = logging.get_verbosity()
    logging.set_verbosity(logging.FATAL)
    try:
        yield
    finally:
        logging.set_verbosity(level)
