"""A collapsed pre-trained model (issue 42, item 4): fine-tuning from a discriminator
whose token states are nearly collinear did worse than from random weights, so
run_finetuning says so at start-up when the folder's final_eval.json shows it."""

import json
import shutil

from helpers import finetuning_from_flags

from electra_tf import folders
from electra_tf.training.finetuning import collapse_warning


def _with_final_eval(pretrained_dir, folder, **results):
    shutil.copytree(pretrained_dir, folder)
    folders.pretraining.write_final_eval(str(folder), 600, {"disc_auc": 0.55, **results})
    return str(folder)


def test_the_warning_reads_the_final_eval_and_says_nothing_without_one(pretrained_dir,
                                                                        tmp_path):
    collapsed = _with_final_eval(pretrained_dir, tmp_path / "c", disc_token_cosine=0.873)
    line = collapse_warning(collapsed)
    assert line.startswith(f"warning: --init_checkpoint={collapsed}: its final_eval.json "
                           "shows disc_token_cosine 0.873 (>= 0.8): ")
    assert "--from_scratch" in line
    spread = _with_final_eval(pretrained_dir, tmp_path / "s", disc_token_cosine=0.41)
    no_metric = _with_final_eval(pretrained_dir, tmp_path / "o")  # no discriminator states
    assert collapse_warning(spread) is None and collapse_warning(no_metric) is None
    assert collapse_warning(pretrained_dir) is None  # no final_eval.json at all
    broken = _with_final_eval(pretrained_dir, tmp_path / "b")
    (tmp_path / "b" / folders.files.FINAL_EVAL).write_text("{not json")
    assert collapse_warning(broken) is None  # advice only: the weights load either way


def test_run_finetuning_warns_once_at_start_up(pretrained_dir, toy_sst2_dir, tmp_path, capsys):
    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    collapsed = _with_final_eval(pretrained_dir, tmp_path / "c", disc_token_cosine=0.9)
    args = ["--task_name=sst2", f"--data_dir={toy_sst2_dir}", "--max_seq_length=16"]
    TensorFlowFinetuning(*finetuning_from_flags(
        *args, f"--init_checkpoint={collapsed}", f"--model_dir={tmp_path}/out"))
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "warning" in line] == [
        "[finetune] " + collapse_warning(collapsed)]
    assert json.loads((tmp_path / "c" / "final_eval.json").read_text())["step"] == 600


def test_the_warning_for_every_way_the_folder_is_named(pretrained_dir, tmp_path):
    """MODEL_DIR/checkpoints/ckpt-30, the same weights as MODEL_DIR, said nothing (#54)."""
    import os

    collapsed = _with_final_eval(pretrained_dir, tmp_path / "c", disc_token_cosine=0.9)
    checkpoints = os.path.join(collapsed, folders.files.CHECKPOINTS)
    os.makedirs(checkpoints)
    names = [collapsed, collapsed + "/", os.path.join(collapsed, "discriminator.weights.h5"),
             checkpoints, os.path.join(checkpoints, "ckpt-600"),
             os.path.join(checkpoints, "jax-ckpt-600.npz"),
             os.path.relpath(os.path.join(checkpoints, "ckpt-600"))]
    for name in names:
        line = collapse_warning(name)
        assert line and line.startswith(f"warning: --init_checkpoint={name}: its "), name
        assert "disc_token_cosine 0.900 (>= 0.8)" in line and "(of step" not in line, line
    earlier = collapse_warning(os.path.join(checkpoints, "ckpt-300"))
    assert f"{collapsed}/final_eval.json (of step 600; this checkpoint is of step 300)" \
        in earlier
    spread = _with_final_eval(pretrained_dir, tmp_path / "s", disc_token_cosine=0.41)
    assert collapse_warning(os.path.join(spread, "checkpoints", "ckpt-600")) is None


def test_a_window_past_the_pretrained_length_is_noted(pretrained_dir, tmp_path):
    """Fine-tuning at 128 from a model pre-trained at 64 trains positions 65-128 from
    their initial embeddings (as the original's Small, pre-trained at 128, on SQuAD at
    512): a note, by the folder's record, phase 2's length once phase 2 trained."""
    from electra_tf.core.config import PretrainingConfig
    from electra_tf.training.finetuning import untrained_positions_note

    folder = str(tmp_path / "p")
    shutil.copytree(pretrained_dir, folder)
    vocab = {"vocab_file": folders.pretraining.read_pretraining_config(folder)["run"][
        "vocab_file"]}
    folders.pretraining.write_pretraining_config(
        folder, PretrainingConfig(max_seq_length=64, num_train_steps=100), vocab)
    assert untrained_positions_note(folder, 128, "--max_seq_length=128") == (
        "note: --max_seq_length=128 is past the 64 tokens --init_checkpoint was pre-trained "
        "at: positions 65-128 start from their initial embeddings and learn from this task "
        "alone (windows of at most 64 tokens do not use them)")
    assert untrained_positions_note(folder, 64, "x") is None
    assert untrained_positions_note(pretrained_dir, 512, "x") is None  # not recorded

    folders.pretraining.write_pretraining_config(folder, PretrainingConfig(
        max_seq_length=32, num_train_steps=100, phase2_steps=10, phase2_max_seq_length=64,
        phase2_train_batch_size=4), vocab)
    assert untrained_positions_note(folder, 128, "x").startswith("note: x is past the 64 ")
    assert untrained_positions_note(f"{folder}/checkpoints/ckpt-91", 128, "x").startswith(
        "note: x is past the 64 ")
    assert untrained_positions_note(f"{folder}/checkpoints/ckpt-90", 64, "x") == (
        "note: x is past the 32 tokens --init_checkpoint was pre-trained at: positions 33-64 "
        "start from their initial embeddings and learn from this task alone (windows of at "
        "most 32 tokens do not use them)")
    assert untrained_positions_note(f"{folder}/checkpoints/ckpt-90", 32, "x") is None
