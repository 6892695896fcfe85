r"""ELECTRA-Small pre-training throughput on this machine (sequences/s, model TFLOP/s).

    python benchmarks/bench_pretraining.py --warmup=2 --steps=4 \
        --output=benchmarks/pretraining_throughput

Writes OUTPUT.json (raw numbers) and OUTPUT.md (command, machine, table).

What runs, each in a fresh subprocess (the logical-CPU split and the global
Keras dtype policy are per process):
  * electra_tf's `TensorFlowPretraining` loop (electra_tf/training/), ELECTRA-Small as the paper
    (PretrainingConfig(model_size="small", vocab_size=30522, max_seq_length=128,
    train_batch_size=128), generator 1/4, all other defaults), for every
    jit_compile {off, on} x mixed_precision {fp32, bf16} x replicas {1
    (strategy default), 2 (strategy mirrored over 2 logical CPU devices)}.
  * TensorFlow Model Garden's ElectraPretrainer (tf_keras; BertEncoder
    generator and discriminator at the same Small sizes, tied word
    embeddings) doing a full step as official/nlp/tasks/electra_task.py
    (forward, MLM loss + 50 x RTD loss, gradients, AdamW with global-norm
    clipping), fp32, with the step's tf.function jit_compile off and on. It
    reads the same records through electra_tf's input pipeline (masking
    included), so the input cost is the same for both.
  * tf.matmul throughput (GFLOP/s): 2048^3 fp32 and bf16, and a shape of the
    model's FFN, [128*128, 256] x [256, 1024], fp32 and bf16.

Input: synthetic TFRecords in electra_tf's format (random token ids under a
synthetic 30522-line BERT-layout vocab), written once to a temp folder.

Timing: build TensorFlowPretraining (or the Model Garden model), make the iterator and
accumulators, run `--warmup` single-step loop calls (excluded: tracing and
XLA compilation), then `--steps` single-step calls, each synchronised by
reading a result back; seq/s = batch / median step time. During the timed
steps the worker also reads /proc/stat: CPU time spent by *other* processes
is reported (a busy machine makes the timings noisy).

Where a step's wall time goes: --profile_steps=N traces N more of electra_tf's
steps after the timed ones (jit-off settings; bench_common.op_time_profile), e.g.

    python benchmarks/bench_pretraining.py --only=electra_tf/jit0/fp32/r1 \
        --warmup=2 --steps=3 --profile_steps=2 --output=benchmarks/pretraining_profile_intel

Model FLOPs (`model_flops_per_sequence`, analytic, matmuls only; embedding
lookups, softmax, LayerNorm, GELU, biases, Gumbel sampling, the optimizer
are left out):
  per token, for each encoder (D, and G at 1/4 width):
      2*E*H                                  (embedding projection, if E != H)
    + layers * (2*(4*H*H + 2*H*I)            (Q, K, V, O and the FFN)
                 + 2*2*L*H)                  (attention scores QK^T and context AV)
  D's RTD head per token: 2*(H*H + H)
  G's MLM head per masked position (N = 19): 2*H_G*E + 2*E*V (tied vocab projection)
  forward per sequence = L * (D + G per token) + N * MLM head
  training = 3 x forward (backward = 2 x forward)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import (  # noqa: E402 (benchmarks/ is on sys.path)
    cpu_model,
    profile_training_steps,
    relative_flag,
    run_worker_process,
    scratch_dir,
)
from bench_common import model_flops_per_sequence as pretraining_flops_per_sequence

BATCH = 128
SEQ = 128
VOCAB = 30522
SIZE = "small"
MATMUL = 2048  # the square matmul's side


def use_toy_sizes():
    """--toy: the same run at a size that takes seconds (the test's wiring check; its
    numbers say nothing about speed): tiny model, batch 4, seq 32, vocab 1000."""
    global BATCH, SEQ, VOCAB, SIZE, MATMUL
    BATCH, SEQ, VOCAB, SIZE, MATMUL = 4, 32, 1000, "tiny", 256
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# === The analytic FLOP count ===
def model_flops_per_sequence(config) -> dict:
    """Training FLOPs per sequence of the ELECTRA pre-training step (see module doc)."""
    return pretraining_flops_per_sequence(
        config.discriminator_config(), config.generator_config(), config.max_seq_length,
        config.resolved_max_predictions_per_seq, config.vocab_size)


def small_config():
    from electra_tf.core.config import PretrainingConfig
    return PretrainingConfig(model_size=SIZE, vocab_size=VOCAB, max_seq_length=SEQ,
                             train_batch_size=BATCH)


# === CPU accounting (other processes' load during the timed steps) ===
def _proc_stat_busy() -> float:
    """Busy CPU seconds of the whole machine (all cores) from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class CpuWindow:
    def __enter__(self):
        self.wall0, self.busy0, self.own0 = time.monotonic(), _proc_stat_busy(), time.process_time()
        return self

    def __exit__(self, *exc):
        wall = time.monotonic() - self.wall0
        busy = _proc_stat_busy() - self.busy0
        own = time.process_time() - self.own0
        cores = os.cpu_count() or 1
        self.result = {"wall_s": wall, "own_cpu_s": own,
                       "own_cpu_fraction": own / (wall * cores),
                       "other_cpu_fraction": max(0.0, busy - own) / (wall * cores)}


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def timed_steps(step_fn, warmup: int, steps: int) -> dict:
    warm = []
    for i in range(warmup):
        t0 = time.monotonic()
        step_fn()
        warm.append(time.monotonic() - t0)
        log(f"  warmup step {i + 1}/{warmup}: {warm[-1]:.1f} s")
    times = []
    with CpuWindow() as cpu:
        for i in range(steps):
            t0 = time.monotonic()
            step_fn()
            times.append(time.monotonic() - t0)
            log(f"  timed step {i + 1}/{steps}: {times[-1]:.2f} s")
    med = statistics.median(times)
    return {"warmup_step_s": warm, "step_s": times, "median_step_s": med,
            "mean_step_s": statistics.mean(times),
            "sequences_per_second": BATCH / med, **{"cpu_" + k: v for k, v in cpu.result.items()}}


