"""Every export, loaded in a fresh process (TF2 loader and the server's TF1 session loader),
matches the Keras model, answers odd input, aligns words and replays its warmup file."""

import json
import os

import numpy as np
import pytest
from export_helpers import (
    ALIGN_TEXTS,
    MULTI_PIECE,
    ODD_TEXTS,
    SHORT_BATCHES,
    assert_answers_as_the_task,
    fresh_ok,
    keras_outputs,
    narrow_squad_ids,
    packed_for,
    text_inputs,
)

TASKS = ("ner", "mrpc", "stsb", "squad", "squad_joint", "rtd")
STSB_SCALE = (0.0, 5.0)  # RECORD_EXTRAS["stsb"]: trained on score / 5, serves 0..5
ATOL = 1e-5


def _same(a, b, name=""):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (name, a.shape, b.shape)
    if a.dtype.kind in "fc":
        np.testing.assert_allclose(a, b, rtol=0, atol=ATOL, err_msg=name)
    else:
        np.testing.assert_array_equal(a, b, err_msg=name)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _best_span(s, e, mask, types, max_len):
    length = int(mask.sum())
    ctx = [i for i in range(len(s)) if mask[i] and types[i] == 1 and i < length - 1]
    best = None
    for i in ctx:
        for j in ctx:
            if i <= j < i + max_len and (best is None or s[i] + e[j] > best[0]):
                best = (s[i] + e[j], i, j)
    return best


def _best_beam_span(k, r, mask, types, max_len):
    """The joint head's best valid (start, end) pair of the beam in row r (beam order)."""
    length = int(mask.sum())
    ctx = {i for i in range(len(mask)) if mask[i] and types[i] == 1 and i < length - 1}
    best = None
    beam = k["end_top_index"].shape[1]
    for a in range(beam):
        i = int(k["start_top_index"][r, a])
        for b in range(beam):
            j = int(k["end_top_index"][r, a, b])
            score = k["start_top_log_probs"][r, a] + k["end_top_log_probs"][r, a, b]
            if i in ctx and j in ctx and i <= j < i + max_len and (best is None
                                                                   or score > best[0]):
                best = (score, i, j)
    return best


def expected(name, spec, packed):
    """What the text signature must return, from the Keras model on Python-packed ids."""
    k = keras_outputs(spec, packed)
    mask = packed["input_mask"]
    if name == "mrpc":
        p = _softmax(k["logits"])
        return {"probabilities": p, "label": np.array([spec.label_names[i].encode()
                                                       for i in p.argmax(-1)], object)}
    if name == "stsb":
        return {"score": k["logits"].reshape(-1) * STSB_SCALE[1] + STSB_SCALE[0]}
    if name == "rtd":
        return {"replaced_probabilities": 1 / (1 + np.exp(-k["rtd_logits"])) * mask}
    if name == "ner":
        p = _softmax(k["tag_logits"])
        labels = np.array([[spec.label_names[i].encode() if m else b"" for i, m in zip(r, mr)]
                           for r, mr in zip(p.argmax(-1), mask)], object)
        vocab = spec.tokenizer.vocab
        tokens = np.array([[vocab[i].encode() if m else b"" for i, m in zip(r, mr)]
                           for r, mr in zip(packed["input_word_ids"], mask)], object)
        return {"wordpiece_scores": p.max(-1) * mask, "wordpiece_labels": labels,
                "wordpiece_tokens": tokens}
    if name == "squad_joint":  # the beam; the original's null rule, -answerable logit
        bests = [_best_beam_span(k, r, mask[r], packed["input_type_ids"][r],
                                 spec.max_answer_length) for r in range(len(mask))]
        null = -k["answerable_logits"]
        return {"answer_score": np.array([b[0] if b else -1e9 for b in bests], np.float32),
                "no_answer_score": null, "null_odds": null,
                "has_answer": np.array([b is not None for b in bests]) & (
                    null <= spec.no_answer_threshold)}
    # squad
    s, e, a = k["start_logits"], k["end_logits"], k["answerable_logits"]
    scores = []
    for r in range(len(s)):
        best = _best_span(s[r], e[r], mask[r], packed["input_type_ids"][r],
                          spec.max_answer_length)
        scores.append(best[0] if best else -1e9)
    return {"answer_score": np.array(scores, np.float32),
            "no_answer_score": s[:, 0] + e[:, 0] - 0.5 * a}


