"""The fine-tuning loop on the JAX backend (KERAS_BACKEND=jax).

    KERAS_BACKEND=jax python -m electra_tf.run_finetuning --flagfile=configs/glue_mnli.flags ...

The same model (FinetuningModel, keras.ops only), tasks, losses, optimizer,
flags, console lines and output folder (artifacts.py) as the TensorFlow loop
in trainer.py, whose host loop, data, prediction and evaluation it shares
(`trainer.FinetuningLoop`); what differs is the step:
  * one `jax.jit`-compiled function does the forward pass
    (`model.stateless_call`), the summed task loss, the gradients,
    global-norm clipping and the optimizer's `stateless_apply`, on explicit
    state; prediction is a second compiled function;
  * data parallelism over the local devices is Keras' distribution API
    (jax_runtime.data_parallel); the gradient is that of the batch's summed
    loss divided by the number of devices, as the TF loop's all-reduce of
    per-replica sums pre-divided by the replica count gives;
  * seeds are [seed, step] (the TF loop's formula with one replica), so the
    dropout masks differ from a TF run's (each backend draws its own);
    the batches are the same tf.data shuffle of the same features;
  * checkpoints are `checkpoints/jax-ckpt-<step>.npz` (jax_runtime.Checkpoints);
    a run resumes from them exactly, but not from the TF loop's checkpoints
    (a clear error), nor the TF loop from these.
Not on this runtime (clear errors): --strategy=multi_worker and tpu.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import keras
import numpy as np

from electra_tf import artifacts, jax_runtime
from electra_tf.config import ConfigError, FinetuneRun, FinetuningConfig
from electra_tf.finetuning.losses import task_loss, task_loss_count
from electra_tf.finetuning.trainer import FinetuningLoop, split_batch


class JaxFinetuning(FinetuningLoop):
    """Fine-tunes the discriminator on one task with JAX (see the module docstring)."""

    def __init__(self, task, config: FinetuningConfig, run: FinetuneRun):
        if keras.backend.backend() != "jax":
            raise ConfigError("JaxFinetuning needs KERAS_BACKEND=jax")
        self.chief = True
        self.num_replicas, self.distribution = jax_runtime.data_parallel(
            run.strategy, run.num_devices, {"train_batch_size": config.train_batch_size,
                                            "eval_batch_size": config.eval_batch_size})
        super().__init__(task, config, run)
        # A symbolic call creates what layers make at their first call (the
        # embeddings' dropout seed state): a stateless step cannot create state.
        self.model.compute_output_spec({k: keras.KerasTensor((1, 2), "int32")
                                        for k in ("input_ids", "input_mask", "segment_ids")})
        self._train_step = jax.jit(self._step_fn)
        self._predict_fn = jax.jit(self._predict_step)

    @property
    def step(self) -> int:
        return int(np.asarray(self.optimizer.iterations.value))

    def train_iterator(self, epoch: int, skip: int = 0):
        """NumPy global batches of `epoch` (the TF loop's shuffle), after `skip` batches."""
        return self.train_dataset(epoch, skip).prefetch(2).as_numpy_iterator()

    # === The step ===
    def _state(self):
        return jax_runtime.training_state(self.model, self.optimizer)

    def _assign(self, state):
        jax_runtime.assign_training_state(self.model, self.optimizer, state)

    def _step_fn(self, state, batch, seed):
        trainable, non_trainable, opt_vars = state
        inputs, labels = split_batch(batch)
        head = self.task.head

        def loss_fn(trainable):
            outputs, new_non_trainable = self.model.stateless_call(
                trainable, non_trainable, inputs, training=True, seed=seed)
            # Summed over the batch, as the original (so clipping acts).
            loss = task_loss(head, outputs, labels)
            return loss / self.num_replicas, (loss, new_non_trainable)

        (_, (loss, non_trainable)), grads = jax.value_and_grad(loss_fn, has_aux=True)(trainable)
        grads, _ = jax_runtime.clip_by_global_norm(grads, self.config.clip_norm)
        trainable, opt_vars = self.optimizer.stateless_apply(opt_vars, grads, trainable)
        return (trainable, non_trainable, opt_vars), loss / task_loss_count(head, labels)

    def train_steps(self, iterator, num_steps: int) -> float:
        """Runs `num_steps` optimizer steps (after build_optimizer); returns the mean loss.

        The variables hold the state of the last finished step even when
        Ctrl-C lands between steps (so the loop's checkpoint is of that step).
        """
        state, step, total = self._state(), self.step, 0.0
        try:
            for i in range(num_steps):
                seed = jnp.asarray([self.config.seed, step + i], dtype="int32")
                batch = jax_runtime.to_device(next(iterator), self.distribution)
                state, loss = self._train_step(state, batch, seed)
                total = total + loss
        finally:
            self._assign(state)
        return float(total) / num_steps

    # === Prediction and checkpoints ===
    def _predict_step(self, trainable, non_trainable, inputs):
        outputs, _ = self.model.stateless_call(trainable, non_trainable, inputs, training=False)
        return outputs

    def _predict_batch(self, inputs: dict) -> dict:
        outputs = self._predict_fn(jax_runtime.values(self.model.trainable_variables),
                                   jax_runtime.values(self.model.non_trainable_variables),
                                   jax_runtime.to_device(inputs, self.distribution))
        return jax.device_get(outputs)

    def make_checkpoints(self) -> jax_runtime.Checkpoints:
        """npz checkpoints of the model and the optimizer under model_dir/checkpoints."""
        return jax_runtime.Checkpoints(
            self.model, self.optimizer, artifacts.checkpoint_dir(self.run.model_dir),
            self.config.keep_checkpoint_max, self.config.save_checkpoints_steps)
