"""electra_tf: ELECTRA in TensorFlow 2 / Keras 3.

The folders are the floors, from the ground up; each imports only from its own
floor and those below (tests/test_layering.py):

    core        errors, the configuration, file helpers
    text        vocabulary and tokenizer
    data        text -> TFRecords / packed files -> masked batches
    modeling    Keras 3 models (keras.ops only); they return tensors, no loss
    objectives  the pre-training objectives (pure loss functions) and the pretrainer
    tasks       fine-tuning tasks: readers, heads, losses, metrics
    training    the loops, their two backends, checkpoints, model folders
    serving     the TF Serving graphs, the export library and the query client
    interop     the original TF1 checkpoints and transformers weights

On top, in the package root, the commands (`python -m electra_tf.run_pretraining`
and the others, each also a console script) and what they share (cli, flags).
"""

__version__ = "0.1.0"
