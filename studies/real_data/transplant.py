r"""Which part of a pre-trained discriminator fine-tunes worse: transplants into its initialization.

Run from the repository root, after the study has pre-trained the donor
(studies/real_data/FINDINGS.md):

    python -m studies.real_data.transplant --work_dir=../real_data_cache/study \
        --donor=electra --parts=word_embeddings,embeddings,layers,whole \
        --output=studies/real_data/results/transplant_electra

For each part of `--parts` it writes a discriminator that is the study's
`none` of `--seed` (the random initialization) with that part's weights taken
from the donor's final pre-trained discriminator (the study's
`cpu/pretrain/DONOR_sSEED`, or any pre-training model_dir given as a path).
The parts:

    word_embeddings  the word-piece embedding table alone
    embeddings       all embedding weights: word, position and segment tables,
                     the embedding LayerNorm and the projection to the hidden size
    layers           every transformer layer (embeddings left at the initialization)
    encoder          everything but the word-piece table
    whole            every weight (the donor itself, read through the same path)

Each model is then fine-tuned on `--tasks` with the study's own fine-tuning
command (`--finetune_seeds`), and its token states are measured: the mean
pairwise cosine over the real positions of the first 32 mr dev sentences,
after the embedding layer and after every transformer layer. `none` itself
is the table's first row (from the study's ledger when it holds the result).
The record goes to OUTPUT.json (collect_results.py adds it to
studies/real_data/results.jsonl), the table to stdout; the fine-tuning results to
WORK_DIR/cpu/transplant/results.jsonl, so a rerun redoes nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time

from absl import app, flags

from studies.real_data import study

FLAGS = flags.FLAGS
# Variable paths of a discriminator: discriminator/encoder/embeddings/word_embeddings/...,
# .../embeddings/LayerNorm/..., .../embeddings_project/..., .../layer_3/...
PARTS = {
    "word_embeddings": r"/word_embeddings/",
    "embeddings": r"/embeddings/|/embeddings_project/",
    "layers": r"/layer_\d+/",
    "encoder": r"^(?!.*/word_embeddings/)",
    "whole": r"",
}


def transplant(base_dir: str, donor_dir: str, output_dir: str, part: str) -> list[str]:
    """Writes base's discriminator with `part`'s weights from donor; returns their paths.

    Both folders hold discriminator.weights.h5 + discriminator_config.json of the
    same sizes. The output folder gets base's recorded vocab (if any).

    Raises:
      ValueError: an unknown part, or folders of different sizes.
    """
    from electra_tf import folders

    if part not in PARTS:
        raise ValueError(f"unknown part {part!r}: one of {', '.join(PARTS)}")
    base, vocab = folders.pretraining.load_discriminator(base_dir)
    donor, _ = folders.pretraining.load_discriminator(donor_dir)
    if base.config.to_dict() != donor.config.to_dict():
        raise ValueError(f"{base_dir} and {donor_dir} hold discriminators of different sizes")
    donor_vars = {v.path: v for v in donor.weights}
    taken = []
    for v in base.weights:
        if re.search(PARTS[part], v.path):
            v.assign(donor_vars[v.path])
            taken.append(v.path)
    os.makedirs(output_dir, exist_ok=True)
    folders.pretraining.save_discriminator(output_dir, base)
    if vocab:
        folders.pretraining.record_vocab(output_dir, vocab)
    return taken


def layer_cosines(model_dir: str, texts: list[str], vocab: str, length: int = 64) -> list[float]:
    """Mean pairwise cosine of the token states after the embeddings and each layer."""
    from electra_tf import folders
    from electra_tf.text.tokenizer import Tokenizer
    from studies.real_data.probe_features import encoder_states, mean_cosine, pack_ids

    disc, _ = folders.pretraining.load_discriminator(model_dir)
    ids, mask = pack_ids(Tokenizer(vocab), texts, length)
    states = encoder_states(disc, ids, mask)
    real = mask.astype(bool)
    # the embedding layer's output (before the projection), then each layer's
    return [round(mean_cosine(x[real]), 4) for x in [states[0], *states[2:]]]


def define_flags() -> None:
    """The command's flags (defined only when run: the study scripts share flag names)."""
    flags.DEFINE_string("work_dir", "", "The study's --work_dir (after the donor's pre-training).")
    flags.DEFINE_string("donor", "electra", "A study objective (its run of --seed) or a "
                        "pre-training model_dir.")
    flags.DEFINE_string("parts", "word_embeddings,embeddings,layers,whole",
                        "Parts to transplant (comma-separated; see the module's doc).")
    flags.DEFINE_integer("seed", 0, "Pre-training seed: the `none` initialization and the donor run.")
    flags.DEFINE_string("finetune_seeds", "0", "Fine-tuning seeds (comma-separated).")
    flags.DEFINE_string("tasks", ",".join(study.TASKS), "Tasks (the study's capped copies).")
    flags.DEFINE_integer("finetune_workers", 2, "Fine-tuning runs at a time (one thread each).")
    flags.DEFINE_string("output", "studies/real_data/results/transplant", "Writes OUTPUT.json.")
    flags.DEFINE_string("study_ledger", "studies/real_data/results/study/ledger.jsonl",
                        "The study's ledger: its `none` results are the table's first "
                        "row.")


