"""The benchmarks' A/B arms, built from the serving library's public pieces, give what
export() gives, from another graph: bench_export.py's export without the ids checks
and with the encoder through the Keras layers' graph, and bench_serving_threads.py's
encoders that its toy run leaves out (every call on the long path, the dense products
as BatchMatMulV3; its toy run exports and serves the transposes and bf16 encoders)
(slow: five exports of a 32-position window)."""

import os
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

pytestmark = pytest.mark.slow


def _finetuned_dir(tmp_path, vocab_file):
    from bench_common import finetuned_folder

    return finetuned_folder(str(tmp_path / "sst2"), "sst2", vocab_file, "tiny",
                            max_seq_length=32)


def test_the_ab_arms_give_exports_outputs_from_other_graphs(tmp_path, tiny_vocab):
    import bench_export
    import bench_serving_threads
    import tensorflow as tf

    from electra_tf.serving import encoder
    from electra_tf.serving.export import load_spec
    from electra_tf.serving.signatures import build_archive

    finetuned = _finetuned_dir(tmp_path, tiny_vocab)

    def written(name, make):
        path = str(tmp_path / name)
        make(load_spec("sequence_classification", finetuned)).write_out(path, verbose=False)
        return tf.saved_model.load(path).signatures["serving_ids"]

    lean = encoder.model_outputs
    exported = written("export", lambda spec: build_archive(spec)[0])
    with bench_export.keras_layers_encoder():
        keras_graph = written("keras", lambda spec: build_archive(spec)[0])
    assert encoder.model_outputs is lean  # put back
    unchecked = written("unchecked", bench_export.unchecked_ids_archive)
    # export_with checks that BatchMatMulV3 is in the written graph exactly where the
    # encoder writes it: not on the long path, in the dense products' (its "matmul"
    # encoder is export() as it is: `exported`, checked below)
    encoders = {e: tf.saved_model.load(bench_serving_threads.export_with(
        e, load_spec("sequence_classification", finetuned), str(tmp_path / "models"),
        e)).signatures["serving_ids"] for e in ("long_path", "batchmatmulv3")}

    ids = tf.constant(np.random.default_rng(0).integers(5, 20, [3, 32]), tf.int32)
    inputs = {"input_word_ids": ids, "input_mask": tf.ones_like(ids),
              "input_type_ids": tf.zeros_like(ids)}
    want = exported(**inputs)["logits"].numpy()
    for fn in (keras_graph, unchecked, *encoders.values()):
        np.testing.assert_allclose(fn(**inputs)["logits"].numpy(), want, atol=1e-5)

    def ops(fn):
        graph = fn.graph.as_graph_def()
        return [n.op for n in graph.node] + [n.op for f in graph.library.function
                                             for n in f.node_def]

    assert len(ops(keras_graph)) > len(ops(exported))  # the Keras layers' bookkeeping
    assert "Assert" in ops(exported) and "Assert" not in ops(unchecked)
    # export_with's check for its "matmul" encoder, on export()'s graph: the short path's
    # attention products are BatchMatMulV3 (a tf.cond in each layer picks the path)
    assert "BatchMatMulV3" in bench_serving_threads._op_types(str(tmp_path / "export"))
