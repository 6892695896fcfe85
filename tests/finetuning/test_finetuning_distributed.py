"""Multi-worker fine-tuning: the workers compare what they must share before they train.

Without the comparison, a worker started with another --seed trained on with the chief
(exit 0, a model of mixed seeds), another --num_train_epochs left both waiting after the
chief's end, and a --model_dir that is not one shared folder let the chief resume alone
and write its final weights while the other worker waited forever.
"""

import dataclasses
import json
import os
import shutil
import types

import numpy as np
import pytest
from helpers import toy_trainer, write_pretrained_dir

from electra_tf.training.loop import differing_digests
from tests.training.test_training_distributed import run_workers


def test_differing_digests_names_the_parts_that_differ():
    """The all-reduce's arithmetic, over three replicas' digests (a SUM, as the
    collective gives): only a part whose bytes differ somewhere is named."""
    replicas = [[[1, 2, 255], [0, 9]], [[1, 2, 255], [0, 9]], [[1, 2, 255], [0, 8]]]

    def flat(digests):
        values = np.asarray([b for d in digests for b in d], np.float32)
        return np.concatenate([values, values * values])

    def total(_):  # what every replica receives: the sum of every replica's vector
        return sum(flat(d) for d in replicas)

    for mine in replicas:
        assert differing_digests(total, mine, 3) == [1]
    replicas[2] = [[1, 2, 255], [0, 9]]
    assert differing_digests(total, replicas[0], 3) == []
    # the same sum of bytes, other bytes: still told apart (the squares differ)
    replicas[:] = [[[1, 3]], [[2, 2]]]
    assert differing_digests(total, replicas[0], 2) == [0]


def test_the_digests_follow_what_workers_share_and_not_their_paths(
        pretrained_dir, toy_sst2_dir, tiny_vocab, tmp_path):
    """Each part changes with what it stands for (a seed, a train example, the starting
    weights), and no part with a worker's own paths to the same files."""
    trainer = toy_trainer("sst2", toy_sst2_dir, pretrained_dir, tmp_path / "a", 16)
    _, feats = trainer.features("train")

    def digests(feats=feats):
        parts = {**trainer._start_digests(), **trainer._model_digests(feats)}
        return {name: part() for name, part in parts.items()}

    before = digests()
    assert set(before) == {"flags", "labels", "checkpoints", "examples", "weights",
                           "evaluation"}
    data, init = tmp_path / "SST-2", tmp_path / "pretrained"
    shutil.copytree(toy_sst2_dir, data)
    shutil.copytree(pretrained_dir, init)
    run = trainer.run
    trainer.run = dataclasses.replace(run, model_dir=str(tmp_path / "b"), data_dir=str(data),
                                      init_checkpoint=str(init), vocab_file=tiny_vocab,
                                      worker_startup_timeout_s=5)
    assert digests() == before  # each machine's own copy, elsewhere
    trainer.run = run

    def changed(after):
        return sorted(name for name in before if after[name] != before[name])

    config = trainer.config
    trainer.config = dataclasses.replace(config, seed=config.seed + 1)
    assert changed(digests()) == ["flags"]
    trainer.config = config
    trainer.run = dataclasses.replace(run, log_every_steps=7)  # where the workers stop
    assert changed(digests()) == ["flags"]
    trainer.run = run
    other = dataclasses.replace(feats, inputs=dict(feats.inputs))
    other.inputs["input_ids"] = feats.inputs["input_ids"].copy()
    other.inputs["input_ids"][5, 2] += 1
    assert changed(digests(other)) == ["examples"]
    trainer.run = dataclasses.replace(run, do_eval=True)  # a worker's own dev file
    before = digests()
    examples, dev = trainer.features("dev")
    other = dataclasses.replace(dev, labels={k: v.copy() for k, v in dev.labels.items()})
    next(iter(other.labels.values()))[0] += 1
    trainer._features["dev"] = (examples, other)
    assert changed(digests()) == ["evaluation"]
    trainer._features["dev"] = (examples, dev)
    trainer.run = run
    before = digests()
    weight = trainer.model.weights[0]
    weight.assign(weight + 1.0)
    assert changed(digests()) == ["weights"]


def test_a_refusal_names_the_flags_that_differ():
    """The flags are compared one by one: the refusal names those that differ (it had
    said "different flags (--seed, --train_batch_size, ...)" whichever differed), and
    the parts after the flags name what they stand for."""
    from electra_tf.core.errors import ConfigError
    from electra_tf.training.finetuning import Finetuning
    from electra_tf.training.loop import flag_digests, settings_digest

    def refusal(mine: dict, theirs: dict, labels=("a", "b")) -> str:
        def parts(flags, labels):
            return {"flags": lambda: flag_digests(flags),
                    "labels": lambda: settings_digest(list(labels))}
        other = [d for part in parts(theirs, ("a", "b")).values() for d in (
            part().values() if isinstance(part(), dict) else [part()])]
        worker = types.SimpleNamespace(multi_worker=True, _differing=lambda digests: [
            i for i, (a, b) in enumerate(zip(digests, other)) if a != b])
        with pytest.raises(ConfigError) as raised:
            Finetuning._agree(worker, parts(mine, labels))
        return str(raised.value)

    flags = {"seed": 3, "learning_rate": 1e-4, "num_train_epochs": 3.0}
    assert refusal({**flags, "seed": 9, "num_train_epochs": 2.0}, flags) == (
        "--strategy=multi_worker: the workers were started with different --num_train_epochs, "
        "--seed (every flag but the paths must be the same); start every worker with the "
        "same flags")
    assert refusal(flags, flags, labels=("a", "c")).startswith(
        "--strategy=multi_worker: the workers learned different labels")


