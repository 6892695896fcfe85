"""Runs exports the way TF Serving would, in a FRESH process: no project code.

    python tests/export/load_check.py JOBS.pkl RESULTS.pkl [--no_tf_text]

JOBS.pkl: a list of {"path", "signature", "inputs": {name: np.ndarray}}. For
each job the SavedModel is loaded twice, through tf.saved_model.load (TF2) and
through the TF1 session loader the C++ model server uses
(tf.compat.v1.saved_model.loader.load + Session.run of the signature's
tensors), and both outputs are stored ({"tf2": {...}, "tf1": {...}} or
{"error": message}). With --no_tf_text tensorflow_text is NOT imported (the
ids-only export must load without it). Only numpy, pickle, sys, tensorflow
(and tensorflow_text) are imported here; the results record sys.modules so the
test can check that.

JOBS.pkl may instead hold {"without_tf_text": jobs, "jobs": jobs}: the first
list runs before tensorflow_text is imported (as with --no_tf_text; its results
and sys.modules are stored under "without_tf_text"), then tensorflow_text is
imported and the second list runs: one start-up of TensorFlow for both.
"""

import pickle
import sys
import time

import tensorflow as tf


def run_tf2(path, signature, inputs, cache={}):
    if path not in cache:
        cache[path] = tf.saved_model.load(path)
    fn = cache[path].signatures[signature]
    out = fn(**{k: tf.constant(v) for k, v in inputs.items()})
    return {k: v.numpy() for k, v in out.items()}


def run_tf1(path, signature, inputs, cache={}):
    if path not in cache:  # one graph and session per export, as the server keeps
        graph = tf.Graph()
        sess = tf.compat.v1.Session(graph=graph)
        with graph.as_default():
            meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], path)
        cache[path] = (sess, meta)
    sess, meta = cache[path]
    sig = meta.signature_def[signature]
    feed = {sig.inputs[k].name: v for k, v in inputs.items()}
    fetch = {k: t.name for k, t in sig.outputs.items()}
    return sess.run(fetch, feed_dict=feed)


def run_jobs(jobs):
    """{"results": one {"tf2", "tf1"} per job, "modules": the top-level modules loaded}."""
    results = []
    t0 = time.time()
    for job in jobs:
        result = {}
        for name, run in (("tf2", run_tf2), ("tf1", run_tf1)):
            try:
                result[name] = run(job["path"], job["signature"], job["inputs"])
            except Exception as e:  # reported to the test, which decides
                result[name] = {"error": f"{type(e).__name__}: {str(e)[:2000]}"}
        results.append(result)
    print(f"[load_check] {len(jobs)} jobs in {time.time() - t0:.1f}s", file=sys.stderr)
    return {"results": results, "modules": sorted({m.split(".")[0] for m in sys.modules})}


def main():
    with open(sys.argv[1], "rb") as f:
        jobs = pickle.load(f)
    out = {}
    if isinstance(jobs, dict):  # the jobs without tensorflow_text first, then with it
        out["without_tf_text"] = run_jobs(jobs["without_tf_text"])
        jobs = jobs["jobs"]
    if "--no_tf_text" not in sys.argv:
        import tensorflow_text  # noqa: F401  (registers the TF-Text ops)
    out.update(run_jobs(jobs))
    with open(sys.argv[2], "wb") as f:
        pickle.dump(out, f)


if __name__ == "__main__":
    main()
