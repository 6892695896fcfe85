"""From transformers to TF Serving, and back: a fine-tuned ELECTRA of each transformers
head converts (`convert --from=hf`) to a fine-tuning folder, exports, and its SavedModel,
loaded in a fresh process the way the model server loads it, answers as transformers
does on the texts transformers' own tokenizer reads; `convert --to=hf` of that folder
gives transformers the same model again.

Needs the `interop` extra (torch, transformers, safetensors); skipped without it.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from export_helpers import run_fresh

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

TOL = 1e-4
SEQ = 24
SIZES = dict(embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=64, max_position_embeddings=40)
NER_LABELS = ["O", "B-MISC", "B-ORG", "I-ORG"]  # tests/finetuning's toy NER tags
TEXTS = ["the generator replaced a token", "the model reads every sentence of text",
         "plausible tokens keep the discriminator learning which token was replaced"]
QUESTIONS = [("which token was replaced ?", "the generator replaced a token in the text"),
             ("who reads ?", "the model reads every sentence")]

# name: (transformers class, num_labels, id2label, --task_name, export --task)
CASES = {
    "token": ("ElectraForTokenClassification", 4, NER_LABELS, "", "token_classification"),
    "qa": ("ElectraForQuestionAnswering", 2, None, "", "squad"),
    "single": ("ElectraForSequenceClassification", 3, ["neg", "neutral", "pos"], "",
               "sequence_classification"),
    "pair": ("ElectraForSequenceClassification", 2, None, "mrpc", "sequence_classification"),
    "regression": ("ElectraForSequenceClassification", 1, None, "", "sequence_classification"),
}


def _hf_model(name, vocab_size, seed):
    cls, num_labels, labels, _, _ = CASES[name]
    kwargs = {}
    if labels:
        kwargs = {"id2label": dict(enumerate(labels)),
                  "label2id": {v: i for i, v in enumerate(labels)}}
    config = transformers.ElectraConfig(vocab_size=vocab_size, num_labels=num_labels,
                                        **SIZES, **kwargs)
    torch.manual_seed(seed)
    model = getattr(transformers, cls)(config)
    with torch.no_grad():  # every parameter perturbed, so that no label wins by default
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    return model.eval()


def _save_hf(model, folder, vocab):
    model.save_pretrained(folder)
    shutil.copy(vocab, os.path.join(folder, "vocab.txt"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "ElectraTokenizer", "do_lower_case": True}, f)


def _encode(tokenizer, name):
    if name == "qa":
        enc = tokenizer([q for q, _ in QUESTIONS], [c for _, c in QUESTIONS],
                        padding="max_length", truncation=True, max_length=SEQ, return_offsets_mapping=True)
    elif name == "pair":
        enc = tokenizer(TEXTS, TEXTS[::-1], padding="max_length", truncation=True, max_length=SEQ,
                        return_offsets_mapping=True)
    else:
        enc = tokenizer(TEXTS, padding="max_length", truncation=True, max_length=SEQ,
                        return_offsets_mapping=True)
    return enc


def _hf_outputs(model, enc):
    with torch.no_grad():
        out = model(input_ids=torch.tensor(enc["input_ids"]),
                    attention_mask=torch.tensor(enc["attention_mask"]),
                    token_type_ids=torch.tensor(enc["token_type_ids"]))
    if hasattr(out, "start_logits"):
        return {"start_logits": out.start_logits.numpy(), "end_logits": out.end_logits.numpy()}
    return {"logits": out.logits.numpy()}


def _best_span(start, end, enc, row, max_answer_length=30):
    """The best context span (start + end logit), as the export's independent head decodes."""
    types, mask = np.array(enc["token_type_ids"][row]), np.array(enc["attention_mask"][row])
    last = int(mask.sum()) - 1  # the final [SEP]
    context = [i for i in range(len(types)) if types[i] == 1 and mask[i] and i != last]
    best = max(((start[i] + end[j], i, j) for i in context for j in context
                if j >= i and j - i < max_answer_length))
    return best[1], best[2]


def _text_inputs(name):
    if name == "qa":
        return {"question": np.array([q.encode() for q, _ in QUESTIONS], object),
                "context": np.array([c.encode() for _, c in QUESTIONS], object)}
    texts = np.array([t.encode() for t in TEXTS], object)
    if name == "pair":
        return {"text": texts, "text_pair": texts[::-1].copy()}
    return {"text": texts}