def test_pretraining_refusal_names_its_flags_or_the_checkpoints():
    from electra_tf.training.pretraining import Pretraining

    assert str(Pretraining.differing_settings("--jax_num_processes=2", [
        "resolved_max_predictions_per_seq", "max_predictions_per_seq", "seed"])) == (
        "--jax_num_processes=2: the processes of the run were started with different "
        "--max_predictions_per_seq, --seed (every flag but the paths must be the same); "
        "start every process with the same flags")
    assert str(Pretraining.differing_settings("--strategy=multi_worker", ["checkpoints"])) == (
        "--strategy=multi_worker: the processes of the run see different checkpoints in "
        "--model_dir (a folder that is not one shared folder); give every process one "
        "shared --model_dir")


def test_pretraining_digests_compare_what_each_process_s_data_paths_hold(tmp_path, tiny_vocab):
    """The data paths are each process's own (its machine's copy): copies agree, but a
    worker given other shards (the held-out one had been trained on, silently) or
    another vocabulary of the same size is refused, naming the flag."""
    import types

    from electra_tf.core.config import PretrainingConfig, PretrainingRun
    from electra_tf.training.pretraining import Pretraining

    def digests(folder, shards, vocab):
        os.makedirs(folder, exist_ok=True)
        files = []
        for name, data in shards.items():
            files.append(os.path.join(folder, name))
            with open(files[-1], "wb") as f:
                f.write(data)
        run = PretrainingRun(model_dir=str(tmp_path / "m"), train_data=f"{folder}/*",
                             vocab_file=vocab)
        return Pretraining.settings_digests(types.SimpleNamespace(
            config=PretrainingConfig(), run=run, files={"train": files, "eval": []}))

    shards = {"data-00000": b"abc", "data-00001": b"defg"}
    chief = digests(str(tmp_path / "a"), shards, tiny_vocab)
    assert digests(str(tmp_path / "copy"), shards, tiny_vocab) == chief
    other = digests(str(tmp_path / "b"), {"data-00003": b"held out"}, tiny_vocab)
    tokens = open(tiny_vocab, encoding="utf-8").read().splitlines()
    swapped = tmp_path / "vocab.txt"  # the same size, two tokens swapped
    tokens[-1], tokens[-2] = tokens[-2], tokens[-1]
    swapped.write_text("\n".join(tokens) + "\n")
    renamed = digests(str(tmp_path / "c"), shards, str(swapped))
    for mine, flag in ((other, "--train_data"), (renamed, "--vocab_file")):
        differ = [name for name in chief if chief[name] != mine[name]]
        assert str(Pretraining.differing_settings("--strategy=multi_worker", differ)) == (
            f"--strategy=multi_worker: the processes of the run read different {flag} "
            "(files of other names or sizes, or another vocabulary): give every process a "
            "copy of the same files")


def finetune_flags(data_dir, init, model_dir, epochs=1):
    return ["--task_name=sst2", f"--data_dir={data_dir}", f"--init_checkpoint={init}",
            f"--model_dir={model_dir}", "--max_seq_length=16", "--train_batch_size=16",
            f"--num_train_epochs={epochs}", "--log_every_steps=5", "--seed=3"]


def refused(ended, reason: str) -> None:
    """Both workers ended with the one line naming `reason` (exit 2), no traceback."""
    for code, err in ended:
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert code == 2 and errors == [
            f"error: --strategy=multi_worker: the workers {reason}"], err[-3000:]
        assert "Traceback" not in err, err[-3000:]