def test_the_beam_takes_ids_narrower_than_itself(exports, fresh):
    """serving_ids of 4 positions for a beam of 5: the model runs on 5, and a beam entry
    in the padding past the request's width had failed the request's gather (every
    request of an export whose max_seq_length is below its beam_size)."""
    spec = exports["squad_joint"][0]
    packed = narrow_squad_ids(spec)
    for out in fresh_ok(fresh[("squad_joint", "narrow_ids")]):
        for key, want in expected("squad_joint", spec, packed).items():
            _same(out[key], want, key)


@pytest.mark.parametrize("name", TASKS)
def test_text_signature_matches_keras_in_both_loaders(name, exports, fresh):
    spec = exports[name][0]
    tf2, tf1 = fresh_ok(fresh[(name, "odd")])
    assert sorted(tf2) == sorted(tf1)
    for key in tf2:  # the C++ server's loader and TF2's agree
        _same(tf2[key], tf1[key], key)
    inputs = text_inputs(spec, ODD_TEXTS)
    packed = packed_for(spec, inputs)
    rows = np.arange(len(ODD_TEXTS))
    if spec.task == "squad":  # a context of several windows: as the task decodes them
        long = _several_windows(spec, inputs)
        assert long.any() and not long.all(), long
        pairs = [(inputs["question"][r].decode(), inputs["context"][r].decode())
                 for r in np.flatnonzero(long)]  # valid UTF-8 (the others fit one window)
        assert_answers_as_the_task({k: v[long] for k, v in tf2.items()}, spec, name, pairs,
                                   spec.doc_stride)
        rows = np.flatnonzero(~long)
    for key, want in expected(name, spec, packed).items():
        _same(tf2[key][rows], want[rows], key)


def _several_windows(spec, inputs) -> np.ndarray:
    """bool per row: its context does not fit the window beside its (cut) question."""
    from electra_tf.tasks.squad import question_limit

    limit = question_limit(spec.max_query_length, spec.max_seq_length)
    questions = spec.tokenizer.encode(list(inputs["question"]))
    contexts = spec.tokenizer.encode(list(inputs["context"]))
    return np.array([len(c) > spec.max_seq_length - min(len(q), limit) - 3
                     for q, c in zip(questions, contexts)])


def _info(exports, name):
    with open(os.path.join(exports[name][1], "assets.extra", "export_info.json")) as f:
        return json.load(f)


def _bucket(info, mask) -> int:
    """The shortest length bucket that holds every position `mask` marks."""
    used = max((int(np.nonzero(row)[0].max()) + 1 for row in mask if row.any()), default=0)
    return min(b for b in info["length_buckets"] if b >= used)


@pytest.mark.parametrize("name", TASKS)
@pytest.mark.parametrize("batch", list(SHORT_BATCHES))
def test_a_batch_in_a_shorter_bucket_answers_as_the_full_window(name, batch, exports, fresh):
    """Text signature: packed to a bucket below max_seq_length, the outputs are those of
    the Keras model on the full window (per-position outputs still [B, L])."""
    spec = exports[name][0]
    packed = packed_for(spec, text_inputs(spec, SHORT_BATCHES[batch]))
    assert _bucket(_info(exports, name), packed["input_mask"]) < spec.max_seq_length
    tf2, tf1 = fresh_ok(fresh[(name, batch)])
    for key in tf2:
        _same(tf2[key], tf1[key], key)
    for key, want in expected(name, spec, packed).items():
        _same(tf2[key], want, key)


def _row_buckets(info, mask) -> list[int]:
    """Each row's length bucket: the shortest that holds the last position it marks."""
    return [_bucket(info, row[None]) for row in mask]


