"""A JAX pre-training run on a machine without TensorFlow (--jax_input_pipeline=packed,
and =numpy in the slow tests).

Each run is a subprocess with KERAS_BACKEND=jax in which an import hook hides
tensorflow, tensorflow_text and tf_keras, as on a machine with JAX alone; the
records are built beforehand, with TensorFlow, in this process. What the run
wrote (event files, the final folder) is then read here, on the TensorFlow
side. Skipped where jax is not installed.
"""

import glob
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers import RECORDS_SEQ as L
from helpers import REPO, TINY_MODEL, jax_child_env, patience

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                reason="jax is not installed (pip install 'jax[cpu]')")

HIDDEN = ("tensorflow", "tensorflow_text", "tf_keras")

# Hides TensorFlow (an import of it fails as if it were not installed), checks
# that it is hidden, and prints at exit which of its modules were loaded anyway.
NO_TF = f"""
import atexit, json, sys
HIDDEN = {HIDDEN!r}

class _Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}} (hidden)", name=name)
        return None

sys.meta_path.insert(0, _Hide())
try:
    import tensorflow  # noqa: F401
    raise SystemExit("tensorflow is not hidden")
except ImportError:
    pass
atexit.register(lambda: print("LOADED " + json.dumps(
    sorted(m for m in sys.modules if m.split(".")[0] in HIDDEN))))
"""

CLI = NO_TF + """
import runpy
sys.argv = ["run_pretraining", *sys.argv[1:]]
runpy.run_module("electra_tf.run_pretraining", run_name="__main__", alter_sys=True)
"""

# Runs one after the other in one process: [[kind, stop_at_step, flags], ...], kind "cli"
# (run_pretraining's command line; first, and at most once: absl's global flags) or
# "trainer" (JaxPretraining on its own flags, stopping at the step if one is given).
# Each run's stderr follows a line `=== run I`.
RUNS = NO_TF + """
import runpy
from absl import flags
from electra_tf import flags as flags_lib
from electra_tf.training.backends.jax import JaxPretraining
for i, (kind, stop, args) in enumerate(json.loads(sys.argv[1])):
    print(f"=== run {i}", file=sys.stderr, flush=True)
    if kind == "cli":
        sys.argv = ["run_pretraining", *args]
        try:
            runpy.run_module("electra_tf.run_pretraining", run_name="__main__", alter_sys=True)
        except SystemExit as e:
            if e.code:
                raise
        continue
    values = flags.FlagValues()
    flags_lib.define_pretraining_flags(values)
    values([kind, *args])
    config, run = flags_lib.pretraining_configs(values)
    JaxPretraining(config, run).train(stop_at_step=stop)
"""


def runs_without_tf(*runs) -> list[str]:
    """RUNS' runs in one process without TensorFlow: each one's stderr."""
    stderr = run_without_tf(RUNS, json.dumps(runs)).stderr
    return stderr.split("=== run ")[1:]


def run_without_tf(script: str, *args: str) -> subprocess.CompletedProcess:
    env = jax_child_env(tests_on_path=False, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=patience(600))
    assert proc.returncode == 0, proc.stderr[-4000:]
    loaded = [line for line in proc.stdout.splitlines() if line.startswith("LOADED ")]
    assert loaded == ["LOADED []"], loaded  # no TensorFlow module was ever imported
    return proc


def pretraining_flags(records, model_dir) -> list[str]:
    from electra_tf.text.tokenizer import load_vocab

    return [f"--model_dir={model_dir}", f"--train_data={records['train']}",
            f"--eval_data={records['eval']}", f"--vocab_file={records['vocab']}",
            f"--vocab_size={len(load_vocab(records['vocab']))}", "--model_size=tiny",
            f"--model_hparam_overrides={json.dumps(TINY_MODEL)}", f"--max_seq_length={L}",
            "--generator_hidden_size=0.5", "--learning_rate=1e-3", "--num_warmup_steps=2",
            "--train_batch_size=8", "--eval_batch_size=8", "--num_train_steps=6",
            "--iterations_per_loop=3", "--save_checkpoints_steps=3", "--num_eval_steps=2",
            "--seed=3"]


