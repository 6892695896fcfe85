"""electra_tf: ELECTRA in TensorFlow 2 / Keras 3.

The folders are the floors, from the ground up; each imports only from its own
floor and those below (tests/test_layering.py):

    core        errors, the configuration, file helpers
    text        vocabulary and tokenizer
    data        text -> TFRecords / packed files -> masked batches
    modeling    Keras 3 models (keras.ops only); they return tensors, no loss
    objectives  the pre-training objectives (pure loss functions) and the pretrainer
    tasks       fine-tuning tasks: readers, heads, losses, metrics
    folders     the model folders on disk: pre-training, fine-tuned, converted
    training    the loops, their two backends, checkpoints
    serving     the TF Serving graphs, the export library, the query client and
                the Python API's Predictor
    interop     the original TF1 checkpoints and transformers weights

On top, in the package root, the commands (`python -m electra_tf.run_pretraining`
and the others, each also a console script) and what they share (cli, flags).

The Python API (docs/python.md) is the three names below: a folder opened
(`PretrainingFolder.open`, `FinetunedFolder.open`) or written
(`PretrainingFolder.save`, `FinetunedFolder.save`), and a `Predictor` for
predictions on strings. None imports TensorFlow or Keras until it builds a model.
"""

from electra_tf.folders import FinetunedFolder, PretrainingFolder
from electra_tf.serving.predictor import Predictor

__version__ = "0.1.0"
__all__ = ["FinetunedFolder", "Predictor", "PretrainingFolder"]
