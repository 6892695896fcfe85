"""--num_trials (training/trials.py): N seeds in MODEL_DIR_1 .. MODEL_DIR_N, every trial's
results and their summary in MODEL_DIR/trials.json, finished trials skipped, an
interrupted one resumed."""

import dataclasses
import json
import os
import re
import shutil
import signal
import statistics
import subprocess

import pytest
from helpers import REPO, finetuning_from_flags, patience, popen_python, run_module

from electra_tf.core.config import FinetuningConfig, FinetuningRun
from electra_tf.core.errors import ConfigError, Diverged, InputError
from electra_tf.training import trials
from electra_tf.training.finetuning import Finetuning
from electra_tf.training.loop import Interrupted


def test_summary_per_split_and_metric_for_each_head_kind():
    glue = [{"dev": {"accuracy": a, "f1": f}} for a, f in ((0.8, 0.7), (0.9, 0.75), (0.6, 0.7))]
    s = trials.summarize(glue)["dev"]["accuracy"]
    assert s == {"median": 0.8, "mean": pytest.approx(statistics.fmean([0.8, 0.9, 0.6])),
                 "std": pytest.approx(statistics.stdev([0.8, 0.9, 0.6])), "min": 0.6,
                 "max": 0.9, "n": 3}
    squad = [{"dev": {"exact_match": 70.0, "f1": 80.0, "best_f1_thresh": -1.0}},
             {"dev": {"exact_match": 72.0, "f1": 81.0, "best_f1_thresh": float("nan")}}]
    s = trials.summarize(squad)["dev"]
    assert s["exact_match"]["median"] == 71.0 and s["best_f1_thresh"]["n"] == 1  # nan left out
    mnli = [{"dev_matched": {"accuracy": 0.5}, "dev_mismatched": {"accuracy": 0.6}}] * 2
    s = trials.summarize(mnli)
    assert set(s) == {"dev_matched", "dev_mismatched"} and s["dev_matched"]["accuracy"]["std"] == 0
    tagging = [{"dev": {"f1": 0.9, "precision": 0.8, "token_accuracy": 0.97}}]
    # one trial: no spread (it printed `std 0.0000 (n=1)`; trials.json holds null)
    assert trials.summarize(tagging)["dev"]["f1"]["std"] is None
    lines = trials.summary_lines("ner", trials.summarize(tagging))
    assert lines[0] == "ner dev f1: 0.9000 (n=1: one trial, no spread)"
    from electra_tf.core.words import count

    assert count(1, "trial") == "1 trial" and count(10, "trial") == "10 trials"


class FakeTrainer:
    """Stands for a backend's Finetuning: its folder, and an accuracy from its seed."""

    def __init__(self, config, run, interrupt=False):
        self.config, self.run, self.interrupt = config, run, interrupt

    def train(self):
        os.makedirs(self.run.model_dir, exist_ok=True)
        if self.interrupt:
            raise Interrupted(3)
        with open(os.path.join(self.run.model_dir, "SST-2.tsv"), "w") as f:
            f.write(f"index\tprediction\n0\t{self.config.seed}\n")
        return {"epoch_1": {"dev": {"accuracy": 0.1}},
                "epoch_2": {"dev": {"accuracy": 0.5 + self.config.seed / 10}}}

    def prediction_files(self):
        return [os.path.join(self.run.model_dir, "SST-2.tsv")]


@pytest.fixture(autouse=True)
def no_model_to_free(request, monkeypatch):
    """The fake trainers build no model: no garbage collection between their trials (a
    full one takes seconds in a test process that has run many tests)."""
    if "pretrained_dir" not in request.fixturenames:
        monkeypatch.setattr(trials, "free_models", lambda: None)


def fake_runs(tmp_path, n, **run):
    config = FinetuningConfig(task_name="sst2", seed=7)
    return config, FinetuningRun(model_dir=str(tmp_path / "out"), data_dir="d",
                               init_checkpoint="c", num_trials=n, **run)


def test_finished_trials_are_skipped_and_an_interrupted_one_is_rerun(tmp_path, capsys):
    config, run = fake_runs(tmp_path, 3)
    made = []

    def make(interrupt_seed=None):
        def make_trainer(c, r):
            made.append((c.seed, r.model_dir, r.num_trials))
            return FakeTrainer(c, r, interrupt=c.seed == interrupt_seed)
        return make_trainer

    with pytest.raises(Interrupted):  # Ctrl-C in trial 2
        trials.run_trials(config, run, "sst2", make(interrupt_seed=8), Finetuning.final_results)
    out = str(tmp_path / "out")
    assert made == [(7, out + "_1", 1), (8, out + "_2", 1)]
    record = trials.read_trials(out)
    assert [t["trial"] for t in record["trials"]] == [1]  # trial 1 was recorded
    made.clear()
    # a kill as trials.json was written had left its temporary file in the group's folder
    (tmp_path / "out" / ".tmp-abc123").write_text("{")
    summary = trials.run_trials(config, run, "sst2", make(), Finetuning.final_results)
    assert not (tmp_path / "out" / ".tmp-abc123").exists()
    assert made == [(8, out + "_2", 1), (9, out + "_3", 1)]  # trial 1 skipped, 2 rerun
    err = capsys.readouterr().err
    assert "[finetune] removed .tmp-abc123, left by a write that did not finish" in err
    assert f"trial 1/3 (seed 7, {out}_1): finished, skipped" in err
    assert "folder is missing" not in err
    assert summary["dev"]["accuracy"]["median"] == pytest.approx(1.3)
    assert summary["dev"]["accuracy"]["n"] == 3
    assert "sst2 dev accuracy: median 1.3000, mean 1.3000" in err
    record = trials.read_trials(out)
    assert [(t["seed"], t["results"]) for t in record["trials"]] == [
        (7, {"dev": {"accuracy": pytest.approx(1.2)}}),
        (8, {"dev": {"accuracy": pytest.approx(1.3)}}),
        (9, {"dev": {"accuracy": pytest.approx(1.4)}})]
    text = (tmp_path / "out" / "results.txt").read_text().splitlines()
    assert text[0] == "trial 1 (seed 7) sst2 dev: accuracy: 1.2000"
    # a finished trial's folder moved away since: skipped still, with a note (it had
    # been named as if it were there)
    shutil.rmtree(tmp_path / "out_1")
    trials.run_trials(config, run, "sst2", make(), Finetuning.final_results)
    assert f"trial 1/3 (seed 7, {out}_1): finished, skipped: {{'dev': {{'accuracy': 1.2}}}}" \
           "; note: its folder is missing (moved or removed since it trained)" in \
           capsys.readouterr().err.splitlines()[0]
    assert text[-1].startswith("sst2 dev accuracy: median 1.3000")
    # everything done: a rerun trains nothing; more trials add to the group
    assert f"[finetune] wrote {out}/trials.json and {out}/results.txt" in err
    made.clear()
    trials.run_trials(config, run, "sst2", make(), Finetuning.final_results)
    assert made == [] and "wrote" not in capsys.readouterr().err  # (it had said so)
    trials.run_trials(config, FinetuningRun(**{**run.__dict__, "num_trials": 4}), "sst2", make(),
                      Finetuning.final_results)
    assert made == [(10, out + "_4", 1)]
    assert trials.read_trials(out)["summary"]["dev"]["accuracy"]["n"] == 4


class NoPredictionsTrainer(FakeTrainer):
    """A trial trained without --do_predict."""

    def prediction_files(self):
        return []


