"""Fine-tuning's warmup is warmup_proportion * total_steps kept as a float, as the
original's create_optimizer (model/optimization.py:
`warmup_steps = max(num_train_steps * warmup_proportion, warmup_steps)`, then
`lr *= min(1, global_step / warmup_steps)` in float32); truncating it to an integer
warmed short runs up 4-18% faster than the original's schedule."""

import numpy as np
from helpers import finetuning_from_flags


def original_schedule(lr: float, num_train_steps: int, warmup_proportion: float, step):
    """The original's rate at `step`: tf.train.polynomial_decay (power 1, end 0, no
    cycle) times the warmup factor, as in google-research/electra's create_optimizer."""
    decayed = lr * (1.0 - np.minimum(step, num_train_steps) / num_train_steps)
    warmup_steps = max(num_train_steps * warmup_proportion, 0)
    return decayed * np.minimum(1.0, step / warmup_steps)


def test_the_warmup_is_the_originals_float(pretrained_dir, toy_sst2_dir, tmp_path):
    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    trainer = TensorFlowFinetuning(*finetuning_from_flags(
        "--task_name=sst2", f"--init_checkpoint={pretrained_dir}",
        f"--data_dir={toy_sst2_dir}", f"--model_dir={tmp_path}/ft", "--max_seq_length=16",
        "--learning_rate=1e-3", "--warmup_proportion=0.1", "--layerwise_lr_decay=0"))
    total = 37  # a warmup of 3.7 steps (the integer 3 before)
    schedule = trainer.build_optimizer(total)._learning_rate  # the schedule object
    steps = np.arange(0, total + 3)
    got = np.array([float(schedule(s)) for s in steps])
    want = original_schedule(1e-3, total, 0.1, steps.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9)
    assert got[3] < 0.95 * 1e-3 * (1 - 3 / total)  # still warming up at step 3
