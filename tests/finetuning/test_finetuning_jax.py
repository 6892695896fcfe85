"""The JAX backend's fine-tuning loop (training/backends/jax.py), on CPU.

Each JAX run is in another process with KERAS_BACKEND=jax (the backend is fixed
per process; this one runs Keras on TensorFlow): a script on one device, in the
process of helpers.run_jax_script, which runs the suite's JAX scripts one after
the other. Skipped where jax is not installed.
"""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import REPO, jax_child_env, patience, run_jax_script

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                reason="jax is not installed (pip install 'jax[cpu]')")

L = 16


def run_jax(script: str, *args: str, module: bool = False,
            devices: int = 1) -> subprocess.CompletedProcess:
    """`python -c script args` (or `python -m script args`) under KERAS_BACKEND=jax, on
    `devices` CPU devices (a script: in helpers.run_jax_script's shared process for that
    device count)."""
    if not module:
        return run_jax_script(script, *args, devices=devices)
    return subprocess.run([sys.executable, "-m", script, *args], cwd=REPO,
                          env=jax_child_env(devices), capture_output=True, text=True,
                          timeout=patience(600))


def last_json(proc: subprocess.CompletedProcess):
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.splitlines()[-1])


# Both sides build the trainer from one JSON spec: {"task", "config", "run"}.
def spec(task, model_dir, data_dir, init, **config):
    return {"task": task,
            "config": {"task_name": task, "max_seq_length": L, "seed": 1, **config},
            "run": {"model_dir": str(model_dir), "data_dir": data_dir, "init_checkpoint": init}}


def make_trainer(s, **run):
    """The trainer of this process's backend for a spec."""
    import keras

    from electra_tf.core.config import FinetuningConfig, FinetuningRun
    from electra_tf.tasks.registry import get_task

    config, run = FinetuningConfig(**s["config"]), FinetuningRun(**{**s["run"], **run})
    if keras.backend.backend() == "jax":
        from electra_tf.training.backends.jax import JaxFinetuning

        return JaxFinetuning(get_task(s["task"]), config, run)
    from electra_tf.training.backends.tensorflow import TensorFlowFinetuning

    return TensorFlowFinetuning(get_task(s["task"]), config, run)


# One JAX process does every run the tests below check (a process start costs
# seconds): the parity runs, a straight and a stopped-then-resumed run, a
# resume attempt on a folder of TF checkpoints, and a run the backend refuses.
JAX_RUNS = """
import json, os, sys
import numpy as np
from electra_tf import folders
from electra_tf.training.checkpoints import NpzCheckpoints
from electra_tf.core.errors import ConfigError, InputError
from tests.finetuning.test_finetuning_jax import make_trainer
parity_specs, (a, b, tf_dir), refused_spec = json.loads(sys.argv[1])
try:  # before anything is built or written
    make_trainer(refused_spec, strategy="multi_worker")
    refused = ""
except ConfigError as e:
    refused = str(e)
refused_wrote = os.path.exists(refused_spec["run"]["model_dir"])
parity = []
for s in parity_specs:  # the initial weights are saved for the TF side to load
    ft = make_trainer(s)
    ft.build_optimizer(10)
    ft.model.save_weights(s["weights"])
    iterator = ft.train_iterator(0)
    parity.append([ft.train_steps(iterator, 1) for _ in range(3)])
straight = make_trainer(a, do_predict=True)
results = straight.train()
make_trainer(b).train(stop_at_step=13)  # mid-epoch 2, between checkpoints
resumed = make_trainer(b)
resumed_results = resumed.train()
logits = straight.predict(straight.features("dev")[1])["logits"]
try:  # the trainer's checkpoints, on a folder of tf.train ones
    NpzCheckpoints(straight.model, straight.optimizer, folders.files.checkpoint_dir(
        tf_dir["run"]["model_dir"]), 2).restore()
    error = ""
except InputError as e:
    error = str(e)
print(json.dumps({"parity": parity, "results": results, "resumed_results": resumed_results,
                  "steps": [straight.step, resumed.step], "logits": logits.tolist(),
                  "weights": [np.asarray(v.value).tolist() for v in straight.model.weights],
                  "resumed": [np.asarray(v.value).tolist() for v in resumed.model.weights],
                  "error": error, "refused": refused, "refused_wrote": refused_wrote}))
"""


