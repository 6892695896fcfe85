"""The paper's efficiency analysis (Table 5) at demo scale: pre-train each
objective with the same budget, then fine-tune each on one downstream probe.

    python -m electra_tf.experiments.efficiency --budget_steps=600 \
        --output_dir=benchmarks/efficiency

Corpus: the demo corpus (standard-library docstrings), its vocab and records
(built once under --data_dir). Every objective gets the same model sizes,
steps and batch, so the same number of sequences; the per-step compute
differs a little between objectives (All-Tokens MLM adds a vocabulary-wide
softmax at every position), which the table reports as seconds.

The probe is a real downstream task built from held-out text: sentence-pair
coherence. From the documents of the held-out shard (document index % 10 ==
9, never seen in pre-training), a positive pair is two consecutive sentences
of one document, a negative pair the first sentence with a sentence of
another held-out document. Pairs are written in GLUE's RTE layout and
fine-tuned with the regular fine-tuning loop; the metric is dev accuracy.

`random_init` is the baseline without pre-training: the probe fine-tunes a
freshly initialized model of the same size.

Writes results.csv, results.md and results.png in --output_dir.
"""

from __future__ import annotations

import csv
import json
import os
import random
import sys
import time

from absl import app, flags

FLAGS = flags.FLAGS
DEFAULT_OBJECTIVES = "electra,all_tokens_mlm,replace_mlm,electra_15,bert_mlm,random_init"
PAPER_GLUE = {"electra": 85.0, "all_tokens_mlm": 84.3, "replace_mlm": 82.4,
              "electra_15": 82.4, "bert_mlm": 82.2}
TINY = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


def define_flags():
    flags.DEFINE_integer("budget_steps", 600, "Pre-training steps per objective.")
    flags.DEFINE_string("objectives", DEFAULT_OBJECTIVES, "Comma-separated objectives.")
    flags.DEFINE_string("data_dir", "demo_output/data", "Demo data (built if missing).")
    flags.DEFINE_string("output_dir", "benchmarks/efficiency", "Where results go.")
    flags.DEFINE_integer("max_seq_length", 64, "Pre-training and probe sequence length.")
    flags.DEFINE_integer("train_batch_size", 64, "Pre-training batch.")
    flags.DEFINE_integer("probe_epochs", 3, "Fine-tuning epochs on the probe.")
    flags.DEFINE_integer("seed", 0, "Seed of pre-training, the probe and fine-tuning.")


