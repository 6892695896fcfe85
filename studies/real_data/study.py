r"""ELECTRA against BERT-style masked-LM pre-training, and against no pre-training,
on real text and real tasks, for the same pre-training compute (issue #20).

Run from the repository root (`studies` is not installed with electra_tf):

    # the CPU study (about 2.5-3 h of pre-training, 5 h of fine-tuning on 2 cores)
    nohup nice -n 19 python -m studies.real_data.study \
        --work_dir=../real_data_cache/study --stage=prepare,pretrain,finetune,report \
        > ../real_data_cache/study/run.log 2>&1 &

    # the plan (sizes, FLOPs per step, steps, checkpoint points, runs, hours) alone
    python -m studies.real_data.study --work_dir=../real_data_cache/study --plan

    # the GPU version (ELECTRA-Small sizes, JAX backend): every run's command line
    python -m studies.real_data.study --scale=small \
        --work_dir=../real_data_cache/study --print_commands

Stages (--stage, comma-separated):

* prepare: a WordPiece vocab learned from --corpus (build_vocab), pre-training
  records of it and held-out records of --heldout (build_pretraining_data), and
  per task of --tasks_dir a copy whose train split is a seeded subsample of at
  most --train_cap examples (meta.json records the sizes and the seed).
* pretrain: per objective (electra, bert_mlm) and seed, run_pretraining in a
  subprocess with the SAME pre-training FLOPs: the budget is the ELECTRA run's
  steps times its FLOPs per step (benchmarks/bench_common.py's analytic count),
  and BERT-MLM, whose step is cheaper, gets budget / its FLOPs per step.
  Checkpoints are saved at --points equal fractions of each run's steps (so
  at equal FLOPs fractions for both objectives) and all kept.
* finetune: per pre-trained checkpoint point, and for `none` (a randomly
  initialized discriminator of the same size: one point at 0 FLOPs, its
  initialization seeded by the "pre-training" seed), run_finetuning on every
  task with every fine-tuning seed, each in a subprocess and a folder of its own.
* report: results.csv, results.md and (with matplotlib) results.png in --output_dir.

The study runs seed by seed: `none`'s fine-tuning, then each objective's
pre-training run followed at once by the fine-tuning of its final point, then
the seed's earlier points. Every finished run's
result goes to the ledger (--ledger, default OUTPUT_DIR/ledger.jsonl, see
ledger.py), which is committed with the report: a later sitting, on this
machine or on a fresh one without the work directory's checkpoints, skips the
results the ledger holds, and pre-trains again only a run some of whose
fine-tuning is still to do. Within a sitting, a run killed mid-way is rerun by
the same command, and the library resumes it from its latest checkpoint. A
SIGTERM or Ctrl-C to the driver goes on to its runs, once each
(forward_stop_signals): they save and write their last lines to their logs, and
the driver starts nothing new and exits 128 + the signal.
Progress lines (elapsed time, ETA) go to stderr.
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO_ROOT not in sys.path:  # benchmarks/ is a folder of scripts, not a package
    sys.path.insert(0, REPO_ROOT)

from benchmarks.bench_common import cpu_model  # noqa: E402
from studies.real_data.ledger import Ledger, settings_id  # noqa: E402

OBJECTIVES = ("electra", "bert_mlm")
TASKS = ("trec6", "mr", "vader_sst2")
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}

# Settings per --scale: studies/real_data/FINDINGS.md ("Setup"); the reasons for each are in
# the study's notebook (git show e049d36:benchmarks/real_data/README.md, "Settings").
# Every scale plans its FLOPs with the product's count (flops_per_sequence); the key
# changes the settings id, so that runs planned with the earlier count (the recorded
# ledger's) are not mixed with new ones.
FLOPS_COUNT = "flops_computation"
SCALES = {
    # 2 CPU cores: a 4-layer, 256-wide discriminator (ELECTRA-Small's width and
    # embedding size, a third of its depth), generator 1/4 of D's width.
    "cpu": dict(
        flops_count=FLOPS_COUNT,
        vocab_size=16000, max_seq_length=128, num_shards=8,
        model_size="tiny",  # the preset the overrides start from (bias-corrected Adam)
        model_hparam_overrides=dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                    intermediate_size=1024, embedding_size=128, **NO_DROPOUT),
        generator_hidden_size=0.25, train_batch_size=64, learning_rate=1e-3,
        # ELECTRA's run is studies/real_data/real_data_cpu.flags, the 30-minute CPU recipe
        warmup_fraction=0.1, electra_steps=1000, points=4, mixed_precision="fp32",
        backend="tensorflow", num_eval_steps=20, log_every_steps=50,
        # 10 epochs: with 2 (74 steps) neither a pre-trained nor a random model
        # leaves the majority class on mr (README, "First results")
        ft_max_seq_length=64, ft_batch_size=32, ft_learning_rate=3e-4, ft_epochs=10,
        train_cap=1200, dev_cap=0, run_timeout_s=0, finetune_workers=2,
        point_finetune_seeds=1,  # the 25/50/75% points: the first fine-tuning seed only
        # throughput at full use of 2 cores, from short runs (README), for the plan and ETA
        # (190: the 140 GFLOP/s measured in the 3 x forward-matmul count, x 1.35, what the
        # original's count adds to ELECTRA's step; an estimate, for the ETA only)
        pretrain_gflops_per_s=190.0, pretrain_overhead_s=60.0,
        finetune_examples_per_s=60.0, process_overhead_s=25.0),
    # A GPU: ELECTRA-Small (paper Table 6), JAX backend, bf16; not run here.
    "small": dict(
        flops_count=FLOPS_COUNT,
        vocab_size=30522, max_seq_length=128, num_shards=32,
        model_size="small", model_hparam_overrides=dict(NO_DROPOUT),
        generator_hidden_size=0.25, train_batch_size=128, learning_rate=5e-4,
        warmup_fraction=0.1, electra_steps=40000, points=4, mixed_precision="bf16",
        backend="jax", num_eval_steps=100, log_every_steps=500,
        ft_max_seq_length=128, ft_batch_size=32, ft_learning_rate=3e-4, ft_epochs=3,
        train_cap=0, dev_cap=0, run_timeout_s=3 * 3600, finetune_workers=1,
        point_finetune_seeds=0,
        pretrain_gflops_per_s=45000.0, pretrain_overhead_s=120.0,
        finetune_examples_per_s=1500.0, process_overhead_s=40.0),
    # The wiring at a toy scale, for the tests.
    "toy": dict(
        flops_count=FLOPS_COUNT,
        vocab_size=400, max_seq_length=32, num_shards=2, model_size="tiny",
        model_hparam_overrides=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=1,
                                    intermediate_size=64, embedding_size=32, **NO_DROPOUT),
        generator_hidden_size=0.5, train_batch_size=8, learning_rate=1e-3,
        warmup_fraction=0.1, electra_steps=4, points=2, mixed_precision="fp32",
        backend="tensorflow", num_eval_steps=1, log_every_steps=1,
        ft_max_seq_length=32, ft_batch_size=8, ft_learning_rate=1e-3, ft_epochs=1,
        train_cap=24, dev_cap=16, run_timeout_s=0, finetune_workers=2,
        point_finetune_seeds=1,
        pretrain_gflops_per_s=5.0, pretrain_overhead_s=20.0,
        finetune_examples_per_s=200.0, process_overhead_s=10.0),
}


def log(message: str) -> None:
    print(f"[study] {message}", file=sys.stderr, flush=True)


def parse_seeds(text: str, flag: str) -> list[int]:
    """A comma-separated list of seeds (integers >= 0), in the given order without
    repeats; anything else is an InputError naming the flag."""
    from electra_tf.core.errors import InputError

    try:
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        seeds = [-1]
    if not seeds or min(seeds) < 0:
        raise InputError(f"{flag}={text!r}: give comma-separated seeds >= 0, e.g. 0,1,2")
    return list(dict.fromkeys(seeds))


def hms(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


# === Pure helpers: model sizes, FLOPs, the step plan, aggregation ===

def pretraining_config(s: dict, objective: str, vocab_size: int, steps: int = 1000):
    """The PretrainingConfig a run of `objective` at scale `s` uses."""
    from electra_tf.core.config import PretrainingConfig

    return PretrainingConfig(
        model_size=s["model_size"], model_hparam_overrides=dict(s["model_hparam_overrides"]),
        vocab_size=vocab_size, objective=objective, max_seq_length=s["max_seq_length"],
        generator_hidden_size=s["generator_hidden_size"], train_batch_size=s["train_batch_size"],
        num_train_steps=steps)


def flops_per_sequence(config) -> float:
    """Training FLOPs of one pre-training sequence of `config` (a PretrainingConfig): the
    product's count (electra_tf.objectives.flops, the original's flops_computation.py:
    every operation, dense embedding lookups, backward = forward), for any objective.

    The ledger's recorded runs (settings without "flops_count") were planned with
    3 x the forward matmuls instead (FINDINGS.md, "Setup").
    """
    from electra_tf.objectives.flops import pretraining_flops

    return pretraining_flops(config).flops_per_step / config.train_batch_size


def flops_per_step(s: dict, objective: str, vocab_size: int) -> int:
    config = pretraining_config(s, objective, vocab_size)
    return int(round(flops_per_sequence(config) * config.train_batch_size))


def step_plan(budget_flops: float, step_flops: float, points: int) -> dict:
    """Steps for a FLOPs budget, a multiple of `points`, and the checkpoint points.

    Returns {"steps", "save_every", "points": [{"step", "flops", "fraction"}]}:
    checkpoints every steps/points steps, so at equal fractions of the budget.
    """
    if budget_flops <= 0 or step_flops <= 0 or points < 1:
        raise ValueError("budget, FLOPs per step and points must be positive")
    every = max(1, round(budget_flops / step_flops / points))
    return {"steps": every * points, "save_every": every, "flops_per_step": int(step_flops),
            "points": [{"step": k * every, "flops": int(k * every * step_flops),
                        "fraction": k / points} for k in range(1, points + 1)]}


def study_plan(s: dict, objectives, vocab_size: int) -> dict:
    """{objective: step_plan}: ELECTRA's steps set the budget; every objective gets it."""
    electra_step = flops_per_step(s, "electra", vocab_size)
    budget = s["electra_steps"] * electra_step
    return {o: step_plan(budget, flops_per_step(s, o, vocab_size), s["points"])
            for o in objectives}


