r"""Linear probes of a discriminator's frozen states, layer by layer (issue #20).

Fine-tuning mixes two questions: are the pre-trained states useful, and can
fine-tuning use them? This probe answers the first. For each model (a
pre-training model_dir, one of its checkpoints, or the study's `none`
initialization) it encodes every task's train and dev texts once, takes each
layer's [CLS] state and the mean of its real positions, and fits a logistic
regression (scikit-learn, standardized features, C chosen by 5-fold
cross-validation on the train split) per task, layer and pooling. A
bag-of-wordpieces logistic regression on the same splits is the floor any
useful representation should reach.

Run from the repository root, after the study's prepare stage:

    python -m studies.real_data.probe_features --work_dir=../real_data_cache/study \
        --models=none=cpu/pretrain/none_s0,electra=cpu/pretrain/electra_s0,bert_mlm=cpu/pretrain/bert_mlm_s0 \
        --output=studies/real_data/results/probe_features

Other task folders (`text<TAB>label` train.tsv and dev.tsv), e.g. the full
splits that studies/gpu_small fine-tunes on, cut to the study's 1,200 training
examples (the same seeded subsample its prepare stage takes):

    python -m studies.real_data.probe_features --work_dir=../gpu_small \
        --tasks_dir=../real_data_cache/tasks --train_cap=1200 \
        --models=none=none_s0,electra=electra,bert_mlm=bert_mlm \
        --output=studies/gpu_small/results/probe_features

Model paths are relative to --work_dir unless absolute. Writes OUTPUT.json
(collect_results.py adds it to studies/real_data/results.jsonl) and prints its
tables; progress goes to stderr.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time
import warnings

from absl import app, flags

FLAGS = flags.FLAGS


def define_flags() -> None:
    """The command's flags, defined only when run as a program (the study's other scripts
    define flags of the same names, and the tests import them all)."""
    flags.DEFINE_string("work_dir", None, "The study's --work_dir (holds cpu/tasks).")
    flags.DEFINE_list("models", None, "NAME=PATH pairs: a pre-training model_dir or a "
                      "checkpoint (MODEL_DIR/checkpoints/ckpt-N), relative to --work_dir.")
    flags.DEFINE_list("tasks", ["trec6", "mr", "vader_sst2"], "Tasks under --tasks_dir.")
    flags.DEFINE_string("tasks_dir", None, "The task folders (default: WORK_DIR/cpu/tasks, "
                        "the study's).")
    flags.DEFINE_integer("train_cap", 0, "Probe on at most this many training examples of "
                         "each task, the study's seeded subsample (0: all).", lower_bound=0)
    flags.DEFINE_integer("max_seq_length", 64, "Positions per text, [CLS] and [SEP] included.")
    flags.DEFINE_string("output", None, "Writes OUTPUT.json.")
    flags.mark_flags_as_required(["work_dir", "models", "output"])


def log(message: str) -> None:
    print(f"[probe] {message}", file=sys.stderr, flush=True)


def read_task(tasks_dir: str, task: str, train_cap: int) -> dict:
    """{"train": (texts, labels), "dev": (texts, labels)} of a task folder; train cut to
    `train_cap` rows by the study's seeded subsample (study.subsample, seed 0)."""
    from studies.real_data.study import subsample

    out = {s: read_split(os.path.join(tasks_dir, task, f"{s}.tsv")) for s in ("train", "dev")}
    texts, labels = out["train"]
    kept = subsample(list(range(len(texts))), train_cap, 0, f"{task}-train")
    out["train"] = [texts[i] for i in kept], [labels[i] for i in kept]
    return out


def read_split(path: str) -> tuple[list[str], list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r["text"] for r in rows], [r["label"] for r in rows]


def encoder_states(disc, ids, mask):
    """The encoder's states [N, L, width] on one batch: the embedding layer's output,
    the first layer's input (after the projection, if any; else the same) and every
    layer's output."""
    import numpy as np

    enc = disc.encoder
    x = enc.embeddings(ids, np.zeros_like(ids), training=False)
    states = [np.asarray(x)]
    if enc.embeddings_project is not None:
        x = enc.embeddings_project(x)
    states.append(np.asarray(x))
    for layer in enc.transformer_layers:
        x = layer(x, mask, training=False)
        states.append(np.asarray(x))
    return states


def mean_cosine(vectors) -> float:
    """Mean pairwise cosine similarity of the rows of [N, D] (N >= 2), self-pairs left out."""
    import numpy as np

    v = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    n = len(v)
    return float(((v @ v.T).sum() - n) / (n * (n - 1)))


def layer_states(disc, ids, mask):
    """[CLS] and masked-mean states of every layer: {(layer, pooling): [N, H]}."""
    import numpy as np

    states = encoder_states(disc, ids, mask)[1:]
    weights = mask[..., None].astype(np.float32)
    out = {}
    for i, s in enumerate(states):
        out[(i, "cls")] = s[:, 0]
        out[(i, "mean")] = (s * weights).sum(1) / weights.sum(1)
    return out


def pack_ids(tok, texts, length):
    """[CLS] pieces [SEP] of each text, cut to `length` and zero-padded: ids and mask int32
    [N, length] (the probes' and early_points' single-text packing)."""
    import numpy as np

    ids = np.zeros((len(texts), length), np.int32)
    for i, pieces in enumerate(tok.encode(texts)):
        row = [tok.cls_id] + pieces[:length - 2] + [tok.sep_id]
        ids[i, :len(row)] = row
    return ids, (ids > 0).astype(np.int32)


