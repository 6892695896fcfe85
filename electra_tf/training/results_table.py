"""The original README's results table, filled from fine-tuned folders.

google-research/electra's README ("Expected Results") gives, per released model,
the median over many fine-tuning seeds of: CoLA MCC, SST accuracy, MRPC
accuracy, STS Spearman, QQP, MNLI, QNLI and RTE accuracy, SQuAD 1.1 and 2.0 EM
(dev sets) and chunking F1 (the test set). `results_table` reads fine-tuning
folders (results.json: the final evaluation) and trial groups (trials.json of
`run_finetuning --num_trials`: each trial's final evaluation), takes the median
over a task's trials, scales it as the README does (x 100, SQuAD already in
percent) and puts it in the README's layout, with the README's rows of the
same model size beside it (`EXPECTED`; Small also beside ELECTRA-Small-OWT, the
README's OpenWebText model).
"""

from __future__ import annotations

import dataclasses
import os
import statistics

from electra_tf.core.config import model_size_of
from electra_tf.core.errors import InputError
from electra_tf.core.words import count
from electra_tf.folders.files import FINETUNED_WEIGHTS, RESULTS, trials_path, what_it_holds
from electra_tf.folders.finetuned import (
    final_results,
    has_finetuning_config,
    is_finetuning_folder,
    read_results,
    recorded_task,
    recorded_without_evaluation,
)
from electra_tf.training import trials

# (column, the README's metric name, task, dev split, metric key, scale to the README's)
COLUMNS = (
    ("CoLA", "MCC", "cola", "dev", "mcc", 100.0),
    ("SST", "Acc", "sst2", "dev", "accuracy", 100.0),
    ("MRPC", "Acc", "mrpc", "dev", "accuracy", 100.0),
    ("STS", "Spearman", "stsb", "dev", "spearman", 100.0),
    ("QQP", "Acc", "qqp", "dev", "accuracy", 100.0),
    ("MNLI", "Acc", "mnli", "dev_matched", "accuracy", 100.0),
    ("QNLI", "Acc", "qnli", "dev", "accuracy", 100.0),
    ("RTE", "Acc", "rte", "dev", "accuracy", 100.0),
    ("SQuAD 1.1", "EM", "squad_v1", "dev", "exact", 1.0),
    ("SQuAD 2.0", "EM", "squad_v2", "dev", "exact", 1.0),
    ("Chunking", "F1", "chunking", "dev", "f1", 100.0),
)

# The README's "Expected Results" (google-research/electra, README.md): medians over
# many seeds; test set for chunking, dev sets for the others. None: "--".
EXPECTED = {
    "ELECTRA-Large": ("large", (69.1, 96.9, 90.8, 92.6, 92.4, 90.9, 95.0, 88.0, 89.7, 88.1,
                                97.2)),
    "ELECTRA-Base": ("base", (67.7, 95.1, 89.5, 91.2, 91.5, 88.8, 93.2, 82.7, 86.8, 80.5,
                              97.1)),
    "ELECTRA-Small": ("small", (57.0, 91.2, 88.0, 87.5, 89.0, 81.3, 88.4, 66.7, 75.8, 70.1,
                                96.5)),
    "ELECTRA-Small-OWT": ("small", (56.8, 88.3, 87.4, 86.8, 88.3, 78.9, 87.9, 68.5, None,
                                    None, None)),
}


@dataclasses.dataclass(frozen=True)
class TaskResult:
    """One task's results of one folder: each trial's value of its column's metric."""

    folder: str
    task: str
    model_size: str
    values: tuple[float, ...]  # in the README's scale, one per trial
    dropped: int = 0  # trials whose value is not a finite number, or diverged (left out)
    unfinished: int = 0  # trials the group's --num_trials asked for that have not run
    trials: tuple[int, ...] = ()  # a group's: the trial each value is of; a run's: ()
    why: str = ""  # no value to put in the table: why (listed below it)

    @property
    def median(self) -> float:
        return statistics.median(self.values)


def _column(task: str):
    return next((c for c in COLUMNS if c[2] == task), None)


def _value(folder: str, task: str, final: dict) -> float | None:
    """The column's metric in the README's scale; None where it is not a finite number
    (left out of the median, as trials.summarize leaves it out)."""
    _, _, _, split, key, scale = _column(task)
    try:
        value = final[split][key]
    except (KeyError, TypeError):
        raise InputError(f"{folder}: its final {task} results lack {split} {key}") from None
    if value is None:  # a score that was not a number, written as null
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{folder}: its final {task} {split} {key} is {value!r}, not a number")
    number = trials.finite_number(value)
    if number is None:
        return None
    low = -1.0 if key in ("mcc", "spearman") else 0.0  # a correlation; else a rate
    # (x 100 had overflowed 1e308 to inf); float noise past a bound is no error
    if not low * scale - 1e-6 <= number * scale <= 100.0 + 1e-6:
        raise InputError(f"{folder}: its final {task} {split} {key} is {value!r}, outside "
                         f"the metric's range [{low * scale / 100:g}, {1 / scale * 100:g}]")
    return number * scale