def mean_std(values) -> tuple[float, float, int]:
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return float("nan"), float("nan"), 0
    return (statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0,
            len(values))


def aggregate(rows: list[dict], tasks) -> dict:
    """Results rows -> per (objective, step): per-task and mean-over-tasks statistics.

    Returns {(objective, step): {"flops", "tasks": {task: (mean, std, n)},
    "mean": (mean, std, n), "seed_means": {pretrain_seed: mean over tasks and
    fine-tuning seeds}}}. The mean over tasks is taken per (pretrain seed,
    fine-tuning seed) run set that has every task, then over those sets.
    """
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["objective"], int(r["step"])), []).append(r)
    out = {}
    for key, group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        per_task = {t: mean_std([float(r["dev_accuracy"]) for r in group if r["task"] == t])
                    for t in tasks}
        by_run: dict = {}
        for r in group:
            by_run.setdefault((int(r["pretrain_seed"]), int(r["finetune_seed"])), {})[
                r["task"]] = float(r["dev_accuracy"])
        complete = {k: statistics.fmean(v[t] for t in tasks) for k, v in by_run.items()
                    if all(t in v for t in tasks)}
        seed_means: dict = {}
        for (pseed, _), v in complete.items():
            seed_means.setdefault(pseed, []).append(v)
        out[key] = {"flops": int(group[0]["flops"]), "tasks": per_task,
                    "mean": mean_std(complete.values()),
                    "seed_means": {k: statistics.fmean(v) for k, v in sorted(seed_means.items())}}
    return out


def difference(a: dict, b: dict) -> tuple[float, float]:
    """Mean of a's pre-training-seed means minus b's, and its standard error
    (NaN while either side has fewer than 2 pre-training seeds: no spread yet)."""
    ma, sa, na = mean_std(a["seed_means"].values())
    mb, sb, nb = mean_std(b["seed_means"].values())
    if not na or not nb:
        return float("nan"), float("nan")
    if na < 2 or nb < 2:
        return ma - mb, float("nan")
    return ma - mb, math.sqrt(sa * sa / na + sb * sb / nb)


# === Settings and paths ===

def settings(scale: str, overrides: dict | None = None) -> dict:
    s = dict(SCALES[scale], scale=scale)
    s.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return s


def paths(work_dir: str, s: dict) -> dict:
    data = os.path.join(work_dir, "data")
    tag = f"{s['vocab_size']}_L{s['max_seq_length']}"
    runs = os.path.join(work_dir, s["scale"])
    return {"data": data, "vocab": os.path.join(data, f"vocab_{s['vocab_size']}.txt"),
            "records": os.path.join(data, f"records_{tag}"),
            "heldout_records": os.path.join(data, f"heldout_{tag}"),
            "tasks": os.path.join(runs, "tasks"), "runs": runs,
            "pretrain": os.path.join(runs, "pretrain"), "finetune": os.path.join(runs, "finetune")}


def vocab_size_of(vocab_file: str) -> int:
    with open(vocab_file, encoding="utf-8") as f:
        return sum(1 for line in f if line.rstrip("\n"))


# === Subprocesses ===

