"""Each epoch trains on every window once, as the original does: its train file is
padded to a multiple of the batch with rows its loss leaves out (task_id outside the
one-hot), and it runs n_padded / batch steps an epoch. The last batch of an epoch is
filled with rows of zeros of example_weight 0, which add nothing to the loss, its
gradient or the mean the loop reports."""

import collections
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from helpers import TOY_TASKS, finetuning_from_flags, toy_trainer

from electra_tf.tasks.losses import (
    EXAMPLE_WEIGHT,
    classification_loss,
    example_count,
    regression_loss,
    span_loss,
    tagging_loss,
)

L = 32
BATCH = 36  # 320 sst2, 240 ner windows: 8 and 24 rows of the last batch are real


def test_a_zero_weight_row_adds_nothing_to_any_loss():
    rng = np.random.default_rng(0)
    w = np.float32([1, 1, 0])
    logits = rng.normal(size=(3, 4)).astype(np.float32)
    label = np.int32([0, 3, 2])
    np.testing.assert_allclose(classification_loss(logits, label, w),
                               classification_loss(logits[:2], label[:2]), rtol=1e-6)
    x, y = np.float32([0.5, 2.0, 9.0]), np.float32([1.0, 1.0, 0.0])
    np.testing.assert_allclose(regression_loss(x, y, w), regression_loss(x[:2], y[:2]))
    s, e = rng.normal(size=(2, 3, 5)).astype(np.float32)
    pos, ans = np.int32([1, 4, 0]), rng.normal(size=3).astype(np.float32)
    imp = np.float32([0, 1, 0])
    np.testing.assert_allclose(span_loss(s, e, pos, pos, ans, imp, w),
                               span_loss(s[:2], e[:2], pos[:2], pos[:2], ans[:2], imp[:2]),
                               rtol=1e-6)
    tags = rng.normal(size=(3, 5, 4)).astype(np.float32)
    ids, tw = np.int32(rng.integers(0, 4, (3, 5))), np.ones((3, 5), np.float32)
    np.testing.assert_allclose(tagging_loss(tags, ids, tw, w),
                               tagging_loss(tags[:2], ids[:2], tw[:2]), rtol=1e-6)
    assert float(example_count({"label": label, EXAMPLE_WEIGHT: w}, "label")) == 2.0
    assert float(example_count({"label": label}, "label")) == 3.0
    # a replica handed only padding rows reports a mean of 0, not 0 / 0
    assert float(example_count({"label": label, EXAMPLE_WEIGHT: 0 * w}, "label")) == 1.0


def test_a_runs_steps_round_down_as_the_originals():
    from electra_tf.training.finetuning import total_steps

    # preprocessing.py: int(n_padded // batch_size * num_train_epochs)
    for per_epoch, epochs in ((78, 10), (230, 3), (230, 0.7), (231, 0.7), (7, 0.5), (3, 1 / 3)):
        assert total_steps(per_epoch, epochs) == int(per_epoch * epochs)
    assert (total_steps(231, 0.7), total_steps(7, 0.5)) == (161, 3)  # round(): 162, 4


