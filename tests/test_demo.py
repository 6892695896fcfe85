"""The README's demo (slow), run as .ci/setup_commands writes it, for its first 600 steps:
it must build its data in a fresh folder and learn."""

import json
import shlex

import pytest
from helpers import run_module, setup_commands


def demo_command() -> tuple[str, list[str]]:
    """The module and flags the README's demo command runs (.ci/setup_commands), after
    its install: `.venv/bin/python -m MODULE FLAGS...`."""
    python, option, module, *flags = shlex.split(setup_commands()[0].split(" && ")[-1])
    assert (python, option) == (".venv/bin/python", "-m"), setup_commands()[0]
    return module, flags


def test_the_demo_command_is_read_from_the_one_place():
    module, flags = demo_command()
    assert module == "electra_tf.run_pretraining" and flags  # what the slow test runs


# The README's whole demo (2,400 steps: held-out AUC 0.51 -> 0.71, generator accuracy
# 0 -> 16%) is timed and its figures recorded by hand in benchmarks/demo.md: at 9 to 27
# minutes on 2 cores it was CI's largest single test. The slow test runs the README's
# command as written, with one flag more: its first 600 steps, a whole schedule (the
# 200 warmup steps, then the decay to 0), the data build, both evals and the final
# files. On the 2026-12-02 machine that run gave AUC 0.506 -> 0.551 and a generator
# accuracy of 10.6%. That the discriminator beats the all-"original" rate on held-out
# text is tests/training/test_training_learns.py's.
DEMO_TEST_STEPS = 600


@pytest.mark.slow
def test_demo_pretraining_improves_disc_auc(tmp_path):
    module, flags = demo_command()
    proc = run_module(module, *flags, f"--demo_data_dir={tmp_path}/data",
                      f"--model_dir={tmp_path}/model", f"--num_train_steps={DEMO_TEST_STEPS}",
                      timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    final = json.load(open(tmp_path / "model" / "final_eval.json"))
    assert final["step"] == DEMO_TEST_STEPS
    start = [line for line in proc.stderr.splitlines() if "eval at step 0:" in line]
    auc0 = float(start[0].split("disc_auc ")[1].split(",")[0])
    # Chance at step 0; up by 0.045 at step 600 (the numbers move a little with the
    # Python version and packages, which make the corpus).
    assert auc0 < 0.55 and final["disc_auc"] > auc0 + 0.02, (auc0, final)
    assert final["masked_lm_accuracy"] > 0.05, final
    assert (tmp_path / "model" / "discriminator.weights.h5").exists()
