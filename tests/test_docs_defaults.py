"""The docs say what the code does: the README opens with the set-up commands CI and the
tests run (.ci/setup_commands), and docs/finetuning.md's list of fine-tuning defaults
names every size's learning rate."""

from __future__ import annotations

import os

from conftest import REPO
from helpers import setup_commands

from electra_tf.core.config import FINETUNE_LEARNING_RATE


def test_the_readme_opens_with_the_two_setup_commands():
    demo, tests = setup_commands()
    assert "-m electra_tf.run_pretraining --flagfile=configs/demo.flags" in demo
    assert " -m pytest " in tests + " "
    readme = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    opening = f"# electra_tf\n\n```bash\n{demo}\n{tests}\n```\n"
    assert readme.startswith(opening), readme[:len(opening) + 200]


def test_every_sizes_finetuning_learning_rate_is_in_the_docs():
    section = open(os.path.join(REPO, "docs", "finetuning.md"), encoding="utf-8").read()
    for size, rate in FINETUNE_LEARNING_RATE.items():
        written = format(rate, ".0e").replace("e-0", "e-")  # 1e-03 -> 1e-3
        line = next((row for row in section.replace("\n  ", " ").splitlines()
                     if written in row and size in row.lower()), None)
        assert line, f"docs/finetuning.md's defaults do not give {size}'s {written}"
