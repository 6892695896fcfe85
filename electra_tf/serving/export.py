r"""Exports a fine-tuned (or pre-trained, for RTD) ELECTRA as a TF Serving SavedModel.

    python -m export.export_saved_model --task=token_classification \
        --checkpoint=ner_small --model_base=/models --model_name=ner [--version=N] [--ids_only]

(the command: electra_tf/export_saved_model.py; this module is its library, `load_spec`
and `export`).

--checkpoint is a fine-tuning model_dir (finetuned.weights.h5 +
finetuning_config.json) for token_classification, sequence_classification and
squad, or a pre-training model_dir (discriminator.weights.h5 +
discriminator_config.json) for rtd and score (Electric's). The vocabulary is the folder's own
vocab.txt, checked by the fingerprint
the folder records (electra_tf/folders: the folder is opened once, as a
`PretrainingFolder` or a `FinetunedFolder`); --vocab_file must hold the same
tokens, and no vocabulary may hold more tokens than the embedding table has
rows. The export goes to MODEL_BASE/NAME/N/ (N: --version, or one more than
the highest existing version), written under a temporary dot-name in
MODEL_BASE/NAME (which TF Serving ignores) and renamed into place; an existing
version is never overwritten. Temporary dirs that a killed export left there
are removed by the next export (clean_stale_tmp).

--task names what the endpoint serves. For a fine-tuning folder that is the
head its finetuning_config.json records (the names of tasks/heads/'s registry:
the one vocabulary of the tasks, their folders and the export), so no table
maps one to the other; the head's class gives the signatures' inputs and
outputs (`Head.text_inputs`, `Head.text_outputs`, `Head.ids_outputs`).

The SavedModel holds:
  serving_default  text signature (in-graph FastBertTokenizer; TF Serving 2.12+)
  serving_ids      ids signature (input_word_ids, input_mask, input_type_ids)
  assets/vocab.txt, assets.extra/tf_serving_warmup_requests (PredictionLog
  TFRecord), assets.extra/export_info.json (task, inputs, outputs, labels).
With --ids_only, serving_default IS the ids signature and the graph has no
TF-Text op, so any TF Serving (or saved_model_cli) loads it.
Output names: see electra_tf/serving/signatures.py and docs/serving.md.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time

from absl import logging

from electra_tf.core import fileio, framework_messages
from electra_tf.core.cpu import emulates_bf16
from electra_tf.core.errors import InputError
from electra_tf.tasks import heads

# What an endpoint serves (--task): a fine-tuned model's head (the "head" its folder
# records) or a pre-trained model's (rtd; score, Electric's text scores): the names of
# tasks/heads/'s registry, read without importing a head (Keras), so that the command
# checks its flags and files before TensorFlow is imported (seconds).
TASKS = tuple(heads.SERVED)
# The encoder's dense kernels in the export (--precision): float32, or bfloat16
# (ServingSpec's precision).
PRECISIONS = ("fp32", "bf16")


def check_precision(precision: str) -> str:
    """`precision`, once it is one of PRECISIONS.

    Raises:
      InputError: another value, in one line.
    """
    if precision not in PRECISIONS:
        raise InputError(f"--precision must be one of {', '.join(PRECISIONS)}, "
                         f"got {precision!r}")
    return precision


def emulated_bf16_note(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """A line for --precision=bf16 when this CPU multiplies bfloat16 by emulation, else None.

    oneDNN multiplies bfloat16 natively only with AVX512-BF16 or AMX; elsewhere it
    emulates the products, and the bf16 export answered 1.7 to 2.6 times slower than
    float32's (benchmarks/serving_bf16.md). None too where `cpuinfo` cannot be read
    (not Linux): nothing is known then.
    """
    if not emulates_bf16(cpuinfo):
        return None
    return ("note: this CPU has no AVX512-BF16 or AMX, so bfloat16 products are emulated "
            "here: the bf16 export answered about 2x slower than fp32 on such a CPU "
            "(docs/serving.md). Serve it on a CPU with them, or time both exports on yours.")


def load_saved_model(path: str):
    """tf.saved_model.load of an export (a version folder), its TF-Text ops registered.

    The text export's graph holds TF-Text ops (FastBertNormalize,
    FastWordpieceTokenizeWithOffsets, NormalizeUTF8, and CaseFoldUTF8 for some
    vocabularies), which TensorFlow knows only once tensorflow_text is imported:
    without it, tf.saved_model.load fails with "Op type not registered" naming one.
    The ids-only export needs none; importing it costs nothing there.
    """
    path = os.fspath(path)
    if "://" not in path and not _is_saved_model(path):  # TensorFlow: "SavedModel file
        # does not exist at: PATH/{saved_model.pbtxt|saved_model.pb}"
        if not os.path.exists(path):
            raise InputError(f"{path} does not exist")
        # as TF Serving reads a version's name (`²` passes str.isdigit, not int)
        versions = sorted((n for n in _listdir(path) if _version_of(n) is not None),
                          key=_version_of)
        whole = [v for v in versions if _is_saved_model(os.path.join(path, v))]
        if whole:
            # (a higher version holding none, an export stopped before its rename or a
            # folder made by hand, had made the whole model folder "hold no saved_model.pb")
            empty = [v for v in versions if _version_of(v) > _version_of(whole[-1])]
            also = (f"; its version {', '.join(empty)} holds no saved_model.pb (remove it: "
                    "a server serves the highest version)" if empty else "")
            raise InputError(f"{path} is a model's folder (MODEL_BASE/NAME): give one of its "
                             f"versions, e.g. {os.path.join(path, whole[-1])}{also}")
        raise InputError(f"{path} holds no saved_model.pb: give an export's version folder "
                         "(MODEL_BASE/NAME/VERSION)")
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the text export's ops)

    return tf.saved_model.load(path)


def _is_saved_model(path: str) -> bool:
    return any(os.path.isfile(os.path.join(path, name))
               for name in ("saved_model.pb", "saved_model.pbtxt"))


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


@dataclasses.dataclass(init=False)
class ServingSpec:
    """What the export needs: the Keras model, the tokenizer and the head's settings.

    Args:
      task: one of TASKS (the head's name; `head` is its class).
      model: keras.Model: FinetuningModel, or the ElectraDiscriminator of a pre-trained head.
      tokenizer: electra_tf.text.tokenizer.Tokenizer.
      max_seq_length: L.
      task_name: the fine-tuning task (ner, sst2, squad_v2, ...).
      label_names: classes or tags, in logit order.
      pair: the task reads two texts.
      length_buckets: serving.length_buckets (None: its default).
      precision: "fp32", or "bf16": the encoder's dense kernels stored and multiplied
        in bfloat16 (serving/encoder.py, Bfloat16Kernels); a float32 model only.
      options: the head's ServingOptions (a span head's null_rule, a regression's
        label_scale, ...), or, without it, **head_options make them; read as
        attributes of the spec. ValueError names an option the head does not take.
    """

    task: str
    model: object
    tokenizer: object
    max_seq_length: int
    task_name: str = ""
    label_names: tuple = ()
    pair: bool = False
    length_buckets: tuple | None = None
    options: object = None
    precision: str = "fp32"

    def __init__(self, task: str, model, tokenizer, max_seq_length: int, task_name: str = "",
                 label_names=(), pair: bool = False, length_buckets=None, options=None,
                 precision: str = "fp32", **head_options):
        check_precision(precision)
        self.task, self.model, self.tokenizer = task, model, tokenizer
        self.max_seq_length, self.task_name = max_seq_length, task_name
        self.label_names, self.pair, self.length_buckets = tuple(label_names), pair, length_buckets
        self.precision = precision
        self.head = heads.head_class(task)
        if options is None:
            try:
                options = self.head.ServingOptions(**head_options)
            except TypeError:
                known = {f.name for f in dataclasses.fields(self.head.ServingOptions)}
                raise ValueError(f"the {task} head's serving takes no option(s) "
                                 f"{sorted(set(head_options) - known)}") from None
        elif head_options:
            raise ValueError("ServingSpec takes options or head options, not both")
        self.options = options

    def __getattr__(self, name):
        if name == "options":  # not set yet
            raise AttributeError(name)
        try:
            return getattr(self.options, name)
        except AttributeError:
            raise AttributeError(f"the {self.task} head's ServingSpec has no {name!r}") from None


def load_spec(task: str | None, checkpoint: str, vocab_file: str = "", max_seq_length: int = 0,
              max_query_length: int = 0, max_answer_length: int = 0,
              what: str = "--checkpoint", doc_stride: int = 0) -> ServingSpec:
    """Builds the Keras model from a model_dir (electra_tf/folders) and checks it suits `task`
    (None: what the folder serves, a fine-tuned folder's head or a pre-training folder's rtd).

    The export follows what was trained: the recorded head and what its class
    reads of the record (`Head.serving_options`: SQuAD's joint or independent
    span head and SQuAD 2.0's null rule, STS-B's label scale).

    `what` names the folder in errors (the caller's flag; the Python API's "folder").
    squad's `max_query_length`, `max_answer_length` and `doc_stride` (its windows
    over a long context: one every doc_stride pieces) are the fine-tuning run's where
    0 (`SpanHead.serving_options`).

    Raises:
      InputError: missing files or a checkpoint of another task; a max_query_length,
        max_answer_length or doc_stride below 0 (an export of one below 1 answers no
        request).
    """
    from electra_tf.folders import FinetunedFolder, PretrainingFolder
    from electra_tf.folders.files import (
        DISCRIMINATOR_WEIGHTS,
        FINETUNED_WEIGHTS,
        _folder_of,
        check_no_unfinished_conversion,
        holds_weights,
        original_checkpoint_hint,
    )
    from electra_tf.folders.finetuned import has_finetuning_config, is_finetuning_folder

    for name, value in (("max_query_length", max_query_length),
                        ("max_answer_length", max_answer_length), ("doc_stride", doc_stride)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InputError(f"--{name} must be >= 1 (or 0: the fine-tuning run's), got "
                             f"{value!r}")

    if not os.path.exists(checkpoint):  # (not "expected a pre-training model_dir")
        raise InputError(f"{what}: {checkpoint} not found" + original_checkpoint_hint(checkpoint))
    if _is_saved_model(checkpoint):  # had been "discriminator.weights.h5 not found"
        raise InputError(f"{what}: {checkpoint} is an export (a SavedModel), not a model "
                         "folder: give the fine-tuning or pre-training model_dir it was "
                         "exported from (load an export with load_saved_model)")
    if os.path.basename(checkpoint) == FINETUNED_WEIGHTS and os.path.isfile(checkpoint):
        checkpoint = os.path.dirname(checkpoint) or "."  # as a discriminator's file is taken
    folder = None
    if task is None:  # the folder's own (the Python API's default): its head, rtd or score
        if has_finetuning_config(checkpoint):  # its weights missing: said by the open below
            task = ""
        else:
            folder = PretrainingFolder.open(checkpoint, what=what)
            task = heads.pretrained_default(folder.recorded.get("pretraining", {}))
    elif task not in TASKS:
        raise InputError(f"--task must be one of {', '.join(TASKS)}, got {task!r}")
    if task in heads.PRETRAINED_HEADS:  # a pre-training folder's discriminator
        if folder is None and is_finetuning_folder(_folder_of(checkpoint)) \
                and not holds_weights(_folder_of(checkpoint), DISCRIMINATOR_WEIGHTS):
            # (a TF1 import writes both: its discriminator's own check says what it lacks)
            flag = "--task" if what.startswith("--") else "task"
            head = FinetunedFolder.open(checkpoint).record.head
            raise InputError(f"{what} {checkpoint} is a fine-tuned {head} model, which "
                             f"{flag}={task} cannot serve ({task} serves a pre-training "
                             f"folder's discriminator; give {flag}={head})")
        folder = folder or PretrainingFolder.open(checkpoint, what=what)
        with _float32():
            discriminator = folder.load_discriminator()
        folder.vocab()  # its own vocabulary holds the recorded tokens, even beside --vocab_file
        heads.head_class(task).check_pretrained(folder.path,
                                                folder.recorded.get("pretraining", {}))
        _check_trained_rtd_head(folder.path, task)  # both serve that head's outputs
        from electra_tf.text.tokenizer import Tokenizer  # TensorFlow: after the file checks

        vocab = _vocab(folder, vocab_file, discriminator.config.vocab_size)
        length = folder.serving_length(max_seq_length,
                                       discriminator.config.max_position_embeddings)
        return _checked_length(ServingSpec(
            task, discriminator, Tokenizer(vocab, do_lower_case=folder.do_lower_case),
            length, task_name=task), checkpoint, bool(max_seq_length))

    check_no_unfinished_conversion(checkpoint, what)  # named once, by the caller's name
    try:
        folder = FinetunedFolder.open(checkpoint)
        with _float32():
            model, record = folder.load_model(), folder.record
    except InputError as e:
        raise InputError(f"{what}: {e}") from None
    from electra_tf.text.tokenizer import Tokenizer  # TensorFlow: after the file checks

    task = task or record.head
    if record.head != task:
        flag = "--task" if what.startswith("--") else "task"  # a command's or the API's
        raise InputError(f"{what} {checkpoint} was fine-tuned on {record.task!r}, a "
                         f"{record.head} model, which {flag}={task} cannot serve (give "
                         f"{flag}={record.head})")
    vocab = _vocab(folder, vocab_file, record.encoder.vocab_size)
    options = heads.head_class(record.head).serving_options(
        record, checkpoint, max_query_length=max_query_length,
        max_answer_length=max_answer_length, doc_stride=doc_stride)
    return _checked_length(ServingSpec(
        task, model, Tokenizer(vocab, do_lower_case=record.do_lower_case),
        max_seq_length or record.max_seq_length, task_name=record.task,
        label_names=record.label_names, pair=record.pair, options=options), checkpoint,
        bool(max_seq_length))


def _float32():
    """modeling.models.dtype_policy_scope("float32") (Keras imported only now: a missing
    file is said before seconds of imports)."""
    from electra_tf.modeling.models import dtype_policy_scope

    return dtype_policy_scope("float32")


def _vocab(folder, vocab_file: str, rows: int) -> str:
    """The vocabulary to serve the model of `folder` (a PretrainingFolder or
    FinetunedFolder) with: its own, checked by the fingerprint it records, or
    --vocab_file holding those tokens; never more tokens than the table's rows.

    Raises:
      InputError, ConfigError, VocabError: one line naming the file(s).
    """
    from electra_tf.folders.files import VOCAB
    from electra_tf.folders.vocabulary import check_vocab_fits

    vocab = folder.vocab(vocab_file)
    if not vocab:
        raise InputError(f"--vocab_file is required ({folder.path} holds no {VOCAB} and "
                         "records none)")
    check_vocab_fits(vocab, rows)
    return vocab


def _check_trained_rtd_head(folder: str, task: str) -> None:
    """Refuses a folder converted from a checkpoint without the discriminator's output
    head (a fine-tuned one: the original's fine-tuning drops it; transformers' task
    models): --task=rtd (or score) had served its random initial weights.

    Raises:
      InputError: naming the folder and the untrained variable.
    """
    from electra_tf.folders.converted import ConvertedFolder

    untrained = [n for n in ConvertedFolder(folder).left_at_init()
                 if n.startswith("discriminator_predictions/")]
    if untrained:
        raise InputError(f"{folder} holds no trained replaced-token head: it was converted "
                         "from a checkpoint without one (conversion_report.json lists "
                         f"{untrained[0]} under left_at_init), so --task={task} would serve "
                         "random weights; export the pre-trained model's folder instead")


def _checked_length(spec: ServingSpec, checkpoint: str, given: bool = True) -> ServingSpec:
    """spec, once its max_seq_length fits [CLS] x [SEP] and the model's positions.

    Args:
      given: the length is --max_seq_length's (else the folder's record's).

    Raises:
      InputError: a length below the head's min_seq_length (3: [CLS] x [SEP]; a pair's
        and SQuAD's 5 keep a piece of each text), or above the model's
        max_position_embeddings (every request would then fail in the position embedding).
    """
    positions = spec.model.encoder.config.max_position_embeddings
    lowest = spec.head.min_seq_length(spec.pair)
    if not lowest <= spec.max_seq_length <= positions:
        what = (f"--max_seq_length={spec.max_seq_length}" if given else
                f"the max_seq_length {spec.max_seq_length} that {checkpoint} records")
        kind = spec.task if spec.head.min_seq_length() > 3 else "sentence-pair"  # SQuAD's own
        whose = f"a {kind} export of the model" if lowest > 3 else "the model"
        raise InputError(f"{what}: {whose} in {checkpoint} takes {lowest} to {positions} "
                         "positions" + ("" if given else "; give --max_seq_length"))
    return spec


def parse_length_buckets(values) -> tuple[int, ...] | None:
    """--length_buckets as ints >= 1 (None: the default buckets).

    Raises:
      InputError: a value that is not a whole number >= 1.
    """
    if values is None:
        return None
    # ASCII digits only: int() also reads 1_000, +8 and other scripts' digits
    spelled = all(re.fullmatch(r"[0-9]+", v.strip()) for v in values)
    buckets = tuple(int(v) for v in values) if spelled else ()
    if not buckets or min(buckets) < 1:
        raise InputError(f"--length_buckets must be whole numbers >= 1, got "
                         f"{','.join(values)!r}")
    return buckets


# TF Serving reads a version folder's name as an int64 (its ParseVersionNumber:
# strings::safe_strto64, which takes ASCII digits with an optional "-" and C spaces
# around them: "007", " 7" and "7" are all version 7).
MAX_VERSION = 2**63 - 1
_VERSION_NAME = re.compile(r"[ \t\n\v\f\r]*-?[0-9]+[ \t\n\v\f\r]*")


def _version_of(name: str) -> int | None:
    """The version TF Serving reads a folder's name as; None for a name it skips."""
    if not _VERSION_NAME.fullmatch(name):
        return None
    value = int(name.strip(" \t\n\v\f\r"))
    return value if -MAX_VERSION - 1 <= value <= MAX_VERSION else None


