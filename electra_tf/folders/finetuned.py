"""A fine-tuned model_dir: what `run_finetuning` writes (and `convert --from=hf` of a
transformers task model), what the export, evaluation and the Python API open.

    finetuning_config.json    {"finetuning", "run", "encoder", "task" (its name),
                               "head" (what the model serves: tasks/heads/,
                               which the export's --task names), "regression",
                               "answerable", "pair", "label_names", "head_options"
                               (FinetuningModel's head arguments, e.g. SQuAD's
                               span_head and beam_size), ["label_scale": [min, max]
                               of a regression target], "vocab_sha256", ...}
    vocab.txt                 the vocabulary, as in a pre-training folder
    finetuned.weights.h5      encoder + task head
    results.json              metrics per epoch
    checkpoints/, prediction files

`FinetunedFolder.open` reads it once (the record parsed and checked, the
vocabulary's record read, the weights found); the functions below it write it.
"""

from __future__ import annotations

import dataclasses
import os

from electra_tf.core.config import EncoderConfig
from electra_tf.core.errors import ConfigError, InputError
from electra_tf.folders.files import (
    FINETUNED_WEIGHTS,
    FINETUNING_CONFIG,
    RESULTS,
    VOCAB,
    check_no_unfinished_conversion,
    check_save_target,
    checked_path,
    has_checkpoints,
    json_numbers,
    load_weights,
    read_json,
    save_weights,
    what_it_holds,
    write_json,
)
from electra_tf.folders.vocabulary import (
    FolderVocab,
    _check_vocab_record,
    folder_vocab,
    keep_vocab,
)
from electra_tf.tasks import heads
from electra_tf.tasks.heads.span_record import WINDOW_DEFAULTS


@dataclasses.dataclass(frozen=True)
class FinetunedRecord:
    """What finetuning_config.json records about a fine-tuned model."""

    task: str  # the task name (registry)
    head: str  # what the model serves: a name of tasks/heads/ (the task's `head`)
    regression: bool  # a sequence_classification head that predicts a number
    answerable: bool  # a squad head with an answerability logit (SQuAD 2.0)
    pair: bool  # the task reads two texts
    label_names: tuple[str, ...]
    encoder: EncoderConfig
    max_seq_length: int
    finetuning: dict  # the FinetuningConfig fields
    run: dict  # the FinetuningRun fields
    # FinetuningModel's head arguments (task.head_options; a span head's name its
    # span_head).
    head_options: dict = dataclasses.field(default_factory=dict)
    # Regression: the target trained was (score - min) / max, so a score is
    # logit * max + min (recorded for a regression head; (0, 1) for the others).
    label_scale: tuple[float, float] = (0.0, 1.0)
    model_dir: str = ""  # the folder it was read from (its vocab.txt: `finetuned_vocab`)

    @property
    def do_lower_case(self) -> bool:
        return bool(self.finetuning.get("do_lower_case", True))

    @property
    def no_answer_threshold(self) -> float:
        return float(self.finetuning.get("no_answer_threshold", 0.0))

    @property
    def head_class(self):
        """The recorded head's class (tasks/heads/)."""
        return heads.head_class(self.head)

    @property
    def head_config(self):
        """The recorded head's config (ValueError, TypeError: options that make none)."""
        return self.head_class.config_from_record({
            "regression": self.regression, "answerable": self.answerable,
            "head_options": self.head_options})


