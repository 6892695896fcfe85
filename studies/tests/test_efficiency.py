"""The efficiency study (studies/efficiency/): its corpus, its probes, its report,
and (slow) the whole study end to end."""

import csv
import importlib.util
import json
import math
import os
import sys

import pytest
from conftest import make_corpus, run_module

from studies.efficiency import install_corpus, probes, report
from studies.efficiency.run import parse_pretraining_log


def _rows(path):
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_probe_pairs_come_from_held_out_documents(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(make_corpus(200, seed=3, max_lines=6), encoding="utf-8")
    counts = probes.build_probe(str(corpus), str(tmp_path / "probe"), seed=0)
    assert counts["train"] > 20 and counts["dev"] > 5
    from electra_tf.data.builder import iter_documents

    held_out = {s for i, d in iter_documents([str(corpus)]) if i % 10 == 9 for s in d}
    trained_on = {s for i, d in iter_documents([str(corpus)]) if i % 10 != 9 for s in d}
    labels = []
    for row in _rows(tmp_path / "probe" / "train.tsv"):
        assert row["sentence1"] in held_out and row["sentence2"] in held_out
        labels.append(row["label"])
    assert held_out - trained_on  # the probe text is not all in pre-training
    assert 0.3 < labels.count("entailment") / len(labels) < 0.7


def test_order_probe_labels_say_whether_the_pair_was_swapped(tmp_path):
    docs = [[f"doc {d} sentence {i} ." for i in range(6)] for d in range(20)]
    meta = probes.build_pair_probe("order", docs, str(tmp_path), seed=1)
    rows = _rows(tmp_path / "train.tsv") + _rows(tmp_path / "dev.tsv")
    assert len(rows) == meta["train_size"] + meta["dev_size"] == 20 * 5
    for row in rows:
        a, b = (s.split() for s in (row["sentence1"], row["sentence2"]))
        assert a[1] == b[1]  # one document
        in_order = int(b[3]) == int(a[3]) + 1
        assert in_order or int(a[3]) == int(b[3]) + 1
        assert row["label"] == ("entailment" if in_order else "not_entailment")
    swapped = sum(r["label"] == "not_entailment" for r in rows) / len(rows)
    assert 0.35 < swapped < 0.65


def test_package_probe_splits_by_document_and_reports_the_majority_baseline(tmp_path):
    docs = ([("big", [f"big{d} s{i} ." for i in range(9)]) for d in range(10)]
            + [("mid", [f"mid{d} s{i} ." for i in range(9)]) for d in range(5)]
            + [("one", ["only s0 .", "only s1 ."])])  # one document: cannot be split
    meta = probes.build_package_probe(docs, str(tmp_path), seed=0, num_classes=3)
    assert meta["labels"] == ["big", "mid"]
    train, dev = _rows(tmp_path / "train.tsv"), _rows(tmp_path / "dev.tsv")
    doc_of = lambda row: row["sentence"].split()[0]  # noqa: E731
    assert not {doc_of(r) for r in train} & {doc_of(r) for r in dev}
    assert {r["label"] for r in dev} == {"big", "mid"}
    assert all(doc_of(r).startswith(r["label"]) for r in train + dev)
    top = max(("big", "mid"), key=lambda lbl: sum(r["label"] == lbl for r in train))
    assert meta["majority_baseline"] == pytest.approx(
        sum(r["label"] == top for r in dev) / len(dev))
    assert meta["dev_size"] == len(dev) == (2 + 1) * 3  # 2 big, 1 mid document; 3 chunks each


def test_install_corpus_reads_docs_and_docstrings_drops_code_licences_and_duplicates(tmp_path):
    site = tmp_path / "site"
    pkg = site / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "tests").mkdir()
    doc = ('"""Compute things for the demo package.\n\nThis module explains what it does '
           'in prose. It has two sentences.\n\n>>> compute(1)\n2\n"""\n\n'
           'def compute(x):\n    """Add one to a number.\n\n    Args:\n      x: The number '
           'that the function receives as input.\n    """\n    return x + 1\n')
    (pkg / "core.py").write_text(doc)
    (pkg / "sub" / "copy.py").write_text(doc)  # a vendored duplicate: every paragraph seen
    (pkg / "tests" / "test_core.py").write_text('"""A test module that should never be read."""')
    (pkg / "README.md").write_text("# Title\n\nThe package is documented here in a readme. "
                                   "It is short but complete.\n\n```python\nimport pkg\n```\n")
    (pkg / "LICENSE.txt").write_text("Permission is hereby granted, free of charge, to any "
                                     "person obtaining a copy.\n")
    info = site / "pkg_dist-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pkg-dist\n\nA package that "
                                   "exists only for this test. It does very little work.\n")
    (info / "RECORD").write_text("pkg/core.py,,\npkg/README.md,,\n")
    out = tmp_path / "corpus.txt"
    stats = install_corpus.write_install_corpus(str(out), include_stdlib=False,
                                                roots=[str(site)], processes=1)
    text = out.read_text()
    assert "This module explains what it does in prose." in text
    assert "The number that the function receives as input." in text  # an Args entry
    assert "The package is documented here in a readme." in text
    assert "A package that exists only for this test." in text
    for absent in (">>>", "import pkg", "Permission is hereby", "never be read", "# Title"):
        assert absent not in text
    assert text.count("This module explains") == 1 and stats["duplicate_paragraphs"] >= 3
    sources = install_corpus.read_sources(str(out))
    assert [(r["package"], r["module"]) for r in sources] == [
        ("pkg-dist", "pkg"), ("pkg-dist", "pkg"), ("pkg-dist", "pkg-dist")]
    assert len(sources) == stats["documents"] == len(text.strip().split("\n\n"))


