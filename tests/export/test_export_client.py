"""export.client against loopback stand-ins for TF Serving's gRPC and REST APIs."""

import base64
import json
import os
import re
import shutil
import threading
import time
import urllib.request

import numpy as np
import pytest
from fake_serving import start_grpc, start_grpc_answering, start_rest, start_tcp
from helpers import error_line, run_module


@pytest.fixture(scope="module")
def servers(exports):
    from electra_tf.serving.export import load_saved_model

    models = {name: load_saved_model(exports[name][1])
              for name in ("ner", "mrpc", "squad", "ner_ids")}
    grpc_server, grpc_port = start_grpc(models)
    rest_server, rest_port = start_rest(models)
    yield {"models": models, "grpc": f"127.0.0.1:{grpc_port}", "rest": f"127.0.0.1:{rest_port}"}
    grpc_server.stop(None)
    rest_server.shutdown()


def _direct(models, name, inputs):
    import tensorflow as tf

    out = models[name].signatures["serving_default"](
        **{k: tf.constant(v) for k, v in inputs.items()})
    return {k: v.numpy() for k, v in out.items()}


def test_grpc_and_rest_answer_like_the_saved_model(servers):
    from electra_tf.serving import client

    inputs = client.text_inputs(text=["Zoë lives in Zürich", "", "the model"],
                                text_pair=["a token", "   ", "东京"])
    want = _direct(servers["models"], "mrpc", inputs)
    got = client.predict_grpc(servers["grpc"], "mrpc", inputs)
    rest = client.predict_rest(servers["rest"], "mrpc", inputs)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
        if want[k].dtype == object:
            assert rest[k] == [v.decode() for v in want[k]]
        else:
            np.testing.assert_allclose(rest[k], want[k], rtol=1e-6)


def test_rest_sends_invalid_utf8_as_b64_and_row_format_works(servers):
    from electra_tf.serving import client

    inputs = {"text": np.array([b"bad \xff bytes", "Café 中国".encode()], object)}
    want = _direct(servers["models"], "ner", inputs)
    rest = client.predict_rest(servers["rest"], "ner", inputs)
    assert rest["word_texts"][1][:3] == ["Café", "中", "国"]
    np.testing.assert_allclose(rest["word_scores"], want["word_scores"], rtol=1e-6)
    # the README's row-format example
    body = {"instances": [{"text": "Café 中国"}, {"text": {"b64": base64.b64encode(
        b"bad \xff bytes").decode()}}]}
    req = urllib.request.Request(f"http://{servers['rest']}/v1/models/ner:predict",
                                 data=json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=30) as r:
        rows = json.loads(r.read())["predictions"]
    assert rows[0]["word_texts"][:3] == ["Café", "中", "国"] and len(rows) == 2


def test_errors_are_clear(servers):
    from electra_tf.serving import client

    inputs = client.text_inputs(text=["x"])
    with pytest.raises(client.ClientError, match="NOT_FOUND"):
        client.predict_grpc(servers["grpc"], "nope", inputs)
    with pytest.raises(client.ClientError, match="404"):
        client.predict_rest(servers["rest"], "nope", inputs)
    with pytest.raises(client.ClientError, match="same batch size"):
        client.predict_grpc(servers["grpc"], "mrpc", {"text": np.array([b"a", b"b"], object),
                                                      "text_pair": np.array([b"a"], object)})


def test_ids_inputs_from_flags_and_their_errors():
    from electra_tf.core.errors import InputError
    from electra_tf.serving import client

    got = client.ids_inputs(["2,5,3", "2, 6,7,3"], input_type_ids=["0,0,0", "0,0,1,1"])
    np.testing.assert_array_equal(got["input_word_ids"], [[2, 5, 3, 0], [2, 6, 7, 3]])
    np.testing.assert_array_equal(got["input_mask"], [[1, 1, 1, 0], [1, 1, 1, 1]])
    np.testing.assert_array_equal(got["input_type_ids"], [[0, 0, 0, 0], [0, 0, 1, 1]])
    assert {v.dtype for v in got.values()} == {np.dtype(np.int32)}
    for kwargs, message in (({}, "give --input_word_ids"),
                            ({"input_word_ids": ["2,x,3"]}, r"--input_word_ids #1 is not "),
                            # int() read these: Arabic-Indic digits, underscores, a plus
                            ({"input_word_ids": ["\u0662,\u0661\u0660"]},
                             r"--input_word_ids #1 is not comma-separated whole numbers"),
                            ({"input_word_ids": ["1_000,2"]}, r"--input_word_ids #1 is not "),
                            ({"input_word_ids": ["2,3"], "input_mask": ["1,+1"]},
                             r"--input_mask #1 is not comma-separated whole numbers"),
                            ({"input_word_ids": ["2,3"], "input_mask": ["1"]},
                             r"--input_mask #1 has 1 values, but --input_word_ids #1 has 2"),
                            ({"input_word_ids": ["2,3"], "input_mask": ["1,1", "1,1"]},
                             r"give as many --input_mask as --input_word_ids")):
        with pytest.raises(InputError, match=message):
            client.ids_inputs(**kwargs)
    with pytest.raises(InputError, match=r"give --text \(and --text_pair\) or --question and "
                                         r"--context, not both"):  # --text had been dropped
        client.text_inputs(text=["hello"], question=["q"], context=["c"])
    for flags, message in ((["--input_word_ids=2,x,3"], "--input_word_ids #1 is not"),
                           (["--input_word_ids=2,3", "--text=a"], "not both")):
        error_line(run_module("export.client", "--model_name=m", *flags), message,
                   returncode=2)