@dataclasses.dataclass(frozen=True)
class FinetunedFolder:
    """A fine-tuned model_dir, opened once (`open`), then carried.

    Attributes:
      path: the folder.
      record: what its finetuning_config.json records, checked.
      vocabulary: what it records about its vocabulary (`FolderVocab`).
      weights: its finetuned.weights.h5.
    """

    path: str
    record: FinetunedRecord
    vocabulary: FolderVocab
    weights: str

    @classmethod
    def open(cls, model_dir: str) -> FinetunedFolder:
        """Opens a fine-tuning model_dir (or its finetuned.weights.h5).

        Raises:
          InputError: no finetuning_config.json or finetuned.weights.h5, or a
            record without a field it must have (one line naming the file).
        """
        model_dir = checked_path(model_dir, "model_dir")
        if os.path.isfile(model_dir):  # (Predictor.open takes its weights file: as it does)
            if os.path.basename(model_dir) != FINETUNED_WEIGHTS:
                raise InputError(f"{model_dir} is a file, not a fine-tuning model_dir (or "
                                 f"its {FINETUNED_WEIGHTS})")
            model_dir = os.path.dirname(os.path.abspath(model_dir))
        check_no_unfinished_conversion(model_dir, "the fine-tuning folder")
        record, value = _read_record(model_dir)
        weights = os.path.join(model_dir, FINETUNED_WEIGHTS)
        if not os.path.exists(weights):
            raise InputError(f"{weights} not found (expected a fine-tuning model_dir with "
                             f"{FINETUNED_WEIGHTS} and {FINETUNING_CONFIG})"
                             + what_it_holds(model_dir))
        return cls(model_dir, record, FolderVocab.read(model_dir, value), weights)

    @classmethod
    def save(cls, path: str, model, vocab_file: str, task_name: str,
             **options) -> FinetunedFolder:
        """Writes a fine-tuning folder of a FinetuningModel you built or trained, and
        opens it.

        What run_finetuning writes for its model: finetuned.weights.h5 and
        finetuning_config.json (the task, its head and labels, the encoder, the
        casing and window), with `vocab_file` kept as the folder's vocab.txt and
        its fingerprint. The export, `Predictor.open` and run_finetuning
        --init_checkpoint read it like one run_finetuning wrote.

        Args:
          model: a built tasks.model.FinetuningModel whose head is the task's.
          vocab_file: the vocabulary its embedding table was made for.
          task_name: the task it predicts (a name run_finetuning's --task_name takes).
          **options: FinetuningConfig fields, as run_finetuning's flags:
            label_names (the head's outputs in order, a list or the flag's string;
            needed by a task that learns its labels from train data, as
            classification and tagging of your own),
            max_seq_length (default the task's), do_lower_case, classifier_head, ...

        Raises:
          ConfigError: not a FinetuningModel, options `registry.get_task` refuses, a head
            that is not the task's (another kind, variant or number of outputs), a
            window past its positions, a vocabulary larger than its embedding table;
            VocabError: `vocab_file` is missing or not a vocabulary.
        """
        from electra_tf.core.config import FinetuningRun, model_size_of
        from electra_tf.folders.vocabulary import check_vocab_fits
        from electra_tf.tasks.model import FinetuningModel
        from electra_tf.tasks.registry import task_config, task_from_config

        if not isinstance(model, FinetuningModel):
            raise ConfigError(f"FinetunedFolder.save takes a FinetuningModel, got "
                              f"{type(model).__name__}")
        # every check before anything is written (a refused option had left a trained
        # folder's weights replaced and its record unreadable)
        path = check_save_target(path, "FinetunedFolder.save: path",
                                 (FINETUNED_WEIGHTS, FINETUNING_CONFIG, VOCAB))
        vocab_file = checked_path(vocab_file, "vocab_file", "a vocabulary file's path")
        names = options.get("label_names")
        if isinstance(names, (list, tuple)):  # the flag's form: a JSON list keeps commas
            import json

            if not all(isinstance(n, str) for n in names):
                raise ConfigError(f"label_names must be strings, got {list(names)!r}")
            options["label_names"] = json.dumps(list(names))
        config = task_config(task_name, "FinetunedFolder.save", **options)
        task = task_from_config(config)
        head = model.head
        if head.kind != task.head:
            raise ConfigError(f"the model has a {head.kind} head, but {task.name} has a "
                              f"{task.head} head")
        if head.head_config != task.head_config():
            raise ConfigError(f"the model's {head.kind} head is {head.head_config}, but "
                              f"{task.name}'s is {task.head_config()}: pass the options that "
                              "describe it (e.g. classifier_head=, span_head=)")
        if type(head).learns_labels(head.head_config) and not task.label_names:
            raise ConfigError(f"{task.name} learns its labels from its train data: pass "
                              "label_names, the model's outputs in order")
        if head.num_labels != max(1, len(task.label_names)):
            raise ConfigError(f"the model's head has {head.num_labels} outputs, but "
                              f"{task.name} has {len(task.label_names)} labels "
                              f"({', '.join(task.label_names)})")
        encoder = model.encoder.config
        check_vocab_fits(vocab_file, encoder.vocab_size)
        max_seq_length = config.max_seq_length or task.default_max_seq_length
        if max_seq_length > encoder.max_position_embeddings:
            given = "" if config.max_seq_length else (
                f" ({task.name}'s default: pass max_seq_length=)")
            raise ConfigError(f"max_seq_length={max_seq_length}{given} exceeds the model's "
                              f"{encoder.max_position_embeddings} positions")
        lowest = type(head).min_seq_length(task.text_b is not None)
        if max_seq_length < lowest:  # the export and Predictor.open would refuse the folder
            raise ConfigError(f"max_seq_length={max_seq_length}: a {task.name} model takes at "
                              f"least {lowest} positions ([CLS] and [SEP] around a piece of "
                              "each text)")
        if not head.weights:  # (its folder had been written, and could never be opened)
            raise ConfigError(f"the model's {head.kind} head has no weights yet: build it "
                              "(model.build()) or train it before saving")
        os.makedirs(path, exist_ok=True)
        # A folder saved over: the old weights go first and the record is written before
        # the new ones, so that a save stopped midway leaves a folder that refuses to open
        # (its weights missing), never the new weights under the old record's labels.
        if os.path.isfile(os.path.join(path, FINETUNED_WEIGHTS)):
            os.remove(os.path.join(path, FINETUNED_WEIGHTS))
        write_finetuning_config(
            path, task=task, config=config,
            run=FinetuningRun(model_dir=path, vocab_file=vocab_file), encoder=encoder,
            model_size=model_size_of(encoder), max_seq_length=max_seq_length,
            head_config=head.head_config, vocab_file=vocab_file)
        save_finetuned(path, model)
        return cls.open(path)

    def vocab(self, vocab_file: str = "", flag: str = "--vocab_file") -> str:
        """The vocabulary to feed its model (`FolderVocab.checked`)."""
        return self.vocabulary.checked(vocab_file, flag)

    def results(self) -> dict:
        """Its results.json ({} before the first epoch ends)."""
        return read_results(self.path)

    def load_model(self):
        """The FinetuningModel with the recorded head (`head_options`: SQuAD's joint or
        independent span head) and the weights loaded.

        Raises:
          InputError: head_options that build no model, unreadable weights;
          ConfigError: weights that do not fit.
        """
        # Keras (and its backend) only now: a missing file is reported before
        # seconds of imports.
        from electra_tf.modeling.models import build_discriminator
        from electra_tf.tasks.model import FinetuningModel

        record = self.record
        encoder = build_discriminator(record.encoder).encoder
        try:
            model = FinetuningModel(encoder, record.head, max(1, len(record.label_names)),
                                    config=record.head_config)
        except (TypeError, ValueError) as e:
            raise InputError(f"{os.path.join(self.path, FINETUNING_CONFIG)}: head_options "
                             f"{record.head_options!r} do not build a model ({e})") from None
        model.build()
        try:
            load_weights(model, self.weights)
        except ConfigError as e:
            labels = record.label_names
            raise ConfigError(
                f"{e} ({FINETUNING_CONFIG} records a {record.head} head of {max(1, len(labels))} "
                f"output(s){': ' + ', '.join(labels) if labels else ''})") from None
        return model