def build_probe(corpus: str, out_dir: str, seed: int, num_shards: int = 10) -> dict:
    """Sentence-pair coherence pairs from the held-out documents, RTE layout."""
    from electra_tf.data.builder import iter_documents

    docs = [doc for index, doc in iter_documents([corpus])
            if index % num_shards == num_shards - 1 and len(doc) >= 2]
    rng = random.Random(seed)
    rng.shuffle(docs)
    cut = int(0.8 * len(docs))
    counts = {}
    os.makedirs(out_dir, exist_ok=True)
    for split, part in (("train", docs[:cut]), ("dev", docs[cut:])):
        rows = ["index\tsentence1\tsentence2\tlabel"]
        for doc in part:
            for i in range(len(doc) - 1):
                if rng.random() < 0.5:
                    pair, label = (doc[i], doc[i + 1]), "entailment"
                else:
                    other = rng.choice([d for d in part if d is not doc])
                    pair, label = (doc[i], rng.choice(other)), "not_entailment"
                clean = [s.replace("\t", " ") for s in pair]
                rows.append(f"{len(rows) - 1}\t{clean[0]}\t{clean[1]}\t{label}")
        with open(os.path.join(out_dir, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("\n".join(rows) + "\n")
        counts[split] = len(rows) - 1
    return counts


def random_init(demo: dict, model_dir: str) -> dict:
    """The no-pre-training baseline: a discriminator as initialized."""
    import keras

    from electra_tf import artifacts
    from electra_tf.config import MODEL_SIZES, EncoderConfig
    from electra_tf.modeling import build_discriminator

    keras.utils.set_random_seed(FLAGS.seed)
    config = EncoderConfig(vocab_size=demo["vocab_size"], **MODEL_SIZES["tiny"], **TINY)
    artifacts.save_discriminator(model_dir, build_discriminator(config))
    return {"pretrain_seconds": 0.0}


def pretrain(objective: str, demo: dict, model_dir: str) -> dict:
    from electra_tf.config import PretrainingConfig, RunConfig
    from electra_tf.training import Pretraining

    if objective == "random_init":
        return random_init(demo, model_dir)
    config = PretrainingConfig(
        model_size="tiny", model_hparam_overrides=TINY, vocab_size=demo["vocab_size"],
        objective=objective, max_seq_length=FLAGS.max_seq_length,
        generator_hidden_size=0.5,  # bert_mlm is built at D's full size whatever this says
        learning_rate=1e-3, num_warmup_steps=max(1, FLAGS.budget_steps // 10),
        train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.train_batch_size,
        num_train_steps=FLAGS.budget_steps, iterations_per_loop=max(1, FLAGS.budget_steps // 4),
        save_checkpoints_steps=FLAGS.budget_steps, num_eval_steps=10, seed=FLAGS.seed)
    run = RunConfig(model_dir=model_dir, train_data=demo["train_data"],
                    eval_data=demo["eval_data"], vocab_file=demo["vocab_file"])
    t0 = time.monotonic()
    final = Pretraining(config, run).train()
    return {"pretrain_seconds": time.monotonic() - t0, **final}


def probe(model_dir: str, probe_dir: str, out_dir: str, vocab_file: str) -> float:
    from electra_tf.config import FinetuneRun, FinetuningConfig
    from electra_tf.finetuning.registry import get_task
    from electra_tf.finetuning.trainer import Finetuning

    config = FinetuningConfig(task_name="rte", max_seq_length=FLAGS.max_seq_length,
                              num_train_epochs=FLAGS.probe_epochs, learning_rate=1e-3,
                              train_batch_size=32, seed=FLAGS.seed)
    run = FinetuneRun(model_dir=out_dir, data_dir=probe_dir, init_checkpoint=model_dir,
                      vocab_file=vocab_file)
    results = Finetuning(get_task("rte"), config, run).train()
    last = results[sorted(results, key=lambda k: int(k.split("_")[-1]))[-1]]
    return last["dev"]["accuracy"]


def write_outputs(rows: list[dict], out_dir: str) -> None:
    keys = ["objective", "probe_accuracy", "masked_lm_accuracy",
            "pretrain_seconds", "paper_glue"]
    with open(os.path.join(out_dir, "results.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, keys)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: r.get(k) for k in keys})
    lines = ["| objective | probe accuracy (held-out pair coherence) | G masked-LM accuracy "
             "| pre-training s | paper GLUE (Table 5) |", "|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: -r["probe_accuracy"]):
        lines.append(f"| {r['objective']} | {r['probe_accuracy']:.3f} | "
                     f"{r.get('masked_lm_accuracy', float('nan')):.3f} | "
                     f"{r['pretrain_seconds']:.0f} | {r['paper_glue'] or '-'} |")
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["objective"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar(names, [r["probe_accuracy"] for r in rows], color="#4C72B0", label="probe (ours)")
    ax.set_ylabel("probe dev accuracy")
    ax.set_ylim(0.4, 1.0)
    ax2 = ax.twinx()
    ax2.plot(names, [r["paper_glue"] or float("nan") for r in rows], "o-", color="#C44E52",
             label="paper GLUE")
    ax2.set_ylabel("paper GLUE (Table 5)")
    ax.set_title(f"Efficiency analysis at demo scale ({FLAGS.budget_steps} steps each)")
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "results.png"), dpi=100)


def main(argv):
    del argv
    from electra_tf.data.demo_corpus import prepare_demo_data

    os.makedirs(FLAGS.output_dir, exist_ok=True)
    demo = prepare_demo_data(FLAGS.data_dir, 4000, FLAGS.max_seq_length)
    work = os.path.join(FLAGS.output_dir, "work")
    probe_dir = os.path.join(work, "probe")
    counts = build_probe(os.path.join(FLAGS.data_dir, "corpus.txt"), probe_dir, FLAGS.seed)
    print(f"[efficiency] probe: {counts['train']} train / {counts['dev']} dev pairs",
          file=sys.stderr)
    rows = []
    for objective in FLAGS.objectives.split(","):
        model_dir = os.path.join(work, objective)
        print(f"[efficiency] pre-training {objective} for {FLAGS.budget_steps} steps",
              file=sys.stderr)
        final = pretrain(objective, demo, model_dir)
        accuracy = probe(model_dir, probe_dir, os.path.join(work, objective + "_probe"),
                         demo["vocab_file"])
        rows.append({"objective": objective, "probe_accuracy": accuracy,
                     "paper_glue": PAPER_GLUE.get(objective), **final})
        print(f"[efficiency] {objective}: probe accuracy {accuracy:.3f}", file=sys.stderr)
        with open(os.path.join(FLAGS.output_dir, "results.json"), "w") as f:
            json.dump(rows, f, indent=2, default=float)
    write_outputs(rows, FLAGS.output_dir)


if __name__ == "__main__":
    from electra_tf import cli

    define_flags()
    app.run(lambda argv: cli.run_cli(lambda: main(argv)))
