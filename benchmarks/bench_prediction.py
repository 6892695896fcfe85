"""Dev-set evaluation time with prediction batches cut to their longest example,
against every batch at max_seq_length (FinetuningRun.trim_batches), in one process.

    python benchmarks/bench_prediction.py --output=benchmarks/prediction_trim

A randomly initialized discriminator (vocab 30522) is saved by electra_tf's own
folder writers (a pre-training model_dir) and given a classification head
through the real `Finetuning` class (TensorFlow backend). For each
--sentence_words setting a synthetic dev split in SST-2's layout is written
(LO to HI words a sentence, one token each; `fill`: every sentence fills the
window) and evaluated by `Finetuning.evaluate`, the call every epoch's dev
evaluation makes: rows sorted by length and batches cut (`cut`), or every
batch at the window in row order (`full`). The two alternate for --rounds
rounds after one untimed call each (tracing); the table gives the median
seconds of the rounds and the dev examples a second. Both must give the same
accuracy and logits within 1e-3 (the run stops otherwise; the largest difference
is recorded).
"""

import argparse
import dataclasses
import os
import random
import statistics
import sys
import time

from bench_common import (  # noqa: E402 (benchmarks/ is on sys.path)
    ROOT,
    cpu_model,
    pretrained_folder,
    relative_flag,
    scratch_dir,
    synthetic_vocab,
    write_report,
)


def write_dev(folder: str, n: int, words, seq_length: int) -> str:
    """train.tsv (a few rows: the task reads it) and dev.tsv of `n` sentences."""
    os.makedirs(folder, exist_ok=True)
    rng = random.Random(0)
    lo, hi = words if words else (seq_length, seq_length)
    for split, rows in (("train", 8), ("dev", n)):
        lines = ["sentence\tlabel"] + [
            " ".join(f"w{rng.randrange(5000)}" for _ in range(rng.randint(lo, hi))) + f"\t{i % 2}"
            for i in range(rows)]
        with open(os.path.join(folder, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return folder


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default="benchmarks/prediction_trim",
                        help="writes OUTPUT.json and OUTPUT.md")
    parser.add_argument("--model_size", default="small", help="small, or tiny (the toy run)")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--eval_batch_size", type=int, default=128)
    parser.add_argument("--dev_examples", type=int, default=872, help="872: SST-2's dev split")
    parser.add_argument("--sentence_words", default="4:40,fill",
                        help="comma-separated LO:HI (words a sentence) or fill")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jit_compile", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, ROOT)
    import numpy as np
    import tensorflow as tf  # noqa: F401

    from electra_tf.core.config import FinetuningConfig, FinetuningRun
    from electra_tf.tasks.registry import get_task
    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    work = scratch_dir("bench_pred_")
    pre = pretrained_folder(os.path.join(work, "pretrained"),
                            synthetic_vocab(os.path.join(work, "vocab.txt")), args.model_size)
    results, started = [], time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load = os.getloadavg()
    for setting in args.sentence_words.split(","):
        words = None if setting == "fill" else tuple(int(w) for w in setting.split(":"))
        data = write_dev(os.path.join(work, f"data_{setting.replace(':', '_')}"),
                         args.dev_examples, words, args.seq_length)
        run = FinetuningRun(model_dir=os.path.join(work, f"m_{len(results)}"), data_dir=data,
                            init_checkpoint=pre, jit_compile=args.jit_compile)
        config = FinetuningConfig(task_name="sst2", max_seq_length=args.seq_length,
                                  eval_batch_size=args.eval_batch_size,
                                  model_size=args.model_size)
        ft = TensorFlowFinetuning(get_task("sst2"), config, run)
        runs = {"cut": dataclasses.replace(run, trim_batches=True),
                "full": dataclasses.replace(run, trim_batches=False)}
        times, accuracy = {k: [] for k in runs}, {}
        for r in range(args.rounds + 1):  # round 0: tracing, untimed
            for name, r_run in runs.items():
                ft.run = r_run
                t0 = time.perf_counter()
                metrics = ft.evaluate("dev")
                if r:
                    times[name].append(time.perf_counter() - t0)
                accuracy[name] = metrics["accuracy"]
        feats = ft.features("dev")[1]
        logits = {}
        for name, r_run in runs.items():
            ft.run = r_run
            logits[name] = ft.predict(feats)["logits"]
        difference = float(np.abs(logits["cut"] - logits["full"]).max())
        if accuracy["cut"] != accuracy["full"] or difference > 1e-3:
            raise SystemExit(f"the cut batches gave accuracy {accuracy['cut']} and logits "
                             f"{difference} from the full ones' (accuracy {accuracy['full']})")
        mask = feats.inputs["input_mask"]
        for name in runs:
            seconds = statistics.median(times[name])
            results.append({"sentence_words": setting, "batches": name,
                            "mean_used_positions": round(float(mask.sum(1).mean()), 1),
                            "seconds": [round(t, 3) for t in times[name]],
                            "median_seconds": round(seconds, 3),
                            "examples_per_second": round(args.dev_examples / seconds, 1),
                            "accuracy": accuracy[name],
                            "max_logit_difference": difference})
            print(results[-1], flush=True)
    command = " ".join(["python", "benchmarks/bench_prediction.py"]
                       + [relative_flag(a) for a in sys.argv[1:]])
    report = {"command": command, "cpu": cpu_model(), "cores": os.cpu_count(),
              "started": started, "load_before": [round(x, 2) for x in load],
              "load_after": [round(x, 2) for x in os.getloadavg()],
              "model_size": args.model_size, "seq_length": args.seq_length,
              "eval_batch_size": args.eval_batch_size, "dev_examples": args.dev_examples,
              "jit_compile": args.jit_compile, "results": results}
    lines = ["| sentence words | batches | mean positions used | median s | dev examples/s | "
             "max logit difference |", "|---|---|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['sentence_words']} | {r['batches']} | {r['mean_used_positions']} | "
                     f"{r['median_seconds']} | {r['examples_per_second']} | "
                     f"{r['max_logit_difference']:.2g} |")
    write_report(args.output, report, lines)

if __name__ == "__main__":
    main()
