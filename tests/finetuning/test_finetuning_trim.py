"""Training batches cut to their longest example (FinetuningRun.trim_batches,
training/finetuning.trim_batch): the loss and its gradient are those of the full
batch, for every kind of head, and the cut batches train through the real loop."""

import numpy as np
import pytest
import tensorflow as tf

L = 64  # the toy tasks' examples use 8-25 positions of it

TASKS = {"sst2": "toy_sst2_dir", "ner": "toy_ner_dir", "squad_v2": "toy_squad_dir"}


def trainer(task, data_dir, pretrained_dir, model_dir, max_seq_length=L, **run):
    from electra_tf.core.config import FinetuningConfig, FinetuningRun
    from electra_tf.tasks.registry import get_task
    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    config = FinetuningConfig(task_name=task, max_seq_length=max_seq_length, train_batch_size=8,
                              hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                              num_train_epochs=1)
    return TensorFlowFinetuning(get_task(task), config, FinetuningRun(
        model_dir=str(model_dir), data_dir=data_dir, init_checkpoint=pretrained_dir,
        do_eval=False, **run))


@pytest.mark.parametrize("task", TASKS)
def test_a_cut_batch_gives_the_full_batchs_loss_and_gradient(task, request, pretrained_dir,
                                                             tmp_path):
    from electra_tf.training.finetuning import trim_batch

    ft = trainer(task, request.getfixturevalue(TASKS[task]), pretrained_dir, tmp_path,
                 trim_batches=False)
    full = next(iter(ft.train_dataset(0)))
    used = int(np.nonzero(full["input_mask"].numpy().any(0))[0].max()) + 1
    exact = trim_batch(full, L)  # the longest example itself
    assert exact["input_ids"].shape[1] == used
    cut = trim_batch(full, L, step=8)  # rounded up, as a compiled step's
    length = cut["input_ids"].shape[1]
    assert length < L and length % 8 == 0 and used <= length < used + 8
    for k, v in full.items():  # every per-position feature is cut, the others kept whole
        per_position = v.shape.rank == 2 and v.shape[1] == L
        assert cut[k].shape == ((v.shape[0], length) if per_position else v.shape), k
        np.testing.assert_array_equal(cut[k], v[:, :length] if per_position else v)
    assert (full["input_mask"].numpy()[:, length:] == 0).all()
    seed = tf.constant([1, 2], tf.int32)
    loss_full, grads_full = ft._forward_backward(full, seed)
    for batch in (exact, cut):
        loss_cut, grads_cut = ft._forward_backward(batch, seed)
        np.testing.assert_allclose(loss_cut, loss_full, rtol=1e-5)
        assert len(grads_cut) == len(grads_full)
        for g_cut, g_full, v in zip(grads_cut, grads_full, ft._variables):
            np.testing.assert_allclose(g_cut, g_full, rtol=1e-4, atol=1e-6, err_msg=v.path)
    # one real position fewer is another gradient: the comparison above can tell
    short = {k: v[:, :used - 1] if k in exact and exact[k].shape != v.shape else v
             for k, v in full.items()}
    grads_short = ft._forward_backward(short, seed)[1]
    assert not all(np.allclose(g_short, g_full, rtol=1e-4, atol=1e-6)
                   for g_short, g_full in zip(grads_short, grads_full))


def test_the_loop_trains_on_cut_batches_by_default(pretrained_dir, tmp_path, toy_sst2_dir):
    ft = trainer("sst2", toy_sst2_dir, pretrained_dir, tmp_path)
    assert ft.run.trim_batches
    lengths = {int(b["input_ids"].shape[1]) for b in ft.train_dataset(0)}
    assert lengths and max(lengths) < L  # the toy sentences are short
    ft.build_optimizer(4)
    loss = ft.train_steps(ft.train_iterator(0), 3)
    assert np.isfinite(loss) and ft.step == 3


def test_the_mean_cut_length_of_random_batches():
    from electra_tf.training.finetuning import mean_trimmed_length

    mask = np.zeros((100, 64), np.int32)
    mask[:, :5] = 1
    assert mean_trimmed_length(mask, 8) == 5
    assert mean_trimmed_length(mask, 8, step=8) == 8  # rounded up
    mask[:, :] = 1
    assert mean_trimmed_length(mask, 8, step=8) == 64
    mask[:, :] = 0
    mask[:50, :20] = 1  # half the rows use 20 positions, half 3 (a hole at 1 counts)
    mask[50:, [0, 2]] = 1
    lengths = {mean_trimmed_length(mask, 1, step=8, samples=400, seed=s) for s in range(3)}
    assert all(14 < m < 18 for m in lengths), lengths  # about half 24, half 8
    assert mean_trimmed_length(mask, 100, step=8) == 24 == mean_trimmed_length(mask, 1000, 8)
    assert mean_trimmed_length(mask, 100) == 20


def test_a_compiled_step_sees_at_most_8_lengths(pretrained_dir, tmp_path, toy_sst2_dir):
    from electra_tf.training.finetuning import trim_bucket

    assert [trim_bucket(n) for n in (8, 64, 128, 384, 512)] == [8, 8, 16, 48, 64]
    assert trainer("sst2", toy_sst2_dir, pretrained_dir, tmp_path).trim_step == 1
    xla = trainer("sst2", toy_sst2_dir, pretrained_dir, tmp_path / "x", jit_compile=True)
    assert xla.trim_step == 8
    lengths = {int(b["input_ids"].shape[1]) for b in xla.train_dataset(0)}
    assert lengths and all(n % 8 == 0 for n in lengths), lengths


def test_batches_that_fill_the_window_are_not_cut(pretrained_dir, tmp_path, toy_sst2_dir,
                                                  capsys):
    """A cut batch's length is unknown when the step is traced, which costs where the cut
    saves little: at 8 positions nearly every toy sentence fills the window."""
    ft = trainer("sst2", toy_sst2_dir, pretrained_dir, tmp_path, max_seq_length=8)
    assert not ft.trims_batches
    assert "training batches not cut to their longest example" in capsys.readouterr().err
    assert ft.train_dataset(0).element_spec["input_ids"].shape.as_list() == [8, 8]
    short = trainer("sst2", toy_sst2_dir, pretrained_dir, tmp_path / "b")
    assert short.trims_batches
    assert short.train_dataset(0).element_spec["input_ids"].shape.as_list() == [8, None]
    assert "training batches cut to their longest example" in capsys.readouterr().err
    off = trainer("sst2", toy_sst2_dir, pretrained_dir, tmp_path / "c", trim_batches=False)
    assert not off.trims_batches
    assert off.train_dataset(0).element_spec["input_ids"].shape.as_list() == [8, L]


@pytest.mark.slow
def test_mirrored_replicas_train_on_cut_batches(pretrained_dir, tmp_path, toy_sst2_dir):
    """run_finetuning on two CPU replicas (tf.distribute's MirroredStrategy): each replica
    gets its share of a cut batch."""
    from helpers import run_module

    proc = run_module("electra_tf.run_finetuning", "--task_name=sst2",
                      f"--data_dir={toy_sst2_dir}", f"--init_checkpoint={pretrained_dir}",
                      f"--model_dir={tmp_path / 'm'}", "--max_seq_length=64",
                      "--train_batch_size=8", "--num_train_epochs=0.1", "--do_eval=false",
                      "--strategy=mirrored", "--num_devices=2", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "training batches cut to their longest example" in proc.stderr, proc.stderr[-3000:]
    assert (tmp_path / "m" / "finetuned.weights.h5").exists()
