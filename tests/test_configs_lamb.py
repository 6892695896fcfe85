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
    # --noadam_bias_correction asks for the original's Adam, which LAMB is not
    with pytest.raises(ConfigError, match="^adam_bias_correction=False chooses the original's"):
        PretrainingConfig(optimizer="lamb", adam_bias_correction=False)
    PretrainingConfig(optimizer="lamb", adam_bias_correction=True)  # what LAMB does anyway


def test_a_warmup_as_long_as_its_phase_is_warned_and_phase_2_fits_the_positions():
    """A phase-2 warmup longer than phase 2 (or a phase-1 warmup longer than phase 1) ran
    without a word, its rate never decaying; so did a phase 2 of shorter sequences than
    phase 1's (the two lengths swapped); a phase-2 length beyond the positions was
    accepted here and refused later under max_seq_length's name."""
    import pytest

    from electra_tf.core.config import PretrainingConfig
    from electra_tf.core.errors import ConfigError

    phases = dict(num_train_steps=10, phase2_steps=4, phase2_max_seq_length=32,
                  optimizer="lamb")
    assert PretrainingConfig(num_warmup_steps=2, phase2_warmup_steps=1,
                             **phases).long_warmup_warning() == ""
    assert PretrainingConfig(num_warmup_steps=2, phase2_warmup_steps=9,
                             **phases).long_warmup_warning() == (
        "warning: --phase2_warmup_steps=9 is not shorter than phase 2's 4 steps: its "
        "learning rate reaches at most 33% of its peak and never decays; give fewer warmup "
        "steps")
    import numpy as np

    from electra_tf.training.optimization import WarmupPolynomialDecay

    schedule = WarmupPolynomialDecay(1.0, 10, 2, power=0.5, restarts=(6,),
                                     stage_rates=((1.0, 9),), decay_after_warmup=True)
    assert max(float(schedule(np.float32(t))) for t in range(6, 10)) == pytest.approx(3 / 9)
    assert PretrainingConfig(num_warmup_steps=6, phase2_warmup_steps=1,
                             **phases).long_warmup_warning().startswith(
        "warning: --num_warmup_steps=6 is not shorter than phase 1's 6 steps: its learning "
        "rate reaches at most 83% of its peak")
    assert "the run's 6 steps" in PretrainingConfig(num_train_steps=6, num_warmup_steps=10
                                                    ).long_warmup_warning()
    # both phases' warmups too long: a line each (only phase 1's was said)
    both = PretrainingConfig(num_warmup_steps=6, phase2_warmup_steps=9,
                             **phases).long_warmup_warning().split("\n")
    assert [line[:40] for line in both] == ["warning: --num_warmup_steps=6 is not sho",
                                            "warning: --phase2_warmup_steps=9 is not "]
    # the run logs them a line each, each with its prefix (the second had none)
    from electra_tf.training.pretraining import start_warnings

    assert [line[:40] for line in start_warnings(PretrainingConfig(
        num_warmup_steps=6, phase2_warmup_steps=9, max_seq_length=64, **phases))] == [
        "warning: --num_warmup_steps=6 is not sho", "warning: --phase2_warmup_steps=9 is not ",
        "warning: --phase2_max_seq_length=32 is s"]
    assert PretrainingConfig(num_train_steps=1000, num_warmup_steps=0).long_warmup_warning() == ""
    assert PretrainingConfig(max_seq_length=64, **phases).phase2_length_warning() == (
        "warning: --phase2_max_seq_length=32 is shorter than --max_seq_length=64: phase 2 "
        "trains on shorter sequences than phase 1 (NVIDIA's two phases go from 128 to 512 "
        "tokens); swap the two lengths if that was not meant")
    assert PretrainingConfig(max_seq_length=32, **phases).phase2_length_warning() == ""
    assert PretrainingConfig(max_seq_length=16, **phases).phase2_length_warning() == ""
    assert PretrainingConfig(max_seq_length=64).phase2_length_warning() == ""  # no phase 2
    tiny = dict(model_size="tiny", model_hparam_overrides={"max_position_embeddings": 48})
    PretrainingConfig(max_seq_length=32, **tiny)
    with pytest.raises(ConfigError, match=r"^phase2_max_seq_length 64 exceeds "
                                          r"max_position_embeddings 48"):
        PretrainingConfig(max_seq_length=32, num_train_steps=10, phase2_steps=4,
                          phase2_max_seq_length=64, **tiny)
    with pytest.raises(ConfigError, match=r"^max_seq_length 64 exceeds max_position_embeddings"):
        PretrainingConfig(max_seq_length=64, **tiny)
