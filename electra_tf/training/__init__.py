"""Training: one host loop per kind of run, and two thin backends.

  loop.py           what both loops share: chunks, console lines, Ctrl-C (InterruptGate)
  pretraining.py    `Pretraining`: checks, masking, model, phases, data, evaluation,
                    and the pre-training host loop
  finetuning.py     `Finetuning`: the model, data, evaluation and fine-tuning host
                    loop over a task
  phases.py         the paper's training algorithms as phases (joint, two-stage, adversarial)
  preflight.py      checks before a pre-training run builds or writes anything
  checkpoints.py    tf.train and npz checkpoints behind one interface
  reporting.py      metric sums -> results -> console lines
  summaries.py      TensorBoard scalars, with or without TensorFlow
  backends/         tensorflow.py and jax.py: devices, seeds, the compiled steps

A backend subclasses `Pretraining` and `Finetuning` and owns only its
step and how it is compiled and distributed, as Keras 3's own trainers do.
"""