def write_finetuning_config(model_dir: str, *, task, config, run, encoder: EncoderConfig,
                            model_size: str, max_seq_length: int, head_config=None,
                            head_options=None, label_scale=None, vocab_file: str = "",
                            **extra) -> None:
    """finetuning_config.json: the task, its head, the encoder and the run.

    Also keeps the vocabulary in the folder (model_dir/vocab.txt) and records
    its fingerprint, as `write_pretraining_config` does.

    Args:
      task: the tasks.base.Task trained (its head, what its head class records of
        its config: `Head.record`, and, for a regression, regression_min and
        regression_max).
      config, run: FinetuningConfig and FinetuningRun.
      encoder: the encoder's config; model_size: its size name.
      head_config, label_scale: what the model has where it differs from the
        task's own (the classifier head chosen, an imported model); head_options:
        what to record of it where that differs from `Head.record`'s (an import's).
      **extra: more keys (epochs, total_steps, and the layerwise_lr_decay and
        learning_rate the run used: a flag's 0 resolved by the model's size).
    """
    value = {
        "finetuning": config.to_dict(), "run": dataclasses.asdict(run),
        "encoder": encoder.to_dict(), "model_size": model_size, "task": task.name,
        "head": task.head,
        **task.head_class.record(task.head_config() if head_config is None else head_config),
        **({} if head_options is None else {"head_options": dict(head_options)}),
        "pair": task.text_b is not None,
        "label_names": list(task.label_names), "max_seq_length": max_seq_length}
    if task.regression:
        value["label_scale"] = [float(v) for v in label_scale or (task.regression_min,
                                                                   task.regression_max)]
    value.update(keep_vocab(model_dir, vocab_file or run.vocab_file))
    write_json(os.path.join(model_dir, FINETUNING_CONFIG), {**value, **extra})


def read_finetuning_config(model_dir: str) -> FinetunedRecord:
    """The record of a fine-tuning model_dir (`FinetunedFolder.record`, without the weights).

    Raises:
      what `_read_record` raises.
    """
    return _read_record(model_dir)[0]


