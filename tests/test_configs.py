"""Every flagfile parses, and the paper's ones give exactly Table 6."""

import pytest
from conftest import REPO

from electra_tf.config import ConfigError, PretrainingConfig


@pytest.mark.parametrize("name", ["small", "base", "large", "demo"])
def test_flagfiles_parse(name):
    from absl import flags

    from electra_tf import flags as flags_lib

    fv = flags.FlagValues()
    flags_lib.define_pretraining_flags(fv)
    flags_lib.define_demo_flags(fv)
    fv(["x", f"--flagfile={REPO}/configs/{name}.flags", "--model_dir=m", "--train_data=t",
        "--vocab_file=v"])
    config, run = flags_lib.pretraining_configs(fv)
    expected = {  # paper Table 6
        "small": dict(hidden=256, layers=12, heads=4, ffn=1024, emb=128, gen=64, mask=0.15,
                      lr=5e-4, batch=128, steps=1_000_000, L=128),
        "base": dict(hidden=768, layers=12, heads=12, ffn=3072, emb=768, gen=256, mask=0.15,
                     lr=2e-4, batch=256, steps=766_000, L=512),
        "large": dict(hidden=1024, layers=24, heads=16, ffn=4096, emb=1024, gen=256, mask=0.25,
                      lr=2e-4, batch=2048, steps=400_000, L=512),
    }.get(name)
    if expected is None:
        assert config.model_size == "tiny" and config.num_train_steps <= 2400
        assert fv.demo_corpus == "installed" and fv.demo_data_dir
        return
    d, g = config.discriminator_config(), config.generator_config()
    got = dict(hidden=d.hidden_size, layers=d.num_hidden_layers, heads=d.num_attention_heads,
               ffn=d.intermediate_size, emb=d.resolved_embedding_size, gen=g.hidden_size,
               mask=config.mask_prob, lr=config.learning_rate, batch=config.train_batch_size,
               steps=config.num_train_steps, L=config.max_seq_length)
    assert got == expected
    assert (config.num_warmup_steps, config.weight_decay_rate, config.adam_epsilon,
            config.disc_weight, config.vocab_size) == (10000, 0.01, 1e-6, 50.0, 30522)
    assert config.resolved_max_predictions_per_seq == int((config.mask_prob + 0.005) * got["L"])


def test_unknown_hyperparameter_is_an_error():
    with pytest.raises(ConfigError, match="unknown PretrainingConfig"):
        PretrainingConfig.from_dict({"disc_wieght": 50.0})


def test_tied_generator_needs_equal_sizes():
    with pytest.raises(ConfigError, match="equal sizes"):
        PretrainingConfig(untied_generator=False).validate()
    PretrainingConfig(untied_generator=False, generator_hidden_size=1.0).validate()
