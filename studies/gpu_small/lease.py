r"""ELECTRA-Small against BERT-MLM Small at equal FLOPs, in one short GPU lease.

    # on the GPU machine, through studies/gpu_small/lease.sh run (which installs the wheels):
    python -m studies.gpu_small.lease --bundle=.bundle --out=$OUT --budget_s=530
    # the same steps on CPU at toy sizes (the rehearsal; studies/tests/test_gpu_small.py):
    python -m studies.gpu_small.lease --bundle=BUNDLE --out=OUT --toy --budget_s=900

In order, each result written to OUT as soon as it exists (a lease cut short
keeps what came before):
  1. the device and versions; the data bundle (bundle.py) unpacked and checked;
  2. the plan: the time left, less the runs' start-up, compilation and evaluations and
     the parts' writing; ELECTRA's steps from the measured rate of one run alone (the
     runs are stopped by time, not by steps, where the GPU is slower), BERT-MLM's for
     the same training FLOPs (study.flops_per_sequence), on the same schedule;
  3. --mode=side_by_side (the default): both runs at once on the one GPU, each a process
     with less than half its memory (XLA_PYTHON_CLIENT_MEM_FRACTION=0.45), through the
     product's own command (`KERAS_BACKEND=jax python -m electra_tf.run_pretraining`,
     the packed input); each stops at a common FLOPs target, the least that either will
     have done by the deadline (measured from their own rates as they go): Ctrl-C at the
     chunk boundary nearest it, which saves a checkpoint; then both discriminators as
     float16 parts (parts.py);
     --mode=one_after_the_other: ELECTRA-Small alone until its half of the time, its
     parts written on the CPU while BERT-MLM Small trains to the FLOPs ELECTRA did.
OUT holds at most 8 files: results.json (rewritten after every step; each run's steady
seq/s, wall time and FLOPs done, side by side their sum), lease.log (everything
printed), electra.part-K-of-N and bert_mlm.part-K-of-N.

The runs are the paper's Small (Table 6: 12 layers, hidden 256, embeddings 128,
generator 1/4, dropout 0.1, batch 128, length 128, lr 5e-4, linear decay), with
bf16, a warmup of 10% of the run and bias-corrected Adam (a warmup of a few
hundred steps instead of 10,000), on the real-data corpus (studies/real_data)
and its 16k vocabulary.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import re
import shutil
import signal
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

OBJECTIVES = ("electra", "bert_mlm")
STEPS_PER_CALL = 10  # every period below is a multiple: no one-step call is compiled

# name -> the run's sizes and what the plan assumes where nothing was measured
SETTINGS = {
    # measured in the lease of 2026-11-30 (one H200; README, "What came back"): ELECTRA
    # alone 7,350 seq/s; side by side 0.60 of that, and BERT-MLM 9% slower in FLOPs/s,
    # so 0.55 lets both end their schedules together; 123 s to the first log line
    "small": dict(model_size="small", overrides={}, batch=128, seq=128, precision="bf16",
                  planning_rate=7350.0, side_by_side_share=0.55, compile_s=100.0, startup_s=30.0,
                  eval_s=25.0, split_s=30.0, min_steps=200, max_steps=10 ** 6),
    "toy": dict(model_size="tiny", overrides={"hidden_size": 32, "num_hidden_layers": 2,
                                              "num_attention_heads": 2, "intermediate_size": 64,
                                              "embedding_size": 16},
                batch=8, seq=32, precision="bf16",
                planning_rate=50.0, side_by_side_share=0.5, compile_s=30.0, startup_s=20.0,
                eval_s=10.0, split_s=20.0, min_steps=20, max_steps=40),
}


class Lease:
    """The lease's state: its clock, its log, and results.json (rewritten at every step)."""

    def __init__(self, out: str, budget_s: float, scratch: str):
        self.out, self.t0, self.deadline = out, time.monotonic(), time.monotonic() + budget_s
        self.scratch = scratch  # what does not come back
        os.makedirs(out, exist_ok=True)
        os.makedirs(scratch, exist_ok=True)
        self.log_file = open(os.path.join(out, "lease.log"), "a", encoding="utf-8")
        self.results: dict = {"budget_s": budget_s, "started_utc": _utc(), "steps": []}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def log(self, message: str) -> None:
        line = f"[lease {time.monotonic() - self.t0:6.1f}s] {message}"
        print(line, file=sys.stderr, flush=True)
        self.log_file.write(line + "\n")
        self.log_file.flush()

    def save(self, step: str | None = None) -> None:
        if step:
            self.results["steps"].append({"step": step, "at_s": round(
                time.monotonic() - self.t0, 1)})
        path = os.path.join(self.out, "results.json")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(self.results, f, indent=1, sort_keys=True)
        os.replace(path + ".tmp", path)

    def start(self, cmd: list[str], env: dict, on_line=None) -> tuple:
        """Starts `cmd` in the background, its output into a file; `finish` collects it."""
        self.log("$ (background) " + " ".join(cmd))
        output = open(os.path.join(self.scratch, f"background-{time.time_ns()}.log"), "w+",
                      encoding="utf-8")
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=output,
                                stderr=subprocess.STDOUT, text=True)
        return proc, output, on_line, time.monotonic()

    def finish(self, job: tuple, deadline: float) -> dict:
        """Waits for a `start`ed command (killed at `deadline`); logs its output."""
        proc, output, on_line, t0 = job
        try:
            code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.log("background command past the deadline: killed")
            proc.kill()
            code = proc.wait()
        output.seek(0)
        for line in output.read().splitlines():
            self.log_file.write(f"  (background) | {line}\n")
            print(line, file=sys.stderr, flush=True)
            if on_line:
                on_line(time.monotonic() - t0, line)
        self.log_file.flush()
        output.close()
        os.remove(output.name)
        return {"exit": code, "wall_s": round(time.monotonic() - t0, 1), "background": True}

    def run(self, cmd: list[str], deadline: float, env: dict | None = None,
            on_line=None) -> dict:
        """Runs `cmd`, its output into the log; Ctrl-C at `deadline`, a kill 90 s later."""
        job = {"name": "", "cmd": cmd, "env": env, "deadline": deadline, "on_line": on_line}
        self.run_many([job])
        return job["result"]

    def run_many(self, jobs: list[dict], control=None) -> None:
        """Runs the jobs' commands at once (each a dict: name, cmd, env, deadline, on_line),
        their output into the log; each gets Ctrl-C at its deadline or when `control(job)`,
        called after each of its lines, calls `interrupt(job, why)`; a kill 90 s after
        Ctrl-C. Each job gets "result": exit, wall_s, interrupted (and why)."""
        import selectors

        sel = selectors.DefaultSelector()
        for job in jobs:
            self.log(f"$ {job['name'] + ': ' if job['name'] else ''}" + " ".join(job["cmd"]))
            job["t0"], job["interrupted"] = time.monotonic(), None
            job["proc"] = subprocess.Popen(job["cmd"], cwd=REPO_ROOT, env=job["env"],
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                           text=True, bufsize=1)
            sel.register(job["proc"].stdout, selectors.EVENT_READ, job)
        prefix = {id(j): (f"{j['name']} " if len(jobs) > 1 else "") for j in jobs}
        while sel.get_map():
            now = time.monotonic()
            for job in jobs:
                if job["interrupted"] is None and now > job["deadline"]:
                    self.interrupt(job, "deadline reached")
                if (job["interrupted"] is not None and now > job["interrupted_t"] + 90
                        and job["proc"].poll() is None):
                    self.log(f"{job['name']} still running 90 s after Ctrl-C: killed")
                    job["proc"].kill()
            for key, _ in sel.select(timeout=1.0):
                job = key.data
                line = job["proc"].stdout.readline()
                if not line:
                    sel.unregister(key.fileobj)
                    continue
                line = line.rstrip("\n")
                self.log_file.write(f"  {time.monotonic() - self.t0:7.1f} | "
                                    f"{prefix[id(job)]}{line}\n")
                self.log_file.flush()
                print(prefix[id(job)] + line, file=sys.stderr, flush=True)
                if job["on_line"]:
                    job["on_line"](time.monotonic() - job["t0"], line)
                if control:
                    control(job)
            if control:
                control(None)  # once a second too: a run that ended releases one held
        for job in jobs:
            code = job["proc"].wait()
            job["result"] = {"exit": code, "wall_s": round(time.monotonic() - job["t0"], 1),
                             "interrupted": job["interrupted"] is not None}
            if job["interrupted"]:
                job["result"]["interrupted_why"] = job["interrupted"]

    def interrupt(self, job: dict, why: str) -> None:
        """Ctrl-C (SIGINT) to a job of run_many: it finishes its chunk, saves, stops."""
        if job["interrupted"] is None:
            self.log(f"{job['name'] or 'run'}: {why}: Ctrl-C (SIGINT)")
            job["interrupted"], job["interrupted_t"] = why, time.monotonic()
            if job.get("held_since") is not None:  # held (Runs.pace): going again to stop
                job["record"]["held_s"] = round(job["record"].get("held_s", 0.0)
                                                + time.monotonic() - job.pop("held_since"), 1)
                job["proc"].send_signal(signal.SIGCONT)
            job["proc"].send_signal(signal.SIGINT)