def recorded_task(model_dir: str) -> tuple[str, EncoderConfig]:
    """The task and the encoder a fine-tuning model_dir's record names, read without its
    head's class (which imports Keras: seconds a results table need not wait).

    Raises:
      InputError: as `read_finetuning_config`, for those two fields.
    """
    path = _record_path(model_dir)
    value = read_json(path)
    missing = [k for k in ("task", "encoder") if k not in value]
    if missing:
        raise InputError(f"{path}: lacks {', '.join(missing)}; not a file electra_tf wrote")
    if not isinstance(value["task"], str) or not isinstance(value["encoder"], dict):
        raise InputError(f"{path}: task must be a name and encoder a JSON object; not a "
                         "file electra_tf wrote")
    try:
        return value["task"], EncoderConfig.from_dict(value["encoder"])
    except ConfigError as e:
        raise InputError(f"{path}: encoder: {e}") from None


def recorded_without_evaluation(model_dir: str) -> bool:
    """Whether the run that wrote a fine-tuning model_dir's record was told
    --do_eval=false (its folder then holds no results.json, and never will)."""
    run = read_json(_record_path(model_dir)).get("run")
    return isinstance(run, dict) and run.get("do_eval") is False


def recorded_total_steps(model_dir: str) -> int | None:
    """The optimizer steps the run that wrote a fine-tuning model_dir's record planned
    (its `total_steps`), or None where the record has none."""
    steps = _read_record(model_dir)[1].get("total_steps")
    return steps if isinstance(steps, int) and not isinstance(steps, bool) else None


def recorded_seed(model_dir: str) -> int | None:
    """The --seed a fine-tuning model_dir's record was trained with, or None (no
    record, one that cannot be read, or no seed in it: the run's own checks say so)."""
    try:
        seed = read_json(os.path.join(model_dir, FINETUNING_CONFIG))["finetuning"]["seed"]
    except (InputError, OSError, KeyError, TypeError):
        return None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def _record_path(model_dir: str) -> str:
    """model_dir's finetuning_config.json.

    Raises:
      InputError: there is none (not a fine-tuning model_dir), naming what is there.
    """
    path = os.path.join(model_dir, FINETUNING_CONFIG)
    if not os.path.exists(path):
        raise InputError(f"{path} not found (expected a fine-tuning model_dir with "
                         f"{FINETUNED_WEIGHTS} and {FINETUNING_CONFIG})"
                         + what_it_holds(model_dir))
    return path


def _read_record(model_dir: str) -> tuple[FinetunedRecord, dict]:
    """The record of a fine-tuning model_dir, and the JSON it was read from.

    Raises:
      InputError: no finetuning_config.json (not a fine-tuning model_dir), or
        one without a field it must have (one line naming the file and the fields),
        or with a head this electra_tf does not know.
    """
    path = _record_path(model_dir)
    value = read_json(path)
    missing = [k for k in ("task", "head", "regression", "answerable", "pair", "encoder",
                           "max_seq_length", "head_options", "label_names", "finetuning", "run")
               if k not in value]
    head = value.get("head")
    if value.get("regression") and "label_scale" not in value:
        missing.append("label_scale")
    if head in heads.HEADS:  # what the head's class needs (a span head's variant, ...)
        missing += heads.record_lacks(head, value)  # (no Keras: a folder opens in ms)
    if missing:
        raise InputError(f"{path}: lacks {', '.join(missing)}; not a file electra_tf wrote")
    if head not in heads.HEADS:
        raise InputError(f"{path}: head {head!r} is not one of {', '.join(heads.HEADS)}")
    _check_types(path, value)
    _check_vocab_record(path, value)
    try:
        encoder = EncoderConfig.from_dict(value["encoder"])
    except ConfigError as e:
        raise InputError(f"{path}: encoder: {e}") from None
    return FinetunedRecord(
        task=value["task"], head=head, regression=bool(value["regression"]),
        answerable=bool(value["answerable"]),
        pair=bool(value["pair"]), label_names=tuple(value["label_names"]),
        encoder=encoder,
        max_seq_length=int(value["max_seq_length"]),
        finetuning=value["finetuning"], run=value["run"],
        head_options=dict(value["head_options"]),
        label_scale=_label_scale(value.get("label_scale", (0.0, 1.0)), path),
        model_dir=model_dir), value