def check_version(model_dir: str, version: int) -> str:
    """The folder of `version` in `model_dir` (MODEL_BASE/NAME), after refusing a
    version TF Serving cannot read or one that exists (versions are never overwritten).

    Raises:
      InputError: one line naming the version or the folder.
    """
    if not 1 <= version <= MAX_VERSION:
        raise InputError(f"--version must be in [1, 2^63 - 1] (TF Serving reads it as an "
                         f"int64), got {version}")
    final = os.path.join(model_dir, str(version))
    if os.path.exists(final):
        raise InputError(f"{final} already exists; versions are never overwritten "
                         "(pick another --version or leave it out)")
    same = [n for n in (os.listdir(model_dir) if os.path.isdir(model_dir) else [])
            if _version_of(n) == version]
    if same:  # "007": TF Serving would serve one of the two as version 7
        raise InputError(f"{os.path.join(model_dir, same[0])} is already version {version} "
                         "to TF Serving, which reads folder names as numbers; versions are "
                         "never overwritten (pick another --version or leave it out)")
    return final


def check_model_name(model_name: str) -> None:
    """Refuses a --model_name that is not one folder name: "../x", "/abs", "." or a
    name with a '/' had put the export outside MODEL_BASE (or into it, as "."), where
    a server configured with MODEL_BASE/NAME finds nothing.

    Raises:
      InputError: naming the flag.
    """
    if (model_name in ("", ".", "..") or "/" in model_name
            or (os.altsep and os.altsep in model_name) or os.sep in model_name
            or any(ord(c) < 32 or ord(c) == 127 for c in model_name)):
        raise InputError(f"--model_name={model_name!r} must be one folder name (no '/', not "
                         "'.' or '..'): the export goes to MODEL_BASE/NAME/VERSION")


