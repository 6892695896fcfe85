"""Fine-tuning from run_finetuning's flags on separable toy tasks; decay rates per variable.

The runs are run_finetuning's main in this process (helpers.finetune: its flags, its
task, the TensorFlow trainer); the command line itself is checked once, by the
error-path test below (and by the Ctrl-C test of test_finetuning_faults.py).
"""

import dataclasses
import json
import os
import re
from pathlib import Path

import pytest
from helpers import error_line, finetune, run_module

from electra_tf.core.errors import ConfigError


def test_flags_learn_toy_sst2_and_resume(pretrained_dir, toy_sst2_dir, tmp_path, capsys):
    args = ["--task_name=sst2", f"--init_checkpoint={pretrained_dir}",
            f"--data_dir={toy_sst2_dir}", f"--model_dir={tmp_path}/out", "--num_train_epochs=6",
            "--learning_rate=3e-3", "--train_batch_size=16", "--max_seq_length=16",
            "--save_checkpoints_steps=20", "--do_predict"]
    finetune(*args)
    results = json.load(open(tmp_path / "out" / "results.json"))
    assert results["epoch_6"]["dev"]["accuracy"] >= 0.9, results
    files = os.listdir(tmp_path / "out")
    assert "finetuned.weights.h5" in files and "SST-2.tsv" in files, files
    record = open(tmp_path / "out" / "finetuning_config.json").read()
    assert json.loads(record)["backend"] == "tensorflow"
    # Running again resumes at the end: nothing to do, same results; the record keeps
    # the run options the model was trained with (another run's had replaced them)
    capsys.readouterr()
    _, again = finetune(*args, "--jit_compile")
    assert "resumed from" in capsys.readouterr().err
    assert again["epoch_6"] == results["epoch_6"]
    assert open(tmp_path / "out" / "finetuning_config.json").read() == record


def test_layerwise_decay_rate_per_variable(pretrained_dir, tmp_path, toy_sst2_dir):
    from electra_tf.core.config import FinetuningConfig, FinetuningRun
    from electra_tf.tasks.registry import get_task
    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    config = FinetuningConfig(task_name="sst2", layerwise_lr_decay=0.8, max_seq_length=16,
                              num_train_epochs=0.1)  # one step: the optimizer gets built
    ft = TensorFlowFinetuning(get_task("sst2"), config,
                    FinetuningRun(model_dir=str(tmp_path), data_dir=toy_sst2_dir,
                                  init_checkpoint=pretrained_dir, do_eval=False))
    ft.train()
    n = ft.encoder_config.num_hidden_layers
    seen = set()
    for v in ft.model.trainable_variables:
        m = ft.optimizer.lr_multiplier(v)
        if "/embeddings" in v.path:
            depth = 0
        elif "/layer_" in v.path:
            depth = int(v.path.split("/layer_")[1].split("/")[0]) + 1
        else:
            assert "task_specific/" in v.path, v.path
            depth = n + 2
        assert m == pytest.approx(0.8 ** (n + 2 - depth)), (v.path, m)
        seen.add(depth)
    assert seen == set(range(n + 1)) | {n + 2}  # embeddings, every layer, the head


def test_checkpoint_of_another_size_is_a_clear_error(pretrained_dir, toy_sst2_dir, tmp_path):
    with pytest.raises(ConfigError, match="not --model_size=base"):
        finetune("--task_name=sst2", "--model_size=base", f"--init_checkpoint={pretrained_dir}",
                 f"--data_dir={toy_sst2_dir}", f"--model_dir={tmp_path}/o")
    assert not (tmp_path / "o").exists()


