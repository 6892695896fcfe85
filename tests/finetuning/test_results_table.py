"""The results table (training/results_table.py, electra_tf.results_table): the original
README's layout from fine-tuning folders and trial groups, the README's rows beside."""

import json
import os
import re

import pytest
from helpers import error_line, run_module

from electra_tf.core.config import MODEL_SIZES, EncoderConfig, FinetuningConfig, FinetuningRun
from electra_tf.core.errors import InputError
from electra_tf.folders import files, finetuned
from electra_tf.tasks.registry import get_task
from electra_tf.training import trials
from electra_tf.training.results_table import markdown, results_table


def finetuned_folder(path, task_name, final, vocab, size="small", epochs=2):
    """A fine-tuning folder as run_finetuning leaves it (the weights file a stand-in)."""
    path.mkdir()
    encoder = EncoderConfig(**MODEL_SIZES[size], vocab_size=len(open(vocab).readlines()))
    finetuned.write_finetuning_config(
        str(path), task=get_task(task_name), config=FinetuningConfig(task_name=task_name),
        run=FinetuningRun(model_dir=str(path)), encoder=encoder, model_size=size,
        max_seq_length=128, vocab_file=vocab)
    (path / files.FINETUNED_WEIGHTS).write_bytes(b"")
    results = {f"epoch_{e}": {"dev": {}} for e in range(1, epochs)}
    results[f"epoch_{epochs}"] = final
    finetuned.write_results(str(path), results)
    return str(path)


def trial_group(path, task_name, finals, size="small", num_trials=1):
    config = FinetuningConfig(task_name=task_name)
    group = trials.TrialGroup(str(path), task_name, config,
                              FinetuningRun(model_dir=str(path), num_trials=num_trials))
    for k, final in enumerate(finals, 1):
        group.add(k, k - 1, f"{path}_{k}", final, size)
    return str(path)


@pytest.fixture
def folders(tmp_path, tiny_vocab):
    return [
        trial_group(tmp_path / "cola", "cola", [{"dev": {"mcc": v}} for v in (0.5, 0.6, 0.55)]),
        finetuned_folder(tmp_path / "squad", "squad_v1", {"dev": {"exact": 70.12, "f1": 80.0}},
                         tiny_vocab),
        trial_group(tmp_path / "mnli", "mnli", [
            {"dev_matched": {"accuracy": a}, "dev_mismatched": {"accuracy": 0.1}}
            for a in (0.8, 0.81)]),
        finetuned_folder(tmp_path / "ner", "ner", {"dev": {"f1": 0.9}}, tiny_vocab),
    ]


def test_the_readmes_layout_with_the_released_small_models_beside(folders, tmp_path):
    table = results_table(folders)
    lines = markdown(table).splitlines()
    assert lines[0] == ("|  | CoLA | SST | MRPC | STS | QQP | MNLI | QNLI | RTE | SQuAD 1.1 | "
                        "SQuAD 2.0 | Chunking |")
    assert lines[2] == ("| Metrics | MCC | Acc | Acc | Spearman | Acc | Acc | Acc | Acc | EM | "
                        "EM | F1 |")
    assert lines[3] == ("| yours (small) | 55.0 (n=3) | -- | -- | -- | -- | 80.5 (n=2) | -- | "
                        "-- | 70.1 | -- | -- |")
    assert lines[4] == ("| ELECTRA-Small | 57.0 | 91.2 | 88.0 | 87.5 | 89.0 | 81.3 | 88.4 | "
                        "66.7 | 75.8 | 70.1 | 96.5 |")
    assert lines[5].startswith("| ELECTRA-Small-OWT | 56.8 | 88.3 |") and lines[5].endswith(
        "| -- | -- | -- |")
    assert len([x for x in lines if x.startswith("| ")]) == 6  # no Base or Large rows
    assert f"Not in the table (no column for their task): {tmp_path}/ner" in lines[-1]
    mine = table["rows"][0]["cells"]
    assert mine[0] == {"median": 55.0, "n": 3, "dropped": 0, "unfinished": 0,
                       "values": [50.0, 60.0, 55.0], "trials": [1, 2, 3],
                       "folder": f"{tmp_path}/cola"}
    assert json.loads(json.dumps(table)) == table


def test_a_cell_is_its_median_rounded_once(tmp_path):
    """RTE's 186 of 277 right (67.148%) had shown as 67.2: the median rounded to 2
    decimals, then to 1."""
    group = trial_group(tmp_path / "rte", "rte", [{"dev": {"accuracy": 186 / 277}}])
    table = results_table([group])
    assert table["rows"][0]["cells"][7]["median"] == pytest.approx(67.148014, abs=1e-6)
    assert "| 67.1 |" in markdown(table)


