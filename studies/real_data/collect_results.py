r"""The real-data study's results in one file: studies/real_data/results.jsonl.

Run from the repository root after a script of the study has written a record
under studies/real_data/results/:

    python -m studies.real_data.collect_results
    python -m studies.real_data.collect_results --tables   # FINDINGS.md's tables

Reads the records the study's scripts wrote (the sources, kept as written):

  results/study/ledger.jsonl   study.py: every pre-training run and fine-tuning result
  results/early_points*.json   early_points.py: a run's checkpoints (a variant of the
                               CPU recipe: --variant, --pretrain_flag), fine-tuned
  results/transplant_*.json    transplant.py: `none` with one part of a donor's weights
  results/probe_features.json  probe_features.py: logistic regressions on frozen states

and writes one JSON line per evaluated model (a pre-training checkpoint, a
random initialization, a transplant), every source's measurements of that
model merged into it:

  experiment      "study", "early_points", "transplant" or "baseline"
  variant         study: the objective (none, bert_mlm, electra); early_points:
                  --variant ("recipe" without one); transplant: the part put in;
                  baseline: bag_of_pieces or majority
  settings        what the variant changes: early_points, its --pretrain_flag
                  flags over the recipe (studies/real_data/real_data_cpu.flags),
                  {"learning_rate": "5e-4", "prior_output_biases": true, ...};
                  study, the objective; transplant, donor, base and part
  pretrain_seed, step, tflops (the study's analytic pre-training FLOPs / 1e12;
                  null where no source records them)
  dev_accuracy    {task: {fine-tuning seed: dev accuracy}} after the study's
                  fine-tuning command (study.finetune_command: 10 epochs of the
                  1,200-example train caps, lr 3e-4, layer-wise decay 0.8)
  measurements    mlm_acc, disc_auc (the training log's 50-step window ending at
                  the step); token_cosine, cls_cosine (mean pairwise cosine of the
                  final token / [CLS] states of 32 mr dev sentences); cosines (the
                  token cosine after the embeddings and each layer); heldout_eval
                  (the run's final held-out evaluation); probe ({task: {"layerN/cls"
                  or "layerN/mean": dev accuracy}}, or {task: accuracy} for a
                  baseline)
  sources         the files the row comes from

A value two sources give for the same model must agree (an early_points step 0
is the study's `none`, as are transplant's and probe_features' `none`); the
collector stops with an error naming both otherwise.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
RESULTS = os.path.join(HERE, "results")
OUTPUT = os.path.join(HERE, "results.jsonl")
LEDGER = os.path.join(RESULTS, "study", "ledger.jsonl")
TASKS = ("trec6", "mr", "vader_sst2")
EXPERIMENTS = ("study", "early_points", "transplant", "baseline")
OBJECTIVES = ("none", "bert_mlm", "electra")
_CKPT = re.compile(r"^cpu/early/electra_s(\d+)/checkpoints/ckpt-(\d+)$")
_PRETRAIN_DIR = re.compile(r"^cpu/pretrain/(\w+?)_s(\d+)$")


def _rel(path: str) -> str:
    return os.path.relpath(path, REPO_ROOT).replace(os.sep, "/")


def _flags(command: str) -> dict:
    """{name: value} of a recorded command's --flags (a repeated flag: a list)."""
    out: dict = {}
    for arg in shlex.split(command):
        if not arg.startswith("--"):
            continue
        name, has_value, value = arg[2:].partition("=")
        value = value if has_value else True
        if name in out:
            out[name] = (out[name] if isinstance(out[name], list) else [out[name]]) + [value]
        else:
            out[name] = value
    return out


def _pretrain_flags(flags: dict) -> dict:
    """early_points' --pretrain_flag values as {name: value} (a bare flag: true)."""
    given = flags.get("pretrain_flag", [])
    out = {}
    for arg in given if isinstance(given, list) else [given]:
        name, has_value, value = arg.lstrip("-").partition("=")
        out[name] = value if has_value else True
    return out