def test_ner_flagfile_learns_toy_ner(pretrained_dir, toy_ner_dir, tmp_path):
    finetune("--flagfile=configs/ner.flags", f"--init_checkpoint={pretrained_dir}",
             f"--data_dir={toy_ner_dir}", f"--model_dir={tmp_path}/out", "--num_train_epochs=6",
             "--learning_rate=3e-3", "--train_batch_size=16", "--max_seq_length=16")
    results = json.load(open(tmp_path / "out" / "results.json"))
    assert results["epoch_6"]["dev"]["f1"] >= 0.9, results
    config = json.load(open(tmp_path / "out" / "finetuning_config.json"))
    assert config["label_names"][0] == "O" and "B-ORG" in config["label_names"]
    assert os.path.exists(tmp_path / "out" / "ner_dev_predictions.txt")


def _squad_outputs(model_dir):
    with open(os.path.join(model_dir, "squad_v2_dev_predictions.json")) as f:
        answers = json.load(f)
    with open(os.path.join(model_dir, "squad_v2_dev_null_odds.json")) as f:
        null_odds = json.load(f)
    with open(os.path.join(model_dir, "finetuning_config.json")) as f:
        record = json.load(f)
    return answers, null_odds, record


def test_squad_flagfile_learns_toy_squad_v2(pretrained_dir, toy_squad_dir, tmp_path, capsys):
    """The defaults: the joint head (trained on the gold starts, decoded with its beam)
    and the original's null rule with qa_na_threshold -2.75."""
    from electra_tf import folders

    finetune("--flagfile=configs/squad_v2.flags", f"--init_checkpoint={pretrained_dir}",
             f"--data_dir={toy_squad_dir}", f"--model_dir={tmp_path}/out",
             "--num_train_epochs=3", "--learning_rate=3e-3", "--train_batch_size=16",
             "--max_seq_length=24")
    # the task warns when it gets an independent head's outputs: the joint head was built
    err = capsys.readouterr().err
    assert "decoding start/end logits" not in err, err[-3000:]
    results = json.load(open(tmp_path / "out" / "results.json"))
    assert results["epoch_3"]["dev"]["f1"] >= 90.0, results
    answers, null_odds, record = _squad_outputs(tmp_path / "out")
    assert record["head_options"] == {"span_head": "joint", "beam_size": 20}
    assert record["finetuning"]["squad_null_rule"] == "answerable"
    for qid, answer in answers.items():  # "" exactly when the null odds exceed -2.75
        assert (answer == "") == (null_odds[qid] > -2.75), (qid, answer, null_odds[qid])
    model, loaded = folders.finetuned.load_finetuned(str(tmp_path / "out"))
    assert model.head.span_head == "joint" and loaded.head_options["beam_size"] == 20


