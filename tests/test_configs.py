"""The configs: every flagfile parses (the paper's give exactly Table 6), every
field is a flag with its help, and each config refuses, at construction, what a run
cannot do."""

import dataclasses
import inspect
import re

import pytest
from absl import flags
from conftest import REPO

from electra_tf import flags as flags_lib
from electra_tf.core.config import (
    PRETRAINING_ONLY_OPTIONS,
    EncoderConfig,
    FinetuningConfig,
    FinetuningRun,
    PretrainingConfig,
    PretrainingRun,
    RuntimeOptions,
    check_run,
)
from electra_tf.core.errors import ConfigError


@pytest.mark.parametrize("name", ["small", "base", "large", "demo"])
def test_flagfiles_parse(name):
    fv = flags.FlagValues()
    flags_lib.define_pretraining_flags(fv)
    flags_lib.define_demo_flags(fv)
    # BERT's vocabulary size, as the paper; without --vocab_size it is the file's
    # (tests/test_flags_vocab_size.py).
    fv(["x", f"--flagfile={REPO}/configs/{name}.flags", "--model_dir=m", "--train_data=t",
        "--vocab_file=v", "--vocab_size=30522"])
    config, run = flags_lib.pretraining_configs(fv)
    expected = {  # paper Table 6
        "small": dict(hidden=256, layers=12, heads=4, ffn=1024, emb=128, gen=64, mask=0.15,
                      lr=5e-4, batch=128, steps=1_000_000, L=128),
        "base": dict(hidden=768, layers=12, heads=12, ffn=3072, emb=768, gen=256, mask=0.15,
                     lr=2e-4, batch=256, steps=766_000, L=512),
        "large": dict(hidden=1024, layers=24, heads=16, ffn=4096, emb=1024, gen=256, mask=0.25,
                      lr=2e-4, batch=2048, steps=400_000, L=512),
    }.get(name)
    if expected is None:
        assert config.model_size == "tiny" and config.num_train_steps <= 2400
        assert fv.demo_corpus == "installed" and fv.demo_data_dir
        return
    d, g = config.discriminator_config(), config.generator_config()
    got = dict(hidden=d.hidden_size, layers=d.num_hidden_layers, heads=d.num_attention_heads,
               ffn=d.intermediate_size, emb=d.resolved_embedding_size, gen=g.hidden_size,
               mask=config.mask_prob, lr=config.learning_rate, batch=config.train_batch_size,
               steps=config.num_train_steps, L=config.max_seq_length)
    assert got == expected
    assert (config.num_warmup_steps, config.weight_decay_rate, config.adam_epsilon,
            config.disc_weight, config.vocab_size) == (10000, 0.01, 1e-6, 50.0, 30522)
    assert config.resolved_max_predictions_per_seq == int((config.mask_prob + 0.005) * got["L"])


def test_unknown_hyperparameter_is_an_error():
    with pytest.raises(ConfigError, match="unknown PretrainingConfig"):
        PretrainingConfig.from_dict({"disc_wieght": 50.0})


def test_tied_generator_needs_equal_sizes():
    with pytest.raises(ConfigError, match="equal sizes"):
        PretrainingConfig(untied_generator=False)
    PretrainingConfig(untied_generator=False, generator_hidden_size=1.0)


