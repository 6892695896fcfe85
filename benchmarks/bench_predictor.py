"""The Python API's Predictor with its text graph run op by op (eager, `traced=False`)
against the same graph traced once into a tf.function (`traced=True`, as the export's
signature is), in one process: what tracing gains, and what its first call costs.

    python benchmarks/bench_predictor.py --output=benchmarks/predictor_calls

A randomly initialized classifier (vocab 30522, SST-2's head, window 128) is
written by electra_tf's own folder writers and opened with `Predictor.open`
twice: `traced=True` (`traced`) and `traced=False` (`eager`). For each the script
times the first call (tracing included for `traced`) and then, alternating the
two for --rounds rounds, `outputs` of --batch rows (short sentences of 5 to 35
words) and `predict` of --rows rows at `batch_size` --batch; the table gives
the medians. Both must give the same logits within 1e-5 (the run stops
otherwise; the largest difference is recorded).
"""

import argparse
import os
import random
import statistics
import sys
import time

from bench_common import (  # noqa: E402 (benchmarks/ is on sys.path)
    ROOT,
    cpu_model,
    finetuned_folder,
    relative_flag,
    scratch_dir,
    synthetic_vocab,
    write_report,
)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default="benchmarks/predictor_calls",
                        help="writes OUTPUT.json and OUTPUT.md")
    parser.add_argument("--model_size", default="small", help="small, or tiny (the toy run)")
    parser.add_argument("--batch", type=int, default=32, help="rows a call")
    parser.add_argument("--rows", type=int, default=640, help="rows of the predict timing")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, ROOT)
    import numpy as np

    from electra_tf import Predictor

    work = scratch_dir("bench_predictor_")
    folder = finetuned_folder(os.path.join(work, "sst2"), "sst2",
                              synthetic_vocab(os.path.join(work, "vocab.txt")), args.model_size)
    rng = random.Random(0)
    rows = [" ".join(f"w{rng.randrange(5000)}" for _ in range(rng.randint(5, 35)))
            for _ in range(args.rows)]
    started, load = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), os.getloadavg()
    predictors, first, second = {}, {}, {}
    for mode in ("traced", "eager"):
        predictor = Predictor.open(folder, traced=mode == "traced")
        for took in (first, second):
            t0 = time.perf_counter()
            predictor.outputs(rows[:args.batch])
            took[mode] = time.perf_counter() - t0
        predictors[mode] = predictor
    logits = {m: p.outputs(rows[:args.batch])["logits"] for m, p in predictors.items()}
    difference = float(np.abs(logits["traced"] - logits["eager"]).max())
    if difference > 1e-5:
        raise SystemExit(f"the traced function's logits differ from the eager ones by {difference}")
    calls, lists = {m: [] for m in predictors}, {m: [] for m in predictors}
    for _ in range(args.rounds):
        for mode, predictor in predictors.items():
            t0 = time.perf_counter()
            predictor.outputs(rows[:args.batch])
            calls[mode].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            predictor.predict(rows, batch_size=args.batch)
            lists[mode].append(time.perf_counter() - t0)
    results = []
    for mode in predictors:
        call_ms = 1000 * statistics.median(calls[mode])
        list_s = statistics.median(lists[mode])
        results.append({"mode": mode, "first_call_s": round(first[mode], 3),
                        "second_call_s": round(second[mode], 3),
                        "call_ms": [round(1000 * t, 2) for t in calls[mode]],
                        "median_call_ms": round(call_ms, 2),
                        "predict_s": [round(t, 3) for t in lists[mode]],
                        "median_predict_s": round(list_s, 3),
                        "rows_per_second": round(args.rows / list_s, 1),
                        "max_logit_difference": difference})
        print(results[-1], flush=True)
    command = " ".join(["python", "benchmarks/bench_predictor.py"]
                       + [relative_flag(a) for a in sys.argv[1:]])
    report = {"command": command, "cpu": cpu_model(), "cores": os.cpu_count(),
              "started": started, "load_before": [round(x, 2) for x in load],
              "load_after": [round(x, 2) for x in os.getloadavg()],
              "model_size": args.model_size, "batch": args.batch, "rows": args.rows,
              "results": results}
    lines = [f"| text function | first call, s | second call, s | `outputs` of {args.batch} "
             f"rows, median ms | `predict` of {args.rows} rows, median s | rows/s |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['mode']} | {r['first_call_s']} | {r['second_call_s']} | "
                     f"{r['median_call_ms']} | {r['median_predict_s']} | "
                     f"{r['rows_per_second']} |")
    write_report(args.output, report, [*lines, "", "Largest logit difference between the "
                                       f"two: {difference:.2g}."])

if __name__ == "__main__":
    main()