def test_an_ids_only_model_is_asked_with_ids_or_client_tokenized_text(servers, exports,
                                                                      tmp_path):
    """electra-query could not ask an --ids_only export (#58): ids from the flags, or text
    tokenized here with the export's assets/vocab.txt and casing, over gRPC and REST, give
    what the SavedModel gives for the packing the text signature does."""
    from export_helpers import packed_for, text_inputs

    from electra_tf.core.errors import InputError
    from electra_tf.serving import client

    spec, path = exports["ner_ids"]
    texts = ["Zoë lives in Zürich", "the model " * 20]
    packed = packed_for(spec, text_inputs(spec, texts))
    tokenized = client.tokenized_inputs(path, text=texts)
    for name in packed:
        np.testing.assert_array_equal(tokenized[name], packed[name], err_msg=name)
    rows = [",".join(map(str, r[:m.sum()])) for r, m in zip(packed["input_word_ids"],
                                                            packed["input_mask"])]
    from_flags = client.ids_inputs(rows)
    want = _direct(servers["models"], "ner_ids", packed)
    for inputs in (tokenized, from_flags):
        got = client.predict_grpc(servers["grpc"], "ner_ids", inputs)
        rest = client.predict_rest(servers["rest"], "ner_ids", inputs)
        for k in want:  # outputs of [B, seq, ...] have the width sent
            expected = want[k][:, :got[k].shape[1]] if got[k].ndim > 1 else want[k]
            if expected.dtype == object:
                np.testing.assert_array_equal(got[k], expected, err_msg=k)
                assert rest[k] == client._to_python(got[k]), k
            else:
                np.testing.assert_allclose(got[k], expected, rtol=1e-5, atol=1e-5, err_msg=k)
                np.testing.assert_allclose(np.asarray(rest[k]), got[k], rtol=1e-5, atol=1e-5)
    with pytest.raises(InputError, match=r"--export_dir=.*: no assets/vocab.txt"):
        client.tokenized_inputs(os.path.dirname(path), text=texts)
    # a copy whose vocab.txt is another's (two tokens swapped: the same size) had packed
    # the other vocabulary's ids and been answered
    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    tokens = (copy / "assets" / "vocab.txt").read_text(encoding="utf-8").splitlines()
    tokens[-1], tokens[-2] = tokens[-2], tokens[-1]
    (copy / "assets" / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(
            f"--export_dir={copy}: assets/vocab.txt is not the vocabulary the model was "
            "exported with (sha256 ")):
        client.tokenized_inputs(str(copy), text=texts)
    # a tagger reads one text: a pair had been packed (segment 1) and answered silently
    for flags, given in (({"text": texts, "text_pair": texts}, "--text and --text_pair"),
                         ({"question": texts, "context": texts}, "--question and --context")):
        with pytest.raises(InputError, match=re.escape(
                f"--export_dir={path} reads --text, not {given} (its export_info.json "
                "text_inputs): the ids would be packed for another model")):
            client.tokenized_inputs(path, **flags)
    proc = run_module("export.client", f"--server={servers['rest']}", "--rest",
                      "--model_name=ner_ids", f"--export_dir={path}", f"--text={texts[0]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = json.loads(proc.stdout)["outputs"]
    number = next(k for k in sorted(want) if want[k].dtype.kind == "f")
    np.testing.assert_allclose(printed[number], want[number][:1], atol=1e-5)


def _printed(outputs) -> dict:
    """The JSON main prints for `outputs`, read back."""
    from electra_tf.serving.client import _to_python

    return json.loads(json.dumps({"outputs": {k: _to_python(v) for k, v in
                                              sorted(outputs.items())}}, ensure_ascii=False))


def test_client_main_over_grpc_and_rest(servers):
    """What the command line sends (its flags' inputs) and prints, in this process."""
    from electra_tf.serving import client

    out = _printed(client.predict_grpc(servers["grpc"], "squad", client.text_inputs(
        question=["which token was replaced ?"],
        context=["Zoë said the token was replaced"])))["outputs"]
    assert set(out) >= {"answer_text", "answer_start", "answer_end", "answer_score",
                        "no_answer_score", "has_answer"}
    s, e = out["answer_start"][0], out["answer_end"][0]
    assert "Zoë said the token was replaced".encode()[s:e].decode() == out["answer_text"][0]
    out = _printed(client.predict_rest(servers["rest"], "ner",
                                       client.text_inputs(text=["Café Zürich"])))["outputs"]
    assert out["word_texts"][0] == ["Café", "Zürich"]


def test_client_cli_error_is_one_line(servers):
    """The one command-line test of export.client: `error: ...` naming the 404, status 1."""
    proc = run_module("export.client", f"--server={servers['rest']}", "--rest",
                      "--model_name=nope", "--text=x")
    error_line(proc, "404", returncode=1)
    assert proc.stdout == ""


@pytest.fixture
def broken_server():
    """start(reply, seconds_per_byte=0) -> "HOST:PORT" of a loopback TCP server answering
    each connection with the raw bytes `reply` (None: silence); fake_serving.start_tcp."""
    stops = []

    def start(reply, seconds_per_byte=0.0, fast=0):
        stop, address = start_tcp(reply, seconds_per_byte, fast=fast)
        stops.append(stop)
        return address

    yield start
    for stop in stops:
        stop()


def test_rest_against_a_server_that_is_not_tf_serving(broken_server):
    """Silence, bytes that are not HTTP, and HTTP 200 without JSON: one clear error each,
    as the gRPC client gives."""
    from electra_tf.serving import client

    inputs = client.text_inputs(text=["x"])
    with pytest.raises(client.ClientError, match=r"^REST: no answer from http://.* within "
                                                 r"--timeout=0.5s$"):
        client.predict_rest(broken_server(None), "m", inputs, timeout=0.5)
    with pytest.raises(client.ClientError, match=r"did not answer in HTTP .*is --server TF "
                                                 r"Serving's REST port"):
        client.predict_rest(broken_server(b"SSH-2.0-OpenSSH_9.2\r\n"), "m", inputs)
    ok = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 9\r\n\r\n<b>hi</b>"
    with pytest.raises(client.ClientError, match=r"answered with a body that is not JSON: "
                                                 r"'<b>hi</b>'"):
        client.predict_rest(broken_server(ok), "m", inputs)
    array = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]"
    with pytest.raises(client.ClientError, match="no 'outputs' in the answer"):
        client.predict_rest(broken_server(array), "m", inputs)
    # another web server's 404 (it had been "REST 404: ''" alone)
    with pytest.raises(client.ClientError, match=r"^REST 404: '' \(http://.*/v1/models/m:"
                                                 r"predict answered, but not with TF "
                                                 r"Serving's \{\"error\": \.\.\.\}: is "
                                                 r"--server TF Serving's REST port, 8501 by "
                                                 r"default\?\)$"):
        client.predict_rest(broken_server(_http("404 Not Found", b"")), "m", inputs)



