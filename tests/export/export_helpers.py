"""Constants and the Python reference for tests/export (imported by conftest and tests)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from helpers import patience

HERE = os.path.dirname(os.path.abspath(__file__))
SEQ = 16
SQUAD_SEQ = 24

ODD_TEXTS = ["", "  \t\n  ", "the model reads " * 60,
             "Zoë lives in Zürich, 東京 and São Paulo", b"bad \xff\xfe\x80 bytes \xc3",
             "hello world"]
# Batches whose longest row packs to fewer than max_seq_length positions (the
# ODD_TEXTS batch holds a truncated row: the full window).
SHORT_BATCHES = {"short": [b"\xff", "the model", "Zoë", "hi"],  # 8 positions at most
                 "hello": ["hello"]}
BUCKETS = (4, 8)  # the exports' length buckets below max_seq_length
ALIGN_TEXTS = ["Café Zürich naïve", "中国人 hello", "résumé,中 cafe", "  Ça  va   "]
# Characters that normalize to several pre-tokens ("…" -> "...", "⑴" -> "(1)",
# "ﷺ" -> four Arabic words), and two rows whose truncation (SEQ - 2 = 14
# pieces) keeps only the first pieces of one: (text, the words it must give).
MULTI_PIECE = [("a…b", ["a", "…", "b"]), ("⑴ x", ["⑴", "x"]), ("㈱", ["㈱"]), ("⒜", ["⒜"]),
               ("㍻", ["㍻"]), ("ﷻ", ["ﷻ"]), ("ﷺ", ["ﷺ"]), ("x…", ["x", "…"]),
               ("x " * 13 + "⑴", ["x"] * 13 + ["⑴"]), ("x " * 12 + "ﷺ y", ["x"] * 12 + ["ﷺ"])]

# name: (head = export task, fine-tuning task, label names, regression, answerable,
#        max_seq_length)
FINETUNED = {
    "ner": ("token_classification", "ner", ["O", "B-MISC", "B-ORG", "I-ORG"], False, False,
            SEQ),
    "mrpc": ("sequence_classification", "mrpc", ["0", "1"], False, False, SEQ),
    "stsb": ("sequence_classification", "stsb", [], True, False, SEQ),
    "squad": ("squad", "squad_v2", [], False, True, SQUAD_SEQ),
    "squad_joint": ("squad", "squad_v2", [], False, True, SQUAD_SEQ),
}
# What finetuning_config.json records beyond the keys every folder above has.
# "squad" has the independent head and the "combined" null rule with
# no_answer_threshold (what `convert --from=hf` writes); "squad_joint" the
# trainer's defaults: the joint head's beam and the "answerable" rule.
BEAM = 5  # squad_joint's beam: smaller than the context, so that it matters
QA_NA_THRESHOLD = -0.5
RECORD_EXTRAS = {
    "squad": {"head_options": {"span_head": "independent"},
              "finetuning": {"squad_null_rule": "combined", "qa_na_threshold": 0.0,
                             "no_answer_threshold": 0.0, "joint_prediction": False}},
    "stsb": {"label_scale": [0.0, 5.0], "head_options": {}},
    "squad_joint": {
        "head_options": {"span_head": "joint", "beam_size": BEAM},
        "finetuning": {"squad_null_rule": "answerable", "qa_na_threshold": QA_NA_THRESHOLD,
                       "no_answer_threshold": 0.0, "joint_prediction": True,
                       "beam_size": BEAM}},
}
# SQuAD (question, context) pairs that fit one SQUAD_SEQ window, so that the ids
# signature's window and SquadTask's are one (LONG_PAIRS: several windows).
SQUAD_PAIRS = [
    ("which token was replaced ?", "the generator replaced a token"),
    ("who reads ?", "the model reads every sentence"),
    ("what is small ?", "a small generator trained as a masked model"),
    ("which model ?", "Café Zürich : the discriminator learns"),
    ("where ?", "text in this corpus while sampling keeps tokens plausible"),
    ("token ?", "which token was replaced by the generator ?"),
    ("what does sampling keep ?", "sampling keeps the tokens plausible enough"),
    ("what is trained ?", "a generator trained on every sentence"),
    ("hello ?", "hello world , 中国人 reads the text"),
    ("replaced", "replaced replaced replaced"),
]

# Contexts of several windows at SQUAD_SEQ (24): the pairs' contexts one after another.
_CONTEXTS = [c for _, c in SQUAD_PAIRS]
LONG_PAIRS = [
    ("which token was replaced ?", " ".join(_CONTEXTS[:4])),
    ("who reads ?", " ".join(_CONTEXTS[2:9])),
    ("what does sampling keep ?", " ".join(reversed(_CONTEXTS))),
    ("hello ?", _CONTEXTS[8]),  # one window beside the long ones
    ("where ?", ""),  # an empty context: one empty window, no span
    ("the model reads every sentence while sampling keeps tokens plausible ?",
     " ".join(_CONTEXTS[5:])),  # a question past the window's question limit
]


def task_decoding(spec, name, pairs, doc_stride):
    """SquadTask's predictions (with every start and end in its n-best lists, as the
    export's argmax) from the Keras model, for the folder's recorded options."""
    from electra_tf.core.config import FinetuningConfig
    from electra_tf.tasks.registry import task_from_config
    from electra_tf.tasks.squad import SquadExample

    task = task_from_config(FinetuningConfig(task_name="squad_v2",
                                             **RECORD_EXTRAS[name]["finetuning"]))
    task.doc_stride, task.n_best_size = doc_stride, 10_000
    examples = [SquadExample(f"q{i}", q, c) for i, (q, c) in enumerate(pairs)]
    feats = task.featurize(examples, spec.tokenizer, spec.max_seq_length)
    out = {k: np.asarray(v) for k, v in spec.model(feats.inputs, training=False).items()}
    return examples, feats, task.predictions(out, examples, feats)


def assert_answers_as_the_task(served, spec, name, pairs, doc_stride):
    examples, feats, preds = task_decoding(spec, name, pairs, doc_stride)
    for r, ex in enumerate(examples):
        p = preds[ex.qas_id]
        text = served["answer_text"][r]
        assert (text.decode() if isinstance(text, bytes) else text) == p.text, (ex, p)
        start = len(ex.context[:p.start_char].encode()) if p.nbest else 0
        end = len(ex.context[:p.end_char].encode()) if p.nbest else 0
        assert (int(served["answer_start"][r]), int(served["answer_end"][r])) == (start, end)
        assert served["answer_score"][r] == pytest.approx(p.score, abs=1e-4), ex
        assert served["no_answer_score"][r] == pytest.approx(p.null_score, abs=1e-4), ex
        assert served["null_odds"][r] == pytest.approx(p.null_odds, abs=1e-4), ex
        assert bool(served["has_answer"][r]) == (p.answer != ""), (ex, p)
    return examples, feats, preds


def fresh_ok(result):
    """A fresh-process job's (tf2, tf1) outputs, after asserting neither loader failed."""
    for loader in ("tf2", "tf1"):
        assert "error" not in result[loader], (loader, result[loader].get("error"))
    return result["tf2"], result["tf1"]


