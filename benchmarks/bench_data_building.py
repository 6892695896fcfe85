"""Data-building throughput (lines/s, tokens/s) at 1 and 2 processes.

    python benchmarks/bench_data_building.py --copies=20 --output=benchmarks/data_building.json

The corpus is the demo corpus (standard-library docstrings) written `copies`
times into as many files, so every run tokenizes and packs the same text.
Each setting runs in a fresh process (TF start-up and, with 2 processes, the
spawned workers' start-up are included: that is what a user waits for).
"""

import argparse
import json
import os
import platform
import sys
import time

from bench_common import repo_relative, run_checked, scratch_dir  # noqa: E402 (benchmarks/ is on sys.path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--num_shards", type=int, default=8)
    parser.add_argument("--max_documents", type=int, default=0,
                        help="the corpus's first N documents only (0, the tables: all of "
                             "it, some 400; the toy run: 40, whose vocabulary is learned in "
                             "seconds)")
    parser.add_argument("--output", default="benchmarks/data_building.json")
    args = parser.parse_args()

    from electra_tf.data.demo_corpus import write_corpus
    from electra_tf.text.vocab_builder import build_vocab

    work = scratch_dir("bench_data_")
    base = os.path.join(work, "corpus.txt")
    write_corpus(base, max_documents=args.max_documents)
    text = open(base, encoding="utf-8").read()
    for i in range(args.copies):
        with open(os.path.join(work, f"part-{i:03d}.txt"), "w", encoding="utf-8") as f:
            f.write(text)
    vocab = os.path.join(work, "vocab.txt")
    build_vocab(base, 4000, vocab, min_count=5)

    results = []
    for procs in (1, 2):
        out = os.path.join(work, f"out{procs}")
        cmd = [sys.executable, "-m", "electra_tf.build_pretraining_data",
               f"--corpus={work}/part-*.txt", f"--vocab_file={vocab}", f"--output_dir={out}",
               f"--max_seq_length={args.max_seq_length}", f"--num_shards={args.num_shards}",
               f"--num_processes={procs}", "--seed=0"]
        t0 = time.monotonic()
        run_checked(cmd, f"build_pretraining_data --num_processes={procs}")
        wall = time.monotonic() - t0
        stats = json.load(open(os.path.join(out, "pretrain_data_stats.json")))
        results.append({
            "num_processes": procs, "wall_seconds": round(wall, 2),
            "build_seconds": stats["seconds"], "lines": stats["lines"],
            "tokens": stats["tokens"], "examples": stats["examples"],
            "lines_per_second_wall": round(stats["lines"] / wall),
            "tokens_per_second_wall": round(stats["tokens"] / wall),
            "lines_per_second_build": round(stats["lines_per_second"]),
            "tokens_per_second_build": round(stats["tokens_per_second"]),
        })
        print(json.dumps(results[-1]), flush=True)
    same = all(open(os.path.join(work, "out1", f), "rb").read()
               == open(os.path.join(work, "out2", f), "rb").read()
               for f in os.listdir(os.path.join(work, "out1")) if f.startswith("pretrain_data.tf"))
    command = ("python benchmarks/bench_data_building.py "
               f"--copies={args.copies} --max_seq_length={args.max_seq_length} "
               f"--num_shards={args.num_shards} "
               + (f"--max_documents={args.max_documents} " if args.max_documents else "")
               + f"--output={repo_relative(args.output)}")
    report = {"command": command, "machine": {
        "cpu_count": os.cpu_count(), "processor": platform.processor() or platform.machine(),
        "python": platform.python_version()}, "copies": args.copies,
        "identical_bytes_1_vs_2_processes": same, "results": results}
    with open(args.output, "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
