"""TensorBoard tags: one name per quantity across train and eval (the original's names),
and docs/pretraining.md's "What is logged" lists every tag a run writes."""

import glob
import os
import re

from helpers import REPO


def _tags(folder) -> set:
    """The scalar tags of a summaries folder, read as the docs say: TF2 tensor summaries,
    through EventAccumulator's Tensors()."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert glob.glob(os.path.join(folder, "events.out.tfevents.*")), folder
    events = EventAccumulator(str(folder))
    events.Reload()
    tags = set(events.Tags()["tensors"])
    for tag in tags:
        assert events.Tensors(tag), tag
    return tags


def _documented() -> set:
    text = open(os.path.join(REPO, "docs", "pretraining.md"), encoding="utf-8").read()
    section = text.split("### What is logged", 1)[1].split("\n### ", 1)[0]
    return set(re.findall(r"`([a-z_]+)`", section))


def test_train_and_eval_write_one_tag_per_quantity(trained_run):
    from electra_tf.training.reporting import SAME_QUANTITY

    train = _tags(os.path.join(trained_run["model_dir"], "train"))
    evaluation = _tags(os.path.join(trained_run["model_dir"], "eval"))
    # The MLM and discriminator losses overlay: the same tags in both folders,
    # the names of the original's run_pretraining.py metrics.
    assert {"loss", "masked_lm_loss", "disc_loss"} <= train & evaluation, (train, evaluation)
    for term, metric in SAME_QUANTITY.items():
        if term != metric:
            assert term not in train | evaluation, term


def test_the_docs_list_every_tag_a_run_writes(trained_run):
    written = (_tags(os.path.join(trained_run["model_dir"], "train"))
               | _tags(os.path.join(trained_run["model_dir"], "eval")))
    assert written - _documented() == set()
