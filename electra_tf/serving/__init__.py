"""Serving: the TF graphs a SavedModel for TF Serving holds, and the client that queries it.

`export` writes a model folder as a SavedModel (`load_spec`, `export`);
`signatures` builds its signatures from `graph` (in-graph tokenization, packing,
outputs) and `encoder` (the model as a tf.function); `warmup` writes TF
Serving's warm-up requests; `client` queries a server over gRPC or REST.
The commands are electra_tf/export_saved_model.py and electra_tf/query.py.
"""
