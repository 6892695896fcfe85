"""run_finetuning on bad input and Ctrl-C: one line, a non-zero exit, nothing trained on bad data.

The bad-input cases run in this process and check the error the library raises;
the command line's one `error:` line is test_finetuning_end_to_end.py's
test_cli_combined_null_rule_with_the_joint_head_is_one_line.
"""

import json
import os
import re
import shutil
import signal
import time

import pytest
from helpers import finetune, interrupt_after, poison_third_update

from electra_tf.core.errors import ConfigError, Diverged, InputError, TaskDataError
from electra_tf.training.loop import Interrupted


@pytest.mark.parametrize("damage", ["truncated", "not_hdf5"])
def test_a_corrupt_init_checkpoint_is_one_error_naming_the_file(damage, pretrained_dir,
                                                                toy_sst2_dir, tmp_path):
    folder = tmp_path / "pretrained"
    shutil.copytree(pretrained_dir, folder)
    weights = folder / "discriminator.weights.h5"
    raw = weights.read_bytes()
    weights.write_bytes(raw[:len(raw) // 2] if damage == "truncated" else b"\x00" * 4096)
    with pytest.raises(InputError) as raised:
        finetune("--task_name=sst2", f"--init_checkpoint={folder}",
                 f"--data_dir={toy_sst2_dir}", f"--model_dir={tmp_path}/out",
                 "--max_seq_length=16")
    assert str(raised.value).startswith(f"{weights}: not a readable weights file"), raised.value
    assert not (tmp_path / "out").exists()


def test_a_run_that_would_replace_a_model_or_evaluate_an_untrained_head_is_refused(
        pretrained_dir, toy_sst2_dir, tmp_path):
    """A --model_dir holding a fine-tuned model but no checkpoints (a converted task model,
    or checkpoints removed): a new run rewrote its record at once, beside the old weights,
    and a crash then left them paired (an export served the labels swapped). And
    --do_train=false from a pre-training model scored (and saved) a random head. Both are
    refused before anything is written."""
    args = ["--task_name=sst2", f"--data_dir={toy_sst2_dir}", "--max_seq_length=16"]
    done = tmp_path / "done"
    done.mkdir()
    (done / "finetuned.weights.h5").write_bytes(b"a model")
    for extra in ([], ["--do_train=false"]):
        with pytest.raises(InputError) as raised:
            finetune(*args, *extra, f"--init_checkpoint={pretrained_dir}", f"--model_dir={done}")
        assert str(raised.value) == (
            f"--model_dir {done} holds a fine-tuned model (finetuned.weights.h5) and no "
            "checkpoints to resume: this run would replace it; give a new --model_dir (with "
            f"--init_checkpoint={done} to start from, or evaluate, that model)")
    assert os.listdir(done) == ["finetuned.weights.h5"]
    with pytest.raises(InputError, match=re.escape(
            f"--do_train=false evaluates a fine-tuned model, but --init_checkpoint "
            f"{pretrained_dir} holds no task head (a pre-training model: the head would be "
            f"random) and --model_dir {tmp_path / 'eval'} no checkpoints;")):
        finetune(*args, "--do_train=false", f"--init_checkpoint={pretrained_dir}",
                 f"--model_dir={tmp_path / 'eval'}")
    with pytest.raises(InputError, match="--from_scratch would evaluate random weights"):
        finetune(*args, "--do_train=false", "--from_scratch", "--model_size=small",
                 f"--vocab_file={pretrained_dir}/vocab.txt", f"--model_dir={tmp_path / 'eval'}")
    assert not (tmp_path / "eval").exists()


def test_a_malformed_dev_split_stops_the_run_before_training(toy_sst2_dir, pretrained_dir,
                                                            tmp_path, capsys):
    data = tmp_path / "SST-2"
    shutil.copytree(toy_sst2_dir, data)
    rows = (data / "dev.tsv").read_text().splitlines()
    rows[5] = rows[5].split("\t")[0] + "\tmaybe"  # an unknown label on line 6
    (data / "dev.tsv").write_text("\n".join(rows) + "\n")
    with pytest.raises(TaskDataError, match=f"{data / 'dev.tsv'}:6"):
        finetune("--task_name=sst2", f"--init_checkpoint={pretrained_dir}",
                 f"--data_dir={data}", f"--model_dir={tmp_path}/out", "--max_seq_length=16",
                 "--num_train_epochs=1")
    assert " step " not in capsys.readouterr().err  # not one training step
    assert not (tmp_path / "out").exists()


# Through the command: SIGTERM by default; Ctrl-C's run is slow (the gate takes SIGINT
# as SIGTERM, tests/training/test_training_interrupts.py, and two Ctrl-C at an epoch's
# end: test_two_ctrl_c_at_an_epochs_end_keep_its_evaluation).
@pytest.mark.parametrize("sig", [pytest.param(signal.SIGINT, marks=pytest.mark.slow),
                                 signal.SIGTERM], ids=["ctrl_c", "sigterm"])
def test_an_interrupt_saves_and_exits_with_one_line(pretrained_dir, toy_sst2_dir, tmp_path, sig):
    """Ctrl-C exits 130; SIGTERM, what Kubernetes and Slurm send before a kill, is a
    Ctrl-C too (exit 128 + 15)."""
    out = tmp_path / "out"
    interrupt_after("electra_tf.run_finetuning", [
        "--task_name=sst2", f"--init_checkpoint={pretrained_dir}", f"--data_dir={toy_sst2_dir}",
        f"--model_dir={out}", "--max_seq_length=16", "--num_train_epochs=1000",
        "--train_batch_size=16", "--save_checkpoints_steps=2", "--do_eval=false"],
        r"epoch 1 step 4/", out, sig=sig)


@pytest.mark.slow  # a stopped run, an in-place evaluation, refusals and a resume (13 s)
def test_two_ctrl_c_at_an_epochs_end_keep_its_evaluation_and_a_resume_keeps_its_settings(
        pretrained_dir, toy_sst2_dir, tmp_path, sigint_handler, capsys, monkeypatch):
    """Epoch 1 ends, its dev evaluation starts, and two Ctrl-C come: the second stops the
    run at once, inside the evaluation (a checkpoint at the epoch's end, no epoch_1 in
    results.json). The resumed run evaluates epoch 1 before it trains on, so its
    results.json is the uninterrupted run's (it used to lack epoch_1 for good).

    Before that resume, the stopped folder is evaluated in place (--do_train=false); a
    resume with another learning rate or batch is refused in one line, before anything
    is written (it would have continued another schedule, or reported the results of
    the model trained before), as is one whose schedule has another length; the resume
    with the recorded settings trains on (another --mixed_precision than the record's
    gets a note), and the in-place evaluation of the epoch-1 model no longer stands as the
    final result."""
    from helpers import finetuning_from_flags

    from electra_tf import folders
    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning
    from electra_tf.training.finetuning import Finetuning
    from electra_tf.training.loop import Interrupted

    args = ["--task_name=sst2", f"--init_checkpoint={pretrained_dir}",
            f"--data_dir={toy_sst2_dir}", "--max_seq_length=16", "--num_train_epochs=2",
            "--train_batch_size=32", "--eval_batch_size=64"]  # 10 steps an epoch
    finetune(*args, f"--model_dir={tmp_path}/whole")
    out = tmp_path / "out"
    trainer = TensorFlowFinetuning(*finetuning_from_flags(*args, f"--model_dir={out}"))
    evaluate = trainer.evaluate

    def ctrl_c_twice_then_evaluate(split, write_to=None):
        for _ in range(2):  # the gate holds the first; the second raises in the sleep
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        return evaluate(split, write_to)

    trainer.evaluate = ctrl_c_twice_then_evaluate
    with pytest.raises(Interrupted) as raised:
        trainer.train()
    assert raised.value.step == 10
    assert "epoch_1" not in folders.finetuned.read_results(str(out))

    args.append(f"--model_dir={out}")
    finetune(*args, "--do_train=false")  # evaluated in place, at step 10
    assert "eval" in folders.finetuned.read_results(str(out))
    before = sorted(os.listdir(out))
    for flag, message in (("--learning_rate=5e-3", "--learning_rate=0.005 (trained with 0.0001)"),
                          ("--train_batch_size=16", "--train_batch_size=16 (trained with 32)")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            finetune(*args, flag)
    assert sorted(os.listdir(out)) == before
    # a schedule of another length (another train split, or an earlier electra_tf that
    # left out each epoch's last partial batch) is refused in one line too
    record_path = out / "finetuning_config.json"
    record = record_path.read_text()
    assert '"total_steps": 20' in record  # 320 windows: 10 steps of 32 an epoch
    record_path.write_text(record.replace('"total_steps": 20', '"total_steps": 18'))
    with pytest.raises(ConfigError, match=re.escape(
            "holds checkpoints of a run of 18 steps; this one would run 20 (320 train "
            "windows, 10 steps an epoch)")):
        finetune(*args)
    assert sorted(os.listdir(out)) == before
    # as if trained at bf16: the resume (fp32) says so in a note, and trains on
    assert '"mixed_precision": "fp32"' in record
    assert '"strategy": "default"' in record and '"num_devices": 0' in record
    assert '"jit_compile": false' in record
    record_path.write_text(record.replace('"mixed_precision": "fp32"', '"mixed_precision": "bf16"')
                           .replace('"strategy": "default"', '"strategy": "mirrored"')
                           .replace('"num_devices": 0', '"num_devices": 2')
                           .replace('"jit_compile": false', '"jit_compile": true'))
    capsys.readouterr()
    # a flag set to the value its default stands for is the same setting; another
    # --init_checkpoint (here the same folder by a link) is not what the resumed weights
    # come from: a note, and the record keeps the start (it had recorded the link)
    link = tmp_path / "pretrained_link"
    link.symlink_to(pretrained_dir)
    # and a SIGTERM as its final weights are written: the run is whole, and ends as finished
    # (it had ended "interrupted at step N; ... rerun to resume", status 143)
    from electra_tf.training import finetuning

    real_save = finetuning.save_finetuned

    def save_then_sigterm(*a):
        real_save(*a)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)

    monkeypatch.setattr(finetuning, "save_finetuned", save_then_sigterm)
    _, results = finetune(*args, "--learning_rate=1e-4", "--layerwise_lr_decay=0.8",
                          f"--init_checkpoint={link}")
    monkeypatch.setattr(finetuning, "save_finetuned", real_save)
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == "[finetune] SIGTERM after the run finished: every file is written", err
    assert (f"[finetune] note: {out}'s checkpoints were trained with --mixed_precision=bf16; "
            "this run continues them with fp32 (finetuning_config.json now records it)"
            ) in err
    # (it had rewritten the record without a word)
    assert (f"[finetune] note: {out}'s checkpoints were trained with --jit_compile=true; this "
            "run continues them with --jit_compile=false (compiled steps draw other dropout "
            "masks; finetuning_config.json now records it)") in err
    assert (f"[finetune] note: {out}'s checkpoints were trained with --strategy=mirrored "
            "--num_devices=2; this run continues them with --strategy=default --num_devices=0 "
            "(the same global batches; finetuning_config.json now records it)") in err
    assert (f"[finetune] note: {out}'s checkpoints started from {pretrained_dir}; this run "
            f"resumes them, so --init_checkpoint={link} is not what its weights come from "
            f"(finetuning_config.json keeps {pretrained_dir})") in err
    recorded = json.loads(record_path.read_text())
    assert recorded["run"]["mixed_precision"] == "fp32"
    assert recorded["run"]["strategy"] == "default"
    assert recorded["run"]["init_checkpoint"] == recorded["initialized_from"] == pretrained_dir
    assert sorted(results) == ["epoch_1", "epoch_2"]
    assert folders.finetuned.read_results(str(out)) == results
    assert results == folders.finetuned.read_results(f"{tmp_path}/whole")
    assert Finetuning.final_results(results) == results["epoch_2"]


def test_a_signal_stops_an_evaluation_only_run_between_batches_and_saves_nothing(
        pretrained_dir, toy_sst2_dir, tiny_vocab, tmp_path, sigint_handler):
    """--do_train=false has nothing to save: one Ctrl-C or SIGTERM stops it at the next batch, and
    the folder gets no checkpoint (the first signal had let the whole evaluation and
    prediction run on, and a second had saved the loaded weights as ckpt-0, which a later
    run in that folder then resumed in place of its --init_checkpoint)."""
    from helpers import finetuning_from_flags

    from electra_tf import FinetunedFolder, folders
    from electra_tf.modeling import build_discriminator
    from electra_tf.tasks.model import FinetuningModel
    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    config = folders.files.read_encoder_config(
        os.path.join(pretrained_dir, folders.files.DISCRIMINATOR_CONFIG))
    classifier = FinetuningModel(build_discriminator(config).encoder,
                                 "sequence_classification", num_labels=2)
    classifier.build()
    tuned = str(tmp_path / "tuned")
    FinetunedFolder.save(tuned, classifier, tiny_vocab, "sst2", max_seq_length=16)
    out = tmp_path / "out"
    trainer = TensorFlowFinetuning(*finetuning_from_flags(
        "--task_name=sst2", f"--init_checkpoint={tuned}", f"--data_dir={toy_sst2_dir}",
        f"--model_dir={out}", "--max_seq_length=16", "--eval_batch_size=8",
        "--do_train=false"))
    real_batch, batches = trainer._predict_batch, []

    def ctrl_c_at_the_second_batch(chunk):
        batches.append(len(batches))
        if len(batches) == 2:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        return real_batch(chunk)

    trainer._predict_batch = ctrl_c_at_the_second_batch
    with pytest.raises(Interrupted) as raised:
        trainer.train()
    assert str(raised.value) == ("interrupted during an evaluation-only run "
                                 "(--do_train=false): nothing was saved; a rerun evaluates "
                                 "again")
    assert raised.value.signum == signal.SIGINT
    assert len(batches) == 2  # the dev split has more: stopped at the next batch
    assert not (out / "checkpoints").exists()


# === Refused before training: settings the checkpoint cannot take ===
def test_a_same_size_vocabulary_of_other_tokens_is_refused(pretrained_dir, toy_sst2_dir,
                                                          tiny_vocab, tmp_path):
    tokens = open(tiny_vocab, encoding="utf-8").read().splitlines()
    other = tmp_path / "other_vocab.txt"  # the same size; two word pieces swapped
    words = [i for i, t in enumerate(tokens) if t.isalpha() and len(t) > 3][:2]
    tokens[words[0]], tokens[words[1]] = tokens[words[1]], tokens[words[0]]
    other.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    args = ["--task_name=sst2", f"--init_checkpoint={pretrained_dir}", f"--data_dir={toy_sst2_dir}",
            f"--model_dir={tmp_path}/out", "--max_seq_length=16"]
    with pytest.raises(ConfigError) as raised:
        finetune(*args, f"--vocab_file={other}")
    message = str(raised.value)
    own = os.path.join(pretrained_dir, "vocab.txt")  # the folder's copy of tiny_vocab
    assert message.startswith(f"--vocab_file={other} holds other tokens than the vocabulary "
                              f"{pretrained_dir} was trained with ({own}"), message
    assert not (tmp_path / "out").exists()
    same = tmp_path / "same_vocab.txt"  # the same tokens under another name: accepted
    shutil.copy(tiny_vocab, same)
    from electra_tf.training.finetuning import check_pretraining_vocab

    check_pretraining_vocab(str(same), pretrained_dir)


def test_a_sequence_longer_than_the_checkpoint_positions_is_refused(pretrained_dir,
                                                                   toy_sst2_dir, tmp_path):
    with pytest.raises(ConfigError, match=r"^--max_seq_length=513 exceeds the checkpoint's 512 "
                                          r"positions \(max_position_embeddings\)"):
        finetune("--task_name=sst2", f"--init_checkpoint={pretrained_dir}",
                 f"--data_dir={toy_sst2_dir}", f"--model_dir={tmp_path}/out",
                 "--max_seq_length=513")
    assert not (tmp_path / "out").exists()


def test_a_model_of_one_segment_type_is_refused_for_text_pairs(tiny_vocab, tmp_path):
    """A model with type_vocab_size 1 (transformers allows it) fine-tuned on pairs had
    ended in a traceback of an id past the segment table (a GPU gathers zeros there)."""
    from electra_tf import PretrainingFolder
    from electra_tf.core.config import EncoderConfig
    from electra_tf.modeling.models import build_discriminator
    from electra_tf.tasks import glue
    from electra_tf.text.vocab import load_vocab

    config = EncoderConfig(vocab_size=len(load_vocab(tiny_vocab)), hidden_size=16,
                           num_hidden_layers=1, num_attention_heads=1, intermediate_size=32,
                           max_position_embeddings=32, type_vocab_size=1)
    folder = PretrainingFolder.save(str(tmp_path / "one"), build_discriminator(config),
                                    tiny_vocab).path
    (tmp_path / "MRPC").mkdir()
    with pytest.raises(ConfigError, match=re.escape(
            f"--init_checkpoint={folder}: mrpc's inputs hold segment id 1 (the second "
            "text), but the model has type_vocab_size 1 (one segment type)")):
        finetune("--task_name=mrpc", f"--init_checkpoint={folder}",
                 f"--data_dir={tmp_path / 'MRPC'}", f"--model_dir={tmp_path}/out",
                 "--max_seq_length=16")
    assert not (tmp_path / "out").exists()
    assert glue.get_task("sst2").segments_refusal(1) is None  # single texts: fine
    assert glue.get_task("mrpc").segments_refusal(2) is None


def test_a_run_of_more_than_2_62_steps_is_refused_before_it_writes(pretrained_dir,
                                                                  toy_sst2_dir, tmp_path):
    """--num_train_epochs=1e30 had started a run of 5e30 steps (its learning rate ~0 for
    the warm-up's 10%), where run_pretraining refuses num_train_steps past 2**62."""
    with pytest.raises(ConfigError, match=r"^--num_train_epochs=1e\+30: 10 steps/epoch x "
                                          r"1e\+30 epochs is past 2\*\*62 steps$"):
        finetune("--task_name=sst2", f"--init_checkpoint={pretrained_dir}",
                 f"--data_dir={toy_sst2_dir}", f"--model_dir={tmp_path}/out",
                 "--max_seq_length=16", "--num_train_epochs=1e30")
    assert not (tmp_path / "out").exists()


# === A loss that becomes non-finite stops the run, keeping the last good checkpoint ===
def test_a_non_finite_loss_stops_before_saving(pretrained_dir, toy_sst2_dir, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(Diverged) as raised:
        finetune("--task_name=sst2", f"--init_checkpoint={pretrained_dir}",
                 f"--data_dir={toy_sst2_dir}", f"--model_dir={out}", "--max_seq_length=16",
                 "--learning_rate=1e30", "--save_checkpoints_steps=1", "--train_batch_size=32")
    message = str(raised.value)
    bad = re.match(r"the training loss became (nan|inf) in step (\d+); stopped without saving "
                   r"those weights: the last checkpoint \(ckpt-(\d+)\) is kept, no final weights "
                   r"were written; lower --learning_rate \(it was 1\.0e\+30\)$", message)
    assert bad and int(bad.group(3)) == int(bad.group(2)) - 1, message
    saved = sorted(p.name for p in (out / "checkpoints").glob("ckpt-*.index"))
    assert saved[-1] == f"ckpt-{bad.group(3)}.index"  # the bad step was not saved
    assert not (out / "finetuned.weights.h5").exists()


def test_a_raised_loss_weight_is_named_beside_the_learning_rate(pretrained_dir,
                                                                toy_squad_dir, tmp_path):
    """--answerable_weight=1e38 overflows the loss: the line had blamed the learning
    rate alone."""
    with pytest.raises(Diverged, match=r"lower --learning_rate \(it was 3\.0e-03\), or "
                                       r"--answerable_weight \(it was 1e\+38; the default "
                                       r"0\.5\)$"):
        finetune("--task_name=squad_v2", f"--init_checkpoint={pretrained_dir}",
                 f"--data_dir={toy_squad_dir}", f"--model_dir={tmp_path}/out",
                 "--max_seq_length=24", "--learning_rate=3e-3", "--train_batch_size=16",
                 "--joint_prediction=false", "--answerable_weight=1e38")


def test_a_non_finite_gradient_in_a_chunks_last_step_is_not_saved(pretrained_dir, toy_sst2_dir,
                                                                   tmp_path, monkeypatch):
    """A step's loss is computed before its update: an infinite gradient in a chunk's last
    step (clipping then makes every gradient NaN) passed the loss check, and the
    checkpoint after it was saved with NaN weights (and the final weights after it)."""
    poison_third_update(monkeypatch)
    out = tmp_path / "out"
    with pytest.raises(Diverged, match=r"^the gradients' norm became (nan|inf) in step 3; "
                                       r"stopped without saving those weights: the last "
                                       r"checkpoint \(ckpt-2\) is kept"):
        finetune("--task_name=sst2", f"--init_checkpoint={pretrained_dir}",
                 f"--data_dir={toy_sst2_dir}", f"--model_dir={out}", "--max_seq_length=16",
                 "--save_checkpoints_steps=1", "--log_every_steps=1", "--do_eval=false")
    saved = sorted(p.name for p in (out / "checkpoints").glob("ckpt-*.index"))
    assert saved[-1] == "ckpt-2.index"
    assert not (out / "finetuned.weights.h5").exists()


def test_weights_a_diverging_step_left_non_finite_are_never_saved(pretrained_dir, toy_sst2_dir,
                                                                  tmp_path, monkeypatch):
    """A second Ctrl-C or SIGTERM during a diverging chunk stopped it before its check, and
    the interrupt's save wrote the NaN weights (a rerun then finished on them, status 0);
    an update that overflows from finite gradients (a learning rate beyond float32's
    range) passed every check and was saved too."""
    from electra_tf.training.backends import tensorflow as backend

    poison_third_update(monkeypatch)
    real_steps = backend.TensorFlowFinetuning.train_steps

    def stopped_inside(self, iterator, n):  # the stop a second signal makes mid-chunk
        loss = real_steps(self, iterator, n)
        if self.step == 3:
            raise KeyboardInterrupt
        return loss

    monkeypatch.setattr(backend.TensorFlowFinetuning, "train_steps", stopped_inside)
    args = ["--task_name=sst2", f"--init_checkpoint={pretrained_dir}",
            f"--data_dir={toy_sst2_dir}", "--max_seq_length=16", "--do_eval=false",
            "--save_checkpoints_steps=1", "--log_every_steps=1"]
    out = tmp_path / "out"
    with pytest.raises(Interrupted, match=r"^interrupted at step 3; no checkpoint was saved "
                                          r"\(the weights had become NaN or infinite: the run "
                                          r"was diverging\); a rerun starts from the latest"):
        finetune(*args, f"--model_dir={out}")
    assert sorted(p.name for p in (out / "checkpoints").glob("ckpt-*.index"))[-1] == \
        "ckpt-2.index"
    monkeypatch.undo()
    # an update beyond float32 from finite gradients: refused before its checkpoint
    with pytest.raises(Diverged, match=r"^the weights became NaN or infinite \(an update too "
                                       r"large\) in step 1; stopped without saving those "
                                       r"weights: no checkpoint was saved"):
        finetune(*args, f"--model_dir={tmp_path / 'overflow'}", "--learning_rate=1e39",
                 "--warmup_proportion=0")
    assert not list((tmp_path / "overflow" / "checkpoints").glob("ckpt-*.index"))


def test_a_model_dir_that_is_a_file_or_in_use_is_refused(pretrained_dir, toy_sst2_dir, tmp_path):
    from electra_tf.core.fileio import FolderLock

    afile = tmp_path / "afile"
    afile.write_text("x")
    args = ["--task_name=sst2", f"--init_checkpoint={pretrained_dir}",
            f"--data_dir={toy_sst2_dir}", "--max_seq_length=16"]
    with pytest.raises(InputError, match=rf"^--model_dir {afile}: {afile} is a file"):
        finetune(*args, f"--model_dir={afile}")
    out = tmp_path / "out"
    with FolderLock(str(out), "--model_dir"):
        with pytest.raises(InputError, match=rf"^--model_dir {out} is in use by host "):
            finetune(*args, f"--model_dir={out}")
        assert sorted(os.listdir(out)) == [".lock"]  # the refused run wrote nothing
    assert os.listdir(out) == []  # and the holder's lock file went with it


def test_a_damaged_record_beside_checkpoints_says_what_to_do(pretrained_dir, toy_sst2_dir,
                                                             tmp_path):
    """An emptied finetuning_config.json beside the checkpoints had been a bare
    `malformed JSON` line; removed, the run resumes its checkpoints and records anew."""
    out = tmp_path / "out"
    args = ["--task_name=sst2", f"--init_checkpoint={pretrained_dir}",
            f"--data_dir={toy_sst2_dir}", "--max_seq_length=16", "--num_train_epochs=1",
            "--train_batch_size=64", f"--model_dir={out}"]
    finetune(*args)
    record = out / "finetuning_config.json"
    record.write_bytes(b"")
    with pytest.raises(InputError, match=rf"^{record}:1:1: malformed JSON: .*; it records "
                                         rf"what {out}'s checkpoints were trained with: put "
                                         r"back a whole copy, or remove it"):
        finetune(*args)
    assert record.read_bytes() == b""
    record.unlink()
    finetune(*args)
    assert json.loads(record.read_text())["task"] == "sst2"


def test_a_pretraining_folder_as_model_dir_is_refused_before_anything(pretrained_dir,
                                                                      toy_sst2_dir):
    """--model_dir pointed at the pre-training folder (the --init_checkpoint's): refused by
    name, before a model is built or a file written in it. It used to build the model, then
    stop on its checkpoints as a model of other flags ('use the flags it was written
    with'), and on the JAX backend as checkpoints of the TensorFlow one."""
    from helpers import finetuning_from_flags

    from electra_tf.training.finetuning import Finetuning

    before = sorted(os.listdir(pretrained_dir))
    with pytest.raises(InputError, match=f"^--model_dir {pretrained_dir} is a pre-training "
                                         "folder .*give a new --model_dir"):
        Finetuning(*finetuning_from_flags(
            "--task_name=sst2", f"--init_checkpoint={pretrained_dir}",
            f"--data_dir={toy_sst2_dir}", f"--model_dir={pretrained_dir}"))
    assert sorted(os.listdir(pretrained_dir)) == before


def _refused_run(pretrained_dir, toy_sst2_dir, tmp_path, **env_overrides):
    """run_finetuning refused after TensorFlow started (a sequence longer than the
    checkpoint's positions), with TensorFlow's own log level unset: its stderr lines."""
    from helpers import REPO, run_python

    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env.update(PYTHONPATH=REPO, **env_overrides)
    proc = run_python(["-m", "electra_tf.run_finetuning", "--task_name=sst2",
                       f"--init_checkpoint={pretrained_dir}", f"--data_dir={toy_sst2_dir}",
                       f"--model_dir={tmp_path}/out", "--max_seq_length=1024"], env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert not (tmp_path / "out").exists()
    return proc.stderr.strip().splitlines()


def test_a_refused_run_prints_its_line_and_nothing_else(pretrained_dir, toy_sst2_dir, tmp_path):
    """One line on stderr, none of TensorFlow's start-up lines (cuInit, oneDNN) or
    warnings."""
    lines = _refused_run(pretrained_dir, toy_sst2_dir, tmp_path)
    assert len(lines) == 1 and lines[0].startswith("error: --max_seq_length=1024"), lines


@pytest.mark.slow  # a second process of the test above
def test_electra_tf_verbose_brings_tensorflows_logging_back(pretrained_dir, toy_sst2_dir,
                                                             tmp_path):
    lines = _refused_run(pretrained_dir, toy_sst2_dir, tmp_path, ELECTRA_TF_VERBOSE="1")
    assert len(lines) > 1 and lines[-1].startswith("error: --max_seq_length=1024"), lines


@pytest.mark.parametrize("flags, expected", [
    (("--task_name=bogus",), "error: unknown task_name 'bogus'; known: cola,"),
    # the original's name of a task (and GLUE's folder spelling): ours named
    (("--task_name=sst",), "error: unknown task_name 'sst': electra_tf calls that task sst2 "
                           "(--task_name=sst2)"),
    (("--task_name=STS-B",), "error: unknown task_name 'STS-B': electra_tf calls that task "
                             "stsb (--task_name=stsb)"),
    (("--task_name=sst,rte",), "error: --task_name=sst,rte: a run fine-tunes one task "),
    # the original's multi-task list: said to be one task a run, not an unknown name
    (("--task_name=mrpc,rte",), "error: --task_name=mrpc,rte: a run fine-tunes one task "
                                "(the original's multi-task fine-tuning, several tasks on one "
                                "encoder, is not implemented); run each task on its own"),
    (("--task_name=sst2", "--label_names=a,b"),
     "error: --label_names is for classification and tagging tasks; 'sst2' has its own"),
    (("--task_name=sst2", "--seed=4294967295", "--num_trials=2"),  # failed after trial 1
     "error: --seed=4294967295 with --num_trials=2: the last trial's seed 4294967296 is past "
     "2**32 - 1 (it had failed after the trials before it); give a lower --seed or "
     "--num_trials"),
    # at seed 0 no lower seed helps (it had said "give a lower --seed")
    (("--task_name=sst2", f"--num_trials={2**32 + 1}"), "error: --seed=0 with --num_trials="
     f"{2**32 + 1}: the last trial's seed {2**32} is past 2**32 - 1 (it had failed after the "
     "trials before it); give a lower --num_trials"),
])
def test_bad_flags_are_refused_before_tensorflow_is_imported(flags, expected, tmp_path):
    """The command's one line for a bad task or task option comes before Keras imports
    TensorFlow (seconds), and nothing is written."""
    from helpers import error_line, run_module_reporting_tf

    proc, tf_imported = run_module_reporting_tf(
        "electra_tf.run_finetuning", *flags, f"--data_dir={tmp_path}",
        f"--model_dir={tmp_path}/out", f"--init_checkpoint={tmp_path}/none")
    assert error_line(proc).startswith(expected), proc.stderr[-2000:]
    assert not tf_imported
    assert not (tmp_path / "out").exists()


def test_an_evaluation_of_a_finetuned_folder_reads_at_its_recorded_window(
        tiny_vocab, toy_sst2_dir, tmp_path):
    """--do_train=false without --max_seq_length took the task's default (128), which a
    converted model of 64 positions could not even hold; it evaluates at the window the
    model was fine-tuned with."""
    from helpers import tiny_encoder_config

    from electra_tf import folders
    from electra_tf.modeling import build_discriminator
    from electra_tf.tasks.model import FinetuningModel
    from electra_tf.text.vocab import load_vocab

    encoder = tiny_encoder_config(len(load_vocab(tiny_vocab)), num_hidden_layers=1,
                                  max_position_embeddings=64)
    model = FinetuningModel(build_discriminator(encoder).encoder, "sequence_classification",
                            num_labels=2)
    model.build()
    folders.FinetunedFolder.save(str(tmp_path / "sst2"), model, tiny_vocab, "sst2",
                                 max_seq_length=48)
    trainer, results = finetune("--task_name=sst2", f"--init_checkpoint={tmp_path / 'sst2'}",
                                "--do_train=false", f"--data_dir={toy_sst2_dir}",
                                f"--model_dir={tmp_path / 'eval'}")
    assert trainer.max_seq_length == 48 and "accuracy" in results["eval"]["dev"]


def test_no_split_to_read_and_one_file_as_two_splits_are_refused(
        pretrained_dir, toy_squad_dir, tmp_path):
    """--do_predict on SQuAD (no test split) had predicted nothing with exit 0, and a
    --data_dir of one file had trained and scored on the same questions."""
    import glob

    dev = sorted(glob.glob(os.path.join(toy_squad_dir, "dev*.json")))[0]
    common = ["--task_name=squad_v2", f"--init_checkpoint={pretrained_dir}",
              f"--model_dir={tmp_path / 'out'}", "--max_seq_length=24"]
    for extra, message in (
            ([f"--data_dir={toy_squad_dir}", "--do_predict"],
             "--do_predict: squad_v2 has no test split (its splits: train, dev)"),
            ([f"--data_dir={dev}"], f"--data_dir {dev} is one file, which would be both the "
                                    "train and the dev split")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            finetune(*common, *extra)
        assert not (tmp_path / "out").exists()
