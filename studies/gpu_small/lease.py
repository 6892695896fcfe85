r"""ELECTRA-Small against BERT-MLM Small at equal FLOPs, in one short GPU lease.

    # on the GPU machine, through studies/gpu_small/lease.sh run (which installs the wheels):
    python -m studies.gpu_small.lease --bundle=.bundle --out=$OUT --budget_s=530
    # the same steps on CPU at toy sizes (the rehearsal; studies/tests/test_gpu_small.py):
    python -m studies.gpu_small.lease --bundle=BUNDLE --out=OUT --toy --budget_s=900

In order, each result written to OUT as soon as it exists (a lease cut short
keeps what came before):
  1. the device and versions; the data bundle (bundle.py) unpacked and checked;
  2. the synthetic step rate of the same setting (benchmarks/bench_gpu.py's
     Small bf16, 10 steps a call; about a minute), which also sizes the plan;
  3. the plan: what time is left, less each run's start-up and compilation and the
     parts' writing, split in two; ELECTRA's steps from the synthetic rate (with a
     margin), BERT-MLM's for the same training FLOPs (study.flops_per_sequence);
  4. ELECTRA-Small through the product's own command (`KERAS_BACKEND=jax python -m
     electra_tf.run_pretraining`, the packed input), then its discriminator as
     float16 parts (parts.py) and its log; a run past its deadline gets Ctrl-C
     (it saves a checkpoint, which the parts are then made from);
  5. BERT-MLM Small the same way (ELECTRA's parts are written meanwhile, on the CPU).
OUT holds at most 8 files: results.json (rewritten after every step), lease.log
(everything printed), electra.part-K-of-N and bert_mlm.part-K-of-N.

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
    "small": dict(model_size="small", overrides={}, batch=128, seq=128, precision="bf16",
                  bench=["--sizes=small", "--only=electra_tf/small/bf16/K10"],
                  fallback_rate=4000.0, fallback_compile_s=60.0, startup_s=30.0,
                  eval_s=25.0, split_s=30.0, margin=0.85, min_steps=200, max_steps=10 ** 6),
    "toy": dict(model_size="tiny", overrides={"hidden_size": 32, "num_hidden_layers": 2,
                                              "num_attention_heads": 2, "intermediate_size": 64,
                                              "embedding_size": 16},
                batch=8, seq=32, precision="bf16",
                bench=["--toy", "--only=electra_tf/toy/bf16/K10"],
                fallback_rate=50.0, fallback_compile_s=30.0, startup_s=20.0,
                eval_s=10.0, split_s=20.0, margin=0.85, min_steps=20, max_steps=40),
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
        self.log("$ " + " ".join(cmd))
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1)
        interrupted = False
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if not interrupted and now > deadline:
                self.log("deadline reached: Ctrl-C (SIGINT) to the run")
                proc.send_signal(signal.SIGINT)
                interrupted = True
            if interrupted and now > deadline + 90:
                self.log("still running 90 s after Ctrl-C: killed")
                proc.kill()
            if sel.select(timeout=1.0):
                line = proc.stdout.readline()
                if not line:
                    break
                line = line.rstrip("\n")
                self.log_file.write(f"  {time.monotonic() - self.t0:7.1f} | {line}\n")
                self.log_file.flush()
                print(line, file=sys.stderr, flush=True)
                if on_line:
                    on_line(time.monotonic() - t0, line)
            elif proc.poll() is not None:
                break
        code = proc.wait()
        return {"exit": code, "wall_s": round(time.monotonic() - t0, 1),
                "interrupted": interrupted}


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


# === 2. the synthetic step rate ===
def synthetic_rate(lease: Lease, setting: dict, work: str, timeout_s: float) -> dict:
    prefix = os.path.join(work, "synthetic")
    cmd = [sys.executable, "benchmarks/bench_gpu.py", *setting["bench"],
           "--frameworks=electra_tf", f"--budget_s={timeout_s - 10:.0f}",
           f"--setting_timeout_s={timeout_s - 10:.0f}", f"--output={prefix}"]
    run = lease.run(cmd, time.monotonic() + timeout_s)
    try:
        with open(prefix + ".json", encoding="utf-8") as f:
            report = json.load(f)
        row = next(r for r in report["results"] if "sequences_per_second" in r)
        return {**run, "sequences_per_second": row["sequences_per_second"],
                "compile_s": row["compile_s"], "mfu": row.get("mfu"),
                "peak_tflops": report.get("peak_tflops"), "device": report.get("device")}
    except (OSError, ValueError, StopIteration, KeyError) as e:
        return {**run, "error": f"no rate measured ({type(e).__name__}: {e})"}


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


def plan(setting: dict, synthetic: dict, left_s: float, flops: dict) -> dict:
    """Steps and deadlines of the two runs (see the module docstring, 3.)."""
    rate = synthetic.get("sequences_per_second") or setting["fallback_rate"]
    compile_s = synthetic.get("compile_s") or setting["fallback_compile_s"]
    # the first run's parts are written while the second trains: one split to wait for
    overhead = setting["startup_s"] + compile_s + setting["eval_s"]
    train_s = max(0.0, (left_s - 2 * overhead - setting["split_s"]) / 2)
    electra = round_steps(train_s * rate * setting["margin"] / setting["batch"])
    electra = min(max(electra, setting["min_steps"]), setting["max_steps"])
    ratio = flops["electra"] / flops["bert_mlm"]
    bert = round_steps(electra * ratio + STEPS_PER_CALL / 2)
    return {"rate_assumed": rate, "compile_s_assumed": compile_s, "overhead_s": overhead,
            "train_s_each": round(train_s, 1), "steps": {"electra": electra, "bert_mlm": bert},
            "flops_per_sequence": flops, "flops": {
                "electra": electra * setting["batch"] * flops["electra"],
                "bert_mlm": bert * setting["batch"] * flops["bert_mlm"]},
            "run_deadline_s": round(overhead + train_s / setting["margin"] + 30, 1)}


def periods(steps: int) -> dict:
    """Log 20 times, evaluate and save 4 times, all multiples of STEPS_PER_CALL."""
    log_every = round_steps(steps / 20)
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

    synthetic_budget = min(110.0, max(75.0, lease.left() * 0.2))
    lease.results["synthetic"] = synthetic_rate(lease, setting, work, synthetic_budget)
    lease.log(f"synthetic: {json.dumps(lease.results['synthetic'])}")
    lease.save("synthetic")

    flops = {o: flops_per_sequence(setting_name, o, vocab_size) for o in OBJECTIVES}
    the_plan = plan(setting, lease.results["synthetic"], lease.left(), flops)
    lease.results["plan"] = the_plan
    lease.log(f"plan: {json.dumps(the_plan)}")
    lease.save("plan")

    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONUNBUFFERED": "1"}
    lease.results["runs"] = {}
    pending = []  # (objective, job): parts being written while the next run trains
    for i, objective in enumerate(OBJECTIVES):
        steps = the_plan["steps"][objective]
        if objective == "bert_mlm":  # the FLOPs ELECTRA actually used
            done = lease.results["runs"]["electra"].get("steps_done") or 0
            if 0 < done < the_plan["steps"]["electra"]:
                steps = round_steps(done * flops["electra"] / flops["bert_mlm"]
                                    + STEPS_PER_CALL / 2)
        record = {"steps_planned": steps}
        lease.results["runs"][objective] = record
        model_dir = os.path.join(work, objective)
        shutil.rmtree(model_dir, ignore_errors=True)
        reserve = setting["split_s"]
        deadline = min(time.monotonic() + the_plan["run_deadline_s"],
                       lease.deadline - reserve)
        cmd = pretraining_command(setting_name, objective, steps, data["paths"], model_dir,
                                  vocab_size, eval_steps)
        record["command"] = " ".join(a if "/" not in a else re.sub(r"=.*/", "=.../", a)
                                     for a in cmd[1:])
        record.update(lease.run(cmd, deadline, env, curve_parser(record)))
        summarize(record, setting["batch"])
        final = os.path.join(model_dir, "final_eval.json")
        if os.path.exists(final):
            with open(final, encoding="utf-8") as f:
                record["final_eval"] = json.load(f)
        record["steps_done"] = (record["final_eval"]["step"] if "final_eval" in record
                                else (record["train"][-1]["step"] if record["train"] else 0))
        record["flops_done"] = record["steps_done"] * setting["batch"] * flops[objective]
        lease.log(f"{objective}: exit {record['exit']}, {record['steps_done']} steps in "
                  f"{record['wall_s']} s, steady {record.get('steady_seq_per_s')} seq/s")
        lease.save(objective)
        if record["steps_done"] or os.path.isdir(os.path.join(model_dir, "checkpoints")):
            split = [sys.executable, "-m", "studies.gpu_small.parts", "split",
                     f"--model_dir={model_dir}", f"--output={os.path.join(args.out, objective)}"]
            if i + 1 < len(OBJECTIVES):  # on the CPU, while the next run has the GPU
                pending.append((objective, lease.start(split, {**env, "JAX_PLATFORMS": "cpu"},
                                                       _sha_parser(record))))
            else:
                record["parts"] = lease.run(split, lease.deadline + 60, env, _sha_parser(record))
                lease.save(f"{objective} parts")
        for name, job in pending if i + 1 == len(OBJECTIVES) else ():
            lease.results["runs"][name]["parts"] = lease.finish(job, lease.deadline + 60)
            lease.save(f"{name} parts")
    lease.results["wall_s"] = round(time.monotonic() - lease.t0, 1)
    lease.log(f"done in {lease.results['wall_s']} s")
    lease.save("done")
    lease.log_file.close()
    return 0


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
