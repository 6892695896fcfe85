"""--vocab_size comes from --vocab_file unless given; given, it must match."""

from __future__ import annotations

import os

import pytest
from absl import flags
from conftest import REPO

from electra_tf import flags as flags_lib
from electra_tf.core.errors import ConfigError


def _parse(*argv):
    values = flags.FlagValues()
    flags_lib.define_pretraining_flags(values)
    values(["x", *argv])
    return flags_lib.pretraining_configs(values)


@pytest.mark.parametrize("size", ["small", "base", "large"])
def test_the_paper_flagfiles_take_the_size_of_a_learned_vocab(size, tiny_vocab, tmp_path):
    from electra_tf.text.vocab import load_vocab

    config, run = _parse(f"--flagfile={os.path.join(REPO, 'configs', size + '.flags')}",
                         f"--vocab_file={tiny_vocab}", f"--model_dir={tmp_path}",
                         "--train_data=unused")
    assert config.vocab_size == len(load_vocab(tiny_vocab)) < 30522


def test_a_given_vocab_size_is_kept_and_checked_against_the_file(tiny_vocab, tmp_path):
    from electra_tf.training.preflight import pretraining_masking

    config, run = _parse("--vocab_size=30522", f"--vocab_file={tiny_vocab}",
                         f"--model_dir={tmp_path}", "--train_data=unused")
    assert config.vocab_size == 30522
    with pytest.raises(ConfigError, match="vocab_size=30522 but .* holds") as refused:
        pretraining_masking(config, run)
    # a table larger than the vocabulary is told how it is given (the way back to a
    # converted folder's padded table had been a second refusal, of other shapes)
    from electra_tf.text.vocab import load_vocab

    n = len(load_vocab(tiny_vocab))
    assert str(refused.value).endswith(
        f"set --vocab_size to match (for an embedding table of 30522 rows, padded past the "
        f'vocabulary: --vocab_size={n} and "vocab_size": 30522 in --model_hparam_overrides)')
