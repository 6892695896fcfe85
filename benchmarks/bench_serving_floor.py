"""What bounds a short request to an ELECTRA-Small export on CPU (issue #24).

    python benchmarks/bench_serving_floor.py --output=benchmarks/serving_floor

Two measurements, each in a fresh child process per setting: TensorFlow
intra-op threads (--threads, default 1 and 2; inter-op threads 2) times
oneDNN on or off (--onednn, the TF_ENABLE_ONEDNN_OPTS environment variable
that TensorFlow, TF Serving's included, reads at start-up):

1. The model alone: the Small discriminator with its classification head,
   called on ids [1, L] (all real) in a tf.function, for L in --lengths, three
   ways: the Keras layers' graph, the same under XLA (jit_compile), and
   electra_tf/serving/encoder.py's graph (what the export runs). No tokenization,
   no buckets, no signature.
2. The export as TF Serving runs it: the SavedModel loaded with the TF1 loader
   into a Session (ConfigProto with the same thread counts, as the server's
   --tensorflow_intra_op_parallelism / --tensorflow_inter_op_parallelism set),
   the text signature called with a 20-word and a 128-word text at batch 1 and
   a mixed batch of 32 texts of 5-120 words. Two exports of the same weights,
   both with the default length buckets: the encoder through the Keras layers'
   graph, and through serving_encoder's (what export() writes).

Texts are "wN" words (one piece each, as bench_export.py's vocabulary), so a
20-word text is 22 positions with [CLS] and [SEP]. Latencies are p50 over
--iters calls after --warmup calls; each child measures everything in one
go, so compare rows of one run.
"""

import argparse
import contextlib
import json
import os
import platform
import random
import sys
import time

import numpy as np
from bench_common import (  # noqa: E402 (benchmarks/ is on sys.path)
    ROOT,
    call_times_ms,
    cpu_model,
    repo_relative,
    run_checked,
    scratch_dir,
)

