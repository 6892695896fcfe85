"""The training FLOPs of a run (objectives/flops.py), as the original's flops_computation.py
counts them."""

import dataclasses

import pytest
from helpers import REPO

from electra_tf.core.config import OBJECTIVES, PretrainingConfig
from electra_tf.objectives import flops

# Printed by google-research/electra's flops_computation.py (`python3 flops_computation.py`,
# its MODEL_FLOPS, at its HEAD) and copied here: the totals of its four configurations.
ORIGINAL = {
    "electra_small": 1.293743798272e+18,
    "electra_base": 6.424541834277683e+19,
    "bert_small": 1.4187399146496e+18,
    "bert_base": 6.428335104e+19,
    # the rest of its table, which the port's MODEL_FLOPS reproduces too
    "gpt": 3.968752230785352e+19,
    "bert_large": 1.91720905883648e+20,
    "electra_400k": 7.117606040895488e+20,
    "electra_1.75M": 3.113952642891776e+21,
    "roberta": 3.187221435776e+21,
    "albert": 3.113923955392512e+22,
    "t5_11b": 4.581900124212429e+22,
}


def flagfile_config(name: str, **changes) -> PretrainingConfig:
    """The PretrainingConfig of configs/NAME.flags (its hyperparameters), with changes."""
    values = {}
    for line in open(f"{REPO}/configs/{name}.flags"):
        line = line.strip()
        if line.startswith("--") and "=" in line:
            key, value = line[2:].split("=", 1)
            field = PretrainingConfig.__dataclass_fields__.get(key)
            if field is not None:  # read as the field's type (a config checks its types)
                kind = field.type.partition(" | ")[0]
                values[key] = (value == "true" if kind == "bool" else int(value)
                               if kind == "int" else float(value) if kind == "float"
                               else value)
    values.update(changes)
    return PretrainingConfig(**values)


@pytest.mark.parametrize("name,flagfile,changes", [
    ("electra_small", "small", {}),
    ("electra_base", "base", {}),
    # BERT-Small: 1.45M steps, as the original's table (ELECTRA-Small's FLOPs, about)
    ("bert_small", "small", {"objective": "bert_mlm", "num_train_steps": 1450000}),
    ("bert_base", "base", {"objective": "bert_mlm", "num_train_steps": 1000000}),
])
def test_the_paper_configurations_cost_what_the_original_counts(name, flagfile, changes):
    config = flagfile_config(flagfile, **changes)
    counted = flops.pretraining_flops(config)
    assert counted.total == pytest.approx(ORIGINAL[name], rel=1e-3)
    assert counted.flops_per_step * config.num_train_steps == pytest.approx(counted.total)
    assert counted.to_dict()["total_flops"] == counted.total


def test_inference_flops_are_the_papers_table_1_and_the_runs_own_length():
    """The kept model on one 128-token input (the original's get_infer_flops): the paper's
    Table 1 gives 3.7e9 for ELECTRA-Small and 2.9e10 for Base; a run also records its
    own final length (Base trains at 512; a two-phase run ends at phase 2's)."""
    small = flops.pretraining_flops(flagfile_config("small"))
    assert small.inference == {128: pytest.approx(3.677e9, rel=1e-3)}
    assert f"{small.inference[128]:.1e}" == "3.7e+09"
    assert small.to_dict()["inference_flops_per_sequence"] == {"128": small.inference[128]}
    assert "; inference 3.677e+09 per sequence of 128 (counted as" in small.summary()
    base = flops.pretraining_flops(flagfile_config("base"))
    assert f"{base.inference[128]:.1e}" == "2.9e+10" and sorted(base.inference) == [128, 512]
    assert base.inference[512] > 4 * base.inference[128]  # attention grows with L^2
    two = flops.pretraining_flops(flagfile_config("small", phase2_steps=1000,
                                                  phase2_max_seq_length=512))
    assert sorted(two.inference) == [128, 512]


def test_the_ported_table_is_the_originals():
    for name, value in ORIGINAL.items():
        assert flops.MODEL_FLOPS[name] == pytest.approx(value, rel=1e-12), name


