"""SQuAD task: reading and its errors, windows and labels, n-best decoding, null odds."""

import json
import unicodedata

import numpy as np
import pytest
from helpers import WORDS, decode, tiny_vocab_tokens, write_vocab

from electra_tf.tasks import base
from electra_tf.tasks.squad import (
    SquadTask,
    best_threshold,
    doc_spans,
    max_context_masks,
    sibling_path,
    tokenize_with_char_offsets,
)
from electra_tf.text.tokenizer import Tokenizer

L = 32  # max_seq_length: 4 question tokens leave 25 context tokens per window
STRIDE = 8

SHORT = "Hello  World,\tthe Café   sells 中国人 tea.\nDéjà vu!"
LONG_WORDS = [WORDS[(7 * i) % len(WORDS)] for i in range(80)]  # one token per word
LONG = " ".join(LONG_WORDS[:40]) + "   " + " ".join(LONG_WORDS[40:])


def _span(context, text, nth=0):
    at = -1
    for _ in range(nth + 1):
        at = context.index(text, at + 1)
    return {"text": text, "answer_start": at}


def _long_answer(first, last):
    """Text and start of words first..last of LONG (word 22..27 crosses window 0's end)."""
    starts, at = [], 0
    for w in LONG.split(" "):
        if w:
            starts.append(at)
        at += len(w) + 1
    start, end = starts[first], starts[last] + len(LONG_WORDS[last])
    return {"text": LONG[start:end], "answer_start": start}


def squad_json(v2=False):
    qas_short = [
        {"id": "q-accent", "question": "which cafe?", "answers": [_span(SHORT, "Café")]},
        {"id": "q-space", "question": "hello world",
         "answers": [_span(SHORT, "World,\tthe Café"), _span(SHORT, "Café")]},
        {"id": "q-cjk", "question": "中 国", "answers": [_span(SHORT, "中国")]},
        {"id": "q-deja", "question": "deja?", "answers": [_span(SHORT, "Déjà vu")]},
    ]
    qas_long = [{"id": "q-boundary", "question": "which token was replaced",
                 "answers": [_long_answer(22, 27)]},
                {"id": "q-far", "question": "the model", "answers": [_long_answer(70, 72)]}]
    if v2:
        qas_short.append({"id": "q-none", "question": "who is the generator?", "answers": [],
                          "is_impossible": True,
                          "plausible_answers": [_span(SHORT, "Hello")]})
        for qa in qas_short + qas_long:
            qa.setdefault("is_impossible", False)
    return {"version": "v2.0" if v2 else "1.1", "data": [
        {"title": "T", "paragraphs": [{"context": SHORT, "qas": qas_short},
                                      {"context": LONG, "qas": qas_long}]}]}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return Tokenizer(write_vocab(tmp_path_factory.mktemp("v") / "vocab.txt", tiny_vocab_tokens()))


@pytest.fixture(scope="module", params=["1.1", "2.0"])
def setup(request, tokenizer, tmp_path_factory):
    version = request.param
    folder = tmp_path_factory.mktemp("squad" + version)
    (folder / f"dev-v{version}.json").write_text(
        json.dumps(squad_json(version == "2.0"), ensure_ascii=False, indent=1), "utf-8")
    task = SquadTask(version, max_query_length=8, doc_stride=STRIDE, null_odds_from="combined",
                     no_answer_threshold=0.0, joint_prediction=False)
    examples = task.read(str(folder), "dev")
    return task, examples, task.featurize(examples, tokenizer, L), folder


def test_read_accepts_folder_or_file(setup):
    task, examples, _, folder = setup
    assert [e.qas_id for e in examples][:2] == ["q-accent", "q-space"]
    assert examples[1].answers[0] == ("World,\tthe Café", SHORT.index("World"))
    again = task.read(str(folder / f"dev-v{task.version}.json"), "ignored")
    assert again == examples


def test_char_offsets_point_into_the_original_text(tmp_path):
    text = "Café  DÉJÀ ß İx 中国人 e\u0301x the\tmodel"
    vocab = write_vocab(tmp_path / "v.txt", tiny_vocab_tokens())
    expected = {  # (do_lower_case, strip_accents) -> the original text of each token
        (True, None): ["Café", "D", "É", "J", "À", "ß", "ß", "İ", "x", "中", "国", "人",
                       "e\u0301", "x", "the", "model"],
        (True, False): ["Café", "DÉJÀ", "ß", "ß", "İx", "中", "国", "人", "e\u0301x", "the",
                        "model"],
        (False, None): ["Café", "DÉJÀ", "ß", "İx", "中", "国", "人", "e\u0301x", "the", "model"],
        (False, True): ["Café", "DÉJÀ", "ß", "İx", "中", "国", "人", "e\u0301", "x", "the",
                        "model"]}
    for (lower, strip), pieces in expected.items():
        tok = Tokenizer(vocab, do_lower_case=lower, strip_accents=strip)
        [(ids, starts, ends)] = tokenize_with_char_offsets(tok, [text])
        assert [text[a:b] for a, b in zip(starts, ends)] == pieces, (lower, strip)


