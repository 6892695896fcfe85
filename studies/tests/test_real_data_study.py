"""The real-data study (studies/real_data/study.py): its FLOPs budget, step plan,
task subsampling and results aggregation, and (slow) the whole pipeline at a
toy scale."""

import csv
import json
import math

import pytest
from conftest import make_corpus, run_module

from electra_tf.core.errors import InputError
from studies.real_data import ledger as ledger_mod
from studies.real_data import study


def test_bert_mlm_gets_more_steps_for_the_same_flops_and_points_split_the_budget_equally():
    s = study.settings("cpu")
    plans = study.study_plan(s, ("electra", "bert_mlm"), 16000)
    e, b = plans["electra"], plans["bert_mlm"]
    assert e["steps"] == s["electra_steps"]
    assert b["flops_per_step"] < e["flops_per_step"] and b["steps"] > e["steps"]
    budget = e["steps"] * e["flops_per_step"]
    # within one rounding of the checkpoint period
    assert abs(b["steps"] * b["flops_per_step"] - budget) <= s["points"] * b["flops_per_step"]
    for plan in (e, b):
        assert [pt["fraction"] for pt in plan["points"]] == [0.25, 0.5, 0.75, 1.0]
        assert [pt["step"] for pt in plan["points"]] == [
            plan["save_every"] * k for k in range(1, 5)]
        assert plan["points"][-1]["step"] == plan["steps"]
    for pe, pb in zip(e["points"], b["points"]):
        assert abs(pe["flops"] - pb["flops"]) / pe["flops"] < 0.01


def test_flops_per_sequence_is_the_products_count_of_the_original():
    """The study plans with electra_tf.objectives.flops (flops_computation.py's count):
    BERT-MLM is the original's TransformerHparams(...).get_train_flops of one sequence."""
    from electra_tf.objectives.flops import TransformerHparams

    s = study.settings("cpu")
    config = study.pretraining_config(s, "bert_mlm", 16000)
    d = config.discriminator_config()
    expected = TransformerHparams(d.hidden_size, d.num_hidden_layers, s=128, v=16000,
                                  e=d.resolved_embedding_size).get_train_flops(1, 1)
    assert study.flops_per_sequence(config) == pytest.approx(expected, rel=1e-12)
    electra = study.pretraining_config(s, "electra", 16000)
    assert electra.generator_config().hidden_size == d.hidden_size // 4
    assert study.flops_per_sequence(electra) > expected
    assert study.flops_per_step(s, "bert_mlm", 16000) == round(64 * expected)
    # runs planned with another count are not mixed with these in a ledger
    assert s["flops_count"] == study.FLOPS_COUNT


def test_step_plan_rounds_to_a_multiple_of_the_points():
    plan = study.step_plan(1000.0, 7.0, 4)
    assert plan["steps"] % 4 == 0 and plan["save_every"] == 36
    assert plan["points"][1] == {"step": 72, "flops": 504, "fraction": 0.5}
    with pytest.raises(ValueError):
        study.step_plan(0, 1, 4)


def test_subsample_is_seeded_kept_in_order_and_capped(tmp_path):
    rows = [f"text {i}\t{'ab'[i % 2]}" for i in range(100)]
    a = study.subsample(rows, 10, 0, "t")
    assert a == study.subsample(rows, 10, 0, "t") != study.subsample(rows, 10, 1, "t")
    assert len(a) == 10 and a == sorted(a, key=rows.index)
    assert study.subsample(rows, 0, 0, "t") == rows
    src = tmp_path / "src"
    src.mkdir()
    for split in ("train", "dev"):
        (src / f"{split}.tsv").write_text("text\tlabel\n" + "\n".join(rows) + "\n")
    meta = study.prepare_task(str(src), str(tmp_path / "out"), 30, 0, seed=0)
    assert (meta["train_size"], meta["train_size_full"], meta["dev_size"]) == (30, 100, 100)
    assert meta["majority_baseline_dev"] == 0.5