def _check_types(path: str, value: dict) -> None:
    """Refuses a record whose fields are not of the types electra_tf writes (a
    hand-edited or damaged file): one line naming the file and the field."""
    def bad(name, want):
        raise InputError(f"{path}: {name} must be {want}, got {value[name]!r}; not a file "
                         "electra_tf wrote")

    for name in ("task", "head"):
        if not isinstance(value[name], str):
            bad(name, "a string")
    for name in ("regression", "answerable", "pair"):
        if not isinstance(value[name], bool):
            bad(name, "true or false")
    for name in ("encoder", "finetuning", "run", "head_options"):
        if not isinstance(value[name], dict):
            bad(name, "a JSON object")
    length = value["max_seq_length"]
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        bad("max_seq_length", "a whole number >= 1")
    labels = value["label_names"]
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        bad("label_names", "a list of strings")
    if "" in labels or len(set(labels)) < len(labels):  # a server could not tell them apart
        bad("label_names", "distinct non-empty names (\"\" is the served padding)")
    casing = value["finetuning"].get("do_lower_case", True)
    if not isinstance(casing, bool):
        raise InputError(f"{path}: finetuning.do_lower_case must be true or false, got "
                         f"{casing!r}; not a file electra_tf wrote")
    for name in WINDOW_DEFAULTS:  # (a record written before them has none)
        count = value["finetuning"].get(name, 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InputError(f"{path}: finetuning.{name} must be a whole number >= 1, got "
                             f"{count!r}; not a file electra_tf wrote")


def _label_scale(value, path: str) -> tuple[float, float]:
    try:
        low, high = (float(x) for x in value)
    except (TypeError, ValueError):
        raise InputError(f"{path}: label_scale must be [min, max], got {value!r}") from None
    return low, high


def is_finetuning_folder(path: str) -> bool:
    """Whether `path` is a fine-tuning model_dir (run_finetuning's, or an imported task
    model's): it holds finetuning_config.json and finetuned.weights.h5."""
    return bool(path) and os.path.isdir(path) and all(
        os.path.exists(os.path.join(path, name)) for name in (FINETUNING_CONFIG,
                                                               FINETUNED_WEIGHTS))


def has_finetuning_config(path: str) -> bool:
    """Whether `path` holds a finetuning_config.json (a fine-tuning run's, even one
    that has not yet saved its model)."""
    return os.path.exists(os.path.join(path, FINETUNING_CONFIG))


def save_finetuned(model_dir: str, model) -> None:
    save_weights(model, os.path.join(model_dir, FINETUNED_WEIGHTS))


def load_finetuned(model_dir: str):
    """The fine-tuned model of a fine-tuning model_dir, and its record.

    Returns:
      (FinetuningModel with the weights loaded, FinetunedRecord).
    Raises:
      what `FinetunedFolder.open` and `load_model` raise.
    """
    folder = FinetunedFolder.open(model_dir)
    return folder.load_model(), folder.record


def finetuned_vocab(record: FinetunedRecord) -> str:
    """The vocab a fine-tuned model was trained with (`folder_vocab` of its folder)."""
    return folder_vocab(record.model_dir)


def read_results(model_dir: str) -> dict:
    path = os.path.join(model_dir, RESULTS)
    return read_json(path) if os.path.exists(path) else {}


def final_results(results: dict) -> dict:
    """The last evaluation in `results` (results.json's, a run's return): the last
    epoch's, by number, or that of a run without training (which later training
    removes)."""
    if "eval" in results:
        return results["eval"]
    epochs = [k for k in results if _epoch_number(k) is not None]
    return results[max(epochs, key=_epoch_number)] if epochs else {}


def _epoch_number(key: str) -> int | None:
    """N of a results key `epoch_N`; None for another key."""
    return int(key[len("epoch_"):]) if key.startswith("epoch_") and key[6:].isdecimal() else None


def _results_order(value):
    """`value` with its dicts' keys in reading order: `epoch_N` keys by their number
    (epoch_2 before epoch_10, which key-sorted JSON had put first), then the others
    sorted."""
    if not isinstance(value, dict):
        return value
    order = sorted(value, key=lambda k: (0, _epoch_number(k), "") if _epoch_number(k) is not None
                   else (1, 0, str(k)))
    return {k: _results_order(value[k]) for k in order}


def write_results(model_dir: str, results: dict) -> None:
    """results.json, its epochs in their order; a score that is not a finite number is
    written as null."""
    write_json(os.path.join(model_dir, RESULTS), _results_order(json_numbers(results)),
               sort_keys=False)


def recorded_labels(model_dir: str) -> tuple[str, list[str]] | None:
    """(task, label names) a fine-tuning model_dir's checkpoints were trained with;
    None where it holds no checkpoints or no finetuning_config.json."""
    path = os.path.join(model_dir, FINETUNING_CONFIG)
    if not (os.path.exists(path) and has_checkpoints(model_dir)):
        return None
    recorded = read_json(path)
    return recorded.get("task"), list(recorded.get("label_names") or ())
