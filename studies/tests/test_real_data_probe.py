"""studies/real_data/probe_features.py: the frozen states it probes, and its probe."""

import keras
import numpy as np

from electra_tf.core.config import EncoderConfig
from electra_tf.modeling import build_discriminator
from studies.real_data import probe_features as pf


def test_layer_states_end_at_the_encoder_output():
    keras.utils.set_random_seed(0)
    disc = build_discriminator(EncoderConfig(
        vocab_size=30, embedding_size=8, hidden_size=16, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=32))
    ids = np.array([[2, 5, 6, 3, 0, 0], [2, 7, 8, 9, 4, 3]], np.int32)
    mask = (ids > 0).astype(np.int32)
    states = pf.layer_states(disc, ids, mask)
    assert sorted(states) == [(i, p) for i in range(3) for p in ("cls", "mean")]
    out = np.asarray(disc.encoder({"input_ids": ids, "input_mask": mask,
                                   "segment_ids": np.zeros_like(ids)})["sequence_output"])
    np.testing.assert_allclose(states[(2, "cls")], out[:, 0], atol=1e-6)
    np.testing.assert_allclose(states[(2, "mean")][0], out[0, :4].mean(0), atol=1e-6)
    np.testing.assert_allclose(states[(2, "mean")][1], out[1].mean(0), atol=1e-6)


def test_probe_separates_what_is_separable_and_not_noise():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    signal = rng.normal(size=(200, 5)) + 3.0 * y[:, None]
    assert pf.probe(signal[:150], y[:150], signal[150:], y[150:]) > 0.95
    noise = rng.normal(size=(200, 5))
    assert pf.probe(noise[:150], y[:150], noise[150:], y[150:]) < 0.75


def test_the_study_scripts_import_together():
    # absl refuses a flag defined twice; the scripts share names (work_dir, tasks, output)
    import importlib

    for name in ("study", "early_points", "probe_features", "transplant"):
        importlib.import_module(f"studies.real_data.{name}")


def test_pack_ids_frames_cuts_and_pads(tmp_path):
    from electra_tf.text.tokenizer import Tokenizer

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"]) + "\n")
    tok = Tokenizer(str(vocab))
    ids, mask = pf.pack_ids(tok, ["a b", "a b c a b"], 5)
    np.testing.assert_array_equal(ids, [[tok.cls_id, 5, 6, tok.sep_id, 0],
                                        [tok.cls_id, 5, 6, 7, tok.sep_id]])
    np.testing.assert_array_equal(mask, [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])


def test_mean_cosine_leaves_self_pairs_out():
    assert pf.mean_cosine(np.array([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]])) == 1.0
    assert abs(pf.mean_cosine(np.eye(3))) < 1e-12
    # cos(a, b) = cos(b, c) = 1/sqrt(2), cos(a, c) = 0: their mean
    v = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    assert abs(pf.mean_cosine(v) - (2 / np.sqrt(2) + 0.0) / 3) < 1e-12


def test_a_task_folder_is_cut_as_the_studys_prepare_stage_cuts_it(tmp_path):
    from studies.real_data.study import majority_baseline, prepare_task

    source = tmp_path / "trec6"
    source.mkdir()
    for split, n in (("train", 50), ("dev", 9)):
        rows = ["text\tlabel"] + [f"text {i}\t{'ab'[i % 3 == 0]}" for i in range(n)]
        (source / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    meta = prepare_task(str(source), str(tmp_path / "cut" / "trec6"), 20, 0, seed=0)
    data = pf.read_task(str(tmp_path), "trec6", 20)
    assert data["train"] == pf.read_split(str(tmp_path / "cut" / "trec6" / "train.tsv"))
    assert len(data["train"][0]) == 20 and data["dev"] == pf.read_split(str(source / "dev.tsv"))
    assert majority_baseline(*[d[1] for d in (data["train"], data["dev"])]) == \
        meta["majority_baseline_dev"] == round(6 / 9, 4)  # "a": i % 3 != 0
    assert len(pf.read_task(str(tmp_path), "trec6", 0)["train"][0]) == 50
