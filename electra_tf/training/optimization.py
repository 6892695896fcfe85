"""AdamW (or LAMB) with warmup + polynomial decay and layer-wise LR decay.

Matches the original's optimization.py (docs/reference.md, "Shared settings" and
"Fine-tuning"): Adam betas 0.9/0.999, epsilon 1e-6, decoupled weight decay
0.01 with LayerNorm and bias excluded, global-norm clipping 1.0, and
lr_t = poly_decay(lr, step, T, power) * min(1, step / warmup).

The update rule is, by default, the original's AdamWeightDecayOptimizer, which
has no bias correction:
    m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g^2
    update = m / (sqrt(v) + eps) + weight_decay_rate * param  (no decay on LayerNorm/bias)
    param -= lr_t * layer_multiplier * update
`bias_correction=True` (the configs' `adam_bias_correction`) uses Keras'
bias-corrected Adam step instead (m_hat = m / (1 - b1^t), v_hat = v / (1 -
b2^t)), with the same decoupled decay. Both keep m and v in the Keras Adam
slots ("momentum", "velocity"), so checkpoints hold the same variables in the
same order either way.

`optimizer="lamb"` (PretrainingConfig.optimizer) is NVIDIA's TF2 ELECTRA LAMB
instead (`ElectraLamb`: tensorflow_addons' update, with its schedule, warmup
then decay from the peak); docs/pretraining.md says when to use it.

Two Keras 3 details shape this file:
- `AdamW.exclude_from_weight_decay(var_names=...)` matches the regex against
  `variable.name`, and on the TensorFlow backend it sees the underlying
  tf.Variable, whose name keeps only the outermost scope ("electra/gamma:0"
  for ".../layer_0/LayerNorm/gamma"). A "LayerNorm" pattern therefore never
  matches. We decide per variable from its Keras `path` at build time.
- Keras AdamW decays every variable with the one global learning rate. For
  layer-wise decay both the Adam step and the weight decay of a variable use
  its scaled rate, so both happen in `update_step` with a multiplier looked
  up by variable index (set once in `build`).
"""

from __future__ import annotations

import re
from typing import Sequence

import keras
from keras import ops

from electra_tf.core.config import LAMB_DECAY_POWER
from electra_tf.modeling.encoder import encoder_variable_depth

# The original's exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"],
# plus Keras' LayerNormalization variable names (gamma, beta), all matched
# with re.search against the variable's Keras path.
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias", r"(^|/)(gamma|beta)$")


def _path(variable) -> str:
    return getattr(variable, "path", None) or variable.name