def _no_value(values, diverged: int = 0) -> str:
    """Why none of `values` (None: not a finite number) can go in the table ("" where one
    can): the folder is listed below the table with it (it had stopped the whole table)."""
    if any(v is not None for v in values):
        return ""
    n = len(values)
    if diverged == n:
        return f"{count(n, 'trial')} diverged" if n > 1 else "its training diverged"
    return ("no finite score (" + ", ".join(
        ([f"{diverged} diverged"] if diverged else [])
        + [f"{n - diverged} not a number"]) + ")") if n > 1 else "its score is not a number"


def read_folder(folder: str) -> TaskResult | None:
    """A fine-tuning folder's or a trial group's result for its task (None: a task the
    README's table has no column for).

    Raises:
      InputError: neither kind of folder, or results without the column's metric.
    """
    folder = os.path.normpath(folder)
    if trials.is_trial_group(folder):
        record = trials.read_trials(folder)
        task = record["task"]
        if _column(task) is None:
            return None
        done = record["trials"]
        requested = record.get("num_trials") or 0  # (None: an older file, not recorded)
        if not done:  # a group stopped in its first trial: listed below the table
            return TaskResult(folder, task, "", (), unfinished=requested)
        sizes = {t.get("model_size", "") for t in done}
        if record["settings"].get("do_eval") is False:  # trials with no results to read
            return TaskResult(folder, task, "", (), dropped=len(done),
                              unfinished=max(0, requested - len(done)),
                              why="trained with --do_eval=false: no dev scores recorded")
        # a diverged trial: no value (dropped); a bad score names its trial and the file
        each = [None if t.get("diverged") else _value(
            f"{trials_path(folder)}, trial {t['trial']}", task, t["results"])
                for t in done]
        values = tuple(v for v in each if v is not None)
        return TaskResult(folder, task, sizes.pop() if len(sizes) == 1 else "custom", values,
                          dropped=len(done) - len(values),
                          unfinished=max(0, requested - len(done)),
                          trials=tuple(t["trial"] for t, v in zip(done, each) if v is not None),
                          why=_no_value(each, sum(bool(t.get("diverged")) for t in done)))
    finished = is_finetuning_folder(folder)
    stopped = not finished and has_finetuning_config(folder)  # before it saved its model
    if not finished and not stopped:
        if not os.path.exists(folder):
            raise InputError(f"{folder} not found")
        raise InputError(f"{folder} is neither a fine-tuning folder (finetuning_config.json, "
                         f"{FINETUNED_WEIGHTS}) nor a trial group ({trials.TRIALS})"
                         + what_it_holds(folder))
    task, encoder = recorded_task(folder)
    if _column(task) is None:
        return None
    if stopped:  # named below the table (it had stopped the whole table, status 2); its
        # results.json, if any, is of an epoch before the last
        return TaskResult(folder, task, model_size_of(encoder), (),
                          why=f"its run has not finished (no {FINETUNED_WEIGHTS} yet): rerun "
                              "its command to resume and finish it")
    results = read_results(folder)
    if not results:  # named below the table, as a group with no trial finished
        return TaskResult(folder, task, model_size_of(encoder), (),
                          why="trained with --do_eval=false: no dev scores recorded"
                          if recorded_without_evaluation(folder) else
                          f"no {RESULTS} yet: a fine-tuning run writes it at its first "
                          "evaluation")
    value = _value(folder, task, final_results(results))
    return TaskResult(folder, task, model_size_of(encoder), () if value is None else (value,),
                      dropped=int(value is None), why=_no_value([value]))