def _env(backend: str, threads: int = 0) -> dict:
    path = os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONUNBUFFERED="1", PYTHONPATH=path,
               TF_CPP_MIN_LOG_LEVEL="2")
    if threads:  # TensorFlow's (and OpenMP's) intra-op pool: one per parallel worker
        env.update(TF_NUM_INTRAOP_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    return env


_RELAY = re.compile(r"step \d+/\d+|epoch \d+ step|\bdev: |eval at step|\[build_|^error:|Error\b")


# === Stopping a driver ===
# The runs run_logged has started and not yet seen exit, and the signals that came.
_LIVE: set = set()
_SIGNALLED: set = set()  # runs a signal was forwarded to
_LIVE_LOCK = threading.RLock()  # the handler runs in the main thread, maybe inside it
_SIGNALS: list = []
_forwarding = False  # forward_stop_signals is installed


def forward_stop_signals() -> None:
    """SIGTERM and Ctrl-C (SIGINT) to this driver go on to the runs it is running,
    each signal once to each run, and the driver starts no new run (`stopping()`).
    A run saves at the end of its chunk and exits (the product's own handling; a
    second signal, the product's second-signal stop), while run_logged keeps
    writing its output to its log. The runs have sessions of their own, so a signal
    to the driver's process group or terminal reaches them only this way, once.
    Without this, the driver died at once and the runs' last lines (what they
    saved) went nowhere. Call in the driver's main thread."""

    def forward(signum, frame):
        _SIGNALS.append(signum)
        with _LIVE_LOCK:
            procs = list(_LIVE)
            for proc in procs:
                _send(proc, signum)
        if len(_SIGNALS) == 1:
            print(f"[study] {signal.Signals(signum).name}: waiting for {len(procs)} run(s) to "
                  "save and exit; the same command resumes", file=sys.stderr, flush=True)

    global _forwarding
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    _forwarding = True


def _send(proc, signum) -> None:
    _SIGNALLED.add(proc)
    try:
        proc.send_signal(signum)
    except ProcessLookupError:
        pass


def stopping() -> bool:
    """Whether a stop signal came (forward_stop_signals): start nothing new."""
    return bool(_SIGNALS)


def stopped_exit_code() -> int:
    """128 + the first stop signal, what a driver that stopped exits with."""
    return 128 + _SIGNALS[0]


def run_logged(cmd: list, log_path: str, backend: str = "tensorflow", timeout_s: float = 0,
               relay_every_s: float = 30.0, prefix: str = "", threads: int = 0) -> tuple[int, str]:
    """Runs cmd, its output appended to log_path; relays progress lines (at most
    one per relay_every_s, and every error) to stderr. Returns (exit code, output)."""
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    lines: list[str] = []
    last = 0.0
    if stopping():
        return stopped_exit_code(), "error: not started: the study was stopped\n"
    with open(log_path, "a", encoding="utf-8") as logf:
        logf.write(f"# {datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} UTC: "
                   + " ".join(cmd) + "\n")
        with _LIVE_LOCK:  # a stop signal from here on reaches the run (forward_stop_signals)
            proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, env=_env(backend, threads),
                                    text=True, start_new_session=_forwarding)
            _LIVE.add(proc)
            if stopping() and proc not in _SIGNALLED:  # it came while the run started
                _send(proc, _SIGNALS[0])
        timer = threading.Timer(timeout_s, proc.kill) if timeout_s else None
        if timer:
            timer.start()
        try:
            for line in proc.stdout:
                logf.write(line)
                logf.flush()
                lines.append(line)
                now = time.monotonic()
                urgent = line.startswith("error:") or "Traceback" in line
                if line[:1].isdigit():  # TensorFlow's C++ log lines (date first): log only
                    continue
                if urgent or _RELAY.search(line) and now - last >= relay_every_s:
                    last = now
                    print(f"    {prefix}{line.rstrip()}", file=sys.stderr, flush=True)
            proc.wait()
        finally:
            if timer:
                timer.cancel()
            with _LIVE_LOCK:
                _LIVE.discard(proc)
                _SIGNALLED.discard(proc)
    return proc.returncode, "".join(lines)


