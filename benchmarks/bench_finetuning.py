"""Fine-tuning throughput for ELECTRA-Small at seq 128 and 512 (examples/s).

    python benchmarks/bench_finetuning.py --output=benchmarks/finetuning_throughput.json

A randomly initialized Small discriminator (vocab 30522) is saved the way
run_pretraining saves one, then fine-tuned on a synthetic classification
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
import tempfile
import time

from bench_common import cpu_model  # noqa: E402 (benchmarks/ is on sys.path)

CHILD = r'''
import json, os, sys, time, random
import numpy as np, tensorflow as tf, keras
from electra_tf import folders
from electra_tf.core.config import EncoderConfig, MODEL_SIZES, FinetuningRun, FinetuningConfig
from electra_tf.modeling import build_discriminator
from electra_tf.tasks.registry import get_task
from electra_tf.training.backends.tensorflow import TensorFlowFinetuning
work, L, batch, jit, precision, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5], int(sys.argv[6])
pre = os.path.join(work, "pretrained")
if not os.path.exists(os.path.join(pre, folders.files.DISCRIMINATOR_WEIGHTS)):
    cfg = EncoderConfig(vocab_size=30522, **MODEL_SIZES["small"])
    folders.pretraining.save_discriminator(pre, build_discriminator(cfg))
    vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += [f"w{i}" for i in range(30522 - len(vocab))]
    open(os.path.join(work, "vocab.txt"), "w").write("\n".join(vocab) + "\n")
data = os.path.join(work, f"data{L}")
if not os.path.exists(data):
    os.makedirs(data)
    rng = random.Random(0)
    for split, n in (("train", batch * (steps + 4)), ("dev", batch)):
        rows = ["sentence\tlabel"] + [" ".join(f"w{rng.randrange(5000)}" for _ in range(L)) + f"\t{i % 2}" for i in range(n)]
        open(os.path.join(data, f"{split}.tsv"), "w").write("\n".join(rows) + "\n")
run = FinetuningRun(model_dir=os.path.join(work, f"m{L}{jit}{precision}{time.time()}"),
                    data_dir=data, init_checkpoint=pre,
                    vocab_file=os.path.join(work, "vocab.txt"), jit_compile=jit,
                    mixed_precision=precision, do_eval=False)
ft = TensorFlowFinetuning(get_task("sst2"), FinetuningConfig(task_name="sst2", max_seq_length=L, train_batch_size=batch,
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
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench_ft_")
    settings = [(128, 32, "0", "fp32"), (128, 32, "1", "fp32"), (128, 32, "0", "bf16"),
                (512, 8, "0", "fp32"), (512, 8, "1", "fp32"), (512, 8, "0", "bf16")]
    results = []
    for L, batch, jit, precision in settings:
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-c", CHILD, work, str(L), str(batch), jit,
                               precision, str(args.steps)], capture_output=True, text=True)
        line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        if proc.returncode or not line:
            print(proc.stderr[-2000:], file=sys.stderr)
            raise SystemExit(f"setting {(L, batch, jit, precision)} failed")
        results.append(json.loads(line[0][7:]))
        print(results[-1], f"(process {time.monotonic() - t0:.0f}s)", flush=True)
    report = {"command": "python benchmarks/bench_finetuning.py", "cpu": cpu_model(),
              "cores": os.cpu_count(), "results": results}
    json.dump(report, open(args.output, "w"), indent=2)


if __name__ == "__main__":
    main()