def main(argv):
    del argv
    from concurrent.futures import ThreadPoolExecutor

    from studies.real_data.ledger import Ledger

    s = study.settings("cpu")
    p = study.paths(FLAGS.work_dir, s)
    base = study.none_dir(p, FLAGS.seed)
    donor = (FLAGS.donor if os.path.isdir(FLAGS.donor)
             else study.pretrain_dir(p, FLAGS.donor, FLAGS.seed))
    for path, what in ((base, "the study's `none` (run its finetune stage)"),
                       (donor, "the donor's pre-training")):
        if not os.path.exists(os.path.join(path, "discriminator.weights.h5")):
            raise SystemExit(f"error: {path}: no discriminator.weights.h5; {what} first")
    parts = [x for x in FLAGS.parts.split(",") if x]
    unknown = [x for x in parts if x not in PARTS]
    if unknown:
        raise SystemExit(f"error: unknown part(s) {', '.join(unknown)}: one of {', '.join(PARTS)}")
    tasks = [t for t in FLAGS.tasks.split(",") if t]
    seeds = [int(x) for x in FLAGS.finetune_seeds.split(",") if x]
    name = os.path.basename(os.path.normpath(donor))
    root = os.path.join(p["runs"], "transplant", f"{name}_into_none_s{FLAGS.seed}")
    ledger = Ledger(os.path.join(p["runs"], "transplant", "results.jsonl"),
                    study.settings_id(s, study.vocab_size_of(p["vocab"])))
    with open(os.path.join(p["tasks"], "mr", "dev.tsv"), encoding="utf-8") as f:
        texts = [line.rsplit("\t", 1)[0] for line in f.read().splitlines()[1:33]]

    rows = {"none": {"cosines": layer_cosines(base, texts, p["vocab"])}}
    for part in parts:
        model_dir = os.path.join(root, part)
        # rewritten each time: cheap, and never a half-written folder from a killed run
        tmp = model_dir + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        taken = transplant(base, donor, tmp, part)
        shutil.rmtree(model_dir, ignore_errors=True)
        os.replace(tmp, model_dir)
        rows[part] = {"variables": len(taken), "cosines": layer_cosines(model_dir, texts,
                                                                         p["vocab"])}
        study.log(f"{part}: {len(taken)} variables from {donor}; token cosines "
                  f"{rows[part]['cosines']}")
    sizes = {}
    for t in tasks:
        with open(os.path.join(p["tasks"], t, "meta.json")) as f:
            sizes[t] = json.load(f)["dev_size"]
    runs = [dict(objective=f"transplant:{name}:{part}", pretrain_seed=FLAGS.seed, step=0,
                 flops=0, fraction=0.0, task=t, finetune_seed=fs,
                 init_checkpoint=os.path.join(root, part),
                 dir=os.path.join(root, "finetune", part, f"{t}_f{fs}"))
            for part in parts for t in tasks for fs in seeds]

    def one(r):
        res = study.finetune_one(s, p, r, sizes[r["task"]], ledger, threads=1)
        study.log(f"{r['objective']} {r['task']} f{r['finetune_seed']}: "
                  f"{res.get('dev_accuracy', res)}")
        return r, res

    with ThreadPoolExecutor(max_workers=FLAGS.finetune_workers) as pool:
        for r, res in pool.map(one, runs):
            part = r["objective"].rsplit(":", 1)[1]
            rows[part].setdefault(r["task"], []).append(res.get("dev_accuracy"))
    study_ledger = Ledger(FLAGS.study_ledger, ledger.sid)
    for t in tasks:
        for fs in seeds:
            got = study_ledger.finetune(dict(objective="none", pretrain_seed=FLAGS.seed, step=0,
                                             task=t, finetune_seed=fs))
            rows["none"].setdefault(t, []).append((got or {}).get("dev_accuracy"))
    write_outputs(rows, ["none", *parts], tasks, seeds, name)


def write_outputs(rows: dict, order: list[str], tasks: list[str], seeds: list[int],
                  donor: str) -> None:
    command = "python -m studies.real_data.transplant " + " ".join(sys.argv[1:])
    result = {"command": command, "date": time.strftime("%Y-%m-%d", time.gmtime()),
              "machine": f"{study.cpu_model()}, {os.cpu_count()} CPU cores",
              "finetune_seeds": seeds, "rows": {k: rows[k] for k in order}}
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output)), exist_ok=True)
    with open(FLAGS.output + ".json", "w") as f:
        json.dump(result, f, indent=1)

    def acc(values) -> str:
        values = [v for v in values or [] if v is not None]
        return " / ".join(f"{v:.3f}" for v in values) if values else ""

    depth = len(rows["none"]["cosines"])
    lines = [f"Command: `{command}` ({result['date']}, {result['machine']}). `none` is the "
             f"study's initialization of pre-training seed {FLAGS.seed}; each other row is it "
             f"with that part's weights from `{donor}`. Dev accuracy after the study's "
             f"fine-tuning (fine-tuning seeds {', '.join(map(str, seeds))}); token cosine: mean "
             "pairwise cosine of the token states of 32 mr dev sentences after the embeddings "
             "(emb) and after each layer.", "",
             "| model | " + " | ".join(tasks) + " | token cosine: emb | "
             + " | ".join(f"layer {i}" for i in range(depth - 1)) + " |",
             "|---|" + "---:|" * (len(tasks) + depth)]
    for k in order:
        r = rows[k]
        lines.append(f"| {k} | " + " | ".join(acc(r.get(t)) for t in tasks) + " | "
                     + " | ".join(f"{c:.3f}" for c in r["cosines"]) + " |")
    print("\n".join(lines))


if __name__ == "__main__":
    define_flags()
    app.run(main)
