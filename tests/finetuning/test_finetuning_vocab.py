"""A fine-tuning folder carries its vocab.txt; fine-tuning and export check it by fingerprint.

One fine-tuning run (tiny model, toy SST-2, one epoch) writes the folder the
export and a second fine-tuning then read.
"""

import os
import shutil

import pytest
from helpers import error_line, finetune, run_module, tiny_encoder_config, write_pretrained_dir

from electra_tf import folders
from electra_tf.core.errors import ConfigError

ARGS = ("--task_name=sst2", "--max_seq_length=16", "--num_train_epochs=1",
        "--train_batch_size=32", "--eval_batch_size=64")


def _swap(path) -> None:
    tokens = open(path, encoding="utf-8").read().splitlines()
    i, j = [k for k, t in enumerate(tokens) if t.isalpha() and len(t) > 3][:2]
    tokens[i], tokens[j] = tokens[j], tokens[i]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")


@pytest.fixture(scope="module")
def finetuned(pretrained_dir, toy_sst2_dir, tmp_path_factory):
    """A fine-tuning folder whose pre-training folder has since moved away."""
    root = tmp_path_factory.mktemp("vocab_finetuned")
    pre = shutil.copytree(pretrained_dir, root / "pre")
    out = root / "out"
    finetune(*ARGS, f"--init_checkpoint={pre}", f"--data_dir={toy_sst2_dir}",
             f"--model_dir={out}")
    shutil.move(pre, root / "pre_moved")
    return str(out)


def test_the_fine_tuning_folder_carries_its_vocab(finetuned, tiny_vocab):
    from electra_tf.serving.export import load_spec

    own = os.path.join(finetuned, folders.files.VOCAB)
    assert folders.vocabulary.vocab_fingerprint(own) == folders.vocabulary.vocab_fingerprint(tiny_vocab)
    spec = load_spec("sequence_classification", finetuned)  # its pre-training folder moved
    assert spec.tokenizer.vocab_file == own


def test_export_and_fine_tuning_refuse_a_changed_vocab(finetuned, toy_sst2_dir, tmp_path):
    from electra_tf.serving.export import load_spec

    folder = shutil.copytree(finetuned, tmp_path / "ft")
    _swap(folder / folders.files.VOCAB)
    with pytest.raises(ConfigError, match=r"holds other tokens than the vocabulary"):
        load_spec("sequence_classification", str(folder))
    with pytest.raises(ConfigError, match=r"holds other tokens than the vocabulary"):
        finetune(*ARGS, f"--init_checkpoint={folder}", f"--data_dir={toy_sst2_dir}",
                 f"--model_dir={tmp_path}/again")
    assert not (tmp_path / "again").exists()


def test_export_refuses_an_explicit_vocab_of_other_tokens(finetuned, tiny_vocab, tmp_path):
    from electra_tf.serving.export import load_spec

    other = str(shutil.copy(tiny_vocab, tmp_path / "other.txt"))
    _swap(other)
    with pytest.raises(ConfigError) as raised:
        load_spec("sequence_classification", finetuned, vocab_file=other)
    message = str(raised.value)
    assert message.startswith(f"--vocab_file={other} holds other tokens than"), message
    assert os.path.join(finetuned, folders.files.VOCAB) in message


# Slow (a TensorFlow process): the refusal itself is checked in this process above.
@pytest.mark.slow
def test_the_export_command_refuses_a_swapped_vocab_in_one_line(finetuned, tmp_path):
    folder = shutil.copytree(finetuned, tmp_path / "ft")
    _swap(folder / folders.files.VOCAB)
    proc = run_module("export.export_saved_model", "--task=sequence_classification",
                      f"--checkpoint={folder}", f"--model_base={tmp_path}/serving",
                      "--model_name=m")
    error_line(proc, "holds other tokens than the vocabulary", "sha256")
    assert not os.path.exists(tmp_path / "serving" / "m" / "1")


