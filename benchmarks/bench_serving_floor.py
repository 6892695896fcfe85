"""What bounds a short request to an ELECTRA-Small export on CPU (issue #24).

    python benchmarks/bench_serving_floor.py --output=benchmarks/serving_floor

Two measurements, each in a fresh child process per TensorFlow intra-op thread
count (--threads, default 1 and 2; inter-op threads 2):

1. The model alone: the Small discriminator with its classification head,
   called on ids [1, L] (all real) in a tf.function, without and with XLA
   (jit_compile), for L in --lengths. No tokenization, no buckets, no signature:
   the floor an export cannot go below with this graph on this CPU.
2. The export as TF Serving runs it: the SavedModel loaded with the TF1 loader
   into a Session (ConfigProto with the same thread counts, as the server's
   --tensorflow_intra_op_parallelism / --tensorflow_inter_op_parallelism set),
   the text signature called with a 20-word and a 128-word text at batch 1 and
   a mixed batch of 32 texts of 5-120 words. Two exports of the same weights:
   the default length buckets (16, 32, 48, 64, 96, 128) and finer ones
   (--fine_buckets, default 8, 16, 24, 32, 48, 64, 96, 128).

Texts are "wN" words (one piece each, as bench_export.py's vocabulary), so a
20-word text is 22 positions with [CLS] and [SEP]. Latencies are p50 over
--iters calls after --warmup calls; each child measures everything in one
go, so compare rows of one run.
"""

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time

import numpy as np
from bench_common import ROOT, repo_relative  # noqa: E402 (benchmarks/ is on sys.path)

