"""SavedModel export of ELECTRA-Small at seq 128: export time, size, in-process latency.

    python benchmarks/bench_export.py --output=benchmarks/export_latency

A randomly initialized Small discriminator (vocab 30522) gets an untrained
head, saved as run_finetuning saves one (finetuned.weights.h5 +
finetuning_config.json), for sequence classification (2 labels) and token
classification (9 CoNLL-2003 tags). Each is exported with
`export.export_saved_model.export` (timed: model build + load + trace + write,
warmup file included), its size is measured on disk, and it is loaded back
with tf.saved_model.load in this process. Latency is the wall time of one
signature call (inputs already tensors, outputs fetched to numpy) at batch 1
and 32: text signature on texts of ~200 words (truncated to 128 pieces, so
tokenization is included) and ids signature on [B, 128] ids. Warm-up calls are
excluded; p50/p95 over --iters calls.

The cost of the ids signature's input checks (electra_tf/serving/signatures.py,
check_ids_inputs: ranks, shapes, id / type id / mask ranges) is measured A/B:
each task's archive is written twice, with the checks (build_archive, what
export() writes) and without them (unchecked_ids_archive: the serving_ids
endpoint alone on declared [batch, seq] inputs, the graph as it was before the
checks), both are loaded, and their serving_ids calls alternate (--check_iters pairs
at batch 1, a quarter of that at batch 32, order flipped every pair), so
that the load of a shared machine hits both alike; the medians and the median
of the paired differences are recorded.

Length buckets and the serving encoder (issue #24) are measured the same way,
three exports called in turn (VARIANTS): the fixed window through the Keras
layers' graph (the export before #24), the length buckets alone (both built
under keras_layers_encoder()), and what export() writes (the buckets with
electra_tf/serving/encoder.py's graph), on
texts of 5, 20, 60 and 128 words and a mixed batch. --parts=buckets runs only
this part; --intra_op_threads sets TensorFlow's intra-op threads, as TF
Serving's --tensorflow_intra_op_parallelism does; --tasks measures one of the
two folders only (the test's toy run: ner, whose token outputs the length-bucket
comparison reads at the positions a request holds).
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
    cpu_model,
    finetuned_folder,
    repo_relative,
    scratch_dir,
    synthetic_vocab,
)

sys.path.insert(0, ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

BIG_BATCH = 32  # the large batch of every table (--big_batch: the test's toy run uses 2)


def _big_batch_rounds(iters):
    """Calls (or A/B rounds) at the large batch: a quarter of batch 1's, at least 10
    (fewer only when `iters` is itself under 10, as in the toy run)."""
    return max(min(10, iters), iters // 4)


NER_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


# name: the export task of each fine-tuning folder the scripts write (make_checkpoints)
TASKS = {"sst2": "sequence_classification", "ner": "token_classification"}


def make_checkpoints(work, model_size="small", names=tuple(TASKS)):
    """The fine-tuning folders the scripts export (of sst2, ner: `names`), written by
    electra_tf's own folder writers (bench_common.finetuned_folder) over a 30522-line
    "wN" vocabulary."""
    vocab_file = synthetic_vocab(os.path.join(work, "vocab.txt"))
    return {name: finetuned_folder(os.path.join(work, name), name, vocab_file, model_size,
                                   label_names=NER_TAGS if name == "ner" else None)
            for name in names}


def du(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def timed(fn, inputs, warmup, iters):
    for _ in range(warmup):
        {k: v.numpy() for k, v in fn(**inputs).items()}
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        {k: v.numpy() for k, v in fn(**inputs).items()}
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.percentile(times, 50)), 1e3 * float(np.percentile(times, 95))


def unchecked_ids_archive(spec):
    """An ExportArchive of spec's serving_ids endpoint without the input checks
    (signatures.check_ids_inputs): the inputs declared [batch, seq] int32, the same
    length-bucketed model and outputs as build_archive's. The A/B's other arm."""
    import keras
    import tensorflow as tf

    from electra_tf.serving import graph, signatures

    buckets = graph.length_buckets(spec.max_seq_length, spec.length_buckets,
                                   signatures.min_length(spec))
    model = signatures.BucketedModel(spec, buckets)

    def ids_fn(input_word_ids, input_mask, input_type_ids):
        return signatures.ids_outputs(spec, input_word_ids, input_mask, input_type_ids,
                                      model=model)

    archive = keras.export.ExportArchive()
    archive.add_endpoint("serving_ids", ids_fn, [tf.TensorSpec([None, None], tf.int32, name=n)
                                                 for n in signatures.IDS_INPUTS])
    return archive


@contextlib.contextmanager
def keras_layers_encoder():
    """Archives built and written inside run the encoder through the Keras layers' own
    graph (the export before electra_tf/serving/encoder.py; the same outputs, more ops)
    instead of serving_encoder's: the A/B's other arm. signatures.BucketedModel runs
    each bucket through serving_encoder.model_outputs, looked up when the endpoints
    are traced; this puts the model's own call in its place meanwhile."""
    from electra_tf.serving import encoder

    lean = encoder.model_outputs
    encoder.model_outputs = lambda model, inputs, kernels=None: model(inputs, training=False)
    try:
        yield
    finally:
        encoder.model_outputs = lean


