"""transformers <-> electra_tf: parity with PyTorch ELECTRA, and the exact round trip.

Needs the `interop` extra (torch, transformers, safetensors); skipped without it.
"""

import os

import numpy as np
import pytest

from electra_tf import folders
from electra_tf.core.config import PretrainingConfig
from electra_tf.core.errors import InputError
from electra_tf.folders.pretraining import load_discriminator
from electra_tf.interop import core, hf, names

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

TOL = 1e-4


def _hf_config(h, **overrides):
    s = h.sizes
    values = {"vocab_size": s["VOCAB"], "embedding_size": s["EMBED"], "hidden_size": s["HIDDEN"],
              "num_hidden_layers": s["LAYERS"], "num_attention_heads": s["HEADS"],
              "intermediate_size": s["FFN"], "max_position_embeddings": s["POS"]}
    values.update(overrides)
    return transformers.ElectraConfig(**values)


def _random_hf(cls, config, seed):
    """A randomly initialised transformers model, every parameter perturbed (LayerNorms too)."""
    torch.manual_seed(seed)
    model = cls(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


def _torch_inputs(inputs):
    return {"input_ids": torch.tensor(inputs["input_ids"], dtype=torch.long),
            "attention_mask": torch.tensor(inputs["input_mask"], dtype=torch.long),
            "token_type_ids": torch.tensor(inputs["segment_ids"], dtype=torch.long)}


def _vocab(h, tmp_path) -> str:
    """A vocabulary of the tiny models' size (a task model's import needs one)."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += [f"w{i}" for i in range(h.sizes["VOCAB"] - len(tokens))]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n")
    return str(path)


def _all_positions(inputs):
    b, length = inputs["input_ids"].shape
    return np.tile(np.arange(length, dtype="int32"), (b, 1))


def test_interop_hf_discriminator_parity(h, tmp_path):
    model = _random_hf(transformers.ElectraForPreTraining, _hf_config(h), seed=0)
    model.save_pretrained(tmp_path / "hf")
    report = hf.import_model(str(tmp_path / "hf"), str(tmp_path / "out"))
    assert report["kind"] == "pretraining" and not report["left_at_init"]
    # no vocabulary beside it: said (as --from=tf1 says it; it had been found at --to=hf)
    assert report["notes"][0].endswith("holds no vocab.txt or WordPiece tokenizer.json and "
                                       "no --vocab_file was given: the output holds no "
                                       "vocabulary; rerun with --vocab_file=the vocab.txt the "
                                       "model was trained with (fine-tuning, the export and "
                                       "--to=hf need it)")
    inputs = h.padded_inputs()
    with torch.no_grad():
        ref = model(**_torch_inputs(inputs), output_hidden_states=True)
    disc, _ = load_discriminator(str(tmp_path / "out"))
    out = disc(inputs)
    np.testing.assert_allclose(out["sequence_output"], ref.hidden_states[-1].numpy(),
                               atol=TOL, rtol=0)
    np.testing.assert_allclose(out["rtd_logits"], ref.logits.numpy(), atol=TOL, rtol=0)


def test_interop_hf_generator_parity(h, tmp_path):
    config = _hf_config(h, hidden_size=h.sizes["G_HIDDEN"], intermediate_size=h.sizes["G_FFN"],
                        num_attention_heads=1)
    model = _random_hf(transformers.ElectraForMaskedLM, config, seed=1)
    model.save_pretrained(tmp_path / "hf_gen")
    report = hf.import_model(str(tmp_path / "hf_gen"), str(tmp_path / "out"))
    assert report["kind"] == "masked_lm"
    inputs = h.padded_inputs(seed=1)
    with torch.no_grad():
        ref = model(**_torch_inputs(inputs), output_hidden_states=True)
    gen = folders.pretraining.load_generator(str(tmp_path / "out"))
    out = gen({**inputs, "masked_lm_positions": _all_positions(inputs)})
    np.testing.assert_allclose(out["sequence_output"], ref.hidden_states[-1].numpy(),
                               atol=TOL, rtol=0)
    np.testing.assert_allclose(out["mlm_logits"], ref.logits.numpy(), atol=TOL, rtol=0)


@pytest.mark.parametrize("act", ["relu", "gelu_new"])
def test_interop_hf_generator_parity_when_hidden_act_is_not_gelu(h, tmp_path, act):
    """transformers' generator head is GELU whatever hidden_act says (up to 1.5 apart
    for relu): the import records it, and the logits match."""
    config = _hf_config(h, hidden_size=h.sizes["G_HIDDEN"], intermediate_size=h.sizes["G_FFN"],
                        num_attention_heads=1, hidden_act=act)
    model = _random_hf(transformers.ElectraForMaskedLM, config, seed=7)
    model.save_pretrained(tmp_path / "hf_gen")
    hf.import_model(str(tmp_path / "hf_gen"), str(tmp_path / "out"))
    gen = folders.pretraining.load_generator(str(tmp_path / "out"))
    assert gen.config.generator_head_act == "gelu" and gen.config.hidden_act != "gelu"
    inputs = h.padded_inputs(seed=7)
    with torch.no_grad():
        ref = model(**_torch_inputs(inputs))
    out = gen({**inputs, "masked_lm_positions": _all_positions(inputs)})
    np.testing.assert_allclose(out["mlm_logits"], ref.logits.numpy(), atol=TOL, rtol=0)


@pytest.mark.parametrize("cls,kind", [
    ("ElectraModel", "model"),
    ("ElectraForTokenClassification", "token_classification"),
    ("ElectraForQuestionAnswering", "squad"),
])
def test_interop_hf_encoder_and_task_heads(h, tmp_path, cls, kind):
    model = _random_hf(getattr(transformers, cls), _hf_config(h, num_labels=5 if kind ==
                                                              "token_classification" else 2), 2)
    model.save_pretrained(tmp_path / "hf")
    report = hf.import_model(str(tmp_path / "hf"), str(tmp_path / "out"),
                             vocab_file=_vocab(h, tmp_path))
    assert report["kind"] == kind
    assert all(n.startswith("discriminator_predictions/") for n in report["left_at_init"])
    inputs = h.padded_inputs(seed=2)
    with torch.no_grad():
        ref = model(**_torch_inputs(inputs), output_hidden_states=True)
    disc, _ = load_discriminator(str(tmp_path / "out"))
    seq = disc.encoder(inputs)["sequence_output"]
    np.testing.assert_allclose(seq, ref.hidden_states[-1].numpy(), atol=TOL, rtol=0)
    if kind == "model":
        return
    task, _ = folders.finetuned.load_finetuned(str(tmp_path / "out"))  # a fine-tuning folder
    got = task.head(seq, inputs["input_mask"])
    if kind == "token_classification":
        np.testing.assert_allclose(got["tag_logits"], ref.logits.numpy(), atol=TOL, rtol=0)
    else:  # electra_tf masks padding with -10000; compare the real positions
        real = inputs["input_mask"].astype(bool)
        np.testing.assert_allclose(np.asarray(got["start_logits"])[real],
                                   ref.start_logits.numpy()[real], atol=TOL, rtol=0)
        np.testing.assert_allclose(np.asarray(got["end_logits"])[real],
                                   ref.end_logits.numpy()[real], atol=TOL, rtol=0)


def test_a_task_models_window_goes_to_transformers_and_back(h, tmp_path):
    """--to=hf writes a fine-tuned folder's max_seq_length as tokenizer_config.json's
    model_max_length; --from=hf had recorded the model's positions instead, so that a
    round trip read longer windows than the model was trained with (a NER text cut at 16
    positions before read 5 words after). A tokenizer's huge "no limit" value, or none,
    gives the positions."""
    import json

    model = _random_hf(transformers.ElectraForTokenClassification,
                       _hf_config(h, num_labels=3), 2)
    model.save_pretrained(tmp_path / "hf")
    vocab = _vocab(h, tmp_path)
    hf.import_model(str(tmp_path / "hf"), str(tmp_path / "out"), vocab_file=vocab,
                    max_seq_length=12)
    hf.export_model(str(tmp_path / "out"), str(tmp_path / "hf2"))
    settings = tmp_path / "hf2" / "tokenizer_config.json"
    assert json.loads(settings.read_text())["model_max_length"] == 12
    hf.import_model(str(tmp_path / "hf2"), str(tmp_path / "back"))
    assert folders.finetuned.read_finetuning_config(str(tmp_path / "back")).max_seq_length == 12
    for value in (10**30, None):  # transformers' VERY_LARGE_INTEGER; a tokenizer without
        record = json.loads(settings.read_text())
        record["model_max_length"] = value
        settings.write_text(json.dumps(record))
        hf.import_model(str(tmp_path / "hf2"), str(tmp_path / f"back_{value}"))
        assert folders.finetuned.read_finetuning_config(
            str(tmp_path / f"back_{value}")).max_seq_length == h.sizes["POS"]
    # one below the shortest window: named as the file's (it had been "--task_name=...:
    # max_seq_length must be >= 8", flags never given); --max_seq_length overrides it
    record["model_max_length"] = 2
    settings.write_text(json.dumps(record))
    with pytest.raises(core.ConversionError, match=r"tokenizer_config.json: model_max_length 2 "
                                                   r"is below the 8 positions"):
        hf.import_model(str(tmp_path / "hf2"), str(tmp_path / "back_2"))
    hf.import_model(str(tmp_path / "hf2"), str(tmp_path / "back_12"), max_seq_length=12)


def test_a_round_trip_names_the_task_it_came_from(h, tmp_path, caplog, monkeypatch):
    """--to=hf writes the task as config.json's finetuning_task (transformers' field);
    --from=hf without --task_name says to give it: an mrpc model had come back as
    single-text classification without a word. transformers' own scripts' spelling
    ("sst-2") is named as ours."""
    import json

    model = _random_hf(transformers.ElectraForSequenceClassification,
                       _hf_config(h, num_labels=2), 2)
    model.save_pretrained(tmp_path / "hf")
    vocab = _vocab(h, tmp_path)
    hf.import_model(str(tmp_path / "hf"), str(tmp_path / "mrpc"), vocab_file=vocab,
                    task_name="mrpc", max_seq_length=12)
    # config.json is written last: transformers loads a folder once it is there (a killed
    # export had loaded without its tokenizer_config.json, read back uncased)
    written, write_json = [], hf.atomic_write_json
    monkeypatch.setattr(hf, "atomic_write_json", lambda path, value: (
        written.append(sorted(os.listdir(os.path.dirname(path)))), write_json(path, value)))
    hf.export_model(str(tmp_path / "mrpc"), str(tmp_path / "hf2"))
    assert written[-1] == ["model.safetensors", "tokenizer_config.json", "vocab.txt"]
    config = tmp_path / "hf2" / "config.json"
    assert json.loads(config.read_text())["finetuning_task"] == "mrpc"
    caplog.clear()
    hf.import_model(str(tmp_path / "hf2"), str(tmp_path / "back"))
    assert f"{tmp_path / 'hf2'}: config.json's finetuning_task is 'mrpc': recorded as " \
           "classification; give --task_name=mrpc to record it as that task" in caplog.text
    hf.import_model(str(tmp_path / "hf2"), str(tmp_path / "back_mrpc"), task_name="mrpc")
    assert folders.finetuned.read_finetuning_config(str(tmp_path / "back_mrpc")).task == "mrpc"
    record = json.loads(config.read_text())
    record["finetuning_task"] = "sst-2"
    config.write_text(json.dumps(record))
    caplog.clear()
    hf.import_model(str(tmp_path / "hf2"), str(tmp_path / "back_sst"))
    assert "finetuning_task is 'sst-2': recorded as classification; give " \
           "--task_name=sst2" in caplog.text
    # its vocabulary lost: --to=hf, which takes no --vocab_file, says to restore it (it
    # had said to give --vocab_file, which --to=hf then refused)
    (tmp_path / "back_mrpc" / "vocab.txt").unlink()
    with pytest.raises(InputError, match=r"records it as the vocabulary the model was trained "
                                         r"with \(sha256 \w+\); restore it$"):
        hf.export_model(str(tmp_path / "back_mrpc"), str(tmp_path / "hf3"))


def test_a_model_of_one_segment_type_converts_for_single_texts_only(h, tmp_path):
    """type_vocab_size 1 recorded as a pair task (mrpc) had converted, and fine-tuning or
    serving it then fed segment id 1 past its table."""
    model = _random_hf(transformers.ElectraForSequenceClassification,
                       _hf_config(h, num_labels=2, type_vocab_size=1), 4)
    model.save_pretrained(tmp_path / "hf")
    vocab = _vocab(h, tmp_path)
    with pytest.raises(core.ConversionError, match=r"^--task_name=mrpc: mrpc's inputs hold "
                                                   r"segment id 1 \(the second text\), but "
                                                   r"the model has type_vocab_size 1"):
        hf.import_model(str(tmp_path / "hf"), str(tmp_path / "mrpc"), vocab_file=vocab,
                        task_name="mrpc")
    assert not (tmp_path / "mrpc").exists()
    hf.import_model(str(tmp_path / "hf"), str(tmp_path / "sst2"), vocab_file=vocab,
                    task_name="sst2")


def test_interop_hf_sequence_classification_head_is_kept_or_dropped(h, tmp_path):
    """Its dense -> GELU -> dense head is the mlp classifier head (the logits:
    tests/export/test_export_from_transformers.py); --drop_task_head keeps the encoder."""
    model = _random_hf(transformers.ElectraForSequenceClassification, _hf_config(h), 3)
    model.save_pretrained(tmp_path / "hf")
    report = hf.import_model(str(tmp_path / "hf"), str(tmp_path / "kept"),
                             vocab_file=_vocab(h, tmp_path))
    assert report["kind"] == "sequence_classification" and report["task"] == "classification"
    assert {"task_specific/classifier_dense/kernel", "task_specific/output/bias"} <= set(
        report["assigned"])
    report = hf.import_model(str(tmp_path / "hf"), str(tmp_path / "out"), drop_task_head=True)
    assert report["kind"] == "model"
    assert len([s for s in report["skipped"] if "task head dropped" in s]) == 4
    assert not (tmp_path / "out" / "finetuned.weights.h5").exists()


def test_interop_hf_errors_name_the_variable(h, tmp_path):
    from safetensors.numpy import load_file, save_file

    model = _random_hf(transformers.ElectraForPreTraining, _hf_config(h), seed=4)
    model.save_pretrained(tmp_path / "hf")
    path = tmp_path / "hf" / "model.safetensors"
    good = load_file(path)
    save_file({**good, "electra.encoder.layer.0.attention.self.rotary.weight":
               np.zeros((2, 2), np.float32)}, path)
    with pytest.raises(core.ConversionError, match="layer.0.attention.self.rotary.weight"):
        hf.import_model(str(tmp_path / "hf"), str(tmp_path / "out"))
    bad = dict(good)
    bad["electra.encoder.layer.1.intermediate.dense.bias"] = np.zeros(7, np.float32)
    save_file(bad, path)
    with pytest.raises(core.ConversionError,  # the folder's own name for it
                       match=r"electra.encoder.layer.1.intermediate.dense.bias has shape "
                             r"\(7,\)"):
        hf.import_model(str(tmp_path / "hf"), str(tmp_path / "out"))
    save_file(good, path)
    with pytest.raises(core.ConversionError, match="not --model_size=base: hidden_size is 32"):
        hf.import_model(str(tmp_path / "hf"), str(tmp_path / "out"), model_size="base")


def _randomize(variables, seed):
    rng = np.random.default_rng(seed)
    for v in variables:
        v.assign(rng.normal(0, 0.3, v.shape).astype("float32") + (1.0 if "gamma" in v.path else 0))


def test_interop_hf_export_round_trip_is_exact(h, tmp_path):
    from electra_tf.modeling.models import build_pretraining_models

    config = PretrainingConfig(model_size="small", vocab_size=h.sizes["VOCAB"],
                               model_hparam_overrides={**h.TINY_OVERRIDES,
                                                       "max_position_embeddings": h.sizes["POS"]},
                               max_seq_length=h.sizes["POS"], generator_hidden_size=0.75)
    gen, disc = build_pretraining_models(config.encoders)
    _randomize(disc.variables + gen.variables, seed=5)
    src = tmp_path / "electra_tf"
    os.makedirs(src)
    folders.pretraining.save_discriminator(str(src), disc)
    folders.pretraining.save_generator(str(src), gen)
    folders.pretraining.write_pretraining_config(str(src), config, {})

    hf.export_model(str(src), str(tmp_path / "hf"), generator=True)
    # transformers loads both and computes what electra_tf computes.
    inputs = h.padded_inputs(seed=6)
    d_hf, d_info = transformers.ElectraForPreTraining.from_pretrained(
        tmp_path / "hf", output_loading_info=True)
    g_hf, g_info = transformers.ElectraForMaskedLM.from_pretrained(
        tmp_path / "hf" / "generator", output_loading_info=True)
    for info in (d_info, g_info):
        assert not (info["missing_keys"] or info["unexpected_keys"] or info["mismatched_keys"])
    d_hf, g_hf = d_hf.eval(), g_hf.eval()
    with torch.no_grad():
        d_ref, g_ref = d_hf(**_torch_inputs(inputs)), g_hf(**_torch_inputs(inputs))
    np.testing.assert_allclose(disc(inputs)["rtd_logits"], d_ref.logits.numpy(), atol=TOL, rtol=0)
    g_out = gen({**inputs, "masked_lm_positions": _all_positions(inputs)})
    np.testing.assert_allclose(g_out["mlm_logits"], g_ref.logits.numpy(), atol=TOL, rtol=0)

    # ... and back: bit for bit.
    hf.import_model(str(tmp_path / "hf"), str(tmp_path / "back"))
    hf.import_model(str(tmp_path / "hf" / "generator"), str(tmp_path / "back"))
    disc2, _ = load_discriminator(str(tmp_path / "back"))
    gen2 = folders.pretraining.load_generator(str(tmp_path / "back"))
    for a, b in ((names.discriminator_variables(disc), names.discriminator_variables(disc2)),
                 (names.generator_variables(gen), names.generator_variables(gen2))):
        assert sorted(a) == sorted(b)
        for name in a:
            np.testing.assert_array_equal(a[name].numpy(), b[name].numpy(), err_msg=name)
