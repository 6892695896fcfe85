"""Import of original-format TF1 checkpoints (random values, the original names)."""

import json
import os
import re

import ml_dtypes
import numpy as np
import pytest

from electra_tf import folders
from electra_tf.core.config import PretrainingConfig
from electra_tf.folders.pretraining import load_discriminator
from electra_tf.interop import core, tf1

TOL = 1e-4


def _convert(h, tmp_path, weights, overrides=None):
    """As `convert --from=tf1` runs it (with checkpoints/ckpt-0 to resume from)."""
    from electra_tf.training.checkpoints import write_fresh_pretraining_checkpoint

    prefix = h.write_tf1_checkpoint(tmp_path / "ckpt" / "model.ckpt", weights)
    out = str(tmp_path / "out")
    report = tf1.import_checkpoint(prefix, "small", out,
                                   h.TINY_OVERRIDES if overrides is None else overrides,
                                   write_fresh_pretraining_checkpoint)
    return prefix, out, report


def _electra_tf_outputs(out, inputs):
    disc, _ = load_discriminator(out)
    d = disc(inputs)
    gen = folders.pretraining.load_generator(out)
    positions = np.tile(np.arange(inputs["input_ids"].shape[1]), (len(inputs["input_ids"]), 1))
    g = gen({**inputs, "masked_lm_positions": positions.astype("int32")})
    return d, g


@pytest.mark.parametrize("untied", [False, True], ids=["tied_embeddings", "untied_embeddings"])
def test_interop_tf1_import_matches_numpy_forward(h, tmp_path, untied):
    weights = h.original_weights(seed=1, untied_embeddings=untied)
    _, out, report = _convert(h, tmp_path, h.with_optimizer_state(weights))
    # Every source variable is accounted for: assigned, or an optimizer slot skipped.
    assert sorted(report["assigned"]) == sorted(weights)
    assert len(report["skipped"]) == 2 * len(weights) + 1
    for name in ("discriminator.weights.h5", "discriminator_config.json",
                 "generator.weights.h5", "pretraining_config.json", "conversion_report.json"):
        assert os.path.exists(os.path.join(out, name)), name

    inputs = h.padded_inputs()
    d, g = _electra_tf_outputs(out, inputs)
    seq = h.np_encoder(weights, "electra", inputs, heads=h.sizes["HEADS"])
    np.testing.assert_allclose(d["sequence_output"], seq, atol=TOL, rtol=0)
    np.testing.assert_allclose(d["rtd_logits"], h.np_rtd_logits(weights, seq), atol=TOL, rtol=0)
    emb = "generator" if untied else "electra"
    g_seq = h.np_encoder(weights, "generator", inputs, heads=1, emb_scope=emb)
    np.testing.assert_allclose(g["sequence_output"], g_seq, atol=TOL, rtol=0)
    np.testing.assert_allclose(g["mlm_logits"], h.np_mlm_logits(weights, g_seq, emb),
                               atol=TOL, rtol=0)
    _maybe_check_transformers_tf_loader(h, tmp_path, weights, inputs, d, untied)


