"""Fine-tuning through the CLI on a separable toy task; decay rates per variable."""

import json
import os

import pytest
from conftest import run_module


def test_cli_learns_toy_sst2_and_resumes(pretrained_dir, toy_sst2_dir, tmp_path):
    args = ["--task_name=sst2", f"--init_checkpoint={pretrained_dir}",
            f"--data_dir={toy_sst2_dir}", f"--model_dir={tmp_path}/out", "--num_train_epochs=6",
            "--learning_rate=3e-3", "--train_batch_size=16", "--max_seq_length=16",
            "--save_checkpoints_steps=20", "--do_predict"]
    proc = run_module("electra_tf.run_finetuning", *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.load(open(tmp_path / "out" / "results.json"))
    assert results["epoch_6"]["dev"]["accuracy"] >= 0.9, results
    files = os.listdir(tmp_path / "out")
    assert "finetuned.weights.h5" in files and "SST-2.tsv" in files, files
    # Running again resumes at the end: nothing to do, same results.
    again = run_module("electra_tf.run_finetuning", *args)
    assert again.returncode == 0 and "resumed from" in again.stderr, again.stderr[-2000:]


def test_layerwise_decay_rate_per_variable(pretrained_dir, tmp_path, toy_sst2_dir):
    from electra_tf.config import FinetuneRun, FinetuningConfig
    from electra_tf.finetuning.registry import get_task
    from electra_tf.finetuning.trainer import Finetuning

    config = FinetuningConfig(task_name="sst2", layerwise_lr_decay=0.8, max_seq_length=16,
                              num_train_epochs=0.1)  # one step: the optimizer gets built
    ft = Finetuning(get_task("sst2"), config,
                    FinetuneRun(model_dir=str(tmp_path), data_dir=toy_sst2_dir,
                                init_checkpoint=pretrained_dir, do_eval=False))
    ft.train()
    n = ft.encoder_config.num_hidden_layers
    seen = set()
    for v in ft.model.trainable_variables:
        m = ft.optimizer.lr_multiplier(v)
        if "/embeddings" in v.path:
            depth = 0
        elif "/layer_" in v.path:
            depth = int(v.path.split("/layer_")[1].split("/")[0]) + 1
        else:
            assert "task_specific/" in v.path, v.path
            depth = n + 2
        assert m == pytest.approx(0.8 ** (n + 2 - depth)), (v.path, m)
        seen.add(depth)
    assert seen == set(range(n + 1)) | {n + 2}  # embeddings, every layer, the head


def test_checkpoint_of_another_size_is_a_clear_error(pretrained_dir, toy_sst2_dir, tmp_path):
    proc = run_module("electra_tf.run_finetuning", "--task_name=sst2", "--model_size=base",
                      f"--init_checkpoint={pretrained_dir}", f"--data_dir={toy_sst2_dir}",
                      f"--model_dir={tmp_path}/o")
    assert proc.returncode == 2 and "not --model_size=base" in proc.stderr, proc.stderr[-2000:]


def test_cli_learns_toy_ner(pretrained_dir, toy_ner_dir, tmp_path):
    proc = run_module("electra_tf.run_finetuning", "--flagfile=configs/ner.flags",
                      f"--init_checkpoint={pretrained_dir}", f"--data_dir={toy_ner_dir}",
                      f"--model_dir={tmp_path}/out", "--num_train_epochs=6",
                      "--learning_rate=3e-3", "--train_batch_size=16", "--max_seq_length=16")
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.load(open(tmp_path / "out" / "results.json"))
    assert results["epoch_6"]["dev"]["f1"] >= 0.9, results
    config = json.load(open(tmp_path / "out" / "finetuning_config.json"))
    assert config["label_names"][0] == "O" and "B-ORG" in config["label_names"]
    assert os.path.exists(tmp_path / "out" / "ner_dev_predictions.txt")


def test_cli_learns_toy_squad_v2(pretrained_dir, toy_squad_dir, tmp_path):
    proc = run_module("electra_tf.run_finetuning", "--flagfile=configs/squad_v2.flags",
                      f"--init_checkpoint={pretrained_dir}", f"--data_dir={toy_squad_dir}",
                      f"--model_dir={tmp_path}/out", "--num_train_epochs=3",
                      "--learning_rate=3e-3", "--train_batch_size=16", "--max_seq_length=24")
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.load(open(tmp_path / "out" / "results.json"))
    assert results["epoch_3"]["dev"]["f1"] >= 90.0, results
    assert os.path.exists(tmp_path / "out" / "squad_v2_dev_predictions.json")
    assert os.path.exists(tmp_path / "out" / "squad_v2_dev_null_odds.json")


def _weights(ft):
    import numpy as np

    return [np.array(v.numpy()) for v in ft.model.trainable_variables]


def test_interrupted_and_resumed_equals_uninterrupted(pretrained_dir, toy_sst2_dir, tmp_path):
    import numpy as np

    from electra_tf.config import FinetuneRun, FinetuningConfig
    from electra_tf.finetuning.registry import get_task
    from electra_tf.finetuning.trainer import Finetuning

    config = FinetuningConfig(task_name="sst2", max_seq_length=16, num_train_epochs=2,
                              train_batch_size=32, save_checkpoints_steps=4, seed=1)

    def make(name):
        return Finetuning(get_task("sst2"), config, FinetuneRun(
            model_dir=str(tmp_path / name), data_dir=toy_sst2_dir,
            init_checkpoint=pretrained_dir, do_eval=False))

    straight = make("a")
    straight.train()
    first = make("b")
    first.train(stop_at_step=13)  # mid-epoch 2, between checkpoints: saved at 13
    resumed = make("b")
    resumed.train()
    assert int(resumed.optimizer.iterations.numpy()) == 20
    for x, y in zip(_weights(straight), _weights(resumed)):
        np.testing.assert_array_equal(x, y)


def test_jit_and_bf16_fine_tuning_runs(pretrained_dir, toy_sst2_dir, tmp_path):
    import keras

    from electra_tf.config import FinetuneRun, FinetuningConfig
    from electra_tf.finetuning.registry import get_task
    from electra_tf.finetuning.trainer import Finetuning

    try:
        ft = Finetuning(get_task("sst2"), FinetuningConfig(
            task_name="sst2", max_seq_length=16, num_train_epochs=1, learning_rate=3e-3),
            FinetuneRun(model_dir=str(tmp_path), data_dir=toy_sst2_dir,
                        init_checkpoint=pretrained_dir, jit_compile=True, mixed_precision="bf16"))
        results = ft.train()
        assert 0.0 <= results["epoch_1"]["dev"]["accuracy"] <= 1.0
        assert ft.model.encoder.compute_dtype == "bfloat16"
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