# === Workers (each runs in its own process) ===
def worker_data(args):
    import numpy as np

    from electra_tf.data import features

    os.makedirs(args.data_dir, exist_ok=True)
    specials = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]",
                                                                   "[MASK]"]
    vocab = specials + [f"tok{i:05d}" for i in range(VOCAB - len(specials))]
    with open(os.path.join(args.data_dir, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    rng = np.random.default_rng(0)
    cls_id, sep_id, first = 101, 102, len(specials)
    num_shards, per_shard = 4, 1024 if SIZE == "small" else 16
    import tensorflow as tf
    for s in range(num_shards):
        path = os.path.join(args.data_dir, features.shard_name(s, num_shards))
        with tf.io.TFRecordWriter(path) as w:
            for _ in range(per_shard):
                len_a = int(rng.integers(20 * SEQ // 128, SEQ - 23 * SEQ // 128))
                len_b = SEQ - 3 - len_a
                ids = ([cls_id] + rng.integers(first, VOCAB, len_a).tolist() + [sep_id]
                       + rng.integers(first, VOCAB, len_b).tolist() + [sep_id])
                seg = [0] * (len_a + 2) + [1] * (len_b + 1)
                w.write(features.serialize({"input_ids": ids, "input_mask": [1] * SEQ,
                                            "segment_ids": seg}))
    log(f"wrote {num_shards * per_shard} records of length {SEQ} and a {VOCAB}-token vocab "
        f"to {args.data_dir}")


def worker_ours(args):
    import tensorflow as tf

    from electra_tf.core.config import PretrainingRun
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining, make_strategy

    t_start = time.monotonic()
    strategy = make_strategy("mirrored" if args.replicas > 1 else "default",
                             args.replicas if args.replicas > 1 else 0)
    config = small_config()
    run = PretrainingRun(model_dir=scratch_dir("bench_model_"),
                         train_data=os.path.join(args.data_dir, "pretrain_data.tfrecord-*"),
                         vocab_file=os.path.join(args.data_dir, "vocab.txt"),
                         strategy="mirrored" if args.replicas > 1 else "default",
                         num_devices=args.replicas if args.replicas > 1 else 0,
                         jit_compile=bool(args.jit), mixed_precision=args.precision)
    p = TensorFlowPretraining(config, run, strategy)
    iterator = p.make_train_iterator(0)
    build_s = time.monotonic() - t_start
    log(f"  built in {build_s:.1f} s: {strategy.num_replicas_in_sync} replica(s) on "
        f"{[d.name for d in tf.config.list_logical_devices('CPU')]}, "
        f"{len(p.model.trainable_variables)} trainable variables")
    losses = []

    def step():
        losses.append(p.train_steps(iterator, 1)["loss"])  # one step; returns on the host
        return losses[-1]

    result = timed_steps(step, args.warmup, args.steps)
    result["mean_loss"] = float(sum(losses) / len(losses))
    result["build_s"] = build_s
    result["num_replicas"] = strategy.num_replicas_in_sync
    if args.profile_steps:
        result["profile"] = profile_training_steps(lambda n: p.train_steps(iterator, n),
                                                   args.profile_steps,
                                                   scratch_dir("bench_profile_"))
    result["optimizer_steps"] = p.step
    return result


def worker_model_garden(args):
    import tensorflow as tf
    import tf_keras
    from official.modeling import tf_utils
    from official.nlp.modeling import models, networks

    from electra_tf.data.masking import MaskingConfig
    from electra_tf.data.pipeline import pretraining_dataset
    from electra_tf.text.tokenizer import Tokenizer

    t_start = time.monotonic()
    cfg = small_config()
    d, g = cfg.discriminator_config(), cfg.generator_config()
    tf_keras.utils.set_random_seed(0)
    gelu = tf_utils.get_activation("gelu")

    def encoder(c, **kw):
        return networks.BertEncoder(
            vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_layers=c.num_hidden_layers,
            num_attention_heads=c.num_attention_heads, max_sequence_length=512,
            type_vocab_size=2, inner_dim=c.intermediate_size, inner_activation=gelu,
            output_dropout=0.1, attention_dropout=0.1,
            initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02),
            embedding_width=c.resolved_embedding_size, dict_outputs=True, **kw)

    disc = encoder(d)
    gen = encoder(g, embedding_layer=disc.get_embedding_layer())  # tie_embeddings=True
    model = models.ElectraPretrainer(
        generator_network=gen, discriminator_network=disc, vocab_size=VOCAB, num_classes=2,
        num_token_predictions=cfg.resolved_max_predictions_per_seq, mlm_activation=gelu,
        mlm_initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02))
    optimizer = tf_keras.optimizers.AdamW(learning_rate=5e-4, weight_decay=0.01,
                                          epsilon=1e-6, global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_names=["layer_norm", "LayerNorm", "bias"])

    tok = Tokenizer(os.path.join(args.data_dir, "vocab.txt"))
    masking = MaskingConfig.from_tokenizer(tok, cfg.mask_prob,
                                           cfg.resolved_max_predictions_per_seq)
    rename = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}
    ds = pretraining_dataset(os.path.join(args.data_dir, "pretrain_data.tfrecord-*"), BATCH,
                             SEQ, masking, seed=0).map(
        lambda b: {rename.get(k, k): v for k, v in b.items()})
    iterator = iter(ds)

    def train_step(inputs):  # official/nlp/tasks/electra_task.py: train_step + build_losses
        with tf.GradientTape() as tape:
            outputs = model(inputs, training=True)
            lm = tf_keras.losses.sparse_categorical_crossentropy(
                inputs["masked_lm_ids"], tf.cast(outputs["lm_outputs"], tf.float32),
                from_logits=True)
            w = inputs["masked_lm_weights"]
            mlm_loss = tf.math.divide_no_nan(tf.reduce_sum(lm * w), tf.reduce_sum(w))
            rtd = tf.nn.sigmoid_cross_entropy_with_logits(
                logits=outputs["disc_logits"], labels=tf.cast(outputs["disc_label"], tf.float32))
            mask = tf.cast(inputs["input_mask"], tf.float32)
            rtd_loss = tf.math.divide_no_nan(tf.reduce_sum(mask * rtd), tf.reduce_sum(mask))
            loss = mlm_loss + 50.0 * rtd_loss
        tvars = model.trainable_variables
        grads = tape.gradient(loss, tvars)
        optimizer.apply_gradients(list(zip(grads, tvars)))
        return loss

    jitted = tf.function(train_step, jit_compile=bool(args.jit))
    total = tf.Variable(0.0)

    @tf.function
    def loop():  # like electra_tf's loop: next(iterator) outside the (jitted) step
        total.assign_add(jitted(next(iterator)))

    model(next(iter(ds)), training=False)  # build
    build_s = time.monotonic() - t_start
    log(f"  built in {build_s:.1f} s: {len(model.trainable_variables)} trainable variables, "
        f"{sum(int(tf.size(v)) for v in model.trainable_variables):,} parameters")

    def step():
        loop()
        return total.numpy()

    result = timed_steps(step, args.warmup, args.steps)
    result["mean_loss"] = float(total.numpy()) / (args.warmup + args.steps)
    result["build_s"] = build_s
    result["num_replicas"] = 1
    return result


def worker_matmul(args):
    import tensorflow as tf

    shapes = {f"{MATMUL}x{MATMUL} @ {MATMUL}x{MATMUL}": (MATMUL, MATMUL, MATMUL),
              f"[{BATCH}*{SEQ}, 256] @ [256, 1024]": (BATCH * SEQ, 256, 1024)}
    out = []
    for name, (m, k, n) in shapes.items():
        for dtype in (tf.float32, tf.bfloat16):
            a = tf.random.normal([m, k], dtype=tf.float32)
            b = tf.random.normal([k, n], dtype=tf.float32)
            a, b = tf.cast(a, dtype), tf.cast(b, dtype)
            mm = tf.function(lambda x, y: tf.reduce_sum(tf.cast(tf.matmul(x, y)[:1, :1],
                                                                 tf.float32)))
            mm(a, b).numpy()  # warm up
            times = []
            with CpuWindow() as cpu:
                for _ in range(args.matmul_repeats):
                    t0 = time.monotonic()
                    mm(a, b).numpy()
                    times.append(time.monotonic() - t0)
            flops = 2 * m * k * n
            row = {"shape": name, "dtype": dtype.name, "flops": flops, "times_s": times,
                   "gflops_median": flops / statistics.median(times) / 1e9,
                   "gflops_best": flops / min(times) / 1e9,
                   **{"cpu_" + k2: v for k2, v in cpu.result.items()}}
            log(f"  matmul {name} {dtype.name}: {row['gflops_median']:.1f} GFLOP/s median, "
                f"{row['gflops_best']:.1f} best (other CPU load "
                f"{row['cpu_other_cpu_fraction']:.0%})")
            out.append(row)
    return {"matmul": out}


# === Orchestration ===
def run_worker(kind, args, **extra):
    result_file = tempfile.mktemp(suffix=".json")
    cmd = [sys.executable, os.path.abspath(__file__), f"--worker={kind}",
           f"--data_dir={args.data_dir}", f"--warmup={args.warmup}", f"--steps={args.steps}",
           f"--matmul_repeats={args.matmul_repeats}", f"--result_file={result_file}",
           f"--profile_steps={args.profile_steps}"]
    cmd += ["--toy"] if args.toy else []
    cmd += [f"--{k}={v}" for k, v in extra.items()]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    return run_worker_process(cmd, env, result_file, None)


def machine_info():
    cpu = cpu_model()
    flags = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = " ".join(x for x in line.split(":", 1)[1].split()
                                 if x.startswith(("avx512f", "avx512_bf16", "amx", "avx2")))
                break
    out = subprocess.run([sys.executable, "-c",
                          "import tensorflow as tf, keras, tf_keras; "
                          "print(tf.__version__, keras.__version__, tf_keras.__version__)"],
                         capture_output=True, text=True, env=dict(os.environ,
                                                                  TF_CPP_MIN_LOG_LEVEL="3"))
    tf_v, keras_v, tfk_v = out.stdout.split()[-3:]
    return {"cpu": cpu, "cpu_flags": flags, "cores": os.cpu_count(),
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "python": platform.python_version(), "tensorflow": tf_v, "keras": keras_v,
            "tf_keras": tfk_v, "gpu": "none"}


def settings(args):
    out = []
    for replicas in (1, 2):
        for precision in ("fp32", "bf16"):
            for jit in (0, 1):
                out.append({"impl": "electra_tf", "jit": jit, "precision": precision,
                            "replicas": replicas})
    for jit in (0, 1):
        out.append({"impl": "model_garden", "jit": jit, "precision": "fp32", "replicas": 1})
    if args.only:
        keep = set(args.only.split(","))
        known = {setting_key(s) for s in out}
        if keep - known:  # (a typo had run nothing and written an empty table over the results)
            raise SystemExit(f"error: --only: {', '.join(sorted(keep - known))} is not a "
                             f"setting ({', '.join(sorted(known))})")
        out = [s for s in out if setting_key(s) in keep]
    return out


def setting_key(s):
    return f"{s['impl']}/jit{s['jit']}/{s['precision']}/r{s['replicas']}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--matmul_repeats", type=int, default=10)
    parser.add_argument("--output", default="benchmarks/pretraining_throughput",
                        help="writes OUTPUT.json and OUTPUT.md")
    parser.add_argument("--only", default="",
                        help="comma-separated setting keys, e.g. electra_tf/jit0/fp32/r1")
    parser.add_argument("--merge", action="store_true",
                        help="replace only the settings run now in an existing OUTPUT.json "
                             "(to re-run a disturbed setting)")
    parser.add_argument("--report_only", action="store_true",
                        help="rewrite OUTPUT.md from OUTPUT.json, running nothing")
    parser.add_argument("--data_dir", default="")
    parser.add_argument("--profile_steps", type=int, default=0,
                        help="after electra_tf's timed steps, trace this many more with "
                             "TensorFlow's profiler and report where their wall time went "
                             "(bench_common.op_time_profile); jit-off settings only")
    parser.add_argument("--toy", action="store_true",
                        help="tiny model, batch 4, seq 32 (a wiring check in seconds)")
    parser.add_argument("--worker", default="", help=argparse.SUPPRESS)
    parser.add_argument("--result_file", default="", help=argparse.SUPPRESS)
    parser.add_argument("--jit", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)
    parser.add_argument("--replicas", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.toy:
        use_toy_sizes()

    if args.worker:
        fn = {"data": worker_data, "ours": worker_ours, "model_garden": worker_model_garden,
              "matmul": worker_matmul}[args.worker]
        result = fn(args) or {}
        if args.result_file:
            with open(args.result_file, "w") as f:
                json.dump(result, f)
        return

    if args.report_only:
        with open(args.output + ".json") as f:
            write_markdown(json.load(f), args.output + ".md")
        return

    chosen = settings(args)  # (--only checked before anything runs)
    if args.profile_steps < 0 or (args.profile_steps and any(
            s["jit"] for s in chosen if s["impl"] == "electra_tf")):
        raise SystemExit("error: --profile_steps must be >= 0, and traces jit-off settings "
                         "only (XLA runs its own ops, which the profile does not split); "
                         "pick them with --only")
    # Recorded relative to the repository root: no path of this machine.
    command = " ".join(["python", "benchmarks/bench_pretraining.py"]
                       + [relative_flag(a) for a in sys.argv[1:]])
    started = datetime.datetime.now().astimezone()
    args.data_dir = args.data_dir or scratch_dir("bench_pretraining_data_")
    flops = model_flops_per_sequence(small_config())
    log(f"model FLOPs per sequence (train, analytic): {flops['train'] / 1e9:.3f} GFLOP "
        f"(forward {flops['forward'] / 1e9:.3f}: D {flops['discriminator_forward'] / 1e9:.3f},"
        f" G {flops['generator_forward'] / 1e9:.3f}, MLM head {flops['mlm_head_forward'] / 1e9:.3f})")
    machine = machine_info()
    log(f"machine: {machine}")

    previous = {}
    json_path = args.output + ".json"
    if args.merge and os.path.exists(json_path):
        with open(json_path) as f:
            previous = json.load(f)

    if not os.path.exists(os.path.join(args.data_dir, "vocab.txt")):
        log("writing synthetic records")
        run_worker("data", args)

    # --only keeps a merged file's matmul rows; a fresh file measures them (its % column
    # had read nan%)
    matmul = previous.get("matmul") if args.only else None
    if not matmul:
        log("matmul throughput")
        matmul = run_worker("matmul", args).get("matmul", [])

    results = {setting_key(r): r for r in previous.get("results", [])}
    todo = settings(args)
    for i, s in enumerate(todo):
        key = setting_key(s)
        log(f"[{i + 1}/{len(todo)}] {key} (load average {os.getloadavg()[0]:.2f})")
        r = run_worker("ours" if s["impl"] == "electra_tf" else "model_garden", args,
                       jit=s["jit"], precision=s["precision"], replicas=s["replicas"])
        r.update(s)
        r["key"] = key
        r["timestamp"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        if "sequences_per_second" in r:
            r["model_tflops_per_second"] = r["sequences_per_second"] * flops["train"] / 1e12
            log(f"  -> {r['sequences_per_second']:.2f} seq/s, "
                f"{r['model_tflops_per_second'] * 1e3:.1f} model GFLOP/s "
                f"(other CPU load {r['cpu_other_cpu_fraction']:.0%})")
        results[key] = r

    report = {"command": command if not previous else previous.get("command", command),
              "date": started.isoformat(timespec="seconds"), "machine": machine,
              "batch_size": BATCH, "max_seq_length": SEQ, "warmup_steps": args.warmup,
              "timed_steps": args.steps, "model_flops_per_sequence": flops, "matmul": matmul,
              "results": [results[k] for k in sorted(results, key=_order)]}
    if previous:
        report["date"] = previous["date"] + " (re-run " + started.isoformat(timespec="seconds") \
            + ": " + ", ".join(setting_key(s) for s in todo) + ")"
    with open(json_path, "w") as f:
        json.dump(report, f, indent=1)
    write_markdown(report, args.output + ".md")
    log(f"wrote {json_path} and {args.output}.md")


def _order(key):
    impl, jit, prec, rep = key.split("/")
    return (impl != "electra_tf", rep, prec != "fp32", jit)


def _peak(matmul, dtype):
    rows = [m for m in matmul if m["shape"].startswith(f"{MATMUL}x") and m["dtype"] == dtype]
    return rows[0]["gflops_median"] if rows else float("nan")


def write_markdown(report, path):
    m, flops, matmul = report["machine"], report["model_flops_per_sequence"], report["matmul"]
    res = {r["key"]: r for r in report["results"]}
    lines = [
        "# ELECTRA-Small pre-training throughput (CPU)", "",
        "Reproduce (from the repository root):", "", "```", report["command"], "```", "",
        f"- Machine: {m['cpu']} ({m['cpu_flags']}), {m['cores']} cores, "
        f"{m['memory_gib']} GiB RAM, no GPU",
        f"- TensorFlow {m['tensorflow']}, Keras {m['keras']}, tf_keras {m['tf_keras']}, "
        f"Python {m['python']}",
        f"- Date: {report['date']}",
        f"- ELECTRA-Small (D 256 hidden/12 layers/E 128, G 1/4 = 64 hidden), batch "
        f"{report['batch_size']}, seq {report['max_seq_length']}, synthetic records; "
        f"{report['warmup_steps']} warm-up steps excluded, median of {report['timed_steps']} "
        "timed steps; one fresh process per row.",
        f"- Model FLOPs per sequence (analytic, training = 3 x forward): "
        f"**{flops['train'] / 1e9:.2f} GFLOP** (forward: D {flops['discriminator_forward'] / 1e9:.3f}"
        f" + G {flops['generator_forward'] / 1e9:.3f} + MLM head "
        f"{flops['mlm_head_forward'] / 1e9:.3f} GFLOP).", "",
        "| implementation | jit | precision | replicas | step s (median) | seq/s | "
        "seq/s (best step) | model GFLOP/s | % of matmul GFLOP/s | vs Model Garden (same jit) "
        "| first step s | own CPU use | other CPU load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        if "sequences_per_second" not in r:
            lines.append(f"| {r['impl']} | {'on' if r['jit'] else 'off'} | {r['precision']} | "
                         f"{r['replicas']} | failed: {r['error'].splitlines()[-1][:80]} "
                         "| | | | | | | | |")
            continue
        peak = _peak(matmul, "float32" if r["precision"] == "fp32" else "bfloat16")
        mg = res.get(f"model_garden/jit{r['jit']}/fp32/r1", {}).get("sequences_per_second")
        vs = f"{r['sequences_per_second'] / mg:.2f}x" if mg and r["impl"] == "electra_tf" else ""
        gf = r["model_tflops_per_second"] * 1e3
        lines.append(
            f"| {r['impl']} | {'on' if r['jit'] else 'off'} | {r['precision']} | {r['replicas']} | "
            f"{r['median_step_s']:.2f} | {r['sequences_per_second']:.2f} | "
            f"{BATCH / min(r['step_s']):.2f} | {gf:.1f} | "
            f"{100 * gf / peak:.0f}% | {vs} | {r['warmup_step_s'][0]:.0f} | "
            f"{r['cpu_own_cpu_fraction']:.0%} | {r['cpu_other_cpu_fraction']:.0%} |")
    lines += ["", "Measured tf.matmul throughput (GFLOP/s, median / best of repeats):", "",
              "| shape | dtype | median | best |", "|---|---|---|---|"]
    for x in matmul:
        lines.append(f"| {x['shape']} | {x['dtype']} | {x['gflops_median']:.1f} | "
                     f"{x['gflops_best']:.1f} |")
    lines += [
        "", "Columns: *% of matmul GFLOP/s* divides model GFLOP/s by the measured 2048^3 matmul "
        "of the same precision (fp32 or bf16). *vs Model Garden* is seq/s over Model Garden's "
        "fp32 seq/s at the same jit setting. *first step s* is the first warm-up step "
        "(tracing, XLA compilation). *own CPU use* and *other CPU load* are the CPU time of the "
        "benchmark process and of all other processes during the timed steps, as a fraction "
        "of all cores (from /proc/stat): other load above ~5% means the row was disturbed.",
        "",
        "FLOP formula (per token, for each encoder; E embedding, H hidden, I FFN, L seq, "
        "V vocab, N = 19 masked positions): `2*E*H` (embedding projection) + layers x "
        "(`2*(4*H*H + 2*H*I)` dense + `2*2*L*H` attention scores and context); D's RTD head "
        "`2*(H*H + H)` per token; G's MLM head `2*H_G*E + 2*E*V` per masked position; "
        "training = 3 x forward. Embedding lookups, softmax, LayerNorm, GELU, biases, "
        "sampling and the optimizer are not counted.", "",
    ]
    profiled = [r for r in report["results"] if "profile" in r]
    if profiled:
        lines += ["## Where a step's wall time goes (`--profile_steps`)", "",
                  "Per step, ms: while a matrix product runs (two at once), while only other "
                  "ops run, and the largest shares of that (bench_common.op_time_profile).", "",
                  "| setting | traced step | products (two at once) | other ops | largest "
                  "other ops |", "|---|---:|---:|---:|---|"]
        for r in profiled:
            prof = r["profile"]
            top = ", ".join(f"{op} {ms:.0f}" for op, ms in list(prof["other_by_op"].items())[:6])
            lines.append(f"| {r['key']} | {prof['step_ms']:.0f} | {prof['matmul_ms']:.0f} "
                         f"({prof['two_matmuls_ms']:.0f}) | {prof['other_ms']:.0f} | {top} |")
        lines.append("")
    # The observations are written by hand after a run; a re-run keeps them.
    notes = "(to be written after the run)"
    if os.path.exists(path):
        old = open(path).read()
        if "\n## Observations\n" in old:
            notes = old.split("\n## Observations\n", 1)[1].strip()
    lines += ["## Observations", "", notes, ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
