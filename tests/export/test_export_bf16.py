"""--precision=bf16: the encoder's dense kernels stored and multiplied in bfloat16.

conftest.py's "ner_bf16" is the bf16 export of the "ner" folder; its fresh
process (TF2 loader and the server's TF1 session loader) ran both on the same
requests.
"""

import dataclasses
import json
import os

import numpy as np
import pytest
from export_helpers import ALIGN_TEXTS, fresh_ok
from helpers import write_cpuinfo

# The tiny tagging model's logits spread over about 2.3 (conftest: a head 5x the
# init); its bfloat16 kernels moved them by at most 0.0033.
LOGIT_TOL = 0.02


def test_bf16_export_answers_as_the_float32_one_within_rounding(fresh):
    f32, _ = fresh_ok(fresh[("ner", "ids")])
    tf2, tf1 = fresh_ok(fresh[("ner_bf16", "ids")])  # the same packed ODD_TEXTS
    for key in tf2:  # both loaders run the one graph
        if tf2[key].dtype.kind == "f":
            np.testing.assert_allclose(tf2[key], tf1[key], rtol=0, atol=1e-5, err_msg=key)
        else:
            np.testing.assert_array_equal(tf2[key], tf1[key], err_msg=key)
    logits, want = tf2["tag_logits"], f32["tag_logits"]
    diff = np.abs(logits - want)
    assert 0 < diff.max() <= LOGIT_TOL, diff.max()  # bfloat16 products ran, and rounded
    assert np.ptp(want) > 50 * LOGIT_TOL  # the tolerance is small beside the logits' spread
    # The tag is the float32 export's wherever its best two logits are further apart
    # than the rounding could move them.
    top2 = np.sort(want, axis=-1)[..., -2:]
    clear = (top2[..., 1] - top2[..., 0]) > 2 * LOGIT_TOL
    assert clear.mean() > 0.5
    np.testing.assert_array_equal(tf2["tag_ids"][clear], f32["tag_ids"][clear])


def test_bf16_text_signature_finds_the_same_words(fresh):
    f32, _ = fresh_ok(fresh[("ner", "align")])
    tf2, tf1 = fresh_ok(fresh[("ner_bf16", "align")])
    for key in ("num_words", "word_texts", "word_start", "word_end", "wordpiece_tokens"):
        np.testing.assert_array_equal(tf2[key], f32[key], err_msg=key)
        np.testing.assert_array_equal(tf1[key], f32[key], err_msg=key)
    assert len(tf2["num_words"]) == len(ALIGN_TEXTS)
    np.testing.assert_allclose(tf2["word_scores"], f32["word_scores"], atol=LOGIT_TOL)


def test_the_kernels_are_stored_once_in_bfloat16(exports):
    import tensorflow as tf

    def variables(name):
        reader = tf.train.load_checkpoint(os.path.join(exports[name][1], "variables",
                                                       "variables"))
        shapes = reader.get_variable_to_shape_map()
        return {k: (v, shapes[k]) for k, v in reader.get_variable_to_dtype_map().items()
                if k.endswith(".ATTRIBUTES/VARIABLE_VALUE")}

    f32, b16 = variables("ner"), variables("ner_bf16")
    config = exports["ner"][0].model.encoder.config
    kernels = 6 * config.num_hidden_layers + (config.embedding_size != config.hidden_size)
    assert sum(d == tf.bfloat16 for d, _ in b16.values()) == kernels
    assert not any(d == tf.bfloat16 for d, _ in f32.values())
    assert len(b16) == len(f32)  # each bfloat16 kernel in place of its float32 one

    def size(vs):
        return sum(d.size * int(np.prod(s)) for d, s in vs.values())
    assert size(b16) < size(f32)
    for name, precision in (("ner", "fp32"), ("ner_bf16", "bf16")):
        path = os.path.join(exports[name][1], "assets.extra", "export_info.json")
        with open(path) as f:
            assert json.load(f)["precision"] == precision


def test_an_unknown_precision_is_refused(exports):
    from electra_tf.core.errors import InputError

    with pytest.raises(InputError, match="--precision must be one of fp32, bf16, got 'fp16'"):
        dataclasses.replace(exports["ner"][0], precision="fp16")


@pytest.mark.parametrize("flags, says", [
    ("fpu sse2 avx512f avx512_vnni avx512vl", True),  # AVX-512 without BF16 (Ice Lake)
    ("fpu avx512f avx512_bf16 avx512vl", False),
    ("fpu avx512f amx_bf16 amx_tile", False),
    ("", False),  # no flags read: nothing is known
])
def test_the_command_notes_emulated_bf16(tmp_path, flags, says):
    from electra_tf.serving.export import emulated_bf16_note

    note = emulated_bf16_note(write_cpuinfo(tmp_path / "cpuinfo", flags))
    assert (note is not None) == says, note
    assert not says or "no AVX512-BF16 or AMX" in note
    assert emulated_bf16_note(str(tmp_path / "absent")) is None  # not Linux


@pytest.mark.slow  # a whole export in its own process; the library's path is tested above
def test_the_command_writes_a_bf16_export(finetuned_dirs, tmp_path):
    from helpers import run_module

    proc = run_module("export.export_saved_model", "--task=token_classification",
                      f"--checkpoint={finetuned_dirs['ner']}", f"--model_base={tmp_path}",
                      "--model_name=ner", "--precision=bf16", "--ids_only", "--nowarmup",
                      "--max_answer_length=9", "--doc_stride=64", "--length_buckets=8,4096")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ids only, bf16 kernels) -> " in proc.stderr
    # flags that do nothing here are named (they had been taken without a word)
    assert ("[export] note: --max_answer_length is an option of question answering; a "
            "token_classification export has no question or answer") in proc.stderr
    assert ("[export] note: --doc_stride is an option of question answering; a "
            "token_classification export has no question or answer") in proc.stderr
    assert "[export] note: --length_buckets 4096 past the window (max_seq_length 16, " \
           "the last bucket) left out" in proc.stderr
    from electra_tf.serving.export import emulated_bf16_note

    # The note comes where this machine's CPU emulates bfloat16, and only there.
    assert ("[export] note: this CPU has no AVX512-BF16" in proc.stderr) == bool(
        emulated_bf16_note()), proc.stderr[-2000:]
    with open(tmp_path / "ner" / "1" / "assets.extra" / "export_info.json") as f:
        assert json.load(f)["precision"] == "bf16"
