"""The fine-tuning loop: one task, the pre-trained discriminator, tf.distribute.

Reads top to bottom like the pre-training loop (electra_tf/training.py), and
is built from the same runtime pieces (runtime.py): a per-replica
forward/backward under tf.function(jit_compile), then an all-reduce,
global-norm clipping and the AdamW update outside XLA, with per-replica
seeds. What differs:
- data are in-memory features (base.Features), shuffled per epoch with a
  seed, so resuming skips the batches of the current epoch already done;
- layer-wise learning-rate decay (embeddings at depth 0, layer i at i + 1,
  the head at n + 2) and 10% linear warmup, as the original;
- the head is the task's (`task.head_options`: SQuAD's joint span head by
  default), and the joint head reads the gold start positions in training
  (its end logits are conditioned on them);
- after every epoch: predictions on each dev split, the task's metrics, the
  official prediction files and results.json; a checkpoint.
Every split the run will read (train, dev with do_eval, test with
do_predict) is read and featurized before the first step, so bad data stops
the run before it trains; Ctrl-C lets the running chunk of steps finish
(runtime.InterruptGate), saves a checkpoint, then stops with one line. The
folder it writes is described in artifacts.py.

`FinetuningLoop` is what this TensorFlow loop (`Finetuning`) and the JAX
loop (`jax_trainer.JaxFinetuning`) share: the model, the data, the
optimizer, prediction, evaluation and the host loop. A backend adds where
variables are created, the step counter, the train iterator and steps, one
prediction batch, and its checkpoints.
"""

from __future__ import annotations

import contextlib
import glob
import os
import time

import keras
import numpy as np
import tensorflow as tf

from electra_tf import artifacts, runtime
from electra_tf.config import ConfigError, FinetuneRun, FinetuningConfig, model_size_of
from electra_tf.errors import InputError
from electra_tf.finetuning import base
from electra_tf.finetuning.losses import task_loss, task_loss_count
from electra_tf.modeling.finetuning import FinetuningModel
from electra_tf.tokenization import Tokenizer

INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")


def split_batch(batch: dict) -> tuple[dict, dict]:
    """A train batch -> (model inputs, labels).

    The joint span head also reads the gold start positions (its end logits
    are conditioned on them), so they are in both.
    """
    inputs = {k: batch[k] for k in INPUT_KEYS}
    labels = {k: v for k, v in batch.items() if k not in INPUT_KEYS}
    if "start_positions" in batch:
        inputs["start_positions"] = batch["start_positions"]
    return inputs, labels


