"""Neither backend resumes the other's checkpoints: one line, nothing written."""

from __future__ import annotations

import os

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
                                         r"backend cannot resume: rerun with KERAS_BACKEND=jax"):
        check_backend(jax_dir, "tensorflow")
    with pytest.raises(InputError, match=r"holds TensorFlow checkpoints .*which the JAX "
                                         r"backend cannot resume: rerun without KERAS_BACKEND"):
        check_backend(tf_dir, "jax")
    for folder, backend in ((jax_dir, "jax"), (tf_dir, "tensorflow"), (both, "jax"),
                            (both, "tensorflow"), (empty, "jax"), (empty, "tensorflow")):
        check_backend(folder, backend)


def test_tensorflow_pretraining_refuses_a_folder_the_jax_loop_wrote(make_configs, tmp_path):
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining

    config, run = make_configs(tmp_path / "model")
    folders.pretraining.write_pretraining_config(run.model_dir, config, run)
    checkpoints = folders.files.checkpoint_dir(run.model_dir)
    _touch(checkpoints, "jax-ckpt-3.npz")
    before = sorted(os.listdir(checkpoints))
    trainer = TensorFlowPretraining(config, run)
    with pytest.raises(InputError, match="holds JAX checkpoints"):
        trainer.train()
    assert sorted(os.listdir(checkpoints)) == before  # no ckpt-* beside the JAX ones
    assert trainer.step == 0


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