@keras.saving.register_keras_serializable(package="electra_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """The original ELECTRA schedule.

    lr_t = (lr - end) * (1 - min(t, T) / T) ** power + end, times
    min(1, t / num_warmup_steps) when num_warmup_steps > 0; end = 0. The
    step t is the optimizer's iteration count, so the first update uses
    t = 0 (lr 0 with warmup), as the original's global_step. num_warmup_steps
    may be fractional: fine-tuning's warmup_proportion * num_train_steps, which
    the original's create_optimizer keeps as a float.

    `restarts` (steps, e.g. two-stage training's stage start, or the second
    pre-training phase's) split the run into stages that each run the whole
    schedule on their own: in the stage [s, e), t is counted from s and
    T = e - s (warmup included). `stage_rates` gives each later stage its own
    (peak learning rate, warmup steps); by default they repeat the first's.

    `decay_after_warmup` is NVIDIA's TF2 ELECTRA schedule (optimization.py,
    WarmUp over PolynomialDecay), which `--optimizer=lamb` runs: lr * t / w
    while t < w, then (lr - end) * (1 - min(t - w, T - w) / (T - w)) ** power
    + end: the decay starts at the peak when the warmup ends, instead of
    being multiplied by the warmup ramp from step 0.
    """

    def __init__(
        self,
        learning_rate: float,
        num_train_steps: int,
        num_warmup_steps: float = 0,
        power: float = 1.0,
        end_learning_rate: float = 0.0,
        restarts: Sequence[int] = (),
        stage_rates: Sequence[Sequence[float]] = (),
        decay_after_warmup: bool = False,
    ):
        if num_train_steps < 1:
            raise ValueError(f"num_train_steps must be >= 1, got {num_train_steps}")
        if num_warmup_steps < 0:
            raise ValueError(f"num_warmup_steps must be >= 0, got {num_warmup_steps}")
        restarts = tuple(sorted(int(r) for r in restarts))
        if any(not 0 < r < num_train_steps for r in restarts) or len(set(restarts)) < len(
                restarts):
            raise ValueError(f"restarts must be distinct steps in (0, {num_train_steps}), "
                             f"got {restarts}")
        stage_rates = tuple((float(r), int(w)) for r, w in stage_rates)
        if stage_rates and len(stage_rates) != len(restarts):
            raise ValueError(f"stage_rates needs one (learning_rate, num_warmup_steps) per "
                             f"restart, got {len(stage_rates)} for {len(restarts)}")
        self.learning_rate = learning_rate
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = float(num_warmup_steps)
        self.power = power
        self.end_learning_rate = end_learning_rate
        self.restarts = restarts
        self.stage_rates = stage_rates
        self.decay_after_warmup = bool(decay_after_warmup)

    def _rate(self, step, total: float, peak: float, warmup: int):
        end = self.end_learning_rate
        if self.decay_after_warmup:
            # NVIDIA's WarmUp(PolynomialDecay): linear warmup to the peak, then the decay
            # from the peak over the steps left, counted from the warmup's end.
            span = max(total - warmup, 1.0)
            t = ops.maximum(step - float(warmup), 0.0)
            lr = (peak - end) * ops.power(1.0 - ops.minimum(t, span) / span, self.power) + end
            if warmup > 0:
                lr = ops.where(step < float(warmup), peak * step / float(warmup), lr)
            return lr
        remaining = 1.0 - ops.minimum(step, total) / total
        lr = (peak - end) * ops.power(remaining, self.power) + end
        if warmup > 0:
            lr = lr * ops.minimum(1.0, step / float(warmup))
        return lr

    def __call__(self, step):
        step = ops.cast(step, "float32")
        bounds = (0, *self.restarts, self.num_train_steps)
        rates = self.stage_rates or ((self.learning_rate, self.num_warmup_steps),) * len(
            self.restarts)
        lr = self._rate(step, float(bounds[1]), self.learning_rate,
                        self.num_warmup_steps)  # the first stage
        for (start, end), (peak, warmup) in zip(zip(bounds[1:-1], bounds[2:]), rates):
            lr = ops.where(step >= float(start),  # later stages take over
                           self._rate(step - float(start), float(end - start), peak, warmup),
                           lr)
        return lr

    def get_config(self):
        return {
            "learning_rate": self.learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "power": self.power,
            "end_learning_rate": self.end_learning_rate,
            "restarts": list(self.restarts),
            "stage_rates": [list(r) for r in self.stage_rates],
            "decay_after_warmup": self.decay_after_warmup,
        }


def layer_depth(variable_path: str, n_layers: int) -> int:
    """A variable's depth for layer-wise LR decay, as the original's _get_layer_lrs.

    The encoder's depths come from `modeling.encoder.encoder_variable_depth`
    (embeddings 0, transformer layer i at i + 1); everything else (task
    heads) is at n_layers + 2.

    Raises:
        ValueError: the path names a layer at or beyond n_layers.
    """
    depth = encoder_variable_depth(variable_path)
    if depth is None:
        return n_layers + 2
    if depth > n_layers:
        raise ValueError(f"{variable_path!r} is layer {depth - 1}, but n_layers={n_layers}")
    return depth


def applies_weight_decay(
    variable_path: str, exclude: Sequence[str] = DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY
) -> bool:
    """False for LayerNorm and bias variables (any pattern re.search-es the path)."""
    return not any(re.search(pattern, variable_path) for pattern in exclude)


class _OncePerApply:
    """Scalars every variable's update shares, made once per apply() instead of once
    per variable: the scaled learning rate, the bias correction's powers, the update's
    constants. Keras calls update_step once per variable, and on TensorFlow each call
    adds its ops to the traced training step; made once, the same values (the same
    expressions on the same inputs) cost a few ops in all. Kept per dtype and device
    (a mirrored variable's copies update each on its own device)."""

    _per_apply = None

    def apply(self, grads, trainable_variables=None):
        self._per_apply = {}
        try:
            return super().apply(grads, trainable_variables)
        finally:
            self._per_apply = None

    def _shared(self, name, variable, *key, make):
        """make(), or what it gave for this name, key, dtype and device in this apply()."""
        if self._per_apply is None:  # update_step called on its own
            return make()
        full = (name, keras.backend.standardize_dtype(variable.dtype),
                getattr(variable, "device", None), *key)
        if full not in self._per_apply:
            self._per_apply[full] = make()
        return self._per_apply[full]

    def _constants(self, variable) -> dict:
        """The update's Python numbers as tensors of the variable's dtype, made once per
        apply(): the values the update's expressions would convert them to, one by one
        ("weight_decay": the optimizer's `_decay_rate`)."""
        dtype = keras.backend.standardize_dtype(variable.dtype)

        def make():
            return {name: ops.convert_to_tensor(value, dtype) for name, value in (
                ("beta_1", self.beta_1), ("1-beta_1", 1.0 - self.beta_1),
                ("beta_2", self.beta_2), ("1-beta_2", 1.0 - self.beta_2),
                ("epsilon", self.epsilon), ("weight_decay", self._decay_rate or 0.0))}

        return self._shared("constants", variable, make=make)


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraAdamW(_OncePerApply, keras.optimizers.AdamW):
    """The original's AdamWeightDecayOptimizer (see the module docstring).

    Path-based decay exclusion, optional layer-wise LR decay, and, by default,
    Adam without bias correction, as the original.

    Args:
        layerwise_lr_decay: None (off) or the decay factor (0.8 for Small and
            Base fine-tuning); needs n_layers.
        n_layers: the encoder's number of transformer layers.
        exclude_from_weight_decay_patterns: regexes searched in each
            variable's Keras path; a match turns weight decay off for it.
        bias_correction: False (default): the original's update, m / (sqrt(v)
            + eps); True: Keras' bias-corrected Adam step.
        **kwargs: keras.optimizers.AdamW's arguments (amsgrad is not supported).
    """

    def __init__(
        self,
        layerwise_lr_decay: float | None = None,
        n_layers: int | None = None,
        exclude_from_weight_decay_patterns: Sequence[str] = (DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY),
        bias_correction: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if layerwise_lr_decay is not None and n_layers is None:
            raise ValueError("layerwise_lr_decay needs n_layers")
        if self.amsgrad:
            raise ValueError("ElectraAdamW does not support amsgrad")
        self.bias_correction = bool(bias_correction)
        self.layerwise_lr_decay = layerwise_lr_decay
        self.n_layers = n_layers
        self.exclude_from_weight_decay_patterns = tuple(exclude_from_weight_decay_patterns)

    def build(self, var_list):
        if self.built:
            return
        paths = [_path(v) for v in var_list]
        if self.layerwise_lr_decay is None:
            self._lr_multipliers = [1.0] * len(paths)
        else:
            self._lr_multipliers = [
                self.layerwise_lr_decay ** (self.n_layers + 2 - layer_depth(p, self.n_layers))
                for p in paths
            ]
        self._decays = [
            applies_weight_decay(p, self.exclude_from_weight_decay_patterns) for p in paths
        ]
        super().build(var_list)

    # A training loop that all-reduces (and clips) gradients across replicas
    # itself sets this, so the TF backend does not sum them a second time.
    gradients_already_reduced = False

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if self.gradients_already_reduced:
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)

    def lr_multiplier(self, variable) -> float:
        """The layer-wise factor on the learning rate of a built-on variable."""
        return self._lr_multipliers[self._get_variable_index(variable)]

    def _apply_weight_decay(self, variables):
        # Done per variable in update_step, with the variable's own rate.
        return

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        dtype = keras.backend.standardize_dtype(variable.dtype)
        multiplier = self._lr_multipliers[index]
        lr = self._shared("lr", variable, multiplier,
                          make=lambda: ops.cast(learning_rate, dtype) * multiplier)
        constant = self._constants(variable)
        # `_use_weight_decay` still honours exclude_from_weight_decay() calls.
        decays = bool(self.weight_decay) and self._decays[index] and self._use_weight_decay(
            variable)
        gradient = ops.cast(gradient, dtype)
        m, v = self._momentums[index], self._velocities[index]
        if self.bias_correction:
            # Keras' Adam.update_step, its per-step scalars made once per apply().
            if decays:
                self.assign_sub(variable, variable * constant["weight_decay"] * lr)
            alpha = self._shared("alpha", variable, multiplier,
                                 make=lambda: self._alpha(lr, variable))
            self.assign_add(m, ops.multiply(ops.subtract(gradient, m), constant["1-beta_1"]))
            self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v),
                                            constant["1-beta_2"]))
            self.assign_sub(variable, ops.divide(ops.multiply(m, alpha),
                                                 ops.add(ops.sqrt(v), constant["epsilon"])))
            return
        # The original's AdamWeightDecayOptimizer._apply_gradients, step by step.
        self.assign(m, ops.add(ops.multiply(constant["beta_1"], m),
                               ops.multiply(constant["1-beta_1"], gradient)))
        self.assign(v, ops.add(ops.multiply(constant["beta_2"], v),
                               ops.multiply(constant["1-beta_2"], ops.square(gradient))))
        update = m / (ops.sqrt(v) + constant["epsilon"])
        if decays:
            update = update + constant["weight_decay"] * variable
        self.assign_sub(variable, lr * update)

    @property
    def _decay_rate(self):
        return self.weight_decay

    def _alpha(self, lr, variable):
        """Keras' Adam step size, lr * sqrt(1 - beta_2^t) / (1 - beta_1^t), as it
        computes it (left to right), with the powers made once per apply()."""
        dtype = keras.backend.standardize_dtype(variable.dtype)

        def make():
            local_step = ops.cast(self.iterations + 1, dtype)
            beta_1_power = ops.power(ops.cast(self.beta_1, dtype), local_step)
            beta_2_power = ops.power(ops.cast(self.beta_2, dtype), local_step)
            return ops.sqrt(1 - beta_2_power), 1 - beta_1_power

        root, denominator = self._shared("powers", variable, make=make)
        return lr * root / denominator

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "layerwise_lr_decay": self.layerwise_lr_decay,
                "n_layers": self.n_layers,
                "exclude_from_weight_decay_patterns": list(self.exclude_from_weight_decay_patterns),
                "bias_correction": self.bias_correction,
            }
        )
        return config