# === A hostile or slow server: one clear error, in bounded time and memory ===
ESCAPES = "\x1b[2J\x1b]0;owned\x07\x9b31m\u202e"  # clear screen, set title, C1 CSI, bidi


def _has_controls(text: str) -> bool:
    return any(not c.isprintable() for c in text.replace("\n", ""))


def _tensor(dtype: int, shape, **fields):
    """A TensorProto as a server may send it: any dtype number, shape and content."""
    from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2

    dims = [tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in shape]
    return tensor_pb2.TensorProto(dtype=dtype, tensor_shape=tensor_shape_pb2.TensorShapeProto(
        dim=dims), **fields)


@pytest.fixture
def hostile_grpc():
    """start(**start_grpc_answering's arguments) -> "HOST:PORT"."""
    servers = []

    def start(**answer):
        server, port = start_grpc_answering(**answer)
        servers.append(server)
        return f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(None)


HOSTILE_TENSORS = {
    # case: (TensorProto arguments, what the error says)
    "resource": ((20, [1], {"resource_handle_val": [{}]}), r"dtype DT_RESOURCE"),
    "unknown dtype": ((999, [1], {}), r"dtype 999"),
    "content of the wrong size": ((1, [2, 3], {"tensor_content": b"12345"}),
                                  r"malformed tensor"),
    "more values than the shape": ((3, [2], {"int_val": [1, 2, 3]}), r"malformed tensor"),
    # int_val is int32 on the wire: a uint8 of 300 (an OverflowError traceback)
    "an integer beyond its dtype": ((4, [2], {"int_val": [300, -1]}),
                                    r"malformed tensor .*OverflowError"),
    "negative dimension": ((1, [-5, 2], {"float_val": [1.0]}), r"shape \[-5, 2\]"),
    # 1e6 x 1e6 strings (TF would pad the one value out to 3.6 TiB of references)
    "absurd string shape": ((7, [10**6, 10**6], {"string_val": [b"x"]}),
                            r"shape \[1000000, 1000000\]: 1,000,000,000,000 values"),
    "absurd float shape": ((1, [2**40], {"float_val": [1.0]}), r"1,099,511,627,776 values"),
    "padded strings too long": ((7, [1000], {"string_val": [b"x" * 10**6]}),
                                r"strings of more than"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_TENSORS))
