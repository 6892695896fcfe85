"""Where fine-tuning starts: a pre-training folder, one of its checkpoints, or scratch."""

from __future__ import annotations

import os

import numpy as np
import pytest

from electra_tf import folders
from electra_tf.core.config import FinetuningConfig, FinetuningRun
from electra_tf.core.errors import ConfigError, InputError
from electra_tf.training.finetuning import initial_discriminator


@pytest.fixture
def pretrained(trained_run):
    """(model_dir, config) of trained_run: a 6-step TF pre-training run that kept ckpt-3
    and ckpt-6 (read only)."""
    return str(trained_run["model_dir"]), trained_run["config"]


def _weights(discriminator):
    return [np.asarray(w) for w in discriminator.get_weights()]


def test_a_checkpoint_step_gives_the_discriminator_of_that_step(pretrained, tmp_path):
    from electra_tf.objectives.pretrainer import ElectraPretrainer
    from electra_tf.training.checkpoints import NpzCheckpoints, TensorFlowCheckpoints
    from electra_tf.training.optimization import pretraining_optimizer

    model_dir, config = pretrained
    folder = folders.files.checkpoint_dir(model_dir)
    final, vocab = folders.pretraining.load_discriminator(model_dir)
    at = {}
    for step in (3, 6):
        run = FinetuningRun(model_dir="unused", data_dir="unused",
                            init_checkpoint=os.path.join(folder, f"ckpt-{step}"))
        at[step], recorded = initial_discriminator(FinetuningConfig(task_name="sst2"), run)
        assert recorded == vocab
    for a, b in zip(_weights(at[6]), _weights(final)):
        np.testing.assert_array_equal(a, b)  # the last checkpoint is the final model
    assert any(not np.array_equal(a, b) for a, b in zip(_weights(at[3]), _weights(final)))

    # The JAX backend's npz checkpoint of the same state gives the same discriminator.
    model = ElectraPretrainer(config)
    model.build_with_dummy_batch()
    optimizer = pretraining_optimizer(config, model.trainable_variables)
    TensorFlowCheckpoints(model, optimizer, folder, 5).restore()
    jax_dir = str(tmp_path / "jax_run")
    folders.pretraining.write_pretraining_config(jax_dir, config, {"vocab_file": vocab})
    path = NpzCheckpoints(model, optimizer, folders.files.checkpoint_dir(jax_dir), 5).save()
    assert path.endswith("jax-ckpt-6.npz")
    # ... named as the file, by the docs' MODEL_DIR/checkpoints/ckpt-N (a JAX folder has no
    # tf.train save of that name), or as jax-ckpt-N without its .npz
    for name in (path, path[:-len(".npz")], os.path.join(os.path.dirname(path), "ckpt-6")):
        from_npz, _ = initial_discriminator(FinetuningConfig(task_name="sst2"), FinetuningRun(
            model_dir="unused", data_dir="unused", init_checkpoint=name))
        for a, b in zip(_weights(from_npz), _weights(final)):
            np.testing.assert_array_equal(a, b)


def test_a_checkpoint_step_and_its_folder_start_the_same_head(pretrained, tmp_path):
    """The folder and its last checkpoint hold the same discriminator; fine-tuning from
    either starts from the same head too (the checkpoint's whole pre-training model had
    drawn other random numbers before it: another head, other results, one seed)."""
    from electra_tf.tasks.registry import get_task
    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    model_dir, _ = pretrained
    heads = []
    for i, start in enumerate((model_dir, os.path.join(folders.files.checkpoint_dir(model_dir),
                                                       "ckpt-6"))):
        trainer = TensorFlowFinetuning(get_task("sst2"), FinetuningConfig(
            task_name="sst2", max_seq_length=16), FinetuningRun(
            model_dir=str(tmp_path / str(i)), data_dir="unused", init_checkpoint=start))
        heads.append([np.asarray(w) for w in trainer.model.head.get_weights()])
    assert heads[0] and len(heads[0]) == len(heads[1])
    for a, b in zip(*heads):
        np.testing.assert_array_equal(a, b)