@pytest.fixture(scope="module")
def straight_run(packed_records, tmp_path_factory):
    """A whole TensorFlow-free run through the command line, on the packed records (what
    a GPU machine without TensorFlow reads): (model_dir, its stderr). The NumPy reader of
    the TFRecords runs the same way in the slow test_runs_without_tensorflow_resume_..."""
    model_dir = tmp_path_factory.mktemp("no_tf") / "model"
    proc = run_without_tf(CLI, "--jax_input_pipeline=packed",
                          *pretraining_flags(packed_records, model_dir))
    return str(model_dir), proc.stderr


def scalars(folder: str) -> dict[int, dict[str, float]]:
    """{step: {tag: value}} of the event files in `folder`, read by TensorFlow."""
    import tensorflow as tf

    found: dict[int, dict[str, float]] = {}
    for path in glob.glob(os.path.join(folder, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                assert value.metadata.plugin_data.plugin_name == "scalars", value.tag
                found.setdefault(event.step, {})[value.tag] = float(
                    tf.make_ndarray(value.tensor))
    return found


def h5_arrays(path: str) -> dict[str, np.ndarray]:
    import h5py

    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()])
                     if isinstance(obj, h5py.Dataset) else None)
    return out


@pytest.mark.slow  # a JAX pre-training run in a process without TensorFlow (23 s)
def test_a_run_without_tensorflow_writes_summaries_and_a_folder_tf_reads(straight_run,
                                                                           tiny_records):
    model_dir, stderr = straight_run
    assert "backend=jax, input=packed" in stderr and "step 6/6" in stderr, stderr[-2000:]
    final = json.loads(open(os.path.join(model_dir, "final_eval.json")).read())
    assert final["step"] == 6 and np.isfinite(final["loss"]) and final["disc_auc"] > 0
    assert sorted(os.listdir(os.path.join(model_dir, "checkpoints"))) == [
        "jax-ckpt-3.npz", "jax-ckpt-6.npz"]

    # TensorBoard summaries, as the TF loop writes them: train every 3 steps,
    # eval before the first step and at the end.
    train, evals = scalars(os.path.join(model_dir, "train")), scalars(
        os.path.join(model_dir, "eval"))
    assert sorted(train) == [3, 6] and sorted(evals) == [0, 6]
    for tag in ("loss", "masked_lm_loss", "disc_loss", "disc_auc", "grad_norm", "learning_rate",
                "sequences_per_second"):
        assert tag in train[6], tag
    assert train[6]["learning_rate"] == 0.0  # the schedule's end
    for tag in ("loss", "disc_auc", "masked_lm_accuracy", "disc_token_cosine"):
        assert evals[6][tag] == pytest.approx(final[tag], rel=1e-6), tag
    assert 0.0 < final["disc_token_cosine"] < 1.0  # the states' spread, on held-out data
    assert "disc_token_cosine" not in train[6]  # an evaluation metric
    assert f"disc_token_cosine {final['disc_token_cosine']:.4f}" in stderr

    # The folder loads, unchanged, in the TensorFlow export path.
    from electra_tf import folders
    from electra_tf.serving.export import load_spec

    discriminator, vocab = folders.pretraining.load_discriminator(model_dir)
    # the folder carries its own copy of the vocabulary
    assert vocab == os.path.join(model_dir, "vocab.txt")
    assert open(vocab).read() == open(tiny_records["vocab"]).read()
    spec = load_spec("rtd", model_dir, max_seq_length=L)
    written = h5_arrays(os.path.join(model_dir, folders.files.DISCRIMINATOR_WEIGHTS))
    assert sum(a.size for a in written.values()) == discriminator.count_params()
    for a, b in zip(discriminator.get_weights(), spec.model.get_weights()):
        np.testing.assert_array_equal(a, b)
    recorded = folders.pretraining.read_pretraining_config(model_dir)
    assert recorded["vocab_sha256"] == folders.vocabulary.vocab_fingerprint(tiny_records["vocab"])


