"""What a comparison of pre-training runs reads: checkpoint steps, console lines, eval names."""

from __future__ import annotations

import os
import re

import numpy as np
from helpers import ConvertedByAutograph

from electra_tf import folders
from electra_tf.training import reporting
from electra_tf.training.loop import chunk_size


def test_chunks_end_at_every_period_and_at_the_end():
    assert chunk_size(0, 10, 3, 4) == 3
    assert chunk_size(3, 10, 3, 4) == 1  # 4 is a save step
    assert chunk_size(8, 10, 3, 4) == 1
    assert chunk_size(9, 10, 3, 4) == 1
    assert chunk_size(5, 7, 0, 100) == 2  # 0: no such period


def test_checkpoints_land_on_the_multiples_of_save_checkpoints_steps(make_configs, tmp_path,
                                                                     monkeypatch, capsys):
    """Also (the same run): no function of the project is converted by autograph (the
    steps are traced as written), the closing warning of a collapsed final eval,
    once, after the final eval line (here every cosine counts as collapsed), and under
    a scheduler the note on chunks slower than loop.SLOW_CHUNK_S (here any), once, with
    the longest chunk: 3 steps, to the next log line (4 to a save); and the note that
    --eval_data holds fewer batches than --num_eval_steps, once (each evaluation had cut
    it silently)."""
    from electra_tf.training import loop
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining

    monkeypatch.setattr(reporting, "COLLAPSED_TOKEN_COSINE", -1.0)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setattr(loop, "SLOW_CHUNK_S", 0.0)
    from electra_tf.training import pretraining
    from tests.training.test_jax_no_tf import scalars

    config, run = make_configs(tmp_path / "m", num_train_steps=10, iterations_per_loop=3,
                               save_checkpoints_steps=4, keep_checkpoint_max=10,
                               num_eval_steps=1000)
    trainer = TensorFlowPretraining(config, run)
    # a clock on which the first chunk (its tracing) takes 100 s and a step 1 s after it
    clock, real = [0.0], trainer.train_steps

    def timed_steps(iterator, n):
        clock[0] += 100.0 if clock[0] == 0 else n
        return real(iterator, n)

    class FakeTime:
        monotonic = staticmethod(lambda: clock[0])

    monkeypatch.setattr(trainer, "train_steps", timed_steps)
    monkeypatch.setattr(pretraining, "time", FakeTime)
    with ConvertedByAutograph() as converted:  # backends.tensorflow.traced, plain maps
        final = trainer.train()
    assert converted == []
    folder = folders.files.checkpoint_dir(run.model_dir)
    steps = sorted(int(n.split("-")[1].split(".")[0]) for n in os.listdir(folder)
                   if n.startswith("ckpt-") and n.endswith(".index"))
    assert steps == [4, 8, 10]
    lines = capsys.readouterr().err.splitlines()
    # One line and one training summary per 3 steps (and at the end), each over the steps
    # since the one before: a save at 4 and 8 ends a chunk too, and the line had reported
    # that chunk's steps alone (and a summary point had been written for it). The ETA
    # leaves the first chunk's tracing out once a later chunk has run (at step 6: 3 s for
    # 3 steps, 4 to go; it had been 103 s for 6).
    train = [line for line in lines if re.match(r"\[pretrain\] step \d+/10 \|", line)]
    assert [line.split()[2] for line in train] == ["3/10", "6/10", "9/10", "10/10"]
    points = {step: tags["loss"] for step, tags in scalars(
        os.path.join(run.model_dir, "train")).items()}
    assert sorted(points) == [3, 6, 9, 10]
    for line in train:
        step = int(line.split()[2].split("/")[0])
        assert f"loss {points[step]:.4f} " in line, (line, points)
    assert train[0].endswith("eta 3.9 min") and train[1].endswith("eta 0.1 min"), train
    warnings = [i for i, line in enumerate(lines) if "warning: disc_token_cosine" in line]
    assert len(warnings) == 1 and lines[warnings[0] - 1].startswith("[pretrain] eval at step 10")
    assert lines[warnings[0]] == "[pretrain] " + reporting.collapse_line(final)
    notes = [line for line in lines if line.startswith("[pretrain] note: under Kubernetes")]
    assert len(notes) == 1 and "(3 steps)" in notes[0]
    assert "terminationGracePeriodSeconds" in notes[0] and "--log_every_steps=" in notes[0]
    short = [line for line in lines if "--num_eval_steps" in line]
    assert len(short) == 1 and re.fullmatch(
        r"\[pretrain\] note: --eval_data holds (\d+) batches of --eval_batch_size=8, fewer "
        r"than --num_eval_steps=1000: each evaluation reads \1", short[0]), short