def results_table(folders) -> dict:
    """The table as data: {"columns": [...], "rows": [...], "skipped": [...],
    "pending": [...], "unscored": [...]}.

    A row per model size of the folders ("yours"), each cell the median over its task's
    trials with n, then the README's rows of that size. Folders of a task without a
    column (wnli, ner, your own data) are listed under "skipped", trial groups none of
    whose trials has finished yet under "pending" ({"folder", "task", "unfinished"}),
    and folders with no finite score of their column's metric (every trial diverged
    or scored NaN, a group trained without evaluation) under "unscored" ({"folder",
    "task", "why"}).

    Raises:
      InputError: a folder that is neither kind, or given twice, or two folders of one
        task and size.
    """
    by_size: dict[str, dict[str, TaskResult]] = {}
    skipped, pending, unscored = [], [], []
    for folder in folders:
        result = read_folder(folder)
        if result is None:
            skipped.append(os.path.normpath(folder))
            continue
        if result.why:
            unscored.append({"folder": result.folder, "task": result.task, "why": result.why})
            continue
        if not result.values and not result.dropped:  # no trial finished yet
            pending.append({"folder": result.folder, "task": result.task,
                            "unfinished": result.unfinished})
            continue
        cells = by_size.setdefault(result.model_size, {})
        if result.task in cells:
            if os.path.realpath(cells[result.task].folder) == os.path.realpath(result.folder):
                raise InputError(f"{result.folder} is given twice; give each folder once")
            raise InputError(f"{cells[result.task].folder} and {result.folder} both hold "
                             f"{result.task} results of a {result.model_size} model; give one "
                             "(a trial group holds several seeds)")
        cells[result.task] = result
    rows = []
    for size, cells in by_size.items():
        rows.append({"model": f"yours ({size})", "model_size": size, "source": "yours",
                     "cells": [None if c[2] not in cells else {
                         # 6 decimals: the float noise of the scaling (0.6 * 100) goes,
                         # and the Markdown's one decimal, rounded from this, is the
                         # median's own (2 decimals first had shown 67.148 as 67.2)
                         "median": round(cells[c[2]].median, 6), "n": len(cells[c[2]].values),
                         "dropped": cells[c[2]].dropped,
                         "unfinished": cells[c[2]].unfinished,
                         "values": [round(v, 6) for v in cells[c[2]].values],
                         # a group's: the trial of each value ([] for a single run)
                         "trials": list(cells[c[2]].trials),
                         "folder": cells[c[2]].folder} for c in COLUMNS]})
        for name, (expected_size, values) in EXPECTED.items():
            if expected_size == size:
                rows.append({"model": name, "model_size": size,
                             "source": "google-research/electra README",
                             "cells": [None if v is None else {"median": v} for v in values]})
    columns = [{"name": c[0], "metric": c[1], "task": c[2], "split": c[3], "key": c[4]}
               for c in COLUMNS]
    return {"columns": columns, "rows": rows, "skipped": skipped, "pending": pending,
            "unscored": unscored}


def markdown(table: dict) -> str:
    """The README's layout: a header row, the metrics row, then the models' rows."""
    names = [c["name"] for c in table["columns"]]
    lines = ["|  | " + " | ".join(names) + " |",
             "| --- |" + " --- |" * len(names),
             "| Metrics | " + " | ".join(c["metric"] for c in table["columns"]) + " |"]
    for row in table["rows"]:
        cells = []
        for cell in row["cells"]:
            if cell is None:
                cells.append("--")
                continue
            # trials left out or not run yet: never a bare single value
            asides = ([f"{cell['dropped']} left out"] if cell.get("dropped") else []) + (
                [f"{cell['unfinished']} not run"] if cell.get("unfinished") else [])
            if asides or cell.get("n", 1) > 1:
                cells.append(f"{cell['median']:.1f} (" + "; ".join([f"n={cell['n']}"] + asides)
                             + ")")
            else:
                cells.append(f"{cell['median']:.1f}")
        lines.append(f"| {row['model']} | " + " | ".join(cells) + " |")
    notes = ["", "Yours: the median over each task's trials (n: how many), dev sets; the "
             "README's: medians over many seeds, dev sets except chunking (test set)."
             if table["rows"] else
             # (an empty table had explained the rows it did not show)
             "No run here has a column: the table's are the original README's tasks, and "
             "its released models' rows come beside runs of their size."]
    if any(cell and cell.get("unfinished") for row in table["rows"] for cell in row["cells"]):
        notes.append("Not run: trials a group's --num_trials asked for that it has not "
                     "finished (its command, run again, goes on with them).")
    if table.get("pending"):
        notes.append("No trial finished yet (its command, run again, goes on): " + ", ".join(
            f"{p['folder']} ({p['task']}"
            + (f", {p['unfinished']} not run)" if p["unfinished"] else ")")
            for p in table["pending"]))
    if table.get("unscored"):
        notes.append("No score to put in the table: " + ", ".join(
            f"{u['folder']} ({u['task']}: {u['why']})" for u in table["unscored"]))
    if table["skipped"]:
        notes.append("Not in the table (no column for their task): "
                     + ", ".join(table["skipped"]))
    return "\n".join(lines + notes) + "\n"
