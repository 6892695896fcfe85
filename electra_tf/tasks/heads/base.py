"""The head contract: what one kind of head owns (tasks/heads/__init__.py lists them).

A head is a Keras layer on top of the encoder's sequence output, named
`task_specific` (so layer-wise learning-rate decay puts its variables at
depth n + 2, the original's key for heads), and the class of that layer
answers every question that depends on which head a model has:

  options    `Config`, a frozen dataclass checked at construction;
             `make_config(**options)` refuses another head's option by name;
             `config_for_task(task)`: the options a task trains with
  layers     `__init__(config, num_labels, hidden_size, ...)`, `build`, `call`:
             float32 logits (a dict), as tasks/model.py's FinetuningModel returns
  loss       `loss(config, outputs, labels, **task.loss_options)` summed over the batch and
             `loss_count(config, labels)` what it sums over (tasks/losses.py
             holds the pure functions); `learns_labels(config)`: whether its
             outputs are named classes or tags (learned from train when a task
             has none)
  folder     `record(config)` -> what finetuning_config.json records of it
             ("regression", "answerable", "head_options"), `record_lacks(value)`
             and `config_from_record(value)` read it back; `describe`,
             `continues(had, want)`: whether a fine-tuned head can go on training
  names      `original_variables()` {TF1 name: variable} (the original's
             `task_specific/...` scope), `hf_modules` {TF1 module: transformers
             module} and the transformers import/export hooks (`hf_*`); the
             original's fine-tuned checkpoints' names and defaults (`tf1_*`)
  serving    `ServingOptions` (what the export needs beyond the model:
             `serving_options(record, ...)`), `text_inputs(pair)`,
             `text_outputs`, `ids_outputs`, `model_fills`, `text_fills`, `min_length`,
             `pack_limit`, `export_info`: the serving code (serving/signatures.py)
             hands each head the decoders it needs (serving/graph.py) as `graph`

Class methods take the head's config, so that the loop, the export and the
converters call them without building the layer.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping

import keras

from electra_tf.modeling.layers import Dropout, kernel_initializer


@dataclasses.dataclass(frozen=True)
class HeadConfig:
    """A head's options (a head without options keeps this one)."""

    def head_options(self) -> dict:
        """What finetuning_config.json records under "head_options"."""
        return {}


@dataclasses.dataclass(frozen=True)
class ServingOptions:
    """What a head's export needs beyond the model and the tokenizer (none here)."""