@pytest.mark.slow  # eight 2-worker starts
def test_finetuning_workers_that_differ_are_refused_on_every_worker(
        pretrained_dir, toy_sst2_dir, tiny_vocab, tmp_path):
    """Two workers that agree train a trial group of two (the chief writes the group's
    record, the other nothing); workers that differ, in a single run or a group, end
    with one line each before they train."""
    group = tmp_path / "group"
    flags = finetune_flags(toy_sst2_dir, pretrained_dir, group)
    # worker 1 reads its own copy of the data, a file more in it (the group's record
    # hashes every file: a false refusal before each worker's examples were compared)
    copy = tmp_path / "SST-2"
    shutil.copytree(toy_sst2_dir, copy)
    (copy / "README.txt").write_text("notes")
    ended = run_workers([*flags, "--num_trials=2"], module="electra_tf.run_finetuning",
                        extra=((), (f"--data_dir={copy}",)))
    for code, err in ended:
        assert code == 0, err[-3000:]
    assert "trial 2/2 done" in ended[1][1] and "wrote" not in ended[1][1]
    trials = json.loads((tmp_path / "group" / "trials.json").read_text())["trials"]
    assert [t["seed"] for t in trials] == [3, 4]
    shared = tmp_path / "group_1"
    assert (shared / "finetuned.weights.h5").exists()
    assert not list(shared.glob(".worker_*"))
    kept = sorted(os.listdir(shared / "checkpoints"))
    # the trained group evaluated by both workers (the chief's evaluation written)
    ended = run_workers([*flags, "--num_trials=2", "--do_train=false"],
                        module="electra_tf.run_finetuning")
    for code, err in ended:
        assert code == 0, err[-3000:]
    assert "2 trials evaluated" in ended[0][1], ended[0][1][-3000:]
    assert json.loads((shared / "results.json").read_text())["eval"] == trials[0]["results"]

    # the group again, worker 1 with a group folder of its own: the chief had skipped
    # the finished trials and ended, worker 1 trained trial 1 alone until it failed
    refused(run_workers([*flags, "--num_trials=2"], module="electra_tf.run_finetuning",
                        extra=((), (f"--model_dir={tmp_path / 'own_group'}",))),
            "see different trial groups in --model_dir (a folder that is not one shared "
            "folder, or other flags); give every worker one shared --model_dir and the same "
            "flags")
    assert json.loads((tmp_path / "group" / "trials.json").read_text())["trials"] == trials
    # the chief's folder refuses a group (a single run's), worker 1's is a new one: worker
    # 1 had waited for the chief's comparison, then said it "cannot be reached"
    (chief, chief_err), (worker, worker_err) = run_workers(
        [*flags, "--num_trials=2"], module="electra_tf.run_finetuning",
        extra=((f"--model_dir={shared}",), (f"--model_dir={tmp_path / 'new_group'}",)))
    assert chief == 2 and [line for line in chief_err.splitlines() if line.startswith(
        "error:")] == [f"error: --model_dir {shared} is the folder of a single fine-tuning "
                       "run (finetuning_config.json); --num_trials writes a group folder "
                       "and its _1 .. _N trials: give another --model_dir"], chief_err[-3000:]
    refused([(worker, worker_err)], "see different trial groups in --model_dir (a folder "
            "that is not one shared folder, or other flags); give every worker one shared "
            "--model_dir and the same flags")
    assert not (tmp_path / "new_group_1").exists()

    # a group on worker 0, a single run on worker 1: had ended in a collective's shape
    # mismatch traceback (each path compared other things)
    refused(run_workers(finetune_flags(toy_sst2_dir, pretrained_dir, tmp_path / "mixed"),
                        module="electra_tf.run_finetuning", extra=(("--num_trials=2",), ())),
            "were started with different --num_trials or --keep_all_models; start every "
            "worker with the same flags")

    # another --seed on worker 1: had trained on with the chief, exit 0
    seeds = tmp_path / "seeds"
    refused(run_workers(finetune_flags(toy_sst2_dir, pretrained_dir, seeds),
                        module="electra_tf.run_finetuning", extra=((), ("--seed=9",))),
            "were started with different --seed (every flag but the paths must be the "
            "same); start every worker with the same flags")
    assert not (seeds / "checkpoints").exists()

    # two more epochs of trial 1's run, worker 1 with a folder of its own: the chief
    # had resumed alone and written its weights, worker 1 waited forever
    own = tmp_path / "own"
    refused(run_workers(finetune_flags(toy_sst2_dir, pretrained_dir, shared, epochs=3),
                        module="electra_tf.run_finetuning", extra=((), (f"--model_dir={own}",))),
            "see different checkpoints in --model_dir (a folder that is not one shared "
            "folder); give every worker one shared --model_dir")
    assert sorted(os.listdir(shared / "checkpoints")) == kept
    assert not own.exists()  # worker 1's own folder (it had been left empty)

    # an evaluation of the trials' folders, one each, their checkpoints at the same
    # step: had evaluated two models (the weights were compared before the restore)
    ended = run_workers([*finetune_flags(toy_sst2_dir, pretrained_dir, shared),
                         "--do_train=false"], module="electra_tf.run_finetuning",
                        extra=((), (f"--model_dir={tmp_path / 'group_2'}",)))
    refused(ended, "see different checkpoints in --model_dir (a folder that is not one "
                   "shared folder); give every worker one shared --model_dir")

    # worker 1 starts from other pre-trained weights (a model of mixed starts)
    other = write_pretrained_dir(tmp_path / "other", tiny_vocab, seed=1)
    starts = tmp_path / "starts"
    refused(run_workers(finetune_flags(toy_sst2_dir, pretrained_dir, starts),
                        module="electra_tf.run_finetuning",
                        extra=((), (f"--init_checkpoint={other}",))),
            "start from different weights (other files in --init_checkpoint); give every "
            "worker the same model to start from")
    assert not starts.exists()  # (an empty folder had been left)