def input_check_cost(dirs, work, iters, warmup):
    """Rows of the A/B measurement of the ids checks (see the module docstring)."""
    import tensorflow as tf

    from electra_tf.serving.export import load_spec
    from electra_tf.serving.signatures import build_archive

    rows = []
    for name, task in ((n, TASKS[n]) for n in dirs):
        spec = load_spec(task, dirs[name])
        loaded = {}
        for checked in (False, True):
            path = os.path.join(work, "checks", f"{name}_{'after' if checked else 'before'}")
            archive = build_archive(spec)[0] if checked else unchecked_ids_archive(spec)
            archive.write_out(path, verbose=False)
            loaded[checked] = tf.saved_model.load(path).signatures["serving_ids"]
        for batch, n in ((1, iters), (BIG_BATCH, _big_batch_rounds(iters))):
            ids = tf.constant(np.random.default_rng(0).integers(1000, 30000, [batch, 128]),
                              tf.int32)
            inputs = {"input_word_ids": ids, "input_mask": tf.ones_like(ids),
                      "input_type_ids": tf.zeros_like(ids)}
            for fn in loaded.values():
                for _ in range(warmup):
                    {k: v.numpy() for k, v in fn(**inputs).items()}
            times = {False: [], True: []}
            for i in range(n):
                for checked in ((False, True) if i % 2 == 0 else (True, False)):
                    t0 = time.perf_counter()
                    {k: v.numpy() for k, v in loaded[checked](**inputs).items()}
                    times[checked].append(time.perf_counter() - t0)
            before, after = (1e3 * np.array(times[c]) for c in (False, True))
            delta = float(np.median(after - before))
            rows.append({"task": task, "signature": "serving_ids", "batch": batch, "pairs": n,
                         "before_p50_ms": round(float(np.median(before)), 2),
                         "after_p50_ms": round(float(np.median(after)), 2),
                         "paired_delta_p50_ms": round(delta, 3),
                         "paired_delta_pct": round(100 * delta / float(np.median(before)), 2)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


BUCKET_LENGTHS = (5, 20, 60, 128)  # words per text (each word "wN" is one piece)


def _texts(rng, lengths):
    import tensorflow as tf

    return tf.constant([" ".join(f"w{rng.randrange(1000, 30000)}" for _ in range(n))
                        for n in lengths])


def _max_diff(a, b, mask=None):
    """Largest difference of two output dicts (floats), or -1 when a non-float differs;
    outputs with a position axis only where `mask` marks (padding carries no value)."""
    worst = 0.0
    for key in a:
        x, y = a[key].numpy(), b[key].numpy()
        if mask is not None and x.shape[:2] == mask.shape:
            x, y = x[mask > 0], y[mask > 0]
        if x.dtype.kind == "f":
            worst = max(worst, float(np.max(np.abs(x - y))) if x.size else 0.0)
        elif not np.array_equal(x, y):
            return -1.0
    return worst


# The exports of the length-bucket A/B: (length buckets, serving_encoder's graph).
# before: the fixed window through the Keras layers' graph (the export before
# issue #24); buckets: the buckets alone; after: what export() writes today.
VARIANTS = {"before": (False, False), "buckets": (True, False), "after": (True, True)}


def bucket_cost(dirs, work, iters, warmup):
    """Rows of the A/B measurement of length buckets (see the module docstring)."""
    import tensorflow as tf

    from electra_tf.serving.export import load_spec
    from electra_tf.serving.signatures import build_archive

    rows = []
    rng = random.Random(1)
    for name, task in ((n, TASKS[n]) for n in dirs):
        loaded = {}
        for variant in VARIANTS:  # see VARIANTS: (buckets, lean encoder)
            spec = load_spec(task, dirs[name])
            bucketed, lean = VARIANTS[variant]
            spec.length_buckets = None if bucketed else (spec.max_seq_length,)
            path = os.path.join(work, "buckets", f"{name}_{variant}")
            with contextlib.nullcontext() if lean else keras_layers_encoder():
                archive, _ = build_archive(spec)
                archive.write_out(path, verbose=False)
            loaded[variant] = tf.saved_model.load(path).signatures
        cases = [(f"{n} words", batch, [n] * batch) for n in BUCKET_LENGTHS for batch in (1, BIG_BATCH)]
        cases.append(("mixed 5-120 words", BIG_BATCH,
                      [rng.randint(5, 120) for _ in range(BIG_BATCH)]))
        for label, batch, lengths in cases:
            texts = _texts(rng, lengths)
            for signature in ("serving_default", "serving_ids"):
                if signature == "serving_ids" and not (batch == BIG_BATCH or lengths[0] == 20):
                    continue
                inputs = {"text": texts}
                if signature == "serving_ids":  # a client's packing: the full window
                    inputs = _ids_for(texts)
                fns = {v: loaded[v][signature] for v in VARIANTS}
                outs = {v: fns[v](**inputs) for v in VARIANTS}
                mask = inputs["input_mask"].numpy() if "input_mask" in inputs else None
                diffs = [_max_diff(outs["before"], outs[v], mask) for v in VARIANTS]
                diff = -1.0 if min(diffs) < 0 else max(diffs)
                for fn in fns.values():
                    for _ in range(warmup):
                        {k: v.numpy() for k, v in fn(**inputs).items()}
                n = iters if batch == 1 else _big_batch_rounds(iters)
                times = {v: [] for v in VARIANTS}
                order = list(VARIANTS)
                for i in range(n):
                    for v in (order if i % 2 == 0 else order[::-1]):
                        t0 = time.perf_counter()
                        {k: x.numpy() for k, x in fns[v](**inputs).items()}
                        times[v].append(time.perf_counter() - t0)
                p50 = {v: 1e3 * float(np.median(times[v])) for v in VARIANTS}
                rows.append({"task": task, "signature": signature, "inputs": label,
                             "batch": batch, "pairs": n, "fixed_p50_ms": round(p50["before"], 2),
                             "buckets_keras_p50_ms": round(p50["buckets"], 2),
                             "bucketed_p50_ms": round(p50["after"], 2),
                             "speedup": round(p50["before"] / p50["after"], 2),
                             "max_output_difference": diff})
                print(json.dumps(rows[-1]), flush=True)
    return rows


def _ids_for(texts):
    """The [B, 128] ids a client packs for `texts`: [CLS] w... [SEP], then padding (in
    make_checkpoints' vocabulary "wN" is one piece, of id 104 + N)."""
    import tensorflow as tf

    ids = np.zeros([len(texts), 128], np.int32)
    for r, text in enumerate(texts.numpy()):
        pieces = [101] + [104 + int(w[1:]) for w in text.decode().split()][:126] + [102]
        ids[r, :len(pieces)] = pieces
    mask = (ids > 0).astype(np.int32)
    return {"input_word_ids": tf.constant(ids), "input_mask": tf.constant(mask),
            "input_type_ids": tf.zeros_like(tf.constant(ids))}


def main():
    global BIG_BATCH
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", default="benchmarks/export_latency")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--check_iters", type=int, default=200,
                        help="A/B pairs for the ids checks' cost at batch 1 (a quarter at 32).")
    parser.add_argument("--bucket_iters", type=int, default=40,
                        help="A/B pairs for the length buckets at batch 1 (a quarter at 32).")
    parser.add_argument("--parts", default="all", choices=["all", "buckets"],
                        help="buckets: only the length-bucket A/B (its own table).")
    parser.add_argument("--tasks", default=",".join(TASKS),
                        help="comma-separated of sst2 (sequence classification) and ner "
                             "(token classification): the folders exported and measured "
                             "(the tables: both; the toy run: ner).")
    parser.add_argument("--big_batch", type=int, default=32,
                        help="the large batch (32 in the tables; the toy run: 2).")
    parser.add_argument("--model_size", default="small",
                        help="small (what the tables record) or tiny (the test's toy run).")
    parser.add_argument("--intra_op_threads", type=int, default=0,
                        help="TensorFlow's intra-op threads (TF Serving's "
                             "--tensorflow_intra_op_parallelism); 0: TensorFlow's default, "
                             "one per core.")
    args = parser.parse_args()
    BIG_BATCH = args.big_batch
    tasks = [t for t in args.tasks.split(",") if t]
    if not tasks or set(tasks) - set(TASKS) or len(set(tasks)) != len(tasks):
        parser.error(f"--tasks={args.tasks}: some of {', '.join(TASKS)}, each once")

    import tensorflow as tf

    if args.intra_op_threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads)

    from electra_tf.serving.export import export, load_spec
    from electra_tf.serving.graph import length_buckets

    load_start = os.getloadavg()[0]
    work = scratch_dir("bench_export_")
    dirs = make_checkpoints(work, args.model_size, tasks)
    rng = random.Random(0)
    rows = []
    for name, task in ((n, TASKS[n]) for n in dirs):
        if args.parts != "all":
            break
        t0 = time.perf_counter()
        spec = load_spec(task, dirs[name])
        path = export(spec, os.path.join(work, "models"), name)
        export_s = time.perf_counter() - t0
        size = du(path)
        variables = du(os.path.join(path, "variables"))
        t0 = time.perf_counter()
        loaded = tf.saved_model.load(path)
        load_s = time.perf_counter() - t0
        for batch in (1, BIG_BATCH):
            texts = tf.constant([" ".join(f"w{rng.randrange(5000)}" for _ in range(200))
                                 for _ in range(batch)])
            ids = tf.constant(np.random.default_rng(0).integers(1000, 30000, [batch, 128]),
                              tf.int32)
            for sig, inputs in (("serving_default (text)", {"text": texts}),
                                ("serving_ids", {"input_word_ids": ids,
                                                 "input_mask": tf.ones_like(ids),
                                                 "input_type_ids": tf.zeros_like(ids)})):
                fn = loaded.signatures[sig.split()[0]]
                p50, p95 = timed(fn, inputs, args.warmup, args.iters)
                rows.append({"task": task, "signature": sig, "batch": batch,
                             "p50_ms": round(p50, 2), "p95_ms": round(p95, 2),
                             "seq_per_s_p50": round(batch / p50 * 1e3, 1),
                             "export_s": round(export_s, 1), "load_s": round(load_s, 1),
                             "saved_model_mb": round(size / 2**20, 1),
                             "variables_mb": round(variables / 2**20, 1)})
                print(json.dumps(rows[-1]), flush=True)

    check_rows = (input_check_cost(dirs, work, args.check_iters, args.warmup)
                  if args.parts == "all" else [])
    bucket_rows = bucket_cost(dirs, work, args.bucket_iters, args.warmup)

    import keras

    cpu = cpu_model()
    threads = (f"{args.intra_op_threads} intra-op thread(s)" if args.intra_op_threads
               else "TensorFlow's default threads, one per core")
    machine = {"cpu": cpu, "cores": os.cpu_count(), "intra_op_threads": args.intra_op_threads,
               "load_avg_at_start": load_start,
               "load_avg_at_end": os.getloadavg(), "python": platform.python_version(),
               "tensorflow": tf.__version__, "keras": keras.__version__,
               "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with open(args.output + ".json", "w") as f:
        json.dump({"machine": machine, "rows": rows, "iters": args.iters,
                   "warmup": args.warmup, "check_iters": args.check_iters,
                   "input_checks": check_rows, "bucket_iters": args.bucket_iters,
                   "length_buckets": bucket_rows}, f, indent=2)
    command = (f"python benchmarks/bench_export.py --iters={args.iters} "
               f"--warmup={args.warmup} --check_iters={args.check_iters} "
               f"--bucket_iters={args.bucket_iters} ")
    if args.parts != "all":
        command += f"--parts={args.parts} "
    if args.intra_op_threads:
        command += f"--intra_op_threads={args.intra_op_threads} "
    if args.model_size != "small":
        command += f"--model_size={args.model_size} "
    if args.big_batch != 32:
        command += f"--big_batch={args.big_batch} "
    if tasks != list(TASKS):
        command += f"--tasks={','.join(tasks)} "
    lines = ["# ELECTRA-Small SavedModel export: time, size, in-process latency (CPU)", "",
             "Reproduce (from the repository root):", "", "```",
             command + f"--output={repo_relative(args.output)}", "```", "",
             f"- Machine: {cpu}, {os.cpu_count()} cores, no GPU, {threads}; "
             f"1-min load average {load_start:.2f} at the start, "
             f"{os.getloadavg()[0]:.2f} at the end. On 2 shared cores the latencies move "
             "with the other jobs' load; compare rows of one run only.",
             f"- TensorFlow {tf.__version__}, Keras {keras.__version__}, "
             f"Python {platform.python_version()}; {machine['date']}",
             ("- ELECTRA-Small (hidden 256, 12 layers, E 128, vocab 30522)"
              if args.model_size == "small" else f"- model size {args.model_size}, vocab 30522")
             + ", seq 128, random weights, untrained heads."]
    if rows:
        lines += [
            "",
            "## Export and latency at the full window",
            "",
            "Text inputs of 200 words (truncated in-graph to 128 pieces); "
            f"{args.warmup} warm-up calls excluded, p50/p95 over {args.iters} calls "
            "of tf.saved_model.load(...).signatures[...] in this process. "
            "Export time = build the Keras model + load weights + trace + write the "
            "SavedModel and warmup file.", "",
            "| task | signature | batch | p50 ms | p95 ms | seq/s (p50) | export s | load s "
            "| SavedModel MB | variables MB |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['task']} | {r['signature']} | {r['batch']} | {r['p50_ms']} | "
                     f"{r['p95_ms']} | {r['seq_per_s_p50']} | {r['export_s']} | {r['load_s']} "
                     f"| {r['saved_model_mb']} | {r['variables_mb']} |")
    if check_rows:
        lines += ["", "## Cost of the serving_ids input checks (A/B)", "",
                  "The ids signature checks its inputs in-graph (ranks, equal shapes, "
                  "0 <= id < vocab size, 0 <= type id < type vocab size, mask in {0, 1}, "
                  "seq <= max positions). Same model and inputs, exported without the checks "
                  "(before) and with them (after); calls alternate between the two, "
                  f"{args.warmup} warm-up calls each excluded. Delta: median of the paired "
                  "differences (after - before) of consecutive calls.", "",
                  "| task | signature | batch | pairs | before p50 ms | after p50 ms "
                  "| paired delta p50 ms | delta % |",
                  "|---|---|---|---|---|---|---|---|"]
    for r in check_rows:
        lines.append(f"| {r['task']} | {r['signature']} | {r['batch']} | {r['pairs']} | "
                     f"{r['before_p50_ms']} | {r['after_p50_ms']} | "
                     f"{r['paired_delta_p50_ms']} | {r['paired_delta_pct']} |")
    lines += ["", "## Length buckets and the serving encoder (A/B)", "",
              "Three exports of the same model, called in turn (the order reversed every "
              f"round, {args.warmup} warm-up calls each excluded): **fixed**, the export before "
              "issue #24 (`--length_buckets=128`, every request padded to 128 positions, "
              "the encoder run through the Keras layers' graph); **buckets**, the default "
              f"length buckets ({', '.join(map(str, length_buckets(128)))}: each row runs on "
              "the shortest that holds it, the rows of one bucket together) with the Keras "
              "graph; **today**, what `export` writes: the buckets with "
              "`electra_tf/serving/encoder.py`'s graph. Speedup: fixed / today. Texts of N words "
              "\"wK\", one piece each (128 words are truncated to 126 pieces); the ids rows "
              "send the same texts packed by the client to [B, 128]. \"mixed\": 32 texts of "
              "5-120 words (uniform; each task draws its own batch from one seeded stream, so "
              "the two tasks' mixes differ). Max output difference: the largest difference of "
              "any float output between fixed and the two others on those inputs, at the "
              "positions a request holds (string and integer outputs identical; -1 where one "
              "differs).", "",
              "| task | signature | inputs | batch | rounds | fixed p50 ms | buckets p50 ms "
              "| today p50 ms | speedup | max output difference |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in bucket_rows:
        lines.append(f"| {r['task']} | {r['signature']} | {r['inputs']} | {r['batch']} | "
                     f"{r['pairs']} | {r['fixed_p50_ms']} | {r['buckets_keras_p50_ms']} | "
                     f"{r['bucketed_p50_ms']} | {r['speedup']} | "
                     f"{r['max_output_difference']:.2g} |")
    with open(args.output + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
