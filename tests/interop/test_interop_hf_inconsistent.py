"""`convert --from=hf` of folders that disagree with themselves or are damaged: one line
(a bad-input error), nothing written; and labels that must survive as they are.

Needs the `interop` extra (torch, transformers, safetensors); skipped without it.
"""

import json
import os
import re

import numpy as np
import pytest
from helpers import error_line, run_module

from electra_tf import folders
from electra_tf.core.errors import BAD_INPUT
from electra_tf.interop import hf

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")


def _folder(h, tmp_path, cls="ElectraForSequenceClassification", **config) -> str:
    """A saved transformers model of the tiny sizes, with a vocab.txt beside it."""
    s = h.sizes
    values = {"vocab_size": s["VOCAB"], "embedding_size": s["EMBED"], "hidden_size": s["HIDDEN"],
              "num_hidden_layers": s["LAYERS"], "num_attention_heads": s["HEADS"],
              "intermediate_size": s["FFN"], "max_position_embeddings": s["POS"], **config}
    torch.manual_seed(0)
    model = getattr(transformers, cls)(transformers.ElectraConfig(**values)).eval()
    folder = tmp_path / "hf"
    model.save_pretrained(folder)
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += [f"w{i}" for i in range(s["VOCAB"] - len(tokens))]
    (folder / "vocab.txt").write_text("\n".join(tokens) + "\n")
    return str(folder)


def _edit_config(folder, **values):
    path = f"{folder}/config.json"
    with open(path) as f:
        config = json.load(f)
    config.update(values)
    with open(path, "w") as f:
        json.dump(config, f)


def _refused(folder, out, match, **kwargs):
    with pytest.raises(BAD_INPUT, match=match):
        hf.import_model(folder, str(out), **kwargs)
    assert not out.exists() or not any(out.iterdir()), sorted(p.name for p in out.iterdir())


def test_multi_label_classification_is_refused_but_its_encoder_converts(h, tmp_path):
    folder = _folder(h, tmp_path, num_labels=3, problem_type="multi_label_classification")
    _refused(folder, tmp_path / "out", "multi_label_classification.*sigmoid")
    report = hf.import_model(folder, str(tmp_path / "enc"), drop_task_head=True)
    assert report["kind"] == "model"


@pytest.mark.parametrize("num_labels,problem_type,converts", [
    (1, None, "regression"),  # transformers' default for one label
    (1, "regression", "regression"),
    (2, None, "classes"),
    (2, "regression", False),  # two regression targets: electra_tf's head predicts one
    (1, "single_label_classification", False),  # a softmax over one label
    (2, "ordinal", False),
])
def test_problem_type_must_be_one_electra_tf_computes(h, tmp_path, num_labels, problem_type,
                                                     converts):
    folder = _folder(h, tmp_path, num_labels=num_labels)
    _edit_config(folder, problem_type=problem_type)
    if not converts:
        _refused(folder, tmp_path / "out", "problem_type")
        return
    hf.import_model(folder, str(tmp_path / "out"))
    record = folders.finetuned.read_finetuning_config(str(tmp_path / "out"))
    assert (record.head, record.regression) == ("sequence_classification",
                                                converts == "regression")


@pytest.mark.parametrize("id2label,match", [
    ({"0": "a", "1": "b", "2": "c"}, "3 names.*2 outputs"),
    ({"0": "a", "5": "b"}, "ids 0, 5"),
    ({"0": "a", "x": "b"}, "ids 0, x"),
    # (refused as a --label_names never given, before)
    ({"0": "a", "1": "B-X\nfoo"}, r"id2label names 'B-X\\nfoo', which holds a control"),
    ({"0": "a", "1": "b\u200b"}, "which holds a control, invisible"),
])
def test_id2label_that_does_not_match_the_head_is_refused(h, tmp_path, id2label, match):
    folder = _folder(h, tmp_path, num_labels=2)
    _edit_config(folder, id2label=id2label)
    _refused(folder, tmp_path / "out", match)