def test_pretraining_log_parses_into_a_curve_and_the_final_eval():
    text = ("[pretrain] step 10/30 | loss 28.4576 (mlm 7.975 disc 0.4096) | mlm_acc 0.062\n"
            "[pretrain] step 20/30 | loss 7.7141 (mlm 7.714) | mlm_acc 0.056 | lr 1e-4\n"
            "[pretrain] step 30/30 | loss 0.4101 | disc_auc 0.700 | lr 0.00e+00\n"
            "[pretrain] eval at step 30: disc_auc 0.6120, masked_lm_accuracy 0.1000\n")
    curve, final = parse_pretraining_log(text)
    assert [c["step"] for c in curve] == [10, 20, 30]
    assert curve[0]["loss"] == pytest.approx(28.4576)
    assert curve[0]["disc_loss"] == pytest.approx(0.4096)
    assert curve[1]["mlm_loss"] == pytest.approx(7.714)
    assert math.isnan(curve[1]["disc_loss"])  # BERT-MLM: no discriminator
    assert curve[2]["loss"] == pytest.approx(0.4101) and math.isnan(curve[2]["mlm_loss"])
    assert final == {"disc_auc": pytest.approx(0.612), "masked_lm_accuracy": pytest.approx(0.1)}


def test_a_resumed_pretraining_keeps_every_passs_curve_and_seconds(tmp_path):
    """A pre-training stopped midway resumes from its checkpoint: its log had been
    rewritten, the curve and seconds then the last pass's alone."""
    from studies.efficiency import run

    log = str(tmp_path / "pretrain.log")
    for lines in (["step 10/30 | loss 9.0", "step 20/30 | loss 8.0"],
                  ["step 20/30 | loss 7.5", "step 30/30 | loss 7.0",
                   "eval at step 30: disc_auc 0.6000"]):
        code = "; ".join(f"print({line!r})" for line in lines)
        assert run._run([sys.executable, "-c", code], "tensorflow", log, append=True)[0] == 0
    curve, final, seconds = run.parse_pretraining_passes(open(log).read())
    assert [(c["step"], c["loss"]) for c in curve] == [(10, 9.0), (20, 7.5), (30, 7.0)]
    assert final == {"disc_auc": 0.6}
    assert open(log).read().count(run._PASS) == 2 and seconds > 0


def test_a_run_is_recorded_once_pretrained_retried_when_failed_and_of_one_study(
        tmp_path, monkeypatch):
    """A stop in the probes had lost the pre-training's record (curve, seconds); a run
    recorded as failed had stayed so; a toy run's records had stood for the study's."""
    from studies.efficiency import run

    s = {"study": "cpu", "output_dir": str(tmp_path), "budget_steps": 4,
         "backend": "tensorflow", "probes": ["order"]}
    calls = []

    def pretrain(objective, seed, s, paths, run_dir):
        calls.append("pretrain")
        return {"pretrain_seconds": 3.0, "curve": [{"step": 4, "loss": 1.0}]}

    def stopped(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "pretrain", pretrain)
    monkeypatch.setattr(run, "probe", stopped)
    stages = {"pretrain", "probe"}
    with pytest.raises(KeyboardInterrupt):
        run.run_one("electra", 0, s, {}, stages)
    path = tmp_path / "runs" / "electra_s0.json"
    assert json.loads(path.read_text())["status"] == "pretrained"
    monkeypatch.setattr(run, "probe", lambda *args: {"error": "probe_finetune exit 1: boom"})
    assert run.run_one("electra", 0, s, {}, stages)["status"] == "failed in probes"
    monkeypatch.setattr(run, "probe", lambda *args: {"probes": {"order": {"accuracy": 0.5}}})
    record = run.run_one("electra", 0, s, {}, stages)
    assert record["status"] == "ok" and calls == ["pretrain"]
    assert record["curve"] == [{"step": 4, "loss": 1.0}] and "error" not in record
    with pytest.raises(SystemExit, match=f"error: {path} is a run of the cpu study, not of "
                                         "cpu-toy: give another --output_dir"):
        run.run_one("electra", 0, {**s, "study": "cpu-toy"}, {}, stages)