def test_without_the_tensorboard_package_summaries_are_skipped_with_one_warning(
        tmp_path, monkeypatch, capsys):
    from electra_tf.training import summaries

    monkeypatch.setitem(sys.modules, "tensorboard.summary.writer.record_writer", None)
    summaries._warn_once.cache_clear()
    writers = [summaries.summary_writer(str(tmp_path / name), tensorflow=False)
               for name in ("train", "eval")]
    assert writers == [None, None]
    summaries.write_scalars(writers[0], 1, {"loss": 1.0})  # nothing to write, no error
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "pip install tensorboard" in warnings[0], warnings
    assert not os.listdir(tmp_path)


def test_a_failed_event_write_names_its_file(tmp_path, monkeypatch, capsys):
    """A full disk as the TensorFlow-free writer appends a point: the error had named no
    file, so the command's line said every file is renamed into place (event files are
    appended to)."""
    from electra_tf import cli
    from electra_tf.training import summaries

    writer = summaries.summary_writer(str(tmp_path / "train"), tensorflow=False)

    def full(*args):
        raise OSError(27, "File too large")

    monkeypatch.setattr(writer._writer, "flush", full)
    with pytest.raises(SystemExit):
        cli.run_cli(lambda: summaries.write_scalars(writer, 3, {"loss": 1.0}))
    assert capsys.readouterr().err.startswith(
        f"error: {writer.path}: File too large (TensorBoard's event files are appended to "
        "as the run goes: one cut short keeps its points up to the cut;")


@pytest.fixture(scope="module")
def packed_records(tiny_records, tmp_path_factory):
    """tiny_records' train and eval records packed (data/packed.py)."""
    from electra_tf.data.packed import pack

    out = tmp_path_factory.mktemp("packed")
    packed = dict(tiny_records)
    for name in ("train", "eval"):
        packed[name] = str(out / f"{name}.packed")
        pack(tiny_records[name], packed[name], progress=False)
    return packed


def assert_same_weights(a, b):
    for name in ("discriminator.weights.h5", "generator.weights.h5"):
        x, y = h5_arrays(os.path.join(a, name)), h5_arrays(os.path.join(b, name))
        assert x.keys() == y.keys()
        for key in x:
            np.testing.assert_array_equal(x[key], y[key], err_msg=key)


