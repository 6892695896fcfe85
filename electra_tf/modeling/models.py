"""The generator and discriminator models and the weight-sharing factory.

Both models take the data pipeline's dict of int tensors [batch_size,
seq_length] ("input_ids", "input_mask", "segment_ids"; the generator also
"masked_lm_positions" [batch_size, num_predictions]) and return dicts of
tensors. They compute no loss: losses live in `electra_tf.objectives`.

Weight sharing (paper section 3.2; `PretrainingEncoders.sharing`, which a
`PretrainingConfig` derives from its flags):
- "embeddings" (the default): G's encoder reuses D's `embeddings` layer
  (token, position and type tables and the embedding LayerNorm). G embeds at
  D's embedding size and projects to its own width with its own
  `embeddings_project`.
- "none": nothing is shared. `untied_generator_embeddings=True`: G embeds at
  its own width. Two-stage training: G has embedding tables of its own at D's
  embedding size, so that D can start from all of G's weights while G stays
  frozen (a shared table would keep training through D).
- "encoder": G runs D's whole encoder object and adds only its MLM head
  (`untied_generator=False`, equal sizes; and BERT, objective `bert_mlm`,
  whatever the generator sizes: the original builds BERT's transformer at D's
  full size, in D's scope, with the generator's MLM head
  (`generator_predictions`)).
- "disentangled" (`gradient_disentangled_embeddings=True`, GDES, DeBERTa-v3;
  not in the original): G owns the tables (at D's embedding size); D embeds
  with stop_gradient(G's tables) + residual tables of its own that start at
  zero, and has its own LayerNorm. The MLM loss alone trains G's tables, the
  discriminator's loss only the residuals; the kept discriminator holds the
  sums (`merged_discriminator`).
- "uniform" (`uniform_generator`): there is no generator network:
  `UniformGenerator` returns constant zero logits, as the original's (nothing
  to build or train; D owns the embeddings).
In every mode the MLM head's output weights are G's input word embeddings.
With `two_tower` (objective electric) G is Electric's two-tower cloze model
(modeling/electric.py), sharing "embeddings" or "none".
With `baseline_head` (`training_algorithm="adversarial"`) G also carries the
learned REINFORCE baseline (`generator_baseline`, paper Appendix F).
"""

from __future__ import annotations

import contextlib

import keras
from keras import ops

from electra_tf.core.config import EncoderConfig, PretrainingEncoders
from electra_tf.modeling.electric import TwoTowerClozeGenerator
from electra_tf.modeling.encoder import (
    CheckedInputs,
    ElectraEncoder,
    EncoderConfigSerializable,
    embeddings_for,
)
from electra_tf.modeling.heads import DiscriminatorHead, MaskedLMHead, gather_positions
from electra_tf.modeling.layers import ElectraEmbeddings, kernel_initializer
from electra_tf.modeling.random import (
    DISCRIMINATOR_DROPOUT_SALT,
    GENERATOR_DROPOUT_SALT,
    fold_seed,
)

# The discriminator's head kinds (an objective's `head_kind`): replaced-token
# detection (ELECTRA), MLM at the masked positions (Replace-MLM) and MLM at
# every position with the copy gate (All-Tokens MLM).
RTD_HEAD = "rtd"
MLM_HEAD = "mlm"
MLM_ALL_COPY_HEAD = "mlm_all_copy"
DISCRIMINATOR_HEADS = (RTD_HEAD, MLM_HEAD, MLM_ALL_COPY_HEAD)


