r"""ELECTRA's discriminator before and after its collapse: fine-tuning from early checkpoints.

Run from the repository root, after the study's prepare stage (its vocab,
records and capped task copies; studies/real_data/FINDINGS.md):

    python -m studies.real_data.early_points --work_dir=../real_data_cache/study \
        --steps=50,100,150,200 --output=studies/real_data/results/early_points

Pre-trains the study's ELECTRA run (`--scale=cpu`, seed 0: the CPU recipe, the
same 1,000-step schedule) with a checkpoint every `--every` steps, and stops it
once the checkpoint of the last of `--steps` is written. The training log gives
the discriminator's AUC and the generator's masked-LM accuracy at each of them.
For each checkpoint it then measures how collinear the discriminator's final
token states are (the mean pairwise cosine over the real positions of the
first 32 dev sentences of mr), and fine-tunes it on every task of `--tasks`
with the study's own fine-tuning command, once per seed of `--finetune_seeds`
(default 0; the table gives each task's mean over them, the mean over tasks,
and its difference from the study's `none` with the same seeds). The record
goes to OUTPUT.json (`python -m studies.real_data.collect_results` adds it to
studies/real_data/results.jsonl), the table to stdout; each finished
fine-tuning run is kept in WORK_DIR/cpu/early/ and not redone by a rerun, so
more seeds can be added later.

A variant of the recipe: `--variant=NAME --pretrain_flag=--disc_weight=1`
(repeatable) adds flags to the pre-training command and keeps its runs in
WORK_DIR/cpu/early/NAME/; give it its own --output.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

from absl import app, flags

from studies.real_data import study

FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", "", "The study's --work_dir (after --stage=prepare).")
flags.DEFINE_string("steps", "50,100,150,200", "Checkpoints to fine-tune (comma-separated).")
flags.DEFINE_integer("every", 50, "Checkpoint period of the pre-training run.")
flags.DEFINE_string("tasks", ",".join(study.TASKS), "Tasks (the study's capped copies).")
flags.DEFINE_integer("seed", 0, "Pre-training seed.")
flags.DEFINE_integer("finetune_workers", 2, "Fine-tuning runs at a time (one thread each).")
flags.DEFINE_string("finetune_seeds", "0", "Fine-tuning seeds of every checkpoint and task "
                    "(comma-separated); the table gives their mean.")
flags.DEFINE_string("output", "studies/real_data/results/early_points", "Writes OUTPUT.json.")
flags.DEFINE_multi_string("pretrain_flag", [], "A run_pretraining flag added to the "
                          "recipe's (e.g. --pretrain_flag=--disc_weight=1); needs --variant.")
flags.DEFINE_string("variant", "", "A name for a run with --pretrain_flag: its own folder "
                    "under WORK_DIR/cpu/early/.")
flags.DEFINE_string("study_ledger", "studies/real_data/results/study/ledger.jsonl",
                    "The study's ledger: its `none` results are the table's step 0.")

# ELECTRA's lines have both; a BERT-MLM variant's (--pretrain_flag=--objective=bert_mlm)
# have no disc_auc
_STEP = re.compile(r"step (\d+)/\d+ \|.*mlm_acc ([\d.]+)(?: disc_auc ([\d.]+))?")


def pretrain(s: dict, p: dict, model_dir: str, steps: list[int]) -> dict:
    """The study's ELECTRA run (or a variant of it) with frequent checkpoints, stopped after
    max(steps)."""
    plan = study.study_plan(s, ("electra",), study.vocab_size_of(p["vocab"]))["electra"]
    cmd = study.pretrain_command(s, p, "electra", FLAGS.seed, plan)
    swap = {"--model_dir": model_dir, "--save_checkpoints_steps": FLAGS.every,
            "--keep_checkpoint_max": len(range(0, max(steps), FLAGS.every)) + 2,
            "--iterations_per_loop": FLAGS.every, "--log_every_steps": FLAGS.every}
    cmd = [f"{a.split('=')[0]}={swap[a.split('=')[0]]}" if a.split("=")[0] in swap else a
           for a in cmd] + list(FLAGS.pretrain_flag)  # absl: the last value of a flag wins
    log_path = model_dir + ".log"
    os.makedirs(os.path.dirname(model_dir), exist_ok=True)
    last = study.checkpoint_path(model_dir, max(steps))
    if not last:
        study.log(f"pre-training seed {FLAGS.seed} to step {max(steps)} "
                  f"(checkpoints every {FLAGS.every}) -> {model_dir}")
        with open(log_path, "a", encoding="utf-8") as logf:
            proc = subprocess.Popen(cmd, cwd=study.REPO_ROOT, stdout=logf,
                                    stderr=subprocess.STDOUT, env=study._env("tensorflow"))
            while proc.poll() is None and not study.checkpoint_path(model_dir, max(steps)):
                time.sleep(2)
            time.sleep(5)  # the checkpoint's files are complete once its index is there
            proc.kill()
            proc.wait()
    curve = {}
    with open(log_path, encoding="utf-8") as f:
        for line in f:
            m = _STEP.search(line)
            if m:
                curve[int(m.group(1))] = {"mlm_acc": float(m.group(2)),
                                          **({"disc_auc": float(m.group(3))}
                                             if m.group(3) else {})}
    missing = [n for n in steps if not study.checkpoint_path(model_dir, n)]
    if missing:
        raise RuntimeError(f"checkpoints missing at steps {missing}; see {log_path}")
    return curve


def token_cosine(checkpoint: str, texts: list[str], length: int = 64) -> dict:
    """Mean pairwise cosine of the final token states and of the [CLS] states."""
    import numpy as np

    from electra_tf.core.config import FinetuningConfig, FinetuningRun
    from electra_tf.text.tokenizer import Tokenizer
    from electra_tf.training.finetuning import initial_discriminator
    from studies.real_data.probe_features import mean_cosine, pack_ids

    disc, vocab = initial_discriminator(FinetuningConfig(),
                                        FinetuningRun(init_checkpoint=checkpoint))
    ids, mask = pack_ids(Tokenizer(vocab), texts, length)
    out = disc({"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)})
    states = np.asarray(out["sequence_output"])
    return {"token_cosine": round(mean_cosine(states[mask.astype(bool)]), 4),
            "cls_cosine": round(mean_cosine(states[:, 0]), 4)}


def main(argv):
    del argv
    from concurrent.futures import ThreadPoolExecutor

    from electra_tf.core.errors import InputError
    from studies.real_data.ledger import Ledger

    s = study.settings("cpu")
    p = study.paths(FLAGS.work_dir, s)
    if not os.path.exists(p["vocab"]):
        raise SystemExit(f"error: {p['vocab']} not found: run the study's --stage=prepare first")
    steps = sorted(int(x) for x in FLAGS.steps.split(","))
    tasks = [t for t in FLAGS.tasks.split(",") if t]
    early = os.path.join(p["runs"], "early", *([FLAGS.variant] if FLAGS.variant else []))
    if FLAGS.pretrain_flag and not FLAGS.variant:
        raise SystemExit("error: --pretrain_flag needs --variant (a folder name of its own, "
                         "so that its runs are not taken for the recipe's)")
    try:
        seeds = sorted(study.parse_seeds(FLAGS.finetune_seeds, "--finetune_seeds"))
    except InputError as e:
        raise SystemExit(f"error: {e}") from None
    model_dir = os.path.join(early, f"electra_s{FLAGS.seed}")
    curve = pretrain(s, p, model_dir, steps)
    with open(os.path.join(p["tasks"], "mr", "dev.tsv"), encoding="utf-8") as f:
        texts = [line.rsplit("\t", 1)[0] for line in f.read().splitlines()[1:33]]
    ledger = Ledger(os.path.join(early, "results.jsonl"),
                    study.settings_id(s, study.vocab_size_of(p["vocab"])))
    rows = {n: dict(step=n, **curve.get(n, {}),
                    **token_cosine(study.checkpoint_path(model_dir, n), texts)) for n in steps}
    for n in steps:
        study.log(f"step {n}: {rows[n]}")
    runs = [dict(objective="electra", pretrain_seed=FLAGS.seed, step=n, flops=0, fraction=0.5,
                 task=t, finetune_seed=fs, init=model_dir,
                 dir=os.path.join(early, "finetune", f"step{n}", f"{t}_f{fs}"))
            for fs in seeds for n in steps for t in tasks]
    sizes = {}
    for t in tasks:
        with open(os.path.join(p["tasks"], t, "meta.json")) as f:
            sizes[t] = json.load(f)["dev_size"]

    def one(r):
        res = study.finetune_one(s, p, r, sizes[r["task"]], ledger, threads=1)
        study.log(f"step {r['step']} {r['task']} seed {r['finetune_seed']}: "
                  f"{res.get('dev_accuracy', res)}")
        return r, res

    for n in steps:
        rows[n]["dev_accuracy"] = {t: {} for t in tasks}
    with ThreadPoolExecutor(max_workers=FLAGS.finetune_workers) as pool:
        for r, res in pool.map(one, runs):
            rows[r["step"]]["dev_accuracy"][r["task"]][r["finetune_seed"]] = res.get("dev_accuracy")
    # step 0 is the study's `none` of this seed (the same initialization: the
    # pre-training run starts from it), with the same fine-tuning seeds, if the study ran them
    study_ledger = Ledger(FLAGS.study_ledger, ledger.sid)
    zero = {t: {fs: (study_ledger.finetune(dict(objective="none", pretrain_seed=FLAGS.seed,
                                                step=0, task=t, finetune_seed=fs)) or {}
                     ).get("dev_accuracy") for fs in seeds} for t in tasks}
    if any(v is not None for accs in zero.values() for v in accs.values()):
        steps = [0] + steps
        rows[0] = dict(step=0, dev_accuracy=zero,
                       **token_cosine(study.none_dir(p, FLAGS.seed), texts))
    command = "python -m studies.real_data.early_points " + " ".join(sys.argv[1:])
    result = {"command": command, "date": time.strftime("%Y-%m-%d", time.gmtime()),
              "machine": f"{study.cpu_model()}, {os.cpu_count()} CPU cores",
              "finetune_seeds": seeds, "rows": [summarize(rows[n], tasks) for n in steps]}
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output)), exist_ok=True)
    with open(FLAGS.output + ".json", "w") as f:
        json.dump(result, f, indent=1)
    print(markdown(result, tasks))


def summarize(row: dict, tasks: list[str]) -> dict:
    """A table row: each task's dev accuracy as the mean over its fine-tuning seeds (the
    seeds' own values kept under "dev_accuracy"), and the mean over tasks once every task
    has every seed."""
    out = dict(row)
    means = []
    for t in tasks:
        accs = list(row["dev_accuracy"].get(t, {}).values())
        out[t] = (sum(accs) / len(accs)) if accs and None not in accs else None
        means.append(out[t])
    out["mean"] = None if None in means else sum(means) / len(means)
    return out


def markdown(result: dict, tasks: list[str]) -> str:
    seeds = result["finetune_seeds"]
    rows = result["rows"]
    base = next((r["mean"] for r in rows if r["step"] == 0), None)
    lines = [f"Command: `{result['command']}` ({result['date']}, {result['machine']}). Step 0 "
             "is the study's `none` (the initialization these runs start from). Dev accuracy "
             "after 10 epochs, " + (f"fine-tuning seed {seeds[0]}" if len(seeds) == 1 else
                                    "the mean over fine-tuning seeds "
                                    + ", ".join(map(str, seeds)))
             + "; \"- none\": the mean over tasks minus step 0's, in points; cosines: mean "
             "pairwise cosine of the final token states (real positions) and of the [CLS] "
             "states of 32 mr dev sentences; the generator's accuracy and the AUC are the "
             "training log's mean over the --log_every_steps steps ending at that step "
             "(50 in the study), not the value at that step.", "",
             "| step | generator MLM acc (train) | disc AUC (train) | token cosine | [CLS] cosine | "
             + " | ".join(tasks) + " | mean | - none |",
             "|---:|---:|---:|---:|---:|" + "---:|" * (len(tasks) + 2)]

    def fmt(value) -> str:
        return "" if value is None else f"{value:.3f}"

    for r in rows:
        gap = ("" if base is None or r["mean"] is None or r["step"] == 0
               else f"{100 * (r['mean'] - base):+.1f}")
        lines.append(f"| {r['step']} | " + " | ".join(fmt(r.get(k)) for k in (
            "mlm_acc", "disc_auc", "token_cosine", "cls_cosine", *tasks, "mean"))
            + f" | {gap} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    app.run(main)