@pytest.mark.slow
def test_runs_without_tensorflow_resume_exactly_on_the_numpy_and_packed_readers(
        tiny_records, packed_records, tmp_path):
    """A run stopped at step 3 (a preempted job) and resumed by a new process ends with a
    straight run's weights: on the NumPy reader of the TFRecords (--jax_input_pipeline=
    numpy; straight and resumed runs through the command line) and on the packed records
    (trainers). Two processes, each without TensorFlow, do the six runs."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    packed_straight, packed_resumed = tmp_path / "packed_straight", tmp_path / "packed_resumed"
    numpy = ["--jax_input_pipeline=numpy"]
    packed = ["--jax_input_pipeline=packed"]
    cli, stopped, packed_whole, packed_stopped = runs_without_tf(
        ["cli", None, [*numpy, *pretraining_flags(tiny_records, straight)]],
        ["trainer", 3, [*numpy, *pretraining_flags(tiny_records, resumed)]],
        ["trainer", None, [*packed, *pretraining_flags(packed_records, packed_straight)]],
        ["trainer", 3, [*packed, *pretraining_flags(packed_records, packed_resumed)]])
    assert "backend=jax, input=numpy" in cli and "step 6/6" in cli, cli[-3000:]
    for folder, said in ((resumed, stopped), (packed_resumed, packed_stopped)):
        assert "stopped at step 3 as asked" in said, said[-3000:]
        assert sorted(os.listdir(folder / "checkpoints")) == ["jax-ckpt-3.npz"]
        assert not (folder / "discriminator.weights.h5").exists()
    assert "step 6/6" in packed_whole, packed_whole[-3000:]

    # New processes resume: the command line on the NumPy reader, a trainer on the packed
    # (whose record is made to say the NumPy reader: the resume says it changed).
    record = json.loads((packed_resumed / "pretraining_config.json").read_text())
    assert record["run"]["jax_input_pipeline"] == "packed"
    record["run"]["jax_input_pipeline"] = "numpy"
    record["replicas"] = 2  # (as a 2-device run's: the same batches on JAX, said so)
    (packed_resumed / "pretraining_config.json").write_text(json.dumps(record))
    again, packed_again = runs_without_tf(
        ["cli", None, [*numpy, *pretraining_flags(tiny_records, resumed)]],
        ["trainer", None, [*packed, *pretraining_flags(packed_records, packed_resumed)]])
    assert "resumed from" in again and "jax-ckpt-3.npz at step 3" in again, again[-3000:]
    assert "note: this run continues checkpoints" not in again  # the same settings
    assert "jax-ckpt-3.npz at step 3" in packed_again, packed_again[-3000:]
    assert ("note: this run continues checkpoints trained with other settings: "
            "--jax_input_pipeline=packed (it was numpy), the batch split over 1 replica(s) "
            "(it was 2: the same batches and masks);") in packed_again, packed_again[-3000:]
    assert_same_weights(straight, resumed)
    final = json.loads((straight / "final_eval.json").read_text())
    assert json.loads((resumed / "final_eval.json").read_text()) == final
    assert_same_weights(packed_straight, packed_resumed)


@pytest.mark.slow
def test_the_numpy_reader_imports_no_tensorflow_where_it_is_installed(tiny_records, tmp_path):
    """--jax_input_pipeline=numpy on a machine with TensorFlow: the run never imports it,
    as its flag's help says (Keras' set_random_seed imported it, to seed it, whenever it
    is installed: about 3 s of CPU at each start). Its initial weights are those of a
    run seeded with TensorFlow there: the multi-host test compares such runs with one in
    a process that had imported it."""
    from helpers import run_module_reporting_tf

    proc, tf_imported = run_module_reporting_tf(
        "electra_tf.run_pretraining", "--jax_input_pipeline=numpy",
        *pretraining_flags(tiny_records, tmp_path / "m"), "--num_train_steps=1",
        "--iterations_per_loop=1", "--num_eval_steps=1",
        env=jax_child_env(tests_on_path=False, JAX_PLATFORMS="cpu"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "input=numpy" in proc.stderr and "step 1/1" in proc.stderr, proc.stderr[-3000:]
    assert not tf_imported


def test_packed_files_given_to_another_input_are_one_line(packed_records, tmp_path):
    from electra_tf.core.errors import InputError
    from electra_tf.data.tfrecord_reader import LOCAL_FILES, check_records

    with pytest.raises(InputError, match="is a packed examples file, which only "
                                         "KERAS_BACKEND=jax with --jax_input_pipeline=packed"):
        check_records(packed_records["train"], L, "--train_data", LOCAL_FILES)


def test_the_default_jax_input_without_tensorflow_is_one_line(tiny_records, tmp_path,
                                                              monkeypatch):
    """KERAS_BACKEND=jax reads through tf.data by default: where TensorFlow is not
    installed that was a traceback ending in "No module named 'tensorflow'"; now one line
    naming the inputs that read without it (checked before anything is written)."""
    from electra_tf.core.config import PretrainingConfig, PretrainingRun
    from electra_tf.core.errors import ConfigError
    from electra_tf.training.preflight import preflight

    monkeypatch.setitem(sys.modules, "tensorflow", None)  # an import of it fails
    run = PretrainingRun(model_dir=str(tmp_path / "model"), train_data=tiny_records["train"],
                         vocab_file=tiny_records["vocab"])
    with pytest.raises(ConfigError, match=r"^--jax_input_pipeline=tf.data \(the default\) "
                       r"reads the records through TensorFlow, which is not installed here; "
                       r"pass --jax_input_pipeline=numpy"):
        preflight(PretrainingConfig(max_seq_length=L), run, tensorflow_io=True)
    assert not (tmp_path / "model").exists()
