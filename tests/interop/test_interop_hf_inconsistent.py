"""`convert --from=hf` of folders that disagree with themselves or are damaged: one line
(a bad-input error), nothing written; and labels that must survive as they are.

Needs the `interop` extra (torch, transformers, safetensors); skipped without it.
"""

import json

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
    ("tokenizer_config", "tokenizer_config.json: not a valid JSON file"),
    ("tokenizer.json", "tokenizer.json: not a valid JSON file"),
    ("normalizer", "tokenizer.json: 'normalizer' should be a JSON object, got a str"),
    ("vocab_size string", "config.json: vocab_size must be an integer, got '211'"),
    ("hidden_size float", "config.json: hidden_size must be an integer, got 32.0"),
    ("eps nan", "config.json: layer_norm_eps must be a finite number, got nan"),
    ("chinese", "keeps Chinese characters together"),
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
    elif damage == "tokenizer_config":
        (tmp_path / "hf" / "tokenizer_config.json").write_text("{")
    elif damage == "tokenizer.json":
        (tmp_path / "hf" / "tokenizer.json").write_text('{"model": {"vocab": {"[PAD]": 0,')
    elif damage == "normalizer":
        (tmp_path / "hf" / "tokenizer.json").write_text('{"normalizer": "Bert"}')
    elif damage == "chinese":
        (tmp_path / "hf" / "tokenizer_config.json").write_text(
            '{"do_lower_case": true, "tokenize_chinese_chars": false}')
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
