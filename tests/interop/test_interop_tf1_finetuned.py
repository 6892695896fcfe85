"""Import of the original's fine-tuned checkpoints (run_finetuning.py's variable names).

Each checkpoint holds what the original's FinetuningModel builds: the encoder under
`electra/` (no discriminator_predictions: fine-tuning builds none) and the task's head
in `task_specific/<task>/`, whose layers tf.layers.dense names dense, dense_1, ... in the
order the task's get_prediction_module builds them (classification_tasks.py,
tagging_tasks.py, qa_tasks.py), plus the Adam slots and global_step. The heads' logits
are computed in NumPy from the original's formulas on the same weights.
"""

import json
import math
import os

import numpy as np
import pytest

from electra_tf.folders import FinetunedFolder
from electra_tf.interop import core, tf1

TOL = 1e-4
_erf = np.vectorize(math.erf)


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _head(rng, h, layers):
    """{task_specific/<task>/<layer>/kernel|bias: array} for (layer, n_in, n_out) triples."""
    out = {}
    for name, n_in, n_out in layers:
        out[f"{name}/kernel"] = rng.normal(0, 0.3, (n_in, n_out)).astype(np.float32)
        out[f"{name}/bias"] = rng.normal(0, 0.1, (n_out,)).astype(np.float32)
    return out


def _checkpoint(h, tmp_path, task, layers, seed=0, vocab=True, extra=None):
    """A fine-tuned checkpoint of the original: encoder + task_specific/<task>/ head."""
    rng = np.random.default_rng(seed + 100)
    weights = {k: v for k, v in h.original_weights(seed=seed, generator=False).items()
               if not k.startswith("discriminator_predictions/")}
    head = {f"task_specific/{task}/{k}": v for k, v in _head(rng, h, layers).items()}
    weights.update(head, **(extra or {}))
    folder = tmp_path / "ckpt"
    prefix = h.write_tf1_checkpoint(folder / "model.ckpt-3000", h.with_optimizer_state(weights))
    if vocab:
        tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + \
            [f"w{i}" for i in range(h.sizes["VOCAB"] - 5)]
        (folder / "vocab.txt").write_text("\n".join(tokens) + "\n")
    return prefix, weights


def _import(h, tmp_path, prefix, **options):
    out = str(tmp_path / "out")
    report = tf1.import_checkpoint(prefix, "small", out, h.TINY_OVERRIDES, **options)
    folder = FinetunedFolder.open(out)
    model, record = folder.load_model(), folder.record
    return out, report, model, record


def _answer_mask(inputs):
    """qa_tasks.py: input_mask * segment_ids, plus [CLS]."""
    mask = inputs["input_mask"] * inputs["segment_ids"]
    mask[:, 0] = 1
    return mask.astype(bool)


def _np_dense(x, w, name):
    return x @ np.float64(w[f"{name}/kernel"]) + np.float64(w[f"{name}/bias"])


H = 32  # tests/interop/conftest.py HIDDEN


def test_classification_head_gives_the_originals_logits(h, tmp_path):
    task, labels = "mnli", ["contradiction", "entailment", "neutral"]
    prefix, w = _checkpoint(h, tmp_path, task, [("dense", H, len(labels))], seed=1)
    out, report, model, record = _import(h, tmp_path, prefix)
    assert (record.task, record.head, record.label_names) == (task, "sequence_classification",
                                                              tuple(labels))
    assert report["head_mapping"][f"task_specific/{task}/dense/kernel"].endswith(
        "output/kernel")
    assert len(report["skipped"]) == 2 * len(w) + 1  # the Adam slots and global_step
    assert report["left_at_init"] and all(n.startswith("discriminator_predictions/")
                                          for n in report["left_at_init"])
    inputs = h.padded_inputs(seed=2)
    seq = h.np_encoder(w, "electra", inputs, heads=h.sizes["HEADS"])
    # classification_tasks.py: logits = dense(num_labels) of get_pooled_output() ([CLS])
    expected = _np_dense(seq[:, 0], w, f"task_specific/{task}/dense")
    np.testing.assert_allclose(model(inputs)["logits"], expected, atol=TOL, rtol=0)
    assert record.max_seq_length == 32  # min(128, the model's 32 positions)
    # Its discriminator has no trained RTD head (the original's fine-tuning drops it):
    # --task=rtd had served the random initial weights.
    from electra_tf.core.errors import InputError
    from electra_tf.serving.export import load_spec

    with pytest.raises(InputError, match=r"holds no trained replaced-token head: it was "
                                          r"converted from a checkpoint without one"):
        load_spec("rtd", out)


def test_regression_head_keeps_the_originals_scale(h, tmp_path):
    """The original's STS-B trains on score / 5 (RegressionTask), as electra_tf's does."""
    prefix, w = _checkpoint(h, tmp_path, "sts", [("dense", H, 1)], seed=3)
    out, report, model, record = _import(h, tmp_path, prefix)
    assert (record.task, record.regression, record.label_scale) == ("stsb", True, (0.0, 5.0))
    inputs = h.padded_inputs(seed=4)
    seq = h.np_encoder(w, "electra", inputs, heads=h.sizes["HEADS"])
    expected = _np_dense(seq[:, 0], w, "task_specific/sts/dense")[:, 0]
    np.testing.assert_allclose(model(inputs)["logits"], expected, atol=TOL, rtol=0)


