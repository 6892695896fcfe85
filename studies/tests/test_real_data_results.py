"""studies/real_data/results.jsonl is what collect_results.py makes of the recorded
results, and FINDINGS.md's table is what results.jsonl holds."""

import json
import os

import pytest

from studies.real_data import collect_results as cr


def test_the_results_file_is_collected_from_the_records():
    # Rerun `python -m studies.real_data.collect_results` after a script writes a record.
    assert cr.read() == cr.collect()


def test_findings_carries_the_final_table_of_the_results_file():
    with open(os.path.join(cr.HERE, "FINDINGS.md"), encoding="utf-8") as f:
        findings = f.read()
    table = cr.final_table(cr.read())
    assert table in findings
    # the study's own report says the same (results/study/results.md)
    assert "| ELECTRA - BERT-MLM | -6.87 | 0.94 |" in table
    assert "69.1 ± 1.3" in table and "66.8 ± 1.2" in table and "59.9 ± 1.9" in table


def test_every_row_names_its_sources_and_the_study_is_complete():
    rows = cr.read()
    assert all(r["sources"] and r["experiment"] in cr.EXPERIMENTS for r in rows)
    study = [r for r in rows if r["experiment"] == "study"]
    runs = sum(len(seeds) for r in study for seeds in r["dev_accuracy"].values())
    assert runs == 135  # the ledger's fine-tuning runs, none lost or doubled
    variant = next(r for r in rows if r["variant"] == "gdes_prior_lr5e-4_4000"
                   and r["step"] == 4000)
    assert variant["settings"] == {"prior_output_biases": True,
                                   "gradient_disentangled_embeddings": True,
                                   "learning_rate": 5e-4, "num_train_steps": 4000,
                                   "num_warmup_steps": 400}
    assert sorted(variant["dev_accuracy"]["mr"]) == ["0", "1", "2"]


def _write(path, value):
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(v) + "\n" for v in value))
    else:
        path.write_text(json.dumps(value))


def _records(tmp_path, step0_trec6):
    ledger = [{"kind": "finetune", "settings_id": "x", "objective": "none", "pretrain_seed": 0,
               "step": 0, "flops": 0, "task": t, "finetune_seed": 0, "dev_accuracy": 0.5}
              for t in cr.TASKS]
    _write(tmp_path / "study" / "ledger.jsonl", ledger)
    _write(tmp_path / "early_points_v.json", {
        "command": "python -m studies.real_data.early_points --variant=v "
                   "--pretrain_flag=--learning_rate=5e-4 --pretrain_flag=--prior_output_biases",
        "rows": [{"step": 0, "trec6": step0_trec6, "mr": 0.5, "vader_sst2": 0.5,
                  "token_cosine": 0.4},
                 {"step": 50, "trec6": 0.4, "mr": 0.6, "vader_sst2": 0.7, "mlm_acc": 0.02}]})


def test_a_variant_merges_into_the_rows_it_measured(tmp_path):
    _records(tmp_path, step0_trec6=0.5)
    none, variant = cr.collect(str(tmp_path))
    assert none["variant"] == "none" and none["measurements"] == {"token_cosine": 0.4}
    assert len(none["sources"]) == 2
    assert variant["settings"] == {"learning_rate": 5e-4, "prior_output_biases": True}
    assert variant["dev_accuracy"] == {"trec6": {"0": 0.4}, "mr": {"0": 0.6},
                                       "vader_sst2": {"0": 0.7}}


def test_two_sources_that_disagree_about_a_model_are_an_error(tmp_path):
    # an early_points step 0 is the study's `none`: its result must be the ledger's
    _records(tmp_path, step0_trec6=0.6)
    with pytest.raises(ValueError, match="trec6 dev accuracy, seed 0 is 0.6"):
        cr.collect(str(tmp_path))
