"""Short requests at a server's threading: the text export as TF Serving runs it, A/B.

    python benchmarks/bench_serving_threads.py --output=benchmarks/serving_threads

One ELECTRA-Small sequence-classification export (random weights, written by
electra_tf's own folder writers and `export`), loaded the way the C++ model
server loads it: the TF1 SavedModel loader into a Session whose ConfigProto
has the server's thread flags (--tensorflow_intra_op_parallelism and
--tensorflow_inter_op_parallelism; 0 is TensorFlow's default, one thread per
core), in a fresh process per setting, with the setting's environment (the
variables TensorFlow reads at start-up, which a server's environment sets the
same way). Each process times the text signature at batch 1 on a 20-word and
a 128-word text ("wN" words, one piece each: 22 and 128 positions), and a
mixed batch of --batch texts of 5-120 words.

The settings (SETTINGS) run in --rounds rounds, the order reversed every
round, so that the load of a shared machine falls on all of them alike; each
process starts, loads the export, makes --warmup calls of each request and
then --iters timed calls of each (a quarter of that for the batch), the
requests interleaved. p50 is over all rounds' calls. The machine's 1-minute
load average is recorded before and after (2 cores shared with other jobs
inflate every latency: compare rows of one run).

--encoders (ENCODERS) times the same settings on exports whose encoder writes
its ops one way or another, the same weights: "matmul"
(electra_tf/serving/encoder.py as it is), "long_path" (every call on the
encoder's long path: SHORT_PATH_POSITIONS patched to 0 while exporting),
"transposes" (the long path with the heads split and merged by Transpose, as
the encoder did before its short path: `_split_heads`/`_merge_heads` patched)
"batchmatmulv3" (the encoder's dense products too, its `_matmul` helper,
patched to BatchMatMulV3, which oneDNN's rewrite leaves to Eigen's kernels)
and "bf16" (no patch: the export's own --precision=bf16, its dense kernels
stored and multiplied in bfloat16).
Each setting runs on every encoder's export back to back, so the A/B's arms
share the machine's load.
"""

import argparse
import dataclasses
import json
import os
import platform
import random
import subprocess
import sys
import time
from unittest import mock

import numpy as np
from bench_common import (  # noqa: E402 (benchmarks/ is on sys.path)
    ROOT,
    cpu_model,
    finetuned_folder,
    repo_relative,
    scratch_dir,
    synthetic_vocab,
)

sys.path.insert(0, ROOT)