def test_the_chunks_since_the_last_line_merge_by_their_steps():
    chunks = [(1, 2.0, 8, {"loss": 10.0, "disc_loss": 0.5, "learning_rate": 3e-4,
                           "grad_norm": 1.0}),
              (3, 4.0, 24, {"loss": 6.0, "disc_loss": 0.1, "learning_rate": 1e-4,
                            "grad_norm": 2.0, "main_mlm_loss": 4.0})]
    assert reporting.merge_chunks(chunks) == {
        "loss": 7.0, "disc_loss": 0.2, "learning_rate": 1e-4, "grad_norm": 1.75,
        "sequences_per_second": 32 / 6.0}  # (a term one chunk lacks is left out)


def test_a_rate_below_10_sequences_a_second_is_not_0():
    """A first chunk at --train_batch_size=1 (its tracing counted) had read "0 seq/s"."""
    results = {"loss": 7.6, "learning_rate": 1e-4, "sequences_per_second": 0.48}
    assert "| 0.48 seq/s |" in reporting.train_line(results, 2, 4, 60.0)
    assert "| 173 seq/s |" in reporting.train_line(
        {**results, "sequences_per_second": 173.4}, 2, 4, 60.0)


def test_bert_mlm_console_line_has_no_discriminator_columns():
    results = {"loss": 7.6, "mlm_loss": 7.6, "masked_lm_accuracy": 0.1, "grad_norm": 1.0,
               "learning_rate": 1e-4, "sequences_per_second": 100.0}
    line = reporting.train_line(results, 200, 1000, 60.0)
    assert "disc" not in line and "nan" not in line
    assert "(mlm 7.600)" in line and "mlm_acc 0.100" in line
    electra = {**results, "disc_loss": 0.4, "disc_auc": 0.6}
    line = reporting.train_line(electra, 200, 1000, 60.0)
    assert "(mlm 7.600 disc 0.4000)" in line and "disc_auc 0.600" in line
    # Electric: the cloze loss it trains stands in for the untrained masked-position one
    electric = {**electra, "loss": 25.4, "cloze_loss": 5.4, "disc_loss": 0.4}
    line = reporting.train_line(electric, 200, 1000, 60.0)
    assert "loss 25.4000 (cloze 5.400 disc 0.4000)" in line and "mlm 7.6" not in line
    # every term of the loss (Replace-MLM's main MLM and adversarial training's had
    # reached TensorBoard only)
    line = reporting.train_line({**results, "loss": 15.2, "main_mlm_loss": 7.6}, 200, 1000, 60.0)
    assert "loss 15.2000 (mlm 7.600 main 7.600)" in line
    adversarial = {**electra, "reinforce_loss": -0.25, "baseline_loss": 0.0625}
    line = reporting.train_line(adversarial, 200, 1000, 60.0)
    assert "(mlm 7.600 disc 0.4000 reinforce -0.2500 baseline 0.0625)" in line
    # a term the phase reports but does not train stands apart (adversarial training's
    # MLM, the frozen generator's in two-stage training's second stage): the terms
    # before it add up to the loss
    line = reporting.train_line(adversarial, 200, 1000, 60.0, phase="adversarial")
    assert "(disc 0.4000 reinforce -0.2500 baseline 0.0625; not trained: mlm 7.600)" in line
    line = reporting.train_line({**electra, "loss": 20.0}, 200, 1000, 60.0,
                                phase="two_stage_discriminator")
    assert "loss 20.0000 (disc 0.4000; not trained: mlm 7.600)" in line
    line = reporting.train_line(results, 200, 1000, 60.0, phase="two_stage_generator")
    assert "(mlm 7.600)" in line


def test_each_loss_has_one_name_in_train_and_in_eval_results():
    sums = {"loss/loss": np.float32(2 * 30.0), "loss/mlm_loss": np.float32(2 * 4.7),
            "loss/disc_loss": np.float32(2 * 0.5), "grad_norm": np.float32(2.0),
            "masked_lm_loss/num": np.float32(48.0), "masked_lm_loss/den": np.float32(10.0),
            "disc_loss/num": np.float32(1.2), "disc_loss/den": np.float32(2.0)}
    train = reporting.finish(sums, 2)
    assert train["mlm_loss"] == np.float32(9.4) / 2 and "masked_lm_loss" not in train
    assert abs(train["disc_loss"] - 0.5) < 1e-6  # the trained term, not the eval metric
    evaluation = reporting.finish(sums, 2, evaluation=True)
    assert "mlm_loss" not in evaluation and abs(evaluation["masked_lm_loss"] - 4.8) < 1e-6
    assert abs(evaluation["disc_loss"] - 0.6) < 1e-6  # the original's per-sequence mean
    assert abs(evaluation["loss"] - 30.0) < 1e-6