def test_squad_task_flags_reach_the_task(pretrained_dir, toy_squad_dir, tmp_path, capfd):
    """--joint_prediction, --beam_size and --qa_na_threshold are the task's, not only
    recorded: a threshold below every null odds answers nothing. The windows and
    decoding (--max_query_length, --doc_stride, --n_best_size, --max_answer_length, the
    original's hparams) are the task's, recorded, and what the export serves."""
    from electra_tf import folders
    from electra_tf.serving.export import load_spec

    trainer, _ = finetune(
        "--task_name=squad_v2", f"--init_checkpoint={pretrained_dir}",
        f"--data_dir={toy_squad_dir}", f"--model_dir={tmp_path}/out", "--num_train_epochs=1",
        "--learning_rate=3e-3", "--train_batch_size=16", "--max_seq_length=24",
        "--joint_prediction=false", "--beam_size=3", "--qa_na_threshold=-1e6",
        "--max_query_length=3", "--doc_stride=2", "--n_best_size=4", "--max_answer_length=2",
        "--answerable_uses_start_logits=false", "--answerable_weight=2")
    answers, null_odds, record = _squad_outputs(tmp_path / "out")
    # the answerability loss's weight (the original's answerable_weight): the loss's, a
    # setting of the run, not of the model
    assert trainer.task.loss_options == {"answerable_weight": 2.0}
    assert record["finetuning"]["answerable_weight"] == 2.0
    assert record["head_options"] == {"span_head": "independent", "beam_size": 3,
                                      "answerable_uses_start_logits": False}
    assert set(answers.values()) == {""}, answers
    model, _ = folders.finetuned.load_finetuned(str(tmp_path / "out"))
    assert model.head.span_head == "independent"
    # the original's classifier without start logits: dense(1) of [CLS] alone
    assert [v.path.split("/", 1)[1] for v in model.head.weights if "answerable" in v.path] \
        == ["task_specific/answerable_output/kernel", "task_specific/answerable_output/bias"]
    task = trainer.task
    options = {"max_query_length": 3, "doc_stride": 2, "n_best_size": 4, "max_answer_length": 2}
    assert {k: getattr(task, k) for k in options} == options
    assert {k: record["finetuning"][k] for k in options} == options
    # a question of more pieces is cut to 3, and a window starts every 2 pieces (of 3,
    # at 9 positions)
    examples = task.read(str(toy_squad_dir), "dev")
    feats = task.featurize(examples, trainer.tokenizer, 9)
    first = [w for w in feats.extra if w.example_index == 0]
    assert len(first) > 1, first
    assert max(w.context_offset for w in feats.extra) == 3 + 2
    assert [w.doc_start for w in first] == list(range(0, 2 * len(first), 2)), first
    spec = load_spec("squad", str(tmp_path / "out"))  # the export serves the run's
    assert (spec.max_query_length, spec.doc_stride, spec.max_answer_length) == (3, 2, 2)
    spec = load_spec("squad", str(tmp_path / "out"), max_query_length=5, doc_stride=7)
    assert (spec.max_query_length, spec.doc_stride, spec.max_answer_length) == (5, 7, 2)
    # convert --to=hf says what transformers' config leaves behind, in its pipeline's words
    from electra_tf.interop import hf

    assert ("was fine-tuned with --max_query_length=3 --doc_stride=2 --max_answer_length=2, "
            "which transformers' config does not hold: give its question-answering pipeline "
            "max_question_len=3, doc_stride=2, max_answer_len=2") in hf.export_note(
                str(tmp_path / "out"))
    # an evaluation of the folder reads it with its own windows and decoding (as its
    # export serves it), unless told otherwise
    evaluated, _ = finetune(
        "--task_name=squad_v2", f"--init_checkpoint={tmp_path}/out", "--do_train=false",
        f"--data_dir={toy_squad_dir}", f"--model_dir={tmp_path}/eval", "--max_seq_length=24",
        "--max_answer_length=5")
    assert {k: getattr(evaluated.task, k) for k in options} == {**options,
                                                                "max_answer_length": 5}
    assert not evaluated.model.head.uses_start_logits  # its classifier, unasked
    # as SQuAD 1.1, which has no use for the classifier: left out, and said so (it had
    # been dropped without a word)
    v1 = tmp_path / "v1"
    v1.mkdir()
    data = json.loads((Path(toy_squad_dir) / "dev-v2.0.json").read_text())
    paragraphs = data["data"][0]["paragraphs"]  # 1.1 has answerable questions only
    paragraphs[:] = [p for p in paragraphs if not p["qas"][0].pop("is_impossible")]
    (v1 / "dev-v1.1.json").write_text(json.dumps({**data, "version": "1.1"}))
    capfd.readouterr()
    finetune("--task_name=squad_v1", f"--init_checkpoint={tmp_path}/out", "--do_train=false",
             f"--data_dir={v1}", f"--model_dir={tmp_path}/eval_v1", "--max_seq_length=24")
    assert (f"its head from {tmp_path}/out; left out (this task has no use for them): "
            "task_specific/answerable_output\n") in capfd.readouterr().err
    # the windows are the training data, the classifier the model: a resume with others
    # is refused
    with pytest.raises(ConfigError, match=re.escape(
            "--doc_stride=3 (trained with 2), --answerable_uses_start_logits=True (trained "
            "with False), --answerable_weight=0.5 (trained with 2.0)")):
        finetune("--task_name=squad_v2", f"--init_checkpoint={pretrained_dir}",
                 f"--data_dir={toy_squad_dir}", f"--model_dir={tmp_path}/out",
                 "--num_train_epochs=1", "--learning_rate=3e-3", "--train_batch_size=16",
                 "--max_seq_length=24", "--joint_prediction=false", "--beam_size=3",
                 "--qa_na_threshold=-1e6", "--max_query_length=3", "--doc_stride=3",
                 "--n_best_size=4", "--max_answer_length=2")