def _config_from(config) -> EncoderConfig:
    return EncoderConfig.from_dict(config) if isinstance(config, dict) else config


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraGenerator(EncoderConfigSerializable, keras.Model):
    """The generator: an encoder and a masked-LM head (original `generator`).

    Args:
        config: G's `EncoderConfig` (ignored in favour of `encoder.config`
            when `encoder` is given).
        encoder: optional encoder to run instead of a new one (all weights
            tied with D, `untied_generator=False`).
        embeddings: optional `ElectraEmbeddings` for a new encoder to share
            (tied embeddings, the default).
        baseline_head: add the learned REINFORCE baseline of adversarial
            training (paper Appendix F): a dense(1) on G's hidden states at
            the masked positions, b = -log sigmoid(baseline_logits).

    Call args:
        inputs: dict with "input_ids", "input_mask", "segment_ids" [B, L] and
            "masked_lm_positions" [B, N] int tensors.
        training: bool; enables dropout.
        seed: optional int tensor [2] for stateless dropout (see `ElectraEncoder`).

    Returns (call):
        dict with "mlm_logits" float32 [B, N, vocab_size] and
        "sequence_output" [B, L, hidden_size]; with the baseline head also
        "baseline_logits" float32 [B, N].
    """

    def __init__(self, config: EncoderConfig | dict, encoder: ElectraEncoder | None = None,
                 embeddings: ElectraEmbeddings | None = None, baseline_head: bool = False,
                 **kwargs):
        kwargs.setdefault("name", "generator")
        super().__init__(**kwargs)
        if encoder is not None and embeddings is not None:
            raise ValueError("pass either a whole encoder or embeddings to share, not both")
        self.config = encoder.config if encoder is not None else _config_from(config)

        # === Layers ===
        self.encoder = encoder or ElectraEncoder(self.config, embeddings=embeddings,
                                                 dtype=self.dtype_policy, name="encoder")
        # The head's activation is hidden_act, as the original's; a model imported
        # from transformers records GELU here (its generator head always is).
        self.mlm_head = MaskedLMHead(
            self.encoder.embeddings.word_embeddings,
            self.config.generator_head_act or self.config.hidden_act,
            self.config.initializer_range, self.config.layer_norm_eps,
            dtype=self.dtype_policy, name="generator_predictions")
        self.baseline_head = None
        if baseline_head:
            self.baseline_head = keras.layers.Dense(
                1, kernel_initializer=kernel_initializer(self.config.initializer_range),
                dtype="float32", name="generator_baseline")

    def build(self, input_shape=None):
        if not self.encoder.built:
            self.encoder.build(None)
        self.mlm_head.build((None, None, self.config.hidden_size), (None, None))
        if self.baseline_head is not None:
            self.baseline_head.build((None, None, self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=False, seed=None):
        if seed is not None:
            seed = fold_seed(seed, GENERATOR_DROPOUT_SALT)
        outputs = self.encoder(inputs, training=training, seed=seed)
        sequence_output = outputs["sequence_output"]
        result = {
            "mlm_logits": self.mlm_head(sequence_output, inputs["masked_lm_positions"]),
            "sequence_output": sequence_output,
        }
        if self.baseline_head is not None:
            at_slots = gather_positions(sequence_output, inputs["masked_lm_positions"])
            result["baseline_logits"] = ops.squeeze(
                self.baseline_head(ops.cast(at_slots, "float32")), -1)
        return result

    def get_config(self):
        config = super().get_config()
        config["baseline_head"] = self.baseline_head is not None
        return config


@keras.saving.register_keras_serializable(package="electra_tf")
class UniformGenerator(EncoderConfigSerializable, keras.Model):
    """The uniform_generator ablation: no network, constant zero logits.

    As the original's `_get_masked_lm_output` with uniform_generator: logits
    are zeros [B, N, vocab_size], so samples are uniform over the vocabulary
    and the MLM loss is the constant log(vocab_size) (no gradient). It has no
    variables: nothing is trained, nor reaches D's embeddings.

    Args:
        config: an `EncoderConfig` (only vocab_size is used; D's).
    """

    def __init__(self, config: EncoderConfig | dict, **kwargs):
        kwargs.setdefault("name", "generator")
        super().__init__(**kwargs)
        self.config = _config_from(config)

    def build(self, input_shape=None):
        self.built = True

    def call(self, inputs, training=False, seed=None):
        positions = inputs["masked_lm_positions"]
        batch, n = ops.shape(positions)[0], ops.shape(positions)[1]
        return {"mlm_logits": ops.zeros((batch, n, self.config.vocab_size), "float32")}


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraDiscriminator(CheckedInputs, EncoderConfigSerializable, keras.Model):
    """The discriminator: an encoder and the RTD head (original `electra`).

    For the paper's Replace-MLM and All-Tokens-MLM ablations the main model
    carries an MLM head instead (`head_kind="mlm"`: at the masked positions;
    `"mlm_all_copy"`: at every position, plus the copy mechanism's gate).

    Args:
        config: D's `EncoderConfig`.
        head_kind: "rtd" (ELECTRA), "mlm" or "mlm_all_copy".
        embeddings: optional `ElectraEmbeddings` for the encoder (during
            pre-training with gradient-disentangled sharing: residuals over
            the generator's tables).

    Call args:
        inputs: dict with "input_ids", "input_mask", "segment_ids" [B, L]
            (and "masked_lm_positions" [B, N] for head_kind "mlm").
        training: bool; enables dropout.
        seed: optional int tensor [2] for stateless dropout.

    Returns (call):
        dict with "sequence_output" [B, L, hidden_size], "pooled_output"
        [B, hidden_size] and, by head: "rtd_logits" float32 [B, L] (> 0:
        replaced); "mlm_logits" float32 [B, N, V] or [B, L, V]; "copy_logits"
        float32 [B, L].
    """

    def __init__(self, config: EncoderConfig | dict, head_kind: str = RTD_HEAD,
                 embeddings: ElectraEmbeddings | None = None, **kwargs):
        kwargs.setdefault("name", "discriminator")
        super().__init__(**kwargs)
        self.config = _config_from(config)
        if head_kind not in DISCRIMINATOR_HEADS:
            raise ValueError(f"head_kind must be one of {DISCRIMINATOR_HEADS}, got {head_kind!r}")
        self.head_kind = head_kind

        # === Layers ===
        self.encoder = ElectraEncoder(self.config, embeddings=embeddings,
                                      dtype=self.dtype_policy, name="encoder")
        if head_kind == RTD_HEAD:
            self.rtd_head = DiscriminatorHead(
                self.config.hidden_size, self.config.hidden_act, self.config.initializer_range,
                dtype=self.dtype_policy, name="discriminator_predictions")
        else:
            self.mlm_head = MaskedLMHead(
                self.encoder.embeddings.word_embeddings, self.config.hidden_act,
                self.config.initializer_range, self.config.layer_norm_eps,
                dtype=self.dtype_policy, name="discriminator_mlm_predictions")
        if head_kind == MLM_ALL_COPY_HEAD:
            self.copy_head = keras.layers.Dense(
                1, kernel_initializer=kernel_initializer(self.config.initializer_range),
                dtype="float32", name="copy_gate")

    def build(self, input_shape=None):
        self.encoder.build(None)
        hidden = self.config.hidden_size
        if self.head_kind == RTD_HEAD:
            self.rtd_head.build((None, None, hidden))
        else:
            self.mlm_head.build((None, None, hidden), (None, None))
        if self.head_kind == MLM_ALL_COPY_HEAD:
            self.copy_head.build((None, None, hidden))
        self.built = True

    def call(self, inputs, training=False, seed=None):
        if seed is not None:
            seed = fold_seed(seed, DISCRIMINATOR_DROPOUT_SALT)
        outputs = self.encoder(inputs, training=training, seed=seed)
        sequence = outputs["sequence_output"]
        result = {"sequence_output": sequence, "pooled_output": outputs["pooled_output"]}
        if self.head_kind == RTD_HEAD:
            result["rtd_logits"] = self.rtd_head(sequence)
        elif self.head_kind == MLM_HEAD:
            result["mlm_logits"] = self.mlm_head(sequence, inputs["masked_lm_positions"])
        else:
            batch, length = ops.shape(inputs["input_ids"])[0], ops.shape(inputs["input_ids"])[1]
            every = ops.broadcast_to(ops.arange(length, dtype="int32")[None], (batch, length))
            result["mlm_logits"] = self.mlm_head(sequence, every)
            result["copy_logits"] = ops.squeeze(self.copy_head(sequence), -1)
        return result


# === Factories ===
@contextlib.contextmanager
def dtype_policy_scope(policy: str = "float32"):
    """Keras' global dtype policy `policy` for the models built inside, restored after.
    A served model is built in float32 (its bf16 is the export's kernels) whatever
    policy a training run in this process left set (a notebook that fine-tuned with
    mixed_precision=bf16 had served, and exported, bfloat16 computations)."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def build_discriminator(encoder_config: EncoderConfig,
                        head_kind: str = RTD_HEAD) -> ElectraDiscriminator:
    """A built discriminator (variables exist on return), e.g. for fine-tuning."""
    discriminator = ElectraDiscriminator(encoder_config, head_kind=head_kind)
    discriminator.build()
    return discriminator


def merged_discriminator(discriminator: ElectraDiscriminator) -> ElectraDiscriminator:
    """A plain discriminator equal to one with gradient-disentangled embeddings.

    Its tables are the shared + residual sums; every other weight is copied.
    """
    merged = ElectraDiscriminator(discriminator.config, head_kind=discriminator.head_kind)
    merged.build()
    # Same paths (D's residual tables are the merged tables' paths; G's are generator/...).
    source = {v.path: v for v in discriminator.weights}
    for variable in merged.weights:
        if variable.path not in source:
            raise RuntimeError(f"merged discriminator: no source for {variable.path}")
        variable.assign(source[variable.path])
    tables = discriminator.encoder.embeddings.merged_tables()
    for name in ElectraEmbeddings.TABLES:
        getattr(merged.encoder.embeddings, name).embeddings.assign(tables[name])
    return merged


def build_pretraining_models(
        encoders: PretrainingEncoders, head_kind: str = RTD_HEAD,
) -> tuple[ElectraGenerator | UniformGenerator, ElectraDiscriminator]:
    """Builds G and D with the weight sharing that `encoders` asks for.

    D is built first, so that shared variables carry D's paths
    (`discriminator/encoder/embeddings/...`). Both models are built on return.

    Args:
        encoders: G's and D's EncoderConfigs, their sharing and the baseline
            head (a PretrainingConfig's `encoders`).
        head_kind: the discriminator's head (see ElectraDiscriminator).

    Returns:
        (generator, discriminator).
    """
    g_config, d_config = encoders.generator, encoders.discriminator
    sharing, baseline = encoders.sharing, encoders.baseline_head
    if encoders.two_tower:
        # Electric (modeling/electric.py): sharing "embeddings" or "none" (config checks).
        discriminator = build_discriminator(d_config, head_kind)
        shared = discriminator.encoder.embeddings if sharing == "embeddings" else None
        generator = TwoTowerClozeGenerator(g_config, embeddings=shared)
        generator.build()
        return generator, discriminator
    if sharing == "disentangled":
        # G first: it owns the tables (generator/encoder/embeddings/...), and D's
        # residuals take D's paths (discriminator/encoder/embeddings/...).
        generator = ElectraGenerator(g_config, baseline_head=baseline)
        generator.build()
        residuals = embeddings_for(d_config, residual_of=generator.encoder.embeddings)
        discriminator = ElectraDiscriminator(d_config, head_kind=head_kind, embeddings=residuals)
        discriminator.build()
        return generator, discriminator
    discriminator = build_discriminator(d_config, head_kind)
    if sharing == "uniform":
        generator = UniformGenerator(discriminator.config)
    elif sharing == "encoder":
        generator = ElectraGenerator(None, encoder=discriminator.encoder, baseline_head=baseline)
    elif sharing == "none":
        generator = ElectraGenerator(g_config, baseline_head=baseline)
    else:
        generator = ElectraGenerator(g_config, embeddings=discriminator.encoder.embeddings,
                                     baseline_head=baseline)
    generator.build()
    return generator, discriminator