def last_error(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:") or "Error" in ln]
    return (errors or lines or ["no output"])[-1][:300]


class Eta:
    """Elapsed time and ETA over planned seconds, rescaled by the observed pace."""

    def __init__(self, planned_total: float):
        self.t0 = time.monotonic()
        self.planned_total = planned_total
        self.planned_done = 0.0
        self.actual_done = 0.0

    def done(self, planned: float, actual: float) -> None:
        self.planned_done += planned
        self.actual_done += actual

    def line(self) -> str:
        left = max(0.0, self.planned_total - self.planned_done)
        pace = self.actual_done / self.planned_done if self.planned_done > 0 else 1.0
        return f"elapsed {hms(time.monotonic() - self.t0)}, ETA {hms(left * pace)}"


# === Stage: prepare ===

def prepare(s: dict, p: dict, corpus: str, heldout: str, tasks_dir: str, tasks) -> None:
    os.makedirs(p["data"], exist_ok=True)
    py = [sys.executable, "-m"]
    if not os.path.exists(p["vocab"]):
        log(f"vocab: learning {s['vocab_size']:,} WordPieces from {corpus}")
        code, out = run_logged(py + ["electra_tf.build_vocab", f"--corpus={corpus}",
                                     f"--vocab_size={s['vocab_size']}", f"--output={p['vocab']}",
                                     f"--min_count={2 if s['scale'] == 'toy' else 10}"],
                               p["vocab"] + ".log")
        if code:
            raise RuntimeError(f"build_vocab exit {code}: {last_error(out)}")
    log(f"vocab: {vocab_size_of(p['vocab']):,} tokens ({p['vocab']})")
    for name, source, shards in (("records", corpus, s["num_shards"]),
                                 ("heldout_records", heldout, 1)):
        stats = os.path.join(p[name], "pretrain_data_stats.json")
        if not os.path.exists(stats):
            log(f"{name}: building from {source} (L={s['max_seq_length']}, {shards} shards)")
            code, out = run_logged(
                py + ["electra_tf.build_pretraining_data", f"--corpus={source}",
                      f"--vocab_file={p['vocab']}", f"--output_dir={p[name]}",
                      f"--max_seq_length={s['max_seq_length']}", f"--num_shards={shards}",
                      f"--num_processes={min(2, shards)}", "--seed=0", "--overwrite"],
                p[name] + ".log")
            if code:
                raise RuntimeError(f"build_pretraining_data exit {code}: {last_error(out)}")
        with open(stats) as f:
            st = json.load(f)
        log(f"{name}: {_count(st, 'examples'):,} sequences of {s['max_seq_length']} ({p[name]})")
    for task in tasks:
        prepare_task(os.path.join(tasks_dir, task), os.path.join(p["tasks"], task),
                     s["train_cap"], s["dev_cap"], seed=0)


def _count(stats: dict, key: str) -> int:
    for k in (key, "num_examples", "total_examples"):
        if isinstance(stats.get(k), int):
            return stats[k]
    return sum(v.get(key, 0) for v in stats.get("per_shard", {}).values()
               if isinstance(v, dict)) if isinstance(stats.get("per_shard"), dict) else -1


def _read_tsv(path: str) -> tuple[str, list[str]]:
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    return lines[0], [ln for ln in lines[1:] if ln.strip()]


def subsample(rows: list, cap: int, seed: int, name: str) -> list:
    """At most `cap` rows (0: all), a seeded random choice kept in the file's order."""
    if not cap or len(rows) <= cap:
        return list(rows)
    chosen = sorted(random.Random(f"{name}-{seed}").sample(range(len(rows)), cap))
    return [rows[i] for i in chosen]


def majority_label(train_labels: list) -> str:
    """The most frequent label (ties: the first in sorted order)."""
    return max(sorted(set(train_labels)), key=train_labels.count)


def majority_baseline(train_labels: list, dev_labels: list) -> float:
    """The dev accuracy of always answering the train split's majority_label, to 4
    digits (meta.json's majority_baseline_dev)."""
    return round(dev_labels.count(majority_label(train_labels)) / len(dev_labels), 4)


def prepare_task(source: str, dest: str, train_cap: int, dev_cap: int, seed: int) -> dict:
    """dest/{train,dev}.tsv (train capped by a seeded subsample) and meta.json."""
    from electra_tf.core.errors import InputError

    meta_path = os.path.join(dest, "meta.json")
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            return json.load(f)
    for split in ("train", "dev"):
        if not os.path.exists(os.path.join(source, f"{split}.tsv")):
            raise InputError(f"task folder {source} has no {split}.tsv (run "
                             "studies/real_data/prepare_tasks.py, or pass --tasks_dir)")
    os.makedirs(dest, exist_ok=True)
    meta = {"source": os.path.abspath(source), "subsample_seed": seed}
    kept = {}
    for split, cap in (("train", train_cap), ("dev", dev_cap)):
        header, rows = _read_tsv(os.path.join(source, f"{split}.tsv"))
        if header.split("\t")[-1] != "label":
            raise InputError(f"{source}/{split}.tsv: header {header!r} is not text<TAB>label")
        kept[split] = subsample(rows, cap, seed, f"{os.path.basename(source)}-{split}")
        with open(os.path.join(dest, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("\n".join([header] + kept[split]) + "\n")
        meta[f"{split}_size_full"], meta[f"{split}_size"], meta[f"{split}_cap"] = (
            len(rows), len(kept[split]), cap)
    train_labels = [r.rsplit("\t", 1)[1] for r in kept["train"]]
    dev_labels = [r.rsplit("\t", 1)[1] for r in kept["dev"]]
    meta.update(majority_label=majority_label(train_labels), labels=sorted(set(train_labels)),
                majority_baseline_dev=majority_baseline(train_labels, dev_labels))
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1)
    log(f"task {os.path.basename(dest)}: train {meta['train_size']:,} of "
        f"{meta['train_size_full']:,} (seed {seed}), dev {meta['dev_size']:,}, majority "
        f"baseline {meta['majority_baseline_dev']:.3f}")
    return meta


# === Stage: pretrain ===

def pretrain_command(s: dict, p: dict, objective: str, seed: int, plan: dict) -> list:
    steps = plan["steps"]
    cmd = [sys.executable, "-m", "electra_tf.run_pretraining",
           f"--model_dir={pretrain_dir(p, objective, seed)}",
           f"--train_data={p['records']}/pretrain_data.tfrecord*",
           f"--eval_data={p['heldout_records']}/pretrain_data.tfrecord*",
           f"--vocab_file={p['vocab']}", f"--vocab_size={vocab_size_of(p['vocab'])}",
           f"--model_size={s['model_size']}",
           f"--model_hparam_overrides={json.dumps(s['model_hparam_overrides'])}",
           f"--objective={objective}", f"--max_seq_length={s['max_seq_length']}",
           f"--generator_hidden_size={s['generator_hidden_size']}",
           f"--learning_rate={s['learning_rate']}",
           f"--num_warmup_steps={max(1, int(steps * s['warmup_fraction']))}",
           f"--train_batch_size={s['train_batch_size']}",
           f"--eval_batch_size={s['train_batch_size']}", f"--num_train_steps={steps}",
           f"--iterations_per_loop={math.gcd(plan['save_every'], s['log_every_steps'])}",
           f"--log_every_steps={math.gcd(plan['save_every'], s['log_every_steps'])}",
           f"--save_checkpoints_steps={plan['save_every']}",
           f"--keep_checkpoint_max={s['points'] + 1}",
           f"--num_eval_steps={s['num_eval_steps']}", f"--seed={seed}",
           f"--mixed_precision={s['mixed_precision']}", "--adam_bias_correction=true"]
    return cmd


def pretrain_dir(p: dict, objective: str, seed: int) -> str:
    return os.path.join(p["pretrain"], f"{objective}_s{seed}")


def checkpoint_path(model_dir: str, step: int) -> str | None:
    """MODEL_DIR/checkpoints/ckpt-N (TensorFlow) or jax-ckpt-N.npz, if saved."""
    ckpt = os.path.join(model_dir, "checkpoints")
    if os.path.exists(os.path.join(ckpt, f"ckpt-{step}.index")):
        return os.path.join(ckpt, f"ckpt-{step}")
    if os.path.exists(os.path.join(ckpt, f"jax-ckpt-{step}.npz")):
        return os.path.join(ckpt, f"jax-ckpt-{step}.npz")
    return None


def final_eval(output: str) -> dict:
    from electra_tf.training.reporting import parse_eval_line

    found = {}
    for line in output.splitlines():
        parsed = parse_eval_line(line)
        if parsed:
            found = parsed[1]
    return found


def planned_pretrain_s(s: dict, plan: dict) -> float:
    return (plan["steps"] * plan["flops_per_step"] / 1e9 / s["pretrain_gflops_per_s"]
            + s["pretrain_overhead_s"])


def pretrain_one(s: dict, p: dict, objective: str, seed: int, plan: dict, ledger) -> dict:
    """Runs (or resumes) one pre-training run; its record goes to the ledger."""
    model_dir = pretrain_dir(p, objective, seed)
    record_path = os.path.join(model_dir, "study_record.json")
    if os.path.exists(record_path):
        with open(record_path) as f:
            record = json.load(f)
        if not ledger.pretrain(objective, seed):
            ledger.add("pretrain", record)
        return record
    t0 = time.monotonic()
    code, out = run_logged(pretrain_command(s, p, objective, seed, plan),
                           os.path.join(model_dir + "_logs", "pretrain.log"), s["backend"],
                           s["run_timeout_s"], prefix=f"{objective} s{seed}: ")
    missing = [pt["step"] for pt in plan["points"] if not checkpoint_path(model_dir, pt["step"])]
    if code or missing:
        return {"error": f"run_pretraining exit {code}"
                         + (f", checkpoints missing at steps {missing}" if missing else "")
                         + f": {last_error(out)}"}
    record = {"objective": objective, "seed": seed, "steps": plan["steps"],
              "flops_per_step": plan["flops_per_step"],
              "budget_flops": plan["steps"] * plan["flops_per_step"],
              "points": [dict(pt, checkpoint=os.path.relpath(checkpoint_path(model_dir, pt["step"]),
                                                            model_dir))
                         for pt in plan["points"]],
              "seconds_last_call": round(time.monotonic() - t0, 1),
              "final_eval": final_eval(out),
              "train_batch_size": s["train_batch_size"], "max_seq_length": s["max_seq_length"]}
    with open(record_path, "w") as f:
        json.dump(record, f, indent=1)
    ledger.add("pretrain", record)
    return record


# === Stage: finetune ===

def none_dir(p: dict, seed: int) -> str:
    return os.path.join(p["pretrain"], f"none_s{seed}")


_RANDOM_INIT = """
import sys, keras
from electra_tf import folders
from electra_tf.core.config import PretrainingConfig
from electra_tf.modeling import build_discriminator
model_dir, vocab, seed, size, overrides, seq, vocab_size = sys.argv[1:8]
keras.utils.set_random_seed(int(seed))
import json
config = PretrainingConfig(model_size=size, model_hparam_overrides=json.loads(overrides),
                           vocab_size=int(vocab_size), max_seq_length=int(seq))
folders.pretraining.save_discriminator(model_dir, build_discriminator(config.discriminator_config()))
folders.pretraining.record_vocab(model_dir, vocab)
"""


def random_init_command(s: dict, p: dict, seed: int) -> list:
    return [sys.executable, "-c", _RANDOM_INIT, none_dir(p, seed), p["vocab"], str(seed),
            s["model_size"], json.dumps(s["model_hparam_overrides"]),
            str(s["max_seq_length"]), str(vocab_size_of(p["vocab"]))]


def write_random_init(s: dict, p: dict, seed: int) -> str:
    """A discriminator of D's size as initialized (seeded), saved as pre-training saves one."""
    model_dir = none_dir(p, seed)
    if not os.path.exists(os.path.join(model_dir, "discriminator_config.json")):
        os.makedirs(model_dir, exist_ok=True)
        code, out = run_logged(random_init_command(s, p, seed),
                               os.path.join(model_dir, "random_init.log"), s["backend"])
        if code:
            raise RuntimeError(f"random init exit {code}: {last_error(out)}")
    return model_dir


def finetune_runs(s: dict, p: dict, objectives, seeds, finetune_seeds, tasks, plans) -> list:
    """Every fine-tuning run, in the order they run: none first, then the final
    point of every pre-training run, then the earlier points.

    The final point (and none) is fine-tuned with every seed of
    `finetune_seeds`; the earlier points with the first
    `s["point_finetune_seeds"]` of them (0: all).
    """
    runs = []
    k = s.get("point_finetune_seeds") or len(finetune_seeds)
    for seed in seeds:
        for fseed in finetune_seeds:
            for task in tasks:
                runs.append(dict(objective="none", pretrain_seed=seed, step=0, flops=0,
                                 fraction=0.0, task=task, finetune_seed=fseed,
                                 init=none_dir(p, seed)))
    point_order = sorted(range(s["points"]), key=lambda i: (i != s["points"] - 1, i))
    for i in point_order:
        for seed in seeds:
            for fseed in finetune_seeds if i == s["points"] - 1 else finetune_seeds[:k]:
                for objective in objectives:
                    pt = plans[objective]["points"][i]
                    for task in tasks:
                        runs.append(dict(objective=objective, pretrain_seed=seed, step=pt["step"],
                                         flops=pt["flops"], fraction=pt["fraction"], task=task,
                                         finetune_seed=fseed,
                                         init=pretrain_dir(p, objective, seed)))
    for r in runs:
        r["dir"] = os.path.join(p["finetune"], f"{r['objective']}_s{r['pretrain_seed']}",
                                f"step{r['step']}", f"{r['task']}_f{r['finetune_seed']}")
    return runs


def finetune_command(s: dict, p: dict, r: dict) -> list:
    # `none` (and a run given its model folder as "init_checkpoint") starts from
    # discriminator.weights.h5; a pre-training run from its step's checkpoint
    init = (r.get("init_checkpoint") or (r["init"] if r["objective"] == "none" else None)
            or checkpoint_path(r["init"], r["step"])
            or os.path.join(r["init"], "checkpoints", f"ckpt-{r['step']}"))
    return [sys.executable, "-m", "electra_tf.run_finetuning", "--task_name=classification",
            f"--data_dir={os.path.join(p['tasks'], r['task'])}", f"--init_checkpoint={init}",
            f"--model_dir={r['dir']}", f"--seed={r['finetune_seed']}",
            f"--max_seq_length={s['ft_max_seq_length']}",
            f"--train_batch_size={s['ft_batch_size']}", f"--eval_batch_size={s['ft_batch_size'] * 4}",
            f"--learning_rate={s['ft_learning_rate']}", f"--num_train_epochs={s['ft_epochs']}",
            "--adam_bias_correction=true", "--save_checkpoints_steps=100000",
            "--keep_checkpoint_max=1", f"--mixed_precision={s['mixed_precision']}"]


def planned_finetune_s(s: dict, train_size: int, dev_size: int) -> float:
    return ((train_size * s["ft_epochs"] + dev_size * s["ft_epochs"] / 3)
            / s["finetune_examples_per_s"] + s["process_overhead_s"])


def dev_accuracy(results: dict) -> float:
    epochs = [k for k in results if k.startswith("epoch_")]
    last = results["eval"] if "eval" in results else results[
        max(epochs, key=lambda k: int(k.split("_")[1]))]
    split = last["dev"] if "dev" in last else next(iter(last.values()))
    return float(split["accuracy"])


def finetune_one(s: dict, p: dict, r: dict, dev_size: int, ledger, threads: int = 0) -> dict:
    """Runs one fine-tuning run unless the ledger has its result; records the result."""
    known = ledger.finetune(r)
    if known:
        return known
    result_path = os.path.join(r["dir"], "study_result.json")
    if os.path.exists(result_path):  # recorded here, not yet in the ledger
        with open(result_path) as f:
            result = json.load(f)
        if result.get("settings_id") == ledger.sid:
            return ledger.add("finetune", result)
        os.remove(result_path)  # made with other settings: run again
    t0 = time.monotonic()
    code, out = run_logged(finetune_command(s, p, r), r["dir"] + ".log", s["backend"],
                           s["run_timeout_s"], relay_every_s=1e9, threads=threads)
    results_file = os.path.join(r["dir"], "results.json")
    if code or not os.path.exists(results_file):
        return {"error": f"run_finetuning exit {code}: {last_error(out)}"}
    with open(results_file) as f:
        acc = dev_accuracy(json.load(f))
    result = {k: r[k] for k in ("objective", "pretrain_seed", "flops", "step", "task",
                                "finetune_seed")}
    result.update(dev_accuracy=acc, dev_size=dev_size, fraction=r["fraction"],
                  seconds=round(time.monotonic() - t0, 1), settings_id=ledger.sid)
    with open(result_path, "w") as f:
        json.dump(result, f, indent=1)
    _drop_weights(r["dir"])
    return ledger.add("finetune", result)


def _drop_weights(folder: str) -> None:
    """A finished run's checkpoints and weights (the study keeps its results only)."""
    import shutil

    shutil.rmtree(os.path.join(folder, "checkpoints"), ignore_errors=True)
    for name in os.listdir(folder):
        if name.endswith(".weights.h5"):
            os.remove(os.path.join(folder, name))


# === Stage: report ===

def collect_rows(ledger) -> list[dict]:
    """The ledger's fine-tuning results of these settings, in the report's order."""
    rows = ledger.finetune_rows()
    rows.sort(key=lambda r: (r["objective"] != "none", r["objective"], r["pretrain_seed"],
                             r["step"], r["task"], r["finetune_seed"]))
    return rows


CSV_COLUMNS = ("objective", "pretrain_seed", "flops", "step", "task", "finetune_seed",
               "dev_accuracy", "dev_size")


def _fmt(ms) -> str:
    m, sd, n = ms
    return "n/a" if not n else f"{100 * m:.1f} ± {100 * sd:.1f} ({n})"


def write_report(output_dir: str, s: dict, p: dict, rows: list, tasks, plans: dict,
                 pretrain_records: list, command: str) -> None:
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for r in rows:
            w.writerow([r[c] if c != "dev_accuracy" else f"{r[c]:.4f}" for c in CSV_COLUMNS])
    agg = aggregate(rows, tasks)
    metas = {}
    for t in tasks:
        with open(os.path.join(p["tasks"], t, "meta.json")) as f:
            metas[t] = json.load(f)
    ov = s["model_hparam_overrides"]
    lines = [f"# ELECTRA vs BERT-MLM vs no pre-training on real data ({s['scale']} scale)", "",
             f"- Command: `{command}`",
             f"- Machine (of the call that wrote this report; the ledger's runs may come "
             f"from several sittings): {cpu_model()}, {os.cpu_count()} CPU cores; Python "
             f"{platform.python_version()}; {s['backend']} backend",
             f"- Date (UTC): {datetime.now(timezone.utc):%Y-%m-%d %H:%M}",
             f"- Model: discriminator {ov.get('hidden_size', s['model_size'])} hidden, "
             f"{ov.get('num_hidden_layers', '')} layers, embedding "
             f"{ov.get('embedding_size', '')}, vocab {vocab_size_of(p['vocab']):,}, L="
             f"{s['max_seq_length']}, batch {s['train_batch_size']}, lr {s['learning_rate']}; "
             f"ELECTRA's generator {s['generator_hidden_size']} of D's width; BERT-MLM at D's "
             "size (the original's 85/15 masking)",
             "- Pre-training budget (same FLOPs for both): " + "; ".join(
                 f"{o} {pl['steps']:,} steps x {pl['flops_per_step'] / 1e9:.1f} GFLOP = "
                 f"{pl['steps'] * pl['flops_per_step'] / 1e12:.1f} TFLOP" for o, pl in plans.items()),
             f"- Fine-tuning: {s['ft_epochs']} epochs, batch {s['ft_batch_size']}, lr "
             f"{s['ft_learning_rate']}, L={s['ft_max_seq_length']}; train capped at "
             f"{s['train_cap'] or 'all'} (seeded subsample); dev accuracy after the last epoch; "
             + ("every fine-tuning seed at every point" if not s.get("point_finetune_seeds")
                else f"the points before the last with the first {s['point_finetune_seeds']} "
                "fine-tuning seed(s) only"),
             "", "## Majority baselines (dev)", "", "| task | train | dev | majority label | "
             "majority baseline |", "|---|---:|---:|---|---:|"]
    for t in tasks:
        m = metas[t]
        lines.append(f"| {t} | {m['train_size']:,} of {m['train_size_full']:,} | "
                     f"{m['dev_size']:,} | {m['majority_label']} | "
                     f"{100 * m['majority_baseline_dev']:.1f} |")
    lines += ["", "## Dev accuracy (%), mean ± std over pre-training x fine-tuning seeds (n)", "",
              "| objective | point | pre-training TFLOP | step | " + " | ".join(tasks)
              + " | mean over tasks |", "|---|---:|---:|---:|" + "---:|" * (len(tasks) + 1)]
    for (obj, step), a in sorted(agg.items(), key=lambda kv: (kv[1]["flops"], kv[0][0])):
        frac = next((pt["fraction"] for pt in plans.get(obj, {}).get("points", [])
                     if pt["step"] == step), 0.0)
        lines.append(f"| {obj} | {100 * frac:.0f}% | {a['flops'] / 1e12:.2f} | {step} | "
                     + " | ".join(_fmt(a["tasks"][t]) for t in tasks) + f" | {_fmt(a['mean'])} |")
    lines += ["", "## At the full budget", ""]
    final = {o: (o, pl["steps"]) for o, pl in plans.items()}
    e, b = final.get("electra"), final.get("bert_mlm")
    none = next((k for k in agg if k[0] == "none"), None)
    comparisons = [("ELECTRA - BERT-MLM", e, b), ("ELECTRA - none", e, none),
                   ("BERT-MLM - none", b, none)]
    lines += ["Differences of the means over tasks (points of accuracy), with the standard "
              "error from the spread of the pre-training seeds' means (each the mean over "
              "tasks and fine-tuning seeds):", "",
              "| comparison | difference | standard error | seeds (a, b) | verdict |",
              "|---|---:|---:|---|---|"]
    for name, ka, kb in comparisons:
        if ka in agg and kb in agg:
            d, se = difference(agg[ka], agg[kb])
            verdict = ("n/a" if math.isnan(d) else "no standard error yet (one pre-training "
                       "seed on a side)" if math.isnan(se) else "larger than 2 SE"
                       if se and abs(d) > 2 * se else "within 2 SE (not resolved by these seeds)")
            lines.append(f"| {name} | {100 * d:+.2f} | "
                         + ("n/a" if math.isnan(se) else f"{100 * se:.2f}") + " | "
                         f"{len(agg[ka]['seed_means'])}, {len(agg[kb]['seed_means'])} | "
                         f"{verdict} |")
    if e in agg and b in agg:
        per_task = [f"{t} {100 * (agg[e]['tasks'][t][0] - agg[b]['tasks'][t][0]):+.1f} "
                    f"(std {100 * agg[e]['tasks'][t][1]:.1f} / {100 * agg[b]['tasks'][t][1]:.1f})"
                    for t in tasks]
        lines += ["", "Per task, ELECTRA - BERT-MLM (the runs' std, ELECTRA / BERT-MLM): "
                  + "; ".join(per_task) + "."]
    lines += ["", "## Pre-training runs", "",
              "| objective | seed | steps | GFLOP/step | TFLOP | final held-out eval |",
              "|---|---:|---:|---:|---:|---|"]
    for rec in pretrain_records:
        ev = ", ".join(f"{k} {v:.3f}" for k, v in rec.get("final_eval", {}).items())
        lines.append(f"| {rec['objective']} | {rec['seed']} | {rec['steps']:,} | "
                     f"{rec['flops_per_step'] / 1e9:.1f} | {rec['budget_flops'] / 1e12:.2f} | "
                     f"{ev} |")
    plot = os.path.join(output_dir, "results.png")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        lines += ["", "(No results.png: matplotlib is not installed; `pip install matplotlib`.)"]
    else:
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        for obj, style in (("electra", "o-"), ("bert_mlm", "s--")):
            pts = sorted((a["flops"], a) for (o, _), a in agg.items() if o == obj)
            if none in agg:
                pts = [(0, agg[none])] + pts
            if pts:
                xs = [x / 1e12 for x, _ in pts]
                ys = [100 * a["mean"][0] for _, a in pts]
                errs = [100 * (statistics.stdev(a["seed_means"].values())
                               if len(a["seed_means"]) > 1 else 0.0) for _, a in pts]
                ax.errorbar(xs, ys, yerr=errs, fmt=style, capsize=3,
                            label={"electra": "ELECTRA", "bert_mlm": "BERT-MLM"}[obj])
        base = statistics.fmean(metas[t]["majority_baseline_dev"] for t in tasks)
        ax.axhline(100 * base, color="grey", lw=0.8, ls=":", label="majority baseline")
        ax.set_xlabel("pre-training TFLOP (0: no pre-training)")
        ax.set_ylabel(f"dev accuracy, mean over {len(tasks)} tasks (%)")
        ax.set_title("Score against pre-training compute (error bars: std over "
                     "pre-training seeds)", fontsize=9)
        ax.legend()
        fig.tight_layout()
        fig.savefig(plot, dpi=120)
        plt.close(fig)
    with open(os.path.join(output_dir, "results.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def study_units(objectives, seeds, pending: list, ledger, stages) -> list[tuple]:
    """[(objective or "none", seed, needs pre-training)], in the order they run.

    A pre-training run is needed when some of its fine-tuning runs are not in
    the ledger (or, without the finetune stage, when its record is not).
    """
    units = []
    for seed in seeds:
        for o in ("none", *objectives):
            if o == "none":
                needed = False
            elif "pretrain" not in stages:
                needed = False
            elif "finetune" in stages:
                needed = any((r["objective"], r["pretrain_seed"]) == (o, seed) for r in pending)
            else:
                needed = ledger.pretrain(o, seed) is None
            units.append((o, seed, needed))
    return units


# === Main ===

def main(argv):
    from absl import flags

    from electra_tf.core.errors import InputError

    F = flags.FLAGS
    del argv
    stages = [x for x in F.stage.split(",") if x]
    unknown = set(stages) - {"prepare", "pretrain", "finetune", "report"}
    if unknown:
        raise InputError(f"--stage: unknown stage(s) {sorted(unknown)}; known: prepare, "
                         "pretrain, finetune, report")
    if not F.work_dir:
        raise InputError("--work_dir is required")
    if F.point_finetune_seeds < -1:
        raise InputError(f"--point_finetune_seeds must be -1 (the scale's), 0 (all) or a "
                         f"count, got {F.point_finetune_seeds}")
    parent = os.path.dirname(os.path.abspath(F.work_dir))
    corpus = F.corpus or os.path.join(parent, "corpus.txt")
    heldout = F.heldout or os.path.join(parent, "heldout.txt")
    tasks_dir = F.tasks_dir or os.path.join(parent, "tasks")
    s = settings(F.scale, {"electra_steps": F.electra_steps or None,
                           "points": F.points or None, "train_cap": F.train_cap,
                           "ft_epochs": F.ft_epochs or None,
                           "point_finetune_seeds": (None if F.point_finetune_seeds < 0
                                                    else F.point_finetune_seeds)})
    objectives = [o for o in F.objectives.split(",") if o]
    tasks = [t for t in F.tasks.split(",") if t]
    seeds = parse_seeds(F.seeds, "--seeds")
    fseeds = parse_seeds(F.finetune_seeds, "--finetune_seeds")
    bad = [o for o in objectives if o not in OBJECTIVES]
    if bad or not objectives or not tasks:
        raise InputError(f"--objectives must be among {', '.join(OBJECTIVES)} (got "
                         f"{F.objectives!r}); --tasks non-empty")
    if "prepare" in stages:
        for path, flag in ((corpus, "corpus"), (heldout, "heldout")):
            if not os.path.isfile(path):
                raise InputError(f"--{flag}: {path} not found (build it with "
                                 "studies/real_data/build_corpus.py)")
        for t in tasks:
            if not os.path.isdir(os.path.join(tasks_dir, t)):
                raise InputError(f"--tasks_dir: {tasks_dir}/{t} not found (build it with "
                                 "studies/real_data/prepare_tasks.py)")
    p = paths(F.work_dir, s)
    t_start = time.monotonic()
    forward_stop_signals()
    if "prepare" in stages and not (F.print_commands or F.plan):  # those two only read
        prepare(s, p, corpus, heldout, tasks_dir, tasks)
    if not os.path.exists(p["vocab"]):
        raise InputError(f"{p['vocab']} not found: run --stage=prepare (without --plan or "
                         "--print_commands) first")
    plans = study_plan(s, objectives, vocab_size_of(p["vocab"]))
    for o, pl in plans.items():
        log(f"plan {o}: {pl['flops_per_step'] / 1e9:.2f} GFLOP/step x {pl['steps']:,} steps = "
            f"{pl['steps'] * pl['flops_per_step'] / 1e12:.2f} TFLOP; checkpoints at steps "
            + ", ".join(str(pt["step"]) for pt in pl["points"]))
    task_sizes = {}
    for t in tasks:
        meta_path = os.path.join(p["tasks"], t, "meta.json")
        if os.path.exists(meta_path):
            with open(meta_path) as f:
                m = json.load(f)
            task_sizes[t] = (m["train_size"], m["dev_size"])
    runs = finetune_runs(s, p, objectives, seeds, fseeds, tasks, plans)
    workers = F.finetune_workers or s["finetune_workers"]
    output_dir = F.output_dir or os.path.join(REPO_ROOT, "studies", "real_data", "results", "study")
    ledger = Ledger(F.ledger or os.path.join(output_dir, "ledger.jsonl"),
                    settings_id(s, vocab_size_of(p["vocab"])))
    pending = [r for r in runs if not ledger.finetune(r)]
    units = study_units(objectives, seeds, pending, ledger, stages)
    pre_s = sum(planned_pretrain_s(s, plans[o]) for o, _, needed in units if needed)
    ft_s = sum(planned_finetune_s(s, *task_sizes.get(r["task"], (1000, 500)))
               for r in pending) / workers if "finetune" in stages else 0.0
    log(f"plan: {len(objectives) * len(seeds)} pre-training runs, {len(runs)} fine-tuning "
        f"runs; the ledger ({ledger.path}, settings {ledger.sid}) holds "
        f"{len(runs) - len(pending)} of the results"
        + (f" and {ledger.other_settings} line(s) of other settings" if ledger.other_settings
           else "")
        + f"; to run: {sum(1 for *_, n in units if n)} pre-training (~{pre_s / 3600:.1f} h), "
        f"{len(pending)} fine-tuning, {workers} at a time (~{ft_s / 3600:.1f} h) at the "
        "measured throughput")
    if F.plan:
        return
    if F.print_commands:
        import shlex

        env = f"KERAS_BACKEND={s['backend']} PYTHONPATH={shlex.quote(REPO_ROOT)} "
        for o in objectives:
            for seed in seeds:
                print(env + shlex.join(pretrain_command(s, p, o, seed, plans[o])))
        for seed in seeds:  # none's initializations (mkdir first)
            print(f"mkdir -p {shlex.quote(none_dir(p, seed))} && " + env
                  + shlex.join(random_init_command(s, p, seed)))
        for r in runs:
            print(env + shlex.join(finetune_command(s, p, r)))
        return
    failures: list[str] = []
    eta = Eta(pre_s + ft_s)
    threads = 1 if workers > 1 and s["backend"] == "tensorflow" else 0
    lock = threading.Lock()
    done = {"n": len(runs) - len(pending)}

    def finetune(r: dict) -> None:
        planned = planned_finetune_s(s, *task_sizes[r["task"]]) / workers
        t0 = time.monotonic()
        res = finetune_one(s, p, r, task_sizes[r["task"]][1], ledger, threads)
        took = time.monotonic() - t0
        what = (f"{r['objective']} s{r['pretrain_seed']} step {r['step']} "
                f"({100 * r['fraction']:.0f}%) {r['task']} f{r['finetune_seed']}")
        with lock:
            eta.done(planned, took / workers)
            if "error" in res and stopping():
                log(f"finetune {what}: stopped ({res['error']})")
            elif "error" in res:
                failures.append(f"finetune {what}: {res['error']}")
                log(f"finetune {what} FAILED: {res['error']}; {eta.line()}")
            else:
                done["n"] += 1
                log(f"finetune {done['n']}/{len(runs)}: {what}: dev accuracy "
                    f"{res['dev_accuracy']:.4f} in {took:.0f} s; {eta.line()}")

    from concurrent.futures import ThreadPoolExecutor

    def finetune_all(todo: list, what: str) -> None:
        if not todo:
            return
        log(f"fine-tuning {what}: {len(todo)} runs, {workers} at a time"
            + (f", {threads} thread each" if threads else ""))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(finetune, r) for r in todo]:
                future.result()

    # Seed by seed, unit by unit (none, then each objective): a pre-training run,
    # then the fine-tuning of its final point; then the seed's earlier points. A
    # sitting that ends leaves whole seeds (or at least whole final points) in
    # the ledger, and the next sitting, whose machine may not have these
    # checkpoints, pre-trains again only what still has fine-tuning to do.
    for seed in seeds:
        ready = []  # (objective, seed) whose checkpoints are here
        for o, _, needed in [u for u in units if u[1] == seed]:
            if stopping():
                break
            unit_runs = [r for r in pending if (r["objective"], r["pretrain_seed"]) == (o, seed)]
            if needed:
                planned = planned_pretrain_s(s, plans[o])
                log(f"pretrain: {o} seed {seed}, {plans[o]['steps']:,} steps; {eta.line()}")
                t0 = time.monotonic()
                rec = pretrain_one(s, p, o, seed, plans[o], ledger)
                took = time.monotonic() - t0
                eta.done(planned, took)
                if "error" in rec and stopping():
                    log(f"pretrain {o} seed {seed}: stopped ({rec['error']})")
                    continue
                if "error" in rec:
                    failures.append(f"pretrain {o} seed {seed}: {rec['error']}")
                    log(f"pretrain {o} seed {seed} FAILED: {rec['error']}")
                    continue
                log(f"pretrain {o} seed {seed}: done in {hms(took)}, "
                    f"{rec.get('final_eval', '')}")
            if "finetune" not in stages or not unit_runs:
                continue
            if o == "none":
                write_random_init(s, p, seed)
            elif not os.path.exists(os.path.join(pretrain_dir(p, o, seed), "study_record.json")):
                failures.append(f"finetune {o} seed {seed}: its pre-training is not done "
                                "(add the pretrain stage)")
                continue
            ready.append((o, seed))
            finetune_all([r for r in unit_runs if r["fraction"] in (0.0, 1.0)],
                         f"{o} seed {seed}" + (", final point" if o != "none" else ""))
        finetune_all([r for r in pending if 0.0 < r["fraction"] < 1.0
                      and (r["objective"], r["pretrain_seed"]) in ready],
                      f"seed {seed}, earlier points")
    if stopping():
        log(f"stopped by a signal after {hms(time.monotonic() - t_start)}; the runs saved "
            "where they were: the same command resumes")
        sys.exit(stopped_exit_code())
    if "report" in stages:
        # the seeds asked for: a later seed's first results (a study still running)
        # would otherwise mix into the means of seeds it has not finished
        rows = [r for r in collect_rows(ledger) if r["pretrain_seed"] in seeds]
        command = "python -m studies.real_data.study " + " ".join(
            a for a in sys.argv[1:] if not a.startswith(("--work_dir", "--output_dir")))
        write_report(output_dir, s, p, rows, tasks, plans,
                     [r for r in ledger.pretrain_records() if r.get("seed") in seeds],
                     command.strip())
        log(f"report: {len(rows)} fine-tuning results in {output_dir}")
    log(f"finished {','.join(stages)} in {hms(time.monotonic() - t_start)}")
    if failures:
        log(f"{len(failures)} failure(s); rerun the same command to retry:")
        for line in failures:
            log("  " + line)
        sys.exit(1)


def define_flags():
    from absl import flags

    flags.DEFINE_string("work_dir", "", "Where the data, runs and logs go (outside the repo).")
    flags.DEFINE_string("stage", "prepare,pretrain,finetune,report",
                        "Comma-separated: prepare, pretrain, finetune, report.")
    flags.DEFINE_enum("scale", "cpu", list(SCALES), "cpu: this study on 2 cores; small: "
                      "ELECTRA-Small on a GPU (JAX); toy: the tests' wiring.")
    flags.DEFINE_string("corpus", "", "Pre-training text (default: WORK_DIR/../corpus.txt).")
    flags.DEFINE_string("heldout", "", "Held-out text (default: WORK_DIR/../heldout.txt).")
    flags.DEFINE_string("tasks_dir", "", "Task folders (default: WORK_DIR/../tasks).")
    flags.DEFINE_string("tasks", ",".join(TASKS), "Comma-separated task folders.")
    flags.DEFINE_string("objectives", ",".join(OBJECTIVES), "electra, bert_mlm.")
    flags.DEFINE_string("seeds", "0,1,2", "Pre-training seeds (and none's init seeds).")
    flags.DEFINE_string("finetune_seeds", "0,1,2", "Fine-tuning seeds.")
    flags.DEFINE_integer("electra_steps", 0, "ELECTRA's steps, which set the FLOPs budget "
                         "(0: the scale's).")
    flags.DEFINE_integer("points", 0, "Checkpoint points per run (0: the scale's).")
    flags.DEFINE_integer("train_cap", None, "Largest train split per task (0: all; default: "
                         "the scale's).")
    flags.DEFINE_float("ft_epochs", 0, "Fine-tuning epochs (0: the scale's).")
    flags.DEFINE_integer("point_finetune_seeds", -1, "Fine-tuning seeds at the points before "
                         "the last (the first N of --finetune_seeds; 0: all; -1: the scale's).")
    flags.DEFINE_integer("finetune_workers", 0, "Fine-tuning runs at a time (0: the scale's; "
                         "with more than one, each TensorFlow run gets one intra-op thread).")
    flags.DEFINE_string("output_dir", "", "Report folder (default: "
                        "studies/real_data/results/study).")
    flags.DEFINE_string("ledger", "", "Finished runs' results, one JSON line each, read to skip "
                        "them in later sittings, on any machine (default: "
                        "OUTPUT_DIR/ledger.jsonl; commit it with the report).")
    flags.DEFINE_bool("plan", False, "Print the plan and stop.")
    flags.DEFINE_bool("print_commands", False, "Print every run's command line and stop.")


if __name__ == "__main__":
    from absl import app

    from electra_tf import cli

    define_flags()
    app.run(lambda argv: cli.run_cli(lambda: main(argv)))
