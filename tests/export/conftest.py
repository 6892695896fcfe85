"""Tiny fine-tuned model_dirs, their exports, and one fresh-process run over all of them.

The fine-tuning dirs hold what `electra_tf.training.finetuning` writes
(finetuned.weights.h5, finetuning_config.json) for an untrained head on the
tiny discriminator (helpers.TINY_MODEL, twice as wide): the export does not care whether the
head learned anything, and training would cost a minute.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

# Appended, not prepended: "conftest" must still resolve to tests/conftest.py.
sys.path.append(os.path.dirname(os.path.abspath(__file__)))

from export_helpers import (  # noqa: E402
    ALIGN_TEXTS,
    BUCKETS,
    FINETUNED,
    LONG_PAIRS,
    MULTI_PIECE,
    ODD_TEXTS,
    RECORD_EXTRAS,
    SCORE_REQUEST_TEXTS,
    SEQ,
    SHORT_BATCHES,
    SQUAD_PAIRS,
    bad_input_rows,
    narrow_squad_ids,
    packed_for,
    run_fresh,
    score_ids,
    text_inputs,
)
from fuzz_texts import FUZZ_DEFAULT, fuzz_jobs, odd_texts  # noqa: E402
from helpers import tiny_encoder_config, write_pretrained_dir  # noqa: E402


@pytest.fixture(scope="session")
def export_pretrained_dir(tiny_vocab, tmp_path_factory):
    """A pre-training model_dir: discriminator weights and configs (as run_pretraining);
    it records no pre-training config, so the text is lower-cased (the default).

    Twice the tiny width, and two layers (the exports' stacked layers): the heads'
    outputs (NER labels, SQuAD's null odds, which QA_NA_THRESHOLD splits) then spread
    enough across tokens and rows."""
    from electra_tf.text.vocab import load_vocab

    config = tiny_encoder_config(len(load_vocab(tiny_vocab)), embedding_size=16,
                                 hidden_size=32, intermediate_size=64, num_hidden_layers=2)
    return write_pretrained_dir(tmp_path_factory.mktemp("export_pretrained"), tiny_vocab,
                                config)


@pytest.fixture(scope="session")
def finetuned_dirs(export_pretrained_dir, tiny_vocab, tmp_path_factory):
    """{name: fine-tuning model_dir} for the FINETUNED tasks."""
    import keras

    from electra_tf import folders
    from electra_tf.modeling import build_discriminator
    from electra_tf.tasks.model import FinetuningModel

    config = folders.files.read_encoder_config(
        os.path.join(export_pretrained_dir, folders.files.DISCRIMINATOR_CONFIG))
    dirs = {}
    for i, (name, (head, task, labels, regression, answerable, seq)) in enumerate(
            FINETUNED.items()):
        out = tmp_path_factory.mktemp(f"finetuned_{name}")
        extras = RECORD_EXTRAS.get(name, {})
        keras.utils.set_random_seed(i + 1)
        model = FinetuningModel(build_discriminator(config).encoder, head,
                                max(1, len(labels)), answerable=answerable,
                                regression=regression, **extras.get("head_options", {}))
        model.build()
        # A larger head than the 0.02 init, so that labels and spans differ across tokens.
        for v in model.head.trainable_variables:
            v.assign(v.numpy() * 5.0)
        folders.files.save_weights(model, str(out / folders.files.FINETUNED_WEIGHTS))
        record = {
            "encoder": config.to_dict(), "task": task, "head": head, "regression": regression,
            "answerable": answerable,
            "pair": task != "ner", "label_names": labels, "max_seq_length": seq,
            "model_size": "custom", "head_options": {},
            "run": {"vocab_file": tiny_vocab, "init_checkpoint": export_pretrained_dir},
            **extras,
            "finetuning": {"do_lower_case": True, "no_answer_threshold": 0.0,
                           **extras.get("finetuning", {})},
            **folders.vocabulary.keep_vocab(str(out), tiny_vocab)}  # its vocab.txt and fingerprint
        folders.files.write_json(str(out / folders.files.FINETUNING_CONFIG), record)
        dirs[name] = str(out)
    return dirs


@pytest.fixture(scope="session")
def exports(finetuned_dirs, export_pretrained_dir, tmp_path_factory):
    """{name: (ServingSpec, export path)}; "ner_ids" is the --ids_only export of ner,
    "ner_bf16" its --precision=bf16 export.

    Length buckets 4 and 8 below max_seq_length (16, 24): the default ones start at
    16, which would leave these short windows one bucket."""
    import dataclasses

    from electra_tf.serving.export import export, load_spec

    base = str(tmp_path_factory.mktemp("model_base"))
    out = {}
    for name, (task, *_rest) in FINETUNED.items():
        spec = dataclasses.replace(load_spec(task, finetuned_dirs[name]),
                                   length_buckets=BUCKETS)
        out[name] = (spec, export(spec, base, name))
    spec = dataclasses.replace(load_spec("rtd", export_pretrained_dir, max_seq_length=SEQ),
                               length_buckets=BUCKETS)
    out["rtd"] = (spec, export(spec, base, "rtd"))
    out["ner_ids"] = (out["ner"][0], export(out["ner"][0], base, "ner_ids", ids_only=True))
    bf16 = dataclasses.replace(out["ner"][0], precision="bf16")
    out["ner_bf16"] = (bf16, export(bf16, base, "ner_bf16"))
    return out


@pytest.fixture(scope="session")
def electric_dir(tiny_vocab, tmp_path_factory):
    """A pre-training folder of an Electric model (random weights, made larger than the
    0.02 init so that energies differ across tokens) that records objective=electric."""
    import keras

    from electra_tf import folders
    from electra_tf.core.config import PretrainingConfig
    from electra_tf.modeling import build_discriminator
    from electra_tf.text.vocab import load_vocab

    folder = str(tmp_path_factory.mktemp("electric"))
    vocab_size = len(load_vocab(tiny_vocab))
    keras.utils.set_random_seed(7)
    disc = build_discriminator(tiny_encoder_config(vocab_size))
    for v in disc.trainable_variables:
        v.assign(v.numpy() * 5.0)
    folders.pretraining.save_discriminator(folder, disc)
    config = PretrainingConfig(model_size="tiny", vocab_size=vocab_size, objective="electric",
                               max_seq_length=SEQ)
    folders.pretraining.write_pretraining_config(folder, config, {"vocab_file": tiny_vocab})
    return folder


@pytest.fixture(scope="session")
def score_export(electric_dir, tmp_path_factory):
    """(ServingSpec, export path) of --task=score on electric_dir."""
    import dataclasses

    from electra_tf.serving.export import export, load_spec

    spec = dataclasses.replace(load_spec("score", electric_dir, max_seq_length=SEQ),
                               length_buckets=BUCKETS)
    return spec, export(spec, str(tmp_path_factory.mktemp("score_base")), "score")


@pytest.fixture(scope="session")
def fresh(exports, score_export, electric_dir, tmp_path_factory):
    """{(export, check): {"tf1": outputs, "tf2": outputs}, "modules": [...]} from a fresh
    process with tensorflow_text, in which the ids-only export (and the text export, which
    must fail) ran first, before tensorflow_text was imported ("modules_no_text": the
    modules loaded then). The same process runs the bad-input cases ("bad_input":
    bad_input_rows with their results) and the default fuzz strings ("fuzz": (fuzz_jobs'
    meta, results)), and the score export's text and ids requests (("score", "text"|"ids")):
    one start-up of TensorFlow and one load of each export."""
    from electra_tf.serving import warmup

    jobs, keys = [], []

    def add(key, name, signature, inputs):
        keys.append(key)
        jobs.append({"path": exports[name][1], "signature": signature, "inputs": inputs})

    for name in ("ner", "mrpc", "stsb", "squad", "squad_joint", "rtd"):
        spec = exports[name][0]
        odd = text_inputs(spec, ODD_TEXTS)
        add((name, "odd"), name, "serving_default", odd)
        add((name, "ids"), name, "serving_ids", packed_for(spec, odd))
        for key, texts in SHORT_BATCHES.items():  # batches that fit a shorter bucket
            add((name, key), name, "serving_default", text_inputs(spec, texts))
            add((name, f"{key}_ids"), name, "serving_ids",
                packed_for(spec, text_inputs(spec, texts)))
    add(("squad_joint", "narrow_ids"), "squad_joint", "serving_ids",
        narrow_squad_ids(exports["squad_joint"][0]))
    for name in ("squad", "squad_joint"):
        pairs = {"question": np.array([q.encode() for q, _ in SQUAD_PAIRS], object),
                 "context": np.array([c.encode() for _, c in SQUAD_PAIRS], object)}
        add((name, "pairs"), name, "serving_default", pairs)
    add(("squad_joint", "long"), "squad_joint", "serving_default",
        {"question": np.array([q.encode() for q, _ in LONG_PAIRS], object),
         "context": np.array([c.encode() for _, c in LONG_PAIRS], object)})
    for name in ("ner", "ner_bf16"):  # the bf16 export beside the float32 one
        add((name, "align"), name, "serving_default", text_inputs(exports[name][0], ALIGN_TEXTS))
    add(("ner_bf16", "ids"), "ner_bf16", "serving_ids",  # the inputs of ("ner", "ids")
        packed_for(exports["ner"][0], text_inputs(exports["ner"][0], ODD_TEXTS)))
    for name in ("ner", "rtd"):
        add((name, "multi"), name, "serving_default",
            text_inputs(exports[name][0], [t for t, _ in MULTI_PIECE]))
    for name in exports:
        path = os.path.join(exports[name][1], "assets.extra", warmup.WARMUP_FILE)
        for i, log in enumerate(warmup.read(path)):
            if name not in ("ner_ids", "ner_bf16"):  # ner_ids: below; ner_bf16: ner's graph
                add((name, f"warmup{i}"), name, log.predict_log.request.model_spec.signature_name,
                    warmup.request_inputs(log))
    from electra_tf.serving.scoring import load_scorer

    texts = SCORE_REQUEST_TEXTS  # Electric's scores (test_export_score.py)
    ids, mask = score_ids(load_scorer(electric_dir, max_seq_length=SEQ), texts)
    keys += [("score", "text"), ("score", "ids")]
    jobs += [{"path": score_export[1], "signature": "serving_default",
              "inputs": {"text": np.array([t.encode() for t in texts], object)}},
             {"path": score_export[1], "signature": "serving_ids",
              "inputs": {"input_word_ids": ids, "input_mask": mask,
                         "input_type_ids": np.zeros_like(ids)}}]
    bad = bad_input_rows(exports)
    for i, (name, signature, _, inputs, _) in enumerate(bad):
        add(("bad_input", i), name, signature, inputs)
    fuzz, fuzz_meta = fuzz_jobs(exports, odd_texts(*FUZZ_DEFAULT), FUZZ_DEFAULT[1])
    keys += [("fuzz", i) for i in range(len(fuzz))]
    jobs += fuzz

    # Run first in the same process, before tensorflow_text is imported: the ids-only
    # export (it must load without TF-Text's ops) and the text export (which must not).
    spec = exports["ner_ids"][0]
    ids = packed_for(spec, text_inputs(spec, ODD_TEXTS))
    no_text_jobs = [{"path": exports["ner_ids"][1], "signature": "serving_default",
                     "inputs": ids},
                    {"path": exports["ner"][1], "signature": "serving_ids", "inputs": ids}]
    for log in warmup.read(os.path.join(exports["ner_ids"][1], "assets.extra",
                                        warmup.WARMUP_FILE)):
        no_text_jobs.append({"path": exports["ner_ids"][1], "signature": "serving_default",
                             "inputs": warmup.request_inputs(log)})

    tmp = str(tmp_path_factory.mktemp("fresh"))
    out = run_fresh(jobs, tmp, without_tf_text=no_text_jobs)
    results = dict(zip(keys, out["results"]))
    results["modules"] = out["modules"]
    results["bad_input"] = [row + (results[("bad_input", i)],) for i, row in enumerate(bad)]
    results["fuzz"] = (fuzz_meta, [results[("fuzz", i)] for i in range(len(fuzz))])

    out2 = out["without_tf_text"]
    results[("ner_ids", "ids")] = out2["results"][0]
    results[("ner", "without_tf_text")] = out2["results"][1]
    for i, r in enumerate(out2["results"][2:]):
        results[("ner_ids", f"warmup{i}")] = r
    results["modules_no_text"] = out2["modules"]
    return results
