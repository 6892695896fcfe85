"""Electric's scoring export against the classification export, side by side.

    python benchmarks/bench_score_export.py --output=benchmarks/score_export_latency

Both are ELECTRA-Small (random weights, vocab 30522: bench_export.py's sst2
folder, and a pre-training folder of the same discriminator that records
objective=electric), exported at seq 128 with the default length buckets and
loaded back with tf.saved_model.load in this process. The request is a
re-ranking batch: 10 hypotheses of 20 words each, through the text signature
(tokenization included). The two exports' calls alternate (order flipped every
pair) so that the load of a shared machine hits both alike; p50 / p95 of each
and the ratio of the p50s are recorded.
"""

import argparse
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time

import numpy as np
from bench_common import cpu_model  # noqa: E402 (benchmarks/ is on sys.path)


def make_checkpoints(work):
    """bench_export's Small sst2 folder (vocab 30522 of "wN" words), with its vocab.txt and
    fingerprint as run_finetuning writes them; {"sst2": folder}."""
    import keras

    from electra_tf import folders
    from electra_tf.core.config import MODEL_SIZES, EncoderConfig
    from electra_tf.modeling import build_discriminator
    from electra_tf.tasks.model import FinetuningModel

    vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]",
                                                                 "[MASK]"]
    vocab += [f"w{i}" for i in range(30522 - len(vocab))]
    vocab_file = os.path.join(work, "vocab.txt")
    with open(vocab_file, "w") as f:
        f.write("\n".join(vocab) + "\n")
    config = EncoderConfig(vocab_size=30522, **MODEL_SIZES["small"])
    keras.utils.set_random_seed(0)
    model = FinetuningModel(build_discriminator(config).encoder, "sequence_classification", 2)
    model.build()
    out = os.path.join(work, "sst2")
    os.makedirs(out)
    folders.files.save_weights(model, os.path.join(out, folders.files.FINETUNED_WEIGHTS))
    folders.files.write_json(os.path.join(out, folders.files.FINETUNING_CONFIG), {
        "encoder": config.to_dict(), "task": "sst2", "head": "sequence_classification",
        "regression": False, "answerable": False, "pair": False, "label_names": ["0", "1"],
        "max_seq_length": 128, "model_size": "small", "head_options": {},
        "finetuning": {"do_lower_case": True}, "run": {"vocab_file": vocab_file},
        **folders.vocabulary.keep_vocab(out, vocab_file)})
    return {"sst2": out}


def electric_folder(work, sst2_dir):
    """A pre-training folder holding sst2's discriminator, recorded as Electric's."""
    import keras

    from electra_tf import folders
    from electra_tf.core.config import MODEL_SIZES, EncoderConfig, PretrainingConfig
    from electra_tf.modeling import build_discriminator

    config = EncoderConfig(vocab_size=30522, **MODEL_SIZES["small"])
    keras.utils.set_random_seed(0)
    out = os.path.join(work, "electric")
    os.makedirs(out)
    folders.pretraining.save_discriminator(out, build_discriminator(config))
    vocab = os.path.join(work, "vocab.txt")
    folders.pretraining.write_pretraining_config(
        out, PretrainingConfig(objective="electric", model_size="small"), {"vocab_file": vocab})
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", default="")
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    import tensorflow as tf

    from electra_tf.serving.export import export, load_spec

    work = tempfile.mkdtemp(prefix="bench_score_")
    try:
        dirs = make_checkpoints(work)
        dirs["score"] = electric_folder(work, dirs["sst2"])
        paths = {"classification": export(load_spec("sequence_classification", dirs["sst2"]),
                                          work, "cls"),
                 "score": export(load_spec("score", dirs["score"], max_seq_length=128),
                                 work, "score")}
        fns = {k: tf.saved_model.load(p).signatures["serving_default"] for k, p in paths.items()}
        rng = random.Random(0)
        texts = tf.constant([" ".join(f"w{rng.randrange(1000, 30000)}" for _ in range(20))
                             for _ in range(10)])
        for fn in fns.values():
            for _ in range(args.warmup):
                {k: v.numpy() for k, v in fn(text=texts).items()}
        times = {k: [] for k in fns}
        order = list(fns)
        for i in range(args.iters):
            for name in (order if i % 2 == 0 else order[::-1]):
                t0 = time.perf_counter()
                {k: v.numpy() for k, v in fns[name](text=texts).items()}
                times[name].append(1e3 * (time.perf_counter() - t0))
        result = {"command": "python " + " ".join(sys.argv), "cpu": cpu_model(),
                  "date": time.strftime("%Y-%m-%d"), "python": platform.python_version(),
                  "tensorflow": tf.__version__, "batch": 10, "words": 20, "iters": args.iters}
        for name, t in times.items():
            result[name] = {"p50_ms": round(float(np.percentile(t, 50)), 2),
                            "p95_ms": round(float(np.percentile(t, 95)), 2)}
        result["p50_ratio_score_over_classification"] = round(
            result["score"]["p50_ms"] / result["classification"]["p50_ms"], 3)
        print(json.dumps(result, indent=2))
        if args.output:
            with open(args.output + ".json", "w") as f:
                json.dump(result, f, indent=2)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
