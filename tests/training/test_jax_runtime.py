"""The JAX backend's pre-training loop (jax_training.py), on CPU.

Each JAX run is in another process with KERAS_BACKEND=jax (the backend is fixed
per process): on one device, the process of helpers.run_jax_script, which runs
the suite's JAX scripts one after the other. Skipped where jax is not installed.
"""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers import RECORDS_SEQ as L
from helpers import (
    REPO,
    TINY_MODEL,
    TINY_NO_DROPOUT,
    jax_child_env,
    patience,
    run_jax_script,
)

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                reason="jax is not installed (pip install 'jax[cpu]')")


def run_python(script: str, backend: str, *args, devices: int = 1) -> str:
    """The stdout of `python -c script args...` under KERAS_BACKEND=backend on `devices`
    CPU devices; JAX runs in helpers.run_jax_script's shared process for that device
    count (the data-parallel tests of this file, test_lamb_phases.py and
    test_finetuning_jax.py share the one on 2 devices)."""
    if backend == "jax":
        proc = run_jax_script(script, *args, devices=devices)
    else:  # tests/ on the path too: scripts import the functions below from this module.
        env = jax_child_env(devices, KERAS_BACKEND=backend)
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=patience(600))
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def config_json(tiny_records, model_dir, run_overrides=None, **overrides) -> str:
    from electra_tf.text.tokenizer import load_vocab

    config = dict(model_size="tiny", model_hparam_overrides=TINY_MODEL,
                  vocab_size=len(load_vocab(tiny_records["vocab"])), max_seq_length=L,
                  generator_hidden_size=0.5, learning_rate=1e-3, num_warmup_steps=2,
                  train_batch_size=8, eval_batch_size=8, num_train_steps=6,
                  iterations_per_loop=3, save_checkpoints_steps=3, num_eval_steps=2, seed=3)
    return json.dumps({
        "config": {**config, **overrides},
        "run": dict(model_dir=str(model_dir), train_data=tiny_records["train"],
                    eval_data=tiny_records["eval"], vocab_file=tiny_records["vocab"],
                    **(run_overrides or {}))})


# Trains runs one after the other in one JAX process (a process start costs seconds):
# each run is (spec, stops), a fresh trainer per stop, as a restarted process.
TRAIN = """
    import contextlib, io, json, sys
    from electra_tf.core.config import PretrainingConfig, PretrainingRun
    from electra_tf.training.backends.jax import JaxPretraining
    out = []
    for spec, stops in json.loads(sys.argv[1]):
        spec = json.loads(spec)
        config = PretrainingConfig(**spec["config"])
        run = PretrainingRun(**spec["run"], jax_input_pipeline=sys.argv[2])
        logged = io.StringIO()
        with contextlib.redirect_stderr(logged):
            for stop in stops:
                t = JaxPretraining(config, run)
                final = t.train(stop_at_step=stop)
        sys.stderr.write(logged.getvalue())
        weights = [v.numpy().tolist() for v in t.model.trainable_variables]
        out.append({"final": final, "step": t.step, "weights": weights,
                    "log": logged.getvalue().splitlines()})
    print(json.dumps(out))
"""


def train_runs(runs, devices=1, input_pipeline="tf.data"):
    """[(config_json, stops), ...] -> [{"final", "step", "weights"}, ...], in one process."""
    return json.loads(run_python(TRAIN, "jax", json.dumps(runs), input_pipeline,
                                 devices=devices).splitlines()[-1])


def train(spec, stops, devices=1, input_pipeline="tf.data"):
    return train_runs([(spec, stops)], devices, input_pipeline)[0]


