"""Tiny pre-training fixtures: records from the tiny corpus, a tiny config."""

import dataclasses

import pytest

from electra_tf.config import PretrainingConfig, RunConfig
from electra_tf.data.builder import BuildOptions, build_pretraining_data

L = 32
TINY_MODEL = {"embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 2,
              "num_attention_heads": 2, "intermediate_size": 32}


@pytest.fixture(scope="session")
def tiny_records(tiny_corpus, tiny_vocab, tmp_path_factory):
    out = tmp_path_factory.mktemp("records")
    build_pretraining_data(BuildOptions(files=(tiny_corpus,), vocab_file=tiny_vocab,
                                        output_dir=str(out), max_seq_length=L, num_shards=4))
    return {"train": f"{out}/pretrain_data.tfrecord-0000[0-2]*",
            "eval": f"{out}/pretrain_data.tfrecord-00003*", "vocab": tiny_vocab}


@pytest.fixture
def make_configs(tiny_records, tmp_path):
    from electra_tf.tokenization import load_vocab

    vocab_size = len(load_vocab(tiny_records["vocab"]))

    def make(model_dir=None, run_overrides=None, **overrides):
        values = dict(model_size="tiny", model_hparam_overrides=TINY_MODEL,
                      vocab_size=vocab_size, max_seq_length=L, generator_hidden_size=0.5,
                      learning_rate=1e-3, num_warmup_steps=2, train_batch_size=8,
                      eval_batch_size=8, num_train_steps=6, iterations_per_loop=3,
                      save_checkpoints_steps=3, num_eval_steps=2, seed=3)
        values.update(overrides)
        run = RunConfig(model_dir=str(model_dir or tmp_path / "model"),
                        train_data=tiny_records["train"], eval_data=tiny_records["eval"],
                        vocab_file=tiny_records["vocab"])
        run = dataclasses.replace(run, **(run_overrides or {}))
        return PretrainingConfig(**values), run

    return make