def test_fine_tuning_takes_a_padded_table_and_refuses_a_short_one(tiny_vocab, toy_sst2_dir,
                                                                 tmp_path):
    from electra_tf.text.vocab import load_vocab

    size = len(load_vocab(tiny_vocab))
    short = write_pretrained_dir(tmp_path / "short", tiny_vocab, tiny_encoder_config(size - 2))
    with pytest.raises(ConfigError, match=rf"holds {size} tokens but the model's embedding "
                                          rf"table has {size - 2} rows"):
        finetune(*ARGS, f"--init_checkpoint={short}", f"--data_dir={toy_sst2_dir}",
                 f"--model_dir={tmp_path}/out_short")
    assert not (tmp_path / "out_short").exists()
    padded = write_pretrained_dir(tmp_path / "padded", tiny_vocab, tiny_encoder_config(size + 3))
    trainer, _ = finetune(*ARGS, f"--init_checkpoint={padded}", f"--data_dir={toy_sst2_dir}",
                          f"--model_dir={tmp_path}/out_padded")
    assert trainer.tokenizer.vocab_size == size


def test_resuming_with_another_vocab_is_refused(finetuned, tiny_vocab, toy_sst2_dir, tmp_path):
    """The fine-tuning folder's checkpoints, resumed from a pre-training folder of the
    same size but two tokens swapped: every id would reach another embedding."""
    assert folders.files.has_checkpoints(finetuned)
    folder = shutil.copytree(finetuned, tmp_path / "ft")
    before = sorted(p.name for p in folder.iterdir())
    other = str(shutil.copy(tiny_vocab, tmp_path / "other.txt"))
    _swap(other)
    pre = write_pretrained_dir(tmp_path / "other_pre", other)
    with pytest.raises(ConfigError, match=rf"^{folder} holds checkpoints trained on the "
                                          rf"vocabulary {folder / folders.files.VOCAB} "):
        finetune(*ARGS, f"--init_checkpoint={pre}", f"--data_dir={toy_sst2_dir}",
                 f"--model_dir={folder}")
    assert sorted(p.name for p in folder.iterdir()) == before


def test_fine_tuning_refuses_the_other_casing(finetuned, tiny_vocab, toy_sst2_dir, tmp_path):
    """The casing a folder records is the one its vocabulary and weights were made for:
    fine-tuning a cased model with the default lower-casing (or the reverse) is refused
    in one line before anything is written, and so is resuming checkpoints trained
    with the other casing; a folder that records none is not checked."""
    from electra_tf.training.finetuning import check_casing, check_resumed_casing

    cased = write_pretrained_dir(tmp_path / "cased", tiny_vocab)
    folders.pretraining.write_pretraining_config(cased, None, {"vocab_file": tiny_vocab},
                                                 do_lower_case=False)
    with pytest.raises(ConfigError) as raised:
        finetune(*ARGS, f"--init_checkpoint={cased}", f"--data_dir={toy_sst2_dir}",
                 f"--model_dir={tmp_path}/out")
    assert str(raised.value) == (
        f"--do_lower_case=true: --init_checkpoint={cased} records a model trained on cased "
        "text; fine-tune with --do_lower_case=false, the casing its vocabulary and weights "
        "were made for")
    assert not (tmp_path / "out").exists()
    check_casing(False, cased)
    unrecorded = write_pretrained_dir(tmp_path / "unrecorded", tiny_vocab)
    check_casing(True, unrecorded)
    check_casing(False, unrecorded)
    # A fine-tuning folder records its run's casing (lower-cased here).
    with pytest.raises(ConfigError, match=r"^--do_lower_case=false: --init_checkpoint=.* "
                                          r"records a model trained on lower-cased text"):
        finetune(*ARGS, "--nodo_lower_case", f"--init_checkpoint={finetuned}",
                 f"--data_dir={toy_sst2_dir}", f"--model_dir={tmp_path}/again")
    check_resumed_casing(True, finetuned)
    with pytest.raises(ConfigError) as raised:
        check_resumed_casing(False, finetuned)
    assert str(raised.value) == (
        f"--do_lower_case=false: {finetuned} holds checkpoints trained on lower-cased text; "
        "resume with --do_lower_case=true, or use another --model_dir")
    # A model_dir fine-tuned before the check, lower-cased from that cased model, is held
    # to its own record when it resumes (not told to change the flag both ways).
    again = shutil.copytree(finetuned, tmp_path / "resumed")
    finetune(*ARGS, f"--init_checkpoint={cased}", f"--data_dir={toy_sst2_dir}",
             f"--model_dir={again}")
    with pytest.raises(ConfigError, match="holds checkpoints trained on lower-cased text"):
        finetune(*ARGS, "--nodo_lower_case", f"--init_checkpoint={cased}",
                 f"--data_dir={toy_sst2_dir}", f"--model_dir={again}")