sys.path.insert(0, ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

DEFAULT_BUCKETS = (16, 32, 48, 64, 96, 128)


def _p50(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(1e3 * float(np.median(times)), 2)


def child(args):
    """One thread setting: prints one JSON row per measurement."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    import keras
    import tensorflow_text  # noqa: F401 (the text signature's ops)

    from electra_tf.config import MODEL_SIZES, EncoderConfig
    from electra_tf.modeling import build_discriminator
    from electra_tf.modeling.finetuning import FinetuningModel

    keras.utils.set_random_seed(0)
    config = EncoderConfig(vocab_size=30522, **MODEL_SIZES["small"])
    model = FinetuningModel(build_discriminator(config).encoder, "classification", 2)
    model.build()
    for jit in (False, True):
        fn = tf.function(lambda x: model(x, training=False), jit_compile=jit)
        for length in args.lengths:
            ids = tf.constant(np.random.default_rng(0).integers(1000, 30000, [1, length]),
                              tf.int32)
            x = {"input_ids": ids, "input_mask": tf.ones_like(ids),
                 "segment_ids": tf.zeros_like(ids)}
            p50 = _p50(lambda: tf.nest.map_structure(lambda t: t.numpy(), fn(x)),
                       args.warmup, args.iters)
            print(json.dumps({"part": "model", "threads": args.threads, "jit": jit,
                              "length": length, "batch": 1, "p50_ms": p50}), flush=True)

    rng = random.Random(0)
    cases = [("20 words", [20]), ("128 words", [128]),
             ("mixed 5-120 words", [rng.randint(5, 120) for _ in range(32)])]
    for name in ("default", "fine"):
        graph = tf.Graph()
        with graph.as_default():
            session_config = tf.compat.v1.ConfigProto(
                intra_op_parallelism_threads=args.threads, inter_op_parallelism_threads=2)
            sess = tf.compat.v1.Session(graph=graph, config=session_config)
            meta = tf.compat.v1.saved_model.loader.load(
                sess, ["serve"], os.path.join(args.work, name))
            sig = meta.signature_def["serving_default"]
            fetch = {k: v.name for k, v in sig.outputs.items()}
            for label, lengths in cases:
                texts = np.array([" ".join(f"w{rng.randrange(1000, 30000)}" for _ in range(n))
                                  for n in lengths], dtype=object)
                feed = {sig.inputs["text"].name: texts}
                iters = args.iters if len(lengths) == 1 else max(5, args.iters // 4)
                p50 = _p50(lambda: sess.run(fetch, feed), args.warmup, iters)
                print(json.dumps({"part": "export", "threads": args.threads, "buckets": name,
                                  "inputs": label, "batch": len(lengths), "p50_ms": p50}),
                      flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", default="benchmarks/serving_floor")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--lengths", default="16,24,32,64,128")
    parser.add_argument("--fine_buckets", default="8,16,24,32,48,64,96,128")
    parser.add_argument("--iters", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--work", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.lengths = [int(v) for v in args.lengths.split(",")]
    if args.child:
        args.threads = int(args.threads)
        return child(args)

    from bench_export import make_checkpoints

    from export.export_saved_model import load_spec
    from export.signatures import build_archive

    work = tempfile.mkdtemp(prefix="bench_serving_floor_")
    dirs = make_checkpoints(work)
    fine = tuple(int(v) for v in args.fine_buckets.split(","))
    for name, buckets in (("default", DEFAULT_BUCKETS), ("fine", fine)):
        spec = load_spec("sequence_classification", dirs["sst2"])
        spec.length_buckets = buckets
        archive, _ = build_archive(spec)
        archive.write_out(os.path.join(work, name), verbose=False)
    load_start = os.getloadavg()[0]
    rows = []
    for threads in (int(v) for v in args.threads.split(",")):
        cmd = [sys.executable, os.path.abspath(__file__), "--child", f"--threads={threads}",
               f"--lengths={','.join(map(str, args.lengths))}", f"--iters={args.iters}",
               f"--warmup={args.warmup}", f"--work={work}"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("{"):
                rows.append(json.loads(line))
                print(line, flush=True)

    import keras
    import tensorflow as tf

    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                         capture_output=True, text=True).stdout.strip()
    machine = {"cpu": cpu, "cores": os.cpu_count(), "load_avg_at_start": load_start,
               "load_avg_at_end": os.getloadavg()[0], "python": platform.python_version(),
               "tensorflow": tf.__version__, "keras": keras.__version__,
               "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with open(args.output + ".json", "w") as f:
        json.dump({"machine": machine, "args": {k: v for k, v in vars(args).items()
                                                if k not in ("child", "work", "output")},
                   "rows": rows}, f, indent=2)
    threads = sorted({r["threads"] for r in rows})
    lines = ["# What bounds a short request to an ELECTRA-Small export (CPU)", "",
             "Reproduce (from the repository root):", "", "```",
             f"python benchmarks/bench_serving_floor.py --threads={args.threads} "
             f"--lengths={','.join(map(str, args.lengths))} --fine_buckets={args.fine_buckets} "
             f"--iters={args.iters} --warmup={args.warmup} --output={repo_relative(args.output)}",
             "```", "",
             f"- Machine: {cpu}, {os.cpu_count()} cores, no GPU; 1-min load average "
             f"{load_start:.2f} at the start, {machine['load_avg_at_end']:.2f} at the end.",
             f"- TensorFlow {tf.__version__}, Keras {keras.__version__}, Python "
             f"{platform.python_version()}; {machine['date']}",
             "- ELECTRA-Small (hidden 256, 12 layers, E 128, vocab 30522), random weights, "
             "a 2-label classification head; p50 in ms (see the script's docstring).", "",
             "## The model alone (tf.function on ids [1, L], no tokenization)", "",
             "| L | " + " | ".join(f"{t} thread(s) | {t} thread(s), XLA" for t in threads) + " |",
             "|---:|" + "---:|" * (2 * len(threads))]
    for length in args.lengths:
        cells = []
        for t in threads:
            for jit in (False, True):
                cells += [str(r["p50_ms"]) for r in rows if r["part"] == "model"
                          and r["threads"] == t and r["jit"] == jit and r["length"] == length]
        lines.append(f"| {length} | " + " | ".join(cells) + " |")
    lines += ["", "## The export in a TF1 Session (as TF Serving runs it), text signature", "",
              "| inputs | batch | buckets | " + " | ".join(f"{t} thread(s)" for t in threads)
              + " |", "|---|---:|---|" + "---:|" * len(threads)]
    cases = []
    for r in rows:
        if r["part"] == "export" and (r["inputs"], r["batch"], r["buckets"]) not in cases:
            cases.append((r["inputs"], r["batch"], r["buckets"]))
    for inputs, batch, buckets in cases:
        cells = [str(r["p50_ms"]) for t in threads for r in rows if r["part"] == "export"
                 and r["threads"] == t and r["inputs"] == inputs and r["buckets"] == buckets]
        label = ", ".join(map(str, DEFAULT_BUCKETS if buckets == "default" else
                              [int(v) for v in args.fine_buckets.split(",")]))
        lines.append(f"| {inputs} | {batch} | {label} | " + " | ".join(cells) + " |")
    with open(args.output + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