# name: (intra-op threads, inter-op threads, environment), as a server would be run.
SETTINGS = {
    "default": (0, 0, {}),
    "intra1": (1, 0, {}),
    "caller": (0, 0, {"TF_ONEDNN_THREADPOOL_USE_CALLER_THREAD": "1"}),
    "frozen": (0, 0, {"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "1"}),
    "caller+frozen": (0, 0, {"TF_ONEDNN_THREADPOOL_USE_CALLER_THREAD": "1",
                             "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "1"}),
    "intra1+frozen": (1, 0, {"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "1"}),
    "onednn_off": (0, 0, {"TF_ENABLE_ONEDNN_OPTS": "0"}),
}
DESCRIPTIONS = {
    "default": "TensorFlow's defaults (what `tensorflow_model_server` runs unless told)",
    "intra1": "`--tensorflow_intra_op_parallelism=1`",
    "caller": "`TF_ONEDNN_THREADPOOL_USE_CALLER_THREAD=1` in the server's environment",
    "frozen": "`TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1` in the server's environment",
    "caller+frozen": "both variables",
    "intra1+frozen": "`--tensorflow_intra_op_parallelism=1` and "
                     "`TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1`",
    "onednn_off": "`TF_ENABLE_ONEDNN_OPTS=0` in the server's environment",
}

# name: how the export's encoder writes its ops (export_with's patches).
ENCODERS = {
    "matmul": "electra_tf/serving/encoder.py as it is (a short path for calls of at most "
              "SHORT_PATH_POSITIONS positions, a long path for longer ones)",
    "long_path": "every call on the encoder's long path (oneDNN's BatchMatMulV2 and Softmax)",
    "transposes": "the long path, heads split and merged by Transpose (the encoder before "
                  "its short path)",
    "batchmatmulv3": "the dense products too as BatchMatMulV3 (Eigen's kernels: oneDNN's "
                     "rewrite skips it)",
    "bf16": "the export's --precision=bf16: `matmul` with the dense kernels stored and "
            "multiplied in bfloat16",
}


def _op_types(path):
    """The op types of an export's graph and functions (saved_model.pb)."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    graph = saved.meta_graphs[0].graph_def
    return {n.op for n in graph.node} | {n.op for fn in graph.library.function
                                         for n in fn.node_def}


def export_with(encoder, spec, base, name):
    """`export` of spec whose encoder is ENCODERS[encoder]; checks the written graph
    holds BatchMatMulV3 exactly when that encoder writes it."""
    import tensorflow as tf

    from electra_tf.serving import encoder as serving_encoder
    from electra_tf.serving.export import export

    def batch_matmul_v3(x, y):
        return tf.raw_ops.BatchMatMulV3(x=x, y=y, Tout=tf.float32)

    def transpose_split(x, to_heads, split):
        return tf.transpose(tf.reshape(x, split), [0, 2, 1, 3])

    def transpose_merge(x, from_heads, split):
        return tf.reshape(tf.transpose(x, [0, 2, 1, 3]), [-1, split[2] * split[3]])

    patches = {"matmul": {"SHORT_PATH_POSITIONS": serving_encoder.SHORT_PATH_POSITIONS},
               "long_path": {"SHORT_PATH_POSITIONS": 0},
               "transposes": {"SHORT_PATH_POSITIONS": 0, "_split_heads": transpose_split,
                              "_merge_heads": transpose_merge},
               "batchmatmulv3": {"_matmul": batch_matmul_v3},
               "bf16": {"SHORT_PATH_POSITIONS": serving_encoder.SHORT_PATH_POSITIONS}}[encoder]
    if encoder == "bf16":
        spec = dataclasses.replace(spec, precision="bf16")
    with mock.patch.multiple(serving_encoder, **patches):
        path = export(spec, base, name)
    ops = _op_types(path)
    assert ("BatchMatMulV3" in ops) == (encoder in ("matmul", "batchmatmulv3", "bf16")), (
        encoder, sorted(ops))
    return path


def _texts(rng, lengths):
    return np.array([" ".join(f"w{rng.randrange(1000, 30000)}" for _ in range(n))
                     for n in lengths], dtype=object)


def child(args):
    """One setting in this process: prints one JSON line of per-request call times (ms)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (the text signature's ops, as the server links them)

    intra, inter, _ = SETTINGS[args.setting]
    graph = tf.Graph()
    with graph.as_default():
        config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=intra,
                                          inter_op_parallelism_threads=inter)
        sess = tf.compat.v1.Session(graph=graph, config=config)
        t0 = time.perf_counter()
        meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], args.export)
        load_s = time.perf_counter() - t0
    sig = meta.signature_def["serving_default"]
    fetch = {k: v.name for k, v in sig.outputs.items()}
    name = sig.inputs["text"].name
    rng = random.Random(0)
    requests = {"20 words": _texts(rng, [20]), "128 words": _texts(rng, [128]),
                f"mixed 5-120 words x{args.batch}": _texts(
                    rng, [rng.randint(5, 120) for _ in range(args.batch)])}
    first_ms = None  # the first call: the session optimizes the signature's graph
    for texts in requests.values():
        for _ in range(args.warmup):
            t0 = time.perf_counter()
            sess.run(fetch, {name: texts})
            first_ms = first_ms or 1e3 * (time.perf_counter() - t0)
    times = {k: [] for k in requests}
    for i in range(args.iters):
        for key, texts in requests.items():
            if texts.shape[0] > 1 and i % 4:
                continue  # the batch: a quarter of the calls
            t0 = time.perf_counter()
            sess.run(fetch, {name: texts})
            times[key].append(1e3 * (time.perf_counter() - t0))
    print("RESULT " + json.dumps({"setting": args.setting, "times_ms": times,
                                  "load_s": load_s, "first_call_ms": first_ms}), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", default="benchmarks/serving_threads")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--encoders", default="matmul",
                        help=f"comma list of {', '.join(ENCODERS)}: one export each, every "
                             "setting timed on each")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--iters", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32, help="the mixed batch's size")
    parser.add_argument("--model_size", default="small",
                        help="small (what the tables record) or tiny (the test's toy run).")
    parser.add_argument("--max_seq_length", type=int, default=128,
                        help="the export's window (128 in the tables; the toy run: 32, "
                             "half the length buckets to trace)")
    parser.add_argument("--setting", default="", help=argparse.SUPPRESS)
    parser.add_argument("--export", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.setting:
        return child(args)

    from electra_tf.serving.export import load_spec

    settings, encoders = args.settings.split(","), args.encoders.split(",")
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        raise SystemExit(f"unknown setting(s) {unknown}; known: {', '.join(SETTINGS)}")
    unknown = [e for e in encoders if e not in ENCODERS]
    if unknown:
        raise SystemExit(f"unknown encoder(s) {unknown}; known: {', '.join(ENCODERS)}")
    work = scratch_dir("bench_serving_threads_")
    vocab = synthetic_vocab(os.path.join(work, "vocab.txt"))
    folder = finetuned_folder(os.path.join(work, "sst2"), "sst2", vocab, args.model_size,
                              max_seq_length=args.max_seq_length)
    spec = load_spec("sequence_classification", folder)
    paths = {e: export_with(e, spec, os.path.join(work, "models"), f"sst2_{e}")
             for e in encoders}
    load_start, t_start = os.getloadavg(), time.monotonic()
    runs = [(e, s) for s in settings for e in encoders]  # a setting's A/B arms back to back
    times = {run: {} for run in runs}
    starts = {run: {"load_s": [], "first_call_ms": []} for run in runs}  # one per process
    for r in range(args.rounds):
        for encoder, setting in (runs if r % 2 == 0 else runs[::-1]):
            env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **SETTINGS[setting][2]}
            cmd = [sys.executable, os.path.abspath(__file__), f"--setting={setting}",
                   f"--export={paths[encoder]}", f"--iters={args.iters}",
                   f"--warmup={args.warmup}", f"--batch={args.batch}"]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
            line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
            if proc.returncode or not line:
                raise SystemExit(f"{encoder} {setting} failed:\n{proc.stderr[-3000:]}")
            result = json.loads(line[0][7:])
            for key, values in result["times_ms"].items():
                times[encoder, setting].setdefault(key, []).extend(values)
            for key, values in starts[encoder, setting].items():
                values.append(result[key])
            print(f"[bench] round {r + 1} {encoder} {setting}: " + ", ".join(
                f"{k} {np.median(v):.2f} ms" for k, v in times[encoder, setting].items()),
                file=sys.stderr, flush=True)
    wall = time.monotonic() - t_start
    load_end = os.getloadavg()

    import tensorflow as tf

    rows = [{"encoder": e, "setting": s, "intra_op": SETTINGS[s][0],
             "inter_op": SETTINGS[s][1], "env": SETTINGS[s][2], "request": key,
             "calls": len(values), "p50_ms": round(float(np.median(values)), 2),
             "p90_ms": round(float(np.percentile(values, 90)), 2)}
            for e, s in runs for key, values in times[e, s].items()]
    start_rows = [{"encoder": e, "setting": s, "processes": len(starts[e, s]["load_s"]),
                   "load_s": round(float(np.median(starts[e, s]["load_s"])), 2),
                   "first_call_ms": round(float(np.median(starts[e, s]["first_call_ms"])), 1)}
                  for e, s in runs]
    command = (f"python benchmarks/bench_serving_threads.py --settings={args.settings} "
               + (f"--encoders={args.encoders} " if args.encoders != "matmul" else "")
               + f"--rounds={args.rounds} --iters={args.iters} --warmup={args.warmup} "
               f"--batch={args.batch} "
               + (f"--model_size={args.model_size} " if args.model_size != "small" else "")
               + (f"--max_seq_length={args.max_seq_length} "
                  if args.max_seq_length != 128 else "")
               + f"--output={repo_relative(args.output)}")
    machine = {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
               "tensorflow": tf.__version__, "load_avg_before": load_start,
               "load_avg_after": load_end, "wall_s": round(wall, 1),
               "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with open(args.output + ".json", "w") as f:
        json.dump({"command": command, "machine": machine, "rows": rows,
                   "start_rows": start_rows}, f, indent=2)
    requests = list(times[runs[0]])
    lines = ["# Short requests at a server's threading (CPU, TF1 Session as TF Serving runs "
             "the export)", "", "Reproduce (from the repository root):", "", "```", command,
             "```", "",
             f"- Machine: {machine['cpu']}, {machine['cores']} cores, no GPU; TensorFlow "
             f"{tf.__version__}, Python {machine['python']}; {machine['date']}.",
             f"- Load average (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in load_start)}"
             f"; after: {', '.join(f'{x:.2f}' for x in load_end)} ({wall:.0f} s).",
             f"- {'ELECTRA-Small (hidden 256, 12 layers, E 128)' if args.model_size == 'small' else 'model size ' + args.model_size}, "
             f"vocab 30522, seq {args.max_seq_length}, default length buckets; the settings "
             f"ran in {args.rounds} rounds, alternating (the module docstring says how).", "",
             "Encoders: " + "; ".join(f"`{e}`: {ENCODERS[e]}" for e in encoders) + ".", "",
             "| setting | encoder | " + " | ".join(f"{r} p50 ms" for r in requests) + " |",
             "|---|---|" + "---:|" * len(requests)]
    for e, s in runs:
        cells = [str(next(r["p50_ms"] for r in rows if (r["encoder"], r["setting"]) == (e, s)
                          and r["request"] == q)) for q in requests]
        lines.append(f"| {DESCRIPTIONS[s]} | {e} | " + " | ".join(cells) + " |")
    lines += ["", "Start-up, the median over the setting's processes: the TF1 loader's load, "
              "and the first call (the 20-word request, the first warmup call), in which the "
              "session optimizes the text signature's graph (what a server's warmup "
              "requests take before it serves).", "",
              "| setting | encoder | processes | load s | first call ms |", "|---|---|---:|---:|---:|"]
    lines += [f"| {DESCRIPTIONS[r['setting']]} | {r['encoder']} | {r['processes']} | "
              f"{r['load_s']} | {r['first_call_ms']} |" for r in start_rows]
    with open(args.output + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