@pytest.mark.parametrize("key,bad", [
    ("classifier.out_proj.bias", np.nan),
    ("electra.encoder.layer.1.output.dense.weight", np.inf),
])
def test_non_finite_weights_are_refused_naming_the_tensor(h, tmp_path, key, bad):
    from safetensors.numpy import load_file, save_file

    folder = _folder(h, tmp_path, num_labels=2)
    tensors = load_file(f"{folder}/model.safetensors")
    tensors[key] = tensors[key].copy()
    tensors[key].flat[0] = bad
    save_file(tensors, f"{folder}/model.safetensors", metadata={"format": "pt"})
    _refused(folder, tmp_path / "out", f"{key.replace('.', '[.]')}.*1 NaN or infinite")


def test_max_seq_length_beyond_the_position_table_is_refused(h, tmp_path):
    folder = _folder(h, tmp_path, cls="ElectraForTokenClassification", num_labels=3)
    pos = h.sizes["POS"]
    _refused(folder, tmp_path / "out", f"--max_seq_length={pos + 1}.*{pos} positions",
             max_seq_length=pos + 1)
    _refused(folder, tmp_path / "out", "--max_seq_length=-1: give a positive length, or 0 for "
             "the task.s default", max_seq_length=-1)
    report = hf.import_model(folder, str(tmp_path / "out"), max_seq_length=pos)
    assert folders.finetuned.read_finetuning_config(str(tmp_path / "out")).max_seq_length == pos
    assert report["task"] == "tagging"