def _row(obj, pseed, step, task, fseed, acc):
    return dict(objective=obj, pretrain_seed=pseed, flops=step * 10, step=step, task=task,
                finetune_seed=fseed, dev_accuracy=acc, dev_size=100)


def test_aggregate_means_over_seeds_and_tasks_and_the_difference_uses_seed_spread():
    rows = []
    for pseed, shift in ((0, 0.0), (1, 0.02)):
        for fseed in (0, 1):
            rows.append(_row("electra", pseed, 8, "a", fseed, 0.80 + shift))
            rows.append(_row("electra", pseed, 8, "b", fseed, 0.60 + shift))
            rows.append(_row("bert_mlm", pseed, 10, "a", fseed, 0.70 + shift))
            rows.append(_row("bert_mlm", pseed, 10, "b", fseed, 0.50 + shift))
    rows.append(_row("bert_mlm", 2, 10, "a", 0, 0.9))  # no "b": not in the mean over tasks
    agg = study.aggregate(rows, ("a", "b"))
    e = agg[("electra", 8)]
    assert e["tasks"]["a"][0] == pytest.approx(0.81) and e["tasks"]["a"][2] == 4
    assert e["mean"][0] == pytest.approx(0.71) and e["mean"][2] == 4
    assert e["seed_means"] == pytest.approx({0: 0.70, 1: 0.72})
    assert agg[("bert_mlm", 10)]["tasks"]["a"][2] == 5
    assert set(agg[("bert_mlm", 10)]["seed_means"]) == {0, 1}
    d, se = study.difference(e, agg[("bert_mlm", 10)])
    assert d == pytest.approx(0.10) and se == pytest.approx(0.01414, abs=1e-4)
    one_seed = study.aggregate([r for r in rows if r["pretrain_seed"] == 0], ("a", "b"))
    d, se = study.difference(one_seed[("electra", 8)], agg[("bert_mlm", 10)])
    assert d == pytest.approx(0.09) and math.isnan(se)  # no spread from one seed