@pytest.mark.slow  # three runs; the note itself: test_a_resume_that_decodes_otherwise_says_so
def test_a_resumed_squad_run_that_decodes_otherwise_says_so(pretrained_dir, toy_squad_dir,
                                                          tmp_path, capfd):
    """A resume that decodes otherwise (allowed: the training is the same) says that the
    epochs it scores are scored unlike the earlier ones (it had been silent)."""
    from helpers import finetuning_from_flags

    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    flags = ["--task_name=squad_v2", f"--init_checkpoint={pretrained_dir}",
             f"--data_dir={toy_squad_dir}", f"--model_dir={tmp_path}/part",
             "--num_train_epochs=2", "--train_batch_size=16", "--max_seq_length=24",
             "--joint_prediction=false", "--max_query_length=3", "--doc_stride=2"]
    TensorFlowFinetuning(*finetuning_from_flags(*flags)).train(stop_at_step=1)
    capfd.readouterr()  # (15 steps an epoch) nothing scored yet: nothing to say
    TensorFlowFinetuning(*finetuning_from_flags(*flags, "--n_best_size=5")).train(
        stop_at_step=15)
    assert "note:" not in capfd.readouterr().err
    finetune(*flags, "--n_best_size=4", "--max_answer_length=2", "--qa_na_threshold=-1e6")
    assert (f"note: {tmp_path}/part's earlier epochs were scored with --n_best_size=5 "
            "--max_answer_length=30 --qa_na_threshold=-2.75; this run scores the next with "
            "--n_best_size=4 --max_answer_length=2 --qa_na_threshold=-1000000.0 (results.json "
            "keeps the earlier scores; finetuning_config.json now records these, which an "
            "export serves)\n") in capfd.readouterr().err


