"""The efficiency experiment runner: its probe, and (slow) the whole runner."""

import csv
import os

import pytest
from conftest import make_corpus, run_module

from electra_tf.experiments.efficiency import build_probe


def test_probe_pairs_come_from_held_out_documents(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(make_corpus(200, seed=3, max_lines=6), encoding="utf-8")
    counts = build_probe(str(corpus), str(tmp_path / "probe"), seed=0)
    assert counts["train"] > 20 and counts["dev"] > 5
    from electra_tf.data.builder import iter_documents

    held_out = {s for i, d in iter_documents([str(corpus)]) if i % 10 == 9 for s in d}
    trained_on = {s for i, d in iter_documents([str(corpus)]) if i % 10 != 9 for s in d}
    labels = []
    with open(tmp_path / "probe" / "train.tsv") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    for row in rows:
        assert row["sentence1"] in held_out and row["sentence2"] in held_out
        labels.append(row["label"])
    assert held_out - trained_on  # the probe text is not all in pre-training
    assert 0.3 < labels.count("entailment") / len(labels) < 0.7


@pytest.mark.slow
def test_runner_end_to_end(tmp_path):
    proc = run_module("electra_tf.experiments.efficiency", "--budget_steps=4",
                      "--objectives=electra,bert_mlm", "--probe_epochs=1",
                      f"--data_dir={tmp_path}/data", f"--output_dir={tmp_path}/out", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("results.csv", "results.md", "results.png"):
        assert os.path.getsize(tmp_path / "out" / name) > 0