def test_each_size_gets_its_own_row_and_one_task_twice_is_refused(folders, tmp_path, tiny_vocab):
    base = finetuned_folder(tmp_path / "rte_base", "rte", {"dev": {"accuracy": 0.7}},
                            tiny_vocab, size="base")
    table = results_table([*folders, base])
    assert [r["model"] for r in table["rows"]] == [
        "yours (small)", "ELECTRA-Small", "ELECTRA-Small-OWT", "yours (base)", "ELECTRA-Base"]
    assert table["rows"][3]["cells"][7]["median"] == 70.0
    again = trial_group(tmp_path / "cola_again", "cola", [{"dev": {"mcc": 0.1}}])
    with pytest.raises(InputError, match="cola and .*cola_again both hold cola results"):
        results_table([*folders, again])
    with pytest.raises(InputError, match=f"^{base} is given twice; give each folder once$"):
        results_table([base, base + "/"])  # (it had said "base and base both hold ...")
    with pytest.raises(InputError, match="is neither a fine-tuning folder"):
        results_table([str(tmp_path)])
    # a run not finished (a group's first trial, cut short before the group wrote
    # trials.json): named below the table, as a single run stopped early is
    running = tmp_path / "rte_1"
    (running / "checkpoints").mkdir(parents=True)
    (running / "checkpoints" / "ckpt-3.index").write_bytes(b"")
    (running / "finetuning_config.json").write_bytes(
        (tmp_path / "squad" / "finetuning_config.json").read_bytes())
    assert results_table([str(running)])["unscored"][0]["why"].startswith(
        "its run has not finished (no finetuned.weights.h5 yet)")
    with pytest.raises(InputError, match=r"missing not found$"):
        results_table([str(tmp_path / "missing")])
    broken = trial_group(tmp_path / "sst2", "sst2", [{"dev": {"f1": 0.1}}])
    with pytest.raises(InputError, match="its final sst2 results lack dev accuracy"):
        results_table([broken])


@pytest.mark.slow
def test_the_command_prints_markdown_or_json_and_writes_the_file(folders, tmp_path):
    proc = run_module("electra_tf.results_table", *folders)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == markdown(results_table(folders))
    out = tmp_path / "table.json"
    proc = run_module("electra_tf.results_table", "--format=json", f"--output={out}", *folders)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == json.loads(out.read_text()) == results_table(folders)
    error_line(run_module("electra_tf.results_table", str(tmp_path / "missing")),
               f"{tmp_path / 'missing'} not found")
    proc = run_module("electra_tf.results_table", f"--output={tmp_path}", *folders)
    error_line(proc, f"--output {tmp_path} is a folder")  # before the table is printed
    assert proc.stdout == ""


def test_the_command_reads_the_folders_without_tensorflow(folders):
    """A fine-tuning folder's record was read with its head's class, which imported
    Keras and TensorFlow: seconds for a table of a few numbers."""
    from helpers import run_module_reporting_tf

    proc, tf_imported = run_module_reporting_tf("electra_tf.results_table", *folders)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith(markdown(results_table(folders)))  # (then the report)
    assert not tf_imported