def test_a_rerun_asking_predictions_of_finished_trials_says_it_makes_none(tmp_path, capsys):
    """A finished group run again with --do_predict added trains no trial, so predicts
    with none: said so, with the way to predict (it had ended as if it had predicted)."""
    config, run = fake_runs(tmp_path, 2)
    trials.run_trials(config, run, "sst2", NoPredictionsTrainer, Finetuning.final_results)
    capsys.readouterr()
    trials.run_trials(config, dataclasses.replace(run, do_predict=True, num_trials=3), "sst2",
                      FakeTrainer, Finetuning.final_results)  # trial 3 trains and predicts
    assert ("[finetune] note: trial 1, 2 had finished without --do_predict, which a "
            "finished trial is not trained again for: no test predictions were written for "
            "them; add --do_train=false (and --do_eval=false) to predict with each trained "
            "trial") in capsys.readouterr().err.splitlines()


def test_a_lower_num_trials_names_the_unfinished_trial_it_leaves(tmp_path, capsys):
    """Trial 3 stopped, then the group rerun with --num_trials=2: its folder is left as
    it is, and said so (it had been passed over without a word)."""
    config, run = fake_runs(tmp_path, 3)

    def make(c, r):
        return FakeTrainer(c, r, interrupt=c.seed == 9)

    with pytest.raises(Interrupted):
        trials.run_trials(config, run, "sst2", make, Finetuning.final_results)
    capsys.readouterr()
    trials.run_trials(config, dataclasses.replace(run, num_trials=2), "sst2", make,
                      Finetuning.final_results)
    out = tmp_path / "out"
    assert (f"[finetune] note: {out}_3 holds trial 3, not finished (past --num_trials=2: "
            "left as it is, and out of the summary; --num_trials=3 goes on with it, where it "
            "was trained with this group's settings)"
            ) in capsys.readouterr().err.splitlines()
    assert os.path.isdir(f"{out}_3")


def test_a_setting_an_older_group_did_not_record_is_compared_at_its_old_value():
    """A group recorded before --answerable_weight (or the windows' flags) was a flag
    trained at today's default: a rerun with another value is other settings (it had
    joined the group's median, and the group was then recorded at the new value)."""
    old = trials._settings(FinetuningConfig(task_name="squad_v2"), FinetuningRun(
        model_dir="m", init_checkpoint="", data_dir=""))
    for key in trials._FIXED_BEFORE:
        old.pop(key)
    new = trials._settings(FinetuningConfig(task_name="squad_v2", answerable_weight=7.0,
                                            doc_stride=64), FinetuningRun(
        model_dir="m", init_checkpoint="", data_dir=""))
    assert trials._changed(old, new) == ["answerable_weight 0.5 -> 7.0", "doc_stride 128 -> 64"]
    same = trials._settings(FinetuningConfig(task_name="squad_v2"), FinetuningRun(
        model_dir="m", init_checkpoint="", data_dir=""))
    assert trials._changed(old, same) == []


def test_a_group_of_other_settings_is_refused(tmp_path, capsys):
    config, run = fake_runs(tmp_path, 2)
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    other = FinetuningConfig(task_name="sst2", seed=7, learning_rate=3e-4)
    with pytest.raises(ConfigError, match=r"records trials of other settings \(learning_rate "
                                          r"0.0 -> 0.0003\)"):
        trials.run_trials(other, run, "sst2", FakeTrainer, Finetuning.final_results)
    with pytest.raises(ConfigError, match="seed 7 -> task sst2 seed 8"):
        trials.run_trials(FinetuningConfig(task_name="sst2", seed=8), run, "sst2", FakeTrainer,
                          Finetuning.final_results)
    # what changes no trial's results may change (fewer checkpoints kept to save disk,
    # another eval batch): had been refused as other settings
    trials.run_trials(FinetuningConfig(task_name="sst2", seed=7, keep_checkpoint_max=1,
                                       save_checkpoints_steps=50, eval_batch_size=8),
                      dataclasses.replace(run, num_trials=3), "sst2", FakeTrainer,
                      Finetuning.final_results)
    settings = trials.read_trials(str(tmp_path / "out"))["settings"]  # the latest run's
    assert (settings["eval_batch_size"], settings["save_checkpoints_steps"]) == (8, 50)
    # Another precision or compilation: allowed (a resumed single run's), recorded as the
    # latest run's and said (a group extended in fp32 had mixed bf16 and fp32 trials into
    # one median without a word)
    capsys.readouterr()
    trials.run_trials(config, dataclasses.replace(run, num_trials=4, mixed_precision="bf16",
                                                  jit_compile=True),
                      "sst2", FakeTrainer, Finetuning.final_results)
    assert (f"note: {tmp_path / 'out'}'s trials so far ran with --mixed_precision=fp32 "
            "--jit_compile=false; those this run trains, with --mixed_precision=bf16 "
            "--jit_compile=true: one median over both") in capsys.readouterr().err
    settings = trials.read_trials(str(tmp_path / "out"))["settings"]
    assert (settings["mixed_precision"], settings["jit_compile"]) == ("bf16", True)
    # run again once finished, in fp32: no trial trains, nothing said or recorded
    trials.run_trials(config, dataclasses.replace(run, num_trials=4), "sst2", FakeTrainer,
                      Finetuning.final_results)
    assert "one median over both" not in capsys.readouterr().err
    settings = trials.read_trials(str(tmp_path / "out"))["settings"]
    assert (settings["mixed_precision"], settings["jit_compile"]) == ("bf16", True)
    with pytest.raises(ConfigError, match="holds the trials.json of a --num_trials run: "
                                          "rerun it with --num_trials=4, or"):
        trials.check_single_run_folder(str(tmp_path / "out"))  # as --num_trials=1's folder
    trials.check_single_run_folder(str(tmp_path / "out_1"))
    single = tmp_path / "single"
    single.mkdir()
    (single / "finetuning_config.json").write_text("{}")
    with pytest.raises(InputError, match="is the folder of a single fine-tuning run"):
        trials.TrialGroup(str(single), "sst2", config, run)


def test_a_group_refused_at_its_first_trial_leaves_no_folder(tmp_path):
    """A trainer refusing the first trial (another vocabulary than the checkpoint's) had
    left an empty --model_dir behind its one line; an existing folder stays."""
    def refuse(config, run):
        raise ConfigError("--vocab_file=v holds other tokens")

    config, run = fake_runs(tmp_path, 2)
    for existed in (False, True):
        if existed:
            (tmp_path / "out").mkdir()
        with pytest.raises(ConfigError, match="holds other tokens"):
            trials.run_trials(config, run, "sst2", refuse, Finetuning.final_results)
        assert (tmp_path / "out").exists() == existed
        assert not (tmp_path / "out_1").exists()
        assert not existed or os.listdir(tmp_path / "out") == []  # its record went too


def test_a_results_txt_of_no_group_is_refused_and_kept(tmp_path):
    """A new group writes results.txt before trial 1, and removes it if trial 1 is
    refused: a results.txt already there (the original's run_finetuning writes one) had
    been replaced, then removed."""
    config, run = fake_runs(tmp_path, 2)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "results.txt").write_text("mine\n")
    with pytest.raises(InputError, match=r"--model_dir .*out holds a results.txt but no "
                                         r"trials.json: not a trial group's; move it"):
        trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    assert os.listdir(tmp_path / "out") == ["results.txt"]
    assert (tmp_path / "out" / "results.txt").read_text() == "mine\n"


def test_a_new_group_stopped_in_its_first_trial_keeps_its_record(tmp_path):
    """The record had been written with the first trial's results: a group stopped in
    it had none, and results_table could not name it (see test_results_table)."""
    config, run = fake_runs(tmp_path, 3)
    with pytest.raises(Interrupted):
        trials.run_trials(config, run, "sst2",
                          lambda c, r: FakeTrainer(c, r, interrupt=c.seed == 7),
                          Finetuning.final_results)
    record = trials.read_trials(str(tmp_path / "out"))
    assert (record["num_trials"], record["trials"]) == (3, [])
    summary = trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    assert summary["dev"]["accuracy"]["n"] == 3