@pytest.fixture(scope="module")
def converted(tiny_vocab, tmp_path_factory):
    """{name: {hf model, encodings, converted folder, export path}}, every export run in
    one fresh process: {name: {"text": outputs, "ids": outputs}}."""
    from electra_tf.interop import hf
    from electra_tf.serving.export import export, load_spec
    from electra_tf.text.vocab import load_vocab

    tmp = tmp_path_factory.mktemp("from_transformers")
    vocab_size = len(load_vocab(tiny_vocab))
    cases, jobs = {}, []
    for seed, name in enumerate(CASES):
        _, _, _, task_name, export_task = CASES[name]
        model = _hf_model(name, vocab_size, seed)
        _save_hf(model, str(tmp / f"{name}_hf"), tiny_vocab)
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp / f"{name}_hf"))
        enc = _encode(tokenizer, name)
        folder = str(tmp / f"{name}_tf")
        report = hf.import_model(str(tmp / f"{name}_hf"), folder, task_name=task_name,
                                 max_seq_length=SEQ)
        path = export(load_spec(export_task, folder), str(tmp / "serving"), name)
        ids = {"input_word_ids": np.array(enc["input_ids"], np.int32),
               "input_mask": np.array(enc["attention_mask"], np.int32),
               "input_type_ids": np.array(enc["token_type_ids"], np.int32)}
        jobs += [{"path": path, "signature": "serving_default", "inputs": _text_inputs(name)},
                 {"path": path, "signature": "serving_ids", "inputs": ids}]
        cases[name] = {"model": model, "enc": enc, "folder": folder, "report": report,
                       "hf": _hf_outputs(model, enc), "tokenizer": tokenizer}
    fresh = run_fresh(jobs, str(tmp))
    assert "electra_tf" not in fresh["modules"]  # only tensorflow and tensorflow_text
    results = fresh["results"]
    for i, name in enumerate(CASES):
        text, ids = results[2 * i], results[2 * i + 1]
        for out in (text, ids):  # TF1 (the C++ server's loader) and TF2 agree
            assert "error" not in out["tf1"], out["tf1"]
            for key, value in out["tf2"].items():
                np.testing.assert_array_equal(value, out["tf1"][key])
        cases[name].update(text=text["tf2"], ids=ids["tf2"])
    return cases


def test_a_converted_task_model_is_a_fine_tuning_folder(converted):
    from electra_tf import folders

    want = {"token": ("ner", "token_classification", tuple(NER_LABELS), {}),
            "qa": ("squad_v1", "squad", (), {"span_head": "independent"}),
            "single": ("classification", "sequence_classification", ("neg", "neutral", "pos"),
                       {"classifier_head": "mlp"}),
            "pair": ("mrpc", "sequence_classification", ("0", "1"),
                     {"classifier_head": "mlp"}),
            "regression": ("classification", "sequence_classification", (),
                           {"classifier_head": "mlp"})}
    for name, case in converted.items():
        record = folders.finetuned.read_finetuning_config(case["folder"])
        assert (record.task, record.head, record.label_names, record.head_options) == want[name]
        assert record.regression == (name == "regression")
        assert case["report"]["kind"] == record.head  # the transformers kind is the head
        assert record.max_seq_length == SEQ and record.do_lower_case
        assert record.pair == (name == "pair")  # SQuAD's records: False (its own layout)
        assert case["report"]["task"] == want[name][0]
        vocab = folders.finetuned.finetuned_vocab(record)
        assert os.path.dirname(vocab) == case["folder"]