class Head(keras.layers.Layer):
    """One kind of head (see the module docstring). Subclasses set `kind` (the name a
    folder records), `Config`, and override what differs."""

    kind: ClassVar[str]
    Config: ClassVar[type] = HeadConfig
    ServingOptions: ClassVar[type] = ServingOptions
    # transformers: the task model class, and {original module: transformers module}.
    hf_architecture: ClassVar[str | None] = None
    hf_modules: ClassVar[Mapping[str, str]] = {}
    # The model's per-position outputs past a row's length bucket (serving).
    model_fills: ClassVar[Mapping[str, float]] = {}
    # The text signature's per-position outputs past a row's tokens (serving; the
    # Python API cuts them off there).
    text_fills: ClassVar[Mapping[str, object]] = {}

    def __init__(self, config, num_labels: int, hidden_size: int, dropout_prob: float = 0.1,
                 initializer_range: float = 0.02, hidden_act: str = "gelu", **kwargs):
        kwargs.setdefault("name", "task_specific")
        super().__init__(**kwargs)
        if not isinstance(config, self.Config):
            raise TypeError(f"{type(self).__name__} takes a {self.Config.__name__}, got "
                            f"{type(config).__name__}")
        self.head_config = config
        # One initializer for the head's own dense layers, made before the dropout layer, as
        # the heads were built before they were classes (the same initial weights).
        self._init = kernel_initializer(initializer_range)
        self.num_labels, self.hidden_size, self.dropout_prob = num_labels, hidden_size, dropout_prob
        self.initializer_range, self.hidden_act = initializer_range, hidden_act
        self.dropout = Dropout(dropout_prob, name="dropout")

    def dense(self, units: int, name: str, float32: bool = True, fresh: bool = False):
        """A dense layer of this head (float32 logits; the hidden layers in the policy),
        its kernel from the head's initializer (`fresh`: a new one)."""
        init = kernel_initializer(self.initializer_range) if fresh else self._init
        return keras.layers.Dense(units, kernel_initializer=init,
                                  dtype="float32" if float32 else self.dtype_policy, name=name)

    def get_config(self):
        config = super().get_config()
        config.update(num_labels=self.num_labels, hidden_size=self.hidden_size,
                      dropout_prob=self.dropout_prob, initializer_range=self.initializer_range,
                      hidden_act=self.hidden_act, **dataclasses.asdict(self.head_config))
        return config

    # === Options ===
    @classmethod
    def make_config(cls, **options):
        """The head's config from option values; an option of another head is refused
        by name unless it holds that head's default (records carry `regression` and
        `answerable` for every head).

        Raises:
          ValueError: an option no head has, or another head's given a value.
        """
        from electra_tf.tasks import heads

        mine = {f.name for f in dataclasses.fields(cls.Config)}
        kept = {}
        for name, value in options.items():
            if name in mine:
                kept[name] = value
                continue
            owners = [h for h in heads.head_classes() if name in
                      {f.name for f in dataclasses.fields(h.Config)}]
            if not owners:
                raise ValueError(f"unknown head option {name!r} (a {cls.kind} head takes "
                                 f"{', '.join(sorted(mine)) or 'none'})")
            default = {f.name: f.default for f in dataclasses.fields(owners[0].Config)}[name]
            if value != default:
                raise ValueError(f"{name} is a {owners[0].kind} head's, not {cls.kind!r}'s")
        return cls.Config(**kept)

    @classmethod
    def config_for_task(cls, task):
        """The options a task trains this head with (its regression, answerable and
        head_options)."""
        return cls.make_config(regression=task.regression, answerable=task.answerable,
                               **task.head_options)

    @classmethod
    def learns_labels(cls, config) -> bool:
        """Whether the outputs are named labels (a task without names learns them)."""
        return True

    # === Loss ===
    @classmethod
    def loss(cls, config, outputs: Mapping[str, Any], labels: Mapping[str, Any], **options):
        """The batch's summed loss (tasks/losses.py); labels as base.Features.labels,
        `options` the task's `loss_options` (the training weights a head's loss takes
        beyond its config: SQuAD 2.0's answerable_weight)."""
        raise NotImplementedError(f"the {cls.kind} head does not fine-tune")

    @classmethod
    def loss_count(cls, config, labels: Mapping[str, Any]):
        """What `loss` sums over, float32: by default the examples (of weight 1, where
        the batch has tasks/losses.EXAMPLE_WEIGHT)."""
        from electra_tf.tasks import losses

        return losses.example_count(labels, next(k for k in labels
                                                 if k != losses.EXAMPLE_WEIGHT))

    # === The folder's record ===
    @classmethod
    def record(cls, config) -> dict:
        """finetuning_config.json's fields of this head (every head records all three)."""
        return {"regression": bool(getattr(config, "regression", False)),
                "answerable": bool(getattr(config, "answerable", False)),
                "head_options": config.head_options()}

    @classmethod
    def record_lacks(cls, value: Mapping[str, Any]) -> list[str]:
        """The fields this head needs that a finetuning_config.json `value` lacks."""
        return []

    @classmethod
    def config_from_record(cls, value: Mapping[str, Any]):
        """The config a finetuning_config.json `value` records (ValueError: options that
        do not make one)."""
        return cls.make_config(regression=bool(value["regression"]),
                               answerable=bool(value["answerable"]),
                               **dict(value["head_options"]))

    @classmethod
    def describe(cls, config) -> str:
        """The head in words, as the errors name it ("squad head")."""
        return f"{cls.kind} head"

    @classmethod
    def as_recorded(cls, record, config, finetuning) -> tuple[Any, dict]:
        """An evaluation-only run of a fine-tuning folder of this head's task: the head
        config of the folder's model where the task's `config` would add layers the
        folder lacks (they would evaluate at their random initial values), and the
        FinetuningConfig changes that go with it. `record`: the folder's
        FinetunedRecord; `finetuning`: the run's FinetuningConfig. Default: as given."""
        return config, {}

    @classmethod
    def continues(cls, had, want) -> str | None:
        """None when a head trained with `had` can go on training as `want` (same kind);
        else what differs and the flag that continues it."""
        return None

    # === Names ===
    def original_variables(self) -> dict:
        """{the original's (TF1) name: variable} of the head's layers."""
        raise NotImplementedError(f"the {self.kind} head has no variables of its own")

    # The original's fine-tuned checkpoints (interop/tf1.py): run_finetuning.py builds each
    # task's head in tf.variable_scope("task_specific/" + task.name), whose
    # tf.layers.dense layers are named dense, dense_1, ... in the order it builds them.

    @classmethod
    def tf1_layers(cls, config) -> dict[str, tuple[str, ...]]:
        """{this head's layer: the original's layer(s) under task_specific/<task>/} (several:
        their kernels' columns side by side)."""
        raise NotImplementedError(f"the original has no fine-tuned {cls.kind} head")

    @classmethod
    def tf1_variant(cls, config, present) -> tuple[Any, dict]:
        """The head config a checkpoint of the original holds where its task's config
        builds another variant, and the FinetuningConfig options that go with it.

        Args:
          config: the task's head config; present: the original's layer names under
            task_specific/<task>/ (dense, dense_1, ...).
        Raises:
          ValueError: a variant electra_tf has no head for (one line).
        """
        return config, {}

    @classmethod
    def tf1_unread(cls, config) -> dict[str, tuple[str, ...]]:
        """The original's layers of such a head that a head of `config` never reads (their
        variables are skipped, reported), as tf1_layers."""
        return {}

    @classmethod
    def tf1_width(cls, config, num_labels: int) -> int:
        """The outputs of the original's task_specific/<task>/dense for this head."""
        return 1 if getattr(config, "regression", False) else num_labels

    @classmethod
    def tf1_adjust(cls, arrays: dict) -> list[str]:
        """Changes the original's arrays (electra_tf names) in place where this head reads
        its inputs otherwise; returns a line per change (the conversion report's)."""
        return []

    @classmethod
    def hf_detect(cls, keys) -> bool:
        """Whether a transformers state dict with these keys holds this head."""
        return False

    @classmethod
    def hf_owns(cls, key: str) -> bool:
        """Whether a transformers state-dict key is one of this head's."""
        return key.rpartition(".")[0] in cls.hf_modules.values()

    @classmethod
    def hf_to_original(cls, key: str) -> tuple[str, bool] | None:
        """A transformers key of this head -> (original name, transpose?), or None."""
        module, _, leaf = key.rpartition(".")
        for original, hf in cls.hf_modules.items():
            if module == hf:
                return {"weight": (f"{original}/kernel", True),
                        "bias": (f"{original}/bias", False)}.get(leaf)
        return None

    @classmethod
    def original_to_hf(cls, name: str) -> tuple[str, bool]:
        """An original name of this head ("task_specific/output/kernel") -> transformers
        key and whether to transpose."""
        module, _, leaf = name.rpartition("/")
        if module not in cls.hf_modules:
            raise KeyError(f"{cls.hf_architecture} has no layer for {name}")
        return hf_key(cls.hf_modules[module], leaf)

    # transformers import: the key whose rows are the head's outputs, whether id2label
    # names them, and whether `convert --drop_task_head` may keep the encoder alone.
    hf_output_weight: ClassVar[str | None] = None
    hf_labelled: ClassVar[bool] = True
    hf_droppable: ClassVar[bool] = False

    @classmethod
    def hf_check(cls, path: str, hf_config: dict, width: int) -> None:
        """Refuses (ValueError, naming `path`) a config.json this head cannot take."""
        return None

    @classmethod
    def hf_head_options(cls, config) -> dict:
        """What the folder of an imported transformers model records as head_options."""
        return config.head_options()

    @classmethod
    def hf_export_check(cls, config, model_dir: str) -> None:
        """Refuses (ValueError) a head transformers' class cannot hold."""
        return None

    @classmethod
    def hf_export_note(cls, record) -> str | None:
        """What the folder's model does that transformers' class does not keep (a line
        for the command to print), or None."""
        return None

    @classmethod
    def hf_export_arrays(cls, config, arrays: dict, record, encoder) -> dict:
        """{original name: float64 array} of the head as transformers' class holds it."""
        return arrays

    # === Serving ===
    @classmethod
    def serving_options(cls, record, checkpoint: str, **flags):
        """The ServingOptions of a fine-tuned model from its record (folders'
        FinetunedRecord); `flags`: the export command's (max_query_length, ...)."""
        return cls.ServingOptions()

    @classmethod
    def check_pretrained(cls, folder: str, pretraining: dict) -> None:
        """Refuses (InputError) a pre-training folder this head cannot serve (a head that
        `serves_pretrained`); pretraining: its pretraining_config.json's "pretraining"."""
        return None

    @classmethod
    def text_inputs(cls, pair: bool) -> tuple[str, ...]:
        """The text signature's input names."""
        return ("text",)

    @classmethod
    def min_seq_length(cls, pair: bool = False) -> int:
        """The shortest max_seq_length an export of this head serves: [CLS] text [SEP];
        for a pair, [CLS] a [SEP] b [SEP] with a piece of each (at 3 or 4 the second text
        had no position, and every request had one answer)."""
        return 5 if pair else 3

    @classmethod
    def min_length(cls, spec) -> int:
        """The fewest positions the model takes."""
        return 1

    def min_positions(self) -> int:
        """The fewest positions this head takes (a batch cut for prediction keeps them)."""
        return 1

    @classmethod
    def pack_limit(cls, spec) -> int | None:
        """The most pieces the first of two texts keeps (None: longest-first only)."""
        return None

    @classmethod
    def export_info(cls, spec) -> dict:
        """export_info.json's keys of this head (every export has carried "regression")."""
        return {"regression": False}

    @classmethod
    def ids_outputs(cls, spec, out: dict, word_ids, mask, type_ids, graph) -> dict:
        """The ids signature's outputs from the model's `out` and the ids signature's
        inputs (serving/signatures.py)."""
        raise NotImplementedError

    @classmethod
    def pack_texts(cls, spec, packer, tokenized, graph) -> dict:
        """The model's rows for the text signature: packer.pack's dict of one row per
        request (the first text cut to `pack_limit` pieces first), whose "truncated"
        [B] the signature returns.

        tokenized: per text, (normalized, ids, starts, ends) of packer.tokenize."""
        import tensorflow as tf  # the serving graph's (this runs inside it)

        ids_a = tokenized[0][1]
        if len(tokenized) == 1:
            return packer.pack(ids_a)
        limit = cls.pack_limit(spec)
        return packer.pack(ids_a, tokenized[1][1],
                           limit_a=None if limit is None else tf.constant(limit, tf.int64))

    @classmethod
    def text_outputs(cls, spec, packer, tokenized, packed, out: dict, graph) -> dict:
        """The text signature's outputs (without "truncated", which the caller adds).

        tokenized: per text, (normalized, ids, starts, ends) of packer.tokenize;
        packed: `pack_texts`' dict; out: the model's outputs on its rows."""
        raise NotImplementedError


def pad_window(graph, outputs: dict, length, fills: Mapping[str, Any]) -> dict:
    """The per-position outputs in `fills` padded to `length` positions with their fill."""
    return {k: graph.pad_positions(v, length, fills[k]) if k in fills else v
            for k, v in outputs.items()}


def dense_names(prefix: str, layer) -> dict:
    """{prefix/kernel, prefix/bias: variable} of a Dense layer (the original's names)."""
    return {f"{prefix}/kernel": layer.kernel, f"{prefix}/bias": layer.bias}


def hf_key(module: str, leaf: str) -> tuple[str, bool]:
    """A transformers key of a Linear's kernel/bias and whether to transpose."""
    return {"kernel": (f"{module}.weight", True), "bias": (f"{module}.bias", False)}[leaf]