class FinetuningLoop:
    """What both backends' fine-tuning loops share (see the module docstring).

    A subclass sets `chief` before this constructor runs, and provides
    `_scope()` (where variables are created), the `step` property,
    `train_iterator(epoch, skip)`, `train_steps(iterator, n)`,
    `_predict_batch(inputs)` and `make_checkpoints()` (an object with
    `restore()` -> path or None and `save(force)`).
    """

    chief = True

    def __init__(self, task, config: FinetuningConfig, run: FinetuneRun):
        self.task, self.config, self.run = task, config.validate(), run
        runtime.set_precision(run.mixed_precision)
        if not run.init_checkpoint:
            raise InputError("--init_checkpoint is required (a pre-training model_dir)")
        if task.head == "tagging" and not task.label_names:
            task.read(run.data_dir, "train")  # learns the tag set, which sizes the head
        with self._scope():
            keras.utils.set_random_seed(config.seed)
            discriminator, recorded_vocab = artifacts.load_discriminator(run.init_checkpoint,
                                                                         config.model_size)
            self.encoder_config = discriminator.config
            self.size = config.model_size or model_size_of(self.encoder_config)
            kind = task.head
            num_labels = max(1, len(task.label_names))
            self.model = FinetuningModel(discriminator.encoder, kind, num_labels,
                                         answerable=task.answerable, **task.head_options)
            self.model.build()
        vocab_file = run.vocab_file or recorded_vocab
        if not vocab_file:
            raise InputError("--vocab_file is required (none is recorded with the checkpoint)")
        self.tokenizer = Tokenizer(vocab_file, do_lower_case=config.do_lower_case)
        if self.tokenizer.vocab_size != self.encoder_config.vocab_size:
            raise ConfigError(f"{vocab_file} has {self.tokenizer.vocab_size} tokens but the "
                              f"checkpoint's vocab_size is {self.encoder_config.vocab_size}")
        self.max_seq_length = config.max_seq_length or task.default_max_seq_length
        self.epochs = config.num_train_epochs or task.default_epochs
        self._variables = list(self.model.trainable_variables)
        self._features: dict[str, tuple[list, base.Features]] = {}

    def _scope(self):
        return contextlib.nullcontext()

    # === Data ===
    def features(self, split: str) -> tuple[list, base.Features]:
        """Examples and features of a split, read and tokenized once per run."""
        cache = self._features
        if split not in cache:
            examples = self.task.read(self.run.data_dir, split)
            if not examples:
                raise InputError(f"the {split} split of {self.task.name} is empty")
            cache[split] = (examples, self.task.featurize(examples, self.tokenizer,
                                                          self.max_seq_length))
        return cache[split]

    def train_dataset(self, epoch: int, skip: int = 0) -> tf.data.Dataset:
        """The train split's global batches of `epoch` (seeded shuffle), after `skip`."""
        feats = self.features("train")[1]
        tensors = {**feats.inputs, **feats.labels}
        ds = tf.data.Dataset.from_tensor_slices(tensors)
        ds = ds.shuffle(len(feats), seed=self.config.seed + epoch, reshuffle_each_iteration=False)
        return ds.batch(self.config.train_batch_size, drop_remainder=True).skip(skip)

    # === The optimizer ===
    def build_optimizer(self, total_steps: int):
        """AdamW for `total_steps` with the run's learning rate, warmup and layer-wise decay."""
        cfg = self.config
        size = self.size if self.size != "custom" else "small"
        decay = cfg.resolved_layerwise_lr_decay(size)
        with self._scope():
            self.optimizer = runtime.build_optimizer(
                self._variables, cfg.resolved_learning_rate(size), total_steps,
                int(cfg.warmup_proportion * total_steps), weight_decay_rate=cfg.weight_decay_rate,
                adam_epsilon=cfg.adam_epsilon, adam_bias_correction=cfg.adam_bias_correction,
                layerwise_lr_decay=decay,
                n_layers=self.encoder_config.num_hidden_layers if decay else None)
        return self.optimizer

    # === Prediction and evaluation ===
    def predict(self, feats: base.Features) -> dict[str, np.ndarray]:
        """Model outputs for every row, batch by batch (the last batch padded)."""
        n, b = len(feats), self.config.eval_batch_size
        outputs: dict[str, list] = {}
        for start in range(0, n, b):
            chunk = {k: v[start:start + b] for k, v in feats.inputs.items()}
            size = next(iter(chunk.values())).shape[0]
            if size < b:  # one shape for the compiled function
                chunk = {k: np.concatenate([v, np.repeat(v[-1:], b - size, 0)])
                         for k, v in chunk.items()}
            for k, v in self._predict_batch(chunk).items():
                outputs.setdefault(k, []).append(np.asarray(v)[:size])
        return {k: np.concatenate(v) for k, v in outputs.items()}

    def evaluate(self, split: str, write_to: str | None = None) -> dict[str, float]:
        examples, feats = self.features(split)
        predictions = self.task.predictions(self.predict(feats), examples, feats)
        if write_to and self.chief:
            self.task.write_predictions(predictions, examples, write_to)
        return self.task.metrics(predictions, examples)

    def _dev_splits(self):
        return [s for s in self.task.splits() if s.startswith("dev")]

    def _splits_to_read(self) -> list[str]:
        """Every split this run reads: train, dev (do_eval), test (do_predict)."""
        splits = self.task.splits()
        return ["train"] + [s for s in splits if (self.run.do_eval and s.startswith("dev"))
                            or (self.run.do_predict and s.startswith("test"))]

    # === The host loop ===
    def _log(self, message):
        if self.chief:
            runtime.log("finetune", message)

    def train(self, stop_at_step: int | None = None) -> dict:
        """Trains for the configured epochs (resuming if possible); returns results.

        Args:
          stop_at_step: leave at this step with a checkpoint, as a preempted job
            would (the schedule still targets the full run).
        """
        cfg, run = self.config, self.run
        for split in self._splits_to_read():  # bad data stops the run before it trains
            self.features(split)
        _, train_feats = self.features("train")
        steps_per_epoch = len(train_feats) // cfg.train_batch_size
        if steps_per_epoch == 0:
            raise InputError(f"the train split has {len(train_feats)} windows, fewer than one "
                             f"batch of {cfg.train_batch_size}")
        os.makedirs(run.model_dir, exist_ok=True)
        total = int(round(self.epochs * steps_per_epoch))
        size = self.size if self.size != "custom" else "small"
        decay = cfg.resolved_layerwise_lr_decay(size)
        self.build_optimizer(total)
        checkpoints = self.make_checkpoints()
        restored = checkpoints.restore()
        if restored:
            self._log(f"resumed from {restored}")
        if self.chief:
            for name in artifacts.remove_stale_temporaries(run.model_dir):
                self._log(f"removed {name}, left by a write that was killed midway")
            artifacts.write_finetuning_config(
                run.model_dir, task=self.task, config=cfg, run=run, encoder=self.encoder_config,
                model_size=self.size, max_seq_length=self.max_seq_length, epochs=self.epochs,
                total_steps=total, layerwise_lr_decay=decay)
        results = artifacts.read_results(run.model_dir)
        self._log(f"{self.task.name}: {len(train_feats)} train windows, {steps_per_epoch} "
                  f"steps/epoch x {self.epochs} epochs = {total} steps, lr "
                  f"{cfg.resolved_learning_rate(size):.1e}, layer-wise decay {decay}")
        try:
            with runtime.InterruptGate() as gate:
                return self._train_loop(checkpoints, results, steps_per_epoch, total,
                                        stop_at_step, gate)
        except KeyboardInterrupt:
            checkpoints.save(force=True)
            raise runtime.Interrupted(self.step) from None

    def _train_loop(self, checkpoints, results, steps_per_epoch, total, stop_at_step, gate):
        cfg, run = self.config, self.run
        step = self.step
        end = min(total, stop_at_step or total)
        while run.do_train and step < end:
            epoch, done = divmod(step, steps_per_epoch)
            n = min(steps_per_epoch - done, end - step)
            iterator = self.train_iterator(epoch, done)
            t0 = time.monotonic()
            while n > 0:  # chunks that end at a checkpoint or at the epoch's end
                gate.check()  # a Ctrl-C stops here, between chunks (InterruptGate)
                k = min(n, cfg.save_checkpoints_steps - step % cfg.save_checkpoints_steps)
                loss = self.train_steps(iterator, k)
                step += k
                n -= k
                checkpoints.save(force=True)
                self._log(f"epoch {epoch + 1} step {step}/{total} loss {loss:.4f} "
                          f"({k * cfg.train_batch_size / (time.monotonic() - t0):.0f} ex/s)")
                t0 = time.monotonic()
            if run.do_eval and (step % steps_per_epoch == 0 or step == total):
                results[f"epoch_{epoch + 1}"] = self._eval_all(final=step == total)
                self._save_results(results)
        if step < total and run.do_train:
            self._log(f"stopped at step {step} as asked; run again to resume")
            return results
        if not run.do_train and run.do_eval:
            results["eval"] = self._eval_all(final=True)
            self._save_results(results)
        if run.do_predict:
            for split in (s for s in self.task.splits() if s.startswith("test")):
                examples, feats = self.features(split)
                preds = self.task.predictions(self.predict(feats), examples, feats)
                if self.chief:
                    self.task.write_predictions(preds, examples, self._prediction_path(split))
        if self.chief:
            artifacts.save_finetuned(run.model_dir, self.model)
        return results

    def _prediction_path(self, split: str) -> str:
        submission = self.task.submission_file(split) if split.startswith("test") else None
        if submission:  # GLUE's <TASK>.tsv
            return os.path.join(self.run.model_dir, submission)
        return os.path.join(self.run.model_dir,
                            f"{self.task.name}_{split}_predictions{self.task.prediction_suffix}")

    def _eval_all(self, final: bool) -> dict:
        out = {}
        for split in self._dev_splits():
            path = self._prediction_path(split) if final else None
            out[split] = self.evaluate(split, write_to=path)
            self._log(f"{split}: " + ", ".join(f"{k} {v:.4f}" for k, v in out[split].items()))
        return out

    def _save_results(self, results):
        if self.chief:
            artifacts.write_results(self.run.model_dir, results)


