"""configs/base_lamb.flags: NVIDIA's TF2 ELECTRA-Base recipe, both phases."""

from absl import flags
from conftest import REPO

from electra_tf import flags as flags_lib
from electra_tf.core.config import check_run


def test_base_lamb_flagfile_is_nvidias_recipe():
    fv = flags.FlagValues()
    flags_lib.define_pretraining_flags(fv)
    fv(["x", f"--flagfile={REPO}/configs/base_lamb.flags", "--model_dir=m", "--train_data=t",
        "--phase2_train_data=t2", "--vocab_file=v", "--vocab_size=30522"])
    config, run = flags_lib.pretraining_configs(fv)
    check_run(config, run)
    d, g = config.discriminator_config(), config.generator_config()
    assert (d.hidden_size, d.num_hidden_layers, g.hidden_size, g.num_hidden_layers) == (
        768, 12, 256, 12)
    assert (config.optimizer, config.opt_beta_1, config.opt_beta_2, config.skip_adaptive,
            config.adam_epsilon, config.weight_decay_rate, config.lr_decay_power) == (
        "lamb", 0.878, 0.974, True, 1e-6, 0.01, 0.5)
    # phase 1: 8 GPUs x 176 x 48 accumulation steps, lr 6e-3, 2,000 warmup, 10,000 steps
    assert (config.max_seq_length, config.train_batch_size, run.gradient_accumulation_steps,
            config.learning_rate, config.num_warmup_steps, config.phase2_start) == (
        128, 8 * 176 * 48, 48, 6e-3, 2000, 10000)
    # phase 2: 8 x 24 x 144, lr 4e-3, 200 warmup, 933 steps at 512; 79 masked positions
    assert (config.phase2_max_seq_length, config.resolved_phase2_train_batch_size,
            run.resolved_phase2_gradient_accumulation_steps, config.phase2_learning_rate,
            config.phase2_warmup_steps, config.phase2_steps) == (
        512, 8 * 24 * 144, 144, 4e-3, 200, 933)
    assert (config.resolved_max_predictions_per_seq,
            config.phase2_max_predictions_per_seq) == (19, 79)
    assert config.stage_starts == (10000,) and config.stage_rates == ((4e-3, 200),)


def test_lamb_config_checks_and_no_adam_warmup_warning():
    from electra_tf.core.config import PretrainingConfig
    from electra_tf.core.errors import ConfigError

    # the warning is about the original's Adam without bias correction; LAMB corrects
    assert PretrainingConfig(num_warmup_steps=10).short_warmup_warning()
    assert not PretrainingConfig(num_warmup_steps=10, optimizer="lamb").short_warmup_warning()
    import pytest

    with pytest.raises(ConfigError, match="optimizer must be one of adamw, lamb"):
        PretrainingConfig(optimizer="sgd")
    with pytest.raises(ConfigError, match="opt_beta_2 must be in"):
        PretrainingConfig(opt_beta_2=1.0)