def _bytes(t):
    return t if isinstance(t, bytes) else t.encode("utf-8")


# === The Python reference: the same packing, then the Keras model ===

def python_pack(spec, a_texts, b_texts=None):
    """Python packing with electra_tf's Tokenizer (as the fine-tuning featurizers)."""
    from electra_tf.tasks.base import pack_pair
    from electra_tf.tasks.squad import question_limit

    tok, L = spec.tokenizer, spec.max_seq_length
    a = tok.encode([_bytes(t) for t in a_texts])
    b = tok.encode([_bytes(t) for t in b_texts]) if b_texts is not None else None
    rows = []
    for i in range(len(a)):
        if spec.task == "squad":
            q = a[i][:question_limit(spec.max_query_length, L)]
            c = b[i][:L - len(q) - 3]
            ids = [tok.cls_id] + q + [tok.sep_id] + c + [tok.sep_id]
            seg = [0] * (len(q) + 2) + [1] * (len(c) + 1)
            pad = L - len(ids)
            rows.append((ids + [0] * pad, [1] * len(ids) + [0] * pad, seg + [0] * pad))
        else:
            rows.append(pack_pair(a[i], b[i] if b is not None else None, L, tok.cls_id,
                                  tok.sep_id))
    ids, mask, seg = (np.array([r[k] for r in rows], np.int32) for k in range(3))
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": seg}


