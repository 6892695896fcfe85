"""Stand-ins for TF Serving on 127.0.0.1 (no model server binary exists here).

`start_grpc(models)` serves tensorflow_serving PredictionService.Predict and
`start_rest(models)` POST /v1/models/NAME[/versions/N]:predict (column
"inputs" and row "instances" formats, {"b64": ...} strings), both over
SavedModels loaded with tf.saved_model.load ({name: loaded}). Loopback only.

Hostile stand-ins, for the client's bounds: `start_grpc_answering(...)` answers
every Predict with hand-made TensorProtos (any dtype, shape or content), an
abort with chosen details, or a stall; `start_tcp(reply, ...)` answers every
connection with raw bytes (anything but HTTP, escape sequences, a body
claimed larger than it is), optionally one byte at a time.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import tensorflow as tf


def _run(models, name, signature, inputs, json_numbers=False):
    """-> (outputs {name: np.ndarray}, None) or (None, (status, message)).

    `json_numbers`: the inputs came as JSON numbers (REST), which TF Serving converts to
    the dtype the signature declares (a gRPC TensorProto carries its own)."""
    if name not in models:
        return None, ("NOT_FOUND", f"Servable not found for request: Latest({name})")
    sigs = models[name].signatures
    if signature not in sigs:
        return None, ("INVALID_ARGUMENT", f"Serving signature name: \"{signature}\" not found")
    declared = sigs[signature].structured_input_signature[1] if json_numbers else {}
    try:
        out = sigs[signature](**{
            k: tf.constant(v, dtype=declared[k].dtype) if k in declared
            and np.asarray(v).dtype.kind in "iuf" else tf.constant(v)
            for k, v in inputs.items()})
    except (tf.errors.OpError, TypeError, ValueError) as e:
        return None, ("INVALID_ARGUMENT", str(e)[:2000])
    return {k: v.numpy() for k, v in out.items()}, None


def start_grpc(models):
    """-> (server, port). Stop with server.stop(None)."""
    import grpc
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    class Servicer(prediction_service_pb2_grpc.PredictionServiceServicer):
        def Predict(self, request, context):
            inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
            out, err = _run(models, request.model_spec.name,
                            request.model_spec.signature_name or "serving_default", inputs)
            if err:
                context.abort(getattr(grpc.StatusCode, err[0]), err[1])
            response = predict_pb2.PredictResponse()
            response.model_spec.CopyFrom(request.model_spec)
            for k, v in out.items():
                if not request.output_filter or k in request.output_filter:
                    response.outputs[k].CopyFrom(tf.make_tensor_proto(v))
            return response

    return _serve(Servicer())


def _decode(value):
    if isinstance(value, dict) and set(value) == {"b64"}:
        return base64.b64decode(value["b64"])
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def _encode(value):
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    return value


def _array(value):
    value = _decode(value)
    flat = value
    while isinstance(flat, list) and flat:
        flat = flat[0]
    return np.array(value, dtype=object if isinstance(flat, bytes) else None)


def start_rest(models):
    """-> (server, port). Stop with server.shutdown()."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _reply(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            m = re.fullmatch(r"/v1/models/([^/:]+)(?:/versions/(\d+))?:predict", self.path)
            if not m:
                return self._reply(404, {"error": f"Malformed request: POST {self.path}"})
            try:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            except ValueError as e:
                return self._reply(400, {"error": f"JSON Parse error: {e}"})
            signature = body.get("signature_name", "serving_default")
            if "inputs" in body:
                inputs = {k: _array(v) for k, v in body["inputs"].items()}
            elif "instances" in body:
                rows = body["instances"]
                inputs = {k: _array([r[k] for r in rows]) for k in rows[0]}
            else:
                return self._reply(400, {"error": "Missing 'inputs' or 'instances' key"})
            out, err = _run(models, m.group(1), signature, inputs, json_numbers=True)
            if err:
                return self._reply(404 if err[0] == "NOT_FOUND" else 400, {"error": err[1]})
            out = {k: _encode(v.tolist()) for k, v in out.items()}
            if "inputs" in body:
                return self._reply(200, {"outputs": out})
            n = len(next(iter(out.values())))
            return self._reply(200, {"predictions": [{k: v[i] for k, v in out.items()}
                                                     for i in range(n)]})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def start_grpc_answering(outputs=None, abort=None, stall: float = 0.0):
    """A PredictionService that ignores the request and answers every Predict with
    `outputs` ({name: TensorProto}, sent as they are), or aborts with `abort`
    ((status name, details)), after `stall` seconds. -> (server, port); stop with
    server.stop(None)."""
    import grpc
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    class Servicer(prediction_service_pb2_grpc.PredictionServiceServicer):
        def Predict(self, request, context):
            time.sleep(stall)
            if abort:
                context.abort(getattr(grpc.StatusCode, abort[0]), abort[1])
            response = predict_pb2.PredictResponse()
            for k, v in (outputs or {}).items():
                response.outputs[k].CopyFrom(v)
            return response

    return _serve(Servicer())


def _read_request(conn) -> None:
    """Reads an HTTP request whole (its head, then Content-Length bytes of body), or what
    came of anything else: a server that closes with bytes of the request unread sends a
    reset, which the client may see before the answer (a flaky "Connection reset by
    peer" where the test expects the answer's own error)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
        if not data.startswith((b"POST", b"GET")):
            return
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        body += chunk


def start_tcp(reply: bytes | None, seconds_per_byte: float = 0.0, silence: float = 5.0,
              fast: int = 0):
    """A loopback TCP server answering each connection with the raw bytes `reply`
    (None: `silence` seconds of nothing), all at once or one byte every
    `seconds_per_byte` (its first `fast` bytes at once). -> (stop, "127.0.0.1:PORT");
    call stop() to end it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    stop = threading.Event()

    def answer(conn):
        with conn:
            # Time for a loaded client to send its request: a read that timed out had
            # closed the connection unanswered, which the client's request then reset.
            conn.settimeout(10.0)
            try:
                _read_request(conn)
                if reply is None:
                    stop.wait(silence)
                elif not seconds_per_byte:
                    conn.sendall(reply)
                else:
                    conn.sendall(reply[:fast])
                    for i in range(fast, len(reply)):
                        if stop.wait(seconds_per_byte):
                            return
                        conn.sendall(reply[i:i + 1])
            except OSError:  # the client hung up: what it should do with a hostile server
                pass

    def serve():
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()

    def close():
        stop.set()
        sock.close()

    return close, f"127.0.0.1:{sock.getsockname()[1]}"


def _serve(servicer):
    """A started loopback gRPC server for `servicer` -> (server, port)."""
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port
