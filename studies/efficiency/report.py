"""The efficiency study's outputs: runs/*.json -> results.csv, results.md, results.png.

One run is one (objective, seed): its pre-training curve and final eval,
and its accuracy on each probe. results.csv has one row per objective x seed
x probe (with probe_dev_size); results.md gives, per objective, the mean ±
sample standard deviation over seeds of each probe's dev accuracy; results.png
the learning curves and the bars. Only the plot needs matplotlib (the
`studies` extra: pip install -e ".[studies]"); without it the CSV and the
table are still written.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import statistics
import sys

PAPER_GLUE = {"electra": 85.0, "all_tokens_mlm": 84.3, "replace_mlm": 82.4,
              "electra_15": 82.4, "bert_mlm": 82.2}
CSV_KEYS = ("study", "objective", "seed", "probe", "probe_accuracy", "probe_dev_size",
            "probe_train_size", "majority_baseline", "status", "masked_lm_accuracy",
            "disc_auc", "final_loss", "pretrain_steps", "tokens_seen", "pretrain_seconds",
            "probe_seconds")


def read_runs(output_dir: str) -> list[dict]:
    runs = []
    for path in sorted(glob.glob(os.path.join(output_dir, "runs", "*.json"))):
        with open(path, encoding="utf-8") as f:
            runs.append(json.load(f))
    return runs


def csv_rows(runs: list[dict]) -> list[dict]:
    rows = []
    for run in runs:
        final = run.get("final_eval", {})
        curve = run.get("curve", [])
        base = {"study": run["study"], "objective": run["objective"], "seed": run["seed"],
                "status": run["status"], "masked_lm_accuracy": final.get("masked_lm_accuracy"),
                "disc_auc": final.get("disc_auc"),
                "final_loss": curve[-1]["loss"] if curve else None,
                "pretrain_steps": run.get("pretrain_steps"), "tokens_seen": run.get("tokens_seen"),
                "pretrain_seconds": run.get("pretrain_seconds")}
        for probe, result in sorted(run.get("probes", {}).items()):
            rows.append({**base, "probe": probe, "probe_accuracy": result["accuracy"],
                         "probe_dev_size": result["dev_size"],
                         "probe_train_size": result["train_size"],
                         "majority_baseline": result["majority_baseline"],
                         "probe_seconds": result["seconds"]})
        if not run.get("probes"):
            rows.append({**base, "probe": ""})
    return rows


def mean_std(values: list[float]) -> tuple[float, float]:
    if not values:
        return float("nan"), float("nan")
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def _fmt(values: list[float]) -> str:
    if not values:
        return "-"
    mean, std = mean_std(values)
    return f"{mean:.3f} ± {std:.3f}" if len(values) > 1 else f"{mean:.3f}"


def summary(runs: list[dict]) -> dict:
    """{objective: {probe: [accuracy per seed], "_mean": [mean over probes per seed], ...}}."""
    out: dict[str, dict] = {}
    for run in runs:
        if run["status"] != "ok":
            continue
        entry = out.setdefault(run["objective"], {"_mean": [], "_mlm": [], "_auc": [],
                                                  "_seconds": []})
        accs = []
        for probe, result in run["probes"].items():
            entry.setdefault(probe, []).append(result["accuracy"])
            accs.append(result["accuracy"])
        entry["_mean"].append(statistics.fmean(accs))
        final = run.get("final_eval", {})
        for key, name in (("_mlm", "masked_lm_accuracy"), ("_auc", "disc_auc")):
            if name in final:
                entry[key].append(final[name])
        entry["_seconds"].append(run.get("pretrain_seconds", 0.0))
    return out


def markdown(runs: list[dict], probes_meta: dict, header: list[str]) -> str:
    table = summary(runs)
    probes = sorted(probes_meta)
    lines = header + ["", "Probes (held-out documents; dev accuracy after fine-tuning):", ""]
    lines += ["| probe | train | dev (probe_dev_size) | majority-class baseline |",
              "|---|---|---|---|"]
    for p in probes:
        m = probes_meta[p]
        lines.append(f"| {p} | {m['train_size']} | {m['dev_size']} | "
                     f"{m['majority_baseline']:.3f} |")
    lines += ["", "Mean ± sample standard deviation over seeds "
              f"(n = {max((len(v['_mean']) for v in table.values()), default=0)}):", "",
              "| objective | " + " | ".join(probes) + " | mean of probes | G/MLM masked-LM acc "
              "| disc AUC | pre-training s | paper GLUE (Table 5) |",
              "|---|" + "---|" * (len(probes) + 5)]
    for objective in sorted(table, key=lambda o: -statistics.fmean(table[o]["_mean"])):
        e = table[objective]
        cells = [_fmt(e.get(p, [])) for p in probes] + [_fmt(e["_mean"]), _fmt(e["_mlm"]),
                                                         _fmt(e["_auc"])]
        seconds = statistics.fmean(e["_seconds"]) if e["_seconds"] else 0.0
        lines.append(f"| {objective} | " + " | ".join(cells) +
                     f" | {seconds:.0f} | {PAPER_GLUE.get(objective, '-')} |")
    if "electra" in table and "bert_mlm" in table:
        lines += ["", "ELECTRA minus BERT-MLM (mean over seeds; the seeds' std of each beside):"]
        for p in probes + ["_mean"]:
            a, b = table["electra"].get(p, []), table["bert_mlm"].get(p, [])
            if a and b:
                (ma, sa), (mb, sb) = mean_std(a), mean_std(b)
                verdict = "beyond" if abs(ma - mb) > sa + sb else "within"
                lines.append(f"- {p.strip('_') if p != '_mean' else 'mean of probes'}: "
                             f"{ma - mb:+.3f} (std {sa:.3f} / {sb:.3f}: {verdict} the sum of "
                             "the spreads)")
    failed = [r for r in runs if r["status"] != "ok"]
    if failed:
        lines += ["", "Runs that did not complete (nothing of theirs is in the table):"]
        lines += [f"- {r['objective']} seed {r['seed']}: {r['status']}: {r.get('error', '')}"
                  for r in failed]
    return "\n".join(lines) + "\n"


def plot(runs: list[dict], probes_meta: dict, path: str, title: str) -> bool:
    """Writes the learning curves and the probes' bars to `path`; False without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        print(f"[report] {os.path.basename(path)} not written: matplotlib is not installed "
              "(pip install -e \".[studies]\")", file=sys.stderr, flush=True)
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = summary(runs)
    probes = sorted(probes_meta)
    objectives = sorted(table)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    colors = dict(zip(objectives, plt.rcParams["axes.prop_cycle"].by_key()["color"] * 3))
    for run in runs:
        curve = run.get("curve", [])
        if run["status"] == "ok" and curve:
            left.plot([c["step"] for c in curve], [c["loss"] for c in curve],
                      color=colors.get(run["objective"], "gray"), alpha=0.8,
                      label=run["objective"] if run["seed"] == min(
                          r["seed"] for r in runs if r["objective"] == run["objective"]) else None)
    left.set_yscale("log")
    left.set_xlabel("pre-training step")
    left.set_ylabel("training loss (objective's own; log)")
    left.set_title("learning curves (one line per seed)")
    if left.get_legend_handles_labels()[0]:  # random_init alone has no curve
        left.legend(fontsize=8)
    width = 0.8 / max(1, len(objectives))
    for i, objective in enumerate(objectives):
        stats = [mean_std(table[objective].get(p, [])) for p in probes]
        xs = [j + i * width for j in range(len(probes))]
        right.bar(xs, [s[0] for s in stats], width, yerr=[s[1] for s in stats],
                  color=colors[objective], label=objective, capsize=2)
    for j, p in enumerate(probes):
        right.hlines(probes_meta[p]["majority_baseline"], j - width / 2,
                     j + width * (len(objectives) - 0.5), colors="black", linestyles="dotted")
    right.set_xticks([j + width * (len(objectives) - 1) / 2 for j in range(len(probes))])
    right.set_xticklabels([f"{p}\n(dev {probes_meta[p]['dev_size']})" for p in probes])
    right.set_ylabel("probe dev accuracy (mean ± std; dotted: majority)")
    right.set_ylim(0.0, 1.0)
    right.legend(fontsize=8, ncol=2)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def write_report(output_dir: str, probes_meta: dict, header: list[str], title: str) -> list[dict]:
    """Writes results.csv, results.md and results.png from output_dir/runs/*.json.

    Returns the runs read.
    """
    runs = read_runs(output_dir)
    with open(os.path.join(output_dir, "results.csv"), "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, CSV_KEYS)
        writer.writeheader()
        writer.writerows(csv_rows(runs))
    with open(os.path.join(output_dir, "results.md"), "w", encoding="utf-8") as f:
        f.write(markdown(runs, probes_meta, header))
    plot(runs, probes_meta, os.path.join(output_dir, "results.png"), title)
    return runs