def _maybe_check_transformers_tf_loader(h, tmp_path, weights, inputs, d, untied):
    """Where transformers still ships load_tf_weights_in_electra, it must agree too."""
    try:
        import torch
        from transformers import ElectraConfig, ElectraForPreTraining
        from transformers.models.electra import modeling_electra
    except ImportError:
        return
    loader = getattr(modeling_electra, "load_tf_weights_in_electra", None)
    if loader is None or untied:  # transformers >= 5 dropped it; the NumPy pass stands in
        return
    s = h.sizes
    config = ElectraConfig(vocab_size=s["VOCAB"], embedding_size=s["EMBED"],
                           hidden_size=s["HIDDEN"], num_hidden_layers=s["LAYERS"],
                           num_attention_heads=s["HEADS"], intermediate_size=s["FFN"],
                           max_position_embeddings=s["POS"])
    model = loader(ElectraForPreTraining(config), config,
                   str(tmp_path / "ckpt" / "model.ckpt"), "discriminator").eval()
    with torch.no_grad():
        logits = model(**{k: torch.tensor(v, dtype=torch.long) for k, v in zip(
            ("input_ids", "attention_mask", "token_type_ids"),
            (inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"]))}).logits
    np.testing.assert_allclose(d["rtd_logits"], logits.numpy(), atol=TOL, rtol=0)


def test_interop_tf1_resume_checkpoint_restores_into_pretraining(h, tmp_path):
    from electra_tf.objectives.pretrainer import ElectraPretrainer
    from electra_tf.training.checkpoints import TensorFlowCheckpoints
    from electra_tf.training.optimization import create_optimizer

    weights = h.original_weights(seed=2)
    _, out, _ = _convert(h, tmp_path, weights)
    with open(os.path.join(out, "pretraining_config.json")) as f:
        config = PretrainingConfig.from_dict(json.load(f)["pretraining"])
    assert config.generator_hidden_size == 0.75 and not config.untied_generator_embeddings
    # What a resumed run does: build model and optimizer, restore every variable.
    model = ElectraPretrainer(config)
    model.build_with_dummy_batch()
    optimizer = create_optimizer(config.learning_rate, config.num_train_steps,
                                 config.num_warmup_steps, clip_norm=None)
    optimizer.build(model.trainable_variables)
    assert TensorFlowCheckpoints(model, optimizer, os.path.join(out, "checkpoints"),
                                 max_to_keep=1).restore()  # every variable, checked
    enc = model.discriminator.encoder
    np.testing.assert_array_equal(enc.embeddings.word_embeddings.embeddings.numpy(),
                                  weights["electra/embeddings/word_embeddings"])
    np.testing.assert_array_equal(
        model.generator.mlm_head.output_bias.numpy(), weights["generator_predictions/output_bias"])
    assert model.generator.encoder.embeddings is enc.embeddings  # tied, as the original


def test_interop_tf1_discriminator_only_checkpoint(h, tmp_path):
    weights = h.original_weights(seed=3, generator=False)
    _, out, report = _convert(h, tmp_path, weights)
    assert sorted(report["assigned"]) == sorted(weights)
    assert not os.path.exists(os.path.join(out, "generator.weights.h5"))
    disc, _ = load_discriminator(out)
    inputs = h.padded_inputs(seed=4)
    seq = h.np_encoder(weights, "electra", inputs, heads=h.sizes["HEADS"])
    np.testing.assert_allclose(disc(inputs)["sequence_output"], seq, atol=TOL, rtol=0)


def test_interop_tf1_errors_name_the_variable(h, tmp_path):
    weights = h.original_weights(seed=5)
    # A leftover variable.
    extra = {**weights, "electra/encoder/layer_0/attention/self/extra/kernel": np.zeros((2, 2))}
    with pytest.raises(core.ConversionError, match="layer_0/attention/self/extra/kernel"):
        _convert(h, tmp_path / "a", extra)
    # A shape mismatch.
    bad = dict(weights)
    bad["generator_predictions/output_bias"] = np.zeros(h.sizes["VOCAB"] + 1, np.float32)
    with pytest.raises(core.ConversionError, match="generator_predictions/output_bias"):
        _convert(h, tmp_path / "b", bad)
    # A wrong --model_size (the preset's Small sizes, no overrides).
    with pytest.raises(core.ConversionError,
                       match=r"not --model_size=small: hidden_size is 32 \(from electra/encoder/"
                             r"layer_0/attention/self/query/kernel\), the model has 256"):
        _convert(h, tmp_path / "c", weights, overrides={})
    # Overrides that disagree with the checkpoint.
    with pytest.raises(core.ConversionError, match="intermediate/dense/kernel"):
        _convert(h, tmp_path / "d", weights, overrides={**h.TINY_OVERRIDES,
                                                        "intermediate_size": 128})


def test_interop_tf1_missing_misshapen_or_non_finite_variables_are_one_error(h, tmp_path):
    """The variables the config is read from (a KeyError or an unpack ValueError before),
    and weights holding NaN (converted silently before, where --from=hf refused them)."""
    weights = h.original_weights(seed=5)
    query = "electra/encoder/layer_0/attention/self/query/kernel"
    for i, (change, message) in enumerate((
            ({query: None}, f"{query} is not in the checkpoint"),
            ({"electra/embeddings/position_embeddings": None},
             "electra/embeddings/position_embeddings is not in the checkpoint"),
            ({"generator/encoder/layer_0/attention/self/query/kernel": None},
             "generator/encoder/layer_0/attention/self/query/kernel is not in"),
            ({"electra/embeddings/word_embeddings": np.zeros(7, np.float32)},
             r"electra/embeddings/word_embeddings has shape \[7\]; an ELECTRA checkpoint's "
             r"has 2 dimension"),
            ({"electra/encoder/layer_0/output/dense/bias": np.full(
                weights["electra/encoder/layer_0/output/dense/bias"].shape, np.nan, np.float32)},
             r"electra/encoder/layer_0/output/dense/bias holds \d+ NaN or infinite value"),
            # a bfloat16 checkpoint's NaN (numpy kind "V": it had converted), and integer
            # weights (cast silently before)
            ({"electra/encoder/layer_0/output/dense/bias": np.full(
                weights["electra/encoder/layer_0/output/dense/bias"].shape, np.nan,
                np.float32).astype(ml_dtypes.bfloat16)},
             r"electra/encoder/layer_0/output/dense/bias holds \d+ NaN or infinite value"),
            ({"electra/encoder/layer_0/output/LayerNorm/gamma": np.ones(
                weights["electra/encoder/layer_0/output/LayerNorm/gamma"].shape, np.int32)},
             "electra/encoder/layer_0/output/LayerNorm/gamma holds int32 values, not "
             "floating-point weights"))):
        changed = {k: v for k, v in {**weights, **change}.items() if v is not None}
        with pytest.raises(core.ConversionError, match=message):
            _convert(h, tmp_path / str(i), changed)
    # The prefix given with its .index (or a data file's) suffix names the same checkpoint
    prefix = h.write_tf1_checkpoint(tmp_path / "good" / "model.ckpt", weights)
    assert tf1.read_checkpoint(f"{prefix}.index")[0].keys() == weights.keys()


def test_an_encoder_alone_converts_with_the_head_left_at_init(h, tmp_path):
    """A checkpoint holding the encoder only (a fine-tuned one stripped of its head, no
    generator): converted as an ElectraModel from transformers is, with a note (it had
    been refused: `4 variable(s) ... are not in the source`)."""
    weights = {k: v for k, v in h.original_weights(seed=8, generator=False).items()
               if not k.startswith("discriminator_predictions/")}
    _, out, report = _convert(h, tmp_path, weights)
    assert sorted(report["left_at_init"]) == [
        "discriminator_predictions/dense/bias", "discriminator_predictions/dense/kernel",
        "discriminator_predictions/dense_1/bias", "discriminator_predictions/dense_1/kernel"]
    assert any(n.startswith("an encoder alone (no discriminator_predictions/ variables, no "
                            "generator)") for n in report["notes"])
    disc, _ = load_discriminator(out)
    query = "electra/encoder/layer_0/attention/self/query/kernel"
    np.testing.assert_array_equal(
        next(v.numpy() for v in disc.weights
             if v.path == report["mapping"][query]), weights[query])


def test_interop_tf1_vocab_of_another_size_is_refused(h, tmp_path):
    """Served, such a folder would fail on every request holding an id past the table."""
    weights = h.original_weights(seed=6, generator=False)
    prefix = h.write_tf1_checkpoint(tmp_path / "ckpt" / "model.ckpt", weights)
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(50)]
    (tmp_path / "ckpt" / "vocab.txt").write_text("\n".join(tokens) + "\n")
    with pytest.raises(core.ConversionError, match=rf"vocab.txt holds 55 tokens but the "
                                                   rf"checkpoint's embedding table has "
                                                   rf"{h.sizes['VOCAB']} rows"):
        tf1.import_checkpoint(prefix, "small", str(tmp_path / "out"), h.TINY_OVERRIDES)
    assert not (tmp_path / "out").exists()
    # --vocab_file is taken for a pre-training checkpoint too (it was ignored silently),
    # and checked as the one beside it is; a task option is refused, not dropped
    with pytest.raises(core.ConversionError, match="vocab.txt holds 55 tokens"):
        tf1.import_checkpoint(prefix, "small", str(tmp_path / "out"), h.TINY_OVERRIDES,
                              vocab_file=str(tmp_path / "ckpt" / "vocab.txt"))
    fits = tmp_path / "fits.txt"
    fits.write_text("\n".join(tokens[:5] + [f"v{i}" for i in range(h.sizes["VOCAB"] - 5)])
                    + "\n")
    tf1.import_checkpoint(prefix, "small", str(tmp_path / "out"), h.TINY_OVERRIDES,
                          vocab_file=str(fits))
    assert (tmp_path / "out" / "vocab.txt").read_text() == fits.read_text()
    with pytest.raises(core.ConversionError, match="--task_name is for a fine-tuned checkpoint"):
        tf1.import_checkpoint(prefix, "small", str(tmp_path / "out2"), h.TINY_OVERRIDES,
                              task_name="mnli")
    with pytest.raises(core.ConversionError, match="--vocab_file .*missing.txt: no such file"):
        tf1.import_checkpoint(prefix, "small", str(tmp_path / "out2"), h.TINY_OVERRIDES,
                              vocab_file=str(tmp_path / "missing.txt"))


def test_a_table_padded_past_its_vocabulary_converts_to_a_run_that_continues(h, tmp_path):
    """The original allows an embedding table larger than the vocabulary (vocab_size
    rounded up); the continued run's --vocab_size is the vocab file's, the table's rows
    go to the overrides (the table's size had been recorded and printed as --vocab_size,
    and every run_pretraining refused the folder)."""
    from electra_tf.core.config import PretrainingRun
    from electra_tf.training import preflight
    from electra_tf.training.checkpoints import write_fresh_pretraining_checkpoint

    weights = h.original_weights(seed=7)
    prefix = h.write_tf1_checkpoint(tmp_path / "ckpt" / "model.ckpt", weights)
    rows = h.sizes["VOCAB"]
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(rows - 8)]
    (tmp_path / "ckpt" / "vocab.txt").write_text("\n".join(tokens) + "\n")
    out = str(tmp_path / "out")
    report = tf1.import_checkpoint(prefix, "small", out, h.TINY_OVERRIDES,
                                   write_fresh_pretraining_checkpoint)
    assert report["resumable"]
    assert f"--vocab_size={len(tokens)} " in report["resume_flags"]
    assert f'"vocab_size": {rows}' in report["resume_flags"]
    with open(os.path.join(out, "pretraining_config.json")) as f:
        config = PretrainingConfig.from_dict(json.load(f)["pretraining"])
    assert config.vocab_size == len(tokens) and config.discriminator_config().vocab_size == rows
    run = PretrainingRun(model_dir=out, train_data="unread", vocab_file=os.path.join(out, "vocab.txt"))
    assert preflight.pretraining_masking(config, run).vocab_size == len(tokens)
    preflight.check_resume(config, run)  # the recorded settings continue their checkpoints
    disc, _ = load_discriminator(out)
    np.testing.assert_array_equal(disc.encoder.embeddings.word_embeddings.embeddings.numpy(),
                                  weights["electra/embeddings/word_embeddings"])


@pytest.mark.parametrize("damage", ["truncated_data", "flipped_data", "truncated_index",
                                    "missing_data"])
def test_interop_tf1_damaged_checkpoint_is_one_error(h, tmp_path, damage):
    import glob

    weights = h.original_weights(seed=7, generator=False)
    prefix = h.write_tf1_checkpoint(tmp_path / "ckpt" / "model.ckpt", weights)
    data = sorted(glob.glob(f"{prefix}.data-*"))[0]
    target = f"{prefix}.index" if damage == "truncated_index" else data
    raw = bytearray(open(target, "rb").read())
    if damage == "missing_data":
        os.remove(data)
    elif damage == "flipped_data":
        for i in range(0, len(raw), 97):
            raw[i] ^= 0x5A
        open(target, "wb").write(bytes(raw))
    else:
        open(target, "wb").write(bytes(raw[:len(raw) // 2]))
    with pytest.raises(core.ConversionError, match=rf"^cannot read the checkpoint {prefix}: .*"
                                                   r"\(a damaged or incomplete checkpoint"):
        tf1.import_checkpoint(prefix, "small", str(tmp_path / "out"), h.TINY_OVERRIDES)
    assert not (tmp_path / "out").exists()


def test_interop_tf1_a_prefix_that_does_not_exist_names_those_beside_it(h, tmp_path):
    """A typo in the step (model.ckpt-9999 beside model.ckpt-3000), or a folder that does
    not exist: it had been "a damaged or incomplete checkpoint", in TensorFlow's words."""
    prefix = h.write_tf1_checkpoint(tmp_path / "ckpt" / "model.ckpt-3000",
                                    h.original_weights(seed=7, generator=False))
    wrong = str(tmp_path / "ckpt" / "model.ckpt-9999")
    with pytest.raises(core.ConversionError) as raised:
        tf1.import_checkpoint(wrong, "small", str(tmp_path / "out"), h.TINY_OVERRIDES)
    assert str(raised.value) == (f"no checkpoint {wrong} (model.ckpt-9999.index does not "
                                 "exist); its folder holds model.ckpt-3000"), prefix
    missing = str(tmp_path / "none" / "model.ckpt")
    with pytest.raises(core.ConversionError, match=re.escape(
            f"no checkpoint {missing}: its folder {tmp_path / 'none'} does not exist")):
        tf1.import_checkpoint(missing, "small", str(tmp_path / "out"), h.TINY_OVERRIDES)
    assert not (tmp_path / "out").exists()


def test_a_state_file_naming_the_training_machines_paths_is_passed_over_quietly(
        h, tmp_path, caplog):
    """A release folder's `checkpoint` file names gs:// or the trainer's own paths: the
    conversion went well through the folder's one *.index, after TensorFlow's error line
    "Couldn't match files for checkpoint ..."."""
    folder = tmp_path / "ckpt"
    h.write_tf1_checkpoint(folder / "model.ckpt-7", h.original_weights(seed=7, generator=False))
    for named in ("gs://electra-bucket/models/electra/model.ckpt-7", "/home/them/model.ckpt-7"):
        (folder / "checkpoint").write_text(f'model_checkpoint_path: "{named}"\n'
                                           f'all_model_checkpoint_paths: "{named}"\n')
        assert tf1.checkpoint_prefix(str(folder)) == str(folder / "model.ckpt-7")
    (folder / "checkpoint").write_text("not { a state file")
    assert tf1.checkpoint_prefix(str(folder)) == str(folder / "model.ckpt-7")
    # several checkpoints: the one the copied state file names, found by its name here
    h.write_tf1_checkpoint(folder / "model.ckpt-9", h.original_weights(seed=9, generator=False))
    (folder / "checkpoint").write_text('model_checkpoint_path: "/home/them/model.ckpt-9"\n')
    assert tf1.checkpoint_prefix(str(folder)) == str(folder / "model.ckpt-9")
    assert not [r for r in caplog.records if "Couldn't match" in r.getMessage()]
    # a state file naming a checkpoint the folder lacks (an incomplete copy): the other
    # checkpoint had been converted silently
    (folder / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-11"\n')
    with pytest.raises(core.ConversionError) as raised:
        tf1.checkpoint_prefix(str(folder))
    assert str(raised.value) == (
        f"{folder / 'checkpoint'} (the state file) names model.ckpt-11 as the latest "
        f"checkpoint, and {folder} does not hold it (an incomplete copy?); to convert "
        "another, pass --checkpoint=PREFIX: it holds model.ckpt-7, model.ckpt-9")


def test_interop_tf1_checkpoint_path_that_is_not_utf8_is_one_error(h, tmp_path):
    """TensorFlow's file system takes UTF-8 paths only: a folder named with a byte that
    is not UTF-8 had been read as a damaged checkpoint ('surrogates not allowed')."""
    folder = os.path.join(str(tmp_path), os.fsdecode(b"ckpt_\xff"))
    prefix = h.write_tf1_checkpoint(tmp_path / "plain" / "model.ckpt",
                                    h.original_weights(seed=7, generator=False))
    os.rename(tmp_path / "plain", folder)
    for path in (folder, os.path.join(folder, os.path.basename(prefix))):
        with pytest.raises(core.ConversionError, match=r"^cannot read the checkpoint "
                                                       r".*ckpt_\\xff.*: its path is not UTF-8"):
            tf1.import_checkpoint(path, "small", str(tmp_path / "out"), h.TINY_OVERRIDES)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("generator", [True, False])
def test_interop_tf1_records_the_casing_it_was_given(h, tmp_path, generator):
    """--nodo_lower_case (a cased checkpoint) is recorded with the converted model: in
    the PretrainingConfig a resumed run checks (and in the flags printed to resume it),
    or beside a discriminator alone; the default records the released models' casing."""
    weights = h.original_weights(seed=5, generator=generator)
    prefix = h.write_tf1_checkpoint(tmp_path / "ckpt" / "model.ckpt", weights)
    for lower in (False, True):
        out = str(tmp_path / f"out_{lower}")
        tf1.import_checkpoint(prefix, "small", out, h.TINY_OVERRIDES, do_lower_case=lower)
        folder = folders.PretrainingFolder.open(out)
        assert folder.recorded_do_lower_case is lower
        assert (folder.config is not None) == generator
        if generator:
            assert folder.config.do_lower_case is lower
            assert ("--nodo_lower_case" in tf1.resume_flags(folder.config).split()) == (
                not lower)


def test_the_resume_flags_keep_an_override_the_preset_would_derive_otherwise():
    """tiny's preset has 2 heads, but a hidden_size of 16 derives 1: dropping
    num_attention_heads=2 as "the preset's value" had made the printed command refused."""
    import dataclasses
    import json
    import re

    from electra_tf.core.config import PretrainingConfig
    from electra_tf.interop import tf1

    overrides = {"embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 2,
                 "num_attention_heads": 2, "intermediate_size": 32}
    config = PretrainingConfig(model_size="tiny", vocab_size=181,
                               model_hparam_overrides=overrides)
    flags = tf1.resume_flags(config)
    given = json.loads(re.search(r"--model_hparam_overrides='(.*?)'", flags).group(1))
    assert given["num_attention_heads"] == 2 and "num_hidden_layers" not in given
    again = dataclasses.replace(config, model_hparam_overrides=given)
    assert again.discriminator_config() == config.discriminator_config()
    assert again.generator_config() == config.generator_config()
    assert "--max_seq_length" not in flags  # 512 positions: the default length fits
    # fewer positions than the default length of 128: the command gives the length
    short = PretrainingConfig(model_size="tiny", vocab_size=181, max_seq_length=32,
                              model_hparam_overrides={**overrides, "max_position_embeddings": 32})
    assert "--max_seq_length=32" in tf1.resume_flags(short).split()


def test_a_bert_checkpoint_of_the_original_converts_as_bert_mlm(h, tmp_path):
    """The original's electra_objective=False (BERT): the masked LM's head on `electra/`,
    no generator scope, no replaced-token detection head. It had been refused as lacking
    discriminator_predictions/*, as if damaged."""
    from electra_tf.objectives.pretrainer import ElectraPretrainer
    from electra_tf.training.checkpoints import TensorFlowCheckpoints
    from electra_tf.training.optimization import create_optimizer

    s = h.sizes
    weights = {k: v for k, v in h.original_weights(seed=5, generator=False).items()
               if not k.startswith("discriminator_predictions/")}
    rng = np.random.default_rng(5)
    weights.update({  # the MLM head maps D's hidden size to the embeddings' width
        "generator_predictions/dense/kernel": rng.normal(0, 0.3, (s["HIDDEN"], s["EMBED"])),
        "generator_predictions/dense/bias": rng.normal(0, 0.1, (s["EMBED"],)),
        "generator_predictions/LayerNorm/gamma": 1 + rng.normal(0, 0.1, (s["EMBED"],)),
        "generator_predictions/LayerNorm/beta": rng.normal(0, 0.1, (s["EMBED"],)),
        "generator_predictions/output_bias": rng.normal(0, 0.1, (s["VOCAB"],))})
    weights = {k: np.asarray(v, np.float32) for k, v in weights.items()}
    _, out, report = _convert(h, tmp_path, weights)
    assert sorted(report["assigned"]) == sorted(weights)
    assert report["left_at_init"] == ["discriminator_predictions/dense/bias",
                                      "discriminator_predictions/dense/kernel",
                                      "discriminator_predictions/dense_1/bias",
                                      "discriminator_predictions/dense_1/kernel"]
    assert report["num_attention_heads"] == {"discriminator": s["HEADS"]}  # as given
    assert not any("attention heads" in note for note in report["notes"])
    assert "--objective=bert_mlm" in report["resume_flags"]
    assert "--generator_hidden_size" not in report["resume_flags"]
    inputs = h.padded_inputs(seed=6)
    d, g = _electra_tf_outputs(out, inputs)
    seq = h.np_encoder(weights, "electra", inputs, heads=s["HEADS"])
    np.testing.assert_allclose(d["sequence_output"], seq, atol=TOL, rtol=0)
    np.testing.assert_allclose(g["mlm_logits"], h.np_mlm_logits(weights, seq), atol=TOL, rtol=0)
    with open(os.path.join(out, "pretraining_config.json")) as f:
        config = PretrainingConfig.from_dict(json.load(f)["pretraining"])
    assert config.objective == "bert_mlm" and not config.unused()
    model = ElectraPretrainer(config)  # what run_pretraining resumes
    model.build_with_dummy_batch()
    optimizer = create_optimizer(config.learning_rate, config.num_train_steps,
                                 config.num_warmup_steps, clip_norm=None)
    optimizer.build(model.trainable_variables)
    assert TensorFlowCheckpoints(model, optimizer, os.path.join(out, "checkpoints"),
                                 max_to_keep=1).restore()
    np.testing.assert_array_equal(model.generator.mlm_head.output_bias.numpy(),
                                  weights["generator_predictions/output_bias"])


def test_a_custom_size_without_a_head_count_says_which_it_took(h, tmp_path):
    """No variable's shape holds the attention head counts: a custom-size model trained
    with 2 heads at hidden size 32 converted with 1 (hidden / 64) and computed something
    else, without a word. The report and a note say the counts taken."""
    weights = h.original_weights(seed=8)
    overrides = {k: v for k, v in h.TINY_OVERRIDES.items() if k != "num_attention_heads"}
    _, _, report = _convert(h, tmp_path, weights, overrides)
    assert report["num_attention_heads"] == {"discriminator": 1, "generator": 1}
    assert ("attention heads taken as the sizes derive them (discriminator 1, generator 1: "
            "hidden size / 64, at least 1), which no variable of the checkpoint records; a "
            "model trained with another count computes otherwise once converted: pass its "
            "num_attention_heads in --model_hparam_overrides") in report["notes"]
