r"""After the lease: the two discriminators it brought back, and a random-initialized
one of the same size, fine-tuned on trec6, mr and vader_sst2 (README, "After the
lease"). Resumable: every finished run is one line of the ledger, and a rerun
skips what the ledger holds.

Run from the repository root (`studies` is not installed with electra_tf):

    python -m studies.gpu_small.finetune --lease=RESULTS --tasks_dir=../real_data_cache/tasks \
        --work_dir=../gpu_small --seeds=0,1,2

RESULTS is the folder the lease's files came back to (results.json and the
parts). Stages (--stage, comma-separated, all by default):

* join: each run's parts -> WORK_DIR/<objective>, a pre-training folder, checked
  against the sha256 results.json records (skipped where the folder exists);
  WORK_DIR/none_s0, a discriminator of the same config as initialized (seed 0).
* finetune: run_finetuning for every fine-tuning seed, task and model (--models,
  all three by default), seed by seed (so a cut-short sitting leaves whole
  seeds), --workers at a time, each in a folder of its own; the paper's Small
  fine-tuning (lr 3e-4, batch 32, 3 epochs, layer-wise decay 0.8, dropout 0.1
  from the discriminator's config, L=128 with batches cut to their longest
  example); the weights are dropped after the result is recorded.
* report: --output_dir/results.md: dev accuracy per model and task (mean ± std
  over the fine-tuning seeds), the mean over tasks, and the lease's pre-training
  numbers beside them.

The ledger (--ledger, default --output_dir/ledger.jsonl) is committed with the
report. Its settings id covers the fine-tuning settings and the parts' sha256,
so results of another lease's models are kept apart.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

from electra_tf.core.fileio import atomic_write_text  # noqa: E402
from studies.real_data import study  # noqa: E402
from studies.real_data.ledger import Ledger, settings_id  # noqa: E402

OBJECTIVES = ("electra", "bert_mlm")
MODELS = ("none",) + OBJECTIVES
TASKS = ("trec6", "mr", "vader_sst2")
LABELS = {"electra": "ELECTRA-Small", "bert_mlm": "BERT-MLM Small",
          "none": "random initialization (none)"}


def log(message: str) -> None:
    print(f"[gpu_small.finetune] {message}", file=sys.stderr, flush=True)


def read_lease(lease_dir: str) -> dict:
    """results.json of the lease, with each run's parts present; InputError otherwise."""
    from electra_tf.core.errors import InputError

    path = os.path.join(lease_dir, "results.json")
    try:
        with open(path, encoding="utf-8") as f:
            results = json.load(f)
    except FileNotFoundError:
        raise InputError(f"--lease: {path} not found (the folder the lease's files came "
                         "back to)") from None
    except ValueError as e:
        raise InputError(f"--lease: {path} is not JSON ({e})") from None
    if not isinstance(results, dict):
        raise InputError(f"--lease: {path} is not a lease's results (a JSON object)")
    runs = results.get("runs") or {}
    missing = [o for o in OBJECTIVES if not (runs.get(o) or {}).get("parts_sha256")]
    if missing:
        raise InputError(f"--lease: {path} has no parts for {', '.join(missing)} (the run "
                         "failed or was cut before its parts: see lease.log)")
    return results


def settings(results: dict, vocab_size: int) -> dict:
    """The fine-tuning settings (the study's GPU scale, on this machine's backend) and
    what identifies the models: the parts' sha256."""
    s = study.settings("small", {"mixed_precision": "fp32", "backend": "tensorflow",
                                 "run_timeout_s": 0, "vocab_size": vocab_size})
    s["model_hparam_overrides"] = {}  # none: the pre-trained configs' dropout 0.1
    s["parts_sha256"] = {o: results["runs"][o]["parts_sha256"] for o in OBJECTIVES}
    return s


def model_dir(work_dir: str, model: str) -> str:
    return os.path.join(work_dir, "none_s0" if model == "none" else model)