def next_version(model_dir: str) -> int:
    """The highest version folder + 1 (1 for none), among the names TF Serving reads
    as versions; a name it does not (\"²\", beyond int64) is not one.

    Raises:
      InputError: the highest is 2^63 - 1 already.
    """
    names = os.listdir(model_dir) if os.path.isdir(model_dir) else []
    versions = [v for v in map(_version_of, names) if v is not None]
    if max(versions, default=0) >= MAX_VERSION:  # (blamed on a --version not given)
        raise InputError(f"{model_dir} holds version 2^63 - 1, the highest TF Serving "
                         "reads: there is no next one; give a free --version")
    return max(versions, default=0) + 1


def _publish(tmp: str, parent: str, version: int, final: str) -> None:
    """Renames the finished export `tmp` to `final` (parent/version), unless another
    export took the version meanwhile (the same folder, or "007" for 7): rename fails
    on an existing folder that holds files, so nothing is ever overwritten.

    Raises:
      InputError: the version appeared during the export.
    """
    taken = InputError(f"{final} appeared during the export (another export took version "
                       f"{version}); not overwriting it: run again")
    try:
        check_version(parent, version)
    except InputError:
        raise taken from None
    fileio.sync_tree(tmp)  # every file on the disk before the version appears
    try:
        os.rename(tmp, final)
    except OSError as e:
        if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise taken from None
        raise
    fileio.sync_folder(parent)