# Slow (30 s of the default suite's 6 minutes): a JAX run stopped and resumed; the default
# suite's JAX runs are the loss parity, the files removed mid-run below and
# test_jax_no_tf.py's TensorFlow-free run, whose folder TensorFlow reads.
@pytest.mark.slow
def test_jax_run_resumes_exactly_and_its_folder_loads_for_export(tiny_records, tmp_path):
    straight, resumed = train_runs([
        (config_json(tiny_records, tmp_path / "a", {"log_examples": True}), [None]),
        (config_json(tiny_records, tmp_path / "b"), [3, None])])
    # b: stopped at 3, then resumed by a fresh trainer; a printed its eval examples
    # (--log_examples), which change nothing of the run
    assert straight["step"] == resumed["step"] == 6
    assert straight["final"] == resumed["final"]
    for a, b in zip(straight["weights"], resumed["weights"], strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    log = straight["log"]
    shown = [i for i, line in enumerate(log) if "example (the first eval sequence" in line]
    assert [log[i].split(",")[0] for i in shown] == ["[pretrain] at step 0",
                                                     "[pretrain] at step 6"], log
    assert all(log[i + 1].startswith("[pretrain]   [CLS]") and " p=" in log[i + 1]
               for i in shown), [log[i + 1] for i in shown]
    assert not any("example (the first" in line for line in resumed["log"])
    assert np.isfinite(straight["final"]["loss"]) and "disc_auc" in straight["final"]
    assert sorted(os.listdir(tmp_path / "b" / "checkpoints")) == ["jax-ckpt-3.npz",
                                                                 "jax-ckpt-6.npz"]
    # the folder says what ran: the JAX backend, every step compiled (it had recorded
    # the --jit_compile flag, false, which the console line contradicted)
    import json

    recorded = json.load(open(tmp_path / "a" / "pretraining_config.json"))
    assert recorded["backend"] == "jax" and recorded["run"]["jit_compile"] is True

    # What the JAX run wrote loads, unchanged, as the TensorFlow export reads it (a
    # pre-training folder's export itself: tests/export, the "rtd" export).
    from electra_tf import folders
    from electra_tf.serving.export import load_spec

    discriminator, vocab = folders.pretraining.load_discriminator(str(tmp_path / "a"))
    # the folder carries its own copy of the vocabulary
    assert vocab == str(tmp_path / "a" / "vocab.txt")
    assert open(vocab).read() == open(tiny_records["vocab"]).read()
    kept = discriminator.get_weights()
    spec = load_spec("rtd", str(tmp_path / "a"), max_seq_length=L)
    for a, b in zip(kept, spec.model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    # The export itself, asked of Keras on JAX (a Python session that trained on JAX):
    # refused in one line, nothing written (the signatures' tracing had failed with a
    # traceback and left MODEL_BASE/NAME behind). The command sets the backend itself.
    refused = run_python("""
        import sys
        from electra_tf.core.errors import InputError
        from electra_tf.serving.export import export, load_spec
        try:
            export(load_spec("rtd", sys.argv[1], max_seq_length=int(sys.argv[3])), sys.argv[2],
                   "m")
        except InputError as e:
            print(e)
    """, "jax", str(tmp_path / "a"), str(tmp_path / "models"), str(L))
    assert refused.startswith("an export is a TensorFlow SavedModel: build it with Keras on "
                              "TensorFlow") and refused.strip().endswith("runs Keras on jax")
    assert not (tmp_path / "models").exists()


# A JAX run (packed input) whose files are removed once it started: the trainer, then
# the file removed, then train(); each run's error line or "trained".
FILES_GONE = """
    import json, os, sys
    from electra_tf.core.config import PretrainingConfig, PretrainingRun
    from electra_tf.core.errors import InputError
    from electra_tf.training.backends.jax import JaxPretraining
    out = []
    for spec, gone in json.loads(sys.argv[1]):
        spec = json.loads(spec)
        t = JaxPretraining(PretrainingConfig(**spec["config"]),
                           PretrainingRun(**spec["run"], jax_input_pipeline="packed"))
        os.remove(gone)
        try:
            t.train()
            out.append("trained")
        except InputError as e:
            out.append(str(e))
    print(json.dumps(out))
"""


@pytest.mark.slow  # three JAX runs, each stopped by a file removed mid-run (20 s)
def test_jax_packed_files_gone_mid_run_are_named_after_a_checkpoint(tiny_records, tmp_path):
    """Phase 2's packed file, or --eval_data's, removed after the start-up check: met
    where the run reaches it, named by its flag, the steps so far saved (the packed
    reader had opened them in its thread: --train_data named, the steps since the last
    checkpoint lost), as the TensorFlow backend's test_training_faults.py."""
    import shutil

    from electra_tf.data.packed import pack

    train, evaluation = tmp_path / "train.packed", tmp_path / "eval.packed"
    pack(tiny_records["train"], str(train), progress=False)
    pack(tiny_records["eval"], str(evaluation), progress=False)
    phase2 = shutil.copy(train, tmp_path / "phase2.packed")
    steps = dict(num_train_steps=3, iterations_per_loop=1, save_checkpoints_steps=1000)
    at_switch = config_json({**tiny_records, "train": str(train), "eval": ""}, tmp_path / "a",
                            {"phase2_train_data": str(phase2)}, phase2_steps=1,
                            phase2_max_seq_length=L, **steps)
    at_eval = config_json({**tiny_records, "train": str(train), "eval": str(evaluation)},
                          tmp_path / "b", **steps)
    said = json.loads(run_python(FILES_GONE, "jax", json.dumps(
        [(at_switch, str(phase2)), (at_eval, str(evaluation))])).splitlines()[-1])
    assert said == [
        f"--phase2_train_data pattern '{phase2}' matches no file, met at step 2 where "
        "phase 2 starts; checkpoint saved at step 2; restore the files, then rerun to resume",
        f"--eval_data pattern '{evaluation}' matches no file, met at step 0; checkpoint "
        "saved at step 0; restore the files, then rerun to resume"]
    assert sorted(os.listdir(tmp_path / "a" / "checkpoints")) == ["jax-ckpt-2.npz"]


# Slow: the default suite's JAX runs take one step per call (above); the export is a
# fresh process's.
@pytest.mark.slow
def test_jax_run_of_three_steps_per_call_matches_one_step_per_call_and_exports(tiny_records,
                                                                               tmp_path):
    # c runs each chunk of 3 steps in one call (lax.scan; the same steps and seeds).
    scanned = config_json(tiny_records, tmp_path / "c", run_overrides={"jax_steps_per_call": 3})
    straight, several = train_runs([(config_json(tiny_records, tmp_path / "a"), [None]),
                                    (scanned, [None])])
    assert straight["step"] == several["step"] == 6
    # XLA may fuse the scanned step's float sums in another order: a last-bit
    # difference after 6 steps (bit-identical weights after one call of 3 steps:
    # test_jax_training_options.py's test_jax_steps_per_call_match_one_step_per_call).
    for a, c in zip(straight["weights"], several["weights"], strict=True):
        np.testing.assert_allclose(np.asarray(c), np.asarray(a), rtol=1e-5, atol=1e-8)
    for key, value in straight["final"].items():
        assert several["final"][key] == pytest.approx(value, rel=1e-5, abs=1e-7), key

    # KERAS_BACKEND=jax left in the shell of a JAX user: the export command runs Keras on
    # TensorFlow and says so (it had ended in a traceback, an empty MODEL_BASE/NAME left).
    proc = subprocess.run(
        [sys.executable, "-m", "electra_tf.export_saved_model", "--task=rtd",
         f"--checkpoint={tmp_path / 'a'}", f"--model_base={tmp_path / 'models'}",
         "--model_name=m", "--warmup=false"],
        cwd=REPO, env=jax_child_env(1, KERAS_BACKEND="jax"), capture_output=True, text=True,
        timeout=patience(300))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.startswith("[export] Keras' jax backend (KERAS_BACKEND or keras.json) "
                                  "set aside: an export is built "
                                  "with Keras on TensorFlow\n"), proc.stderr[-3000:]
    assert (tmp_path / "models" / "m" / "1" / "saved_model.pb").exists()


@pytest.mark.slow
def test_jax_run_on_the_tensorflow_free_input_resumes_exactly(tiny_records, tmp_path):
    straight, resumed = train_runs([(config_json(tiny_records, tmp_path / "a"), [None]),
                                    (config_json(tiny_records, tmp_path / "b"), [3, None])],
                                   input_pipeline="numpy")
    assert straight["final"] == resumed["final"] and np.isfinite(straight["final"]["loss"])
    for a, b in zip(straight["weights"], resumed["weights"]):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# A run to its end, as TRAIN's: prints the replicas, the results of each chunk the loop
# trained (train_steps, with its number of steps) and the final eval.
TRAIN_CHUNKS = """
    import json, sys
    from electra_tf.core.config import PretrainingConfig, PretrainingRun
    from electra_tf.training.backends.jax import JaxPretraining
    spec = json.loads(sys.argv[1])
    t = JaxPretraining(PretrainingConfig(**spec["config"]), PretrainingRun(**spec["run"]))
    chunks, real = [], t.train_steps

    def recorded(iterator, n):
        results = real(iterator, n)
        chunks.append({"steps": n, **results})
        return results

    t.train_steps = recorded
    final = t.train()
    print(json.dumps({"replicas": t.num_replicas, "chunks": chunks, "final": final}))
"""


@pytest.mark.slow
def test_jax_data_parallel_over_two_devices_matches_one(tiny_records, tmp_path):
    """The loop (train(): its chunks, checkpoints and final eval) on 2 devices as on 1,
    with gradient accumulation and 3 steps per call: the stacked batches and
    micro-batches keep their split over the devices, through a call of 3 and a remainder
    call of 1 (chunk 1, 4 steps), then remainder calls alone (chunk 2). The same global
    batches and seeds; only the reduction order differs. (Without accumulation, one step
    per call, on 2 devices: test_lamb_phases.py's
    test_jax_lamb_two_phases_on_two_devices_matches_one, and test_jax_multihost.py's two
    processes.)"""
    def spec(name):
        return config_json(tiny_records, tmp_path / name, model_hparam_overrides=TINY_NO_DROPOUT,
                           iterations_per_loop=4, save_checkpoints_steps=4,
                           run_overrides={"gradient_accumulation_steps": 2,
                                          "jax_steps_per_call": 3})

    one = json.loads(run_python(TRAIN_CHUNKS, "jax", spec("one")).splitlines()[-1])
    two = json.loads(run_python(TRAIN_CHUNKS, "jax", spec("two"), devices=2).splitlines()[-1])
    assert (one["replicas"], two["replicas"]) == (1, 2)
    assert [c["steps"] for c in one["chunks"]] == [c["steps"] for c in two["chunks"]] == [4, 2]
    for a, b in zip(one["chunks"], two["chunks"], strict=True):
        for key in ("loss", "mlm_loss", "disc_loss", "grad_norm"):
            assert b[key] == pytest.approx(a[key], rel=1e-4), (a["steps"], key)
    for key in ("loss", "masked_lm_loss", "disc_loss"):
        assert two["final"][key] == pytest.approx(one["final"][key], rel=1e-4), key

    # Every variable at the end: the model's and the optimizer's.
    def final_checkpoint(name):
        with np.load(tmp_path / name / "checkpoints" / "jax-ckpt-6.npz") as data:
            return {k: data[k] for k in data.files}

    a, b = final_checkpoint("one"), final_checkpoint("two")
    assert a.keys() == b.keys() and any(k.startswith("optimizer/") for k in a)
    for key in a:
        np.testing.assert_allclose(b[key], a[key], rtol=1e-3, atol=1e-5, err_msg=key)


def parity_losses(base: dict, weights: str, batch: dict, objectives) -> dict:
    """{objective: its loss terms} on `batch` from the same initial weights, under this
    process's backend: the TensorFlow side saves them to `weights`-OBJECTIVE.weights.h5,
    the JAX side loads them. The tests run the TF side in-process, the JAX side in
    PARITY's process."""
    import keras

    from electra_tf.core.config import PretrainingConfig
    from electra_tf.objectives import corruption
    from electra_tf.objectives.pretrainer import ElectraPretrainer

    def losses_of(config, path):
        keras.utils.set_random_seed(0)
        model = ElectraPretrainer(config)
        model.build_with_dummy_batch()
        if keras.backend.backend() == "tensorflow":
            model.save_weights(path)
        else:
            model.load_weights(path)
        gen = model.generator({k: batch[k] for k in ("input_ids", "input_mask", "segment_ids",
                                                     "masked_lm_positions")})["mlm_logits"]
        # A deterministic "sample" (argmax), so that both backends corrupt alike.
        sampled = np.argmax(np.asarray(gen), -1).astype("int32")
        args = (batch["masked_lm_positions"], batch["masked_lm_weights"])
        corrupted = corruption.scatter_at_positions(batch["input_ids"], args[0], sampled,
                                                    args[1])
        original = corruption.scatter_at_positions(batch["input_ids"], args[0],
                                                   batch["masked_lm_ids"], args[1])
        fake = {"input_ids": corrupted, "sampled_ids": sampled, "original_ids": original,
                "labels": corruption.rtd_labels(corrupted, original, batch["input_mask"])}
        disc = model.discriminator({"input_ids": corrupted, "input_mask": batch["input_mask"],
                                    "segment_ids": batch["segment_ids"],
                                    "masked_lm_positions": batch["masked_lm_positions"]})
        losses = model.objective.compute_loss(batch, gen, fake, disc)
        return {k: float(v) for k, v in losses.items()}

    return {objective: losses_of(PretrainingConfig(**base, objective=objective),
                                 f"{weights}-{objective}.weights.h5")
            for objective in objectives}


PARITY = """
    import json, sys
    import numpy as np
    from tests.training.test_jax_runtime import parity_losses
    with np.load(sys.argv[3]) as data:
        batch = {k: data[k] for k in data.files}
    print(json.dumps(parity_losses(json.loads(sys.argv[1]), sys.argv[2], batch,
                                   json.loads(sys.argv[4]))))
"""

# Each objective's loss terms (objectives/variants.py).
OBJECTIVE_LOSSES = {
    "electra": {"loss", "mlm_loss", "disc_loss"},
    "bert_mlm": {"loss", "mlm_loss"},
    "electra_15": {"loss", "mlm_loss", "disc_loss"},
    "replace_mlm": {"loss", "mlm_loss", "main_mlm_loss"},
    "all_tokens_mlm": {"loss", "mlm_loss", "main_mlm_loss"},
}


def test_tf_and_jax_give_the_same_loss_on_the_same_batch_and_weights(tiny_records, tmp_path):
    from electra_tf.data.masking import MaskingConfig
    from electra_tf.data.pipeline import pretraining_dataset
    from electra_tf.text.tokenizer import Tokenizer, load_vocab

    config = dict(model_size="tiny", model_hparam_overrides=TINY_NO_DROPOUT, max_seq_length=L,
                  vocab_size=len(load_vocab(tiny_records["vocab"])), generator_hidden_size=0.5)
    masking = MaskingConfig.from_tokenizer(Tokenizer(tiny_records["vocab"]), 0.15,
                                           int((0.15 + 0.005) * L))
    batch = next(iter(pretraining_dataset(tiny_records["train"], 8, L, masking, seed=0)))
    np.savez(tmp_path / "batch.npz", **{k: v.numpy() for k, v in batch.items()})
    with np.load(tmp_path / "batch.npz") as data:  # the arrays the JAX side reads
        tf_losses = parity_losses(config, str(tmp_path / "w"), {k: data[k] for k in data.files},
                                  list(OBJECTIVE_LOSSES))
    args = (json.dumps(config), str(tmp_path / "w"), str(tmp_path / "batch.npz"),
            json.dumps(list(OBJECTIVE_LOSSES)))
    jax_losses = json.loads(run_python(PARITY, "jax", *args).splitlines()[-1])
    for objective, terms in OBJECTIVE_LOSSES.items():
        assert set(tf_losses[objective]) == set(jax_losses[objective]) == terms, objective
        for key, value in tf_losses[objective].items():
            assert jax_losses[objective][key] == pytest.approx(value, rel=1e-5, abs=1e-6), (
                objective, key)