def test_evaluation_only_reads_no_train_split(finetuned, toy_sst2_dir, tmp_path, capsys):
    """--do_train=false scores a fine-tuned model on dev without reading (or needing) the
    train split, and an evaluation in place keeps the record training wrote."""
    import json

    dev_only = shutil.copytree(toy_sst2_dir, tmp_path / "dev_only")
    os.remove(dev_only / "train.tsv")
    capsys.readouterr()
    _, results = finetune(*ARGS, "--do_train=false", f"--init_checkpoint={finetuned}",
                          f"--data_dir={dev_only}", f"--model_dir={tmp_path}/eval")
    assert "evaluation only (--do_train=false; the train split is not read)" in \
        capsys.readouterr().err
    trained = json.load(open(os.path.join(finetuned, "results.json")))["epoch_1"]["dev"]
    assert results["eval"]["dev"]["accuracy"] == trained["accuracy"], (results, trained)
    assert folders.FinetunedFolder.open(str(tmp_path / "eval")).record.task == "sst2"
    # In place: the checkpoints are evaluated, the record stays as training wrote it.
    again = shutil.copytree(finetuned, tmp_path / "again")
    record = (again / folders.files.FINETUNING_CONFIG).read_bytes()
    _, results = finetune(*ARGS, "--do_train=false", f"--init_checkpoint={finetuned}",
                          f"--data_dir={dev_only}", f"--model_dir={again}")
    assert results["eval"]["dev"]["accuracy"] == trained["accuracy"]
    assert (again / folders.files.FINETUNING_CONFIG).read_bytes() == record


def test_more_training_of_a_folder_on_its_task_keeps_its_window(finetuned, toy_sst2_dir,
                                                                tmp_path, capsys):
    """Without --max_seq_length, a fine-tuned model trained on at its own window (16 here),
    not the task's default (128), which a converted model's positions may not hold."""
    from helpers import finetuning_from_flags

    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    def trainer(*argv):
        task, config, run = finetuning_from_flags(
            "--task_name=sst2", f"--init_checkpoint={finetuned}", f"--data_dir={toy_sst2_dir}",
            f"--model_dir={tmp_path / 'more'}", *argv)
        return TensorFlowFinetuning(task, config, run)

    assert trainer().max_seq_length == 16
    assert f"continuing {finetuned}'s sst2 model at its max_seq_length 16" in \
        capsys.readouterr().err
    assert trainer("--max_seq_length=32").max_seq_length == 32


def test_checkpoints_of_another_task_are_refused(finetuned, pretrained_dir, toy_sst2_dir,
                                                 tmp_path):
    """An sst2 folder given --task_name=rte (the same number of steps) had been resumed as
    a finished rte run, or evaluated as one (rte predictions and scores written in it)."""
    folder = shutil.copytree(finetuned, tmp_path / "ft")
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    for evaluate in ((), ("--do_train=false",)):
        with pytest.raises(ConfigError, match=rf"^--task_name=rte: {folder} holds checkpoints "
                                              r"of a fine-tuning run of --task_name=sst2; give "
                                              r"that to resume or evaluate them, or another "
                                              r"--model_dir$"):
            finetune("--task_name=rte", *ARGS[1:], *evaluate, f"--data_dir={toy_sst2_dir}",
                     f"--init_checkpoint={pretrained_dir}", f"--model_dir={folder}")
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
