"""run_pretraining on bad input and faults: one line, a non-zero exit, nothing damaged.

Bad data and a model_dir this run cannot resume are refused before anything
is built or written; corruption met mid-training and Ctrl-C save a checkpoint
first; a multi-worker cluster that never comes up times out.
"""

import dataclasses
import errno
import glob
import json
import os
import re
import shutil
import signal
import subprocess

import pytest
from helpers import (
    TINY_MODEL,
    child_env,
    error_line,
    free_ports,
    interrupt_after,
    patience,
    poison_third_update,
    popen_python,
    pretraining_from_flags,
    run_module,
    run_module_reporting_tf,
    run_python,
    tiny_vocab_tokens,
    write_vocab,
)

from electra_tf.core.errors import ConfigError, Diverged, InputError


def pretrain_flags(records, model_dir, **overrides):
    from electra_tf.text.tokenizer import load_vocab

    values = {"train_data": records["train"], "eval_data": records["eval"],
              "vocab_file": records["vocab"], "vocab_size": len(load_vocab(records["vocab"])),
              "model_dir": model_dir, "model_size": "tiny",
              "model_hparam_overrides": json.dumps(TINY_MODEL), "max_seq_length": 32,
              "generator_hidden_size": 0.5, "train_batch_size": 8, "eval_batch_size": 8,
              "num_train_steps": 2, "iterations_per_loop": 2, "num_warmup_steps": 1,
              "num_eval_steps": 2, "seed": 5}
    values.update(overrides)
    return [f"--{k}={v}" for k, v in values.items()]


def pretraining(records, model_dir, **overrides):
    """run_pretraining's main in this process, on the TensorFlow backend: the trainer."""
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining

    return TensorFlowPretraining(*pretraining_from_flags(
        *pretrain_flags(records, model_dir, **overrides)))


def folder_bytes(folder) -> dict:
    return {os.path.relpath(os.path.join(d, n), folder): open(os.path.join(d, n), "rb").read()
            for d, _, names in os.walk(folder) for n in names}


# === Bad data: refused before anything is built or written ===
def test_the_cli_refuses_bad_data_in_one_line_before_building_anything(tiny_records, tmp_path):
    """The one command-line test of run_pretraining's error path: `error: ...`, status 2,
    no traceback, no model built (no params line), nothing written; and all that before
    Keras imports TensorFlow (seconds), for a local --train_data or --eval_data."""
    model_dir = tmp_path / "model"
    for flag in ("train_data", "eval_data"):
        proc, tf_imported = run_module_reporting_tf("electra_tf.run_pretraining", *pretrain_flags(
            tiny_records, model_dir, **{flag: f"{tmp_path}/none*"}))
        error_line(proc, f"error: --{flag} pattern '{tmp_path}/none*' matches no file")
        assert "params" not in proc.stderr  # no model was built
        assert not model_dir.exists()  # nothing was written
        assert not tf_imported


def test_the_demo_refuses_a_bad_flag_before_it_builds_its_data(tmp_path):
    """configs/demo.flags builds its corpus, vocabulary and records first (minutes with
    the installed packages' docstrings); a bad flag was refused only after them."""
    data_dir = tmp_path / "data"
    for flag, message in (  # (--demo_vocab_size had been refused as "vocab_size", after)
            ("--temperature=nan", "error: temperature must be a finite number > 0, got nan"),
            ("--demo_vocab_size=0", "error: --demo_vocab_size must exceed the 104 reserved "
                                    "tokens, got 0")):
        proc, tf_imported = run_module_reporting_tf(
            "electra_tf.run_pretraining", "--flagfile=configs/demo.flags",
            f"--demo_data_dir={data_dir}", f"--model_dir={tmp_path / 'model'}", flag)
        error_line(proc, message)
        assert proc.stderr.splitlines()[-1].startswith("error:") and "[demo]" not in proc.stderr
        assert not data_dir.exists() and not tf_imported


@pytest.mark.parametrize("case", ["train_glob", "eval_glob", "max_seq_length", "not_tfrecord"])
def test_bad_data_is_refused_before_building_anything(case, tiny_records, tmp_path,
                                                      models_built):
    records_dir = os.path.dirname(tiny_records["eval"])
    overrides, expected = {
        "train_glob": ({"train_data": f"{tmp_path}/none*"},
                       [f"--train_data pattern '{tmp_path}/none*' matches no file"]),
        "eval_glob": ({"eval_data": f"{tmp_path}/held*"},
                      [f"--eval_data pattern '{tmp_path}/held*' matches no file"]),
        "max_seq_length": ({"max_seq_length": 64},
                           ["pretrain_data.tfrecord-00000-of-00004 holds records of "
                            "max_seq_length 32, but --max_seq_length=64"]),
        "not_tfrecord": ({"train_data": f"{records_dir}/*"},
                         ["--train_data: ", "pretrain_data_stats.json is not a TFRecord file"]),
    }[case]
    model_dir = tmp_path / "model"
    with pytest.raises(InputError) as raised:
        pretraining(tiny_records, model_dir, **overrides)
    for text in expected:
        assert text in str(raised.value), str(raised.value)
    assert not models_built
    assert not model_dir.exists()  # nothing was written


def test_shards_of_two_builds_in_one_folder_are_refused(tiny_records, tmp_path, models_built):
    """An --overwrite build stopped while renaming its shards into place leaves shards of
    both builds (-of-00004 beside -of-00003); a run trained on both, duplicated."""
    import glob

    data = tmp_path / "data"
    data.mkdir()
    shards = sorted(glob.glob(tiny_records["train"]))
    for path in shards:
        shutil.copy(path, data)
    shutil.copy(shards[0], data / "pretrain_data.tfrecord-00000-of-00003")
    with pytest.raises(InputError, match=re.escape(
            f"--train_data matches shards of 2 builds in {data} (-of-00003, -of-00004): a "
            "build_pretraining_data run was stopped midway; run it again with --overwrite, "
            "or give a pattern that matches one")):
        pretraining(tiny_records, tmp_path / "model", train_data=f"{data}/pretrain_data*")
    assert not models_built
    pretraining(tiny_records, tmp_path / "model", train_data=f"{data}/*-of-00004",
                num_train_steps=1)  # one build's pattern: accepted