# NVIDIA's TF2 ELECTRA LAMB (run_pretraining.py's opt_beta_1/opt_beta_2 defaults, which
# every one of its scripts passes; epsilon 1e-6 in optimization.create_optimizer).
LAMB_BETA_1, LAMB_BETA_2 = 0.878, 0.974
ADAM_BETA_1, ADAM_BETA_2 = 0.9, 0.999  # the original's AdamWeightDecayOptimizer
OPTIMIZERS = ("adamw", "lamb")


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraLamb(_OncePerApply, keras.optimizers.Optimizer):
    """LAMB as NVIDIA's TF2 ELECTRA runs it (tensorflow_addons.optimizers.LAMB).

    Per variable w, with gradient g (already all-reduced, averaged over the
    micro-batches and clipped to global norm 1.0 by the loop, as NVIDIA's
    train_one_step does before apply_gradients):
        m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g^2
        u = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
        u += weight_decay_rate * w              (not on LayerNorm and bias)
        r = ||w|| / ||u|| if both > 0 else 1    (1 on LayerNorm and bias: skip_adaptive)
        w -= r * lr_t * u
    The trust ratio r is not clipped (tfa's LAMB has no clipping). t counts
    from 1 at the start of each stage (`stage_starts`): NVIDIA's phase 2
    resets the optimizer's iterations to 0, keeping m and v, so its bias
    correction starts again; here the step count goes on (one checkpoint
    series) and t restarts instead.

    Keras 3's `keras.optimizers.Lamb` differs in three ways, so it is not used:
    its weight decay is Keras' decoupled step (w -= lr * wd * w, before and
    outside the trust ratio) where tfa adds wd * w to u before the ratio; it
    has no exclusion from layer adaptation; and its t is the global step.

    Args:
        learning_rate: a float or a schedule (WarmupPolynomialDecay).
        beta_1, beta_2, epsilon: as above (NVIDIA: 0.878, 0.974, 1e-6).
        weight_decay_rate: decoupled decay added to the update (0.01).
        exclude_from_weight_decay_patterns: regexes searched in each variable's
            Keras path; a match turns weight decay off for it.
        skip_adaptive: True: the same variables get no trust ratio (NVIDIA's
            --skip_adaptive, which its scripts pass); False: every variable does.
        stage_starts: steps where the bias correction's t starts again.
    """

    def __init__(self, learning_rate=1e-3, beta_1: float = LAMB_BETA_1,
                 beta_2: float = LAMB_BETA_2, epsilon: float = 1e-6,
                 weight_decay_rate: float = 0.01,
                 exclude_from_weight_decay_patterns: Sequence[str] = (
                     DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY),
                 skip_adaptive: bool = True, stage_starts: Sequence[int] = (), **kwargs):
        if kwargs.get("weight_decay") is not None:
            raise ValueError("ElectraLamb decays by weight_decay_rate, inside the update")
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta_1, self.beta_2, self.epsilon = float(beta_1), float(beta_2), float(epsilon)
        self.weight_decay_rate = float(weight_decay_rate)
        self.exclude_from_weight_decay_patterns = tuple(exclude_from_weight_decay_patterns)
        self.skip_adaptive = bool(skip_adaptive)
        self.stage_starts = tuple(sorted(int(s) for s in stage_starts))

    # The loop all-reduces and clips (see ElectraAdamW).
    gradients_already_reduced = False

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if self.gradients_already_reduced:
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)

    def build(self, var_list):
        if self.built:
            return
        excluded = [not applies_weight_decay(_path(v), self.exclude_from_weight_decay_patterns)
                    for v in var_list]
        self._decays = [not e for e in excluded]
        self._adapts = [not (e and self.skip_adaptive) for e in excluded]
        super().build(var_list)
        self._momentums, self._velocities = self.add_optimizer_variables(
            var_list, ["momentum", "velocity"])

    def lr_multiplier(self, variable) -> float:
        """1.0: NVIDIA applies no layer-wise decay with LAMB (nor in pre-training)."""
        return 1.0

    def stage_step(self, iterations):
        """t of the bias correction for the update at `iterations` (1 at a stage's start)."""
        it = ops.cast(iterations, "float32")
        start = ops.zeros((), "float32")
        for s in self.stage_starts:
            start = ops.where(it >= float(s), float(s), start)
        return it - start + 1.0

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        dtype = keras.backend.standardize_dtype(variable.dtype)
        lr = self._shared("lr", variable, make=lambda: ops.cast(learning_rate, dtype))
        constant = self._constants(variable)
        gradient = ops.cast(gradient, dtype)
        m, v = self._momentums[index], self._velocities[index]
        self.assign(m, ops.multiply(m, constant["beta_1"])
                    + ops.multiply(gradient, constant["1-beta_1"]))
        self.assign(v, ops.multiply(v, constant["beta_2"])
                    + ops.multiply(ops.square(gradient), constant["1-beta_2"]))
        correction_1, correction_2 = self._bias_corrections(variable)
        m_hat = m / correction_1
        v_hat = v / correction_2
        update = m_hat / (ops.sqrt(v_hat) + constant["epsilon"])
        if self._decays[index] and self.weight_decay_rate:
            update = update + constant["weight_decay"] * variable
        if self._adapts[index]:
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            safe = ops.where(u_norm > 0, u_norm, 1.0)
            ratio = ops.where(w_norm > 0, ops.where(u_norm > 0, w_norm / safe, 1.0), 1.0)
            update = ratio * update
        self.assign_sub(variable, lr * update)

    @property
    def _decay_rate(self):
        return self.weight_decay_rate

    def _bias_corrections(self, variable):
        """1 - beta_1^t and 1 - beta_2^t at this step's t (`stage_step`), made once per
        apply()."""
        dtype = keras.backend.standardize_dtype(variable.dtype)

        def make():
            t = ops.cast(self.stage_step(self.iterations), dtype)
            return (1.0 - ops.power(ops.cast(self.beta_1, dtype), t),
                    1.0 - ops.power(ops.cast(self.beta_2, dtype), t))

        return self._shared("powers", variable, make=make)

    def get_config(self):
        config = super().get_config()
        config.update({
            "beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon,
            "weight_decay_rate": self.weight_decay_rate,
            "exclude_from_weight_decay_patterns": list(self.exclude_from_weight_decay_patterns),
            "skip_adaptive": self.skip_adaptive, "stage_starts": list(self.stage_starts)})
        return config


