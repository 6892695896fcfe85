"""Training FLOPs of a pre-training run, counted as the original counts them.

A port of google-research/electra's `flops_computation.py` (the paper's
compute axis, Figure 1 and Tables 1, 8): `TransformerHparams` and
`get_electra_train_flops` keep its names, formulas and constants, and
`MODEL_FLOPS` its table. Its assumptions (quoted from it):

- an "operation" is a mathematical operation, not a machine instruction: an
  exp counts one, like an add; a matrix multiply counts 2*m*n;
- the backward pass takes the same FLOPs as the forward pass (so training is
  2 x forward);
- embedding lookups are "dense" (a multiplication by a one-hot vector);
- dropout 4, LayerNorm 5, GELU 8, softmax 5 FLOPs per activation;
- the output softmax runs on `output_frac` = 0.15625 of the tokens (its
  default for every model it lists), not the run's own
  max_predictions_per_seq / max_seq_length (19/128 = 0.148 at Small, which
  would count 0.2% fewer FLOPs).

`pretraining_flops(config)` maps a `PretrainingConfig` onto that model for
every objective and training algorithm (`OBJECTIVE_FLOPS`, below): per
sequence, the training FLOPs of each network and head the step runs, then
per step (x train_batch_size, the global batch of one optimizer step) and
for the run (x num_train_steps). Two-stage training has two phases of
different cost.

A new objective adds one function to `OBJECTIVE_FLOPS`: (config, output_frac)
-> {part: training FLOPs per sequence}, built from `TransformerHparams`
(`encoder_hparams` turns an EncoderConfig into one);
tests/objectives/test_flops.py checks that every name in
`config.OBJECTIVES` has one. A run whose phases differ in sequence length or
batch gives each its own `FlopsPhase` (steps, parts, batch_size), counted
from a config of that phase's length and batch.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Callable

from electra_tf.core.config import EncoderConfig, PretrainingConfig

# === The original's constants and counts (flops_computation.py) ===
# random number, >=, multiply activations by dropout mask, multiply activations
# by correction (1 / (1 - dropout_rate))
DROPOUT_FLOPS = 4
# compute mean activation (sum), compute variance of activation (square and sum),
# bias (add), scale (multiply)
LAYER_NORM_FLOPS = 5
# GELU: 0.5 * x * (1 + tanh(sqrt(2 / np.pi) * (x + 0.044715 * pow(x, 3))))
ACTIVATION_FLOPS = 8
# max/subtract (for stability), exp, sum, divide
SOFTMAX_FLOPS = 5
# the original's share of tokens that go through an output softmax
ORIGINAL_OUTPUT_FRAC = 0.15625


class TransformerHparams:
    """Computes the train/inference FLOPs for transformers (the original's class).

    Args:
      h: hidden size. l: layers. s: sequence length. v: vocab size.
      e: embedding size (None: h). i: intermediate size (None: 4h).
      heads: attention heads (None: max(h // 64, 1)). head_size: with heads,
        the attention projections' size (None: h).
      output_frac: share of the tokens through an output softmax.
      sparse_embed_lookup: count input lookups as free (the original: dense).
      decoder: a decoder block (extra attention over the encoder's states).
    """

    def __init__(self, h, l, s=512, v=30522, e=None, i=None, heads=None,  # noqa: E741
                 head_size=None, output_frac=ORIGINAL_OUTPUT_FRAC,
                 sparse_embed_lookup=False, decoder=False):
        self.h = h
        self.l = l  # noqa: E741
        self.s = s
        self.v = v
        self.e = h if e is None else e
        self.i = h * 4 if i is None else i
        self.kqv = h if head_size is None else head_size * heads
        self.heads = max(h // 64, 1) if heads is None else heads
        self.output_frac = output_frac
        self.sparse_embed_lookup = sparse_embed_lookup
        self.decoder = decoder

    def get_block_flops(self):
        """The forward-pass FLOPs of one transformer block, for the whole sequence."""
        attn_mul = 2 if self.decoder else 1
        block_flops = dict(
            kqv=3 * 2 * self.h * self.kqv * attn_mul,
            kqv_bias=3 * self.kqv * attn_mul,
            attention_scores=2 * self.kqv * self.s * attn_mul,
            attn_softmax=SOFTMAX_FLOPS * self.s * self.heads * attn_mul,
            attention_dropout=DROPOUT_FLOPS * self.s * self.heads * attn_mul,
            attention_scale=self.s * self.heads * attn_mul,
            attention_weighted_avg_values=2 * self.h * self.s * attn_mul,
            attn_output=2 * self.h * self.h * attn_mul,
            attn_output_bias=self.h * attn_mul,
            attn_output_dropout=DROPOUT_FLOPS * self.h * attn_mul,
            attn_output_residual=self.h * attn_mul,
            # The original's term, without a factor of h (unlike the block's other
            # LayerNorm): kept so that the totals are the paper's (0.05% low at Small).
            attn_output_layer_norm=LAYER_NORM_FLOPS * attn_mul,
            intermediate=2 * self.h * self.i,
            intermediate_act=ACTIVATION_FLOPS * self.i,
            intermediate_bias=self.i,
            output=2 * self.h * self.i,
            output_bias=self.h,
            output_dropout=DROPOUT_FLOPS * self.h,
            output_residual=self.h,
            output_layer_norm=LAYER_NORM_FLOPS * self.h,
        )
        return sum(block_flops.values()) * self.s

    def get_embedding_flops(self, output=False):
        """The forward-pass FLOPs of the inputs' embedding, or of the output softmax."""
        embedding_flops = {}
        if output or (not self.sparse_embed_lookup):
            embedding_flops["main_multiply"] = 2 * self.e * self.v
        if not output:  # input embedding post-processing
            embedding_flops.update(dict(
                tok_type_and_position=2 * self.e * (self.s + 2),
                add_tok_type_and_position=2 * self.e,
                emb_layer_norm=LAYER_NORM_FLOPS * self.e,
                emb_dropout=DROPOUT_FLOPS * self.e,
            ))
        if self.e != self.h or output:  # projection layer if e != h
            embedding_flops.update(dict(
                hidden_kernel=2 * self.h * self.e,
                hidden_bias=self.e if output else self.h,
            ))
            if output:  # extra hidden layer and output softmax
                embedding_flops.update(dict(
                    hidden_activation=ACTIVATION_FLOPS * self.e,
                    hidden_layernorm=LAYER_NORM_FLOPS * self.e,
                    output_softmax=SOFTMAX_FLOPS * self.v,
                    output_target_word=2 * self.v,
                ))
                return self.output_frac * sum(embedding_flops.values()) * self.s
        return sum(embedding_flops.values()) * self.s

    def get_binary_classification_flops(self):
        """Forward FLOPs of a per-token binary head (ELECTRA's discriminator head)."""
        classification_flops = dict(
            hidden=2 * self.h * self.h,
            hidden_bias=self.h,
            hidden_act=ACTIVATION_FLOPS * self.h,
            logits=2 * self.h,
        )
        return sum(classification_flops.values()) * self.s

    def get_train_flops(self, batch_size, train_steps, discriminator=False):
        """The FLOPs of pre-training the transformer (2 x: forward and backward)."""
        return 2 * batch_size * train_steps * (
            (self.l * self.get_block_flops())
            + self.get_embedding_flops(output=False)
            + (self.get_binary_classification_flops() if discriminator
               else self.get_embedding_flops(output=True)))

    def get_infer_flops(self):
        """The FLOPs of running the transformer on a classification task."""
        return ((self.l * self.get_block_flops())
                + self.get_embedding_flops(output=False)
                + self.get_binary_classification_flops())


def get_electra_train_flops(h_d, l_d, h_g, l_g, batch_size, train_steps, tied_embeddings,
                            e=None, s=512, output_frac=ORIGINAL_OUTPUT_FRAC):
    """The FLOPs of pre-training ELECTRA (the original's function)."""
    if e is None:
        e = h_d
    disc = TransformerHparams(h_d, l_d, s=s, e=e, output_frac=output_frac).get_train_flops(
        batch_size, train_steps, True)
    gen = TransformerHparams(h_g, l_g, s=s, e=e if tied_embeddings else None,
                             output_frac=output_frac).get_train_flops(batch_size, train_steps)
    return disc + gen


# The original's table (flops_computation.py's MODEL_FLOPS): total training FLOPs.
MODEL_FLOPS = collections.OrderedDict([
    # computed with TensorFlow's FLOPs counting in the original, not the script
    ("elmo", 2 * 10 * 768648884 * 568093262680 / (20.0 * 128)),
    ("xlnet", 2 * 500000 * 8192 * 15064773691518 / 32.0),
    ("gpt", TransformerHparams(768, 12, v=40000, output_frac=1.0).get_train_flops(128, 960800)),
    ("bert_small", TransformerHparams(256, 12, e=128, s=128).get_train_flops(128, 1.45e6)),
    ("bert_base", TransformerHparams(768, 12).get_train_flops(256, 1e6)),
    ("bert_large", TransformerHparams(1024, 24).get_train_flops(256, 1e6)),
    ("electra_small", get_electra_train_flops(256, 12, 64, 12, 128, 1e6, True, s=128, e=128)),
    ("electra_base", get_electra_train_flops(768, 12, 256, 12, 256, 766000, True)),
    ("electra_400k", get_electra_train_flops(1024, 24, 256, 24, 2048, 400000, True)),
    ("electra_1.75M", get_electra_train_flops(1024, 24, 256, 24, 2048, 1750000, True)),
    ("roberta", TransformerHparams(1024, 24, v=50265).get_train_flops(8000, 500000)),
    ("albert", TransformerHparams(4096, 12, v=30000, e=128).get_train_flops(4096, 1.5e6)),
    ("t5_11b", TransformerHparams(1024, 24, v=32000, i=65536, heads=128, head_size=128,
                                  output_frac=0.0).get_train_flops(2048, 1e6)
     + TransformerHparams(1024, 24, v=32000, i=65536, heads=128, head_size=128,
                          output_frac=1.0, decoder=True).get_train_flops(2048, 1e6)),
])


# === A PretrainingConfig in the original's terms ===
def encoder_hparams(encoder: EncoderConfig, seq_len: int,
                    output_frac: float = ORIGINAL_OUTPUT_FRAC) -> TransformerHparams:
    """The TransformerHparams of one of the run's encoders (its own sizes and heads)."""
    return TransformerHparams(
        encoder.hidden_size, encoder.num_hidden_layers, s=seq_len, v=encoder.vocab_size,
        e=encoder.resolved_embedding_size, i=encoder.intermediate_size,
        heads=encoder.num_attention_heads, output_frac=output_frac)


def _train(forward: float) -> float:
    return 2 * forward  # the backward pass costs the forward pass's FLOPs


def _encoder(t: TransformerHparams) -> float:
    """Training FLOPs per sequence of the embeddings and the blocks, without a head."""
    return _train(t.l * t.get_block_flops() + t.get_embedding_flops(output=False))


def _token_gate(h: int, tokens: float) -> float:
    """Training FLOPs of a dense(h -> 1) + sigmoid at `tokens` positions per sequence."""
    return _train((2 * h + 1 + ACTIVATION_FLOPS) * tokens)


def _generator_parts(config: PretrainingConfig, output_frac: float) -> dict[str, float]:
    """G's encoder and MLM head (none with uniform_generator: no network); with
    adversarial training also its REINFORCE baseline head at the masked slots."""
    if config.uniform_generator:
        return {}
    g = encoder_hparams(config.generator_config(), config.max_seq_length, output_frac)
    parts = {"generator": _encoder(g),
             "generator_mlm_head": _train(g.get_embedding_flops(output=True))}
    if config.training_algorithm == "adversarial":
        parts["generator_baseline_head"] = _token_gate(g.h, output_frac * g.s)
    return parts


def _discriminator(config: PretrainingConfig, output_frac: float) -> TransformerHparams:
    return encoder_hparams(config.discriminator_config(), config.max_seq_length, output_frac)


def _discriminator_encoder(config: PretrainingConfig, d: TransformerHparams) -> dict:
    """D's encoder; with GDES also its residual embedding tables (dense lookups of
    their own, added to G's)."""
    parts = {"discriminator": _encoder(d)}
    if config.gradient_disentangled_embeddings:
        residual = 2 * d.e * d.v + 2 * d.e * (d.s + 2) + 3 * d.e  # lookups, then the sums
        parts["discriminator_residual_embeddings"] = _train(residual * d.s)
    return parts


def _electra(config: PretrainingConfig, output_frac: float) -> dict[str, float]:
    """G + D with the RTD head on every token (electra_15 scores fewer tokens, at
    the same cost: the head runs on all of them)."""
    d = _discriminator(config, output_frac)
    return {**_generator_parts(config, output_frac), **_discriminator_encoder(config, d),
            "discriminator_rtd_head": _train(d.get_binary_classification_flops())}


def _bert_mlm(config: PretrainingConfig, output_frac: float) -> dict[str, float]:
    """One encoder of D's size and its MLM head (the original's electra_objective=False)."""
    d = _discriminator(config, output_frac)
    return {"encoder": _encoder(d), "mlm_head": _train(d.get_embedding_flops(output=True))}


def _replace_mlm(config: PretrainingConfig, output_frac: float) -> dict[str, float]:
    """G, then the main model's MLM head at the masked positions."""
    d = _discriminator(config, output_frac)
    return {**_generator_parts(config, output_frac), "discriminator": _encoder(d),
            "discriminator_mlm_head": _train(d.get_embedding_flops(output=True))}


def _all_tokens_mlm(config: PretrainingConfig, output_frac: float) -> dict[str, float]:
    """G, then the main model's MLM head on every token and the copy gate."""
    d = _discriminator(config, 1.0)
    return {**_generator_parts(config, output_frac), "discriminator": _encoder(d),
            "discriminator_mlm_head": _train(d.get_embedding_flops(output=True)),
            "discriminator_copy_gate": _token_gate(d.h, d.s)}


def _electric(config: PretrainingConfig, output_frac: float) -> dict[str, float]:
    """Electric: D with its RTD head on every token, the two generator towers (each a
    full encoder: the causal masks save no FLOPs) and the cloze head on EVERY position
    (dense(2 H_G -> E) + LayerNorm + the E x V softmax; ELECTRA's MLM head runs on the
    masked share only). The log q lookup and the sampling are not counted."""
    d = _discriminator(config, output_frac)
    g = encoder_hparams(config.generator_config(), config.max_seq_length, output_frac)
    cloze = TransformerHparams(2 * g.h, g.l, s=g.s, v=g.v, e=g.e, output_frac=1.0)
    return {"generator_ltr": _encoder(g), "generator_rtl": _encoder(g),
            "cloze_predictions": _train(cloze.get_embedding_flops(output=True)),
            **_discriminator_encoder(config, d),
            "discriminator_rtd_head": _train(d.get_binary_classification_flops())}


# objective name -> (config, output_frac) -> {part: training FLOPs per sequence}
OBJECTIVE_FLOPS: dict[str, Callable[[PretrainingConfig, float], dict[str, float]]] = {
    "electra": _electra,
    "electra_15": _electra,
    "bert_mlm": _bert_mlm,
    "replace_mlm": _replace_mlm,
    "all_tokens_mlm": _all_tokens_mlm,
    "electric": _electric,
}


@dataclasses.dataclass(frozen=True)
class FlopsPhase:
    """A stretch of steps of one cost: `parts` are training FLOPs per sequence, and
    `batch_size` sequences make a step (a phase of its own sequence length or batch
    is a FlopsPhase of its own, counted from a config of that length and batch)."""

    name: str
    steps: int
    parts: dict
    batch_size: int

    @property
    def per_sequence(self) -> float:
        return float(sum(self.parts.values()))

    @property
    def per_step(self) -> float:
        return self.per_sequence * self.batch_size


# The paper's Table 1 counts inference FLOPs on one input of this many tokens.
TABLE1_SEQ_LENGTH = 128


def inference_flops(encoder: EncoderConfig, seq_len: int) -> float:
    """FLOPs of the kept model on one sequence of a classification task: its encoder
    and a binary classifier on every token (the original's get_infer_flops, which
    the paper's Table 1 reports at 128 tokens: ELECTRA-Small 3.7e9, Base 2.9e10)."""
    return encoder_hparams(encoder, seq_len).get_infer_flops()


@dataclasses.dataclass(frozen=True)
class PretrainingFlops:
    """The training FLOPs of a run: per step (each phase's) and in all; and the kept
    model's inference FLOPs per sequence at the length it ends training with and at
    the paper's Table 1 length (128)."""

    phases: tuple[FlopsPhase, ...]
    output_frac: float
    inference: dict = dataclasses.field(default_factory=dict)  # {seq length: FLOPs}

    @property
    def flops_per_step(self) -> float:
        """The mean over the run's steps (every step's, outside two-stage training)."""
        return self.total / max(1, sum(p.steps for p in self.phases))

    @property
    def total(self) -> float:
        return float(sum(p.per_step * p.steps for p in self.phases))

    def to_dict(self) -> dict:
        return {"flops_per_step": self.flops_per_step, "total_flops": self.total,
                "output_frac": self.output_frac,
                "counted_as": "google-research/electra flops_computation.py",
                "phases": [{"name": p.name, "steps": p.steps, "train_batch_size": p.batch_size,
                            "flops_per_step": p.per_step,
                            "flops_per_sequence": p.per_sequence, "parts": dict(p.parts)}
                           for p in self.phases],
                "inference_flops_per_sequence": {str(k): v for k, v in self.inference.items()}}

    def summary(self) -> str:
        """One console line: per step and for the whole run."""
        steps = sum(p.steps for p in self.phases)
        each = ", ".join(
            f"{p.per_step:.3e} per step" + (f" of {p.name} ({p.steps:,} steps of "
                                            f"{p.batch_size:,} sequences)"
                                            if len(self.phases) > 1 else
                                            f" ({p.batch_size:,} sequences)")
            for p in self.phases)
        infer = "".join(f"; inference {v:.3e} per sequence of {k}" for k, v in
                        sorted(self.inference.items()))
        return (f"training FLOPs: {each}, {self.total:.3e} for {steps:,} steps{infer} "
                "(counted as the original's flops_computation.py)")


def pretraining_flops(config: PretrainingConfig,
                      output_frac: float = ORIGINAL_OUTPUT_FRAC) -> PretrainingFlops:
    """The training FLOPs of a pre-training run of `config`.

    Args:
      config: the run's hyperparameters (objective, algorithm, sizes, L, batch, steps).
      output_frac: share of tokens through an MLM softmax; the original's 0.15625 by
        default (the All-Tokens MLM head runs on every token whatever it is).
    Returns:
      a PretrainingFlops: per step of each phase, and the total over num_train_steps.
    Raises:
      KeyError: an objective without an entry in OBJECTIVE_FLOPS.
    """
    parts = OBJECTIVE_FLOPS[config.objective](config, output_frac)
    n = config.num_train_steps
    if config.training_algorithm == "two_stage":
        # G alone by MLM, then D trained with G frozen: G runs forward only.
        gen = {k: v for k, v in parts.items() if k.startswith("generator")}
        frozen = {f"{k}_forward_only": v / 2 for k, v in gen.items()}
        disc = {k: v for k, v in parts.items() if not k.startswith("generator")}
        first = config.stage_starts[0]
        phases = (FlopsPhase("two_stage_generator", first, gen, config.train_batch_size),
                  FlopsPhase("two_stage_discriminator", n - first, {**frozen, **disc},
                             config.train_batch_size))
    elif config.phase2_steps:
        # NVIDIA's two phases: the last phase2_steps at phase 2's length and batch.
        second = dataclasses.replace(
            config, max_seq_length=config.phase2_max_seq_length,
            max_predictions_per_seq=config.phase2_max_predictions_per_seq,
            train_batch_size=config.resolved_phase2_train_batch_size,
            num_train_steps=n, phase2_steps=0, phase2_max_seq_length=0,
            phase2_train_batch_size=0, phase2_learning_rate=0.0, phase2_warmup_steps=0)
        phases = (FlopsPhase(f"{config.training_algorithm}_phase1", config.phase2_start, parts,
                             config.train_batch_size),
                  FlopsPhase(f"{config.training_algorithm}_phase2", config.phase2_steps,
                             OBJECTIVE_FLOPS[config.objective](second, output_frac),
                             second.train_batch_size))
    else:
        phases = (FlopsPhase(config.training_algorithm, n, parts, config.train_batch_size),)
    final_length = config.phase2_max_seq_length if config.phase2_steps else \
        config.max_seq_length
    inference = {length: inference_flops(config.discriminator_config(), length)
                 for length in sorted({TABLE1_SEQ_LENGTH, final_length})}
    return PretrainingFlops(phases, output_frac, inference)
