"""Peak memory of pre-training steps against electra_tf's estimate (training/memory.py).

    python benchmarks/bench_memory.py --output=benchmarks/memory_estimate

Each run is `python -m electra_tf.run_pretraining` of a paper size at one length and
batch for a few steps (TensorFlow, float32, no XLA), in a process of its own; its
peak resident memory is the kernel's count for that process (wait4's ru_maxrss).
The records are built by `electra_tf.build_pretraining_data` from random words of a
30,522-token vocabulary, so the generator's logits are the paper's size. The
estimate is `memory.pretraining_estimate` of the same configuration; the table
gives both and their ratio, which tests/training/test_memory_check.py holds
within its bounds.
"""

import argparse
import datetime
import json
import os
import random
import subprocess
import sys
import time

from bench_common import cpu_model, run_checked, scratch_dir, synthetic_vocab  # noqa: E402

# The recorded run's (memory_estimate.md): base at 512 x 24 had needed about 36 GiB.
DEFAULT_RUNS = ("tiny:128:8,small:128:32,small:128:128,small:512:16,small:512:24,"
                "base:128:32,base:512:4,base:512:8")


def parse_runs(text: str) -> list[tuple[str, int, int, int]]:
    """SIZE:LENGTH:BATCH[:K] -> (size, length, batch, k): K micro-batches of BATCH/K
    (--gradient_accumulation_steps; 1 without)."""
    runs = []
    for part in text.split(","):
        try:
            size, length, batch, *rest = part.split(":")
            k = int(rest[0]) if rest else 1
            if len(rest) > 1 or k < 1 or int(batch) % k:
                raise ValueError
            runs.append((size, int(length), int(batch), k))
        except ValueError:  # (had been an unpacking traceback)
            raise SystemExit(f"error: --runs: {part!r} is not SIZE:LENGTH:BATCH[:K] with K "
                             "dividing BATCH (e.g. small:128:32 or small:128:32:4)") from None
    return runs


def write_corpus(path: str, vocab_size: int, documents: int, seed: int = 0) -> None:
    """Documents of random vocabulary words (`synthetic_vocab`'s wN), a line a sentence."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(documents):
            for _ in range(rng.randint(20, 40)):
                words = rng.randint(6, 16)
                f.write(" ".join(f"w{rng.randrange(vocab_size - 104)}" for _ in range(words)))
                f.write("\n")
            f.write("\n")


def peak_rss_kib(cmd: list, log: str) -> tuple[int, int, float]:
    """Runs `cmd` to its end: (exit status, its peak resident memory in KiB, seconds)."""
    t0 = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, int(usage.ru_maxrss), time.monotonic() - t0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", default=DEFAULT_RUNS,
                        help="comma-separated SIZE:MAX_SEQ_LENGTH:BATCH[:K], K micro-batches "
                             "of BATCH/K (--gradient_accumulation_steps)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--documents", type=int, default=600)
    parser.add_argument("--output", default="benchmarks/memory_estimate")
    args = parser.parse_args()

    from electra_tf.core.config import PretrainingConfig
    from electra_tf.training import memory

    runs = parse_runs(args.runs)
    work = scratch_dir("bench_memory_")
    vocab = synthetic_vocab(os.path.join(work, "vocab.txt"))
    corpus = os.path.join(work, "corpus.txt")
    write_corpus(corpus, 30522, args.documents)
    records = {}
    for length in sorted({r[1] for r in runs}):
        out = os.path.join(work, f"records{length}")
        run_checked([sys.executable, "-m", "electra_tf.build_pretraining_data",
                     f"--corpus={corpus}", f"--vocab_file={vocab}", f"--output_dir={out}",
                     f"--max_seq_length={length}", "--seed=0"],
                    f"build_pretraining_data --max_seq_length={length}")
        records[length] = os.path.join(out, "pretrain_data.tfrecord-*")

    rows = []
    for size, length, batch, k in runs:
        model_dir = os.path.join(work, f"model_{size}_{length}_{batch}_{k}")
        flags = [f"--model_size={size}", f"--max_seq_length={length}",
                 f"--train_batch_size={batch}", f"--gradient_accumulation_steps={k}"]
        cmd = [sys.executable, "-m", "electra_tf.run_pretraining", *flags,
               f"--train_data={records[length]}", f"--vocab_file={vocab}",
               f"--model_dir={model_dir}", f"--num_train_steps={args.steps}",
               "--num_warmup_steps=1", "--iterations_per_loop=1", "--eval_every_steps=0"]
        status, peak, seconds = peak_rss_kib(cmd, model_dir + ".log")
        if status != 0:
            sys.stderr.write(open(model_dir + ".log").read()[-3000:])
            raise SystemExit(f"{' '.join(flags)} exited with {status}")
        config = PretrainingConfig(model_size=size, max_seq_length=length,
                                   train_batch_size=batch)
        estimate = memory.pretraining_estimate(config, batch // k)  # one micro-batch's
        rows.append({"size": size, "max_seq_length": length, "batch": batch,
                     "gradient_accumulation_steps": k,
                     "peak_rss_kib": peak, "estimate_kib": int(estimate.total // 1024),
                     "measured_over_estimate": round(peak * 1024 / estimate.total, 3),
                     "seconds": round(seconds, 1)})
        print(f"[bench_memory] {size} {length} x {batch} ({k} micro-batch(es)): peak {peak / 2**20:.2f} GiB, "
              f"estimate {estimate.total / 2**30:.2f} GiB", file=sys.stderr)

    command = "python benchmarks/bench_memory.py " + " ".join(
        a if not a.startswith("--output=") else "--output=" + os.path.basename(a.split("=")[1])
        for a in sys.argv[1:])
    result = {"command": command.strip(), "machine": f"{cpu_model()}, {os.cpu_count()} cores",
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "steps": args.steps, "rows": rows}
    with open(args.output + ".json", "w") as f:
        json.dump(result, f, indent=1)
    lines = ["| size | length | batch | micro-batches | peak resident GiB | estimate GiB | "
             "measured / estimate |", "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['size']} | {r['max_seq_length']} | {r['batch']} | "
              f"{r['gradient_accumulation_steps']} | "
              f"{r['peak_rss_kib'] / 2**20:.2f} | {r['estimate_kib'] / 2**20:.2f} | "
              f"{r['measured_over_estimate']:.2f} |" for r in rows]
    with open(args.output + ".table.md", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