def test_a_shard_corrupt_mid_file_is_named_after_a_checkpoint(tiny_records, tmp_path,
                                                              models_built):
    data = tmp_path / "data"
    data.mkdir()
    import glob

    shards = sorted(glob.glob(tiny_records["train"]))
    for path in shards:
        shutil.copy(path, data)
    bad = data / os.path.basename(shards[1])
    raw = bytearray(bad.read_bytes())
    raw[len(raw) // 2] ^= 0x10  # a bit flip inside a record, far from the first one
    bad.write_bytes(bytes(raw))
    model_dir = tmp_path / "model"
    trainer = pretraining(tiny_records, model_dir, train_data=f"{data}/pretrain_data.tfrecord*",
                          num_train_steps=50, eval_data="")  # no evaluation: not its concern
    assert len(models_built) == 1  # the spy the refusal tests rely on sees a build
    with pytest.raises(InputError) as raised:
        trainer.train()
    message = str(raised.value)
    assert message.startswith(f"{bad}: corrupt TFRecord (corrupted record at "), message
    assert message.endswith("then rerun to resume"), message
    step = re.search(r"met at step (\d+); checkpoint saved at step (\d+);", message)
    assert step and step.group(1) == step.group(2), message
    assert (model_dir / "checkpoints" / f"ckpt-{step.group(1)}.index").exists()
    assert not (model_dir / "discriminator.weights.h5").exists()
    import numpy as np

    # What was saved is exactly that many steps: the same run on the repaired file,
    # stopped there, holds the same weights and optimizer state (the step count had
    # moved on before the failed read, one step past the weights it was saved with).
    raw[len(raw) // 2] ^= 0x10
    bad.write_bytes(bytes(raw))
    reference = pretraining(tiny_records, tmp_path / "reference",
                            train_data=f"{data}/pretrain_data.tfrecord*", num_train_steps=50,
                            eval_data="")
    if int(step.group(1)):  # (tf.data's read-ahead meets it at step 0 or soon after)
        reference.train(stop_at_step=int(step.group(1)))
    assert reference.step == trainer.step == int(step.group(1))
    for a, b in zip(reference.model.trainable_variables + reference.optimizer.variables,
                    trainer.model.trainable_variables + trainer.optimizer.variables,
                    strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def test_a_shard_deleted_mid_run_is_named_after_a_checkpoint(tiny_records, tmp_path):
    """A training file moved or deleted mid-run, met as tf.data opens it for its next
    pass: it had been a NotFoundError traceback, the steps since the last save lost."""
    import glob

    data = tmp_path / "data"
    data.mkdir()
    for path in sorted(glob.glob(tiny_records["train"])):
        shutil.copy(path, data)
    gone = sorted(data.iterdir())[1]
    model_dir = tmp_path / "model"
    trainer = pretraining(tiny_records, model_dir, train_data=f"{data}/pretrain_data.tfrecord*",
                          num_train_steps=2000, save_checkpoints_steps=1000, eval_data="")
    real_train_steps, calls = trainer.train_steps, []

    def train_steps(iterator, n):
        calls.append(n)
        if len(calls) == 2:
            gone.unlink()  # after the first chunk's reads opened it
        return real_train_steps(iterator, n)

    trainer.train_steps = train_steps
    with pytest.raises(InputError) as raised:
        trainer.train()
    message = str(raised.value)
    step = re.fullmatch(re.escape(f"{gone}: no longer there (moved or deleted since the run "
                                  "started), met at step ") + r"(\d+); checkpoint saved at step "
                        r"(\d+); restore it, then rerun to resume", message)
    assert step and step.group(1) == step.group(2), message
    assert 0 < int(step.group(1)) < 2000
    assert (model_dir / "checkpoints" / f"ckpt-{step.group(1)}.index").exists()


def test_the_numpy_reader_names_a_file_gone_since_it_was_listed(tmp_path):
    """The Keras-JAX NumPy input's reader (and the packing command's): a FileNotFoundError
    traceback before; the trainer saves and says "restore it" (RecordFileGone)."""
    from electra_tf.core.errors import RecordFileGone
    from electra_tf.data.tfrecord_reader import read_records

    with pytest.raises(RecordFileGone) as raised:
        next(read_records(str(tmp_path / "shard-0")))
    assert str(raised.value) == (f"{tmp_path / 'shard-0'}: no longer there (moved or deleted "
                                 "since the run started)")


@pytest.mark.slow  # a two-phase run and an evaluation, each meeting a misshaped record (11 s)
def test_a_misshaped_record_names_the_records_being_read(tiny_records, tmp_path):
    """A record of --phase2_train_data that does not fit phase 2's length, met in phase 2
    (its first record fits: the start-up check passes), is named as phase 2's, and one of
    --eval_data as the evaluation's: each had been called a record of --train_data or
    --eval_data not fitting --max_seq_length."""
    import tensorflow as tf

    from electra_tf.data.features import serialize

    def example(length):
        return serialize({"input_ids": [2, 7, 3] + [0] * (length - 3),
                          "input_mask": [1] * 3 + [0] * (length - 3),
                          "segment_ids": [0] * length})

    def write(name, first, later):
        path = tmp_path / name
        with tf.io.TFRecordWriter(str(path)) as writer:
            writer.write(example(first))
            for _ in range(16):
                writer.write(example(later))
        return str(path)

    with pytest.raises(InputError) as raised:
        pretraining(tiny_records, tmp_path / "model", eval_data="", num_train_steps=2,
                    iterations_per_loop=1, phase2_steps=1, phase2_max_seq_length=16,
                    phase2_train_data=write("phase2.tfrecord", 16, 32)).train()
    # the file and record (tf.data's message names neither; it had said "rebuild that
    # file" of a file it had not named)
    assert re.fullmatch(r".*phase2.tfrecord: record 1 does not fit "
                        r"--phase2_max_seq_length=16 \(.*\), met at step 1; checkpoint saved "
                        r"at step 1; rebuild that file, then rerun to resume",
                        str(raised.value)), raised.value
    # one of --eval_data, met by the evaluation at step 0 (before any training step)
    with pytest.raises(InputError) as raised:
        pretraining(tiny_records, tmp_path / "model_eval", num_train_steps=1,
                    eval_data=write("eval.tfrecord", 32, 16)).train()
    assert re.fullmatch(r".*eval.tfrecord: record 1 does not fit --max_seq_length=32 "
                        r"\(.*\), met at step 0; checkpoint saved at step 0; rebuild that "
                        r"file, then rerun to resume", str(raised.value)), raised.value


def test_phase_2_records_gone_at_the_switch_save_phase_1_first(tiny_records, tmp_path):
    """--phase2_train_data moved away after the start-up check: the switch to phase 2
    says so in one line and saves phase 1's steps first (they were lost where the switch
    was not a multiple of --save_checkpoints_steps)."""
    phase2 = tmp_path / "phase2"
    shutil.copytree(os.path.dirname(tiny_records["train"]), phase2)
    trainer = pretraining(tiny_records, tmp_path / "model", eval_data="", num_train_steps=3,
                          iterations_per_loop=1, save_checkpoints_steps=1000, phase2_steps=1,
                          phase2_max_seq_length=32, phase2_train_data=f"{phase2}/*.tfrecord-*")
    shutil.rmtree(phase2)
    with pytest.raises(InputError) as raised:
        trainer.train()
    assert re.fullmatch(r"--phase2_train_data: TFRecord pattern '.*' matches no file, met at "
                        r"step 2 "
                        r"where phase 2 starts; checkpoint saved at step 2; restore the files, "
                        r"then rerun to resume", str(raised.value)), raised.value
    saved = sorted(p.name for p in (tmp_path / "model" / "checkpoints").glob("ckpt-*.index"))
    assert saved == ["ckpt-2.index"]
    # --eval_data's, met by an evaluation: named by its flag (tf.data's line names none;
    # it had ended the run without a save)
    evaluation = tmp_path / "eval"
    shutil.copytree(os.path.dirname(tiny_records["eval"]), evaluation)
    trainer = pretraining(tiny_records, tmp_path / "model_eval", num_train_steps=1,
                          eval_data=f"{evaluation}/*.tfrecord-*")
    shutil.rmtree(evaluation)
    with pytest.raises(InputError) as raised:
        trainer.train()
    assert re.fullmatch(r"--eval_data: TFRecord pattern '.*' matches no file, met at step 0; "
                        r"checkpoint saved at step 0; restore the files, then rerun to resume",
                        str(raised.value)), raised.value


def write_records(path, first_ids, later_ids=(), count=0, length=32) -> str:
    """A TFRecord file of pre-training examples: one of `first_ids`, then `count` of
    `later_ids` (each padded to `length`)."""
    import tensorflow as tf

    from electra_tf.data.features import serialize

    def example(ids):
        ids = list(ids)
        pad = length - len(ids)
        return serialize({"input_ids": ids + [0] * pad, "input_mask": [1] * len(ids) + [0] * pad,
                          "segment_ids": [0] * length})

    with tf.io.TFRecordWriter(str(path)) as writer:
        writer.write(example(first_ids))
        for _ in range(count):
            writer.write(example(later_ids))
    return str(path)


def test_records_holding_ids_outside_the_vocabulary_are_refused(tiny_records, tmp_path,
                                                                 models_built):
    size = len(tiny_vocab_tokens())
    for bad in (size, -1):
        path = write_records(tmp_path / f"bad{bad}.tfrecord", [2, 7, bad, 3])
        with pytest.raises(InputError) as raised:
            pretraining(tiny_records, tmp_path / "model", train_data=path)
        assert str(raised.value) == (
            f"--train_data: {path} holds token id {bad}, outside the vocabulary's [0, {size}) "
            "(were its records built with this --vocab_file?)")
    assert not models_built
    assert not (tmp_path / "model").exists()


@pytest.mark.parametrize("offset", [4, None])
def test_an_id_outside_the_vocabulary_met_mid_run_is_one_line_after_a_checkpoint(
        tiny_records, tmp_path, offset):
    """The first record is checked before the run; one further in is met by the
    input's own check of every batch (data/masking.py): the model's lookup would
    read a negative id (offset None: -1) from the end of the table without a word."""
    size = len(tiny_vocab_tokens())
    bad = -1 if offset is None else size + offset
    path = write_records(tmp_path / "late.tfrecord", [2, 7, 3], [2, 7, bad, 3], count=64)
    with pytest.raises(InputError) as raised:
        pretraining(tiny_records, tmp_path / "model", train_data=path, num_train_steps=4).train()
    assert re.fullmatch(
        rf"a record of --train_data holds a token id outside the "
        rf"vocabulary's \[0, {size}\), met at step 0; checkpoint saved at step 0; rebuild the "
        r"data with this --vocab_file, then rerun to resume", str(raised.value)), raised.value
    assert not (tmp_path / "model" / "discriminator.weights.h5").exists()


def test_the_divergence_hint_names_each_weight_raised_past_its_default():
    import dataclasses

    from electra_tf.core.config import PretrainingConfig
    from electra_tf.training.loop import raised_flags
    from electra_tf.training.pretraining import diverging_flags

    config = PretrainingConfig()
    assert raised_flags(diverging_flags(config)) == ""
    config = dataclasses.replace(config, disc_weight=1e6, gen_weight=0.5, weight_decay_rate=2.0)
    assert raised_flags(diverging_flags(config)) == (
        ", or --disc_weight (it was 1e+06; the default 50), or --weight_decay_rate (it was 2; "
        "the default 0.01)")


@pytest.mark.slow  # a run; the hint itself: above
def test_a_divergence_names_the_loss_weight_raised_past_its_default(tiny_records, tmp_path):
    """A --disc_weight of 1e30 diverges as a high learning rate does: the hint had named
    the learning rate alone (at its default)."""
    trainer = pretraining(tiny_records, tmp_path / "model", disc_weight=1e30, num_train_steps=4,
                          iterations_per_loop=1, eval_data="")
    with pytest.raises(Diverged) as raised:
        trainer.train()
    assert str(raised.value).endswith(
        ", or --disc_weight (it was 1e+30; the default 50), or check that --train_data's "
        "records were built with this --vocab_file"), raised.value


def test_the_numpy_input_names_the_record_holding_an_id_outside_the_vocabulary(tiny_records,
                                                                              tmp_path):
    from electra_tf.core.errors import RecordError
    from electra_tf.data.masking import MaskingConfig
    from electra_tf.data.numpy_pipeline import numpy_pretraining_batches

    size = len(tiny_vocab_tokens())
    path = write_records(tmp_path / "late.tfrecord", [2, 7, 3], [2, 7, -3, 3], count=4)
    masking = MaskingConfig(mask_prob=0.15, max_predictions_per_seq=2, mask_id=4, cls_id=2,
                            sep_id=3, vocab_size=size)
    with pytest.raises(RecordError) as raised:
        list(numpy_pretraining_batches(path, 2, 32, masking, is_training=False))
    assert str(raised.value) == (f"{path}: record 1 holds token id -3, outside the "
                                 f"vocabulary's [0, {size})")


def test_a_non_finite_loss_stops_the_run_keeping_the_last_good_checkpoint(tiny_records,
                                                                         tmp_path):
    model_dir = tmp_path / "model"
    trainer = pretraining(tiny_records, model_dir, learning_rate=1e30, num_train_steps=8,
                          iterations_per_loop=1, save_checkpoints_steps=1, num_warmup_steps=0,
                          eval_data="")
    with pytest.raises(Diverged) as raised:
        trainer.train()
    message = str(raised.value)
    bad = re.fullmatch(r"the training loss became (nan|inf) in step (\d+); stopped without "
                       r"saving those weights: the last checkpoint \(ckpt-(\d+)\) is kept, no "
                       r"final weights were written; lower --learning_rate \(it was 1e\+30\), "
                       r"or check that --train_data's records were built with this --vocab_file",
                       message)
    assert bad and int(bad.group(3)) == int(bad.group(2)) - 1, message
    saved = sorted(p.name for p in (model_dir / "checkpoints").glob("ckpt-*.index"))
    assert saved[-1] == f"ckpt-{bad.group(3)}.index"
    assert not (model_dir / "discriminator.weights.h5").exists()


def test_a_non_finite_gradient_in_a_chunks_last_step_is_not_saved(tiny_records, tmp_path,
                                                                   monkeypatch):
    """A step's loss is computed before its update: an infinite gradient in the last step
    of a chunk (clipping then makes every gradient NaN) had passed the loss check, and
    the checkpoint after it was saved with NaN weights, then named as the good one."""
    import numpy as np
    import tensorflow as tf

    poison_third_update(monkeypatch)
    model_dir = tmp_path / "model"
    trainer = pretraining(tiny_records, model_dir, num_train_steps=6, iterations_per_loop=1,
                          save_checkpoints_steps=1, eval_data="")
    with pytest.raises(Diverged, match=r"^the gradients' norm became (nan|inf) in step 3; "
                                       r"stopped without saving those weights: the last "
                                       r"checkpoint \(ckpt-2\) is kept"):
        trainer.train()
    saved = sorted(p.name for p in (model_dir / "checkpoints").glob("ckpt-*.index"))
    assert saved[-1] == "ckpt-2.index"
    reader = tf.train.load_checkpoint(str(model_dir / "checkpoints" / "ckpt-2"))
    assert all(np.isfinite(reader.get_tensor(n)).all()
               for n, _ in reader.get_variable_to_shape_map().items()
               if reader.get_variable_to_dtype_map()[n].is_floating)


def test_an_interrupt_as_the_weights_turn_nan_saves_nothing(tiny_records, tmp_path,
                                                            monkeypatch):
    """A second Ctrl-C or SIGTERM stops a chunk before its check: the interrupt's save had
    written the NaN weights a diverging step left, and a rerun trained on from them."""
    from electra_tf.training.loop import Interrupted

    poison_third_update(monkeypatch)
    model_dir = tmp_path / "model"
    trainer = pretraining(tiny_records, model_dir, num_train_steps=6, iterations_per_loop=1,
                          save_checkpoints_steps=1, eval_data="")
    real_steps = trainer.train_steps

    def stopped_inside(iterator, n):  # the stop a second signal makes mid-chunk
        results = real_steps(iterator, n)
        if trainer.step == 3:
            raise KeyboardInterrupt
        return results

    trainer.train_steps = stopped_inside
    with pytest.raises(Interrupted, match=r"^interrupted at step 3; no checkpoint was saved "
                                          r"\(the weights had become NaN or infinite"):
        trainer.train()
    saved = sorted(p.name for p in (model_dir / "checkpoints").glob("ckpt-*.index"))
    assert saved[-1] == "ckpt-2.index"


def test_the_cli_turns_a_non_finite_loss_into_one_line_and_status_1(capsys):
    from electra_tf import cli

    def diverge():
        raise Diverged("the training loss became nan in step 3; ...")

    with pytest.raises(SystemExit) as raised:
        cli.run_cli(diverge)
    assert raised.value.code == 1
    assert capsys.readouterr().err == "error: the training loss became nan in step 3; ...\n"


# === Resuming a model_dir with another vocabulary or other shapes ===
@pytest.mark.parametrize("case", ["same_size_vocab", "other_size_vocab", "overrides",
                                  "generator_size", "positions"])
def test_resuming_with_another_vocab_or_shapes_is_refused(case, trained_run, tiny_records,
                                                          tmp_path, models_built):
    """trained_run's folder (checkpoints, final weights, its config: the tiny model, the
    tiny vocab, generator_hidden_size 0.5), resumed with these flags."""
    trained_dir = trained_run["model_dir"]
    tokens = tiny_vocab_tokens()
    before = folder_bytes(trained_dir)
    if case.endswith("vocab"):
        if case == "same_size_vocab":  # two words swap ids: same size, another vocabulary
            i, j = tokens.index("model"), tokens.index("token")
            tokens[i], tokens[j] = tokens[j], tokens[i]
        else:
            tokens.append("electra")
        vocab = write_vocab(tmp_path / "vocab.txt", tokens)
        overrides = {"vocab_file": vocab, "vocab_size": len(tokens)}
        expected = [f"--vocab_file={vocab} ({len(tokens)} tokens",
                    f"is not the vocabulary {trained_dir} holds checkpoints of a run on "
                    f"--vocab_file={tiny_records['vocab']} ({len(tiny_vocab_tokens())} tokens"]
    elif case == "overrides":
        wider = dict(TINY_MODEL, hidden_size=32, intermediate_size=64)
        overrides = {"model_hparam_overrides": json.dumps(wider)}
        expected = [f"{trained_dir} holds checkpoints of a run with other variable shapes: "
                    f"--model_hparam_overrides changes hidden_size=32 (it was "
                    f"{TINY_MODEL['hidden_size']}), intermediate_size=64 (it was "
                    f"{TINY_MODEL['intermediate_size']}); rerun"]
    elif case == "positions":  # a phase 2 of 1024 tokens added to a finished run: the
        # refusal had named --phase2_max_seq_length=0 as the value to rerun with
        overrides = {"num_train_steps": 20, "phase2_steps": 4, "phase2_max_seq_length": 1024,
                     "phase2_train_data": tiny_records["train"]}
        expected = ["the position table: 1024 positions, where the checkpoints hold 512 "
                    "(max(512, --max_seq_length, --phase2_max_seq_length) unless "
                    "--model_hparam_overrides sets max_position_embeddings)"]
    else:
        overrides = {"generator_hidden_size": 1.0}
        expected = ["--generator_hidden_size=1.0 (it was --generator_hidden_size=0.5)"]
    with pytest.raises(ConfigError) as raised:
        if case == "positions":  # (the resume's check: no records of 1024 tokens to read)
            from electra_tf.training.preflight import check_resume

            check_resume(*pretraining_from_flags(*pretrain_flags(tiny_records, trained_dir,
                                                                 **overrides)))
        else:
            pretraining(tiny_records, trained_dir, **overrides)
    for text in expected:
        assert text in str(raised.value), str(raised.value)
    assert not models_built
    assert folder_bytes(trained_dir) == before  # the recorded vocab and config are intact


def test_resuming_with_other_settings_of_the_same_variables_says_so(
        trained_run, tiny_records, tmp_path, capfd):
    """electra's checkpoints continued by electra_15 (the same variables) and another
    mask_prob: allowed, with a line saying so (a --seed, a batch size, a loss weight
    had changed silently; --mixed_precision too), and the record then names them."""
    model_dir = tmp_path / "model"
    shutil.copytree(trained_run["model_dir"], model_dir)
    # and as if trained at bf16 (a run option: the variables are float32 either way)
    record = (model_dir / "pretraining_config.json").read_text()
    assert '"mixed_precision": "fp32"' in record
    # and on 2 replicas (a mirrored or multi-worker run, resumed by one process)
    assert '"replicas": 1' in record
    # and on other records in 2 micro-batches (the same files, given as another spelling
    # of the path or as the list the glob matches, are no change; a relative pattern
    # that matches nothing from here, recorded elsewhere, is not compared)
    recorded = json.loads(record)
    assert recorded["run"]["gradient_accumulation_steps"] == 1
    data = recorded["run"]["train_data"]
    old = tiny_records["eval"]
    recorded["run"].update(mixed_precision="bf16", gradient_accumulation_steps=2,
                           train_data=old, jit_compile=True)
    recorded["replicas"] = 2
    (model_dir / "pretraining_config.json").write_text(json.dumps(recorded))
    # (the same, at another global batch: not "the same global batch" then)
    other_batch = tmp_path / "other_batch"
    shutil.copytree(model_dir, other_batch)
    batch = recorded["pretraining"]["train_batch_size"]
    recorded["pretraining"]["train_batch_size"] = 2 * batch
    (other_batch / "pretraining_config.json").write_text(json.dumps(recorded))
    capfd.readouterr()
    pretraining(tiny_records, other_batch, num_train_steps=7, iterations_per_loop=1,
                eval_data="", seed=3).train(stop_at_step=6)
    err = capfd.readouterr().err
    assert (f"--train_batch_size={batch} (it was {2 * batch}), " in err
            and "--gradient_accumulation_steps=1 (it was 2), " in err), err
    trainer = pretraining(tiny_records, model_dir, objective="electra_15", num_train_steps=7,
                          iterations_per_loop=1, eval_data="", mask_prob=0.2, seed=3,
                          learning_rate=5e-4)  # the schedule may change without a word
    trainer.train()
    err = capfd.readouterr().err
    assert ("[pretrain] note: this run continues checkpoints trained with other settings: "
            "--objective=electra_15 (it was electra), --mask_prob=0.2 (it was 0.15), "
            "--mixed_precision=fp32 (it was bf16), "
            f"--train_data={data} (it was {old}), --gradient_accumulation_steps=1 (it "
            "was 2: the same global batch in other micro-batches), --jit_compile=false (it "
            "was true: compiled steps draw other masks and samples), "
            "the batch split over 1 replica(s) (it was "
            "2: other masks and input order, the same global batch); pretraining_config.json "
            "now records these\n") in err, err
    # (each a run stopped where it starts, step 7 of 8: the comparison precedes any step)
    for spelled in (os.path.join(os.path.relpath(os.path.dirname(data)), ".",
                                 os.path.basename(data)),
                    ",".join(sorted(glob.glob(data))),
                    "elsewhere/" + os.path.basename(data)):
        if spelled.startswith("elsewhere/"):  # recorded by a run in another directory;
            record = json.loads((model_dir / "pretraining_config.json").read_text())
            record["run"]["train_data"], spelled = spelled, data  # this run names the files
            (model_dir / "pretraining_config.json").write_text(json.dumps(record))
        pretraining(tiny_records, model_dir, objective="electra_15", num_train_steps=8,
                    iterations_per_loop=1, eval_data="", mask_prob=0.2, seed=3,
                    learning_rate=5e-4, train_data=spelled).train(stop_at_step=7)
        assert "note:" not in capfd.readouterr().err, spelled
    with open(model_dir / "pretraining_config.json") as f:
        recorded = json.load(f)
    assert recorded["pretraining"]["objective"] == "electra_15"
    assert recorded["run"]["mixed_precision"] == "fp32" and recorded["replicas"] == 1


def test_a_finished_run_run_again_keeps_its_record_and_says_nothing_of_new_flags(
        trained_run, tiny_records, tmp_path, capfd):
    """A rerun of a finished run with another --gradient_accumulation_steps (or seed)
    trains nothing: its pretraining_config.json had been rewritten with the new flags,
    and a note said they continue its checkpoints."""
    model_dir = tmp_path / "model"
    shutil.copytree(trained_run["model_dir"], model_dir)
    record = (model_dir / "pretraining_config.json").read_bytes()
    capfd.readouterr()
    pretraining(tiny_records, model_dir, num_train_steps=6, gradient_accumulation_steps=2,
                seed=9, eval_data="").train()
    err = capfd.readouterr().err
    assert "note:" not in err
    assert "already at --num_train_steps=6: nothing to train; writing the final weights " \
        "again" in err, err
    assert (model_dir / "pretraining_config.json").read_bytes() == record


def test_a_finished_run_run_again_repeats_its_final_evaluation_exactly(
        trained_run, tmp_path, monkeypatch):
    """A finished run given again evaluates again (docs/pretraining.md: its new event
    file repeats the final point at the same step with the same values): the
    evaluation's masking and sampling are seeded, so the repeat is the same point."""
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining

    model_dir = tmp_path / "model"
    shutil.copytree(trained_run["model_dir"], model_dir)
    run = dataclasses.replace(trained_run["run"], model_dir=str(model_dir))
    before = {name: sorted(os.listdir(model_dir / name)) for name in ("train", "eval")}
    again = TensorFlowPretraining(trained_run["config"], run).train()
    assert again and again == trained_run["final"]
    # a new eval event file; no train/ one (an empty one had been added by every rerun)
    assert sorted(os.listdir(model_dir / "train")) == before["train"]
    assert len(os.listdir(model_dir / "eval")) == len(before["eval"]) + 1
    # a full disk as it writes the same end again leaves the end it had (the generator
    # and final_eval.json had been removed first, as an earlier end's are)
    from electra_tf.folders import pretraining as pretraining_folder

    def full(*args):
        raise OSError(28, "No space left on device", str(model_dir / "x.weights.h5"))

    kept = {name: (model_dir / name).read_bytes()
            for name in ("generator.weights.h5", "final_eval.json")}
    monkeypatch.setattr(pretraining_folder, "save_discriminator", full)
    with pytest.raises(OSError, match="No space left"):
        TensorFlowPretraining(trained_run["config"], run).train()
    assert {name: (model_dir / name).read_bytes() for name in kept} == kept
    final_eval = json.loads((model_dir / "final_eval.json").read_text())
    assert final_eval == json.loads(
        (trained_run["model_dir"] / "final_eval.json").read_text())


def test_an_extended_run_stopped_in_its_final_writes_claims_no_old_end(
        trained_run, tiny_records, tmp_path, monkeypatch):
    """A finished run extended (--num_train_steps 6 -> 7) and stopped between its new
    discriminator and its generator had left the old generator and the old step's
    final_eval.json beside the new discriminator: a folder that opened as whole."""
    from electra_tf import folders

    model_dir = tmp_path / "model"
    shutil.copytree(trained_run["model_dir"], model_dir)
    assert json.loads((model_dir / "final_eval.json").read_text())["step"] == 6

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(folders.pretraining, "save_generator", disk_full)
    with pytest.raises(OSError):
        pretraining(tiny_records, model_dir, num_train_steps=7, eval_data="").train()
    assert not (model_dir / "final_eval.json").exists()
    assert not (model_dir / "generator.weights.h5").exists()
    assert folders.pretraining.PretrainingFolder.open(str(model_dir)).final_eval() is None


@pytest.mark.slow  # two more resumes (7 s); data_files_record itself: the test below
def test_a_resume_names_shards_added_under_its_glob(trained_run, tiny_records, tmp_path,
                                                    capfd):
    """A shard added under the same --train_data pattern: the pattern alone had compared
    equal, and the run went on without a word."""
    model_dir = tmp_path / "model"
    shutil.copytree(trained_run["model_dir"], model_dir)
    data = json.loads((model_dir / "pretraining_config.json").read_text())["run"]["train_data"]
    shards = tmp_path / "shards"
    shards.mkdir()
    files = sorted(glob.glob(data))
    for i, name in enumerate(files):
        shutil.copy(name, shards / f"part-{i}.tfrecord")
    pattern = str(shards / "part-*.tfrecord")
    for steps in (7, 8):
        if steps == 8:
            shutil.copy(files[0], shards / "part-9.tfrecord")
        capfd.readouterr()
        pretraining(tiny_records, model_dir, objective="electra_15", num_train_steps=steps,
                    iterations_per_loop=1, eval_data="", mask_prob=0.2, seed=3,
                    learning_rate=5e-4, train_data=pattern).train()
    assert ("[pretrain] note: this run continues checkpoints trained with other settings: "
            f"the files --train_data matches ({len(files) + 1} now, other than the "
            f"{len(files)} recorded); pretraining_config.json now records these\n"
            ) in capfd.readouterr().err


def test_data_files_record_follows_the_files_a_pattern_matches(tmp_path):
    """What a resume compares: the files' number and paths, not the pattern's text."""
    from electra_tf.training.pretraining import data_files_record

    for name in ("a.tfrecord", "b.tfrecord"):
        (tmp_path / name).write_bytes(b"x")
    pattern = str(tmp_path / "*.tfrecord")
    before = data_files_record(pattern)
    assert before["count"] == 2
    assert data_files_record(",".join(sorted(str(p) for p in tmp_path.iterdir()))) == before
    (tmp_path / "c.tfrecord").write_bytes(b"x")
    after = data_files_record(pattern)
    assert after["count"] == 3 and after["sha256"] != before["sha256"]
    assert data_files_record("") is None


def test_a_damaged_or_missing_record_beside_checkpoints_says_what_to_do(
        trained_run, tiny_records, tmp_path, capfd):
    """An emptied pretraining_config.json had been `malformed JSON` alone; a removed one
    let a resume with other flags go on without a word."""
    model_dir = tmp_path / "model"
    shutil.copytree(trained_run["model_dir"], model_dir)
    record = model_dir / "pretraining_config.json"
    record.write_bytes(b"")
    with pytest.raises(InputError, match=rf"^{record}:1:1: malformed JSON: .*; it records what "
                                         rf"{model_dir}'s checkpoints were trained with: put "
                                         r"back a whole copy, or remove it"):
        pretraining(tiny_records, model_dir, num_train_steps=7, iterations_per_loop=1)
    assert record.read_bytes() == b""  # nothing written
    record.unlink()
    capfd.readouterr()
    pretraining(tiny_records, model_dir, num_train_steps=7, iterations_per_loop=1,
                eval_data="", seed=6).train()
    assert (f"note: {model_dir} holds checkpoints but no pretraining_config.json: this run's "
            "flags could not be checked") in capfd.readouterr().err
    assert json.loads(record.read_text())["pretraining"]["seed"] == 6


@pytest.mark.parametrize("algorithm", ["two_stage", "phase2"])
def test_a_resume_may_not_move_a_stage_switch_the_checkpoints_are_past(algorithm, make_configs,
                                                                       tmp_path):
    """Raising --num_train_steps moved two-stage training's switch (num_train_steps // 2)
    and phase 2's (num_train_steps - phase2_steps): a two-stage run past its switch
    re-initialized its trained discriminator from the generator; a phase-2 run went
    back to phase 1. Both silently."""
    import dataclasses

    from electra_tf import folders
    from electra_tf.training.preflight import check_resume

    two = algorithm == "two_stage"
    extra = dict(training_algorithm="two_stage", generator_hidden_size=1.0, generator_layers=1.0,
                 model_hparam_overrides=dict(TINY_MODEL, num_attention_heads=1,
                                             intermediate_size=4 * TINY_MODEL["hidden_size"])
                 ) if two else dict(phase2_steps=2, phase2_max_seq_length=32)
    config, run = make_configs(tmp_path / "m", num_train_steps=4, **extra)
    os.makedirs(tmp_path / "m" / "checkpoints")
    folders.pretraining.write_pretraining_config(run.model_dir, config, run)

    def at(step, **changes):
        (tmp_path / "m" / "checkpoints" / f"ckpt-{step}.index").write_bytes(b"")
        check_resume(dataclasses.replace(config, **changes), run)

    at(1, num_train_steps=8)  # before both switches (2, and 4): any move
    with pytest.raises(ConfigError) as raised:
        at(4, num_train_steps=8)  # the run's end, past its switch at 2
    stage = ("the discriminator's stage from step 2 (half of --num_train_steps=4)" if two else
             "phase 2 from step 2 (--num_train_steps=4 - --phase2_steps=2)")
    moved = ("the discriminator's stage from step 4 (half of --num_train_steps=8)" if two else
             "phase 2 from step 6 (--num_train_steps=8 - --phase2_steps=2)")
    keep = ("resume with --num_train_steps=4" if two else
            "keep --num_train_steps - --phase2_steps = 2")
    assert str(raised.value) == (
        f"{run.model_dir} holds checkpoints of a run at step 4 with {stage}; this run's flags "
        f"give {moved}, which would count steps already trained in the other stage; {keep}, "
        "or use another --model_dir")
    if not two:
        at(4, num_train_steps=8, phase2_steps=6)  # the same switch: phase 2 goes on longer
        return
    # past the switch as joint training (the advice had been the --num_train_steps given)
    with pytest.raises(ConfigError) as raised:
        at(4, training_algorithm="joint")
    assert str(raised.value) == (
        f"{run.model_dir} holds checkpoints of a run at step 4 with {stage}; this run's flags "
        "give no second stage (--training_algorithm=joint), which would count steps already "
        "trained in the other stage; resume with --training_algorithm=two_stage, or use "
        "another --model_dir")


def test_jax_options_on_the_tensorflow_backend_are_refused(tiny_records, tmp_path):
    """--jax_input_pipeline and --jax_steps_per_call had been ignored by the TensorFlow
    loop, which trained without a word."""
    proc = run_module("electra_tf.run_pretraining",
                      *pretrain_flags(tiny_records, tmp_path / "model"),
                      "--jax_input_pipeline=packed", "--jax_steps_per_call=3")
    line = error_line(proc, "--jax_steps_per_call, --jax_input_pipeline: for KERAS_BACKEND=jax, "
                            "and this run is on tensorflow")
    assert line.endswith("on tensorflow"), line  # the multi-host hint is for those flags
    assert not (tmp_path / "model").exists()


def test_num_devices_without_the_mirrored_strategy_is_refused(tiny_records, tmp_path):
    """--num_devices=2 on the TensorFlow backend's default strategy had trained on one
    device, exit 0 (and fine-tuning recorded num_devices 2)."""
    proc = run_module("electra_tf.run_pretraining",
                      *pretrain_flags(tiny_records, tmp_path / "model"), "--num_devices=2")
    error_line(proc, "--num_devices=2 is for --strategy=mirrored (on the TensorFlow backend; "
                     "JAX spreads over devices without it), and this run's is default: one "
                     "device; give --strategy=mirrored")
    assert not (tmp_path / "model").exists()


# Slow: a TensorFlow process of its own, for a message
@pytest.mark.slow
def test_a_micro_batch_that_does_not_split_over_the_devices_names_its_flags(tiny_records,
                                                                           tmp_path):
    """Micro-batches of 1 over 2 devices: "the micro-batch 1" had been all it said."""
    proc = run_module("electra_tf.run_pretraining",
                      *pretrain_flags(tiny_records, tmp_path / "model"), "--num_devices=2",
                      "--strategy=mirrored", "--gradient_accumulation_steps=8")
    error_line(proc, "the micro-batch (--train_batch_size=8 / --gradient_accumulation_steps=8)"
                     ", 1, does not split over 2 replicas")


def test_resume_checks_in_process(make_configs, tmp_path):
    """check_resume alone: what it compares, and what it lets through."""
    import dataclasses

    from electra_tf import folders
    from electra_tf.core.errors import ConfigError
    from electra_tf.training.preflight import check_resume

    config, run = make_configs(tmp_path / "m", model_hparam_overrides={})
    check_resume(config, run)  # no checkpoints: nothing to check
    # a model and no checkpoints (a finished run's, checkpoints removed; an import): a
    # fresh run rewrote its record (vocabulary, casing) beside the old weights at once
    os.makedirs(tmp_path / "m")
    (tmp_path / "m" / "discriminator.weights.h5").write_bytes(b"a model")
    with pytest.raises(ConfigError, match=re.escape(
            f"--model_dir {run.model_dir} holds a model (discriminator.weights.h5) and no "
            "checkpoints to continue: a new run would replace it; give another --model_dir")):
        check_resume(config, run)
    # (the flags: the refusal first, where it had said "vocab_file is required" to a folder
    # converted from transformers, which records its vocabulary and has no checkpoints)
    flags = [f for f in pretrain_flags({"train": "t*", "eval": "e*", "vocab": run.vocab_file},
                                       run.model_dir) if not f.startswith("--vocab_file=")]
    with pytest.raises(ConfigError, match=re.escape(
            f"--model_dir {run.model_dir} holds a model (discriminator.weights.h5) and no "
            "checkpoints to continue: a new run would replace it; give another --model_dir "
            "(a conversion from transformers, or of a discriminator alone, writes no "
            "checkpoint and cannot be pre-trained further; a TF1 conversion of both models "
            "can)")):
        pretraining_from_flags(*flags)
    # a conversion killed midway (its marker beside the half model): said so, from the
    # flags and from check_resume (it had been "a model and no checkpoints")
    half = tmp_path / "half"
    shutil.copytree(tmp_path / "m", half)
    (half / ".conversion_unfinished").write_text("{}")
    stopped = (f"--model_dir: {half} holds a conversion that was stopped midway "
               "(.conversion_unfinished): its model is incomplete")
    with pytest.raises(InputError, match=re.escape(stopped)):
        pretraining_from_flags(*[f for f in flags if not f.startswith("--model_dir=")],
                               f"--model_dir={half}")
    with pytest.raises(InputError, match=re.escape(stopped)):
        check_resume(config, dataclasses.replace(run, model_dir=str(half)))
    # checkpoints and no recorded vocabulary (a TF1 conversion that found none): the
    # vocabulary is asked for by name (it had been "vocab_file is required")
    bare = tmp_path / "bare"
    os.makedirs(bare / "checkpoints")
    (bare / "checkpoints" / "ckpt-1.index").write_text("fake")
    folders.pretraining.write_pretraining_config(str(bare), config, {"vocab_file": ""})
    with pytest.raises(ConfigError, match=re.escape(
            f"--vocab_file is required: {bare} records no vocabulary")):
        pretraining_from_flags(*[f for f in flags if not f.startswith("--model_dir=")],
                               f"--model_dir={bare}")
    os.makedirs(tmp_path / "m" / "checkpoints")
    (tmp_path / "m" / "checkpoints" / "ckpt-1.index").write_text("fake")
    folders.pretraining.write_pretraining_config(run.model_dir, config, run)
    assert folders.PretrainingFolder.open(run.model_dir, discriminator=False).vocab_sha256 == folders.vocabulary.vocab_fingerprint(
        run.vocab_file)
    check_resume(config, run)
    check_resume(dataclasses.replace(config, learning_rate=1e-4, num_train_steps=9), run)
    with pytest.raises(ConfigError, match=r"--model_size=small \(it was --model_size=tiny\)"):
        check_resume(dataclasses.replace(config, model_size="small"), run)
    # Another optimizer would run on the recorded one's moments: refused, naming both.
    with pytest.raises(ConfigError, match=r"^--optimizer=lamb: .* holds checkpoints of a run "
                                          r"with --optimizer=adamw, .*resume with "
                                          r"--optimizer=adamw, or use another --model_dir$"):
        check_resume(dataclasses.replace(config, optimizer="lamb"), run)
    # The casing the folder records is what fine-tuning and the export follow.
    with pytest.raises(ConfigError, match=r"^--do_lower_case=false: .* holds checkpoints of a "
                                          r"run on text lower-cased \(--do_lower_case=true\); "
                                          r"resume with --do_lower_case=true, or use another "
                                          r"--model_dir$"):
        check_resume(dataclasses.replace(config, do_lower_case=False), run)
    # Dropout and the initializer change no variable: a run continues with other values
    # (dropout off after convert --from=tf1, #54); a shape or an activation is refused,
    # naming the key.
    check_resume(dataclasses.replace(config, model_hparam_overrides={
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
        "initializer_range": 0.05}), run)
    for key, value, was in (("hidden_act", "relu", "'gelu'"), ("intermediate_size", 7, None)):
        with pytest.raises(ConfigError) as raised:
            check_resume(dataclasses.replace(config, model_hparam_overrides={
                "hidden_dropout_prob": 0.0, key: value}), run)
        was = was or repr(getattr(config.discriminator_config(), key))
        assert (f"other variable shapes: --model_hparam_overrides changes {key}={value!r} "
                f"(it was {was}); rerun") in str(raised.value), str(raised.value)
    # A vocabulary at another path with the same tokens is the same vocabulary.
    moved = shutil.copy(run.vocab_file, tmp_path / "moved_vocab.txt")
    check_resume(config, dataclasses.replace(run, vocab_file=str(moved)))
    # A config that records the vocab_file without its fingerprint: one line, not a guess.
    recorded = folders.pretraining.read_pretraining_config(run.model_dir)
    del recorded["vocab_sha256"]
    path = tmp_path / "m" / folders.files.PRETRAINING_CONFIG
    folders.files.write_json(str(path), recorded)
    other = write_vocab(tmp_path / "other.txt", tiny_vocab_tokens()[::-1])
    with pytest.raises(InputError, match=rf"^{path}: lacks vocab_sha256 \(it records "):
        check_resume(config, dataclasses.replace(run, vocab_file=other))


# === Faults ===
def test_unfinished_checkpoint_saves_are_removed_at_start(tmp_path):
    import keras

    from electra_tf.training.checkpoints import TensorFlowCheckpoints

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    folder = tmp_path / "checkpoints"
    stale = folder / "ckpt-7_temp"
    stale.mkdir(parents=True)
    (stale / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"half a save")
    (folder / "notes_temp").mkdir()  # not tf.train's: kept
    (folder / "ckpt-6.index").write_bytes(b"a finished save")  # kept
    checkpoints = TensorFlowCheckpoints(model, optimizer, str(folder), 3)
    assert sorted(os.listdir(folder)) == ["ckpt-6.index", "notes_temp"]
    assert checkpoints.save()


def test_restoring_checkpoints_of_another_model_is_one_clear_error(tmp_path):
    import keras

    from electra_tf.core.errors import ConfigError
    from electra_tf.training.checkpoints import TensorFlowCheckpoints

    def checkpoints(width):
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(width)])
        optimizer = keras.optimizers.Adam()
        optimizer.build(model.trainable_variables)
        return TensorFlowCheckpoints(model, optimizer, str(tmp_path / "ckpt"), 3)

    checkpoints(2).save()
    with pytest.raises(ConfigError, match="cannot resume from .*ckpt-0: its variables do not "
                                          "fit this model"):
        checkpoints(4).restore()


@pytest.mark.slow  # the default suite's CLI Ctrl-C: test_finetuning_faults.py (same run_cli);
# the loop's save at the chunk's end: test_training_interrupts.py, in process
def test_ctrl_c_saves_and_exits_130_with_one_line(tiny_records, tmp_path):
    model_dir = tmp_path / "model"
    interrupt_after("electra_tf.run_pretraining", pretrain_flags(
        tiny_records, model_dir, num_train_steps=100000, iterations_per_loop=1,
        save_checkpoints_steps=100000), r"step 2/100000", model_dir)


@pytest.mark.slow  # the default suite's CLI SIGTERM: test_finetuning_faults.py (same run_cli);
# the loop's save and exact resume: test_training_interrupts.py, in process
@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_sigterm_saves_and_exits_143_with_one_line(backend, tiny_records, tmp_path):
    from helpers import jax_child_env

    model_dir = tmp_path / "model"
    interrupt_after("electra_tf.run_pretraining", pretrain_flags(
        tiny_records, model_dir, num_train_steps=100000, iterations_per_loop=1,
        save_checkpoints_steps=100000), r"step 2/100000", model_dir, sig=signal.SIGTERM,
        env=jax_child_env() if backend == "jax" else None)


def test_multi_worker_peer_that_never_starts_times_out(tiny_records, tmp_path):
    cluster = {"worker": [f"127.0.0.1:{p}" for p in free_ports(2)]}
    env = child_env(TF_CONFIG=json.dumps({"cluster": cluster,
                                          "task": {"type": "worker", "index": 0}}))
    proc = run_python(["-m", "electra_tf.run_pretraining",
                       *pretrain_flags(tiny_records, tmp_path / "model"),
                       "--strategy=multi_worker", "--worker_startup_timeout_s=3"],
                      env=env, timeout=180)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: --strategy=multi_worker: the cluster did not come up within "
        f"--worker_startup_timeout_s=3: not every task of TF_CONFIG (worker 0 "
        f"{cluster['worker'][0]}, worker 1 {cluster['worker'][1]}) started, or one cannot be "
        "reached; start them all, or raise --worker_startup_timeout_s"], proc.stderr[-3000:]
    # said before the wait (a peer that had failed before it joined left this one silent)
    assert (f"[multi_worker] waiting for every task of TF_CONFIG (worker 0 "
            f"{cluster['worker'][0]}, worker 1 {cluster['worker'][1]}) to start, up to "
            "--worker_startup_timeout_s=3") in proc.stderr.splitlines()
    assert not (tmp_path / "model").exists()