def keras_outputs(spec, packed):
    out = spec.model({"input_ids": packed["input_word_ids"], "input_mask": packed["input_mask"],
                      "segment_ids": packed["input_type_ids"]}, training=False)
    return {k: np.asarray(v) for k, v in out.items()}


def narrow_squad_ids(spec):
    """serving_ids inputs 4 positions wide, fewer than the joint head's beam (BEAM), whose
    model then runs on BEAM positions: [CLS] [SEP] context [SEP], and the same row with
    its context piece masked out."""
    tok = spec.tokenizer
    piece = tok.encode([b"reads"])[0][0]
    ids = np.array([[tok.cls_id, tok.sep_id, piece, tok.sep_id]] * 2, np.int32)
    return {"input_word_ids": ids, "input_mask": np.array([[1, 1, 1, 1], [1, 1, 0, 0]],
                                                          np.int32),
            "input_type_ids": np.array([[0, 0, 1, 1]] * 2, np.int32)}


def text_inputs(spec, texts):
    """The text signature's inputs for `texts` (pair tasks pair them with the reverse)."""
    arr = np.array([_bytes(t) for t in texts], object)
    if spec.task == "squad":
        return {"question": arr, "context": arr[::-1].copy()}
    if spec.pair:
        return {"text": arr, "text_pair": arr[::-1].copy()}
    return {"text": arr}


def packed_for(spec, inputs):
    names = list(inputs)
    return python_pack(spec, list(inputs[names[0]]),
                       list(inputs[names[1]]) if len(names) == 2 else None)


# === Bad input: what each signature must refuse (test_export_bad_input.py) ===

BAD_INPUT_TEXT_EXPORTS = ("ner", "mrpc", "stsb", "squad", "rtd")
MATRIX = np.array([[b"alpha", b"beta"], [b"gamma", b"delta"]], object)


def bad_text_cases(spec):
    """(case, inputs, expected message or None for "accepted")."""
    good = text_inputs(spec, ["hello world"])
    names = list(good)
    cases = []
    for name in names:
        cases.append((f"scalar {name}", {**good, name: np.array(b"hello world", object)},
                      f"input {name} must be a 1-D string tensor of shape [batch]"))
        cases.append((f"matrix {name}", {**good, name: MATRIX},
                      f"input {name} must be a 1-D string tensor of shape [batch]"))
    if len(names) == 2:
        cases.append(("batch mismatch", {names[0]: np.array([b"a", b"b"], object),
                                         names[1]: np.array([b"c"], object)},
                      f"inputs {names[0]} and {names[1]} must have the same batch size"))
    cases.append(("empty batch", {n: np.zeros([0], object) for n in names}, None))
    return cases


def bad_ids_cases(spec):
    config = spec.model.encoder.config
    V, T, P = config.vocab_size, config.type_vocab_size, config.max_position_embeddings
    ids = np.array([[101, 5, 6, 102], [101, 7, 102, 0]], np.int32)
    mask = np.array([[1, 1, 1, 1], [1, 1, 1, 0]], np.int32)
    types = np.zeros_like(ids)

    def case(name, want, word_ids=ids, input_mask=mask, type_ids=types):
        return (name, {"input_word_ids": word_ids, "input_mask": input_mask,
                       "input_type_ids": type_ids}, want)

    def put(a, value, at=(0, 1)):
        a = a.copy()
        a[at] = value
        return a

    vocab = f"input_word_ids must hold ids in [0, {V}) (the vocab size)"
    type_vocab = f"input_type_ids must hold ids in [0, {T}) (the type vocab size)"
    binary = "input_mask must hold only 0 and 1"
    return [
        case("negative id", vocab, word_ids=put(ids, -1)),
        case("id = vocab size", vocab, word_ids=put(ids, V)),
        case("negative type id", type_vocab, type_ids=put(types, -1)),
        case("type id = type vocab size", type_vocab, type_ids=put(types, T)),
        case("mask 2", binary, input_mask=put(mask, 2)),
        case("mask -1", binary, input_mask=put(mask, -1)),
        case("mask of another batch size",
             "input_mask must have the shape of input_word_ids [batch, seq]",
             input_mask=mask[:1]),
        case("mask of another length",
             "input_mask must have the shape of input_word_ids [batch, seq]",
             input_mask=mask[:, :3]),
        case("type ids of another batch size",
             "input_type_ids must have the shape of input_word_ids [batch, seq]",
             type_ids=np.zeros([3, 4], np.int32)),
        case("1-D ids", "input input_word_ids must be a 2-D int32 tensor of shape [batch, seq]",
             word_ids=ids[0], input_mask=mask[0], type_ids=types[0]),
        case("3-D ids", "input input_word_ids must be a 2-D int32 tensor of shape [batch, seq]",
             word_ids=ids[None], input_mask=mask[None], type_ids=types[None]),
        case("1-D mask", "input input_mask must be a 2-D int32 tensor of shape [batch, seq]",
             input_mask=mask[0]),
        case("too many positions", f"input_word_ids must have at most {P} positions",
             word_ids=np.full([1, P + 1], 5, np.int32), input_mask=np.ones([1, P + 1], np.int32),
             type_ids=np.zeros([1, P + 1], np.int32)),
        case("empty batch", None, word_ids=ids[:0], input_mask=mask[:0], type_ids=types[:0]),
        case("zero length", "input_word_ids must have at least 1 position (seq), the [CLS] token",
             word_ids=ids[:, :0], input_mask=mask[:, :0], type_ids=types[:, :0]),
        case("all-zero mask", None, input_mask=np.zeros_like(mask)),
    ]


