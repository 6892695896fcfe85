"""electra_tf: ELECTRA in TensorFlow 2 / Keras 3.

Layers, from the bottom up: `config` (hyperparameters), `tokenization` and
`data` (text to TFRecords to batches), `modeling` (Keras 3 models, no losses),
`objectives` (pure loss functions), `optimization` and `training` (the
strategy-aware loop), then the `run_*` / `build_*` command-line entry points.
"""

__version__ = "0.1.0"
