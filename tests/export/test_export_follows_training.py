"""The export serves what was trained: STS-B's label scale, SQuAD's span head (the
joint head's beam) and SQuAD 2.0's recorded null rule and threshold; a record
without them is refused in one line."""

import json
import os
import re
import shutil

import numpy as np
import pytest
from export_helpers import BEAM, QA_NA_THRESHOLD, RECORD_EXTRAS, SQUAD_PAIRS, fresh_ok, python_pack


def _task_decoding(name, spec):
    """SquadTask's predictions for SQUAD_PAIRS, from the Keras model, with the task
    options the folder records ("squad": the independent head and the combined rule)."""
    from electra_tf.core.config import FinetuningConfig
    from electra_tf.tasks.registry import task_from_config
    from electra_tf.tasks.squad import SquadExample

    fields = RECORD_EXTRAS[name]["finetuning"]
    task = task_from_config(FinetuningConfig(task_name="squad_v2", **fields))
    examples = [SquadExample(f"q{i}", q, c) for i, (q, c) in enumerate(SQUAD_PAIRS)]
    feats = task.featurize(examples, spec.tokenizer, spec.max_seq_length)
    assert len(feats) == len(examples), "each pair must fit one window"
    out = {k: np.asarray(v) for k, v in spec.model(feats.inputs, training=False).items()}
    assert ("start_top_index" in out) == (name == "squad_joint")
    return task, examples, feats, task.predictions(out, examples, feats)


@pytest.mark.parametrize("name", ["squad", "squad_joint"])
def test_squad_export_answers_as_the_task_decodes_the_window(name, exports, fresh):
    spec = exports[name][0]
    tf2, tf1 = fresh_ok(fresh[(name, "pairs")])
    for key in tf2:  # the C++ server's loader and TF2's agree
        if tf2[key].dtype.kind == "f":
            np.testing.assert_allclose(tf2[key], tf1[key], rtol=0, atol=1e-5, err_msg=key)
        else:
            np.testing.assert_array_equal(tf2[key], tf1[key], err_msg=key)
    task, examples, feats, preds = _task_decoding(name, spec)
    assert spec.no_answer_threshold == task.no_answer_threshold
    assert spec.null_rule == task.null_odds_from
    packed = python_pack(spec, [q for q, _ in SQUAD_PAIRS], [c for _, c in SQUAD_PAIRS])
    np.testing.assert_array_equal(feats.inputs["input_ids"], packed["input_word_ids"])
    for r, ex in enumerate(examples):
        p = preds[ex.qas_id]
        assert tf2["answer_text"][r].decode("utf-8") == p.text, (ex, p)
        if p.nbest:
            start = len(ex.context[:p.start_char].encode("utf-8"))
            end = len(ex.context[:p.end_char].encode("utf-8"))
            assert (int(tf2["answer_start"][r]), int(tf2["answer_end"][r])) == (start, end)
        assert tf2["answer_score"][r] == pytest.approx(p.score, abs=1e-4), ex
        assert tf2["no_answer_score"][r] == pytest.approx(p.null_score, abs=1e-4), ex
        assert tf2["null_odds"][r] == pytest.approx(p.null_odds, abs=1e-4), ex
        assert bool(tf2["has_answer"][r]) == (p.answer != ""), (ex, p)
    if name == "squad_joint":  # QA_NA_THRESHOLD splits them: the rule is exercised
        assert set(tf2["has_answer"]) == {True, False}, tf2["null_odds"]


def test_the_spec_follows_the_record(exports):
    joint, independent = exports["squad_joint"][0], exports["squad"][0]
    assert (joint.span_head, joint.null_rule, joint.no_answer_threshold) == (
        "joint", "answerable", QA_NA_THRESHOLD)
    assert joint.model.head.beam_size == BEAM
    assert (independent.span_head, independent.null_rule,
            independent.no_answer_threshold) == ("independent", "combined", 0.0)
    assert exports["stsb"][0].label_scale == (0.0, 5.0)
    with open(os.path.join(exports["squad_joint"][1], "assets.extra", "export_info.json")) as f:
        info = json.load(f)
    assert (info["span_head"], info["null_rule"], info["no_answer_threshold"]) == (
        "joint", "answerable", QA_NA_THRESHOLD)
    with open(os.path.join(exports["stsb"][1], "assets.extra", "export_info.json")) as f:
        assert json.load(f)["label_scale"] == [0.0, 5.0]


