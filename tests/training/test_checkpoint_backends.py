"""Neither backend resumes the other's checkpoints: one line, nothing written."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from electra_tf import folders
from electra_tf.core.errors import InputError
from electra_tf.training.checkpoints import check_backend


def _touch(folder, name):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        np.savez(f, x=np.zeros(1))


def test_check_backend_refuses_only_the_other_backends_folder(tmp_path):
    jax_dir, tf_dir, both, empty = (str(tmp_path / n) for n in ("jax", "tf", "both", "empty"))
    _touch(jax_dir, "jax-ckpt-6.npz")
    _touch(tf_dir, "ckpt-6.index")
    _touch(both, "jax-ckpt-6.npz")
    _touch(both, "ckpt-6.index")
    with pytest.raises(InputError, match=r"holds JAX checkpoints .*which the TensorFlow "
                                         r"backend cannot read: rerun with KERAS_BACKEND=jax"):
        check_backend(jax_dir, "tensorflow")
    with pytest.raises(InputError, match=r"holds TensorFlow checkpoints .*which the JAX "
                                         r"backend cannot read: rerun without KERAS_BACKEND"):
        check_backend(tf_dir, "jax")
    for folder, backend in ((jax_dir, "jax"), (tf_dir, "tensorflow"), (both, "jax"),
                            (both, "tensorflow"), (empty, "jax"), (empty, "tensorflow")):
        check_backend(folder, backend)


def test_tensorflow_pretraining_refuses_a_folder_the_jax_loop_wrote(make_configs, tmp_path,
                                                                    models_built):
    """Before the model is built (its size and FLOPs lines had come first)."""
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining

    config, run = make_configs(tmp_path / "model")
    folders.pretraining.write_pretraining_config(run.model_dir, config, run)
    checkpoints = folders.files.checkpoint_dir(run.model_dir)
    _touch(checkpoints, "jax-ckpt-3.npz")
    before = sorted(os.listdir(checkpoints))
    with pytest.raises(InputError, match="holds JAX checkpoints"):
        TensorFlowPretraining(config, run)
    assert sorted(os.listdir(checkpoints)) == before  # no ckpt-* beside the JAX ones
    assert models_built == []


def test_tensorflow_finetuning_refuses_a_folder_the_jax_loop_wrote(tmp_path):
    import keras

    from electra_tf.training.checkpoints import TensorFlowCheckpoints

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    folder = str(tmp_path / "checkpoints")
    _touch(folder, "jax-ckpt-3.npz")
    with pytest.raises(InputError, match="holds JAX checkpoints"):
        TensorFlowCheckpoints(model, optimizer, folder, 3).restore()
    assert os.listdir(folder) == ["jax-ckpt-3.npz"]


@pytest.mark.parametrize("kind", ["tensorflow", "npz"])
def test_a_dropout_turned_off_or_on_resumes_and_other_shapes_do_not(kind, tmp_path):
    """Keras' Dropout has a seed-generator state only at a rate > 0: a run that continues
    another's checkpoints with dropout off (or on) restores every weight (#54: refused
    as a misfit before); any other difference is still refused."""
    import keras

    from electra_tf.core.errors import ConfigError
    from electra_tf.training.checkpoints import NpzCheckpoints, TensorFlowCheckpoints

    def build(rate, width=4, seed=0):
        keras.utils.set_random_seed(seed)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(width, name="dense"),
                                  keras.layers.Dropout(rate, seed=1, name="dropout")],
                                 name="model")
        optimizer = keras.optimizers.Adam()
        optimizer.build(model.trainable_variables)
        return model, optimizer

    kinds = {"tensorflow": TensorFlowCheckpoints, "npz": NpzCheckpoints}
    for saved_rate, resumed_rate in ((0.1, 0.0), (0.0, 0.1)):
        folder = str(tmp_path / f"{kind}-{saved_rate}")
        model, optimizer = build(saved_rate)
        assert kinds[kind](model, optimizer, folder, 3).save()
        resumed, resumed_optimizer = build(resumed_rate, seed=5)
        assert kinds[kind](resumed, resumed_optimizer, folder, 3).restore()
        for a, b in zip(model.trainable_variables, resumed.trainable_variables):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        wider, wider_optimizer = build(resumed_rate, width=5)
        with pytest.raises(ConfigError, match="its variables do not fit this model"):
            kinds[kind](wider, wider_optimizer, folder, 3).restore()


@pytest.mark.parametrize("state", ["missing", "names_a_gone_save"])
def test_a_lost_checkpoint_state_file_resumes_from_the_latest_save_found(state, tmp_path,
                                                                       capfd, caplog):
    """Without tf.train's `checkpoint` file (a copy of the ckpt-* files alone), or with
    one naming a save that is gone, the run had started again from step 0 and written
    over the saves it did not restore."""
    import keras

    from electra_tf.training.checkpoints import TensorFlowCheckpoints

    def build(seed):
        keras.utils.set_random_seed(seed)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, name="dense")],
                                 name="model")
        optimizer = keras.optimizers.Adam()
        optimizer.build(model.trainable_variables)
        return model, optimizer

    folder = str(tmp_path / "checkpoints")
    model, optimizer = build(0)
    saves = TensorFlowCheckpoints(model, optimizer, folder, 5)
    for step in (10, 20):
        optimizer.iterations.assign(step)
        saves.save()
    state_file = os.path.join(folder, "checkpoint")
    if state == "missing":
        os.remove(state_file)
    else:
        with open(state_file, "w") as f:
            f.write('model_checkpoint_path: "ckpt-40"\n')
    resumed, resumed_optimizer = build(7)
    path = TensorFlowCheckpoints(resumed, resumed_optimizer, folder, 5).restore()
    assert os.path.basename(path) == "ckpt-20"
    assert int(resumed_optimizer.iterations.numpy()) == 20
    for a, b in zip(model.trainable_variables, resumed.trainable_variables):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    err = capfd.readouterr().err
    what = "is missing" if state == "missing" else "names no save that is there"
    assert f"checkpoint {what}; resuming from" in err
    assert "Couldn't match files" not in caplog.text  # tf.train's error line beside ours
    # the state file now names the save found (and lists the others: below)
    assert os.path.basename(tf_state(folder).model_checkpoint_path) == "ckpt-20"
    # a later save the disk filled up during: its .index cut short under its final name,
    # no state file naming it; passed over (the rerun had refused it for good)
    os.remove(state_file)
    with open(os.path.join(folder, "ckpt-20.index"), "rb") as f:
        index = f.read()
    with open(os.path.join(folder, "ckpt-30.index"), "wb") as f:
        f.write(index[:len(index) // 2])
    again, again_optimizer = build(8)
    again_saves = TensorFlowCheckpoints(again, again_optimizer, folder, 5)
    path = again_saves.restore()
    assert os.path.basename(path) == "ckpt-20"
    assert f"passing over {os.path.join(folder, 'ckpt-30')}, a save that did not finish" in (
        capfd.readouterr().err)
    again_optimizer.iterations.assign(25)  # and it saves on: the state file names that
    assert os.path.basename(again_saves.save()) == "ckpt-25"
    assert os.path.basename(again_saves.latest) == "ckpt-25"
    assert "Couldn't match files" not in caplog.text
    # the saves found are kept as the state file's had been: the newest max_to_keep (here
    # 2) of them stay as it saves on (the manager had tracked only those it saved itself,
    # and the ones found stayed on the disk for good)
    os.remove(os.path.join(folder, "ckpt-30.index"))
    os.remove(state_file)
    for name in os.listdir(folder):  # (copied from a machine whose clock runs ahead: the
        ahead = time.time() + 3600   # manager had dropped saves of a later time)
        os.utime(os.path.join(folder, name), (ahead, ahead))
    kept, kept_optimizer = build(9)
    kept_saves = TensorFlowCheckpoints(kept, kept_optimizer, folder, 2)
    assert os.path.basename(kept_saves.restore()) == "ckpt-25"
    for step in (35, 45):
        kept_optimizer.iterations.assign(step)
        kept_saves.save()
    assert sorted(n for n in os.listdir(folder) if n.endswith(".index")) == [
        "ckpt-35.index", "ckpt-45.index"]


def tf_state(folder):
    import tensorflow as tf

    return tf.train.get_checkpoint_state(folder)


def test_a_tensorflow_save_is_put_on_the_disk(tmp_path, monkeypatch):
    """tf.train renames a save's files and its `checkpoint` state into place without an
    fsync (an strace showed none): a power loss could leave the state naming data that
    never reached the disk. Each save's files and the state file are now synced."""
    import keras

    from electra_tf.training import checkpoints

    synced = []
    monkeypatch.setattr(checkpoints, "sync_file", lambda p: synced.append(os.path.basename(p)))
    monkeypatch.setattr(checkpoints, "sync_folder", lambda p: synced.append(p))
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, name="dense")])
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    folder = str(tmp_path / "checkpoints")
    optimizer.iterations.assign(10)
    checkpoints.TensorFlowCheckpoints(model, optimizer, folder, 5).save()
    assert synced == ["ckpt-10.data-00000-of-00001", "ckpt-10.index", "checkpoint", folder]