def test_bad_checkpoint_steps_are_one_line(pretrained):
    model_dir, _ = pretrained
    config = FinetuningConfig(task_name="sst2")
    missing = os.path.join(folders.files.checkpoint_dir(model_dir), "ckpt-4")
    with pytest.raises(InputError, match="ckpt-4: no readable checkpoint"):
        initial_discriminator(config, FinetuningRun(init_checkpoint=missing))
    with pytest.raises(ConfigError, match="not --model_size=base"):
        initial_discriminator(FinetuningConfig(task_name="sst2", model_size="base"), FinetuningRun(
            init_checkpoint=os.path.join(folders.files.checkpoint_dir(model_dir), "ckpt-3")))


def test_from_scratch_is_seeded_and_sized_by_the_flags(tiny_records):
    import keras

    from electra_tf.text.vocab import load_vocab

    config = FinetuningConfig(task_name="sst2", model_size="tiny")
    run = FinetuningRun(from_scratch=True, vocab_file=tiny_records["vocab"])
    weights = []
    for seed in (1, 1, 2):
        keras.utils.set_random_seed(seed)
        discriminator, vocab = initial_discriminator(config, run)
        weights.append(_weights(discriminator))
    assert vocab == tiny_records["vocab"]
    assert discriminator.config.vocab_size == len(load_vocab(tiny_records["vocab"]))
    assert discriminator.config.hidden_size == 128  # the tiny preset
    for a, b in zip(weights[0], weights[1]):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(weights[0], weights[2]))
    with pytest.raises(ConfigError, match="--from_scratch needs --model_size"):
        initial_discriminator(FinetuningConfig(task_name="sst2"), run)
    with pytest.raises(ConfigError, match="exclude each other"):
        initial_discriminator(config, FinetuningRun(from_scratch=True, init_checkpoint="x",
                                                    vocab_file=tiny_records["vocab"]))
    with pytest.raises(InputError, match="--init_checkpoint is required"):
        initial_discriminator(config, FinetuningRun())



def test_a_finetuned_head_continues_only_the_same_head():
    """A fine-tuning folder's head starts a task's only where both are the same head, a
    regression or not: STS-B's score does not start SST-2's classes, nor NER's tags."""
    from electra_tf.tasks.registry import get_task
    from electra_tf.training.finetuning import start_from_finetuned

    def record(task, head, regression):
        return folders.finetuned.FinetunedRecord(
            task=task, head=head, regression=regression, answerable=False, pair=True,
            label_names=(), encoder=None, max_seq_length=8, finetuning={}, run={})

    with pytest.raises(ConfigError, match=r"ft holds stsb's sequence_classification head \(a "
                                          r"regression\), but sst2 has a "
                                          "sequence_classification head$"):
        start_from_finetuned(None, None, record("stsb", "sequence_classification", True),
                             "ft", get_task("sst2"), get_task("sst2").head_config())
    with pytest.raises(ConfigError, match="holds ner's token_classification head, but stsb "
                                          r"has a sequence_classification head \(a regression\)$"):
        start_from_finetuned(None, None, record("ner", "token_classification", False),
                             "ft", get_task("stsb"), get_task("stsb").head_config())


def test_a_resume_that_decodes_otherwise_says_so(tmp_path):
    """The note a resumed run gives when its decoding differs from the record's (the run
    itself: test_finetuning_end_to_end.py, slow): the values its earlier epochs were
    scored with, once results.json holds any; nothing for options the task does not
    decode with (a --beam_size under the independent head)."""
    import dataclasses
    import types

    from electra_tf.training.finetuning import Finetuning

    lines = []
    config = FinetuningConfig(task_name="squad_v2", joint_prediction=False, n_best_size=5,
                              beam_size=3)
    trainer = types.SimpleNamespace(config=config, run=FinetuningRun(model_dir=str(tmp_path)),
                                    _log=lines.append)
    recorded = dataclasses.asdict(FinetuningConfig(task_name="squad_v2",
                                                   joint_prediction=False))
    Finetuning._note_other_decoding(trainer, recorded)
    assert lines == []  # no epoch scored yet
    folders.finetuned.write_results(str(tmp_path), {"epoch_1": {"f1": 50.0}})
    Finetuning._note_other_decoding(trainer, recorded)
    assert lines == [f"note: {tmp_path}'s earlier epochs were scored with --n_best_size=20; "
                     "this run scores the next with --n_best_size=5 (results.json keeps the "
                     "earlier scores; finetuning_config.json now records these, which an "
                     "export serves)"]
    lines.clear()
    Finetuning._note_other_decoding(trainer, {**recorded, "n_best_size": 5})
    assert lines == []
