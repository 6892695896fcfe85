"""Fine-tuning's dropout: its own flags (0.1, as the original), not the checkpoint's."""

import numpy as np
import pytest
from helpers import finetuning_from_flags, tiny_encoder_config, write_pretrained_dir

from electra_tf import folders
from electra_tf.core.errors import ConfigError


def _weights(model):
    return [np.asarray(v) for v in model.trainable_variables]


def test_fine_tuning_dropout_is_its_own_not_the_checkpoints(tiny_vocab, toy_sst2_dir, tmp_path):
    """A checkpoint pre-trained without dropout (the demo's) fine-tunes with 0.1, as the
    original; the flags set other rates. The weights are the checkpoint's either way."""
    from electra_tf.modeling.layers import Dropout
    from electra_tf.text.vocab import load_vocab
    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    folder = write_pretrained_dir(tmp_path / "no_dropout", tiny_vocab, tiny_encoder_config(
        len(load_vocab(tiny_vocab)), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    pretrained, _ = folders.pretraining.load_discriminator(folder)

    def rates(*flags):
        trainer = TensorFlowFinetuning(*finetuning_from_flags(
            "--task_name=sst2", f"--init_checkpoint={folder}", f"--data_dir={toy_sst2_dir}",
            f"--model_dir={tmp_path}/out", "--max_seq_length=16", *flags))
        assert len(_weights(trainer.model.encoder)) == len(_weights(pretrained.encoder))
        for a, b in zip(_weights(trainer.model.encoder), _weights(pretrained.encoder)):
            np.testing.assert_array_equal(a, b)
        found = {layer.rate for layer in trainer.model._flatten_layers()
                 if isinstance(layer, Dropout)}
        config = trainer.encoder_config
        return found, (config.hidden_dropout_prob, config.attention_probs_dropout_prob)

    assert rates() == ({0.1}, (0.1, 0.1))  # the encoder's, the head's; and recorded
    assert rates("--hidden_dropout_prob=0.2", "--attention_probs_dropout_prob=0") == (
        {0.2, 0.0}, (0.2, 0.0))
    with pytest.raises(ConfigError, match=r"hidden_dropout_prob must be in \[0, 1\), got 1.0"):
        rates("--hidden_dropout_prob=1")