def test_windows_layout_stride_and_max_context(setup, tokenizer):
    task, examples, feats, _ = setup
    ids, mask, seg = (feats.inputs[k] for k in ("input_ids", "input_mask", "segment_ids"))
    assert ids.shape == mask.shape == seg.shape == (len(feats), L) and ids.dtype == np.int32
    for r, w in enumerate(feats.extra):
        n = int(mask[r].sum())
        assert ids[r, 0] == tokenizer.cls_id and ids[r, w.context_offset - 1] == tokenizer.sep_id
        assert ids[r, n - 1] == tokenizer.sep_id and not mask[r, n:].any()
        assert n == w.context_offset + w.doc_length + 1
        assert (seg[r, :w.context_offset] == 0).all() and (seg[r, w.context_offset:n] == 1).all()
    i_long = [e.qas_id for e in examples].index("q-boundary")
    windows = [w for w in feats.extra if w.example_index == i_long]
    assert [w.doc_start for w in windows] == [STRIDE * k for k in range(len(windows))]
    assert len(windows) > 3 and windows[-1].doc_start + windows[-1].doc_length == 80
    assert all(w.doc_length == L - 4 - 3 for w in windows[:-1])  # 4 question tokens
    owners = np.zeros(80, int)
    for w in windows:
        owners[w.doc_start:w.doc_start + w.doc_length] += w.max_context
    assert (owners == 1).all()  # every token decoded from exactly one window


def _check_is_max_context(doc_spans, cur_span_index, position):
    """The original's (finetune/qa/qa_tasks.py), verbatim but for the spans' type."""
    best_score = None
    best_span_index = None
    for (span_index, (start, length)) in enumerate(doc_spans):
        end = start + length - 1
        if position < start:
            continue
        if position > end:
            continue
        num_left_context = position - start
        num_right_context = end - position
        score = min(num_left_context, num_right_context) + 0.01 * length
        if best_score is None or score > best_score:
            best_score = score
            best_span_index = span_index
    return cur_span_index == best_span_index


def test_max_context_is_the_originals_in_memory_linear_in_the_tokens():
    """Each window's mask is the original's _check_is_max_context for each of its tokens
    (ties to the first window), and a long context's masks need memory in proportion to
    its tokens: a windows x tokens table had asked for 37 GiB for a 1 MB context."""
    import tracemalloc

    for num_tokens in (0, 1, 5, 25, 26, 97):
        for max_tokens, stride in ((25, 8), (25, 25), (6, 1), (7, 3), (4, 128)):
            spans = doc_spans(num_tokens, max_tokens, stride)
            masks = max_context_masks(spans, num_tokens)
            assert [m.tolist() for m in masks] == [
                [_check_is_max_context(spans, k, s + i) for i in range(n)]
                for k, (s, n) in enumerate(spans)], (num_tokens, max_tokens, stride)
    spans = doc_spans(400_000, 381, 128)  # 3,123 windows
    tracemalloc.start()
    masks = max_context_masks(spans, 400_000)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert sum(int(m.sum()) for m in masks) == 400_000
    assert peak < 40 * 400_000, peak  # the table: 8 x 3,123 x 400,000 bytes


def test_labels_decode_to_the_answer(setup, tokenizer):
    task, examples, feats, _ = setup
    starts, ends = feats.labels["start_positions"], feats.labels["end_positions"]
    found = set()
    for r, w in enumerate(feats.extra):
        ex = examples[w.example_index]
        assert feats.labels["is_impossible"][r] == float(ex.is_impossible)
        if starts[r] == 0:
            assert ends[r] == 0
            continue
        text = ex.answers[0][0]
        first = w.doc_start + starts[r] - w.context_offset
        last = w.doc_start + ends[r] - w.context_offset
        assert ex.context[w.char_starts[first]:w.char_ends[last]] == text
        decoded = decode(tokenizer, feats.inputs["input_ids"][r, starts[r]:ends[r] + 1])
        assert _squash(decoded) == _squash(text)  # "Déjà vu" -> "deja vu"
        found.add(ex.qas_id)
    assert found == {e.qas_id for e in examples if not e.is_impossible}
    i_long = [e.qas_id for e in examples].index("q-boundary")
    rows = np.flatnonzero(feats.example_index == i_long)
    assert starts[rows[0]] == 0  # window 0 cuts the answer (words 22..27 of 0..24)
    assert (starts[rows] > 0).sum() >= 1
    if task.v2:
        i_none = [e.qas_id for e in examples].index("q-none")
        rows = np.flatnonzero(feats.example_index == i_none)
        assert (starts[rows] == 0).all() and (feats.labels["is_impossible"][rows] == 1).all()