def parity_spec(task, tmp, data, init):
    """Without dropout (the checkpoint's 0.1 is replaced: training.finetuning.with_dropout),
    so that a training step is deterministic on both backends."""
    s = spec(task, tmp / f"parity_{task}", data, init, warmup_proportion=0.0,
             learning_rate=1e-3, train_batch_size=16, hidden_dropout_prob=0.0,
             attention_probs_dropout_prob=0.0)
    return {**s, "weights": str(tmp / f"{task}.weights.h5")}


def sst2_spec(tmp, name, data, init):
    return spec("sst2", tmp / name, data, init, num_train_epochs=2, train_batch_size=32,
                save_checkpoints_steps=4, keep_checkpoint_max=2)


@pytest.fixture(scope="module")
def jax_runs(pretrained_dir, toy_sst2_dir, toy_ner_dir, tmp_path_factory):
    import tensorflow as tf

    tmp = tmp_path_factory.mktemp("jax_runs")
    # A folder holding a tf.train checkpoint, as the TF loop leaves one.
    tf.train.Checkpoint(v=tf.Variable(1.0)).save(str(tmp / "tf" / "checkpoints" / "ckpt"))
    parity = [parity_spec("sst2", tmp, toy_sst2_dir, pretrained_dir),
              parity_spec("ner", tmp, toy_ner_dir, pretrained_dir)]
    runs = [sst2_spec(tmp, name, toy_sst2_dir, pretrained_dir) for name in ("a", "b", "tf")]
    refused = spec("sst2", tmp / "refused", toy_sst2_dir, pretrained_dir)
    out = last_json(run_jax(JAX_RUNS, json.dumps([parity, runs, refused])))
    return {"tmp": tmp, "parity_specs": parity, "specs": runs, **out}


def test_tf_and_jax_give_the_same_loss_on_the_same_batches_and_weights(jax_runs):
    """A classification and a tagging head: the same losses at steps 1 to 3 (so the same
    loss, gradients, clipping and layer-wise AdamW update), to float32 tolerance."""
    for s, jax_losses in zip(jax_runs["parity_specs"], jax_runs["parity"]):
        ft = make_trainer(s)
        ft.build_optimizer(10)
        ft.model.load_weights(s["weights"])
        iterator = ft.train_iterator(0)
        tf_losses = [ft.train_steps(iterator, 1) for _ in range(3)]
        assert np.isfinite(tf_losses).all() and tf_losses[0] != tf_losses[2], tf_losses
        np.testing.assert_allclose(jax_losses, tf_losses, rtol=1e-5, err_msg=s["task"])


def test_jax_run_resumes_exactly(jax_runs):
    """Stopped at step 13 and rerun equals the straight run, bit for bit."""
    assert jax_runs["steps"] == [20, 20]
    for x, y in zip(jax_runs["weights"], jax_runs["resumed"]):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert jax_runs["resumed_results"] == jax_runs["results"]
    assert sorted(os.listdir(jax_runs["tmp"] / "b" / "checkpoints")) == ["jax-ckpt-16.npz",
                                                                         "jax-ckpt-20.npz"]