def test_naming_the_default_a_group_took_is_no_other_setting(tmp_path):
    """A rerun passing the learning rate the first run's log printed (its size's default)
    had been refused as 'learning_rate 0.0 -> 0.0001'."""
    class Small(FakeTrainer):
        size = "small"

    config, run = fake_runs(tmp_path, 1)
    trials.run_trials(config, run, "sst2", Small, Finetuning.final_results)
    more = FinetuningRun(**{**run.__dict__, "num_trials": 2})
    same = FinetuningConfig(task_name="sst2", seed=7, learning_rate=1e-4,
                            layerwise_lr_decay=0.8)  # Small's defaults, named
    trials.run_trials(same, more, "sst2", Small, Finetuning.final_results)
    assert len(trials.read_trials(str(tmp_path / "out"))["trials"]) == 2
    other = FinetuningConfig(task_name="sst2", seed=7, learning_rate=3e-4)
    with pytest.raises(ConfigError, match=r"\(learning_rate 0.0001 -> 0.0003\)"):
        trials.run_trials(other, more, "sst2", Small, Finetuning.final_results)


def test_a_trial_folder_holding_other_files_is_refused_and_kept(tmp_path):
    """keep_all_models=False had trained in a folder of data named OUT_2, then deleted
    it; a trial folder that is the --data_dir is refused too."""
    config, run = fake_runs(tmp_path, 2, keep_all_models=False)
    (tmp_path / "out_2").mkdir()
    (tmp_path / "out_2" / "train.tsv").write_text("mine")
    with pytest.raises(InputError, match=r"trial folder .*out_2 already holds files that are "
                                         r"not a fine-tuning run's \(e.g. train.tsv\)"):
        trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    assert (tmp_path / "out_2" / "train.tsv").read_text() == "mine"
    assert not (tmp_path / "out_1").exists()  # refused before trial 1 trained
    config, run = fake_runs(tmp_path / "b", 1)
    (tmp_path / "b").mkdir()
    run = FinetuningRun(model_dir=str(tmp_path / "b" / "out"), num_trials=1,
                        data_dir=str(tmp_path / "b" / "out_1"), init_checkpoint="c")
    (tmp_path / "b" / "out_1").mkdir()
    with pytest.raises(InputError, match=r"trial folder .*out_1 is the --data_dir"):
        trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)


def test_a_single_run_in_a_trials_folder_is_refused_before_the_first_trial(tmp_path):
    """A run of another seed in OUT_3 had been met when the group reached trial 3, and
    refused as checkpoints of other settings to "resume with" (the group sets the seed);
    the group's own trial stopped there (its seed) resumes."""
    config, run = fake_runs(tmp_path, 3)
    from electra_tf.folders.files import write_json

    (tmp_path / "out_3").mkdir()
    record = str(tmp_path / "out_3" / "finetuning_config.json")
    write_json(record, {"finetuning": {"seed": 5}})  # (the field the check reads)
    with pytest.raises(InputError, match=r"trial folder .*out_3 holds a fine-tuning run of "
                                         r"--seed=5, not this group's \(its trial there has "
                                         r"seed 9\): another run's folder; move it"):
        trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    assert not (tmp_path / "out_1").exists()  # refused before trial 1 trained
    write_json(record, {"finetuning": {"seed": 9}})
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    assert len(trials.read_trials(str(tmp_path / "out"))["trials"]) == 3