def test_grpc_refuses_tensors_a_model_does_not_send(case, hostile_grpc, monkeypatch):
    """Each malformed output is one ClientError naming it (repr), at once: no
    allocation of the claimed shape, no ValueError or KeyError traceback."""
    from electra_tf.serving import client

    monkeypatch.setattr(client, "MAX_ANSWER_BYTES", 1 << 20, raising=False)
    (dtype, shape, fields), message = HOSTILE_TENSORS[case]
    server = hostile_grpc(outputs={"out\x1b[2J": _tensor(dtype, shape, **fields)})
    start = time.monotonic()
    with pytest.raises(client.ClientError, match=r"^gRPC: output 'out\\x1b\[2J' .*" + message):
        client.predict_grpc(server, "m", client.text_inputs(text=["x"]), timeout=10)
    assert time.monotonic() - start < 10  # refused, not timed out (a loaded machine is slow)


def test_grpc_takes_an_answer_as_large_as_a_message_and_counts_outputs_together(
        hostile_grpc, monkeypatch):
    """A 9-tag tagger's answer to 400 rows of 512 (16 MiB of float32s on the wire, under
    the 64 MiB a message may be) is read: a cap of 2^22 values had refused it, and its
    message, comparing one output with what the others had left, contradicted itself."""
    import numpy as np

    from electra_tf.serving import client

    def floats(*shape):
        return _tensor(1, shape, tensor_content=np.ones(shape, np.float32).tobytes())

    server = hostile_grpc(outputs={"tag_logits": floats(400, 512, 9),
                                   "tag_probabilities": floats(400, 512, 9),
                                   "tag_scores": floats(400, 512)})
    answer = client.predict_grpc(server, "m", client.text_inputs(text=["x"]), timeout=60)
    assert answer["tag_logits"].shape == (400, 512, 9) and answer["tag_scores"].sum() == 400 * 512
    # past the cap, the message says the values of the outputs read before it count too
    monkeypatch.setattr(client, "MAX_ANSWER_VALUES", 5)
    server = hostile_grpc(outputs={"a": floats(3), "b": floats(3)})
    with pytest.raises(client.ClientError, match=r"^gRPC: output '[ab]' claims shape \[3\]: 3 "
                       r"values \(6 with the outputs before it\), more than the 5 an "
                       r"answer may hold; send fewer rows a request$"):
        client.predict_grpc(server, "m", client.text_inputs(text=["x"]), timeout=10)


def test_grpc_quotes_the_servers_details_and_stops_at_the_deadline(hostile_grpc):
    from electra_tf.serving import client

    inputs = client.text_inputs(text=["x"])
    with pytest.raises(client.ClientError) as raised:
        client.predict_grpc(hostile_grpc(abort=("INVALID_ARGUMENT", ESCAPES + "x" * 5000)),
                            "m", inputs)
    message = str(raised.value)
    assert message.startswith("gRPC INVALID_ARGUMENT: '\\x1b[2J\\x1b]0;owned\\x07")
    assert not _has_controls(message) and len(message) < 600
    start = time.monotonic()
    with pytest.raises(client.ClientError, match="DEADLINE_EXCEEDED"):
        client.predict_grpc(hostile_grpc(stall=3), "m", inputs, timeout=0.5)
    assert time.monotonic() - start < 3  # before the server's answer


def _http(status: str, body: bytes, headers: str = "") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{headers}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


REST_NOT_TENSORS = {
    # case: (the answer's "outputs", what the error says)
    "an object": ('{"b": [1], "a": {"x": 1}}', r"output 'a' holds \{'x': 1\}, not a number"),
    "null": ('{"a": [1.0, null]}', r"output 'a' holds None, not a number"),
    "ragged rows": ('{"a": [[1, 2], [3]]}', r"output 'a' has rows of different lengths"),
    "lists beside values": ('{"a": [[1], 2]}', r"output 'a' mixes lists and values"),
    "a key twice": ('{"a": 1, "a": 2}', r"names 'a' twice in one object"),
}


@pytest.mark.parametrize("case", sorted(REST_NOT_TENSORS))
def test_rest_refuses_outputs_that_are_no_tensor(case, broken_server):
    """As over gRPC, a REST output must be a tensor of numbers or strings: any JSON
    value had been printed as the model's output, and a key named twice kept its last."""
    from electra_tf.serving import client

    outputs, message = REST_NOT_TENSORS[case]
    server = broken_server(_http("200 OK", b'{"outputs": ' + outputs.encode() + b"}"))
    with pytest.raises(client.ClientError, match=r"^REST: .*" + message):
        client.predict_rest(server, "m", client.text_inputs(text=["x"]))


def test_rest_reads_an_answer_whose_content_length_is_no_ascii_number(broken_server):
    """A Content-Length of `²` (Latin-1 byte B2, which str.isdigit takes and int does not)
    had ended in a ValueError traceback; it is left to the read, as http.client leaves it,
    and the answer is read to the connection's close. Good outputs pass the tensor check."""
    from electra_tf.serving import client

    body = b'{"outputs": {"a": [[0.5, -1], [2, 3e-5]], "s": ["x", {"b64": "eA=="}], "t": true}}'
    for length in (b"\xb2", b"\xb9"):
        answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                  + length + b"\r\nConnection: close\r\n\r\n" + body)
        assert client.predict_rest(broken_server(answer), "m", client.text_inputs(
            text=["x"])) == json.loads(body)["outputs"]


