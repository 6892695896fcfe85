"""electra_tf beside transformers' PyTorch ELECTRA on CPU: fine-tuning throughput and
batch-1 latency, one run, alternating.

    python benchmarks/bench_peer.py --output=benchmarks/peer_cpu

Both sides are the same randomly initialized ELECTRA-Small discriminator (hidden
256, 12 layers, E 128, vocab 30522) with a 2-label sequence-classification head;
transformers' is built from electra_tf's own config mapping
(`electra_tf.interop.hf.hf_config`), so the sizes cannot drift apart.

1. Fine-tuning throughput (examples/s), --seq_length x --batch_size, for each of
   --precisions (fp32; bf16: float32 weights, bfloat16 compute), TensorFlow's and
   PyTorch's default threads (one per core):
   - electra_tf: the real TensorFlow `Finetuning` loop (tf.data input, layer-wise
     LR decay, AdamW, global-norm clipping), as benchmarks/bench_finetuning.py runs
     it (its child process, from a pre-training folder written by electra_tf's
     writers), XLA off (the default; slower on CPU), `--mixed_precision` as given;
   - transformers: ElectraForSequenceClassification in eager PyTorch, a training
     step as its Trainer takes one (forward with labels, backward, global-norm
     clipping to 1.0, torch.optim.AdamW), on random ids of the same shape; for
     bf16 the forward pass under torch.autocast("cpu", torch.bfloat16), as the
     Trainer's `bf16=True` runs it on a CPU.
   --warmup steps are excluded, then --steps timed. With --sentence_words=LO:HI
   the examples are sentences of LO to HI words (one token each) instead of full
   windows: electra_tf cuts each batch to its longest example (its default,
   --trim_batches; without XLA, as here, to the longest example itself),
   transformers pads each batch to its longest, as its DataCollatorWithPadding
   does. Both get --warmup untimed steps (electra_tf at least 1: its tracing).
2. Batch-1 latency (ms, p50) at each of --lengths positions (all real), for
   each of --threads intra-op threads (TensorFlow's intra-op pool;
   torch.set_num_threads), inference only:
   - electra_tf: the encoder and head as the export runs them
     (`electra_tf/serving/encoder.py`'s graph in a tf.function; oneDNN on, the
     default), no tokenization;
   - transformers: the model in eager PyTorch under torch.inference_mode().

Every measurement is a fresh process per framework (and thread count); the
frameworks alternate, in --rounds rounds whose order is reversed every round,
so that the load of a shared machine falls on both alike. Throughput: the
median over rounds; latency: the median of all rounds' calls. The 1-minute
load average is recorded before and after.
"""

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np
from bench_common import (  # noqa: E402 (benchmarks/ is on sys.path)
    ROOT,
    call_times_ms,
    cpu_model,
    pretrained_folder,
    repo_relative,
    scratch_dir,
    synthetic_vocab,
)

sys.path.insert(0, ROOT)


def _encoder_config(model_size):
    from electra_tf.core.config import MODEL_SIZES, EncoderConfig

    return EncoderConfig(vocab_size=30522, **MODEL_SIZES[model_size])


def _hf_model(model_size):
    from transformers import ElectraConfig, ElectraForSequenceClassification

    from electra_tf.interop.hf import hf_config

    values = hf_config(_encoder_config(model_size), "ElectraForSequenceClassification")
    return ElectraForSequenceClassification(ElectraConfig(**values, num_labels=2))