def test_data_changed_in_place_is_refused_and_the_same_folder_otherwise_spelled_is_not(
        tmp_path):
    """Only the --data_dir string had been compared: labels edited in place went into
    the same median, and data/ against data was refused."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text("sentence\tlabel\na\t1\n")
    config = FinetuningConfig(task_name="sst2", seed=7)
    run = FinetuningRun(model_dir=str(tmp_path / "out"), data_dir=str(data),
                        init_checkpoint="c", num_trials=1)
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    again = FinetuningRun(model_dir=str(tmp_path / "out"), data_dir=str(data) + "/",
                          init_checkpoint="c", num_trials=2)
    trials.run_trials(config, again, "sst2", FakeTrainer, Finetuning.final_results)
    (data / "train.tsv").write_text("sentence\tlabel\na\t0\n")
    more = FinetuningRun(model_dir=str(tmp_path / "out"), data_dir=str(data),
                         init_checkpoint="c", num_trials=3)
    with pytest.raises(ConfigError, match=r"records trials of other settings \(the train or "
                                          r"dev files in --data_dir changed\)"):
        trials.run_trials(config, more, "sst2", FakeTrainer, Finetuning.final_results)
    assert len(trials.read_trials(str(tmp_path / "out"))["trials"]) == 2
    # a test split (or notes) added later changes no trial's results: it had been refused
    (data / "train.tsv").write_text("sentence\tlabel\na\t1\n")
    (data / "test.tsv").write_text("index\tsentence\n0\ta\n")
    (data / "README.txt").write_text("notes")
    trials.run_trials(config, more, "sst2", FakeTrainer, Finetuning.final_results)
    assert len(trials.read_trials(str(tmp_path / "out"))["trials"]) == 3
    # a group recorded by an earlier version (the sha256 of every file): paths compared
    path = tmp_path / "out" / "trials.json"
    record = json.loads(path.read_text())
    del record["settings"]["train_dev_sha256"]
    record["settings"]["data_sha256"] = "0" * 64
    path.write_text(json.dumps(record))
    trials.run_trials(config, dataclasses.replace(more, num_trials=4), "sst2", FakeTrainer,
                      Finetuning.final_results)


def test_glue_data_as_downloaded_is_hashed_in_the_tasks_folder(tmp_path):
    """--data_dir=glue_data reads glue_data/SST-2/train.tsv: the group hashed the files
    directly in glue_data (none), so labels edited in place joined the earlier median."""
    glue = tmp_path / "glue_data"
    (glue / "SST-2").mkdir(parents=True)
    (glue / "SST-2" / "train.tsv").write_text("sentence\tlabel\na\t1\n")
    config = FinetuningConfig(task_name="sst2", seed=7)
    run = FinetuningRun(model_dir=str(tmp_path / "out"), data_dir=str(glue),
                        init_checkpoint="c", num_trials=1)
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    assert trials.read_trials(run.model_dir)["settings"]["train_dev_sha256"]
    (glue / "SST-2" / "train.tsv").write_text("sentence\tlabel\na\t0\n")
    with pytest.raises(ConfigError, match=r"records trials of other settings \(the train or "
                                          r"dev files in --data_dir changed\)"):
        trials.run_trials(config, dataclasses.replace(run, num_trials=2), "sst2",
                          FakeTrainer, Finetuning.final_results)
    (glue / "SST-2" / "train.tsv").write_text("sentence\tlabel\na\t1\n")
    (glue / "CoLA").mkdir()  # another task's files are not this group's
    (glue / "CoLA" / "train.tsv").write_text("x\t1\t\ta\n")
    trials.run_trials(config, dataclasses.replace(run, num_trials=2), "sst2", FakeTrainer,
                      Finetuning.final_results)

def test_a_checkpoint_named_by_its_folder_or_its_weights_file_is_one(tmp_path):
    """--init_checkpoint=pre and =pre/discriminator.weights.h5 read one model: a rerun
    naming the other had been refused as "the --init_checkpoint's files changed"."""
    pre = tmp_path / "pre"
    pre.mkdir()
    (pre / "discriminator.weights.h5").write_bytes(b"weights")
    (pre / "discriminator_config.json").write_text("{}")
    config = FinetuningConfig(task_name="sst2", seed=7)

    def group(init, n):
        return FinetuningRun(model_dir=str(tmp_path / "out"), data_dir="d",
                             init_checkpoint=str(init), num_trials=n)

    trials.run_trials(config, group(pre, 1), "sst2", FakeTrainer, Finetuning.final_results)
    trials.run_trials(config, group(pre / "discriminator.weights.h5", 2), "sst2", FakeTrainer,
                      Finetuning.final_results)
    assert len(trials.read_trials(str(tmp_path / "out"))["trials"]) == 2
    (pre / "discriminator.weights.h5").write_bytes(b"other weights")
    for init in (pre, pre / "discriminator.weights.h5"):
        with pytest.raises(ConfigError, match=r"\(the --init_checkpoint's files changed\)"):
            trials.run_trials(config, group(init, 3), "sst2", FakeTrainer,
                              Finetuning.final_results)
    other = tmp_path / "other"
    other.mkdir()
    (other / "discriminator.weights.h5").write_bytes(b"weights")
    with pytest.raises(ConfigError, match=r"init_checkpoint '.*pre' -> '.*other/discrim"):
        trials.run_trials(config, group(other / "discriminator.weights.h5", 3), "sst2",
                          FakeTrainer, Finetuning.final_results)


def test_scores_that_are_not_numbers_are_written_as_null(tmp_path):
    """A SQuAD 2.0 dev set without an answerable question has no HasAns score: NaN had
    been written as a bare NaN token, which strict JSON readers refuse."""
    from electra_tf.folders.finetuned import write_results

    class NanTrainer(FakeTrainer):
        def train(self):
            os.makedirs(self.run.model_dir, exist_ok=True)
            return {"epoch_1": {"dev": {"f1": 50.0, "HasAns_f1": float("nan")}}}

    config, run = fake_runs(tmp_path, 1)
    trials.run_trials(config, run, "squad_v2", NanTrainer, Finetuning.final_results)
    strict = dict(parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))
    record = json.loads((tmp_path / "out" / "trials.json").read_text(), **strict)
    assert record["trials"][0]["results"]["dev"] == {"f1": 50.0, "HasAns_f1": None}
    assert "HasAns_f1" not in record["summary"]["dev"]
    write_results(str(tmp_path / "run"), {"epoch_1": {"dev": {"x": float("inf")}}})
    assert json.loads((tmp_path / "run" / "results.json").read_text(), **strict)[
        "epoch_1"] == {"dev": {"x": None}}


def test_a_diverged_trial_is_recorded_and_the_group_goes_on(tmp_path, capsys):
    """One seed's NaN had stopped the group, and every rerun stopped at it again (same
    seed, same divergence): no summary could ever be written without new settings."""
    class DivergesAtSeed8(FakeTrainer):
        def train(self):
            if self.config.seed == 8:
                os.makedirs(self.run.model_dir, exist_ok=True)
                raise Diverged("the training loss became nan in step 3; stopped without "
                               "saving those weights")
            return super().train()

    config, run = fake_runs(tmp_path, 3)
    summary = trials.run_trials(config, run, "sst2", DivergesAtSeed8, Finetuning.final_results)
    assert summary["dev"]["accuracy"]["n"] == 2
    assert summary["dev"]["accuracy"]["median"] == pytest.approx((1.2 + 1.4) / 2)
    out = str(tmp_path / "out")
    record = trials.read_trials(out)
    assert [(t["trial"], t["results"] != {}, t.get("diverged", "")[:28])
            for t in record["trials"]] == [(1, True, ""), (2, False, "the training loss became "
                                                                 "nan"), (3, True, "")]
    err = capsys.readouterr().err
    assert "trial 2/3 diverged: the training loss became nan in step 3" in err
    assert "1 of 3 trials diverged (trial 2): the summary is over the others" in err
    assert ("trial 2 (seed 8) sst2: diverged: the training loss became nan in step 3"
            in (tmp_path / "out" / "results.txt").read_text())
    # a rerun trains nothing: the diverged trial is recorded (its seed would diverge again)
    made = []

    def make_trainer(c, r):
        made.append(c.seed)
        return DivergesAtSeed8(c, r)

    trials.run_trials(config, run, "sst2", make_trainer, Finetuning.final_results)
    assert made == []
    assert f"trial 2/3 (seed 8, {out}_2): diverged, skipped: the training loss" in \
        capsys.readouterr().err
    # every trial diverged: no summary to give, an error (each trial is recorded)
    config, run = fake_runs(tmp_path / "all", 1)
    with pytest.raises(Diverged, match=r"^every trial diverged \(1; recorded in .*trials.json"
                                       r"\), e.g. trial 1: the training loss became nan"):
        trials.run_trials(dataclasses.replace(config, seed=8), run, "sst2", DivergesAtSeed8,
                          Finetuning.final_results)


def test_a_signal_as_a_trial_diverges_stops_the_group(tmp_path, monkeypatch):
    """The gate of a run that stopped on Diverged had dropped the SIGTERM that came
    meanwhile: the group went on to the next seed until the scheduler's SIGKILL. The gate
    now keeps it (signals.pending); the group records the trial and stops."""
    import signal

    from electra_tf.core import signals
    from electra_tf.training.loop import InterruptGate

    with pytest.raises(Diverged):  # what the trainer's gate does with a pending request
        with InterruptGate() as gate:
            gate._on_signal(signal.SIGTERM, None)
            raise Diverged("the training loss became nan in step 3")
    assert signals.take() == signal.SIGTERM

    class SignalledAsItDiverges(FakeTrainer):
        def train(self):
            if self.config.seed == 8:
                os.makedirs(self.run.model_dir, exist_ok=True)
                signals.received = signal.SIGTERM  # kept by the trial's gate
                raise Diverged("the training loss became nan in step 3")
            return super().train()

    config, run = fake_runs(tmp_path, 3)
    with pytest.raises(Interrupted, match=r"^interrupted in trial 2/3, which diverged "
                                          r"\(recorded in .*trials.json\); rerun to go on "
                                          r"with trial 3$") as raised:
        trials.run_trials(config, run, "sst2", SignalledAsItDiverges, Finetuning.final_results)
    assert raised.value.signum == signal.SIGTERM and signals.pending() is None
    assert [t["trial"] for t in trials.read_trials(str(tmp_path / "out"))["trials"]] == [1, 2]
    assert not os.path.exists(tmp_path / "out_3")  # the next trial never started


def test_keep_all_models_false_keeps_the_last_finished_trials_folder(tmp_path):
    """The last trial diverging had left no model at all: every finished trial's folder
    was removed, and the diverged one holds none."""
    class LastDiverges(FakeTrainer):
        def train(self):
            results = super().train()
            if self.config.seed == 9:
                raise Diverged("the training loss became nan in step 3")
            return results

    config, run = fake_runs(tmp_path, 3, keep_all_models=False)
    trials.run_trials(config, run, "sst2", LastDiverges, Finetuning.final_results)
    assert sorted(os.listdir(tmp_path)) == ["out", "out_2"]
    # The removed trials' prediction files outlive their folders (the diverged one
    # wrote one too, as a trial killed after its test predictions would have).
    kept = tmp_path / "out" / "predictions"
    assert sorted(os.listdir(kept)) == ["trial_1", "trial_3"]
    assert (kept / "trial_1" / "SST-2.tsv").read_text().endswith("0\t7\n")
    assert (tmp_path / "out_2" / "SST-2.tsv").read_text().endswith("0\t8\n")


def test_keep_all_models_false_resumed_after_an_interrupt_keeps_one_folder(tmp_path):
    """The folder to remove was tracked within one run: interrupted in trial 3 (trial
    2's folder kept so far), the rerun kept out_2 and out_3 both. A group an earlier
    run kept whole keeps its folders."""
    config, run = fake_runs(tmp_path, 3, keep_all_models=False)
    with pytest.raises(Interrupted):
        trials.run_trials(config, run, "sst2",
                          lambda c, r: FakeTrainer(c, r, interrupt=c.seed == 9),
                          Finetuning.final_results)
    assert sorted(os.listdir(tmp_path)) == ["out", "out_2", "out_3"]
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    assert sorted(os.listdir(tmp_path)) == ["out", "out_3"]
    kept = tmp_path / "out" / "predictions"
    assert sorted(os.listdir(kept)) == ["trial_1", "trial_2"]
    assert (kept / "trial_2" / "SST-2.tsv").read_text().endswith("0\t8\n")

    whole = tmp_path / "whole"
    whole.mkdir()
    config, run = fake_runs(whole, 2)  # every folder kept, then one more trial without
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    trials.run_trials(config, dataclasses.replace(run, num_trials=3, keep_all_models=False),
                      "sst2", FakeTrainer, Finetuning.final_results)
    assert sorted(os.listdir(whole)) == ["out", "out_1", "out_2", "out_3"]



def test_evaluating_a_group_without_init_checkpoint_is_refused_before_any_trial():
    """Every trial's evaluation builds its model from --init_checkpoint: without one the
    first trial's "evaluating" line came first (after TensorFlow's start), then the
    refusal. The command's flags ask for it, before it reads a trial."""
    from absl import flags

    from electra_tf import flags as flags_lib

    fv = flags.FlagValues()
    flags_lib.define_finetuning_flags(fv)
    fv(["x", "--task_name=sst2", "--do_train=false", "--num_trials=2", "--model_dir=m",
        "--data_dir=d"])
    with pytest.raises(InputError, match=r"^--init_checkpoint is required \(a pre-training "
                                         r"model_dir, or one of its checkpoints/ckpt-N\), or "
                                         r"--from_scratch$"):
        flags_lib.finetuning_configs(fv)