# Slow (two TF processes): the default suite holds the peer that never starts (above).
@pytest.mark.slow
def test_multi_worker_peer_that_fails_at_start_up_stops_the_other(tiny_records, tmp_path):
    cluster = {"worker": [f"127.0.0.1:{p}" for p in free_ports(2)]}
    procs = []
    for i, train_data in enumerate((tiny_records["train"], f"{tmp_path}/none*")):
        env = child_env(TF_CONFIG=json.dumps({"cluster": cluster,
                                              "task": {"type": "worker", "index": i}}))
        procs.append(popen_python(
            ["-m", "electra_tf.run_pretraining", *pretrain_flags(
                tiny_records, tmp_path / "model", train_data=train_data, num_train_steps=4),
             "--strategy=multi_worker"], env=env, stderr=subprocess.PIPE, text=True))
    try:
        survivor, failed = (subprocess.CompletedProcess(p.args, p.wait(timeout=patience(300)),
                                                        stderr=p.stderr.read()) for p in procs)
    finally:
        for p in procs:
            p.kill()
    error_line(failed, "--train_data pattern", "matches no file")
    error_line(survivor, "error: --strategy=multi_worker: worker 1 of TF_CONFIG's cluster "
                         "stopped", returncode=1)


@pytest.mark.parametrize("value,message", [
    ("{not json", r"TF_CONFIG is not valid JSON \("),
    ("[1, 2]", r'TF_CONFIG needs a "cluster" of jobs and a "task"'),
    ('{"task": {"type": "worker", "index": 0}}', r'TF_CONFIG needs a "cluster"'),
    ('{"cluster": {"worker": ["a:1", "b:2"]}}', r"TF_CONFIG's task null names no job of its "
                                                r"cluster \(worker\)"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}',
     r"task \{\"type\": \"chief\", \"index\": 0\} names no job"),
    # each had been a traceback, or a wait until the start-up timeout
    ('{"cluster": {"worker": ["a:1"], "ps": ["b:2"]}, "task": {"type": "worker", "index": 0}}',
     r"TF_CONFIG's cluster has a 'ps' job: MultiWorkerMirroredStrategy takes \"chief\" and "
     r"\"worker\" jobs only"),
    ('{"cluster": {"worker": "a:1"}, "task": {"type": "worker", "index": 0}}',
     r"TF_CONFIG's 'worker' job is \"a:1\": give a list of \"host:port\" strings"),
    ('{"cluster": {"worker": ["a:1", "b:99999"]}, "task": {"type": "worker", "index": 0}}',
     r"TF_CONFIG's 'worker' job lists 'b:99999': an address is host:port, the port 1 to "
     r"65535"),
    ('{"cluster": {"worker": ["a:1", "b:\u00b2"]}, "task": {"type": "worker", "index": 0}}',
     r"TF_CONFIG's 'worker' job lists 'b:\u00b2': an address is host:port"),  # (ValueError)
    ('{"cluster": {"chief": ["a:1", "b:2"]}, "task": {"type": "chief", "index": 1}}',
     r"TF_CONFIG's cluster has 2 \"chief\" tasks: at most one"),
    ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 2}}',
     r"TF_CONFIG's task index 2 is out of range: its cluster has 2 worker task\(s\), 0 to 1"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": "1"}}',
     r"task index 1 is out of range"),  # (as TensorFlow reads it: int("1"))
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": "zero"}}',
     r'task index "zero" is not a whole number: give its place in the worker job, 0 to 0'),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0.5}}',
     r"task index 0.5 is not a whole number"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": "\u00b2"}}',
     r'task index "\\u00b2" is not a whole number'),  # (str.isdigit: a ValueError)
    # a type that is a list or an object (a TypeError traceback), another RPC layer
    # (TensorFlow's 150-line "No server factory registered" dump)
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": ["worker"], "index": 0}}',
     r"task \{\"type\": \[\"worker\"\], \"index\": 0\} names no job of its cluster"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}, '
     '"rpc_layer": "bogus"}',
     r"TF_CONFIG's rpc_layer is \"bogus\": MultiWorkerMirroredStrategy's servers speak "
     r"\"grpc\" \(leave it out\)"),
    # (TensorFlow's ValueError traceback; a wait for the start-up timeout)
    ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker"}}',
     r"TF_CONFIG's task \{\"type\": \"worker\"\} has no \"index\": give its place in the "
     r"worker job, 0 to 1"),
    ('{"cluster": {"chief": ["a:1"], "worker": ["b:2", "a:1"]}, "task": {"type": "worker", '
     '"index": 0}}',
     r"TF_CONFIG's cluster lists a:1 twice \(chief 0 and worker 1\): give each task its own "
     r"host:port"),
])
def test_a_tf_config_tensorflow_cannot_use_is_one_config_error(value, message, monkeypatch):
    from electra_tf.training.backends.tensorflow import check_tf_config, make_strategy

    with pytest.raises(ConfigError, match=message):
        check_tf_config(value)
    monkeypatch.setenv("TF_CONFIG", value)  # refused before TensorFlow reads it
    with pytest.raises(ConfigError, match=message):
        make_strategy("multi_worker", 0)


