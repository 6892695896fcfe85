"""The pre-training loop: read this file top to bottom.

`Pretraining` checks the input (preflight.py), builds the model
(ElectraPretrainer), the optimizer and the masking, splits the training
algorithm into phases (phases.py: joint and adversarial training are one
phase; two-stage training is G alone by MLM, then D, initialized from G,
with G frozen), and runs the host loop (`train`):

  resume from the latest checkpoint, then, chunk by chunk, run the backend's
  compiled steps, print a console line, write TensorBoard summaries, save a
  checkpoint at the multiples of save_checkpoints_steps and evaluate every
  eval_every_steps; at the end, save, evaluate on held-out records and write
  the folder electra_tf/folders/pretraining.py describes.

What every step does is the backend's (backends/tensorflow.py,
backends/jax.py): each subclasses `Pretraining` and provides where variables
are created, the input iterators, the compiled train steps, one evaluation
batch, and its checkpoints. The input pipeline is a pure function of the seed
and is fast-forwarded on resume, so an interrupted run resumes exactly where
it stopped. Ctrl-C or SIGTERM lets the running chunk finish (loop.InterruptGate),
saves a checkpoint, then stops with one line (loop.Interrupted); on a run of
several processes (multi-worker, multi-host JAX) a signal to any of them stops
all of them at the same chunk boundary (`_stop_agreement`); a record
found corrupt mid-run saves a checkpoint, then stops with one line naming the
file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import time

import keras
import numpy as np

from electra_tf.core import framework_messages, signals
from electra_tf.core.config import PretrainingConfig, PretrainingRun, check_run
from electra_tf.core.errors import ConfigError, InputError, RecordError, RecordFileGone
from electra_tf.core.fileio import FolderLock, expand_files, is_file
from electra_tf.data.masking import ID_OUTSIDE_VOCABULARY
from electra_tf.data.tfrecord_reader import GONE, locate_corrupt_record, locate_misshaped_record
from electra_tf.folders import pretraining as pretraining_folder
from electra_tf.folders.files import (
    PRETRAINING_CONFIG,
    checkpoint_dir,
    latest_checkpoint_step,
    remove_stale_temporaries,
)
from electra_tf.folders.vocabulary import vocab_fingerprint
from electra_tf.objectives.flops import pretraining_flops
from electra_tf.objectives.pretrainer import ElectraPretrainer
from electra_tf.objectives.variants import get_objective
from electra_tf.training import preflight, reporting, summaries
from electra_tf.training.checkpoints import check_backend
from electra_tf.training.loop import (
    Interrupted,
    InterruptGate,
    SlowChunkNote,
    check_finite,
    chunk_size,
    different_flags,
    different_settings,
    finite_weights,
    flag_digests,
    log,
    raised_flags,
    save_after_interrupt,
    set_precision,
    settings_digest,
    stop_point,
    weights_checksum,
)
from electra_tf.training.optimization import pretraining_optimizer
from electra_tf.training.phases import Phase, make_phases


def set_random_seed(seed: int, tensorflow: bool = True) -> None:
    """keras.utils.set_random_seed(seed): Python's, NumPy's, Keras' and TensorFlow's seeds.

    `tensorflow=False` (the JAX backend on the numpy or packed reader: nothing of the run
    uses TensorFlow) leaves TensorFlow's out where it is not imported yet. Keras' call
    imports TensorFlow whenever it is installed, to seed it: about 3 s of CPU at each
    start of such a run, which its docs say never imports TensorFlow."""
    if tensorflow or "tensorflow" in sys.modules:
        keras.utils.set_random_seed(seed)
        return
    from keras.src.utils import module_utils  # the lazy `tensorflow` Keras' call asks

    lazy = module_utils.tensorflow
    held = lazy._available
    lazy._available = False  # "not installed", for this call only
    try:
        keras.utils.set_random_seed(seed)
    finally:
        lazy._available = held


def _data_files(train_data: str) -> set[str] | None:
    """The files --train_data's globs match, by the run's own rule (fileio.expand_files:
    data/x, ./data/x and ~/data/x, a glob and the list it matches, are one); a gs:// or
    other URL's pattern, and an absolute one that matches nothing now, as written; None
    where a relative pattern matches nothing from here (recorded by a run started in
    another directory): nothing to compare."""
    found = set()
    for pattern in (p.strip() for p in train_data.split(",")):
        if "://" in pattern:
            found.add(pattern)
        elif pattern:
            try:
                found.update(os.path.realpath(f) for f in expand_files(pattern, "--train_data"))
            except InputError:
                if not os.path.isabs(os.path.expanduser(pattern)):
                    return None
                found.add(os.path.expanduser(pattern))
    return found


# The records' patterns whose files pretraining_config.json records (data_files_record).
_FILES_KEYS = {"train_data": "train_files", "phase2_train_data": "phase2_train_files"}


def data_files_record(train_data: str) -> dict | None:
    """What pretraining_config.json records of the files --train_data matches (their
    number and the sha256 of their sorted real paths): a resume whose pattern now
    matches other files (shards added or removed under the same glob) is told, where
    the pattern alone compared equal. None where nothing can be compared (_data_files)."""
    import hashlib

    files = _data_files(train_data) if train_data else None
    if files is None:
        return None
    text = "\n".join(sorted(files)).encode("utf-8", "surrogateescape")
    return {"count": len(files), "sha256": hashlib.sha256(text).hexdigest()}


def start_warnings(cfg: PretrainingConfig) -> list[str]:
    """The warning lines a run starts with (warmups, phase 2's length), one a line: a
    warmup too long in two stages is two lines, each logged with its prefix (the
    second had none)."""
    return [line for warning in (cfg.short_warmup_warning(), cfg.long_warmup_warning(),
                                 cfg.phase2_length_warning())
            for line in warning.splitlines()]


def diverging_flags(cfg: PretrainingConfig) -> list[tuple[str, float, float]]:
    """The loss weights and decay a divergence's hint names where raised (loop.raised_flags)."""
    default = PretrainingConfig
    return [(name, getattr(cfg, name), getattr(default, name))
            for name in ("disc_weight", "gen_weight", "weight_decay_rate")]


# The run flags a process of a run may have of its own: paths (each machine's copy), its
# start-up wait, its place in the run, and what only it prints or prefetches.
_PROCESS_OWN = frozenset({
    "model_dir", "train_data", "eval_data", "phase2_train_data", "vocab_file", "tpu",
    "worker_startup_timeout_s", "log_examples", "jax_coordinator_address", "jax_process_id",
    "jax_device_prefetch"})


_CONTENT = " content"  # the digest of what a path flag names, beside the flag's own


def _size(path: str) -> int:
    """A data file's size (-1 on a remote file system: its name alone is compared)."""
    return -1 if "://" in path else os.path.getsize(path)


class Pretraining:
    """Builds everything a pre-training run needs and runs it (see the module docstring).

    A backend subclass provides: `backend` ("tensorflow" or "jax"),
    `tensorflow_io` (whether the run reads its data through TensorFlow; if
    not, nothing here imports it), `packed_input` (packed files, not TFRecords), `_setup_devices()` (sets `num_replicas`,
    `chief`, `multi_worker`), `_scope()`, `_make_checkpoints()`,
    `_batches(files, batch_size, seed, is_training, skip_batches, ..., what)`,
    `train_steps(iterator, n)`, `_eval_batch(batch, index)` and
    `_eval_results(n)`.

    Args:
      config: hyperparameters (PretrainingConfig).
      run: where and how (PretrainingRun).
    """

    backend = ""
    tensorflow_io = True
    packed_input = False  # the data are packed files (data/packed.py), not TFRecords
    num_replicas, chief, multi_worker = 1, True, False
    # The replicas this process runs (of num_replicas), and whether they are CPUs:
    # what the memory check reads (`memory_warnings`).
    local_replicas, on_cpu = 1, True

    def __init__(self, config: PretrainingConfig, run: PretrainingRun):
        check_run(config, run)  # each checked itself at construction
        self.config, self.run = config, run
        set_precision(run.mixed_precision, run.attention_implementation)
        self.files = preflight.preflight(config, run, tensorflow_io=self.tensorflow_io,
                                         packed=self.packed_input)
        self.masking = preflight.pretraining_masking(config, run)
        # The other backend's checkpoints: refused before the model is built and described
        check_backend(checkpoint_dir(run.model_dir), self.backend)
        self._setup_devices()
        self._agree_on_settings()  # every process of a run: before the model's collectives
        micro = config.train_batch_size // run.gradient_accumulation_steps
        # (named by its flags: "the micro-batch 1" had named none)
        sizes = [(f"the micro-batch (--train_batch_size={config.train_batch_size} / "
                  f"--gradient_accumulation_steps={run.gradient_accumulation_steps})", micro),
                 ("--eval_batch_size", config.eval_batch_size)]
        if config.phase2_steps:
            sizes.append((
                f"phase 2's micro-batch (--phase2_train_batch_size="
                f"{config.resolved_phase2_train_batch_size} / "
                f"--phase2_gradient_accumulation_steps="
                f"{run.resolved_phase2_gradient_accumulation_steps})",
                config.resolved_phase2_train_batch_size
                // run.resolved_phase2_gradient_accumulation_steps))
        for name, size in sizes:
            if size % self.num_replicas:
                raise ConfigError(f"{name}, {size}, does not split over {self.num_replicas} "
                                  "replicas")
        with self._scope():
            # the initial weights follow the seed
            set_random_seed(config.seed, tensorflow=self.tensorflow_io)
            self.model = ElectraPretrainer(config, get_objective(config, self.masking))
            self.model.build_with_dummy_batch()
            if config.prior_output_biases:
                self._set_prior_output_biases()
            # One optimizer over every trainable variable: a phase updates its own.
            self.optimizer = pretraining_optimizer(config, self.model.trainable_variables)
        self.phases = make_phases(config, self.model, run)
        self.flops = pretraining_flops(config)  # the original's count, recorded in the folder
        self.checkpoints = self._make_checkpoints()

    def _agree_on_settings(self) -> None:
        """A run of several processes: refuses (`different_settings`) where they were
        started with other hyperparameters or see other checkpoints. Backends override;
        a run of one process has nothing to compare."""

    def settings_digests(self, latest: bool = True) -> dict[str, list[int]]:
        """What every process of a run must share, each flag's eight bytes (0-255 each;
        loop.flag_digests): the hyperparameters, every run flag but a process's own
        (_PROCESS_OWN: paths, its wait, its id; whether --eval_data is given) and,
        with `latest`, the latest checkpoint's step ("checkpoints": a --model_dir that
        is not one shared folder). (A worker of its own --eval_every_steps had ended in
        a collective's traceback; of its own --mixed_precision, trained silently.)"""
        run = self.run
        digests = flag_digests(
            {**self.config.to_dict(),
             **{k: v for k, v in dataclasses.asdict(run).items() if k not in _PROCESS_OWN},
             "eval_data": bool(run.eval_data),  # whether it evaluates: a collective
             "phase2_gradient_accumulation_steps":
                 run.resolved_phase2_gradient_accumulation_steps})
        # What each process's own paths hold: copies of one data agree, other data (a
        # worker given the held-out shard had trained on it, silently) or another
        # vocabulary of the same size do not
        for what, flag in preflight.DATA_FIELDS.items():
            digests[flag + _CONTENT] = settings_digest(sorted(
                (os.path.basename(p), _size(p)) for p in self.files.get(what, [])))
        if run.vocab_file:
            digests["vocab_file" + _CONTENT] = settings_digest(vocab_fingerprint(run.vocab_file))
        if latest:
            digests["checkpoints"] = settings_digest(latest_checkpoint_step(run.model_dir) or 0)
        return digests

    @staticmethod
    def differing_settings(what: str, differ: list[str]) -> ConfigError:
        """The refusal (`what`: the flag that made the run several processes) of a run
        whose processes' `settings_digests` differ in the names `differ` ("checkpoints":
        the latest checkpoint's step in --model_dir)."""
        flags = [name for name in differ if name != "checkpoints" and _CONTENT not in name]
        if flags:
            return different_flags(what, flags)
        read = [name.removesuffix(_CONTENT) for name in differ if _CONTENT in name]
        if read:
            return different_settings(what, (
                f"the processes of the run read different {', '.join('--' + n for n in read)} "
                "(files of other names or sizes, or another vocabulary): give every process "
                "a copy of the same files"))
        return different_settings(what, (
            "the processes of the run see different checkpoints in --model_dir (a folder "
            "that is not one shared folder); give every process one shared --model_dir"))

    def _set_prior_output_biases(self):
        """`prior_output_biases`: the MLM heads' bias at log p(token), the RTD head's at
        the log-odds of a replaced token, both from the first training records.

        With Adam, a bias moves at most about the learning rate per step, so a
        loss whose optimum is far from 0 logits (log unigram frequencies; the
        rate of replaced tokens) is otherwise first reduced by moving every
        weight towards a constant output. A resumed run's checkpoint replaces them.
        """
        from electra_tf.data.tfrecord_reader import LOCAL_FILES, tensorflow_files
        from electra_tf.data.unigram import (
            log_unigram_prior,
            packed_unigram_counts,
            unigram_counts,
        )

        if self.packed_input:
            counts, n = packed_unigram_counts(self.files["train"], self.config.vocab_size)
        else:
            fs = tensorflow_files() if self.tensorflow_io else LOCAL_FILES
            counts, n = unigram_counts(self.files["train"], self.config.vocab_size, fs=fs)
        m = self.masking
        never = [m.cls_id, m.sep_id, m.mask_id]  # never masked, so never predicted
        prior = log_unigram_prior(counts, exclude_ids=never)
        p = np.exp(prior.astype(np.float64))
        p[never] = 0.0
        p /= p.sum()
        # a sample from the prior equals the original with probability sum p^2
        # (uniform replacements: 1/V); ELECTRA 15% scores the masked positions only
        same = 1.0 / self.config.vocab_size if self.config.uniform_generator else float(
            (p ** 2).sum())
        scored = 1.0 if self.config.objective == "electra_15" else self.config.mask_prob
        replaced = scored * (1.0 - same)
        logit = float(np.log(replaced / (1.0 - replaced)))
        for model in (self.model.generator, self.model.discriminator):
            head = getattr(model, "mlm_head", None)
            if head is not None:
                head.output_bias.assign(prior)
            head = getattr(model, "rtd_head", None)
            if head is not None:
                head.dense_prediction.bias.assign(np.full((1,), logit, np.float32))
        self._log(f"prior_output_biases: unigram prior from {n:,} sequences "
                  f"({int(counts.sum()):,} tokens); RTD bias {logit:.3f} "
                  f"(replaced rate {replaced:.4f})")

    def _scope(self):
        return contextlib.nullcontext()

    @property
    def step(self) -> int:
        return int(keras.ops.convert_to_numpy(self.optimizer.iterations))

    def phase_at(self, step: int) -> Phase:
        return next(p for p in self.phases if p.start <= step < p.end)

    def memory_warnings(self, available: int | None = None) -> list[str]:
        """The phases whose step needs more memory than the machine has (CPU only:
        training/memory.py), each as one warning; `available` bytes (None: the
        machine's)."""
        if not self.on_cpu:
            return []
        from electra_tf.training import memory

        if available is None:
            available = memory.available_bytes()
        cfg = self.config
        return memory.pretraining_warnings(
            cfg, self.phases, self.local_replicas, self.num_replicas, self.masking_at,
            available, step=latest_checkpoint_step(self.run.model_dir) or 0,
            phase2_inherits=bool(cfg.phase2_steps)
            and not self.run.phase2_gradient_accumulation_steps)

    def _log(self, message: str, everyone: bool = False) -> None:
        if self.chief or everyone:
            log("pretrain", message)

    # === Checkpoints ===
    def restore(self) -> int:
        """Resumes from the latest checkpoint if there is one. Returns the step."""
        path = self.checkpoints.restore()
        if path:
            self._log(f"resumed from {path} at step {self.step}")
        return self.step

    def save_checkpoint(self) -> str | None:
        return self.checkpoints.save()

    def initialize_discriminator_from_generator(self):
        """Two-stage training: D's encoder takes G's weights (equal sizes)."""
        self.model.discriminator.encoder.set_weights(self.model.generator.encoder.get_weights())
        self._log(f"step {self.step}: discriminator initialized from the generator")

    def _note_changed_settings(self) -> None:
        """Says so when resumed checkpoints were trained with other settings that change
        what is trained (preflight.changed_settings: --objective, --seed, --mask_prob,
        the batch size, ...; check_resume refuses those that change the variables):
        allowed, to continue a model another way, but the record is rewritten."""
        folder = pretraining_folder.PretrainingFolder.open(self.run.model_dir,
                                                           discriminator=False)
        if not folder.recorded:  # removed (or never copied) beside the checkpoints
            self._log(f"note: {self.run.model_dir} holds checkpoints but no "
                      f"{PRETRAINING_CONFIG}: this run's flags could not be checked against "
                      "those they were trained with; it records its own")
            return
        before = folder.config
        changes = preflight.changed_settings(before, self.config, self.step) if before else []
        recorded_run = folder.recorded.get("run", {})
        # and the precision, a run option (the variables are float32 either way)
        precision = recorded_run.get("mixed_precision")
        if precision and precision != self.run.mixed_precision:
            changes.append(f"--mixed_precision={self.run.mixed_precision} (it was {precision})")
        # and the run options that change the batches: the records (new data, continued
        # on purpose or not), the micro-batches, the JAX reader (packed: other sequences)
        for field, start in (("train_data", 0), ("phase2_train_data", self.config.phase2_start
                                                  if self.config.phase2_steps else None)):
            if start is None or self.step <= start:  # (phase 2's once it has trained)
                continue
            data = recorded_run.get(field)
            before_files = _data_files(data) if isinstance(data, str) and data else None
            if before_files is not None and before_files != _data_files(getattr(self.run, field)):
                changes.append(f"--{field}={getattr(self.run, field)} (it was {data})")
                continue
            # the same pattern, or one matching the same files then: the files now
            then, now = folder.recorded.get(_FILES_KEYS[field]), self.train_files.get(field)
            if isinstance(then, dict) and now and then.get("sha256") not in (None,
                                                                             now["sha256"]):
                changes.append(f"the files --{field} matches ({now['count']} now, other "
                               f"than the {then.get('count')} recorded)")
        # the micro-batches of a phase that trains on (phase 1's) or has trained (phase 2's)
        start = self.config.phase2_start if self.config.phase2_steps else None
        old = recorded_run.get("gradient_accumulation_steps")
        ran = {"gradient_accumulation_steps": old,
               "phase2_gradient_accumulation_steps":
                   recorded_run.get("phase2_gradient_accumulation_steps") or old}
        for name, used in (("gradient_accumulation_steps", start is None or self.step < start),
                           ("phase2_gradient_accumulation_steps",
                            start is not None and self.step > start)):
            new = (self.run.gradient_accumulation_steps if name == "gradient_accumulation_steps"
                   else self.run.resolved_phase2_gradient_accumulation_steps)
            if used and isinstance(ran[name], int) and ran[name] != new:
                # (it had said "the same global batch" beside the batch size's own change)
                batch = ("train_batch_size" if name == "gradient_accumulation_steps"
                         else "resolved_phase2_train_batch_size")
                same = before is None or getattr(before, batch) == getattr(self.config, batch)
                changes.append(f"--{name}={new} (it was {ran[name]}"
                               + (": the same global batch in other micro-batches)" if same
                                  else ")"))
        # and XLA on TensorFlow, whose random ops draw other masks and samples than the
        # same seed's without it (JAX compiles every step: it records true)
        old, new = recorded_run.get("jit_compile"), self.run.jit_compile
        if isinstance(old, bool) and old != new and self.backend == "tensorflow":
            changes.append(f"--jit_compile={str(new).lower()} (it was {str(old).lower()}: "
                           "compiled steps draw other masks and samples)")
        old, new = recorded_run.get("jax_input_pipeline"), self.run.jax_input_pipeline
        if old is not None and old != new and self.backend == "jax":
            changes.append(f"--jax_input_pipeline={new} (it was {old})")
        # and the replicas the global batch is split over (TensorFlow: other masks and
        # input order; JAX's batches and masks are a one-process run's, whatever the split)
        replicas = folder.recorded.get("replicas")
        if isinstance(replicas, int) and replicas != self.num_replicas:
            same = ("the same batches and masks" if self.backend == "jax" else
                    "other masks and input order, the same global batch")
            changes.append(f"the batch split over {self.num_replicas} replica(s) (it was "
                           f"{replicas}: {same})")
        if changes:
            self._log(f"note: this run continues checkpoints trained with other settings: "
                      f"{', '.join(changes)}; {PRETRAINING_CONFIG} now records these")

    # === Data ===
    def masking_at(self, phase: Phase):
        """The masking of a phase's batches: phase 2 masks int((mask_prob + 0.005) * L)
        positions at its own L, as the original sizes max_predictions_per_seq."""
        if phase.max_seq_length == self.config.max_seq_length:
            return self.masking
        return dataclasses.replace(
            self.masking, max_predictions_per_seq=self.config.phase2_max_predictions_per_seq)

    def make_train_iterator(self, step: int):
        """Training micro-batches of the phase at `step` (its train_batch_size /
        gradient_accumulation_steps, its records and length), positioned at `step`.

        Resuming skips the batches already used (before parsing and masking,
        which is cheap) instead of checkpointing the iterator: this works for
        every strategy, and checkpoints stay small. Phase 2's records are read
        from their first batch at the phase's start.
        """
        phase = self.phase_at(step)
        k = phase.gradient_accumulation_steps
        return self._batches(phase.train_data, phase.train_batch_size // k,
                             self.config.seed, True, skip_batches=(step - phase.data_start) * k,
                             max_seq_length=phase.max_seq_length,
                             masking=self.masking_at(phase),
                             what="--phase2_train_data" if phase.data_start else "--train_data")

    # === Evaluation ===
    def evaluate(self, num_steps: int | None = None) -> dict:
        """Metrics of the original's eval, on up to num_eval_steps held-out batches.

        The masks and samples follow `seed + 1`, the same at every evaluation.
        """
        if not self.run.eval_data:
            return {}
        limit, n = num_steps or self.config.num_eval_steps, 0
        # A bad record met now is --eval_data's (_bad_record, in train's handler: the
        # flag stays set when an error leaves, and train clears it at its start).
        self._evaluating = True
        try:
            batches = self._batches(self.run.eval_data, self.config.eval_batch_size,
                                    self.config.seed + 1, False, what="--eval_data")
        except InputError as e:  # moved, deleted or damaged since the run started
            raise InputError(f"{_flagged('--eval_data', e)}, met at step {self.step}; "
                             f"{self._save_after_bad_record()}; restore the files, then "
                             "rerun to resume") from None
        for batch in batches:
            stop_point()  # a second Ctrl-C or SIGTERM stops here (loop.InterruptGate)
            if n >= limit:
                break
            if n == 0 and self.run.log_examples and self.chief:
                self._log_example(batch)
            self._eval_batch(batch, n)
            n += 1
        if hasattr(batches, "close"):  # a reader thread ahead (data/prefetch.py)
            batches.close()
        self._evaluating = False
        if n == 0:
            self._log("warning: the eval data is smaller than one eval batch; no eval")
            return {}
        if n < limit and not num_steps and not self._said_eval_is_short:
            self._said_eval_is_short = True  # (once a run: every evaluation reads the same)
            self._log(f"note: --eval_data holds {n} batch{'es' if n > 1 else ''} of "
                      f"--eval_batch_size={self.config.eval_batch_size}, fewer than "
                      f"--num_eval_steps={limit}: each evaluation reads {n}")
        return self._eval_results(n)

    _said_eval_is_short = False

    def _log_example(self, batch) -> None:
        """--log_examples: the batch's first sequence through the generator and the
        discriminator (`training.examples`), with the evaluation's seed."""
        from electra_tf.text.vocab import load_vocab
        from electra_tf.training.examples import masked_example_lines

        first = {k: v[:1] for k, v in self._first_replica(batch).items()}
        objective = self.model.objective
        seed = keras.ops.convert_to_tensor(np.asarray([self.config.seed + 1, 0], np.int32))
        outputs = self.model(first, training=False, seed=seed, objective=objective)
        rtd = None
        if "fake" in outputs and "rtd_logits" in outputs["disc"]:
            rtd = keras.ops.convert_to_numpy(objective.rtd_logits(outputs["fake"],
                                                                  outputs["disc"]))
        as_numpy = keras.tree.map_structure(keras.ops.convert_to_numpy, outputs)
        if self._vocab is None:
            self._vocab = load_vocab(self.run.vocab_file)
        first = {k: keras.ops.convert_to_numpy(v) for k, v in first.items()}
        lines = masked_example_lines(first, as_numpy, self._vocab, rtd)
        self._log(f"at step {self.step}, {lines[0]}")
        for line in lines[1:]:
            self._log(line)

    _vocab = None

    def _first_replica(self, batch) -> dict:
        """The part of a global batch this process's first replica reads (the backend's
        batches: the TF loop's are distributed values)."""
        return batch
    train_files: dict = {}  # field -> data_files_record(its pattern), by the chief at the start

    # === The host loop ===
    def train(self, stop_at_step: int | None = None) -> dict:
        """Trains to num_train_steps (resuming if possible); returns the final eval.

        Args:
          stop_at_step: leave early at this step, with a checkpoint, as a
            preempted job would (the schedule still targets num_train_steps).
        """
        os.makedirs(self.run.model_dir, exist_ok=True)
        # One run per model_dir (the chief writes it): a second is refused by name.
        with FolderLock(self.run.model_dir, "--model_dir") if self.chief \
                else contextlib.nullcontext():
            return self._train(stop_at_step)

    def _train(self, stop_at_step: int | None) -> dict:
        cfg, run = self.config, self.run
        self._evaluating = False
        self.restore()
        if self.step > cfg.num_train_steps:
            raise ConfigError(
                f"--num_train_steps={cfg.num_train_steps}: {run.model_dir} holds a checkpoint "
                f"at step {self.step}, past it; give --num_train_steps >= {self.step} to "
                "continue it, or another --model_dir")
        if self.chief:
            for name in remove_stale_temporaries(run.model_dir):
                self._log(f"removed {name}, left by a write that did not finish")
            self.train_files = {field: files for field in _FILES_KEYS  # (recorded, compared)
                                if (files := data_files_record(getattr(run, field)))}
            # A finished run run again trains nothing: its record stays what trained it
            # (it had been rewritten with this run's flags, and a note said they continue it)
            finished = self.step >= cfg.num_train_steps and bool(
                pretraining_folder.PretrainingFolder.open(run.model_dir,
                                                          discriminator=False).recorded)
            if self.step and not finished:
                self._note_changed_settings()
            if self.step >= cfg.num_train_steps:  # (a rerun had said `resumed from` alone)
                self._log(f"already at --num_train_steps={cfg.num_train_steps}: nothing to "
                          "train; " + "evaluating and " * bool(run.eval_data)
                          + "writing the final weights again")
            # What ran: JAX compiles every step whatever --jit_compile said.
            ran = dataclasses.replace(run, jit_compile=True) if self.backend == "jax" else run
            if not finished:
                pretraining_folder.write_pretraining_config(
                    run.model_dir, cfg, ran, backend=self.backend, replicas=self.num_replicas,
                    training_flops=self.flops.to_dict(),
                    **{_FILES_KEYS[field]: files for field, files in self.train_files.items()})
            for line in start_warnings(cfg):
                self._log(line)
        end = min(cfg.num_train_steps, stop_at_step or cfg.num_train_steps)
        # (no training writer where nothing is left to train: a finished run run again had
        # added an empty event file to train/ each time)
        train_writer, eval_writer = (
            summaries.summary_writer(os.path.join(run.model_dir, name) if self.chief and (
                name == "eval" or self.step < end) else None, tensorflow=self.tensorflow_io)
            for name in ("train", "eval"))
        gate = InterruptGate(self._stop_agreement())
        final = None
        try:
            with gate:
                if self.step == 0 and run.eval_data:
                    self._report_eval(self.evaluate(), eval_writer)
                self._train_chunks(end, gate, train_writer, eval_writer)
                self.save_checkpoint()
                if self.step < cfg.num_train_steps:
                    self._log(f"stopped at step {self.step} as asked; run again to resume")
                    return {}
                final = self.evaluate() if run.eval_data else {}
        except KeyboardInterrupt:
            if final is None or not gate.safe_to_save:  # (a second signal: this process
                self._interrupted(gate)  # alone, as before; the others end on its loss)
            # the signal came in the last chunk: only the final files are left to write,
            # in seconds (it had stopped without them, exit 143, for a rerun to write)
            self._log(f"{signals.name(gate.signum or signal.SIGINT)} during the last steps: "
                      "the run has finished; writing its final files")
        except _tensorflow_data_errors() as e:
            raise self._bad_record(e) from None
        except RecordError as e:  # the NumPy input names the file itself
            advice = "restore it" if isinstance(e, RecordFileGone) else \
                "replace or remove that file"
            raise InputError(f"{e}, met at step {self.step}; {self._save_after_bad_record()}; "
                             f"{advice}, then rerun to resume") from None
        except Exception as e:
            lost = self._peer_lost(e)
            if lost is None:
                raise
            raise lost from None
        self._report_eval(final, eval_writer)
        if reporting.collapse_line(final):
            self._log(reporting.collapse_line(final))
        if self.chief:
            pretraining_folder.remove_final_outputs(run.model_dir, self.step)  # (an earlier end's)
            pretraining_folder.save_discriminator(run.model_dir, self.model.kept_discriminator())
            pretraining_folder.save_generator(run.model_dir, self.model.generator)
            pretraining_folder.write_final_eval(run.model_dir, self.step, final)
            self._log(f"wrote {run.model_dir}/{pretraining_folder.DISCRIMINATOR_WEIGHTS} and "
                      f"{pretraining_folder.DISCRIMINATOR_CONFIG}")
        checksum = weights_checksum(self.model.trainable_variables)
        self._log(f"final weights checksum {checksum:.8e}" + ("" if self.chief else " (worker)"),
                  everyone=True)
        return final

    def _interrupted(self, gate: InterruptGate):
        """Raises Interrupted for a Ctrl-C or SIGTERM the gate held, after the save."""
        # Weights a diverging step left NaN are never saved (a second signal stops
        # before the chunk's check).
        # (Read only where a save may follow: a process that stopped alone, on a
        # second signal, saves nothing and runs nothing the others do not.)
        finite = (self.state_lost or not gate.safe_to_save
                  or finite_weights(self.model.weights))
        saved, why = (save_after_interrupt(self._save_after_interrupt)
                      if gate.safe_to_save and finite else (False, ""))
        raise Interrupted(self.step, saved=saved, signum=gate.signum,
                          left_peers=not gate.safe_to_save,
                          why=why if finite else " (the weights had become NaN or "
                                                 "infinite: the run was diverging)") from None

    def _train_chunks(self, end: int, gate: InterruptGate, train_writer, eval_writer) -> None:
        """Steps to `end` in chunks that stop at every log, save, eval and phase boundary."""
        cfg, run = self.config, self.run
        log_every = run.log_every_steps or cfg.iterations_per_loop
        if self.step >= end:  # a finished run again, or one killed while writing its weights
            return
        start_step, start_time = self.step, time.monotonic()
        slow_chunks = SlowChunkNote(self._log, log_every, cfg.iterations_per_loop,
                                    cfg.save_checkpoints_steps, run.eval_every_steps)
        iterator = self.make_train_iterator(self.step)
        data_start = self.phase_at(self.step).data_start
        since_line = []  # the chunks since the last console line (reporting.merge_chunks)
        # The ETA's clock starts again after this process's first chunk, whose time holds
        # the step's tracing or compilation (it had been an early line's ETA many times
        # over, and still 25% high hundreds of steps on, after every resume).
        timed = None  # (step, time) where the first chunk ended
        try:
            while self.step < end:
                gate.check()  # a Ctrl-C stops here, between chunks (InterruptGate)
                step = self.step
                phase = self.phase_at(step)
                if phase.data_start != data_start:  # phase 2: its own records, length, batch
                    iterator, data_start = self._phase_iterator(step), phase.data_start
                if phase.data_start and step == phase.start:
                    self._log(f"step {step}: phase 2 starts: max_seq_length "
                              f"{phase.max_seq_length}, train_batch_size "
                              f"{phase.train_batch_size} (gradient_accumulation_steps "
                              f"{phase.gradient_accumulation_steps}), "
                              f"{self.masking_at(phase).max_predictions_per_seq} masked "
                              "positions")
                if phase.name == "two_stage_discriminator" and step == phase.start:
                    self.initialize_discriminator_from_generator()
                # (--iterations_per_loop too: where --log_every_steps was set longer, a
                # Ctrl-C or SIGTERM had waited for a whole log period)
                n = chunk_size(step, min(end, phase.end), log_every, cfg.iterations_per_loop,
                               cfg.save_checkpoints_steps, run.eval_every_steps)
                t0 = time.monotonic()
                results = self.train_steps(iterator, n)
                elapsed = time.monotonic() - t0
                slow_chunks.chunk(n, elapsed)
                saving = step + n == end or (step + n) % cfg.save_checkpoints_steps == 0
                check_finite(float(results["loss"]), step + 1, step + n,
                             self.checkpoints.latest,
                             f"lower --learning_rate (it was {cfg.learning_rate})"
                             + raised_flags(diverging_flags(cfg)) + ", or check "
                             "that --train_data's records were built with this --vocab_file",
                             grad_norm=float(results["grad_norm"]),
                             weights_finite=(finite_weights(self.model.weights) if saving
                                             else None))
                stop_point()  # a second signal during the chunk: stop before the save
                results["learning_rate"] = float(keras.ops.convert_to_numpy(
                    self.optimizer.learning_rate))  # the next step's
                since_line.append((n, elapsed, n * phase.train_batch_size, results))
                step = self.step
                if timed is None:
                    timed = (step, time.monotonic())
                # (and at a phase's end: a line had mixed two phases' or stages' steps)
                if step % log_every == 0 or step == end or step == phase.end:
                    line = reporting.merge_chunks(since_line)
                    since_line.clear()
                    summaries.write_scalars(train_writer, step,
                                            reporting.tensorboard_scalars(line))
                    since, at = timed if step > timed[0] else (start_step, start_time)
                    eta = (time.monotonic() - at) / max(step - since, 1) * (
                        cfg.num_train_steps - step)
                    self._log(reporting.train_line(line, step, cfg.num_train_steps, eta,
                                                   phase=phase.name))
                if step % cfg.save_checkpoints_steps == 0:
                    self.save_checkpoint()
                if run.eval_every_steps and step % run.eval_every_steps == 0 \
                        and step < cfg.num_train_steps:
                    self._report_eval(self.evaluate(), eval_writer)
        except BaseException:  # a stop of any kind: the steps trained since the last line
            if since_line:     # keep their point (a diverging chunk is never among them)
                try:
                    summaries.write_scalars(train_writer, self.step,
                                            reporting.tensorboard_scalars(
                                                reporting.merge_chunks(since_line)))
                except Exception:  # (a full disk, say: the stop's own error is the one told)
                    pass
            raise

    def _phase_iterator(self, step: int):
        """The records of the phase starting at `step`, mid-run: where they are gone
        (moved or deleted since the run started), the steps so far are saved first."""
        try:
            return self.make_train_iterator(step)
        except InputError as e:
            raise InputError(f"{_flagged('--phase2_train_data', e)}, met at step {step} where "
                             "phase 2 starts; "
                             f"{self._save_after_bad_record()}; restore the files, then "
                             "rerun to resume") from None

    def _report_eval(self, results: dict, writer) -> None:
        if results:
            summaries.write_scalars(writer, self.step, reporting.tensorboard_scalars(results))
            self._log(reporting.eval_line(results, self.step))

    # === Faults ===
    def _stop_agreement(self):
        """On a run of several processes, the collective by which they agree to stop
        (loop.InterruptGate's `agree`); None for one process."""
        return None

    @property
    def state_lost(self) -> bool:
        """Whether an interrupt left no training state in the variables (the JAX
        backend's compiled step, whose buffers are gone): nothing to read or save."""
        return False

    def _save_after_interrupt(self) -> bool:
        """Saves after a Ctrl-C; False where no consistent state was left to save."""
        return self.save_checkpoint() is not None

    def _peer_lost(self, error: Exception) -> Exception | None:
        """A backend's errors.PeerLost for `error` when it says another process of the run
        went away (the JAX backend's multi-host runs), else None."""
        return None

    def _save_after_bad_record(self) -> str:
        """Saves a checkpoint where one can be; says what happened."""
        if self.multi_worker:
            return "no checkpoint saved (a multi-worker save needs every worker)"
        self.save_checkpoint()
        return f"checkpoint saved at step {self.step}"

    _evaluating = False  # (set while evaluate reads --eval_data)

    def _records_read(self) -> tuple[str, str, int]:
        """(flag, length flag, length) of the records being read: --eval_data in an
        evaluation, else the training records of the step's phase."""
        cfg = self.config
        if self._evaluating:
            return "--eval_data", "--max_seq_length", cfg.max_seq_length
        phase = self.phase_at(min(self.step, cfg.num_train_steps - 1))
        if phase.data_start:
            return "--phase2_train_data", "--phase2_max_seq_length", phase.max_seq_length
        return "--train_data", "--max_seq_length", cfg.max_seq_length

    def _bad_record(self, error) -> Exception:
        """A corrupt or misshaped record met mid-run: save a checkpoint, name the file.

        tf.data's messages name neither the file nor the flag; the file is
        found from the byte offset (`locate_corrupt_record`). A DataLossError is a
        corrupt record; an InvalidArgumentError is a bad record only where its
        message says so (core/framework_messages.py), and other errors are
        returned unchanged (bugs keep their traceback).
        """
        message = error.message or ""
        data_loss, _, not_found = _tensorflow_data_errors()
        corrupt = isinstance(error, data_loss)
        misshaped = framework_messages.misshaped_record(message)
        bad_id = framework_messages.id_out_of_range(message)
        outside = ID_OUTSIDE_VOCABULARY in message  # the input's own check (data/masking.py)
        listed = self.files["train"] + self.files.get("phase2", []) + self.files["eval"]
        # A file moved or deleted mid-run, met as tf.data opens it again (its next pass)
        gone = isinstance(error, not_found) and next(
            (path for path in listed if path in message and not is_file(path)), None)
        if not corrupt and not misshaped and not bad_id and not outside and not gone:
            return error
        step = self.step
        source, length_flag, length = self._records_read()
        saved = self._save_after_bad_record()
        if gone:
            return InputError(f"{gone}: {GONE}, met at step {step}; {saved}; restore it, "
                              "then rerun to resume")
        if corrupt:
            path = locate_corrupt_record(listed, message)
            where = path or f"a file of {source}"
            found = framework_messages.corrupt_record(message)
            said = found[0] if found else message.strip().split("\n")[0][:200]
            return InputError(f"{where}: corrupt TFRecord ({said}), met at step {step}; "
                              f"{saved}; replace or remove that file, then rerun to resume")
        if bad_id:  # the embedding lookup's check, on TensorFlow's CPU kernels
            return InputError(
                f"a record of {source} holds token id {bad_id[0]}, "
                f"outside the vocabulary's [0, {bad_id[1]}), met at step {step}; {saved}; "
                "rebuild the data with this --vocab_file, then rerun to resume")
        if outside:
            return InputError(
                f"a record of {source} holds a token id outside the "
                f"vocabulary's [0, {self.config.vocab_size}), met at step {step}; {saved}; "
                "rebuild the data with this --vocab_file, then rerun to resume")
        files = {"--train_data": "train", "--phase2_train_data": "phase2",
                 "--eval_data": "eval"}[source]
        found = locate_misshaped_record(self.files.get(files, []), length)
        where = (f"{found[0]}: record {found[1]}" if found else f"a record of {source}")
        return InputError(
            f"{where} does not fit {length_flag}={length} ({misshaped}), met at step "
            f"{step}; {saved}; rebuild " + ("that file" if found else f"the records of {source}")
            + ", then rerun to resume")


def _flagged(flag: str, error: Exception) -> str:
    """`error`'s message, led by `flag` where it does not name it already (tf.data's
    and the NumPy reader's name no flag; the packed reader's name the one it was given)."""
    message = str(error)
    return message if message.startswith(flag) else f"{flag}: {message}"


def _tensorflow_data_errors() -> tuple:
    """tf.data's errors for a bad record; none where TensorFlow was never imported."""
    tf = sys.modules.get("tensorflow")
    return ((tf.errors.DataLossError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError)
            if tf else ())