def test_a_worker_refused_by_its_group_still_compares_with_the_others(tmp_path):
    """A worker whose own folder refuses the group (here a single run's folder) had
    raised before the workers' comparison: the others waited for it, then said it
    "cannot be reached". It compares a refusal's digest: the others see another group,
    it says its own refusal; workers refused alike each say it."""
    config, run = fake_runs(tmp_path, 2)
    os.makedirs(run.model_dir)
    (tmp_path / "out" / "finetuning_config.json").write_text("{}")
    compared = []

    def differ(digests):
        compared.append(digests)
        return [0]

    with pytest.raises(InputError, match=r"is the folder of a single fine-tuning run") as e:
        trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results,
                          agree=differ)
    assert len(compared) == 1
    assert e.value.left_peers is False  # the workers end together (the CLI waits for them)
    with pytest.raises(InputError, match=r"is the folder of a single fine-tuning run"):
        trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results,
                          agree=lambda digests: [])  # refused alike everywhere
    other = dataclasses.replace(run, model_dir=str(tmp_path / "fine"))
    with pytest.raises(ConfigError, match=r"the workers see different trial groups"):
        trials.run_trials(config, other, "sst2", FakeTrainer, Finetuning.final_results,
                          chief=False, agree=differ)  # the worker whose group was fine
    assert len(compared) == 2 and not os.path.exists(tmp_path / "fine_1")
    # a chief whose group folder another run holds: compared as well
    from electra_tf.core.fileio import FolderLock

    held = dataclasses.replace(run, model_dir=str(tmp_path / "held"))
    trials.run_trials(config, held, "sst2", FakeTrainer, Finetuning.final_results)
    with FolderLock(held.model_dir, "--model_dir"):
        with pytest.raises(InputError, match=r"is in use by"):
            trials.run_trials(config, held, "sst2", FakeTrainer, Finetuning.final_results,
                              agree=differ)
        with pytest.raises(InputError, match=r"is in use by"):
            trials.evaluate_trials(config, dataclasses.replace(held, do_train=False), "sst2",
                                   FakeTrainer, Finetuning.final_results, agree=differ)
    assert len(compared) == 4


def test_a_group_goes_on_on_the_backend_it_trained_on(tmp_path):
    """Trials 1-2 on JAX, then a rerun on TensorFlow: it had added trial 3 to the median
    without a word, and no backend could evaluate the group after (each reads its own
    checkpoints). The group records Keras' backend; another is refused in one line,
    before any trial, by the rerun and by an evaluation."""
    config, run = fake_runs(tmp_path, 2)
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results,
                      backend="jax")
    # (JAX compiles every step, as each trial's record says; --jit_compile's false had
    # been recorded for the group)
    assert not run.jit_compile and trials.read_trials(run.model_dir)["settings"][
        "jit_compile"] is True
    more = dataclasses.replace(run, num_trials=3)
    with pytest.raises(ConfigError, match=r"trials.json records trials of other settings "
                                          r"\(Keras' backend jax -> tensorflow "
                                          r"\(KERAS_BACKEND\)\); rerun with those"):
        trials.run_trials(config, more, "sst2", FakeTrainer, Finetuning.final_results,
                          backend="tensorflow")
    assert not os.path.exists(tmp_path / "out_3")
    with pytest.raises(ConfigError, match=r"trials.json records trials trained on Keras' jax "
                                          r"backend; evaluate them with KERAS_BACKEND=jax$"):
        trials.evaluate_trials(config, dataclasses.replace(run, do_train=False), "sst2",
                               FakeTrainer, Finetuning.final_results, backend="tensorflow")
    trials.run_trials(config, more, "sst2", FakeTrainer, Finetuning.final_results,
                      backend="jax")
    assert len(trials.read_trials(run.model_dir)["trials"]) == 3
    trials.run_trials(config, more, "sst2", FakeTrainer, Finetuning.final_results)  # (none
    # named: the API's caller, not compared)
    # a group recorded before the backend was (not known): goes on, and records the
    # backend of the trials it adds
    record = json.loads((tmp_path / "out" / "trials.json").read_text())
    del record["settings"]["backend"]
    (tmp_path / "out" / "trials.json").write_text(json.dumps(record))
    trials.run_trials(config, dataclasses.replace(run, num_trials=4), "sst2", FakeTrainer,
                      Finetuning.final_results, backend="tensorflow")
    assert trials.read_trials(run.model_dir)["settings"]["backend"] == "tensorflow"

@pytest.mark.slow
def test_keep_all_models_false_keeps_the_last_trials_folder_only(tmp_path):
    config, run = fake_runs(tmp_path, 3, keep_all_models=False)
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    assert sorted(os.listdir(tmp_path)) == ["out", "out_3"]
    assert len(trials.read_trials(str(tmp_path / "out"))["trials"]) == 3  # results kept