def _check_ids_outputs(name, spec, info, packed, out):
    """The ids signature's outputs against the Keras model on the whole window: the
    raw logits inside each row's bucket, MODEL_FILLS past it, and every decoded output."""
    from electra_tf.serving.signatures import MODEL_FILLS

    k = keras_outputs(spec, packed)
    mask = packed["input_mask"]
    for r, width in enumerate(_row_buckets(info, mask)):
        for key in MODEL_FILLS:
            if key in out:
                assert out[key].shape[:2] == mask.shape, key
                _same(out[key][r, :width], k[key][r, :width], key)
                np.testing.assert_array_equal(out[key][r, width:], MODEL_FILLS[key], key)
    for key in ("logits", "answerable_logits"):
        if key in out:
            _same(out[key], k[key], key)
    if name == "stsb":
        _same(out["score"], k["logits"].reshape(-1) * STSB_SCALE[1] + STSB_SCALE[0])
    if name == "ner":
        want = expected(name, spec, packed)
        _same(out["tag_probabilities"], _softmax(k["tag_logits"]) * mask[..., None])
        _same(out["tag_scores"], want["wordpiece_scores"])
        _same(out["tag_labels"], want["wordpiece_labels"])
    if name == "squad_joint":
        assert "end_logits" not in out  # the joint head predicts a beam instead
        # The beam's entries at positions that may hold an answer (log-probability above
        # the mask's): a row's bucket holds fewer of the others, which then differ.
        valid = k["start_top_log_probs"] > -1000
        for key in ("start_top_log_probs", "start_top_index"):
            _same(out[key][valid], k[key][valid], key)
        valid = valid[:, :, None] & (k["end_top_log_probs"] > -1000)
        for key in ("end_top_log_probs", "end_top_index"):
            _same(out[key][valid], k[key][valid], key)
    if name.startswith("squad"):
        for key, want in expected(name, spec, packed).items():
            _same(out[key], want, key)


@pytest.mark.parametrize("name", TASKS)
def test_ids_signature_matches_keras(name, exports, fresh):
    spec = exports[name][0]
    tf2, tf1 = fresh_ok(fresh[(name, "ids")])
    for key in tf2:
        _same(tf2[key], tf1[key], key)
    _check_ids_outputs(name, spec, _info(exports, name),
                       packed_for(spec, text_inputs(spec, ODD_TEXTS)), tf2)


@pytest.mark.parametrize("name", TASKS)
@pytest.mark.parametrize("batch", list(SHORT_BATCHES))
def test_ids_signature_on_a_window_that_ends_early(name, batch, exports, fresh):
    """[B, L] ids whose marks end before a shorter bucket: answered as the full window."""
    spec, info = exports[name][0], _info(exports, name)
    packed = packed_for(spec, text_inputs(spec, SHORT_BATCHES[batch]))
    assert max(_row_buckets(info, packed["input_mask"])) < spec.max_seq_length
    tf2, tf1 = fresh_ok(fresh[(name, f"{batch}_ids")])
    for key in tf2:
        _same(tf2[key], tf1[key], key)
    _check_ids_outputs(name, spec, info, packed, tf2)


@pytest.mark.parametrize("name", TASKS)
def test_odd_input_is_answered_and_long_text_truncated(name, fresh):
    tf2, _ = fresh_ok(fresh[(name, "odd")])
    truncated = tf2["truncated"]
    assert truncated.shape == (len(ODD_TEXTS),)
    assert truncated[2], "the 180-word text must be truncated, not rejected"
    if name in ("ner", "rtd", "stsb"):  # single text: empty / whitespace-only rows
        assert not truncated[0] and not truncated[1]
    for key, value in tf2.items():
        if value.dtype.kind == "f":
            assert np.all(np.isfinite(value)), key


def test_token_classification_words_on_odd_input(exports, fresh):
    tf2, _ = fresh_ok(fresh[("ner", "odd")])
    assert list(tf2["num_words"][:2]) == [0, 0]  # empty and whitespace-only
    assert list(tf2["wordpiece_tokens"][0][:3]) == [b"[CLS]", b"[SEP]", b""]
    words = [w for w in tf2["word_texts"][3] if w]
    assert words[:3] == ["Zoë".encode(), b"lives", b"in"]
    # invalid UTF-8 is replaced by U+FFFD, never a crash; offsets index the repaired text
    bad = [w for w in tf2["word_texts"][4] if w]
    assert bad[0] == b"bad" and b"bytes" in bad and all(w.decode("utf-8") for w in bad)