_SIGTERM_AFTER_THE_STRATEGY = """
import os, signal
caught = []
signal.signal(signal.SIGTERM, lambda *a: caught.append(a[0]))
from electra_tf.training.backends.tensorflow import make_strategy
make_strategy("multi_worker", 0)
os.kill(os.getpid(), signal.SIGTERM)
print("caught", caught)
"""


# Slow: a TensorFlow process starting a one-worker cluster
@pytest.mark.slow
def test_a_sigterm_after_the_multi_worker_strategy_starts_reaches_python(tmp_path):
    """TensorFlow's coordination service installs its own SIGTERM handler, which logs the
    signal and swallows it: a SIGTERM between the cluster's start and the training loop
    had been lost, and the run trained to its end, exit 0."""
    (port,) = free_ports(1)
    env = child_env(TF_CONFIG=json.dumps({"cluster": {"worker": [f"127.0.0.1:{port}"]},
                                          "task": {"type": "worker", "index": 0}}))
    proc = run_python(["-c", _SIGTERM_AFTER_THE_STRATEGY], env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == f"caught [{int(signal.SIGTERM)}]", (
        proc.stdout[-2000:] + proc.stderr[-2000:])


def test_a_tf_config_index_tensorflow_reads_as_a_number_is_taken():
    from electra_tf.training.backends.tensorflow import check_tf_config

    for index, rpc in (('"1"', '"grpc"'), ("1.0", "null"), ("1", '""'), ('"+1"', '"grpc"')):
        check_tf_config('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", '
                        f'"index": {index}}}, "rpc_layer": {rpc}}}')


def test_a_tf_config_port_in_use_is_one_config_error(monkeypatch):
    """This worker's own port held by another process: TensorFlow's gRPC server had
    failed with a traceback (and the other workers waited for the start-up timeout)."""
    import socket

    from electra_tf.training.backends.tensorflow import check_tf_config, make_strategy

    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", 0))
    held.listen()
    port = held.getsockname()[1]
    try:
        value = json.dumps({"cluster": {"worker": [f"127.0.0.1:{port}", "127.0.0.1:1"]},
                            "task": {"type": "worker", "index": 0}})
        message = (f"TF_CONFIG's worker 0 is 127.0.0.1:{port}, but port {port} is in use on "
                   "this host")
        with pytest.raises(ConfigError, match=re.escape(message)):
            check_tf_config(value)
        monkeypatch.setenv("TF_CONFIG", value)
        with pytest.raises(ConfigError, match=re.escape(message)):
            make_strategy("multi_worker", 0)
    finally:
        held.close()
    check_tf_config(value)  # free again
    # A run that just ended leaves its server's connections in TIME_WAIT for about a
    # minute: the port is free to a server (gRPC's binds with SO_REUSEADDR), and a prompt
    # rerun on the same ports had been refused as "in use".
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC's server
    listener.bind(("127.0.0.1", port))
    listener.listen()
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    accepted.close()  # the server's side closes first: its port's connection in TIME_WAIT
    client.close()
    listener.close()
    check_tf_config(value)


def test_a_tpu_strategy_without_a_tpu_is_one_config_error(monkeypatch):
    """TensorFlow's resolver had ended run_pretraining --strategy=tpu in a 37-line
    traceback where no TPU is named (and a URLError traceback for a name it cannot
    look up)."""
    from electra_tf.training.backends.tensorflow import make_strategy

    monkeypatch.delenv("TPU_NAME", raising=False)
    with pytest.raises(ConfigError, match=r"^--strategy=tpu: no TPU reached \(Please provide "
                                          r"a TPU Name to connect to.\); give --tpu=NAME"):
        make_strategy("tpu", 0)


def test_after_the_interrupted_line_a_second_ctrl_c_is_ignored(capsys, sigint_handler):
    """The exit that follows `interrupted at step N` runs JAX's exit hooks; a second Ctrl-C
    there printed "Exception ignored ... KeyboardInterrupt". The status stays 130."""
    from electra_tf import cli
    from electra_tf.training.loop import Interrupted

    def interrupted():
        raise Interrupted(7)

    with pytest.raises(SystemExit) as raised:
        cli.run_cli(interrupted)
    assert raised.value.code == cli.EXIT_INTERRUPTED
    assert capsys.readouterr().err.startswith("interrupted at step 7; checkpoint saved")
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def ctrl_c_elsewhere():  # outside the loop's gate: a final write, an evaluation
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as raised:
        cli.run_cli(ctrl_c_elsewhere)
    assert raised.value.code == cli.EXIT_INTERRUPTED
    assert capsys.readouterr().err == "interrupted; run the same command again to finish\n"


_LEFT_PEERS = """
import atexit, sys
from electra_tf import cli
from electra_tf.training.loop import Interrupted

atexit.register(lambda: print("exit hook ran", flush=True))

def stopped_alone():
    raise Interrupted(7, saved=False, signum=15, left_peers=sys.argv[1] == "alone")

cli.run_cli(stopped_alone)
"""


@pytest.mark.parametrize("how", ["alone", "together"])
def test_a_process_that_left_its_peers_ends_without_its_exit_hooks(how):
    """A second signal stops one process of a multi-worker or multi-host run alone: its
    exit hooks (JAX's shutdown barrier) would wait for the peers it left in a collective,
    so it ends at once after its line, with 128 + the signal. Processes that stopped
    together exit as usual."""
    proc = run_python(["-c", _LEFT_PEERS, how], timeout=60)
    assert proc.returncode == 143, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "interrupted at step 7; no checkpoint was saved; a rerun starts from the latest one")
    assert ("exit hook ran" in proc.stdout) == (how == "together"), proc.stdout


