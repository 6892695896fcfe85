"""Electric's scoring export against the classification export, side by side.

    python benchmarks/bench_score_export.py --output=benchmarks/score_export_latency

Both are ELECTRA-Small (random weights, vocab 30522: bench_export.py's sst2
folder, and a pre-training folder of the same discriminator that records
objective=electric), exported at seq 128 with the default length buckets and
loaded back with tf.saved_model.load in this process. The request is a
re-ranking batch: 10 hypotheses of 20 words each, through the text signature
(tokenization included). The two exports' calls alternate (order flipped every
pair) so that the load of a shared machine hits both alike; p50 / p95 of each
and the ratio of the p50s are recorded.
"""

import argparse
import json
import os
import platform
import random
import sys
import time

import numpy as np
from bench_common import (  # noqa: E402 (benchmarks/ is on sys.path)
    cpu_model,
    finetuned_folder,
    pretrained_folder,
    relative_flag,
    run_main,
    scratch_dir,
    synthetic_vocab,
)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", default="")
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--model_size", default="small", help="small; tiny for a toy run")
    parser.add_argument("--vocab_size", type=int, default=30522)
    args = parser.parse_args()
    import tensorflow as tf

    from electra_tf.serving.export import export, load_spec

    work = scratch_dir("bench_score_")
    # The same random discriminator (seed 0) in both folders, written by
    # electra_tf's folder writers: sst2's with its head, and a pre-training folder
    # that records objective=electric.
    vocab = synthetic_vocab(os.path.join(work, "vocab.txt"), args.vocab_size)
    sst2 = finetuned_folder(os.path.join(work, "sst2"), "sst2", vocab, args.model_size)
    electric = pretrained_folder(os.path.join(work, "electric"), vocab, args.model_size,
                                 objective="electric")
    paths = {"classification": export(load_spec("sequence_classification", sst2),
                                      work, "cls"),
             "score": export(load_spec("score", electric, max_seq_length=128),
                             work, "score")}
    fns = {k: tf.saved_model.load(p).signatures["serving_default"] for k, p in paths.items()}
    rng = random.Random(0)
    words = args.vocab_size - 104  # "wN" is one WordPiece for N < words
    texts = tf.constant([" ".join(f"w{rng.randrange(words)}" for _ in range(20))
                         for _ in range(10)])
    for fn in fns.values():
        for _ in range(args.warmup):
            {k: v.numpy() for k, v in fn(text=texts).items()}
    times = {k: [] for k in fns}
    order = list(fns)
    for i in range(args.iters):
        for name in (order if i % 2 == 0 else order[::-1]):
            t0 = time.perf_counter()
            {k: v.numpy() for k, v in fns[name](text=texts).items()}
            times[name].append(1e3 * (time.perf_counter() - t0))
    # (machine paths, sys.argv as given, had gone into the results: repository-relative)
    result = {"command": " ".join(["python", "benchmarks/bench_score_export.py"]
                                 + [relative_flag(a) for a in sys.argv[1:]]), "cpu": cpu_model(),
              "date": time.strftime("%Y-%m-%d"), "python": platform.python_version(),
              "tensorflow": tf.__version__, "model_size": args.model_size,
              "batch": 10, "words": 20, "iters": args.iters}
    for name, t in times.items():
        result[name] = {"p50_ms": round(float(np.percentile(t, 50)), 2),
                        "p95_ms": round(float(np.percentile(t, 95)), 2)}
    result["p50_ratio_score_over_classification"] = round(
        result["score"]["p50_ms"] / result["classification"]["p50_ms"], 3)
    print(json.dumps(result, indent=2))
    if args.output:
        with open(args.output + ".json", "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    run_main(main)