@pytest.mark.parametrize("cls, valid, bad, message", [
    (PretrainingConfig, {}, dict(mask_prob=1.5), r"mask_prob must be in \(0, 1\), got 1.5"),
    (PretrainingConfig, {}, dict(untied_generator=False), "needs equal sizes"),  # on G's config
    (PretrainingConfig, {}, dict(temperature=float("nan")),
     "temperature must be a finite number > 0, got nan"),  # NaN logits had trained on
    (PretrainingConfig, {}, dict(disc_weight=-1.0), "disc_weight must be a finite number >= 0"),
    (PretrainingConfig, {}, dict(clip_norm=0.0), "clip_norm must be a finite number > 0"),
    (PretrainingConfig, {}, dict(phase2_learning_rate=float("inf")),
     "phase2_learning_rate must be a finite number >= 0, got inf"),
    (PretrainingConfig, {}, dict(model_hparam_overrides=[1]),
     r"model_hparam_overrides must be a JSON object of EncoderConfig fields, got \[1\]"),
    (PretrainingConfig, {}, dict(model_hparam_overrides={"hidden_size": "32"}),
     "hidden_size must be an integer, got '32'"),
    (PretrainingConfig, {}, dict(model_hparam_overrides={"num_attention_heads": 3}),
     "hidden_size 256 is not a multiple of num_attention_heads 3"),  # on D's config
    (EncoderConfig, {}, dict(num_attention_heads=7),
     "hidden_size 768 is not a multiple of num_attention_heads 7"),
    (EncoderConfig, {}, dict(vocab_size="211"), "vocab_size must be an integer, got '211'"),
    (EncoderConfig, {}, dict(hidden_size=768.0), "hidden_size must be an integer, got 768.0"),
    (EncoderConfig, {}, dict(layer_norm_eps=float("nan")),
     "layer_norm_eps must be a finite number, got nan"),
    (EncoderConfig, {}, dict(layer_norm_eps=0.0), "layer_norm_eps must be > 0, got 0.0"),
    (EncoderConfig, {}, dict(initializer_range=0.0), "initializer_range must be > 0, got 0.0"),
    (FinetuningRun, {}, dict(tpu="foo"), "tpu='foo' is for strategy=tpu, and this run's is "
                                         "default"),
    (PretrainingConfig, dict(vocab_size=211), dict(model_hparam_overrides={"vocab_size": 5}),
     r"model_hparam_overrides' vocab_size 5 is smaller than the vocabulary's 211 tokens"),
    (PretrainingConfig, {}, dict(embedding_size=12, model_hparam_overrides={"embedding_size": 8}),
     r"--embedding_size=12 and model_hparam_overrides' embedding_size 8: give one"),
    (FinetuningConfig, dict(task_name="sst2"), dict(adam_epsilon=0.0),
     "adam_epsilon must be a finite number > 0, got 0.0"),
    (FinetuningConfig, dict(task_name="sst2"), dict(clip_norm=0.0),
     "clip_norm must be a finite number > 0, got 0.0"),
    (FinetuningConfig, dict(task_name="sst2"), dict(save_checkpoints_steps=-1),
     r"save_checkpoints_steps must be >= 0 \(0: at the end of every epoch only\), got -1"),
    (FinetuningConfig, dict(task_name="sst2"), dict(beam_size=0), "beam_size must be >= 1, got 0"),
    (FinetuningConfig, dict(task_name="squad_v2"), dict(answerable_weight=-0.5),
     "answerable_weight must be a finite number >= 0, got -0.5"),
    (FinetuningConfig, dict(task_name="sst2"), dict(num_train_epochs=float("nan")),
     "num_train_epochs must be a finite number >= 0, got nan"),
    (FinetuningConfig, dict(task_name="sst2"), dict(learning_rate=float("inf")),
     "learning_rate must be a finite number >= 0, got inf"),
    (FinetuningConfig, dict(task_name="sst2"), dict(keep_checkpoint_max=0),
     "keep_checkpoint_max must be >= 1, got 0"),  # Keras' ValueError traceback before
    (FinetuningConfig, dict(task_name="sst2"), dict(seed=-1),
     r"seed must be an integer in \[0, 2\*\*32 - 1\], got -1"),
    (PretrainingConfig, {}, dict(seed=2**32), r"seed must be an integer in \[0, 2\*\*32 - 1\]"),
    (FinetuningConfig, dict(task_name="sst2"), dict(layerwise_lr_decay=float("nan")),
     "layerwise_lr_decay must be a finite number, got nan"),  # trained, then blamed the lr
    (FinetuningConfig, dict(task_name="sst2"), dict(layerwise_lr_decay=5.0),
     r"layerwise_lr_decay must be in \[0, 1\] \(0: off\) or -1 \(by size\), got 5.0"),
    (RuntimeOptions, {}, dict(strategy="gpu"), "unknown strategy 'gpu'"),
    (PretrainingRun, dict(model_dir="m", train_data="t", vocab_file="v"),
     dict(gradient_accumulation_steps=0), "gradient_accumulation_steps must be >= 1, got 0"),
    (PretrainingRun, dict(model_dir="m", train_data="t", vocab_file="v"), dict(train_data=""),
     "train_data is required"),
    (PretrainingRun, dict(model_dir="m", train_data="t", vocab_file="v"),
     dict(eval_every_steps=-2), "eval_every_steps must be >= 0, got -2"),  # had been ignored
    (PretrainingConfig, {}, dict(phase2_learning_rate=5.0),  # ignored without phase2_steps
     r"phase2_learning_rate needs phase2_steps >= 1"),
    (PretrainingConfig, {}, dict(phase2_warmup_steps=3), r"phase2_warmup_steps needs phase2_"),
    (PretrainingConfig, {}, dict(model_hparam_overrides={"type_vocab_size": 1}),
     "type_vocab_size must be >= 2 for pre-training, whose records hold segment ids 0 and 1, "
     "got 1"),  # segment id 1 had been blamed on the records' token ids
    (FinetuningRun, {}, dict(jax_steps_per_call=2), "jax_steps_per_call=2 is for pre-training"),
    # runs that had trained nothing with exit 0 (a rate that is 0 in float32, no loss)
    # or forever (steps past the int64 step counter)
    (PretrainingConfig, {}, dict(learning_rate=1e-300),
     r"learning_rate 1e-300 is below float32's smallest normal number"),
    (FinetuningConfig, dict(task_name="sst2"), dict(learning_rate=1e-40),  # had trained
     r"learning_rate 1e-40 is below float32's smallest normal number .*would not move "
     r"\(0: the original's rate for the size\)"),
    (PretrainingConfig, {}, dict(gen_weight=0.0, disc_weight=0.0),
     "gen_weight and disc_weight are both 0: no loss"),
    # the weight a run's loss takes alone (each had trained by weight decay only, exit 0)
    (PretrainingConfig, {}, dict(objective="bert_mlm", gen_weight=0.0),
     "gen_weight is 0 with objective bert_mlm, whose one loss it weighs"),
    (PretrainingConfig, dict(num_train_steps=8, generator_hidden_size=1.0,
                             generator_layers=1.0),
     dict(training_algorithm="two_stage", disc_weight=0.0),
     "disc_weight is 0 with training_algorithm two_stage, whose discriminator stage it "
     "weighs alone"),
    (PretrainingConfig, {}, dict(num_train_steps=10**20),
     r"num_train_steps must be at most 2\*\*62, got 100000000000000000000"),
], ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_a_config_is_refused_at_construction_and_by_replace(cls, valid, bad, message):
    with pytest.raises(ConfigError, match=message) as error:
        cls(**{**valid, **bad})
    assert "\n" not in str(error.value)
    config = cls(**valid)
    with pytest.raises(ConfigError, match=message):
        dataclasses.replace(config, **bad)


# Today's derived sizes (the original's get_bert_config and get_generator_config), as
# (hidden, layers, heads, FFN, embedding_size) of D and of G; G's embedding size is D's
# (tied tables), or None (its own width) with untied_generator_embeddings.
_DERIVED = [
    ("small", {}, (256, 12, 4, 1024, 128), (64, 12, 1, 256, 128)),
    ("small", dict(generator_hidden_size=1 / 3), (256, 12, 4, 1024, 128), (85, 12, 1, 340, 128)),
    ("small", dict(generator_hidden_size=0.5, generator_layers=0.5),
     (256, 12, 4, 1024, 128), (128, 6, 2, 512, 128)),
    ("small", dict(generator_hidden_size=1.0), (256, 12, 4, 1024, 128), (256, 12, 4, 1024, 128)),
    ("small", dict(untied_generator_embeddings=True),
     (256, 12, 4, 1024, 128), (64, 12, 1, 256, None)),
    ("small", dict(objective="bert_mlm"), (256, 12, 4, 1024, 128), (256, 12, 4, 1024, 128)),
    ("base", {}, (768, 12, 12, 3072, None), (192, 12, 3, 768, 768)),
    ("base", dict(generator_hidden_size=1 / 3), (768, 12, 12, 3072, None), (256, 12, 4, 1024, 768)),
    ("base", dict(generator_hidden_size=0.5, generator_layers=0.5),
     (768, 12, 12, 3072, None), (384, 6, 6, 1536, 768)),
    ("base", dict(generator_hidden_size=1.0), (768, 12, 12, 3072, None), (768, 12, 12, 3072, 768)),
    ("base", dict(untied_generator_embeddings=True),
     (768, 12, 12, 3072, None), (192, 12, 3, 768, None)),
    ("large", {}, (1024, 24, 16, 4096, None), (256, 24, 4, 1024, 1024)),
    ("large", dict(generator_hidden_size=0.5, generator_layers=0.5),
     (1024, 24, 16, 4096, None), (512, 12, 8, 2048, 1024)),
    ("large", dict(generator_hidden_size=1.0),
     (1024, 24, 16, 4096, None), (1024, 24, 16, 4096, 1024)),
    ("large", dict(untied_generator_embeddings=True),
     (1024, 24, 16, 4096, None), (256, 24, 4, 1024, None)),
]


@pytest.mark.parametrize("size, options, disc, gen", _DERIVED)
def test_derived_encoder_configs(size, options, disc, gen):
    config = PretrainingConfig(model_size=size, vocab_size=1000, **options)

    def sizes(c):
        return (c.hidden_size, c.num_hidden_layers, c.num_attention_heads,
                c.intermediate_size, c.embedding_size)

    d, g = config.discriminator_config(), config.generator_config()
    assert (sizes(d), sizes(g)) == (disc, gen)
    assert (d.vocab_size, g.vocab_size, g.max_position_embeddings) == (1000, 1000, 512)
    # derived once, at construction: what modeling builds from
    assert (config.encoders.discriminator, config.encoders.generator) == (d, g)
    assert config.discriminator_config() is d and config.generator_config() is g


def test_a_generator_size_no_head_count_divides_is_refused():
    with pytest.raises(ConfigError, match="generator hidden size 341 is not a multiple of 5 heads"):
        PretrainingConfig(model_size="large", generator_hidden_size=1 / 3)


@pytest.mark.parametrize("options, sharing", [
    ({}, "embeddings"),
    (dict(untied_generator_embeddings=True), "none"),
    (dict(training_algorithm="two_stage", generator_hidden_size=1.0), "none"),
    (dict(untied_generator=False, generator_hidden_size=1.0), "encoder"),
    (dict(objective="bert_mlm"), "encoder"),
    (dict(gradient_disentangled_embeddings=True), "disentangled"),
    (dict(uniform_generator=True), "uniform"),
])
def test_encoders_carry_the_weight_sharing(options, sharing):
    encoders = PretrainingConfig(**options).encoders
    assert (encoders.sharing, encoders.baseline_head) == (sharing, False)
    assert PretrainingConfig(training_algorithm="adversarial").encoders.baseline_head


def test_replace_derives_the_encoders_again_and_to_dict_leaves_them_out():
    config = PretrainingConfig()
    wider = dataclasses.replace(config, generator_hidden_size=0.5)
    assert config.generator_config().hidden_size == 64
    assert wider.generator_config().hidden_size == 128
    assert "_encoders" not in config.to_dict() and "encoders" not in config.to_dict()
    again = PretrainingConfig.from_dict(config.to_dict())
    assert again == config and again.encoders == config.encoders


def _pretraining_flags(*args: str) -> flags.FlagValues:
    fv = flags.FlagValues()
    flags_lib.define_pretraining_flags(fv)
    fv(["x", "--model_dir=m", "--train_data=t", "--vocab_file=v", "--vocab_size=30522", *args])
    return fv


@pytest.mark.parametrize("cls", [EncoderConfig, PretrainingConfig, RuntimeOptions, PretrainingRun,
                                 FinetuningConfig, FinetuningRun], ids=lambda cls: cls.__name__)
def test_every_field_has_help(cls):
    assert [f.name for f in dataclasses.fields(cls) if not f.metadata.get("help")] == []


def test_flags_need_no_python_sources(monkeypatch):
    """An install without .py sources (inspect.getsource fails) still gets every flag and help."""
    def no_source(obj):
        raise OSError("could not get source code")

    monkeypatch.setattr(inspect, "getsource", no_source)
    fv = flags.FlagValues()
    flags_lib.define_pretraining_flags(fv)
    flags_lib.define_finetuning_flags(fv)  # the shared RuntimeOptions fields: defined once
    expected = {}
    for cls in (PretrainingConfig, PretrainingRun, FinetuningConfig, FinetuningRun):
        for f in dataclasses.fields(cls):  # the first definition of a name wins
            suffix = " (JSON)" if f.type == "dict" else ""
            if f.metadata.get("choices"):  # the names it takes, listed by --help
                suffix += " (one of: " + ", ".join(c or "''" for c in f.metadata["choices"]) + ")"
            expected.setdefault(f.name, f.metadata["help"] + suffix)
    assert {name: fv[name].help for name in expected} == expected
    assert "electra_objective" not in fv


def test_a_field_without_help_is_no_flag():
    @dataclasses.dataclass(frozen=True)
    class Bare:
        x: int = 0

    with pytest.raises(TypeError, match="Bare.x has no help text"):
        flags_lib._define(Bare, flags.FlagValues())


def test_jax_options_are_run_flags():
    _, run = flags_lib.pretraining_configs(_pretraining_flags(
        "--jax_steps_per_call=3", "--jax_input_pipeline=numpy",
        "--jax_coordinator_address=h:1", "--jax_num_processes=2", "--jax_process_id=1",
        "--jax_device_prefetch"))
    assert (run.jax_steps_per_call, run.jax_input_pipeline, run.jax_coordinator_address,
            run.jax_num_processes, run.jax_process_id,
            run.jax_device_prefetch) == (3, "numpy", "h:1", 2, 1, True)


def test_finetuning_flags_leave_out_the_pretraining_only_options():
    fv = flags.FlagValues()
    flags_lib.define_finetuning_flags(fv)
    assert [name for name in PRETRAINING_ONLY_OPTIONS if name in fv] == []
    fv(["x", "--task_name=sst2", "--model_dir=m", "--data_dir=d", "--strategy=mirrored",
        "--init_checkpoint=p"])
    _, run = flags_lib.finetuning_configs(fv)
    assert run == FinetuningRun(model_dir="m", data_dir="d", strategy="mirrored",
                                init_checkpoint="p")
    assert flags_lib.runtime_options(fv) == RuntimeOptions(strategy="mirrored")


def test_runtime_options_read_alone_from_either_set_of_flags():
    options = flags_lib.runtime_options(_pretraining_flags("--strategy=mirrored",
                                                           "--num_devices=2"))
    assert options == RuntimeOptions(strategy="mirrored", num_devices=2)
    fv = flags.FlagValues()
    flags_lib.define_finetuning_flags(fv)
    fv(["x", "--mixed_precision=fp16"])
    with pytest.raises(ConfigError, match="mixed_precision must be fp32 or bf16"):
        flags_lib.runtime_options(fv)


_REQUIRED = {RuntimeOptions: {},
             PretrainingRun: dict(model_dir="m", train_data="t", vocab_file="v"),
             FinetuningRun: dict(model_dir="m", data_dir="d")}


@pytest.mark.parametrize("cls", list(_REQUIRED), ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("options, message", [
    (dict(strategy="gpu"), "unknown strategy 'gpu'"),
    (dict(mixed_precision="fp16"), "mixed_precision must be fp32 or bf16"),
    (dict(worker_startup_timeout_s=-1), "worker_startup_timeout_s must be >= 0, got -1"),
    (dict(num_devices=-1), r"num_devices must be >= 0 \(0: all\), got -1"),
    (dict(jax_steps_per_call=0), "jax_steps_per_call must be >= 1, got 0"),
    (dict(jax_input_pipeline="pandas"), "jax_input_pipeline must be one of tf.data, numpy, packed"),
    (dict(jax_num_processes=0), "jax_num_processes must be >= 1, got 0"),
    (dict(jax_process_id=-1), r"jax_process_id=-1 is not in \[0, jax_num_processes=1\)"),
    (dict(jax_coordinator_address="h:1", jax_num_processes=2, jax_process_id=2),
     r"jax_process_id=2 is not in \[0, jax_num_processes=2\)"),
    (dict(jax_num_processes=2), "needs both jax_coordinator_address"),
    (dict(jax_coordinator_address="h:1"), "needs both jax_coordinator_address"),
    # each had ended in a traceback (IndexError, ValueError, OverflowError of bind)
    *[(dict(jax_coordinator_address=bad, jax_num_processes=2),
       f"jax_coordinator_address must be HOST:PORT, a port 1 to 65535 .*, got '{bad}'")
      for bad in ("nocolon", "127.0.0.1:abc", "127.0.0.1:99999", ":80", "h:0", "h:-1",
                  "h:\u00b2")],  # (`²`: str.isdigit's, not int's: a ValueError before)
], ids=lambda v: ",".join(map(str, v.values())) if isinstance(v, dict) else None)
def test_runtime_options_are_checked_in_every_run(cls, options, message):
    cls(**_REQUIRED[cls])
    with pytest.raises(ConfigError, match=message):
        cls(**_REQUIRED[cls], **options)


@pytest.mark.parametrize("options, message", [
    (dict(jax_steps_per_call=2), "jax_steps_per_call=2 is for pre-training: fine-tuning runs "
                                 "one step per compiled call"),
    (dict(jax_input_pipeline="numpy"), "jax_input_pipeline=numpy is for pre-training"),
    (dict(jax_device_prefetch=True), "jax_device_prefetch is for pre-training"),
    (dict(jax_coordinator_address="h:1", jax_num_processes=2),
     "jax_num_processes=2 is for pre-training"),
], ids=lambda v: ",".join(v) if isinstance(v, dict) else None)
def test_finetuning_refuses_the_jax_options_it_has_not(options, message):
    with pytest.raises(ConfigError, match=message) as error:
        FinetuningRun(model_dir="m", data_dir="d", **options)
    assert "\n" not in str(error.value)


def test_run_checks_the_batch_against_gradient_accumulation():
    run = PretrainingRun(model_dir="m", train_data="t", vocab_file="v",
                         gradient_accumulation_steps=4)
    check_run(PretrainingConfig(train_batch_size=8), run)  # alone, the batch is unknown
    with pytest.raises(ConfigError, match="train_batch_size must be a multiple of "
                       "gradient_accumulation_steps, got train_batch_size=6 and "
                       "gradient_accumulation_steps=4"):
        check_run(PretrainingConfig(train_batch_size=6), run)
    with pytest.raises(ConfigError, match="must be a multiple of gradient_accumulation_steps"):
        flags_lib.pretraining_configs(_pretraining_flags("--train_batch_size=6",
                                                         "--gradient_accumulation_steps=4"))


def test_phase_2_options_are_named_as_given():
    """Phase-2 options without phase 2 name the ones given (both were named, given or
    not), and a phase-2 batch that does not split says where its accumulation came
    from (phase 1's, inherited)."""
    run = PretrainingRun(model_dir="m", train_data="t", vocab_file="v", phase2_train_data="p")
    with pytest.raises(ConfigError, match=r"^phase2_train_data needs phase2_steps >= 1 "
                       r"\(the steps of phase 2"):
        check_run(PretrainingConfig(), run)
    phases = PretrainingConfig(num_train_steps=10, phase2_steps=4, phase2_max_seq_length=32,
                               phase2_train_batch_size=4)
    run = PretrainingRun(model_dir="m", train_data="t", vocab_file="v", phase2_train_data="p",
                         gradient_accumulation_steps=8)
    with pytest.raises(ConfigError, match=r"^phase 2's train batch 4 is not a multiple of its "
                       r"gradient accumulation steps 8 \(gradient_accumulation_steps, which "
                       r"phase 2 takes where phase2_gradient_accumulation_steps is 0\)$"):
        check_run(dataclasses.replace(phases, train_batch_size=8), run)


def test_the_objective_is_chosen_by_objective_alone():
    with pytest.raises(ConfigError, match="unknown PretrainingConfig hyperparameter.*: "
                       "electra_objective;"):
        PretrainingConfig.from_dict({"electra_objective": False})
    bert = PretrainingConfig(objective="bert_mlm")
    assert bert.generator_config() == bert.discriminator_config()


@pytest.mark.parametrize("args, message", [
    (["--model_dir=m", "--data_dir=d"], "task_name is required"),
    (["--task_name=sst2", "--data_dir=d"], "--model_dir is required"),
    (["--task_name=sst2", "--model_dir=m"], "--data_dir is required"),
])
def test_finetuning_command_requires_task_and_folders(args, message):
    """The classes allow them empty (FinetuningConfig() holds the defaults; a model loads
    without a data_dir); the command's flags do not."""
    FinetuningConfig(), FinetuningRun()
    fv = flags.FlagValues()
    flags_lib.define_finetuning_flags(fv)
    fv(["x", *args])
    with pytest.raises(ConfigError, match=f"^{message}$"):
        flags_lib.finetuning_configs(fv)


def test_a_json_flag_that_json_cannot_read_is_one_config_error():
    """run_pretraining's --model_hparam_overrides: malformed, nested past the recursion
    limit, or an integer of over 4,300 digits (the last two were tracebacks)."""
    from helpers import pretraining_from_flags

    from electra_tf.core.errors import ConfigError

    for value in ("{bad", "[" * 100_000, '{"hidden_size": 1' + "0" * 5000 + "}"):
        with pytest.raises(ConfigError, match="--model_hparam_overrides is not valid JSON"):
            pretraining_from_flags("--model_dir=m", "--train_data=x.tfrecord",
                                   f"--model_hparam_overrides={value}")


def test_a_warmup_past_the_run_is_warned_with_the_rate_the_schedule_reaches():
    """The original's schedule multiplies the decay to 0 by the warmup's ramp: a warmup
    longer than the run peaks far below --learning_rate, and does decay (the warning had
    said it reached length/warmup of the peak and never decayed: LAMB's schedule)."""
    from electra_tf.core.config import PretrainingConfig
    from electra_tf.training.optimization import WarmupPolynomialDecay

    config = PretrainingConfig(num_train_steps=40, num_warmup_steps=200)
    assert config.long_warmup_warning() == (
        "warning: --num_warmup_steps=200 is not shorter than the run's 40 steps: its "
        "learning rate (the decay to 0 times the warmup's ramp) peaks at 5% of the rate "
        "given, at step 20; give fewer warmup steps")
    # the schedule's own highest step (5 steps of 5: 24% at step 2, which had been
    # warned as the continuous curve's 25%)
    for power, steps, warmup in ((1.0, 20, 20), (0.5, 20, 20), (1.0, 5, 5), (2.0, 7, 9)):
        schedule = WarmupPolynomialDecay(1.0, steps, warmup, power=power)
        rates = [float(schedule(step)) for step in range(steps + 1)]
        warned = PretrainingConfig(num_train_steps=steps, num_warmup_steps=warmup,
                                   lr_decay_power=power).long_warmup_warning()
        assert f"peaks at {max(rates):.0%} of the rate given, at step " \
               f"{rates.index(max(rates))};" in warned, (warned, rates)


def test_a_warmup_far_longer_than_the_run_is_not_said_to_peak_at_0_percent():
    """The demo at --num_train_steps=4 (warmup 200): the rate peaks at 0.5% of the rate
    given, which the warning had rounded to "0%"."""
    from electra_tf.core.config import PretrainingConfig

    warned = PretrainingConfig(num_train_steps=4, num_warmup_steps=200).long_warmup_warning()
    assert "peaks at 0.5% of the rate given, at step 2;" in warned, warned
    lamb = PretrainingConfig(num_train_steps=4, num_warmup_steps=200, optimizer="lamb")
    assert "reaches at most 1.5% of its peak" in lamb.long_warmup_warning()


@pytest.mark.parametrize("kind, values, message", [
    ("pretraining", {"num_warmup_steps": -5}, "num_warmup_steps must be >= 0, got -5"),
    ("pretraining", {"num_train_steps": 10, "phase2_steps": 4, "phase2_max_seq_length": 32,
                     "phase2_warmup_steps": -1},
     "phase2_warmup_steps must be >= 0 (0: no warmup), got -1"),
    ("pretraining", {"num_train_steps": 10, "phase2_steps": 4, "phase2_max_seq_length": 32,
                     "phase2_train_batch_size": -8},
     "phase2_train_batch_size must be >= 0 (0: train_batch_size), got -8"),
    # two stages and two phases: said first (it had asked for phase 2's length first)
    ("pretraining", {"num_train_steps": 10, "phase2_steps": 4,
                     "training_algorithm": "two_stage", "generator_hidden_size": 1.0},
     "phase2_steps cannot go with training_algorithm=two_stage"),
    ("finetuning", {"warmup_proportion": 1.5}, "warmup_proportion must be in [0, 1), got 1.5"),
    ("finetuning", {"eval_batch_size": 0}, "eval_batch_size must be >= 1, got 0"),
    ("finetuning", {"max_seq_length": 4}, "max_seq_length must be >= 8, got 4"),
])
def test_a_refused_value_is_named_with_its_flag(kind, values, message):
    """Some refusals named several flags at once ("phase2_train_batch_size, phase2_
    learning_rate and phase2_warmup_steps must be >= 0") and no value."""
    from electra_tf.core.config import FinetuningConfig, PretrainingConfig

    cls = PretrainingConfig if kind == "pretraining" else FinetuningConfig
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        cls(**values)


def test_squad_thresholds_that_are_not_numbers_and_a_threshold_of_another_rule():
    """--qa_na_threshold=nan had trained (every question answered: no null odds exceed
    NaN) and the export served no answer at all (null odds <= NaN is false); and the
    command took --no_answer_threshold without --squad_null_rule=combined, training by
    qa_na_threshold without a word (get_task refuses it). +-inf stay: all, or none."""
    for name in ("qa_na_threshold", "no_answer_threshold"):
        with pytest.raises(ConfigError, match=rf"^{name} must be a number, got nan$"):
            FinetuningConfig(task_name="squad_v2", **{name: float("nan")})
        FinetuningConfig(task_name="squad_v2", **{name: float("-inf")})
    fv = flags.FlagValues()
    flags_lib.define_finetuning_flags(fv)
    fv(["x", "--task_name=squad_v2", "--model_dir=m", "--data_dir=d", "--init_checkpoint=p",
        "--no_answer_threshold=5"])
    with pytest.raises(ConfigError, match=r"^--no_answer_threshold is the threshold of "
                                          r"--squad_null_rule=combined; the default rule "
                                          r"\(answerable\) reads --qa_na_threshold$"):
        flags_lib.finetuning_configs(fv)
    fv.squad_null_rule = "combined"
    config, _ = flags_lib.finetuning_configs(fv)
    assert config.no_answer_threshold == 5.0


def test_span_options_that_change_nothing_are_named():
    """--beam_size with --joint_prediction=false, or SQuAD 2.0's rule on squad_v1, had
    been taken without a word (the same results with any value); an option of another
    family is refused instead (--qa_na_threshold on mrqa)."""
    from electra_tf.tasks.registry import unused_options

    beam = ("--beam_size (the joint head's beam; --joint_prediction=false decodes "
            "without one)")
    for name in ("squad_v1", "squad_v2", "newsqa"):
        assert unused_options(FinetuningConfig(task_name=name, beam_size=3,
                                               joint_prediction=False)) == [beam]
        assert unused_options(FinetuningConfig(task_name=name, beam_size=3)) == []
        # the joint head decodes its beam: no n-best (as the original's joint decoding)
        assert unused_options(FinetuningConfig(task_name=name, n_best_size=5)) == [
            "--n_best_size (the independent head's best starts and ends; the joint head "
            "decodes its beam, --beam_size)"]
        assert unused_options(FinetuningConfig(task_name=name, n_best_size=5,
                                               joint_prediction=False)) == []
    assert unused_options(FinetuningConfig(task_name="squad_v1", qa_na_threshold=1.0,
                                           squad_null_rule="combined")) == [
        "--squad_null_rule (SQuAD 2.0's no-answer rule; squad_v1 has an answer to every "
        "question)", "--qa_na_threshold (SQuAD 2.0's no-answer rule; squad_v1 has an answer "
        "to every question)"]
    assert unused_options(FinetuningConfig(task_name="squad_v2", qa_na_threshold=1.0)) == []
    assert unused_options(FinetuningConfig(task_name="sst2")) == []


def test_decoding_options_are_those_the_tasks_predictions_read():
    """What a resume notes when changed (the scores, not the training): each span
    head's own decoding, and SQuAD 2.0's rule with that rule's threshold."""
    from electra_tf.tasks.registry import decoding_options

    assert decoding_options(FinetuningConfig(task_name="newsqa")) == (
        "beam_size", "max_answer_length")
    assert decoding_options(FinetuningConfig(task_name="squad_v1", joint_prediction=False)) \
        == ("n_best_size", "max_answer_length")
    assert decoding_options(FinetuningConfig(task_name="squad_v2")) == (
        "beam_size", "max_answer_length", "squad_null_rule", "qa_na_threshold")
    assert decoding_options(FinetuningConfig(
        task_name="squad_v2", squad_null_rule="combined", joint_prediction=False)) == (
        "n_best_size", "max_answer_length", "squad_null_rule", "no_answer_threshold")
    for name in ("sst2", "ner", "classification"):
        assert decoding_options(FinetuningConfig(task_name=name)) == ()


def test_phase_twos_long_warmup_names_the_runs_step_and_phase_twos():
    """Phase 2's peak is said at the run's step and at phase 2's own (the warning said the
    run's step 40 where docs/pretraining.md's example, phase 2's count, says 20)."""
    from electra_tf.core.config import PretrainingConfig
    from electra_tf.training.optimization import WarmupPolynomialDecay

    config = PretrainingConfig(num_train_steps=60, num_warmup_steps=2, phase2_steps=40,
                               phase2_max_seq_length=256, phase2_warmup_steps=200)
    assert config.long_warmup_warning() == (
        "warning: --phase2_warmup_steps=200 is not shorter than phase 2's 40 steps: its "
        "learning rate (the decay to 0 times the warmup's ramp) peaks at 5% of the rate "
        "given, at step 40 (phase 2's step 20); give fewer warmup steps")
    schedule = WarmupPolynomialDecay(1.0, 60, 2, restarts=(20,), stage_rates=((1.0, 200),))
    rates = [float(schedule(step)) for step in range(20, 60)]
    assert rates.index(max(rates)) == 20


def test_weights_of_zero_a_loss_does_not_take_are_allowed():
    """Replace-MLM and All-Tokens MLM train their main model's MLM at weight 1 whatever
    gen_weight and disc_weight are (both 0 had been refused as "no loss")."""
    for objective in ("replace_mlm", "all_tokens_mlm"):
        assert PretrainingConfig(objective=objective, gen_weight=0.0, disc_weight=0.0)
    assert PretrainingConfig(objective="bert_mlm", disc_weight=0.0)


def test_flags_an_objective_does_not_read_are_named():
    """Given and changing nothing (they had been accepted silently): the sampling and the
    generator's size with BERT, which trains one masked LM at D's size and samples nothing;
    disc_weight with the MLM-style ablations; BERT's masking with another objective."""
    assert PretrainingConfig().unused() == []
    assert PretrainingConfig(objective="bert_mlm", gen_weight=2.0, mask_prob=0.2,
                             bert_80_10_10=True).unused() == []
    bert = PretrainingConfig(objective="bert_mlm", temperature=0.5, disallow_correct=True,
                             untied_generator=False, generator_hidden_size=1.0,
                             disc_weight=10.0)
    reason = ("with --objective=bert_mlm: BERT trains one masked LM at the discriminator's "
              "size and samples no replacements")
    assert bert.unused() == [f"{flag} does nothing {reason}" for flag in (
        "--disc_weight=10", "--temperature=0.5", "--disallow_correct",
        "--nountied_generator", "--generator_hidden_size=1")]
    assert PretrainingConfig(bert_80_10_10=True).unused() == [
        "--bert_80_10_10 does nothing with --objective=electra: it sets "
        "--objective=bert_mlm's masking"]
    for objective in ("replace_mlm", "all_tokens_mlm"):
        assert PretrainingConfig(objective=objective, disc_weight=1.0,
                                 temperature=0.5).unused() == [
            f"--disc_weight=1 does nothing with --objective={objective}: its main model "
            "takes an MLM loss at weight 1, no replaced-token loss"]
    assert [line.split()[0] for line in PretrainingConfig(
        uniform_generator=True, temperature=2.0, generator_layers=0.5,
        disallow_correct=True).unused()] == ["--temperature=2", "--generator_layers=0.5"]
    two_stage = PretrainingConfig(training_algorithm="two_stage", generator_hidden_size=1.0,
                                  untied_generator_embeddings=True)
    assert [line.split()[0] for line in two_stage.unused()] == [
        "--untied_generator_embeddings"]


def test_two_stage_names_the_discriminators_own_shapes_the_generator_cannot_take():
    """A discriminator whose overrides set heads or an FFN other than a generator of its
    size takes (h/64, 4h) can never meet two-stage training's equal sizes: the refusal
    had advised generator_hidden_size=1.0 and generator_layers=1.0, which, given, were
    refused again alike."""
    overrides = {"embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 1,
                 "num_attention_heads": 2, "intermediate_size": 32}
    with pytest.raises(ConfigError) as raised:
        PretrainingConfig(model_size="tiny", model_hparam_overrides=overrides,
                          training_algorithm="two_stage", generator_hidden_size=1.0,
                          generator_layers=1.0)
    assert str(raised.value).endswith(
        "; and the discriminator's num_attention_heads=2, intermediate_size=32 "
        "(model_hparam_overrides) are not what a generator of its size takes "
        "(num_attention_heads=1, intermediate_size=64): give those, or leave them out to "
        "follow hidden_size"), raised.value
    PretrainingConfig(model_size="tiny", training_algorithm="two_stage",  # as it says
                      model_hparam_overrides={**overrides, "num_attention_heads": 1,
                                              "intermediate_size": 64},
                      generator_hidden_size=1.0, generator_layers=1.0)
    with pytest.raises(ConfigError) as raised:  # the generator's flags alone: as before
        PretrainingConfig(training_algorithm="two_stage")
    assert "; and the discriminator's" not in str(raised.value)
