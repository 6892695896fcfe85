r"""Fine-tuning throughput for ELECTRA-Small at seq 128 and 512 (examples/s).

    python benchmarks/bench_finetuning.py --output=benchmarks/finetuning_throughput.json

A randomly initialized Small discriminator (vocab 30522) is saved by
electra_tf's own folder writers (a pre-training model_dir, as run_pretraining
writes one), then fine-tuned on a synthetic classification
task (SST-2 layout, sentences long enough to fill the window; with
--sentence_words=LO:HI, LO to HI words each) through the real `Finetuning` loop:
tf.data input, batches cut to their longest example (FinetuningRun.trim_batches;
a setting's TRIM field 0 keeps every batch at the window), per-replica step,
layer-wise decay, AdamW. Each setting runs in a fresh process; warm-up steps
(tracing, XLA compilation) are excluded from the timing. The A/B of batch
trimming on SST-2-like lengths (finetuning_throughput.md):

    python benchmarks/bench_finetuning.py --sentence_words=4:40 --steps=4 \
        --settings=128:32:0:fp32:0,128:32:0:fp32:1,128:32:0:fp32:0,128:32:0:fp32:1 \
        --output=benchmarks/finetuning_trim.json

Where a step's wall time goes (peer_cpu.md, "On an Intel CPU"): --profile_steps=N
traces N more steps after the timed ones and adds, per step, the time while
matrix products run and, while none does, each op type's share
(bench_common.op_time_profile):

    python benchmarks/bench_finetuning.py --settings=128:32:0:fp32:0 --steps=3 \
        --profile_steps=3 --output=/tmp/ft_profile.json
"""

import argparse
import json
import os
import subprocess
import sys
import time

from bench_common import ROOT, cpu_model, relative_flag, scratch_dir  # noqa: E402 (benchmarks/ is on sys.path)

HERE = os.path.dirname(os.path.abspath(__file__))
SETTINGS = "128:32:0:fp32,128:32:1:fp32,128:32:0:bf16,512:8:0:fp32,512:8:1:fp32,512:8:0:bf16"

CHILD = r'''
import json, os, sys, time, random
sys.path.insert(0, sys.argv[8])  # benchmarks/
import numpy as np, tensorflow as tf, keras
from bench_common import pretrained_folder, profile_training_steps, synthetic_vocab
from electra_tf.core.config import FinetuningRun, FinetuningConfig
from electra_tf.tasks.registry import get_task
from electra_tf.training.backends.tensorflow import TensorFlowFinetuning
work, L, batch, jit, precision, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5], int(sys.argv[6])
model_size = sys.argv[7]
trim, words = sys.argv[9] == "1", [int(w) for w in sys.argv[10].split(":")] if sys.argv[10] else [L, L]
profile_steps = int(sys.argv[11])
warmup = int(sys.argv[12])
pre = os.path.join(work, "pretrained")
if not os.path.exists(pre):  # written once, by electra_tf's folder writers
    pretrained_folder(pre, synthetic_vocab(os.path.join(work, "vocab.txt")), model_size)
# (the batch in the name: a setting of another batch had read an earlier one's rows and
# run out of them, "End of sequence")
data = os.path.join(work, f"data{L}_{batch}_{words[0]}_{words[1]}_{warmup + steps + profile_steps}")
if not os.path.exists(data):
    os.makedirs(data)
    rng = random.Random(0)
    for split, n in (("train", batch * (warmup + steps + profile_steps + 2)), ("dev", batch)):
        rows = ["sentence\tlabel"] + [" ".join(f"w{rng.randrange(5000)}" for _ in range(rng.randint(*words))) + f"\t{i % 2}" for i in range(n)]
        open(os.path.join(data, f"{split}.tsv"), "w").write("\n".join(rows) + "\n")
run = FinetuningRun(model_dir=os.path.join(work, f"m{L}{jit}{precision}{time.time()}"), data_dir=data,
                    init_checkpoint=pre, jit_compile=jit,
                    mixed_precision=precision, do_eval=False, trim_batches=trim)
ft = TensorFlowFinetuning(get_task("sst2"), FinetuningConfig(task_name="sst2", max_seq_length=L, train_batch_size=batch, model_size=model_size,
                num_train_epochs=1, save_checkpoints_steps=10**6), run)
_, feats = ft.features("train")
ft.build_optimizer(len(feats) // batch)
it = ft.train_iterator(0)
ft.train_steps(it, warmup)  # tracing (and XLA compilation) excluded from the timing
t0 = time.perf_counter()
ft.train_steps(it, steps)
dt = time.perf_counter() - t0
result = {"seq_length": L, "batch": batch, "jit_compile": jit, "precision": precision,
          "trim_batches": trim, "sentence_words": sys.argv[10] or "fill",
          "steps": steps, "seconds": round(dt, 3), "examples_per_second": round(steps * batch / dt, 2)}
if profile_steps:
    result["profile"] = profile_training_steps(lambda n: ft.train_steps(it, n), profile_steps,
                                               os.path.join(work, f"profile{time.time()}"))
print("RESULT", json.dumps(result))
'''