def test_squad_v2_without_the_answerability_classifier(pretrained_dir, toy_squad_dir,
                                                      tmp_path):
    """The original's answerable_classifier=False: no classifier, and no-answer by its
    qa_metrics.py (start + end at [CLS] less the best span's, at qa_na_threshold): the
    combined rule without the logit. The folder serves it so, evaluates so, and says it
    to transformers; the joint head has no end logit at [CLS] for it (one line)."""
    from electra_tf import Predictor, folders
    from electra_tf.core.config import FinetuningConfig
    from electra_tf.interop import hf
    from electra_tf.tasks.heads.span import SpanHead
    from electra_tf.tasks.registry import get_task, unused_options
    from electra_tf.training.finetuning import _resolved_settings

    with pytest.raises(ValueError, match=r"which the joint head does not predict: use "
                                         r"joint_prediction=False with it"):
        get_task("squad_v2", answerable_classifier=False)
    common = ("--task_name=squad_v2", f"--data_dir={toy_squad_dir}", "--max_seq_length=24")
    trainer, _ = finetune(
        *common, f"--init_checkpoint={pretrained_dir}", f"--model_dir={tmp_path}/out",
        "--num_train_epochs=1", "--learning_rate=3e-3", "--train_batch_size=16",
        "--joint_prediction=false", "--answerable_classifier=false")
    assert not trainer.model.head.answerable
    assert not [v for v in trainer.model.head.weights if "answerable" in v.path]
    assert (trainer.task.null_odds_from, trainer.task.no_answer_threshold) == ("combined",
                                                                               -2.75)
    answers, null_odds, record = _squad_outputs(tmp_path / "out")
    assert not record["answerable"] and record["finetuning"]["answerable_classifier"] is False
    assert "answerable_uses_start_logits" not in record["head_options"]
    for qid, answer in answers.items():  # "" exactly when the null odds exceed -2.75
        assert (answer == "") == (null_odds[qid] > -2.75), (qid, answer, null_odds[qid])
    model, _ = folders.finetuned.load_finetuned(str(tmp_path / "out"))
    assert not model.head.answerable
    spec = Predictor.open(str(tmp_path / "out")).spec
    assert (spec.v2, spec.answerable, SpanHead._null_rule(spec), spec.no_answer_threshold) \
        == (True, False, "combined", -2.75)
    assert "exceed -2.75" in hf.export_note(str(tmp_path / "out"))
    # evaluated from the folder with SQuAD 2.0's defaults: its own rule, a record to match
    evaluated, _ = finetune(*common, f"--init_checkpoint={tmp_path}/out", "--do_train=false",
                            "--joint_prediction=false", f"--model_dir={tmp_path}/eval")
    assert not evaluated.model.head.answerable
    assert (evaluated.task.null_odds_from, evaluated.task.no_answer_threshold) == (
        "combined", -2.75)
    assert _squad_outputs(tmp_path / "eval")[0] == answers
    assert _squad_outputs(tmp_path / "eval")[2]["finetuning"]["answerable_classifier"] is False
    # squad_v1 has no classifier to leave out: a note says the flag does nothing, and its
    # variant is no setting a resume compares
    config = FinetuningConfig(task_name="squad_v1", answerable_classifier=False,
                              answerable_uses_start_logits=False, answerable_weight=1.0)
    assert unused_options(config) == [
        "--answerable_classifier (SQuAD 2.0's answerability classifier; squad_v1 has none)",
        "--answerable_uses_start_logits (SQuAD 2.0's answerability classifier; squad_v1 has "
        "none)",
        "--answerable_weight (SQuAD 2.0's answerability classifier; squad_v1 has none)"]
    v1 = get_task("squad_v1")
    assert _resolved_settings(config, v1, "small")["answerable_uses_start_logits"] is True
    assert _resolved_settings(config, v1, "small")["answerable_weight"] == 0.5
    # nor has a SQuAD 2.0 run without the classifier
    assert unused_options(dataclasses.replace(
        config, task_name="squad_v2", joint_prediction=False)) == [
        "--answerable_uses_start_logits (the answerability classifier's; "
        "--answerable_classifier=false trains none)",
        "--answerable_weight (the answerability classifier's; --answerable_classifier=false "
        "trains none)"]
    assert "answerable_uses_start_logits" not in get_task(
        "squad_v1", answerable_uses_start_logits=False).head_options


