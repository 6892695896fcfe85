"""Fine-tuning throughput for ELECTRA-Small at seq 128 and 512 (examples/s).

    python benchmarks/bench_finetuning.py --output=benchmarks/finetuning_throughput.json

A randomly initialized Small discriminator (vocab 30522) is saved by
electra_tf's own folder writers (a pre-training model_dir, as run_pretraining
writes one), then fine-tuned on a synthetic classification
task (SST-2 layout, sentences long enough to fill the window) through the
real `Finetuning` loop: tf.data input, per-replica step, layer-wise decay,
AdamW. Each setting runs in a fresh process; warm-up steps (tracing, XLA
compilation) are excluded from the timing.
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
from bench_common import pretrained_folder, synthetic_vocab
from electra_tf.core.config import FinetuningRun, FinetuningConfig
from electra_tf.tasks.registry import get_task
from electra_tf.training.backends.tensorflow import TensorFlowFinetuning
work, L, batch, jit, precision, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5], int(sys.argv[6])
model_size = sys.argv[7]
pre = os.path.join(work, "pretrained")
if not os.path.exists(pre):  # written once, by electra_tf's folder writers
    pretrained_folder(pre, synthetic_vocab(os.path.join(work, "vocab.txt")), model_size)
data = os.path.join(work, f"data{L}")
if not os.path.exists(data):
    os.makedirs(data)
    rng = random.Random(0)
    for split, n in (("train", batch * (steps + 4)), ("dev", batch)):
        rows = ["sentence\tlabel"] + [" ".join(f"w{rng.randrange(5000)}" for _ in range(L)) + f"\t{i % 2}" for i in range(n)]
        open(os.path.join(data, f"{split}.tsv"), "w").write("\n".join(rows) + "\n")
run = FinetuningRun(model_dir=os.path.join(work, f"m{L}{jit}{precision}{time.time()}"), data_dir=data,
                    init_checkpoint=pre, jit_compile=jit,
                    mixed_precision=precision, do_eval=False)
ft = TensorFlowFinetuning(get_task("sst2"), FinetuningConfig(task_name="sst2", max_seq_length=L, train_batch_size=batch, model_size=model_size,
                num_train_epochs=1, save_checkpoints_steps=10**6), run)
_, feats = ft.features("train")
ft.build_optimizer(len(feats) // batch)
it = ft.train_iterator(0)
ft.train_steps(it, 2)  # tracing (and XLA compilation) excluded from the timing
t0 = time.perf_counter()
ft.train_steps(it, steps)
dt = time.perf_counter() - t0
print("RESULT", json.dumps({"seq_length": L, "batch": batch, "jit_compile": jit, "precision": precision,
                            "steps": steps, "seconds": round(dt, 3), "examples_per_second": round(steps * batch / dt, 2)}))
'''


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", default="benchmarks/finetuning_throughput.json")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--settings", default=SETTINGS,
                        help="comma-separated SEQ:BATCH:JIT:PRECISION (JIT 0 or 1; fp32, bf16)")
    parser.add_argument("--model_size", default="small",
                        help="small (what the table records) or tiny (the test's toy run).")
    args = parser.parse_args()
    work = scratch_dir("bench_ft_")
    settings = [(int(L), int(b), j, p) for L, b, j, p in
                (item.split(":") for item in args.settings.split(","))]
    results = []
    for L, batch, jit, precision in settings:
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-c", CHILD, work, str(L), str(batch), jit,
                               precision, str(args.steps), args.model_size, HERE],
                              capture_output=True, text=True, cwd=ROOT)
        line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        if proc.returncode or not line:
            print(proc.stderr[-2000:], file=sys.stderr)
            raise SystemExit(f"setting {(L, batch, jit, precision)} failed")
        results.append(json.loads(line[0][7:]))
        print(results[-1], f"(process {time.monotonic() - t0:.0f}s)", flush=True)
    command = " ".join(["python", "benchmarks/bench_finetuning.py"]
                       + [relative_flag(a) for a in sys.argv[1:]])
    report = {"command": command, "cpu": cpu_model(), "cores": os.cpu_count(),
              "model_size": args.model_size, "results": results}
    with open(args.output, "w") as f:
        json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
