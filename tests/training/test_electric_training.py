"""Electric through the loops: an exact resume on each backend (-m slow), and the TF and
JAX forward passes (cloze logits, energies, loss terms) agreeing to 1e-5."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import RECORDS_SEQ as L
from helpers import TINY_NO_DROPOUT


# Three tiny runs; the default suite resumes ELECTRA exactly more cheaply. Also Electric's
# run through the loop to a checkpoint fine-tuning loads (test_training_objectives.py's
# check of each objective).
@pytest.mark.slow
def test_an_electric_run_resumes_exactly(make_configs, tmp_path):
    from electra_tf.folders.pretraining import load_discriminator
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining

    config, run = make_configs(tmp_path / "a", objective="electric")
    straight = TensorFlowPretraining(config, run)
    straight.train()
    config_b, run_b = make_configs(tmp_path / "b", objective="electric")
    first = TensorFlowPretraining(config_b, run_b)
    first.train(stop_at_step=3)
    del first
    resumed = TensorFlowPretraining(config_b, run_b)
    final = resumed.train()
    assert resumed.step == 6 and np.isfinite(final["loss"])
    names = [v.path for v in resumed.model.trainable_variables]
    assert any("generator_ltr/layer_0" in n for n in names)
    assert any("generator_rtl/layer_0" in n for n in names)
    for a, b in zip(straight.model.trainable_variables, resumed.model.trainable_variables,
                    strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    # The final evaluation recorded, and the discriminator fine-tuning loads (of D's size)
    recorded = json.load(open(tmp_path / "b" / "final_eval.json"))
    assert recorded["step"] == 6
    assert np.isfinite(recorded["loss"]) and np.isfinite(recorded["masked_lm_loss"])
    discriminator, _ = load_discriminator(str(tmp_path / "b"))
    assert discriminator.config.hidden_size == 16


@pytest.mark.slow
def test_a_jax_electric_run_resumes_exactly(tiny_records, tmp_path):
    from tests.training.test_jax_runtime import config_json, train_runs

    straight, resumed = train_runs([
        (config_json(tiny_records, tmp_path / "a", objective="electric"), [None]),
        (config_json(tiny_records, tmp_path / "b", objective="electric"), [3, None])])
    assert straight["step"] == resumed["step"] == 6 and straight["final"] == resumed["final"]
    for a, b in zip(straight["weights"], resumed["weights"], strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def electric_forward(base: dict, weights: str, batch: dict, special_ids) -> dict:
    """Electric's cloze logits, energies and loss terms on `batch` from the same initial
    weights under this process's backend (TF saves them to `weights`, JAX loads them), with
    the argmax of the cloze logits as the "samples" so that both backends corrupt alike."""
    import keras
    from keras import ops

    from electra_tf.core.config import PretrainingConfig
    from electra_tf.objectives import corruption
    from electra_tf.objectives.electric import ElectricObjective, masked_positions
    from electra_tf.objectives.pretrainer import ElectraPretrainer

    config = PretrainingConfig(**base)
    keras.utils.set_random_seed(0)
    objective = ElectricObjective.from_config(config)
    objective = ElectricObjective(**{**objective.__dict__, "special_ids": tuple(special_ids)})
    model = ElectraPretrainer(config, objective)
    model.build_with_dummy_batch()
    if keras.backend.backend() == "tensorflow":
        model.save_weights(weights)
    else:
        model.load_weights(weights)
    args = (batch["masked_lm_positions"], batch["masked_lm_weights"])
    original = corruption.scatter_at_positions(batch["input_ids"], args[0],
                                               batch["masked_lm_ids"], args[1])
    gen = model.generator({"input_ids": original, "input_mask": batch["input_mask"],
                           "segment_ids": batch["segment_ids"], "masked_lm_positions": args[0]})
    sampled = np.argmax(ops.convert_to_numpy(gen["mlm_logits"]), -1).astype("int32")
    corrupted = corruption.scatter_at_positions(batch["input_ids"], args[0], sampled, args[1])
    labels = masked_positions(args[0], args[1], L) * ops.cast(batch["input_mask"], "float32")
    fake = {"input_ids": corrupted, "sampled_ids": sampled, "original_ids": original,
            "labels": labels, "cloze_logits": gen["cloze_logits"]}
    disc = model.discriminator({"input_ids": corrupted, "input_mask": batch["input_mask"],
                                "segment_ids": batch["segment_ids"]})
    losses = objective.compute_loss(batch, gen["mlm_logits"], fake, disc)
    return {"losses": {k: float(ops.convert_to_numpy(v)) for k, v in losses.items()},
            "cloze": ops.convert_to_numpy(gen["cloze_logits"]).tolist(),
            "energy": ops.convert_to_numpy(disc["rtd_logits"]).tolist()}


FORWARD = """
    import json, sys
    import numpy as np
    from tests.training.test_electric_training import electric_forward
    with np.load(sys.argv[3]) as data:
        batch = {k: data[k] for k in data.files}
    print(json.dumps(electric_forward(json.loads(sys.argv[1]), sys.argv[2], batch,
                                      json.loads(sys.argv[4]))))
"""


def test_tf_and_jax_agree_on_electric(tiny_records, tmp_path):
    from electra_tf.data.masking import MaskingConfig
    from electra_tf.data.pipeline import pretraining_dataset
    from electra_tf.text.tokenizer import Tokenizer, load_vocab
    from tests.training.test_jax_runtime import run_python

    config = dict(model_size="tiny", model_hparam_overrides=TINY_NO_DROPOUT, max_seq_length=L,
                  vocab_size=len(load_vocab(tiny_records["vocab"])), generator_hidden_size=0.5,
                  objective="electric")
    masking = MaskingConfig.from_tokenizer(Tokenizer(tiny_records["vocab"]), 0.15,
                                           int((0.15 + 0.005) * L))
    special = [masking.cls_id, masking.sep_id, masking.mask_id]
    batch = next(iter(pretraining_dataset(tiny_records["train"], 8, L, masking, seed=0)))
    np.savez(tmp_path / "batch.npz", **{k: v.numpy() for k, v in batch.items()})
    with np.load(tmp_path / "batch.npz") as data:
        tf_out = electric_forward(config, str(tmp_path / "w.weights.h5"),
                                  {k: data[k] for k in data.files}, special)
    jax_out = json.loads(run_python(FORWARD, "jax", json.dumps(config),
                                    str(tmp_path / "w.weights.h5"), str(tmp_path / "batch.npz"),
                                    json.dumps(special)).splitlines()[-1])
    assert set(tf_out["losses"]) == {"loss", "cloze_loss", "mlm_loss", "disc_loss"}
    for key, value in tf_out["losses"].items():
        assert jax_out["losses"][key] == pytest.approx(value, rel=1e-5, abs=1e-6), key
    for key in ("cloze", "energy"):
        np.testing.assert_allclose(np.array(jax_out[key]), np.array(tf_out[key]),
                                   rtol=1e-5, atol=1e-5, err_msg=key)
