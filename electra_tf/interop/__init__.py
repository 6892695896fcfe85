"""Checkpoint interop: the original TF1 checkpoints and transformers weights.

`names` maps electra_tf's variables to the original names (the pivot) and
those to transformers' keys; `tf1` and `hf` read and write the formats;
`core` does the strict assignment and writes electra_tf's model_dir files.
The CLI is `python -m electra_tf.convert`.
"""