def test_rest_timeout_bounds_the_whole_request(broken_server):
    """A server that sends one byte every 0.1 s never leaves a read waiting 1 s, yet
    --timeout=1 ends the request after 1 s (it used to take the answer's 14 s)."""
    from electra_tf.serving import client

    slow = broken_server(_http("200 OK", b"{}" + b" " * 100), seconds_per_byte=0.1)
    start = time.monotonic()
    with pytest.raises(client.ClientError, match=r"^REST: no answer from http://.* within "
                                                 r"--timeout=1s$"):
        client.predict_rest(slow, "m", client.text_inputs(text=["x"]), timeout=1)
    assert time.monotonic() - start < 10  # well before the answer's 14 s


def test_rest_deadline_during_the_body_says_so_and_never_takes_a_part(broken_server):
    """Headers at once, then a byte a second: the deadline in the body said "a body that
    is not JSON: '   '", and a valid JSON start of a slow body was taken as the answer
    (#54); a body cut short of its Content-Length was taken too."""
    from electra_tf.serving import client

    inputs = client.text_inputs(text=["x"])
    # The head must come before the deadline: 3 s, not 1 (a loaded worker once took
    # over 1 s to get it, and the test then saw no answer at all).
    for body in (b" " * 60, b'{"outputs": {"x": [1.0]}}' + b" " * 60):
        reply = _http("200 OK", body)
        slow = broken_server(reply, seconds_per_byte=0.2, fast=len(reply) - 60)
        start = time.monotonic()
        with pytest.raises(client.ClientError, match=r"^REST: the answer from http://.* did "
                                                     r"not finish within --timeout=3s \(the "
                                                     r"deadline passed after \d+ bytes"):
            client.predict_rest(slow, "m", inputs, timeout=3)
        assert time.monotonic() - start < 10  # well before the answer's 12 s
    cut = _http("200 OK", b'{"outputs": {"x": [1.0]}}' + b" " * 60)[:-60]
    with pytest.raises(client.ClientError, match=r"closed the connection after 25 bytes of "
                                                 r"its answer's body, 60 short"):
        client.predict_rest(broken_server(cut), "m", inputs)


def test_rest_read_that_times_out_after_the_head_is_an_unfinished_answer(broken_server,
                                                                         monkeypatch):
    """The deadline's timer, starved, did not fire, and the socket's own read limit (the
    same --timeout) ended the read of the body: that answer had begun, and was said to
    be no answer at all."""
    from electra_tf.serving import client

    class Starved:  # a timer that never fires
        daemon = False

        def __init__(self, *args):
            pass

        def start(self):
            pass

        def cancel(self):
            pass

    monkeypatch.setattr(threading, "Timer", Starved)
    reply = _http("200 OK", b'{"outputs": {"x": [1.0]}}' + b" " * 60)
    stalled = broken_server(reply, seconds_per_byte=60, fast=len(reply) - 60)  # then stalls
    with pytest.raises(client.ClientError, match=r"did not finish within --timeout=0.5s "
                                                 r"\(the deadline passed after 25 bytes"):
        client.predict_rest(stalled, "m", client.text_inputs(text=["x"]), timeout=0.5)


def test_rest_answer_reset_in_its_body_says_so(broken_server, monkeypatch):
    """A connection reset after the answer's head had been "did not answer in HTTP; is
    --server TF Serving's REST port?"."""
    import http.client

    from electra_tf.serving import client

    read1, calls = http.client.HTTPResponse.read1, []

    def reset_after_one_read(self, n=-1):
        calls.append(n)
        if len(calls) > 1:
            raise ConnectionResetError(104, "Connection reset by peer")
        return read1(self, 9)

    monkeypatch.setattr(http.client.HTTPResponse, "read1", reset_after_one_read)
    server = broken_server(_http("200 OK", b'{"outputs": {"x": [1.0]}}'))
    with pytest.raises(client.ClientError) as raised:
        client.predict_rest(server, "m", client.text_inputs(text=["x"]))
    assert str(raised.value) == (f"REST: the answer from http://{server}/v1/models/m:predict "
                                 "broke off after 9 bytes of its body (ConnectionResetError: "
                                 "'[Errno 104] Connection reset by peer'): a truncated answer, "
                                 "not read as one")


