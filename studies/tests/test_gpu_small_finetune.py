"""After the GPU lease: the driver that fine-tunes the lease's discriminators and a
random-initialized one (studies/gpu_small/finetune.py)."""

import hashlib
import json
import os
import subprocess
import sys

import pytest
from helpers import REPO

from studies.gpu_small import finetune, parts


def _results(**runs):
    base = {"steps_done": 90, "steps_planned": 120, "flops_done": 1.5e12,
            "steady_seq_per_s": 100.0, "parts_sha256": "ab" * 32,
            "eval": [{"step": 90, "masked_lm_accuracy": 0.25, "t_s": 12.0}],
            "train": [{"step": 10 * i, "loss": 10.0 - i, "seq_per_s": 9.0} for i in range(1, 10)]}
    return {"runs": {o: {**base, **runs.get(o, {})} for o in finetune.OBJECTIVES},
            "device": {"nvidia_smi": "a GPU"},
            "side_by_side": {"sum_steady_seq_per_s": 200.0}}


def test_runs_go_seed_by_seed_and_none_has_no_pretraining(tmp_path):
    runs = finetune.planned_runs(_results(electra={"steps_done": 60}), str(tmp_path), [0, 1],
                                 ["mr", "trec6"])
    assert len(runs) == 2 * 2 * 3
    assert [r["finetune_seed"] for r in runs] == [0] * 6 + [1] * 6
    assert [(r["task"], r["objective"]) for r in runs[:3]] == [
        ("mr", "none"), ("mr", "electra"), ("mr", "bert_mlm")]
    by = {(r["objective"], r["task"], r["finetune_seed"]): r for r in runs}
    none, electra = by[("none", "mr", 0)], by[("electra", "mr", 0)]
    assert (none["step"], none["flops"], none["fraction"]) == (0, 0, 0.0)
    assert (electra["step"], electra["fraction"]) == (60, 0.5)
    assert none["init_checkpoint"].endswith("none_s0")
    assert len({r["dir"] for r in runs}) == len(runs)
    some = finetune.planned_runs(_results(), str(tmp_path), [0], ["mr"], ("none", "electra"))
    assert [r["objective"] for r in some] == ["none", "electra"]  # --models