def _squash(text):
    """Uncased BERT's view of a text, without whitespace."""
    text = unicodedata.normalize("NFD", text.lower())
    return "".join(c for c in text if unicodedata.category(c) != "Mn" and not c.isspace())


def _logits_for(feats, examples, spans, high=5.0):
    """Start/end logits that point, in every window holding it, at the given char span."""
    n = len(feats)
    start, end = np.zeros([n, L], np.float32), np.zeros([n, L], np.float32)
    for r, w in enumerate(feats.extra):
        qid = examples[w.example_index].qas_id
        if qid not in spans:
            continue
        a, b = spans[qid]
        doc = np.arange(w.doc_start, w.doc_start + w.doc_length)
        first = np.flatnonzero(w.char_starts[doc] == a)
        last = np.flatnonzero(w.char_ends[doc] == b)
        if len(first) and len(last):
            start[r, w.context_offset + first[0]] = high
            end[r, w.context_offset + last[-1]] = high
    return start, end


def test_decoding_returns_the_original_substring(setup):
    task, examples, feats, _ = setup
    targets = {"q-accent": "Café", "q-space": "World,\tthe Café", "q-cjk": "国人",
               "q-deja": "Déjà", "q-boundary": _long_answer(22, 27)["text"],
               "q-far": _long_answer(66, 75)["text"]}  # 10 words, owned by one window
    spans = {q: (SHORT.index(t), SHORT.index(t) + len(t)) if q[2:] in
             ("accent", "space", "cjk", "deja") else (LONG.index(t), LONG.index(t) + len(t))
             for q, t in targets.items()}
    start, end = _logits_for(feats, examples, spans)
    preds = task.predictions({"start_logits": start, "end_logits": end}, examples, feats)
    for qid, text in targets.items():
        p = preds[qid]
        assert (p.text, p.start_char, p.end_char) == (text, *spans[qid])
        assert p.score == pytest.approx(10.0) and p.nbest[0]["text"] == text
        assert len(p.nbest) <= task.n_best_size and len({c["text"] for c in p.nbest}) == len(
            p.nbest)


def test_decoding_uses_the_max_context_window_only(setup):
    task, examples, feats, _ = setup
    i_long = [e.qas_id for e in examples].index("q-boundary")
    rows = np.flatnonzero(feats.example_index == i_long)
    w0, w1 = feats.extra[rows[0]], feats.extra[rows[1]]
    # Token 20 is in windows 0 (right context 4) and 1 (left 12, right 12): window 1 owns it.
    assert not w0.max_context[20] and w1.max_context[20 - w1.doc_start]
    start = np.full([len(feats), L], -10.0, np.float32)
    end = np.full([len(feats), L], -10.0, np.float32)
    start[rows[0], w0.context_offset + 20] = end[rows[0], w0.context_offset + 20] = 9.0
    start[rows[1], w1.context_offset + 20 - w1.doc_start] = 2.0
    end[rows[1], w1.context_offset + 20 - w1.doc_start] = 2.0
    preds = task.predictions({"start_logits": start, "end_logits": end}, examples, feats)
    p = preds["q-boundary"]
    assert p.text == LONG_WORDS[20] and p.score == pytest.approx(4.0)


def test_null_odds_threshold_and_files(setup, tmp_path):
    task, examples, feats, _ = setup
    spans = {"q-accent": (SHORT.index("Café"), SHORT.index("Café") + 4)}
    start, end = _logits_for(feats, examples, spans, high=3.0)
    start[:, 0], end[:, 0] = 1.0, 2.0
    answerable = np.linspace(-1.0, 1.0, len(feats)).astype(np.float32)
    outputs = {"start_logits": start, "end_logits": end, "answerable_logits": answerable}
    preds = task.predictions(outputs, examples, feats)
    p = preds["q-accent"]
    assert p.text == "Café" and p.score == pytest.approx(6.0)
    if not task.v2:
        assert p.answer == "Café" and p.null_odds is None
        task.write_predictions(preds, examples, str(tmp_path / "predictions.json"))
        assert json.loads((tmp_path / "predictions.json").read_text("utf-8"))["q-accent"] == "Café"
        return
    rows = np.flatnonzero(feats.example_index == 0)
    null = min(3.0 - 0.5 * answerable[r] for r in rows)
    assert p.null_score == pytest.approx(null) and p.null_odds == pytest.approx(null - 6.0)
    i_long = [e.qas_id for e in examples].index("q-boundary")
    long_rows = np.flatnonzero(feats.example_index == i_long)  # several windows
    assert len(long_rows) > 3 and preds["q-boundary"].null_score == pytest.approx(
        min(3.0 - 0.5 * answerable[r] for r in long_rows))
    assert p.answer == "Café"  # null odds < 0 = threshold
    original = SquadTask("2.0", max_query_length=8, doc_stride=STRIDE)  # the default:
    assert original.null_odds_from == "answerable"  # ELECTRA's qa_metrics rule
    p_orig = original.predictions(outputs, examples, feats)["q-boundary"]
    assert p_orig.null_odds == pytest.approx(-answerable[long_rows].max())
    assert preds["q-none"].answer == ""  # no span beats [CLS]: odds > 0
    task.write_predictions(preds, examples, str(tmp_path / "dev_predictions.json"))
    written = json.loads((tmp_path / "dev_predictions.json").read_text("utf-8"))
    odds = json.loads((tmp_path / "dev_null_odds.json").read_text("utf-8"))
    assert written == {q: x.answer for q, x in preds.items()} and set(odds) == set(written)
    assert sibling_path("out/predictions.json", "null_odds") == "out/null_odds.json"
    metrics = task.metrics(preds, examples)
    assert list(metrics)[:2] == ["f1", "exact"] and set(metrics) == set(task.metric_names)
    assert metrics["HasAns_exact"] == pytest.approx(100.0 / 6) and metrics["NoAns_exact"] == 100
    thresh = best_threshold({q: x.null_odds for q, x in preds.items()}, preds, examples)
    assert thresh == metrics["best_f1_thresh"]


