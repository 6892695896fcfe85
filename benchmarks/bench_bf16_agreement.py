r"""How far the --precision=bf16 export's answers move from float32's on a
sequence-classification model's texts: labels that flip, accuracy, logits.

    python benchmarks/bench_bf16_agreement.py --model_dir=FINETUNED_FOLDER \
        --texts=DEV_TSV --output=benchmarks/bf16_agreement

FINETUNED_FOLDER is a sequence-classification folder run_finetuning wrote;
DEV_TSV a tab-separated file with a header naming a `text` (or `sentence`)
column and, optionally, a `label` column (the label names the model
predicts). The texts go through `Predictor.open(folder)` and
`Predictor.open(folder, precision="bf16")`, which predict as the two exports
do (docs/serving.md, docs/python.md), --batch texts a call. Without
--model_dir the script writes a randomly initialized --model_size folder with
electra_tf's own writers and --rows synthetic texts (the toy run).

Writes OUTPUT.json and OUTPUT.md: rows, labels that differ, accuracy of each
(where the file has labels), the largest and the median |logit difference|,
the logits' spread (the median over rows of the largest minus the smallest
logit), and for each flipped row float32's margin (its two best logits'
difference).
"""

import argparse
import csv
import os
import random
import sys
import time

from bench_common import (  # noqa: E402 (benchmarks/ is on sys.path)
    ROOT,
    cpu_model,
    finetuned_folder,
    relative_flag,
    run_main,
    scratch_dir,
    synthetic_vocab,
    write_report,
)


def read_texts(path: str) -> tuple[list[str], list[str] | None]:
    """The `text` (or `sentence`) column of a TSV with a header, and its `label` column."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows:
        raise SystemExit(f"error: {path} has no rows under its header")
    column = next((c for c in ("text", "sentence") if c in rows[0]), None)
    if column is None:
        raise SystemExit(f"error: {path} has no text or sentence column "
                         f"(its header: {', '.join(rows[0])})")
    labels = [r["label"] for r in rows] if "label" in rows[0] else None
    return [r[column] for r in rows], labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_dir", default="", help="a sequence-classification folder")
    parser.add_argument("--texts", default="", help="TSV: text (or sentence)[, label]")
    parser.add_argument("--output", default="benchmarks/bf16_agreement",
                        help="writes OUTPUT.json and OUTPUT.md")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--model_size", default="small", help="without --model_dir")
    parser.add_argument("--rows", type=int, default=64, help="without --model_dir")
    args = parser.parse_args()
    if bool(args.model_dir) != bool(args.texts):
        raise SystemExit("error: give --model_dir and --texts together, or neither (the "
                         "toy run)")
    sys.path.insert(0, ROOT)
    import numpy as np

    from electra_tf.serving.predictor import Predictor

    folder, path = args.model_dir, args.texts
    if not folder:
        work = scratch_dir("bench_bf16_")
        folder = finetuned_folder(os.path.join(work, "model"), "sst2",
                                  synthetic_vocab(os.path.join(work, "vocab.txt")),
                                  args.model_size)
        rng = random.Random(0)
        path = os.path.join(work, "dev.tsv")
        with open(path, "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n" + "".join(
                " ".join(f"w{rng.randrange(5000)}" for _ in range(rng.randint(3, 30)))
                + f"\t{i % 2}\n" for i in range(args.rows)))
    texts, labels = read_texts(path)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out = {}
    for precision in ("fp32", "bf16"):
        predictor = Predictor.open(folder, precision=precision)
        names = predictor.spec.label_names
        unknown = sorted(set(labels or ()) - set(names)) if names else []
        if unknown:  # (every row had scored as wrong: "accuracy 0.0")
            raise SystemExit(f"error: {path}'s labels {', '.join(unknown[:5])} are not the "
                             f"model's ({', '.join(names)}): give a file labelled with "
                             "them")
        parts = [predictor.outputs(texts[i:i + args.batch])
                 for i in range(0, len(texts), args.batch)]
        out[precision] = {k: np.concatenate([p[k] for p in parts]) for k in ("logits", "label")}
        print(f"{precision}: {len(texts)} texts", file=sys.stderr, flush=True)
    a, b = out["fp32"]["logits"], out["bf16"]["logits"]
    if a.ndim != 2:
        raise SystemExit("error: the model's logits are not [rows, classes] (a regression "
                         "model?): this script compares class labels")
    diff = np.abs(a - b).max(1)
    spread = np.median(a.max(1) - a.min(1))
    flipped = np.nonzero(out["fp32"]["label"] != out["bf16"]["label"])[0]
    top2 = np.sort(a, 1)[:, -2:]
    result = {
        "rows": len(texts), "classes": int(a.shape[1]),
        "labels_differ": int(len(flipped)),
        "max_logit_difference": round(float(diff.max()), 5),
        "median_logit_difference": round(float(np.median(diff)), 5),
        "median_logit_spread": round(float(spread), 4),
        "flipped_fp32_margins": [round(float(top2[i, 1] - top2[i, 0]), 5) for i in flipped],
        "median_fp32_margin": round(float(np.median(top2[:, 1] - top2[:, 0])), 4)}
    if labels is not None:
        for precision in out:
            result[f"accuracy_{precision}"] = round(float(np.mean(
                out[precision]["label"] == np.asarray(labels))), 4)
    command = " ".join(["python", "benchmarks/bench_bf16_agreement.py"]
                       + [relative_flag(x) for x in sys.argv[1:]])
    report = {"command": command, "cpu": cpu_model(), "cores": os.cpu_count(),
              "started": started, "model_dir": os.path.basename(os.path.normpath(folder)),
              "texts": os.path.basename(path), "result": result}
    accuracy = (f"accuracy float32 {result['accuracy_fp32']}, bf16 {result['accuracy_bf16']}"
                if labels is not None else "no labels in the file")
    write_report(args.output, report, [
        "| rows | classes | labels that differ | accuracy float32 | accuracy bf16 | "
        "max / median logit difference | median logit spread | median float32 margin |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {result['rows']} | {result['classes']} | {result['labels_differ']} | "
        f"{result.get('accuracy_fp32', '-')} | {result.get('accuracy_bf16', '-')} | "
        f"{result['max_logit_difference']} / {result['median_logit_difference']} | "
        f"{result['median_logit_spread']} | {result['median_fp32_margin']} |", "",
        f"Flipped rows' float32 margins: {result['flipped_fp32_margins'] or 'none'}."])
    print(f"{len(flipped)} of {len(texts)} labels differ; {accuracy}; logits differ by at "
          f"most {result['max_logit_difference']}")


if __name__ == "__main__":
    run_main(main)
