"""configs/finetune_paper_small.flags: the paper's Table 7 where it differs from the code."""

from conftest import REPO


def test_paper_small_flagfile_overrides_a_task_flagfile():
    from absl import flags

    from electra_tf import flags as flags_lib

    fv = flags.FlagValues()
    flags_lib.define_finetuning_flags(fv)
    fv(["x", f"--flagfile={REPO}/configs/glue_rte.flags",
        f"--flagfile={REPO}/configs/finetune_paper_small.flags",
        "--model_dir=m", "--data_dir=d", "--init_checkpoint=c"])
    config, _ = flags_lib.finetuning_configs(fv)
    assert (config.task_name, config.num_train_epochs) == ("rte", 10)  # the task's
    assert (config.learning_rate, config.weight_decay_rate) == (3e-4, 0.0)  # the paper's
    assert config.resolved_layerwise_lr_decay("small") == 0.8  # paper and code agree
    # The first line of the command in its header names the file itself.
    header = open(f"{REPO}/configs/finetune_paper_small.flags").read()
    assert "--flagfile=configs/finetune_paper_small.flags" in header
