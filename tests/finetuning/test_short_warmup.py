"""The short-warmup trap: the original's Adam (no bias correction) with a short warmup
leaves a short pre-training run's model unable to fine-tune. The tiny preset defaults
to bias correction, and a paper-size run with a short warmup is warned at start-up."""

import json

import pytest
from helpers import finetune, pretraining_from_flags

from electra_tf.core.config import PretrainingConfig


def test_the_tiny_preset_defaults_to_bias_correction_and_short_warmups_are_warned():
    tiny = PretrainingConfig(model_size="tiny", num_warmup_steps=5)
    assert tiny.adam_bias_correction is None and tiny.resolved_adam_bias_correction
    assert tiny.short_warmup_warning() == ""
    small = PretrainingConfig(model_size="small", num_warmup_steps=100)
    assert not small.resolved_adam_bias_correction  # the paper's sizes: the original's Adam
    assert small.short_warmup_warning().startswith(
        "warning: --num_warmup_steps=100 with the original's Adam (no bias correction)")
    assert "--adam_bias_correction" in small.short_warmup_warning()
    assert PretrainingConfig(model_size="small").short_warmup_warning() == ""  # 10,000 steps
    off = PretrainingConfig(model_size="tiny", num_warmup_steps=5, adam_bias_correction=False)
    assert not off.resolved_adam_bias_correction and off.short_warmup_warning()


def test_the_flag_is_unset_true_or_false(tiny_vocab):
    base = ["--train_data=x", f"--vocab_file={tiny_vocab}", "--model_dir=m", "--model_size=tiny"]
    for extra, want in (([], None), (["--adam_bias_correction"], True),
                        (["--noadam_bias_correction"], False)):
        config, _ = pretraining_from_flags(*base, *extra)
        assert config.adam_bias_correction is want


def keyword_task(corpus: str, folder) -> str:
    """SST-2 layout: corpus sentences with "excellent" (label 1) or "terrible" (0) put in."""
    import random

    lines = [line.strip() for line in open(corpus, encoding="utf-8")
             if 5 <= len(line.split()) <= 20]
    rng = random.Random(0)
    rng.shuffle(lines)
    folder.mkdir()
    for split, (a, b) in (("train", (0, 800)), ("dev", (800, 1000))):
        rows = ["sentence\tlabel"]
        for line in lines[a:b]:
            words, label = line.replace("\t", " ").split(), rng.random() < 0.5
            words.insert(rng.randint(0, len(words)), "excellent" if label else "terrible")
            rows.append(" ".join(words) + f"\t{int(label)}")
        (folder / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return str(folder)


@pytest.mark.slow
def test_a_30_step_tiny_run_with_default_flags_fine_tunes(tmp_path):
    """The issue's case, on the demo's real text (the standard library's docstrings): the
    tiny preset, 30 steps, 5 warmup steps, no optimizer flag, then one epoch of a keyword
    task. Measured: 1.0 (the original's Adam, --noadam_bias_correction: 0.52, chance)."""
    from electra_tf.data.demo_corpus import prepare_demo_data
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining

    demo = prepare_demo_data(str(tmp_path / "demo"), 4000, 64, corpus="stdlib")
    task = keyword_task(str(tmp_path / "demo" / "corpus.txt"), tmp_path / "keyword")
    accuracy = {}
    for name, flags in (("default", []), ("original_adam", ["--noadam_bias_correction"])):
        model_dir = tmp_path / name
        TensorFlowPretraining(*pretraining_from_flags(
            f"--train_data={demo['train_data']}", f"--vocab_file={demo['vocab_file']}",
            f"--vocab_size={demo['vocab_size']}", f"--model_dir={model_dir}",
            "--model_size=tiny", "--max_seq_length=64", "--num_train_steps=30",
            "--num_warmup_steps=5", "--iterations_per_loop=10", "--save_checkpoints_steps=30",
            "--seed=1", *flags)).train()
        _, results = finetune("--task_name=sst2", f"--init_checkpoint={model_dir}",
                              f"--data_dir={task}", f"--model_dir={tmp_path}/{name}_ft",
                              "--max_seq_length=64", "--seed=1", "--num_train_epochs=1",
                              "--do_predict=false")
        accuracy[name] = results["epoch_1"]["dev"]["accuracy"]
    recorded = json.load(open(tmp_path / "default" / "pretraining_config.json"))
    assert recorded["pretraining"]["adam_bias_correction"] is None  # unset: tiny's default
    assert accuracy["default"] >= 0.9, accuracy
    assert accuracy["original_adam"] < 0.7, accuracy  # the trap this default avoids