def _copy_with(finetuned_dir, tmp_path, **changes):
    out = tmp_path / "copy"
    shutil.copytree(finetuned_dir, out)
    path = out / "finetuning_config.json"
    record = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            record.pop(key, None)
        elif isinstance(value, dict):  # merged; a None value drops that key
            record[key] = {k: v for k, v in {**record.get(key, {}), **value}.items()
                           if v is not None}
        else:
            record[key] = value
    path.write_text(json.dumps(record))
    return str(out)


def test_a_record_without_its_scale_or_null_rule_is_refused_in_one_line(finetuned_dirs,
                                                                       tmp_path):
    """Not served by a guess (raw scores, the combined rule): one format, one line."""
    from electra_tf.core.errors import InputError
    from electra_tf.serving.export import load_spec

    folder = _copy_with(finetuned_dirs["stsb"], tmp_path / "stsb", label_scale=None)
    with pytest.raises(InputError) as raised:
        load_spec("sequence_classification", folder)
    assert str(raised.value) == (f"--checkpoint: {folder}/finetuning_config.json: lacks "
                                 "label_scale; not a file electra_tf wrote")
    folder = _copy_with(finetuned_dirs["squad"], tmp_path / "squad",
                        head_options={"span_head": None}, finetuning={"squad_null_rule": None})
    with pytest.raises(InputError, match=r"lacks head_options.span_head, "
                                         r"finetuning.squad_null_rule; not a file"):
        load_spec("squad", folder)


@pytest.mark.parametrize("changes,message", [
    ({"max_seq_length": "abc"}, "max_seq_length must be a whole number >= 1, got 'abc'"),
    ({"head_options": [1, 2]}, "head_options must be a JSON object, got [1, 2]"),
    ({"finetuning": []}, "finetuning must be a JSON object, got []"),
    ({"run": "x"}, "run must be a JSON object, got 'x'"),
    ({"encoder": {"hidden_size": "32"}}, "encoder: hidden_size must be an integer, got '32'"),
    ({"finetuning": {"do_lower_case": "false"}},
     "finetuning.do_lower_case must be true or false, got 'false'"),
    ({"finetuning": {"doc_stride": 0}}, "finetuning.doc_stride must be a whole number >= 1, "
                                        "got 0"),
    ({"finetuning": {"max_query_length": "64"}},
     "finetuning.max_query_length must be a whole number >= 1, got '64'"),
    # names a server could not tell apart ("" is also the served padding): had exported
    ({"label_names": ["0", "0"]}, "label_names must be distinct non-empty names"),
    ({"label_names": ["", "1"]}, "label_names must be distinct non-empty names"),
])
def test_a_record_with_values_of_the_wrong_type_is_one_line(finetuned_dirs, tmp_path, changes,
                                                            message):
    """A hand-edited record had ended in tracebacks (or, "false" as a string, in a
    silently lower-casing export)."""
    from electra_tf.core.errors import InputError
    from electra_tf.serving.export import load_spec

    folder = _copy_with(finetuned_dirs["mrpc"], tmp_path, **changes)
    with pytest.raises(InputError, match=re.escape(message)):
        load_spec("sequence_classification", folder)


def test_regression_score_is_logit_times_max_plus_min():
    from electra_tf.serving import graph

    logits = np.array([[0.0], [0.5], [1.0]], np.float32)
    out = graph.classification_outputs(logits, (), True, (1.0, 5.0))
    np.testing.assert_allclose(out["score"].numpy(), [1.0, 3.5, 6.0])
    np.testing.assert_allclose(graph.classification_outputs(logits, (), True)["score"],
                               [0.0, 0.5, 1.0])


def test_a_joint_model_recorded_with_the_combined_rule_is_refused(finetuned_dirs, tmp_path):
    from electra_tf.core.errors import InputError
    from electra_tf.serving.export import load_spec

    folder = _copy_with(finetuned_dirs["squad_joint"], tmp_path,
                        finetuning={"squad_null_rule": "combined"})
    with pytest.raises(InputError, match="combined null rule"):
        load_spec("squad", folder)