def child_hf_train(args):
    import torch

    torch.manual_seed(0)
    model = _hf_model(args.model_size)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    gen = torch.Generator().manual_seed(0)
    batches = []
    if args.sentence_words:
        lo, hi = (int(w) for w in args.sentence_words.split(":"))
    for _ in range(args.warmup + args.steps if args.sentence_words else 1):
        if args.sentence_words:  # [CLS] LO..HI words [SEP], padded to the longest
            lengths = torch.randint(lo + 2, hi + 3, (args.batch_size,), generator=gen)
            lengths = lengths.clamp(max=args.seq_length)
            width = int(lengths.max())
            mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
        else:
            width, mask = args.seq_length, torch.ones(args.batch_size, args.seq_length,
                                                      dtype=torch.long)
        ids = torch.randint(1000, 30000, (args.batch_size, width), generator=gen) * mask
        labels = torch.randint(0, 2, (args.batch_size,), generator=gen)
        batches.append((ids, mask, torch.zeros_like(ids), labels))
    batches = itertools.cycle(batches)

    def step():
        ids, mask, types, labels = next(batches)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = model(input_ids=ids, attention_mask=mask, token_type_ids=types,
                         labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return float(loss)

    for _ in range(args.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    seconds = time.perf_counter() - t0
    return {"examples_per_second": round(args.steps * args.batch_size / seconds, 2),
            "seconds": round(seconds, 3), "threads": torch.get_num_threads()}


def child_ours_train(args):
    from bench_finetuning import run_child

    work = os.path.join(args.work, "ours_train")
    pre = os.path.join(work, "pretrained")
    if not os.path.exists(pre):
        os.makedirs(work, exist_ok=True)
        pretrained_folder(pre, synthetic_vocab(os.path.join(work, "vocab.txt")),
                          args.model_size)
    result, stderr = run_child(work, args.seq_length, args.batch_size, "0", args.precision,
                               args.steps, args.model_size, "1", args.sentence_words,
                               warmup=args.warmup)  # (had always been 2: transformers got
    # --warmup, 1 in the recorded commands)
    if result is None:
        raise RuntimeError(stderr[-3000:])
    return {"examples_per_second": result["examples_per_second"], "seconds": result["seconds"]}


def child_hf_latency(args):
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = _hf_model(args.model_size).eval()
    out = {}
    with torch.inference_mode():
        for length in args.lengths:
            ids = torch.from_numpy(np.random.default_rng(0).integers(1000, 30000, [1, length]))
            mask, types = torch.ones_like(ids), torch.zeros_like(ids)
            out[str(length)] = call_times_ms(
                lambda: model(input_ids=ids, attention_mask=mask,
                              token_type_ids=types).logits.numpy(), args.warmup, args.iters)
    return out


def child_ours_latency(args):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    import keras

    from electra_tf.modeling import build_discriminator
    from electra_tf.serving import encoder as serving_encoder
    from electra_tf.tasks.model import FinetuningModel

    keras.utils.set_random_seed(0)
    model = FinetuningModel(build_discriminator(_encoder_config(args.model_size)).encoder,
                            "sequence_classification", 2)
    model.build()
    fn = tf.function(lambda x: serving_encoder.model_outputs(model, x))
    out = {}
    for length in args.lengths:
        ids = tf.constant(np.random.default_rng(0).integers(1000, 30000, [1, length]), tf.int32)
        x = {"input_ids": ids, "input_mask": tf.ones_like(ids), "segment_ids": tf.zeros_like(ids)}
        out[str(length)] = call_times_ms(
            lambda: tf.nest.map_structure(lambda t: t.numpy(), fn(x)), args.warmup, args.iters)
    return out


CHILDREN = {"ours_train": child_ours_train, "hf_train": child_hf_train,
            "ours_latency": child_ours_latency, "hf_latency": child_hf_latency}


def _run_child(args, kind, threads=0, precision="fp32"):
    cmd = [sys.executable, os.path.abspath(__file__), f"--child={kind}",
           f"--precision={precision}",
           f"--model_size={args.model_size}", f"--seq_length={args.seq_length}",
           f"--batch_size={args.batch_size}", f"--steps={args.steps}",
           f"--warmup={args.warmup}", f"--iters={args.iters}",
           f"--lengths={','.join(map(str, args.lengths))}", f"--threads={threads}",
           f"--sentence_words={args.sentence_words}", f"--work={args.work}"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not line:
        raise SystemExit(f"{kind} (threads {threads}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(line[0][7:])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", default="benchmarks/peer_cpu")
    parser.add_argument("--model_size", default="small",
                        help="small (what the tables record) or tiny (the test's toy run).")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3, help="timed fine-tuning steps")
    parser.add_argument("--warmup", type=int, default=2,
                        help="excluded fine-tuning steps (and latency calls x 5)")
    parser.add_argument("--iters", type=int, default=40, help="timed latency calls")
    parser.add_argument("--lengths", default="16,24,32,64,128")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--precisions", default="fp32",
                        help="comma-separated fine-tuning precisions: fp32, bf16")
    parser.add_argument("--sentence_words", default="",
                        help="LO:HI: fine-tune on sentences of LO..HI words (one token each), "
                             "electra_tf cutting each batch to its longest example "
                             "(--trim_batches), transformers padding it to its longest (as "
                             "DataCollatorWithPadding); empty: every example fills "
                             "--seq_length")
    parser.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)  # a child's
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--work", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.lengths = [int(v) for v in str(args.lengths).split(",")]
    if args.child:
        args.threads = int(args.threads)
        if args.child.endswith("latency"):
            args.warmup *= 5
        print("RESULT " + json.dumps(CHILDREN[args.child](args)), flush=True)
        return

    threads = [int(t) for t in args.threads.split(",")]
    precisions = args.precisions.split(",")
    if not set(precisions) <= {"fp32", "bf16"}:
        parser.error(f"--precisions={args.precisions}: fp32 and/or bf16")
    args.work = scratch_dir("bench_peer_")
    load_start, t_start = os.getloadavg(), time.monotonic()
    train = {p: {"electra_tf": [], "transformers": []} for p in precisions}
    latency = {(f, t): {} for f in ("electra_tf", "transformers") for t in threads}
    for r in range(args.rounds):
        order = [("electra_tf", "ours"), ("transformers", "hf")]
        order = order if r % 2 == 0 else order[::-1]
        for precision in precisions:
            for name, kind in order:
                rate = _run_child(args, f"{kind}_train", precision=precision)
                train[precision][name].append(rate["examples_per_second"])
                print(f"[bench] round {r + 1} fine-tuning {precision} {name}: "
                      f"{train[precision][name][-1]} examples/s", file=sys.stderr, flush=True)
        for t in (threads if r % 2 == 0 else threads[::-1]):
            for name, kind in order:
                for length, calls in _run_child(args, f"{kind}_latency", t).items():
                    latency[name, t].setdefault(int(length), []).extend(calls)
                print(f"[bench] round {r + 1} latency {name} {t} thread(s): " + ", ".join(
                    f"L{k} {np.median(v):.2f}" for k, v in latency[name, t].items()),
                    file=sys.stderr, flush=True)
    wall, load_end = time.monotonic() - t_start, os.getloadavg()

    import tensorflow as tf
    import torch
    import transformers

    results = {
        "finetuning": {p: {name: {"examples_per_second_rounds": v,
                                  "examples_per_second": round(float(np.median(v)), 2)}
                           for name, v in by_name.items()}
                       for p, by_name in train.items()},
        "latency_p50_ms": [{"framework": name, "threads": t, "length": length,
                            "calls": len(calls), "p50_ms": round(float(np.median(calls)), 2)}
                           for (name, t), by_length in latency.items()
                           for length, calls in by_length.items()]}
    ratios = {p: round(r["electra_tf"]["examples_per_second"]
                       / r["transformers"]["examples_per_second"], 2)
              for p, r in results["finetuning"].items()}
    command = " ".join(["python", "benchmarks/bench_peer.py"] + [
        f"--{k}={v}" for k, v in (
            ("model_size", args.model_size), ("seq_length", args.seq_length),
            ("batch_size", args.batch_size), ("steps", args.steps), ("warmup", args.warmup),
            ("iters", args.iters), ("lengths", ",".join(map(str, args.lengths))),
            ("threads", args.threads), ("rounds", args.rounds),
            ("precisions", args.precisions),
            *((("sentence_words", args.sentence_words),) if args.sentence_words else ()),
            ("output", repo_relative(args.output)))])
    machine = {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
               "tensorflow": tf.__version__, "torch": torch.__version__,
               "transformers": transformers.__version__, "load_avg_before": load_start,
               "load_avg_after": load_end, "wall_s": round(wall, 1),
               "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with open(args.output + ".json", "w") as f:
        json.dump({"command": command, "machine": machine, "results": results,
                   "finetuning_ratio": ratios}, f, indent=2)
    size = ("ELECTRA-Small (hidden 256, 12 layers, E 128)" if args.model_size == "small"
            else f"model size {args.model_size}")
    lines = ["# electra_tf beside transformers' PyTorch ELECTRA (CPU)", "",
             "Reproduce (from the repository root, with the `interop` extra installed):", "",
             "```", command, "```", "",
             f"- Machine: {machine['cpu']}, {machine['cores']} cores, no GPU; TensorFlow "
             f"{tf.__version__}, PyTorch {torch.__version__}, transformers "
             f"{transformers.__version__}, Python {machine['python']}; {machine['date']}.",
             f"- Load average (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in load_start)}"
             f"; after: {', '.join(f'{x:.2f}' for x in load_end)} ({wall:.0f} s).",
             f"- {size}, vocab 30522, random weights, a 2-label classification head; "
             f"{args.rounds} rounds, the frameworks alternating (the script's docstring says "
             "what each side runs).", ""]
    for precision, by_name in results["finetuning"].items():
        words = (f", sentences of {args.sentence_words.replace(':', '-')} words"
                 if args.sentence_words else "")
        lines += [f"## Fine-tuning, L{args.seq_length} batch {args.batch_size} {precision}, "
                  f"default threads{words}", "",
                  "| framework | examples/s (median) | each round |", "|---|---:|---|"]
        for name, r in by_name.items():
            lines.append(f"| {name} | {r['examples_per_second']} | "
                         f"{', '.join(map(str, r['examples_per_second_rounds']))} |")
        lines += ["", f"electra_tf / transformers: **{ratios[precision]:.2f}x**.", ""]
    lines += ["## The model alone at batch 1, p50 ms (inference, all positions real)", "",
              "| positions | " + " | ".join(f"{n}, {t} thread{'s' if t > 1 else ''}"
                                           for t in threads
                                           for n in ("electra_tf", "transformers")) + " |",
              "|---:|" + "---:|" * (2 * len(threads))]
    for length in args.lengths:
        cells = [str(next(r["p50_ms"] for r in results["latency_p50_ms"]
                          if (r["framework"], r["threads"], r["length"]) == (n, t, length)))
                 for t in threads for n in ("electra_tf", "transformers")]
        lines.append(f"| {length} | " + " | ".join(cells) + " |")
    with open(args.output + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