@pytest.mark.parametrize("task", TOY_TASKS)
def test_an_epoch_is_every_window_once_and_the_filled_rows_train_nothing(
        task, request, pretrained_dir, tmp_path):
    from electra_tf.training.finetuning import steps_in_epoch

    ft = toy_trainer(task, request.getfixturevalue(TOY_TASKS[task]), pretrained_dir, tmp_path,
                     L, train_batch_size=BATCH, trim_batches=False)
    feats = ft.features("train")[1]
    n = len(feats)
    assert n % BATCH, f"{task}: {n} windows fill every batch: the test needs a partial one"
    batches = list(ft.train_dataset(0))
    assert len(batches) == steps_in_epoch(n, BATCH) == -(-n // BATCH)
    assert all(int(b["input_ids"].shape[0]) == BATCH for b in batches)
    weights = np.concatenate([b[EXAMPLE_WEIGHT].numpy() for b in batches])
    assert weights.sum() == n and (weights[:n] == 1).all() and (weights[n:] == 0).all()
    rows = collections.Counter(
        bytes(r) for b in batches for r, w in zip(b["input_ids"].numpy(), b[EXAMPLE_WEIGHT])
        if w)
    assert rows == collections.Counter(bytes(r) for r in feats.inputs["input_ids"])
    last = batches[-1]
    filled = last[EXAMPLE_WEIGHT].numpy() == 0
    for k, v in last.items():
        assert not v.numpy()[filled].any(), k
    # The last batch's loss, reported mean and gradient are those of its real rows.
    seed = tf.constant([1, 2], tf.int32)
    real = {k: v[~filled] for k, v in last.items()}
    loss_full, count_full, grads_full = ft._forward_backward(last, seed)
    loss_real, count_real, grads_real = ft._forward_backward(real, seed)
    np.testing.assert_allclose(loss_full / count_full, loss_real / count_real, rtol=1e-5)
    assert float(count_full) == float(count_real)  # (examples, or tokens for ner)
    # a replica given filler rows alone counts none (loss_count's floor is 1), so that
    # the replicas' sums over their counts are one device's mean
    filler = {k: v[filled] for k, v in last.items()}
    assert float(ft._forward_backward(filler, seed)[1]) == 0.0
    for g_full, g_real, v in zip(grads_full, grads_real, ft._variables):
        np.testing.assert_allclose(g_full, g_real, rtol=1e-4, atol=1e-6, err_msg=v.path)
    # and a real row left out would change them: the comparison can tell
    weight = last[EXAMPLE_WEIGHT].numpy().copy()
    weight[0] = 0.0
    other = dict(last, **{EXAMPLE_WEIGHT: tf.constant(weight)})
    grads_other = ft._forward_backward(other, seed)[2]
    assert not all(np.allclose(g_other, g_real, rtol=1e-4, atol=1e-6)
                   for g_other, g_real in zip(grads_other, grads_real))


@pytest.mark.slow  # four runs through the command (end to end)
def test_a_train_split_smaller_than_a_batch_trains_one_filled_batch(
        pretrained_dir, tmp_path):
    """The original trains on it (one padded batch an epoch); it had been refused."""
    from helpers import finetune

    data = tmp_path / "data"
    data.mkdir()
    rows = ["sentence\tlabel"] + [f"a replaced {w}\t{i % 2}" for i, w in
                                  enumerate(["model", "token", "generator"] * 3)]
    for split in ("train", "dev"):
        (data / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    _, results = finetune("--task_name=sst2", f"--init_checkpoint={pretrained_dir}",
                          f"--data_dir={data}", "--max_seq_length=16", "--num_train_epochs=2",
                          "--train_batch_size=32", f"--model_dir={tmp_path / 'out'}")
    assert sorted(results) == ["epoch_1", "epoch_2"]
    record = json.loads((tmp_path / "out" / "finetuning_config.json").read_text())
    assert record["total_steps"] == 2
    # the rates used, where the flags left them to the size (a custom size takes Small's)
    assert record["finetuning"]["learning_rate"] == 0.0
    assert (record["learning_rate"], record["layerwise_lr_decay"]) == (1e-4, 0.8)
    # TensorBoard, as the original's Estimator: the loss at each progress line, and each
    # epoch's dev scores at its last step
    written = {name: _scalars(tmp_path / "out" / name) for name in ("train", "eval")}
    assert sorted(written["train"]) == ["examples_per_second", "loss"]
    assert [step for step, _ in written["train"]["loss"]] == [1, 2]
    epochs = [(1, pytest.approx(results["epoch_1"]["dev"]["accuracy"])),
              (2, pytest.approx(results["epoch_2"]["dev"]["accuracy"]))]
    assert written["eval"] == {"dev/accuracy": epochs}
    flags = ["--task_name=sst2", f"--init_checkpoint={pretrained_dir}", f"--data_dir={data}",
             "--max_seq_length=16", "--num_train_epochs=2", "--train_batch_size=32"]
    # a rerun of the finished run writes nothing (it had added two empty event files);
    # an evaluation in place adds its scores at the step evaluated
    files = {n: sorted(os.listdir(tmp_path / "out" / n)) for n in ("train", "eval")}
    finetune(*flags, f"--model_dir={tmp_path / 'out'}")
    assert {n: sorted(os.listdir(tmp_path / "out" / n)) for n in files} == files
    _, evaluated = finetune(*flags, f"--model_dir={tmp_path / 'out'}", "--do_train=false")
    assert _scalars(tmp_path / "out" / "eval")["dev/accuracy"] == epochs + [
        (2, pytest.approx(evaluated["eval"]["dev"]["accuracy"]))]
    # an epoch whose evaluation a resumed run makes up (killed between the epoch's
    # checkpoint and its evaluation) is in eval/ too (it had been in results.json only)
    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    TensorFlowFinetuning(*finetuning_from_flags(*flags, f"--model_dir={tmp_path / 'cut'}")
                         ).train(stop_at_step=1)
    kept = json.loads((tmp_path / "cut" / "results.json").read_text())
    del kept["epoch_1"]
    (tmp_path / "cut" / "results.json").write_text(json.dumps(kept))
    shutil.rmtree(tmp_path / "cut" / "eval")
    _, resumed = finetune(*flags, f"--model_dir={tmp_path / 'cut'}")
    assert [step for step, _ in _scalars(tmp_path / "cut" / "eval")["dev/accuracy"]] == [1, 2]
    assert sorted(resumed) == ["epoch_1", "epoch_2"]
    # killed as results.json is written: the epoch's point is written before it (it had
    # been written after, and a resumed run that found the epoch in results.json never
    # wrote it)
    trainer = TensorFlowFinetuning(*finetuning_from_flags(
        *flags, f"--model_dir={tmp_path / 'killed'}"))

    def killed(results):
        raise SystemExit("killed")

    trainer._save_results = killed
    with pytest.raises(SystemExit):
        trainer.train()
    assert [step for step, _ in _scalars(tmp_path / "killed" / "eval")["dev/accuracy"]] == [1]


def _scalars(folder) -> dict:
    """{tag: [(step, value)]} of a summaries folder, as TensorBoard reads it."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in events.Tensors(tag)]
            for tag in events.Tags()["tensors"]}
