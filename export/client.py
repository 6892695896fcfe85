"""Queries an exported model on TF Serving, over gRPC (default) or REST.

    python -m export.client --server=localhost:8500 --model_name=ner --text="Zoë lives in Zürich"
    python -m export.client --server=localhost:8501 --rest --model_name=mrpc \
        --text="A first sentence." --text_pair="A second one."
    python -m export.client --server=localhost:8500 --model_name=squad \
        --question="Who lives in Zürich?" --context="Zoë lives in Zürich."

--text (and --text_pair, --question, --context) may be repeated for a batch.
Prints the response as JSON: {"outputs": {name: nested lists}} (strings are
decoded as UTF-8, with U+FFFD for invalid bytes). gRPC uses
tensorflow_serving.apis PredictionService/Predict; REST posts the column
format {"signature_name": ..., "inputs": {...}} to
/v1/models/NAME[/versions/N]:predict.
"""

from __future__ import annotations

import base64
import http.client
import json
import sys
import urllib.error
import urllib.request

from absl import app, flags

FLAGS = flags.FLAGS


def define_flags():
    """Flags of the command line (defined only when run as a program)."""
    flags.DEFINE_string("server", "localhost:8500", "HOST:PORT (gRPC 8500, REST 8501 by default).")
    flags.DEFINE_string("model_name", None, "Model name on the server.")
    flags.DEFINE_integer("model_version", None, "A specific version (default: the latest).")
    flags.DEFINE_string("signature_name", "serving_default", "Signature to call.")
    flags.DEFINE_bool("rest", False, "Use the REST API instead of gRPC.")
    flags.DEFINE_multi_string("text", [], "Input text(s) (token/sequence classification, rtd).")
    flags.DEFINE_multi_string("text_pair", [], "Second text(s) for sentence-pair models.")
    flags.DEFINE_multi_string("question", [], "squad: question(s).")
    flags.DEFINE_multi_string("context", [], "squad: context(s).")
    flags.DEFINE_float("timeout", 30.0, "Seconds to wait for the answer.")


class ClientError(RuntimeError):
    """The server refused or failed the request; the message says why."""


def _to_python(value):
    """numpy values -> JSON-able Python (bytes decoded as UTF-8)."""
    import numpy as np

    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return [_to_python(v) for v in value.tolist()] if value.ndim else _to_python(
                value.item())
        return value.tolist()
    if isinstance(value, list):
        return [_to_python(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def predict_grpc(server: str, model_name: str, inputs: dict, signature_name: str =
                 "serving_default", version: int | None = None, timeout: float = 30.0) -> dict:
    """PredictionService.Predict over an insecure channel; returns {name: np.ndarray}."""
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    if version is not None:
        request.model_spec.version.value = int(version)
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    with grpc.insecure_channel(server) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        try:
            response = stub.Predict(request, timeout=timeout)
        except grpc.RpcError as e:
            raise ClientError(f"gRPC {e.code().name}: {e.details()}") from None
    return {k: tf.make_ndarray(v) for k, v in response.outputs.items()}


def _json_value(v):
    if isinstance(v, bytes):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:  # binary strings travel as {"b64": ...}
            return {"b64": base64.b64encode(v).decode("ascii")}
    if isinstance(v, list):
        return [_json_value(x) for x in v]
    return v


def predict_rest(server: str, model_name: str, inputs: dict, signature_name: str =
                 "serving_default", version: int | None = None, timeout: float = 30.0) -> dict:
    """POST /v1/models/NAME[/versions/N]:predict (column format); returns {name: lists}."""
    import numpy as np

    url = f"http://{server}/v1/models/{model_name}"
    if version is not None:
        url += f"/versions/{int(version)}"
    body = {"signature_name": signature_name,
            "inputs": {k: _json_value(np.asarray(v).tolist()) for k, v in inputs.items()}}
    request = urllib.request.Request(url + ":predict", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            body = r.read()
    except urllib.error.HTTPError as e:
        raise ClientError(f"REST {e.code}: {e.read().decode('utf-8', 'replace')}") from None
    except urllib.error.URLError as e:
        if isinstance(e.reason, TimeoutError):
            raise ClientError(f"REST: no answer from {url} within --timeout={timeout:g}s") \
                from None
        raise ClientError(f"REST: cannot reach {url}: {e.reason}") from None
    except TimeoutError:  # connected, then nothing came back in time
        raise ClientError(f"REST: no answer from {url} within --timeout={timeout:g}s") from None
    except (http.client.HTTPException, ConnectionError) as e:
        said = " ".join(str(e).split())[:100]
        raise ClientError(f"REST: {url} did not answer in HTTP ({type(e).__name__}: {said}); "
                          "is --server TF Serving's REST port (8501; gRPC is 8500)?") from None
    try:
        answer = json.loads(body)
    except ValueError:
        raise ClientError(f"REST: {url} answered with a body that is not JSON: "
                          f"{body[:200].decode('utf-8', 'replace')!r}") from None
    if not isinstance(answer, dict):
        raise ClientError(f"REST: no 'outputs' in the answer: {str(answer)[:300]}")
    outputs = answer.get("outputs")
    if outputs is None:
        raise ClientError(f"REST: no 'outputs' in the answer: {str(answer)[:300]}")
    if not isinstance(outputs, dict):  # a single-output signature answers the bare value
        outputs = {"output": outputs}
    return outputs


def text_inputs(text=(), text_pair=(), question=(), context=()) -> dict:
    """The text signature's inputs from the flag values (UTF-8 bytes)."""
    import numpy as np

    def arr(values):
        return np.array([v.encode("utf-8") if isinstance(v, str) else v for v in values],
                        dtype=object)

    if question or context:
        if len(question) != len(context) or not question:
            raise ClientError("give as many --question as --context")
        return {"question": arr(question), "context": arr(context)}
    if not text:
        raise ClientError("give --text (or --question and --context)")
    inputs = {"text": arr(text)}
    if text_pair:
        if len(text_pair) != len(text):
            raise ClientError("give as many --text_pair as --text")
        inputs["text_pair"] = arr(text_pair)
    return inputs


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if not FLAGS.model_name:
        raise app.UsageError("--model_name is required")
    try:
        inputs = text_inputs(FLAGS.text, FLAGS.text_pair, FLAGS.question, FLAGS.context)
        call = predict_rest if FLAGS.rest else predict_grpc
        outputs = call(FLAGS.server, FLAGS.model_name, inputs, FLAGS.signature_name,
                       FLAGS.model_version, FLAGS.timeout)
    except ClientError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    json.dump({"outputs": {k: _to_python(v) for k, v in sorted(outputs.items())}}, sys.stdout,
              ensure_ascii=False)
    print()


if __name__ == "__main__":
    define_flags()
    app.run(main)