def test_the_default_null_rule_is_the_originals(setup):
    """FinetuningConfig's defaults give the original's rule (qa_metrics.py with
    answerable_classifier): null odds = min over windows of -answerable_logit, "" when
    above qa_na_threshold = -2.75. By hand: both questions' best span scores 5 + 5;
    q-accent's windows have answerable logit 3.0 (odds -3.0 <= -2.75: answered),
    q-space's 2.5 (odds -2.5 > -2.75: ""). The combined rule with threshold 0 answers
    both: odds = 0 + 0 - 0.5 x logit - 10 < 0."""
    from electra_tf.core.config import FinetuningConfig
    from electra_tf.core.errors import ConfigError
    from electra_tf.tasks import registry

    task, examples, feats, _ = setup
    if not task.v2:
        return
    spans = {"q-accent": (SHORT.index("Café"), SHORT.index("Café") + 4),
             "q-space": (SHORT.index("World"), SHORT.index("World") + 5)}
    start, end = _logits_for(feats, examples, spans)
    qids = [examples[i].qas_id for i in feats.example_index]
    answerable = np.array([{"q-accent": 3.0, "q-space": 2.5}.get(q, 0.0) for q in qids],
                          np.float32)
    outputs = {"start_logits": start, "end_logits": end, "answerable_logits": answerable}
    config = FinetuningConfig(task_name="squad_v2")
    assert (config.squad_null_rule, config.qa_na_threshold) == ("answerable", -2.75)
    default = registry.task_from_config(config)
    preds = default.predictions(outputs, examples, feats)
    assert (preds["q-accent"].null_odds, preds["q-accent"].answer) == (-3.0, "Café")
    assert (preds["q-space"].null_odds, preds["q-space"].answer) == (-2.5, "")
    combined = registry.task_from_config(FinetuningConfig(
        task_name="squad_v2", squad_null_rule="combined", joint_prediction=False))
    assert (combined.null_odds_from, combined.no_answer_threshold) == ("combined", 0.0)
    preds = combined.predictions(outputs, examples, feats)
    assert preds["q-space"].null_odds == pytest.approx(-11.25)
    assert preds["q-space"].answer == "World"
    # A record's rule and its threshold (folders.finetuned checks that a span head records them).
    assert registry.squad_null_options({"squad_null_rule": "combined", "qa_na_threshold": -1.0,
                                        "no_answer_threshold": 0.5}) == {
        "null_odds_from": "combined", "no_answer_threshold": 0.5}
    with pytest.raises(ConfigError, match="squad_null_rule"):
        FinetuningConfig(task_name="squad_v2", squad_null_rule="bert")
    # get_task: each rule's own threshold; the other rule's is refused, not ignored.
    assert registry.get_task("squad_v2", qa_na_threshold=-1.0).no_answer_threshold == -1.0
    assert registry.get_task("squad_v2", squad_null_rule="combined", joint_prediction=False,
                             no_answer_threshold=0.5).no_answer_threshold == 0.5
    with pytest.raises(ConfigError, match="no_answer_threshold is the threshold of "
                                          "squad_null_rule='combined'"):
        registry.get_task("squad_v2", no_answer_threshold=0.5)
    with pytest.raises(ConfigError, match="unknown option"):
        registry.get_task("squad_v2", null_threshold=0.5)