class Rows:
    """Rows by (experiment, variant, pretrain_seed, step), merged with conflict checks."""

    def __init__(self):
        self.rows: dict[tuple, dict] = {}

    def get(self, experiment: str, variant: str, pretrain_seed, step, settings=None) -> dict:
        key = (experiment, variant, pretrain_seed, step)
        if key not in self.rows:
            self.rows[key] = {"experiment": experiment, "variant": variant,
                              "settings": dict(settings or {}), "pretrain_seed": pretrain_seed,
                              "step": step, "tflops": None, "dev_accuracy": {},
                              "measurements": {}, "sources": []}
        row = self.rows[key]
        if settings and row["settings"] != settings:
            raise ValueError(f"{key}: settings {settings} against {row['settings']}")
        return row

    @staticmethod
    def _set(row: dict, where: dict, key: str, value, source: str, what: str) -> None:
        if where.get(key) is not None and where[key] != value:
            raise ValueError(f"{row['experiment']}/{row['variant']} seed {row['pretrain_seed']} "
                             f"step {row['step']}: {what} {key} is {value!r} in {source} and "
                             f"{where[key]!r} in {', '.join(row['sources'])}")
        where[key] = value

    def add(self, row: dict, source: str, accuracy: dict | None = None,
            measurements: dict | None = None, tflops: float | None = None) -> None:
        """accuracy: {task: {fine-tuning seed: accuracy}}."""
        for task, seeds in (accuracy or {}).items():
            per_seed = row["dev_accuracy"].setdefault(task, {})
            for seed, value in seeds.items():
                self._set(row, per_seed, str(seed), value, source, f"{task} dev accuracy, seed")
        for name, value in (measurements or {}).items():
            if value is not None:
                self._set(row, row["measurements"], name, value, source, "measurement")
        if tflops is not None:
            self._set(row, row, "tflops", tflops, source, "value")
        if source not in row["sources"]:
            row["sources"].append(source)

    def sorted(self) -> list[dict]:
        def order(row):
            variant = (OBJECTIVES.index(row["variant"]) if row["experiment"] == "study"
                       else 0, row["variant"])
            return (EXPERIMENTS.index(row["experiment"]), variant, row["pretrain_seed"] or 0,
                    row["step"] or 0)

        out = []
        for row in sorted(self.rows.values(), key=order):
            row["dev_accuracy"] = {t: dict(sorted(s.items(), key=lambda kv: int(kv[0])))
                                   for t, s in sorted(row["dev_accuracy"].items(),
                                                      key=lambda kv: TASKS.index(kv[0]))}
            out.append(row)
        return out


def _study_row(rows: Rows, objective: str, seed: int, step: int) -> dict:
    return rows.get("study", objective, seed, step, {"objective": objective})


