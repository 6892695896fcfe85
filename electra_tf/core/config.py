"""Hyperparameters, in one place, with the original ELECTRA names.

`EncoderConfig` carries the BERT-style transformer sizes (the names of the
original `bert_config.json`). `PretrainingConfig` carries the names and
defaults of google-research/electra's `configure_pretraining.py`, and an
unknown name is an error (`from_dict`). `RuntimeOptions` says how a run
executes; `PretrainingRun` (pre-training) and `FinetuningRun` (fine-tuning) extend it
with where their inputs and outputs are. Each class checks itself once, at
construction (`__post_init__`, so `dataclasses.replace` too), with one-line
ConfigErrors; `check_run` checks a pre-training run's two together. A
`PretrainingConfig` derives G's and D's EncoderConfigs then too (`encoders`),
which modeling builds the models from. Every field carries its help text in
its metadata (`_field`), which flags.py turns into the flag's help, so the
text is there in an install without .py sources too. Library code receives
these objects; only the `run_*` entry points read flags.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from typing import Any, Callable

from electra_tf.core.errors import ConfigError, InputError
from electra_tf.core.peers import address_port


def _field(default: Any, help: str, choices: tuple[str, ...] = ()) -> Any:
    """A dataclass field with its help text (flags.py makes it the flag's help) and,
    for a field that takes one of a few names, those names (the help lists them)."""
    metadata = {"help": help, "choices": tuple(choices)} if choices else {"help": help}
    return dataclasses.field(default=default, metadata=metadata)


def _factory_field(default_factory: Callable[[], Any], help: str) -> Any:
    """`_field` for a mutable default, built anew for every instance."""
    return dataclasses.field(default_factory=default_factory, metadata={"help": help})


def _check_known(cls, values: dict[str, Any]) -> None:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(
            f"unknown {cls.__name__} hyperparameter(s): {', '.join(unknown)}; "
            f"known names are: {', '.join(sorted(known))}"
        )


_FLOAT32_TINY = 1.1754943508222875e-38  # numpy.finfo(float32).tiny
MAX_STEPS = 2**62  # within the int64 step counter, with room for a phase 2's steps


def check_finite(config, names: tuple[str, ...], bound: str = "") -> None:
    """Refuses a field of `names` that is not a finite real number (NaN, inf, text
    from a damaged file), or that breaks `bound` ("", ">= 0" or "> 0")."""
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) \
                or not math.isfinite(value) or (bound == ">= 0" and value < 0) \
                or (bound == "> 0" and value <= 0):
            raise ConfigError(f"{name} must be a finite number{' ' + bound if bound else ''}, "
                              f"got {value!r}")


_TYPES = {"bool": ((bool,), "true or false"), "int": ((numbers.Integral,), "an integer"),
          "float": ((numbers.Real,), "a number"), "str": ((str,), "a string")}


def _plain_numbers(config) -> None:
    """Makes a NumPy scalar field (np.int64(64), np.float32(0.1), np.bool_) the Python
    number it holds: it passed the checks, then failed the record's JSON write after
    the weights were written (`Object of type int64 is not JSON serializable`) or a
    Keras layer's type check."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
            object.__setattr__(config, field.name, value.item())


def _check_types(config) -> None:
    """Refuses a field whose value is not of its annotated type (bool, int, float, str;
    `X | None` also None; a dict field has its own check): a "false" string had been a
    true do_lower_case, a "64" a TypeError deep in a check, and a Python caller's value
    reached the record it then could not read back. A float field takes an integer; a
    bool is no number."""
    _plain_numbers(config)
    for field in dataclasses.fields(config):
        kind, _, none = field.type.partition(" | ")
        if kind not in _TYPES:
            continue
        value = getattr(config, field.name)
        types, what = _TYPES[kind]
        if value is None and none == "None":
            continue
        if not isinstance(value, types) or (kind in ("int", "float")
                                            and isinstance(value, bool)):
            raise ConfigError(f"{field.name} must be {what}"
                              f"{' or None' if none == 'None' else ''}, got {value!r}")


def _check_seed(seed) -> None:
    """Refuses a seed Keras cannot take (keras.utils.set_random_seed: [0, 2**32 - 1])."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ConfigError(f"seed must be an integer in [0, 2**32 - 1], got {seed!r}")


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    """Transformer encoder sizes (paper Table 6; BERT config names)."""

    vocab_size: int = _field(30522, "WordPiece vocabulary size")
    embedding_size: int | None = _field(None, "None: equal to hidden_size (no projection)")
    hidden_size: int = _field(768, "transformer width")
    num_hidden_layers: int = _field(12, "transformer depth")
    num_attention_heads: int = _field(12, "attention heads per layer")
    intermediate_size: int = _field(3072, "feed-forward width")
    hidden_act: str = _field("gelu", "exact erf GELU, as the original's modeling.gelu")
    hidden_dropout_prob: float = _field(0.1, "dropout on embeddings and sub-layer outputs")
    attention_probs_dropout_prob: float = _field(0.1, "dropout on attention probabilities")
    max_position_embeddings: int = _field(512, "rows of the position table")
    type_vocab_size: int = _field(2, "segment ids 0 and 1")
    initializer_range: float = _field(0.02, "truncated-normal stddev for all kernels")
    layer_norm_eps: float = _field(1e-12, "LayerNorm epsilon of the original")
    # transformers' ElectraGeneratorPredictions always uses "gelu" (set on import).
    generator_head_act: str | None = _field(
        None, "the generator's MLM head activation; None: hidden_act, as the original")

    @property
    def resolved_embedding_size(self) -> int:
        return self.embedding_size or self.hidden_size

    def __post_init__(self) -> None:
        """Refuses sizes no encoder can have (ConfigError), at construction and at every
        dataclasses.replace: also values of the wrong type (a "211" or 32.0 from a
        damaged JSON file) and a non-finite or non-positive layer_norm_eps. A NumPy
        scalar is taken as the Python number it holds."""
        _plain_numbers(self)
        sizes = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                 "intermediate_size", "max_position_embeddings", "type_vocab_size")
        for name in sizes + ("embedding_size",):
            value = getattr(self, name)
            if not (isinstance(value, numbers.Integral) and not isinstance(value, bool)) and not (
                    name == "embedding_size" and value is None):
                raise ConfigError(f"{name} must be an integer, got {value!r}")
        check_finite(self, ("hidden_dropout_prob", "attention_probs_dropout_prob",
                             "initializer_range", "layer_norm_eps"))
        if not self.layer_norm_eps > 0:
            raise ConfigError(f"layer_norm_eps must be > 0, got {self.layer_norm_eps}")
        if not self.initializer_range > 0:  # (0 had started every kernel equal)
            raise ConfigError(f"initializer_range must be > 0, got {self.initializer_range}")
        for name in sizes:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.embedding_size is not None and self.embedding_size < 1:
            raise ConfigError(f"embedding_size must be >= 1, got {self.embedding_size}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size {self.hidden_size} is not a multiple of "
                f"num_attention_heads {self.num_attention_heads}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        for name in ("hidden_act", "generator_head_act"):
            act = getattr(self, name)
            if act not in ("gelu", "gelu_approximate", "relu") and not (
                    name == "generator_head_act" and act is None):
                raise ConfigError(f"unsupported {name} {act!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "EncoderConfig":
        _check_known(cls, values)
        return cls(**values)


# Paper Table 6 and the original's modeling presets. Vocab size is set apart.
MODEL_SIZES: dict[str, dict[str, Any]] = {
    "small": dict(embedding_size=128, hidden_size=256, num_hidden_layers=12,
                  num_attention_heads=4, intermediate_size=1024),
    "base": dict(embedding_size=None, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072),
    "large": dict(embedding_size=None, hidden_size=1024, num_hidden_layers=24,
                  num_attention_heads=16, intermediate_size=4096),
    # A laptop-sized model for the demo and smoke runs; not from the paper.
    "tiny": dict(embedding_size=64, hidden_size=128, num_hidden_layers=2,
                 num_attention_heads=2, intermediate_size=512),
}


_SIZE_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "embedding_size")


def size_mismatches(config: EncoderConfig, model_size: str) -> list[tuple[str, int, int]]:
    """(field, preset value, config value) where `config` is not the size preset.

    The embedding size compares as resolved (None means the hidden size).
    """
    preset = MODEL_SIZES[model_size]
    out = []
    for field in _SIZE_FIELDS:
        want, got = preset[field], getattr(config, field)
        if field == "embedding_size":
            want, got = want or preset["hidden_size"], config.resolved_embedding_size
        if got != want:
            out.append((field, want, got))
    return out


def model_size_of(config: EncoderConfig) -> str:
    """The MODEL_SIZES name whose sizes `config` has, or "custom"."""
    return next((name for name in MODEL_SIZES if not size_mismatches(config, name)), "custom")


# The paper's objectives (section 3.5, Table 5) and training algorithms (3.2);
# objectives/variants.py implements one class per objective name.
# electric: Clark et al. 2020b ("Pre-Training Transformers as Energy-Based Cloze
# Models"), the original's electric_objective (with its two_tower_generator).
OBJECTIVES = ("electra", "bert_mlm", "electra_15", "replace_mlm", "all_tokens_mlm", "electric")
OPTIMIZERS = ("adamw", "lamb")  # training/optimization.py
LAMB_DECAY_POWER = 0.5  # NVIDIA's run_pretraining.py --lr_decay_power default
TRAINING_ALGORITHMS = ("joint", "two_stage", "adversarial")


def default_max_predictions(mask_prob: float, max_seq_length: int) -> int:
    """The original's int((mask_prob + 0.005) * max_seq_length): 19 at 128."""
    return int((mask_prob + 0.005) * max_seq_length)


# How G and D share weights (paper section 3.2; modeling/models.py builds each):
# embeddings: G's encoder reuses D's embeddings layer (the default); none: nothing is
# shared (untied_generator_embeddings, two-stage training); encoder: G runs D's whole
# encoder (untied_generator=False, and BERT: objective bert_mlm); disentangled: D's
# tables are residuals over G's (gradient_disentangled_embeddings); uniform: no
# generator network (uniform_generator).
SHARING = ("embeddings", "none", "encoder", "disentangled", "uniform")


@dataclasses.dataclass(frozen=True)
class PretrainingEncoders:
    """What the pre-training models are built from (modeling.build_pretraining_models):
    G's and D's EncoderConfigs, how the two share weights (one of SHARING) and whether
    G carries the learned REINFORCE baseline (adversarial training, paper Appendix F).

    A PretrainingConfig derives it once, at construction (its `encoders`).
    """

    generator: EncoderConfig
    discriminator: EncoderConfig
    sharing: str = "embeddings"
    baseline_head: bool = False
    two_tower: bool = False  # Electric's generator: two causal towers + the cloze head

    def __post_init__(self) -> None:
        if self.sharing not in SHARING:
            raise ConfigError(f"sharing must be one of {', '.join(SHARING)}, "
                              f"got {self.sharing!r}")


def _percent(share: float) -> str:
    """A share as a percentage, 2 significant figures below 10% ("0.5%", not "0%")."""
    return f"{share:.0%}" if share >= 0.1 else f"{share * 100:.2g}%"


@dataclasses.dataclass(frozen=True)
class PretrainingConfig:
    """Pre-training hyperparameters, named as in configure_pretraining.py.

    Checked at construction (and so at every dataclasses.replace), which also
    derives G's and D's EncoderConfigs once (`encoders`).
    """

    # --- model ---
    model_size: str = _field("small", "the size preset (paper Table 6; tiny: a laptop-sized "
                             "model for smoke runs)", choices=tuple(MODEL_SIZES))
    model_hparam_overrides: dict = _factory_field(dict, "EncoderConfig fields")
    embedding_size: int | None = _field(None, "None: the size preset's value")
    vocab_size: int = _field(30522, "unset: the vocab file's size (30522 without one); "
                                    "given, it must match the file")
    do_lower_case: bool = _field(True, "lower-case and strip accents before WordPiece")

    # --- loss ---
    objective: str = _field("electra", "the pre-training objective (paper section 3.5; "
                            "electric: Electric's energy-based cloze model, the original's "
                            "electric_objective)", choices=OBJECTIVES)
    bert_80_10_10: bool = _field(
        False, "bert_mlm: BERT's 80/10/10 [MASK]/random/kept (original: 85/15)")
    training_algorithm: str = _field(
        "joint", "two_stage: G then D, n steps each (paper section 3.2)",
        choices=TRAINING_ALGORITHMS)
    gen_weight: float = _field(1.0, "weight of the generator's MLM loss")
    disc_weight: float = _field(50.0, "weight of the discriminator's loss (lambda)")
    mask_prob: float = _field(0.15, "fraction of tokens to mask (0.25 for Large)")
    max_predictions_per_seq: int | None = _field(None, "None: int((mask_prob + 0.005) * L)")

    # --- generator ---
    uniform_generator: bool = _field(
        False, "no generator: replacements uniform at random (ablation)")
    untied_generator_embeddings: bool = _field(False, "do not share embeddings with D")
    untied_generator: bool = _field(True, "False: G and D share all weights (equal sizes)")
    gradient_disentangled_embeddings: bool = _field(
        False, "GDES (DeBERTa-v3, not in the original): D embeds with stop_gradient(G's "
        "tables) + residual tables of its own starting at zero, so only the MLM loss trains "
        "the shared tables; the kept discriminator holds the sums")
    generator_layers: float = _field(1.0, "G depth as a fraction of D's")
    generator_hidden_size: float = _field(0.25, "G width as a fraction of D's (1/3 for Base)")
    disallow_correct: bool = _field(False, "never sample the original token")
    temperature: float = _field(1.0, "generator sampling temperature")
    prior_output_biases: bool = _field(
        False, "start the output biases at the data's priors (not in the original): the "
        "masked-LM heads' at the log unigram frequencies of the first 4,096 training "
        "sequences, the RTD head's at the log-odds of a replaced token")

    # --- optimization ---
    learning_rate: float = _field(5e-4, "peak learning rate")
    lr_decay_power: float | None = _field(
        None, "polynomial decay power; unset: 1.0, linear (adamw: the original's), 0.5 "
        "(lamb: NVIDIA's --lr_decay_power)")
    weight_decay_rate: float = _field(0.01, "AdamW decay, none on LayerNorm and bias")
    num_warmup_steps: int = _field(10000, "linear warmup steps")
    adam_epsilon: float = _field(1e-6, "Adam epsilon of the original")
    adam_bias_correction: bool | None = _field(
        None, "Keras' bias-corrected Adam (the original has none); unset: on for the tiny "
        "preset (not a paper size, run for few steps), off for the paper's sizes")
    clip_norm: float = _field(1.0, "global-norm gradient clipping")
    optimizer: str = _field(
        "adamw", "adamw: the original's AdamWeightDecayOptimizer and schedule; lamb: LAMB as "
        "NVIDIA's TF2 ELECTRA runs it (tfa's update, trust ratio per variable, warmup then "
        "decay from the peak), for large global batches", choices=OPTIMIZERS)
    opt_beta_1: float | None = _field(None, "Adam/LAMB beta1; unset: 0.9 (adamw), 0.878 (lamb)")
    opt_beta_2: float | None = _field(None, "Adam/LAMB beta2; unset: 0.999 (adamw), 0.974 "
                                      "(lamb)")
    skip_adaptive: bool = _field(
        True, "lamb: no trust ratio on LayerNorm and bias (NVIDIA's --skip_adaptive, which its "
        "scripts pass); False: every variable gets one")

    # --- training ---
    num_train_steps: int = _field(1000000, "optimizer steps")
    iterations_per_loop: int = _field(200, "steps per host loop (and per summary write)")
    save_checkpoints_steps: int = _field(1000, "checkpoint every N steps")
    keep_checkpoint_max: int = _field(5, "checkpoints kept")
    num_eval_steps: int = _field(100, "batches per evaluation")
    max_seq_length: int = _field(128, "L")
    train_batch_size: int = _field(128, "global batch")
    eval_batch_size: int = _field(128, "global batch")
    seed: int = _field(0, "seed for init, masking, sampling and dropout")

    # --- a second phase at another sequence length (NVIDIA's phase 2: 128, then 512) ---
    phase2_steps: int = _field(
        0, "the last N of num_train_steps form a second phase: records of "
        "phase2_max_seq_length (--phase2_train_data), its own batch, learning rate and "
        "warmup, the schedule starting again; 0: one phase")
    phase2_max_seq_length: int = _field(0, "phase 2's L (masking int((mask_prob + 0.005) * L))")
    phase2_train_batch_size: int = _field(0, "phase 2's global batch; 0: train_batch_size")
    phase2_learning_rate: float = _field(0.0, "phase 2's peak learning rate; 0: learning_rate")
    phase2_warmup_steps: int = _field(0, "phase 2's linear warmup steps")

    @property
    def resolved_lr_decay_power(self) -> float:
        """lr_decay_power, or where unset: NVIDIA's 0.5 with LAMB, the original's 1.0."""
        if self.lr_decay_power is None:
            return LAMB_DECAY_POWER if self.optimizer == "lamb" else 1.0
        return self.lr_decay_power

    @property
    def resolved_adam_bias_correction(self) -> bool:
        """adam_bias_correction, or where unset: on for tiny, off for the paper's sizes."""
        if self.adam_bias_correction is None:
            return self.model_size == "tiny"
        return self.adam_bias_correction

    def short_warmup_warning(self) -> str:
        """A warning for the original's Adam (no bias correction) with a short warmup, or "".

        Without bias correction Adam's first steps are several times larger
        than bias-corrected ones for the first few hundred steps; the original
        hides this behind 10,000 warmup steps. A short run with a short warmup
        then learns representations that do not fine-tune (measured: a tiny
        model pre-trained 30 steps with 5 warmup steps stayed at chance on a
        keyword task, 0.995 with bias correction).
        """
        if self.resolved_adam_bias_correction or self.num_warmup_steps >= 1000 \
                or self.optimizer == "lamb":  # LAMB's moments are always bias-corrected
            return ""
        return (f"warning: --num_warmup_steps={self.num_warmup_steps} with the original's "
                "Adam (no bias correction): its first few hundred steps are several times "
                "larger than bias-corrected Adam's, which can leave a short run's model "
                "unable to fine-tune; pass --adam_bias_correction for a short run")

    def long_warmup_warning(self) -> str:
        """A warning line for each warmup as long as its stage (phase 1, phase 2, a
        two-stage run's stage) or longer, or "". With LAMB (NVIDIA's schedule: the warmup's
        ramp, then the decay) the learning rate then never decays and a longer warmup
        never reaches the peak; with the original's (the decay to 0 from the stage's
        start, times the ramp) it peaks far below the peak it was given: at
        (p/(p+1))^p L/((p+1)W) of it, for decay power p, L steps, W warmup steps."""
        bounds = (0, *self.stage_starts, self.num_train_steps)
        warmups = (self.num_warmup_steps, *(w for _, w in self.stage_rates))
        warnings = []
        for i in range(len(bounds) - 1):
            warmup = warmups[i] if i < len(warmups) else self.num_warmup_steps
            length = bounds[i + 1] - bounds[i]
            if warmup and warmup >= length > 0:
                flag = "--phase2_warmup_steps" if i and self.phase2_steps else \
                    "--num_warmup_steps"
                stage = ("phase 2" if i and self.phase2_steps else "phase 1"
                         if self.phase2_steps else f"stage {i + 1}"
                         if len(bounds) > 2 else "the run")
                if self.optimizer == "lamb":  # the stage's updates use t = 0 .. length - 1
                    what = (f"its learning rate reaches at most "
                            f"{_percent((length - 1) / warmup)} of its peak and never decays")
                else:
                    p = self.resolved_lr_decay_power
                    # the ramp t / W times the decay (1 - t / L)^p peaks at L / (p + 1); the
                    # highest step's rate is on one side of it
                    near = {min(length - 1, max(0, math.floor(length / (p + 1)) + d))
                            for d in (0, 1)}
                    at = max(sorted(near), key=lambda t: round(t * (1 - t / length) ** p, 9))
                    top = at / warmup * (1 - at / length) ** p  # counted from the stage's start
                    where = (f"at step {bounds[i] + at} ({stage}'s step {at})" if bounds[i]
                             else f"at step {at}")
                    what = (f"its learning rate (the decay to 0 times the warmup's ramp) "
                            f"peaks at {_percent(top)} of the rate given, {where}")
                warnings.append(f"warning: {flag}={warmup} is not shorter than {stage}'s "
                                f"{length} steps: {what}; give fewer warmup steps")
        return "\n".join(warnings)

    def phase2_length_warning(self) -> str:
        """A warning for a phase 2 of shorter sequences than phase 1's, or "". NVIDIA's two
        phases go from 128 to 512 tokens: phase 1's short sequences are most of the steps,
        and phase 2 trains the positions beyond them. A shorter phase 2 is most likely the
        two lengths swapped."""
        if self.phase2_steps and self.phase2_max_seq_length < self.max_seq_length:
            return (f"warning: --phase2_max_seq_length={self.phase2_max_seq_length} is shorter "
                    f"than --max_seq_length={self.max_seq_length}: phase 2 trains on shorter "
                    "sequences than phase 1 (NVIDIA's two phases go from 128 to 512 tokens); "
                    "swap the two lengths if that was not meant")
        return ""

    @property
    def stage_starts(self) -> tuple[int, ...]:
        """Optimizer steps at which a training stage after the first begins.

        two_stage: (num_train_steps // 2,), where the discriminator's stage
        starts; the learning-rate schedule (warmup, then decay to 0) restarts
        there, as for a second training run of n steps (paper section 3.2).
        Otherwise ().
        """
        if self.training_algorithm == "two_stage":
            return (self.num_train_steps // 2,)
        if self.phase2_steps:
            return (self.phase2_start,)
        return ()

    @property
    def stage_rates(self) -> tuple[tuple[float, int], ...]:
        """(peak learning rate, warmup steps) of each stage after the first: phase 2's
        own; two-stage training's second stage repeats the first's (())."""
        if self.phase2_steps:
            return ((self.phase2_learning_rate or self.learning_rate, self.phase2_warmup_steps),)
        return ()

    @property
    def phase2_start(self) -> int:
        """The optimizer step where phase 2 starts (num_train_steps without phase 2)."""
        return self.num_train_steps - self.phase2_steps

    @property
    def phase2_max_predictions_per_seq(self) -> int:
        """Phase 2's masked positions per sequence: the original's rule at its length."""
        return default_max_predictions(self.mask_prob, self.phase2_max_seq_length)

    @property
    def resolved_phase2_train_batch_size(self) -> int:
        return self.phase2_train_batch_size or self.train_batch_size

    @property
    def resolved_max_predictions_per_seq(self) -> int:
        if self.max_predictions_per_seq is not None:
            return self.max_predictions_per_seq
        return default_max_predictions(self.mask_prob, self.max_seq_length)

    def __post_init__(self) -> None:
        """Checks the hyperparameters and derives G's and D's EncoderConfigs from them,
        once: at construction, and at every dataclasses.replace.

        Raises:
          ConfigError: one line naming the hyperparameter.
        """
        _check_types(self)
        disc = gen = None
        # NaN and inf had trained on, or died as "lower --learning_rate" at step 1.
        check_finite(self, ("gen_weight", "disc_weight", "weight_decay_rate",
                             "phase2_learning_rate"), ">= 0")
        if self.lr_decay_power is not None:
            check_finite(self, ("lr_decay_power",), ">= 0")
        check_finite(self, ("learning_rate", "adam_epsilon", "clip_norm", "temperature"), "> 0")
        if not 0.0 < self.mask_prob < 1.0:
            raise ConfigError(f"mask_prob must be in (0, 1), got {self.mask_prob}")
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"objective must be one of {', '.join(OBJECTIVES)}, "
                              f"got {self.objective!r}")
        if self.training_algorithm not in TRAINING_ALGORITHMS:
            raise ConfigError(f"training_algorithm must be one of "
                              f"{', '.join(TRAINING_ALGORITHMS)}, got {self.training_algorithm!r}")
        if self.uniform_generator and (self.training_algorithm != "joint"
                                       or self.objective == "bert_mlm"):
            raise ConfigError("uniform_generator replaces the generator by uniform sampling: "
                              "it needs training_algorithm=joint and an objective with a "
                              f"discriminator, got {self.training_algorithm} and "
                              f"{self.objective}")
        if self.training_algorithm != "joint" and self.objective != "electra":
            raise ConfigError(f"training_algorithm={self.training_algorithm} needs "
                              f"objective=electra, got {self.objective}")
        if self.training_algorithm == "two_stage":
            if not self.untied_generator:
                raise ConfigError("training_algorithm=two_stage freezes the generator while "
                                  "the discriminator trains: it needs untied_generator=True")
            if self.num_train_steps < 2:
                raise ConfigError("training_algorithm=two_stage needs num_train_steps >= 2")
            disc = _discriminator_encoder(self)
            gen = _generator_encoder(self, disc)
            shape = ("hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size")
            if any(getattr(disc, k) != getattr(gen, k) for k in shape):
                # A generator of the discriminator's size takes h/64 heads and a 4h FFN:
                # a discriminator whose overrides set others cannot be matched by the
                # generator's flags (the advice below had been followed in vain).
                full = generator_config(disc, 1.0, 1.0)
                own = [k for k in ("num_attention_heads", "intermediate_size")
                       if getattr(full, k) != getattr(disc, k)]
                raise ConfigError(
                    "training_algorithm=two_stage initializes the discriminator from the "
                    "generator, which needs equal sizes: set generator_hidden_size=1.0 and "
                    "generator_layers=1.0 (the generator also takes 4h FFN and h/64 heads); "
                    "got generator " + ", ".join(f"{k}={getattr(gen, k)}" for k in shape)
                    + " vs discriminator " + ", ".join(f"{k}={getattr(disc, k)}" for k in shape)
                    + ("" if not own else
                       "; and the discriminator's " + ", ".join(
                           f"{k}={getattr(disc, k)}" for k in own)
                       + " (model_hparam_overrides) are not what a generator of its size "
                       "takes (" + ", ".join(f"{k}={getattr(full, k)}" for k in own)
                       + "): give those, or leave them out to follow hidden_size"))
        if self.gradient_disentangled_embeddings:
            clash = [name for name, on in (
                ("untied_generator_embeddings", self.untied_generator_embeddings),
                ("uniform_generator", self.uniform_generator),
                ("--nountied_generator", not self.untied_generator),
                (f"training_algorithm={self.training_algorithm}",
                 self.training_algorithm == "two_stage"),
                (f"objective={self.objective}",
                 self.objective not in ("electra", "electra_15"))) if on]
            if clash:
                raise ConfigError(
                    "gradient_disentangled_embeddings shares the generator's tables with a "
                    "discriminator that has the RTD head (objective electra or electra_15, "
                    "joint or adversarial training); it cannot go with "
                    + ", ".join(clash))
        if self.objective == "electric" and (not self.untied_generator
                                             or self.uniform_generator):
            # The original's electric_objective builds its two-tower generator only
            # with an untied, non-uniform generator (run_pretraining.py).
            raise ConfigError("objective=electric trains a two-tower cloze generator: it "
                              "needs untied_generator=True and uniform_generator=False")
        if self.objective == "electric" and self.prior_output_biases:
            # It would set the energy head's bias to ELECTRA's replaced-token log-odds,
            # which Electric's correction already adds (log(mask_prob / (1 - mask_prob))).
            raise ConfigError("prior_output_biases starts ELECTRA's heads at their priors "
                              "(the RTD bias at the replaced rate's log-odds); Electric's "
                              "energy already carries that term and its cloze generator has "
                              "no MLM head: leave it off with objective=electric")
        if self.max_seq_length < 8:
            raise ConfigError(f"max_seq_length must be >= 8, got {self.max_seq_length}")
        if not 1 <= self.resolved_max_predictions_per_seq <= self.max_seq_length:
            raise ConfigError(
                f"max_predictions_per_seq must be in [1, max_seq_length], got "
                f"{self.resolved_max_predictions_per_seq}")
        for name in ("generator_hidden_size", "generator_layers"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} is a fraction in (0, 1] of the discriminator's "
                                  f"size, got {getattr(self, name)}")
        if self.temperature <= 0:
            raise ConfigError(f"temperature must be > 0, got {self.temperature}")
        for name in ("train_batch_size", "eval_batch_size", "num_train_steps",
                     "iterations_per_loop", "save_checkpoints_steps",
                     "keep_checkpoint_max", "num_eval_steps"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        _check_seed(self.seed)
        if self.num_warmup_steps < 0:
            raise ConfigError(f"num_warmup_steps must be >= 0, got {self.num_warmup_steps}")
        # What trains nothing, silently: a rate float32 holds as 0 (or a denormal), no
        # loss at all, a step count past the int64 step counter (an endless run).
        if self.learning_rate < _FLOAT32_TINY:
            raise ConfigError(f"learning_rate {self.learning_rate:g} is below float32's "
                              f"smallest normal number ({_FLOAT32_TINY:.4g}): the weights "
                              "would not move")
        if self.gen_weight == 0 and self.disc_weight == 0 and self.objective not in (
                "replace_mlm", "all_tokens_mlm"):  # (their main model's MLM takes weight 1)
            raise ConfigError("gen_weight and disc_weight are both 0: no loss, nothing "
                              "would be trained")
        # the one weight a loss takes: BERT's MLM; two-stage training's discriminator
        # stage (its generator stage trains the MLM at weight 1). Each had trained the
        # weights by weight decay alone, exit 0.
        if self.objective == "bert_mlm" and self.gen_weight == 0:
            raise ConfigError("gen_weight is 0 with objective bert_mlm, whose one loss it "
                              "weighs: nothing would be trained")
        if self.training_algorithm == "two_stage" and self.disc_weight == 0:
            raise ConfigError("disc_weight is 0 with training_algorithm two_stage, whose "
                              "discriminator stage it weighs alone: the discriminator would "
                              "not be trained")
        if self.num_train_steps > MAX_STEPS:
            raise ConfigError(f"num_train_steps must be at most 2**62, got "
                              f"{self.num_train_steps}")
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, "
                              f"got {self.optimizer!r}")
        for name in ("opt_beta_1", "opt_beta_2"):
            if getattr(self, name) is not None and not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if self.optimizer == "lamb" and self.adam_bias_correction is False:
            # (accepted and recorded before, though LAMB's update never read it)
            raise ConfigError("adam_bias_correction=False chooses the original's Adam "
                              "without bias correction (optimizer=adamw); LAMB always "
                              "corrects its moments (NVIDIA's): leave it unset with "
                              "optimizer=lamb")
        self._check_phase2()
        if disc is None:
            disc = _discriminator_encoder(self)
        if self.max_seq_length > disc.max_position_embeddings:
            raise ConfigError(f"max_seq_length {self.max_seq_length} exceeds "
                              f"max_position_embeddings {disc.max_position_embeddings}")
        if self.phase2_steps and self.phase2_max_seq_length > disc.max_position_embeddings:
            raise ConfigError(f"phase2_max_seq_length {self.phase2_max_seq_length} exceeds "
                              f"max_position_embeddings {disc.max_position_embeddings} "
                              "(phase 2's records are that long)")
        if disc.type_vocab_size < 2:  # (an id outside the table was blamed on the vocab)
            raise ConfigError(f"type_vocab_size must be >= 2 for pre-training, whose records "
                              f"hold segment ids 0 and 1, got {disc.type_vocab_size}")
        if gen is None:
            gen = _generator_encoder(self, disc)
        if not self.untied_generator and ((gen.hidden_size, gen.num_hidden_layers)
                                          != (disc.hidden_size, disc.num_hidden_layers)):
            raise ConfigError(
                "untied_generator=False ties all generator and discriminator weights, "
                "which needs equal sizes: set generator_hidden_size=1.0 and "
                f"generator_layers=1.0 (got {self.generator_hidden_size} and "
                f"{self.generator_layers})")
        # Not a field: no flag, not in to_dict, not compared; derived again by replace.
        object.__setattr__(self, "_encoders", PretrainingEncoders(
            generator=gen, discriminator=disc, sharing=self._sharing(),
            baseline_head=self.training_algorithm == "adversarial",
            two_tower=self.objective == "electric"))

    def _check_phase2(self) -> None:
        """The phase-2 fields: all unset, or a phase inside the run."""
        if not self.phase2_steps:
            for name in ("phase2_max_seq_length", "phase2_train_batch_size",
                         "phase2_learning_rate", "phase2_warmup_steps"):
                if getattr(self, name):  # (all but the first had been ignored)
                    raise ConfigError(f"{name} needs phase2_steps >= 1 (the steps of phase 2, "
                                      "the last of num_train_steps)")
            return
        if self.training_algorithm == "two_stage":  # (first: no phase 2 flag would mend it)
            raise ConfigError("phase2_steps cannot go with training_algorithm=two_stage")
        if not 1 <= self.phase2_steps < self.num_train_steps:
            raise ConfigError(f"phase2_steps must be in [1, num_train_steps), the last steps "
                              f"of the run; got {self.phase2_steps} of {self.num_train_steps}")
        if self.phase2_max_seq_length < 8:
            raise ConfigError("phase2_steps needs phase2_max_seq_length >= 8 (phase 2's "
                              f"records' length), got {self.phase2_max_seq_length}")
        for name, zero in (("phase2_train_batch_size", "train_batch_size"),
                           ("phase2_learning_rate", "learning_rate"),
                           ("phase2_warmup_steps", "no warmup")):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0 (0: {zero}), got "
                                  f"{getattr(self, name)}")

    def unused(self) -> list[str]:
        """The fields set to other than their default that change nothing with this
        objective and training algorithm, each as a note's line names it ("--temperature
        does nothing with --objective=bert_mlm: ..."); run_pretraining prints them.

        The model and the loss read these fields only where they apply: BERT
        (bert_mlm) trains one MLM model at D's size and samples nothing; the
        MLM-style ablations' main model takes no RTD loss; a uniform generator has no
        network; two-stage training shares nothing between G and D.
        """
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        why: dict[str, str] = {}
        if self.objective == "bert_mlm":
            for name in ("disc_weight", "temperature", "disallow_correct",
                         "untied_generator", "untied_generator_embeddings",
                         "generator_hidden_size", "generator_layers"):
                why[name] = ("with --objective=bert_mlm: BERT trains one masked LM at the "
                             "discriminator's size and samples no replacements")
        else:
            why["bert_80_10_10"] = (f"with --objective={self.objective}: it sets "
                                    "--objective=bert_mlm's masking")
        if self.objective in ("replace_mlm", "all_tokens_mlm"):
            why["disc_weight"] = (f"with --objective={self.objective}: its main model takes "
                                  "an MLM loss at weight 1, no replaced-token loss")
        if self.uniform_generator:
            for name in ("temperature", "generator_hidden_size", "generator_layers",
                         "untied_generator_embeddings"):
                why[name] = ("with --uniform_generator: replacements are drawn uniformly, "
                             "with no generator network")
        if self.training_algorithm == "two_stage":
            why["untied_generator_embeddings"] = (
                "with --training_algorithm=two_stage: the generator and the discriminator "
                "share no weights (the discriminator starts from the generator's)")
        lines = []
        for name, reason in why.items():
            value = getattr(self, name)
            if value == defaults[name]:
                continue
            flag = (f"--{name}" if value else f"--no{name}") if isinstance(value, bool) \
                else f"--{name}={value:g}" if isinstance(value, float) else f"--{name}={value}"
            lines.append(f"{flag} does nothing {reason}")
        return lines

    def _sharing(self) -> str:
        """The weight sharing of G and D that the flags ask for (see SHARING)."""
        if self.gradient_disentangled_embeddings:
            return "disentangled"
        if self.uniform_generator:
            return "uniform"
        if not self.untied_generator or self.objective == "bert_mlm":
            return "encoder"
        if self.untied_generator_embeddings or self.training_algorithm == "two_stage":
            return "none"
        return "embeddings"

    @property
    def encoders(self) -> PretrainingEncoders:
        """G's and D's EncoderConfigs and their weight sharing, derived at construction:
        what modeling builds the pre-training models from."""
        return self._encoders

    def discriminator_config(self) -> EncoderConfig:
        """D's EncoderConfig, derived at construction (`encoders.discriminator`).

        As the original's training_utils.get_bert_config: the size preset and
        the overrides (see `_discriminator_encoder`).
        """
        return self._encoders.discriminator

    def generator_config(self) -> EncoderConfig:
        """G's EncoderConfig, derived at construction (`encoders.generator`).

        As the original's get_generator_config (see `_generator_encoder`).
        """
        return self._encoders.generator

    def to_dict(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        values["resolved_max_predictions_per_seq"] = self.resolved_max_predictions_per_seq
        return values

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "PretrainingConfig":
        values = {k: v for k, v in values.items() if k != "resolved_max_predictions_per_seq"}
        _check_known(cls, values)
        return cls(**values)


def _discriminator_encoder(config: PretrainingConfig) -> EncoderConfig:
    """The discriminator's EncoderConfig: size preset + overrides.

    As the original's training_utils.get_bert_config, the attention heads
    (max(1, hidden // 64)) and the FFN width (4 x hidden) follow the
    hidden size after the overrides, unless the overrides set them too:
    {"hidden_size": 512} on Small gives 8 heads and a 2048-wide FFN.
    """
    if config.model_size not in MODEL_SIZES:
        raise ConfigError(
            f"model_size {config.model_size!r} is not one of {sorted(MODEL_SIZES)}")
    values = dict(MODEL_SIZES[config.model_size])
    if config.embedding_size is not None:
        values["embedding_size"] = config.embedding_size
    values["vocab_size"] = config.vocab_size
    values["max_position_embeddings"] = max(512, config.max_seq_length,
                                            config.phase2_max_seq_length)
    if not isinstance(config.model_hparam_overrides, dict):
        raise ConfigError("model_hparam_overrides must be a JSON object of EncoderConfig "
                          f"fields, got {config.model_hparam_overrides!r}")
    overrides = dict(config.model_hparam_overrides)
    _check_known(EncoderConfig, overrides)
    # the overrides win, as the original's get_bert_config; a flag they overrule is named
    # (--embedding_size had been ignored, -4 included), and a table smaller than the
    # vocabulary refused (its ids had been met at step 0, after the folder was written)
    if config.embedding_size is not None and "embedding_size" in overrides \
            and overrides["embedding_size"] != config.embedding_size:
        raise ConfigError(f"--embedding_size={config.embedding_size} and model_hparam_overrides"
                          f"' embedding_size {overrides['embedding_size']!r}: give one")
    vocab = overrides.get("vocab_size", config.vocab_size)
    if isinstance(vocab, numbers.Integral) and not isinstance(vocab, bool) \
            and vocab < config.vocab_size:
        raise ConfigError(f"model_hparam_overrides' vocab_size {vocab} is smaller than the "
                          f"vocabulary's {config.vocab_size} tokens (--vocab_size, or the "
                          "vocab file's size): its ids past the table would not embed; leave "
                          "vocab_size out of the overrides")
    values.update(overrides)
    hidden = values["hidden_size"]
    if isinstance(hidden, bool) or not isinstance(hidden, numbers.Integral):
        raise ConfigError(f"hidden_size must be an integer, got {hidden!r}")
    values["num_attention_heads"] = max(1, hidden // 64)  # the presets' values too
    values["intermediate_size"] = 4 * hidden
    values.update(overrides)
    return EncoderConfig(**values)


def _generator_encoder(config: PretrainingConfig, disc: EncoderConfig) -> EncoderConfig:
    """G's EncoderConfig, sized as the original's get_generator_config.

    BERT (objective bert_mlm, the original's electra_objective=False): D's
    config, as the original builds BERT's transformer at the full size
    whatever generator_hidden_size and generator_layers say. Two-stage training: G
    embeds at D's embedding size (in tables of its own), so that D can
    start from all of G's weights.
    """
    if config.objective == "bert_mlm":
        return disc
    tie = not config.untied_generator_embeddings or config.training_algorithm == "two_stage"
    return generator_config(disc, config.generator_hidden_size, config.generator_layers,
                            tie_embeddings=tie)


def generator_config(disc: EncoderConfig, generator_hidden_size: float,
                     generator_layers: float, tie_embeddings: bool = True) -> EncoderConfig:
    """Scales D's config into G's, as the original's get_generator_config.

    Hidden size and depth are fractions of D's; the FFN is 4h and the head
    count max(1, h // 64). With tied embeddings G keeps D's embedding size, so
    that the table can be shared and projected to G's width (paper section
    3.2); untied, G embeds at its own width, as the original.
    """
    hidden = int(round(disc.hidden_size * generator_hidden_size))
    layers = max(1, int(round(disc.num_hidden_layers * generator_layers)))
    heads = max(1, hidden // 64)
    if hidden % heads:
        raise ConfigError(f"generator hidden size {hidden} is not a multiple of {heads} heads")
    return dataclasses.replace(
        disc, hidden_size=hidden, num_hidden_layers=layers,
        intermediate_size=4 * hidden, num_attention_heads=heads,
        embedding_size=disc.resolved_embedding_size if tie_embeddings else None,
    )


STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")
MIXED_PRECISIONS = ("fp32", "bf16")
ATTENTION_IMPLEMENTATIONS = ("einsum", "fused")  # modeling/transformer.py
JAX_INPUT_PIPELINES = ("tf.data", "numpy", "packed")


@dataclasses.dataclass(frozen=True)
class RuntimeOptions:
    """How a run executes, for pre-training and fine-tuning alike (not hyperparameters).

    The devices, the compilation and the precision of either backend; the
    `jax_*` options apply with KERAS_BACKEND=jax only.
    """

    strategy: str = _field("default", "the tf.distribute strategy (KERAS_BACKEND=jax: default "
                           "or mirrored, both every device)", choices=STRATEGIES)
    num_devices: int = _field(0, "mirrored: GPUs (or logical CPUs) to use; 0 = all GPUs")
    tpu: str = _field("", "TPU name or grpc:// address for strategy=tpu")
    jit_compile: bool = _field(False, "XLA for the per-replica forward/backward (and prediction)")
    mixed_precision: str = _field("fp32", "bf16: mixed bfloat16 compute, float32 weights",
                                  choices=MIXED_PRECISIONS)
    attention_implementation: str = _field(
        "einsum", "fused: attention through keras.ops.dot_product_attention (one kernel where "
        "the backend has one, e.g. cuDNN on a GPU); layers that apply attention dropout while "
        "training keep einsum", choices=ATTENTION_IMPLEMENTATIONS)
    worker_startup_timeout_s: int = _field(
        600, "--strategy=multi_worker, and multi-host JAX pre-training (--jax_num_processes "
        ">= 2): seconds "
        "a process waits at start-up for every other worker (process) of the run to join; "
        "then a watcher ends it with one error line, exit status 137 (0: wait forever)")
    jax_steps_per_call: int = _field(
        1, "KERAS_BACKEND=jax pre-training: optimizer steps per compiled call (the TF loop "
        "runs a whole chunk per call; fine-tuning: 1)")
    jax_input_pipeline: str = _field(
        "tf.data", "KERAS_BACKEND=jax pre-training: tf.data reads "
        "the TFRecords as the TF loop does; numpy reads them with NumPy alone (the run then "
        "never imports TensorFlow); packed reads files of pack_pretraining_data (memory-"
        "mapped, fast enough for a GPU; no TensorFlow either)", choices=JAX_INPUT_PIPELINES)
    jax_device_prefetch: bool = _field(
        False, "KERAS_BACKEND=jax pre-training: put each compiled call's batches on the device "
        "one call ahead, before the call in front of them is dispatched (the same batches "
        "and results; an input error then surfaces one call earlier)")
    jax_coordinator_address: str = _field(
        "", "KERAS_BACKEND=jax multi-host pre-training: host:port of process 0, the same for "
        "every process (jax.distributed)")
    jax_num_processes: int = _field(
        1, "KERAS_BACKEND=jax multi-host pre-training: number of processes")
    jax_process_id: int = _field(
        0, "KERAS_BACKEND=jax multi-host pre-training: this process's index; 0 writes "
        "checkpoints, summaries and the folder")

    def __post_init__(self) -> None:
        """Checks the options, at construction (and at every dataclasses.replace).

        Raises:
          ConfigError: an unknown choice, a value out of range, or multi-host
            options that do not go together.
        """
        _check_types(self)
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"unknown strategy {self.strategy!r}; "
                              f"known are: {', '.join(STRATEGIES)}")
        if self.tpu and self.strategy != "tpu":  # (ignored before: the run was not on it)
            raise ConfigError(f"tpu={self.tpu!r} is for strategy=tpu, and this run's is "
                              f"{self.strategy}")
        if self.mixed_precision not in MIXED_PRECISIONS:
            raise ConfigError(
                f"mixed_precision must be fp32 or bf16, got {self.mixed_precision!r} "
                "(fp16 is left out: Keras' loss scaling corrupts sparse embedding updates)")
        if self.attention_implementation not in ATTENTION_IMPLEMENTATIONS:
            raise ConfigError(f"attention_implementation must be one of "
                              f"{', '.join(ATTENTION_IMPLEMENTATIONS)}, got "
                              f"{self.attention_implementation!r}")
        if self.worker_startup_timeout_s < 0:
            raise ConfigError(
                f"worker_startup_timeout_s must be >= 0, got {self.worker_startup_timeout_s}")
        if self.num_devices < 0:  # (-1 had dropped a device, -2 divided by zero)
            raise ConfigError(f"num_devices must be >= 0 (0: all), got {self.num_devices}")
        if self.jax_steps_per_call < 1:
            raise ConfigError(f"jax_steps_per_call must be >= 1, got {self.jax_steps_per_call}")
        if self.jax_input_pipeline not in JAX_INPUT_PIPELINES:
            raise ConfigError(f"jax_input_pipeline must be one of "
                              f"{', '.join(JAX_INPUT_PIPELINES)}, got {self.jax_input_pipeline!r}")
        if self.jax_num_processes < 1:
            raise ConfigError(f"jax_num_processes must be >= 1, got {self.jax_num_processes}")
        if not 0 <= self.jax_process_id < self.jax_num_processes:
            raise ConfigError(f"jax_process_id={self.jax_process_id} is not in [0, "
                              f"jax_num_processes={self.jax_num_processes})")
        if (self.jax_num_processes > 1) != bool(self.jax_coordinator_address):
            raise ConfigError(
                "a multi-host JAX run needs both jax_coordinator_address=HOST:PORT and "
                f"jax_num_processes >= 2, got jax_coordinator_address="
                f"{self.jax_coordinator_address!r} and jax_num_processes={self.jax_num_processes}")
        if self.jax_coordinator_address:
            if address_port(self.jax_coordinator_address) is None:
                raise ConfigError(
                    f"jax_coordinator_address must be HOST:PORT, a port 1 to 65535 (process "
                    f"0's host, reachable from every process), got "
                    f"{self.jax_coordinator_address!r}")


# The RuntimeOptions of a multi-host JAX run.
JAX_MULTI_HOST_OPTIONS = ("jax_coordinator_address", "jax_num_processes", "jax_process_id")
# The RuntimeOptions only pre-training takes (the JAX loop's calls, input and hosts):
# FinetuningRun refuses any value but the default, and run_finetuning has no flag
# for them (flags.define_finetuning_flags).
PRETRAINING_ONLY_OPTIONS = ("jax_steps_per_call", "jax_input_pipeline", "jax_device_prefetch",
                            *JAX_MULTI_HOST_OPTIONS)


@dataclasses.dataclass(frozen=True)
class PretrainingRun(RuntimeOptions):
    """How and where a pre-training run executes (not hyperparameters)."""

    model_dir: str = _field("", "checkpoints, summaries, final weights")
    train_data: str = _field("", "comma-separated TFRecord globs")
    eval_data: str = _field("", "held-out TFRecord globs (empty: no periodic eval)")
    vocab_file: str = _field("", "WordPiece vocab (special ids for masking); resuming, "
                             "empty reads the one model_dir carries")
    gradient_accumulation_steps: int = _field(1, "micro-batches per optimizer step")
    eval_every_steps: int = _field(0, "0: evaluate before the first step and at the end only")
    log_every_steps: int = _field(0, "console/summary period; 0: iterations_per_loop")
    phase2_train_data: str = _field(
        "", "phase 2's TFRecord globs (records of phase2_max_seq_length); with phase2_steps")
    phase2_gradient_accumulation_steps: int = _field(
        0, "phase 2's micro-batches per optimizer step; 0: gradient_accumulation_steps")
    log_examples: bool = _field(
        False, "print the first eval sequence at each evaluation: the tokens masked, the "
        "generator's samples and the discriminator's p(replaced) (needs --eval_data)")

    @property
    def resolved_phase2_gradient_accumulation_steps(self) -> int:
        return self.phase2_gradient_accumulation_steps or self.gradient_accumulation_steps

    def __post_init__(self) -> None:
        """Checks the run's options, at construction (`check_run` checks them with the
        hyperparameters).

        Raises:
          ConfigError: a bad or missing option.
        """
        super().__post_init__()
        if self.phase2_gradient_accumulation_steps < 0:
            raise ConfigError(f"phase2_gradient_accumulation_steps must be >= 0, "
                              f"got {self.phase2_gradient_accumulation_steps}")
        if self.gradient_accumulation_steps < 1:
            raise ConfigError(f"gradient_accumulation_steps must be >= 1, "
                              f"got {self.gradient_accumulation_steps}")
        for name in ("eval_every_steps", "log_every_steps"):  # a negative one was ignored
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not self.model_dir:
            raise ConfigError("model_dir is required")
        if not self.train_data:
            raise ConfigError("train_data is required")
        if not self.vocab_file:
            raise ConfigError("vocab_file is required: the vocab.txt the records were built "
                              "with (a --model_dir that records one gives it)")


def check_run(config: PretrainingConfig, run: PretrainingRun) -> None:
    """The checks across a run's hyperparameters and its options (each has checked
    itself at construction).

    Raises:
      ConfigError: an option that does not fit `config`.
    """
    if config.train_batch_size % run.gradient_accumulation_steps:
        raise ConfigError(
            "train_batch_size must be a multiple of gradient_accumulation_steps, got "
            f"train_batch_size={config.train_batch_size} and "
            f"gradient_accumulation_steps={run.gradient_accumulation_steps}")
    if config.phase2_steps:
        if not run.phase2_train_data:
            raise ConfigError(f"phase2_steps={config.phase2_steps} needs phase2_train_data "
                              f"(records of phase2_max_seq_length={config.phase2_max_seq_length})")
        k, batch = (run.resolved_phase2_gradient_accumulation_steps,
                    config.resolved_phase2_train_batch_size)
        if batch % k:
            whose = ("" if run.phase2_gradient_accumulation_steps else
                     " (gradient_accumulation_steps, which phase 2 takes where "
                     "phase2_gradient_accumulation_steps is 0)")
            raise ConfigError(f"phase 2's train batch {batch} is not a multiple of its "
                              f"gradient accumulation steps {k}{whose}")
    elif run.phase2_train_data or run.phase2_gradient_accumulation_steps:
        given = [name for name in ("phase2_train_data", "phase2_gradient_accumulation_steps")
                 if getattr(run, name)]
        raise ConfigError(f"{' and '.join(given)} need{'s' if len(given) == 1 else ''} "
                          "phase2_steps >= 1 (the steps of phase 2, the last of "
                          "num_train_steps)")


# Original configure_finetuning.py: learning rate and layer-wise decay by size.
# The paper's Table 7 gives 3e-4 for Small; the released code uses 1e-4.
FINETUNE_LEARNING_RATE = {"tiny": 1e-3, "small": 1e-4, "base": 1e-4, "large": 5e-5}
FINETUNE_LAYERWISE_DECAY = {"tiny": 0.8, "small": 0.8, "base": 0.8, "large": 0.9}


@dataclasses.dataclass(frozen=True)
class FinetuningConfig:
    """Fine-tuning hyperparameters, named as in configure_finetuning.py."""

    task_name: str = _field(
        "", "cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli, squad_v1, squad_v2, newsqa, "
        "naturalqs, triviaqa, searchqa, mrqa (MRQA files), ner, chunking; classification, "
        "tagging: your own data")
    model_size: str = _field("", "empty: take it from the checkpoint's config",
                             choices=("",) + tuple(MODEL_SIZES))
    learning_rate: float = _field(0.0, "0: the original's by size (1e-4 Small/Base, 5e-5 Large)")
    layerwise_lr_decay: float = _field(-1.0, "-1: by size (0.8 Small/Base, 0.9 Large); 0: off")
    weight_decay_rate: float = _field(0.01, "the code's 0.01 (the paper: 0)")
    warmup_proportion: float = _field(0.1, "linear warmup over this fraction of the steps")
    num_train_epochs: float = _field(0.0, "0: the task's default (10 RTE/STS-B, 2 SQuAD, else 3)")
    train_batch_size: int = _field(32, "global batch")
    eval_batch_size: int = _field(32, "global batch for dev/test prediction")
    max_seq_length: int = _field(0, "0: the task's default (128, 512 SQuAD, 256 tagging)")
    adam_epsilon: float = _field(1e-6, "Adam epsilon")
    adam_bias_correction: bool = _field(False, "Keras' bias-corrected Adam (the original has none)")
    clip_norm: float = _field(1.0, "global-norm clipping")
    hidden_dropout_prob: float = _field(
        0.1, "dropout on embeddings, sub-layer outputs and the head, whatever the checkpoint's")
    attention_probs_dropout_prob: float = _field(
        0.1, "dropout on attention probabilities, whatever the checkpoint's")
    save_checkpoints_steps: int = _field(
        1000, "also saved at the end of every epoch (0: only there)")
    keep_checkpoint_max: int = _field(3, "checkpoints kept")
    seed: int = _field(0, "init of the head, shuffling and dropout")
    do_lower_case: bool = _field(True, "must match the vocab and pre-training")
    double_unordered: bool = _field(True, "MRPC, STS-B: also train on each pair in the other order")
    skip_malformed_rows: bool = _field(
        False, "GLUE: skip a row with too few columns, with a warning naming it, as the "
        "original does (default: refuse the file at that line)")
    squad_null_rule: str = _field(
        "answerable", "SQuAD 2.0 null odds: answerable is the original's rule",
        choices=("answerable", "combined"))
    qa_na_threshold: float = _field(
        -2.75, 'SQuAD 2.0, rule answerable: "" when null odds exceed it')
    no_answer_threshold: float = _field(
        0.0, 'SQuAD 2.0, rule combined: "" when null odds exceed it')
    joint_prediction: bool = _field(
        True, "SQuAD: the original's joint start/end head (False: independent)")
    beam_size: int = _field(20, "SQuAD, joint head: best starts, and best ends of each, decoded")
    answerable_classifier: bool = _field(
        True, "SQuAD 2.0: train the answerability classifier (False: none, with "
        "--joint_prediction=false; the no-answer score is then start + end logits at [CLS] "
        "less the best span's, at --qa_na_threshold, as the original's)")
    answerable_uses_start_logits: bool = _field(
        True, "SQuAD 2.0: the answerability classifier also reads the start-probability-"
        "weighted sequence, through dense(512, GELU) (False: dense(1) of [CLS] alone)")
    answerable_weight: float = _field(
        0.5, "SQuAD 2.0: the answerability classifier's loss weight in training (the span "
        "loss weighs 1)")
    max_query_length: int = _field(64, "SQuAD, MRQA: question pieces kept in a window")
    doc_stride: int = _field(
        128, "SQuAD, MRQA: a window of a long context every doc_stride pieces")
    n_best_size: int = _field(
        20, "SQuAD, MRQA: answers kept per question (the independent head's best starts and "
        "ends paired)")
    max_answer_length: int = _field(30, "SQuAD, MRQA: longest answer, in pieces")
    classifier_head: str = _field(
        "dense", "classification/regression head: dense is ELECTRA's one layer on [CLS]; mlp "
        "transformers' dense -> GELU -> dense, as its ElectraForSequenceClassification",
        choices=("dense", "mlp"))
    tagging_scheme: str = _field("BIO", "ner/chunking: the tag scheme", choices=("BIO", "BIOES"))
    text_column: str = _field("text", "classification: the column (JSONL: key) of the text")
    text_pair_column: str = _field(
        "", "classification: the column of the second text of a pair; empty: single texts")
    label_column: str = _field("label", "classification: the column of the label or target")
    label_names: str = _field(
        "", "classification, tagging (ner, chunking): the labels, comma-separated (or a JSON "
        "list, for names holding commas), in logit order; empty: the sorted labels of the "
        "train split")
    regression: bool = _field(False, "classification: a float target (Pearson, Spearman)")

    def resolved_learning_rate(self, size: str) -> float:
        return self.learning_rate or FINETUNE_LEARNING_RATE.get(size, 1e-4)

    def resolved_layerwise_lr_decay(self, size: str) -> float | None:
        decay = self.layerwise_lr_decay
        if decay < 0:
            decay = FINETUNE_LAYERWISE_DECAY.get(size, 0.8)
        return decay or None

    def __post_init__(self) -> None:
        """Checks the values, at construction (and at every dataclasses.replace). An empty
        task_name is allowed (the defaults; a run's command requires one)."""
        _check_types(self)
        if self.model_size and self.model_size not in MODEL_SIZES:
            raise ConfigError(f"model_size {self.model_size!r} is not one of {sorted(MODEL_SIZES)}")
        if not 0.0 <= self.warmup_proportion < 1.0:
            raise ConfigError(f"warmup_proportion must be in [0, 1), got "
                              f"{self.warmup_proportion}")
        for name in ("train_batch_size", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        check_finite(self, ("num_train_epochs", "learning_rate", "weight_decay_rate"), ">= 0")
        if 0 < self.learning_rate < _FLOAT32_TINY:  # (0 is the default: by size)
            raise ConfigError(f"learning_rate {self.learning_rate:g} is below float32's "
                              f"smallest normal number ({_FLOAT32_TINY:.4g}): the weights "
                              "would not move (0: the original's rate for the size)")
        # (0 had been taken: an epsilon of 0 divides 0 by 0 for a weight without gradient,
        # the NaN blamed on the learning rate; a clip norm of 0 zeroes every gradient)
        check_finite(self, ("adam_epsilon", "clip_norm"), "> 0")
        if self.tagging_scheme not in ("BIO", "BIOES"):
            raise ConfigError(f"tagging_scheme must be BIO or BIOES, got {self.tagging_scheme!r}")
        if self.squad_null_rule not in ("answerable", "combined"):
            raise ConfigError(f"squad_null_rule must be answerable or combined, "
                              f"got {self.squad_null_rule!r}")
        for name in ("qa_na_threshold", "no_answer_threshold"):  # (+-inf: all, or none)
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) \
                    or math.isnan(value):  # NaN answered every question, served none
                raise ConfigError(f"{name} must be a number, got {value!r}")
        check_finite(self, ("answerable_weight",), ">= 0")
        for name in ("beam_size", "max_query_length", "doc_stride", "n_best_size",
                     "max_answer_length"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.classifier_head not in ("dense", "mlp"):
            raise ConfigError(f"classifier_head must be dense or mlp, got {self.classifier_head!r}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if self.max_seq_length and self.max_seq_length < 8:
            raise ConfigError(f"max_seq_length must be >= 8, got {self.max_seq_length}")
        if self.keep_checkpoint_max < 1:
            raise ConfigError(f"keep_checkpoint_max must be >= 1, got {self.keep_checkpoint_max}")
        if self.save_checkpoints_steps < 0:
            raise ConfigError("save_checkpoints_steps must be >= 0 (0: at the end of every "
                              f"epoch only), got {self.save_checkpoints_steps}")
        _check_seed(self.seed)
        check_finite(self, ("layerwise_lr_decay",))
        if self.layerwise_lr_decay != -1 and not 0.0 <= self.layerwise_lr_decay <= 1.0:
            raise ConfigError("layerwise_lr_decay must be in [0, 1] (0: off) or -1 (by size), "
                              f"got {self.layerwise_lr_decay!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "FinetuningConfig":
        _check_known(cls, values)
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class FinetuningRun(RuntimeOptions):
    """Where and how a fine-tuning run executes."""

    model_dir: str = _field("", "checkpoints, results.json, prediction files")
    data_dir: str = _field("", "the task's files (GLUE task folder, SQuAD json, CoNLL files)")
    init_checkpoint: str = _field(
        "", "pre-training model_dir, one of its checkpoints (MODEL_DIR/checkpoints/ckpt-N or "
        "jax-ckpt-N.npz), or a discriminator .weights.h5")
    from_scratch: bool = _field(
        False, "start from random weights of --model_size and --vocab_file's size (seeded by "
        "--seed) instead of --init_checkpoint: the baseline of a pre-training comparison")
    vocab_file: str = _field("", "empty: the one recorded with the checkpoint")
    do_train: bool = _field(True, "train (else only evaluate the checkpoint)")
    do_eval: bool = _field(True, "evaluate on the dev split(s) after every epoch")
    do_predict: bool = _field(False, "write test-split predictions at the end")
    num_trials: int = _field(
        1, "train+eval runs with seeds seed .. seed+N-1, in MODEL_DIR_1 .. MODEL_DIR_N, "
        "their results and median/mean/std in MODEL_DIR/trials.json (the original's)")
    keep_all_models: bool = _field(
        True, "with num_trials > 1: False keeps only the last trial's folder (the original's)")
    trim_batches: bool = _field(
        True, "train on each batch cut to its longest example (rounded up to an eighth of "
        "max_seq_length where the step is compiled: XLA, JAX): the same loss on fewer "
        "positions, short texts train several times faster; evaluate and predict on "
        "batches of rows of similar length, cut the same way; False: every batch at "
        "max_seq_length, as the original")
    log_examples: bool = _field(
        False, "print the first window of each split the run reads, as the model gets it "
        "(its tokens, input_ids, input_mask, segment_ids and targets): the original's "
        "log_examples, to check how the data was read")
    log_every_steps: int = _field(
        100, "steps between progress lines (epoch, step, loss, examples/s); a Ctrl-C or "
        "SIGTERM stops at the next one and saves there (checkpoints otherwise: every "
        "save_checkpoints_steps and at each epoch's end)")

    def __post_init__(self) -> None:
        """Checks the run's options at construction, refusing the JAX ones fine-tuning has
        not. model_dir and data_dir may be empty here (loading a model needs neither);
        the command requires both.

        Raises:
          ConfigError: a bad option, or one fine-tuning would ignore.
        """
        super().__post_init__()
        if self.num_trials < 1:
            raise ConfigError(f"num_trials must be >= 1, got {self.num_trials}")
        if self.log_every_steps < 1:
            raise ConfigError(f"log_every_steps must be >= 1, got {self.log_every_steps}")
        if self.jax_steps_per_call != 1:
            raise ConfigError(f"jax_steps_per_call={self.jax_steps_per_call} is for "
                              "pre-training: fine-tuning runs one step per compiled call")
        if self.jax_input_pipeline != "tf.data":
            raise ConfigError(f"jax_input_pipeline={self.jax_input_pipeline} is for "
                              "pre-training: fine-tuning reads its tasks with tf.data")
        if self.jax_device_prefetch:
            raise ConfigError("jax_device_prefetch is for pre-training: fine-tuning puts each "
                              "batch on the device as its step starts")
        if self.jax_num_processes != 1:
            raise ConfigError(f"jax_num_processes={self.jax_num_processes} is for "
                              "pre-training: fine-tuning runs in one process")

    def check_start(self) -> None:
        """Refuses a run with nothing to start from (every run builds the discriminator
        from --init_checkpoint, or --from_scratch, before it restores a --model_dir):
        the command asks before any folder or trial is touched.

        Raises:
          ConfigError: both given. InputError: neither.
        """
        if self.from_scratch and self.init_checkpoint:
            raise ConfigError("--from_scratch and --init_checkpoint exclude each other")
        if not self.from_scratch and not self.init_checkpoint:
            raise InputError("--init_checkpoint is required (a pre-training model_dir, or one "
                             "of its checkpoints/ckpt-N), or --from_scratch")