def encode(disc, tok, texts, length, batch=128):
    import numpy as np

    ids, mask = pack_ids(tok, texts, length)
    parts = [layer_states(disc, ids[i:i + batch], mask[i:i + batch])
             for i in range(0, len(texts), batch)]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}, ids


def probe(train_x, train_y, dev_x, dev_y) -> float:
    """Dev accuracy of a standardized logistic regression, C by 5-fold CV on train.

    BLAS runs on one thread: these products are too small to share, and BLAS's
    threads beside a busy CPU made each fit about 7 times slower."""
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from threadpoolctl import threadpool_limits

    model = make_pipeline(StandardScaler(), LogisticRegressionCV(
        Cs=[1e-3, 1e-2, 1e-1, 1.0], cv=5, max_iter=2000, random_state=0))
    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore", FutureWarning)  # scikit-learn 1.9's notices
        model.fit(train_x, train_y)
    return float(model.score(dev_x, dev_y))


def bag_of_pieces(train_ids, train_y, dev_ids, dev_y, vocab_size) -> float:
    import numpy as np
    from sklearn.linear_model import LogisticRegressionCV

    def counts(ids):
        x = np.zeros((len(ids), vocab_size), np.float32)
        for i, row in enumerate(ids):
            for t in row[row > 0]:
                x[i, t] = 1.0
        return x

    model = LogisticRegressionCV(Cs=[0.1, 1.0, 10.0], cv=5, max_iter=2000, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        model.fit(counts(train_ids), train_y)
    return float(model.score(counts(dev_ids), dev_y))


def main(argv):
    del argv
    from electra_tf.core.config import FinetuningConfig, FinetuningRun
    from electra_tf.text.tokenizer import Tokenizer
    from electra_tf.training.finetuning import initial_discriminator
    from studies.real_data.study import majority_baseline

    tasks_dir = FLAGS.tasks_dir or os.path.join(FLAGS.work_dir, "cpu", "tasks")
    missing = [os.path.join(tasks_dir, t, f"{s}.tsv") for t in FLAGS.tasks
               for s in ("train", "dev")
               if not os.path.isfile(os.path.join(tasks_dir, t, f"{s}.tsv"))]
    if missing:  # (had been a FileNotFoundError traceback)
        sys.exit(f"error: {missing[0]} not found: build the tasks first "
                 "(python -m studies.real_data.prepare_tasks), or give --tasks_dir")
    splits = {t: read_task(tasks_dir, t, FLAGS.train_cap) for t in FLAGS.tasks}
    results = {"command": " ".join(["python -m studies.real_data.probe_features"] + sys.argv[1:]),
               "models": {}, "bag_of_pieces": {},
               "majority": {t: majority_baseline(d["train"][1], d["dev"][1])
                            for t, d in splits.items()}}
    for spec in FLAGS.models:
        name, _, path = spec.partition("=")
        path = path if os.path.isabs(path) else os.path.join(FLAGS.work_dir, path)
        started = time.time()
        disc, vocab = initial_discriminator(FinetuningConfig(), FinetuningRun(init_checkpoint=path))
        tok = Tokenizer(vocab)
        scores = {}
        for task, data in splits.items():
            (train_texts, train_y), (dev_texts, dev_y) = data["train"], data["dev"]
            train_f, train_ids = encode(disc, tok, train_texts, FLAGS.max_seq_length)
            dev_f, dev_ids = encode(disc, tok, dev_texts, FLAGS.max_seq_length)
            if task not in results["bag_of_pieces"]:
                results["bag_of_pieces"][task] = round(bag_of_pieces(
                    train_ids, train_y, dev_ids, dev_y, len(tok.vocab)), 4)
            for key in sorted(train_f):
                acc = probe(train_f[key], train_y, dev_f[key], dev_y)
                scores[f"{task}/layer{key[0]}/{key[1]}"] = round(acc, 4)
            log(f"{name} {task}: " + " ".join(
                f"L{k[0]}{k[1][0]}={scores[f'{task}/layer{k[0]}/{k[1]}']:.3f}" for k in sorted(train_f)))
        results["models"][name] = {"path": os.path.relpath(path, FLAGS.work_dir), "scores": scores}
        log(f"{name}: {time.time() - started:.0f}s")
    with open(FLAGS.output + ".json", "w") as f:
        json.dump(results, f, indent=1)
    print(markdown(results))


def markdown(results: dict) -> str:
    names = list(results["models"])
    first = results["models"][names[0]]["scores"]
    layers = sorted({int(k.split("/")[1][5:]) for k in first})
    lines = [f"Command: `{results['command']}`", "",
             "Dev accuracy of a logistic regression on frozen states (C by 5-fold CV on train), "
             "per layer (L0: the embeddings, after the projection) and pooling ([CLS] or the "
             "mean of the real positions). Bag of wordpieces, same splits: " + ", ".join(
                 f"{t} {a:.3f}" for t, a in results["bag_of_pieces"].items()) + ". Majority "
             "label: " + ", ".join(f"{t} {a:.3f}" for t, a in results["majority"].items())
             + ".", ""]
    for task in results["bag_of_pieces"]:
        lines += [f"### {task}", "", "| model | " + " | ".join(
            f"L{i} {p}" for i in layers for p in ("cls", "mean")) + " |",
                  "|---|" + "---:|" * (2 * len(layers))]
        for name in names:
            s = results["models"][name]["scores"]
            lines.append(f"| {name} | " + " | ".join(
                f"{s[f'{task}/layer{i}/{p}']:.3f}" for i in layers for p in ("cls", "mean")) + " |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    define_flags()
    app.run(main)