def create_optimizer(
    learning_rate: float,
    num_train_steps: int,
    num_warmup_steps: float,
    weight_decay_rate: float = 0.01,
    lr_decay_power: float | None = None,
    adam_epsilon: float = 1e-6,
    clip_norm: float | None = 1.0,
    layerwise_lr_decay: float | None = None,
    n_layers: int | None = None,
    adam_bias_correction: bool = False,
    schedule_restarts: Sequence[int] = (),
    stage_rates: Sequence[Sequence[float]] = (),
    optimizer: str = "adamw",
    beta_1: float | None = None,
    beta_2: float | None = None,
    skip_adaptive: bool = True,
) -> ElectraAdamW | ElectraLamb:
    """The original's optimizer: AdamWeightDecayOptimizer + warmup/polynomial decay + clipping.

    Args (names as in configure_pretraining.py / configure_finetuning.py):
        learning_rate: peak learning rate.
        num_train_steps: steps over which the rate decays to 0.
        num_warmup_steps: linear warmup steps (0: none; a float is kept, as the
            original's max(num_train_steps * warmup_proportion, warmup_steps)).
        weight_decay_rate: decoupled weight decay; none on LayerNorm and bias.
        lr_decay_power: polynomial power; None: the optimizer's (1.0, linear, for
            AdamW; 0.5 for LAMB, NVIDIA's).
        adam_epsilon: Adam's epsilon.
        clip_norm: global-norm clipping threshold (None: no clipping).
        layerwise_lr_decay: fine-tuning's per-layer factor (None: off).
        n_layers: the encoder depth, needed with layerwise_lr_decay.
        adam_bias_correction: Keras' bias-corrected Adam step instead of the
            original's uncorrected one (False, the default).
        schedule_restarts: steps where the schedule starts again
            (PretrainingConfig.stage_starts: two-stage training's second stage,
            the second pre-training phase).
        stage_rates: (peak learning rate, warmup steps) of each restarted stage
            (default: learning_rate and num_warmup_steps again).
        optimizer: "adamw" (the original's) or "lamb" (NVIDIA's TF2 ELECTRA:
            ElectraLamb, with NVIDIA's warmup-then-decay schedule).
        beta_1, beta_2: None: the optimizer's (0.9/0.999 AdamW, 0.878/0.974 LAMB).
        skip_adaptive: LAMB: no trust ratio on LayerNorm and bias.
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    lamb = optimizer == "lamb"
    if lr_decay_power is None:
        lr_decay_power = LAMB_DECAY_POWER if lamb else 1.0
    schedule = WarmupPolynomialDecay(
        learning_rate, num_train_steps, num_warmup_steps, power=lr_decay_power,
        restarts=schedule_restarts, stage_rates=stage_rates, decay_after_warmup=lamb,
    )
    if lamb:
        if layerwise_lr_decay is not None:
            raise ValueError("layer-wise LR decay is not applied with LAMB (NVIDIA applies it "
                             "to Adam, for fine-tuning, only)")
        return ElectraLamb(
            learning_rate=schedule, beta_1=LAMB_BETA_1 if beta_1 is None else beta_1,
            beta_2=LAMB_BETA_2 if beta_2 is None else beta_2, epsilon=adam_epsilon,
            weight_decay_rate=weight_decay_rate, skip_adaptive=skip_adaptive,
            stage_starts=schedule_restarts, global_clipnorm=clip_norm)
    return ElectraAdamW(
        learning_rate=schedule,
        weight_decay=weight_decay_rate,
        beta_1=ADAM_BETA_1 if beta_1 is None else beta_1,
        beta_2=ADAM_BETA_2 if beta_2 is None else beta_2,
        epsilon=adam_epsilon,
        global_clipnorm=clip_norm,
        layerwise_lr_decay=layerwise_lr_decay,
        n_layers=n_layers,
        bias_correction=adam_bias_correction,
    )


def build_optimizer(variables, learning_rate: float, num_train_steps: int,
                    num_warmup_steps: float, **kwargs) -> ElectraAdamW | ElectraLamb:
    """A training loop's optimizer (AdamW, or LAMB with optimizer="lamb"), built for
    `variables`, clipping left to the loop.

    Both backends clip the global norm of the summed gradient themselves
    (after the all-reduce), so the optimizer does not clip. The slots are
    created here, before any checkpoint restore: restoring into an unbuilt
    optimizer loses them (docs/reference.md).

    Args:
      variables: the variables it will update.
      learning_rate, num_train_steps, num_warmup_steps, **kwargs: as
        `create_optimizer`.
    """
    optimizer = create_optimizer(learning_rate, num_train_steps, num_warmup_steps,
                                 clip_norm=None, **kwargs)
    optimizer.gradients_already_reduced = True  # the loop's all-reduce did it
    optimizer.build(variables)
    return optimizer


def pretraining_optimizer(config, variables) -> ElectraAdamW | ElectraLamb:
    """The pre-training optimizer of a PretrainingConfig (what its checkpoints hold):
    AdamW or LAMB (`optimizer`), its schedule restarting at each stage
    (two-stage training's second stage, the second phase with its own rates)."""
    return build_optimizer(
        variables, config.learning_rate, config.num_train_steps, config.num_warmup_steps,
        weight_decay_rate=config.weight_decay_rate,
        lr_decay_power=config.resolved_lr_decay_power,
        adam_epsilon=config.adam_epsilon,
        adam_bias_correction=config.resolved_adam_bias_correction,
        schedule_restarts=config.stage_starts, stage_rates=config.stage_rates,
        optimizer=config.optimizer, beta_1=config.opt_beta_1, beta_2=config.opt_beta_2,
        skip_adaptive=config.skip_adaptive)
