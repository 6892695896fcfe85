"""`prior_output_biases`: the output biases start at the data's priors."""

import glob
import importlib.util
import json

import numpy as np
import pytest

from electra_tf.core.errors import RecordError
from electra_tf.data.unigram import log_unigram_prior, unigram_counts


def _ids_of(pattern):
    from electra_tf.data.tfrecord_reader import parse_example, read_records

    ids = []
    for path in sorted(glob.glob(pattern)):
        for record in read_records(path):
            ex = parse_example(record, ("input_ids", "input_mask"))
            ids.append(ex["input_ids"][ex["input_mask"] > 0])
    return ids


def test_unigram_counts_match_a_direct_count(tiny_records):
    paths = sorted(glob.glob(tiny_records["train"]))
    counts, n = unigram_counts(paths, 10_000, max_sequences=10**6)
    ids = np.concatenate(_ids_of(tiny_records["train"]))
    assert n > 0 and counts.sum() == ids.size
    np.testing.assert_array_equal(counts, np.bincount(ids, minlength=10_000))
    # a cap reads at most that many sequences, from every shard
    capped, m = unigram_counts(paths, 10_000, max_sequences=len(paths))
    assert m == len(paths) and 0 < capped.sum() < counts.sum()


def test_unigram_counts_refuse_ids_beyond_the_vocab_and_corrupt_files(tiny_records, tmp_path):
    paths = sorted(glob.glob(tiny_records["train"]))
    with pytest.raises(RecordError, match="outside"):
        unigram_counts(paths, 5)
    bad = tmp_path / "bad.tfrecord"
    data = open(paths[0], "rb").read()
    bad.write_bytes(data[:20] + bytes([data[20] ^ 0xFF]) + data[21:])
    with pytest.raises(RecordError, match="bad.tfrecord: record 0 .*corrupt"):
        unigram_counts([str(bad)], 10_000)


def test_log_unigram_prior():
    prior = log_unigram_prior(np.array([0, 10, 30, 0, 60]), exclude_ids=(0,), floor=0.5)
    p = np.exp(prior[1:].astype(np.float64))
    assert abs(p.sum() - 1.0) < 1e-6
    np.testing.assert_allclose(p, np.array([10.5, 30.5, 0.5, 60.5]) / 102.0, rtol=1e-5)
    assert prior[0] == prior.min()  # never predicted: the smallest


def test_the_pretraining_heads_start_at_the_priors(make_configs):
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining

    config, run = make_configs(prior_output_biases=True)
    trainer = TensorFlowPretraining(config, run)
    m, model = trainer.masking, trainer.model
    bias = np.asarray(model.generator.mlm_head.output_bias)
    counts, _ = unigram_counts(sorted(glob.glob(run.train_data)), config.vocab_size)
    counts[[m.cls_id, m.sep_id, m.mask_id]] = 0  # never masked, never predicted
    frequent = int(np.argmax(counts))
    assert bias[frequent] == bias.max() and bias[m.mask_id] == bias.min()
    rtd = float(np.asarray(model.discriminator.rtd_head.dense_prediction.bias)[0])
    assert -np.log(1 / 0.15 - 1) - 0.1 < -rtd < 3.0  # about log-odds of 15% replaced
    # the default: zeros, as in the original
    config, run = make_configs(model_dir=run.model_dir + "_off")
    off = TensorFlowPretraining(config, run).model
    assert not np.asarray(off.generator.mlm_head.output_bias).any()
    assert not np.asarray(off.discriminator.rtd_head.dense_prediction.bias).any()


def test_uniform_generator_and_electra_15_priors(make_configs):
    """Uniform replacements equal the original with probability 1/V; ELECTRA 15%
    scores only the masked positions, so its replaced rate is about 1, not mask_prob."""
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining

    def rtd_bias(**overrides):
        trainer = TensorFlowPretraining(*make_configs(prior_output_biases=True, **overrides))
        return float(np.asarray(trainer.model.discriminator.rtd_head.dense_prediction.bias)[0])

    v = make_configs()[0].vocab_size
    rate = 0.15 * (1 - 1 / v)
    assert rtd_bias(uniform_generator=True) == pytest.approx(np.log(rate / (1 - rate)), abs=1e-5)
    assert rtd_bias(objective="electra_15") > 1.0  # most masked positions get replaced


def test_electric_refuses_the_priors():
    """They had set Electric's energy bias to ELECTRA's replaced-token log-odds, which its
    correction already adds (so the prior counted twice, the wrong way), and left the
    cloze generator's bias at 0 (it has no MLM head)."""
    from electra_tf.core.config import PretrainingConfig
    from electra_tf.core.errors import ConfigError

    with pytest.raises(ConfigError, match="leave it off with objective=electric"):
        PretrainingConfig(model_size="tiny", objective="electric", untied_generator=True,
                          prior_output_biases=True)
    PretrainingConfig(model_size="tiny", objective="electric", untied_generator=True)


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_the_jax_backend_sets_the_same_priors(tiny_records, tmp_path):
    """Under JAX with the NumPy input pipeline the records are read with the
    pure-Python reader (not tf.io.gfile): the same biases as the TensorFlow backend's."""
    from electra_tf.core.config import PretrainingConfig, PretrainingRun
    from electra_tf.training.backends.tensorflow import TensorFlowPretraining
    from tests.training.test_jax_runtime import config_json, run_python

    spec = config_json(tiny_records, tmp_path / "jax", prior_output_biases=True)
    out = run_python("""
        import json, sys
        import numpy as np
        from electra_tf.core.config import PretrainingConfig, PretrainingRun
        from electra_tf.training.backends.jax import JaxPretraining
        spec = json.loads(sys.argv[1])
        t = JaxPretraining(PretrainingConfig(**spec["config"]),
                           PretrainingRun(**spec["run"], jax_input_pipeline="numpy"))
        print(json.dumps([np.asarray(t.model.generator.mlm_head.output_bias).tolist(),
                          np.asarray(t.model.discriminator.rtd_head.dense_prediction.bias)
                          .tolist()]))
    """, "jax", spec)
    mlm, rtd = json.loads(out.splitlines()[-1])
    spec = json.loads(spec)
    spec["run"]["model_dir"] = str(tmp_path / "tf")
    tf_model = TensorFlowPretraining(PretrainingConfig(**spec["config"]),
                                     PretrainingRun(**spec["run"])).model
    np.testing.assert_allclose(mlm, np.asarray(tf_model.generator.mlm_head.output_bias))
    np.testing.assert_allclose(rtd, np.asarray(tf_model.discriminator.rtd_head.dense_prediction
                                               .bias))