def test_rest_bounds_the_answer_it_reads(broken_server, monkeypatch):
    from electra_tf.serving import client

    monkeypatch.setattr(client, "MAX_ANSWER_BYTES", 1 << 16, raising=False)
    inputs = client.text_inputs(text=["x"])
    deep = b'{"outputs": {"x": ' + b"[" * 30_000 + b"]" * 30_000 + b"}}"
    with pytest.raises(client.ClientError, match=r"nested more than 64 levels deep"):
        client.predict_rest(broken_server(_http("200 OK", deep)), "m", inputs)
    # Deep enough to pass json.loads, too deep to print (RecursionError in the printer).
    deep = b'{"outputs": {"x": ' + b"[" * 900 + b"]" * 900 + b"}}"
    with pytest.raises(client.ClientError, match=r"nested more than 64 levels deep"):
        client.predict_rest(broken_server(_http("200 OK", deep)), "m", inputs)
    big = b'{"outputs": {"x": "' + b"a" * 100_000 + b'"}}'
    unsized = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + big  # read to the end
    with pytest.raises(client.ClientError, match=r"an answer of more than 65536 bytes"):
        client.predict_rest(broken_server(unsized), "m", inputs)
    with pytest.raises(client.ClientError, match=r"claims 100022 bytes, more than the 65536"):
        client.predict_rest(broken_server(_http("200 OK", big)), "m", inputs)
    claimed = b"HTTP/1.1 200 OK\r\nContent-Length: 4000000000000\r\n\r\n{}"
    with pytest.raises(client.ClientError, match=r"claims 4000000000000 bytes, more than "):
        client.predict_rest(broken_server(claimed), "m", inputs)


def test_rest_quotes_what_the_server_said(broken_server):
    """Server bytes reach the terminal only through repr: no escape sequence acts."""
    from electra_tf.serving import client

    inputs = client.text_inputs(text=["x"])
    replies = {
        "error body": _http("400 Bad Request", json.dumps({"error": ESCAPES}).encode()),
        "raw error body": _http("500 Oops", ESCAPES.encode() + b"\xff"),
        "status line": ESCAPES.encode() + b"\r\n\r\n",
        "not json": _http("200 OK", ESCAPES.encode()),
        "a bare string": _http("200 OK", json.dumps(ESCAPES).encode()),
    }
    for case, reply in replies.items():
        with pytest.raises(client.ClientError) as raised:
            client.predict_rest(broken_server(reply), "m", inputs)
        message = str(raised.value)
        assert "\\x1b[2J" in message and not _has_controls(message), (case, message)


def test_client_cli_prints_server_strings_escaped(broken_server):
    """What the server answers is printed as JSON that reads back the same, with every
    character a terminal could act on escaped."""
    outputs = {"word_texts": [[ESCAPES, "Zoë \u4e2d"]], "esc\x1bkey": [1.5]}
    server = broken_server(_http("200 OK", json.dumps({"outputs": outputs},
                                                      ensure_ascii=False).encode()))
    proc = run_module("export.client", f"--server={server}", "--rest", "--model_name=m",
                      "--text=x")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not _has_controls(proc.stdout)
    assert json.loads(proc.stdout) == {"outputs": outputs}
    assert "Zoë 中" in proc.stdout  # printable text stays as it is


@pytest.mark.parametrize("flags,message", [
    (["--timeout=-1"], "--timeout must be a positive number of seconds, at most 86,400 (a "
                       "day), got -1"),
    (["--timeout=nan"], "--timeout must be a positive number of seconds, at most 86,400"),
    (["--server="], "--server is empty: give HOST:PORT"),
    ([os.fsdecode(b"--text=caf\xe9")], "--text #1 is not UTF-8: 'caf\\udce9'"),
    (["--text=ok", os.fsdecode(b"--text_pair=\xff\xfe")], "--text_pair #1 is not UTF-8"),
])
def test_client_cli_bad_flags_are_one_line(flags, message):
    """Refused before any connection (nothing listens on port 9): exit 2, as the
    electra_tf commands."""
    args = ["--server=127.0.0.1:9", "--rest", "--model_name=m"]
    if not any(f.startswith("--text=") for f in flags):
        args.append("--text=x")
    proc = run_module("export.client", *args, *flags)
    error_line(proc, message, returncode=2)
    assert proc.stdout == ""


def test_client_tokenization_keeps_the_exports_question_limit(tiny_vocab, tmp_path):
    """A SQuAD export records its --max_query_length; the client's own packing had
    always kept 64 question pieces."""
    import json
    import shutil

    from electra_tf.serving import client

    (tmp_path / "assets").mkdir()
    (tmp_path / "assets.extra").mkdir()
    shutil.copy(tiny_vocab, tmp_path / "assets" / "vocab.txt")
    info = {"max_seq_length": 32, "do_lower_case": True, "strip_accents": None}
    question, context = ["the model reads a token " * 4], ["hello world " * 20]
    for recorded, cut, kept in ((None, None, 14), (4, None, 4), (4, 6, 6)):
        # min(64, (32 - 3) // 2); the record's max_query_length; its question_limit (the
        # cut the export's graph makes, recorded since the cut follows the original's)
        if recorded is not None:
            info["max_query_length"] = recorded
        if cut is not None:
            info["question_limit"] = cut
        (tmp_path / "assets.extra" / "export_info.json").write_text(json.dumps(info))
        notes = []
        packed = client.tokenized_inputs(str(tmp_path), question=question * 2,
                                         context=[context[0], "hello"], notes=notes)
        assert packed["input_type_ids"][0].tolist().index(1) == kept + 2  # [CLS] q [SEP]
        # the context's first window only, and said (the text signature reads them all)
        room = 32 - kept - 3
        # each cut question said, as the text signature's `truncated` says it (it had
        # been silent)
        cut_question = [f"--question #{i} holds 20 pieces, more than the {kept} the export "
                        f"keeps of a question: cut to {kept}" for i in (1, 2)]
        assert notes == [cut_question[0],
                         f"--context #1 holds 40 pieces, more than the {room} of one window "
                         "beside its question: the ids signature answers from its first "
                         "window only (the text signature reads every window)",
                         cut_question[1]]


