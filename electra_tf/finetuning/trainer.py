"""The fine-tuning loop: one task, the pre-trained discriminator, tf.distribute.

Reads top to bottom like the pre-training loop (electra_tf/training.py), whose
step pieces it reuses: a per-replica forward/backward under
tf.function(jit_compile), then an all-reduce, global-norm clipping and the
AdamW update outside XLA, with per-replica seeds. What differs:
- data are in-memory features (base.Features), shuffled per epoch with a
  seed, so resuming skips the batches of the current epoch already done;
- layer-wise learning-rate decay (embeddings at depth 0, layer i at i + 1,
  the head at n + 2) and 10% linear warmup, as the original;
- after every epoch: predictions on each dev split, the task's metrics, the
  official prediction files and results.json; a checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from electra_tf.config import (
    ConfigError,
    EncoderConfig,
    FinetuneRun,
    FinetuningConfig,
    model_size_of,
)
from electra_tf.errors import InputError
from electra_tf.finetuning import base
from electra_tf.finetuning.losses import task_loss
from electra_tf.modeling.finetuning import FinetuningModel
from electra_tf.modeling.models import build_discriminator
from electra_tf.optimization import create_optimizer
from electra_tf.tokenization import Tokenizer
from electra_tf.training import (
    apply_reduced_gradients,
    dense_gradients,
    is_chief,
    make_strategy,
    variable_checkpoint,
)

INPUT_KEYS = ("input_ids", "input_mask", "segment_ids")


def load_pretrained(init_checkpoint: str, model_size: str = ""):
    """A discriminator with pre-trained weights, and the vocab recorded with it.

    Args:
      init_checkpoint: a pre-training model_dir (holding discriminator.weights.h5
        and discriminator_config.json) or the .weights.h5 file itself.
      model_size: if given, the checkpoint must be of this size.

    Returns:
      (discriminator, vocab_file or "").
    Raises:
      InputError: files missing; ConfigError: wrong size or shapes.
    """
    weights = init_checkpoint
    if os.path.isdir(init_checkpoint):
        weights = os.path.join(init_checkpoint, "discriminator.weights.h5")
    folder = os.path.dirname(os.path.abspath(weights))
    config_file = os.path.join(folder, "discriminator_config.json")
    for path in (weights, config_file):
        if not os.path.exists(path):
            raise InputError(f"init_checkpoint: {path} not found (expected a pre-training "
                             "model_dir with discriminator.weights.h5 and discriminator_config.json)")
    with open(config_file) as f:
        config = EncoderConfig.from_dict(json.load(f))
    size = model_size_of(config)
    if model_size and size != model_size:
        raise ConfigError(f"{weights} holds a {size}-sized discriminator (hidden "
                          f"{config.hidden_size}, {config.num_hidden_layers} layers), not "
                          f"--model_size={model_size}")
    discriminator = build_discriminator(config)
    try:
        discriminator.load_weights(weights)
    except ValueError as e:
        raise ConfigError(f"{weights} does not fit discriminator_config.json: {e}") from None
    vocab = ""
    pretraining = os.path.join(folder, "pretraining_config.json")
    if os.path.exists(pretraining):
        with open(pretraining) as f:
            vocab = json.load(f).get("run", {}).get("vocab_file", "")
    return discriminator, vocab


class Finetuning:
    """Fine-tunes the discriminator on one task (see the module docstring)."""

    def __init__(self, task, config: FinetuningConfig, run: FinetuneRun,
                 strategy: tf.distribute.Strategy | None = None):
        self.task, self.config, self.run = task, config.validate(), run
        self.strategy = strategy or make_strategy(run.strategy, run.num_devices, run.tpu)
        self.chief = is_chief(self.strategy)
        keras.mixed_precision.set_dtype_policy(
            "mixed_bfloat16" if run.mixed_precision == "bf16" else "float32")
        if not run.init_checkpoint:
            raise InputError("--init_checkpoint is required (a pre-training model_dir)")
        if task.head == "tagging" and not task.label_names:
            task.read(run.data_dir, "train")  # learns the tag set, which sizes the head
        with self.strategy.scope():
            keras.utils.set_random_seed(config.seed)
            discriminator, recorded_vocab = load_pretrained(run.init_checkpoint,
                                                            config.model_size)
            self.encoder_config = discriminator.config
            self.size = config.model_size or model_size_of(self.encoder_config)
            kind = task.head
            num_labels = max(1, len(task.label_names))
            self.model = FinetuningModel(discriminator.encoder, kind, num_labels,
                                         answerable=getattr(task, "answerable", False))
            self.model.build()
        vocab_file = run.vocab_file or recorded_vocab
        if not vocab_file:
            raise InputError("--vocab_file is required (none is recorded with the checkpoint)")
        self.tokenizer = Tokenizer(vocab_file, do_lower_case=config.do_lower_case)
        if self.tokenizer.vocab_size != self.encoder_config.vocab_size:
            raise ConfigError(f"{vocab_file} has {self.tokenizer.vocab_size} tokens but the "
                              f"checkpoint's vocab_size is {self.encoder_config.vocab_size}")
        self.max_seq_length = config.max_seq_length or getattr(task, "default_max_seq_length",
                                                               128)
        self.epochs = config.num_train_epochs or getattr(task, "default_epochs", 3)
        self._variables = list(self.model.trainable_variables)
        self._fwd_bwd = tf.function(self._forward_backward, jit_compile=run.jit_compile)
        self._predict = tf.function(lambda x: self.model(x, training=False),
                                    jit_compile=run.jit_compile)
        self._train_steps = tf.function(self._train_steps_fn)
        self._features: dict[str, tuple[list, base.Features]] = {}

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

    def _epoch_dataset(self, feats: base.Features, epoch: int, skip: int):
        tensors = {**feats.inputs, **feats.labels}
        ds = tf.data.Dataset.from_tensor_slices(tensors)
        ds = ds.shuffle(len(feats), seed=self.config.seed + epoch, reshuffle_each_iteration=False)
        ds = ds.batch(self.config.train_batch_size, drop_remainder=True).skip(skip)
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
        return self.strategy.experimental_distribute_dataset(ds.with_options(options).prefetch(2))

    # === The step ===
    def _forward_backward(self, batch, seed):
        inputs = {k: batch[k] for k in INPUT_KEYS}
        labels = {k: v for k, v in batch.items() if k not in INPUT_KEYS}
        with tf.GradientTape() as tape:
            outputs = self.model(inputs, training=True, seed=seed)
            loss = task_loss(self.task.head, outputs, labels)
            scaled = loss / float(self.strategy.num_replicas_in_sync)
        return loss, dense_gradients(tape, scaled, self._variables)

    def _replica_step(self, batch):
        ctx = tf.distribute.get_replica_context()
        step = tf.cast(self.optimizer.iterations, tf.int32)
        seed = tf.stack([tf.constant(self.config.seed, tf.int32),
                         step * ctx.num_replicas_in_sync + ctx.replica_id_in_sync_group])
        loss, grads = self._fwd_bwd(batch, seed)
        apply_reduced_gradients(self.optimizer, grads, self._variables, self.config.clip_norm)
        return loss

    def _train_steps_fn(self, iterator, num_steps, loss_sum):
        for _ in tf.range(num_steps):
            loss = self.strategy.run(self._replica_step, args=(next(iterator),))
            loss_sum.assign_add(self.strategy.reduce(tf.distribute.ReduceOp.MEAN, loss, None))

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
            for k, v in self._predict(chunk).items():
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

    # === The host loop ===
    def _log(self, message):
        if self.chief:
            print(f"[finetune] {message}", file=sys.stderr, flush=True)

    def train(self, stop_at_step: int | None = None) -> dict:
        """Trains for the configured epochs (resuming if possible); returns results.

        Args:
          stop_at_step: leave at this step with a checkpoint, as a preempted job
            would (the schedule still targets the full run).
        """
        cfg, run = self.config, self.run
        os.makedirs(run.model_dir, exist_ok=True)
        _, train_feats = self.features("train")
        steps_per_epoch = len(train_feats) // cfg.train_batch_size
        if steps_per_epoch == 0:
            raise InputError(f"the train split has {len(train_feats)} windows, fewer than one "
                             f"batch of {cfg.train_batch_size}")
        total = int(round(self.epochs * steps_per_epoch))
        size = self.size if self.size != "custom" else "small"
        decay = cfg.resolved_layerwise_lr_decay(size)
        with self.strategy.scope():
            self.optimizer = create_optimizer(
                cfg.resolved_learning_rate(size), total, int(cfg.warmup_proportion * total),
                weight_decay_rate=cfg.weight_decay_rate, adam_epsilon=cfg.adam_epsilon,
                clip_norm=None, layerwise_lr_decay=decay,
                n_layers=self.encoder_config.num_hidden_layers if decay else None)
            self.optimizer.gradients_already_reduced = True
            self.optimizer.build(self._variables)
        checkpoint = variable_checkpoint(self.model, self.optimizer)
        manager = tf.train.CheckpointManager(
            checkpoint, os.path.join(run.model_dir, "checkpoints"),
            max_to_keep=cfg.keep_checkpoint_max, step_counter=self.optimizer.iterations,
            checkpoint_interval=cfg.save_checkpoints_steps)
        if manager.latest_checkpoint:
            checkpoint.restore(manager.latest_checkpoint).assert_consumed()
            self._log(f"resumed from {manager.latest_checkpoint}")
        self._write_config(total, decay)
        results = self._load_results()
        loss_sum = tf.Variable(0.0, trainable=False)
        self._log(f"{self.task.name}: {len(train_feats)} train windows, {steps_per_epoch} "
                  f"steps/epoch x {self.epochs} epochs = {total} steps, lr "
                  f"{cfg.resolved_learning_rate(size):.1e}, layer-wise decay {decay}")
        step = int(self.optimizer.iterations.numpy())
        end = min(total, stop_at_step or total)
        while run.do_train and step < end:
            epoch, done = divmod(step, steps_per_epoch)
            n = min(steps_per_epoch - done, end - step)
            iterator = iter(self._epoch_dataset(train_feats, epoch, done))
            t0 = time.monotonic()
            while n > 0:  # chunks that end at a checkpoint or at the epoch's end
                k = min(n, cfg.save_checkpoints_steps - step % cfg.save_checkpoints_steps)
                loss_sum.assign(0.0)
                self._train_steps(iterator, tf.constant(k), loss_sum)
                step += k
                n -= k
                manager.save(checkpoint_number=step, check_interval=False)
                self._log(f"epoch {epoch + 1} step {step}/{total} loss "
                          f"{float(loss_sum.numpy()) / k:.4f} "
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
            self.model.save_weights(os.path.join(run.model_dir, "finetuned.weights.h5"))
        return results

    def _prediction_path(self, split: str) -> str:
        submission = getattr(self.task, "submission_file", None)  # GLUE's <TASK>.tsv
        if split.startswith("test") and callable(submission):
            return os.path.join(self.run.model_dir, submission(split))
        suffix = getattr(self.task, "prediction_suffix", ".txt")
        return os.path.join(self.run.model_dir, f"{self.task.name}_{split}_predictions{suffix}")

    def _eval_all(self, final: bool) -> dict:
        out = {}
        for split in self._dev_splits():
            path = self._prediction_path(split) if final else None
            out[split] = self.evaluate(split, write_to=path)
            self._log(f"{split}: " + ", ".join(f"{k} {v:.4f}" for k, v in out[split].items()))
        return out

    def _results_path(self):
        return os.path.join(self.run.model_dir, "results.json")

    def _load_results(self) -> dict:
        if os.path.exists(self._results_path()):
            with open(self._results_path()) as f:
                return json.load(f)
        return {}

    def _save_results(self, results):
        if self.chief:
            with open(self._results_path(), "w") as f:
                json.dump(results, f, indent=2, sort_keys=True)

    def _write_config(self, total_steps, decay):
        if not self.chief:
            return
        with open(os.path.join(self.run.model_dir, "finetuning_config.json"), "w") as f:
            json.dump({"finetuning": self.config.to_dict(), "run": dataclasses.asdict(self.run),
                       "encoder": self.encoder_config.to_dict(), "model_size": self.size,
                       "task": self.task.name, "label_names": list(self.task.label_names),
                       "max_seq_length": self.max_seq_length, "epochs": self.epochs,
                       "total_steps": total_steps, "layerwise_lr_decay": decay},
                      f, indent=2, sort_keys=True)