def run_child(work, seq_length, batch, jit, precision, steps, model_size, trim="1",
              sentence_words="", profile_steps=0, warmup=2):
    """Runs CHILD in a fresh process (jit and trim "0" or "1"); returns (its RESULT dict,
    or None where it failed, and its stderr). The one place CHILD's arguments are listed,
    for this script and bench_peer.py. `warmup`: untimed steps first (at least 1: the
    tracing and compilation)."""
    proc = subprocess.run([sys.executable, "-c", CHILD, work, str(seq_length), str(batch), jit,
                           precision, str(steps), model_size, HERE, trim, sentence_words,
                           str(profile_steps), str(max(1, warmup))],
                          capture_output=True, text=True, cwd=ROOT)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not line:
        return None, proc.stderr
    return json.loads(line[0][7:]), proc.stderr


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", default="benchmarks/finetuning_throughput.json")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--settings", default=SETTINGS,
                        help="comma-separated SEQ:BATCH:JIT:PRECISION[:TRIM] (JIT 0 or 1; fp32, "
                             "bf16; TRIM 1, the default, or 0: FinetuningRun.trim_batches); "
                             "a setting given twice runs twice, in the order given")
    parser.add_argument("--sentence_words", default="",
                        help="LO:HI: each synthetic sentence has LO..HI words (one token "
                             "each), e.g. 4:40 for SST-2-like lengths; empty: every sentence "
                             "fills the window")
    parser.add_argument("--profile_steps", type=int, default=0,
                        help="after the timed steps, trace this many more with TensorFlow's "
                             "profiler and add where their wall time went to each result "
                             "(bench_common.op_time_profile; jit_compile 0 only: XLA runs "
                             "its own ops); 0: no trace")
    parser.add_argument("--model_size", default="small",
                        help="small (what the table records) or tiny (the test's toy run).")
    args = parser.parse_args()
    work = scratch_dir("bench_ft_")
    settings = []
    for item in args.settings.split(","):  # (a short or odd one had been a traceback, or
        # a JIT or TRIM of 2 read as off)
        parts = item.split(":")
        if not 4 <= len(parts) <= 5 or not all(x.isdigit() for x in parts[:2]) or \
                parts[2] not in ("0", "1") or parts[3] not in ("fp32", "bf16") or \
                parts[4:] not in ([], ["0"], ["1"]):
            raise SystemExit(f"error: --settings: {item!r} is not SEQ:BATCH:JIT:PRECISION[:TRIM] "
                             "(JIT and TRIM 0 or 1, PRECISION fp32 or bf16)")
        L, b, j, p, *t = parts
        settings.append((int(L), int(b), j, p, (t or ["1"])[0]))
    if args.profile_steps < 0 or (args.profile_steps and any(s[2] == "1" for s in settings)):
        raise SystemExit("error: --profile_steps must be >= 0, and traces settings with JIT 0 "
                         "only (XLA runs its own ops, which the profile does not split)")
    results = []
    for L, batch, jit, precision, trim in settings:
        t0 = time.monotonic()
        result, stderr = run_child(work, L, batch, jit, precision, args.steps,
                                   args.model_size, trim, args.sentence_words,
                                   args.profile_steps)
        if result is None:
            print(stderr[-2000:], file=sys.stderr)
            raise SystemExit(f"setting {(L, batch, jit, precision, trim)} failed")
        results.append(result)
        print(results[-1], f"(process {time.monotonic() - t0:.0f}s)", flush=True)
    command = " ".join(["python", "benchmarks/bench_finetuning.py"]
                       + [relative_flag(a) for a in sys.argv[1:]])
    report = {"command": command, "cpu": cpu_model(), "cores": os.cpu_count(),
              "model_size": args.model_size, "results": results}
    with open(args.output, "w") as f:
        json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
