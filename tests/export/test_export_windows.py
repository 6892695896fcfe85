"""A served SQuAD context longer than one window is read in windows, every doc_stride
pieces, and answered as fine-tuning's evaluation decodes a question's windows
(tasks/squad.py): the best span of any window that starts at a piece the window has
the most context for, the lowest no-answer score of the windows."""

import numpy as np
import pytest
from export_helpers import LONG_PAIRS, assert_answers_as_the_task, fresh_ok


@pytest.mark.parametrize("doc_stride", [3, 128])
@pytest.mark.parametrize("name", ["squad", "squad_joint"])
def test_a_long_context_is_answered_from_its_windows_as_the_task_decodes_them(
        finetuned_dirs, name, doc_stride):
    """doc_stride 3: windows that overlap (the max-context rule decides which window may
    start an answer at a piece); 128: windows one after another."""
    from electra_tf import Predictor

    predictor = Predictor.open(finetuned_dirs[name], doc_stride=doc_stride)
    questions, contexts = zip(*LONG_PAIRS)
    served = predictor.outputs(list(questions), list(contexts))
    examples, feats, preds = assert_answers_as_the_task(served, predictor.spec, name,
                                                        LONG_PAIRS, doc_stride)
    windows = np.bincount(feats.example_index, minlength=len(examples))
    assert windows[:3].min() >= 2 and windows[3] == windows[4] == 1, windows
    # Some answers come from past the first window: the windows matter.
    first_window_ends = {}
    for w in feats.extra:
        if w.example_index not in first_window_ends:
            first_window_ends[w.example_index] = (w.char_ends[w.doc_start + w.doc_length - 1]
                                                  if w.doc_length else 0)
    later = [ex.qas_id for i, ex in enumerate(examples)
             if preds[ex.qas_id].nbest and preds[ex.qas_id].start_char >= first_window_ends[i]]
    assert later, [(p.text, p.start_char) for p in preds.values()]
    # truncated: the question was cut (the context never is)
    from electra_tf.tasks.squad import question_limit

    spec = predictor.spec
    limit = question_limit(spec.max_query_length, spec.max_seq_length)
    cut = [len(ids) > limit for ids in spec.tokenizer.encode(list(questions))]
    assert cut[-1] and not cut[0]
    np.testing.assert_array_equal(served["truncated"], cut)
    assert not served["has_answer"][4] and served["answer_text"][4] == ""


def test_the_server_loader_answers_a_long_context_as_the_python_api(exports, fresh):
    """The export (doc_stride 128) in a fresh process, by TF2's loader and the TF1
    session loader TF Serving runs."""
    tf2, tf1 = fresh_ok(fresh[("squad_joint", "long")])
    for key in tf2:
        if tf2[key].dtype.kind == "f":
            np.testing.assert_allclose(tf2[key], tf1[key], rtol=0, atol=1e-5, err_msg=key)
        else:
            np.testing.assert_array_equal(tf2[key], tf1[key], err_msg=key)
    assert_answers_as_the_task(tf2, exports["squad_joint"][0], "squad_joint", LONG_PAIRS, 128)


def test_the_windows_follow_the_stride_and_the_max_context_rule():
    """graph.doc_windows and window_max_context against tasks/squad.py's doc_spans and
    max_context_masks, over context and question lengths and strides."""
    import tensorflow as tf

    from electra_tf.serving import graph
    from electra_tf.tasks.squad import doc_spans, max_context_masks

    cases = [(n, q, s) for n in (0, 1, 5, 9, 10, 11, 17, 40, 101, 260) for q in (1, 6)
             for s in (1, 2, 3, 4, 5, 7, 9, 64)]
    L = 16
    for s in sorted({s for _, _, s in cases}):
        picked = [c for c in cases if c[2] == s]
        q_len = tf.constant([q for _, q, _ in picked], tf.int64)
        windows = graph.doc_windows(q_len, tf.constant([n for n, _, _ in picked], tf.int64),
                                    L, s)
        offset = tf.gather(q_len, windows["row"]) + 2
        mask = graph.window_max_context(windows, offset, L).numpy()
        row, start, length = (windows[k].numpy() for k in ("row", "start", "length"))
        for b, (n, q, _) in enumerate(picked):
            mine = np.flatnonzero(row == b)
            spans = doc_spans(n, L - q - 3, s)
            assert [(int(start[i]), int(length[i])) for i in mine] == spans, (n, q, s)
            for i, want in zip(mine, max_context_masks(spans, n)):
                got = mask[i, q + 2:q + 2 + length[i]]
                np.testing.assert_array_equal(got, want, err_msg=str((n, q, s, i)))
                assert not mask[i, :q + 2].any() and not mask[i, q + 2 + length[i]:].any()


def test_a_stride_or_answer_length_past_any_window_is_no_limit(finetuned_dirs):
    """10**30 had overflowed the graph's int64 constant (a traceback at the first
    request); a stride past the window's room is that room, as fine-tuning's."""
    from electra_tf import Predictor

    questions, contexts = (list(x) for x in zip(*LONG_PAIRS))
    huge = Predictor.open(finetuned_dirs["squad"], doc_stride=10**30, max_answer_length=10**30)
    window = Predictor.open(finetuned_dirs["squad"], doc_stride=1000, max_answer_length=1000)
    a, b = huge.outputs(questions, contexts), window.outputs(questions, contexts)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_an_ids_only_export_records_no_stride(exports):
    """It answers each row as sent: its export_info.json holds no doc_stride to mislead."""
    from electra_tf.serving.signatures import build_archive

    spec = exports["squad"][0]
    assert build_archive(spec)[1]["doc_stride"] == spec.doc_stride == 128
    assert "doc_stride" not in build_archive(spec, ids_only=True)[1]


def test_each_request_takes_its_best_window_the_first_on_a_tie():
    """And a request whose windows all score NaN (a broken model) its first window: a
    gather past the windows had failed the whole batch."""
    import tensorflow as tf

    from electra_tf.serving import graph

    score = tf.constant([np.nan, np.nan, 1.0, 2.0, 2.0, -1e9], tf.float32)
    row = tf.constant([0, 0, 1, 1, 1, 2], tf.int64)
    np.testing.assert_array_equal(graph.best_of_rows(score, row, 3), [0, 3, 5])


def test_the_export_command_names_a_stride_an_ids_only_export_does_not_read():
    from electra_tf.export_saved_model import ignored_flags

    note = ("--doc_stride sets the text signature's windows; an --ids_only export takes one "
            "window per row, as sent")
    assert ignored_flags("squad", ["doc_stride"], None, 24, ids_only=True) == [note]
    assert ignored_flags("squad", ["doc_stride"], None, 24) == []
    # buckets below the joint span head's beam: said (they had been left out silently)
    assert ignored_flags("squad", [], [8, 16, 24], 32, min_length=20) == [
        "--length_buckets 8,16 below the 20 positions the joint span head's beam needs left out"]
    assert ignored_flags("squad", [], None, 32, min_length=20) == []  # the defaults: docs
    assert ignored_flags("squad", [], None, 24, ids_only=True) == []
