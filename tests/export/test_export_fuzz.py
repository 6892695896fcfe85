"""Fuzz: odd strings (fuzz_texts.py) through the text signatures, in a fresh process.

For serving_default of the token_classification export (ner), the
sequence_classification pair export (mrpc) and the squad export, in both
loaders (TF2 and the server's TF1 session loader): no error (nor crash:
run_fresh fails on a non-zero return code), every output's batch size is the
input's, floats are finite, the loaders agree; ner's words are never empty,
their byte spans lie within the input (after invalid UTF-8 was replaced by
U+FFFD, what the offsets index) and do not overlap, and their texts are those
slices; squad's answer is the context slice and never empty when a span was
found. The default suite runs a few hundred strings (in conftest.py's fresh
process), -m slow 1,000 others (seed 1; 3,000 had taken 4-5 minutes of a slow 2-core
CI run, 10,000 longer still).
"""

import numpy as np
import pytest
from export_helpers import run_fresh
from fuzz_texts import fuzz_jobs, odd_texts

from electra_tf.serving.graph import NO_SPAN_SCORE


def _repaired(texts):
    """What the offsets index: invalid UTF-8 replaced by U+FFFD, as the graph does."""
    import tensorflow as tf

    if len(texts) == 0:
        return []
    return list(tf.strings.unicode_transcode(tf.constant(texts, tf.string), "UTF-8", "UTF-8",
                                             errors="replace", replacement_char=0xFFFD).numpy())


def _check_words(texts, out):
    repaired = _repaired(texts)
    for r, raw in enumerate(repaired):
        n = int(out["num_words"][r])
        starts, ends = out["word_start"][r], out["word_end"][r]
        prev_end = 0
        for k in range(n):
            s, e = int(starts[k]), int(ends[k])
            word = out["word_texts"][r][k]
            assert prev_end <= s < e <= len(raw), (texts[r][:200], k, s, e, prev_end)
            assert word == raw[s:e] and word, (texts[r][:200], k, word)
            prev_end = e
        assert all(w == b"" for w in out["word_texts"][r][n:])
        assert all(int(v) == -1 for v in starts[n:]) and all(int(v) == -1 for v in ends[n:])


def _check_answers(contexts, out):
    for r, raw in enumerate(_repaired(contexts)):
        s, e = int(out["answer_start"][r]), int(out["answer_end"][r])
        assert 0 <= s <= e <= len(raw) and out["answer_text"][r] == raw[s:e]
        if out["answer_score"][r] != pytest.approx(NO_SPAN_SCORE):  # a span: never empty
            assert s < e, (contexts[r][:200], s, e)


def _check(meta, results):
    assert len(results) == len(meta) > 0
    for (name, inputs), result in zip(meta, results):
        batch = len(next(iter(inputs.values())))
        for loader in ("tf2", "tf1"):
            out = result[loader]
            assert "error" not in out, (name, loader, out.get("error"), inputs)
            for key, value in out.items():
                assert value.shape[:1] == (batch,), (name, loader, key, value.shape, batch)
                if value.dtype.kind == "f":
                    assert np.all(np.isfinite(value)), (name, key)
        for key, value in result["tf2"].items():
            if value.dtype.kind == "f":
                np.testing.assert_allclose(value, result["tf1"][key], atol=1e-5, err_msg=key)
            else:
                np.testing.assert_array_equal(value, result["tf1"][key], err_msg=key)
        out = result["tf2"]
        if name == "ner":
            _check_words(list(inputs["text"]), out)
        elif name == "squad":
            _check_answers(list(inputs["context"]), out)
        else:
            np.testing.assert_allclose(out["probabilities"].sum(-1), 1.0, atol=1e-5)


def test_fuzz_text_signatures(fresh):
    """300 strings (FUZZ_DEFAULT), run in conftest.py's fresh process."""
    meta, results = fresh["fuzz"]
    _check(meta, results)


@pytest.mark.slow
def test_fuzz_text_signatures_1k(exports, tmp_path):
    jobs, meta = fuzz_jobs(exports, odd_texts(1_000, 1), 1)
    _check(meta, run_fresh(jobs, str(tmp_path))["results"])