def _utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# === 1. device and data ===
def device_facts() -> dict:
    facts = {"python": sys.version.split()[0]}
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30)
        facts["nvidia_smi"] = out.stdout.strip() or out.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        facts["nvidia_smi"] = f"none ({e})"
    probe = ("import json, jax, keras, numpy; print(json.dumps({'jax': jax.__version__, "
             "'keras': keras.__version__, 'numpy': numpy.__version__, "
             "'devices': [str(d) for d in jax.devices()]}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env={**os.environ, "KERAS_BACKEND": "jax"}, timeout=120)
    try:
        facts.update(json.loads(out.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        facts["probe_error"] = out.stderr[-2000:]
    return facts


def unpack_bundle(bundle: str, work: str) -> dict:
    """The bundle's files, decompressed into `work` and checked against bundle.json."""
    with open(os.path.join(bundle, "bundle.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    os.makedirs(work, exist_ok=True)
    paths = {}
    for name, entry in manifest["files"].items():
        source, target = os.path.join(bundle, entry["stored_as"]), os.path.join(work, name)
        digest = hashlib.sha256()
        opener = lzma.open if source.endswith(".xz") else open
        with opener(source, "rb") as src, open(target, "wb") as dst:
            while chunk := src.read(1 << 22):
                digest.update(chunk)
                dst.write(chunk)
        if digest.hexdigest() != entry["sha256"]:
            raise SystemExit(f"error: {name} from the bundle fails its sha256")
        paths[name] = target
    return {"paths": paths, "manifest": manifest}


# === 3. the plan ===
def flops_per_sequence(setting_name: str, objective: str, vocab_size: int) -> float:
    from studies.real_data.study import flops_per_sequence as study_flops

    return study_flops(run_config(setting_name, objective, vocab_size, 10))


def run_config(setting_name: str, objective: str, vocab_size: int, steps: int):
    """The PretrainingConfig the run's flags give (for its FLOPs)."""
    from electra_tf.core.config import PretrainingConfig

    setting = SETTINGS[setting_name]
    return PretrainingConfig(model_size=setting["model_size"],
                             model_hparam_overrides=dict(setting["overrides"]),
                             vocab_size=vocab_size, objective=objective,
                             max_seq_length=setting["seq"], generator_hidden_size=0.25,
                             train_batch_size=setting["batch"], num_train_steps=steps)


def size_flags(setting: dict) -> list[str]:
    flags = [f"--model_size={setting['model_size']}"]
    if setting["overrides"]:
        flags.append(f"--model_hparam_overrides={json.dumps(setting['overrides'])}")
    return flags


def round_steps(steps: float) -> int:
    return max(STEPS_PER_CALL, int(steps) // STEPS_PER_CALL * STEPS_PER_CALL)


MODES = ("side_by_side", "one_after_the_other")
MEM_FRACTION = "0.45"  # each of two runs side by side: less than half of the GPU's memory


def plan(setting: dict, left_s: float, flops: dict, mode: str = MODES[0]) -> dict:
    """Steps and deadlines of the two runs (see the module docstring, 2.).

    Both runs are sized from `planning_rate`, the rate of one run alone (for Small, as
    measured on an H200): a slower GPU stops them by time, not by steps, at
    a common FLOPs target (`flops_target`), so no time is left over. Side by side, each
    run gets `side_by_side_share` of that rate over the whole time left, with one
    start-up, compilation and evaluations (at once) instead of two in a row."""
    rate = setting["planning_rate"]
    overhead = setting["startup_s"] + setting["compile_s"] + setting["eval_s"]
    if mode == "side_by_side":
        train_s = max(0.0, left_s - overhead - setting["split_s"])
        rate_each = rate * setting["side_by_side_share"]
    elif mode == "one_after_the_other":
        # the first run's parts are written while the second trains: one split to wait for
        train_s = max(0.0, (left_s - 2 * overhead - setting["split_s"]) / 2)
        rate_each = rate
    else:
        raise ValueError(f"mode {mode!r}: one of {MODES}")
    electra = round_steps(train_s * rate_each / setting["batch"])
    electra = min(max(electra, setting["min_steps"]), setting["max_steps"])
    ratio = flops["electra"] / flops["bert_mlm"]
    bert = round_steps(electra * ratio + STEPS_PER_CALL / 2)
    return {"mode": mode, "rate_assumed": rate, "rate_each_assumed": rate_each,
            "overhead_s": overhead, "train_s_each": round(train_s, 1),
            "steps": {"electra": electra, "bert_mlm": bert},
            "flops_per_sequence": flops, "flops": {
                "electra": electra * setting["batch"] * flops["electra"],
                "bert_mlm": bert * setting["batch"] * flops["bert_mlm"]},
            "run_deadline_s": round(overhead + train_s, 1)}


def flops_target(runs: list[dict]) -> float | None:
    """The common FLOPs target of runs going at once: the least that any of them will have
    done by its deadline (`planned`, its plan's FLOPs; `final`, what a run that was stopped
    will have done; else `done` + `per_s` FLOPs a second over `seconds_left`). None while a
    run still going has no rate yet (its first chunk holds the compilation)."""
    ends = []
    for r in runs:
        if r.get("final") is not None:
            ends.append(r["final"])
        elif not r.get("per_s"):
            return None
        else:
            ends.append(min(r["planned"], r["done"] + r["per_s"] * max(0.0, r["seconds_left"])))
    return min(ends) if ends else None


PACE_LEAD = 0.04  # of a run's planned FLOPs: how far one run at once may get ahead


def hold(done: float, behind: float | None, lead: float, held: bool) -> bool:
    """Whether a run that has done `done` FLOPs is (kept) held while the slowest other run
    still going has done `behind` (None: none going)."""
    if behind is None:
        return False
    return done - behind > (lead / 2 if held else lead)


def _steps(job: dict) -> int:
    train = job["record"]["train"]
    return train[-1]["step"] if train else 0


def stop_now(step: int, chunk: int, planned_steps: int, target_steps: float) -> bool:
    """Whether a run that just logged `step` (its next chunk of `chunk` steps already going)
    gets Ctrl-C now, to stop at step + chunk, the chunk boundary nearest `target_steps`."""
    stop_at = step + chunk
    return stop_at < planned_steps and stop_at >= target_steps - chunk / 2


def periods(steps: int) -> dict:
    """Log 100 times (the granularity of a stop at a FLOPs target), evaluate and save 4
    times, all multiples of STEPS_PER_CALL."""
    log_every = round_steps(steps / 100)
    quarter = round_steps(steps / 4)
    return {"log": log_every, "eval": quarter, "save": quarter,
            "warmup": max(1, steps // 10)}


def pretraining_command(setting_name: str, objective: str, steps: int, data: dict,
                        model_dir: str, vocab_size: int, eval_steps: int) -> list[str]:
    setting = SETTINGS[setting_name]
    p = periods(steps)
    return [sys.executable, "-m", "electra_tf.run_pretraining", *size_flags(setting),
            f"--objective={objective}", f"--vocab_size={vocab_size}",
            f"--max_seq_length={setting['seq']}", "--mask_prob=0.15",
            "--generator_hidden_size=0.25", "--learning_rate=5e-4", "--lr_decay_power=1.0",
            f"--num_warmup_steps={p['warmup']}", "--adam_bias_correction",
            "--weight_decay_rate=0.01", f"--train_batch_size={setting['batch']}",
            f"--eval_batch_size={setting['batch']}", f"--num_train_steps={steps}",
            f"--iterations_per_loop={p['log']}", f"--log_every_steps={p['log']}",
            f"--eval_every_steps={p['eval']}", f"--save_checkpoints_steps={p['save']}",
            f"--num_eval_steps={eval_steps}", f"--mixed_precision={setting['precision']}",
            f"--jax_steps_per_call={STEPS_PER_CALL}", "--jax_input_pipeline=packed",
            f"--train_data={data['train.packed']}", f"--eval_data={data['heldout.packed']}",
            f"--vocab_file={data['vocab.txt']}", f"--model_dir={model_dir}", "--seed=0"]


_TRAIN = re.compile(r"step (\d+)/(\d+) \| loss ([\d.naif]+).*?\| ([\d.]+) seq/s")


_STOPPED = re.compile(r"(?:interrupted|stopped) at step (\d+)")


def curve_parser(record: dict):
    """A line handler filling record["train"] and record["eval"] from the run's output."""
    from electra_tf.training.reporting import parse_eval_line

    record.setdefault("train", [])
    record.setdefault("eval", [])

    def on_line(t: float, line: str) -> None:
        m = _TRAIN.search(line)
        if m:
            record["train"].append({"step": int(m.group(1)), "loss": float(m.group(3)),
                                    "seq_per_s": float(m.group(4)), "t_s": round(t, 1)})
            return
        m = _STOPPED.search(line)
        if m:
            record["stopped_at_step"] = int(m.group(1))
            return
        found = parse_eval_line(line)
        if found:
            record["eval"].append({"step": found[0], "t_s": round(t, 1), **found[1]})
    return on_line


def summarize(record: dict, batch: int) -> None:
    """The steady seq/s (median of the chunks after the first) and the first chunk's extra
    time (compilation and start-up of the input), from the train lines."""
    train = record.get("train", [])
    rates = sorted(x["seq_per_s"] for x in train[1:])
    if rates:
        record["steady_seq_per_s"] = rates[len(rates) // 2]
    if len(train) >= 2 and rates:
        first_steps = train[0]["step"]
        record["first_line_s"] = train[0]["t_s"]
        record["first_chunk_extra_s"] = round(
            train[0]["t_s"] - first_steps * batch / record["steady_seq_per_s"], 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", required=True, help="the folder bundle.py wrote")
    ap.add_argument("--out", required=True, help="what comes back: at most 8 files")
    ap.add_argument("--work_dir", default="", help="unpacked data and model folders "
                    "(default: a folder beside --out named gpu_small_work)")
    ap.add_argument("--budget_s", type=float, default=530.0,
                    help="wall time from now to the last file written")
    ap.add_argument("--toy", action="store_true", help="toy sizes (the CPU rehearsal)")
    ap.add_argument("--mode", choices=MODES, default=MODES[0],
                    help="the two runs side by side on one GPU (each with less than half its "
                    "memory) or one after the other (README.md: which and why)")
    args = ap.parse_args(argv)
    setting_name = "toy" if args.toy else "small"
    setting = SETTINGS[setting_name]
    work = args.work_dir or os.path.join(os.path.dirname(os.path.abspath(args.out)),
                                         "gpu_small_work")
    lease = Lease(args.out, args.budget_s, work)
    lease.results.update(setting=setting_name, command=" ".join(sys.argv))
    lease.log(f"setting {setting_name}, budget {args.budget_s:.0f} s, work in {work}")
    lease.results["device"] = device_facts()
    lease.log(f"device: {json.dumps(lease.results['device'])}")
    lease.save("device")

    data = unpack_bundle(args.bundle, os.path.join(work, "data"))
    manifest = data["manifest"]
    with open(data["paths"]["vocab.txt"], encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    lease.results["data"] = {k: manifest[k] for k in manifest if k != "files"}
    lease.results["data"]["vocab_size"] = vocab_size
    eval_steps = max(1, manifest["heldout_examples"] // setting["batch"])
    lease.log(f"data: {manifest['train_examples']:,} training and "
              f"{manifest['heldout_examples']:,} held-out sequences, vocab {vocab_size:,}")
    lease.save("data")

    flops = {o: flops_per_sequence(setting_name, o, vocab_size) for o in OBJECTIVES}
    the_plan = plan(setting, lease.left(), flops, args.mode)
    lease.results["plan"] = the_plan
    lease.log(f"plan: {json.dumps(the_plan)}")
    lease.save("plan")

    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONUNBUFFERED": "1"}
    lease.results["runs"] = {}
    runner = Runs(lease, setting_name, the_plan, data["paths"], work, vocab_size, eval_steps)
    cpu = {**env, "JAX_PLATFORMS": "cpu"}
    if args.mode == "side_by_side":
        # two processes on one GPU, each with less than half its memory (JAX's
        # XLA_PYTHON_CLIENT_MEM_FRACTION, preallocated); one common FLOPs target
        both = {**env, "XLA_PYTHON_CLIENT_MEM_FRACTION": MEM_FRACTION}
        jobs = [runner.job(o, lease.deadline - setting["split_s"], both) for o in OBJECTIVES]
        lease.run_many(jobs, runner.control(jobs))
        for job in jobs:
            runner.finish(job)
        lease.results["side_by_side"] = side_by_side_summary(lease.results["runs"],
                                                             setting["batch"])
        lease.log(f"side by side: {json.dumps(lease.results['side_by_side'])}")
        lease.save("runs")
        splits = [runner.split_job(o, args.out, lease.deadline + 60, cpu) for o in OBJECTIVES
                  if runner.has_weights(o)]
        lease.run_many(splits)
        for job in splits:
            lease.results["runs"][job["name"]]["parts"] = job["result"]
        lease.save("parts")
    else:
        first = runner.job("electra", min(time.monotonic() + the_plan["run_deadline_s"],
                                          lease.deadline - setting["split_s"]), env)
        lease.run_many([first], runner.control([first]))
        electra = runner.finish(first)
        pending = None
        if runner.has_weights("electra"):  # on the CPU, while the second run has the GPU
            split = runner.split_job("electra", args.out, 0, cpu)
            pending = lease.start(split["cmd"], cpu, split["on_line"])
        # the FLOPs ELECTRA actually did (its own rate sized it), in as many steps as they
        # take BERT-MLM, on the same schedule (steps planned in the same ratio)
        target = electra["flops_done"] if electra["steps_done"] < electra["steps_planned"] \
            else None
        second = runner.job("bert_mlm", lease.deadline - setting["split_s"], env, target)
        lease.run_many([second], runner.control([second]))
        runner.finish(second)
        if pending:
            lease.results["runs"]["electra"]["parts"] = lease.finish(pending,
                                                                     lease.deadline + 60)
            lease.save("electra parts")
        if runner.has_weights("bert_mlm"):
            split = runner.split_job("bert_mlm", args.out, lease.deadline + 60, env)
            lease.run_many([split])
            lease.results["runs"]["bert_mlm"]["parts"] = split["result"]
            lease.save("bert_mlm parts")
    runs = lease.results["runs"]
    if all(runs[o].get("flops_done") for o in OBJECTIVES):
        lease.results["flops_ratio_bert_mlm_to_electra"] = round(
            runs["bert_mlm"]["flops_done"] / runs["electra"]["flops_done"], 4)
    lease.results["wall_s"] = round(time.monotonic() - lease.t0, 1)
    lease.log(f"done in {lease.results['wall_s']} s")
    lease.save("done")
    lease.log_file.close()
    return 0


class Runs:
    """The two pre-training runs: their commands, their stops at a FLOPs target, their
    records in results.json."""

    def __init__(self, lease: Lease, setting_name: str, the_plan: dict, data: dict, work: str,
                 vocab_size: int, eval_steps: int):
        self.lease, self.setting_name, self.plan = lease, setting_name, the_plan
        self.setting = SETTINGS[setting_name]
        self.data, self.work, self.vocab_size, self.eval_steps = data, work, vocab_size, \
            eval_steps

    def flops_per_step(self, objective: str) -> float:
        return self.setting["batch"] * self.plan["flops_per_sequence"][objective]

    def job(self, objective: str, deadline: float, env: dict, target: float | None = None):
        steps = self.plan["steps"][objective]
        record = {"steps_planned": steps}
        if target is not None:
            record["flops_target"] = target
        self.lease.results["runs"][objective] = record
        model_dir = os.path.join(self.work, objective)
        shutil.rmtree(model_dir, ignore_errors=True)
        cmd = pretraining_command(self.setting_name, objective, steps, self.data, model_dir,
                                  self.vocab_size, self.eval_steps)
        record["command"] = " ".join(a if "/" not in a else re.sub(r"=.*/", "=.../", a)
                                     for a in cmd[1:])
        return {"name": objective, "cmd": cmd, "env": env, "deadline": deadline,
                "on_line": curve_parser(record), "record": record, "model_dir": model_dir,
                "chunk": periods(steps)["log"], "target": target, "final": None}

    def control(self, jobs: list[dict]):
        """After each line of a run: Ctrl-C to a run at the common FLOPs target, the least
        any run will have done by its deadline (or the job's own target, the first run's)."""
        lease = self.lease

        def on_line(job: dict | None) -> None:
            if len(jobs) > 1:
                self.pace(jobs)
            train = job["record"]["train"] if job else None
            if not train or job["interrupted"] is not None:
                return
            now, views = time.monotonic(), []
            for j in jobs:
                t, per_step = j["record"]["train"], self.flops_per_step(j["name"])
                code = j["proc"].poll()
                if code is not None and j["final"] is None:
                    if code != 0:
                        continue  # a run that failed sets no target for the other
                    j["final"] = t[-1]["step"] * per_step if t else 0.0
                # a chunk's time, twice, and a checkpoint's saving: left before the deadline
                chunk_s = (j["chunk"] * self.setting["batch"] / t[-1]["seq_per_s"]
                           if len(t) >= 2 else 0.0)
                views.append({"planned": self.plan["steps"][j["name"]] * per_step,
                              "done": t[-1]["step"] * per_step if t else 0.0,
                              "per_s": t[-1]["seq_per_s"] / self.setting["batch"] * per_step
                              if len(t) >= 2 else None,
                              "seconds_left": j["deadline"] - now - 2 * chunk_s - 10,
                              "final": j["final"]})
            target = flops_target(views)
            if job["target"] is not None:
                target = job["target"] if target is None else min(target, job["target"])
            if target is None:
                return
            per_step = self.flops_per_step(job["name"])
            step = train[-1]["step"]
            if stop_now(step, job["chunk"], self.plan["steps"][job["name"]],
                        target / per_step):
                job["final"] = (step + job["chunk"]) * per_step
                job["record"]["flops_target"] = target
                lease.interrupt(job, f"at step {step}, {target:.3e} FLOPs (the common "
                                     f"target) after this chunk")
        return on_line

    def pace(self, jobs: list[dict]) -> None:
        """Keeps runs going at once level in FLOPs: one more than `PACE_LEAD` of its plan
        ahead of the other (a slower compilation, a faster step) is held (SIGSTOP, the GPU
        then the other's alone) until the other is within half of that, or has ended. So a
        run stopped early (the deadline, no rate yet) leaves the other near its FLOPs."""
        now = time.monotonic()
        for job in jobs:
            if job["proc"].poll() is not None:
                continue
            per_step = self.flops_per_step(job["name"])
            others = [j for j in jobs if j is not job and j["proc"].poll() is None]
            done = _steps(job) * per_step
            lead = PACE_LEAD * self.plan["steps"][job["name"]] * per_step
            behind = min((_steps(j) * self.flops_per_step(j["name"]) for j in others),
                         default=None)
            if hold(done, behind, lead, job.get("held_since") is not None) and \
                    job["interrupted"] is None:
                if job.get("held_since") is None:
                    self.lease.log(f"{job['name']}: {done:.3e} FLOPs, the other "
                                   f"{behind:.3e}: held (SIGSTOP)")
                    job["held_since"] = now
                    job["proc"].send_signal(signal.SIGSTOP)
            elif job.get("held_since") is not None:
                held = now - job.pop("held_since")
                job["record"]["held_s"] = round(job["record"].get("held_s", 0.0) + held, 1)
                self.lease.log(f"{job['name']}: going on (SIGCONT) after {held:.1f} s held")
                job["proc"].send_signal(signal.SIGCONT)

    def finish(self, job: dict) -> dict:
        record, objective = job["record"], job["name"]
        record.update(job["result"])
        summarize(record, self.setting["batch"])
        final = os.path.join(job["model_dir"], "final_eval.json")
        if os.path.exists(final):
            with open(final, encoding="utf-8") as f:
                record["final_eval"] = json.load(f)
        if "final_eval" in record:
            record["steps_done"] = record["final_eval"]["step"]
        elif "stopped_at_step" in record:
            record["steps_done"] = record["stopped_at_step"]
        else:
            record["steps_done"] = record["train"][-1]["step"] if record["train"] else 0
        record["flops_done"] = record["steps_done"] * self.flops_per_step(objective)
        self.lease.log(f"{objective}: exit {record['exit']}, {record['steps_done']} steps in "
                       f"{record['wall_s']} s, steady {record.get('steady_seq_per_s')} seq/s, "
                       f"{record['flops_done']:.3e} FLOPs")
        self.lease.save(objective)
        return record

    def has_weights(self, objective: str) -> bool:
        model_dir = os.path.join(self.work, objective)
        return bool(self.lease.results["runs"][objective].get("steps_done")) or \
            os.path.isdir(os.path.join(model_dir, "checkpoints"))

    def split_job(self, objective: str, out: str, deadline: float, env: dict) -> dict:
        cmd = [sys.executable, "-m", "studies.gpu_small.parts", "split",
               f"--model_dir={os.path.join(self.work, objective)}",
               f"--output={os.path.join(out, objective)}"]
        return {"name": objective, "cmd": cmd, "env": env, "deadline": deadline,
                "on_line": _sha_parser(self.lease.results["runs"][objective])}


def side_by_side_summary(runs: dict, batch: int) -> dict:
    """What tells afterwards whether two runs at once gave each more sequences than one
    after the other: each run's steady seq/s and their sum (to hold against one run
    alone: a lease one after the other, or the speed lease's synthetic rate), and the
    wall time from the start to the last run's end."""
    rates = {o: r.get("steady_seq_per_s") for o, r in runs.items()}
    return {"steady_seq_per_s": rates,
            "sum_steady_seq_per_s": round(sum(v for v in rates.values() if v), 1),
            "sequences_done": {o: r.get("steps_done", 0) * batch for o, r in runs.items()},
            "runs_wall_s": max(r.get("wall_s", 0.0) for r in runs.values())}


def _sha_parser(record: dict):
    def on_line(t: float, line: str) -> None:
        m = re.search(r"\[parts\] .*\((.*)\): ([\d.]+) MiB in (\d+) part\(s\), sha256 (\w+)",
                      line)
        if m:
            record.update(parts_source=m.group(1), parts_mib=float(m.group(2)),
                          parts_count=int(m.group(3)), parts_sha256=m.group(4))
    return on_line


if __name__ == "__main__":
    sys.exit(main())
