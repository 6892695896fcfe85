"""benchmarks/bench_export.py's A/B arms, built from the serving library's public
pieces: the export without the ids checks, and with the encoder through the Keras
layers' graph, give what export() gives, from another graph (slow: three exports)."""

import os
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

pytestmark = pytest.mark.slow


def _finetuned_dir(tmp_path, vocab_file):
    import keras

    from electra_tf import folders
    from electra_tf.core.config import MODEL_SIZES, EncoderConfig, FinetuningConfig, FinetuningRun
    from electra_tf.modeling import build_discriminator
    from electra_tf.tasks.model import FinetuningModel
    from electra_tf.tasks.registry import get_task

    with open(vocab_file) as f:
        vocab_size = sum(1 for line in f if line.strip())
    config = EncoderConfig(vocab_size=vocab_size, **MODEL_SIZES["tiny"])
    keras.utils.set_random_seed(0)
    model = FinetuningModel(build_discriminator(config).encoder, "sequence_classification", 2)
    model.build()
    out = tmp_path / "sst2"
    out.mkdir()
    folders.files.save_weights(model, str(out / folders.files.FINETUNED_WEIGHTS))
    task = get_task("sst2")
    folders.finetuned.write_finetuning_config(
        str(out), task=task, config=FinetuningConfig(task_name="sst2"),
        run=FinetuningRun(model_dir=str(out), vocab_file=vocab_file), encoder=config,
        model_size="tiny", max_seq_length=32)
    return str(out)


def test_the_ab_arms_give_exports_outputs_from_other_graphs(tmp_path, tiny_vocab):
    import bench_export
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

    ids = tf.constant(np.random.default_rng(0).integers(5, 20, [3, 32]), tf.int32)
    inputs = {"input_word_ids": ids, "input_mask": tf.ones_like(ids),
              "input_type_ids": tf.zeros_like(ids)}
    want = exported(**inputs)["logits"].numpy()
    for fn in (keras_graph, unchecked):
        np.testing.assert_allclose(fn(**inputs)["logits"].numpy(), want, atol=1e-5)

    def ops(fn):
        graph = fn.graph.as_graph_def()
        return [n.op for n in graph.node] + [n.op for f in graph.library.function
                                             for n in f.node_def]

    assert len(ops(keras_graph)) > len(ops(exported))  # the Keras layers' bookkeeping
    assert "Assert" in ops(exported) and "Assert" not in ops(unchecked)
