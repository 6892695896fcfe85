"""`python -m electra_tf.convert` end to end, and pre-training continued from an import."""

import dataclasses
import json
import os
import shutil

import numpy as np
from conftest import run_module  # tests/conftest.py, as tests/test_demo.py does


def _run(*args):
    return run_module("electra_tf.convert", *args)


def test_interop_cli_tf1_import_and_errors(h, tmp_path, tiny_vocab, tiny_corpus):
    from electra_tf.config import PretrainingConfig, RunConfig
    from electra_tf.data.builder import BuildOptions, build_pretraining_data
    from electra_tf.tokenization import load_vocab
    from electra_tf.training import Pretraining

    vocab_size = len(load_vocab(tiny_vocab))
    weights = h.original_weights(seed=7, vocab=vocab_size)
    prefix = h.write_tf1_checkpoint(tmp_path / "electra_tiny" / "model.ckpt-1000",
                                    h.with_optimizer_state(weights))
    shutil.copyfile(tiny_vocab, tmp_path / "electra_tiny" / "vocab.txt")  # as the release zips
    out = tmp_path / "converted"
    overrides = json.dumps(h.TINY_OVERRIDES)
    # A wrong size: exit status 2 and one line naming the variable.
    bad = _run("--from=tf1", f"--checkpoint={prefix}", "--model_size=base", f"--output={out}")
    assert bad.returncode == 2, bad.stderr
    assert "not --model_size=base" in bad.stderr
    assert "electra/encoder/layer_0/attention/self/query/kernel" in bad.stderr
    ok = _run("--from=tf1", f"--checkpoint={tmp_path / 'electra_tiny'}", "--model_size=small",
              f"--model_hparam_overrides={overrides}", f"--output={out}")
    assert ok.returncode == 0, ok.stderr
    assert "--generator_hidden_size=0.75" in ok.stderr
    from electra_tf.artifacts import load_discriminator

    _, recorded_vocab = load_discriminator(str(out))
    assert recorded_vocab == str(out / "vocab.txt") and os.path.exists(recorded_vocab)

    # The TF Serving export accepts the converted folder too.
    exported = run_module("export.export_saved_model", "--task=rtd", f"--checkpoint={out}",
                          f"--model_base={tmp_path / 'serving'}", "--model_name=rtd",
                          "--max_seq_length=32")
    assert exported.returncode == 0, exported.stderr[-2000:]
    assert (tmp_path / "serving" / "rtd" / "1" / "saved_model.pb").exists()

    # run_pretraining on the converted model_dir continues from the imported weights.
    records = tmp_path / "records"
    build_pretraining_data(BuildOptions(files=(tiny_corpus,), vocab_file=tiny_vocab,
                                        output_dir=str(records), max_seq_length=32))
    with open(out / "pretraining_config.json") as f:
        config = PretrainingConfig.from_dict(json.load(f)["pretraining"])
    config = dataclasses.replace(config, max_seq_length=32, train_batch_size=4,
                                 num_train_steps=1, num_warmup_steps=0, iterations_per_loop=1)
    run = RunConfig(model_dir=str(out), train_data=f"{records}/*.tfrecord*",
                    vocab_file=tiny_vocab)
    trainer = Pretraining(config, run)
    assert trainer.restore() == 0
    table = trainer.model.discriminator.encoder.embeddings.word_embeddings.embeddings
    np.testing.assert_array_equal(table.numpy(), weights["electra/embeddings/word_embeddings"])
    trainer.train()
    assert trainer.step == 1
    assert os.path.exists(out / "final_eval.json")