def test_a_collapsed_final_eval_is_said_and_a_spread_one_is_not():
    """The study's collapsed discriminators read 0.84-0.91; the random initialization 0.38."""
    line = reporting.collapse_line({"disc_token_cosine": 0.873, "disc_auc": 0.6})
    assert line.startswith("warning: disc_token_cosine 0.873 (>= 0.8): ")
    assert "--from_scratch" in line and "docs/pretraining.md" in line
    for results in ({"disc_token_cosine": 0.38}, {"disc_token_cosine": 0.79}, {}):
        assert reporting.collapse_line(results) is None


def test_repeat_runs_its_body_num_steps_times_in_one_trace():
    import tensorflow as tf

    from electra_tf.training.backends.tensorflow import repeat, traced

    count = tf.Variable(0)

    @traced
    def run(num_steps):
        repeat(num_steps, lambda: count.assign_add(1))

    for n in (0, 1, 5):
        count.assign(0)
        run(tf.constant(n))
        assert int(count.numpy()) == n
    assert run.experimental_get_tracing_count() == 1


def test_traced_functions_of_one_definition_keep_their_own_trace_counts(caplog):
    """TensorFlow counts retracing by a function's code: each trainer's step closures (a
    process fine-tuning several tasks, a test suite) traced once each had been warned
    of as "5 out of the last 5 calls ... triggered tf.function retracing"."""
    import tensorflow as tf

    from electra_tf.training.backends.tensorflow import traced

    def make(offset):
        return traced(lambda x: x + offset, jit_compile=False)

    with caplog.at_level("WARNING", logger="tensorflow"):
        for offset in range(7):
            step = make(offset)
            assert float(step(tf.constant(1.0))) == 1.0 + offset
            assert step.experimental_get_tracing_count() == 1
        @traced  # (as a decorator too)
        def double(x):
            return 2 * x
        assert float(double(tf.constant(3.0))) == 6.0
    assert "retracing" not in caplog.text


def test_the_start_line_names_bert_s_one_model():
    """BERT (objective bert_mlm) trains one masked LM whose encoder is kept: the line had
    called it a discriminator beside a generator of another size."""
    from electra_tf.core.config import PretrainingConfig
    from electra_tf.modeling.models import build_pretraining_models

    for objective, expected in (
            ("bert_mlm", r"BERT masked LM ([\d,]+) params \(its encoder, the model kept, "
                         r"([\d,]+)\)"),
            ("electra", r"discriminator ([\d,]+) params, generator ([\d,]+) \(shared "
                        r"embeddings counted in both\)")):
        config = PretrainingConfig(objective=objective, model_size="tiny", vocab_size=50,
                                   model_hparam_overrides={"embedding_size": 8,
                                                           "hidden_size": 16,
                                                           "num_hidden_layers": 1,
                                                           "num_attention_heads": 2,
                                                           "intermediate_size": 32})
        generator, discriminator = build_pretraining_models(config.encoders)
        line = reporting.models_line(config, discriminator, generator)
        match = re.fullmatch(expected, line)
        assert match, line
        first, second = (int(x.replace(",", "")) for x in match.groups())
        if objective == "bert_mlm":
            assert (first, second) == (generator.count_params(),
                                       discriminator.encoder.count_params())
            assert first > second  # the MLM head over the encoder


def test_the_start_line_says_what_the_two_models_share():
    """It had said "(shared counted in both)" whatever the run shared: nothing with
    untied embeddings or two-stage training, no generator network with uniform sampling."""
    from electra_tf.core.config import PretrainingConfig

    class Sized:  # what models_line reads of a model
        def __init__(self, n):
            self.n = n

        def count_params(self):
            return self.n

    said = {}
    for name, options in [("tied", {}), ("untied", dict(untied_generator_embeddings=True)),
                          ("uniform", dict(uniform_generator=True)),
                          ("one encoder", dict(untied_generator=False, generator_hidden_size=1.0))]:
        line = reporting.models_line(PretrainingConfig(**options), Sized(8000), Sized(700))
        said[name] = line[line.index("("):]
    assert said == {"tied": "(shared embeddings counted in both)",
                    "untied": "(nothing shared)",
                    "uniform": "(no generator network: uniform sampling)",
                    "one encoder": "(shared encoder counted in both)"}
