"""The Python API (docs/python.md): the page's code runs against tiny folders, and a
Predictor answers as the exported SavedModel does."""

import os
import re

import numpy as np
import pytest
from export_helpers import LONG_PAIRS, ODD_TEXTS, text_inputs
from helpers import REPO

PAGE = os.path.join(REPO, "docs", "python.md")


def page_blocks() -> list[str]:
    with open(PAGE, encoding="utf-8") as f:
        return re.findall(r"^```python\n(.*?)^```", f.read(), re.M | re.S)


def test_the_python_page_runs(finetuned_dirs, export_pretrained_dir, tiny_vocab, tmp_path,
                              monkeypatch, capsys):
    # The page's folder names, as a user's working directory would hold them.
    for name, target in (("ner_small", finetuned_dirs["ner"]),
                         ("mrpc_small", finetuned_dirs["mrpc"]),
                         ("squad_small", finetuned_dirs["squad"]),
                         ("electra_small", export_pretrained_dir), ("vocab.txt", tiny_vocab)):
        os.symlink(target, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    blocks = page_blocks()
    assert len(blocks) >= 7, "docs/python.md lost its examples"
    namespace = {}
    for block in blocks:
        exec(compile(block, PAGE, "exec"), namespace)  # noqa: S102 - the page's own code
    out = capsys.readouterr().out
    assert "token_classification ('text',)" in out
    assert (tmp_path / "my_electra" / "discriminator.weights.h5").exists()
    from electra_tf import PretrainingFolder

    assert PretrainingFolder.open("my_electra").vocab() == os.path.join("my_electra", "vocab.txt")
    assert "classification ('neg', 'neutral', 'pos') 64" in out
    assert (tmp_path / "my_classifier" / "finetuned.weights.h5").exists()


def _text(value):
    """An output array with the SavedModel's bytes as str (the Predictor's)."""
    value = np.asarray(value)
    if value.dtype == object and value.size and isinstance(value.flat[0], bytes):
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(value)
    return value


@pytest.mark.parametrize("name", ["ner", "stsb", "squad_joint", "rtd"])
def test_a_predictor_gives_the_exports_outputs(name, exports, fresh):
    from electra_tf import Predictor

    spec, _ = exports[name]  # the spec the SavedModel was written from (its buckets)
    result = fresh[(name, "odd")]
    assert "error" not in result["tf2"], result["tf2"].get("error")
    served = result["tf2"]
    got = Predictor(spec).outputs(*text_inputs(spec, ODD_TEXTS).values())
    assert sorted(got) == sorted(served)
    for key, want in served.items():
        want, value = _text(want), got[key]
        assert value.shape == want.shape, key
        if value.dtype.kind == "f":
            np.testing.assert_allclose(value, want, atol=1e-5, rtol=0, err_msg=key)
        else:
            assert (value == want).all(), key


def test_a_bf16_predictor_answers_as_the_bf16_export(finetuned_dirs, exports, fresh):
    """Predictor.open(precision="bf16"): the --precision=bf16 export's outputs in-process
    (the fresh process ran "ner_bf16" on ALIGN_TEXTS), to compare with fp32's."""
    from export_helpers import ALIGN_TEXTS

    from electra_tf import Predictor

    ner = Predictor.open(finetuned_dirs["ner"], precision="bf16")
    assert ner.spec.precision == "bf16"
    # the export's buckets, so that each row runs at the length the SavedModel ran it
    ner.spec.length_buckets = exports["ner_bf16"][0].length_buckets
    got = ner.outputs(ALIGN_TEXTS)
    served = fresh[("ner_bf16", "align")]["tf2"]
    for key in ("word_texts", "word_labels", "num_words"):
        assert (got[key] == _text(served[key])).all(), key
    np.testing.assert_allclose(got["word_scores"], served["word_scores"], atol=1e-5, rtol=0)
    fp32 = Predictor(exports["ner"][0]).outputs(ALIGN_TEXTS)["word_scores"]
    assert np.abs(got["word_scores"] - fp32).max() > 1e-5  # the bfloat16 products ran
    from electra_tf.core.errors import InputError

    with pytest.raises(InputError, match="precision must be one of fp32, bf16, got 'fp16'"):
        Predictor.open(os.path.join(str(finetuned_dirs["ner"]), "missing"), precision="fp16")


def test_a_predictor_opens_what_the_folder_serves(finetuned_dirs, export_pretrained_dir):
    from electra_tf import Predictor
    from electra_tf.core.errors import InputError

    assert Predictor.open(finetuned_dirs["stsb"]).task == "sequence_classification"
    assert Predictor.open(export_pretrained_dir).task == "rtd"
    # A task the folder was not trained for: the export's own refusal.
    with pytest.raises(InputError, match=r"\(give task=sequence_classification\)"):
        Predictor.open(finetuned_dirs["stsb"], task="squad")
    stsb = Predictor.open(finetuned_dirs["stsb"])
    (row,) = stsb.predict("a b", "c")
    assert sorted(row) == ["score", "truncated"] and isinstance(row["score"], float)
    # A string where a list belongs had been a batch of its characters ("xy": 2 rows).
    with pytest.raises(TypeError, match="text_pair must be a list of strings, one per row, "
                                        "got a single str"):
        stsb.outputs(["a b", "c d"], "xy")
    with pytest.raises(TypeError, match="not a mix"):
        stsb.predict(["a b", "c d"], "xy")
    (row,) = stsb.predict(b"a b", b"c")  # bytes are one row too
    # What the export refuses, the Predictor refuses: an answer limit below 1 never answered
    # (0 is the fine-tuning run's).
    for limit in ("max_query_length", "max_answer_length", "doc_stride"):
        with pytest.raises(InputError, match=re.escape(
                f"--{limit} must be >= 1 (or 0: the fine-tuning run's), got -1")):
            Predictor.open(finetuned_dirs["squad"], **{limit: -1})


def test_a_predictor_is_float32_whatever_policy_a_training_run_left_set(finetuned_dirs,
                                                                          export_pretrained_dir):
    """Keras' global policy at mixed_bfloat16, as a bf16 fine-tuning run in the same
    process leaves it: the Predictor (and the export, which builds its model the same
    way) had computed in bfloat16 while recording fp32. Its outputs are float32's; the
    user's policy is left as it was."""
    import keras

    from electra_tf import Predictor
    from electra_tf.modeling.models import dtype_policy_scope

    texts = ["John lives in Paris .", "a b c d e f g h"]
    for folder, key in ((finetuned_dirs["ner"], "wordpiece_scores"),
                        (export_pretrained_dir, "replaced_probabilities")):
        want = Predictor.open(folder).outputs(texts)[key]
        with dtype_policy_scope("mixed_bfloat16"):
            got = Predictor.open(folder).outputs(texts)[key]
            assert keras.config.dtype_policy().name == "mixed_bfloat16"
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_tables_paths_and_other_backends_are_refused_in_one_line(finetuned_dirs,
                                                                  monkeypatch):
    """A DataFrame had been read as its column names (one row, 'text'), a 2-D array as
    its rows; Predictor(path) had failed at its first call in an AttributeError; Keras on
    torch failed in its call, 17 frames deep."""
    import importlib.util

    import keras

    from electra_tf import Predictor
    from electra_tf.core.errors import InputError

    ner = Predictor.open(finetuned_dirs["ner"])
    with pytest.raises(TypeError, match=r"^text must be a list of strings, one per row, got "
                                        r"ndarray of 2 dimensions$"):
        ner.predict(np.array([["John lives"], ["in Paris"]]))
    if importlib.util.find_spec("pandas"):
        import pandas as pd

        with pytest.raises(TypeError, match=r"got DataFrame of 2 dimensions \(give one of its "
                                            r"columns, df\['text'\]\)$"):
            ner.predict(pd.DataFrame({"text": ["John lives in Paris", "a b"]}))
        assert len(ner.predict(pd.DataFrame({"text": ["John", "a b"]})["text"])) == 2
    with pytest.raises(TypeError, match=r"^Predictor takes an export's ServingSpec, got str: "
                                        r"open a model folder with Predictor.open\(folder\)$"):
        Predictor(finetuned_dirs["ner"])
    # question answering's options on another task (had been taken, and ignored)
    with pytest.raises(ValueError, match=r"^max_query_length, doc_stride: option\(s\) of "
                                         r"question answering; a token_classification model "
                                         r"has no question or answer$"):
        Predictor.open(finetuned_dirs["ner"], doc_stride=64, max_query_length=5)
    assert Predictor.open(finetuned_dirs["squad"], doc_stride=64).task == "squad"
    monkeypatch.setattr(keras.backend, "backend", lambda: "torch")
    with pytest.raises(InputError, match=r"^a Predictor runs Keras on tensorflow or jax; this "
                                         r"Python session runs Keras on torch "):
        Predictor.open(finetuned_dirs["ner"])


def test_a_lone_surrogate_is_read_as_a_replacement_character(finetuned_dirs):
    """Python's str of JSON's "\\ud800" (not UTF-8) had ended in TensorFlow's ValueError;
    it goes in as the invalid UTF-8 bytes a server would receive, which the graph
    replaces with U+FFFD."""
    from electra_tf import Predictor

    predictor = Predictor.open(finetuned_dirs["ner"])
    (odd,) = predictor.predict("hello \ud800 world")
    (replaced,) = predictor.predict("hello \ufffd world")
    assert odd == replaced


@pytest.mark.slow  # a KERAS_BACKEND=jax process loading three heads' Predictors (25 s)
def test_a_predictor_answers_alike_in_a_process_running_keras_on_jax(finetuned_dirs,
                                                                    export_pretrained_dir):
    """A model fine-tuned on JAX, opened with KERAS_BACKEND=jax still set: the tagging,
    SQuAD and rtd heads had failed in an AttributeError ('tuple' object has no
    attribute 'rank': the heads' JAX arrays in the serving graph's shape reading)."""
    import json

    from helpers import run_jax_script

    from electra_tf import Predictor

    texts = ["John lives in Paris .", "", "a b c d e f g h"]
    # the heads that had failed (tagging, SQuAD over several windows, rtd); a
    # classifier's, STS-B's and plain SQuAD's left out for the suite's time
    cases = {"ner": (finetuned_dirs["ner"], [texts]),
             # contexts of several windows (the windows' graph on JAX's outputs)
             "squad_joint": (finetuned_dirs["squad_joint"],
                             [[q for q, _ in LONG_PAIRS], [c for _, c in LONG_PAIRS]]),
             "rtd": (export_pretrained_dir, [texts])}
    proc = run_jax_script("""
        import json, sys
        import keras
        from electra_tf import Predictor
        assert keras.backend.backend() == "jax"
        cases = json.loads(sys.argv[1])
        out = {name: Predictor.open(folder).predict(*inputs)
               for name, (folder, inputs) in cases.items()}
        try:
            Predictor.open(cases["ner"][0], traced=True)
        except ValueError as e:
            out["refused"] = str(e)
        print(json.dumps(out))
        """, json.dumps(cases))
    assert proc.returncode == 0, proc.stderr[-3000:]
    on_jax = json.loads(proc.stdout.strip().splitlines()[-1])
    assert on_jax.pop("refused").startswith("traced=True needs Keras on TensorFlow")
    for name, (folder, inputs) in cases.items():
        want = Predictor.open(folder).predict(*inputs)
        for got_row, want_row in zip(on_jax[name], want, strict=True):
            assert sorted(got_row) == sorted(want_row), name
            for key, value in want_row.items():
                if isinstance(value, list) and value and isinstance(value[0], float):
                    np.testing.assert_allclose(got_row[key], value, atol=1e-5, err_msg=key)
                elif isinstance(value, float):
                    assert got_row[key] == pytest.approx(value, abs=1e-5), key
                else:
                    assert got_row[key] == value, (name, key)


def test_a_folder_of_another_kind_is_named_for_what_it_holds(finetuned_dirs,
                                                            export_pretrained_dir, tmp_path):
    """Every refusal had described the folder expected (a pre-training model_dir) and
    named the export command's --checkpoint: a fine-tuned folder copied without its
    record, one whose run has not finished, an export's model folder, a task the
    folder does not hold."""
    import shutil

    from electra_tf import Predictor
    from electra_tf.core.errors import InputError

    mrpc = finetuned_dirs["mrpc"]
    partial = tmp_path / "partial"
    shutil.copytree(mrpc, partial)
    (partial / "finetuning_config.json").unlink()
    running = tmp_path / "running"
    (running / "checkpoints").mkdir(parents=True)
    (running / "checkpoints" / "ckpt-2.index").write_bytes(b"")
    shutil.copy(os.path.join(mrpc, "finetuning_config.json"), running)
    group = tmp_path / "rte"
    group.mkdir()
    (group / "trials.json").write_text("{}")
    (tmp_path / "rte_2").mkdir()  # (rte_1 removed: --keep_all_models=false)
    export = tmp_path / "exports" / "mrpc"
    for version in ("1", "2"):
        (export / version).mkdir(parents=True)
        (export / version / "saved_model.pb").write_bytes(b"")
    for folder, task, said in [
            (partial, None, "it holds a fine-tuned model's finetuned.weights.h5 without the "
                            "finetuning_config.json that records its head and labels"),
            (running, None, "it holds a fine-tuning run that has not finished: "
                            "checkpoints/ holds its saves"),
            (running / "checkpoints", None, f"it is the checkpoints/ folder of the run in "
                                            f"{running}: give that folder"),
            (group, None, "it is a trial group (trials.json): give one of its trials' "
                          "folders (rte_2)"),
            (export, None, "it is an export's model folder (versions 1, 2: SavedModels): "
                           "give the model_dir it was exported from"),
            (mrpc, "rtd", "is a fine-tuned sequence_classification model, which task=rtd "
                          "cannot serve (rtd serves a pre-training folder's discriminator; "
                          "give task=sequence_classification)"),
            (export_pretrained_dir, "sequence_classification",
             "it is a pre-training folder (discriminator.weights.h5)"),
            (mrpc, "token_classification", "which task=token_classification cannot serve "
                                           "(give task=sequence_classification)")]:
        with pytest.raises(InputError) as raised:
            Predictor.open(str(folder), task=task)
        assert said in str(raised.value) and str(raised.value).startswith("folder"), (
            str(raised.value))
    # a conversion stopped midway: said once, in the caller's name (it had been
    # "folder: the fine-tuning folder: DIR holds a conversion ...")
    stopped = tmp_path / "stopped"
    shutil.copytree(mrpc, stopped)
    (stopped / ".conversion_unfinished").write_text("{}")
    with pytest.raises(InputError, match=rf"^folder: {stopped} holds a conversion that was "
                                         r"stopped midway"):
        Predictor.open(str(stopped))
    with pytest.raises(InputError, match=rf"^folder: {tmp_path / 'nothere'} not found$"):
        Predictor.open(str(tmp_path / "nothere"))
    # a generator alone (a conversion of an ElectraForMaskedLM): named as such (it had
    # been told the discriminator's files it lacks, nothing more)
    generator_only = tmp_path / "generator_only"
    generator_only.mkdir()
    (generator_only / "generator.weights.h5").write_bytes(b"")
    with pytest.raises(InputError, match=r"; it holds a generator alone \(generator.weights.h5: "
                                         r"a masked LM, as a conversion of a transformers "
                                         r"ElectraForMaskedLM writes\), no discriminator$"):
        Predictor.open(str(generator_only))
    # a checkpoint of the original (TF1), its folder or its prefix: to be converted first
    # (it had been "not found", or told the files of a model folder it lacks)
    original = tmp_path / "electra_small"
    original.mkdir()
    for name in ("model.ckpt-100.index", "model.ckpt-100.data-00000-of-00001"):
        (original / name).write_bytes(b"")
    for path in (original, original / "model.ckpt-100"):
        with pytest.raises(InputError) as raised:
            Predictor.open(str(path))
        assert str(raised.value).endswith(
            f"a checkpoint of the original ELECTRA (TensorFlow 1): convert it first, python -m "
            f"electra_tf.convert --from=tf1 --checkpoint={path} --output=NEW_FOLDER "
            "(docs/conversion.md)"), str(raised.value)
    # a SavedModel's variables/ is none (nor a run's checkpoints/, named above)
    from electra_tf.folders.files import original_checkpoint_hint

    variables = tmp_path / "exported" / "1" / "variables"
    variables.mkdir(parents=True)
    (variables / "variables.index").write_bytes(b"")
    assert original_checkpoint_hint(str(variables)) == ""
    assert original_checkpoint_hint(str(variables / "variables")) == ""
    # the fine-tuned weights file names its folder, as a discriminator's does
    weights = os.path.join(mrpc, "finetuned.weights.h5")
    assert Predictor.open(weights).task == "sequence_classification"


def test_threads_making_their_first_calls_together_build_the_model_once(finetuned_dirs,
                                                                         monkeypatch):
    """Two builds had left the function of one and the model of the other: bf16's kernels
    then refreshed on a model the function did not run (a weight change went unseen)."""
    import threading

    from electra_tf import Predictor
    from electra_tf.serving import signatures

    built, build = [], signatures.bucketed_model
    both_in = threading.Barrier(2)

    def bucketed_model(spec):
        built.append(spec)
        try:  # (both threads in here at once is the race; alone, go on after a while)
            both_in.wait(timeout=1)
        except threading.BrokenBarrierError:
            pass
        return build(spec)

    monkeypatch.setattr(signatures, "bucketed_model", bucketed_model)
    ner = Predictor.open(finetuned_dirs["ner"], precision="bf16")
    answers = [None, None]

    def call(i):
        answers[i] = ner.outputs(["EU rejects German call"])["word_scores"]

    threads = [threading.Thread(target=call, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(built) == 1
    np.testing.assert_array_equal(answers[0], answers[1])
    before = ner.outputs(["EU rejects German call"])["word_scores"]
    kernel = ner.model.trainable_weights[5]
    kernel.assign(kernel * 1.7)
    assert np.abs(ner.outputs(["EU rejects German call"])["word_scores"] - before).max() > 0