TMP_PREFIX = ".tmp-"
# A temporary dir of another host is stale after this long; an export takes minutes.
STALE_AFTER_S = 24 * 3600
_TMP_NAME = re.compile(r"\.tmp-\d+-(?P<host>.+)-(?P<pid>\d+)-[a-z0-9_]+")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "host"


def _tmp_prefix(version: int) -> str:
    """.tmp-VERSION-HOST-PID- (mkdtemp adds a random [a-z0-9_] suffix)."""
    return f"{TMP_PREFIX}{version}-{_host()}-{os.getpid()}-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process
        return True
    return True


def _started_at(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch, to a clock tick), where the
    system says (Linux's /proc); else None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            ticks = int(f.read().rsplit(b")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/stat", "rb") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _made_by_running_process(pid: int, made: float) -> bool:
    """Whether process `pid` runs and can have made a dir last modified at `made`: one
    that started later is another process given a dead export's number (a restarted
    container's PIDs repeat)."""
    if not _alive(pid):
        return False
    started = _started_at(pid)
    return started is None or started <= made + 2.0  # (btime is to the second)


def clean_stale_tmp(model_dir: str, now: float | None = None) -> list[str]:
    """Removes the temporary dirs of dead exports from MODEL_BASE/NAME; returns their paths.

    Only directories directly in `model_dir` named as an export names them
    (.tmp-VERSION-HOST-PID-*: never a version, a file, a symlink or another
    .tmp- name) and only stale ones: made on this host by a process that no
    longer runs (or whose number a process started since holds), or, made on
    another host, last modified more than STALE_AFTER_S ago. A running
    export's dir is kept.
    """
    now = time.time() if now is None else now
    removed = []
    try:
        entries = list(os.scandir(model_dir))
    except FileNotFoundError:
        return removed
    for entry in entries:
        if not entry.name.startswith(TMP_PREFIX) or not entry.is_dir(follow_symlinks=False):
            continue
        m = _TMP_NAME.fullmatch(entry.name)
        if not m:  # not an export's temporary dir
            continue
        try:
            made = entry.stat(follow_symlinks=False).st_mtime
        except FileNotFoundError:
            continue
        if m.group("host") == _host():
            stale = not _made_by_running_process(int(m.group("pid")), made)
        else:
            stale = now - made > STALE_AFTER_S
        if stale:
            shutil.rmtree(entry.path, ignore_errors=True)
            if not os.path.lexists(entry.path):
                logging.warning("removed %s, left by an interrupted export", entry.path)
                removed.append(entry.path)
    return removed


def export(spec: ServingSpec, model_base: str, model_name: str, version: int | None = None,
           ids_only: bool = False, warmup: bool = True) -> str:
    """Writes MODEL_BASE/NAME/N atomically; returns its path.

    Stale temporary dirs of killed exports in MODEL_BASE/NAME are removed first
    (clean_stale_tmp).

    Raises:
      InputError: the version exists (nothing is overwritten) or is not >= 1; a
        model_name that is not one folder name; Keras on another backend than
        TensorFlow (nothing is written).
    """
    import keras
    import tensorflow as tf

    from electra_tf.serving import signatures
    from electra_tf.serving import warmup as warmup_lib

    if keras.backend.backend() != "tensorflow":  # its signatures are traced tf.functions
        raise InputError(f"an export is a TensorFlow SavedModel: build it with Keras on "
                         f"TensorFlow (KERAS_BACKEND=tensorflow, or unset; the export command "
                         f"does so itself); this process runs Keras on "
                         f"{keras.backend.backend()}")
    check_model_name(model_name)
    parent = os.path.join(model_base, model_name)
    # A first export that fails (or is refused) leaves no empty model folder behind
    with fileio.no_empty_folder_left(parent):
        os.makedirs(parent, exist_ok=True)
        clean_stale_tmp(parent)
        version = next_version(parent) if version is None else int(version)
        final = check_version(parent, version)
        tmp = tempfile.mkdtemp(prefix=_tmp_prefix(version), dir=parent)
        try:
            fileio.honour_umask(tmp, directory=True)  # mkdtemp's 0700 would hide it from others
            # An asset keeps its file's name: a --vocab_file named otherwise had been
            # assets/NAME, which clients (and docs) look for as vocab.txt. The copy is
            # staged in the version's own temporary folder (removed with it on a
            # failure), by tf.io.gfile (a --vocab_file may be gs:// or ram://)
            staging = os.path.join(tmp, ".staging")
            vocab = os.path.join(staging, "assets", "vocab.txt")  # (the asset's own name)
            os.makedirs(os.path.dirname(vocab))
            tf.io.gfile.copy(spec.tokenizer.vocab_file, vocab)
            archive, info = signatures.build_archive(spec, ids_only=ids_only, vocab_file=vocab)
            archive.write_out(tmp, verbose=False)
            shutil.rmtree(staging)
            signatures.declare_input_shapes(tmp)  # what saved_model_cli and the server list
            extra = os.path.join(tmp, "assets.extra")
            os.makedirs(extra, exist_ok=True)
            info.update(model_name=model_name, version=version)
            # UTF-8 whatever the locale (under LANG=C a label like "négatif" had been a
            # traceback; clients read the file as UTF-8)
            with open(os.path.join(extra, "export_info.json"), "w", encoding="utf-8") as f:
                json.dump(info, f, indent=2, ensure_ascii=False)
            if warmup:
                logs = warmup_lib.build_logs(model_name, info, spec.max_seq_length)
                warmup_lib.write(os.path.join(extra, warmup_lib.WARMUP_FILE), logs)
            _publish(tmp, parent, version, final)
        except BaseException as e:
            shutil.rmtree(tmp, ignore_errors=True)
            code = _disk_full(e)
            if code:  # named by the version: the file TensorFlow or h5py named is gone
                raise OSError(code, os.strerror(code), final) from None
            raise
        return final


def _disk_full(error: BaseException) -> int:
    """The errno of a write the disk refused (full, a quota, the file size limit), from
    Python's OSError or TensorFlow's error; 0 for any other error."""
    if isinstance(error, OSError):
        return error.errno if error.errno in framework_messages.DISK_FULL_ERRNOS else 0
    tf = sys.modules.get("tensorflow")
    if tf is None or not isinstance(error, (tf.errors.ResourceExhaustedError,
                                            tf.errors.OutOfRangeError)):
        return 0
    return framework_messages.disk_full_errno(error.message)