sys.path.insert(0, ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

GRAPHS = ("keras", "serving_encoder")  # the two exports of part 2


def _p50(fn, warmup, iters):
    return round(float(np.median(call_times_ms(fn, warmup, iters))), 2)


def child(args):
    """One thread setting: prints one JSON row per measurement."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    import keras
    import tensorflow_text  # noqa: F401 (the text signature's ops)

    from electra_tf.core.config import MODEL_SIZES, EncoderConfig
    from electra_tf.modeling import build_discriminator
    from electra_tf.serving import encoder as serving_encoder
    from electra_tf.tasks.model import FinetuningModel

    keras.utils.set_random_seed(0)
    config = EncoderConfig(vocab_size=30522, **MODEL_SIZES[args.model_size])
    model = FinetuningModel(build_discriminator(config).encoder, "sequence_classification",
                            2)
    model.build()
    fns = {"keras": tf.function(lambda x: model(x, training=False)),
           "keras_xla": tf.function(lambda x: model(x, training=False), jit_compile=True),
           "serving_encoder": tf.function(lambda x: serving_encoder.model_outputs(model, x))}
    for graph, fn in fns.items():
        for length in args.lengths:
            ids = tf.constant(np.random.default_rng(0).integers(1000, 30000, [1, length]),
                              tf.int32)
            x = {"input_ids": ids, "input_mask": tf.ones_like(ids),
                 "segment_ids": tf.zeros_like(ids)}
            p50 = _p50(lambda: tf.nest.map_structure(lambda t: t.numpy(), fn(x)),
                       args.warmup, args.iters)
            print(json.dumps({"part": "model", "threads": args.threads, "onednn": args.onednn,
                              "graph": graph, "length": length, "batch": 1, "p50_ms": p50}),
                  flush=True)

    rng = random.Random(0)
    cases = [("20 words", [20]), ("128 words", [128]),
             ("mixed 5-120 words", [rng.randint(5, 120) for _ in range(32)])]
    for name in GRAPHS:
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
                print(json.dumps({"part": "export", "threads": args.threads,
                                  "onednn": args.onednn, "graph": name, "inputs": label,
                                  "batch": len(lengths), "p50_ms": p50}), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", default="benchmarks/serving_floor")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--onednn", default="1,0",
                        help="TF_ENABLE_ONEDNN_OPTS values to measure (1 on, 0 off).")
    parser.add_argument("--lengths", default="16,24,32,64,128")
    parser.add_argument("--iters", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--model_size", default="small",
                        help="small (what the tables record) or tiny (the test's toy run).")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--work", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.lengths = [int(v) for v in args.lengths.split(",")]
    if args.child:
        args.threads, args.onednn = int(args.threads), int(args.onednn)
        return child(args)

    from bench_export import keras_layers_encoder, make_checkpoints

    from electra_tf.serving.export import load_spec
    from electra_tf.serving.signatures import build_archive

    work = scratch_dir("bench_serving_floor_")
    dirs = make_checkpoints(work, args.model_size, ("sst2",))  # the one it exports
    for name in GRAPHS:
        spec = load_spec("sequence_classification", dirs["sst2"])
        lean = name == "serving_encoder"
        with contextlib.nullcontext() if lean else keras_layers_encoder():
            archive, _ = build_archive(spec)
            archive.write_out(os.path.join(work, name), verbose=False)
    load_start = os.getloadavg()[0]
    rows = []
    settings = [(int(t), int(o)) for o in args.onednn.split(",") for t in args.threads.split(",")]
    for threads, onednn in settings:
        cmd = [sys.executable, os.path.abspath(__file__), "--child", f"--threads={threads}",
               f"--onednn={onednn}", f"--lengths={','.join(map(str, args.lengths))}",
               f"--iters={args.iters}", f"--warmup={args.warmup}", f"--work={work}",
               f"--model_size={args.model_size}"]
        env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": str(onednn)}
        out = run_checked(cmd, f"the measurement at {threads} thread(s), oneDNN {onednn}",
                          env=env)
        for line in out.splitlines():
            if line.startswith("{"):
                rows.append(json.loads(line))
                print(line, flush=True)

    import keras
    import tensorflow as tf

    cpu = cpu_model()
    machine = {"cpu": cpu, "cores": os.cpu_count(), "load_avg_at_start": load_start,
               "load_avg_at_end": os.getloadavg()[0], "python": platform.python_version(),
               "tensorflow": tf.__version__, "keras": keras.__version__,
               "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with open(args.output + ".json", "w") as f:
        json.dump({"machine": machine, "args": {k: v for k, v in vars(args).items()
                                                if k not in ("child", "work", "output")},
                   "rows": rows}, f, indent=2)

    def column(threads, onednn):
        return f"{threads} thread{'s' if threads > 1 else ''}, oneDNN {'on' if onednn else 'off'}"

    header = "| " + " | ".join(column(t, o) for t, o in settings) + " |"
    rule = "---:|" * len(settings)
    graphs = {"keras": "Keras layers", "keras_xla": "Keras layers, XLA",
              "serving_encoder": "serving encoder"}
    lines = ["# What bounds a short request to an ELECTRA-Small export (CPU)", "",
             "Reproduce (from the repository root):", "", "```",
             f"python benchmarks/bench_serving_floor.py --threads={args.threads} "
             f"--onednn={args.onednn} --lengths={','.join(map(str, args.lengths))} "
             f"--iters={args.iters} --warmup={args.warmup} --output={repo_relative(args.output)}"
             + (f" --model_size={args.model_size}" if args.model_size != "small" else ""),
             "```", "",
             f"- Machine: {cpu}, {os.cpu_count()} cores, no GPU; 1-min load average "
             f"{load_start:.2f} at the start, {machine['load_avg_at_end']:.2f} at the end.",
             f"- TensorFlow {tf.__version__}, Keras {keras.__version__}, Python "
             f"{platform.python_version()}; {machine['date']}",
             ("- ELECTRA-Small (hidden 256, 12 layers, E 128, vocab 30522)"
              if args.model_size == "small" else f"- model size {args.model_size}, vocab 30522")
             + ", random weights, "
             "a 2-label classification head; p50 in ms (see the script's docstring). "
             "Columns: TensorFlow intra-op threads (TF Serving's "
             "`--tensorflow_intra_op_parallelism`) and `TF_ENABLE_ONEDNN_OPTS`.", "",
             "## The model alone (tf.function on ids [1, L], no tokenization)", "",
             "| L | graph " + header, "|---:|---|" + rule]
    for length in args.lengths:
        for graph, label in graphs.items():
            cells = [str(r["p50_ms"]) for t, o in settings for r in rows
                     if r["part"] == "model" and (r["threads"], r["onednn"]) == (t, o)
                     and r["graph"] == graph and r["length"] == length]
            lines.append(f"| {length} | {label} | " + " | ".join(cells) + " |")
    lines += ["", "## The export in a TF1 Session (as TF Serving runs it), text signature", "",
              "Default length buckets; the encoder through the Keras layers' graph or "
              "through serving_encoder's (what `export` writes).", "",
              "| inputs | batch | encoder graph " + header, "|---|---:|---|" + rule]
    cases = []
    for r in rows:
        if r["part"] == "export" and (r["inputs"], r["batch"], r["graph"]) not in cases:
            cases.append((r["inputs"], r["batch"], r["graph"]))
    for inputs, batch, graph in cases:
        cells = [str(r["p50_ms"]) for t, o in settings for r in rows if r["part"] == "export"
                 and (r["threads"], r["onednn"]) == (t, o) and r["inputs"] == inputs
                 and r["graph"] == graph and r["batch"] == batch]
        lines.append(f"| {inputs} | {batch} | {graphs[graph]} | " + " | ".join(cells) + " |")
    with open(args.output + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