def _original_candidates(start_logits, end_logits, window, n_best_size, max_answer_length):
    """The original's independent-head loop (qa_metrics.py: _get_best_indexes and the
    filters), over one window: (start_logit, end_logit, start, end) in window tokens."""
    def best_indexes(logits, n):
        ranked = sorted(enumerate(logits), key=lambda x: x[1], reverse=True)
        return [i for i, _ in ranked[:n]]

    off, n = window.context_offset, window.doc_length
    token_to_orig = set(range(off, off + n))
    out = []
    for start_index in best_indexes(start_logits, n_best_size):
        for end_index in best_indexes(end_logits, n_best_size):
            if start_index == 0 or start_index not in token_to_orig or \
                    end_index not in token_to_orig:
                continue
            if not window.max_context[start_index - off] or end_index < start_index:
                continue
            if end_index - start_index + 1 > max_answer_length:
                continue
            out.append((float(start_logits[start_index]), float(end_logits[end_index]),
                        start_index - off, end_index - off))
    return out


def test_the_question_is_cut_where_the_original_cuts_it():
    """max_query_length (64) whenever it leaves a context token, as the original's
    layout does; half the rest only in a window too short for it (a 128-token window
    had cut questions at 62)."""
    from electra_tf.tasks.squad import question_limit

    assert [question_limit(64, L) for L in (512, 384, 128, 68, 67, 24, 8)] == [
        64, 64, 64, 64, 32, 10, 2]


def test_a_question_cut_below_max_query_length_is_said_once(setup, tokenizer, caplog):
    """--max_query_length=30 in a window of 24 leaves no context piece: the questions
    are cut to 10 pieces, which a run had done without a word (at 125 of 128: 62)."""
    import logging

    task, examples, _, _ = setup
    task = SquadTask(task.version, max_query_length=30)
    with caplog.at_level(logging.WARNING):
        for _ in range(2):  # featurize runs per split
            task.featurize(examples, tokenizer, 24)
    said = [r.getMessage() for r in caplog.records if "max_query_length" in r.getMessage()]
    assert said == [f"{task.name}: --max_query_length=30 leaves no context piece in a window "
                    "of 24 positions: questions are cut to 10 pieces, half of what [CLS] and "
                    "the two [SEP]s leave (the export cuts them so too)"]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        SquadTask(task.version, max_query_length=20).featurize(examples, tokenizer, 24)
    assert not [r for r in caplog.records if "max_query_length" in r.getMessage()]


def test_independent_decoding_is_the_originals(setup):
    """The n best starts and ends are those of the whole row, as the original's
    _get_best_indexes takes them: [CLS] and the final [SEP] (unmasked by the head)
    take a place when they rank there. Only context tokens had been ranked, so a
    span the original never considered could win."""
    task, _, feats, _ = setup
    rng = np.random.default_rng(0)
    checked = 0
    kept = task.n_best_size, task.max_answer_length
    try:
        checked = _compare_with_the_original(task, feats, rng)
    finally:
        task.n_best_size, task.max_answer_length = kept
    assert checked > 100


def _compare_with_the_original(task, feats, rng):
    checked = 0
    for w in feats.extra:
        for trial in range(20):
            start = rng.normal(size=L).astype(np.float32)
            end = rng.normal(size=L).astype(np.float32)
            n, off = w.doc_length, w.context_offset
            start[n + off + 1:] = end[n + off + 1:] = -10000.0  # padding, as the head masks
            start[1:off] = end[1:off] = -10000.0  # the question
            if trial % 2:  # [CLS] and [SEP] among the best
                start[0], end[off + n] = 5.0, 5.0
            if trial % 5 == 0:  # ties
                start[off:off + n] = np.round(start[off:off + n])
            for nbest, max_len in ((3, 4), (20, 30), (1, 30)):
                task.n_best_size, task.max_answer_length = nbest, max_len
                want = _original_candidates(start, end, w, nbest, max_len)
                got = task._window_candidates(start, end, w)
                offsets = [(w.char_starts[w.doc_start + s], w.char_ends[w.doc_start + e])
                           for _, _, s, e in want]
                assert [(a, b) for a, b, _, _ in got] == [(a, b) for a, b, _, _ in want]
                assert [(c, d) for _, _, c, d in got] == offsets
                checked += bool(want)
    return checked