# === One run per model_dir ===
def test_a_second_run_on_a_model_dir_in_use_is_refused(make_configs, tmp_path, models_built,
                                                       tiny_records):
    """Two runs on one model_dir would interleave their checkpoints and configs: the second
    is refused, naming the first's host and pid; the kernel frees a killed holder's lock."""
    import sys

    from electra_tf.core.fileio import FolderLock
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining

    model_dir = tmp_path / "model"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from electra_tf.core.fileio import FolderLock\n"
         f"with FolderLock({str(model_dir)!r}):\n    print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        trainer = TensorFlowPretraining(*make_configs(model_dir))
        with pytest.raises(InputError, match=rf"^--model_dir {model_dir} is in use by host "
                                             rf".*, pid {holder.pid}, since "):
            trainer.train()
        assert sorted(os.listdir(model_dir)) == [".lock"]  # the refused run wrote nothing
        # The command says it in one line, before it builds and describes the model.
        proc = run_module("electra_tf.run_pretraining",
                          *pretrain_flags(tiny_records, str(model_dir)))
        error_line(proc, f"--model_dir {model_dir} is in use by host")
        assert "[pretrain]" not in proc.stderr, proc.stderr
    finally:
        holder.kill()
        holder.wait()
    with FolderLock(str(model_dir), "--model_dir"):  # the dead holder's lock is gone
        with pytest.raises(InputError, match=rf"pid {os.getpid()}"):
            FolderLock(str(model_dir), "--model_dir").__enter__()
    assert ".lock" not in os.listdir(model_dir)  # a run that ends removes its lock file