def test_do_train_false_evaluates_each_trained_trial_in_its_folder(tmp_path, capsys):
    """A trained group with --do_train=false: each trial's folder evaluated with its own
    seed (the original's do_train=False evaluates model_dir_k); a trial not trained,
    diverged or removed is named and skipped; the group's record is kept."""
    config, run = fake_runs(tmp_path, 2)
    evaluate = dataclasses.replace(run, do_train=False, num_trials=4)
    with pytest.raises(InputError, match=r"^--do_train=false with --num_trials=4 evaluates "
                                         r"the trials of a trained group, and --model_dir .*out "
                                         r"holds no trials.json: train the group first"):
        trials.evaluate_trials(config, evaluate, "sst2", FakeTrainer, Finetuning.final_results)
    assert not os.path.exists(tmp_path / "out")

    class ThirdDiverges(FakeTrainer):
        def train(self):
            if self.config.seed == 9:
                os.makedirs(self.run.model_dir, exist_ok=True)
                raise Diverged("the training loss became nan in step 3")
            return super().train()

    trials.run_trials(config, dataclasses.replace(run, num_trials=3), "sst2", ThirdDiverges,
                      Finetuning.final_results)
    record = trials.read_trials(str(tmp_path / "out"))
    shutil.rmtree(tmp_path / "out_1")  # moved away by hand (its run kept every folder)
    capsys.readouterr()
    seen = []

    def make(c, r):
        seen.append((c.seed, r.model_dir, r.num_trials, r.do_train))
        return FakeTrainer(c, r)

    summary, done = trials.evaluate_trials(dataclasses.replace(config, seed=1), evaluate,
                                           "sst2", make, Finetuning.final_results)
    assert done == 1
    out = str(tmp_path / "out")
    assert seen == [(8, out + "_2", 1, False)]
    assert summary["dev"]["accuracy"]["n"] == 1
    assert summary["dev"]["accuracy"]["median"] == pytest.approx(1.3)
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "not evaluated" in line or "note:" in line] == [
        "[finetune] note: --seed=1 is not used: each trial is evaluated with the seed it was "
        "trained with (7 onwards)",
        f"[finetune] trial 1/4 ({out}_1): its folder is missing (moved or removed since it "
        "trained); not evaluated",
        f"[finetune] trial 3/4 ({out}_3): diverged in training; not evaluated",
        f"[finetune] trial 4/4 ({out}_4): not trained yet; not evaluated"]
    assert trials.read_trials(out) == record
    # (it had been said removed by --keep_all_models=false, which the trial's run was not)
    written = (tmp_path / "out" / "trials.json").read_text(encoding="utf-8")
    edited = json.loads(written)
    edited["trials"][0]["keep_all_models"] = False
    (tmp_path / "out" / "trials.json").write_text(json.dumps(edited), encoding="utf-8")
    trials.evaluate_trials(config, evaluate, "sst2", make, Finetuning.final_results)
    assert f"[finetune] trial 1/4 ({out}_1): its folder was removed (--keep_all_models=false); " \
           "not evaluated" in capsys.readouterr().err.splitlines()
    (tmp_path / "out" / "trials.json").write_text(written, encoding="utf-8")
    # predictions only: no scores said to be evaluated (results.json's were earlier ones)
    assert trials.evaluate_trials(config, dataclasses.replace(
        evaluate, do_eval=False, do_predict=True), "sst2", make,
        Finetuning.final_results) == ({}, 1)
    assert f"[finetune] trial 2/4 done: its test predictions written in {out}_2" in \
        capsys.readouterr().err.splitlines()
    with pytest.raises(ConfigError, match=r"records trials of --task_name=sst2, not cola$"):
        trials.evaluate_trials(config, evaluate, "cola", make, Finetuning.final_results)
    shutil.rmtree(tmp_path / "out_2")
    with pytest.raises(InputError, match=r"^no trial of the group .*out up to --num_trials=4 "
                                         r"can be evaluated \(each is named above\)$"):
        trials.evaluate_trials(config, evaluate, "sst2", make, Finetuning.final_results)


# Slow (12 s: two real fine-tuning runs, then their evaluation by the command); the default suite checks the trials' seeds,
# folders, skipping and summary with cheap trainers above.
@pytest.mark.slow
def test_two_real_trials_keep_their_seeds_folders_and_results(pretrained_dir, toy_sst2_dir,
                                                              tmp_path, capsys):
    """run_finetuning's trainer, two trials of half an epoch: each its own seed and folder,
    the group's record equal to what each folder holds."""
    from electra_tf.tasks.registry import task_from_config
    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    _, config, run = finetuning_from_flags(
        "--task_name=sst2", f"--init_checkpoint={pretrained_dir}", f"--data_dir={toy_sst2_dir}",
        f"--model_dir={tmp_path}/out", "--num_train_epochs=0.5", "--train_batch_size=32",
        "--eval_batch_size=64", "--max_seq_length=16", "--num_trials=2", "--seed=3")
    summary = trials.run_trials(config, run, "sst2",
                                lambda c, r: TensorFlowFinetuning(task_from_config(c), c, r),
                                Finetuning.final_results)
    record = trials.read_trials(str(tmp_path / "out"))
    assert [(t["seed"], t["model_dir"]) for t in record["trials"]] == [
        (3, f"{tmp_path}/out_1"), (4, f"{tmp_path}/out_2")]
    for t in record["trials"]:
        own = json.load(open(os.path.join(t["model_dir"], "results.json")))
        assert own["epoch_1"] == t["results"]
        recorded = json.load(open(os.path.join(t["model_dir"], "finetuning_config.json")))
        assert recorded["finetuning"]["seed"] == t["seed"]
        assert os.path.exists(os.path.join(t["model_dir"], "finetuned.weights.h5"))
    accuracies = [t["results"]["dev"]["accuracy"] for t in record["trials"]]
    assert summary["dev"]["accuracy"]["median"] == pytest.approx(statistics.median(accuracies))
    assert "sst2 dev accuracy: median" in capsys.readouterr().err

    # The trained group evaluated again and its test split predicted, each trial in its
    # folder (the original's do_train=False): had been refused as other settings.
    flags = [f"--init_checkpoint={pretrained_dir}", f"--data_dir={toy_sst2_dir}",
             f"--model_dir={tmp_path}/out", "--max_seq_length=16", "--eval_batch_size=64",
             "--num_trials=2", "--seed=3", "--do_train=false", "--do_predict"]
    ended = run_module("electra_tf.run_finetuning", "--task_name=sst2", *flags)
    assert ended.returncode == 0, ended.stderr[-3000:]
    assert f"trial 2/2: evaluating --model_dir={tmp_path}/out_2" in ended.stderr
    assert ended.stderr.strip().splitlines()[-1] == (
        f"[finetune] done: 2 trials evaluated, medians {{'dev': {{'accuracy': "
        f"{round(statistics.median(accuracies), 4)}}}}}")
    for t in record["trials"]:
        assert json.load(open(os.path.join(t["model_dir"], "results.json")))["eval"] == \
            t["results"]
        assert len(open(os.path.join(t["model_dir"], "SST-2.tsv")).read().splitlines()) == 11
    assert trials.read_trials(str(tmp_path / "out")) == record  # the training's record kept


@pytest.mark.slow
def test_two_trials_of_a_real_run_and_an_interrupted_second_resumes(
        pretrained_dir, toy_sst2_dir, tmp_path, capsys):
    """Real fine-tuning: trial 2 stops at step 3 with its checkpoint (what Ctrl-C leaves);
    the rerun skips trial 1 and resumes trial 2 from that checkpoint."""
    from electra_tf.tasks.registry import task_from_config
    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    _, config, run = finetuning_from_flags(
        "--task_name=sst2", f"--init_checkpoint={pretrained_dir}", f"--data_dir={toy_sst2_dir}",
        f"--model_dir={tmp_path}/out", "--num_train_epochs=1", "--train_batch_size=32",
        "--max_seq_length=16", "--save_checkpoints_steps=1000", "--learning_rate=3e-3",
        "--num_trials=2", "--seed=3")
    stop = {"at": 3}

    class StopsOnce(TensorFlowFinetuning):
        def train(self):
            if self.config.seed == 4 and stop.get("at"):
                super().train(stop_at_step=stop.pop("at"))  # saves ckpt-3
                raise Interrupted(3)
            return super().train()

    def make_trainer(c, r):
        return StopsOnce(task_from_config(c), c, r)

    with pytest.raises(Interrupted):
        trials.run_trials(config, run, "sst2", make_trainer, Finetuning.final_results)
    assert os.path.exists(tmp_path / "out_2" / "checkpoints" / "ckpt-3.index")
    capsys.readouterr()
    summary = trials.run_trials(config, run, "sst2", make_trainer, Finetuning.final_results)
    err = capsys.readouterr().err
    assert "trial 1/2 (seed 3" in err and "finished, skipped" in err
    assert re.search(r"resumed from .*out_2.*ckpt-3", err), err
    record = trials.read_trials(str(tmp_path / "out"))
    for t in record["trials"]:  # each trial's own folder holds what the group records
        own = json.load(open(os.path.join(t["model_dir"], "results.json")))
        assert own["epoch_1"] == t["results"]
        recorded = json.load(open(os.path.join(t["model_dir"], "finetuning_config.json")))
        assert recorded["finetuning"]["seed"] == t["seed"]
        assert recorded["run"]["model_dir"] == t["model_dir"]
    assert [t["seed"] for t in record["trials"]] == [3, 4]
    assert summary["dev"]["accuracy"]["n"] == 2


