"""Tiny pre-training fixtures: records from the tiny corpus, a tiny config, one
finished run that several tests read."""

import dataclasses

import numpy as np
import pytest
from helpers import RECORDS_SEQ, TINY_MODEL

from electra_tf.core.config import PretrainingConfig, PretrainingRun
from electra_tf.data.builder import BuildOptions, build_pretraining_data

L = RECORDS_SEQ


@pytest.fixture(scope="session")
def tiny_records(tiny_corpus, tiny_vocab, tmp_path_factory):
    out = tmp_path_factory.mktemp("records")
    build_pretraining_data(BuildOptions(files=(tiny_corpus,), vocab_file=tiny_vocab,
                                        output_dir=str(out), max_seq_length=L, num_shards=4))
    return {"train": f"{out}/pretrain_data.tfrecord-0000[0-2]*",
            "eval": f"{out}/pretrain_data.tfrecord-00003*", "vocab": tiny_vocab}


def tiny_configs(records, model_dir, run_overrides=None, **overrides):
    """(PretrainingConfig, PretrainingRun) of a 6-step tiny run on `records`, saving at 3 and 6."""
    from electra_tf.text.vocab import load_vocab

    values = dict(model_size="tiny", model_hparam_overrides=TINY_MODEL,
                  vocab_size=len(load_vocab(records["vocab"])), max_seq_length=L,
                  generator_hidden_size=0.5, learning_rate=1e-3, num_warmup_steps=2,
                  train_batch_size=8, eval_batch_size=8, num_train_steps=6,
                  iterations_per_loop=3, save_checkpoints_steps=3, num_eval_steps=2, seed=3)
    values.update(overrides)
    run = PretrainingRun(model_dir=str(model_dir), train_data=records["train"],
                         eval_data=records["eval"], vocab_file=records["vocab"])
    run = dataclasses.replace(run, **(run_overrides or {}))
    return PretrainingConfig(**values), run


@pytest.fixture
def models_built(monkeypatch):
    """The pre-training models built in this test (none, when a run is refused early)."""
    from electra_tf.training import pretraining as loop

    built, real = [], loop.ElectraPretrainer

    def record(*args, **kwargs):
        built.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "ElectraPretrainer", record)
    return built


@pytest.fixture
def make_configs(tiny_records, tmp_path):
    def make(model_dir=None, run_overrides=None, **overrides):
        return tiny_configs(tiny_records, model_dir or tmp_path / "model", run_overrides,
                            **overrides)

    return make


@pytest.fixture(scope="session")
def trained_run(tiny_records, tmp_path_factory):
    """make_configs' run, trained to the end once for every test that only reads it (the
    folder must stay as it is): {"config", "run", "final" (its final eval), "weights"
    (its trainable variables), "model_dir"}. The tests that use it run on one xdist
    worker (tests/conftest.py, SHARED_FIXTURES), so that it is trained once."""
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining

    model_dir = tmp_path_factory.mktemp("trained_run") / "model"
    config, run = tiny_configs(tiny_records, model_dir)
    trainer = TensorFlowPretraining(config, run)
    final = trainer.train()
    return {"config": config, "run": run, "final": final, "model_dir": model_dir,
            "weights": [np.array(v.numpy()) for v in trainer.model.trainable_variables]}