def test_a_finished_run_leaves_no_lock_file_and_locks_stay_exclusive(trained_run, tmp_path):
    """A finished model folder held a stale .lock (#54); removing it must not let two
    holders in: one that opened the file before it was removed locks the new one."""
    from electra_tf.core.fileio import FolderLock

    assert ".lock" not in os.listdir(trained_run["model_dir"])
    folder = str(tmp_path / "f")
    first = FolderLock(folder).__enter__()
    stale = open(os.path.join(folder, ".lock"), "a+")  # a waiter that opened the old file
    first.__exit__(None, None, None)
    assert not os.path.exists(os.path.join(folder, ".lock"))
    with FolderLock(folder):
        import fcntl

        fcntl.flock(stale.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # the removed inode
        with pytest.raises(InputError, match="is in use by host"):
            FolderLock(folder).__enter__()  # the path's file is still held
    stale.close()


@pytest.mark.parametrize("code,text,error", [(28, "No space left on device",
                                              "ResourceExhaustedError"),
                                             (30, "Read-only file system",
                                              "PermissionDeniedError"),
                                             (27, "File too large", "OutOfRangeError")])
def test_a_write_the_file_system_refuses_is_one_line_and_status_1(code, text, error, capsys,
                                                                   monkeypatch):
    """ENOSPC, EROFS or EFBIG (a file size limit: ulimit -f, a batch system's, FAT's
    4 GiB) while a checkpoint, the weights or an export is written (Python's OSError,
    or TensorFlow's error of that cause: tests/test_framework_messages.py provokes
    TensorFlow's own)."""
    import tensorflow as tf

    from electra_tf import cli

    def python_write():
        raise OSError(code, text, "/models/run/discriminator.weights.h5")

    def tensorflow_write():
        raise getattr(tf.errors, error)(None, None, "{{function_node __wrapped__SaveV2}} "
                                                    "Failed to write /models/run/ckpt-4.data: "
                                                    f"{text}\n\tsome context")

    for main, where in ((python_write, "/models/run/discriminator.weights.h5: "),
                        (tensorflow_write, "Failed to write /models/run/ckpt-4.data: ")):
        with pytest.raises(SystemExit) as raised:
            cli.run_cli(main)
        assert raised.value.code == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: {where}{text} (every file is written under a "
                              "temporary name first, so those written before are whole; free "
                              "space, lift the file size limit or fix the folder, then rerun: "
                              "a training run resumes from its last checkpoint)")
        assert len(err.splitlines()) == 1
    # a command that trains nothing (build_pretraining_data, pack, convert) has no
    # checkpoint to resume from: the clause is left out
    monkeypatch.setattr(cli, "_command", "electra_tf.build_pretraining_data")
    with pytest.raises(SystemExit):
        cli.run_cli(python_write)
    assert capsys.readouterr().err.rstrip().endswith("fix the folder, then rerun)")
    monkeypatch.setattr(cli, "_command", "electra_tf.run_finetuning")
    with pytest.raises(SystemExit):
        cli.run_cli(python_write)
    assert capsys.readouterr().err.rstrip().endswith("resumes from its last checkpoint)")

    def device_write():  # score --output=/dev/full: written into, no temporary name
        raise OSError(code, text, "/dev/full")

    with pytest.raises(SystemExit):
        cli.run_cli(device_write)
    assert capsys.readouterr().err == (
        f"error: /dev/full: {text} (it is written into as the output comes, not replaced "
        "whole: what reached it before the error stands; free space, lift the file size "
        "limit or fix the folder, then rerun)\n")

    def event_file_write():  # TensorBoard's: appended to, not renamed into place
        raise getattr(tf.errors, error)(None, None, "Failed to flush 1 events to "
                                                    "/models/run/train/events.out.tfevents.1.h: "
                                                    f"{text}")

    with pytest.raises(SystemExit):
        cli.run_cli(event_file_write)
    assert capsys.readouterr().err.startswith(
        f"error: Failed to flush 1 events to /models/run/train/events.out.tfevents.1.h: {text} "
        "(TensorBoard's event files are appended to as the run goes: one cut short keeps its "
        "points up to the cut; every other file is written under a temporary name first")

    def h5py_write():  # h5py's messages hold line breaks
        raise OSError(code, f"Unable to create file (time = Tue Dec  1\n, {text})", "/m/w.h5")

    with pytest.raises(SystemExit):
        cli.run_cli(h5py_write)
    err = capsys.readouterr().err
    assert err.startswith(f"error: /m/w.h5: Unable to create file (time = Tue Dec 1 , {text})")
    assert len(err.splitlines()) == 1

    def bug():
        raise OSError(2, "No such file or directory", "x")  # not the file system refusing

    with pytest.raises(FileNotFoundError):
        cli.run_cli(bug)

    def out_of_memory():  # the other cause of a ResourceExhaustedError keeps its traceback
        raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")

    with pytest.raises(tf.errors.ResourceExhaustedError):
        cli.run_cli(out_of_memory)

    def end_of_data():  # the other cause of an OutOfRangeError too
        raise tf.errors.OutOfRangeError(None, None, "End of sequence")

    with pytest.raises(tf.errors.OutOfRangeError):
        cli.run_cli(end_of_data)


def test_a_write_refused_when_its_file_closes_names_the_file(tmp_path):
    """A full disk often refuses a write only when the file is closed, with an OSError
    that names no file: the error names the file being written, and nothing is left."""
    import errno

    from electra_tf.core.fileio import atomic_write

    def write(tmp):
        open(tmp, "w").close()
        raise OSError(errno.ENOSPC, "No space left on device")

    path = tmp_path / "predictions.tsv"
    with pytest.raises(OSError) as raised:
        atomic_write(str(path), write)
    assert raised.value.filename == str(path)
    assert os.listdir(tmp_path) == []


def test_a_model_dir_that_is_a_file_is_refused_before_anything_is_built(
        tiny_records, tmp_path, models_built):
    from electra_tf.core.fileio import check_output_folder

    afile = tmp_path / "afile"
    afile.write_text("x")
    for model_dir in (afile, afile / "run"):
        with pytest.raises(InputError, match=rf"^--model_dir {model_dir}: {afile} is a file, "
                                             r"not a folder$"):
            pretraining(tiny_records, model_dir)
    assert not models_built
    check_output_folder(str(tmp_path / "new" / "run"))  # a folder yet to make: fine
    with pytest.raises(InputError, match="is a file, not a folder"):
        check_output_folder(str(afile / "x"), "--model_base/--model_name")


# === Damaged checkpoints: one line naming the file ===
@pytest.mark.parametrize("damage", ["truncated", pytest.param("flipped",
                                                             marks=pytest.mark.slow)])
def test_a_damaged_tf_checkpoint_is_one_line(damage, trained_run, tiny_records, tmp_path):
    import glob

    model_dir = tmp_path / "model"
    shutil.copytree(trained_run["model_dir"], model_dir)
    data = sorted(glob.glob(str(model_dir / "checkpoints" / "ckpt-6.data-*")))[0]
    raw = bytearray(open(data, "rb").read())
    if damage == "truncated":
        raw = raw[:len(raw) // 2]
    else:
        for i in range(0, len(raw), 61):
            raw[i] ^= 0x5A
    open(data, "wb").write(bytes(raw))
    with pytest.raises(InputError, match=rf"^cannot resume from {model_dir}/checkpoints/"
                                         r"ckpt-6: unreadable checkpoint \(.*\); remove it to "
                                         r"resume from the one before \(ckpt-\d+\)$"):
        pretraining(tiny_records, model_dir, num_train_steps=8).train()


@pytest.mark.parametrize("damage", ["truncated", "flipped", "empty"])
def test_a_damaged_npz_checkpoint_is_one_line(damage, tmp_path):
    """The JAX backend's checkpoints: BadZipFile, EOFError and zlib errors were tracebacks."""
    import keras
    import numpy as np

    from electra_tf.training.checkpoints import NpzCheckpoints, read_model_arrays

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(64)])
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    folder = tmp_path / "checkpoints"

    def damaged_save():
        path = NpzCheckpoints(model, optimizer, str(folder), 3).save()
        raw = bytearray(open(path, "rb").read())
        if damage == "truncated":
            raw = raw[:len(raw) * 2 // 3]
        elif damage == "flipped":
            for i in range(len(raw) // 3, len(raw) * 2 // 3, 7):
                raw[i] ^= 0x5A
        else:
            raw = bytearray()
        open(path, "wb").write(bytes(raw))
        return path

    first = damaged_save()
    # the only save: nothing before it to resume from (it had said to remove it "to resume
    # from the one before", and the run then started again from step 0)
    with pytest.raises(InputError, match=rf"^cannot resume from {first}: unreadable checkpoint "
                                         r"\(\w+: .*\); there is no earlier save: without it "
                                         r"the run starts again from step 0$"):
        NpzCheckpoints(model, optimizer, str(folder), 3).restore()
    optimizer.iterations.assign(3)
    path = damaged_save()
    with pytest.raises(InputError, match=rf"^cannot resume from {path}: unreadable checkpoint "
                                         r"\(\w+: .*\); remove it to resume from the one before "
                                         r"\(jax-ckpt-0.npz\)$"):
        NpzCheckpoints(model, optimizer, str(folder), 3).restore()
    with pytest.raises(InputError, match=rf"^{path}: unreadable checkpoint"):
        read_model_arrays(path, model)
    assert np.isfinite(np.asarray(model.weights[0])).all()


# === The file system refusing writes: a full disk, a read-only folder (needs root;
# conftest's small_mount) ===
@pytest.mark.slow
def test_a_full_disk_or_a_read_only_model_dir_is_one_line(small_mount, tiny_records,
                                                          trained_run, tmp_path):
    # A disk that fills at the first checkpoint: one line, status 1, the config written
    # before it whole.
    full = small_mount("48k")
    proc = run_module("electra_tf.run_pretraining", *pretrain_flags(
        tiny_records, full / "model", num_train_steps=6, iterations_per_loop=3))
    line = error_line(proc, "No space left on device", "so those written before are whole",
                      returncode=1)
    assert line.startswith("error: "), line
    json.loads((full / "model" / "pretraining_config.json").read_text())
    # A read-only folder, fresh or holding a run to resume: refused before anything is built.
    read_only = small_mount("4m", read_only=True, fill_from=trained_run["model_dir"])
    for model_dir in (read_only / "fresh", read_only / "model"):
        proc = run_module("electra_tf.run_pretraining", *pretrain_flags(tiny_records,
                                                                        model_dir))
        error_line(proc, f"--model_dir {model_dir}: cannot write in ", "Read-only file system")
        assert "params" not in proc.stderr


def test_a_read_only_checkpoints_folder_is_refused_before_training(small_mount, tmp_path):
    """A model_dir whose checkpoints/ (or summaries' folder) is read-only had trained a
    whole save period before its first save failed; run_pretraining and run_finetuning
    check the subfolders they write that exist."""
    from electra_tf.core.fileio import check_output_folder

    read_only = small_mount("64k", read_only=True)  # tmp_path/mnt0
    inside = ("checkpoints", "train", "eval", read_only.name)
    with pytest.raises(InputError, match=rf"^--model_dir {tmp_path}: cannot write in "
                                         rf"{read_only} \(Read-only file system\)"):
        check_output_folder(str(tmp_path), "--model_dir", inside=inside)
    check_output_folder(str(tmp_path), "--model_dir", inside=inside[:3])  # others: fine
    check_output_folder(str(tmp_path / "new"), "--model_dir", inside=inside)


def test_a_file_or_broken_link_where_a_run_writes_a_folder_is_refused(tmp_path):
    """A file named train (or a link to nothing named eval) in the model_dir had been a
    TensorFlow traceback at the first summary, after the run's record was written."""
    from electra_tf.core.fileio import check_output_folder

    (tmp_path / "train").write_text("x")
    os.symlink(tmp_path / "nowhere", tmp_path / "eval")
    for name in ("train", "eval"):
        with pytest.raises(InputError, match=rf"^--model_dir {tmp_path}: {tmp_path / name} is "
                                             rf"not a folder \(a file, or a link to nothing\), "
                                             rf"where the run writes its {name}/; move it away"):
            check_output_folder(str(tmp_path), "--model_dir", inside=(name,))
    check_output_folder(str(tmp_path), "--model_dir", inside=("checkpoints",))
    os.symlink(tmp_path / "gone", tmp_path / "model")  # the model_dir itself (a traceback)
    with pytest.raises(InputError, match=rf"^--model_dir {tmp_path / 'model'} is a link to "
                                         rf"nothing \({tmp_path / 'gone'}\)"):
        check_output_folder(str(tmp_path / "model"), "--model_dir")


def test_the_train_data_note_compares_the_files_a_pattern_names(tmp_path, monkeypatch):
    """~ is expanded as the run expands it (a false note had named the same files); an
    absolute pattern that matches nothing now is compared as written (its files moved or
    removed: the note had stayed silent); only a relative one is left uncompared."""
    from electra_tf.training.pretraining import _data_files

    (tmp_path / "recs").mkdir()
    for i in range(2):
        (tmp_path / "recs" / f"shard-{i}").write_bytes(b"")
    monkeypatch.setenv("HOME", str(tmp_path))
    files = {str((tmp_path / "recs" / f"shard-{i}").resolve()) for i in range(2)}
    assert _data_files("~/recs/shard-*") == _data_files(f"{tmp_path}/recs/shard-*") == files
    assert _data_files(f"{tmp_path}/gone/shard-*,~/recs/shard-0") == {
        f"{tmp_path}/gone/shard-*", str((tmp_path / "recs" / "shard-0").resolve())}
    monkeypatch.chdir(tmp_path)
    assert _data_files("recs/shard-1, recs/shard-0") == files
    assert _data_files("elsewhere/shard-*") is None


def test_records_built_with_another_vocabulary_are_refused(make_configs, tiny_records,
                                                          tiny_corpus, tmp_path):
    """Records of another vocabulary of the same size (or a smaller one) passed every
    check, their ids all in range, and trained the model on tokens its vocabulary does
    not name (phase 2's records, a resume's, alike): the build records the vocabulary's
    sha256, which the run's must be."""
    import dataclasses

    from electra_tf.core.errors import ConfigError
    from electra_tf.text.vocab import load_vocab
    from electra_tf.training.preflight import preflight

    tokens = load_vocab(tiny_records["vocab"])
    other = tmp_path / "other_vocab.txt"  # the same size and specials, two words swapped
    other.write_text("\n".join(tokens[:-2] + [tokens[-1], tokens[-2]]) + "\n",
                     encoding="utf-8")
    config, run = make_configs(tmp_path / "m", run_overrides={"vocab_file": str(other)})
    with pytest.raises(ConfigError, match=r"^--train_data: its records were built with another "
                                          r"vocabulary \(.*pretrain_data_stats.json: "
                                          rf"--vocab_file={re.escape(tiny_records['vocab'])}, "
                                          r"sha256 \w{12}\) than --vocab_file=.*other_vocab.txt"):
        preflight(config, run)
    # Phase 2's records, built with the other vocabulary, beside phase 1's own.
    from electra_tf.data.builder import BuildOptions, build_pretraining_data

    build_pretraining_data(BuildOptions(files=(tiny_corpus,), vocab_file=str(other),
                                        output_dir=str(tmp_path / "p2"),
                                        max_seq_length=config.max_seq_length, num_shards=1))
    config, run = make_configs(tmp_path / "m", num_train_steps=10, phase2_steps=4,
                               phase2_max_seq_length=config.max_seq_length)
    preflight(config, dataclasses.replace(run, phase2_train_data=tiny_records["train"]))
    with pytest.raises(ConfigError, match=r"^--phase2_train_data: its records were built "):
        preflight(config, dataclasses.replace(run, phase2_train_data=f"{tmp_path}/p2/pretrain_data.tfrecord-*"))


def test_records_built_with_the_other_casing_are_refused(make_configs, tmp_path):
    """pretrain_data_stats.json beside the records says how they were tokenized: a run
    of the other --do_lower_case is refused in one line; records without it are not
    checked, and a damaged one is named (it had been taken for none, silently)."""
    import dataclasses
    import json

    from electra_tf.core.errors import ConfigError
    from electra_tf.data.builder import STATS_FILE
    from electra_tf.training.preflight import check_data_casing

    config, _ = make_configs(tmp_path / "m")
    records = tmp_path / "rec[v2]"  # glob characters in the folder's name: still checked
    records.mkdir()
    paths = [str(records / "pretrain_data.tfrecord-0-of-1")]
    check_data_casing(config, paths)  # no stats file: nothing recorded to check against
    from electra_tf.core.errors import InputError

    for text, what in (("{not json", ":1:2: malformed JSON: "), ("[1]", ": not a JSON object"),
                       ("\udcff", ": not UTF-8 JSON")):
        (records / STATS_FILE).write_bytes(text.encode("utf-8", "surrogateescape"))
        with pytest.raises(InputError) as raised:
            check_data_casing(config, paths)
        assert str(raised.value).startswith(f"{records / STATS_FILE}{what}"), raised.value
        assert str(raised.value).endswith(
            "; it records how the records beside it were built (build_pretraining_data "
            "writes it): rebuild them, or remove it to go on without its checks")
    (records / STATS_FILE).write_text(json.dumps({"do_lower_case": False}))
    with pytest.raises(ConfigError) as raised:
        check_data_casing(config, paths, what="--eval_data")
    assert str(raised.value) == (
        f"--do_lower_case=true: the records of --eval_data were built with "
        f"--do_lower_case=false ({records / STATS_FILE}); pre-train with "
        "--do_lower_case=false, which the model folder records for fine-tuning and the "
        "export, or rebuild the records with --do_lower_case=true (a model whose folder "
        "records its casing continues with that one)")  # (a converted cased model's resume
    # had been sent to --do_lower_case=true by this line and back by check_resume's)
    check_data_casing(dataclasses.replace(config, do_lower_case=False), paths)
    # Accents kept while lower-casing: no later tokenizer of the model would.
    (records / STATS_FILE).write_text(json.dumps({"do_lower_case": True,
                                                  "strip_accents": False}))
    with pytest.raises(ConfigError) as raised:
        check_data_casing(config, paths)
    assert str(raised.value) == (
        f"the records of --train_data were built with --strip_accents=false and "
        f"--do_lower_case=true ({records / STATS_FILE}); a model strips accents exactly when "
        "it lower-cases (BERT's rule, which fine-tuning, the export and convert follow): "
        "rebuild them with --strip_accents=auto")
    for strip in (None, True):
        (records / STATS_FILE).write_text(json.dumps({"do_lower_case": True,
                                                      "strip_accents": strip}))
        check_data_casing(config, paths)


def test_preflight_checks_the_records_casing_but_those_a_resumed_run_started_on(
        tiny_records, make_configs, tmp_path):
    """Through preflight: cased records refuse a fresh lower-casing run (the default)
    before anything is written, and pass with --do_lower_case=false; a resumed run is
    held to its recorded casing by check_resume, so that a run started before the
    records' casing was checked can still continue on its records; on other records (a
    converted model continued, a run continued on a new corpus: they had trained on the
    other casing without a word) the records are checked."""
    import dataclasses
    import glob
    import json

    from electra_tf import folders
    from electra_tf.core.errors import ConfigError
    from electra_tf.data.builder import STATS_FILE
    from electra_tf.training.preflight import preflight

    records = tmp_path / "cased"
    records.mkdir()
    source = os.path.dirname(tiny_records["train"])
    for path in glob.glob(os.path.join(source, "*")):
        shutil.copy(path, records)
    stats = json.loads((records / STATS_FILE).read_text())
    assert stats["do_lower_case"] is True  # what the fixture built
    (records / STATS_FILE).write_text(json.dumps({**stats, "do_lower_case": False}))
    config, run = make_configs(tmp_path / "m", run_overrides={
        "train_data": str(records / os.path.basename(tiny_records["train"])),
        "eval_data": str(records / os.path.basename(tiny_records["eval"]))})
    with pytest.raises(ConfigError, match=r"^--do_lower_case=true: the records of "
                                          r"--train_data were built with --do_lower_case=false"):
        preflight(config, run, tensorflow_io=False)
    assert not (tmp_path / "m").exists()
    preflight(dataclasses.replace(config, do_lower_case=False), run, tensorflow_io=False)
    os.makedirs(tmp_path / "m" / "checkpoints")
    (tmp_path / "m" / "checkpoints" / "ckpt-1.index").write_text("fake")
    folders.pretraining.write_pretraining_config(run.model_dir, config, run)
    preflight(config, run, tensorflow_io=False)  # resumed: its recorded casing holds
    other = tmp_path / "cased_copy"
    shutil.copytree(records, other)
    moved = dataclasses.replace(run, train_data=str(other / os.path.basename(run.train_data)))
    with pytest.raises(ConfigError, match=r"^--do_lower_case=true: the records of "
                                          r"--train_data were built with --do_lower_case=false"):
        preflight(config, moved, tensorflow_io=False)
    # a converted model's record names no data: every data flag is new to it
    folders.pretraining.write_pretraining_config(
        run.model_dir, config, {**dataclasses.asdict(run), "train_data": "", "eval_data": ""})
    with pytest.raises(ConfigError, match=r"the records of --train_data were built with"):
        preflight(config, run, tensorflow_io=False)


def test_a_finished_run_run_again_writes_its_weights_and_trains_no_step(trained_run, tmp_path):
    """Killed after its last checkpoint, before its final weights were written, a run
    run again had ended in StopIteration for good: it now evaluates and writes them
    without a step. A --num_train_steps below the checkpoint's step is one line."""
    import dataclasses

    import numpy as np

    from electra_tf.folders.pretraining import DISCRIMINATOR_WEIGHTS
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining

    model_dir = tmp_path / "model"
    shutil.copytree(trained_run["model_dir"], model_dir)
    os.remove(model_dir / DISCRIMINATOR_WEIGHTS)
    config = trained_run["config"]
    run = dataclasses.replace(trained_run["run"], model_dir=str(model_dir))
    again = TensorFlowPretraining(config, run)
    final = again.train()
    assert again.step == config.num_train_steps and (model_dir / DISCRIMINATOR_WEIGHTS).exists()
    assert final == pytest.approx(trained_run["final"])
    for a, b in zip(again.model.trainable_variables, trained_run["weights"], strict=True):
        np.testing.assert_array_equal(a.numpy(), b, err_msg=a.path)
    fewer = dataclasses.replace(config, num_train_steps=config.num_train_steps - 1)
    with pytest.raises(ConfigError, match=rf"--num_train_steps={config.num_train_steps - 1}: "
                                          rf".* holds a checkpoint at step "
                                          rf"{config.num_train_steps}, past it"):
        TensorFlowPretraining(fewer, run).train()


def test_the_changed_settings_note_names_an_unset_default_by_its_value():
    """--adam_bias_correction unset resolves by size (on for tiny): the note had said
    "--adam_bias_correction=True (it was None)", and named a change to the same value."""
    from electra_tf.core.config import PretrainingConfig
    from electra_tf.training.preflight import changed_settings

    before = PretrainingConfig(model_size="tiny")
    assert changed_settings(before, PretrainingConfig(model_size="tiny",
                                                      adam_bias_correction=True)) == []
    assert changed_settings(before, PretrainingConfig(model_size="tiny",
                                                      adam_bias_correction=False)) == [
        "--adam_bias_correction=False (it was True)"]
    # --lr_decay_power unset is 0.5 with LAMB: a LAMB run recorded at 1.0 (its default
    # before) continued without the flag changes its schedule, and is told so
    lamb = dict(model_size="tiny", optimizer="lamb")
    assert changed_settings(PretrainingConfig(**lamb, lr_decay_power=0.5),
                            PretrainingConfig(**lamb)) == []
    assert changed_settings(PretrainingConfig(**lamb, lr_decay_power=1.0),
                            PretrainingConfig(**lamb)) == ["--lr_decay_power=0.5 (it was 1.0)"]


def test_the_changed_settings_note_names_a_size_preset_the_overrides_make_moot():
    """A converted custom-size model's overrides fix every shape, so another
    --model_size passes check_resume; it had gone unsaid, and the record then named it."""
    from electra_tf.core.config import PretrainingConfig
    from electra_tf.training.preflight import changed_settings

    sizes = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 1,
             "intermediate_size": 64, "embedding_size": 16}
    before = PretrainingConfig(model_size="small", model_hparam_overrides=sizes)
    after = PretrainingConfig(model_size="base", model_hparam_overrides=sizes)
    assert before.discriminator_config() == after.discriminator_config()
    assert "--model_size=base (it was small)" in changed_settings(before, after)


def test_the_changed_settings_note_names_phase_2s_batch_size():
    """Phase 2's batch size changed mid-phase-2 got no note (the phase-1 one, which no
    longer mattered, did); phase 2's schedule flags stay quiet, as phase 1's do."""
    from electra_tf.core.config import PretrainingConfig
    from electra_tf.training.preflight import changed_settings

    phases = dict(model_size="tiny", num_train_steps=10, phase2_steps=4,
                  phase2_max_seq_length=32)
    before = PretrainingConfig(phase2_train_batch_size=4, **phases)
    assert changed_settings(before, PretrainingConfig(phase2_train_batch_size=2, **phases)) \
        == ["--phase2_train_batch_size=2 (it was 4)"]
    assert changed_settings(before, PretrainingConfig(
        phase2_train_batch_size=4, phase2_learning_rate=1e-3, phase2_warmup_steps=2,
        **phases)) == []


def test_the_changed_settings_note_names_the_sequence_lengths_once_they_trained():
    """A resume at another --max_seq_length (or phase 2's) changes what is trained and
    had no note; phase 2 added to a run that had not reached it (the documented way to
    add it) had one, "--phase2_train_batch_size=4 (it was 0)", though it continues that
    run exactly."""
    from electra_tf.core.config import PretrainingConfig
    from electra_tf.training.preflight import changed_settings

    phases = dict(model_size="tiny", num_train_steps=10, phase2_steps=4,
                  phase2_train_batch_size=4)
    before = PretrainingConfig(phase2_max_seq_length=32, **phases)
    shorter = PretrainingConfig(phase2_max_seq_length=16, **phases)
    assert changed_settings(before, shorter, step=8) == [
        "--phase2_max_seq_length=16 (it was 32)"]
    assert changed_settings(before, shorter, step=6) == []  # phase 2 starts at step 6
    assert changed_settings(PretrainingConfig(model_size="tiny", max_seq_length=64),
                            PretrainingConfig(model_size="tiny", max_seq_length=32),
                            step=3) == ["--max_seq_length=32 (it was 64)"]
    phase1_only = PretrainingConfig(model_size="tiny", num_train_steps=6)
    assert changed_settings(phase1_only, before, step=6) == []