# One task: the trials' loop is the same for every task (training/trials.py reads only a
# trainer's final results and prediction files); SQuAD 2.0 has both, and several
# metrics per split. NER's command: test_finetuning_end_to_end.py's flagfile run; the
# resume of an interrupted run (one code path for every task): the two tests above.
@pytest.mark.slow
def test_ctrl_c_in_the_second_trial_of_the_command_resumes_it(pretrained_dir, toy_squad_dir,
                                                              tmp_path):
    """The command: Ctrl-C in trial 2 exits 130 with trial 1 recorded; the same command
    again skips trial 1, resumes trial 2 and prints the summary (SQuAD 2.0)."""
    flags = [f"--flagfile={REPO}/configs/squad_v2.flags", f"--data_dir={toy_squad_dir}",
             "--max_seq_length=48"]
    out = tmp_path / "out"
    args = ["-m", "electra_tf.run_finetuning", *flags, f"--init_checkpoint={pretrained_dir}",
            f"--model_dir={out}", "--num_train_epochs=2", "--train_batch_size=8",
            "--save_checkpoints_steps=2", "--num_trials=2"]
    proc = popen_python(args, stderr=subprocess.PIPE, text=True)
    lines, in_trial_2 = [], False
    try:
        for line in proc.stderr:
            lines.append(line)
            in_trial_2 = in_trial_2 or "trial 2/2: seed" in line
            if in_trial_2 and re.search(r"epoch 1 step 4/", line):
                proc.send_signal(signal.SIGINT)
                break
        rest = proc.communicate(timeout=patience(120))[1]
    finally:
        proc.kill()
    stderr = "".join(lines) + rest
    assert proc.returncode == 130, stderr[-3000:]
    assert re.fullmatch(r"trial 2/2 \(\S+_2\): interrupted at step \d+; checkpoint saved; "
                        r"rerun to resume", stderr.strip().splitlines()[-1]), stderr[-3000:]
    assert [t["trial"] for t in trials.read_trials(str(out))["trials"]] == [1]
    proc = popen_python(args, stderr=subprocess.PIPE, text=True)
    stderr = proc.communicate(timeout=patience(600))[1]
    assert proc.returncode == 0, stderr[-3000:]
    assert "trial 1/2 (seed 0" in stderr and "finished, skipped" in stderr
    assert re.search(r"resumed from .*out_2", stderr), stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("[finetune] done: 2 trials, medians {'dev': {"), last
    record = trials.read_trials(str(out))
    assert [t["seed"] for t in record["trials"]] == [0, 1]
    assert all(s["n"] == 2 for s in record["summary"]["dev"].values())


def test_the_trials_asked_for_are_recorded_before_they_run(tmp_path):
    """results_table tells a group cut short from a finished one by the record's
    num_trials: what its latest run asked for, written as soon as a rerun asks for
    another count (a fault in the first added trial leaves it recorded)."""
    config, run = fake_runs(tmp_path, 3)

    def interrupted_at(seed):
        return lambda c, r: FakeTrainer(c, r, interrupt=c.seed == seed)

    out = str(tmp_path / "out")
    with pytest.raises(Interrupted):  # in trial 2 of 3
        trials.run_trials(config, run, "sst2", interrupted_at(8), Finetuning.final_results)
    record = trials.read_trials(out)
    assert (record["num_trials"], len(record["trials"])) == (3, 1)
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    _, more = fake_runs(tmp_path, 5)
    with pytest.raises(Interrupted):  # in trial 4, the first added
        trials.run_trials(config, more, "sst2", interrupted_at(10), Finetuning.final_results)
    record = trials.read_trials(out)
    assert (record["num_trials"], len(record["trials"])) == (5, 3)
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)  # 3 again:
    record = trials.read_trials(out)  # the user's word that 3 are enough; nothing trains
    assert (record["num_trials"], len(record["trials"])) == (3, 3)


def test_a_rerun_asking_fewer_trials_says_the_summary_is_over_all(tmp_path, capsys):
    config, run = fake_runs(tmp_path, 3)
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    capsys.readouterr()
    _, fewer = fake_runs(tmp_path, 2)
    summary = trials.run_trials(config, fewer, "sst2", FakeTrainer, Finetuning.final_results)
    assert summary["dev"]["accuracy"]["n"] == 3
    assert "holds 1 more recorded trial(s) than --num_trials=2: the summary is over all 3" \
        in capsys.readouterr().err


@pytest.mark.parametrize("edit, message", [
    (lambda r: r["trials"][0].pop("trial"), "trials[0] has no trial number"),
    (lambda r: r["trials"][0].update(trial="1"), "trials[0] has no trial number"),
    (lambda r: r["trials"][0].update(trial=True), "trials[0] has no trial number"),
    (lambda r: r["trials"].append(dict(r["trials"][1])), "trial 2 is recorded twice"),
    (lambda r: r["trials"][1].pop("seed"), "trial 2 has no whole-number seed"),
    (lambda r: r["trials"][1].update(results={"dev": 0.5}),
     "trial 2 has no results object of splits"),
    (lambda r: r["trials"][1].update(model_dir=3), "trial 2's model_dir is not a string"),
    (lambda r: r.update(settings=[]), "settings is not an object"),
    (lambda r: r.update(num_trials="2"), "num_trials is not a whole number >= 1"),
    (lambda r: r.update(num_trials=0), "num_trials is not a whole number >= 1"),
    # a string had been left out of the summary silently; an integer past a float's range
    # had stopped results.txt's writing in a traceback (after a trial had trained)
    (lambda r: r["trials"][1]["results"]["dev"].update(accuracy="0.5"),
     "trial 2's dev accuracy is '0.5', not a number or null"),
    (lambda r: r["trials"][1]["results"]["dev"].update(accuracy=10**400),
     "trial 2's dev accuracy is 1000000"),
    (lambda r: r["trials"][1]["results"]["dev"].update(accuracy=True),
     "trial 2's dev accuracy is True, not a number or null"),
])
def test_an_edited_trials_file_is_refused_before_any_trial_trains(tmp_path, edit, message):
    """A trial number as a string, a missing seed or a split that is not an object had
    failed in a TypeError, KeyError or AttributeError, some after a trial had trained
    (whose results were then not recorded)."""
    config, run = fake_runs(tmp_path, 2)
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    path = tmp_path / "out" / "trials.json"
    record = json.loads(path.read_text())
    edit(record)
    path.write_text(json.dumps(record))
    made = []
    _, more = fake_runs(tmp_path, 3)
    with pytest.raises(InputError, match=re.escape(f"trials.json: {message}")):
        trials.run_trials(config, more, "sst2", lambda c, r: made.append(c) or FakeTrainer(c, r),
                          Finetuning.final_results)
    assert made == [] and json.loads(path.read_text()) == record


def test_the_summary_is_the_trials_not_the_files(tmp_path, capsys):
    """An edited score with every trial finished had printed the file's old medians
    (results.txt listing the new score beside them); a file without its summary had
    been a KeyError."""
    config, run = fake_runs(tmp_path, 3)
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    path = tmp_path / "out" / "trials.json"
    record = json.loads(path.read_text())
    record["trials"][0]["results"]["dev"]["accuracy"] = 9.0
    del record["summary"]
    path.write_text(json.dumps(record))
    capsys.readouterr()
    summary = trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    assert summary["dev"]["accuracy"]["median"] == pytest.approx(1.4)  # 1.3, 1.4, 9.0
    err = capsys.readouterr().err
    assert "its summary differed from its trials' results; rewritten from them" in err
    assert "sst2 dev accuracy: median 1.4000" in err
    assert trials.read_trials(str(tmp_path / "out"))["summary"] == json.loads(
        json.dumps(summary))
    assert (tmp_path / "out" / "results.txt").read_text().splitlines()[-1].startswith(
        "sst2 dev accuracy: median 1.4000, mean 3.9000")
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    assert "rewritten" not in capsys.readouterr().err  # up to date now


