"""A transformers task model, converted, is scored without training and fine-tuned
further by run_finetuning (its serving: tests/export/test_export_from_transformers.py).

Needs the `interop` extra (torch, transformers); skipped without it.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from helpers import finetune

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# The toy NER tags (conftest.toy_ner_dir), in another order than the one run_finetuning
# learns from the train split: the head's columns follow the names.
HF_LABELS = ["I-ORG", "O", "B-MISC", "B-ORG"]


@pytest.fixture(scope="module")
def converted_ner(tiny_vocab, tmp_path_factory):
    from electra_tf.interop import hf
    from electra_tf.text.vocab import load_vocab

    tmp = tmp_path_factory.mktemp("hf_ner")
    config = transformers.ElectraConfig(
        vocab_size=len(load_vocab(tiny_vocab)), embedding_size=16, hidden_size=32,
        num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=40, num_labels=4, id2label=dict(enumerate(HF_LABELS)),
        label2id={v: i for i, v in enumerate(HF_LABELS)})
    torch.manual_seed(0)
    model = transformers.ElectraForTokenClassification(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    model.save_pretrained(tmp / "hf")
    shutil.copy(tiny_vocab, tmp / "hf" / "vocab.txt")
    hf.import_model(str(tmp / "hf"), str(tmp / "tf"), max_seq_length=16)
    return model, str(tmp / "tf")


def test_a_converted_model_is_scored_without_training(converted_ner, toy_ner_dir, tmp_path):
    model, folder = converted_ner
    trainer, results = finetune("--task_name=ner", f"--init_checkpoint={folder}",
                                "--do_train=false", f"--data_dir={toy_ner_dir}",
                                f"--model_dir={tmp_path}/eval", "--max_seq_length=16")
    assert set(results["eval"]["dev"]) >= {"f1", "precision", "recall"}
    assert trainer.step == 0 and os.path.exists(tmp_path / "eval" / "ner_dev_predictions.txt")
    # The model scored is transformers' own: its logits, columns in the task's label order.
    _, feats = trainer.features("dev")
    rows = {k: v[:4] for k, v in feats.inputs.items()}
    ours = np.asarray(trainer.model(rows)["tag_logits"])
    with torch.no_grad():
        theirs = model(input_ids=torch.tensor(rows["input_ids"]).long(),
                       attention_mask=torch.tensor(rows["input_mask"]).long(),
                       token_type_ids=torch.tensor(rows["segment_ids"]).long()).logits.numpy()
    order = [HF_LABELS.index(name) for name in trainer.task.label_names]
    assert sorted(trainer.task.label_names) == sorted(HF_LABELS)
    # An evaluation reads the outputs as the labels the converted folder records (the
    # model's own order), not those a train split would give.
    assert list(trainer.task.label_names) == HF_LABELS
    mask = rows["input_mask"].astype(bool)
    np.testing.assert_allclose(ours[mask], theirs[..., order][mask], atol=1e-4, rtol=0)


def test_a_converted_model_fine_tunes_further(converted_ner, toy_ner_dir, tmp_path, capsys):
    _, folder = converted_ner
    out = tmp_path / "more"
    _, results = finetune("--task_name=ner", f"--init_checkpoint={folder}",
                          f"--data_dir={toy_ner_dir}", f"--model_dir={out}",
                          "--max_seq_length=16", "--num_train_epochs=1",
                          "--do_predict=false")
    # the train split's tag set holds every type's B- and I-: I-MISC, which the converted
    # head lacks, starts from init
    assert f"its head from {folder}; output columns matched by label name; starting from " \
           "init: label I-MISC" in capsys.readouterr().err
    assert np.isfinite(results["epoch_1"]["dev"]["f1"])
    with open(out / "finetuning_config.json") as f:
        record = json.load(f)
    assert sorted(record["label_names"]) == sorted(HF_LABELS + ["I-MISC"])
    assert os.path.exists(out / "finetuned.weights.h5")


def test_the_mlp_classifier_head_trains_records_and_loads_in_transformers(
        pretrained_dir, toy_sst2_dir, tmp_path):
    """--classifier_head=mlp: transformers' dense -> GELU -> dense; the folder records it,
    and --to=hf gives an ElectraForSequenceClassification of the same logits."""
    from electra_tf import folders
    from electra_tf.interop import hf

    out = tmp_path / "sst2"
    trainer, _ = finetune("--task_name=sst2", f"--init_checkpoint={pretrained_dir}",
                          f"--data_dir={toy_sst2_dir}", f"--model_dir={out}",
                          "--max_seq_length=16", "--num_train_epochs=1", "--do_predict=false",
                          "--classifier_head=mlp")
    model, record = folders.finetuned.load_finetuned(str(out))
    assert record.head_options == {"classifier_head": "mlp"} and model.head.mlp
    hf.export_model(str(out), str(tmp_path / "hf"))
    back = transformers.ElectraForSequenceClassification.from_pretrained(
        str(tmp_path / "hf")).eval()
    assert back.config.id2label == {0: "0", 1: "1"}
    _, feats = trainer.features("dev")
    rows = {k: v[:8] for k, v in feats.inputs.items()}
    with torch.no_grad():
        theirs = back(input_ids=torch.tensor(rows["input_ids"]).long(),
                      attention_mask=torch.tensor(rows["input_mask"]).long(),
                      token_type_ids=torch.tensor(rows["segment_ids"]).long()).logits.numpy()
    np.testing.assert_allclose(np.asarray(model(rows)["logits"]), theirs, atol=1e-4, rtol=0)
