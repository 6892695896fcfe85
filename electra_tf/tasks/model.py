"""Fine-tuning models: the pre-trained discriminator's encoder plus a task head.

The head is one of the head classes (tasks/heads/: what the model serves,
its layers, loss, record, serving outputs and foreign names), chosen by the
name a task's `head` gives (and its folder records). Its variables sit under
`task_specific/`, so layer-wise learning-rate decay puts them at depth n + 2
(the original's key for heads).
"""

from __future__ import annotations

import dataclasses

import keras

from electra_tf.core.config import EncoderConfig
from electra_tf.modeling.encoder import CheckedInputs, ElectraEncoder
from electra_tf.modeling.random import FINETUNING_ENCODER_SALT, FINETUNING_HEAD_SALT, fold_seed
from electra_tf.tasks import heads


def build_head(kind: str, num_labels: int, hidden_size: int, config=None,
               dropout_prob: float = 0.1, initializer_range: float = 0.02,
               hidden_act: str = "gelu", dtype=None, **options):
    """The head layer of `kind` (a name of tasks/heads' registry).

    Args:
      config: the head class's Config; or, without one, `options` make it
        (`Head.make_config`: regression, answerable, span_head, beam_size,
        classifier_head, each refused by a head that does not take it).
      num_labels: classes or tags (the heads that predict no named label ignore it).
    Raises:
      ValueError: an unknown kind, or options the head does not take.
    """
    cls = heads.head_class(kind)
    if config is None:
        config = cls.make_config(**options)
    elif options:
        raise ValueError(f"build_head takes a config or options, not both ({sorted(options)})")
    return cls(config, num_labels, hidden_size, dropout_prob=dropout_prob,
               initializer_range=initializer_range, hidden_act=hidden_act, dtype=dtype)


def output_layout(model, excluded=("sequence_output", "pooled_output")) -> dict:
    """{name: (dtype, rank, whether axis 1 is the position axis)} of `model`'s outputs
    but `excluded`, from the output specs of symbolic inputs of two lengths: an axis
    that follows the length is the position axis. (Inputs of unknown length had
    crashed under JAX, whose unknown dimension is a symbol that the joint span head's
    min(beam_size, length) cannot compare.) The lengths exceed the fewest positions
    the head takes (the beam's width), so that no other axis follows them."""
    head = getattr(model, "head", None)
    shortest = head.min_positions() + 1 if hasattr(head, "min_positions") else 2
    specs = [model.compute_output_spec(
        {k: keras.KerasTensor((1, length), dtype="int32")
         for k in ("input_ids", "input_mask", "segment_ids")}, training=False)
        for length in (shortest, shortest + 1)]
    return {k: (v.dtype, len(v.shape), len(v.shape) >= 2 and v.shape[1] == shortest
                and specs[1][k].shape[1] == shortest + 1)
            for k, v in specs[0].items() if k not in excluded}


@keras.saving.register_keras_serializable(package="electra_tf")
class FinetuningModel(CheckedInputs, keras.Model):
    """Encoder + head. call(inputs, training, seed) -> the head's dict.

    Args:
      encoder: a (pre-trained) ElectraEncoder, e.g. `discriminator.encoder`.
      kind: the head's name (the task's `head`); num_labels, config, **options: see
        build_head (a folder's recorded options, or the task's `head_config`).

    A head may read training targets from the inputs (the joint span head:
    inputs["start_positions"]).
    """

    def __init__(self, encoder: ElectraEncoder, kind: str, num_labels: int = 1, config=None,
                 **options):
        name = options.pop("name", "finetuning_model")
        super().__init__(name=name, dtype=options.pop("dtype", None))
        self.encoder = encoder
        encoder_config: EncoderConfig = encoder.config
        self.head = build_head(kind, num_labels, encoder_config.hidden_size, config=config,
                               dropout_prob=encoder_config.hidden_dropout_prob,
                               initializer_range=encoder_config.initializer_range,
                               hidden_act=encoder_config.hidden_act, dtype=self.dtype_policy,
                               **options)

    def build(self, input_shape=None):
        if not self.encoder.built:
            self.encoder.build(None)
        self.head.build((None, None, self.encoder.config.hidden_size))
        self.built = True

    def get_config(self):
        """The encoder's config, the head's kind, outputs and options: what `model.save`
        (.keras), `from_config` and `keras.models.clone_model` rebuild it from (Keras had
        refused each: the encoder argument is not serialisable by itself)."""
        return {"name": self.name, "trainable": self.trainable,
                "encoder": keras.saving.serialize_keras_object(self.encoder),
                "dtype": keras.saving.serialize_keras_object(self.dtype_policy),
                "kind": self.head.kind, "num_labels": self.head.num_labels,
                "options": dataclasses.asdict(self.head.head_config)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        encoder = keras.saving.deserialize_keras_object(config.pop("encoder"))
        trainable = config.pop("trainable", True)
        dtype = config.pop("dtype", None)
        model = cls(encoder, config.pop("kind"), config.pop("num_labels"),
                    name=config.pop("name", "finetuning_model"),
                    dtype=None if dtype is None else keras.saving.deserialize_keras_object(dtype),
                    **config.pop("options", {}))
        if not trainable:  # setting True would unfreeze a frozen encoder (Keras' setter)
            model.trainable = False
        return model

    def call(self, inputs, training=False, seed=None):
        outputs = self.encoder(
            inputs, training=training,
            seed=None if seed is None else fold_seed(seed, FINETUNING_ENCODER_SALT))
        return self.head(outputs["sequence_output"], inputs["input_mask"],
                         inputs.get("segment_ids"), training=training,
                         seed=None if seed is None else fold_seed(seed, FINETUNING_HEAD_SALT),
                         start_positions=inputs.get("start_positions"))