def test_jax_folder_loads_in_the_tf_export_with_the_jax_predictions(jax_runs, toy_sst2_dir):
    from electra_tf import folders
    from electra_tf.serving.export import load_spec
    from electra_tf.tasks.registry import get_task
    from electra_tf.text.tokenizer import Tokenizer

    folder = str(jax_runs["tmp"] / "a")
    served = load_spec("sequence_classification", folder, max_seq_length=L)
    for x, y in zip(jax_runs["weights"], served.model.get_weights()):
        np.testing.assert_array_equal(np.asarray(x, dtype=y.dtype), y)
    model, record = folders.finetuned.load_finetuned(folder)
    assert record.task == "sst2" and record.head == "sequence_classification"
    task = get_task("sst2")
    examples = task.read(toy_sst2_dir, "dev")
    feats = task.featurize(examples, Tokenizer(folders.finetuned.finetuned_vocab(record)), L)
    outputs = {k: np.asarray(v) for k, v in model(feats.inputs, training=False).items()}
    np.testing.assert_allclose(outputs["logits"], np.asarray(jax_runs["logits"]), atol=1e-5)
    metrics = task.metrics(task.predictions(outputs, examples, feats), examples)
    assert metrics == pytest.approx(jax_runs["results"]["epoch_2"]["dev"])
    written = json.load(open(os.path.join(folder, "results.json")))
    assert {k: v for k, v in written.items() if k.startswith("epoch_")} == jax_runs["results"]
    assert {"finetuned.weights.h5", "finetuning_config.json", "SST-2.tsv",
            "sst2_dev_predictions.txt"} <= set(os.listdir(folder))
    for name in ("train", "eval"):  # TensorBoard summaries, as on the TF backend
        assert any(n.startswith("events.out.tfevents.")
                   for n in os.listdir(os.path.join(folder, name))), name
    # the record says what ran: JAX, every step compiled (it had said jit_compile false)
    recorded = json.load(open(os.path.join(folder, "finetuning_config.json")))
    assert recorded["backend"] == "jax" and recorded["run"]["jit_compile"] is True


def test_neither_backend_resumes_the_others_checkpoints(jax_runs):
    from electra_tf.core.errors import InputError

    assert "holds TensorFlow checkpoints" in jax_runs["error"], jax_runs["error"]
    # training on from the other backend's checkpoints (it would start over)
    with pytest.raises(InputError, match="holds JAX checkpoints") as refused:
        make_trainer(jax_runs["specs"][1]).train()
    assert "evaluates on either backend" not in str(refused.value)
    # a finished folder evaluated in place: its weights file evaluates on this backend
    finished = jax_runs["specs"][0]["run"]["model_dir"]
    with pytest.raises(InputError, match=r"holds JAX checkpoints .* \(its finetuned.weights.h5 "
                                         r"evaluates on either backend: --init_checkpoint="
                                         rf"{finished} with another --model_dir\)$"):
        make_trainer(jax_runs["specs"][0], do_train=False).train()


def test_jax_trainer_refuses_what_it_cannot_run(jax_runs):
    """A ConfigError (the CLI's one `error:` line), before anything is written."""
    assert jax_runs["refused"] == (
        "--strategy=multi_worker is not available on the JAX backend (it uses every "
        "local device; for multi-host pre-training, see --jax_coordinator_address)")
    assert not jax_runs["refused_wrote"]