def test_a_results_txt_behind_its_trials_file_is_rewritten(tmp_path, capsys):
    """A run stopped between writing trials.json and results.txt after its last trial
    had left results.txt a trial behind for good (every rerun found nothing to do)."""
    config, run = fake_runs(tmp_path, 2)
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    text = tmp_path / "out" / "results.txt"
    whole = text.read_text()
    text.write_text("trial 1 (seed 7) sst2 dev: accuracy: 1.2000\n")  # as trial 1 left it
    capsys.readouterr()
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    assert (f"{text} did not match {tmp_path / 'out' / 'trials.json'} (a run stopped "
            "between writing the two, or an edit); rewritten from it"
            in capsys.readouterr().err)
    assert text.read_text() == whole
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    assert "rewritten" not in capsys.readouterr().err  # up to date now
    # a score the summary leaves out (null) matches too: no rewrite on every rerun
    config, run = fake_runs(tmp_path / "nan", 1)
    nan = lambda c, r: type("T", (FakeTrainer,), {"train": lambda self: {  # noqa: E731
        "epoch_1": {"dev": {"accuracy": float("nan")}}}})(c, r)
    trials.run_trials(config, run, "sst2", nan, Finetuning.final_results)
    capsys.readouterr()
    trials.run_trials(config, run, "sst2", nan, Finetuning.final_results)
    assert "rewritten" not in capsys.readouterr().err


def test_a_group_reached_through_a_link_keeps_its_trials_beside_its_folder(tmp_path,
                                                                         capsys):
    """A --model_dir that links to the group folder had put the trials beside the link:
    the interrupted trial trained again in another folder, the group split in two."""
    config, run = fake_runs(tmp_path, 2)
    made = []

    def make_trainer(c, r):
        made.append(r.model_dir)
        return FakeTrainer(c, r, interrupt=c.seed == 8 and len(made) == 2)

    with pytest.raises(Interrupted) as stopped:  # trial 2 stops
        trials.run_trials(config, run, "sst2", make_trainer, Finetuning.final_results)
    out = str(tmp_path / "out")
    assert str(stopped.value) == (f"trial 2/2 ({out}_2): interrupted at step 3; checkpoint "
                                  "saved; rerun to resume")  # the line names the trial
    os.mkdir(tmp_path / "elsewhere")
    link = tmp_path / "elsewhere" / "link"
    os.symlink(out, link)
    made.clear()
    trials.run_trials(config, dataclasses.replace(run, model_dir=str(link)), "sst2",
                      make_trainer, Finetuning.final_results)
    assert made == [out + "_2"]  # the interrupted trial's own folder
    assert f"trial 1/2 (seed 7, {out}_1): finished, skipped" in capsys.readouterr().err
    assert not os.path.exists(str(link) + "_2")
    assert [t["model_dir"] for t in trials.read_trials(out)["trials"]] == [out + "_1",
                                                                           out + "_2"]


def test_a_group_given_as_dot_keeps_its_trials_beside_it(tmp_path, monkeypatch):
    """--model_dir=. (or a/..) had put trial k in ./._k: hidden inside the group folder,
    and not found when the group was named from its parent."""
    os.mkdir(tmp_path / "group")
    monkeypatch.chdir(tmp_path / "group")
    for spelled in (".", "./", "sub/.."):
        assert trials.trial_dir(spelled, 2) == str(tmp_path / "group") + "_2"
    assert trials.trial_dir("../group/sub/..", 2) == "../group_2"
    assert trials.trial_dir("group", 1) == "group_1"  # a relative name stays as given


def test_a_group_trained_without_evaluation_refuses_a_rerun_that_evaluates(tmp_path):
    """--do_eval=false records trials without results; the rerun with --do_eval=true had
    skipped them as finished (medians {} for good). A group written before do_eval was
    recorded reruns as before."""
    config, run = fake_runs(tmp_path, 2, do_eval=False)
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    _, evaluates = fake_runs(tmp_path, 2)
    with pytest.raises(ConfigError, match=r"other settings \(do_eval False -> True\)"):
        trials.run_trials(config, evaluates, "sst2", FakeTrainer, Finetuning.final_results)
    path = tmp_path / "out" / "trials.json"
    record = json.loads(path.read_text())
    del record["settings"]["do_eval"]
    path.write_text(json.dumps(record))
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)


def _fake_record(folder, task: str, seed: int, results=None) -> None:
    """A fine-tuning run's record and checkpoints in `folder`, as far as the group's checks
    read them (task, seed, encoder; a checkpoint file; results.json)."""
    from electra_tf.core.config import EncoderConfig
    from electra_tf.folders.files import write_json

    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "ckpt-6.index").write_bytes(b"")
    write_json(str(folder / "finetuning_config.json"), {
        "finetuning": {"seed": seed}, "task": task, "encoder": EncoderConfig().to_dict()})
    if results is not None:
        (folder / "results.json").write_text(results)


def test_a_trial_folder_of_another_task_is_refused_before_any_trial(tmp_path):
    """An rte run's folder copied in as OUT_3 (the seed it was trained with the trial's)
    had been resumed as a finished sst2 trial, its rte score in the sst2 median."""
    config, run = fake_runs(tmp_path, 3)
    _fake_record(tmp_path / "out_3", "rte", seed=9)
    with pytest.raises(InputError, match=r"^trial folder .*out_3 holds a fine-tuning run of "
                                         r"--task_name=rte, not this group's sst2: another "
                                         r"run's folder; move it"):
        trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    assert not (tmp_path / "out_1").exists()  # refused before trial 1 trained


def test_a_group_s_trial_folders_are_read_before_any_is_evaluated(tmp_path, capsys):
    """--do_train=false over a group: a trial folder of another task, or whose results.json
    cannot be read, had been met after the trials before it were evaluated (and written:
    an rte folder got sst2 predictions, its score in the medians)."""
    config, run = fake_runs(tmp_path, 2)
    trials.run_trials(config, run, "sst2", FakeTrainer, Finetuning.final_results)
    evaluate = dataclasses.replace(run, do_train=False)
    seen = []

    def make(c, r):
        seen.append(r.model_dir)
        return FakeTrainer(c, r)

    shutil.rmtree(tmp_path / "out_2")
    _fake_record(tmp_path / "out_2", "rte", seed=8)
    with pytest.raises(InputError, match=r"^trial folder .*out_2 holds a fine-tuning run of "
                                         r"--task_name=rte, not this group's sst2"):
        trials.evaluate_trials(config, evaluate, "sst2", make, Finetuning.final_results)
    shutil.rmtree(tmp_path / "out_2")
    _fake_record(tmp_path / "out_2", "sst2", seed=8,
                 results='{"format_version": 1, "epoch_1": {"dev": {"accur')
    with pytest.raises(InputError, match=r"out_2/results.json:1:\d+: malformed JSON"):
        trials.evaluate_trials(config, evaluate, "sst2", make, Finetuning.final_results)
    assert seen == []  # trial 1 was not evaluated either time


def test_a_score_left_out_of_the_summary_is_named(tmp_path, capsys):
    """A trial whose score is no finite number (null in trials.json) had an empty field in
    results.txt, and the summary's n said nothing of the trial left out."""
    config, run = fake_runs(tmp_path, 3)

    class SecondNan(FakeTrainer):
        def train(self):
            results = super().train()
            if self.config.seed == 8:
                results["epoch_2"]["dev"]["accuracy"] = float("nan")
            return results

    trials.run_trials(config, run, "sst2", SecondNan, Finetuning.final_results)
    text = (tmp_path / "out" / "results.txt").read_text().splitlines()
    assert "trial 2 (seed 8) sst2 dev: accuracy: null (left out)" in text
    assert text[-1].startswith("sst2 dev accuracy: median 1.3000, mean 1.3000, std 0.1414, "
                               "min 1.2000, max 1.4000 (n=2; 1 left out)"), text[-1]
    assert "[finetune] " + text[-1] in capsys.readouterr().err.splitlines()