def test_report_has_one_row_per_objective_seed_probe_and_mean_with_spread(tmp_path):
    (tmp_path / "runs").mkdir()
    for objective, accs in (("electra", (0.70, 0.72, 0.74)), ("bert_mlm", (0.60, 0.61, 0.62))):
        for seed, acc in enumerate(accs):
            run = {"study": "cpu", "objective": objective, "seed": seed, "status": "ok",
                   "curve": [{"step": 1, "loss": 3.0}, {"step": 2, "loss": 2.0}],
                   "final_eval": {"masked_lm_accuracy": 0.1}, "pretrain_seconds": 1.0,
                   "probes": {p: {"accuracy": acc, "dev_size": 100, "train_size": 50,
                                  "majority_baseline": 0.5, "seconds": 1.0}
                              for p in ("order", "package")}}
            (tmp_path / "runs" / f"{objective}_s{seed}.json").write_text(json.dumps(run))
    metas = {p: {"train_size": 50, "dev_size": 100, "majority_baseline": 0.5}
             for p in ("order", "package")}
    report.write_report(str(tmp_path), metas, ["# test"], "test")
    with open(tmp_path / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 3 * 2 and {r["probe_dev_size"] for r in rows} == {"100"}
    md = (tmp_path / "results.md").read_text()
    assert "| electra | 0.720 ± 0.020 | 0.720 ± 0.020 | 0.720 ± 0.020 |" in md
    assert "+0.110" in md and "beyond" in md
    if importlib.util.find_spec("matplotlib"):  # the plot alone needs it (extra "studies")
        assert os.path.getsize(tmp_path / "results.png") > 0


def test_report_without_matplotlib_writes_the_table_and_says_why_there_is_no_plot(
        tmp_path, monkeypatch, capsys):
    (tmp_path / "runs").mkdir()
    run = {"study": "cpu", "objective": "electra", "seed": 0, "status": "ok", "curve": [],
           "probes": {"order": {"accuracy": 0.6, "dev_size": 10, "train_size": 10,
                                "majority_baseline": 0.5, "seconds": 1.0}}}
    (tmp_path / "runs" / "electra_s0.json").write_text(json.dumps(run))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    metas = {"order": {"train_size": 10, "dev_size": 10, "majority_baseline": 0.5}}
    report.write_report(str(tmp_path), metas, ["# test"], "test")
    assert (tmp_path / "results.md").exists() and (tmp_path / "results.csv").exists()
    assert not (tmp_path / "results.png").exists()
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "matplotlib" in ln]
    assert len(lines) == 1 and ".[studies]" in lines[0]


def _records(out):
    records = {}
    for name in os.listdir(out / "runs"):
        with open(out / "runs" / name) as f:
            records[name] = json.load(f)
    return records


@pytest.mark.slow
def test_cpu_study_end_to_end_at_toy_scale(tmp_path):
    """The cpu study's own pipeline (the demo corpus, the package probes' text from
    installed packages, TensorFlow) at toy size: one objective pre-trained and probed
    on the pair probe. random_init, the JAX backend and the single-sentence probe run
    in test_gpu_study_wiring_at_toy_scale."""
    proc = run_module("studies.efficiency.run", "--study=cpu", "--toy", "--objectives=electra",
                      "--probes=order", "--seeds=0", f"--output_dir={tmp_path}/out",
                      timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("results.csv", "results.md", "results.png"):
        assert os.path.getsize(tmp_path / "out" / name) > 0
    [record] = _records(tmp_path / "out").values()
    assert record["status"] == "ok" and record["study"] == "cpu-toy"
    assert record["curve"][-1]["step"] == 4
    assert 0 < record["probes"]["order"]["dev_size"] <= 32  # the toy's cap
    data = tmp_path / "out" / "data"
    assert (data / "corpus.txt").read_text().count("\n\n") == 100 - 1  # the toy demo corpus
    # the probes' text: installed packages (not the pre-training corpus), labelled by package
    assert len(install_corpus.read_sources(str(data / "probe_corpus.txt"))) > 20
    meta = json.loads((data / "probes" / "meta.json").read_text())
    assert len(meta["package"]["labels"]) >= 2 and "python" not in meta["package"]["labels"]


@pytest.mark.slow
def test_gpu_study_wiring_at_toy_scale(tmp_path):
    """The gpu study end to end on CPU: install corpus, records, JAX pre-training in
    a subprocess, the probes (the single-sentence one; the pair probes in the cpu
    study's test), random_init's probes, the report."""
    proc = run_module("studies.efficiency.run", "--study=gpu", "--toy",
                      "--seeds=0", "--objectives=electra,random_init", "--probes=package",
                      f"--output_dir={tmp_path}/out", timeout=1800)
    records = _records(tmp_path / "out")
    assert len(records) == 2
    for record in records.values():  # a run either completed or says why it did not
        assert record["status"] == "ok" or record.get("error"), record
        if record["status"] == "ok" and record["objective"] != "random_init":
            assert record["curve"] and record["curve"][-1]["step"] == 4
    assert proc.returncode == (0 if all(r["status"] == "ok" for r in records.values()) else 1)
    with open(tmp_path / "out" / "results.csv") as f:
        assert "probe_dev_size" in f.readline()