def join(results: dict, lease_dir: str, work_dir: str, vocab_file: str, s: dict) -> None:
    from studies.gpu_small import parts

    for o in OBJECTIVES:
        out = model_dir(work_dir, o)
        if os.path.exists(os.path.join(out, "discriminator_config.json")):
            log(f"join: {out} exists")
            continue
        parts.join(os.path.join(lease_dir, f"{o}.part-*"), out, vocab_file,
                   sha256=results["runs"][o]["parts_sha256"])
        log(f"join: {o} -> {out}")
    with open(os.path.join(model_dir(work_dir, "electra"), "discriminator_config.json")) as f:
        config = json.load(f)
    # the same config as the pre-trained ones (minus the format key), seed 0, written
    # where model_dir(work_dir, "none") reads it
    overrides = {k: v for k, v in config.items() if k not in ("format_version", "vocab_size")}
    none = study.write_random_init(dict(s, model_hparam_overrides=overrides),
                                   {"pretrain": work_dir, "vocab": vocab_file}, 0)
    log(f"join: none (random initialization, seed 0) -> {none}")


def planned_runs(results: dict, work_dir: str, seeds, tasks=TASKS,
                 models=MODELS) -> list[dict]:
    """Every fine-tuning run, seed by seed, then task by task, then model."""
    runs = []
    for fseed in seeds:
        for task in tasks:
            for m in models:
                run = results["runs"].get(m, {})
                runs.append(dict(
                    objective=m, pretrain_seed=0, task=task, finetune_seed=fseed,
                    step=int(run.get("steps_done", 0)), flops=int(run.get("flops_done", 0)),
                    fraction=(run["steps_done"] / run["steps_planned"]) if run else 0.0,
                    init_checkpoint=model_dir(work_dir, m),
                    dir=os.path.join(work_dir, "finetune", m, f"{task}_f{fseed}")))
    return runs


def split_size(tasks_dir: str, task: str, split: str) -> int:
    with open(os.path.join(tasks_dir, task, f"{split}.tsv"), encoding="utf-8") as f:
        return sum(1 for line in f if line.strip()) - 1  # the header


def majority_baseline(tasks_dir: str, task: str) -> float:
    """Dev accuracy of always answering the train split's most frequent label
    (study.majority_baseline; 0 for an empty dev split)."""
    import csv

    def labels(split):
        with open(os.path.join(tasks_dir, task, f"{split}.tsv"), newline="",
                  encoding="utf-8") as f:
            return [r["label"] for r in csv.DictReader(f, delimiter="\t",
                                                       quoting=csv.QUOTE_NONE)]

    dev = labels("dev")
    return study.majority_baseline(labels("train"), dev) if dev else 0.0


def time_left(done: list, pending: list, sizes: dict, workers: int) -> float:
    """Seconds left: the finished runs' seconds per training example, times the examples
    of the runs not finished, shared by the workers.

    `done`: ledger rows of whole runs (a resumed run's seconds cover only its rest:
    leave it out, or the rate is too low), with "task" and "seconds"."""
    rate = sum(r["seconds"] for r in done) / max(1, sum(sizes[r["task"]] for r in done))
    return rate * sum(sizes[r["task"]] for r in pending) / workers


