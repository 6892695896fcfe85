r"""How varied the pre-trained encoders' last-layer vectors are, on the package probe's dev text.

    python -m studies.efficiency.representation_spread \
        [--work=studies/efficiency/results/work] [--data=demo_output/efficiency_cpu]

For each pre-trained model of the CPU study (work/<objective>_s<seed>/model)
and a randomly initialized one of the same size, encodes the first 128 dev
chunks of the package probe and prints the spread of the last layer's
vectors: the variance across tokens (summed over dimensions) over the mean
squared norm. 1 would be vectors with no common part; near 0, every token
mapped to about the same vector. Needs the study's work folder and data
(`python -m studies.efficiency.run --study=cpu`, from the repository root).
"""

import argparse
import csv
import glob
import os
import sys

import keras
import numpy as np

from electra_tf import folders
from electra_tf.modeling.models import build_discriminator
from electra_tf.text.tokenizer import Tokenizer

L = 64


def batch(data_dir: str) -> dict:
    path = os.path.join(data_dir, "probes", "package", "dev.tsv")
    if not os.path.isfile(path):  # (had been a FileNotFoundError traceback)
        sys.exit(f"error: {path} not found: run the CPU efficiency study first "
                 "(python -m studies.efficiency.run --study=cpu)")
    with open(path, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))[:128]
    tokenizer = Tokenizer(os.path.join(data_dir, "vocab.txt"))
    ids = np.zeros((len(rows), L), np.int32)
    mask = np.zeros_like(ids)
    for i, pieces in enumerate(tokenizer.encode([r["sentence"] for r in rows])):
        pieces = [101] + pieces[:L - 2] + [102]  # [CLS] ... [SEP]
        ids[i, :len(pieces)], mask[i, :len(pieces)] = pieces, 1
    return {"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)}


def spread(vectors: np.ndarray) -> float:
    return float(vectors.var(0).sum() / (vectors ** 2).sum(1).mean())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", default="studies/efficiency/results/work")
    parser.add_argument("--data", default="demo_output/efficiency_cpu")
    args = parser.parse_args()
    inputs = batch(args.data)
    real = inputs["input_mask"].astype(bool)
    config = None
    print("model | last-layer token spread")
    for model_dir in sorted(glob.glob(os.path.join(args.work, "*", "model"))):
        if not os.path.exists(os.path.join(model_dir, "discriminator.weights.h5")):
            continue
        model, _ = folders.pretraining.load_discriminator(model_dir)
        config = model.encoder.config
        out = np.asarray(model.encoder(inputs, training=False)["sequence_output"])
        print(f"{os.path.basename(os.path.dirname(model_dir))} | {spread(out[real]):.3f}")
    if config is not None:
        keras.utils.set_random_seed(0)
        model = build_discriminator(config)
        out = np.asarray(model.encoder(inputs, training=False)["sequence_output"])
        print(f"random init (seed 0) | {spread(out[real]):.3f}")


if __name__ == "__main__":
    main()