def test_an_output_that_is_a_given_folders_own_file_is_refused(folders, tmp_path, monkeypatch):
    """--output=GROUP/trials.json had replaced the group's record with the table."""
    from electra_tf.results_table import _check_not_a_folder_file

    for folder in folders:
        for name in ("trials.json", "results.json"):
            target = os.path.join(folder + "/", ".", name)
            with pytest.raises(InputError, match=rf"--output .* is .*'s own {name}; write "
                                                 "the table elsewhere"):
                _check_not_a_folder_file(target, folders)
    _check_not_a_folder_file(os.path.join(folders[0], "table.md"), folders)
    _check_not_a_folder_file(str(tmp_path / "results.json"), folders)
    # the results.json of a folder not given: a group's trial folder (GROUP_1), had been
    # replaced with the table
    trial = tmp_path / "group_1"
    trial.mkdir()
    (trial / "finetuning_config.json").write_text("{}")
    with pytest.raises(InputError, match=re.escape(
            f"--output {trial}/results.json is the results.json of {trial}, a folder "
            "electra_tf wrote; write the table elsewhere")):
        _check_not_a_folder_file(str(trial / "results.json"), folders)
    # named as the user names it: relative to the current directory (it printed the
    # absolute path where the docs, and the sibling line, show GROUP_1)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=re.escape(
            "--output group_1/results.json is the results.json of group_1, a folder "
            "electra_tf wrote; write the table elsewhere")):
        _check_not_a_folder_file("group_1/results.json", folders)
    monkeypatch.chdir(trial)
    with pytest.raises(InputError, match=re.escape(
            "--output results.json is the results.json of the current directory, a folder")):
        _check_not_a_folder_file("results.json", folders)
    monkeypatch.chdir(tmp_path)
    # any other file of such a folder (its predictions, its checkpoints/ files); a table
    # an earlier run wrote there is rewritten
    for existing in (trial / "rte_dev_predictions.txt", trial / "checkpoints" / "checkpoint",
                     os.path.join(folders[0], "checkpoints", "ckpt-1.index")):
        os.makedirs(os.path.dirname(existing), exist_ok=True)
        with open(existing, "w") as f:
            f.write("kept\n")
        with pytest.raises(InputError, match=r"--output .* is a file of .*, a folder "
                                             r"electra_tf wrote \(not a table this command "
                                             r"wrote\); write the table elsewhere"):
            _check_not_a_folder_file(str(existing), folders)
    # a folder of records: its pretrain_data_stats.json (it had been replaced), a shard
    records = tmp_path / "records"
    records.mkdir()
    for name in ("pretrain_data_stats.json", "pretrain_data.tfrecord-00000-of-00001"):
        (records / name).write_text("{}")
        with pytest.raises(InputError, match=r"is a file of .*records, a folder electra_tf"):
            _check_not_a_folder_file(str(records / name), folders)
    # any other file holding something: a task's dev file had been replaced, silently;
    # an empty file (made by mktemp) may be written
    data = tmp_path / "glue_data" / "RTE"
    data.mkdir(parents=True)
    (data / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n")
    with pytest.raises(InputError, match=re.escape(
            f"--output {data / 'dev.tsv'} holds something other than a table this command "
            "wrote; remove it first, or write the table elsewhere")):
        _check_not_a_folder_file(str(data / "dev.tsv"), folders)
    (data / "empty.md").write_text("")
    _check_not_a_folder_file(str(data / "empty.md"), folders)
    table = os.path.join(folders[0], "table.md")
    with open(table, "w") as f:
        f.write(markdown(results_table(folders)))
    _check_not_a_folder_file(table, folders)
    before = {f: sorted(os.listdir(f)) for f in folders}
    proc = run_module("electra_tf.results_table",
                      f"--output={os.path.join(folders[0], 'results.json')}", *folders)
    error_line(proc, "write the table elsewhere")
    assert {f: sorted(os.listdir(f)) for f in folders} == before


def _trials_file(path, trials_value):
    path.mkdir()
    if isinstance(trials_value, list):  # each trial's number and seed, as a run writes them
        trials_value = [{"trial": i + 1, "seed": i, **t} if isinstance(t, dict) else t
                        for i, t in enumerate(trials_value)]
    files.write_json(str(path / trials.TRIALS),
                     {"task": "cola", "settings": {}, "trials": trials_value})
    return str(path)


@pytest.mark.parametrize("trials_value, message", [
    (5, "trials is not a list"),
    ([1], r"trials\[0\] is not an object"),
    ([{"model_size": "small"}], "trial 1 has no results object"),
    ([{"model_size": ["x"], "results": {}}], "trial 1's model_size is not a string"),
    ([{"results": {}, "diverged": True}], "trial 1's diverged is not a string"),
    ([{"results": {"dev": {"mcc": "high"}}}], "trial 1's dev mcc is 'high', not a number or "
                                              "null; not a file electra_tf wrote"),
    ([{"results": {"dev": {"mcc": 10 ** 400}}}], "trial 1's dev mcc is 1000"),  # OverflowError
    # a finite score outside its metric's range (x 100 had made 1e308 inf, and the JSON
    # table printed Infinity)
    ([{"results": {"dev": {"mcc": 1e308}}}],  # (the trial and the file named: it had said
     # only the group's folder)
     r"group/trials.json, trial 1: its final cola dev mcc is 1e\+308, outside the metric's "
     r"range \[-1, 1\]$"),
    ([{"results": {"dev": {"mcc": -1.5}}}], r"mcc is -1.5, outside the metric's range"),
])
def test_a_damaged_trials_file_is_one_clear_error(tmp_path, trials_value, message):
    with pytest.raises(InputError, match=message):
        results_table([_trials_file(tmp_path / "group", trials_value)])


def test_non_finite_trials_are_left_out_of_the_median_and_a_folder_without_results_named(
        tmp_path, tiny_vocab):
    diverged = {"results": {}, "diverged": "the training loss became nan in step 3; ..."}
    group = _trials_file(tmp_path / "group", [{"results": {"dev": {"mcc": v}}}
                                              for v in (0.5, float("nan"), 0.7, None)]
                         + [diverged])
    table = results_table([group])
    cell = table["rows"][0]["cells"][0]
    assert (cell["median"], cell["n"], cell["values"]) == (60.0, 2, [50.0, 70.0])
    assert cell["trials"] == [1, 3]  # which trial each value is of (the others left out)
    assert cell["dropped"] == 3  # NaN, null (as a non-number is written now), diverged
    assert "| 60.0 (n=2; 3 left out) |" in markdown(table)
    summary = trials.summarize([{"dev": {"mcc": v}} for v in (0.5, 10 ** 400, True, 0.7)])
    assert summary["dev"]["mcc"]["n"] == 2  # a float's overflow had raised
    folder = finetuned_folder(tmp_path / "rte", "rte", {"dev": {"accuracy": 0.7}}, tiny_vocab)
    (tmp_path / "rte" / files.RESULTS).unlink()
    # named below the table, the other folders' cells printed (it had stopped the table)
    assert results_table([folder])["unscored"] == [{
        "folder": folder, "task": "rte",
        "why": "no results.json yet: a fine-tuning run writes it at its first evaluation"}]
    finetuned.write_results(folder, {"epoch_x": {}, "epoch_2": {"dev": {"accuracy": 0.5}}})
    assert results_table([folder])["rows"][0]["cells"][7]["median"] == 50.0
    # A run stopped before its end (no final weights; results of an earlier epoch, or
    # none): named below the table, the others printed (it had stopped the whole table,
    # "neither a fine-tuning folder ... nor a trial group")
    stopped = finetuned_folder(tmp_path / "mrpc", "mrpc", {"dev": {"accuracy": 0.6}}, tiny_vocab)
    (tmp_path / "mrpc" / files.FINETUNED_WEIGHTS).unlink()
    table = results_table([folder, stopped])
    assert table["rows"][0]["cells"][7]["median"] == 50.0
    assert table["unscored"] == [{
        "folder": stopped, "task": "mrpc",
        "why": "its run has not finished (no finetuned.weights.h5 yet): rerun its command "
               "to resume and finish it"}]
    (tmp_path / "mrpc" / files.RESULTS).unlink()
    assert results_table([stopped])["unscored"][0]["why"].startswith("its run has not finished")
    # A finished run trained with --do_eval=false will write no results.json (it had been
    # told one was coming)
    config_path = tmp_path / "rte" / files.FINETUNING_CONFIG
    record = json.loads(config_path.read_text())
    record["run"]["do_eval"] = False
    config_path.write_text(json.dumps(record))
    (tmp_path / "rte" / files.RESULTS).unlink()
    assert results_table([folder])["unscored"][0]["why"] == (
        "trained with --do_eval=false: no dev scores recorded")


def test_a_folder_without_a_finite_score_is_named_below_the_table(tmp_path, tiny_vocab):
    """A group whose every trial diverged or scored NaN, a group trained without
    evaluation and a run whose score is null had each stopped the whole table (status 2,
    no other folder's cell printed); each is named below it, with why."""
    diverged = {"results": {}, "diverged": "the training loss became nan in step 3"}
    groups = [_trials_file(tmp_path / "all_diverged", [diverged, diverged]),
              _trials_file(tmp_path / "one_diverged", [diverged]),
              _trials_file(tmp_path / "nan", [{"results": {"dev": {"mcc": float("nan")}}},
                                              diverged])]
    no_eval = tmp_path / "no_eval"
    no_eval.mkdir()
    files.write_json(str(no_eval / trials.TRIALS), {
        "task": "cola", "settings": {"do_eval": False}, "num_trials": 3,
        "trials": [{"trial": 1, "seed": 0, "results": {}}]})
    single = finetuned_folder(tmp_path / "stsb", "stsb", {"dev": {"spearman": None}},
                              tiny_vocab)
    scored = finetuned_folder(tmp_path / "rte", "rte", {"dev": {"accuracy": 0.7}}, tiny_vocab)
    table = results_table([*groups, str(no_eval), single, scored])
    assert [(os.path.basename(u["folder"]), u["task"], u["why"]) for u in table["unscored"]] == [
        ("all_diverged", "cola", "2 trials diverged"),
        ("one_diverged", "cola", "its training diverged"),
        ("nan", "cola", "no finite score (1 diverged, 1 not a number)"),
        ("no_eval", "cola", "trained with --do_eval=false: no dev scores recorded"),
        ("stsb", "stsb", "its score is not a number")]
    assert table["rows"][0]["cells"][7]["median"] == 70.0  # the other folder's cell
    text = markdown(table)
    assert f"No score to put in the table: {groups[0]} (cola: 2 trials diverged), " in text
    assert "| 70.0 |" in text


def test_a_table_without_a_run_of_its_tasks_says_so(tmp_path, tiny_vocab):
    """An NER run alone: no row, and the note under the table says why (it had explained
    the README's rows, which were not there)."""
    ner = finetuned_folder(tmp_path / "ner", "ner", {"dev": {"f1": 0.9}}, tiny_vocab)
    text = markdown(results_table([ner]))
    assert "Yours:" not in text
    assert ("No run here has a column: the table's are the original README's tasks, and its "
            "released models' rows come beside runs of their size.") in text
    assert f"Not in the table (no column for their task): {ner}" in text


def test_a_group_cut_short_says_how_many_trials_have_not_run(tmp_path):
    """trials.json had not recorded --num_trials: a group of 5 stopped by a fault after
    2 trials showed as a finished-looking "(n=2)"."""
    short = trial_group(tmp_path / "rte", "rte", [{"dev": {"accuracy": a}} for a in (0.6, 0.7)],
                        num_trials=5)
    one = trial_group(tmp_path / "cola", "cola", [{"dev": {"mcc": 0.5}}], num_trials=2)
    table = results_table([short, one])
    cells = table["rows"][0]["cells"]
    assert (cells[7]["n"], cells[7]["unfinished"], cells[0]["unfinished"]) == (2, 3, 1)
    text = markdown(table)
    assert "| 50.0 (n=1; 1 not run) |" in text and "| 65.0 (n=2; 3 not run) |" in text
    assert "Not run: trials a group's --num_trials asked for" in text
    done = trial_group(tmp_path / "sst", "sst2", [{"dev": {"accuracy": 0.9}}] * 2, num_trials=2)
    assert "not run" not in markdown(results_table([done]))
    # a file written before num_trials was recorded: nothing known, nothing said
    record = json.loads((tmp_path / "sst" / trials.TRIALS).read_text())
    del record["num_trials"]
    (tmp_path / "sst" / trials.TRIALS).write_text(json.dumps(record))
    assert results_table([done])["rows"][0]["cells"][1]["unfinished"] == 0


def test_a_group_with_no_trial_finished_is_named_below_the_table(tmp_path):
    """A group stopped in its first trial had no trials.json (results_table: "not found"
    or "neither kind", and the other folders' table failed with it): its record is
    written before the first trial trains, and the table lists it as pending."""
    config = FinetuningConfig(task_name="rte")
    group = trials.TrialGroup(str(tmp_path / "rte"), "rte", config,
                              FinetuningRun(model_dir=str(tmp_path / "rte"), num_trials=3))
    group.write()
    cola = trial_group(tmp_path / "cola", "cola", [{"dev": {"mcc": 0.5}}])
    table = results_table([str(tmp_path / "rte"), cola])
    assert table["pending"] == [{"folder": str(tmp_path / "rte"), "task": "rte",
                                 "unfinished": 3}]
    assert [row["model"] for row in table["rows"]][0] == "yours (small)"
    assert table["rows"][0]["cells"][7] is None  # no RTE cell
    text = markdown(table)
    assert (f"No trial finished yet (its command, run again, goes on): {tmp_path / 'rte'} "
            "(rte, 3 not run)") in text
    assert "| 50.0 |" in text


def test_float_noise_past_a_metrics_bound_is_no_error():
    """A correlation of 1.0000000000000002 (float rounding) is 100.0 in the table; 1.01 is
    refused (test_a_damaged_trials_file_is_one_clear_error)."""
    from electra_tf.training.results_table import _value

    assert round(_value("F", "cola", {"dev": {"mcc": 1.0000000000000002}}), 6) == 100.0
    assert round(_value("F", "squad_v1", {"dev": {"exact": 100.00000000001}}), 6) == 100.0