def test_joint_beam_decoding_by_hand():
    """The original's joint decoding (qa_metrics.py): [CLS] q [SEP] a b c [SEP], the
    context tokens at positions 2..4 ("a" "b" "c"). Beam: starts 3 ("b", log-prob
    -0.5) and 2 ("a", -1.0); ends of 3: 2 (before the start: out), 4 ("c", -0.6);
    ends of 2: 3 ("b", -0.2), 5 ([SEP]: out). Spans: "b c" -0.5 - 0.6 = -1.1 and
    "a b" -1.0 - 0.2 = -1.2; probabilities softmax(-1.1, -1.2). Null odds (the
    original's rule): -answerable = -2.0 > -2.75: answer ""."""
    from electra_tf.tasks.squad import SquadExample, SquadWindow

    task = SquadTask("2.0")
    assert task.joint_prediction and task.head_options == {"span_head": "joint",
                                                           "beam_size": 20}
    example = SquadExample("q", "?", "a b c", answers=(("b c", 2),))
    window = SquadWindow(0, 0, 3, 2, np.ones(3, bool), np.array([0, 2, 4]), np.array([1, 3, 5]))
    feats = base.Features({}, {}, np.zeros(1, np.int32), [window])
    outputs = {"start_logits": np.zeros((1, 6), np.float32),
               "start_top_log_probs": np.array([[-0.5, -1.0]], np.float32),
               "start_top_index": np.array([[3, 2]], np.int32),
               "end_top_log_probs": np.array([[[-0.1, -0.6], [-0.2, -0.3]]], np.float32),
               "end_top_index": np.array([[[2, 4], [3, 5]]], np.int32),
               "answerable_logits": np.array([2.0], np.float32)}
    p = task.predictions(outputs, [example], feats)["q"]
    assert (p.text, p.start_char, p.end_char, p.answer) == ("b c", 2, 5, "")
    assert p.score == pytest.approx(-1.1) and p.null_odds == -2.0
    assert [(c["text"], c["start_logit"], c["end_logit"]) for c in p.nbest] == [
        ("b c", pytest.approx(-0.5), pytest.approx(-0.6)),
        ("a b", pytest.approx(-1.0), pytest.approx(-0.2))]
    e = np.exp([-1.1, -1.2])
    assert [c["probability"] for c in p.nbest] == pytest.approx(list(e / e.sum()))
    # max_answer_length=1 leaves no span: the empty answer.
    short = SquadTask("1.1", max_answer_length=1).predictions(outputs, [example], feats)["q"]
    assert (short.text, short.nbest) == ("", [])
    with pytest.raises(ValueError, match="joint head"):
        SquadTask("2.0", null_odds_from="combined")
    from electra_tf.core.config import FinetuningConfig
    from electra_tf.tasks import registry

    assert registry.task_from_config(FinetuningConfig(task_name="squad_v2")).joint_prediction
    off = FinetuningConfig(task_name="squad_v1", joint_prediction=False, beam_size=5)
    assert registry.task_from_config(off).head_options == {"span_head": "independent",
                                                           "beam_size": 5}


def test_best_threshold_matches_find_best_thresh():
    data = [{"paragraphs": [{"context": "a b c", "qas": [
        {"id": "1", "answers": [{"text": "a", "answer_start": 0}]},
        {"id": "2", "answers": []},
        {"id": "3", "answers": [{"text": "c", "answer_start": 4}]}]}]}]
    preds = {"1": "a", "2": "b", "3": "c"}
    # Answer where odds <= t: -1 (+1), 0.5 (+1) then 2 (-1): best after "3".
    assert best_threshold({"1": -1.0, "2": 2.0, "3": 0.5}, preds, {"data": data}) == 0.5
    assert best_threshold({"1": -1.0, "2": 0.2, "3": 0.5}, preds, data) == -1.0


def _write(tmp_path, obj, raw=None):
    path = tmp_path / "bad.json"
    path.write_text(raw if raw is not None else json.dumps(obj, indent=1), "utf-8")
    return str(path)


def test_an_answer_start_off_its_text_is_read_as_the_original_reads_it(tmp_path, tokenizer,
                                                                     caplog):
    """Files converted from other datasets often hold an answer_start that does not point
    at its text; one had refused the whole file. The original skips such a training
    question (the words its answer_start and length touch lack the text), keeps one whose
    words hold it, and reads no answer_start outside training (the official evaluators
    score texts): dev keeps every answer, with one warning."""
    task = SquadTask("1.1")
    data = squad_json()
    qas = data["data"][0]["paragraphs"][0]["qas"]
    qas[2]["answers"][0]["answer_start"] += 1  # 中国 at 国人: the word still holds it
    qas[0]["answers"][0]["answer_start"] = 0  # Café at Hello: not in the words touched
    qas[3]["answers"][0]["answer_start"] = len(SHORT) - 1  # past the end
    path = _write(tmp_path, data)
    with caplog.at_level("WARNING"):
        train = task.read(path, "train")
    assert [ex.qas_id for ex in train] == ["q-space", "q-cjk", "q-boundary", "q-far"]
    assert "2 question(s) skipped, as the original skips them" in caplog.text
    assert "(first: question id 'q-accent', answer 'Café' at answer_start=0)" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        dev = task.read(path, "dev")
    assert len(dev) == 6
    assert "3 answer(s) whose answer_start does not point at their text (first: question " \
           "id 'q-accent', answer 'Café' at answer_start=0, where the context has 'Hell'): " \
           "scored by their text" in caplog.text
    features = task.featurize(dev, tokenizer, L)  # the windows of every question
    assert sorted(set(features.example_index.tolist())) == list(range(6))