def bad_input_rows(exports):
    """[(export, signature, case, inputs, expected message or None)] of every bad-input case."""
    rows = []
    for name in BAD_INPUT_TEXT_EXPORTS:
        for case, inputs, want in bad_text_cases(exports[name][0]):
            rows.append((name, "serving_default", case, inputs, want))
    for name, signature in (("ner", "serving_ids"), ("ner_ids", "serving_default"),
                            ("squad", "serving_ids")):
        for case, inputs, want in bad_ids_cases(exports[name][0]):
            rows.append((name, signature, case, inputs, want))
    return rows


# === One fresh process for every check ===

# load_check.py on 2 quiet cores: about 15 s to start, 0.3 s a job (191 jobs: 59 s).
FRESH_START_S, FRESH_JOB_S = 60, 1.0


# Electric's texts for the score export: plain, short, truncated (longer than SEQ), empty.
SCORE_TEXTS = ["the model reads a token", "a token", "which token was replaced by the small "
               "generator trained as a masked language model on every sentence", "", "text"]


# What the fresh fixture sends the score export: SCORE_TEXTS, the empty line included
# (its score had been -0.0 in the served graph).
SCORE_REQUEST_TEXTS = SCORE_TEXTS


def score_ids(scorer, texts):
    """A scorer's (serving.scoring) packed ids and mask for `texts`, padded to SEQ."""
    ids, mask, _ = scorer.pack(texts)
    pad = SEQ - ids.shape[1]
    return np.pad(ids, ((0, 0), (0, pad))), np.pad(mask, ((0, 0), (0, pad)))


def run_fresh(jobs, tmp_dir, no_tf_text=False, without_tf_text=()):
    """Runs load_check.py on jobs in a new interpreter, away from the repo; waits
    patience() for its start-up and jobs (a slow machine is no failure of an export).
    `without_tf_text`: jobs that run first, before tensorflow_text is imported (their
    {"results", "modules"} under "without_tf_text")."""
    count = len(jobs) + len(without_tf_text)
    if without_tf_text:
        jobs = {"without_tf_text": list(without_tf_text), "jobs": jobs}
    job_file, result_file = os.path.join(tmp_dir, "jobs.pkl"), os.path.join(tmp_dir, "out.pkl")
    with open(job_file, "wb") as f:
        pickle.dump(jobs, f)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    cmd = [sys.executable, os.path.join(HERE, "load_check.py"), job_file, result_file]
    proc = subprocess.run(cmd + (["--no_tf_text"] if no_tf_text else []), cwd=tmp_dir, env=env,
                          capture_output=True, text=True,
                          timeout=patience(FRESH_START_S + FRESH_JOB_S * count))
    # A crash inside an op (a segfault: returncode -11) fails the test, not pytest.
    assert proc.returncode == 0, f"returncode {proc.returncode}: {proc.stderr[-3000:]}"
    with open(result_file, "rb") as f:
        return pickle.load(f)