def test_cli_combined_null_rule_with_the_joint_head_is_one_line(tmp_path):
    """The one command-line test of run_finetuning's error path: the task refuses the
    options together (a ValueError), which main reports as one `error:` line, status 2."""
    proc = run_module("electra_tf.run_finetuning", "--task_name=squad_v2",
                      "--squad_null_rule=combined", f"--init_checkpoint={tmp_path}/none",
                      f"--data_dir={tmp_path}", f"--model_dir={tmp_path}/out")
    line = error_line(proc, "joint_prediction")
    assert proc.stderr.strip().splitlines()[-1] == line, proc.stderr[-2000:]
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def toy_stsb_dir(tmp_path_factory):
    """STS-B layout; the score is 5 when both sentences hold 'replaced', else 0."""
    import random

    from helpers import WORDS

    out = tmp_path_factory.mktemp("STS-B")
    rng = random.Random(3)
    words = [w for w in WORDS if w != "replaced"]
    for split, n in (("train", 96), ("dev", 32)):
        rows = ["index\tsentence1\tsentence2\tscore"]
        for i in range(n):
            similar = rng.random() < 0.5
            pair = []
            for _ in range(2):
                s = [rng.choice(words) for _ in range(rng.randint(3, 6))]
                if similar:
                    s.insert(rng.randint(0, len(s)), "replaced")
                pair.append(" ".join(s))
            rows.append(f"{i}\t{pair[0]}\t{pair[1]}\t{5.0 if similar else 0.0}")
        (out / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    return str(out)


def test_stsb_double_unordered_flag_and_label_scale(pretrained_dir, toy_stsb_dir, tmp_path,
                                                    capsys):
    """--double_unordered=false reaches the task (96 train windows, not 192), and the
    folder records the 0..5 scale the export serves."""
    finetune("--flagfile=configs/glue_stsb.flags", f"--init_checkpoint={pretrained_dir}",
             f"--data_dir={toy_stsb_dir}", f"--model_dir={tmp_path}/out",
             "--num_train_epochs=1", "--learning_rate=3e-3", "--train_batch_size=16",
             "--max_seq_length=24", "--double_unordered=false")
    err = capsys.readouterr().err
    assert "stsb: 96 train windows" in err, err[-3000:]
    record = json.load(open(tmp_path / "out" / "finetuning_config.json"))
    assert record["label_scale"] == [0.0, 5.0] and record["head_options"] == {}
    assert record["finetuning"]["double_unordered"] is False


def _weights(ft):
    import numpy as np

    return [np.array(v.numpy()) for v in ft.model.trainable_variables]


# Slow: three runs. By default the JAX loop resumes mid-epoch exactly (the same skip of
# the epoch's batches, test_finetuning_jax.py) and the TF loop's resumed results equal the
# whole run's (test_finetuning_faults.py's two Ctrl-C at an epoch's end).
@pytest.mark.slow
def test_interrupted_and_resumed_equals_uninterrupted(pretrained_dir, toy_sst2_dir, tmp_path):
    import numpy as np

    from electra_tf.core.config import FinetuningConfig, FinetuningRun
    from electra_tf.tasks.registry import get_task
    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    config = FinetuningConfig(task_name="sst2", max_seq_length=16, num_train_epochs=2,
                              train_batch_size=32, save_checkpoints_steps=4, seed=1)

    def make(name):
        return TensorFlowFinetuning(get_task("sst2"), config, FinetuningRun(
            model_dir=str(tmp_path / name), data_dir=toy_sst2_dir,
            init_checkpoint=pretrained_dir, do_eval=False))

    straight = make("a")
    straight.train()
    first = make("b")
    first.train(stop_at_step=13)  # mid-epoch 2, between checkpoints: saved at 13
    resumed = make("b")
    resumed.train()
    assert int(resumed.optimizer.iterations.numpy()) == 20
    for x, y in zip(_weights(straight), _weights(resumed)):
        np.testing.assert_array_equal(x, y)


@pytest.mark.slow  # bf16 and XLA in pre-training: tests/training/test_training_loop.py
def test_jit_and_bf16_fine_tuning_runs(pretrained_dir, toy_sst2_dir, tmp_path):
    import keras

    from electra_tf.core.config import FinetuningConfig, FinetuningRun
    from electra_tf.tasks.registry import get_task
    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    try:
        ft = TensorFlowFinetuning(get_task("sst2"), FinetuningConfig(
            task_name="sst2", max_seq_length=16, num_train_epochs=1, learning_rate=3e-3),
            FinetuningRun(model_dir=str(tmp_path), data_dir=toy_sst2_dir,
                          init_checkpoint=pretrained_dir, jit_compile=True, mixed_precision="bf16"))
        results = ft.train()
        assert 0.0 <= results["epoch_1"]["dev"]["accuracy"] <= 1.0
        assert ft.model.encoder.compute_dtype == "bfloat16"
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
