"""Each objective of the paper's ablations trains through the CLI, and its
checkpoint is one that fine-tuning loads."""

import json

import numpy as np
import pytest

from electra_tf.objectives.variants import OBJECTIVES

VARIANTS = [(o, "joint") for o in sorted(OBJECTIVES)] + [("electra", "two_stage"),
                                                        ("electra", "adversarial")]


@pytest.mark.parametrize("objective,algorithm", VARIANTS)
def test_each_variant_trains_through_the_cli_and_fine_tunes(objective, algorithm, tiny_records,
                                                            tmp_path):
    from conftest import run_module

    from electra_tf.artifacts import load_discriminator
    from electra_tf.tokenization import load_vocab

    tiny = {"embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 2,
            "num_attention_heads": 2, "intermediate_size": 32}
    gen_size = "0.5"
    if algorithm == "two_stage":  # G and D of one size
        tiny.update(num_attention_heads=1, intermediate_size=64)
        gen_size = "1.0"
    vocab = tiny_records["vocab"]
    proc = run_module(
        "electra_tf.run_pretraining", f"--objective={objective}",
        f"--training_algorithm={algorithm}", f"--generator_hidden_size={gen_size}",
        f"--train_data={tiny_records['train']}", f"--eval_data={tiny_records['eval']}",
        f"--vocab_file={vocab}", f"--vocab_size={len(load_vocab(vocab))}",
        f"--model_dir={tmp_path}", "--model_size=tiny",
        f"--model_hparam_overrides={json.dumps(tiny)}", "--max_seq_length=32",
        "--train_batch_size=8", "--eval_batch_size=8",
        "--num_train_steps=2", "--iterations_per_loop=1", "--num_warmup_steps=1",
        "--num_eval_steps=1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    final = json.load(open(tmp_path / "final_eval.json"))
    assert np.isfinite(final["loss"]) and np.isfinite(final["mlm_loss"])
    discriminator, _ = load_discriminator(str(tmp_path))  # what run_finetuning loads
    # Every variant keeps a model of D's size: BERT too, whatever generator_hidden_size.
    assert discriminator.config.hidden_size == 16
