r"""The SQuAD export's windows over a long context: latency by context length, and the
cost of the windowing on a context of one window, against an export of an earlier
electra_tf (which read a context's first window only), side by side.

    python benchmarks/bench_squad_windows.py --baseline_repo=../electra_tf_before \
        --output=benchmarks/squad_windows

ELECTRA-Small (random weights, vocab 30522, the joint span head of squad_v1 as
run_finetuning builds it, untrained), exported at --max_seq_length (512, SQuAD's)
with the default length buckets and --doc_stride 128 by this checkout; with
--baseline_repo, the same folder is also exported by that checkout's export
command (a subprocess with that checkout on its path). Both are loaded with
tf.saved_model.load in this process. A request is one question of 10 words and a
context of N words (--context_words; each word one WordPiece); the exports' calls
alternate, order flipped every pair, so that the load of a shared machine hits
both alike; p50 / p95 per export and context, and the number of windows (model
rows) this checkout's export ("this") runs for the context, are recorded. The baseline
answers from the first window whatever N.
"""

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import time

import numpy as np
from bench_common import (  # noqa: E402 (benchmarks/ is on sys.path)
    ROOT,
    cpu_model,
    finetuned_folder,
    relative_flag,
    scratch_dir,
    synthetic_vocab,
)

sys.path.insert(0, ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def baseline_export(repo: str, folder: str, work: str) -> str:
    """The folder exported by the checkout `repo`'s own export command."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(repo), TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, "-m", "export.export_saved_model", "--task=squad",
                           f"--checkpoint={folder}", f"--model_base={work}",
                           "--model_name=baseline", "--nowarmup"],
                          cwd=os.path.abspath(repo), env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"the baseline export failed:\n{proc.stderr[-3000:]}")
    return os.path.join(work, "baseline", "1")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", default="")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--model_size", default="small", help="small; tiny for a toy run")
    parser.add_argument("--vocab_size", type=int, default=30522)
    parser.add_argument("--max_seq_length", type=int, default=512)
    parser.add_argument("--context_words", default="100,480,1000,4000")
    parser.add_argument("--baseline_repo", default="",
                        help="a checkout of an earlier electra_tf to export the baseline")
    args = parser.parse_args()
    import tensorflow as tf

    from electra_tf.serving.export import export, load_spec
    from electra_tf.tasks.squad import doc_spans

    work = scratch_dir("bench_squad_windows_")
    vocab = synthetic_vocab(os.path.join(work, "vocab.txt"), args.vocab_size)
    folder = finetuned_folder(os.path.join(work, "squad"), "squad_v1", vocab, args.model_size,
                              max_seq_length=args.max_seq_length)
    spec = load_spec("squad", folder)
    paths = {"this": export(spec, work, "this", warmup=False)}
    if args.baseline_repo:
        paths["baseline"] = baseline_export(args.baseline_repo, folder, work)
    fns = {k: tf.saved_model.load(p).signatures["serving_default"] for k, p in paths.items()}
    rng = random.Random(0)
    words = args.vocab_size - 104  # "wN" is one WordPiece for N < words

    def text(n):
        return " ".join(f"w{rng.randrange(words)}" for _ in range(n))

    question = tf.constant([text(10)])
    rows = []
    for n in (int(x) for x in args.context_words.split(",")):
        context = tf.constant([text(n)])
        for fn in fns.values():
            for _ in range(args.warmup):
                {k: v.numpy() for k, v in fn(question=question, context=context).items()}
        times = {k: [] for k in fns}
        order = list(fns)
        for i in range(args.iters):
            for name in (order if i % 2 == 0 else order[::-1]):
                t0 = time.perf_counter()
                {k: v.numpy() for k, v in fns[name](question=question, context=context).items()}
                times[name].append(1e3 * (time.perf_counter() - t0))
        windows = len(doc_spans(n, args.max_seq_length - 10 - 3, spec.doc_stride))
        row = {"context_words": n, "windows": windows}
        for name, t in times.items():
            row[name] = {"p50_ms": round(float(np.percentile(t, 50)), 2),
                         "p95_ms": round(float(np.percentile(t, 95)), 2)}
        if "baseline" in times:
            row["p50_ratio_this_over_baseline"] = round(
                row["this"]["p50_ms"] / row["baseline"]["p50_ms"], 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
    # (machine paths, sys.argv as given, had gone into the results: repository-relative)
    result = {"command": " ".join(["python", "benchmarks/bench_squad_windows.py"]
                                 + [relative_flag(a) for a in sys.argv[1:]]), "cpu": cpu_model(),
              "date": time.strftime("%Y-%m-%d"), "python": platform.python_version(),
              "tensorflow": tf.__version__, "model_size": args.model_size,
              "max_seq_length": args.max_seq_length, "doc_stride": spec.doc_stride,
              "question_words": 10, "iters": args.iters, "baseline": bool(args.baseline_repo),
              "rows": rows}
    if args.output:
        with open(args.output + ".json", "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