def test_squad_v1_joint_head_in_graph_decoding_is_the_task_decoding(exports):
    """SQuAD 1.1 with the joint head (no answerability, no end logit at [CLS]): the
    span of the beam as SquadTask decodes it; no null score (-1e9)."""
    import keras
    import tensorflow as tf

    from electra_tf.modeling import build_discriminator
    from electra_tf.serving import signatures
    from electra_tf.serving.export import ServingSpec
    from electra_tf.tasks.model import FinetuningModel
    from electra_tf.tasks.squad import SquadExample, SquadTask

    base = exports["squad_joint"][0]
    keras.utils.set_random_seed(11)
    encoder = build_discriminator(base.model.encoder.config).encoder
    model = FinetuningModel(encoder, "squad", 1, span_head="joint", beam_size=BEAM)
    model.build()
    for v in model.head.trainable_variables:
        v.assign(v.numpy() * 5.0)
    spec = ServingSpec("squad", model, base.tokenizer, base.max_seq_length,
                       task_name="squad_v1", span_head="joint")
    packed = python_pack(spec, [q for q, _ in SQUAD_PAIRS], [c for _, c in SQUAD_PAIRS])
    out = {k: v.numpy() for k, v in signatures.ids_outputs(
        spec, *(tf.constant(packed[k]) for k in signatures.IDS_INPUTS)).items()}
    assert "end_logits" not in out and "answerable_logits" not in out
    task = SquadTask("1.1", beam_size=BEAM)
    examples = [SquadExample(f"q{i}", q, c) for i, (q, c) in enumerate(SQUAD_PAIRS)]
    feats = task.featurize(examples, spec.tokenizer, spec.max_seq_length)
    keras_out = {k: np.asarray(v) for k, v in model(feats.inputs, training=False).items()}
    preds = task.predictions(keras_out, examples, feats)
    for r, ex in enumerate(examples):
        p, w = preds[ex.qas_id], feats.extra[r]
        assert out["has_answer"][r] == bool(p.nbest)
        assert out["answer_score"][r] == pytest.approx(p.score, abs=1e-4)
        if p.nbest:  # token positions -> the characters SquadTask sliced
            s = int(out["answer_start_index"][r]) - w.context_offset + w.doc_start
            e = int(out["answer_end_index"][r]) - w.context_offset + w.doc_start
            assert (w.char_starts[s], w.char_ends[e]) == (p.start_char, p.end_char)
    np.testing.assert_array_equal(out["no_answer_score"], np.full(len(examples), -1e9,
                                                                   np.float32))


def test_a_served_tagger_read_per_conll_word_gives_the_tasks_predictions(finetuned_dirs):
    """docs/serving.md's reading of a served tagger for CoNLL words that hold
    punctuation ("German-born", "U.S.": several served words; here of the tiny vocabulary's
    words): the label of the first
    served word starting inside each, with the words sent joined by spaces, is the
    Keras model's prediction for that word as fine-tuning scores it."""
    from electra_tf import Predictor, folders
    from electra_tf.tasks.tagging import TaggingExample, TaggingTask

    ner = Predictor.open(finetuned_dirs["ner"])
    record = folders.FinetunedFolder.open(finetuned_dirs["ner"]).record
    task = TaggingTask(label_names=record.label_names, scheme=None)
    sentences = [["model-token", "reads", "a"], ["the", "small-generator"],
                 ["token", "was", "re.placed", "."]]
    examples = [TaggingExample(words, None) for words in sentences]
    feats = task.featurize(examples, ner.spec.tokenizer, ner.spec.max_seq_length)
    out = {k: np.asarray(v) for k, v in ner.spec.model(feats.inputs, training=False).items()}
    preds = task.predictions(out, examples, feats)
    served = ner.outputs([" ".join(words) for words in sentences])
    assert not served["truncated"].any() and len(feats) == len(sentences)  # one window each
    for r, words in enumerate(sentences):
        starts = list(served["word_start"][r][:served["num_words"][r]])
        assert len(starts) > len(words)  # the hyphenated words are several served words
        read, begin = [], 0
        for word in words:
            end = begin + len(word.encode("utf-8"))
            first = next(k for k, s in enumerate(starts) if begin <= s < end)
            read.append(str(served["word_labels"][r][first]))
            begin = end + 1
        assert read == preds[r], (words, read, preds[r])
    assert len({t for p in preds for t in p}) > 1, preds  # the head tells words apart