@pytest.mark.parametrize("name", ["token", "single", "pair", "regression"])
def test_the_export_answers_as_transformers(converted, name):
    case = converted[name]
    logits, text, ids = case["hf"]["logits"], case["text"], case["ids"]
    if name == "token":
        mask = np.array(case["enc"]["attention_mask"], bool)
        np.testing.assert_allclose(ids["tag_logits"][mask], logits[mask], atol=TOL, rtol=0)
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        np.testing.assert_allclose(text["wordpiece_scores"][mask], probs.max(-1)[mask],
                                   atol=TOL, rtol=0)
        labels = np.array(NER_LABELS, object)[logits.argmax(-1)]
        got = text["wordpiece_labels"].astype(str)
        assert (got[mask] == labels[mask].astype(str)).all()
        tokens = [case["tokenizer"].convert_ids_to_tokens(row) for row in
                  case["enc"]["input_ids"]]
        assert (text["wordpiece_tokens"].astype(str)[mask] == np.array(tokens)[mask]).all()
        return
    if name == "regression":
        for out in (text, ids):
            np.testing.assert_allclose(out["score"], logits[:, 0], atol=TOL, rtol=0)
        return
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    labels = case["model"].config.id2label
    for out in (text, ids):
        np.testing.assert_allclose(out["logits"], logits, atol=TOL, rtol=0)
        np.testing.assert_allclose(out["probabilities"], probs, atol=TOL, rtol=0)
        assert list(out["label_id"]) == list(logits.argmax(-1))
    if name == "single":  # id2label's names; MRPC's own labels are "0" and "1", in id order
        assert [s.decode() for s in text["label"]] == [labels[i] for i in logits.argmax(-1)]


def test_the_export_finds_the_span_transformers_finds(converted):
    case = converted["qa"]
    start, end, enc = case["hf"]["start_logits"], case["hf"]["end_logits"], case["enc"]
    for row, (_, context) in enumerate(QUESTIONS):
        i, j = _best_span(start[row], end[row], enc, row)
        assert (case["ids"]["answer_start_index"][row], case["ids"]["answer_end_index"][row]) \
            == (i, j)
        a, b = enc["offset_mapping"][row][i][0], enc["offset_mapping"][row][j][1]
        assert case["text"]["answer_text"][row].decode() == context[a:b]
        types = np.array(enc["token_type_ids"][row], bool)  # the context's logits agree
        np.testing.assert_allclose(case["ids"]["start_logits"][row][types], start[row][types],
                                   atol=TOL, rtol=0)


@pytest.mark.parametrize("name", list(CASES))
def test_to_hf_gives_transformers_the_same_model(converted, name, tmp_path):
    from electra_tf.interop import hf

    case = converted[name]
    hf.export_model(case["folder"], str(tmp_path / "back"))
    cls = getattr(transformers, CASES[name][0])
    back = cls.from_pretrained(str(tmp_path / "back")).eval()
    got = _hf_outputs(back, case["enc"])
    for key, value in case["hf"].items():
        np.testing.assert_allclose(got[key], value, atol=1e-5, rtol=0)
    if CASES[name][2]:
        assert back.config.id2label == case["model"].config.id2label
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "back"))
    assert tokenizer(TEXTS)["input_ids"] == case["tokenizer"](TEXTS)["input_ids"]


def test_a_dense_head_exports_exactly_as_transformers_mlp_head(tiny_vocab, tmp_path):
    """electra_tf's one-dense classifier goes to ElectraForSequenceClassification's
    dense -> GELU -> dense by an exact construction; STS-B's scale goes into out_proj."""
    import keras

    from electra_tf import folders
    from electra_tf.core.config import EncoderConfig
    from electra_tf.interop import hf
    from electra_tf.modeling.models import build_discriminator
    from electra_tf.tasks.model import FinetuningModel
    from electra_tf.text.vocab import load_vocab

    config = EncoderConfig(vocab_size=len(load_vocab(tiny_vocab)), **SIZES)
    keras.utils.set_random_seed(3)
    for kind, labels, scale in (("classification", ["0", "1"], None),
                                ("regression", [], [0.0, 5.0])):
        model = FinetuningModel(build_discriminator(config).encoder, "sequence_classification",
                                max(1, len(labels)), regression=bool(scale))
        model.build()
        for v in model.weights:  # LayerNorm scales far from 1, logits far from 0
            v.assign(np.asarray(v) + np.random.default_rng(0).normal(0, 0.5, v.shape))
        folder = tmp_path / kind
        folder.mkdir()
        folders.finetuned.save_finetuned(str(folder), model)
        record = {"encoder": config.to_dict(), "task": "stsb" if scale else "sst2",
                  "head": "sequence_classification", "regression": bool(scale),
                  "answerable": False, "pair": bool(scale),
                  "label_names": labels, "max_seq_length": SEQ, "head_options": {},
                  "run": {"vocab_file": tiny_vocab}, "finetuning": {"do_lower_case": True},
                  **folders.vocabulary.keep_vocab(str(folder), tiny_vocab)}
        if scale:
            record["label_scale"] = scale
        folders.files.write_json(str(folder / folders.files.FINETUNING_CONFIG), record)
        hf.export_model(str(folder), str(tmp_path / f"{kind}_hf"))
        back = transformers.ElectraForSequenceClassification.from_pretrained(
            str(tmp_path / f"{kind}_hf")).eval()
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / f"{kind}_hf"))
        enc = tokenizer(TEXTS, padding="max_length", truncation=True, max_length=SEQ)
        ours = model({"input_ids": np.array(enc["input_ids"], np.int32),
                      "input_mask": np.array(enc["attention_mask"], np.int32),
                      "segment_ids": np.array(enc["token_type_ids"], np.int32)})["logits"]
        ours = np.asarray(ours) * (scale[1] if scale else 1.0) + (scale[0] if scale else 0.0)
        theirs = _hf_outputs(back, enc)["logits"]
        np.testing.assert_allclose(theirs.reshape(ours.shape), ours, atol=TOL, rtol=0)
        assert back.config.problem_type == ("regression" if scale else
                                            "single_label_classification")


