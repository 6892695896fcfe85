"""The MRQA 2019 shared task's official scoring (google-research/electra's
finetune/qa/mrqa_official_eval.py, itself the shared task's mrqa_official_eval.py).

    answers = read_answers("dev.jsonl.gz")            # {qid: [answer, ...]}
    evaluate(answers, {"qid-1": "the text"})          # {"exact_match": 100.0, "f1": 100.0}
    evaluate_files("dev.jsonl.gz", "predictions.json")

EM and F1 (percent) of each question are the maxima over its `answers` (the
answer strings, not `detected_answers`), after the SQuAD normalization (lower
case, punctuation and the articles a/an/the removed, whitespace collapsed). A
question without a prediction scores 0 and counts (the official script's
default), or is left out with `skip_no_answer` (what the original's
run_finetuning does: `evaluate(answers, predictions, True)`). The functions
below are the official script's, line for line; reading and checking the files
is electra_tf's (one-line errors naming the file and line).
"""

from __future__ import annotations

import gzip
import re
import string
import zlib
from collections import Counter

from electra_tf.core.errors import InputError
from electra_tf.core.fileio import check_input_file, parse_json, utf16_hint


# === The official script's scoring ===
def normalize_answer(s: str) -> str:
    """Lower text and remove punctuation, articles and extra whitespace."""
    def remove_articles(text):
        return re.sub(r'\b(a|an|the)\b', ' ', text)

    def white_space_fix(text):
        return ' '.join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return ''.join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def f1_score(prediction: str, ground_truth: str) -> float:
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def exact_match_score(prediction: str, ground_truth: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    return max(metric_fn(prediction, ground_truth) for ground_truth in ground_truths)


def evaluate(answers: dict[str, list[str]], predictions: dict[str, str],
             skip_no_answer: bool = False) -> dict[str, float]:
    """{"exact_match": EM, "f1": F1} in percent over the questions of `answers`.

    Raises:
      InputError: no question was scored (the official script divides by zero).
    """
    f1 = exact_match = total = 0
    for qid, ground_truths in answers.items():
        if qid not in predictions:
            if not skip_no_answer:
                total += 1
            continue
        total += 1
        prediction = predictions[qid]
        exact_match += metric_max_over_ground_truths(exact_match_score, prediction,
                                                     ground_truths)
        f1 += metric_max_over_ground_truths(f1_score, prediction, ground_truths)
    if total == 0:
        raise InputError("no question has a prediction: nothing to score")
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


# === Files ===
def iter_lines(path: str, what: str = "MRQA data"):
    """(line number, text) of an MRQA file's lines, gzipped (as distributed: .jsonl.gz)
    or plain, read one line at a time (a whole-file read of an uncompressed SearchQA
    or TriviaQA train file had held it three times over); gzip is recognised by its
    magic bytes, whatever the name. Lines end at "\\n" only (a "\\r" before it dropped):
    run_finetuning writes predictions with ensure_ascii=False.

    Raises:
      InputError: a missing or non-UTF-8 file (file:line), a truncated or damaged gzip
        file, naming it.
    """
    check_input_file(path, what)
    number, gzipped = 0, False
    try:
        raw = open(path, "rb")
    except OSError as e:
        raise InputError(f"{path}: cannot read it ({e.strerror or e})") from None
    with raw:
        try:
            gzipped = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            stream = gzip.GzipFile(fileobj=raw) if gzipped else raw
            for number, line in enumerate(stream, 1):
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise InputError(f"{path}:{number}: not UTF-8 ({e.reason} at byte "
                                     f"{e.start} of the line){utf16_hint(line)}") from None
                text = text[:-1] if text.endswith("\n") else text
                yield number, text[:-1] if text.endswith("\r") else text
        except (OSError, EOFError, zlib.error) as e:
            if not gzipped:  # unreadable (permissions), or a failing disk (EIO)
                raise InputError(f"{path}: cannot read it ({e.strerror or e})") from None
            raise InputError(f"{path}: a damaged gzip file ({e}; after line {number})") \
                from None


def open_lines(path: str, what: str = "MRQA data") -> list[str]:
    """iter_lines' texts as a list (a predictions file, read whole as one JSON object)."""
    return [text for _, text in iter_lines(path, what)]


def json_lines(path: str, what: str = "MRQA data"):
    """(line number, object) of every non-blank line of an MRQA file but its header.

    Raises:
      InputError: a malformed line or a line that is not an object (file:line).
    """
    for number, line in iter_lines(path, what):
        if not line.strip():
            continue
        obj = parse_json(line, path, first_line=number)
        if not isinstance(obj, dict):
            raise InputError(f"{path}:{number}: expected a JSON object (a context with its "
                             f"qas), got {type(obj).__name__}")
        if "header" in obj and "context" not in obj and "qas" not in obj:
            continue  # the first line of every MRQA file (a context holding a "header"
            # key is read: its questions had been dropped without a word)
        yield number, obj


def read_answers(path: str) -> dict[str, list[str]]:
    """{qid: answers} of an MRQA file (the official read_answers, checked)."""
    answers: dict[str, list[str]] = {}
    for number, example in json_lines(path):
        qas = example.get("qas")
        if not isinstance(qas, list):
            raise InputError(f"{path}:{number}: missing list 'qas'")
        for qa in qas:
            qid = qa.get("qid") if isinstance(qa, dict) else None
            gold = qa.get("answers") if isinstance(qa, dict) else None
            if not isinstance(qid, str):
                raise InputError(f"{path}:{number}: a question without a string 'qid'")
            if not isinstance(gold, list) or not gold or \
                    not all(isinstance(a, str) for a in gold):
                raise InputError(f"{path}:{number}: question {qid!r}: 'answers' must be a "
                                 "non-empty list of strings")
            if qid in answers:
                raise InputError(f"{path}:{number}: question {qid!r}: the qid repeats")
            answers[qid] = gold
    if not answers:
        raise InputError(f"{path}: no questions")
    return answers


def read_predictions(path: str) -> dict[str, str]:
    """{qid: answer text}. Raises InputError naming the file."""
    lines = open_lines(path, "predictions")
    predictions = parse_json("\n".join(lines), path, unique_keys=True)
    if not isinstance(predictions, dict) or \
            not all(isinstance(v, str) for v in predictions.values()):
        raise InputError(f"{path}: expected a JSON object {{qid: answer text}}")
    return predictions


def evaluate_files(data_file: str, predictions_file: str,
                   skip_no_answer: bool = False) -> dict[str, float]:
    """The official scores of a predictions file against an MRQA data file.

    Raises:
      InputError: bad files, or predictions for questions the data does not hold.
    """
    answers = read_answers(data_file)
    predictions = read_predictions(predictions_file)
    check_predictions(answers, predictions, data_file, predictions_file)
    return evaluate(answers, predictions, skip_no_answer)


def check_predictions(answers: dict, predictions: dict, data_file: str,
                      predictions_file: str) -> list[str]:
    """The qids of `answers` without a prediction, in the data's order.

    Raises:
      InputError: predictions for questions the data does not hold, or none at all
        (an empty file scores 0, as eval_squad refuses it).
    """
    if answers and not predictions:
        raise InputError(f"{predictions_file}: no predictions (an empty object); not "
                         f"{data_file}'s predictions")
    unknown = [q for q in predictions if q not in answers]
    if unknown:
        raise InputError(f"{predictions_file}: {len(unknown)} prediction(s) for questions "
                         f"{data_file} does not hold, e.g. {unknown[0]!r}: not this data's "
                         "predictions")
    return [q for q in answers if q not in predictions]