@pytest.mark.parametrize("start", [-1, 1000])
def test_an_answer_start_outside_the_context_is_an_answer_start_off_its_text(
        start, tmp_path, tokenizer, caplog):
    """The original reads no answer_start outside training: a dev answer_start outside
    the context is kept and said as any answer_start off its text (the whole split had
    been refused, `answer_start=1000, outside the context (0 to 58)`); a train question
    with one is skipped as the others are (the original's IndexError past the end)."""
    task = SquadTask("1.1")
    data = squad_json()
    data["data"][0]["paragraphs"][0]["qas"][2]["answers"][0]["answer_start"] = start
    path = _write(tmp_path, data)
    with caplog.at_level("WARNING"):
        dev = task.read(path, "dev")
    assert len(dev) == 6
    assert "1 answer(s) whose answer_start does not point at their text (first: question " \
           f"id 'q-cjk', answer '中国' at answer_start={start}, where the context has ''): " \
           "scored by their text" in caplog.text
    features = task.featurize(dev, tokenizer, L)
    assert sorted(set(features.example_index.tolist())) == list(range(6))
    caplog.clear()
    with caplog.at_level("WARNING"):
        train = task.read(path, "train")
    assert "q-cjk" not in [ex.qas_id for ex in train] and len(train) == 5
    assert "1 question(s) skipped, as the original skips them" in caplog.text
    assert f"(first: question id 'q-cjk', answer '中国' at answer_start={start})" in caplog.text


def test_read_errors_are_clear(tmp_path):
    task = SquadTask("1.1")
    ok = squad_json()
    cases = []
    cases.append((_write(tmp_path, None, '{"data": [\n {"title": "x",,}]}'),
                  r"bad.json:2:\d+: malformed JSON"))
    bad = json.loads(json.dumps(ok))
    del bad["data"][0]["paragraphs"][1]["qas"][0]["question"]
    cases.append((bad, r"bad.json:\d+: question id 'q-boundary': missing key 'question'"))
    bad = json.loads(json.dumps(ok))
    bad["data"][0]["paragraphs"][0]["qas"][2]["answers"][0]["text"] = ""
    cases.append((bad, r"question id 'q-cjk': answer '' at answer_start=\d+ is empty"))
    bad = json.loads(json.dumps(ok))
    bad["data"][0]["paragraphs"][0]["context"] = ""  # ("outside the context (0 to -1)")
    cases.append((bad, r"question id 'q-accent': answer 'Café', but the context is empty"))
    bad = json.loads(json.dumps(ok))
    bad["data"][0]["paragraphs"][0]["qas"][0]["is_impossible"] = "false"
    cases.append((bad, r"question id 'q-accent': 'is_impossible' must be true or false, "
                       "got a string"))
    cases.append(({"version": "1.1", "data": []}, r"bad.json: no questions \(empty split\)"))
    cases.append(({"data": {}}, r"not a SQuAD file"))
    bad = json.loads(json.dumps(ok))
    bad["data"][0]["paragraphs"][1]["qas"][1]["id"] = "q-cjk"
    cases.append((bad, r"question id 'q-cjk': the id repeats"))
    bad = json.loads(json.dumps(ok))
    bad["data"][0]["paragraphs"][0]["qas"][0]["answers"] = []
    cases.append((bad, r"question id 'q-accent': no answers"))
    for obj, pattern in cases:
        path = obj if isinstance(obj, str) else _write(tmp_path, obj)
        with pytest.raises(base.TaskDataError, match=pattern):
            task.read(path, "dev")
    with pytest.raises(base.TaskDataError, match="not found"):
        task.read(str(tmp_path), "train")
    with pytest.raises(base.TaskDataError) as err:  # the line given is the id's
        task.read(_write(tmp_path, bad), "dev")
    lines = (tmp_path / "bad.json").read_text("utf-8").splitlines()
    assert '"q-accent"' in lines[int(str(err.value).split(":")[1]) - 1]
    # a repeated id: the repeat's line (it had been the first copy's), though a text
    # before it holds the id too
    bad = json.loads(json.dumps(ok))
    bad["data"][0]["paragraphs"][0]["qas"][0]["question"] = 'what is "q-cjk" ?'
    bad["data"][0]["paragraphs"][1]["qas"][1]["id"] = "q-cjk"
    with pytest.raises(base.TaskDataError, match="the id repeats") as err:
        task.read(_write(tmp_path, bad), "dev")
    lines = (tmp_path / "bad.json").read_text("utf-8").splitlines()
    line = int(str(err.value).split(":")[1])
    assert '"id": "q-cjk"' in lines[line - 1]
    assert any('"id": "q-cjk"' in text for text in lines[:line - 1])  # the first copy


