"""Batches cut to their longest example (FinetuningRun.trim_batches): in training
(training/finetuning.trim_batch) the loss and its gradient are those of the full
batch, for every kind of head, and the cut batches train through the real loop; in
prediction (prediction_batches, Finetuning.predict) the rows go by length and every
head's outputs are those of the full batches, in row order."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
from helpers import TOY_TASKS as TASKS
from helpers import ConvertedByAutograph, toy_trainer

L = 64  # the toy tasks' examples use 8-25 positions of it


def trainer(task, data_dir, pretrained_dir, model_dir, max_seq_length=L, **run):
    return toy_trainer(task, data_dir, pretrained_dir, model_dir, max_seq_length, **run)


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
    loss_full, count_full, grads_full = ft._forward_backward(full, seed)
    for batch in (exact, cut):
        loss_cut, count_cut, grads_cut = ft._forward_backward(batch, seed)
        np.testing.assert_allclose(loss_cut / count_cut, loss_full / count_full, rtol=1e-5)
        assert len(grads_cut) == len(grads_full)
        for g_cut, g_full, v in zip(grads_cut, grads_full, ft._variables):
            np.testing.assert_allclose(g_cut, g_full, rtol=1e-4, atol=1e-6, err_msg=v.path)
    # one real position fewer is another gradient: the comparison above can tell
    short = {k: v[:, :used - 1] if k in exact and exact[k].shape != v.shape else v
             for k, v in full.items()}
    grads_short = ft._forward_backward(short, seed)[2]
    assert not all(np.allclose(g_short, g_full, rtol=1e-4, atol=1e-6)
                   for g_short, g_full in zip(grads_short, grads_full))


def test_the_loop_trains_on_cut_batches_by_default(pretrained_dir, tmp_path, toy_sst2_dir):
    ft = trainer("sst2", toy_sst2_dir, pretrained_dir, tmp_path)
    assert ft.run.trim_batches
    lengths = {int(b["input_ids"].shape[1]) for b in ft.train_dataset(0)}
    assert lengths and max(lengths) < L  # the toy sentences are short
    ft.build_optimizer(4)
    with ConvertedByAutograph() as converted:  # backends.tensorflow.traced, plain maps
        loss = ft.train_steps(ft.train_iterator(0), 3)
    assert np.isfinite(loss) and ft.step == 3
    assert converted == []


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


@pytest.mark.slow
def test_mirrored_replicas_report_one_devices_loss(pretrained_dir, tmp_path, toy_sst2_dir):
    """The loss line of two replicas is one device's: the replicas' sums over their
    counts. The mean of each replica's own mean had halved the epoch's last step (8 real
    rows of 24: one replica held filler only), though the training was the same."""
    import re

    from helpers import run_module

    def losses(*flags):
        proc = run_module("electra_tf.run_finetuning", "--task_name=sst2",
                          f"--data_dir={toy_sst2_dir}", f"--init_checkpoint={pretrained_dir}",
                          f"--model_dir={tmp_path / str(len(flags))}", "--max_seq_length=16",
                          "--train_batch_size=24", "--num_train_epochs=1", "--do_eval=false",
                          "--log_every_steps=1", "--hidden_dropout_prob=0",
                          "--attention_probs_dropout_prob=0", *flags, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return [float(x) for x in re.findall(r"step \d+/14 loss ([\d.]+)", proc.stderr)]

    one, two = losses(), losses("--strategy=mirrored", "--num_devices=2")
    assert len(one) == len(two) == 14 and one[-1] > 0.1, (one, two)
    np.testing.assert_allclose(two, one, atol=2e-4)


def test_prediction_batches_go_by_length_and_are_cut():
    from electra_tf.training.finetuning import prediction_batches

    mask = np.zeros((7, 64), np.int32)
    for row, used in enumerate([30, 5, 64, 5, 12, 3, 40]):
        mask[row, :used] = 1
    mask[5, :3] = [1, 0, 1]  # a hole: the last marked position counts
    batches = prediction_batches(mask, 3)
    assert [rows.tolist() for rows, _ in batches] == [[5, 1, 3], [4, 0, 6], [2]]
    assert [length for _, length in batches] == [5, 40, 64]
    assert [n for _, n in prediction_batches(mask, 3, step=8)] == [8, 40, 64]
    assert [n for _, n in prediction_batches(mask, 3, step=8, min_length=20)] == [20, 40, 64]
    assert [n for _, n in prediction_batches(mask, 3, step=48)] == [48, 48, 64]  # at most 64
    off = prediction_batches(mask, 3, trim=False)
    assert [(rows.tolist(), n) for rows, n in off] == [([0, 1, 2], 64), ([3, 4, 5], 64),
                                                        ([6], 64)]
    mask[:, :60] = 1  # 94% of the positions used: the full batches, in row order
    assert [(rows.tolist(), n) for rows, n in prediction_batches(mask, 3)] == \
        [(r.tolist(), n) for r, n in off]
    assert prediction_batches(np.zeros((0, 64), np.int32), 3) == []


@pytest.mark.parametrize("task", TASKS)
def test_cut_prediction_batches_give_the_full_batches_outputs(task, request, pretrained_dir,
                                                               tmp_path):
    """Every head's outputs in row order; those with a position axis at max_seq_length,
    with the serving export's fills past a batch's length; the joint span head's beam
    (20) keeps its positions."""
    ft = trainer(task, request.getfixturevalue(TASKS[task]), pretrained_dir, tmp_path,
                 eval_batch_size=8)
    feats = ft.features("dev")[1]
    calls = []
    predict_batch = ft._predict_batch
    ft._predict_batch = lambda inputs: calls.append(inputs["input_ids"].shape) or \
        predict_batch(inputs)
    cut = ft.predict(feats)
    assert len(calls) == -(-len(feats) // 8) and all(b == 8 for b, _ in calls)
    lengths = [n for _, n in calls]
    assert max(lengths) < L and lengths == sorted(lengths), lengths
    if task == "squad_v2":
        assert min(lengths) == ft.model.head.min_positions() == 20
    ft.run = dataclasses.replace(ft.run, trim_batches=False)
    calls.clear()
    full = ft.predict(feats)
    assert {n for _, n in calls} == {L}
    assert cut.keys() == full.keys() and cut
    positional = ft._positional_outputs
    assert positional == {"sst2": set(), "ner": {"tag_logits"},
                          "squad_v2": {"start_logits"}}[task]  # the joint head: a beam
    # What the head reads: the positions a row's mask marks, and the joint head's beam
    # entries of such positions (rows with fewer than 20 fill their beam with masked
    # positions, whose order differs with the length).
    used = feats.inputs["input_mask"].astype(bool)
    kept = {k: used for k in positional}
    if task == "squad_v2":
        start = full["start_top_log_probs"] > -1000
        end = (full["end_top_log_probs"] > -1000) & start[:, :, None]
        assert 0 < start.sum() < start.size and 0 < end.sum() < end.size
        kept.update(start_top_index=start, start_top_log_probs=start, end_top_index=end,
                    end_top_log_probs=end)
    for k, v in full.items():
        assert cut[k].shape == v.shape and v.shape[0] == len(feats), k
        where = kept.get(k, np.ones(v.shape, bool))
        if np.issubdtype(v.dtype, np.integer):
            np.testing.assert_array_equal(cut[k][where], v[where], err_msg=k)
        else:
            np.testing.assert_allclose(cut[k][where], v[where], rtol=1e-4, atol=1e-4, err_msg=k)
    examples = ft.features("dev")[0]
    assert ft.task.metrics(ft.task.predictions(cut, examples, feats), examples) == \
        ft.task.metrics(ft.task.predictions(full, examples, feats), examples)


def test_a_progress_line_every_log_every_steps_and_checkpoints_at_their_own_period(
        pretrained_dir, tmp_path, toy_sst2_dir, capsys, monkeypatch):
    """--log_every_steps cuts the chunks (a Ctrl-C waits at most one), not the
    checkpoints: those stay at save_checkpoints_steps (1000) and the epoch's end.
    Also (the same run): under a scheduler, chunks slower than loop.SLOW_CHUNK_S
    (here any) get the note naming --log_every_steps, once."""
    import re

    from electra_tf.training import loop

    monkeypatch.setenv("SLURM_JOB_ID", "12")
    monkeypatch.setattr(loop, "SLOW_CHUNK_S", 0.0)
    ft = trainer("sst2", toy_sst2_dir, pretrained_dir, tmp_path / "m", log_every_steps=2,
                 train_batch_size=32)  # (10 steps: 5 chunks; at 8, 40 steps had taken 22 s)
    ft.train()
    err = capsys.readouterr().err
    found = [tuple(map(int, m.groups())) for m in
             re.finditer(r"epoch 1 step (\d+)/(\d+) loss", err)]
    notes = [line for line in err.splitlines() if line.startswith("[finetune] note: under")]
    assert len(notes) == 1 and "(2 steps)" in notes[0] and "KillWait" in notes[0]
    assert re.search(r"--log_every_steps=\d+ keeps a chunk near 10 s", notes[0])
    # Right after the third chunk (the first one traced the step, the two after it give
    # the estimate).
    assert err.index("epoch 1 step 4/") < err.index(notes[0]) < err.index("epoch 1 step 6/")
    total = found[-1][1]
    assert total >= 5
    assert [step for step, _ in found] == sorted({*range(2, total, 2), total})
    saved = sorted(p.name for p in (tmp_path / "m" / "checkpoints").glob("ckpt-*.index"))
    assert saved == [f"ckpt-{total}.index"]


def test_log_every_steps_must_be_positive():
    from electra_tf.core.config import FinetuningRun
    from electra_tf.core.errors import ConfigError

    with pytest.raises(ConfigError, match="log_every_steps must be >= 1, got 0"):
        FinetuningRun(log_every_steps=0)
