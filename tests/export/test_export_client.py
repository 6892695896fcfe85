"""export.client against loopback stand-ins for TF Serving's gRPC and REST APIs."""

import base64
import json
import urllib.request

import numpy as np
import pytest
from fake_serving import start_grpc, start_rest
from helpers import error_line, run_module


@pytest.fixture(scope="module")
def servers(exports):
    import tensorflow as tf

    models = {name: tf.saved_model.load(exports[name][1]) for name in ("ner", "mrpc", "squad")}
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
    from export import client

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
    from export import client

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
    from export import client

    inputs = client.text_inputs(text=["x"])
    with pytest.raises(client.ClientError, match="NOT_FOUND"):
        client.predict_grpc(servers["grpc"], "nope", inputs)
    with pytest.raises(client.ClientError, match="404"):
        client.predict_rest(servers["rest"], "nope", inputs)
    with pytest.raises(client.ClientError, match="same batch size"):
        client.predict_grpc(servers["grpc"], "mrpc", {"text": np.array([b"a", b"b"], object),
                                                      "text_pair": np.array([b"a"], object)})


def _printed(outputs) -> dict:
    """The JSON main prints for `outputs`, read back."""
    from export.client import _to_python

    return json.loads(json.dumps({"outputs": {k: _to_python(v) for k, v in
                                              sorted(outputs.items())}}, ensure_ascii=False))


def test_client_main_over_grpc_and_rest(servers):
    """What the command line sends (its flags' inputs) and prints, in this process."""
    from export import client

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
    """A loopback TCP server answering each connection with `reply` (None: silence)."""
    import socket
    import threading

    servers = []

    def start(reply):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(4)
        stop = threading.Event()

        def serve():
            sock.settimeout(0.2)
            while not stop.is_set():
                try:
                    conn, _ = sock.accept()
                except OSError:
                    continue
                conn.recv(65536)
                if reply is None:
                    stop.wait(5)  # never answers
                else:
                    conn.sendall(reply)
                conn.close()

        threading.Thread(target=serve, daemon=True).start()
        servers.append((sock, stop))
        return f"127.0.0.1:{sock.getsockname()[1]}"

    yield start
    for sock, stop in servers:
        stop.set()
        sock.close()


def test_rest_against_a_server_that_is_not_tf_serving(broken_server):
    """Silence, bytes that are not HTTP, and HTTP 200 without JSON: one clear error each,
    as the gRPC client gives."""
    from export import client

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