def test_predictions_holding_a_lone_surrogate_are_written_and_read_back(tmp_path):
    """A context with JSON's "\\ud800" (valid JSON, read on purpose) gives answers cut from
    it: the UTF-8 write had failed after the evaluation, in a traceback."""
    import types

    task = SquadTask("2.0", max_query_length=8, doc_stride=STRIDE)
    preds = {"q\ud800": types.SimpleNamespace(answer="ab\ud800", null_odds=-1.0),
             "plain": types.SimpleNamespace(answer="Café", null_odds=2.0)}
    task.write_predictions(preds, [], str(tmp_path / "dev_predictions.json"))
    written = json.loads((tmp_path / "dev_predictions.json").read_text("utf-8"))
    assert written == {"q\ud800": "ab\ud800", "plain": "Café"}  # the data's own strings
    assert set(json.loads((tmp_path / "dev_null_odds.json").read_text("utf-8"))) == set(preds)


def test_training_labels_and_skips_are_the_originals(tokenizer, tmp_path, caplog):
    """qa_tasks.py's rule for SQuAD as for MRQA: an answer inside a word trains on the
    whole word where its own pieces are not there (_improve_answer_span), and a train
    question whose answer the original's cleaning cannot find in the context's
    whitespace words (a no-break space: one word to the context, two to the answer) is
    skipped in training and kept on dev. SQuAD had labelled the overlapping pieces and
    trained on both."""
    nbsp = "the Café\u00a0sells tea."
    data = {"version": "1.1", "data": [{"title": "T", "paragraphs": [
        {"context": SHORT, "qas": [
            {"id": "q-mid", "question": "deja?", "answers": [_span(SHORT, "éjà")]},
            {"id": "q-deja", "question": "deja?", "answers": [_span(SHORT, "Déjà vu")]}]},
        {"context": nbsp, "qas": [
            {"id": "q-nbsp", "question": "cafe?", "answers": [_span(nbsp, "Café\u00a0sells")]},
            {"id": "q-tea", "question": "tea?", "answers": [_span(nbsp, "tea")]}]}]}]}
    for split in ("train", "dev"):
        (tmp_path / f"{split}-v1.1.json").write_text(json.dumps(data), "utf-8")
    task = SquadTask("1.1", max_query_length=8, doc_stride=STRIDE)
    with caplog.at_level("WARNING"):
        train = task.read(str(tmp_path), "train")
    assert [e.qas_id for e in train] == ["q-mid", "q-deja", "q-tea"]
    assert "1 question(s) skipped" in caplog.text and "'q-nbsp'" in caplog.text
    assert [e.qas_id for e in task.read(str(tmp_path), "dev")] == [
        "q-mid", "q-deja", "q-nbsp", "q-tea"]
    feats = task.featurize(train, tokenizer, L)
    found = {}
    for r, w in enumerate(feats.extra):
        s, e = int(feats.labels["start_positions"][r]), int(feats.labels["end_positions"][r])
        first = w.doc_start + s - w.context_offset
        last = w.doc_start + e - w.context_offset
        ex = train[w.example_index]
        found[ex.qas_id] = ex.context[w.char_starts[first]:w.char_ends[last]]
    assert found == {"q-mid": "Déjà", "q-deja": "Déjà vu", "q-tea": "tea"}
    only_skipped = {"version": "1.1", "data": [{"title": "T", "paragraphs": [
        data["data"][0]["paragraphs"][1] | {"qas": data["data"][0]["paragraphs"][1]["qas"][:1]}]}]}
    (tmp_path / "train-v1.1.json").write_text(json.dumps(only_skipped), "utf-8")
    with pytest.raises(base.TaskDataError, match="no questions .1 skipped"):
        task.read(str(tmp_path), "train")


def test_an_evaluation_takes_the_folders_windows_but_no_n_best_for_the_joint_head():
    """`--do_train=false` on a fine-tuned folder evaluates its model as it was trained:
    its windows and longest answer where the run leaves them at their defaults; a joint
    head's recorded --n_best_size (which it never reads: its beam decodes) had been named
    among them ("as it was trained: --n_best_size=5")."""
    import types

    from electra_tf.core.config import FinetuningConfig
    from electra_tf.tasks.heads.span import SpanConfig, SpanHead

    def record(span_head):
        return types.SimpleNamespace(
            head_config=SpanConfig(answerable=True, span_head=span_head), answerable=True,
            finetuning={"n_best_size": 5, "max_answer_length": 12}, model_dir="m",
            task="squad_v2")

    run = FinetuningConfig(task_name="squad_v2")
    for span_head, want in (("joint", {"max_answer_length": 12}),
                            ("independent", {"max_answer_length": 12, "n_best_size": 5})):
        config = SpanConfig(answerable=True, span_head=span_head)
        _, changes = SpanHead.as_recorded(record(span_head), config, run)
        assert changes == want, span_head