def test_client_tokenization_says_which_texts_it_cut(tiny_vocab, tmp_path):
    """A text (or pair) longer than the export's window is cut as the text signature cuts
    it, and said in a note (the text signature's `truncated` output says it; the cut had
    been silent); one that fits is not."""
    import json
    import shutil

    from electra_tf.serving import client

    (tmp_path / "assets").mkdir()
    (tmp_path / "assets.extra").mkdir()
    shutil.copy(tiny_vocab, tmp_path / "assets" / "vocab.txt")
    (tmp_path / "assets.extra" / "export_info.json").write_text(json.dumps(
        {"max_seq_length": 8, "do_lower_case": True, "strip_accents": None}))
    notes = []
    packed = client.tokenized_inputs(str(tmp_path), text=["hello " * 6, "hello " * 7],
                                     notes=notes)
    assert packed["input_mask"].sum(axis=1).tolist() == [8, 8]
    assert notes == ["--text #2 holds 7 pieces, more than the 6 of the export's window "
                     "(max_seq_length 8): cut to 6"]
    notes = []
    client.tokenized_inputs(str(tmp_path), text=["hello", "hello " * 3],
                            text_pair=["world " * 4, "world " * 2], notes=notes)
    assert notes == []  # 5 pieces each: the window's 5
    notes = []
    client.tokenized_inputs(str(tmp_path), text=["hello " * 3], text_pair=["world " * 3],
                            notes=notes)
    assert notes == ["--text #1 and its --text_pair hold 6 pieces, more than the 5 of "
                     "the export's window (max_seq_length 8): cut to 5, longest first"]
    # a --text_pair of no piece is packed as no pair (pack_pair): 6 pieces fit, 7 are cut
    # to 6 (a note had said 5, longest first, of a text sent whole)
    notes = []
    packed = client.tokenized_inputs(str(tmp_path), text=["hello " * 6, "hello " * 7],
                                     text_pair=["", ""], notes=notes)
    assert packed["input_mask"].sum(axis=1).tolist() == [8, 8]
    assert notes == ["--text #2 holds 7 pieces, more than the 6 of the export's window "
                     "(max_seq_length 8): cut to 6"]