def test_tagging_head_reads_segment_zero_as_the_original_read_one(h, tmp_path):
    tags = ["B-NP", "E-NP", "I-NP", "O", "S-NP"]  # the original's chunk tags: BIOES, sorted
    prefix, w = _checkpoint(h, tmp_path, "chunk", [("dense", H, len(tags))], seed=5)
    out, report, model, record = _import(h, tmp_path, prefix, label_names=",".join(tags))
    assert (record.task, record.head, record.label_names) == ("chunking",
                                                              "token_classification",
                                                              tuple(tags))
    assert record.finetuning["tagging_scheme"] == "BIOES"
    assert record.max_seq_length == 32  # the original's 256, capped at the 32 positions
    assert report["adjusted"] and "token_type_embeddings" in report["adjusted"][0]
    inputs = h.padded_inputs(seed=6)
    # tagging_tasks.py feeds segment ids 1 on every real token; electra_tf's tagger feeds 0
    original = dict(inputs, segment_ids=inputs["input_mask"].copy())
    seq = h.np_encoder(w, "electra", original, heads=h.sizes["HEADS"])
    expected = _np_dense(seq, w, "task_specific/chunk/dense")
    got = np.asarray(model(dict(inputs, segment_ids=np.zeros_like(inputs["segment_ids"])))
                     ["tag_logits"])
    real = inputs["input_mask"].astype(bool)
    np.testing.assert_allclose(got[real], expected[real], atol=TOL, rtol=0)


def test_tagging_labels_from_the_tasks_files_as_the_original_orders_them(h, tmp_path):
    """tagging_tasks.py: the sorted tags of train/dev/test, made BIOES for chunk."""
    data = tmp_path / "chunk"
    data.mkdir()
    (data / "train.txt").write_text("-DOCSTART- -X- O\n\nHe PRP B-NP\nreckons VBZ B-VP\n"
                                    "the DT B-NP\ncurrent JJ I-NP\naccount NN I-NP\n. . O\n\n")
    # The original reads a sentence when a blank line ends it: dev.txt's last is not read.
    (data / "dev.txt").write_text("rose VBD B-VP\nsharply RB B-ADVP\n\nunread NN B-PP\n")
    want = ["B-NP", "E-NP", "I-NP", "O", "S-ADVP", "S-NP", "S-VP"]
    assert tf1.original_tag_names(str(data), "chunk") == want
    assert tf1.original_tag_names(str(data), "pos") == ["B-ADVP", "B-NP", "B-VP", "I-NP", "O"]
    prefix, _ = _checkpoint(h, tmp_path, "chunk", [("dense", H, len(want))], seed=17)
    out, _, _, record = _import(h, tmp_path, prefix, data_dir=str(data))
    assert record.label_names == tuple(want) and record.finetuning["tagging_scheme"] == "BIOES"
    # Evaluated without --tagging_scheme: the folder's BIOES tags (refused as "not BIO
    # tags" before) read its BIO dev file made BIOES, as the original scores chunking.
    from helpers import finetune

    (data / "dev.txt").write_text("rose VBD B-VP\nsharply RB B-ADVP\n\n")
    _, results = finetune("--task_name=chunking", f"--init_checkpoint={out}",
                          "--do_train=false", f"--data_dir={data}",
                          f"--model_dir={tmp_path / 'eval'}")
    assert set(results["eval"]["dev"]) >= {"f1", "precision", "recall"}
    # Training it on under BIO would learn BIO tags anew, its E-/S- columns gone: refused.
    from electra_tf.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"holds a BIOES tagger; pass --tagging_scheme=BIOES "
                                          r"to continue it"):
        finetune("--task_name=chunking", f"--init_checkpoint={out}", f"--data_dir={data}",
                 f"--model_dir={tmp_path / 'more'}", "--num_train_epochs=1")
    with pytest.raises(core.ConversionError, match="holds no train.txt, dev.txt or test.txt"):
        tf1.original_tag_names(str(tmp_path), "chunk")


def _qa_layers(joint=True, answerable=True):
    layers = [("dense", H, 1)] + ([("qa_hidden", 2 * H, 512), ("dense_1", 512, 1)] if joint
                                   else [("dense_1", H, 1)])
    return layers + ([("dense_2", 2 * H, 512), ("dense_3", 512, 1)] if answerable else [])