def finetune(s: dict, tasks_dir: str, runs: list, ledger, workers: int) -> list:
    p = {"tasks": tasks_dir}
    pending = [r for r in runs if not ledger.finetune(r)]
    log(f"finetune: {len(runs) - len(pending)} of {len(runs)} runs in the ledger, "
        f"{len(pending)} to run, {workers} at a time")
    threads = max(1, (os.cpu_count() or 2) // workers) if workers > 1 else 0
    tasks = {r["task"] for r in runs}
    sizes = {t: split_size(tasks_dir, t, "train") for t in tasks}
    dev_sizes = {t: split_size(tasks_dir, t, "dev") for t in tasks}
    done, failed, left = [], [], list(pending)
    # The rate of time_left: whole runs, from the ledger and from this invocation.
    whole = [row for row in map(ledger.finetune, runs) if row]
    lock = threading.Lock()

    def one(r):
        os.makedirs(os.path.dirname(r["dir"]), exist_ok=True)
        resumed = os.path.isdir(os.path.join(r["dir"], "checkpoints"))
        result = study.finetune_one(s, p, r, dev_sizes[r["task"]], ledger, threads=threads)
        name = f"{r['objective']} {r['task']} seed {r['finetune_seed']}"
        with lock:
            left.remove(r)
            if "error" in result and study.stopping():
                log(f"{name}: stopped ({result['error']})")
                return result
            if "error" in result:
                failed.append(name)
                log(f"{name}: {result['error']}")
                return result
            done.append(result)
            if not resumed:
                whole.append(result)
            log(f"{name}: dev accuracy {result['dev_accuracy']:.4f} ({result['seconds']:.0f} "
                f"s{', resumed' if resumed else ''}); {len(done)}/{len(pending)} done, about "
                f"{study.hms(time_left(whole or done, left, sizes, workers))} left")
        return result

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, pending))
    return failed


def table(rows: list[dict], tasks=TASKS) -> list[str]:
    agg = study.aggregate(rows, tasks)
    lines = ["| dev accuracy (%), mean ± std (runs) | " + " | ".join(tasks)
             + " | mean over tasks |", "|---|" + "---:|" * (len(tasks) + 1)]
    for m in MODELS:
        key = next((k for k in agg if k[0] == m), None)
        if key is None:
            continue
        a = agg[key]
        lines.append(f"| {LABELS[m]} | " + " | ".join(study._fmt(a["tasks"][t]) for t in tasks)
                     + f" | {study._fmt(a['mean'])} |")
    return lines


def report(results: dict, rows: list[dict], output: str, seeds, tasks=TASKS,
           baselines: dict | None = None) -> str:
    lines = ["# After the lease: fine-tuning the lease's discriminators", "",
             "Written by `python -m studies.gpu_small.finetune` (README, \"After the lease\").",
             "", "## Pre-training (the lease)", "",
             "| run | steps done / planned | FLOPs | steady seq/s |", "|---|---|---:|---:|"]
    for o in OBJECTIVES:
        run = results["runs"][o]
        lines.append(f"| {LABELS[o]} | {run['steps_done']:,} / {run['steps_planned']:,} | "
                     f"{run['flops_done']:.3g} | {run['steady_seq_per_s']:,.0f} |")
    lines += ["", "Held-out evaluations (the runs' own, on the bundle's held-out sequences):", "",
              "| run | step | s into the run | masked-LM accuracy | disc AUC | disc accuracy |",
              "|---|---:|---:|---:|---:|---:|"]
    for o in OBJECTIVES:
        for e in results["runs"][o].get("eval") or []:
            cells = [f"{e[k]:.3f}" if k in e else "-"
                     for k in ("masked_lm_accuracy", "disc_auc", "disc_accuracy")]
            lines.append(f"| {LABELS[o]} | {e['step']:,} | {e.get('t_s', 0):.0f} | "
                         + " | ".join(cells) + " |")
    lines += ["", "Training loss at tenths of each run (step: loss):", ""]
    for o in OBJECTIVES:
        train = results["runs"][o].get("train") or []
        picks = [train[i] for i in dict.fromkeys(round(k * (len(train) - 1) / 10)
                                                 for k in range(11))] if train else []
        lines.append(f"- {LABELS[o]}: " + (", ".join(
            f"{x['step']:,}: {x['loss']:.3f}" for x in picks) or "none logged"))
    sbs = results.get("side_by_side")
    if sbs:
        lines += ["", f"Side by side on one GPU: {sbs['sum_steady_seq_per_s']:,.0f} seq/s "
                      f"together ({results['device'].get('nvidia_smi', '')})."]
    done_seeds = sorted({int(r["finetune_seed"]) for r in rows})
    lines += ["", "## Fine-tuning (CPU)", "",
              f"Fine-tuning seeds {', '.join(map(str, seeds))} planned; results so far from "
              f"seeds {', '.join(map(str, done_seeds)) or 'none'} ({len(rows)} runs).", ""]
    lines += table(rows, tasks)
    if baselines:
        lines += ["", "Majority baselines (dev accuracy of the train split's most frequent "
                      "label): " + ", ".join(f"{t} {100 * baselines[t]:.1f}%" for t in tasks)
                  + "."]
    text = "\n".join(lines) + "\n"
    atomic_write_text(output, text)
    return text


