"""--optimizer=lamb and a second phase at another length (NVIDIA's 128 -> 512) through
the loop: resume exact across the switch, phase 2's batches, both backends."""

import importlib.util
import json

import numpy as np
import pytest
from helpers import RECORDS_SEQ

from electra_tf.core.config import default_max_predictions
from electra_tf.core.errors import ConfigError, InputError
from electra_tf.data.builder import BuildOptions, build_pretraining_data
from electra_tf.training.backends.tensorflow import TensorFlowPretraining
from tests.training.test_jax_runtime import config_json, train, train_runs

L2 = 2 * RECORDS_SEQ  # phase 2's records: twice the length, as 128 -> 512 is 4x

# 6 steps, switching at 3 (a checkpoint there), phase 2 at batch 4 in 2 micro-batches.
PHASED = dict(optimizer="lamb", learning_rate=6e-3, lr_decay_power=0.5, num_warmup_steps=1,
              phase2_steps=3, phase2_max_seq_length=L2, phase2_train_batch_size=4,
              phase2_learning_rate=4e-3, phase2_warmup_steps=1)


@pytest.fixture(scope="module")
def long_records(tiny_corpus, tiny_vocab, tmp_path_factory):
    """The tiny corpus's records at phase 2's length, by build_pretraining_data."""
    out = tmp_path_factory.mktemp("records_long")
    build_pretraining_data(BuildOptions(files=(tiny_corpus,), vocab_file=tiny_vocab,
                                        output_dir=str(out), max_seq_length=L2, num_shards=2))
    return f"{out}/pretrain_data.tfrecord-*"


def _weights(trainer):
    return [np.array(v.numpy()) for v in trainer.model.trainable_variables]


def _optimizer_state(trainer):
    return [np.array(v.numpy()) for v in trainer.optimizer.variables]