def test_word_alignment_on_accented_and_cjk_text(fresh):
    tf2, tf1 = fresh_ok(fresh[("ner", "align")])
    want = [["Café", "Zürich", "naïve"], ["中", "国", "人", "hello"],
            ["résumé", ",", "中", "cafe"], ["Ça", "va"]]
    for r, text in enumerate(ALIGN_TEXTS):
        raw = text.encode("utf-8")
        n = int(tf2["num_words"][r])
        got = [w.decode("utf-8") for w in tf2["word_texts"][r][:n]]
        assert got == want[r], (text, got)
        for k in range(n):  # byte offsets slice the input to the word's text
            s, e = int(tf2["word_start"][r][k]), int(tf2["word_end"][r][k])
            assert raw[s:e].decode("utf-8") == want[r][k]
            # the word's label is its first wordpiece's
            pos = list(tf2["wordpiece_start"][r]).index(s)
            assert tf2["word_labels"][r][k] == tf2["wordpiece_labels"][r][pos]
            assert tf2["word_scores"][r][k] == pytest.approx(tf2["wordpiece_scores"][r][pos])
        assert all(w == b"" for w in tf2["word_texts"][r][n:])
    for key in tf2:
        _same(tf2[key], tf1[key], key)


def test_characters_that_normalize_to_several_pieces_are_one_word(fresh):
    """"a…b" ("..."), "⑴" ("(1)"), "ﷺ" (four words): one word each with its byte span,
    also when the truncation keeps only the first pieces of such a character."""
    tf2, tf1 = fresh_ok(fresh[("ner", "multi")])
    for r, (text, want) in enumerate(MULTI_PIECE):
        raw = text.encode("utf-8")
        n = int(tf2["num_words"][r])
        got = [w.decode("utf-8") for w in tf2["word_texts"][r][:n]]
        assert got == want, (text, got)
        spans = [(int(tf2["word_start"][r][k]), int(tf2["word_end"][r][k])) for k in range(n)]
        assert [raw[s:e].decode("utf-8") for s, e in spans] == want, (text, spans)
        assert all(e > s for s, e in spans)
    assert list(tf2["truncated"]) == [False] * (len(MULTI_PIECE) - 2) + [True, True]
    for key in tf2:
        _same(tf2[key], tf1[key], key)


@pytest.mark.parametrize("name,prefix", [("ner", "wordpiece"), ("rtd", "token")])
def test_each_piece_of_a_character_that_normalizes_to_several_spans_it(name, prefix, fresh):
    """The pieces of "…" (". . .") each span "…": all but the last had had an empty
    span at the character's start."""
    out, _ = fresh_ok(fresh[(name, "multi")])
    for r, (text, words) in enumerate(MULTI_PIECE):
        raw = text.encode("utf-8")
        spans = [(int(s), int(e)) for s, e in zip(out[f"{prefix}_start"][r],
                                                  out[f"{prefix}_end"][r]) if s >= 0]
        assert spans and all(e > s for s, e in spans), (text, spans)
        texts = [raw[s:e].decode("utf-8") for s, e in spans]  # whole characters
        assert set(texts) <= set(words) | set(text.split()), (text, texts)
    a = [(int(s), int(e)) for s, e in zip(out[f"{prefix}_start"][0], out[f"{prefix}_end"][0])]
    assert a[1:6] == [(0, 1), (1, 4), (1, 4), (1, 4), (4, 5)]  # a . . . b in "a…b"


@pytest.mark.parametrize("name", ["squad", "squad_joint"])
def test_squad_answer_text_is_the_context_slice(name, exports, fresh):
    tf2, _ = fresh_ok(fresh[(name, "odd")])
    contexts = text_inputs(exports[name][0], ODD_TEXTS)["context"]
    for r, context in enumerate(contexts):
        s, e = int(tf2["answer_start"][r]), int(tf2["answer_end"][r])
        if r != 1:  # row 1's context has invalid UTF-8: offsets index the repaired text
            assert tf2["answer_text"][r] == context[s:e]
        if not context.strip():
            assert tf2["answer_text"][r] == b"" and not tf2["has_answer"][r]
            assert tf2["answer_score"][r] == pytest.approx(-1e9)
    if name == "squad":  # the combined rule (RECORD_EXTRAS)
        np.testing.assert_allclose(tf2["null_odds"],
                                   tf2["no_answer_score"] - tf2["answer_score"], atol=1e-3)


