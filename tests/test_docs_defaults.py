"""docs/finetuning.md's list of fine-tuning defaults names every size's learning rate."""

from __future__ import annotations

import os

from conftest import REPO

from electra_tf.core.config import FINETUNE_LEARNING_RATE


def test_every_sizes_finetuning_learning_rate_is_in_the_docs():
    section = open(os.path.join(REPO, "docs", "finetuning.md"), encoding="utf-8").read()
    for size, rate in FINETUNE_LEARNING_RATE.items():
        written = format(rate, ".0e").replace("e-0", "e-")  # 1e-03 -> 1e-3
        line = next((row for row in section.replace("\n  ", " ").splitlines()
                     if written in row and size in row.lower()), None)
        assert line, f"docs/finetuning.md's defaults do not give {size}'s {written}"