def main(argv=None) -> int:
    import argparse

    from electra_tf.core.errors import InputError

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lease", required=True, help="the folder the lease's files came back to")
    ap.add_argument("--tasks_dir", required=True, help="studies/real_data/prepare_tasks output")
    ap.add_argument("--work_dir", required=True, help="the models and the runs' folders")
    ap.add_argument("--vocab_file", default=os.path.join(REPO_ROOT, ".bundle", "vocab.txt"))
    ap.add_argument("--seeds", default="0,1,2", help="fine-tuning seeds")
    ap.add_argument("--tasks", default=",".join(TASKS), help="tasks of --tasks_dir")
    ap.add_argument("--models", default=",".join(MODELS), help="the models fine-tuned (join "
                    "writes all three)")
    ap.add_argument("--stage", default="join,finetune,report")
    ap.add_argument("--workers", type=int, default=1, help="runs at a time")
    ap.add_argument("--output_dir", default=os.path.join(REPO_ROOT, "studies", "gpu_small",
                                                         "results"))
    ap.add_argument("--ledger", default="", help="default: OUTPUT_DIR/ledger.jsonl")
    args = ap.parse_args(argv)
    try:
        stages = [x for x in args.stage.split(",") if x]
        unknown = set(stages) - {"join", "finetune", "report"}
        if unknown or not stages:
            raise InputError(f"--stage: unknown stage(s) {sorted(unknown)}; known: join, "
                             "finetune, report")
        if args.workers < 1:
            raise InputError(f"--workers must be >= 1, got {args.workers}")
        seeds = study.parse_seeds(args.seeds, "--seeds")
        tasks = [t for t in args.tasks.split(",") if t]
        if not tasks:
            raise InputError("--tasks: give at least one task")
        models = [m for m in MODELS if m in args.models.split(",")]
        unknown = set(args.models.split(",")) - set(MODELS)
        if unknown or not models:
            raise InputError(f"--models: among {', '.join(MODELS)} (got {args.models!r})")
        for t in tasks:
            for split in ("train", "dev"):
                if not os.path.exists(os.path.join(args.tasks_dir, t, f"{split}.tsv")):
                    raise InputError(f"--tasks_dir: {args.tasks_dir}/{t}/{split}.tsv not found "
                                     "(build it with studies/real_data/prepare_tasks.py)")
        if not os.path.isfile(args.vocab_file):
            raise InputError(f"--vocab_file: {args.vocab_file} not found (the bundle's vocab)")
        results = read_lease(args.lease)
        s = settings(results, study.vocab_size_of(args.vocab_file))
        ledger = Ledger(args.ledger or os.path.join(args.output_dir, "ledger.jsonl"),
                        settings_id(s, s["vocab_size"]))
        failed = []
        if "join" in stages:
            join(results, args.lease, args.work_dir, args.vocab_file, s)
        if "finetune" in stages:
            study.forward_stop_signals()
            failed = finetune(s, args.tasks_dir,
                              planned_runs(results, args.work_dir, seeds, tasks, models),
                              ledger, args.workers)
        if study.stopping():
            log("stopped by a signal; the runs saved where they were: the same command "
                "resumes")
            return study.stopped_exit_code()
        if "report" in stages:
            text = report(results, ledger.finetune_rows(),
                          os.path.join(args.output_dir, "results.md"), seeds, tasks,
                          {t: majority_baseline(args.tasks_dir, t) for t in tasks})
            print(text)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if failed:
        log(f"{len(failed)} run(s) failed: {', '.join(failed)}; rerun to retry them")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