def _check_phases(trainer, accumulation: int) -> None:
    """Phase 1 on the records' length in batches of 8, phase 2 on L2 in batches of 4 (in
    `accumulation` micro-batches); phase 2's first micro-batch has its length and its
    masking (the original's rule at L2)."""
    assert [(p.name, p.start, p.end, p.max_seq_length, p.train_batch_size,
             p.gradient_accumulation_steps) for p in trainer.phases] == [
        ("joint", 0, 3, RECORDS_SEQ, 8, 1), ("joint_phase2", 3, 6, L2, 4, accumulation)]
    batch = next(iter(trainer.make_train_iterator(3)))
    assert batch["input_ids"].shape == (4 // accumulation, L2)
    assert batch["masked_lm_positions"].shape[1] == default_max_predictions(0.15, L2) == 9


def _record_learning_rates(trainer) -> list:
    """The learning rate of each chunk's first step, appended as the run goes."""
    lrs = []
    train_steps = trainer.train_steps

    def recording(iterator, n):
        lrs.append(float(trainer.optimizer.learning_rate.numpy()))
        return train_steps(iterator, n)

    trainer.train_steps = recording
    return lrs


# Slow (a run through the switch and a resumed one, with the long records): the default
# suite checks LAMB and its two-stage schedule in tests/test_optimization_lamb.py and the
# phase-2 flags below. One run through the switch (phase 2 in one micro-batch, no eval):
# its phases, learning rates and log line; then "continued": a finished phase-1 run
# (num_train_steps 3, no phase 2) rerun with phase 2 added (num_train_steps 6,
# phase2_steps 3), which resumes at the switch's step and ends as the run through it.
@pytest.mark.slow
def test_lamb_two_phases_in_one_run_and_continued_from_a_phase_1_run(
        make_configs, long_records, tmp_path, capsys):
    phase2 = {"phase2_train_data": long_records, "eval_data": ""}
    straight = TensorFlowPretraining(*make_configs(tmp_path / "a", run_overrides=phase2,
                                                   **PHASED))
    _check_phases(straight, accumulation=1)
    lrs = _record_learning_rates(straight)
    straight.train()
    assert straight.step == 6
    # NVIDIA's schedule: warmup 1 step to 6e-3, then phase 2 from 0 (warmup 1) to 4e-3
    assert lrs == pytest.approx([0.0, 0.0]) and straight.optimizer.stage_starts == (3,)
    assert float(straight.optimizer.learning_rate.numpy()) == 0.0  # at step 6: the end
    assert ("step 3: phase 2 starts: max_seq_length 64, train_batch_size 4 "
            "(gradient_accumulation_steps 1), 9 masked positions") in capsys.readouterr().err

    phase1 = {k: v for k, v in PHASED.items() if not k.startswith("phase2")}
    TensorFlowPretraining(*make_configs(tmp_path / "b", num_train_steps=3,
                                        run_overrides={"eval_data": ""}, **phase1)).train()
    resumed = TensorFlowPretraining(*make_configs(tmp_path / "b", run_overrides=phase2,
                                                  **PHASED))
    assert resumed.restore() == 3
    resumed.train()
    for a, b in zip(_weights(straight), _weights(resumed), strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(_optimizer_state(straight), _optimizer_state(resumed), strict=True):
        np.testing.assert_array_equal(a, b)


# Phase 2 in 2 micro-batches, with evaluations: one run stopped on the switch's checkpoint
# (step 3), rerun, stopped again one step into phase 2 (step 4), rerun to the end: each
# rerun resumes exactly (the first at the switch, the second inside phase 2), as the end
# matches a run never stopped bit for bit. Four runs: slow.
@pytest.mark.slow
def test_lamb_two_phases_resume_exactly_at_and_after_the_switch(make_configs, long_records,
                                                                tmp_path):
    phase2 = {"phase2_train_data": long_records, "phase2_gradient_accumulation_steps": 2}
    config, run = make_configs(tmp_path / "a", run_overrides=phase2, **PHASED)
    straight = TensorFlowPretraining(config, run)
    _check_phases(straight, accumulation=2)
    straight.train()
    assert straight.step == 6
    assert float(straight.optimizer.learning_rate.numpy()) == 0.0  # at step 6: the end

    config_b, run_b = make_configs(tmp_path / "b", run_overrides=phase2, **PHASED)
    for stop in (3, 4):
        stopped = TensorFlowPretraining(config_b, run_b)
        assert stopped.restore() == (0 if stop == 3 else 3)
        stopped.train(stop_at_step=stop)
        assert stopped.step == stop
        del stopped
    resumed = TensorFlowPretraining(config_b, run_b)
    assert resumed.restore() == 4
    resumed.train()
    for a, b in zip(_weights(straight), _weights(resumed), strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(_optimizer_state(straight), _optimizer_state(resumed), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_a_resume_in_phase_2_names_its_records_changed(make_configs, long_records, tmp_path,
                                                      capfd):
    """Phase 2's records and micro-batches were not compared at a resume (another
    --phase2_train_data, a shard added under its glob, another accumulation went on
    without a word), and phase 1's accumulation was named though phase 1 was over."""
    import glob
    import shutil

    shards = tmp_path / "long"
    shards.mkdir()
    files = sorted(glob.glob(long_records))
    for i, name in enumerate(files):
        shutil.copy(name, shards / f"part-{i}")
    phase2 = {"phase2_train_data": str(shards / "part-*")}
    config, run = make_configs(tmp_path / "m", run_overrides=phase2, **PHASED)
    TensorFlowPretraining(config, run).train(stop_at_step=4)  # one step into phase 2
    shutil.copy(files[0], shards / "part-9")
    capfd.readouterr()
    TensorFlowPretraining(config, run).train(stop_at_step=5)
    assert ("note: this run continues checkpoints trained with other settings: the files "
            f"--phase2_train_data matches ({len(files) + 1} now, other than the {len(files)} "
            "recorded)") in capfd.readouterr().err
    # other records and micro-batches: phase 2's accumulation named (it had not been),
    # phase 1's not (it was named, though phase 1 is over)
    config, run = make_configs(tmp_path / "m", run_overrides={
        "phase2_train_data": long_records, "gradient_accumulation_steps": 2,
        "phase2_gradient_accumulation_steps": 2}, **PHASED)
    TensorFlowPretraining(config, run).train()
    err = capfd.readouterr().err
    assert (f"--phase2_train_data={long_records} (it was {shards / 'part-*'}), "
            "--phase2_gradient_accumulation_steps=2 (it was 1: the same global batch in "
            "other micro-batches); pretraining_config.json now records these") in err, err
    assert "--gradient_accumulation_steps" not in err


def test_phase2_flags_are_checked(make_configs, long_records, tmp_path):
    from electra_tf.core.config import check_run

    with pytest.raises(ConfigError, match="phase2_train_data"):
        check_run(*make_configs(tmp_path / "x", **PHASED))
    with pytest.raises(ConfigError, match="phase2_steps must be"):
        make_configs(tmp_path / "x", **{**PHASED, "phase2_steps": 6})
    with pytest.raises(ConfigError, match="two_stage"):
        make_configs(tmp_path / "x", **{**PHASED, "training_algorithm": "two_stage",
                                        "generator_hidden_size": 1.0})
    with pytest.raises(ConfigError, match="phase2_max_seq_length needs"):
        make_configs(tmp_path / "x", phase2_max_seq_length=64)
    # phase 2's records must be of its length (preflight reads the first record)
    config, run = make_configs(tmp_path / "y", run_overrides={
        "phase2_train_data": long_records}, **{**PHASED, "phase2_max_seq_length": 48})
    with pytest.raises(InputError, match="--phase2_train_data.*records of max_seq_length 64"):
        TensorFlowPretraining(config, run)


# The JAX backend's resume at the switch, and its 2 devices against 1 (phase 2's
# micro-batches of 2 split over them, one row each): one run through, one stopped at
# the switch and resumed, and the run through again on 2 devices (gradient accumulation
# over 2 devices: also test_jax_training_options.py's, in one phase, without LAMB).
@pytest.mark.slow  # the default suite's JAX resume: test_jax_runtime.py
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_jax_lamb_two_phases_resume_exactly_at_the_switch_and_two_devices_match_one(
        tiny_records, long_records, tmp_path):
    phase2 = {"phase2_train_data": long_records, "phase2_gradient_accumulation_steps": 2}

    def spec(name):
        return config_json(tiny_records, tmp_path / name, run_overrides=phase2, **PHASED)

    straight, resumed = train_runs([(spec("a"), [None]), (spec("b"), [3, None])])
    assert straight["step"] == resumed["step"] == 6
    assert straight["final"] == resumed["final"] and np.isfinite(straight["final"]["loss"])
    for a, b in zip(straight["weights"], resumed["weights"], strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert json.loads(spec("a"))["config"]["optimizer"] == "lamb"
    two = train(spec("two"), [None], devices=2)
    assert two["step"] == 6
    for a, b in zip(straight["weights"], two["weights"], strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-5)


# Every strategy: a mirrored run over 2 logical CPUs (tf.distribute: LAMB applied per
# replica after the loop's all-reduce); the JAX backend's 2 devices against 1 are above. The
# mirrored run is also test_training_distributed.py's with XLA (each replica's step
# compiled, in both phases' shapes): one process for both.
@pytest.mark.slow
def test_mirrored_lamb_two_phases_with_xla(tiny_records, long_records, tmp_path):
    from helpers import run_python

    from tests.training.test_training_distributed import MIRRORED_SCRIPT, tiny_flags

    args = tiny_flags(tiny_records, tiny_records["vocab"], tmp_path / "m", steps=6) + [
        "--strategy=mirrored", "--num_devices=2", "--jit_compile=true", "--optimizer=lamb",
        "--phase2_steps=3",
        f"--phase2_max_seq_length={L2}", "--phase2_train_batch_size=4",
        f"--phase2_train_data={long_records}", "--phase2_learning_rate=4e-3"]
    proc = run_python(["-c", MIRRORED_SCRIPT, *args], timeout=600)
    assert proc.returncode == 0 and "MIRRORED_OK" in proc.stdout, proc.stderr[-3000:]
    assert "step 3: phase 2 starts: max_seq_length 64" in proc.stderr