class Finetuning(FinetuningLoop):
    """Fine-tunes the discriminator on one task with TensorFlow (see the module docstring)."""

    def __init__(self, task, config: FinetuningConfig, run: FinetuneRun,
                 strategy: tf.distribute.Strategy | None = None):
        config = config.validate()
        self.strategy = strategy or runtime.make_strategy(
            run.strategy, run.num_devices, run.tpu, run.worker_startup_timeout_s)
        self.chief = runtime.is_chief(self.strategy)
        super().__init__(task, config, run)
        self._fwd_bwd = tf.function(self._forward_backward, jit_compile=run.jit_compile)
        self._predict = tf.function(lambda x: self.model(x, training=False),
                                    jit_compile=run.jit_compile)
        self._train_steps = tf.function(self._train_steps_fn)
        self._loss_sum = tf.Variable(0.0, trainable=False)  # host-side, per train_steps call

    def _scope(self):
        return self.strategy.scope()

    @property
    def step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    def train_iterator(self, epoch: int, skip: int = 0):
        """The distributed train split of `epoch` (seeded shuffle), after `skip` batches."""
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
        return iter(self.strategy.experimental_distribute_dataset(
            self.train_dataset(epoch, skip).with_options(options).prefetch(2)))

    # === The step ===
    def _forward_backward(self, batch, seed):
        inputs, labels = split_batch(batch)
        with tf.GradientTape() as tape:
            outputs = self.model(inputs, training=True, seed=seed)
            # Summed over the batch, as the original (so clipping acts); each
            # replica's share is averaged across replicas by the all-reduce.
            loss = task_loss(self.task.head, outputs, labels)
            scaled = loss / float(self.strategy.num_replicas_in_sync)
        grads = runtime.dense_gradients(tape, scaled, self._variables)
        return loss / task_loss_count(self.task.head, labels), grads  # reported: the mean

    def _replica_step(self, batch):
        seed = runtime.replica_seed(self.config.seed, self.optimizer.iterations)
        loss, grads = self._fwd_bwd(batch, seed)
        runtime.apply_reduced_gradients(self.optimizer, grads, self._variables,
                                        self.config.clip_norm)
        return loss

    def _train_steps_fn(self, iterator, num_steps):
        for _ in tf.range(num_steps):
            loss = self.strategy.run(self._replica_step, args=(next(iterator),))
            self._loss_sum.assign_add(self.strategy.reduce(tf.distribute.ReduceOp.MEAN, loss,
                                                           None))

    def train_steps(self, iterator, num_steps: int) -> float:
        """Runs `num_steps` optimizer steps (after build_optimizer); returns the mean loss.

        Args:
          iterator: from `train_iterator`.
        """
        self._loss_sum.assign(0.0)
        self._train_steps(iterator, tf.constant(num_steps))
        return float(self._loss_sum.numpy()) / num_steps

    def _predict_batch(self, inputs: dict) -> dict:
        return self._predict(inputs)

    def make_checkpoints(self) -> runtime.Checkpoints:
        """tf.train checkpoints of the model and the optimizer under model_dir/checkpoints."""
        directory = artifacts.checkpoint_dir(self.run.model_dir)
        if not tf.train.latest_checkpoint(directory) and glob.glob(
                os.path.join(directory, "jax-ckpt-*.npz")):
            raise InputError(f"{directory} holds JAX checkpoints (jax-ckpt-*.npz), which the "
                             "TensorFlow backend cannot resume: rerun with KERAS_BACKEND=jax, "
                             "or use another --model_dir")
        return runtime.Checkpoints(
            self.model, self.optimizer, directory, self.config.keep_checkpoint_max,
            self.config.save_checkpoints_steps, self.strategy)