@pytest.mark.parametrize("args,expected", [
    (["--stage=prepare", "--corpus={tmp}/missing.txt"], "missing.txt not found"),
    (["--point_finetune_seeds=-2"], "--point_finetune_seeds must be -1"),
    (["--seeds=0,-1"], "--seeds='0,-1': give comma-separated seeds >= 0"),
    (["--finetune_seeds=0,x"], "--finetune_seeds='0,x': give comma-separated seeds >= 0"),
    (["--seeds=,"], "--seeds=','"),
])
def test_bad_input_is_one_error_line(args, expected, tmp_path):
    proc = run_module("studies.real_data.study", f"--work_dir={tmp_path}/w",
                      *[a.format(tmp=tmp_path) for a in args])
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def _write_task(folder, labels, n, seed):
    import random

    rng = random.Random(seed)
    folder.mkdir(parents=True)
    for split, size in (("train", n), ("dev", n // 2)):
        rows = []
        for _ in range(size):
            label = rng.choice(labels)
            words = " ".join(rng.choice(["the", "a", "of", "to", "and"]) for _ in range(4))
            rows.append(f"{label} {words} {label}\t{label}")
        (folder / f"{split}.tsv").write_text("text\tlabel\n" + "\n".join(rows) + "\n")


def test_the_report_compares_the_objectives_at_equal_budgets(tmp_path):
    """write_report on the toy scale's plans for both objectives (the slow pipeline
    below pre-trains ELECTRA alone): equal budgets up to toy-sized rounding, every row
    in results.csv, the comparisons and the majority baselines in results.md."""
    s = study.settings("toy")
    p = study.paths(str(tmp_path / "w"), s)
    _write_task(tmp_path / "tasks" / "alpha", ["cat", "dog"], 60, 0)
    study.prepare_task(str(tmp_path / "tasks" / "alpha"), str(tmp_path / "w" / "toy" / "tasks"
                                                                / "alpha"), 24, 16, seed=0)
    (tmp_path / "w" / "data").mkdir(parents=True)
    (tmp_path / "w" / "data" / "vocab_400.txt").write_text("".join(f"t{i}\n" for i in range(300)))
    plans = study.study_plan(s, study.OBJECTIVES, 300)
    e_final, b_final = (plans[o]["points"][-1]["flops"] for o in study.OBJECTIVES)
    assert abs(e_final - b_final) / e_final < 0.3  # equal budgets, up to toy-sized rounding
    rows = [_row("none", 0, 0, "alpha", 0, 0.5)]
    rows += [dict(_row(o, 0, pt["step"], "alpha", 0, acc), flops=pt["flops"], dev_size=16)
             for o, acc in (("electra", 0.7), ("bert_mlm", 0.6)) for pt in plans[o]["points"]]
    records = [{"objective": o, "seed": 0, "steps": plans[o]["steps"],
                "flops_per_step": plans[o]["flops_per_step"],
                "budget_flops": plans[o]["steps"] * plans[o]["flops_per_step"],
                "final_eval": {"masked_lm_accuracy": 0.1}} for o in study.OBJECTIVES]
    out = tmp_path / "report"
    study.write_report(str(out), s, p, rows, ["alpha"], plans, records, "python -m x")
    with open(out / "results.csv") as f:
        written = list(csv.DictReader(f))
    assert list(written[0]) == list(study.CSV_COLUMNS) and len(written) == 1 + 2 * 2
    md = (out / "results.md").read_text()
    assert "| ELECTRA - BERT-MLM | +10.00 |" in md and "| ELECTRA - none | +20.00 |" in md
    assert "Majority baselines" in md and "| alpha | 24 of 60 |" in md


@pytest.mark.slow
def test_whole_pipeline_at_toy_scale_and_resumes(tmp_path):
    """Every stage, ELECTRA alone (bert_mlm's runs are the same commands with another
    --objective; its budget and the report's comparisons: the test above): none and
    two checkpoint points fine-tuned, then a second sitting that resumes from the
    ledger alone."""
    root = tmp_path / "cache"
    root.mkdir()
    (root / "corpus.txt").write_text(make_corpus(400, seed=1), encoding="utf-8")
    (root / "heldout.txt").write_text(make_corpus(40, seed=2), encoding="utf-8")
    _write_task(root / "tasks" / "alpha", ["cat", "dog"], 60, 0)
    out = tmp_path / "report"
    args = ("studies.real_data.study", f"--work_dir={root}/study", "--scale=toy",
            "--objectives=electra", "--tasks=alpha", "--seeds=0", "--finetune_seeds=0",
            f"--output_dir={out}")
    proc = run_module(*args, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "ETA" in proc.stderr
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(study.CSV_COLUMNS)
    # none (1 point) + electra x 2 points (the earlier one from its kept checkpoint)
    assert len(rows) == 1 + 2
    assert {(r["objective"], r["step"]) for r in rows} == {("none", "0"), ("electra", "2"),
                                                           ("electra", "4")}
    flops = {(r["objective"], r["step"]): int(r["flops"]) for r in rows}
    assert flops[("none", "0")] == 0 and flops[("electra", "4")] == 2 * flops[("electra", "2")]
    assert all(0 <= float(r["dev_accuracy"]) <= 1 and int(r["dev_size"]) == 16 for r in rows)
    md = (out / "results.md").read_text()
    assert "ELECTRA - none" in md and "Majority baselines" in md
    meta = json.loads((root / "study" / "toy" / "tasks" / "alpha" / "meta.json").read_text())
    assert meta["train_size"] == 24 and meta["train_size_full"] == 60
    ledger = (out / "ledger.jsonl").read_text().splitlines()
    kinds = [json.loads(line)["kind"] for line in ledger]
    assert kinds.count("finetune") == 3 and kinds.count("pretrain") == 1
    # a later sitting on a fresh machine (no runs, no checkpoints in the work dir)
    # finds every result in the ledger, runs nothing and rewrites the report; a
    # seed not asked for (a later seed's first result, the study still running)
    # stays out of the report
    import shutil

    for sub in ("pretrain", "finetune"):
        shutil.rmtree(root / "study" / "toy" / sub)
    other = dict(json.loads(next(line for line in ledger if '"none"' in line)),
                 pretrain_seed=7)
    with open(out / "ledger.jsonl", "a") as f:
        f.write(json.dumps(other) + "\n")
    again = run_module(*args, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "dev accuracy" not in again.stderr and "pretrain:" not in again.stderr
    assert "holds 3 of the results" in again.stderr
    assert "report: 3 fine-tuning results" in again.stderr
    assert (out / "results.csv").read_text().count("\n") == 4


def test_the_cpu_recipe_flagfile_is_the_studys_electra_run(tmp_path):
    """studies/real_data/real_data_cpu.flags (the 30-minute CPU recipe) trains what the
    study's cpu scale trains for ELECTRA: the study's results table is the recipe's."""
    import os

    from helpers import REPO

    def value(text):
        try:
            return float(text)
        except ValueError:
            return {"true": True, "false": False}.get(text, text)

    def as_flags(lines, drop=("model_dir", "train_data", "eval_data", "vocab_file",
                              "vocab_size", "seed")):
        out = {}
        for line in lines:
            line = line.strip()
            if line.startswith("--"):
                name, has_value, text = line[2:].partition("=")
                out[name] = value(text) if has_value else True
        return {k: v for k, v in out.items() if k not in drop}

    with open(os.path.join(REPO, "studies", "real_data", "real_data_cpu.flags")) as f:
        recipe = as_flags(f)
    s = study.settings("cpu")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"t{i}\n" for i in range(100)))
    plan = study.study_plan(s, ("electra",), 16000)["electra"]
    p = dict(study.paths(str(tmp_path), s), vocab=str(vocab))
    command = as_flags(study.pretrain_command(s, p, "electra", 0, plan)[3:])
    assert recipe["num_train_steps"] == 1000 and recipe["learning_rate"] == 1e-3
    assert command == recipe


def test_earlier_points_are_fine_tuned_with_the_first_seeds_only():
    s = study.settings("cpu", {"points": 4, "point_finetune_seeds": 1})
    p = study.paths("/w", s)
    plans = {o: study.step_plan(100.0, 1.0, 4) for o in ("electra", "bert_mlm")}
    runs = study.finetune_runs(s, p, ("electra", "bert_mlm"), [0, 1, 2], [0, 1, 2],
                               ("a", "b", "c"), plans)
    final = [r for r in runs if r["fraction"] == 1.0]
    earlier = [r for r in runs if 0 < r["fraction"] < 1.0]
    assert len(final) == 2 * 3 * 3 * 3 and len(earlier) == 3 * 2 * 3 * 3
    assert {r["finetune_seed"] for r in earlier} == {0}
    assert len([r for r in runs if r["objective"] == "none"]) == 3 * 3 * 3
    assert runs.index(final[-1]) < runs.index(earlier[0])  # the final budget first
    assert len({r["dir"] for r in runs}) == len(runs)
    every = study.finetune_runs(study.settings("cpu", {"point_finetune_seeds": 0}), p,
                                ("electra",), [0], [0, 1], ("a",), plans)
    assert len(every) == 2 + 4 * 2


def test_finetune_command_starts_from_the_runs_checkpoint(tmp_path):
    s = study.settings("cpu")
    p = study.paths(str(tmp_path), s)

    def init(r):
        [flag] = [a for a in study.finetune_command(s, p, r) if a.startswith("--init_checkpoint=")]
        return flag.split("=", 1)[1]

    run = dict(task="mr", finetune_seed=0, dir=str(tmp_path / "ft"), step=250,
               init=str(tmp_path / "electra_s0"))
    (tmp_path / "electra_s0" / "checkpoints").mkdir(parents=True)
    (tmp_path / "electra_s0" / "checkpoints" / "ckpt-250.index").write_text("")
    assert init(dict(run, objective="electra")) == str(
        tmp_path / "electra_s0" / "checkpoints" / "ckpt-250")
    assert init(dict(run, objective="none", step=0)) == str(tmp_path / "electra_s0")
    # a model folder given as such (transplant.py's models) is passed as it is
    assert init(dict(run, objective="transplant:electra_s0:layers", step=0,
                     init_checkpoint=str(tmp_path / "hybrid"))) == str(tmp_path / "hybrid")


def test_settings_id_follows_what_shapes_the_results_only():
    s = study.settings("cpu")
    sid = ledger_mod.settings_id(s, 15588)
    assert sid == ledger_mod.settings_id(study.settings("cpu"), 15588)
    assert sid != ledger_mod.settings_id(s, 16000)
    assert sid != ledger_mod.settings_id(study.settings("cpu", {"ft_epochs": 2}), 15588)
    # how fast or in how many workers a study runs does not change its results
    assert sid == ledger_mod.settings_id(
        study.settings("cpu", {"finetune_workers": 1, "point_finetune_seeds": 0}), 15588)


def _ft(task="mr", fseed=0, acc=0.5):
    return dict(objective="electra", pretrain_seed=0, step=1000, flops=1, task=task,
                finetune_seed=fseed, dev_accuracy=acc, dev_size=10, fraction=1.0)


def test_ledger_keeps_results_across_readers_and_settings(tmp_path):
    path = tmp_path / "sub" / "ledger.jsonl"
    first = ledger_mod.Ledger(str(path), "aaa")
    assert first.finetune(_ft()) is None and not path.exists()
    first.add("finetune", _ft(acc=0.61))
    first.add("pretrain", {"objective": "electra", "seed": 0, "steps": 1000})
    ledger_mod.Ledger(str(path), "bbb").add("finetune", _ft(acc=0.7))
    again = ledger_mod.Ledger(str(path), "aaa")
    assert again.finetune(_ft())["dev_accuracy"] == 0.61
    assert again.finetune(_ft(task="trec6")) is None
    assert again.pretrain("electra", 0)["steps"] == 1000 and again.pretrain("electra", 1) is None
    assert again.other_settings == 1 and len(again.finetune_rows()) == 1


def test_ledger_a_torn_last_line_is_skipped_and_ended_by_the_next_write(tmp_path, capsys):
    path = tmp_path / "ledger.jsonl"
    ledger_mod.Ledger(str(path), "aaa").add("finetune", _ft(acc=0.61))
    with open(path, "a") as f:
        f.write('{"kind": "finetune", "objec')  # a write cut off by a kill
    torn = ledger_mod.Ledger(str(path), "aaa")
    assert "incomplete last line" in capsys.readouterr().err
    assert len(torn.finetune_rows()) == 1
    torn.add("finetune", _ft(task="trec6", acc=0.4))
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and lines[1].endswith("objec")
    with pytest.raises(InputError, match=r"ledger.jsonl:2: not a ledger record"):
        ledger_mod.Ledger(str(path), "aaa")  # the torn line is no longer the last one
    path.write_text("[1, 2]\n")
    with pytest.raises(InputError, match=r"ledger.jsonl:1: not a ledger record"):
        ledger_mod.Ledger(str(path), "aaa")


def test_units_run_pretraining_only_where_fine_tuning_is_pending(tmp_path):
    s = study.settings("cpu", {"points": 2})
    p = study.paths("/w", s)
    plans = {o: study.step_plan(100.0, 1.0, 2) for o in ("electra", "bert_mlm")}
    runs = study.finetune_runs(s, p, ("electra", "bert_mlm"), [0, 1], [0], ("a",), plans)
    ledger = ledger_mod.Ledger(str(tmp_path / "l.jsonl"), "x")
    for r in runs:
        if (r["objective"], r["pretrain_seed"]) == ("electra", 0):
            ledger.add("finetune", dict(r, dev_accuracy=0.5))
    pending = [r for r in runs if not ledger.finetune(r)]
    units = study.study_units(("electra", "bert_mlm"), [0, 1], pending, ledger,
                              ["pretrain", "finetune"])
    assert units == [("none", 0, False), ("electra", 0, False), ("bert_mlm", 0, True),
                     ("none", 1, False), ("electra", 1, True), ("bert_mlm", 1, True)]
    only_pretrain = study.study_units(("electra",), [0], pending, ledger, ["pretrain"])
    assert only_pretrain == [("none", 0, False), ("electra", 0, True)]


def test_early_points_reads_the_training_line_the_loop_prints():
    from electra_tf.training.reporting import train_line
    from studies.real_data import early_points

    line = "[pretrain] " + train_line(
        {"loss": 25.0, "mlm_loss": 7.6, "disc_loss": 0.35, "masked_lm_accuracy": 0.05,
         "disc_auc": 0.789, "learning_rate": 9e-4, "sequences_per_second": 71.0}, 100, 1000, 60)
    m = early_points._STEP.search(line)
    assert m and (m.group(1), m.group(2), m.group(3)) == ("100", "0.050", "0.789")
    bert = train_line({"loss": 7.0, "mlm_loss": 7.0, "masked_lm_accuracy": 0.05,
                       "learning_rate": 9e-4, "sequences_per_second": 71.0}, 100, 1000, 60)
    m = early_points._STEP.search(bert)  # a BERT-MLM variant: no discriminator, no AUC
    assert m and (m.group(1), m.group(2), m.group(3)) == ("100", "0.050", None)


@pytest.mark.parametrize("flag, message", [
    ("--pretrain_flag=--disc_weight=1", "--pretrain_flag needs --variant"),
    ("--finetune_seeds=0,x", "--finetune_seeds='0,x'"),
    ("--finetune_seeds=-1", "--finetune_seeds='-1'")])
def test_early_points_refuses_bad_flags_before_pretraining(tmp_path, flag, message):
    data = tmp_path / "w" / "data"
    data.mkdir(parents=True)
    (data / f"vocab_{study.SCALES['cpu']['vocab_size']}.txt").write_text("[PAD]\n")
    proc = run_module("studies.real_data.early_points", f"--work_dir={tmp_path}/w", flag)
    assert proc.returncode == 1, proc.stderr[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "w" / "cpu").exists()  # nothing run, nothing written


def test_early_points_table_means_over_finetune_seeds_and_the_gap_to_none():
    from studies.real_data import early_points

    tasks = ["a", "b"]
    rows = [early_points.summarize(dict(step=0, dev_accuracy={"a": {0: 0.6, 1: 0.8},
                                                              "b": {0: 0.5, 1: 0.5}}), tasks),
            early_points.summarize(dict(step=100, mlm_acc=0.1, disc_auc=0.6,
                                        dev_accuracy={"a": {0: 0.7, 1: 0.9},
                                                      "b": {0: 0.55, 1: 0.45}}), tasks),
            early_points.summarize(dict(step=200, dev_accuracy={"a": {0: 0.7, 1: None},
                                                                "b": {0: 0.6}}), tasks)]
    assert rows[0]["a"] == pytest.approx(0.7) and rows[0]["mean"] == pytest.approx(0.6)
    assert rows[1]["mean"] == pytest.approx(0.65)
    assert rows[2]["a"] is None and rows[2]["mean"] is None  # a seed without a result
    text = early_points.markdown(dict(command="c", date="d", machine="m",
                                      finetune_seeds=[0, 1], rows=rows), tasks)
    lines = text.splitlines()
    assert "the mean over fine-tuning seeds 0, 1" in lines[0]
    assert lines[4] == "| 0 |  |  |  |  | 0.700 | 0.500 | 0.600 |  |"
    assert lines[5] == "| 100 | 0.100 | 0.600 |  |  | 0.800 | 0.500 | 0.650 | +5.0 |"
    assert lines[6] == "| 200 |  |  |  |  |  | 0.600 |  |  |"
