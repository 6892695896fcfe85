"""What the Python API (Predictor, the folders' save) and the query client refuse, in one
line naming the input, before anything runs or is written; and what they accept."""

import json
import os
import re
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from helpers import run_module, tiny_encoder_config

TEXTS = ["hello world", "the model reads a token", "Zoë lives in Zürich", "", "a b c d e"]


@pytest.fixture(scope="module")
def predictors(finetuned_dirs):
    """{"ner": a single-text Predictor, "mrpc": a sentence-pair one}."""
    from electra_tf import Predictor

    return {name: Predictor.open(finetuned_dirs[name]) for name in ("ner", "mrpc")}


@pytest.fixture(scope="module")
def encoder_config(tiny_vocab):
    from electra_tf.text.vocab import load_vocab

    return tiny_encoder_config(len(load_vocab(tiny_vocab)))


def _close(got, want, where="row"):
    """Rows equal, floats within 1e-5 (labels, texts and counts exactly)."""
    if isinstance(want, dict):
        assert sorted(got) == sorted(want), where
        for key in want:
            _close(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _close(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert abs(got - want) <= 1e-5, (where, got, want)
    else:
        assert got == want, where


def test_predict_refuses_what_is_not_a_list_of_strings(predictors):
    """A dict had run as a batch of its keys, a set as its rows in no order; None, an
    int or a 0-d array failed in Python's iteration, a non-string in TensorFlow's
    conversion, and pair inputs of different lengths in the graph (none naming the
    input). A generator had failed in predict's len(); an array of str is accepted."""
    ner, mrpc = predictors["ner"], predictors["mrpc"]
    bad = [({"a": 1}, "text must be a list of strings, one per row, got dict"),
           ({"a", "b"}, "text must be a list of strings, one per row, got set"),
           (None, "text must be a list of strings, one per row, got NoneType"),
           (5, "text must be a list of strings, one per row, got int"),
           (np.array("a"), "text must be a list of strings, one per row, got ndarray"),
           ([5], "text[0] must be a string (str or UTF-8 bytes), got int"),
           (["a", None], "text[1] must be a string (str or UTF-8 bytes), got NoneType")]
    for value, message in bad:
        for call in (ner.predict, ner.outputs):
            with pytest.raises(TypeError, match=re.escape(message)) as e:
                call(value)
            assert "\n" not in str(e.value)
    for call in (mrpc.predict, mrpc.outputs):
        with pytest.raises(ValueError, match="of one length .*got 2 text, 1 text_pair"):
            call(["a b", "c"], ["d"])
    rows = ner.predict(TEXTS)
    assert len(rows) == len(TEXTS)
    # a bytearray is a text (it had been a list of ints: "text[0] ... got int")
    assert ner.predict(bytearray(TEXTS[2].encode())) == rows[2:3]
    assert ner.predict([bytearray(t.encode()) for t in TEXTS]) == rows
    with pytest.raises(TypeError, match="got a single bytearray"):
        ner.outputs(bytearray(b"a b"))
    # an empty batch: its string outputs are arrays of objects, as a batch's (had been <U1)
    empty = ner.outputs([])
    assert empty["word_texts"].dtype == object and empty["word_texts"].shape[0] == 0
    assert ner.predict(t for t in TEXTS) == rows
    assert ner.predict(np.array(TEXTS)) == rows
    assert (ner.outputs(t for t in TEXTS)["word_labels"] == ner.outputs(TEXTS)["word_labels"]).all()


def test_predict_runs_a_long_list_in_batches(predictors):
    """predict(batch_size=N) runs N rows at a time and gives each row what one batch
    gives (predict had no batch_size: a long list was one batch, its memory unbounded);
    a batch_size that is not a whole number >= 1 is refused."""
    ner, mrpc = predictors["ner"], predictors["mrpc"]
    _close(ner.predict(TEXTS, batch_size=2), ner.predict(TEXTS, batch_size=64))
    _close(mrpc.predict(TEXTS, TEXTS[::-1], batch_size=2),
           mrpc.predict(TEXTS, TEXTS[::-1], batch_size=64))
    assert len(ner.predict(TEXTS, batch_size=1)) == len(TEXTS)
    for size in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match=re.escape(
                f"batch_size must be a whole number >= 1, got {size!r}")):
            ner.predict(TEXTS, batch_size=size)


def test_a_long_list_runs_the_traced_graph_and_answers_alike(predictors, finetuned_dirs):
    """A predict of TRACE_BATCHES batches or more runs the text graph traced once (op by
    op it had cost a fixed few hundred ms a call); its rows are the op-by-op rows to
    float32 rounding; traced=False never traces, traced=True traces from the first call
    and answers a call alike each time."""
    from electra_tf import Predictor
    from electra_tf.serving.predictor import TRACE_BATCHES

    pair = Predictor.open(finetuned_dirs["mrpc"])
    rows = (TEXTS * TRACE_BATCHES)[:TRACE_BATCHES]
    eager = pair.predict(rows[:TRACE_BATCHES - 1], rows[1:], batch_size=1)
    assert pair._graph is None  # 7 batches: op by op
    traced = pair.predict(rows, rows[1:] + rows[:1], batch_size=1)
    assert pair._graph.experimental_get_tracing_count() == 1
    _close(traced[:-1], eager)
    pair.predict(rows, rows, batch_size=2)  # 4 batches: op by op again, no new trace
    assert pair._graph.experimental_get_tracing_count() == 1
    never = Predictor.open(finetuned_dirs["mrpc"], traced=False)
    _close(never.predict(rows, rows[1:] + rows[:1], batch_size=1), traced)
    assert never._graph is None
    always = Predictor.open(finetuned_dirs["mrpc"], traced=True)
    first = always.outputs(TEXTS, TEXTS[::-1])
    assert always._graph.experimental_get_tracing_count() == 1
    again = always.outputs(TEXTS, TEXTS[::-1])
    assert all((first[k] == again[k]).all() for k in first)
    np.testing.assert_allclose(
        first["logits"], predictors["mrpc"].outputs(TEXTS, TEXTS[::-1])["logits"], atol=1e-5)
    for value in ("yes", 1):  # refused before the folder is read (a missing one too)
        with pytest.raises(TypeError, match=re.escape(
                f"traced must be True, False or None, got {value!r}")):
            Predictor.open(os.path.join(finetuned_dirs["mrpc"], "missing"), traced=value)
    assert Predictor.open(finetuned_dirs["mrpc"], traced=np.False_).traced is False


def test_a_bf16_predictor_answers_with_the_weights_its_model_has_now(finetuned_dirs):
    """Its bfloat16 kernels had been copied at the first call: a weight changed after it
    was unseen in the products and read everywhere else, so the answer depended on
    whether the Predictor had been called before the change (fp32's never did)."""
    from electra_tf import Predictor

    def scaled(predictor):
        for variable in predictor.model.trainable_variables:
            variable.assign(variable.value * 1.5)
        return predictor

    used = Predictor.open(finetuned_dirs["ner"], precision="bf16")
    before = used.outputs(TEXTS)["word_scores"]
    after = scaled(used).outputs(TEXTS)["word_scores"]
    fresh = scaled(Predictor.open(finetuned_dirs["ner"], precision="bf16")).outputs(TEXTS)
    assert np.abs(after - before).max() > 1e-3  # the change is seen
    np.testing.assert_array_equal(after, fresh["word_scores"])


def test_arguments_of_the_wrong_type_are_refused_naming_them(predictors, finetuned_dirs,
                                                           tiny_vocab, tmp_path):
    """A float max_seq_length had passed Predictor.open's range check and failed in
    TensorFlow's indexing at the first predict; None as a folder had been os.path's
    message, naming no argument; predict("a", None) had said "not a mix"; and
    PretrainingFolder.save over a file had been a FileExistsError."""
    from electra_tf import Predictor
    from electra_tf.core.errors import InputError
    from electra_tf.folders import FinetunedFolder, PretrainingFolder
    from electra_tf.modeling import build_discriminator

    for value in (16.0, "16", True):
        with pytest.raises(TypeError, match=re.escape(
                f"max_seq_length must be a whole number, got {value!r}")):
            Predictor.open(finetuned_dirs["ner"], max_seq_length=value)
    with pytest.raises(TypeError, match="max_answer_length must be a whole number"):
        Predictor.open(finetuned_dirs["squad"], max_answer_length=2.5)
    with pytest.raises(TypeError, match="doc_stride must be a whole number"):
        Predictor.open(finetuned_dirs["squad"], doc_stride=64.0)
    with pytest.raises(InputError, match=r"^--doc_stride must be >= 1 \(or 0: the "
                                         r"fine-tuning run's\), got -1$"):
        Predictor.open(finetuned_dirs["squad"], doc_stride=-1)
    for open_, what in ((Predictor.open, "folder"), (FinetunedFolder.open, "model_dir"),
                        (PretrainingFolder.open, "model_dir")):
        with pytest.raises(TypeError, match=f"^{what} must be a folder's path .* got NoneType"):
            open_(None)
    for second in (None, 5):
        with pytest.raises(TypeError, match="^text_pair must be a string or a list of "
                                            f"strings, got {type(second).__name__}$"):
            predictors["mrpc"].predict("a", second)
    victim = tmp_path / "a_file"
    victim.write_text("mine")
    discriminator = build_discriminator(predictors["ner"].model.encoder.config)
    with pytest.raises(InputError, match="a_file is a file, not a folder"):
        PretrainingFolder.save(str(victim), discriminator, tiny_vocab)
    assert victim.read_text() == "mine"


def test_a_finetuned_folder_without_its_weights_names_them(finetuned_dirs, tmp_path):
    """A fine-tuned folder whose finetuned.weights.h5 is missing had been taken for a
    pre-training folder: "discriminator.weights.h5 not found"."""
    from electra_tf import Predictor
    from electra_tf.core.errors import InputError

    folder = shutil.copytree(finetuned_dirs["mrpc"], tmp_path / "mrpc")
    os.remove(folder / "finetuned.weights.h5")
    with pytest.raises(InputError, match="finetuned.weights.h5 not found") as e:
        Predictor.open(str(folder))
    assert "discriminator" not in str(e.value)


def test_a_finetuned_folder_asked_for_a_pretrained_head_or_opened_by_file_is_named(
        finetuned_dirs):
    """task="rtd" on a fine-tuned folder had said only "discriminator.weights.h5 not
    found"; FinetunedFolder.open of its weights file (which Predictor.open takes) had
    looked for FILE/finetuning_config.json."""
    from electra_tf import FinetunedFolder, Predictor
    from electra_tf.core.errors import InputError

    ner = finetuned_dirs["ner"]
    for task in ("rtd", "score"):
        with pytest.raises(InputError, match=re.escape(
                f"is a fine-tuned token_classification model, which task={task} cannot "
                f"serve ({task} serves a pre-training folder's discriminator; give "
                "task=token_classification)")):
            Predictor.open(ner, task=task)
    weights = os.path.join(ner, "finetuned.weights.h5")
    assert FinetunedFolder.open(weights).path == os.path.abspath(ner)
    with pytest.raises(InputError, match=re.escape(
            "vocab.txt is a file, not a fine-tuning model_dir (or its finetuned.weights.h5)")):
        FinetunedFolder.open(os.path.join(ner, "vocab.txt"))


def test_an_electric_folder_serves_its_scores(electric_dir, export_pretrained_dir):
    """An Electric pre-training folder had served rtd by default, sigmoid of its
    energies read as replaced-token probabilities; now it serves score, and rtd is
    refused. A plain pre-training folder still serves rtd."""
    from electra_tf import Predictor
    from electra_tf.core.errors import InputError
    from electra_tf.serving.export import load_spec

    assert Predictor.open(electric_dir).task == "score"
    for open_rtd in (lambda: Predictor.open(electric_dir, task="rtd"),
                     lambda: load_spec("rtd", electric_dir)):
        with pytest.raises(InputError, match="holds an Electric model .*--task=score"):
            open_rtd()
    assert Predictor.open(export_pretrained_dir).task == "rtd"


def test_a_pair_model_needs_five_positions(finetuned_dirs):
    """A sentence-pair model had been served at --max_seq_length 3 or 4, where the
    second text has no position (every request had one answer); a single-text model
    still takes 3."""
    from electra_tf import Predictor
    from electra_tf.core.errors import InputError
    from electra_tf.serving.export import load_spec

    mrpc = finetuned_dirs["mrpc"]
    for length in (3, 4):
        for opened in (lambda: load_spec(None, mrpc, max_seq_length=length),
                       lambda: Predictor.open(mrpc, max_seq_length=length)):
            with pytest.raises(InputError, match=f"--max_seq_length={length}: a sentence-pair "
                                                 "export of the model in .* takes 5 to"):
                opened()
    (row,) = Predictor.open(mrpc, max_seq_length=5).predict("a b", "c d")
    assert row["truncated"]
    assert load_spec(None, finetuned_dirs["ner"], max_seq_length=3).max_seq_length == 3


def test_pretraining_folder_save_refuses_before_writing(encoder_config, tiny_vocab, tmp_path):
    """PretrainingFolder.save had made the folder and written what it could before a
    bad argument failed (a str: AttributeError; a missing or too large vocabulary after
    the weights); each is now refused first, and the folder is never made."""
    from electra_tf import PretrainingFolder
    from electra_tf.core.errors import ConfigError, VocabError
    from electra_tf.modeling import build_discriminator

    disc = build_discriminator(encoder_config)
    small = build_discriminator(tiny_encoder_config(10))
    cases = [
        (("not a model", tiny_vocab), {}, ConfigError, "takes an ElectraDiscriminator .*got str"),
        ((disc, str(tmp_path / "missing.txt")), {}, VocabError, "missing.txt"),
        ((small, tiny_vocab), {}, ConfigError, "tokens but the model's embedding table has 10"),
        ((disc, tiny_vocab), {"config": {"model_size": "tiny"}}, ConfigError,
         "config must be a PretrainingConfig or None, got dict"),
    ]
    for i, (args, kwargs, error, message) in enumerate(cases):
        target = tmp_path / f"out{i}"
        with pytest.raises(error, match=message):
            PretrainingFolder.save(str(target), *args, **kwargs)
        assert not target.exists(), message


def test_finetuned_folder_save_takes_label_names_as_a_list(encoder_config, tiny_vocab, tmp_path):
    """label_names as a list or tuple had failed in the flag's parser (.strip() of a
    list); it is recorded as the string "neg,neutral,pos" is. A non-str name is refused."""
    from electra_tf import FinetunedFolder
    from electra_tf.core.errors import ConfigError
    from electra_tf.modeling import build_discriminator
    from electra_tf.tasks.model import FinetuningModel

    model = FinetuningModel(build_discriminator(encoder_config).encoder,
                            "sequence_classification", num_labels=3)
    model.build()
    want = FinetunedFolder.save(str(tmp_path / "s"), model, tiny_vocab, "classification",
                                label_names="neg,neutral,pos", max_seq_length=16)
    assert want.record.label_names == ("neg", "neutral", "pos")
    for i, names in enumerate((["neg", "neutral", "pos"], ("neg", "neutral", "pos"))):
        saved = FinetunedFolder.save(str(tmp_path / f"l{i}"), model, tiny_vocab,
                                     "classification", label_names=names, max_seq_length=16)
        assert saved.record.label_names == want.record.label_names
    with pytest.raises(ConfigError, match=re.escape("label_names must be strings, got "
                                                    "['neg', 5, 'pos']")):
        FinetunedFolder.save(str(tmp_path / "bad"), model, tiny_vocab, "classification",
                             label_names=["neg", 5, "pos"])
    assert not (tmp_path / "bad").exists()


def test_client_refuses_a_single_text_and_a_server_it_would_misread():
    """text_inputs(text="abc") had sent 3 rows, one per character; check_request had
    passed "http://host:port" (REST asked http://http://...) and a server without a
    port (the client asked 80 or 443); one with a path had been said to name no port."""
    from electra_tf.core.errors import InputError
    from electra_tf.serving.client import check_request, text_inputs

    with pytest.raises(InputError, match="--text takes a list of texts, one per row, got a "
                                         "single str"):
        text_inputs(text="abc")
    for rest in (True, False):
        with pytest.raises(InputError, match="give HOST:PORT, without http://"):
            check_request("http://localhost:8501", "m", rest)
        with pytest.raises(InputError, match="'localhost' names no port"):
            check_request("localhost", "m", rest)
        for server in ("localhost:8501/v1/models/m", "localhost:8500/"):  # (had: no port)
            with pytest.raises(InputError, match=r"give HOST:PORT, without a path \(the "
                                                 "client writes the URL itself; --model_name"):
                check_request(server, "m", rest)
        for server in ("localhost:8500", "[::1]:8500"):
            check_request(server, "m", rest)
        # (gRPC had tried to resolve them: an UNAVAILABLE network error, status 1)
        with pytest.raises(InputError, match=r"^--server=':8500' names no host: give "
                                             r"HOST:PORT \(localhost:8500 for this machine\)"):
            check_request(":8500", "m", rest)
        for server in (" localhost:8500", "local host:8500", "localhost:8500\n"):
            with pytest.raises(InputError, match=r"holds a space or control character"):
                check_request(server, "m", rest)
    for server in ("dns:///localhost:8500", "unix:/tmp/sock"):  # gRPC's own target forms
        check_request(server, "m", False)


@pytest.fixture
def echo_rest():
    """"HOST:PORT" of a loopback REST stand-in answering every predict with
    {"outputs": {"signature": [the signature_name it was asked]}}."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            data = json.dumps({"outputs": {"signature": [body.get("signature_name")]}})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data.encode())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_ids_go_to_the_signature_that_takes_them(exports, echo_rest, tmp_path):
    """--export_dir's ids had gone to --signature_name as given (serving_default), which
    of a text export takes text; they go to its serving_ids, to an --ids_only export's
    serving_default, and a signature that takes no ids (one of text, one the export
    lacks) is refused."""
    from electra_tf.core.errors import InputError
    from electra_tf.serving.client import ids_signature

    text, ids_only = exports["ner"][1], exports["ner_ids"][1]
    assert ids_signature(text) == "serving_ids"
    assert ids_signature(text, "serving_ids") == "serving_ids"
    assert ids_signature(ids_only) == "serving_default"
    # A text signature besides serving_default (which stands for the default, ids or not).
    info_path = os.path.join("assets.extra", "export_info.json")
    with open(os.path.join(text, info_path), encoding="utf-8") as f:
        info = json.load(f)
    info["signatures"]["serving_text"] = ["text"]
    (tmp_path / "assets.extra").mkdir()
    (tmp_path / info_path).write_text(json.dumps(info), encoding="utf-8")
    for export_dir, name in ((str(tmp_path), "serving_text"), (text, "serving_nope"),
                             (ids_only, "serving_ids")):
        with pytest.raises(InputError, match=f"--signature_name={name} does not take ids"):
            ids_signature(export_dir, name)
    proc = run_module("electra_tf.query", f"--server={echo_rest}", "--rest", "--model_name=x",
                      f"--export_dir={text}", "--text=hi", "--signature_name=serving_default")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout) == {"outputs": {"signature": ["serving_ids"]}}


def test_saves_refuse_before_writing_and_never_mix_into_another_folder(encoder_config,
                                                                      tiny_vocab, tmp_path):
    """FinetunedFolder.save had replaced a trained folder's weights, then refused an
    option (do_lower_case="false") and left its record unreadable; saving over a run's
    folder had kept its results, predictions and checkpoints (or, a discriminator saved
    over a fine-tuned folder, served the old model); PretrainingFolder.save recorded a
    config of another model. Each is refused, nothing written."""
    import os

    from electra_tf import FinetunedFolder, PretrainingFolder
    from electra_tf.core.config import PretrainingConfig
    from electra_tf.core.errors import ConfigError, InputError
    from electra_tf.modeling import build_discriminator
    from electra_tf.tasks.model import FinetuningModel

    disc = build_discriminator(encoder_config)
    model = FinetuningModel(disc.encoder, "sequence_classification", num_labels=3)
    model.build()
    labels = dict(label_names="neg,neutral,pos", max_seq_length=16)
    trained = tmp_path / "trained"
    FinetunedFolder.save(str(trained), model, tiny_vocab, "classification", **labels)
    # a save killed midway left a .tmp-* file: the save run again takes the folder
    (trained / ".tmp-abc.weights.h5").write_bytes(b"cut")
    FinetunedFolder.save(str(trained), model, tiny_vocab, "classification", **labels)
    (trained / ".tmp-abc.weights.h5").unlink()
    (trained / "results.json").write_text('{"format_version": 1}')
    (trained / "checkpoints").mkdir()
    before = {p: p.read_bytes() for p in trained.iterdir() if p.is_file()}

    def unchanged():
        assert {p: p.read_bytes() for p in trained.iterdir() if p.is_file()} == before

    bad = [({"do_lower_case": "false"}, "do_lower_case must be true or false, got 'false'"),
           ({"max_seq_length": 64.0}, "max_seq_length must be an integer, got 64.0"),
           ({"max_seq_length": "64"}, "max_seq_length must be an integer, got '64'"),
           ({"label_names": None}, "label_names must be a string, got None")]
    for options, message in bad:
        with pytest.raises(ConfigError, match=re.escape(message)):
            FinetunedFolder.save(str(tmp_path / "new"), model, tiny_vocab, "classification",
                                 **{**labels, **options})
        assert not (tmp_path / "new").exists()
    with pytest.raises(InputError, match=re.escape(
            f"FinetunedFolder.save: path {trained} already holds other files (checkpoints, "
            "results.json): save into a new or empty folder")):
        FinetunedFolder.save(str(trained), model, tiny_vocab, "classification", **labels)
    unchanged()
    with pytest.raises(InputError, match="already holds other files"):  # a fine-tuned one
        PretrainingFolder.save(str(trained), disc, tiny_vocab)
    unchanged()
    with pytest.raises(InputError, match=f"path {re.escape(tiny_vocab)}: .* is a file"):
        FinetunedFolder.save(tiny_vocab, model, tiny_vocab, "classification", **labels)
    for args in ((None, model, tiny_vocab), (str(tmp_path / "new"), model, None)):
        with pytest.raises(TypeError, match="(path|vocab_file) must be a"):
            FinetunedFolder.save(*args, "classification", **labels)
    with pytest.raises(ConfigError, match=re.escape(
            "max_seq_length=256 (tagging's default: pass max_seq_length=) exceeds")):
        short = build_discriminator(tiny_encoder_config(encoder_config.vocab_size,
                                                        max_position_embeddings=128))
        FinetunedFolder.save(str(tmp_path / "new"),
                             FinetuningModel(short.encoder, "token_classification", num_labels=3),
                             tiny_vocab, "tagging", label_names="O,B-X,I-X")
    assert not (tmp_path / "new").exists()
    # a save run again over what it wrote is no refusal (a notebook's cell run twice)
    again = FinetunedFolder.save(str(tmp_path / "twice"), model, tiny_vocab, "classification",
                                 **labels)
    FinetunedFolder.save(again.path, model, again.vocab(), "classification", **labels)
    # PretrainingFolder.save: a config must be the model's
    other = PretrainingConfig(model_size="tiny", vocab_size=encoder_config.vocab_size + 1)
    with pytest.raises(ConfigError, match=re.escape(
            "config does not describe this discriminator: ") + ".*vocab_size"):
        PretrainingFolder.save(str(tmp_path / "p"), disc, tiny_vocab, config=other)
    assert not os.path.exists(tmp_path / "p")


def test_opening_a_finetuned_folder_imports_no_framework(finetuned_dirs):
    """FinetunedFolder.open of a SQuAD folder had imported Keras and TensorFlow (about 4.5
    s) to ask the span head's class what its record needs (electra_tf/__init__.py: none
    imports them until it builds a model)."""
    import subprocess
    import sys

    from helpers import REPO

    script = ("import sys; from electra_tf import FinetunedFolder; "
              "[FinetunedFolder.open(p).record for p in sys.argv[1:]]; "
              "print(sorted(m for m in ('keras', 'tensorflow', 'jax') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", script, finetuned_dirs["squad"],
                           finetuned_dirs["ner"]], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"


def test_numpy_numbers_are_taken_as_the_python_numbers_they_hold(encoder_config, tiny_vocab,
                                                                  tmp_path):
    """np.int64(64) and np.float32(0.1) passed the checks, then failed the record's JSON
    write after the weights were written, leaving a folder no reader opens."""
    import dataclasses

    import numpy as np

    from electra_tf import FinetunedFolder, PretrainingFolder
    from electra_tf.modeling import build_discriminator
    from electra_tf.tasks.model import FinetuningModel

    config = dataclasses.replace(encoder_config, hidden_size=np.int64(encoder_config.hidden_size),
                                 hidden_dropout_prob=np.float32(0.1))
    assert type(config.hidden_size) is int and type(config.hidden_dropout_prob) is float
    disc = build_discriminator(config)
    saved = PretrainingFolder.save(str(tmp_path / "p"), disc, tiny_vocab)
    assert saved.encoder.hidden_dropout_prob == pytest.approx(0.1)
    model = FinetuningModel(disc.encoder, "sequence_classification", num_labels=3)
    model.build()
    folder = FinetunedFolder.save(str(tmp_path / "f"), model, tiny_vocab, "classification",
                                  label_names="neg,neutral,pos", max_seq_length=np.int64(16),
                                  do_lower_case=np.bool_(True))
    assert folder.record.max_seq_length == 16


def test_predictors_traced_one_after_another_are_not_said_to_retrace(finetuned_dirs, caplog):
    """TensorFlow counts traces by a function's code, which every Predictor's text graph
    shared: from the fifth traced Predictor in a process (a service reloading its
    model) each had printed "5 out of the last 5 calls ... triggered tf.function
    retracing", where each traced once."""
    from electra_tf import Predictor

    with caplog.at_level("WARNING", logger="tensorflow"):
        for _ in range(6):
            predictor = Predictor.open(finetuned_dirs["mrpc"], traced=True)
            predictor.outputs(TEXTS[:1], TEXTS[1:2])
            assert predictor._graph.experimental_get_tracing_count() == 1
    assert "retracing" not in caplog.text