def test_refusals_name_what_is_missing(tiny_vocab, finetuned_dirs, tmp_path):
    from electra_tf.core.errors import ConversionError
    from electra_tf.interop import hf
    from electra_tf.text.vocab import load_vocab

    model = _hf_model("token", len(load_vocab(tiny_vocab)), 0)
    model.save_pretrained(tmp_path / "no_vocab")
    with pytest.raises(ConversionError, match="holds no vocabulary .* pass --vocab_file"):
        hf.import_model(str(tmp_path / "no_vocab"), str(tmp_path / "out"))
    assert not (tmp_path / "out" / "finetuned.weights.h5").exists()
    report = hf.import_model(str(tmp_path / "no_vocab"), str(tmp_path / "out"),
                             vocab_file=tiny_vocab)
    assert report["task"] == "ner"
    with pytest.raises(ConversionError, match="--task_name=sst2 has a sequence_classification "
                                              "head, but .* holds a token_classification head"):
        hf.import_model(str(tmp_path / "no_vocab"), str(tmp_path / "out2"),
                        vocab_file=tiny_vocab, task_name="sst2")
    # transformers' ElectraForQuestionAnswering holds neither of these
    with pytest.raises(ConversionError, match="has the joint span head, which transformers'"):
        hf.export_model(finetuned_dirs["squad_joint"], str(tmp_path / "joint_hf"))
    with pytest.raises(ConversionError, match="has an answerability classifier, which"):
        hf.export_model(finetuned_dirs["squad"], str(tmp_path / "v2_hf"))
    assert not (tmp_path / "joint_hf").exists() and not (tmp_path / "v2_hf").exists()


def test_the_task_follows_the_labels(tiny_vocab, tmp_path):
    """BIOES labels record ner with tagging_scheme BIOES; labels of no scheme (part of
    speech) the generic tagging task."""
    from electra_tf import folders
    from electra_tf.interop import hf
    from electra_tf.text.vocab import load_vocab

    for name, labels, task, scheme in (("bioes", ["O", "B-X", "I-X", "E-X", "S-X"], "ner",
                                        "BIOES"),
                                       ("pos", ["NOUN", "VERB", "DET"], "tagging", "BIO")):
        config = transformers.ElectraConfig(
            vocab_size=len(load_vocab(tiny_vocab)), num_labels=len(labels),
            id2label=dict(enumerate(labels)), label2id={v: i for i, v in enumerate(labels)},
            **SIZES)
        transformers.ElectraForTokenClassification(config).save_pretrained(tmp_path / name)
        report = hf.import_model(str(tmp_path / name), str(tmp_path / f"{name}_tf"),
                                 vocab_file=tiny_vocab)
        record = folders.finetuned.read_finetuning_config(str(tmp_path / f"{name}_tf"))
        assert (report["task"], record.finetuning["tagging_scheme"]) == (task, scheme)
        assert record.label_names == tuple(labels)