@pytest.mark.parametrize("name", TASKS + ("ner_ids",))
def test_warmup_requests_replay(name, exports, fresh):
    from export_helpers import python_pack

    from electra_tf.serving import warmup

    logs = warmup.read(f"{exports[name][1]}/assets.extra/{warmup.WARMUP_FILE}")
    info = _info(exports, name)
    signatures = list(info["signatures"])
    buckets = info["length_buckets"]
    assert [len(next(iter(warmup.request_inputs(g).values()))) for g in logs] == [1, 4] + [
        1] * (len(buckets) * len(signatures))
    assert {g.predict_log.request.model_spec.name for g in logs} == {name}
    # Then one request per bucket and signature, packed to that bucket.
    spec = exports[name][0]
    for i, log in enumerate(logs[2:]):
        length = buckets[i // len(signatures)]
        signature = log.predict_log.request.model_spec.signature_name
        assert signature == signatures[i % len(signatures)]
        inputs = warmup.request_inputs(log)
        if "input_word_ids" in inputs:
            assert inputs["input_word_ids"].shape == (1, length)
        else:
            texts = [inputs[n].tolist() for n in info["signatures"][signature]]
            assert python_pack(spec, *texts)["input_mask"].sum() == length, (signature, length)
    for i in range(len(logs)):
        tf2, tf1 = fresh_ok(fresh[(name, f"warmup{i}")])
        for key in tf2:
            _same(tf2[key], tf1[key], key)


def test_ids_only_export_loads_without_tf_text(exports, fresh):
    spec = exports["ner_ids"][0]
    tf2, tf1 = fresh_ok(fresh[("ner_ids", "ids")])
    for key in tf2:
        _same(tf2[key], tf1[key], key)
    _check_ids_outputs("ner", spec, _info(exports, "ner_ids"),
                       packed_for(spec, text_inputs(spec, ODD_TEXTS)), tf2)
    assert "tensorflow_text" not in fresh["modules_no_text"]
    # the text export, by contrast, needs the TF-Text ops
    failed = fresh[("ner", "without_tf_text")]
    assert "error" in failed["tf2"] and "error" in failed["tf1"]
    assert "FastBert" in failed["tf1"]["error"] or "not registered" in failed["tf1"]["error"], \
        failed["tf1"]["error"][:500]


def test_fresh_process_imported_no_project_code(fresh):
    for modules in (fresh["modules"], fresh["modules_no_text"]):
        assert "tensorflow" in modules
        assert not {"electra_tf", "export", "conftest"} & set(modules), modules


@pytest.mark.slow
def test_the_docs_python_load_and_load_saved_model_register_the_text_ops(exports):
    """tf.saved_model.load of the text export fails with "Op type not registered" (a
    TF-Text op) unless tensorflow_text is imported first (#58): docs/serving.md's
    Python snippet does it and runs as printed; so does the library's load_saved_model, in
    a fresh process that had not imported tensorflow_text (the snippet runs after it, in
    the same process)."""
    import re
    import subprocess
    import sys

    from helpers import REPO, patience

    path = exports["ner"][1]
    docs = open(os.path.join(REPO, "docs", "serving.md"), encoding="utf-8").read()
    snippet = next(block for block in re.findall(r"```python\n(.*?)```", docs, re.S)
                   if "tf.saved_model.load" in block)
    assert snippet.index("import tensorflow_text") < snippet.index("tf.saved_model.load")
    library = ("import sys\nfrom electra_tf.serving.export import load_saved_model\n"
               "print('tensorflow_text' in sys.modules)\n"
               "model = load_saved_model(sys.argv[1])\n"
               "out = model.signatures['serving_default'](text=__import__('tensorflow')"
               ".constant(['Zoë lives in Zürich']))\nprint(out['word_labels'].numpy())\n")
    # One fresh process: the library's load first (tensorflow_text not yet imported),
    # then the snippet as printed (that it imports tensorflow_text before loading: above).
    docs_snippet = snippet.replace('"/models/ner/1"', "sys.argv[1]").replace(
        "import tensorflow as tf", "import sys\nimport tensorflow as tf")
    script = library + "print('-- the docs snippet --')\n" + docs_snippet
    proc = subprocess.run([sys.executable, "-c", script, path], capture_output=True,
                          text=True, cwd=REPO, timeout=patience(300))
    assert proc.returncode == 0, proc.stderr[-3000:]
    outputs = proc.stdout.split("-- the docs snippet --\n")
    assert len(outputs) == 2, proc.stdout
    for output in outputs:
        assert "[[b'" in output, proc.stdout  # the words' labels
    assert outputs[0].splitlines()[0] == "False"  # load_saved_model imported it