def read_ledger(rows: Rows, path: str, final_steps: dict) -> None:
    """The study's results (one settings id: the report's). final_steps gets
    {objective: steps of its full-budget run}."""
    source = _rel(path)
    with open(path, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    ids = {r["settings_id"] for r in records}
    if len(ids) != 1:
        raise ValueError(f"{source}: results of {len(ids)} settings ({sorted(ids)}); "
                         "collect_results reads one study")
    for r in records:
        if r["kind"] == "pretrain":
            final_steps[r["objective"]] = r["steps"]
            row = _study_row(rows, r["objective"], r["seed"], r["steps"])
            rows.add(row, source, measurements={"heldout_eval": r["final_eval"]},
                     tflops=r["budget_flops"] / 1e12)
        else:
            row = _study_row(rows, r["objective"], r["pretrain_seed"], r["step"])
            rows.add(row, source, accuracy={r["task"]: {r["finetune_seed"]: r["dev_accuracy"]}},
                     tflops=r["flops"] / 1e12)


def read_early_points(rows: Rows, path: str) -> None:
    source = _rel(path)
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    flags = _flags(record["command"])
    variant = flags.get("variant", "recipe")
    settings = {k: _number(v) for k, v in _pretrain_flags(flags).items()}
    seed = int(flags.get("seed", 0))
    for r in record["rows"]:
        if "dev_accuracy" in r:  # {task: {seed: accuracy}}
            accuracy = r["dev_accuracy"]
        else:  # the first records: one fine-tuning seed, 0, each task's value in the row
            accuracy = {t: {0: r[t]} for t in TASKS if t in r}
        measurements = {k: r.get(k) for k in ("mlm_acc", "disc_auc", "token_cosine",
                                              "cls_cosine")}
        if r["step"] == 0:  # the study's `none` of this seed, which the run starts from
            row = _study_row(rows, "none", seed, 0)
        else:
            row = rows.get("early_points", variant, seed, r["step"], settings)
        rows.add(row, source, accuracy, measurements)


def _number(value):
    """A flag's recorded text as a number where it is one ("5e-4" -> 0.0005)."""
    if isinstance(value, str):
        for kind in (int, float):
            try:
                return kind(value)
            except ValueError:
                pass
    return value


def read_transplant(rows: Rows, path: str, final_steps: dict) -> None:
    source = _rel(path)
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    flags = _flags(record["command"])
    seed, donor = int(flags.get("seed", 0)), flags.get("donor", "electra")
    for part, r in record["rows"].items():
        accuracy = {t: dict(zip(record["finetune_seeds"], r[t])) for t in TASKS if t in r}
        if part == "none":
            row = _study_row(rows, "none", seed, 0)
        else:
            row = rows.get("transplant", part, seed, None,
                           {"base": f"none_s{seed}", "donor": f"{donor}_s{seed}",
                            "donor_step": final_steps.get(donor), "part": part})
        rows.add(row, source, accuracy, {"cosines": r["cosines"]})


def read_probe_features(rows: Rows, path: str, final_steps: dict) -> None:
    source = _rel(path)
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    for name, model in record["models"].items():
        probe: dict = {}
        for key, value in model["scores"].items():
            task, _, where = key.partition("/")
            probe.setdefault(task, {})[where] = value
        ckpt, run = _CKPT.match(model["path"]), _PRETRAIN_DIR.match(model["path"])
        if ckpt:
            row = rows.get("early_points", "recipe", int(ckpt.group(1)), int(ckpt.group(2)), {})
        elif run and run.group(1) in OBJECTIVES:
            objective = run.group(1)
            row = _study_row(rows, objective, int(run.group(2)),
                             0 if objective == "none" else final_steps[objective])
        else:
            raise ValueError(f"{source}: no row for the model at {model['path']!r}")
        rows.add(row, source, measurements={"probe": probe})
    for baseline in ("bag_of_pieces", "majority"):
        rows.add(rows.get("baseline", baseline, None, None), source,
                 measurements={"probe": record[baseline]})


def collect(results_dir: str = RESULTS) -> list[dict]:
    """The rows of results.jsonl, from the records under results_dir."""
    rows, final_steps = Rows(), {}
    read_ledger(rows, os.path.join(results_dir, "study", "ledger.jsonl"), final_steps)
    for path in sorted(glob.glob(os.path.join(results_dir, "early_points*.json"))):
        read_early_points(rows, path)
    for path in sorted(glob.glob(os.path.join(results_dir, "transplant_*.json"))):
        read_transplant(rows, path, final_steps)
    probe = os.path.join(results_dir, "probe_features.json")
    if os.path.exists(probe):
        read_probe_features(rows, probe, final_steps)
    return rows.sorted()


LABELS = {"none": "random initialization (`none`)", "bert_mlm": "BERT-MLM", "electra": "ELECTRA"}


def final_table(rows: list[dict]) -> str:
    """The study's comparison at the full budget as Markdown (FINDINGS.md carries it):
    dev accuracy per task and over tasks, mean ± std over every (pre-training seed,
    fine-tuning seed) run, and the differences with their standard error over the
    pre-training seeds (study.aggregate and study.difference, as the study's report)."""
    from studies.real_data import study

    flat, final = [], {}
    for r in rows:
        if r["experiment"] != "study":
            continue
        final[r["variant"]] = max(final.get(r["variant"], 0), r["step"])
        for task, seeds in r["dev_accuracy"].items():
            flat += [{"objective": r["variant"], "pretrain_seed": r["pretrain_seed"],
                      "step": r["step"], "flops": round(r["tflops"] * 1e12), "task": task,
                      "finetune_seed": int(fs), "dev_accuracy": acc} for fs, acc in seeds.items()]
    agg = study.aggregate(flat, TASKS)
    cells = {o: agg[(o, final[o])] for o in OBJECTIVES}

    def fmt(ms):
        return f"{100 * ms[0]:.1f} ± {100 * ms[1]:.1f}"

    runs = {o: c["mean"][2] for o, c in cells.items()}
    lines = [f"| dev accuracy (%), mean ± std over {min(runs.values())} runs | pre-training | "
             + " | ".join(TASKS) + " | mean over tasks |",
             "|---|---|" + "---:|" * (len(TASKS) + 1)]
    for o in OBJECTIVES:
        budget = ("none" if o == "none" else
                  f"{final[o]:,} steps, {cells[o]['flops'] / 1e12:.1f} TFLOP")
        lines.append(f"| {LABELS[o]} | {budget} | "
                     + " | ".join(fmt(cells[o]["tasks"][t]) for t in TASKS)
                     + f" | {fmt(cells[o]['mean'])} |")
    lines += ["", "| difference of the means over tasks | points | standard error "
              "(pre-training seeds) |", "|---|---:|---:|"]
    for a, b in (("electra", "none"), ("electra", "bert_mlm"), ("bert_mlm", "none")):
        d, se = study.difference(cells[a], cells[b])
        lines.append(f"| {LABELS[a].split(' (')[0]} - {LABELS[b].split(' (')[0]} | "
                     f"{100 * d:+.2f} | {100 * se:.2f} |")
    return "\n".join(lines) + "\n"


def variants_table(rows: list[dict]) -> str:
    """Every variant's last checkpoint beside the study's seed-0 runs, as Markdown
    (FINDINGS.md carries it): dev accuracy per task, the mean over tasks, and its
    difference from the study's `none` of the same pre-training seed with the same
    fine-tuning seeds, in points."""
    study = {(r["variant"], r["pretrain_seed"]): r for r in rows
             if r["experiment"] == "study" and r["variant"] != "none"
             and len(r["dev_accuracy"].get(TASKS[0], {})) > 1}  # the full-budget points
    none = {r["pretrain_seed"]: r for r in rows
            if r["experiment"] == "study" and r["variant"] == "none"}
    last: dict = {}
    for r in rows:
        if r["experiment"] == "early_points" and r["variant"] != "recipe" and all(
                t in r["dev_accuracy"] for t in TASKS):
            if r["step"] > last.get(r["variant"], {"step": -1})["step"]:
                last[r["variant"]] = r
    picked = [("study: " + o, study[(o, 0)]) for o in ("electra", "bert_mlm")]
    picked += sorted(last.items())

    def mean(values):
        return sum(values) / len(values)

    lines = ["| run | step | fine-tuning seeds | " + " | ".join(TASKS)
             + " | mean | - none (points) |", "|---|---:|---|" + "---:|" * (len(TASKS) + 2)]
    for name, r in picked:
        seeds = sorted(set.intersection(*(set(r["dev_accuracy"][t]) for t in TASKS)), key=int)
        if name.startswith("study") and len(seeds) > 1:
            seeds = seeds[:1]  # seed 0, as the variants (their 3-seed rows come on their own)
        acc = {t: mean([r["dev_accuracy"][t][s] for s in seeds]) for t in TASKS}
        base = {t: mean([none[r["pretrain_seed"]]["dev_accuracy"][t][s] for s in seeds])
                for t in TASKS}
        m, b = mean(list(acc.values())), mean(list(base.values()))
        lines.append(f"| {name} | {r['step']:,} | {', '.join(seeds)} | "
                     + " | ".join(f"{100 * acc[t]:.1f}" for t in TASKS)
                     + f" | {100 * m:.1f} | {100 * (m - b):+.1f} |")
    return "\n".join(lines) + "\n"


def dumps(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def read(path: str = OUTPUT) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main(argv: list[str]) -> int:
    from electra_tf.core.fileio import atomic_write_text

    if argv[1:] == ["--tables"]:  # FINDINGS.md's two tables, from results.jsonl
        print(final_table(read()) + "\n" + variants_table(read()), end="")
        return 0
    rows = collect()
    atomic_write_text(OUTPUT, dumps(rows))
    print(f"{len(rows)} rows -> {_rel(OUTPUT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
