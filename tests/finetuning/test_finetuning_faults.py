"""run_finetuning on bad input and Ctrl-C: one line, a non-zero exit, nothing trained on bad data.

The bad-input cases run in this process and check the error the library raises;
the command line's one `error:` line is test_finetuning_end_to_end.py's
test_cli_combined_null_rule_with_the_joint_head_is_one_line.
"""

import shutil

import pytest
from helpers import finetune, interrupt_after

from electra_tf.errors import InputError, TaskDataError


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


def test_ctrl_c_saves_and_exits_130_with_one_line(pretrained_dir, toy_sst2_dir, tmp_path):
    out = tmp_path / "out"
    interrupt_after("electra_tf.run_finetuning", [
        "--task_name=sst2", f"--init_checkpoint={pretrained_dir}", f"--data_dir={toy_sst2_dir}",
        f"--model_dir={out}", "--max_seq_length=16", "--num_train_epochs=1000",
        "--train_batch_size=16", "--save_checkpoints_steps=2", "--do_eval=false"],
        r"epoch 1 step 4/", out)