def test_every_objective_and_algorithm_is_counted():
    """Every objective has a count (a new one fails here until OBJECTIVE_FLOPS has it)."""
    assert set(flops.OBJECTIVE_FLOPS) == set(OBJECTIVES)
    base = flagfile_config("small", num_train_steps=1000)
    total = {o: flops.pretraining_flops(dataclasses.replace(base, objective=o)).total
             for o in OBJECTIVES}
    assert total["electra_15"] == total["electra"]  # the RTD head runs on every token
    # BERT-MLM is D with an MLM head; Replace-MLM adds G; All-Tokens MLM's head runs on
    # every token
    assert total["bert_mlm"] < total["replace_mlm"] < total["all_tokens_mlm"]
    # ELECTRA: D's binary head is far cheaper than an MLM softmax over 30,522 tokens
    assert total["electra"] < total["replace_mlm"]
    uniform = flops.pretraining_flops(dataclasses.replace(base, uniform_generator=True))
    assert "generator" not in uniform.phases[0].parts and uniform.total < total["electra"]
    gdes = flops.pretraining_flops(dataclasses.replace(
        base, gradient_disentangled_embeddings=True))
    assert gdes.total > total["electra"]
    assert "discriminator_residual_embeddings" in gdes.phases[0].parts
    adversarial = flops.pretraining_flops(dataclasses.replace(
        base, training_algorithm="adversarial"))
    assert adversarial.total > total["electra"]


def test_two_stage_training_is_two_phases_of_their_own_cost():
    config = flagfile_config("small", num_train_steps=1001, generator_hidden_size=1.0,
                             training_algorithm="two_stage")
    counted = flops.pretraining_flops(config)
    first, second = counted.phases
    assert (first.steps, second.steps) == (500, 501)
    joint = flops.pretraining_flops(dataclasses.replace(config, training_algorithm="joint"))
    parts = joint.phases[0].parts
    g = parts["generator"] + parts["generator_mlm_head"]
    assert first.per_sequence == pytest.approx(g)  # G alone, forward and backward
    # D trains; frozen G only runs forward (half its training FLOPs)
    assert second.per_sequence == pytest.approx(joint.phases[0].per_sequence - g / 2)
    assert counted.total == pytest.approx(128 * (500 * first.per_sequence
                                                 + 501 * second.per_sequence))
    assert "per step of two_stage_generator (500 steps of 128 sequences), " in counted.summary()


def test_electric_counts_two_towers_and_a_cloze_head_on_every_position():
    """Electric: D and its RTD head as ELECTRA's; G twice (the two towers, whose
    causal masks save nothing); the cloze head on every position with a 2 H_G input."""
    base = flagfile_config("small", num_train_steps=1000)
    electra = flops.pretraining_flops(base).phases[0].parts
    config = dataclasses.replace(base, objective="electric")
    parts = flops.pretraining_flops(config).phases[0].parts
    assert parts["generator_ltr"] == parts["generator_rtl"] == electra["generator"]
    assert parts["discriminator"] == electra["discriminator"]
    assert parts["discriminator_rtd_head"] == electra["discriminator_rtd_head"]
    g = config.generator_config()
    h2, e, v, s = 2 * g.hidden_size, g.resolved_embedding_size, g.vocab_size, 128
    # the original's output-embedding terms (flops_computation.py), at every position
    forward = s * (2 * e * v + 2 * h2 * e + e + flops.ACTIVATION_FLOPS * e
                   + flops.LAYER_NORM_FLOPS * e + flops.SOFTMAX_FLOPS * v + 2 * v)
    assert parts["cloze_predictions"] == pytest.approx(2 * forward)
    assert parts["cloze_predictions"] > electra["generator_mlm_head"] / flops.ORIGINAL_OUTPUT_FRAC


def test_a_second_phase_is_counted_at_its_own_length_and_batch():
    """configs/base_lamb.flags (NVIDIA's Base recipe): 10,000 steps of 67,584 x 128,
    then 933 of 27,648 x 512; the original's flops_computation.py counts the two
    phases as 5.176e19 and 8.451e18 (TransformerHparams at s=128 and s=512)."""
    ints = ("phase2_steps", "phase2_max_seq_length", "phase2_train_batch_size",
            "phase2_warmup_steps")
    values = {}
    for line in open(f"{REPO}/configs/base_lamb.flags"):
        key = line.strip()[2:].split("=", 1)[0]
        if key in ints:
            values[key] = int(line.strip().split("=", 1)[1])
    config = flagfile_config("base_lamb", **values)
    counted = flops.pretraining_flops(config)
    first, second = counted.phases
    assert (first.steps, second.steps) == (10000, 933)
    assert (first.batch_size, second.batch_size) == (67584, 27648)
    get = flops.get_electra_train_flops
    assert first.per_step * first.steps == pytest.approx(
        get(768, 12, 256, 12, 67584, 10000, True, s=128), rel=1e-3)
    assert second.per_step * second.steps == pytest.approx(
        get(768, 12, 256, 12, 27648, 933, True, s=512), rel=1e-3)
    assert counted.total == pytest.approx(5.176e19 + 8.451e18, rel=1e-3)