def test_bad_request_values_are_refused_before_anything_is_sent(tiny_vocab, tmp_path):
    """What a server cannot take, or a URL cannot hold, is one InputError here."""
    import json
    import shutil

    from electra_tf.core.errors import InputError
    from electra_tf.serving import client

    for timeout in (0, -1, float("nan"), float("inf"), 1e10, True):
        with pytest.raises(InputError, match="--timeout must be a positive number"):
            client.check_timeout(timeout)
    assert client.check_timeout(86_400) == 86_400.0
    client.check_request("localhost:8501", "my-model_v2.1", rest=True)
    client.check_request("localhost:8500", "a b/c", rest=False)  # gRPC carries any name
    for server, name, rest, message in (
            (" ", "m", False, "--server is empty"),
            ("h:1", "", False, "--model_name is required"),
            ("h:1", "a b", True, "--model_name='a b' cannot be asked over REST"),
            ("h:1", "../../x?y#z", True, "cannot be asked over REST"),
            ("h:1", "m\x1b", True, "cannot be asked over REST"),
            ("h:1", "modèle", True, "cannot be asked over REST"),  # a traceback in http.client
            ("h:84107", "m", True, "port 84107 is outside 1-65535"),  # had reached 18571
            ("[::1]:0", "m", False, "port 0 is outside 1-65535")):
        with pytest.raises(InputError, match=re.escape(message)):
            client.check_request(server, name, rest)
    client.check_request("[::1]:8500", "modèle", rest=False, version=2**63 - 1)
    for version in (-3, 2**63):  # 2**63 had failed in the request's proto, in a traceback
        with pytest.raises(InputError, match=r"--model_version must be in \[0, 2\^63 - 1\]"):
            client.check_request("h:1", "m", False, version)
    # a byte that is not UTF-8 (a shell's $'\xff', kept by Python as a surrogate) had
    # failed in gRPC's request, in a traceback
    bad = os.fsdecode(b"m\xff")
    for rest in (False, True):
        for args, flag in (((f"h{bad}:1", "m"), "--server"), (("h:1", bad), "--model_name")):
            with pytest.raises(InputError, match=f"^{flag}=.* is not UTF-8 text$"):
                client.check_request(*args, rest)
        with pytest.raises(InputError, match="^--signature_name=.* is not UTF-8 text$"):
            client.check_request("h:1", "m", rest, signature=bad)
    # a host name the resolver's IDNA cannot take (an empty label: a typo) had been a
    # UnicodeError traceback over REST; nothing is listening: it fails before connecting
    with pytest.raises(InputError, match=r"^--server='models\.\.example\.com:1': its host "
                                         r"is not a valid host name"):
        client.predict_rest("models..example.com:1", "m", {"text": ["a"]}, "serving_default",
                            None, 5.0)
    for flags, message in (
            ({"input_word_ids": ["2,99999999999,3"]}, "--input_word_ids #1 holds 99999999999: "
                                                      "token ids are 0 to 2147483647"),
            ({"input_word_ids": ["2,-5,3"]}, "--input_word_ids #1 holds -5"),
            ({"input_word_ids": ["2,5"], "input_mask": ["1,5"]},
             "--input_mask #1 holds 5: a mask is 1 (a real token) or 0 (padding)"),
            ({"input_word_ids": ["2,5"], "input_type_ids": ["0,-1"]},
             "--input_type_ids #1 holds -1: segment ids are 0 to")):
        with pytest.raises(InputError, match=re.escape(message)):
            client.ids_inputs(**flags)
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets.extra").mkdir()
    shutil.copy(tiny_vocab, tmp_path / "assets" / "vocab.txt")
    info_path = tmp_path / "assets.extra" / "export_info.json"
    good = {"max_seq_length": 16, "do_lower_case": True, "strip_accents": None}
    for change, message in (
            ({"max_seq_length": 2}, "max_seq_length 2 is not a whole number of positions "
                                    "from 2 (3 for pairs)"),
            ({"max_seq_length": -5}, "max_seq_length -5 is not"),
            ({"max_seq_length": 99_999_999}, "max_seq_length 99999999 is not"),
            ({"max_seq_length": 16.5}, "max_seq_length 16.5 is not"),
            ({"strip_accents": "yes"}, "strip_accents 'yes' is not true, false or null"),
            ({"do_lower_case": None}, "do_lower_case None is not true or false"),
            ({"max_query_length": 0}, "max_query_length 0 is not a positive whole number"),
            ({"text_inputs": "text"}, "text_inputs 'text' is not a list of input names")):
        info_path.write_text(json.dumps({**good, **change}))
        with pytest.raises(InputError, match=re.escape(f"{info_path}: not an export's "
                                                       f"export_info.json ({message}")):
            client.tokenized_inputs(str(tmp_path), text=["the model"], text_pair=["a token"])
    for text in ("[" * 100_000, '{"max_seq_length": 1e400}', "[1, 2]"):
        info_path.write_text(text)
        with pytest.raises(InputError, match="export_info.json"):
            client.tokenized_inputs(str(tmp_path), text=["the model"])
    info_path.write_text(json.dumps(good))
    assert client.tokenized_inputs(str(tmp_path), text=["the model"])["input_word_ids"].shape \
        == (1, 16)


def test_an_export_and_a_model_folder_mistaken_for_each_other_are_one_line(exports, tmp_path):
    """load_saved_model given the model's folder (MODEL_BASE/NAME) had raised TensorFlow's
    "SavedModel file does not exist"; Predictor.open given an export, "discriminator.
    weights.h5 not found (expected a pre-training model_dir ...)"."""
    from electra_tf.core.errors import InputError
    from electra_tf.serving.export import load_saved_model
    from electra_tf.serving.predictor import Predictor

    version = exports["ner"][1]
    model_folder = os.path.dirname(version)
    with pytest.raises(InputError, match=re.escape(
            f"{model_folder} is a model's folder (MODEL_BASE/NAME): give one of its versions, "
            f"e.g. {version}")):
        load_saved_model(model_folder)
    with pytest.raises(InputError, match=re.escape(f"{tmp_path} holds no saved_model.pb")):
        load_saved_model(str(tmp_path))
    # beside a folder whose name TF Serving skips: `²` (str.isdigit's, not int's) had
    # raised a ValueError; `+7` is skipped too
    model = tmp_path / "model"
    for name in ("²", "+7"):
        (model / name).mkdir(parents=True)
    (model / "3").symlink_to(version)
    with pytest.raises(InputError, match=re.escape(
            f"{model} is a model's folder (MODEL_BASE/NAME): give one of its versions, "
            f"e.g. {model / '3'}")):
        load_saved_model(str(model))
    # a higher version that holds no export (made by hand, or a copy cut short) is named
    # beside the one to give (the folder had been said to hold no saved_model.pb)
    (model / "4").mkdir()
    with pytest.raises(InputError, match=re.escape(
            f"{model} is a model's folder (MODEL_BASE/NAME): give one of its versions, "
            f"e.g. {model / '3'}; its version 4 holds no saved_model.pb (remove it: a server "
            "serves the highest version)")):
        load_saved_model(str(model))
    with pytest.raises(InputError, match=re.escape(
            f"folder: {version} is an export (a SavedModel), not a model folder")):
        Predictor.open(version)