def run_on(folder):
    """The command with FOLDER as lease, tasks and vocab folder (task alpha)."""
    return subprocess.run([sys.executable, "-m", "studies.gpu_small.finetune",
                           f"--lease={folder}", f"--tasks_dir={folder}",
                           f"--work_dir={folder / 'w'}", f"--vocab_file={folder}/v",
                           "--tasks=alpha"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("content, message", [
    (None, "not found"), ("{", "is not JSON"), ("[]", "not a lease's results"),
    (json.dumps({"runs": {"electra": {"parts_sha256": "x"}}}), "no parts for bert_mlm")])
def test_a_bad_lease_folder_is_one_error_line(tmp_path, content, message):
    if content is not None:
        (tmp_path / "results.json").write_text(content)
    proc = run_on(tmp_path)
    assert proc.returncode == 2
    # the tasks are checked first: give one so the lease is what fails
    assert "tasks_dir" in proc.stderr
    (tmp_path / "alpha").mkdir()
    (tmp_path / "alpha" / "train.tsv").write_text("text\tlabel\n")
    (tmp_path / "alpha" / "dev.tsv").write_text("text\tlabel\n")
    (tmp_path / "v").write_text("[PAD]\n")
    proc = run_on(tmp_path)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], proc.stderr[-2000:]


def test_the_report_means_over_seeds_per_model(tmp_path):
    rows = [dict(objective=o, pretrain_seed=0, step=s, flops=0, task=t, finetune_seed=f,
                 dev_accuracy=acc + 0.1 * f)
            for o, s, acc in (("none", 0, 0.5), ("electra", 90, 0.7), ("bert_mlm", 90, 0.6))
            for t in ("mr", "trec6") for f in (0, 1)]
    text = finetune.report(_results(), rows, str(tmp_path / "r.md"), [0, 1, 2],
                           ["mr", "trec6"])
    assert (tmp_path / "r.md").read_text() == text
    electra = [x for x in text.splitlines() if x.startswith("| ELECTRA-Small")]
    pre, line = electra[0], electra[-1]
    assert pre == "| ELECTRA-Small | 90 / 120 | 1.5e+12 | 100 |"
    # 0.7 and 0.8: mean 75.0, std 7.1, 2 runs per task; mean over tasks the same
    assert line == "| ELECTRA-Small | 75.0 ± 7.1 (2) | 75.0 ± 7.1 (2) | 75.0 ± 7.1 (2) |"
    assert "results so far from seeds 0, 1 (12 runs)" in text
    assert "200 seq/s together" in text
    assert "| ELECTRA-Small | 90 | 12 | 0.250 | - | - |" in text
    # 9 lines: each once, first to last
    assert "- BERT-MLM Small: 10: 9.000, 20: 8.000, 30: 7.000, 40: 6.000, 50: 5.000," in text
    assert text.count(", 80: 2.000, 90: 1.000\n") == 2
    order = [x.split(" |")[0] for x in text.splitlines() if x.startswith("| ") and "(2)" in x]
    assert order == ["| random initialization (none)", "| ELECTRA-Small", "| BERT-MLM Small"]


def _write_task(folder, labels, n):
    folder.mkdir(parents=True)
    for split, size in (("train", n), ("dev", n // 2)):
        rows = [f"{labels[i % 2]} the {labels[i % 2]} of a\t{labels[i % 2]}" for i in range(size)]
        (folder / f"{split}.tsv").write_text("text\tlabel\n" + "\n".join(rows) + "\n")


@pytest.mark.slow
def test_join_finetune_report_at_toy_size_and_resume(tmp_path, tiny_vocab):
    """Two tiny discriminators as a lease brings them back (parts and results.json), one
    task, one seed: both joined, none and electra fine-tuned (--models; bert_mlm's run is
    the same command from its own folder), the table written; a rerun runs nothing."""
    from helpers import write_pretrained_dir

    lease_dir = tmp_path / "lease"
    lease_dir.mkdir()
    results = _results()
    for seed, o in enumerate(finetune.OBJECTIVES):
        folder = write_pretrained_dir(tmp_path / "pre" / o, tiny_vocab, seed=seed)
        paths = parts.split(folder, str(lease_dir / o), max_part_bytes=40_000)
        blob = b"".join(open(p, "rb").read() for p in paths)
        results["runs"][o]["parts_sha256"] = hashlib.sha256(blob).hexdigest()
    (lease_dir / "results.json").write_text(json.dumps(results))
    _write_task(tmp_path / "tasks" / "alpha", ["cat", "dog"], 40)
    out = tmp_path / "report"
    args = [sys.executable, "-m", "studies.gpu_small.finetune", f"--lease={lease_dir}",
            f"--tasks_dir={tmp_path / 'tasks'}", f"--work_dir={tmp_path / 'work'}",
            f"--vocab_file={tiny_vocab}", "--tasks=alpha", "--seeds=0",
            "--models=none,electra", f"--output_dir={out}"]
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    work = tmp_path / "work"
    configs = [json.loads((work / m / "discriminator_config.json").read_text())
               for m in ("electra", "bert_mlm", "none_s0")]
    assert configs[0] == configs[1] == configs[2]  # none: the same model, as initialized
    ledger = [json.loads(x) for x in (out / "ledger.jsonl").read_text().splitlines()]
    assert sorted(r["objective"] for r in ledger) == ["electra", "none"]
    assert all(0 <= r["dev_accuracy"] <= 1 and r["dev_size"] == 20 for r in ledger)
    assert not any(name.endswith(".weights.h5")
                   for _, _, files in os.walk(work / "finetune") for name in files)
    table = (out / "results.md").read_text()
    assert "Majority baselines (dev accuracy of the train split's most frequent label): " \
           "alpha 50.0%." in table
    assert table.count("(1) |") == 2 * 2  # two models: one task and the mean
    assert "| BERT-MLM Small | 90 / 120 |" in table  # the lease's numbers of both runs
    again = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "2 of 2 runs in the ledger, 0 to run" in again.stderr
    assert "dev accuracy" not in again.stderr
    # a part changed on the way is refused by its sha256, in one line
    import shutil

    shutil.rmtree(work / "electra")
    part = sorted(lease_dir.glob("electra.part-*"))[0]
    data = bytearray(part.read_bytes())
    data[-1] ^= 1
    part.write_bytes(bytes(data))
    bad = subprocess.run(args + ["--stage=join"], cwd=REPO, capture_output=True, text=True,
                         timeout=600)
    assert bad.returncode != 0
    assert "sha256" in bad.stderr.strip().splitlines()[-1], bad.stderr[-2000:]
    assert not (work / "electra" / "discriminator.weights.h5").exists()


def test_time_left_goes_by_training_examples_and_workers():
    done = [{"task": "small", "seconds": 100.0}, {"task": "big", "seconds": 300.0}]
    sizes = {"small": 1000, "big": 3000}  # 0.1 s an example
    pending = [{"task": "big"}, {"task": "big"}, {"task": "small"}]
    assert finetune.time_left(done, pending, sizes, workers=1) == pytest.approx(700.0)
    assert finetune.time_left(done, pending, sizes, workers=2) == pytest.approx(350.0)
    assert finetune.time_left(done, [], sizes, workers=2) == 0.0


def test_time_left_leaves_resumed_runs_out_of_the_rate(tmp_path, monkeypatch, capsys):
    """A resumed run's seconds cover only its rest: the rate comes from whole runs, the
    ledger's before this invocation and this invocation's."""
    _write_task(tmp_path / "tasks" / "alpha", ["cat", "dog"], 100)
    runs = [{"objective": o, "task": "alpha", "finetune_seed": 0,
             "dir": str(tmp_path / "ft" / o)} for o in ("none", "electra", "bert_mlm")]
    os.makedirs(os.path.join(runs[1]["dir"], "checkpoints"))  # electra: half done

    class Ledger:
        def finetune(self, r):
            return {"task": "alpha", "seconds": 100.0} if r["objective"] == "none" else None

    seconds = {"electra": 10.0, "bert_mlm": 100.0}
    monkeypatch.setattr(finetune.study, "finetune_one", lambda s, p, r, *a, **k: {
        "task": r["task"], "seconds": seconds[r["objective"]], "dev_accuracy": 0.5})
    assert finetune.finetune({}, str(tmp_path / "tasks"), runs, Ledger(), workers=1) == []
    lines = [x for x in capsys.readouterr().err.splitlines() if "dev accuracy" in x]
    assert "electra alpha seed 0: dev accuracy 0.5000 (10 s, resumed); 1/2 done, about " \
           "0:01:40 left" in lines[0]  # bert_mlm at none's 100 s, not electra's 10
    assert lines[1].endswith("2/2 done, about 0:00:00 left")


def test_majority_baseline_is_the_train_majority_on_dev(tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "train.tsv").write_text("text\tlabel\na\tx\nb\tx\nc\ty\n")
    (folder / "dev.tsv").write_text('text\tlabel\n"q\ty\nd\tx\ne\ty\nf\ty\n')  # a quote kept
    assert finetune.majority_baseline(str(tmp_path), "t") == pytest.approx(1 / 4)