def _np_answerable(w, seq, start_logits, scope):
    """qa_tasks.py answerable_uses_start_logits: dense(1)(gelu(dense(512)([h_cls, sum p h])))."""
    p = np.exp(start_logits - start_logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    rep = np.concatenate([seq[:, 0], np.einsum("bl,blh->bh", p, seq)], -1)
    hidden = _gelu(_np_dense(rep, w, f"task_specific/{scope}/dense_2"))
    return _np_dense(hidden, w, f"task_specific/{scope}/dense_3")[:, 0]


def test_joint_squad_head_gives_the_originals_beam(h, tmp_path):
    prefix, w = _checkpoint(h, tmp_path, "squad", _qa_layers(), seed=7)
    out, report, model, record = _import(h, tmp_path, prefix)
    assert (record.task, record.answerable, record.head_options["span_head"]) == \
        ("squad_v2", True, "joint")
    assert record.max_seq_length == 32  # the original's 512, capped at 32 positions
    inputs = h.padded_inputs(seed=8)
    got = {k: np.asarray(v) for k, v in model(inputs).items()}
    seq = h.np_encoder(w, "electra", inputs, heads=h.sizes["HEADS"])
    allowed = _answer_mask(inputs)
    start = _np_dense(seq, w, "task_specific/squad/dense")[..., 0] + 1000.0 * (allowed - 1)
    log_p = start - start.max(-1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
    for b in range(len(seq)):
        n = int(allowed[b].sum())  # the beam's allowed entries (the rest are masked)
        np.testing.assert_allclose(got["start_top_log_probs"][b, :n],
                                   np.sort(log_p[b])[::-1][:n], atol=TOL, rtol=0)
        for k, s in enumerate(got["start_top_index"][b, :n]):
            assert allowed[b, s]
            # qa_tasks.py: dense(1)(gelu(qa_hidden(concat(h_s, h_e)))) at every e
            rep = np.concatenate([np.repeat(seq[b, s][None], seq.shape[1], 0), seq[b]], -1)
            end = _np_dense(_gelu(_np_dense(rep, w, "task_specific/squad/qa_hidden")), w,
                            "task_specific/squad/dense_1")[:, 0] + 1000.0 * (allowed[b] - 1)
            end_lp = end - end.max() - np.log(np.exp(end - end.max()).sum())
            np.testing.assert_allclose(got["end_top_log_probs"][b, k, :n],
                                       np.sort(end_lp)[::-1][:n], atol=TOL, rtol=0)
            np.testing.assert_array_equal(got["end_top_index"][b, k, :n],
                                          np.argsort(-end_lp, kind="stable")[:n])
    # The original's logit is that the question is impossible (trained against
    # is_impossible), electra_tf's that it is answerable: the import negates it (copied,
    # every no-answer decision had been the wrong way round).
    np.testing.assert_allclose(got["answerable_logits"],
                               -_np_answerable(w, seq, start, "squad"), atol=TOL, rtol=0)
    assert sorted(a.split(":")[0] for a in report["adjusted"]) == [
        "task_specific/answerable_output/bias", "task_specific/answerable_output/kernel"]
    # Evaluated without its classifier: the joint head has no end logit at [CLS] for that
    # rule, and the folder's head is the joint one (one line; it had been a traceback).
    from helpers import finetune

    from electra_tf.core.errors import ConfigError
    from electra_tf.tasks.squad import SquadExample

    data = _squad_v2_dev(tmp_path, [SquadExample("q0", "w1 w2", "w3 w4 w5 w6")])
    with pytest.raises(ConfigError, match=r"^--do_train=false evaluates --init_checkpoint=.*'s "
                                          r"model as it was trained \(--joint_prediction=True\)"
                                          r": without the answerability classifier"):
        finetune("--task_name=squad_v2", f"--init_checkpoint={out}", "--do_train=false",
                 "--answerable_classifier=false", "--joint_prediction=false",
                 f"--data_dir={data}", f"--model_dir={tmp_path / 'eval'}")
    assert not (tmp_path / "eval").exists()


def test_independent_squad_v1_head_drops_the_unread_answerability_classifier(h, tmp_path):
    """The original trains the answerability classifier for SQuAD 1.1 too; its predictions
    never read it (qa_metrics.py, v2 only), so the import skips it and says so."""
    prefix, w = _checkpoint(h, tmp_path, "squadv1", _qa_layers(joint=False), seed=9)
    out, report, model, record = _import(h, tmp_path, prefix)
    assert (record.task, record.answerable, record.head_options["span_head"]) == \
        ("squad_v1", False, "independent")
    dropped = [s for s in report["skipped"] if "answerability classifier" in s]
    assert sorted(s.split()[0] for s in dropped) == sorted(
        f"task_specific/squadv1/{n}/{leaf}" for n in ("dense_2", "dense_3")
        for leaf in ("kernel", "bias"))
    inputs = h.padded_inputs(seed=10)
    got = model(inputs)
    seq = h.np_encoder(w, "electra", inputs, heads=h.sizes["HEADS"])
    allowed = _answer_mask(inputs)
    for key, layer in (("start_logits", "dense"), ("end_logits", "dense_1")):
        expected = _np_dense(seq, w, f"task_specific/squadv1/{layer}")[..., 0]
        np.testing.assert_allclose(np.asarray(got[key])[allowed], expected[allowed],
                                   atol=TOL, rtol=0)
    # Evaluated on SQuAD 2.0 data: without a classifier (it had been a random one, which
    # answered every question with no answer), by the combined rule.
    from helpers import finetune

    from electra_tf.tasks.squad import SquadExample

    data = _squad_v2_dev(tmp_path, [SquadExample("q0", "w1 w2", "w3 w4 w5 w6")])
    trainer, _ = finetune("--task_name=squad_v2", f"--init_checkpoint={out}",
                          "--do_train=false",  # the folder's independent head, unasked
                          f"--data_dir={data}", f"--model_dir={tmp_path / 'eval'}")
    assert not trainer.model.head.answerable and trainer.task.null_odds_from == "combined"
    assert trainer.model.head.span_head == "independent"


def test_a_one_layer_answerability_classifier_is_the_originals_without_start_logits(
        h, tmp_path):
    """answerable_uses_start_logits=False (dense_2 alone, dense(1) of [CLS]): imported
    as that classifier (it had been refused), negated as the other; the folder records
    it, a fine-tuning run continues it only when told, and it trains from scratch so."""
    prefix, w = _checkpoint(h, tmp_path, "squad",
                            _qa_layers(answerable=False) + [("dense_2", H, 1)], seed=23)
    out, report, model, record = _import(h, tmp_path, prefix)
    assert record.answerable and record.head_options == {
        "span_head": "joint", "beam_size": 20, "answerable_uses_start_logits": False}
    assert record.finetuning["answerable_uses_start_logits"] is False
    inputs = h.padded_inputs(seed=24)
    got = np.asarray(model(inputs)["answerable_logits"])
    seq = h.np_encoder(w, "electra", inputs, heads=h.sizes["HEADS"])
    np.testing.assert_allclose(got, -_np_dense(seq[:, 0], w, "task_specific/squad/dense_2")[:, 0],
                               atol=TOL, rtol=0)
    assert not hasattr(model.head, "answerable_dense")
    from helpers import finetune

    from electra_tf.core.errors import ConfigError
    from electra_tf.tasks.squad import SquadExample

    data = _squad_v2_dev(tmp_path, [SquadExample("q0", "w1 w2", "w3 w4 w5 w6")])
    trainer, _ = finetune("--task_name=squad_v2", f"--init_checkpoint={out}",
                          "--do_train=false", f"--data_dir={data}",
                          f"--model_dir={tmp_path / 'eval'}")  # as it was trained, unasked
    assert not trainer.model.head.uses_start_logits
    np.testing.assert_allclose(trainer.model.head.answerable_output.kernel.numpy(),
                               -w["task_specific/squad/dense_2/kernel"], atol=1e-6)
    with pytest.raises(ConfigError, match=r"answerable_uses_start_logits=false; pass "
                                          r"--answerable_uses_start_logits=false"):
        finetune("--task_name=squad_v2", f"--init_checkpoint={out}", f"--data_dir={data}",
                 f"--model_dir={tmp_path / 'more'}", "--num_train_epochs=1")


def _squad_v2_dev(tmp_path, examples):
    """A data_dir whose dev-v2.0.json asks `examples` (SquadExample), all unanswerable."""
    data = tmp_path / "squad"
    data.mkdir()
    qas = [{"id": ex.qas_id, "question": ex.question, "is_impossible": True, "answers": []}
           for ex in examples]
    (data / "dev-v2.0.json").write_text(json.dumps({"version": "v2.0", "data": [
        {"title": "t", "paragraphs": [{"context": ex.context, "qas": [q]}
                                      for ex, q in zip(examples, qas)]}]}))
    return data


def test_squad_v2_without_the_answerability_classifier_scores_no_answer_as_the_original(
        h, tmp_path):
    """answerable_classifier=False: qa_metrics.py's null score is min over windows of
    start[0] + end[0], against the best span's start + end at qa_na_threshold (-2.75):
    the combined rule without an answerability logit. Eval and the export agree."""
    import tensorflow as tf

    from electra_tf.core.config import FinetuningConfig
    from electra_tf.serving.export import load_spec
    from electra_tf.serving.signatures import ids_outputs
    from electra_tf.tasks.registry import task_from_config
    from electra_tf.tasks.squad import SquadExample

    prefix, w = _checkpoint(h, tmp_path, "squad", _qa_layers(joint=False, answerable=False),
                            seed=19)
    out, report, model, record = _import(h, tmp_path, prefix)
    assert (record.task, record.answerable, record.head_options["span_head"]) == \
        ("squad_v2", False, "independent")
    assert (record.finetuning["squad_null_rule"], record.finetuning["no_answer_threshold"],
            record.finetuning["answerable_classifier"]) == ("combined", -2.75, False)
    spec = load_spec("squad", out)
    task = task_from_config(FinetuningConfig.from_dict(record.finetuning))
    rng = np.random.default_rng(20)
    examples = [SquadExample(f"q{i}", " ".join(f"w{j}" for j in rng.integers(0, 30, 3)),
                             " ".join(f"w{j}" for j in rng.integers(0, 30, 12)))
                for i in range(12)]
    feats = task.featurize(examples, spec.tokenizer, spec.max_seq_length)
    assert len(feats) == len(examples)
    outputs = {k: np.asarray(v) for k, v in model(feats.inputs).items()}
    assert "answerable_logits" not in outputs
    preds = task.predictions(outputs, examples, feats)
    seq = h.np_encoder(w, "electra", feats.inputs, heads=h.sizes["HEADS"])
    null = (_np_dense(seq[:, 0], w, "task_specific/squad/dense")
            + _np_dense(seq[:, 0], w, "task_specific/squad/dense_1"))[:, 0]
    served = ids_outputs(spec, *(tf.constant(feats.inputs[k]) for k in
                                 ("input_ids", "input_mask", "segment_ids")))
    for r, ex in enumerate(examples):
        p = preds[ex.qas_id]
        assert p.null_score == pytest.approx(null[r], abs=1e-4)
        assert p.answer == ("" if p.null_odds > -2.75 else p.text)
        assert float(served["null_odds"][r]) == pytest.approx(p.null_odds, abs=1e-4)
        assert bool(served["has_answer"][r]) == (p.answer != ""), (ex, p)
    assert {p.answer == "" for p in preds.values()} == {True, False}  # the rule decides
    # run_finetuning --do_train=false evaluates the folder's model as it is: it had added a
    # random answerability classifier and read its logit by the default rule.
    from helpers import finetune

    data = _squad_v2_dev(tmp_path, examples)
    trainer, _ = finetune("--task_name=squad_v2", f"--init_checkpoint={out}",
                          "--do_train=false", "--joint_prediction=false",
                          f"--data_dir={data}", f"--model_dir={tmp_path / 'eval'}")
    assert not trainer.model.head.answerable
    assert (trainer.task.null_odds_from, trainer.task.no_answer_threshold) == ("combined", -2.75)
    written = json.loads((tmp_path / "eval" / "squad_v2_dev_predictions.json").read_text())
    assert written == {ex.qas_id: preds[ex.qas_id].answer for ex in examples}
    # convert --to=hf keeps the logits (ElectraForQuestionAnswering) and says that the rule
    # and its threshold stay behind; a SQuAD 1.1 model has neither to say.
    from electra_tf.interop import hf

    note = hf.export_note(str(out))
    assert "exceed -2.75" in note and "apply that threshold to them yourself" in note
    *_, v1 = _import(h, tmp_path / "v1", prefix, task_name="squad_v1")
    assert v1.task == "squad_v1" and hf.export_note(v1.model_dir) is None


def test_mrqa_joint_head_is_an_mrqa_task(h, tmp_path):
    prefix, w = _checkpoint(h, tmp_path, "triviaqa", _qa_layers(), seed=15)
    out, report, model, record = _import(h, tmp_path, prefix, max_seq_length=24)
    assert (record.task, record.answerable, record.head_options["span_head"],
            record.max_seq_length) == ("triviaqa", False, "joint", 24)
    # recorded as another span task of no labels of its own: any file of that format
    *_, other = _import(h, tmp_path / "mrqa", prefix, max_seq_length=24, task_name="mrqa")
    assert other.task == "mrqa"
    # Evaluated on SQuAD 2.0: the joint head has no end logit at [CLS] for the combined
    # rule, and the answerability classifier would be random: refused, not scored.
    from helpers import finetune

    from electra_tf.core.errors import ConfigError
    from electra_tf.tasks.squad import SquadExample

    data = _squad_v2_dev(tmp_path, [SquadExample("q0", "w1 w2", "w3 w4 w5 w6")])
    with pytest.raises(ConfigError, match=r"holds a joint-head model without an answerability "
                                          r"classifier .*; evaluate it as triviaqa$"):
        finetune("--task_name=squad_v2", f"--init_checkpoint={out}", "--do_train=false",
                 f"--data_dir={data}", f"--model_dir={tmp_path / 'eval'}",
                 "--max_seq_length=24")
    assert sum("answerability classifier" in s for s in report["skipped"]) == 4
    inputs = h.padded_inputs(seed=16)
    seq = h.np_encoder(w, "electra", inputs, heads=h.sizes["HEADS"])
    allowed = _answer_mask(inputs)
    start = _np_dense(seq, w, "task_specific/triviaqa/dense")[..., 0]
    got = np.asarray(model(inputs)["start_top_log_probs"])
    for b in range(len(seq)):
        s = np.where(allowed[b], start[b], -np.inf)
        log_p = s - s.max() - np.log(np.exp(s - s.max()).sum())
        n = int(allowed[b].sum())
        np.testing.assert_allclose(got[b, :n], np.sort(log_p)[::-1][:n], atol=TOL, rtol=0)


@pytest.mark.parametrize("scope, n_tasks, length", [
    ("squad", 1, 512), ("squadv1", 1, 512), ("triviaqa", 1, 512), ("naturalqs", 1, 128),
    ("chunk", 1, 256), ("ner", 1, 128), ("mnli", 1, 128), ("squad", 3, 128), ("chunk", 2, 128)])
def test_the_default_length_is_the_originals_for_the_scope_and_task_count(scope, n_tasks, length):
    """configure_finetuning.py's defaults hold for a single task only (a multi-task run
    keeps 128 for all), and by the original's name: 256 is chunk's, not every tagger's."""
    assert tf1.original_max_seq_length(scope, n_tasks) == length


def test_multi_task_checkpoint_converts_the_chosen_head(h, tmp_path):
    rng = np.random.default_rng(0)
    rte = {f"task_specific/rte/{k}": v for k, v in _head(rng, h, [("dense", H, 2)]).items()}
    prefix, w = _checkpoint(h, tmp_path, "sst", [("dense", H, 2)], seed=11, extra=rte)
    with pytest.raises(core.ConversionError, match=r"holds the heads of 2 tasks \(task_specific/"
                                                   r"rte, task_specific/sst\); pass --task_name"):
        _import(h, tmp_path / "a", prefix)
    # a --task_name of no head there had been told to pass --task_name
    with pytest.raises(core.ConversionError, match=r"^--task_name=stsb: the checkpoint holds "
                                                   r"no head of that task \(task_specific/rte"):
        _import(h, tmp_path / "a", prefix, task_name="stsb")
    # electra_tf's name of the original's sst
    out, report, model, record = _import(h, tmp_path / "b", prefix, task_name="sst2")
    assert (record.task, record.label_names) == ("sst2", ("0", "1"))
    assert sum("the head of task rte" in s for s in report["skipped"]) == 2
    inputs = h.padded_inputs(seed=12)
    seq = h.np_encoder(w, "electra", inputs, heads=h.sizes["HEADS"])
    np.testing.assert_allclose(model(inputs)["logits"],
                               _np_dense(seq[:, 0], w, "task_specific/sst/dense"), atol=TOL,
                               rtol=0)


def test_your_own_task_in_a_multi_task_checkpoint_is_chosen_by_its_original_name(h, tmp_path):
    rng = np.random.default_rng(1)
    rte = {f"task_specific/rte/{k}": v for k, v in _head(rng, h, [("dense", H, 2)]).items()}
    prefix, w = _checkpoint(h, tmp_path, "reviews", [("dense", H, 3)], seed=12, extra=rte)
    with pytest.raises(core.ConversionError, match=r"^--task_name=classification: the "
                       r"checkpoint holds no head of that task \(task_specific/reviews, "
                       r"task_specific/rte\); give one of theirs, or --tf1_task=NAME to read "
                       r"a head as --task_name's \(your own data's as classification"):
        _import(h, tmp_path / "a", prefix, task_name="classification", label_names="a,b,c")
    with pytest.raises(core.ConversionError, match=r"--tf1_task=review: the checkpoint holds "
                                                   r"no task_specific/review \(it holds "
                                                   r"task_specific/reviews, task_specific/rte"):
        _import(h, tmp_path / "b", prefix, task_name="classification", tf1_task="review")
    out, report, model, record = _import(h, tmp_path / "c", prefix, tf1_task="reviews",
                                         task_name="classification", label_names="a,b,c")
    assert (record.task, record.label_names, report["tf1_task"]) == \
        ("classification", ("a", "b", "c"), "reviews")
    inputs = h.padded_inputs(seed=13)
    seq = h.np_encoder(w, "electra", inputs, heads=h.sizes["HEADS"])
    np.testing.assert_allclose(model(inputs)["logits"],
                               _np_dense(seq[:, 0], w, "task_specific/reviews/dense"),
                               atol=TOL, rtol=0)


def test_options_the_task_would_drop_are_refused(h, tmp_path):
    """A GLUE head keeps its own labels and its task: --label_names, --data_dir or another
    GLUE --task_name had been dropped or taken silently."""
    prefix, _ = _checkpoint(h, tmp_path, "mrpc", [("dense", H, 2)], seed=14)
    cases = [({"label_names": "no,yes"}, r"--label_names: task mrpc takes none"),
             ({"data_dir": str(tmp_path)}, r"--data_dir is for a tagging head's labels"),
             ({"task_name": "qqp"}, r"--task_name=qqp: task_specific/mrpc is the original's "
                                    r"mrpc head \(electra_tf's mrpc, a sequence_classification "
                                    r"head\); leave --task_name out, or record it as another "
                                    r"task of that head: classification$"),
             # the same shapes, another head: a tagger had come out of a classifier
             ({"task_name": "tagging", "label_names": "a,b"}, r"--task_name=tagging: "
                                                              r"task_specific/mrpc is the")]
    for i, (options, message) in enumerate(cases):
        with pytest.raises(core.ConversionError, match=message):
            _import(h, tmp_path / str(i), prefix, **options)
        assert not (tmp_path / str(i) / "out").exists()


def test_own_data_classifier_takes_label_names(h, tmp_path):
    prefix, w = _checkpoint(h, tmp_path, "reviews", [("dense", H, 3)], seed=13)
    with pytest.raises(core.ConversionError, match=r"task_specific/reviews, which is no "
                                                   r"electra_tf task; pass --task_name"):
        _import(h, tmp_path / "a", prefix)
    with pytest.raises(core.ConversionError, match=r"predicts 3 labels the checkpoint does "
                                                   r"not name: pass --label_names"):
        _import(h, tmp_path / "b", prefix, task_name="classification")
    # (the count had been pinned on --task_name, which does not give it)
    with pytest.raises(core.ConversionError, match=r"dense/kernel has 3 outputs, but "
                                                   r"--label_names gives 2 outputs \(a, b\)$"):
        _import(h, tmp_path / "c", prefix, task_name="classification", label_names="a,b")
    out, _, model, record = _import(h, tmp_path / "d", prefix, task_name="classification",
                                    label_names="neg,neutral,pos")
    assert record.label_names == ("neg", "neutral", "pos")
    config = json.load(open(os.path.join(out, "finetuning_config.json")))
    assert config["converted_from"] == os.path.abspath(prefix)


def test_refusals_are_one_line_and_write_nothing(h, tmp_path):
    # No vocabulary beside the checkpoint and none given.
    prefix, _ = _checkpoint(h, tmp_path / "a", "mnli", [("dense", H, 3)], vocab=False)
    with pytest.raises(core.ConversionError, match=r"no vocabulary \(vocab.txt\); pass "
                                                   r"--vocab_file"):
        _import(h, tmp_path / "a", prefix)
    assert not (tmp_path / "a" / "out").exists()
    # A GLUE task's head of the wrong width.
    prefix, _ = _checkpoint(h, tmp_path / "b", "mnli", [("dense", H, 2)])
    with pytest.raises(core.ConversionError, match=r"has 2 outputs, but task mnli has "
                                                   r"3 outputs \(contradiction, entailment"):
        _import(h, tmp_path / "b", prefix)
    # answerable_classifier=False with the joint head: a null score electra_tf has not.
    prefix, _ = _checkpoint(h, tmp_path / "f", "squad", _qa_layers(answerable=False))
    with pytest.raises(core.ConversionError, match=r"no answerability classifier .* and the "
                                                   r"joint span head"):
        _import(h, tmp_path / "f", prefix)
    # A max_seq_length past the position table.
    prefix, _ = _checkpoint(h, tmp_path / "d", "mrpc", [("dense", H, 2)])
    with pytest.raises(core.ConversionError, match=r"--max_seq_length=64: the model has 32 "
                                                   "positions"):
        _import(h, tmp_path / "d", prefix, max_seq_length=64)
    # A head kernel of another input width: named as the checkpoint names it (it had
    # been electra_tf's task_specific/output/kernel).
    prefix, _ = _checkpoint(h, tmp_path / "e", "mrpc", [("dense", H + 1, 2)])
    with pytest.raises(core.ConversionError, match=r"model.ckpt-3000: task_specific/mrpc/dense/"
                                                   rf"kernel has shape \({H + 1}, 2\) but "):
        _import(h, tmp_path / "e", prefix)
    # A joint QA head without its qa_hidden kernel, or without qa_hidden at all: it had
    # been read as the independent head, whose concatenation ended in a traceback.
    joint_without_hidden = [("dense", H, 1), ("dense_1", 512, 1), ("dense_2", 2 * H, 512),
                            ("dense_3", 512, 1)]
    prefix, _ = _checkpoint(h, tmp_path / "g", "newsqa", joint_without_hidden, extra={
        "task_specific/newsqa/qa_hidden/bias": np.zeros(512, np.float32)})
    with pytest.raises(core.ConversionError, match=r"^task_specific/newsqa/qa_hidden/kernel "
                                                   r"is not in the checkpoint"):
        _import(h, tmp_path / "g", prefix)
    prefix, _ = _checkpoint(h, tmp_path / "h", "newsqa", joint_without_hidden)
    with pytest.raises(core.ConversionError, match=r"^task_specific/newsqa/dense_1/kernel has "
                                                   rf"shape \(512, 1\) and task_specific/newsqa/"
                                                   rf"dense/kernel \({H}, 1\): not the origin"):
        _import(h, tmp_path / "h", prefix)
    for case in "abcdefgh":
        assert not (tmp_path / case / "out").exists()


@pytest.mark.slow
def test_two_commands_take_a_fine_tuned_tf1_model_to_tf_serving(h, tmp_path, tiny_vocab):
    """convert --from=tf1, then export_saved_model: the SavedModel's ids signature gives the
    original's MNLI logits (NumPy, from the checkpoint's weights), and its text signature
    answers with the original's label names."""
    import shutil

    import tensorflow as tf
    from helpers import error_line, run_module

    from electra_tf.text.vocab import load_vocab

    vocab_size = len(load_vocab(tiny_vocab))
    rng = np.random.default_rng(21)
    weights = {k: v for k, v in h.original_weights(seed=21, generator=False,
                                                   vocab=vocab_size).items()
               if not k.startswith("discriminator_predictions/")}
    weights.update({f"task_specific/mnli/{k}": v
                    for k, v in _head(rng, h, [("dense", H, 3)]).items()})
    prefix = h.write_tf1_checkpoint(tmp_path / "mnli_model" / "model.ckpt-36816",
                                    h.with_optimizer_state(weights))
    shutil.copyfile(tiny_vocab, tmp_path / "vocab.txt")  # the original keeps it in data_dir
    out, base = tmp_path / "mnli_tf", tmp_path / "models"
    # no vocab.txt beside the checkpoint and no --vocab_file: one line, nothing written
    refused = run_module("electra_tf.convert", "--from=tf1", f"--checkpoint={prefix}",
                         "--model_size=small",
                         f"--model_hparam_overrides={json.dumps(h.TINY_OVERRIDES)}",
                         f"--output={out}")
    error_line(refused, "no vocabulary (vocab.txt); pass --vocab_file")
    assert not out.exists()
    convert = run_module("electra_tf.convert", "--from=tf1", f"--checkpoint={prefix}",
                         "--model_size=small",
                         f"--model_hparam_overrides={json.dumps(h.TINY_OVERRIDES)}",
                         f"--vocab_file={tmp_path / 'vocab.txt'}", f"--output={out}")
    assert convert.returncode == 0, convert.stderr[-3000:]
    assert "a fine-tuning folder of task mnli" in convert.stderr
    export = run_module("electra_tf.export_saved_model", "--task=sequence_classification",
                        f"--checkpoint={out}", f"--model_base={base}", "--model_name=mnli")
    assert export.returncode == 0, export.stderr[-3000:]
    loaded = tf.saved_model.load(str(base / "mnli" / "1"))
    inputs = h.padded_inputs(seed=22, vocab=vocab_size)
    got = loaded.signatures["serving_ids"](
        input_word_ids=tf.constant(inputs["input_ids"]),
        input_mask=tf.constant(inputs["input_mask"]),
        input_type_ids=tf.constant(inputs["segment_ids"]))
    seq = h.np_encoder(weights, "electra", inputs, heads=h.sizes["HEADS"])
    expected = _np_dense(seq[:, 0], weights, "task_specific/mnli/dense")
    np.testing.assert_allclose(got["logits"].numpy(), expected, atol=TOL, rtol=0)
    text = loaded.signatures["serving_default"](text=tf.constant(["hello world"]),
                                                text_pair=tf.constant(["the world"]))
    assert text["label"].numpy()[0].decode() in ("contradiction", "entailment", "neutral")


@pytest.mark.slow
def test_a_converted_tf1_classifier_evaluates_as_the_original(h, tmp_path, tiny_vocab):
    """run_finetuning --init_checkpoint=CONVERTED --do_train=false scores dev with the
    original's predictions (argmax of the NumPy logits on the same windows)."""
    import random
    import shutil

    from helpers import WORDS, finetune

    from electra_tf.text.vocab import load_vocab

    vocab_size = len(load_vocab(tiny_vocab))
    rng_w = np.random.default_rng(31)
    weights = {k: v for k, v in h.original_weights(seed=31, generator=False,
                                                   vocab=vocab_size).items()
               if not k.startswith("discriminator_predictions/")}
    weights.update({f"task_specific/reviews/{k}": v
                    for k, v in _head(rng_w, h, [("dense", H, 2)]).items()})
    prefix = h.write_tf1_checkpoint(tmp_path / "ckpt" / "model.ckpt-10",
                                    h.with_optimizer_state(weights))
    shutil.copyfile(tiny_vocab, tmp_path / "ckpt" / "vocab.txt")
    out = str(tmp_path / "converted")
    tf1.import_checkpoint(prefix, "small", out, h.TINY_OVERRIDES, task_name="classification",
                          label_names="neg,pos", max_seq_length=16)
    data = tmp_path / "data"
    data.mkdir()
    rng = random.Random(3)
    rows = [{"text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9))),
             "label": rng.choice(["neg", "pos"])} for _ in range(20)]
    for split in ("train", "dev"):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    trainer, results = finetune("--task_name=classification", f"--init_checkpoint={out}",
                                "--do_train=false", "--max_seq_length=16",
                                "--train_batch_size=4", f"--data_dir={data}",
                                f"--model_dir={tmp_path / 'eval'}")
    feats = trainer.features("dev")[1]
    seq = h.np_encoder(weights, "electra", feats.inputs, heads=h.sizes["HEADS"])
    want = _np_dense(seq[:, 0], weights, "task_specific/reviews/dense").argmax(-1)
    lines = (tmp_path / "eval" / "classification_dev_predictions.tsv").read_text().splitlines()
    got = [line.split("\t")[1] for line in lines if line and not line.startswith("index")]
    assert got == [["neg", "pos"][i] for i in want]
    accuracy = np.mean([["neg", "pos"][i] == r["label"] for i, r in zip(want, rows)])
    assert results["eval"]["dev"]["accuracy"] == pytest.approx(accuracy)


def test_a_folder_of_checkpoints_records_the_one_its_state_file_names(h, tmp_path):
    """The folder had been recorded as the source (conversion_report.json, converted_from,
    init_checkpoint) when its `checkpoint` state file chose among several: which one was
    converted could not be told afterwards."""
    prefix, weights = _checkpoint(h, tmp_path, "rte", [("dense", H, 2)], seed=3)
    folder = os.path.dirname(prefix)
    later = h.write_tf1_checkpoint(os.path.join(folder, "model.ckpt-4000"),
                                   h.with_optimizer_state(weights))
    with open(os.path.join(folder, "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "model.ckpt-4000"\n'
                'all_model_checkpoint_paths: "model.ckpt-3000"\n'
                'all_model_checkpoint_paths: "model.ckpt-4000"\n')
    out, report, _, _ = _import(h, tmp_path, folder)
    assert report["source"] == os.path.abspath(later)
    config = json.load(open(os.path.join(out, "finetuning_config.json")))
    assert config["converted_from"] == config["run"]["init_checkpoint"] == os.path.abspath(later)