# The token-classification head learns on JAX through the CLI in
# test_jax_cli_learns_own_data_and_tf_serves_the_folder[tagging]; NER's flagfile, data and
# span F1 are the TF tests' (test_finetuning_end_to_end.py), the same on either backend.
@pytest.mark.slow
def test_jax_cli_learns_toy_squad(pretrained_dir, toy_squad_dir, tmp_path):
    """The CLI on JAX: the same console lines, folder and toy scores as the TF tests
    (test_finetuning_end_to_end.py)."""
    proc = run_jax("electra_tf.run_finetuning", "--flagfile=configs/squad_v2.flags",
                   f"--init_checkpoint={pretrained_dir}", f"--data_dir={toy_squad_dir}",
                   f"--model_dir={tmp_path}/out", "--num_train_epochs=3",
                   "--learning_rate=3e-3", "--train_batch_size=16", "--max_seq_length=24",
                   module=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[finetune] squad_v2: " in proc.stderr and "[finetune] done: " in proc.stderr
    results = json.load(open(tmp_path / "out" / "results.json"))
    assert results["epoch_3"]["dev"]["f1"] >= 90.0, results
    from electra_tf import folders

    model, record = folders.finetuned.load_finetuned(str(tmp_path / "out"))
    assert record.task == "squad_v2"
    assert os.path.exists(tmp_path / "out" / "squad_v2_dev_predictions.json")


TWO_DEVICES = """
import json, sys
from tests.finetuning.test_finetuning_jax import make_trainer
s, two, one = (json.loads(a) for a in sys.argv[1:])
for run in (two, one):
    ft = make_trainer(s, **run)
    ft.build_optimizer(10)
    if run is two:  # the initial weights, which the run on one device loads
        ft.model.save_weights(s["weights"])
    ft.model.load_weights(s["weights"])
    iterator = ft.train_iterator(0)
    losses, norms = [], []
    for _ in range(3):
        losses.append(ft.train_steps(iterator, 1))
        norms.append(ft.last_grad_norm)
    logits = ft.predict(ft.features("dev")[1])["logits"]
    replicas = ft.num_replicas if hasattr(ft, "num_replicas") else (
        ft.strategy.num_replicas_in_sync)
    print(json.dumps({"replicas": replicas, "losses": losses, "norms": norms,
                      "logits": logits.tolist()}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_data_parallel_fine_tuning_over_two_devices_matches_one(backend, pretrained_dir,
                                                                toy_sst2_dir, tmp_path):
    """The batch sharded over 2 devices (JAX's DataParallel; TF's MirroredStrategy on two
    logical CPUs) gives one device's losses, gradient norms and predictions: the loss is
    summed over the global batch either way, so clip_norm clips the same gradient (the
    replicas' sums had been divided by the replica count: the norm halved, and what
    clipping let through doubled). (jax_runs' sst2 parity spec; not jax_runs itself,
    which the slow set would build for this test alone.)"""
    s = parity_spec("sst2", tmp_path, toy_sst2_dir, pretrained_dir)
    s["run"] = {**s["run"], "model_dir": str(tmp_path / "two")}
    if backend == "jax":
        proc = run_jax(TWO_DEVICES, json.dumps(s), json.dumps({"num_devices": 2}),
                       json.dumps({"num_devices": 1}), devices=2)
    else:
        path = os.pathsep.join([os.path.join(REPO, "tests"), REPO])
        proc = subprocess.run(
            [sys.executable, "-c", TWO_DEVICES, json.dumps(s),
             json.dumps({"strategy": "mirrored", "num_devices": 2}), "{}"],
            cwd=REPO, env=dict(os.environ, KERAS_BACKEND="tensorflow", PYTHONPATH=path),
            capture_output=True, text=True, timeout=patience(600))
    assert proc.returncode == 0, proc.stderr[-4000:]
    two, one = (json.loads(line) for line in proc.stdout.splitlines()[-2:])
    assert (two["replicas"], one["replicas"]) == (2, 1)
    np.testing.assert_allclose(two["norms"], one["norms"], rtol=1e-5)
    np.testing.assert_allclose(two["losses"], one["losses"], rtol=1e-5)
    np.testing.assert_allclose(two["logits"], one["logits"], atol=1e-5)


@pytest.mark.slow
def test_jax_cli_independent_span_head(pretrained_dir, toy_squad_dir, tmp_path):
    """SQuAD's other head (--joint_prediction=false) trains and is what the folder records."""
    from electra_tf import folders

    proc = run_jax("electra_tf.run_finetuning", "--task_name=squad_v2",
                   f"--init_checkpoint={pretrained_dir}", f"--data_dir={toy_squad_dir}",
                   f"--model_dir={tmp_path}/out", "--num_train_epochs=3",
                   "--learning_rate=3e-3", "--train_batch_size=16", "--max_seq_length=24",
                   "--joint_prediction=false", module=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.load(open(tmp_path / "out" / "results.json"))
    assert results["epoch_3"]["dev"]["f1"] >= 80.0, results
    model, record = folders.finetuned.load_finetuned(str(tmp_path / "out"))
    assert model.head.span_head == "independent" and record.head_options["beam_size"] == 20


def write_own_data(folder, task: str) -> str:
    """Toy files of your own for --task_name=classification (JSONL sentence pairs: "match"
    iff the second text has "replaced") or --task_name=tagging (CoNLL lines with
    part-of-speech-like tags, no BIO prefixes); the test split has no labels."""
    import random

    from helpers import WORDS

    folder.mkdir()
    rng = random.Random(5)
    plain = [w for w in WORDS if w != "replaced"]
    for split, n in (("train", 160), ("dev", 32), ("test", 4)):
        lines = []
        for _ in range(n):
            y = rng.random() < 0.5
            words = [rng.choice(plain) for _ in range(4)] + ["replaced"] * y
            if task == "tagging":
                tags = ["VERB" if w == "replaced" else "DET" if w in ("the", "a") else "X"
                        for w in words]
                lines += [w if split == "test" else f"{w} {t}" for w, t in zip(words, tags)]
                lines.append("")
                continue
            row = {"premise": " ".join(rng.choice(plain) for _ in range(4)),
                   "hypothesis": " ".join(words)}
            if split != "test":
                row["gold"] = "match" if y else "other"
            lines.append(json.dumps(row))
        ext = "txt" if task == "tagging" else "jsonl"
        (folder / f"{split}.{ext}").write_text("\n".join(lines) + "\n")
    return str(folder)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["classification", "tagging"])
def test_jax_cli_learns_own_data_and_tf_serves_the_folder(task, pretrained_dir, tmp_path):
    """Your own files on JAX (the same Finetuning): results.json with the task's
    metrics, dev and test predictions, and a record the (TensorFlow) export serves."""
    from electra_tf import folders
    from electra_tf.serving.export import load_spec

    options = (["--text_column=premise", "--text_pair_column=hypothesis",
                "--label_column=gold"] if task == "classification" else [])
    out = tmp_path / "out"
    proc = run_jax("electra_tf.run_finetuning", f"--task_name={task}", *options,
                   f"--init_checkpoint={pretrained_dir}",
                   f"--data_dir={write_own_data(tmp_path / 'data', task)}",
                   f"--model_dir={out}", "--num_train_epochs=6", "--learning_rate=3e-3",
                   "--train_batch_size=16", f"--max_seq_length={L}", "--do_predict",
                   module=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    dev = json.load(open(out / "results.json"))["epoch_6"]["dev"]
    assert dev["accuracy"] >= 0.9, dev
    metrics, labels, kind, suffix = {
        "classification": (["accuracy", "macro_f1", "mcc"], ("match", "other"),
                           "sequence_classification", ".tsv"),
        "tagging": (["accuracy"], ("DET", "VERB", "X"), "token_classification", ".txt")}[task]
    assert list(dev) == metrics
    for split in ("dev", "test"):
        assert os.path.exists(out / f"{task}_{split}_predictions{suffix}")
    spec = load_spec(kind, str(out))
    assert (spec.task_name, spec.label_names) == (task, labels)
    assert folders.finetuned.read_finetuning_config(str(out)).pair == (task == "classification")


OUTPUT_LAYOUT = """
import json, sys
from electra_tf.core.config import EncoderConfig
from electra_tf.modeling import build_discriminator
from electra_tf.tasks.model import FinetuningModel, output_layout
config = EncoderConfig(**json.loads(sys.argv[1]))
layouts = {}
for head in ("joint", "independent"):
    model = FinetuningModel(build_discriminator(config).encoder, "squad", num_labels=1,
                            span_head=head, answerable=True, beam_size=3)
    layouts[head] = {k: [str(v[0]), v[1], v[2]] for k, v in output_layout(model).items()}
print(json.dumps(layouts))
"""


def test_the_output_layout_of_a_span_model_is_the_same_under_jax():
    """Inputs of unknown length had stopped every JAX SQuAD/MRQA evaluation of the joint
    head at its first short batch: JAX's unknown dimension is a symbol that the beam's
    min(beam_size, length) cannot compare."""
    from helpers import TINY_MODEL

    from electra_tf.core.config import EncoderConfig
    from electra_tf.modeling import build_discriminator
    from electra_tf.tasks.model import FinetuningModel, output_layout

    sizes = {"vocab_size": 40, **TINY_MODEL, "num_hidden_layers": 1}
    proc = run_jax_script(OUTPUT_LAYOUT, json.dumps(sizes))
    assert proc.returncode == 0, proc.stderr[-3000:]
    under_jax = json.loads(proc.stdout)
    for head in ("joint", "independent"):
        model = FinetuningModel(build_discriminator(EncoderConfig(**sizes)).encoder, "squad",
                                num_labels=1, span_head=head, answerable=True, beam_size=3)
        layout = {k: [str(v[0]), v[1], v[2]] for k, v in output_layout(model).items()}
        assert under_jax[head] == layout, head
    assert under_jax["joint"]["start_top_index"] == ["int32", 2, False]
    assert under_jax["joint"]["start_logits"][1:] == [2, True]
    assert under_jax["independent"]["end_logits"][1:] == [2, True]