@pytest.mark.parametrize("damage,match", [
    ("not json", "config.json: not a valid JSON file"),
    ("deep json", "config.json: not a valid JSON file"),  # a RecursionError traceback before
    ("list", "config.json: expected a JSON object"),
    ("truncated", "model.safetensors: not a readable safetensors file"),
    ("zero labels", "no outputs"),
    # a cut pytorch_model.bin had ended in torch's OSError traceback; an empty one in "()"
    ("bin truncated", r"pytorch_model.bin: not a readable PyTorch state dict \([^)\s]"),
    ("bin empty", r"pytorch_model.bin: not a readable PyTorch state dict \([^)\s]"),
    # a causal model had been imported as a generator that attends both ways
    ("decoder", "config.json: is_decoder set: a causal"),
    ("tokenizer_config", "tokenizer_config.json: not a valid JSON file"),
    ("tokenizer.json", "tokenizer.json: not a valid JSON file"),
    ("normalizer", "tokenizer.json: 'normalizer' should be a JSON object, got a str"),
    ("vocab_size string", "config.json: vocab_size must be an integer, got '211'"),
    ("hidden_size float", "config.json: hidden_size must be an integer, got 32.0"),
    ("eps nan", "config.json: layer_norm_eps must be a finite number, got nan"),
    # named for what it is (it had been electra_tf's word_embeddings' shape)
    ("vocab_size other", r"config.json gives vocab_size 200 but electra.embeddings."
                         r"word_embeddings.weight has \d+ rows; the folder's config and "
                         "weights disagree"),
    ("chinese", "keeps Chinese characters together"),
    # refused before a model of those sizes is built: 2^20 had run out of memory in the
    # build, 100,000 layers had built for hours
    ("hidden_size huge", r"config.json gives hidden_size 1048576 but the weights hold \d+; "
                         "the folder's config and weights disagree"),
    ("layers many", r"config.json gives num_hidden_layers 100000 but the weights hold \d+"),
    ("intermediate other", r"config.json gives intermediate_size 7 but the weights hold"),
])
def test_damaged_folders_are_one_error(h, tmp_path, damage, match):
    folder = _folder(h, tmp_path, num_labels=2)
    if damage == "not json":
        (tmp_path / "hf" / "config.json").write_text('{"model_type": "electra",')
    elif damage == "deep json":
        (tmp_path / "hf" / "config.json").write_text("[" * 100_000)
    elif damage == "list":
        (tmp_path / "hf" / "config.json").write_text("[1, 2]")
    elif damage == "truncated":
        path = tmp_path / "hf" / "model.safetensors"
        data = path.read_bytes()
        path.write_bytes(data[:len(data) // 2])
    elif damage in ("bin truncated", "bin empty"):
        path = tmp_path / "hf" / "model.safetensors"
        from safetensors.numpy import load_file

        state = {k: torch.from_numpy(v) for k, v in load_file(str(path)).items()}
        path.unlink()
        binary = tmp_path / "hf" / "pytorch_model.bin"
        torch.save(state, str(binary))
        data = binary.read_bytes()
        binary.write_bytes(data[:len(data) // 2] if damage == "bin truncated" else b"")
    elif damage == "decoder":
        _edit_config(folder, is_decoder=True)
    elif damage == "tokenizer_config":
        (tmp_path / "hf" / "tokenizer_config.json").write_text("{")
    elif damage == "tokenizer.json":
        (tmp_path / "hf" / "tokenizer.json").write_text('{"model": {"vocab": {"[PAD]": 0,')
    elif damage == "normalizer":
        (tmp_path / "hf" / "tokenizer.json").write_text('{"normalizer": "Bert"}')
    elif damage == "chinese":
        (tmp_path / "hf" / "tokenizer_config.json").write_text(
            '{"do_lower_case": true, "tokenize_chinese_chars": false}')
    elif damage == "vocab_size other":
        _edit_config(folder, vocab_size=200)
    elif damage == "hidden_size huge":  # heads divide it; the embeddings stay as they are
        _edit_config(folder, hidden_size=2 ** 20, embedding_size=h.sizes["EMBED"])
    elif damage == "layers many":
        _edit_config(folder, num_hidden_layers=100_000)
    elif damage == "intermediate other":
        _edit_config(folder, intermediate_size=7)
    elif damage in ("vocab_size string", "hidden_size float", "eps nan"):
        path = tmp_path / "hf" / "config.json"
        config = json.loads(path.read_text())
        key, value = {"vocab_size string": ("vocab_size", "211"),
                      "hidden_size float": ("hidden_size", float(config["hidden_size"])),
                      "eps nan": ("layer_norm_eps", float("nan"))}[damage]
        path.write_text(json.dumps({**config, key: value}))
    else:
        folder = _folder(h, tmp_path, cls="ElectraForTokenClassification", num_labels=0)
    _refused(folder, tmp_path / "out", match)


def test_damaged_config_is_one_line_at_the_command(h, tmp_path):
    folder = _folder(h, tmp_path, num_labels=2)
    (tmp_path / "hf" / "config.json").write_text("[]")
    proc = run_module("electra_tf.convert", "--from=hf", f"--model_dir={folder}",
                      f"--output={tmp_path / 'out'}")
    error_line(proc, "config.json: expected a JSON object")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("cls,labels", [
    ("ElectraForSequenceClassification", ["neg, strongly", "pos"]),
    ("ElectraForTokenClassification", ["O", "B-a,b", "I-a,b"]),
])
def test_labels_holding_commas_survive_import_and_export(h, tmp_path, cls, labels):
    folder = _folder(h, tmp_path, cls=cls, num_labels=len(labels),
                     id2label=dict(enumerate(labels)))
    hf.import_model(folder, str(tmp_path / "out"))
    record = folders.finetuned.read_finetuning_config(str(tmp_path / "out"))
    assert list(record.label_names) == labels
    hf.export_model(str(tmp_path / "out"), str(tmp_path / "back"))
    back = transformers.AutoConfig.from_pretrained(tmp_path / "back")
    assert [back.id2label[i] for i in range(len(labels))] == labels



def test_a_full_disk_leaves_no_half_folder(h, tmp_path, monkeypatch):
    """convert --from=hf on a full disk left a folder holding only vocab.txt (#54)."""
    import errno
    import os
    import shutil

    from electra_tf.core import fileio

    folder = _folder(h, tmp_path)
    usage = shutil.disk_usage("/")
    monkeypatch.setattr(fileio.shutil, "disk_usage", lambda path: usage._replace(free=1024))
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    for out in (tmp_path / "out", kept):
        with pytest.raises(OSError) as raised:
            hf.import_model(folder, str(out))
        assert raised.value.errno == errno.ENOSPC
    assert not (tmp_path / "out").exists()
    assert os.listdir(kept) == ["notes.txt"] and (kept / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("id2label", [["entailment", "neutral", "contradiction"],
                                      ["ENTAILMENT", "NEUTRAL", "CONTRADICTION"],
                                      ["entailment", "LABEL_1", "contradiction"]])
def test_a_glue_model_in_another_label_order_is_put_in_the_tasks(h, tmp_path, id2label):
    """transformers' MNLI models list entailment, neutral, contradiction; GLUE's order (the
    task's labels) is contradiction, entailment, neutral. The outputs had been served
    under the task's names in the model's order: every label wrong, without a word. One
    name that is not the task's is the label left (it had been taken by position, two
    labels swapped); names of the task's that do not cover it otherwise are refused."""
    folder = _folder(h, tmp_path, num_labels=3, id2label=dict(enumerate(id2label)))
    hf.import_model(folder, str(tmp_path / "out"), task_name="mnli")
    loaded = folders.FinetunedFolder.open(str(tmp_path / "out"))
    assert list(loaded.record.label_names) == ["contradiction", "entailment", "neutral"]
    ids = np.array([[2, 7, 8, 9, 3, 10, 11, 3]], np.int32)
    inputs = {"input_ids": ids, "input_mask": np.ones_like(ids),
              "segment_ids": np.array([[0] * 5 + [1] * 3], np.int32)}
    ours = np.asarray(loaded.load_model()(inputs)["logits"])[0]
    model = transformers.ElectraForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        theirs = model(input_ids=torch.tensor(ids.astype(np.int64)),
                       token_type_ids=torch.tensor(inputs["segment_ids"].astype(np.int64))
                       ).logits.numpy()[0]
    by_name = {n.lower() if n != "LABEL_1" else "neutral": v for n, v in zip(id2label, theirs)}
    np.testing.assert_allclose(ours, [by_name[n] for n in loaded.record.label_names], atol=1e-5)
    for other in (["entailment", "LABEL_1", "LABEL_2"], ["neutral", "x", "y"]):
        folder = _folder(h, tmp_path / "other", num_labels=3, id2label=dict(enumerate(other)))
        _refused(folder, tmp_path / "other" / "out", r"config.json's id2label \(" + ", ".join(
            other) + r"\) names some of --task_name=mnli's labels", task_name="mnli")


def test_a_config_without_a_field_is_read_as_transformers_reads_it(h, tmp_path):
    """No num_attention_heads in config.json: transformers computes with its default (4),
    electra_tf had taken its own (12), and no weight shape told them apart."""
    folder = _folder(h, tmp_path, cls="ElectraModel")
    path = tmp_path / "hf" / "config.json"
    config = json.loads(path.read_text())
    del config["num_attention_heads"]
    path.write_text(json.dumps(config))
    hf.import_model(folder, str(tmp_path / "out"))
    assert folders.PretrainingFolder.open(
        str(tmp_path / "out")).load_discriminator().config.num_attention_heads == 4
    for key, value, message in (("hidden_act", ["gelu"], r"hidden_act \['gelu'\] is not "
                                                          "supported"),):  # a TypeError before
        path.write_text(json.dumps({**config, key: value}))
        _refused(folder, tmp_path / "out2", message)
    path.write_text(json.dumps(config))
    (tmp_path / "hf" / "tokenizer_config.json").write_text('{"do_lower_case": "false"}')
    _refused(folder, tmp_path / "out3", r"the tokenizer's do_lower_case is 'false', not "
                                        "true, false or null")  # had been read as true


def test_a_regression_model_for_stsb_keeps_its_scores(h, tmp_path):
    """transformers' STS-B logit is the 0-5 score; electra_tf's STS-B reads logit * 5 (it
    trains on score / 5). The converted folder recorded (0, 1) and run_finetuning's
    predictions (the GLUE submission) came out 5x the model's scores."""
    from electra_tf.tasks.registry import get_task

    folder = _folder(h, tmp_path, num_labels=1)
    hf.import_model(folder, str(tmp_path / "out"), task_name="stsb")
    loaded = folders.FinetunedFolder.open(str(tmp_path / "out"))
    assert tuple(loaded.record.label_scale) == (0.0, 5.0)
    ids = np.array([[2, 7, 8, 3, 9, 3], [2, 10, 3, 11, 12, 3]], np.int32)
    segments = np.array([[0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 1]], np.int32)
    logits = np.asarray(loaded.load_model()({"input_ids": ids, "input_mask": np.ones_like(ids),
                                             "segment_ids": segments})["logits"])
    model = transformers.ElectraForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        theirs = model(input_ids=torch.tensor(ids.astype(np.int64)),
                       token_type_ids=torch.tensor(segments.astype(np.int64))).logits.numpy()
    task = get_task("stsb")

    class _Features:  # what GlueTask.predictions reads
        example_index = np.arange(2)

        def __len__(self):
            return 2

    scores = task.predictions({"logits": logits}, [None, None], _Features())
    np.testing.assert_allclose(scores, theirs[:, 0], atol=1e-5)
    hf.export_model(str(tmp_path / "out"), str(tmp_path / "back"))  # and back: the same scores
    back = transformers.ElectraForSequenceClassification.from_pretrained(tmp_path / "back")
    with torch.no_grad():
        again = back.eval()(input_ids=torch.tensor(ids.astype(np.int64)),
                            token_type_ids=torch.tensor(segments.astype(np.int64))).logits.numpy()
    np.testing.assert_allclose(again, theirs, atol=1e-5)


def test_a_generator_of_another_vocabulary_is_refused_beside_its_discriminator(h, tmp_path):
    """--generator_dir's vocab.txt had replaced the converted discriminator's, and every
    later use of the folder blamed a changed vocabulary on the user."""
    disc = _folder(h, tmp_path / "d", cls="ElectraForPreTraining")
    gen = _folder(h, tmp_path / "g", cls="ElectraForMaskedLM")
    out = tmp_path / "out"
    hf.import_model(disc, str(out))
    before = (out / "vocab.txt").read_text()
    tokens = before.split("\n")
    (tmp_path / "g" / "hf" / "vocab.txt").write_text("\n".join(tokens[:5] + tokens[5:-1][::-1])
                                                     + "\n")
    with pytest.raises(BAD_INPUT, match=r"its vocabulary \(\d+ tokens\) is not the "
                                        r"discriminator's .*: ELECTRA's generator and "
                                        r"discriminator share one"):
        hf.import_model(gen, str(out))
    assert (out / "vocab.txt").read_text() == before
    (tmp_path / "g" / "hf" / "vocab.txt").write_text(before)
    assert hf.import_model(gen, str(out))["kind"] == "masked_lm"  # the same tokens: kept


def test_a_generator_of_other_embedding_sizes_is_refused_beside_its_discriminator(h, tmp_path):
    """A generator folder without a vocab.txt, of fewer rows than the discriminator's
    vocabulary, had been converted beside it (and failed at its first id past its rows);
    so had one of another position count."""
    disc = _folder(h, tmp_path / "d", cls="ElectraForPreTraining")
    out = tmp_path / "out"
    hf.import_model(disc, str(out))
    for name, change in (("vocab_size", h.sizes["VOCAB"] - 7),
                         ("max_position_embeddings", h.sizes["POS"] * 2)):
        gen = _folder(h, tmp_path / name, cls="ElectraForMaskedLM", **{name: change})
        os.remove(os.path.join(gen, "vocab.txt"))
        with pytest.raises(BAD_INPUT, match=re.escape(
                f"{gen}: its {name} is {change}, the discriminator's "
                f"{h.sizes['VOCAB'] if name == 'vocab_size' else h.sizes['POS']} "
                f"({out}/discriminator_config.json): ELECTRA's generator and discriminator "
                "share their token and position embeddings")):
            hf.import_model(gen, str(out))
        assert not (out / "generator.weights.h5").exists()


def test_a_generator_of_another_casing_is_refused_beside_its_discriminator(h, tmp_path):
    """A generator whose tokenizer keeps case beside an uncased discriminator (or one whose
    folder says nothing: read as uncased) was converted silently, its casing dropped."""
    disc = _folder(h, tmp_path / "d", cls="ElectraForPreTraining")
    gen = _folder(h, tmp_path / "g", cls="ElectraForMaskedLM")
    (tmp_path / "g" / "hf" / "tokenizer_config.json").write_text('{"do_lower_case": false}')
    for name, casing, said in (("says_nothing", None, "records no casing (read as "
                                "lower-cased)"), ("uncased", True, "records lower-cased text")):
        out = tmp_path / name
        hf.import_model(disc, str(out), do_lower_case=casing)
        with pytest.raises(BAD_INPUT) as raised:
            hf.import_model(gen, str(out))
        assert str(raised.value).startswith(
            f"{gen}: its tokenizer keeps case, but the discriminator's conversion {said}"), \
            raised.value
        assert not (out / "generator.weights.h5").exists()
    out = tmp_path / "cased"
    hf.import_model(disc, str(out), do_lower_case=False)
    assert hf.import_model(gen, str(out))["kind"] == "masked_lm"  # the same casing
    # the command, whose folder is mid-conversion (its marker) when the generator comes
    proc = run_module("electra_tf.convert", "--from=hf", f"--model_dir={disc}",
                      f"--generator_dir={gen}", f"--output={tmp_path / 'cli'}")
    error_line(proc, "its tokenizer keeps case, but the discriminator's conversion records no "
                     "casing")
    assert not (tmp_path / "cli").exists()


def test_task_flags_a_model_would_drop_are_refused(h, tmp_path):
    """--task_name or --max_seq_length given for a model of no task head, and
    --drop_task_head for one whose head is not dropped, had been ignored silently."""
    pretraining = _folder(h, tmp_path / "p", cls="ElectraForPreTraining")
    _refused(pretraining, tmp_path / "a", r"--task_name is for a task model .* holds an "
                                          r"ElectraForPreTraining \(a discriminator\)",
             task_name="sst2")
    _refused(pretraining, tmp_path / "b", "--max_seq_length is for a task model",
             max_seq_length=16)
    _refused(pretraining, tmp_path / "c", r"--drop_task_head: .* which has no task head to "
                                          "drop", drop_task_head=True)
    qa = _folder(h, tmp_path / "q", cls="ElectraForQuestionAnswering")
    _refused(qa, tmp_path / "d", r"--drop_task_head: .* holds an ElectraForQuestionAnswering, "
                                 "whose head electra_tf converts as a fine-tuning folder",
             drop_task_head=True)
    classifier = _folder(h, tmp_path / "s", num_labels=2)
    _refused(classifier, tmp_path / "e", r"--task_name is for a task model .* \(its head "
                                         "dropped\\)", drop_task_head=True, task_name="sst2")


def test_do_lower_case_gives_the_casing_a_folder_does_not_say(h, tmp_path):
    """A folder without tokenizer files had been taken as uncased whatever the model was
    trained with, with no flag to say otherwise."""
    classifier = _folder(h, tmp_path / "s", num_labels=2)  # vocab.txt only: says nothing
    hf.import_model(classifier, str(tmp_path / "cased"), do_lower_case=False)
    assert folders.finetuned.read_finetuning_config(str(tmp_path / "cased")).do_lower_case \
        is False
    hf.import_model(classifier, str(tmp_path / "default"))
    assert folders.finetuned.read_finetuning_config(str(tmp_path / "default")).do_lower_case
    (tmp_path / "s" / "hf" / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    _refused(classifier, tmp_path / "against", r"--do_lower_case=false: .* lower-cases "
                                               r"\(tokenizer_config.json or tokenizer.json\); "
                                               "leave the flag out", do_lower_case=False)


def test_to_hf_says_what_it_cannot_give_transformers(h, tmp_path, caplog):
    """An encoder imported without its vocabulary (an ElectraModel folder) and written
    back as ElectraForPreTraining: no tokenizer files, and a detection head at its
    initial values. Both had been silent (AutoTokenizer then failed on the folder)."""
    import logging

    folder = _folder(h, tmp_path, cls="ElectraModel")
    os.remove(f"{folder}/vocab.txt")
    hf.import_model(folder, str(tmp_path / "out"))
    with caplog.at_level(logging.WARNING):
        written = hf.export_model(str(tmp_path / "out"), str(tmp_path / "back"))
    assert not [p for p in written if p.endswith(("vocab.txt", "tokenizer_config.json"))]
    messages = [r.getMessage() for r in caplog.records]
    assert any("no vocab.txt or tokenizer_config.json written: the model's folder holds no "
               "vocabulary" in m for m in messages), messages
    assert any("holds no trained replaced-token head (conversion_report.json lists "
               "discriminator_predictions/" in m for m in messages), messages


def _with_tokenizer(folder, added=(), special=()):
    """The folder's transformers tokenizer (tokenizer.json beside vocab.txt), with
    `added` tokens (add_tokens) and `special` ones (add_special_tokens) past the vocabulary."""
    tokenizer = transformers.ElectraTokenizerFast(vocab=f"{folder}/vocab.txt")
    if added:
        tokenizer.add_tokens(list(added))
    if special:
        tokenizer.add_special_tokens({"additional_special_tokens": list(special)})
    tokenizer.save_pretrained(folder)
    return tokenizer


def test_tokens_a_tokenizer_adds_are_refused_unless_a_vocab_file_is_given(h, tmp_path):
    """Tokens added to the transformers tokenizer (entity markers, new words) had been
    dropped silently: electra_tf's WordPiece tokenizer read them as [UNK] or pieces, and
    the converted model predicted otherwise than transformers. The vocabulary's own
    special tokens, which tokenizer.json lists as added too, are fine."""
    vocab = h.sizes["VOCAB"]
    folder = _folder(h, tmp_path)
    _with_tokenizer(folder)  # [PAD] ... [MASK]: tokenizer.json's added_tokens, at their ids
    hf.import_model(folder, str(tmp_path / "plain"))
    for name, kwargs in (("added", {"added": ["newtok"]}), ("special", {"special": ["[ENT]"]})):
        folder = _folder(h, tmp_path / name)
        _with_tokenizer(folder, **kwargs)
        token = (kwargs.get("added") or kwargs["special"])[0]
        _refused(folder, tmp_path / name / "out", re.escape(
            f"{folder}: its tokenizer adds '{token}' (id {vocab}) to vocab.txt, which "
            "electra_tf's WordPiece tokenizer does not read (text holding them would become "
            "[UNK] or pieces, and the converted model predict otherwise than transformers); "
            f"to convert without them, give --vocab_file={folder}/vocab.txt"))
        hf.import_model(folder, str(tmp_path / name / "given"), vocab_file=f"{folder}/vocab.txt")
        assert folders.finetuned.read_finetuning_config(str(tmp_path / name / "given")).task
    # tokenizer.json alone (as transformers 5 saves a tokenizer): the advice is a vocab.txt
    # written from it (--vocab_file=tokenizer.json, advised before, was refused), and
    # following it converts
    import shlex
    import subprocess
    import sys

    folder = _folder(h, tmp_path / "json")
    _with_tokenizer(folder, added=["newtok"])
    os.remove(os.path.join(folder, "vocab.txt"))
    with pytest.raises(BAD_INPUT) as refused:
        hf.import_model(folder, str(tmp_path / "json" / "out"))
    advice = str(refused.value).split("give --vocab_file=a vocab.txt of its WordPiece "
                                      "vocabulary, written by ", 1)[1]
    command = shlex.split(advice.split(" > ")[0])
    assert command[0] == "python" and command[-1] == f"{folder}/tokenizer.json"
    written = subprocess.run([sys.executable, *command[1:]], capture_output=True, text=True,
                             check=True).stdout
    (tmp_path / "json" / "vocab.txt").write_text(written)
    hf.import_model(folder, str(tmp_path / "json" / "given"),
                    vocab_file=str(tmp_path / "json" / "vocab.txt"))
    # the slow tokenizer's added_tokens.json, alone
    folder = _folder(h, tmp_path / "slow")
    (tmp_path / "slow" / "hf" / "added_tokens.json").write_text(json.dumps({"newtok": vocab}))
    _refused(folder, tmp_path / "slow" / "out", r"its tokenizer adds 'newtok' \(id \d+\)")
    # a pre-trained discriminator: the same, and --vocab_file is what it keeps
    folder = _folder(h, tmp_path / "disc", cls="ElectraForPreTraining")
    _with_tokenizer(folder, added=["newtok"])
    _refused(folder, tmp_path / "disc" / "out", "its tokenizer adds 'newtok'")
    mine = tmp_path / "mine.txt"
    mine.write_text((tmp_path / "disc" / "hf" / "vocab.txt").read_text())
    hf.import_model(folder, str(tmp_path / "disc" / "given"), vocab_file=str(mine))
    assert (tmp_path / "disc" / "given" / "vocab.txt").read_text() == mine.read_text()
    with pytest.raises(BAD_INPUT, match="--vocab_file .*none.txt not found"):
        hf.import_model(folder, str(tmp_path / "disc" / "none"),
                        vocab_file=str(tmp_path / "none.txt"))


def test_a_vocab_txt_other_than_tokenizer_json_is_refused(h, tmp_path):
    """transformers tokenizes with tokenizer.json; a stale vocab.txt beside it (two ids
    swapped) had been converted silently, and the model read other ids for the same text."""
    folder = _folder(h, tmp_path)
    _with_tokenizer(folder)
    lines = (tmp_path / "hf" / "vocab.txt").read_text().splitlines()
    lines[5], lines[6] = lines[6], lines[5]
    (tmp_path / "hf" / "vocab.txt").write_text("\n".join(lines) + "\n")
    _refused(folder, tmp_path / "out", re.escape(
        f"{folder}: vocab.txt is not tokenizer.json's vocabulary (id 5 is 'w1' in vocab.txt, "
        "'w0' in tokenizer.json), and transformers tokenizes with tokenizer.json; give the "
        "one the model was trained with as --vocab_file"))


@pytest.mark.parametrize("names, said", [(["pos", "neg", "pos"], "'pos' twice"),
                                         (["pos", " ", "neg"], "' ' for a label")])
def test_id2label_names_twice_or_empty_are_refused_naming_config_json(h, tmp_path, names, said):
    """They had been refused as `--label_names`, a flag the user never gave."""
    folder = _folder(h, tmp_path, num_labels=3)
    _edit_config(folder, id2label={str(i): n for i, n in enumerate(names)},
                 label2id={n: i for i, n in enumerate(names)})
    _refused(folder, tmp_path / "out", re.escape(
        f"config.json: id2label names {said}: a head's labels are distinct, non-empty names; "
        "name them so in config.json's id2label"))


def test_sharded_pytorch_weights_are_named_as_such(h, tmp_path):
    folder = _folder(h, tmp_path)
    os.remove(f"{folder}/model.safetensors")
    (tmp_path / "hf" / "pytorch_model.bin.index.json").write_text(json.dumps(
        {"weight_map": {"electra.embeddings.word_embeddings.weight": "pytorch_model-1.bin"}}))
    _refused(folder, tmp_path / "out", re.escape(
        f"{folder} holds sharded pytorch_model-*.bin weights (pytorch_model.bin.index.json), "
        "which electra_tf does not read"))
